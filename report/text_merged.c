/* text_merged.c - `memlens report A.mlt B.mlt ...` (or DIR) without output
 * options: the processes table, the sums, and the merged sites with the
 * processes that hold them; `--by-process METRIC`: each site's numbers per
 * process side by side (ml_report_merge.h). */
#define _GNU_SOURCE /* qsort_r */
#include "report_internal.h"
#include "ml_report_merge.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *bytes(uint64_t b, char *buf, size_t len) {
    return ml_fmt_bytes(b, buf, len);
}

static const char *base_name(const char *path) {
    const char *b = path ? strrchr(path, '/') : NULL;
    return b ? b + 1 : path ? path : "?";
}

/* How a process ended, in at most 11 characters. */
static const char *ended(const ml_totals_t *t, char *buf, size_t len) {
    if (!t->complete) snprintf(buf, len, "%s", t->truncated ? "cut short" : "no end");
    else if (t->end.status_kind == ML_END_EXITED) snprintf(buf, len, "exit %d", t->end.status);
    else if (t->end.status_kind == ML_END_SIGNALED) snprintf(buf, len, "signal %d", t->end.status);
    else snprintf(buf, len, "%s", ml_end_name(t->end.status_kind));
    return buf;
}

static void process_table(FILE *o, const ml_merge_t *m) {
    char b1[32], b2[32], b3[32], e[32];
    fputs("processes (in start order):\n", o);
    fprintf(o, "  %3s %8s %8s  %-11s %10s %10s %10s %10s  %s\n", "#", "pid", "ppid", "end", "calls",
            "allocated", "peak", "leaked", "program  (trace)");
    for (size_t i = 0; i < ml_merge_process_count(m); i++) {
        const ml_merge_process_t *p = ml_merge_process(m, i);
        const ml_totals_t *t = &p->totals;
        fprintf(o, "  %3zu %8u %8u  %-11s %10" PRIu64 " %10s %10s %10s  %s  (%s)\n", i, p->pid, p->ppid,
                ended(t, e, sizeof e), t->alloc_calls, bytes(t->bytes_allocated, b1, sizeof b1),
                bytes(t->peak_bytes, b2, sizeof b2), bytes(p->leaked_bytes, b3, sizeof b3),
                p->exe[0] ? base_name(p->exe) : "?", base_name(p->trace_path));
    }
}

/* The value of a metric in one process's share. */
static uint64_t share_value(const ml_merge_share_t *s, ml_fold_metric_t metric) {
    switch (metric) {
    case ML_FOLD_CALLS: return s->alloc_calls;
    case ML_FOLD_PEAK: return s->peak_bytes;
    case ML_FOLD_LEAKED: return s->leaked_bytes;
    case ML_FOLD_TEMPORARY: return s->temporary_allocs;
    default: return s->bytes_allocated;
    }
}

/* The same of a merged site (its sums). */
static uint64_t site_value(const ml_site_t *s, ml_fold_metric_t metric) {
    ml_merge_share_t sum = {.alloc_calls = s->alloc_calls, .bytes_allocated = s->bytes_allocated,
                            .temporary_allocs = s->temporary_allocs, .peak_bytes = s->peak_bytes,
                            .leaked_bytes = s->leaked_bytes};
    return share_value(&sum, metric);
}

static bool metric_is_bytes(ml_fold_metric_t metric) {
    return metric == ML_FOLD_ALLOC || metric == ML_FOLD_PEAK || metric == ML_FOLD_LEAKED;
}

static const char *value(uint64_t v, ml_fold_metric_t metric, char *buf, size_t len) {
    if (!v) snprintf(buf, len, "-");
    else if (metric_is_bytes(metric)) bytes(v, buf, len);
    else snprintf(buf, len, "%" PRIu64, v);
    return buf;
}

/* "processes: pid 12 1.0 KiB, pid 13 2.0 KiB": the contributors of merged
 * site i, largest first, at most 6 named. kind: a leak group's kind, or -1.
 * A "reachable" row names each process' reachable bytes at the site (it
 * named every process "-": the leaked metric is the lost kinds' sum); a
 * row of a lost kind, each process' lost bytes at the site (the three lost
 * kinds are not kept apart per process: one field more on every share). */
static uint64_t contribution(const ml_merge_share_t *s, ml_fold_metric_t metric, int kind) {
    return kind == ML_LEAK_REACHABLE ? s->reachable_bytes : share_value(s, metric);
}

