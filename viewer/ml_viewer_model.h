/* ml_viewer_model.h - what the viewer shows, without a terminal.
 *
 * The model wraps one analysis session (analysis/ml_analysis.h) and never
 * includes <curses.h>: it is unit-tested on its own, and the panels draw
 * only what it hands them. It computes no metric of its own; every number
 * comes from the analysis library. What it adds is presentation state: a
 * snapshot of the analysis results, the sort order and filter of the site
 * list, the call tree's visible rows.
 *
 * Two ways to fill it:
 *   - post-mortem: ml_vmodel_open() then ml_vmodel_load_step() repeatedly
 *     (each step feeds records for a bounded time, so the UI can draw a
 *     progress bar and handle keys between steps), or ml_vmodel_load_all();
 *   - live: a collector thread feeds ml_vmodel_analysis() while holding
 *     ml_vmodel_lock(), and the UI thread calls ml_vmodel_refresh(), which
 *     takes the lock only to copy the results.
 *
 * Threading: everything except ml_vmodel_lock/unlock, ml_vmodel_analysis
 * and ml_vmodel_set_process_state belongs to the UI thread. Pointers returned
 * by the query functions stay valid until the next refresh, load step, sort
 * or filter change.
 */
#ifndef ML_VIEWER_MODEL_H
#define ML_VIEWER_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ml_analysis.h"

typedef struct ml_vmodel_s ml_vmodel_t;

#define ML_VSITE_NONE UINT32_MAX

/* One stack frame, innermost first: the analysis' own frame (function,
 * file, line, module, address). */
typedef ml_frame_t ml_vframe_t;

typedef enum {
    ML_VLEAK_NONE = 0,
    ML_VLEAK_DEFINITE,
    ML_VLEAK_INDIRECT,
    ML_VLEAK_REACHABLE,
    ML_VLEAK_POSSIBLE,
    ML_VLEAK_KINDS_
} ml_vleak_t;

/* One allocation site: a unique allocation stack. */
typedef struct {
    uint32_t id;     /* stable across refreshes (the model's own key) */
    uint32_t number; /* what people see: the analysis' site id of the last build, the
                        JSON report's sites[].id and the HTML page's "#N" (a live
                        view's numbers may change while the program runs) */
    uint32_t nframes;
    const ml_vframe_t *frames;
    uint32_t headline; /* the frame that names the site (ml_site_t.headline) */
    uint64_t alloc_calls, bytes_allocated, temporary_allocs;
    uint64_t peak_bytes;                  /* live at the heap peak */
    uint64_t leaked_bytes, leaked_blocks; /* live at exit (live now while running) */
    ml_vleak_t leak_kind;
    uint64_t live_bytes, live_blocks; /* live at the end of what was read */
    const ml_site_t *src;             /* the analysis' record: sizes, lifetimes, pinned pages */
} ml_vsite_t;

/* The site list's sort keys (and the call tree's cost columns). */
typedef enum {
    ML_VSORT_PEAK = 0,
    ML_VSORT_LEAKED,
    ML_VSORT_ALLOCATED,
    ML_VSORT_CALLS,
    ML_VSORT_TEMPORARY,
    ML_VSORT_COUNT_
} ml_vsort_t;

typedef struct {
    bool valid;
    double page_utilization; /* live requested bytes / bytes of pages holding a live block */
    uint64_t free_bytes, largest_free_bytes;
    double external; /* 1 - largest free / total free */
} ml_vfrag_t;

typedef struct {
    uint32_t device;
    uint64_t peak_bytes, leaked_bytes, alloc_calls, free_calls;
} ml_vgpu_t;

/* The GPU view: one device in full, copied from analysis/ml_gpu.h (the same
 * numbers as the report's "gpu" object, report/gpu_json.c). */

/* One allocation kind of a device (cudaMalloc, pinned host, managed, ...). */
typedef struct {
    uint8_t kind;     /* ml_gpu_kind_t */
    const char *name; /* ml_gpu_kind_name(): "device", "host_pinned", ... */
    uint64_t alloc_calls, free_calls, bytes_allocated;
    uint64_t peak_bytes; /* the kind's own maximum */
    uint64_t live_bytes, leaked_bytes, leaked_blocks;
} ml_vgpu_kind_t;

/* Address-space fragmentation of a device's live allocations at one moment:
 * the gaps between them in the device's virtual address space. */
