/* ml_advisor.h - the strategy advisor: which allocation strategy would serve
 * each hot site better, and by how much, measured by replaying the trace.
 *
 * High-level; may allocate. Two streaming passes over a trace file:
 *   1. every policy of analysis/sim (and the allocator the program really
 *      used) replays the whole trace: the comparison table; meanwhile each
 *      site's sizes, lifetimes, temporaries, realloc chains and allocation
 *      batches are summarised;
 *   2. for the sites whose pattern fits a strategy, a what-if: the site's
 *      allocations go to a dedicated allocator (pool, slab, arena, reused
 *      buffer, reserved capacity, a heap of their own) while everything else
 *      stays in the baseline general allocator (segregated fit, the design of
 *      glibc's malloc), and the whole heap's peak footprint is measured again.
 * A suggestion is made only when its evidence holds (the thresholds are in
 * docs/strategies.md) and the simulation backs it; a program with nothing
 * worth changing gets none. Memory: proportional to the live blocks and the
 * sites, never to the trace length.
 *
 * The advisor measures and report/ presents: a suggestion carries its
 * message and its evidence as plain fields (ml_evidence_t), which the JSON
 * report writes (report/advice_json.c) and the viewer shows.
 *
 * Ownership and threads: ml_advisor_run reads the optional analysis without
 * changing it (it must stay alive and unchanged during the run) and may run
 * its replays on worker threads of its own; the ml_advice_t it returns
 * belongs to the caller and is read-only, so any thread may read it. Errors:
 * negative errno (-ENOMEM when memory runs out, the trace reader's errors),
 * with nothing half-made returned.
 */
#ifndef ML_ADVISOR_H
#define ML_ADVISOR_H

#include <stdbool.h>
#include <stdint.h>

#include "ml_analysis.h"
#include "ml_sim.h"

typedef struct {
    unsigned threads;              /* simulation worker threads; 0 runs them in the caller */
    const ml_analysis_t *analysis; /* optional: the same trace, built. Suggestions then carry
                                    * its site ids and function names, and its GPU suggestions
                                    * are merged in. Without it, sites are stack ids. */
    bool no_what_if;               /* the comparison table only (one pass, no suggestions) */
    bool progress;                 /* a percentage on stderr for big traces on a terminal */
    bool all_policies;             /* also the textbook fits (first, next, best, worst, bitmap):
                                    * the table gains five rows, the replay takes about five
                                    * times as long. Without it: the designs of real allocators
                                    * (segregated fit, TLSF, buddy, slab, arena) and the real one */
    /* Budgets (0: the defaults below). Work that would not fit is skipped
     * before it starts, never cut halfway, and ml_advice_skipped() says what
     * and why. Both are estimated from the analysis' totals (needs
     * o->analysis; without one nothing is skipped): */
    uint64_t budget_bytes; /* memory for the replays: live blocks at the peak times the bytes
                            * each replayed policy keeps per live block */
    uint64_t budget_ops;   /* time, as replayed operations summed over the policies (about
                            * 20-40 M per CPU second on this project's machine) */
    /* Optional: every record the first pass reads from the trace, then NULL
     * once it read the trace to its end (ml_sim_replay_records). Nothing
     * when no pass reads the trace (saved advice, or the replay skipped). */
    ml_sim_record_fn on_record;
    void *on_record_ctx;
} ml_advisor_opts_t;

#define ML_ADVISOR_BUDGET_BYTES (768ull << 20)
#define ML_ADVISOR_BUDGET_OPS 40000000ull

/* ------------------------------------------------------------------------- */
/* Evidence: the numbers a suggestion rests on                               */
/* ------------------------------------------------------------------------- */

/* The advisor measures; report/ writes. Each suggestion carries its numbers
 * as the fields below, and the JSON report writes them as the suggestion's
 * "evidence" object, one key per field, in the order of the fields
 * (docs/strategies.md, "Evidence", names every key). */

typedef enum {
    ML_EVIDENCE_NONE = 0, /* no numbers (written as {}) */
    ML_EVIDENCE_SITE,     /* a heap site's pattern and its what-if: .site */
    ML_EVIDENCE_TUNING,   /* allocator_tuning: .tuning */
    ML_EVIDENCE_GPU,      /* one of the GPU rules (analysis/ml_gpu.h): .gpu */
} ml_evidence_kind_t;

/* What a site suggestion adds to the pattern, by strategy. */
typedef enum {
    ML_FINDING_NONE = 0,    /* no numbers beyond the pattern */
    ML_FINDING_CALLS,       /* pool, slab: .work (the time the strategy saves) */
    ML_FINDING_BATCHES,     /* arena: .batches */
    ML_FINDING_TEMPORARIES, /* stack, reuse_buffer: .temporaries */
    ML_FINDING_CHAINS,      /* reserve_capacity: .chains */
    ML_FINDING_PINNED,      /* separate_lifetimes: .pinned */
    ML_FINDING_POW2,        /* segregated_fit: .pow2 */
} ml_finding_t;

