/* test_format.c - .mlt writer/reader round trips, literal bytes, truncation,
 * corruption and version checks. */
#define _GNU_SOURCE
#include "ml_trace_io.h"
#include "address_model.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

static char path[256];

static void setup(void) {
    snprintf(path, sizeof path, "/tmp/memlens-format-%d.mlt", (int)getpid());
}
static void teardown(void) {
    unlink(path);
}

static const uint8_t bid[4] = {0xde, 0xad, 0xbe, 0xef};

/* One record of every tag. */
static int sample_records(ml_record_t *r) {
    int n = 0;
    memset(r, 0, 24 * sizeof *r);
    r[n].tag = ML_T_PROCESS;
    r[n].u.process.pid = 1234;
    r[n].u.process.ppid = 1;
    r[n].u.process.start_realtime_ns = 1700000000123456789ull;
    r[n].u.process.page_size = 4096;
    r[n].u.process.depth = 64;
    r[n].u.process.sample_bytes = 0;
    r[n].u.process.parent_trace = "";
    r[n].u.process.exe = "/usr/bin/prog";
    r[n].u.process.argc = 2;
    r[n].u.process.argv[0] = "prog";
    r[n].u.process.argv[1] = "--flag \"quoted\"";
    r[n].u.process.producer = "memlens test";
    n++;
    r[n].tag = ML_T_THREAD;
    r[n].u.thread.index = 0;
    r[n].u.thread.tid = 1234;
    r[n].u.thread.name = "prog";
    n++;
    r[n].tag = ML_T_MODULE;
    r[n].u.module.base = 0x555500000000ull;
    r[n].u.module.path = "/usr/bin/prog";
    r[n].u.module.build_id = bid;
    r[n].u.module.build_id_len = 4;
    r[n].u.module.nsegs = 2;
    r[n].u.module.segs[0] = (ml_segment_t){0, 0x1000, 4};
    r[n].u.module.segs[1] = (ml_segment_t){0x1000, 0x2345, 5};
    n++;
    r[n].tag = ML_T_NODE;
    r[n].u.node.id = 1;
    r[n].u.node.parent = 0;
    r[n].u.node.pc = 0x555500001234ull;
    n++;
    r[n].tag = ML_T_ALLOC;
    r[n].time_ms = 5;
    r[n].u.alloc.kind = ML_KIND_MALLOC;
    r[n].u.alloc.ptr = 0x5555aaaa0010ull;
    r[n].u.alloc.size = 100;
    r[n].u.alloc.usable = 104;
    r[n].u.alloc.stack = 1;
    n++;
    r[n].tag = ML_T_FREE;
    r[n].time_ms = 5;
    r[n].thread = 3;
    r[n].u.alloc.kind = ML_KIND_FREE;
    r[n].u.alloc.ptr = 0x5555aaaa0010ull;
    r[n].u.alloc.usable = 104;
    n++;
    r[n].tag = ML_T_REALLOC_FAIL;
    r[n].time_ms = 6;
    r[n].thread = 3;
    r[n].u.alloc.ptr = 0x5555aaaa0000ull;
    n++;
    r[n].tag = ML_T_MMAP;
    r[n].time_ms = 6;
    r[n].u.alloc.kind = ML_KIND_MMAP;
    r[n].u.alloc.ptr = 0x7f0000000000ull;
    r[n].u.alloc.size = 1 << 20;
    r[n].u.alloc.stack = 1;
    n++;
    r[n].tag = ML_T_MUNMAP;
    r[n].time_ms = 6;
    r[n].u.alloc.kind = ML_KIND_MUNMAP;
    r[n].u.alloc.ptr = 0x7f0000000000ull;
    r[n].u.alloc.size = 1 << 20;
    n++;
    r[n].tag = ML_T_MMAP_FAIL;
    r[n].time_ms = 6;
    r[n].u.alloc.kind = ML_KIND_MREMAP;
    r[n].u.alloc.ptr = 0x7f0000001000ull;
    r[n].u.alloc.size = 4096;
    n++;
    r[n].tag = ML_T_MODULE_UNLOAD;
    r[n].time_ms = 7;
    r[n].u.module.base = 0x555500000000ull;
    n++;
    r[n].tag = ML_T_MALLINFO;
    r[n].time_ms = 7;
    r[n].u.mallinfo.arena = 135168;
    r[n].u.mallinfo.uordblks = 100;
    r[n].u.mallinfo.fordblks = 135068;
    n++;
    r[n].tag = ML_T_RSS;
    r[n].time_ms = 8;
    r[n].u.rss.rss_bytes = 4 << 20;
    r[n].u.rss.interval_ms = 30; /* since 1.8 */
    n++;
    r[n].tag = ML_T_GPU_ALLOC;
    r[n].time_ms = 8;
    r[n].thread = 2;
    r[n].u.gpu.op = ML_GPU_OP_ALLOC;
    r[n].u.gpu.kind = ML_GPU_KIND_POOL;
    r[n].u.gpu.flags = ML_EVF_TRUNCATED | ML_GPU_F_ESTIMATED;
    r[n].u.gpu.device = 1;
    r[n].u.gpu.context = 3;
    r[n].u.gpu.stream = 0x5555deadbeefull;
    r[n].u.gpu.ptr = 0x7f1200000000ull;
    r[n].u.gpu.size = 4 << 20;
    r[n].u.gpu.handle = 0x1234;
    r[n].u.gpu.stack = 1;
    r[n].u.gpu.cbid = 611;
    r[n].u.gpu.correlation = 77;
    n++;
    r[n].tag = ML_T_GPU_FREE;
    r[n].time_ms = 8;
    r[n].thread = 2;
    r[n].u.gpu.op = ML_GPU_OP_CTX_DESTROY;
    r[n].u.gpu.kind = ML_GPU_KIND_DEVICE;
    r[n].u.gpu.device = ML_GPU_DEVICE_UNKNOWN;
    r[n].u.gpu.context = 3;
    r[n].u.gpu.ptr = 0x7f1200000000ull;
    r[n].u.gpu.cbid = 2;
    r[n].u.gpu.correlation = 78;
    n++;
    r[n].tag = ML_T_PROC_EXIT;
    r[n].time_ms = 9;
    r[n].u.proc_exit.nested_skipped = 3;
    n++;
    r[n].tag = ML_T_BLOCK_REACH;
    r[n].time_ms = 9;
    r[n].u.block_reach.reach = ML_REACH_INDIRECT;
    r[n].u.block_reach.ptr = 0x5555aaaa0040ull;
    n++;
    r[n].tag = ML_T_REACH_REST;
    r[n].time_ms = 9;
    r[n].u.block_reach.reach = ML_REACH_REACHABLE;
    n++;
    r[n].tag = ML_T_REACH_SCAN;
    r[n].time_ms = 9;
    r[n].u.reach_scan.status = -1;
    r[n].u.reach_scan.root_bytes = 8192;
    r[n].u.reach_scan.heap_bytes = 300;
    r[n].u.reach_scan.blocks = 3;
    r[n].u.reach_scan.reachable = 1;
    r[n].u.reach_scan.indirect = 1;
    r[n].u.reach_scan.definite = 1;
    r[n].u.reach_scan.duration_us = 42;
    n++;
    r[n].tag = ML_T_UNTRACED; /* since 1.9 */
    r[n].time_ms = 9;
    r[n].u.untraced.what = ML_UNTRACED_CHILDREN;
    r[n].u.untraced.count = 3;
    r[n].u.untraced.message = "not traced: 3 child processes started by process 1234 (/usr/bin/prog)";
    n++;
    r[n].tag = ML_T_END;
    r[n].time_ms = 9;
    r[n].u.end.status_kind = ML_END_SIGNALED;
    r[n].u.end.status = 11;
    r[n].u.end.events = 12;
    r[n].u.end.duration_ms = 9;
    n++;
    return n;
}

/* Reads the trace at `path` (one chunk) into buf and its first chunk's
 * records, decompressed, into out; returns their length. */
static size_t first_chunk(uint8_t *buf, size_t bufsz, uint8_t *out, size_t outsz) {
    int fd = open(path, O_RDONLY);
    ssize_t len = read(fd, buf, bufsz);
    close(fd);
    cr_assert_gt(len, 32);
    uint32_t comp;
    memcpy(&comp, buf + 20, 4);
    return ZSTD_decompress(out, outsz, buf + 32, comp);
}

