/* test_model.c - the viewer's model without a terminal: loading in steps,
 * what it takes from the analysis, sort and filter, stable site ids, the
 * call tree, the live set over time, the heap map, errors, live feeding
 * from another thread. */
#include "vtest.h"
#include "ml_gpu.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>

static char path[64];
static ml_vmodel_t *M;

static void setup(void) {
    M = v_model(path, sizeof path);
}
static void teardown(void) {
    ml_vmodel_free(M);
    unlink(path);
}

#define A_PC (V_EXE_BASE + 0x2000)
#define B_PC (V_LIB_BASE + 0x4000)
#define C_PC (V_EXE_BASE + 0x5000)

Test(viewer_model, summary_comes_from_the_analysis, .init = setup, .fini = teardown) {
    const ml_vsummary_t *s = ml_vmodel_summary(M);
    cr_expect_eq(s->state, ML_VPROC_EXITED);
    cr_expect_eq(s->status, 3);
    cr_expect_eq(s->pid, 4242);
    cr_expect_str_eq(s->exe, "/opt/app/bin/shop");
    cr_expect_str_eq(s->cmdline, "shop --open");
    cr_expect_eq(s->duration_ms, 60);
    cr_expect_eq(s->totals.alloc_calls, 15);
    cr_expect_eq(s->totals.peak_bytes, V_PEAK);
    cr_expect_eq(s->totals.peak_time_ms, V_PEAK_MS);
    cr_expect_eq(s->totals.temporary_allocs,
                 11); /* C's ten, and B: freed before the next allocation */
    cr_expect_eq(s->leak_bytes[0], 2000);
    cr_expect_eq(s->leak_blocks[0], 2);
    cr_expect_eq(s->nsites, 3);
    cr_expect(s->frag_peak.valid);
    cr_expect_not(ml_vmodel_loading(M));
    cr_expect_float_eq(ml_vmodel_progress(M), 1.0, 1e-9);
}

Test(viewer_model, sites_sort_by_each_key, .init = setup, .fini = teardown) {
    static const struct {
        ml_vsort_t key;
        uint64_t first, second;
    } want[] = {
        {ML_VSORT_PEAK, B_PC, A_PC},      {ML_VSORT_LEAKED, A_PC, B_PC},
        {ML_VSORT_ALLOCATED, B_PC, A_PC}, {ML_VSORT_CALLS, C_PC, A_PC},
        {ML_VSORT_TEMPORARY, C_PC, B_PC},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ml_vmodel_set_sort(M, want[i].key);
        cr_assert_eq(ml_vmodel_nsites(M), 3);
        cr_expect_eq(ml_vmodel_site_at(M, 0)->frames[0].address, want[i].first, "sort %s",
                     ml_vmodel_sort_name(want[i].key));
        /* Ties (B and C leak nothing) go by id; check the leader and order. */
        if (want[i].key != ML_VSORT_LEAKED)
            cr_expect_eq(ml_vmodel_site_at(M, 1)->frames[0].address, want[i].second, "sort %s",
                         ml_vmodel_sort_name(want[i].key));
        for (uint32_t k = 1; k < 3; k++)
            cr_expect_geq(ml_vmodel_site_cost(ml_vmodel_site_at(M, k - 1), want[i].key),
                          ml_vmodel_site_cost(ml_vmodel_site_at(M, k), want[i].key));
    }
    const ml_vsite_t *a = v_site_pc(M, A_PC), *b = v_site_pc(M, B_PC), *c = v_site_pc(M, C_PC);
    cr_assert(a && b && c);
    cr_expect_eq(a->peak_bytes, 4000);
    cr_expect_eq(b->peak_bytes, 5000);
    cr_expect_eq(a->leaked_bytes, 2000);
    cr_expect_eq(a->leaked_blocks, 2);
    cr_expect_eq(c->alloc_calls, 10);
    cr_expect_eq(c->temporary_allocs, 10);
    cr_expect_eq(b->nframes, 3);
}

Test(viewer_model, filter_matches_function_file_or_module, .init = setup, .fini = teardown) {
    ml_vmodel_set_filter(M, "WIDGET"); /* the module of B, case-insensitive */
    cr_assert_eq(ml_vmodel_nsites(M), 1);
    cr_expect_eq(ml_vmodel_site_at(M, 0)->frames[0].address, B_PC);
    cr_expect_str_eq(ml_vmodel_filter(M), "WIDGET");
    ml_vmodel_set_filter(M, "shop+0x5000"); /* a function name (unsymbolized) */
    cr_assert_eq(ml_vmodel_nsites(M), 1);
    cr_expect_eq(ml_vmodel_site_at(M, 0)->frames[0].address, C_PC);
    ml_vmodel_set_filter(M, "shop+0x1000"); /* main: every site passes through it */
    cr_expect_eq(ml_vmodel_nsites(M), 3);
    /* Files and modules by the name shown, the last path component; a
     * filter with a '/' searches the whole path. */
    ml_vmodel_set_filter(M, "app");
    cr_expect_eq(ml_vmodel_nsites(M), 0, "a directory of every module matched");
    ml_vmodel_set_filter(M, "app/lib");
    cr_assert_eq(ml_vmodel_nsites(M), 1);
    cr_expect_eq(ml_vmodel_site_at(M, 0)->frames[0].address, B_PC);
    ml_vmodel_set_filter(M, "/opt/");
    cr_expect_eq(ml_vmodel_nsites(M), 3);
    ml_vmodel_set_filter(M, "no-such-thing");
    cr_expect_eq(ml_vmodel_nsites(M), 0);
    cr_expect_eq(ml_vmodel_tree_nrows(M), 0);
    ml_vmodel_set_filter(M, NULL);
    cr_expect_eq(ml_vmodel_nsites(M), 3);
    cr_expect_str_eq(ml_vmodel_filter(M), "");
}

