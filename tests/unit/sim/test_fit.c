/* test_fit.c - first, next, best and worst fit on hand-computed sequences. */
#include "sim_test.h"

#include <string.h>

/* Lays out holes: allocates the sizes in order (ids 0..n-1), then frees the
 * ids in `holes`. */
static void layout(ml_sim_policy_t *p, const uint64_t *sizes, int n, const int *holes, int nh) {
    for (int i = 0; i < n; i++) st_alloc(p, (uint32_t)i, sizes[i]);
    for (int i = 0; i < nh; i++) st_free(p, (uint32_t)holes[i]);
}

Test(fit, placement_of_each_policy) {
    /* Blocks: 16@0 32@16 16@48 48@64 16@112, top 128. Free 16@0 and 48@64:
     * holes 16@0 and 48@64. A 16-byte request goes to 0 (first, best: the
     * exact fit) or 64 (worst: the largest hole); next fit starts after the
     * last allocation (top) and wraps to 0. */
    const uint64_t sizes[] = {16, 32, 16, 48, 16};
    const int holes[] = {0, 3};
    const char *names[] = {"first_fit", "next_fit", "best_fit", "worst_fit"};
    const uint64_t expect[] = {0, 0, 0, 64};
    ml_sim_config_t c = st_cfg();
    for (int k = 0; k < 4; k++) {
        ml_sim_policy_t *p = st_new(names[k], &c);
        layout(p, sizes, 5, holes, 2);
        cr_expect_eq(st_alloc(p, 10, 16), expect[k], "%s put 16 bytes at %lu", names[k],
                     (unsigned long)expect[k]);
        ml_sim_policy_free(p);
    }
}

Test(fit, best_fit_beats_first_fit) {
    /* Holes 32@0 and 16@48 (separators 16@32 and 16@64, top 80). Requests 16
     * then 32: first fit cuts the 16 out of the 32-byte hole and must grow
     * the heap for the 32 (extent 112); best fit puts the 16 in the 16-byte
     * hole and the 32 in the 32-byte one (extent stays 80). */
    const uint64_t sizes[] = {32, 16, 16, 16};
    const int holes[] = {0, 2};
    ml_sim_config_t c = st_cfg();
    ml_sim_policy_t *ff = st_new("first_fit", &c), *bf = st_new("best_fit", &c);
    layout(ff, sizes, 4, holes, 2);
    layout(bf, sizes, 4, holes, 2);
    cr_expect_eq(st_alloc(ff, 10, 16), 0);
    cr_expect_eq(st_alloc(ff, 11, 32), 80);
    cr_expect_eq(st_alloc(bf, 10, 16), 48);
    cr_expect_eq(st_alloc(bf, 11, 32), 0);
    ml_sim_metrics_t mf = st_metrics(ff), mb = st_metrics(bf);
    cr_expect_eq(mf.peak_extent, 112, "first fit extent %lu", (unsigned long)mf.peak_extent);
    cr_expect_eq(mb.peak_extent, 80, "best fit extent %lu", (unsigned long)mb.peak_extent);
    cr_expect_eq(mb.at_end.free_bytes, 0, "best fit used both holes exactly");
    cr_expect_eq(mf.at_end.free_bytes, 16 + 16, "first fit left two 16-byte splinters");
    cr_expect_float_eq(mf.at_end.external, 0.5, 1e-9, "two equal splinters: half unusable");
    ml_sim_policy_free(ff);
    ml_sim_policy_free(bf);
}

