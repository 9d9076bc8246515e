/* test_report.c - `memlens report` and `memlens diff` end to end on fixture
 * programs with known ground truth: leak kinds per function, the exact peak
 * and who holds it, demangled C++ names, a dlclosed plugin's file:line,
 * fragmentation of alternating vs contiguous frees, CI gates, suppressions,
 * diff, bad input and unwritable outputs, the JSON schema. */
#define _GNU_SOURCE
#include "harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------- */

static void record(const char *trace, const char *fixture, const char *arg) {
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin(fixture), arg, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "memlens run %s: status %d: %s", fixture, r.status, r.err);
    h_run_free(&r);
}

static ml_analysis_t *analyse(const char *trace, const ml_suppressions_t *s) {
    ml_analysis_t *a;
    char err[512];
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_assert_eq(ml_analysis_load(a, trace, err, sizeof err), 0, "%s", err);
    ml_build_opts_t o = {.suppressions = s};
    cr_assert_eq(ml_analysis_build(a, &o, err, sizeof err), 0, "%s", err);
    return a;
}

/* Sum of the leak groups whose frames[0] is `fn`, of one kind. */
static uint64_t leaked(const ml_analysis_t *a, const char *fn, ml_leak_kind_t kind, uint64_t *blocks) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    uint64_t bytes = 0;
    if (blocks) *blocks = 0;
    for (size_t i = 0; i < L->ngroups; i++) {
        const ml_leak_group_t *g = &L->groups[i];
        if (g->kind != kind || !s[g->site].nframes || strcmp(s[g->site].frames[0].function, fn)) continue;
        bytes += g->bytes;
        if (blocks) *blocks += g->blocks;
    }
    return bytes;
}

/* The same, all kinds together: what the scan judged of `fn`'s blocks. */
static uint64_t judged(const ml_analysis_t *a, const char *fn, uint64_t *blocks) {
    uint64_t bytes = 0, n = 0, b;
    for (int k = 0; k < ML_LEAK_KINDS; k++) {
        bytes += leaked(a, fn, (ml_leak_kind_t)k, &b);
        n += b;
    }
    *blocks = n;
    return bytes;
}

/* `function` leaked exactly `bytes` in `blocks` blocks of this kind. */
static void expect_leaked(const ml_analysis_t *a, const char *function, ml_leak_kind_t kind, uint64_t bytes,
                          uint64_t blocks) {
    uint64_t n;
    cr_expect_eq(leaked(a, function, kind, &n), bytes, "%s, kind %d", function, (int)kind);
    cr_expect_eq(n, blocks, "%s, kind %d: blocks", function, (int)kind);
}

/* The kinds of fixtures/fx_pair.h's blocks, as valgrind gives them for the
 * same shapes (tests/leaks/lk_sigterm.c). */
static void expect_pair_and_keep(const ml_analysis_t *a) {
    expect_leaked(a, "make_pair", ML_LEAK_DEFINITE, 48, 1);
    expect_leaked(a, "make_pair", ML_LEAK_INDIRECT, 16, 1);
    expect_leaked(a, "keep", ML_LEAK_REACHABLE, 32, 1);
}

/* Records a fixture built on fx_pair.h with the test build's hook `var` set
 * to `value`, and returns its analysis once the scan is known to have run
 * and judged fx_pair.h's blocks as valgrind does; *status is memlens'. */
static ml_analysis_t *record_pair_fixture(const char *fixture, const char *var, const char *value, int *status) {
    char name[64];
    snprintf(name, sizeof name, "%s.mlt", fixture);
    const char *trace = h_tmp(name);
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin(fixture), NULL};
    h_run_t r;
    h_run_test_lib(&r, argv, var, value);
    *status = r.status;
    if (r.status != 0 && r.status != 128 + SIGTERM) cr_log_error("%s: status %d: %s", fixture, r.status, r.err);
    h_run_free(&r);
    ml_analysis_t *a = analyse(trace, NULL);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    cr_assert(L->scanned, "%s ended without its exit scan", fixture);
    cr_expect_eq(L->unscanned_blocks, 0);
    expect_pair_and_keep(a);
    return a;
}

static const ml_site_t *site_of(const ml_analysis_t *a, const char *fn, uint64_t leaked_bytes) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    for (size_t i = 0; i < n; i++)
        if (s[i].nframes && !strcmp(s[i].frames[0].function, fn) &&
            (leaked_bytes == UINT64_MAX || s[i].leaked_bytes == leaked_bytes))
            return &s[i];
    return NULL;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = s ? strlen(s) : 0, b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int report(h_run_t *r, const char *const *args) {
    const char *argv[24] = {h_bin("memlens"), "report"};
    int k = 2;
    for (; *args && k < 23; args++) argv[k++] = *args;
    argv[k] = NULL;
    h_run(r, argv);
    return r->status;
}

static void validate(const char *schema, const char *doc) {
    char sp[4096], vp[4096];
    snprintf(sp, sizeof sp, "%s/docs/%s", ML_SRC_DIR, schema);
    snprintf(vp, sizeof vp, "%s/tests/e2e/validate_json.py", ML_SRC_DIR);
    const char *argv[] = {"/usr/bin/env", "python3", vp, sp, doc, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 0, "%s does not match %s:\n%s", doc, schema, r.err);
    h_run_free(&r);
}

/* Runs `memlens diff ... --json json` (argv), which must exit 0, checks the
 * JSON against the schema and returns it (free it). */
static char *diff_json(const char *const argv[], const char *json) {
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    validate("diff-schema.json", json);
    char *doc = h_read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    return doc;
}

/* fx_leaks recorded once per test process (Criterion forks per test). */
static const char *leaks_trace(void) {
    const char *t = h_tmp("leaks.mlt");
    if (!h_file_exists(t)) record(t, "fx_leaks", "1");
    return t;
}

#define PEAK_EXPECTED (111 + 222 + 333 + 444 + 1048576)

/* ------------------------------------------------------------------------- */
/* What the analysis finds                                                   */
/* ------------------------------------------------------------------------- */

Test(report, leak_kinds_per_function) {
    ml_analysis_t *a = analyse(leaks_trace(), NULL);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    cr_expect(L->scanned, "the exit scan ran");
    expect_leaked(a, "keep_global", ML_LEAK_REACHABLE, 111, 1);
    expect_leaked(a, "drop_block", ML_LEAK_DEFINITE, 222, 1);
    expect_leaked(a, "make_chain", ML_LEAK_DEFINITE, 333, 1);
    expect_leaked(a, "make_chain", ML_LEAK_INDIRECT, 444, 1);
    cr_expect_eq(L->bytes, 111 + 222 + 333 + 444, "nothing else is live: %lu", (unsigned long)L->bytes);
    cr_expect_eq(L->blocks, 4);
    cr_expect_eq(L->kind_bytes[ML_LEAK_DEFINITE], 555);
    cr_expect_eq(L->kind_bytes[ML_LEAK_INDIRECT], 444);
    cr_expect_eq(L->kind_bytes[ML_LEAK_REACHABLE], 111);
    cr_expect_eq(L->kind_bytes[ML_LEAK_POSSIBLE], 0);
    cr_expect_eq(L->gate_bytes, 555 + 444, "leaked = definite + indirect (+ possible)");
    cr_expect_eq(L->lost_bytes, 555 + 444);
    cr_expect_eq(L->lost_blocks, 3);
    /* Sites carry file:line of the allocating call. */
    const ml_site_t *s = site_of(a, "make_chain", 444);
    cr_assert(s);
    cr_expect(ends_with(s->frames[0].file, "fx_leaks.c"), "%s", s->frames[0].file);
    cr_expect_eq(s->frames[0].line, 26);
    cr_expect_str_eq(s->frames[1].function, "main");
    s = site_of(a, "make_chain", 333);
    cr_assert(s);
    cr_expect_eq(s->frames[0].line, 25);
    ml_analysis_free(a);
}

/* Threads still replacing their blocks when the program exits
 * (fx_exitchurn): the other threads wait at their next allocation call
 * while the collector scans, so every slot is reachable from its thread's
 * stack and only the block main dropped is definite, as valgrind says
 * (777 bytes definite, 263,680 in 64 blocks reachable, four TLS vectors
 * possibly lost). Before, the threads went on under the scan and after it,
 * and every slot came out definite. A thread held in free() between its
 * new block and the old one has one block more, reachable from its frame:
 * up to four. */
Test(report, threads_allocating_at_exit_are_held_for_the_scan, .timeout = 120) {
    const char *trace = h_tmp("exitchurn.mlt");
    record(trace, "fx_exitchurn", NULL); /* no argument: the NULL ends argv */
    ml_analysis_t *a = analyse(trace, NULL);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    cr_assert(L->scanned);
    cr_expect_eq(L->unscanned_blocks, 0, "blocks allocated after the scan");
    cr_expect_eq(L->kind_bytes[ML_LEAK_DEFINITE], 777);
    cr_expect_eq(L->kind_blocks[ML_LEAK_DEFINITE], 1);
    uint64_t blocks;
    cr_expect_eq(leaked(a, "drop", ML_LEAK_DEFINITE, &blocks), 777);
    cr_expect_eq(L->kind_blocks[ML_LEAK_INDIRECT], 0);
    cr_expect_eq(L->kind_blocks[ML_LEAK_POSSIBLE], 4, "one TLS vector per thread");
    cr_expect_geq(L->kind_blocks[ML_LEAK_REACHABLE], 64);
    cr_expect_leq(L->kind_blocks[ML_LEAK_REACHABLE], 64 + 4);
    cr_expect_geq(L->kind_bytes[ML_LEAK_REACHABLE], 263680);
    ml_analysis_free(a);
}

/* Four threads call exit(3) at once (fx_exitrace): one runs the loader's
 * destructor pass and memlens' exit scan in it, another takes the last
 * handler, the others find none left and went on to _exit, ending the
 * process under the scan: every live block was "definite", the scan never
 * written (5 runs of 5). Now the scan is made and the verdicts are
 * valgrind's: keep()'s 10 blocks reachable, drop()'s 333 bytes definite. */
Test(report, threads_calling_exit_at_once_leave_the_scan_whole, .timeout = 120) {
    for (int run = 0; run < 3; run++) {
        const char *trace = h_tmp("exitrace.mlt");
        const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_exitrace"), NULL};
        h_run_t r;
        h_run(&r, argv);
        cr_assert_eq(r.status, 3, "memlens run passes the program's status on: %d: %s", r.status, r.err);
        h_run_free(&r);
        ml_analysis_t *a = analyse(trace, NULL);
        const ml_leaks_t *L = ml_analysis_leaks(a);
        cr_assert(L->scanned, "run %d: the exit scan was cut off", run);
        expect_leaked(a, "keep", ML_LEAK_REACHABLE, 1000, 10);
        expect_leaked(a, "drop", ML_LEAK_DEFINITE, 333, 1);
        cr_expect_eq(L->kind_blocks[ML_LEAK_DEFINITE], 1);
        ml_analysis_free(a);
    }
}

