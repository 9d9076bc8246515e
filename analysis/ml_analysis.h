/* ml_analysis.h - turning a stream of trace records into answers.
 *
 * High-level; may allocate. One analysis session consumes records in trace
 * order (from ml_reader_t or, live, from the collector) with memory
 * proportional to the live set and the number of distinct stacks, never to the
 * trace length. The viewer, the report and the CLI summary all read their
 * numbers from here; nothing in viewer/ or report/ computes a metric itself.
 *
 * Counting rules (DESIGN.md): every malloc-family call that returned a block
 * counts in alloc_calls and bytes_allocated, a realloc as one allocation of
 * its new size; realloc_calls counts realloc and reallocarray alone; a
 * temporary allocation is one freed before any other allocation happened
 * (heaptrack's definition); the peak is the maximum of live requested heap
 * bytes, mmap excluded.
 *
 * Two phases. ml_analysis_feed() is the streaming pass: O(1) work per record
 * (hash maps keyed by block address, stack id and page). ml_analysis_build()
 * then derives everything that needs names or sorting: it strips the
 * allocator's own frames, merges stacks into sites, symbolizes them with
 * libdw, classifies leaks, computes fragmentation at the peak, the worst
 * moment and the end, and builds the call tree. build() may be called again
 * after more records were fed (the live viewer does); every pointer returned
 * by the query functions below stays valid until the next build() or free().
 *
 * The algorithms (lazy per-site peak snapshots, the graveyard that
 * reconstructs the heap as it was at the peak, page accounting, the
 * reachability scan) are explained in docs/analysis.md.
 *
 * Ownership. A session owns what its queries return: strings, frames, sites,
 * groups, the timeline, the flame tree, the GPU state. Those pointers stay
 * valid until the next ml_analysis_build() or ml_analysis_free(); feeding
 * more records does not move them, it only makes them stale. What a function
 * hands over says so and is malloc'd (ml_analysis_live_blocks,
 * ml_analysis_snapshot): free() it. A fed record is read, never kept.
 *
 * Errors. Functions that can fail return 0 or a negative errno, with a
 * message in `err` where they take one; queries cannot fail. Imperfect input
 * (frees of unknown addresses, a truncated tail, a damaged snapshot) is
 * counted and reported as a warning, not an error (STYLE.md 10).
 *
 * Out of memory. ml_analysis_feed() cannot fail: what memory does not let it
 * keep (a live block, a stack node or statistics slot, a module, a thread, a
 * page counter, a block of the peak's graveyard) is counted, and one warning
 * (ml_analysis_warnings, shown by every report) says how many blocks were not
 * tracked and how many records were kept incompletely: the numbers are then
 * known to undercount, never silently wrong. ml_analysis_build() returns
 * -ENOMEM and leaves empty results; the fed state is intact and a later
 * build may succeed. The tables the streaming pass grows allocate through
 * ml_alloc_hooks_t (ml_util.h), which is how tests make them fail.
 *
 * Threads. A session is not thread-safe, and neither are its const queries:
 * ml_analysis_build() replaces what they return, ml_analysis_feed() changes
 * the totals they point to, and ml_gpu_stack_frames() fills the symbolizer's
 * cache. A program that feeds in one thread and reads in another holds one
 * lock around both: the live viewer (viewer/model.c) holds ml_vmodel_lock()
 * while its collector thread feeds and while its UI thread builds and reads.
 * Different sessions share nothing and may be used from different threads
 * at once. ml_analysis_snapshot() runs a helper thread of its own and joins
 * it before it returns.
 */
#ifndef ML_ANALYSIS_H
#define ML_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ml_trace_io.h"
#include "ml_util.h" /* ml_fmt_bytes, for the tools that print these numbers */

typedef struct {
    uint64_t alloc_calls, free_calls, realloc_calls, bytes_allocated, temporary_allocs;
    uint64_t mmap_calls, munmap_calls;
    uint64_t heap_bytes, heap_blocks;   /* live now (at the end once finished) */
    uint64_t peak_bytes;                /* maximum of heap_bytes */
    uint32_t peak_time_ms;
    uint64_t mmap_bytes, peak_mmap_bytes; /* live anonymous mappings */
    uint64_t unknown_frees;             /* frees of pointers never seen allocated */
    uint64_t calls_by_kind[ML_KIND_COUNT_];
    uint32_t last_time_ms;
    uint64_t sample_bytes;              /* 0 unless the trace was sampled */
    bool complete, truncated;
    ml_rec_end_t end;                   /* valid when complete */
    /* since issue 3 */
    uint64_t peak_blocks;               /* live blocks at the peak */
    uint64_t records;                   /* records fed */
    uint64_t rss_bytes, peak_rss_bytes; /* last and largest RSS sample (0: none) */
    uint64_t gpu_bytes, peak_gpu_bytes; /* live GPU bytes (fed by the GPU collector's records) */
    bool exited;                        /* an ML_T_PROC_EXIT was seen */
    /* since issue 13: the kernel's high-water mark of the resident set
     * (ML_T_PEAK_RSS), unlike peak_rss_bytes (the largest of the samples
     * taken every ML_RSS_SAMPLE_MS, which misses short peaks) */
    uint64_t hwm_rss_bytes;             /* 0 with hwm_rss_source ML_HWM_NONE: unknown */
    uint8_t hwm_rss_source;             /* ML_HWM_* */
    /* since `memlens attach`: the usable bytes of the unknown frees, where
     * the free record carries them (0 when unknown) */
    uint64_t unknown_free_bytes;
    /* since 1.8: the longest interval the collector said it sampled RSS at
     * (ML_T_RSS.interval_ms: longer than ML_RSS_SAMPLE_MS when many traced
     * processes were alive at once); 0: not said. ml_rss_interval_ms(). */
    uint32_t rss_interval_ms;
    /* since 2026-12-08 (snapshot version 8): the anonymous mappings the
     * allocator made for its heap (ML_EVF_ALLOCATOR: jemalloc, mimalloc,
     * any allocator but glibc's that calls mmap through its PLT). They hold
     * the heap blocks counted above, so they are not in mmap_calls,
     * munmap_calls, calls_by_kind, mmap_bytes or peak_mmap_bytes (glibc's
     * own mappings reach no hook and are in none of them either). An munmap
     * counts here when every page it took was the allocator's. */
    uint64_t alloc_mmap_calls, alloc_munmap_calls; /* mremap included */
    uint64_t alloc_mmap_bytes, peak_alloc_mmap_bytes;
} ml_totals_t;