Test(viewer_model, site_ids_survive_refreshes, .init = setup, .fini = teardown) {
    uint32_t id = v_site_pc(M, A_PC)->id;
    const ml_vsite_t *s = ml_vmodel_site(M, id);
    cr_assert(s);
    cr_expect_eq(s->frames[0].address, A_PC);
    /* The analysis renumbers its sites on every build; ours stay. */
    ml_vmodel_set_sort(M, ML_VSORT_CALLS);
    cr_expect_eq(ml_vmodel_refresh(M), 0);
    cr_expect_eq(v_site_pc(M, A_PC)->id, id);
    cr_expect_null(ml_vmodel_site(M, 999));
}

Test(viewer_model, call_tree_top_down_and_bottom_up, .init = setup, .fini = teardown) {
    ml_vmodel_set_sort(M, ML_VSORT_ALLOCATED);
    /* Top-down: one root, main, with everything below it. */
    cr_assert_eq(ml_vmodel_tree_nrows(M), 1);
    const ml_vtree_row_t *r = ml_vmodel_tree_row(M, 0);
    cr_expect_eq(r->frame->address, V_EXE_BASE + 0x1000);
    cr_expect_eq(r->incl[ML_VSORT_ALLOCATED], 10000);
    cr_expect_eq(r->incl[ML_VSORT_CALLS], 15);
    cr_expect(r->has_children);
    cr_expect_not(r->expanded);
    ml_vmodel_tree_toggle(M, 0, true, false);
    cr_assert_eq(ml_vmodel_tree_nrows(M), 4); /* main, helper (5000), A (4000), C (1000) */
    cr_expect_eq(ml_vmodel_tree_row(M, 1)->frame->address, V_EXE_BASE + 0x3000);
    cr_expect_eq(ml_vmodel_tree_row(M, 1)->depth, 1);
    cr_expect_eq(ml_vmodel_tree_row(M, 2)->frame->address, A_PC);
    cr_expect_eq(ml_vmodel_tree_row(M, 3)->frame->address, C_PC);
    cr_expect_eq(ml_vmodel_tree_row(M, 2)->self[ML_VSORT_ALLOCATED], 4000);
    cr_expect_eq(ml_vmodel_tree_parent_row(M, 2), 0);
    /* Expansion is kept across a refresh (live views rebuild the tree). */
    cr_expect_eq(ml_vmodel_refresh(M), 0);
    cr_expect_eq(ml_vmodel_tree_nrows(M), 4);
    /* Expand all below main: helper opens onto B. */
    ml_vmodel_tree_toggle(M, 0, true, true);
    cr_expect_eq(ml_vmodel_tree_nrows(M), 5);
    ml_vmodel_tree_toggle(M, 0, false, false);
    cr_expect_eq(ml_vmodel_tree_nrows(M), 1);

    /* Bottom-up: the allocating functions are the roots. */
    ml_vmodel_tree_set_mode(M, true);
    cr_expect(ml_vmodel_tree_bottom_up(M));
    cr_assert_eq(ml_vmodel_tree_nrows(M), 3);
    cr_expect_eq(ml_vmodel_tree_row(M, 0)->frame->address, B_PC);
    cr_expect_eq(ml_vmodel_tree_row(M, 0)->incl[ML_VSORT_ALLOCATED], 5000);
    ml_vmodel_tree_toggle(M, 0, true, false);
    cr_expect_eq(ml_vmodel_tree_row(M, 1)->frame->address, V_EXE_BASE + 0x3000);
}

/* The Call tree view shows the analysis' one call tree, the tree of the
 * report's flame graph: with everything expanded its rows are the nodes of
 * ml_analysis_calltree() below the root, each with the node's frame, depth,
 * parent and costs, and those are the numbers vtest.h gives. */
Test(viewer_model, call_tree_rows_are_the_analysis_tree, .init = setup, .fini = teardown) {
    static const struct {
        uint64_t pc, incl[ML_COSTS], self[ML_COSTS]; /* peak, leaked, allocated, calls, temporary */
    } want[] = {
        {V_EXE_BASE + 0x1000, {V_PEAK, 2000, 10000, 15, 11}, {0}},  /* main */
        {A_PC, {4000, 2000, 4000, 4, 0}, {4000, 2000, 4000, 4, 0}}, /* A */
        {V_EXE_BASE + 0x3000, {5000, 0, 5000, 1, 1}, {0}},          /* helper */
        {B_PC, {5000, 0, 5000, 1, 1}, {5000, 0, 5000, 1, 1}},       /* B */
        {C_PC, {0, 0, 1000, 10, 10}, {0, 0, 1000, 10, 10}},         /* C */
    };
    const ml_calltree_node_t *t;
    size_t n = ml_analysis_calltree(ml_vmodel_analysis(M), &t);
    cr_assert_eq(n, 6, "all, main, A, helper, B, C");
    cr_expect_str_eq(t[0].frame->function, "all");
    cr_expect_eq(t[0].incl[ML_COST_ALLOCATED], 10000);
    ml_vmodel_set_sort(M, ML_VSORT_ALLOCATED);
    ml_vmodel_tree_toggle(M, 0, true, true);
    cr_assert_eq(ml_vmodel_tree_nrows(M), n - 1, "every node but the root is a row");
    bool seen[6] = {false};
    for (uint32_t i = 0; i < n - 1; i++) {
        const ml_vtree_row_t *r = ml_vmodel_tree_row(M, i);
        cr_assert(r->node > 0 && r->node < n, "row %u: node %u", i, r->node);
        const ml_calltree_node_t *c = &t[r->node];
        cr_expect_not(seen[r->node], "node %u on two rows", r->node);
        seen[r->node] = true;
        cr_expect_eq(r->frame, c->frame, "row %u shows the analysis' own node", i);
        cr_expect_eq(r->depth, c->depth - 1);
        cr_expect_eq(r->has_children, c->first_child >= 0);
        cr_expect(r->expanded || !r->has_children);
        for (int k = 0; k < ML_COSTS; k++) {
            cr_expect_eq(r->incl[k], c->incl[k], "row %u cost %d", i, k);
            cr_expect_eq(r->self[k], c->self[k], "row %u self cost %d", i, k);
        }
        uint32_t pr = ml_vmodel_tree_parent_row(M, i);
        if (c->parent == 0)
            cr_expect_eq(pr, i);
        else
            cr_expect_eq((int32_t)ml_vmodel_tree_row(M, pr)->node, c->parent, "row %u's parent", i);
        size_t w = 0;
        while (w < sizeof want / sizeof *want && want[w].pc != r->frame->address)
            w++;
        cr_assert_lt(w, sizeof want / sizeof *want, "row %u: unexpected frame %s", i,
                     r->frame->function);
        for (int k = 0; k < ML_COSTS; k++) {
            cr_expect_eq(r->incl[k], want[w].incl[k], "%s: cost %d is %" PRIu64, r->frame->function,
                         k, r->incl[k]);
            cr_expect_eq(r->self[k], want[w].self[k], "%s: self cost %d", r->frame->function, k);
        }
    }
    /* The report's flame tree is the same tree (nothing is pruned here). */
    const ml_calltree_node_t *f;
    size_t nf = ml_analysis_flame(ml_vmodel_analysis(M), &f);
    cr_assert_eq(nf, n);
    for (size_t i = 0; i < nf; i++) {
        size_t j = 0;
        while (j < n && t[j].frame != f[i].frame)
            j++;
        cr_assert_lt(j, n, "flame node %zu is a call-tree node", i);
        cr_expect_eq(memcmp(f[i].incl, t[j].incl, sizeof t[j].incl), 0);
        cr_expect_eq(f[i].depth, t[j].depth);
        if (i) cr_expect_eq(f[f[i].parent].frame, t[t[j].parent].frame);
    }

    /* Filtered, the analysis builds the tree of the sites shown, with the
     * same key: only B's path, and only B's costs. */
    ml_vmodel_set_filter(M, "widget");
    cr_assert_eq(ml_vmodel_tree_nrows(M), 3, "main, helper, B (still expanded)");
    const ml_vtree_row_t *r = ml_vmodel_tree_row(M, 0);
    cr_expect_eq(r->frame->address, V_EXE_BASE + 0x1000);
    cr_expect_eq(r->incl[ML_VSORT_ALLOCATED], 5000);
    cr_expect_eq(r->incl[ML_VSORT_CALLS], 1);
    cr_expect_eq(ml_vmodel_tree_row(M, 2)->frame->address, B_PC);
    cr_expect_eq(ml_vmodel_tree_row(M, 2)->self[ML_VSORT_ALLOCATED], 5000);
}

