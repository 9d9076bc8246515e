/* test_analysis.c - the analysis library on synthetic record streams with
 * known answers: per-site peak snapshots, the peak graveyard, fragmentation,
 * temporary allocations, leak kinds, suppressions, the pointer scan, the
 * timeline bound, the flame tree, and what out of memory loses. */
#define _GNU_SOURCE
#include "ml_analysis.h"
#include "ml_reach.h"
#include "ml_report.h"
#include "trace_build.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static ml_analysis_t *A;
static uint32_t T;

static void setup(void) {
    cr_assert_eq(ml_analysis_new(&A), 0);
    T = 0;
    ml_record_t r = {.tag = ML_T_PROCESS};
    r.u.process.page_size = 4096;
    r.u.process.exe = "/bin/true";
    r.u.process.parent_trace = "";
    r.u.process.producer = "test";
    ml_analysis_feed(A, &r);
    /* stacks 1..4: one frame each, at pc 0x1000 * id */
    for (uint32_t id = 1; id <= 4; id++) {
        ml_record_t n = {.tag = ML_T_NODE};
        n.u.node.id = id;
        n.u.node.pc = 0x1000ull * id;
        ml_analysis_feed(A, &n);
    }
}

static void teardown(void) {
    ml_analysis_free(A);
}

/* An allocation or a free fed to session x at time t. */
static void alloc_in(ml_analysis_t *x, uint64_t ptr, uint64_t size, uint32_t stack, uint32_t t) {
    ml_record_t r = {.tag = ML_T_ALLOC, .time_ms = t};
    r.u.alloc.kind = ML_KIND_MALLOC;
    r.u.alloc.ptr = ptr;
    r.u.alloc.size = size;
    r.u.alloc.stack = stack;
    ml_analysis_feed(x, &r);
}

static void dealloc_in(ml_analysis_t *x, uint64_t ptr, uint32_t t) {
    ml_record_t r = {.tag = ML_T_FREE, .time_ms = t};
    r.u.alloc.kind = ML_KIND_FREE;
    r.u.alloc.ptr = ptr;
    ml_analysis_feed(x, &r);
}

static void alloc(uint64_t ptr, uint64_t size, uint32_t stack) {
    alloc_in(A, ptr, size, stack, T++);
}

static void dealloc(uint64_t ptr) {
    dealloc_in(A, ptr, T++);
}

static bool warned(const ml_analysis_t *x, const char *what);

/* The process ran its exit handlers: without this record (or an end
 * record) the trace is one cut short before any exit, whose live blocks
 * are not judged as leaks. */
static void exited(void) {
    ml_record_t r = {.tag = ML_T_PROC_EXIT, .time_ms = T++};
    ml_analysis_feed(A, &r);
}

/* A second session with 4 KiB pages and no stacks, to compare with A. */
static ml_analysis_t *session_4k(void) {
    ml_analysis_t *x;
    cr_assert_eq(ml_analysis_new(&x), 0);
    ml_record_t pr = {.tag = ML_T_PROCESS};
    pr.u.process.page_size = 4096;
    pr.u.process.exe = pr.u.process.parent_trace = pr.u.process.producer = "";
    ml_analysis_feed(x, &pr);
    return x;
}

static void build(const ml_suppressions_t *s) {
    ml_build_opts_t o = {.no_symbols = true, .suppressions = s};
    char err[256];
    cr_assert_eq(ml_analysis_build(A, &o, err, sizeof err), 0, "%s", err);
}

static const ml_site_t *site_at(uint64_t pc) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(A, &n);
    for (size_t i = 0; i < n; i++)
        if (s[i].nframes && s[i].frames[0].address == pc) return &s[i];
    return NULL;
}

Test(analysis, per_site_peak_is_the_value_at_the_global_peak, .init = setup, .fini = teardown) {
    alloc(0x10000, 100, 1);  /* A 100 */
    alloc(0x20000, 200, 2);  /* B 200: heap 300, a first peak */
    dealloc(0x10000);        /* 200 */
    alloc(0x30000, 50, 2);   /* B 250 */
    dealloc(0x20000);        /* 50 */
    alloc(0x40000, 400, 1);  /* A 400: heap 450, the peak */
    dealloc(0x40000);
    alloc(0x50000, 10, 3);   /* C: changes after the peak only */
    dealloc(0x30000);
    exited();
    build(NULL);
    const ml_totals_t *t = ml_analysis_totals(A);
    cr_expect_eq(t->peak_bytes, 450);
    cr_expect_eq(t->peak_blocks, 2);
    cr_expect_eq(t->peak_time_ms, 5);
    const ml_site_t *a = site_at(0x1000), *b = site_at(0x2000), *c = site_at(0x3000);
    cr_assert(a && b && c);
    cr_expect_eq(a->peak_bytes, 400);
    cr_expect_eq(b->peak_bytes, 50);
    cr_expect_eq(c->peak_bytes, 0);
    cr_expect_eq(a->alloc_calls, 2);
    cr_expect_eq(a->bytes_allocated, 500);
    cr_expect_eq(c->leaked_bytes, 10);
    cr_expect_eq(a->min_size, 100);
    cr_expect_eq(a->max_size, 400);
    /* Sites are ordered by peak: ids follow. */
    cr_expect_eq(a->id, 0);
    cr_expect_eq(b->id, 1);
}

/* The heap map's cells, worked out by hand. Region B (the busiest) holds a
 * block over three pages (its middle page whole), a block sharing the last
 * of them, an empty block alone in its page, a hole of one page, and a
 * block of six pages starting on a page boundary; region A, 256 MiB away,
 * one small block. The map (frag.c) is made from the list of B's pages
 * gathered on the one walk. */
Test(analysis, heap_map_from_the_pages_of_one_walk, .init = setup, .fini = teardown) {
    const uint64_t B = 0x10000000, P = 4096;
    alloc(0x100000, 64, 1);               /* region A */
    alloc(B + 0x100, 0x2000, 2);          /* pages 0 (3840 live), 1 (whole), 2 (256) */
    alloc(B + 0x2100, 0x100, 2);          /* page 2: 256 more */
    alloc(B + 0x3000, 0, 3);              /* page 3: held, nothing live */
    alloc(B + 5 * P, 5 * P + 8, 4);       /* pages 5-9 whole, page 10: 8 bytes */
    build(NULL);
    const ml_frag_t *e = ml_analysis_frag(A, ML_MOMENT_END);
    cr_assert(e->valid);
    cr_expect_eq(e->regions, 2);
    cr_expect_eq(e->map_base, B);
    cr_expect_eq(e->map_cell_bytes, P);
    cr_assert_eq(e->map_ncells, 11);
    /* round(live * 100 / held): 3840 -> 94, 512 -> 13, 8 -> 0; page 4: none held */
    const int8_t want[11] = {94, 100, 13, 0, -1, 100, 100, 100, 100, 100, 0};
    for (int c = 0; c < 11; c++) cr_expect_eq(e->map_cells[c], want[c], "cell %d: %d, not %d", c, e->map_cells[c], want[c]);
    cr_expect_eq(e->pages, 1 + 10);
}

/* A region whose blocks lie one every other page, 600,000 of them: more
 * pages than frag.c keeps in a list (PG_MAX), so its map is made by a
 * second walk. The cells are checked against a plain count of each page. */
Test(analysis, heap_map_of_a_region_too_sparse_for_the_page_list, .init = setup, .fini = teardown,
     .timeout = 60) {
    const uint64_t B = 0x10000000, P = 4096, n = 600000;
    for (uint64_t i = 0; i < n; i++) alloc(B + i * 2 * P, 1024 + (i % 5) * 512, 1);
    build(NULL);
    const ml_frag_t *e = ml_analysis_frag(A, ML_MOMENT_END);
    uint64_t npages = 2 * (n - 1) + 1, cell_pages = (npages + ML_HEAP_MAP_CELLS - 1) / ML_HEAP_MAP_CELLS;
    cr_assert_eq(e->map_base, B);
    cr_assert_eq(e->map_cell_bytes, cell_pages * P);
    cr_assert_eq(e->map_ncells, (npages + cell_pages - 1) / cell_pages);
    uint64_t *live = calloc(e->map_ncells, 8), *held = calloc(e->map_ncells, 8);
    cr_assert(live && held);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t c = 2 * i / cell_pages;
        live[c] += 1024 + (i % 5) * 512;
        held[c] += P;
    }
    uint32_t bad = 0;
    for (uint32_t c = 0; c < e->map_ncells; c++) {
        int want = held[c] ? (int)((live[c] * 100 + held[c] / 2) / held[c]) : -1;
        if (e->map_cells[c] != want && bad++ < 5) cr_expect_eq(e->map_cells[c], want, "cell %u", c);
    }
    cr_expect_eq(bad, 0);
    free(live);
    free(held);
}

static void expect_same_frag(const ml_frag_t *p, const ml_frag_t *q, const char *what) {
    cr_expect_eq(p->live_blocks, q->live_blocks, "%s", what);
    cr_expect_eq(p->live_bytes, q->live_bytes, "%s", what);
    cr_expect_eq(p->pages, q->pages, "%s", what);
    cr_expect_eq(p->free_bytes, q->free_bytes, "%s", what);
    cr_expect_eq(p->largest_free_bytes, q->largest_free_bytes, "%s", what);
    cr_expect_eq(p->gaps, q->gaps, "%s", what);
    cr_expect_eq(p->regions, q->regions, "%s", what);
    cr_expect_eq(p->span_bytes, q->span_bytes, "%s", what);
    cr_expect_eq(p->usable_bytes, q->usable_bytes, "%s", what);
    cr_expect_eq(p->map_base, q->map_base, "%s", what);
    cr_expect_eq(p->map_cell_bytes, q->map_cell_bytes, "%s", what);
    cr_assert_eq(p->map_ncells, q->map_ncells, "%s", what);
    cr_expect(p->map_cells && q->map_cells && !memcmp(p->map_cells, q->map_cells, p->map_ncells), "%s", what);
}

/* The worst moment and the peak close together (analysis.c, moment_close):
 * 1.2 M page-sized blocks, then small blocks with every other one freed
 * (the worst moment: the most page bytes held and not used), then 20 more
 * pages (the peak: 80 KiB more than the 48 KiB freed), then the page-sized
 * blocks freed. Freeing a whole page leaves the waste as it was, so both
 * moments stay. The worst closes on its graveyard's 75,063rd block; the
 * peak's graveyard of the same blocks is one short of its own threshold
 * but past half of it: one walk closes both. Each must be what a session
 * that stopped at its moment computes for its end. */
