/* sim_freelist.c - the core shared by the free-list policies (first, next,
 * best and worst fit, segregated fit, TLSF).
 *
 * The heap is one contiguous range [0, top) grown at the top like sbrk. A
 * block is `need` = max(min_block, round_up(size + header, granule)) bytes,
 * plus (align - granule) of slack when the request wants more alignment than
 * the granule. Allocation asks the policy's find() for a free block of at
 * least `need`; when there is none the heap grows by exactly `need`. A free
 * block larger than `need` by at least min_block is split and the remainder
 * goes back to the index (one split). Free coalesces with both physical
 * neighbours at once (one merge each) and gives a free block at the top back
 * (the top shrinks), so the free index only holds holes below the top.
 *
 * Free index: a treap (randomised balanced tree) keyed by address, or by
 * (size, address) for best and worst fit, with each subtree's node count and
 * largest size. The count lets first and next fit charge the steps the
 * textbook address-ordered list would take (the rank of the block found)
 * while the tree finds it in O(log n). Segregated fit and TLSF use class
 * lists with bitmaps instead.
 */
#include "sim_internal.h"

#define N(x) (f->n[(x)])
#define T(x) (f->t[(x)])

/* The node tables (and the treap's) for ncap nodes. */
static int nodes_grow(ml__fl_t *f, uint32_t ncap) {
    ml__fl_node_t *n = realloc(f->n, (size_t)ncap * sizeof *n);
    if (!n) return -ENOMEM;
    ml_advise_huge(n, (size_t)ncap * sizeof *n);
    f->n = n;
    if (!f->ops->lists) {
        ml__fl_tnode_t *t = realloc(f->t, (size_t)ncap * sizeof *t);
        if (!t) return -ENOMEM;
        ml_advise_huge(t, (size_t)ncap * sizeof *t);
        f->t = t;
    }
    f->ncap = ncap;
    return 0;
}

static uint32_t node_new(ml__fl_t *f) {
    if (f->nrecycle != ML__NIL) {
        uint32_t x = f->nrecycle;
        f->nrecycle = N(x).l;
        return x;
    }
    if (f->nused == f->ncap && nodes_grow(f, f->ncap ? f->ncap * 2 : 1024) < 0) return ML__NIL;
    return f->nused++;
}

static void node_release(ml__fl_t *f, uint32_t x) {
    N(x).l = f->nrecycle;
    f->nrecycle = x;
}

/* ------------------------------------------------------------------------- */
/* Treap                                                                      */
/* ------------------------------------------------------------------------- */

static inline bool key_less(const ml__fl_t *f, uint32_t a, uint32_t b) {
    const ml__fl_node_t *x = &f->n[a], *y = &f->n[b];
    if (f->ops->tree_by_size && x->size != y->size) return x->size < y->size;
    return x->addr < y->addr;
}

static inline void upd(ml__fl_t *f, uint32_t x) {
    uint64_t m = N(x).size;
    uint32_t c = 1, l = N(x).l, r = N(x).r;
    if (l != ML__NIL) {
        if (T(l).maxsz > m) m = T(l).maxsz;
        c += T(l).cnt;
    }
    if (r != ML__NIL) {
        if (T(r).maxsz > m) m = T(r).maxsz;
        c += T(r).cnt;
    }
    T(x).maxsz = m;
    T(x).cnt = c;
}

/* Splits t into the nodes ordered before x (*a) and the others (*b). */
static void split(ml__fl_t *f, uint32_t t, uint32_t x, uint32_t *a, uint32_t *b) {
    if (t == ML__NIL) {
        *a = *b = ML__NIL;
        return;
    }
    uint32_t p, q;
    if (key_less(f, t, x)) {
        split(f, N(t).r, x, &p, &q);
        N(t).r = p;
        upd(f, t);
        *a = t;
        *b = q;
    } else {
        split(f, N(t).l, x, &p, &q);
        N(t).l = q;
        upd(f, t);
        *a = p;
        *b = t;
    }
}

static uint32_t merge(ml__fl_t *f, uint32_t a, uint32_t b) {
    if (a == ML__NIL) return b;
    if (b == ML__NIL) return a;
    if (T(a).prio > T(b).prio) {
        N(a).r = merge(f, N(a).r, b);
        upd(f, a);
        return a;
    }
    N(b).l = merge(f, a, N(b).l);
    upd(f, b);
    return b;
}

