/* diff_report.c - `memlens diff`: the JSON document (docs/diff-schema.json)
 * and the text table. The deltas come from analysis/diff.c, the heap's and
 * the GPU's; the GPU part of the text appears only when either trace has
 * GPU records, so heap-only diffs read exactly as they did. */
#include "report_internal.h"
#include "ml_config.h"
#include "ml_gpu.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *ml_diff_metric_name(ml_diff_metric_t m) {
    static const char *const n[] = {"peak_bytes", "leaked_bytes", "alloc_calls", "bytes_allocated"};
    return m < ML_DIFF_METRICS ? n[m] : "?";
}

const char *ml_diff_metric_label(ml_diff_metric_t m) {
    static const char *const n[] = {"peak heap", "leaked at exit", "allocation calls", "bytes allocated"};
    return m < ML_DIFF_METRICS ? n[m] : "?";
}

const char *ml_diff_gpu_metric_label(ml_diff_metric_t m) {
    static const char *const n[] = {"peak", "leaked", "allocation calls", "bytes allocated"};
    return m < ML_DIFF_METRICS ? n[m] : "?";
}

int ml_diff_fmt_value(ml_diff_metric_t m, uint64_t v, char *buf, size_t len) {
    if (m == ML_DIFF_CALLS) return snprintf(buf, len, "%" PRIu64, v);
    ml_fmt_bytes(v, buf, len);
    return (int)strlen(buf);
}

uint64_t ml_diff_total(const ml_analysis_t *a, ml_diff_metric_t m) {
    const ml_totals_t *t = ml_analysis_totals(a);
    switch (m) {
    case ML_DIFF_PEAK: return t->peak_bytes;
    case ML_DIFF_LEAKED: return ml_analysis_leaks(a)->gate_bytes;
    case ML_DIFF_CALLS: return t->alloc_calls;
    case ML_DIFF_BYTES: return t->bytes_allocated;
    default: return 0;
    }
}

bool ml_diff_exceeds(uint64_t base, uint64_t cur, double percent) {
    if (cur <= base) return false;
    if (base == 0) return true;
    return (double)(cur - base) * 100.0 > percent * (double)base;
}

size_t ml_diff_gpu_exceeded(const ml_diff_t *d, double percent, ml_diff_gpu_gate_t *out) {
    size_t nd, k = 0;
    const ml_diff_gpu_device_t *g = ml_diff_gpu_devices(d, &nd);
    if (!nd) return 0;
    for (size_t i = 0; i < nd; i++)
        if (ml_diff_exceeds(g[i].b.peak_bytes, g[i].n.peak_bytes, percent))
            out[k++] = (ml_diff_gpu_gate_t){true, g[i].device, ML_DIFF_PEAK, g[i].b.peak_bytes,
                                            g[i].n.peak_bytes};
    uint64_t b, n;
    ml_diff_gpu_leaked(d, &b, &n);
    if (ml_diff_exceeds(b, n, percent)) out[k++] = (ml_diff_gpu_gate_t){false, 0, ML_DIFF_LEAKED, b, n};
    return k;
}

static void metrics(ml_json_t *w, const char *key, const ml_diff_metrics_t *m) {
    ml_json_key(w, key);
    ml_json_object(w);
    ml_json_kv_u64(w, "peak_bytes", m->peak_bytes);
    ml_json_kv_u64(w, "leaked_bytes", m->leaked_bytes);
    ml_json_kv_u64(w, "alloc_calls", m->alloc_calls);
    ml_json_kv_u64(w, "bytes_allocated", m->bytes_allocated);
    ml_json_end(w);
}

static void deltas(ml_json_t *w, const ml_diff_metrics_t *b, const ml_diff_metrics_t *n) {
    ml_json_key(w, "delta");
    ml_json_object(w);
    ml_json_kv_i64(w, "peak_bytes", (int64_t)(n->peak_bytes - b->peak_bytes));
    ml_json_kv_i64(w, "leaked_bytes", (int64_t)(n->leaked_bytes - b->leaked_bytes));
    ml_json_kv_i64(w, "alloc_calls", (int64_t)(n->alloc_calls - b->alloc_calls));
    ml_json_kv_i64(w, "bytes_allocated", (int64_t)(n->bytes_allocated - b->bytes_allocated));
    ml_json_end(w);
}

