/* pprof.c - the pprof export: a gzipped profile.proto
 * (perftools.profiles.Profile), read by `go tool pprof`, Pyroscope, Parca,
 * Grafana and speedscope. docs/exports.md lists what each field holds.
 *
 * One sample per allocation site, its locations leaf first (frames[0], the
 * function that called the allocator, is the leaf; the allocator's own
 * frames were removed by the analysis). Six values per sample, in the order
 * of sample_type:
 *
 *   alloc_objects/count  alloc_space/bytes   every allocation of the run
 *   inuse_objects/count  inuse_space/bytes   live at exit (every leak kind)
 *   peak_objects/count   peak_space/bytes    live at the heap's peak
 *
 * The first four are Go's heap profile types, in Go's order, so tools that
 * know heap profiles recognise them; the peak pair is memlens' own and the
 * default (default_sample_type, and the last type for readers that take the
 * last): the peak is what a memory profile of a finished run is read for.
 *
 * Locations. The analysis gives each return address of a stack one frame,
 * or several when functions were inlined there: the inlined ones first,
 * each flagged `inlined`, then the function that holds the code. A pprof
 * Location is one address with all its frames as Lines, innermost first,
 * which is the same order. A site's first location may start inside such a
 * chain (the allocator's inlined frames were cut off), so a location is
 * keyed by its address and its lines, not by the address alone.
 *
 * Mappings come from the module map of the trace (ml_analysis_module), the
 * program first ("mapping[0] will be the main binary"), each with its
 * address range, its build-id in hex and its path. Every module the trace
 * named is listed, used or not.
 *
 * The message is assembled in memory, its fields in field-number order, and
 * gzipped (zlib, level 6, no name and no time in the gzip header, so equal
 * inputs give equal files; its comment says memlens wrote it) onto the
 * stream.
 */
#define _GNU_SOURCE
#include "export_internal.h"
#include "ml_config.h"
#include "ml_outfile.h"
#include "ml_report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* perftools.profiles field numbers (profile.proto). */
enum {
    PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3, PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6, PROFILE_TIME_NANOS = 9,
    PROFILE_DURATION_NANOS = 10, PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12,
    PROFILE_COMMENT = 13, PROFILE_DEFAULT_SAMPLE_TYPE = 14,
    VALUETYPE_TYPE = 1, VALUETYPE_UNIT = 2,
    SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2,
    MAPPING_ID = 1, MAPPING_MEMORY_START = 2, MAPPING_MEMORY_LIMIT = 3, MAPPING_FILE_OFFSET = 4,
    MAPPING_FILENAME = 5, MAPPING_BUILD_ID = 6, MAPPING_HAS_FUNCTIONS = 7,
    MAPPING_HAS_FILENAMES = 8, MAPPING_HAS_LINE_NUMBERS = 9, MAPPING_HAS_INLINE_FRAMES = 10,
    LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3, LOCATION_LINE = 4,
    LINE_FUNCTION_ID = 1, LINE_LINE = 2,
    FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4,
};

#define NVALUES 6
static const char *const value_types[NVALUES][2] = {
    {"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"},
    {"inuse_space", "bytes"},   {"peak_objects", "count"}, {"peak_space", "bytes"},
};

/* A Location's key in the location table is a run of words: its address,
 * its number of lines, then (function id, line number) for each line. Keys
 * are compared whole, so equal keys are equal locations. */
enum { KEY_ADDRESS = 0, KEY_NLINES = 1, KEY_LINES = 2 };

/* What a mapping learned from the locations in it. */
typedef struct {
    bool filenames, lines;
} map_flags_t;

typedef struct {
    const ml_analysis_t *a;
    ml__intern_t strings;   /* the string table; "" is entry 0 */
    ml__intern_t functions; /* key: two uint32 string indexes (name, file) */
    ml__intern_t locations; /* key: see KEY_ADDRESS */
    uint32_t *loc_mapping;  /* mapping id of each location (0: none) */
    uint32_t loc_cap;
    size_t nmods;
    uint32_t *mapping_of_module; /* module index -> mapping id */
    uint32_t *module_of_mapping; /* mapping id - 1 -> module index */
    map_flags_t *mflags;         /* by mapping id - 1 */
    uint64_t *key;               /* scratch for one location's key */
    size_t key_cap;
    uint64_t *ids;               /* scratch for one sample's location ids */
    size_t ids_cap;
    int err;
} pprof_t;

