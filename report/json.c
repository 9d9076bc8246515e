/* json.c - the JSON report (docs/report-schema.json, schema_version 1).
 *
 * Presentation only: every number is read from the built analysis. Key names
 * are a contract (../shared/DESIGN.md, and the HTML page reads them); add
 * keys freely, never rename one.
 */
#define _GNU_SOURCE
#include "report_internal.h"
#include "ml_config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Primitives                                                                */
/* ------------------------------------------------------------------------- */

/* A ratio or a mean: the report writes 0 where one is not finite. */
static void kv_d(ml_json_t *w, const char *k, double v) {
    ml_json_kv_double(w, k, isfinite(v) ? v : 0);
}

/* A line number, or null without debug information. */
static void kv_line(ml_json_t *w, const char *k, uint32_t line) {
    if (line) ml_json_kv_u64(w, k, line);
    else ml_json_kv_null(w, k);
}

void ml__json_frames(ml_json_t *w, const ml_frame_t *f, size_t n, bool inlined) {
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_object(w);
        /* "function" is the name for display (ml_frame_short_name);
         * "function_full" the demangled name, when they differ. */
        char name[512];
        const char *shown = f[i].function ? ml_frame_short_name(f[i].function, name, sizeof name) : NULL;
        ml_json_kv_str(w, "function", shown);
        if (shown && strcmp(shown, f[i].function)) ml_json_kv_str(w, "function_full", f[i].function);
        ml_json_kv_str(w, "file", f[i].file);
        kv_line(w, "line", f[i].line);
        ml_json_kv_str(w, "module", f[i].module);
        ml_json_kv_u64(w, "address", f[i].address);
        if (inlined && f[i].inlined) ml_json_kv_bool(w, "inlined", true);
        ml_json_end(w);
    }
    ml_json_end(w);
}

static void frames(ml_json_t *w, const ml_frame_t *f, uint32_t n) {
    ml__json_frames(w, f, n, true);
}

/* ------------------------------------------------------------------------- */
/* Sections                                                                  */
/* ------------------------------------------------------------------------- */

static void process(ml_json_t *w, const ml_analysis_t *a) {
    const ml_process_info_t *p = ml_analysis_process(a);
    const ml_totals_t *t = ml_analysis_totals(a);
    ml_json_key(w, "process");
    ml_json_object(w);
    ml_json_kv_u64(w, "pid", p->pid);
    ml_json_kv_u64(w, "ppid", p->ppid);
    ml_json_key(w, "command");
    ml_json_array(w);
    for (uint32_t i = 0; i < p->argc; i++) ml_json_str(w, p->argv[i]);
    ml_json_end(w);
    ml_json_kv_str(w, "exe", p->exe);
    if (t->complete && t->end.status_kind == ML_END_EXITED) ml_json_kv_i64(w, "exit_code", t->end.status);
    else ml_json_kv_null(w, "exit_code");
    if (t->complete && t->end.status_kind == ML_END_SIGNALED) ml_json_kv_i64(w, "signal", t->end.status);
    else ml_json_kv_null(w, "signal");
    static const char *const ends[] = {"exited", "signaled", "unknown", "exec"};
    bool known = t->complete && t->end.status_kind < 4;
    ml_json_kv_str(w, "end", known ? ends[t->end.status_kind] : "unknown");
    ml_json_kv_bool(w, "sampled", t->sample_bytes != 0);
    ml_json_kv_u64(w, "sample_bytes", t->sample_bytes);
    ml_json_kv_u64(w, "page_size", p->page_size);
    ml_json_kv_u64(w, "start_realtime_ns", p->start_realtime_ns);
    ml_json_kv_str(w, "parent_trace", p->parent_trace[0] ? p->parent_trace : NULL);
    ml_json_kv_str(w, "producer", p->producer);
    ml_json_end(w);
}

