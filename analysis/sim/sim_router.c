/* sim_router.c - a what-if as a policy: route some ops to a dedicated
 * allocator and the rest to a general one, and measure the sum.
 *
 * The footprint is the general part's plus the dedicated part's, op by op,
 * so the router's peak is the real peak of the combined heap, not the sum of
 * two peaks reached at different times. With a `compare` policy (the same
 * general allocator fed every op) it also records the largest gap between
 * the two footprints and when it happened: the pages the routed blocks made
 * the general allocator hold at that moment (the advisor's pinned pages).
 * In place of the compare policy, a router may read that policy's footprint
 * back from a series recorded when the same ops went through it before
 * (ml_sim_router_new_series): the same numbers, without the copy's work.
 */
#include "sim_internal.h"

typedef struct {
    ml_sim_policy_t base;
    ml_sim_route_fn route;
    void *ctx;
    ml_sim_policy_t *g, *d, *cmp;
    void *series;        /* in place of cmp: its footprint, read back (sim_oplog.c) */
    uint64_t series_max; /* its largest value: cmp's peak */
    uint8_t *where;
    uint32_t idcap;
    uint64_t max_gain, d_live, d_bytes;
    uint32_t max_gain_ms;
    uint64_t fp; /* the parts' footprints summed after the last op */
} router_t;

static void sync_counters(router_t *r) {
    r->base.search_steps = r->g->search_steps + r->d->search_steps;
    r->base.splits = r->g->splits + r->d->splits;
    r->base.merges = r->g->merges + r->d->merges;
}

/* After each op of a part: the counters, the footprint (the generic part
 * asks for it after every op, for the peak: summed once here, not again
 * there) and the gain. */
static void after_part_op(router_t *r) {
    sync_counters(r);
    r->fp = ml__sim_footprint(r->g) + ml__sim_footprint(r->d);
    if (!r->cmp && !r->series) return;
    uint64_t mine = r->fp;
    uint64_t theirs = r->cmp ? ml__sim_footprint(r->cmp) : ml__sim_series_at(r->series, r->base.seq);
    if (theirs > mine && theirs - mine > r->max_gain) {
        r->max_gain = theirs - mine;
        r->max_gain_ms = r->base.now_ms;
        r->d_live = r->d->live_count;
        r->d_bytes = r->d->live_req;
    }
}

static int router_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block) {
    router_t *r = (router_t *)p;
    if (op->id >= r->idcap && ml__sim_grow((void **)&r->where, &r->idcap, op->id, 1, 0) < 0) return -ENOMEM;
    bool ded = r->route(r->ctx, op);
    ml_sim_policy_t *sub = ded ? r->d : r->g;
    int rc = ml__sim_apply(sub, op);
    if (rc < 0) {
        r->fp = ml__sim_footprint(r->g) + ml__sim_footprint(r->d);
        return rc;
    }
    if (r->cmp) ml__sim_apply(r->cmp, op);
    r->where[op->id] = ded;
    *block = sub->ids[op->id].blk; /* ml_sim_block(), which cannot fail here */
    *addr = 0;
    after_part_op(r);
    return 0;
}

static void router_free(ml_sim_policy_t *p, uint32_t id) {
    router_t *r = (router_t *)p;
    ml_sim_op_t op = {.type = ML_SIM_FREE, .id = id, .time_ms = p->now_ms};
    const ml_sim_op_t *o = p->cur_op ? p->cur_op : &op;
    ml__sim_apply(r->where[id] ? r->d : r->g, o);
    if (r->cmp) ml__sim_apply(r->cmp, o);
    after_part_op(r);
}

static void router_summary(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest) {
    const router_t *r = (const router_t *)p;
    uint64_t f1 = 0, l1 = 0, f2 = 0, l2 = 0;
    r->g->vt->free_summary(r->g, &f1, &l1);
    r->d->vt->free_summary(r->d, &f2, &l2);
    *free_bytes = f1 + f2;
    *largest = l1 > l2 ? l1 : l2;
}

static uint64_t router_footprint(const ml_sim_policy_t *p) {
    return ((const router_t *)p)->fp;
}

