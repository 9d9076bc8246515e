/* gpu_advice.c - the GPU advice rules (ml_gpu_suggest, ml_gpu.h): what the
 * numbers of gpu.c's queries suggest a program could change. Reads the state
 * only through those queries, and a device's pools.
 *
 * The rules and their thresholds (docs/gpu.md, "Advice"):
 *   gpu_caching_pool     a synchronous-allocation site (cudaMalloc, pitch,
 *                        managed) with >= 16 alloc/free pairs at >= 1 pair/s
 *                        and few request sizes (<= 4 distinct, or one size
 *                        making half the calls): reuse the blocks.
 *   gpu_async_alloc      the same churn with varied sizes (-> the
 *                        stream-ordered allocator), or stream-ordered churn of
 *                        >= 64 pairs (-> a pool release threshold, since the
 *                        default threshold 0 hands memory back at every sync).
 *   gpu_reuse_pinned     a pinned-host site with >= 4 alloc/free pairs.
 *   gpu_avoid_empty_cache  a device drained and refilled >= 3 times (bursts of
 *                        frees to a quarter of the level, then back to half),
 *                        or a pool trimmed and refilled as often.
 *   gpu_expandable_segments  at a device's peak, >= 8 holes between its live
 *                        allocations, holes >= 25 % of the live bytes, and no
 *                        single hole most of them (external >= 0.5), while
 *                        the device allocates with cudaMalloc-style calls.
 *   gpu_checkpoint_or_offload  a device peak of >= 16 MiB in which one site
 *                        holds >= 25 % (up to three such sites named): its
 *                        buffers alive together are the candidates.
 */
#include "gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CHURN_PAIRS 16
#define MIN_ASYNC_PAIRS 64
#define MIN_PINNED_PAIRS 4
#define MIN_CYCLES 3
#define MIN_OFFLOAD_PEAK (16 * ML__MIB)

static const char *fmt_b(uint64_t b, char *buf, size_t len) {
    return ml_fmt_bytes(b, buf, len);
}

static ml_gpu_suggestion_t *next_sugg(ml_gpu_suggestion_t *out, size_t max, size_t *n) {
    if (*n >= max) return NULL;
    ml_gpu_suggestion_t *s = &out[(*n)++];
    memset(s, 0, sizeof *s);
    return s;
}

