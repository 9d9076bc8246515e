/* gpu_json.c - the report's "gpu" object (docs/gpu.md, "JSON").
 *
 * Presentation only: every number comes from analysis/ml_gpu.h. The object
 * always has "devices" (empty for a trace without GPU records), and each
 * device at least {device, peak_bytes, leaked_bytes, alloc_calls,
 * free_calls}, the DESIGN.md contract, plus per-kind counters, the sites
 * holding the peak, leak and churn sites, size classes, fragmentation and the
 * per-device timeline, and the memory pools when the trace has pool records.
 */
#include "ml_report_gpu.h"
#include "ml_gpu.h"
#include "report_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_SITES 20

static void frag(ml_json_t *w, const char *key, const ml_gpu_frag_t *f) {
    ml_json_key(w, key);
    ml_json_object(w);
    if (f->valid) {
        ml_json_kv_ms_as_s(w, "time_s", f->time_ms);
        ml_json_kv_u64(w, "live_bytes", f->live_bytes);
        ml_json_kv_u64(w, "blocks", f->blocks);
        ml_json_kv_u64(w, "span_bytes", f->span_bytes);
        ml_json_kv_u64(w, "regions", f->regions);
        ml_json_kv_u64(w, "hole_bytes", f->hole_bytes);
        ml_json_kv_u64(w, "holes", f->holes);
        ml_json_kv_u64(w, "largest_hole_bytes", f->largest_hole_bytes);
        ml_json_kv_double(w, "utilization", f->utilization);
        ml_json_kv_double(w, "external", f->external);
    }
    ml_json_end(w);
}

#define MAX_FRAMES 64

/* Frames as the report's sites have them: {function, file, line, module,
 * address}, innermost first, CUDA's and memlens' frames removed. Empty when
 * the session was not built (no symbols). */
static void frames(ml_json_t *w, const ml_analysis_t *a, uint32_t stack) {
    ml_frame_t f[MAX_FRAMES];
    size_t n = ml_gpu_stack_frames(a, stack, f, MAX_FRAMES);
    ml_json_key(w, "frames");
    ml__json_frames(w, f, n, true);
}

static void site(ml_json_t *w, const ml_analysis_t *a, const ml_gpu_t *g, const ml_gpu_site_t *s,
                 ml_gpu_order_t o) {
    ml_json_object(w);
    ml_json_kv_u64(w, "stack", s->stack);
    ml_json_kv_str(w, "kind", ml_gpu_kind_name(s->kind));
    frames(w, a, s->stack);
    switch (o) {
    case ML_GPU_BY_PEAK:
        ml_json_kv_u64(w, "bytes", s->peak_bytes);
        ml_json_kv_u64(w, "blocks", s->peak_blocks);
        break;
    case ML_GPU_BY_LEAKED:
        ml_json_kv_u64(w, "bytes", s->leaked_bytes);
        ml_json_kv_u64(w, "blocks", s->leaked_blocks);
        ml_json_kv_u64(w, "at_context_destroy_bytes", s->ctx_destroy_bytes);
        break;
    default:
        ml_json_kv_u64(w, "pairs", s->frees);
        ml_json_kv_double(w, "pairs_per_s", ml_gpu_site_pairs_per_s(g, s));
        ml_json_kv_double(w, "mean_lifetime_ms",
                          s->frees ? (double)s->lifetime_ms_sum / (double)s->frees : 0);
        ml_json_kv_u64(w, "alloc_calls", s->alloc_calls);
        ml_json_kv_u64(w, "bytes_allocated", s->bytes_allocated);
        ml_json_kv_u64(w, "distinct_sizes", s->distinct_sizes);
        ml_json_kv_u64(w, "top_size", s->top_size);
        break;
    }
    ml_json_end(w);
}

static void sites(ml_json_t *w, const ml_analysis_t *a, const ml_gpu_t *g, size_t di, const char *key,
                  ml_gpu_order_t o) {
    ml_gpu_site_t buf[MAX_SITES];
    size_t n = ml_gpu_sites(g, di, o, buf, MAX_SITES);
    ml_json_key(w, key);
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) site(w, a, g, &buf[i], o);
    ml_json_end(w);
}

/* Memory pools (memlens run --gpu-pools): present only when the trace has
 * pool records. Addresses are numbers, as frames' addresses are. */