static uint64_t router_state(const ml_sim_policy_t *p) {
    const router_t *r = (const router_t *)p;
    ml_sim_metrics_t m;
    uint64_t s = sizeof *r + r->idcap;
    ml_sim_metrics(r->g, &m);
    s += m.state_bytes;
    ml_sim_metrics(r->d, &m);
    s += m.state_bytes;
    if (r->cmp) {
        ml_sim_metrics(r->cmp, &m);
        s += m.state_bytes;
    }
    return s;
}

static void router_destroy(ml_sim_policy_t *p) {
    router_t *r = (router_t *)p;
    ml_sim_policy_free(r->g);
    ml_sim_policy_free(r->d);
    ml_sim_policy_free(r->cmp);
    ml__sim_series_reader_free(r->series);
    free(r->where);
    free(r);
}

/* The parts see the same ids (the dedicated one only some of them). */
static int router_reserve(ml_sim_policy_t *p, uint32_t ids) {
    router_t *r = (router_t *)p;
    if (ml__sim_reserve_ids((void **)&r->where, &r->idcap, ids, 1, 0) < 0 || ml_sim_reserve(r->g, ids) < 0 ||
        ml_sim_reserve(r->d, ids) < 0 || (r->cmp && ml_sim_reserve(r->cmp, ids) < 0))
        return -ENOMEM;
    return 0;
}

static const ml__sim_vt_t router_vt = {
    .reserve = router_reserve,
    .alloc = router_alloc,
    .free = router_free,
    .free_summary = router_summary,
    .state_bytes = router_state,
    .destroy = router_destroy,
    .footprint = router_footprint,
};

int ml_sim_router_new(const char *name, ml_sim_route_fn route, void *ctx, ml_sim_policy_t *general,
                      ml_sim_policy_t *dedicated, ml_sim_policy_t *compare, ml_sim_policy_t **out) {
    router_t *r = general && dedicated && route ? calloc(1, sizeof *r) : NULL;
    if (!r) {
        ml_sim_policy_free(general);
        ml_sim_policy_free(dedicated);
        ml_sim_policy_free(compare);
        return general && dedicated && route ? -ENOMEM : -EINVAL;
    }
    ml__sim_init(&r->base, &router_vt, name, &general->cfg, false);
    r->route = route;
    r->ctx = ctx;
    r->g = general;
    r->d = dedicated;
    r->cmp = compare;
    r->base.known_fragmentation = general->known_fragmentation && dedicated->known_fragmentation;
    *out = &r->base;
    return 0;
}

int ml_sim_router_new_series(const char *name, ml_sim_route_fn route, void *ctx, ml_sim_policy_t *general,
                             ml_sim_policy_t *dedicated, const ml_sim_fpseries_t *compare,
                             ml_sim_policy_t **out) {
    void *rd = ml_sim_fpseries_ok(compare) ? ml__sim_series_reader_new(compare) : NULL;
    if (!rd) {
        ml_sim_policy_free(general);
        ml_sim_policy_free(dedicated);
        return ml_sim_fpseries_ok(compare) ? -ENOMEM : -EINVAL;
    }
    int rc = ml_sim_router_new(name, route, ctx, general, dedicated, NULL, out);
    if (rc < 0) {
        ml__sim_series_reader_free(rd);
        return rc;
    }
    router_t *r = (router_t *)*out;
    r->series = rd;
    r->series_max = ml__sim_fpseries_max(compare);
    return 0;
}

void ml_sim_router_gain(const ml_sim_policy_t *p, ml_sim_router_gain_t *out) {
    const router_t *r = (const router_t *)p;
    memset(out, 0, sizeof *out);
    out->max_gain_bytes = r->max_gain;
    out->max_gain_time_ms = r->max_gain_ms;
    out->dedicated_live_blocks = r->d_live;
    out->dedicated_live_bytes = r->d_bytes;
    if (r->cmp) {
        ml_sim_metrics_t m;
        ml_sim_metrics(r->cmp, &m);
        out->compare_peak = m.peak_footprint;
    } else if (r->series) {
        out->compare_peak = r->series_max;
        out->compare_failed = ml__sim_series_reader_failed(r->series);
    }
    ml_sim_metrics(r->d, &out->dedicated);
    ml_sim_metrics(r->g, &out->general);
}
