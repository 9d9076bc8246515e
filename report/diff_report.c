/* diff_report.c - `memlens diff`: the JSON document (docs/diff-schema.json)
 * and the text table. The deltas come from analysis/diff.c. */
#include "ml_report.h"
#include "ml_config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

const char *ml_diff_metric_name(ml_diff_metric_t m) {
    static const char *const n[] = {"peak_bytes", "leaked_bytes", "alloc_calls", "bytes_allocated"};
    return m < ML_DIFF_METRICS ? n[m] : "?";
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

static void metrics(FILE *o, const ml_diff_metrics_t *m) {
    fprintf(o,
            "{\"peak_bytes\": %" PRIu64 ", \"leaked_bytes\": %" PRIu64 ", \"alloc_calls\": %" PRIu64
            ", \"bytes_allocated\": %" PRIu64 "}",
            m->peak_bytes, m->leaked_bytes, m->alloc_calls, m->bytes_allocated);
}

static void deltas(FILE *o, const ml_diff_metrics_t *b, const ml_diff_metrics_t *n) {
    fprintf(o,
            "{\"peak_bytes\": %" PRId64 ", \"leaked_bytes\": %" PRId64 ", \"alloc_calls\": %" PRId64
            ", \"bytes_allocated\": %" PRId64 "}",
            (int64_t)(n->peak_bytes - b->peak_bytes), (int64_t)(n->leaked_bytes - b->leaked_bytes),
            (int64_t)(n->alloc_calls - b->alloc_calls), (int64_t)(n->bytes_allocated - b->bytes_allocated));
}

static const char *status(const ml_diff_entry_t *e) {
    if (!e->base) return "new";
    if (!e->cur) return "gone";
    if (!memcmp(&e->b, &e->n, sizeof e->b)) return "same";
    return "changed";
}

static void frames(FILE *o, const ml_site_t *s) {
    fputc('[', o);
    for (uint32_t i = 0; s && i < s->nframes; i++) {
        const ml_frame_t *f = &s->frames[i];
        fputs(i ? ", {\"function\": " : "{\"function\": ", o);
        ml_json_string(o, f->function);
        fputs(", \"file\": ", o);
        ml_json_string(o, f->file);
        if (f->line) fprintf(o, ", \"line\": %u", f->line);
        else fputs(", \"line\": null", o);
        fputs(", \"module\": ", o);
        ml_json_string(o, f->module);
        fprintf(o, ", \"address\": %" PRIu64 "}", f->address);
    }
    fputc(']', o);
}

static void side(FILE *o, const char *path, const ml_analysis_t *a) {
    const ml_process_info_t *p = ml_analysis_process(a);
    fputs("{\"path\": ", o);
    ml_json_string(o, path);
    fputs(", \"command\": [", o);
    for (uint32_t i = 0; i < p->argc; i++) {
        if (i) fputs(", ", o);
        ml_json_string(o, p->argv[i]);
    }
    fputs("]", o);
    for (int m = 0; m < ML_DIFF_METRICS; m++)
        fprintf(o, ", \"%s\": %" PRIu64, ml_diff_metric_name((ml_diff_metric_t)m),
                ml_diff_total(a, (ml_diff_metric_t)m));
    fputc('}', o);
}

int ml_report_diff_json(FILE *o, const ml_analysis_t *base, const ml_analysis_t *cur,
                        const ml_diff_t *d, const ml_diff_report_opts_t *ro) {
    fprintf(o, "{\"schema_version\": %d, \"kind\": \"memlens-diff\", \"generator\": \"memlens %s\",\n",
            ML_REPORT_SCHEMA_VERSION, ML_VERSION);
    fputs("\"base\": ", o);
    side(o, ro->base_path, base);
    fputs(",\n\"new\": ", o);
    side(o, ro->new_path, cur);
    fputs(",\n\"totals\": {", o);
    for (int m = 0; m < ML_DIFF_METRICS; m++) {
        uint64_t b = ml_diff_total(base, (ml_diff_metric_t)m), n = ml_diff_total(cur, (ml_diff_metric_t)m);
        fprintf(o, "%s\"%s\": {\"base\": %" PRIu64 ", \"new\": %" PRIu64 ", \"delta\": %" PRId64 ", \"percent\": ",
                m ? ", " : "", ml_diff_metric_name((ml_diff_metric_t)m), b, n, (int64_t)(n - b));
        if (b) fprintf(o, "%.4f}", ((double)n - (double)b) * 100.0 / (double)b);
        else fputs(n ? "null}" : "0}", o);
    }
    fputs("},\n\"gate\": {\"fail_on_increase_percent\": ", o);
    if (ro->gate) fprintf(o, "%g", ro->gate_percent);
    else fputs("null", o);
    fputs(", \"exceeded\": [", o);
    bool first = true;
    for (int m = 0; ro->gate && m < ML_DIFF_CALLS + 1; m++)
        if (ml_diff_exceeds(ml_diff_total(base, (ml_diff_metric_t)m), ml_diff_total(cur, (ml_diff_metric_t)m),
                            ro->gate_percent)) {
            fprintf(o, "%s\"%s\"", first ? "" : ", ", ml_diff_metric_name((ml_diff_metric_t)m));
            first = false;
        }
    fputs("]},\n\"sites\": [", o);
    size_t n;
    const ml_diff_entry_t *e = ml_diff_entries(d, &n);
    if (ro->top && n > ro->top) n = ro->top;
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n  {\"status\": \"" : "\n  {\"status\": \"", o);
        fputs(status(&e[i]), o);
        fputs("\", \"key\": ", o);
        ml_json_string(o, e[i].key);
        fputs(", \"frames\": ", o);
        frames(o, e[i].cur ? e[i].cur : e[i].base);
        fputs(", \"base\": ", o);
        metrics(o, &e[i].b);
        fputs(", \"new\": ", o);
        metrics(o, &e[i].n);
        fputs(", \"delta\": ", o);
        deltas(o, &e[i].b, &e[i].n);
        fputc('}', o);
    }
    fputs("]}\n", o);
    return ferror(o) ? -EIO : 0;
}

