/* gpu.c - GPU memory analysis over the CUPTI collector's records.
 *
 * See ml_gpu.h for the accounting rules and docs/gpu.md for the reasons.
 * The streaming pass keeps:
 *   - a live map of GPU allocations keyed by (key space, address or handle):
 *     device pointers, pinned host pointers, registered host ranges, VMM
 *     handles, VMM reservations, VMM mappings and arrays are separate spaces,
 *     since handles and addresses may collide;
 *   - per device: counters, the peak, a bounded timeline and an augmented
 *     treap of live address ranges (below) for fragmentation at any moment;
 *   - per (device, stack, kind) site: counters, live bytes and the lazily
 *     taken snapshot of what it held at its device's peak.
 */
#define _GNU_SOURCE /* qsort_r */
#include "ml_gpu.h"
#include "analysis_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ull * 1024)

/* ------------------------------------------------------------------------- */
/* Kinds                                                                     */
/* ------------------------------------------------------------------------- */

enum { S_DPTR, S_HOST_PINNED, S_HOST_REG, S_VMM_HANDLE, S_VMM_VA, S_VMM_MAP, S_ARRAY, S_COUNT };

static int space_of(unsigned kind) {
    switch (kind) {
    case ML_GPU_KIND_HOST_PINNED: return S_HOST_PINNED;
    case ML_GPU_KIND_HOST_REGISTERED: return S_HOST_REG;
    case ML_GPU_KIND_VMM_PHYSICAL: return S_VMM_HANDLE;
    case ML_GPU_KIND_VMM_RESERVE: return S_VMM_VA;
    case ML_GPU_KIND_VMM_MAP: return S_VMM_MAP;
    case ML_GPU_KIND_ARRAY: return S_ARRAY;
    default: return S_DPTR; /* device, pitch, managed, async, pool: one address space */
    }
}

/* What a block's bytes count as. */
enum { B_DEVICE, B_PINNED, B_NONE };

static int bytes_class(unsigned kind, uint16_t flags) {
    switch (kind) {
    case ML_GPU_KIND_HOST_PINNED:
    case ML_GPU_KIND_HOST_REGISTERED: return B_PINNED;
    case ML_GPU_KIND_VMM_PHYSICAL: return (flags & ML_GPU_F_HOST) ? B_PINNED : B_DEVICE;
    case ML_GPU_KIND_VMM_RESERVE:
    case ML_GPU_KIND_VMM_MAP: return B_NONE;
    default: return B_DEVICE;
    }
}

/* Ranges that occupy the device's virtual address space. */
static bool in_va(unsigned kind) {
    return space_of(kind) == S_DPTR || kind == ML_GPU_KIND_VMM_MAP;
}

/* ------------------------------------------------------------------------- */
/* Address ranges: an augmented treap                                        */
/* ------------------------------------------------------------------------- */

/* Fragmentation must be known at each device's peak, which moves while the
 * trace streams by; sorting the live set at every new peak would be
 * quadratic in a growth phase. Instead the live ranges of a device sit in a
 * treap ordered by start address, and each node also summarises its subtree:
 * lowest start, highest end, bytes, and the gaps between consecutive ranges
 * (their sum, count and largest). A parent combines its children's summaries
 * with the two gaps next to itself, so insert and remove stay O(log n) and
 * the root holds the whole device's numbers at every moment. */
typedef struct {
    uint64_t start, end;
    uint64_t lo, hi, bytes, gaps, max_gap, holes, count;
    uint64_t breaks, nbreaks; /* gaps wider than ML_GPU_REGION_GAP: bytes, count */
    uint32_t prio;
    int32_t l, r;
} tnode_t;

typedef struct {
    tnode_t *n;
    int32_t cap, used, free_head, root;
    uint32_t rng;
} treap_t;

static void treap_init(treap_t *t) {
    memset(t, 0, sizeof *t);
    t->root = t->free_head = -1;
    t->rng = 0x9e3779b9u;
}