Test(viewer_model, live_set_at_the_peak_the_end_and_between, .init = setup, .fini = teardown) {
    ml_vlive_t l[8];
    uint32_t as_of;
    uint32_t n = ml_vmodel_live_at(M, V_PEAK_MS, l, 8, &as_of);
    cr_assert_eq(n, 2);
    cr_expect_eq(as_of, V_PEAK_MS);
    cr_expect_eq(l[0].site, v_site_pc(M, B_PC)->id);
    cr_expect_eq(l[0].bytes, 5000);
    cr_expect_eq(l[1].bytes, 4000);
    cr_expect_eq(l[1].blocks, 4);
    n = ml_vmodel_live_at(M, 60, l, 8, &as_of);
    cr_assert_eq(n, 1);
    cr_expect_eq(l[0].bytes, 2000);
    cr_expect_eq(l[0].site, v_site_pc(M, A_PC)->id);
    /* Before anything was allocated, nothing is live. */
    n = ml_vmodel_live_at(M, 0, l, 8, &as_of);
    cr_expect_eq(n, 0);
}

Test(viewer_model, heap_map_and_the_sites_pinning_a_cell, .init = setup, .fini = teardown) {
    ml_vheapmap_t map;
    cr_assert_eq(ml_vmodel_heapmap(M, ML_VMAP_PEAK, 0, 64, &map), 0);
    cr_assert(map.valid);
    cr_expect(map.sites_known);
    cr_expect_eq(map.time_ms, V_PEAK_MS);
    cr_expect_leq(map.ncells, 64);
    cr_assert_gt(map.ncells, 0);
    /* Some cell holds live pages; the sites pinning the whole range are A and B. */
    bool used = false;
    for (uint32_t i = 0; i < map.ncells; i++)
        used |= map.cells[i].used_pct > 0;
    cr_expect(used);
    ml_vlive_t l[8];
    uint32_t n = ml_vmodel_cell_sites(M, ML_VMAP_PEAK, 0, UINT64_MAX / 2, l, 8);
    cr_expect_eq(n, 2);
    n = ml_vmodel_cell_sites(M, ML_VMAP_END, 0x100000, 0x1000, l, 8);
    cr_expect_eq(n, 0); /* the block at 0x100000 was freed */
    n = ml_vmodel_cell_sites(M, ML_VMAP_END, 0x102000, 0x1000, l, 8);
    cr_assert_eq(n, 1);
    cr_expect_eq(l[0].site, v_site_pc(M, A_PC)->id);
    cr_expect_eq(l[0].bytes, 1000);
    /* At the cursor the model uses the nearest snapshot (or the peak). */
    cr_expect_eq(ml_vmodel_heapmap(M, ML_VMAP_CURSOR, 60, 64, &map), 0);
    cr_expect(map.valid);
}

Test(viewer_model, site_histograms_mark_the_site_buckets, .init = setup, .fini = teardown) {
    ml_vbucket_t b[64];
    uint32_t n = ml_vmodel_site_hist(M, v_site_pc(M, A_PC)->id, ML_VHIST_SIZE, b, 64);
    cr_assert_gt(n, 0);
    int mine = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!b[i].mine) continue;
        mine++;
        cr_expect(b[i].lo < 1000 && b[i].hi >= 1000, "bucket (%lu, %lu]", (unsigned long)b[i].lo,
                  (unsigned long)b[i].hi);
    }
    cr_expect_eq(mine, 1);
}