Test(analysis, the_peak_and_the_worst_moment_close_in_one_walk, .init = setup, .fini = teardown,
     .timeout = 120) {
    const uint64_t pages = 1200000, PB = 0x100000000, SB = 0x10000000, P = 4096;
    /* the worst moment's threshold is passed; the peak's alone would take one more */
    const uint64_t frees = (pages + 1000) / 16 + 1;
    ml_analysis_t *at_worst = session_4k(), *at_peak = session_4k();
    ml_analysis_t *all[3] = {A, at_worst, at_peak};
    for (int k = 0; k < 3; k++) {
        ml_analysis_t *x = all[k];
        for (uint64_t i = 0; i < pages; i++) alloc_in(x, PB + i * P, P, 1, 0);
        for (uint64_t i = 0; i < 2000; i++) alloc_in(x, SB + i * 64, 48, 1, 0);
        for (uint64_t i = 0; i < 2000; i += 2) dealloc_in(x, SB + i * 64, 0);
        if (x == at_worst) continue;
        for (uint64_t i = 0; i < 20; i++) alloc_in(x, PB + (pages + 10 + i) * P, P, 1, 0);
        if (x == at_peak) continue;
        for (uint64_t i = 0; i < frees; i++) dealloc_in(x, PB + i * P, 0);
    }
    ml_share_t sh[4];
    cr_expect_eq(ml_analysis_sites_in_range(A, ML_MOMENT_PEAK, PB, PB + P, sh, 4), -ENOTSUP, "the peak closed");
    cr_expect_eq(ml_analysis_sites_in_range(A, ML_MOMENT_WORST, PB, PB + P, sh, 4), -ENOTSUP, "the worst closed");
    build(NULL);
    ml_build_opts_t o = {.no_symbols = true};
    char err[256];
    cr_assert_eq(ml_analysis_build(at_worst, &o, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ml_analysis_build(at_peak, &o, err, sizeof err), 0, "%s", err);
    const ml_frag_t *p = ml_analysis_frag(A, ML_MOMENT_PEAK), *w = ml_analysis_frag(A, ML_MOMENT_WORST);
    cr_expect_eq(p->live_blocks, pages + 1000 + 20);
    cr_expect_eq(w->live_blocks, pages + 1000);
    expect_same_frag(p, ml_analysis_frag(at_peak, ML_MOMENT_END), "the peak");
    expect_same_frag(w, ml_analysis_frag(at_worst, ML_MOMENT_END), "the worst moment");
    ml_analysis_free(at_worst);
    ml_analysis_free(at_peak);
}

Test(analysis, temporary_allocations, .init = setup, .fini = teardown) {
    alloc(0x10000, 8, 1);
    dealloc(0x10000); /* temporary */
    alloc(0x10000, 8, 1);
    alloc(0x20000, 8, 2);
    dealloc(0x10000); /* not: another allocation came between */
    build(NULL);
    cr_expect_eq(ml_analysis_totals(A)->temporary_allocs, 1);
    cr_expect_eq(site_at(0x1000)->temporary_allocs, 1);
    cr_expect_eq(site_at(0x2000)->temporary_allocs, 0);
}

/* 128 blocks of 64 bytes fill two pages; freeing every other one leaves the
 * pages held and half used; the peak keeps the full layout. */
Test(analysis, fragmentation_at_peak_end_and_worst, .init = setup, .fini = teardown) {
    for (uint64_t i = 0; i < 128; i++) alloc(0x100000 + i * 64, 64, 1);
    for (uint64_t i = 1; i < 128; i += 2) dealloc(0x100000 + i * 64);
    build(NULL);
    const ml_frag_t *p = ml_analysis_frag(A, ML_MOMENT_PEAK), *e = ml_analysis_frag(A, ML_MOMENT_END),
                    *w = ml_analysis_frag(A, ML_MOMENT_WORST);
    cr_assert(p->valid && e->valid && w->valid);
    cr_expect_eq(p->live_bytes, 8192);
    cr_expect_eq(p->pages, 2);
    cr_expect_float_eq(p->page_utilization, 1.0, 1e-9);
    cr_expect_eq(p->free_bytes, 0);
    cr_expect_eq(e->live_bytes, 4096);
    cr_expect_eq(e->pages, 2);
    cr_expect_float_eq(e->page_utilization, 0.5, 1e-9);
    cr_expect_eq(e->gaps, 63);
    cr_expect_eq(e->free_bytes, 63 * 64);
    cr_expect_eq(e->largest_free_bytes, 64);
    cr_expect_float_eq(e->external, 1.0 - 64.0 / (63 * 64), 1e-9);
    cr_expect_float_eq(w->page_utilization, 0.5, 1e-9);
    cr_expect_eq(w->live_bytes, 4096);
    /* glibc: a 64-byte request takes an 80-byte chunk, 72 usable */
    cr_expect_eq(e->usable_bytes, 64 * 72);
    cr_expect_eq(e->internal_waste_bytes, 64 * 8);
    /* The heap map: two cells of one page each, both half used. */
    cr_expect_eq(e->map_ncells, 2);
    cr_expect_eq(e->map_cell_bytes, 4096);
    cr_expect_eq(e->map_base, 0x100000);
    cr_expect_eq(e->map_cells[0], 50);
    cr_expect_eq(e->map_cells[1], 50);
    cr_expect_eq(p->map_cells[0], 100);
    /* Each freed-in-alternation page is pinned by the site. */
    cr_expect_eq(site_at(0x1000)->pinned_pages, 2);
    cr_expect_eq(site_at(0x1000)->sparse_pinned_pages, 0);
}

Test(analysis, contiguous_free_keeps_utilization, .init = setup, .fini = teardown) {
    for (uint64_t i = 0; i < 128; i++) alloc(0x100000 + i * 64, 64, 1);
    for (uint64_t i = 0; i < 64; i++) dealloc(0x100000 + i * 64);
    build(NULL);
    const ml_frag_t *e = ml_analysis_frag(A, ML_MOMENT_END);
    cr_expect_eq(e->pages, 1);
    cr_expect_float_eq(e->page_utilization, 1.0, 1e-9);
    cr_expect_eq(e->free_bytes, 0);
}

/* Blocks freed after the peak come back for the peak's layout, and a new
 * peak forgets the old graveyard. */
Test(analysis, graveyard_rebuilds_the_peak, .init = setup, .fini = teardown) {
    alloc(0x100000, 1000, 1);
    alloc(0x200000, 1000, 1); /* peak 2000 */
    dealloc(0x100000);
    dealloc(0x200000);
    alloc(0x300000, 3000, 2); /* new peak 3000, alone */
    dealloc(0x300000);
    alloc(0x400000, 10, 3);
    build(NULL);
    const ml_frag_t *p = ml_analysis_frag(A, ML_MOMENT_PEAK);
    cr_expect_eq(p->live_bytes, 3000);
    cr_expect_eq(p->live_blocks, 1);
    cr_expect_eq(p->map_base, 0x300000);
}

/* The free half of a realloc (kind ML_KIND_REALLOC) at time T, and the
 * record that says the realloc failed: the block stays. */
static void realloc_fails(uint64_t ptr) {
    ml_record_t r = {.tag = ML_T_FREE, .time_ms = T++};
    r.u.alloc.kind = ML_KIND_REALLOC;
    r.u.alloc.ptr = ptr;
    ml_analysis_feed(A, &r);
    ml_record_t f = {.tag = ML_T_REALLOC_FAIL, .time_ms = T++};
    f.u.alloc.kind = ML_KIND_REALLOC;
    f.u.alloc.ptr = ptr;
    ml_analysis_feed(A, &f);
}

/* A failed realloc takes its block out of the peak's graveyard again, and
 * only its own: not the entry of an earlier block at the same address,
 * freed after the peak. */
Test(analysis, a_failed_realloc_leaves_the_graveyard_as_it_was, .init = setup, .fini = teardown) {
    alloc(0x100000, 1000, 1);
    alloc(0x200000, 3000, 2); /* the peak: 4000 in 2 blocks */
    dealloc(0x100000);        /* the peak's graveyard holds it */
    alloc(0x100000, 500, 3);  /* after the peak: not in the graveyard */
    realloc_fails(0x100000);
    realloc_fails(0x200000); /* in the graveyard, and out again */
    build(NULL);
    const ml_totals_t *t = ml_analysis_totals(A);
    cr_expect_eq(t->heap_bytes, 3500, "both blocks came back");
    const ml_frag_t *p = ml_analysis_frag(A, ML_MOMENT_PEAK);
    cr_expect_eq(p->live_blocks, 2);
    cr_expect_eq(p->live_bytes, 4000);
}

Test(analysis, leak_kinds_from_the_scan_and_suppressions, .init = setup, .fini = teardown) {
    alloc(0x10000, 111, 1); /* reachable */
    alloc(0x20000, 222, 2); /* definite */
    alloc(0x30000, 333, 3); /* definite */
    alloc(0x40000, 444, 3); /* indirect */
    alloc(0x50000, 50, 4);  /* possible: in the gate too (--fail-on-leak) */
    ml_record_t r = {.tag = ML_T_BLOCK_REACH};
    uint64_t ptrs[] = {0x10000, 0x20000, 0x30000, 0x40000, 0x50000};
    uint8_t kinds[] = {ML_REACH_REACHABLE, ML_REACH_DEFINITE, ML_REACH_DEFINITE, ML_REACH_INDIRECT,
                       ML_REACH_POSSIBLE};
    for (int i = 0; i < 5; i++) {
        r.u.block_reach.ptr = ptrs[i];
        r.u.block_reach.reach = kinds[i];
        ml_analysis_feed(A, &r);
    }
    ml_record_t s = {.tag = ML_T_REACH_SCAN};
    ml_analysis_feed(A, &s);
    exited();
    build(NULL);
    const ml_leaks_t *L = ml_analysis_leaks(A);
    cr_expect(L->scanned);
    cr_expect_eq(L->bytes, 111 + 222 + 333 + 444 + 50);
    cr_expect_eq(L->kind_bytes[ML_LEAK_REACHABLE], 111);
    cr_expect_eq(L->kind_bytes[ML_LEAK_DEFINITE], 555);
    cr_expect_eq(L->kind_bytes[ML_LEAK_INDIRECT], 444);
    cr_expect_eq(L->kind_bytes[ML_LEAK_POSSIBLE], 50);
    cr_expect_eq(L->gate_bytes, 555 + 444 + 50, "leaked = definite + indirect + possible");
    cr_expect_eq(L->lost_bytes, 555 + 444 + 50);
    cr_expect_eq(L->ngroups, 5);
    cr_expect_eq(L->groups[0].bytes, 444);
    cr_expect_eq(L->groups[0].kind, ML_LEAK_INDIRECT);

    ml_suppressions_t *sp;
    char err[256];
    cr_assert_eq(ml_suppressions_parse("# known\nleak:0x2000]$\n\n", &sp, err, sizeof err), 0, "%s", err);
    build(sp);
    L = ml_analysis_leaks(A);
    cr_expect_eq(L->gate_bytes, 333 + 444 + 50);
    cr_expect_eq(L->suppressed_bytes, 222);
    uint64_t blocks, bytes;
    ml_suppressions_pattern(sp, 0, &blocks, &bytes);
    cr_expect_eq(blocks, 1);
    cr_expect_eq(bytes, 222);
    cr_expect(site_at(0x2000)->suppressed);
    ml_suppressions_free(sp);
}

Test(analysis, no_scan_means_definite, .init = setup, .fini = teardown) {
    alloc(0x10000, 100, 1);
    exited();
    build(NULL);
    const ml_leaks_t *L = ml_analysis_leaks(A);
    cr_expect_not(L->scanned);
    cr_expect_eq(L->kind_bytes[ML_LEAK_DEFINITE], 100);
    cr_expect_eq(L->gate_bytes, 100);
}

/* A trace cut short (the partial trace of a recording still running, or
 * of a killed collector) judges no leak unless it holds the process' exit;
 * a complete trace that ends in a crash judges them (as valgrind does). */
Test(analysis, a_cut_trace_judges_leaks_only_after_the_exit, .init = setup, .fini = teardown) {
    alloc(0x10000, 100, 1);
    build(NULL);
    const ml_leaks_t *L = ml_analysis_leaks(A);
    ml_unjudged_t u;
    cr_expect(ml_totals_unjudged(ml_analysis_totals(A), &u));
    cr_expect_str_eq(u.when, "when the trace ends");
    cr_expect_not(L->judged);
    cr_expect_eq(L->bytes, 100, "still live");
    cr_expect_eq(L->kind_bytes[ML_LEAK_DEFINITE], 0);
    cr_expect_eq(L->lost_bytes, 0);
    cr_expect_eq(L->gate_bytes, 0);
    cr_expect(warned(A, "the blocks live when the trace ends are not leaks"));
    cr_expect_not(warned(A, "no exit-time reachability scan"));
}

Test(analysis, a_cut_trace_with_the_exit_judges_leaks, .init = setup, .fini = teardown) {
    alloc(0x10000, 100, 1);
    exited();
    build(NULL);
    const ml_leaks_t *L = ml_analysis_leaks(A);
    cr_expect_not(ml_totals_unjudged(ml_analysis_totals(A), NULL));
    cr_expect(L->judged);
    cr_expect_eq(L->kind_bytes[ML_LEAK_DEFINITE], 100);
    cr_expect_eq(L->gate_bytes, 100);
}

Test(analysis, a_crash_judges_leaks, .init = setup, .fini = teardown) {
    alloc(0x10000, 100, 1);
    ml_record_t e = {.tag = ML_T_END, .time_ms = T++};
    e.u.end.status_kind = ML_END_SIGNALED;
    e.u.end.status = 11;
    ml_analysis_feed(A, &e);
    build(NULL);
    const ml_leaks_t *L = ml_analysis_leaks(A);
    cr_expect(ml_analysis_totals(A)->complete);
    cr_expect(L->judged);
    cr_expect_eq(L->kind_bytes[ML_LEAK_DEFINITE], 100);
}

Test(analysis, timeline_is_bounded_and_ends_at_exit, .init = setup, .fini = teardown) {
    for (uint32_t i = 0; i < 200000; i++) {
        T = i;
        alloc(0x100000 + (uint64_t)(i % 50) * 64 + (i / 50 % 2) * 0x10000, 8, 1);
        if (i % 50 == 49)
            for (uint32_t k = 0; k < 50; k++) dealloc(0x100000 + (uint64_t)k * 64 + (i / 50 % 2) * 0x10000);
    }
    alloc(0x900000, 12345, 2); /* the peak: 12345 + 8 * 0 */
    build(NULL);
    const ml_timeline_point_t *p;
    size_t n = ml_analysis_timeline(A, &p);
    cr_expect_leq(n, ML_TIMELINE_MAX);
    cr_expect_gt(n, 400);
    uint64_t maxh = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) cr_expect_geq(p[i].time_ms, p[i - 1].time_ms);
        if (p[i].heap_bytes > maxh) maxh = p[i].heap_bytes;
    }
    cr_expect_eq(maxh, ml_analysis_totals(A)->peak_bytes, "the peak survives downsampling");
    cr_expect_eq(p[n - 1].heap_bytes, 12345);
    cr_expect_eq(p[n - 1].time_ms, ml_analysis_totals(A)->last_time_ms);
}