/* A gap between consecutive ranges is a hole, or a break between regions. */
static inline uint64_t hole_of(uint64_t gap) {
    return gap <= ML_GPU_REGION_GAP ? gap : 0;
}
static inline uint64_t break_of(uint64_t gap) {
    return gap > ML_GPU_REGION_GAP ? gap : 0;
}

static void pull(treap_t *t, int32_t i) {
    tnode_t *n = &t->n[i];
    const tnode_t *L = n->l >= 0 ? &t->n[n->l] : NULL, *R = n->r >= 0 ? &t->n[n->r] : NULL;
    uint64_t g1 = L && n->start > L->hi ? n->start - L->hi : 0;
    uint64_t mid_hi = L && L->hi > n->end ? L->hi : n->end;
    uint64_t g2 = R && R->lo > mid_hi ? R->lo - mid_hi : 0;
    n->lo = L ? L->lo : n->start;
    n->hi = R && R->hi > mid_hi ? R->hi : mid_hi;
    n->bytes = (L ? L->bytes : 0) + (n->end - n->start) + (R ? R->bytes : 0);
    n->count = (L ? L->count : 0) + 1 + (R ? R->count : 0);
    uint64_t h1 = hole_of(g1), h2 = hole_of(g2), b1 = break_of(g1), b2 = break_of(g2);
    n->gaps = (L ? L->gaps : 0) + (R ? R->gaps : 0) + h1 + h2;
    n->holes = (L ? L->holes : 0) + (R ? R->holes : 0) + (h1 > 0) + (h2 > 0);
    n->breaks = (L ? L->breaks : 0) + (R ? R->breaks : 0) + b1 + b2;
    n->nbreaks = (L ? L->nbreaks : 0) + (R ? R->nbreaks : 0) + (b1 > 0) + (b2 > 0);
    uint64_t m = h1 > h2 ? h1 : h2;
    if (L && L->max_gap > m) m = L->max_gap;
    if (R && R->max_gap > m) m = R->max_gap;
    n->max_gap = m;
}

/* Splits subtree i into keys < key (*a) and keys >= key (*b). */
static void split(treap_t *t, int32_t i, uint64_t key, int32_t *a, int32_t *b) {
    if (i < 0) {
        *a = *b = -1;
        return;
    }
    if (t->n[i].start < key) {
        split(t, t->n[i].r, key, &t->n[i].r, b);
        *a = i;
    } else {
        split(t, t->n[i].l, key, a, &t->n[i].l);
        *b = i;
    }
    pull(t, i);
}

static int32_t merge(treap_t *t, int32_t a, int32_t b) {
    if (a < 0) return b;
    if (b < 0) return a;
    if (t->n[a].prio > t->n[b].prio) {
        t->n[a].r = merge(t, t->n[a].r, b);
        pull(t, a);
        return a;
    }
    t->n[b].l = merge(t, a, t->n[b].l);
    pull(t, b);
    return b;
}

static int treap_insert(treap_t *t, uint64_t start, uint64_t size) {
    int32_t i;
    if (t->free_head >= 0) {
        i = t->free_head;
        t->free_head = t->n[i].l;
    } else {
        if (t->used == t->cap) {
            int32_t ncap = t->cap ? t->cap * 2 : 256;
            tnode_t *p = realloc(t->n, (size_t)ncap * sizeof *p);
            if (!p) return -ENOMEM;
            t->n = p;
            t->cap = ncap;
        }
        i = t->used++;
    }
    tnode_t *n = &t->n[i];
    memset(n, 0, sizeof *n);
    n->start = start;
    n->end = start + (size ? size : 1);
    t->rng ^= t->rng << 13;
    t->rng ^= t->rng >> 17;
    t->rng ^= t->rng << 5;
    n->prio = t->rng;
    n->l = n->r = -1;
    pull(t, i);
    int32_t a, b;
    split(t, t->root, start, &a, &b);
    t->root = merge(t, merge(t, a, i), b);
    return 0;
}

static void treap_remove(treap_t *t, uint64_t start) {
    int32_t a, b, m, c;
    split(t, t->root, start, &a, &b);
    split(t, b, start + 1, &m, &c);
    /* m holds the ranges starting exactly at `start`: one, as the live map
     * never holds two blocks at one address of the same space. */
    while (m >= 0) {
        int32_t next = merge(t, t->n[m].l, t->n[m].r);
        t->n[m].l = t->free_head;
        t->free_head = m;
        m = next;
    }
    t->root = merge(t, a, c);
}

