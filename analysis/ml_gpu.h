/* ml_gpu.h - GPU memory analysis: what the CUPTI collector's records say.
 *
 * High-level; may allocate. Part of the analysis library: ml_analysis_feed()
 * hands every record to the GPU analysis (analysis/gpu.c), which ignores
 * everything but the GPU records (ML_T_GPU_ALLOC / ML_T_GPU_FREE / ML_T_GPU_POOL, docs/gpu.md) and costs nothing for
 * traces without them (no state is allocated until the first GPU record).
 * Memory is proportional to the live GPU allocations and the distinct
 * (device, stack, kind) sites, never to the trace length.
 *
 * Accounting, per device ordinal:
 *   - device bytes: memory on the device: device, pitch, managed, async,
 *     pool, array (estimated) and VMM physical memory located on a device.
 *     The peak, the timeline and leaks are in these bytes.
 *   - pinned host bytes: host_pinned, host_registered, VMM physical memory
 *     on the host. Reported separately (they are host RAM the OS cannot
 *     page), attributed to the device whose context allocated them.
 *   - address space only: vmm_reserve and vmm_map have no bytes of their own
 *     (cuMemCreate has them); maps feed the address-space fragmentation.
 *   - VMM physical memory lives while it is not released or still mapped
 *     (cuMemRelease of a mapped handle defers the free to the last unmap).
 *   - A context destroyed while holding allocations frees them all; those
 *     bytes count as leaked ("at context destroy"), as compute-sanitizer's
 *     leak check counts them; VMM memory is not owned by a context.
 *   - Leaked = live at the end of the trace + freed by context destruction.
 *
 * Sites are (device, allocation stack, kind). A site's peak bytes are what it
 * held when its device reached its peak (lazily snapshotted at the first
 * decrease after a new peak, so a growth phase costs nothing).
 *
 * Ownership: the GPU state belongs to its session (ml_analysis_gpu); the
 * pointers the queries return point into it. Queries that copy (sites, pools,
 * suggestions) write into the caller's array and return how many they wrote.
 * Functions take a NULL state as "no GPU records" (0, NULL), except
 * ml_gpu_summary, which needs one.
 *
 * Errors and out of memory: nothing here returns an error. Out of memory
 * while feeding drops that record's effect and counts it
 * (ml_gpu_summary_t.dropped); ml_gpu_sites and ml_gpu_suggest need a
 * temporary array, and copy nothing (return 0) when they cannot have it.
 *
 * Threads: as the session's (ml_analysis.h): the state changes with every
 * GPU record fed, so readers and the feeder share one lock.
 */
#ifndef ML_GPU_H
#define ML_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ml_analysis.h"

typedef struct ml_gpu_s ml_gpu_t;

/** The GPU state of an analysis session, NULL when its trace has no GPU
 * records. Valid until the session is freed; its numbers change as the
 * session is fed. */
const ml_gpu_t *ml_analysis_gpu(const ml_analysis_t *a);

/* ------------------------------------------------------------------------- */
/* Queries                                                                   */
/* ------------------------------------------------------------------------- */

/** Per-kind counters of one device. */
typedef struct {
    uint64_t alloc_calls, free_calls, bytes_allocated;
    uint64_t live_bytes, live_blocks; /* now (at the end once the trace was fed) */
    uint64_t peak_bytes;              /* this kind's own maximum */
    uint64_t leaked_bytes, leaked_blocks; /* live now + freed by context destruction */
} ml_gpu_kind_stats_t;

/** Address-space fragmentation of a device's live allocations (device
 * pointers and VMM mappings), as gaps between them in the device's virtual
 * address space: span = first start to last end, holes = the gaps.
 *
 * A gap wider than ML_GPU_REGION_GAP is no hole that freed memory left: it
 * separates two regions of the address space (say the cudaMalloc heap and a
 * VMM reservation far above it). Such gaps count in neither the holes nor
 * the span, so one far-away mapping cannot turn a device's numbers into "a
 * 126 TiB span, 0 % used". */
#define ML_GPU_REGION_GAP (1ull << 40) /* 1 TiB: more than any one GPU's memory */

/* What each number of ml_gpu_frag_t is, in the words the text report, the
 * JSON (gpu devices' fragmentation.labels), the HTML page and the viewer
 * all use (issue 13, as ML_LABEL_* of ml_analysis.h for the heap): these
 * are about the device's virtual address space, not its physical memory. */
#define ML_LABEL_GPU_UTILIZATION                                                                   \
    "address-space utilization (live bytes / span from the lowest live address to the end of "     \
    "the highest, gaps between regions left out)"
#define ML_LABEL_GPU_EXTERNAL "external fragmentation of the holes (1 - largest hole / all holes)"

typedef struct {
    bool valid;
    uint32_t time_ms;
    uint64_t live_bytes, blocks;
    uint64_t span_bytes;   /* lowest live address to the end of the highest, less region gaps */
    uint64_t hole_bytes, holes, largest_hole_bytes;
    double utilization;    /* live / span (1 when nothing is live) */
    double external;       /* 1 - largest hole / hole bytes (0 without holes) */
    uint64_t regions;      /* address ranges separated by more than ML_GPU_REGION_GAP */
} ml_gpu_frag_t;