/* A call already past its check of the hold when the exit begins, and kept
 * off the CPU for 300 ms there (fx_exitslow, with the test build of the
 * interposer: ML_TEST_SLOW_SIZE), must still land before the exit record:
 * the exiting thread waits for it. Before, it waited until the ring had
 * been still for 1 ms, and the block came after the exit record with no
 * verdict (on a loaded machine, fx_exitchurn above lost blocks that way). */
Test(report, a_call_under_way_at_exit_lands_before_the_exit_record, .timeout = 120) {
    cr_assert_eq(setenv("ML_TEST_SLOW_SIZE", "4321", 1), 0);
    cr_assert_eq(setenv("ML_PRELOAD_LIB", h_bin("libmemlens_test.so"), 1), 0);
    const char *trace = h_tmp("exitslow.mlt");
    record(trace, "fx_exitslow", NULL);
    unsetenv("ML_TEST_SLOW_SIZE");
    unsetenv("ML_PRELOAD_LIB");
    ml_analysis_t *a = analyse(trace, NULL);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    cr_assert(L->scanned);
    cr_expect_eq(L->unscanned_blocks, 0, "the slow call's block came after the exit record");
    uint64_t blocks;
    cr_expect_eq(judged(a, "worker", &blocks), 4321, "the worker's block is live at exit, judged");
    cr_expect_eq(blocks, 1);
    ml_analysis_free(a);
}

/* SIGTERM from another process, landing while memlens takes the stack of
 * an allocation (fx_sigterm with ML_TEST_SIGNAL_SIZE: the test build sends
 * it from inside the hook, the guard up). The handler cannot make the exit
 * handshake there (the thread is inside memlens); it puts the signal off
 * until the call is done, then scans, and the process dies of SIGTERM as it
 * would alone. Before, such a process ended unscanned: every block counted
 * definite. valgrind's numbers for the three first blocks (tests/leaks has
 * the same shapes, compared with valgrind: lk_sigterm). */
Test(report, a_sigterm_inside_memlens_waits_for_the_call_then_scans, .timeout = 120) {
    int status;
    ml_analysis_t *a = record_pair_fixture("fx_sigterm", "ML_TEST_SIGNAL_SIZE", "5555", &status);
    cr_expect_eq(status, 128 + SIGTERM, "memlens' status is the program's: %d", status);
    uint64_t blocks;
    cr_expect_eq(judged(a, "signal_here", &blocks), 5555, "the call the signal came in is recorded, and judged");
    cr_expect_eq(blocks, 1);
    ml_analysis_free(a);
}

/* SIGTERM on another thread while the program exits and memlens' exit
 * handshake is under way (fx_exitsignal; ML_TEST_EXIT_DELAY_MS makes the
 * handshake last 600 ms, as a big heap's does). The thread's handler waits
 * for the scan before the signal ends the process; before, the process
 * died in the middle of the handshake, unscanned. Whether the process then
 * ends by the signal or by main's exit is a race, as it is without
 * memlens; the scan and its verdicts are not. */
Test(report, a_signal_on_another_thread_waits_for_the_exit_scan, .timeout = 120) {
    int status;
    ml_analysis_t *a = record_pair_fixture("fx_exitsignal", "ML_TEST_EXIT_DELAY_MS", "600", &status);
    cr_expect(status == 0 || status == 128 + SIGTERM, "status %d", status);
    ml_analysis_free(a);
}

/* The hold ends soon after the scan: a library destructor that runs after
 * memlens' and joins threads that allocate (fx_pool) gets them back, and
 * the program exits as it does alone (status 0; 3 if the join took over
 * 5 s, as it did when the hold lasted to the end: 20 s). */
Test(report, a_library_joining_its_threads_at_exit_gets_them_back, .timeout = 120) {
    const char *trace = h_tmp("poolexit.mlt");
    record(trace, "fx_poolexit", NULL);
    ml_analysis_t *a = analyse(trace, NULL);
    cr_expect(ml_analysis_leaks(a)->scanned);
    ml_analysis_free(a);
}

Test(report, exact_peak_and_the_function_holding_it) {
    ml_analysis_t *a = analyse(leaks_trace(), NULL);
    const ml_totals_t *t = ml_analysis_totals(a);
    cr_expect_eq(t->peak_bytes, PEAK_EXPECTED, "peak %lu", (unsigned long)t->peak_bytes);
    cr_expect_eq(t->peak_blocks, 5);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    cr_assert_gt(n, 0);
    /* Sites are ordered by peak bytes: the first holds the peak. */
    cr_expect_str_eq(s[0].frames[0].function, "peak_holder");
    cr_expect_eq(s[0].peak_bytes, 1048576);
    cr_expect_eq(s[0].peak_blocks, 1);
    cr_expect_eq(s[0].frames[0].line, 30);
    cr_expect_eq(s[0].leaked_bytes, 0);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += s[i].peak_bytes;
    cr_expect_eq(sum, PEAK_EXPECTED, "per-site peak bytes add up to the peak");
    ml_analysis_free(a);
}

Test(report, demangled_cxx_names) {
    const char *trace = h_tmp("cpp.mlt");
    record(trace, "fx_cpp", NULL);
    ml_analysis_t *a = analyse(trace, NULL);
    const ml_site_t *s = site_of(a, "ns::Factory<int>::make()", UINT64_MAX);
    cr_assert(s, "a site whose frames[0] is ns::Factory<int>::make()");
    cr_expect_eq(s->leaked_bytes, 64);
    cr_expect_eq(s->leaked_blocks, 1);
    cr_expect_eq(s->alloc_calls, 1);
    cr_expect(ends_with(s->frames[0].file, "fx_cpp.cpp"));
    cr_expect_eq(s->frames[0].line, 8);
    cr_expect_str_eq(s->frames[1].function, "main");
    /* operator new was stripped: `new Widget()` is main's own site */
    const ml_site_t *w = site_of(a, "main", UINT64_MAX);
    cr_assert(w);
    cr_expect_eq(w->bytes_allocated, 64);
    ml_analysis_free(a);
}

Test(report, inlined_frames_and_their_caller) {
    const char *trace = h_tmp("inline.mlt");
    record(trace, "fx_inline", NULL);
    ml_analysis_t *a = analyse(trace, NULL);
    const ml_site_t *s = site_of(a, "make_buffer", UINT64_MAX);
    cr_assert(s, "the inlined function is frames[0]");
    cr_expect_eq(s->alloc_calls, 1);
    cr_expect_eq(s->bytes_allocated, 4321);
    cr_expect(s->frames[0].inlined);
    cr_expect_eq(s->frames[0].line, 6);
    cr_assert_geq(s->nframes, 2);
    cr_expect_str_eq(s->frames[1].function, "outer_function", "the function it was inlined into");
    cr_expect_not(s->frames[1].inlined);
    cr_expect_eq(s->frames[1].line, 10, "at the inlined call's line");
    cr_expect(ends_with(s->frames[1].file, "fx_inline.c"));
    cr_expect_str_eq(s->frames[2].function, "main");
    ml_analysis_free(a);
}

/* The child of node p whose function is fn (and, when given, whose file
 * ends with file); -1 when there is none, -2 when there are several. */
static int32_t tree_child(const ml_calltree_node_t *t, int32_t p, const char *fn, const char *file) {
    int32_t found = -1;
    for (int32_t c = t[p].first_child; c >= 0; c = t[c].next_sibling)
        if (!strcmp(t[c].frame->function, fn) && (!file || ends_with(t[c].frame->file, file)))
            found = found == -1 ? c : -2;
    return found;
}

static int32_t tree_children(const ml_calltree_node_t *t, int32_t p) {
    int32_t n = 0;
    for (int32_t c = t[p].first_child; c >= 0; c = t[c].next_sibling) n++;
    return n;
}

/* The node of main: the one child named main along the single path from the root. */
static int32_t tree_main(const ml_calltree_node_t *t) {
    int32_t n = 0;
    for (int guard = 0; guard < 16 && n >= 0; guard++) {
        int32_t m = tree_child(t, n, "main", NULL);
        if (m >= 0) return m;
        cr_assert_eq(tree_children(t, n), 1, "one path from the root to main");
        n = t[n].first_child;
    }
    return -1;
}

static void expect_costs(const ml_calltree_node_t *n, uint64_t bytes, uint64_t calls) {
    cr_expect_eq(n->incl[ML_COST_ALLOCATED], bytes, "%s: %" PRIu64 " bytes allocated",
                 n->frame->function, n->incl[ML_COST_ALLOCATED]);
    cr_expect_eq(n->incl[ML_COST_CALLS], calls, "%s: calls", n->frame->function);
    /* Every block is still reachable from keep[] at exit: live, not leaked
     * (leaked is definite + indirect + possible, issue 13). */
    cr_expect_eq(n->incl[ML_COST_PEAK], bytes, "%s: peak", n->frame->function);
    cr_expect_eq(n->incl[ML_COST_LEAKED], 0, "%s: leaked %" PRIu64, n->frame->function,
                 n->incl[ML_COST_LEAKED]);
}

Test(report, one_call_tree_merges_lines_and_keeps_static_functions_apart) {
    const char *trace = h_tmp("calltree.mlt");
    record(trace, "fx_calltree", NULL);
    ml_analysis_t *a = analyse(trace, NULL);
    const ml_calltree_node_t *t;
    size_t n = ml_analysis_calltree(a, &t);
    cr_assert_gt(n, 8);
    cr_expect_str_eq(t[0].frame->function, "all");
    expect_costs(&t[0], 21500, 8);
    int32_t m = tree_main(t);
    cr_assert_geq(m, 0, "main is in the tree");
    expect_costs(&t[m], 21500, 8);
    cr_expect_eq(tree_children(t, m), 4, "fill, two make() and pick under main");

    /* grow() is called from two lines of fill(): two sites, one node. */
    size_t ns;
    const ml_site_t *s = ml_analysis_sites(a, &ns);
    uint32_t lines[2], nl = 0;
    for (size_t i = 0; i < ns; i++)
        if (s[i].nframes > 1 && !strcmp(s[i].frames[0].function, "grow") && nl < 2)
            lines[nl++] = s[i].frames[1].line;
    cr_assert_eq(nl, 2, "two sites allocate through grow()");
    cr_expect_neq(lines[0], lines[1], "from two lines of fill()");
    int32_t fill = tree_child(t, m, "fill", "fx_calltree.c");
    cr_assert_geq(fill, 0);
    expect_costs(&t[fill], 3200, 5);
    cr_expect_eq(tree_children(t, fill), 1);
    int32_t grow = tree_child(t, fill, "grow", "fx_calltree.c");
    cr_assert_geq(grow, 0, "one grow() node under fill()");
    expect_costs(&t[grow], 3200, 5);
    cr_expect_eq(t[grow].self[ML_COST_ALLOCATED], 3200, "the sites end in grow()");
    cr_expect_eq(t[fill].self[ML_COST_ALLOCATED], 0);

    /* Two static functions named make(), one per file: two nodes. */
    int32_t ma = tree_child(t, m, "make", "fx_calltree.c"), mb = tree_child(t, m, "make", "fx_calltree_b.c");
    cr_assert_geq(ma, 0, "make() of fx_calltree.c");
    cr_assert_geq(mb, 0, "make() of fx_calltree_b.c");
    expect_costs(&t[ma], 7000, 1);
    expect_costs(&t[mb], 11000, 1);

    /* The inlined function is a node of its own, under the function it was
     * inlined into. */
    int32_t pick = tree_child(t, m, "pick", "fx_calltree.c");
    cr_assert_geq(pick, 0);
    cr_expect(t[pick].frame->inlined);
    expect_costs(&t[pick], 300, 1);
    cr_expect_eq(t[pick].first_child, -1);

    /* The flame tree is the same tree: nothing is pruned here. */
    const ml_calltree_node_t *f;
    size_t nf = ml_analysis_flame(a, &f);
    cr_assert_eq(nf, n, "the flame tree keeps every node of this small tree");
    int32_t fm = tree_main(f);
    cr_assert_geq(fm, 0);
    cr_expect_eq(f[fm].frame, t[m].frame);
    int32_t fg = tree_child(f, tree_child(f, fm, "fill", NULL), "grow", NULL);
    cr_assert_geq(fg, 0);
    cr_expect_eq(f[fg].frame, t[grow].frame);
    cr_expect_eq(memcmp(f[fg].incl, t[grow].incl, sizeof f[fg].incl), 0);
    ml_analysis_free(a);

    /* Without symbols a frame is its return address: fill() reached from
     * one line of main splits at its two call lines. */
    char err[512];
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_assert_eq(ml_analysis_load(a, trace, err, sizeof err), 0, "%s", err);
    ml_build_opts_t o = {.no_symbols = true};
    cr_assert_eq(ml_analysis_build(a, &o, err, sizeof err), 0, "%s", err);
    n = ml_analysis_calltree(a, &t);
    size_t two = 0;
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(t[i].frame->file, NULL);
        if (i && t[i].incl[ML_COST_ALLOCATED] == 3200 && tree_children(t, (int32_t)i) == 2) two++;
    }
    cr_expect_eq(two, 1, "one node (main's call of fill) has the two call lines as children");
    ml_analysis_free(a);
}