/* How often the collector samples RSS (ML_T_RSS): the labels of the sampled
 * curve say it. */
#define ML_RSS_SAMPLE_MS 10

/** The interval the labels of the sampled RSS curve give: the trace's own
 * (ml_totals_t.rss_interval_ms), else ML_RSS_SAMPLE_MS. */
static inline uint32_t ml_rss_interval_ms(const ml_totals_t *t) {
    return t->rss_interval_ms > ML_RSS_SAMPLE_MS ? t->rss_interval_ms : ML_RSS_SAMPLE_MS;
}

/* What each number of ml_frag_t is, in the words the text report, the JSON
 * (fragmentation.labels), the HTML page and the viewer all use (issue 13):
 * page utilization is not heap fragmentation, and says so. */
#define ML_LABEL_PAGE_UTILIZATION "page utilization (live bytes / bytes of the pages holding them)"
#define ML_LABEL_EXTERNAL "external fragmentation of free heap (1 - largest free gap / all free)"
#define ML_LABEL_INTERNAL "internal waste (usable - requested bytes, share of usable)"
#define ML_LABEL_HEAP_TO_RSS "live heap / RSS (last sample)"
#define ML_LABEL_PEAK_RSS "peak RSS (kernel high-water mark)"

typedef struct ml_analysis_s ml_analysis_t;

/** Creates an empty analysis session (free it with ml_analysis_free()).
 * Returns 0 or -ENOMEM. */
int ml_analysis_new(ml_analysis_t **out);

/** A session that keeps only the totals, the peak (bytes and time) and the
 * live block map: all `memlens run` needs for its summary and the exit scan,
 * fed live while the program runs. Per-site statistics, pages, moments,
 * histograms and the timeline are not kept; queries beyond
 * ml_analysis_totals() and ml_analysis_live_blocks() are not for it. */
int ml_analysis_new_light(ml_analysis_t **out);

/** Consumes one record, in trace order. Never fails; out of memory is
 * counted and warned about (see the top of this file). */
void ml_analysis_feed(ml_analysis_t *a, const ml_record_t *rec);

/** Hints that a record about block `ptr` will be fed soon: starts loading
 * the live-map slot it hashes to. The collector calls it a few events ahead,
 * which hides most cache misses of a large live set. */
void ml_analysis_prefetch(const ml_analysis_t *a, uint64_t ptr);

/** Reads a whole trace file into the session. Returns 0, or a negative errno
 * with a message in err: the file cannot be opened or read, or a structural
 * record is malformed (what was fed before it stays in the session). A
 * truncated trace is not an error (totals and a warning say so). */
int ml_analysis_load(ml_analysis_t *a, const char *path, char *err, size_t errlen);

#define ML_LOAD_PROGRESS 0x1 /* progress bar on stderr when it is a terminal and the trace is big */
#define ML_LOAD_SNAPSHOT 0x2 /* start from the trace's analysis snapshot, when it has a sound one,
                              * instead of replaying its records (see below) */
#define ML_LOAD_NO_REPLAY 0x4 /* with ML_LOAD_SNAPSHOT: when the trace has no sound snapshot, feed
                               * nothing and return -ENOENT (the viewer then replays in steps) */
#define ML_LOAD_PACKED 0x8 /* with ML_LOAD_SNAPSHOT: keep the live heap as the snapshot encodes it, and
                            * decode it on each walk (a report walks it once or twice); the first change
                            * to it builds the usual set. Less memory and time to load a big heap. */

/** ml_analysis_load() with ML_LOAD_* flags. */
int ml_analysis_load_ex(ml_analysis_t *a, const char *path, unsigned flags, char *err,
                        size_t errlen);

/* Snapshots. The collector keeps a full session while it records and saves
 * it at the end of the trace; ml_analysis_load_ex(ML_LOAD_SNAPSHOT) restores
 * it, so a report skips the replay. Builds from a restored session and from
 * a replay are the same (analysis/snapshot.c, tests/e2e/test_snapshot.c). */
#define ML_ANALYSIS_SNAPSHOT_VERSION 8
/* Snapshots before version 7 counted each block of a sampled trace as one
 * block (and one free, one temporary allocation): a sampled trace's older
 * snapshot is not restored, its records are replayed (analysis/load.c). */
#define ML_ANALYSIS_SNAPSHOT_WEIGHTED_BLOCKS 7
/* Version 1 snapshots (no GPU state: sessions with GPU records had none)
 * restore too; only older versions than this are replayed. */
#define ML_ANALYSIS_SNAPSHOT_OLDEST 1

/** Serializes a fed session (not a light one: -ENOTSUP) into a malloc'd
 * buffer (*out, *len; free() it), GPU state included. Returns 0 or a
 * negative errno (-ENOMEM; -ENOTSUP for state it could not restore exactly:
 * the collector then writes none). */
int ml_analysis_snapshot(const ml_analysis_t *a, void **out, size_t *len);
/** The same in the layout of `version`: ML_ANALYSIS_SNAPSHOT_VERSION, or 4
 * (the live heap blocks as a hash map with slots, as memlens wrote them
 * before version 5), which the tests of older snapshots start from.
 * -EINVAL for another version. */
