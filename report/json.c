/* json.c - the JSON report (docs/report-schema.json, schema_version 1).
 *
 * Presentation only: every number is read from the built analysis. Key names
 * are a contract (../shared/DESIGN.md, and the HTML page reads them); add
 * keys freely, never rename one.
 */
#define _GNU_SOURCE
#include "ml_report.h"
#include "ml_config.h"
#include "ml_report_gpu.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Primitives                                                                */
/* ------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
    else return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

void ml_json_string(FILE *out, const char *str) {
    if (!str) {
        fputs("null", out);
        return;
    }
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', out);
    while (*s) {
        unsigned c = *s;
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc((int)c, out);
            s++;
        } else if (c < 0x20 || c == 0x7f) {
            if (c == '\n') fputs("\\n", out);
            else if (c == '\t') fputs("\\t", out);
            else if (c == '\r') fputs("\\r", out);
            else fprintf(out, "\\u%04x", c);
            s++;
        } else if (c < 0x80) {
            fputc((int)c, out);
            s++;
        } else {
            size_t n = utf8_len(s);
            if (n) {
                fwrite(s, 1, n, out);
                s += n;
            } else {
                fputs("\\ufffd", out);
                s++;
            }
        }
    }
    fputc('"', out);
}

static void key(FILE *o, const char *k) {
    fprintf(o, "\"%s\": ", k);
}

static void kv_u(FILE *o, const char *k, uint64_t v, bool more) {
    fprintf(o, "\"%s\": %" PRIu64 "%s", k, v, more ? ", " : "");
}

static void kv_s(FILE *o, const char *k, const char *v, bool more) {
    key(o, k);
    ml_json_string(o, v);
    if (more) fputs(", ", o);
}

static void kv_d(FILE *o, const char *k, double v, bool more) {
    if (!isfinite(v)) v = 0;
    fprintf(o, "\"%s\": %.6g%s", k, v, more ? ", " : "");
}

static void kv_secs(FILE *o, const char *k, uint64_t ms, bool more) {
    fprintf(o, "\"%s\": %" PRIu64 ".%03u%s", k, ms / 1000, (unsigned)(ms % 1000), more ? ", " : "");
}

static void kv_b(FILE *o, const char *k, bool v, bool more) {
    fprintf(o, "\"%s\": %s%s", k, v ? "true" : "false", more ? ", " : "");
}

static void frames(FILE *o, const ml_frame_t *f, uint32_t n) {
    fputc('[', o);
    for (uint32_t i = 0; i < n; i++) {
        if (i) fputs(", ", o);
        fputc('{', o);
        kv_s(o, "function", f[i].function, true);
        kv_s(o, "file", f[i].file, true);
        key(o, "line");
        if (f[i].line) fprintf(o, "%u, ", f[i].line);
        else fputs("null, ", o);
        kv_s(o, "module", f[i].module, true);
        kv_u(o, "address", f[i].address, f[i].inlined);
        if (f[i].inlined) kv_b(o, "inlined", true, false);
        fputc('}', o);
    }
    fputc(']', o);
}

/* ------------------------------------------------------------------------- */
/* Sections                                                                  */
/* ------------------------------------------------------------------------- */

static void process(FILE *o, const ml_analysis_t *a) {
    const ml_process_info_t *p = ml_analysis_process(a);
    const ml_totals_t *t = ml_analysis_totals(a);
    fputs("\"process\": {", o);
    kv_u(o, "pid", p->pid, true);
    kv_u(o, "ppid", p->ppid, true);
    key(o, "command");
    fputc('[', o);
    for (uint32_t i = 0; i < p->argc; i++) {
        if (i) fputs(", ", o);
        ml_json_string(o, p->argv[i]);
    }
    fputs("], ", o);
    kv_s(o, "exe", p->exe, true);
    key(o, "exit_code");
    if (t->complete && t->end.status_kind == ML_END_EXITED) fprintf(o, "%d, ", t->end.status);
    else fputs("null, ", o);
    key(o, "signal");
    if (t->complete && t->end.status_kind == ML_END_SIGNALED) fprintf(o, "%d, ", t->end.status);
    else fputs("null, ", o);
    static const char *const ends[] = {"exited", "signaled", "unknown", "exec"};
    kv_s(o, "end", !t->complete ? "unknown" : t->end.status_kind < 4 ? ends[t->end.status_kind] : "unknown", true);
    kv_b(o, "sampled", t->sample_bytes != 0, true);
    kv_u(o, "sample_bytes", t->sample_bytes, true);
    kv_u(o, "page_size", p->page_size, true);
    kv_u(o, "start_realtime_ns", p->start_realtime_ns, true);
    kv_s(o, "parent_trace", p->parent_trace[0] ? p->parent_trace : NULL, true);
    kv_s(o, "producer", p->producer, false);
    fputs("}", o);
}

