/* test_keys.c - the screen manager and the panels without a terminal: keys
 * and mouse events go in, the virtual screen (canvas) is read back. This is
 * what STYLE.md rule 20 buys: htop can only test this through a terminal
 * emulator. */
#include "vtest.h"
#include "viewer_internal.h"

#include <malloc.h>

static char path[64];
static ml_vmodel_t *M;
static ml_screen_t *S;

static void open_screen(int cols, int rows) {
    M = v_model(path, sizeof path);
    ml_sm_opts_t o = {.cols = cols, .rows = rows, .unicode = true};
    S = ml__sm_new(M, &o);
    cr_assert(S);
    ml__sm_draw(S);
}

static void setup(void) {
    open_screen(80, 24);
}
static void teardown(void) {
    ml__sm_free(S);
    ml_vmodel_free(M);
    unlink(path);
}

/* A model of the trace at p, without symbols or the advisor. */
static void model_open(const char *p) {
    cr_assert_eq(ml_vmodel_new(&M), 0);
    ml_build_opts_t bo = {.no_symbols = true};
    ml_vmodel_set_build_opts(M, &bo);
    ml_vmodel_set_advice(M, false);
    char err[256];
    cr_assert_eq(ml_vmodel_open(M, p, err, sizeof err), 0, "%s", err);
}

/* Feeds keys like the loop does, drawing after each. */
static int keys(const char *const *k) {
    int r = 0;
    for (; *k; k++) {
        int key = ml__key_parse(*k);
        cr_assert_neq(key, ML_KEY_NONE, "key %s", *k);
        r = ml__sm_key(S, key);
        ml__sm_draw(S);
        if (r & ML_BREAK_LOOP) break;
    }
    return r;
}
#define KEYS(...) keys((const char *const[]){__VA_ARGS__, NULL})

static bool screen_has(const char *needle) {
    char *d = ml__canvas_dump(ml__sm_canvas(S));
    bool ok = d && strstr(d, needle);
    free(d);
    return ok;
}

static const char *row(int y) {
    static char buf[2048];
    return ml__canvas_row(ml__sm_canvas(S), y, buf, sizeof buf);
}

/* The row (in the body) showing needle, or -1. */
static int row_of(const char *needle) {
    const ml_canvas_t *c = ml__sm_canvas(S);
    for (int y = 0; y < c->rows; y++)
        if (strstr(row(y), needle)) return y;
    return -1;
}

Test(viewer_keys, summary_first_then_one_key_per_view, .init = setup, .fini = teardown) {
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SUMMARY);
    cr_expect(screen_has("Peak heap      9000 B (8.8 KiB) at 0.020s"));
    cr_expect(screen_has("exited with status 3"));
    cr_expect(screen_has("Leaked         2000 B (2.0 KiB) in 2 blocks"));
    /* The bottom bar lists every view. */
    const char *bar = row(23);
    cr_expect(strstr(bar, "1Summary") && strstr(bar, "2Sites") && strstr(bar, "3Tree") &&
                  strstr(bar, "4Timeline") && strstr(bar, "5HeapMap") && strstr(bar, "6Suggest") &&
                  strstr(bar, "7GPU") && strstr(bar, "qQuit"),
              "%s", bar);
    static const struct {
        const char *key;
        ml_view_t view;
        const char *shows;
    } v[] = {
        {"2", ML_VIEW_SITES, "SITE (function, file:line)"},
        {"3", ML_VIEW_TREE, "TOP-DOWN"},
        {"4", ML_VIEW_TIMELINE, "Timeline"},
        {"5", ML_VIEW_HEAPMAP, "Heap map at the peak"},
        {"6", ML_VIEW_SUGGEST, "STRATEGY"},
        {"7", ML_VIEW_GPU, "no GPU allocations recorded in this trace"},
        {"Tab", ML_VIEW_SUMMARY, "Summary"},
        {"1", ML_VIEW_SUMMARY, "Summary"},
        {"Tab", ML_VIEW_SITES, "SITE"},
        {"BTab", ML_VIEW_SUMMARY, "Summary"},
        {"?", ML_VIEW_HELP, "Everywhere"},
        {"Esc", ML_VIEW_SUMMARY, "Summary"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        KEYS(v[i].key);
        cr_expect_eq(ml__sm_view(S), v[i].view, "key %s", v[i].key);
        cr_expect(screen_has(v[i].shows), "key %s: %s not on screen", v[i].key, v[i].shows);
    }
}

Test(viewer_keys, sites_sort_select_open_and_back, .init = setup, .fini = teardown) {
    KEYS("2");
    /* Sorted by peak: B (5000 B, in libwidget, named by its caller in the
     * program: /opt is not the program's own code) first, then A. */
    int yb = row_of("shop+0x3000"), ya = row_of("shop+0x2000");
    cr_assert(yb > 0 && ya > yb, "B at %d, A at %d", yb, ya);
    cr_expect(strstr(row(1), "\xe2\x96\xbcPEAK"), "%s", row(1));
    /* Sort by calls: C (10 calls) first. */
    KEYS("C");
    cr_expect_eq(ml_vmodel_sort(M), ML_VSORT_CALLS);
    cr_expect(strstr(row(2), "shop+0x5000"), "%s", row(2));
    cr_expect(strstr(row(1), "\xe2\x96\xbc"
                             "CALLS"),
              "%s", row(1));
    KEYS("L");
    cr_expect(strstr(row(2), "shop+0x2000"), "%s", row(2));
    KEYS("T", "A", "P");
    cr_expect_eq(ml_vmodel_sort(M), ML_VSORT_PEAK);
    KEYS(">");
    cr_expect_eq(ml_vmodel_sort(M), ML_VSORT_LEAKED);
    KEYS("<");
    /* j moves to A (second by peak); Enter opens it. */
    KEYS("j", "Enter");
    cr_assert_eq(ml__sm_view(S), ML_VIEW_SITE);
    cr_expect(screen_has("Leaked      2000 B (2.0 KiB) in 2 blocks"));
    cr_expect(screen_has("Allocated   4000 B (3.9 KiB) in 4 calls, 0 temporary"));
    /* Frames are numbered without "#": "#N" is a site's number. */
    cr_expect(screen_has(" 0  [shop+0x2000]"));
    cr_expect(screen_has(" 1  [shop+0x1000]"));
    cr_expect(screen_has("Sizes"));
    KEYS("Esc");
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SITES);
    /* The selection stayed on A. */
    cr_expect_eq(ml__sm_panel(S, ML_VIEW_SITES)->sel, 1);
    KEYS("G");
    cr_expect_eq(ml__sm_panel(S, ML_VIEW_SITES)->sel, 2);
    KEYS("g");
    cr_expect_eq(ml__sm_panel(S, ML_VIEW_SITES)->sel, 0);
    KEYS("Down", "Down", "Up");
    cr_expect_eq(ml__sm_panel(S, ML_VIEW_SITES)->sel, 1);
    KEYS("PgDn");
    cr_expect_eq(ml__sm_panel(S, ML_VIEW_SITES)->sel, 2);
    KEYS("PgUp");
    cr_expect_eq(ml__sm_panel(S, ML_VIEW_SITES)->sel, 0);
}

