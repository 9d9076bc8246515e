/* pools.c - memlens run --gpu-pools: CUPTI activity records of memory pools.
 *
 * The callbacks (collector.c) see each stream-ordered allocation, but not
 * what the pool behind it holds: how much it has reserved from the device,
 * how much of that is used, its release threshold, when it trims. CUPTI's
 * activity API reports that, as records CUPTI writes into buffers we give
 * it and hands back later, on a thread of its own. `memlens run --gpu-pools`
 * sets ML_GPU_POOLS=1, and InitializeInjection then calls ml__pools_start().
 *
 * Decisions (docs/gpu.md, "Memory pools (--gpu-pools)"):
 *   - Off by default: the activity API is process-global state that other
 *     CUPTI clients (torch.profiler's Kineto) use too, and its records cost
 *     CUPTI buffers and a worker thread.
 *   - Only the MEMORY_POOL and MEMORY2 kinds, and only when the loaded
 *     libcupti has this build's major version: a record's layout is the one
 *     of the libcupti that wrote it, and this build reads CUPTI 13's. Any
 *     missing entry point or refusal gives one warning; callbacks go on.
 *   - Buffers are anonymous mappings made with the raw mmap system call:
 *     libmemlens hooks mmap(), and CUPTI's buffers are not the program's.
 *     Each is unmapped once its records are handed over.
 *   - Records are handed to libmemlens' memlens_gpu_record() from CUPTI's
 *     thread, without a stack (the program's stack is long gone). Each keeps
 *     the correlation id of the API call that caused it: the analysis joins
 *     on it (docs/gpu.md).
 *   - Flush at exit: an atexit handler registered here, inside cuInit, runs
 *     cuptiActivityFlushAll(FORCED). atexit handlers run before the shared
 *     objects' destructors, so it runs before libmemlens' destructor writes
 *     the exit marker and holds the exit scan: the flushed records land in
 *     the trace before proc-exit, while the ring takes events. A buffer CUPTI
 *     completes later (cudart's own exit handler may destroy pools after
 *     ours ran) is still recorded while libmemlens records.
 *   - Nothing is lost silently: records that arrive when recording has
 *     stopped (a forked child, CUPTI detached) are counted and said, and so
 *     are the records CUPTI itself dropped (cuptiActivityGetNumDroppedRecords).
 */
#define _GNU_SOURCE
#include "cupti_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BUFFER_BYTES (1u << 20) /* about 8000 MEMORY2 records */

static _Atomic uint64_t n_events, n_lost, n_dropped, n_no_buffer;
static _Atomic int exit_flushed;
static pid_t owner_pid; /* the process that enabled the activity API (not a forked child) */

/* ------------------------------------------------------------------------- */
/* Warnings without stdio (CUPTI's thread, exit time)                        */
/* ------------------------------------------------------------------------- */

static size_t put_str(char *buf, size_t n, size_t cap, const char *s) {
    while (*s && n < cap - 1) buf[n++] = *s++;
    buf[n] = '\0';
    return n;
}

static size_t put_u64(char *buf, size_t n, size_t cap, uint64_t v) {
    char d[24];
    int k = 0;
    do d[k++] = (char)('0' + v % 10); while ((v /= 10) && k < 24);
    while (k && n < cap - 1) buf[n++] = d[--k];
    buf[n] = '\0';
    return n;
}

static void warn_count(const char *before, uint64_t n, const char *after) {
    char msg[400];
    size_t k = put_str(msg, 0, sizeof msg, before);
    k = put_u64(msg, k, sizeof msg, n);
    put_str(msg, k, sizeof msg, after);
    ml__cupti_warn(msg);
}

/* ------------------------------------------------------------------------- */
/* Buffers                                                                   */
/* ------------------------------------------------------------------------- */

void CUPTIAPI ml__pools_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    /* The raw system call: libmemlens' mmap hook would record the buffer as
     * one of the program's mappings. Page alignment satisfies CUPTI's 8. */
    long p = syscall(SYS_mmap, NULL, (size_t)BUFFER_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *max_records = 0;
    if (p == -1 || (unsigned long)p >= (unsigned long)-4096) {
        /* CUPTI drops the records it has no buffer for, and counts them. */
        ml_atomic_add_relaxed(&n_no_buffer, 1);
        *buffer = NULL;
        *size = 0;
        return;
    }
    *buffer = (uint8_t *)p;
    *size = BUFFER_BYTES;
}