#define ML_EVIDENCE_TOP_SIZES 4 /* sizes listed in a site's evidence */
#define ML_EVIDENCE_SITES 8     /* analysis sites listed in a site's evidence */

typedef struct {
    uint64_t size, calls;
} ml_size_calls_t;

/* A heap site (the analysis' function, or a stack without an analysis). */
typedef struct {
    /* The pattern over the whole trace (pass 1). */
    uint64_t calls, bytes_allocated, frees;
    uint32_t stack; /* one recorded stack of the site */
    uint64_t max_live_bytes, max_live_blocks;
    struct {
        uint64_t min, max;    /* requested bytes (min is 0 without calls) */
        uint32_t distinct;    /* distinct sizes counted, at most 8 ... */
        bool more_distinct;   /* ... and whether there were more */
        uint32_t ntop;        /* entries of top[] */
        ml_size_calls_t top[ML_EVIDENCE_TOP_SIZES]; /* the most frequent sizes, most frequent first */
    } sizes;
    struct {
        uint64_t freed, live_at_end;
        double mean_ms;       /* mean lifetime of the freed blocks, in milliseconds */
        uint64_t max_ms;
        /* Lifetimes in allocations made meanwhile, as the upper bound of a
         * power-of-two bucket (2^k - 1; UINT64_MAX for the last bucket):
         * half (nine tenths) of the freed blocks died within this many. */
        uint64_t median_allocations_at_most, p90_allocations_at_most;
        double long_lived_fraction; /* of the calls: blocks that lived at least the next
                                     * number of allocations, or to the end */
        uint64_t long_lived_at_least_allocations;
    } lifetimes;
    /* The what-if (pass 2): the whole heap's peak footprint in the baseline
     * allocator, and with the site's blocks on the suggestion's what_if. */
    struct {
        const char *baseline; /* static: "segregated_fit" */
        uint64_t baseline_peak_bytes, what_if_peak_bytes;
    } simulation;
    uint32_t nsites; /* with an analysis: its sites of this function (up to 8); else 0 */
    uint32_t sites[ML_EVIDENCE_SITES];
    ml_finding_t finding;
    union {
        struct {
            uint64_t batches, blocks_in_batches; /* batches freed whole, and their blocks */
        } batches;
        struct {
            uint64_t temporaries;      /* blocks freed before any other allocation */
            double temporary_fraction; /* of the calls */
            uint64_t max_temporary_bytes;
            uint64_t calls_avoided;    /* malloc and free calls a kept buffer saves */
        } temporaries;
        struct {
            uint64_t realloc_calls, chains, realloc_steps, longest_chain;
            uint64_t small_growth_steps; /* steps that grew by at most max(64, 1/8) */
            uint64_t mean_growth_bytes, bytes_copied_at_most;
            uint64_t reallocs_avoided, bytes_not_copied; /* with geometric growth, in the replay */
        } chains;
        struct {
            uint64_t calls_avoided;         /* malloc and free calls the pool or slab takes over */
            uint64_t allocator_steps_saved; /* the general allocator's search steps, splits and
                                             * merges the replay no longer needed (0 if none) */
            bool time_only;                 /* the footprint saving is below the minimum: the gain is time */
        } work;
        struct {
            uint64_t pinned_pages, pinned_bytes; /* held only by the site's blocks ... */
            uint32_t pinned_at_ms;               /* ... at this time of the trace */
            uint64_t long_lived_blocks;
        } pinned;
        struct {
            uint64_t just_over_pow2_calls;
            uint64_t buddy_peak_bytes, waste_under_buddy_bytes; /* the site on a buddy allocator */
        } pow2;
    };
} ml_site_evidence_t;

/* allocator_tuning: the program's real allocator against the best simulated design. */
typedef struct {
    uint64_t real_peak_footprint_bytes;
    uint64_t real_os_held_peak_bytes; /* mallinfo's arena + hblkhd; 0 if never sampled */
    char best_policy[24];
    uint64_t best_peak_footprint_bytes;
    uint32_t threads; /* threads that allocated */
    uint64_t calls;
} ml_tuning_evidence_t;

/* A GPU rule's numbers (ml_gpu_suggestion_t). */
typedef struct {
    uint32_t device; /* an unknown device reads 0 */
    uint32_t stack;
    uint64_t calls, pairs, bytes;
    double pairs_per_s;
    uint32_t distinct_sizes, cycles;
    double share;
    char summary[256]; /* the rule's numbers in words */
} ml_gpu_evidence_t;