static int cmp_sugg(const void *pa, const void *pb) {
    const ml_gpu_suggestion_t *a = pa, *b = pb;
    if (a->estimated_saving_bytes != b->estimated_saving_bytes)
        return a->estimated_saving_bytes > b->estimated_saving_bytes ? -1 : 1;
    if (a->pairs != b->pairs) return a->pairs > b->pairs ? -1 : 1;
    if (a->cycles != b->cycles) return a->cycles > b->cycles ? -1 : 1;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/* What the pool records (--gpu-pools) say about a device's pools. */
typedef struct {
    uint32_t pools, zero_threshold; /* local pools with sizes, and those with threshold 0 */
    uint32_t trims, drops;          /* of the pools with threshold 0 */
} pool_evidence_t;

static pool_evidence_t pool_evidence(const ml_gpu_t *g, int32_t device) {
    pool_evidence_t e = {0, 0, 0, 0};
    for (size_t i = 0; i < g->ndevs; i++) {
        const gdev_t *d = &g->devs[i];
        if (d->pub.device != device) continue;
        for (uint32_t k = 0; k < d->pub.npools; k++) {
            const ml_gpu_pool_t *p = &d->pools[k].pub;
            if (p->imported) continue;
            e.pools++;
            if (p->release_threshold_bytes) continue;
            e.zero_threshold++;
            e.trims += p->trims;
            e.drops += p->drops_to_zero;
        }
    }
    return e;
}

static void site_advice(const ml_gpu_t *g, const ml_gpu_site_t *s, ml_gpu_suggestion_t *out,
                        size_t max, size_t *n) {
    double pps = ml_gpu_site_pairs_per_s(g, s);
    char b1[32], b2[32];
    bool sync = s->kind == ML_GPU_KIND_DEVICE || s->kind == ML_GPU_KIND_PITCH ||
                s->kind == ML_GPU_KIND_MANAGED;
    bool async = s->kind == ML_GPU_KIND_ASYNC || s->kind == ML_GPU_KIND_POOL;
    bool pinned = s->kind == ML_GPU_KIND_HOST_PINNED || s->kind == ML_GPU_KIND_HOST_REGISTERED;
    bool few_sizes = s->distinct_sizes <= 4 || s->top_size_count * 2 >= s->alloc_calls;
    ml_gpu_suggestion_t *x = NULL;
    if (sync && s->frees >= MIN_CHURN_PAIRS && pps >= 1.0) {
        if (!(x = next_sugg(out, max, n))) return;
        if (few_sizes) {
            x->strategy = "gpu_caching_pool";
            snprintf(x->message, sizeof x->message,
                     "This site on GPU %d allocates and frees device memory %llu times (%.1f pairs/s), "
                     "mostly blocks of %s: each cudaMalloc/cudaFree pair synchronizes the device. "
                     "Keep freed blocks in a caching pool and hand them out again (PyTorch does so "
                     "unless PYTORCH_NO_CUDA_MEMORY_CACHING is set), or allocate the buffer once "
                     "outside the loop.",
                     s->device, (unsigned long long)s->frees, pps, fmt_b(s->top_size, b1, sizeof b1));
        } else {
            x->strategy = "gpu_async_alloc";
            snprintf(x->message, sizeof x->message,
                     "This site on GPU %d allocates and frees device memory %llu times (%.1f pairs/s) "
                     "in %s%u different sizes: use the stream-ordered allocator "
                     "(cudaMallocAsync/cudaFreeAsync, or PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) "
                     "with a pool release threshold, so sizes are served from the pool without a "
                     "device synchronization.",
                     s->device, (unsigned long long)s->frees, pps,
                     s->distinct_sizes > ML_GPU_SITE_SIZES ? "more than " : "",
                     s->distinct_sizes > ML_GPU_SITE_SIZES ? ML_GPU_SITE_SIZES : s->distinct_sizes);
        }
    } else if (async && s->frees >= MIN_ASYNC_PAIRS) {
        pool_evidence_t pe = pool_evidence(g, s->device);
        /* Measured (--gpu-pools): every pool of the device already keeps
         * memory across synchronizations. Nothing to advise. */
        if (pe.pools && !pe.zero_threshold) return;
        if (!(x = next_sugg(out, max, n))) return;
        x->strategy = "gpu_async_alloc";
        int k = snprintf(x->message, sizeof x->message,
                 "This site on GPU %d makes %llu stream-ordered allocation/free pairs (%.1f pairs/s). "
                 "Set the pool's release threshold (cudaMemPoolSetAttribute(pool, "
                 "cudaMemPoolAttrReleaseThreshold, ...) to the working set, about %s here): with the "
                 "default of 0 the pool returns its memory at every synchronization and has to grow "
                 "again.",
                 s->device, (unsigned long long)s->frees, pps, fmt_b(s->peak_bytes ? s->peak_bytes : s->max_size, b1, sizeof b1));
        if (pe.zero_threshold && (pe.trims || pe.drops) && k > 0 && (size_t)k < sizeof x->message)
            snprintf(x->message + k, sizeof x->message - (size_t)k,
                     " Measured (--gpu-pools): %u pool(s) with release threshold 0 were trimmed "
                     "%u times and their reserved memory fell to 0 %u times.",
                     pe.zero_threshold, pe.trims, pe.drops);
    } else if (pinned && s->frees >= MIN_PINNED_PAIRS) {
        if (!(x = next_sugg(out, max, n))) return;
        x->strategy = "gpu_reuse_pinned";
        snprintf(x->message, sizeof x->message,
                 "This site pins host memory and releases it %llu times (%s in total, mostly %s "
                 "blocks). Pinning and unpinning are slow system calls that also synchronize: "
                 "allocate the pinned staging buffers once and reuse them every step (a pinned "
                 "buffer pool; in PyTorch keep pin_memory's CachingHostAllocator warm).",
                 (unsigned long long)s->frees, fmt_b(s->bytes_allocated, b1, sizeof b1),
                 fmt_b(s->top_size, b2, sizeof b2));
    }
    if (!x) return;
    x->device = s->device;
    x->stack = s->stack;
    x->kind = s->kind;
    x->calls = s->alloc_calls;
    x->pairs = s->frees;
    x->bytes = s->bytes_allocated;
    x->pairs_per_s = pps;
    x->distinct_sizes = s->distinct_sizes;
    snprintf(x->evidence, sizeof x->evidence,
             "%llu allocations, %llu frees, %.1f pairs/s, %u distinct sizes, mean lifetime %.1f ms, %s",
             (unsigned long long)s->alloc_calls, (unsigned long long)s->frees, pps, s->distinct_sizes,
             s->frees ? (double)s->lifetime_ms_sum / (double)s->frees : 0.0, ml_gpu_kind_name(s->kind));
}

static void device_advice(const ml_gpu_t *g, size_t di, ml_gpu_suggestion_t *out, size_t max,
                          size_t *n) {
    const ml_gpu_device_t *d = ml_gpu_device(g, di);
    char b1[32], b2[32], b3[32];
    ml_gpu_suggestion_t *x;
    if (d->empty_cache_cycles >= MIN_CYCLES && (x = next_sugg(out, max, n))) {
        x->strategy = "gpu_avoid_empty_cache";
        x->device = d->device;
        x->cycles = d->empty_cache_cycles;
        snprintf(x->message, sizeof x->message,
                 "GPU %d gave back almost all of its memory and allocated it again %u times "
                 "(%u pool trims). Emptying the allocator's cache inside the loop "
                 "(torch.cuda.empty_cache(), cudaMemPoolTrimTo) makes every step pay for fresh "
                 "cudaMalloc calls and device synchronizations: call it once, outside the loop, or "
                 "not at all.",
                 d->device, d->empty_cache_cycles, d->pool_trims);
        snprintf(x->evidence, sizeof x->evidence, "%u drain/refill cycles, %u pool trims, peak %s",
                 d->empty_cache_cycles, d->pool_trims, fmt_b(d->peak_bytes, b1, sizeof b1));
    }
    const ml_gpu_frag_t *f = &d->frag_peak;
    uint64_t malloc_style = d->kinds[ML_GPU_KIND_DEVICE].alloc_calls +
                            d->kinds[ML_GPU_KIND_PITCH].alloc_calls;
    if (f->valid && f->holes >= 8 && f->hole_bytes * 4 >= f->live_bytes && f->external >= 0.5 &&
        malloc_style > 0 && (x = next_sugg(out, max, n))) {
        x->strategy = "gpu_expandable_segments";
        x->device = d->device;
        x->share = f->span_bytes ? (double)f->hole_bytes / (double)f->span_bytes : 0;
        snprintf(x->message, sizeof x->message,
                 "At its peak, GPU %d's %llu live allocations were scattered with %llu holes "
                 "(%s between them, the largest %s): separately allocated segments fragment the "
                 "device. Grow one virtual range instead: PYTORCH_CUDA_ALLOC_CONF="
                 "expandable_segments:True, or the VMM API (cuMemAddressReserve + cuMemCreate + "
                 "cuMemMap).",
                 d->device, (unsigned long long)f->blocks, (unsigned long long)f->holes,
                 fmt_b(f->hole_bytes, b1, sizeof b1), fmt_b(f->largest_hole_bytes, b2, sizeof b2));
        snprintf(x->evidence, sizeof x->evidence,
                 "at peak: %s live in a span of %s, %llu holes, external fragmentation %.2f",
                 fmt_b(f->live_bytes, b1, sizeof b1), fmt_b(f->span_bytes, b3, sizeof b3),
                 (unsigned long long)f->holes, f->external);
    }
    if (d->peak_bytes >= MIN_OFFLOAD_PEAK) {
        ml_gpu_site_t top[3];
        size_t k = ml_gpu_sites(g, di, ML_GPU_BY_PEAK, top, 3);
        for (size_t i = 0; i < k; i++) {
            double share = (double)top[i].peak_bytes / (double)d->peak_bytes;
            if (share < 0.25) break;
            if (!(x = next_sugg(out, max, n))) return;
            x->strategy = "gpu_checkpoint_or_offload";
            x->device = d->device;
            x->stack = top[i].stack;
            x->kind = top[i].kind;
            x->share = share;
            x->bytes = top[i].peak_bytes;
            x->calls = top[i].alloc_calls;
            x->estimated_saving_bytes = top[i].peak_bytes;
            snprintf(x->message, sizeof x->message,
                     "At GPU %d's peak (%s at %.3f s) this site held %s (%.0f %% of it) in %llu "
                     "buffers alive at the same time. They are the candidates to recompute instead "
                     "of keeping (activation checkpointing) or to offload to host memory between "
                     "uses; doing so lowers the peak by up to that much.",
                     d->device, fmt_b(d->peak_bytes, b1, sizeof b1), d->peak_time_ms / 1000.0,
                     fmt_b(top[i].peak_bytes, b2, sizeof b2), share * 100,
                     (unsigned long long)top[i].peak_blocks);
            snprintf(x->evidence, sizeof x->evidence, "%llu blocks, %s of a %s peak, %s",
                     (unsigned long long)top[i].peak_blocks, fmt_b(top[i].peak_bytes, b1, sizeof b1),
                     fmt_b(d->peak_bytes, b2, sizeof b2), ml_gpu_kind_name(top[i].kind));
        }
    }
}

size_t ml_gpu_suggest(const ml_gpu_t *g, ml_gpu_suggestion_t *out, size_t max) {
    if (!g || !max) return 0;
    size_t cap = max + 64, n = 0;
    ml_gpu_suggestion_t *all = calloc(cap, sizeof *all);
    if (!all) return 0;
    size_t nsites = ml_gpu_site_count(g);
    ml_gpu_site_t *sites = malloc((nsites ? nsites : 1) * sizeof *sites);
    if (sites) {
        size_t ns = ml_gpu_sites(g, SIZE_MAX, ML_GPU_BY_CHURN, sites, nsites);
        for (size_t i = 0; i < ns && n < cap; i++) site_advice(g, &sites[i], all, cap, &n);
        free(sites);
    }
    for (size_t i = 0; i < ml_gpu_device_count(g) && n < cap; i++) device_advice(g, i, all, cap, &n);
    qsort(all, n, sizeof *all, cmp_sugg);
    if (n > max) n = max;
    memcpy(out, all, n * sizeof *out);
    free(all);
    return n;
}