/* The string table's index of s, made valid UTF-8 first (proto3). */
static uint64_t str(pprof_t *p, const char *s) {
    char *tmp;
    const char *v = ml__utf8_valid(s, &tmp);
    int64_t i = v || !s ? ml__intern_str(&p->strings, v) : -1;
    free(tmp);
    if (i < 0) {
        p->err = -ENOMEM;
        return 0;
    }
    return (uint64_t)i;
}

/* ------------------------------------------------------------------------- */
/* Mappings                                                                  */
/* ------------------------------------------------------------------------- */

/* Mapping ids follow the module order, except that the program's own module
 * moves to the front. */
static int number_mappings(pprof_t *p) {
    const ml_process_info_t *pi = ml_analysis_process(p->a);
    p->nmods = ml_analysis_module_count(p->a);
    if (!p->nmods) return 0;
    p->mapping_of_module = calloc(p->nmods, sizeof *p->mapping_of_module);
    p->module_of_mapping = calloc(p->nmods, sizeof *p->module_of_mapping);
    p->mflags = calloc(p->nmods, sizeof *p->mflags);
    if (!p->mapping_of_module || !p->module_of_mapping || !p->mflags) return -ENOMEM;
    size_t main_mod = 0;
    for (size_t i = 0; i < p->nmods; i++) {
        ml_module_t m;
        ml_analysis_module(p->a, i, &m);
        if (pi->exe && m.path && !strcmp(m.path, pi->exe)) {
            main_mod = i;
            break;
        }
    }
    uint32_t id = 1;
    p->module_of_mapping[0] = (uint32_t)main_mod;
    p->mapping_of_module[main_mod] = id++;
    for (size_t i = 0; i < p->nmods; i++) {
        if (i == main_mod) continue;
        p->module_of_mapping[id - 1] = (uint32_t)i;
        p->mapping_of_module[i] = id++;
    }
    return 0;
}

/* The mapping of an address, found among the modules of the frame's module
 * path: the one whose range holds it (the latest such, when a library was
 * loaded twice at one place), else the first of that path. 0: none. */
static uint32_t mapping_of(const pprof_t *p, const char *module, uint64_t address) {
    if (!module) return 0;
    size_t first = SIZE_MAX, hit = SIZE_MAX;
    for (size_t i = 0; i < p->nmods; i++) {
        ml_module_t m;
        ml_analysis_module(p->a, i, &m);
        if (!m.path || strcmp(m.path, module)) continue;
        if (first == SIZE_MAX) first = i;
        if (address >= m.lo && address < m.hi) hit = i;
    }
    if (hit == SIZE_MAX) hit = first;
    return hit == SIZE_MAX ? 0 : p->mapping_of_module[hit];
}

/* ------------------------------------------------------------------------- */
/* Functions and locations                                                   */
/* ------------------------------------------------------------------------- */

static uint64_t function_id(pprof_t *p, const ml_frame_t *f) {
    uint32_t key[2] = {(uint32_t)str(p, f->function), (uint32_t)str(p, f->file)};
    int64_t i = ml__intern(&p->functions, key, sizeof key, NULL);
    if (i < 0) {
        p->err = -ENOMEM;
        return 0;
    }
    return (uint64_t)i + 1;
}

/* The location of frames f[0..n): one address, its frames innermost first.
 * Returns its id (0 on failure, with p->err set). */
static uint64_t location_id(pprof_t *p, const ml_frame_t *f, size_t n) {
    size_t words = KEY_LINES + 2 * n;
    if (words > p->key_cap) {
        size_t cap = words * 2;
        uint64_t *k = realloc(p->key, cap * sizeof *k);
        if (!k) {
            p->err = -ENOMEM;
            return 0;
        }
        p->key = k;
        p->key_cap = cap;
    }
    uint64_t *key = p->key;
    key[KEY_ADDRESS] = f[n - 1].address;
    key[KEY_NLINES] = n;
    for (size_t i = 0; i < n; i++) {
        key[KEY_LINES + 2 * i] = function_id(p, &f[i]);
        key[KEY_LINES + 2 * i + 1] = f[i].line;
    }
    if (p->err) return 0;
    bool added;
    int64_t i = ml__intern(&p->locations, key, words * sizeof *key, &added);
    if (i < 0) {
        p->err = -ENOMEM;
        return 0;
    }
    if (added) {
        if ((uint64_t)i >= p->loc_cap) {
            uint32_t cap = p->loc_cap ? p->loc_cap * 2 : 1024;
            uint32_t *m = realloc(p->loc_mapping, cap * sizeof *m);
            if (!m) {
                p->err = -ENOMEM;
                return 0;
            }
            p->loc_mapping = m;
            p->loc_cap = cap;
        }
        uint32_t mid = mapping_of(p, f[n - 1].module, key[KEY_ADDRESS]);
        p->loc_mapping[i] = mid;
        if (mid) {
            map_flags_t *fl = &p->mflags[mid - 1];
            for (size_t k = 0; k < n; k++) {
                if (f[k].file) fl->filenames = true;
                if (f[k].line) fl->lines = true;
            }
        }
    }
    return (uint64_t)i + 1;
}

