/* gpu_snapshot.c - the GPU state in the collector's analysis snapshot.
 *
 * snapshot.c writes the rest of the session and calls these with its buffer,
 * so that a report on a CUDA program restores instead of replaying every
 * record. Everything a query reads is saved as it is: the summary, each
 * device's public numbers (peak, fragmentation at the peak and now, size
 * classes, per-kind counters), its context-destruction and empty_cache state
 * and its timeline; every site with its request sizes; the live blocks in
 * their map slots and the stash of recent frees. What follows from them is
 * rebuilt: the site index, and each device's treap of live ranges (from the
 * live blocks: its shape and priorities differ, its summary does not; a
 * restored session is not fed again anyway, and the fragmentation numbers
 * are saved).
 *
 * Restore trusts nothing: counts are bounded by the bytes left, indexes by
 * their tables, each block must be found in its slot by a lookup (no
 * duplicates, no broken probe chain), and the live counters of devices,
 * kinds and sites must equal the sums of the live blocks.
 */
#include "gpu_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define GPU_SNAP_MAGIC 0x31555047u /* "GPU1" */

/* A new field in any of these must be saved and restored below (and the
 * snapshot version bumped): these sizes fail to compile until the sizes
 * here are updated, which is the moment to do it. LP64 only. */
#if defined(__LP64__)
_Static_assert(sizeof(ml_gpu_summary_t) == 80, "save/restore the new ml_gpu_summary_t field");
_Static_assert(sizeof(ml_gpu_device_t) == 2104, "save/restore the new ml_gpu_device_t field");
_Static_assert(sizeof(ml_gpu_kind_stats_t) == 64, "save/restore the new kind-stats field");
_Static_assert(sizeof(ml_gpu_frag_t) == 80, "save/restore the new ml_gpu_frag_t field");
_Static_assert(sizeof(ml_gpu_site_t) == 144, "save/restore the new ml_gpu_site_t field");
_Static_assert(sizeof(gdev_t) == 2392, "save/restore the new gdev_t field");
_Static_assert(sizeof(gsite_t) == 288, "save/restore the new gsite_t field");
_Static_assert(sizeof(gblock_t) == 48, "save/restore the new gblock_t field");
_Static_assert(sizeof(gpool_t) == 136, "save/restore the new gpool_t field");
_Static_assert(sizeof(ml_gpu_pool_t) == 120, "save/restore the new ml_gpu_pool_t field");
_Static_assert(sizeof(struct ml_gpu_s) == 3248, "save/restore the new ml_gpu_t field");
#endif

static void put_gfrag(ml__obuf_t *b, const ml_gpu_frag_t *f) {
    ml__put_u(b, f->valid);
    ml__put_u(b, f->time_ms);
    ml__put_u(b, f->live_bytes);
    ml__put_u(b, f->blocks);
    ml__put_u(b, f->span_bytes);
    ml__put_u(b, f->hole_bytes);
    ml__put_u(b, f->holes);
    ml__put_u(b, f->largest_hole_bytes);
    ml__put_d(b, f->utilization);
    ml__put_d(b, f->external);
    ml__put_u(b, f->regions);
}

static void get_gfrag(ml__ibuf_t *b, ml_gpu_frag_t *f) {
    f->valid = ml__get_max(b, 1, "bad flag");
    f->time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU time is out of range");
    f->live_bytes = ml__get_u(b);
    f->blocks = ml__get_u(b);
    f->span_bytes = ml__get_u(b);
    f->hole_bytes = ml__get_u(b);
    f->holes = ml__get_u(b);
    f->largest_hole_bytes = ml__get_u(b);
    f->utilization = ml__get_d(b);
    f->external = ml__get_d(b);
    f->regions = ml__get_max(b, UINT32_MAX, "a GPU region count is out of range");
}

