/* gpu.c - GPU memory analysis over the CUPTI collector's records: the
 * streaming pass and the queries.
 *
 * See ml_gpu.h for the accounting rules and docs/gpu.md for the reasons.
 * The streaming pass keeps:
 *   - a live map of GPU allocations keyed by (key space, address or handle):
 *     device pointers, pinned host pointers, registered host ranges, VMM
 *     handles, VMM reservations, VMM mappings and arrays are separate spaces,
 *     since handles and addresses may collide;
 *   - per device: counters, the peak, a bounded timeline and an augmented
 *     treap of live address ranges (gpu_treap.c) for fragmentation at any
 *     moment;
 *   - per (device, stack, kind) site: counters, live bytes and the lazily
 *     taken snapshot of what it held at its device's peak.
 * The advice rules (gpu_advice.c), the snapshot (gpu_snapshot.c) and what
 * needs the session (gpu_session.c) live beside it.
 */
#define _GNU_SOURCE /* qsort_r */
#include "gpu_internal.h"
#include "ml_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Live map                                                                  */
/* ------------------------------------------------------------------------- */

/* Not the analysis layer's map (ml_map.h): the key is two words (space,
 * address), and the GPU snapshot saves every block's slot under this hash
 * ("GPU1"), so a change of either would change the snapshot format. */
static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static inline uint64_t block_hash(int space, uint64_t key) {
    return mix(key ^ ((uint64_t)space << 56) ^ (uint64_t)space);
}

static int gmap_grow(gmap_t *m) {
    uint64_t ncap = m->cap ? m->cap * 2 : 256;
    gblock_t *n = calloc(ncap, sizeof *n);
    if (!n) return -ENOMEM;
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!m->e[i].space) continue;
        uint64_t j = block_hash(m->e[i].space - 1, m->e[i].key) & (ncap - 1);
        while (n[j].space) j = (j + 1) & (ncap - 1);
        n[j] = m->e[i];
    }
    free(m->e);
    m->e = n;
    m->cap = ncap;
    return 0;
}

gblock_t *ml__gmap_find(const gmap_t *m, int space, uint64_t key) {
    if (!m->cap) return NULL;
    for (uint64_t i = block_hash(space, key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        gblock_t *e = &m->e[i];
        if (!e->space) return NULL;
        if (e->space == space + 1 && e->key == key) return e;
    }
}

/* Inserts b (not present). Returns the slot or NULL when out of memory. */
static gblock_t *gmap_put(gmap_t *m, const gblock_t *b) {
    if ((m->count + 1) * 4 > m->cap * 3 && gmap_grow(m) < 0) return NULL;
    uint64_t i = block_hash(b->space - 1, b->key) & (m->cap - 1);
    while (m->e[i].space) i = (i + 1) & (m->cap - 1);
    m->e[i] = *b;
    m->count++;
    return &m->e[i];
}

static void gmap_remove(gmap_t *m, gblock_t *e) {
    uint64_t mask = m->cap - 1;
    uint64_t i = (uint64_t)(e - m->e);
    m->count--;
    for (uint64_t j = (i + 1) & mask; m->e[j].space; j = (j + 1) & mask) {
        uint64_t home = block_hash(m->e[j].space - 1, m->e[j].key) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->e[i] = m->e[j];
            i = j;
        }
    }
    m->e[i].space = 0;
}

/* ------------------------------------------------------------------------- */
/* Devices and sites                                                         */
/* ------------------------------------------------------------------------- */

/* Index of the device with this ordinal, created in ordinal order. */
static int dev_index(ml_gpu_t *g, int32_t ordinal) {
    size_t i = 0;
    for (; i < g->ndevs; i++) {
        if (g->devs[i].pub.device == ordinal) return (int)i;
        if (g->devs[i].pub.device > ordinal) break;
    }
    if (g->ndevs >= 255) return -1;
    gdev_t *p = realloc(g->devs, (g->ndevs + 1) * sizeof *p);
    if (!p) return -1;
    g->devs = p;
    /* Keep ordinal order; blocks and sites refer to devices by index, so
     * renumber theirs when a device is inserted in the middle (rare: a
     * device seen after a higher one). */
    memmove(&p[i + 1], &p[i], (g->ndevs - i) * sizeof *p);
    g->ndevs++;
    gdev_t *d = &p[i];
    memset(d, 0, sizeof *d);
    d->pub.device = ordinal;
    d->tl_width = 1;
    ml__treap_init(&d->va);
    for (uint64_t k = 0; k < g->live.cap; k++)
        if (g->live.e[k].space && g->live.e[k].dev >= i) g->live.e[k].dev++;
    for (uint32_t k = 0; k < g->nsites; k++)
        if (g->sites[k].dev >= i) g->sites[k].dev++;
    for (uint32_t k = 0; k < STASH; k++)
        if (g->stash[k].space && g->stash[k].dev >= i) g->stash[k].dev++;
    g->sum.ndevices = g->ndevs;
    return (int)i;
}

