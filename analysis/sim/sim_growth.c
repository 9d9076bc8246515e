/* sim_growth.c - what-if "reserve capacity": reallocs that grow a block
 * geometrically instead of to the exact size.
 *
 * Wraps another policy. A realloc (the driver's free + alloc pair flagged
 * ML_SIM_F_REALLOC, from one thread) whose new size fits the block's
 * capacity costs nothing: no copy, no call into the allocator, the block
 * stays. One that does not fit moves to a block of max(size, capacity *
 * factor), as std::vector and git's ALLOC_GROW do. The block sizes the
 * inner policy sees are the capacities, so the memory the reserve costs is
 * counted too. Counts the reallocs and the bytes of copying avoided: the
 * bytes of an avoided realloc count only when the program's allocator moved
 * the block (the recorded addresses differ, or are unknown); a realloc it
 * grew in place copied nothing, so reserving saves the call alone.
 */
#include "sim_internal.h"

#define GROWTH_STASH 1024

typedef struct {
    uint32_t inner, thread; /* thread + 1; 0 = empty */
    uint64_t size;          /* bytes in use when it was "freed" by the realloc */
    uint64_t ptr;           /* its recorded address (0: unknown) */
} pending_t;

typedef struct {
    ml_sim_policy_t base;
    ml_sim_policy_t *in;
    double factor;
    uint32_t *o2i; /* outer id -> inner id */
    uint32_t ocap;
    uint64_t *cap; /* inner id -> capacity */
    uint32_t icap, next_inner, nfree;
    uint32_t *free_inner;
    uint32_t fcap;
    pending_t stash[GROWTH_STASH];
    uint64_t avoided, avoided_bytes, moves;
} growth_t;

static int inner_id(growth_t *g, uint32_t *out) {
    if (g->nfree) {
        *out = g->free_inner[--g->nfree];
        return 0;
    }
    uint32_t j = g->next_inner;
    if (ml__sim_grow((void **)&g->cap, &g->icap, j, sizeof *g->cap, 0) < 0) return -ENOMEM;
    g->next_inner++;
    *out = j;
    return 0;
}

static void inner_release(growth_t *g, uint32_t j) {
    ml_sim_free(g->in, j);
    if (g->nfree == g->fcap) {
        uint32_t cap = g->fcap;
        if (ml__sim_grow((void **)&g->free_inner, &cap, g->nfree, sizeof *g->free_inner, 0) < 0) return;
        g->fcap = cap;
    }
    g->free_inner[g->nfree++] = j;
}

static int inner_alloc(growth_t *g, const ml_sim_op_t *op, uint64_t size, uint32_t *j) {
    if (inner_id(g, j) < 0) return -ENOMEM;
    ml_sim_op_t o = *op;
    o.id = *j;
    o.size = size;
    o.flags = 0;
    int rc = ml_sim_apply(g->in, &o);
    if (rc < 0) return rc;
    g->cap[*j] = size;
    return 0;
}

static int growth_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block) {
    growth_t *g = (growth_t *)p;
    if (op->id >= g->ocap && ml__sim_grow((void **)&g->o2i, &g->ocap, op->id, sizeof *g->o2i, 0xff) < 0)
        return -ENOMEM;
    pending_t *st = &g->stash[op->thread % GROWTH_STASH];
    uint32_t j;
    int rc;
    if ((op->flags & ML_SIM_F_REALLOC) && st->thread == op->thread + 1u) {
        st->thread = 0;
        if (op->size <= g->cap[st->inner]) { /* fits the reserve: nothing happens */
            g->avoided++;
            /* A copy is avoided only where the program's allocator moved
             * the block; one it grew in place copied nothing. */
            if (!st->ptr || st->ptr != op->ptr) g->avoided_bytes += st->size;
            j = st->inner;
        } else {
            uint64_t c = (uint64_t)((double)g->cap[st->inner] * g->factor);
            if (c < op->size) c = op->size;
            inner_release(g, st->inner);
            g->moves++;
            if ((rc = inner_alloc(g, op, c, &j)) < 0) return rc;
        }
    } else {
        if (st->thread == op->thread + 1u) { /* a realloc's old block nobody took */
            st->thread = 0;
            inner_release(g, st->inner);
        }
        if ((rc = inner_alloc(g, op, op->size, &j)) < 0) return rc;
    }
    g->o2i[op->id] = j;
    *addr = 0;
    *block = g->cap[j];
    return 0;
}

static void growth_free(ml_sim_policy_t *p, uint32_t id) {
    growth_t *g = (growth_t *)p;
    uint32_t j = g->o2i[id];
    const ml_sim_op_t *op = p->cur_op;
    if (op && (op->flags & ML_SIM_F_REALLOC)) {
        pending_t *st = &g->stash[op->thread % GROWTH_STASH];
        if (st->thread) inner_release(g, st->inner);
        *st = (pending_t){.inner = j, .thread = op->thread + 1u, .size = p->ids[id].req - 1,
                             .ptr = op->ptr};
        return;
    }
    inner_release(g, j);
}

static void growth_summary(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest) {
    const growth_t *g = (const growth_t *)p;
    g->in->vt->free_summary(g->in, free_bytes, largest);
}

static uint64_t growth_footprint(const ml_sim_policy_t *p) {
    return ml__sim_footprint(((const growth_t *)p)->in);
}

static uint64_t growth_state(const ml_sim_policy_t *p) {
    const growth_t *g = (const growth_t *)p;
    ml_sim_metrics_t m;
    ml_sim_metrics(g->in, &m);
    return sizeof *g + (uint64_t)g->ocap * 4 + (uint64_t)g->icap * 8 + (uint64_t)g->fcap * 4 + m.state_bytes;
}

static void growth_destroy(ml_sim_policy_t *p) {
    growth_t *g = (growth_t *)p;
    ml_sim_policy_free(g->in);
    free(g->o2i);
    free(g->cap);
    free(g->free_inner);
    free(g);
}

/* Inner ids are recycled too, so as many as the outer ones. */
static int growth_reserve(ml_sim_policy_t *p, uint32_t ids) {
    growth_t *g = (growth_t *)p;
    if (ml__sim_reserve_ids((void **)&g->o2i, &g->ocap, ids, sizeof *g->o2i, 0xff) < 0 ||
        ml__sim_reserve_ids((void **)&g->cap, &g->icap, ids, sizeof *g->cap, 0) < 0)
        return -ENOMEM;
    return ml_sim_reserve(g->in, ids);
}

static const ml__sim_vt_t growth_vt = {
    .reserve = growth_reserve,
    .alloc = growth_alloc,
    .free = growth_free,
    .free_summary = growth_summary,
    .state_bytes = growth_state,
    .destroy = growth_destroy,
    .footprint = growth_footprint,
};

int ml_sim_growth_new(ml_sim_policy_t *inner, double factor, ml_sim_policy_t **out) {
    growth_t *g = inner && factor >= 1.0 ? calloc(1, sizeof *g) : NULL;
    if (!g) {
        ml_sim_policy_free(inner);
        return inner && factor >= 1.0 ? -ENOMEM : -EINVAL;
    }
    ml__sim_init(&g->base, &growth_vt, "reserve_capacity", &inner->cfg, false);
    g->in = inner;
    g->factor = factor;
    *out = &g->base;
    return 0;
}

void ml_sim_growth_stats(const ml_sim_policy_t *p, uint64_t *avoided, uint64_t *avoided_bytes, uint64_t *moves) {
    const growth_t *g = (const growth_t *)p;
    *avoided = g->avoided;
    *avoided_bytes = g->avoided_bytes;
    *moves = g->moves;
}