Test(viewer_keys, search_filters_and_esc_clears, .init = setup, .fini = teardown) {
    KEYS("1", "/");
    /* `/` outside a list view goes to Sites and opens the prompt. */
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SITES);
    cr_expect(screen_has("Search (function, file, module):"));
    KEYS("w", "i", "d", "g");
    cr_expect_str_eq(ml_vmodel_filter(M), "widg");
    cr_expect_eq(ml_vmodel_nsites(M), 1);
    KEYS("BS");
    cr_expect_str_eq(ml_vmodel_filter(M), "wid");
    KEYS("Enter");
    cr_expect(screen_has("Filter \"wid\": 1 of 3 sites"));
    cr_expect_eq(row_of("shop+0x2000"), -1);
    /* The call tree follows the filter: only B's path is left. */
    KEYS("3", "*");
    cr_expect(screen_has("libwidget.so+0x4000"));
    cr_expect_eq(row_of("shop+0x5000"), -1);
    KEYS("Esc");
    cr_expect_str_eq(ml_vmodel_filter(M), "");
    cr_expect_eq(ml_vmodel_nsites(M), 3);
    /* Esc in the prompt restores the filter that was there. */
    KEYS("2", "/", "x", "y", "Esc");
    cr_expect_str_eq(ml_vmodel_filter(M), "");
}

Test(viewer_keys, call_tree_expand_collapse_and_bottom_up, .init = setup, .fini = teardown) {
    KEYS("3");
    cr_expect(screen_has("+ [shop+0x1000]"));
    KEYS("Right");
    cr_expect(screen_has("- [shop+0x1000]"));
    cr_expect(screen_has("+ [shop+0x3000]"));
    KEYS("Right", "Right");
    cr_expect_eq(ml__sm_panel(S, ML_VIEW_TREE)->sel, 1);
    cr_expect(screen_has("libwidget.so+0x4000"));
    KEYS("Left"); /* collapses helper */
    cr_expect_eq(row_of("libwidget.so+0x4000"), -1);
    KEYS("Left"); /* to the parent */
    cr_expect_eq(ml__sm_panel(S, ML_VIEW_TREE)->sel, 0);
    KEYS("b");
    cr_expect(screen_has("BOTTOM-UP"));
    cr_expect(strstr(row(2), "libwidget.so+0x4000"), "%s", row(2));
}

Test(viewer_keys, timeline_cursor_and_live_set, .init = setup, .fini = teardown) {
    KEYS("4");
    /* The cursor starts at the peak and lists the live set there. */
    cr_expect(screen_has("(the peak)"));
    cr_expect(screen_has("shop+0x3000"));
    cr_expect(screen_has("\xe2\x96\xbc peak 8.8K"));
    KEYS("G");
    cr_expect(screen_has("At 0.060s"));
    /* This trace has no RSS sample: none is shown, not "RSS 0B". */
    cr_expect(screen_has("RSS - (no sample by then; every 10 ms)"), "%s", row(row_of("At 0.060s")));
    cr_expect(!screen_has("RSS 0B"));
    cr_expect_eq(row_of("shop+0x3000"), -1);
    cr_expect(screen_has("shop+0x2000"));
    KEYS("p", "m");
    cr_expect(screen_has("[RSS]"));
    KEYS("b", "Left", "h", "Right", "l", "H", "L", "g");
    cr_expect(screen_has("At 0.000s"));
    /* Enter shows the heap map at the cursor. */
    KEYS("Enter");
    cr_expect_eq(ml__sm_view(S), ML_VIEW_HEAPMAP);
}

/* The cursor line's RSS is the last sample at or before the cursor; before
 * the first one there is none to show. */
Test(viewer_keys, timeline_rss_is_the_last_sample_before_the_cursor) {
    int fd = v_begin(path, sizeof path, 7, "/opt/app/bin/rss");
    v_node(1, 0, V_EXE_BASE + 0x1000);
    v_alloc(5, 0x100000, 4096, 1);
    ml_record_t r = {.tag = ML_T_RSS, .time_ms = 20};
    r.u.rss.rss_bytes = 3u << 20;
    r.u.rss.interval_ms = 10;
    v_add(&r);
    v_alloc(30, 0x200000, 4096, 1);
    v_end(fd, 40);
    model_open(path);
    cr_assert_eq(ml_vmodel_load_all(M), 0, "%s", ml_vmodel_error(M));
    ml_sm_opts_t o = {.cols = 100, .rows = 30, .unicode = true};
    S = ml__sm_new(M, &o);
    KEYS("4", "g");
    cr_expect(screen_has("At 0.000s: heap 0B  RSS - (no sample by then; every 10 ms)"), "%s",
              row(row_of("At 0.000s")));
    KEYS("G");
    cr_expect(screen_has("At 0.040s: heap 8.0K  RSS 3.0M (sampled every 10 ms)"), "%s", row(row_of("At 0.040s")));
    teardown();
}

Test(viewer_keys, heap_map_moments_and_cells, .init = setup, .fini = teardown) {
    KEYS("5");
    cr_expect(screen_has("Heap map at the peak (0.020s)"));
    cr_expect(screen_has("Cell 0:"));
    KEYS("e");
    cr_expect(screen_has("Heap map at the end"));
    KEYS("w", "p", "l", "h", "j", "k", "G", "g");
    cr_expect(screen_has("Pinned by"));
}

