/* test_gpu_inject.c - libmemlens_cupti.so under the real `memlens run`, with
 * the fixture playing the CUDA driver (fx_gpu_inject) and a fake libcupti
 * (fake_cupti.c): injection, reuse of the libcupti already loaded, every
 * allocation kind through real callbacks, the failure paths (another CUPTI
 * subscriber, CUPTI that cannot attach, TEARDOWN_CUPTI=1), fork, --no-gpu,
 * CPU programs left exactly as they were, and --gpu-pools (activity records
 * of memory pools, a libcupti without the activity API, another major
 * version). Built only with CUPTI. */
#define _GNU_SOURCE
#include "gpu_expect.h"

#include <criterion/criterion.h>
#include <dirent.h>
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
    /* Without --gpu-pools the activity API is left alone. */
    cr_expect(strstr(r.out, "activity enabled 0 0\n") != NULL, "%s", r.out);
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

/* The program's descriptor 2 is a file of its own: the warning stays out
 * of it, as libmemlens.so's own warnings do (the CUPTI library wrote it to
 * descriptor 2 whatever that was, and could raise SIGPIPE in the program). */
Test(gpu_inject, a_warning_stays_out_of_the_programs_own_stderr) {
    setenv("TEARDOWN_CUPTI", "1", 1);
    const char *own = h_tmp("own_stderr.txt");
    char script[8192];
    snprintf(script, sizeof script, "exec 2>'%s'; exec '%s' '%s'", own, h_bin("fx_gpu_inject"), fake_cupti());
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", h_tmp("ownerr.mlt"), "--", "/bin/sh", "-c", script,
                          NULL};
    h_run_t r;
    h_run(&r, argv);
    unsetenv("TEARDOWN_CUPTI");
    cr_assert_eq(r.status, 0, "%s", r.err);
    FILE *f = fopen(own, "r");
    cr_assert(f, "the program's file");
    char buf[512] = "";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cr_expect_eq(n, 0, "nothing of memlens' in the program's own stderr: %s", buf);
    h_run_free(&r);
}

/* The program reached through an exec of the traced process (a wrapper
 * script's `exec python train.py`, a shim): its image gets the CUPTI
 * collector as the first image would. It printed "no injection" and its
 * trace held its CPU allocations and, silently, none of its GPU ones. */
Test(gpu_inject, an_image_reached_by_exec_is_recorded_on_the_gpu_too) {
    char script[8192];
    snprintf(script, sizeof script, "exec '%s' '%s'", h_bin("fx_gpu_inject"), fake_cupti());
    const char *trace = h_tmp("execgpu.mlt");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", "/bin/sh", "-c", script, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "", "no warnings");
    cr_expect(!strstr(r.out, "no injection"), "%s", r.out);
    cr_expect(strstr(r.out, "subscribes 1\n") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "fx_gpu_inject done\n") != NULL, "%s", r.out);
    h_run_free(&r);
    /* The new image's trace: execgpu.PID.mlt beside execgpu.mlt (sh's). */
    char dir[4096], found[4400] = "";
    snprintf(dir, sizeof dir, "%s", trace);
    *strrchr(dir, '/') = '\0';
    DIR *d = opendir(dir);
    cr_assert(d);
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "execgpu.", 8) && strcmp(e->d_name, "execgpu.mlt") && strstr(e->d_name, ".mlt"))
            snprintf(found, sizeof found, "%s/%s", dir, e->d_name);
    closedir(d);
    cr_assert(found[0], "the exec'd image's trace in %s", dir);
    gx_check_scenario(found, "fx_gpu_inject");
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

/* ------------------------------------------------------------------------- */
/* --gpu-pools                                                               */
/* ------------------------------------------------------------------------- */

static void run_with(h_run_t *r, const char *trace, const char *libcupti, const char *flag,
                     const char *mode) {
    const char *argv[12];
    int k = 0;
    argv[k++] = h_bin("memlens");
    argv[k++] = "run";
    argv[k++] = "-q";
    if (flag) argv[k++] = flag;
    argv[k++] = "-o";
    argv[k++] = trace;
    argv[k++] = "--";
    argv[k++] = h_bin("fx_gpu_inject");
    argv[k++] = libcupti;
    if (mode) argv[k++] = mode;
    argv[k] = NULL;
    h_run(r, argv);
}

