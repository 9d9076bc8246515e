/* test_replay.c - trace records to ops, and ops to policies on threads. */
#include "sim_test.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    ml_sim_op_t *ops;
    size_t n, cap;
    uint64_t temps;
} seen_t;

static void observe(void *ctx, const ml_sim_op_t *ops, size_t n) {
    seen_t *s = ctx;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].flags & ML_SIM_F_TEMPORARY) s->temps++;
        if (s->cap == 0) continue; /* counting only */
        if (s->n == s->cap) continue;
        s->ops[s->n++] = ops[i];
    }
}

static ml_record_t rec_alloc(uint64_t ptr, uint64_t size, uint32_t stack, uint8_t kind) {
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_ALLOC;
    r.u.alloc.ptr = ptr;
    r.u.alloc.size = size;
    r.u.alloc.stack = stack;
    r.u.alloc.kind = kind;
    return r;
}

static ml_record_t rec_free(uint64_t ptr, uint8_t kind) {
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_FREE;
    r.u.alloc.ptr = ptr;
    r.u.alloc.kind = kind;
    return r;
}

static void feed(ml_sim_replay_t *r, ml_record_t rec) {
    cr_assert_eq(ml_sim_replay_feed(r, &rec), 0);
}

Test(replay, records_become_ops) {
    ml_sim_replay_t *r;
    cr_assert_eq(ml_sim_replay_new(0, &r), 0);
    seen_t s = {.ops = calloc(64, sizeof(ml_sim_op_t)), .cap = 64};
    ml_sim_replay_observe(r, observe, &s);
    ml_sim_policy_t *ff;
    cr_assert_eq(ml_sim_first_fit_new(NULL, &ff), 0);
    cr_assert_eq(ml_sim_replay_add(r, ff), 0);
    feed(r, rec_alloc(0x1000, 100, 5, ML_KIND_MALLOC));   /* 0: alloc id 0 */
    feed(r, rec_free(0x1000, ML_KIND_FREE));              /* 1: free, temporary */
    feed(r, rec_alloc(0x2000, 50, 6, ML_KIND_MALLOC));    /* 2: id 0 again (recycled) */
    feed(r, rec_alloc(0x3000, 60, 6, ML_KIND_MALLOC));    /* 3: id 1 */
    feed(r, rec_free(0x2000, ML_KIND_FREE));              /* 4: not temporary */
    feed(r, rec_free(0x3000, ML_KIND_REALLOC));           /* 5: realloc's old block */
    feed(r, rec_alloc(0x4000, 120, 7, ML_KIND_REALLOC));  /* 6 */
    feed(r, rec_free(0x4000, ML_KIND_REALLOC));           /* 7: a realloc that fails: */
    ml_record_t fail = rec_free(0x4000, 0);
    fail.tag = ML_T_REALLOC_FAIL;
    feed(r, fail);                                        /* 8: the block lives on */
    feed(r, rec_alloc(0x4000, 10, 8, ML_KIND_MALLOC));    /* 9,10: a free we never saw */
    feed(r, rec_free(0x9999, ML_KIND_FREE));              /* unknown: ignored */
    feed(r, rec_alloc(0x5000, 100, 9, ML_KIND_MEMALIGN)); /* 11: aligned to 4096 at most */
    cr_assert_eq(ml_sim_replay_finish(r), 0);
    cr_assert_eq(s.n, 12);
    const ml_sim_op_t *o = s.ops;
    cr_expect_eq(o[0].type, ML_SIM_ALLOC);
    cr_expect_eq(o[0].size, 100);
    cr_expect_eq(o[0].site, 5);
    cr_expect(o[0].flags & ML_SIM_F_TEMPORARY);
    cr_expect_eq(o[1].type, ML_SIM_FREE);
    cr_expect_eq(o[1].id, o[0].id);
    cr_expect_eq(o[2].id, o[0].id, "ids are recycled");
    cr_expect_not(o[2].flags & ML_SIM_F_TEMPORARY, "another allocation came before its free");
    cr_expect_neq(o[3].id, o[2].id);
    cr_expect_eq(o[5].flags, ML_SIM_F_REALLOC);
    cr_expect_eq(o[5].size, 60, "a free carries the block's size");
    cr_expect_eq(o[6].flags, ML_SIM_F_REALLOC);
    cr_expect_eq(o[8].type, ML_SIM_ALLOC, "failed realloc: the old block again");
    cr_expect_eq(o[8].size, 120);
    cr_expect_eq(o[8].site, 7);
    cr_expect_eq(o[9].type, ML_SIM_FREE, "missed free");
    cr_expect_eq(o[9].id, o[8].id);
    cr_expect_eq(o[10].size, 10);
    cr_expect_eq(o[11].align, 12, "0x5000: aligned to 4096, capped at a page");
    ml_sim_metrics_t m;
    ml_sim_replay_metrics(r, 0, &m);
    cr_expect_eq(m.allocs, 7);
    cr_expect_eq(m.frees, 5);
    cr_expect_eq(m.at_end.live_count, 2);
    cr_expect_eq(m.at_end.live_requested, 110);
    ml_sim_replay_free(r);
    free(s.ops);
}