/* Site index for (device, stack, kind); UINT32_MAX when out of memory. */
static uint32_t site_get(ml_gpu_t *g, uint32_t dev, uint32_t stack, unsigned kind) {
    bool existed;
    gsite_slot_t *e = ml__gsite_index_put(&g->site_index,
                                          ml__gpu_site_key(g->devs[dev].pub.device, stack, kind),
                                          &existed);
    if (!e) return UINT32_MAX;
    if (existed) return e->idx;
    if (ml_grow((void **)&g->sites, &g->sites_cap, (uint64_t)g->nsites + 1, sizeof *g->sites, 0) < 0) {
        ml__gsite_index_remove(&g->site_index, e);
        return UINT32_MAX;
    }
    e->idx = g->nsites;
    gsite_t *s = &g->sites[g->nsites];
    memset(s, 0, sizeof *s);
    s->dev = dev;
    s->pub.device = g->devs[dev].pub.device;
    s->pub.stack = stack;
    s->pub.kind = (uint8_t)kind;
    return g->nsites++;
}

static void site_size(gsite_t *s, uint64_t size) {
    if (!s->pub.alloc_calls || size < s->pub.min_size) s->pub.min_size = size;
    if (size > s->pub.max_size) s->pub.max_size = size;
    for (uint32_t i = 0; i < ML_GPU_SITE_SIZES; i++) {
        if (i == s->pub.distinct_sizes) {
            s->sizes[i] = size;
            s->size_counts[i] = 1;
            s->pub.distinct_sizes++;
            return;
        }
        if (s->sizes[i] == size) {
            s->size_counts[i]++;
            return;
        }
    }
    s->many_sizes = true;
}

/* ------------------------------------------------------------------------- */
/* Timeline                                                                  */
/* ------------------------------------------------------------------------- */

static void tl_add(gdev_t *d, uint32_t time_ms, uint64_t bytes) {
    uint32_t start = time_ms - time_ms % d->tl_width;
    if (d->ntl && start <= d->tl[d->ntl - 1].time_ms + d->tl_width - 1 &&
        time_ms < d->tl[d->ntl - 1].time_ms + d->tl_width) {
        ml_gpu_point_t *p = &d->tl[d->ntl - 1];
        if (bytes > p->max_bytes) p->max_bytes = bytes;
        p->last_bytes = bytes;
        return;
    }
    if (!d->tl) {
        d->tl = malloc(ML_GPU_TIMELINE_MAX * sizeof *d->tl);
        if (!d->tl) return;
    }
    if (d->ntl == ML_GPU_TIMELINE_MAX) {
        /* Halve the resolution: merge neighbours, keeping each pair's
         * largest value (the peak never disappears) and its last. */
        size_t k = 0;
        for (size_t i = 0; i < d->ntl; i += 2, k++) {
            ml_gpu_point_t a = d->tl[i];
            if (i + 1 < d->ntl) {
                const ml_gpu_point_t *b = &d->tl[i + 1];
                if (b->max_bytes > a.max_bytes) a.max_bytes = b->max_bytes;
                a.last_bytes = b->last_bytes;
            }
            d->tl[k] = a;
        }
        d->ntl = k;
        d->tl_width *= 2;
        tl_add(d, time_ms, bytes);
        return;
    }
    d->tl[d->ntl++] = (ml_gpu_point_t){start, bytes, bytes};
}

/* ------------------------------------------------------------------------- */
/* Feeding                                                                   */
/* ------------------------------------------------------------------------- */

static uint64_t total_device_bytes(const ml_gpu_t *g) {
    uint64_t n = 0;
    for (size_t i = 0; i < g->ndevs; i++) n += g->devs[i].pub.live_bytes;
    return n;
}

/* Before a device's bytes go down for the first time after a new peak, the
 * sites' live bytes are the peak's: keep them. */
static void settle_peak(ml_gpu_t *g, uint32_t dev) {
    gdev_t *d = &g->devs[dev];
    if (!d->peak_dirty) return;
    d->peak_dirty = false;
    for (uint32_t i = 0; i < g->nsites; i++) {
        gsite_t *s = &g->sites[i];
        if (s->dev != dev) continue;
        s->pub.peak_bytes = s->pub.live_bytes;
        s->pub.peak_blocks = s->pub.live_blocks;
    }
}

