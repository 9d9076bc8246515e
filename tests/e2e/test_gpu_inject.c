/* test_gpu_inject.c - libmemlens_cupti.so under the real `memlens run`, with
 * the fixture playing the CUDA driver (fx_gpu_inject) and a fake libcupti
 * (fake_cupti.c): injection, reuse of the libcupti already loaded, every
 * allocation kind through real callbacks, the failure paths (another CUPTI
 * subscriber, CUPTI that cannot attach, TEARDOWN_CUPTI=1), fork, --no-gpu,
 * and CPU programs left exactly as they were. Built only with CUPTI. */
#define _GNU_SOURCE
#include "gpu_expect.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static const char *fake_cupti(void) {
    return h_bin("fakecupti/libcupti.so.12");
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
    return n;
}

static void run_inject(h_run_t *r, const char *trace, const char *extra_flag, const char *mode) {
    const char *argv[12];
    int k = 0;
    argv[k++] = h_bin("memlens");
    argv[k++] = "run";
    argv[k++] = "-q";
    if (extra_flag) argv[k++] = extra_flag;
    argv[k++] = "-o";
    argv[k++] = trace;
    argv[k++] = "--";
    argv[k++] = h_bin("fx_gpu_inject");
    argv[k++] = fake_cupti();
    if (mode) argv[k++] = mode;
    argv[k] = NULL;
    h_run(r, argv);
}

Test(gpu_inject, every_kind_through_cupti_callbacks) {
    const char *trace = h_tmp("inject.mlt");
    h_run_t r;
    run_inject(&r, trace, NULL, NULL);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect_str_eq(r.err, "", "no warnings");
    cr_expect(strstr(r.out, "subscribes 1\n") != NULL, "%s", r.out);
    /* 28 driver callback ids and context created + destroy starting. */
    cr_expect(strstr(r.out, "enabled 28 2\n") != NULL, "%s", r.out);
    /* The libcupti the program had (libcupti.so.12) was reused: no second
     * CUPTI was loaded into the process. */
    cr_expect_eq(count(r.out, "loaded "), 1, "%s", r.out);
    cr_expect(strstr(r.out, "fakecupti/libcupti.so.12") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "fx_gpu_inject done\n") != NULL);
    gx_check_scenario(trace, "fx_gpu_inject");
    h_run_free(&r);
}

Test(gpu_inject, another_subscriber_one_warning_cpu_goes_on) {
    setenv("FAKE_CUPTI_BUSY", "kineto-fake", 1);
    const char *trace = h_tmp("busy.mlt");
    h_run_t r;
    run_inject(&r, trace, NULL, NULL);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect_eq(count(r.err, "memlens: warning:"), 1, "%s", r.err);
    cr_expect(strstr(r.err, "memlens: warning: GPU allocations will not be recorded: CUPTI is already in "
                            "use by kineto-fake") != NULL,
              "%s", r.err);
    cr_expect(strstr(r.err, "CPU profiling goes on") != NULL);
    cr_expect(strstr(r.out, "subscribed no\n") != NULL, "%s", r.out);
    h_trace_t t;
    h_trace_load(&t, trace);
    cr_expect_eq(t.records_by_tag[ML_T_GPU_ALLOC], 0);
    cr_expect_eq(h_allocs_of_size(&t, 4000), 1, "CPU profiling went on");
    cr_expect(t.complete);
    h_trace_free(&t);
    h_run_free(&r);
}

Test(gpu_inject, real_cupti_without_a_driver_one_warning) {
    /* No fake: the collector loads the toolkit's libcupti, which cannot
     * attach on a machine without the CUDA driver. */
    const char *trace = h_tmp("nodriver.mlt");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_gpu_inject"), "", NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect(strstr(r.out, "fx_gpu_inject done\n") != NULL, "%s", r.out);
    cr_expect_eq(count(r.err, "memlens: warning:"), 1, "exactly one warning: %s", r.err);
    cr_expect(strstr(r.err, "GPU allocations will not be recorded") != NULL, "%s", r.err);
    h_trace_t t;
    h_trace_load(&t, trace);
    cr_expect_eq(h_allocs_of_size(&t, 4000), 1);
    cr_expect_eq(t.records_by_tag[ML_T_GPU_ALLOC], 0);
    h_trace_free(&t);
    h_run_free(&r);
}

