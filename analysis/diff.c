/* diff.c - per-site deltas between two built sessions.
 *
 * Sites of two runs are matched by a key made of their frames' function
 * names, innermost first, joined by ';'. Source lines are left out so that
 * an edit that moves code keeps its sites matched; frames without a symbol
 * contribute their module's file name ("[libfoo.so]") instead of an offset
 * that changes with every build. Sites of one run that share a key (same
 * functions, different lines) are summed.
 */
#define _GNU_SOURCE
#include "analysis_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ml_diff_s {
    ml_diff_entry_t *v;
    size_t n, cap;
    char **keys;
};

static char *site_key(const ml_site_t *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return NULL;
    for (uint32_t i = 0; i < s->nframes; i++) {
        const char *fn = s->frames[i].function ? s->frames[i].function : "?";
        if (i) fputc(';', m);
        if (fn[0] == '[') {
            /* "[libfoo.so+0x1234]" -> "[libfoo.so]" */
            const char *plus = strstr(fn, "+0x");
            if (plus) fprintf(m, "%.*s]", (int)(plus - fn), fn);
            else fputs(fn, m);
        } else {
            fputs(fn, m);
        }
    }
    fclose(m);
    return buf;
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int64_t sdelta(uint64_t b, uint64_t n) {
    return (int64_t)n - (int64_t)b;
}

static uint64_t absd(uint64_t b, uint64_t n) {
    return b > n ? b - n : n - b;
}

static int cmp_entry(const void *x, const void *y) {
    const ml_diff_entry_t *a = x, *b = y;
    uint64_t da = absd(a->b.peak_bytes, a->n.peak_bytes) + absd(a->b.leaked_bytes, a->n.leaked_bytes) +
                  absd(a->b.bytes_allocated, a->n.bytes_allocated);
    uint64_t db = absd(b->b.peak_bytes, b->n.peak_bytes) + absd(b->b.leaked_bytes, b->n.leaked_bytes) +
                  absd(b->b.bytes_allocated, b->n.bytes_allocated);
    if (da != db) return da > db ? -1 : 1;
    int64_t ca = sdelta(a->b.alloc_calls, a->n.alloc_calls), cb = sdelta(b->b.alloc_calls, b->n.alloc_calls);
    if (ca < 0) ca = -ca;
    if (cb < 0) cb = -cb;
    if (ca != cb) return ca > cb ? -1 : 1;
    return strcmp(a->key, b->key);
}

int ml_diff_new(const ml_analysis_t *base, const ml_analysis_t *cur, ml_diff_t **out) {
    ml_diff_t *d = calloc(1, sizeof *d);
    if (!d) return -ENOMEM;
    size_t nb, nn;
    const ml_site_t *sb = ml_analysis_sites(base, &nb), *sn = ml_analysis_sites(cur, &nn);
    size_t cap = 16;
    while (cap < (nb + nn) * 2) cap *= 2;
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
            uint64_t j = hash_str(key) & (cap - 1);
            while (slot[j] && strcmp(d->v[slot[j] - 1].key, key)) j = (j + 1) & (cap - 1);
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
            m->leaked_bytes += s[i].leaked_bytes;
            m->alloc_calls += s[i].alloc_calls;
            m->bytes_allocated += s[i].bytes_allocated;
        }
    }
    free(slot);
    qsort(d->v, d->n, sizeof *d->v, cmp_entry);
    *out = d;
    return 0;
}

void ml_diff_free(ml_diff_t *d) {
    if (!d) return;
    if (d->keys)
        for (size_t i = 0; i < d->n; i++) free(d->keys[i]);
    free(d->keys);
    free(d->v);
    free(d);
}

const ml_diff_entry_t *ml_diff_entries(const ml_diff_t *d, size_t *count) {
    *count = d->n;
    return d->v;
}