typedef struct {
    bool valid;
    uint32_t time_ms;
    uint64_t live_bytes, blocks, span_bytes, hole_bytes, holes, largest_hole_bytes;
    double utilization; /* live / span */
    double external;    /* 1 - largest hole / hole bytes */
    uint64_t regions;   /* ranges more than ML_GPU_REGION_GAP apart (not holes) */
} ml_vgpu_frag_t;

/* The three site lists of a device. */
typedef enum {
    ML_VGPU_PEAK = 0, /* what held the device's peak, largest first */
    ML_VGPU_LEAK,     /* leaked (live at the end + freed by context destruction) */
    ML_VGPU_CHURN,    /* alloc/free pairs, most first */
    ML_VGPU_LISTS_
} ml_vgpu_list_t;

/* A GPU allocation site: (device, CPU stack, kind). `bytes`/`blocks` are
 * what the list is about: held at the peak, or leaked; churn lists count
 * pairs. Frames are symbolized with CUDA's and memlens' own frames removed
 * (frames[0] called the CUDA API); none before the analysis was built. */
typedef struct {
    uint32_t stack; /* the analysis' stack id (with kind: the site's identity on its device) */
    uint8_t kind;
    const char *kind_name;
    uint64_t bytes, blocks;
    uint64_t ctx_destroy_bytes; /* leak list: of `bytes`, freed by context destruction */
    uint64_t alloc_calls, bytes_allocated, pairs;
    double pairs_per_s;      /* ml_gpu_site_pairs_per_s */
    double mean_lifetime_ms; /* over freed blocks (0: none freed) */
    uint64_t min_size, max_size, top_size;
    uint32_t distinct_sizes; /* more than ML_GPU_SITE_SIZES reads as ML_GPU_SITE_SIZES + 1 */
    uint32_t nframes;
    const ml_vframe_t *frames;
} ml_vgpu_site_t;

typedef struct {
    int32_t device; /* ordinal; -1: events the collector could not attribute */
    uint64_t peak_bytes, peak_blocks;
    uint32_t peak_time_ms;
    uint64_t live_bytes, live_blocks;     /* at the end (now, while running) */
    uint64_t leaked_bytes, leaked_blocks; /* live at the end + freed by context destruction */
    uint64_t ctx_destroy_bytes, ctx_destroy_blocks;
    uint64_t alloc_calls, free_calls, bytes_allocated;
    uint64_t failed_frees, unknown_frees;
    uint64_t pinned_peak_bytes, pinned_live_bytes, pinned_leaked_bytes, pinned_bytes_allocated;
    uint64_t pinned_alloc_calls, pinned_free_calls;
    uint32_t empty_cache_cycles, pool_trims;
    ml_vgpu_frag_t frag_peak, frag_end;
    uint32_t nkinds; /* kinds with at least one call, in ml_gpu_kind_t order */
    ml_vgpu_kind_t kinds[ML_GPU_KIND_COUNT_];
    uint32_t nsites[ML_VGPU_LISTS_];
    const ml_vgpu_site_t *sites[ML_VGPU_LISTS_];
} ml_vgpu_device_t;

/* At most this many sites per list and device (the report keeps 20 too). */
#define ML_VGPU_MAX_SITES 20

typedef enum {
    ML_VPROC_LOADING = 0, /* post-mortem, still reading the file */
    ML_VPROC_RUNNING,     /* live, the program runs */
    ML_VPROC_EXITED,      /* status: exit code */
    ML_VPROC_SIGNALED,    /* status: signal number */
    ML_VPROC_ENDED,       /* gone, status unknown (a followed process, an exec) */
    ML_VPROC_TRUNCATED,   /* the trace stops before its end record */
} ml_vproc_state_t;

#define ML_VMAX_GPUS 16

/* Where the strategy advisor is: it replays the trace in the background once
 * the data is final (the file read, the live program ended). */
typedef enum {
    ML_VADVICE_PENDING = 0, /* waits for the data to be final */
    ML_VADVICE_RUNNING,
    ML_VADVICE_DONE,
    ML_VADVICE_FAILED, /* ml_vmodel_advice_error() says why */
    ML_VADVICE_OFF,
} ml_vadvice_t;

#define ML_VMAX_WARNINGS 8