/* The fields of a device that follow from others, kept current after every
 * record so that readers (the live viewer's thread among them) only read. */
static void refresh_derived(const ml_gpu_t *g, gdev_t *d) {
    ml_gpu_device_t *p = &d->pub;
    p->leaked_bytes = p->live_bytes + p->ctx_destroy_bytes;
    p->leaked_blocks = p->live_blocks + p->ctx_destroy_blocks;
    p->pinned_leaked_bytes = p->pinned_live_bytes + d->pinned_ctx_bytes;
    for (int k = 0; k < ML_GPU_KIND_COUNT_; k++) {
        p->kinds[k].leaked_bytes = p->kinds[k].live_bytes + d->kind_ctx_bytes[k];
        p->kinds[k].leaked_blocks = p->kinds[k].live_blocks + d->kind_ctx_blocks[k];
    }
    /* The address-space kinds hold no memory: nothing of theirs leaks bytes. */
    p->kinds[ML_GPU_KIND_VMM_RESERVE].leaked_bytes = 0;
    p->kinds[ML_GPU_KIND_VMM_MAP].leaked_bytes = 0;
    ml__treap_frag(&d->va, g->sum.last_time_ms, &p->frag_now);
}

static void update_totals(ml_gpu_t *g, uint32_t time_ms, ml_totals_t *t) {
    uint64_t pinned = 0;
    for (size_t i = 0; i < g->ndevs; i++) {
        pinned += g->devs[i].pub.pinned_live_bytes;
        refresh_derived(g, &g->devs[i]);
    }
    g->sum.live_bytes = total_device_bytes(g);
    g->sum.pinned_live_bytes = pinned;
    if (g->sum.live_bytes > g->sum.peak_bytes) {
        g->sum.peak_bytes = g->sum.live_bytes;
        g->sum.peak_time_ms = time_ms;
    }
    if (pinned > g->sum.pinned_peak_bytes) g->sum.pinned_peak_bytes = pinned;
    if (t) {
        t->gpu_bytes = g->sum.live_bytes;
        if (t->gpu_bytes > t->peak_gpu_bytes) t->peak_gpu_bytes = t->gpu_bytes;
    }
}

/* ------------------------------------------------------------------------- */
/* Memory pools                                                              */
/* ------------------------------------------------------------------------- */

void ml__gpu_pool_sums(gdev_t *d) {
    ml_gpu_device_t *p = &d->pub;
    p->pool_reserved_at_peak_bytes = p->pool_used_at_peak_bytes = 0;
    for (uint32_t i = 0; i < p->npools; i++) {
        p->pool_reserved_at_peak_bytes += d->pools[i].pub.reserved_at_peak_bytes;
        p->pool_used_at_peak_bytes += d->pools[i].pub.used_at_peak_bytes;
    }
    p->pool_unused_at_peak_bytes = p->pool_reserved_at_peak_bytes > p->pool_used_at_peak_bytes
                                       ? p->pool_reserved_at_peak_bytes - p->pool_used_at_peak_bytes
                                       : 0;
}

/* The device reached a new peak with the call numbered `corr`: each pool's
 * latest state so far is its state at the peak, unless that state is from a
 * later call (then a record up to `corr` may still arrive). */
static void pools_at_peak(gdev_t *d, uint32_t corr) {
    d->peak_corr = corr;
    if (!d->pub.npools) return;
    for (uint32_t i = 0; i < d->pub.npools; i++) {
        gpool_t *q = &d->pools[i];
        if (!q->have_cur || q->cur_corr > corr) continue;
        q->have_peak = true;
        q->peak_corr = q->cur_corr;
        q->pub.reserved_at_peak_bytes = q->pub.reserved_at_exit_bytes;
        q->pub.used_at_peak_bytes = q->pub.used_at_exit_bytes;
    }
    ml__gpu_pool_sums(d);
}

static gpool_t *pool_get(gdev_t *d, uint64_t address) {
    for (uint32_t i = 0; i < d->pub.npools; i++)
        if (d->pools[i].pub.address == address) return &d->pools[i];
    if (d->pub.npools == d->pools_cap) {
        uint32_t cap = d->pools_cap ? d->pools_cap * 2 : 4;
        gpool_t *p = realloc(d->pools, cap * sizeof *p);
        if (!p) return NULL;
        d->pools = p;
        d->pools_cap = cap;
    }
    gpool_t *q = &d->pools[d->pub.npools++];
    memset(q, 0, sizeof *q);
    q->pub.device = d->pub.device;
    q->pub.address = address;
    return q;
}

