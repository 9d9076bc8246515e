/* gpu_treap.c - the augmented treap of a GPU device's live address ranges
 * (gpu_treap.h).
 *
 * Fragmentation must be known at each device's peak, which moves while the
 * trace streams by; sorting the live set at every new peak would be
 * quadratic in a growth phase. Instead the live ranges of a device sit in a
 * treap ordered by start address, and each node also summarises its subtree:
 * lowest start, highest end, bytes, and the gaps between consecutive ranges
 * (their sum, count and largest). A parent combines its children's summaries
 * with the two gaps next to itself, so insert and remove stay O(log n) and
 * the root holds the whole device's numbers at every moment.
 */
#include "gpu_treap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void ml__treap_init(treap_t *t) {
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

int ml__treap_insert(treap_t *t, uint64_t start, uint64_t size) {
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

void ml__treap_remove(treap_t *t, uint64_t start) {
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

void ml__treap_frag(const treap_t *t, uint32_t time_ms, ml_gpu_frag_t *f) {
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
