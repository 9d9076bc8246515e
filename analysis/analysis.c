/* analysis.c - the streaming pass: live heap map, totals, peak, per-stack
 * statistics, pages, timeline, histograms, threads; and the session's
 * warnings, which every part adds to.
 *
 * Everything here is O(1) per record (amortized hash-map work), and memory
 * is proportional to the live blocks, the distinct stacks and the pages that
 * hold live blocks. Two techniques keep "what was true at the peak"
 * available at the end without a second pass:
 *
 * Lazy per-stack peak snapshots. Each stack remembers the event number of
 * its last change. The peak is reached at an allocation event P. When a
 * stack is about to change at an event after P and its last change was at
 * or before P, its current value is exactly its value at P, so it is copied
 * into peak_bytes first. At the end, stacks that did not change since P copy
 * their current value. A later, higher peak simply moves P; stale snapshots
 * are overwritten the same way. O(1) per event, exact.
 *
 * The graveyard. Fragmentation at the peak needs the addresses of the
 * blocks live at P, long after many of them were freed. Every block carries
 * the event number of its allocation. A block freed after P that was
 * allocated at or before P goes into P's graveyard; a new peak empties it.
 * At the end, the blocks live at P are exactly the live blocks allocated at
 * or before P plus the graveyard. The graveyard never holds more blocks than
 * were live at P. The worst moment (the largest page waste, see pages below)
 * keeps a second graveyard the same way.
 */
#define _GNU_SOURCE
#include "analysis_internal.h"
#include "gpu_internal.h" /* ml__gpu_feed */
#include "ml_map.h"
#include "ml_reach.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */
/* Page map                                                                  */
/*                                                                           */
/* "Pages holding at least one live block" is kept exact at every event: a  */
/* block's first and last page are reference-counted in a hash map; the      */
/* pages strictly between them lie inside the block, so no other live block */
/* can touch them, and they are only counted (`interior`).                   */
/* ------------------------------------------------------------------------- */

ML_MAP_TYPED(regions, ml__region_t, 64)

static void lost(ml_analysis_t *a, bool block);

static ml__region_t *region_get(ml__page_map_t *m, uint64_t key, bool create) {
    if (m->last && m->last->key == key) return m->last;
    ml__region_t *r = regions_find(&m->map, key);
    if (r) return m->last = r;
    if (!create) return NULL;
    uint32_t *cnt = calloc(ML__REGION_PAGES, sizeof *cnt);
    if (!cnt) return NULL;
    bool existed;
    r = regions_put(&m->map, key, &existed); /* may move every region: `last` is set anew */
    if (!r) {
        free(cnt);
        return NULL;
    }
    r->cnt = cnt;
    return m->last = r;
}

static void region_drop(ml__page_map_t *m, ml__region_t *e) {
    free(e->cnt);
    regions_remove(&m->map, e);
    m->last = NULL;
}

/* False when the page could not be counted (out of memory). */
static bool page_inc(ml__page_map_t *m, uint64_t page) {
    ml__region_t *r = region_get(m, page / ML__REGION_PAGES + 1, true);
    if (!r) return false;
    if (r->cnt[page % ML__REGION_PAGES]++ == 0) {
        r->used++;
        m->nonzero++;
    }
    return true;
}

static void page_dec(ml__page_map_t *m, uint64_t page) {
    ml__region_t *r = region_get(m, page / ML__REGION_PAGES + 1, false);
    if (!r || r->cnt[page % ML__REGION_PAGES] == 0) return;
    if (--r->cnt[page % ML__REGION_PAGES] == 0) {
        m->nonzero--;
        if (--r->used == 0) region_drop(m, r);
    }
}

static void pages_block(ml_analysis_t *a, const ml__block_t *b, bool add) {
    uint64_t ps = a->page_size;
    uint64_t size = b->size ? b->size : 1;
    uint64_t fp = b->ptr / ps, lp = (b->ptr + size - 1) / ps;
    if (lp < fp) lp = fp; /* wrapped: a corrupt trace */
    if (add) {
        bool ok = page_inc(&a->pages, fp);
        if (lp != fp) {
            ok &= page_inc(&a->pages, lp);
            a->pages.interior += lp - fp - 1;
        }
        if (!ok) lost(a, false);
    } else {
        page_dec(&a->pages, fp);
        if (lp != fp) {
            page_dec(&a->pages, lp);
            a->pages.interior -= lp - fp - 1;
        }
    }
}

static uint64_t page_waste(const ml_analysis_t *a) {
    uint64_t held = (a->pages.nonzero + a->pages.interior) * (uint64_t)a->page_size;
    return held > a->t.heap_bytes ? held - a->t.heap_bytes : 0;
}

/* ------------------------------------------------------------------------- */
/* Warnings and accessors                                                    */
/* ------------------------------------------------------------------------- */

/* Room for one more warning; false when out of memory. */
static bool warn_room(ml_analysis_t *a) {
    if (a->nwarn < a->warn_cap) return true;
    size_t cap = a->warn_cap ? a->warn_cap * 2 : 8;
    uint8_t *f = realloc(a->warn_built, cap);
    if (!f) return false;
    memset(f + a->warn_cap, 0, cap - a->warn_cap);
    a->warn_built = f;
    char **p = realloc(a->warn, cap * sizeof *p);
    if (!p) return false;
    a->warn = p;
    a->warn_cap = cap;
    return true;
}

static void vwarn(ml_analysis_t *a, bool built, const char *fmt, va_list ap) {
    if (a->nwarn >= 200 || !warn_room(a)) return;
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    for (size_t i = 0; i < a->nwarn; i++)
        if (!strcmp(a->warn[i], buf)) return;
    char *s = strdup(buf);
    if (!s) return;
    a->warn_built[a->nwarn] = built;
    a->warn[a->nwarn++] = s;
}

void ml__warn(ml_analysis_t *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vwarn(a, false, fmt, ap);
    va_end(ap);
}

void ml__warn_built(ml_analysis_t *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vwarn(a, true, fmt, ap);
    va_end(ap);
}

void ml_analysis_warn_report(ml_analysis_t *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vwarn(a, true, fmt, ap);
    va_end(ap);
}

void ml__warn_unbuild(ml_analysis_t *a) {
    size_t k = 0;
    for (size_t i = 0; i < a->nwarn; i++) {
        if (a->warn_built[i]) {
            free(a->warn[i]);
            continue;
        }
        a->warn_built[k] = 0;
        a->warn[k++] = a->warn[i];
    }
    a->nwarn = k;
}

/* Out of memory while feeding: part of a record's effect is lost (a block
 * not tracked, or a stack node, statistics slot, module, thread, page
 * counter or graveyard entry not kept), and the numbers undercount it. It is
 * counted, and one warning says how much: the buffer is taken at the first
 * loss and rewritten in place, so later losses need no memory (it is also
 * exempt from the cap on warnings). A session restored from a snapshot has
 * the collector's warning as text. */
#define LOST_WARNING_LEN 320

static void lost(ml_analysis_t *a, bool block) {
    if (block) a->lost_blocks++;
    else a->lost_other++;
    if (!a->lost_warning && warn_room(a) && (a->lost_warning = calloc(1, LOST_WARNING_LEN))) {
        a->warn_built[a->nwarn] = 0;
        a->warn[a->nwarn++] = a->lost_warning;
    }
    if (a->lost_warning)
        snprintf(a->lost_warning, LOST_WARNING_LEN,
                 "out of memory while analysing: %llu blocks were not tracked (their bytes are "
                 "missing from the live heap, the peak and the leaks) and %llu records were kept "
                 "incompletely (stacks, modules, threads, pages or the peak's blocks); the numbers "
                 "undercount them",
                 (unsigned long long)a->lost_blocks, (unsigned long long)a->lost_other);
}