static uint64_t duration_ms(const ml_totals_t *t) {
    uint64_t d = t->last_time_ms;
    if (t->complete && t->end.duration_ms > d) d = t->end.duration_ms;
    return d;
}

static void trace(ml_json_t *w, const ml_analysis_t *a, const ml_report_opts_t *ro) {
    const ml_totals_t *t = ml_analysis_totals(a);
    ml_json_key(w, "trace");
    ml_json_object(w);
    ml_json_kv_str(w, "path", ro->trace_path);
    ml_json_kv_u64(w, "size_bytes", ro->trace_size);
    ml_json_kv_u64(w, "records", t->records);
    ml_json_kv_bool(w, "complete", t->complete);
    ml_json_kv_bool(w, "truncated", t->truncated);
    ml_json_kv_u64(w, "lost_events", t->complete ? t->end.lost_in_crash + t->end.lost_dead_collector : 0);
    ml_json_kv_u64(w, "truncated_stacks", t->complete ? t->end.truncated_stacks : 0);
    ml_json_kv_u64(w, "ring_waits", t->complete ? t->end.ring_waits : 0);
    ml_json_end(w);
}

static void totals(ml_json_t *w, const ml_analysis_t *a) {
    const ml_totals_t *t = ml_analysis_totals(a);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    uint64_t d = duration_ms(t);
    ml_json_key(w, "totals");
    ml_json_object(w);
    ml_json_kv_u64(w, "alloc_calls", t->alloc_calls);
    ml_json_kv_u64(w, "free_calls", t->free_calls);
    ml_json_kv_u64(w, "realloc_calls", t->realloc_calls);
    ml_json_kv_u64(w, "bytes_allocated", t->bytes_allocated);
    ml_json_kv_u64(w, "temporary_allocs", t->temporary_allocs);
    ml_json_kv_u64(w, "mmap_calls", t->mmap_calls);
    ml_json_kv_u64(w, "munmap_calls", t->munmap_calls);
    ml_json_kv_u64(w, "unknown_frees", t->unknown_frees);
    ml_json_kv_u64(w, "peak_bytes", t->peak_bytes);
    ml_json_kv_u64(w, "peak_blocks", t->peak_blocks);
    ml_json_kv_u64(w, "peak_mmap_bytes", t->peak_mmap_bytes);
    ml_json_kv_u64(w, "peak_rss_bytes", t->peak_rss_bytes); /* the largest sample */
    /* The kernel's high-water mark (issue 13): null in traces before 1.5. */
    if (t->hwm_rss_source) {
        ml_json_kv_u64(w, "peak_rss_hwm_bytes", t->hwm_rss_bytes);
        ml_json_kv_str(w, "peak_rss_hwm_source", ml_hwm_source_name(t->hwm_rss_source));
    } else {
        ml_json_kv_null(w, "peak_rss_hwm_bytes");
        ml_json_kv_null(w, "peak_rss_hwm_source");
    }
    ml_json_kv_u64(w, "rss_sample_interval_ms", ML_RSS_SAMPLE_MS);
    /* leaked: definite + indirect + possible, as everywhere (issue 13);
     * live_at_exit: every block live at the end, reachable ones too. */
    ml_json_kv_u64(w, "leaked_bytes", L->lost_bytes);
    ml_json_kv_u64(w, "leaked_blocks", L->lost_blocks);
    ml_json_kv_u64(w, "live_at_exit_bytes", L->bytes);
    ml_json_kv_u64(w, "live_at_exit_blocks", L->blocks);
    ml_json_kv_ms_as_s(w, "duration_s", d);
    kv_d(w, "alloc_calls_per_s", d ? (double)t->alloc_calls * 1000.0 / (double)d : 0);
    kv_d(w, "bytes_allocated_per_s", d ? (double)t->bytes_allocated * 1000.0 / (double)d : 0);
    ml_json_key(w, "calls_by_kind");
    ml_json_object(w);
    for (unsigned k = 0; k < ML_KIND_COUNT_; k++) {
        if (k == ML_KIND_FREE || k == ML_KIND_MUNMAP) continue;
        ml_json_kv_u64(w, ml_kind_name(k), t->calls_by_kind[k]);
    }
    ml_json_end(w);
    ml_json_end(w);
}

