/* fuzz_reader.c - libFuzzer harness for the trace reader and everything a
 * trace reaches in the analysis: each input is written to a memfd and read
 * as a .mlt file (header, chunks, zstd, records), every record is printed
 * (the dump) and fed to an analysis session, which is then built without
 * symbols (module paths in a fuzzed trace must not make us open files).
 * Any crash, hang, leak or sanitizer report is a bug.
 *
 * Two kinds of input: a whole file (mutations mostly exercise the chunk
 * layer, since every chunk is compressed and checksummed), or 'R' followed
 * by a chunk's raw record bytes, which the harness compresses into a valid
 * file so that mutations reach the record decoder and the analysis, or 'S'
 * followed by the raw bytes of an analysis snapshot (analysis/snapshot.c),
 * restored into a session that is then built and whose GPU state, if any,
 * is queried as a report would (the seeds include GPU snapshots), or 'A'
 * followed by the raw bytes of saved strategy advice (analysis/advice_cache.c,
 * docs/trace-format.md "The saved advice"): decoded as a report decodes it
 * and, when accepted, written as a report writes it: the JSON report's
 * "suggestions", "policies" and "advisor" (of an empty analysis: they do
 * not read it), the HTML page of that JSON (to stdout, which the harness
 * points at /dev/null), and the viewer's evidence text. Accepted advice must
 * encode back to bytes that decode to the same advice, and its JSON must be
 * JSON (the HTML writer checks). Whole files also go through
 * ml_analysis_load_ex(ML_LOAD_SNAPSHOT): the trailer, the body checksum; and
 * ml_reader_advice: the saved advice, its trailer. */
#define _GNU_SOURCE
#include "advisor_internal.h"
#include "ml_analysis.h"
#include "ml_gpu.h"
#include "ml_report.h"
#include "ml_report_html.h"
#include "ml_trace_io.h"
#include "viewer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the report's GPU section reads. */
static void query_gpu(const ml_gpu_t *g) {
    if (!g) return;
    static ml_gpu_site_t sites[64];
    static ml_gpu_suggestion_t sugg[16];
    for (size_t i = 0; i < ml_gpu_device_count(g); i++) {
        const ml_gpu_point_t *p;
        ml_gpu_timeline(g, i, &p);
        size_t n = ml_gpu_sites(g, i, ML_GPU_BY_PEAK, sites, 64);
        for (size_t k = 0; k < n; k++) (void)ml_gpu_site_pairs_per_s(g, &sites[k]);
    }
    ml_gpu_sites(g, SIZE_MAX, ML_GPU_BY_CHURN, sites, 64);
    ml_gpu_suggest(g, sugg, 16);
}

