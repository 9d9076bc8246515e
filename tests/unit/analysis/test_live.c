/* test_live.c - the compact live set of heap blocks (analysis/live.c)
 * against a plain hash map of whole blocks as the reference: random
 * inserts, replacements, removals and leak kinds over addresses that crowd
 * a few pages (up to every byte of one), spread over many, or sit at the
 * ends of the address space; sizes that do not fit 32 bits; walks in
 * address order, rewound; and an allocation that fails. */
#define _GNU_SOURCE /* memmem */
#include "analysis_internal.h"
#include "ml_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int cmp_ptr(const void *x, const void *y) {
    uint64_t l = ((const ml__block_t *)x)->ptr, r = ((const ml__block_t *)y)->ptr;
    return l < r ? -1 : l > r;
}

static void same_block(const ml__block_t *a, const ml__block_t *b, const char *what) {
    cr_assert_eq(a->ptr, b->ptr, "%s: address", what);
    cr_assert_eq(a->size, b->size, "%s: size of %#llx", what, (unsigned long long)a->ptr);
    cr_assert_eq(a->reach, b->reach, "%s: kind of %#llx", what, (unsigned long long)a->ptr);
    cr_assert_eq(a->seq, b->seq, "%s: seq of %#llx", what, (unsigned long long)a->ptr);
    cr_assert_eq(a->slack, b->slack, "%s: slack of %#llx", what, (unsigned long long)a->ptr);
    cr_assert_eq(a->stack, b->stack, "%s: stack of %#llx", what, (unsigned long long)a->ptr);
    cr_assert_eq(a->time_ms, b->time_ms, "%s: time of %#llx", what, (unsigned long long)a->ptr);
}

/* Every block of the reference, by address, is what a walk of the set
 * gives (twice: the second after a rewind). */
static void check_walk(const ml__live_t *L, const ml_map_t *ref) {
    cr_assert_eq(L->count, ref->count);
    ml__block_t *v = malloc((ref->count + 1) * sizeof *v);
    cr_assert(v);
    uint64_t n = 0;
    const ml__block_t *e = ml__blocks_entries(ref);
    for (uint64_t i = 0; i < ref->cap; i++)
        if (e[i].ptr) v[n++] = e[i];
    qsort(v, n, sizeof *v, cmp_ptr);
    ml__live_cursor_t cur;
    cr_assert_eq(ml__live_cursor_init(&cur, L), 0);
    for (int pass = 0; pass < 2; pass++) {
        ml__block_t b;
        uint64_t k = 0;
        while (ml__live_next(&cur, &b)) {
            cr_assert_lt(k, n, "the walk gives more blocks than there are");
            same_block(&b, &v[k], "walk");
            k++;
        }
        cr_assert_eq(k, n, "the walk gives every block");
        ml__live_cursor_rewind(&cur);
    }
    /* A moment's walk: the blocks allocated by an event number, as
     * fragmentation blocks (sizes clamped to 48 bits). */
    uint64_t max_seq = n ? v[n / 2].seq : 0;
    ml__fblock_t f;
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (v[i].seq > max_seq) continue;
        cr_assert(ml__live_next_fblock(&cur, max_seq, &f), "a moment's walk gives block %llu",
                  (unsigned long long)i);
        cr_assert_eq(f.ptr, v[i].ptr);
        cr_assert_eq(f.size, v[i].size < (1ull << 48) ? v[i].size : (1ull << 48) - 1);
        cr_assert_eq(f.slack, v[i].slack);
        k++;
    }
    cr_assert(!ml__live_next_fblock(&cur, max_seq, &f), "and no more");
    ml__live_cursor_free(&cur);
    free(v);
}

/* An address from one of four neighbourhoods: a few crowded pages (any
 * byte), a wide heap (16-byte steps), the first pages of the address space
 * and its last ones. */
static uint64_t some_ptr(void) {
    uint64_t r = next();
    switch (r % 4) {
    case 0: return 0x5500000000ull + (next() % (3 * 4096));
    case 1: return 0x7f0000000000ull + (next() % (1u << 22)) * 16;
    case 2: return 1 + next() % (8 * 4096);
    default: return UINT64_MAX - next() % (4 * 4096);
    }
}

/* Sizes and slacks on both sides of what the record holds itself (24 bits
 * of size, slacks 0-253 and "unknown") and of what it used to (32 bits). */
static ml__block_t some_block(uint64_t ptr, uint64_t seq) {
    uint64_t r = next();
    uint64_t size = r % 8 == 0 ? (1ull << 32) + next() % (1ull << 40) /* over 32 bits */
                    : r % 8 == 1 ? UINT32_MAX - 1 + next() % 3   /* at that edge */
                    : r % 8 == 2 ? (1u << 24) - 2 + next() % 4   /* at the record's edge */
                                 : next() % 5000;
    uint64_t s = next();
    uint16_t slack = s % 5 == 0 ? (uint16_t)next()                       /* any */
                     : s % 5 == 1 ? (uint16_t)(252 + next() % 4)        /* at the edge */
                     : s % 5 == 2 ? (uint16_t)(ML__SLACK_UNKNOWN - next() % 2) /* unknown, or not */
                                  : (uint16_t)(next() % 24);             /* glibc's */
    return (ml__block_t){
        .ptr = ptr,
        .size = size,
        .reach = (unsigned)(next() % 5),
        .seq = seq & ((1ull << 48) - 1),
        .slack = slack,
        .stack = (uint32_t)next(),
        .time_ms = (uint32_t)next(),
    };
}

