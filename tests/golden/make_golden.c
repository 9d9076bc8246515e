/* make_golden.c - writes the golden traces (tests/golden/README.md) with the
 * real trace writer: fixed pids, times, addresses and stacks, modules at
 * paths that do not exist (so every frame reads [module+0xOFFSET] on any
 * machine), and every answer known in advance.
 *
 * usage: ml_make_golden DIR     writes DIR/{heap,gpu,cut,advice}.mlt
 *
 * heap.mlt - pid 1001, "app --golden", two threads (main, "worker"), the
 *   program /nonexistent/memlens-golden/bin/app at 0x400000 and the library
 *   /nonexistent/memlens-golden/lib/libdep.so at 0x7f0000000000. Stacks,
 *   innermost first (main is app+0x1000):
 *     2  app+0x1100 <- main                  make_leak: 2 x 100 B, never freed (definite)
 *     4  app+0x1200 <- app+0x1180 <- main    make_child: 64 B, held by a leaked block (indirect)
 *     5  libdep+0x2000 <- main               dep_cache: 256 B, pointed to at exit (reachable)
 *     6  app+0x1300 <- main                  scratch: 3 temporaries of 32 B
 *     7  app+0x1400 <- main                  grow: 1000 B, realloc to 3000 B, freed
 *     8  app+0x1500 <- main                  big: 8192 B at 40 ms (the peak), freed at 50 ms
 *     9  app+0x1600 <- main                  map: mmap of 1 MiB, munmap
 *    10  libdep+0x2100 <- main (worker)      worker: 48 B allocated on thread 1, freed
 *     11 app+0x1700 <- main                  unscanned: 16 B live at exit, no verdict
 *   then mallinfo, RSS samples, the process exit, the reachability scan and
 *   the end at 100 ms (exit status 0).
 * gpu.mlt - pid 1002: on device 0 a 4 MiB cudaMalloc that leaks, a 2 MiB one
 *   freed (the peak, 6 MiB), 64 KiB of pinned host memory freed; on device 1
 *   a 1 MiB allocation still held when its context is destroyed.
 * cut.mlt - pid 1003: three chunks of allocations, the file cut in the
 *   middle of the third (the collector was killed): the report covers the
 *   first two and says the trace is truncated. The process' exit is not in
 *   the trace, so the 50 blocks live at its end are not judged as leaks.
 * advice.mlt - pid 1004: format_line allocates and frees 64 bytes 2000 times
 *   (the advisor's "stack"), append_byte grows 20 buffers by realloc 30
 *   times each, 16 bytes a step ("reserve_capacity").
 */
#define _GNU_SOURCE
#include "trace_build.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define APP 0x400000ull
#define DEP 0x7f0000000000ull
#define APP_PATH "/nonexistent/memlens-golden/bin/app"
#define DEP_PATH "/nonexistent/memlens-golden/lib/libdep.so"

static ml_writer_t *W;
static const char *Path;

static void die(const char *what, int rc) {
    fprintf(stderr, "make_golden: %s: %s: %s\n", Path, what, strerror(rc < 0 ? -rc : rc));
    exit(1);
}

static void add(const ml_record_t *r) {
    int rc = ml_writer_add(W, r);
    if (rc < 0) die("write", rc);
}

static int begin(const char *dir, const char *name, uint32_t pid, const char *argv1) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    Path = path;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die("open", errno);
    int rc = ml_writer_new(fd, 1, &W);
    if (rc < 0) die("writer", rc);
    ml_record_t p = tb_process(pid, APP_PATH, "make_golden");
    p.u.process.ppid = 1;
    p.u.process.start_realtime_ns = 1700000000000000000ull;
    p.u.process.argc = argv1 ? 2 : 1;
    p.u.process.argv[0] = "app";
    p.u.process.argv[1] = argv1;
    add(&p);
    ml_record_t m = tb_module(APP, APP_PATH);
    add(&m);
    m = tb_module(DEP, DEP_PATH);
    add(&m);
    return fd;
}

static void end(int fd, uint32_t t, bool complete) {
    if (complete) {
        ml_record_t e = tb_end(t, 0);
        add(&e);
    }
    int rc = ml_writer_free(W);
    if (rc < 0) die("close", rc);
    if (close(fd) < 0) die("close", errno);
}

static void node(uint32_t id, uint32_t parent, uint64_t pc) {
    ml_record_t r = tb_node(id, parent, pc);
    add(&r);
}

static void thread(uint32_t index, uint32_t tid, const char *name) {
    ml_record_t r = {.tag = ML_T_THREAD};
    r.u.thread.index = index;
    r.u.thread.tid = tid;
    r.u.thread.name = name;
    add(&r);
}

static void alloc_on(uint32_t thr, uint32_t t, uint8_t kind, uint64_t ptr, uint64_t size, uint32_t stack) {
    ml_record_t r = tb_alloc(t, kind, ptr, size, stack);
    r.thread = thr;
    add(&r);
}