Test(gpu_inject, teardown_cupti_is_warned_about) {
    setenv("TEARDOWN_CUPTI", "1", 1);
    const char *trace = h_tmp("teardown.mlt");
    h_run_t r;
    run_inject(&r, trace, NULL, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(count(r.err, "memlens: warning: TEARDOWN_CUPTI=1"), 1, "%s", r.err);
    h_run_free(&r);
}

Test(gpu_inject, no_gpu_flag) {
    const char *trace = h_tmp("nogpu.mlt");
    h_run_t r;
    run_inject(&r, trace, "--no-gpu", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "no injection\n");
    h_run_free(&r);
}

Test(gpu_inject, a_preset_injection_path_is_left_alone) {
    setenv("CUDA_INJECTION64_PATH", "/opt/nsight/libToolsInjection64.so", 1);
    const char *trace = h_tmp("preset.mlt");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_counts"), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 7, "%s", r.err);
    cr_expect(strstr(r.err, "memlens: warning: CUDA_INJECTION64_PATH is already set (to "
                            "/opt/nsight/libToolsInjection64.so)") != NULL,
              "%s", r.err);
    h_run_free(&r);
}

Test(gpu_inject, fork_child_records_no_gpu_events) {
    const char *trace = h_tmp("fork.mlt");
    h_run_t r;
    run_inject(&r, trace, "--follow-fork", "fork");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    gx_check_scenario(trace, "fx_gpu_inject");
    /* The child's own trace exists and holds no GPU record. */
    char child[4096];
    snprintf(child, sizeof child, "%s", trace);
    char *dot = strrchr(child, '.');
    *dot = '\0';
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "ls %s.*.mlt", child);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char line[4096];
    int children = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        h_trace_t t;
        h_trace_load(&t, line);
        cr_expect_eq(t.records_by_tag[ML_T_GPU_ALLOC], 0, "%s", line);
        h_trace_free(&t);
        children++;
    }
    pclose(p);
    cr_expect_eq(children, 1);
    h_run_free(&r);
}

/* A CPU program under memlens with the CUPTI collector configured: no
 * warning, the same output and status, and none of CUDA's libraries in it
 * (the stub libcuda must never be loaded into programs that do not use CUDA). */
Test(gpu_inject, cpu_program_is_untouched) {
    const char *trace = h_tmp("cpu.mlt");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_counts"), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 7);
    cr_expect_str_eq(r.out, "fx_counts done\n");
    cr_expect_str_eq(r.err, "");
    h_trace_t t;
    h_trace_load(&t, trace);
    cr_expect_eq(h_module(&t, "libcuda"), -1);
    cr_expect_eq(h_module(&t, "libcupti"), -1);
    cr_expect_eq(h_module(&t, "memlens_cupti"), -1);
    cr_expect_eq(t.records_by_tag[ML_T_GPU_ALLOC] + t.records_by_tag[ML_T_GPU_FREE], 0);
    cr_expect_eq(t.totals.alloc_calls, 161, "the heap numbers are the CPU test's");
    h_trace_free(&t);
    h_run_free(&r);
}

/* Outside memlens (a child memlens does not follow inherits the variable):
 * the collector loads nothing and stays silent. */
Test(gpu_inject, outside_memlens_loads_nothing) {
    char lib[4096];
    snprintf(lib, sizeof lib, "%s", h_bin("libmemlens_cupti.so"));
    setenv("CUDA_INJECTION64_PATH", lib, 1);
    const char *argv[] = {h_bin("fx_gpu_inject"), "", NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "fx_gpu_inject done\n", "no libcupti loaded");
    cr_expect_str_eq(r.err, "");
    h_run_free(&r);
}