Test(viewer_keys, heap_map_double_click_below_the_map, .init = setup, .fini = teardown) {
    /* The map is one row of cells in a grid of 12 rows. A double click on a
     * grid row below it selects the last cell, as the draw does, and opens
     * the site pinning it; Enter read past the map's cells (a double click
     * is a click and an Enter with no draw between them). */
    KEYS("5", "G");
    int y = row_of("Pinned by:");
    cr_assert_geq(y, 0);
    const char *pin = strstr(row(y + 1), "#");
    cr_assert(pin);
    char want[32];
    snprintf(want, sizeof want, "Site %.*s ", (int)strcspn(pin, " "), pin);
    char cell[32];
    const char *c = strstr(row(row_of(" Cell ")), "Cell ");
    snprintf(cell, sizeof cell, "%.*s", (int)strcspn(c, ":") + 1, c); /* "Cell N:" */
    KEYS("g");
    cr_expect(screen_has("Cell 0:"));
    ml_uievent_t ev = {.type = ML_UI_MOUSE, .mouse = ML_MOUSE_DOUBLE, .x = 5, .y = 10};
    ml__sm_event(S, &ev);
    ml__sm_draw(S);
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SITE);
    cr_expect(screen_has(want), "expected '%s'", want);
    KEYS("Esc");
    cr_expect(screen_has(cell), "expected '%s' selected", cell);
}

Test(viewer_keys, help_lists_the_view_keys_then_global_ones, .init = setup, .fini = teardown) {
    KEYS("2", "?");
    cr_expect(screen_has("In Sites"));
    cr_expect(screen_has("sort by peak, leaked, allocated, calls, temporary"));
    cr_expect(screen_has("Everywhere"));
    KEYS("?");
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SITES);
}

Test(viewer_keys, q_and_f10_quit, .init = setup, .fini = teardown) {
    cr_expect(KEYS("q") & ML_BREAK_LOOP);
    cr_expect(KEYS("F10") & ML_BREAK_LOOP);
    /* In the search prompt q is a letter, not quit. */
    cr_expect_not(KEYS("/", "q") & ML_BREAK_LOOP);
    cr_expect_str_eq(ml_vmodel_filter(M), "q");
}

Test(viewer_keys, mouse_becomes_keys, .init = setup, .fini = teardown) {
    /* A click on "2Sites" in the bottom bar. */
    int x = (int)(strstr(row(23), "2Sites") - row(23));
    ml_uievent_t ev = {.type = ML_UI_MOUSE, .mouse = ML_MOUSE_CLICK, .x = x + 2, .y = 23};
    ml__sm_event(S, &ev);
    ml__sm_draw(S);
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SITES);
    /* A click on the third row selects it; a double click opens it. */
    ev = (ml_uievent_t){.type = ML_UI_MOUSE, .mouse = ML_MOUSE_CLICK, .x = 10, .y = 4};
    ml__sm_event(S, &ev);
    cr_expect_eq(ml__sm_panel(S, ML_VIEW_SITES)->sel, 2);
    ev.mouse = ML_MOUSE_WHEELUP;
    ml__sm_event(S, &ev);
    cr_expect_eq(ml__sm_panel(S, ML_VIEW_SITES)->sel, 0);
    ev = (ml_uievent_t){.type = ML_UI_MOUSE, .mouse = ML_MOUSE_DOUBLE, .x = 10, .y = 3};
    ml__sm_event(S, &ev);
    ml__sm_draw(S);
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SITE);
    cr_expect(screen_has(" 0  [shop+0x2000]"));
    /* q in the bar quits. */
    ml__sm_key(S, ML_KEY_ESC);
    ml__sm_draw(S);
    x = (int)(strstr(row(23), "qQuit") - row(23));
    ev = (ml_uievent_t){.type = ML_UI_MOUSE, .mouse = ML_MOUSE_CLICK, .x = x, .y = 23};
    cr_expect(ml__sm_event(S, &ev) & ML_BREAK_LOOP);
}

Test(viewer_keys, resize_and_too_small, .init = setup, .fini = teardown) {
    ml_uievent_t ev = {.type = ML_UI_RESIZE, .cols = 120, .rows = 40};
    cr_expect(ml__sm_event(S, &ev) & ML_RESIZE);
    ml__sm_draw(S);
    cr_expect_eq(ml__sm_canvas(S)->cols, 120);
    cr_expect_eq(ml__sm_canvas(S)->rows, 40);
    cr_expect(strstr(row(39), "qQuit"));
    ev = (ml_uievent_t){.type = ML_UI_RESIZE, .cols = 40, .rows = 10};
    ml__sm_event(S, &ev);
    ml__sm_draw(S);
    cr_expect(screen_has("Terminal too small: 40x10."));
    /* Keys other than q wait for a bigger terminal. */
    cr_expect_not(KEYS("2") & ML_BREAK_LOOP);
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SUMMARY);
    ev = (ml_uievent_t){.type = ML_UI_RESIZE, .cols = 80, .rows = 24};
    ml__sm_event(S, &ev);
    ml__sm_draw(S);
    cr_expect(screen_has("Peak heap"));
    ev = (ml_uievent_t){.type = ML_UI_RESIZE, .cols = 40, .rows = 10};
    ml__sm_event(S, &ev);
    ml__sm_draw(S);
    cr_expect(KEYS("q") & ML_BREAK_LOOP);
}

/* Every view, every key, at the smallest size and a large one: nothing is
 * drawn outside the canvas and nothing crashes (ASan builds check more). */
Test(viewer_keys, every_view_draws_at_min_and_large_sizes) {
    static const int sizes[][2] = {{ML_MIN_COLS, ML_MIN_ROWS}, {80, 24}, {200, 60}};
    static const char *const all[] = {"j", "k", "Enter", "Right", "Left", "PgDn", "PgUp",
                                      "G", "g", "p",     "e",     "w",    "c",    "m",
                                      "b", "*", "_",     "Esc",   NULL};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        open_screen(sizes[s][0], sizes[s][1]);
        for (const char *v = "1234567"; *v; v++) {
            char k[2] = {*v, 0};
            KEYS(k);
            keys(all);
            KEYS(k);
            cr_expect(strstr(row(sizes[s][1] - 1), "?Help"), "view %s at %dx%d", k, sizes[s][0],
                      sizes[s][1]);
        }
        teardown();
    }
}

/* Loading in steps draws between them; the model's snapshot builds replace
 * the analysis' sites under the views (a use-after-free once). Every view
 * is drawn after every step. */
