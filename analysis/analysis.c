/* analysis.c - the streaming core: live heap map, totals, peak. */
#include "ml_analysis.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Live block map: open addressing on the block address                      */
/* ------------------------------------------------------------------------- */

typedef struct {
    uint64_t ptr; /* 0: empty; tombstones are avoided by backward-shift deletion */
    uint64_t size;
    uint32_t stack;
    uint32_t time_ms;
} block_t;

typedef struct {
    block_t *e;
    uint64_t cap, count;
} block_map_t;

static inline uint64_t hash_ptr(uint64_t p) {
    p ^= p >> 33;
    p *= 0xff51afd7ed558ccdull;
    p ^= p >> 33;
    return p;
}

static int map_grow(block_map_t *m) {
    uint64_t ncap = m->cap ? m->cap * 2 : 1024;
    block_t *n = calloc(ncap, sizeof *n);
    if (!n) return -ENOMEM;
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!m->e[i].ptr) continue;
        uint64_t j = hash_ptr(m->e[i].ptr) & (ncap - 1);
        while (n[j].ptr) j = (j + 1) & (ncap - 1);
        n[j] = m->e[i];
    }
    free(m->e);
    m->e = n;
    m->cap = ncap;
    return 0;
}

static block_t *map_find(block_map_t *m, uint64_t ptr) {
    if (!m->cap) return NULL;
    for (uint64_t i = hash_ptr(ptr) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->e[i].ptr == ptr) return &m->e[i];
        if (!m->e[i].ptr) return NULL;
    }
}

/* Inserts or replaces; returns the previous block's size through *old (or
 * UINT64_MAX when there was none). */
static int map_put(block_map_t *m, const block_t *b, uint64_t *old) {
    *old = UINT64_MAX;
    if ((m->count + 1) * 4 > m->cap * 3 && map_grow(m) < 0) return -ENOMEM;
    uint64_t i = hash_ptr(b->ptr) & (m->cap - 1);
    while (m->e[i].ptr && m->e[i].ptr != b->ptr) i = (i + 1) & (m->cap - 1);
    if (m->e[i].ptr) *old = m->e[i].size;
    else m->count++;
    m->e[i] = *b;
    return 0;
}

static void map_remove(block_map_t *m, block_t *e) {
    uint64_t mask = m->cap - 1;
    uint64_t i = (uint64_t)(e - m->e);
    m->count--;
    /* Backward-shift deletion keeps probe chains intact without tombstones. */
    for (uint64_t j = (i + 1) & mask; m->e[j].ptr; j = (j + 1) & mask) {
        uint64_t home = hash_ptr(m->e[j].ptr) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->e[i] = m->e[j];
            i = j;
        }
    }
    m->e[i].ptr = 0;
}

/* ------------------------------------------------------------------------- */
/* Session                                                                   */
/* ------------------------------------------------------------------------- */

#define MAX_THREADS_TRACKED 65536

struct ml_analysis_s {
    ml_totals_t t;
    block_map_t heap;
    block_map_t maps;
    uint64_t last_alloc_ptr; /* for temporary allocations */
    bool last_alloc_live;
    /* realloc: the block freed just before, per thread, restored on failure */
    block_t *realloc_stash;
    /* sampled traces: weighted sums behind the integer totals */
    double w_calls, w_bytes, w_reallocs;
};

int ml_analysis_new(ml_analysis_t **out) {
    ml_analysis_t *a = calloc(1, sizeof *a);
    if (!a) return -ENOMEM;
    a->realloc_stash = calloc(MAX_THREADS_TRACKED, sizeof *a->realloc_stash);
    if (!a->realloc_stash) {
        free(a);
        return -ENOMEM;
    }
    *out = a;
    return 0;
}

void ml_analysis_free(ml_analysis_t *a) {
    if (!a) return;
    free(a->heap.e);
    free(a->maps.e);
    free(a->realloc_stash);
    free(a);
}

void ml_analysis_prefetch(const ml_analysis_t *a, uint64_t ptr) {
    if (a->heap.cap) __builtin_prefetch(&a->heap.e[hash_ptr(ptr) & (a->heap.cap - 1)], 1);
}

const ml_totals_t *ml_analysis_totals(const ml_analysis_t *a) {
    return &a->t;
}

static void heap_add(ml_analysis_t *a, const block_t *b) {
    uint64_t old;
    if (map_put(&a->heap, b, &old) < 0) return;
    if (old != UINT64_MAX) a->t.heap_bytes -= old; /* a missed free: replace */
    else a->t.heap_blocks++;
    a->t.heap_bytes += b->size;
    if (a->t.heap_bytes > a->t.peak_bytes) {
        a->t.peak_bytes = a->t.heap_bytes;
        a->t.peak_time_ms = b->time_ms;
    }
}

