/* test_snapshot.c - the analysis snapshot the collector saves at the end of
 * a trace: a report from it is byte for byte the report from replaying the
 * records, it is really used, and a damaged one is never trusted. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "ml_analysis.h"
#include "ml_gpu.h"
#include "ml_report_gpu.h"

/* An option for `memlens run` ahead of the rest (--gpu-pools), or NULL. */
static const char *run_option;

static void record(const char *trace, const char *const *prog) {
    const char *argv[16] = {h_bin("memlens"), "run", "-q", "-o", trace};
    int n = 5;
    if (run_option) argv[n++] = run_option;
    argv[n++] = "--";
    for (int i = 0; prog[i] && n < 15; i++) argv[n++] = i == 0 ? h_bin(prog[0]) : prog[i];
    argv[n] = NULL;
    h_run_t r;
    h_run(&r, argv);
    cr_assert(r.status == 0 || r.status == 139, "memlens run %s: %d %s", prog[0], r.status, r.err);
    h_run_free(&r);
}

/* `memlens report TRACE OPTS... OUT_OPT out`, whose stdout is returned. */
static char *report(const char *trace, const char *extra, const char *out_opt, const char *out) {
    const char *argv[12] = {h_bin("memlens"), "report", trace, "--no-advisor", "-q"};
    int n = 5;
    if (extra) argv[n++] = extra;
    if (out_opt) {
        argv[n++] = out_opt;
        argv[n++] = out;
    }
    argv[n] = NULL;
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "memlens report %s %s: %s", trace, extra ? extra : "", r.err);
    char *o = r.out;
    r.out = NULL;
    h_run_free(&r);
    return o;
}

/* The JSON, the folded stacks and the text summary from the snapshot equal
 * those from a replay of the records. */