Test(viewer_keys, views_stay_valid_while_loading, .timeout = 60) {
    /* Freed memory is filled, so a view reading it shows garbage names. */
    mallopt(M_PERTURB, 0x5a);
    cr_assert_eq(ml_vmodel_new(&M), 0);
    ml_build_opts_t bo = {.no_symbols = true};
    ml_vmodel_set_build_opts(M, &bo);
    v_write_big_trace(path, sizeof path, 200000);
    char err[256];
    cr_assert_eq(ml_vmodel_open(M, path, err, sizeof err), 0, "%s", err);
    ml_sm_opts_t o = {.cols = 80, .rows = 24, .unicode = true};
    S = ml__sm_new(M, &o);
    int rc, steps = 0, with_sites = 0;
    bool seen_loading = false;
    /* As the loop does: a step, then draw (refreshes come twice a second). */
    while ((rc = ml_vmodel_load_step(M, 1)) > 0) {
        if (steps % 3 == 0) ml_vmodel_refresh(M);
        ml__sm_data_changed(S);
        for (const char *v = "1345612"; *v; v++) {
            char k[2] = {*v, 0};
            KEYS(k, "j", "Enter", "Esc");
        }
        seen_loading |= screen_has("Loading");
        if (ml_vmodel_nsites(M)) {
            with_sites++;
            cr_assert(screen_has("[big+0x20"), "step %d: the sites' names are gone", steps);
        }
        steps++;
    }
    cr_expect_eq(rc, 0);
    cr_expect_gt(steps, 2);
    cr_expect_gt(with_sites, 0, "no site was shown while loading");
    cr_expect(seen_loading);
    ml__sm_data_changed(S);
    KEYS("2");
    cr_expect(screen_has("SITE (function, file:line)  50"));
    teardown();
}

/* The analysis' warnings, which every report lists, are in the Summary
 * too: the synthetic trace has no exit-time reachability scan, so each
 * block live at the end counts as a definite leak, and the user must be
 * told. */
Test(viewer_keys, summary_lists_the_analysis_warnings) {
    open_screen(80, 60);
    cr_assert_gt(ml_vmodel_summary(M)->nwarnings, 0);
    int y = row_of(" Warnings ");
    cr_expect_geq(y, 0, "no Warnings line in the Summary");
    cr_expect(screen_has("no exit-time reachability scan"));
    teardown();
}

/* A trace of three 1000-byte blocks live at its end, which ends as
 * `end_kind` says (NO_END: no end record, as a trace cut short), its
 * process record carrying `options`; opened and drawn at 80 x 40. */