static void on_pool_state(ml_gpu_t *g, const ml_record_t *r) {
    const typeof(r->u.gpu) *e = &r->u.gpu;
    int dev = dev_index(g, e->device);
    if (dev < 0) {
        g->sum.dropped++;
        return;
    }
    gdev_t *d = &g->devs[dev];
    gpool_t *q = pool_get(d, e->ptr);
    if (!q) {
        g->sum.dropped++;
        return;
    }
    ml_gpu_pool_t *p = &q->pub;
    d->pub.pool_records++;
    if (e->flags & ML_GPU_F_POOL_IMPORTED) p->imported = true;
    if (e->flags & ML_GPU_F_POOL_MANAGED) p->managed = true;
    switch (e->kind) {
    case ML_GPU_POOL_CREATED:
        p->created++;
        p->explicit_pool = true;
        break;
    case ML_GPU_POOL_DESTROYED: p->destroyed++; break;
    case ML_GPU_POOL_TRIMMED: p->trims++; break;
    case ML_GPU_POOL_ALLOC: p->allocs++; break;
    case ML_GPU_POOL_RELEASE: p->releases++; break;
    default: break;
    }
    if (e->size > p->peak_reserved_bytes) p->peak_reserved_bytes = e->size;
    if (e->pool_used > p->peak_used_bytes) p->peak_used_bytes = e->pool_used;
    /* Arrival order: CUPTI completes a buffer's records in order. */
    if (q->have_cur && p->reserved_at_exit_bytes > 0 && e->size == 0) p->drops_to_zero++;
    if (!q->have_cur || e->correlation >= q->cur_corr) {
        q->have_cur = true;
        q->cur_corr = e->correlation;
        p->last_correlation = e->correlation;
        p->reserved_at_exit_bytes = e->size;
        p->used_at_exit_bytes = e->pool_used;
        p->release_threshold_bytes = e->pool_threshold;
    }
    /* The latest state at or before the call that made the device's peak. */
    if (d->pub.peak_bytes && e->correlation <= d->peak_corr &&
        (!q->have_peak || e->correlation >= q->peak_corr)) {
        q->have_peak = true;
        q->peak_corr = e->correlation;
        p->reserved_at_peak_bytes = e->size;
        p->used_at_peak_bytes = e->pool_used;
    }
    ml__gpu_pool_sums(d);
}

size_t ml_gpu_pools(const ml_gpu_t *g, size_t di, ml_gpu_pool_t *out, size_t max) {
    if (!g || di >= g->ndevs) return 0;
    const gdev_t *d = &g->devs[di];
    if (!out) return d->pub.npools;
    size_t n = 0;
    for (; n < d->pub.npools && n < max; n++) out[n] = d->pools[n].pub;
    return n;
}

static void add_live(ml_gpu_t *g, const gblock_t *b, uint32_t time_ms) {
    gdev_t *d = &g->devs[b->dev];
    ml_gpu_device_t *p = &d->pub;
    gsite_t *s = &g->sites[b->site];
    ml_gpu_kind_stats_t *k = &p->kinds[b->kind];
    k->live_bytes += b->size;
    k->live_blocks++;
    if (k->live_bytes > k->peak_bytes) k->peak_bytes = k->live_bytes;
    s->pub.live_bytes += b->size;
    s->pub.live_blocks++;
    if (in_va(b->kind) && ml__treap_insert(&d->va, b->key, b->size) < 0) g->sum.dropped++;
    switch (bytes_class(b->kind, b->flags)) {
    case B_DEVICE:
        p->live_bytes += b->size;
        p->live_blocks++;
        if (p->live_bytes > p->peak_bytes) {
            p->peak_bytes = p->live_bytes;
            p->peak_blocks = p->live_blocks;
            p->peak_time_ms = time_ms;
            ml__treap_frag(&d->va, time_ms, &p->frag_peak);
            d->peak_dirty = true;
            pools_at_peak(d, g->corr);
        }
        /* A re-allocation after a drain (or a pool trim) closes a cycle. */
        d->in_burst = false;
        d->burst_counted = false;
        if (d->drained && p->live_bytes * 2 >= d->drain_level) {
            p->empty_cache_cycles++;
            d->drained = false;
        }
        if (d->trim_pending) {
            p->empty_cache_cycles++;
            d->trim_pending = false;
        }
        tl_add(d, time_ms, p->live_bytes);
        break;
    case B_PINNED:
        p->pinned_live_bytes += b->size;
        if (p->pinned_live_bytes > p->pinned_peak_bytes) p->pinned_peak_bytes = p->pinned_live_bytes;
        break;
    default:
        break;
    }
}

