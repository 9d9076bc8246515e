/* json_merged.c - the JSON report of many processes (ml_report_merge.h):
 * the single-trace document's keys, filled from the merge, plus "merged",
 * "processes" and each site's "by_process" (docs/report-schema.json). With
 * ml_report_merge_opts_t.frame_table, the HTML page's form: frames and stacks
 * once, in "frame_table" and "stack_table", named by "stack"; no "by_process"
 * unless ml_report_merge_opts_t.by_process (`--json-compact`).
 *
 * What a merge cannot say is written as such, never made up: the peak is
 * the sum of the processes' own peaks (an upper bound, "merged.peak"), the
 * fragmentation and the timeline are per process (not merged: "valid":
 * false and an empty timeline), and the strategy advisor did not run.
 */
#include "report_internal.h"
#include "ml_config.h"
#include "ml_report_merge.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *end_name(const ml_totals_t *t) {
    return t->complete ? ml_end_name(t->end.status_kind) : "unknown";
}

static void exit_keys(ml_json_t *w, const ml_totals_t *t) {
    if (t->complete && t->end.status_kind == ML_END_EXITED) ml_json_kv_i64(w, "exit_code", t->end.status);
    else ml_json_kv_null(w, "exit_code");
    if (t->complete && t->end.status_kind == ML_END_SIGNALED) ml_json_kv_i64(w, "signal", t->end.status);
    else ml_json_kv_null(w, "signal");
    ml_json_kv_str(w, "end", end_name(t));
}

static void command(ml_json_t *w, const ml_merge_process_t *p) {
    ml_json_key(w, "command");
    ml_json_array(w);
    for (uint32_t i = 0; i < p->argc; i++) ml_json_str(w, p->argv[i]);
    ml_json_end(w);
}

/* "process": the first process (the earliest started; for a --follow-fork
 * tree, the one memlens started), with the keys the schema requires. */
static void first_process(ml_json_t *w, const ml_merge_t *m) {
    const ml_merge_process_t *p = ml_merge_process(m, 0);
    ml_json_key(w, "process");
    ml_json_object(w);
    ml_json_kv_u64(w, "pid", p->pid);
    ml_json_kv_u64(w, "ppid", p->ppid);
    command(w, p);
    ml_json_kv_str(w, "exe", p->exe);
    exit_keys(w, &p->totals);
    ml_json_kv_bool(w, "sampled", ml_merge_totals(m)->sampled);
    ml_json_kv_u64(w, "start_realtime_ns", p->start_realtime_ns);
    ml_json_end(w);
}

static void merged(ml_json_t *w, const ml_merge_t *m, const ml_report_merge_opts_t *o) {
    const ml_merge_totals_t *T = ml_merge_totals(m);
    ml_json_key(w, "merged");
    ml_json_object(w);
    ml_json_kv_str(w, "inputs", o->label);
    ml_json_kv_u64(w, "processes", ml_merge_process_count(m));
    ml_json_kv_str(w, "site_key", "function, file and module of every frame");
    ml_json_kv_str(w, "peak", "sum_of_process_peaks");
    ml_json_kv_u64(w, "sum_of_process_peaks_bytes", T->sum.peak_bytes);
    ml_json_kv_u64(w, "max_process_peak_bytes", T->max_process_peak_bytes);
    ml_json_kv_u64(w, "max_process_peak_pid", ml_merge_process(m, T->max_process)->pid);
    ml_json_kv_str(w, "not_merged", "fragmentation, timeline and the strategy advisor: per process "
                                    "(memlens report TRACE on one of the traces)");
    ml_json_end(w);
}

static void trace(ml_json_t *w, const ml_merge_t *m) {
    const ml_totals_t *t = &ml_merge_totals(m)->sum;
    uint64_t size = 0;
    for (size_t i = 0; i < ml_merge_process_count(m); i++) size += ml_merge_process(m, i)->trace_size;
    ml_json_key(w, "trace");
    ml_json_object(w);
    ml_json_kv_null(w, "path"); /* many: processes[].trace */
    ml_json_kv_u64(w, "size_bytes", size);
    ml_json_kv_u64(w, "records", t->records);
    ml_json_kv_bool(w, "complete", t->complete);
    ml_json_kv_bool(w, "truncated", t->truncated);
    ml_json_kv_u64(w, "lost_events", t->end.lost_in_crash + t->end.lost_dead_collector);
    ml_json_kv_u64(w, "truncated_stacks", t->end.truncated_stacks);
    ml_json_kv_u64(w, "ring_waits", t->end.ring_waits);
    ml_json_end(w);
}

