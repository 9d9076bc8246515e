/* advisor.c - the strategy advisor (ml_advisor.h, docs/strategies.md).
 *
 * Pass 1 replays the trace through every policy and, in the same stream of
 * ops, summarises each site (a group: the analysis' site when one is given,
 * else the recorded stack):
 *   - calls, bytes, the most frequent sizes, sizes just above a power of two;
 *   - lifetimes in allocations (a logical clock: the number of allocations
 *     made between a block's allocation and its free) and in milliseconds;
 *   - temporaries (freed before any other allocation, heaptrack's rule);
 *   - realloc chains: how many times one block was grown by realloc, by how
 *     much per step, and the bytes a moving realloc copies;
 *   - batches ("generations"): the site's live count goes up from zero and
 *     back to zero without an allocation between its first and last free.
 * Rules on these pick candidate sites; pass 2 prices each candidate with a
 * router policy (ml_sim_router_new): the site's ops go to a dedicated
 * allocator, the rest to a fresh baseline, and the router's peak footprint is
 * compared with the baseline's peak from pass 1 (same ops, same
 * deterministic simulator, so the difference is the site's routing alone).
 */
#define _GNU_SOURCE
#include "ml_advisor.h"
#include "ml_gpu.h"
#include "ml_options.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------- */
/* Thresholds (docs/strategies.md, "When a suggestion is made")              */
/* ------------------------------------------------------------------------- */

#define HOT_CALLS 10000          /* slab/pool: a hot site */
#define CHURN_FRACTION 0.10      /* ... that frees as it goes (frees followed by more of its allocations) */
#define FEW_SIZES_COVER 0.95     /* pool: one size, slab: <= 4 sizes cover this share of calls */
#define TEMP_MIN 1000            /* reuse_buffer/stack: temporaries */
#define TEMP_FRACTION 0.50       /* ... as a share of the site's calls */
#define STACK_MAX_BYTES 4096     /* small enough for a local array */
#define CHAIN_MIN_STEPS 256      /* reserve_capacity: reallocs in chains */
#define CHAIN_MIN_LONGEST 16     /* ... one chain at least this long */
#define SMALL_GROWTH_FRACTION 0.5 /* ... most steps grow by little */
#define BATCH_MIN_GENERATIONS 2  /* arena: batches that die together */
#define BATCH_MIN_BLOCKS 16      /* ... of this many blocks on average */
#define BATCH_PURE_FRACTION 0.8  /* ... holding this share of the calls */
#define LONG_FRACTION 0.8        /* separate_lifetimes: blocks of the site that live long */
#define LONG_MAX_SIZE 4096       /* ... and are small */
#define LONG_MIN_CALLS 256
#define PINNED_MIN_PAGES 16      /* ... pinning at least this many pages */
#define POW2_FRACTION 0.5        /* segregated_fit: requests just above a power of two */
#define MIN_SAVING_PAGES 4       /* footprint suggestions: at least 4 pages ... */
#define MIN_SAVING_SHARE 0.01    /* ... and 1 % of the baseline's peak */
#define TUNING_MIN_BYTES (1u << 20) /* allocator_tuning: at least 1 MiB ... */
#define TUNING_SHARE 0.10        /* ... and 10 % of the real allocator's peak */
#define MAX_CANDIDATES 24
#define MAX_SUGGESTIONS 20
#define TOP_SIZES 8

static const char *const BASELINE = "segregated_fit";

/* ------------------------------------------------------------------------- */
/* Per-group summaries                                                        */
/* ------------------------------------------------------------------------- */

typedef struct {
    uint32_t key;   /* site id or stack id */
    uint32_t stack; /* the first stack seen */
    uint64_t calls, bytes, frees, temps, temp_max, reallocs;
    uint64_t churn_frees, pending_frees; /* frees followed by another allocation of the site */
    uint64_t live, live_bytes, max_live_bytes, max_live;
    uint64_t min_size, max_size;
    uint64_t size[TOP_SIZES], size_calls[TOP_SIZES];
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
    uint64_t long_lived; /* computed after pass 1 */
} group_t;

typedef struct {
    uint32_t chain;
    uint32_t thread; /* + 1 */
    uint64_t old_size;
} chain_stash_t;

typedef struct {
    uint32_t stack; /* + 1; 0 = empty */
    uint32_t gi;
} smap_t;

typedef struct {
    const ml_advisor_opts_t *o;
    group_t *g;
    uint32_t ng, capg;
    smap_t *sm; /* stack -> group */
    uint64_t smcap, smused;
    smap_t *km; /* key -> group */
    uint64_t kmcap, kmused;
    /* per driver id */
    uint32_t *id_group, *id_chain, *id_ms;
    uint64_t *id_seq;
    uint8_t *id_live;
    uint32_t idcap;
    chain_stash_t stash[1024];
    uint64_t seq; /* allocations so far */
    uint64_t threads_mask;
    uint32_t *site_key; /* analysis site -> group key */
    uint32_t nsites;
    bool oom;
} adv_t;

static inline uint64_t hash32(uint32_t k) {
    uint64_t x = (uint64_t)k * 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 31);
}

static smap_t *smap_slot(smap_t *m, uint64_t cap, uint32_t key) {
    uint64_t i = hash32(key) & (cap - 1);
    while (m[i].stack && m[i].stack != key + 1) i = (i + 1) & (cap - 1);
    return &m[i];
}

static int smap_grow(smap_t **m, uint64_t *cap) {
    uint64_t ncap = *cap ? *cap * 2 : 1024;
    smap_t *n = calloc(ncap, sizeof *n);
    if (!n) return -ENOMEM;
    for (uint64_t i = 0; i < *cap; i++)
        if ((*m)[i].stack) *smap_slot(n, ncap, (*m)[i].stack - 1) = (*m)[i];
    free(*m);
    *m = n;
    *cap = ncap;
    return 0;
}

/* The key of a stack. With an analysis: the function that called the
 * allocator (frames[0] of the stack's site), because that is where the code
 * changes, and one function reached from several call paths is several sites
 * but one allocation pattern. Without one: the stack itself. */
static uint32_t key_of_stack(const adv_t *A, uint32_t stack) {
    if (!A->o->analysis) return stack;
    uint32_t site = ml_analysis_node_site(A->o->analysis, stack);
    if (site == UINT32_MAX || site >= A->nsites) return UINT32_MAX - 1; /* not in the build */
    return A->site_key[site];
}

static int cmp_name(const void *x, const void *y) {
    const char *const *a = x, *const *b = y;
    return strcmp(*a, *b);
}

static const char *site_function_name(const ml_site_t *s) {
    return s->nframes && s->frames[0].function ? s->frames[0].function : "";
}

/* site -> key: sites whose frames[0] names the same function share a key
 * (the index of the name in a sorted table). */