static void pools(ml_json_t *w, const ml_gpu_t *g, size_t di, const ml_gpu_device_t *d) {
    if (!d->pool_records) return;
    ml_json_kv_u64(w, "pool_reserved_at_peak_bytes", d->pool_reserved_at_peak_bytes);
    ml_json_kv_u64(w, "pool_used_at_peak_bytes", d->pool_used_at_peak_bytes);
    ml_json_kv_u64(w, "pool_unused_at_peak_bytes", d->pool_unused_at_peak_bytes);
    ml_json_kv_u64(w, "pool_records", d->pool_records);
    size_t n = ml_gpu_pools(g, di, NULL, 0);
    ml_gpu_pool_t *p = n ? calloc(n, sizeof *p) : NULL;
    if (p) n = ml_gpu_pools(g, di, p, n);
    else n = 0;
    ml_json_key(w, "pools");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_object(w);
        ml_json_kv_u64(w, "address", p[i].address);
        ml_json_kv_str(w, "kind", p[i].explicit_pool ? "explicit" : "default");
        ml_json_kv_bool(w, "imported", p[i].imported);
        ml_json_kv_bool(w, "managed", p[i].managed);
        ml_json_kv_u64(w, "peak_reserved_bytes", p[i].peak_reserved_bytes);
        ml_json_kv_u64(w, "reserved_at_exit_bytes", p[i].reserved_at_exit_bytes);
        ml_json_kv_u64(w, "peak_used_bytes", p[i].peak_used_bytes);
        ml_json_kv_u64(w, "used_at_exit_bytes", p[i].used_at_exit_bytes);
        ml_json_kv_u64(w, "reserved_at_peak_bytes", p[i].reserved_at_peak_bytes);
        ml_json_kv_u64(w, "used_at_peak_bytes", p[i].used_at_peak_bytes);
        ml_json_kv_u64(w, "release_threshold_bytes", p[i].release_threshold_bytes);
        ml_json_kv_u64(w, "trims", p[i].trims);
        ml_json_kv_u64(w, "reserved_drops_to_zero", p[i].drops_to_zero);
        ml_json_kv_u64(w, "allocs", p[i].allocs);
        ml_json_kv_u64(w, "releases", p[i].releases);
        ml_json_kv_u64(w, "created", p[i].created);
        ml_json_kv_u64(w, "destroyed", p[i].destroyed);
        ml_json_end(w);
    }
    ml_json_end(w);
    free(p);
}