static void contributors(FILE *o, const ml_merge_t *m, size_t site, ml_fold_metric_t metric, int kind) {
    size_t n;
    const ml_merge_share_t *sh = ml_merge_site_processes(m, site, &n);
    bool *done = calloc(n ? n : 1, sizeof *done);
    if (!done) return;
    fprintf(o, "        in %zu process%s:", n, n == 1 ? "" : "es");
    size_t shown = 0;
    for (; shown < n && shown < 6; shown++) {
        size_t best = n;
        for (size_t k = 0; k < n; k++)
            if (!done[k] &&
                (best == n || contribution(&sh[k], metric, kind) > contribution(&sh[best], metric, kind)))
                best = k;
        done[best] = true;
        char b[32];
        fprintf(o, "%s pid %u %s", shown ? "," : "", ml_merge_process(m, sh[best].process)->pid,
                value(contribution(&sh[best], metric, kind), metric, b, sizeof b));
    }
    if (n > shown) fprintf(o, ", +%zu more", n - shown);
    fputc('\n', o);
    free(done);
}

int ml_report_text_merged(FILE *o, const ml_merge_t *m, const ml_report_merge_opts_t *ro, unsigned top) {
    if (!top) top = 10;
    const ml_merge_totals_t *T = ml_merge_totals(m);
    const ml_totals_t *t = &T->sum;
    const ml_leaks_t *L = &T->leaks;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    size_t np = ml_merge_process_count(m);
    fprintf(o, "memlens report: %zu process%s merged (%s)\n", np, np == 1 ? "" : "es",
            ro && ro->label ? ro->label : "");
    process_table(o, m);
    fputs("\nall processes together:\n", o);
    if (T->sampled) fputs("sampled: some traces record one allocation per N bytes; their numbers are estimates\n", o);
    fprintf(o, "allocations: %" PRIu64 " calls (%" PRIu64 " temporary), %s allocated; %" PRIu64 " frees, %" PRIu64
               " reallocs, %" PRIu64 " mmaps\n",
            t->alloc_calls, t->temporary_allocs, bytes(t->bytes_allocated, b1, sizeof b1), t->free_calls,
            t->realloc_calls, t->mmap_calls);
    fprintf(o, "peak heap: the sum of the processes' peaks is %s in %" PRIu64 " blocks, an upper bound (each "
               "process peaked at its own time); the largest single peak is %s (pid %u)\n",
            bytes(t->peak_bytes, b1, sizeof b1), t->peak_blocks, bytes(T->max_process_peak_bytes, b2, sizeof b2),
            ml_merge_process(m, T->max_process)->pid);
    /* The processes whose leaks are unscanned blocks: an image replaced by
     * exec, or one with nothing live, has no scan and nothing to qualify. */
    size_t unscanned = 0, first = 0;
    for (size_t i = 0; i < np; i++) {
        const ml_merge_process_t *P = ml_merge_process(m, i);
        if (P->scanned || !P->leaked_blocks) continue;
        if (!unscanned++) first = i;
    }
    char note[160] = "";
    if (unscanned == 1)
        snprintf(note, sizeof note, " (pid %u had no reachability scan: its live blocks count as definite)",
                 ml_merge_process(m, first)->pid);
    else if (unscanned)
        snprintf(note, sizeof note,
                 " (%zu processes had no reachability scan: their live blocks count as definite)", unscanned);
    fprintf(o, "leaked at exit: %s in %" PRIu64 " blocks (%s definite, %s indirect, %s possible)%s\n",
            bytes(L->lost_bytes, b1, sizeof b1), L->lost_blocks, bytes(L->kind_bytes[ML_LEAK_DEFINITE], b2, sizeof b2),
            bytes(L->kind_bytes[ML_LEAK_INDIRECT], b3, sizeof b3), bytes(L->kind_bytes[ML_LEAK_POSSIBLE], b4, sizeof b4),
            note);
    fprintf(o, "still reachable at exit: %s in %" PRIu64 " blocks (not leaked; live at exit: %s)\n",
            bytes(L->kind_bytes[ML_LEAK_REACHABLE], b2, sizeof b2), L->kind_blocks[ML_LEAK_REACHABLE],
            bytes(L->bytes, b5, sizeof b5));
    if (L->suppressed_blocks)
        fprintf(o, "suppressed: %s in %" PRIu64 " blocks\n", bytes(L->suppressed_bytes, b1, sizeof b1),
                L->suppressed_blocks);

    size_t n;
    const ml_site_t *s = ml_merge_sites(m, &n);
    fputs("\ntop sites by peak (what each process held there at its own peak, summed):\n", o);
    unsigned shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        if (!s[i].peak_bytes) continue;
        fprintf(o, "  %10s %5.1f%% %6" PRIu64 " blocks  ", bytes(s[i].peak_bytes, b1, sizeof b1),
                t->peak_bytes ? 100.0 * (double)s[i].peak_bytes / (double)t->peak_bytes : 0, s[i].peak_blocks);
        ml__text_site_lines(o, &s[i]);
        contributors(o, m, i, ML_FOLD_PEAK, -1);
        shown++;
    }
    if (!shown) fputs("  (nothing was live)\n", o);

    fputs("\ntop leaks:\n", o);
    shown = 0;
    for (size_t i = 0; i < L->ngroups && shown < top; i++) {
        const ml_leak_group_t *g = &L->groups[i];
        fprintf(o, "  %10s %-9s %6" PRIu64 " blocks%s  ", bytes(g->bytes, b1, sizeof b1), ml_leak_kind_name(g->kind),
                g->blocks, g->suppressed ? " (suppressed)" : "");
        if (g->site < n) {
            ml__text_site_lines(o, &s[g->site]);
            contributors(o, m, g->site, ML_FOLD_LEAKED, (int)g->kind);
        } else {
            fputc('\n', o);
        }
        shown++;
    }
    if (!shown) fputs("  (none)\n", o);

    const ml_merge_gpu_device_t *d;
    size_t nd = ml_merge_gpu_devices(m, &d);
    if (nd) fputs("\nGPU memory (each device's peak: the sum of the processes' peaks on it):\n", o);
    for (size_t i = 0; i < nd; i++)
        fprintf(o, "  device %d: %u processes, peak %s (largest single %s), leaked %s; %" PRIu64 " allocs, %" PRIu64
                   " frees\n",
                (int)d[i].device, d[i].processes, bytes(d[i].peak_bytes, b1, sizeof b1),
                bytes(d[i].max_process_peak_bytes, b2, sizeof b2), bytes(d[i].leaked_bytes, b3, sizeof b3),
                d[i].alloc_calls, d[i].free_calls);

    fputs("\nnot merged: fragmentation, the timeline and the strategy advisor are per process "
          "(memlens report TRACE)\n", o);
    const char *const *w;
    size_t nw = ml_merge_warnings(m, &w);
    if (nw) fputs("\nwarnings:\n", o);
    for (size_t i = 0; i < nw; i++) fprintf(o, "  %s\n", w[i]);
    return ferror(o) ? -EIO : 0;
}

