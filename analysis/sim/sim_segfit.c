/* sim_segfit.c - segregated fit: one free list per size class.
 *
 * Classes are in granules g: exact classes for g < 64 (1 KiB with 16-byte
 * granules, dlmalloc's small bins), then four per power of two. A request
 * first looks at up to 16 blocks of its own class (first fit inside the
 * class), then takes the head of the next non-empty larger class, found with
 * a bitmap, whose every block fits. Split remainders and coalesced blocks go
 * to the class of their new size. This is the general design of dlmalloc and
 * glibc's bins, the baseline of the advisor's what-if studies. Cost: blocks
 * looked at plus bitmap words scanned, splits, merges. */
#include "sim_internal.h"

#define SEG_SCAN 16

static uint32_t seg_cls(const ml__fl_t *f, uint64_t size) {
    uint64_t g = size >> __builtin_ctzll(f->base.cfg.align); /* a power of two (ml__fl_new): no division */
    if (g < 64) return (uint32_t)g;
    unsigned fl = ml__log2_floor(g); /* >= 6 */
    unsigned sl = (unsigned)((g >> (fl - 2)) & 3);
    return 64 + (fl - 6) * 4 + sl;
}

static uint32_t seg_find(ml__fl_t *f, uint64_t need) {
    uint32_t c = seg_cls(f, need);
    int k = 0;
    for (uint32_t x = f->heads[c]; x != ML__NIL && k < SEG_SCAN; x = f->n[x].r, k++) {
        f->base.search_steps++;
        if (f->n[x].size >= need) return x;
    }
    uint32_t d = ml__fl_list_next_nonempty(f, c + 1);
    return d == ML__NIL ? ML__NIL : f->heads[d];
}

static const ml__fl_ops_t seg_ops = {
    .name = "segregated_fit", .lists = true, .find = seg_find, .cls = seg_cls};

int ml_sim_segfit_new(const ml_sim_config_t *c, ml_sim_policy_t **out) {
    int rc = ml__fl_new(c, &seg_ops, out);
    if (rc == 0) ((ml__fl_t *)*out)->nclasses = 64 + 58 * 4;
    return rc;
}
