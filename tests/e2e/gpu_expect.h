/* gpu_expect.h - what the GPU fixtures' scenario must produce (fx_gpu_events,
 * fx_gpu_inject), checked on the trace `memlens run` wrote: records, per-kind
 * bytes, peak per device and its sites, leaks (context destruction included),
 * stacks and threads, CPU records beside the GPU ones, and the JSON. */
#ifndef ML_TEST_GPU_EXPECT_H
#define ML_TEST_GPU_EXPECT_H

#include "harness.h"
#include "ml_gpu.h"
#include "ml_report_gpu.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GX_MiB (1024ull * 1024)
#define GX_PEAK0 (15 * GX_MiB + 102400 + 16384)
#define GX_LEAK0 (5 * GX_MiB + 102400)

static const ml_gpu_device_t *gx_dev(const ml_gpu_t *g, int32_t ordinal, size_t *index) {
    for (size_t i = 0; i < ml_gpu_device_count(g); i++)
        if (ml_gpu_device(g, i)->device == ordinal) {
            if (index) *index = i;
            return ml_gpu_device(g, i);
        }
    cr_assert_fail("device %d missing", ordinal);
    return NULL;
}

/* The stack and thread of the GPU allocation of `size` bytes. */
static void gx_find_alloc(const char *trace, uint64_t size, uint32_t *stack, uint32_t *thread) {
    ml_reader_t *r;
    char err[256];
    cr_assert_eq(ml_reader_open(trace, &r, err, sizeof err), 0, "%s", err);
    ml_record_t rec;
    *stack = *thread = UINT32_MAX;
    while (ml_reader_next(r, &rec) > 0)
        if (rec.tag == ML_T_GPU_ALLOC && rec.u.gpu.size == size) {
            *stack = rec.u.gpu.stack;
            *thread = rec.thread;
        }
    ml_reader_close(r);
}