/* Takes b's bytes out of the live counters (b stays in the map). */
static void sub_live(ml_gpu_t *g, const gblock_t *b, uint32_t time_ms) {
    gdev_t *d = &g->devs[b->dev];
    ml_gpu_device_t *p = &d->pub;
    gsite_t *s = &g->sites[b->site];
    int cls = bytes_class(b->kind, b->flags);
    if (cls == B_DEVICE) settle_peak(g, b->dev);
    p->kinds[b->kind].live_bytes -= b->size;
    p->kinds[b->kind].live_blocks--;
    s->pub.live_bytes -= b->size;
    s->pub.live_blocks--;
    if (in_va(b->kind)) ml__treap_remove(&d->va, b->key);
    if (cls == B_DEVICE) {
        p->live_bytes -= b->size;
        p->live_blocks--;
        tl_add(d, time_ms, p->live_bytes);
    } else if (cls == B_PINNED) {
        p->pinned_live_bytes -= b->size;
    }
}

static void remove_block(ml_gpu_t *g, gblock_t *e, uint32_t time_ms) {
    sub_live(g, e, time_ms);
    gmap_remove(&g->live, e);
}

/* The physical memory behind a VMM handle dies when it was released and its
 * last mapping is gone. */
static void vmm_unref(ml_gpu_t *g, uint64_t handle, uint32_t time_ms) {
    gblock_t *h = ml__gmap_find(&g->live, S_VMM_HANDLE, handle);
    if (!h) return;
    if (h->maps) h->maps--;
    if (!h->maps && h->released) remove_block(g, h, time_ms);
}

/* Counts one explicit free of block e (before it is removed). */
static void count_free(ml_gpu_t *g, const gblock_t *e, uint32_t time_ms) {
    gdev_t *d = &g->devs[e->dev];
    gsite_t *s = &g->sites[e->site];
    d->pub.free_calls++;
    d->pub.kinds[e->kind].free_calls++;
    if (bytes_class(e->kind, e->flags) == B_PINNED) d->pub.pinned_free_calls++;
    s->pub.frees++;
    s->pub.lifetime_ms_sum += time_ms >= e->time_ms ? time_ms - e->time_ms : 0;
    g->stash[g->stash_next++ % STASH] = *e;
}

/* empty_cache detection, at every explicit free of device bytes: a burst of
 * at least three frees in a row (no allocation between them) that takes the
 * device from >= 1 MiB to a quarter or less is a drain; allocating back to
 * half of the level before it closes a cycle (add_live). */
static void burst_free(gdev_t *d, uint64_t before) {
    if (!d->in_burst) {
        d->in_burst = true;
        d->burst_counted = false;
        d->burst_frees = 0;
        d->burst_start = before;
    }
    d->burst_frees++;
    if (!d->burst_counted && d->burst_frees >= 3 && d->burst_start >= ML__MIB &&
        d->pub.live_bytes * 4 <= d->burst_start) {
        d->burst_counted = true;
        d->drained = true;
        d->drain_level = d->burst_start;
    }
}

static void on_alloc(ml_gpu_t *g, const ml_record_t *r) {
    const typeof(r->u.gpu) *x = &r->u.gpu;
    if (x->kind >= ML_GPU_KIND_COUNT_) return;
    int space = space_of(x->kind);
    int32_t device = x->device;
    /* A mapping lives on the device of the memory it maps. */
    if (x->kind == ML_GPU_KIND_VMM_MAP) {
        const gblock_t *h = ml__gmap_find(&g->live, S_VMM_HANDLE, x->handle);
        if (h) device = g->devs[h->dev].pub.device;
    }
    int dev = dev_index(g, device);
    if (dev < 0) {
        g->sum.dropped++;
        return;
    }
    /* An address handed out again without a free we saw (the free happened
     * before injection, or in a context we did not follow): replace it. */
    gblock_t *old = ml__gmap_find(&g->live, space, x->ptr);
    if (old) {
        if (old->kind == ML_GPU_KIND_VMM_MAP) vmm_unref(g, old->handle, r->time_ms);
        old = ml__gmap_find(&g->live, space, x->ptr);
        if (old) remove_block(g, old, r->time_ms);
    }
    uint32_t site = site_get(g, (uint32_t)dev, x->stack, x->kind);
    if (site == UINT32_MAX) {
        g->sum.dropped++;
        return;
    }
    gdev_t *d = &g->devs[dev];
    int cls = bytes_class(x->kind, x->flags);
    d->pub.alloc_calls++;
    d->pub.kinds[x->kind].alloc_calls++;
    d->pub.kinds[x->kind].bytes_allocated += x->size;
    if (cls != B_NONE) {
        d->pub.bytes_allocated += x->size;
        unsigned c = 0;
        while (c < ML_GPU_SIZE_CLASSES - 1 && (1ull << c) < x->size) c++;
        d->pub.size_count[c]++;
        d->pub.size_bytes[c] += x->size;
    }
    if (cls == B_PINNED) {
        d->pub.pinned_alloc_calls++;
        d->pub.pinned_bytes_allocated += x->size;
    }
    gsite_t *s = &g->sites[site];
    site_size(s, x->size);
    s->pub.alloc_calls++;
    s->pub.bytes_allocated += x->size;

    gblock_t b;
    memset(&b, 0, sizeof b);
    b.key = x->ptr;
    b.size = x->size;
    b.handle = x->handle;
    b.site = site;
    b.context = x->context;
    b.time_ms = r->time_ms;
    b.flags = x->flags;
    b.space = (uint8_t)(space + 1);
    b.kind = x->kind;
    b.dev = (uint8_t)dev;
    if (!gmap_put(&g->live, &b)) {
        g->sum.dropped++;
        return;
    }
    if (x->kind == ML_GPU_KIND_VMM_MAP) {
        gblock_t *h = ml__gmap_find(&g->live, S_VMM_HANDLE, x->handle);
        if (h) h->maps++;
    }
    add_live(g, &b, r->time_ms);
}