static char *report_json(const char *trace, const char *name) {
    const char *json = h_tmp(name);
    const char *argv[] = {h_bin("memlens"), "report", trace, "--json", json, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    char sp[4096], vp[4096];
    snprintf(sp, sizeof sp, "%s/docs/report-schema.json", ML_SRC_DIR);
    snprintf(vp, sizeof vp, "%s/tests/e2e/validate_json.py", ML_SRC_DIR);
    const char *v[] = {"/usr/bin/env", "python3", vp, sp, json, NULL};
    h_run(&r, v);
    cr_expect_eq(r.status, 0, "%s does not match the schema:\n%s", json, r.err);
    h_run_free(&r);
    return h_read_file(json);
}

Test(gpu_inject, gpu_pools_records_pools_end_to_end) {
    const char *trace = h_tmp("pools.mlt");
    h_run_t r;
    run_with(&r, trace, fake_cupti(), "--gpu-pools", "pools");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect_str_eq(r.err, "", "no warnings");
    cr_expect(strstr(r.out, "activity enabled 1 1\n") != NULL, "MEMORY_POOL and MEMORY2 once: %s", r.out);
    cr_expect(strstr(r.out, "fx_gpu_inject done\n") != NULL, "%s", r.out);
    h_run_free(&r);

    h_trace_t t;
    h_trace_load(&t, trace);
    cr_expect(t.complete);
    cr_expect_eq(t.records_by_tag[ML_T_GPU_POOL], 9, "4 handed over mid-run, 5 by the exit flush");
    cr_expect_eq(t.records_by_tag[ML_T_GPU_ALLOC], 3);
    h_trace_free(&t);

    /* The exit flush ran before libmemlens' exit marker. */
    const char *dargv[] = {h_bin("memlens"), "dump", trace, NULL};
    h_run(&r, dargv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *last_pool = NULL;
    for (const char *p = r.out; (p = strstr(p, " gpu-pool ")); p++) last_pool = p;
    const char *exit_rec = strstr(r.out, " proc-exit ");
    cr_assert_not_null(last_pool, "%s", r.out);
    cr_assert_not_null(exit_rec, "%s", r.out);
    cr_expect(last_pool < exit_rec, "pool records after proc-exit:\n%s", r.out);
    cr_expect(strstr(r.out, " gpu-pool trimmed pool=0x700000000 reserved=0 used=0 threshold=0 device=0 "
                            "context=0 keep=0 activity=50 correlation=5") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, " gpu-pool alloc pool=0x700000000 reserved=8388608 used=4194304 threshold=0 "
                            "device=0 context=1 block=0x300000000 block_size=4194304 activity=49 "
                            "correlation=2") != NULL, "%s", r.out);
    h_run_free(&r);

    char *json = report_json(trace, "pools.json");
    cr_assert_not_null(json);
    cr_expect(strstr(json, "\"pool_trims\": 2, \"pool_reserved_at_peak_bytes\": 10485760, "
                           "\"pool_used_at_peak_bytes\": 5242880, \"pool_unused_at_peak_bytes\": 5242880, "
                           "\"pool_records\": 9, \"pools\": [") != NULL, "%s", json);
    cr_expect(strstr(json, "{\"address\": 30064771072, \"kind\": \"explicit\", \"imported\": false, "
                           "\"managed\": false, \"peak_reserved_bytes\": 8388608, \"reserved_at_exit_bytes\": 0, "
                           "\"peak_used_bytes\": 4194304, \"used_at_exit_bytes\": 0, "
                           "\"reserved_at_peak_bytes\": 8388608, \"used_at_peak_bytes\": 4194304, "
                           "\"release_threshold_bytes\": 0, \"trims\": 2, \"reserved_drops_to_zero\": 2, "
                           "\"allocs\": 2, \"releases\": 2, \"created\": 1, \"destroyed\": 1}") != NULL, "%s", json);
    cr_expect(strstr(json, "{\"address\": 25769803776, \"kind\": \"default\", \"imported\": false, "
                           "\"managed\": false, \"peak_reserved_bytes\": 2097152, "
                           "\"reserved_at_exit_bytes\": 2097152, \"peak_used_bytes\": 1048576, "
                           "\"used_at_exit_bytes\": 1048576, \"reserved_at_peak_bytes\": 2097152, "
                           "\"used_at_peak_bytes\": 1048576, \"release_threshold_bytes\": 0, \"trims\": 0, "
                           "\"reserved_drops_to_zero\": 0, \"allocs\": 1, \"releases\": 0, \"created\": 0, "
                           "\"destroyed\": 0}") != NULL, "%s", json);
    free(json);

    /* The text report: one line per pool. */
    const char *targv[] = {h_bin("memlens"), "report", trace, NULL};
    h_run(&r, targv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "GPU memory pools:\n  GPU 0 explicit pool 0x700000000: peak reserved 8.0 MiB, "
                            "peak used 4.0 MiB, reserved at exit 0 B, release threshold 0 B, 2 trims\n") != NULL,
              "%s", r.out);
    cr_expect(strstr(r.out, "  GPU 0: reserved but unused at the device's peak: 5.0 MiB\n") != NULL, "%s", r.out);
    h_run_free(&r);
}