static int build_site_keys(adv_t *A) {
    size_t n = 0;
    const ml_site_t *s = ml_analysis_sites(A->o->analysis, &n);
    A->nsites = (uint32_t)n;
    if (!n) return 0;
    const char **names = malloc(n * sizeof *names);
    A->site_key = malloc(n * sizeof *A->site_key);
    if (!names || !A->site_key) {
        free(names);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) names[i] = site_function_name(&s[i]);
    if (n) qsort(names, n, sizeof *names, cmp_name);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || strcmp(names[u - 1], names[i])) names[u++] = names[i];
    for (size_t i = 0; i < n; i++) {
        const char *key = site_function_name(&s[i]);
        const char **hit = bsearch(&key, names, u, sizeof *names, cmp_name);
        A->site_key[i] = hit ? (uint32_t)(hit - names) : UINT32_MAX - 1;
    }
    free(names);
    return 0;
}

/* The site of the group with the most calls (the suggestion's "site"), and
 * up to `max` of its sites. */
static int64_t group_sites(const adv_t *A, uint32_t key, uint32_t *out, size_t max, size_t *n) {
    size_t ns = 0;
    const ml_site_t *s = ml_analysis_sites(A->o->analysis, &ns);
    int64_t best = -1;
    uint64_t best_calls = 0;
    *n = 0;
    for (size_t i = 0; i < ns && i < A->nsites; i++) {
        if (A->site_key[i] != key) continue;
        if (*n < max) out[(*n)++] = (uint32_t)i;
        if (best < 0 || s[i].alloc_calls > best_calls) {
            best = (int64_t)i;
            best_calls = s[i].alloc_calls;
        }
    }
    return best;
}

static int group_of(adv_t *A, uint32_t stack, uint32_t *gi) {
    if ((A->smused + 1) * 4 > A->smcap * 3 && smap_grow(&A->sm, &A->smcap) < 0) return -ENOMEM;
    smap_t *s = smap_slot(A->sm, A->smcap, stack);
    if (s->stack) {
        *gi = s->gi;
        return 0;
    }
    uint32_t key = key_of_stack(A, stack);
    if ((A->kmused + 1) * 4 > A->kmcap * 3 && smap_grow(&A->km, &A->kmcap) < 0) return -ENOMEM;
    smap_t *k = smap_slot(A->km, A->kmcap, key);
    if (!k->stack) {
        if (A->ng == A->capg) {
            uint32_t ncap = A->capg ? A->capg * 2 : 256;
            group_t *n = realloc(A->g, (size_t)ncap * sizeof *n);
            if (!n) return -ENOMEM;
            A->g = n;
            A->capg = ncap;
        }
        group_t *g = &A->g[A->ng];
        memset(g, 0, sizeof *g);
        g->key = key;
        g->stack = stack;
        g->min_size = UINT64_MAX;
        k->stack = key + 1;
        k->gi = A->ng++;
        A->kmused++;
    }
    s = smap_slot(A->sm, A->smcap, stack); /* the key map may not move this one, but be plain */
    s->stack = stack + 1;
    s->gi = k->gi;
    A->smused++;
    *gi = k->gi;
    return 0;
}

/* Read-only lookup, safe from the replay's worker threads in pass 2. */
static uint32_t group_lookup(const adv_t *A, uint32_t stack) {
    if (!A->smcap) return UINT32_MAX;
    uint64_t i = hash32(stack) & (A->smcap - 1);
    while (A->sm[i].stack) {
        if (A->sm[i].stack == stack + 1) return A->sm[i].gi;
        i = (i + 1) & (A->smcap - 1);
    }
    return UINT32_MAX;
}

static int grow_arr(void **arr, uint32_t *cap, uint32_t id, size_t elem) {
    if (id < *cap) return 0;
    uint64_t ncap = *cap ? (uint64_t)*cap * 2 : 1024;
    while (ncap <= id) ncap *= 2;
    void *n = realloc(*arr, ncap * elem);
    if (!n) return -ENOMEM;
    memset((char *)n + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *arr = n;
    *cap = (uint32_t)ncap;
    return 0;
}

static int grow_ids(adv_t *A, uint32_t id) {
    if (id < A->idcap) return 0;
    uint32_t c;
    c = A->idcap;
    if (grow_arr((void **)&A->id_group, &c, id, 4) < 0) return -ENOMEM;
    c = A->idcap;
    if (grow_arr((void **)&A->id_chain, &c, id, 4) < 0) return -ENOMEM;
    c = A->idcap;
    if (grow_arr((void **)&A->id_ms, &c, id, 4) < 0) return -ENOMEM;
    c = A->idcap;
    if (grow_arr((void **)&A->id_seq, &c, id, 8) < 0) return -ENOMEM;
    c = A->idcap;
    if (grow_arr((void **)&A->id_live, &c, id, 1) < 0) return -ENOMEM;
    A->idcap = c;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Pass 1: the summaries                                                      */
/* ------------------------------------------------------------------------- */

static bool just_over_pow2(uint64_t s) {
    if (s < 33) return false;
    uint64_t p = (uint64_t)1 << (63 - __builtin_clzll(s));
    return p != s && s - p <= p / 8;
}

static void note_size(group_t *g, uint64_t size) {
    for (uint32_t i = 0; i < g->nsizes; i++) {
        if (g->size[i] == size) {
            g->size_calls[i]++;
            return;
        }
    }
    if (g->nsizes < TOP_SIZES) {
        g->size[g->nsizes] = size;
        g->size_calls[g->nsizes++] = 1;
    } else {
        g->other_size_calls++;
    }
}

static void chain_end(adv_t *A, uint32_t id) {
    uint32_t ch = A->id_chain[id];
    if (!ch) return;
    group_t *g = &A->g[A->id_group[id]];
    g->chains++;
    if (ch > g->chain_max) g->chain_max = ch;
}

static void observe(void *ctx, const ml_sim_op_t *ops, size_t n) {
    adv_t *A = ctx;
    for (size_t i = 0; i < n && !A->oom; i++) {
        const ml_sim_op_t *op = &ops[i];
        uint32_t id = op->id, gi;
        chain_stash_t *st = &A->stash[op->thread % 1024];
        if (op->type == ML_SIM_ALLOC) {
            if (grow_ids(A, id) < 0 || group_of(A, op->site, &gi) < 0) {
                A->oom = true;
                return;
            }
            group_t *g = &A->g[gi];
            uint64_t size = op->size;
            g->calls++;
            g->bytes += size;
            if (size < g->min_size) g->min_size = size;
            if (size > g->max_size) g->max_size = size;
            note_size(g, size);
            if (just_over_pow2(size)) {
                g->pow2_calls++;
                g->pow2_example = size;
            }
            if (op->flags & ML_SIM_F_TEMPORARY) {
                g->temps++;
                if (size > g->temp_max) g->temp_max = size;
            }
            if (g->gen_draining) { /* an allocation while the batch drains */
                g->gen_impure = true;
                g->gen_draining = false;
            }
            g->gen_blocks++;
            g->churn_frees += g->pending_frees;
            g->pending_frees = 0;
            g->live++;
            g->live_bytes += size;
            if (g->live_bytes > g->max_live_bytes) g->max_live_bytes = g->live_bytes;
            if (g->live > g->max_live) g->max_live = g->live;
            uint32_t chain = 0;
            if (op->flags & ML_SIM_F_REALLOC) {
                g->reallocs++;
                if (st->thread == op->thread + 1u) {
                    chain = st->chain + 1;
                    g->chain_steps++;
                    g->chain_copy += st->old_size;
                    if (size > st->old_size) {
                        uint64_t d = size - st->old_size, small = st->old_size / 8 > 64 ? st->old_size / 8 : 64;
                        g->growth_sum += d;
                        if (d <= small) g->small_growth++;
                    }
                }
            }
            st->thread = 0;
            A->id_group[id] = gi;
            A->id_chain[id] = chain;
            A->id_seq[id] = A->seq++;
            A->id_ms[id] = op->time_ms;
            A->id_live[id] = 1;
            A->threads_mask |= 1ull << (op->thread < 63 ? op->thread : 63);
        } else if (op->type == ML_SIM_FREE) {
            if (id >= A->idcap || !A->id_live[id]) continue;
            group_t *g = &A->g[A->id_group[id]];
            uint64_t life = A->seq - A->id_seq[id];
            g->life_hist[63 - __builtin_clzll(life + 1)]++;
            uint64_t ms = op->time_ms >= A->id_ms[id] ? op->time_ms - A->id_ms[id] : 0;
            g->life_ms_sum += ms;
            if (ms > g->life_ms_max) g->life_ms_max = ms;
            g->frees++;
            g->pending_frees++;
            g->live--;
            g->live_bytes -= op->size;
            g->gen_draining = true;
            if (g->live == 0) {
                g->gens++;
                if (!g->gen_impure && g->gen_blocks >= 2) {
                    g->pure_gens++;
                    g->pure_blocks += g->gen_blocks;
                }
                g->gen_blocks = 0;
                g->gen_impure = g->gen_draining = false;
            }
            if (op->flags & ML_SIM_F_REALLOC) {
                *st = (chain_stash_t){.chain = A->id_chain[id], .thread = op->thread + 1u, .old_size = op->size};
            } else {
                chain_end(A, id);
            }
            A->id_live[id] = 0;
        }
    }
}

/* Blocks of the group that lived at least `min_life` allocations, or to the end. */
static uint64_t lived_at_least(const group_t *g, uint64_t min_life) {
    unsigned b0 = 63 - (unsigned)__builtin_clzll(min_life + 1);
    uint64_t n = g->live;
    for (unsigned b = b0; b < 64; b++) n += g->life_hist[b];
    return n;
}

/* Sizes by calls, most frequent first. */
static void sort_sizes(group_t *g) {
    for (uint32_t i = 1; i < g->nsizes; i++) {
        uint64_t s = g->size[i], c = g->size_calls[i];
        uint32_t j = i;
        while (j > 0 && g->size_calls[j - 1] < c) {
            g->size[j] = g->size[j - 1];
            g->size_calls[j] = g->size_calls[j - 1];
            j--;
        }
        g->size[j] = s;
        g->size_calls[j] = c;
    }
}

static uint64_t top_calls(const group_t *g, uint32_t k) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < k && i < g->nsizes; i++) n += g->size_calls[i];
    return n;
}

