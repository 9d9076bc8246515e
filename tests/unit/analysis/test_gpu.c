/* test_gpu.c - GPU analysis (analysis/gpu.c) and its JSON (report/gpu_json.c)
 * on synthesized GPU records fed through ml_analysis_feed(), with every
 * number computed by hand in the comments. */
#define _GNU_SOURCE
#include "ml_analysis.h"
#include "ml_gpu.h"
#include "ml_report_gpu.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB 1024ull
#define MiB (1024ull * 1024)

static ml_analysis_t *a;

static void setup(void) {
    cr_assert_eq(ml_analysis_new(&a), 0);
}
static void teardown(void) {
    ml_analysis_free(a);
}

static void feed_gpu(uint8_t tag, uint8_t op, uint32_t t, int32_t dev, uint32_t ctx, uint8_t kind,
                     uint64_t ptr, uint64_t size, uint32_t stack, uint64_t handle, uint16_t flags) {
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = tag;
    r.time_ms = t;
    r.u.gpu.op = op;
    r.u.gpu.kind = kind;
    r.u.gpu.device = dev;
    r.u.gpu.context = ctx;
    r.u.gpu.ptr = ptr;
    r.u.gpu.size = size;
    r.u.gpu.stack = stack;
    r.u.gpu.handle = handle;
    r.u.gpu.flags = flags;
    ml_analysis_feed(a, &r);
}

static void A(uint32_t t, int32_t dev, uint32_t ctx, uint8_t kind, uint64_t ptr, uint64_t size,
              uint32_t stack) {
    feed_gpu(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, t, dev, ctx, kind, ptr, size, stack, 0, 0);
}
static void F(uint32_t t, int32_t dev, uint32_t ctx, uint8_t kind, uint64_t ptr) {
    feed_gpu(ML_T_GPU_FREE, ML_GPU_OP_FREE, t, dev, ctx, kind, ptr, 0, 0, 0, 0);
}

static const ml_gpu_device_t *dev_of(const ml_gpu_t *g, int32_t ordinal) {
    for (size_t i = 0; i < ml_gpu_device_count(g); i++)
        if (ml_gpu_device(g, i)->device == ordinal) return ml_gpu_device(g, i);
    cr_assert_fail("no device %d", ordinal);
    return NULL;
}

static size_t dev_index(const ml_gpu_t *g, int32_t ordinal) {
    for (size_t i = 0; i < ml_gpu_device_count(g); i++)
        if (ml_gpu_device(g, i)->device == ordinal) return i;
    return SIZE_MAX;
}

/* Every kind on device 0, a leak freed by context destruction on device 1. */
static void every_kind(void) {
    A(1, 0, 1, ML_GPU_KIND_DEVICE, 0x10000000, 1 * MiB, 1);
    A(2, 0, 1, ML_GPU_KIND_PITCH, 0x10100000, 2 * MiB, 2);
    A(3, 0, 1, ML_GPU_KIND_MANAGED, 0x20000000, 4 * MiB, 3);
    A(4, 0, 1, ML_GPU_KIND_ASYNC, 0x30000000, 1 * MiB, 4);
    feed_gpu(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 5, 0, 1, ML_GPU_KIND_POOL, 0x30100000, 4 * MiB, 5, 0x9001, 0);
    feed_gpu(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 6, 0, 1, ML_GPU_KIND_ARRAY, 0xa1, 16 * KiB, 6, 0,
             ML_GPU_F_ESTIMATED);
    A(7, 0, 1, ML_GPU_KIND_HOST_PINNED, 0x7fff00000000, 64 * KiB, 7);
    A(8, 0, 1, ML_GPU_KIND_HOST_REGISTERED, 0x55550000, 64 * KiB, 8);
    A(9, 0, 1, ML_GPU_KIND_VMM_RESERVE, 0x7e0000000000, 64 * MiB, 9);
    A(9, 0, 1, ML_GPU_KIND_VMM_PHYSICAL, 0xbeef, 2 * MiB, 10); /* the peak: 14 MiB + 16 KiB */
    feed_gpu(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 9, 0, 1, ML_GPU_KIND_VMM_MAP, 0x7e0000000000, 2 * MiB, 11,
             0xbeef, 0);
    F(10, 0, 1, ML_GPU_KIND_DEVICE, 0x10000000);
    F(10, 0, 1, ML_GPU_KIND_ASYNC, 0x30000000);
    F(10, 0, 1, ML_GPU_KIND_DEVICE, 0x30100000); /* cuMemFree of a pool block */
    F(10, 0, 1, ML_GPU_KIND_ARRAY, 0xa1);
    F(10, 0, 1, ML_GPU_KIND_HOST_PINNED, 0x7fff00000000);
    F(10, 0, 1, ML_GPU_KIND_HOST_REGISTERED, 0x55550000);
    F(11, 0, 1, ML_GPU_KIND_VMM_PHYSICAL, 0xbeef); /* released while mapped: lives on */
    F(11, 0, 1, ML_GPU_KIND_VMM_MAP, 0x7e0000000000); /* last mapping gone: freed now */
    F(11, 0, 1, ML_GPU_KIND_VMM_RESERVE, 0x7e0000000000);
    A(12, 1, 2, ML_GPU_KIND_DEVICE, 0x90000000, 8 * MiB, 12);
    feed_gpu(ML_T_GPU_FREE, ML_GPU_OP_CTX_DESTROY, 13, 1, 2, 0, 0, 0, 0, 0, 0);
    F(14, 0, 1, ML_GPU_KIND_DEVICE, 0xdead); /* never allocated */
}

