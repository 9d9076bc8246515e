/* panel_summary.c - the Summary view: the program, its calls, peak, leaks,
 * fragmentation, GPU devices and the top three suggestions. */
#include "viewer_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ml_panel_t super;
    ml_lines_t lines;
} summary_t;

static void frag_line(ml_lines_t *l, const char *label, const char *when, const ml_vfrag_t *f) {
    char b1[16], b2[16];
    if (!f->valid) {
        ml__lines_add(l, label, ML_ST_DIM, "%s: not available in this trace", when);
        return;
    }
    /* Page utilization is not heap fragmentation: each number is named
     * (the words of ML_LABEL_* in ml_analysis.h). */
    ml__lines_add(l, label, ML_ST_NORMAL,
                  "%s: page utilization %.0f%%, free gaps %s (largest %s), external "
                  "fragmentation of free heap %.0f%%",
                  when,
                  f->page_utilization * 100, ml__fmt_bytes(f->free_bytes, b1, sizeof b1),
                  ml__fmt_bytes(f->largest_free_bytes, b2, sizeof b2), f->external * 100);
}

static void build(summary_t *p, int width) {
    ml_lines_t *l = &p->lines;
    ml_vmodel_t *m = p->super.m;
    const ml_vsummary_t *s = ml_vmodel_summary(m);
    const ml_totals_t *t = &s->totals;
    char b1[48], b2[48], b3[48], tm[32], n1[48], n2[48], n3[48], n4[48], n5[48];
    ml__lines_clear(l);
    l->label_w = 15;

    ml__lines_add(l, "Program", ML_ST_NORMAL, "%s  (pid %u)", s->exe[0] ? s->exe : "?", s->pid);
    if (s->cmdline[0]) ml__lines_add(l, "Command", ML_ST_NORMAL, "%s", s->cmdline);
    const char *path = ml_vmodel_path(m);
    if (path[0]) ml__lines_add(l, "Trace", ML_ST_NORMAL, "%s", path);
    switch (s->state) {
    case ML_VPROC_LOADING:
        if (ml_vmodel_from_snapshot(m))
            ml__lines_add(l, "State", ML_ST_WARN, "loading: building the results from the saved analysis");
        else
            ml__lines_add(l, "State", ML_ST_WARN, "loading the trace (%d%%)", (int)(ml_vmodel_progress(m) * 100));
        break;
    case ML_VPROC_RUNNING:
        ml__lines_add(l, "State", ML_ST_GOOD, "running (live)");
        break;
    case ML_VPROC_EXITED:
        ml__lines_add(l, "State", ML_ST_NORMAL, "exited with status %d", s->status);
        break;
    case ML_VPROC_SIGNALED:
        ml__lines_add(l, "State", ML_ST_WARN, "killed by signal %d", s->status);
        break;
    case ML_VPROC_ENDED:
        if (t->end.status_kind == ML_END_RUNNING)
            ml__lines_add(l, "State", ML_ST_WARN, "still running when recording stopped (memlens was stopped)");
        else if (t->end.status_kind == ML_END_EXEC)
            ml__lines_add(l, "State", ML_ST_NORMAL, "replaced itself by exec");
        else
            ml__lines_add(l, "State", ML_ST_NORMAL, "ended");
        break;
    case ML_VPROC_TRUNCATED:
        ml__lines_add(
            l, "State", ML_ST_WARN,
            "trace truncated: it stops before its end record (the collector was stopped?)");
        break;
    }
    ml__lines_add(l, "Duration", ML_ST_NORMAL, "%s", ml__fmt_time(s->duration_ms, tm, sizeof tm));
    ml__lines_add(l, "Calls", ML_ST_NORMAL, "%s (%s temporary), %s, %s, %s",
                  ml__fmt_n(t->alloc_calls, "allocation", "allocations", n1, sizeof n1),
                  ml__fmt_group(t->temporary_allocs, n2, sizeof n2),
                  ml__fmt_n(t->free_calls, "free", "frees", n3, sizeof n3),
                  ml__fmt_n(t->realloc_calls, "realloc", "reallocs", n4, sizeof n4),
                  ml__fmt_n(t->mmap_calls, "mmap", "mmaps", n5, sizeof n5));
    ml__lines_add(l, "Allocated", ML_ST_NORMAL, "%s in total",
                  ml__fmt_bytes_long(t->bytes_allocated, b1, sizeof b1));
    ml__lines_add(l, "Peak heap", ML_ST_BOLD, "%s at %s",
                  ml__fmt_bytes_long(t->peak_bytes, b1, sizeof b1),
                  ml__fmt_time(t->peak_time_ms, tm, sizeof tm));
    /* The kernel's high-water mark when the trace has it (issue 13); the
     * samples miss short peaks, and say that they are samples. */
    if (t->hwm_rss_source)
        ml__lines_add(l, "Peak RSS", ML_ST_NORMAL, "%s (kernel high-water mark%s)",
                      ml__fmt_bytes_long(t->hwm_rss_bytes, b1, sizeof b1),
                      t->hwm_rss_source == ML_HWM_EXIT || t->hwm_rss_source == ML_HWM_WAIT4
                          ? ""
                          : " at the last sample: a lower bound");
    if (s->peak_rss_bytes)
        ml__lines_add(l, t->hwm_rss_source ? "" : "Peak RSS", ML_ST_NORMAL,
                      "largest sample %s (RSS sampled every %u ms)",
                      ml__fmt_bytes_long(s->peak_rss_bytes, b1, sizeof b1), ml_rss_interval_ms(t));
    else if (!t->hwm_rss_source)
        ml__lines_add(l, "Peak RSS", ML_ST_DIM, "not available");
    if (t->peak_mmap_bytes)
        ml__lines_add(l, "Peak mmap", ML_ST_NORMAL, "%s (anonymous mappings)",
                      ml__fmt_bytes_long(t->peak_mmap_bytes, b1, sizeof b1));
    if (s->attached && s->state != ML_VPROC_RUNNING && s->state != ML_VPROC_LOADING) {
        /* As memlens report says: without the program's exit there are no
         * leak kinds, only what the window added and left live. */
        bool gone = s->ended_in_window;
        ml__lines_add(l, "Grown", ML_ST_NORMAL,
                      "%s in %s allocated while attached and still live at %s",
                      ml__fmt_bytes_long(t->heap_bytes, b1, sizeof b1),
                      ml__fmt_n(t->heap_blocks, "block", "blocks", n1, sizeof n1),
                      t->exited ? "its exit" : gone ? "its end" : "detach");
        ml__lines_add(l, "Leaked", ML_ST_DIM, "%s",
                      t->exited ? "not known: blocks allocated before the attach are unknown"
                      : gone    ? "not known: the program ended in the window without an exit (SIGKILL?)"
                                : "not known: the program did not exit while attached");
    } else if ((s->state == ML_VPROC_ENDED || s->state == ML_VPROC_TRUNCATED) && ml_totals_unjudged(t, NULL)) {
        /* As memlens report says: the program had not exited (it was still
         * running, exec replaced it, or the trace stops before its exit),
         * so nothing live is a leak. */
        ml_unjudged_t u;
        ml_totals_unjudged(t, &u);
        bool exec = t->complete && t->end.status_kind == ML_END_EXEC;
        bool cut = !t->complete;
        ml__lines_add(l, exec ? "Live at exec" : cut ? "Live at end" : "Live at stop", ML_ST_NORMAL, "%s in %s",
                      ml__fmt_bytes_long(t->heap_bytes, b1, sizeof b1),
                      ml__fmt_n(t->heap_blocks, "block", "blocks", n1, sizeof n1));
        ml__lines_add(l, "Leaked", ML_ST_DIM, "not known: %s",
                      exec  ? "exec gave the image's memory back"
                      : cut ? u.why
                            : "the program was still running when recording stopped");
    } else if (s->state == ML_VPROC_RUNNING || s->state == ML_VPROC_LOADING) {
        ml__lines_add(l, "Live now", ML_ST_NORMAL, "%s in %s",
                      ml__fmt_bytes_long(t->heap_bytes, b1, sizeof b1),
                      ml__fmt_n(t->heap_blocks, "block", "blocks", n1, sizeof n1));
    } else {
        ml__lines_add(l, "Leaked", s->leak_bytes[0] ? ML_ST_WARN : ML_ST_GOOD,
                      "%s in %s", ml__fmt_bytes_long(s->leak_bytes[0], b1, sizeof b1),
                      ml__fmt_n(s->leak_blocks[0], "block", "blocks", n1, sizeof n1));
        if (s->leak_bytes[0])
            ml__lines_add(l, "", ML_ST_NORMAL, "definite %s, indirect %s, possible %s",
                          ml__fmt_bytes(s->leak_bytes[ML_VLEAK_DEFINITE], b1, sizeof b1),
                          ml__fmt_bytes(s->leak_bytes[ML_VLEAK_INDIRECT], b2, sizeof b2),
                          ml__fmt_bytes(s->leak_bytes[ML_VLEAK_POSSIBLE], b3, sizeof b3));
        ml__lines_add(l, "Reachable", ML_ST_NORMAL, "%s in %s (not leaked)",
                      ml__fmt_bytes_long(s->leak_bytes[ML_VLEAK_REACHABLE], b1, sizeof b1),
                      ml__fmt_n(s->leak_blocks[ML_VLEAK_REACHABLE], "block", "blocks", n1,
                                sizeof n1));
    }
    frag_line(l, "Heap pages", "at peak", &s->frag_peak);
    frag_line(l, "", "at end ", &s->frag_end);
    if (!s->ngpus) ml__lines_add(l, "GPU", ML_ST_DIM, "no GPU allocations recorded");
    for (uint32_t i = 0; i < s->ngpus; i++) {
        const ml_vgpu_t *g = &s->gpus[i];
        ml__lines_add(l, i ? "" : "GPU", ML_ST_NORMAL, "device %u: peak %s, leaked %s, %s, %s",
                      g->device, ml__fmt_bytes(g->peak_bytes, b1, sizeof b1),
                      ml__fmt_bytes(g->leaked_bytes, b2, sizeof b2),
                      ml__fmt_n(g->alloc_calls, "alloc", "allocs", n1, sizeof n1),
                      ml__fmt_n(g->free_calls, "free", "frees", n2, sizeof n2));
    }
    /* Before the first build (loading) the warnings below are not there
     * yet; these two say the most important of them meanwhile. */
    if (s->sampled && !s->nwarnings)
        ml__lines_add(l, "Sampling", ML_ST_WARN,
                      "one allocation per %" PRIu64 " bytes: numbers are estimates",
                      s->sample_bytes);
    if (t->unknown_frees && !s->nwarnings)
        ml__lines_add(l, "Note", ML_ST_DIM,
                      "%s of blocks allocated before tracing began",
                      ml__fmt_n(t->unknown_frees, "free", "frees", n1, sizeof n1));
    /* What the reports list under "warnings": never left out here. */
    for (uint32_t i = 0; i < s->nwarnings && i < ML_VMAX_WARNINGS; i++)
        ml__lines_add(l, i ? "" : "Warnings", ML_ST_WARN, "%s", s->warnings[i]);
    if (s->nwarnings > ML_VMAX_WARNINGS)
        ml__lines_add(l, "", ML_ST_WARN, "and %u more (memlens report lists them all)",
                      s->nwarnings - ML_VMAX_WARNINGS);
    ml__lines_add(l, NULL, ML_ST_NORMAL, " ");
    const char *adv = s->advice == ML_VADVICE_RUNNING ? " (the advisor is replaying the trace...)"
                      : s->advice == ML_VADVICE_PENDING && s->state == ML_VPROC_RUNNING
                          ? " (after the program ends)"
                      : s->advice == ML_VADVICE_FAILED ? " (the advisor failed: see 6)"
                                                       : "";
    if (ml_vmodel_nsuggestions(m))
        ml__lines_add(l, "Suggestions", ML_ST_BOLD, "(6 lists them all)%s", adv);
    else
        ml__lines_add(l, "Suggestions", ML_ST_BOLD, "%s%s", adv[0] ? "none yet" : "none", adv);
    for (uint32_t i = 0; i < 3 && i < ml_vmodel_nsuggestions(m); i++) {
        const ml_vsuggestion_t *g = ml_vmodel_suggestion_at(m, i);
        /* A preview on one line (6 has the whole message); sideways
         * scrolling shows the rest. */
        char full[1400], fit[1400];
        snprintf(full, sizeof full, "%u. [%s] saves ~%s: %s", i + 1, g->strategy,
                 ml__fmt_bytes(g->estimated_saving_bytes, b1, sizeof b1), g->message);
        snprintf(fit, sizeof fit, "%s", full);
        if (ml__utf8_width(full) > width) {
            int cells = 0;
            size_t o = 0;
            while (fit[o] && cells < width - 1) {
                o++;
                while ((fit[o] & 0xc0) == 0x80)
                    o++;
                cells++;
            }
            snprintf(fit + o, sizeof fit - o, "\xe2\x80\xa6");
        }
        ml_line_t *ln = ml__lines_add(l, "", ML_ST_NORMAL, "%s", fit);
        if (ln) {
            ln->site = g->site;
            ln->full = strdup(full);
        }
    }
    /* Work the budgets made the advisor leave out: "none" is not the whole
     * answer then. */
    const char *left;
    for (size_t i = 0; (left = ml_vmodel_advice_skipped(m, i)); i++)
        ml__lines_add(l, i ? "" : "Left out", ML_ST_WARN, "%s", left);
}