/* `"base": {...}, "new": {...}, "delta": {...}` of a site or a device. */
static void base_new_delta(ml_json_t *w, const ml_diff_metrics_t *b, const ml_diff_metrics_t *n) {
    metrics(w, "base", b);
    metrics(w, "new", n);
    deltas(w, b, n);
}

static const char *status_of(bool in_base, bool in_cur, const ml_diff_metrics_t *b,
                             const ml_diff_metrics_t *n) {
    if (!in_base) return "new";
    if (!in_cur) return "gone";
    if (!memcmp(b, n, sizeof *b)) return "same";
    return "changed";
}

static const char *status(const ml_diff_entry_t *e) {
    return status_of(e->base, e->cur, &e->b, &e->n);
}

static const char *gpu_status(const ml_diff_gpu_entry_t *e) {
    return status_of(e->in_base, e->in_cur, &e->b, &e->n);
}

/* The frames of a GPU entry: the new trace's stack when it has one. */
#define GPU_FRAMES 64
static size_t gpu_entry_frames(const ml_analysis_t *base, const ml_analysis_t *cur,
                               const ml_diff_gpu_entry_t *e, ml_frame_t *f, size_t max) {
    if (e->in_cur) return e->cur_stack ? ml_gpu_stack_frames(cur, e->cur_stack, f, max) : 0;
    return e->base_stack ? ml_gpu_stack_frames(base, e->base_stack, f, max) : 0;
}

