/* test_activity.c - --gpu-pools in libmemlens_cupti.so without CUPTI: the
 * pure translation of MEMORY_POOL / MEMORY2 activity records into
 * ML_GPU_OP_POOL_STATE events (cupti/activity.c), field by field, and the
 * buffer path (cupti/pools.c) with fake activity entry points. */
#define _GNU_SOURCE
#include "cupti_internal.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB (1024ull * 1024)

static CUpti_ActivityMemoryPool3 pool_rec(CUpti_ActivityMemoryPoolOperationType op) {
    CUpti_ActivityMemoryPool3 p;
    memset(&p, 0, sizeof p);
    p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    p.memoryPoolOperationType = op;
    p.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    p.correlationId = 41;
    p.deviceId = 3;
    p.minBytesToKeep = 123;
    p.address = 0x7f0000000000;
    p.size = 32 * MiB;
    p.releaseThreshold = 16 * MiB;
    p.utilizedSize = 5 * MiB;
    p.timestamp = 999;
    return p;
}

static CUpti_ActivityMemory4 mem_rec(CUpti_ActivityMemoryOperationType op) {
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = op;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.correlationId = 77;
    m.address = 0x302000000;
    m.bytes = 3 * MiB;
    m.deviceId = 1;
    m.contextId = 9;
    m.streamId = 14;
    m.isAsync = 1;
    m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    m.memoryPoolConfig.address = 0x7f0000200000;
    m.memoryPoolConfig.releaseThreshold = 8 * MiB;
    m.memoryPoolConfig.pool.size = 12 * MiB;
    m.memoryPoolConfig.utilizedSize = 7 * MiB;
    return m;
}

