/* speedscope.c - the speedscope export: speedscope's own JSON file format
 * (https://www.speedscope.app/file-format-schema.json), written through the
 * one JSON writer (json_write.h). docs/exports.md describes the mapping.
 *
 * One "sampled" profile per metric, each with one sample per allocation
 * site whose metric is not 0, weighted by it:
 *
 *   0 bytes allocated                        unit "bytes"
 *   1 allocation calls                       unit "none"
 *   2 bytes live at the peak                 unit "bytes" (shown first)
 *   3 bytes leaked (definite + indirect + possible)     unit "bytes"
 *   4 bytes live at exit (leaked + reachable) unit "bytes"
 *
 * A sample is a stack of indexes into the shared frame table, outermost
 * first, as the format asks. A frame is a call site: a function, its source
 * file and the line it was at (each inlined frame is its own entry), so the
 * same function called from two lines shows as two frames, as py-spy's
 * exports do; the folded export (--folded) merges by function instead. A
 * site whose stack was not recorded gets the one frame "[stack not
 * recorded]", so its weight is seen rather than lost. Weights of a profile
 * add up to its endValue (startValue is 0).
 */
#define _GNU_SOURCE
#include "export_internal.h"
#include "json_write.h"
#include "ml_config.h"
#include "ml_report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define NO_STACK "[stack not recorded]"

enum { P_ALLOC, P_CALLS, P_PEAK, P_LEAKED, P_LIVE_AT_EXIT, NPROFILES };

static const struct {
    const char *name, *unit;
} profiles[NPROFILES] = {
    {"bytes allocated", "bytes"},
    {"allocation calls", "none"},
    {"bytes live at the peak", "bytes"},
    {"bytes leaked (definite + indirect + possible)", "bytes"},
    {"bytes live at exit (leaked + reachable)", "bytes"},
};

static uint64_t metric(const ml_site_t *s, int m) {
    switch (m) {
    case P_ALLOC: return s->bytes_allocated;
    case P_CALLS: return s->alloc_calls;
    case P_PEAK: return s->peak_bytes;
    case P_LEAKED:
        return s->leaked_kind_bytes[ML_LEAK_DEFINITE] + s->leaked_kind_bytes[ML_LEAK_INDIRECT] +
               s->leaked_kind_bytes[ML_LEAK_POSSIBLE];
    default: return s->leaked_bytes;
    }
}

/* A frame's key in the frame table: string indexes (+1, 0 for NULL) of its
 * function, file and module, and its line. */
typedef struct {
    uint32_t function, file, module, line;
} frame_key_t;

typedef struct {
    ml__intern_t strings, frames;
    uint32_t *stack;  /* every site's frame indexes, outermost first, one after the other */
    size_t *off;      /* site i: stack[off[i] .. off[i+1]) */
    int err;
} speedscope_t;

static uint32_t sidx(speedscope_t *x, const char *s) {
    if (!s) return 0;
    int64_t i = ml__intern_str(&x->strings, s);
    if (i < 0) x->err = -ENOMEM;
    return i < 0 ? 0 : (uint32_t)i + 1;
}

static uint32_t frame_index(speedscope_t *x, const ml_frame_t *f) {
    frame_key_t k = {sidx(x, f->function), sidx(x, f->file), sidx(x, f->module), f->line};
    int64_t i = ml__intern(&x->frames, &k, sizeof k, NULL);
    if (i < 0) x->err = -ENOMEM;
    return i < 0 ? 0 : (uint32_t)i;
}

/* Fills the frame table and every site's stack. */
static int collect(speedscope_t *x, const ml_site_t *s, size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += s[i].nframes ? s[i].nframes : 1;
    x->stack = malloc((total ? total : 1) * sizeof *x->stack);
    x->off = malloc((n + 1) * sizeof *x->off);
    if (!x->stack || !x->off) return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n && !x->err; i++) {
        x->off[i] = k;
        if (!s[i].nframes) {
            ml_frame_t none = {.function = NO_STACK};
            x->stack[k++] = frame_index(x, &none);
        }
        for (uint32_t j = s[i].nframes; j > 0; j--) x->stack[k++] = frame_index(x, &s[i].frames[j - 1]);
    }
    x->off[n] = k;
    return x->err;
}

static const char *string_of(const speedscope_t *x, uint32_t idx) {
    uint32_t len;
    return idx ? ml__intern_key(&x->strings, idx - 1, &len) : NULL;
}

