/* test_gpu.c - GPU events end to end without a GPU: a fixture hands
 * synthesized events to libmemlens.so's memlens_gpu_record() under the real
 * `memlens run`, and the trace, the analysis and the JSON must say exactly
 * what the fixture did (tests/e2e/gpu_expect.h). Runs everywhere, CUPTI or
 * not; the CUPTI side is test_gpu_inject.c. */
#define _GNU_SOURCE
#include "gpu_expect.h"

#include <criterion/criterion.h>

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