Test(replay, temporary_flags_survive_batch_boundaries) {
    /* 200000 malloc+free pairs span several 65536-op batches: each alloc is
     * temporary, even the ones whose free lands in the next batch. */
    ml_sim_replay_t *r;
    cr_assert_eq(ml_sim_replay_new(0, &r), 0);
    seen_t s = {0};
    ml_sim_replay_observe(r, observe, &s);
    for (uint64_t i = 0; i < 100000; i++) {
        feed(r, rec_alloc(0x1000 + 16 * (i % 7), 32, 1, ML_KIND_MALLOC));
        feed(r, rec_free(0x1000 + 16 * (i % 7), ML_KIND_FREE));
    }
    /* a block that stays, with frees of others after it */
    feed(r, rec_alloc(0x100000, 8, 1, ML_KIND_MALLOC));
    cr_assert_eq(ml_sim_replay_finish(r), 0);
    cr_expect_eq(s.temps, 100000);
    cr_expect_eq(ml_sim_replay_ops(r), 200001);
    ml_sim_replay_free(r);
}

/* Every policy of the table, and the real allocator. */
static void add_table(ml_sim_replay_t *r) {
    for (const char *const *nm = ml_sim_policy_names; *nm; nm++) {
        ml_sim_policy_t *p;
        cr_assert_eq(ml_sim_policy_new(*nm, NULL, &p), 0);
        cr_assert_eq(ml_sim_replay_add(r, p), 0);
    }
    ml_sim_policy_t *real;
    cr_assert_eq(ml_sim_real_new(NULL, &real), 0);
    cr_assert_eq(ml_sim_replay_add(r, real), 0);
}

static void random_trace(ml_sim_replay_t *r, int n) {
    uint64_t seed = 7, live[4096] = {0};
    for (int i = 0; i < n; i++) {
        int k = (int)(st_rand(&seed) % 4096);
        if (live[k]) {
            feed(r, rec_free(live[k], ML_KIND_FREE));
            live[k] = 0;
        } else {
            live[k] = 0x10000000 + (uint64_t)k * 65536 + 16 * (st_rand(&seed) % 16);
            uint64_t size = 8 + st_rand(&seed) % (st_rand(&seed) % 8 ? 256 : 20000);
            feed(r, rec_alloc(live[k], size, 1 + (uint32_t)(st_rand(&seed) % 50), ML_KIND_MALLOC));
        }
    }
}

/* Workers take the policies' batches at each policy's own pace, several
 * batches in flight (sim_replay.c, "Dispatch"): with 1, 2 or 3 workers
 * every policy still sees every op in order, as with none. */
Test(replay, threads_change_nothing_but_time, .timeout = 240) {
    static const unsigned workers[] = {0, 1, 2, 3};
    ml_sim_metrics_t a[16], b[16];
    size_t n = 0;
    for (size_t pass = 0; pass < sizeof workers / sizeof *workers; pass++) {
        ml_sim_replay_t *r;
        cr_assert_eq(ml_sim_replay_new(workers[pass], &r), 0);
        add_table(r);
        random_trace(r, 300000);
        cr_assert_eq(ml_sim_replay_finish(r), 0);
        n = ml_sim_replay_count(r);
        for (size_t i = 0; i < n; i++) ml_sim_replay_metrics(r, i, pass ? &b[i] : &a[i]);
        ml_sim_replay_free(r);
        if (!pass) continue;
        cr_assert_eq(n, 11);
        for (size_t i = 0; i < n; i++) {
            cr_expect_str_eq(a[i].name, b[i].name);
            cr_expect_eq(a[i].peak_footprint, b[i].peak_footprint, "%s, %u workers", a[i].name, workers[pass]);
            cr_expect_eq(a[i].search_steps, b[i].search_steps, "%s, %u workers", a[i].name, workers[pass]);
            cr_expect_eq(a[i].at_end.live_requested, b[i].at_end.live_requested, "%s, %u workers", a[i].name,
                         workers[pass]);
            cr_expect_gt(a[i].allocs, 100000, "%s", a[i].name);
        }
    }
}