/* ------------------------------------------------------------------------- */
/* Candidates and what-ifs                                                    */
/* ------------------------------------------------------------------------- */

typedef enum {
    K_POOL,
    K_SLAB,
    K_ARENA,
    K_REUSE,
    K_STACK,
    K_GROWTH,
    K_SEPARATE,
    K_POW2_BUDDY,
    K_POW2_SEG,
} kind_t;

typedef struct {
    kind_t kind;
    uint32_t gi;
    const adv_t *A;
    ml_sim_policy_t *router; /* owned by the pass-2 replay */
    ml_sim_policy_t *inner;  /* the growth wrapper, for its counters */
    char name[48];
    uint64_t priority;
    int pair; /* K_POW2_BUDDY: index of its K_POW2_SEG twin */
} cand_t;

static bool route_group(void *ctx, const ml_sim_op_t *op) {
    const cand_t *c = ctx;
    return group_lookup(c->A, op->site) == c->gi;
}

static bool route_temporaries(void *ctx, const ml_sim_op_t *op) {
    const cand_t *c = ctx;
    return (op->flags & ML_SIM_F_TEMPORARY) && group_lookup(c->A, op->site) == c->gi;
}

static int make_router(cand_t *c, const group_t *g) {
    ml_sim_policy_t *gen = NULL, *ded = NULL, *cmp = NULL;
    int rc = ml_sim_policy_new(BASELINE, NULL, &gen);
    if (rc < 0) return rc;
    ml_sim_route_fn route = route_group;
    switch (c->kind) {
    case K_POOL:
        rc = ml_sim_pool_new(NULL, g->size[0], &ded);
        snprintf(c->name, sizeof c->name, "pool(%lu)", (unsigned long)((g->size[0] + 7) & ~7ull));
        break;
    case K_SLAB: {
        uint64_t cls[4];
        uint32_t n = 0;
        for (uint32_t i = 0; i < 4 && i < g->nsizes; i++) cls[n++] = (g->size[i] + 7) & ~7ull;
        for (uint32_t i = 1; i < n; i++) /* ascending, unique */
            for (uint32_t j = i; j > 0 && cls[j - 1] > cls[j]; j--) {
                uint64_t t = cls[j];
                cls[j] = cls[j - 1];
                cls[j - 1] = t;
            }
        uint32_t u = 0;
        for (uint32_t i = 0; i < n; i++)
            if (!u || cls[u - 1] != cls[i]) cls[u++] = cls[i];
        rc = ml_sim_slab_new_classes(NULL, cls, u, &ded);
        snprintf(c->name, sizeof c->name, "slab(%u classes)", u);
        break;
    }
    case K_ARENA:
        rc = ml_sim_arena_new(NULL, true, &ded);
        snprintf(c->name, sizeof c->name, "arena");
        break;
    case K_REUSE:
    case K_STACK:
        rc = ml_sim_buffer_new(NULL, c->kind == K_STACK, &ded);
        route = route_temporaries;
        snprintf(c->name, sizeof c->name, "%s", c->kind == K_STACK ? "stack" : "reuse_buffer");
        break;
    case K_GROWTH: {
        ml_sim_policy_t *in = NULL;
        rc = ml_sim_policy_new(BASELINE, NULL, &in);
        if (rc == 0) rc = ml_sim_growth_new(in, 2.0, &ded);
        c->inner = ded;
        snprintf(c->name, sizeof c->name, "reserve_capacity(x2)");
        break;
    }
    case K_SEPARATE:
        rc = ml_sim_policy_new(BASELINE, NULL, &ded);
        if (rc == 0) rc = ml_sim_policy_new(BASELINE, NULL, &cmp);
        snprintf(c->name, sizeof c->name, "own %s heap", BASELINE);
        break;
    case K_POW2_BUDDY:
        rc = ml_sim_buddy_new(NULL, &ded);
        snprintf(c->name, sizeof c->name, "buddy");
        break;
    case K_POW2_SEG:
        rc = ml_sim_policy_new(BASELINE, NULL, &ded);
        snprintf(c->name, sizeof c->name, "own %s heap", BASELINE);
        break;
    }
    if (rc < 0) {
        ml_sim_policy_free(gen);
        ml_sim_policy_free(ded);
        ml_sim_policy_free(cmp);
        return rc;
    }
    return ml_sim_router_new(c->name, route, c, gen, ded, cmp, &c->router);
}

