/* advisor_internal.h - shared between the files of the strategy advisor
 * (ml_advisor.h); never included from another folder.
 *
 * The advisor is three files, one per stage:
 *   advisor_groups.c  pass 1's observer: each group's (site's) statistics;
 *   advisor_rules.c   the rules on those statistics (candidates), the what-if
 *                     allocators that price them, and the decisions: which
 *                     suggestions are made, with their messages and evidence;
 *   advisor.c         the driver: the two replays, in order, and the result.
 */
#ifndef ML_ADVISOR_INTERNAL_H
#define ML_ADVISOR_INTERNAL_H

#include "ml_advisor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The general allocator of the what-ifs: segregated fit, glibc's design. */
#define ML__ADV_BASELINE "segregated_fit"
#define ML__ADV_DENSE_STACKS (1u << 22) /* stacks in ml__adv_t.sgi (16 MiB at most) */
#define ML__ADV_TOP_SIZES 8     /* sizes counted per group; the rest are "other" */
#define ML__ADV_MAX_CANDIDATES 24

/* ------------------------------------------------------------------------- */
/* Groups (advisor_groups.c)                                                 */
/* ------------------------------------------------------------------------- */

/* The summary of one group: the analysis' function when one is given, else
 * a recorded stack. */
typedef struct {
    uint32_t key;   /* site id or stack id */
    uint32_t stack; /* the first stack seen */
    uint64_t calls, bytes, frees, temps, temp_max, reallocs;
    uint64_t churn_frees, pending_frees; /* frees followed by another allocation of the site */
    uint64_t live, live_bytes, max_live_bytes, max_live;
    uint64_t min_size, max_size;
    uint64_t size[ML__ADV_TOP_SIZES], size_calls[ML__ADV_TOP_SIZES];
    uint32_t nsizes;
    uint64_t other_size_calls;
    uint64_t pow2_calls, pow2_example;
    uint64_t life_hist[64]; /* freed blocks by log2(lifetime in allocations + 1) */
    uint64_t life_ms_sum, life_ms_max;
    /* batches */
    uint64_t gen_blocks, gens, pure_gens, pure_blocks;
    bool gen_draining, gen_impure;
    /* realloc chains */
    uint64_t chains, chain_steps, chain_max, chain_copy, small_growth, growth_sum;
} ml__adv_group_t;

typedef struct {
    uint32_t chain;
    uint32_t thread; /* + 1 */
    uint64_t old_size;
    uint64_t old_ptr; /* the recorded address of the old block (0: unknown) */
} ml__adv_chain_stash_t;

typedef struct {
    uint32_t stack; /* + 1; 0 = empty */
    uint32_t gi;
} ml__adv_smap_t;

/* Pass 1's per-block state, side by side: the five tables it was in cost
 * a cache line each on every free of a block allocated long before. */
typedef struct {
    uint64_t seq;  /* allocations before this one */
    uint32_t group, chain, ms;
    uint8_t live;
} ml__adv_id_t;

/* Pass 1's state: the groups, the maps from stacks and keys to groups, and
 * what each live block of the replay needs until it is freed. */
typedef struct {
    const ml_advisor_opts_t *o;
    ml__adv_group_t *g;
    uint32_t ng, capg;
    ml__adv_smap_t *sm; /* stack -> group */
    uint64_t smcap, smused;
    /* the same for stacks below ML__ADV_DENSE_STACKS, as a table: group + 1,
     * 0 for a stack in no group (every stack of sm below nsgi is in it) */
    uint32_t *sgi;
    uint32_t nsgi;
    bool sgi_off; /* the table could not grow: sm alone */
    ml__adv_smap_t *km; /* key -> group */
    uint64_t kmcap, kmused;
    /* per driver id */
    ml__adv_id_t *id; /* one entry an id: a free reads them all */
    uint32_t reserve_ids; /* ids to make room for at the first batch observed (0: none) */
    uint32_t idcap;
    ml__adv_chain_stash_t stash[1024];
    uint64_t seq; /* allocations so far */
    uint64_t threads_mask;
    uint32_t *site_key; /* analysis site -> group key */
    uint32_t nsites;
    /* pass 1's baseline footprint, op by op (NULL: none), which pass 2's
     * separate_lifetimes routers read instead of running a copy */
    ml_sim_fpseries_t *base_series;
    bool oom;
} ml__adv_t;

/** Groups by the function that called the allocator (needs o->analysis).
 * Returns 0 or -ENOMEM. */
int ml__adv_build_site_keys(ml__adv_t *A);
/** Makes room for `ids` block ids in pass 1's per-block table at once (a
 * hint, as ml_sim_replay_reserve), when the observer sees its first batch:
 * on a replay's worker, in parallel with the reading thread, which made it
 * alone before the workers started (6 MiB for cppcheck's trace, zeroed by
 * the kernel page by page). Returns 0. */
int ml__adv_observe_reserve(ml__adv_t *A, uint32_t ids);
/** Pass 1's observer (ml_sim_replay_observe): sets A->oom when memory runs out. */
void ml__adv_observe(void *ctx, const ml_sim_op_t *ops, size_t n);
/** After pass 1: closes the realloc chains of the blocks still live and
 * sorts each group's sizes, most frequent first. */
void ml__adv_observe_end(ml__adv_t *A);
/** Read-only group of a stack, safe from the replay's worker threads in
 * pass 2; UINT32_MAX when the stack was never seen. */