static void alloc(uint32_t t, uint64_t ptr, uint64_t size, uint32_t stack) {
    alloc_on(0, t, ML_KIND_MALLOC, ptr, size, stack);
}

static void free_on(uint32_t thr, uint32_t t, uint8_t kind, uint64_t ptr) {
    ml_record_t r = tb_free(t, kind, ptr);
    r.thread = thr;
    add(&r);
}

static void release(uint32_t t, uint64_t ptr) {
    free_on(0, t, ML_KIND_FREE, ptr);
}

/* realloc as the interposer records it: the old block's free, then the new one. */
static void grow(uint32_t t, uint64_t old, uint64_t ptr, uint64_t size, uint32_t stack) {
    free_on(0, t, ML_KIND_REALLOC, old);
    alloc_on(0, t, ML_KIND_REALLOC, ptr, size, stack);
}

static void reach(uint32_t t, uint64_t ptr, uint8_t verdict) {
    ml_record_t r = {.tag = ML_T_BLOCK_REACH, .time_ms = t};
    r.u.block_reach.ptr = ptr;
    r.u.block_reach.reach = verdict;
    add(&r);
}

static void rss(uint32_t t, uint64_t bytes) {
    ml_record_t r = {.tag = ML_T_RSS, .time_ms = t};
    r.u.rss.rss_bytes = bytes;
    add(&r);
}

/* ------------------------------------------------------------------------- */
/* heap.mlt                                                                   */
/* ------------------------------------------------------------------------- */

static void heap(const char *dir) {
    int fd = begin(dir, "heap.mlt", 1001, "--golden");
    thread(0, 1001, "app");
    thread(1, 1002, "worker");
    node(1, 0, APP + 0x1000);  /* main */
    node(2, 1, APP + 0x1100);  /* make_leak */
    node(3, 1, APP + 0x1180);  /* make_tree */
    node(4, 3, APP + 0x1200);  /* make_child */
    node(5, 1, DEP + 0x2000);  /* dep_cache */
    node(6, 1, APP + 0x1300);  /* scratch */
    node(7, 1, APP + 0x1400);  /* grow */
    node(8, 1, APP + 0x1500);  /* big */
    node(9, 1, APP + 0x1600);  /* map */
    node(10, 1, DEP + 0x2100); /* worker */
    node(11, 1, APP + 0x1700); /* unscanned */
    rss(0, 1 << 20);
    alloc(1, 0x10000, 100, 2);
    alloc(2, 0x10080, 100, 2);
    alloc(3, 0x10100, 64, 4);
    alloc(4, 0x10200, 256, 5);
    for (uint32_t i = 0; i < 3; i++) { /* temporaries */
        alloc(10 + i, 0x20000, 32, 6);
        release(10 + i, 0x20000);
    }
    alloc(20, 0x30000, 1000, 7);
    grow(21, 0x30000, 0x31000, 3000, 7);
    alloc_on(1, 25, ML_KIND_CALLOC, 0x50000, 48, 10);
    ml_record_t m = {.tag = ML_T_MMAP, .time_ms = 30};
    m.u.alloc.kind = ML_KIND_MMAP;
    m.u.alloc.ptr = 0x7e0000000000ull;
    m.u.alloc.size = 1 << 20;
    m.u.alloc.stack = 9;
    add(&m);
    rss(35, 3 << 20);
    alloc(40, 0x40000, 8192, 8);
    ml_record_t mi = {.tag = ML_T_MALLINFO, .time_ms = 41};
    mi.u.mallinfo.arena = 135168;
    mi.u.mallinfo.uordblks = 12000;
    mi.u.mallinfo.fordblks = 123168;
    mi.u.mallinfo.keepcost = 120000;
    add(&mi);
    release(50, 0x40000);
    free_on(1, 55, ML_KIND_FREE, 0x50000);
    release(60, 0x31000);
    ml_record_t u = {.tag = ML_T_MUNMAP, .time_ms = 70};
    u.u.alloc.kind = ML_KIND_MUNMAP;
    u.u.alloc.ptr = 0x7e0000000000ull;
    u.u.alloc.size = 1 << 20;
    add(&u);
    alloc(80, 0x60000, 16, 11);
    rss(90, 2 << 20);
    ml_record_t x = {.tag = ML_T_PROC_EXIT, .time_ms = 95};
    add(&x);
    /* The exit-time scan, in address order; 0x60000 got no verdict. */
    reach(95, 0x10000, ML_REACH_DEFINITE);
    reach(95, 0x10080, ML_REACH_DEFINITE);
    reach(95, 0x10100, ML_REACH_INDIRECT);
    reach(95, 0x10200, ML_REACH_REACHABLE);
    ml_record_t s = {.tag = ML_T_REACH_SCAN, .time_ms = 95};
    s.u.reach_scan.root_bytes = 65536;
    s.u.reach_scan.heap_bytes = 536;
    s.u.reach_scan.blocks = 5;
    s.u.reach_scan.reachable = 1;
    s.u.reach_scan.indirect = 1;
    s.u.reach_scan.definite = 2;
    s.u.reach_scan.duration_us = 1500;
    add(&s);
    end(fd, 100, true);
}