typedef struct {
    char exe[512];
    char cmdline[1024];
    uint32_t pid;
    ml_vproc_state_t state;
    int status;
    uint32_t duration_ms;
    bool sampled;
    bool attached; /* memlens attach: a window of the process' life, no exit */
    bool ended_in_window; /* attached, and it ended there without an exit (ml_analysis_ended_in_window) */
    uint64_t sample_bytes;
    ml_totals_t totals;                     /* a copy of the analysis totals */
    uint64_t peak_rss_bytes;                /* 0 when the trace has no RSS samples */
    /* by ml_vleak_t; index 0: leaked = definite + indirect + possible
     * (reachable is not leaked; without a scan every live block) */
    uint64_t leak_bytes[ML_VLEAK_KINDS_], leak_blocks[ML_VLEAK_KINDS_];
    bool leaks_scanned; /* an exit-time reachability scan classified the leaks */
    ml_vfrag_t frag_peak, frag_end;
    uint32_t ngpus;
    ml_vgpu_t gpus[ML_VMAX_GPUS];
    uint32_t nsites; /* all sites, before the filter */
    uint32_t nsuggestions;
    ml_vadvice_t advice;
    /* The analysis' warnings (ml_analysis_warnings: stacks cut at --depth,
     * events lost, no reachability scan, attached, out of memory, symbols),
     * the first ML_VMAX_WARNINGS of nwarnings, each cut to fit. */
    uint32_t nwarnings;
    char warnings[ML_VMAX_WARNINGS][400];
} ml_vsummary_t;

/* A histogram bucket: (lo, hi] in bytes or milliseconds. `count` is the
 * whole program's; `mine` says whether the site asked has any there (the
 * analysis keeps per-site bucket masks, not per-site counts). */
typedef struct {
    uint64_t lo, hi, count;
    bool mine;
} ml_vbucket_t;

typedef enum { ML_VHIST_SIZE = 0, ML_VHIST_LIFETIME } ml_vhist_t;

typedef struct {
    const char *strategy; /* DESIGN.md vocabulary: "pool", "arena", ... */
    const char *message;
    uint32_t site; /* ML_VSITE_NONE: program-wide */
    uint64_t estimated_saving_bytes;
    const char *evidence; /* the numbers behind it, in words: lines separated by '\n' */
} ml_vsuggestion_t;

typedef struct {
    uint32_t time_ms;
    uint64_t heap_bytes, rss_bytes, mmap_bytes, gpu_bytes;
} ml_vpoint_t;

typedef enum {
    ML_VSERIES_HEAP = 0,
    ML_VSERIES_RSS,
    ML_VSERIES_MMAP,
    ML_VSERIES_GPU,
    ML_VSERIES_COUNT_
} ml_vseries_t;

/* A site's share of the live set at one instant. */
typedef struct {
    uint32_t site;
    uint64_t bytes, blocks;
} ml_vlive_t;

/* The heap map: the busiest heap region cut into cells of equal size, each
 * shaded by the page utilization of its pages (the analysis' heap map). */
typedef enum {
    ML_VMAP_PEAK = 0,
    ML_VMAP_END,
    ML_VMAP_WORST,
    ML_VMAP_CURSOR,
    ML_VMAP_COUNT_
} ml_vmap_at_t;

typedef struct {
    uint64_t addr, span; /* the cell covers [addr, addr + span) */
    int8_t used_pct; /* live bytes / bytes of its pages that hold a live block, 0..100; -1: no such
                        page */
} ml_vcell_t;

typedef struct {
    bool valid;
    ml_vmap_at_t at;  /* the moment shown (CURSOR falls back to a snapshot near it) */
    uint32_t time_ms; /* the instant it shows */
    bool sites_known; /* ml_vmodel_cell_sites works for it (peak, worst, end) */
    uint64_t lo, hi;  /* address range covered */
    uint32_t ncells;
    const ml_vcell_t *cells;
    ml_vfrag_t frag;
} ml_vheapmap_t;

/* One visible row of the call tree. */
typedef struct {
    uint32_t node; /* node id, valid until the next refresh */
    uint32_t depth;
    bool has_children, expanded;
    const ml_vframe_t *frame;
    uint64_t incl[ML_VSORT_COUNT_]; /* inclusive cost of the subtree */
    uint64_t self[ML_VSORT_COUNT_]; /* cost of stacks that end here */
} ml_vtree_row_t;