Test(analysis, flame_tree_sums_and_prunes, .init = setup, .fini = teardown) {
    /* stack 5 = 0x5000 called from 1; stack 6 = 0x6000 called from 1 */
    ml_record_t n = {.tag = ML_T_NODE};
    n.u.node.id = 5;
    n.u.node.parent = 1;
    n.u.node.pc = 0x5000;
    ml_analysis_feed(A, &n);
    n.u.node.id = 6;
    n.u.node.pc = 0x6000;
    ml_analysis_feed(A, &n);
    alloc(0x10000, 1000000, 5);
    alloc(0x20000, 999, 6); /* below 0.1 % of every metric but calls: kept (50 % of calls) */
    build(NULL);
    const ml_calltree_node_t *f;
    size_t k = ml_analysis_flame(A, &f);
    cr_assert_eq(k, 4, "all, [0x1000], two children");
    cr_expect_str_eq(f[0].frame->function, "all");
    cr_expect_eq(f[0].incl[ML_COST_ALLOCATED], 1000999);
    cr_expect_eq(f[0].incl[ML_COST_CALLS], 2);
    cr_expect_eq(f[1].parent, 0);
    cr_expect_str_eq(f[1].frame->function, "[0x1000]");
    cr_expect_eq(f[1].incl[ML_COST_ALLOCATED], 1000999);
    ml_build_opts_t o = {.no_symbols = true, .flame_max_nodes = 3};
    char err[256];
    cr_assert_eq(ml_analysis_build(A, &o, err, sizeof err), 0);
    k = ml_analysis_flame(A, &f);
    cr_expect_eq(k, 3);
    cr_expect_str_eq(f[2].frame->function, "[0x5000]", "the biggest child stays");
}

static void module_at(uint64_t base, const char *path) {
    ml_record_t r = tb_module(base, path);
    ml_analysis_feed(A, &r);
}

/* The recorder can take a stack in an object that dlopen mapped before its
 * scan recorded the object (after another one was unloaded there): that
 * node is the next module's, not the unloaded one's that stood there. */
Test(analysis, a_node_before_its_module_record_is_that_modules, .init = setup, .fini = teardown) {
    module_at(0x7000000, "/p/liba.so");
    ml_record_t n = {.tag = ML_T_NODE};
    n.u.node.id = 10;
    n.u.node.pc = 0x7000100;
    ml_analysis_feed(A, &n);
    ml_record_t u = {.tag = ML_T_MODULE_UNLOAD};
    u.u.module.base = 0x7000000;
    ml_analysis_feed(A, &u);
    n.u.node.id = 11;
    n.u.node.pc = 0x7000200;
    ml_analysis_feed(A, &n);
    n.u.node.id = 12; /* where no module ever is */
    n.u.node.pc = 0x9000000;
    ml_analysis_feed(A, &n);
    module_at(0x7000000, "/p/libb.so");
    alloc(0x10000, 100, 10);
    alloc(0x20000, 200, 11);
    alloc(0x30000, 300, 12);
    build(NULL);
    const ml_site_t *a = site_at(0x7000100), *b = site_at(0x7000200), *c = site_at(0x9000000);
    cr_assert(a && b && c);
    cr_expect_str_eq(a->frames[0].module, "/p/liba.so");
    cr_expect_str_eq(b->frames[0].module, "/p/libb.so");
    cr_expect_null(c->frames[0].module);
}

Test(analysis, suppression_patterns) {
    cr_expect(ml_suppression_match("foo", "xfooy"));
    cr_expect(ml_suppression_match("^foo", "foobar"));
    cr_expect_not(ml_suppression_match("^foo", "xfoo"));
    cr_expect(ml_suppression_match("bar$", "foobar"));
    cr_expect_not(ml_suppression_match("bar$", "barx"));
    cr_expect(ml_suppression_match("f*o*r", "xfoobarx"));
    cr_expect(ml_suppression_match("^ns::*::make()$", "ns::Factory<int>::make()"));
    cr_expect_not(ml_suppression_match("zzz", "foo"));
    cr_expect_not(ml_suppression_match("foo", NULL));
    /* LSan's TemplateMatch: no backtracking, `$` ends the pattern, an
     * empty text matches nothing. */
    cr_expect_not(ml_suppression_match("beta$", "betabeta"));
    cr_expect(ml_suppression_match("beta$", "alpha_beta"));
    cr_expect_not(ml_suppression_match("a*a$", "alpha_beta"));
    cr_expect(ml_suppression_match("a*a$", "betabeta"));
    cr_expect_not(ml_suppression_match("$", "foo"));
    cr_expect(ml_suppression_match("*$", "foo"));
    cr_expect(ml_suppression_match("beta$x", "alpha_beta"));
    cr_expect(ml_suppression_match("^", "foo"));
    cr_expect_not(ml_suppression_match("*", ""));
    ml_suppressions_t *s;
    char err[256];
    cr_expect_eq(ml_suppressions_parse("race:foo\n", &s, err, sizeof err), -EINVAL);
    cr_expect(strstr(err, "line 1") != NULL, "%s", err);
}

/* ------------------------------------------------------------------------- */
/* The pointer scan on a fake address space                                  */
/* ------------------------------------------------------------------------- */

static uint8_t MEM[1 << 16];
#define BASE 0x100000ull

static int fake_read(void *ctx, ml_reach_req_t *r, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        r[i].got = 0;
        if (r[i].addr < BASE || r[i].addr + r[i].len > BASE + sizeof MEM) continue;
        memcpy(r[i].buf, MEM + (r[i].addr - BASE), r[i].len);
        r[i].got = r[i].len;
    }
    return 0;
}

static void put(uint64_t at, uint64_t v) {
    memcpy(MEM + (at - BASE), &v, 8);
}

/* The scan keeps the whole pointer graph when it fits (reach.c), and
 * otherwise reads blocks as the marks reach them: every verdict test runs
 * both ways (max_edges -1: never the graph). */
static void kinds_cliques_and_the_glibc_alias(int64_t max_edges) {
    memset(MEM, 0, sizeof MEM);
    /* root: [BASE, BASE+0x100); blocks from BASE+0x1000 */
    ml_live_block_t b[] = {
        {BASE + 0x1000, 64}, /* 0 A: held by the root */
        {BASE + 0x2000, 64}, /* 1 B: dropped, points to C */
        {BASE + 0x3000, 64}, /* 2 C: only from B -> indirect */
        {BASE + 0x4000, 24}, /* 3 D: cycle with E; the root holds D's glibc alias */
        {BASE + 0x5000, 64}, /* 4 E */
        {BASE + 0x6000, 64}, /* 5 F: from A (interior pointer only) -> possible */
        {BASE + 0x7000, 64}, /* 6 G: from F (start pointer, but F is possible) -> possible */
        {BASE + 0x8000, 64}, /* 7 H: from A (start) and from F -> reachable */
    };
    put(BASE + 0x10, BASE + 0x1000);
    put(BASE + 0x18, BASE + 0x4000 + 16); /* 24-byte request: chunk 32, next header at +16 */
    put(BASE + 0x2000, BASE + 0x3000);
    put(BASE + 0x4008, BASE + 0x5000);
    put(BASE + 0x5000, BASE + 0x4000);
    put(BASE + 0x1008, BASE + 0x6000 + 40);
    put(BASE + 0x6008, BASE + 0x7000);
    put(BASE + 0x6010, BASE + 0x8000);
    put(BASE + 0x1010, BASE + 0x8000);
    ml_range_t roots[] = {{BASE, BASE + 0x100}};
    ml_reach_io_t io = {.read = fake_read, .glibc_chunk_alias = true, .max_edges = max_edges};
    uint8_t v[8];
    ml_reach_stats_t st;
    cr_assert_eq(ml_reach_classify(b, 8, roots, 1, &io, v, &st), 0);
    cr_expect_eq(st.graph_given_up, max_edges < 0);
    cr_expect_eq(v[0], ML_REACH_REACHABLE);
    cr_expect_eq(v[1], ML_REACH_DEFINITE);
    cr_expect_eq(v[2], ML_REACH_INDIRECT);
    cr_expect_eq(v[3], ML_REACH_DEFINITE, "the leader of the D-E cycle");
    cr_expect_eq(v[4], ML_REACH_INDIRECT);
    cr_expect_eq(v[5], ML_REACH_POSSIBLE, "valgrind: only an interior pointer reaches it");
    cr_expect_eq(v[6], ML_REACH_POSSIBLE, "valgrind: reached only from a possibly lost block");
    cr_expect_eq(v[7], ML_REACH_REACHABLE, "a start pointer from a reachable block wins");
    cr_expect_eq(st.reachable, 2);
    cr_expect_eq(st.possible, 2);
    cr_expect_eq(st.indirect, 2);
    cr_expect_eq(st.definite, 2);
    cr_expect_eq(st.root_bytes, 0x100);
    /* Without the alias rule, the root's interior pointer makes D possibly
     * lost, and E, which D points to, too. */
    io.glibc_chunk_alias = false;
    cr_assert_eq(ml_reach_classify(b, 8, roots, 1, &io, v, &st), 0);
    cr_expect_eq(v[3], ML_REACH_POSSIBLE);
    cr_expect_eq(v[4], ML_REACH_POSSIBLE);
}

/* Owned roots (ml_reach_io_t.owned: glibc's own data): any pointer from
 * them into a block counts as a start pointer, and what that block points
 * to is reached from a reachable block; the same word in a plain root
 * reaches the block only through its inside (possible). */
Test(reach, owned_roots) {
    memset(MEM, 0, sizeof MEM);
    ml_live_block_t b[] = {
        {BASE + 0x1000, 64}, /* 0: an aligned pointer 16 bytes in */
        {BASE + 0x2000, 64}, /* 1: from block 0 (start) */
        {BASE + 0x3000, 64}, /* 2: nothing points to it */
    };
    put(BASE + 0x40, BASE + 0x1000 + 16);
    put(BASE + 0x1020, BASE + 0x2000);
    ml_range_t plain[] = {{BASE, BASE + 0x100}}, none[] = {{BASE + 0x100, BASE + 0x108}};
    for (int64_t max_edges = 0; max_edges >= -1; max_edges--) { /* with the graph, and without */
        ml_reach_io_t io = {.read = fake_read, .max_edges = max_edges};
        uint8_t v[3];
        ml_reach_stats_t st;
        cr_assert_eq(ml_reach_classify(b, 3, plain, 1, &io, v, &st), 0);
        cr_expect_eq(v[0], ML_REACH_POSSIBLE);
        cr_expect_eq(v[1], ML_REACH_POSSIBLE);
        cr_expect_eq(v[2], ML_REACH_DEFINITE);
        io.owned = plain;
        io.nowned = 1;
        cr_assert_eq(ml_reach_classify(b, 3, none, 1, &io, v, &st), 0);
        cr_expect_eq(v[0], ML_REACH_REACHABLE, "an owned root's interior pointer counts as a start");
        cr_expect_eq(v[1], ML_REACH_REACHABLE);
        cr_expect_eq(v[2], ML_REACH_DEFINITE);
        cr_expect_eq(st.root_bytes, 0x108, "owned roots are read as roots");
        cr_expect_eq(st.graph_given_up, max_edges < 0);
    }
}

Test(reach, kinds_cliques_and_the_glibc_alias) {
    kinds_cliques_and_the_glibc_alias(0);
}

Test(reach, kinds_cliques_and_the_glibc_alias_without_the_graph) {
    kinds_cliques_and_the_glibc_alias(-1);
}

/* A root word whose low 32 bits are zero and that falls inside a block is
 * not taken for an interior pointer (glibc's start frame holds such
 * half-written words; valgrind skips them as partly undefined): a block
 * spanning a 4 GiB boundary that only such a word reaches is definitely
 * lost. Any other interior word still makes a block possibly lost, a start
 * pointer with a zero low half still reaches its block, and a block's own
 * words are read as they are. The blocks lie where fake_read finds nothing:
 * their contents read as unreadable. */
static void half_written_root_words(int64_t max_edges) {
    memset(MEM, 0, sizeof MEM);
    ml_live_block_t b[] = {
        {0x0ffffff00ull, 0x200}, /* 0 A: spans 4 GiB; only 0x100000000 in the root -> definite */
        {0x1ffffff00ull, 0x200}, /* 1 B: spans 8 GiB; the root holds 0x200000008 -> possible */
        {0x300000000ull, 0x40},  /* 2 C: starts at 12 GiB, held by its start -> reachable */
    };
    put(BASE + 0x10, 0x100000000ull);
    put(BASE + 0x18, 0x200000008ull);
    put(BASE + 0x20, 0x300000000ull);
    ml_range_t roots[] = {{BASE, BASE + 0x100}};
    ml_reach_io_t io = {.read = fake_read, .max_edges = max_edges};
    uint8_t v[3];
    ml_reach_stats_t st;
    cr_assert_eq(ml_reach_classify(b, 3, roots, 1, &io, v, &st), 0);
    cr_expect_eq(v[0], ML_REACH_DEFINITE, "the root word 0x100000000 is half an old pointer: %d", v[0]);
    cr_expect_eq(v[1], ML_REACH_POSSIBLE, "an interior pointer all the same: %d", v[1]);
    cr_expect_eq(v[2], ML_REACH_REACHABLE, "a start pointer, whatever its low half: %d", v[2]);
}

Test(reach, half_written_root_words) {
    half_written_root_words(0);
}

Test(reach, half_written_root_words_without_the_graph) {
    half_written_root_words(-1);
}

/* valgrind's leak-check heuristics (reach.c, "Heuristics"), in a fake
 * address space: [BASE + 0xf000, +0x100) is a "file-backed" readable
 * mapping holding two tables, and [BASE + 0xe000, +0x100) an executable
 * one; the first table holds two pointers to code, the second two to data. */
static unsigned fake_maps(void *ctx, uint64_t addr, uint64_t *end) {
    (void)ctx;
    if (addr >= BASE + 0xf000 && addr < BASE + 0xf100) {
        *end = BASE + 0xf100;
        return ML_REACH_MAP_R;
    }
    if (addr >= BASE + 0xe000 && addr < BASE + 0xe100) {
        *end = BASE + 0xe100;
        return ML_REACH_MAP_R | ML_REACH_MAP_X;
    }
    return 0;
}