static uint64_t duration_ms(const ml_totals_t *t) {
    uint64_t d = t->last_time_ms;
    if (t->complete && t->end.duration_ms > d) d = t->end.duration_ms;
    return d;
}

static void trace(FILE *o, const ml_analysis_t *a, const ml_report_opts_t *ro) {
    const ml_totals_t *t = ml_analysis_totals(a);
    fputs("\"trace\": {", o);
    kv_s(o, "path", ro->trace_path, true);
    kv_u(o, "size_bytes", ro->trace_size, true);
    kv_u(o, "records", t->records, true);
    kv_b(o, "complete", t->complete, true);
    kv_b(o, "truncated", t->truncated, true);
    kv_u(o, "lost_events", t->complete ? t->end.lost_in_crash + t->end.lost_dead_collector : 0, true);
    kv_u(o, "truncated_stacks", t->complete ? t->end.truncated_stacks : 0, true);
    kv_u(o, "ring_waits", t->complete ? t->end.ring_waits : 0, false);
    fputs("}", o);
}

static void totals(FILE *o, const ml_analysis_t *a) {
    const ml_totals_t *t = ml_analysis_totals(a);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    uint64_t d = duration_ms(t);
    fputs("\"totals\": {", o);
    kv_u(o, "alloc_calls", t->alloc_calls, true);
    kv_u(o, "free_calls", t->free_calls, true);
    kv_u(o, "realloc_calls", t->realloc_calls, true);
    kv_u(o, "bytes_allocated", t->bytes_allocated, true);
    kv_u(o, "temporary_allocs", t->temporary_allocs, true);
    kv_u(o, "mmap_calls", t->mmap_calls, true);
    kv_u(o, "munmap_calls", t->munmap_calls, true);
    kv_u(o, "unknown_frees", t->unknown_frees, true);
    kv_u(o, "peak_bytes", t->peak_bytes, true);
    kv_u(o, "peak_blocks", t->peak_blocks, true);
    kv_u(o, "peak_mmap_bytes", t->peak_mmap_bytes, true);
    kv_u(o, "peak_rss_bytes", t->peak_rss_bytes, true);
    kv_u(o, "leaked_bytes", L->bytes, true);
    kv_u(o, "leaked_blocks", L->blocks, true);
    kv_secs(o, "duration_s", d, true);
    kv_d(o, "alloc_calls_per_s", d ? (double)t->alloc_calls * 1000.0 / (double)d : 0, true);
    kv_d(o, "bytes_allocated_per_s", d ? (double)t->bytes_allocated * 1000.0 / (double)d : 0, true);
    fputs("\"calls_by_kind\": {", o);
    bool first = true;
    for (unsigned k = 0; k < ML_KIND_COUNT_; k++) {
        if (k == ML_KIND_FREE || k == ML_KIND_MUNMAP) continue;
        if (!first) fputs(", ", o);
        first = false;
        kv_u(o, ml_kind_name(k), t->calls_by_kind[k], false);
    }
    fputs("}}", o);
}