/* ------------------------------------------------------------------------- */
/* Evidence (JSON) and messages                                               */
/* ------------------------------------------------------------------------- */

typedef struct {
    char *b;
    size_t cap, len;
    bool first;
} jb_t;

static void jb_raw(jb_t *j, const char *fmt, ...) {
    if (j->len >= j->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->b + j->len, j->cap - j->len, fmt, ap);
    va_end(ap);
    if (n > 0) j->len += (size_t)n < j->cap - j->len ? (size_t)n : j->cap - j->len - 1;
}

static void jb_escaped(jb_t *j, const char *s) {
    jb_raw(j, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') jb_raw(j, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) jb_raw(j, "\\u%04x", c);
        else jb_raw(j, "%c", c);
    }
    jb_raw(j, "\"");
}

static void jb_key(jb_t *j, const char *k) {
    if (!j->first) jb_raw(j, ", ");
    j->first = false;
    jb_raw(j, "\"%s\": ", k);
}

static void jb_u(jb_t *j, const char *k, uint64_t v) {
    jb_key(j, k);
    jb_raw(j, "%llu", (unsigned long long)v);
}

static void jb_f(jb_t *j, const char *k, double v) {
    jb_key(j, k);
    if (isfinite(v)) jb_raw(j, "%.4g", v);
    else jb_raw(j, "null");
}

static void jb_s(jb_t *j, const char *k, const char *v) {
    jb_key(j, k);
    jb_escaped(j, v);
}

static void jb_open(jb_t *j, const char *k) {
    jb_key(j, k);
    jb_raw(j, "{");
    j->first = true;
}

static void jb_close(jb_t *j) {
    jb_raw(j, "}");
    j->first = false;
}

void ml_advisor_json_string(FILE *out, const char *s) {
    char buf[4096];
    jb_t j = {buf, sizeof buf, 0, true};
    jb_escaped(&j, s);
    fputs(buf, out);
}

struct ml_advice_s {
    ml_suggestion_t *s;
    size_t n, cap;
    ml_sim_metrics_t pol[16];
    size_t npol;
    bool sampled;
    uint64_t ops;
    double seconds;
};

static ml_suggestion_t *add_suggestion(ml_advice_t *adv) {
    if (adv->n == adv->cap) {
        size_t ncap = adv->cap ? adv->cap * 2 : 16;
        ml_suggestion_t *n = realloc(adv->s, ncap * sizeof *n);
        if (!n) return NULL;
        adv->s = n;
        adv->cap = ncap;
    }
    ml_suggestion_t *s = &adv->s[adv->n++];
    memset(s, 0, sizeof *s);
    s->device = -1;
    s->site = -1;
    return s;
}

static void site_name(const adv_t *A, const group_t *g, char *buf, size_t len) {
    const ml_analysis_t *a = A->o->analysis;
    if (a && g->key < UINT32_MAX - 1) {
        size_t n = 0, nsite = 0;
        uint32_t ids[1];
        const ml_site_t *s = ml_analysis_sites(a, &n);
        int64_t best = group_sites(A, g->key, ids, 1, &nsite);
        if (best >= 0 && (size_t)best < n && s[best].nframes) {
            const ml_frame_t *f = &s[best].frames[0];
            const char *fn = f->function ? f->function : "?";
            const char *paren = fn[0] == '[' ? "" : "()";
            if (f->file && f->line) {
                const char *base = strrchr(f->file, '/');
                snprintf(buf, len, "%s%s (%s:%u)", fn, paren, base ? base + 1 : f->file, f->line);
            } else {
                snprintf(buf, len, "%s%s", fn, paren);
            }
            return;
        }
    }
    snprintf(buf, len, "the allocation site with stack #%u", g->stack);
}

/* Upper bound of the lifetime (in allocations) below which `q` of the freed blocks died. */
static uint64_t life_quantile(const group_t *g, double q) {
    uint64_t total = 0, acc = 0;
    for (int b = 0; b < 64; b++) total += g->life_hist[b];
    if (!total) return 0;
    for (int b = 0; b < 64; b++) {
        acc += g->life_hist[b];
        if ((double)acc >= q * (double)total) return b >= 63 ? UINT64_MAX : ((uint64_t)2 << b) - 1;
    }
    return UINT64_MAX;
}

static void evidence_common(jb_t *j, const adv_t *A, const group_t *g, uint64_t long_life) {
    jb_u(j, "calls", g->calls);
    jb_u(j, "bytes_allocated", g->bytes);
    jb_u(j, "frees", g->frees);
    jb_u(j, "stack", g->stack);
    jb_u(j, "max_live_bytes", g->max_live_bytes);
    jb_u(j, "max_live_blocks", g->max_live);
    jb_open(j, "sizes");
    jb_u(j, "min", g->calls ? g->min_size : 0);
    jb_u(j, "max", g->max_size);
    jb_u(j, "distinct", g->nsizes);
    jb_key(j, "more_distinct");
    jb_raw(j, "%s", g->other_size_calls ? "true" : "false");
    jb_key(j, "top");
    jb_raw(j, "[");
    for (uint32_t i = 0; i < g->nsizes && i < 4; i++)
        jb_raw(j, "%s{\"size\": %llu, \"calls\": %llu}", i ? ", " : "", (unsigned long long)g->size[i],
               (unsigned long long)g->size_calls[i]);
    jb_raw(j, "]");
    jb_close(j);
    jb_open(j, "lifetimes");
    jb_u(j, "freed", g->frees);
    jb_u(j, "live_at_end", g->live);
    jb_f(j, "mean_ms", g->frees ? (double)g->life_ms_sum / (double)g->frees : 0.0);
    jb_u(j, "max_ms", g->life_ms_max);
    jb_u(j, "median_allocations_at_most", life_quantile(g, 0.5));
    jb_u(j, "p90_allocations_at_most", life_quantile(g, 0.9));
    jb_f(j, "long_lived_fraction", g->calls ? (double)lived_at_least(g, long_life) / (double)g->calls : 0.0);
    jb_u(j, "long_lived_at_least_allocations", long_life);
    jb_close(j);
    (void)A;
}

static void evidence_sim(jb_t *j, const char *what_if, uint64_t base_peak, uint64_t what_if_peak) {
    jb_open(j, "simulation");
    jb_s(j, "baseline", BASELINE);
    jb_u(j, "baseline_peak_bytes", base_peak);
    jb_s(j, "what_if", what_if);
    jb_u(j, "what_if_peak_bytes", what_if_peak);
    jb_close(j);
}

static const char *fmtb(uint64_t b, char *buf) {
    return ml_fmt_bytes(b, buf, 32);
}

static const char *fmtn(uint64_t v, char *buf) {
    /* 1234567 -> "1,234,567" */
    char t[32];
    int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < n; i++) {
        buf[o++] = t[i];
        if ((n - i - 1) % 3 == 0 && i != n - 1) buf[o++] = ',';
    }
    buf[o] = 0;
    return buf;
}

