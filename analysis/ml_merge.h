/* ml_merge.h - many processes in one report: the sites of several traces
 * (a `--follow-fork` tree, the ranks of a job, the compilers of a `make -j`)
 * merged by their call stacks, each process still identifiable.
 *
 * High-level; may allocate. A merge takes built sessions one at a time
 * (ml_merge_add) and copies what it needs from each, so the caller frees a
 * session as soon as it was added: memory grows with the distinct sites and
 * frame strings of all processes, not with their live sets.
 *
 * The merge key. Two sites of different processes are one merged site when
 * their frames, innermost first, have the same function, source file and
 * module, frame by frame: the key the call tree merges nodes by
 * (calltree.c), compared by content because each process symbolized its own
 * strings. Addresses are not in the key (ASLR puts libraries at other
 * addresses in each process; an unnamed frame's "[module+0xOFF]" is an
 * offset in its module, the same in every process), and neither are lines,
 * so two sites of one process that differ only in a line of one frame are
 * one merged site too, as they are one path of the call tree.
 *
 * Sums. A merged site's counts and bytes are the sums over the sites merged
 * into it; its peak_bytes is the sum of what each process held there at its
 * own peak, min_size/max_size and lifetime_ms_max are the extremes, the
 * masks are ORed, thread_mask is 0 (thread indexes are per process).
 *
 * Peaks. Processes need not run at the same time, and each trace's peak is
 * its own moment, so the merge does not claim a combined peak it cannot
 * see: ml_merge_totals() gives the sum of the per-process peaks, an upper
 * bound of the heap all of them held at any one moment, and the largest
 * single process's peak, a lower bound. Both are labelled as such wherever
 * they are shown (docs/analysis.md, "Many processes").
 *
 * Thread-safety: none; one merge, one thread.
 */
#ifndef ML_MERGE_H
#define ML_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ml_analysis.h"

typedef struct ml_merge_s ml_merge_t;

/* One process of the merge: its own headline numbers, copied from its
 * session. After ml_merge_finish() the processes are in start order
 * (start_realtime_ns, then pid, then trace path; a trace cut before its
 * process record, which has no start, comes last), and `index` is the place
 * in that order, whatever order they were added in. */
typedef struct {
    uint32_t index;
    uint32_t pid, ppid;
    const char *exe, *trace_path, *parent_trace; /* parent_trace "" for a root */
    uint32_t argc;
    const char *const *argv;
    uint64_t start_realtime_ns;
    ml_totals_t totals;      /* its ml_analysis_totals(), end record included */
    uint64_t leaked_bytes, leaked_blocks; /* lost: definite + indirect + possible */
    uint64_t reachable_bytes, reachable_blocks;
    uint64_t live_bytes, live_blocks;     /* everything live at the end */
    uint64_t gate_bytes;     /* lost and not suppressed: what --fail-on-leak compares */
    bool scanned;            /* its exit-time reachability scan ran */
    uint64_t trace_size;     /* bytes of the trace file (0: unknown) */
    uint32_t sites;          /* its sites (before merging) */
    uint64_t gpu_peak_bytes, gpu_leaked_bytes; /* all devices (0 without GPU records) */
} ml_merge_process_t;

/* What one process contributes to a merged site (the sums of its sites
 * with the key). */
typedef struct {
    uint32_t process;        /* index in the merge */
    uint32_t sites;          /* its sites merged here (usually 1) */
    uint64_t alloc_calls, bytes_allocated, temporary_allocs;
    uint64_t peak_bytes, peak_blocks;     /* live at that process's peak */
    uint64_t leaked_bytes, leaked_blocks; /* lost at its end: definite + indirect + possible (the
                                           * site's leaked_bytes; "every kind" said this once) */
    uint64_t reachable_bytes;             /* still reachable at its end. One field more per share
                                           * (millions in a big merge): the lost kinds stay summed
                                           * (a lost_bytes equal to leaked_bytes went instead) */
} ml_merge_share_t;