/* A block without its map slot (live blocks and the stash). */
static void put_gblock(ml__obuf_t *b, const gblock_t *e) {
    ml__put_u(b, e->space);
    ml__put_u(b, e->key);
    ml__put_u(b, e->size);
    ml__put_u(b, e->handle);
    ml__put_u(b, e->site);
    ml__put_u(b, e->context);
    ml__put_u(b, e->time_ms);
    ml__put_u(b, e->maps);
    ml__put_u(b, e->flags);
    ml__put_u(b, e->kind);
    ml__put_u(b, e->released);
    ml__put_u(b, e->dev);
}

/* Reads a block and checks it against the devices and sites (restored
 * before it): the feeding code indexes both with it. */
static void get_gblock(ml__ibuf_t *b, const ml_gpu_t *g, gblock_t *e) {
    e->space = (uint8_t)ml__get_max(b, S_COUNT, "a GPU block's space is out of range");
    e->key = ml__get_u(b);
    e->size = ml__get_u(b);
    e->handle = ml__get_u(b);
    e->site = (uint32_t)ml__get_max(b, g->nsites ? g->nsites - 1 : 0,
                                    "a GPU block names an unknown site");
    e->context = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU context is out of range");
    e->time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU time is out of range");
    e->maps = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU handle's mappings are out of range");
    e->flags = (uint16_t)ml__get_max(b, UINT16_MAX, "a GPU block's flags are out of range");
    e->kind = (uint8_t)ml__get_max(b, ML_GPU_KIND_COUNT_ - 1, "a GPU block's kind is out of range");
    e->released = (uint8_t)ml__get_max(b, 1, "bad flag");
    e->dev =
        (uint8_t)ml__get_max(b, g->ndevs ? g->ndevs - 1 : 0, "a GPU block names an unknown device");
    if (b->bad) return;
    if (!e->space || e->space != space_of(e->kind) + 1 || !g->nsites || !g->ndevs ||
        g->sites[e->site].dev != e->dev || g->sites[e->site].pub.kind != e->kind)
        ml__snap_bad(b, "a GPU block does not match its site");
}

/* A pool (--gpu-pools): its public numbers and the correlation ids of the
 * states it keeps, so records fed after a restore would join the same way. */
static void put_gpool(ml__obuf_t *b, const gpool_t *q) {
    const ml_gpu_pool_t *p = &q->pub;
    ml__put_u(b, p->address);
    ml__put_u(b, (uint64_t)p->explicit_pool | (uint64_t)p->imported << 1 | (uint64_t)p->managed << 2 |
                     (uint64_t)q->have_cur << 3 | (uint64_t)q->have_peak << 4);
    ml__put_u(b, p->peak_reserved_bytes);
    ml__put_u(b, p->reserved_at_exit_bytes);
    ml__put_u(b, p->peak_used_bytes);
    ml__put_u(b, p->used_at_exit_bytes);
    ml__put_u(b, p->release_threshold_bytes);
    ml__put_u(b, p->reserved_at_peak_bytes);
    ml__put_u(b, p->used_at_peak_bytes);
    ml__put_u(b, p->trims);
    ml__put_u(b, p->created);
    ml__put_u(b, p->destroyed);
    ml__put_u(b, p->allocs);
    ml__put_u(b, p->releases);
    ml__put_u(b, p->drops_to_zero);
    ml__put_u(b, p->last_correlation);
    ml__put_u(b, q->cur_corr);
    ml__put_u(b, q->peak_corr);
}