Test(viewer_model, the_advisor_runs_in_the_background_once_the_data_is_final, .timeout = 60) {
    ml_vmodel_t *m;
    cr_assert_eq(ml_vmodel_new(&m), 0);
    ml_build_opts_t o = {.no_symbols = true};
    ml_vmodel_set_build_opts(m, &o);
    v_write_trace(path, sizeof path, false);
    char err[256];
    cr_assert_eq(ml_vmodel_open(m, path, err, sizeof err), 0);
    cr_expect_eq(ml_vmodel_summary(m)->advice, ML_VADVICE_PENDING);
    cr_assert_eq(ml_vmodel_load_all(m), 0);
    ml_vadvice_t a = ml_vmodel_summary(m)->advice;
    cr_expect(a == ML_VADVICE_RUNNING || a == ML_VADVICE_DONE, "advice state %d", a);
    uint64_t gen = ml_vmodel_generation(m);
    ml_vmodel_wait(m);
    cr_expect_eq(ml_vmodel_summary(m)->advice, ML_VADVICE_DONE, "%s", ml_vmodel_advice_error(m));
    cr_expect_not(ml_vmodel_busy(m));
    cr_expect_gt(ml_vmodel_generation(m), gen);
    /* The advisor's answer for this tiny program: nothing worth changing. */
    cr_expect_eq(ml_vmodel_nsuggestions(m), 0);
    ml_vmodel_free(m);
    unlink(path);
}

/* A program that allocates and frees 64 bytes 2000 times in one function
 * gets the advisor's "stack" suggestion; the panel shows its evidence as the
 * JSON report writes it. Each block lives one allocation (the bucket of
 * lifetimes up to 3), and on the stack the site needs no heap page. */
Test(viewer_model, a_suggestion_shows_the_evidence_in_words, .timeout = 60) {
    int fd = v_begin(path, sizeof path, 77, "/opt/app/bin/shop");
    v_node(1, 0, V_EXE_BASE + 0x1000);
    v_node(2, 1, V_EXE_BASE + 0x2000);
    for (uint32_t i = 0; i < 2000; i++) {
        v_alloc(i / 100, 0x100000, 64, 2);
        v_free(i / 100, 0x100000);
    }
    v_end(fd, 20);

    ml_vmodel_t *m;
    cr_assert_eq(ml_vmodel_new(&m), 0);
    ml_build_opts_t o = {.no_symbols = true};
    ml_vmodel_set_build_opts(m, &o);
    char err[256];
    cr_assert_eq(ml_vmodel_open(m, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ml_vmodel_load_all(m), 0);
    ml_vmodel_wait(m);
    ml_vmodel_poll(m);
    cr_assert_eq(ml_vmodel_nsuggestions(m), 1);
    const ml_vsuggestion_t *g = ml_vmodel_suggestion_at(m, 0);
    cr_expect_str_eq(g->strategy, "stack");
    /* The numbers of the JSON report's "evidence" object, in words and
     * units (evidence.c); the recorded stack id is left out. */
    cr_expect_str_eq(g->evidence,
                     "calls 2,000 (125.0 KiB allocated), frees 2,000; at most 64 B live in 1 block\n"
                     "sizes: 64 B only; most often 64 B x 2,000\n"
                     "lifetimes: mean 0 s, longest 0 s; half were freed within 3 allocations, nine "
                     "in ten within 3 allocations; 0 live at the end\n"
                     "replayed heap peak: 4.0 KiB with segregated_fit, 0 B with stack\n"
                     "sites: #0\n"
                     "temporaries 2,000 (100% of the calls), the largest 64 B; calls avoided 4,000");
    ml_vmodel_free(m);
    unlink(path);
}

Test(viewer_model, loads_in_steps_with_progress) {
    ml_vmodel_t *m;
    cr_assert_eq(ml_vmodel_new(&m), 0);
    ml_build_opts_t o = {.no_symbols = true};
    ml_vmodel_set_build_opts(m, &o);
    v_write_trace(path, sizeof path, false);
    char err[256];
    cr_assert_eq(ml_vmodel_open(m, path, err, sizeof err), 0);
    cr_expect(ml_vmodel_loading(m));
    cr_expect_eq(ml_vmodel_summary(m)->state, ML_VPROC_LOADING);
    int rc, steps = 0;
    while ((rc = ml_vmodel_load_step(m, 1)) > 0)
        steps++;
    cr_expect_eq(rc, 0);
    cr_expect_not(ml_vmodel_loading(m));
    cr_expect_eq(ml_vmodel_summary(m)->totals.peak_bytes, V_PEAK);
    ml_vmodel_free(m);
    unlink(path);
}

Test(viewer_model, missing_garbage_and_truncated_traces) {
    ml_vmodel_t *m;
    char err[256];
    cr_assert_eq(ml_vmodel_new(&m), 0);
    cr_expect_eq(ml_vmodel_open(m, "/nonexistent/trace.mlt", err, sizeof err), -ENOENT);
    snprintf(path, sizeof path, "/tmp/ml_vtest_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(write(fd, "hello, world, not a trace", 25) == 25);
    close(fd);
    cr_expect_lt(ml_vmodel_open(m, path, err, sizeof err), 0);
    cr_expect_gt(strlen(err), 0);
    unlink(path);
    ml_vmodel_free(m);

    /* A trace cut short reads up to its last chunk and says so. */
    cr_assert_eq(ml_vmodel_new(&m), 0);
    ml_build_opts_t o = {.no_symbols = true};
    ml_vmodel_set_build_opts(m, &o);
    v_write_trace(path, sizeof path, true);
    cr_assert_eq(ml_vmodel_open(m, path, err, sizeof err), 0, "%s", err);
    ml_vmodel_load_all(m);
    cr_expect_eq(ml_vmodel_summary(m)->state, ML_VPROC_TRUNCATED);
    ml_vmodel_free(m);
    unlink(path);
}

/* Live: a collector thread feeds under the lock while this thread
 * refreshes; the numbers only grow, and the state follows the program. */
typedef struct {
    ml_vmodel_t *m;
    int n;
} feeder_t;

static void *feeder(void *arg) {
    feeder_t *f = arg;
    for (int i = 0; i < f->n; i++) {
        ml_record_t r = {.tag = ML_T_ALLOC, .time_ms = (uint32_t)i};
        r.u.alloc.kind = ML_KIND_MALLOC;
        r.u.alloc.ptr = 0x1000000 + (uint64_t)i * 64;
        r.u.alloc.size = 64;
        r.u.alloc.stack = 1;
        ml_vmodel_lock(f->m);
        ml_vmodel_feed(f->m, &r);
        ml_vmodel_unlock(f->m);
    }
    return NULL;
}

Test(viewer_model, live_feeding_and_refreshing_from_two_threads, .timeout = 30) {
    ml_vmodel_t *m;
    cr_assert_eq(ml_vmodel_new(&m), 0);
    ml_build_opts_t o = {.no_symbols = true};
    ml_vmodel_set_build_opts(m, &o);
    ml_record_t n = {.tag = ML_T_NODE};
    n.u.node.id = 1;
    n.u.node.pc = 0x1234;
    ml_vmodel_feed(m, &n);
    ml_vmodel_set_process_state(m, ML_VPROC_RUNNING, 0);
    feeder_t f = {m, 200000};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, feeder, &f), 0);
    uint64_t last = 0;
    for (int i = 0; i < 50; i++) {
        cr_assert_eq(ml_vmodel_refresh(m), 0);
        const ml_vsummary_t *s = ml_vmodel_summary(m);
        cr_expect_eq(s->state, ML_VPROC_RUNNING);
        cr_expect_geq(s->totals.heap_bytes, last);
        last = s->totals.heap_bytes;
        ml_vmodel_tree_nrows(m);
    }
    pthread_join(t, NULL);
    ml_vmodel_set_process_state(m, ML_VPROC_EXITED, 0);
    cr_assert_eq(ml_vmodel_refresh(m), 0);
    cr_expect_eq(ml_vmodel_summary(m)->state, ML_VPROC_EXITED);
    cr_expect_eq(ml_vmodel_summary(m)->totals.heap_bytes, 200000ull * 64);
    cr_expect_eq(ml_vmodel_nsites(m), 1);
    ml_vmodel_free(m);
}

