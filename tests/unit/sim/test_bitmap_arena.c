/* test_bitmap_arena.c - bitmap fit, the arena, buffers and the real allocator. */
#include "sim_test.h"

#include <string.h>

Test(bitmap, first_run_of_free_granules) {
    /* a=16@0 (g0), b=32@16 (g1-2), c=16@48 (g3). Free b: a 2-granule hole.
     * d=48 needs 3 granules: the first run that long starts after c (64).
     * e=32 fits the hole (16). */
    ml_sim_config_t c = st_cfg();
    ml_sim_policy_t *b = st_new("bitmap_fit", &c);
    cr_expect_eq(st_alloc(b, 0, 16), 0);
    cr_expect_eq(st_alloc(b, 1, 32), 16);
    cr_expect_eq(st_alloc(b, 2, 16), 48);
    st_free(b, 1);
    cr_expect_eq(st_alloc(b, 3, 48), 64);
    ml_sim_metrics_t m = st_metrics(b);
    cr_expect_eq(m.at_end.free_bytes, 32);
    cr_expect_eq(m.at_end.largest_free, 32);
    cr_expect_eq(st_alloc(b, 4, 32), 16);
    cr_expect_eq(st_metrics(b).at_end.free_bytes, 0);
    ml_sim_policy_free(b);
}

Test(bitmap, runs_across_words_and_leaves_and_growth) {
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *b = st_new("bitmap_fit", &c);
    /* 70 granules: more than one 64-bit word */
    cr_expect_eq(st_alloc(b, 0, 70 * 16), 0);
    /* 300 granules: more than a 256-granule leaf */
    cr_expect_eq(st_alloc(b, 1, 300 * 16), 70 * 16);
    /* more than the initial 16 leaves (4096 granules): the bitmap doubles */
    cr_expect_eq(st_alloc(b, 2, 5000 * 16), 370 * 16);
    st_free(b, 1);
    /* a 200-granule request fits the 300-granule hole; the scan charges one
     * step per word up to granule 70 (2 words) */
    uint64_t s0 = st_metrics(b).search_steps;
    cr_expect_eq(st_alloc(b, 3, 200 * 16), 70 * 16);
    cr_expect_eq(st_metrics(b).search_steps - s0, 2);
    ml_sim_metrics_t m = st_metrics(b);
    cr_expect_eq(m.at_end.free_bytes, 100 * 16);
    cr_expect_eq(m.at_end.largest_free, 100 * 16);
    ml_sim_policy_free(b);
}

static ml_sim_op_t alloc_op(uint32_t id, uint64_t size, uint32_t site) {
    return (ml_sim_op_t){.type = ML_SIM_ALLOC, .id = id, .size = size, .site = site};
}

static ml_sim_op_t free_op(uint32_t id) {
    return (ml_sim_op_t){.type = ML_SIM_FREE, .id = id};
}

static void apply(ml_sim_policy_t *p, ml_sim_op_t op) {
    cr_assert_eq(ml_sim_apply(p, &op), 0);
}

Test(arena, bump_reset_and_release) {
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *a = NULL;
    cr_assert_eq(ml_sim_arena_new(&c, false, &a), 0);
    /* ten 100-byte blocks (112 each) in one chunk: one page touched */
    for (uint32_t i = 0; i < 10; i++) apply(a, alloc_op(i, 100, 1));
    cr_expect_eq(ml_sim_footprint(a), 4096);
    cr_expect_float_eq(st_metrics(a).at_end.internal, 1.0 - 100.0 / 112.0, 1e-12);
    /* all dead: the current chunk is reset and keeps its page */
    for (uint32_t i = 0; i < 10; i++) apply(a, free_op(i));
    cr_expect_eq(ml_sim_footprint(a), 4096);
    for (uint32_t i = 0; i < 10; i++) apply(a, alloc_op(i, 100, 1));
    cr_expect_eq(ml_sim_footprint(a), 4096, "the reset chunk is reused");
    /* another site gets its own chunk */
    apply(a, alloc_op(20, 16, 2));
    cr_expect_eq(ml_sim_footprint(a), 8192);
    /* a block that does not fit starts a new chunk; the old one dies with its
     * last block and is given back */
    apply(a, alloc_op(30, 40000, 3));
    apply(a, alloc_op(31, 40000, 3));
    cr_expect_eq(ml_sim_footprint(a), 8192 + 2 * 10 * 4096);
    apply(a, free_op(30));
    cr_expect_eq(ml_sim_footprint(a), 8192 + 10 * 4096);
    cr_expect_eq(st_metrics(a).merges, 1);
    ml_sim_policy_free(a);
}