void CUPTIAPI ml__pools_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                         size_t size, size_t valid) {
    if (!buffer) return;
    ml_gpu_record_fn record = ml__record;
    bool on = record && ml_atomic_load_acquire(&ml__cupti_active) && getpid() == owner_pid;
    uint64_t lost = 0;
    CUpti_Activity *rec = NULL;
    while (ml__cupti.activity_get_next_record &&
           ml__cupti.activity_get_next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        ml_gpu_event_t ev;
        if (!ml_cupti_activity_translate(rec, &ev)) continue;
        if (!on) {
            lost++;
            continue;
        }
        record(&ev);
        ml_atomic_add_relaxed(&n_events, 1);
    }
    syscall(SYS_munmap, buffer, size);
    size_t dropped = 0;
    if (ml__cupti.activity_get_num_dropped &&
        ml__cupti.activity_get_num_dropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) {
        ml_atomic_add_relaxed(&n_dropped, dropped);
        /* Before the exit flush the total is said once, at exit. */
        if (ml_atomic_load_acquire(&exit_flushed))
            warn_count("CUPTI dropped ", dropped,
                       " GPU memory pool activity records after the exit flush (--gpu-pools)");
    }
    if (lost) {
        ml_atomic_add_relaxed(&n_lost, lost);
        warn_count("", lost,
                   " GPU memory pool activity records arrived after GPU recording stopped "
                   "(forked child, or CUPTI detached) and were dropped (--gpu-pools)");
    }
}

/* ------------------------------------------------------------------------- */
/* Exit                                                                      */
/* ------------------------------------------------------------------------- */

void ml__pools_flush_at_exit(void) {
    /* A forked child inherits the handler but not CUPTI's threads. */
    if (getpid() != owner_pid || !ml__cupti.activity_flush_all) return;
    ml__cupti.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    ml_atomic_store_release(&exit_flushed, 1);
    uint64_t d = ml_atomic_load_relaxed(&n_dropped);
    if (d)
        warn_count("CUPTI dropped ", d,
                   " GPU memory pool activity records (no buffer space): the pool numbers "
                   "of the report are incomplete (--gpu-pools)");
    uint64_t nb = ml_atomic_load_relaxed(&n_no_buffer);
    if (nb)
        warn_count("", nb,
                   " CUPTI activity buffer requests could not be served (mmap failed): their "
                   "records are lost (--gpu-pools)");
}

void ml__pools_stats(ml_pools_stats_t *out) {
    out->events = ml_atomic_load_relaxed(&n_events);
    out->lost = ml_atomic_load_relaxed(&n_lost);
    out->cupti_dropped = ml_atomic_load_relaxed(&n_dropped);
    out->no_buffer = ml_atomic_load_relaxed(&n_no_buffer);
}

/* ------------------------------------------------------------------------- */
/* Start                                                                     */
/* ------------------------------------------------------------------------- */

static const char *result_string(CUptiResult r) {
    const char *s = NULL;
    if (ml__cupti.get_result_string && ml__cupti.get_result_string(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

static int refuse(const char *which, const char *why, const char *detail) {
    char msg[900];
    size_t k = put_str(msg, 0, sizeof msg, "--gpu-pools: GPU memory pool records are off: ");
    k = put_str(msg, k, sizeof msg, which);
    k = put_str(msg, k, sizeof msg, why);
    k = put_str(msg, k, sizeof msg, detail);
    put_str(msg, k, sizeof msg, "; the allocation callbacks are recorded as without the flag");
    ml__cupti_warn(msg);
    return -1;
}

int ml__pools_start(const char *which) {
    if (!ml__cupti.activity_enable || !ml__cupti.activity_register_callbacks ||
        !ml__cupti.activity_get_next_record || !ml__cupti.activity_flush_all)
        return refuse(which, " lacks the CUPTI activity API (cuptiActivityEnable, ...)", "");
    uint32_t v = 0;
    if (!ml__cupti.get_version || ml__cupti.get_version(&v) != CUPTI_SUCCESS ||
        v / 10000 != CUPTI_API_VERSION / 10000) {
        char d[80];
        size_t k = put_str(d, 0, sizeof d, " (API version ");
        k = put_u64(d, k, sizeof d, v);
        k = put_str(d, k, sizeof d, ", this memlens reads the records of ");
        k = put_u64(d, k, sizeof d, CUPTI_API_VERSION / 10000);
        put_str(d, k, sizeof d, ".x)");
        return refuse(which, " is another CUPTI major version", d);
    }
    owner_pid = getpid();
    CUptiResult r = ml__cupti.activity_register_callbacks(ml__pools_buffer_requested,
                                                           ml__pools_buffer_completed);
    if (r == CUPTI_SUCCESS) r = ml__cupti.activity_enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    if (r == CUPTI_SUCCESS) r = ml__cupti.activity_enable(CUPTI_ACTIVITY_KIND_MEMORY2);
    if (r != CUPTI_SUCCESS) {
        char d[300];
        size_t k = put_str(d, 0, sizeof d, " (");
        k = put_str(d, k, sizeof d, result_string(r));
        put_str(d, k, sizeof d, ")");
        return refuse(which, " refused to enable the activity records", d);
    }
    if (atexit(ml__pools_flush_at_exit) != 0)
        ml__cupti_warn("--gpu-pools: cannot register the exit-time flush: pool records still in "
                       "CUPTI's buffers at exit will be missing");
    return 0;
}
