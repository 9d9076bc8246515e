/* frag.c - fragmentation of a set of live blocks, from addresses and sizes.
 *
 * Everything here is allocator-agnostic except (c), which estimates the
 * allocator's usable size from its size classes. For a set of blocks sorted
 * by address:
 *
 *  (a) page utilization = live requested bytes / bytes of the pages that hold
 *      at least one live block. A page pinned by one small block counts whole.
 *  (b) regions and gaps: consecutive blocks closer than REGION_GAP belong to
 *      one heap region; the holes between them inside a region are its free
 *      bytes. external = 1 - largest hole / all holes (0: no holes, or one).
 *      A hole of REGION_GAP or more is taken as the boundary between separate
 *      regions (arenas, mmapped chunks, the brk heap), not as free heap.
 *  (c) internal waste = usable size - requested size, summed: the usable
 *      size the recorder got from the allocator (malloc_usable_size) when the
 *      trace has it, else an estimate from the allocator's size classes.
 *  The heap map shows (a) per cell over the region holding the most live
 *  bytes.
 */
#include "analysis_internal.h"

#include <stdlib.h>
#include <string.h>

#define REGION_GAP (1ull << 20)

/* ------------------------------------------------------------------------- */
/* Size classes                                                              */
/* ------------------------------------------------------------------------- */

const char *ml__allocator_model(const ml_analysis_t *a) {
    for (uint32_t i = 0; i < a->nmods; i++) {
        const char *p = a->mods[i].path;
        const char *b = strrchr(p, '/');
        b = b ? b + 1 : p;
        if (!strncmp(b, "libjemalloc", 11)) return "jemalloc";
        if (!strncmp(b, "libtcmalloc", 11)) return "tcmalloc";
        if (!strncmp(b, "libmimalloc", 11)) return "mimalloc";
    }
    return "glibc";
}

uint64_t ml__usable_size(const char *model, uint64_t size) {
    if (!strcmp(model, "glibc")) {
        /* ptmalloc: 16-byte aligned chunks with an 8-byte header whose
         * successor's prev_size field is usable, at least 32 bytes; requests
         * past the default mmap threshold get their own page-rounded mapping
         * with a 16-byte header. */
        if (size + 8 >= (128u << 10)) return ((size + 16 + 4095) & ~4095ull) - 16;
        uint64_t chunk = (size + 8 + 15) & ~15ull;
        if (chunk < 32) chunk = 32;
        return chunk - 8;
    }
    /* jemalloc-style classes (tcmalloc and mimalloc are close): 8, 16, then
     * multiples of 16 up to 128, then four classes per doubling. */
    if (size <= 8) return 8;
    if (size <= 128) return (size + 15) & ~15ull;
    uint32_t lg = 63 - (uint32_t)__builtin_clzll(size - 1); /* floor(log2(size - 1)) */
    uint64_t spacing = 1ull << (lg - 2);
    return (size + spacing - 1) & ~(spacing - 1);
}

/* ------------------------------------------------------------------------- */
/* One moment                                                                */
/* ------------------------------------------------------------------------- */

static uint64_t block_end(const ml__block_t *b) {
    uint64_t e = b->ptr + (b->size ? b->size : 1);
    return e < b->ptr ? UINT64_MAX : e;
}

static uint64_t fblock_end(const ml__fblock_t *b) {
    uint64_t e = b->ptr + (b->size ? b->size : 1);
    return e < b->ptr ? UINT64_MAX : e;
}

/* Divisions per block were a fifth of a moment's close (perf, the big heap):
 * by the page size they are shifts when it is a power of two (always, on
 * Linux), and the heap map's cell is divided out only when a block leaves
 * the cell of the block before (blocks come by address). */
static inline uint64_t page_of(uint64_t x, uint64_t ps, int shift) {
    return shift >= 0 ? x >> shift : x / ps;
}

typedef struct {
    uint64_t lo, hi, c; /* offsets [lo, hi) are cell c */
} cell_cache_t;