static void treap_frag(const treap_t *t, uint32_t time_ms, ml_gpu_frag_t *f) {
    memset(f, 0, sizeof *f);
    f->valid = true;
    f->time_ms = time_ms;
    f->utilization = 1.0;
    if (t->root < 0) return;
    const tnode_t *r = &t->n[t->root];
    f->live_bytes = r->bytes;
    f->blocks = r->count;
    f->span_bytes = r->hi - r->lo - r->breaks;
    f->regions = 1 + r->nbreaks;
    f->hole_bytes = r->gaps;
    f->holes = r->holes;
    f->largest_hole_bytes = r->max_gap;
    if (f->span_bytes) f->utilization = (double)(f->span_bytes - f->hole_bytes) / (double)f->span_bytes;
    f->external = f->hole_bytes ? 1.0 - (double)f->largest_hole_bytes / (double)f->hole_bytes : 0.0;
}

/* ------------------------------------------------------------------------- */
/* State                                                                     */
/* ------------------------------------------------------------------------- */

typedef struct {
    uint64_t key; /* address or handle */
    uint64_t size;
    uint64_t handle;    /* VMM_MAP: the physical handle behind it */
    uint32_t site;      /* index into sites */
    uint32_t context;
    uint32_t time_ms;
    uint32_t maps;      /* VMM_PHYSICAL: live mappings of this handle */
    uint16_t flags;
    uint8_t space;      /* S_*, + 1 (0: empty slot) */
    uint8_t kind;
    uint8_t released;   /* VMM_PHYSICAL: cuMemRelease seen, freed at the last unmap */
    uint8_t dev;        /* index into devs */
} gblock_t;

typedef struct {
    gblock_t *e;
    uint64_t cap, count;
} gmap_t;

typedef struct {
    ml_gpu_site_t pub;
    uint32_t dev;
    uint64_t sizes[ML_GPU_SITE_SIZES], size_counts[ML_GPU_SITE_SIZES];
    bool many_sizes;
} gsite_t;

typedef struct {
    ml_gpu_device_t pub;
    treap_t va;
    bool peak_dirty; /* nothing decreased since the last new peak: live == at peak */
    uint64_t kind_ctx_bytes[ML_GPU_KIND_COUNT_], kind_ctx_blocks[ML_GPU_KIND_COUNT_];
    uint64_t pinned_ctx_bytes;
    /* timeline */
    ml_gpu_point_t *tl;
    size_t ntl;
    uint32_t tl_width;
    /* empty_cache detection */
    bool in_burst, burst_counted, drained, trim_pending;
    uint32_t burst_frees;
    uint64_t burst_start, drain_level;
    /* memory pools (ML_T_GPU_POOL) */
    struct gpool *pools;
    uint32_t pools_cap;
    uint32_t peak_corr; /* correlation id of the record that made the current peak */
} gdev_t;

/* A pool and the correlation ids of the states kept (ml_gpu.h explains the
 * join). */
typedef struct gpool {
    ml_gpu_pool_t pub;
    uint32_t cur_corr, peak_corr;
    bool have_cur, have_peak;
} gpool_t;

/* The last freed blocks, to restore one whose free failed. */
#define STASH 64

struct ml_gpu_s {
    ml_gpu_summary_t sum;
    gmap_t live;
    gdev_t *devs;
    size_t ndevs;
    gsite_t *sites;
    uint32_t nsites, sites_cap;
    /* (dev, stack, kind) -> site index + 1 */
    struct site_slot {
        uint64_t key;
        uint32_t idx;
    } *site_map;
    uint32_t site_map_cap;
    gblock_t stash[STASH];
    uint32_t stash_next;
    bool have_time;
    uint32_t corr; /* correlation id of the record being fed */
};

/* ------------------------------------------------------------------------- */
/* Live map                                                                  */
/* ------------------------------------------------------------------------- */

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

