/* sim_tlsf.c - Two-Level Segregated Fit (Masmano, Ripoll, Crespo, Real 2004).
 *
 * First level: the power of two of the size; second level: 16 linear
 * subclasses of it; sizes below 16 granules have exact classes. A bitmap per
 * level finds a non-empty class with two find-first-set instructions. The
 * request is rounded up to the next class boundary first, so the head of any
 * class found fits without a search ("good fit"): at most two bitmap lookups
 * and one split per allocation and two merges per free, whatever the heap
 * holds. The price is internal slack inside the chosen block (up to 1/16 of
 * its size stays with the block when the remainder is too small to split)
 * and blocks skipped in the request's own class. */
#include "sim_internal.h"

static uint32_t tlsf_cls(const ml__fl_t *f, uint64_t size) {
    uint64_t g = f->base.cfg.align, small = 16 * g;
    if (size < small) return (uint32_t)(size >> __builtin_ctzll(g)); /* g: a power of two (ml__fl_new) */
    unsigned m = ml__log2_floor(size);
    unsigned fl = m - ml__log2_floor(small) + 1;
    unsigned sl = (unsigned)((size >> (m - 4)) & 15);
    return fl * 16 + sl;
}

static uint32_t tlsf_find(ml__fl_t *f, uint64_t need) {
    uint64_t s = need, small = 16 * (uint64_t)f->base.cfg.align;
    if (s >= small) s += ((uint64_t)1 << (ml__log2_floor(s) - 4)) - 1; /* next class boundary */
    uint32_t c = tlsf_cls(f, s), fl = c >> 4, sl = c & 15;
    f->base.search_steps++;
    uint32_t slmap = f->tlsf_sl[fl] & (~0u << sl);
    if (!slmap) {
        f->base.search_steps++;
        uint64_t flmap = fl + 1 < 64 ? f->tlsf_fl & (~0ull << (fl + 1)) : 0;
        if (!flmap) return ML__NIL;
        fl = (uint32_t)__builtin_ctzll(flmap);
        slmap = f->tlsf_sl[fl];
    }
    return f->heads[fl * 16 + (uint32_t)__builtin_ctz(slmap)];
}

static const ml__fl_ops_t tlsf_ops = {.name = "tlsf", .lists = true, .find = tlsf_find, .cls = tlsf_cls};

int ml_sim_tlsf_new(const ml_sim_config_t *c, ml_sim_policy_t **out) {
    return ml__fl_new(c, &tlsf_ops, out);
}