/* ml_sim_replay_reserve is a hint: sizing every table for the live blocks at
 * once (or for fewer, which then grow, or for more) changes no number of any
 * policy, the what-ifs (a router with a compare copy, reserved capacity)
 * included. */
static bool route_site5(void *ctx, const ml_sim_op_t *op) {
    (void)ctx;
    return op->site % 5 == 0;
}

static void realloc_trace(ml_sim_replay_t *r, int n) {
    uint64_t seed = 11, live[3000] = {0}, size[3000] = {0};
    uint32_t stack[3000] = {0};
    for (int i = 0; i < n; i++) {
        int k = (int)(st_rand(&seed) % 3000);
        uint64_t ptr = 0x20000000 + (uint64_t)k * 131072 + 16 * (st_rand(&seed) % 64);
        if (live[k] && st_rand(&seed) % 3 == 0) { /* grow it: the realloc's free and alloc */
            feed(r, rec_free(live[k], ML_KIND_REALLOC));
            size[k] += 1 + st_rand(&seed) % 200;
            live[k] = ptr != live[k] ? ptr : ptr + 16;
            feed(r, rec_alloc(live[k], size[k], stack[k], ML_KIND_REALLOC));
        } else if (live[k]) {
            feed(r, rec_free(live[k], ML_KIND_FREE));
            live[k] = 0;
        } else {
            live[k] = ptr;
            size[k] = 8 + st_rand(&seed) % (st_rand(&seed) % 8 ? 300 : 30000);
            stack[k] = 1 + (uint32_t)(st_rand(&seed) % 40);
            feed(r, rec_alloc(ptr, size[k], stack[k], st_rand(&seed) % 50 ? ML_KIND_MALLOC : ML_KIND_MEMALIGN));
        }
    }
}

typedef struct {
    ml_sim_metrics_t m[16];
    ml_sim_router_gain_t gain;
    uint64_t avoided, avoided_bytes, moves;
    size_t n;
} replayed_t;

static void replay_reserved(uint32_t reserve, replayed_t *out) {
    ml_sim_replay_t *r;
    cr_assert_eq(ml_sim_replay_new(0, &r), 0);
    for (const char *const *nm = ml_sim_policy_names; *nm; nm++) {
        ml_sim_policy_t *p;
        cr_assert_eq(ml_sim_policy_new(*nm, NULL, &p), 0);
        cr_assert_eq(ml_sim_replay_add(r, p), 0);
    }
    ml_sim_policy_t *real, *g, *d, *cmp, *router, *in, *growth;
    cr_assert_eq(ml_sim_real_new(NULL, &real), 0);
    cr_assert_eq(ml_sim_replay_add(r, real), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &g), 0);
    cr_assert_eq(ml_sim_slab_new(NULL, &d), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &cmp), 0);
    cr_assert_eq(ml_sim_router_new("slab(site%5)", route_site5, NULL, g, d, cmp, &router), 0);
    cr_assert_eq(ml_sim_replay_add(r, router), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &in), 0);
    cr_assert_eq(ml_sim_growth_new(in, 2.0, &growth), 0);
    cr_assert_eq(ml_sim_replay_add(r, growth), 0);
    cr_assert_eq(ml_sim_replay_reserve(r, reserve), 0);
    realloc_trace(r, 200000);
    cr_assert_eq(ml_sim_replay_finish(r), 0);
    out->n = ml_sim_replay_count(r);
    for (size_t i = 0; i < out->n; i++) ml_sim_replay_metrics(r, i, &out->m[i]);
    ml_sim_router_gain(router, &out->gain);
    ml_sim_growth_stats(growth, &out->avoided, &out->avoided_bytes, &out->moves);
    ml_sim_replay_free(r);
}