static uint32_t insert(ml__fl_t *f, uint32_t t, uint32_t x) {
    if (t == ML__NIL) {
        upd(f, x);
        return x;
    }
    if (T(x).prio > T(t).prio) {
        uint32_t a, b;
        split(f, t, x, &a, &b);
        N(x).l = a;
        N(x).r = b;
        upd(f, x);
        return x;
    }
    if (key_less(f, x, t)) N(t).l = insert(f, N(t).l, x);
    else N(t).r = insert(f, N(t).r, x);
    upd(f, t);
    return t;
}

static uint32_t erase(ml__fl_t *f, uint32_t t, uint32_t x) {
    if (t == x) return merge(f, N(t).l, N(t).r);
    if (key_less(f, x, t)) N(t).l = erase(f, N(t).l, x);
    else N(t).r = erase(f, N(t).r, x);
    upd(f, t);
    return t;
}

uint32_t ml__fl_tree_lower_bound_size(const ml__fl_t *f, uint64_t need) {
    uint32_t t = f->root, best = ML__NIL;
    while (t != ML__NIL) {
        if (f->n[t].size >= need) {
            best = t;
            t = f->n[t].l;
        } else {
            t = f->n[t].r;
        }
    }
    return best;
}

uint64_t ml__fl_tree_rank(const ml__fl_t *f, uint64_t addr) {
    uint64_t rank = 0;
    uint32_t t = f->root;
    while (t != ML__NIL) {
        if (f->n[t].addr < addr) {
            uint32_t l = f->n[t].l;
            rank += 1 + (l != ML__NIL ? f->t[l].cnt : 0);
            t = f->n[t].r;
        } else {
            t = f->n[t].l;
        }
    }
    return rank;
}

static uint32_t first_fit_rec(const ml__fl_t *f, uint32_t t, uint64_t lo, uint64_t need) {
    while (t != ML__NIL && f->t[t].maxsz >= need) {
        if (f->n[t].addr < lo) {
            t = f->n[t].r;
            continue;
        }
        uint32_t res = first_fit_rec(f, f->n[t].l, lo, need);
        if (res != ML__NIL) return res;
        if (f->n[t].size >= need) return t;
        t = f->n[t].r;
    }
    return ML__NIL;
}

uint32_t ml__fl_tree_first_fit(const ml__fl_t *f, uint64_t lo, uint64_t need) {
    return first_fit_rec(f, f->root, lo, need);
}

/* ------------------------------------------------------------------------- */
/* Free index                                                                 */
/* ------------------------------------------------------------------------- */

static inline void bit_set(ml__fl_t *f, uint32_t c) {
    f->bitmap[c >> 6] |= 1ull << (c & 63);
    f->tlsf_sl[c >> 4] |= 1u << (c & 15);
    f->tlsf_fl |= 1ull << (c >> 4);
}

static inline void bit_clear(ml__fl_t *f, uint32_t c) {
    f->bitmap[c >> 6] &= ~(1ull << (c & 63));
    f->tlsf_sl[c >> 4] &= ~(1u << (c & 15));
    if (!f->tlsf_sl[c >> 4]) f->tlsf_fl &= ~(1ull << (c >> 4));
}

static void index_insert(ml__fl_t *f, uint32_t x) {
    N(x).free = 1;
    f->free_bytes += N(x).size;
    f->free_count++;
    if (f->ops->lists) {
        uint32_t c = f->ops->cls(f, N(x).size);
        N(x).cls = c;
        N(x).l = ML__NIL;
        N(x).r = f->heads[c];
        if (f->heads[c] != ML__NIL) N(f->heads[c]).l = x;
        else bit_set(f, c);
        f->heads[c] = x;
        return;
    }
    f->rng ^= f->rng << 13;
    f->rng ^= f->rng >> 7;
    f->rng ^= f->rng << 17;
    T(x).prio = (uint32_t)f->rng;
    N(x).l = N(x).r = ML__NIL;
    f->root = insert(f, f->root, x);
}

static void index_remove(ml__fl_t *f, uint32_t x) {
    N(x).free = 0;
    f->free_bytes -= N(x).size;
    f->free_count--;
    if (f->ops->lists) {
        uint32_t c = N(x).cls, prv = N(x).l, nxt = N(x).r;
        if (prv != ML__NIL) N(prv).r = nxt;
        else f->heads[c] = nxt;
        if (nxt != ML__NIL) N(nxt).l = prv;
        if (f->heads[c] == ML__NIL) bit_clear(f, c);
        return;
    }
    f->root = erase(f, f->root, x);
}