static void summary_draw(ml_panel_t *super, ml_canvas_t *c) {
    summary_t *p = (summary_t *)super;
    build(p, super->w - 2 - 15);
    /* At 80 columns some values are longer than the text column: they
     * wrap, never cut ("external fragmentation", the suggestions). */
    ml__lines_fit(&p->lines, super->w - 2 - p->lines.label_w);
    ml__lines_draw(super, c, &p->lines, false);
}

static void summary_header(ml_panel_t *super, ml_canvas_t *c, int y) {
    (void)super;
    ml__canvas_text(c, 1, y, c->cols - 1, ML_ST_HEADER, "Summary");
}

static int summary_key(ml_panel_t *super, int key) {
    int r = ml__panel_hscroll_key(super, key, true);
    if (r & ML_HANDLED) return r;
    return ml__lines_key(super, key);
}

static void summary_destroy(ml_panel_t *super) {
    summary_t *p = (summary_t *)super;
    ml__lines_free(&p->lines);
    free(p);
}

static const ml_panel_class_t summary_class = {
    .name = "Summary",
    .help = "j/k, PgUp/PgDn\tscroll\n"
            "Left/Right, h/l\tscroll sideways (the suggestions' whole messages; also [ ])\n",
    .draw = summary_draw,
    .on_key = summary_key,
    .print_header = summary_header,
    .destroy = summary_destroy,
};

ml_panel_t *ml__panel_summary_new(ml_screen_t *sm) {
    summary_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->super.cls = &summary_class;
    p->super.sm = sm;
    p->super.m = ml__sm_model(sm);
    return &p->super;
}
