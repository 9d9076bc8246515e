/* test_event_record.c - ml_event_to_record(): every ring event type and blob
 * kind as the record the trace and the analysis get, and every payload too
 * short for its kind rejected without reading past its end. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "ml_trace_io.h"

static ml_event_t ev_of(unsigned type, unsigned flags, uint8_t kind, uint64_t ptr, uint64_t size,
                        uint32_t stack) {
    ml_event_t e;
    memset(&e, 0, sizeof e);
    e.type = (uint8_t)(type | flags << 4);
    e.kind = kind;
    e.thread = 7;
    e.stack = stack;
    e.time = 1234;
    e.ptr = ptr;
    e.size = size;
    return e;
}

static char strings[4096 + 1 + 8192 + 1];

/* A record that must not be delivered leaves nothing behind to deliver:
 * the return is the contract. */
static int decode(const ml_event_t *e, const void *blob, ml_record_t *r) {
    memset(r, 0xa5, sizeof *r);
    return ml_event_to_record(e, blob, r, strings, sizeof strings);
}

Test(event_record, alloc_splits_size_and_slack) {
    uint64_t size = 1000, slack = 24;
    ml_event_t e = ev_of(ML_EV_ALLOC, ML_EVF_SAMPLED | ML_EVF_TRUNCATED, ML_KIND_CALLOC, 0x7f0000001000,
                         size | slack << 48, 42);
    ml_record_t r;
    cr_assert_eq(decode(&e, NULL, &r), 0);
    cr_expect_eq(r.tag, ML_T_ALLOC);
    cr_expect_eq(r.time_ms, 1234);
    cr_expect_eq(r.thread, 7);
    cr_expect_eq(r.u.alloc.kind, ML_KIND_CALLOC);
    cr_expect_eq(r.u.alloc.flags, ML_EVF_SAMPLED | ML_EVF_TRUNCATED);
    cr_expect_eq(r.u.alloc.ptr, 0x7f0000001000);
    cr_expect_eq(r.u.alloc.size, 1000);
    cr_expect_eq(r.u.alloc.usable, 1024);
    cr_expect_eq(r.u.alloc.stack, 42);
    /* A size of 2^48 or more carries no slack (the hook leaves the top bits
     * to the size): usable is then the size's low 48 bits. */
    e = ev_of(ML_EV_ALLOC, 0, ML_KIND_MALLOC, 0x1000, 0xffffull << 48 | 16, 1);
    cr_assert_eq(decode(&e, NULL, &r), 0);
    cr_expect_eq(r.u.alloc.size, 16);
    cr_expect_eq(r.u.alloc.usable, 16 + 0xffff);
}

Test(event_record, free_carries_the_usable_size) {
    ml_event_t e = ev_of(ML_EV_FREE, 0, ML_KIND_REALLOC, 0x5000, 48, 0);
    ml_record_t r;
    cr_assert_eq(decode(&e, NULL, &r), 0);
    cr_expect_eq(r.tag, ML_T_FREE);
    cr_expect_eq(r.u.alloc.kind, ML_KIND_REALLOC);
    cr_expect_eq(r.u.alloc.ptr, 0x5000);
    cr_expect_eq(r.u.alloc.size, 0);
    cr_expect_eq(r.u.alloc.usable, 48);
    cr_expect_eq(r.u.alloc.stack, 0);
    cr_expect_eq(r.u.alloc.flags, 0);
}