static void expect_same_frag(const ml_sim_frag_t *a, const ml_sim_frag_t *b, const char *what) {
    cr_expect_eq(a->live_requested, b->live_requested, "%s", what);
    cr_expect_eq(a->live_blocks, b->live_blocks, "%s", what);
    cr_expect_eq(a->live_count, b->live_count, "%s", what);
    cr_expect_eq(a->footprint, b->footprint, "%s", what);
    cr_expect_eq(a->free_bytes, b->free_bytes, "%s", what);
    cr_expect_eq(a->largest_free, b->largest_free, "%s", what);
    cr_expect_eq(a->op, b->op, "%s", what);
}

static void expect_same_metrics(const ml_sim_metrics_t *a, const ml_sim_metrics_t *b) {
    cr_expect_str_eq(a->name, b->name);
    cr_expect_eq(a->peak_footprint, b->peak_footprint, "%s", a->name);
    cr_expect_eq(a->peak_extent, b->peak_extent, "%s", a->name);
    cr_expect_eq(a->allocs, b->allocs, "%s", a->name);
    cr_expect_eq(a->frees, b->frees, "%s", a->name);
    cr_expect_eq(a->failed, b->failed, "%s", a->name);
    cr_expect_eq(a->search_steps, b->search_steps, "%s", a->name);
    cr_expect_eq(a->splits, b->splits, "%s", a->name);
    cr_expect_eq(a->merges, b->merges, "%s", a->name);
    cr_expect_eq(a->max_op_steps, b->max_op_steps, "%s", a->name);
    expect_same_frag(&a->at_peak, &b->at_peak, a->name);
    expect_same_frag(&a->at_end, &b->at_end, a->name);
}

Test(replay, reserving_changes_no_result, .timeout = 120) {
    static replayed_t plain, fewer, exact, more;
    replay_reserved(0, &plain);
    replay_reserved(500, &fewer);  /* the tables grow past it */
    replay_reserved(1600, &exact); /* about the live blocks at the peak */
    replay_reserved(20000, &more);
    cr_assert_eq(plain.n, 13);
    cr_expect_gt(plain.m[11].allocs, 100000, "the router saw the trace");
    cr_expect_gt(plain.gain.max_gain_bytes, 0, "the compare copy ran");
    cr_expect_gt(plain.avoided, 1000, "reallocs fitted the reserve");
    cr_expect_eq(plain.m[12].failed, 0);
    const replayed_t *other[] = {&fewer, &exact, &more};
    for (int v = 0; v < 3; v++) {
        const replayed_t *o = other[v];
        cr_assert_eq(o->n, plain.n);
        for (size_t i = 0; i < plain.n; i++) expect_same_metrics(&plain.m[i], &o->m[i]);
        cr_expect_eq(o->gain.max_gain_bytes, plain.gain.max_gain_bytes);
        cr_expect_eq(o->gain.max_gain_time_ms, plain.gain.max_gain_time_ms);
        cr_expect_eq(o->gain.dedicated_live_blocks, plain.gain.dedicated_live_blocks);
        cr_expect_eq(o->gain.compare_peak, plain.gain.compare_peak);
        expect_same_metrics(&plain.gain.dedicated, &o->gain.dedicated);
        expect_same_metrics(&plain.gain.general, &o->gain.general);
        cr_expect_eq(o->avoided, plain.avoided);
        cr_expect_eq(o->avoided_bytes, plain.avoided_bytes);
        cr_expect_eq(o->moves, plain.moves);
    }
}

/* A program that asks for a few huge blocks it never touches (malloc of
 * 16 GiB each) spreads the simulated heap over 128 GiB of addresses. The
 * page counter then leaves its dense table (a counter per page: 128 MiB per
 * policy, 800 MB for the advisor's table) for its sparse hash, and the
 * extent is still measured. */
