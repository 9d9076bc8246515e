/* sim_slab.c - slab allocation per size class (Bonwick 1994), and pools.
 *
 * A request is rounded up to its size class (jemalloc-like: 16-byte steps to
 * 128, then four classes per power of two up to 16 KiB) and takes a slot in a
 * slab of that class: a run of 1 to 16 pages cut into equal slots, the fewest
 * pages that waste at most 1/8 at the end. Slot metadata lives outside the
 * slab, so there are no headers. Allocation takes the lowest free slot of the
 * most recently used partial slab (Bonwick's partial list) or, when there is
 * none, the class's cached empty slab or a new one (one split). When a slab
 * empties it becomes the cached one, or is given back (one merge) when the
 * class already caches one. Requests above the largest class get whole pages
 * of their own.
 *
 * Every free slot serves every request of its class, so a class never
 * fragments externally; the external measure is the memory stranded in
 * classes other than the one with the most free space. A pool is a slab
 * allocator with exactly one class, the object size.
 */
#include "sim_internal.h"

#define SLAB_MAX_OBJS 512
#define SLAB_WORDS (SLAB_MAX_OBJS / 64)
#define SLAB_MAX_CLASSES 64

enum { S_PARTIAL, S_FULL, S_CACHED, S_UNUSED };

typedef struct {
    uint64_t base;
    uint64_t freemap[SLAB_WORDS]; /* 1 = free slot */
    uint32_t prev, next;          /* partial list */
    uint16_t cls, nfree;
    uint8_t state;
} slab_t;

typedef struct {
    uint64_t size, slab_bytes, free_bytes;
    uint32_t objs, npages;
    uint32_t partial, cached;
} sclass_t;

typedef struct {
    uint64_t *base;
    uint32_t n, cap;
} run_stack_t;

typedef struct {
    ml_sim_policy_t base;
    sclass_t cls[SLAB_MAX_CLASSES];
    uint32_t ncls;
    slab_t *s;
    uint32_t scap, sused, srecycle;
    run_stack_t runs[17]; /* given-back slab address ranges by page count, for reuse */
    uint64_t next_addr;
    uint32_t *id_slab; /* ML__NIL: a large block on its own pages */
    uint16_t *id_slot;
    uint32_t idcap, idcap2;
    uint64_t free_bytes, large_pages;
    /* The class of each size in 8-byte steps, (size + 7) / 8 -> class, when
     * every class size is a multiple of 8 (then all the sizes of a step have
     * the same class): one load instead of the binary search. NULL: search. */
    uint8_t *cls_of;
} slab_policy_t;