Test(gpu, no_gpu_records_no_state, .init = setup, .fini = teardown) {
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_RSS;
    r.u.rss.rss_bytes = 100;
    ml_analysis_feed(a, &r);
    cr_expect_null(ml_analysis_gpu(a));
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ml_report_json_gpu(m, a);
    fclose(m);
    cr_expect_str_eq(buf, "{\"devices\": []}");
    free(buf);
}

Test(gpu, every_kind_per_kind_bytes_peak_and_leaks, .init = setup, .fini = teardown) {
    every_kind();
    const ml_gpu_t *g = ml_analysis_gpu(a);
    cr_assert_not_null(g);
    cr_assert_eq(ml_gpu_device_count(g), 2);
    const ml_gpu_device_t *d0 = dev_of(g, 0);
    uint64_t peak = 14 * MiB + 16 * KiB;
    cr_expect_eq(d0->peak_bytes, peak, "peak %lu", (unsigned long)d0->peak_bytes);
    cr_expect_eq(d0->peak_time_ms, 9);
    cr_expect_eq(d0->peak_blocks, 7);
    cr_expect_eq(d0->live_bytes, 6 * MiB, "pitch + managed are left");
    cr_expect_eq(d0->leaked_bytes, 6 * MiB);
    cr_expect_eq(d0->leaked_blocks, 2);
    cr_expect_eq(d0->alloc_calls, 11);
    cr_expect_eq(d0->free_calls, 10, "six frees, release, unmap, address free, one unknown");
    cr_expect_eq(d0->unknown_frees, 1);
    cr_expect_eq(d0->bytes_allocated, 14 * MiB + 16 * KiB + 128 * KiB);
    cr_expect_eq(d0->pinned_peak_bytes, 128 * KiB);
    cr_expect_eq(d0->pinned_live_bytes, 0);
    cr_expect_eq(d0->pinned_alloc_calls, 2);
    cr_expect_eq(d0->pinned_free_calls, 2);
    const ml_gpu_kind_stats_t *k = d0->kinds;
    cr_expect_eq(k[ML_GPU_KIND_DEVICE].bytes_allocated, 1 * MiB);
    cr_expect_eq(k[ML_GPU_KIND_DEVICE].free_calls, 1);
    cr_expect_eq(k[ML_GPU_KIND_PITCH].leaked_bytes, 2 * MiB);
    cr_expect_eq(k[ML_GPU_KIND_MANAGED].leaked_bytes, 4 * MiB);
    cr_expect_eq(k[ML_GPU_KIND_ASYNC].free_calls, 1);
    cr_expect_eq(k[ML_GPU_KIND_POOL].free_calls, 1, "the pool block's own kind counts its free");
    cr_expect_eq(k[ML_GPU_KIND_POOL].peak_bytes, 4 * MiB);
    cr_expect_eq(k[ML_GPU_KIND_ARRAY].bytes_allocated, 16 * KiB);
    cr_expect_eq(k[ML_GPU_KIND_HOST_PINNED].bytes_allocated, 64 * KiB);
    cr_expect_eq(k[ML_GPU_KIND_HOST_REGISTERED].bytes_allocated, 64 * KiB);
    cr_expect_eq(k[ML_GPU_KIND_VMM_PHYSICAL].peak_bytes, 2 * MiB);
    cr_expect_eq(k[ML_GPU_KIND_VMM_PHYSICAL].live_bytes, 0, "freed at the last unmap");
    cr_expect_eq(k[ML_GPU_KIND_VMM_RESERVE].bytes_allocated, 64 * MiB);
    cr_expect_eq(k[ML_GPU_KIND_VMM_RESERVE].live_bytes, 0);
    cr_expect_eq(k[ML_GPU_KIND_VMM_MAP].alloc_calls, 1);

    const ml_gpu_device_t *d1 = dev_of(g, 1);
    cr_expect_eq(d1->peak_bytes, 8 * MiB);
    cr_expect_eq(d1->live_bytes, 0, "the context's destruction freed it");
    cr_expect_eq(d1->ctx_destroy_bytes, 8 * MiB);
    cr_expect_eq(d1->leaked_bytes, 8 * MiB, "... and that counts as a leak");
    cr_expect_eq(d1->free_calls, 0);

    const ml_gpu_summary_t *s = ml_gpu_summary(g);
    cr_expect_eq(s->peak_bytes, peak, "all devices: 14 MiB at t=12 is below the t=9 peak");
    cr_expect_eq(s->peak_time_ms, 9);
    cr_expect_eq(s->live_bytes, 6 * MiB);
    cr_expect_eq(s->contexts_destroyed, 1);
    const ml_totals_t *t = ml_analysis_totals(a);
    cr_expect_eq(t->gpu_bytes, 6 * MiB, "the heap timeline sees the device bytes");
    cr_expect_eq(t->peak_gpu_bytes, peak);
}

Test(gpu, sites_holding_the_peak_and_leaking, .init = setup, .fini = teardown) {
    every_kind();
    const ml_gpu_t *g = ml_analysis_gpu(a);
    ml_gpu_site_t s[16];
    size_t n = ml_gpu_sites(g, dev_index(g, 0), ML_GPU_BY_PEAK, s, 16);
    cr_assert_eq(n, 7, "device-byte sites live at the peak: %zu", n);
    /* managed 4 MiB (stack 3) and pool 4 MiB (stack 5) first */
    cr_expect_eq(s[0].peak_bytes, 4 * MiB);
    cr_expect_eq(s[1].peak_bytes, 4 * MiB);
    cr_expect(s[0].stack == 3 || s[0].stack == 5);
    cr_expect_eq(s[n - 1].stack, 6, "the 16 KiB array last");
    n = ml_gpu_sites(g, SIZE_MAX, ML_GPU_BY_LEAKED, s, 16);
    cr_assert_eq(n, 3);
    cr_expect_eq(s[0].stack, 12);
    cr_expect_eq(s[0].leaked_bytes, 8 * MiB);
    cr_expect_eq(s[0].ctx_destroy_bytes, 8 * MiB);
    cr_expect_eq(s[0].leaked_blocks, 1);
    cr_expect_eq(s[1].stack, 3);
    cr_expect_eq(s[2].stack, 2);
}