Test(event_record, plain_events_copy_their_fields) {
    static const struct {
        unsigned type, tag;
    } cases[] = {{ML_EV_REALLOC_FAIL, ML_T_REALLOC_FAIL},
                 {ML_EV_MMAP, ML_T_MMAP},
                 {ML_EV_MUNMAP, ML_T_MUNMAP},
                 {ML_EV_MMAP_FAIL, ML_T_MMAP_FAIL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ml_event_t e = ev_of(cases[i].type, ML_EVF_TRUNCATED, ML_KIND_MREMAP, 0x7000 + i, 1 << 20, 9);
        ml_record_t r;
        cr_assert_eq(decode(&e, NULL, &r), 0);
        cr_expect_eq(r.tag, cases[i].tag, "event type %u", cases[i].type);
        cr_expect_eq(r.u.alloc.kind, ML_KIND_MREMAP);
        cr_expect_eq(r.u.alloc.flags, ML_EVF_TRUNCATED);
        cr_expect_eq(r.u.alloc.ptr, 0x7000 + i);
        cr_expect_eq(r.u.alloc.size, 1 << 20);
        cr_expect_eq(r.u.alloc.usable, 0);
        cr_expect_eq(r.u.alloc.stack, 9);
    }
}

Test(event_record, node) {
    ml_event_t e = ev_of(ML_EV_NODE, 0, 0, 0x401234, 17, 18);
    ml_record_t r;
    cr_assert_eq(decode(&e, NULL, &r), 0);
    cr_expect_eq(r.tag, ML_T_NODE);
    cr_expect_eq(r.u.node.id, 18);
    cr_expect_eq(r.u.node.parent, 17);
    cr_expect_eq(r.u.node.pc, 0x401234);
    cr_expect_eq(r.time_ms, 1234);
}

Test(event_record, unknown_event_types_are_rejected) {
    unsigned bad[] = {ML_EV_NONE, 9, 10, 15};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ml_event_t e = ev_of(bad[i], 0, 0, 1, 2, 3);
        ml_record_t r;
        cr_expect_eq(decode(&e, NULL, &r), -EINVAL, "type %u", bad[i]);
    }
}

/* ------------------------------------------------------------------------- */
/* Blobs                                                                     */
/* ------------------------------------------------------------------------- */

typedef struct {
    ml_blob_module_t m;
    uint8_t tail[4096 + 64];
} module_blob_t;

static uint32_t make_module(module_blob_t *b, const char *path, uint32_t bid_len, uint16_t nsegs) {
    memset(b, 0, sizeof *b);
    b->m.base = 0x7f1200000000;
    b->m.nsegs = nsegs;
    for (int i = 0; i < ML_MAX_SEGMENTS; i++) {
        b->m.segs[i].vaddr = 0x1000u * (unsigned)i;
        b->m.segs[i].memsz = 0x800u + (unsigned)i;
        b->m.segs[i].flags = 5;
    }
    size_t n = strlen(path);
    memcpy(b->tail, path, n);
    b->m.path_len = (uint32_t)n;
    for (uint32_t i = 0; i < bid_len; i++) b->tail[n + i] = (uint8_t)(0xa0 + i);
    b->m.build_id_len = (uint16_t)bid_len;
    return (uint32_t)(sizeof b->m + n + bid_len);
}

Test(event_record, module_copies_path_and_build_id) {
    module_blob_t b;
    uint32_t len = make_module(&b, "/usr/lib/libfoo.so.1", 20, 3);
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MODULE, 0, len, 0);
    ml_record_t r;
    int used = decode(&e, &b, &r);
    cr_assert_eq(used, (int)strlen("/usr/lib/libfoo.so.1") + 1 + 20 + 1);
    /* The record owns nothing in the blob: the collector reuses it. */
    memset(&b, 0xee, sizeof b);
    cr_expect_eq(r.tag, ML_T_MODULE);
    cr_expect_eq(r.time_ms, 1234);
    cr_expect_eq(r.thread, 7);
    cr_expect_eq(r.u.module.base, 0x7f1200000000);
    cr_expect_str_eq(r.u.module.path, "/usr/lib/libfoo.so.1");
    cr_expect_eq(r.u.module.build_id_len, 20);
    for (int i = 0; i < 20; i++) cr_expect_eq(r.u.module.build_id[i], 0xa0 + i);
    cr_expect_eq(r.u.module.nsegs, 3);
    cr_expect_eq(r.u.module.segs[2].vaddr, 0x2000);
    cr_expect_eq(r.u.module.segs[2].memsz, 0x802);
    cr_expect_eq(r.u.module.segs[2].flags, 5);
    cr_expect_eq(r.u.module.segs[3].vaddr, 0, "segments past nsegs are clear");
}

Test(event_record, module_segments_are_capped) {
    module_blob_t b;
    uint32_t len = make_module(&b, "/a", 0, 40);
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MODULE, 0, len, 0);
    ml_record_t r;
    cr_assert_geq(decode(&e, &b, &r), 0);
    cr_expect_eq(r.u.module.nsegs, ML_MAX_SEGMENTS);
    cr_expect_eq(r.u.module.build_id_len, 0);
}

