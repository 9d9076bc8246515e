/* sim_internal.h - shared between the files of analysis/sim only.
 *
 * Every policy embeds ml_sim_policy_t as its first member. The generic layer
 * (sim_core.c) checks ids, keeps the requested and block size of each live
 * block, the live sums, the step counters and the peak snapshot; a policy
 * implements placement and reports the pages it occupies through
 * ml__sim_extent_add/remove (or ml__sim_pages_add/sub for memory it holds
 * outside any extent).
 */
#ifndef ML_SIM_INTERNAL_H
#define ML_SIM_INTERNAL_H

#include "ml_map.h"
#include "ml_sim.h"
#include "ml_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ML__NIL UINT32_MAX

typedef struct {
    /* Places the block: returns 0 with *addr and the block size in *block, or
     * -ENOMEM. Must report its pages. */
    int (*alloc)(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block);
    void (*free)(ml_sim_policy_t *p, uint32_t id);
    /* Free space of the allocator's own structures (see ml_sim.h). */
    void (*free_summary)(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest);
    uint64_t (*state_bytes)(const ml_sim_policy_t *p);
    void (*destroy)(ml_sim_policy_t *p);
    /* Optional: total footprint when the policy does not use the page counter (router). */
    uint64_t (*footprint)(const ml_sim_policy_t *p);
    /* Optional: start loading what applying free `op` will touch (frees
     * only: an allocation's id was freed a moment ago, or is new, and its
     * tables are warm). Called for the same op three times as it comes
     * closer: stage 0 (16 ops ahead) loads the per-id tables, stage 1 (8
     * ahead) reads them and loads what they point to, stage 2 (4 ahead)
     * reads that and loads the next level (the page counters of the block's
     * address). */
    void (*prefetch)(const ml_sim_policy_t *p, const ml_sim_op_t *op, int stage);
    /* Optional: make room in the policy's own per-id tables for ids
     * [0, ids) now (ml_sim_reserve). Returns 0 or -ENOMEM. */
    int (*reserve)(ml_sim_policy_t *p, uint32_t ids);
} ml__sim_vt_t;

/* A sparse page counter (the analysis layer's map, ml_map.h). */
typedef struct {
    uint64_t page; /* page number + 1 */
    uint64_t count;
} ml__page_slot_t;

ML_MAP_TYPED(ml__page_slots, ml__page_slot_t, 1024)

/* Pages holding at least one extent. Extents of one policy never overlap, so
 * the pages strictly inside an extent belong to it alone and only the first
 * and last page need a counter. Dense mode: a flat array over the simulated
 * address space (which starts at 0 and stays compact). Sparse mode: a hash on
 * the page number (recorded addresses). */
typedef struct {
    uint32_t shift;
    bool sparse;
    bool addresses; /* the pages of recorded addresses ("real"): no extent is measured */
    uint32_t *cnt; /* dense */
    uint64_t cap;
    ml_map_t slots;    /* sparse: ml__page_slot_t by page number + 1 */
    uint64_t held;     /* pages */
} ml__pages_t;

typedef struct {
    uint64_t req, blk;
} ml__sim_id_t;

struct ml_sim_policy_s {
    const ml__sim_vt_t *vt;
    char name[24];
    ml_sim_config_t cfg;
    ml__pages_t pages;
    uint64_t direct_pages; /* pages held outside extents */
    /* per id: requested size + 1 (0 = not live) and block size, side by
     * side: an alloc writes both and a free reads both, from one cache
     * line instead of one in each of two tables */
    ml__sim_id_t *ids;
    uint32_t idcap;
    uint64_t live_req, live_blk, live_count;
    uint64_t allocs, frees, failed, ops;
    uint64_t search_steps, splits, merges, max_op_steps;
    uint64_t steps_before; /* search_steps + splits + merges before the op now applied */
    uint64_t peak_footprint, peak_extent;
    uint64_t max_end; /* highest end of any extent so far */
    ml_sim_frag_t at_peak;
    uint32_t now_ms;
    const ml_sim_op_t *cur_op; /* the op being applied (NULL from ml_sim_alloc/free) */
    uint64_t seq;              /* allocs and frees given to ml_sim_apply(), this one included */
    bool known_fragmentation, known_cost;
    uint64_t os_held_peak;
    double cpu_seconds;
};