Test(live, matches_a_map_of_whole_blocks_under_random_churn, .timeout = 120) {
    ml__live_t L = {0};
    ml_map_t ref = {0};
    uint64_t seq = (1ull << 40) - 1000; /* crosses 2^40: the record's high bits */
    for (int round = 0; round < 400000; round++) {
        uint64_t r = next() % 100;
        uint64_t ptr = some_ptr();
        if (r < 55) {
            ml__block_t b = some_block(ptr, seq += next() % 5000);
            ml__block_t old;
            bool existed;
            cr_assert_eq(ml__live_put(&L, &b, &old, &existed), 0);
            ml__block_t *e = ml__blocks_find(&ref, ptr);
            cr_assert_eq(existed, e != NULL, "put of %#llx", (unsigned long long)ptr);
            if (e) same_block(&old, e, "replaced");
            bool x;
            *ml__blocks_put(&ref, ptr, &x) = b;
        } else if (r < 90) {
            ml__block_t got;
            bool found = ml__live_take(&L, ptr, &got);
            ml__block_t *e = ml__blocks_find(&ref, ptr);
            cr_assert_eq(found, e != NULL, "take of %#llx", (unsigned long long)ptr);
            if (e) {
                same_block(&got, e, "taken");
                ml__blocks_remove(&ref, e);
            }
        } else if (r < 95) {
            unsigned k = (unsigned)(next() % 5);
            ml__block_t *e = ml__blocks_find(&ref, ptr);
            cr_assert_eq(ml__live_set_reach(&L, ptr, k), e != NULL);
            if (e) e->reach = k;
        } else {
            ml__block_t got;
            ml__block_t *e = ml__blocks_find(&ref, ptr);
            cr_assert_eq(ml__live_get(&L, ptr, &got), e != NULL, "get of %#llx", (unsigned long long)ptr);
            if (e) same_block(&got, e, "got");
        }
        if (round % 50000 == 0) check_walk(&L, &ref);
    }
    check_walk(&L, &ref);
    /* Empty it: every chunk goes, and the walk is empty. */
    const ml__block_t *e = ml__blocks_entries(&ref);
    for (uint64_t i = 0; i < ref.cap; i++) {
        ml__block_t got;
        if (e[i].ptr) cr_assert(ml__live_take(&L, e[i].ptr, &got));
    }
    cr_assert_eq(L.count, 0);
    cr_assert_eq(L.bytes, 0, "no chunk is left");
    cr_assert_eq(L.big.count, 0, "no big size is left");
    ml__live_free(&L);
    ml_map_free(&ref);
}

/* Every byte of one page holds a block: 4096 blocks in one chunk, in
 * any order, then removed in any order. */