#define ML_GPU_SIZE_CLASSES 64

typedef struct {
    int32_t device;            /* ordinal; ML_GPU_DEVICE_UNKNOWN (-1) for unattributed events */
    uint64_t alloc_calls, free_calls, bytes_allocated; /* every kind */
    uint64_t live_bytes, live_blocks;   /* device bytes now */
    uint64_t peak_bytes, peak_blocks;   /* device bytes at the peak */
    uint32_t peak_time_ms;
    uint64_t leaked_bytes, leaked_blocks; /* device bytes: live now + at context destroy */
    uint64_t ctx_destroy_bytes, ctx_destroy_blocks; /* device bytes freed by context destruction */
    uint64_t pinned_live_bytes, pinned_peak_bytes, pinned_leaked_bytes, pinned_bytes_allocated;
    uint64_t pinned_alloc_calls, pinned_free_calls;
    uint64_t unknown_frees;   /* frees of addresses never seen allocated (before injection?) */
    uint64_t failed_frees;    /* frees the driver refused (the block lives on) */
    uint32_t empty_cache_cycles; /* free-almost-everything bursts followed by re-allocation */
    uint32_t pool_trims;
    ml_gpu_kind_stats_t kinds[ML_GPU_KIND_COUNT_];
    ml_gpu_frag_t frag_peak, frag_now;
    /* size class k: requests of (2^(k-1), 2^k] bytes (k = 0: 0 and 1 byte) */
    uint64_t size_count[ML_GPU_SIZE_CLASSES], size_bytes[ML_GPU_SIZE_CLASSES];
    /* Memory pools (memlens run --gpu-pools; all 0 without pool records).
     * At the device's peak: what its pools had reserved from the device, how
     * much of it was in use, and the difference, "reserved but unused". */
    uint64_t pool_records;
    uint32_t npools;
    uint64_t pool_reserved_at_peak_bytes, pool_used_at_peak_bytes, pool_unused_at_peak_bytes;
} ml_gpu_device_t;

typedef struct {
    size_t ndevices;
    uint64_t gpu_records;     /* GPU records fed */
    uint64_t dropped;         /* records dropped (out of memory) */
    uint32_t first_time_ms, last_time_ms;
    uint64_t live_bytes, peak_bytes; /* device bytes, all devices together */
    uint32_t peak_time_ms;
    uint64_t pinned_live_bytes, pinned_peak_bytes; /* pinned host bytes, all devices */
    uint64_t contexts_destroyed;
} ml_gpu_summary_t;

/** Totals over all devices (g not NULL). */
const ml_gpu_summary_t *ml_gpu_summary(const ml_gpu_t *g);

/** Devices in ascending ordinal order (the unknown device, if any, first). */
size_t ml_gpu_device_count(const ml_gpu_t *g);
const ml_gpu_device_t *ml_gpu_device(const ml_gpu_t *g, size_t i);

/** Device bytes of all devices now: what the heap timeline's gpu_bytes shows. */
uint64_t ml_gpu_live_bytes(const ml_gpu_t *g);

/* Per-device timeline, on the trace's clock (the same as the heap's): a
 * point per interval, holding the largest value in it and the value at its
 * end. At most ML_GPU_TIMELINE_MAX points per device; intervals double as
 * needed, so the whole run is always covered. */
typedef struct {
    uint32_t time_ms;  /* start of the interval */
    uint64_t max_bytes, last_bytes;
} ml_gpu_point_t;

#define ML_GPU_TIMELINE_MAX 1000

size_t ml_gpu_timeline(const ml_gpu_t *g, size_t device_index, const ml_gpu_point_t **points);

/* A memory pool, from CUPTI activity records (memlens run --gpu-pools,
 * ML_T_GPU_POOL): its life (created, trimmed, destroyed) and its sizes after
 * each stream-ordered allocation and free it served.
 *
 * Joining with the callback events: a pool record carries the correlation
 * id of the API call that caused it, and CUPTI numbers API calls in the
 * order they are made. Pool records arrive late (when CUPTI hands over a
 * buffer, at the latest at exit), so the analysis uses the correlation id as
 * the clock: "at the device's peak" is the pool's last record whose
 * correlation id is at most that of the call that made the peak, and "at
 * exit" its record with the highest correlation id. Peaks are order-free. */
typedef struct {
    int32_t device;
    uint64_t address;              /* the pool's base address (CUPTI's) */
    bool explicit_pool;            /* a CREATED record was seen (cuMemPoolCreate); else taken to
                                    * be the device's default pool */
    bool imported, managed;        /* imported pools report no sizes */
    uint64_t peak_reserved_bytes, reserved_at_exit_bytes;
    uint64_t peak_used_bytes, used_at_exit_bytes;
    uint64_t release_threshold_bytes; /* the latest reported */
    uint64_t reserved_at_peak_bytes, used_at_peak_bytes; /* at its device's peak */
    uint32_t trims, created, destroyed;
    uint64_t allocs, releases;     /* blocks allocated from / released to it (MEMORY2) */
    uint32_t drops_to_zero;        /* times its reserved bytes fell from > 0 to 0 */
    uint32_t last_correlation;
} ml_gpu_pool_t;