/* ------------------------------------------------------------------------- */
/* gpu.mlt                                                                    */
/* ------------------------------------------------------------------------- */

static void gpu(uint8_t tag, uint8_t op, uint8_t kind, uint32_t t, int32_t dev, uint32_t ctx, uint64_t ptr,
                uint64_t size, uint32_t stack) {
    ml_record_t r = tb_gpu(tag, op, kind, t, dev, ctx, ptr, size, stack);
    add(&r);
}

static void gpu_trace(const char *dir) {
    int fd = begin(dir, "gpu.mlt", 1002, NULL);
    const uint64_t MiB = 1 << 20;
    node(1, 0, APP + 0x1000);
    node(2, 1, APP + 0x2000); /* load_weights */
    node(3, 1, APP + 0x3000); /* scratch_buffer */
    node(4, 1, DEP + 0x4000); /* staging */
    const uint8_t A = ML_T_GPU_ALLOC, F = ML_T_GPU_FREE;
    gpu(A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 10, 0, 1, 0x10000000, 4 * MiB, 2);
    gpu(A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 11, 0, 1, 0x20000000, 2 * MiB, 3);
    gpu(A, ML_GPU_OP_ALLOC, ML_GPU_KIND_HOST_PINNED, 12, 0, 1, 0x7f1000000000, 65536, 4);
    gpu(F, ML_GPU_OP_FREE, ML_GPU_KIND_HOST_PINNED, 13, 0, 1, 0x7f1000000000, 0, 0);
    gpu(F, ML_GPU_OP_FREE, ML_GPU_KIND_DEVICE, 20, 0, 1, 0x20000000, 0, 0);
    gpu(A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 25, 1, 2, 0x30000000, 1 * MiB, 2);
    gpu(F, ML_GPU_OP_CTX_DESTROY, ML_GPU_KIND_DEVICE, 30, 1, 2, 0, 0, 0);
    alloc(31, 0x10000, 512, 2); /* a heap block beside them, freed */
    release(32, 0x10000);
    end(fd, 40, true);
}

/* ------------------------------------------------------------------------- */
/* cut.mlt                                                                    */
/* ------------------------------------------------------------------------- */

static void cut(const char *dir) {
    int fd = begin(dir, "cut.mlt", 1003, "--killed");
    node(1, 0, APP + 0x1000);
    node(2, 1, APP + 0x1100);
    node(3, 1, APP + 0x1200);
    uint64_t keep = 0;
    for (uint32_t chunk = 0; chunk < 3; chunk++) {
        for (uint32_t i = 0; i < 50; i++) {
            uint32_t t = chunk * 100 + i;
            alloc(t, 0x100000 + (uint64_t)(chunk * 50 + i) * 0x100, 128, 2 + i % 2);
            if (i % 2) release(t, 0x100000 + (uint64_t)(chunk * 50 + i) * 0x100);
        }
        int rc = ml_writer_flush(W);
        if (rc < 0) die("flush", rc);
        if (chunk == 1) keep = ml_writer_bytes(W); /* the two chunks that survive */
    }
    end(fd, 0, false);
    struct stat st;
    if (stat(Path, &st) < 0) die("stat", errno);
    if (truncate(Path, (off_t)(keep + ((uint64_t)st.st_size - keep) / 2)) < 0) die("truncate", errno);
}

/* ------------------------------------------------------------------------- */
/* advice.mlt                                                                 */
/* ------------------------------------------------------------------------- */

static void advice(const char *dir) {
    int fd = begin(dir, "advice.mlt", 1004, NULL);
    node(1, 0, APP + 0x1000);
    node(2, 1, APP + 0x1100); /* format_line */
    node(3, 1, APP + 0x1200); /* append_byte */
    node(4, 1, APP + 0x1300); /* keep: a few blocks that stay */
    for (uint32_t i = 0; i < 8; i++) alloc(0, 0x800000 + i * 0x1000, 4000, 4);
    uint32_t t = 1;
    for (uint32_t i = 0; i < 2000; i++, t += i % 100 == 0) {
        alloc(t, 0x100000, 64, 2);
        release(t, 0x100000);
    }
    for (uint32_t b = 0; b < 20; b++, t++) {
        uint64_t ptr = 0x200000 + (uint64_t)b * 0x10000, size = 16;
        alloc(t, ptr, size, 3);
        for (uint32_t k = 0; k < 30; k++) {
            uint64_t np = ptr + 0x400;
            size += 16;
            grow(t, ptr, np, size, 3);
            ptr = np;
        }
        release(t, ptr);
    }
    end(fd, t + 1, true);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: ml_make_golden DIR\n");
        return 2;
    }
    heap(argv[1]);
    gpu_trace(argv[1]);
    cut(argv[1]);
    advice(argv[1]);
    return 0;
}