void ml__json_site_fields(ml_json_t *w, const ml_site_t *s) {
    ml_json_kv_u64(w, "id", s->id);
    ml_json_key(w, "frames");
    frames(w, s->frames, s->nframes);
    /* The frame that names the site (ml_site_t.headline); absent: 0. */
    if (s->headline) ml_json_kv_u64(w, "headline", s->headline);
    ml_json_kv_u64(w, "alloc_calls", s->alloc_calls);
    ml_json_kv_u64(w, "bytes_allocated", s->bytes_allocated);
    ml_json_kv_u64(w, "peak_bytes", s->peak_bytes);
    ml_json_kv_u64(w, "peak_blocks", s->peak_blocks);
    ml_json_kv_u64(w, "leaked_bytes", s->leaked_bytes);
    ml_json_kv_u64(w, "leaked_blocks", s->leaked_blocks);
    ml_json_kv_u64(w, "live_at_exit_bytes", s->live_at_exit_bytes);
    ml_json_kv_u64(w, "live_at_exit_blocks", s->live_at_exit_blocks);
    ml_json_kv_u64(w, "temporary_allocs", s->temporary_allocs);
    ml_json_kv_u64(w, "realloc_calls", s->realloc_calls);
    ml_json_kv_u64(w, "freed_blocks", s->freed_blocks);
    ml_json_kv_u64(w, "min_size", s->min_size);
    ml_json_kv_u64(w, "max_size", s->max_size);
    kv_d(w, "mean_lifetime_ms", s->freed_blocks ? (double)s->lifetime_ms_sum / (double)s->freed_blocks : 0);
    ml_json_kv_u64(w, "max_lifetime_ms", s->lifetime_ms_max);
    ml_json_kv_u64(w, "pinned_pages", s->pinned_pages);
    ml_json_kv_u64(w, "sparse_pinned_pages", s->sparse_pinned_pages);
    ml_json_key(w, "leaked_by_kind");
    ml_json_object(w);
    for (int k = 0; k < ML_LEAK_KINDS; k++)
        ml_json_kv_u64(w, ml_leak_kind_name((ml_leak_kind_t)k), s->leaked_kind_bytes[k]);
    ml_json_end(w);
    ml_json_kv_bool(w, "suppressed", s->suppressed);
}

static void site_obj(ml_json_t *w, const ml_site_t *s) {
    ml_json_object(w);
    ml__json_site_fields(w, s);
    ml_json_end(w);
}

static void sites(ml_json_t *w, const ml_analysis_t *a, uint32_t max) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    if (max && n > max) n = max;
    ml_json_key(w, "sites");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_break(w, 2);
        site_obj(w, &s[i]);
    }
    ml_json_end(w);
}