static void write_trace(const ml_record_t *r, int n, bool flush_each) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    ml_writer_t *w;
    cr_assert_eq(ml_writer_new(fd, 1, &w), 0);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(ml_writer_add(w, &r[i]), 0);
        if (flush_each) cr_assert_eq(ml_writer_flush(w), 0);
    }
    cr_assert_eq(ml_writer_free(w), 0);
    close(fd);
}

static char *dump_file(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ml_reader_t *rd;
    char err[256];
    cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0, "%s", err);
    ml_record_t rec;
    int rc;
    while ((rc = ml_reader_next(rd, &rec)) > 0) ml_record_print(m, &rec);
    cr_assert_eq(rc, 0, "%s", ml_reader_error(rd));
    cr_expect(ml_reader_complete(rd));
    cr_expect_not(ml_reader_truncated(rd));
    ml_reader_close(rd);
    fclose(m);
    return buf;
}

static const char *const golden =
    "0.000 t0 process pid=1234 ppid=1 start_ns=1700000000123456789 page_size=4096 unwinder=libunwind "
    "depth=64 sample_bytes=0 options=0x0 parent_trace=\"\" exe=\"/usr/bin/prog\" argv=[\"prog\" "
    "\"--flag \\\"quoted\\\"\"] producer=\"memlens test\"\n"
    "0.000 t0 thread index=0 tid=1234 name=\"prog\"\n"
    "0.000 t0 module base=0x555500000000 path=\"/usr/bin/prog\" build_id=deadbeef seg=0x0+0x1000:r-- "
    "seg=0x1000+0x2345:r-x\n"
    "0.000 t0 node id=1 parent=0 pc=0x555500001234\n"
    "0.005 t0 alloc malloc ptr=0x5555aaaa0010 size=100 usable=104 stack=1\n"
    "0.005 t3 free free ptr=0x5555aaaa0010 usable=104\n"
    "0.006 t3 realloc-fail ptr=0x5555aaaa0000\n"
    "0.006 t0 mmap mmap ptr=0x7f0000000000 size=1048576 stack=1\n"
    "0.006 t0 munmap munmap ptr=0x7f0000000000 size=1048576\n"
    "0.006 t0 mremap-fail mremap ptr=0x7f0000001000 size=4096\n"
    "0.007 t0 module-unload base=0x555500000000\n"
    "0.007 t0 mallinfo arena=135168 hblkhd=0 uordblks=100 fordblks=135068 keepcost=0\n"
    "0.008 t0 rss rss=4194304 interval_ms=30\n"
    "0.008 t2 gpu-alloc pool ptr=0x7f1200000000 size=4194304 device=1 context=3 stream=0x5555deadbeef "
    "handle=0x1234 stack=1 cbid=611 correlation=77 truncated estimated\n"
    "0.008 t2 gpu-free context-destroy device ptr=0x7f1200000000 size=0 device=-1 context=3 "
    "stream=0x0 cbid=2 correlation=78\n"
    "0.009 t0 proc-exit nested_skipped=3\n"
    "0.009 t0 block-reach indirect ptr=0x5555aaaa0040\n"
    "0.009 t0 reach-rest reachable\n"
    "0.009 t0 reach-scan status=-1 root_bytes=8192 heap_bytes=300 blocks=3 reachable=1 "
    "indirect=1 definite=1 duration_us=42\n"
    "0.009 t0 untraced what=children count=3 message=\"not traced: 3 child processes started by process 1234 "
    "(/usr/bin/prog)\"\n"
    "0.009 t0 end signaled status=11 events=12 ring_waits=0 ring_wait_ns=0 lost_in_crash=0 "
    "lost_dead_collector=0 nested_skipped=0 truncated_stacks=0 duration_ms=9\n";

Test(format, round_trip_every_record, .init = setup, .fini = teardown) {
    ml_record_t r[24];
    int n = sample_records(r);
    write_trace(r, n, false);
    char *d = dump_file();
    cr_expect_str_eq(d, golden);
    free(d);
    /* The same records one chunk each decode identically (delta state
     * restarts at every chunk). */
    write_trace(r, n, true);
    d = dump_file();
    cr_expect_str_eq(d, golden);
    free(d);
}

Test(format, literal_bytes, .init = setup, .fini = teardown) {
    ml_record_t r[3];
    memset(r, 0, sizeof r);
    r[0].tag = ML_T_NODE;
    r[0].u.node.id = 1;
    r[0].u.node.pc = 0x1234;
    r[1].tag = ML_T_ALLOC;
    r[1].time_ms = 2;
    r[1].u.alloc.kind = ML_KIND_CALLOC;
    r[1].u.alloc.size = 300;
    r[1].u.alloc.stack = 1;
    r[1].u.alloc.ptr = 0x1000;
    r[2].tag = ML_T_FREE;
    r[2].time_ms = 2;
    r[2].u.alloc.ptr = 0xff0;
    r[2].u.alloc.kind = ML_KIND_FREE;
    write_trace(r, 3, false);
    int fd = open(path, O_RDONLY);
    uint8_t buf[4096];
    ssize_t len = read(fd, buf, sizeof buf);
    close(fd);
    static const uint8_t header[16] = {'M', 'L', 'T', 'R', 'A', 'C', 'E', 0, 1, 0, ML_TRACE_MINOR, 0, 0, 0, 0, 0};
    cr_assert_gt(len, 32);
    cr_expect_eq(memcmp(buf, header, 16), 0);
    cr_expect_eq(memcmp(buf + 16, "MLCK", 4), 0);
    uint32_t comp, raw;
    memcpy(&comp, buf + 20, 4);
    memcpy(&raw, buf + 24, 4);
    cr_assert_eq(len, 32 + (ssize_t)comp, "one chunk");
    uint8_t out[64];
    size_t got = ZSTD_decompress(out, sizeof out, buf + 32, comp);
    static const uint8_t expect[] = {
        0x20, 0x00, 0x02, 0xe8, 0x48,             /* node id=1 (+0) parent=0 (id-1) pc=0x1234 (+) */
        0x02, 0x02,                               /* time 2 ms */
        0x10, 0x01, 0x00, 0xac, 0x02, 0x00, 0x01, 0x80, 0x40, /* alloc calloc 300 slack 0 stack 1
                                                                * ptr +0x1000 */
        0x11, 0x09, 0xe0, 0x3f, 0x00,             /* free, cursor 0, ptr delta +0xff0 (zig-zag
                                                   * 0x1fe0), usable 0 */
    };
    cr_assert_eq(got, sizeof expect);
    cr_assert_eq(raw, sizeof expect);
    cr_expect_eq(memcmp(out, expect, sizeof expect), 0);
}

/* Since 1.8 an rss record carries the collector's sampling interval after
 * the bytes; a 1.7 trace has the bytes alone, and must read as before (the
 * interval 0: not said) with the records after it intact. The 1.7 file is
 * the 1.8 one with the interval's byte taken out and the minor set to 7. */
