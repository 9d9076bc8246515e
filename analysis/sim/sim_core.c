/* sim_core.c - what every policy shares: id checks, live sums, page
 * accounting, step counters, the peak snapshot and the metrics. Below the
 * policies: the registry that names them is sim_registry.c. */
#include "sim_internal.h"

void ml_sim_config_default(ml_sim_config_t *c) {
    c->page_size = 4096;
    c->align = 16;
    c->header = 8;
}

void ml__sim_init(ml_sim_policy_t *p, const ml__sim_vt_t *vt, const char *name, const ml_sim_config_t *c,
                  bool sparse_pages) {
    p->vt = vt;
    snprintf(p->name, sizeof p->name, "%s", name);
    if (c) p->cfg = *c;
    else ml_sim_config_default(&p->cfg);
    p->pages.shift = ml__log2_floor(p->cfg.page_size);
    p->pages.sparse = sparse_pages;
    p->pages.addresses = sparse_pages;
    p->known_fragmentation = true;
    p->known_cost = true;
}

/* ------------------------------------------------------------------------- */
/* Pages                                                                      */
/* ------------------------------------------------------------------------- */

/* The dense table covers the simulated address space from 0, a counter (4
 * bytes) per page. A program that asks for a few huge blocks (malloc of
 * 16 GiB that it never touches) spreads the simulated heap over a range
 * whose table would be hundreds of MiB per policy, with few counters in
 * use: past this many pages (16 GiB of address space, a 16 MiB table) the
 * counter moves its non-zero counts to the sparse hash and stays there. */
#define DENSE_PAGES_MAX ((uint64_t)1 << 22)

static int pages_to_sparse(ml__pages_t *pg) {
    for (uint64_t i = 0; i < pg->cap; i++) {
        if (!pg->cnt[i]) continue;
        bool existed;
        ml__page_slot_t *s = ml__page_slots_put(&pg->slots, i + 1, &existed);
        if (!s) return -ENOMEM;
        s->count = pg->cnt[i];
    }
    free(pg->cnt);
    pg->cnt = NULL;
    pg->cap = 0;
    pg->sparse = true;
    return 0;
}

/* The page counter's paths that sim_internal.h does not inline: the
 * first use of a page past the dense table, and the sparse hash. */
int ml__sim_page_inc_slow(ml__pages_t *pg, uint64_t page) {
    if (!pg->sparse && page >= pg->cap && page >= DENSE_PAGES_MAX && pages_to_sparse(pg) < 0) return -ENOMEM;
    if (!pg->sparse) {
        if (page >= pg->cap) {
            uint64_t ncap = pg->cap ? pg->cap * 2 : 1024;
            while (ncap <= page) ncap *= 2;
            uint32_t *n = realloc(pg->cnt, ncap * sizeof *n);
            if (!n) return -ENOMEM;
            memset(n + pg->cap, 0, (ncap - pg->cap) * sizeof *n);
            ml_advise_huge(n, ncap * sizeof *n);
            pg->cnt = n;
            pg->cap = ncap;
        }
        if (pg->cnt[page]++ == 0) pg->held++;
        return 0;
    }
    bool existed;
    ml__page_slot_t *s = ml__page_slots_put(&pg->slots, page + 1, &existed);
    if (!s) return -ENOMEM;
    if (!existed) pg->held++;
    s->count++;
    return 0;
}

void ml__sim_page_dec_slow(ml__pages_t *pg, uint64_t page) {
    if (!pg->sparse) {
        if (page < pg->cap && pg->cnt[page] && --pg->cnt[page] == 0) pg->held--;
        return;
    }
    ml__page_slot_t *s = ml__page_slots_find(&pg->slots, page + 1);
    if (!s || --s->count) return;
    pg->held--;
    ml__page_slots_remove(&pg->slots, s);
}

/* ------------------------------------------------------------------------- */
/* Operations                                                                 */
/* ------------------------------------------------------------------------- */

uint64_t ml_sim_footprint(const ml_sim_policy_t *p) {
    return ml__sim_footprint(p);
}