#define NO_END UINT32_MAX
static void open_three_blocks(uint32_t options, uint32_t end_kind) {
    snprintf(path, sizeof path, "/tmp/ml_vtest_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(ml_writer_new(fd, 1, &v_w), 0);
    ml_record_t p = tb_process(7, "/opt/app/bin/att", "vtest");
    p.u.process.options = options;
    v_add(&p);
    v_module(V_EXE_BASE, "/opt/app/bin/att");
    v_node(1, 0, V_EXE_BASE + 0x1000);
    v_node(2, 1, V_EXE_BASE + 0x2000);
    for (uint32_t i = 0; i < 3; i++)
        v_alloc(10 + i, 0x100000 + i * 0x1000, 1000, 2);
    if (end_kind != NO_END) {
        ml_record_t e = tb_end(60, 0);
        e.u.end.status_kind = end_kind;
        v_add(&e);
    }
    cr_assert_eq(ml_writer_free(v_w), 0);
    close(fd);
    model_open(path);
    cr_assert_eq(ml_vmodel_load_all(M), 0, "%s", ml_vmodel_error(M));
    ml_sm_opts_t o = {.cols = 80, .rows = 40, .unicode = true};
    S = ml__sm_new(M, &o);
    ml__sm_draw(S);
}

/* An attached trace (memlens attach) has no leak kinds: the blocks live at
 * the detach are what the window added, in a program that still runs. The
 * Summary says so, as memlens report does, instead of calling them
 * definite leaks. */
Test(viewer_keys, attached_summary_has_growth_not_leaks) {
    open_three_blocks(ML_OPT_ATTACHED, ML_END_UNKNOWN);
    cr_expect(screen_has("Grown          3000 B (2.9 KiB) in 3 blocks allocated while attached"));
    cr_expect(screen_has("Leaked         not known"));
    cr_expect(!screen_has("definite"));
    teardown();
}

/* A trace whose recording stopped while the program still ran (two
 * Ctrl-Cs to a program that ignores SIGINT) has no leaks either: the
 * Summary shows what was live at the stop, as memlens report does. */
Test(viewer_keys, a_trace_stopped_while_running_has_no_leaks) {
    open_three_blocks(0, ML_END_RUNNING);
    cr_expect(screen_has("still running when recording stopped"));
    cr_expect(screen_has("Live at stop   3000 B (2.9 KiB) in 3 blocks"));
    cr_expect(screen_has("Leaked         not known: the program was still running"));
    cr_expect(!screen_has("definite"));
    teardown();
}

/* An image replaced by exec (--follow-fork) did not exit either: exec gave
 * its memory back, and valgrind reports no leak for it (tests/leaks/lk_exec.c).
 * The Summary shows what was live at the exec. */
Test(viewer_keys, an_image_replaced_by_exec_has_no_leaks) {
    open_three_blocks(0, ML_END_EXEC);
    cr_expect(screen_has("replaced itself by exec"));
    cr_expect(screen_has("Live at exec   3000 B (2.9 KiB) in 3 blocks"));
    cr_expect(screen_has("Leaked         not known: exec gave the image's memory back"));
    cr_expect(!screen_has("definite"));
    teardown();
}

/* A trace cut short before the program's exit (a recording read while it
 * runs, a killed collector) holds no exit to judge: the Summary shows what
 * is live where it stops, as memlens report does, not "Leaked 0 B". */
Test(viewer_keys, a_trace_cut_before_the_exit_has_no_leaks) {
    open_three_blocks(0, NO_END);
    cr_expect(screen_has("Live at end    3000 B (2.9 KiB) in 3 blocks"));
    cr_expect(screen_has("Leaked         not known: the trace was cut short"));
    cr_expect(!screen_has("definite"));
    teardown();
}

/* The Sites header's count of sites is whole at any width: at 80 columns
 * 1,500 sites read "1500", not "150"; at the smallest size the column's
 * name gives way to it. */
Test(viewer_keys, sites_header_count_is_never_cut, .timeout = 60) {
    v_write_many_sites(path, sizeof path, 1500);
    model_open(path);
    while (ml_vmodel_load_step(M, 100) > 0) {}
    cr_assert_eq(ml_vmodel_nsites(M), 1500);
    ml_sm_opts_t o = {.cols = 80, .rows = 24, .unicode = true};
    S = ml__sm_new(M, &o);
    ml__sm_data_changed(S);
    KEYS("2");
    const char *h = row(1);
    size_t n = strlen(h);
    while (n && h[n - 1] == ' ') n--;
    cr_expect(n >= 6 && strncmp(h + n - 6, "  1500", 6) == 0, "header: %s", h);
    ml__sm_resize(S, ML_MIN_COLS, ML_MIN_ROWS);
    ml__sm_draw(S);
    h = row(1);
    n = strlen(h);
    while (n && h[n - 1] == ' ') n--;
    cr_expect(n >= 5 && strncmp(h + n - 5, " 1500", 5) == 0, "header at the smallest size: %s", h);
    teardown();
}

Test(viewer_keys, ascii_terminals_get_ascii) {
    M = v_model(path, sizeof path);
    ml_sm_opts_t o = {.cols = 80, .rows = 24, .unicode = false};
    S = ml__sm_new(M, &o);
    KEYS("2");
    ml__sm_draw(S);
    char *d = ml__canvas_dump(ml__sm_canvas(S));
    for (const unsigned char *p = (const unsigned char *)d; *p; p++)
        cr_assert_lt(*p, 0x80, "non-ASCII on screen");
    cr_expect(strstr(d, "vPEAK"));
    free(d);
    teardown();
}

Test(viewer_keys, key_names_for_batch_mode) {
    cr_expect_eq(ml__key_parse("Enter"), ML_KEY_ENTER);
    cr_expect_eq(ml__key_parse("esc"), ML_KEY_ESC);
    cr_expect_eq(ml__key_parse("F5"), ML_KEY_F(5));
    cr_expect_eq(ml__key_parse("F12"), ML_KEY_F(12));
    cr_expect_eq(ml__key_parse("C-l"), ML_KEY_CTRL_L);
    cr_expect_eq(ml__key_parse("Space"), ' ');
    cr_expect_eq(ml__key_parse("j"), 'j');
    cr_expect_eq(ml__key_parse("PgDn"), ML_KEY_PGDN);
    cr_expect_eq(ml__key_parse("nonsense"), ML_KEY_NONE);
    cr_expect_eq(ml__key_parse(""), ML_KEY_NONE);
}

Test(viewer_keys, canvas_clips_and_dumps) {
    ml_canvas_t c = {.unicode = true};
    cr_assert_eq(ml__canvas_resize(&c, 10, 2), 0);
    cr_expect_eq(ml__canvas_text(&c, 7, 0, -1, ML_ST_NORMAL, "abcdef"), 3);
    ml__canvas_text(&c, -2, 1, -1, ML_ST_NORMAL, "\xe2\x96\x88x\x01y"); /* █, control char */
    char buf[64];
    cr_expect_str_eq(ml__canvas_row(&c, 0, buf, sizeof buf), "       abc");
    cr_expect_str_eq(ml__canvas_row(&c, 1, buf, sizeof buf), "?y");
    cr_expect_eq(ml__utf8_width("\xe2\x96\x88\xe2\xa3\xbf"
                                "ab"),
                 4);
    cr_expect_eq(ml__glyph_ascii(ML_G_BLOCK_FULL), '#');
    cr_expect_eq(ml__glyph_ascii(ML_G_VLINE), '|');
    ml__canvas_free(&c);
}

/* A trace's names are bytes: what is not a character shows as U+FFFD, one
 * per byte that starts no valid sequence (the JSON's and the page's rule),
 * and no control reaches the terminal. The decoder took the overlong
 * C0 AF for '/', passed a surrogate (ED A0 80) and the C1 CSI (C2 9B) as
 * they were, and `view --batch` printed them. */
Test(viewer_keys, canvas_shows_hostile_bytes_as_text) {
    ml_canvas_t c = {.unicode = true};
    cr_assert_eq(ml__canvas_resize(&c, 40, 3), 0);
    ml__canvas_text(&c, 0, 0, -1, ML_ST_NORMAL,
                    "a\xc0\xaf" "b\xed\xa0\x80" "c\xf4\x90\x80\x80" "d\xff" "e");
    ml__canvas_text(&c, 0, 1, -1, ML_ST_NORMAL,
                    "\xc2\x9b" "31m\xc2\x9d" "0;t\xc2\x9c" "x\x1b" "y\x7f" "z");
    /* é … 🐍, then a cut sequence */
    ml__canvas_text(&c, 0, 2, -1, ML_ST_NORMAL, "\xc3\xa9\xe2\x80\xa6\xf0\x9f\x90\x8d" "!\xe2\x82");
    char buf[256];
    cr_expect_str_eq(ml__canvas_row(&c, 0, buf, sizeof buf),
                     "a\uFFFD\uFFFD" "b\uFFFD\uFFFD\uFFFD"
                     "c\uFFFD\uFFFD\uFFFD\uFFFD" "d\uFFFD" "e");
    cr_expect_str_eq(ml__canvas_row(&c, 1, buf, sizeof buf), "?31m?0;t?x?y?z");
    cr_expect_str_eq(ml__canvas_row(&c, 2, buf, sizeof buf), "\u00e9\u2026\U0001F40D!\uFFFD\uFFFD");
    cr_expect_eq(ml__utf8_width("\xc0\xaf\xed\xa0\x80"), 5);
    ml__canvas_free(&c);
}

/* GPU records reach the Summary (per device) and the timeline's GPU series. */
Test(viewer_keys, gpu_devices_in_the_summary_and_the_timeline) {
    cr_assert_eq(ml_vmodel_new(&M), 0);
    ml_build_opts_t bo = {.no_symbols = true};
    ml_vmodel_set_build_opts(M, &bo);
    ml_vmodel_set_advice(M, false);
    ml_record_t p = {.tag = ML_T_PROCESS};
    p.u.process.pid = 9;
    p.u.process.page_size = 4096;
    p.u.process.exe = "/opt/app/bin/train";
    p.u.process.parent_trace = "";
    p.u.process.producer = "vtest";
    ml_vmodel_feed(M, &p);
    static const struct {
        uint8_t tag, op;
        uint32_t t;
        uint64_t ptr, size;
    } ev[] = {
        {ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 5, 0x700000000, 3u << 20},
        {ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 6, 0x710000000, 1u << 20},
        {ML_T_GPU_FREE, ML_GPU_OP_FREE, 8, 0x700000000, 0},
    };
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        ml_record_t r = {.tag = ev[i].tag, .time_ms = ev[i].t};
        r.u.gpu.op = ev[i].op;
        r.u.gpu.kind = ML_GPU_KIND_DEVICE;
        r.u.gpu.device = 0;
        r.u.gpu.context = 1;
        r.u.gpu.ptr = ev[i].ptr;
        r.u.gpu.size = ev[i].size;
        ml_vmodel_feed(M, &r);
    }
    ml_record_t e = {.tag = ML_T_END, .time_ms = 10};
    e.u.end.duration_ms = 10;
    ml_vmodel_feed(M, &e);
    cr_assert_eq(ml_vmodel_refresh(M), 0);
    ml_sm_opts_t o = {.cols = 80, .rows = 24, .unicode = true};
    S = ml__sm_new(M, &o);
    ml__sm_draw(S);
    cr_expect(screen_has("device 0: peak 4.0M, leaked 1.0M, 2 allocs, 1 free"));
    KEYS("4", "m", "m", "m");
    cr_expect(screen_has("[GPU]"));
    cr_expect(screen_has("4.0M\xe2\x94\x82"), "the GPU series' top on the y axis");
    ml__sm_free(S);
    ml_vmodel_free(M);
}