/* Starts loading what ml_sim_apply(p, op) will touch: the per-id tables
 * (stage 0), then, for a free, the policy's own (vt->prefetch). The replay
 * calls it for ops ahead of the one it applies: the ids of a trace are in
 * no order the caches could guess, and a miss per table per op was most of
 * the replay's time. `pf` is p->vt->prefetch, loaded once by the caller. */
static inline void ml__sim_prefetch(const ml_sim_policy_t *p,
                                    void (*pf)(const ml_sim_policy_t *, const ml_sim_op_t *, int),
                                    const ml_sim_op_t *op, int stage) {
    if (stage == 0 && op->id < p->idcap) {
        __builtin_prefetch(&p->ids[op->id], 0);
    }
    if (pf && op->type == ML_SIM_FREE) pf(p, op, stage);
}

/* The page counter of an address (for the policies' prefetch hooks). */
static inline void ml__sim_prefetch_page(const ml_sim_policy_t *p, uint64_t addr) {
    const ml__pages_t *pg = &p->pages;
    uint64_t page = addr >> pg->shift;
    if (!pg->sparse) {
        if (page < pg->cap) __builtin_prefetch(&pg->cnt[page], 0);
    } else {
        ml__page_slots_prefetch(&pg->slots, page + 1);
    }
}

/* ml_sim_footprint(), inline for the per-op paths (after every op, and the
 * router's sums). */
static inline uint64_t ml__sim_footprint(const ml_sim_policy_t *p) {
    if (p->vt->footprint) return p->vt->footprint(p);
    return (p->pages.held + p->direct_pages) << p->pages.shift;
}

/* sim_oplog.c: the replay appends each batch it dispatches; rewinding
 * flushes what is buffered and readies the log for reading, and reading
 * decodes every op in order into the place slot(ctx) gives for it (at:
 * bytes read so far). */
void ml__sim_oplog_append(ml_sim_oplog_t *l, const ml_sim_op_t *ops, size_t n);
int ml__sim_oplog_rewind(ml_sim_oplog_t *l);
int ml__sim_oplog_read(ml_sim_oplog_t *l, ml_sim_op_t *(*slot)(void *ctx), void *ctx,
                       uint64_t *at, ml_progress_t *progress);
/* sim_oplog.c: a footprint series. note() records the value after op
 * `seq` (only changes are kept); finish() flushes it (the replay calls it
 * at its end). A reader answers "the value after op seq" for increasing
 * seq; it reads nothing else of the series. */
void ml__sim_fpseries_note(ml_sim_fpseries_t *s, uint64_t seq, uint64_t value);
void ml__sim_fpseries_finish(ml_sim_fpseries_t *s);
uint64_t ml__sim_fpseries_max(const ml_sim_fpseries_t *s);
void *ml__sim_series_reader_new(const ml_sim_fpseries_t *s);
void ml__sim_series_reader_free(void *rd);
uint64_t ml__sim_series_at(void *rd, uint64_t seq);
bool ml__sim_series_reader_failed(const void *rd);

/* Sets up the generic part. */
void ml__sim_init(ml_sim_policy_t *p, const ml__sim_vt_t *vt, const char *name, const ml_sim_config_t *c,
                  bool sparse_pages);

/* Page accounting, called by policies for every block: inline, with the
 * dense counter's common case here and the rest in sim_core.c. Adds one to
 * (removes one from) a page's count and keeps `held` right. */