/* The build makes its call tree along the recorded stack trie (a lookup per
 * frame below the deepest trie node already placed): node for node, links
 * and frames included, the tree ml_calltree_build makes frame by frame
 * from the same sites. fx_calltree has two call lines of fill() (two trie
 * nodes, one tree node) and an inlined frame (a node of two frames). */
Test(report, call_tree_along_the_trie_is_the_frame_by_frame_tree) {
    const char *trace = h_tmp("calltree_trie.mlt");
    record(trace, "fx_calltree", NULL);
    ml_analysis_t *a = analyse(trace, NULL);
    const uint32_t *sn, *sk, *par;
    const uint8_t *nfr;
    cr_assert_gt(ml__analysis_site_trie(a, &sn, &sk, &par, &nfr), 0, "the build kept the sites' trie");
    const ml_calltree_node_t *t;
    size_t n = ml_analysis_calltree(a, &t);
    size_t ns;
    const ml_site_t *s = ml_analysis_sites(a, &ns);
    ml_calltree_node_t *u;
    int64_t m = ml_calltree_build(s, ns, NULL, false, &u);
    cr_assert_eq(m, (int64_t)n, "%" PRId64 " nodes frame by frame, %zu along the trie", m, n);
    cr_expect_eq(n, 10, "%zu nodes", n);
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(t[i].frame, u[i].frame, "node %zu", i);
        cr_expect_eq(t[i].parent, u[i].parent, "node %zu", i);
        cr_expect_eq(t[i].first_child, u[i].first_child, "node %zu", i);
        cr_expect_eq(t[i].next_sibling, u[i].next_sibling, "node %zu", i);
        cr_expect_eq(t[i].depth, u[i].depth, "node %zu", i);
        cr_expect_eq(memcmp(t[i].incl, u[i].incl, sizeof t[i].incl), 0, "node %zu", i);
        cr_expect_eq(memcmp(t[i].self, u[i].self, sizeof t[i].self), 0, "node %zu", i);
    }
    free(u);
    ml_analysis_free(a);
}

/* The plugin's site, named from its file after dlclose; `arg` as for
 * fx_dlopen. */
static void check_plugin(const char *trace, const char *arg) {
    record(trace, "fx_dlopen", arg);
    ml_analysis_t *a = analyse(trace, NULL);
    const ml_site_t *s = site_of(a, "plugin_alloc", UINT64_MAX);
    cr_assert(s, "the plugin's function is named although it was unloaded before exit");
    cr_expect(ends_with(s->frames[0].file, "fx_plugin.c"), "%s", s->frames[0].file);
    cr_expect_eq(s->frames[0].line, 18);
    cr_expect(ends_with(s->frames[0].module, "/fxplugins/libfxplugin.so"), "%s", s->frames[0].module);
    cr_expect_eq(s->frames[0].module[0], '/', "an absolute path: %s", s->frames[0].module);
    cr_expect_eq(strstr(s->frames[0].module, "/./"), NULL, "%s", s->frames[0].module);
    cr_expect_eq(s->alloc_calls, 3);
    cr_expect_eq(s->leaked_bytes, 999);
    /* Its globals went away with it: nothing points to the blocks any more. */
    uint64_t blocks;
    cr_expect_eq(leaked(a, "plugin_alloc", ML_LEAK_DEFINITE, &blocks), 999);
    cr_expect_eq(blocks, 3);
    ml_analysis_free(a);
}

Test(report, dlclosed_plugin_resolved_from_its_file) {
    check_plugin(h_tmp("dlopen.mlt"), NULL);
}

/* dlopen("./libfxplugin.so") from the plugin's directory: the loader lists
 * that relative path; the report runs elsewhere and still finds the file. */
Test(report, plugin_opened_by_relative_path_resolved) {
    check_plugin(h_tmp("dlopen_rel.mlt"), "relative");
}

/* Every site whose frames[0] is `fn`: its allocation calls and leaked
 * bytes, added up. */
static void site_sum(const ml_analysis_t *a, const char *fn, uint64_t *calls, uint64_t *leaked_bytes,
                     size_t *nsites) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    *calls = *leaked_bytes = 0;
    *nsites = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].nframes && !strcmp(s[i].frames[0].function, fn)) {
            *calls += s[i].alloc_calls;
            *leaked_bytes += s[i].leaked_bytes;
            ++*nsites;
        }
}

/* fx_dlopen MODE under memlens, which must exit 0 and print `says`; the
 * analysis of its trace. */
static ml_analysis_t *plugin_run(const char *mode, const char *says) {
    char name[64];
    snprintf(name, sizeof name, "plugin_%s.mlt", mode);
    const char *trace = h_tmp(name);
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_dlopen"), mode, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "memlens run fx_dlopen %s: status %d: %s", mode, r.status, r.err);
    cr_assert(strstr(r.out, says), "fx_dlopen %s printed %s", mode, r.out);
    h_run_free(&r);
    return analyse(trace, NULL);
}

/* Function fn of fx_plugin.c (line 18), in the file whose path ends with
 * `file`: one site of `calls` calls of `size` bytes, each block leaked. */
static void expect_plugin_site(ml_analysis_t *a, const char *fn, const char *file, uint64_t calls, uint64_t size) {
    uint64_t n, bytes, blocks;
    size_t nsites;
    site_sum(a, fn, &n, &bytes, &nsites);
    cr_expect_eq(n, calls, "%s: %llu calls", fn, (unsigned long long)n);
    cr_expect_eq(bytes, calls * size, "%s: %llu bytes", fn, (unsigned long long)bytes);
    cr_expect_eq(nsites, 1, "%s is one site, not %zu", fn, nsites);
    const ml_site_t *s = site_of(a, fn, UINT64_MAX);
    cr_assert(s, "no site of %s", fn);
    cr_expect(ends_with(s->frames[0].module, file), "%s", s->frames[0].module);
    cr_expect_eq(s->frames[0].line, 18);
    cr_expect_eq(leaked(a, fn, ML_LEAK_DEFINITE, &blocks), calls * size);
    cr_expect_eq(blocks, calls);
}

/* fx_dlopen MODE, one of the swaps: a and b loaded in turn at one address,
 * three times each; each plugin's 9 calls are its own one site. */
static void expect_swap_sites(const char *mode) {
    ml_analysis_t *a = plugin_run(mode, "same address: yes");
    expect_plugin_site(a, "plugin_alloc", "/fxplugins/libfxplugin.so", 9, 333);
    expect_plugin_site(a, "plugin_b_alloc", "/fxplugins/libfxplugin_b.so", 9, 444);
    ml_analysis_free(a);
}

/* Plugin b loaded where a was, with a's return addresses: b's blocks are
 * b's, not a's (the recorder interned b's stacks as a's nodes, whose
 * module was a), and a loaded again at its place is still one site. */
Test(report, a_plugin_loaded_where_another_was_keeps_its_own_sites) {
    expect_swap_sites("swap");
}

/* The same with each plugin's function run by a worker thread that never
 * calls dlopen itself (a plugin host's): the scans that other threads'
 * events make after a dlopen (interpose/runtime.c, ml__modcheck) record b
 * before the worker's stacks in it are interned. */
Test(report, a_plugin_run_by_another_thread_keeps_its_own_sites) {
    expect_swap_sites("swap-thread");
}

/* The same with the plugins loaded by libc's own dlmopen in the base
 * namespace, past memlens' hooks (a library's own loader would do the
 * same): no scan is asked for after the load, and the worker's first stack
 * in b found a's nodes, left in the trie at a's address (the build before:
 * no site of b's function, and a's function in two sites, of 4 and 14
 * calls, all 9 of b's among the 14). The walk of a stack through an object
 * that can be unloaded reads the loader's count of loaded objects; when the
 * module map is behind it, the scan comes first (interpose/stacks.c,
 * capture_fast). */
Test(report, a_plugin_loaded_by_an_unhooked_call_keeps_its_own_sites) {
    expect_swap_sites("swap-unhooked");
}

/* A plugin closed and loaded again while another object holds its first
 * place runs at other addresses: its allocations, made from one line, are
 * one site, as heaptrack (by function and line) and valgrind (one loss
 * record) show them. They were a site for each load. */
Test(report, a_plugin_loaded_again_elsewhere_is_one_site) {
    ml_analysis_t *a = plugin_run("elsewhere", "another address: yes");
    expect_plugin_site(a, "plugin_alloc", "/fxplugins/libfxplugin.so", 6, 333);
    ml_analysis_free(a);
}

/* A converter glibc loads itself for iconv_open (no dlopen of the
 * program's announces it) and unloads before the exit: its allocation is
 * named from its file. It used to be recorded only at the next dlopen or at
 * the exit, and was gone by then: the frame stayed an address. */