Test(fit, best_fit_loses_to_first_fit) {
    /* Knuth's example scaled to 16-byte granules: holes 1312@0 and 1216@1328,
     * requests 1008, 1104, 256. First fit: 1008 -> 1312 (leaves 304), 1104 ->
     * 1216 (leaves 112), 256 -> the 304 left: no growth. Best fit: 1008 ->
     * 1216 (leaves 208), 1104 -> 1312 (leaves 208), 256 fits in neither and
     * the heap grows by 256. */
    const uint64_t sizes[] = {1312, 16, 1216, 16};
    const int holes[] = {0, 2};
    ml_sim_config_t c = st_cfg();
    ml_sim_policy_t *ff = st_new("first_fit", &c), *bf = st_new("best_fit", &c);
    layout(ff, sizes, 4, holes, 2);
    layout(bf, sizes, 4, holes, 2);
    cr_expect_eq(st_alloc(ff, 10, 1008), 0);
    cr_expect_eq(st_alloc(ff, 11, 1104), 1328);
    cr_expect_eq(st_alloc(ff, 12, 256), 1008);
    cr_expect_eq(st_alloc(bf, 10, 1008), 1328);
    cr_expect_eq(st_alloc(bf, 11, 1104), 0);
    cr_expect_eq(st_alloc(bf, 12, 256), 2560);
    cr_expect_eq(st_metrics(ff).peak_extent, 2560);
    cr_expect_eq(st_metrics(bf).peak_extent, 2816);
    ml_sim_policy_free(ff);
    ml_sim_policy_free(bf);
}

Test(fit, next_fit_resumes_after_the_last_block) {
    /* 16-byte blocks a..e at 0..64. Free b (16) and d (48); f takes 16 (the
     * rover was at the top and wrapped), the rover moves to 32. Free f again:
     * first fit takes 16 once more, next fit goes on to 48. */
    ml_sim_config_t c = st_cfg();
    ml_sim_policy_t *nf = st_new("next_fit", &c), *ff = st_new("first_fit", &c);
    ml_sim_policy_t *ps[] = {nf, ff};
    for (int k = 0; k < 2; k++) {
        for (uint32_t i = 0; i < 5; i++) st_alloc(ps[k], i, 16);
        st_free(ps[k], 1);
        st_free(ps[k], 3);
        cr_expect_eq(st_alloc(ps[k], 5, 16), 16);
        st_free(ps[k], 5);
    }
    cr_expect_eq(st_alloc(nf, 6, 16), 48);
    cr_expect_eq(st_alloc(ff, 6, 16), 16);
    ml_sim_policy_free(nf);
    ml_sim_policy_free(ff);
}

Test(fit, coalescing_and_top_trim) {
    /* Three adjacent blocks and a guard. Freeing a then c leaves two holes;
     * freeing b merges all three (two merges) into one 48-byte hole. Freeing
     * the guard gives everything back: nothing is held, nothing is free. */
    ml_sim_config_t c = st_cfg();
    ml_sim_policy_t *p = st_new("first_fit", &c);
    for (uint32_t i = 0; i < 4; i++) st_alloc(p, i, 16);
    st_free(p, 0);
    st_free(p, 2);
    ml_sim_metrics_t m = st_metrics(p);
    cr_expect_eq(m.at_end.free_bytes, 32);
    cr_expect_eq(m.at_end.largest_free, 16);
    cr_expect_eq(m.merges, 0);
    st_free(p, 1);
    m = st_metrics(p);
    cr_expect_eq(m.merges, 2);
    cr_expect_eq(m.at_end.free_bytes, 48);
    cr_expect_eq(m.at_end.largest_free, 48);
    cr_expect_float_eq(m.at_end.external, 0.0, 1e-12);
    cr_expect_eq(st_alloc(p, 9, 48), 0, "the merged hole serves a 48-byte request");
    st_free(p, 9);
    st_free(p, 3);
    m = st_metrics(p);
    cr_expect_eq(m.at_end.footprint, 0);
    cr_expect_eq(m.at_end.free_bytes, 0, "the top was given back");
    cr_expect_eq(m.peak_footprint, 64);
    ml_sim_policy_free(p);
}