typedef struct {
    ml_evidence_kind_t kind;
    union {
        ml_site_evidence_t site;
        ml_tuning_evidence_t tuning;
        ml_gpu_evidence_t gpu;
    };
} ml_evidence_t;

/* ------------------------------------------------------------------------- */
/* Suggestions                                                               */
/* ------------------------------------------------------------------------- */

typedef struct ml_suggestion_s {
    const char *strategy;      /* DESIGN.md's vocabulary (docs/strategies.md) */
    char message[1024];        /* what to change in the code, naming the function */
    int64_t site;              /* site id of the analysis (or stack id without one); -1: process-wide */
    uint32_t stack;            /* one recorded stack of the site; 0: process-wide */
    int32_t device;            /* -1: the CPU heap; a GPU device otherwise */
    uint64_t estimated_saving_bytes; /* peak footprint saved in the replay, never more than the
                                      * site's max_live_bytes; 0 when the gain is time */
    char what_if[48];          /* the allocator simulated, e.g. "pool(48)"; "" for GPU advice */
    ml_evidence_t evidence;
} ml_suggestion_t;

typedef struct ml_advice_s ml_advice_t;

/** Replays the trace at `trace_path` and works out the suggestions. Returns 0,
 * or a negative errno with a message in err. A truncated trace is advised on
 * as far as it goes; a sampled one gets the table but no suggestions (its
 * blocks are a sample, not the heap). */
int ml_advisor_run(const char *trace_path, const ml_advisor_opts_t *o, ml_advice_t **out, char *err,
                   size_t errlen);

/** The suggestions, most valuable first. */
size_t ml_advice_suggestions(const ml_advice_t *a, const ml_suggestion_t **out);
/** The comparison table: every simulated policy, then "real". */
size_t ml_advice_policies(const ml_advice_t *a, const ml_sim_metrics_t **out);
/** Name of the baseline general allocator of the what-ifs ("segregated_fit"). */
const char *ml_advice_baseline(const ml_advice_t *a);
bool ml_advice_sampled(const ml_advice_t *a);
/** What the budgets made the advisor skip, in words, one entry each
 * (e.g. "what-ifs: 12 of 24 candidates not priced: over the time budget");
 * NULL past the last. The result is still right for what it covers. */
const char *ml_advice_skipped(const ml_advice_t *a, size_t i);
/** Replay statistics: ops, seconds of wall time for both passes. */
void ml_advice_stats(const ml_advice_t *a, uint64_t *ops, double *seconds);
/* ------------------------------------------------------------------------- */
/* Advice saved in the trace                                                 */
/* ------------------------------------------------------------------------- */

/* `memlens report` saves the advisor's result at the end of the trace, keyed
 * by what it depends on: the records (the trailer's checksum, checked
 * against the file), the advisor (ML_ADVICE_CACHE_VERSION and the memlens
 * version), the options that change it (all_policies, no_what_if, the
 * budgets) and the analysis' sites (their frames: symbols). A later run with
 * the same key reads it back instead of replaying the trace; any other key
 * ignores it. Only traces with an analysis trailer (every complete trace of
 * `memlens run`) can hold advice. docs/trace-format.md, "The saved advice". */

/** Raise it whenever a change of the advisor or the simulator changes its
 * results: saved advice of another version is not used. */
#define ML_ADVICE_CACHE_VERSION 7

#define ML_ADVICE_CACHE_READ 1u  /* use advice saved in the trace under the same key */
#define ML_ADVICE_CACHE_WRITE 2u /* save a fresh result in the trace when it may be written */

/** ml_advisor_run() through the advice saved in the trace: returns the saved
 * result when its key matches (ml_advice_from_cache() is then true), else
 * runs the advisor and, with ML_ADVICE_CACHE_WRITE, saves the result
 * (ml_trace_save_advice: only into a regular file of the caller's that its
 * owner may write, never through a link). Damaged saved advice, or a save
 * that failed for another reason than "not ours to write", leaves a message
 * in warn[0..warnlen) (else warn[0] is NUL); neither is an error. Returns
 * what ml_advisor_run() returns. */
int ml_advisor_run_cached(const char *trace_path, const ml_advisor_opts_t *o, unsigned flags,
                          ml_advice_t **out, char *err, size_t errlen, char *warn, size_t warnlen);
/** True when the result was read back from the trace. */
bool ml_advice_from_cache(const ml_advice_t *a);

/** Frees the result and its suggestions. NULL is allowed. */
void ml_advice_free(ml_advice_t *a);

/** The GPU advice of a built session (analysis/ml_gpu.h) as suggestions;
 * ml_advisor_run merges these already. Returns how many were written (0 also
 * when memory for the GPU rules runs out). */
size_t ml_advisor_gpu_suggestions(const ml_analysis_t *a, ml_suggestion_t *out, size_t max);

#endif
