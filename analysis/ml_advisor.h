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
 */
#ifndef ML_ADVISOR_H
#define ML_ADVISOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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
} ml_advisor_opts_t;

typedef struct {
    const char *strategy;      /* DESIGN.md's vocabulary (docs/strategies.md) */
    char message[1024];        /* what to change in the code, naming the function */
    int64_t site;              /* site id of the analysis (or stack id without one); -1: process-wide */
    uint32_t stack;            /* one recorded stack of the site; 0: process-wide */
    int32_t device;            /* -1: the CPU heap; a GPU device otherwise */
    uint64_t estimated_saving_bytes; /* peak footprint saved in the replay; 0 when the gain is time */
    char evidence[2048];       /* a JSON object: calls, sizes, lifetimes, the simulation's numbers */
    /* The evidence's main numbers, for programs and tests. */
    uint64_t calls, temporaries, realloc_steps, longest_chain;
    uint64_t pinned_pages;     /* separate_lifetimes: pages the long-lived blocks kept in use */
    uint64_t baseline_peak, what_if_peak;
    char what_if[48];          /* the dedicated allocator simulated, e.g. "pool(48)" */
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
/** Replay statistics: ops, seconds of wall time for both passes. */
void ml_advice_stats(const ml_advice_t *a, uint64_t *ops, double *seconds);
void ml_advice_free(ml_advice_t *a);

/** The GPU advice of a built session (analysis/ml_gpu.h) as suggestions;
 * ml_advisor_run merges these already. Returns how many were written. */
size_t ml_advisor_gpu_suggestions(const ml_analysis_t *a, ml_suggestion_t *out, size_t max);

/** Writes `s` as a JSON string (quoted, escaped) - for the evidence objects. */
void ml_advisor_json_string(FILE *out, const char *s);

#endif
