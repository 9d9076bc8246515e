/* sim_worst_fit.c - worst fit: always split the largest free block.
 *
 * The idea is that the remainder stays large enough to be useful; in
 * practice it breaks up the big blocks that large requests need and is the
 * worst of the classic fits (Wilson et al. 1995). Ties go to the lowest
 * address; textbook cost is a walk of the whole list. */
#include "sim_internal.h"

static uint32_t wf_find(ml__fl_t *f, uint64_t need) {
    f->base.search_steps += f->free_count;
    uint64_t m = ml__fl_tree_max(f);
    if (m < need) return ML__NIL;
    return ml__fl_tree_lower_bound_size(f, m);
}

static const ml__fl_ops_t wf_ops = {.name = "worst_fit", .tree_by_size = true, .find = wf_find};

int ml_sim_worst_fit_new(const ml_sim_config_t *c, ml_sim_policy_t **out) {
    return ml__fl_new(c, &wf_ops, out);
}