/* ------------------------------------------------------------------------- */
/* Life cycle and loading                                                    */
/* ------------------------------------------------------------------------- */

/** Creates an empty model with its own analysis session. Returns 0 or -ENOMEM. */
int ml_vmodel_new(ml_vmodel_t **out);
void ml_vmodel_free(ml_vmodel_t *m);

/** Options for the analysis builds (NULL: defaults). Tests turn symbols off. */
void ml_vmodel_set_build_opts(ml_vmodel_t *m, const ml_build_opts_t *o);

/** Runs the strategy advisor once the data is final (default on). */
void ml_vmodel_set_advice(ml_vmodel_t *m, bool on);
/** The advisor's budgets (ml_advisor_opts_t; 0: its defaults), as
 * `memlens report --advisor-mem/--advisor-ops` give them: saved advice is
 * found only under the budgets it was made with. Before the first load step. */
void ml_vmodel_set_advisor_budget(ml_vmodel_t *m, uint64_t bytes, uint64_t ops);
/** What the advisor left out to stay within its budgets, in words (i from
 * 0; NULL past the last, and before the advice is taken in). */
const char *ml_vmodel_advice_skipped(const ml_vmodel_t *m, size_t i);
/** Takes in what background work finished (the advisor's suggestions, the
 * history replay's snapshots) and notices its progress.
 * Returns true when the views must be drawn again. UI thread. */
bool ml_vmodel_poll(ml_vmodel_t *m);
/** True while background work runs (the loop keeps polling). */
bool ml_vmodel_busy(const ml_vmodel_t *m);
const char *ml_vmodel_advice_error(const ml_vmodel_t *m);
/** Waits for background work (the advisor, the history replay) to finish
 * and takes it in (batch mode). */
void ml_vmodel_wait(ml_vmodel_t *m);

/** Opens a trace for step-wise loading. Returns 0, or a negative errno with a
 * message in err (missing file, not a trace, unknown version). */
int ml_vmodel_open(ml_vmodel_t *m, const char *path, char *err, size_t errlen);

/** Feeds records for about max_ms milliseconds (at least one chunk of
 * records). Returns 1 while more remains, 0 once the trace was read (the
 * snapshot is then refreshed), or a negative errno for a corrupted trace
 * (message in ml_vmodel_error()). A trace opened from its analysis snapshot
 * (ml_vmodel_from_snapshot) needs one step: it builds the final results and
 * starts the history replay in the background. */
int ml_vmodel_load_step(ml_vmodel_t *m, uint32_t max_ms);

/* Opening from the analysis snapshot. A trace the collector saved its
 * analysis session in (docs/trace-format.md, "The analysis snapshot") opens
 * with that session restored, as `memlens report` does: every view shows the
 * final results at once, without a replay. Time travel (the live set and the
 * heap map at earlier instants) needs the records replayed: a second analysis
 * session on a thread of its own does it, within a memory budget, while the
 * views are in use (ml_vmodel_travel). Traces without a sound snapshot load
 * by replay, in steps, as before. */

/** Use the snapshot when the trace has one (default true; false replays, as
 * `report --replay`). Before ml_vmodel_open. */
void ml_vmodel_set_snapshot(ml_vmodel_t *m, bool use);
/** True when ml_vmodel_open restored the trace's snapshot. */
bool ml_vmodel_from_snapshot(const ml_vmodel_t *m);

/** What the history replay may make the process grow by (its resident
 * memory, VmRSS, over what it was when the replay started), in bytes;
 * 0: no history replay. Before the first load step. */
#define ML_VHISTORY_BUDGET_DEFAULT (512ull << 20)
void ml_vmodel_set_history_budget(ml_vmodel_t *m, uint64_t bytes);

typedef enum {
    ML_VTRAVEL_FULL = 0, /* the snapshots cover the whole run (a replay load, a live view,
                            or the history replay finished) */
    ML_VTRAVEL_BUILDING, /* the history replay runs: `progress` */
    ML_VTRAVEL_PARTIAL,  /* it stopped at its budget: [0, until_ms] only */
    ML_VTRAVEL_OFF,      /* budget 0: only the peak and the end */
    ML_VTRAVEL_FAILED,   /* it stopped on an error: [0, until_ms] */
} ml_vtravel_state_t;