Test(format, rss_interval_since_1_8, .init = setup, .fini = teardown) {
    ml_record_t r[2];
    memset(r, 0, sizeof r);
    r[0].tag = ML_T_RSS;
    r[0].time_ms = 3;
    r[0].u.rss.rss_bytes = 300;
    r[0].u.rss.interval_ms = 40;
    r[1].tag = ML_T_MALLINFO;
    r[1].time_ms = 3;
    r[1].u.mallinfo.arena = 5;
    write_trace(r, 2, false);
    uint8_t buf[4096], raw[64];
    size_t got = first_chunk(buf, sizeof buf, raw, sizeof raw);
    static const uint8_t expect[] = {
        0x02, 0x03,             /* time 3 ms */
        0x31, 0xac, 0x02, 0x28, /* rss 300, interval 40 */
        0x30, 0x05, 0, 0, 0, 0, /* mallinfo arena 5 */
    };
    cr_assert_eq(got, sizeof expect);
    cr_assert_eq(memcmp(raw, expect, sizeof expect), 0);

    /* the 1.7 form */
    uint8_t old_raw[sizeof expect - 1];
    memcpy(old_raw, expect, 5);
    memcpy(old_raw + 5, expect + 6, sizeof expect - 6);
    uint8_t file[4096];
    memcpy(file, buf, 16);
    file[10] = 7;
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    size_t n = ZSTD_compress2(cc, file + 32, sizeof file - 32, old_raw, sizeof old_raw);
    ZSTD_freeCCtx(cc);
    cr_assert(!ZSTD_isError(n));
    memcpy(file + 16, "MLCK", 4);
    uint32_t v = (uint32_t)n;
    memcpy(file + 20, &v, 4);
    v = sizeof old_raw;
    memcpy(file + 24, &v, 4);
    memcpy(file + 28, buf + 28, 4); /* the record count */
    int fd = open(path, O_WRONLY | O_TRUNC);
    cr_assert_eq(write(fd, file, 32 + n), (ssize_t)(32 + n));
    close(fd);

    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) write_trace(r, 2, false); /* and the 1.8 file reads back whole */
        ml_reader_t *rd;
        char err[256];
        cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0, "%s", err);
        unsigned major, minor;
        ml_reader_version(rd, &major, &minor);
        cr_expect_eq(minor, pass ? ML_TRACE_MINOR : 7);
        ml_record_t got_r;
        cr_assert_eq(ml_reader_next(rd, &got_r), 1, "%s", ml_reader_error(rd));
        cr_expect_eq(got_r.tag, ML_T_RSS);
        cr_expect_eq(got_r.u.rss.rss_bytes, 300);
        cr_expect_eq(got_r.u.rss.interval_ms, pass ? 40u : 0u, "pass %d", pass);
        cr_assert_eq(ml_reader_next(rd, &got_r), 1, "%s", ml_reader_error(rd));
        cr_expect_eq(got_r.tag, ML_T_MALLINFO);
        cr_expect_eq(got_r.u.mallinfo.arena, 5);
        ml_reader_close(rd);
    }
}

Test(format, every_truncation_reads_cleanly, .init = setup, .fini = teardown) {
    ml_record_t r[24];
    int n = sample_records(r);
    write_trace(r, n, true);
    struct stat st;
    stat(path, &st);
    char *full = NULL;
    {
        int fd = open(path, O_RDONLY);
        full = malloc((size_t)st.st_size);
        cr_assert_eq(read(fd, full, (size_t)st.st_size), st.st_size);
        close(fd);
    }
    for (off_t cut = 0; cut < st.st_size; cut++) {
        int fd = open(path, O_WRONLY | O_TRUNC);
        cr_assert_eq(write(fd, full, (size_t)cut), cut);
        close(fd);
        ml_reader_t *rd;
        char err[256];
        int rc = ml_reader_open(path, &rd, err, sizeof err);
        if (cut < 16) {
            cr_expect_eq(rc, -EINVAL, "cut at %ld", (long)cut);
            continue;
        }
        cr_assert_eq(rc, 0);
        ml_record_t rec;
        int k = 0;
        while ((rc = ml_reader_next(rd, &rec)) > 0) k++;
        cr_expect_eq(rc, 0, "cut at %ld: %s", (long)cut, ml_reader_error(rd));
        cr_expect(ml_reader_truncated(rd), "cut at %ld reads as truncated", (long)cut);
        cr_expect_lt(k, n);
        ml_reader_close(rd);
    }
    free(full);
}

Test(format, corruption_never_crashes, .init = setup, .fini = teardown) {
    ml_record_t r[24];
    int n = sample_records(r);
    write_trace(r, n, false);
    struct stat st;
    stat(path, &st);
    int fd = open(path, O_RDONLY);
    uint8_t *orig = malloc((size_t)st.st_size), *buf = malloc((size_t)st.st_size);
    cr_assert_eq(read(fd, orig, (size_t)st.st_size), st.st_size);
    close(fd);
    srand(1);
    int errors = 0;
    for (int iter = 0; iter < 2000; iter++) {
        memcpy(buf, orig, (size_t)st.st_size);
        int flips = 1 + rand() % 4;
        for (int f = 0; f < flips; f++) buf[16 + rand() % (st.st_size - 16)] ^= (uint8_t)(1 + rand() % 255);
        fd = open(path, O_WRONLY | O_TRUNC);
        cr_assert_eq(write(fd, buf, (size_t)st.st_size), st.st_size);
        close(fd);
        ml_reader_t *rd;
        char err[256];
        cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0);
        ml_record_t rec;
        int rc;
        while ((rc = ml_reader_next(rd, &rec)) > 0) {
        }
        if (rc < 0) {
            errors++;
            cr_expect(strstr(ml_reader_error(rd), "corrupt") != NULL, "%s", ml_reader_error(rd));
        }
        ml_reader_close(rd);
    }
    cr_expect_gt(errors, 1000, "the chunk checksum catches flipped bytes (%d)", errors);
    free(orig);
    free(buf);
}

/* No address space holds a block of 2^57 bytes (ML_TRACE_SIZE_LIMIT): a
 * size that large can only come from a damaged or forged trace, whose
 * checksum may still match. It is refused as corrupt, where before it
 * wrapped the totals ("14680064.0 TiB"); a size just under the limit
 * reads. */
static int read_sized(int tag, uint64_t size, uint64_t usable, char *err, size_t errlen) {
    ml_record_t r[24];
    int n = sample_records(r);
    for (int i = 0; i < n; i++) {
        if (r[i].tag != tag) continue;
        if (tag == ML_T_GPU_ALLOC) {
            r[i].u.gpu.size = size;
            break;
        }
        r[i].u.alloc.size = size;
        r[i].u.alloc.usable = usable;
        if (tag == ML_T_ALLOC) { /* its free follows: the same block */
            for (int k = i + 1; k < n; k++)
                if (r[k].tag == ML_T_FREE) r[k].u.alloc.usable = usable;
        }
        break;
    }
    write_trace(r, n, false);
    ml_reader_t *rd;
    cr_assert_eq(ml_reader_open(path, &rd, err, errlen), 0, "%s", err);
    ml_record_t rec;
    int rc;
    while ((rc = ml_reader_next(rd, &rec)) > 0) {
    }
    snprintf(err, errlen, "%s", rc < 0 ? ml_reader_error(rd) : "");
    ml_reader_close(rd);
    return rc;
}

Test(format, impossible_sizes_are_corrupt, .init = setup, .fini = teardown) {
    char err[256];
    uint64_t lim = ML_TRACE_SIZE_LIMIT;
    cr_expect_eq(read_sized(ML_T_ALLOC, lim - 8, lim - 1, err, sizeof err), 0, "%s", err);
    cr_expect_eq(read_sized(ML_T_MMAP, lim - 1, lim - 1, err, sizeof err), 0, "%s", err);
    cr_expect_eq(read_sized(ML_T_GPU_ALLOC, lim - 1, 0, err, sizeof err), 0, "%s", err);
    struct {
        int tag;
        uint64_t size, usable;
    } bad[] = {
        {ML_T_ALLOC, UINT64_MAX - 7, UINT64_MAX},
        {ML_T_ALLOC, lim, lim},
        {ML_T_ALLOC, 100, lim}, /* the slack */
        {ML_T_MMAP, lim, 0},
        {ML_T_GPU_ALLOC, UINT64_MAX, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_expect_lt(read_sized(bad[i].tag, bad[i].size, bad[i].usable, err, sizeof err), 0,
                     "tag 0x%02x size %llu usable %llu read", bad[i].tag, (unsigned long long)bad[i].size,
                     (unsigned long long)bad[i].usable);
        cr_expect(strstr(err, "corrupt trace") != NULL, "%s", err);
    }
}

Test(format, unknown_major_version_is_refused, .init = setup, .fini = teardown) {
    ml_record_t r[24];
    int n = sample_records(r);
    write_trace(r, n, false);
    int fd = open(path, O_WRONLY);
    uint8_t v2[4] = {2, 0, 0, 0};
    cr_assert_eq(pwrite(fd, v2, 4, 8), 4);
    close(fd);
    ml_reader_t *rd;
    char err[256];
    cr_expect_eq(ml_reader_open(path, &rd, err, sizeof err), -EPROTONOSUPPORT);
    cr_expect(strstr(err, "version 2.0 is not supported") != NULL, "%s", err);
}

Test(format, not_a_trace, .init = setup, .fini = teardown) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert_eq(write(fd, "hello world, not a trace\n", 25), 25);
    close(fd);
    ml_reader_t *rd;
    char err[256];
    cr_expect_eq(ml_reader_open(path, &rd, err, sizeof err), -EINVAL);
    cr_expect(strstr(err, "not a memlens trace") != NULL, "%s", err);
    cr_expect_eq(ml_reader_open("/nonexistent/x.mlt", &rd, err, sizeof err), -ENOENT);
}