Test(report, a_module_glibc_loads_itself_is_named) {
    const char *trace = h_tmp("iconv.mlt");
    record(trace, "fx_dlopen", "iconv");
    ml_analysis_t *a = analyse(trace, NULL);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    bool named = false;
    for (size_t i = 0; i < n; i++)
        for (uint32_t f = 0; f < s[i].nframes; f++) {
            const ml_frame_t *fr = &s[i].frames[f];
            if (fr->module && ends_with(fr->module, "/gconv/UTF-7.so")) {
                cr_expect(fr->function && !strcmp(fr->function, "gconv_init"), "%s in %s",
                          fr->function ? fr->function : "(none)", fr->module);
                named = true;
            }
            /* No frame is a bare address (one no module holds). */
            cr_expect(fr->module, "site %zu frame %u: %s", i, f, fr->function ? fr->function : "(none)");
        }
    cr_expect(named, "a frame in UTF-7.so");
    ml_analysis_free(a);
}

Test(report, alternating_frees_fragment_pages) {
    const char *alt = h_tmp("alt.mlt"), *con = h_tmp("con.mlt");
    record(alt, "fx_frag", "alternate");
    record(con, "fx_frag", "contiguous");
    ml_analysis_t *a = analyse(alt, NULL), *c = analyse(con, NULL);
    const ml_frag_t *fa = ml_analysis_frag(a, ML_MOMENT_END), *fc = ml_analysis_frag(c, ML_MOMENT_END);
    cr_expect_eq(fa->live_bytes, 2048 * 64);
    cr_expect_eq(fc->live_bytes, 2048 * 64);
    cr_expect_eq(fa->live_blocks, 2048);
    /* glibc puts 64-byte requests 80 bytes apart: alternation leaves 64 of
     * every 160 bytes used (40 %), a contiguous free 64 of 80 (80 %). */
    cr_expect_lt(fa->page_utilization, 0.45, "alternate: %f", fa->page_utilization);
    cr_expect_gt(fc->page_utilization, 0.75, "contiguous: %f", fc->page_utilization);
    cr_expect_lt(fa->page_utilization, 0.6 * fc->page_utilization);
    cr_expect_geq(fa->gaps, 2047);
    /* Internal waste from the usable sizes the recorder got from glibc: a
     * 64-byte request has 72 usable bytes. */
    cr_expect_eq(fa->usable_measured_blocks, 2048);
    cr_expect_eq(fa->internal_waste_bytes, 2048 * 8);
    cr_expect_gt(fa->external, 0.99);
    /* At the peak both had all 4096 blocks, the same layout. */
    const ml_frag_t *pa = ml_analysis_frag(a, ML_MOMENT_PEAK), *pc = ml_analysis_frag(c, ML_MOMENT_PEAK);
    cr_expect_eq(pa->live_blocks, 4096);
    cr_expect_float_eq(pa->page_utilization, pc->page_utilization, 0.02);
    /* The worst moment of the alternating run is as bad as its end. */
    cr_expect_leq(ml_analysis_frag(a, ML_MOMENT_WORST)->page_utilization, fa->page_utilization + 1e-9);
    ml_analysis_free(a);
    ml_analysis_free(c);
}

/* ------------------------------------------------------------------------- */
/* The command                                                               */
/* ------------------------------------------------------------------------- */

Test(report, json_matches_the_schema_and_folded_stacks) {
    const char *json = h_tmp("r.json"), *folded = h_tmp("r.folded");
    h_run_t r;
    const char *args[] = {leaks_trace(), "--json", json, "--folded", folded, NULL};
    cr_assert_eq(report(&r, args), 0, "%s", r.err);
    h_run_free(&r);
    validate("report-schema.json", json);
    char *doc = h_read_file(json);
    cr_assert(doc);
    cr_expect(strstr(doc, "\"schema_version\": 1"));
    cr_expect(strstr(doc, "\"definite_bytes\": 555"));
    cr_expect(strstr(doc, "\"indirect_bytes\": 444"));
    cr_expect(strstr(doc, "\"reachable_bytes\": 111"));
    cr_expect(strstr(doc, "\"reachability\": \"scanned\""));
    free(doc);
    char *f = h_read_file(folded);
    cr_assert(f);
    cr_expect(strstr(f, ";main;drop_block 222\n"), "%s", f);
    cr_expect(strstr(f, ";main;peak_holder 1048576\n"), "%s", f);
    free(f);
    /* Peak bytes as the folded metric. */
    const char *args2[] = {leaks_trace(), "--folded", folded, "--folded-metric", "leaked", NULL};
    cr_assert_eq(report(&r, args2), 0, "%s", r.err);
    h_run_free(&r);
    f = h_read_file(folded);
    cr_assert_not_null(f);
    cr_expect(strstr(f, ";main;make_chain 444\n"), "%s", f);
    cr_expect_null(strstr(f, "peak_holder"), "nothing of peak_holder leaked");
    free(f);
}

/* The JSON's flame tree is the call tree pruned (nodes of at least 0.1 % of
 * a metric, at most 5000): "flame_pruned" says how many of how many nodes
 * it kept, and the page says so under the graph (issue 12: on 262,144
 * distinct stacks the page drew 2,047 frames of a 1.4 M-node tree and said
 * nothing, so zooming in found nothing more). fx_scale stacks 12 1: 4,096
 * call paths of a binary recursion, each 1/4,096 of every metric. */
Test(report, json_says_what_the_flame_pruning_and_max_sites_left_out, .timeout = 120) {
    const char *trace = h_tmp("stacks12.mlt"), *json = h_tmp("stacks12.json");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_scale"), "stacks", "12", "1", NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    const char *args[] = {trace, "--no-advisor", "--json", json, NULL};
    cr_assert_eq(report(&r, args), 0, "%s", r.err);
    h_run_free(&r);
    validate("report-schema.json", json);
    ml_analysis_t *a = analyse(trace, NULL);
    const ml_calltree_node_t *t, *f;
    size_t n = ml_analysis_calltree(a, &t), nf = ml_analysis_flame(a, &f);
    cr_expect_gt(n, 8192, "4,096 paths of 12 levels: more nodes than leaves");
    cr_expect_lt(nf, n / 4);
    char want[256];
    snprintf(want, sizeof want,
             "\"flame_pruned\": {\"nodes\": %zu, \"kept\": %zu, \"max_nodes\": 5000, \"min_fraction\": 0.001}",
             n, nf);
    char *doc = h_read_file(json);
    cr_assert(doc);
    cr_expect(strstr(doc, want), "want %s", want);
    cr_expect_null(strstr(doc, "\"sites_cut\""), "every site written");
    free(doc);
    /* A report of several traces counts the tree of its merged sites: of a
     * folder holding this trace alone, the same counts (it left the key out
     * until 2026-12-08). */
    const char *dir = h_tmp("stacks12.d"), *merged = h_tmp("stacks12.d.json");
    char linked[4096];
    snprintf(linked, sizeof linked, "%s/stacks12.mlt", dir);
    cr_assert(mkdir(dir, 0700) == 0 || errno == EEXIST);
    (void)unlink(linked);
    cr_assert_eq(link(trace, linked), 0, "%s", strerror(errno));
    const char *many[] = {dir, "--json", merged, NULL};
    cr_assert_eq(report(&r, many), 0, "%s", r.err);
    h_run_free(&r);
    doc = h_read_file(merged);
    cr_assert(doc);
    cr_expect(strstr(doc, want), "merged report: want %s", want);
    free(doc);
    /* --max-sites 100 of the 4,096 paths' sites (and a few of the runtime):
     * sites_cut says how many of how many (the page said "showing 100 of 100
     * sites"). */
    size_t ns;
    ml_analysis_sites(a, &ns);
    cr_expect_gt(ns, 4096);
    const char *cut[] = {trace, "--no-advisor", "--max-sites", "100", "--json", json, NULL};
    cr_assert_eq(report(&r, cut), 0, "%s", r.err);
    h_run_free(&r);
    validate("report-schema.json", json);
    snprintf(want, sizeof want, "\"sites_cut\": {\"written\": 100, \"sites\": %zu, \"max_sites\": 100}", ns);
    doc = h_read_file(json);
    cr_assert(doc);
    cr_expect(strstr(doc, want), "want %s", want);
    free(doc);
    ml_analysis_free(a);
    /* A tree the pruning kept whole says so too: kept == nodes. */
    ml_analysis_t *b = analyse(leaks_trace(), NULL);
    n = ml_analysis_calltree(b, &t);
    cr_expect_eq(ml_analysis_flame(b, &f), n);
    snprintf(want, sizeof want, "\"flame_pruned\": {\"nodes\": %zu, \"kept\": %zu,", n, n);
    const char *args2[] = {leaks_trace(), "--no-advisor", "--json", json, NULL};
    cr_assert_eq(report(&r, args2), 0, "%s", r.err);
    h_run_free(&r);
    doc = h_read_file(json);
    cr_assert(doc);
    cr_expect(strstr(doc, want), "want %s", want);
    free(doc);
    ml_analysis_free(b);
}

Test(report, text_summary_names_functions_and_lines) {
    h_run_t r;
    const char *args[] = {leaks_trace(), NULL};
    cr_assert_eq(report(&r, args), 0, "%s", r.err);
    cr_expect(strstr(r.out, "peak_holder  fx_leaks.c:30"), "%s", r.out);
    cr_expect(strstr(r.out, "drop_block  fx_leaks.c:19"), "%s", r.out);
    cr_expect(strstr(r.out, "definite"), "%s", r.out);
    h_run_free(&r);
}

Test(report, gates_exit_3_over_and_0_under) {
    h_run_t r;
    /* Leaked = 555 definite + 444 indirect; the 111 reachable bytes are not. */
    const char *ok_leak[] = {leaks_trace(), "--fail-on-leak", "999", "--json", "/dev/null", NULL};
    cr_expect_eq(report(&r, ok_leak), 0, "%s", r.err);
    h_run_free(&r);
    const char *bad_leak[] = {leaks_trace(), "--fail-on-leak", "998", "--json", "/dev/null", NULL};
    cr_expect_eq(report(&r, bad_leak), 3);
    cr_expect(strstr(r.err, "leaks (definite + indirect + possible) 999 bytes") &&
                  strstr(r.err, "--fail-on-leak 998"),
              "%s", r.err);
    h_run_free(&r);
    char peak[32], under[32];
    snprintf(peak, sizeof peak, "%d", PEAK_EXPECTED);
    snprintf(under, sizeof under, "%d", PEAK_EXPECTED - 1);
    const char *ok_peak[] = {leaks_trace(), "--max-peak", peak, "--json", "/dev/null", NULL};
    cr_expect_eq(report(&r, ok_peak), 0, "%s", r.err);
    h_run_free(&r);
    const char *bad_peak[] = {leaks_trace(), "--max-peak", under, "--json", "/dev/null", NULL};
    cr_expect_eq(report(&r, bad_peak), 3);
    cr_expect(strstr(r.err, "peak heap"), "%s", r.err);
    /* One line per exceeded gate. */
    int lines = 0;
    for (const char *p = r.err; *p; p++) lines += *p == '\n';
    cr_expect_eq(lines, 1, "%s", r.err);
    h_run_free(&r);
    const char *kib[] = {leaks_trace(), "--max-peak", "2M", "--json", "/dev/null", NULL};
    cr_expect_eq(report(&r, kib), 0, "suffixes: %s", r.err);
    h_run_free(&r);
    const char *junk[] = {leaks_trace(), "--max-peak", "lots", NULL};
    cr_expect_eq(report(&r, junk), 2);
    h_run_free(&r);
}