static void heuristics(int64_t max_edges) {
    memset(MEM, 0, sizeof MEM);
    const uint64_t vt = BASE + 0xf000, data_table = BASE + 0xf080;
    put(vt, BASE + 0xe010);
    put(vt + 8, 0);
    put(vt + 16, BASE + 0xe020);
    put(data_table, BASE + 0xf0f0);
    put(data_table + 8, BASE + 0xf0f8);
    ml_live_block_t b[] = {
        {BASE + 0x1000, 65}, /* 0 string: length 10, capacity 40; pointer at +24 */
        {BASE + 0x2000, 88}, /* 1 new[] of 5 x 16; pointer at +8 */
        {BASE + 0x3000, 48}, /* 2 vtables at +0 and +16; pointer at +16 */
        {BASE + 0x4000, 40}, /* 3 count 3 does not divide 32; pointer at +8 */
        {BASE + 0x5000, 32}, /* 4 tables of data pointers at +0 and +16; pointer at +16 */
        {BASE + 0x6000, 64}, /* 5 string-like, but reached from a possibly lost block */
        {BASE + 0x7000, 64}, /* 6 holds the pointer to 5; itself reached at +40 */
        {BASE + 0x8000, 64}, /* 7 reachable (start pointer), holds a pointer to 8 at +8 */
        {BASE + 0x9000, 40}, /* 8 new[] of 2 x 16, reached from a reachable block */
        {BASE + 0xa000, 33}, /* 9 a full string: length 8 == capacity 8; pointer at +24 */
        {BASE + 0xb000, 48}, /* 10 tables of one pointer to code at +0 and +16; pointer at +16 */
    };
    put(BASE + 0x1000, 10);
    put(BASE + 0x1008, 40);
    put(BASE + 0x2000, 5);
    put(BASE + 0x3000, vt);
    put(BASE + 0x3010, vt);
    put(BASE + 0x4000, 3);
    put(BASE + 0x5000, data_table);
    put(BASE + 0x5010, data_table);
    put(BASE + 0x6000, 5);
    put(BASE + 0x6008, 39); /* 64 = 24 + 39 + 1 */
    put(BASE + 0x7000, BASE + 0x6000 + 24);
    put(BASE + 0x10, BASE + 0x1000 + 24);
    put(BASE + 0x18, BASE + 0x2000 + 8);
    put(BASE + 0x20, BASE + 0x3000 + 16);
    put(BASE + 0x28, BASE + 0x4000 + 8);
    put(BASE + 0x30, BASE + 0x5000 + 16);
    put(BASE + 0x38, BASE + 0x7000 + 40);
    put(BASE + 0x40, BASE + 0x8000);
    put(BASE + 0x8000, BASE + 0x9000 + 8);
    put(BASE + 0x9000, 2);
    put(BASE + 0xa000, 8);
    put(BASE + 0xa008, 8); /* 33 = 24 + 8 + 1 */
    put(BASE + 0x48, BASE + 0xa000 + 24);
    const uint64_t one_fn = BASE + 0xf0c0; /* then zeros to the mapping's end */
    put(one_fn, BASE + 0xe030);
    put(BASE + 0xb000, one_fn);
    put(BASE + 0xb010, one_fn);
    put(BASE + 0x50, BASE + 0xb000 + 16);
    ml_range_t roots[] = {{BASE, BASE + 0x100}};
    ml_reach_io_t io = {.read = fake_read, .max_edges = max_edges, .heuristics = true, .map_flags = fake_maps};
    uint8_t v[11];
    ml_reach_stats_t st;
    cr_assert_eq(ml_reach_classify(b, 11, roots, 1, &io, v, &st), 0);
    cr_expect_eq(st.graph_given_up, max_edges < 0);
    cr_expect_eq(v[0], ML_REACH_REACHABLE, "stdstring");
    cr_expect_eq(v[1], ML_REACH_REACHABLE, "newarray");
    cr_expect_eq(v[2], ML_REACH_REACHABLE, "multipleinheritance");
    cr_expect_eq(v[3], ML_REACH_POSSIBLE, "a count that does not divide the rest");
    cr_expect_eq(v[4], ML_REACH_POSSIBLE, "tables of data pointers are no vtables");
    cr_expect_eq(v[6], ML_REACH_POSSIBLE, "an interior pointer no rule explains");
    cr_expect_eq(v[5], ML_REACH_POSSIBLE, "from a possibly lost block, as valgrind");
    cr_expect_eq(v[7], ML_REACH_REACHABLE);
    cr_expect_eq(v[8], ML_REACH_REACHABLE, "newarray, from a reachable block");
    /* valgrind's rule is length <= capacity (mc_leakcheck.c, LchStdString). */
    cr_expect_eq(v[9], ML_REACH_REACHABLE, "stdstring whose length equals its capacity");
    /* valgrind wants two pointers to code among a vtable's first 20 words. */
    cr_expect_eq(v[10], ML_REACH_POSSIBLE, "a table of one pointer to code is no vtable");
    /* Without the heuristics every one of them is possibly lost. */
    io.heuristics = false;
    cr_assert_eq(ml_reach_classify(b, 11, roots, 1, &io, v, &st), 0);
    for (int i = 0; i < 11; i++)
        cr_expect_eq(v[i], i == 7 ? ML_REACH_REACHABLE : ML_REACH_POSSIBLE, "block %d", i);
}

Test(reach, valgrinds_heuristics_for_interior_pointers) {
    heuristics(0);
}

Test(reach, valgrinds_heuristics_for_interior_pointers_without_the_graph) {
    heuristics(-1);
}

/* A later leader that points at an earlier one takes it into its clique. */
Test(reach, earlier_leader_joins_a_later_clique) {
    memset(MEM, 0, sizeof MEM);
    ml_live_block_t b[] = {{BASE + 0x1000, 64}, {BASE + 0x2000, 64}};
    put(BASE + 0x2000, BASE + 0x1000);
    ml_range_t roots[] = {{BASE, BASE + 0x100}};
    for (int64_t max_edges = 0; max_edges >= -1; max_edges--) {
        ml_reach_io_t io = {.read = fake_read, .max_edges = max_edges};
        uint8_t v[2];
        ml_reach_stats_t st;
        cr_assert_eq(ml_reach_classify(b, 2, roots, 1, &io, v, &st), 0);
        cr_expect_eq(v[0], ML_REACH_INDIRECT);
        cr_expect_eq(v[1], ML_REACH_DEFINITE);
    }
}

/* Leaders are taken in the order of allocation when the table gives it
 * (valgrind's addresses follow it): A, allocated last but lowest (a reused
 * chunk), is in a cycle A -> D -> E -> A under B -> C -> D. In address order
 * A leads first, takes D and E, and B's clique then reaches D but not A: two
 * definite. In allocation order (B C D E A) B's clique takes everything. */
Test(reach, leaders_in_the_order_of_allocation) {
    memset(MEM, 0, sizeof MEM);
    ml_live_block_t b[] = {{BASE + 0x1000, 32}, {BASE + 0x2000, 32}, {BASE + 0x3000, 32},
                           {BASE + 0x4000, 32}, {BASE + 0x5000, 32}};
    uint64_t seq[] = {9, 1, 2, 3, 4};
    put(BASE + 0x2000, BASE + 0x3000); /* B -> C */
    put(BASE + 0x3000, BASE + 0x4000); /* C -> D */
    put(BASE + 0x4000, BASE + 0x5000); /* D -> E */
    put(BASE + 0x5000, BASE + 0x1000); /* E -> A */
    put(BASE + 0x1000, BASE + 0x4000); /* A -> D */
    ml_range_t roots[] = {{BASE, BASE + 0x100}};
    for (int64_t max_edges = 0; max_edges >= -1; max_edges--) {
        ml_reach_io_t io = {.read = fake_read, .max_edges = max_edges};
        uint8_t v[5];
        ml_reach_stats_t st;
        ml_reach_blocks_t t = {.arr = b, .n = 5, .seq = seq};
        cr_assert_eq(ml_reach_classify_blocks(&t, roots, 1, &io, v, &st), 0);
        cr_expect_eq(v[1], ML_REACH_DEFINITE, "B leads");
        for (int i = 0; i < 5; i++)
            if (i != 1) cr_expect_eq(v[i], ML_REACH_INDIRECT, "max_edges %lld: block %d", (long long)max_edges, i);
        cr_expect_eq(st.definite, 1);
        cr_expect_eq(st.indirect, 4);
        /* Without the order: address order, valgrind's answer on these addresses. */
        t.seq = NULL;
        cr_assert_eq(ml_reach_classify_blocks(&t, roots, 1, &io, v, &st), 0);
        cr_expect_eq(v[0], ML_REACH_DEFINITE);
        cr_expect_eq(v[1], ML_REACH_DEFINITE);
        cr_expect_eq(st.definite, 2);
        cr_expect_eq(st.indirect, 3);
    }
}

/* The leaders' order on a random graph of lost blocks, against the rule
 * written out here: leaders in (sequence number, address) order, each
 * unseen one definite, what it reaches through unseen blocks indirect, an
 * earlier leader it reaches indirect too. Few blocks out of order take the
 * merge of a rising run and the sorted exceptions (reach.c, leaders_init),
 * many the sort of all; both must give the rule's verdicts. */
static void leaders_reference(const uint32_t *to, const uint8_t *nto, const uint64_t *seq, int n, uint8_t *v) {
    int order[512], work[4096];
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) /* insertion sort by (seq, index) */
        for (int j = i; j > 0 && (seq[order[j]] < seq[order[j - 1]] ||
                                  (seq[order[j]] == seq[order[j - 1]] && order[j] < order[j - 1]));
             j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    memset(v, 0, (size_t)n); /* 0: unseen */
    for (int r = 0; r < n; r++) {
        int i = order[r];
        if (v[i]) continue;
        v[i] = ML_REACH_DEFINITE;
        int nw = 0;
        work[nw++] = i;
        while (nw) {
            int j = work[--nw];
            for (int k = 0; k < nto[j]; k++) {
                int t = (int)to[j * 2 + k];
                if (t == i) continue;
                if (!v[t]) {
                    v[t] = ML_REACH_INDIRECT;
                    work[nw++] = t;
                } else if (v[t] == ML_REACH_DEFINITE) {
                    v[t] = ML_REACH_INDIRECT;
                }
            }
        }
    }
}

Test(reach, leaders_in_order_merged_or_sorted_as_the_rule_says) {
    enum { N = 400 };
    static ml_live_block_t b[N];
    static uint64_t seq[N];
    static uint32_t to[N * 2];
    static uint8_t nto[N], v[N], want[N];
    uint64_t rnd = 12345;
#define RND() (rnd = rnd * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(rnd >> 33))
    for (int round = 0; round < 200; round++) {
        memset(MEM, 0, sizeof MEM);
        /* Round by round: many blocks out of order (the sort of all); a few
         * made first (the rising run walked up, the exceptions merged); a
         * few made last at low addresses, reused chunks (the run walked
         * down); a few of each. */
        int kind = round % 4, out_of_order = kind ? 1 + (int)(RND() % 20) : N / 2;
        for (int i = 0; i < N; i++) b[i] = (ml_live_block_t){BASE + 0x1000 + (uint64_t)i * 64, 32};
        for (int i = 0; i < N; i++) {
            seq[i] = 1000 + (uint64_t)i * 3;
            uint32_t some = RND() % 4;
            nto[i] = (uint8_t)(some == 0 ? 0 : 1 + RND() % 2); /* a quarter are leaves */
            for (int k = 0; k < nto[i]; k++) {
                to[i * 2 + k] = RND() % N;
                put(b[i].ptr + (uint64_t)k * 8, b[to[i * 2 + k]].ptr);
            }
        }
        for (int k = 0; k < out_of_order; k++) {
            uint32_t at = RND() % N, r = RND() % 1000;
            seq[at] = kind == 1 ? r : kind == 2 ? 3000 + r : kind == 3 ? (r % 2 ? r : 3000 + r) : RND() % 2400;
        }
        if (kind == 1) seq[N - 1] = 0; /* made first, placed last (a big mmapped array) */
        leaders_reference(to, nto, seq, N, want);
        ml_range_t roots[] = {{BASE, BASE + 0x100}};
        ml_reach_io_t io = {.read = fake_read, .max_edges = round % 3 ? -1 : 0};
        ml_reach_stats_t st;
        ml_reach_blocks_t t = {.arr = b, .n = N, .seq = seq};
        cr_assert_eq(ml_reach_classify_blocks(&t, roots, 1, &io, v, &st), 0);
        for (int i = 0; i < N; i++)
            if (v[i] != want[i]) {
                cr_expect_eq(v[i], want[i], "round %d (%d out of order, max_edges %lld): block %d is %d, the rule says %d",
                             round, out_of_order, (long long)io.max_edges, i, v[i], want[i]);
                break;
            }
    }
#undef RND
}

/* Neighbouring blocks are read as one span (reach.c, SPAN_GAP); a span that
 * cannot be read whole is read block by block, and a block that cannot be
 * read is not scanned: the verdicts and the bytes scanned are those of one
 * request per block. */
