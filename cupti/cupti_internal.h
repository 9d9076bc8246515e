/* cupti_internal.h - shared state of libmemlens_cupti.so.
 *
 * This code runs inside the traced program, on the application's threads,
 * inside CUDA API calls (STYLE 8, 12, 13, 16): no malloc and no locks on the
 * callback path, never take the program down for a profiler fault, warn once
 * and carry on without GPU data. The library may be dlopen()ed by the driver,
 * so it uses no initial-exec TLS and keeps no per-thread state at all.
 */
#ifndef ML_CUPTI_INTERNAL_H
#define ML_CUPTI_INTERNAL_H

#include <stdbool.h>
#include "ml_atomic.h"
#include "ml_cupti.h"

#define ML_EXPORT __attribute__((visibility("default")))

/* The CUPTI entry points used, resolved with dlsym from whichever libcupti
 * the process has (inject.c), or set to fakes by tests. Only this callback
 * subset is used: it is stable across CUPTI 11 to 13. */
typedef struct {
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                CUpti_SubscriberParams *); /* optional (CUPTI >= 12.x) */
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                   CUpti_CallbackId);
    CUptiResult (*get_result_string)(CUptiResult, const char **);
    CUptiResult (*get_device_id)(CUcontext, uint32_t *);
    CUptiResult (*get_context_id)(CUcontext, uint32_t *);
    CUptiResult (*get_version)(uint32_t *); /* optional */
    /* The activity API, used only with --gpu-pools (pools.c); all optional:
     * without them the callbacks go on alone. */
    CUptiResult (*activity_enable)(CUpti_ActivityKind);
    CUptiResult (*activity_register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                               CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*activity_get_next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*activity_flush_all)(uint32_t);
    CUptiResult (*activity_get_num_dropped)(CUcontext, uint32_t, size_t *); /* optional */
} ml_cupti_api_t;

typedef void (*ml_gpu_record_fn)(const ml_gpu_event_t *);

extern ml_cupti_api_t ml__cupti;
typedef void (*ml_warn_fn)(const char *);
extern ml_warn_fn ml__warn;           /* libmemlens.so's memlens_warn, or NULL */
extern ml_gpu_record_fn ml__record;   /* libmemlens.so's memlens_gpu_record */
extern _Atomic int ml__cupti_active;  /* callbacks turn into events */

/* collector.c */

/** The CUPTI subscriber callback: translate, add device and context, record. */
void CUPTIAPI ml__cupti_callback(void *userdata, CUpti_CallbackDomain domain,
                                 CUpti_CallbackId cbid, const void *cbdata);

/** Forgets the context -> device cache (after fork). */
void ml__cupti_reset_contexts(void);

/** Writes "memlens: warning: <msg>\n" to stderr with one write(2). */
void ml__cupti_warn(const char *msg);

/* pools.c (memlens run --gpu-pools, docs/gpu.md "Memory pools") */

/** Registers the activity buffer callbacks and enables the MEMORY_POOL and
 * MEMORY2 activity kinds, after the callbacks are on. `which` names the
 * libcupti for the warning. On any failure (symbols missing, another major
 * version, CUPTI refuses) writes one warning and returns -1: the callback
 * recording goes on unchanged. On success registers the exit-time flush
 * (atexit) and returns 0. */
int ml__pools_start(const char *which);

/** The buffer callbacks CUPTI calls (exposed for the unit tests): buffers
 * are anonymous mappings made with the raw system call, so neither the
 * program's heap nor its recorded mappings change; records are translated
 * by ml_cupti_activity_translate() and handed to ml__record() without a
 * stack, then the buffer is unmapped. */
void CUPTIAPI ml__pools_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI ml__pools_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                         size_t size, size_t valid);

/** The exit-time flush (atexit): cuptiActivityFlushAll(FORCED) while
 * libmemlens still records, then the warnings about lost records. */
void ml__pools_flush_at_exit(void);

/** Counters, for the warnings and the tests. */
typedef struct {
    uint64_t events;       /* POOL_STATE events handed to libmemlens */
    uint64_t lost;         /* records that arrived when recording had stopped */
    uint64_t cupti_dropped; /* records CUPTI dropped (cuptiActivityGetNumDroppedRecords) */
    uint64_t no_buffer;    /* buffer requests we could not serve (mmap failed) */
} ml_pools_stats_t;
void ml__pools_stats(ml_pools_stats_t *out);

#endif
