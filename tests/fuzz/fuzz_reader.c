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
 * is queried as a report would (the seeds include GPU snapshots). Whole files also go through
 * ml_analysis_load_ex(ML_LOAD_SNAPSHOT): the trailer, the body checksum. */
#define _GNU_SOURCE
#include "ml_analysis.h"
#include "ml_gpu.h"
#include "ml_trace_io.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    static FILE *devnull;
    if (fd < 0) {
        fd = memfd_create("mlt", 0);
        if (fd < 0) return 0;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        devnull = fopen("/dev/null", "w");
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
    return 0;
}