/* Frees one block found live; VMM semantics included. */
static void free_block(ml_gpu_t *g, gblock_t *e, uint32_t time_ms) {
    gdev_t *d = &g->devs[e->dev];
    int cls = bytes_class(e->kind, e->flags);
    count_free(g, e, time_ms);
    if (e->kind == ML_GPU_KIND_VMM_PHYSICAL) {
        e->released = 1;
        if (e->maps) return; /* lives until its last mapping is gone */
    }
    uint64_t before = d->pub.live_bytes;
    uint64_t handle = e->handle;
    bool is_map = e->kind == ML_GPU_KIND_VMM_MAP;
    remove_block(g, e, time_ms); /* e now points at another slot, or nothing */
    if (is_map) vmm_unref(g, handle, time_ms);
    if (cls == B_DEVICE) burst_free(d, before);
}

static void on_free(ml_gpu_t *g, const ml_record_t *r) {
    const typeof(r->u.gpu) *x = &r->u.gpu;
    if (x->kind >= ML_GPU_KIND_COUNT_) return;
    int space = space_of(x->kind);
    gblock_t *e = ml__gmap_find(&g->live, space, x->ptr);
    if (!e) {
        int dev = dev_index(g, x->device);
        if (dev >= 0) {
            g->devs[dev].pub.unknown_frees++;
            g->devs[dev].pub.free_calls++;
        }
        return;
    }
    if (x->kind == ML_GPU_KIND_VMM_MAP && x->size > e->size) {
        /* One cuMemUnmap may cover several adjacent mappings. */
        uint64_t at = x->ptr, end = x->ptr + x->size;
        while (e && at < end) {
            uint64_t next = at + (e->size ? e->size : 1);
            free_block(g, e, r->time_ms);
            at = next;
            e = ml__gmap_find(&g->live, space, at);
        }
        return;
    }
    free_block(g, e, r->time_ms);
}

/* The free recorded at API entry failed: the block it removed lives on. */
static void on_free_failed(ml_gpu_t *g, const ml_record_t *r) {
    const typeof(r->u.gpu) *x = &r->u.gpu;
    int space = space_of(x->kind);
    for (uint32_t i = 0; i < STASH; i++) {
        gblock_t *b = &g->stash[(g->stash_next - 1 - i) % STASH];
        if (b->space != space + 1 || b->key != x->ptr) continue;
        gblock_t copy = *b;
        b->space = 0;
        gdev_t *d = &g->devs[copy.dev];
        gsite_t *s = &g->sites[copy.site];
        d->pub.failed_frees++;
        if (d->pub.free_calls) d->pub.free_calls--;
        if (d->pub.kinds[copy.kind].free_calls) d->pub.kinds[copy.kind].free_calls--;
        if (bytes_class(copy.kind, copy.flags) == B_PINNED && d->pub.pinned_free_calls)
            d->pub.pinned_free_calls--;
        if (s->pub.frees) s->pub.frees--;
        uint64_t life = r->time_ms >= copy.time_ms ? r->time_ms - copy.time_ms : 0;
        s->pub.lifetime_ms_sum -= life <= s->pub.lifetime_ms_sum ? life : s->pub.lifetime_ms_sum;
        gblock_t *live = ml__gmap_find(&g->live, space, copy.key);
        if (live) {
            live->released = 0; /* a VMM handle still mapped */
            return;
        }
        copy.released = 0;
        if (gmap_put(&g->live, &copy)) add_live(g, &copy, r->time_ms);
        return;
    }
    int dev = dev_index(g, x->device);
    if (dev >= 0) g->devs[dev].pub.failed_frees++;
}