/* A site's stack as location ids, leaf first: frames group into locations
 * at each frame that is not inlined into the next one. */
static size_t site_locations(pprof_t *p, const ml_site_t *s) {
    if (s->nframes > p->ids_cap) {
        size_t cap = s->nframes * 2;
        uint64_t *v = realloc(p->ids, cap * sizeof *v);
        if (!v) {
            p->err = -ENOMEM;
            return 0;
        }
        p->ids = v;
        p->ids_cap = cap;
    }
    size_t n = 0, start = 0;
    for (uint32_t k = 0; k < s->nframes; k++) {
        if (s->frames[k].inlined && k + 1 < s->nframes) continue;
        p->ids[n++] = location_id(p, s->frames + start, k + 1 - start);
        start = k + 1;
    }
    return n;
}

/* ------------------------------------------------------------------------- */
/* The profile                                                               */
/* ------------------------------------------------------------------------- */

static uint64_t duration_ms(const ml_totals_t *t) {
    uint64_t d = t->last_time_ms;
    if (t->complete && t->end.duration_ms > d) d = t->end.duration_ms;
    return d;
}

static void value_type(pprof_t *p, ml__pb_t *out, uint32_t field, const char *type,
                       const char *unit, ml__pb_t *msg) {
    ml__pb_clear(msg);
    ml__pb_int(msg, VALUETYPE_TYPE, (int64_t)str(p, type));
    ml__pb_int(msg, VALUETYPE_UNIT, (int64_t)str(p, unit));
    ml__pb_message(out, field, msg);
}