static void expect_same_reports(const char *name, const char *const *prog) {
    char trace[4096], a[4200], b[4200];
    snprintf(trace, sizeof trace, "%s", h_tmp(name));
    record(trace, prog);
    static const char *const outs[] = {"--json", "--folded", NULL};
    for (int i = 0; outs[i]; i++) {
        snprintf(a, sizeof a, "%s.snap%s", trace, outs[i]);
        snprintf(b, sizeof b, "%s.replay%s", trace, outs[i]);
        free(report(trace, NULL, outs[i], a));
        free(report(trace, "--replay", outs[i], b));
        char *x = h_read_file(a), *y = h_read_file(b);
        cr_assert(x && y, "%s: no output", name);
        cr_expect_gt(strlen(x), 10, "%s %s: empty", name, outs[i]);
        cr_expect_str_eq(x, y, "%s %s: the snapshot's report differs from the replay's", name, outs[i]);
        free(x);
        free(y);
    }
    char *x = report(trace, NULL, NULL, NULL), *y = report(trace, "--replay", NULL, NULL);
    cr_expect_str_eq(x, y, "%s: text summaries differ", name);
    free(x);
    free(y);

    /* And the snapshot was what the first report read. */
    ml_analysis_t *s, *r;
    char err[512];
    cr_assert_eq(ml_analysis_new(&s), 0);
    cr_assert_eq(ml_analysis_new(&r), 0);
    cr_assert_eq(ml_analysis_load_ex(s, trace, ML_LOAD_SNAPSHOT, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ml_analysis_load_ex(r, trace, 0, err, sizeof err), 0, "%s", err);
    cr_expect(ml_analysis_from_snapshot(s), "%s: the trace has no usable snapshot", name);
    cr_expect(!ml_analysis_from_snapshot(r));
    const ml_totals_t *ts = ml_analysis_totals(s), *tr = ml_analysis_totals(r);
    cr_expect_eq(ts->alloc_calls, tr->alloc_calls);
    cr_expect_eq(ts->peak_bytes, tr->peak_bytes);
    cr_expect_eq(ts->heap_bytes, tr->heap_bytes);
    cr_expect_eq(ts->records, tr->records, "%s: records %lu vs %lu", name,
                 (unsigned long)ts->records, (unsigned long)tr->records);
    ml_analysis_free(s);
    ml_analysis_free(r);
}

Test(snapshot, leaks_with_kinds) {
    expect_same_reports("leaks.mlt", (const char *[]){"fx_leaks", NULL});
}

Test(snapshot, cpp_names) {
    expect_same_reports("cpp.mlt", (const char *[]){"fx_cpp", NULL});
}

Test(snapshot, dlclosed_plugin) {
    expect_same_reports("dlopen.mlt", (const char *[]){"fx_dlopen", NULL});
}

/* Plugin b loaded where a was: nodes parked and given back, nodes that
 * came before their module's record (analysis.c, add_node). */
Test(snapshot, plugins_loaded_in_turn_at_one_address) {
    expect_same_reports("swap.mlt", (const char *[]){"fx_dlopen", "swap", NULL});
}

/* A plugin loaded again at another address: its sites are one with the
 * first load's (sites.c, canon_nodes). */
Test(snapshot, a_plugin_loaded_again_elsewhere) {
    expect_same_reports("elsewhere.mlt", (const char *[]){"fx_dlopen", "elsewhere", NULL});
}

Test(snapshot, fragmentation) {
    expect_same_reports("frag.mlt", (const char *[]){"fx_frag", "alternate", NULL});
}

Test(snapshot, threads) {
    expect_same_reports("threads.mlt", (const char *[]){"fx_threads", NULL});
}

Test(snapshot, realloc_chains) {
    expect_same_reports("grow.mlt", (const char *[]){"fx_adv_realloc", NULL});
}

Test(snapshot, jemalloc_usable_sizes) {
    expect_same_reports("jemalloc.mlt", (const char *[]){"fx_jemalloc", NULL});
}

Test(snapshot, crash) {
    expect_same_reports("crash.mlt", (const char *[]){"fx_crash", "segv", NULL});
}

/* Sets the snapshot version that the trace file's snapshot header (the
 * last "MLSN" block) gives. */
static void set_snapshot_version(const char *trace, uint32_t version) {
    struct stat st;
    cr_assert_eq(stat(trace, &st), 0);
    size_t len = (size_t)st.st_size;
    char *d = malloc(len);
    FILE *in = fopen(trace, "rb");
    cr_assert(d && in);
    cr_assert_eq(fread(d, 1, len, in), len);
    fclose(in);
    size_t at = SIZE_MAX;
    for (size_t i = 0; i + 16 <= len; i++)
        if (!memcmp(d + i, "MLSN", 4)) at = i;
    cr_assert_neq(at, SIZE_MAX, "%s has a snapshot", trace);
    memcpy(d + at + 12, &version, 4);
    FILE *f = fopen(trace, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(d, 1, len, f), len);
    fclose(f);
    free(d);
}

/* Snapshots before version 7 counted each block of a sampled trace as one
 * block, free and temporary allocation, where the records give the
 * sampler's estimates (analysis.c, ml__block_count): a sampled trace whose
 * snapshot says version 6 is replayed, an unsampled one still restored. */
Test(snapshot, an_older_snapshot_of_a_sampled_trace_is_replayed) {
    char s6[4096], u6[4096];
    snprintf(s6, sizeof s6, "%s", h_tmp("sampled6.mlt"));
    snprintf(u6, sizeof u6, "%s", h_tmp("unsampled6.mlt"));
    const char *argv[] = {h_bin("memlens"), "run", "-q", "--sample", "4096", "-o", s6, "--", h_bin("fx_sample"), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    record(u6, (const char *[]){"fx_leaks", NULL});
    char err[512];
    for (int v = 7; v >= 6; v--) {
        set_snapshot_version(s6, (uint32_t)v);
        set_snapshot_version(u6, (uint32_t)v);
        ml_analysis_t *a, *b;
        cr_assert_eq(ml_analysis_new(&a), 0);
        cr_assert_eq(ml_analysis_new(&b), 0);
        cr_assert_eq(ml_analysis_load_ex(a, s6, ML_LOAD_SNAPSHOT, err, sizeof err), 0, "%s", err);
        cr_assert_eq(ml_analysis_load_ex(b, u6, ML_LOAD_SNAPSHOT, err, sizeof err), 0, "%s", err);
        cr_expect_eq(ml_analysis_from_snapshot(a), v == 7, "sampled, version %d: %s", v,
                     v == 7 ? "restored" : "replayed");
        cr_expect(ml_analysis_from_snapshot(b), "unsampled, version %d: restored", v);
        cr_expect_gt(ml_analysis_totals(a)->heap_blocks, 2000, "about 10,000 blocks live at exit, estimated");
        ml_analysis_free(a);
        ml_analysis_free(b);
    }
}

Test(snapshot, sampled) {
    char trace[4096], a[4200], b[4200];
    snprintf(trace, sizeof trace, "%s", h_tmp("sampled.mlt"));
    const char *argv[] = {h_bin("memlens"), "run", "-q", "--sample", "4096", "-o", trace, "--",
                          h_bin("fx_sample"), NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    snprintf(a, sizeof a, "%s.a.json", trace);
    snprintf(b, sizeof b, "%s.b.json", trace);
    free(report(trace, NULL, "--json", a));
    free(report(trace, "--replay", "--json", b));
    char *x = h_read_file(a), *y = h_read_file(b);
    cr_assert(x && y);
    cr_expect(strstr(x, "\"sampled\": true"), "%.300s", x);
    cr_expect_str_eq(x, y, "sampled: the snapshot's report differs from the replay's");
    free(x);
    free(y);
}

static long file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static void copy(const char *from, const char *to) {
    char *d = NULL;
    FILE *f = fopen(from, "rb");
    cr_assert(f);
    long n = file_size(from);
    d = malloc((size_t)n);
    cr_assert_eq(fread(d, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    f = fopen(to, "wb");
    cr_assert_eq(fwrite(d, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    free(d);
}

/* A flipped byte in the snapshot: the report warns, replays and is right. */
Test(snapshot, damaged_snapshot_is_replayed) {
    char trace[4096], bad[4096], a[4200], b[4200];
    snprintf(trace, sizeof trace, "%s", h_tmp("dmg.mlt"));
    snprintf(bad, sizeof bad, "%s", h_tmp("dmg-bad.mlt"));
    record(trace, (const char *[]){"fx_leaks", NULL});
    copy(trace, bad);
    /* The trailer's last 8 bytes give the snapshot's offset; its frame
     * starts 16 bytes after. */
    int fd = open(bad, O_RDWR);
    cr_assert_geq(fd, 0);
    long size = file_size(bad);
    uint64_t off = 0;
    cr_assert_eq(pread(fd, &off, 8, size - 8), 8);
    cr_assert_lt(off + 40, (uint64_t)size - 24, "a snapshot of some size");
    uint8_t c;
    cr_assert_eq(pread(fd, &c, 1, (off_t)off + 30), 1);
    c ^= 0x41;
    cr_assert_eq(pwrite(fd, &c, 1, (off_t)off + 30), 1);
    close(fd);

    snprintf(a, sizeof a, "%s.json", bad);
    snprintf(b, sizeof b, "%s.json", trace);
    const char *argv[] = {h_bin("memlens"), "report", bad, "--no-advisor", "--json", a, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "snapshot") && strstr(r.err, "replayed"), "a warning: %s", r.err);
    h_run_free(&r);
    free(report(trace, "--replay", "--json", b));
    char *x = h_read_file(a), *y = h_read_file(b);
    cr_assert(x && y);
    /* The replay of the damaged file lists the warning; otherwise the same. */
    char *w = strstr(x, "snapshot");
    cr_expect(w, "the warning is in the report");
    cr_expect(strstr(x, "\"leaked_bytes\"") && strstr(y, "\"leaked_bytes\""));
    ml_analysis_t *s;
    char err[512];
    cr_assert_eq(ml_analysis_new(&s), 0);
    cr_assert_eq(ml_analysis_load_ex(s, bad, ML_LOAD_SNAPSHOT, err, sizeof err), 0, "%s", err);
    cr_expect(!ml_analysis_from_snapshot(s), "a damaged snapshot is not used");
    cr_expect_gt(ml_analysis_totals(s)->alloc_calls, 0, "the records were replayed");
    ml_analysis_free(s);
    free(x);
    free(y);
}

/* Every prefix of a snapshot and bytes flipped all over it: restore says
 * no (or, for a flip that keeps it sound, yes), never crashes; ASan builds
 * (ML_SANITIZE) check the memory side. */
Test(snapshot, restore_refuses_damaged_bytes, .timeout = 120) {
    char trace[4096];
    snprintf(trace, sizeof trace, "%s", h_tmp("rs.mlt"));
    record(trace, (const char *[]){"fx_leaks", NULL});
    ml_analysis_t *a;
    char err[512];
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_assert_eq(ml_analysis_load_ex(a, trace, 0, err, sizeof err), 0, "%s", err);
    void *data;
    size_t len;
    cr_assert_eq(ml_analysis_snapshot(a, &data, &len), 0);
    ml_analysis_free(a);
    cr_assert_gt(len, 100);
    for (size_t n = 0; n < len; n += n < 256 ? 1 : 7) {
        cr_assert_eq(ml_analysis_new(&a), 0);
        int rc = ml_analysis_restore(a, data, n, err, sizeof err);
        cr_expect_eq(rc, -22, "a prefix of %zu of %zu bytes was accepted", n, len);
        cr_expect(strstr(err, "damaged"), "%s", err);
        cr_expect_eq(ml_analysis_totals(a)->alloc_calls, 0, "a refused snapshot leaves the session");
        ml_analysis_free(a);
    }
    uint8_t *copy = malloc(len);
    unsigned seed = 12345;
    int refused = 0;
    for (int i = 0; i < 2000; i++) {
        memcpy(copy, data, len);
        seed = seed * 1103515245u + 12345u;
        copy[(seed >> 8) % len] ^= (uint8_t)(1u << ((seed >> 4) & 7));
        cr_assert_eq(ml_analysis_new(&a), 0);
        if (ml_analysis_restore(a, copy, len, err, sizeof err) < 0) {
            refused++;
        } else {
            ml_build_opts_t bo = {.no_symbols = true};
            cr_expect_eq(ml_analysis_build(a, &bo, err, sizeof err), 0, "%s", err);
        }
        ml_analysis_free(a);
    }
    cr_expect_gt(refused, 100, "only %d of 2000 damaged snapshots were refused", refused);
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_expect_eq(ml_analysis_restore(a, data, len, err, sizeof err), 0, "%s", err);
    ml_analysis_free(a);
    free(copy);
    free(data);
}

/* `memlens dump` says what the trace ends with. */
Test(snapshot, dump_names_it) {
    char trace[4096];
    snprintf(trace, sizeof trace, "%s", h_tmp("dump.mlt"));
    record(trace, (const char *[]){"fx_leaks", NULL});
    const char *argv[] = {h_bin("memlens"), "dump", trace, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *line = strstr(r.out, "# analysis snapshot: ");
    cr_expect(line && strstr(line, " bytes, version 8\n"), "%.200s", line ? line : "(none)");
    cr_expect(strstr(r.out, " end "), "the end record comes before it");
    h_run_free(&r);
}

/* `memlens run --no-snapshot`: no snapshot, and the report (a replay) is
 * the one the snapshot gives. */
Test(snapshot, no_snapshot_option) {
    char with[4096], without[4096], a[4200], b[4200];
    snprintf(with, sizeof with, "%s", h_tmp("with.mlt"));
    snprintf(without, sizeof without, "%s", h_tmp("without.mlt"));
    record(with, (const char *[]){"fx_frag", "alternate", NULL});
    const char *argv[] = {h_bin("memlens"), "run", "-q", "--no-snapshot", "-o", without, "--",
                          h_bin("fx_frag"), "alternate", NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    const char *dump[] = {h_bin("memlens"), "dump", without, NULL};
    h_run(&r, dump);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(!strstr(r.out, "# analysis snapshot"), "no snapshot was asked for");
    h_run_free(&r);
    ml_analysis_t *s;
    char err[512];
    cr_assert_eq(ml_analysis_new(&s), 0);
    cr_assert_eq(ml_analysis_load_ex(s, without, ML_LOAD_SNAPSHOT, err, sizeof err), 0, "%s", err);
    cr_expect(!ml_analysis_from_snapshot(s));
    ml_analysis_free(s);
    snprintf(a, sizeof a, "%s.json", with);
    snprintf(b, sizeof b, "%s.json", without);
    free(report(with, NULL, "--json", a));
    free(report(without, NULL, "--json", b));
    char *x = h_read_file(a), *y = h_read_file(b);
    cr_assert(x && y);
    /* Two runs of a deterministic program: the same numbers (the pid,
     * times and paths differ, so compare what fx_frag is about). */
    const char *keys[] = {"\"page_utilization\": ", "\"alloc_calls\": ", "\"leaked_bytes\": ", NULL};
    for (int i = 0; keys[i]; i++) {
        const char *p = strstr(x, keys[i]), *q = strstr(y, keys[i]);
        cr_assert(p && q, "%s", keys[i]);
        cr_expect_eq(strtod(p + strlen(keys[i]), NULL), strtod(q + strlen(keys[i]), NULL), "%s", keys[i]);
    }
    free(x);
    free(y);
}

/* Many stacks with small numbers: the bound on the stack count that
 * restore derives from the bytes left must not refuse them. */
Test(snapshot, many_small_stacks_restore) {
    ml_analysis_t *a;
    cr_assert_eq(ml_analysis_new(&a), 0);
    ml_record_t r;
    for (uint32_t i = 1; i <= 5000; i++) {
        memset(&r, 0, sizeof r);
        r.tag = ML_T_NODE;
        r.u.node.id = i;
        r.u.node.parent = 0;
        r.u.node.pc = 0x1000 + i;
        ml_analysis_feed(a, &r);
        memset(&r, 0, sizeof r);
        r.tag = ML_T_ALLOC;
        r.u.alloc.kind = ML_KIND_MALLOC;
        r.u.alloc.size = 1;
        r.u.alloc.usable = 1;
        r.u.alloc.stack = i;
        r.u.alloc.ptr = 0x10000 + 16 * (uint64_t)i;
        ml_analysis_feed(a, &r);
        memset(&r, 0, sizeof r);
        r.tag = ML_T_FREE;
        r.u.alloc.kind = ML_KIND_FREE;
        r.u.alloc.ptr = 0x10000 + 16 * (uint64_t)i;
        ml_analysis_feed(a, &r);
    }
    void *data;
    size_t len;
    cr_assert_eq(ml_analysis_snapshot(a, &data, &len), 0);
    ml_analysis_free(a);
    char err[512] = "";
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_expect_eq(ml_analysis_restore(a, data, len, err, sizeof err), 0, "%s (%zu bytes)", err, len);
    cr_expect_eq(ml_analysis_totals(a)->alloc_calls, 5000);
    ml_analysis_free(a);
    free(data);
}

/* ------------------------------------------------------------------------- */
/* GPU state                                                                 */
/* ------------------------------------------------------------------------- */

/* The GPU side of a restored session, query by query, equals the replay's:
 * every device (peak, kinds, fragmentation, size classes, leaks), its
 * timeline, every site in every order, the advice. */
static void expect_same_gpu(const ml_analysis_t *s, const ml_analysis_t *r) {
    const ml_gpu_t *gs = ml_analysis_gpu(s), *gr = ml_analysis_gpu(r);
    cr_assert(gs && gr, "GPU state: snapshot %p, replay %p", (void *)gs, (void *)gr);
    cr_expect_eq(memcmp(ml_gpu_summary(gs), ml_gpu_summary(gr), sizeof(ml_gpu_summary_t)), 0,
                 "the GPU summaries differ");
    size_t nd = ml_gpu_device_count(gr);
    cr_assert_eq(ml_gpu_device_count(gs), nd);
    for (size_t i = 0; i < nd; i++) {
        cr_expect_eq(memcmp(ml_gpu_device(gs, i), ml_gpu_device(gr, i), sizeof(ml_gpu_device_t)), 0,
                     "device %zu differs", i);
        const ml_gpu_point_t *ps, *pr;
        size_t n = ml_gpu_timeline(gr, i, &pr);
        cr_expect_eq(ml_gpu_timeline(gs, i, &ps), n, "device %zu: timeline lengths", i);
        for (size_t k = 0; k < n; k++) /* field by field: a point has padding */
            cr_expect(ps[k].time_ms == pr[k].time_ms && ps[k].max_bytes == pr[k].max_bytes &&
                          ps[k].last_bytes == pr[k].last_bytes,
                      "device %zu: timelines differ at point %zu", i, k);
        ml_gpu_pool_t qs[16], qr[16];
        size_t np = ml_gpu_pools(gr, i, qr, 16);
        cr_expect_eq(ml_gpu_pools(gs, i, qs, 16), np, "device %zu: pool counts", i);
        for (size_t k = 0; k < np; k++) { /* field by field: a pool has padding */
            const ml_gpu_pool_t *x = &qs[k], *y = &qr[k];
            cr_expect(x->device == y->device && x->address == y->address &&
                          x->explicit_pool == y->explicit_pool && x->imported == y->imported &&
                          x->managed == y->managed &&
                          x->peak_reserved_bytes == y->peak_reserved_bytes &&
                          x->reserved_at_exit_bytes == y->reserved_at_exit_bytes &&
                          x->peak_used_bytes == y->peak_used_bytes &&
                          x->used_at_exit_bytes == y->used_at_exit_bytes &&
                          x->release_threshold_bytes == y->release_threshold_bytes &&
                          x->reserved_at_peak_bytes == y->reserved_at_peak_bytes &&
                          x->used_at_peak_bytes == y->used_at_peak_bytes && x->trims == y->trims &&
                          x->created == y->created && x->destroyed == y->destroyed &&
                          x->allocs == y->allocs && x->releases == y->releases &&
                          x->drops_to_zero == y->drops_to_zero &&
                          x->last_correlation == y->last_correlation,
                      "device %zu: pool %zu differs", i, k);
        }
    }
    ml_gpu_site_t a[256], b[256];
    for (int o = ML_GPU_BY_PEAK; o <= ML_GPU_BY_ALLOCATED; o++) {
        size_t n = ml_gpu_sites(gr, SIZE_MAX, (ml_gpu_order_t)o, b, 256);
        cr_expect_eq(ml_gpu_sites(gs, SIZE_MAX, (ml_gpu_order_t)o, a, 256), n, "order %d", o);
        for (size_t i = 0; i < n; i++) {
            cr_expect(
                a[i].stack == b[i].stack && a[i].kind == b[i].kind && a[i].device == b[i].device &&
                    a[i].peak_bytes == b[i].peak_bytes && a[i].leaked_bytes == b[i].leaked_bytes &&
                    a[i].frees == b[i].frees && a[i].lifetime_ms_sum == b[i].lifetime_ms_sum &&
                    a[i].distinct_sizes == b[i].distinct_sizes && a[i].top_size == b[i].top_size,
                "order %d, site %zu differs", o, i);
            cr_expect_eq(ml_gpu_site_pairs_per_s(gs, &a[i]), ml_gpu_site_pairs_per_s(gr, &b[i]));
        }
    }
    static ml_gpu_suggestion_t x[32], y[32];
    size_t n = ml_gpu_suggest(gr, y, 32);
    cr_expect_eq(ml_gpu_suggest(gs, x, 32), n);
    for (size_t i = 0; i < n; i++) {
        cr_expect_str_eq(x[i].strategy, y[i].strategy);
        cr_expect_str_eq(x[i].message, y[i].message);
        cr_expect_str_eq(x[i].evidence, y[i].evidence);
    }
}

/* Records PROG, checks that the trace has a snapshot whose reports (JSON,
 * folded, text) equal the replay's, and compares the GPU state itself. */
static void expect_same_gpu_reports(const char *name, const char *const *prog,
                                    ml_analysis_t **restored) {
    expect_same_reports(name, prog); /* also: the snapshot is there and used */
    const char *trace = h_tmp(name);
    ml_analysis_t *s, *r;
    char err[512];
    cr_assert_eq(ml_analysis_new(&s), 0);
    cr_assert_eq(ml_analysis_new(&r), 0);
    cr_assert_eq(ml_analysis_load_ex(s, trace, ML_LOAD_SNAPSHOT, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ml_analysis_load_ex(r, trace, 0, err, sizeof err), 0, "%s", err);
    cr_assert(ml_analysis_from_snapshot(s), "%s: GPU traces have a snapshot now", name);
    expect_same_gpu(s, r);
    ml_analysis_free(r);
    if (restored)
        *restored = s;
    else
        ml_analysis_free(s);
}

/* The scenario of test_gpu_e2e: every kind, VMM, a failed free, a context
 * destroyed with memory held. */
Test(snapshot, gpu_events) {
    expect_same_gpu_reports("gpu.mlt", (const char *[]){"fx_gpu_events", NULL}, NULL);
}

/* A training-like run: churn, drains and pool trims, holes, a timeline
 * that halved its resolution, CPU records beside them. The checks on the
 * restored state make sure the comparison covered those. */
Test(snapshot, gpu_busy, .timeout = 60) {
    ml_analysis_t *s;
    expect_same_gpu_reports("gpubusy.mlt", (const char *[]){"fx_gpu_events", "busy", "20000", NULL},
                            &s);
    const ml_gpu_t *g = ml_analysis_gpu(s);
    cr_assert_eq(ml_gpu_device_count(g), 2);
    const ml_gpu_device_t *d = ml_gpu_device(g, 0);
    cr_expect_geq(d->empty_cache_cycles, 3, "%u cycles", d->empty_cache_cycles);
    cr_expect_geq(d->pool_trims, 3);
    cr_expect_eq(d->failed_frees, 1);
    cr_expect_eq(d->unknown_frees, 1);
    cr_expect(d->frag_peak.valid && d->frag_peak.holes > 0, "holes at the peak: %lu",
              (unsigned long)d->frag_peak.holes);
    cr_expect_gt(ml_gpu_device(g, 1)->ctx_destroy_bytes, 0);
    const ml_gpu_point_t *p;
    cr_expect_gt(ml_gpu_timeline(g, 0, &p), 100, "a timeline"); /* how long: the machine's load */
    ml_gpu_suggestion_t x[32];
    size_t n = ml_gpu_suggest(g, x, 32);
    const char *want[] = {"gpu_caching_pool",      "gpu_async_alloc",           "gpu_reuse_pinned",
                          "gpu_avoid_empty_cache", "gpu_checkpoint_or_offload", NULL};
    for (int i = 0; want[i]; i++) {
        bool found = false;
        for (size_t k = 0; k < n; k++)
            found = found || !strcmp(x[k].strategy, want[i]);
        cr_expect(found, "no %s advice", want[i]);
    }
    cr_expect_gt(ml_analysis_totals(s)->alloc_calls, 20000, "the CPU allocations are there too");
    ml_analysis_free(s);
}

#ifdef ML_HAVE_CUPTI_01
/* The same scenario through libmemlens_cupti.so and the fake CUPTI. */
Test(snapshot, gpu_inject) {
    expect_same_gpu_reports(
        "gpuinject.mlt", (const char *[]){"fx_gpu_inject", h_bin("fakecupti/libcupti.so.12"), NULL},
        NULL);
}

/* --gpu-pools: the pools' reserved and used bytes, joined by correlation
 * id, come back from the snapshot as the replay computes them. */
Test(snapshot, gpu_pools) {
    ml_analysis_t *s;
    run_option = "--gpu-pools";
    expect_same_gpu_reports(
        "gpupools.mlt",
        (const char *[]){"fx_gpu_inject", h_bin("fakecupti/libcupti.so.12"), "pools", NULL}, &s);
    run_option = NULL;
    const ml_gpu_t *g = ml_analysis_gpu(s);
    size_t n = 0;
    for (size_t i = 0; i < ml_gpu_device_count(g); i++) n += ml_gpu_device(g, i)->npools;
    cr_expect_gt(n, 0, "the comparison covered pools");
    for (size_t i = 0; i < ml_gpu_device_count(g); i++) {
        ml_gpu_pool_t p[8];
        size_t k = ml_gpu_pools(g, i, p, 8);
        for (size_t j = 0; j < k; j++)
            cr_expect_gt(p[j].peak_reserved_bytes, 0, "pool %zu of device %zu has sizes", j, i);
    }
    ml_analysis_free(s);
}
#endif

static void feed_gpu(ml_analysis_t *a, int tag, uint8_t op, uint8_t kind, int32_t dev, uint32_t ctx,
                     uint64_t ptr, uint64_t size, uint64_t handle, uint32_t stack,
                     uint32_t time_ms) {
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = (uint8_t)tag;
    r.time_ms = time_ms;
    r.u.gpu.op = op;
    r.u.gpu.kind = kind;
    r.u.gpu.device = dev;
    r.u.gpu.context = ctx;
    r.u.gpu.ptr = ptr;
    r.u.gpu.size = size;
    r.u.gpu.handle = handle;
    r.u.gpu.stack = stack;
    ml_analysis_feed(a, &r);
}

/* Records fed by hand, on a clock the test controls: 4000 ms of churn (the
 * timelines halve their resolution twice), devices seen out of order (-1
 * and 3 after 0), drains, trims, holes, a VMM handle released while mapped,
 * a failed free, a context destroyed. The restored state equals the fed
 * one, and so does the GPU JSON. */
Test(snapshot, gpu_fed_records_round_trip) {
    ml_analysis_t *a;
    cr_assert_eq(ml_analysis_new(&a), 0);
    const int A = ML_T_GPU_ALLOC, F = ML_T_GPU_FREE;
    const uint64_t M = 1024 * 1024;
    feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 0, 1, 0x1000000000, 64 * M, 0, 7, 0);
    feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_VMM_RESERVE, 0, 1, 0x7e0000000000, 8 * M, 0, 8, 1);
    feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_VMM_PHYSICAL, 0, 1, 0xabc0, 2 * M, 0, 8, 1);
    feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_VMM_MAP, 0, 1, 0x7e0000000000, 2 * M, 0xabc0, 8, 1);
    feed_gpu(a, F, ML_GPU_OP_FREE, ML_GPU_KIND_VMM_PHYSICAL, 0, 1, 0xabc0, 0, 0, 0, 2);
    feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 3, 4, 0x3000000000, 3 * M, 0, 9, 2);
    feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, -1, 0, 0x4000000000, 1 * M, 0, 9, 2);
    for (uint32_t t = 3; t < 4000; t++) {
        feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 0, 1, 0x2000000000, (t % 5 + 1) * M, 0,
                 10, t);
        feed_gpu(a, F, ML_GPU_OP_FREE, ML_GPU_KIND_DEVICE, 0, 1, 0x2000000000, 0, 0, 0, t);
        feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_ASYNC, 0, 1, 0x2100000000, 4096 * (t % 11 + 1),
                 0, 11, t);
        feed_gpu(a, F, ML_GPU_OP_FREE, ML_GPU_KIND_ASYNC, 0, 1, 0x2100000000, 0, 0, 0, t);
        if (t % 7 == 0) {
            feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_HOST_PINNED, 0, 1, 0x7fff00000000, 65536, 0,
                     12, t);
            feed_gpu(a, F, ML_GPU_OP_FREE, ML_GPU_KIND_HOST_PINNED, 0, 1, 0x7fff00000000, 0, 0, 0,
                     t);
        }
        if (t % 300 == 0) {
            for (uint64_t i = 0; i < 20; i++)
                feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 0, 1, 0x2200000000 + i * 2 * M,
                         M, 0, 13, t);
            for (uint64_t i = 0; i < 20; i += 2)
                feed_gpu(a, F, ML_GPU_OP_FREE, ML_GPU_KIND_DEVICE, 0, 1, 0x2200000000 + i * 2 * M,
                         0, 0, 0, t);
            for (uint64_t i = 1; i < 20; i += 2)
                feed_gpu(a, F, ML_GPU_OP_FREE, ML_GPU_KIND_DEVICE, 0, 1, 0x2200000000 + i * 2 * M,
                         0, 0, 0, t);
            feed_gpu(a, F, ML_GPU_OP_FREE, ML_GPU_KIND_DEVICE, 0, 1, 0x1000000000, 0, 0, 0, t);
            feed_gpu(a, A, ML_GPU_OP_ALLOC, ML_GPU_KIND_DEVICE, 0, 1, 0x1000000000, 64 * M, 0, 7,
                     t);
        }
        if (t % 450 == 0)
            feed_gpu(a, F, ML_GPU_OP_POOL_TRIM, ML_GPU_KIND_POOL, 0, 1, 0, 0, 0x9001, 0, t);
    }
    feed_gpu(a, F, ML_GPU_OP_FREE, ML_GPU_KIND_DEVICE, 0, 1, 0x1000000000, 0, 0, 0, 4000);
    feed_gpu(a, F, ML_GPU_OP_FREE_FAILED, ML_GPU_KIND_DEVICE, 0, 1, 0x1000000000, 0, 0, 0, 4000);
    feed_gpu(a, F, ML_GPU_OP_FREE, ML_GPU_KIND_DEVICE, 0, 1, 0xdead0000, 0, 0, 0, 4001);
    feed_gpu(a, F, ML_GPU_OP_CTX_DESTROY, ML_GPU_KIND_DEVICE, 3, 4, 0, 0, 0, 0, 4002);
    const ml_gpu_t *g = ml_analysis_gpu(a);
    cr_assert_eq(ml_gpu_device_count(g), 3);
    const ml_gpu_point_t *p;
    size_t n = ml_gpu_timeline(g, 1, &p);
    cr_assert(n > 1 && p[1].time_ms - p[0].time_ms >= 4, "the timeline halved twice: %zu points",
              n);
    cr_assert_geq(ml_gpu_device(g, 1)->empty_cache_cycles, 3);

    void *data;
    size_t len;
    cr_assert_eq(ml_analysis_snapshot(a, &data, &len), 0);
    ml_analysis_t *b;
    char err[512];
    cr_assert_eq(ml_analysis_new(&b), 0);
    cr_assert_eq(ml_analysis_restore(b, data, len, err, sizeof err), 0, "%s", err);
    expect_same_gpu(b, a);
    char *ja = NULL, *jb = NULL;
    size_t la, lb;
    FILE *f = open_memstream(&ja, &la);
    ml_report_json_gpu(f, a);
    fclose(f);
    f = open_memstream(&jb, &lb);
    ml_report_json_gpu(f, b);
    fclose(f);
    cr_expect_gt(la, 1000);
    cr_expect_str_eq(jb, ja, "the GPU JSON of the restored session differs");
    /* Saved again, the restored state gives the same bytes. */
    void *again;
    size_t len2;
    cr_assert_eq(ml_analysis_snapshot(b, &again, &len2), 0);
    cr_expect(len2 == len && !memcmp(again, data, len), "a second save differs");
    free(again);
    free(ja);
    free(jb);
    free(data);
    ml_analysis_free(a);
    ml_analysis_free(b);
}