/* The address model's lists are rings; what the codes index is the order of
 * a plain array that every push shifts by one (the most recent first, the
 * oldest falling off at 16) and every drop closes up. This reference model
 * is that array, written out; after every alloc and free of a random
 * sequence (few sizes and addresses, so that the lists fill, wrap, drop
 * from every position and get reused by other sizes), each query of the
 * real model must answer as the reference does: a different answer would
 * write other bytes than earlier writers and misread their traces. */
typedef struct {
    uint64_t usable, ptr[ML__RING];
    int n;
} ref_list_t;
typedef struct {
    ref_list_t cls[ML__CLASSES], live_cls[ML__CLASSES];
    uint64_t freed[ML__RING], live_ptr[ML__RING], live_usable[ML__RING];
    int nfreed, nlive;
} ref_model_t;

static int ref_find(const uint64_t *v, int n, uint64_t p) {
    for (int i = 0; i < n; i++)
        if (v[i] == p) return i;
    return -1;
}
static void ref_drop(uint64_t *v, int *n, int k) {
    for (int i = k; i + 1 < *n; i++) v[i] = v[i + 1];
    (*n)--;
}
static void ref_push(uint64_t *v, int *n, uint64_t p) {
    int keep = *n < ML__RING ? *n : ML__RING - 1;
    for (int i = keep; i > 0; i--) v[i] = v[i - 1];
    v[0] = p;
    *n = keep + 1;
}
/* A size class's list takes p; a list of another usable size starts over. */
static void ref_push_sized(ref_list_t *l, uint64_t usable, uint64_t p) {
    if (l->usable != usable) {
        l->usable = usable;
        l->n = 0;
    }
    ref_push(l->ptr, &l->n, p);
}
static void ref_alloc(ref_model_t *m, uint64_t ptr, uint64_t usable) {
    ref_list_t *c = &m->cls[ml__class_of(usable)], *lc = &m->live_cls[ml__class_of(usable)];
    int k;
    if (c->usable == usable && (k = ref_find(c->ptr, c->n, ptr)) >= 0) ref_drop(c->ptr, &c->n, k);
    ref_push_sized(lc, usable, ptr);
    if ((k = ref_find(m->freed, m->nfreed, ptr)) >= 0) ref_drop(m->freed, &m->nfreed, k);
    int n = m->nlive, keep = n < ML__RING ? n : ML__RING - 1;
    for (int i = keep; i > 0; i--) {
        m->live_ptr[i] = m->live_ptr[i - 1];
        m->live_usable[i] = m->live_usable[i - 1];
    }
    m->live_ptr[0] = ptr;
    m->live_usable[0] = usable;
    m->nlive = keep + 1;
}
static void ref_drop_live(ref_model_t *m, int k) {
    for (int i = k; i + 1 < m->nlive; i++) {
        m->live_ptr[i] = m->live_ptr[i + 1];
        m->live_usable[i] = m->live_usable[i + 1];
    }
    m->nlive--;
}
static void ref_free(ref_model_t *m, uint64_t ptr, uint64_t usable) {
    ref_push(m->freed, &m->nfreed, ptr);
    if (!usable) return;
    ref_list_t *lc = &m->live_cls[ml__class_of(usable)], *c = &m->cls[ml__class_of(usable)];
    int k;
    if (lc->usable == usable && (k = ref_find(lc->ptr, lc->n, ptr)) >= 0) ref_drop(lc->ptr, &lc->n, k);
    ref_push_sized(c, usable, ptr);
}

Test(format, address_model_lists_keep_the_array_order) {
    ml__chunk_state_t *st = calloc(1, sizeof *st), *zero = calloc(1, sizeof *zero);
    ml__model_t *m = &st->model;
    ref_model_t *ref = calloc(1, sizeof *ref);
    cr_assert(st && zero && ref);
    /* usable sizes: three that share a class (16 + k * 16 * ML__CLASSES) and a few others */
    const uint64_t sizes[] = {32, 32 + 16 * ML__CLASSES, 32 + 32 * ML__CLASSES, 48, 64, 4096};
    srand(11);
    for (int step = 0; step < 400000; step++) {
        /* A chunk's end: the state must be all zero again, as at the
         * start (the reset zeroes only the classes written). */
        if (step % 50000 == 49999) {
            st->time_ms = 1;
            st->prev_ptr = 2;
            ml__chunk_state_reset(st);
            cr_assert_eq(memcmp(st, zero, sizeof *st), 0, "step %d: the reset state is zero", step);
            memset(ref, 0, sizeof *ref);
        }
        /* now and then a size of any class, so that every word of the
         * classes' written-bits is used */
        uint64_t usable = rand() % 16 ? sizes[rand() % 6] : 16 * (1 + (uint64_t)(rand() % 5000));
        uint64_t ptr = 0x1000 + (uint64_t)(rand() % 40) * 0x40;
        bool alloc = rand() % 2;
        /* the queries a writer and a reader make, before the op */
        cr_assert_eq(ml__model_predict(m, usable, ptr),
                     ref->cls[ml__class_of(usable)].usable == usable &&
                             ref_find(ref->cls[ml__class_of(usable)].ptr, ref->cls[ml__class_of(usable)].n, ptr) >= 0
                         ? ref_find(ref->cls[ml__class_of(usable)].ptr, ref->cls[ml__class_of(usable)].n, ptr)
                     : ref_find(ref->freed, ref->nfreed, ptr) >= 0
                         ? ML__CODE_GLOBAL + ref_find(ref->freed, ref->nfreed, ptr)
                         : -1,
                     "step %d: predict", step);
        for (unsigned code = 0; code < ML__CODE_GLOBAL + ML__RING; code++) {
            const ref_list_t *c = &ref->cls[ml__class_of(usable)];
            uint64_t want = code < ML__CODE_GLOBAL
                                ? (c->usable == usable && (int)code < c->n ? c->ptr[code] : 0)
                                : ((int)(code - ML__CODE_GLOBAL) < ref->nfreed ? ref->freed[code - ML__CODE_GLOBAL] : 0);
            cr_assert_eq(ml__model_resolve(m, usable, code), want, "step %d: code %u", step, code);
        }
        cr_assert_eq(m->nlive, ref->nlive, "step %d", step);
        cr_assert_eq(ml__model_find_live(m, ptr), ref_find(ref->live_ptr, ref->nlive, ptr), "step %d", step);
        for (int k = 0; k < ref->nlive; k++) {
            uint64_t p, u;
            ml__model_live_at(m, k, &p, &u);
            cr_assert(p == ref->live_ptr[k] && u == ref->live_usable[k], "step %d: live %d", step, k);
        }
        const ref_list_t *lc = &ref->live_cls[ml__class_of(usable)];
        int want_lc = lc->usable == usable ? ref_find(lc->ptr, lc->n, ptr) : -1;
        cr_assert_eq(ml__model_find_live_class(m, ptr, usable), want_lc, "step %d", step);
        for (unsigned k = 0; k < ML__RING; k++) {
            uint64_t p = 0;
            bool have = ml__model_live_class_at(m, usable, k, &p);
            cr_assert_eq(have, lc->usable == usable && (int)k < lc->n, "step %d: class entry %u", step, k);
            if (have) cr_assert_eq(p, lc->ptr[k], "step %d: class entry %u", step, k);
        }
        /* the op, as put_alloc / put_free and the reader apply it */
        if (alloc) {
            ml__model_alloc(m, ptr, usable);
            ref_alloc(ref, ptr, usable);
        } else if (rand() % 3 == 0 && ref->nlive) {
            int k = rand() % ref->nlive; /* a free of a recent block: ML_T_FREE_RECENT */
            uint64_t p, u;
            ml__model_live_at(m, k, &p, &u);
            ml__model_drop_live(m, k);
            ref_drop_live(ref, k);
            ml__model_free(m, p, u);
            ref_free(ref, p, u);
        } else {
            uint64_t u = rand() % 8 ? usable : 0; /* a free whose size was not recorded */
            ml__model_free(m, ptr, u);
            ref_free(ref, ptr, u);
        }
    }
    free(st);
    free(zero);
    free(ref);
}

/* The address model must give back every pointer exactly, whatever the
 * allocation pattern: a simulated allocator with per-size LIFO reuse, fresh
 * memory from a bump pointer, frees in random and in recent order, several
 * threads and chunk boundaries. Every record read back equals the one
 * written. */