static void get_gpool(ml__ibuf_t *b, int32_t device, gpool_t *q) {
    static const char range[] = "a GPU pool counter is out of range";
    ml_gpu_pool_t *p = &q->pub;
    p->device = device;
    p->address = ml__get_u(b);
    uint64_t flags = ml__get_max(b, 31, "a GPU pool's flags are out of range");
    p->explicit_pool = flags & 1;
    p->imported = flags >> 1 & 1;
    p->managed = flags >> 2 & 1;
    q->have_cur = flags >> 3 & 1;
    q->have_peak = flags >> 4 & 1;
    p->peak_reserved_bytes = ml__get_u(b);
    p->reserved_at_exit_bytes = ml__get_u(b);
    p->peak_used_bytes = ml__get_u(b);
    p->used_at_exit_bytes = ml__get_u(b);
    p->release_threshold_bytes = ml__get_u(b);
    p->reserved_at_peak_bytes = ml__get_u(b);
    p->used_at_peak_bytes = ml__get_u(b);
    p->trims = (uint32_t)ml__get_max(b, UINT32_MAX, range);
    p->created = (uint32_t)ml__get_max(b, UINT32_MAX, range);
    p->destroyed = (uint32_t)ml__get_max(b, UINT32_MAX, range);
    p->allocs = ml__get_u(b);
    p->releases = ml__get_u(b);
    p->drops_to_zero = (uint32_t)ml__get_max(b, UINT32_MAX, range);
    p->last_correlation = (uint32_t)ml__get_max(b, UINT32_MAX, range);
    q->cur_corr = (uint32_t)ml__get_max(b, UINT32_MAX, range);
    q->peak_corr = (uint32_t)ml__get_max(b, UINT32_MAX, range);
}