/* The LEB128 bytes of v, as the snapshot writes numbers. */
static size_t leb(uint64_t v, uint8_t *out) {
    size_t n = 0;
    while (v >= 0x80)
        out[n++] = (uint8_t)(v | 0x80), v >>= 7;
    out[n++] = (uint8_t)v;
    return n;
}

static void *gpu_snapshot(const char *name, const char *const *prog, size_t *len, size_t *gpu_at) {
    char trace[4096];
    snprintf(trace, sizeof trace, "%s", h_tmp(name));
    record(trace, prog);
    ml_analysis_t *a;
    char err[512];
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_assert_eq(ml_analysis_load_ex(a, trace, 0, err, sizeof err), 0, "%s", err);
    cr_assert_not_null(ml_analysis_gpu(a));
    void *data;
    cr_assert_eq(ml_analysis_snapshot(a, &data, len), 0);
    ml_analysis_free(a);
    /* The GPU section starts with its magic number, "GPU1". */
    uint8_t m[10];
    size_t k = leb(0x31555047u, m);
    *gpu_at = 0;
    for (size_t i = 0; i + k <= *len && !*gpu_at; i++)
        if (!memcmp((uint8_t *)data + i, m, k)) *gpu_at = i;
    cr_assert_gt(*gpu_at, 0, "the snapshot has a GPU section");
    return data;
}