static void processes(ml_json_t *w, const ml_merge_t *m) {
    ml_json_key(w, "processes");
    ml_json_array(w);
    for (size_t i = 0; i < ml_merge_process_count(m); i++) {
        const ml_merge_process_t *p = ml_merge_process(m, i);
        const ml_totals_t *t = &p->totals;
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_u64(w, "index", p->index);
        ml_json_kv_u64(w, "pid", p->pid);
        ml_json_kv_u64(w, "ppid", p->ppid);
        ml_json_kv_str(w, "program", p->exe);
        command(w, p);
        ml_json_kv_str(w, "trace", p->trace_path);
        ml_json_kv_str(w, "parent_trace", p->parent_trace[0] ? p->parent_trace : NULL);
        ml_json_kv_u64(w, "start_realtime_ns", p->start_realtime_ns);
        exit_keys(w, t);
        ml_json_kv_bool(w, "complete", t->complete);
        ml_json_kv_bool(w, "truncated", t->truncated);
        ml_json_kv_u64(w, "sample_bytes", t->sample_bytes);
        ml_json_kv_u64(w, "alloc_calls", t->alloc_calls);
        ml_json_kv_u64(w, "free_calls", t->free_calls);
        ml_json_kv_u64(w, "bytes_allocated", t->bytes_allocated);
        ml_json_kv_u64(w, "peak_bytes", t->peak_bytes);
        ml_json_kv_u64(w, "peak_blocks", t->peak_blocks);
        ml_json_kv_ms_as_s(w, "peak_time_s", t->peak_time_ms);
        if (t->hwm_rss_source) {
            ml_json_kv_u64(w, "peak_rss_hwm_bytes", t->hwm_rss_bytes);
            ml_json_kv_str(w, "peak_rss_hwm_source", ml_hwm_source_name(t->hwm_rss_source));
        } else {
            ml_json_kv_null(w, "peak_rss_hwm_bytes");
            ml_json_kv_null(w, "peak_rss_hwm_source");
        }
        ml_json_kv_u64(w, "leaked_bytes", p->leaked_bytes);
        ml_json_kv_u64(w, "leaked_blocks", p->leaked_blocks);
        ml_json_kv_u64(w, "reachable_bytes", p->reachable_bytes);
        ml_json_kv_u64(w, "gate_bytes", p->gate_bytes);
        ml_json_kv_bool(w, "scanned", p->scanned);
        ml_json_kv_u64(w, "sites", p->sites);
        ml_json_kv_u64(w, "gpu_peak_bytes", p->gpu_peak_bytes);
        ml_json_kv_u64(w, "gpu_leaked_bytes", p->gpu_leaked_bytes);
        ml_json_end(w);
    }
    ml_json_end(w);
}

static void totals(ml_json_t *w, const ml_merge_t *m) {
    const ml_merge_totals_t *T = ml_merge_totals(m);
    const ml_totals_t *t = &T->sum;
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
    ml_json_kv_u64(w, "peak_bytes", t->peak_bytes); /* the sum of the processes' peaks */
    ml_json_kv_u64(w, "peak_blocks", t->peak_blocks);
    ml_json_kv_u64(w, "peak_mmap_bytes", t->peak_mmap_bytes);
    ml_json_kv_u64(w, "peak_rss_bytes", t->peak_rss_bytes); /* the sum of the largest samples */
    /* One kernel high-water mark per process (processes[].peak_rss_hwm_bytes);
     * their sum is no process's and has no source. */
    ml_json_kv_null(w, "peak_rss_hwm_bytes");
    ml_json_kv_null(w, "peak_rss_hwm_source");
    ml_json_kv_u64(w, "leaked_bytes", T->leaks.bytes);
    ml_json_kv_u64(w, "leaked_blocks", T->leaks.blocks);
    ml_json_key(w, "calls_by_kind");
    ml_json_object(w);
    for (unsigned k = 0; k < ML_KIND_COUNT_; k++) {
        if (k == ML_KIND_FREE || k == ML_KIND_MUNMAP) continue;
        ml_json_kv_u64(w, ml_kind_name(k), t->calls_by_kind[k]);
    }
    ml_json_end(w);
    ml_json_end(w);
}

static void by_process(ml_json_t *w, const ml_merge_t *m, size_t site) {
    size_t n;
    const ml_merge_share_t *sh = ml_merge_site_processes(m, site, &n);
    ml_json_key(w, "by_process");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_object(w);
        ml_json_kv_u64(w, "process", sh[i].process);
        ml_json_kv_u64(w, "pid", ml_merge_process(m, sh[i].process)->pid);
        ml_json_kv_u64(w, "alloc_calls", sh[i].alloc_calls);
        ml_json_kv_u64(w, "bytes_allocated", sh[i].bytes_allocated);
        ml_json_kv_u64(w, "peak_bytes", sh[i].peak_bytes);
        ml_json_kv_u64(w, "peak_blocks", sh[i].peak_blocks);
        ml_json_kv_u64(w, "leaked_bytes", sh[i].leaked_bytes);
        ml_json_kv_u64(w, "leaked_blocks", sh[i].leaked_blocks);
        ml_json_kv_u64(w, "temporary_allocs", sh[i].temporary_allocs);
        ml_json_end(w);
    }
    ml_json_end(w);
}

