/* sim_buddy.c - binary buddy allocator (Knowlton 1965; Knuth TAOCP 2.5).
 *
 * Every block is a power of two, at least 16 bytes (the granule), aligned to
 * its own size; the order lives in a side table, so there is no header. A
 * request takes the smallest free block of order >= its own, split in halves
 * until it fits (one split per halving; the upper halves go to their free
 * lists). On free a block merges with its buddy (address ^ size) for as long
 * as the buddy is free and whole (one merge each). The arena starts as one
 * 4 KiB block and doubles when nothing fits: the old arena becomes the lower
 * half of the new one. Cost: orders looked at, splits, merges. The price is
 * internal waste: a 65-byte request takes a 128-byte block.
 */
#include "sim_internal.h"

typedef struct {
    uint64_t addr;
    uint32_t prev, next;
    uint8_t order;
} bnode_t;

typedef struct {
    uint64_t key; /* addr + 1 */
    uint32_t node;
    uint32_t unused;
} bslot_t;

ML_MAP_TYPED(bfree, bslot_t, 1024)

typedef struct {
    ml_sim_policy_t base;
    bnode_t *n;
    uint32_t ncap, nused, nrecycle;
    uint32_t heads[64];
    uint64_t nonempty; /* bit k: list k has a block */
    ml_map_t h;        /* bslot_t: free blocks by address */
    uint64_t *id_addr;
    uint8_t *id_order;
    uint32_t idcap, idcap2;
    unsigned min_order, space_order;
    bool has_space;
    uint64_t free_bytes;
} buddy_t;

static void h_del(buddy_t *b, uint64_t addr) {
    bslot_t *s = bfree_find(&b->h, addr + 1);
    if (s) bfree_remove(&b->h, s);
}

/* Puts a free block on its list (no merging). */
static int push_free(buddy_t *b, uint64_t addr, unsigned k) {
    bool existed;
    bslot_t *s = bfree_put(&b->h, addr + 1, &existed);
    if (!s) return -ENOMEM;
    uint32_t x;
    if (b->nrecycle != ML__NIL) {
        x = b->nrecycle;
        b->nrecycle = b->n[x].next;
    } else {
        if (b->nused == b->ncap) {
            uint32_t ncap = b->ncap ? b->ncap * 2 : 1024;
            bnode_t *n = realloc(b->n, (size_t)ncap * sizeof *n);
            if (!n) {
                bfree_remove(&b->h, s);
                return -ENOMEM;
            }
            ml_advise_huge(n, (size_t)ncap * sizeof *n);
            b->n = n;
            b->ncap = ncap;
        }
        x = b->nused++;
    }
    b->n[x] = (bnode_t){.addr = addr, .prev = ML__NIL, .next = b->heads[k], .order = (uint8_t)k};
    if (b->heads[k] != ML__NIL) b->n[b->heads[k]].prev = x;
    b->heads[k] = x;
    b->nonempty |= 1ull << k;
    s->node = x;
    b->free_bytes += 1ull << k;
    return 0;
}

/* Takes free block x off its list; its slot in the address map is the
 * caller's to remove. */
static void unlink_node(buddy_t *b, uint32_t x) {
    unsigned k = b->n[x].order;
    if (b->n[x].prev != ML__NIL) b->n[b->n[x].prev].next = b->n[x].next;
    else b->heads[k] = b->n[x].next;
    if (b->n[x].next != ML__NIL) b->n[b->n[x].next].prev = b->n[x].prev;
    if (b->heads[k] == ML__NIL) b->nonempty &= ~(1ull << k);
    b->free_bytes -= 1ull << k;
    b->n[x].next = b->nrecycle;
    b->nrecycle = x;
}

static void unlink_free(buddy_t *b, uint32_t x) {
    h_del(b, b->n[x].addr);
    unlink_node(b, x);
}

/* Frees a block, merging with its buddy while it is free. The buddy's slot
 * in the address map is found once, to test it and to remove it. */
static int release(buddy_t *b, uint64_t addr, unsigned k, bool count) {
    while (k < b->space_order) {
        uint64_t buddy = addr ^ (1ull << k);
        bslot_t *s = bfree_find(&b->h, buddy + 1);
        if (!s || b->n[s->node].order != k) break;
        unlink_node(b, s->node);
        bfree_remove(&b->h, s);
        if (buddy < addr) addr = buddy;
        k++;
        if (count) b->base.merges++;
    }
    return push_free(b, addr, k);
}

static int grow(buddy_t *b, unsigned k) {
    if (!b->has_space) {
        b->space_order = k > 12 ? k : 12;
        b->has_space = true;
        return push_free(b, 0, b->space_order);
    }
    /* The arena doubles; its new upper half is free and may merge with the old whole. */
    unsigned old = b->space_order++;
    return release(b, 1ull << old, old, false);
}

