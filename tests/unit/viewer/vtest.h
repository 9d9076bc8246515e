/* vtest.h - a synthetic trace with known answers for the viewer's unit
 * tests (test_model.c, test_keys.c), written with the real trace writer.
 *
 * Two modules: the program (/opt/app/bin/shop) and a library
 * (/opt/app/lib/libwidget.so). Stacks (innermost first):
 *   A  [shop+0x2000] <- [shop+0x1000]                       4 x 1000 B, 2 freed: leaks 2000 B in 2
 * blocks B  [libwidget.so+0x4000] <- [shop+0x3000] <- [shop+0x1000]  1 x 5000 B, freed after the
 * peak (before any other allocation: a temporary one) C  [shop+0x5000] <- [shop+0x1000] 10
 * temporary allocations of 100 B Time: A at 10..13 ms, B at 20 ms (the peak: 9000 B), B freed at 30
 * ms, C from 40 ms, two A blocks freed at 50 and 51 ms, the end at 60 ms with exit status 3.
 * Symbols are off in the tests, so functions read
 * "[module+0xOFFSET]".
 */
#ifndef VTEST_H
#define VTEST_H

#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../e2e/trace_build.h"
#include "ml_trace_io.h"
#include "ml_viewer_model.h"

#define V_EXE_BASE 0x400000ull
#define V_LIB_BASE 0x7f0000000000ull
#define V_PEAK 9000u
#define V_PEAK_MS 20u

static ml_writer_t *v_w;
/* When set, every record written is fed to it too (a trace with the
 * collector's analysis snapshot: test_model.c). */
static ml_analysis_t *v_an;

static void v_add(ml_record_t *r) {
    cr_assert_eq(ml_writer_add(v_w, r), 0);
    if (v_an) ml_analysis_feed(v_an, r);
}

static void v_module(uint64_t base, const char *path) {
    ml_record_t r = tb_module(base, path);
    v_add(&r);
}

static void v_node(uint32_t id, uint32_t parent, uint64_t pc) {
    ml_record_t r = tb_node(id, parent, pc);
    v_add(&r);
}

static void v_alloc(uint32_t t, uint64_t ptr, uint64_t size, uint32_t stack) {
    ml_record_t r = tb_alloc(t, ML_KIND_MALLOC, ptr, size, stack);
    v_add(&r);
}

static void v_free(uint32_t t, uint64_t ptr) {
    ml_record_t r = tb_free(t, ML_KIND_FREE, ptr);
    v_add(&r);
}

/* Opens a fresh temporary trace for writing (v_w) with its process record
 * (no arguments) and the program's module at V_EXE_BASE; returns the fd. */
