/* test_gpu.c - GPU events end to end without a GPU: a fixture hands
 * synthesized events to libmemlens.so's memlens_gpu_record() under the real
 * `memlens run`, and the trace, the analysis and the JSON must say exactly
 * what the fixture did (tests/e2e/gpu_expect.h). Runs everywhere, CUPTI or
 * not; the CUPTI side is test_gpu_inject.c. */
#define _GNU_SOURCE
#include "gpu_expect.h"

#include <criterion/criterion.h>
#include <unistd.h>

Test(gpu_e2e, events_through_memlens_gpu_record) {
    const char *trace = h_tmp("gpu_events.mlt");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_gpu_events"), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect_str_eq(r.out, "fx_gpu_events done\n");
    cr_expect_str_eq(r.err, "", "no warnings");
    gx_check_scenario(trace, "fx_gpu_events");
    h_run_free(&r);
}

Test(gpu_e2e, dump_prints_gpu_records) {
    const char *trace = h_tmp("gpu_dump.mlt");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_gpu_events"), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *dump[] = {h_bin("memlens"), "dump", trace, NULL};
    h_run_t d;
    h_run(&d, dump);
    cr_assert_eq(d.status, 0, "%s", d.err);
    cr_expect(strstr(d.out, " gpu-alloc device ptr=0x10800000 size=5242880 device=0 context=1 ") != NULL);
    cr_expect(strstr(d.out, " gpu-alloc vmm_map ptr=0x7e0000000000 size=2097152 device=0 context=1 "
                            "stream=0x0 handle=0xabc0 ") != NULL);
    cr_expect(strstr(d.out, " gpu-free free-failed device ptr=0x10100000 ") != NULL);
    cr_expect(strstr(d.out, " gpu-free context-destroy device ptr=0x0 size=0 device=1 context=2 ") != NULL);
    h_run_free(&d);
    h_run_free(&r);
}

Test(gpu_e2e, without_memlens_nothing_to_record_into) {
    const char *argv[] = {h_bin("fx_gpu_events"), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 3);
    cr_expect_str_eq(r.out, "no memlens\n");
    h_run_free(&r);
}

/* The text summary (`memlens report TRACE`) has a GPU section: each device's
 * peak, leaks and pinned host memory, the sites holding the peak and the
 * leaked blocks, named by the program's own functions. */
Test(gpu_e2e, text_report_has_the_gpu_section) {
    const char *trace = h_tmp("gpu_text.mlt");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_gpu_events"), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    const char *rep[] = {h_bin("memlens"), "report", trace, NULL};
    h_run(&r, rep);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *gpu = strstr(r.out, "\nGPU memory:\n");
    cr_assert(gpu, "no GPU section:\n%s", r.out);
    /* 15 MiB + 118784 B at the peak; 5 MiB + 100 KiB leaked (the pitched
     * block's free failed); device 1's 3 MiB died with its context. */
    cr_expect(strstr(gpu, "\n  device 0: peak 15.1 MiB in 8 blocks at ") != NULL, "%s", gpu);
    cr_expect(strstr(gpu, "; leaked 5.1 MiB in 2 blocks (0 B at context destroy); 13 allocs, 10 "
                          "frees, 1 failed\n") != NULL,
              "%s", gpu);
    cr_expect(strstr(gpu, "\n    pinned host: peak 132.0 KiB, leaked 64.0 KiB\n") != NULL, "%s", gpu);
    /* The first site held at the peak and the first leak: the 5 MiB
     * cudaMalloc called from gpu_leaky_site (through the fixture's ev()). */
    const char *held = strstr(gpu, "    held at the peak:\n         5.0 MiB      1 blocks  device          ev  ");
    cr_expect(held != NULL, "%s", gpu);
    const char *leaked = strstr(gpu, "    leaked:\n         5.0 MiB      1 blocks  device          ev  ");
    cr_expect(leaked != NULL, "%s", gpu);
    if (leaked) {
        const char *caller = strstr(leaked, "\n          <- gpu_leaky_site  fx_gpu_events.c:");
        const char *pitch = strstr(leaked, "\n       100.0 KiB      1 blocks  pitch ");
        cr_expect(caller && pitch && caller < pitch, "the 5 MiB leak's caller, then the pitch:\n%s",
                  leaked);
    }
    const char *d1 = strstr(gpu, "\n  device 1: peak 3.0 MiB in 1 blocks at ");
    cr_expect(d1 != NULL, "%s", gpu);
    if (d1) {
        cr_expect(strstr(d1, "; leaked 3.0 MiB in 1 blocks (3.0 MiB at context destroy); 1 allocs, 0 "
                             "frees\n") != NULL,
                  "%s", d1);
        cr_expect(strstr(d1, "\n          <- worker  fx_gpu_events.c:") != NULL, "%s", d1);
        cr_expect(strstr(d1, "pinned host") == NULL, "device 1 pinned nothing");
    }
    h_run_free(&r);

    /* A CPU-only trace has no GPU section. */
    const char *cpu = h_tmp("cpu_text.mlt");
    const char *argv2[] = {h_bin("memlens"), "run", "-q", "-o", cpu, "--", h_bin("fx_counts"), NULL};
    h_run(&r, argv2);
    h_run_free(&r);
    const char *rep2[] = {h_bin("memlens"), "report", cpu, NULL};
    h_run(&r, rep2);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "GPU memory") == NULL, "%s", r.out);
    h_run_free(&r);
}