Test(replay, huge_blocks_cost_no_memory_per_address, .timeout = 60) {
    ml_sim_replay_t *r;
    cr_assert_eq(ml_sim_replay_new(0, &r), 0);
    for (const char *const *nm = ml_sim_policy_names; *nm; nm++) {
        if (!strcmp(*nm, "bitmap_fit")) continue; /* a bit per granule: --all-policies only */
        ml_sim_policy_t *p;
        cr_assert_eq(ml_sim_policy_new(*nm, NULL, &p), 0);
        cr_assert_eq(ml_sim_replay_add(r, p), 0);
    }
    const uint64_t huge = (uint64_t)16 << 30;
    for (uint64_t i = 0; i < 8; i++) {
        feed(r, rec_alloc(0x7f0000000000 + i * (huge + 4096), huge, 1, ML_KIND_MALLOC));
        for (uint64_t k = 0; k < 1000; k++) feed(r, rec_alloc(0x1000000 + (i * 1000 + k) * 64, 48, 2, ML_KIND_MALLOC));
    }
    cr_assert_eq(ml_sim_replay_finish(r), 0);
    for (size_t i = 0; i < ml_sim_replay_count(r); i++) {
        ml_sim_metrics_t m;
        ml_sim_replay_metrics(r, i, &m);
        cr_expect_eq(m.failed, 0, "%s", m.name);
        cr_expect_eq(m.at_end.live_count, 8008, "%s", m.name);
        cr_expect_geq(m.peak_footprint, 8 * huge, "%s", m.name);
        cr_expect_lt(m.state_bytes, 24u << 20, "%s holds %llu bytes", m.name, (unsigned long long)m.state_bytes);
        if (!strcmp(m.name, "segregated_fit") || !strcmp(m.name, "first_fit")) {
            /* the free lists place the blocks one after the other */
            cr_expect_geq(m.peak_extent, 8 * huge, "%s", m.name);
            cr_expect_lt(m.peak_extent, 8 * huge + (1u << 20), "%s", m.name);
        }
    }
    ml_sim_replay_free(r);
}

/* The op log (sim_oplog.c): a replay fed from the log another replay wrote
 * sees the very ops, field by field, that feeding it the trace gives, and
 * its policies end with the same numbers. The trace mixes what the encoding
 * has to carry: threads, a clock that goes back as well as forward,
 * reallocs and a failed one, aligned and sampled allocations, an address
 * allocated again without its free, mallinfo samples, and enough ops for
 * several batches and several of the log's buffers. */
static void varied_trace(ml_sim_replay_t *r, int n) {
    uint64_t seed = 23, live[5000] = {0}, size[5000] = {0};
    uint32_t stack[5000] = {0}, t = 1000;
    for (int i = 0; i < n; i++) {
        int k = (int)(st_rand(&seed) % 5000);
        uint64_t ptr = 0x7f0000000000ull + (uint64_t)k * 1048576 + 16 * (st_rand(&seed) % 4096);
        t += (uint32_t)(st_rand(&seed) % 3);
        uint16_t thread = (uint16_t)(st_rand(&seed) % 7 ? 1 : 1 + st_rand(&seed) % 300);
        uint32_t time_ms = st_rand(&seed) % 97 ? t : t - 5;
        ml_record_t rec;
        if (i % 50000 == 7) {
            memset(&rec, 0, sizeof rec);
            rec.tag = ML_T_MALLINFO;
            rec.u.mallinfo.arena = 1000000 + (uint64_t)i;
            rec.u.mallinfo.hblkhd = 4096;
        } else if (live[k] && st_rand(&seed) % 4 == 0) {
            rec = rec_free(live[k], ML_KIND_REALLOC);
            rec.thread = thread;
            rec.time_ms = time_ms;
            feed(r, rec);
            if (st_rand(&seed) % 20 == 0) { /* the realloc failed: the old block is back */
                memset(&rec, 0, sizeof rec);
                rec.tag = ML_T_REALLOC_FAIL;
                rec.u.alloc.ptr = live[k];
            } else {
                size[k] += 1 + st_rand(&seed) % 5000;
                live[k] = ptr != live[k] ? ptr : ptr + 16;
                rec = rec_alloc(live[k], size[k], stack[k], ML_KIND_REALLOC);
            }
        } else if (live[k] && st_rand(&seed) % 10) {
            rec = rec_free(live[k], ML_KIND_FREE);
            live[k] = 0;
        } else { /* a new block, or one at a live address whose free the trace lacks */
            live[k] = live[k] ? live[k] : ptr;
            size[k] = 1 + st_rand(&seed) % (st_rand(&seed) % 8 ? 300 : 3000000);
            stack[k] = (uint32_t)(st_rand(&seed) % 100000);
            uint64_t kk = st_rand(&seed) % 40;
            rec = rec_alloc(live[k], size[k], stack[k],
                            kk == 0 ? ML_KIND_MEMALIGN : kk == 1 ? ML_KIND_PVALLOC : ML_KIND_MALLOC);
            if (kk == 2) rec.u.alloc.flags |= ML_EVF_SAMPLED;
        }
        rec.thread = thread;
        rec.time_ms = time_ms;
        feed(r, rec);
    }
}