/* Saved advice, as `memlens report` and `memlens view` read and write it. */
static void fuzz_advice(const uint8_t *data, size_t size, FILE *devnull) {
    static ml_analysis_t *an; /* an empty session: the advice's JSON does not read it */
    if (!an) {
        char err[256];
        ml_build_opts_t o = {.no_symbols = true, .flame_max_nodes = 200};
        if (ml_analysis_new(&an) < 0) return;
        ml_analysis_build(an, &o, err, sizeof err);
    }
    char why[160] = "";
    ml_advice_t *adv = NULL;
    int rc = ml__advice_decode(data, size, &adv, why, sizeof why);
    if (rc < 0) {
        if (rc == -EINVAL && !why[0]) abort(); /* a refusal says why */
        return;
    }
    /* What we read, we write back, and read again the same. */
    void *enc = NULL, *enc2 = NULL;
    size_t len = 0, len2 = 0;
    if (ml__advice_encode(adv, &enc, &len) == 0) {
        ml_advice_t *again = NULL;
        if (ml__advice_decode(enc, len, &again, why, sizeof why) < 0) {
            fprintf(stderr, "fuzz: advice encoded from accepted advice is refused: %s\n", why);
            abort();
        }
        if (ml__advice_encode(again, &enc2, &len2) == 0 && (len2 != len || memcmp(enc, enc2, len)))
            abort(); /* the round trip changed it */
        ml_advice_free(again);
    }
    free(enc);
    free(enc2);
    /* The report: JSON (with the page's frame table), then the HTML page. */
    char *doc = NULL;
    size_t dlen = 0;
    FILE *m = open_memstream(&doc, &dlen);
    if (m) {
        ml_report_opts_t ro = {.trace_path = "fuzz.mlt", .advice = adv, .frame_table = true};
        int jrc = ml_report_json(m, an, &ro);
        fclose(m);
        char err[512];
        if (jrc == 0 && ml_report_html_write_flags(doc, dlen, "-", 0, err, sizeof err) == -EINVAL) {
            fprintf(stderr, "fuzz: %s\n", err);
            abort(); /* the report's JSON is not JSON */
        }
        free(doc);
    }
    /* The viewer's suggestions panel and the evidence it shows. */
    const ml_suggestion_t *s;
    size_t n = ml_advice_suggestions(adv, &s);
    for (size_t i = 0; i < n; i++) {
        ml__evidence_text(devnull, &s[i]);
        ml_report_json_evidence(devnull, &s[i]);
    }
    ml_advice_free(adv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    static FILE *devnull;
    if (fd < 0) {
        fd = memfd_create("mlt", 0);
        if (fd < 0) return 0;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        devnull = fopen("/dev/null", "w");
        /* The HTML page goes to stdout ("-"): nowhere. libFuzzer writes
         * to stderr. */
        int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (nul >= 0 && nul != STDOUT_FILENO) {
            fflush(stdout);
            dup2(nul, STDOUT_FILENO);
            close(nul);
        }
    }
    if (size >= 1 && data[0] == 'A') {
        fuzz_advice(data + 1, size - 1, devnull);
        return 0;
    }
    uint8_t *file = NULL;
    if (size >= 1 && data[0] == 'S') {
        char err[512];
        ml_analysis_t *a;
        if (ml_analysis_new(&a) < 0) return 0;
        if (ml_analysis_restore(a, data + 1, size - 1, err, sizeof err) == 0) {
            ml_build_opts_t o = {.no_symbols = true, .flame_max_nodes = 200};
            ml_analysis_build(a, &o, err, sizeof err);
            query_gpu(ml_analysis_gpu(a));
        }
        ml_analysis_free(a);
        return 0;
    }
    if (size >= 1 && data[0] == 'R' && size - 1 <= ML_CHUNK_MAX_RAW) {
        /* A chunk of raw records: wrap it in a header and a zstd frame. */
        size_t bound = ZSTD_compressBound(size - 1);
        file = malloc(32 + bound);
        if (!file) return 0;
        memcpy(file, ML_TRACE_MAGIC, ML_TRACE_MAGIC_LEN);
        uint8_t v[8] = {ML_TRACE_MAJOR, 0, ML_TRACE_MINOR, 0, 0, 0, 0, 0};
        memcpy(file + 8, v, 8);
        size_t n = ZSTD_compress(file + 32, bound, data + 1, size - 1, 1);
        if (ZSTD_isError(n)) {
            free(file);
            return 0;
        }
        uint32_t h[4] = {ML_CHUNK_MAGIC, (uint32_t)n, (uint32_t)(size - 1), 0};
        memcpy(file + 16, h, 16); /* little-endian host */
        data = file;
        size = 32 + n;
    }
    if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size) {
        free(file);
        return 0;
    }
    free(file);
    char err[512];
    ml_reader_t *r;
    if (ml_reader_open(path, &r, err, sizeof err) < 0) return 0;
    ml_analysis_t *a;
    if (ml_analysis_new(&a) < 0) {
        ml_reader_close(r);
        return 0;
    }
    ml_record_t rec;
    int rc;
    while ((rc = ml_reader_next(r, &rec)) > 0) {
        ml_record_print(devnull, &rec);
        ml_analysis_feed(a, &rec);
    }
    ml_reader_close(r);
    ml_build_opts_t o = {.no_symbols = true, .flame_max_nodes = 200};
    ml_analysis_build(a, &o, err, sizeof err);
    ml_analysis_free(a);
    if (ml_analysis_new(&a) < 0) return 0;
    if (ml_analysis_load_ex(a, path, ML_LOAD_SNAPSHOT, err, sizeof err) == 0)
        ml_analysis_build(a, &o, err, sizeof err);
    ml_analysis_free(a);
    /* The saved advice, as ml_advisor_run_cached reads it (without the
     * records' checksum, which mutations would rarely keep). */
    if (ml_reader_open(path, &r, err, sizeof err) < 0) return 0;
    void *adv = NULL;
    size_t alen = 0;
    uint64_t key = 0, recorded = ml_reader_recorded_size(r);
    uint32_t version = 0;
    if (recorded > size) abort(); /* the recorded part is inside the file */
    if (ml_reader_advice(r, &adv, &alen, &key, &version) == 0) fuzz_advice(adv, alen, devnull);
    free(adv);
    ml_reader_close(r);
    return 0;
}