static int find_class(const slab_policy_t *sp, uint64_t size) {
    int lo = 0, hi = (int)sp->ncls - 1;
    if (size > sp->cls[hi].size) return -1;
    if (sp->cls_of) return sp->cls_of[(size + 7) >> 3];
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (sp->cls[mid].size >= size) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

static uint32_t new_slab(slab_policy_t *sp, uint32_t c) {
    sclass_t *k = &sp->cls[c];
    uint32_t x;
    if (sp->srecycle != ML__NIL) {
        x = sp->srecycle;
        sp->srecycle = sp->s[x].next;
    } else {
        if (sp->sused == sp->scap) {
            uint32_t ncap = sp->scap ? sp->scap * 2 : 256;
            slab_t *n = realloc(sp->s, (size_t)ncap * sizeof *n);
            if (!n) return ML__NIL;
            ml_advise_huge(n, (size_t)ncap * sizeof *n);
            sp->s = n;
            sp->scap = ncap;
        }
        x = sp->sused++;
    }
    slab_t *s = &sp->s[x];
    memset(s, 0, sizeof *s);
    run_stack_t *rs = &sp->runs[k->npages];
    if (rs->n) {
        s->base = rs->base[--rs->n];
    } else {
        s->base = sp->next_addr;
        sp->next_addr += k->slab_bytes;
    }
    for (uint32_t i = 0; i < k->objs; i++) s->freemap[i >> 6] |= 1ull << (i & 63);
    s->cls = (uint16_t)c;
    s->nfree = (uint16_t)k->objs;
    s->state = S_PARTIAL;
    s->prev = ML__NIL;
    s->next = k->partial;
    if (k->partial != ML__NIL) sp->s[k->partial].prev = x;
    k->partial = x;
    k->free_bytes += (uint64_t)k->objs * k->size;
    sp->free_bytes += (uint64_t)k->objs * k->size;
    sp->base.splits++;
    return x;
}

static void partial_unlink(slab_policy_t *sp, uint32_t x) {
    slab_t *s = &sp->s[x];
    sclass_t *k = &sp->cls[s->cls];
    if (s->prev != ML__NIL) sp->s[s->prev].next = s->next;
    else k->partial = s->next;
    if (s->next != ML__NIL) sp->s[s->next].prev = s->prev;
}

static void partial_push(slab_policy_t *sp, uint32_t x) {
    slab_t *s = &sp->s[x];
    sclass_t *k = &sp->cls[s->cls];
    s->state = S_PARTIAL;
    s->prev = ML__NIL;
    s->next = k->partial;
    if (k->partial != ML__NIL) sp->s[k->partial].prev = x;
    k->partial = x;
}

static int slab_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block) {
    slab_policy_t *sp = (slab_policy_t *)p;
    uint64_t size = op->size ? op->size : 1, align = ml__op_align(p, op);
    if (align > p->cfg.align) { /* power-of-two classes are aligned to their size */
        if (size < align) size = align;
        size = (uint64_t)1 << ml__log2_ceil(size);
    }
    if (op->id >= sp->idcap) {
        uint32_t cap = sp->idcap;
        if (ml__sim_grow((void **)&sp->id_slab, &cap, op->id, sizeof *sp->id_slab, 0xff) < 0) return -ENOMEM;
        if (ml__sim_grow((void **)&sp->id_slot, &sp->idcap2, op->id, sizeof *sp->id_slot, 0) < 0)
            return -ENOMEM;
        sp->idcap = cap;
    }
    int c = align > p->cfg.page_size ? -1 : find_class(sp, size);
    if (c < 0) { /* large: whole pages of its own */
        uint64_t pages = ml__round_up(size, p->cfg.page_size) / p->cfg.page_size;
        ml__sim_pages_add(p, pages);
        sp->large_pages += pages;
        sp->id_slab[op->id] = ML__NIL;
        p->search_steps++;
        *addr = 0;
        *block = pages * p->cfg.page_size;
        return 0;
    }
    sclass_t *k = &sp->cls[c];
    p->search_steps++;
    uint32_t x = k->partial;
    if (x == ML__NIL && k->cached != ML__NIL) {
        x = k->cached;
        k->cached = ML__NIL;
        partial_push(sp, x);
    }
    if (x == ML__NIL && (x = new_slab(sp, (uint32_t)c)) == ML__NIL) return -ENOMEM;
    slab_t *s = &sp->s[x];
    uint32_t slot = 0;
    for (int w = 0; w < SLAB_WORDS; w++) {
        if (s->freemap[w]) {
            slot = (uint32_t)w * 64 + (uint32_t)__builtin_ctzll(s->freemap[w]);
            break;
        }
    }
    s->freemap[slot >> 6] &= ~(1ull << (slot & 63));
    if (--s->nfree == 0) {
        partial_unlink(sp, x);
        s->state = S_FULL;
    }
    k->free_bytes -= k->size;
    sp->free_bytes -= k->size;
    uint64_t a = s->base + (uint64_t)slot * k->size;
    if (ml__sim_extent_add(p, a, k->size) < 0) return -ENOMEM;
    sp->id_slab[op->id] = x;
    sp->id_slot[op->id] = (uint16_t)slot;
    *addr = a;
    *block = k->size;
    return 0;
}

