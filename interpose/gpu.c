/* gpu.c - the entry point libmemlens_cupti.so records GPU events through.
 *
 * The CUDA driver loads libmemlens_cupti.so (CUDA_INJECTION64_PATH) into a
 * process that libmemlens.so is already preloaded into. That library turns
 * CUPTI callbacks into ml_gpu_event_t and calls memlens_gpu_record(), found
 * with dlsym(RTLD_DEFAULT, ...): the one symbol libmemlens.so exports for it.
 * Here the event gets the calling thread's CPU stack, from the same unwinder
 * and the same interned stack table as the heap hooks, and goes into the same
 * ring as an ML_BLOB_GPU blob, so CPU and GPU share one trace and one clock.
 *
 * The heap hooks' hot path is untouched: GPU events are rare next to malloc
 * (a few per tensor at most) and take the blob path.
 */
#define _GNU_SOURCE
#include "interpose_internal.h"

#include <string.h>

/* Frees and context events carry no stack, like heap frees: the allocation
 * site is what the analysis attributes bytes to, and an unwind per free
 * would double the cost on the cudaMallocAsync/cudaFreeAsync path. */
static bool wants_stack(const ml_gpu_event_t *ev) {
    return ev->op == ML_GPU_OP_ALLOC;
}

/** Records one GPU event from libmemlens_cupti.so (see ml_event.h for the
 * layout, docs/gpu.md for the semantics). Thread-safe, lock-free, never
 * allocates. Does nothing when this process is not being recorded. The
 * ML_GPU_OP_INTERNAL_BEGIN/END pseudo-ops raise and lower this thread's
 * reentrancy guard around the collector's own work (loading libcupti), so
 * the allocations made for it are counted as memlens' own, not the program's. */
ML_EXPORT void memlens_gpu_record(const ml_gpu_event_t *ev);

ML_EXPORT void memlens_gpu_record(const ml_gpu_event_t *ev) {
    if (!ev) return;
    if (ev->op == ML_GPU_OP_INTERNAL_BEGIN) {
        ml__tls.guard++;
        return;
    }
    if (ev->op == ML_GPU_OP_INTERNAL_END) {
        if (ml__tls.guard > 0) ml__tls.guard--;
        return;
    }
    if (ml__state_relaxed() == ML_STATE_UNINIT) ml__init();
    if (!ml__recording()) {
        if (ml__tls.guard && ml__state_relaxed() == ML_STATE_READY && ml__ring)
            ml_atomic_add_relaxed(&ml__ring->nested_skipped, 1);
        return;
    }
    ml__tls.guard++;
    ml_gpu_event_t e;
    memset(&e, 0, sizeof e);
    /* A producer built against an older, shorter layout: take what it knew. */
    size_t n = ev->struct_size && ev->struct_size < sizeof e ? ev->struct_size : sizeof e;
    memcpy(&e, ev, n);
    e.struct_size = sizeof e;
    e.flags &= (uint16_t)~0xffu; /* the low byte is ours (ML_EVF_*) */
    e.stack = 0;
    if (wants_stack(&e)) {
        uint8_t flags = 0;
        e.stack = ml__stack_capture(&flags);
        e.flags |= flags;
    }
    /* Only pool events use the appended fields: the others keep to two
     * ring slots. */
    ml__emit_blob(ML_BLOB_GPU, &e, e.op == ML_GPU_OP_POOL_STATE ? sizeof e : ML_GPU_EVENT_BASE_SIZE);
    ml__tls.guard--;
    ml__call_done();
}