/* ------------------------------------------------------------------------- */
/* The run                                                                    */
/* ------------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void adv_free_state(adv_t *A) {
    free(A->g);
    free(A->sm);
    free(A->km);
    free(A->id_group);
    free(A->id_chain);
    free(A->id_ms);
    free(A->id_seq);
    free(A->id_live);
    free(A->site_key);
}

static int add_candidate(cand_t *c, size_t *n, kind_t k, uint32_t gi, const adv_t *A) {
    if (*n >= MAX_CANDIDATES) return -1;
    c[*n] = (cand_t){.kind = k, .gi = gi, .A = A, .priority = A->g[gi].max_live_bytes + A->g[gi].calls,
                     .pair = -1};
    return (int)(*n)++;
}

typedef struct {
    uint32_t gi;
    uint64_t weight;
} rank_t;

static int cmp_rank(const void *x, const void *y) {
    const rank_t *a = x, *b = y;
    return a->weight < b->weight ? 1 : a->weight > b->weight ? -1 : 0;
}

static int cmp_suggestion(const void *x, const void *y) {
    const ml_suggestion_t *a = x, *b = y;
    if (a->estimated_saving_bytes != b->estimated_saving_bytes)
        return a->estimated_saving_bytes < b->estimated_saving_bytes ? 1 : -1;
    return a->calls < b->calls ? 1 : a->calls > b->calls ? -1 : 0;
}

static bool footprint_family(const char *s) {
    return !strcmp(s, "pool") || !strcmp(s, "slab") || !strcmp(s, "arena");
}

static const ml_sim_metrics_t *policy(const ml_advice_t *adv, const char *name) {
    for (size_t i = 0; i < adv->npol; i++)
        if (!strcmp(adv->pol[i].name, name)) return &adv->pol[i];
    return NULL;
}

/* Builds the suggestion of one evaluated candidate, or none. */
static void decide(ml_advice_t *adv, const adv_t *A, cand_t *cands, size_t i, uint64_t base_peak,
                   uint64_t min_saving, uint64_t long_life, uint32_t page) {
    cand_t *c = &cands[i];
    const group_t *g = &A->g[c->gi];
    ml_sim_metrics_t m;
    ml_sim_metrics(c->router, &m);
    uint64_t wpeak = m.peak_footprint;
    int64_t saving = (int64_t)base_peak - (int64_t)wpeak;
    uint64_t save = saving > 0 ? (uint64_t)saving : 0;
    char name[512], b1[32], b2[32], b3[32], n1[32], n2[32];
    site_name(A, g, name, sizeof name);
    const char *strategy = NULL;
    char msg[1024] = "";
    char extra[1024] = "";
    jb_t xj = {extra, sizeof extra, 0, true};
    uint64_t pinned = 0, steps = 0;

    switch (c->kind) {
    case K_POOL:
    case K_SLAB:
        if (save < min_saving) return;
        strategy = c->kind == K_POOL ? "pool" : "slab";
        if (c->kind == K_POOL)
            snprintf(msg, sizeof msg,
                     "%s allocates %s blocks of %llu bytes (up to %s live) and frees them as it goes. "
                     "Give them a fixed-size pool: keep freed %llu-byte objects on a free list and carve new "
                     "ones from page-sized slabs instead of calling malloc and free for each. Replaying the "
                     "trace, the heap then needs %s less at its peak (no per-block header, no mixing with "
                     "other sizes).",
                     name, fmtn(g->calls, n1), (unsigned long long)g->size[0], fmtn(g->max_live, n2),
                     (unsigned long long)g->size[0], fmtb(save, b1));
        else
            snprintf(msg, sizeof msg,
                     "%s allocates %s blocks in only %u sizes (up to %s live) and frees them as it goes. "
                     "Give each size its own slab of fixed-size slots (a slab cache per size) instead of "
                     "calling malloc and free for each: replaying the trace, the heap needs %s less at its "
                     "peak.",
                     name, fmtn(g->calls, n1), g->nsizes, fmtn(g->max_live, n2), fmtb(save, b1));
        break;
    case K_ARENA:
        if (saving < 0) return;
        strategy = "arena";
        snprintf(msg, sizeof msg,
                 "%s allocates its blocks in batches that are freed together (%llu batches of %llu blocks on "
                 "average). Allocate each batch from an arena (bump a pointer through a large chunk and "
                 "release the whole chunk when the batch is done) instead of one malloc and free per block: "
                 "%s calls to malloc and free go away%s%s.",
                 name, (unsigned long long)g->pure_gens,
                 (unsigned long long)(g->pure_gens ? g->pure_blocks / g->pure_gens : 0), fmtn(2 * g->pure_blocks, n1),
                 save ? " and the replayed peak drops by " : ", at no cost in peak memory",
                 save ? fmtb(save, b1) : "");
        jb_u(&xj, "batches", g->pure_gens);
        jb_u(&xj, "blocks_in_batches", g->pure_blocks);
        break;
    case K_REUSE:
    case K_STACK:
        /* The gain is calls; a buffer kept for good must not cost real memory. */
        if (saving < -(int64_t)min_saving) return;
        strategy = c->kind == K_STACK ? "stack" : "reuse_buffer";
        if (c->kind == K_STACK)
            snprintf(msg, sizeof msg,
                     "%s allocates a temporary block and frees it before anything else is allocated, %s "
                     "times (%.0f%% of its calls), never more than %llu bytes. Use a local array of %llu bytes "
                     "on the stack instead of malloc and free.",
                     name, fmtn(g->temps, n1), 100.0 * (double)g->temps / (double)g->calls,
                     (unsigned long long)g->temp_max, (unsigned long long)g->temp_max);
        else
            snprintf(msg, sizeof msg,
                     "%s allocates a temporary buffer and frees it before anything else is allocated, %s "
                     "times (%.0f%% of its calls), up to %s. Allocate one buffer once, outside the loop, and "
                     "reuse it (grow it when a larger one is needed) instead of malloc and free each time.",
                     name, fmtn(g->temps, n1), 100.0 * (double)g->temps / (double)g->calls,
                     fmtb(g->temp_max, b1));
        jb_u(&xj, "temporaries", g->temps);
        jb_f(&xj, "temporary_fraction", (double)g->temps / (double)g->calls);
        jb_u(&xj, "max_temporary_bytes", g->temp_max);
        jb_u(&xj, "calls_avoided", 2 * g->temps);
        break;
    case K_GROWTH: {
        uint64_t avoided = 0, avoided_bytes = 0, moves = 0;
        ml_sim_growth_stats(c->inner, &avoided, &avoided_bytes, &moves);
        if (avoided * 2 < g->chain_steps) return;
        strategy = "reserve_capacity";
        steps = g->chain_steps;
        snprintf(msg, sizeof msg,
                 "%s grows a buffer with realloc in small steps (%s reallocs in chains of up to %llu, +%s "
                 "per step on average; up to %s copied). Reserve the final size up front, or grow the "
                 "capacity geometrically (double it when it is full, as std::vector does): in the replay %s "
                 "of the reallocs go away.",
                 name, fmtn(g->chain_steps, n1), (unsigned long long)g->chain_max,
                 fmtb(g->chain_steps ? g->growth_sum / g->chain_steps : 0, b2), fmtb(g->chain_copy, b1),
                 fmtn(avoided, n2));
        jb_u(&xj, "realloc_calls", g->reallocs);
        jb_u(&xj, "chains", g->chains);
        jb_u(&xj, "realloc_steps", g->chain_steps);
        jb_u(&xj, "longest_chain", g->chain_max);
        jb_u(&xj, "small_growth_steps", g->small_growth);
        jb_u(&xj, "mean_growth_bytes", g->chain_steps ? g->growth_sum / g->chain_steps : 0);
        jb_u(&xj, "bytes_copied_at_most", g->chain_copy);
        jb_u(&xj, "reallocs_avoided", avoided);
        jb_u(&xj, "bytes_not_copied", avoided_bytes);
        break;
    }
    case K_SEPARATE: {
        ml_sim_router_gain_t gain;
        ml_sim_router_gain(c->router, &gain);
        pinned = gain.max_gain_bytes / page;
        /* The site's blocks must be alive when the pages are pinned: routing
         * away the short-lived neighbours separates the lifetimes as well,
         * but the pages are held by the ones that stay. */
        if (pinned < PINNED_MIN_PAGES || (double)gain.max_gain_bytes < 0.05 * (double)base_peak ||
            !gain.dedicated_live_blocks)
            return;
        strategy = "separate_lifetimes";
        snprintf(msg, sizeof msg,
                 "%s allocates small blocks that live long (%.0f%% of them outlive %s later allocations or "
                 "the program) in between short-lived blocks of other code, so each keeps a page in use "
                 "that is otherwise empty: at %.1f s, %s pages (%s) were held only because of them. "
                 "Allocate the long-lived blocks from a pool or arena of their own, so that they share "
                 "pages with each other%s%s.",
                 name, 100.0 * (double)lived_at_least(g, long_life) / (double)g->calls, fmtn(long_life, n1),
                 gain.max_gain_time_ms / 1000.0, fmtn(pinned, n2), fmtb(gain.max_gain_bytes, b1),
                 save ? "; the replayed peak drops by " : "", save ? fmtb(save, b2) : "");
        jb_u(&xj, "pinned_pages", pinned);
        jb_u(&xj, "pinned_bytes", gain.max_gain_bytes);
        jb_f(&xj, "pinned_at_s", gain.max_gain_time_ms / 1000.0);
        jb_u(&xj, "long_lived_blocks", lived_at_least(g, long_life));
        break;
    }
    case K_POW2_BUDDY: {
        if (c->pair < 0) return;
        ml_sim_metrics_t ms;
        ml_sim_metrics(cands[c->pair].router, &ms);
        uint64_t waste = m.peak_footprint > ms.peak_footprint ? m.peak_footprint - ms.peak_footprint : 0;
        if (waste < min_saving) return;
        strategy = "segregated_fit";
        save = waste;
        wpeak = ms.peak_footprint;
        uint64_t ex = g->pow2_example, p = (uint64_t)1 << (63 - __builtin_clzll(ex));
        snprintf(msg, sizeof msg,
                 "%s requests sizes just above a power of two (%s of its %s calls, e.g. %llu bytes). A "
                 "power-of-two allocator (buddy, and many pool and GPU allocators) rounds each up to %llu and "
                 "in the replay holds %s more at the peak than size classes do. Keep this site on a "
                 "segregated-fit (size-class) allocator, or trim the object to %llu bytes.",
                 name, fmtn(g->pow2_calls, n1), fmtn(g->calls, n2), (unsigned long long)ex,
                 (unsigned long long)(2 * p), fmtb(waste, b3), (unsigned long long)p);
        jb_u(&xj, "just_over_pow2_calls", g->pow2_calls);
        jb_u(&xj, "buddy_peak_bytes", m.peak_footprint);
        jb_u(&xj, "waste_under_buddy_bytes", waste);
        break;
    }
    case K_POW2_SEG:
        return;
    }
    ml_suggestion_t *s = add_suggestion(adv);
    if (!s) return;
    s->strategy = strategy;
    snprintf(s->message, sizeof s->message, "%s", msg);
    uint32_t sites[8];
    size_t nsite = 0;
    s->site = A->o->analysis ? group_sites(A, g->key, sites, 8, &nsite) : (int64_t)g->stack;
    s->stack = g->stack;
    s->estimated_saving_bytes = save;
    s->calls = g->calls;
    s->temporaries = g->temps;
    s->realloc_steps = steps;
    s->longest_chain = g->chain_max;
    s->pinned_pages = pinned;
    s->baseline_peak = base_peak;
    s->what_if_peak = wpeak;
    snprintf(s->what_if, sizeof s->what_if, "%s", c->kind == K_POW2_BUDDY ? "buddy vs size classes" : c->name);
    jb_t j = {s->evidence, sizeof s->evidence, 0, true};
    jb_raw(&j, "{");
    evidence_common(&j, A, g, long_life);
    evidence_sim(&j, s->what_if, base_peak, wpeak);
    if (nsite) {
        jb_key(&j, "sites");
        jb_raw(&j, "[");
        for (size_t k = 0; k < nsite; k++) jb_raw(&j, "%s%u", k ? ", " : "", sites[k]);
        jb_raw(&j, "]");
    }
    if (xj.len) jb_raw(&j, ", %s", extra);
    jb_raw(&j, "}");
}