/** Copies up to `max` pools of device `device_index` into out, in order of
 * first appearance; returns how many were copied (with out NULL: how many
 * the device has). */
size_t ml_gpu_pools(const ml_gpu_t *g, size_t device_index, ml_gpu_pool_t *out, size_t max);

/* One site: an allocation stack on one device, allocating one kind. */
typedef struct {
    int32_t device;
    uint32_t stack;            /* leaf node id of the CPU stack (0: none recorded) */
    uint8_t kind;              /* ml_gpu_kind_t */
    uint64_t alloc_calls, bytes_allocated;
    uint64_t frees;            /* explicit frees of its blocks: alloc/free pairs */
    uint64_t live_bytes, live_blocks;
    uint64_t peak_bytes, peak_blocks;     /* held at its device's peak */
    uint64_t leaked_bytes, leaked_blocks; /* live now + freed by context destruction */
    uint64_t ctx_destroy_bytes;
    uint64_t lifetime_ms_sum;  /* over freed blocks */
    uint64_t min_size, max_size;
    uint32_t distinct_sizes;   /* up to ML_GPU_SITE_SIZES; more reads as ML_GPU_SITE_SIZES + 1 */
    uint64_t top_size, top_size_count; /* the most frequent request size */
} ml_gpu_site_t;

#define ML_GPU_SITE_SIZES 8

typedef enum {
    ML_GPU_BY_PEAK = 0,   /* peak_bytes, largest first (sites with 0 left out) */
    ML_GPU_BY_LEAKED = 1, /* leaked_bytes */
    ML_GPU_BY_CHURN = 2,  /* frees (alloc/free pairs) */
    ML_GPU_BY_ALLOCATED = 3,
    ML_GPU_BY_CALLS = 4,  /* alloc_calls: every site (each one allocated at least once) */
} ml_gpu_order_t;

/** How many sites the GPU state holds, all devices (0 for NULL). */
size_t ml_gpu_site_count(const ml_gpu_t *g);

/** Copies up to `max` sites of device `device_index` (every device when
 * SIZE_MAX) into out, ordered as asked, leaving out sites whose sort key is
 * 0. Returns how many were copied. */
size_t ml_gpu_sites(const ml_gpu_t *g, size_t device_index, ml_gpu_order_t order,
                    ml_gpu_site_t *out, size_t max);

/** The symbolized frames of a GPU allocation stack, innermost first, with the
 * leading frames of CUDA itself (libcuda, libcupti, libcudart, the runtime's
 * cuda* entry points when linked statically) and of memlens removed, so that
 * out[0] is the code that called the CUDA API. Needs ml_analysis_build()
 * (the symbolizer); returns 0 before it. Strings live as long as the
 * session. Returns the number of frames written. */
size_t ml_gpu_stack_frames(const ml_analysis_t *a, uint32_t stack, ml_frame_t *out, size_t max);

/** Alloc/free pairs per second of a site over the trace's duration. */
double ml_gpu_site_pairs_per_s(const ml_gpu_t *g, const ml_gpu_site_t *s);

/* ------------------------------------------------------------------------- */
/* Advice                                                                    */
/* ------------------------------------------------------------------------- */

/* A GPU suggestion, in the vocabulary of DESIGN.md (strategy names below);
 * the strategy advisor merges these into the report's suggestions[]. */
typedef struct {
    const char *strategy;      /* gpu_caching_pool, gpu_async_alloc, gpu_expandable_segments,
                                * gpu_avoid_empty_cache, gpu_reuse_pinned,
                                * gpu_checkpoint_or_offload */
    int32_t device;
    uint32_t stack;            /* the site's allocation stack; 0 for device-wide advice */
    uint8_t kind;              /* the site's ml_gpu_kind_t (device-wide: 0) */
    uint64_t estimated_saving_bytes; /* peak bytes saved; 0 when the gain is time, not bytes */
    /* evidence */
    uint64_t calls, pairs, bytes;
    double pairs_per_s;
    uint32_t distinct_sizes, cycles;
    double share;              /* of the device's peak (checkpoint/offload), holes/span, ... */
    char message[512];         /* what to change, in plain words */
    char evidence[256];        /* the numbers behind it, as text */
} ml_gpu_suggestion_t;

/** Evaluates the GPU advice rules (docs/gpu.md lists them with their
 * thresholds; analysis/gpu_advice.c) and writes up to `max` suggestions, most
 * valuable first. Returns how many were written. Nothing is suggested
 * without evidence. */
size_t ml_gpu_suggest(const ml_gpu_t *g, ml_gpu_suggestion_t *out, size_t max);

#endif