static void write_frames(ml_json_t *w, const speedscope_t *x) {
    ml_json_key(w, "shared");
    ml_json_object(w);
    ml_json_key(w, "frames");
    ml_json_array(w);
    for (uint32_t i = 0; i < x->frames.n; i++) {
        uint32_t len;
        const frame_key_t *k = ml__intern_key(&x->frames, i, &len);
        ml_json_break(w, 4);
        ml_json_object(w);
        ml_json_kv_str(w, "name", string_of(x, k->function));
        if (k->file) ml_json_kv_str(w, "file", string_of(x, k->file));
        if (k->line) ml_json_kv_u64(w, "line", k->line);
        ml_json_end(w);
    }
    ml_json_break(w, 2);
    ml_json_end(w);
    ml_json_end(w);
}

static void write_profile(ml_json_t *w, const speedscope_t *x, const ml_site_t *s, size_t n, int m,
                          const char *suffix) {
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += metric(&s[i], m);
    char name[160];
    snprintf(name, sizeof name, "%s%s", profiles[m].name, suffix);
    ml_json_break(w, 4);
    ml_json_object(w);
    ml_json_kv_str(w, "type", "sampled");
    ml_json_kv_str(w, "name", name);
    ml_json_kv_str(w, "unit", profiles[m].unit);
    ml_json_kv_u64(w, "startValue", 0);
    ml_json_kv_u64(w, "endValue", sum);
    ml_json_key(w, "samples");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        if (!metric(&s[i], m)) continue;
        ml_json_break(w, 6);
        ml_json_array(w);
        ml_json_tight(w);
        for (size_t k = x->off[i]; k < x->off[i + 1]; k++) ml_json_u64(w, x->stack[k]);
        ml_json_end(w);
    }
    ml_json_break(w, 4);
    ml_json_end(w);
    ml_json_key(w, "weights");
    ml_json_array(w);
    ml_json_tight(w);
    for (size_t i = 0; i < n; i++)
        if (metric(&s[i], m)) ml_json_u64(w, metric(&s[i], m));
    ml_json_end(w);
    ml_json_end(w);
}

int ml_report_speedscope(FILE *out, const ml_analysis_t *a) {
    speedscope_t x = {0};
    ml__intern_init(&x.strings);
    ml__intern_init(&x.frames);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    const ml_totals_t *t = ml_analysis_totals(a);
    const ml_process_info_t *pi = ml_analysis_process(a);
    ml_json_t *w = NULL;
    int rc = collect(&x, s, n);
    if (rc == 0) rc = ml_json_new(out, &w);
    if (rc == 0) {
        /* The group's name: the command, and that the numbers are
         * estimates when the trace was sampled. */
        char *name = NULL, suffix[96] = "";
        size_t len = 0;
        FILE *m = open_memstream(&name, &len);
        if (!m) rc = -ENOMEM;
        else {
            fputs("memlens:", m);
            for (uint32_t i = 0; i < pi->argc; i++) fprintf(m, " %s", pi->argv[i]);
            if (!pi->argc) fprintf(m, " %s", pi->exe ? pi->exe : "?");
            fprintf(m, " (pid %" PRIu32 ")", pi->pid);
            if (t->sample_bytes) {
                snprintf(suffix, sizeof suffix, " (sampled: one allocation per %" PRIu64 " bytes, estimates)",
                         t->sample_bytes);
                fputs(suffix, m);
            }
            if (fclose(m) != 0) rc = -ENOMEM;
        }
        if (rc == 0) {
            ml_json_object(w);
            ml_json_kv_str(w, "$schema", "https://www.speedscope.app/file-format-schema.json");
            ml_json_break(w, 2);
            ml_json_kv_str(w, "exporter", "memlens " ML_VERSION);
            ml_json_break(w, 2);
            ml_json_kv_str(w, "name", name);
            ml_json_break(w, 2);
            ml_json_kv_u64(w, "activeProfileIndex", P_PEAK);
            ml_json_break(w, 2);
            write_frames(w, &x);
            ml_json_break(w, 2);
            ml_json_key(w, "profiles");
            ml_json_array(w);
            for (int p = 0; p < NPROFILES; p++) write_profile(w, &x, s, n, p, suffix);
            ml_json_break(w, 2);
            ml_json_end(w);
            ml_json_break(w, 0);
            ml_json_end(w);
            ml_json_newline(w);
            errno = 0;
            rc = ml_json_finish(w);
        }
        free(name);
    }
    if (rc == 0 && (fflush(out) != 0 || ferror(out))) rc = -(errno ? errno : EIO);
    ml_json_free(w);
    ml__intern_destroy(&x.strings);
    ml__intern_destroy(&x.frames);
    free(x.stack);
    free(x.off);
    return rc;
}
