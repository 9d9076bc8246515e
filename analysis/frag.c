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

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
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

/* The pages of one region, for its heap map, gathered on the walk that
 * computes everything else: a moment's close walked its blocks twice, the
 * second time for the busiest region alone (on the big heap 19 M blocks,
 * 350 ms of each 900 ms close, while the program waits on a full ring).
 * Blocks come by address and do not overlap, so the pages come in order:
 * a page that holds block starts or ends is one entry with its live bytes,
 * and the whole pages inside a block are one run. A region whose list would
 * pass PG_MAX entries, or whose blocks overlap (a damaged trace), gives up
 * its list; when the busiest region has none, its blocks are walked again
 * as before. The map is the same either way (the cells are whole pages). */
#define PG_MAX (1u << 19) /* 8 MiB: a region of 2 GiB of small blocks */

static void pg_push_new(ml__pg_list_t *l, uint64_t page, uint64_t npages, uint64_t live);

/* Inline for the usual case, a block on the page of the block before (a
 * call per block was a tenth of the walk's instructions on 5 M blocks). */
static inline void pg_push(ml__pg_list_t *l, uint64_t page, uint64_t npages, uint64_t live) {
    if (l->over) return;
    if (l->n && l->v[l->n - 1].npages == 1 && l->v[l->n - 1].page == page && npages == 1) {
        uint64_t sum = l->v[l->n - 1].live + live;
        if (sum > UINT32_MAX) {
            l->over = true;
            return;
        }
        l->v[l->n - 1].live = (uint32_t)sum;
        return;
    }
    pg_push_new(l, page, npages, live);
}