Test(format, address_model_round_trip, .init = setup, .fini = teardown) {
    enum { N = 300000, LIVE = 4096 };
    ml_record_t *in = calloc(N, sizeof *in);
    uint64_t live[LIVE], live_u[LIVE], nlive = 0, top = 0x555500000000ull;
    uint64_t freed[64][8];
    int nfreed[64] = {0};
    srand(7);
    int n = 0;
    for (int i = 0; n < N; i++) {
        ml_record_t *r = &in[n];
        r->time_ms = (uint32_t)(i / 1000);
        r->thread = (uint32_t)(rand() % 3);
        bool do_free = nlive > 0 && (nlive == LIVE || rand() % 2);
        if (do_free) {
            /* mostly the newest blocks, sometimes any */
            uint64_t k = rand() % 4 ? nlive - 1 - (uint64_t)(rand() % (nlive < 8 ? nlive : 8))
                                    : (uint64_t)rand() % nlive;
            r->tag = ML_T_FREE;
            r->u.alloc.kind = rand() % 10 ? ML_KIND_FREE : ML_KIND_REALLOC;
            r->u.alloc.ptr = live[k];
            r->u.alloc.usable = rand() % 50 ? live_u[k] : 0;
            int c = (int)(live_u[k] / 16) % 64;
            if (nfreed[c] < 8) freed[c][nfreed[c]++] = live[k];
            live[k] = live[--nlive];
            live_u[k] = live_u[nlive];
        } else {
            uint64_t size = 8 + (uint64_t)(rand() % 40) * 16 + (uint64_t)(rand() % 3);
            uint64_t usable = (size + 15) & ~15ull;
            int c = (int)(usable / 16) % 64;
            uint64_t p;
            if (nfreed[c] && rand() % 4) {
                p = freed[c][--nfreed[c]];
            } else {
                p = top;
                top += usable + 16;
            }
            bool dup = false; /* a simulated reuse may collide with a live block: skip */
            for (uint64_t j = 0; j < nlive && !dup; j++) dup = live[j] == p;
            if (dup) continue;
            r->tag = ML_T_ALLOC;
            r->u.alloc.kind = (uint8_t)(rand() % 4);
            r->u.alloc.size = size;
            r->u.alloc.usable = usable;
            r->u.alloc.stack = (uint32_t)(rand() % 100);
            r->u.alloc.ptr = p;
            live[nlive] = p;
            live_u[nlive++] = usable;
        }
        n++;
    }
    write_trace(in, N, false);
    ml_reader_t *rd;
    char err[256];
    cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0, "%s", err);
    ml_record_t out;
    int k = 0, rc;
    while ((rc = ml_reader_next(rd, &out)) > 0) {
        cr_assert_lt(k, N);
        const ml_record_t *e = &in[k];
        cr_assert_eq(out.tag, e->tag, "record %d", k);
        cr_assert_eq(out.u.alloc.ptr, e->u.alloc.ptr, "record %d: pointer", k);
        cr_assert_eq(out.u.alloc.kind, e->u.alloc.kind, "record %d: kind", k);
        cr_assert_eq(out.thread, e->thread, "record %d: thread", k);
        cr_assert_eq(out.time_ms, e->time_ms, "record %d: time", k);
        if (e->tag == ML_T_ALLOC) {
            cr_assert_eq(out.u.alloc.size, e->u.alloc.size, "record %d: size", k);
            cr_assert_eq(out.u.alloc.usable, e->u.alloc.usable, "record %d: usable", k);
            cr_assert_eq(out.u.alloc.stack, e->u.alloc.stack, "record %d: stack", k);
        } else if (e->u.alloc.usable) {
            cr_assert_eq(out.u.alloc.usable, e->u.alloc.usable, "record %d: usable", k);
        }
        k++;
    }
    cr_assert_eq(rc, 0, "%s", ml_reader_error(rd));
    cr_expect_eq(k, N);
    struct stat st;
    stat(path, &st);
    cr_expect_lt(st.st_size, N * 4, "%ld bytes for %d records", (long)st.st_size, N);
    ml_reader_close(rd);
    free(in);
}

/* A writer on `path` (its fd in *fd) that holds the sample records (*n). */
static ml_writer_t *sample_writer(int level, int *fd, int *n) {
    ml_record_t r[24];
    *n = sample_records(r);
    *fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(*fd >= 0);
    ml_writer_t *w;
    cr_assert_eq(ml_writer_new(*fd, level, &w), 0);
    for (int i = 0; i < *n; i++) cr_assert_eq(ml_writer_add(w, &r[i]), 0);
    return w;
}

/* The file at `path` gives back this snapshot. */
static void expect_snapshot(const void *snap, size_t want_len, uint32_t want_version) {
    ml_reader_t *rd;
    char err[256];
    void *got;
    size_t len;
    uint32_t version;
    cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0);
    cr_assert_eq(ml_reader_snapshot(rd, &got, &len, &version), 0, "%s", ml_reader_error(rd));
    cr_assert_eq(len, want_len);
    cr_expect_eq(version, want_version);
    cr_expect_eq(memcmp(got, snap, want_len), 0);
    free(got);
    ml_reader_close(rd);
}

/* The analysis snapshot after the records: readers skip it, the trailer
 * finds it, every cut of it loses no record and yields no snapshot, and a
 * changed byte of the records makes the checksum refuse it. */
Test(format, snapshot_and_trailer, .init = setup, .fini = teardown) {
    int fd, n;
    ml_writer_t *w = sample_writer(1, &fd, &n);
    uint8_t snap[5000];
    for (size_t i = 0; i < sizeof snap; i++) snap[i] = (uint8_t)(i * 7 + i / 13);
    uint64_t body = 0;
    cr_assert_eq(ml_writer_flush(w), 0);
    body = ml_writer_bytes(w);
    cr_assert_eq(ml_writer_add_snapshot(w, snap, sizeof snap, 42), 0);
    cr_assert_eq(ml_writer_free(w), 0);
    close(fd);

    char *d = dump_file(); /* records only, complete, not truncated */
    cr_expect_str_eq(d, golden);
    free(d);

    struct stat st;
    stat(path, &st);
    uint8_t *full = malloc((size_t)st.st_size);
    fd = open(path, O_RDONLY);
    cr_assert_eq(read(fd, full, (size_t)st.st_size), st.st_size);
    close(fd);
    cr_expect_eq(memcmp(full + body, "MLSN", 4), 0, "the snapshot follows the records");
    cr_expect_eq(memcmp(full + st.st_size - 24, "MLIX", 4), 0, "the trailer ends the file");
    uint64_t off;
    memcpy(&off, full + st.st_size - 8, 8);
    cr_expect_eq(off, body);

    expect_snapshot(snap, sizeof snap, 42);
    ml_reader_t *rd;
    char err[256];
    void *got;
    size_t len;
    uint32_t version;

    /* Cut anywhere in the snapshot or trailer: all records, no snapshot. */
    for (off_t cut = (off_t)body; cut < st.st_size; cut += 3) {
        fd = open(path, O_WRONLY | O_TRUNC);
        cr_assert_eq(write(fd, full, (size_t)cut), cut);
        close(fd);
        cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0);
        ml_record_t rec;
        int k = 0, rc;
        while ((rc = ml_reader_next(rd, &rec)) > 0) k++;
        cr_expect_eq(rc, 0, "cut at %ld: %s", (long)cut, ml_reader_error(rd));
        cr_expect_eq(k, n, "cut at %ld", (long)cut);
        cr_expect(ml_reader_complete(rd) && !ml_reader_truncated(rd), "cut at %ld", (long)cut);
        rc = ml_reader_snapshot(rd, &got, &len, &version);
        cr_expect_lt(rc, 0, "cut at %ld gave a snapshot", (long)cut);
        if (rc == 0) free(got);
        ml_reader_close(rd);
    }

    /* One changed byte in the records: the checksum refuses the snapshot. */
    full[40] ^= 0x10;
    fd = open(path, O_WRONLY | O_TRUNC);
    cr_assert_eq(write(fd, full, (size_t)st.st_size), st.st_size);
    close(fd);
    cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0);
    cr_expect_eq(ml_reader_snapshot(rd, &got, &len, &version), -EINVAL);
    cr_expect(strstr(ml_reader_error(rd), "checksum"), "%s", ml_reader_error(rd));
    ml_reader_close(rd);
    free(full);
}

