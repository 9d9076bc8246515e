/* test_map.c - the analysis layer's hash map (ml_map.h) and array growth
 * (ml_util.h): against a plain array as the reference under random churn,
 * the invariants the header promises after every operation, backward-shift
 * deletion across the end of the table, a failed growth, and the hash that
 * the analysis snapshot depends on. */
#include "ml_map.h"
#include "ml_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t key;
    uint64_t value;
    uint32_t extra[4]; /* a 32-byte entry, as the live block map's */
} ent_t;

ML_MAP_TYPED(ents, ent_t, 16)

/* The promises of ml_map.h, checked slot by slot: empty slots are all zero,
 * count is the number of keys, the table is at most 3/4 full, and every
 * entry is reached from its home slot without crossing an empty one. */
static void check_invariants(const ml_map_t *m) {
    if (!m->cap) {
        cr_assert_eq(m->count, 0);
        return;
    }
    cr_assert_eq(m->cap & (m->cap - 1), 0, "cap %llu is a power of two", (unsigned long long)m->cap);
    cr_assert_leq(m->count * 4, m->cap * 3);
    const ent_t *e = ents_entries(m);
    static const ent_t zero;
    uint64_t n = 0;
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!e[i].key) {
            cr_assert(!memcmp(&e[i], &zero, sizeof zero), "slot %llu is empty but not zero",
                      (unsigned long long)i);
            continue;
        }
        n++;
        for (uint64_t j = ml_map_hash(e[i].key) & (m->cap - 1); j != i; j = (j + 1) & (m->cap - 1))
            cr_assert_neq(e[j].key, 0, "an empty slot on the probe path of slot %llu",
                          (unsigned long long)i);
    }
    cr_assert_eq(n, m->count);
}

Test(map, matches_a_reference_under_random_churn, .timeout = 60) {
    enum { KEYS = 3000, OPS = 200000 };
    static uint64_t ref[KEYS]; /* value + 1; 0: absent */
    memset(ref, 0, sizeof ref);
    ml_map_t m = {0};
    uint64_t present = 0, rng = 0x9e3779b97f4a7c15ull;
    for (int op = 0; op < OPS; op++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint32_t k = (uint32_t)(rng % KEYS);
        /* Keys that share their low bits, as aligned heap addresses do. */
        uint64_t key = 0x7f0000000000ull + (uint64_t)k * 4096;
        bool insert = (rng >> 32) % 100 < (op < OPS / 2 ? 60 : 40); /* grow, then shrink */
        if (insert) {
            bool existed;
            ent_t *e = ents_put(&m, key, &existed);
            cr_assert_not_null(e);
            cr_assert_eq(existed, ref[k] != 0);
            if (!existed) {
                cr_assert_eq(e->value, 0, "a new entry's value starts zeroed");
                present++;
            } else {
                cr_assert_eq(e->value + 1, ref[k]);
            }
            e->value = (uint64_t)op;
            ref[k] = (uint64_t)op + 1;
        } else {
            ent_t *e = ents_find(&m, key);
            cr_assert_eq(e != NULL, ref[k] != 0);
            if (e) {
                ents_remove(&m, e);
                ref[k] = 0;
                present--;
            }
        }
        cr_assert_eq(m.count, present);
        if (op % 5000 == 0 || op == OPS - 1) {
            check_invariants(&m);
            for (uint32_t i = 0; i < KEYS; i++) {
                const ent_t *e = ents_find(&m, 0x7f0000000000ull + (uint64_t)i * 4096);
                cr_assert_eq(e != NULL, ref[i] != 0, "key %u", i);
                if (e) cr_assert_eq(e->value + 1, ref[i]);
            }
        }
    }
    cr_assert_null(ents_find(&m, 0), "key 0 is never found");
    bool existed;
    cr_assert_null(ents_put(&m, 0, &existed), "key 0 is never stored");
    ml_map_free(&m);
    cr_assert(m.e == NULL && m.cap == 0 && m.count == 0);
}

/* Keys whose home is slot `home` of a table of `cap` slots. */
static uint64_t key_at(uint64_t home, uint64_t cap, uint64_t after) {
    for (uint64_t k = after + 1;; k++)
        if ((ml_map_hash(k) & (cap - 1)) == home) return k;
}