static void site_obj(FILE *o, const ml_site_t *s) {
    fputc('{', o);
    kv_u(o, "id", s->id, true);
    key(o, "frames");
    frames(o, s->frames, s->nframes);
    fputs(", ", o);
    kv_u(o, "alloc_calls", s->alloc_calls, true);
    kv_u(o, "bytes_allocated", s->bytes_allocated, true);
    kv_u(o, "peak_bytes", s->peak_bytes, true);
    kv_u(o, "peak_blocks", s->peak_blocks, true);
    kv_u(o, "leaked_bytes", s->leaked_bytes, true);
    kv_u(o, "leaked_blocks", s->leaked_blocks, true);
    kv_u(o, "temporary_allocs", s->temporary_allocs, true);
    kv_u(o, "realloc_calls", s->realloc_calls, true);
    kv_u(o, "freed_blocks", s->freed_blocks, true);
    kv_u(o, "min_size", s->min_size, true);
    kv_u(o, "max_size", s->max_size, true);
    kv_d(o, "mean_lifetime_ms", s->freed_blocks ? (double)s->lifetime_ms_sum / (double)s->freed_blocks : 0, true);
    kv_u(o, "max_lifetime_ms", s->lifetime_ms_max, true);
    kv_u(o, "pinned_pages", s->pinned_pages, true);
    kv_u(o, "sparse_pinned_pages", s->sparse_pinned_pages, true);
    fputs("\"leaked_by_kind\": {", o);
    for (int k = 0; k < ML_LEAK_KINDS; k++)
        kv_u(o, ml_leak_kind_name((ml_leak_kind_t)k), s->leaked_kind_bytes[k], k + 1 < ML_LEAK_KINDS);
    fputs("}, ", o);
    kv_b(o, "suppressed", s->suppressed, false);
    fputc('}', o);
}

static void sites(FILE *o, const ml_analysis_t *a, uint32_t max) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    if (max && n > max) n = max;
    fputs("\"sites\": [", o);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n  " : "\n  ", o);
        site_obj(o, &s[i]);
    }
    fputs("]", o);
}

static void peak(FILE *o, const ml_analysis_t *a) {
    const ml_totals_t *t = ml_analysis_totals(a);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    fputs("\"peak\": {", o);
    kv_u(o, "bytes", t->peak_bytes, true);
    kv_u(o, "blocks", t->peak_blocks, true);
    kv_secs(o, "time_s", t->peak_time_ms, true);
    fputs("\"sites\": [", o);
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (!s[i].peak_bytes && !s[i].peak_blocks) continue;
        fputs(first ? "\n  {" : ",\n  {", o);
        first = false;
        kv_u(o, "site", s[i].id, true);
        kv_u(o, "bytes", s[i].peak_bytes, true);
        kv_u(o, "blocks", s[i].peak_blocks, true);
        key(o, "frames");
        frames(o, s[i].frames, s[i].nframes);
        fputc('}', o);
    }
    fputs("]}", o);
}

static void leaks(FILE *o, const ml_analysis_t *a, const ml_report_opts_t *ro) {
    const ml_leaks_t *L = ml_analysis_leaks(a);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    fputs("\"leaks\": {", o);
    kv_u(o, "bytes", L->bytes, true);
    kv_u(o, "blocks", L->blocks, true);
    for (int k = 0; k < ML_LEAK_KINDS; k++) {
        char name[40];
        snprintf(name, sizeof name, "%s_bytes", ml_leak_kind_name((ml_leak_kind_t)k));
        kv_u(o, name, L->kind_bytes[k], true);
        snprintf(name, sizeof name, "%s_blocks", ml_leak_kind_name((ml_leak_kind_t)k));
        kv_u(o, name, L->kind_blocks[k], true);
    }
    kv_u(o, "suppressed_bytes", L->suppressed_bytes, true);
    kv_u(o, "suppressed_blocks", L->suppressed_blocks, true);
    kv_u(o, "gate_bytes", L->gate_bytes, true);
    kv_s(o, "reachability", L->scanned ? "scanned" : L->scan_status ? "failed" : "not_scanned", true);
    fputs("\"scan\": {", o);
    kv_b(o, "done", L->scanned, true);
    key(o, "error");
    if (L->scan_status) ml_json_string(o, strerror(-L->scan_status));
    else fputs("null", o);
    fputs(", ", o);
    kv_u(o, "root_bytes", L->scan_root_bytes, true);
    kv_u(o, "heap_bytes", L->scan_heap_bytes, true);
    kv_d(o, "duration_s", (double)L->scan_duration_us / 1e6, true);
    kv_u(o, "unscanned_blocks", L->unscanned_blocks, false);
    fputs("}, \"sites\": [", o);
    for (size_t i = 0; i < L->ngroups; i++) {
        const ml_leak_group_t *g = &L->groups[i];
        fputs(i ? ",\n  {" : "\n  {", o);
        kv_u(o, "site", g->site, true);
        kv_u(o, "bytes", g->bytes, true);
        kv_u(o, "blocks", g->blocks, true);
        kv_s(o, "kind", ml_leak_kind_name(g->kind), true);
        kv_b(o, "suppressed", g->suppressed, true);
        if (g->suppressed && g->site < n) kv_s(o, "suppressed_by", s[g->site].suppressed_by, true);
        key(o, "frames");
        if (g->site < n) frames(o, s[g->site].frames, s[g->site].nframes);
        else fputs("[]", o);
        fputc('}', o);
    }
    fputs("], \"suppressions\": [", o);
    size_t ns = ml_suppressions_count(ro->suppressions);
    for (size_t i = 0; i < ns; i++) {
        uint64_t blocks, bytes;
        const char *p = ml_suppressions_pattern(ro->suppressions, i, &blocks, &bytes);
        fputs(i ? ", {" : "{", o);
        kv_s(o, "pattern", p, true);
        kv_u(o, "blocks", blocks, true);
        kv_u(o, "bytes", bytes, false);
        fputc('}', o);
    }
    fputs("]}", o);
}