Test(gpu, peak_sites_are_the_peak_not_the_end, .init = setup, .fini = teardown) {
    /* Grow to 3 blocks, free two, grow again to a lower level: the sites at
     * the peak are the three of the first phase. */
    A(1, 0, 1, ML_GPU_KIND_DEVICE, 0x1000000, 10 * MiB, 1);
    A(2, 0, 1, ML_GPU_KIND_DEVICE, 0x2000000, 10 * MiB, 2);
    A(3, 0, 1, ML_GPU_KIND_DEVICE, 0x3000000, 10 * MiB, 3);
    F(4, 0, 1, ML_GPU_KIND_DEVICE, 0x1000000);
    F(5, 0, 1, ML_GPU_KIND_DEVICE, 0x2000000);
    A(6, 0, 1, ML_GPU_KIND_DEVICE, 0x4000000, 15 * MiB, 4);
    const ml_gpu_t *g = ml_analysis_gpu(a);
    ml_gpu_site_t s[8];
    size_t n = ml_gpu_sites(g, 0, ML_GPU_BY_PEAK, s, 8);
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < n; i++) cr_expect(s[i].stack >= 1 && s[i].stack <= 3, "stack %u", s[i].stack);
    cr_expect_eq(ml_gpu_device(g, 0)->peak_bytes, 30 * MiB);
    /* Now a new, higher peak with nothing freed after it: sites are read live. */
    A(7, 0, 1, ML_GPU_KIND_DEVICE, 0x5000000, 20 * MiB, 5);
    n = ml_gpu_sites(g, 0, ML_GPU_BY_PEAK, s, 8);
    cr_assert_eq(n, 3);
    cr_expect_eq(s[0].stack, 5);
    cr_expect_eq(s[1].stack, 4);
    cr_expect_eq(s[2].stack, 3);
}

Test(gpu, vmm_unmap_then_release_and_range_unmap, .init = setup, .fini = teardown) {
    A(1, 0, 1, ML_GPU_KIND_VMM_PHYSICAL, 0x11, 2 * MiB, 1);
    A(1, 0, 1, ML_GPU_KIND_VMM_PHYSICAL, 0x12, 2 * MiB, 1);
    feed_gpu(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 2, 0, 1, ML_GPU_KIND_VMM_MAP, 0x7000000000, 2 * MiB, 2, 0x11, 0);
    feed_gpu(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 2, 0, 1, ML_GPU_KIND_VMM_MAP, 0x7000200000, 2 * MiB, 2, 0x12, 0);
    const ml_gpu_t *g = ml_analysis_gpu(a);
    cr_expect_eq(ml_gpu_device(g, 0)->live_bytes, 4 * MiB);
    /* One unmap over both mappings; the handles are still owned. */
    feed_gpu(ML_T_GPU_FREE, ML_GPU_OP_FREE, 3, 0, 1, ML_GPU_KIND_VMM_MAP, 0x7000000000, 4 * MiB, 0, 0, 0);
    cr_expect_eq(ml_gpu_device(g, 0)->live_bytes, 4 * MiB);
    cr_expect_eq(ml_gpu_device(g, 0)->kinds[ML_GPU_KIND_VMM_MAP].live_blocks, 0);
    F(4, 0, 1, ML_GPU_KIND_VMM_PHYSICAL, 0x11);
    cr_expect_eq(ml_gpu_device(g, 0)->live_bytes, 2 * MiB, "unmapped and released: freed");
    /* Context destruction does not free VMM memory. */
    feed_gpu(ML_T_GPU_FREE, ML_GPU_OP_CTX_DESTROY, 5, 0, 1, 0, 0, 0, 0, 0, 0);
    cr_expect_eq(ml_gpu_device(g, 0)->live_bytes, 2 * MiB);
    cr_expect_eq(ml_gpu_device(g, 0)->leaked_bytes, 2 * MiB);
}

Test(gpu, release_while_mapped_defers_the_free, .init = setup, .fini = teardown) {
    /* The usual VMM idiom: create, map, release the handle at once; the
     * mapping keeps the memory until it is unmapped. */
    A(1, 0, 1, ML_GPU_KIND_VMM_PHYSICAL, 0x21, 2 * MiB, 1);
    feed_gpu(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 2, 0, 1, ML_GPU_KIND_VMM_MAP, 0x7100000000, 2 * MiB, 2, 0x21, 0);
    F(3, 0, 1, ML_GPU_KIND_VMM_PHYSICAL, 0x21);
    const ml_gpu_t *g = ml_analysis_gpu(a);
    cr_expect_eq(ml_gpu_device(g, 0)->live_bytes, 2 * MiB, "still mapped: still there");
    cr_expect_eq(ml_gpu_device(g, 0)->free_calls, 1, "the release is counted as the call it was");
    F(4, 0, 1, ML_GPU_KIND_VMM_MAP, 0x7100000000);
    cr_expect_eq(ml_gpu_device(g, 0)->live_bytes, 0, "the last unmap frees it");
    cr_expect_eq(ml_gpu_device(g, 0)->leaked_bytes, 0);
}