static void gx_check_scenario(const char *trace, const char *exe_name) {
    h_trace_t t;
    h_trace_load(&t, trace);
    cr_expect(t.complete);
    cr_expect_eq(t.records_by_tag[ML_T_GPU_ALLOC], 14, "gpu-alloc records: %lu",
                 (unsigned long)t.records_by_tag[ML_T_GPU_ALLOC]);
    /* 11 frees, one free-failed, one context destruction */
    cr_expect_eq(t.records_by_tag[ML_T_GPU_FREE], 13, "gpu-free records: %lu",
                 (unsigned long)t.records_by_tag[ML_T_GPU_FREE]);
    cr_expect_geq(h_allocs_of_size(&t, 4000), 1, "the CPU leak is in the same trace");
    cr_expect_eq(t.end.lost_in_crash, 0);

    /* Stacks: the leak's is in the program, the worker's allocation on its
     * own thread. */
    int exe = h_module(&t, exe_name);
    cr_assert_geq(exe, 0);
    uint32_t st, th, wst, wth;
    gx_find_alloc(trace, 5 * GX_MiB, &st, &th);
    cr_assert_neq(st, UINT32_MAX);
    cr_expect_neq(st, 0, "a GPU allocation has a CPU stack");
    cr_expect(h_stack_in_module(&t, st, exe), "the stack reaches %s", exe_name);
    gx_find_alloc(trace, 3 * GX_MiB, &wst, &wth);
    cr_expect(h_stack_in_module(&t, wst, exe));
    cr_expect_neq(wth, th, "the worker thread's allocation is on its thread");
    h_trace_free(&t);

    ml_analysis_t *a;
    char err[512];
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_assert_eq(ml_analysis_load(a, trace, err, sizeof err), 0, "%s", err);
    const ml_gpu_t *g = ml_analysis_gpu(a);
    cr_assert_not_null(g);
    cr_assert_eq(ml_gpu_device_count(g), 2);
    size_t i0;
    const ml_gpu_device_t *d0 = gx_dev(g, 0, &i0);
    cr_expect_eq(d0->peak_bytes, GX_PEAK0, "device 0 peak %lu", (unsigned long)d0->peak_bytes);
    cr_expect_eq(d0->leaked_bytes, GX_LEAK0, "device 0 leaked %lu", (unsigned long)d0->leaked_bytes);
    cr_expect_eq(d0->leaked_blocks, 2);
    cr_expect_eq(d0->alloc_calls, 13);
    cr_expect_eq(d0->free_calls, 10);
    cr_expect_eq(d0->failed_frees, 1);
    cr_expect_eq(d0->pinned_peak_bytes, 2 * 65536 + 4096);
    cr_expect_eq(d0->pinned_leaked_bytes, 65536);
    const ml_gpu_kind_stats_t *k = d0->kinds;
    cr_expect_eq(k[ML_GPU_KIND_DEVICE].bytes_allocated, 6 * GX_MiB);
    cr_expect_eq(k[ML_GPU_KIND_DEVICE].leaked_bytes, 5 * GX_MiB);
    cr_expect_eq(k[ML_GPU_KIND_PITCH].bytes_allocated, 102400, "pitch x height");
    cr_expect_eq(k[ML_GPU_KIND_PITCH].leaked_bytes, 102400, "its free failed");
    cr_expect_eq(k[ML_GPU_KIND_MANAGED].bytes_allocated, 4 * GX_MiB);
    cr_expect_eq(k[ML_GPU_KIND_HOST_PINNED].bytes_allocated, 2 * 65536);
    cr_expect_eq(k[ML_GPU_KIND_HOST_REGISTERED].bytes_allocated, 4096);
    cr_expect_eq(k[ML_GPU_KIND_ASYNC].bytes_allocated, 1 * GX_MiB);
    cr_expect_eq(k[ML_GPU_KIND_POOL].bytes_allocated, 2 * GX_MiB);
    cr_expect_eq(k[ML_GPU_KIND_POOL].free_calls, 1);
    cr_expect_eq(k[ML_GPU_KIND_VMM_PHYSICAL].bytes_allocated, 2 * GX_MiB);
    cr_expect_eq(k[ML_GPU_KIND_VMM_PHYSICAL].leaked_bytes, 0);
    cr_expect_eq(k[ML_GPU_KIND_VMM_RESERVE].bytes_allocated, 8 * GX_MiB);
    cr_expect_eq(k[ML_GPU_KIND_VMM_MAP].alloc_calls, 1);
    cr_expect_eq(k[ML_GPU_KIND_ARRAY].bytes_allocated, 16384);
    ml_gpu_site_t s[16];
    size_t n = ml_gpu_sites(g, i0, ML_GPU_BY_PEAK, s, 16);
    cr_assert_geq(n, 1);
    cr_expect_eq(s[0].peak_bytes, 5 * GX_MiB, "the leak holds the most at the peak");
    cr_expect_eq(s[0].stack, st);
    const ml_gpu_device_t *d1 = gx_dev(g, 1, NULL);
    cr_expect_eq(d1->peak_bytes, 3 * GX_MiB);
    cr_expect_eq(d1->live_bytes, 0);
    cr_expect_eq(d1->leaked_bytes, 3 * GX_MiB);
    cr_expect_eq(d1->ctx_destroy_bytes, 3 * GX_MiB);
    const ml_totals_t *tot = ml_analysis_totals(a);
    cr_expect_eq(tot->peak_gpu_bytes, GX_PEAK0);

    /* Symbolized, the leak's frames name the function that allocated, with
     * memlens' and CUDA's own frames gone. */
    ml_build_opts_t bo;
    memset(&bo, 0, sizeof bo);
    cr_assert_eq(ml_analysis_build(a, &bo, err, sizeof err), 0, "%s", err);
    ml_frame_t fr[16];
    size_t nf = ml_gpu_stack_frames(a, st, fr, 16);
    bool named = false;
    for (size_t i = 0; i < nf && i < 3; i++) named |= fr[i].function && !strcmp(fr[i].function, "gpu_leaky_site");
    cr_expect(named, "gpu_leaky_site among the first frames (%zu frames, first %s)", nf,
              nf ? fr[0].function : "none");
    /* fx_gpu_inject reaches the driver through a statically linked
     * runtime's function and a driver-named one: neither may lead. */
    if (!strcmp(exe_name, "fx_gpu_inject"))
        cr_expect(nf && fr[0].function && !strcmp(fr[0].function, "gpu_leaky_site"),
                  "the leak's first frame is gpu_leaky_site, not CUDA's (%s)", nf ? fr[0].function : "none");
    for (size_t i = 0; i < nf; i++)
        cr_expect(!fr[i].module || !strstr(fr[i].module, "libmemlens"), "no memlens frame: %s", fr[i].module);

    /* The JSON parses and says the same. */
    const char *json = h_tmp("gpu.json");
    FILE *f = fopen(json, "w");
    cr_assert_not_null(f);
    ml_report_json_gpu(f, a);
    fclose(f);
    ml_analysis_free(a);
    if (system("python3 -c '' 2>/dev/null") != 0) {
        cr_log_warn("python3 missing: the JSON is not parsed");
        return;
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "python3 -c '\n"
             "import json, sys\n"
             "g = json.load(open(sys.argv[1]))\n"
             "d = {x[\"device\"]: x for x in g[\"devices\"]}\n"
             "assert d[0][\"peak_bytes\"] == %llu, d[0][\"peak_bytes\"]\n"
             "assert d[0][\"leaked_bytes\"] == %llu\n"
             "assert d[0][\"alloc_calls\"] == 13 and d[0][\"free_calls\"] == 10\n"
             "assert d[0][\"kinds\"][\"managed\"][\"bytes_allocated\"] == 4194304\n"
             "assert d[0][\"kinds\"][\"host_pinned\"][\"leaked_bytes\"] == 65536\n"
             "assert d[0][\"pinned_host\"][\"peak_bytes\"] == 135168\n"
             "assert d[1][\"leaked_at_context_destroy_bytes\"] == 3145728\n"
             "assert d[0][\"peak_sites\"][0][\"bytes\"] == 5242880\n"
             "assert \"gpu_leaky_site\" in [f[\"function\"] for f in d[0][\"peak_sites\"][0][\"frames\"]]\n"
             "' %s",
             (unsigned long long)GX_PEAK0, (unsigned long long)GX_LEAK0, json);
    cr_expect_eq(system(cmd), 0, "the JSON parses with the expected numbers");
}

#endif
