/* calltree.c - the sites' costs arranged along their stacks: the top-down
 * and bottom-up call trees of heaptrack's GUI, for the viewer.
 *
 * Only public types are used (ml_site_t, ml_frame_t): the tree is a view of
 * the site table of the last build, and holds pointers into it.
 *
 * A node stands for a function at one position of a call path: frames are
 * merged by function name and module (by address when unsymbolized), so the
 * different call lines of one function in one caller are one node, as in
 * heaptrack. Top-down, a path runs from the outermost frame (main, a thread
 * start) to frames[0], the function that called the allocator; bottom-up it
 * runs the other way. A node's inclusive cost is the sum over the sites
 * whose path passes through it, its self cost the sum over the sites whose
 * path ends there. A site whose stack repeats a function (recursion) counts
 * once per node it passes, so inclusive costs of a recursive path can exceed
 * the total; heaptrack's trees behave the same.
 */
#include "ml_analysis.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ml_calltree_node_t *v;
    size_t n, cap;
    uint64_t *key; /* per node: hash of (parent key, frame identity) */
    int32_t *slot; /* open addressing on key -> node */
    size_t slot_cap;
} tree_t;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (s && *s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static uint64_t frame_id(const ml_frame_t *f) {
    if (f->function && f->function[0] != '[')
        return mix(str_hash(f->function), str_hash(f->module));
    return mix(0x5eedull, f->address);
}

static int grow_slots(tree_t *t) {
    size_t ncap = t->slot_cap ? t->slot_cap * 2 : 1024;
    int32_t *s = malloc(ncap * sizeof *s);
    if (!s) return -ENOMEM;
    memset(s, 0xff, ncap * sizeof *s);
    for (size_t i = 0; i < t->n; i++) {
        size_t j = t->key[i] & (ncap - 1);
        while (s[j] >= 0)
            j = (j + 1) & (ncap - 1);
        s[j] = (int32_t)i;
    }
    free(t->slot);
    t->slot = s;
    t->slot_cap = ncap;
    return 0;
}

/* The child of `parent` (-1: a root) for frame f, created when missing. */
static int32_t child(tree_t *t, int32_t parent, const ml_frame_t *f) {
    uint64_t key = mix(parent < 0 ? 0x7007ull : t->key[parent], frame_id(f));
    if ((t->n + 1) * 2 > t->slot_cap && grow_slots(t) < 0) return -1;
    size_t j = key & (t->slot_cap - 1);
    for (; t->slot[j] >= 0; j = (j + 1) & (t->slot_cap - 1)) {
        const ml_calltree_node_t *c = &t->v[t->slot[j]];
        if (t->key[t->slot[j]] == key && c->parent == parent && frame_id(c->frame) == frame_id(f))
            return t->slot[j];
    }
    if (t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 256;
        ml_calltree_node_t *v = realloc(t->v, ncap * sizeof *v);
        if (!v) return -1;
        t->v = v;
        uint64_t *k = realloc(t->key, ncap * sizeof *k);
        if (!k) return -1;
        t->key = k;
        t->cap = ncap;
    }
    int32_t id = (int32_t)t->n++;
    ml_calltree_node_t *c = &t->v[id];
    memset(c, 0, sizeof *c);
    c->frame = f;
    c->parent = parent;
    c->first_child = -1;
    c->next_sibling = -1;
    c->depth = parent < 0 ? 0 : t->v[parent].depth + 1;
    t->key[id] = key;
    t->slot[j] = id;
    if (parent >= 0) {
        c->next_sibling = t->v[parent].first_child;
        t->v[parent].first_child = id;
    } else if (id > 0) {
        /* Roots form one chain from node 0, the first root. */
        int32_t r = 0;
        while (t->v[r].next_sibling >= 0)
            r = t->v[r].next_sibling;
        t->v[r].next_sibling = id;
    }
    return id;
}

static uint64_t site_cost(const ml_site_t *s, int k) {
    switch (k) {
    case ML_COST_PEAK:
        return s->peak_bytes;
    case ML_COST_LEAKED:
        return s->leaked_bytes;
    case ML_COST_ALLOCATED:
        return s->bytes_allocated;
    case ML_COST_CALLS:
        return s->alloc_calls;
    default:
        return s->temporary_allocs;
    }
}

int64_t ml_calltree_build(const ml_site_t *sites, size_t nsites, const bool *use, bool bottom_up,
                          ml_calltree_node_t **out) {
    tree_t t = {0};
    *out = NULL;
    for (size_t i = 0; i < nsites; i++) {
        const ml_site_t *s = &sites[i];
        if ((use && !use[i]) || !s->nframes) continue;
        int32_t node = -1;
        for (uint32_t k = 0; k < s->nframes; k++) {
            /* frames[] is innermost first: top-down walks it backwards. */
            const ml_frame_t *f = &s->frames[bottom_up ? k : s->nframes - 1 - k];
            node = child(&t, node, f);
            if (node < 0) goto oom;
            for (int c = 0; c < ML_COSTS; c++)
                t.v[node].incl[c] += site_cost(s, c);
        }
        for (int c = 0; c < ML_COSTS; c++)
            t.v[node].self[c] += site_cost(s, c);
    }
    free(t.key);
    free(t.slot);
    *out = t.v;
    return (int64_t)t.n;
oom:
    free(t.v);
    free(t.key);
    free(t.slot);
    return -ENOMEM;
}