Test(gpu, failed_free_restores_the_block, .init = setup, .fini = teardown) {
    A(1, 0, 1, ML_GPU_KIND_DEVICE, 0x5000, 1 * MiB, 1);
    F(2, 0, 1, ML_GPU_KIND_DEVICE, 0x5000);
    feed_gpu(ML_T_GPU_FREE, ML_GPU_OP_FREE_FAILED, 2, 0, 1, ML_GPU_KIND_DEVICE, 0x5000, 0, 0, 0, 0);
    const ml_gpu_device_t *d = ml_gpu_device(ml_analysis_gpu(a), 0);
    cr_expect_eq(d->live_bytes, 1 * MiB);
    cr_expect_eq(d->free_calls, 0);
    cr_expect_eq(d->failed_frees, 1);
    cr_expect_eq(d->leaked_bytes, 1 * MiB);
}

Test(gpu, fragmentation_at_peak_and_at_end, .init = setup, .fini = teardown) {
    every_kind();
    const ml_gpu_device_t *d0 = dev_of(ml_analysis_gpu(a), 0);
    /* At the peak (cuMemCreate at t=9; its mapping came after): device
     * pointers [0x10000000, +3 MiB) [0x20000000, +4 MiB) [0x30000000, +5 MiB):
     * two holes of 253 and 252 MiB in a span of 517 MiB. */
    const ml_gpu_frag_t *f = &d0->frag_peak;
    cr_assert(f->valid);
    cr_expect_eq(f->blocks, 5);
    cr_expect_eq(f->live_bytes, 12 * MiB);
    cr_expect_eq(f->holes, 2);
    cr_expect_eq(f->hole_bytes, 505 * MiB);
    cr_expect_eq(f->largest_hole_bytes, 253 * MiB);
    cr_expect_eq(f->span_bytes, 517 * MiB);
    cr_expect_float_eq(f->external, 1.0 - 253.0 / 505.0, 1e-9);
    cr_expect_float_eq(f->utilization, 12.0 / 517.0, 1e-9);
    /* At the end: pitch [0x10100000, +2 MiB) and managed [0x20000000, +4 MiB). */
    f = &d0->frag_now;
    cr_expect_eq(f->blocks, 2);
    cr_expect_eq(f->holes, 1);
    cr_expect_eq(f->hole_bytes, 253 * MiB);
    cr_expect_float_eq(f->external, 0.0, 1e-9);
}

/* A range more than ML_GPU_REGION_GAP away is another region: its gap is
 * neither a hole nor part of the span. */
Test(gpu, far_ranges_are_regions_not_holes, .init = setup, .fini = teardown) {
    const uint64_t far = 0x7e0000000000ull; /* 126 TiB above the heap */
    A(1, 0, 1, ML_GPU_KIND_DEVICE, 0x10000000, 1 * MiB, 1);
    A(2, 0, 1, ML_GPU_KIND_DEVICE, 0x10200000, 1 * MiB, 2); /* a 1 MiB hole */
    A(3, 0, 1, ML_GPU_KIND_DEVICE, far, 2 * MiB, 3);
    A(4, 0, 1, ML_GPU_KIND_DEVICE, far + 8 * MiB, 2 * MiB, 4); /* a 6 MiB hole */
    const ml_gpu_device_t *d = ml_gpu_device(ml_analysis_gpu(a), 0);
    F(5, 0, 1, ML_GPU_KIND_DEVICE, far + 8 * MiB);
    const ml_gpu_frag_t *f = &d->frag_peak;
    cr_assert(f->valid);
    cr_expect_eq(f->blocks, 4);
    cr_expect_eq(f->regions, 2);
    cr_expect_eq(f->holes, 2);
    cr_expect_eq(f->hole_bytes, 7 * MiB);
    cr_expect_eq(f->largest_hole_bytes, 6 * MiB);
    cr_expect_eq(f->span_bytes, 3 * MiB + 10 * MiB, "the two regions' spans, not 126 TiB");
    cr_expect_float_eq(f->utilization, 6.0 / 13.0, 1e-9);
    cr_expect_float_eq(f->external, 1.0 - 6.0 / 7.0, 1e-9);
    /* Removing a range updates the regions as well. */
    f = &d->frag_now;
    F(6, 0, 1, ML_GPU_KIND_DEVICE, far);
    cr_expect_eq(f->regions, 1);
    cr_expect_eq(f->holes, 1);
    cr_expect_eq(f->span_bytes, 3 * MiB);
}

Test(gpu, size_classes_and_timeline, .init = setup, .fini = teardown) {
    every_kind();
    const ml_gpu_t *g = ml_analysis_gpu(a);
    const ml_gpu_device_t *d0 = dev_of(g, 0);
    cr_expect_eq(d0->size_count[20], 2, "1 MiB: device, async (%lu)", (unsigned long)d0->size_count[20]);
    cr_expect_eq(d0->size_count[21], 2, "2 MiB: pitch, vmm physical");
    cr_expect_eq(d0->size_count[22], 2, "4 MiB: managed, pool");
    cr_expect_eq(d0->size_count[14], 1, "16 KiB array");
    cr_expect_eq(d0->size_count[16], 2, "64 KiB pinned + registered");
    const ml_gpu_point_t *p;
    size_t n = ml_gpu_timeline(g, dev_index(g, 0), &p);
    cr_assert_gt(n, 3);
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i].max_bytes > max) max = p[i].max_bytes;
        if (i) cr_expect_gt(p[i].time_ms, p[i - 1].time_ms);
    }
    cr_expect_eq(max, 14 * MiB + 16 * KiB, "the timeline holds the peak");
    cr_expect_eq(p[n - 1].last_bytes, 6 * MiB);
}