static inline uint64_t cell_of(cell_cache_t *k, uint64_t off, uint64_t cb) {
    if (off < k->lo || off >= k->hi) {
        k->c = off / cb;
        k->lo = k->c * cb;
        k->hi = k->lo + cb;
    }
    return k->c;
}

void ml__frag_compute(const ml_analysis_t *a, ml__mstream_t *s, ml_frag_t *f, int8_t **cells) {
    const uint64_t ps = a->page_size;
    const int shift = ps && !(ps & (ps - 1)) ? __builtin_ctzll(ps) : -1;
    memset(f, 0, sizeof *f);
    f->valid = true;
    f->allocator_model = ml__allocator_model(a);
    uint64_t last_page = 0;
    bool any_page = false;
    uint64_t end = 0, region_start = 0, region_live = 0;
    uint64_t best_live = 0, best_lo = 0, best_hi = 0;
    uint64_t n = 0;
    ml__fblock_t blk;
    for (uint64_t i = 0; ml__mstream_next(s, &blk); i++, n++) {
        const ml__fblock_t *b = &blk;
        f->live_bytes += b->size;
        f->live_blocks++;
        if (b->slack != ML__SLACK_UNKNOWN) {
            f->usable_bytes += b->size + b->slack;
            f->usable_measured_blocks++;
        } else {
            f->usable_bytes += ml__usable_size(f->allocator_model, b->size);
        }
        uint64_t e = fblock_end(b);
        /* (a) distinct pages */
        uint64_t fp = page_of(b->ptr, ps, shift), lp = page_of(e - 1, ps, shift);
        uint64_t from = any_page && last_page >= fp ? last_page + 1 : fp;
        if (from <= lp) {
            f->pages += lp - from + 1;
            last_page = lp;
            any_page = true;
        }
        /* (b) regions and gaps */
        if (i == 0 || b->ptr >= end + REGION_GAP) {
            if (i > 0) {
                f->span_bytes += end - region_start;
                if (region_live > best_live)
                    best_live = region_live, best_lo = region_start, best_hi = end;
            }
            f->regions++;
            region_start = b->ptr;
            region_live = 0;
            end = e;
        } else if (b->ptr > end) {
            uint64_t gap = b->ptr - end;
            f->free_bytes += gap;
            f->gaps++;
            if (gap > f->largest_free_bytes) f->largest_free_bytes = gap;
        }
        region_live += b->size;
        if (e > end) end = e;
    }
    if (n) {
        f->span_bytes += end - region_start;
        if (region_live > best_live || best_hi == 0)
            best_live = region_live, best_lo = region_start, best_hi = end;
    }
    f->page_bytes = f->pages * ps;
    f->page_utilization = f->page_bytes ? (double)f->live_bytes / (double)f->page_bytes : 1.0;
    f->external = f->free_bytes ? 1.0 - (double)f->largest_free_bytes / (double)f->free_bytes : 0;
    f->internal_waste_bytes = f->usable_bytes > f->live_bytes ? f->usable_bytes - f->live_bytes : 0;
    f->internal_ratio = f->usable_bytes ? (double)f->internal_waste_bytes / (double)f->usable_bytes : 0;

    /* Heap map of the busiest region. */
    *cells = NULL;
    if (!n || best_hi <= best_lo) return;
    uint64_t base = best_lo / ps * ps, top = (best_hi + ps - 1) / ps * ps;
    uint64_t npages = (top - base) / ps;
    uint64_t cell_pages = (npages + ML_HEAP_MAP_CELLS - 1) / ML_HEAP_MAP_CELLS;
    if (!cell_pages) cell_pages = 1;
    uint64_t cb = cell_pages * ps;
    uint32_t ncells = (uint32_t)((top - base + cb - 1) / cb);
    uint64_t *live = calloc(ncells, sizeof *live), *held = calloc(ncells, sizeof *held);
    int8_t *out = malloc(ncells);
    if (!live || !held || !out) {
        free(live);
        free(held);
        free(out);
        return;
    }
    any_page = false;
    cell_cache_t k = {1, 0, 0}; /* empty */
    ml__mstream_rewind(s);
    while (ml__mstream_next(s, &blk)) {
        const ml__fblock_t *b = &blk;
        if (b->ptr < base || b->ptr >= top) continue;
        uint64_t e = fblock_end(b);
        if (e > top) e = top;
        /* live bytes, split at cell boundaries */
        for (uint64_t p = b->ptr; p < e;) {
            uint64_t c = cell_of(&k, p - base, cb);
            uint64_t ce = base + k.hi;
            uint64_t q = e < ce ? e : ce;
            live[c] += b->size ? q - p : 0;
            p = q;
        }
        /* held pages, each counted once */
        uint64_t fp = page_of(b->ptr, ps, shift), lp = page_of(e - 1, ps, shift);
        uint64_t from = any_page && last_page >= fp ? last_page + 1 : fp;
        for (uint64_t pg = from; pg <= lp;) {
            uint64_t c = cell_of(&k, pg * ps - base, cb);
            uint64_t cend = page_of(base + k.hi, ps, shift); /* first page of the next cell */
            uint64_t upto = lp + 1 < cend ? lp + 1 : cend;
            held[c] += (upto - pg) * ps;
            pg = upto;
        }
        if (from <= lp) {
            last_page = lp;
            any_page = true;
        }
    }
    for (uint32_t c = 0; c < ncells; c++) {
        if (!held[c]) {
            out[c] = -1;
            continue;
        }
        uint64_t pct = (live[c] * 100 + held[c] / 2) / held[c];
        out[c] = (int8_t)(pct > 100 ? 100 : pct);
    }
    free(live);
    free(held);
    f->map_base = base;
    f->map_cell_bytes = cb;
    f->map_ncells = ncells;
    f->map_cells = out;
    *cells = out;
}

