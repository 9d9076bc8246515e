/* inject.c - InitializeInjection: attaching to CUPTI inside the program.
 *
 * The CUDA driver dlopen()s the library named by CUDA_INJECTION64_PATH and
 * calls its InitializeInjection() from the program's first cuInit, on the
 * thread that called it, before any context or allocation exists. Processes
 * that never initialise CUDA never load this library, libcupti or libcuda.
 *
 * Decisions (docs/gpu.md has the reasons at length):
 *   - Only under memlens: without libmemlens.so's memlens_gpu_record in the
 *     process (a child that memlens does not follow inherited the variable)
 *     we return at once and load nothing.
 *   - libcupti is dlopen()ed, not linked. A process that already has one
 *     (PyTorch loads the libcupti it was built with) gets that one reused: a
 *     second, different CUPTI in one process is not something to bet on.
 *   - Failure is never fatal: no libcupti, a driver CUPTI cannot work with,
 *     or another subscriber (Nsight, Kineto in daemon mode) -> one warning
 *     naming the reason, and the CPU recording goes on. We always return 1.
 *   - After fork the child stops turning callbacks into events: CUDA cannot
 *     be used in a child of a process that initialised it, and the child's
 *     recording (if followed) starts a new trace anyway.
 */
#define _GNU_SOURCE
#include "cupti_internal.h"
#include "ml_options.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ML_CUPTI_SONAME
#define ML_CUPTI_SONAME "libcupti.so"
#endif
#ifndef ML_CUPTI_BUILD_PATH
#define ML_CUPTI_BUILD_PATH ""
#endif

static CUpti_SubscriberHandle subscriber;

/* ------------------------------------------------------------------------- */
/* Finding libcupti                                                          */
/* ------------------------------------------------------------------------- */

typedef struct {
    char path[4096];
} found_t;

static int find_loaded_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    found_t *f = data;
    const char *name = info->dlpi_name;
    if (!name || !*name) return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libcupti.so", 11) != 0) return 0;
    snprintf(f->path, sizeof f->path, "%s", name);
    return 1;
}

/* The libcupti already mapped into this process, if any, with a reference
 * of our own (RTLD_NOLOAD never loads anything). */
static void *loaded_cupti(char *which, size_t len) {
    found_t f;
    f.path[0] = '\0';
    dl_iterate_phdr(find_loaded_cb, &f);
    if (!f.path[0]) return NULL;
    void *h = dlopen(f.path, RTLD_NOW | RTLD_NOLOAD);
    if (h) snprintf(which, len, "%s (already loaded by the program)", f.path);
    return h;
}

static void *open_cupti(char *which, size_t len, char *err, size_t errlen) {
    void *h = loaded_cupti(which, len);
    if (h) return h;
    const char *candidates[] = {ml_option_str(ML_ENV_CUPTI_LIB), ML_CUPTI_SONAME, ML_CUPTI_BUILD_PATH,
                                "libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    err[0] = '\0';
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        const char *c = candidates[i];
        if (!c || !*c) continue;
        h = dlopen(c, RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(which, len, "%s", c);
            return h;
        }
        if (!err[0]) {
            const char *e = dlerror();
            snprintf(err, errlen, "%s", e ? e : c);
        }
    }
    return NULL;
}

#define RESOLVE(field, sym) ml__cupti.field = (typeof(ml__cupti.field))dlsym(h, sym)

static bool resolve(void *h) {
    memset(&ml__cupti, 0, sizeof ml__cupti);
    RESOLVE(subscribe, "cuptiSubscribe");
    RESOLVE(subscribe_v2, "cuptiSubscribe_v2");
    RESOLVE(unsubscribe, "cuptiUnsubscribe");
    RESOLVE(enable_callback, "cuptiEnableCallback");
    RESOLVE(get_result_string, "cuptiGetResultString");
    RESOLVE(get_device_id, "cuptiGetDeviceId");
    RESOLVE(get_context_id, "cuptiGetContextId");
    RESOLVE(get_version, "cuptiGetVersion");
    RESOLVE(activity_enable, "cuptiActivityEnable");
    RESOLVE(activity_register_callbacks, "cuptiActivityRegisterCallbacks");
    RESOLVE(activity_get_next_record, "cuptiActivityGetNextRecord");
    RESOLVE(activity_flush_all, "cuptiActivityFlushAll");
    RESOLVE(activity_get_num_dropped, "cuptiActivityGetNumDroppedRecords");
    return ml__cupti.subscribe && ml__cupti.unsubscribe && ml__cupti.enable_callback &&
           ml__cupti.get_device_id && ml__cupti.get_context_id;
}