static void decide_tuning(ml_advice_t *adv, const adv_t *A) {
    const ml_sim_metrics_t *real = policy(adv, "real");
    if (!real || !real->peak_footprint) return;
    static const char *const general[] = {"segregated_fit", "tlsf", "best_fit", "first_fit", "slab", NULL};
    const ml_sim_metrics_t *best = NULL;
    for (int i = 0; general[i]; i++) {
        const ml_sim_metrics_t *m = policy(adv, general[i]);
        if (m && (!best || m->peak_footprint < best->peak_footprint)) best = m;
    }
    if (!best || best->peak_footprint >= real->peak_footprint) return;
    uint64_t diff = real->peak_footprint - best->peak_footprint;
    if (diff < TUNING_MIN_BYTES || (double)diff < TUNING_SHARE * (double)real->peak_footprint) return;
    ml_suggestion_t *s = add_suggestion(adv);
    if (!s) return;
    unsigned nthreads = (unsigned)__builtin_popcountll(A->threads_mask);
    char b1[32], b2[32], b3[32];
    s->strategy = "allocator_tuning";
    snprintf(s->message, sizeof s->message,
             "The program's allocator kept live blocks on %s of pages at the peak%s%s%s, while a %s "
             "allocator replaying the same allocations needs %s. Try a size-class allocator (jemalloc or "
             "mimalloc, e.g. through LD_PRELOAD), or tune glibc: %smalloc_trim(0) after the peak, "
             "M_TRIM_THRESHOLD and M_MMAP_THRESHOLD (mallopt or GLIBC_TUNABLES) for large blocks.",
             fmtb(real->peak_footprint, b1), real->os_held_peak ? " (" : "",
             real->os_held_peak ? fmtb(real->os_held_peak, b2) : "",
             real->os_held_peak ? " held from the OS per mallinfo)" : "", best->name, fmtb(best->peak_footprint, b3),
             nthreads > 1 ? "MALLOC_ARENA_MAX=2 (threads allocate here, and each gets its own arena), " : "");
    s->estimated_saving_bytes = diff;
    s->baseline_peak = real->peak_footprint;
    s->what_if_peak = best->peak_footprint;
    snprintf(s->what_if, sizeof s->what_if, "%s", best->name);
    jb_t j = {s->evidence, sizeof s->evidence, 0, true};
    jb_raw(&j, "{");
    jb_u(&j, "real_peak_footprint_bytes", real->peak_footprint);
    jb_u(&j, "real_os_held_peak_bytes", real->os_held_peak);
    jb_s(&j, "best_policy", best->name);
    jb_u(&j, "best_peak_footprint_bytes", best->peak_footprint);
    jb_u(&j, "threads", nthreads);
    jb_u(&j, "calls", real->allocs);
    jb_raw(&j, "}");
    s->calls = real->allocs;
}