/* ------------------------------------------------------------------------- */
/* Pinned pages per site (blocks live at the end; .stack holds the site)     */
/* ------------------------------------------------------------------------- */

typedef struct {
    uint64_t page, live;
    uint32_t *sites;
    uint32_t nsites, cap;
    bool open;
} cur_page_t;

static void page_flush(cur_page_t *c, uint64_t ps, ml_site_t *sites) {
    if (!c->open) return;
    for (uint32_t i = 0; i < c->nsites; i++) {
        sites[c->sites[i]].pinned_pages++;
        if (c->live * 4 < ps) sites[c->sites[i]].sparse_pinned_pages++;
    }
    c->open = false;
    c->nsites = 0;
    c->live = 0;
}

static void page_add(cur_page_t *c, uint64_t page, uint64_t bytes, uint32_t site, uint64_t ps,
                     ml_site_t *sites) {
    if (c->open && c->page != page) page_flush(c, ps, sites);
    if (!c->open) {
        c->open = true;
        c->page = page;
    }
    c->live += bytes;
    for (uint32_t i = 0; i < c->nsites; i++)
        if (c->sites[i] == site) return;
    if (c->nsites == c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 16;
        uint32_t *p = realloc(c->sites, cap * sizeof *p);
        if (!p) return;
        c->sites = p;
        c->cap = cap;
    }
    c->sites[c->nsites++] = site;
}

void ml__frag_pinned(const ml_analysis_t *a, const ml__block_t *v, uint64_t n, ml_site_t *sites) {
    const uint64_t ps = a->page_size;
    cur_page_t c = {0};
    for (uint64_t i = 0; i < n; i++) {
        const ml__block_t *b = &v[i];
        uint32_t s = b->stack;
        if (s == UINT32_MAX) continue;
        uint64_t e = block_end(b);
        uint64_t fp = b->ptr / ps, lp = (e - 1) / ps;
        uint64_t sz = b->size;
        if (fp == lp) {
            page_add(&c, fp, sz, s, ps, sites);
            continue;
        }
        page_add(&c, fp, (fp + 1) * ps - b->ptr, s, ps, sites);
        page_flush(&c, ps, sites);
        if (lp > fp + 1) sites[s].pinned_pages += (uint32_t)(lp - fp - 1); /* full pages */
        page_add(&c, lp, e - lp * ps, s, ps, sites);
    }
    page_flush(&c, ps, sites);
    free(c.sites);
}