Test(event_record, malformed_modules_are_rejected) {
    module_blob_t b;
    uint32_t len = make_module(&b, "/usr/lib/libbar.so", 8, 2);
    ml_record_t r;
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MODULE, 0, sizeof b.m - 1, 0);
    cr_expect_eq(decode(&e, &b, &r), -EINVAL, "shorter than the header");
    e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MODULE, 0, len - 1, 0);
    cr_expect_eq(decode(&e, &b, &r), -EINVAL, "build-id overruns the payload");
    b.m.build_id_len = 0;
    b.m.path_len = len; /* path overruns the payload */
    e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MODULE, 0, len, 0);
    cr_expect_eq(decode(&e, &b, &r), -EINVAL, "path overruns the payload");
    /* A path of 4097 bytes that fits its payload is still refused. */
    static struct {
        ml_blob_module_t m;
        char path[4097];
    } big;
    memset(&big, 'x', sizeof big);
    big.m.path_len = 4097;
    big.m.build_id_len = 0;
    big.m.nsegs = 0;
    e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MODULE, 0, sizeof big, 0);
    cr_expect_eq(decode(&e, &big, &r), -EINVAL, "path longer than 4096 bytes");
    /* 4096 is the longest accepted. */
    big.m.path_len = 4096;
    cr_expect_eq(decode(&e, &big, &r), 4096 + 1 + 1, "the path and an empty build-id");
    cr_expect_eq(strlen(r.u.module.path), 4096);
}

Test(event_record, strings_that_do_not_fit_are_refused) {
    module_blob_t b;
    uint32_t len = make_module(&b, "/usr/lib/libfoo.so", 16, 1);
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MODULE, 0, len, 0);
    ml_record_t r;
    char small[20];
    cr_expect_eq(ml_event_to_record(&e, &b, &r, small, sizeof small), -ENOSPC);
    char exact[18 + 1 + 16 + 1];
    cr_expect_eq(ml_event_to_record(&e, &b, &r, exact, sizeof exact), (int)sizeof exact);
    cr_expect_str_eq(r.u.module.path, "/usr/lib/libfoo.so");
}

Test(event_record, module_unload) {
    uint64_t base = 0x7f0012340000;
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MODULE_UNLOAD, 0, 8, 0);
    ml_record_t r;
    cr_assert_eq(decode(&e, &base, &r), 0);
    cr_expect_eq(r.tag, ML_T_MODULE_UNLOAD);
    cr_expect_eq(r.u.module.base, base);
    e.size = 7;
    cr_expect_eq(decode(&e, &base, &r), -EINVAL);
}

Test(event_record, thread_name_of_sixteen_bytes) {
    ml_blob_thread_t t = {.index = 3, .tid = 4321};
    memcpy(t.name, "sixteen-chars-xy", 16); /* no NUL: prctl's names are at most 15 + NUL, */
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_THREAD, 0, sizeof t, 0); /* a blob need not be */
    ml_record_t r;
    cr_assert_eq(decode(&e, &t, &r), 17);
    cr_expect_eq(r.tag, ML_T_THREAD);
    cr_expect_eq(r.u.thread.index, 3);
    cr_expect_eq(r.u.thread.tid, 4321);
    cr_expect_str_eq(r.u.thread.name, "sixteen-chars-xy");
    strcpy(t.name, "worker");
    cr_assert_eq(decode(&e, &t, &r), 7);
    cr_expect_str_eq(r.u.thread.name, "worker");
    e.size = sizeof t - 1;
    cr_expect_eq(decode(&e, &t, &r), -EINVAL);
}