/* A new entry of the list (pg_push). */
static void pg_push_new(ml__pg_list_t *l, uint64_t page, uint64_t npages, uint64_t live) {
    if ((l->n && page < l->v[l->n - 1].page + l->v[l->n - 1].npages) || npages > UINT32_MAX ||
        live > UINT32_MAX) {
        l->over = true; /* out of order: overlapping blocks */
        return;
    }
    if (l->n == l->cap) {
        uint64_t cap = l->cap ? l->cap * 2 : 1024;
        ml__pg_run_t *v = cap <= PG_MAX ? realloc(l->v, cap * sizeof *v) : NULL;
        if (!v) {
            l->over = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (ml__pg_run_t){.page = page, .npages = (uint32_t)npages, .live = (uint32_t)live};
}

/* Block [ptr, e) of `size` bytes (e = ptr + 1 for an empty block). */
__attribute__((always_inline)) static inline void pg_add(ml__pg_list_t *l, uint64_t ptr, uint64_t e, uint64_t size, uint64_t ps,
                   int shift) {
    uint64_t fp = page_of(ptr, ps, shift), lp = page_of(e - 1, ps, shift);
    if (fp == lp) {
        pg_push(l, fp, 1, size ? e - ptr : 0);
        return;
    }
    pg_push(l, fp, 1, (fp + 1) * ps - ptr);
    if (lp > fp + 1) pg_push(l, fp + 1, lp - fp - 1, lp - fp - 1 == 1 ? ps : 0); /* whole pages */
    pg_push(l, lp, 1, e - lp * ps);
}

static void pg_reset(ml__pg_list_t *l) {
    l->n = 0;
    l->over = false;
}

/* The heap map's live and held bytes per cell, from a region's pages. */
static void pg_cells(const ml__pg_list_t *l, uint64_t base, uint64_t cb, uint64_t ps,
                     uint64_t *live, uint64_t *held) {
    uint64_t base_page = base / ps, cell_pages = cb / ps;
    for (uint64_t i = 0; i < l->n; i++) {
        const ml__pg_run_t *r = &l->v[i];
        if (r->npages == 1) {
            uint64_t c = (r->page - base_page) / cell_pages;
            live[c] += r->live;
            held[c] += ps;
            continue;
        }
        for (uint64_t pg = r->page, end = r->page + r->npages; pg < end;) {
            uint64_t c = (pg - base_page) / cell_pages;
            uint64_t cend = base_page + (c + 1) * cell_pages;
            uint64_t upto = end < cend ? end : cend;
            live[c] += (upto - pg) * ps;
            held[c] += (upto - pg) * ps;
            pg = upto;
        }
    }
}

/* The second walk, for a busiest region without a list of its pages. */
static void walk_cells(ml__mstream_t *s, uint64_t base, uint64_t top, uint64_t cb, uint64_t ps,
                       int shift, uint64_t *live, uint64_t *held) {
    bool any_page = false;
    uint64_t last_page = 0;
    cell_cache_t k = {1, 0, 0}; /* empty */
    ml__fblock_t blk;
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
}

/* ML_FRAG_VERIFY=1 in the environment: every heap map made from a page
 * list is made again by the second walk, and stderr says whether the two
 * agree (tests/e2e/test_frag_verify.sh). The walk's cells are kept. */
static void verify_cells(ml__mstream_t *s, uint64_t base, uint64_t top, uint64_t cb, uint64_t ps,
                         int shift, uint32_t ncells, uint64_t *live, uint64_t *held) {
    uint64_t *l2 = calloc(ncells, sizeof *l2), *h2 = calloc(ncells, sizeof *h2);
    if (!l2 || !h2) {
        free(l2);
        free(h2);
        return;
    }
    walk_cells(s, base, top, cb, ps, shift, l2, h2);
    uint32_t c = 0;
    while (c < ncells && l2[c] == live[c] && h2[c] == held[c])
        c++;
    if (c == ncells)
        fprintf(stderr,
                "memlens: ML_FRAG_VERIFY: heap map at 0x%" PRIx64
                ", %u cells: the page list agrees with the walk\n",
                base, ncells);
    else
        fprintf(stderr,
                "memlens: ML_FRAG_VERIFY: heap map at 0x%" PRIx64
                ", cell %u: the page list says %" PRIu64 " live of %" PRIu64
                " held, the walk %" PRIu64 " of %" PRIu64 "\n",
                base, c, live[c], held[c], l2[c], h2[c]);
    memcpy(live, l2, ncells * sizeof *live);
    memcpy(held, h2, ncells * sizeof *held);
    free(l2);
    free(h2);
}

void ml__frag_begin(ml__frag_acc_t *acc, const ml_analysis_t *a, ml_frag_t *f) {
    memset(acc, 0, sizeof *acc);
    memset(f, 0, sizeof *f);
    acc->a = a;
    acc->f = f;
    acc->ps = a->page_size;
    acc->shift = acc->ps && !(acc->ps & (acc->ps - 1)) ? __builtin_ctzll(acc->ps) : -1;
    f->valid = true;
    f->allocator_model = ml__allocator_model(a);
    /* the pages of the region being walked, and of the busiest so far */
    acc->cur = &acc->pl[0];
    acc->best = &acc->pl[1];
    acc->best->over = true;
    acc->cur->over = acc->shift < 0; /* a page size that is not a power of two: the second walk */
}

static void take_best(ml__frag_acc_t *acc) {
    acc->best_live = acc->region_live, acc->best_lo = acc->region_start, acc->best_hi = acc->end;
    ml__pg_list_t *t = acc->best;
    acc->best = acc->cur, acc->cur = t;
}

__attribute__((always_inline)) static inline void frag_add(ml__frag_acc_t *acc, const ml__fblock_t *b) {
    ml_frag_t *f = acc->f;
    const uint64_t ps = acc->ps;
    const int shift = acc->shift;
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
    uint64_t from = acc->any_page && acc->last_page >= fp ? acc->last_page + 1 : fp;
    if (from <= lp) {
        f->pages += lp - from + 1;
        acc->last_page = lp;
        acc->any_page = true;
    }
    /* (b) regions and gaps */
    if (acc->n == 0 || b->ptr >= acc->end + REGION_GAP) {
        if (acc->n > 0) {
            f->span_bytes += acc->end - acc->region_start;
            if (acc->region_live > acc->best_live) take_best(acc);
        }
        f->regions++;
        acc->region_start = b->ptr;
        acc->region_live = 0;
        acc->end = e;
        pg_reset(acc->cur);
        acc->cur->over = shift < 0;
    } else if (b->ptr > acc->end) {
        uint64_t gap = b->ptr - acc->end;
        f->free_bytes += gap;
        f->gaps++;
        if (gap > f->largest_free_bytes) f->largest_free_bytes = gap;
    } else if (b->ptr < acc->end) {
        acc->cur->over = true; /* overlapping blocks */
    }
    pg_add(acc->cur, b->ptr, e, b->size, ps, shift);
    acc->region_live += b->size;
    if (e > acc->end) acc->end = e;
    acc->n++;
}

void ml__frag_add(ml__frag_acc_t *acc, const ml__fblock_t *b) {
    frag_add(acc, b);
}

void ml__frag_add_ends(ml__frag_acc_t *acc, const ml__eblock_t *v, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        ml__fblock_t b = ml__fblock_make(v[i].ptr, ml__size48(v[i].size), (uint16_t)v[i].slack);
        frag_add(acc, &b);
    }
}

void ml__frag_end(ml__frag_acc_t *acc, ml__mstream_t *s, int8_t **cells) {
    ml_frag_t *f = acc->f;
    const uint64_t ps = acc->ps;
    const int shift = acc->shift;
    if (acc->n) {
        f->span_bytes += acc->end - acc->region_start;
        if (acc->region_live > acc->best_live || acc->best_hi == 0) take_best(acc);
    }
    f->page_bytes = f->pages * ps;
    f->page_utilization = f->page_bytes ? (double)f->live_bytes / (double)f->page_bytes : 1.0;
    f->external = f->free_bytes ? 1.0 - (double)f->largest_free_bytes / (double)f->free_bytes : 0;
    f->internal_waste_bytes = f->usable_bytes > f->live_bytes ? f->usable_bytes - f->live_bytes : 0;
    f->internal_ratio =
        f->usable_bytes ? (double)f->internal_waste_bytes / (double)f->usable_bytes : 0;

    /* Heap map of the busiest region. */
    *cells = NULL;
    uint64_t *live = NULL, *held = NULL;
    int8_t *out = NULL;
    if (!acc->n || acc->best_hi <= acc->best_lo) goto done;
    uint64_t base = acc->best_lo / ps * ps, top = (acc->best_hi + ps - 1) / ps * ps;
    uint64_t npages = (top - base) / ps;
    uint64_t cell_pages = (npages + ML_HEAP_MAP_CELLS - 1) / ML_HEAP_MAP_CELLS;
    if (!cell_pages) cell_pages = 1;
    uint64_t cb = cell_pages * ps;
    uint32_t ncells = (uint32_t)((top - base + cb - 1) / cb);
    live = calloc(ncells, sizeof *live), held = calloc(ncells, sizeof *held);
    out = malloc(ncells);
    if (!live || !held || !out) {
        free(out);
        goto done;
    }
    if (acc->best->over) {
        walk_cells(s, base, top, cb, ps, shift, live, held);
    } else {
        pg_cells(acc->best, base, cb, ps, live, held);
        if (getenv("ML_FRAG_VERIFY")) verify_cells(s, base, top, cb, ps, shift, ncells, live, held);
    }
    for (uint32_t c = 0; c < ncells; c++) {
        if (!held[c]) {
            out[c] = -1;
            continue;
        }
        uint64_t pct = (live[c] * 100 + held[c] / 2) / held[c];
        out[c] = (int8_t)(pct > 100 ? 100 : pct);
    }
    f->map_base = base;
    f->map_cell_bytes = cb;
    f->map_ncells = ncells;
    f->map_cells = out;
    *cells = out;
done:
    free(live);
    free(held);
    free(acc->pl[0].v);
    free(acc->pl[1].v);
    acc->pl[0].v = acc->pl[1].v = NULL;
}

void ml__frag_compute(const ml_analysis_t *a, ml__mstream_t *s, ml_frag_t *f, int8_t **cells) {
    ml__frag_acc_t acc;
    ml__frag_begin(&acc, a, f);
    ml__fblock_t b;
    while (ml__mstream_next(s, &b))
        ml__frag_add(&acc, &b);
    ml__frag_end(&acc, s, cells);
}

/* ML_FRAG_VERIFY: a moment closed in the joint walk against its own walk
 * (the stream of its blocks alone, rewound). */
static void verify_moment(const ml_analysis_t *a, ml__mstream_t *st, const ml_frag_t *f) {
    ml_frag_t g;
    int8_t *cells = NULL;
    ml__mstream_rewind(st);
    ml__frag_compute(a, st, &g, &cells);
    bool same = f->live_bytes == g.live_bytes && f->live_blocks == g.live_blocks &&
                f->pages == g.pages && f->free_bytes == g.free_bytes &&
                f->largest_free_bytes == g.largest_free_bytes && f->gaps == g.gaps &&
                f->regions == g.regions && f->span_bytes == g.span_bytes &&
                f->usable_bytes == g.usable_bytes &&
                f->usable_measured_blocks == g.usable_measured_blocks &&
                f->map_base == g.map_base && f->map_cell_bytes == g.map_cell_bytes &&
                f->map_ncells == g.map_ncells &&
                (!f->map_ncells ||
                 (f->map_cells && cells && !memcmp(f->map_cells, cells, f->map_ncells)));
    fprintf(stderr,
            "memlens: ML_FRAG_VERIFY: the moment at event %" PRIu64 ", %" PRIu64
            " blocks: the joint walk %s its own walk\n",
            st->m->seq, g.live_blocks, same ? "agrees with" : "DIFFERS from");
    free(cells);
}

/* Two moments in one walk of the live set: each live block goes to the
 * moments it was live at (allocated by then), and each moment's graveyard
 * is merged in by address as ml__mstream_next merges it, so each moment
 * gets its blocks in the order, and with the result, of its own walk. */
/* The joint walk over the live set (cur, which it frees) and the two
 * moments' graveyard streams g (which it closes). */
static void frag_walk2(const ml_analysis_t *a, ml__live_cursor_t *cur, ml__mstream_t g[2], uint64_t seq0,
                       uint64_t seq1, ml_frag_t f[2], int8_t *cells[2]) {
    ml__frag_acc_t acc[2];
    ml__frag_begin(&acc[0], a, &f[0]);
    ml__frag_begin(&acc[1], a, &f[1]);
    uint64_t max_seq = seq0 > seq1 ? seq0 : seq1;
    ml__fblock_t lb;
    uint64_t seq;
    bool have = ml__live_next_fblock_seq(cur, max_seq, &lb, &seq);
    for (;;) {
        for (int k = 0; k < 2; k++)
            while (g[k].gi < g[k].ng && (!have || g[k].g[g[k].gi].ptr <= lb.ptr))
                ml__frag_add(&acc[k], &g[k].g[g[k].gi++]);
        if (!have) break;
        if (seq <= seq0) ml__frag_add(&acc[0], &lb);
        if (seq <= seq1) ml__frag_add(&acc[1], &lb);
        have = ml__live_next_fblock_seq(cur, max_seq, &lb, &seq);
    }
    /* Each moment's own stream (for a heap map without a page list, and
     * ML_FRAG_VERIFY): its graveyard and the walk's directory, shared. */
    bool verify = getenv("ML_FRAG_VERIFY") != NULL;
    for (int k = 0; k < 2; k++) {
        g[k].cur = *cur;
        ml__mstream_rewind(&g[k]);
        ml__frag_end(&acc[k], &g[k], &cells[k]);
        if (verify) verify_moment(a, &g[k], &f[k]);
        g[k].cur.pages = NULL; /* cur's */
        ml__mstream_close(&g[k]);
    }
    ml__live_cursor_free(cur);
}

int ml__frag_compute2(const ml_analysis_t *a, ml__moment_t *m[2], ml_frag_t f[2],
                      int8_t *cells[2]) {
    ml__live_cursor_t cur;
    if (ml__live_cursor_init(&cur, &a->heap) < 0) return -ENOMEM;
    /* from here on nothing fails: the moments give up their graveyards */
    ml__mstream_t g[2];
    ml__mstream_take_graves(&g[0], m[0]);
    ml__mstream_take_graves(&g[1], m[1]);
    frag_walk2(a, &cur, g, m[0]->seq, m[1]->seq, f, cells);
    return 0;
}

int ml__frag_compute2_keep(const ml_analysis_t *a, const ml__moment_t *m[2], ml_frag_t f[2],
                           int8_t *cells[2]) {
    ml__mstream_t g[2];
    if (ml__mstream_copy_graves(&g[0], m[0]) < 0) return -ENOMEM;
    if (ml__mstream_copy_graves(&g[1], m[1]) < 0) {
        free(g[0].g);
        return -ENOMEM;
    }
    ml__live_cursor_t cur;
    if (ml__live_cursor_init(&cur, &a->heap) < 0) {
        free(g[0].g);
        free(g[1].g);
        return -ENOMEM;
    }
    frag_walk2(a, &cur, g, m[0]->seq, m[1]->seq, f, cells);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Pinned pages per site (blocks live at the end; .stack holds the site)     */
/* ------------------------------------------------------------------------- */

static void page_flush(ml__pin_acc_t *c, ml_site_t *sites) {
    if (!c->open) return;
    for (uint32_t i = 0; i < c->nsites; i++) {
        sites[c->sites[i]].pinned_pages++;
        if (c->live * 4 < c->ps) sites[c->sites[i]].sparse_pinned_pages++;
    }
    c->open = false;
    c->nsites = 0;
    c->live = 0;
}

static void page_add(ml__pin_acc_t *c, uint64_t page, uint64_t bytes, uint32_t site, ml_site_t *sites) {
    if (c->open && c->page != page) page_flush(c, sites);
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

void ml__pin_begin(ml__pin_acc_t *c, const ml_analysis_t *a) {
    memset(c, 0, sizeof *c);
    c->ps = a->page_size;
    c->shift = c->ps && !(c->ps & (c->ps - 1)) ? __builtin_ctzll(c->ps) : -1;
}

static inline void pin_add(ml__pin_acc_t *c, uint64_t ptr, uint64_t size, uint32_t site, ml_site_t *sites) {
    const uint64_t ps = c->ps;
    uint64_t e = ptr + (size ? size : 1);
    if (e < ptr) e = UINT64_MAX;
    uint64_t fp = page_of(ptr, ps, c->shift), lp = page_of(e - 1, ps, c->shift);
    if (fp == lp) {
        /* The usual case: the page and the site of the block before. */
        if (c->open && c->page == fp && c->nsites && c->sites[c->nsites - 1] == site) {
            c->live += size;
            return;
        }
        page_add(c, fp, size, site, sites);
        return;
    }
    page_add(c, fp, (fp + 1) * ps - ptr, site, sites);
    page_flush(c, sites);
    if (lp > fp + 1) sites[site].pinned_pages += (uint32_t)(lp - fp - 1); /* full pages */
    page_add(c, lp, e - lp * ps, site, sites);
}

void ml__pin_add_ends(ml__pin_acc_t *c, const ml_analysis_t *a, const ml__eblock_t *v, uint32_t n,
                      ml_site_t *sites) {
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = a->stats[v[i].stack < a->nstats ? v[i].stack : 0].site;
        if (s != UINT32_MAX) pin_add(c, v[i].ptr, v[i].size, s, sites);
    }
}

void ml__pin_end(ml__pin_acc_t *c, ml_site_t *sites) {
    page_flush(c, sites);
    free(c->sites);
    c->sites = NULL;
}