Test(report, suppressions_take_known_leaks_out_of_the_gate) {
    const char *supp = h_tmp("supp.txt"), *json = h_tmp("supp.json");
    FILE *f = fopen(supp, "w");
    fputs("# known: the block drop_block drops\nleak:drop_block\n", f);
    fclose(f);
    h_run_t r;
    /* 333 definite + 444 indirect stay leaked once drop_block's 222 are suppressed. */
    const char *ok[] = {leaks_trace(), "--suppressions", supp, "--fail-on-leak", "777", "--json", json, NULL};
    cr_expect_eq(report(&r, ok), 0, "%s", r.err);
    h_run_free(&r);
    char *doc = h_read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    cr_expect(strstr(doc, "\"suppressed_bytes\": 222"), "%s", doc);
    cr_expect(strstr(doc, "\"pattern\": \"drop_block\", \"blocks\": 1, \"bytes\": 222"));
    free(doc);
    const char *bad[] = {leaks_trace(), "--suppressions", supp, "--fail-on-leak", "776", "--json", "/dev/null", NULL};
    cr_expect_eq(report(&r, bad), 3);
    h_run_free(&r);
    /* Anchors and globs, matched against the file too. */
    f = fopen(supp, "w");
    fputs("leak:^make_*$\nleak:fx_leaks.c\n", f);
    fclose(f);
    const char *all[] = {leaks_trace(), "--suppressions", supp, "--fail-on-leak", "0", "--json", "/dev/null", NULL};
    cr_expect_eq(report(&r, all), 0, "%s", r.err);
    h_run_free(&r);
    f = fopen(supp, "w");
    fputs("race:foo\n", f);
    fclose(f);
    const char *wrong[] = {leaks_trace(), "--suppressions", supp, NULL};
    cr_expect_eq(report(&r, wrong), 1);
    cr_expect(strstr(r.err, "line 1"), "%s", r.err);
    h_run_free(&r);
}

/* A suppressions file written for LeakSanitizer suppresses here what LSan
 * suppresses, and its per-pattern counts are LSan's "Suppressions used".
 * fx_suppmatch.c's numbers are LSan's (gcc -fsanitize=leak): its
 * TemplateMatch does not backtrack, so `beta$` leaves betabeta's 17 B
 * leaked, and `leak:$` matches nothing; a glob matched betabeta, and `$`
 * alone suppressed every leak, so the gate passed where LSan failed. The
 * counts go to the pattern that LSan credits: frames innermost first, so
 * `^main$` written first no longer takes the leaks `beta$` names. */
static void write_supp(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(report, suppressions_match_as_leaksanitizer_does) {
    const char *t = h_tmp("suppmatch.mlt"), *supp = h_tmp("suppmatch.supp"), *json = h_tmp("suppmatch.json");
    record(t, "fx_suppmatch", NULL);
    h_run_t r;
    write_supp(supp, "leak:beta$\n");
    /* 11 + 13 suppressed; 17 + 100 leaked. */
    const char *at[] = {t, "--suppressions", supp, "--fail-on-leak", "117", "--json", json, "-q", NULL};
    cr_expect_eq(report(&r, at), 0, "%s", r.err);
    h_run_free(&r);
    char *doc = h_read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    cr_expect(strstr(doc, "\"suppressed_bytes\": 24, \"suppressed_blocks\": 2, \"gate_bytes\": 117"), "%s", doc);
    cr_expect(strstr(doc, "{\"pattern\": \"beta$\", \"blocks\": 2, \"bytes\": 24}"), "%s", doc);
    free(doc);
    const char *under[] = {t, "--suppressions", supp, "--fail-on-leak", "116", "-q", NULL};
    cr_expect_eq(report(&r, under), 3, "betabeta's 17 B stay leaked: %s", r.err);
    cr_expect(strstr(r.err, "leaks (definite + indirect + possible) 117 bytes"), "%s", r.err);
    h_run_free(&r);

    write_supp(supp, "leak:$\n");
    const char *dollar[] = {t, "--suppressions", supp, "--fail-on-leak", "0", "--json", json, "-q", NULL};
    cr_expect_eq(report(&r, dollar), 3, "`leak:$` suppresses nothing: %s", r.err);
    cr_expect(strstr(r.err, "leaks (definite + indirect + possible) 141 bytes"), "%s", r.err);
    h_run_free(&r);
    doc = h_read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    cr_expect(strstr(doc, "{\"pattern\": \"$\", \"blocks\": 0, \"bytes\": 0}"), "%s", doc);
    free(doc);

    write_supp(supp, "# LSan credits the innermost frame's pattern\nleak:^main$\nleak:beta$\n");
    const char *order[] = {t, "--suppressions", supp, "--fail-on-leak", "0", "--json", json, "-q", NULL};
    cr_expect_eq(report(&r, order), 0, "%s", r.err);
    h_run_free(&r);
    doc = h_read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    cr_expect(strstr(doc, "{\"pattern\": \"^main$\", \"blocks\": 2, \"bytes\": 117}"), "%s", doc);
    cr_expect(strstr(doc, "{\"pattern\": \"beta$\", \"blocks\": 2, \"bytes\": 24}"), "%s", doc);
    free(doc);
}

Test(report, diff_per_site_deltas_and_gate) {
    const char *base = leaks_trace(), *cur = h_tmp("leaks3.mlt"), *json = h_tmp("diff.json");
    record(cur, "fx_leaks", "3");
    ml_analysis_t *a = analyse(base, NULL), *b = analyse(cur, NULL);
    ml_diff_t *d;
    cr_assert_eq(ml_diff_new(a, b, &d), 0);
    size_t n;
    const ml_diff_entry_t *e = ml_diff_entries(d, &n);
    const ml_diff_entry_t *drop = NULL;
    for (size_t i = 0; i < n; i++)
        if (e[i].cur && !strcmp(e[i].cur->frames[0].function, "drop_block")) drop = &e[i];
    cr_assert(drop && drop->base, "drop_block matched in both runs");
    cr_expect_eq(drop->b.leaked_bytes, 222);
    cr_expect_eq(drop->n.leaked_bytes, 666);
    cr_expect_eq(drop->b.alloc_calls, 1);
    cr_expect_eq(drop->n.alloc_calls, 3);
    cr_expect_eq(drop->n.peak_bytes - drop->b.peak_bytes, 444);
    cr_expect_eq(e[0].cur, drop->cur, "the biggest change comes first");
    ml_diff_free(d);
    ml_analysis_free(a);
    ml_analysis_free(b);

    h_run_t r;
    const char *argv[] = {h_bin("memlens"), "diff", base, cur, "--json", json, NULL};
    h_run(&r, argv);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "drop_block"), "%s", r.out);
    h_run_free(&r);
    validate("diff-schema.json", json);
    char *doc = h_read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    cr_expect(strstr(doc, "\"delta\": {\"peak_bytes\": 444, \"leaked_bytes\": 444, \"alloc_calls\": 2"), "%s", doc);
    free(doc);
    /* leaks (definite + indirect) 999 -> 1443 (+44.44 %), calls 5 -> 7 (+40 %): over 10 %. */
    const char *gate[] = {h_bin("memlens"), "diff", base, cur, "--fail-on-increase", "10", NULL};
    h_run(&r, gate);
    cr_expect_eq(r.status, 3, "%s", r.err);
    cr_expect(strstr(r.err, "leaked at exit grew 44.44% (999 B -> 1.4 KiB)"), "%s", r.err);
    h_run_free(&r);
    const char *same[] = {h_bin("memlens"), "diff", base, base, "--fail-on-increase", "0", NULL};
    h_run(&r, same);
    cr_expect_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    const char *loose[] = {h_bin("memlens"), "diff", base, cur, "--fail-on-increase", "100", NULL};
    h_run(&r, loose);
    cr_expect_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
}

/* --fail-on-increase PCT fails on growth of more than PCT %, not of PCT %
 * itself. fx_leaks makes 4 + n calls: 5 with n = 1, 6 with n = 2, +20.00 %
 * exactly; its leaks suppressed, the leaked bytes stay 0, and the peak
 * grows by 222 B of 1 MiB (0.02 %). */
Test(report, diff_gate_is_more_than_the_percentage) {
    const char *base = h_tmp("gate1.mlt"), *cur = h_tmp("gate2.mlt"), *supp = h_tmp("gate.supp");
    record(base, "fx_leaks", "1");
    record(cur, "fx_leaks", "2");
    FILE *f = fopen(supp, "w");
    cr_assert_not_null(f);
    fputs("leak:drop_block\nleak:make_chain\n", f);
    fclose(f);
    h_run_t r;
    const char *at[] = {h_bin("memlens"), "diff", base, cur, "--suppressions", supp,
                        "--fail-on-increase", "20", NULL};
    h_run(&r, at);
    cr_expect_eq(r.status, 0, "calls grew by exactly 20 %%: %s", r.err);
    cr_expect_null(strstr(r.err, "gate exceeded"), "%s", r.err);
    h_run_free(&r);
    const char *under[] = {h_bin("memlens"), "diff", base, cur, "--suppressions", supp,
                           "--fail-on-increase", "19.9", NULL};
    h_run(&r, under);
    cr_expect_eq(r.status, 3, "%s", r.err);
    cr_expect(strstr(r.err, "memlens: gate exceeded: allocation calls grew 20.00% (5 -> 6) > "
                            "--fail-on-increase 19.9%\n"),
              "%s", r.err);
    cr_expect_null(strstr(r.err, "peak heap"), "the peak grew 0.02 %%: %s", r.err);
    h_run_free(&r);
}

/* With --suppressions, a site's leaked bytes in the diff are counted as the
 * totals and the gate count them: not when the site is suppressed. fx_leaks
 * 1 -> 3 calls of drop_block (222 B each), suppressed: the total stays at
 * 777 B (make_chain's 333 + 444), and drop_block's row said +444 B leaked,
 * the table's largest leak change, beside a total that did not move. */
Test(report, diff_rows_count_no_suppressed_leak) {
    const char *cur = h_tmp("suppdiff3.mlt"), *supp = h_tmp("suppdiff.supp"), *json = h_tmp("suppdiff.json");
    record(cur, "fx_leaks", "3");
    FILE *f = fopen(supp, "w");
    cr_assert_not_null(f);
    fputs("leak:drop_block\n", f);
    fclose(f);
    const char *argv[] = {h_bin("memlens"), "diff", leaks_trace(), cur, "--suppressions", supp,
                          "--json", json, NULL};
    char *doc = diff_json(argv, json);
    cr_expect(strstr(doc, "\"leaked_bytes\": {\"base\": 777, \"new\": 777, \"delta\": 0"), "%s", doc);
    const char *row = strstr(doc, "\"key\": \"drop_block;main;");
    cr_assert_not_null(row, "%s", doc);
    cr_expect(strstr(row, "\"delta\": {\"peak_bytes\": 444, \"leaked_bytes\": 0, \"alloc_calls\": 2"), "%s", row);
    free(doc);
    const char *text[] = {h_bin("memlens"), "diff", leaks_trace(), cur, "--suppressions", supp, NULL};
    h_run_t r;
    h_run(&r, text);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "leaked: definite + indirect + possible, not suppressed):"), "%s", r.out);
    cr_expect(strstr(r.out, "      +444 B         +0 B         +2  changed  drop_block"), "%s", r.out);
    h_run_free(&r);
}