static void peak(ml_json_t *w, const ml_analysis_t *a) {
    const ml_totals_t *t = ml_analysis_totals(a);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    ml_json_key(w, "peak");
    ml_json_object(w);
    ml_json_kv_u64(w, "bytes", t->peak_bytes);
    ml_json_kv_u64(w, "blocks", t->peak_blocks);
    ml_json_kv_ms_as_s(w, "time_s", t->peak_time_ms);
    ml_json_key(w, "sites");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        if (!s[i].peak_bytes && !s[i].peak_blocks) continue;
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_u64(w, "site", s[i].id);
        ml_json_kv_u64(w, "bytes", s[i].peak_bytes);
        ml_json_kv_u64(w, "blocks", s[i].peak_blocks);
        ml_json_key(w, "frames");
        frames(w, s[i].frames, s[i].nframes);
        if (s[i].headline) ml_json_kv_u64(w, "headline", s[i].headline);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

void ml__json_leak_counts(ml_json_t *w, const ml_leaks_t *L) {
    ml_json_kv_u64(w, "bytes", L->bytes);
    ml_json_kv_u64(w, "blocks", L->blocks);
    for (int k = 0; k < ML_LEAK_KINDS; k++) {
        char name[40];
        snprintf(name, sizeof name, "%s_bytes", ml_leak_kind_name((ml_leak_kind_t)k));
        ml_json_kv_u64(w, name, L->kind_bytes[k]);
        snprintf(name, sizeof name, "%s_blocks", ml_leak_kind_name((ml_leak_kind_t)k));
        ml_json_kv_u64(w, name, L->kind_blocks[k]);
    }
    ml_json_kv_u64(w, "suppressed_bytes", L->suppressed_bytes);
    ml_json_kv_u64(w, "suppressed_blocks", L->suppressed_blocks);
    ml_json_kv_u64(w, "gate_bytes", L->gate_bytes);
    ml_json_kv_u64(w, "lost_bytes", L->lost_bytes);
    ml_json_kv_u64(w, "lost_blocks", L->lost_blocks);
}

static void leaks(ml_json_t *w, const ml_analysis_t *a, const ml_report_opts_t *ro) {
    const ml_leaks_t *L = ml_analysis_leaks(a);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    ml_json_key(w, "leaks");
    ml_json_object(w);
    ml__json_leak_counts(w, L);
    ml_json_kv_str(w, "reachability", L->scanned ? "scanned" : L->scan_status ? "failed" : "not_scanned");
    ml_json_key(w, "scan");
    ml_json_object(w);
    ml_json_kv_bool(w, "done", L->scanned);
    ml_json_kv_str(w, "error", L->scan_status ? strerror(-L->scan_status) : NULL);
    ml_json_kv_u64(w, "root_bytes", L->scan_root_bytes);
    ml_json_kv_u64(w, "heap_bytes", L->scan_heap_bytes);
    kv_d(w, "duration_s", (double)L->scan_duration_us / 1e6);
    ml_json_kv_u64(w, "unscanned_blocks", L->unscanned_blocks);
    ml_json_end(w);
    ml_json_key(w, "sites");
    ml_json_array(w);
    for (size_t i = 0; i < L->ngroups; i++) {
        const ml_leak_group_t *g = &L->groups[i];
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_u64(w, "site", g->site);
        ml_json_kv_u64(w, "bytes", g->bytes);
        ml_json_kv_u64(w, "blocks", g->blocks);
        ml_json_kv_str(w, "kind", ml_leak_kind_name(g->kind));
        ml_json_kv_bool(w, "suppressed", g->suppressed);
        if (g->suppressed && g->site < n) ml_json_kv_str(w, "suppressed_by", s[g->site].suppressed_by);
        ml_json_key(w, "frames");
        if (g->site < n) frames(w, s[g->site].frames, s[g->site].nframes);
        else frames(w, NULL, 0);
        if (g->site < n && s[g->site].headline) ml_json_kv_u64(w, "headline", s[g->site].headline);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_key(w, "suppressions");
    ml_json_array(w);
    size_t ns = ml_suppressions_count(ro->suppressions);
    for (size_t i = 0; i < ns; i++) {
        uint64_t blocks, bytes;
        const char *p = ml_suppressions_pattern(ro->suppressions, i, &blocks, &bytes);
        ml_json_object(w);
        ml_json_kv_str(w, "pattern", p);
        ml_json_kv_u64(w, "blocks", blocks);
        ml_json_kv_u64(w, "bytes", bytes);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

static void frag_obj(ml_json_t *w, const ml_frag_t *f) {
    ml_json_object(w);
    ml_json_kv_bool(w, "valid", f->valid);
    if (!f->valid) {
        ml_json_end(w);
        return;
    }
    ml_json_kv_ms_as_s(w, "time_s", f->time_ms);
    ml_json_kv_u64(w, "live_bytes", f->live_bytes);
    ml_json_kv_u64(w, "live_blocks", f->live_blocks);
    ml_json_kv_u64(w, "pages", f->pages);
    ml_json_kv_u64(w, "pages_bytes", f->page_bytes);
    kv_d(w, "page_utilization", f->page_utilization);
    ml_json_kv_u64(w, "free_bytes", f->free_bytes);
    ml_json_kv_u64(w, "largest_free_bytes", f->largest_free_bytes);
    kv_d(w, "external", f->external);
    ml_json_kv_u64(w, "gaps", f->gaps);
    ml_json_kv_u64(w, "regions", f->regions);
    ml_json_kv_u64(w, "span_bytes", f->span_bytes);
    ml_json_kv_str(w, "allocator_model", f->allocator_model);
    ml_json_kv_u64(w, "usable_bytes", f->usable_bytes);
    ml_json_kv_u64(w, "usable_measured_blocks", f->usable_measured_blocks);
    ml_json_kv_u64(w, "internal_bytes", f->internal_waste_bytes);
    kv_d(w, "internal_ratio", f->internal_ratio);
    ml_json_key(w, "mallinfo");
    if (f->have_mallinfo) {
        ml_json_object(w);
        ml_json_kv_ms_as_s(w, "time_s", f->mallinfo_time_ms);
        ml_json_kv_u64(w, "arena", f->arena);
        ml_json_kv_u64(w, "hblkhd", f->hblkhd);
        ml_json_kv_u64(w, "uordblks", f->uordblks);
        ml_json_kv_u64(w, "fordblks", f->fordblks);
        ml_json_kv_u64(w, "keepcost", f->keepcost);
        ml_json_end(w);
    } else {
        ml_json_null(w);
    }
    if (f->have_rss) ml_json_kv_u64(w, "rss_bytes", f->rss_bytes);
    else ml_json_kv_null(w, "rss_bytes");
    kv_d(w, "heap_to_rss", f->heap_to_rss);
    ml_json_end(w);
}

static void heap_map(ml_json_t *w, const ml_frag_t *f) {
    bool any = f->valid && f->map_ncells;
    ml_json_object(w);
    ml_json_kv_u64(w, "base", any ? f->map_base : 0);
    ml_json_kv_u64(w, "cell_bytes", any ? f->map_cell_bytes : 0);
    ml_json_key(w, "cells");
    ml_json_array(w);
    ml_json_tight(w);
    for (uint32_t i = 0; any && i < f->map_ncells; i++) ml_json_i64(w, f->map_cells[i]);
    ml_json_end(w);
    ml_json_end(w);
}

/* What each fragmentation number is, in the words every view uses
 * (docs/analysis.md): "page utilization" is not heap fragmentation. */
static void frag_labels(ml_json_t *w) {
    ml_json_key(w, "labels");
    ml_json_object(w);
    ml_json_kv_str(w, "page_utilization", ML_LABEL_PAGE_UTILIZATION);
    ml_json_kv_str(w, "external", ML_LABEL_EXTERNAL);
    ml_json_kv_str(w, "internal_ratio", ML_LABEL_INTERNAL);
    ml_json_kv_str(w, "heap_to_rss", ML_LABEL_HEAP_TO_RSS);
    ml_json_end(w);
}

static void fragmentation(ml_json_t *w, const ml_analysis_t *a) {
    ml_json_key(w, "fragmentation");
    ml_json_object(w);
    frag_labels(w);
    ml_json_break(w, 1);
    ml_json_key(w, "at_peak");
    frag_obj(w, ml_analysis_frag(a, ML_MOMENT_PEAK));
    ml_json_break(w, 1);
    ml_json_key(w, "at_end");
    frag_obj(w, ml_analysis_frag(a, ML_MOMENT_END));
    ml_json_break(w, 1);
    ml_json_key(w, "worst");
    frag_obj(w, ml_analysis_frag(a, ML_MOMENT_WORST));
    ml_json_break(w, 1);
    ml_json_key(w, "heap_maps");
    ml_json_object(w);
    ml_json_key(w, "at_peak");
    heap_map(w, ml_analysis_frag(a, ML_MOMENT_PEAK));
    ml_json_break(w, 2);
    ml_json_key(w, "at_end");
    heap_map(w, ml_analysis_frag(a, ML_MOMENT_END));
    ml_json_end(w);
    ml_json_end(w);
}

static void timeline(ml_json_t *w, const ml_analysis_t *a) {
    const ml_timeline_point_t *p;
    size_t n = ml_analysis_timeline(a, &p);
    ml_json_key(w, "timeline");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_ms_as_s(w, "time_s", p[i].time_ms);
        ml_json_kv_u64(w, "heap_bytes", p[i].heap_bytes);
        ml_json_kv_u64(w, "rss_bytes", p[i].rss_bytes);
        ml_json_kv_u64(w, "mmap_bytes", p[i].mmap_bytes);
        ml_json_kv_u64(w, "gpu_bytes", p[i].gpu_bytes);
        ml_json_kv_u64(w, "alloc_calls", p[i].alloc_calls);
        ml_json_end(w);
    }
    ml_json_end(w);
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

/* A node up to its open list of children. */
static void flame_node_open(ml_json_t *w, const char *name, const char *file, uint32_t line,
                            const uint64_t *incl) {
    ml_json_object(w);
    char shortname[512];
    const char *shown = name ? ml_frame_short_name(name, shortname, sizeof shortname) : NULL;
    ml_json_kv_str(w, "name", shown);
    if (shown && strcmp(shown, name)) ml_json_kv_str(w, "name_full", name);
    ml_json_kv_str(w, "file", file);
    kv_line(w, "line", line);
    ml_json_kv_u64(w, "alloc", incl[ML_COST_ALLOCATED]);
    ml_json_kv_u64(w, "peak", incl[ML_COST_PEAK]);
    ml_json_kv_u64(w, "leaked", incl[ML_COST_LEAKED]);
    ml_json_kv_u64(w, "calls", incl[ML_COST_CALLS]);
    ml_json_key(w, "children");
    ml_json_array(w);
}

static void flame_node_open_at(ml_json_t *w, const ml_calltree_node_t *n) {
    flame_node_open(w, n->frame->function, n->frame->file, n->frame->line, n->incl);
}

static void flame_node_close(ml_json_t *w) {
    ml_json_end(w);
    ml_json_end(w);
}

int ml__json_flame(ml_json_t *w, const ml_calltree_node_t *v, size_t n) {
    ml_json_key(w, "flame");
    if (!n) {
        static const uint64_t zero[ML_COSTS];
        flame_node_open(w, "all", NULL, 0, zero);
        flame_node_close(w);
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
    flame_node_open_at(w, &v[0]);
    while (sp) {
        int32_t cur = stack[sp - 1];
        size_t i = (size_t)start[cur] + pos[cur];
        if (i < (size_t)start[cur + 1]) {
            pos[cur]++;
            int32_t c = kids[i];
            flame_node_open_at(w, &v[c]);
            stack[sp++] = c;
        } else {
            flame_node_close(w);
            sp--;
        }
    }
    free(kids);
    free(start);
    free(pos);
    free(stack);
    return 0;
}

static int flame(ml_json_t *w, const ml_analysis_t *a) {
    const ml_calltree_node_t *v;
    size_t n = ml_analysis_flame(a, &v);
    return ml__json_flame(w, v, n);
}

void ml__json_histograms(ml_json_t *w, const ml_histograms_t *h) {
    ml_json_key(w, "histograms");
    ml_json_object(w);
    ml_json_key(w, "sizes");
    ml_json_array(w);
    for (uint32_t k = h->size_first; k <= h->size_last && k < 64; k++) {
        ml_json_object(w);
        ml_json_kv_u64(w, "le", (uint64_t)1 << k);
        ml_json_kv_u64(w, "count", h->size_count[k]);
        ml_json_kv_u64(w, "bytes", h->size_bytes[k]);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_key(w, "lifetimes_ms");
    ml_json_array(w);
    for (uint32_t k = 0; k <= h->life_last && k < 64; k++) {
        ml_json_object(w);
        ml_json_kv_u64(w, "le", (uint64_t)1 << k);
        ml_json_kv_u64(w, "count", h->life_count[k]);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_kv_u64(w, "live_at_end", h->live_at_end);
    ml_json_end(w);
}

static void histograms(ml_json_t *w, const ml_analysis_t *a) {
    ml__json_histograms(w, ml_analysis_histograms(a));
}

void ml__json_thread_fields(ml_json_t *w, const ml_thread_stats_t *t) {
    ml_json_kv_u64(w, "index", t->index);
    ml_json_kv_u64(w, "tid", t->tid);
    ml_json_kv_str(w, "name", t->name);
    ml_json_kv_u64(w, "alloc_calls", t->alloc_calls);
    ml_json_kv_u64(w, "bytes_allocated", t->bytes_allocated);
    ml_json_kv_u64(w, "free_calls", t->free_calls);
    ml_json_kv_u64(w, "temporary_allocs", t->temporary_allocs);
}

static void threads(ml_json_t *w, const ml_analysis_t *a) {
    const ml_thread_stats_t *t;
    size_t n = ml_analysis_threads(a, &t);
    ml_json_key(w, "threads");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_object(w);
        ml__json_thread_fields(w, &t[i]);
        ml_json_end(w);
    }
    ml_json_end(w);
}

static void warnings(ml_json_t *w, const ml_analysis_t *a) {
    const char *const *msg;
    size_t n = ml_analysis_warnings(a, &msg);
    ml_json_key(w, "warnings");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) ml_json_str(w, msg[i]);
    ml_json_end(w);
}

/* ------------------------------------------------------------------------- */
/* The document                                                              */
/* ------------------------------------------------------------------------- */

/* The top-level keys, one per line. */
static void section(ml_json_t *w) {
    ml_json_break(w, 0);
}

int ml_report_json(FILE *o, const ml_analysis_t *a, const ml_report_opts_t *ro) {
    ml_report_opts_t none = {0};
    if (!ro) ro = &none;
    ml_json_t *w;
    int rc = ml_json_new(o, &w);
    if (rc < 0) return rc;
    ml_json_object(w);
    ml_json_kv_u64(w, "schema_version", ML_REPORT_SCHEMA_VERSION);
    section(w);
    ml_json_kv_str(w, "generator", "memlens " ML_VERSION);
    section(w);
    process(w, a);
    section(w);
    trace(w, a, ro);
    section(w);
    totals(w, a);
    section(w);
    sites(w, a, ro->max_sites);
    section(w);
    peak(w, a);
    section(w);
    leaks(w, a, ro);
    section(w);
    fragmentation(w, a);
    section(w);
    ml_json_key(w, "gpu");
    ml__report_json_gpu(w, a);
    /* The strategy advisor: "suggestions", "policies", "advisor" (advice_json.c). */
    section(w);
    ml__report_json_advice(w, a, ro->advice);
    section(w);
    timeline(w, a);
    section(w);
    rc = flame(w, a);
    if (rc == 0) {
        section(w);
        histograms(w, a);
        section(w);
        threads(w, a);
        section(w);
        warnings(w, a);
        ml_json_end(w);
        ml_json_newline(w);
        rc = ml_json_finish(w);
    }
    ml_json_free(w);
    return rc;
}