Test(fit, split_and_step_counts) {
    /* Holes 16@0 and 48@32 (guards 16@16, 16@80). A 32-byte request walks
     * two list blocks under first fit (rank 1 + 1), one split leaves 16@64.
     * Best fit charges the whole list (2). */
    const uint64_t sizes[] = {16, 16, 48, 16};
    const int holes[] = {0, 2};
    ml_sim_config_t c = st_cfg();
    ml_sim_policy_t *ff = st_new("first_fit", &c), *bf = st_new("best_fit", &c);
    layout(ff, sizes, 4, holes, 2);
    layout(bf, sizes, 4, holes, 2);
    uint64_t s0 = st_metrics(ff).search_steps, b0 = st_metrics(bf).search_steps;
    uint64_t sp0 = st_metrics(ff).splits;
    cr_expect_eq(st_alloc(ff, 10, 32), 32);
    cr_expect_eq(st_alloc(bf, 10, 32), 32);
    cr_expect_eq(st_metrics(ff).search_steps - s0, 2);
    cr_expect_eq(st_metrics(bf).search_steps - b0, 2);
    cr_expect_eq(st_metrics(ff).splits - sp0, 1);
    cr_expect_eq(st_metrics(ff).at_end.free_bytes, 32, "16@0 and the 16@64 remainder");
    ml_sim_policy_free(ff);
    ml_sim_policy_free(bf);
}

Test(fit, headers_and_minimum_block) {
    /* The default layout: 8-byte header, 16-byte granule, 32-byte minimum
     * (glibc's chunk sizes): 1 -> 32, 24 -> 32, 25 -> 48, 100 -> 112. */
    ml_sim_policy_t *p = st_new("first_fit", NULL);
    const uint64_t req[] = {1, 24, 25, 100}, blk[] = {32, 32, 48, 112};
    for (uint32_t i = 0; i < 4; i++) {
        st_alloc(p, i, req[i]);
        uint64_t b = 0;
        cr_expect_eq(ml_sim_block(p, i, &b), 0);
        cr_expect_eq(b, blk[i], "%lu bytes -> block %lu", (unsigned long)req[i], (unsigned long)b);
    }
    cr_expect_eq(ml_sim_alloc(p, 0, 8, 0, NULL), -EEXIST);
    cr_expect_eq(ml_sim_free(p, 99), -ENOENT);
    ml_sim_policy_free(p);
}

Test(fit, worst_fit_splits_the_largest) {
    /* Holes 32@0, 64@48 (guards 16@32, 16@112). Worst fit serves 16 from the
     * 64-byte hole (its remainder 48@64 stays the largest), again 16 from it,
     * leaving 32 and 32; first fit would have used the 32-byte hole twice. */
    const uint64_t sizes[] = {32, 16, 64, 16};
    const int holes[] = {0, 2};
    ml_sim_config_t c = st_cfg();
    ml_sim_policy_t *wf = st_new("worst_fit", &c);
    layout(wf, sizes, 4, holes, 2);
    cr_expect_eq(st_alloc(wf, 10, 16), 48);
    cr_expect_eq(st_alloc(wf, 11, 16), 64);
    ml_sim_metrics_t m = st_metrics(wf);
    cr_expect_eq(m.at_end.largest_free, 32);
    cr_expect_eq(m.at_end.free_bytes, 64);
    ml_sim_policy_free(wf);
}

/* A plain address-ordered free list, the textbook way, to check the trees
 * against: same placement, same step counts. */
typedef struct {
    uint64_t addr[4096], size[4096];
    int n;
    uint64_t top, rover, steps;
} ref_t;

static void ref_insert(ref_t *r, uint64_t a, uint64_t s) {
    int i = 0;
    while (i < r->n && r->addr[i] < a) i++;
    memmove(r->addr + i + 1, r->addr + i, (size_t)(r->n - i) * 8);
    memmove(r->size + i + 1, r->size + i, (size_t)(r->n - i) * 8);
    r->addr[i] = a;
    r->size[i] = s;
    r->n++;
}

static void ref_remove(ref_t *r, int i) {
    memmove(r->addr + i, r->addr + i + 1, (size_t)(r->n - i - 1) * 8);
    memmove(r->size + i, r->size + i + 1, (size_t)(r->n - i - 1) * 8);
    r->n--;
}