int ml__sim_page_inc_slow(ml__pages_t *pg, uint64_t page);
void ml__sim_page_dec_slow(ml__pages_t *pg, uint64_t page);

static inline int ml__sim_page_inc(ml__pages_t *pg, uint64_t page) {
    if (!pg->sparse && page < pg->cap) {
        if (pg->cnt[page]++ == 0) pg->held++;
        return 0;
    }
    return ml__sim_page_inc_slow(pg, page);
}

static inline void ml__sim_page_dec(ml__pages_t *pg, uint64_t page) {
    if (!pg->sparse && page < pg->cap) {
        if (pg->cnt[page] && --pg->cnt[page] == 0) pg->held--;
        return;
    }
    ml__sim_page_dec_slow(pg, page);
}

/* The pages of extent [addr, addr + len) (at least one byte). Return 0 or -ENOMEM. */
static inline int ml__sim_extent_add(ml_sim_policy_t *p, uint64_t addr, uint64_t len) {
    ml__pages_t *pg = &p->pages;
    if (!len) len = 1;
    if (addr + len > p->max_end) p->max_end = addr + len;
    uint64_t first = addr >> pg->shift, last = (addr + len - 1) >> pg->shift;
    if (ml__sim_page_inc(pg, first) < 0) return -ENOMEM;
    if (last != first) {
        if (ml__sim_page_inc(pg, last) < 0) {
            ml__sim_page_dec(pg, first);
            return -ENOMEM;
        }
        pg->held += last - first - 1;
    }
    return 0;
}

static inline void ml__sim_extent_remove(ml_sim_policy_t *p, uint64_t addr, uint64_t len) {
    ml__pages_t *pg = &p->pages;
    if (!len) len = 1;
    uint64_t first = addr >> pg->shift, last = (addr + len - 1) >> pg->shift;
    ml__sim_page_dec(pg, first);
    if (last != first) {
        ml__sim_page_dec(pg, last);
        pg->held -= last - first - 1;
    }
}
static inline void ml__sim_pages_add(ml_sim_policy_t *p, uint64_t n) {
    p->direct_pages += n;
}
static inline void ml__sim_pages_sub(ml_sim_policy_t *p, uint64_t n) {
    p->direct_pages -= n;
}

/* Grows a per-id array of `elem` bytes to hold index id; new entries are set
 * to the byte `fill`. Returns 0 or -ENOMEM. ml_grow() with an index. */
static inline int ml__sim_grow(void **arr, uint32_t *cap, uint32_t id, size_t elem, int fill) {
    return ml_grow(arr, cap, (uint64_t)id + 1, elem, fill);
}

/* Makes room in a per-id array for ids [0, ids) at once: the capacity
 * ml__sim_grow() would reach by doubling, without the copies of the
 * doublings. A fresh zero-filled array comes from calloc, whose pages of a
 * large table are zero already and only touched where used. Returns 0 or
 * -ENOMEM. */
static inline int ml__sim_reserve_ids(void **arr, uint32_t *cap, uint32_t ids, size_t elem, int fill) {
    if (!ids || ids <= *cap) return 0;
    if (*arr || fill) return ml__sim_grow(arr, cap, ids - 1, elem, fill);
    uint64_t ncap = 64;
    while (ncap < ids) ncap *= 2;
    if (ncap > UINT32_MAX) ncap = UINT32_MAX;
    void *n = ml__alloc.calloc(ncap, elem);
    if (!n) return -ENOMEM;
    *arr = n;
    *cap = (uint32_t)ncap;
    return 0;
}

static inline uint64_t ml__round_up(uint64_t x, uint64_t a) {
    return (x + a - 1) & ~(a - 1);
}
static inline unsigned ml__log2_floor(uint64_t x) {
    return 63u - (unsigned)__builtin_clzll(x);
}
static inline unsigned ml__log2_ceil(uint64_t x) {
    return x <= 1 ? 0 : 64u - (unsigned)__builtin_clzll(x - 1);
}

