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
#include "ml_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_SITES 20

static void u64(FILE *out, const char *key, uint64_t v, bool comma) {
    fprintf(out, "\"%s\": %" PRIu64 "%s", key, v, comma ? ", " : "");
}

static void seconds(FILE *out, const char *key, uint32_t ms, bool comma) {
    fprintf(out, "\"%s\": %u.%03u%s", key, ms / 1000, ms % 1000, comma ? ", " : "");
}

static void ratio(FILE *out, const char *key, double v, bool comma) {
    fprintf(out, "\"%s\": %.4f%s", key, v, comma ? ", " : "");
}

static void frag(FILE *out, const char *key, const ml_gpu_frag_t *f) {
    fprintf(out, "\"%s\": {", key);
    if (f->valid) {
        seconds(out, "time_s", f->time_ms, true);
        u64(out, "live_bytes", f->live_bytes, true);
        u64(out, "blocks", f->blocks, true);
        u64(out, "span_bytes", f->span_bytes, true);
        u64(out, "regions", f->regions, true);
        u64(out, "hole_bytes", f->hole_bytes, true);
        u64(out, "holes", f->holes, true);
        u64(out, "largest_hole_bytes", f->largest_hole_bytes, true);
        ratio(out, "utilization", f->utilization, true);
        ratio(out, "external", f->external, false);
    }
    fputc('}', out);
}

#define MAX_FRAMES 64

/* Frames as the report's sites have them: {function, file, line, module,
 * address}, innermost first, CUDA's and memlens' frames removed. Empty when
 * the session was not built (no symbols). */
static void frames(FILE *out, const ml_analysis_t *a, uint32_t stack) {
    ml_frame_t f[MAX_FRAMES];
    size_t n = ml_gpu_stack_frames(a, stack, f, MAX_FRAMES);
    fputs("\"frames\": [", out);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ", {\"function\": " : "{\"function\": ", out);
        ml_json_string(out, f[i].function);
        fputs(", \"file\": ", out);
        ml_json_string(out, f[i].file);
        if (f[i].line) fprintf(out, ", \"line\": %u", f[i].line);
        else fputs(", \"line\": null", out);
        fputs(", \"module\": ", out);
        ml_json_string(out, f[i].module);
        fprintf(out, ", \"address\": %" PRIu64 "%s}", f[i].address, f[i].inlined ? ", \"inlined\": true" : "");
    }
    fputs("], ", out);
}

static void site(FILE *out, const ml_analysis_t *a, const ml_gpu_t *g, const ml_gpu_site_t *s,
                 ml_gpu_order_t o) {
    fprintf(out, "{\"stack\": %u, \"kind\": \"%s\", ", s->stack, ml_gpu_kind_name(s->kind));
    frames(out, a, s->stack);
    switch (o) {
    case ML_GPU_BY_PEAK:
        u64(out, "bytes", s->peak_bytes, true);
        u64(out, "blocks", s->peak_blocks, false);
        break;
    case ML_GPU_BY_LEAKED:
        u64(out, "bytes", s->leaked_bytes, true);
        u64(out, "blocks", s->leaked_blocks, true);
        u64(out, "at_context_destroy_bytes", s->ctx_destroy_bytes, false);
        break;
    default:
        u64(out, "pairs", s->frees, true);
        ratio(out, "pairs_per_s", ml_gpu_site_pairs_per_s(g, s), true);
        ratio(out, "mean_lifetime_ms", s->frees ? (double)s->lifetime_ms_sum / (double)s->frees : 0, true);
        u64(out, "alloc_calls", s->alloc_calls, true);
        u64(out, "bytes_allocated", s->bytes_allocated, true);
        u64(out, "distinct_sizes", s->distinct_sizes, true);
        u64(out, "top_size", s->top_size, false);
        break;
    }
    fputc('}', out);
}

