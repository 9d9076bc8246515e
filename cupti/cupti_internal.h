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
} ml_cupti_api_t;

typedef void (*ml_gpu_record_fn)(const ml_gpu_event_t *);

extern ml_cupti_api_t ml__cupti;
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

#endif