/* Alignment in bytes of an op (0 in op->align means the config's default). */
static inline uint64_t ml__op_align(const ml_sim_policy_t *p, const ml_sim_op_t *op) {
    uint64_t a = op->align ? (uint64_t)1 << op->align : p->cfg.align;
    return a < p->cfg.align ? p->cfg.align : a;
}

/* ------------------------------------------------------------------------- */
/* Applying an op (sim_core.c's generic part, inline)                         */
/* ------------------------------------------------------------------------- */

/* ml_sim_apply() and its alloc and free, here so that the replay's loop and
 * the router inline them: the checks and sums around a policy's own work
 * are a few dozen instructions an op, and the calls and register saves of
 * two more levels of functions were as many again (every policy sees every
 * op). The rare paths stay in sim_core.c. */
void ml__sim_new_peak(ml_sim_policy_t *p, uint64_t fp); /* the peak and its snapshot */
int ml__sim_ids_grow(ml_sim_policy_t *p, uint32_t id);

static inline uint64_t ml__sim_steps_now(const ml_sim_policy_t *p) {
    return p->search_steps + p->splits + p->merges;
}

/* The counters only move inside an op (a failed one included): their sum
 * after one op is the next one's starting point, kept rather than summed
 * twice an op. */
static inline __attribute__((always_inline)) void ml__sim_after_op(ml_sim_policy_t *p) {
    uint64_t now = ml__sim_steps_now(p), d = now - p->steps_before;
    p->steps_before = now;
    if (d > p->max_op_steps) p->max_op_steps = d;
    p->ops++;
    if (!p->pages.addresses) { /* also a dense counter that went sparse (sim_core.c) */
        uint64_t ext = ml__round_up(p->max_end, p->cfg.page_size) + (p->direct_pages << p->pages.shift);
        if (ext > p->peak_extent) p->peak_extent = ext;
    }
    uint64_t fp = ml__sim_footprint(p);
    if (fp > p->peak_footprint) ml__sim_new_peak(p, fp);
}

static inline __attribute__((always_inline)) int ml__sim_do_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op,
                                                                   uint64_t *addr_out) {
    uint32_t id = op->id;
    if (id >= p->idcap && ml__sim_ids_grow(p, id) < 0) return -ENOMEM;
    if (p->ids[id].req) return -EEXIST;
    p->now_ms = op->time_ms;
    uint64_t addr = 0, block = 0;
    int rc = p->vt->alloc(p, op, &addr, &block);
    if (rc < 0) {
        p->failed++;
        p->steps_before = ml__sim_steps_now(p); /* a failed op's steps count for no op */
        return rc;
    }
    p->ids[id].req = op->size + 1;
    p->ids[id].blk = block;
    p->live_req += op->size;
    p->live_blk += block;
    p->live_count++;
    p->allocs++;
    ml__sim_after_op(p);
    if (addr_out) *addr_out = addr;
    return 0;
}

static inline __attribute__((always_inline)) int ml__sim_do_free(ml_sim_policy_t *p, uint32_t id) {
    if (id >= p->idcap || !p->ids[id].req) return -ENOENT;
    p->vt->free(p, id);
    p->live_req -= p->ids[id].req - 1;
    p->live_blk -= p->ids[id].blk;
    p->live_count--;
    p->ids[id].req = 0;
    p->frees++;
    ml__sim_after_op(p);
    return 0;
}

static inline __attribute__((always_inline)) int ml__sim_apply(ml_sim_policy_t *p, const ml_sim_op_t *op) {
    int rc = 0;
    p->cur_op = op;
    if (op->type != ML_SIM_MALLINFO) p->seq++;
    if (op->type == ML_SIM_ALLOC) {
        rc = ml__sim_do_alloc(p, op, NULL);
    } else if (op->type == ML_SIM_MALLINFO) {
        if (op->size > p->os_held_peak) p->os_held_peak = op->size; /* ml_sim_mallinfo */
    } else {
        p->now_ms = op->time_ms;
        rc = ml__sim_do_free(p, op->id);
    }
    p->cur_op = NULL;
    return rc;
}

