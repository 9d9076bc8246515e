/* trace_build.h - trace records for the tests that write traces with the
 * real trace writer (trace/ml_trace_io.h): one builder per kind of record,
 * so that a test says what happens (64 bytes at 10 ms on stack 2) rather
 * than how a record is filled in. Header-only and without Criterion: the
 * viewer's tests (tests/unit/viewer/vtest.h) and tests/golden's
 * ml_make_golden both use it.
 */
#ifndef ML_TRACE_BUILD_H
#define ML_TRACE_BUILD_H

#include "ml_trace_io.h"

/* A process record: page size 4096, no arguments (set argc/argv after),
 * the root process of its trace. */
static inline ml_record_t tb_process(uint32_t pid, const char *exe, const char *producer) {
    ml_record_t r = {.tag = ML_T_PROCESS};
    r.u.process.pid = pid;
    r.u.process.page_size = 4096;
    r.u.process.exe = exe;
    r.u.process.parent_trace = "";
    r.u.process.producer = producer;
    return r;
}

/* A module loaded at `base`: one read-execute segment of 1 MiB. */
static inline ml_record_t tb_module(uint64_t base, const char *path) {
    ml_record_t r = {.tag = ML_T_MODULE};
    r.u.module.base = base;
    r.u.module.path = path;
    r.u.module.nsegs = 1;
    r.u.module.segs[0].vaddr = 0;
    r.u.module.segs[0].memsz = 0x100000;
    r.u.module.segs[0].flags = 5;
    return r;
}

/* A stack node: frame `pc` called from node `parent` (0: the root). */
static inline ml_record_t tb_node(uint32_t id, uint32_t parent, uint64_t pc) {
    ml_record_t r = {.tag = ML_T_NODE};
    r.u.node.id = id;
    r.u.node.parent = parent;
    r.u.node.pc = pc;
    return r;
}

/* An allocation of `kind` (ML_KIND_MALLOC, ...; ML_KIND_REALLOC for the new
 * block of a realloc) at time t. */
static inline ml_record_t tb_alloc(uint32_t t, uint8_t kind, uint64_t ptr, uint64_t size, uint32_t stack) {
    ml_record_t r = {.tag = ML_T_ALLOC, .time_ms = t};
    r.u.alloc.kind = kind;
    r.u.alloc.ptr = ptr;
    r.u.alloc.size = size;
    r.u.alloc.stack = stack;
    return r;
}

/* A free: kind ML_KIND_FREE, or ML_KIND_REALLOC for the old block of a realloc. */
static inline ml_record_t tb_free(uint32_t t, uint8_t kind, uint64_t ptr) {
    ml_record_t r = {.tag = ML_T_FREE, .time_ms = t};
    r.u.alloc.kind = kind;
    r.u.alloc.ptr = ptr;
    return r;
}

/* A GPU record: tag ML_T_GPU_ALLOC or ML_T_GPU_FREE, op an ml_gpu_op_t. */
static inline ml_record_t tb_gpu(uint8_t tag, uint8_t op, uint8_t kind, uint32_t t, int32_t dev, uint32_t ctx,
                                 uint64_t ptr, uint64_t size, uint32_t stack) {
    ml_record_t r = {.tag = tag, .time_ms = t};
    r.u.gpu.op = op;
    r.u.gpu.kind = kind;
    r.u.gpu.device = dev;
    r.u.gpu.context = ctx;
    r.u.gpu.ptr = ptr;
    r.u.gpu.size = size;
    r.u.gpu.stack = stack;
    return r;
}

/* The end of the trace: the process exited with `status` at time t. */
static inline ml_record_t tb_end(uint32_t t, int32_t status) {
    ml_record_t r = {.tag = ML_T_END, .time_ms = t};
    r.u.end.status_kind = ML_END_EXITED;
    r.u.end.status = status;
    r.u.end.duration_ms = t;
    return r;
}

#endif