Test(arena, one_group_for_all) {
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *a = NULL;
    cr_assert_eq(ml_sim_arena_new(&c, true, &a), 0);
    apply(a, alloc_op(0, 16, 1));
    apply(a, alloc_op(1, 16, 2));
    cr_expect_eq(ml_sim_footprint(a), 4096);
    ml_sim_policy_free(a);
}

Test(buffer, reuse_and_stack) {
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *r = NULL, *s = NULL;
    cr_assert_eq(ml_sim_buffer_new(&c, false, &r), 0);
    cr_assert_eq(ml_sim_buffer_new(&c, true, &s), 0);
    for (uint32_t i = 0; i < 100; i++) {
        apply(r, alloc_op(0, 100 + i * 100, 1));
        apply(r, free_op(0));
        apply(s, alloc_op(0, 100 + i * 100, 1));
        apply(s, free_op(0));
    }
    cr_expect_eq(st_metrics(r).peak_footprint, 12288, "one buffer of the largest request (10000)");
    cr_expect_eq(st_metrics(s).peak_footprint, 0);
    ml_sim_policy_free(r);
    ml_sim_policy_free(s);
}

Test(real, pages_holding_recorded_blocks) {
    ml_sim_policy_t *r = NULL;
    cr_assert_eq(ml_sim_real_new(NULL, &r), 0);
    ml_sim_op_t ops[] = {
        {.type = ML_SIM_ALLOC, .id = 0, .ptr = 0x7f0000001010, .size = 32},
        {.type = ML_SIM_ALLOC, .id = 1, .ptr = 0x7f0000001100, .size = 64},   /* same page */
        {.type = ML_SIM_ALLOC, .id = 2, .ptr = 0x7f0000002ff0, .size = 32},   /* two pages */
        {.type = ML_SIM_ALLOC, .id = 3, .ptr = 0x55000000a000, .size = 3 * 4096}, /* three */
        {.type = ML_SIM_MALLINFO, .size = 1 << 20},
    };
    for (int i = 0; i < 5; i++) cr_assert_eq(ml_sim_apply(r, &ops[i]), 0);
    cr_expect_eq(ml_sim_footprint(r), (1 + 2 + 3) * 4096);
    apply(r, free_op(3));
    apply(r, free_op(0));
    cr_expect_eq(ml_sim_footprint(r), 3 * 4096);
    apply(r, free_op(1));
    cr_expect_eq(ml_sim_footprint(r), 2 * 4096);
    ml_sim_metrics_t m = st_metrics(r);
    cr_expect_eq(m.peak_footprint, 6 * 4096);
    cr_expect_eq(m.os_held_peak, 1 << 20);
    cr_expect_not(m.known_fragmentation);
    cr_expect_float_eq(m.at_end.page_utilization, 32.0 / 8192.0, 1e-12);
    ml_sim_policy_free(r);
}

/* sim_real.c counts the pages of a window around the first block's page
 * (2^21 pages below it, 2^24 in all) in a table, and the others in a hash:
 * blocks across both edges count each page once, as the hash alone did. */
Test(real, pages_across_the_counters_window_edges) {
    ml_sim_policy_t *r = NULL;
    cr_assert_eq(ml_sim_real_new(NULL, &r), 0);
    const uint64_t P = 0x7f0000001ull, lo = P - (1ull << 21), end = lo + (1ull << 24);
    ml_sim_op_t ops[] = {
        {.type = ML_SIM_ALLOC, .id = 0, .ptr = P << 12, .size = 16},                       /* places it */
        {.type = ML_SIM_ALLOC, .id = 1, .ptr = ((end - 1) << 12) + 4000, .size = 200},     /* end-1, end */
        {.type = ML_SIM_ALLOC, .id = 2, .ptr = (end << 12) + 512, .size = 16},             /* end again */
        {.type = ML_SIM_ALLOC, .id = 3, .ptr = ((lo - 1) << 12) + 100, .size = 8192},      /* lo-1 .. lo+1 */
        {.type = ML_SIM_ALLOC, .id = 4, .ptr = ((lo + 1) << 12) + 2048, .size = 64},       /* lo+1 again */
    };
    for (int i = 0; i < 5; i++) cr_assert_eq(ml_sim_apply(r, &ops[i]), 0);
    cr_expect_eq(ml_sim_footprint(r), (1 + 2 + 3) * 4096);
    apply(r, free_op(1));
    cr_expect_eq(ml_sim_footprint(r), (1 + 1 + 3) * 4096, "page end stays for block 2");
    apply(r, free_op(3));
    cr_expect_eq(ml_sim_footprint(r), (1 + 1 + 1) * 4096, "page lo+1 stays for block 4");
    apply(r, free_op(2));
    apply(r, free_op(4));
    cr_expect_eq(ml_sim_footprint(r), 4096);
    apply(r, free_op(0));
    cr_expect_eq(ml_sim_footprint(r), 0);
    cr_expect_eq(st_metrics(r).peak_footprint, 6 * 4096);
    ml_sim_policy_free(r);
}