/* --- the free-list core: first/next/best/worst fit, segfit, TLSF ---------- */

/* Every block, allocated or free, is a node on the physical list (the
 * boundary tags a real allocator keeps in memory), so coalescing finds its
 * neighbours in O(1). Free nodes are also in the policy's index: a treap for
 * the fits, class lists for segfit and TLSF (l/r are then prev/next). The
 * treap's own fields are in a parallel table that list policies do not
 * have: their nodes are 40 bytes instead of 56, and every node is touched
 * once per op. */
typedef struct {
    uint64_t addr, size;
    uint32_t pprev, pnext; /* physical neighbours */
    uint32_t l, r;
    uint32_t cls;          /* class of a free node in a list index */
    uint8_t free;
} ml__fl_node_t;

typedef struct {
    uint64_t maxsz;      /* largest size in the treap subtree */
    uint32_t prio, cnt;  /* treap priority, subtree node count */
} ml__fl_tnode_t;

typedef struct ml__fl_s ml__fl_t;

typedef struct {
    const char *name;
    bool tree_by_size;         /* treap key: (size, addr) instead of addr */
    bool lists;                /* class lists instead of a treap */
    uint32_t (*find)(ml__fl_t *f, uint64_t need); /* a free node of size >= need, or NIL */
    uint32_t (*cls)(const ml__fl_t *f, uint64_t size); /* list index of a free block */
    void (*largest)(const ml__fl_t *f, uint64_t *largest);
    void (*after_alloc)(ml__fl_t *f, uint64_t addr, uint64_t need);
} ml__fl_ops_t;

#define ML__FL_MAX_CLASSES 1024

struct ml__fl_s {
    ml_sim_policy_t base;
    const ml__fl_ops_t *ops;
    ml__fl_node_t *n;
    ml__fl_tnode_t *t;              /* treap fields of n[i] (NULL with lists) */
    uint32_t ncap, nused, nrecycle; /* nrecycle: list of unused nodes through .l */
    uint32_t *id2n;
    uint32_t idcap;
    uint64_t top;   /* end of the heap */
    uint32_t tail;  /* last physical node */
    uint32_t root;  /* treap */
    uint64_t free_bytes, free_count;
    uint64_t min_block;
    uint64_t rover; /* next fit */
    uint64_t rng;
    uint32_t heads[ML__FL_MAX_CLASSES];
    uint64_t bitmap[(ML__FL_MAX_CLASSES + 63) / 64];
    uint32_t nclasses;
    uint64_t tlsf_fl;       /* TLSF first-level bitmap */
    uint32_t tlsf_sl[64];   /* TLSF second-level bitmaps */
};

int ml__fl_new(const ml_sim_config_t *c, const ml__fl_ops_t *ops, ml_sim_policy_t **out);

/* Treap queries over the free nodes (address-keyed unless tree_by_size). */
uint32_t ml__fl_tree_lower_bound_size(const ml__fl_t *f, uint64_t need); /* by size */
uint64_t ml__fl_tree_rank(const ml__fl_t *f, uint64_t addr); /* free nodes below addr (by addr) */
uint32_t ml__fl_tree_first_fit(const ml__fl_t *f, uint64_t lo, uint64_t need); /* by addr */
static inline uint64_t ml__fl_tree_max(const ml__fl_t *f) {
    return f->root == ML__NIL ? 0 : f->t[f->root].maxsz;
}
/* Class lists: the first non-empty list with index >= c, or NIL; counts bitmap words. */
uint32_t ml__fl_list_next_nonempty(ml__fl_t *f, uint32_t c);

#endif