static void frag_obj(FILE *o, const ml_frag_t *f) {
    fputc('{', o);
    if (!f->valid) {
        kv_b(o, "valid", false, false);
        fputc('}', o);
        return;
    }
    kv_b(o, "valid", true, true);
    kv_secs(o, "time_s", f->time_ms, true);
    kv_u(o, "live_bytes", f->live_bytes, true);
    kv_u(o, "live_blocks", f->live_blocks, true);
    kv_u(o, "pages", f->pages, true);
    kv_u(o, "pages_bytes", f->page_bytes, true);
    kv_d(o, "page_utilization", f->page_utilization, true);
    kv_u(o, "free_bytes", f->free_bytes, true);
    kv_u(o, "largest_free_bytes", f->largest_free_bytes, true);
    kv_d(o, "external", f->external, true);
    kv_u(o, "gaps", f->gaps, true);
    kv_u(o, "regions", f->regions, true);
    kv_u(o, "span_bytes", f->span_bytes, true);
    kv_s(o, "allocator_model", f->allocator_model, true);
    kv_u(o, "usable_bytes", f->usable_bytes, true);
    kv_u(o, "usable_measured_blocks", f->usable_measured_blocks, true);
    kv_u(o, "internal_bytes", f->internal_waste_bytes, true);
    kv_d(o, "internal_ratio", f->internal_ratio, true);
    key(o, "mallinfo");
    if (f->have_mallinfo) {
        fputc('{', o);
        kv_secs(o, "time_s", f->mallinfo_time_ms, true);
        kv_u(o, "arena", f->arena, true);
        kv_u(o, "hblkhd", f->hblkhd, true);
        kv_u(o, "uordblks", f->uordblks, true);
        kv_u(o, "fordblks", f->fordblks, true);
        kv_u(o, "keepcost", f->keepcost, false);
        fputs("}, ", o);
    } else {
        fputs("null, ", o);
    }
    key(o, "rss_bytes");
    if (f->have_rss) fprintf(o, "%" PRIu64 ", ", f->rss_bytes);
    else fputs("null, ", o);
    kv_d(o, "heap_to_rss", f->heap_to_rss, false);
    fputc('}', o);
}

static void heap_map(FILE *o, const ml_frag_t *f) {
    fputc('{', o);
    if (!f->valid || !f->map_ncells) {
        fputs("\"base\": 0, \"cell_bytes\": 0, \"cells\": []}", o);
        return;
    }
    kv_u(o, "base", f->map_base, true);
    kv_u(o, "cell_bytes", f->map_cell_bytes, true);
    fputs("\"cells\": [", o);
    for (uint32_t i = 0; i < f->map_ncells; i++) fprintf(o, i ? ",%d" : "%d", f->map_cells[i]);
    fputs("]}", o);
}