static gblock_t *gmap_find(const gmap_t *m, int space, uint64_t key) {
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
    treap_init(&d->va);
    for (uint64_t k = 0; k < g->live.cap; k++)
        if (g->live.e[k].space && g->live.e[k].dev >= i) g->live.e[k].dev++;
    for (uint32_t k = 0; k < g->nsites; k++)
        if (g->sites[k].dev >= i) g->sites[k].dev++;
    for (uint32_t k = 0; k < STASH; k++)
        if (g->stash[k].space && g->stash[k].dev >= i) g->stash[k].dev++;
    g->sum.ndevices = g->ndevs;
    return (int)i;
}

static uint64_t site_key(int32_t device, uint32_t stack, unsigned kind) {
    return (uint64_t)stack << 24 | (uint64_t)(uint8_t)kind << 16 | (uint16_t)(int16_t)device;
}

/* Site index for (device, stack, kind); UINT32_MAX when out of memory.
 * Sites are keyed by device ordinal, not by index, so that inserting a
 * device does not change keys. */
static uint32_t site_get(ml_gpu_t *g, uint32_t dev, uint32_t stack, unsigned kind) {
    uint64_t key = site_key(g->devs[dev].pub.device, stack, kind);
    if ((g->nsites + 1) * 2 > g->site_map_cap) {
        uint32_t ncap = g->site_map_cap ? g->site_map_cap * 2 : 256;
        struct site_slot *n = calloc(ncap, sizeof *n);
        if (!n) return UINT32_MAX;
        for (uint32_t i = 0; i < g->site_map_cap; i++) {
            if (!g->site_map[i].idx) continue;
            uint32_t j = (uint32_t)mix(g->site_map[i].key) & (ncap - 1);
            while (n[j].idx) j = (j + 1) & (ncap - 1);
            n[j] = g->site_map[i];
        }
        free(g->site_map);
        g->site_map = n;
        g->site_map_cap = ncap;
    }
    uint32_t j = (uint32_t)mix(key) & (g->site_map_cap - 1);
    for (; g->site_map[j].idx; j = (j + 1) & (g->site_map_cap - 1))
        if (g->site_map[j].key == key) return g->site_map[j].idx - 1;
    if (g->nsites == g->sites_cap) {
        uint32_t ncap = g->sites_cap ? g->sites_cap * 2 : 64;
        gsite_t *p = realloc(g->sites, ncap * sizeof *p);
        if (!p) return UINT32_MAX;
        g->sites = p;
        g->sites_cap = ncap;
    }
    gsite_t *s = &g->sites[g->nsites];
    memset(s, 0, sizeof *s);
    s->dev = dev;
    s->pub.device = g->devs[dev].pub.device;
    s->pub.stack = stack;
    s->pub.kind = (uint8_t)kind;
    g->site_map[j].key = key;
    g->site_map[j].idx = ++g->nsites;
    return g->nsites - 1;
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
    treap_frag(&d->va, g->sum.last_time_ms, &p->frag_now);
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

static void pool_sums(gdev_t *d) {
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
    pool_sums(d);
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
    pool_sums(d);
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
    if (in_va(b->kind) && treap_insert(&d->va, b->key, b->size) < 0) g->sum.dropped++;
    switch (bytes_class(b->kind, b->flags)) {
    case B_DEVICE:
        p->live_bytes += b->size;
        p->live_blocks++;
        if (p->live_bytes > p->peak_bytes) {
            p->peak_bytes = p->live_bytes;
            p->peak_blocks = p->live_blocks;
            p->peak_time_ms = time_ms;
            treap_frag(&d->va, time_ms, &p->frag_peak);
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
    if (in_va(b->kind)) treap_remove(&d->va, b->key);
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
    gblock_t *h = gmap_find(&g->live, S_VMM_HANDLE, handle);
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
    if (!d->burst_counted && d->burst_frees >= 3 && d->burst_start >= MIB &&
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
        const gblock_t *h = gmap_find(&g->live, S_VMM_HANDLE, x->handle);
        if (h) device = g->devs[h->dev].pub.device;
    }
    int dev = dev_index(g, device);
    if (dev < 0) {
        g->sum.dropped++;
        return;
    }
    /* An address handed out again without a free we saw (the free happened
     * before injection, or in a context we did not follow): replace it. */
    gblock_t *old = gmap_find(&g->live, space, x->ptr);
    if (old) {
        if (old->kind == ML_GPU_KIND_VMM_MAP) vmm_unref(g, old->handle, r->time_ms);
        old = gmap_find(&g->live, space, x->ptr);
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
        gblock_t *h = gmap_find(&g->live, S_VMM_HANDLE, x->handle);
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
    gblock_t *e = gmap_find(&g->live, space, x->ptr);
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
            e = gmap_find(&g->live, space, at);
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
        gblock_t *live = gmap_find(&g->live, space, copy.key);
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
        gblock_t *e = gmap_find(&g->live, victims[i].space, victims[i].key);
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

void ml_gpu_feed(ml_gpu_t **gp, const ml_record_t *r, ml_totals_t *t) {
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

void ml_gpu_free(ml_gpu_t *g) {
    if (!g) return;
    for (size_t i = 0; i < g->ndevs; i++) {
        free(g->devs[i].va.n);
        free(g->devs[i].tl);
        free(g->devs[i].pools);
    }
    free(g->devs);
    free(g->sites);
    free(g->site_map);
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

/* ------------------------------------------------------------------------- */
/* Advice                                                                    */
/* ------------------------------------------------------------------------- */

/* The rules and their thresholds (docs/gpu.md, "Advice"):
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

#define MIN_CHURN_PAIRS 16
#define MIN_ASYNC_PAIRS 64
#define MIN_PINNED_PAIRS 4
#define MIN_CYCLES 3
#define MIN_OFFLOAD_PEAK (16 * MIB)

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
    ml_gpu_site_t *sites = malloc((g->nsites ? g->nsites : 1) * sizeof *sites);
    if (sites) {
        size_t ns = ml_gpu_sites(g, SIZE_MAX, ML_GPU_BY_CHURN, sites, g->nsites);
        for (size_t i = 0; i < ns && n < cap; i++) site_advice(g, &sites[i], all, cap, &n);
        free(sites);
    }
    for (size_t i = 0; i < g->ndevs && n < cap; i++) device_advice(g, i, all, cap, &n);
    qsort(all, n, sizeof *all, cmp_sugg);
    if (n > max) n = max;
    memcpy(out, all, n * sizeof *out);
    free(all);
    return n;
}

/* ------------------------------------------------------------------------- */
/* Session glue                                                              */
/* ------------------------------------------------------------------------- */

const ml_gpu_t *ml_analysis_gpu(const ml_analysis_t *a) {
    return a ? a->gpu : NULL;
}

/* CUDA's own frames between the callback and the program: the driver, CUPTI
 * and the runtime as shared libraries, and the runtime's entry points when
 * it is linked statically (nvcc's default) and so lives in the program. */
static bool is_cuda_frame(const ml_frame_t *f) {
    if (ml__frame_is_allocator(f)) return true; /* memlens' own (libmemlens*) */
    if (f->module) {
        const char *base = strrchr(f->module, '/');
        base = base ? base + 1 : f->module;
        if (!strncmp(base, "libcuda.", 8) || !strncmp(base, "libcupti", 8) ||
            !strncmp(base, "libcudart", 9) || !strncmp(base, "libnvidia-", 10))
            return true;
    }
    const char *fn = f->function;
    if (!fn || fn[0] == '[') return false;
    if (!strncmp(fn, "cuda", 4) || !strncmp(fn, "__cuda", 6) || !strncmp(fn, "cudart::", 8)) return true;
    /* Driver entry points: cuMemAlloc_v2, cuMemCreate, ... */
    return fn[0] == 'c' && fn[1] == 'u' && fn[2] >= 'A' && fn[2] <= 'Z';
}

size_t ml_gpu_stack_frames(const ml_analysis_t *ca, uint32_t stack, ml_frame_t *out, size_t max) {
    ml_analysis_t *a = (ml_analysis_t *)ca; /* the symbolizer caches what it resolves */
    if (!a || !a->sym || !stack || !max) return 0;
    size_t n = 0;
    bool leading = true;
    uint32_t node = stack;
    for (int guard = 0; node && node < a->nnodes && n < max && guard < ML_MAX_DEPTH * 4; guard++) {
        int32_t mod = a->node_module[node];
        const ml__module_t *m = mod >= 0 && (uint32_t)mod < a->nmods ? &a->mods[mod] : NULL;
        ml__pc_frames_t pf;
        if (ml__sym_resolve(a->sym, mod, m, a->node_pc[node], &pf) < 0) break;
        for (uint32_t j = 0; j < pf.n && n < max; j++) {
            if (leading && is_cuda_frame(&pf.f[j])) continue;
            leading = false;
            out[n++] = pf.f[j];
        }
        node = a->node_parent[node];
    }
    return n;
}

/* ------------------------------------------------------------------------- */
/* Snapshot                                                                  */
/* ------------------------------------------------------------------------- */

/* The GPU state in the collector's analysis snapshot (snapshot.c writes the
 * rest of the session and calls these with its buffer), so that a report on
 * a CUDA program restores instead of replaying every record. Everything a
 * query reads is saved as it is: the summary, each device's public numbers
 * (peak, fragmentation at the peak and now, size classes, per-kind
 * counters), its context-destruction and empty_cache state and its timeline;
 * every site with its request sizes; the live blocks in their map slots and
 * the stash of recent frees. What follows from them is rebuilt: the site
 * index, and each device's treap of live ranges (from the live blocks: its
 * shape and priorities differ, its summary does not; a restored session is
 * not fed again anyway, and the fragmentation numbers are saved).
 *
 * Restore trusts nothing: counts are bounded by the bytes left, indexes by
 * their tables, each block must be found in its slot by a lookup (no
 * duplicates, no broken probe chain), and the live counters of devices,
 * kinds and sites must equal the sums of the live blocks. */

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
_Static_assert(sizeof(struct ml_gpu_s) == 3240, "save/restore the new ml_gpu_t field");
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
        treap_init(&d->va);
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
        pool_sums(d); /* the device's at-peak pool sums follow from its pools */
        if (!b->bad && !derived_ok(d)) ml__snap_bad(b, "a GPU device's leaks do not add up");
    }
    if (b->bad) return;

    /* A site takes at least 20 bytes. */
    uint64_t nsites = ml__get_count(b, 20, "more GPU sites than the snapshot holds");
    if (b->bad) return;
    if (nsites) {
        uint32_t cap = 256; /* at least what site_get() would have grown to */
        while ((nsites + 1) * 2 > cap) cap *= 2;
        g->sites = calloc(nsites, sizeof *g->sites);
        g->site_map = calloc(cap, sizeof *g->site_map);
        if (!g->sites || !g->site_map) return (void)ml__snap_bad(b, "out of memory");
        g->sites_cap = (uint32_t)nsites;
        g->site_map_cap = cap;
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
        uint64_t key = site_key(p->device, p->stack, p->kind);
        uint32_t j = (uint32_t)mix(key) & (g->site_map_cap - 1);
        for (; g->site_map[j].idx; j = (j + 1) & (g->site_map_cap - 1))
            if (g->site_map[j].key == key)
                return (void)ml__snap_bad(b, "two GPU sites with one key");
        g->site_map[j].key = key;
        g->site_map[j].idx = ++g->nsites;
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
        if (e->space && gmap_find(&g->live, e->space - 1, e->key) != e)
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
        if (e->space && in_va(e->kind) && treap_insert(&g->devs[e->dev].va, e->key, e->size) < 0)
            return (void)ml__snap_bad(b, "out of memory");
    }
}

void ml__gpu_restore(ml_gpu_t **out, ml__ibuf_t *b) {
    *out = NULL;
    ml_gpu_t *g = calloc(1, sizeof *g);
    if (!g) return (void)ml__snap_bad(b, "out of memory");
    restore_gpu(b, g);
    if (b->bad) {
        ml_gpu_free(g);
        return;
    }
    *out = g;
}
