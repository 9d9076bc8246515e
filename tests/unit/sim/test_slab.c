/* test_slab.c - slab allocation per size class, and pools. */
#include "sim_test.h"

Test(slab, one_size_never_fragments_externally) {
    /* 1000 objects of 48 bytes (85 per 4 KiB slab: 12 slabs). Free every
     * other: half the slots are free, all of them usable by the next 48-byte
     * request, so external fragmentation is 0. Allocating 500 again fills
     * the holes without a new slab. */
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *s = st_new("slab", &c);
    for (uint32_t i = 0; i < 1000; i++) st_alloc(s, i, 48);
    cr_expect_eq(st_metrics(s).splits, 12);
    for (uint32_t i = 0; i < 1000; i += 2) st_free(s, i);
    ml_sim_metrics_t m = st_metrics(s);
    cr_expect_eq(m.at_end.free_bytes, 500 * 48 + (12 * 85 - 1000) * 48);
    cr_expect_float_eq(m.at_end.external, 0.0, 1e-12);
    cr_expect_float_eq(m.at_end.internal, 0.0, 1e-12, "48 is a class: no rounding");
    for (uint32_t i = 0; i < 1000; i += 2) st_alloc(s, 2000 + i, 48);
    m = st_metrics(s);
    cr_expect_eq(m.splits, 12, "no new slab");
    cr_expect_eq(m.at_end.footprint, 12 * 4096);
    cr_expect_float_eq(m.at_end.external, 0.0, 1e-12);
    /* First fit on the same sequence: its free space is in 48-byte holes
     * too, but they are separate blocks, and a larger request cannot use them. */
    ml_sim_policy_free(s);
}

Test(slab, memory_stranded_in_other_classes_is_external) {
    /* 85 free 48-byte slots and 64 free 64-byte slots: a request of either
     * class can use only its own, so the smaller pool is stranded. */
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *s = st_new("slab", &c);
    st_alloc(s, 0, 48);
    st_alloc(s, 1, 64);
    ml_sim_metrics_t m = st_metrics(s);
    uint64_t f48 = 84 * 48, f64 = 63 * 64;
    cr_expect_eq(m.at_end.free_bytes, f48 + f64);
    cr_expect_eq(m.at_end.largest_free, f48 > f64 ? f48 : f64);
    cr_expect_float_eq(m.at_end.external, 1.0 - (double)(f48 > f64 ? f48 : f64) / (double)(f48 + f64), 1e-12);
    ml_sim_policy_free(s);
}

Test(slab, rounding_to_classes_and_large_requests) {
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *s = st_new("slab", &c);
    st_alloc(s, 0, 50);     /* class 64 */
    st_alloc(s, 1, 129);    /* class 160 */
    st_alloc(s, 2, 20000);  /* large: 5 pages of its own */
    uint64_t b0, b1, b2;
    ml_sim_block(s, 0, &b0);
    ml_sim_block(s, 1, &b1);
    ml_sim_block(s, 2, &b2);
    cr_expect_eq(b0, 64);
    cr_expect_eq(b1, 160);
    cr_expect_eq(b2, 5 * 4096);
    cr_expect_eq(st_metrics(s).at_end.footprint, 4096 + 4096 + 5 * 4096);
    st_free(s, 2);
    cr_expect_eq(st_metrics(s).at_end.footprint, 2 * 4096);
    ml_sim_policy_free(s);
}

Test(slab, empty_slabs_are_cached_once_then_given_back) {
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *s = st_new("slab", &c);
    for (uint32_t i = 0; i < 3 * 85; i++) st_alloc(s, i, 48);
    for (uint32_t i = 0; i < 3 * 85; i++) st_free(s, i);
    ml_sim_metrics_t m = st_metrics(s);
    cr_expect_eq(m.merges, 2, "two slabs given back, one kept");
    cr_expect_eq(m.at_end.footprint, 0, "no live slot: no page holds a live block");
    cr_expect_eq(m.at_end.free_bytes, 85 * 48, "the cached slab");
    for (uint32_t i = 0; i < 85; i++) st_alloc(s, 1000 + i, 48);
    cr_expect_eq(st_metrics(s).splits, 3, "the cached slab was reused");
    ml_sim_policy_free(s);
}

Test(pool, fixed_size_slots) {
    /* A pool of 24-byte objects: 170 per page. */
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *p = NULL;
    cr_assert_eq(ml_sim_pool_new(&c, 24, &p), 0);
    for (uint32_t i = 0; i < 170; i++) st_alloc(p, i, 24);
    cr_expect_eq(st_metrics(p).at_end.footprint, 4096);
    st_alloc(p, 170, 24);
    cr_expect_eq(st_metrics(p).at_end.footprint, 8192);
    cr_expect_float_eq(st_metrics(p).at_end.internal, 0.0, 1e-12);
    cr_expect_str_eq(ml_sim_name(p), "pool");
    ml_sim_policy_free(p);
}