static void signed_bytes(FILE *o, int64_t v) {
    char buf[32];
    fprintf(o, "%c%s", v < 0 ? '-' : '+', ml_fmt_bytes((uint64_t)(v < 0 ? -v : v), buf, sizeof buf));
}

int ml_report_diff_text(FILE *o, const ml_analysis_t *base, const ml_analysis_t *cur,
                        const ml_diff_t *d, const ml_diff_report_opts_t *ro) {
    fprintf(o, "memlens diff: %s -> %s\n", ro->base_path, ro->new_path);
    for (int m = 0; m < ML_DIFF_METRICS; m++) {
        uint64_t b = ml_diff_total(base, (ml_diff_metric_t)m), n = ml_diff_total(cur, (ml_diff_metric_t)m);
        fprintf(o, "  %-16s %14" PRIu64 " -> %14" PRIu64 "  ", m == ML_DIFF_LEAKED ? "definite leaks" :
                ml_diff_metric_name((ml_diff_metric_t)m), b, n);
        if (b) fprintf(o, "%+.1f%%\n", ((double)n - (double)b) * 100.0 / (double)b);
        else fputs(n ? "(new)\n" : "\n", o);
    }
    size_t n;
    const ml_diff_entry_t *e = ml_diff_entries(d, &n);
    unsigned top = ro->top ? ro->top : 20;
    fputs("\nsites that changed most (peak, leaked, calls):\n", o);
    unsigned shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        if (!strcmp(status(&e[i]), "same")) continue;
        fputs("  ", o);
        signed_bytes(o, (int64_t)(e[i].n.peak_bytes - e[i].b.peak_bytes));
        fputs(" ", o);
        signed_bytes(o, (int64_t)(e[i].n.leaked_bytes - e[i].b.leaked_bytes));
        fprintf(o, " %+" PRId64 " calls  [%s]  ", (int64_t)(e[i].n.alloc_calls - e[i].b.alloc_calls), status(&e[i]));
        const ml_site_t *s = e[i].cur ? e[i].cur : e[i].base;
        if (s && s->nframes) {
            const ml_frame_t *f = &s->frames[0];
            fputs(f->function, o);
            if (f->file) {
                const char *b = strrchr(f->file, '/');
                fprintf(o, "  %s:%u", b ? b + 1 : f->file, f->line);
            }
            if (s->nframes > 1) fprintf(o, "  <- %s", s->frames[1].function);
        }
        fputc('\n', o);
        shown++;
    }
    if (!shown) fputs("  (no site changed)\n", o);
    return ferror(o) ? -EIO : 0;
}