static bool route_site7(void *ctx, const ml_sim_op_t *op) {
    (void)ctx;
    return op->site == 7;
}

Test(router, dedicated_pool_stops_pinning) {
    /* 1000 48-byte blocks (site 7) interleaved with 1000 200-byte blocks
     * (site 8); then every 200-byte block dies. In one segregated-fit heap the
     * 48-byte blocks (64 with their header) stay spread over all the pages
     * (272 bytes per pair: 67 pages). In a pool of their own they fill 12
     * pages (85 per page), and the general heap is empty. */
    ml_sim_policy_t *g = NULL, *d = NULL, *cmp = NULL, *r = NULL;
    cr_assert_eq(ml_sim_segfit_new(NULL, &g), 0);
    cr_assert_eq(ml_sim_pool_new(NULL, 48, &d), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &cmp), 0);
    cr_assert_eq(ml_sim_router_new("pool(site 7)", route_site7, NULL, g, d, cmp, &r), 0);
    for (uint32_t i = 0; i < 1000; i++) {
        apply(r, alloc_op(2 * i, 48, 7));
        apply(r, alloc_op(2 * i + 1, 200, 8));
    }
    for (uint32_t i = 0; i < 1000; i++) apply(r, free_op(2 * i + 1));
    cr_expect_eq(ml_sim_footprint(r), 12 * 4096);
    ml_sim_router_gain_t gain;
    ml_sim_router_gain(r, &gain);
    cr_expect_geq(gain.max_gain_bytes, 50 * 4096, "pinned pages: %lu bytes", (unsigned long)gain.max_gain_bytes);
    cr_expect_eq(gain.dedicated.allocs, 1000);
    cr_expect_eq(gain.general.allocs, 1000);
    cr_expect_geq(gain.compare_peak, st_metrics(r).peak_footprint);
    ml_sim_policy_free(r);
}

Test(bitmap, matches_a_brute_force_first_fit) {
    /* Random allocations and frees of 1..600 granules, some spanning leaves;
     * after each allocation the address must be the lowest run of free
     * granules found by scanning a plain array. */
    enum { G = 1 << 15, LIVE = 300 };
    static unsigned char used[G];
    memset(used, 0, sizeof used);
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *b = st_new("bitmap_fit", &c);
    uint64_t seed = 99, start[LIVE] = {0}, len[LIVE] = {0};
    for (int step = 0; step < 20000; step++) {
        int k = (int)(st_rand(&seed) % LIVE);
        if (len[k]) {
            st_free(b, (uint32_t)k);
            memset(used + start[k], 0, len[k]);
            len[k] = 0;
            continue;
        }
        uint64_t g = 1 + (st_rand(&seed) % 8 ? st_rand(&seed) % 8 : st_rand(&seed) % 600);
        uint64_t expect = 0, run = 0;
        for (uint64_t i = 0; i < G; i++) {
            if (used[i]) {
                run = 0;
                expect = i + 1;
            } else if (++run == g) {
                break;
            }
        }
        cr_assert_lt(expect + g, G);
        uint64_t a = st_alloc(b, (uint32_t)k, g * 16);
        cr_assert_eq(a, expect * 16, "step %d: %lu granules at %lu, expected %lu", step, (unsigned long)g,
                     (unsigned long)(a / 16), (unsigned long)expect);
        start[k] = expect;
        len[k] = g;
        memset(used + expect, 1, g);
    }
    ml_sim_policy_free(b);
}