int ml_analysis_snapshot_version(const ml_analysis_t *a, uint32_t version, void **out, size_t *len);

/** Where ml_analysis_snapshot_stream() hands its bytes: 0 to go on, or a
 * negative errno that stops it (and is returned by it). */
typedef int (*ml_analysis_out_fn)(void *ctx, const void *p, size_t n);

/** The same bytes as ml_analysis_snapshot_version(), handed to out(ctx,
 * ...) in order, in pieces of up to about 1 MiB (one piece may be longer:
 * a long string), through a buffer of that size instead of one that holds
 * them all: the collector writes a snapshot of millions of live blocks with
 * bounded memory (issue 12). Sets *raw_len to the bytes handed. Returns 0,
 * out's error, or the errors of ml_analysis_snapshot_version(); after an
 * error, the pieces already handed are not a snapshot and must be dropped.
 * Not thread-safe with feeding `a` (as the buffer variant). */
int ml_analysis_snapshot_stream(const ml_analysis_t *a, uint32_t version, ml_analysis_out_fn out, void *ctx,
                                uint64_t *raw_len);

/** Fills a fresh session (nothing fed yet) from snapshot bytes (the caller
 * keeps them). Every count and index is checked: damaged bytes give -EINVAL
 * and a message in err (also when memory ran out while restoring, said in
 * the message), and leave `a` as it was. */
int ml_analysis_restore(ml_analysis_t *a, const void *data, size_t len, char *err, size_t errlen);

/** True when the session came from a trace's snapshot (no replay). */
bool ml_analysis_from_snapshot(const ml_analysis_t *a);

/** Running totals (final once the whole trace was fed). */
const ml_totals_t *ml_analysis_totals(const ml_analysis_t *a);

/* Why the blocks live at the end of a trace are not leaks: the process did
 * not exit. `when` completes "live ..." and `why` says what happened. */
typedef struct {
    const char *when; /* "when the image was replaced by exec" */
    const char *why;  /* "exec gave its memory back" */
} ml_unjudged_t;

/** Whether the blocks live at the end of the trace with totals `t` go
 * unjudged: its image was replaced by exec, memlens stopped recording
 * while the program still ran (valgrind reports no leaks for either), or
 * the trace was cut short before the process' exit (ML_T_PROC_EXIT) was
 * recorded: the partial trace of a recording still running, or of a
 * collector that was killed, shows no exit to judge. Then the analysis
 * counts no leak and no leak kind (ml_leaks_t.judged is false) and says
 * so; otherwise (an exit, a death by a signal) returns false. `out` may
 * be NULL. */
bool ml_totals_unjudged(const ml_totals_t *t, ml_unjudged_t *out);

/* Heap blocks live now, split by the exit scan's verdicts: lost (definite,
 * indirect or possible: what "leaked" means everywhere) and reachable.
 * Without a scan every live block counts as lost. */
typedef struct {
    uint64_t lost_bytes, lost_blocks;
    uint64_t reachable_bytes, reachable_blocks;
    bool scanned;
} ml_live_split_t;

/** The split above, without a build (a pass over the live blocks). */
ml_live_split_t ml_analysis_live_split(const ml_analysis_t *a);

/** Frees the session and everything it owns (NULL is fine). */
void ml_analysis_free(ml_analysis_t *a);

/* ------------------------------------------------------------------------- */
/* Live blocks (the collector's exit-time reachability scan)                 */
/* ------------------------------------------------------------------------- */

typedef struct {
    uint64_t ptr, size; /* requested size */
} ml_live_block_t;

/** Copies the blocks live now, sorted by address, into a malloc'd array
 * (*out, free() it). Returns the count, or -ENOMEM. */
int64_t ml_analysis_live_blocks(const ml_analysis_t *a, ml_live_block_t **out);
/** How many blocks the live set holds: recorded blocks, one each (in a
 * sampled trace, totals.heap_blocks is their estimate of the heap's). */
uint64_t ml_analysis_live_count(const ml_analysis_t *a);

/** Their allocation sequence numbers (the order of allocation; a
 * realloc's is the realloc's), in the same order, into *out (free() it).
 * Returns the count, or -ENOMEM. */
int64_t ml_analysis_live_seqs(const ml_analysis_t *a, uint64_t **out);

/* ------------------------------------------------------------------------- */
/* Suppressions (LeakSanitizer's `leak:PATTERN` files)                       */
/* ------------------------------------------------------------------------- */

typedef struct ml_suppressions_s ml_suppressions_t;

/** Parses suppression text: one `leak:PATTERN` per line, `#` comments, blank
 * lines. PATTERN matches a frame's function, file or module as a substring;
 * `*` matches any run of characters, a leading `^` / a `$` anchor it
 * (ml_suppression_match).
 * Other LSan types are refused. Returns 0 (*out: free it with
 * ml_suppressions_free), -EINVAL with "line N: why", or -ENOMEM. A set is
 * read-only except for its hit counters, which each build that uses it
 * updates: one build at a time per set. */
int ml_suppressions_parse(const char *text, ml_suppressions_t **out, char *err, size_t errlen);

/** Reads and parses a suppressions file: as above, or the file's errno. */
int ml_suppressions_load(const char *path, ml_suppressions_t **out, char *err, size_t errlen);

void ml_suppressions_free(ml_suppressions_t *s);

/** Number of patterns, and pattern i with how many leaked blocks/bytes it
 * suppressed in the last build() that used it. */
size_t ml_suppressions_count(const ml_suppressions_t *s);
const char *ml_suppressions_pattern(const ml_suppressions_t *s, size_t i, uint64_t *blocks,
                                    uint64_t *bytes);