uint32_t ml__adv_group_lookup(const ml__adv_t *A, uint32_t stack);
/** The site of the group with the most calls, and up to `max` of its sites. */
int64_t ml__adv_group_sites(const ml__adv_t *A, uint32_t key, uint32_t *out, size_t max, size_t *n);
/** Blocks of the group that lived at least `min_life` allocations, or to the end. */
uint64_t ml__adv_lived_at_least(const ml__adv_group_t *g, uint64_t min_life);
/** Upper bound of the lifetime (in allocations) below which `q` of the freed blocks died. */
uint64_t ml__adv_life_quantile(const ml__adv_group_t *g, double q);
/** Calls of the `k` most frequent sizes. */
uint64_t ml__adv_top_calls(const ml__adv_group_t *g, uint32_t k);
void ml__adv_state_free(ml__adv_t *A);

/* ------------------------------------------------------------------------- */
/* The result                                                                */
/* ------------------------------------------------------------------------- */

struct ml_advice_s {
    ml_suggestion_t *s;
    size_t n, cap;
    ml_sim_metrics_t pol[16];
    size_t npol;
    bool sampled;
    uint64_t ops;
    double seconds;
    char skipped[4][320]; /* ml_advice_skipped */
    size_t nskipped;
    bool from_cache;          /* read back from the trace (advice_cache.c) */
    char (*strategies)[32];   /* read back: s[i].strategy points into strategies[i] */
};

/* ------------------------------------------------------------------------- */
/* The saved advice (advice_cache.c)                                         */
/* ------------------------------------------------------------------------- */

/* The layout of the saved advice block (its header's version field). */
#define ML_ADVICE_BLOCK_VERSION 1

/* The most suggestions a result holds (advisor.c keeps the first ones):
 * saved advice that claims more is refused as damaged (advice_cache.c). */
#define ML__ADV_MAX_SUGGESTIONS 20

/** The key the advice of a trace whose records have `records_hash` is
 * saved under, for these options (and o->analysis' sites). */
uint64_t ml__advice_key(uint64_t records_hash, const ml_advisor_opts_t *o);
/** The advice as bytes (malloc'd), and back. Decoding checks everything and
 * returns -EINVAL with a reason in err for damaged bytes. */
int ml__advice_encode(const ml_advice_t *adv, void **out, size_t *len);
int ml__advice_decode(const void *data, size_t len, ml_advice_t **out, char *err, size_t errlen);

/** A new, zeroed suggestion (device and site -1) at the end of the list, or
 * NULL when memory runs out. */
ml_suggestion_t *ml__advice_add(ml_advice_t *adv);
/** The metrics of the policy called `name` in the comparison table, or NULL. */
const ml_sim_metrics_t *ml__advice_policy(const ml_advice_t *adv, const char *name);

/* ------------------------------------------------------------------------- */
/* Rules and decisions (advisor_rules.c)                                     */
/* ------------------------------------------------------------------------- */

typedef enum {
    ML__ADV_POOL,
    ML__ADV_SLAB,
    ML__ADV_ARENA,
    ML__ADV_REUSE,
    ML__ADV_STACK,
    ML__ADV_GROWTH,
    ML__ADV_SEPARATE,
    ML__ADV_POW2_BUDDY,
    ML__ADV_POW2_SEG,
} ml__adv_kind_t;

/* A what-if to price in pass 2: one group's ops routed to a dedicated allocator. */
typedef struct {
    ml__adv_kind_t kind;
    uint32_t gi;
    const ml__adv_t *A;
    ml_sim_policy_t *router; /* owned by the pass-2 replay */
    ml_sim_policy_t *inner;  /* the growth wrapper, for its counters */
    char name[48];
    uint64_t priority;
    int pair; /* ML__ADV_POW2_BUDDY: index of its ML__ADV_POW2_SEG twin */
} ml__adv_cand_t;

/** The thresholds that depend on the whole trace: a footprint saving worth
 * suggesting, and the lifetime (in allocations) that counts as long. */
uint64_t ml__adv_min_saving(uint64_t baseline_peak);
uint64_t ml__adv_long_life(const ml__adv_t *A);
/** The candidates (at most ML__ADV_MAX_CANDIDATES), most important groups
 * first. Returns how many, or -ENOMEM. */
int ml__adv_candidates(const ml__adv_t *A, uint64_t long_life, ml__adv_cand_t *cands);
/** The router policy that prices candidate `c`. Returns 0 or a negative errno. */
int ml__adv_make_router(ml__adv_cand_t *c, const ml__adv_group_t *g, const ml_sim_fpseries_t *base_series);
/** Adds the suggestion of candidate `i` after pass 2, when its evidence holds.
 * A candidate without a router (the statistics pass, or a what-if the
 * budget left out: base_peak and min_saving 0) gives the suggestions whose evidence is counts, with no
 * saving and no simulation; the other kinds give none. */
void ml__adv_decide(ml_advice_t *adv, const ml__adv_t *A, ml__adv_cand_t *cands, size_t i, uint64_t base_peak,
                    uint64_t min_saving, uint64_t long_life);
/** Keeps one footprint strategy (pool, slab, arena) per site, the best. */
void ml__adv_dedupe(ml_advice_t *adv);
/** allocator_tuning: the real allocator against the best simulated design. */
void ml__adv_decide_tuning(ml_advice_t *adv, const ml__adv_t *A);
/** Most valuable first: saving, then calls. */
void ml__adv_sort(ml_advice_t *adv);

#endif