/* The GPU view's numbers are the analysis' own (analysis/ml_gpu.h), copied
 * per device with the kind table and the three site lists, frames included;
 * a trace without GPU records has no device. */
Test(viewer_model, gpu_devices_sites_and_frames_from_the_analysis) {
    cr_expect_eq(ml_vmodel_gpu_ndevices(M = v_model(path, sizeof path)), 0, "CPU-only trace");
    cr_expect_null(ml_vmodel_gpu_device(M, 0));
    teardown();

    M = v_model_of(path, sizeof path, true);
    cr_assert_eq(ml_vmodel_gpu_ndevices(M), 2);
    const ml_vgpu_device_t *d0 = ml_vmodel_gpu_device(M, 0), *d1 = ml_vmodel_gpu_device(M, 1);
    cr_assert(d0 && d1);
    cr_expect_null(ml_vmodel_gpu_device(M, 2));
    cr_expect_eq(d0->device, 0);
    cr_expect_eq(d0->peak_bytes, 6 * V_MiB);
    cr_expect_eq(d0->peak_blocks, 2);
    cr_expect_eq(d0->peak_time_ms, 11, "pinned host bytes are not device bytes: %u",
                 d0->peak_time_ms);
    cr_expect_eq(d0->leaked_bytes, 4 * V_MiB, "the failed free leaves the block live");
    cr_expect_eq(d0->leaked_blocks, 1);
    cr_expect_eq(d0->live_bytes, 4 * V_MiB);
    cr_expect_eq(d0->ctx_destroy_bytes, 0);
    cr_expect_eq(d0->failed_frees, 1);
    cr_expect_eq(d0->unknown_frees, 1);
    cr_expect_eq(d0->pinned_peak_bytes, 65536);
    cr_expect_eq(d0->pinned_alloc_calls, 1);
    cr_expect_eq(d0->pinned_free_calls, 1);
    cr_expect_eq(d0->pinned_leaked_bytes, 0);
    cr_expect(d0->frag_peak.valid);
    cr_expect_eq(d0->frag_peak.live_bytes, 6 * V_MiB);
    cr_expect_eq(d0->frag_peak.blocks, 2);
    cr_expect_eq(d0->frag_peak.holes, 1);
    cr_expect_eq(d0->frag_peak.span_bytes, 0x20000000 - 0x10000000 + 2 * V_MiB);

    /* Every number is the analysis' own. */
    const ml_gpu_t *g = ml_analysis_gpu(ml_vmodel_analysis(M));
    cr_assert_not_null(g);
    const ml_gpu_device_t *a0 = ml_gpu_device(g, 0);
    cr_expect_eq(d0->alloc_calls, a0->alloc_calls);
    cr_expect_eq(d0->free_calls, a0->free_calls);
    cr_expect_eq(d0->bytes_allocated, a0->bytes_allocated);
    cr_expect_eq(d0->empty_cache_cycles, a0->empty_cache_cycles);
    cr_expect_eq(d0->pool_trims, a0->pool_trims);
    cr_expect_eq(d0->frag_end.span_bytes, a0->frag_now.span_bytes);

    /* The kind table: kinds with calls, in kind order. */
    cr_assert_eq(d0->nkinds, 2);
    cr_expect_str_eq(d0->kinds[0].name, "device");
    cr_expect_eq(d0->kinds[0].alloc_calls, 2);
    cr_expect_eq(d0->kinds[0].bytes_allocated, 6 * V_MiB);
    cr_expect_eq(d0->kinds[0].peak_bytes, 6 * V_MiB);
    cr_expect_eq(d0->kinds[0].leaked_bytes, 4 * V_MiB);
    cr_expect_str_eq(d0->kinds[1].name, "host_pinned");
    cr_expect_eq(d0->kinds[1].free_calls, 1);

    /* The peak's sites, largest first, with their frames (symbols are off:
     * "[shop+0x2000]"); A leaks; B and C churn: one pair each over the 20 ms
     * between the first and the last GPU record, 50/s. */
    cr_assert_eq(d0->nsites[ML_VGPU_PEAK], 2);
    const ml_vgpu_site_t *s = &d0->sites[ML_VGPU_PEAK][0];
    cr_expect_eq(s->bytes, 4 * V_MiB);
    cr_expect_eq(s->kind, ML_GPU_KIND_DEVICE);
    cr_expect_str_eq(s->kind_name, "device");
    cr_assert_eq(s->nframes, 2);
    cr_expect_eq(s->frames[0].address, V_EXE_BASE + 0x2000);
    cr_expect_eq(s->frames[1].address, V_EXE_BASE + 0x1000);
    cr_expect(strstr(s->frames[0].function, "shop+0x2000"), "%s", s->frames[0].function);
    s = &d0->sites[ML_VGPU_PEAK][1];
    cr_expect_eq(s->bytes, 2 * V_MiB);
    cr_assert_eq(s->nframes, 3);
    cr_expect_eq(s->frames[0].address, V_LIB_BASE + 0x4000);
    cr_assert_eq(d0->nsites[ML_VGPU_LEAK], 1);
    cr_expect_eq(d0->sites[ML_VGPU_LEAK][0].bytes, 4 * V_MiB);
    cr_expect_eq(d0->sites[ML_VGPU_LEAK][0].frames[0].address, V_EXE_BASE + 0x2000);
    cr_assert_eq(d0->nsites[ML_VGPU_CHURN], 2, "B and the pinned block: a pair each");
    for (uint32_t i = 0; i < 2; i++) {
        const ml_vgpu_site_t *c = &d0->sites[ML_VGPU_CHURN][i];
        cr_expect_eq(c->pairs, 1);
        cr_expect_float_eq(c->pairs_per_s, 50.0, 1e-9, "%f", c->pairs_per_s);
    }

    /* Device 1: its 1 MiB died with its context. */
    cr_expect_eq(d1->device, 1);
    cr_expect_eq(d1->peak_bytes, 1 * V_MiB);
    cr_expect_eq(d1->live_bytes, 0);
    cr_expect_eq(d1->leaked_bytes, 1 * V_MiB);
    cr_expect_eq(d1->ctx_destroy_bytes, 1 * V_MiB);
    cr_expect_eq(d1->ctx_destroy_blocks, 1);
    cr_assert_eq(d1->nsites[ML_VGPU_LEAK], 1);
    cr_expect_eq(d1->sites[ML_VGPU_LEAK][0].ctx_destroy_bytes, 1 * V_MiB);
    cr_expect_eq(d1->sites[ML_VGPU_LEAK][0].frames[0].address, V_EXE_BASE + 0x2000);
    cr_expect_eq(d1->nsites[ML_VGPU_CHURN], 0);

    /* A refresh gives the same answers (the lists are rebuilt in place). */
    cr_assert_eq(ml_vmodel_refresh(M), 0);
    d0 = ml_vmodel_gpu_device(M, 0);
    cr_expect_eq(d0->sites[ML_VGPU_PEAK][1].frames[0].address, V_LIB_BASE + 0x4000);
    cr_expect_eq(ml_vmodel_gpu_device(M, 1)->sites[ML_VGPU_LEAK][0].bytes, 1 * V_MiB);
}

