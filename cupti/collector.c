/* collector.c - the callback path: one CUPTI callback in, one GPU event out.
 *
 * CUPTI calls ml__cupti_callback() synchronously on the thread that made the
 * CUDA call, at API entry and at API exit of every enabled callback id. The
 * event is translated by the pure ml_cupti_translate(), completed with what
 * only a live CUPTI knows (which device a context belongs to), and handed to
 * libmemlens.so, which takes the CPU stack on this same thread and writes the
 * event into the ring. Nothing here allocates or locks.
 */
#define _GNU_SOURCE
#include "cupti_internal.h"

#include <string.h>
#include <unistd.h>

ml_cupti_api_t ml__cupti;
ml_gpu_record_fn ml__record;
ml_warn_fn ml__warn;
_Atomic int ml__cupti_active;

/* ------------------------------------------------------------------------- */
/* Context -> device                                                         */
/* ------------------------------------------------------------------------- */

/* Driver callbacks carry the context (and its process-unique uid) but not
 * its device. cuptiGetDeviceId answers, and the answer is cached here: a
 * direct-mapped table of single 64-bit words, (uid + 1) << 32 | device, so a
 * reader never sees half an entry and a collision only costs a re-query.
 * Filled at CONTEXT_CREATED and on a miss. */
#define CTX_SLOTS 256
static _Atomic uint64_t ctx_cache[CTX_SLOTS];

void ml__cupti_reset_contexts(void) {
    for (int i = 0; i < CTX_SLOTS; i++) ml_atomic_store_relaxed(&ctx_cache[i], 0);
}

static int32_t device_of(CUcontext ctx, uint32_t uid) {
    _Atomic uint64_t *slot = &ctx_cache[uid % CTX_SLOTS];
    uint64_t v = ml_atomic_load_relaxed(slot);
    if (v >> 32 == (uint64_t)uid + 1) return (int32_t)(uint32_t)v;
    uint32_t dev;
    if (!ctx || !ml__cupti.get_device_id || ml__cupti.get_device_id(ctx, &dev) != CUPTI_SUCCESS)
        return ML_GPU_DEVICE_UNKNOWN;
    ml_atomic_store_relaxed(slot, ((uint64_t)uid + 1) << 32 | dev);
    return (int32_t)dev;
}

static uint32_t context_uid(CUcontext ctx) {
    uint32_t uid = 0;
    if (!ctx || !ml__cupti.get_context_id || ml__cupti.get_context_id(ctx, &uid) != CUPTI_SUCCESS)
        return 0;
    return uid;
}

/* ------------------------------------------------------------------------- */
/* Warnings                                                                  */
/* ------------------------------------------------------------------------- */

/* libmemlens.so's memlens_warn (InitializeInjection finds it): it writes
 * only where descriptor 2 is memlens' stderr, not into a file of the
 * program's own, and without SIGPIPE (a reader gone raised it in the
 * program). Without it (a libmemlens.so before it) the line goes to
 * descriptor 2 as it did. */
void ml__cupti_warn(const char *msg) {
    ml_warn_fn w = ml__warn;
    if (w) {
        w(msg);
        return;
    }
    char buf[1024];
    static const char pre[] = "memlens: warning: ";
    size_t n = 0;
    for (size_t i = 0; pre[i] && n < sizeof buf - 2; i++) buf[n++] = pre[i];
    for (size_t i = 0; msg[i] && n < sizeof buf - 2; i++) buf[n++] = msg[i];
    buf[n++] = '\n';
    ssize_t rc = write(2, buf, n);
    (void)rc;
}

/* ------------------------------------------------------------------------- */
/* The callback                                                              */
/* ------------------------------------------------------------------------- */

void CUPTIAPI ml__cupti_callback(void *userdata, CUpti_CallbackDomain domain,
                                 CUpti_CallbackId cbid, const void *cbdata) {
    (void)userdata;
    if (!ml_atomic_load_relaxed(&ml__cupti_active) || !cbdata) return;
    ml_gpu_record_fn record = ml__record;
    if (!record) return;

    if (domain == CUPTI_CB_DOMAIN_STATE) {
        /* CUPTI met an error it cannot recover from and finalizes itself: no
         * more callbacks will come. Say so once; the program goes on. */
        if (cbid == CUPTI_CBID_STATE_FATAL_ERROR) {
            int was = 1;
            if (ml_atomic_cas_strong_acq_rel(&ml__cupti_active, &was, 0))
                ml__cupti_warn("CUPTI reported a fatal error and detached: GPU allocations after "
                               "this point are not recorded (CPU profiling goes on)");
        }
        return;
    }

    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        const CUpti_ResourceData *rd = cbdata;
        if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
            uint32_t uid = context_uid(rd->context);
            if (uid) (void)device_of(rd->context, uid);
            return;
        }
        ml_gpu_event_t ev;
        if (!ml_cupti_translate(domain, cbid, cbdata, &ev)) return;
        ev.context = context_uid(rd->context);
        ev.device = device_of(rd->context, ev.context);
        record(&ev);
        return;
    }

    ml_gpu_event_t ev;
    if (!ml_cupti_translate(domain, cbid, cbdata, &ev)) return;
    if (ev.device == ML_GPU_DEVICE_UNKNOWN) {
        const CUpti_CallbackData *cb = cbdata;
        ev.device = device_of(cb->context, cb->contextUid);
    }
    record(&ev);
}