/** True if `pattern` (the part after `leak:`) matches `text` as LSan's
 * TemplateMatch does: each literal run at its first occurrence, without
 * backtracking (`beta$` does not match "betabeta"); a `$` ends the pattern;
 * an empty or NULL text matches nothing. */
bool ml_suppression_match(const char *pattern, const char *text);

/* ------------------------------------------------------------------------- */
/* Build: sites, symbols, leaks, fragmentation, call tree                    */
/* ------------------------------------------------------------------------- */

/* The flame tree's pruning by default (ml_analysis_flame). */
#define ML_FLAME_MAX_NODES 5000
#define ML_FLAME_MIN_FRACTION 0.001

typedef struct {
    bool no_symbols;                      /* skip libdw (fuzzing, tests): functions stay "[module+0x..]" */
    const ml_suppressions_t *suppressions; /* may be NULL; its hit counters are updated */
    uint32_t flame_max_nodes;             /* 0: ML_FLAME_MAX_NODES */
    double flame_min_fraction;            /* 0: ML_FLAME_MIN_FRACTION */
    /* Functions the program allocates through (--alloc-fn), treated as the
     * allocator: their frames at the top of a stack are dropped as malloc's
     * are, so that a site is named by their caller. Each is a function's
     * name, whole or as shown (ml_frame_short_name), `*` matching any run of
     * characters. The strings must outlive the analysis' builds. */
    const char *const *alloc_fns;
    size_t nalloc_fns;
    /* No call tree (ml_analysis_flame() then has no node): a merged report
     * builds one tree of every process' sites, and each process' own was
     * a tenth of `memlens report DIR`'s time, unused. */
    bool no_calltree;
} ml_build_opts_t;

/** The --alloc-fn patterns of the last build, and for pattern i how many
 * distinct recorded stacks had a frame it dropped (0: it named nothing). */
/* For the report's stack table (report/json.c), not an interface: site i
 * (ml_site_t.id) has the frames of trie node site_node[i]'s expansion from
 * position site_skip[i], then those of its ancestors (parent[]) up to node
 * 0; nframes[n] is node n's expansion length (0: unknown). Returns the
 * trie's node count then, 0 when the last build kept none. */
uint32_t ml__analysis_site_trie(const ml_analysis_t *a, const uint32_t **site_node, const uint32_t **site_skip,
                                const uint32_t **parent, const uint8_t **nframes);

size_t ml_analysis_alloc_fns(const ml_analysis_t *a, const char *const **patterns,
                             const uint64_t **hits);

/** True if `pattern` (an --alloc-fn: `*` matches any run, nothing else is
 * special) matches the whole of `name`. */
bool ml_alloc_fn_match(const char *pattern, const char *name);

/** Derives sites, symbols, leaks, fragmentation and the call tree from what
 * was fed so far, replacing the results of the last build. Returns 0 or
 * -ENOMEM (message in err; the results are then empty, the fed state
 * intact). Symbolization problems (missing files, build-id mismatches) are
 * warnings, not errors. */
int ml_analysis_build(ml_analysis_t *a, const ml_build_opts_t *opts, char *err, size_t errlen);

/* Leak kinds, as valgrind memcheck and LeakSanitizer name them. */
typedef enum {
    ML_LEAK_DEFINITE = 0,  /* no pointer to the block anywhere the scan looked */
    ML_LEAK_INDIRECT = 1,  /* pointed to only from definitely leaked blocks */
    ML_LEAK_REACHABLE = 2, /* still pointed to from globals or stacks at exit */
    ML_LEAK_POSSIBLE = 3,  /* reached only through pointers into its inside (valgrind's
                            * "possibly lost") */
    ML_LEAK_KINDS
} ml_leak_kind_t;

const char *ml_leak_kind_name(ml_leak_kind_t k);

typedef struct {
    const char *function; /* demangled; "[module+0xOFF]" or "[0xADDR]" when unknown */
    const char *file;     /* source file, NULL without debug info */
    const char *module;   /* path of the module holding the address, NULL if none */
    uint64_t address;     /* the return address as recorded (the call is at address - 1) */
    uint32_t line;        /* 0 without debug info */
    bool inlined;         /* this frame was inlined into the next (outer) one */
    bool own;             /* in the program's own code (see ml_frame_is_own_code) */
    uint8_t role;         /* the symbolizer's memo of what the frame is (analysis/symbols.c);
                             0 in a frame made elsewhere: then computed on each ask */
} ml_frame_t;             /* 40 bytes: one per frame of every site */

/* The program's own code, where a site is named (docs/analysis.md, "Site
 * names"): a frame is its own when its module is the traced executable or
 * a shared object outside the system's directories (/usr/ but /usr/local/,
 * /lib*, /bin, /sbin, /opt), memlens' own library excepted, and its source
 * file, when known, is not a system header or library source (under
 * /usr/include/ or /usr/lib/). Inlined std::vector code in the program is
 * therefore not its own; the program's code that called it is. `exe` is
 * the traced executable's path (ml_process_info_t.exe), NULL if unknown. */
bool ml_frame_is_own_code(const char *module, const char *file, const char *exe);

/* A function name shortened for display: template arguments collapsed to
 * "<…>", the argument list and qualifiers after it dropped, and the return
 * type in front of it dropped, e.g. "void std::vector<int, std::allocator<int>
 * >::_M_realloc_insert<int const&>(...)" gives
 * "std::vector<…>::_M_realloc_insert<…>". Operators keep their symbols
 * ("operator<<", "operator()", "operator new[]"), "(anonymous namespace)"
 * and lambdas ("{lambda(int)#1}") stay. Names without '<', '(' or ' ' (C
 * functions, "[module+0xOFF]") come back unchanged. Writes at most len
 * bytes with the NUL (cutting at a character boundary) and returns buf. */