/* A restored session with GPU state answers every query and writes its
 * GPU JSON (what a report reads) without a fault. */
static void use_gpu(ml_analysis_t *a) {
    char err[512];
    ml_build_opts_t bo = {.no_symbols = true};
    cr_expect_eq(ml_analysis_build(a, &bo, err, sizeof err), 0, "%s", err);
    const ml_gpu_t *g = ml_analysis_gpu(a);
    if (!g) return;
    ml_gpu_site_t sites[64];
    for (size_t i = 0; i < ml_gpu_device_count(g); i++) {
        const ml_gpu_point_t *p;
        ml_gpu_timeline(g, i, &p);
        ml_gpu_sites(g, i, ML_GPU_BY_PEAK, sites, 64);
    }
    ml_gpu_suggestion_t x[16];
    ml_gpu_suggest(g, x, 16);
    FILE *f = fopen("/dev/null", "w");
    ml_report_json_gpu(f, a);
    fclose(f);
}

/* Every prefix of a GPU snapshot, and bits flipped in its GPU section:
 * refused (or, for a flip that keeps it sound, restored and usable), never
 * a crash; ASan builds check the memory side. */
static void damage_gpu_snapshot(const char *name, const char *const *prog, int flips,
                                int min_refused) {
    size_t len, at;
    uint8_t *data = gpu_snapshot(name, prog, &len, &at);
    ml_analysis_t *a;
    char err[512];
    for (size_t n = 0; n < len; n += n < at ? 97 : (n < at + 512 ? 1 : 5)) {
        cr_assert_eq(ml_analysis_new(&a), 0);
        int rc = ml_analysis_restore(a, data, n, err, sizeof err);
        cr_expect_eq(rc, -22, "a prefix of %zu of %zu bytes was accepted", n, len);
        cr_expect(strstr(err, "damaged"), "%s", err);
        cr_expect_null(ml_analysis_gpu(a), "a refused snapshot leaves the session");
        ml_analysis_free(a);
    }
    uint8_t *copy = malloc(len);
    unsigned seed = 4242;
    int refused = 0;
    for (int i = 0; i < flips; i++) {
        memcpy(copy, data, len);
        seed = seed * 1103515245u + 12345u;
        copy[at + (seed >> 8) % (len - at)] ^= (uint8_t)(1u << ((seed >> 4) & 7));
        cr_assert_eq(ml_analysis_new(&a), 0);
        if (ml_analysis_restore(a, copy, len, err, sizeof err) < 0) {
            refused++;
            cr_expect(strstr(err, "damaged"), "%s", err);
        } else {
            use_gpu(a);
        }
        ml_analysis_free(a);
    }
    cr_expect_gt(refused, min_refused, "only %d of %d damaged GPU snapshots were refused", refused,
                 flips);
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_expect_eq(ml_analysis_restore(a, data, len, err, sizeof err), 0, "%s", err);
    cr_expect_not_null(ml_analysis_gpu(a));
    use_gpu(a);
    ml_analysis_free(a);
    free(copy);
    free(data);
}