/* A site's number is the analysis' site id of the last build (the JSON
 * report's sites[].id), not the model's own id, which keeps the order the
 * sites were first seen in: here the site of stack 2 is seen first, and the
 * analysis numbers the site of stack 1 first (it orders its sites by peak,
 * and stack 1's block is the larger). */
static void feed_alloc(ml_vmodel_t *m, uint32_t t, uint64_t ptr, uint64_t size, uint32_t stack) {
    ml_record_t r = {.tag = ML_T_ALLOC, .time_ms = t};
    r.u.alloc.kind = ML_KIND_MALLOC;
    r.u.alloc.ptr = ptr;
    r.u.alloc.size = size;
    r.u.alloc.stack = stack;
    ml_vmodel_feed(m, &r);
}

Test(viewer_model, site_numbers_are_the_analysis_ids) {
    ml_vmodel_t *m;
    cr_assert_eq(ml_vmodel_new(&m), 0);
    ml_build_opts_t o = {.no_symbols = true};
    ml_vmodel_set_build_opts(m, &o);
    ml_record_t n = {.tag = ML_T_NODE};
    n.u.node.id = 1;
    n.u.node.pc = 0x1000;
    ml_vmodel_feed(m, &n);
    n.u.node.id = 2;
    n.u.node.parent = 1;
    n.u.node.pc = 0x2000;
    ml_vmodel_feed(m, &n);
    ml_vmodel_set_process_state(m, ML_VPROC_RUNNING, 0);
    feed_alloc(m, 1, 0x100000, 64, 2);
    cr_assert_eq(ml_vmodel_refresh(m), 0);
    cr_assert_eq(ml_vmodel_nsites(m), 1);
    feed_alloc(m, 2, 0x200000, 1000, 1);
    ml_vmodel_set_process_state(m, ML_VPROC_EXITED, 0);
    cr_assert_eq(ml_vmodel_refresh(m), 0);
    cr_assert_eq(ml_vmodel_nsites(m), 2);
    size_t na = 0;
    const ml_site_t *a = ml_analysis_sites(ml_vmodel_analysis(m), &na);
    cr_assert_eq(na, 2);
    int differ = 0;
    for (uint32_t i = 0; i < 2; i++) {
        const ml_vsite_t *s = ml_vmodel_site_at(m, i);
        for (size_t k = 0; k < na; k++)
            if (a[k].frames[0].address == s->frames[0].address)
                cr_expect_eq(s->number, a[k].id, "site of pc %#lx: #%u, the analysis says %u",
                             (unsigned long)s->frames[0].address, s->number, a[k].id);
        differ += s->number != s->id;
    }
    cr_expect(differ > 0, "the model's own ids happen to equal the analysis' (test not telling)");
    ml_vmodel_free(m);
}

/* ------------------------------------------------------------------------- */
/* Opening from the analysis snapshot (issue 12, item 5)                     */
/* ------------------------------------------------------------------------- */