static const char *result_string(CUptiResult r) {
    const char *s = NULL;
    if (ml__cupti.get_result_string && ml__cupti.get_result_string(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

/* ------------------------------------------------------------------------- */
/* Subscribing                                                               */
/* ------------------------------------------------------------------------- */

static int subscribe(void) {
    char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1];
    memset(old, 0, sizeof old);
    CUptiResult r;
    if (ml__cupti.subscribe_v2) {
        /* _v2 names us to later subscribers and tells us who got there first. */
        CUpti_SubscriberParams sp;
        memset(&sp, 0, sizeof sp);
        sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
        sp.subscriberName = "memlens";
        sp.oldSubscriberName = old;
        sp.oldSubscriberSize = CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN;
        r = ml__cupti.subscribe_v2(&subscriber, ml__cupti_callback, NULL, &sp);
    } else {
        r = ml__cupti.subscribe(&subscriber, ml__cupti_callback, NULL);
    }
    if (r == CUPTI_SUCCESS) return 0;
    char msg[400];
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        snprintf(msg, sizeof msg,
                 "GPU allocations will not be recorded: CUPTI is already in use by %s (only one "
                 "CUPTI client per process; torch.profiler/Kineto, Nsight or compute-sanitizer?). "
                 "CPU profiling goes on",
                 old[0] ? old : "another profiler");
    else
        snprintf(msg, sizeof msg,
                 "GPU allocations will not be recorded: CUPTI could not attach (%s, error %d). "
                 "CPU profiling goes on",
                 result_string(r), (int)r);
    ml__cupti_warn(msg);
    return -1;
}

static int enable_callbacks(void) {
    CUptiResult r = CUPTI_SUCCESS;
    for (size_t i = 0; i < ml_cupti_driver_cbids_n && r == CUPTI_SUCCESS; i++)
        r = ml__cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                      ml_cupti_driver_cbids[i]);
    if (r == CUPTI_SUCCESS)
        r = ml__cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                      CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
    if (r == CUPTI_SUCCESS)
        r = ml__cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                      CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
    if (r != CUPTI_SUCCESS) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "GPU allocations will not be recorded: enabling CUPTI callbacks failed (%s). "
                 "CPU profiling goes on",
                 result_string(r));
        ml__cupti_warn(msg);
        return -1;
    }
    /* Best effort: being told when CUPTI gives up is nice, not required. */
    ml__cupti.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* fork                                                                      */
/* ------------------------------------------------------------------------- */

static void fork_child(void) {
    /* CUDA is unusable in the child of a process that initialised it; if the
     * child tries, its calls must not write half-valid events into a trace. */
    ml_atomic_store_relaxed(&ml__cupti_active, 0);
    ml__cupti_reset_contexts();
}

/* ------------------------------------------------------------------------- */
/* Entry point                                                               */
/* ------------------------------------------------------------------------- */

static void internal(const ml_gpu_record_fn record, uint8_t op) {
    ml_gpu_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.struct_size = sizeof ev;
    ev.op = op;
    record(&ev);
}

static void attach(ml_gpu_record_fn record) {
    char which[4200], err[512], msg[800];
    void *h = open_cupti(which, sizeof which, err, sizeof err);
    if (!h) {
        snprintf(msg, sizeof msg,
                 "GPU allocations will not be recorded: cannot load libcupti (%s); install the "
                 "CUPTI of your CUDA toolkit or set ML_CUPTI_LIB. CPU profiling goes on",
                 err);
        ml__cupti_warn(msg);
        return;
    }
    if (!resolve(h)) {
        snprintf(msg, sizeof msg,
                 "GPU allocations will not be recorded: %.600s lacks the CUPTI callback API. CPU "
                 "profiling goes on",
                 which);
        ml__cupti_warn(msg);
        return;
    }
    if (subscribe() < 0) return;
    if (enable_callbacks() < 0) {
        ml__cupti.unsubscribe(subscriber);
        return;
    }
    const char *td = ml_option_str(ML_ENV_TEARDOWN_CUPTI);
    if (td && strcmp(td, "1") == 0)
        ml__cupti_warn("TEARDOWN_CUPTI=1: when torch.profiler stops it will detach CUPTI "
                       "(cuptiFinalize), and GPU allocations after that are not recorded; unset "
                       "it to record the whole run");
    pthread_atfork(NULL, NULL, fork_child);
    ml__record = record;
    ml_atomic_store_release(&ml__cupti_active, 1);
    /* memlens run --gpu-pools: the activity records of memory pools, after
     * the callbacks, which go on whatever happens here (pools.c). */
    if (ml_option_bool(ML_ENV_GPU_POOLS)) ml__pools_start(which);
}

/** Called by the CUDA driver inside the program's first cuInit (the
 * CUDA_INJECTION64_PATH contract). Idempotent; always returns 1, since a
 * profiler must never make CUDA initialisation fail. */
ML_EXPORT int InitializeInjection(void);

ML_EXPORT int InitializeInjection(void) {
    static _Atomic int once;
    int expected = 0;
    if (!ml_atomic_cas_strong_acq_rel(&once, &expected, 1)) return 1;
    ml_gpu_record_fn record = (ml_gpu_record_fn)dlsym(RTLD_DEFAULT, "memlens_gpu_record");
    if (!record) return 1; /* not under memlens: stay out of the way entirely */
    ml__warn = (ml_warn_fn)dlsym(RTLD_DEFAULT, "memlens_warn");
    ml_options_init(ML_ENV_CUPTI, "libmemlens_cupti.so");
    /* Loading libcupti and subscribing allocate; those blocks are memlens'
     * own, not the program's. */
    internal(record, ML_GPU_OP_INTERNAL_BEGIN);
    attach(record);
    internal(record, ML_GPU_OP_INTERNAL_END);
    return 1;
}