static void hex(char *out, const uint8_t *b, uint32_t n) {
    static const char digits[] = "0123456789abcdef";
    for (uint32_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = 0;
}

/* The comment lines: what ran, what the values mean, and when the trace was
 * sampled or cut short, that the values are estimates or partial. */
static int comments(pprof_t *p, uint64_t *ids, size_t *n) {
    const ml_process_info_t *pi = ml_analysis_process(p->a);
    const ml_totals_t *t = ml_analysis_totals(p->a);
    char *line = NULL;
    size_t len = 0;
    *n = 0;
    FILE *m = open_memstream(&line, &len);
    if (!m) return -ENOMEM;
    fprintf(m, "memlens %s heap profile of", ML_VERSION);
    for (uint32_t i = 0; i < pi->argc; i++) fprintf(m, " %s", pi->argv[i]);
    if (!pi->argc) fprintf(m, " %s", pi->exe ? pi->exe : "?");
    fprintf(m, " (pid %" PRIu32 ")", pi->pid);
    if (fclose(m) != 0) {
        free(line);
        return -ENOMEM;
    }
    ids[(*n)++] = str(p, line);
    free(line);
    char buf[512];
    snprintf(buf, sizeof buf,
             "alloc_*: every allocation of the run (a realloc is one allocation of its new size); "
             "inuse_*: live at exit (leaked and still reachable); peak_*: live at the heap's peak, "
             "%" PRIu32 ".%03" PRIu32 " s into the run",
             t->peak_time_ms / 1000, t->peak_time_ms % 1000);
    ids[(*n)++] = str(p, buf);
    if (t->sample_bytes) {
        snprintf(buf, sizeof buf,
                 "sampled: one allocation recorded per %" PRIu64 " bytes allocated on average "
                 "(a Poisson process over bytes); every value is an unbiased estimate, not a count",
                 t->sample_bytes);
        ids[(*n)++] = str(p, buf);
    }
    if (t->truncated)
        ids[(*n)++] = str(p, "the trace was cut short: the values cover what it holds");
    return 0;
}

static int build(pprof_t *p, ml__pb_t *out) {
    const ml_analysis_t *a = p->a;
    const ml_totals_t *t = ml_analysis_totals(a);
    const ml_process_info_t *pi = ml_analysis_process(a);
    ml__pb_t msg = {0}, sub = {0};
    int rc = number_mappings(p);
    if (rc < 0) return rc;
    str(p, ""); /* string_table[0] must be "" */

    /* 1: sample_type */
    for (int i = 0; i < NVALUES; i++)
        value_type(p, out, PROFILE_SAMPLE_TYPE, value_types[i][0], value_types[i][1], &msg);

    /* 2: sample, one per site */
    size_t nsites;
    const ml_site_t *s = ml_analysis_sites(a, &nsites);
    for (size_t i = 0; i < nsites && !p->err; i++) {
        size_t nloc = site_locations(p, &s[i]);
        uint64_t v[NVALUES] = {s[i].alloc_calls,   s[i].bytes_allocated, s[i].live_at_exit_blocks,
                               s[i].live_at_exit_bytes, s[i].peak_blocks, s[i].peak_bytes};
        ml__pb_clear(&msg);
        ml__pb_packed(&msg, SAMPLE_LOCATION_ID, p->ids, nloc);
        ml__pb_packed(&msg, SAMPLE_VALUE, v, NVALUES);
        ml__pb_message(out, PROFILE_SAMPLE, &msg);
    }

    /* 3: mapping */
    for (uint32_t id = 1; id <= p->nmods && !p->err; id++) {
        ml_module_t m;
        ml_analysis_module(a, p->module_of_mapping[id - 1], &m);
        const map_flags_t *fl = &p->mflags[id - 1];
        char bid[2 * 64 + 1] = "";
        hex(bid, m.build_id, m.build_id_len < 64 ? m.build_id_len : 64);
        ml__pb_clear(&msg);
        ml__pb_uint(&msg, MAPPING_ID, id);
        ml__pb_uint(&msg, MAPPING_MEMORY_START, m.lo);
        ml__pb_uint(&msg, MAPPING_MEMORY_LIMIT, m.hi);
        ml__pb_uint(&msg, MAPPING_FILE_OFFSET, 0);
        ml__pb_int(&msg, MAPPING_FILENAME, (int64_t)str(p, m.path));
        ml__pb_int(&msg, MAPPING_BUILD_ID, (int64_t)str(p, bid));
        /* The analysis names every frame (a placeholder "[module+0x...]"
         * when it has no symbol): pprof is not to symbolize again, in
         * mappings no location uses too. */
        ml__pb_bool(&msg, MAPPING_HAS_FUNCTIONS, true);
        ml__pb_bool(&msg, MAPPING_HAS_FILENAMES, fl->filenames);
        ml__pb_bool(&msg, MAPPING_HAS_LINE_NUMBERS, fl->lines);
        ml__pb_bool(&msg, MAPPING_HAS_INLINE_FRAMES, fl->lines);
        ml__pb_message(out, PROFILE_MAPPING, &msg);
    }

    /* 4: location */
    for (uint32_t i = 0; i < p->locations.n && !p->err; i++) {
        uint32_t len;
        const uint64_t *key = ml__intern_key(&p->locations, i, &len);
        ml__pb_clear(&msg);
        ml__pb_uint(&msg, LOCATION_ID, (uint64_t)i + 1);
        ml__pb_uint(&msg, LOCATION_MAPPING_ID, p->loc_mapping[i]);
        ml__pb_uint(&msg, LOCATION_ADDRESS, key[KEY_ADDRESS]);
        for (uint64_t k = 0; k < key[KEY_NLINES]; k++) {
            ml__pb_clear(&sub);
            ml__pb_uint(&sub, LINE_FUNCTION_ID, key[KEY_LINES + 2 * k]);
            ml__pb_int(&sub, LINE_LINE, (int64_t)key[KEY_LINES + 2 * k + 1]);
            ml__pb_message(&msg, LOCATION_LINE, &sub);
        }
        ml__pb_message(out, PROFILE_LOCATION, &msg);
    }

    /* 5: function. The name memlens shows is the demangled one; it is the
     * system name too, as the mangled one is not kept. */
    for (uint32_t i = 0; i < p->functions.n && !p->err; i++) {
        uint32_t len;
        const uint32_t *key = ml__intern_key(&p->functions, i, &len);
        ml__pb_clear(&msg);
        ml__pb_uint(&msg, FUNCTION_ID, (uint64_t)i + 1);
        ml__pb_int(&msg, FUNCTION_NAME, key[0]);
        ml__pb_int(&msg, FUNCTION_SYSTEM_NAME, key[0]);
        ml__pb_int(&msg, FUNCTION_FILENAME, key[1]);
        ml__pb_message(out, PROFILE_FUNCTION, &msg);
    }

    /* Every string is known once the comments and the period type are in. */
    uint64_t cids[4];
    size_t ncom = 0;
    if (!p->err && (rc = comments(p, cids, &ncom)) < 0) p->err = rc;
    uint64_t heap = str(p, "space"), bytes = str(p, "bytes");
    uint64_t dflt = str(p, value_types[NVALUES - 1][0]);

    /* 6: string_table */
    for (uint32_t i = 0; i < p->strings.n && !p->err; i++) {
        uint32_t len;
        const void *k = ml__intern_key(&p->strings, i, &len);
        ml__pb_bytes(out, PROFILE_STRING_TABLE, k, len);
    }

    /* 9..14 */
    ml__pb_int(out, PROFILE_TIME_NANOS, (int64_t)pi->start_realtime_ns);
    ml__pb_int(out, PROFILE_DURATION_NANOS, (int64_t)(duration_ms(t) * 1000000));
    ml__pb_clear(&msg);
    ml__pb_int(&msg, VALUETYPE_TYPE, (int64_t)heap);
    ml__pb_int(&msg, VALUETYPE_UNIT, (int64_t)bytes);
    ml__pb_message(out, PROFILE_PERIOD_TYPE, &msg);
    /* A recording of every allocation is a sample of every byte. */
    ml__pb_int(out, PROFILE_PERIOD, t->sample_bytes ? (int64_t)t->sample_bytes : 1);
    ml__pb_packed(out, PROFILE_COMMENT, cids, ncom);
    ml__pb_int(out, PROFILE_DEFAULT_SAMPLE_TYPE, (int64_t)dflt);

    rc = p->err ? p->err : msg.err ? msg.err : sub.err ? sub.err : out->err;
    ml__pb_free(&msg);
    ml__pb_free(&sub);
    return rc;
}

/* gzip (RFC 1952) through zlib's deflate onto the stream. */
static int gzip_to(FILE *f, const uint8_t *data, size_t len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    /* windowBits 15 + 16: a gzip header and trailer instead of zlib's. */
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -ENOMEM;
    /* No name, no time; the comment ML_PPROF_GZIP_COMMENT names the file
     * memlens' own, so that writing it again needs no --force
     * (ml_outfile_is_ours). gzip readers skip comments (RFC 1952). */
    gz_header h;
    memset(&h, 0, sizeof h);
    h.os = 3; /* Unix, as zlib writes without a header of ours */
    h.comment = (Bytef *)ML_PPROF_GZIP_COMMENT;
    if (deflateSetHeader(&z, &h) != Z_OK) {
        deflateEnd(&z);
        return -EIO;
    }
    unsigned char buf[1 << 16];
    int rc = 0, zr;
    do {
        size_t chunk = len > (1u << 30) ? (1u << 30) : len;
        z.next_in = (unsigned char *)data;
        z.avail_in = (uInt)chunk;
        data += chunk;
        len -= chunk;
        int flush = len ? Z_NO_FLUSH : Z_FINISH;
        do {
            z.next_out = buf;
            z.avail_out = sizeof buf;
            zr = deflate(&z, flush);
            if (zr == Z_STREAM_ERROR) {
                rc = -EIO;
                break;
            }
            size_t have = sizeof buf - z.avail_out;
            if (have && fwrite(buf, 1, have, f) != have) {
                rc = -(errno ? errno : EIO);
                break;
            }
        } while (z.avail_out == 0);
    } while (!rc && len);
    deflateEnd(&z);
    if (!rc && zr != Z_STREAM_END) rc = -EIO;
    return rc;
}

int ml_report_pprof(FILE *out, const ml_analysis_t *a) {
    pprof_t p = {.a = a};
    ml__intern_init(&p.strings);
    ml__intern_init(&p.functions);
    ml__intern_init(&p.locations);
    ml__pb_t doc = {0};
    int rc = build(&p, &doc);
    if (rc == 0) {
        errno = 0;
        rc = gzip_to(out, doc.p, doc.len);
    }
    if (rc == 0 && (fflush(out) != 0 || ferror(out))) rc = -(errno ? errno : EIO);
    ml__pb_free(&doc);
    ml__intern_destroy(&p.strings);
    ml__intern_destroy(&p.functions);
    ml__intern_destroy(&p.locations);
    free(p.loc_mapping);
    free(p.mapping_of_module);
    free(p.module_of_mapping);
    free(p.mflags);
    free(p.key);
    free(p.ids);
    return rc;
}