static size_t reads_n;
static uint64_t bad_page;  /* a page no request may cover (0: none) */
static size_t longest_ok;  /* requests longer than this fail (0: no limit) */
static int64_t graph_cap;  /* ml_reach_io_t.max_edges of the next scan */

static int page_read(void *ctx, ml_reach_req_t *r, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        reads_n++;
        bool bad = (bad_page && r[i].addr < bad_page + 4096 && bad_page < r[i].addr + r[i].len) ||
                   (longest_ok && r[i].len > longest_ok);
        if (bad) r[i].got = 0;
        else fake_read(NULL, &r[i], 1);
    }
    return 0;
}

/* Blocks 0-999 of 16 bytes, 32 apart from BASE + 0x1000: the root holds
 * block 0; 1 -> 2 -> ... -> 999. */
static void chain_of_1000(ml_live_block_t *b, uint8_t *v, ml_reach_stats_t *st) {
    memset(MEM, 0, sizeof MEM);
    for (int i = 0; i < 1000; i++) b[i] = (ml_live_block_t){BASE + 0x1000 + 32 * (uint64_t)i, 16};
    put(BASE + 0x10, b[0].ptr);
    for (int i = 1; i < 999; i++) put(b[i].ptr + 8, b[i + 1].ptr);
    ml_range_t roots[] = {{BASE, BASE + 0x100}};
    ml_reach_io_t io = {.read = page_read, .max_edges = graph_cap};
    reads_n = 0;
    cr_assert_eq(ml_reach_classify(b, 1000, roots, 1, &io, v, st), 0);
}

static void expect_whole_chain(const uint8_t *v, const ml_reach_stats_t *st) {
    cr_expect_eq(v[0], ML_REACH_REACHABLE);
    cr_expect_eq(v[1], ML_REACH_DEFINITE);
    for (int i = 2; i < 1000; i++) cr_expect_eq(v[i], ML_REACH_INDIRECT, "block %d", i);
    cr_expect_eq(st->reachable, 1);
    cr_expect_eq(st->definite, 1);
    cr_expect_eq(st->indirect, 998);
    cr_expect_eq(st->heap_bytes, 1000 * 16);
}

Test(reach, neighbours_share_one_read) {
    static ml_live_block_t b[1000];
    uint8_t v[1000];
    ml_reach_stats_t st;
    bad_page = 0;
    longest_ok = 0;
    graph_cap = 0;
    chain_of_1000(b, v, &st);
    expect_whole_chain(v, &st);
    cr_expect_not(st.graph_given_up);
    /* the whole graph (blocks 0-999 in one span), then the root */
    cr_expect_eq(reads_n, 2, "%zu requests", reads_n);
    /* Without the graph: the root, block 0 (reached), then blocks 1-999
     * (the leaked graph). */
    graph_cap = -1;
    chain_of_1000(b, v, &st);
    graph_cap = 0;
    expect_whole_chain(v, &st);
    cr_expect(st.graph_given_up);
    cr_expect_eq(reads_n, 1 + 3, "%zu requests", reads_n);
}

Test(reach, a_span_that_cannot_be_read_is_read_block_by_block) {
    static ml_live_block_t b[1000];
    uint8_t v[1000];
    ml_reach_stats_t st;
    bad_page = 0;
    longest_ok = 256; /* the root, or a few blocks */
    graph_cap = 0;
    chain_of_1000(b, v, &st);
    expect_whole_chain(v, &st);
    /* the span of blocks 0-999 that failed, each again, the root */
    cr_expect_eq(reads_n, 1 + 1000 + 1, "%zu requests", reads_n);
    /* Without the graph: its failed span and blocks 0 and 1 again (1 holds
     * the first edge: the graph is given up), then the root, block 0, the
     * span of blocks 1-999 that failed, each again. */
    graph_cap = -1;
    chain_of_1000(b, v, &st);
    graph_cap = 0;
    longest_ok = 0;
    expect_whole_chain(v, &st);
    cr_expect_eq(reads_n, 3 + 3 + 999, "%zu requests", reads_n);
}

static void unreadable_page(int64_t cap) {
    static ml_live_block_t b[1000];
    uint8_t v[1000];
    ml_reach_stats_t st;
    bad_page = BASE + 0x4000; /* blocks 384-511 */
    longest_ok = 0;
    graph_cap = cap;
    chain_of_1000(b, v, &st);
    graph_cap = 0;
    bad_page = 0;
    /* 1 leads 2-384 (383's pointer is readable); 385-511 are reached by
     * nothing readable and point nowhere: each its own leader; 512 leads
     * 513-999. */
    cr_expect_eq(v[0], ML_REACH_REACHABLE);
    cr_expect_eq(v[1], ML_REACH_DEFINITE);
    for (int i = 2; i <= 384; i++) cr_expect_eq(v[i], ML_REACH_INDIRECT, "block %d", i);
    for (int i = 385; i <= 512; i++) cr_expect_eq(v[i], ML_REACH_DEFINITE, "block %d", i);
    for (int i = 513; i < 1000; i++) cr_expect_eq(v[i], ML_REACH_INDIRECT, "block %d", i);
    cr_expect_eq(st.definite, 129);
    cr_expect_eq(st.indirect, 870);
    cr_expect_eq(st.heap_bytes, (1000 - 128) * 16);
}

Test(reach, blocks_on_an_unreadable_page_are_not_scanned) {
    unreadable_page(0);
    unreadable_page(-1);
}

/* Lists as bench/exit_scan_workload.c makes them: 16 lists of 32 blocks of
 * 16 bytes, 64 apart, each list in a 2 KiB run of its own, each block
 * pointing at the one before it; the root holds the last block of every
 * even list. Read as the marks reach them, the lists' blocks of one level
 * lie 2 KiB apart: a request each (exit_scan_bench's lists: most of the
 * scan's time). The whole graph reads them in one span. */
static void lists(int64_t cap, ml_reach_stats_t *st, uint8_t *v) {
    static ml_live_block_t b[512];
    memset(MEM, 0, sizeof MEM);
    for (int i = 0; i < 512; i++) b[i] = (ml_live_block_t){BASE + 0x1000 + 64 * (uint64_t)i, 16};
    for (int l = 0; l < 16; l++) {
        for (int i = 1; i < 32; i++) put(b[l * 32 + i].ptr, b[l * 32 + i - 1].ptr);
        if (l % 2 == 0) put(BASE + 8 * (uint64_t)l, b[l * 32 + 31].ptr);
    }
    ml_range_t roots[] = {{BASE, BASE + 0x100}};
    ml_reach_io_t io = {.read = page_read, .max_edges = cap};
    bad_page = 0;
    longest_ok = 0;
    reads_n = 0;
    cr_assert_eq(ml_reach_classify(b, 512, roots, 1, &io, v, st), 0);
    cr_expect_eq(st->reachable, 8 * 32);
    cr_expect_eq(st->definite, 8);
    cr_expect_eq(st->indirect, 8 * 31);
    cr_expect_eq(st->possible, 0);
    for (int l = 0; l < 16; l++)
        for (int i = 0; i < 32; i++)
            cr_expect_eq(v[l * 32 + i],
                         l % 2 == 0 ? ML_REACH_REACHABLE : i == 31 ? ML_REACH_DEFINITE : ML_REACH_INDIRECT,
                         "list %d block %d", l, i);
}

/* find()'s page index: 400 blocks of 48 bytes, 80 apart, so that some
 * start on one page and end on the next. The root points into each block
 * at its last word (an interior pointer: possible) -- for the blocks that
 * straddle a page, that word is on the next page, where only the index's
 * "block before the page" finds them -- and at the first byte of every
 * tenth (reachable). Pointers into the gaps find nothing. */
Test(reach, words_on_the_next_page_find_their_block) {
    static ml_live_block_t b[401];
    memset(MEM, 0, sizeof MEM);
    for (int i = 0; i < 400; i++) b[i] = (ml_live_block_t){BASE + 0x2000 + 80 * (uint64_t)i, 48};
    int straddle = 0;
    for (int i = 0; i < 400; i++) {
        uint64_t w = i % 10 ? b[i].ptr + 40 : b[i].ptr;
        put(BASE + 8 * (uint64_t)i, w);
        straddle += (b[i].ptr >> 12) != ((b[i].ptr + 47) >> 12) && (w >> 12) != (b[i].ptr >> 12);
    }
    for (int i = 0; i < 40; i++) put(BASE + 0x1000 + 8 * (uint64_t)i, b[i].ptr + 60); /* gaps */
    cr_assert_geq(straddle, 3, "blocks whose pointed-to word is on their next page: %d", straddle);
    /* A block over three pages, pointed into on its middle page, where no
     * block starts. */
    b[400] = (ml_live_block_t){BASE + 0xa000, 0x3000};
    put(BASE + 0x1800, BASE + 0xb800);
    ml_range_t roots[] = {{BASE, BASE + 0x2000}};
    ml_reach_io_t io = {.read = fake_read};
    uint8_t v[401];
    ml_reach_stats_t st;
    cr_assert_eq(ml_reach_classify(b, 401, roots, 1, &io, v, &st), 0);
    for (int i = 0; i < 400; i++)
        cr_expect_eq(v[i], i % 10 ? ML_REACH_POSSIBLE : ML_REACH_REACHABLE, "block %d", i);
    cr_expect_eq(v[400], ML_REACH_POSSIBLE, "the big block");
}

Test(reach, lists_are_read_in_one_span) {
    ml_reach_stats_t st;
    uint8_t v[512];
    lists(0, &st, v);
    cr_expect_not(st.graph_given_up);
    cr_expect_eq(reads_n, 1 + 1, "%zu requests", reads_n); /* the graph, the root */
    cr_expect_eq(st.heap_bytes, 512 * 16);
    /* Without the graph: the graph's span (given up at its first edge), the
     * root, 8 requests a level for 32 levels, and a span per leaked list. */
    lists(-1, &st, v);
    cr_expect(st.graph_given_up);
    cr_expect_eq(reads_n, 1 + 1 + 8 * 32 + 8, "%zu requests", reads_n);
}

/* Blocks that cross a page boundary, 8-byte aligned or not, are scanned
 * whole, every word from the block's start. */
Test(reach, blocks_across_pages) {
    memset(MEM, 0, sizeof MEM);
    ml_live_block_t b[] = {
        {BASE + 0x1ff8, 32}, /* 0: aligned, words on pages 0x101 and 0x102 */
        {BASE + 0x2ffc, 16}, /* 1: 4-aligned, its first word straddles 0x102/0x103 */
        {BASE + 0x5000, 16}, /* 2: from 0's first word */
        {BASE + 0x6000, 16}, /* 3: from 0's last word */
        {BASE + 0x7000, 16}, /* 4: from 1's straddling word */
    };
    put(BASE + 0x10, b[0].ptr);
    put(BASE + 0x18, b[1].ptr);
    put(b[0].ptr, b[2].ptr);
    put(b[0].ptr + 24, b[3].ptr);
    put(b[1].ptr, b[4].ptr);
    ml_range_t roots[] = {{BASE, BASE + 0x100}};
    ml_reach_io_t io = {.read = fake_read};
    uint8_t v[5];
    ml_reach_stats_t st;
    cr_assert_eq(ml_reach_classify(b, 5, roots, 1, &io, v, &st), 0);
    for (int i = 0; i < 5; i++) cr_expect_eq(v[i], ML_REACH_REACHABLE, "block %d", i);
    cr_expect_eq(st.heap_bytes, 32 + 4 * 16);
}

/* The graph read on several threads (ml_reach_io_t.threads) is the one a
 * single thread reads: 300,000 blocks 64 bytes apart, with pointers across
 * the whole range (so across every thread's share), in ten kinds by index
 * mod 10:
 *   0: the spine, reachable from the root: its words point at the start of
 *      block i+10, inside block i+3, and at the start of block i+6;
 *   1: leaked, points at the start of the kind-2 block half the heap away;
 *   2: indirect (only kind 1 points at it, from below or above);
 *   3: possible (only an interior pointer from the spine);
 *   4, 5: a leaked pair pointing at each other: 4 definite, 5 indirect;
 *   6: reachable;
 *   7: leaked, points at a spine block;
 *   8, 9: leaked, no pointers. */
#define WIDE_N 300000u
#define WIDE_BASE 0x10000000ull
static uint8_t *wide_mem;   /* WIDE_N * 64 bytes from WIDE_BASE */
static uint64_t wide_root;  /* the root: one word, block 0's address */
static pthread_t wide_main;
static _Atomic int wide_elsewhere; /* reads made on another thread than the test's */

static int wide_read(void *ctx, ml_reach_req_t *r, size_t n) {
    (void)ctx;
    if (!pthread_equal(pthread_self(), wide_main)) atomic_fetch_add(&wide_elsewhere, 1);
    for (size_t i = 0; i < n; i++) {
        r[i].got = 0;
        if (r[i].addr == 0x1000 && r[i].len == 8) {
            memcpy(r[i].buf, &wide_root, 8);
            r[i].got = 8;
        } else if (r[i].addr >= WIDE_BASE && r[i].addr + r[i].len <= WIDE_BASE + 64ull * WIDE_N) {
            memcpy(r[i].buf, wide_mem + (r[i].addr - WIDE_BASE), r[i].len);
            r[i].got = r[i].len;
        }
    }
    return 0;
}