/* ------------------------------------------------------------------------- */
/* Side by side                                                              */
/* ------------------------------------------------------------------------- */

typedef struct {
    const ml_site_t *s;
    ml_fold_metric_t metric;
} bp_ctx_t;

static int cmp_by_metric(const void *x, const void *y, void *c) {
    const bp_ctx_t *ctx = c;
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    uint64_t va = site_value(&ctx->s[a], ctx->metric), vb = site_value(&ctx->s[b], ctx->metric);
    if (va != vb) return va > vb ? -1 : 1;
    return a < b ? -1 : a > b;
}

static const char *const metric_words[] = {
    "bytes allocated", "allocation calls", "bytes live at each process's own peak",
    "bytes live at exit (every kind)", "temporary allocations"};

int ml_report_by_process(FILE *o, const ml_merge_t *m, ml_fold_metric_t metric, unsigned top) {
    if (!top) top = 20;
    size_t n, np = ml_merge_process_count(m);
    const ml_site_t *s = ml_merge_sites(m, &n);
    size_t cols = np < ML_BY_PROCESS_COLUMNS ? np : ML_BY_PROCESS_COLUMNS;
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    uint64_t *row = malloc((cols ? cols : 1) * sizeof *row);
    if (!order || !row) {
        free(order);
        free(row);
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (site_value(&s[i], metric)) order[k++] = (uint32_t)i;
    bp_ctx_t ctx = {s, metric};
    qsort_r(order, k, sizeof *order, cmp_by_metric, &ctx);
    fprintf(o, "sites by process: %s", metric_words[metric < 5 ? metric : 0]);
    if (cols < np) fprintf(o, " (processes 0-%zu of %zu; the JSON report has them all)", cols - 1, np);
    fputc('\n', o);
    fprintf(o, "  %10s", "all");
    for (size_t c = 0; c < cols; c++) {
        char h[32];
        snprintf(h, sizeof h, "pid %u", ml_merge_process(m, c)->pid);
        fprintf(o, " %11s", h);
    }
    fputs("  site\n", o);
    char b[32];
    for (size_t r = 0; r < k && r < top; r++) {
        const ml_site_t *site = &s[order[r]];
        memset(row, 0, cols * sizeof *row);
        size_t ns;
        const ml_merge_share_t *sh = ml_merge_site_processes(m, order[r], &ns);
        for (size_t i = 0; i < ns; i++)
            if (sh[i].process < cols) row[sh[i].process] = share_value(&sh[i], metric);
        fprintf(o, "  %10s", value(site_value(site, metric), metric, b, sizeof b));
        for (size_t c = 0; c < cols; c++) fprintf(o, " %11s", value(row[c], metric, b, sizeof b));
        fputs("  ", o);
        if (site->nframes) ml__text_where(o, &site->frames[site->headline < site->nframes ? site->headline : 0]);
        else fputs("[no stack]", o);
        fputc('\n', o);
    }
    if (!k) fputs("  (no site has any)\n", o);
    free(order);
    free(row);
    return ferror(o) ? -EIO : 0;
}