void ml_analysis_lost(const ml_analysis_t *a, uint64_t *blocks, uint64_t *records) {
    *blocks = a->lost_blocks;
    *records = a->lost_other;
}

size_t ml_analysis_warnings(const ml_analysis_t *a, const char *const **w) {
    *w = (const char *const *)a->warn;
    return a->nwarn;
}

bool ml_analysis_ended_in_window(const ml_analysis_t *a) {
    if (!(a->proc.options & ML_OPT_ATTACHED) || a->t.exited) return false;
    for (size_t i = 0; i < a->nwarn; i++)
        if (!strncmp(a->warn[i], ML_UNTRACED_ENDED_PREFIX, sizeof ML_UNTRACED_ENDED_PREFIX - 1)) return true;
    return false;
}

void ml_analysis_prefetch(const ml_analysis_t *a, uint64_t ptr) {
    ml__live_prefetch(&a->heap, ptr);
}

const ml_totals_t *ml_analysis_totals(const ml_analysis_t *a) {
    return &a->t;
}

bool ml_totals_unjudged(const ml_totals_t *t, ml_unjudged_t *out) {
    ml_unjudged_t u = {NULL, NULL};
    if (t->complete && t->end.status_kind == ML_END_RUNNING)
        u = (ml_unjudged_t){"when recording stopped", "the program was still running"};
    else if (t->complete && t->end.status_kind == ML_END_EXEC)
        u = (ml_unjudged_t){"when the image was replaced by exec", "exec gave its memory back"};
    else if (!t->complete && !t->exited)
        u = (ml_unjudged_t){"when the trace ends",
                            "the trace was cut short before the program's exit was recorded"};
    if (out) *out = u;
    return u.when != NULL;
}

ml_live_split_t ml_analysis_live_split(const ml_analysis_t *a) {
    ml_live_split_t s = {.scanned = a->scan.scanned};
    ml__live_cursor_t cur;
    if (ml__live_cursor_init(&cur, &a->heap) < 0) return s;
    ml__block_t b, *e = &b;
    while (ml__live_next(&cur, e)) {
        if (s.scanned && e->reach == ML_REACH_REACHABLE) {
            s.reachable_bytes += e->size;
            s.reachable_blocks += ml__block_count(a, e->ptr, e->size);
        } else {
            s.lost_bytes += e->size;
            s.lost_blocks += ml__block_count(a, e->ptr, e->size);
        }
    }
    ml__live_cursor_free(&cur);
    return s;
}

const ml_process_info_t *ml_analysis_process(const ml_analysis_t *a) {
    return &a->proc;
}

/* ------------------------------------------------------------------------- */
/* Stacks and modules                                                        */
/* ------------------------------------------------------------------------- */

static int nodes_reserve(ml_analysis_t *a, uint32_t id) {
    if (id < a->node_cap) return 0;
    uint32_t cap = a->node_cap ? a->node_cap : 1024;
    while (cap <= id) cap *= 2;
    uint32_t *np = realloc(a->node_parent, cap * sizeof *np);
    if (np) a->node_parent = np;
    uint64_t *pc = realloc(a->node_pc, cap * sizeof *pc);
    if (pc) a->node_pc = pc;
    int32_t *nm = realloc(a->node_module, cap * sizeof *nm);
    if (nm) a->node_module = nm;
    uint32_t *ns = realloc(a->node_stat, cap * sizeof *ns);
    if (ns) a->node_stat = ns;
    if (!np || !pc || !nm || !ns) return -ENOMEM;
    memset(np + a->node_cap, 0, (cap - a->node_cap) * sizeof *np);
    memset(pc + a->node_cap, 0, (cap - a->node_cap) * sizeof *pc);
    memset(ns + a->node_cap, 0, (cap - a->node_cap) * sizeof *ns);
    for (uint32_t i = a->node_cap; i < cap; i++) nm[i] = -1;
    a->node_cap = cap;
    return 0;
}

static int cmp_loaded(const void *x, const void *y, void *ctx) {
    const ml_analysis_t *a = ctx;
    uint64_t l = a->mods[*(const uint32_t *)x].lo, r = a->mods[*(const uint32_t *)y].lo;
    return l < r ? -1 : l > r;
}

static void loaded_rebuild(ml_analysis_t *a) {
    a->nloaded = 0;
    for (uint32_t i = 0; i < a->nmods; i++)
        if (a->mods[i].loaded) a->loaded_sorted[a->nloaded++] = i;
    qsort_r(a->loaded_sorted, a->nloaded, sizeof *a->loaded_sorted, cmp_loaded, a);
    a->loaded_dirty = false;
}

/* The module that holds pc now; failing that (*loaded false), the last
 * one that ever did, or -1. */
static int32_t module_of(ml_analysis_t *a, uint64_t pc, bool *loaded) {
    if (loaded) *loaded = true;
    if (a->loaded_dirty) loaded_rebuild(a);
    uint32_t lo = 0, hi = a->nloaded;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (a->mods[a->loaded_sorted[mid]].lo <= pc) lo = mid + 1;
        else hi = mid;
    }
    /* Ranges of loaded modules do not overlap, but allow a few for safety. */
    for (uint32_t k = lo; k > 0 && lo - k < 4; k--) {
        const ml__module_t *m = &a->mods[a->loaded_sorted[k - 1]];
        if (pc >= m->lo && pc < m->hi) return (int32_t)a->loaded_sorted[k - 1];
    }
    if (loaded) *loaded = false;
    for (uint32_t i = a->nmods; i > 0; i--)
        if (pc >= a->mods[i - 1].lo && pc < a->mods[i - 1].hi) return (int32_t)(i - 1);
    return -1;
}

#define ML__PENDING_MAX 65536

static void add_node(ml_analysis_t *a, const ml_record_t *r) {
    uint32_t id = r->u.node.id, parent = r->u.node.parent;
    /* Node ids are dense and a parent is interned before its children; a
     * record that breaks this is ignored, which also rules out cycles and
     * absurd allocations from a corrupt trace. */
    if (id == 0 || id > a->nnodes + 65536u) return;
    if (parent >= id) parent = 0;
    if (nodes_reserve(a, id) < 0) {
        lost(a, false);
        return;
    }
    a->node_parent[id] = parent;
    a->node_pc[id] = r->u.node.pc;
    bool loaded;
    a->node_module[id] = module_of(a, r->u.node.pc, &loaded);
    /* No module is loaded there: the recorder takes a stack in an object
     * that dlopen mapped before the scan that records it (after another was
     * unloaded there, its nodes parked: interpose/runtime.c), or one that
     * is never recorded (code made at run time). The module recorded last
     * there, if any, stands in until one is recorded (add_module). */
    if (id >= a->nnodes) a->nnodes = id + 1;
    if (!loaded && a->npending < ML__PENDING_MAX) {
        if (a->npending == a->pending_cap) {
            uint32_t cap = a->pending_cap ? a->pending_cap * 2 : 64;
            uint32_t *v = realloc(a->pending_nodes, cap * sizeof *v);
            if (!v) return; /* the stand-in stays */
            a->pending_nodes = v;
            a->pending_cap = cap;
        }
        a->pending_nodes[a->npending++] = id;
    }
}