/* Every record of the file at `path`: their number, or a negative errno
 * (with the reader's message in err). */
static int count_records(char *err, size_t errlen, bool *complete) {
    ml_reader_t *rd;
    int rc = ml_reader_open(path, &rd, err, errlen);
    if (rc < 0) return rc;
    ml_record_t rec;
    int k = 0;
    while ((rc = ml_reader_next(rd, &rec)) > 0) k++;
    if (rc < 0) snprintf(err, errlen, "%s", ml_reader_error(rd));
    *complete = ml_reader_complete(rd) && !ml_reader_truncated(rd);
    ml_reader_close(rd);
    return rc < 0 ? rc : k;
}


/* The sample records, then a 600-byte analysis snapshot, in `path`: the
 * number of records. */
static int sample_with_snapshot(void) {
    int fd, n;
    ml_writer_t *w = sample_writer(1, &fd, &n);
    uint8_t snap[600];
    for (size_t i = 0; i < sizeof snap; i++) snap[i] = (uint8_t)(i * 7 + i / 13);
    cr_assert_eq(ml_writer_add_snapshot(w, snap, sizeof snap, 42), 0);
    cr_assert_eq(ml_writer_free(w), 0);
    close(fd);
    return n;
}

/* Byte i of the file (whose bytes are `full`) changed by 0xff and by 0x01 in
 * turn: every record must still read, and the end record be found. `what`
 * and `at` say where the byte is, in a failure's message. */
static void expect_flip_costs_no_record(uint8_t *full, off_t size, off_t i, int n, const char *what, long at) {
    char err[512];
    bool complete;
    for (int m = 0; m < 2; m++) {
        uint8_t mask = m ? 0x01 : 0xff;
        full[i] ^= mask;
        int fd = open(path, O_WRONLY | O_TRUNC);
        cr_assert_eq(write(fd, full, (size_t)size), size);
        close(fd);
        full[i] ^= mask;
        int k = count_records(err, sizeof err, &complete);
        cr_expect_eq(k, n, "byte %ld ^ 0x%02x of %s: %d records (%s)", at, mask, what, k, k < 0 ? err : "");
        cr_expect(complete, "byte %ld ^ 0x%02x of %s", at, mask, what);
    }
}

/* The strategy advice a report saves after the analysis trailer
 * (ml_trace_save_advice) holds no record: a byte changed anywhere in it or
 * in its trailer (its block's length, say, which the record reader used to
 * skip it by) costs no record, as the records end at the analysis trailer. */
Test(format, damaged_advice_costs_no_record, .init = setup, .fini = teardown) {
    int fd, n = sample_with_snapshot();
    uint8_t adv[300];
    for (size_t i = 0; i < sizeof adv; i++) adv[i] = (uint8_t)(i * 13 + i / 7);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    off_t recorded = st.st_size;
    ml_reader_t *rd;
    char err[512];
    uint64_t hash;
    cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0);
    cr_assert_eq(ml_reader_records_hash(rd, &hash), 0, "%s", ml_reader_error(rd));
    ml_reader_close(rd);
    cr_assert_eq(chmod(path, 0600), 0);
    cr_assert_eq(ml_trace_save_advice(path, hash, adv, sizeof adv, 1, 7, err, sizeof err), 0, "%s", err);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_gt(st.st_size, recorded + 40, "the advice was saved");
    uint8_t *full = malloc((size_t)st.st_size);
    fd = open(path, O_RDONLY);
    cr_assert_eq(read(fd, full, (size_t)st.st_size), st.st_size);
    close(fd);
    bool complete;
    cr_assert_eq(count_records(err, sizeof err, &complete), n, "%s", err);
    for (off_t i = recorded; i < st.st_size; i++)
        expect_flip_costs_no_record(full, st.st_size, i, n, "the advice", (long)(i - recorded));
    free(full);
}

/* The records end with the end record: what follows it is the analysis
 * snapshot and its trailer, which hold none. A damaged snapshot header (its
 * length, its magic) or trailer used to send the reader past them into the
 * middle of the snapshot, where it stopped at a "bad chunk magic" and the
 * trace read as corrupt: every report of it failed, though its records
 * were whole. */
Test(format, damaged_snapshot_costs_no_record, .init = setup, .fini = teardown) {
    int fd, n = sample_with_snapshot();
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    uint8_t *full = malloc((size_t)st.st_size);
    fd = open(path, O_RDONLY);
    cr_assert_eq(read(fd, full, (size_t)st.st_size), st.st_size);
    close(fd);
    uint64_t snap_at;
    memcpy(&snap_at, full + st.st_size - 8, 8); /* the trailer's snapshot offset */
    cr_assert_lt(snap_at, (uint64_t)st.st_size - 24);
    char err[512];
    bool complete;
    cr_assert_eq(count_records(err, sizeof err, &complete), n, "%s", err);
    /* the snapshot's 16-byte header, and the 24-byte trailer */
    off_t spots[40];
    for (int i = 0; i < 16; i++) spots[i] = (off_t)snap_at + i;
    for (int i = 0; i < 24; i++) spots[16 + i] = st.st_size - 24 + i;
    for (int k = 0; k < 40; k++)
        expect_flip_costs_no_record(full, st.st_size, spots[k], n,
                                    k < 16 ? "the snapshot's header" : "the snapshot's trailer", k < 16 ? k : k - 16);
    free(full);
}

/* Saved advice is a few KiB: a block that says it holds more than
 * ML_ADVICE_MAX_RAW (a hostile trace's, a small zstd frame of zeros) is
 * refused before its bytes are allocated, and costs no record. */
Test(format, oversized_advice_is_refused, .init = setup, .fini = teardown) {
    int fd, n;
    ml_writer_t *w = sample_writer(1, &fd, &n);
    uint8_t snap[100] = {1, 2, 3};
    cr_assert_eq(ml_writer_add_snapshot(w, snap, sizeof snap, 42), 0);
    cr_assert_eq(ml_writer_free(w), 0);
    close(fd);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    uint64_t at = (uint64_t)st.st_size;
    size_t raw = (size_t)ML_ADVICE_MAX_RAW + 1, bound = ZSTD_compressBound(raw);
    uint8_t *zeros = calloc(1, raw), *blk = malloc(16 + bound + 24);
    cr_assert(zeros && blk);
    size_t comp = ZSTD_compress(blk + 16, bound, zeros, raw, 3);
    cr_assert(!ZSTD_isError(comp));
    uint32_t h[4] = {ML_SNAPSHOT_MAGIC, (uint32_t)comp, (uint32_t)raw, 1};
    memcpy(blk, h, sizeof h); /* little-endian host */
    uint32_t t[2] = {ML_TRAILER_MAGIC, ML_ADVICE_TRAILER_VERSION};
    uint64_t key = 7;
    memcpy(blk + 16 + comp, t, 8);
    memcpy(blk + 16 + comp + 8, &key, 8);
    memcpy(blk + 16 + comp + 16, &at, 8);
    fd = open(path, O_WRONLY | O_APPEND);
    cr_assert_eq(write(fd, blk, 16 + comp + 24), (ssize_t)(16 + comp + 24));
    close(fd);
    free(zeros);
    free(blk);
    ml_reader_t *rd;
    char err[512];
    cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0);
    void *data = NULL;
    size_t len = 0;
    uint32_t version = 0;
    cr_expect_eq(ml_reader_advice(rd, &data, &len, &key, &version), -EINVAL, "%zu bytes of advice read", len);
    cr_expect(strstr(ml_reader_error(rd), "bad saved strategy advice"), "%s", ml_reader_error(rd));
    free(data);
    ml_reader_close(rd);
    bool complete;
    cr_expect_eq(count_records(err, sizeof err, &complete), n, "%s", err);
}

/* Blocks that hold no records (snapshots, trailers) are skipped one after
 * the other, not by a call per block: a file of half a million empty ones
 * is read to its end instead of overflowing the stack. */