Test(map, backward_shift_deletion_across_the_end_of_the_table) {
    ml_map_t m = {0};
    bool existed;
    cr_assert_not_null(ents_put(&m, 12345, &existed)); /* the first table: 16 slots */
    cr_assert_eq(m.cap, 16);
    ents_remove(&m, ents_find(&m, 12345));
    /* Three keys at home 15 take slots 15, 0 and 1; a fourth, at home 0,
     * goes to 2. */
    uint64_t a = key_at(15, 16, 0), b = key_at(15, 16, a), c = key_at(15, 16, b), d = key_at(0, 16, 0);
    uint64_t keys[] = {a, b, c, d};
    for (int i = 0; i < 4; i++) ents_put(&m, keys[i], &existed)->value = keys[i];
    const ent_t *e = ents_entries(&m);
    cr_assert(e[15].key == a && e[0].key == b && e[1].key == c && e[2].key == d);
    /* Removing a moves b back to 15, c to 0 and d (home 0) to 1. */
    ents_remove(&m, ents_find(&m, a));
    cr_expect(e[15].key == b && e[0].key == c && e[1].key == d && e[2].key == 0,
              "slots 15,0,1,2: %llx %llx %llx %llx", (unsigned long long)e[15].key,
              (unsigned long long)e[0].key, (unsigned long long)e[1].key, (unsigned long long)e[2].key);
    check_invariants(&m);
    for (int i = 1; i < 4; i++) cr_expect_eq(ents_find(&m, keys[i])->value, keys[i]);
    ml_map_free(&m);
}

static int fail_calls;
static void *failing_calloc(size_t n, size_t size) {
    (void)n, (void)size;
    fail_calls++;
    return NULL;
}

Test(map, an_insert_that_cannot_grow_the_table_changes_nothing) {
    ml_map_t m = {0};
    bool existed;
    for (uint64_t k = 1; k <= 12; k++) ents_put(&m, k, &existed)->value = k; /* 12 of 16: full */
    ml_set_alloc_hooks(&(ml_alloc_hooks_t){.calloc = failing_calloc});
    ent_t *e = ents_put(&m, 13, &existed);
    ml_set_alloc_hooks(NULL);
    cr_expect_null(e);
    cr_expect_eq(fail_calls, 1);
    cr_expect_eq(m.count, 12);
    cr_expect_eq(m.cap, 16);
    for (uint64_t k = 1; k <= 12; k++) cr_expect_eq(ents_find(&m, k)->value, k);
    cr_expect_null(ents_find(&m, 13));
    check_invariants(&m);
    ml_map_free(&m);
}

/* The analysis snapshot saves each live block's slot relative to this hash:
 * a different hash must come with a new snapshot version. */
Test(map, the_hash_is_the_one_the_snapshot_format_names) {
    cr_expect_eq(ml_map_hash(0x7f3a12345670ull), 0xfc872df7acd4f832ull);
    cr_expect_eq(ml_map_hash(1), 0xff51afd792fd5b26ull);
}

Test(grow, doubles_from_64_and_fills_the_new_elements) {
    uint32_t *v = NULL, cap = 0;
    cr_assert_eq(ml_grow((void **)&v, &cap, 1, sizeof *v, 0xff), 0);
    cr_expect_eq(cap, 64);
    cr_expect_eq(v[63], 0xffffffffu);
    v[0] = 7;
    cr_assert_eq(ml_grow((void **)&v, &cap, 64, sizeof *v, 0), 0);
    cr_expect_eq(cap, 64, "room enough: nothing changes");
    cr_assert_eq(ml_grow((void **)&v, &cap, 300, sizeof *v, 0), 0);
    cr_expect_eq(cap, 512);
    cr_expect_eq(v[0], 7, "the old elements stay");
    cr_expect_eq(v[63], 0xffffffffu);
    cr_expect_eq(v[64], 0, "the new ones are filled");
    cr_expect_eq(v[511], 0);
    cr_expect_eq(ml_grow((void **)&v, &cap, (uint64_t)UINT32_MAX + 1, sizeof *v, 0), -ENOMEM);
    cr_expect_eq(cap, 512);
    free(v);
}

/* ml_map_shrink: the smallest table that takes one more insert, every entry
 * still found with its value, the invariants, a second map fed the same
 * operations shrunk to the same layout slot for slot (the analysis snapshot
 * saves slots), and nothing done when the table is already that small. */