Test(gpu, timeline_stays_bounded, .init = setup, .fini = teardown) {
    for (uint32_t i = 0; i < 20000; i++) {
        A(i, 0, 1, ML_GPU_KIND_ASYNC, 0x1000 + i * 0x100000ull, (i % 7 + 1) * MiB, 1);
        if (i % 3 != 2) F(i, 0, 1, ML_GPU_KIND_ASYNC, 0x1000 + i * 0x100000ull);
    }
    const ml_gpu_t *g = ml_analysis_gpu(a);
    const ml_gpu_point_t *p;
    size_t n = ml_gpu_timeline(g, 0, &p);
    cr_expect_leq(n, ML_GPU_TIMELINE_MAX);
    cr_expect_gt(n, ML_GPU_TIMELINE_MAX / 4);
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i].max_bytes > max) max = p[i].max_bytes;
    cr_expect_eq(max, ml_gpu_device(g, 0)->peak_bytes);
}

/* ------------------------------------------------------------------------- */
/* Advice                                                                    */
/* ------------------------------------------------------------------------- */

static const ml_gpu_suggestion_t *find(const ml_gpu_suggestion_t *s, size_t n, const char *strategy,
                                       uint32_t stack) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s[i].strategy, strategy) && s[i].stack == stack) return &s[i];
    return NULL;
}

Test(gpu, advice_rules, .init = setup, .fini = teardown) {
    /* Device 0, over one second: */
    for (uint32_t i = 0; i < 100; i++) { /* one size, 100 pairs: caching pool */
        A(i * 10, 0, 1, ML_GPU_KIND_DEVICE, 0x10000000, 1 * MiB, 20);
        F(i * 10 + 1, 0, 1, ML_GPU_KIND_DEVICE, 0x10000000);
    }
    for (uint32_t i = 0; i < 50; i++) { /* 50 sizes: the stream-ordered allocator */
        A(i * 20 + 2, 0, 1, ML_GPU_KIND_DEVICE, 0x20000000, 4096 * (i + 1), 21);
        F(i * 20 + 3, 0, 1, ML_GPU_KIND_DEVICE, 0x20000000);
    }
    for (uint32_t i = 0; i < 10; i++) { /* pinned per step */
        A(i * 100 + 4, 0, 1, ML_GPU_KIND_HOST_PINNED, 0x7fff00000000, 8 * MiB, 22);
        F(i * 100 + 5, 0, 1, ML_GPU_KIND_HOST_PINNED, 0x7fff00000000);
    }
    /* Device 1: five rounds of 8 x 4 MiB allocated, then all freed at once. */
    for (uint32_t r = 0; r < 5; r++) {
        for (uint32_t i = 0; i < 8; i++) A(r * 100 + i, 1, 2, ML_GPU_KIND_DEVICE, 0x40000000 + i * 8 * MiB, 4 * MiB, 23);
        for (uint32_t i = 0; i < 8; i++) F(r * 100 + 50 + i, 1, 2, ML_GPU_KIND_DEVICE, 0x40000000 + i * 8 * MiB);
    }
    /* Device 2: a 64 MiB peak, 48 MiB of it from one site. */
    for (uint32_t i = 0; i < 3; i++) A(600 + i, 2, 3, ML_GPU_KIND_DEVICE, 0x80000000 + i * 16 * MiB, 16 * MiB, 30);
    A(610, 2, 3, ML_GPU_KIND_DEVICE, 0x90000000, 16 * MiB, 31);
    /* Device 3: ten 1 MiB blocks, 1 MiB apart. */
    for (uint32_t i = 0; i < 10; i++) A(700 + i, 3, 4, ML_GPU_KIND_DEVICE, 0xa0000000 + i * 2 * MiB, 1 * MiB, 40);
    A(1000, 0, 1, ML_GPU_KIND_DEVICE, 0x1, 1, 50); /* the trace lasts one second */

    const ml_gpu_t *g = ml_analysis_gpu(a);
    cr_expect_eq(dev_of(g, 1)->empty_cache_cycles, 4, "five drains, four refills");
    ml_gpu_suggestion_t s[32];
    size_t n = ml_gpu_suggest(g, s, 32);
    for (size_t i = 0; i < n; i++)
        cr_log_info("%s dev %d stack %u saving %lu: %s [%s]", s[i].strategy, s[i].device, s[i].stack,
                    (unsigned long)s[i].estimated_saving_bytes, s[i].message, s[i].evidence);
    const ml_gpu_suggestion_t *x = find(s, n, "gpu_caching_pool", 20);
    cr_assert_not_null(x);
    cr_expect_eq(x->pairs, 100);
    cr_expect_eq(x->distinct_sizes, 1);
    cr_expect_float_eq(x->pairs_per_s, 100.0, 1e-9);
    cr_expect(strstr(x->message, "1.0 MiB") != NULL, "%s", x->message);
    x = find(s, n, "gpu_async_alloc", 21);
    cr_assert_not_null(x);
    cr_expect_eq(x->distinct_sizes, ML_GPU_SITE_SIZES + 1, "more than 8 sizes");
    x = find(s, n, "gpu_reuse_pinned", 22);
    cr_assert_not_null(x);
    cr_expect_eq(x->pairs, 10);
    x = find(s, n, "gpu_avoid_empty_cache", 0);
    cr_assert_not_null(x);
    cr_expect_eq(x->device, 1);
    cr_expect_eq(x->cycles, 4);
    x = find(s, n, "gpu_checkpoint_or_offload", 30);
    cr_assert_not_null(x);
    cr_expect_eq(x->device, 2);
    cr_expect_eq(x->estimated_saving_bytes, 48 * MiB);
    cr_expect_float_eq(x->share, 0.75, 1e-9);
    cr_expect_not_null(find(s, n, "gpu_checkpoint_or_offload", 31), "25 %% is enough to be named");
    cr_expect_eq(s[0].estimated_saving_bytes, 48 * MiB, "the largest saving first");
    x = find(s, n, "gpu_expandable_segments", 0);
    cr_assert_not_null(x);
    cr_expect_eq(x->device, 3);
    /* No advice without evidence. */
    cr_expect_null(find(s, n, "gpu_caching_pool", 30));
    cr_expect_null(find(s, n, "gpu_caching_pool", 40));
    cr_expect_null(find(s, n, "gpu_reuse_pinned", 20));
    cr_expect_null(find(s, n, "gpu_checkpoint_or_offload", 40), "device 3's peak is under 16 MiB");
}