Test(format, many_empty_blocks_do_not_overflow_the_stack, .init = setup, .fini = teardown) {
    enum { BLOCKS = 1 << 19, PER = 4096 };
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0);
    uint8_t head[ML_TRACE_HEADER_LEN] = {0};
    memcpy(head, ML_TRACE_MAGIC, ML_TRACE_MAGIC_LEN);
    head[8] = ML_TRACE_MAJOR;
    head[10] = ML_TRACE_MINOR;
    cr_assert_eq(write(fd, head, sizeof head), (ssize_t)sizeof head);
    static uint8_t blocks[PER][ML_CHUNK_HEADER_LEN];
    for (int i = 0; i < PER; i++) memcpy(blocks[i], "MLSN", 4); /* an empty snapshot block, each */
    for (int i = 0; i < BLOCKS / PER; i++) cr_assert_eq(write(fd, blocks, sizeof blocks), (ssize_t)sizeof blocks);
    close(fd);
    char err[512];
    bool complete;
    cr_expect_eq(count_records(err, sizeof err, &complete), 0, "%s", err);
    cr_expect_not(complete, "no end record: truncated");
}

/* `big` malloc'd bytes standing for a snapshot: xorshift noise in every
 * third page, compressible runs in the others. */
static uint8_t *sample_snapshot(size_t big) {
    uint8_t *snap = malloc(big);
    cr_assert(snap);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < big; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        snap[i] = (i / 4096) % 3 ? (uint8_t)(i / 64) : (uint8_t)x;
    }
    return snap;
}

/* A snapshot of 8 MiB or more is compressed by zstd's workers where there
 * are CPUs for them (writer.c): it reads back byte for byte, and a byte
 * changed in its compressed frame is refused, as in a small one. */
Test(format, big_snapshot_round_trip, .init = setup, .fini = teardown) {
    int fd, n;
    ml_writer_t *w = sample_writer(3, &fd, &n);
    size_t big = (12u << 20) + 12345;
    uint8_t *snap = sample_snapshot(big);
    cr_assert_eq(ml_writer_flush(w), 0);
    uint64_t body = ml_writer_bytes(w);
    cr_assert_eq(ml_writer_add_snapshot(w, snap, big, 7), 0);
    cr_assert_eq(ml_writer_free(w), 0);
    close(fd);

    expect_snapshot(snap, big, 7);
    ml_reader_t *rd;
    char err[256];
    void *got;
    size_t len;
    uint32_t version;

    /* A byte in the middle of the compressed snapshot. */
    struct stat st;
    stat(path, &st);
    fd = open(path, O_RDWR);
    off_t at = (off_t)body + (st.st_size - (off_t)body) / 2;
    uint8_t c;
    cr_assert_eq(pread(fd, &c, 1, at), 1);
    c ^= 0x5a;
    cr_assert_eq(pwrite(fd, &c, 1, at), 1);
    close(fd);
    cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0);
    cr_expect_lt(ml_reader_snapshot(rd, &got, &len, &version), 0);
    ml_reader_close(rd);
    free(snap);
}

/* The file at `path`, whole, in *size bytes (free() it). */
static uint8_t *read_whole(off_t *size) {
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    uint8_t *p = malloc((size_t)st.st_size + 1);
    int fd = open(path, O_RDONLY);
    cr_assert_eq(read(fd, p, (size_t)st.st_size), st.st_size);
    close(fd);
    *size = st.st_size;
    return p;
}

/* Every record of `path` reads back, the trace is complete, and it has no
 * snapshot. */
static void expect_records_only(int n, const char *what) {
    ml_reader_t *rd;
    char err[256];
    cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0);
    ml_record_t rec;
    int k = 0, rc;
    while ((rc = ml_reader_next(rd, &rec)) > 0) k++;
    cr_expect_eq(rc, 0, "%s: %s", what, ml_reader_error(rd));
    cr_expect_eq(k, n, "%s", what);
    cr_expect(ml_reader_complete(rd) && !ml_reader_truncated(rd), "%s", what);
    void *got;
    size_t len;
    uint32_t version;
    rc = ml_reader_snapshot(rd, &got, &len, &version);
    cr_expect_lt(rc, 0, "%s: a snapshot", what);
    if (rc == 0) free(got);
    ml_reader_close(rd);
}

/* The streamed snapshot (ml_writer_snapshot_begin/write/end, what the
 * collector writes): given in pieces of all sizes, it reads back byte for
 * byte; its block and trailer are laid out as ml_writer_add_snapshot's;
 * its frame has no content size, and a wrong raw_len is refused; a file
 * cut anywhere in it, before or after its header was filled in, loses no
 * record and gives no snapshot. */
Test(format, streamed_snapshot_round_trip, .init = setup, .fini = teardown) {
    int fd, n;
    ml_writer_t *w = sample_writer(3, &fd, &n);
    size_t big = (5u << 20) + 12345;
    uint8_t *snap = sample_snapshot(big);
    cr_assert_eq(ml_writer_flush(w), 0);
    uint64_t body = ml_writer_bytes(w);
    cr_assert_eq(ml_writer_snapshot_begin(w, 9), 0);
    off_t mid_size = 0;
    uint8_t *mid = NULL;
    size_t piece[] = {1, 1 << 20, 7, 300000, 1 << 20, 0, 65536};
    for (size_t at = 0, k = 0; at < big; k++) {
        size_t m = piece[k % 7] < big - at ? piece[k % 7] : big - at;
        cr_assert_eq(ml_writer_snapshot_write(w, snap + at, m), 0);
        at += m;
        if (!mid && at > big / 2) mid = read_whole(&mid_size); /* as a crash would leave it */
    }
    cr_assert_eq(ml_writer_snapshot_end(w, 0), 0);
    uint64_t total = ml_writer_bytes(w);
    cr_assert_eq(ml_writer_free(w), 0);
    close(fd);

    expect_snapshot(snap, big, 9);
    off_t size;
    uint8_t *full = read_whole(&size);
    cr_expect_eq((uint64_t)size, total, "ml_writer_bytes counts the snapshot and trailer");
    cr_expect_eq(memcmp(full + body, "MLSN", 4), 0, "the snapshot follows the records");
    uint32_t comp, raw;
    memcpy(&comp, full + body + 4, 4);
    memcpy(&raw, full + body + 8, 4);
    cr_expect_eq(raw, big);
    cr_expect_eq(body + 16 + comp + 24, (uint64_t)size, "comp_len is filled in");
    cr_expect_eq(memcmp(full + size - 24, "MLIX", 4), 0, "the trailer ends the file");
    uint64_t off;
    memcpy(&off, full + size - 8, 8);
    cr_expect_eq(off, body);
    cr_expect_eq(ZSTD_getFrameContentSize(full + body + 16, comp), ZSTD_CONTENTSIZE_UNKNOWN);

    /* Cut anywhere in the snapshot or trailer, and the file as it was half
     * way (its header still open): all records, no snapshot. */
    for (off_t cut = (off_t)body; cut < size; cut += cut < (off_t)body + 64 ? 1 : 4099) {
        fd = open(path, O_WRONLY | O_TRUNC);
        cr_assert_eq(write(fd, full, (size_t)cut), cut);
        close(fd);
        char what[64];
        snprintf(what, sizeof what, "cut at %ld", (long)cut);
        expect_records_only(n, what);
    }
    cr_assert(mid && mid_size > (off_t)body + 16);
    fd = open(path, O_WRONLY | O_TRUNC);
    cr_assert_eq(write(fd, mid, (size_t)mid_size), mid_size);
    close(fd);
    expect_records_only(n, "half written");

    /* raw_len one more or one less than the frame holds: refused. */
    for (int d = -1; d <= 1; d += 2) {
        uint32_t wrong = raw + (uint32_t)d;
        memcpy(full + body + 8, &wrong, 4);
        fd = open(path, O_WRONLY | O_TRUNC);
        cr_assert_eq(write(fd, full, (size_t)size), size);
        close(fd);
        ml_reader_t *rd;
        char err[256];
        void *got;
        size_t len;
        uint32_t version;
        cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0);
        cr_expect_lt(ml_reader_snapshot(rd, &got, &len, &version), 0, "raw_len %+d accepted", d);
        ml_reader_close(rd);
    }
    free(full);
    free(mid);
    free(snap);
}

/* zstd short of memory (the collector under a `ulimit -v`, a cgroup) is
 * -ENOMEM, not -EIO: the collector said "no analysis snapshot (Input/output
 * error)", as if the disk had failed. The address space is capped just above
 * what this test process maps once the snapshot has begun (criterion runs
 * each test in a process of its own), so that zstd's stream cannot make its
 * window; the file is cut back to the records, as for any dropped snapshot. */