static void slab_free(ml_sim_policy_t *p, uint32_t id) {
    slab_policy_t *sp = (slab_policy_t *)p;
    uint32_t x = sp->id_slab[id];
    if (x == ML__NIL) {
        uint64_t pages = p->ids[id].blk / p->cfg.page_size;
        ml__sim_pages_sub(p, pages);
        sp->large_pages -= pages;
        return;
    }
    slab_t *s = &sp->s[x];
    sclass_t *k = &sp->cls[s->cls];
    uint32_t slot = sp->id_slot[id];
    ml__sim_extent_remove(p, s->base + (uint64_t)slot * k->size, k->size);
    s->freemap[slot >> 6] |= 1ull << (slot & 63);
    s->nfree++;
    k->free_bytes += k->size;
    sp->free_bytes += k->size;
    if (s->state == S_FULL) partial_push(sp, x);
    if (s->nfree < k->objs) return;
    partial_unlink(sp, x);
    if (k->cached == ML__NIL) {
        s->state = S_CACHED;
        k->cached = x;
        return;
    }
    /* Give the slab back: its address range is reused by the next slab of that size. */
    run_stack_t *rs = &sp->runs[k->npages];
    if (rs->n == rs->cap) {
        uint32_t ncap = rs->cap ? rs->cap * 2 : 64;
        uint64_t *n = realloc(rs->base, (size_t)ncap * sizeof *n);
        if (!n) return; /* the range is just not reused */
        rs->base = n;
        rs->cap = ncap;
    }
    rs->base[rs->n++] = s->base;
    k->free_bytes -= (uint64_t)k->objs * k->size;
    sp->free_bytes -= (uint64_t)k->objs * k->size;
    s->state = S_UNUSED;
    s->next = sp->srecycle;
    sp->srecycle = x;
    p->merges++;
}

static void slab_summary(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest) {
    const slab_policy_t *sp = (const slab_policy_t *)p;
    uint64_t m = 0;
    for (uint32_t c = 0; c < sp->ncls; c++)
        if (sp->cls[c].free_bytes > m) m = sp->cls[c].free_bytes;
    *free_bytes = sp->free_bytes;
    *largest = m;
}

static uint64_t slab_state(const ml_sim_policy_t *p) {
    const slab_policy_t *sp = (const slab_policy_t *)p;
    uint64_t r = sizeof *sp + (uint64_t)sp->scap * sizeof *sp->s + (uint64_t)sp->idcap * 6;
    for (int i = 0; i <= 16; i++) r += (uint64_t)sp->runs[i].cap * 8;
    return r;
}

static void slab_destroy(ml_sim_policy_t *p) {
    slab_policy_t *sp = (slab_policy_t *)p;
    free(sp->s);
    for (int i = 0; i <= 16; i++) free(sp->runs[i].base);
    free(sp->id_slab);
    free(sp->id_slot);
    free(sp->cls_of);
    free(sp);
}

/* A free reads its slab and slot through id_slab and id_slot. */
static void slab_prefetch(const ml_sim_policy_t *p, const ml_sim_op_t *op, int stage) {
    const slab_policy_t *sp = (const slab_policy_t *)p;
    if (op->type != ML_SIM_FREE || op->id >= sp->idcap || op->id >= sp->idcap2) return;
    if (stage == 0) {
        __builtin_prefetch(&sp->id_slab[op->id]);
        __builtin_prefetch(&sp->id_slot[op->id]);
        return;
    }
    uint32_t x = sp->id_slab[op->id];
    if (x >= sp->scap) return;
    if (stage == 1) {
        __builtin_prefetch(&sp->s[x], 0);
        return;
    }
    const slab_t *sl = &sp->s[x];
    if (sl->cls < sp->ncls) ml__sim_prefetch_page(p, sl->base + (uint64_t)sp->id_slot[op->id] * sp->cls[sl->cls].size);
}
static int slab_reserve(ml_sim_policy_t *p, uint32_t ids) {
    slab_policy_t *sp = (slab_policy_t *)p;
    uint32_t cap = sp->idcap;
    if (ml__sim_reserve_ids((void **)&sp->id_slab, &cap, ids, sizeof *sp->id_slab, 0xff) < 0) return -ENOMEM;
    if (ml__sim_reserve_ids((void **)&sp->id_slot, &sp->idcap2, ids, sizeof *sp->id_slot, 0) < 0)
        return -ENOMEM;
    sp->idcap = cap;
    return 0;
}