/* Text views (Summary, Site, Help) scroll: the layout's clamp, which keeps a
 * list's selection on screen, once pulled them back to the top at every
 * draw. */
Test(viewer_keys, text_views_scroll) {
    open_screen(80, 15);
    cr_expect(strstr(row(2), "Program"), "%s", row(2));
    KEYS("j");
    cr_expect(strstr(row(2), "Command"), "j scrolls the summary by a line: %s", row(2));
    KEYS("G");
    cr_expect(row_of("Suggestions") > 0, "G shows the summary's last lines");
    KEYS("g");
    cr_expect(strstr(row(2), "Program"), "g goes back to the top: %s", row(2));
    KEYS("2", "Enter", "PgDn");
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SITE);
    cr_expect(row_of("Function") < 0, "PgDn scrolls the site view");
    KEYS("?", "G");
    cr_expect(row_of("q, F10") > 0, "G shows the end of the help");
    teardown();
}

static void dump_screen(void) {
    char *d = ml__canvas_dump(ml__sm_canvas(S));
    cr_log_info("screen:\n%s", d ? d : "");
    free(d);
}

/* The GPU view (7) on the two-device trace of vtest.h: the device's numbers,
 * the kind table, the site lists; Down selects site rows, Enter shows a
 * site's stack inline, Left/Right switch devices. */
Test(viewer_keys, gpu_view_devices_sites_and_stacks) {
    M = v_model_of(path, sizeof path, true);
    ml_sm_opts_t o = {.cols = 80, .rows = 24, .unicode = true};
    S = ml__sm_new(M, &o);
    cr_assert(S);
    KEYS("7");
    cr_expect_eq(ml__sm_view(S), ML_VIEW_GPU);
    cr_expect(screen_has("GPU  device 0  (1 of 2)"));
    cr_expect(screen_has("Peak           6291456 B (6.0 MiB) in 2 blocks at 0.011s"));
    cr_expect(screen_has("Live at exit   4194304 B (4.0 MiB) in 1 blocks"));
    cr_expect(screen_has("Leaked         4194304 B (4.0 MiB) in 1 blocks"));
    cr_expect(screen_has("at context destroy: 0 B in 0 blocks"));
    cr_expect(screen_has("1 failed frees, 1 unknown frees"));
    cr_expect(screen_has("Pinned host    peak 64.0K, live 0B, leaked 0B, 64.0K allocated"));
    cr_expect(screen_has("at peak: 6.0M in 2 blocks over a 258M span (2% utilization)"));
    cr_expect(screen_has("Empty cache    0 drain/refill cycles, 0 pool trims"));
    cr_expect(screen_has(" device                2      1    6.0M    6.0M    4.0M    4.0M"));
    cr_expect(screen_has(" host_pinned           1      1   64.0K   64.0K      0B      0B"));
    if (!screen_has("KIND")) dump_screen();

    /* Down scrolls the numbers away until the first site row shows, then
     * selects it. */
    cr_expect_lt(row_of("    4.0M      1  device"), 0, "the site rows start below the first page");
    for (int i = 0; i < 30 && row_of("    4.0M      1  device") < 0; i++)
        KEYS("j");
    int r = row_of("    4.0M      1  device");
    cr_assert_gt(r, 0, "Down reaches the peak's first site");
    cr_expect(strstr(row(r), "[shop+0x2000]  shop < [shop+0x1000]"), "%s", row(r));
    const ml_canvas_t *c = ml__sm_canvas(S);
    cr_expect_eq(c->cells[r * c->cols + 4].style, ML_ST_SELECTED, "the row is selected");
    KEYS("Enter");
    cr_expect(screen_has("#0  [shop+0x2000]"), "Enter shows the stack");
    cr_expect(screen_has("#1  [shop+0x1000]"));
    cr_expect(screen_has("1 allocs of 4.0M, 4.0M allocated"));
    KEYS("Enter");
    cr_expect_not(screen_has("#0  [shop+0x2000]"), "Enter again hides it");
    /* The next site row: B, from the library. */
    KEYS("j");
    r = row_of("    2.0M      1  device");
    cr_assert_gt(r, 0);
    cr_expect_eq(c->cells[r * c->cols + 4].style, ML_ST_SELECTED);
    KEYS("Enter");
    cr_expect(screen_has("#2  [shop+0x1000]"), "B's stack scrolled into view, to its end");
    cr_expect_gt(row_of("    2.0M      1  device"), 0, "with its row");
    KEYS("G");
    cr_expect(screen_has("Churn          alloc/free pairs per second"));
    cr_expect(screen_has("    50.0      1  host_pinned"));

    /* Device 1: the context destroyed with 1 MiB; then back. */
    KEYS("Right");
    cr_expect(screen_has("GPU  device 1  (2 of 2)"));
    cr_expect(screen_has("Device         1"), "a new device starts at the top");
    cr_expect(screen_has("Leaked         1048576 B (1.0 MiB) in 1 blocks"));
    cr_expect(screen_has("at context destroy: 1048576 B (1.0 MiB) in 1 blocks"));
    cr_expect(screen_has("Live at exit   0 B in 0 blocks"));
    KEYS("l");
    cr_expect(screen_has("GPU  device 0  (1 of 2)"), "Right wraps around");
    KEYS("h");
    cr_expect(screen_has("GPU  device 1  (2 of 2)"), "h: the previous device");
    KEYS("Left");
    cr_expect(screen_has("GPU  device 0  (1 of 2)"));

    /* A click selects a site row, a double click opens it. */
    KEYS("G");
    r = row_of("    2.0M      1  device");
    cr_assert_gt(r, 0);
    ml_uievent_t ev = {.type = ML_UI_MOUSE, .mouse = ML_MOUSE_DOUBLE, .x = 10, .y = r};
    ml__sm_event(S, &ev);
    ml__sm_draw(S);
    cr_expect(screen_has("#0  [libwidget.so+0x4000]"), "a double click shows the stack");

    /* The view's keys are in the help. */
    KEYS("?");
    cr_expect(screen_has("In GPU"));
    cr_expect(screen_has("previous / next GPU device"));
    cr_expect(screen_has("Summary, Sites, Tree, Timeline, Heap map, Suggestions, GPU"));
    teardown();
}