static void sites(FILE *out, const ml_analysis_t *a, const ml_gpu_t *g, size_t di, const char *key,
                  ml_gpu_order_t o) {
    ml_gpu_site_t buf[MAX_SITES];
    size_t n = ml_gpu_sites(g, di, o, buf, MAX_SITES);
    fprintf(out, "\"%s\": [", key);
    for (size_t i = 0; i < n; i++) {
        if (i) fputs(", ", out);
        site(out, a, g, &buf[i], o);
    }
    fputs("]", out);
}

/* Memory pools (memlens run --gpu-pools): present only when the trace has
 * pool records. Addresses are numbers, as frames' addresses are. */
static void pools(FILE *out, const ml_gpu_t *g, size_t di, const ml_gpu_device_t *d) {
    if (!d->pool_records) return;
    u64(out, "pool_reserved_at_peak_bytes", d->pool_reserved_at_peak_bytes, true);
    u64(out, "pool_used_at_peak_bytes", d->pool_used_at_peak_bytes, true);
    u64(out, "pool_unused_at_peak_bytes", d->pool_unused_at_peak_bytes, true);
    u64(out, "pool_records", d->pool_records, true);
    size_t n = ml_gpu_pools(g, di, NULL, 0);
    ml_gpu_pool_t *p = n ? calloc(n, sizeof *p) : NULL;
    if (p) n = ml_gpu_pools(g, di, p, n);
    else n = 0;
    fputs("\"pools\": [", out);
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%s{\"address\": %" PRIu64 ", \"kind\": \"%s\", ", i ? ", " : "", p[i].address,
                p[i].explicit_pool ? "explicit" : "default");
        fprintf(out, "\"imported\": %s, \"managed\": %s, ", p[i].imported ? "true" : "false",
                p[i].managed ? "true" : "false");
        u64(out, "peak_reserved_bytes", p[i].peak_reserved_bytes, true);
        u64(out, "reserved_at_exit_bytes", p[i].reserved_at_exit_bytes, true);
        u64(out, "peak_used_bytes", p[i].peak_used_bytes, true);
        u64(out, "used_at_exit_bytes", p[i].used_at_exit_bytes, true);
        u64(out, "reserved_at_peak_bytes", p[i].reserved_at_peak_bytes, true);
        u64(out, "used_at_peak_bytes", p[i].used_at_peak_bytes, true);
        u64(out, "release_threshold_bytes", p[i].release_threshold_bytes, true);
        u64(out, "trims", p[i].trims, true);
        u64(out, "reserved_drops_to_zero", p[i].drops_to_zero, true);
        u64(out, "allocs", p[i].allocs, true);
        u64(out, "releases", p[i].releases, true);
        u64(out, "created", p[i].created, true);
        u64(out, "destroyed", p[i].destroyed, false);
        fputc('}', out);
    }
    fputs("], ", out);
    free(p);
}