static int v_begin(char *path, size_t len, uint32_t pid, const char *exe) {
    snprintf(path, len, "/tmp/ml_vtest_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(ml_writer_new(fd, 1, &v_w), 0);
    ml_record_t p = tb_process(pid, exe, "vtest");
    v_add(&p);
    v_module(V_EXE_BASE, exe);
    return fd;
}

/* Ends the trace with the process' exit at time t, and closes it. */
static void v_end(int fd, uint32_t t) {
    ml_record_t e = tb_end(t, 0);
    v_add(&e);
    cr_assert_eq(ml_writer_free(v_w), 0);
    close(fd);
}

/* Writes the trace described above into a fresh temporary file; with
 * `cut` the file is cut in the middle of its last chunk (a truncated trace). */
static void v_write_trace(char *path, size_t len, bool cut) {
    snprintf(path, len, "/tmp/ml_vtest_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(ml_writer_new(fd, 1, &v_w), 0);
    ml_record_t p = tb_process(4242, "/opt/app/bin/shop", "vtest");
    p.u.process.argc = 2;
    p.u.process.argv[0] = "shop";
    p.u.process.argv[1] = "--open";
    v_add(&p);
    v_module(V_EXE_BASE, "/opt/app/bin/shop");
    v_module(V_LIB_BASE, "/opt/app/lib/libwidget.so");
    v_node(1, 0, V_EXE_BASE + 0x1000); /* main */
    v_node(2, 1, V_EXE_BASE + 0x2000); /* A */
    v_node(3, 1, V_EXE_BASE + 0x3000); /* helper */
    v_node(4, 3, V_LIB_BASE + 0x4000); /* B */
    v_node(5, 1, V_EXE_BASE + 0x5000); /* C */
    for (uint32_t i = 0; i < 4; i++)
        v_alloc(10 + i, 0x100000 + i * 0x1000, 1000, 2);
    v_alloc(V_PEAK_MS, 0x200000, 5000, 4);
    v_free(30, 0x200000);
    for (uint32_t i = 0; i < 10; i++) {
        v_alloc(40 + i, 0x300000, 100, 5);
        v_free(40 + i, 0x300000);
    }
    v_free(50, 0x100000);
    v_free(51, 0x101000);
    ml_record_t e = tb_end(60, 3);
    if (!cut) v_add(&e);
    cr_assert_eq(ml_writer_free(v_w), 0);
    if (cut) {
        off_t size = lseek(fd, 0, SEEK_END);
        cr_assert_eq(ftruncate(fd, size - 7), 0);
    }
    close(fd);
}

/* A bigger trace for loading in steps: n allocations over 50 stacks, each
 * freed 1000 allocations later, one millisecond per 100 records, in chunks
 * of 2000 allocations. */
__attribute__((unused)) static void v_write_big_trace(char *path, size_t len, uint32_t n) {
    int fd = v_begin(path, len, 7, "/opt/app/bin/big");
    v_node(1, 0, V_EXE_BASE + 0x1000);
    for (uint32_t s = 0; s < 50; s++)
        v_node(2 + s, 1, V_EXE_BASE + 0x2000 + s * 0x10);
    for (uint32_t i = 0; i < n; i++) {
        v_alloc(i / 100, 0x1000000 + (uint64_t)i * 64, 16 + i % 48, 2 + i % 50);
        if (i >= 1000) v_free(i / 100, 0x1000000 + (uint64_t)(i - 1000) * 64);
        if (i % 2000 == 1999)
            cr_assert_eq(ml_writer_flush(v_w), 0); /* many chunks: a fine progress bar */
    }
    v_end(fd, n / 100 + 1);
}

/* nsites allocation sites, one 32-byte block each, none freed. */
__attribute__((unused)) static void v_write_many_sites(char *path, size_t len, uint32_t nsites) {
    int fd = v_begin(path, len, 7, "/opt/app/bin/many");
    v_node(1, 0, V_EXE_BASE + 0x1000);
    for (uint32_t s = 0; s < nsites; s++) {
        v_node(2 + s, 1, V_EXE_BASE + 0x2000 + s * 0x10);
        v_alloc(1 + s / 100, 0x1000000 + (uint64_t)s * 64, 32, 2 + s);
    }
    v_end(fd, nsites / 100 + 2);
}

/* A GPU trace (the CPU part of the one above is left out): the same two
 * modules and stacks A (node 2), B (node 4) and C (node 5).
 *   device 0, context 1: A cudaMalloc 4 MiB at 10 ms, never freed (the leak);
 *     B cudaMalloc 2 MiB at 11 ms (the peak: 6 MiB), freed at 20 ms;
 *     C pinned host 64 KiB at 12 ms, freed at 13 ms; a free of an unknown
 *     address at 14 ms; a failed free of A's block at 21 ms.
 *   device 1, context 2: A cudaMalloc 1 MiB at 15 ms, still held when the
 *     context is destroyed at 30 ms.
 * The end at 40 ms, exit status 0. */
#define V_MiB (1024ull * 1024)

static void v_gpu(uint8_t tag, uint8_t op, uint8_t kind, uint32_t t, int32_t dev, uint32_t ctx,
                  uint64_t ptr, uint64_t size, uint32_t stack) {
    ml_record_t r = tb_gpu(tag, op, kind, t, dev, ctx, ptr, size, stack);
    v_add(&r);
}

__attribute__((unused)) static void v_write_gpu_trace(char *path, size_t len) {
    int fd = v_begin(path, len, 4343, "/opt/app/bin/shop");
    v_module(V_LIB_BASE, "/opt/app/lib/libwidget.so");
    v_node(1, 0, V_EXE_BASE + 0x1000);
    v_node(2, 1, V_EXE_BASE + 0x2000);
    v_node(3, 1, V_EXE_BASE + 0x3000);
    v_node(4, 3, V_LIB_BASE + 0x4000);
    v_node(5, 1, V_EXE_BASE + 0x5000);
    const uint8_t A = ML_T_GPU_ALLOC, F = ML_T_GPU_FREE;
    v_gpu(A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 10, 0, 1, 0x10000000, 4 * V_MiB, 2);
    v_gpu(A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 11, 0, 1, 0x20000000, 2 * V_MiB, 4);
    v_gpu(A, ML_GPU_OP_ALLOC, ML_GPU_KIND_HOST_PINNED, 12, 0, 1, 0x7f0000000000, 65536, 5);
    v_gpu(F, ML_GPU_OP_FREE, ML_GPU_KIND_HOST_PINNED, 13, 0, 1, 0x7f0000000000, 0, 0);
    v_gpu(F, ML_GPU_OP_FREE, ML_GPU_KIND_DEVICE, 14, 0, 1, 0xdead0000, 0, 0);
    v_gpu(A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 15, 1, 2, 0x90000000, 1 * V_MiB, 2);
    v_gpu(F, ML_GPU_OP_FREE, ML_GPU_KIND_DEVICE, 20, 0, 1, 0x20000000, 0, 0);
    v_gpu(F, ML_GPU_OP_FREE, ML_GPU_KIND_DEVICE, 21, 0, 1, 0x10000000, 0, 0);
    v_gpu(F, ML_GPU_OP_FREE_FAILED, ML_GPU_KIND_DEVICE, 21, 0, 1, 0x10000000, 0, 0);
    v_gpu(F, ML_GPU_OP_CTX_DESTROY, ML_GPU_KIND_DEVICE, 30, 1, 2, 0, 0, 0);
    v_end(fd, 40);
}

#define X_PC (V_EXE_BASE + 0x2000) /* stack X: node 2, 100 B blocks */
#define Y_PC (V_EXE_BASE + 0x3000) /* stack Y: node 3, 300 B blocks */
#define PH_N 6000u

/* A trace in two phases (test_model.c, test_keys.c), with the analysis snapshot at its end as the
 * collector writes it. X allocates PH_N blocks of 100 B over 0..59 ms and
 * keeps them; from 100 ms each X block is freed and a Y block of 300 B
 * allocated in its place (100..159 ms: the peak, 1.8 MB, at the last one);
 * at 170 ms the first half of the Y blocks is freed; the end at 200 ms. */
__attribute__((unused)) static void v_write_phases(char *p, size_t len, bool snapshot) {
    ml_analysis_t *a = NULL;
    if (snapshot) cr_assert_eq(ml_analysis_new(&a), 0);
    v_an = a;
    int fd = v_begin(p, len, 77, "/opt/app/bin/phases");
    v_node(1, 0, V_EXE_BASE + 0x1000);
    v_node(2, 1, X_PC);
    v_node(3, 1, Y_PC);
    for (uint32_t i = 0; i < PH_N; i++) {
        v_alloc(i / 100, 0x1000000 + (uint64_t)i * 128, 100, 2);
        if (i % 1000 == 999) cr_assert_eq(ml_writer_flush(v_w), 0);
    }
    for (uint32_t i = 0; i < PH_N; i++) {
        v_free(100 + i / 100, 0x1000000 + (uint64_t)i * 128);
        v_alloc(100 + i / 100, 0x4000000 + (uint64_t)i * 512, 300, 3);
        if (i % 1000 == 999) cr_assert_eq(ml_writer_flush(v_w), 0);
    }
    for (uint32_t i = 0; i < PH_N / 2; i++)
        v_free(170, 0x4000000 + (uint64_t)i * 512);
    ml_record_t e = tb_end(200, 0);
    v_add(&e);
    v_an = NULL;
    if (a) {
        void *data;
        size_t n;
        cr_assert_eq(ml_analysis_snapshot(a, &data, &n), 0);
        cr_assert_eq(ml_writer_add_snapshot(v_w, data, n, ML_ANALYSIS_SNAPSHOT_VERSION), 0);
        free(data);
        ml_analysis_free(a);
    }
    cr_assert_eq(ml_writer_free(v_w), 0);
    close(fd);
}

/* A model with a trace loaded: the CPU one, or the GPU one (symbols off). */
__attribute__((unused)) static ml_vmodel_t *v_model_of(char *path, size_t len, bool gpu) {
    ml_vmodel_t *m;
    cr_assert_eq(ml_vmodel_new(&m), 0);
    ml_build_opts_t o = {.no_symbols = true};
    ml_vmodel_set_build_opts(m, &o);
    ml_vmodel_set_advice(m, false);
    if (gpu)
        v_write_gpu_trace(path, len);
    else
        v_write_trace(path, len, false);
    char err[256];
    cr_assert_eq(ml_vmodel_open(m, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ml_vmodel_load_all(m), 0, "%s", ml_vmodel_error(m));
    return m;
}

/* A model with the synthetic trace loaded (symbols off). */
static ml_vmodel_t *v_model(char *path, size_t len) {
    ml_vmodel_t *m;
    cr_assert_eq(ml_vmodel_new(&m), 0);
    ml_build_opts_t o = {.no_symbols = true};
    ml_vmodel_set_build_opts(m, &o);
    ml_vmodel_set_advice(m, false); /* test_model.c turns it on where it is the subject */
    v_write_trace(path, len, false);
    char err[256];
    cr_assert_eq(ml_vmodel_open(m, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ml_vmodel_load_all(m), 0, "%s", ml_vmodel_error(m));
    return m;
}

/* The site whose innermost frame is at pc. */
__attribute__((unused)) static const ml_vsite_t *v_site_pc(ml_vmodel_t *m, uint64_t pc) {
    for (uint32_t i = 0; i < ml_vmodel_nsites(m); i++) {
        const ml_vsite_t *s = ml_vmodel_site_at(m, i);
        if (s->nframes && s->frames[0].address == pc) return s;
    }
    return NULL;
}

#endif