static void fragmentation(FILE *o, const ml_analysis_t *a) {
    fputs("\"fragmentation\": {\"at_peak\": ", o);
    frag_obj(o, ml_analysis_frag(a, ML_MOMENT_PEAK));
    fputs(",\n \"at_end\": ", o);
    frag_obj(o, ml_analysis_frag(a, ML_MOMENT_END));
    fputs(",\n \"worst\": ", o);
    frag_obj(o, ml_analysis_frag(a, ML_MOMENT_WORST));
    fputs(",\n \"heap_maps\": {\"at_peak\": ", o);
    heap_map(o, ml_analysis_frag(a, ML_MOMENT_PEAK));
    fputs(",\n  \"at_end\": ", o);
    heap_map(o, ml_analysis_frag(a, ML_MOMENT_END));
    fputs("}}", o);
}

static void timeline(FILE *o, const ml_analysis_t *a) {
    const ml_timeline_point_t *p;
    size_t n = ml_analysis_timeline(a, &p);
    fputs("\"timeline\": [", o);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n  {" : "\n  {", o);
        kv_secs(o, "time_s", p[i].time_ms, true);
        kv_u(o, "heap_bytes", p[i].heap_bytes, true);
        kv_u(o, "rss_bytes", p[i].rss_bytes, true);
        kv_u(o, "mmap_bytes", p[i].mmap_bytes, true);
        kv_u(o, "gpu_bytes", p[i].gpu_bytes, true);
        kv_u(o, "alloc_calls", p[i].alloc_calls, false);
        fputc('}', o);
    }
    fputs("]", o);
}

/* The flame tree (ml_analysis_flame: the call tree, pruned) as nested
 * objects. Children biggest first (then by name), written depth first with
 * an explicit stack: deep recursion in the program must not become deep
 * recursion here. Every number is the node's own (its inclusive costs). */
typedef struct {
    const ml_calltree_node_t *v;
} fctx_t;

static int cmp_child(const void *x, const void *y, void *ctx) {
    const ml_calltree_node_t *v = ((fctx_t *)ctx)->v;
    const ml_calltree_node_t *a = &v[*(const int32_t *)x], *b = &v[*(const int32_t *)y];
    static const int order[] = {ML_COST_ALLOCATED, ML_COST_PEAK, ML_COST_LEAKED};
    for (size_t k = 0; k < sizeof order / sizeof *order; k++)
        if (a->incl[order[k]] != b->incl[order[k]])
            return a->incl[order[k]] > b->incl[order[k]] ? -1 : 1;
    return strcmp(a->frame->function ? a->frame->function : "",
                  b->frame->function ? b->frame->function : "");
}

static void flame_node_open(FILE *o, const ml_calltree_node_t *n) {
    const ml_frame_t *f = n->frame;
    fputc('{', o);
    kv_s(o, "name", f->function, true);
    kv_s(o, "file", f->file, true);
    key(o, "line");
    if (f->line) fprintf(o, "%u, ", f->line);
    else fputs("null, ", o);
    kv_u(o, "alloc", n->incl[ML_COST_ALLOCATED], true);
    kv_u(o, "peak", n->incl[ML_COST_PEAK], true);
    kv_u(o, "leaked", n->incl[ML_COST_LEAKED], true);
    kv_u(o, "calls", n->incl[ML_COST_CALLS], true);
    fputs("\"children\": [", o);
}

static int flame(FILE *o, const ml_analysis_t *a) {
    const ml_calltree_node_t *v;
    size_t n = ml_analysis_flame(a, &v);
    fputs("\"flame\": ", o);
    if (!n) {
        fputs("{\"name\": \"all\", \"file\": null, \"line\": null, "
              "\"alloc\": 0, \"peak\": 0, \"leaked\": 0, \"calls\": 0, \"children\": []}",
              o);
        return 0;
    }
    /* Sorted child lists, then an iterative walk. */
    int32_t *kids = malloc(n * sizeof *kids), *start = malloc((n + 1) * sizeof *start);
    size_t *pos = calloc(n, sizeof *pos);
    int32_t *stack = malloc(n * sizeof *stack);
    if (!kids || !start || !pos || !stack) {
        free(kids);
        free(start);
        free(pos);
        free(stack);
        return -ENOMEM;
    }
    size_t k = 0;
    fctx_t ctx = {v};
    for (size_t i = 0; i < n; i++) {
        start[i] = (int32_t)k;
        for (int32_t c = v[i].first_child; c >= 0; c = v[c].next_sibling) kids[k++] = c;
        qsort_r(kids + start[i], k - (size_t)start[i], sizeof *kids, cmp_child, &ctx);
    }
    start[n] = (int32_t)k;
    size_t sp = 0;
    stack[sp++] = 0;
    flame_node_open(o, &v[0]);
    while (sp) {
        int32_t cur = stack[sp - 1];
        size_t i = (size_t)start[cur] + pos[cur];
        if (i < (size_t)start[cur + 1]) {
            if (pos[cur]) fputs(", ", o);
            pos[cur]++;
            int32_t c = kids[i];
            flame_node_open(o, &v[c]);
            stack[sp++] = c;
        } else {
            fputs("]}", o);
            sp--;
        }
    }
    free(kids);
    free(start);
    free(pos);
    free(stack);
    return 0;
}

static void histograms(FILE *o, const ml_analysis_t *a) {
    const ml_histograms_t *h = ml_analysis_histograms(a);
    fputs("\"histograms\": {\"sizes\": [", o);
    for (uint32_t k = h->size_first; k <= h->size_last && k < 64; k++) {
        if (k > h->size_first) fputs(", ", o);
        fprintf(o, "{\"le\": %" PRIu64 ", \"count\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
                (uint64_t)1 << k, h->size_count[k], h->size_bytes[k]);
    }
    fputs("], \"lifetimes_ms\": [", o);
    for (uint32_t k = 0; k <= h->life_last && k < 64; k++) {
        if (k) fputs(", ", o);
        fprintf(o, "{\"le\": %" PRIu64 ", \"count\": %" PRIu64 "}", (uint64_t)1 << k, h->life_count[k]);
    }
    fprintf(o, "], \"live_at_end\": %" PRIu64 "}", h->live_at_end);
}

static void threads(FILE *o, const ml_analysis_t *a) {
    const ml_thread_stats_t *t;
    size_t n = ml_analysis_threads(a, &t);
    fputs("\"threads\": [", o);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ", {" : "{", o);
        kv_u(o, "index", t[i].index, true);
        kv_u(o, "tid", t[i].tid, true);
        kv_s(o, "name", t[i].name, true);
        kv_u(o, "alloc_calls", t[i].alloc_calls, true);
        kv_u(o, "bytes_allocated", t[i].bytes_allocated, true);
        kv_u(o, "free_calls", t[i].free_calls, true);
        kv_u(o, "temporary_allocs", t[i].temporary_allocs, false);
        fputc('}', o);
    }
    fputs("]", o);
}