static ml_vmodel_t *open_phases(const char *p, bool snapshot, uint64_t budget) {
    ml_vmodel_t *m;
    cr_assert_eq(ml_vmodel_new(&m), 0);
    ml_build_opts_t o = {.no_symbols = true};
    ml_vmodel_set_build_opts(m, &o);
    ml_vmodel_set_advice(m, false);
    ml_vmodel_set_snapshot(m, snapshot);
    ml_vmodel_set_history_budget(m, budget);
    char err[256];
    cr_assert_eq(ml_vmodel_open(m, p, err, sizeof err), 0, "%s", err);
    return m;
}

/* Every number of the summary and of every site, a model against another. */
static void expect_same_results(ml_vmodel_t *a, ml_vmodel_t *b) {
    const ml_vsummary_t *x = ml_vmodel_summary(a), *y = ml_vmodel_summary(b);
    cr_expect_eq(memcmp(&x->totals, &y->totals, sizeof x->totals), 0, "the totals differ");
    cr_expect_eq(x->state, y->state);
    cr_expect_eq(x->duration_ms, y->duration_ms);
    cr_expect_eq(x->nsites, y->nsites);
    cr_expect_eq(memcmp(x->leak_bytes, y->leak_bytes, sizeof x->leak_bytes), 0);
    cr_expect_eq(memcmp(x->leak_blocks, y->leak_blocks, sizeof x->leak_blocks), 0);
    cr_expect_eq(x->frag_peak.valid, y->frag_peak.valid);
    cr_expect_float_eq(x->frag_peak.page_utilization, y->frag_peak.page_utilization, 1e-12);
    cr_expect_float_eq(x->frag_end.page_utilization, y->frag_end.page_utilization, 1e-12);
    cr_assert_eq(ml_vmodel_nsites(a), ml_vmodel_nsites(b));
    for (uint32_t i = 0; i < ml_vmodel_nsites(a); i++) {
        const ml_vsite_t *s = ml_vmodel_site_at(a, i), *t = ml_vmodel_site_at(b, i);
        cr_assert_eq(s->nframes, t->nframes);
        cr_expect_eq(s->frames[0].address, t->frames[0].address);
        cr_expect_eq(s->number, t->number);
        cr_expect_eq(s->alloc_calls, t->alloc_calls);
        cr_expect_eq(s->bytes_allocated, t->bytes_allocated);
        cr_expect_eq(s->temporary_allocs, t->temporary_allocs);
        cr_expect_eq(s->peak_bytes, t->peak_bytes);
        cr_expect_eq(s->leaked_bytes, t->leaked_bytes);
        cr_expect_eq(s->leaked_blocks, t->leaked_blocks);
        cr_expect_eq(s->live_bytes, t->live_bytes);
        cr_expect_eq(s->live_blocks, t->live_blocks);
    }
    cr_expect_eq(ml_vmodel_npoints(a), ml_vmodel_npoints(b));
}

Test(viewer_snapshot, opens_with_the_final_results_then_builds_the_history, .timeout = 60) {
    char p[64];
    v_write_phases(p, sizeof p, true);
    ml_vmodel_t *r = open_phases(p, false, ML_VHISTORY_BUDGET_DEFAULT); /* the replay */
    cr_assert_eq(ml_vmodel_load_all(r), 0);
    cr_expect_not(ml_vmodel_from_snapshot(r));
    cr_expect_eq(ml_vmodel_travel(r).state, ML_VTRAVEL_FULL);

    ml_vmodel_t *m = open_phases(p, true, ML_VHISTORY_BUDGET_DEFAULT);
    cr_assert(ml_vmodel_from_snapshot(m));
    cr_assert(ml_analysis_from_snapshot(ml_vmodel_analysis(m)));
    /* One step: no record is read before the views have their numbers. */
    cr_assert_eq(ml_vmodel_load_step(m, 1), 0);
    cr_expect_not(ml_vmodel_loading(m));
    ml_vtravel_t tv = ml_vmodel_travel(m);
    cr_expect_eq(tv.state, ML_VTRAVEL_BUILDING); /* taken in by poll, not yet */
    const ml_vsummary_t *s = ml_vmodel_summary(m);
    cr_expect_eq(s->totals.peak_bytes, PH_N * 300ull);
    cr_expect_eq(s->totals.peak_time_ms, 159);
    cr_expect_eq(s->totals.alloc_calls, 2 * PH_N);
    cr_expect_eq(s->leak_bytes[0], PH_N / 2 * 300ull);
    cr_expect_eq(s->state, ML_VPROC_EXITED);
    cr_expect_eq(s->duration_ms, 200);
    expect_same_results(m, r);
    /* The peak and the end are exact before the history; between them
     * there is nothing yet. */
    ml_vlive_t l[8], k[8];
    uint32_t as_of, as_of2;
    cr_assert_eq(ml_vmodel_live_at(m, 159, l, 8, &as_of), 1);
    cr_expect_eq(l[0].bytes, PH_N * 300ull);
    cr_expect_eq(ml_vmodel_live_at(m, 30, l, 8, &as_of), 0);
    ml_vheapmap_t map;
    cr_expect_eq(ml_vmodel_heapmap(m, ML_VMAP_PEAK, 0, 64, &map), 0);
    cr_expect(map.valid);
    cr_expect_not(map.sites_known); /* the snapshot has the peak's layout, not its blocks */
    cr_expect_eq(ml_vmodel_heapmap(m, ML_VMAP_END, 0, 64, &map), 0);
    cr_expect(map.sites_known);

    ml_vmodel_wait(m);
    tv = ml_vmodel_travel(m);
    cr_expect_eq(tv.state, ML_VTRAVEL_FULL);
    cr_expect_eq(tv.until_ms, 200);
    cr_expect(tv.session_held); /* kept, within its budget: it has the peak's blocks */
    /* and built by the replay's thread: the heap map's first "who pins this
     * cell" at the peak built it on the UI thread, 4.4 s of a frozen view on
     * 262,144 deep stacks (issue 12) */
    cr_expect(tv.session_built);
    cr_expect_gt(tv.used_bytes, 0);
    /* Who pins the heap at the peak: the finished replay knows, as the
     * replay load does. */
    cr_expect_eq(ml_vmodel_heapmap(m, ML_VMAP_PEAK, 0, 64, &map), 0);
    cr_expect(map.sites_known);
    cr_assert_eq(ml_vmodel_cell_sites(m, ML_VMAP_PEAK, 0, UINT64_MAX / 2, l, 8), 1);
    cr_assert_eq(ml_vmodel_cell_sites(r, ML_VMAP_PEAK, 0, UINT64_MAX / 2, k, 8), 1);
    cr_expect_eq(ml_vmodel_site(m, l[0].site)->frames[0].address, Y_PC);
    cr_expect_eq(l[0].bytes, k[0].bytes);
    cr_expect_eq(l[0].blocks, PH_N);
    /* The history's snapshots are the replay's, taken at the same records:
     * the same live sets at every instant. */
    uint32_t seen_x = 0, seen_both = 0;
    for (uint32_t t = 0; t <= 200; t += 5) {
        uint32_t n = ml_vmodel_live_at(m, t, l, 8, &as_of);
        uint32_t n2 = ml_vmodel_live_at(r, t, k, 8, &as_of2);
        cr_assert_eq(n, n2, "at %u ms", t);
        cr_expect_eq(as_of, as_of2, "at %u ms", t);
        for (uint32_t i = 0; i < n; i++) {
            cr_expect_eq(l[i].bytes, k[i].bytes, "at %u ms", t);
            cr_expect_eq(l[i].blocks, k[i].blocks, "at %u ms", t);
            const ml_vsite_t *a = ml_vmodel_site(m, l[i].site), *b = ml_vmodel_site(r, k[i].site);
            cr_expect_eq(a->frames[0].address, b->frames[0].address, "at %u ms", t);
        }
        /* ... and they are right: X's blocks are 100 B, Y's 300 B, and in
         * the second phase one replaces the other. */
        if (t > 5 && t < 60 && n) {
            cr_assert_eq(n, 1);
            cr_expect_eq(ml_vmodel_site(m, l[0].site)->frames[0].address, X_PC);
            cr_expect_eq(l[0].bytes, 100 * l[0].blocks);
            cr_expect_lt(as_of, t + 1);
            seen_x++;
        }
        if (t > 105 && t < 155 && n == 2) {
            uint64_t blocks = l[0].blocks + l[1].blocks;
            cr_expect(blocks == PH_N || blocks == PH_N - 1, "%" PRIu64 " blocks", blocks);
            for (int i = 0; i < 2; i++) {
                uint64_t pc = ml_vmodel_site(m, l[i].site)->frames[0].address;
                cr_expect_eq(l[i].bytes, (pc == X_PC ? 100 : 300) * l[i].blocks);
            }
            seen_both++;
        }
    }
    cr_expect_gt(seen_x, 3);
    cr_expect_gt(seen_both, 3);
    /* The cursor's heap map comes from the history too. */
    cr_expect_eq(ml_vmodel_heapmap(m, ML_VMAP_CURSOR, 130, 64, &map), 0);
    cr_expect_eq(map.at, ML_VMAP_CURSOR);
    cr_expect_leq(map.time_ms, 130);
    ml_vmodel_free(m);
    ml_vmodel_free(r);
    unlink(p);
}