void ml_analysis_feed(ml_analysis_t *a, const ml_record_t *r) {
    ml_totals_t *t = &a->t;
    if (r->time_ms > t->last_time_ms) t->last_time_ms = r->time_ms;
    switch (r->tag) {
    case ML_T_PROCESS:
        t->sample_bytes = r->u.process.sample_bytes;
        break;
    case ML_T_ALLOC: {
        uint8_t kind = r->u.alloc.kind;
        bool realloc_kind = kind == ML_KIND_REALLOC || kind == ML_KIND_REALLOCARRAY;
        uint64_t size = r->u.alloc.size;
        if ((r->u.alloc.flags & ML_EVF_SAMPLED) && t->sample_bytes) {
            /* A Poisson sample with mean gap T catches an allocation of s
             * bytes with probability 1 - exp(-s/T); weighting each sample by
             * the inverse makes counts and bytes unbiased (tcmalloc's
             * estimator). */
            double w = 1.0 / -expm1(-(double)size / (double)t->sample_bytes);
            a->w_calls += w;
            a->w_bytes += w * (double)size;
            if (realloc_kind) a->w_reallocs += w;
            t->alloc_calls = (uint64_t)llround(a->w_calls);
            t->bytes_allocated = (uint64_t)llround(a->w_bytes);
            t->realloc_calls = (uint64_t)llround(a->w_reallocs);
            size = (uint64_t)llround(w * (double)size);
        } else {
            t->alloc_calls++;
            t->bytes_allocated += size;
            if (realloc_kind) t->realloc_calls++;
        }
        if (kind < ML_KIND_COUNT_) t->calls_by_kind[kind]++;
        block_t b = {r->u.alloc.ptr, size, r->u.alloc.stack, r->time_ms};
        heap_add(a, &b);
        a->last_alloc_ptr = r->u.alloc.ptr;
        a->last_alloc_live = true;
        if (r->thread < MAX_THREADS_TRACKED) a->realloc_stash[r->thread].ptr = 0;
        break;
    }
    case ML_T_FREE: {
        uint8_t kind = r->u.alloc.kind;
        if (kind == ML_KIND_FREE) {
            t->free_calls++;
            t->calls_by_kind[ML_KIND_FREE]++;
        }
        block_t *e = map_find(&a->heap, r->u.alloc.ptr);
        if (!e) {
            t->unknown_frees++;
            break;
        }
        if (kind == ML_KIND_FREE && a->last_alloc_live && a->last_alloc_ptr == r->u.alloc.ptr)
            t->temporary_allocs++;
        if (a->last_alloc_ptr == r->u.alloc.ptr) a->last_alloc_live = false;
        if (kind != ML_KIND_FREE && r->thread < MAX_THREADS_TRACKED)
            a->realloc_stash[r->thread] = *e;
        t->heap_bytes -= e->size;
        t->heap_blocks--;
        map_remove(&a->heap, e);
        break;
    }
    case ML_T_REALLOC_FAIL:
        if (r->thread < MAX_THREADS_TRACKED && a->realloc_stash[r->thread].ptr == r->u.alloc.ptr) {
            heap_add(a, &a->realloc_stash[r->thread]);
            a->realloc_stash[r->thread].ptr = 0;
        }
        break;
    case ML_T_MMAP: {
        uint64_t old;
        if (r->u.alloc.kind == ML_KIND_MMAP) {
            t->mmap_calls++;
            t->calls_by_kind[ML_KIND_MMAP]++;
        } else {
            t->calls_by_kind[ML_KIND_MREMAP]++;
        }
        block_t b = {r->u.alloc.ptr, r->u.alloc.size, r->u.alloc.stack, r->time_ms};
        if (map_put(&a->maps, &b, &old) == 0) {
            if (old != UINT64_MAX) t->mmap_bytes -= old;
            t->mmap_bytes += b.size;
            if (t->mmap_bytes > t->peak_mmap_bytes) t->peak_mmap_bytes = t->mmap_bytes;
        }
        break;
    }
    case ML_T_MUNMAP: {
        if (r->u.alloc.kind == ML_KIND_MUNMAP) {
            t->munmap_calls++;
            t->calls_by_kind[ML_KIND_MUNMAP]++;
        }
        /* Exact unmaps of a recorded mapping; a partial unmap shrinks it from
         * the front or the back. Unmaps of file mappings are not ours. */
        block_t *e = map_find(&a->maps, r->u.alloc.ptr);
        if (!e) break;
        if (r->u.alloc.size >= e->size) {
            t->mmap_bytes -= e->size;
            map_remove(&a->maps, e);
        } else {
            block_t rest = *e;
            t->mmap_bytes -= r->u.alloc.size;
            rest.ptr += r->u.alloc.size;
            rest.size -= r->u.alloc.size;
            map_remove(&a->maps, e);
            uint64_t old;
            map_put(&a->maps, &rest, &old);
        }
        break;
    }
    case ML_T_END:
        t->complete = true;
        t->end = r->u.end;
        break;
    default:
        break;
    }
}

int ml_analysis_load(ml_analysis_t *a, const char *path, char *err, size_t errlen) {
    ml_reader_t *r;
    int rc = ml_reader_open(path, &r, err, errlen);
    if (rc < 0) return rc;
    ml_record_t rec;
    while ((rc = ml_reader_next(r, &rec)) > 0) ml_analysis_feed(a, &rec);
    if (rc < 0) snprintf(err, errlen, "%s: %s", path, ml_reader_error(r));
    a->t.truncated = ml_reader_truncated(r);
    ml_reader_close(r);
    return rc < 0 ? rc : 0;
}

const char *ml_fmt_bytes(uint64_t b, char *buf, size_t len) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (b < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)b);
        return buf;
    }
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}