/* "gpu": each device's totals and the GPU sites, in the shape of "sites". */
static void gpu_json(ml_json_t *w, const ml_analysis_t *base, const ml_analysis_t *cur, const ml_diff_t *d,
                     unsigned top) {
    size_t nd, n;
    const ml_diff_gpu_device_t *g = ml_diff_gpu_devices(d, &nd);
    ml_json_key(w, "gpu");
    ml_json_object(w);
    ml_json_key(w, "devices");
    ml_json_array(w);
    for (size_t i = 0; i < nd; i++) {
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_i64(w, "device", g[i].device);
        base_new_delta(w, &g[i].b, &g[i].n);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_break(w, 0);
    ml_json_key(w, "sites");
    ml_json_array(w);
    const ml_diff_gpu_entry_t *e = ml_diff_gpu_entries(d, &n);
    if (top && n > top) n = top;
    ml_frame_t f[GPU_FRAMES];
    for (size_t i = 0; i < n; i++) {
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_str(w, "status", gpu_status(&e[i]));
        ml_json_kv_i64(w, "device", e[i].device);
        ml_json_kv_str(w, "key", e[i].key);
        ml_json_key(w, "frames");
        ml__json_frames(w, f, gpu_entry_frames(base, cur, &e[i], f, GPU_FRAMES), false);
        base_new_delta(w, &e[i].b, &e[i].n);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

bool ml_report_diff_program_warning(const ml_analysis_t *base, const ml_analysis_t *cur, char *buf,
                                    size_t len) {
    if (len) buf[0] = '\0';
    if (ml_diff_program(base, cur) != ML_DIFF_PROGRAM_DIFFERENT) return false;
    snprintf(buf, len,
             "BASE and NEW are traces of different programs (%s and %s): their sites are matched by "
             "function names only, and the totals compare two programs, not two runs of one",
             ml_analysis_process(base)->exe, ml_analysis_process(cur)->exe);
    return true;
}

bool ml_report_diff_unjudged_warning(const ml_analysis_t *a, const char *which, char *buf, size_t len) {
    if (len) buf[0] = '\0';
    ml_unjudged_t u;
    if (!ml_totals_unjudged(ml_analysis_totals(a), &u)) return false;
    snprintf(buf, len,
             "%s judges no leak (%s): the blocks live %s are not leaks, and its leaked totals are 0 "
             "because nothing was judged",
             which, u.why, u.when);
    return true;
}

static void side(ml_json_t *w, const char *key, const char *path, const ml_analysis_t *a) {
    const ml_process_info_t *p = ml_analysis_process(a);
    ml_json_key(w, key);
    ml_json_object(w);
    ml_json_kv_str(w, "path", path);
    if (p->exe && *p->exe) ml_json_kv_str(w, "exe", p->exe);
    else ml_json_kv_null(w, "exe");
    ml_json_key(w, "command");
    ml_json_array(w);
    for (uint32_t i = 0; i < p->argc; i++) ml_json_str(w, p->argv[i]);
    ml_json_end(w);
    for (int m = 0; m < ML_DIFF_METRICS; m++)
        ml_json_kv_u64(w, ml_diff_metric_name((ml_diff_metric_t)m), ml_diff_total(a, (ml_diff_metric_t)m));
    ml_json_end(w);
}

static void gate(ml_json_t *w, const ml_analysis_t *base, const ml_analysis_t *cur, const ml_diff_t *d,
                 const ml_diff_report_opts_t *ro) {
    ml_json_key(w, "gate");
    ml_json_object(w);
    if (ro->gate) ml_json_kv_double(w, "fail_on_increase_percent", ro->gate_percent);
    else ml_json_kv_null(w, "fail_on_increase_percent");
    ml_json_key(w, "exceeded");
    ml_json_array(w);
    for (int m = 0; ro->gate && m < ML_DIFF_CALLS + 1; m++)
        if (ml_diff_exceeds(ml_diff_total(base, (ml_diff_metric_t)m), ml_diff_total(cur, (ml_diff_metric_t)m),
                            ro->gate_percent))
            ml_json_str(w, ml_diff_metric_name((ml_diff_metric_t)m));
    ml_json_end(w);
    ml_json_key(w, "gpu_exceeded");
    ml_json_array(w);
    size_t nd;
    ml_diff_gpu_devices(d, &nd);
    ml_diff_gpu_gate_t *gx = ro->gate && nd ? calloc(nd + 1, sizeof *gx) : NULL;
    size_t ngx = gx ? ml_diff_gpu_exceeded(d, ro->gate_percent, gx) : 0;
    for (size_t i = 0; i < ngx; i++) {
        ml_json_object(w);
        ml_json_kv_str(w, "metric", ml_diff_metric_name(gx[i].metric));
        if (gx[i].has_device) ml_json_kv_i64(w, "device", gx[i].device);
        else ml_json_kv_null(w, "device");
        ml_json_end(w);
    }
    free(gx);
    ml_json_end(w);
    /* A side the gate could not judge fails it (exit 3) as an exceeded
     * total does: the document says so too. */
    ml_json_key(w, "incomplete");
    ml_json_array(w);
    for (int k = 0; ro->gate && k < 2; k++) {
        if (!ro->incomplete[k]) continue;
        ml_json_object(w);
        ml_json_kv_str(w, "trace", k ? "new" : "base");
        ml_json_kv_str(w, "why", ro->incomplete[k]);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

int ml_report_diff_json(FILE *o, const ml_analysis_t *base, const ml_analysis_t *cur,
                        const ml_diff_t *d, const ml_diff_report_opts_t *ro) {
    ml_json_t *w;
    int rc = ml_json_new(o, &w);
    if (rc < 0) return rc;
    ml_json_object(w);
    ml_json_kv_u64(w, "schema_version", ML_REPORT_SCHEMA_VERSION);
    ml_json_kv_str(w, "kind", "memlens-diff");
    ml_json_kv_str(w, "generator", "memlens " ML_VERSION);
    ml_json_break(w, 0);
    side(w, "base", ro->base_path, base);
    ml_json_break(w, 0);
    side(w, "new", ro->new_path, cur);
    ml_json_break(w, 0);
    /* Two different programs: said here as on stderr (cli/diff.c). */
    ml_diff_program_t prog = ml_diff_program(base, cur);
    if (prog == ML_DIFF_PROGRAM_UNKNOWN) ml_json_kv_null(w, "same_program");
    else ml_json_kv_bool(w, "same_program", prog == ML_DIFF_PROGRAM_SAME);
    ml_json_key(w, "warnings");
    ml_json_array(w);
    char warning[2 * PATH_MAX + 256];
    if (ml_report_diff_program_warning(base, cur, warning, sizeof warning)) ml_json_str(w, warning);
    if (ml_report_diff_unjudged_warning(base, "BASE", warning, sizeof warning)) ml_json_str(w, warning);
    if (ml_report_diff_unjudged_warning(cur, "NEW", warning, sizeof warning)) ml_json_str(w, warning);
    ml_json_end(w);
    ml_json_break(w, 0);
    ml_json_key(w, "totals");
    ml_json_object(w);
    for (int m = 0; m < ML_DIFF_METRICS; m++) {
        uint64_t b = ml_diff_total(base, (ml_diff_metric_t)m), n = ml_diff_total(cur, (ml_diff_metric_t)m);
        ml_json_key(w, ml_diff_metric_name((ml_diff_metric_t)m));
        ml_json_object(w);
        ml_json_kv_u64(w, "base", b);
        ml_json_kv_u64(w, "new", n);
        ml_json_kv_i64(w, "delta", (int64_t)(n - b));
        /* null: grew from nothing; 0: nothing before or after */
        if (b) ml_json_kv_double(w, "percent", ((double)n - (double)b) * 100.0 / (double)b);
        else if (n) ml_json_kv_null(w, "percent");
        else ml_json_kv_u64(w, "percent", 0);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_break(w, 0);
    gate(w, base, cur, d, ro);
    ml_json_break(w, 0);
    ml_json_key(w, "sites");
    ml_json_array(w);
    size_t n;
    const ml_diff_entry_t *e = ml_diff_entries(d, &n);
    if (ro->top && n > ro->top) n = ro->top;
    for (size_t i = 0; i < n; i++) {
        const ml_site_t *s = e[i].cur ? e[i].cur : e[i].base;
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_str(w, "status", status(&e[i]));
        ml_json_kv_str(w, "key", e[i].key);
        ml_json_key(w, "frames");
        ml__json_frames(w, s ? s->frames : NULL, s ? s->nframes : 0, false);
        base_new_delta(w, &e[i].b, &e[i].n);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_break(w, 0);
    gpu_json(w, base, cur, d, ro->top);
    ml_json_end(w);
    ml_json_newline(w);
    rc = ml_json_finish(w);
    ml_json_free(w);
    return rc;
}

/* The site's headline frame (the program's own, as `memlens report` names
 * the site) with its file:line and its caller, on the current line; C++
 * names shortened as the report's (ml_frame_short_name). */
static void where(FILE *o, const ml_frame_t *fr, size_t nframes, uint32_t headline) {
    if (!nframes) return;
    size_t h = headline < nframes ? headline : 0;
    const ml_frame_t *f = &fr[h];
    char name[256];
    fputs(f->function ? ml_frame_short_name(f->function, name, sizeof name) : "?", o);
    if (f->file) {
        const char *b = strrchr(f->file, '/');
        fprintf(o, "  %s:%u", b ? b + 1 : f->file, f->line);
    }
    if (h + 1 < nframes)
        fprintf(o, "  <- %s", fr[h + 1].function ? ml_frame_short_name(fr[h + 1].function, name, sizeof name) : "?");
}

/* One total: its name, base and new values in human units, the change. */
static void total_line(FILE *o, const char *indent, int width, const char *label, ml_diff_metric_t m,
                       uint64_t b, uint64_t n) {
    char vb[32], vn[32];
    ml_diff_fmt_value(m, b, vb, sizeof vb);
    ml_diff_fmt_value(m, n, vn, sizeof vn);
    fprintf(o, "%s%-*s %12s -> %12s  ", indent, width, label, vb, vn);
    if (b) fprintf(o, "%+.1f%%\n", ((double)n - (double)b) * 100.0 / (double)b);
    else fputs(n ? "(new)\n" : "\n", o);
}

static void totals_header(FILE *o, const char *indent, int width) {
    fprintf(o, "%s%-*s %12s    %12s  %s\n", indent, width, "", "base", "new", "change");
}

/* The header of the site lists; the rows line up under it (site_row). */
static void sites_header(FILE *o, bool gpu) {
    fprintf(o, "  %10s %12s %10s  %-7s  %s\n", gpu ? "peak" : "peak heap", "leaked", "calls",
            "status", "site");
}

static void site_row(FILE *o, int64_t peak, int64_t leaked, int64_t calls, const char *st) {
    char b1[40], b2[40], num[32];
    size_t k = 0;
    b1[k++] = peak < 0 ? '-' : '+';
    ml_fmt_bytes((uint64_t)(peak < 0 ? -peak : peak), b1 + k, sizeof b1 - k);
    k = 0;
    b2[k++] = leaked < 0 ? '-' : '+';
    ml_fmt_bytes((uint64_t)(leaked < 0 ? -leaked : leaked), b2 + k, sizeof b2 - k);
    snprintf(num, sizeof num, "%+" PRId64, calls);
    fprintf(o, "  %10s %12s %10s  %-7s  ", b1, b2, num, st);
}

/* GPU memory, when either trace has GPU records: each device's four totals
 * (lined up with the heap's), then the GPU sites that changed most, by
 * |delta peak| first. */
static void gpu_text(FILE *o, const ml_analysis_t *base, const ml_analysis_t *cur, const ml_diff_t *d,
                     unsigned top) {
    size_t nd, n;
    const ml_diff_gpu_device_t *g = ml_diff_gpu_devices(d, &nd);
    if (!nd) return;
    fputs("\nGPU memory (device bytes; leaked: left allocated at exit):\n", o);
    for (size_t i = 0; i < nd; i++) {
        if (g[i].device == ML_GPU_DEVICE_UNKNOWN) fputs("  device ?:\n", o);
        else fprintf(o, "  device %d:\n", (int)g[i].device);
        totals_header(o, "    ", 16);
        total_line(o, "    ", 16, ml_diff_gpu_metric_label(ML_DIFF_PEAK), ML_DIFF_PEAK, g[i].b.peak_bytes,
                   g[i].n.peak_bytes);
        total_line(o, "    ", 16, ml_diff_gpu_metric_label(ML_DIFF_LEAKED), ML_DIFF_LEAKED, g[i].b.leaked_bytes,
                   g[i].n.leaked_bytes);
        total_line(o, "    ", 16, ml_diff_gpu_metric_label(ML_DIFF_CALLS), ML_DIFF_CALLS, g[i].b.alloc_calls,
                   g[i].n.alloc_calls);
        total_line(o, "    ", 16, ml_diff_gpu_metric_label(ML_DIFF_BYTES), ML_DIFF_BYTES, g[i].b.bytes_allocated,
                   g[i].n.bytes_allocated);
    }
    const ml_diff_gpu_entry_t *e = ml_diff_gpu_entries(d, &n);
    fputs("\nGPU sites that changed most (change from base to new):\n", o);
    unsigned shown = 0;
    ml_frame_t f[GPU_FRAMES];
    for (size_t i = 0; i < n && shown < top; i++) {
        if (!strcmp(gpu_status(&e[i]), "same")) continue;
        if (!shown) sites_header(o, true);
        site_row(o, (int64_t)(e[i].n.peak_bytes - e[i].b.peak_bytes),
                 (int64_t)(e[i].n.leaked_bytes - e[i].b.leaked_bytes),
                 (int64_t)(e[i].n.alloc_calls - e[i].b.alloc_calls), gpu_status(&e[i]));
        fprintf(o, "device %d  ", (int)e[i].device);
        size_t nf = gpu_entry_frames(base, cur, &e[i], f, 2);
        if (nf) where(o, f, nf, 0);
        else fputs(e[i].key, o);
        fputc('\n', o);
        shown++;
    }
    if (!shown) fputs("  (no GPU site changed)\n", o);
}

int ml_report_diff_text(FILE *o, const ml_analysis_t *base, const ml_analysis_t *cur,
                        const ml_diff_t *d, const ml_diff_report_opts_t *ro) {
    fprintf(o, "memlens diff: %s -> %s\n", ro->base_path, ro->new_path);
    totals_header(o, "  ", 16);
    for (int m = 0; m < ML_DIFF_METRICS; m++) {
        uint64_t b = ml_diff_total(base, (ml_diff_metric_t)m), n = ml_diff_total(cur, (ml_diff_metric_t)m);
        total_line(o, "  ", 16, ml_diff_metric_label((ml_diff_metric_t)m), (ml_diff_metric_t)m, b, n);
    }
    size_t n;
    const ml_diff_entry_t *e = ml_diff_entries(d, &n);
    unsigned top = ro->top ? ro->top : 20;
    /* Suppressed sites count no leak (analysis/diff.c); say so when any is. */
    bool supp = ml_analysis_leaks(base)->suppressed_blocks || ml_analysis_leaks(cur)->suppressed_blocks;
    fprintf(o, "\nsites that changed most (change from base to new; leaked: definite + indirect + possible%s):\n",
            supp ? ", not suppressed" : "");
    unsigned shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        if (!strcmp(status(&e[i]), "same")) continue;
        if (!shown) sites_header(o, false);
        site_row(o, (int64_t)(e[i].n.peak_bytes - e[i].b.peak_bytes),
                 (int64_t)(e[i].n.leaked_bytes - e[i].b.leaked_bytes),
                 (int64_t)(e[i].n.alloc_calls - e[i].b.alloc_calls), status(&e[i]));
        const ml_site_t *s = e[i].cur ? e[i].cur : e[i].base;
        if (s) where(o, s->frames, s->nframes, s->headline);
        fputc('\n', o);
        shown++;
    }
    if (!shown) fputs("  (no site changed)\n", o);
    gpu_text(o, base, cur, d, top);
    return ferror(o) ? -EIO : 0;
}