Test(live, a_page_full_of_one_byte_blocks) {
    ml__live_t L = {0};
    const uint64_t base = 0x123456000ull;
    uint32_t order[4096];
    for (uint32_t i = 0; i < 4096; i++) order[i] = i;
    for (uint32_t i = 4095; i > 0; i--) {
        uint32_t j = (uint32_t)(next() % (i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (uint32_t i = 0; i < 4096; i++) {
        ml__block_t b = {.ptr = base + order[i], .size = 1, .seq = i, .stack = order[i]}, old;
        bool existed;
        cr_assert_eq(ml__live_put(&L, &b, &old, &existed), 0);
        cr_assert(!existed);
    }
    cr_assert_eq(L.count, 4096);
    ml__live_cursor_t cur;
    cr_assert_eq(ml__live_cursor_init(&cur, &L), 0);
    ml__block_t b;
    for (uint32_t i = 0; i < 4096; i++) {
        cr_assert(ml__live_next(&cur, &b));
        cr_assert_eq(b.ptr, base + i);
        cr_assert_eq(b.stack, i);
    }
    cr_assert(!ml__live_next(&cur, &b));
    ml__live_cursor_free(&cur);
    for (uint32_t i = 0; i < 4096; i++) {
        cr_assert(ml__live_take(&L, base + order[(i * 7) % 4096], &b));
        cr_assert_eq(b.stack, order[(i * 7) % 4096]);
    }
    cr_assert_eq(L.count, 0);
    cr_assert_eq(L.bytes, 0);
    ml__live_free(&L);
}

/* A block put where a removed one was takes its slot back, and counts as
 * live: removing its neighbours leaves it there. */
Test(live, a_block_put_where_one_was_removed_stays) {
    ml__live_t L = {0};
    const uint64_t base = 0x40000000ull;
    ml__block_t b = {.size = 8}, old, got;
    bool existed;
    for (uint32_t i = 0; i < 3; i++) {
        b.ptr = base + i * 16;
        b.stack = i;
        cr_assert_eq(ml__live_put(&L, &b, &old, &existed), 0);
    }
    cr_assert(ml__live_take(&L, base + 16, &got));
    cr_assert(!ml__live_get(&L, base + 16, &got), "removed");
    b.ptr = base + 16;
    b.stack = 7;
    cr_assert_eq(ml__live_put(&L, &b, &old, &existed), 0);
    cr_assert(!existed, "a removed block is not replaced");
    cr_assert(ml__live_take(&L, base, &got));
    cr_assert(ml__live_take(&L, base + 32, &got));
    cr_assert_eq(L.count, 1);
    cr_assert(ml__live_get(&L, base + 16, &got), "it stays when its neighbours go");
    cr_assert_eq(got.stack, 7);
    ml__live_cursor_t cur;
    cr_assert_eq(ml__live_cursor_init(&cur, &L), 0);
    cr_assert(ml__live_next(&cur, &got));
    cr_assert_eq(got.ptr, base + 16);
    cr_assert(!ml__live_next(&cur, &got));
    ml__live_cursor_free(&cur);
    ml__live_free(&L);
}

static bool fail_all;
static void *realloc_maybe(void *p, size_t n) {
    return fail_all ? NULL : realloc(p, n);
}
static void *calloc_maybe(size_t n, size_t size) {
    return fail_all ? NULL : calloc(n, size);
}

/* A put that cannot get memory (the first chunk, a chunk's growth, the side
 * map of big sizes) says so and changes nothing. Chunks are carved from
 * arenas (the first is 64 KiB): one page filled byte by byte outgrows it. */
Test(live, a_put_without_memory_changes_nothing) {
    ml__live_t L = {0};
    ml_set_alloc_hooks(&(ml_alloc_hooks_t){.calloc = calloc_maybe, .realloc = realloc_maybe});
    const uint64_t base = 0x7000000000ull;
    ml__block_t b = {.ptr = base, .size = 1}, old, got;
    bool existed;
    fail_all = true;
    cr_expect_eq(ml__live_put(&L, &b, &old, &existed), -ENOMEM, "no arena for the first chunk");
    cr_expect_eq(L.count, 0);
    cr_expect(!ml__live_get(&L, base, &got));
    fail_all = false;
    cr_assert_eq(ml__live_put(&L, &b, &old, &existed), 0);
    fail_all = true;
    uint32_t n = 1;
    int rc = 0;
    for (; n < 4096; n++) {
        b.ptr = base + n;
        b.stack = n;
        if ((rc = ml__live_put(&L, &b, &old, &existed)) < 0) break;
    }
    cr_assert_eq(rc, -ENOMEM, "the first arena ran out at %u blocks", n);
    cr_assert_eq(L.count, n, "the block that failed is not counted");
    cr_expect(!ml__live_get(&L, base + n, &got), "nor there");
    for (uint32_t i = 1; i < n; i++) {
        cr_assert(ml__live_get(&L, base + i, &got));
        cr_assert_eq(got.stack, i, "the others are intact");
    }
    b.ptr = base + 1; /* replacing needs no room, unless the size is big */
    b.size = 1ull << 33;
    cr_expect_eq(ml__live_put(&L, &b, &old, &existed), -ENOMEM, "the side map fails");
    b.size = 77;
    cr_expect_eq(ml__live_put(&L, &b, &old, &existed), 0, "a replacement needs nothing");
    cr_expect(existed);
    fail_all = false;
    ml_set_alloc_hooks(NULL);
    cr_expect(ml__live_get(&L, base + 1, &got));
    cr_expect_eq(got.size, 77);
    /* With memory back, the page fills up. */
    for (uint32_t i = n; i < 4096; i++) {
        b.ptr = base + i;
        cr_assert_eq(ml__live_put(&L, &b, &old, &existed), 0);
    }
    cr_expect_eq(L.count, 4096);
    ml__live_free(&L);
}

/* Puts n blocks of `size` bytes every `step` bytes from `base` into both
 * the set and the reference map. */
static void put_blocks(ml__live_t *L, ml_map_t *ref, uint64_t base, uint64_t n, uint64_t step,
                       uint64_t size) {
    for (uint64_t i = 0; i < n; i++) {
        ml__block_t b = {.ptr = base + step * i, .size = size, .seq = i + 1, .slack = 8, .stack = 7};
        ml__block_t old;
        bool existed, x;
        cr_assert_eq(ml__live_put(L, &b, &old, &existed), 0);
        *ml__blocks_put(ref, b.ptr, &x) = b;
    }
}

/* Removes every `every`-th of those blocks from both, the first included. */
static void take_blocks(ml__live_t *L, ml_map_t *ref, uint64_t base, uint64_t n, uint64_t step,
                        uint64_t every) {
    for (uint64_t i = 0; i < n; i += every) {
        ml__block_t got;
        cr_assert(ml__live_take(L, base + step * i, &got));
        ml__blocks_remove(ref, ml__blocks_find(ref, base + step * i));
    }
}

/* Leak kinds set in address order (as the exit scan's records come), in
 * reverse, and past removed blocks: ml__live_set_reach's guess of the next
 * entry is checked, so each order sets the kinds a map of whole blocks
 * holds. Blocks of 48 bytes on three pages; every third one removed. */
Test(live, kinds_set_in_any_order) {
    ml__live_t L = {0};
    ml_map_t ref = {0};
    const uint64_t base = 0x7f0000000000ull;
    uint64_t n = 3 * 4096 / 48;
    put_blocks(&L, &ref, base, n, 48, 40);
    take_blocks(&L, &ref, base, n, 48, 3);
    for (int order = 0; order < 3; order++) {
        for (uint64_t k = 0; k < n; k++) {
            uint64_t i = order == 1 ? n - 1 - k : k;
            uint64_t ptr = base + 48 * i + (order == 2 && i % 5 == 0 ? 8 : 0); /* 2: some not a block */
            unsigned kind = (unsigned)((i + (uint64_t)order) % 5);
            ml__block_t *e = ml__blocks_find(&ref, ptr);
            cr_assert_eq(ml__live_set_reach(&L, ptr, kind), e != NULL, "order %d, block %llu", order,
                         (unsigned long long)i);
            if (e) e->reach = kind;
        }
        check_walk(&L, &ref);
    }
    ml__live_free(&L);
    ml_map_free(&ref);
}

/* The exit scan names the blocks whose kind is not the most common one,
 * then gives the rest that kind (ML_T_REACH_REST): only blocks still without
 * a kind take it, removed ones stay removed, and blocks added after have
 * none. */
Test(live, the_rest_takes_the_common_kind) {
    ml__live_t L = {0};
    ml_map_t ref = {0};
    const uint64_t base = 0x7f0000000000ull;
    uint64_t n = 5 * 4096 / 32;
    put_blocks(&L, &ref, base, n, 32, 24);
    take_blocks(&L, &ref, base, n, 32, 4); /* DEAD entries, which the rest must skip */
    uint64_t named = 0, live = 0;
    for (uint64_t i = 1; i < n; i += 7) {
        ml__block_t *e = ml__blocks_find(&ref, base + 32 * i);
        if (!e) continue;
        cr_assert(ml__live_set_reach(&L, e->ptr, ML_REACH_DEFINITE));
        e->reach = ML_REACH_DEFINITE;
        named++;
    }
    for (uint64_t i = 0; i < n; i++) {
        ml__block_t *e = ml__blocks_find(&ref, base + 32 * i);
        if (!e) continue;
        live++;
        if (!e->reach) e->reach = ML_REACH_REACHABLE;
    }
    cr_assert_eq(ml__live_set_reach_rest(&L, ML_REACH_REACHABLE), live - named);
    check_walk(&L, &ref);
    /* A block added afterwards has no kind, and a second rest finds only it. */
    put_blocks(&L, &ref, base + 32 * n, 1, 32, 24);
    check_walk(&L, &ref);
    cr_assert_eq(ml__live_set_reach_rest(&L, ML_REACH_INDIRECT), 1);
    ml__blocks_find(&ref, base + 32 * n)->reach = ML_REACH_INDIRECT;
    check_walk(&L, &ref);
    ml__live_free(&L);
    ml_map_free(&ref);
}

/* ml__block_make and ml__fblock_make write the block as words laid out as
 * the compiler lays out the bit-fields: the same bytes as the initialiser,
 * fields truncated alike. */
Test(live, a_block_made_in_words_equals_its_initialiser) {
    const uint64_t v[] = {0, 1, 0xfe, 0xffff, 0x10000, 0xffffffffull, 0x123456789abcull, ML__SIZE_MAX, UINT64_MAX};
    const size_t nv = sizeof v / sizeof v[0];
    for (size_t i = 0; i < nv; i++) {
        for (unsigned reach = 0; reach < 8; reach++) {
            uint64_t size = v[i], seq = v[(i + 3) % nv], slack = v[(i + 5) % nv] & 0xffff;
            uint32_t stack = (uint32_t)v[(i + 1) % nv], time_ms = (uint32_t)v[(i + 7) % nv];
            ml__block_t want;
            memset(&want, 0, sizeof want);
            want = (ml__block_t){.ptr = v[(i + 2) % nv], .size = size, .reach = reach, .seq = seq,
                                 .slack = slack, .stack = stack, .time_ms = time_ms};
            ml__block_t got = ml__block_make(v[(i + 2) % nv], size, reach, seq, slack, stack, time_ms);
            cr_assert(memcmp(&want, &got, sizeof want) == 0, "block %zu, reach %u", i, reach);
        }
        ml__fblock_t fwant;
        memset(&fwant, 0, sizeof fwant);
        fwant = (ml__fblock_t){.ptr = v[i], .size = v[(i + 4) % nv], .slack = v[(i + 6) % nv] & 0xffff};
        ml__fblock_t fgot = ml__fblock_make(v[i], v[(i + 4) % nv], v[(i + 6) % nv] & 0xffff);
        cr_assert(memcmp(&fwant, &fgot, sizeof fwant) == 0, "fragmentation block %zu", i);
    }
}

/* ------------------------------------------------------------------------- */
/* Loading in address order (ml__live_append, a snapshot's restore)          */
/* ------------------------------------------------------------------------- */

/* Blocks by rising address for the loader: pages that hold exactly the
 * counts where a chunk's class changes (8, 32, 4096 and their neighbours),
 * pages of one block far apart, sizes of 16 MiB and more and slacks of 254
 * and more (the side map), every slack code and leak kind, addresses at the
 * top of the address space. *n blocks into v (room for `max`). */
static uint64_t ordered_blocks(ml__block_t *v, uint64_t max) {
    static const uint32_t per_page[] = {1, 2, 7, 8, 9, 12, 13, 31, 32, 33, 36, 37, 64, 65,
                                        255, 256, 257, 1000, 4095, 4096};
    const size_t npp = sizeof per_page / sizeof per_page[0];
    uint64_t n = 0, page = 0x55000;
    for (int round = 0; round < 3; round++) {
        for (size_t k = 0; k < npp; k++, page += 1 + next() % 3) {
            uint32_t m = per_page[(k + (size_t)round * 7) % npp];
            for (uint32_t i = 0; i < m && n < max; i++) {
                uint64_t off = m == 4096 ? i : (uint64_t)i * (4096 / m) + next() % (4096 / m);
                uint64_t r = next();
                v[n] = some_block(page << 12 | off, n + 1);
                if (r % 16 == 0) v[n].size = (1ull << 24) + next() % (1ull << 30); /* side map */
                if (r % 16 == 1) v[n].size = (1ull << 57) + next() % 1000;        /* 9-byte varint */
                v[n].stack = (uint32_t)(next() % 6);
                n++;
            }
        }
        page += 1u << 20; /* a gap of 4 GiB between the rounds */
    }
    /* Pages of one block each, then blocks at the top of the address space
     * (a delta of 2^63 and more: a varint of 10 bytes). */
    for (uint32_t i = 0; i < 3000 && n < max; i++, page += 2, n++) v[n] = some_block(page << 12 | 16, n + 1);
    for (uint32_t i = 0; i < 40 && n < max; i++, n++) v[n] = some_block(UINT64_MAX - 4096 * 3 + 48 * i, n + 1);
    for (uint64_t i = 0; i < n; i++) v[i].stack %= 6;
    return n;
}

/* ml__live_append, fed in batches cut anywhere (inside a page too, as the
 * restore's batches are), makes the set that ml__live_put makes of the same
 * blocks in any order: the same blocks, chunk bytes, pages and side
 * entries. A page that has a chunk already, or blocks out of order, go
 * through ml__live_put. */
Test(live, appended_pages_make_the_set_that_puts_make, .timeout = 60) {
    const uint64_t max = 40000;
    ml__block_t *v = malloc(max * sizeof *v), *shuf = malloc(max * sizeof *v);
    cr_assert(v && shuf);
    uint64_t n = ordered_blocks(v, max);
    cr_assert_gt(n, 20000);
    memcpy(shuf, v, n * sizeof *v);
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = next() % (i + 1);
        ml__block_t t = shuf[i];
        shuf[i] = shuf[j];
        shuf[j] = t;
    }
    ml__live_t P = {0};
    ml_map_t ref = {0};
    for (uint64_t i = 0; i < n; i++) {
        ml__block_t old;
        bool existed, x;
        cr_assert_eq(ml__live_put(&P, &shuf[i], &old, &existed), 0);
        *ml__blocks_put(&ref, shuf[i].ptr, &x) = shuf[i];
    }
    for (int cut = 0; cut < 3; cut++) {
        ml__live_t A = {0};
        uint64_t i = 0;
        ml__block_t *buf = malloc(8192 * sizeof *buf);
        cr_assert(buf);
        uint32_t held = 0;
        while (i < n || held) {
            /* 1 to 8192 blocks more (cut 0), batches of the restore's 8192,
             * or 1-3 more */
            uint32_t want = cut == 1 ? 8192 : held + 1 + (uint32_t)(next() % (cut == 0 ? 8192 : 3));
            if (want > 8192) want = 8192;
            while (held < want && i < n) buf[held++] = v[i++];
            bool all = i == n;
            int err;
            uint32_t k = ml__live_append(&A, buf, held, all, &err);
            cr_assert_eq(err, 0);
            if (all) cr_assert_eq(k, held, "the last call takes every block");
            if (held == 8192) cr_assert_gt(k, 0, "a full batch holds a whole page");
            memmove(buf, buf + k, (held - k) * sizeof *buf);
            held -= k;
            if (cut == 2 && held > 4096) cr_assert_fail("a page of more than 4096 blocks");
        }
        free(buf);
        check_walk(&A, &ref);
        cr_expect_eq(A.bytes, P.bytes, "cut %d: chunk bytes", cut);
        cr_expect_eq(A.dir.count, P.dir.count, "cut %d: pages", cut);
        cr_expect_eq(A.big.count, P.big.count, "cut %d: side entries", cut);
        for (uint64_t j = 0; j < n; j++) {
            ml__block_t got;
            cr_assert(ml__live_get(&A, v[j].ptr, &got));
            same_block(&got, &v[j], "get");
        }
        ml__live_free(&A);
    }
    /* Blocks on pages the set has (one between two blocks, one replacing
     * a block), and on a new page out of order, one address twice (the
     * second replaces the first): ml__live_put's way. */
    ml__live_t A = {0};
    int err;
    cr_assert_eq(ml__live_append(&A, v, (uint32_t)n, true, &err), n);
    const uint64_t np = 0x10000000000ull;
    ml__block_t more[7] = {some_block(v[n - 1].ptr - 1, 1), some_block(v[n / 2].ptr, 2),
                           some_block(np + 64, 3),          some_block(np + 32, 4),
                           some_block(np + 32, 5),          some_block(np + 128, 6),
                           some_block(v[0].ptr + 1, 7)};
    for (int q = 0; q < 7; q++) {
        bool x;
        *ml__blocks_put(&ref, more[q].ptr, &x) = more[q];
    }
    cr_assert_eq(ml__live_append(&A, more, 7, true, &err), 7);
    cr_assert_eq(err, 0);
    check_walk(&A, &ref);
    ml__live_free(&A);
    ml__live_free(&P);
    ml_map_free(&ref);
    free(v);
    free(shuf);
}

/* A session fed v[0..n) in that order: slacks from the usable size (0-253
 * in the record, 254 and more in the side map, or none), the exit scan's
 * kinds for some, an exit. */
static ml_analysis_t *session_of(const ml__block_t *v, uint64_t n) {
    ml_analysis_t *a;
    cr_assert_eq(ml_analysis_new(&a), 0);
    ml_record_t pr = {.tag = ML_T_PROCESS};
    pr.u.process.page_size = 4096;
    pr.u.process.exe = pr.u.process.parent_trace = pr.u.process.producer = "";
    ml_analysis_feed(a, &pr);
    for (uint32_t id = 1; id <= 5; id++) {
        ml_record_t nd = {.tag = ML_T_NODE};
        nd.u.node.id = id;
        nd.u.node.pc = 0x1000ull * id;
        ml_analysis_feed(a, &nd);
    }
    for (uint64_t i = 0; i < n; i++) {
        ml_record_t r = {.tag = ML_T_ALLOC, .time_ms = (uint32_t)(i / 7)};
        r.u.alloc.kind = ML_KIND_MALLOC;
        r.u.alloc.ptr = v[i].ptr;
        r.u.alloc.size = v[i].size;
        r.u.alloc.stack = v[i].stack;
        /* slacks 0-253 in the record, 254 and more in the side map, none */
        uint64_t s = next() % 4;
        r.u.alloc.usable = s == 0 ? 0 : s == 1 ? v[i].size + next() % 254 : v[i].size + 254 + next() % 3000;
        ml_analysis_feed(a, &r);
    }
    for (uint64_t i = 0; i < n; i += 1 + next() % 3) {
        ml_record_t r = {.tag = ML_T_BLOCK_REACH};
        r.u.block_reach.ptr = v[i].ptr;
        r.u.block_reach.reach = (uint8_t)(1 + next() % 4);
        ml_analysis_feed(a, &r);
    }
    ml_record_t sc = {.tag = ML_T_REACH_SCAN};
    ml_analysis_feed(a, &sc);
    ml_record_t ex = {.tag = ML_T_PROC_EXIT, .time_ms = 99999};
    ml_analysis_feed(a, &ex);
    return a;
}

/* A session's live blocks, saved in a snapshot and restored (the batches
 * of snapshot.c's get_live, its unchecked varints and their fall-back, and
 * ml__live_append), are the set the session had, block for block: 40,000
 * blocks fed in random order (ml__live_put's way), on pages of every chunk
 * class boundary, with sizes of the side map, every slack code (from the
 * usable size) and leak kind, and addresses whose deltas take 10 bytes. */
Test(live, a_restored_snapshot_holds_the_same_set, .timeout = 60) {
    const uint64_t max = 40000;
    ml__block_t *v = malloc(max * sizeof *v);
    cr_assert(v);
    uint64_t n = ordered_blocks(v, max);
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = next() % (i + 1);
        ml__block_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    ml_analysis_t *a = session_of(v, n);
    cr_assert_eq(a->heap.count, n);
    cr_assert_gt(a->heap.big.count, 1000, "the side map is used");

    void *data;
    size_t len;
    cr_assert_eq(ml_analysis_snapshot(a, &data, &len), 0);
    ml_analysis_t *b;
    char err[256] = "";
    cr_assert_eq(ml_analysis_new(&b), 0);
    cr_assert_eq(ml_analysis_restore(b, data, len, err, sizeof err), 0, "%s", err);
    const ml__live_t *X = &a->heap, *Y = &b->heap;
    cr_assert_eq(Y->count, X->count);
    cr_expect_eq(Y->bytes, X->bytes, "chunk bytes");
    cr_expect_eq(Y->dir.count, X->dir.count, "pages");
    cr_expect_eq(Y->big.count, X->big.count, "side entries");
    ml__live_cursor_t cx, cy;
    cr_assert_eq(ml__live_cursor_init(&cx, X), 0);
    cr_assert_eq(ml__live_cursor_init(&cy, Y), 0);
    ml__block_t bx, by;
    uint64_t k = 0, kinds[8] = {0}, unknown_slack = 0, small_slack = 0;
    while (ml__live_next(&cx, &bx)) {
        cr_assert(ml__live_next(&cy, &by), "the restored set ends after %llu blocks", (unsigned long long)k);
        same_block(&by, &bx, "restored");
        kinds[bx.reach]++;
        unknown_slack += bx.slack == ML__SLACK_UNKNOWN;
        small_slack += bx.slack < 254;
        k++;
    }
    cr_assert(!ml__live_next(&cy, &by), "the restored set has more blocks");
    cr_assert_eq(k, n);
    for (int r = 0; r <= ML_REACH_POSSIBLE; r++) cr_expect_gt(kinds[r], 100, "kind %d", r);
    cr_expect_gt(unknown_slack, 1000);
    cr_expect_gt(small_slack, 1000);
    ml__live_cursor_free(&cx);
    ml__live_cursor_free(&cy);
    ml_analysis_free(a);
    ml_analysis_free(b);
    free(data);
    free(v);
}

/* The report's restore keeps the live set as the snapshot's bytes
 * (ml__live_set_packed): every walk of it gives the blocks the built set
 * gives, in the same order (ml__live_next, the end's walk, the
 * fragmentation walk up to an event number, after a rewind, and a lookup),
 * and the first change builds the set the eager restore built, which then
 * changes the same way. */
Test(live, a_packed_restore_walks_and_changes_as_the_built_set, .timeout = 60) {
    const uint64_t max = 40000;
    ml__block_t *v = malloc(max * sizeof *v);
    cr_assert(v);
    uint64_t n = ordered_blocks(v, max);
    ml_analysis_t *a = session_of(v, n);
    void *data;
    size_t len;
    cr_assert_eq(ml_analysis_snapshot(a, &data, &len), 0);
    ml_analysis_t *b, *p;
    char err[256] = "";
    cr_assert_eq(ml_analysis_new(&b), 0);
    cr_assert_eq(ml_analysis_new(&p), 0);
    cr_assert_eq(ml_analysis_restore(b, data, len, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ml__analysis_restore_packed(p, data, len, err, sizeof err), 1, "%s", err);
    ml__live_t *X = &b->heap, *Y = &p->heap;
    cr_assert(Y->packed && !X->packed);
    cr_assert_eq(Y->count, X->count);
    cr_expect_eq(Y->dir.count, 0, "no chunk built");

    ml__live_cursor_t cx, cy;
    cr_assert_eq(ml__live_cursor_init(&cx, X), 0);
    cr_assert_eq(ml__live_cursor_init(&cy, Y), 0);
    for (int round = 0; round < 2; round++) {
        ml__block_t bx, by;
        uint64_t k = 0;
        while (ml__live_next(&cx, &bx)) {
            cr_assert(ml__live_next(&cy, &by), "round %d: the packed set ends after %llu", round,
                      (unsigned long long)k);
            same_block(&by, &bx, "packed");
            k++;
        }
        cr_assert(!ml__live_next(&cy, &by));
        cr_assert_eq(k, n);
        ml__live_cursor_rewind(&cx);
        ml__live_cursor_rewind(&cy);
    }
    ml__eblock_t ex[256], ey[256];
    uint32_t nx, ny;
    uint64_t ends = 0;
    do {
        nx = ml__live_next_ends(&cx, ex, 256);
        ny = ml__live_next_ends(&cy, ey, 256);
        cr_assert_eq(ny, nx);
        for (uint32_t i = 0; i < nx; i++) {
            cr_assert_eq(ey[i].ptr, ex[i].ptr);
            cr_assert_eq(ey[i].size, ex[i].size);
            cr_assert_eq(ey[i].slack, ex[i].slack);
            cr_assert_eq(ey[i].stack, ex[i].stack);
            cr_assert_eq(ey[i].reach, ex[i].reach);
        }
        ends += nx;
    } while (nx);
    cr_assert_eq(ends, n);
    ml__live_cursor_rewind(&cx);
    ml__live_cursor_rewind(&cy);
    uint64_t max_seq = v[n / 2].seq, fb = 0;
    ml__fblock_t fx, fy;
    uint64_t qx, qy;
    while (ml__live_next_fblock_seq(&cx, max_seq, &fx, &qx)) {
        cr_assert(ml__live_next_fblock_seq(&cy, max_seq, &fy, &qy));
        cr_assert_eq(memcmp(&fy, &fx, sizeof fx), 0, "fragmentation block %llu", (unsigned long long)fb);
        cr_assert_eq(qy, qx);
        fb++;
    }
    cr_assert(!ml__live_next_fblock_seq(&cy, max_seq, &fy, &qy));
    cr_assert_gt(fb, 0);
    cr_assert_lt(fb, n);
    ml__live_cursor_free(&cx);
    ml__live_cursor_free(&cy);
    ml__block_t gx, gy;
    cr_assert(ml__live_get(Y, v[n / 3].ptr, &gy) && ml__live_get(X, v[n / 3].ptr, &gx));
    same_block(&gy, &gx, "looked up");
    cr_assert(!ml__live_get(Y, v[n / 3].ptr + 1, &gy) || gy.ptr == v[n / 3].ptr + 1);

    /* A change builds the chunks: the same set as the eager restore's. */
    cr_assert(ml__live_take(Y, v[7].ptr, &gy) && ml__live_take(X, v[7].ptr, &gx));
    same_block(&gy, &gx, "taken");
    cr_assert(!Y->packed);
    cr_expect_eq(Y->count, X->count);
    cr_expect_eq(Y->bytes, X->bytes, "chunk bytes");
    cr_expect_eq(Y->dir.count, X->dir.count, "pages");
    cr_expect_eq(Y->big.count, X->big.count, "side entries");
    cr_assert_eq(ml__live_cursor_init(&cx, X), 0);
    cr_assert_eq(ml__live_cursor_init(&cy, Y), 0);
    uint64_t k = 0;
    while (ml__live_next(&cx, &gx)) {
        cr_assert(ml__live_next(&cy, &gy));
        same_block(&gy, &gx, "built");
        k++;
    }
    cr_assert(!ml__live_next(&cy, &gy));
    cr_assert_eq(k, n - 1);
    ml__live_cursor_free(&cx);
    ml__live_cursor_free(&cy);
    ml_analysis_free(a);
    ml_analysis_free(b);
    ml_analysis_free(p); /* frees data */
    free(v);
}

static size_t put_varint(uint8_t *p, uint64_t x) {
    size_t k = 0;
    while (x >= 0x80) {
        p[k++] = (uint8_t)(x | 0x80);
        x >>= 7;
    }
    p[k++] = (uint8_t)x;
    return k;
}

static size_t varint_len(const uint8_t *p) {
    size_t k = 0;
    while (p[k] & 0x80) k++;
    return k + 1;
}

/* The snapshot with field f (0: the address delta, 1-6: size, kind,
 * event number, slack, stack, time) of live block k replaced by the bytes
 * `put` (np of them); live_at is where the live set's count starts. */
static uint8_t *damage(const uint8_t *data, size_t len, size_t live_at, uint64_t k, int f,
                       const uint8_t *put, size_t np, size_t *out_len) {
    size_t at = live_at + varint_len(data + live_at);
    for (uint64_t i = 0; i < k * 7 + (uint64_t)f; i++) at += varint_len(data + at);
    size_t old = varint_len(data + at);
    uint8_t *c = malloc(len + np);
    cr_assert(c);
    memcpy(c, data, at);
    memcpy(c + at, put, np);
    memcpy(c + at + np, data + at + old, len - at - old);
    *out_len = len - old + np;
    return c;
}

/* A damaged live block is refused for the reason it was before the
 * restore read blocks without per-byte checks: each field out of range, an
 * address not above the one before (the same address twice), a varint
 * that does not end, the bytes ending in the last block; at the first
 * block, inside the first batch, and past it (the restore's batches). A
 * varint written longer than it needs (9 and 10 bytes) still reads. */
Test(live, a_damaged_live_block_is_refused_for_its_reason, .timeout = 60) {
    const uint64_t max = 12000;
    ml__block_t *v = malloc(max * sizeof *v);
    cr_assert(v);
    uint64_t n = 0;
    for (uint64_t i = 0; i < max; i++, n++) {
        v[n] = some_block(0x7f0000001000ull + 48 * i, n + 1);
        v[n].size = 1 + next() % 40;
        v[n].stack = (uint32_t)(next() % 6);
    }
    ml_analysis_t *a = session_of(v, n);
    void *snap;
    size_t len;
    cr_assert_eq(ml_analysis_snapshot(a, &snap, &len), 0);
    const uint8_t *data = snap;
    /* The live set as the snapshot writes it, found in the bytes. */
    uint8_t *want = malloc(10 + n * 70), *w = want;
    w += put_varint(w, a->heap.count);
    ml__live_cursor_t cur;
    cr_assert_eq(ml__live_cursor_init(&cur, &a->heap), 0);
    ml__block_t b;
    uint64_t prev = 0;
    while (ml__live_next(&cur, &b)) {
        w += put_varint(w, b.ptr - prev);
        prev = b.ptr;
        w += put_varint(w, b.size);
        w += put_varint(w, b.reach);
        w += put_varint(w, b.seq);
        w += put_varint(w, b.slack);
        w += put_varint(w, b.stack);
        w += put_varint(w, b.time_ms);
    }
    ml__live_cursor_free(&cur);
    const uint8_t *found = memmem(data, len, want, (size_t)(w - want));
    cr_assert(found, "the live set is in the snapshot as written");
    size_t live_at = (size_t)(found - data);

    struct {
        int f;
        uint64_t value; /* put as a varint, or: */
        int raw;        /* 1: ten bytes of 0xff; 2: the value in 9 bytes; 3: in 10 */
        const char *why;
    } cases[] = {
        {0, 0, 0, "the blocks' addresses are not increasing"},
        {1, ML__SIZE_MAX + 1, 0, "a block size is out of range"},
        {2, ML_REACH_POSSIBLE + 1, 0, "a block's leak kind is out of range"},
        {3, 1ull << 48, 0, "a block's event number is out of range"},
        {4, 0x10000, 0, "a block's slack is out of range"},
        {5, a->nstats, 0, "a block names an unknown stack"},
        {6, 1ull << 32, 0, "a block's time is out of range"},
        {3, 0, 1, "a number is too long"},
        {0, 0, 1, "a number is too long"},
        {1, 0, 2, NULL},
        {6, 0, 3, NULL},
    };
    const uint64_t blocks[] = {0, 1, 4000, 8191, 8192, 8193, n - 2, n - 1};
    char err[256];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (size_t q = 0; q < sizeof blocks / sizeof blocks[0]; q++) {
            uint64_t k = blocks[q];
            uint8_t put[16];
            size_t np;
            if (cases[c].raw == 1) {
                memset(put, 0xff, 10);
                np = 10;
            } else if (cases[c].raw >= 2) {
                /* field f of block k as it is, written long */
                size_t at = live_at + varint_len(data + live_at);
                for (uint64_t i = 0; i < k * 7 + (uint64_t)cases[c].f; i++) at += varint_len(data + at);
                uint64_t x = 0;
                for (size_t i = 0, sh = 0; i < varint_len(data + at); i++, sh += 7)
                    x |= (uint64_t)(data[at + i] & 0x7f) << sh;
                np = cases[c].raw == 2 ? 9 : 10;
                for (size_t i = 0; i < np; i++) put[i] = (uint8_t)(((x >> (7 * i)) & 0x7f) | (i + 1 < np ? 0x80 : 0));
            } else {
                np = put_varint(put, cases[c].value);
            }
            size_t dl;
            uint8_t *d = damage(data, len, live_at, k, cases[c].f, put, np, &dl);
            ml_analysis_t *r;
            cr_assert_eq(ml_analysis_new(&r), 0);
            int rc = ml_analysis_restore(r, d, dl, err, sizeof err);
            /* the report's restore, which keeps the blocks packed, checks them the same way */
            ml_analysis_t *rp;
            cr_assert_eq(ml_analysis_new(&rp), 0);
            uint8_t *dp = malloc(dl);
            cr_assert(dp);
            memcpy(dp, d, dl);
            char errp[256] = "";
            int rcp = ml__analysis_restore_packed(rp, dp, dl, errp, sizeof errp);
            if (rcp != 1) free(dp);
            if (!cases[c].why) {
                cr_expect_eq(rc, 0, "case %zu, block %llu: %s", c, (unsigned long long)k, err);
                cr_expect_eq(rcp, 1, "case %zu, block %llu, packed: %s", c, (unsigned long long)k, errp);
                if (rc == 0) cr_expect_eq(r->heap.count, n);
                if (rcp == 1) cr_expect_eq(rp->heap.count, n);
            } else {
                char full[256];
                snprintf(full, sizeof full, "the analysis snapshot is damaged (%s)", cases[c].why);
                cr_expect_eq(rc, -EINVAL, "case %zu, block %llu was accepted", c, (unsigned long long)k);
                cr_expect_str_eq(err, full, "case %zu, block %llu", c, (unsigned long long)k);
                cr_expect_eq(rcp, -EINVAL, "case %zu, block %llu was accepted packed", c, (unsigned long long)k);
                cr_expect_str_eq(errp, full, "case %zu, block %llu, packed", c, (unsigned long long)k);
            }
            ml_analysis_free(rp);
            ml_analysis_free(r);
            free(d);
        }
    }
    /* The bytes ending inside one of the last blocks (the fast path must
     * not read past them: the bytes after the cut are there, unused). */
    const uint64_t cut_at[][2] = {{n - 1, 3}, {n - 3, 5}, {n - 6, 2}, {n - 9, 6}, {n - 2, 6}};
    /* Block n - 2 with its seven varints written in 9 bytes each: the
     * longest block the fast path could read, cut in its last byte. */
    uint8_t *lng = malloc(len);
    size_t lng_len = len;
    cr_assert(lng);
    memcpy(lng, data, len);
    for (int f = 0; f < 7; f++) {
        size_t at = live_at + varint_len(lng + live_at);
        for (uint64_t i = 0; i < (n - 2) * 7 + (uint64_t)f; i++) at += varint_len(lng + at);
        uint64_t x = 0;
        for (size_t i = 0; i < varint_len(lng + at); i++) x |= (uint64_t)(lng[at + i] & 0x7f) << (7 * i);
        uint8_t put[9];
        for (size_t i = 0; i < 9; i++) put[i] = (uint8_t)(((x >> (7 * i)) & 0x7f) | (i < 8 ? 0x80 : 0));
        size_t nl;
        uint8_t *d = damage(lng, lng_len, live_at, n - 2, f, put, 9, &nl);
        free(lng);
        lng = d;
        lng_len = nl;
    }
    for (size_t q = 0; q < 5; q++) {
        const uint8_t *src = q < 4 ? data : lng;
        size_t at = live_at + varint_len(src + live_at);
        for (uint64_t i = 0; i < cut_at[q][0] * 7 + cut_at[q][1]; i++) at += varint_len(src + at);
        if (q == 4) at += 8;
        /* the cut bytes end where a page that cannot be read begins */
        size_t ps = 4096, span = (at + ps - 1) / ps * ps;
        uint8_t *m = mmap(NULL, span + ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert(m != MAP_FAILED);
        cr_assert_eq(mprotect(m + span, ps, PROT_NONE), 0);
        memcpy(m + span - at, src, at);
        ml_analysis_t *r;
        cr_assert_eq(ml_analysis_new(&r), 0);
        cr_expect_eq(ml_analysis_restore(r, m + span - at, at, err, sizeof err), -EINVAL);
        cr_expect_str_eq(err, "the analysis snapshot is damaged (it ends early)", "cut %zu", q);
        ml_analysis_free(r);
        munmap(m, span + ps);
    }
    free(lng);
    ml_analysis_free(a);
    free(want);
    free(snap);
    free(v);
}