int ml__gpu_save(const ml_gpu_t *g, ml__obuf_t *b) {
    ml__put_u(b, GPU_SNAP_MAGIC);
    const ml_gpu_summary_t *u = &g->sum;
    ml__put_u(b, u->ndevices);
    ml__put_u(b, u->gpu_records);
    ml__put_u(b, u->dropped);
    ml__put_u(b, u->first_time_ms);
    ml__put_u(b, u->last_time_ms);
    ml__put_u(b, u->live_bytes);
    ml__put_u(b, u->peak_bytes);
    ml__put_u(b, u->peak_time_ms);
    ml__put_u(b, u->pinned_live_bytes);
    ml__put_u(b, u->pinned_peak_bytes);
    ml__put_u(b, u->contexts_destroyed);
    ml__put_u(b, g->have_time);
    ml__put_u(b, g->corr);
    ml__put_u(b, ML_GPU_KIND_COUNT_);

    ml__put_u(b, g->ndevs);
    for (size_t i = 0; i < g->ndevs; i++) {
        const gdev_t *d = &g->devs[i];
        const ml_gpu_device_t *p = &d->pub;
        ml__put_s(b, p->device);
        ml__put_u(b, p->alloc_calls);
        ml__put_u(b, p->free_calls);
        ml__put_u(b, p->bytes_allocated);
        ml__put_u(b, p->live_bytes);
        ml__put_u(b, p->live_blocks);
        ml__put_u(b, p->peak_bytes);
        ml__put_u(b, p->peak_blocks);
        ml__put_u(b, p->peak_time_ms);
        ml__put_u(b, p->leaked_bytes);
        ml__put_u(b, p->leaked_blocks);
        ml__put_u(b, p->ctx_destroy_bytes);
        ml__put_u(b, p->ctx_destroy_blocks);
        ml__put_u(b, p->pinned_live_bytes);
        ml__put_u(b, p->pinned_peak_bytes);
        ml__put_u(b, p->pinned_leaked_bytes);
        ml__put_u(b, p->pinned_bytes_allocated);
        ml__put_u(b, p->pinned_alloc_calls);
        ml__put_u(b, p->pinned_free_calls);
        ml__put_u(b, p->unknown_frees);
        ml__put_u(b, p->failed_frees);
        ml__put_u(b, p->empty_cache_cycles);
        ml__put_u(b, p->pool_trims);
        for (int k = 0; k < ML_GPU_KIND_COUNT_; k++) {
            const ml_gpu_kind_stats_t *s = &p->kinds[k];
            ml__put_u(b, s->alloc_calls);
            ml__put_u(b, s->free_calls);
            ml__put_u(b, s->bytes_allocated);
            ml__put_u(b, s->live_bytes);
            ml__put_u(b, s->live_blocks);
            ml__put_u(b, s->peak_bytes);
            ml__put_u(b, s->leaked_bytes);
            ml__put_u(b, s->leaked_blocks);
            ml__put_u(b, d->kind_ctx_bytes[k]);
            ml__put_u(b, d->kind_ctx_blocks[k]);
        }
        put_gfrag(b, &p->frag_peak);
        put_gfrag(b, &p->frag_now);
        for (int c = 0; c < ML_GPU_SIZE_CLASSES; c++) {
            ml__put_u(b, p->size_count[c]);
            ml__put_u(b, p->size_bytes[c]);
        }
        ml__put_u(b, d->peak_dirty);
        ml__put_u(b, d->pinned_ctx_bytes);
        ml__put_u(b, d->in_burst);
        ml__put_u(b, d->burst_counted);
        ml__put_u(b, d->drained);
        ml__put_u(b, d->trim_pending);
        ml__put_u(b, d->burst_frees);
        ml__put_u(b, d->burst_start);
        ml__put_u(b, d->drain_level);
        ml__put_u(b, d->tl_width);
        ml__put_u(b, d->ntl);
        for (size_t k = 0; k < d->ntl; k++) {
            ml__put_u(b, d->tl[k].time_ms);
            ml__put_u(b, d->tl[k].max_bytes);
            ml__put_u(b, d->tl[k].last_bytes);
        }
        ml__put_u(b, d->peak_corr);
        ml__put_u(b, p->pool_records);
        ml__put_u(b, p->npools);
        for (uint32_t k = 0; k < p->npools; k++) put_gpool(b, &d->pools[k]);
    }

    ml__put_u(b, g->nsites);
    for (uint32_t i = 0; i < g->nsites; i++) {
        const gsite_t *s = &g->sites[i];
        const ml_gpu_site_t *p = &s->pub;
        ml__put_u(b, s->dev);
        ml__put_u(b, p->stack);
        ml__put_u(b, p->kind);
        ml__put_u(b, p->alloc_calls);
        ml__put_u(b, p->bytes_allocated);
        ml__put_u(b, p->frees);
        ml__put_u(b, p->live_bytes);
        ml__put_u(b, p->live_blocks);
        ml__put_u(b, p->peak_bytes);
        ml__put_u(b, p->peak_blocks);
        ml__put_u(b, p->leaked_bytes);
        ml__put_u(b, p->leaked_blocks);
        ml__put_u(b, p->ctx_destroy_bytes);
        ml__put_u(b, p->lifetime_ms_sum);
        ml__put_u(b, p->min_size);
        ml__put_u(b, p->max_size);
        ml__put_u(b, p->top_size);
        ml__put_u(b, p->top_size_count);
        ml__put_u(b, p->distinct_sizes);
        for (uint32_t k = 0; k < p->distinct_sizes && k < ML_GPU_SITE_SIZES; k++) {
            ml__put_u(b, s->sizes[k]);
            ml__put_u(b, s->size_counts[k]);
        }
        ml__put_u(b, s->many_sizes);
    }

    /* The live blocks in slot order, each slot as the distance from the
     * last one, so the restored map is this one slot for slot. */
    ml__put_u(b, g->live.cap);
    ml__put_u(b, g->live.count);
    uint64_t n = 0, prev = 0;
    for (uint64_t i = 0; i < g->live.cap && n < g->live.count; i++) {
        if (!g->live.e[i].space) continue;
        ml__put_u(b, i - prev);
        prev = i;
        put_gblock(b, &g->live.e[i]);
        n++;
    }
    ml__put_u(b, g->stash_next);
    for (uint32_t i = 0; i < STASH; i++) {
        if (!g->stash[i].space) {
            ml__put_u(b, 0);
            continue;
        }
        put_gblock(b, &g->stash[i]);
    }
    ml__put_u(b, GPU_SNAP_MAGIC);
    return b->oom ? -ENOMEM : 0;
}

