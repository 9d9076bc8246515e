/* sim_bitmap.c - bitmap fit: one bit per granule, first fit over the bits.
 *
 * The heap is an array of granules (16 bytes) with a bit each, set when in
 * use; block sizes live in a side table, so there are no headers. A request
 * of g granules takes the lowest run of g clear bits. Freeing clears the bits,
 * which coalesces by construction. The textbook cost is the scan from the
 * start of the bitmap: one step per 64-bit word up to the run found.
 *
 * The simulator finds the run in O(log n) with a segment tree over leaves of
 * four words (one 4 KiB page of granules); each node keeps the free run at
 * its start, at its end and the longest inside. Beyond the highest used
 * granule everything is free; the tree doubles when no run fits.
 */
#include "sim_internal.h"

#define LEAF_WORDS 4
#define LEAF_BITS (LEAF_WORDS * 64)

typedef struct {
    uint64_t pre, suf, best, len;
} run_t;

typedef struct {
    ml_sim_policy_t base;
    uint64_t *w;     /* bits, nleaves * LEAF_WORDS words */
    run_t *t;        /* tree, 2 * nleaves nodes, root at 1 */
    uint64_t nleaves;
    uint64_t used;   /* granules in use */
    uint64_t *id_start;
    uint32_t idcap;
} bitmap_t;

static inline run_t combine(run_t a, run_t b) {
    run_t r;
    r.len = a.len + b.len;
    r.pre = a.pre == a.len ? a.len + b.pre : a.pre;
    r.suf = b.suf == b.len ? b.len + a.suf : b.suf;
    r.best = a.best > b.best ? a.best : b.best;
    if (a.suf + b.pre > r.best) r.best = a.suf + b.pre;
    return r;
}

static run_t word_run(uint64_t x) {
    if (!x) return (run_t){64, 64, 64, 64};
    if (x == ~0ull) return (run_t){0, 0, 0, 64};
    run_t r = {(uint64_t)__builtin_ctzll(x), (uint64_t)__builtin_clzll(x), 0, 64};
    r.best = r.pre > r.suf ? r.pre : r.suf;
    int used = __builtin_popcountll(x);
    if (used <= 32) {
        /* few set bits: walk the gaps between them */
        unsigned pos = (unsigned)__builtin_ctzll(x);
        while (pos < 63) {
            uint64_t rest = x >> (pos + 1);
            if (!rest) break;
            unsigned gap = (unsigned)__builtin_ctzll(rest);
            if (gap > r.best) r.best = gap;
            pos += gap + 1;
        }
    } else {
        /* few free bits: the longest run of ones in ~x is the number of
         * y &= y >> 1 steps until it vanishes (at most 64 - used) */
        uint64_t y = ~x;
        unsigned k = 0;
        while (y) {
            y &= y >> 1;
            k++;
        }
        if (k > r.best) r.best = k;
    }
    return r;
}

static void leaf_update(bitmap_t *b, uint64_t leaf) {
    const uint64_t *w = b->w + leaf * LEAF_WORDS;
    run_t r = word_run(w[0]);
    for (int i = 1; i < LEAF_WORDS; i++) r = combine(r, word_run(w[i]));
    b->t[b->nleaves + leaf] = r;
}

static int resize(bitmap_t *b, uint64_t nleaves) {
    uint64_t *w = realloc(b->w, nleaves * LEAF_WORDS * sizeof *w);
    if (!w) return -ENOMEM;
    memset(w + b->nleaves * LEAF_WORDS, 0, (nleaves - b->nleaves) * LEAF_WORDS * sizeof *w);
    ml_advise_huge(w, nleaves * LEAF_WORDS * sizeof *w);
    b->w = w;
    run_t *t = realloc(b->t, 2 * nleaves * sizeof *t);
    if (!t) return -ENOMEM;
    ml_advise_huge(t, 2 * nleaves * sizeof *t);
    b->t = t;
    b->nleaves = nleaves;
    for (uint64_t i = 0; i < nleaves; i++) leaf_update(b, i);
    for (uint64_t i = nleaves - 1; i >= 1; i--) t[i] = combine(t[2 * i], t[2 * i + 1]);
    return 0;
}

/* Lowest granule starting a free run of at least g, or UINT64_MAX. */
static uint64_t find_run(const bitmap_t *b, uint64_t g) {
    if (b->t[1].best < g) return UINT64_MAX;
    uint64_t node = 1, lo = 0, span = b->nleaves * LEAF_BITS;
    while (node < b->nleaves) {
        uint64_t l = 2 * node, r = l + 1, half = span / 2;
        if (b->t[l].best >= g) {
            node = l;
        } else if (b->t[l].suf + b->t[r].pre >= g) {
            return lo + half - b->t[l].suf;
        } else {
            node = r;
            lo += half;
        }
        span = half;
    }
    /* inside one leaf: walk its runs */
    uint64_t run = 0, start = lo;
    const uint64_t *w = b->w + (node - b->nleaves) * LEAF_WORDS;
    for (uint64_t k = 0; k < LEAF_WORDS; k++) {
        uint64_t x = w[k];
        if (!x) { /* a whole free word */
            run += 64;
            if (run >= g) return start;
            continue;
        }
        if (x == ~0ull) {
            run = 0;
            start = lo + (k + 1) * 64;
            continue;
        }
        for (uint64_t i = 0; i < 64; i++) {
            if (x >> i & 1) {
                run = 0;
                start = lo + k * 64 + i + 1;
            } else if (++run >= g) {
                return start;
            }
        }
    }
    return UINT64_MAX; /* not reached: the leaf's best said so */
}