static void warnings(FILE *o, const ml_analysis_t *a) {
    const char *const *w;
    size_t n = ml_analysis_warnings(a, &w);
    fputs("\"warnings\": [", o);
    for (size_t i = 0; i < n; i++) {
        if (i) fputs(", ", o);
        ml_json_string(o, w[i]);
    }
    fputs("]", o);
}

/* ------------------------------------------------------------------------- */
/* The document                                                              */
/* ------------------------------------------------------------------------- */

int ml_report_json(FILE *o, const ml_analysis_t *a, const ml_report_opts_t *ro) {
    ml_report_opts_t none = {0};
    if (!ro) ro = &none;
    fprintf(o, "{\"schema_version\": %d,\n", ML_REPORT_SCHEMA_VERSION);
    kv_s(o, "generator", "memlens " ML_VERSION, false);
    fputs(",\n", o);
    process(o, a);
    fputs(",\n", o);
    trace(o, a, ro);
    fputs(",\n", o);
    totals(o, a);
    fputs(",\n", o);
    sites(o, a, ro->max_sites);
    fputs(",\n", o);
    peak(o, a);
    fputs(",\n", o);
    leaks(o, a, ro);
    fputs(",\n", o);
    fragmentation(o, a);
    fputs(",\n\"gpu\": ", o);
    ml_report_json_gpu(o, a);
    /* The strategy advisor: "suggestions", "policies", "advisor" (advice_json.c). */
    fputs(",\n", o);
    ml_report_json_advice(o, a, ro->advice);
    fputs(",\n", o);
    timeline(o, a);
    fputs(",\n", o);
    if (flame(o, a) < 0) return -ENOMEM;
    fputs(",\n", o);
    histograms(o, a);
    fputs(",\n", o);
    threads(o, a);
    fputs(",\n", o);
    warnings(o, a);
    fputs("}\n", o);
    return ferror(o) ? -EIO : 0;
}