/* Code in no module (fx_jit.c's stub, as a JIT makes it) lies at another
 * address in every run: two runs of the same program must still match
 * their sites, the stub's frame keyed as "[?]" rather than by its address,
 * which made every such site "gone" in one run and "new" in the other. */
Test(report, diff_matches_sites_through_code_in_no_module) {
    const char *j1 = h_tmp("jit1.mlt"), *j2 = h_tmp("jit2.mlt");
    record(j1, "fx_jit", NULL);
    record(j2, "fx_jit", NULL);
    ml_analysis_t *a = analyse(j1, NULL), *b = analyse(j2, NULL);
    ml_diff_t *d;
    cr_assert_eq(ml_diff_new(a, b, &d), 0);
    size_t n, stub = 0;
    const ml_diff_entry_t *e = ml_diff_entries(d, &n);
    for (size_t i = 0; i < n; i++) {
        cr_expect(e[i].base && e[i].cur, "entry %zu matched in both runs", i);
        const ml_site_t *s = e[i].cur ? e[i].cur : e[i].base;
        if (s->nframes >= 2 && !s->frames[0].module && (!strcmp(s->frames[1].function, "worker") ||
                                                         !strcmp(s->frames[1].function, "main"))) {
            stub++;
            cr_expect_eq(e[i].b.alloc_calls, e[i].n.alloc_calls);
            cr_expect_eq(e[i].b.alloc_calls, !strcmp(s->frames[1].function, "worker") ? 4 : 1);
        }
    }
    cr_expect_eq(stub, 2, "the stub's two sites (worker's and main's)");
    ml_diff_free(d);
    ml_analysis_free(a);
    ml_analysis_free(b);
    /* The threads' blocks overlap differently from run to run, so peaks
     * may change; no site may be new or gone. */
    h_run_t r;
    const char *json = h_tmp("jitdiff.json");
    const char *argv[] = {h_bin("memlens"), "diff", j1, j2, "--json", json, NULL};
    h_run(&r, argv);
    cr_expect_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    char *doc = h_read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    cr_expect(strstr(doc, "\"status\": \"same\"") || strstr(doc, "\"status\": \"changed\""), "%s", doc);
    cr_expect(!strstr(doc, "\"status\": \"new\"") && !strstr(doc, "\"status\": \"gone\""), "%s", doc);
    free(doc);
}

/* A function name with ';' in it (fx_diffkey.c: the symbol "leaf;mid")
 * must not make two different stacks one site: "leaf;mid" <- main and leaf
 * <- mid <- main joined by ';' read the same, and the diff of a run of each
 * said "same" (0 change) where one site is gone and the other new. */
Test(report, diff_keys_keep_a_semicolon_in_a_name_apart) {
    const char *k1 = h_tmp("key1.mlt"), *k2 = h_tmp("key2.mlt"), *json = h_tmp("keydiff.json");
    record(k1, "fx_diffkey", NULL);
    record(k2, "fx_diffkey", "split");
    ml_analysis_t *a = analyse(k1, NULL), *b = analyse(k2, NULL);
    ml_diff_t *d;
    cr_assert_eq(ml_diff_new(a, b, &d), 0);
    size_t n, gone = 0, added = 0;
    const ml_diff_entry_t *e = ml_diff_entries(d, &n);
    for (size_t i = 0; i < n; i++) {
        const ml_site_t *s = e[i].cur ? e[i].cur : e[i].base;
        if (strcmp(s->frames[0].function, "leaf;mid") && strcmp(s->frames[0].function, "leaf")) continue;
        cr_expect(!e[i].base != !e[i].cur, "%s: in one run only", s->frames[0].function);
        if (!strcmp(s->frames[0].function, "leaf;mid")) {
            gone++;
            cr_expect(e[i].base && e[i].b.bytes_allocated == 100 && e[i].n.bytes_allocated == 0);
        } else {
            added++;
            cr_expect(e[i].cur && e[i].n.bytes_allocated == 100 && e[i].b.bytes_allocated == 0);
        }
    }
    cr_expect_eq(gone, 1, "\"leaf;mid\" <- main is gone");
    cr_expect_eq(added, 1, "leaf <- mid <- main is new");
    ml_diff_free(d);
    ml_analysis_free(a);
    ml_analysis_free(b);
    const char *argv[] = {h_bin("memlens"), "diff", k1, k2, "--json", json, NULL};
    char *doc = diff_json(argv, json);
    cr_expect(strstr(doc, "\"status\": \"gone\", \"key\": \"leaf\\\\;mid;main;"), "%s", doc);
    cr_expect(strstr(doc, "\"status\": \"new\", \"key\": \"leaf;mid;main;"), "%s", doc);
    free(doc);
}

/* Two different programs (fx_leaks and fx_frag): the diff runs with its
 * usual exit status, says so on stderr, and its JSON carries both
 * executables, "same_program": false and the same warning. Two runs of one
 * program (fx_leaks 1 and 3) say nothing and have "same_program": true. */
Test(report, diff_of_two_different_programs_warns) {
    const char *base = leaks_trace(), *frag = h_tmp("frag_diff.mlt"), *json = h_tmp("progdiff.json");
    record(frag, "fx_frag", "alternate");
    char leaks_exe[4096], frag_exe[4096];
    cr_assert_not_null(realpath(h_bin("fx_leaks"), leaks_exe));
    cr_assert_not_null(realpath(h_bin("fx_frag"), frag_exe));
    char sentence[9000], line[9100], jline[9200];
    snprintf(sentence, sizeof sentence,
             "BASE and NEW are traces of different programs (%s and %s): their sites are matched by "
             "function names only, and the totals compare two programs, not two runs of one",
             leaks_exe, frag_exe);
    snprintf(line, sizeof line, "memlens: warning: %s\n", sentence);
    h_run_t r;
    const char *argv[] = {h_bin("memlens"), "diff", "--no-symbols", base, frag, "--json", json, NULL};
    h_run(&r, argv);
    cr_expect_eq(r.status, 0, "the exit status is unchanged: %s", r.err);
    cr_expect_str_eq(r.err, line, "the warning, and nothing else, on stderr");
    cr_expect(strstr(r.out, "memlens diff: "), "the diff is still printed: %s", r.out);
    h_run_free(&r);
    validate("diff-schema.json", json);
    char *doc = h_read_file(json);
    cr_assert_not_null(doc);
    snprintf(jline, sizeof jline, "\"exe\": \"%s\"", leaks_exe);
    cr_expect(strstr(doc, jline), "base.exe: %s", doc);
    snprintf(jline, sizeof jline, "\"exe\": \"%s\"", frag_exe);
    cr_expect(strstr(doc, jline), "new.exe: %s", doc);
    cr_expect(strstr(doc, "\"same_program\": false"), "%s", doc);
    snprintf(jline, sizeof jline, "\"warnings\": [\"%s\"]", sentence);
    cr_expect(strstr(doc, jline), "want %s in %s", jline, doc);
    free(doc);
    /* The gate judges as before: 5 -> 4096 allocation calls is over 10 %. */
    const char *gate[] = {h_bin("memlens"), "diff", "--no-symbols", base, frag, "--fail-on-increase", "10", NULL};
    h_run(&r, gate);
    cr_expect_eq(r.status, 3, "%s", r.err);
    cr_expect(strstr(r.err, line), "%s", r.err);
    snprintf(jline, sizeof jline, "%smemlens: gate exceeded: allocation calls grew 81820.00%% (5 -> 4096) > "
             "--fail-on-increase 10%%\n", line);
    cr_expect_str_eq(r.err, jline);
    h_run_free(&r);
    /* -q: no warnings on stderr; the JSON still says it. */
    const char *quiet[] = {h_bin("memlens"), "diff", "-q", "--no-symbols", base, frag, "--json", "-", NULL};
    h_run(&r, quiet);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    cr_expect(strstr(r.out, "\"same_program\": false"), "%s", r.out);
    h_run_free(&r);

    /* One program twice: nothing said. */
    const char *cur = h_tmp("leaks3_same.mlt"), *sjson = h_tmp("samediff.json");
    record(cur, "fx_leaks", "3");
    const char *same[] = {h_bin("memlens"), "diff", "--no-symbols", base, cur, "--json", sjson, NULL};
    h_run(&r, same);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "", "no warning for one program");
    h_run_free(&r);
    validate("diff-schema.json", sjson);
    doc = h_read_file(sjson);
    cr_assert_not_null(doc);
    cr_expect(strstr(doc, "\"same_program\": true"), "%s", doc);
    cr_expect(strstr(doc, "\"warnings\": []"), "%s", doc);
    free(doc);
}

/* GPU memory in the diff: fx_gpu_events twice, the second with
 * gpu_leaky_site's cudaMalloc leak 8 MiB instead of 5 (`leak 8`), so device
 * 0's peak, leaked bytes and bytes allocated grow by exactly 3 MiB, its calls
 * do not change, and device 1 does not change at all. */
#define GPU_MiB (1024ull * 1024)
#define GPU_D0_PEAK (15 * GPU_MiB + 102400 + 16384) /* tests/e2e/gpu_expect.h, GX_PEAK0 */
#define GPU_D0_LEAK (5 * GPU_MiB + 102400)          /* the leak and the pitched block */
/* device 1, 4, 1 MiB, 2 x 64 KiB pinned, 4 KiB registered, 1 MiB async,
 * 2 MiB pool, 2 MiB VMM physical, a 16 KiB array, the 5 MiB leak */
#define GPU_D0_BYTES (15 * GPU_MiB + 102400 + 131072 + 4096 + 16384)
#define GPU_D1 (3 * GPU_MiB) /* device 1: held when its context died */

static void record_gpu(const char *trace, const char *leak_mib) {
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_gpu_events"),
                          leak_mib ? "leak" : NULL, leak_mib, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "memlens run fx_gpu_events: status %d: %s", r.status, r.err);
    h_run_free(&r);
}

static int diff_run(h_run_t *r, const char *base, const char *cur, const char *a1, const char *a2,
                    const char *a3, const char *a4) {
    const char *argv[] = {h_bin("memlens"), "diff", base, cur, a1, a2, a3, a4, NULL};
    h_run(r, argv);
    return r->status;
}