const char *ml_frame_short_name(const char *full, char *buf, size_t len);

/** Symbol tables and debug info shared by the analyses that follow (on:
 * `memlens report` of many traces), by module path and build-id, instead of
 * opened by each analysis; off frees them. The analyses that share them
 * must be built one at a time (not from two threads). */
void ml_symbols_share(bool on);

/* One allocation site: a unique stack once the allocator's own frames are
 * removed. Metrics are per site; the strategy advisor reads the size and
 * lifetime summaries. */
typedef struct {
    uint32_t id;              /* index in the site table of this build */
    const ml_frame_t *frames; /* innermost first; frames[0] called the allocator */
    uint32_t nframes;
    uint32_t headline;        /* the frame that names the site: the first of the program's
                                 own code (frame.own), 0 when there is none; the frames
                                 before it (library code) stay in frames[] */
    uint32_t stacks;          /* recorded stacks merged into this site */
    uint64_t alloc_calls, bytes_allocated, temporary_allocs, realloc_calls;
    uint64_t freed_blocks;    /* blocks of this site that were freed (or moved by realloc) */
    uint64_t peak_bytes, peak_blocks;     /* live at the global peak */
    /* Leaked: definite + indirect + possible, what "leaked" means
     * everywhere (the headline ml_leaks_t.lost_bytes is their sum over
     * sites). Traces without an exit scan count every live block definite. */
    uint64_t leaked_bytes, leaked_blocks;
    uint64_t live_at_exit_bytes, live_at_exit_blocks; /* live at the end, every kind (reachable too) */
    uint64_t leaked_kind_bytes[ML_LEAK_KINDS], leaked_kind_blocks[ML_LEAK_KINDS];
    uint64_t min_size, max_size;          /* requested sizes seen (0/0 without allocations) */
    uint64_t size_log2_mask;  /* bit k: a request of (2^(k-1), 2^k] bytes was seen */
    uint64_t lifetime_ms_sum, lifetime_ms_max; /* over freed blocks */
    uint64_t lifetime_log2_mask; /* bit k: a freed block lived (2^(k-1), 2^k] ms (bit 0: <= 1) */
    uint64_t thread_mask;     /* bit t: thread index t allocated here (t >= 63 share bit 63) */
    uint32_t pinned_pages;    /* pages holding one of its blocks live at the end */
    uint32_t sparse_pinned_pages; /* of those, pages less than 25 % used by live blocks */
    bool suppressed;          /* its leaks match a suppression */
    const char *suppressed_by;
} ml_site_t;

/** The site table of the last build (n in *count), in no particular order;
 * ids are indexes. */
const ml_site_t *ml_analysis_sites(const ml_analysis_t *a, size_t *count);

/* Blocks live at the end, grouped by site and kind. */
typedef struct {
    uint32_t site;
    ml_leak_kind_t kind;
    uint64_t bytes, blocks;
    bool suppressed;
} ml_leak_group_t;

typedef struct {
    uint64_t bytes, blocks;                      /* everything live at the end */
    uint64_t kind_bytes[ML_LEAK_KINDS], kind_blocks[ML_LEAK_KINDS];
    uint64_t suppressed_bytes, suppressed_blocks;
    /* "Leaked" everywhere (run summary, reports, viewer, page, gates): definite +
     * indirect + possible. Reachable blocks are shown beside it, never in it. */
    uint64_t lost_bytes, lost_blocks;
    uint64_t gate_bytes;    /* lost (definite + indirect + possible), not suppressed: what
                             * --fail-on-leak compares */
    bool judged;            /* false: the process did not exit (ml_totals_unjudged), so
                             * nothing is lost and no kind is given; bytes/blocks
                             * still count what was live at the end */
    bool scanned;           /* an exit-time reachability scan classified the blocks */
    int32_t scan_status;    /* 0, or -errno when the scan failed */
    uint64_t scan_root_bytes, scan_heap_bytes, scan_duration_us;
    uint64_t unscanned_blocks; /* live at the end without a verdict (allocated after the scan) */
    const ml_leak_group_t *groups; /* sorted by bytes, largest first */
    size_t ngroups;
} ml_leaks_t;

const ml_leaks_t *ml_analysis_leaks(const ml_analysis_t *a);

/* Fragmentation at one moment (docs/analysis.md explains each number). */
typedef enum { ML_MOMENT_PEAK = 0, ML_MOMENT_END = 1, ML_MOMENT_WORST = 2, ML_MOMENTS } ml_moment_t;

#define ML_HEAP_MAP_CELLS 4096

typedef struct {
    bool valid;
    uint32_t time_ms;
    uint64_t live_bytes, live_blocks;
    /* (a) pages */
    uint64_t pages, page_bytes;  /* pages holding at least one live block */
    double page_utilization;     /* live_bytes / page_bytes (1 when nothing is live) */
    /* (b) gaps between live blocks inside the heap's regions */
    uint64_t free_bytes, largest_free_bytes, gaps, regions, span_bytes;
    double external;             /* 1 - largest/free (0 without free bytes) */
    /* (c) internal waste: usable size - requested; the usable size is the one
     * recorded from the allocator, or estimated from its size classes */
    const char *allocator_model; /* "glibc", "jemalloc", "tcmalloc", "mimalloc" */
    uint64_t usable_bytes, internal_waste_bytes;
    uint64_t usable_measured_blocks; /* blocks whose usable size was recorded (the rest: estimated) */
    double internal_ratio;       /* waste / usable */
    /* (d) glibc's counters, the last ML_T_MALLINFO at or before the moment */
    bool have_mallinfo;
    uint32_t mallinfo_time_ms;
    uint64_t arena, hblkhd, uordblks, fordblks, keepcost;
    /* (e) RSS against the live heap, the last RSS sample at or before the moment */
    bool have_rss;
    uint64_t rss_bytes;
    double heap_to_rss;          /* live_bytes / rss_bytes */
    /* heap map: page utilization of the busiest region, in cells */
    uint64_t map_base, map_cell_bytes;
    uint32_t map_ncells;
    const int8_t *map_cells;     /* 0..100, or -1: no page held in the cell */
} ml_frag_t;