Test(replay, a_replay_from_the_op_log_sees_every_op_the_trace_gives, .timeout = 120) {
    enum { N = 400000 };
    seen_t a = {.ops = malloc(2 * N * sizeof(ml_sim_op_t)), .cap = 2 * N};
    seen_t b = {.ops = malloc(2 * N * sizeof(ml_sim_op_t)), .cap = 2 * N};
    cr_assert(a.ops && b.ops);
    ml_sim_oplog_t *log;
    cr_assert_eq(ml_sim_oplog_new(&log), 0);

    ml_sim_replay_t *r1;
    cr_assert_eq(ml_sim_replay_new(2, &r1), 0);
    add_table(r1);
    ml_sim_replay_observe(r1, observe, &a);
    ml_sim_replay_log(r1, log);
    varied_trace(r1, N);
    cr_assert_eq(ml_sim_replay_finish(r1), 0);
    cr_assert(ml_sim_oplog_ok(log));

    char err[256] = "";
    ml_sim_replay_t *r2;
    cr_assert_eq(ml_sim_replay_new(2, &r2), 0);
    add_table(r2);
    ml_sim_replay_observe(r2, observe, &b);
    cr_assert_eq(ml_sim_replay_oplog(r2, log, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ml_sim_replay_finish(r2), 0);

    cr_assert_gt(a.n, (size_t)N, "reallocs make more ops than records (%zu)", a.n);
    cr_assert_lt(a.n, a.cap);
    cr_assert_eq(b.n, a.n, "ops: %zu from the log, %zu from the trace", b.n, a.n);
    cr_expect_eq(b.temps, a.temps);
    cr_expect_gt(a.temps, 0);
    size_t differ = 0, first = SIZE_MAX;
    for (size_t i = 0; i < a.n; i++) {
        const ml_sim_op_t *x = &a.ops[i], *y = &b.ops[i];
        if (x->ptr != y->ptr || x->size != y->size || x->id != y->id || x->site != y->site ||
            x->time_ms != y->time_ms || x->thread != y->thread || x->type != y->type || x->align != y->align ||
            x->flags != y->flags) {
            if (first == SIZE_MAX) first = i;
            differ++;
        }
    }
    cr_expect_eq(differ, 0, "%zu ops differ, the first at %zu", differ, first);
    cr_expect_eq(ml_sim_replay_ops(r2), ml_sim_replay_ops(r1));
    cr_expect_eq(ml_sim_replay_sampled(r2), ml_sim_replay_sampled(r1));
    cr_expect(ml_sim_replay_sampled(r1));
    /* about 9 bytes an allocation and 2 a free, against 32 in memory */
    cr_expect_lt(ml_sim_oplog_bytes(log), a.n * 12, "%llu bytes for %zu ops",
                 (unsigned long long)ml_sim_oplog_bytes(log), a.n);
    size_t kinds[4] = {0};
    for (size_t i = 0; i < a.n; i++) kinds[a.ops[i].type & 3]++;
    cr_expect_gt(kinds[ML_SIM_MALLINFO], 5);
    for (size_t i = 0; i < ml_sim_replay_count(r1); i++) {
        ml_sim_metrics_t m1, m2;
        ml_sim_replay_metrics(r1, i, &m1);
        ml_sim_replay_metrics(r2, i, &m2);
        cr_expect_eq(m1.peak_footprint, m2.peak_footprint, "%s", m1.name);
        cr_expect_eq(m1.search_steps, m2.search_steps, "%s", m1.name);
        cr_expect_eq(m1.at_end.live_requested, m2.at_end.live_requested, "%s", m1.name);
    }
    /* a log is read from the start of a fresh replay only */
    cr_expect_eq(ml_sim_replay_oplog(r2, log, NULL, err, sizeof err), -EINVAL);
    ml_sim_replay_free(r1);
    ml_sim_replay_free(r2);
    ml_sim_oplog_free(log);
    free(a.ops);
    free(b.ops);
}

/* A router whose compare policy is a footprint series (recorded when the
 * same ops went through the same policy) finds what the router with its own
 * compare copy finds: the largest gain, when, and what the dedicated part
 * held then. Both routers run in one replay, after the replay that recorded
 * the series; the trace has reallocs, so that frees and allocations
 * interleave in every way. */
Test(replay, a_recorded_footprint_series_stands_in_for_the_compare_copy, .timeout = 120) {
    ml_sim_fpseries_t *series;
    cr_assert_eq(ml_sim_fpseries_new(&series), 0);
    ml_sim_replay_t *r1;
    cr_assert_eq(ml_sim_replay_new(2, &r1), 0);
    add_table(r1); /* segregated_fit among them */
    size_t base = SIZE_MAX;
    for (size_t i = 0; i < ml_sim_replay_count(r1); i++) {
        ml_sim_metrics_t m;
        ml_sim_replay_metrics(r1, i, &m);
        if (!strcmp(m.name, "segregated_fit")) base = i;
    }
    cr_assert_neq(base, SIZE_MAX);
    ml_sim_replay_series(r1, base, series);
    cr_expect(!ml_sim_fpseries_ok(series), "not before its replay has finished");
    realloc_trace(r1, 200000);
    cr_assert_eq(ml_sim_replay_finish(r1), 0);
    cr_assert(ml_sim_fpseries_ok(series));
    ml_sim_metrics_t bm;
    ml_sim_replay_metrics(r1, base, &bm);
    cr_expect_gt(ml_sim_fpseries_bytes(series), 0);

    ml_sim_replay_t *r2;
    cr_assert_eq(ml_sim_replay_new(2, &r2), 0);
    ml_sim_policy_t *g1, *d1, *cmp, *with_copy, *g2, *d2, *with_series;
    cr_assert_eq(ml_sim_segfit_new(NULL, &g1), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &d1), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &cmp), 0);
    cr_assert_eq(ml_sim_router_new("copy", route_site5, NULL, g1, d1, cmp, &with_copy), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &g2), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &d2), 0);
    cr_assert_eq(ml_sim_router_new_series("series", route_site5, NULL, g2, d2, series, &with_series), 0);
    cr_assert_eq(ml_sim_replay_add(r2, with_copy), 0);
    cr_assert_eq(ml_sim_replay_add(r2, with_series), 0);
    realloc_trace(r2, 200000);
    cr_assert_eq(ml_sim_replay_finish(r2), 0);

    ml_sim_router_gain_t a, b;
    ml_sim_router_gain(with_copy, &a);
    ml_sim_router_gain(with_series, &b);
    cr_expect_gt(a.max_gain_bytes, 0, "the trace must make the question worth asking");
    cr_expect_eq(b.max_gain_bytes, a.max_gain_bytes);
    cr_expect_eq(b.max_gain_time_ms, a.max_gain_time_ms);
    cr_expect_eq(b.dedicated_live_blocks, a.dedicated_live_blocks);
    cr_expect_eq(b.dedicated_live_bytes, a.dedicated_live_bytes);
    cr_expect_eq(b.compare_peak, a.compare_peak);
    cr_expect_eq(a.compare_peak, bm.peak_footprint, "the copy is pass 1's baseline over again");
    cr_expect(!b.compare_failed);
    ml_sim_metrics_t ma, mb;
    ml_sim_replay_metrics(r2, 0, &ma);
    ml_sim_replay_metrics(r2, 1, &mb);
    cr_expect_eq(mb.peak_footprint, ma.peak_footprint);

    /* no series, or one still being recorded: refused, and the parts freed */
    ml_sim_policy_t *g3, *d3, *x = NULL;
    cr_assert_eq(ml_sim_segfit_new(NULL, &g3), 0);
    cr_assert_eq(ml_sim_segfit_new(NULL, &d3), 0);
    cr_expect_eq(ml_sim_router_new_series("none", route_site5, NULL, g3, d3, NULL, &x), -EINVAL);
    ml_sim_replay_free(r1);
    ml_sim_replay_free(r2);
    ml_sim_fpseries_free(series);
}