Test(report, diff_gpu_devices_sites_and_gate) {
    const char *base = h_tmp("gpu5.mlt"), *cur = h_tmp("gpu8.mlt"), *json = h_tmp("gpudiff.json");
    record_gpu(base, NULL);
    record_gpu(cur, "8");

    /* The analysis: both devices, device 0 up by 3 MiB, the site that
     * changed first and named by its caller. */
    ml_analysis_t *a = analyse(base, NULL), *b = analyse(cur, NULL);
    ml_diff_t *d;
    cr_assert_eq(ml_diff_new(a, b, &d), 0);
    size_t nd, ne;
    const ml_diff_gpu_device_t *g = ml_diff_gpu_devices(d, &nd);
    cr_assert_eq(nd, 2, "devices: %zu", nd);
    cr_expect_eq(g[0].device, 0);
    cr_expect_eq(g[0].b.peak_bytes, GPU_D0_PEAK);
    cr_expect_eq(g[0].n.peak_bytes, GPU_D0_PEAK + 3 * GPU_MiB);
    cr_expect_eq(g[0].b.leaked_bytes, GPU_D0_LEAK);
    cr_expect_eq(g[0].n.leaked_bytes, GPU_D0_LEAK + 3 * GPU_MiB);
    cr_expect_eq(g[0].b.alloc_calls, 13);
    cr_expect_eq(g[0].n.alloc_calls, 13);
    cr_expect_eq(g[1].device, 1);
    cr_expect_eq(g[1].n.peak_bytes, GPU_D1);
    cr_expect_eq(memcmp(&g[1].b, &g[1].n, sizeof g[1].b), 0, "device 1 did not change");
    const ml_diff_gpu_entry_t *e = ml_diff_gpu_entries(d, &ne);
    cr_assert_geq(ne, 1);
    cr_expect(strncmp(e[0].key, "ev;gpu_leaky_site;main;", 23) == 0, "first GPU site: %s", e[0].key);
    cr_expect(e[0].in_base && e[0].in_cur, "matched in both runs");
    cr_expect_eq(e[0].device, 0);
    cr_expect_eq(e[0].b.peak_bytes, 5 * GPU_MiB);
    cr_expect_eq(e[0].n.peak_bytes, 8 * GPU_MiB);
    cr_expect_eq(e[0].n.leaked_bytes - e[0].b.leaked_bytes, 3 * GPU_MiB);
    for (size_t i = 1; i < ne; i++)
        cr_expect_eq(memcmp(&e[i].b, &e[i].n, sizeof e[i].b), 0, "only gpu_leaky_site changed: %s", e[i].key);
    ml_diff_free(d);
    ml_analysis_free(a);
    ml_analysis_free(b);

    /* The JSON, against the schema, with the exact device totals. */
    h_run_t r;
    cr_expect_eq(diff_run(&r, base, cur, "--json", json, NULL, NULL), 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    /* The text: each device's totals in KiB/MiB under a header (15.1 MiB is
     * GPU_D0_PEAK, 5.1 MiB GPU_D0_LEAK, 15.2 MiB GPU_D0_BYTES), then the
     * site, named by its caller. */
    char want[1024];
    snprintf(want, sizeof want,
             "\nGPU memory (device bytes; leaked: left allocated at exit):\n  device 0:\n"
             "                             base             new  change\n"
             "    peak                 15.1 MiB ->     18.1 MiB  +19.9%%\n"
             "    leaked                5.1 MiB ->      8.1 MiB  +58.9%%\n"
             "    allocation calls           13 ->           13  +0.0%%\n"
             "    bytes allocated      15.2 MiB ->     18.2 MiB  +19.7%%\n"
             "  device 1:\n"
             "                             base             new  change\n"
             "    peak                  3.0 MiB ->      3.0 MiB  +0.0%%\n");
    cr_expect(strstr(r.out, want), "want:%s\ngot:\n%s", want, r.out);
    const char *sites = strstr(r.out, "\nGPU sites that changed most (change from base to new):\n"
                                      "        peak       leaked      calls  status   site\n"
                                      "    +3.0 MiB     +3.0 MiB         +0  changed  device 0  ev  fx_gpu_events.c:");
    cr_expect(sites, "%s", r.out);
    if (sites) {
        const char *nl = strstr(sites, "  <- gpu_leaky_site\n");
        cr_expect(nl, "%s", sites);
        if (nl) cr_expect_str_eq(nl, "  <- gpu_leaky_site\n", "one GPU site changed, and it is the last line");
    }
    h_run_free(&r);
    validate("diff-schema.json", json);
    char *doc = h_read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    snprintf(want, sizeof want,
             "\n\"gpu\": {\"devices\": [\n  {\"device\": 0, "
             "\"base\": {\"peak_bytes\": %llu, \"leaked_bytes\": %llu, \"alloc_calls\": 13, \"bytes_allocated\": %llu}, "
             "\"new\": {\"peak_bytes\": %llu, \"leaked_bytes\": %llu, \"alloc_calls\": 13, \"bytes_allocated\": %llu}, "
             "\"delta\": {\"peak_bytes\": 3145728, \"leaked_bytes\": 3145728, \"alloc_calls\": 0, \"bytes_allocated\": 3145728}},\n"
             "  {\"device\": 1, \"base\": {\"peak_bytes\": 3145728, \"leaked_bytes\": 3145728, \"alloc_calls\": 1, "
             "\"bytes_allocated\": 3145728}, \"new\": {\"peak_bytes\": 3145728, \"leaked_bytes\": 3145728, \"alloc_calls\": 1, "
             "\"bytes_allocated\": 3145728}, \"delta\": {\"peak_bytes\": 0, \"leaked_bytes\": 0, \"alloc_calls\": 0, "
             "\"bytes_allocated\": 0}}],\n\"sites\": [\n  {\"status\": \"changed\", \"device\": 0, \"key\": \"ev;gpu_leaky_site;main;",
             GPU_D0_PEAK, GPU_D0_LEAK, GPU_D0_BYTES, GPU_D0_PEAK + 3 * GPU_MiB, GPU_D0_LEAK + 3 * GPU_MiB,
             GPU_D0_BYTES + 3 * GPU_MiB);
    const char *gj = strstr(doc, want);
    cr_expect(gj, "want:%s\ngot:\n%s", want, doc);
    if (gj) {
        const char *site_end = strstr(gj, "}\n");
        const char *sd = strstr(gj, "\"base\": {\"peak_bytes\": 5242880, \"leaked_bytes\": 5242880, \"alloc_calls\": 1, "
                                    "\"bytes_allocated\": 5242880}, \"new\": {\"peak_bytes\": 8388608, \"leaked_bytes\": "
                                    "8388608, \"alloc_calls\": 1, \"bytes_allocated\": 8388608}, \"delta\": {\"peak_bytes\": "
                                    "3145728, \"leaked_bytes\": 3145728, \"alloc_calls\": 0, \"bytes_allocated\": 3145728}}");
        cr_expect(sd && (!site_end || sd < site_end), "gpu_leaky_site's metrics:\n%s", gj);
        cr_expect(strstr(gj, "\"frames\": [{\"function\": \"ev\""), "%s", gj);
    }
    cr_expect(strstr(doc, "\"gpu_exceeded\": []"), "no gate, nothing exceeded");
    free(doc);

    /* The gate: device 0's peak grew 19.85 %, the GPU leaks of both devices
     * 8 MiB + 100 KiB -> 11 MiB + 100 KiB, 37.05 %; the heap not at all. */
    cr_expect_eq(diff_run(&r, base, cur, "--fail-on-increase", "19", NULL, NULL), 3, "%s", r.err);
    cr_expect(strstr(r.err, "memlens: gate exceeded: GPU device 0 peak grew 19.85% (15.1 MiB -> 18.1 MiB) > "
                            "--fail-on-increase 19%\n"), "%s", r.err);
    cr_expect(strstr(r.err, "memlens: gate exceeded: GPU leaked (all devices) grew 37.05% (8.1 MiB -> "
                            "11.1 MiB) > --fail-on-increase 19%\n"), "%s", r.err);
    cr_expect(!strstr(r.err, "device 1"), "%s", r.err);
    h_run_free(&r);
    cr_expect_eq(diff_run(&r, base, cur, "--fail-on-increase", "20", "--json", json), 3, "%s", r.err);
    cr_expect(!strstr(r.err, "GPU device 0 peak"), "the peak grew less than 20 %%: %s", r.err);
    cr_expect(strstr(r.err, "GPU leaked (all devices) grew 37.05%"), "%s", r.err);
    h_run_free(&r);
    doc = h_read_file(json);
    cr_assert_not_null(doc);
    cr_expect(strstr(doc, "\"exceeded\": [], \"gpu_exceeded\": [{\"metric\": \"leaked_bytes\", \"device\": null}], \"incomplete\": []}"),
              "%s", doc);
    free(doc);
    validate("diff-schema.json", json);
    cr_expect_eq(diff_run(&r, base, cur, "--fail-on-increase", "38", NULL, NULL), 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    h_run_free(&r);
    /* The other way round nothing grew on the GPU: deltas are new - base. */
    cr_expect_eq(diff_run(&r, cur, base, "--fail-on-increase", "0", NULL, NULL), 0, "%s", r.err);
    cr_expect(strstr(r.out, "\n    -3.0 MiB     -3.0 MiB         +0  changed  device 0  ev  "), "%s", r.out);
    h_run_free(&r);
}

/* Two CPU-only traces: "gpu" is there and empty, the text has no GPU part. */
Test(report, diff_cpu_only_has_no_gpu) {
    const char *base = leaks_trace(), *cur = h_tmp("leaks3.mlt"), *json = h_tmp("cpudiff.json");
    record(cur, "fx_leaks", "3");
    h_run_t r;
    cr_expect_eq(diff_run(&r, base, cur, "--json", json, NULL, NULL), 0, "%s", r.err);
    cr_expect(strstr(r.out, "drop_block"), "%s", r.out);
    cr_expect(!strstr(r.out, "GPU"), "%s", r.out);
    h_run_free(&r);
    validate("diff-schema.json", json);
    char *doc = h_read_file(json);
    cr_assert_not_null(doc);
    cr_expect(strstr(doc, "]},\n\"sites\": ["), "%s", doc);
    cr_expect(ends_with(doc, "\n\"gpu\": {\"devices\": [],\n\"sites\": []}}\n"), "%s", doc);
    cr_expect(strstr(doc, "\"gpu_exceeded\": []"), "%s", doc);
    free(doc);
    /* The heap gate alone decides, as before. */
    cr_expect_eq(diff_run(&r, base, cur, "--fail-on-increase", "10", NULL, NULL), 3, "%s", r.err);
    cr_expect(!strstr(r.err, "GPU"), "%s", r.err);
    h_run_free(&r);
}

/* ------------------------------------------------------------------------- */
/* Bad input, bad output                                                     */
/* ------------------------------------------------------------------------- */

static size_t file_size(const char *p) {
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    return (size_t)st.st_size;
}

static void copy_prefix(const char *from, const char *to, size_t len) {
    char *buf = malloc(len + 1);
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(in >= 0 && out >= 0);
    cr_assert_eq(read(in, buf, len), (ssize_t)len);
    cr_assert_eq(write(out, buf, len), (ssize_t)len);
    close(in);
    close(out);
    free(buf);
}

Test(report, truncated_trace_reports_what_is_there, .timeout = 120) {
    /* Enough records for several chunks; cut inside the second. */
    const char *full = h_tmp("big.mlt"), *cut = h_tmp("cut.mlt"), *json = h_tmp("cut.json");
    record(full, "fx_leaks", "600000");
    int fd = open(full, O_RDONLY);
    uint8_t h[32];
    cr_assert_eq(read(fd, h, 32), 32);
    close(fd);
    uint32_t comp;
    memcpy(&comp, h + 20, 4);
    size_t first_end = 16 + 16 + comp;
    cr_assert_lt(first_end + 100, file_size(full), "more than one chunk");
    copy_prefix(full, cut, first_end + 50);
    h_run_t r;
    const char *args[] = {cut, "--json", json, NULL};
    cr_expect_eq(report(&r, args), 0, "%s", r.err);
    cr_expect(strstr(r.err, "truncated"), "a warning: %s", r.err);
    h_run_free(&r);
    validate("report-schema.json", json);
    char *doc = h_read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    cr_expect(strstr(doc, "\"truncated\": true"));
    cr_expect(strstr(doc, "\"complete\": false"));
    cr_expect(strstr(doc, "drop_block"), "the first chunk's sites are there");
    free(doc);
}

/* `diff --fail-on-increase` judges only what the traces hold, as report's
 * gates do: a NEW trace cut inside its first chunk (memlens killed before it
 * wrote one) holds no records, so nothing in it grew, and the gate passed
 * (exit 0) although the run was never seen. */
Test(report, diff_gate_fails_on_an_incomplete_trace) {
    const char *cut = h_tmp("diffcut.mlt"), *json = h_tmp("diffcut.json");
    copy_prefix(leaks_trace(), cut, 40);
    h_run_t r;
    const char *gate[] = {h_bin("memlens"), "diff", leaks_trace(), cut, "--fail-on-increase", "0",
                          "--json", json, "-q", NULL};
    h_run(&r, gate);
    cr_expect_eq(r.status, 3, "%s", r.err);
    cr_expect(strstr(r.err, "memlens: gate failed: "), "%s", r.err);
    cr_expect(strstr(r.err, "diffcut.mlt (NEW) is incomplete: it holds no records"), "%s", r.err);
    cr_expect_null(strstr(r.err, "gate exceeded"), "nothing grew: %s", r.err);
    h_run_free(&r);
    validate("diff-schema.json", json);
    char *doc = h_read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    cr_expect(strstr(doc, "\"exceeded\": [], \"gpu_exceeded\": [], \"incomplete\": [{\"trace\": \"new\", "
                          "\"why\": \"it holds no records"),
              "%s", doc);
    free(doc);
    /* --allow-incomplete: judged as it is (every total fell), with a warning. */
    const char *allow[] = {h_bin("memlens"), "diff", leaks_trace(), cut, "--fail-on-increase", "0",
                           "--allow-incomplete", NULL};
    h_run(&r, allow);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "(NEW) is incomplete (it holds no records"), "%s", r.err);
    h_run_free(&r);
    /* Without the gate the diff is written and exits 0, as before. */
    const char *plain[] = {h_bin("memlens"), "diff", leaks_trace(), cut, "-q", NULL};
    h_run(&r, plain);
    cr_expect_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
}