static void add_module(ml_analysis_t *a, const ml_record_t *r) {
    for (uint32_t i = 0; i < a->nmods; i++)
        if (a->mods[i].loaded && a->mods[i].base == r->u.module.base) {
            /* The same module reported again (the final scan at exit), or a
             * new one at the same base after an unload we did not see. */
            if (a->mods[i].path && !strcmp(a->mods[i].path, r->u.module.path)) return;
            a->mods[i].loaded = false;
        }
    if (a->nmods == a->mods_cap) {
        uint32_t cap = a->mods_cap ? a->mods_cap * 2 : 32;
        ml__module_t *m = realloc(a->mods, cap * sizeof *m);
        uint32_t *ls = realloc(a->loaded_sorted, cap * sizeof *ls);
        if (m) a->mods = m;
        if (ls) a->loaded_sorted = ls;
        if (!m || !ls) {
            lost(a, false);
            return;
        }
        a->mods_cap = cap;
    }
    ml__module_t *m = &a->mods[a->nmods];
    memset(m, 0, sizeof *m);
    m->path = strdup(r->u.module.path ? r->u.module.path : "");
    if (!m->path) {
        lost(a, false);
        return;
    }
    m->base = r->u.module.base;
    m->lo = UINT64_MAX;
    for (uint32_t i = 0; i < r->u.module.nsegs; i++) {
        uint64_t lo = m->base + r->u.module.segs[i].vaddr;
        uint64_t hi = lo + r->u.module.segs[i].memsz;
        if (lo < m->lo) m->lo = lo;
        if (hi > m->hi) m->hi = hi;
    }
    if (m->lo > m->hi) m->lo = m->hi = m->base;
    if (r->u.module.build_id_len) {
        m->build_id = malloc(r->u.module.build_id_len);
        if (m->build_id) {
            memcpy(m->build_id, r->u.module.build_id, r->u.module.build_id_len);
            m->build_id_len = r->u.module.build_id_len;
        } else {
            lost(a, false);
        }
    }
    m->loaded = true;
    a->nmods++;
    a->loaded_dirty = true;
    for (uint32_t i = 0; i < a->npending;) {
        uint32_t id = a->pending_nodes[i];
        if (a->node_pc[id] >= m->lo && a->node_pc[id] < m->hi) {
            a->node_module[id] = (int32_t)(a->nmods - 1);
            a->pending_nodes[i] = a->pending_nodes[--a->npending];
        } else {
            i++;
        }
    }
}

static void unload_module(ml_analysis_t *a, uint64_t base) {
    for (uint32_t i = 0; i < a->nmods; i++)
        if (a->mods[i].loaded && a->mods[i].base == base) {
            a->mods[i].loaded = false;
            a->loaded_dirty = true;
        }
}

/* The statistics slot of a recorded stack, created on first use. */
static uint32_t stat_of(ml_analysis_t *a, uint32_t stack) {
    if (stack == 0 || stack >= a->nnodes) return 0;
    uint32_t s = a->node_stat[stack];
    if (s) return s;
    if (a->nstats == a->stats_cap) {
        uint32_t cap = a->stats_cap * 2;
        ml__stack_stats_t *p = realloc(a->stats, cap * sizeof *p);
        if (!p) {
            lost(a, false); /* counted under the unknown stack */
            return 0;
        }
        a->stats = p;
        a->stats_cap = cap;
    }
    s = a->nstats++;
    memset(&a->stats[s], 0, sizeof a->stats[s]);
    a->stats[s].node = stack;
    a->stats[s].min_size = UINT64_MAX;
    a->node_stat[stack] = s;
    return s;
}

/* Takes the lazy peak snapshot before a stack's live values change. */
static inline void stat_touch(ml_analysis_t *a, ml__stack_stats_t *st) {
    if (st->last_change <= a->mom[0].seq) {
        st->peak_bytes = st->live_bytes;
        st->peak_blocks = st->live_blocks;
    }
    st->last_change = a->seq;
}

static ml__thread_t *thread_of(ml_analysis_t *a, uint32_t index) {
    if (index >= ML__MAX_THREADS) index = ML__MAX_THREADS - 1;
    if (index >= a->nthreads) {
        uint32_t n = index + 1;
        if (n < a->nthreads * 2) n = a->nthreads * 2;
        if (n > ML__MAX_THREADS) n = ML__MAX_THREADS;
        ml__thread_t *p = realloc(a->threads, n * sizeof *p);
        if (!p) {
            lost(a, false);
            return NULL;
        }
        memset(p + a->nthreads, 0, (n - a->nthreads) * sizeof *p);
        a->threads = p;
        a->nthreads = n;
    }
    return &a->threads[index];
}

/* ------------------------------------------------------------------------- */
/* Timeline                                                                  */
/* ------------------------------------------------------------------------- */

static ml__tl_bucket_t *tl_bucket(ml_analysis_t *a, uint32_t time_ms) {
    /* Most events land in the bucket of the event before. */
    if (a->tl_cur && time_ms >= a->tl_cur_lo && time_ms < a->tl_cur_lo + a->tl_width) return a->tl_cur;
    uint64_t i = time_ms / a->tl_width;
    while (i >= ML_TIMELINE_MAX - 1) {
        /* Halve the resolution: merge neighbours, keeping each pair's
         * largest heap value and its time, so no peak is lost. */
        for (uint32_t j = 0; j < ML_TIMELINE_MAX / 2; j++) {
            ml__tl_bucket_t x = a->tl[2 * j], y = a->tl[2 * j + 1], m = x;
            if (y.used) {
                if (!x.used || y.heap_max > x.heap_max) {
                    m.heap_max = y.heap_max;
                    m.t_max = y.t_max;
                }
                m.rss = x.used && x.rss > y.rss ? x.rss : y.rss;
                m.mmap_max = x.used && x.mmap_max > y.mmap_max ? x.mmap_max : y.mmap_max;
                m.gpu_max = x.used && x.gpu_max > y.gpu_max ? x.gpu_max : y.gpu_max;
                m.calls = y.calls;
                m.used = true;
            }
            a->tl[j] = m;
        }
        memset(&a->tl[ML_TIMELINE_MAX / 2], 0, (ML_TIMELINE_MAX - ML_TIMELINE_MAX / 2) * sizeof a->tl[0]);
        a->tl_width *= 2;
        i = time_ms / a->tl_width;
    }
    ml__tl_bucket_t *b = &a->tl[i];
    a->tl_cur = b;
    a->tl_cur_lo = (uint32_t)i * a->tl_width;
    if (!b->used) {
        b->used = true;
        b->heap_max = a->t.heap_bytes;
        b->t_max = time_ms;
        b->rss = a->t.rss_bytes;
        b->mmap_max = a->t.mmap_bytes;
        b->gpu_max = a->t.gpu_bytes;
        b->calls = a->t.alloc_calls;
    }
    return b;
}

static void tl_update(ml_analysis_t *a, uint32_t time_ms) {
    ml__tl_bucket_t *b = tl_bucket(a, time_ms);
    if (a->t.heap_bytes > b->heap_max) {
        b->heap_max = a->t.heap_bytes;
        b->t_max = time_ms;
    }
    if (a->t.mmap_bytes > b->mmap_max) b->mmap_max = a->t.mmap_bytes;
    if (a->t.rss_bytes > b->rss) b->rss = a->t.rss_bytes;
    if (a->t.gpu_bytes > b->gpu_max) b->gpu_max = a->t.gpu_bytes;
    b->calls = a->t.alloc_calls;
}

/* ------------------------------------------------------------------------- */
/* Moments                                                                   */
/* ------------------------------------------------------------------------- */

static void moment_set(ml_analysis_t *a, ml__moment_t *m, uint32_t time_ms) {
    if (m->closed) {
        int mi = m == &a->mom[0] ? 0 : 1;
        m->closed = false;
        a->snap_frag_set[mi] = false;
        free(a->snap_cells[mi]);
        a->snap_cells[mi] = NULL;
    }
    m->set = true;
    m->seq = a->seq;
    m->ngrave = 0;
    m->time_ms = time_ms;
    m->heap_bytes = a->t.heap_bytes;
    m->heap_blocks = a->t.heap_blocks;
    m->page_waste = page_waste(a);
    m->have_mallinfo = a->have_mallinfo;
    m->mallinfo_time_ms = a->mallinfo_time_ms;
    memcpy(m->mallinfo, a->mallinfo, sizeof m->mallinfo);
    m->have_rss = a->have_rss;
    m->rss_bytes = a->t.rss_bytes;
}