const ml_frag_t *ml_analysis_frag(const ml_analysis_t *a, ml_moment_t m);

/* Timeline, downsampled to at most 1000 points; the last one is the end. */
typedef struct {
    uint32_t time_ms;
    uint64_t heap_bytes; /* the largest value in the interval the point stands for */
    uint64_t rss_bytes, mmap_bytes, gpu_bytes;
    uint64_t alloc_calls; /* cumulative */
} ml_timeline_point_t;

#define ML_TIMELINE_MAX 1000

size_t ml_analysis_timeline(const ml_analysis_t *a, const ml_timeline_point_t **points);

/* Histograms. Size bucket k counts requests of (2^(k-1), 2^k] bytes (bucket 3
 * also takes 0..8); lifetime bucket k freed blocks that lived (2^(k-1), 2^k]
 * ms (bucket 0: up to 1 ms). */
typedef struct {
    uint64_t size_count[64], size_bytes[64];
    uint32_t size_first, size_last;     /* buckets to print, inclusive */
    uint64_t life_count[64];
    uint32_t life_last;
    uint64_t live_at_end;               /* blocks never freed (not in life_count) */
} ml_histograms_t;

const ml_histograms_t *ml_analysis_histograms(const ml_analysis_t *a);

typedef struct {
    uint32_t index, tid;
    const char *name;
    uint64_t alloc_calls, bytes_allocated, free_calls, temporary_allocs;
} ml_thread_stats_t;

size_t ml_analysis_threads(const ml_analysis_t *a, const ml_thread_stats_t **threads);

/* ------------------------------------------------------------------------- */
/* The call tree (calltree.c; docs/analysis.md, "Call tree")                 */
/* ------------------------------------------------------------------------- */

/* The costs of a call-tree node (and the viewer's sort keys, in this order). */
typedef enum {
    ML_COST_PEAK = 0,  /* peak_bytes */
    ML_COST_LEAKED,    /* leaked_bytes */
    ML_COST_ALLOCATED, /* bytes_allocated */
    ML_COST_CALLS,     /* alloc_calls */
    ML_COST_TEMPORARY, /* temporary_allocs */
    ML_COSTS
} ml_cost_t;

/* A node is a function in its caller's context. Node 0 is the root, "all";
 * a child of node P stands for the frames of one function (one function
 * name, file and module: the merge key) that P's paths reach next, whatever
 * line they pass through. Without debug info a function with an ELF symbol
 * merges per module, an unnamed one ("[module+0xOFFSET]") per return
 * address. Nodes are stored parent before child. */
typedef struct {
    const ml_frame_t *frame; /* the first frame merged into the node (it points into the
                              * sites, and gives the node's line); the root's is named "all"
                              * with no file and no module */
    int32_t parent, first_child, next_sibling; /* -1: none */
    uint32_t depth;          /* 0: the root */
    uint64_t incl[ML_COSTS]; /* sum over the sites whose path passes through the node */
    uint64_t self[ML_COSTS]; /* sum over the sites whose path ends at the node */
} ml_calltree_node_t;

/** The whole call tree of the last build, top-down (from the outermost
 * frames, a thread's start or main, to the functions that called the
 * allocator), over every site. Returns the node count (0 before a build). */
size_t ml_analysis_calltree(const ml_analysis_t *a, const ml_calltree_node_t **nodes);

/** The flame tree: the call tree of ml_analysis_calltree() pruned for the
 * report (ml_build_opts_t.flame_max_nodes and flame_min_fraction): the nodes
 * that hold at least that fraction of the root's bytes allocated, peak bytes,
 * leaked bytes or calls, at most that many, the most important first (a kept
 * set is always a subtree). Links and depths are those of the pruned tree;
 * costs are the whole tree's, so a pruned child's cost stays in its parent's
 * inclusive cost. Returns the node count (0 before a build). */
size_t ml_analysis_flame(const ml_analysis_t *a, const ml_calltree_node_t **nodes);

/** The flame tree bottom-up (inverted): the functions that called the
 * allocator under the root, then their callers, over every site (the merge
 * key and costs of ml_calltree_build), pruned like ml_analysis_flame() with
 * the build's limits. Writes a malloc'd node array to *out (free() it; it
 * points into the sites). Returns the node count (0 before a build) or
 * -ENOMEM. */
int64_t ml_analysis_flame_inverted(const ml_analysis_t *a, ml_calltree_node_t **out);

/* Per-site time buckets (timebuckets.c): the trace's span [0, last record's
 * time] cut into `count` equal slices of width_ms (at least 1 ms); for each
 * site, what it allocated in each slice, and which of those blocks were still
 * live at the end, by leak kind. Only the non-empty buckets are kept, in
 * bucket order (live: then kind order). In sampled traces calls and bytes
 * are weighted like the site's own totals (each bucket rounded). */
typedef struct {
    uint32_t bucket;
    uint64_t calls, bytes;
} ml_bucket_alloc_t;

typedef struct {
    uint32_t bucket;
    ml_leak_kind_t kind;
    uint64_t blocks, bytes;
} ml_bucket_live_t;

typedef struct ml_time_buckets_s ml_time_buckets_t;

/** Computes the time buckets of the sites of the last build of `a`, reading
 * the allocations again from `trace_path` (the trace `a` was loaded from)
 * and the blocks live at the end from `a`. At most `nbuckets` buckets (1 to
 * 4096; fewer when the span is shorter than nbuckets ms). 0, or -errno with
 * a message in err. */