typedef struct {
    ml_vtravel_state_t state;
    double progress;       /* BUILDING: share of the records replayed, 0..1 */
    uint32_t until_ms;     /* the snapshots cover [0, until_ms] */
    uint64_t budget_bytes; /* ml_vmodel_set_history_budget */
    uint64_t used_bytes;   /* the most the process grew by while the replay ran */
    bool session_held;     /* the replay's analysis session is allocated now */
    bool session_built;    /* and built by the replay's thread: who pins a heap-map cell at
                              the peak or the worst moment needs no build on the UI thread */
    const char *reason;    /* PARTIAL, OFF, FAILED: why, in words ("" otherwise) */
} ml_vtravel_t;

/** Where time travel stands. UI thread (ml_vmodel_poll takes the finished
 * replay in). */
ml_vtravel_t ml_vmodel_travel(const ml_vmodel_t *m);

/** Loads the whole opened trace. Same returns as ml_vmodel_load_step. */
int ml_vmodel_load_all(ml_vmodel_t *m);

/** True between ml_vmodel_open and the end of loading. */
bool ml_vmodel_loading(const ml_vmodel_t *m);
/** Fraction of the file read, 0..1. */
double ml_vmodel_progress(const ml_vmodel_t *m);
/** The last load error, or "". */
const char *ml_vmodel_error(const ml_vmodel_t *m);
/** The trace's path ("" in live mode unless set). */
const char *ml_vmodel_path(const ml_vmodel_t *m);
void ml_vmodel_set_path(ml_vmodel_t *m, const char *path);

/* ------------------------------------------------------------------------- */
/* Live feeding (collector thread)                                           */
/* ------------------------------------------------------------------------- */

/** The model's analysis session. In live mode, feed it only while holding
 * the lock (a recursive mutex: it may be taken again inside). */
ml_analysis_t *ml_vmodel_analysis(ml_vmodel_t *m);
void ml_vmodel_lock(ml_vmodel_t *m);
void ml_vmodel_unlock(ml_vmodel_t *m);
/** Feeds one record (in live mode the caller holds the lock). */
void ml_vmodel_feed(ml_vmodel_t *m, const ml_record_t *rec);
/** Live mode: the program's state (RUNNING, then EXITED/SIGNALED/ENDED).
 * Thread-safe. */
void ml_vmodel_set_process_state(ml_vmodel_t *m, ml_vproc_state_t st, int status);

/** Copies the analysis results into the snapshot the queries read (takes
 * the lock). Returns 0 or -ENOMEM. */
int ml_vmodel_refresh(ml_vmodel_t *m);
/** The message of the last failed analysis build, or "". */
const char *ml_vmodel_build_error(const ml_vmodel_t *m);
/** How long the last refresh held the lock, in ms (live views space their
 * refreshes by it, so a big heap's builds do not stall the collector). */
uint32_t ml_vmodel_refresh_cost_ms(const ml_vmodel_t *m);
/** Changes with every refresh that saw new data. */
uint64_t ml_vmodel_generation(const ml_vmodel_t *m);

/* ------------------------------------------------------------------------- */
/* Queries (UI thread, on the snapshot)                                      */
/* ------------------------------------------------------------------------- */

const ml_vsummary_t *ml_vmodel_summary(const ml_vmodel_t *m);

/** Sort order of the site list (descending by the key, then by site id). */
void ml_vmodel_set_sort(ml_vmodel_t *m, ml_vsort_t key);
ml_vsort_t ml_vmodel_sort(const ml_vmodel_t *m);
/** Case-insensitive substring filter on function, file and module names of a
 * site's frames (a file or module by its last path component, the whole path
 * when the text has a '/'); NULL or "" clears it. Applies to the site list, the call
 * tree and the suggestions. */
void ml_vmodel_set_filter(ml_vmodel_t *m, const char *text);
const char *ml_vmodel_filter(const ml_vmodel_t *m);
/** True when the site passes the filter. */
bool ml_vmodel_site_matches(const ml_vmodel_t *m, const ml_vsite_t *s);

/** Sites passing the filter, in sort order. */
uint32_t ml_vmodel_nsites(const ml_vmodel_t *m);
const ml_vsite_t *ml_vmodel_site_at(const ml_vmodel_t *m, uint32_t i);
/** A site by id (filtered or not), or NULL. */
const ml_vsite_t *ml_vmodel_site(const ml_vmodel_t *m, uint32_t id);
/** The number a sort key stands for. */
uint64_t ml_vmodel_site_cost(const ml_vsite_t *s, ml_vsort_t key);
/** Name of a sort key ("peak", "leaked", ...). */
const char *ml_vmodel_sort_name(ml_vsort_t key);