Test(report, corrupt_foreign_and_future_traces_fail_cleanly) {
    const char *bad = h_tmp("bad.mlt"), *out = h_tmp("keep.json");
    size_t n = file_size(leaks_trace());
    copy_prefix(leaks_trace(), bad, n);
    /* A flipped byte inside the first chunk's compressed data. */
    int fd = open(bad, O_RDWR);
    uint8_t b;
    cr_assert_eq(pread(fd, &b, 1, 40), 1);
    b ^= 0x5a;
    cr_assert_eq(pwrite(fd, &b, 1, 40), 1);
    close(fd);
    FILE *f = fopen(out, "w");
    fputs("OLD", f);
    fclose(f);
    h_run_t r;
    const char *args[] = {bad, "--json", out, NULL};
    cr_expect_eq(report(&r, args), 1);
    cr_expect(strstr(r.err, "corrupt"), "%s", r.err);
    h_run_free(&r);
    char *kept = h_read_file(out);
    cr_assert_not_null(kept);
    cr_expect_str_eq(kept, "OLD", "a failed report leaves the old output alone");
    free(kept);

    f = fopen(bad, "w");
    fputs("just some text\n", f);
    fclose(f);
    const char *args2[] = {bad, NULL};
    cr_expect_eq(report(&r, args2), 1);
    cr_expect(strstr(r.err, "not a memlens trace"), "%s", r.err);
    h_run_free(&r);

    copy_prefix(leaks_trace(), bad, n);
    fd = open(bad, O_RDWR);
    uint8_t v[2] = {7, 0};
    cr_assert_eq(pwrite(fd, v, 2, 8), 2);
    close(fd);
    cr_expect_eq(report(&r, args2), 1);
    cr_expect(strstr(r.err, "version 7."), "%s", r.err);
    h_run_free(&r);

    const char *missing[] = {h_tmp("nope.mlt"), NULL};
    cr_expect_eq(report(&r, missing), 1);
    h_run_free(&r);
}

Test(report, unwritable_output_is_an_error_and_leaves_nothing) {
    h_run_t r;
    const char *json = h_tmp("notadir/x.json");
    FILE *f = fopen(h_tmp("notadir"), "w");
    fclose(f);
    const char *args[] = {leaks_trace(), "--json", json, NULL};
    cr_expect_eq(report(&r, args), 1);
    cr_expect(strstr(r.err, "cannot write"), "%s", r.err);
    h_run_free(&r);
    const char *full[] = {leaks_trace(), "--json", "/dev/full", NULL};
    cr_expect_eq(report(&r, full), 1, "a write error is noticed");
    cr_expect(strstr(r.err, "cannot write"), "%s", r.err);
    h_run_free(&r);
    const char *folded[] = {leaks_trace(), "--folded", "/nonexistent-dir/f.txt", NULL};
    cr_expect_eq(report(&r, folded), 1);
    h_run_free(&r);
    /* No temporary file is left beside a successful output either. */
    const char *ok = h_tmp("ok.json");
    const char *good[] = {leaks_trace(), "--json", ok, NULL};
    cr_expect_eq(report(&r, good), 0, "%s", r.err);
    h_run_free(&r);
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "ls %s.tmp.* 2>/dev/null | wc -l", ok);
    FILE *p = popen(pattern, "r");
    int count = -1;
    cr_assert_eq(fscanf(p, "%d", &count), 1);
    pclose(p);
    cr_expect_eq(count, 0);
}

Test(report, html_page_is_written) {
    const char *html = h_tmp("r.html");
    h_run_t r;
    const char *args[] = {leaks_trace(), "--html", html, NULL};
    cr_expect_eq(report(&r, args), 0, "%s", r.err);
    h_run_free(&r);
    char *page = h_read_file(html);
    cr_assert(page);
    cr_expect(strstr(page, "peak_holder"), "the report's data is in the page");
    free(page);
}

static void copy_file(const char *from, const char *to) {
    copy_prefix(from, to, file_size(from));
    cr_assert_eq(chmod(to, 0755), 0);
}

/* The first site that allocated `bytes` in all. */
static const ml_site_t *site_allocating(const ml_analysis_t *a, uint64_t bytes) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    for (size_t i = 0; i < n; i++)
        if (s[i].nframes && s[i].bytes_allocated == bytes) return &s[i];
    return NULL;
}

/* Copies fixture `fx` to prog and records it into trace. */
static void record_a_copy(const char *fx, const char *prog, const char *trace) {
    copy_file(h_bin(fx), prog);
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", prog, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
}

/* A program without a build-id rebuilt after the recording: nothing in the
 * file to compare with the trace, so its modification time says it is not
 * the program that ran (docs/analysis.md). Before, fx_nobid_b's code named
 * the recorded return addresses: main's allocation read as nobid_other, a
 * function fx_nobid does not have, with no warning. */
Test(report, rebuilt_binary_without_build_id_is_a_warning_not_wrong_names) {
    const char *prog = h_tmp("nobid"), *trace = h_tmp("nobid.mlt");
    record_a_copy("fx_nobid", prog, trace);
    h_run_t r;
    /* As recorded: the 4321 bytes are nobid_keep's, at its line. */
    ml_analysis_t *a = analyse(trace, NULL);
    const ml_site_t *s = site_allocating(a, 4321);
    cr_assert(s);
    cr_expect_str_eq(s->frames[0].function, "nobid_keep");
    cr_expect_eq(s->frames[0].line, 23);
    ml_analysis_free(a);
    /* Rebuilt in place a second later (another layout, no build-id either). */
    sleep(1);
    unlink(prog);
    copy_file(h_bin("fx_nobid_b"), prog);
    const char *args[] = {trace, "--no-advisor", "--json", "/dev/null", NULL};
    cr_expect_eq(report(&r, args), 0, "%s", r.err);
    cr_expect(strstr(r.err, "nobid has no build-id and was modified after the trace was recorded"),
              "%s", r.err);
    h_run_free(&r);
    a = analyse(trace, NULL);
    cr_expect_null(site_of(a, "nobid_other", UINT64_MAX), "no names from the new build");
    cr_expect_null(site_of(a, "nobid_keep", UINT64_MAX));
    cr_expect_null(site_of(a, "main", UINT64_MAX));
    s = site_allocating(a, 4321);
    cr_assert(s);
    cr_expect(!strncmp(s->frames[0].function, "[nobid+0x", 9), "%s", s->frames[0].function);
    cr_expect_null(s->frames[0].file);
    /* The other modules still resolve: libc's frame below main. */
    bool libc = false;
    for (uint32_t i = 0; i < s->nframes; i++)
        if (s->frames[i].module && ends_with(s->frames[i].module, "/libc.so.6") && s->frames[i].file)
            libc = true;
    cr_expect(libc, "libc's frames keep their names");
    ml_analysis_free(a);
}

Test(report, rebuilt_binary_is_a_warning_not_wrong_names) {
    const char *prog = h_tmp("prog"), *trace = h_tmp("prog.mlt");
    record_a_copy("fx_leaks", prog, trace);
    h_run_t r;
    /* The program is replaced by another build (another build-id). */
    unlink(prog);
    copy_file(h_bin("fx_frag"), prog);
    const char *args[] = {trace, "--json", "/dev/null", NULL};
    cr_expect_eq(report(&r, args), 0, "%s", r.err);
    cr_expect(strstr(r.err, "build-id differs"), "%s", r.err);
    h_run_free(&r);
    ml_analysis_t *a = analyse(trace, NULL);
    cr_expect_null(site_of(a, "drop_block", UINT64_MAX), "no names from the wrong file");
    cr_expect_null(site_of(a, "main", UINT64_MAX));
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    bool addr = false;
    for (size_t i = 0; i < n; i++)
        if (s[i].nframes && !strncmp(s[i].frames[0].function, "[prog+0x", 8)) addr = true;
    cr_expect(addr, "its frames are shown as module+offset");
    /* The other modules still resolve. */
    const ml_totals_t *t = ml_analysis_totals(a);
    cr_expect_eq(t->peak_bytes, PEAK_EXPECTED);
    ml_analysis_free(a);
}
