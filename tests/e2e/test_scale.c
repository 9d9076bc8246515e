/* test_scale.c - the recorder at scale (issue 12): hundreds of threads on
 * one ring, thousands of process images in one session. Behaviour only:
 * exact counts, nothing lost, every image traced; never timing. */
#define _GNU_SOURCE
#include "harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 200
#define PAIRS 2000
#define KEEP 3
/* Process images of the follow-fork test; ML_TEST_SCALE_IMAGES overrides it
 * when trying things out. 17,000: past the first 16,384 slots of the process
 * table, whose pages the collector allocates in /dev/shm ahead of the images
 * (collector/session.c), so that the table grows once during the run. */
static int images(void) {
    const char *v = getenv("ML_TEST_SCALE_IMAGES");
    return v && atoi(v) > 0 ? atoi(v) : 17000;
}

static void run_threads(h_trace_t *t, const char *name, const char *keep) {
    const char *trace = h_tmp(name);
    char threads[16], pairs[16];
    snprintf(threads, sizeof threads, "%d", THREADS);
    snprintf(pairs, sizeof pairs, "%d", PAIRS);
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_scale"),
                          "threads", threads, pairs, keep, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    h_trace_load(t, trace);
}

/* 200 threads share one process' ring: every call arrives, and the order of
 * a free and the allocation that reuses its address in another thread is
 * kept (a reordering shows as an unknown free and a wrong live set). */
Test(scale, two_hundred_threads_exact_counts_and_order, .timeout = 600) {
    h_trace_t t, base;
    run_threads(&t, "threads.mlt", "3");
    cr_expect_eq(h_allocs_of_size(&t, 4343), (uint64_t)THREADS * PAIRS);
    cr_expect_eq(h_allocs_of_size(&t, 5555), (uint64_t)THREADS * KEEP);
    cr_expect_eq(t.records_by_tag[ML_T_THREAD], THREADS + 1, "main + every thread announced");
    cr_expect_eq(t.totals.unknown_frees, 0, "no free arrives before its allocation");
    cr_expect_eq(t.end.lost_in_crash, 0);
    cr_expect_eq(t.end.lost_dead_collector, 0);
    cr_expect(t.complete);
    /* Every call of the hand-off table is counted: 2 per pair, 1 per
     * hand-off, plus what libc and the loader do (the same in both runs). */
    run_threads(&base, "threads0.mlt", "0");
    cr_expect_eq(t.totals.alloc_calls - base.totals.alloc_calls, (uint64_t)THREADS * KEEP);
    cr_expect_eq(t.totals.free_calls, base.totals.free_calls);
    cr_expect_eq(base.totals.unknown_frees, 0);
    /* The live set at the end: exactly the kept blocks more. */
    cr_expect_eq(t.totals.heap_blocks - base.totals.heap_blocks, (uint64_t)THREADS * KEEP);
    cr_expect_eq(t.totals.heap_bytes - base.totals.heap_bytes, (uint64_t)THREADS * KEEP * 5555);
    h_trace_free(&base);
    h_trace_free(&t);
}

/* Past the old table of 1024 slots, and past the first step of the table's
 * allocated pages: memlens ends, and every image has a complete trace of its
 * own. */
Test(scale, thousands_of_images_under_follow_fork, .timeout = 1200) {
    const char *trace = h_tmp("spawn.mlt");
    const int want = images();
    char n[16];
    snprintf(n, sizeof n, "%d", want);
    const char *argv[] = {h_bin("memlens"), "run", "--follow-fork", "-o", trace, "--",
                          h_bin("fx_scale"), "spawn", n, "4", "/bin/true", NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_null(strstr(r.err, "untraced"), "%s", r.err);
    char dir[4096], path[4096 + 512];
    snprintf(dir, sizeof dir, "%s", trace);
    *strrchr(dir, '/') = '\0';
    /* The summary names 16 of the other traces and says where the rest are,
     * not a line of thousands of paths. */
    char want_more[9000];
    snprintf(want_more, sizeof want_more,
             " ... and %d more in %s (`memlens report %s` reports the folder's traces as one)\n", want - 16, dir,
             dir);
    const char *more = strstr(r.err, "more traces: ");
    cr_expect(more && strstr(more, want_more) && strlen(more) < 16 * 4200 + sizeof want_more, "%.2000s",
              more ? more : r.err);
    h_run_free(&r);
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    struct dirent *e;
    int children = 0, complete = 0, of_true = 0;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "spawn.", 6) || !strcmp(e->d_name, "spawn.mlt")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        h_trace_t c;
        h_trace_load(&c, path);
        children++;
        complete += c.complete;
        size_t len = strlen(c.exe);
        of_true += len >= 5 && !strcmp(c.exe + len - 5, "/true");
        h_trace_free(&c);
    }
    closedir(d);
    cr_expect_eq(children, want, "one trace per image");
    cr_expect_eq(complete, want, "each ends with its end record");
    cr_expect_eq(of_true, want);
    h_trace_t root;
    h_trace_load(&root, trace);
    cr_expect(root.complete);
    cr_expect_eq(root.end.status, 0);
    h_trace_free(&root);
}

typedef struct {
    uint64_t parent, pc;
} h_edge_t;

static int cmp_edge(const void *a, const void *b) {
    const h_edge_t *x = a, *y = b;
    if (x->parent != y->parent) return x->parent < y->parent ? -1 : 1;
    return x->pc < y->pc ? -1 : x->pc > y->pc;
}

/* 2^15 distinct call paths, taken by four threads at once, each in its own
 * order, while the stack table doubles (and gives back the tables it
 * outgrew) under their lookups: each path ends in exactly one node, and no
 * (parent, return address) is interned twice. */
Test(scale, distinct_stacks_interned_once_while_the_table_grows, .timeout = 300) {
    const int levels = 15, threads = 4;
    const char *trace = h_tmp("stacks.mlt");
    char d[16], n[16];
    snprintf(d, sizeof d, "%d", levels);
    snprintf(n, sizeof n, "%d", threads);
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin("fx_scale"), "stacks", d, n, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    h_trace_t t;
    h_trace_load(&t, trace);
    cr_expect(t.complete);
    cr_expect_not(t.truncated);
    cr_expect_eq(h_allocs_of_size(&t, 7777), (uint64_t)threads << levels);
    /* The leaf of every path is the same return address (after malloc in
     * down()), under a different parent. */
    uint32_t leaf = h_stack_of_size(&t, 7777);
    cr_assert(leaf && leaf < t.nnodes);
    uint64_t leaf_pc = t.node_pc[leaf], leaves = 0;
    h_edge_t *key = calloc(t.nnodes, sizeof *key);
    cr_assert_not_null(key);
    size_t nk = 0;
    for (uint32_t id = 1; id < t.nnodes; id++) {
        if (!t.node_pc[id]) continue;
        leaves += t.node_pc[id] == leaf_pc;
        key[nk++] = (h_edge_t){t.node_parent[id], t.node_pc[id]};
    }
    cr_expect_eq(leaves, (uint64_t)1 << levels, "one leaf node per path");
    cr_expect_gt(nk, (size_t)4 << levels, "enough nodes to make the table grow several times");
    qsort(key, nk, sizeof *key, cmp_edge);
    size_t dup = 0;
    for (size_t i = 1; i < nk; i++) dup += !cmp_edge(&key[i], &key[i - 1]);
    cr_expect_eq(dup, 0, "%zu nodes interned twice", dup);
    free(key);
    h_trace_free(&t);
}