/* Names at 80 columns (issue 15): the middle of a qualified name gives way,
 * the function's own name stays; then the file's start. Exact strings. */
Test(viewer_keys, names_fit_in_the_middle_never_before_the_function) {
    char b[256];
    const char *n = "std::vector<…>::_M_realloc_insert<…>";
    cr_expect_str_eq(ml__fit_name(n, 80, b, sizeof b), n);
    cr_expect_str_eq(ml__fit_name(n, 30, b, sizeof b), "std::…::_M_realloc_insert<…>");
    cr_expect_str_eq(ml__fit_name(n, 27, b, sizeof b), "…::_M_realloc_insert<…>");
    cr_expect_str_eq(ml__fit_name(n, 22, b, sizeof b), "_M_realloc_insert<…>");
    cr_expect_str_eq(ml__fit_name(n, 10, b, sizeof b), "_M_reallo…");
    const char *l = "a::b::c::Table<…>::grow";
    cr_expect_str_eq(ml__fit_name(l, 20, b, sizeof b), "a::…::Table<…>::grow");
    cr_expect_str_eq(ml__fit_name(l, 16, b, sizeof b), "a::…::grow");
    /* "::" inside template arguments or parameters does not split. */
    cr_expect_str_eq(ml__fit_name("ns::f<x::y>::g(std::string)", 20, b, sizeof b),
                     "…::g(std::string)");
    cr_expect_str_eq(ml__fit_label("churn::make_msg", "fx_adv_churn.cpp:20", 40, b, sizeof b),
                     "churn::make_msg  fx_adv_churn.cpp:20");
    cr_expect_str_eq(ml__fit_label("churn::make_msg", "fx_adv_churn.cpp:20", 34, b, sizeof b),
                     "…::make_msg  fx_adv_churn.cpp:20");
    cr_expect_str_eq(ml__fit_label("a::b::c::Table<…>::grow_bucket_array", "fx_longname.cpp:17",
                                   34, b, sizeof b),
                     "…::grow_bucket_array  …name.cpp:17");
    cr_expect_str_eq(ml__fmt_group(1000000, b, sizeof b), "1,000,000");
    cr_expect_str_eq(ml__fmt_group(1234567890, b, sizeof b), "1,234,567,890");
    cr_expect_str_eq(ml__fmt_group(999, b, sizeof b), "999");
    cr_expect_str_eq(ml__fmt_n(1, "block", "blocks", b, sizeof b), "1 block");
    cr_expect_str_eq(ml__fmt_n(1000000, "block", "blocks", b, sizeof b), "1,000,000 blocks");
}

/* Sideways scrolling: at 60 columns a site's name is cut; ] and Right
 * shift it, [ and Left shift it back; Left at the edge is ignored in Sites
 * and goes back to the list in the Site view. */
static void setup_narrow(void) {
    open_screen(60, 20);
}

Test(viewer_keys, sideways_scrolling, .init = setup_narrow, .fini = teardown) {
    KEYS("2");
    int y = row_of("shop+0x3000");
    cr_assert(y > 0);
    char before[256];
    snprintf(before, sizeof before, "%s", row(y));
    cr_expect(strstr(before, "#0 [shop+0x3000]  shop") == NULL, "cut at 60 columns: %s", before);
    KEYS("]");
    ml_panel_t *P = ml__sm_panel(S, ML_VIEW_SITES);
    cr_expect(P->hscroll > 0 && P->hscroll <= P->hmax, "hscroll %d of %d", P->hscroll, P->hmax);
    cr_expect(strstr(row(y), "  shop"), "the module came into view: %s", row(y));
    KEYS("Left");
    cr_expect_str_eq(row(y), before);
    KEYS("Left", "Right", "Left");
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SITES);
    cr_expect_str_eq(row(y), before);
    KEYS("Enter", "Left");
    cr_expect_eq(ml__sm_view(S), ML_VIEW_SITES, "Left at the edge goes back from a site");
}

/* A trace opened from its analysis snapshot: the Timeline says while the
 * history is being built, and what time travel covers when its replay
 * stopped at its budget, or was off. */
static void open_phases_screen(const char *p, uint64_t budget, bool wait) {
    cr_assert_eq(ml_vmodel_new(&M), 0);
    ml_build_opts_t o = {.no_symbols = true};
    ml_vmodel_set_build_opts(M, &o);
    ml_vmodel_set_advice(M, false);
    ml_vmodel_set_history_budget(M, budget);
    char err[256];
    cr_assert_eq(ml_vmodel_open(M, p, err, sizeof err), 0, "%s", err);
    cr_assert(ml_vmodel_from_snapshot(M));
    cr_assert_eq(ml_vmodel_load_step(M, 1), 0);
    if (wait) ml_vmodel_wait(M);
    ml_sm_opts_t so = {.cols = 120, .rows = 40, .unicode = true};
    S = ml__sm_new(M, &so);
    cr_assert(S);
    ml__sm_draw(S);
}

static void close_screen(void) {
    ml__sm_free(S);
    ml_vmodel_free(M);
}

Test(viewer_keys, the_timeline_says_how_far_time_travel_reaches, .timeout = 60) {
    char p[64];
    v_write_phases(p, sizeof p, true);
    /* Building: the views have the final data, the Timeline says so. */
    open_phases_screen(p, ML_VHISTORY_BUDGET_DEFAULT, false);
    KEYS("4");
    cr_expect(screen_has("Time travel: building the history, "));
    cr_expect(screen_has("peak 1.7M"));
    KEYS("g"); /* the start: not built yet */
    cr_expect(screen_has("Live at the cursor: when the history is built"));
    close_screen();

    /* Off. */
    open_phases_screen(p, 0, false);
    KEYS("4");
    cr_expect(screen_has("Time travel: only the peak and the end:"));
    cr_expect(screen_has("the history replay is off (a memory budget of 0: --history-mb)"));
    close_screen();

    /* Finished: no line, as after a replay load. */
    open_phases_screen(p, ML_VHISTORY_BUDGET_DEFAULT, true);
    KEYS("4");
    cr_expect_not(screen_has("Time travel"));
    close_screen();
    unlink(p);
}