static const ml__sim_vt_t slab_vt = {
    .reserve = slab_reserve,
    .prefetch = slab_prefetch,
    .alloc = slab_alloc,
    .free = slab_free,
    .free_summary = slab_summary,
    .state_bytes = slab_state,
    .destroy = slab_destroy,
};

static int slab_make(const ml_sim_config_t *c, const char *name, const uint64_t *classes, size_t n,
                     ml_sim_policy_t **out) {
    if (!n || n > SLAB_MAX_CLASSES) return -EINVAL;
    slab_policy_t *sp = calloc(1, sizeof *sp);
    if (!sp) return -ENOMEM;
    ml__sim_init(&sp->base, &slab_vt, name, c, false);
    uint64_t page = sp->base.cfg.page_size;
    for (size_t i = 0; i < n; i++) {
        uint64_t sz = classes[i];
        if (!sz || (i && sz <= classes[i - 1]) || sz > 16 * page) {
            free(sp);
            return -EINVAL;
        }
        uint32_t np = 1;
        while (np < 16 && (np * page < sz || (np * page) % sz > np * page / 8)) np++;
        uint64_t objs = np * page / sz;
        if (objs > SLAB_MAX_OBJS) objs = SLAB_MAX_OBJS;
        sp->cls[i] = (sclass_t){.size = sz, .objs = (uint32_t)objs, .npages = np,
                                .slab_bytes = np * page, .partial = ML__NIL, .cached = ML__NIL};
    }
    sp->ncls = (uint32_t)n;
    sp->srecycle = ML__NIL;
    bool eights = true;
    for (size_t i = 0; i < n; i++) eights = eights && classes[i] % 8 == 0;
    uint64_t steps = classes[n - 1] / 8 + 1; /* at most 16 pages: 8 K steps of 4 KiB pages */
    uint8_t *t = eights && steps <= 65536 ? malloc(steps) : NULL;
    if (t) { /* filled by the search, before it is used */
        t[0] = 0; /* size 0 is never looked up (slab_alloc asks for 1) */
        for (uint64_t j = 1; j < steps; j++) t[j] = (uint8_t)find_class(sp, j * 8);
        sp->cls_of = t;
    }
    *out = &sp->base;
    return 0;
}

int ml_sim_slab_new_classes(const ml_sim_config_t *c, const uint64_t *classes, size_t n,
                            ml_sim_policy_t **out) {
    return slab_make(c, "slab", classes, n, out);
}

int ml_sim_slab_new(const ml_sim_config_t *c, ml_sim_policy_t **out) {
    uint64_t cls[SLAB_MAX_CLASSES];
    size_t n = 0;
    for (uint64_t s = 16; s <= 128; s += 16) cls[n++] = s;
    for (uint64_t base = 128; base < 16384; base *= 2)
        for (int i = 1; i <= 4; i++) cls[n++] = base + (uint64_t)i * base / 4;
    return slab_make(c, "slab", cls, n, out);
}

int ml_sim_pool_new(const ml_sim_config_t *c, uint64_t object_size, ml_sim_policy_t **out) {
    uint64_t sz = ml__round_up(object_size ? object_size : 1, 8);
    return slab_make(c, "pool", &sz, 1, out);
}
