/* diff.c - per-site deltas between two built sessions.
 *
 * Sites of two runs are matched by a key made of their frames' function
 * names, innermost first, joined by ';' (a ';' or a backslash in a name is
 * escaped by a backslash). Source lines are left out so that
 * an edit that moves code keeps its sites matched; frames without a symbol
 * contribute their module's file name ("[libfoo.so]") instead of an offset
 * that changes with every build, and frames in no module (a JIT's code:
 * node's, the JVM's; its address changes with every run) contribute "[?]".
 * Sites of one run that share a key (same functions, different lines) are
 * summed.
 *
 * GPU sites are matched with the same key, built from their symbolized
 * stacks (ml_gpu_stack_frames), and the same table, with the device ordinal
 * as part of the match: a site that moves to another device is gone on one
 * and new on the other. The kinds of a stack are summed, so that code that
 * switches from cudaMalloc to cudaMallocAsync keeps its site.
 */
#define _GNU_SOURCE
#include "analysis_internal.h"
#include "ml_gpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ml_diff_s {
    ml_diff_entry_t *v;
    size_t n, cap;
    char **keys;
    ml_diff_gpu_device_t *gdev;
    size_t ngdev;
    ml_diff_gpu_entry_t *gv;
    size_t ngv;
    char **gkeys;
};

/* n bytes of a name, with the key's separator ';' and the escape (a
 * backslash) escaped by a backslash: a symbol may hold a ';' (an assembler name such as
 * "leaf;mid"), and "leaf;mid" <- main was one key with leaf <- mid <- main. */
static void put_name(FILE *m, const char *s, size_t n) {
    for (size_t i = 0; i < n && s[i]; i++) {
        if (s[i] == ';' || s[i] == '\\') fputc('\\', m);
        fputc(s[i], m);
    }
}

static char *frames_key(const ml_frame_t *f, size_t nframes) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return NULL;
    for (size_t i = 0; i < nframes; i++) {
        const char *fn = f[i].function ? f[i].function : "?";
        if (i) fputc(';', m);
        if (fn[0] == '[') {
            /* "[libfoo.so+0x1234]" -> "[libfoo.so]"; "[0x7f...]" (no module) -> "[?]" */
            const char *plus = strstr(fn, "+0x");
            if (plus) {
                put_name(m, fn, (size_t)(plus - fn));
                fputc(']', m);
            } else if (ml__frame_in_no_module(&f[i])) {
                fputs("[?]", m);
            } else {
                put_name(m, fn, SIZE_MAX);
            }
        } else {
            put_name(m, fn, SIZE_MAX);
        }
    }
    fclose(m);
    return buf;
}