Test(viewer_snapshot, a_history_over_its_budget_is_stopped_freed_and_said, .timeout = 60) {
    char p[64];
    v_write_phases(p, sizeof p, true);
    ml_vmodel_t *m = open_phases(p, true, 1); /* one byte: any growth is too much */
    cr_assert_eq(ml_vmodel_load_step(m, 1), 0);
    ml_vmodel_wait(m);
    ml_vtravel_t tv = ml_vmodel_travel(m);
    cr_assert_eq(tv.state, ML_VTRAVEL_PARTIAL);
    cr_expect_lt(tv.until_ms, 200);
    cr_expect_gt(tv.used_bytes, 1);
    cr_expect_eq(tv.budget_bytes, 1);
    cr_expect_not(tv.session_held, "the replay's session must be freed");
    cr_expect(strstr(tv.reason, "budget"), "%s", tv.reason);
    cr_expect(strstr(tv.reason, "freed"), "%s", tv.reason);
    /* The final results stay whole. */
    cr_expect_eq(ml_vmodel_summary(m)->totals.peak_bytes, PH_N * 300ull);
    cr_expect_eq(ml_vmodel_nsites(m), 2);
    ml_vmodel_free(m);

    /* A budget of 0: no history replay at all, and it says so. */
    m = open_phases(p, true, 0);
    cr_assert_eq(ml_vmodel_load_step(m, 1), 0);
    cr_expect_not(ml_vmodel_busy(m));
    tv = ml_vmodel_travel(m);
    cr_expect_eq(tv.state, ML_VTRAVEL_OFF);
    cr_expect_not(tv.session_held);
    ml_vlive_t l[4];
    uint32_t as_of;
    cr_expect_eq(ml_vmodel_live_at(m, 30, l, 4, &as_of), 0);
    cr_expect_eq(ml_vmodel_live_at(m, 200, l, 4, &as_of), 1); /* the end is exact */
    ml_vmodel_free(m);
    unlink(p);
}

/* A trace without a snapshot loads by replay, in steps, as before. */
Test(viewer_snapshot, a_trace_without_one_is_replayed) {
    char p[64];
    v_write_phases(p, sizeof p, false);
    ml_vmodel_t *m = open_phases(p, true, ML_VHISTORY_BUDGET_DEFAULT);
    cr_expect_not(ml_vmodel_from_snapshot(m));
    int rc, steps = 0;
    while ((rc = ml_vmodel_load_step(m, 0)) > 0)
        steps++;
    cr_expect_eq(rc, 0);
    cr_expect_gt(steps, 1);
    cr_expect_eq(ml_vmodel_travel(m).state, ML_VTRAVEL_FULL);
    cr_expect_eq(ml_vmodel_summary(m)->totals.peak_bytes, PH_N * 300ull);
    ml_vmodel_free(m);
    unlink(p);
}