Test(event_record, mallinfo_and_exit) {
    ml_blob_mallinfo_t m = {1, 2, 3, 4, 5};
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MALLINFO, 0, sizeof m, 0);
    ml_record_t r;
    cr_assert_eq(decode(&e, &m, &r), 0);
    cr_expect_eq(r.tag, ML_T_MALLINFO);
    cr_expect_eq(r.u.mallinfo.arena, 1);
    cr_expect_eq(r.u.mallinfo.hblkhd, 2);
    cr_expect_eq(r.u.mallinfo.uordblks, 3);
    cr_expect_eq(r.u.mallinfo.fordblks, 4);
    cr_expect_eq(r.u.mallinfo.keepcost, 5);
    e.size = sizeof m - 1;
    cr_expect_eq(decode(&e, &m, &r), -EINVAL);

    ml_blob_exit_t x = {77};
    e = ev_of(ML_EV_BLOB, 0, ML_BLOB_EXIT, 0, sizeof x, 0);
    cr_assert_eq(decode(&e, &x, &r), 0);
    cr_expect_eq(r.tag, ML_T_PROC_EXIT);
    cr_expect_eq(r.u.proc_exit.nested_skipped, 77);
    e.size = sizeof x - 1;
    cr_expect_eq(decode(&e, &x, &r), -EINVAL);
}

static ml_gpu_event_t gpu_of(uint8_t op) {
    ml_gpu_event_t g;
    memset(&g, 0, sizeof g);
    g.struct_size = sizeof g;
    g.op = op;
    g.kind = ML_GPU_KIND_ASYNC;
    g.flags = ML_GPU_F_HOST | ML_EVF_TRUNCATED;
    g.cbid = 99;
    g.device = 1;
    g.context = 5;
    g.stack = 12;
    g.correlation = 333;
    g.stream = 0xabc;
    g.ptr = 0x7000000;
    g.size = 4096;
    g.handle = 0xdead;
    g.pool_used = 111;
    g.pool_threshold = 222;
    return g;
}

Test(event_record, gpu_alloc_free_and_pool) {
    ml_gpu_event_t g = gpu_of(ML_GPU_OP_ALLOC);
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_GPU, 0, ML_GPU_EVENT_BASE_SIZE, 0);
    ml_record_t r;
    cr_assert_eq(decode(&e, &g, &r), 0);
    cr_expect_eq(r.tag, ML_T_GPU_ALLOC);
    cr_expect_eq(r.u.gpu.op, ML_GPU_OP_ALLOC);
    cr_expect_eq(r.u.gpu.kind, ML_GPU_KIND_ASYNC);
    cr_expect_eq(r.u.gpu.flags, ML_GPU_F_HOST | ML_EVF_TRUNCATED);
    cr_expect_eq(r.u.gpu.device, 1);
    cr_expect_eq(r.u.gpu.context, 5);
    cr_expect_eq(r.u.gpu.stack, 12);
    cr_expect_eq(r.u.gpu.cbid, 99);
    cr_expect_eq(r.u.gpu.correlation, 333);
    cr_expect_eq(r.u.gpu.stream, 0xabc);
    cr_expect_eq(r.u.gpu.ptr, 0x7000000);
    cr_expect_eq(r.u.gpu.size, 4096);
    cr_expect_eq(r.u.gpu.handle, 0xdead);
    cr_expect_eq(r.u.gpu.pool_used, 0, "past the base size the payload reads as zeros");
    cr_expect_eq(r.u.gpu.pool_threshold, 0);

    uint8_t frees[] = {ML_GPU_OP_FREE, ML_GPU_OP_FREE_FAILED, ML_GPU_OP_CTX_DESTROY,
                       ML_GPU_OP_POOL_TRIM};
    for (size_t i = 0; i < sizeof frees; i++) {
        g = gpu_of(frees[i]);
        cr_assert_eq(decode(&e, &g, &r), 0);
        cr_expect_eq(r.tag, ML_T_GPU_FREE, "op %u", frees[i]);
        cr_expect_eq(r.u.gpu.op, frees[i]);
        cr_expect_eq(r.u.gpu.stack, 0, "only allocations keep a stack");
        cr_expect_eq(r.u.gpu.ptr, 0x7000000);
    }

    g = gpu_of(ML_GPU_OP_POOL_STATE);
    e.size = sizeof g;
    cr_assert_eq(decode(&e, &g, &r), 0);
    cr_expect_eq(r.tag, ML_T_GPU_POOL);
    cr_expect_eq(r.u.gpu.pool_used, 111);
    cr_expect_eq(r.u.gpu.pool_threshold, 222);
    /* A longer payload (a newer producer) is read up to what we know. */
    struct {
        ml_gpu_event_t g;
        uint64_t more[4];
    } longer = {gpu_of(ML_GPU_OP_POOL_STATE), {1, 2, 3, 4}};
    e.size = sizeof longer;
    cr_assert_eq(decode(&e, &longer, &r), 0);
    cr_expect_eq(r.u.gpu.pool_threshold, 222);
}