static void device(ml_json_t *w, const ml_analysis_t *a, const ml_gpu_t *g, size_t di) {
    const ml_gpu_device_t *d = ml_gpu_device(g, di);
    ml_json_object(w);
    ml_json_kv_i64(w, "device", d->device);
    ml_json_kv_u64(w, "peak_bytes", d->peak_bytes);
    ml_json_kv_u64(w, "peak_blocks", d->peak_blocks);
    ml_json_kv_ms_as_s(w, "peak_time_s", d->peak_time_ms);
    ml_json_kv_u64(w, "leaked_bytes", d->leaked_bytes);
    ml_json_kv_u64(w, "leaked_blocks", d->leaked_blocks);
    ml_json_kv_u64(w, "leaked_at_context_destroy_bytes", d->ctx_destroy_bytes);
    ml_json_kv_u64(w, "live_bytes", d->live_bytes);
    ml_json_kv_u64(w, "alloc_calls", d->alloc_calls);
    ml_json_kv_u64(w, "free_calls", d->free_calls);
    ml_json_kv_u64(w, "bytes_allocated", d->bytes_allocated);
    ml_json_kv_u64(w, "unknown_frees", d->unknown_frees);
    ml_json_kv_u64(w, "failed_frees", d->failed_frees);
    ml_json_kv_u64(w, "empty_cache_cycles", d->empty_cache_cycles);
    ml_json_kv_u64(w, "pool_trims", d->pool_trims);
    pools(w, g, di, d);
    ml_json_key(w, "pinned_host");
    ml_json_object(w);
    ml_json_kv_u64(w, "peak_bytes", d->pinned_peak_bytes);
    ml_json_kv_u64(w, "live_bytes", d->pinned_live_bytes);
    ml_json_kv_u64(w, "leaked_bytes", d->pinned_leaked_bytes);
    ml_json_kv_u64(w, "bytes_allocated", d->pinned_bytes_allocated);
    ml_json_kv_u64(w, "alloc_calls", d->pinned_alloc_calls);
    ml_json_kv_u64(w, "free_calls", d->pinned_free_calls);
    ml_json_end(w);
    ml_json_key(w, "kinds");
    ml_json_object(w);
    for (int k = 0; k < ML_GPU_KIND_COUNT_; k++) {
        const ml_gpu_kind_stats_t *s = &d->kinds[k];
        if (!s->alloc_calls && !s->free_calls) continue;
        ml_json_key(w, ml_gpu_kind_name((unsigned)k));
        ml_json_object(w);
        ml_json_kv_u64(w, "alloc_calls", s->alloc_calls);
        ml_json_kv_u64(w, "free_calls", s->free_calls);
        ml_json_kv_u64(w, "bytes_allocated", s->bytes_allocated);
        ml_json_kv_u64(w, "peak_bytes", s->peak_bytes);
        ml_json_kv_u64(w, "live_bytes", s->live_bytes);
        ml_json_kv_u64(w, "leaked_bytes", s->leaked_bytes);
        ml_json_kv_u64(w, "leaked_blocks", s->leaked_blocks);
        ml_json_end(w);
    }
    ml_json_end(w);
    sites(w, a, g, di, "peak_sites", ML_GPU_BY_PEAK);
    sites(w, a, g, di, "leak_sites", ML_GPU_BY_LEAKED);
    sites(w, a, g, di, "churn_sites", ML_GPU_BY_CHURN);
    ml_json_key(w, "size_classes");
    ml_json_array(w);
    for (int k = 0; k < ML_GPU_SIZE_CLASSES; k++) {
        if (!d->size_count[k]) continue;
        ml_json_object(w);
        ml_json_kv_u64(w, "max_bytes", k >= 64 ? UINT64_MAX : (uint64_t)1 << k);
        ml_json_kv_u64(w, "allocs", d->size_count[k]);
        ml_json_kv_u64(w, "bytes", d->size_bytes[k]);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_key(w, "fragmentation");
    ml_json_object(w);
    ml_json_key(w, "labels");
    ml_json_object(w);
    ml_json_kv_str(w, "utilization", ML_LABEL_GPU_UTILIZATION);
    ml_json_kv_str(w, "external", ML_LABEL_GPU_EXTERNAL);
    ml_json_end(w);
    frag(w, "at_peak", &d->frag_peak);
    frag(w, "at_end", &d->frag_now);
    ml_json_end(w);
    ml_json_key(w, "timeline");
    ml_json_array(w);
    const ml_gpu_point_t *pts;
    size_t n = ml_gpu_timeline(g, di, &pts);
    for (size_t i = 0; i < n; i++) {
        ml_json_object(w);
        ml_json_kv_ms_as_s(w, "time_s", pts[i].time_ms);
        ml_json_kv_u64(w, "bytes", pts[i].max_bytes);
        ml_json_kv_u64(w, "last_bytes", pts[i].last_bytes);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

void ml__report_json_gpu(ml_json_t *w, const ml_analysis_t *a) {
    const ml_gpu_t *g = ml_analysis_gpu(a);
    size_t n = ml_gpu_device_count(g);
    ml_json_object(w);
    ml_json_key(w, "devices");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) device(w, a, g, i);
    ml_json_end(w);
    if (g) {
        const ml_gpu_summary_t *s = ml_gpu_summary(g);
        ml_json_kv_u64(w, "peak_bytes", s->peak_bytes);
        ml_json_kv_ms_as_s(w, "peak_time_s", s->peak_time_ms);
        ml_json_kv_u64(w, "live_bytes", s->live_bytes);
        ml_json_kv_u64(w, "pinned_host_peak_bytes", s->pinned_peak_bytes);
        ml_json_kv_u64(w, "pinned_host_live_bytes", s->pinned_live_bytes);
        ml_json_kv_u64(w, "contexts_destroyed", s->contexts_destroyed);
        ml_json_kv_u64(w, "records", s->gpu_records);
        ml_json_kv_u64(w, "dropped", s->dropped);
    }
    ml_json_end(w);
}

int ml_report_json_gpu(FILE *out, const ml_analysis_t *a) {
    ml_json_t *w;
    int rc = ml_json_new(out, &w);
    if (rc < 0) return rc;
    ml__report_json_gpu(w, a);
    rc = ml_json_finish(w);
    ml_json_free(w);
    return rc;
}