int ml_analysis_time_buckets(const ml_analysis_t *a, const char *trace_path, uint32_t nbuckets,
                             ml_time_buckets_t **out, char *err, size_t errlen);
/** The number of buckets; their width in ms in *width_ms (may be NULL). */
uint32_t ml_time_buckets_count(const ml_time_buckets_t *tb, uint32_t *width_ms);
/** A site's non-empty allocation buckets (n in *n; NULL/0 for an unknown site). */
const ml_bucket_alloc_t *ml_time_buckets_alloc(const ml_time_buckets_t *tb, uint32_t site, size_t *n);
/** A site's blocks live at the end, by allocation bucket and kind. */
const ml_bucket_live_t *ml_time_buckets_live(const ml_time_buckets_t *tb, uint32_t site, size_t *n);
void ml_time_buckets_free(ml_time_buckets_t *tb);
/** The same in steps, for a caller whose own read of the trace can feed the
 * allocations (`memlens report`: the strategy advisor's first pass): new,
 * then every record of the trace to ml_time_buckets_acc_record and NULL
 * after the last (or ml_time_buckets_acc_read, which reads the trace from
 * its start itself), then finish. Finish refuses an accumulator that was
 * not fed to the end. ml_time_buckets_acc_record takes the accumulator as
 * a void * so that it can be passed as a record hook. */
typedef struct ml_time_buckets_acc_s ml_time_buckets_acc_t;
int ml_time_buckets_acc_new(const ml_analysis_t *a, uint32_t nbuckets, ml_time_buckets_acc_t **out, char *err,
                            size_t errlen);
void ml_time_buckets_acc_record(void *acc, const ml_record_t *rec);
bool ml_time_buckets_acc_complete(const ml_time_buckets_acc_t *acc);
int ml_time_buckets_acc_read(ml_time_buckets_acc_t *acc, const char *trace_path, char *err, size_t errlen);
int ml_time_buckets_acc_finish(ml_time_buckets_acc_t *acc, ml_time_buckets_t **out, char *err, size_t errlen);
void ml_time_buckets_acc_free(ml_time_buckets_acc_t *acc);

/** Builds the call tree of sites[0..nsites) (those with use[i] true; use may
 * be NULL), with the merge key above, top-down or bottom-up (frames[0], the
 * allocating function, under the root, then its callers). The sites must
 * come from one build: frames are compared by their interned strings. The
 * viewer uses it for the tree of the sites its filter keeps. Writes a
 * malloc'd node array to *out (free() it; it points into the sites, so it is
 * valid as long as they are). Returns the node count (at least 1: the root)
 * or -ENOMEM. */
int64_t ml_calltree_build(const ml_site_t *sites, size_t nsites, const bool *use, bool bottom_up,
                          ml_calltree_node_t **out);
/** The same, calling progress(ctx, done, nsites) before every few thousand
 * sites (done counts the sites looked at, 0 first): a build of hundreds of
 * thousands of deep stacks takes seconds, and the viewer, which runs it on
 * its UI thread, says how far it got. progress may be NULL. */
int64_t ml_calltree_build_progress(const ml_site_t *sites, size_t nsites, const bool *use,
                                   bool bottom_up, ml_calltree_node_t **out,
                                   void (*progress)(void *ctx, size_t done, size_t total),
                                   void *ctx);

/* What ran. */
typedef struct {
    uint32_t pid, ppid, page_size;
    uint64_t start_realtime_ns, sample_bytes;
    const char *exe, *parent_trace, *producer;
    uint32_t argc;
    const char *const *argv;
    uint32_t unwinder, depth;
    uint32_t options; /* ML_OPT_* of the process record: ML_OPT_ATTACHED for `memlens attach` */
} ml_process_info_t;

const ml_process_info_t *ml_analysis_process(const ml_analysis_t *a);

/* The modules the trace recorded (the program, its libraries, dlopened
 * ones, also those dlclosed before the end), in the order it named them. */
typedef struct {
    const char *path;          /* as recorded */
    uint64_t base;             /* load bias: a segment at vaddr V is mapped at base + V */
    uint64_t lo, hi;           /* [lo, hi): the addresses its loadable segments covered */
    const uint8_t *build_id;   /* NULL when none was recorded */
    uint32_t build_id_len;
    bool loaded;               /* still loaded at the end of what was fed */
} ml_module_t;

/** How many modules the session knows; ml_analysis_module() copies module i
 * into *out (-ERANGE past the end). Pointers stay valid until
 * ml_analysis_free(). (modules.c) */
size_t ml_analysis_module_count(const ml_analysis_t *a);
int ml_analysis_module(const ml_analysis_t *a, size_t i, ml_module_t *out);

/** Warnings collected while feeding and building (build-id mismatches,
 * missing files, unknown frees, truncation, what out of memory lost), owned
 * by the session; the array may move when more are added. */
size_t ml_analysis_warnings(const ml_analysis_t *a, const char *const **warnings);

/** What running out of memory cost the session while it was fed: heap
 * blocks and mappings it did not track, and records it kept incompletely
 * (the warning in ml_analysis_warnings says the same, when it had memory
 * for its text). Both 0 when nothing was lost. */
void ml_analysis_lost(const ml_analysis_t *a, uint64_t *blocks, uint64_t *records);

/** An attached trace (memlens attach) whose process ended during the
 * window without an exit memlens saw (SIGKILL, a raw exit_group): its
 * trace says so (ML_UNTRACED_ENDED). Then what was live at its end is not
 * what was live at a detach: reports say "at its end", not "at detach". */
bool ml_analysis_ended_in_window(const ml_analysis_t *a);

