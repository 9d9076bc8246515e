/* sim_registry.c - the policies by name (ml_sim_policy_new): above every
 * policy, as each is built on sim_core.c. */
#include "sim_internal.h"

const char *const ml_sim_policy_names[] = {
    "first_fit", "next_fit", "best_fit", "worst_fit", "segregated_fit",
    "tlsf",      "buddy",    "slab",     "bitmap_fit", "arena", NULL,
};

int ml_sim_policy_new(const char *name, const ml_sim_config_t *c, ml_sim_policy_t **out) {
    if (!strcmp(name, "first_fit")) return ml_sim_first_fit_new(c, out);
    if (!strcmp(name, "next_fit")) return ml_sim_next_fit_new(c, out);
    if (!strcmp(name, "best_fit")) return ml_sim_best_fit_new(c, out);
    if (!strcmp(name, "worst_fit")) return ml_sim_worst_fit_new(c, out);
    if (!strcmp(name, "segregated_fit")) return ml_sim_segfit_new(c, out);
    if (!strcmp(name, "tlsf")) return ml_sim_tlsf_new(c, out);
    if (!strcmp(name, "buddy")) return ml_sim_buddy_new(c, out);
    if (!strcmp(name, "slab")) return ml_sim_slab_new(c, out);
    if (!strcmp(name, "bitmap_fit")) return ml_sim_bitmap_new(c, out);
    if (!strcmp(name, "arena")) return ml_sim_arena_new(c, false, out);
    if (!strcmp(name, "real")) return ml_sim_real_new(c, out);
    return -ENOENT;
}