/* `memlens report` in CI: --max-gpu-peak judges each device's peak,
 * --fail-on-gpu-leak the device memory of every device still held at exit
 * (live, or freed only by the context's destruction). Exactly at the budget
 * passes; one byte under fails with exit 3 and says which device and why,
 * after the reports are written. */
static h_run_t gate(const char *trace, const char *opt, const char *bytes, const char *json) {
    const char *argv[] = {h_bin("memlens"), "report", trace, "-q", opt, bytes, "--json", json, NULL};
    h_run_t r;
    h_run(&r, argv);
    return r;
}

Test(gpu_e2e, gpu_gates) {
    const char *trace = h_tmp("gpu_gates.mlt");
    const char *json = h_tmp("gpu_gates.json");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_gpu_events"), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);

    /* Device 0 peaks at 15 MiB + 118784 B = 15847424 B; device 1 at 3 MiB. */
    r = gate(trace, "--max-gpu-peak", "15847424", json);
    cr_expect_eq(r.status, 0, "at the budget: %s", r.err);
    h_run_free(&r);
    unlink(json);
    r = gate(trace, "--max-gpu-peak", "15847423", json);
    cr_expect_eq(r.status, 3);
    cr_expect(strstr(r.err, "memlens: gate exceeded: GPU device 0 peak 15847424 bytes (15.1 MiB) > "
                            "--max-gpu-peak 15847423 bytes") != NULL,
              "%s", r.err);
    cr_expect(strstr(r.err, "device 1") == NULL, "device 1's 3 MiB is within: %s", r.err);
    cr_expect(h_file_exists(json), "the JSON is written before the gate fails");
    h_run_free(&r);

    /* Leaked: 5 MiB + 100 KiB on device 0, 3 MiB on device 1 (its context
     * was destroyed holding it): 8491008 B. */
    r = gate(trace, "--fail-on-gpu-leak", "8491008", json);
    cr_expect_eq(r.status, 0, "at the budget: %s", r.err);
    h_run_free(&r);
    r = gate(trace, "--fail-on-gpu-leak", "8491007", json);
    cr_expect_eq(r.status, 3);
    cr_expect(strstr(r.err, "memlens: gate exceeded: GPU memory leaked 8491008 bytes (8.1 MiB) > "
                            "--fail-on-gpu-leak 8491007 bytes") != NULL,
              "%s", r.err);
    h_run_free(&r);

    /* A program without GPU records passes any GPU budget. */
    const char *cpu = h_tmp("gpu_gates_cpu.mlt");
    const char *argv2[] = {h_bin("memlens"), "run", "-q", "-o", cpu, "--", h_bin("fx_counts"), NULL};
    h_run(&r, argv2);
    h_run_free(&r);
    r = gate(cpu, "--max-gpu-peak", "0", json);
    cr_expect_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    r = gate(cpu, "--fail-on-gpu-leak", "0", json);
    cr_expect_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
}