/* The live counters must be what the live blocks add up to. */
static void check_live_sums(ml__ibuf_t *b, const ml_gpu_t *g) {
    size_t nd = g->ndevs;
    uint64_t *sum =
        calloc(nd * (4 + 2 * ML_GPU_KIND_COUNT_) + 2 * (size_t)g->nsites + 1, sizeof *sum);
    if (!sum) return (void)ml__snap_bad(b, "out of memory");
    uint64_t *dev = sum, *kind = sum + 4 * nd, *site = kind + 2 * ML_GPU_KIND_COUNT_ * nd;
    for (uint64_t i = 0; i < g->live.cap; i++) {
        const gblock_t *e = &g->live.e[i];
        if (!e->space) continue;
        int cls = bytes_class(e->kind, e->flags);
        if (cls == B_DEVICE) dev[4 * e->dev] += e->size, dev[4 * e->dev + 1]++;
        if (cls == B_PINNED) dev[4 * e->dev + 2] += e->size;
        kind[2 * (e->dev * ML_GPU_KIND_COUNT_ + e->kind)] += e->size;
        kind[2 * (e->dev * ML_GPU_KIND_COUNT_ + e->kind) + 1]++;
        site[2 * e->site] += e->size;
        site[2 * e->site + 1]++;
    }
    uint64_t all = 0, pinned = 0;
    bool ok = true;
    for (size_t i = 0; i < nd && ok; i++) {
        const ml_gpu_device_t *p = &g->devs[i].pub;
        ok = p->live_bytes == dev[4 * i] && p->live_blocks == dev[4 * i + 1] &&
             p->pinned_live_bytes == dev[4 * i + 2];
        for (int k = 0; k < ML_GPU_KIND_COUNT_ && ok; k++)
            ok = p->kinds[k].live_bytes == kind[2 * (i * ML_GPU_KIND_COUNT_ + k)] &&
                 p->kinds[k].live_blocks == kind[2 * (i * ML_GPU_KIND_COUNT_ + k) + 1];
        all += p->live_bytes;
        pinned += p->pinned_live_bytes;
    }
    for (uint32_t i = 0; i < g->nsites && ok; i++)
        ok = g->sites[i].pub.live_bytes == site[2 * i] &&
             g->sites[i].pub.live_blocks == site[2 * i + 1];
    if (ok) ok = g->sum.live_bytes == all && g->sum.pinned_live_bytes == pinned;
    free(sum);
    if (!ok) ml__snap_bad(b, "the GPU live counters do not match the live blocks");
}

/* What refresh_derived() keeps must follow from the rest. */
static bool derived_ok(const gdev_t *d) {
    const ml_gpu_device_t *p = &d->pub;
    if (p->leaked_bytes != p->live_bytes + p->ctx_destroy_bytes ||
        p->leaked_blocks != p->live_blocks + p->ctx_destroy_blocks ||
        p->pinned_leaked_bytes != p->pinned_live_bytes + d->pinned_ctx_bytes)
        return false;
    for (int k = 0; k < ML_GPU_KIND_COUNT_; k++) {
        bool va_only = k == ML_GPU_KIND_VMM_RESERVE || k == ML_GPU_KIND_VMM_MAP;
        uint64_t bytes = va_only ? 0 : p->kinds[k].live_bytes + d->kind_ctx_bytes[k];
        if (p->kinds[k].leaked_bytes != bytes ||
            p->kinds[k].leaked_blocks != p->kinds[k].live_blocks + d->kind_ctx_blocks[k])
            return false;
    }
    return true;
}

