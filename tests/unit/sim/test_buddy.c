/* test_buddy.c - the binary buddy allocator. */
#include "sim_test.h"

Test(buddy, internal_waste_on_65_byte_requests) {
    /* 65 bytes take a 128-byte block: 63 bytes (49.2%) wasted inside. */
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *b = st_new("buddy", &c);
    for (uint32_t i = 0; i < 100; i++) st_alloc(b, i, 65);
    ml_sim_metrics_t m = st_metrics(b);
    cr_expect_eq(m.at_end.live_blocks, 100 * 128);
    cr_expect_float_eq(m.at_end.internal, 63.0 / 128.0, 1e-12);
    uint64_t blk = 0;
    ml_sim_block(b, 7, &blk);
    cr_expect_eq(blk, 128);
    ml_sim_policy_free(b);
}

Test(buddy, splits_down_and_merges_up) {
    /* A fresh 4 KiB arena: the first 16-byte block takes eight halvings
     * (4096 -> 16) and lands at 0; its buddy at 16 is the next one. Freeing
     * both merges all the way back up: eight merges, one 4 KiB free block. */
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *b = st_new("buddy", &c);
    cr_expect_eq(st_alloc(b, 0, 16), 0);
    cr_expect_eq(st_metrics(b).splits, 8);
    cr_expect_eq(st_alloc(b, 1, 10), 16);
    cr_expect_eq(st_metrics(b).splits, 8);
    st_free(b, 0);
    cr_expect_eq(st_metrics(b).merges, 0, "its buddy is still in use");
    st_free(b, 1);
    ml_sim_metrics_t m = st_metrics(b);
    cr_expect_eq(m.merges, 8);
    cr_expect_eq(m.at_end.free_bytes, 4096);
    cr_expect_eq(m.at_end.largest_free, 4096);
    cr_expect_float_eq(m.at_end.external, 0.0, 1e-12);
    ml_sim_policy_free(b);
}

Test(buddy, blocks_are_aligned_to_their_size_and_the_arena_doubles) {
    ml_sim_config_t c = st_cfg_pages();
    ml_sim_policy_t *b = st_new("buddy", &c);
    cr_expect_eq(st_alloc(b, 0, 3000), 0);    /* 4096 */
    cr_expect_eq(st_alloc(b, 1, 5000), 8192); /* the arena doubles twice: 8192 is free */
    cr_expect_eq(st_alloc(b, 2, 4000), 4096); /* the buddy of block 0 */
    uint64_t a = st_alloc(b, 3, 200);          /* 256, aligned to 256 */
    cr_expect_eq(a % 256, 0);
    ml_sim_metrics_t m = st_metrics(b);
    cr_expect_eq(m.at_end.live_blocks, 4096 + 8192 + 4096 + 256);
    ml_sim_policy_free(b);
}