static void expect_pool_event(const ml_gpu_event_t *e, uint8_t op) {
    cr_expect_eq(e->struct_size, sizeof *e);
    cr_expect_eq(e->op, ML_GPU_OP_POOL_STATE);
    cr_expect_eq(e->kind, op);
    cr_expect_eq(e->cbid, CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    cr_expect_eq(e->device, 3);
    cr_expect_eq(e->context, 0, "MEMORY_POOL records have no context");
    cr_expect_eq(e->correlation, 41);
    cr_expect_eq(e->ptr, 0x7f0000000000);
    cr_expect_eq(e->size, 32 * MiB);
    cr_expect_eq(e->pool_used, 5 * MiB);
    cr_expect_eq(e->pool_threshold, 16 * MiB);
    cr_expect_eq(e->stream, 0);
    cr_expect_eq(e->stack, 0);
    cr_expect_eq(e->flags, 0);
}

Test(activity, pool_created) {
    CUpti_ActivityMemoryPool3 p = pool_rec(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED);
    ml_gpu_event_t e;
    cr_assert_eq(ml_cupti_activity_translate((CUpti_Activity *)&p, &e), 1);
    expect_pool_event(&e, ML_GPU_POOL_CREATED);
    cr_expect_eq(e.handle, 0, "minBytesToKeep only for trims");
}

Test(activity, pool_destroyed) {
    CUpti_ActivityMemoryPool3 p = pool_rec(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED);
    ml_gpu_event_t e;
    cr_assert_eq(ml_cupti_activity_translate((CUpti_Activity *)&p, &e), 1);
    expect_pool_event(&e, ML_GPU_POOL_DESTROYED);
    cr_expect_eq(e.handle, 0);
}

Test(activity, pool_trimmed_keeps_min_bytes) {
    CUpti_ActivityMemoryPool3 p = pool_rec(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED);
    ml_gpu_event_t e;
    cr_assert_eq(ml_cupti_activity_translate((CUpti_Activity *)&p, &e), 1);
    expect_pool_event(&e, ML_GPU_POOL_TRIMMED);
    cr_expect_eq(e.handle, 123);
}

Test(activity, pool_imported_and_managed) {
    CUpti_ActivityMemoryPool3 p = pool_rec(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED);
    p.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED;
    p.isManagedPool = 1;
    ml_gpu_event_t e;
    cr_assert_eq(ml_cupti_activity_translate((CUpti_Activity *)&p, &e), 1);
    cr_expect_eq(e.flags, ML_GPU_F_POOL_IMPORTED | ML_GPU_F_POOL_MANAGED);
    cr_expect_eq(e.size, 0, "an imported pool's sizes are not reported");
    cr_expect_eq(e.pool_used, 0);
    cr_expect_eq(e.pool_threshold, 0);
}

Test(activity, pool_invalid_operation_ignored) {
    CUpti_ActivityMemoryPool3 p = pool_rec(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_INVALID);
    ml_gpu_event_t e;
    cr_expect_eq(ml_cupti_activity_translate((CUpti_Activity *)&p, &e), 0);
}

static void expect_mem_event(const ml_gpu_event_t *e, uint8_t op) {
    cr_expect_eq(e->op, ML_GPU_OP_POOL_STATE);
    cr_expect_eq(e->kind, op);
    cr_expect_eq(e->cbid, CUPTI_ACTIVITY_KIND_MEMORY2);
    cr_expect_eq(e->device, 1);
    cr_expect_eq(e->context, 9);
    cr_expect_eq(e->correlation, 77);
    cr_expect_eq(e->ptr, 0x7f0000200000, "the pool");
    cr_expect_eq(e->size, 12 * MiB, "reserved");
    cr_expect_eq(e->pool_used, 7 * MiB);
    cr_expect_eq(e->pool_threshold, 8 * MiB);
    cr_expect_eq(e->handle, 0x302000000, "the block");
    cr_expect_eq(e->stream, 3 * MiB, "the block's bytes");
    cr_expect_eq(e->flags, 0);
    cr_expect_eq(e->stack, 0);
}

Test(activity, memory2_alloc) {
    CUpti_ActivityMemory4 m = mem_rec(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
    ml_gpu_event_t e;
    cr_assert_eq(ml_cupti_activity_translate((CUpti_Activity *)&m, &e), 1);
    expect_mem_event(&e, ML_GPU_POOL_ALLOC);
}

Test(activity, memory2_release) {
    CUpti_ActivityMemory4 m = mem_rec(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
    ml_gpu_event_t e;
    cr_assert_eq(ml_cupti_activity_translate((CUpti_Activity *)&m, &e), 1);
    expect_mem_event(&e, ML_GPU_POOL_RELEASE);
}

Test(activity, memory2_imported_pool_and_no_context) {
    CUpti_ActivityMemory4 m = mem_rec(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
    m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED;
    m.memoryPoolConfig.pool.processId = 4242;
    m.contextId = CUPTI_INVALID_CONTEXT_ID;
    ml_gpu_event_t e;
    cr_assert_eq(ml_cupti_activity_translate((CUpti_Activity *)&m, &e), 1);
    cr_expect_eq(e.flags, ML_GPU_F_POOL_IMPORTED);
    cr_expect_eq(e.size, 0, "not the exporting process id");
    cr_expect_eq(e.pool_used, 0);
    cr_expect_eq(e.context, 0);
    cr_expect_eq(e.ptr, 0x7f0000200000);
}

Test(activity, memory2_without_pool_ignored) {
    /* cudaMalloc's MEMORY2 records: the callbacks already have them. */
    CUpti_ActivityMemory4 m = mem_rec(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
    m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    ml_gpu_event_t e;
    cr_expect_eq(ml_cupti_activity_translate((CUpti_Activity *)&m, &e), 0);
    m = mem_rec(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID);
    cr_expect_eq(ml_cupti_activity_translate((CUpti_Activity *)&m, &e), 0);
}

Test(activity, other_kinds_ignored) {
    /* A MEMORY2-shaped record under another kind must not be read as one. */
    CUpti_ActivityMemory4 m = mem_rec(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
    ml_gpu_event_t e;
    CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_MEMORY, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_INVALID};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        m.kind = kinds[i];
        cr_expect_eq(ml_cupti_activity_translate((CUpti_Activity *)&m, &e), 0, "kind %d", kinds[i]);
    }
    cr_expect_eq(ml_cupti_activity_translate(NULL, &e), 0);
}

/* ------------------------------------------------------------------------- */
/* The buffer path, with fake activity entry points                          */
/* ------------------------------------------------------------------------- */

static ml_gpu_event_t got[16];
static int ngot;
static size_t fake_dropped;
static int enables[64], registered;
static uint32_t fake_version;

static void capture(const ml_gpu_event_t *e) {
    if (ngot < 16) got[ngot++] = *e;
}

/* Records are laid out one after the other; each one's size follows its kind. */
static size_t rec_size(const CUpti_Activity *r) {
    return r->kind == CUPTI_ACTIVITY_KIND_MEMORY2 ? sizeof(CUpti_ActivityMemory4)
                                                  : sizeof(CUpti_ActivityMemoryPool3);
}
static CUptiResult fake_next(uint8_t *buf, size_t valid, CUpti_Activity **rec) {
    uint8_t *p = *rec ? (uint8_t *)*rec + rec_size(*rec) : buf;
    if (p >= buf + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)p;
    return CUPTI_SUCCESS;
}
static CUptiResult fake_dropped_fn(CUcontext c, uint32_t s, size_t *d) {
    (void)c;
    (void)s;
    *d = fake_dropped;
    return CUPTI_SUCCESS;
}
static CUptiResult fake_enable(CUpti_ActivityKind k) {
    if ((unsigned)k < 64) enables[k]++;
    return CUPTI_SUCCESS;
}
static CUptiResult fake_register(CUpti_BuffersCallbackRequestFunc a, CUpti_BuffersCallbackCompleteFunc b) {
    cr_expect_eq(a, ml__pools_buffer_requested);
    cr_expect_eq(b, ml__pools_buffer_completed);
    registered++;
    return CUPTI_SUCCESS;
}
static CUptiResult fake_flush(uint32_t f) {
    (void)f;
    return CUPTI_SUCCESS;
}
static CUptiResult fake_get_version(uint32_t *v) {
    *v = fake_version;
    return CUPTI_SUCCESS;
}

static void setup(void) {
    memset(&ml__cupti, 0, sizeof ml__cupti);
    ml__cupti.activity_get_next_record = fake_next;
    ml__cupti.activity_get_num_dropped = fake_dropped_fn;
    ml__cupti.activity_enable = fake_enable;
    ml__cupti.activity_register_callbacks = fake_register;
    ml__cupti.activity_flush_all = fake_flush;
    ml__cupti.get_version = fake_get_version;
    fake_version = CUPTI_API_VERSION;
    ml__record = capture;
    ml_atomic_store_relaxed(&ml__cupti_active, 1);
    ngot = 0;
}

/* A buffer as CUPTI would fill it: a pool record, a cudaMalloc MEMORY2
 * record (ignored), a pool allocation. */
static size_t fill(uint8_t *buf) {
    CUpti_ActivityMemoryPool3 p = pool_rec(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED);
    CUpti_ActivityMemory4 plain = mem_rec(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
    plain.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    CUpti_ActivityMemory4 m = mem_rec(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
    size_t n = 0;
    memcpy(buf + n, &p, sizeof p), n += sizeof p;
    memcpy(buf + n, &plain, sizeof plain), n += sizeof plain;
    memcpy(buf + n, &m, sizeof m), n += sizeof m;
    return n;
}

static bool mapped(void *p) {
    unsigned char v;
    return mincore(p, 4096, &v) == 0 || errno != ENOMEM;
}

Test(pools, buffer_records_handed_over_and_buffer_unmapped, .init = setup) {
    cr_assert_eq(ml__pools_start("fake"), 0);
    uint8_t *buf = NULL;
    size_t size = 0, max = 7;
    ml__pools_buffer_requested(&buf, &size, &max);
    cr_assert_not_null(buf);
    cr_expect_eq(size, 1u << 20);
    cr_expect_eq(max, 0);
    cr_expect_eq((uintptr_t)buf % 4096, 0, "page aligned (CUPTI needs 8)");
    size_t valid = fill(buf);
    ml__pools_buffer_completed(NULL, 0, buf, size, valid);
    cr_assert_eq(ngot, 2, "the cudaMalloc record is left to the callbacks");
    cr_expect_eq(got[0].kind, ML_GPU_POOL_CREATED);
    cr_expect_eq(got[1].kind, ML_GPU_POOL_ALLOC);
    cr_expect_eq(got[1].correlation, 77);
    cr_expect_not(mapped(buf), "the buffer is unmapped once handed over");
    ml_pools_stats_t st;
    ml__pools_stats(&st);
    cr_expect_eq(st.events, 2);
    cr_expect_eq(st.lost, 0);
}

Test(pools, records_after_recording_stopped_are_counted_lost, .init = setup) {
    cr_assert_eq(ml__pools_start("fake"), 0);
    uint8_t *buf;
    size_t size, max;
    ml__pools_buffer_requested(&buf, &size, &max);
    size_t valid = fill(buf);
    ml_atomic_store_relaxed(&ml__cupti_active, 0); /* a forked child, or CUPTI detached */
    fake_dropped = 5;
    ml__pools_buffer_completed(NULL, 0, buf, size, valid);
    cr_expect_eq(ngot, 0);
    ml_pools_stats_t st;
    ml__pools_stats(&st);
    cr_expect_eq(st.lost, 2);
    cr_expect_eq(st.cupti_dropped, 5, "CUPTI's own count");
    cr_expect_not(mapped(buf));
}

Test(pools, start_registers_and_enables_both_kinds, .init = setup) {
    cr_assert_eq(ml__pools_start("fake"), 0);
    cr_expect_eq(registered, 1);
    cr_expect_eq(enables[CUPTI_ACTIVITY_KIND_MEMORY_POOL], 1);
    cr_expect_eq(enables[CUPTI_ACTIVITY_KIND_MEMORY2], 1);
    cr_expect_eq(enables[CUPTI_ACTIVITY_KIND_MEMORY], 0);
}

Test(pools, start_refuses_without_the_activity_api, .init = setup) {
    ml__cupti.activity_flush_all = NULL;
    cr_expect_eq(ml__pools_start("fake"), -1);
    cr_expect_eq(registered, 0);
    cr_expect_eq(enables[CUPTI_ACTIVITY_KIND_MEMORY2], 0);
}

Test(pools, start_refuses_another_major_version, .init = setup) {
    fake_version = 120000; /* a cu12 libcupti: other record layouts */
    cr_expect_eq(ml__pools_start("fake"), -1);
    cr_expect_eq(registered, 0);
    cr_expect_eq(enables[CUPTI_ACTIVITY_KIND_MEMORY2], 0);
}
