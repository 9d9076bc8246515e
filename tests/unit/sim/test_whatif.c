/* test_whatif.c - the what-if policies: reserved capacity, routers. */
#include "sim_test.h"

static ml_sim_op_t op(uint8_t type, uint32_t id, uint64_t size, uint8_t flags) {
    return (ml_sim_op_t){.type = type, .id = id, .size = size, .flags = flags, .site = 1};
}

static void apply(ml_sim_policy_t *p, ml_sim_op_t o) {
    cr_assert_eq(ml_sim_apply(p, &o), 0, "%s: op %d id %u", ml_sim_name(p), o.type, o.id);
}

/* A buffer grown from 1 to n bytes one byte at a time: realloc = free of the
 * old block + alloc of the new, both flagged. Ids alternate like the
 * replay driver's recycled ids. */
static void byte_by_byte(ml_sim_policy_t *p, uint32_t n) {
    apply(p, op(ML_SIM_ALLOC, 0, 1, 0));
    for (uint32_t len = 2; len <= n; len++) {
        uint32_t old = len % 2, id = 1 - old;
        apply(p, op(ML_SIM_FREE, old, 0, ML_SIM_F_REALLOC));
        apply(p, op(ML_SIM_ALLOC, id, len, ML_SIM_F_REALLOC));
    }
}

Test(growth, doubling_capacity_avoids_most_reallocs) {
    /* 1 -> 1000 bytes: capacities 1, 2, 4, ..., 1024: ten moves, 989 reallocs
     * that fit and do nothing. */
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *in = NULL, *g = NULL;
    cr_assert_eq(ml_sim_segfit_new(&c, &in), 0);
    cr_assert_eq(ml_sim_growth_new(in, 2.0, &g), 0);
    byte_by_byte(g, 1000);
    uint64_t avoided = 0, bytes = 0, moves = 0;
    ml_sim_growth_stats(g, &avoided, &bytes, &moves);
    cr_expect_eq(moves, 10);
    cr_expect_eq(avoided, 999 - 10);
    uint64_t blk = 0;
    cr_assert_eq(ml_sim_block(g, 1000 % 2 ? 0 : 1, &blk), 0);
    cr_expect_eq(blk, 1024, "the block is the capacity");
    ml_sim_metrics_t m = st_metrics(g);
    cr_expect_eq(m.at_end.live_requested, 1000);
    cr_expect_eq(m.at_end.live_blocks, 1024);
    cr_expect_eq(m.at_end.live_count, 1);
    /* the exact-size heap it wraps saw one block and ten moves */
    ml_sim_metrics_t mi;
    ml_sim_metrics(in, &mi);
    cr_expect_eq(mi.allocs, 11);
    cr_expect_eq(mi.frees, 10);
    ml_sim_policy_free(g);
}

Test(growth, plain_allocations_pass_through) {
    ml_sim_policy_t *in = NULL, *g = NULL;
    cr_assert_eq(ml_sim_first_fit_new(NULL, &in), 0);
    cr_assert_eq(ml_sim_growth_new(in, 2.0, &g), 0);
    apply(g, op(ML_SIM_ALLOC, 0, 100, 0));
    apply(g, op(ML_SIM_ALLOC, 1, 200, 0));
    apply(g, op(ML_SIM_FREE, 0, 100, 0));
    ml_sim_metrics_t m = st_metrics(g);
    cr_expect_eq(m.at_end.live_requested, 200);
    cr_expect_eq(m.at_end.live_blocks, 200);
    uint64_t avoided = 0, bytes = 0, moves = 0;
    ml_sim_growth_stats(g, &avoided, &bytes, &moves);
    cr_expect_eq(avoided + moves, 0);
    /* a realloc's old block that no allocation takes (the program went on
     * with something else) is freed in the inner heap, not leaked */
    apply(g, op(ML_SIM_FREE, 1, 200, ML_SIM_F_REALLOC));
    apply(g, op(ML_SIM_ALLOC, 2, 50, 0));
    ml_sim_metrics_t mi;
    ml_sim_metrics(in, &mi);
    cr_expect_eq(mi.at_end.live_count, 1);
    ml_sim_policy_free(g);
}

Test(growth, bad_arguments) {
    ml_sim_policy_t *g = NULL;
    cr_expect_eq(ml_sim_growth_new(NULL, 2.0, &g), -EINVAL);
    ml_sim_policy_t *in = NULL;
    cr_assert_eq(ml_sim_first_fit_new(NULL, &in), 0);
    cr_expect_eq(ml_sim_growth_new(in, 0.5, &g), -EINVAL, "a factor below 1 shrinks");
}

static bool route_site2(void *ctx, const ml_sim_op_t *o) {
    (void)ctx;
    return o->site == 2;
}

Test(router, gain_names_the_blocks_alive_at_that_moment) {
    /* Site 2's 64-byte blocks are routed to a heap of their own, and the
     * gain is measured against one heap holding everything. When the
     * 1000-byte blocks of site 3 die, the shared heap stays pinned by site 2;
     * the router records that gain and how much of site 2 was alive then
     * (the advisor insists on live blocks: pinning needs someone to pin). */
    ml_sim_policy_t *g = NULL, *d = NULL, *cmp = NULL, *r = NULL;
    cr_assert_eq(ml_sim_segfit_new(NULL, &g), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &d), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &cmp), 0);
    cr_assert_eq(ml_sim_router_new("separate(site 2)", route_site2, NULL, g, d, cmp, &r), 0);
    for (uint32_t i = 0; i < 2000; i++) {
        ml_sim_op_t a = op(ML_SIM_ALLOC, 2 * i, 64, 0), b = op(ML_SIM_ALLOC, 2 * i + 1, 1000, 0);
        a.site = 2;
        b.site = 3;
        apply(r, a);
        apply(r, b);
    }
    for (uint32_t i = 0; i < 2000; i++) apply(r, op(ML_SIM_FREE, 2 * i + 1, 1000, 0));
    ml_sim_router_gain_t gain;
    ml_sim_router_gain(r, &gain);
    cr_expect_gt(gain.max_gain_bytes, 400 * 4096, "the 64-byte blocks pinned ~500 pages: %lu",
                 (unsigned long)gain.max_gain_bytes);
    cr_expect_eq(gain.dedicated_live_blocks, 2000);
    cr_expect_eq(gain.dedicated_live_bytes, 2000 * 64);
    ml_sim_policy_free(r);
}

Test(router, bad_arguments_free_what_they_were_given) {
    ml_sim_policy_t *g = NULL, *r = NULL;
    cr_assert_eq(ml_sim_segfit_new(NULL, &g), 0);
    cr_expect_eq(ml_sim_router_new("x", route_site2, NULL, g, NULL, NULL, &r), -EINVAL);
}
