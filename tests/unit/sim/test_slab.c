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

/* sim_slab.c looks a size's class up in a table of 8-byte steps when every
 * class is a multiple of 8: it must give the smallest class that holds each
 * size, as the search does, at every size up to the largest class and one
 * past it (a large block on pages of its own). */
Test(slab, every_size_gets_the_smallest_class_that_holds_it) {
    uint64_t cls[64];
    size_t n = 0;
    for (uint64_t s = 16; s <= 128; s += 16) cls[n++] = s;
    for (uint64_t base = 128; base < 16384; base *= 2)
        for (int i = 1; i <= 4; i++) cls[n++] = base + (uint64_t)i * base / 4;
    const uint64_t two[] = {24, 40}, odd[] = {20, 36}; /* odd: no table, the search */
    ml_sim_policy_t *p[3] = {NULL, NULL, NULL};
    cr_assert_eq(ml_sim_slab_new(NULL, &p[0]), 0);
    cr_assert_eq(ml_sim_slab_new_classes(NULL, two, 2, &p[1]), 0);
    cr_assert_eq(ml_sim_slab_new_classes(NULL, odd, 2, &p[2]), 0);
    const uint64_t *cl[3] = {cls, two, odd};
    size_t ncl[3] = {n, 2, 2};
    for (int k = 0; k < 3; k++) {
        uint64_t top = cl[k][ncl[k] - 1];
        for (uint64_t size = 1; size <= top + 1; size++) {
            uint64_t want = 0;
            for (size_t i = 0; i < ncl[k] && !want; i++)
                if (cl[k][i] >= size) want = cl[k][i];
            if (!want) want = (size + 4095) / 4096 * 4096; /* default 4 KiB pages */
            cr_assert_eq(ml_sim_alloc(p[k], 0, size, 0, NULL), 0);
            uint64_t blk = 0;
            cr_assert_eq(ml_sim_block(p[k], 0, &blk), 0);
            cr_assert_eq(blk, want, "policy %d, size %llu: block %llu, want %llu", k, (unsigned long long)size,
                         (unsigned long long)blk, (unsigned long long)want);
            cr_assert_eq(ml_sim_free(p[k], 0), 0);
        }
        ml_sim_policy_free(p[k]);
    }
}