size_t ml_advisor_gpu_suggestions(const ml_analysis_t *a, ml_suggestion_t *out, size_t max) {
    const ml_gpu_t *g = a ? ml_analysis_gpu(a) : NULL;
    if (!g || !max) return 0;
    ml_gpu_suggestion_t *gs = calloc(max, sizeof *gs);
    if (!gs) return 0;
    size_t n = ml_gpu_suggest(g, gs, max);
    for (size_t i = 0; i < n; i++) {
        ml_suggestion_t *s = &out[i];
        memset(s, 0, sizeof *s);
        s->strategy = gs[i].strategy;
        snprintf(s->message, sizeof s->message, "%s", gs[i].message);
        s->site = -1;
        s->stack = gs[i].stack;
        s->device = gs[i].device;
        s->estimated_saving_bytes = gs[i].estimated_saving_bytes;
        s->calls = gs[i].calls;
        jb_t j = {s->evidence, sizeof s->evidence, 0, true};
        jb_raw(&j, "{");
        jb_u(&j, "device", (uint64_t)(gs[i].device < 0 ? 0 : gs[i].device));
        jb_u(&j, "stack", gs[i].stack);
        jb_u(&j, "calls", gs[i].calls);
        jb_u(&j, "pairs", gs[i].pairs);
        jb_u(&j, "bytes", gs[i].bytes);
        jb_f(&j, "pairs_per_s", gs[i].pairs_per_s);
        jb_u(&j, "distinct_sizes", gs[i].distinct_sizes);
        jb_u(&j, "cycles", gs[i].cycles);
        jb_f(&j, "share", gs[i].share);
        jb_s(&j, "summary", gs[i].evidence);
        jb_raw(&j, "}");
    }
    free(gs);
    return n;
}

/* The list-based fits of the textbooks and bitmap fit: they rank designs no
 * program can switch to as such, and their searches make them the slow
 * part of the replay (docs/strategies.md, Speed), so only
 * `memlens report --all-policies` runs them. */
static bool is_textbook(const char *name) {
    static const char *const textbook[] = {"first_fit", "next_fit", "best_fit", "worst_fit",
                                           "bitmap_fit", NULL};
    for (int i = 0; textbook[i]; i++)
        if (!strcmp(name, textbook[i])) return true;
    return false;
}