Test(gpu, quiet_program_gets_no_advice, .init = setup, .fini = teardown) {
    A(1, 0, 1, ML_GPU_KIND_DEVICE, 0x10000000, 256 * MiB, 1);
    A(2, 0, 1, ML_GPU_KIND_DEVICE, 0x20000000, 256 * MiB, 2);
    A(3, 0, 1, ML_GPU_KIND_DEVICE, 0x30000000, 256 * MiB, 3);
    A(4, 0, 1, ML_GPU_KIND_DEVICE, 0x40000000, 256 * MiB, 4);
    A(5, 0, 1, ML_GPU_KIND_DEVICE, 0x50000000, 256 * MiB, 5);
    for (uint32_t i = 0; i < 10; i++) { /* a few pairs: not churn */
        A(10 + i, 0, 1, ML_GPU_KIND_DEVICE, 0x60000000, MiB, 6);
        F(10 + i, 0, 1, ML_GPU_KIND_DEVICE, 0x60000000);
    }
    ml_gpu_suggestion_t s[8];
    cr_expect_eq(ml_gpu_suggest(ml_analysis_gpu(a), s, 8), 0, "%s", s[0].strategy);
}

/* ------------------------------------------------------------------------- */
/* JSON                                                                      */
/* ------------------------------------------------------------------------- */

Test(gpu, json_devices, .init = setup, .fini = teardown) {
    every_kind();
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ml_report_json_gpu(m, a);
    fclose(m);
    static const char head[] = "{\"devices\": [{\"device\": 0, \"peak_bytes\": 14696448, ";
    cr_expect(strncmp(buf, head, sizeof head - 1) == 0, "%.200s", buf);
    cr_expect(strstr(buf, "{\"device\": 1, \"peak_bytes\": 8388608, ") != NULL);
    cr_expect(strstr(buf, "\"leaked_bytes\": 6291456, \"leaked_blocks\": 2, ") != NULL);
    cr_expect(strstr(buf, "\"leaked_at_context_destroy_bytes\": 8388608") != NULL);
    cr_expect(strstr(buf, "\"alloc_calls\": 11, \"free_calls\": 10, ") != NULL);
    cr_expect(strstr(buf, "\"pitch\": {\"alloc_calls\": 1, \"free_calls\": 0, \"bytes_allocated\": 2097152, "
                          "\"peak_bytes\": 2097152, \"live_bytes\": 2097152, \"leaked_bytes\": 2097152") != NULL);
    cr_expect(strstr(buf, "\"host_pinned\": {\"alloc_calls\": 1, \"free_calls\": 1, \"bytes_allocated\": 65536") != NULL);
    cr_expect(strstr(buf, "\"leak_sites\": [{\"stack\": 3, \"kind\": \"managed\", \"frames\": [], \"bytes\": 4194304") != NULL);
    int depth = 0, min = 0;
    for (char *c = buf; *c; c++) {
        depth += (*c == '{' || *c == '[') - (*c == '}' || *c == ']');
        if (depth < min) min = depth;
    }
    cr_expect_eq(depth, 0, "balanced");
    cr_expect_eq(min, 0);
    free(buf);
}

/* ------------------------------------------------------------------------- */
/* Memory pools (memlens run --gpu-pools)                                    */
/* ------------------------------------------------------------------------- */

#define POOL_P 0x700000000ull /* an explicit pool (cuMemPoolCreate) */
#define POOL_D 0x600000000ull /* device 0's default pool */

static void cb(uint8_t tag, uint8_t op, uint32_t t, uint32_t corr, uint8_t kind, uint64_t ptr,
               uint64_t size) {
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = tag;
    r.time_ms = t;
    r.u.gpu.op = op;
    r.u.gpu.kind = kind;
    r.u.gpu.device = 0;
    r.u.gpu.context = 1;
    r.u.gpu.ptr = ptr;
    r.u.gpu.size = size;
    r.u.gpu.stack = 7;
    r.u.gpu.correlation = corr;
    ml_analysis_feed(a, &r);
}

static void pool_rec(uint32_t t, uint32_t corr, uint8_t pool_op, uint64_t pool, uint64_t reserved,
                     uint64_t used, uint64_t threshold) {
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_GPU_POOL;
    r.time_ms = t;
    r.u.gpu.op = ML_GPU_OP_POOL_STATE;
    r.u.gpu.kind = pool_op;
    r.u.gpu.device = 0;
    r.u.gpu.ptr = pool;
    r.u.gpu.size = reserved;
    r.u.gpu.pool_used = used;
    r.u.gpu.pool_threshold = threshold;
    r.u.gpu.correlation = corr;
    ml_analysis_feed(a, &r);
}