/* The merge's totals. */
typedef struct {
    ml_totals_t sum;         /* counts, bytes and live figures summed; peak_bytes and
                              * peak_blocks: the sums of the processes' peaks; the peak
                              * time, last time and end record are not meaningful */
    uint64_t max_process_peak_bytes; /* the largest single process's peak (a lower bound) */
    uint32_t max_process;    /* which process that was */
    ml_leaks_t leaks;        /* the kind, lost, gate and suppressed figures summed;
                              * groups: (merged site, kind), largest first */
    uint32_t incomplete;     /* processes whose trace is incomplete (no records, cut
                              * short, no end record, or events lost) */
    bool sampled;            /* a trace was sampled */
} ml_merge_totals_t;

/* A GPU device ordinal over every process that used it. */
typedef struct {
    int32_t device;          /* ordinal; ML_GPU_DEVICE_UNKNOWN (-1) for unattributed events */
    uint32_t processes;      /* processes with records of it */
    uint64_t peak_bytes;     /* the sum of the processes' peaks on it (an upper bound) */
    uint64_t max_process_peak_bytes; /* the largest single process's peak on it */
    uint64_t leaked_bytes, alloc_calls, free_calls; /* summed */
} ml_merge_gpu_device_t;

/** Creates an empty merge. Returns 0 or -ENOMEM. */
int ml_merge_new(ml_merge_t **out);

/** Adds one built session (ml_analysis_build done) read from trace_path
 * (trace_size: its bytes, 0 if unknown): copies its process, totals,
 * sites, leak groups, histograms, threads and warnings. The session may be
 * freed right after. Returns 0 or -ENOMEM (the merge is then unusable:
 * free it). Not after ml_merge_finish(). */
int ml_merge_add(ml_merge_t *m, const ml_analysis_t *a, const char *trace_path, uint64_t trace_size);

/** Orders the processes (see ml_merge_process_t), sorts the merged sites (as ml_analysis_sites: by peak bytes, then leaked,
 * then allocated bytes, then calls), groups the leaks and builds the call
 * tree of the merged sites. Returns 0 or -ENOMEM. */
int ml_merge_finish(ml_merge_t *m);

void ml_merge_free(ml_merge_t *m);

/* Queries, valid after ml_merge_finish() until ml_merge_free(). */
size_t ml_merge_process_count(const ml_merge_t *m);
const ml_merge_process_t *ml_merge_process(const ml_merge_t *m, size_t i);
/** The merged sites, sorted; ids are indexes. Each is an ml_site_t with the
 * sums (see the top of this file); its frames are the merge's copies of the
 * first contributing process's frames (so `line` and `address` are that
 * process's). */
const ml_site_t *ml_merge_sites(const ml_merge_t *m, size_t *count);
/** Who contributes to merged site i: one share per process that has a site
 * with its key, in process order. */
const ml_merge_share_t *ml_merge_site_processes(const ml_merge_t *m, size_t i, size_t *count);
const ml_merge_totals_t *ml_merge_totals(const ml_merge_t *m);
/** The sizes and lifetimes histograms, bucket by bucket summed. */
const ml_histograms_t *ml_merge_histograms(const ml_merge_t *m);
/** Every process's threads, in process order, as each session had them;
 * (*process)[i] is the index of the process of thread i. */
size_t ml_merge_threads(const ml_merge_t *m, const ml_thread_stats_t **threads, const uint32_t **process);
/** The GPU devices of every process, ascending ordinals (none without GPU
 * records). */
size_t ml_merge_gpu_devices(const ml_merge_t *m, const ml_merge_gpu_device_t **devices);
/** The flame tree of the merged sites (pruned as ml_analysis_flame). */
size_t ml_merge_flame(const ml_merge_t *m, const ml_calltree_node_t **nodes);
/** The node count of the whole merged call tree the flame tree was pruned
 * from (the JSON's flame_pruned.nodes). */
size_t ml_merge_calltree_nodes(const ml_merge_t *m);
/** Every process's warnings, each prefixed with "pid N: " (owned by the merge). */
size_t ml_merge_warnings(const ml_merge_t *m, const char *const **warnings);
/** The index of the process whose warning i is (UINT32_MAX past the end). */
uint32_t ml_merge_warning_process(const ml_merge_t *m, size_t i);

#endif