/* Closing a moment. A graveyard can grow to every block live at its moment
 * (a program that frees its heap before exit: 7 M blocks, 24 bytes each, for
 * each of the two moments). Once it holds a sixteenth of the moment's blocks,
 * and at least GRAVE_CLOSE_MIN, the moment's fragmentation is computed at
 * once -- from the live blocks allocated by then plus the graveyard, exactly
 * what the end would compute from them -- and kept as a restored snapshot
 * keeps it (snap_frag); the graveyard is released and later frees leave the
 * moment alone. A new peak (or worst moment) opens it again. A replay of the
 * same records closes it at the same record, so reports from a snapshot and
 * from a replay stay identical; "who pins this cell" at a closed moment is
 * not available, as after a snapshot. Each close walks the live set in
 * address order (live.c) and sorts the graveyard, and at least a sixteenth
 * of the moment's blocks were freed since it was set. A sixteenth, not a
 * quarter as before the live set: the walk needs no sort of the live
 * blocks, and the graveyards stay under 3 bytes per block of the moment
 * (24 bytes a block, two moments) beside the live set's 22 (on the big heap
 * of 19 M blocks, they were 222 MB of the collector's peak).
 *
 * GRAVE_CLOSE_MIN keeps small heaps from closing on every few frees; it was
 * 2^20 until the live set. A close also ends the moment's per-free cost
 * (the graveyard append), so closing early is cheaper as well as smaller:
 * python3-dicts (2.4 M blocks at the peak, freed at exit) appended 1 M
 * blocks to each graveyard and sorted them, a quarter of the collector's
 * time; at 2^16 its collector took 1.25 s instead of 1.7 s and the program
 * waited 0.32 s instead of 0.72 s. The bound per graved free stays the
 * same: a close walks at most 16 blocks per block in the graveyard. */
#define GRAVE_CLOSE_MIN (1u << 16)

static void moment_closed(ml_analysis_t *a, ml__moment_t *m, const ml_frag_t *f, int8_t *cells) {
    int mi = m == &a->mom[0] ? 0 : 1;
    free(a->snap_cells[mi]);
    a->snap_frag[mi] = *f;
    a->snap_cells[mi] = cells;
    a->snap_frag_set[mi] = true;
    m->closed = true;
    free(m->grave);
    m->grave = NULL;
    m->ngrave = m->grave_cap = 0;
}

static uint64_t close_at(const ml__moment_t *m) {
    return m->heap_blocks / 16 > GRAVE_CLOSE_MIN ? m->heap_blocks / 16 : GRAVE_CLOSE_MIN;
}

/* The peak and the worst moment often close within a few thousand frees of
 * each other (a program that frees its heap at the end: on the big heap 19 M
 * blocks, two walks of 500-900 ms each while the program waits on a full
 * ring). So when one closes and the other's graveyard is past half of its
 * own threshold, both close in one walk of the live set. Closing the other
 * early gives the same fragmentation (its blocks are the same, whenever it
 * closes); it only ends its "who pins this cell" (shares.c) sooner. */
static int moment_close(ml_analysis_t *a, ml__moment_t *m) {
    ml__moment_t *o = m == &a->mom[0] ? &a->mom[1] : &a->mom[0];
    if (o->set && !o->closed && o->ngrave > close_at(o) / 2) {
        ml__moment_t *two[2] = {m, o};
        ml_frag_t f[2];
        int8_t *cells[2];
        if (ml__frag_compute2(a, two, f, cells) < 0) return -ENOMEM;
        moment_closed(a, m, &f[0], cells[0]);
        moment_closed(a, o, &f[1], cells[1]);
        return 0;
    }
    ml__live_cursor_t cur;
    if (ml__live_cursor_init(&cur, &a->heap) < 0) return -ENOMEM;
    ml__mstream_t st;
    ml__mstream_take_graves(&st, m);
    st.cur = cur;
    ml_frag_t f = {0};
    int8_t *cells = NULL;
    ml__frag_compute(a, &st, &f, &cells);
    ml__mstream_close(&st);
    moment_closed(a, m, &f, cells);
    return 0;
}

/* b has left the live set already: the graveyards take it first, so that a
 * close on this very free counts it (it closes on the graveyard's
 * close_at + 1st block, as it always did), in both moments before either
 * closes (a close can take the other moment with it). */
static void grave_add(ml_analysis_t *a, ml__moment_t *m, const ml__block_t *b) {
    if (!m->set || m->closed || b->seq > m->seq) return;
    if (m->ngrave == m->grave_cap) {
        uint64_t cap = m->grave_cap ? m->grave_cap * 2 : 256;
        ml__grave_t *p = realloc(m->grave, cap * sizeof *p);
        if (!p) {
            lost(a, false);
            return;
        }
        m->grave = p;
        m->grave_cap = cap;
    }
    m->grave[m->ngrave++] = (ml__grave_t){
        .ptr = b->ptr,
        .size = ml__size48(b->size),
        .slack = b->slack,
        .stack = b->stack,
    };
}

static void graves_check(ml_analysis_t *a) {
    for (int i = 0; i < 2; i++) {
        ml__moment_t *m = &a->mom[i];
        if (m->set && !m->closed && m->ngrave > close_at(m))
            (void)moment_close(a, m); /* out of memory: it stays open */
    }
}

/* A realloc that failed gives its block back: take it out of the graveyards
 * again. Only a block allocated by the moment went in (grave_add); then it
 * is one of the last entries, and the last one at its address: the block
 * stayed the program's, so no block came and went there since, and an
 * earlier block at that address was gone before this one came. */