/* Everything the context still holds dies with it; VMM memory belongs to
 * the process, not to a context. */
static void on_ctx_destroy(ml_gpu_t *g, const ml_record_t *r) {
    uint32_t ctx = r->u.gpu.context;
    g->sum.contexts_destroyed++;
    if (!ctx) return;
    uint64_t n = 0;
    for (uint64_t i = 0; i < g->live.cap; i++) {
        const gblock_t *e = &g->live.e[i];
        if (e->space && e->context == ctx && e->space - 1 != S_VMM_HANDLE &&
            e->space - 1 != S_VMM_VA && e->space - 1 != S_VMM_MAP)
            n++;
    }
    if (!n) return;
    struct {
        uint8_t space;
        uint64_t key;
    } *victims = malloc(n * sizeof *victims);
    if (!victims) {
        g->sum.dropped++;
        return;
    }
    uint64_t k = 0;
    for (uint64_t i = 0; i < g->live.cap && k < n; i++) {
        const gblock_t *e = &g->live.e[i];
        if (e->space && e->context == ctx && e->space - 1 != S_VMM_HANDLE &&
            e->space - 1 != S_VMM_VA && e->space - 1 != S_VMM_MAP) {
            victims[k].space = (uint8_t)(e->space - 1);
            victims[k].key = e->key;
            k++;
        }
    }
    for (uint64_t i = 0; i < k; i++) {
        gblock_t *e = ml__gmap_find(&g->live, victims[i].space, victims[i].key);
        if (!e) continue;
        gdev_t *d = &g->devs[e->dev];
        gsite_t *s = &g->sites[e->site];
        int cls = bytes_class(e->kind, e->flags);
        d->kind_ctx_bytes[e->kind] += e->size;
        d->kind_ctx_blocks[e->kind]++;
        s->pub.ctx_destroy_bytes += e->size;
        s->pub.leaked_blocks++; /* the live part is added at query time */
        if (cls == B_DEVICE) {
            d->pub.ctx_destroy_bytes += e->size;
            d->pub.ctx_destroy_blocks++;
        } else if (cls == B_PINNED) {
            d->pinned_ctx_bytes += e->size;
        }
        remove_block(g, e, r->time_ms);
    }
    free(victims);
}

static void on_pool_trim(ml_gpu_t *g, const ml_record_t *r) {
    int dev = dev_index(g, r->u.gpu.device);
    if (dev < 0) return;
    g->devs[dev].pub.pool_trims++;
    g->devs[dev].trim_pending = true;
}

void ml__gpu_feed(ml_gpu_t **gp, const ml_record_t *r, ml_totals_t *t) {
    ml_gpu_t *g = *gp;
    if (r->tag != ML_T_GPU_ALLOC && r->tag != ML_T_GPU_FREE && r->tag != ML_T_GPU_POOL) {
        if (g && r->time_ms > g->sum.last_time_ms) g->sum.last_time_ms = r->time_ms;
        return;
    }
    if (!g) {
        g = *gp = calloc(1, sizeof *g);
        if (!g) return;
    }
    if (!g->have_time) {
        g->have_time = true;
        g->sum.first_time_ms = r->time_ms;
    }
    if (r->time_ms > g->sum.last_time_ms) g->sum.last_time_ms = r->time_ms;
    g->sum.gpu_records++;
    g->corr = r->u.gpu.correlation;
    if (r->tag == ML_T_GPU_POOL) {
        on_pool_state(g, r);
        return; /* pool records move no device bytes */
    }
    if (r->tag == ML_T_GPU_ALLOC) {
        on_alloc(g, r);
    } else {
        switch (r->u.gpu.op) {
        case ML_GPU_OP_FREE: on_free(g, r); break;
        case ML_GPU_OP_FREE_FAILED: on_free_failed(g, r); break;
        case ML_GPU_OP_CTX_DESTROY: on_ctx_destroy(g, r); break;
        case ML_GPU_OP_POOL_TRIM: on_pool_trim(g, r); break;
        default: break;
        }
    }
    update_totals(g, r->time_ms, t);
}

void ml__gpu_free(ml_gpu_t *g) {
    if (!g) return;
    for (size_t i = 0; i < g->ndevs; i++) {
        free(g->devs[i].va.n);
        free(g->devs[i].tl);
        free(g->devs[i].pools);
    }
    free(g->devs);
    free(g->sites);
    ml_map_free(&g->site_index);
    free(g->live.e);
    free(g);
}

/* ------------------------------------------------------------------------- */
/* Queries                                                                   */
/* ------------------------------------------------------------------------- */