static void restore_gpu(ml__ibuf_t *b, ml_gpu_t *g) {
    if (ml__get_u(b) != GPU_SNAP_MAGIC)
        return (void)ml__snap_bad(b, "the GPU state has no magic number");
    ml_gpu_summary_t *u = &g->sum;
    u->ndevices = ml__get_max(b, 255, "too many GPU devices");
    u->gpu_records = ml__get_u(b);
    u->dropped = ml__get_u(b);
    u->first_time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU time is out of range");
    u->last_time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU time is out of range");
    u->live_bytes = ml__get_u(b);
    u->peak_bytes = ml__get_u(b);
    u->peak_time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU time is out of range");
    u->pinned_live_bytes = ml__get_u(b);
    u->pinned_peak_bytes = ml__get_u(b);
    u->contexts_destroyed = ml__get_u(b);
    g->have_time = ml__get_max(b, 1, "bad flag");
    g->corr = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU correlation id is out of range");
    if (ml__get_u(b) != (uint64_t)ML_GPU_KIND_COUNT_)
        return (void)ml__snap_bad(b, "another set of GPU kinds");

    /* A device takes at least 230 bytes (its counters, one byte each). */
    uint64_t ndevs = ml__get_count(b, 230, "more GPU devices than the snapshot holds");
    if (!b->bad && ndevs != u->ndevices) ml__snap_bad(b, "the GPU device count does not match");
    if (b->bad) return;
    if (ndevs) {
        g->devs = calloc(ndevs, sizeof *g->devs);
        if (!g->devs) return (void)ml__snap_bad(b, "out of memory");
    }
    for (size_t i = 0; i < ndevs && !b->bad; i++) {
        gdev_t *d = &g->devs[g->ndevs++];
        ml__treap_init(&d->va);
        ml_gpu_device_t *p = &d->pub;
        int64_t ordinal = ml__get_s(b);
        if (ordinal < INT32_MIN || ordinal > INT32_MAX || (i > 0 && ordinal <= d[-1].pub.device))
            return (void)ml__snap_bad(b, "the GPU devices are not in ordinal order");
        p->device = (int32_t)ordinal;
        p->alloc_calls = ml__get_u(b);
        p->free_calls = ml__get_u(b);
        p->bytes_allocated = ml__get_u(b);
        p->live_bytes = ml__get_u(b);
        p->live_blocks = ml__get_u(b);
        p->peak_bytes = ml__get_u(b);
        p->peak_blocks = ml__get_u(b);
        p->peak_time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU time is out of range");
        p->leaked_bytes = ml__get_u(b);
        p->leaked_blocks = ml__get_u(b);
        p->ctx_destroy_bytes = ml__get_u(b);
        p->ctx_destroy_blocks = ml__get_u(b);
        p->pinned_live_bytes = ml__get_u(b);
        p->pinned_peak_bytes = ml__get_u(b);
        p->pinned_leaked_bytes = ml__get_u(b);
        p->pinned_bytes_allocated = ml__get_u(b);
        p->pinned_alloc_calls = ml__get_u(b);
        p->pinned_free_calls = ml__get_u(b);
        p->unknown_frees = ml__get_u(b);
        p->failed_frees = ml__get_u(b);
        p->empty_cache_cycles =
            (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU counter is out of range");
        p->pool_trims = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU counter is out of range");
        for (int k = 0; k < ML_GPU_KIND_COUNT_; k++) {
            ml_gpu_kind_stats_t *s = &p->kinds[k];
            s->alloc_calls = ml__get_u(b);
            s->free_calls = ml__get_u(b);
            s->bytes_allocated = ml__get_u(b);
            s->live_bytes = ml__get_u(b);
            s->live_blocks = ml__get_u(b);
            s->peak_bytes = ml__get_u(b);
            s->leaked_bytes = ml__get_u(b);
            s->leaked_blocks = ml__get_u(b);
            d->kind_ctx_bytes[k] = ml__get_u(b);
            d->kind_ctx_blocks[k] = ml__get_u(b);
        }
        get_gfrag(b, &p->frag_peak);
        get_gfrag(b, &p->frag_now);
        for (int c = 0; c < ML_GPU_SIZE_CLASSES; c++) {
            p->size_count[c] = ml__get_u(b);
            p->size_bytes[c] = ml__get_u(b);
        }
        d->peak_dirty = ml__get_max(b, 1, "bad flag");
        d->pinned_ctx_bytes = ml__get_u(b);
        d->in_burst = ml__get_max(b, 1, "bad flag");
        d->burst_counted = ml__get_max(b, 1, "bad flag");
        d->drained = ml__get_max(b, 1, "bad flag");
        d->trim_pending = ml__get_max(b, 1, "bad flag");
        d->burst_frees = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU counter is out of range");
        d->burst_start = ml__get_u(b);
        d->drain_level = ml__get_u(b);
        /* The timeline's interval starts at 1 ms and only doubles. */
        uint64_t width = ml__get_max(b, 1ull << 31, "a GPU timeline interval is out of range");
        if (!b->bad && (!width || (width & (width - 1))))
            return (void)ml__snap_bad(b, "a GPU timeline interval is not a power of two");
        d->tl_width = (uint32_t)width;
        uint64_t ntl = ml__get_count(b, 3, "a GPU timeline is longer than the snapshot");
        if (!b->bad && ntl > ML_GPU_TIMELINE_MAX) ml__snap_bad(b, "a GPU timeline is too long");
        if (b->bad) return;
        if (ntl) {
            d->tl = malloc(ML_GPU_TIMELINE_MAX * sizeof *d->tl); /* tl_add's capacity */
            if (!d->tl) return (void)ml__snap_bad(b, "out of memory");
        }
        for (size_t k = 0; k < ntl && !b->bad; k++) {
            ml_gpu_point_t *q = &d->tl[d->ntl++];
            q->time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU time is out of range");
            q->max_bytes = ml__get_u(b);
            q->last_bytes = ml__get_u(b);
        }
        d->peak_corr = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU correlation id is out of range");
        p->pool_records = ml__get_u(b);
        /* A pool takes at least 18 bytes. */
        uint64_t npools = ml__get_count(b, 18, "more GPU pools than the snapshot holds");
        if (!b->bad && npools > UINT32_MAX / 2) ml__snap_bad(b, "too many GPU pools");
        if (b->bad) return;
        if (npools) {
            d->pools = calloc(npools, sizeof *d->pools);
            if (!d->pools) return (void)ml__snap_bad(b, "out of memory");
            d->pools_cap = (uint32_t)npools;
        }
        for (uint32_t k = 0; k < npools && !b->bad; k++) get_gpool(b, p->device, &d->pools[k]);
        p->npools = (uint32_t)npools;
        ml__gpu_pool_sums(d); /* the device's at-peak pool sums follow from its pools */
        if (!b->bad && !derived_ok(d)) ml__snap_bad(b, "a GPU device's leaks do not add up");
    }
    if (b->bad) return;

    /* A site takes at least 20 bytes. */
    uint64_t nsites = ml__get_count(b, 20, "more GPU sites than the snapshot holds");
    if (b->bad) return;
    if (nsites) {
        g->sites = calloc(nsites, sizeof *g->sites);
        if (!g->sites) return (void)ml__snap_bad(b, "out of memory");
        g->sites_cap = (uint32_t)nsites;
    }
    for (uint32_t i = 0; i < nsites && !b->bad; i++) {
        gsite_t *s = &g->sites[i];
        ml_gpu_site_t *p = &s->pub;
        s->dev = (uint32_t)ml__get_max(b, g->ndevs ? g->ndevs - 1 : 0,
                                       "a GPU site names an unknown device");
        if (!b->bad && !g->ndevs) ml__snap_bad(b, "a GPU site without devices");
        if (b->bad) return;
        p->device = g->devs[s->dev].pub.device;
        p->stack = (uint32_t)ml__get_max(b, UINT32_MAX, "a GPU site's stack is out of range");
        p->kind =
            (uint8_t)ml__get_max(b, ML_GPU_KIND_COUNT_ - 1, "a GPU site's kind is out of range");
        p->alloc_calls = ml__get_u(b);
        p->bytes_allocated = ml__get_u(b);
        p->frees = ml__get_u(b);
        p->live_bytes = ml__get_u(b);
        p->live_blocks = ml__get_u(b);
        p->peak_bytes = ml__get_u(b);
        p->peak_blocks = ml__get_u(b);
        p->leaked_bytes = ml__get_u(b);
        p->leaked_blocks = ml__get_u(b);
        p->ctx_destroy_bytes = ml__get_u(b);
        p->lifetime_ms_sum = ml__get_u(b);
        p->min_size = ml__get_u(b);
        p->max_size = ml__get_u(b);
        p->top_size = ml__get_u(b);
        p->top_size_count = ml__get_u(b);
        p->distinct_sizes =
            (uint32_t)ml__get_max(b, ML_GPU_SITE_SIZES, "a GPU site has too many sizes");
        for (uint32_t k = 0; k < p->distinct_sizes && !b->bad; k++) {
            s->sizes[k] = ml__get_u(b);
            s->size_counts[k] = ml__get_u(b);
        }
        s->many_sizes = ml__get_max(b, 1, "bad flag");
        if (!b->bad && s->many_sizes && p->distinct_sizes < ML_GPU_SITE_SIZES)
            ml__snap_bad(b, "a GPU site's sizes do not add up");
        if (b->bad) return;
        /* Index it as site_get() does; a second site with its key is damage. */
        bool existed;
        gsite_slot_t *e = ml__gsite_index_put(&g->site_index,
                                              ml__gpu_site_key(p->device, p->stack, p->kind), &existed);
        if (!e) return (void)ml__snap_bad(b, "out of memory");
        if (existed) return (void)ml__snap_bad(b, "two GPU sites with one key");
        e->idx = g->nsites++;
    }

    uint64_t cap = ml__get_max(b, 1ull << 32, "the GPU live map is too large");
    uint64_t count = ml__get_count(b, 13, "the GPU live map holds more blocks than the snapshot");
    if (b->bad) return;
    if ((cap & (cap - 1)) || count * 4 > cap * 3 || (cap && cap < 256))
        return (void)ml__snap_bad(b, "the GPU live map's capacity does not fit its blocks");
    if (cap) {
        g->live.e = calloc(cap, sizeof *g->live.e);
        if (!g->live.e) return (void)ml__snap_bad(b, "out of memory");
        g->live.cap = cap;
    }
    uint64_t slot = 0;
    for (uint64_t i = 0; i < count && !b->bad; i++) {
        uint64_t d = ml__get_u(b);
        if ((i > 0 && d == 0) || d >= cap - slot)
            return (void)ml__snap_bad(b, "the GPU blocks' slots are not increasing");
        slot += d;
        gblock_t *e = &g->live.e[slot];
        get_gblock(b, g, e);
        g->live.count++;
    }
    if (b->bad) return;
    /* Every block must be where a lookup finds it: no two with one key, no
     * empty slot between a block and its home. */
    for (uint64_t i = 0; i < g->live.cap; i++) {
        const gblock_t *e = &g->live.e[i];
        if (e->space && ml__gmap_find(&g->live, e->space - 1, e->key) != e)
            return (void)ml__snap_bad(b, "a GPU block is not where its map would look");
    }
    check_live_sums(b, g);

    g->stash_next = (uint32_t)ml__get_max(b, UINT32_MAX, "bad stash position");
    for (uint32_t i = 0; i < STASH && !b->bad; i++) {
        /* An empty entry is its space (0) alone. */
        size_t at = b->pos;
        if (ml__get_u(b) == 0) continue;
        b->pos = at;
        get_gblock(b, g, &g->stash[i]);
    }
    if (!b->bad && ml__get_u(b) != GPU_SNAP_MAGIC)
        ml__snap_bad(b, "the GPU state does not end where it should");
    if (b->bad) return;

    /* The devices' live ranges, as add_live() inserted them. */
    for (uint64_t i = 0; i < g->live.cap; i++) {
        const gblock_t *e = &g->live.e[i];
        if (e->space && in_va(e->kind) && ml__treap_insert(&g->devs[e->dev].va, e->key, e->size) < 0)
            return (void)ml__snap_bad(b, "out of memory");
    }
}

void ml__gpu_restore(ml_gpu_t **out, ml__ibuf_t *b) {
    *out = NULL;
    ml_gpu_t *g = calloc(1, sizeof *g);
    if (!g) return (void)ml__snap_bad(b, "out of memory");
    restore_gpu(b, g);
    if (b->bad) {
        ml__gpu_free(g);
        return;
    }
    *out = g;
}