static void wide_put(uint64_t at, uint64_t v) {
    memcpy(wide_mem + (at - WIDE_BASE), &v, 8);
}

static void wide_heap(ml_live_block_t *b) {
    memset(wide_mem, 0, 64ull * WIDE_N);
    for (uint32_t i = 0; i < WIDE_N; i++)
        b[i] = (ml_live_block_t){WIDE_BASE + 64ull * i, i % 10 == 0 ? 48 : 16 + (i % 3) * 16};
    wide_root = b[0].ptr;
    for (uint32_t i = 0; i < WIDE_N; i++) {
        switch (i % 10) {
        case 0:
            if (i + 10 < WIDE_N) wide_put(b[i].ptr, b[i + 10].ptr);
            wide_put(b[i].ptr + 8, b[i + 3].ptr + 8);
            wide_put(b[i].ptr + 16, b[i + 6].ptr);
            break;
        case 1: wide_put(b[i].ptr, b[(i + 1 + WIDE_N / 2) % WIDE_N].ptr); break;
        case 4: wide_put(b[i].ptr, b[i + 1].ptr); break;
        case 5: wide_put(b[i].ptr + 8, b[i - 1].ptr); break;
        case 7: wide_put(b[i].ptr, b[i - 7].ptr); break;
        case 8: wide_put(b[i].ptr, 12345); break;
        default: break;
        }
    }
}

static void wide_scan(const ml_live_block_t *b, int threads, int64_t max_edges, uint8_t *v,
                      ml_reach_stats_t *st) {
    ml_range_t roots[] = {{0x1000, 0x1008}};
    ml_reach_io_t io = {.read = wide_read, .threads = threads, .max_edges = max_edges};
    wide_main = pthread_self();
    atomic_store(&wide_elsewhere, 0);
    cr_assert_eq(ml_reach_classify(b, WIDE_N, roots, 1, &io, v, st), 0, "threads %d", threads);
}

/* A warning about the state at a build (here: no exit scan yet) is said
 * again or not by the next build, and is not saved in a snapshot: the live
 * viewer builds its session while it is fed, and its snapshot kept saying
 * "no exit-time reachability scan" after the scan had come. */
static bool warned(const ml_analysis_t *x, const char *what) {
    const char *const *w;
    size_t n = ml_analysis_warnings(x, &w);
    for (size_t i = 0; i < n; i++)
        if (strstr(w[i], what)) return true;
    return false;
}

Test(analysis, a_build_warning_goes_once_it_no_longer_holds, .init = setup, .fini = teardown) {
    alloc(0x10000, 64, 1);
    exited();
    build(NULL);
    cr_assert(warned(A, "no exit-time reachability scan"));
    void *snap;
    size_t len;
    cr_assert_eq(ml_analysis_snapshot(A, &snap, &len), 0);
    ml_analysis_t *x;
    char err[256];
    cr_assert_eq(ml_analysis_new(&x), 0);
    cr_assert_eq(ml_analysis_restore(x, snap, len, err, sizeof err), 0, "%s", err);
    free(snap);
    cr_expect_not(warned(x, "no exit-time reachability scan"), "saved in the snapshot");
    ml_analysis_free(x);
    ml_record_t r = {.tag = ML_T_BLOCK_REACH};
    r.u.block_reach.ptr = 0x10000;
    r.u.block_reach.reach = ML_REACH_REACHABLE;
    ml_analysis_feed(A, &r);
    ml_record_t s = {.tag = ML_T_REACH_SCAN};
    ml_analysis_feed(A, &s);
    build(NULL);
    cr_expect_not(warned(A, "no exit-time reachability scan"), "still there after the scan");
    cr_expect(ml_analysis_leaks(A)->scanned);
}

/* A list through every block: read on threads, each thread's last block
 * points into the next one's share, and its edge must survive (the runs'
 * edges are kept apart, reach.c). */
Test(reach, a_list_across_the_threads_shares_stays_reachable) {
    wide_mem = malloc(64ull * WIDE_N);
    ml_live_block_t *b = malloc(WIDE_N * sizeof *b);
    uint8_t *v = malloc(WIDE_N);
    cr_assert(wide_mem && b && v);
    memset(wide_mem, 0, 64ull * WIDE_N);
    for (uint32_t i = 0; i < WIDE_N; i++) b[i] = (ml_live_block_t){WIDE_BASE + 64ull * i, 16 + (i % 3) * 16};
    for (uint32_t i = 0; i + 1 < WIDE_N; i++) wide_put(b[i].ptr + 8 * (i % 2), b[i + 1].ptr);
    wide_root = b[0].ptr;
    for (int threads = 1; threads <= 4; threads *= 2) {
        ml_reach_stats_t st;
        wide_scan(b, threads, 0, v, &st);
        cr_expect_not(st.graph_given_up);
        cr_expect_eq(st.reachable, WIDE_N, "threads %d: %llu reachable", threads, (unsigned long long)st.reachable);
    }
    free(v);
    free(b);
    free(wide_mem);
}

/* The collector's table reads the blocks in place from the session's live
 * set: the same blocks, addresses and sizes as an array of them, and the
 * same verdicts, after frees left dead entries in the set's pages. */
Test(reach, the_live_set_read_in_place_is_the_same_table) {
    wide_mem = malloc(64ull * WIDE_N);
    ml_live_block_t *b = malloc(WIDE_N * sizeof *b), *kept = malloc(WIDE_N * sizeof *kept);
    uint8_t *v1 = malloc(WIDE_N), *v2 = malloc(WIDE_N);
    cr_assert(wide_mem && b && kept && v1 && v2);
    wide_heap(b);
    ml_analysis_t *x = session_4k();
    for (uint32_t i = 0; i < WIDE_N; i++) alloc_in(x, b[i].ptr, b[i].size, 0, 1);
    /* Every 13th block freed, and a run of 100 pages' worth, where one
     * block of those 100 pages then lies; a block held by the root points
     * into its 74th page, whose page has no block starting in it. */
    size_t n = 0, big_at = 0;
    for (uint32_t i = 0; i < WIDE_N; i++) {
        if (i % 13 == 5 || (i >= 1000 && i < 7400)) dealloc_in(x, b[i].ptr, 2);
        else kept[n++] = b[i];
        if (i == 7399) {
            big_at = n;
            kept[n++] = (ml_live_block_t){b[1000].ptr, 6400 * 64};
            alloc_in(x, b[1000].ptr, 6400 * 64, 0, 3);
        }
    }
    memset(wide_mem + 64 * 1000, 0, 6400 * 64);
    wide_put(b[0].ptr + 24, b[1000].ptr + 300000);
    ml_reach_blocks_t t;
    cr_assert_eq(ml_analysis_live_reach_blocks(x, &t), (int64_t)n);
    cr_assert_null(t.arr);
    uint64_t hint = 0, ptr, size;
    for (size_t i = 0; i < n; i++) {
        ml_reach_block_at(&t, i, &hint, &ptr, &size);
        if (ptr != kept[i].ptr || size != kept[i].size)
            cr_assert_fail("block %zu: %#llx/%llu, not %#llx/%llu", i, (unsigned long long)ptr,
                           (unsigned long long)size, (unsigned long long)kept[i].ptr,
                           (unsigned long long)kept[i].size);
    }
    for (size_t i = 0; i < n; i += 997) {
        cr_expect_eq(ml_reach_block_ptr(&t, i), kept[i].ptr, "block %zu", i);
        cr_expect_eq(ml_reach_blocks_first(&t, kept[i].ptr), i);
        cr_expect_eq(ml_reach_blocks_first(&t, kept[i].ptr + 1), i + 1);
    }
    cr_expect_eq(ml_reach_blocks_first(&t, 0), 0);
    cr_expect_eq(ml_reach_blocks_first(&t, kept[n - 1].ptr + 1), n);
    for (int threads = 1; threads <= 2; threads++) {
        ml_range_t roots[] = {{0x1000, 0x1008}};
        ml_reach_io_t io = {.read = wide_read, .threads = threads};
        ml_reach_stats_t s1, s2;
        cr_assert_eq(ml_reach_classify(kept, n, roots, 1, &io, v1, &s1), 0);
        cr_assert_eq(ml_reach_classify_blocks(&t, roots, 1, &io, v2, &s2), 0);
        cr_expect_eq(memcmp(v1, v2, n), 0, "threads %d: other verdicts", threads);
        cr_expect_eq(v2[big_at], ML_REACH_POSSIBLE);
        cr_expect_eq(s1.definite, s2.definite);
        cr_expect_eq(s1.indirect, s2.indirect);
        cr_expect_eq(s1.possible, s2.possible);
        cr_expect_gt(s1.possible, 0);
        cr_expect_gt(s1.indirect, 0);
        cr_expect_eq(s1.heap_bytes, s2.heap_bytes);
    }
    ml_reach_blocks_free(&t);
    ml_analysis_free(x);
    free(v1);
    free(v2);
    free(kept);
    free(b);
    free(wide_mem);
}

Test(reach, the_graph_read_on_threads_is_the_same_graph) {
    wide_mem = malloc(64ull * WIDE_N);
    ml_live_block_t *b = malloc(WIDE_N * sizeof *b);
    uint8_t *one = malloc(WIDE_N), *many = malloc(WIDE_N);
    cr_assert(wide_mem && b && one && many);
    wide_heap(b);
    static const uint8_t want[10] = {ML_REACH_REACHABLE, ML_REACH_DEFINITE, ML_REACH_INDIRECT,
                                     ML_REACH_POSSIBLE,  ML_REACH_DEFINITE, ML_REACH_INDIRECT,
                                     ML_REACH_REACHABLE, ML_REACH_DEFINITE, ML_REACH_DEFINITE,
                                     ML_REACH_DEFINITE};
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < WIDE_N; i++) bytes += b[i].size;
    ml_reach_stats_t s1, sn;
    wide_scan(b, 1, 0, one, &s1);
    cr_expect_eq(atomic_load(&wide_elsewhere), 0);
    for (uint32_t i = 0; i < WIDE_N; i++)
        if (one[i] != want[i % 10]) cr_assert_fail("block %u: verdict %u, not %u", i, one[i], want[i % 10]);
    cr_expect_not(s1.graph_given_up);
    cr_expect_eq(s1.reachable, 2 * WIDE_N / 10);
    cr_expect_eq(s1.possible, WIDE_N / 10);
    cr_expect_eq(s1.indirect, 2 * WIDE_N / 10);
    cr_expect_eq(s1.definite, 5 * WIDE_N / 10);
    cr_expect_eq(s1.heap_bytes, bytes);
    /* 2 to 4 threads take shares of at least 65,536 blocks; 8 asks for
     * more than that allows (4 are used). */
    for (int threads = 2; threads <= 8; threads *= 2) {
        wide_scan(b, threads, 0, many, &sn);
        cr_expect_gt(atomic_load(&wide_elsewhere), 0, "threads %d: all read on one", threads);
        cr_expect_eq(memcmp(one, many, WIDE_N), 0, "threads %d: other verdicts", threads);
        cr_expect_not(sn.graph_given_up);
        cr_expect_eq(sn.heap_bytes, bytes, "threads %d", threads);
        cr_expect_eq(sn.definite, s1.definite);
        cr_expect_eq(sn.indirect, s1.indirect);
    }
    /* 210,000 edges in all: past a cap of 100,000 the threads' graph is
     * given up as one thread's is, and the verdicts stay. */
    wide_scan(b, 3, 100000, many, &sn);
    cr_expect(sn.graph_given_up);
    cr_expect_eq(memcmp(one, many, WIDE_N), 0, "the fallback's verdicts differ");
    free(wide_mem);
    free(b);
    free(one);
    free(many);
}

/* Past 65,535 threads the recorder gives every later thread the last
 * index: the threads table cannot tell them apart, and the report says so
 * (a thread-per-request server starts that many in a day). */
Test(analysis, threads_past_the_last_index_are_said_to_share_it, .init = setup, .fini = teardown) {
    ml_record_t th = {.tag = ML_T_THREAD};
    th.u.thread.name = "worker";
    th.u.thread.index = 65534;
    th.u.thread.tid = 100;
    ml_analysis_feed(A, &th);
    alloc(0x10000, 100, 1);
    build(NULL);
    cr_expect_not(warned(A, "more than 65,535 threads"), "65,535 threads: each has its own entry");
    th.u.thread.index = 65535;
    th.u.thread.tid = 101;
    ml_analysis_feed(A, &th);
    th.u.thread.tid = 102;
    ml_analysis_feed(A, &th);
    ml_record_t r = {.tag = ML_T_ALLOC, .thread = 65535, .time_ms = T++};
    r.u.alloc.ptr = 0x20000;
    r.u.alloc.size = 300;
    r.u.alloc.stack = 1;
    ml_analysis_feed(A, &r);
    build(NULL);
    cr_expect(warned(A, "this process started more than 65,535 threads: the last entry of the threads table "
                        "(index 65535) counts the 65,536th thread and every one after it together"));
}

