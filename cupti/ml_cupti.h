/* ml_cupti.h - the CUPTI collector: CUDA memory API callbacks as GPU events.
 *
 * libmemlens_cupti.so is loaded by the CUDA driver at cuInit when
 * CUDA_INJECTION64_PATH names it (`memlens run` does that), subscribes to the
 * driver-domain callbacks of every memory allocation and free API, and hands
 * each call to libmemlens.so as an ml_gpu_event_t (trace/ml_event.h), which
 * adds the CPU stack and writes it into the process's event ring. See
 * docs/gpu.md for what is recorded and why.
 *
 * This header is the module's testable core: the translation from one CUPTI
 * callback to one event is a pure function of the callback's arguments, so
 * it is unit-tested with synthesized CUpti_CallbackData and params structs on
 * machines without a GPU. Everything that needs a live CUPTI (subscribing,
 * asking which device a context belongs to) lives in collector.c/inject.c.
 *
 * Include only <cupti.h> for the CUDA types: the generated params headers it
 * pulls in have no include guards (docs/gpu.md, "Header gotcha").
 */
#ifndef ML_CUPTI_H
#define ML_CUPTI_H

#include <stddef.h>
#include <cupti.h>
#include "ml_event.h"

/** Translates one CUPTI callback into a GPU event.
 *
 * `cbdata` is what CUPTI passes to the subscriber callback: a
 * CUpti_CallbackData for CUPTI_CB_DOMAIN_DRIVER_API, a CUpti_ResourceData for
 * CUPTI_CB_DOMAIN_RESOURCE. Allocations (and maps, reservations) produce an
 * event at CUPTI_API_EXIT and only when the call returned CUDA_SUCCESS, since
 * only then are the out-pointers valid; frees (unmaps, releases) produce one
 * at CUPTI_API_ENTER, before the driver can hand the address to another
 * thread, and a compensating ML_GPU_OP_FREE_FAILED at EXIT when the free
 * failed. A free of 0 (the cudaFree(0) idiom) produces nothing.
 *
 * Fields that need a live CUPTI are left for the caller: `device` is set only
 * when the call itself names it (cuMemCreate's location), else
 * ML_GPU_DEVICE_UNKNOWN; `context` is the callback's contextUid for driver
 * calls and 0 for resource callbacks (ask cuptiGetContextId). `stack` is 0.
 *
 * Returns 1 when `*out` holds an event, 0 when the callback produces none
 * (another site, a failed allocation, an unhandled id or domain). Pure: no
 * CUDA or CUPTI calls, no allocation, thread-safe. */
int ml_cupti_translate(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata,
                       ml_gpu_event_t *out);

/** The driver-domain callback ids ml_cupti_translate() handles: the ones to
 * enable, and no others (enabling a whole domain would put a callback on
 * every kernel launch). */
extern const CUpti_CallbackId ml_cupti_driver_cbids[];
extern const size_t ml_cupti_driver_cbids_n;

/** Translates one CUPTI activity record (`memlens run --gpu-pools`) into an
 * ML_GPU_OP_POOL_STATE event (trace/ml_event.h documents its fields).
 *
 * Reads the record by its `kind`, and only two kinds, in the newest record
 * versions this build's cupti_activity.h defines:
 *   - CUPTI_ACTIVITY_KIND_MEMORY_POOL (CUpti_ActivityMemoryPool3): a pool
 *     created, destroyed or trimmed -> ML_GPU_POOL_CREATED/DESTROYED/TRIMMED;
 *   - CUPTI_ACTIVITY_KIND_MEMORY2 (CUpti_ActivityMemory4): an allocation or
 *     release served by a pool -> ML_GPU_POOL_ALLOC/RELEASE, with the pool's
 *     memoryPoolConfig. Records not served by a pool (pool type INVALID:
 *     cudaMalloc, statics) produce nothing: the callbacks record those.
 * An imported pool's sizes are unknown: they read 0 and the event carries
 * ML_GPU_F_POOL_IMPORTED. `context` is the record's context id (0 when
 * there is none, and for MEMORY_POOL, which has none); `stack` is 0.
 *
 * Returns 1 when `*out` holds an event, 0 for any other kind or operation.
 * Pure: no CUPTI calls, no allocation, thread-safe. The caller must pass a
 * record CUPTI wrote with the layouts of this build's major version. */
int ml_cupti_activity_translate(const CUpti_Activity *rec, ml_gpu_event_t *out);

/** Estimated bytes of a CUDA array (width x height x depth x channels x
 * element size; block-compressed and video formats approximated). Arrays are
 * opaque; the driver's real footprint includes alignment and tiling. */
uint64_t ml_cupti_array_bytes(size_t width, size_t height, size_t depth, unsigned format,
                              unsigned channels);

#endif