int ml_advisor_run(const char *trace_path, const ml_advisor_opts_t *o, ml_advice_t **out, char *err,
                   size_t errlen) {
    static const ml_advisor_opts_t none = {0};
    if (!o) o = &none;
    double t0 = now_s();
    ml_advice_t *adv = calloc(1, sizeof *adv);
    if (!adv) return -ENOMEM;
    adv_t A = {.o = o};
    int rc;
    bool debug = ml_option_bool(ML_ENV_ADVISOR_DEBUG);

    /* --- pass 1: every policy, and the summaries --- */
    ml_sim_replay_t *r1 = NULL;
    if (o->analysis && build_site_keys(&A) < 0) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = ml_sim_replay_new(o->threads, &r1)) < 0) goto fail;
    for (const char *const *nm = ml_sim_policy_names; *nm && rc == 0; nm++) {
        if (!o->all_policies && is_textbook(*nm)) continue;
        ml_sim_policy_t *p;
        rc = ml_sim_policy_new(*nm, NULL, &p);
        if (rc == 0) rc = ml_sim_replay_add(r1, p);
    }
    if (rc == 0) {
        ml_sim_policy_t *p;
        rc = ml_sim_real_new(NULL, &p);
        if (rc == 0) rc = ml_sim_replay_add(r1, p);
    }
    if (rc < 0) goto fail;
    if (!o->no_what_if) ml_sim_replay_observe(r1, observe, &A);
    if ((rc = ml_sim_replay_file_progress(r1, trace_path, o->progress ? "simulating allocators" : NULL,
                                          err, errlen)) < 0)
        goto fail;
    if ((rc = ml_sim_replay_finish(r1)) < 0) goto fail;
    adv->npol = ml_sim_replay_count(r1);
    for (size_t i = 0; i < adv->npol && i < 16; i++) ml_sim_replay_metrics(r1, i, &adv->pol[i]);
    adv->sampled = ml_sim_replay_sampled(r1);
    adv->ops = ml_sim_replay_ops(r1);
    ml_sim_replay_free(r1);
    r1 = NULL;
    if (A.oom) {
        rc = -ENOMEM;
        goto fail;
    }
    for (uint32_t id = 0; id < A.idcap; id++)
        if (A.id_live[id]) chain_end(&A, id);

    const ml_sim_metrics_t *base = policy(adv, BASELINE);
    uint64_t base_peak = base ? base->peak_footprint : 0;
    uint32_t page = 4096;
    uint64_t min_saving = (uint64_t)(MIN_SAVING_SHARE * (double)base_peak);
    if (min_saving < MIN_SAVING_PAGES * page) min_saving = MIN_SAVING_PAGES * page;
    uint64_t long_life = A.seq / 8 > 1024 ? A.seq / 8 : 1024;

    if (!adv->sampled && !o->no_what_if && A.ng) {
        /* --- candidates, most important sites first --- */
        rank_t *rank = calloc(A.ng, sizeof *rank);
        cand_t *cands = calloc(MAX_CANDIDATES, sizeof *cands);
        if (!rank || !cands) {
            free(rank);
            free(cands);
            rc = -ENOMEM;
            goto fail;
        }
        for (uint32_t gi = 0; gi < A.ng; gi++) {
            sort_sizes(&A.g[gi]);
            const group_t *g = &A.g[gi];
            if (debug && g->calls >= 100)
                fprintf(stderr,
                        "advisor: group key %u stack %u: calls %llu frees %llu churn %llu temps %llu sizes %u "
                        "top %llu (%llu) chains %llu steps %llu max %llu small %llu gens %llu pure %llu/%llu "
                        "long %llu live %llu\n",
                        g->key, g->stack, (unsigned long long)g->calls, (unsigned long long)g->frees,
                        (unsigned long long)g->churn_frees, (unsigned long long)g->temps, g->nsizes,
                        (unsigned long long)g->size[0], (unsigned long long)g->size_calls[0],
                        (unsigned long long)g->chains, (unsigned long long)g->chain_steps,
                        (unsigned long long)g->chain_max, (unsigned long long)g->small_growth,
                        (unsigned long long)g->gens, (unsigned long long)g->pure_gens,
                        (unsigned long long)g->pure_blocks, (unsigned long long)lived_at_least(g, long_life),
                        (unsigned long long)g->live);
            rank[gi] = (rank_t){gi, A.g[gi].max_live_bytes * 4 + A.g[gi].calls};
        }
        if (A.ng) qsort(rank, A.ng, sizeof *rank, cmp_rank);
        size_t nc = 0;
        for (uint32_t r = 0; r < A.ng && nc + 2 <= MAX_CANDIDATES; r++) {
            uint32_t gi = rank[r].gi;
            const group_t *g = &A.g[gi];
            if (!g->calls) continue;
            bool temp = g->temps >= TEMP_MIN && (double)g->temps >= TEMP_FRACTION * (double)g->calls;
            bool chain = g->chain_steps >= CHAIN_MIN_STEPS && g->chain_max >= CHAIN_MIN_LONGEST &&
                         (double)g->small_growth >= SMALL_GROWTH_FRACTION * (double)g->chain_steps;
            if (temp) add_candidate(cands, &nc, g->temp_max <= STACK_MAX_BYTES ? K_STACK : K_REUSE, gi, &A);
            if (chain) add_candidate(cands, &nc, K_GROWTH, gi, &A);
            if (!temp && !chain && g->calls >= HOT_CALLS &&
                (double)g->churn_frees >= CHURN_FRACTION * (double)g->calls) {
                if ((double)top_calls(g, 1) >= FEW_SIZES_COVER * (double)g->calls && g->size[0] <= 65536)
                    add_candidate(cands, &nc, K_POOL, gi, &A);
                else if (g->nsizes >= 2 && (double)top_calls(g, 4) >= FEW_SIZES_COVER * (double)g->calls &&
                         g->max_size <= 16384)
                    add_candidate(cands, &nc, K_SLAB, gi, &A);
            }
            if (!temp && g->pure_gens >= BATCH_MIN_GENERATIONS &&
                (double)g->pure_blocks >= BATCH_PURE_FRACTION * (double)g->calls &&
                g->pure_blocks / g->pure_gens >= BATCH_MIN_BLOCKS)
                add_candidate(cands, &nc, K_ARENA, gi, &A);
            if (!temp && g->calls >= LONG_MIN_CALLS && g->max_size <= LONG_MAX_SIZE &&
                (double)lived_at_least(g, long_life) >= LONG_FRACTION * (double)g->calls)
                add_candidate(cands, &nc, K_SEPARATE, gi, &A);
            if (g->calls >= 100 && (double)g->pow2_calls >= POW2_FRACTION * (double)g->calls && nc + 2 <= MAX_CANDIDATES) {
                int b = add_candidate(cands, &nc, K_POW2_BUDDY, gi, &A);
                int s = add_candidate(cands, &nc, K_POW2_SEG, gi, &A);
                if (b >= 0 && s >= 0) cands[b].pair = s;
            }
        }
        free(rank);
        /* --- pass 2: the what-ifs --- */
        if (nc) {
            ml_sim_replay_t *r2 = NULL;
            rc = ml_sim_replay_new(o->threads, &r2);
            for (size_t i = 0; i < nc && rc == 0; i++) {
                rc = make_router(&cands[i], &A.g[cands[i].gi]);
                if (rc == 0) rc = ml_sim_replay_add(r2, cands[i].router);
            }
            if (rc == 0)
                rc = ml_sim_replay_file_progress(r2, trace_path, o->progress ? "pricing what-ifs" : NULL, err,
                                                 errlen);
            if (rc == 0) rc = ml_sim_replay_finish(r2);
            if (rc == 0) {
                for (size_t i = 0; i < nc; i++) {
                    if (debug) {
                        ml_sim_metrics_t m;
                        ml_sim_metrics(cands[i].router, &m);
                        fprintf(stderr, "advisor: candidate %s for stack %u: peak %llu vs baseline %llu (min saving %llu)\n",
                                cands[i].name, A.g[cands[i].gi].stack, (unsigned long long)m.peak_footprint,
                                (unsigned long long)base_peak, (unsigned long long)min_saving);
                    }
                    decide(adv, &A, cands, i, base_peak, min_saving, long_life, page);
                }
            }
            ml_sim_replay_free(r2);
        }
        free(cands);
        if (rc < 0) goto fail;
        /* One footprint strategy per site: of pool, slab and arena, the best saving. */
        if (adv->n) qsort(adv->s, adv->n, sizeof *adv->s, cmp_suggestion);
        size_t w = 0;
        for (size_t i = 0; i < adv->n; i++) {
            bool dup = false;
            if (footprint_family(adv->s[i].strategy))
                for (size_t k = 0; k < w && !dup; k++)
                    dup = adv->s[k].stack == adv->s[i].stack && footprint_family(adv->s[k].strategy);
            if (!dup) adv->s[w++] = adv->s[i];
        }
        adv->n = w;
        decide_tuning(adv, &A);
    }
    if (o->analysis && !adv->sampled) {
        ml_suggestion_t gpu[16];
        size_t n = ml_advisor_gpu_suggestions(o->analysis, gpu, 16);
        for (size_t i = 0; i < n; i++) {
            ml_suggestion_t *s = add_suggestion(adv);
            if (s) *s = gpu[i];
        }
    }
    if (adv->n) qsort(adv->s, adv->n, sizeof *adv->s, cmp_suggestion);
    if (adv->n > MAX_SUGGESTIONS) adv->n = MAX_SUGGESTIONS;
    adv->seconds = now_s() - t0;
    adv_free_state(&A);
    *out = adv;
    return 0;
fail:
    if (r1) ml_sim_replay_free(r1);
    adv_free_state(&A);
    ml_advice_free(adv);
    if (rc == -ENOMEM && err && errlen && !err[0]) snprintf(err, errlen, "out of memory");
    return rc;
}

size_t ml_advice_suggestions(const ml_advice_t *a, const ml_suggestion_t **out) {
    *out = a->s;
    return a->n;
}

size_t ml_advice_policies(const ml_advice_t *a, const ml_sim_metrics_t **out) {
    *out = a->pol;
    return a->npol;
}

const char *ml_advice_baseline(const ml_advice_t *a) {
    (void)a;
    return BASELINE;
}

bool ml_advice_sampled(const ml_advice_t *a) {
    return a->sampled;
}

void ml_advice_stats(const ml_advice_t *a, uint64_t *ops, double *seconds) {
    if (ops) *ops = a->ops;
    if (seconds) *seconds = a->seconds;
}

void ml_advice_free(ml_advice_t *a) {
    if (!a) return;
    free(a->s);
    free(a);
}