Test(analysis, per_thread_split, .init = setup, .fini = teardown) {
    ml_record_t th = {.tag = ML_T_THREAD};
    th.u.thread.index = 1;
    th.u.thread.tid = 4242;
    th.u.thread.name = "worker";
    ml_analysis_feed(A, &th);
    alloc(0x10000, 100, 1);
    ml_record_t r = {.tag = ML_T_ALLOC, .thread = 1};
    r.u.alloc.ptr = 0x20000;
    r.u.alloc.size = 300;
    r.u.alloc.stack = 2;
    ml_analysis_feed(A, &r);
    ml_record_t f = {.tag = ML_T_FREE, .thread = 1};
    f.u.alloc.kind = ML_KIND_FREE;
    f.u.alloc.ptr = 0x20000;
    ml_analysis_feed(A, &f);
    build(NULL);
    const ml_thread_stats_t *t;
    size_t n = ml_analysis_threads(A, &t);
    cr_assert_eq(n, 2);
    cr_expect_eq(t[0].index, 0);
    cr_expect_eq(t[0].alloc_calls, 1);
    cr_expect_eq(t[0].bytes_allocated, 100);
    cr_expect_eq(t[1].index, 1);
    cr_expect_eq(t[1].tid, 4242);
    cr_expect_str_eq(t[1].name, "worker");
    cr_expect_eq(t[1].bytes_allocated, 300);
    cr_expect_eq(t[1].free_calls, 1);
    cr_expect_eq(t[1].temporary_allocs, 1);
    cr_expect_eq(site_at(0x2000)->thread_mask, 2);
}

/* Many distinct stacks: the site table grows past its first size. */
Test(analysis, thousands_of_sites, .init = setup, .fini = teardown, .timeout = 30) {
    for (uint32_t id = 5; id < 6005; id++) {
        ml_record_t n = {.tag = ML_T_NODE};
        n.u.node.id = id;
        n.u.node.parent = 1;
        n.u.node.pc = 0x100000ull + id * 16;
        ml_analysis_feed(A, &n);
        alloc(0x10000000ull + id * 64, id, id);
    }
    build(NULL);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(A, &n);
    cr_expect_eq(n, 6000);
    cr_expect_eq(s[0].peak_bytes, 6004, "ordered by peak: the largest first");
    const ml_calltree_node_t *f;
    size_t k = ml_analysis_flame(A, &f);
    cr_expect_leq(k, 5000);
    cr_expect_eq(f[0].incl[ML_COST_ALLOCATED], ml_analysis_totals(A)->bytes_allocated);
}

/* ------------------------------------------------------------------------- */
/* Out of memory while feeding: counted and reported, never silent           */
/* ------------------------------------------------------------------------- */

/* The allocator hook of the analysis' tables (ml_util.h): every calloc of
 * at least `big` bytes fails. The blocks below are one per 4 KiB page, so
 * each takes a chunk of the live set (live.c) and an entry of its page
 * directory, a map of 16-byte entries: its table of 2048 slots fits under
 * 64 KiB, the next (4096) does not, so it holds 1536 pages (3/4). */
static size_t big;

static void *calloc_below(size_t n, size_t size) {
    return n * size >= big ? NULL : calloc(n, size);
}

static void starve(void) {
    big = 64 * 1024;
    ml_set_alloc_hooks(&(ml_alloc_hooks_t){.calloc = calloc_below});
}

static const char *lost_warning(void) {
    const char *const *w;
    size_t n = ml_analysis_warnings(A, &w);
    const char *found = NULL;
    for (size_t i = 0; i < n; i++)
        if (strstr(w[i], "out of memory")) {
            cr_assert_null(found, "one warning counts every loss");
            found = w[i];
        }
    return found;
}

static void feed_2000_blocks(void) {
    for (uint64_t i = 0; i < 2000; i++) alloc(0x10000000ull + i * 4096, 16, 1);
}

Test(analysis, out_of_memory_drops_are_counted_and_reported, .init = setup, .fini = teardown) {
    starve();
    feed_2000_blocks();
    ml_set_alloc_hooks(NULL);
    const ml_totals_t *t = ml_analysis_totals(A);
    cr_expect_eq(t->alloc_calls, 2000, "every call is counted");
    cr_expect_eq(t->heap_blocks, 1536, "what the directory could hold is tracked");
    cr_expect_eq(t->heap_bytes, 1536 * 16);
    const char *w = lost_warning();
    cr_assert_not_null(w, "the dropped blocks are not silent");
    cr_expect(strstr(w, "464 blocks were not tracked") != NULL, "%s", w);
    cr_expect(strstr(w, " 0 records were kept incompletely") != NULL, "%s", w);

    /* Memory is back: the next block is tracked, the count stays. */
    alloc(0x20000000ull, 16, 1);
    cr_expect_eq(t->heap_blocks, 1537);
    cr_expect(strstr(lost_warning(), "464 blocks") != NULL);

    /* The report shows it. */
    build(NULL);
    char *text = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&text, &len);
    cr_assert_not_null(o);
    cr_assert_eq(ml_report_text(o, A, "t.mlt", 10), 0);
    fclose(o);
    char *section = strstr(text, "\nwarnings:\n");
    cr_assert_not_null(section, "%s", text);
    cr_expect(strstr(section, "out of memory while analysing: 464 blocks were not tracked") != NULL,
              "%s", section);
    free(text);
}

Test(analysis, out_of_memory_in_a_light_session) {
    cr_assert_eq(ml_analysis_new_light(&A), 0);
    T = 0;
    starve();
    feed_2000_blocks();
    ml_set_alloc_hooks(NULL);
    cr_expect_eq(ml_analysis_totals(A)->heap_blocks, 1536);
    cr_expect_eq(ml_analysis_totals(A)->peak_bytes, 1536 * 16);
    const char *w = lost_warning();
    cr_assert_not_null(w);
    cr_expect(strstr(w, "464 blocks were not tracked") != NULL, "%s", w);
    ml_analysis_free(A);
}

/* A program that frees most of its heap after the peak: once the peak's
 * graveyard holds a sixteenth of its blocks, 93,750 here (analysis.c,
 * GRAVE_CLOSE_MIN is less), the peak's
 * fragmentation is computed on the spot and the graveyard dropped. It must
 * be what a session that stopped at the peak computes for its end. */
Test(analysis, a_freed_heap_closes_the_peak_with_the_same_fragmentation, .init = setup, .fini = teardown,
     .timeout = 60) {
    const uint64_t n = 1500000, base = 0x10000000;
    ml_analysis_t *stop = session_4k();
    for (uint64_t i = 0; i < n; i++) {
        /* 48 bytes every 64, and a 1 KiB hole every 100 blocks */
        uint64_t ptr = base + i * 64 + (i / 100) * 1024;
        alloc_in(stop, ptr, 48, 1, T);
        alloc(ptr, 48, 1);
    }
    cr_assert_eq(ml_analysis_sites_in_range(A, ML_MOMENT_PEAK, base, base + 4096, NULL, 0), 0,
                 "the peak's blocks are there before the frees");
    for (uint64_t i = 0; i < 1200000; i++) dealloc(base + i * 64 + (i / 100) * 1024);
    alloc(0x900000000, 4096, 2); /* below the peak: it stays where it was */
    ml_share_t sh[4];
    cr_expect_eq(ml_analysis_sites_in_range(A, ML_MOMENT_PEAK, base, base + 4096, sh, 4), -ENOTSUP,
                 "the peak was closed: its graveyard is gone");
    build(NULL);
    ml_build_opts_t o = {.no_symbols = true};
    char err[256];
    cr_assert_eq(ml_analysis_build(stop, &o, err, sizeof err), 0, "%s", err);
    const ml_frag_t *p = ml_analysis_frag(A, ML_MOMENT_PEAK), *q = ml_analysis_frag(stop, ML_MOMENT_END);
    cr_expect_eq(p->live_blocks, n);
    cr_expect_eq(p->live_bytes, n * 48);
    cr_expect_eq(p->map_base, base);
    cr_expect_eq(p->live_blocks, q->live_blocks);
    cr_expect_eq(p->live_bytes, q->live_bytes);
    cr_expect_eq(p->pages, q->pages);
    cr_expect_eq(p->page_bytes, q->page_bytes);
    cr_expect_eq(p->free_bytes, q->free_bytes);
    cr_expect_eq(p->usable_bytes, q->usable_bytes);
    cr_expect_eq(p->largest_free_bytes, q->largest_free_bytes);
    cr_expect_eq(p->gaps, q->gaps);
    cr_expect_eq(p->map_ncells, q->map_ncells);
    cr_expect(p->page_utilization == q->page_utilization, "%f vs %f", p->page_utilization, q->page_utilization);
    cr_expect(p->map_cells && q->map_cells && !memcmp(p->map_cells, q->map_cells, p->map_ncells));
    ml_analysis_free(stop);
}

/* The session's time buckets (ml_time_buckets_acc_*) in 10 slices of 10 ms,
 * fed records r[0..n) and the end. */
static ml_time_buckets_t *ten_buckets(const ml_record_t *r, size_t n) {
    ml_time_buckets_acc_t *c;
    char err[256];
    cr_assert_eq(ml_time_buckets_acc_new(A, 10, &c, err, sizeof err), 0, "%s", err);
    for (size_t i = 0; i < n; i++) ml_time_buckets_acc_record(c, &r[i]);
    ml_time_buckets_acc_record(c, NULL);
    ml_time_buckets_t *tb;
    cr_assert_eq(ml_time_buckets_acc_finish(c, &tb, err, sizeof err), 0, "%s", err);
    ml_time_buckets_acc_free(c);
    uint32_t width;
    cr_expect_eq(ml_time_buckets_count(tb, &width), 10);
    cr_expect_eq(width, 10);
    return tb;
}

/* The page's blocks live at the end, by site, allocation bucket and leak
 * kind: each site's entries in (bucket, kind) order with their blocks and
 * bytes summed, whatever the order the live set holds the blocks in (the
 * addresses below are not in time order, and one site's clock goes back);
 * a block freed before the end is in none. */
Test(analysis, time_buckets_live_at_the_end, .init = setup, .fini = teardown) {
    static const struct {
        uint32_t t, stack;
        uint64_t ptr, size;
        uint8_t reach;
    } blk[] = {
        {0, 1, 0x90000, 10, ML_REACH_DEFINITE},   {3, 1, 0x20000, 20, ML_REACH_REACHABLE},
        {5, 1, 0x70000, 30, ML_REACH_DEFINITE},   {20, 2, 0x10000, 100, ML_REACH_DEFINITE},
        {1, 2, 0xa0000, 200, ML_REACH_DEFINITE},  {21, 2, 0x30000, 300, ML_REACH_REACHABLE},
        {22, 2, 0xb0000, 400, ML_REACH_DEFINITE}, {55, 1, 0x40000, 40, ML_REACH_POSSIBLE},
        {57, 1, 0x80000, 50, ML_REACH_INDIRECT},  {58, 1, 0x50000, 60, ML_REACH_POSSIBLE},
        {98, 3, 0x60000, 7, ML_REACH_INDIRECT},   {99, 1, 0xc0000, 70, ML_REACH_REACHABLE},
    };
    for (size_t i = 0; i < sizeof blk / sizeof *blk; i++) alloc_in(A, blk[i].ptr, blk[i].size, blk[i].stack, blk[i].t);
    dealloc_in(A, 0xb0000, 23);
    exited();
    ml_record_t r = {.tag = ML_T_BLOCK_REACH};
    for (size_t i = 0; i < sizeof blk / sizeof *blk; i++) {
        if (blk[i].ptr == 0xb0000) continue;
        r.u.block_reach.ptr = blk[i].ptr;
        r.u.block_reach.reach = blk[i].reach;
        ml_analysis_feed(A, &r);
    }
    ml_record_t scan = {.tag = ML_T_REACH_SCAN};
    ml_analysis_feed(A, &scan);
    build(NULL);
    ml_time_buckets_t *tb = ten_buckets(NULL, 0);
    static const struct {
        uint64_t pc;
        size_t n;
        ml_bucket_live_t b[5];
    } want[] = {
        {0x1000, 5, {{0, ML_LEAK_DEFINITE, 2, 40}, {0, ML_LEAK_REACHABLE, 1, 20}, {5, ML_LEAK_INDIRECT, 1, 50},
                     {5, ML_LEAK_POSSIBLE, 2, 100}, {9, ML_LEAK_REACHABLE, 1, 70}}},
        {0x2000, 3, {{0, ML_LEAK_DEFINITE, 1, 200}, {2, ML_LEAK_DEFINITE, 1, 100}, {2, ML_LEAK_REACHABLE, 1, 300}}},
        {0x3000, 1, {{9, ML_LEAK_INDIRECT, 1, 7}}},
    };
    for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
        const ml_site_t *s = site_at(want[w].pc);
        cr_assert_not_null(s, "the site of pc %#lx", (unsigned long)want[w].pc);
        size_t n;
        const ml_bucket_live_t *b = ml_time_buckets_live(tb, s->id, &n);
        cr_expect_eq(n, want[w].n, "pc %#lx: %zu entries", (unsigned long)want[w].pc, n);
        for (size_t i = 0; i < n && i < want[w].n; i++) {
            cr_expect_eq(b[i].bucket, want[w].b[i].bucket, "pc %#lx [%zu]: bucket %u", (unsigned long)want[w].pc, i,
                         b[i].bucket);
            cr_expect_eq(b[i].kind, want[w].b[i].kind, "pc %#lx [%zu]: kind %d", (unsigned long)want[w].pc, i,
                         (int)b[i].kind);
            cr_expect_eq(b[i].blocks, want[w].b[i].blocks, "pc %#lx [%zu]: blocks %lu", (unsigned long)want[w].pc,
                         i, (unsigned long)b[i].blocks);
            cr_expect_eq(b[i].bytes, want[w].b[i].bytes, "pc %#lx [%zu]: bytes %lu", (unsigned long)want[w].pc, i,
                         (unsigned long)b[i].bytes);
        }
    }
    ml_time_buckets_free(tb);
}

