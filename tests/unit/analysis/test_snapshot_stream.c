/* test_snapshot_stream.c - the streamed analysis snapshot
 * (ml_analysis_snapshot_stream) is the buffered one (ml_analysis_snapshot)
 * byte for byte, in pieces of bounded size, and stops at its consumer's
 * first error. The collector writes the streamed one into every trace
 * (collector/sink_trace.c); reports restore it as the buffered one. */
#include "ml_analysis.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SPILL_AT (1u << 20) /* analysis/snap_codec.h: ML__SPILL_AT */
#define LONG_PATH ((3u << 19) + 77) /* a module path longer than the spill buffer */
#define LIVE 400000u /* live blocks: about 4 MB of snapshot, several spills */

static ml_analysis_t *A;

/* A session with what every section of a snapshot holds: stacks, modules
 * (one with a path longer than the spill buffer), threads, live heap
 * blocks, maps, a peak with freed blocks, GPU state, and the end. */
static void setup(void) {
    cr_assert_eq(ml_analysis_new(&A), 0);
    ml_record_t r = {.tag = ML_T_PROCESS};
    r.u.process.page_size = 4096;
    r.u.process.exe = "/bin/true";
    r.u.process.parent_trace = "";
    r.u.process.producer = "test";
    ml_analysis_feed(A, &r);
    char *path = malloc(LONG_PATH + 1);
    cr_assert(path);
    for (size_t i = 0; i < LONG_PATH; i++) path[i] = (char)('a' + i % 26);
    path[LONG_PATH] = '\0';
    for (int m = 0; m < 2; m++) {
        ml_record_t mod = {.tag = ML_T_MODULE};
        mod.u.module.base = 0x400000ull * (m + 1);
        mod.u.module.path = m ? path : "/lib/libshort.so";
        mod.u.module.nsegs = 1;
        mod.u.module.segs[0].memsz = 0x10000;
        ml_analysis_feed(A, &mod);
    }
    free(path);
    for (uint32_t id = 1; id <= 64; id++) {
        ml_record_t n = {.tag = ML_T_NODE};
        n.u.node.id = id;
        n.u.node.parent = id > 8 ? id - 8 : 0;
        n.u.node.pc = 0x400000ull + 0x40ull * id;
        ml_analysis_feed(A, &n);
    }
    for (uint32_t t = 0; t < 3; t++) {
        ml_record_t th = {.tag = ML_T_THREAD, .thread = t};
        th.u.thread.index = t;
        th.u.thread.tid = 100 + t;
        th.u.thread.name = t ? "worker" : "main";
        ml_analysis_feed(A, &th);
    }
    /* LIVE + LIVE/4 blocks, then a quarter freed: a peak with a graveyard. */
    uint32_t n = LIVE + LIVE / 4;
    for (uint32_t i = 0; i < n; i++) {
        ml_record_t a = {.tag = ML_T_ALLOC, .time_ms = i / 1000, .thread = i % 3};
        a.u.alloc.kind = ML_KIND_MALLOC;
        a.u.alloc.ptr = 0x10000000ull + 48ull * i;
        a.u.alloc.size = 16 + i % 32;
        a.u.alloc.usable = 16 + i % 32;
        a.u.alloc.stack = 1 + i % 64;
        ml_analysis_feed(A, &a);
    }
    for (uint32_t i = 0; i < n; i += 5) {
        ml_record_t f = {.tag = ML_T_FREE, .time_ms = n / 1000 + 1};
        f.u.alloc.kind = ML_KIND_FREE;
        f.u.alloc.ptr = 0x10000000ull + 48ull * i;
        ml_analysis_feed(A, &f);
    }
    for (uint32_t i = 0; i < 10; i++) {
        ml_record_t m = {.tag = ML_T_MMAP, .time_ms = n / 1000 + 2};
        m.u.alloc.kind = ML_KIND_MMAP;
        m.u.alloc.ptr = 0x7f0000000000ull + (uint64_t)i * 0x100000;
        m.u.alloc.size = 0x100000;
        m.u.alloc.stack = 3;
        ml_analysis_feed(A, &m);
    }
    ml_record_t g = {.tag = ML_T_GPU_ALLOC, .time_ms = n / 1000 + 3};
    g.u.gpu.op = ML_GPU_OP_ALLOC;
    g.u.gpu.kind = ML_GPU_KIND_DEVICE;
    g.u.gpu.context = 1;
    g.u.gpu.ptr = 0x1000000000ull;
    g.u.gpu.size = 1 << 20;
    g.u.gpu.stack = 5;
    ml_analysis_feed(A, &g);
    ml_record_t end = {.tag = ML_T_END, .time_ms = n / 1000 + 4};
    ml_analysis_feed(A, &end);
}