Test(map, shrink_fits_the_entries_and_keeps_the_layout_a_function_of_the_operations) {
    ml_map_t m[2] = {{0}, {0}};
    for (int w = 0; w < 2; w++) {
        for (uint64_t k = 1; k <= 100000; k++) {
            bool existed;
            ent_t *e = ents_put(&m[w], 0x7f0000000000ull + k * 48, &existed);
            cr_assert(e && !existed);
            e->value = k;
        }
        for (uint64_t k = 1; k <= 100000; k++)
            if (k % 1000) ents_remove(&m[w], ents_find(&m[w], 0x7f0000000000ull + k * 48));
        cr_assert_eq(m[w].count, 100);
        cr_assert_eq(m[w].cap, 262144);
        cr_assert_eq(ml_map_shrink(&m[w], sizeof(ent_t), 16), 0);
        cr_assert_eq(m[w].cap, 256, "101 entries fit 3/4 of 256 slots, not of 128");
        check_invariants(&m[w]);
        for (uint64_t k = 1000; k <= 100000; k += 1000) {
            const ent_t *e = ents_find(&m[w], 0x7f0000000000ull + k * 48);
            cr_assert(e && e->value == k);
        }
    }
    cr_expect(!memcmp(m[0].e, m[1].e, m[0].cap * sizeof(ent_t)), "the same operations, the same slots");
    void *before = m[0].e;
    cr_assert_eq(ml_map_shrink(&m[0], sizeof(ent_t), 16), 0);
    cr_expect_eq(m[0].e, before, "already the smallest: left alone");
    ml_map_t empty = {0};
    cr_assert_eq(ml_map_shrink(&empty, sizeof(ent_t), 16), 0);
    cr_expect_eq(empty.cap, 0);
    ml_map_free(&m[0]);
    ml_map_free(&m[1]);
}

/* ------------------------------------------------------------------------- */
/* The block sorts (analysis.c): in place from 2^16 blocks, LSD below        */
/* ------------------------------------------------------------------------- */

#include "analysis_internal.h"

static int cmp_fb(const void *x, const void *y) {
    const ml__fblock_t *a = x, *b = y;
    if (a->ptr != b->ptr) return a->ptr < b->ptr ? -1 : 1;
    return 0;
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Sorted by address, and the same multiset of blocks (each block's other
 * fields travel with its address). */
static void check_sorted(ml__fblock_t *v, uint64_t n, const char *what) {
    ml__fblock_t *ref = malloc((n ? n : 1) * sizeof *ref);
    cr_assert(ref);
    memcpy(ref, v, n * sizeof *v);
    qsort(ref, n, sizeof *ref, cmp_fb);
    ml__sort_fblocks(v, n);
    for (uint64_t i = 0; i < n; i++) {
        cr_assert_eq(v[i].ptr, ref[i].ptr, "%s, n=%llu: block %llu", what, (unsigned long long)n,
                     (unsigned long long)i);
        /* The size is a function of the address here: it moved with it. */
        cr_assert_eq(v[i].size, (v[i].ptr * 7) & 0xffff, "%s: block %llu carried its size", what,
                     (unsigned long long)i);
    }
    free(ref);
}

Test(sort, blocks_sort_like_qsort_on_both_paths_and_every_address_layout) {
    /* Sizes around the in-place threshold (2^16) and the insertion sort's (32). */
    const uint64_t sizes[] = {0, 1, 2, 31, 33, 1000, 65535, 65536, 65537, 300000};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        uint64_t n = sizes[si];
        ml__fblock_t *v = calloc(n ? n : 1, sizeof *v);
        cr_assert(v);
        for (int layout = 0; layout < 5; layout++) {
            for (uint64_t i = 0; i < n; i++) {
                uint64_t p;
                switch (layout) {
                case 0: p = 0x7f0000000000ull + (rnd() & 0x3fffffff) * 16; break; /* a heap */
                case 1: p = rnd() | 1; break;                                      /* all 64 bits */
                case 2: p = 0x555555550000ull + (rnd() % 7) * 16; break;          /* many equal */
                case 3: p = 0x1000 + (n - i) * 32; break;                          /* descending */
                default: p = (i & 1) ? 0x7ffff0000000ull + i * 48 : 0x10000 + i * 16; break; /* two ranges */
                }
                v[i].ptr = p;
                v[i].size = (p * 7) & 0xffff;
            }
            char what[32];
            snprintf(what, sizeof what, "layout %d", layout);
            check_sorted(v, n, what);
        }
        free(v);
    }
}