/* The API calls, numbered by correlation id (c1 cuMemPoolCreate and c9
 * cuMemPoolDestroy make no callback event). The device peaks at c3 with
 * 5 MiB: 4 MiB from the explicit pool, 1 MiB from the default one. */
static void pool_callbacks_1_to_4(void) {
    cb(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 10, 2, ML_GPU_KIND_POOL, 0x300000000, 4 * MiB);
    cb(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 11, 3, ML_GPU_KIND_ASYNC, 0x200000000, 1 * MiB);
    cb(ML_T_GPU_FREE, ML_GPU_OP_FREE, 12, 4, ML_GPU_KIND_POOL, 0x300000000, 0);
}
static void pool_callbacks_5_to_8(void) {
    cb(ML_T_GPU_FREE, ML_GPU_OP_POOL_TRIM, 13, 5, ML_GPU_KIND_POOL, 0, 0);
    cb(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 14, 6, ML_GPU_KIND_POOL, 0x300000000, 2 * MiB);
    cb(ML_T_GPU_FREE, ML_GPU_OP_FREE, 15, 7, ML_GPU_KIND_POOL, 0x300000000, 0);
    cb(ML_T_GPU_FREE, ML_GPU_OP_POOL_TRIM, 16, 8, ML_GPU_KIND_POOL, 0, 0);
}
/* What CUPTI reports for them: pool state after each call. */
static void pool_records_1_to_4(uint32_t t) {
    pool_rec(t, 1, ML_GPU_POOL_CREATED, POOL_P, 0, 0, 0);
    pool_rec(t, 2, ML_GPU_POOL_ALLOC, POOL_P, 8 * MiB, 4 * MiB, 0);
    pool_rec(t, 3, ML_GPU_POOL_ALLOC, POOL_D, 2 * MiB, 1 * MiB, 0);
    pool_rec(t, 4, ML_GPU_POOL_RELEASE, POOL_P, 8 * MiB, 0, 0);
}
static void pool_records_5_to_9(uint32_t t) {
    pool_rec(t, 5, ML_GPU_POOL_TRIMMED, POOL_P, 0, 0, 0);
    pool_rec(t, 6, ML_GPU_POOL_ALLOC, POOL_P, 2 * MiB, 2 * MiB, 0);
    pool_rec(t, 7, ML_GPU_POOL_RELEASE, POOL_P, 2 * MiB, 0, 0);
    pool_rec(t, 8, ML_GPU_POOL_TRIMMED, POOL_P, 0, 0, 0);
    pool_rec(t, 9, ML_GPU_POOL_DESTROYED, POOL_P, 0, 0, 0);
}

static void expect_pools(bool in_order) {
    const ml_gpu_t *g = ml_analysis_gpu(a);
    cr_assert_not_null(g);
    const ml_gpu_device_t *d = dev_of(g, 0);
    cr_expect_eq(d->peak_bytes, 5 * MiB, "pool records move no device bytes");
    cr_expect_eq(d->pool_trims, 2, "the callbacks' trims");
    cr_expect_eq(d->pool_records, 9);
    cr_expect_eq(d->npools, 2);
    ml_gpu_pool_t p[4];
    cr_assert_eq(ml_gpu_pools(g, dev_index(g, 0), NULL, 0), 2);
    cr_assert_eq(ml_gpu_pools(g, dev_index(g, 0), p, 4), 2);
    const ml_gpu_pool_t *x = p[0].address == POOL_P ? &p[0] : &p[1];
    const ml_gpu_pool_t *y = p[0].address == POOL_P ? &p[1] : &p[0];
    cr_assert_eq(x->address, POOL_P);
    cr_assert_eq(y->address, POOL_D);
    cr_expect(x->explicit_pool);
    cr_expect_eq(x->peak_reserved_bytes, 8 * MiB);
    cr_expect_eq(x->reserved_at_exit_bytes, 0);
    cr_expect_eq(x->peak_used_bytes, 4 * MiB);
    cr_expect_eq(x->used_at_exit_bytes, 0);
    cr_expect_eq(x->reserved_at_peak_bytes, 8 * MiB, "after c2, the last record up to c3");
    cr_expect_eq(x->used_at_peak_bytes, 4 * MiB);
    cr_expect_eq(x->release_threshold_bytes, 0);
    cr_expect_eq(x->trims, 2);
    cr_expect_eq(x->created, 1);
    cr_expect_eq(x->destroyed, 1);
    cr_expect_eq(x->allocs, 2);
    cr_expect_eq(x->releases, 2);
    cr_expect_eq(x->last_correlation, 9);
    if (in_order) cr_expect_eq(x->drops_to_zero, 2, "8 MiB -> 0 at c5, 2 MiB -> 0 at c8");
    cr_expect_not(y->explicit_pool, "no CREATED record: the default pool");
    cr_expect_eq(y->peak_reserved_bytes, 2 * MiB);
    cr_expect_eq(y->reserved_at_exit_bytes, 2 * MiB);
    cr_expect_eq(y->peak_used_bytes, 1 * MiB);
    cr_expect_eq(y->reserved_at_peak_bytes, 2 * MiB);
    cr_expect_eq(y->used_at_peak_bytes, 1 * MiB);
    cr_expect_eq(y->trims + y->created + y->destroyed, 0);
    cr_expect_eq(d->pool_reserved_at_peak_bytes, 10 * MiB);
    cr_expect_eq(d->pool_used_at_peak_bytes, 5 * MiB);
    cr_expect_eq(d->pool_unused_at_peak_bytes, 5 * MiB, "reserved but unused at the peak");
}