static void device(FILE *out, const ml_analysis_t *a, const ml_gpu_t *g, size_t di) {
    const ml_gpu_device_t *d = ml_gpu_device(g, di);
    fprintf(out, "{\"device\": %d, ", (int)d->device);
    u64(out, "peak_bytes", d->peak_bytes, true);
    u64(out, "peak_blocks", d->peak_blocks, true);
    seconds(out, "peak_time_s", d->peak_time_ms, true);
    u64(out, "leaked_bytes", d->leaked_bytes, true);
    u64(out, "leaked_blocks", d->leaked_blocks, true);
    u64(out, "leaked_at_context_destroy_bytes", d->ctx_destroy_bytes, true);
    u64(out, "live_bytes", d->live_bytes, true);
    u64(out, "alloc_calls", d->alloc_calls, true);
    u64(out, "free_calls", d->free_calls, true);
    u64(out, "bytes_allocated", d->bytes_allocated, true);
    u64(out, "unknown_frees", d->unknown_frees, true);
    u64(out, "failed_frees", d->failed_frees, true);
    u64(out, "empty_cache_cycles", d->empty_cache_cycles, true);
    u64(out, "pool_trims", d->pool_trims, true);
    pools(out, g, di, d);
    fputs("\"pinned_host\": {", out);
    u64(out, "peak_bytes", d->pinned_peak_bytes, true);
    u64(out, "live_bytes", d->pinned_live_bytes, true);
    u64(out, "leaked_bytes", d->pinned_leaked_bytes, true);
    u64(out, "bytes_allocated", d->pinned_bytes_allocated, true);
    u64(out, "alloc_calls", d->pinned_alloc_calls, true);
    u64(out, "free_calls", d->pinned_free_calls, false);
    fputs("}, \"kinds\": {", out);
    bool first = true;
    for (int k = 0; k < ML_GPU_KIND_COUNT_; k++) {
        const ml_gpu_kind_stats_t *s = &d->kinds[k];
        if (!s->alloc_calls && !s->free_calls) continue;
        fprintf(out, "%s\"%s\": {", first ? "" : ", ", ml_gpu_kind_name((unsigned)k));
        first = false;
        u64(out, "alloc_calls", s->alloc_calls, true);
        u64(out, "free_calls", s->free_calls, true);
        u64(out, "bytes_allocated", s->bytes_allocated, true);
        u64(out, "peak_bytes", s->peak_bytes, true);
        u64(out, "live_bytes", s->live_bytes, true);
        u64(out, "leaked_bytes", s->leaked_bytes, true);
        u64(out, "leaked_blocks", s->leaked_blocks, false);
        fputc('}', out);
    }
    fputs("}, ", out);
    sites(out, a, g, di, "peak_sites", ML_GPU_BY_PEAK);
    fputs(", ", out);
    sites(out, a, g, di, "leak_sites", ML_GPU_BY_LEAKED);
    fputs(", ", out);
    sites(out, a, g, di, "churn_sites", ML_GPU_BY_CHURN);
    fputs(", \"size_classes\": [", out);
    first = true;
    for (int k = 0; k < ML_GPU_SIZE_CLASSES; k++) {
        if (!d->size_count[k]) continue;
        fprintf(out, "%s{\"max_bytes\": %" PRIu64 ", \"allocs\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
                first ? "" : ", ", k >= 64 ? UINT64_MAX : (uint64_t)1 << k, d->size_count[k],
                d->size_bytes[k]);
        first = false;
    }
    fputs("], \"fragmentation\": {", out);
    frag(out, "at_peak", &d->frag_peak);
    fputs(", ", out);
    frag(out, "at_end", &d->frag_now);
    fputs("}, \"timeline\": [", out);
    const ml_gpu_point_t *pts;
    size_t n = ml_gpu_timeline(g, di, &pts);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s{\"time_s\": %u.%03u, \"bytes\": %" PRIu64 ", \"last_bytes\": %" PRIu64 "}",
                i ? ", " : "", pts[i].time_ms / 1000, pts[i].time_ms % 1000, pts[i].max_bytes,
                pts[i].last_bytes);
    fputs("]}", out);
}

void ml_report_json_gpu(FILE *out, const ml_analysis_t *a) {
    const ml_gpu_t *g = ml_analysis_gpu(a);
    size_t n = ml_gpu_device_count(g);
    fputs("{\"devices\": [", out);
    for (size_t i = 0; i < n; i++) {
        if (i) fputs(", ", out);
        device(out, a, g, i);
    }
    fputc(']', out);
    if (g) {
        const ml_gpu_summary_t *s = ml_gpu_summary(g);
        fputs(", ", out);
        u64(out, "peak_bytes", s->peak_bytes, true);
        seconds(out, "peak_time_s", s->peak_time_ms, true);
        u64(out, "live_bytes", s->live_bytes, true);
        u64(out, "pinned_host_peak_bytes", s->pinned_peak_bytes, true);
        u64(out, "pinned_host_live_bytes", s->pinned_live_bytes, true);
        u64(out, "contexts_destroyed", s->contexts_destroyed, true);
        u64(out, "records", s->gpu_records, true);
        u64(out, "dropped", s->dropped, false);
    }
    fputc('}', out);
}