/** Adds a warning of this report (the caller's knowledge, such as the trace
 * an exec led to): shown with the others, dropped by the next build and
 * never saved in a snapshot. */
void ml_analysis_warn_report(ml_analysis_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------------- */
/* Diff of two built sessions                                                */
/* ------------------------------------------------------------------------- */

typedef struct {
    uint64_t peak_bytes, leaked_bytes, alloc_calls, bytes_allocated;
} ml_diff_metrics_t;

typedef struct {
    const ml_site_t *base, *cur;  /* either may be NULL (site gone / new) */
    ml_diff_metrics_t b, n;       /* summed over the sites that share the key */
    const char *key;              /* the frames' function names joined by ';' */
} ml_diff_entry_t;

typedef struct ml_diff_s ml_diff_t;

/** Matches the sites of two built sessions by their frames' function names
 * (module file name for unnamed frames; lines are ignored, so moving code
 * does not break the match) and computes per-site metrics; the same for
 * their GPU sites (matched per device) and GPU device totals. */
int ml_diff_new(const ml_analysis_t *base, const ml_analysis_t *cur, ml_diff_t **out);
/* Returns 0 or -ENOMEM. The diff points into both sessions' last builds: free
 * it (ml_diff_free, NULL is fine) before either is built again or freed. */
void ml_diff_free(ml_diff_t *d);
/** Entries sorted by |delta peak| + |delta leaked| + |delta bytes allocated|, largest first. */
const ml_diff_entry_t *ml_diff_entries(const ml_diff_t *d, size_t *count);

/* GPU memory (ml_gpu.h), diffed beside the heap. Each device ordinal present
 * in either trace gets its totals from both sides (zeros where a trace has no
 * such device): peak_bytes and leaked_bytes are device bytes,
 * alloc_calls and bytes_allocated count every kind, as ml_gpu_device_t does. */
typedef struct {
    int32_t device;               /* ordinal; ML_GPU_DEVICE_UNKNOWN (-1) for unattributed events */
    bool in_base, in_cur;
    ml_diff_metrics_t b, n;
} ml_diff_gpu_device_t;

/* A GPU site: the GPU sites (ml_gpu_site_t) of one device whose symbolized
 * stacks (ml_gpu_stack_frames) have the same key as heap sites do, summed
 * over their kinds and over the stacks that share the key. */
typedef struct {
    int32_t device;
    uint32_t base_stack, cur_stack; /* a stack of the key on each side; 0 when absent there */
    bool in_base, in_cur;
    ml_diff_metrics_t b, n;
    const char *key;
} ml_diff_gpu_entry_t;

/** Devices in ascending ordinal order; none when neither trace has GPU records. */
const ml_diff_gpu_device_t *ml_diff_gpu_devices(const ml_diff_t *d, size_t *count);
/** GPU sites sorted by |delta peak| first, then as heap entries are. */
const ml_diff_gpu_entry_t *ml_diff_gpu_entries(const ml_diff_t *d, size_t *count);
/** Leaked device bytes of all devices together, base and new (the gate's
 * GPU leak total). */
void ml_diff_gpu_leaked(const ml_diff_t *d, uint64_t *base, uint64_t *cur);

/* Whether two sessions recorded the same program. */
typedef enum {
    ML_DIFF_PROGRAM_SAME = 0,      /* their executables have the same file name */
    ML_DIFF_PROGRAM_DIFFERENT = 1, /* they do not: the diff compares two different programs */
    ML_DIFF_PROGRAM_UNKNOWN = 2,   /* a trace names no executable */
} ml_diff_program_t;

/** Compares the executables the two traces' process records name
 * (ml_process_info_t.exe) by their file names: the folders are left out,
 * since a program rebuilt in another folder (two worktrees, two CI builds)
 * is what a diff usually compares, and a " (deleted)" the kernel added to a
 * binary replaced while it ran is ignored. */
ml_diff_program_t ml_diff_program(const ml_analysis_t *base, const ml_analysis_t *cur);

/* ------------------------------------------------------------------------- */
/* For the viewer: who holds the heap (shares.c)                             */
/* ------------------------------------------------------------------------- */

/* A share of the heap: `id` is a stack id or a site id. */
typedef struct {
    uint32_t id;
    uint64_t bytes, blocks;
} ml_share_t;

/** The allocation stacks holding the most live bytes now, largest first
 * (at most max). O(stacks). Stack ids stay valid for the session, so shares
 * taken while feeding can be mapped to sites after a later build. */
size_t ml_analysis_top_stacks(const ml_analysis_t *a, ml_share_t *out, size_t max);

/** Maps stack shares to the sites of the last build, merging the stacks of
 * one site; largest first (at most max). Stacks the last build did not see
 * are left out. */
size_t ml_analysis_shares_to_sites(const ml_analysis_t *a, const ml_share_t *in, size_t n,
                                   ml_share_t *out, size_t max);

/** The site of the last build that a recorded stack belongs to, by its leaf
 * node id (ml_record_t.u.alloc.stack, not the stack ids of ml_share_t), or
 * UINT32_MAX when that build did not see it. O(1). The strategy advisor
 * (ml_advisor.h) groups its replay by it. */
uint32_t ml_analysis_node_site(const ml_analysis_t *a, uint32_t node);

/** The sites whose blocks, live at a moment of the last build (peak, worst,
 * or the end), overlap [lo, hi), largest first: who pins a cell of the heap
 * map. O(live blocks). Returns the count, -ENOMEM, or -ENOTSUP for the peak
 * and worst moments of a session restored from a snapshot (it keeps their
 * fragmentation, not their blocks). */
int64_t ml_analysis_sites_in_range(const ml_analysis_t *a, ml_moment_t m, uint64_t lo, uint64_t hi,
                                   ml_share_t *out, size_t max);

#endif