static void teardown(void) {
    ml_analysis_free(A);
}

/* What the stream handed: every piece appended, and their sizes. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    size_t pieces, big_pieces, max_piece;
    size_t fail_at; /* the piece that fails with -EIO (1-based; 0: none) */
} sink_t;

static int collect(void *ctx, const void *p, size_t n) {
    sink_t *s = ctx;
    s->pieces++;
    if (s->fail_at && s->pieces >= s->fail_at) return -EIO;
    cr_assert_gt(n, 0, "an empty piece");
    if (n > SPILL_AT) s->big_pieces++;
    if (n > s->max_piece) s->max_piece = n;
    if (s->len + n > s->cap) {
        s->cap = (s->len + n) * 2;
        s->p = realloc(s->p, s->cap);
        cr_assert(s->p);
    }
    memcpy(s->p + s->len, p, n);
    s->len += n;
    return 0;
}

/* Streamed and buffered, both versions the collector and tests write: the
 * same bytes, in pieces of at most the spill buffer but the long module
 * path, which goes on its own. */
Test(snapshot_stream, same_bytes_as_the_buffer, .init = setup, .fini = teardown, .timeout = 60) {
    uint32_t versions[] = {ML_ANALYSIS_SNAPSHOT_VERSION, 4};
    for (int v = 0; v < 2; v++) {
        void *data;
        size_t len;
        cr_assert_eq(ml_analysis_snapshot_version(A, versions[v], &data, &len), 0);
        cr_assert_gt(len, 3 * SPILL_AT + LONG_PATH, "version %u: %zu bytes spill only a few times",
                     versions[v], len);
        sink_t s = {0};
        uint64_t raw = 0;
        cr_assert_eq(ml_analysis_snapshot_stream(A, versions[v], collect, &s, &raw), 0);
        cr_expect_eq(raw, len, "version %u: %lu streamed, %zu buffered", versions[v], (unsigned long)raw, len);
        cr_expect_eq(s.len, len);
        cr_expect(s.len == len && memcmp(s.p, data, len) == 0, "version %u: the bytes differ", versions[v]);
        cr_expect_geq(s.pieces, 4, "version %u: %zu pieces", versions[v], s.pieces);
        cr_expect_eq(s.big_pieces, 1, "only the long path comes whole");
        cr_expect_eq(s.max_piece, LONG_PATH);
        /* The buffered one restores: so does what the stream handed. */
        ml_analysis_t *b;
        char err[256];
        cr_assert_eq(ml_analysis_new(&b), 0);
        cr_expect_eq(ml_analysis_restore(b, s.p, s.len, err, sizeof err), 0, "%s", err);
        cr_expect_eq(ml_analysis_totals(b)->heap_blocks, ml_analysis_totals(A)->heap_blocks);
        ml_analysis_free(b);
        free(s.p);
        free(data);
    }
}

/* The consumer's error stops the stream: nothing is handed after it, and
 * the error is returned. */
Test(snapshot_stream, stops_at_the_consumers_error, .init = setup, .fini = teardown, .timeout = 60) {
    for (size_t at = 1; at <= 3; at++) {
        sink_t s = {.fail_at = at};
        uint64_t raw = 77;
        cr_expect_eq(ml_analysis_snapshot_stream(A, ML_ANALYSIS_SNAPSHOT_VERSION, collect, &s, &raw), -EIO);
        cr_expect_eq(s.pieces, at, "pieces handed after the error");
        cr_expect_eq(raw, 0);
        free(s.p);
    }
    sink_t s = {0};
    uint64_t raw;
    cr_expect_eq(ml_analysis_snapshot_stream(A, 3, collect, &s, &raw), -EINVAL, "only 4 and 5 are written");
    cr_expect_eq(s.pieces, 0);
}

/* A light session cannot be saved, streamed or not. */
Test(snapshot_stream, light_session_is_not_saved) {
    ml_analysis_t *a;
    cr_assert_eq(ml_analysis_new_light(&a), 0);
    sink_t s = {0};
    uint64_t raw;
    cr_expect_eq(ml_analysis_snapshot_stream(a, ML_ANALYSIS_SNAPSHOT_VERSION, collect, &s, &raw), -ENOTSUP);
    cr_expect_eq(s.pieces, 0);
    ml_analysis_free(a);
}