static int buddy_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block) {
    buddy_t *b = (buddy_t *)p;
    uint64_t size = op->size ? op->size : 1, align = ml__op_align(p, op);
    if (align > size) size = align;
    unsigned k = ml__log2_ceil(size);
    if (k < b->min_order) k = b->min_order;
    if (k >= 62) return -ENOMEM;
    if (op->id >= b->idcap) {
        uint32_t cap = b->idcap;
        if (ml__sim_grow((void **)&b->id_addr, &cap, op->id, sizeof *b->id_addr, 0) < 0) return -ENOMEM;
        if (ml__sim_grow((void **)&b->id_order, &b->idcap2, op->id, 1, 0) < 0) return -ENOMEM;
        b->idcap = cap;
    }
    p->search_steps++;
    uint64_t bits = b->nonempty & (~0ull << k);
    while (!bits) {
        if (grow(b, k) < 0) return -ENOMEM;
        bits = b->nonempty & (~0ull << k);
    }
    unsigned j = (unsigned)__builtin_ctzll(bits);
    uint32_t x = b->heads[j];
    uint64_t a = b->n[x].addr;
    unlink_free(b, x);
    while (j > k) {
        j--;
        if (push_free(b, a + (1ull << j), j) < 0) return -ENOMEM;
        p->splits++;
    }
    b->id_addr[op->id] = a;
    b->id_order[op->id] = (uint8_t)k;
    if (ml__sim_extent_add(p, a, 1ull << k) < 0) return -ENOMEM;
    *addr = a;
    *block = 1ull << k;
    return 0;
}

static void buddy_free(ml_sim_policy_t *p, uint32_t id) {
    buddy_t *b = (buddy_t *)p;
    uint64_t a = b->id_addr[id];
    unsigned k = b->id_order[id];
    ml__sim_extent_remove(p, a, 1ull << k);
    release(b, a, k, true);
}

static void buddy_summary(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest) {
    const buddy_t *b = (const buddy_t *)p;
    *free_bytes = b->free_bytes;
    *largest = b->nonempty ? 1ull << (63 - __builtin_clzll(b->nonempty)) : 0;
}

static uint64_t buddy_state(const ml_sim_policy_t *p) {
    const buddy_t *b = (const buddy_t *)p;
    return sizeof *b + (uint64_t)b->ncap * sizeof *b->n + b->h.cap * sizeof(bslot_t) + (uint64_t)b->idcap * 9;
}

static void buddy_destroy(ml_sim_policy_t *p) {
    buddy_t *b = (buddy_t *)p;
    free(b->n);
    ml_map_free(&b->h);
    free(b->id_addr);
    free(b->id_order);
    free(b);
}

/* A free reads its address and order by id, then the address's page
 * counter. */
static void buddy_prefetch(const ml_sim_policy_t *p, const ml_sim_op_t *op, int stage) {
    const buddy_t *b = (const buddy_t *)p;
    if (op->type != ML_SIM_FREE || op->id >= b->idcap || op->id >= b->idcap2 || stage == 2) return;
    if (stage == 0) {
        __builtin_prefetch(&b->id_addr[op->id]);
        __builtin_prefetch(&b->id_order[op->id]);
        return;
    }
    ml__sim_prefetch_page(p, b->id_addr[op->id]);
}
static int buddy_reserve(ml_sim_policy_t *p, uint32_t ids) {
    buddy_t *b = (buddy_t *)p;
    uint32_t cap = b->idcap;
    if (ml__sim_reserve_ids((void **)&b->id_addr, &cap, ids, sizeof *b->id_addr, 0) < 0) return -ENOMEM;
    if (ml__sim_reserve_ids((void **)&b->id_order, &b->idcap2, ids, 1, 0) < 0) return -ENOMEM;
    b->idcap = cap;
    return 0;
}

static const ml__sim_vt_t buddy_vt = {
    .reserve = buddy_reserve,
    .prefetch = buddy_prefetch,
    .alloc = buddy_alloc,
    .free = buddy_free,
    .free_summary = buddy_summary,
    .state_bytes = buddy_state,
    .destroy = buddy_destroy,
};

int ml_sim_buddy_new(const ml_sim_config_t *c, ml_sim_policy_t **out) {
    buddy_t *b = calloc(1, sizeof *b);
    if (!b) return -ENOMEM;
    ml__sim_init(&b->base, &buddy_vt, "buddy", c, false);
    for (int i = 0; i < 64; i++) b->heads[i] = ML__NIL;
    b->nrecycle = ML__NIL;
    b->min_order = ml__log2_ceil(b->base.cfg.align < 16 ? 16 : b->base.cfg.align);
    *out = &b->base;
    return 0;
}