/* Stopped at a budget of one byte. The budget is the growth of the
 * process' resident memory while the replay runs, so this runs in a process
 * of its own (a test), and the heap's free memory is given back first: a
 * replay that found enough freed memory still resident (the earlier
 * replays' of the test above, once) grew nothing and was not stopped. */
Test(viewer_keys, the_timeline_says_time_travel_stopped_at_its_budget, .timeout = 60) {
    char p[64];
    v_write_phases(p, sizeof p, true);
    malloc_trim(0);
    open_phases_screen(p, 1, true);
    KEYS("4");
    cr_expect(screen_has("Time travel covers 0s-"));
    cr_expect(screen_has(" of 0.200s; the rest was skipped:"));
    cr_expect(screen_has("the replay used "));
    cr_expect(screen_has(", over its 1 B budget (--history-mb); freed"));
    KEYS("l"); /* off the peak's column, past what was covered */
    cr_expect(screen_has("not kept") || screen_has("(the nearest snapshot)"));
    close_screen();
    unlink(p);
}

/* Opening from the saved analysis builds every result in the loop's first
 * load step, which takes a minute on a trace of a million sites: the loop
 * shows a frame saying so before that step, not a blank terminal. */
typedef struct {
    int presents;
    bool first_while_loading;
    char *first;
} first_frame_t;

static void ff_present(void *ctx, const ml_canvas_t *c) {
    first_frame_t *f = ctx;
    if (f->presents++) return;
    f->first_while_loading = ml_vmodel_loading(M);
    f->first = ml__canvas_dump(c);
}

static void ff_next(void *ctx, int timeout_ms, ml_uievent_t *ev) {
    (void)timeout_ms;
    first_frame_t *f = ctx;
    ev->type = f->presents >= 2 ? ML_UI_QUIT : ML_UI_NONE;
}

Test(viewer_keys, a_frame_before_building_from_the_saved_analysis, .timeout = 60) {
    v_write_phases(path, sizeof path, true);
    model_open(path);
    cr_assert(ml_vmodel_from_snapshot(M));
    ml_sm_opts_t o = {.cols = 100, .rows = 24, .unicode = true};
    S = ml__sm_new(M, &o);
    cr_assert(S);
    first_frame_t f = {0};
    ml_sm_io_t io = {.ctx = &f, .next = ff_next, .present = ff_present};
    ml__sm_run(S, &io);
    cr_expect(f.first_while_loading, "the first frame came after the build");
    cr_expect(f.first && strstr(f.first, "building the results from the saved analysis"), "%s", f.first);
    cr_expect_not(ml_vmodel_loading(M));
    free(f.first);
    teardown();
}

/* Work on the UI thread that grows with the sites and their frames says
 * what it does on the status line while it runs (issue 12: on 262,144
 * distinct 40-frame stacks, `b` froze the view for 3 s, each letter typed
 * into the search for 3 to 8 s, `*` for 2 s, with the screen unchanged).
 * progress_ms -1 shows the line at once, so that this small trace shows it
 * too; what is asserted is which lines came, not how long anything took. A
 * new sort key lists the same tree's rows again, without building it. */
typedef struct {
    const char *const *keys;
    int next;
    char lines[64][128]; /* the status line of each frame presented */
    int n;
} busy_io_t;

static void busy_present(void *ctx, const ml_canvas_t *c) {
    busy_io_t *b = ctx;
    if (b->n < 64) ml__canvas_row(c, c->rows - 2, b->lines[b->n++], sizeof b->lines[0]);
}

static void busy_next(void *ctx, int timeout_ms, ml_uievent_t *ev) {
    (void)timeout_ms;
    busy_io_t *b = ctx;
    ev->type = ML_UI_QUIT;
    if (!b->keys[b->next]) return;
    ev->type = ML_UI_KEY;
    ev->key = ml__key_parse(b->keys[b->next++]);
}

/* Runs the loop on keys; returns how many presented status lines start
 * with `what`, and that no line says it after the last key. */
static int busy_lines(const char *const *k, const char *what, busy_io_t *b) {
    memset(b, 0, sizeof *b);
    b->keys = k;
    ml_sm_io_t io = {.ctx = b, .next = busy_next, .present = busy_present};
    ml__sm_run(S, &io);
    int n = 0;
    for (int i = 0; i < b->n; i++)
        n += !strncmp(b->lines[i], what, strlen(what));
    return n;
}
#define BUSY(what, b, ...) busy_lines((const char *const[]){__VA_ARGS__, NULL}, what, b)

Test(viewer_keys, long_steps_show_a_progress_line) {
    M = v_model(path, sizeof path);
    ml_sm_opts_t o = {.cols = 80, .rows = 24, .unicode = true, .progress_ms = -1};
    S = ml__sm_new(M, &o);
    cr_assert(S);
    busy_io_t b;
    cr_expect_geq(BUSY("Building the bottom-up call tree: ", &b, "3", "b"), 1);
    cr_expect(strstr(b.lines[b.n - 1], "Bottom-up call tree."), "the last frame: %s", b.lines[b.n - 1]);
    cr_expect_geq(BUSY("Expanding the subtree: 0% of ", &b, "*"), 1);
    cr_expect_geq(BUSY("Listing the call tree's rows: ", &b, "_"), 1);
    cr_expect_geq(BUSY("Filtering the sites: 0% of 3", &b, "/", "w"), 1);
    cr_expect_geq(BUSY("Building the bottom-up call tree: ", &b, "i", "Enter"), 1);
    cr_expect_str_eq(ml_vmodel_filter(M), "wi");
    cr_expect(strstr(b.lines[b.n - 1], "Filter \"wi\": 1 of 3 sites"), "%s", b.lines[b.n - 1]);
    /* Sorting by calls lists the rows again; the tree is not built again. */
    cr_expect_eq(BUSY("Building the", &b, "C"), 0);
    cr_expect_geq(BUSY("Listing the call tree's rows: ", &b, "A"), 1);
    cr_expect(strstr(b.lines[b.n - 1], "Sorted by allocated."), "%s", b.lines[b.n - 1]);
    /* Without the loop (no output yet) nothing is presented. */
    cr_expect_eq(ml__sm_key(S, 'b') & ML_HANDLED, ML_HANDLED);
    ml__sm_draw(S);
    cr_expect(screen_has("TOP-DOWN"));
    teardown();
}
