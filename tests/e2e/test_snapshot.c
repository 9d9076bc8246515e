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

static void record(const char *trace, const char *const *prog) {
    const char *argv[16] = {h_bin("memlens"), "run", "-q", "-o", trace, "--"};
    int n = 6;
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
    cr_expect(line && strstr(line, " bytes, version 1\n"), "%.200s", line ? line : "(none)");
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