/** A site's histogram; returns the number of buckets written (0: no data). */
uint32_t ml_vmodel_site_hist(ml_vmodel_t *m, uint32_t site, ml_vhist_t kind, ml_vbucket_t *out,
                             uint32_t max);

/** Suggestions passing the filter (program-wide ones always pass), by
 * estimated saving. */
uint32_t ml_vmodel_nsuggestions(const ml_vmodel_t *m);
const ml_vsuggestion_t *ml_vmodel_suggestion_at(const ml_vmodel_t *m, uint32_t i);
/** The first suggestion about a site, or NULL. */
const ml_vsuggestion_t *ml_vmodel_site_suggestion(const ml_vmodel_t *m, uint32_t site);

/** The timeline, oldest first. */
uint32_t ml_vmodel_npoints(const ml_vmodel_t *m);
const ml_vpoint_t *ml_vmodel_point(const ml_vmodel_t *m, uint32_t i);
uint64_t ml_vmodel_point_value(const ml_vpoint_t *p, ml_vseries_t s);
const char *ml_vmodel_series_name(ml_vseries_t s);
/** The live set near time_ms, largest sites first; returns the number
 * written. Exact at the peak (each site's bytes at the peak) and at the end;
 * elsewhere it is the snapshot the model took last before time_ms while the
 * trace was read (or the program ran), whose time goes to *as_of_ms. */
uint32_t ml_vmodel_live_at(ml_vmodel_t *m, uint32_t time_ms, ml_vlive_t *out, uint32_t max,
                           uint32_t *as_of_ms);

/** The heap map at a moment (at the cursor: the snapshot nearest before
 * time_ms), merged down to at most ncells cells. Returns 0, or -ENOENT when
 * there is none. */
int ml_vmodel_heapmap(ml_vmodel_t *m, ml_vmap_at_t at, uint32_t time_ms, uint32_t ncells,
                      ml_vheapmap_t *out);
/** The sites whose blocks lie in [addr, addr+span) at the moment of a heap
 * map (peak, worst or end), largest first; returns the number written. */
uint32_t ml_vmodel_cell_sites(ml_vmodel_t *m, ml_vmap_at_t at, uint64_t addr, uint64_t span,
                              ml_vlive_t *out, uint32_t max);

/** GPU devices of the trace, in ascending ordinal order (the unattributed
 * device, if any, first); 0 when it has no GPU records. */
uint32_t ml_vmodel_gpu_ndevices(const ml_vmodel_t *m);
/** Device i in full, or NULL. */
const ml_vgpu_device_t *ml_vmodel_gpu_device(const ml_vmodel_t *m, uint32_t i);

/** Work on the UI thread that grows with the sites and their frames (the
 * filter, building the call tree, listing or expanding its rows) calls
 * fn(ctx, what, done, total) as it goes: done is 0 when a piece of work
 * starts, then grows towards total. On a trace of hundreds of thousands of
 * deep stacks such a step takes seconds, and the screen manager says what
 * it does on the status line rather than freeze silently. NULL: none. */
typedef void (*ml_vprogress_fn)(void *ctx, const char *what, uint64_t done, uint64_t total);
void ml_vmodel_set_progress(ml_vmodel_t *m, ml_vprogress_fn fn, void *ctx);

/** Call tree: top-down (from main to the allocator) or bottom-up (from the
 * allocating function outwards). Rows visible with the current expansion,
 * children ordered by the sort key's inclusive cost. */
void ml_vmodel_tree_set_mode(ml_vmodel_t *m, bool bottom_up);
bool ml_vmodel_tree_bottom_up(const ml_vmodel_t *m);
uint32_t ml_vmodel_tree_nrows(ml_vmodel_t *m);
const ml_vtree_row_t *ml_vmodel_tree_row(ml_vmodel_t *m, uint32_t i);
/** Expands or collapses the node on row i; all=true expands the whole subtree. */
void ml_vmodel_tree_toggle(ml_vmodel_t *m, uint32_t row, bool expand, bool all);
/** The row of the node's parent, or the row itself at the top. */
uint32_t ml_vmodel_tree_parent_row(ml_vmodel_t *m, uint32_t row);

#endif