Test(gpu, pools_joined_by_correlation_delivered_mid_run_and_at_exit, .init = setup, .fini = teardown) {
    /* CUPTI hands over one buffer after c4, the rest at the exit flush. */
    pool_callbacks_1_to_4();
    pool_records_1_to_4(12);
    pool_callbacks_5_to_8();
    pool_records_5_to_9(20);
    expect_pools(true);
}

Test(gpu, pools_out_of_order_give_the_same_states, .init = setup, .fini = teardown) {
    /* Everything at exit, the second buffer completed before the first. */
    pool_callbacks_1_to_4();
    pool_callbacks_5_to_8();
    pool_records_5_to_9(20);
    pool_records_1_to_4(20);
    expect_pools(false);
}

Test(gpu, pools_json_keys, .init = setup, .fini = teardown) {
    pool_callbacks_1_to_4();
    pool_records_1_to_4(12);
    pool_callbacks_5_to_8();
    pool_records_5_to_9(20);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ml_report_json_gpu(m, a);
    fclose(m);
    cr_expect(strstr(buf, "\"pool_trims\": 2, \"pool_reserved_at_peak_bytes\": 10485760, "
                          "\"pool_used_at_peak_bytes\": 5242880, \"pool_unused_at_peak_bytes\": 5242880, "
                          "\"pool_records\": 9, \"pools\": [") != NULL, "%s", buf);
    cr_expect(strstr(buf, "{\"address\": 30064771072, \"kind\": \"explicit\", \"imported\": false, "
                          "\"managed\": false, \"peak_reserved_bytes\": 8388608, \"reserved_at_exit_bytes\": 0, "
                          "\"peak_used_bytes\": 4194304, \"used_at_exit_bytes\": 0, "
                          "\"reserved_at_peak_bytes\": 8388608, \"used_at_peak_bytes\": 4194304, "
                          "\"release_threshold_bytes\": 0, \"trims\": 2, \"reserved_drops_to_zero\": 2, "
                          "\"allocs\": 2, \"releases\": 2, \"created\": 1, \"destroyed\": 1}") != NULL, "%s", buf);
    cr_expect(strstr(buf, "{\"address\": 25769803776, \"kind\": \"default\", ") != NULL, "%s", buf);
    free(buf);
}

Test(gpu, no_pool_records_no_pools_key, .init = setup, .fini = teardown) {
    pool_callbacks_1_to_4();
    pool_callbacks_5_to_8();
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ml_report_json_gpu(m, a);
    fclose(m);
    cr_expect(strstr(buf, "\"pools\"") == NULL, "%s", buf);
    cr_expect(strstr(buf, "pool_reserved_at_peak_bytes") == NULL);
    cr_expect_eq(dev_of(ml_analysis_gpu(a), 0)->npools, 0);
    free(buf);
}

/* 64 cudaMallocAsync/cudaFreeAsync pairs over one second from one site. */
static void async_churn(void) {
    for (uint32_t i = 0; i < 64; i++) {
        cb(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, i * 15, 100 + 2 * i, ML_GPU_KIND_ASYNC, 0x200000000, MiB);
        cb(ML_T_GPU_FREE, ML_GPU_OP_FREE, i * 15 + 1, 101 + 2 * i, ML_GPU_KIND_ASYNC, 0x200000000, 0);
    }
    cb(ML_T_GPU_ALLOC, ML_GPU_OP_ALLOC, 1000, 300, ML_GPU_KIND_DEVICE, 0x1, 1);
}

Test(gpu, async_advice_says_what_the_pool_records_measured, .init = setup, .fini = teardown) {
    async_churn();
    for (uint32_t i = 0; i < 4; i++) { /* the pool fills and falls back to 0 at each sync */
        pool_rec(1000, 100 + 2 * i, ML_GPU_POOL_ALLOC, POOL_D, 2 * MiB, MiB, 0);
        pool_rec(1000, 101 + 2 * i, ML_GPU_POOL_RELEASE, POOL_D, 0, 0, 0);
    }
    ml_gpu_suggestion_t s[8];
    size_t n = ml_gpu_suggest(ml_analysis_gpu(a), s, 8);
    const ml_gpu_suggestion_t *x = find(s, n, "gpu_async_alloc", 7);
    cr_assert_not_null(x);
    cr_expect(strstr(x->message, "Measured (--gpu-pools): 1 pool(s) with release threshold 0 were "
                                 "trimmed 0 times and their reserved memory fell to 0 4 times.") != NULL,
              "%s", x->message);
}

Test(gpu, async_advice_without_pool_records_is_unchanged, .init = setup, .fini = teardown) {
    async_churn();
    ml_gpu_suggestion_t s[8];
    size_t n = ml_gpu_suggest(ml_analysis_gpu(a), s, 8);
    const ml_gpu_suggestion_t *x = find(s, n, "gpu_async_alloc", 7);
    cr_assert_not_null(x);
    cr_expect(strstr(x->message, "Measured") == NULL, "%s", x->message);
}

Test(gpu, async_advice_dropped_when_the_threshold_is_set, .init = setup, .fini = teardown) {
    async_churn();
    pool_rec(1000, 100, ML_GPU_POOL_ALLOC, POOL_D, 64 * MiB, MiB, 64 * MiB);
    ml_gpu_suggestion_t s[8];
    size_t n = ml_gpu_suggest(ml_analysis_gpu(a), s, 8);
    cr_expect_null(find(s, n, "gpu_async_alloc", 7), "the pool already keeps its memory");
}
