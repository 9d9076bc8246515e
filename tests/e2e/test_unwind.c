/* test_unwind.c - the recorder's stacks equal libunwind's (issue 12).
 *
 * `memlens run --unwind verify` takes every stack twice: the recorder's way
 * (unwind.c: cached CFI rules, outer frames reused from the thread's previous
 * stack) and libunwind's, reads the recorded stack back from the trie by the
 * leaf id the event carries, and counts the stacks that differ in an
 * unwind-check record (docs/recorder.md, "Stacks"). Every fixture program,
 * and fx_unwind's hard cases in particular, must give zero differences over
 * a non-zero number of stacks the recorder walked itself.
 * tests/e2e/test_real_programs.sh does the same for python3, perl, sqlite3
 * and git (its "verify" mode, ctest unwind_verify_real_programs). */
#define _GNU_SOURCE
#include "harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    uint64_t stacks, mismatches, fallbacks, reused;
    uint64_t first_frame, fast_pc, full_pc;
    int records; /* unwind-check records found (one per trace) */
} check_t;

/* Adds the unwind-check record of one trace to *c. */
static void read_check(const char *path, check_t *c) {
    ml_reader_t *r;
    char err[256];
    cr_assert_eq(ml_reader_open(path, &r, err, sizeof err), 0, "%s", err);
    ml_record_t rec;
    int rc;
    while ((rc = ml_reader_next(r, &rec)) > 0) {
        if (rec.tag != ML_T_UNWIND_CHECK) continue;
        c->records++;
        c->stacks += rec.u.unwind_check.stacks;
        c->mismatches += rec.u.unwind_check.mismatches;
        c->fallbacks += rec.u.unwind_check.fallbacks;
        c->reused += rec.u.unwind_check.reused;
        if (rec.u.unwind_check.mismatches && !c->fast_pc) {
            c->first_frame = rec.u.unwind_check.first_frame;
            c->fast_pc = rec.u.unwind_check.fast_pc;
            c->full_pc = rec.u.unwind_check.full_pc;
        }
    }
    cr_assert_eq(rc, 0, "%s: %s", path, ml_reader_error(r));
    ml_reader_close(r);
}

/* Runs `memlens run -q --unwind verify [extra] -- fixture args...` into a
 * folder of its own and adds up the unwind-check records of every trace
 * written there (one per process image with --follow-fork), whose path
 * goes into dir (512 bytes). */
static void verify_run_in(char *dir, const char *name, const char *const *extra,
                          const char *const *args, int status, check_t *c, h_run_t *out) {
    static int runs;
    char sub[128];
    snprintf(sub, sizeof sub, "%s.%d", name, runs++);
    snprintf(dir, 512, "%s", h_tmp(sub));
    cr_assert_eq(mkdir(dir, 0700), 0);
    char trace[600];
    snprintf(trace, sizeof trace, "%s/t.mlt", dir);
    const char *argv[32];
    int n = 0;
    argv[n++] = h_bin("memlens");
    argv[n++] = "run";
    argv[n++] = "-q";
    argv[n++] = "--unwind";
    argv[n++] = "verify";
    for (; extra && *extra && n < 12; extra++) argv[n++] = *extra;
    argv[n++] = "-o";
    argv[n++] = trace;
    argv[n++] = "--";
    argv[n++] = h_bin(name);
    for (; args && *args && n < 31; args++) argv[n++] = *args;
    argv[n] = NULL;
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, status, "%s: exit status %d; stderr: %s", name, r.status, r.err);
    memset(c, 0, sizeof *c);
    DIR *d = opendir(dir);
    cr_assert(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".mlt")) continue;
        char path[900];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        read_check(path, c);
    }
    closedir(d);
    if (out) *out = r;
    else h_run_free(&r);
}

static void verify_run(const char *name, const char *const *extra, const char *const *args,
                       int status, check_t *c, h_run_t *out) {
    char dir[512];
    verify_run_in(dir, name, extra, args, status, c, out);
}

static void expect_exact(const char *name, const check_t *c) {
    cr_expect_gt(c->records, 0, "%s: no unwind-check record", name);
    cr_expect_gt(c->stacks, 0, "%s: no stack compared", name);
    cr_expect_eq(c->mismatches, 0,
                 "%s: %lu of %lu stacks differ from libunwind's; the first at frame %lu: "
                 "0x%lx recorded, 0x%lx by libunwind",
                 name, (unsigned long)c->mismatches, (unsigned long)c->stacks,
                 (unsigned long)c->first_frame, (unsigned long)c->fast_pc,
                 (unsigned long)c->full_pc);
}

Test(unwind, every_fixture_equals_libunwind, .timeout = 600) {
    static const struct {
        const char *name;
        const char *extra[2];
        const char *args[4];
        int status;
    } fx[] = {
        {"fx_counts", {NULL}, {NULL}, 7},
        {"fx_threads", {NULL}, {NULL}, 0},
        {"fx_cpp", {NULL}, {NULL}, 0},
        {"fx_fork", {"--follow-fork", NULL}, {NULL}, 0},
        {"fx_dlopen", {NULL}, {NULL}, 0},
        {"fx_sample", {NULL}, {NULL}, 0},
        {"fx_jemalloc", {NULL}, {NULL}, 0},
        {"fx_leaks", {NULL}, {NULL}, 0},
        {"fx_frag", {NULL}, {NULL}, 0},
        {"fx_inline", {NULL}, {NULL}, 0},
        {"fx_grow", {NULL}, {"20", "1", NULL}, 0},
        {"fx_crash", {NULL}, {"segv", NULL}, 128 + 11},
        {"fx_adv_arena", {NULL}, {NULL}, 0},
        {"fx_adv_lifetimes", {NULL}, {NULL}, 0},
        {"fx_adv_realloc", {NULL}, {NULL}, 0},
        {"fx_unwind", {NULL}, {NULL}, 0},
    };
    uint64_t walked = 0, reused = 0;
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        check_t c;
        verify_run(fx[i].name, fx[i].extra, fx[i].args, fx[i].status, &c, NULL);
        expect_exact(fx[i].name, &c);
        walked += c.stacks - c.fallbacks;
        reused += c.reused;
    }
    cr_expect_gt(walked, 100000, "stacks the recorder walked itself: %lu", (unsigned long)walked);
    cr_expect_gt(reused, 100000, "stacks that reused the previous one: %lu", (unsigned long)reused);
}