static uint64_t ref_alloc(ref_t *r, int policy, uint64_t need) {
    int pick = -1;
    if (policy == 0) { /* first */
        for (int i = 0; i < r->n && pick < 0; i++)
            if (r->size[i] >= need) pick = i;
        r->steps += pick < 0 ? (uint64_t)r->n : (uint64_t)pick + 1;
    } else if (policy == 1) { /* next */
        int from = 0;
        while (from < r->n && r->addr[from] < r->rover) from++;
        for (int i = from; i < r->n && pick < 0; i++)
            if (r->size[i] >= need) pick = i;
        if (pick >= 0) r->steps += (uint64_t)(pick - from) + 1;
        else {
            for (int i = 0; i < r->n && pick < 0; i++)
                if (r->size[i] >= need) pick = i;
            r->steps += pick < 0 ? (uint64_t)r->n : (uint64_t)(r->n - from + pick + 1);
        }
    } else { /* best, worst */
        for (int i = 0; i < r->n; i++) {
            if (r->size[i] < need && policy == 2) continue;
            if (pick < 0 || (policy == 2 ? r->size[i] < r->size[pick] : r->size[i] > r->size[pick])) pick = i;
        }
        if (pick >= 0 && r->size[pick] < need) pick = -1;
        r->steps += (uint64_t)r->n;
    }
    uint64_t a;
    if (pick < 0) {
        a = r->top;
        r->top += need;
    } else {
        a = r->addr[pick];
        uint64_t s = r->size[pick];
        ref_remove(r, pick);
        if (s - need >= 16) ref_insert(r, a + need, s - need);
    }
    r->rover = a + need;
    return a;
}

static void ref_free(ref_t *r, uint64_t a, uint64_t s) {
    for (int i = 0; i < r->n; i++) { /* merge with the block before and after */
        if (r->addr[i] + r->size[i] == a) {
            a = r->addr[i];
            s += r->size[i];
            ref_remove(r, i);
            i--;
        } else if (a + s == r->addr[i]) {
            s += r->size[i];
            ref_remove(r, i);
            i--;
        }
    }
    if (a + s == r->top) r->top = a; /* the top is given back */
    else ref_insert(r, a, s);
}

Test(fit, trees_match_the_textbook_list) {
    const char *names[] = {"first_fit", "next_fit", "best_fit", "worst_fit"};
    ml_sim_config_t c = st_cfg();
    for (int k = 0; k < 4; k++) {
        ml_sim_policy_t *p = st_new(names[k], &c);
        static ref_t r;
        memset(&r, 0, sizeof r);
        enum { LIVE = 400 };
        uint64_t seed = 1234 + (uint64_t)k, addr[LIVE] = {0}, need[LIVE] = {0};
        for (int step = 0; step < 20000; step++) {
            int i = (int)(st_rand(&seed) % LIVE);
            if (need[i]) {
                st_free(p, (uint32_t)i);
                ref_free(&r, addr[i], need[i]);
                need[i] = 0;
                continue;
            }
            uint64_t size = 1 + (st_rand(&seed) % 4 ? st_rand(&seed) % 200 : st_rand(&seed) % 5000);
            need[i] = (size + 15) & ~15ull;
            addr[i] = ref_alloc(&r, k, need[i]);
            uint64_t a = st_alloc(p, (uint32_t)i, size);
            cr_assert_eq(a, addr[i], "%s, step %d: %lu bytes at %lu, the list says %lu", names[k], step,
                         (unsigned long)size, (unsigned long)a, (unsigned long)addr[i]);
        }
        ml_sim_metrics_t m = st_metrics(p);
        cr_expect_eq(m.search_steps, r.steps, "%s: steps %lu, the list walks %lu", names[k],
                     (unsigned long)m.search_steps, (unsigned long)r.steps);
        ml_sim_policy_free(p);
    }
}