uint32_t ml__fl_list_next_nonempty(ml__fl_t *f, uint32_t c) {
    if (c >= f->nclasses) return ML__NIL;
    uint32_t w = c >> 6;
    uint64_t bits = f->bitmap[w] & (~0ull << (c & 63));
    f->base.search_steps++;
    while (!bits) {
        if (++w >= (f->nclasses + 63) / 64) return ML__NIL;
        f->base.search_steps++;
        bits = f->bitmap[w];
    }
    uint32_t k = (w << 6) + (uint32_t)__builtin_ctzll(bits);
    return k < f->nclasses ? k : ML__NIL;
}

/* Largest free block of a list index: the top non-empty class, its first 64
 * blocks (a class spans at most a quarter of its lower bound, so the answer
 * is within that of the truth when the class holds more). */
static uint64_t lists_largest(const ml__fl_t *f) {
    for (int w = (int)((f->nclasses + 63) / 64) - 1; w >= 0; w--) {
        if (!f->bitmap[w]) continue;
        uint32_t c = (uint32_t)w * 64 + 63u - (uint32_t)__builtin_clzll(f->bitmap[w]);
        uint64_t m = 0;
        int k = 0;
        for (uint32_t x = f->heads[c]; x != ML__NIL && k < 64; x = f->n[x].r, k++)
            if (f->n[x].size > m) m = f->n[x].size;
        return m;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Policy interface                                                           */
/* ------------------------------------------------------------------------- */

static int fl_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block) {
    ml__fl_t *f = (ml__fl_t *)p;
    uint64_t g = p->cfg.align, align = ml__op_align(p, op);
    uint64_t size = op->size ? op->size : 1;
    uint64_t need = ml__round_up(size + p->cfg.header, g);
    if (need < f->min_block) need = f->min_block;
    if (align > g) need += align - g;
    if (op->id >= f->idcap && ml__sim_grow((void **)&f->id2n, &f->idcap, op->id, sizeof *f->id2n, 0xff) < 0)
        return -ENOMEM;
    uint32_t x = f->ops->find(f, need);
    if (x == ML__NIL) {
        x = node_new(f);
        if (x == ML__NIL) return -ENOMEM;
        memset(&N(x), 0, sizeof N(x));
        if (f->t) memset(&T(x), 0, sizeof T(x));
        N(x).addr = f->top;
        N(x).size = need;
        N(x).pprev = f->tail;
        N(x).pnext = ML__NIL;
        if (f->tail != ML__NIL) N(f->tail).pnext = x;
        f->tail = x;
        f->top += need;
    } else {
        index_remove(f, x);
        if (N(x).size - need >= f->min_block) {
            uint32_t y = node_new(f);
            if (y == ML__NIL) {
                index_insert(f, x);
                return -ENOMEM;
            }
            memset(&N(y), 0, sizeof N(y));
            if (f->t) memset(&T(y), 0, sizeof T(y));
            N(y).addr = N(x).addr + need;
            N(y).size = N(x).size - need;
            N(y).pprev = x;
            N(y).pnext = N(x).pnext;
            if (N(y).pnext != ML__NIL) N(N(y).pnext).pprev = y;
            else f->tail = y;
            N(x).pnext = y;
            N(x).size = need;
            index_insert(f, y);
            p->splits++;
        }
    }
    f->id2n[op->id] = x;
    if (f->ops->after_alloc) f->ops->after_alloc(f, N(x).addr, N(x).size);
    if (ml__sim_extent_add(p, N(x).addr, N(x).size) < 0) return -ENOMEM;
    *addr = N(x).addr + p->cfg.header;
    *block = N(x).size;
    return 0;
}

static void fl_free(ml_sim_policy_t *p, uint32_t id) {
    ml__fl_t *f = (ml__fl_t *)p;
    uint32_t x = f->id2n[id];
    f->id2n[id] = ML__NIL;
    ml__sim_extent_remove(p, N(x).addr, N(x).size);
    uint32_t prv = N(x).pprev;
    if (prv != ML__NIL && N(prv).free) {
        index_remove(f, prv);
        N(prv).size += N(x).size;
        N(prv).pnext = N(x).pnext;
        if (N(x).pnext != ML__NIL) N(N(x).pnext).pprev = prv;
        else f->tail = prv;
        node_release(f, x);
        x = prv;
        p->merges++;
    }
    uint32_t nxt = N(x).pnext;
    if (nxt != ML__NIL && N(nxt).free) {
        index_remove(f, nxt);
        N(x).size += N(nxt).size;
        N(x).pnext = N(nxt).pnext;
        if (N(nxt).pnext != ML__NIL) N(N(nxt).pnext).pprev = x;
        else f->tail = x;
        node_release(f, nxt);
        p->merges++;
    }
    if (N(x).pnext == ML__NIL) { /* the top: give it back */
        f->top = N(x).addr;
        f->tail = N(x).pprev;
        if (f->tail != ML__NIL) N(f->tail).pnext = ML__NIL;
        node_release(f, x);
        return;
    }
    index_insert(f, x);
}

static void fl_free_summary(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest) {
    const ml__fl_t *f = (const ml__fl_t *)p;
    *free_bytes = f->free_bytes;
    if (f->ops->largest) f->ops->largest(f, largest);
    else if (f->ops->lists) *largest = lists_largest(f);
    else *largest = ml__fl_tree_max(f);
}

static uint64_t fl_state_bytes(const ml_sim_policy_t *p) {
    const ml__fl_t *f = (const ml__fl_t *)p;
    return (uint64_t)f->ncap * (sizeof *f->n + (f->t ? sizeof *f->t : 0)) + (uint64_t)f->idcap * sizeof *f->id2n +
           sizeof *f;
}

static void fl_destroy(ml_sim_policy_t *p) {
    ml__fl_t *f = (ml__fl_t *)p;
    free(f->n);
    free(f->t);
    free(f->id2n);
    free(f);
}

/* A free looks up its node through id2n, then the node and its physical
 * neighbours: load id2n far ahead, the node near. */
static void fl_prefetch(const ml_sim_policy_t *p, const ml_sim_op_t *op, int stage) {
    const ml__fl_t *f = (const ml__fl_t *)p;
    if (op->type != ML_SIM_FREE || op->id >= f->idcap) return;
    if (stage == 0) {
        __builtin_prefetch(&f->id2n[op->id]);
        return;
    }
    uint32_t x = f->id2n[op->id];
    if (x >= f->ncap) return;
    if (stage == 1) {
        __builtin_prefetch(&f->n[x], 0);
        return;
    }
    const ml__fl_node_t *nd = &f->n[x];
    ml__sim_prefetch_page(p, nd->addr);
    if (nd->pprev < f->ncap) __builtin_prefetch(&f->n[nd->pprev], 0);
    if (nd->pnext < f->ncap) __builtin_prefetch(&f->n[nd->pnext], 0);
}

/* id2n for the ids, and the node table for as many nodes (every live
 * block is a node; free holes add some). */
static int fl_reserve(ml_sim_policy_t *p, uint32_t ids) {
    ml__fl_t *f = (ml__fl_t *)p;
    if (ml__sim_reserve_ids((void **)&f->id2n, &f->idcap, ids, sizeof *f->id2n, 0xff) < 0) return -ENOMEM;
    uint32_t ncap = f->ncap ? f->ncap : 1024;
    while (ncap < ids && ncap <= UINT32_MAX / 2) ncap *= 2;
    return ncap > f->ncap ? nodes_grow(f, ncap) : 0;
}

static const ml__sim_vt_t fl_vt = {
    .reserve = fl_reserve,
    .prefetch = fl_prefetch,
    .alloc = fl_alloc,
    .free = fl_free,
    .free_summary = fl_free_summary,
    .state_bytes = fl_state_bytes,
    .destroy = fl_destroy,
};

int ml__fl_new(const ml_sim_config_t *c, const ml__fl_ops_t *ops, ml_sim_policy_t **out) {
    if (c && (!c->align || (c->align & (c->align - 1)) || c->page_size < c->align ||
              (c->page_size & (c->page_size - 1))))
        return -EINVAL;
    ml__fl_t *f = calloc(1, sizeof *f);
    if (!f) return -ENOMEM;
    ml__sim_init(&f->base, &fl_vt, ops->name, c, false);
    f->ops = ops;
    f->nrecycle = f->tail = f->root = ML__NIL;
    for (uint32_t i = 0; i < ML__FL_MAX_CLASSES; i++) f->heads[i] = ML__NIL;
    f->nclasses = ML__FL_MAX_CLASSES;
    uint64_t g = f->base.cfg.align, h = f->base.cfg.header;
    /* A free block must hold its header and two list links. */
    f->min_block = h ? ml__round_up(h + 16, g) : g;
    f->rng = 0x9e3779b97f4a7c15ull;
    *out = &f->base;
    return 0;
}
