/* sim_best_fit.c - best fit: the smallest free block that is large enough.
 *
 * Ties go to the lowest address. A plain list must be walked to its end to
 * know the best block, so the textbook cost is every free block per search;
 * the simulator finds it in a size-ordered tree. Best fit wastes least in
 * most real traces (Wilson et al.; Johnstone & Wilson 1998) but is not
 * optimal: some sequences leave it unable to serve a request first fit can. */
#include "sim_internal.h"

static uint32_t bf_find(ml__fl_t *f, uint64_t need) {
    f->base.search_steps += f->free_count;
    return ml__fl_tree_lower_bound_size(f, need);
}

static const ml__fl_ops_t bf_ops = {.name = "best_fit", .tree_by_size = true, .find = bf_find};

int ml_sim_best_fit_new(const ml_sim_config_t *c, ml_sim_policy_t **out) {
    return ml__fl_new(c, &bf_ops, out);
}