const ml_gpu_summary_t *ml_gpu_summary(const ml_gpu_t *g) {
    return &g->sum;
}

size_t ml_gpu_device_count(const ml_gpu_t *g) {
    return g ? g->ndevs : 0;
}

uint64_t ml_gpu_live_bytes(const ml_gpu_t *g) {
    return g ? g->sum.live_bytes : 0;
}

const ml_gpu_device_t *ml_gpu_device(const ml_gpu_t *g, size_t i) {
    if (!g || i >= g->ndevs) return NULL;
    return &g->devs[i].pub;
}

size_t ml_gpu_timeline(const ml_gpu_t *g, size_t i, const ml_gpu_point_t **points) {
    if (!g || i >= g->ndevs) {
        *points = NULL;
        return 0;
    }
    *points = g->devs[i].tl;
    return g->devs[i].ntl;
}

static void site_public(const ml_gpu_t *g, const gsite_t *s, ml_gpu_site_t *out) {
    *out = s->pub;
    const gdev_t *d = &g->devs[s->dev];
    out->device = d->pub.device;
    if (bytes_class(s->pub.kind, 0) != B_DEVICE) {
        out->peak_bytes = out->peak_blocks = 0;
    } else if (d->peak_dirty) {
        /* No decrease since the device's last new peak: now is the peak. */
        out->peak_bytes = s->pub.live_bytes;
        out->peak_blocks = s->pub.live_blocks;
    }
    out->leaked_bytes = s->pub.live_bytes + s->pub.ctx_destroy_bytes;
    out->leaked_blocks = s->pub.live_blocks + s->pub.leaked_blocks;
    if (s->pub.kind == ML_GPU_KIND_VMM_RESERVE || s->pub.kind == ML_GPU_KIND_VMM_MAP)
        out->leaked_bytes = 0;
    out->distinct_sizes = s->pub.distinct_sizes + (s->many_sizes ? 1 : 0);
    out->top_size = out->top_size_count = 0;
    for (uint32_t k = 0; k < s->pub.distinct_sizes; k++)
        if (s->size_counts[k] > out->top_size_count) {
            out->top_size = s->sizes[k];
            out->top_size_count = s->size_counts[k];
        }
}

static uint64_t order_key(const ml_gpu_site_t *s, ml_gpu_order_t o) {
    switch (o) {
    case ML_GPU_BY_PEAK: return s->peak_bytes;
    case ML_GPU_BY_LEAKED: return s->leaked_bytes;
    case ML_GPU_BY_CHURN: return s->frees;
    case ML_GPU_BY_CALLS: return s->alloc_calls;
    default: return s->bytes_allocated;
    }
}

static int cmp_sites(const void *pa, const void *pb, void *order) {
    const ml_gpu_site_t *a = pa, *b = pb;
    ml_gpu_order_t o = *(const ml_gpu_order_t *)order;
    uint64_t ka = order_key(a, o), kb = order_key(b, o);
    if (ka != kb) return ka > kb ? -1 : 1;
    if (a->bytes_allocated != b->bytes_allocated) return a->bytes_allocated > b->bytes_allocated ? -1 : 1;
    if (a->stack != b->stack) return a->stack < b->stack ? -1 : 1;
    return (int)a->kind - (int)b->kind;
}

size_t ml_gpu_site_count(const ml_gpu_t *g) {
    return g ? g->nsites : 0;
}

size_t ml_gpu_sites(const ml_gpu_t *g, size_t device_index, ml_gpu_order_t order,
                    ml_gpu_site_t *out, size_t max) {
    if (!g || !max) return 0;
    ml_gpu_site_t *all = malloc((g->nsites ? g->nsites : 1) * sizeof *all);
    if (!all) return 0;
    size_t n = 0;
    for (uint32_t i = 0; i < g->nsites; i++) {
        if (device_index != SIZE_MAX && g->sites[i].dev != device_index) continue;
        site_public(g, &g->sites[i], &all[n]);
        if (order_key(&all[n], order)) n++;
    }
    qsort_r(all, n, sizeof *all, cmp_sites, &order);
    if (n > max) n = max;
    memcpy(out, all, n * sizeof *out);
    free(all);
    return n;
}

static double duration_s(const ml_gpu_t *g) {
    uint32_t ms = g->sum.last_time_ms > g->sum.first_time_ms ? g->sum.last_time_ms - g->sum.first_time_ms : 0;
    return ms ? ms / 1000.0 : 0.001;
}

double ml_gpu_site_pairs_per_s(const ml_gpu_t *g, const ml_gpu_site_t *s) {
    return (double)s->frees / duration_s(g);
}