static void snapshot(const ml_sim_policy_t *p, ml_sim_frag_t *s) {
    memset(s, 0, sizeof *s);
    s->live_requested = p->live_req;
    s->live_blocks = p->live_blk;
    s->live_count = p->live_count;
    s->footprint = ml_sim_footprint(p);
    if (p->known_fragmentation) p->vt->free_summary(p, &s->free_bytes, &s->largest_free);
    s->internal = s->live_blocks ? 1.0 - (double)s->live_requested / (double)s->live_blocks : 0.0;
    s->external = s->free_bytes ? 1.0 - (double)s->largest_free / (double)s->free_bytes : 0.0;
    s->page_utilization = s->footprint ? (double)s->live_requested / (double)s->footprint : 1.0;
    s->op = p->ops;
    s->time_ms = p->now_ms;
}

/* The paths of ml__sim_apply (sim_internal.h) that are not taken op by op. */
void ml__sim_new_peak(ml_sim_policy_t *p, uint64_t fp) {
    p->peak_footprint = fp;
    snapshot(p, &p->at_peak);
}

int ml__sim_ids_grow(ml_sim_policy_t *p, uint32_t id) {
    return ml__sim_grow((void **)&p->ids, &p->idcap, id, sizeof *p->ids, 0);
}

int ml_sim_alloc(ml_sim_policy_t *p, uint32_t id, uint64_t size, uint32_t align, uint64_t *addr) {
    ml_sim_op_t op = {.type = ML_SIM_ALLOC, .id = id, .size = size};
    if (align > 1) op.align = (uint8_t)ml__log2_ceil(align);
    return ml__sim_do_alloc(p, &op, addr);
}

int ml_sim_free(ml_sim_policy_t *p, uint32_t id) {
    return ml__sim_do_free(p, id);
}

int ml_sim_apply(ml_sim_policy_t *p, const ml_sim_op_t *op) {
    return ml__sim_apply(p, op);
}

void ml_sim_mallinfo(ml_sim_policy_t *p, uint64_t held_bytes) {
    if (held_bytes > p->os_held_peak) p->os_held_peak = held_bytes;
}

int ml_sim_reserve(ml_sim_policy_t *p, uint32_t ids) {
    if (ml__sim_reserve_ids((void **)&p->ids, &p->idcap, ids, sizeof *p->ids, 0) < 0) return -ENOMEM;
    return p->vt->reserve ? p->vt->reserve(p, ids) : 0;
}

int ml_sim_block(const ml_sim_policy_t *p, uint32_t id, uint64_t *block) {
    if (id >= p->idcap || !p->ids[id].req) return -ENOENT;
    if (block) *block = p->ids[id].blk;
    return 0;
}

void ml_sim_metrics(const ml_sim_policy_t *p, ml_sim_metrics_t *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", p->name);
    m->peak_footprint = p->peak_footprint;
    m->peak_extent = p->peak_extent;
    m->at_peak = p->at_peak;
    snapshot(p, &m->at_end);
    m->allocs = p->allocs;
    m->frees = p->frees;
    m->failed = p->failed;
    m->search_steps = p->search_steps;
    m->splits = p->splits;
    m->merges = p->merges;
    m->max_op_steps = p->max_op_steps;
    uint64_t ops = p->allocs + p->frees;
    m->cost_per_op = ops ? (double)(p->search_steps + p->splits + p->merges) / (double)ops : 0.0;
    m->known_fragmentation = p->known_fragmentation;
    m->known_cost = p->known_cost;
    m->os_held_peak = p->os_held_peak;
    m->state_bytes = (uint64_t)p->idcap * 16 + p->pages.cap * 4 + p->pages.slots.cap * sizeof(ml__page_slot_t) +
                     (p->vt->state_bytes ? p->vt->state_bytes(p) : 0);
    m->cpu_seconds = p->cpu_seconds;
}

const char *ml_sim_name(const ml_sim_policy_t *p) {
    return p->name;
}

void ml_sim_policy_free(ml_sim_policy_t *p) {
    if (!p) return;
    free(p->ids);
    free(p->pages.cnt);
    ml_map_free(&p->pages.slots);
    p->vt->destroy(p);
}

uint64_t ml_sim_pow2_block(uint64_t size) {
    if (size <= 16) return 16;
    return (uint64_t)1 << ml__log2_ceil(size);
}