static char *site_key(const ml_site_t *s) {
    return frames_key(s->frames, s->nframes);
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The match table: open addressing over entry indices + 1, for entries
 * whose keys are keys[] and (GPU only) devices devs[]. Returns the slot that
 * holds (key, device) or the empty slot where it belongs. Not an ml_map
 * (ml_map.h): the key is a string (and a device), compared as text. */
static size_t table_slot(const size_t *slot, size_t cap, char *const *keys, const int32_t *devs,
                         const char *key, int32_t dev) {
    uint64_t h = hash_str(key) ^ (uint64_t)(uint32_t)dev * 0x9e3779b97f4a7c15ull;
    size_t j = h & (cap - 1);
    while (slot[j]) {
        size_t e = slot[j] - 1;
        if ((!devs || devs[e] == dev) && !strcmp(keys[e], key)) break;
        j = (j + 1) & (cap - 1);
    }
    return j;
}

static size_t table_cap(size_t entries) {
    size_t cap = 16;
    while (cap < entries * 2) cap *= 2;
    return cap;
}

static uint64_t absd(uint64_t b, uint64_t n) {
    return b > n ? b - n : n - b;
}

/* a + b, at most UINT64_MAX: the counts come from the traces, and a forged
 * snapshot's can be anything (a sum that wrapped made the order below
 * intransitive, and the signed difference of calls overflowed). */
static uint64_t sat_add(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int cmp_entry(const void *x, const void *y) {
    const ml_diff_entry_t *a = x, *b = y;
    uint64_t da = sat_add(sat_add(absd(a->b.peak_bytes, a->n.peak_bytes), absd(a->b.leaked_bytes, a->n.leaked_bytes)),
                          absd(a->b.bytes_allocated, a->n.bytes_allocated));
    uint64_t db = sat_add(sat_add(absd(b->b.peak_bytes, b->n.peak_bytes), absd(b->b.leaked_bytes, b->n.leaked_bytes)),
                          absd(b->b.bytes_allocated, b->n.bytes_allocated));
    if (da != db) return da > db ? -1 : 1;
    uint64_t ca = absd(a->b.alloc_calls, a->n.alloc_calls), cb = absd(b->b.alloc_calls, b->n.alloc_calls);
    if (ca != cb) return ca > cb ? -1 : 1;
    return strcmp(a->key, b->key);
}

/* ------------------------------------------------------------------------- */
/* GPU                                                                       */
/* ------------------------------------------------------------------------- */

static void gpu_metrics(ml_diff_metrics_t *m, uint64_t peak, uint64_t leaked, uint64_t calls,
                        uint64_t bytes) {
    m->peak_bytes += peak;
    m->leaked_bytes += leaked;
    m->alloc_calls += calls;
    m->bytes_allocated += bytes;
}

/* Every device ordinal of either trace, ascending (a trace has a handful). */
static int gpu_devices(ml_diff_t *d, const ml_analysis_t *base, const ml_analysis_t *cur) {
    const ml_gpu_t *g[2] = {ml_analysis_gpu(base), ml_analysis_gpu(cur)};
    size_t cap = ml_gpu_device_count(g[0]) + ml_gpu_device_count(g[1]);
    if (!cap) return 0;
    d->gdev = calloc(cap, sizeof *d->gdev);
    if (!d->gdev) return -ENOMEM;
    for (int side = 0; side < 2; side++)
        for (size_t i = 0; i < ml_gpu_device_count(g[side]); i++) {
            const ml_gpu_device_t *gd = ml_gpu_device(g[side], i);
            size_t k = 0;
            while (k < d->ngdev && d->gdev[k].device < gd->device) k++;
            if (k == d->ngdev || d->gdev[k].device != gd->device) {
                memmove(&d->gdev[k + 1], &d->gdev[k], (d->ngdev - k) * sizeof *d->gdev);
                memset(&d->gdev[k], 0, sizeof *d->gdev);
                d->gdev[k].device = gd->device;
                d->ngdev++;
            }
            ml_diff_gpu_device_t *e = &d->gdev[k];
            if (side) e->in_cur = true;
            else e->in_base = true;
            gpu_metrics(side ? &e->n : &e->b, gd->peak_bytes, gd->leaked_bytes, gd->alloc_calls,
                        gd->bytes_allocated);
        }
    return 0;
}

static int cmp_gpu_entry(const void *x, const void *y) {
    const ml_diff_gpu_entry_t *a = x, *b = y;
    uint64_t pa = absd(a->b.peak_bytes, a->n.peak_bytes), pb = absd(b->b.peak_bytes, b->n.peak_bytes);
    if (pa != pb) return pa > pb ? -1 : 1;
    uint64_t da = sat_add(absd(a->b.leaked_bytes, a->n.leaked_bytes), absd(a->b.bytes_allocated, a->n.bytes_allocated));
    uint64_t db = sat_add(absd(b->b.leaked_bytes, b->n.leaked_bytes), absd(b->b.bytes_allocated, b->n.bytes_allocated));
    if (da != db) return da > db ? -1 : 1;
    uint64_t ca = absd(a->b.alloc_calls, a->n.alloc_calls), cb = absd(b->b.alloc_calls, b->n.alloc_calls);
    if (ca != cb) return ca > cb ? -1 : 1;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return strcmp(a->key, b->key);
}

/* Frames a GPU stack can resolve to: its depth, and inlined callers. */
#define GPU_KEY_FRAMES (ML_MAX_DEPTH * 2)

/* The GPU sites of both traces, matched by (device, key) in the heap's
 * table. Sites without a stack (or before symbolization) key as
 * "[no stack]", one entry per device. */
static int gpu_sites(ml_diff_t *d, const ml_analysis_t *base, const ml_analysis_t *cur) {
    const ml_analysis_t *an[2] = {base, cur};
    const ml_gpu_t *g[2] = {ml_analysis_gpu(base), ml_analysis_gpu(cur)};
    size_t cnt[2] = {ml_gpu_site_count(g[0]), ml_gpu_site_count(g[1])};
    size_t total = cnt[0] + cnt[1];
    if (!total) return 0;
    int rc = -ENOMEM;
    size_t cap = table_cap(total);
    size_t *slot = calloc(cap, sizeof *slot);
    int32_t *devs = calloc(total, sizeof *devs);
    ml_gpu_site_t *sites = malloc((cnt[0] > cnt[1] ? cnt[0] : cnt[1]) * sizeof *sites);
    ml_frame_t *f = malloc(GPU_KEY_FRAMES * sizeof *f);
    d->gv = calloc(total, sizeof *d->gv);
    d->gkeys = calloc(total, sizeof *d->gkeys);
    if (!slot || !devs || !sites || !f || !d->gv || !d->gkeys) goto out;
    for (int side = 0; side < 2; side++) {
        size_t n = ml_gpu_sites(g[side], SIZE_MAX, ML_GPU_BY_CALLS, sites, cnt[side]);
        for (size_t i = 0; i < n; i++) {
            const ml_gpu_site_t *s = &sites[i];
            size_t nf = s->stack ? ml_gpu_stack_frames(an[side], s->stack, f, GPU_KEY_FRAMES) : 0;
            char *key = nf ? frames_key(f, nf) : strdup("[no stack]");
            if (!key) goto out;
            size_t j = table_slot(slot, cap, d->gkeys, devs, key, s->device);
            ml_diff_gpu_entry_t *e;
            if (!slot[j]) {
                e = &d->gv[d->ngv];
                d->gkeys[d->ngv] = key;
                devs[d->ngv] = s->device;
                e->key = key;
                e->device = s->device;
                slot[j] = ++d->ngv;
            } else {
                e = &d->gv[slot[j] - 1];
                free(key);
            }
            if (side && !e->in_cur) {
                e->in_cur = true;
                e->cur_stack = s->stack;
            } else if (!side && !e->in_base) {
                e->in_base = true;
                e->base_stack = s->stack;
            }
            gpu_metrics(side ? &e->n : &e->b, s->peak_bytes, s->leaked_bytes, s->alloc_calls,
                        s->bytes_allocated);
        }
    }
    qsort(d->gv, d->ngv, sizeof *d->gv, cmp_gpu_entry);
    rc = 0;
out:
    free(slot);
    free(devs);
    free(sites);
    free(f);
    return rc;
}

int ml_diff_new(const ml_analysis_t *base, const ml_analysis_t *cur, ml_diff_t **out) {
    ml_diff_t *d = calloc(1, sizeof *d);
    if (!d) return -ENOMEM;
    size_t nb, nn;
    const ml_site_t *sb = ml_analysis_sites(base, &nb), *sn = ml_analysis_sites(cur, &nn);
    size_t cap = table_cap(nb + nn);
    size_t *slot = malloc(cap * sizeof *slot); /* entry index + 1 */
    d->v = calloc(nb + nn + 1, sizeof *d->v);
    d->keys = calloc(nb + nn + 1, sizeof *d->keys);
    if (!slot || !d->v || !d->keys) {
        free(slot);
        ml_diff_free(d);
        return -ENOMEM;
    }
    memset(slot, 0, cap * sizeof *slot);
    for (int side = 0; side < 2; side++) {
        const ml_site_t *s = side ? sn : sb;
        size_t n = side ? nn : nb;
        for (size_t i = 0; i < n; i++) {
            char *key = site_key(&s[i]);
            if (!key) {
                free(slot);
                ml_diff_free(d);
                return -ENOMEM;
            }
            size_t j = table_slot(slot, cap, d->keys, NULL, key, 0);
            ml_diff_entry_t *e;
            if (!slot[j]) {
                e = &d->v[d->n];
                d->keys[d->n] = key;
                e->key = key;
                slot[j] = ++d->n;
            } else {
                e = &d->v[slot[j] - 1];
                free(key);
            }
            ml_diff_metrics_t *m = side ? &e->n : &e->b;
            if (side) {
                if (!e->cur) e->cur = &s[i];
            } else if (!e->base) {
                e->base = &s[i];
            }
            m->peak_bytes += s[i].peak_bytes;
            /* A suppressed site's leaks are out of the totals and the gate
             * (gate_bytes), so out of its row too: the rows' leaked deltas
             * add up to the total's. Until 2026-12-08 a suppressed leak
             * that grew headed the table while "leaked at exit" stood still. */
            if (!s[i].suppressed) m->leaked_bytes += s[i].leaked_bytes;
            m->alloc_calls += s[i].alloc_calls;
            m->bytes_allocated += s[i].bytes_allocated;
        }
    }
    free(slot);
    qsort(d->v, d->n, sizeof *d->v, cmp_entry);
    int rc = gpu_devices(d, base, cur);
    if (rc == 0) rc = gpu_sites(d, base, cur);
    if (rc < 0) {
        ml_diff_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void ml_diff_free(ml_diff_t *d) {
    if (!d) return;
    if (d->keys)
        for (size_t i = 0; i < d->n; i++) free(d->keys[i]);
    free(d->keys);
    free(d->v);
    if (d->gkeys)
        for (size_t i = 0; i < d->ngv; i++) free(d->gkeys[i]);
    free(d->gkeys);
    free(d->gv);
    free(d->gdev);
    free(d);
}

const ml_diff_entry_t *ml_diff_entries(const ml_diff_t *d, size_t *count) {
    *count = d->n;
    return d->v;
}

const ml_diff_gpu_device_t *ml_diff_gpu_devices(const ml_diff_t *d, size_t *count) {
    *count = d->ngdev;
    return d->gdev;
}

const ml_diff_gpu_entry_t *ml_diff_gpu_entries(const ml_diff_t *d, size_t *count) {
    *count = d->ngv;
    return d->gv;
}

void ml_diff_gpu_leaked(const ml_diff_t *d, uint64_t *base, uint64_t *cur) {
    *base = *cur = 0;
    for (size_t i = 0; i < d->ngdev; i++) {
        *base += d->gdev[i].b.leaked_bytes;
        *cur += d->gdev[i].n.leaked_bytes;
    }
}

/* The file name of an executable's path, without the " (deleted)" that
 * /proc/PID/exe shows for a binary replaced while it ran; its length in *len. */
static const char *exe_name(const char *exe, size_t *len) {
    const char *slash = strrchr(exe, '/');
    const char *name = slash ? slash + 1 : exe;
    size_t n = strlen(name);
    static const char deleted[] = " (deleted)";
    if (n > sizeof deleted - 1 && !strcmp(name + n - (sizeof deleted - 1), deleted)) n -= sizeof deleted - 1;
    *len = n;
    return name;
}

ml_diff_program_t ml_diff_program(const ml_analysis_t *base, const ml_analysis_t *cur) {
    const char *b = ml_analysis_process(base)->exe, *c = ml_analysis_process(cur)->exe;
    if (!b || !*b || !c || !*c) return ML_DIFF_PROGRAM_UNKNOWN;
    size_t bl, cl;
    const char *bn = exe_name(b, &bl), *cn = exe_name(c, &cl);
    return bl == cl && !memcmp(bn, cn, bl) ? ML_DIFF_PROGRAM_SAME : ML_DIFF_PROGRAM_DIFFERENT;
}
