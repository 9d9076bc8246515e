/* activity.c - CUPTI activity records about memory pools, as GPU events.
 *
 * With `memlens run --gpu-pools`, CUPTI hands the collector buffers of
 * activity records (pools.c); this file turns one record into one
 * ML_GPU_OP_POOL_STATE event. It is pure: no CUPTI calls, no allocation, so
 * it is unit-tested on synthesized records (tests/unit/cupti/test_activity.c).
 *
 * Only the record versions this build's cupti_activity.h defines for the two
 * kinds are read (CUPTI 13: CUpti_ActivityMemory4 for MEMORY2,
 * CUpti_ActivityMemoryPool3 for MEMORY_POOL); pools.c enables the kinds only
 * when the loaded libcupti has the same major version, since a record's
 * layout follows the libcupti that wrote it.
 */
#include "ml_cupti.h"

#include <string.h>

static int32_t device_ordinal(uint32_t id) {
    return id == UINT32_MAX ? ML_GPU_DEVICE_UNKNOWN : (int32_t)id;
}

static void start(ml_gpu_event_t *out, uint8_t pool_op, CUpti_ActivityKind kind) {
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->op = ML_GPU_OP_POOL_STATE;
    out->kind = pool_op;
    out->cbid = (uint16_t)kind;
}

/* MEMORY2: one stream-ordered allocation or free, with its pool's sizes just
 * after it. Records of memory that no pool serves (cudaMalloc, statics) have
 * pool type INVALID: the callbacks already have those. */
static int memory2(const CUpti_ActivityMemory4 *m, ml_gpu_event_t *out) {
    uint8_t op;
    if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
        op = ML_GPU_POOL_ALLOC;
    else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        op = ML_GPU_POOL_RELEASE;
    else
        return 0;
    CUpti_ActivityMemoryPoolType type = m->memoryPoolConfig.memoryPoolType;
    if (type != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL &&
        type != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED)
        return 0;
    start(out, op, CUPTI_ACTIVITY_KIND_MEMORY2);
    out->device = device_ordinal(m->deviceId);
    out->context = m->contextId == CUPTI_INVALID_CONTEXT_ID ? 0 : m->contextId;
    out->correlation = m->correlationId;
    out->ptr = m->memoryPoolConfig.address;
    out->handle = m->address;
    out->stream = m->bytes;
    if (type == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
        out->size = m->memoryPoolConfig.pool.size;
        out->pool_used = m->memoryPoolConfig.utilizedSize;
        out->pool_threshold = m->memoryPoolConfig.releaseThreshold;
    } else {
        /* An imported pool's `pool` union holds the exporting process' id,
         * and its sizes are not reported: leave them 0 and say so. */
        out->flags = ML_GPU_F_POOL_IMPORTED;
    }
    return 1;
}

/* MEMORY_POOL: a pool was created, destroyed or trimmed. */
static int memory_pool(const CUpti_ActivityMemoryPool3 *p, ml_gpu_event_t *out) {
    uint8_t op;
    switch (p->memoryPoolOperationType) {
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED: op = ML_GPU_POOL_CREATED; break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED: op = ML_GPU_POOL_DESTROYED; break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED: op = ML_GPU_POOL_TRIMMED; break;
    default: return 0;
    }
    start(out, op, CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    out->device = device_ordinal(p->deviceId);
    out->correlation = p->correlationId;
    out->ptr = p->address;
    if (p->memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED) {
        out->flags |= ML_GPU_F_POOL_IMPORTED;
    } else {
        out->size = p->size;
        out->pool_used = p->utilizedSize;
        out->pool_threshold = p->releaseThreshold;
    }
    if (p->isManagedPool) out->flags |= ML_GPU_F_POOL_MANAGED;
    if (op == ML_GPU_POOL_TRIMMED) out->handle = p->minBytesToKeep;
    return 1;
}

int ml_cupti_activity_translate(const CUpti_Activity *rec, ml_gpu_event_t *out) {
    if (!rec || !out) return 0;
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2: return memory2((const CUpti_ActivityMemory4 *)rec, out);
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
        return memory_pool((const CUpti_ActivityMemoryPool3 *)rec, out);
    default: return 0;
    }
}
