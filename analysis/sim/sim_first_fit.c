/* sim_first_fit.c - first fit on an address-ordered free list.
 *
 * Takes the lowest-addressed free block that is large enough. Its textbook
 * cost is a walk of the list from the start: the rank of the block found
 * (all blocks when none fits). Known to keep low addresses busy and leave
 * small splinters near the front (Knuth, TAOCP 2.5; Wilson et al. 1995). */
#include "sim_internal.h"

static uint32_t ff_find(ml__fl_t *f, uint64_t need) {
    uint32_t t = f->root;
    if (t == ML__NIL || f->t[t].maxsz < need) {
        f->base.search_steps += f->free_count;
        return ML__NIL;
    }
    uint64_t rank = 0;
    for (;;) {
        uint32_t l = f->n[t].l;
        if (l != ML__NIL && f->t[l].maxsz >= need) {
            t = l;
            continue;
        }
        uint64_t lc = l != ML__NIL ? f->t[l].cnt : 0;
        if (f->n[t].size >= need) {
            f->base.search_steps += rank + lc + 1;
            return t;
        }
        rank += lc + 1;
        t = f->n[t].r; /* the subtree maximum says a fit is on the right */
    }
}

static const ml__fl_ops_t ff_ops = {.name = "first_fit", .find = ff_find};

int ml_sim_first_fit_new(const ml_sim_config_t *c, ml_sim_policy_t **out) {
    return ml__fl_new(c, &ff_ops, out);
}