/* The page's per-site time buckets (ml_time_buckets_acc_*), fed the same
 * records as the session: a site's allocations in several buckets, a clock
 * that goes back (one pair's allocations on both sides of another's), and
 * the sums of each non-empty bucket in bucket order. */
Test(analysis, time_buckets_per_site, .init = setup, .fini = teardown) {
    static const struct {
        uint32_t t, stack;
        uint64_t size;
    } rec[] = {
        {0, 1, 10}, {5, 1, 20},  {40, 2, 100}, {50, 1, 30}, {10, 2, 200}, /* the clock goes back */
        {45, 2, 300}, {95, 1, 40}, {99, 2, 400}, {99, 3, 7},
    };
    ml_record_t r[sizeof rec / sizeof *rec];
    for (size_t i = 0; i < sizeof rec / sizeof *rec; i++) {
        r[i] = (ml_record_t){.tag = ML_T_ALLOC, .time_ms = rec[i].t};
        r[i].u.alloc.kind = ML_KIND_MALLOC;
        r[i].u.alloc.ptr = 0x10000 + 0x100 * i;
        r[i].u.alloc.size = rec[i].size;
        r[i].u.alloc.stack = rec[i].stack;
        ml_analysis_feed(A, &r[i]);
    }
    build(NULL);
    ml_time_buckets_t *tb = ten_buckets(r, sizeof r / sizeof *r);
    static const struct {
        uint64_t pc;
        size_t n;
        ml_bucket_alloc_t b[4];
    } want[] = {
        {0x1000, 3, {{0, 2, 30}, {5, 1, 30}, {9, 1, 40}}},
        {0x2000, 3, {{1, 1, 200}, {4, 2, 400}, {9, 1, 400}}},
        {0x3000, 1, {{9, 1, 7}}},
    };
    for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
        const ml_site_t *s = site_at(want[w].pc);
        cr_assert_not_null(s, "the site of pc %#lx", (unsigned long)want[w].pc);
        size_t n;
        const ml_bucket_alloc_t *b = ml_time_buckets_alloc(tb, s->id, &n);
        cr_expect_eq(n, want[w].n, "pc %#lx: %zu buckets", (unsigned long)want[w].pc, n);
        for (size_t i = 0; i < n && i < want[w].n; i++) {
            cr_expect_eq(b[i].bucket, want[w].b[i].bucket, "pc %#lx [%zu]: bucket %u", (unsigned long)want[w].pc, i,
                         b[i].bucket);
            cr_expect_eq(b[i].calls, want[w].b[i].calls, "pc %#lx [%zu]: calls %lu", (unsigned long)want[w].pc, i,
                         (unsigned long)b[i].calls);
            cr_expect_eq(b[i].bytes, want[w].b[i].bytes, "pc %#lx [%zu]: bytes %lu", (unsigned long)want[w].pc, i,
                         (unsigned long)b[i].bytes);
        }
    }
    ml_time_buckets_free(tb);
}

/* An mmap or munmap record (kind munmap) fed to A. */
static void map_op(uint8_t tag, uint64_t ptr, uint64_t size) {
    ml_record_t r = {.tag = tag, .time_ms = T++};
    r.u.alloc.kind = tag == ML_T_MMAP ? ML_KIND_MMAP : ML_KIND_MUNMAP;
    r.u.alloc.ptr = ptr;
    r.u.alloc.size = size;
    r.u.alloc.stack = 1;
    ml_analysis_feed(A, &r);
}

/* Mappings placed over each other (MAP_FIXED) and unmapped in random
 * ranges of a 512-page window: after every record, the bytes mapped and
 * the peak equal a page-by-page model of what the kernel maps. Only
 * unmaps from a mapping's start were counted before. */
Test(analysis, mappings_follow_the_pages_the_kernel_maps, .init = setup, .fini = teardown) {
    enum { PAGES = 512 };
    const uint64_t P = 4096, base = 0x7f0000000000ull;
    static unsigned char in[PAGES];
    memset(in, 0, sizeof in);
    uint64_t seed = 7, peak = 0;
    const ml_totals_t *t = ml_analysis_totals(A);
    for (int op = 0; op < 20000; op++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t x = (uint32_t)(seed >> 33);
        uint64_t s = x % PAGES, n = 1 + (x >> 9) % 40;
        if (s + n > PAGES) n = PAGES - s;
        bool map = (x >> 20) % 5 < 2; /* more unmaps than maps: mostly holes */
        /* A length the kernel rounds up, now and then. */
        uint64_t len = n * P - ((x >> 24) % 7 == 0 && !map ? P - 1 : 0);
        map_op(map ? ML_T_MMAP : ML_T_MUNMAP, base + s * P, len);
        uint64_t count = 0;
        for (uint64_t i = s; i < s + n; i++) in[i] = map;
        for (int i = 0; i < PAGES; i++) count += in[i];
        if (count * P > peak) peak = count * P;
        cr_assert_eq(t->mmap_bytes, count * P, "record %d (%s of pages %lu-%lu): %lu bytes, the pages %lu", op,
                     map ? "mmap" : "munmap", (unsigned long)s, (unsigned long)(s + n),
                     (unsigned long)t->mmap_bytes, (unsigned long)(count * P));
        cr_assert_eq(t->peak_mmap_bytes, peak);
    }
    /* Records no kernel would accept end without a hang and change nothing
     * they should not: an unaligned unmap (the call fails), a length of 0,
     * ranges that wrap the address space. */
    uint64_t before = t->mmap_bytes;
    map_op(ML_T_MUNMAP, base + 1, 8 * P);
    map_op(ML_T_MUNMAP, base, 0);
    cr_expect_eq(t->mmap_bytes, before);
    map_op(ML_T_MUNMAP, UINT64_MAX & ~(P - 1), UINT64_MAX);
    map_op(ML_T_MMAP, UINT64_MAX - 10, UINT64_MAX);
    map_op(ML_T_MUNMAP, UINT64_MAX & ~(P - 1), P);
    cr_expect_eq(t->mmap_bytes, before, "the mapping at the top of the address space is unmapped");
    map_op(ML_T_MMAP, 3, 1ull << 61);
    map_op(ML_T_MUNMAP, 0, UINT64_MAX);
    cr_expect_eq(t->mmap_bytes, 0, "one unmap of everything: %lu left", (unsigned long)t->mmap_bytes);
}

/* A sampled trace (one allocation per 1000 bytes on average): three sites
 * with one sample of 539 bytes each, a weight of 1 / (1 - exp(-0.539)) =
 * 2.39999 calls and 1293.59 bytes. The totals, rounded once, are 7 calls
 * and 3881 bytes; each site rounded alone gave 2 and 1294, which added up
 * to 6 calls and 3882 bytes (pprof's alloc_objects and alloc_space did not
 * add up to the report's totals). The sites now share the totals by
 * largest remainder. A sampled block counts as its weight, rounded (2),
 * live and at the peak, as it does in calls and bytes: it counted 1. */
Test(analysis, sampled_sites_add_up_to_the_totals_and_blocks_are_weighted) {
    ml_analysis_t *x;
    cr_assert_eq(ml_analysis_new(&x), 0);
    ml_record_t pr = {.tag = ML_T_PROCESS};
    pr.u.process.page_size = 4096;
    pr.u.process.sample_bytes = 1000;
    pr.u.process.exe = pr.u.process.parent_trace = pr.u.process.producer = "";
    ml_analysis_feed(x, &pr);
    for (uint32_t id = 1; id <= 3; id++) {
        ml_record_t n = {.tag = ML_T_NODE};
        n.u.node.id = id;
        n.u.node.pc = 0x1000ull * id;
        ml_analysis_feed(x, &n);
    }
    for (uint32_t k = 0; k < 3; k++) {
        ml_record_t r = {.tag = ML_T_ALLOC, .time_ms = k};
        r.u.alloc.kind = ML_KIND_MALLOC;
        r.u.alloc.flags = ML_EVF_SAMPLED;
        r.u.alloc.ptr = 0x100000 + 0x1000ull * k;
        r.u.alloc.size = 539;
        r.u.alloc.stack = k + 1;
        ml_analysis_feed(x, &r);
    }
    ml_build_opts_t o = {.no_symbols = true};
    char err[256];
    cr_assert_eq(ml_analysis_build(x, &o, err, sizeof err), 0, "%s", err);
    const ml_totals_t *t = ml_analysis_totals(x);
    cr_expect_eq(t->alloc_calls, 7);
    cr_expect_eq(t->bytes_allocated, 3881);
    cr_expect_eq(t->heap_blocks, 6, "three samples of weight 2.4: 2 blocks each, not 1");
    cr_expect_eq(t->peak_blocks, 6);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(x, &n);
    cr_assert_eq(n, 3);
    uint64_t calls = 0, bytes = 0;
    for (size_t i = 0; i < n; i++) {
        cr_expect(s[i].alloc_calls == 2 || s[i].alloc_calls == 3, "site %zu: %lu calls", i,
                  (unsigned long)s[i].alloc_calls);
        cr_expect(s[i].bytes_allocated == 1293 || s[i].bytes_allocated == 1294, "site %zu: %lu bytes", i,
                  (unsigned long)s[i].bytes_allocated);
        cr_expect_eq(s[i].peak_blocks, 2, "site %zu: its sample's weight, rounded", i);
        cr_expect_eq(s[i].live_at_exit_blocks, 2);
        calls += s[i].alloc_calls;
        bytes += s[i].bytes_allocated;
    }
    cr_expect_eq(calls, 7, "the sites' calls add up to the total");
    cr_expect_eq(bytes, 3881, "the sites' bytes add up to the total");
    ml_analysis_free(x);
}

/* A sampled block counts as its weight w as a whole number, floor(w) or
 * one more with the chance of w's fraction (drawn from its address), so
 * that many blocks of one size add up to about their estimated calls.
 * Rounded to the nearest, every block of one size was off the same way:
 * 1,000 samples of 17,900 bytes at one per 16,384 bytes (w = 1.50459)
 * counted 2,000 blocks live beside 1,505 estimated calls, a third more
 * blocks live than were ever allocated (valgrind: as many live as
 * allocated, nothing was freed). Half of them freed: the frees and the
 * blocks live take and leave the same numbers. */
Test(analysis, sampled_blocks_of_one_size_count_about_their_calls) {
    ml_analysis_t *x;
    cr_assert_eq(ml_analysis_new(&x), 0);
    ml_record_t pr = {.tag = ML_T_PROCESS};
    pr.u.process.page_size = 4096;
    pr.u.process.sample_bytes = 16384;
    pr.u.process.exe = pr.u.process.parent_trace = pr.u.process.producer = "";
    ml_analysis_feed(x, &pr);
    ml_record_t n = {.tag = ML_T_NODE};
    n.u.node.id = 1;
    n.u.node.pc = 0x1000;
    ml_analysis_feed(x, &n);
    for (uint32_t k = 0; k < 1000; k++) {
        ml_record_t r = {.tag = ML_T_ALLOC, .time_ms = 1};
        r.u.alloc.kind = ML_KIND_MALLOC;
        r.u.alloc.flags = ML_EVF_SAMPLED;
        r.u.alloc.ptr = 0x10000000 + 0x5000ull * k;
        r.u.alloc.size = 17900;
        r.u.alloc.stack = 1;
        ml_analysis_feed(x, &r);
    }
    const ml_totals_t *t = ml_analysis_totals(x);
    cr_expect_eq(t->alloc_calls, 1505);
    uint64_t all = t->heap_blocks;
    cr_expect(all >= 1460 && all <= 1550, "1,000 blocks of weight 1.50459: %lu blocks live",
              (unsigned long)all);
    cr_expect_eq(all, 1497, "the draw of these addresses");
    for (uint32_t k = 0; k < 1000; k += 2) {
        ml_record_t r = {.tag = ML_T_FREE, .time_ms = 2};
        r.u.alloc.kind = ML_KIND_FREE;
        r.u.alloc.ptr = 0x10000000 + 0x5000ull * k;
        ml_analysis_feed(x, &r);
    }
    cr_expect_eq(t->free_calls + t->heap_blocks, all, "frees and blocks live: %lu + %lu",
                 (unsigned long)t->free_calls, (unsigned long)t->heap_blocks);
    cr_expect(t->free_calls >= 710 && t->free_calls <= 795, "500 freed: %lu frees", (unsigned long)t->free_calls);
    ml_build_opts_t o = {.no_symbols = true};
    char err[256];
    cr_assert_eq(ml_analysis_build(x, &o, err, sizeof err), 0, "%s", err);
    size_t ns;
    const ml_site_t *s = ml_analysis_sites(x, &ns);
    cr_assert_eq(ns, 1);
    cr_expect_eq(s[0].alloc_calls, 1505);
    cr_expect_eq(s[0].peak_blocks, all);
    cr_expect_eq(s[0].freed_blocks, t->free_calls);
    cr_expect_eq(s[0].live_at_exit_blocks, t->heap_blocks);
    ml_analysis_free(x);
}