/* fx_unwind's hard cases, each of which happened: recursion past the depth
 * limit, alloca frames met at the same pc and stack pointer with another
 * rbp, signal handlers (handed to libunwind: sigreturn frames), longjmp,
 * exceptions, code without CFI, a thread on its own stack, plugin b loaded
 * where plugin a was (same return address, other frames: a stale rule would
 * drop plug_alloc from b's stacks) and a loaded again elsewhere. */
Test(unwind, hard_cases_equal_libunwind, .timeout = 300) {
    check_t c;
    h_run_t r;
    verify_run("fx_unwind", NULL, NULL, 0, &c, &r);
    cr_expect(strstr(r.out, "alloca done (frame bases 1.5 KiB or more apart)"), "%s", r.out);
    cr_expect(strstr(r.out, "the timer's handler allocated: yes"), "%s", r.out);
    cr_expect(strstr(r.out, "plugin b where a was: yes"), "%s", r.out);
    cr_expect(strstr(r.out, "plugin a again elsewhere: yes"), "%s", r.out);
    cr_expect(strstr(r.out, "plugins done"), "%s", r.out);
    expect_exact("fx_unwind", &c);
    cr_expect_gt(c.stacks, 10000);
    /* Signal handlers' stacks (sigreturn frames) and the function without
     * CFI are libunwind's; nearly everything else reuses the previous stack. */
    cr_expect_geq(c.fallbacks, 10 + 10, "fallbacks: %lu", (unsigned long)c.fallbacks);
    cr_expect_gt(c.reused, c.stacks * 9 / 10, "reused: %lu of %lu", (unsigned long)c.reused,
                 (unsigned long)c.stacks);
    h_run_free(&r);

    /* The same at depth 8: most stacks are cut, and must be cut the same. */
    static const char *const depth8[] = {"--depth", "8", NULL};
    verify_run("fx_unwind", depth8, NULL, 0, &c, NULL);
    expect_exact("fx_unwind --depth 8", &c);
}

/* The trace says where plugin b's allocations came from: plug_alloc in b
 * (one frame above the return address into plug_inner), not call_plugin
 * as a's stale rule would have it. */
Test(unwind, plugin_at_a_reused_address_keeps_its_frames) {
    const char *trace = h_tmp("plugins.mlt");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_unwind"), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "plugin b where a was: yes"), "%s", r.out);
    h_trace_t t;
    h_trace_load(&t, trace);
    cr_expect_eq(h_allocs_of_size(&t, 1015), 50);
    cr_expect_eq(h_allocs_of_size(&t, 1016), 50);
    cr_expect_eq(h_allocs_of_size(&t, 1017), 50);
    uint32_t sb = h_stack_of_size(&t, 1016);
    cr_assert_gt(sb, 0);
    /* b's stack: plug_inner's return address, then plug_alloc's, both in b. */
    uint64_t pc0 = t.node_pc[sb], pc1 = t.node_pc[t.node_parent[sb]];
    int nb = 0;
    for (int i = 0; i < t.nmodules; i++) {
        if (!strstr(t.modules[i].path, "libfxuw_b.so")) continue;
        nb++;
        cr_expect(pc0 >= t.modules[i].lo && pc0 < t.modules[i].hi, "frame 0 0x%lx outside b",
                  (unsigned long)pc0);
        cr_expect(pc1 >= t.modules[i].lo && pc1 < t.modules[i].hi,
                  "frame 1 0x%lx outside b (plug_alloc lost)", (unsigned long)pc1);
        cr_expect_eq(pc1 - pc0, 0x10, "plug_alloc's return address is 16 bytes after plug_inner's");
    }
    cr_expect_eq(nb, 1);
    h_trace_free(&t);
    h_run_free(&r);
}

/* Under --unwind verify the memo of whole walks is asked for every stack
 * (docs/recorder.md). fx_fork's child allocates where its parent did last,
 * with the same stack: the memo must not hand the child the parent's node
 * ids, which restart in the child's trace. */
Test(unwind, a_forked_child_does_not_take_its_parents_remembered_stacks) {
    char dir[512];
    check_t c;
    static const char *const follow[] = {"--follow-fork", NULL};
    verify_run_in(dir, "fx_fork", follow, NULL, 0, &c, NULL);
    expect_exact("fx_fork", &c);
    cr_expect_eq(c.records, 2, "parent and child");
    char parent[600], child[900] = "";
    snprintf(parent, sizeof parent, "%s/t.mlt", dir);
    DIR *d = opendir(dir);
    cr_assert(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".mlt") && strcmp(e->d_name, "t.mlt"))
            snprintf(child, sizeof child, "%s/%s", dir, e->d_name);
    closedir(d);
    cr_assert(child[0], "no child trace in %s", dir);
    h_trace_t t, k;
    h_trace_load(&t, parent);
    h_trace_load(&k, child);
    cr_expect_eq(h_allocs_of_size(&k, 222), 22);
    h_expect_same_stack(&t, h_stack_of_size(&t, 111), &k, h_stack_of_size(&k, 222), 3);
    h_trace_free(&k);
    h_trace_free(&t);
}
