/* sim_next_fit.c - next fit: first fit that starts where the last one ended.
 *
 * Knuth's roving pointer: the search resumes after the block last allocated
 * and wraps around once. Spreads allocations over the whole heap, which
 * shortens searches but mixes lifetimes and tends to fragment more than first
 * fit (Wilson et al. 1995). Cost: blocks walked from the rover to the fit. */
#include "sim_internal.h"

static uint32_t nf_find(ml__fl_t *f, uint64_t need) {
    if (f->root == ML__NIL || ml__fl_tree_max(f) < need) {
        f->base.search_steps += f->free_count;
        return ML__NIL;
    }
    uint64_t from = ml__fl_tree_rank(f, f->rover);
    uint32_t x = ml__fl_tree_first_fit(f, f->rover, need);
    if (x != ML__NIL) {
        f->base.search_steps += ml__fl_tree_rank(f, f->n[x].addr) - from + 1;
        return x;
    }
    x = ml__fl_tree_first_fit(f, 0, need); /* wrap around */
    f->base.search_steps += (f->free_count - from) + ml__fl_tree_rank(f, f->n[x].addr) + 1;
    return x;
}

static void nf_after(ml__fl_t *f, uint64_t addr, uint64_t need) {
    f->rover = addr + need;
}

static const ml__fl_ops_t nf_ops = {.name = "next_fit", .find = nf_find, .after_alloc = nf_after};

int ml_sim_next_fit_new(const ml_sim_config_t *c, ml_sim_policy_t **out) {
    return ml__fl_new(c, &nf_ops, out);
}
