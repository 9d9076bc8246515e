/* test_classes.c - segregated fit and TLSF. */
#include "sim_test.h"

/* A random workload: up to `live` blocks of 16 B .. 64 KiB, allocated and
 * freed in random order, fed to every policy given. */
static void churn(ml_sim_policy_t **ps, int np, int ops, int live) {
    uint64_t seed = 42;
    uint32_t *ids = calloc((size_t)live, sizeof *ids);
    bool *used = calloc((size_t)live, sizeof *used);
    uint32_t next = 0;
    for (int i = 0; i < ops; i++) {
        int slot = (int)(st_rand(&seed) % (uint64_t)live);
        if (used[slot]) {
            for (int k = 0; k < np; k++) st_free(ps[k], ids[slot]);
            used[slot] = false;
        } else {
            uint64_t size = 16 + st_rand(&seed) % (st_rand(&seed) % 4 ? 512 : 65536);
            ids[slot] = next++;
            for (int k = 0; k < np; k++) st_alloc(ps[k], ids[slot], size);
            used[slot] = true;
        }
    }
    free(ids);
    free(used);
}

Test(tlsf, constant_steps_per_operation) {
    /* However many free blocks there are, an allocation costs at most two
     * bitmap lookups and one split, a free at most two merges. First fit on
     * the same sequence walks long lists. */
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *ps[] = {st_new("tlsf", &c), st_new("first_fit", &c)};
    churn(ps, 2, 40000, 3000);
    ml_sim_metrics_t t = st_metrics(ps[0]), f = st_metrics(ps[1]);
    cr_expect_leq(t.max_op_steps, 3, "TLSF took %lu steps in one operation", (unsigned long)t.max_op_steps);
    cr_expect_gt(t.allocs, 10000);
    cr_expect_gt(f.max_op_steps, 20, "first fit's worst search: %lu", (unsigned long)f.max_op_steps);
    cr_expect_gt(f.cost_per_op, t.cost_per_op);
    ml_sim_policy_free(ps[0]);
    ml_sim_policy_free(ps[1]);
}

Test(tlsf, good_fit_skips_the_requests_own_class) {
    /* A 528-byte hole sits in class [512, 544). A 528-byte request is rounded
     * up to the next class boundary, [544, 576), so TLSF does not look at the
     * hole and grows the heap; segregated fit (exact classes below 1 KiB)
     * reuses it. */
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *t = st_new("tlsf", &c), *s = st_new("segregated_fit", &c);
    ml_sim_policy_t *ps[] = {t, s};
    for (int k = 0; k < 2; k++) {
        st_alloc(ps[k], 0, 528);
        st_alloc(ps[k], 1, 16);
        st_free(ps[k], 0);
    }
    cr_expect_eq(st_alloc(t, 2, 528), 544);
    cr_expect_eq(st_alloc(s, 2, 528), 0);
    ml_sim_policy_free(t);
    ml_sim_policy_free(s);
}

Test(tlsf, splits_and_merges) {
    /* One 4096-byte hole below a guard. A 100-byte request (112 bytes, the
     * exact small class 7) misses in the small range's second-level bitmap
     * (one lookup) and the first-level bitmap finds the hole's class (a
     * second); the hole is split (one split). Freeing the block merges it
     * with the remainder (one merge). */
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *t = st_new("tlsf", &c);
    st_alloc(t, 0, 4096);
    st_alloc(t, 1, 16);
    st_free(t, 0);
    ml_sim_metrics_t m0 = st_metrics(t);
    cr_expect_eq(st_alloc(t, 2, 100), 0);
    ml_sim_metrics_t m1 = st_metrics(t);
    cr_expect_eq(m1.splits - m0.splits, 1);
    cr_expect_eq(m1.search_steps - m0.search_steps, 2, "one second-level miss, one first-level lookup");
    st_free(t, 2);
    cr_expect_eq(st_metrics(t).merges - m1.merges, 1);
    cr_expect_eq(st_metrics(t).at_end.largest_free, 4096);
    ml_sim_policy_free(t);
}

Test(segfit, exact_small_classes_and_larger_class_fallback) {
    /* Holes of 64 and 2048 bytes. A 64-byte request finds its exact class at
     * once (one step); a 100-byte request (112: class 7, empty) takes the
     * head of the next non-empty class, the 2048-byte hole, and splits it. */
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *s = st_new("segregated_fit", &c);
    st_alloc(s, 0, 64);
    st_alloc(s, 1, 16);
    st_alloc(s, 2, 2048);
    st_alloc(s, 3, 16);
    st_free(s, 0);
    st_free(s, 2);
    uint64_t s0 = st_metrics(s).search_steps;
    cr_expect_eq(st_alloc(s, 4, 64), 0);
    cr_expect_eq(st_metrics(s).search_steps - s0, 1);
    cr_expect_eq(st_alloc(s, 5, 100), 80);
    ml_sim_metrics_t m = st_metrics(s);
    cr_expect_eq(m.at_end.free_bytes, 2048 - 112);
    ml_sim_policy_free(s);
}

Test(segfit, general_allocators_agree_on_live_bytes) {
    /* Whatever the placement, every policy sees the same requests. */
    ml_sim_config_t c = st_cfg_pages();
    const char *names[] = {"first_fit", "next_fit", "best_fit", "worst_fit", "segregated_fit", "tlsf",
                           "buddy", "slab", "bitmap_fit", "arena"};
    ml_sim_policy_t *ps[10];
    for (int k = 0; k < 10; k++) ps[k] = st_new(names[k], &c);
    churn(ps, 10, 20000, 1000);
    ml_sim_metrics_t m0 = st_metrics(ps[0]);
    for (int k = 0; k < 10; k++) {
        ml_sim_metrics_t m = st_metrics(ps[k]);
        cr_expect_eq(m.at_end.live_requested, m0.at_end.live_requested, "%s", names[k]);
        cr_expect_eq(m.allocs, m0.allocs, "%s", names[k]);
        cr_expect_geq(m.at_end.live_blocks, m.at_end.live_requested, "%s", names[k]);
        cr_expect_geq(m.peak_footprint, m.at_peak.live_requested, "%s", names[k]);
        cr_expect_geq(m.peak_extent, m.peak_footprint, "%s: extent %lu footprint %lu", names[k],
                      (unsigned long)m.peak_extent, (unsigned long)m.peak_footprint);
        ml_sim_policy_free(ps[k]);
    }
}