Test(snapshot, gpu_restore_refuses_damaged_bytes, .timeout = 120) {
    damage_gpu_snapshot("gpurs.mlt", (const char *[]){"fx_gpu_events", NULL}, 3000, 1000);
}

Test(snapshot, gpu_busy_restore_refuses_damaged_bytes, .timeout = 120) {
    damage_gpu_snapshot("gpubusyrs.mlt",
                        (const char *[]){"fx_gpu_events", "busy", "2000", "100", NULL}, 1500, 300);
}

/* Snapshots from before the allocator's own mappings (version 7: "SNP7"),
 * from before the RSS samples' interval (version 5: "SNP5"),
 * from before the live set (version 4: "SNP4", the live heap
 * blocks as a map with slots), from before the process options were saved (version 3: "SNP3",
 * no options), before the kernel's peak RSS was saved (version 2: "SNP2"
 * first and last, no peak RSS) and before the GPU state was saved (version
 * 1: "SNAP", no GPU flag either) still restore; one that claims version 1
 * but carries the GPU flag is refused. */
Test(snapshot, version_1_still_restores) {
    char trace[4096];
    snprintf(trace, sizeof trace, "%s", h_tmp("v1.mlt"));
    record(trace, (const char *[]){"fx_leaks", NULL});
    ml_analysis_t *a;
    char err[512];
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_assert_eq(ml_analysis_load_ex(a, trace, 0, err, sizeof err), 0, "%s", err);
    uint64_t allocs = ml_analysis_totals(a)->alloc_calls, hwm = ml_analysis_totals(a)->hwm_rss_bytes;
    uint64_t unknown_bytes = ml_analysis_totals(a)->unknown_free_bytes;
    cr_assert_gt(hwm, 0, "the trace has the kernel's peak RSS");
    void *data;
    size_t len;
    /* Version 6 ends with the RSS samples' interval; version 5, the same
     * without it, restores with the interval unsaid (0) */
    uint8_t v8[10], v7[10], v6[10], v5[10], v4[10], v3[10], v2[10], v1[10], hb[10], ib[10];
    size_t k = leb(0x34504e53u, v4);
    cr_assert_eq(leb(0x35504e53u, v5), k);
    cr_assert_eq(leb(0x36504e53u, v6), k);
    cr_assert_eq(leb(0x37504e53u, v7), k);
    cr_assert_eq(leb(0x38504e53u, v8), k);
    void *eight;
    size_t len8;
    cr_assert_eq(ml_analysis_snapshot(a, &eight, &len8), 0);
    cr_assert_eq(memcmp(eight, v8, k), 0, "version 8 starts with SNP8");
    /* Version 8 ends with the allocator's own mappings (calls, unmaps,
     * bytes, peak: four zeros, fx_leaks runs on glibc); version 7 is the
     * same without them. */
    static const uint8_t zeros[4];
    cr_assert_eq(memcmp((uint8_t *)eight + len8 - k - 4, zeros, 4), 0, "the allocator's mappings before the end");
    size_t len6 = len8 - 4;
    uint8_t *six = malloc(len6);
    memcpy(six, eight, len6 - k);
    memcpy(six, v7, k);
    memcpy(six + len6 - k, v7, k);
    {
        ml_analysis_t *x8;
        cr_assert_eq(ml_analysis_new(&x8), 0);
        cr_expect_eq(ml_analysis_restore(x8, eight, len8, err, sizeof err), 0, "SNP8: %s", err);
        cr_expect_eq(ml_analysis_totals(x8)->alloc_calls, allocs);
        ml_analysis_free(x8);
        free(eight);
    }
    cr_assert_eq(memcmp(six, v7, k), 0, "version 7 starts with SNP7");
    /* Version 6 has version 7's layout (7 counts a sampled block as its
     * weight: fx_leaks is not sampled, so the numbers are the same). */
    {
        uint8_t *v6copy = malloc(len6);
        memcpy(v6copy, six, len6);
        memcpy(v6copy, v6, k);
        memcpy(v6copy + len6 - k, v6, k);
        ml_analysis_t *x6;
        cr_assert_eq(ml_analysis_new(&x6), 0);
        cr_expect_eq(ml_analysis_restore(x6, v6copy, len6, err, sizeof err), 0, "SNP6: %s", err);
        cr_expect_eq(ml_analysis_totals(x6)->alloc_calls, allocs);
        cr_expect_eq(ml_analysis_totals(x6)->heap_blocks, ml_analysis_totals(a)->heap_blocks);
        ml_analysis_free(x6);
        free(v6copy);
    }
    uint32_t interval = ml_analysis_totals(a)->rss_interval_ms;
    cr_assert(interval == 0 || interval == ML_RSS_SAMPLE_MS, "one process: sampled every %d ms, not %u",
              ML_RSS_SAMPLE_MS, interval);
    size_t ik = leb(interval, ib);
    cr_assert_eq(memcmp((uint8_t *)six + len6 - k - ik, ib, ik), 0, "the interval comes before the end");
    size_t len5 = len6 - ik;
    uint8_t *five = malloc(len5);
    memcpy(five, six, len5 - k);
    memcpy(five, v5, k);
    memcpy(five + len5 - k, v5, k);
    cr_assert_eq(ml_analysis_snapshot_version(a, 4, &data, &len), 0);
    cr_assert_eq(ml_analysis_snapshot_version(a, 3, &data, &len), -22, "only 4 and 8 are written");
    ml_analysis_free(a);
    ml_analysis_t *a6;
    cr_assert_eq(ml_analysis_new(&a6), 0);
    cr_assert_eq(ml_analysis_restore(a6, six, len6, err, sizeof err), 0, "%s", err);
    cr_expect_eq(ml_analysis_totals(a6)->rss_interval_ms, interval);
    ml_analysis_free(a6);
    free(six);
    ml_analysis_t *a4, *a5;
    cr_assert_eq(ml_analysis_new(&a4), 0);
    cr_assert_eq(ml_analysis_new(&a5), 0);
    cr_assert_eq(ml_analysis_restore(a4, data, len, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ml_analysis_restore(a5, five, len5, err, sizeof err), 0, "%s", err);
    cr_expect_eq(ml_analysis_totals(a5)->rss_interval_ms, 0, "version 5 does not say it");
    ml_live_block_t *b4, *b5;
    int64_t n4 = ml_analysis_live_blocks(a4, &b4), n5 = ml_analysis_live_blocks(a5, &b5);
    cr_assert_gt(n4, 0, "fx_leaks leaves blocks live");
    cr_assert_eq(n4, n5);
    cr_expect_eq(memcmp(b4, b5, (size_t)n4 * sizeof *b4), 0, "the same live blocks");
    cr_expect_eq(ml_analysis_totals(a4)->heap_bytes, ml_analysis_totals(a5)->heap_bytes);
    free(b4);
    free(b5);
    free(five);
    ml_analysis_free(a4);
    ml_analysis_free(a5);
    cr_assert_eq(leb(0x33504e53u, v3), k);
    cr_assert_eq(leb(0x32504e53u, v2), k);
    cr_assert_eq(leb(0x50414e53u, v1), k);
    size_t hk = leb(hwm, hb) + 1; /* the mark and its source (one byte) */
    uint8_t *p4 = data;
    cr_assert_eq(memcmp(p4, v4, k), 0, "version 4 starts with SNP4");
    cr_assert_eq(memcmp(p4 + len - k, v4, k), 0, "and ends with it");
    uint8_t ub[10];
    size_t uk = leb(unknown_bytes, ub);
    cr_assert_eq(memcmp(p4 + len - k - uk, ub, uk), 0, "after the unknown frees' bytes");
    cr_assert_eq(p4[len - k - uk - 1], 0, "after the process options (0: not attached)");
    /* The version-3 layout: the same without those two, "SNP3" around it. */
    len -= 1 + uk;
    uint8_t *p = malloc(len);
    memcpy(p, p4, len - k);
    memcpy(p, v3, k);
    memcpy(p + len - k, v3, k);
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_expect_eq(ml_analysis_restore(a, p, len, err, sizeof err), 0, "%s", err);
    cr_expect_eq(ml_analysis_totals(a)->alloc_calls, allocs);
    cr_expect_eq(ml_analysis_totals(a)->hwm_rss_bytes, hwm, "version 3 has the peak RSS");
    ml_analysis_free(a);
    cr_assert_eq(memcmp(p + len - k - hk, hb, hk - 1), 0, "after the peak RSS");
    cr_assert_eq(p[len - k - hk - 1], 0, "after a GPU flag of 0");
    /* The version-2 layout: the same without the peak RSS, "SNP2" around it. */
    size_t len2 = len - hk;
    uint8_t *two = malloc(len2);
    memcpy(two, p, len2 - k);
    memcpy(two, v2, k);
    memcpy(two + len2 - k, v2, k);
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_expect_eq(ml_analysis_restore(a, two, len2, err, sizeof err), 0, "%s", err);
    cr_expect_eq(ml_analysis_totals(a)->alloc_calls, allocs);
    cr_expect_eq(ml_analysis_totals(a)->hwm_rss_source, ML_HWM_NONE, "version 2 knows no peak RSS");
    ml_analysis_free(a);
    /* The version-1 layout: without the GPU flag too, "SNAP" around it. */
    uint8_t *old = malloc(len2);
    memcpy(old, two, len2 - k - 1);
    memcpy(old, v1, k);
    memcpy(old + len2 - k - 1, v1, k);
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_expect_eq(ml_analysis_restore(a, old, len2 - 1, err, sizeof err), 0, "%s", err);
    cr_expect_eq(ml_analysis_totals(a)->alloc_calls, allocs);
    cr_expect_null(ml_analysis_gpu(a));
    ml_analysis_free(a);
    /* Version 1 with the flag left in: not where it should end. */
    memcpy(two, v1, k);
    memcpy(two + len2 - k, v1, k);
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_expect_eq(ml_analysis_restore(a, two, len2, err, sizeof err), -22);
    ml_analysis_free(a);
    free(two);
    free(old);
    free(p);
    free(data);
}