Test(gpu_inject, without_gpu_pools_no_pool_records) {
    const char *trace = h_tmp("nopools.mlt");
    h_run_t r;
    run_with(&r, trace, fake_cupti(), NULL, "pools");
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect(strstr(r.out, "activity enabled 0 0\n") != NULL, "%s", r.out);
    h_run_free(&r);
    h_trace_t t;
    h_trace_load(&t, trace);
    cr_expect_eq(t.records_by_tag[ML_T_GPU_POOL], 0);
    cr_expect_eq(t.records_by_tag[ML_T_GPU_ALLOC], 3, "the callbacks as ever");
    h_trace_free(&t);
    char *json = report_json(trace, "nopools.json");
    cr_expect(strstr(json, "\"pools\": [") == NULL, "%s", json);
    cr_expect(strstr(json, "pool_reserved_at_peak_bytes") == NULL);
    free(json);
}

Test(gpu_inject, libcupti_without_activity_api_one_warning_callbacks_complete) {
    const char *trace = h_tmp("noact.mlt");
    h_run_t r;
    run_with(&r, trace, h_bin("fakecupti-noact/libcupti.so.12"), "--gpu-pools", NULL);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect(strstr(r.out, "activity api absent\n") != NULL, "%s", r.out);
    cr_expect_eq(count(r.err, "memlens: warning:"), 1, "%s", r.err);
    cr_expect(strstr(r.err, "memlens: warning: --gpu-pools: GPU memory pool records are off: ") != NULL &&
                  strstr(r.err, "fakecupti-noact/libcupti.so.12 (already loaded by the program) lacks "
                                "the CUPTI activity API") != NULL,
              "%s", r.err);
    h_run_free(&r);
    gx_check_scenario(trace, "fx_gpu_inject");
}

Test(gpu_inject, another_cupti_major_version_one_warning) {
    setenv("FAKE_CUPTI_VERSION", "120000", 1);
    const char *trace = h_tmp("cu12.mlt");
    h_run_t r;
    run_with(&r, trace, fake_cupti(), "--gpu-pools", NULL);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect(strstr(r.out, "activity enabled 0 0\n") != NULL, "%s", r.out);
    cr_expect_eq(count(r.err, "memlens: warning:"), 1, "%s", r.err);
    cr_expect(strstr(r.err, "is another CUPTI major version (API version 120000, this memlens reads the "
                            "records of 13.x)") != NULL, "%s", r.err);
    h_run_free(&r);
    gx_check_scenario(trace, "fx_gpu_inject");
}