static void sites(ml_json_t *w, ml__ftab_t *ft, const ml_merge_t *m, uint32_t max, bool shares) {
    size_t n;
    const ml_site_t *s = ml_merge_sites(m, &n);
    if (max && n > max) n = max;
    ml_json_key(w, "sites");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_break(w, 2);
        ml_json_object(w);
        /* The page reads no "by_process": its form leaves it out (it was
         * three quarters of a merged page's data); --json-compact keeps it. */
        if (ft) {
            ml__json_site_fields_ft(w, ft, &s[i]);
            if (shares) by_process(w, m, i);
        } else {
            ml__json_site_fields(w, &s[i]);
            by_process(w, m, i);
        }
        ml_json_end(w);
    }
    ml_json_end(w);
}

static void site_ref(ml_json_t *w, ml__ftab_t *ft, const ml_site_t *s) {
    ml__json_frames_ft(w, ft, s->frames, s->nframes);
    if (s->headline) ml_json_kv_u64(w, "headline", s->headline);
}

static void peak(ml_json_t *w, ml__ftab_t *ft, const ml_merge_t *m) {
    const ml_merge_totals_t *T = ml_merge_totals(m);
    size_t n;
    const ml_site_t *s = ml_merge_sites(m, &n);
    ml_json_key(w, "peak");
    ml_json_object(w);
    ml_json_kv_u64(w, "bytes", T->sum.peak_bytes);
    ml_json_kv_u64(w, "blocks", T->sum.peak_blocks);
    ml_json_kv_null(w, "time_s"); /* each process peaked at its own time */
    ml_json_kv_str(w, "kind", "sum_of_process_peaks");
    ml_json_key(w, "sites");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        if (!s[i].peak_bytes && !s[i].peak_blocks) continue;
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_u64(w, "site", s[i].id);
        ml_json_kv_u64(w, "bytes", s[i].peak_bytes);
        ml_json_kv_u64(w, "blocks", s[i].peak_blocks);
        site_ref(w, ft, &s[i]);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

static void leaks(ml_json_t *w, ml__ftab_t *ft, const ml_merge_t *m, const ml_report_merge_opts_t *ro) {
    const ml_leaks_t *L = &ml_merge_totals(m)->leaks;
    size_t n;
    const ml_site_t *s = ml_merge_sites(m, &n);
    ml_json_key(w, "leaks");
    ml_json_object(w);
    ml__json_leak_counts(w, L);
    /* "scanned" only when every process's exit scan ran */
    ml_json_kv_str(w, "reachability", L->scanned ? "scanned" : L->scan_status ? "failed" : "not_scanned");
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
        if (g->site < n) site_ref(w, ft, &s[g->site]);
        else ml__json_frames_ft(w, ft, NULL, 0);
        ml_json_end(w);
    }
    ml_json_end(w);
    /* What each pattern took in all the processes together; until
     * 2026-12-08 a report of several traces left the list out. */
    ml_json_key(w, "suppressions");
    ml_json_array(w);
    size_t ns = ro->supp_blocks && ro->supp_bytes ? ml_suppressions_count(ro->suppressions) : 0;
    for (size_t i = 0; i < ns; i++) {
        ml_json_object(w);
        ml_json_kv_str(w, "pattern", ml_suppressions_pattern(ro->suppressions, i, NULL, NULL));
        ml_json_kv_u64(w, "blocks", ro->supp_blocks[i]);
        ml_json_kv_u64(w, "bytes", ro->supp_bytes[i]);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

/* Fragmentation is a property of one heap: not merged. */
static void fragmentation(ml_json_t *w) {
    ml_json_key(w, "fragmentation");
    ml_json_object(w);
    static const char *const moments[] = {"at_peak", "at_end", "worst"};
    for (int i = 0; i < 3; i++) {
        ml_json_key(w, moments[i]);
        ml_json_object(w);
        ml_json_kv_bool(w, "valid", false);
        ml_json_end(w);
    }
    ml_json_key(w, "heap_maps");
    ml_json_object(w);
    for (int i = 0; i < 2; i++) { /* empty maps, as a single trace without that moment has */
        ml_json_key(w, moments[i]);
        ml_json_object(w);
        ml_json_kv_u64(w, "base", 0);
        ml_json_kv_u64(w, "cell_bytes", 0);
        ml_json_key(w, "cells");
        ml_json_array(w);
        ml_json_end(w);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

static void gpu(ml_json_t *w, const ml_merge_t *m) {
    const ml_merge_gpu_device_t *d;
    size_t n = ml_merge_gpu_devices(m, &d);
    ml_json_key(w, "gpu");
    ml_json_object(w);
    ml_json_key(w, "devices");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_object(w);
        ml_json_kv_i64(w, "device", d[i].device);
        ml_json_kv_u64(w, "processes", d[i].processes);
        ml_json_kv_u64(w, "peak_bytes", d[i].peak_bytes); /* sum of the processes' peaks */
        ml_json_kv_u64(w, "max_process_peak_bytes", d[i].max_process_peak_bytes);
        ml_json_kv_u64(w, "leaked_bytes", d[i].leaked_bytes);
        ml_json_kv_u64(w, "alloc_calls", d[i].alloc_calls);
        ml_json_kv_u64(w, "free_calls", d[i].free_calls);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

static void advisor(ml_json_t *w) {
    ml_json_key(w, "suggestions");
    ml_json_array(w);
    ml_json_end(w);
    ml_json_break(w, 0);
    ml_json_key(w, "advisor");
    ml_json_object(w);
    ml_json_kv_bool(w, "ran", false);
    ml_json_key(w, "skipped");
    ml_json_array(w);
    ml_json_str(w, "a merged report: the advisor replays one process's heap; run memlens report on "
                   "one trace for its suggestions");
    ml_json_end(w);
    ml_json_end(w);
}

static void threads(ml_json_t *w, const ml_merge_t *m) {
    const ml_thread_stats_t *t;
    const uint32_t *proc;
    size_t n = ml_merge_threads(m, &t, &proc);
    ml_json_key(w, "threads");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_object(w);
        ml_json_kv_u64(w, "process", proc[i]);
        ml__json_thread_fields(w, &t[i]);
        ml_json_end(w);
    }
    ml_json_end(w);
}

static void warnings(ml_json_t *w, const ml_merge_t *m) {
    const char *const *msg;
    size_t n = ml_merge_warnings(m, &msg);
    ml_json_key(w, "warnings");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) ml_json_str(w, msg[i]);
    ml_json_end(w);
}

int ml_report_json_merged(FILE *o, const ml_merge_t *m, const ml_report_merge_opts_t *ro) {
    ml_report_merge_opts_t none = {0};
    if (!ro) ro = &none;
    if (!ml_merge_process_count(m)) return -EINVAL;
    ml__ftab_t *ft = NULL;
    if (ro->frame_table && !(ft = ml__ftab_new_page())) return -ENOMEM;
    ml_json_t *w;
    int rc = ml_json_new(o, &w);
    if (rc < 0) {
        ml__ftab_delete(ft);
        return rc;
    }
    ml_json_object(w);
    ml_json_kv_u64(w, "schema_version", ML_REPORT_SCHEMA_VERSION);
    ml_json_break(w, 0);
    ml_json_kv_str(w, "generator", "memlens " ML_VERSION);
    ml_json_break(w, 0);
    merged(w, m, ro);
    ml_json_break(w, 0);
    first_process(w, m);
    ml_json_break(w, 0);
    trace(w, m);
    ml_json_break(w, 0);
    processes(w, m);
    ml_json_break(w, 0);
    totals(w, m);
    ml_json_break(w, 0);
    sites(w, ft, m, ro->max_sites, ro->by_process);
    ml_json_break(w, 0);
    peak(w, ft, m);
    ml_json_break(w, 0);
    leaks(w, ft, m, ro);
    ml_json_break(w, 0);
    fragmentation(w);
    ml_json_break(w, 0);
    gpu(w, m);
    ml_json_break(w, 0);
    advisor(w);
    ml_json_break(w, 0);
    ml_json_key(w, "timeline"); /* per process; each trace's own report has it */
    ml_json_array(w);
    ml_json_end(w);
    ml_json_break(w, 0);
    const ml_calltree_node_t *v;
    size_t nv = ml_merge_flame(m, &v);
    rc = ml__json_flame(w, v, nv);
    if (rc == 0) ml__json_flame_pruned(w, ml_merge_calltree_nodes(m), nv);
    if (rc == 0) {
        ml_json_break(w, 0);
        ml__json_histograms(w, ml_merge_histograms(m));
        ml_json_break(w, 0);
        threads(w, m);
        ml_json_break(w, 0);
        warnings(w, m);
        if (ft) {
            ml_json_break(w, 0);
            ml__json_frame_tables(w, ft);
        }
        ml_json_end(w);
        ml_json_newline(w);
        rc = ml_json_finish(w);
        if (rc == 0) rc = ml__ftab_error(ft);
    }
    ml_json_free(w);
    ml__ftab_delete(ft);
    return rc;
}