static void grave_undo(ml__moment_t *m, const ml__block_t *b) {
    if (b->seq > m->seq) return; /* an earlier block at its address may be there */
    for (uint64_t k = 0; k < 64 && k < m->ngrave; k++) {
        ml__grave_t *g = &m->grave[m->ngrave - 1 - k];
        if (g->ptr == b->ptr) {
            *g = m->grave[--m->ngrave];
            return;
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Heap events                                                               */
/* ------------------------------------------------------------------------- */

/* ceil(log2(v)), capped at 63 so that it indexes the 64-bucket histograms
 * (the last bucket takes everything above 2^62; found by tests/fuzz). */
static inline uint32_t log2_bucket(uint64_t v) {
    uint32_t k = v <= 1 ? 0 : 64 - (uint32_t)__builtin_clzll(v - 1);
    return k > 63 ? 63 : k;
}

static void worst_check(ml_analysis_t *a, uint32_t time_ms) {
    uint64_t w = page_waste(a);
    if (w > a->mom[1].page_waste || !a->mom[1].set) moment_set(a, &a->mom[1], time_ms);
}

/* In a sampled trace a block is kept with its weighted size z = w * s
 * (on_alloc), w = 1 / (1 - exp(-s/T)); it stands for w allocations, as its
 * call and its bytes do. The block's counts (live, at the peak, leaked,
 * freed) add w as a whole number, recovered from z alone so that its
 * allocation and its end add and take the same: h(s) = s / (1 -
 * exp(-s/T)) grows with s, and is solved for s by bisection. They added 1
 * per sampled block: 6 blocks "live at the peak" of 6,147 estimated calls
 * and 393,408 estimated bytes of 64-byte blocks (pprof's peak_objects, the
 * JSON's peak_blocks), where the unsampled run had 10,000.
 * The whole number is floor(w), or one more with the chance of w's
 * fraction, drawn from the block's address (the same at its end): a sum
 * over many blocks is then w's sum, give or take the draw's noise. Rounded
 * to the nearest, every block of one size was off the same way: 1,000
 * blocks of 17,900 bytes at --sample 16k (w = 1.5046) counted 1,306 blocks
 * live at exit beside 982 estimated calls (test_analysis
 * `sampled_blocks_of_one_size_count_about_their_calls`).
 * The weight is only as exact as z, a whole number of bytes: for s well
 * below T, h grows by half a byte per byte of s, so s comes back within a
 * byte of the request and w within w/s of its value (1000-byte blocks at
 * --sample 64k: s = 999.46, w = 66.073 for 66.037), the same for every
 * block of that size. Small next to the sampling's own error; the draws add
 * noise of sqrt(n)/2 over n blocks (test_exports.sh allows both). */
uint64_t ml__block_count(const ml_analysis_t *a, uint64_t ptr, uint64_t size) {
    uint64_t period = a->t.sample_bytes;
    if (!period) return 1;
    double t = (double)period, z = (double)size, w;
    if (z <= t + 0.5) {
        w = z; /* s <= 1 byte: w = z / s */
    } else {
        double lo = 1.0, hi = z;
        for (int i = 0; i < 64 && hi - lo > 1e-9 * hi; i++) {
            double mid = (lo + hi) / 2;
            if (mid / -expm1(-mid / t) < z) lo = mid;
            else hi = mid;
        }
        w = z / ((lo + hi) / 2);
    }
    if (!(w > 1)) return 1;
    double whole = floor(w);
    uint64_t h = (ptr ^ 0x5851f42d4c957f2dull) * 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    double u = (double)(h >> 11) * 0x1p-53; /* uniform in [0, 1) */
    return (uint64_t)whole + (u < w - whole ? 1 : 0);
}

/* A block leaves the live set: freed, moved by realloc, or replaced. */
static void block_gone(ml_analysis_t *a, ml__block_t *e, uint32_t time_ms, bool count_life) {
    ml__stack_stats_t *st = &a->stats[e->stack < a->nstats ? e->stack : 0];
    stat_touch(a, st);
    uint64_t count = ml__block_count(a, e->ptr, e->size);
    st->live_bytes -= e->size;
    st->live_blocks -= count;
    if (count_life) {
        uint64_t life = time_ms >= e->time_ms ? time_ms - e->time_ms : 0;
        uint32_t k = log2_bucket(life);
        a->hist.life_count[k]++;
        if (k > a->hist.life_last) a->hist.life_last = k;
        st->freed += count;
        st->life_sum += life;
        if (life > st->life_max) st->life_max = life;
        st->life_mask |= 1ull << (k > 63 ? 63 : k);
    }
    a->t.heap_bytes -= e->size;
    a->t.heap_blocks -= count;
    pages_block(a, e, false);
    grave_add(a, &a->mom[0], e);
    grave_add(a, &a->mom[1], e);
    graves_check(a);
}

/* The light session's bookkeeping: the live map, totals and the peak. */
static void heap_add_light(ml_analysis_t *a, const ml__block_t *b, uint32_t time_ms) {
    bool existed;
    ml__block_t old;
    if (ml__live_put(&a->heap, b, &old, &existed) < 0) {
        lost(a, true);
        return;
    }
    if (existed) {
        a->t.heap_bytes -= old.size;
        a->t.heap_blocks -= ml__block_count(a, old.ptr, old.size);
    }
    a->t.heap_blocks += ml__block_count(a, b->ptr, b->size);
    a->t.heap_bytes += b->size;
    if (a->t.heap_bytes > a->t.peak_bytes) {
        a->t.peak_bytes = a->t.heap_bytes;
        a->t.peak_blocks = a->t.heap_blocks;
        a->t.peak_time_ms = time_ms;
    }
}

static void heap_add(ml_analysis_t *a, const ml__block_t *b, uint32_t time_ms) {
    if (a->light) {
        heap_add_light(a, b, time_ms);
        return;
    }
    bool existed;
    ml__block_t old;
    if (ml__live_put(&a->heap, b, &old, &existed) < 0) {
        lost(a, true);
        return;
    }
    if (existed) block_gone(a, &old, time_ms, false); /* a missed free: replace */
    ml__stack_stats_t *st = &a->stats[b->stack < a->nstats ? b->stack : 0];
    stat_touch(a, st);
    uint64_t count = ml__block_count(a, b->ptr, b->size);
    st->live_bytes += b->size;
    st->live_blocks += count;
    a->t.heap_blocks += count;
    a->t.heap_bytes += b->size;
    pages_block(a, b, true);
    if (a->t.heap_bytes > a->t.peak_bytes) {
        a->t.peak_bytes = a->t.heap_bytes;
        a->t.peak_blocks = a->t.heap_blocks;
        a->t.peak_time_ms = time_ms;
        moment_set(a, &a->mom[0], time_ms);
    }
}

/* The thread's realloc stash is empty again (an allocation came after the
 * free). */
static void stash_clear(ml_analysis_t *a, uint32_t thread) {
    if (thread < a->realloc_stash_cap) a->realloc_stash[thread].b.ptr = 0;
}

static void on_alloc(ml_analysis_t *a, const ml_record_t *r) {
    ml_totals_t *t = &a->t;
    uint8_t kind = r->u.alloc.kind;
    bool realloc_kind = kind == ML_KIND_REALLOC || kind == ML_KIND_REALLOCARRAY;
    uint64_t size = r->u.alloc.size, raw = size;
    double w = 1.0;
    if ((r->u.alloc.flags & ML_EVF_SAMPLED) && t->sample_bytes) {
        /* A Poisson sample with mean gap T catches an allocation of s
         * bytes with probability 1 - exp(-s/T); weighting each sample by
         * the inverse makes counts and bytes unbiased (tcmalloc's
         * estimator). */
        w = 1.0 / -expm1(-(double)size / (double)t->sample_bytes);
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
    if (size > ML__SIZE_MAX) size = ML__SIZE_MAX;
    if (kind < ML_KIND_COUNT_) t->calls_by_kind[kind]++;
    a->seq++;
    if (a->light) {
        ml__block_t b = ml__block_make(r->u.alloc.ptr, size, 0, a->seq, ML__SLACK_UNKNOWN, 0, r->time_ms);
        if (b.ptr) heap_add_light(a, &b, r->time_ms);
        a->last_alloc_ptr = r->u.alloc.ptr;
        a->last_alloc_live = true;
        stash_clear(a, r->thread);
        return;
    }

    uint32_t s = stat_of(a, r->u.alloc.stack);
    ml__stack_stats_t *st = &a->stats[s];
    st->w_calls += w;
    st->w_bytes += w * (double)raw;
    if (realloc_kind) st->reallocs++;
    if (raw < st->min_size) st->min_size = raw;
    if (raw > st->max_size) st->max_size = raw;
    uint32_t k = log2_bucket(raw);
    if (k < 3) k = 3;
    st->size_mask |= 1ull << (k > 63 ? 63 : k);
    st->thread_mask |= 1ull << (r->thread < 63 ? r->thread : 63);
    a->hist.size_count[k] += w == 1.0 ? 1 : (uint64_t)llround(w); /* no libm call per unsampled event */
    a->hist.size_bytes[k] += size;
    if (k > a->hist.size_last) a->hist.size_last = k;

    ml__thread_t *th = thread_of(a, r->thread);
    if (th) {
        th->seen = true;
        th->w_calls += w;
        th->w_bytes += w * (double)raw;
    }

    /* The allocator's usable size, when the recorder could ask for it,
     * makes internal waste exact (frag.c estimates it otherwise). */
    uint64_t usable = r->u.alloc.usable;
    uint64_t slack = w == 1.0 && usable >= raw && usable - raw < ML__SLACK_UNKNOWN ? usable - raw
                                                                                  : ML__SLACK_UNKNOWN;
    ml__block_t b = ml__block_make(r->u.alloc.ptr, size, 0, a->seq, slack, s, r->time_ms);
    if (b.ptr) heap_add(a, &b, r->time_ms);
    a->last_alloc_ptr = r->u.alloc.ptr;
    a->last_alloc_live = true;
    stash_clear(a, r->thread);
    worst_check(a, r->time_ms);
    tl_update(a, r->time_ms);
}

static void on_free(ml_analysis_t *a, const ml_record_t *r) {
    ml_totals_t *t = &a->t;
    uint8_t kind = r->u.alloc.kind;
    ml__thread_t *th = thread_of(a, r->thread);
    if (kind == ML_KIND_FREE) {
        t->free_calls++;
        t->calls_by_kind[ML_KIND_FREE]++;
        if (th) th->free_calls++;
    }
    ml__block_t gone, *e = &gone;
    if (!ml__live_take(&a->heap, r->u.alloc.ptr, e)) {
        t->unknown_frees++;
        t->unknown_free_bytes += r->u.alloc.usable;
        return;
    }
    a->seq++;
    /* A sampled block's free stands for as many frees as its allocation
     * stands for allocations (counted as 1 above, before the block was
     * known). */
    uint64_t count = ml__block_count(a, e->ptr, e->size);
    if (kind == ML_KIND_FREE) {
        t->free_calls += count - 1;
        if (th) th->free_calls += count - 1;
    }
    /* heaptrack's temporary: freed by the very next heap event after its
     * allocation, by free() or by a realloc that moves or resizes it. Any
     * free in between, as any allocation, ends the chance. */
    bool was_live = a->last_alloc_live, was_last = was_live && a->last_alloc_ptr == r->u.alloc.ptr;
    if (was_last) {
        t->temporary_allocs += count;
        if (e->stack < a->nstats) a->stats[e->stack].temporary += count;
        if (th) th->temporary += count;
    }
    a->last_alloc_live = false;
    if (kind != ML_KIND_FREE && r->thread < ML__MAX_THREADS) {
        if (ml_grow((void **)&a->realloc_stash, &a->realloc_stash_cap, (uint64_t)r->thread + 1,
                    sizeof *a->realloc_stash, 0) == 0)
            a->realloc_stash[r->thread] =
                (struct ml__realloc_stash){.b = *e, .seq = a->seq, .temporary = was_last, .was_live = was_live};
        else
            lost(a, false);
    }
    if (a->light) {
        a->t.heap_bytes -= e->size;
        a->t.heap_blocks -= ml__block_count(a, e->ptr, e->size);
        return;
    }
    block_gone(a, e, r->time_ms, true);
    worst_check(a, r->time_ms);
    tl_update(a, r->time_ms);
}

static void on_realloc_fail(ml_analysis_t *a, const ml_record_t *r) {
    if (r->thread >= a->realloc_stash_cap) return;
    struct ml__realloc_stash *st = &a->realloc_stash[r->thread];
    if (!st->b.ptr || st->b.ptr != r->u.alloc.ptr) return;
    ml__block_t b = st->b;
    st->b.ptr = 0;
    /* The block lives on: its end was not a temporary's after all, and a
     * failed realloc is no heap event (heaptrack records none): if nothing
     * happened since, the last allocation keeps its chance. */
    if (st->temporary) {
        uint64_t n = ml__block_count(a, b.ptr, b.size);
#define ML__TAKE(x) ((x) -= (x) < n ? (x) : n)
        ML__TAKE(a->t.temporary_allocs);
        if (b.stack < a->nstats) ML__TAKE(a->stats[b.stack].temporary);
        ml__thread_t *th = thread_of(a, r->thread);
        if (th) ML__TAKE(th->temporary);
#undef ML__TAKE
    }
    if (st->seq == a->seq) a->last_alloc_live = st->was_live;
    if (a->light) {
        heap_add_light(a, &b, r->time_ms);
        return;
    }
    grave_undo(&a->mom[0], &b);
    grave_undo(&a->mom[1], &b);
    /* The failed realloc counted the block's end of life; undo the count. */
    ml__stack_stats_t *ss = &a->stats[b.stack < a->nstats ? b.stack : 0];
    uint64_t count = ml__block_count(a, b.ptr, b.size);
    ss->freed -= ss->freed < count ? ss->freed : count;
    a->seq++;
    heap_add(a, &b, r->time_ms);
    tl_update(a, r->time_ms);
}

/* ------------------------------------------------------------------------- */
/* Anonymous mappings                                                        */
/* ------------------------------------------------------------------------- */

/* A mapping's size is the length the program passed; it covers whole
 * pages. An unmap takes whatever pages of any mapping its range covers: a
 * mapping's head, tail or middle, or several at once (jemalloc trims the
 * tail of an over-sized mapping to align it). Only unmaps that began
 * exactly at a mapping were counted before, so a tail or middle unmapped
 * stayed counted, and MAP_FIXED over a live mapping counted its pages
 * twice. The hash map (a->maps) is what the snapshot saves; a->map_starts
 * keeps its keys sorted for the range lookups. */
static uint64_t page_up(const ml_analysis_t *a, uint64_t n) {
    uint64_t ps = a->page_size ? a->page_size : 4096;
    return n > UINT64_MAX - (ps - 1) ? UINT64_MAX & ~(ps - 1) : (n + ps - 1) & ~(ps - 1);
}

/* The end of e's pages. */
static uint64_t map_end(const ml_analysis_t *a, const ml__block_t *e) {
    uint64_t len = page_up(a, e->size ? e->size : 1);
    return e->ptr > UINT64_MAX - len ? UINT64_MAX : e->ptr + len;
}

static int cmp_u64_desc(const void *x, const void *y) {
    uint64_t p = *(const uint64_t *)x, q = *(const uint64_t *)y;
    return (p < q) - (p > q);
}

/* The keys are kept in descending order: the kernel places new mappings
 * below the last ones, so a new key goes at the array's end, without
 * moving the others. Index i below counts in ascending order. */
static inline uint64_t key_at(const ml_analysis_t *a, uint64_t i) {
    return a->map_starts[a->nmap_starts - 1 - i];
}

/* The first index of a key >= x. */
static uint64_t starts_lower(const ml_analysis_t *a, uint64_t x) {
    uint64_t lo = 0, hi = a->nmap_starts;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (key_at(a, mid) < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The sorted keys, made again from the map when they disagree in count
 * (a restored snapshot, a failed allocation). False: no memory. */
static bool starts_ready(ml_analysis_t *a) {
    if (a->nmap_starts == a->maps.count) return true;
    if (ml_grow((void **)&a->map_starts, &a->map_starts_cap, a->maps.count, sizeof *a->map_starts, 0) < 0)
        return false;
    uint64_t n = 0;
    for (uint64_t i = 0; i < a->maps.cap; i++) {
        uint64_t k = *ml__map_key(&a->maps, i, sizeof(ml__block_t));
        if (k) a->map_starts[n++] = k;
    }
    qsort(a->map_starts, n, sizeof *a->map_starts, cmp_u64_desc);
    a->nmap_starts = n;
    return true;
}

static void starts_insert(ml_analysis_t *a, uint64_t key) {
    if (a->nmap_starts + 1 != a->maps.count) return; /* out of step: starts_ready rebuilds */
    if (ml_grow((void **)&a->map_starts, &a->map_starts_cap, a->nmap_starts + 1, sizeof *a->map_starts, 0) < 0) {
        a->nmap_starts = UINT64_MAX; /* rebuilt at the next use, if memory allows */
        return;
    }
    uint64_t i = starts_lower(a, key), p = a->nmap_starts - i; /* i keys below it, after p */
    memmove(a->map_starts + p + 1, a->map_starts + p, i * sizeof *a->map_starts);
    a->map_starts[p] = key;
    a->nmap_starts++;
}

static void starts_remove(ml_analysis_t *a, uint64_t key) {
    if (a->nmap_starts != a->maps.count + 1) return;
    uint64_t i = starts_lower(a, key);
    if (i == a->nmap_starts || key_at(a, i) != key) {
        a->nmap_starts = UINT64_MAX; /* out of step: rebuilt at the next use */
        return;
    }
    uint64_t p = a->nmap_starts - 1 - i;
    memmove(a->map_starts + p, a->map_starts + p + 1, i * sizeof *a->map_starts);
    a->nmap_starts--;
}

/* A mapping's `slack`, unused for mappings otherwise: ML__MAP_ALLOCATOR
 * when the allocator made it for its heap (ML_EVF_ALLOCATOR), whose bytes
 * count in alloc_mmap_bytes instead of mmap_bytes. Its pieces keep it. */
#define ML__MAP_ALLOCATOR 1

static inline uint64_t *map_bytes(ml_analysis_t *a, const ml__block_t *e) {
    return e->slack == ML__MAP_ALLOCATOR ? &a->t.alloc_mmap_bytes : &a->t.mmap_bytes;
}

static void map_remove(ml_analysis_t *a, ml__block_t *e) {
    uint64_t key = e->ptr;
    *map_bytes(a, e) -= e->size;
    ml__blocks_remove(&a->maps, e);
    starts_remove(a, key);
}

/* Adds b (its key free); false when the map cannot grow. */
static bool map_add(ml_analysis_t *a, const ml__block_t *b) {
    bool existed;
    ml__block_t *n = ml__blocks_put(&a->maps, b->ptr, &existed);
    if (!n) return false;
    if (existed) *map_bytes(a, n) -= n->size; /* never: the caller took the range out */
    else starts_insert(a, b->ptr);
    *n = *b;
    *map_bytes(a, n) += b->size;
    return true;
}

/* e loses its pages in [lo, hi): removed, then its head below lo and its
 * tail from hi on (what the program's length covers there) put back. */
static void cut(ml_analysis_t *a, ml__block_t *e, uint64_t lo, uint64_t hi) {
    ml__block_t was = *e;
    uint64_t data_end = was.ptr > UINT64_MAX - was.size ? UINT64_MAX : was.ptr + was.size;
    uint64_t end = map_end(a, &was);
    map_remove(a, e);
    if (was.ptr < lo) {
        ml__block_t head = was;
        head.size = (data_end < lo ? data_end : lo) - was.ptr;
        if (!map_add(a, &head)) lost(a, true);
    }
    if (end > hi && data_end > hi) {
        ml__block_t tail = was;
        tail.ptr = hi;
        tail.size = data_end - hi;
        if (!map_add(a, &tail)) lost(a, true);
    }
}

/* The mappings' pages in [lo, hi) are gone. Every pass of the loop takes
 * out a mapping that starts in [lo, hi) and puts back none there, so it
 * ends whatever a (corrupt) trace holds. */
static void unmap_range(ml_analysis_t *a, uint64_t lo, uint64_t hi) {
    ml__block_t *e;
    if (!starts_ready(a)) {
        /* No memory for the order: exact starts only, as before. */
        if ((e = ml__blocks_find(&a->maps, lo))) map_remove(a, e);
        return;
    }
    uint64_t i = starts_lower(a, lo);
    if (i > 0 && (e = ml__blocks_find(&a->maps, key_at(a, i - 1))) && map_end(a, e) > lo) cut(a, e, lo, hi);
    for (;;) {
        if (!starts_ready(a)) break;
        i = starts_lower(a, lo);
        if (i >= a->nmap_starts || key_at(a, i) >= hi) break;
        if (!(e = ml__blocks_find(&a->maps, key_at(a, i)))) {
            a->nmap_starts = UINT64_MAX; /* out of step: rebuilt from the map */
            continue;
        }
        cut(a, e, lo, hi);
    }
}

static void on_mmap(ml_analysis_t *a, const ml_record_t *r) {
    ml_totals_t *t = &a->t;
    bool own = r->u.alloc.flags & ML_EVF_ALLOCATOR;
    if (own) {
        t->alloc_mmap_calls++;
    } else if (r->u.alloc.kind == ML_KIND_MMAP) {
        t->mmap_calls++;
        t->calls_by_kind[ML_KIND_MMAP]++;
    } else {
        t->calls_by_kind[ML_KIND_MREMAP]++;
    }
    uint64_t ptr = r->u.alloc.ptr ? r->u.alloc.ptr : 1;
    uint64_t size = r->u.alloc.size & ((1ull << 62) - 1);
    if (size > ML__SIZE_MAX) size = ML__SIZE_MAX;
    /* A mapping placed over live ones (MAP_FIXED) replaces their pages. */
    uint64_t len = page_up(a, size ? size : 1);
    unmap_range(a, ptr, ptr > UINT64_MAX - len ? UINT64_MAX : ptr + len);
    ml__block_t b = {.ptr = ptr, .size = size, .stack = r->u.alloc.stack, .time_ms = r->time_ms,
                     .slack = own ? ML__MAP_ALLOCATOR : 0};
    if (map_add(a, &b)) {
        if (t->mmap_bytes > t->peak_mmap_bytes) t->peak_mmap_bytes = t->mmap_bytes;
        if (t->alloc_mmap_bytes > t->peak_alloc_mmap_bytes) t->peak_alloc_mmap_bytes = t->alloc_mmap_bytes;
    } else {
        lost(a, true);
    }
    tl_update(a, r->time_ms);
}

static void on_munmap(ml_analysis_t *a, const ml_record_t *r) {
    ml_totals_t *t = &a->t;
    /* munmap fails for an address off a page boundary or a length of 0 (it
     * is recorded before the call); unmaps of file mappings are not ours. */
    uint64_t lo = r->u.alloc.ptr, len = r->u.alloc.size;
    uint64_t own_before = t->alloc_mmap_bytes, prog_before = t->mmap_bytes;
    if (len && !(lo & ((a->page_size ? a->page_size : 4096) - 1)) && a->maps.count) {
        len = page_up(a, len);
        unmap_range(a, lo, lo > UINT64_MAX - len ? UINT64_MAX : lo + len);
    }
    if (r->u.alloc.kind == ML_KIND_MUNMAP) {
        /* The allocator's, when all it took were the allocator's pages. */
        if (t->alloc_mmap_bytes != own_before && t->mmap_bytes == prog_before) {
            t->alloc_munmap_calls++;
        } else {
            t->munmap_calls++;
            t->calls_by_kind[ML_KIND_MUNMAP]++;
        }
    }
    tl_update(a, r->time_ms);
}

static char *dup_str(const char *s) {
    return strdup(s ? s : "");
}

static void on_process(ml_analysis_t *a, const ml_record_t *r) {
    const typeof(r->u.process) *p = &r->u.process;
    a->t.sample_bytes = p->sample_bytes;
    if (p->page_size >= 512 && p->page_size <= (1u << 30) && !(p->page_size & (p->page_size - 1)))
        a->page_size = p->page_size;
    for (size_t i = 0; i < sizeof a->proc_strings / sizeof a->proc_strings[0]; i++) {
        free(a->proc_strings[i]);
        a->proc_strings[i] = NULL;
    }
    ml_process_info_t *q = &a->proc;
    q->pid = p->pid;
    q->ppid = p->ppid;
    q->page_size = a->page_size;
    q->start_realtime_ns = p->start_realtime_ns;
    q->sample_bytes = p->sample_bytes;
    q->unwinder = p->unwinder;
    q->depth = p->depth;
    q->options = p->options;
    char **s = a->proc_strings;
    q->exe = s[0] = dup_str(p->exe);
    q->parent_trace = s[1] = dup_str(p->parent_trace);
    q->producer = s[2] = dup_str(p->producer);
    q->argc = p->argc > ML_MAX_ARGS ? ML_MAX_ARGS : p->argc;
    for (uint32_t i = 0; i < q->argc; i++) s[4 + i] = dup_str(p->argv[i]);
    q->argv = (const char *const *)(s + 4);
    uint32_t argc = q->argc;
    if (!q->exe || !q->parent_trace || !q->producer) q->exe = q->parent_trace = q->producer = "";
    for (uint32_t i = 0; i < q->argc; i++)
        if (!s[4 + i]) q->argc = i;
    if (!s[0] || !s[1] || !s[2] || q->argc < argc) lost(a, false);
}

/* The maps keep the size of the largest live set; a program that freed its
 * heap before exit (Python's teardown of 19 M objects) left a 1 GiB map
 * holding 20 blocks, which the snapshot kept and every report walked. At the
 * end record (the last record, fed by the collector and by a replay alike)
 * the mappings' map and the live set's page directory move to tables that
 * fit what is still live; a snapshot restored from an older trace gets the
 * same (snapshot.c), so reports from a snapshot and from a replay keep
 * iterating in the same order. Out of memory leaves a map as it was, which
 * changes only the order of ties. The live set is walked in address order,
 * whatever its directory's layout. */
void ml__shrink_live(ml_analysis_t *a) {
    ml__live_shrink(&a->heap);
    (void)ml_map_shrink(&a->maps, sizeof(ml__block_t), 1024);
}

void ml_analysis_feed(ml_analysis_t *a, const ml_record_t *r) {
    ml_totals_t *t = &a->t;
    t->records++;
    if (r->time_ms > t->last_time_ms) t->last_time_ms = r->time_ms;
    if (r->tag >= ML_T_GPU_ALLOC) ml__gpu_feed(&a->gpu, r, t); /* only GPU records concern it */
    switch (r->tag) {
    case ML_T_PROCESS:
        on_process(a, r);
        break;
    case ML_T_ALLOC:
        on_alloc(a, r);
        break;
    case ML_T_FREE:
        on_free(a, r);
        break;
    case ML_T_REALLOC_FAIL:
        on_realloc_fail(a, r);
        break;
    case ML_T_MMAP:
        on_mmap(a, r);
        break;
    case ML_T_MUNMAP:
        on_munmap(a, r);
        break;
    case ML_T_NODE:
        add_node(a, r);
        break;
    case ML_T_MODULE:
        add_module(a, r);
        break;
    case ML_T_MODULE_UNLOAD:
        unload_module(a, r->u.module.base);
        break;
    case ML_T_THREAD: {
        ml__thread_t *th = thread_of(a, r->u.thread.index);
        if (th) {
            th->seen = true;
            th->tid = r->u.thread.tid;
            free(th->name);
            th->name = dup_str(r->u.thread.name);
            if (!th->name) lost(a, false);
        }
        break;
    }
    case ML_T_MALLINFO:
        a->have_mallinfo = true;
        a->mallinfo_time_ms = r->time_ms;
        a->mallinfo[0] = r->u.mallinfo.arena;
        a->mallinfo[1] = r->u.mallinfo.hblkhd;
        a->mallinfo[2] = r->u.mallinfo.uordblks;
        a->mallinfo[3] = r->u.mallinfo.fordblks;
        a->mallinfo[4] = r->u.mallinfo.keepcost;
        break;
    case ML_T_RSS:
        a->have_rss = true;
        t->rss_bytes = r->u.rss.rss_bytes;
        if (t->rss_bytes > t->peak_rss_bytes) t->peak_rss_bytes = t->rss_bytes;
        if (r->u.rss.interval_ms > t->rss_interval_ms) t->rss_interval_ms = r->u.rss.interval_ms;
        tl_update(a, r->time_ms);
        break;
    case ML_T_PROC_EXIT:
        t->exited = true;
        break;
    case ML_T_PEAK_RSS:
        t->hwm_rss_bytes = r->u.peak_rss.bytes;
        t->hwm_rss_source = r->u.peak_rss.source;
        break;
    case ML_T_UNTRACED: /* what `memlens run` said on stderr, for every report of the trace */
        if (r->u.untraced.message && r->u.untraced.message[0]) ml__warn(a, "%s", r->u.untraced.message);
        break;
    case ML_T_GPU_ALLOC: /* counted by ml__gpu_feed above; the timeline shows gpu_bytes */
    case ML_T_GPU_FREE:
        tl_update(a, r->time_ms);
        break;
    case ML_T_BLOCK_REACH: {
        ml__live_set_reach(&a->heap, r->u.block_reach.ptr,
                           r->u.block_reach.reach <= ML_REACH_POSSIBLE ? r->u.block_reach.reach : 0);
        break;
    }
    case ML_T_REACH_REST:
        ml__live_set_reach_rest(&a->heap, r->u.block_reach.reach <= ML_REACH_POSSIBLE ? r->u.block_reach.reach : 0);
        break;
    case ML_T_REACH_SCAN:
        a->scanned = r->u.reach_scan.status == 0;
        a->scan.scanned = a->scanned;
        a->scan.scan_status = r->u.reach_scan.status;
        a->scan.scan_root_bytes = r->u.reach_scan.root_bytes;
        a->scan.scan_heap_bytes = r->u.reach_scan.heap_bytes;
        a->scan.scan_duration_us = r->u.reach_scan.duration_us;
        break;
    case ML_T_END:
        t->complete = true;
        t->end = r->u.end;
        ml__shrink_live(a);
        break;
    default:
        break;
    }
}

static int cmp_fblock(const void *x, const void *y) {
    uint64_t l = ((const ml__fblock_t *)x)->ptr, r = ((const ml__fblock_t *)y)->ptr;
    return l < r ? -1 : l > r;
}

RADIX_SORT(ml__sort_fblocks, ml__fblock_t, cmp_fblock)

int64_t ml_analysis_live_reach_blocks(ml_analysis_t *a, ml_reach_blocks_t *t) {
    memset(t, 0, sizeof *t);
    t->live = malloc(sizeof *t->live);
    if (!t->live || ml__live_index_init(t->live, &a->heap) < 0) {
        free(t->live);
        t->live = NULL;
        return -ENOMEM;
    }
    t->n = t->live->n;
    t->bytes = a->t.heap_bytes;
    return (int64_t)t->n;
}

/* The live blocks in address order, walked once: each one's address and
 * size into blocks[], or its sequence number into seqs[] (either NULL).
 * Returns the count, or -ENOMEM. */
static int64_t live_walk(const ml_analysis_t *a, ml_live_block_t *blocks, uint64_t *seqs) {
    ml__live_cursor_t cur;
    if (ml__live_cursor_init(&cur, &a->heap) < 0) return -ENOMEM;
    uint64_t n = 0;
    ml__block_t b;
    for (; n < a->heap.count && ml__live_next(&cur, &b); n++) {
        if (blocks) blocks[n] = (ml_live_block_t){b.ptr, b.size};
        if (seqs) seqs[n] = b.seq;
    }
    ml__live_cursor_free(&cur);
    return (int64_t)n;
}

uint64_t ml_analysis_live_count(const ml_analysis_t *a) {
    return a->heap.count;
}

int64_t ml_analysis_live_blocks(const ml_analysis_t *a, ml_live_block_t **out) {
    ml_live_block_t *v = malloc((a->heap.count ? a->heap.count : 1) * sizeof *v);
    int64_t n = v ? live_walk(a, v, NULL) : -ENOMEM;
    if (n < 0) free(v);
    else *out = v; /* in address order already */
    return n;
}

int64_t ml_analysis_live_seqs(const ml_analysis_t *a, uint64_t **out) {
    uint64_t *v = malloc((a->heap.count ? a->heap.count : 1) * sizeof *v);
    int64_t n = v ? live_walk(a, NULL, v) : -ENOMEM;
    if (n < 0) free(v);
    else *out = v;
    return n;
}