Test(format, streamed_snapshot_out_of_memory_is_enomem, .init = setup, .fini = teardown) {
    int fd, n;
    ml_writer_t *w = sample_writer(3, &fd, &n);
    cr_assert_eq(ml_writer_flush(w), 0);
    uint64_t body = ml_writer_bytes(w);
    cr_assert_eq(ml_writer_snapshot_begin(w, 9), 0);
    size_t big = 4u << 20;
    uint8_t *snap = sample_snapshot(big);
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    unsigned long pages = 0;
    cr_assert_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    struct rlimit rl = {pages * (unsigned long)sysconf(_SC_PAGESIZE) + (64u << 10), RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
    int rc = ml_writer_snapshot_write(w, snap, big);
    rl.rlim_cur = RLIM_INFINITY;
    cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
    cr_expect_eq(rc, -ENOMEM, "zstd out of memory: %d (%s)", rc, strerror(-rc));
    cr_expect_eq(ml_writer_snapshot_end(w, rc), rc);
    cr_expect_eq(ml_writer_bytes(w), body);
    cr_expect_eq(ml_writer_free(w), 0, "a dropped snapshot is no write error");
    close(fd);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq((uint64_t)st.st_size, body, "the file is cut back");
    expect_records_only(n, "dropped for want of memory");
    free(snap);
}

/* A streamed snapshot that fails (its producer's error, or none given)
 * leaves the trace as one written without a snapshot: the file cut back,
 * every record there, no trailer; the writer itself is fine. A pipe takes
 * no streamed snapshot (-ESPIPE) and gets the records whole. */
Test(format, streamed_snapshot_dropped, .init = setup, .fini = teardown) {
    for (int how = 0; how < 3; how++) {
        int fd, n;
        ml_writer_t *w = sample_writer(3, &fd, &n);
        cr_assert_eq(ml_writer_flush(w), 0);
        uint64_t body = ml_writer_bytes(w);
        cr_assert_eq(ml_writer_snapshot_begin(w, 9), 0);
        static uint8_t junk[3 << 20];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 131 + i / 977);
        if (how != 2) cr_assert_eq(ml_writer_snapshot_write(w, junk, sizeof junk), 0);
        int want = how == 0 ? -ENOMEM : -EINVAL;
        if (how == 1) { /* a piece, then the writer is freed without an end */
            cr_assert_eq(ml_writer_free(w), 0);
        } else {
            cr_expect_eq(ml_writer_snapshot_end(w, how == 0 ? -ENOMEM : 0), want);
            cr_expect_eq(ml_writer_bytes(w), body);
            cr_expect_eq(ml_writer_free(w), 0, "a dropped snapshot is no write error");
        }
        close(fd);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        cr_expect_eq((uint64_t)st.st_size, body, "case %d: the file is cut back", how);
        char what[32];
        snprintf(what, sizeof what, "dropped, case %d", how);
        expect_records_only(n, what);
    }

    int p[2];
    cr_assert_eq(pipe(p), 0);
    ml_writer_t *w;
    cr_assert_eq(ml_writer_new(p[1], 3, &w), 0);
    ml_record_t r[24];
    int n = sample_records(r);
    for (int i = 0; i < n; i++) cr_assert_eq(ml_writer_add(w, &r[i]), 0);
    cr_expect_eq(ml_writer_snapshot_begin(w, 9), -ESPIPE);
    cr_expect_eq(ml_writer_free(w), 0);
    close(p[1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    uint8_t buf[65536];
    ssize_t got;
    while ((got = read(p[0], buf, sizeof buf)) > 0) cr_assert_eq(write(fd, buf, (size_t)got), got);
    close(fd);
    close(p[0]);
    expect_records_only(n, "from a pipe");
}

/* The gpu-pool record (since 1.4): literal bytes, and every field back. */
Test(format, gpu_pool_record_bytes_and_round_trip, .init = setup, .fini = teardown) {
    ml_record_t w;
    memset(&w, 0, sizeof w);
    w.tag = ML_T_GPU_POOL;
    w.u.gpu.op = ML_GPU_OP_POOL_STATE;
    w.u.gpu.kind = ML_GPU_POOL_TRIMMED;
    w.u.gpu.flags = ML_GPU_F_POOL_MANAGED;
    w.u.gpu.device = 1;
    w.u.gpu.context = 2;
    w.u.gpu.ptr = 0x300;      /* pool */
    w.u.gpu.size = 200;       /* reserved */
    w.u.gpu.pool_used = 5;
    w.u.gpu.pool_threshold = 7;
    w.u.gpu.handle = 9;       /* bytes to keep */
    w.u.gpu.stream = 3;
    w.u.gpu.cbid = 50;
    w.u.gpu.correlation = 300;
    write_trace(&w, 1, false);
    uint8_t buf[4096], out[64];
    size_t got = first_chunk(buf, sizeof buf, out, sizeof out);
    static const uint8_t expect[] = {
        0x42, 0x03,       /* gpu-pool, trimmed */
        0x80, 0x10,       /* flags 0x800 */
        0x02, 0x02,       /* device 1 (zig-zag), context 2 */
        0x80, 0x06,       /* pool 0x300 */
        0xc8, 0x01,       /* reserved 200 */
        0x05, 0x07, 0x09, 0x03, /* used, threshold, keep, block_size */
        0x32, 0xac, 0x02, /* activity 50, correlation 300 */
    };
    cr_assert_eq(got, sizeof expect);
    cr_expect_eq(memcmp(out, expect, sizeof expect), 0);

    ml_reader_t *rd;
    char err[256];
    cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0, "%s", err);
    ml_record_t r;
    cr_assert_eq(ml_reader_next(rd, &r), 1, "%s", ml_reader_error(rd));
    cr_expect_eq(r.tag, ML_T_GPU_POOL);
    cr_expect_eq(r.u.gpu.op, ML_GPU_OP_POOL_STATE);
    cr_expect_eq(r.u.gpu.kind, ML_GPU_POOL_TRIMMED);
    cr_expect_eq(r.u.gpu.flags, ML_GPU_F_POOL_MANAGED);
    cr_expect_eq(r.u.gpu.device, 1);
    cr_expect_eq(r.u.gpu.context, 2);
    cr_expect_eq(r.u.gpu.ptr, 0x300);
    cr_expect_eq(r.u.gpu.size, 200);
    cr_expect_eq(r.u.gpu.pool_used, 5);
    cr_expect_eq(r.u.gpu.pool_threshold, 7);
    cr_expect_eq(r.u.gpu.handle, 9);
    cr_expect_eq(r.u.gpu.stream, 3);
    cr_expect_eq(r.u.gpu.cbid, 50);
    cr_expect_eq(r.u.gpu.correlation, 300);
    ml_reader_close(rd);
}

/* An untraced record (1.9) of kind 0 is damage, said as such; one of a
 * kind this memlens does not know (a later minor's) reads, and its message
 * says what it is. */
Test(format, untraced_records_of_kind_0_and_of_a_later_kind, .init = setup, .fini = teardown) {
    ml_record_t r[2];
    memset(r, 0, sizeof r);
    r[0].tag = ML_T_UNTRACED;
    r[0].u.untraced.what = 0;
    r[0].u.untraced.count = 1;
    r[0].u.untraced.message = "not traced: something";
    r[1] = r[0];
    r[1].u.untraced.what = ML_UNTRACED_WHAT_COUNT_;
    for (int k = 0; k < 2; k++) {
        write_trace(&r[k], 1, false);
        ml_reader_t *rd;
        char err[256];
        cr_assert_eq(ml_reader_open(path, &rd, err, sizeof err), 0, "%s", err);
        ml_record_t rec;
        int rc = ml_reader_next(rd, &rec);
        if (k == 0) {
            cr_expect_lt(rc, 0);
            cr_expect(strstr(ml_reader_error(rd), "corrupt trace"), "%s", ml_reader_error(rd));
        } else {
            cr_expect_eq(rc, 1);
            cr_expect_eq(rec.tag, ML_T_UNTRACED);
            cr_expect_eq(rec.u.untraced.what, ML_UNTRACED_WHAT_COUNT_);
            cr_expect_str_eq(rec.u.untraced.message, "not traced: something");
            char *line = NULL;
            size_t len = 0;
            FILE *m = open_memstream(&line, &len);
            ml_record_print(m, &rec);
            fclose(m);
            cr_expect_str_eq(line, "0.000 t0 untraced what=? count=1 message=\"not traced: something\"\n");
            free(line);
        }
        ml_reader_close(rd);
    }
}