static void set_range(bitmap_t *b, uint64_t s, uint64_t g, bool used) {
    for (uint64_t i = s; i < s + g;) {
        uint64_t wi = i >> 6, bit = i & 63, n = 64 - bit;
        if (n > s + g - i) n = s + g - i;
        uint64_t mask = n == 64 ? ~0ull : ((1ull << n) - 1) << bit;
        if (used) b->w[wi] |= mask;
        else b->w[wi] &= ~mask;
        i += n;
    }
    uint64_t la = s / LEAF_BITS, lb = (s + g - 1) / LEAF_BITS;
    /* Leaves the range covers whole are all used or all free: no scan. */
    const run_t full = used ? (run_t){0, 0, 0, LEAF_BITS} : (run_t){LEAF_BITS, LEAF_BITS, LEAF_BITS, LEAF_BITS};
    for (uint64_t l = la; l <= lb; l++) {
        if (l * LEAF_BITS >= s && (l + 1) * LEAF_BITS <= s + g) b->t[b->nleaves + l] = full;
        else leaf_update(b, l);
    }
    uint64_t i = la + b->nleaves, j = lb + b->nleaves;
    while (i > 1) {
        i >>= 1;
        j >>= 1;
        for (uint64_t k = i; k <= j; k++) b->t[k] = combine(b->t[2 * k], b->t[2 * k + 1]);
    }
}

static int bm_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block) {
    bitmap_t *b = (bitmap_t *)p;
    uint64_t G = p->cfg.align, align = ml__op_align(p, op);
    uint64_t size = op->size ? op->size : 1;
    uint64_t g = ml__round_up(size, G) / G + (align > G ? (align - G) / G : 0);
    if (op->id >= b->idcap &&
        ml__sim_grow((void **)&b->id_start, &b->idcap, op->id, sizeof *b->id_start, 0) < 0)
        return -ENOMEM;
    uint64_t s;
    while ((s = find_run(b, g)) == UINT64_MAX)
        if (resize(b, b->nleaves * 2) < 0) return -ENOMEM;
    p->search_steps += s / 64 + 1;
    set_range(b, s, g, true);
    b->used += g;
    b->id_start[op->id] = s;
    if (ml__sim_extent_add(p, s * G, g * G) < 0) return -ENOMEM;
    *addr = s * G;
    *block = g * G;
    return 0;
}

static void bm_free(ml_sim_policy_t *p, uint32_t id) {
    bitmap_t *b = (bitmap_t *)p;
    uint64_t G = p->cfg.align, s = b->id_start[id], g = p->ids[id].blk / G;
    ml__sim_extent_remove(p, s * G, g * G);
    set_range(b, s, g, false);
    b->used -= g;
}

/* Summary of granules [0, hi). */
static run_t query(const bitmap_t *b, uint64_t node, uint64_t lo, uint64_t span, uint64_t hi) {
    if (lo + span <= hi) return b->t[node];
    if (node >= b->nleaves) { /* partial leaf: bit by bit up to hi */
        run_t r = {0, 0, 0, 0};
        const uint64_t *w = b->w + (node - b->nleaves) * LEAF_WORDS;
        for (uint64_t i = 0; lo + i < hi; i++) {
            run_t one = (w[i >> 6] >> (i & 63) & 1) ? (run_t){0, 0, 0, 1} : (run_t){1, 1, 1, 1};
            r = r.len ? combine(r, one) : one;
        }
        return r;
    }
    uint64_t half = span / 2;
    if (hi <= lo + half) return query(b, 2 * node, lo, half, hi);
    return combine(b->t[2 * node], query(b, 2 * node + 1, lo + half, half, hi));
}

static void bm_summary(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest) {
    const bitmap_t *b = (const bitmap_t *)p;
    uint64_t G = p->cfg.align, total = b->nleaves * LEAF_BITS;
    uint64_t top = total - b->t[1].suf; /* one past the highest used granule */
    *free_bytes = (top - b->used) * G;
    *largest = top ? query(b, 1, 0, total, top).best * G : 0;
}

static uint64_t bm_state(const ml_sim_policy_t *p) {
    const bitmap_t *b = (const bitmap_t *)p;
    return sizeof *b + b->nleaves * (LEAF_WORDS * 8 + 2 * sizeof(run_t)) + (uint64_t)b->idcap * 8;
}

static void bm_destroy(ml_sim_policy_t *p) {
    bitmap_t *b = (bitmap_t *)p;
    free(b->w);
    free(b->t);
    free(b->id_start);
    free(b);
}

static int bm_reserve(ml_sim_policy_t *p, uint32_t ids) {
    bitmap_t *b = (bitmap_t *)p;
    return ml__sim_reserve_ids((void **)&b->id_start, &b->idcap, ids, sizeof *b->id_start, 0);
}

static const ml__sim_vt_t bm_vt = {
    .reserve = bm_reserve,
    .alloc = bm_alloc,
    .free = bm_free,
    .free_summary = bm_summary,
    .state_bytes = bm_state,
    .destroy = bm_destroy,
};

int ml_sim_bitmap_new(const ml_sim_config_t *c, ml_sim_policy_t **out) {
    bitmap_t *b = calloc(1, sizeof *b);
    if (!b) return -ENOMEM;
    ml__sim_init(&b->base, &bm_vt, "bitmap_fit", c, false);
    if (resize(b, 16) < 0) {
        bm_destroy(&b->base);
        return -ENOMEM;
    }
    *out = &b->base;
    return 0;
}