Test(event_record, malformed_gpu_events_are_rejected) {
    ml_gpu_event_t g = gpu_of(ML_GPU_OP_ALLOC);
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_GPU, 0, offsetof(ml_gpu_event_t, handle) - 1, 0);
    ml_record_t r;
    cr_expect_eq(decode(&e, &g, &r), -EINVAL, "shorter than the fields up to handle");
    e.size = offsetof(ml_gpu_event_t, handle);
    cr_expect_eq(decode(&e, &g, &r), 0, "up to handle is enough");
    cr_expect_eq(r.u.gpu.handle, 0);
    uint8_t bad[] = {0, 7, ML_GPU_OP_INTERNAL_BEGIN, ML_GPU_OP_INTERNAL_END, 0xff};
    for (size_t i = 0; i < sizeof bad; i++) {
        g = gpu_of(bad[i]);
        e.size = sizeof g;
        cr_expect_eq(decode(&e, &g, &r), -EINVAL, "op %u", bad[i]);
    }
}

Test(event_record, unknown_blob_kinds_are_rejected) {
    uint8_t payload[64] = {0};
    uint8_t kinds[] = {0, 7, 8, 200};
    for (size_t i = 0; i < sizeof kinds; i++) {
        ml_event_t e = ev_of(ML_EV_BLOB, 0, kinds[i], 0, sizeof payload, 0);
        ml_record_t r;
        cr_expect_eq(decode(&e, payload, &r), -EINVAL, "kind %u", kinds[i]);
    }
    /* A blob event without its payload. */
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MALLINFO, 0, sizeof(ml_blob_mallinfo_t), 0);
    ml_record_t r;
    cr_expect_eq(decode(&e, NULL, &r), -EINVAL);
}

/* The decoded record is what the writer stores and the reader gives back:
 * the trace round trip of a decoded module keeps every field. */
Test(event_record, decoded_records_round_trip_through_a_trace) {
    char path[] = "/tmp/ml_event_record_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    ml_writer_t *w;
    cr_assert_eq(ml_writer_new(fd, 1, &w), 0);
    module_blob_t b;
    uint32_t len = make_module(&b, "/lib/x86_64-linux-gnu/libc.so.6", 20, 4);
    ml_event_t e = ev_of(ML_EV_BLOB, 0, ML_BLOB_MODULE, 0, len, 0);
    ml_record_t r;
    cr_assert_geq(decode(&e, &b, &r), 0);
    cr_assert_eq(ml_writer_add(w, &r), 0);
    e = ev_of(ML_EV_ALLOC, 0, ML_KIND_MALLOC, 0x1000, 100 | 12ull << 48, 3);
    cr_assert_eq(decode(&e, NULL, &r), 0);
    cr_assert_eq(ml_writer_add(w, &r), 0);
    cr_assert_eq(ml_writer_free(w), 0);
    close(fd);
    ml_reader_t *rd;
    cr_assert_eq(ml_reader_open(path, &rd, NULL, 0), 0);
    ml_record_t got;
    cr_assert_eq(ml_reader_next(rd, &got), 1);
    cr_expect_eq(got.tag, ML_T_MODULE);
    cr_expect_str_eq(got.u.module.path, "/lib/x86_64-linux-gnu/libc.so.6");
    cr_expect_eq(got.u.module.build_id_len, 20);
    cr_expect_eq(got.u.module.build_id[19], 0xa0 + 19);
    cr_expect_eq(got.u.module.nsegs, 4);
    cr_expect_eq(got.time_ms, 1234);
    cr_assert_eq(ml_reader_next(rd, &got), 1);
    cr_expect_eq(got.tag, ML_T_ALLOC);
    cr_expect_eq(got.u.alloc.size, 100);
    cr_expect_eq(got.u.alloc.usable, 112);
    ml_reader_close(rd);
    unlink(path);
}
