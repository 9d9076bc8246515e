/* address_model.h - the address model that the trace writer and reader both
 * run, so that most heap addresses cost a byte or two in a trace.
 *
 * Internal to trace/ (STYLE 2). Static inline: the writer and the reader call
 * it for every allocation and free record, and a call per record into
 * another file was measurable in both (the collector writes, every report
 * reads).
 *
 * Most of a heap trace's entropy is in its addresses, yet allocators are
 * predictable: malloc(n) returns the block of n's size class that was freed
 * last (glibc's tcache and fast bins are LIFO per class), and programs free
 * what they allocated last. Writer and reader run the same model, reset at
 * every chunk, and a pointer the model predicts is written as a one-byte
 * code instead of a delta:
 *
 *   - per size class (keyed by the usable size the allocator reported), the
 *     last CLASS_DEPTH freed addresses, most recent first: codes 0..15;
 *   - the last RECENT freed addresses of any class: codes 16..16+RECENT-1;
 *   - the last RECENT allocations still live, with their usable sizes: a free
 *     of one of them is its index, and needs no size;
 *   - per size class, the last CLASS_DEPTH blocks allocated and still live:
 *     a free of one of them is its usable size and an index.
 *
 * Loops then encode to identical bytes every iteration, which zstd turns
 * into almost nothing, and no address is lost. After any alloc of p, p leaves
 * the freed lists; after any free of p it enters them.
 *
 * Pointers the model does not predict are written as a delta from one of
 * four cursors -- the one nearest to the pointer, or the least recently used
 * when none is within 1 MiB -- and the cursor index rides in the kind byte's
 * high nibble. A program walking several regions at once (a table and its
 * entries, two arenas) then gets small repeating deltas for each.
 *
 * The byte-level meaning of the codes is in docs/trace-format.md; changing
 * anything here changes the format.
 */
#ifndef ML_ADDRESS_MODEL_H
#define ML_ADDRESS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ML__RECENT 16
#define ML__CLASSES 1024
#define ML__CLASS_DEPTH 16
#define ML__CODE_GLOBAL ML__CLASS_DEPTH
#define ML__CURSORS 4

/* The lists below are rings of 16 entries, the most recent first: entry i
 * of a list is v[(h + i) & 15], so a push is a store and the head moving
 * back, and a drop moves only the entries in front of the dropped one
 * (usually few: allocators and programs reuse what they touched last). The
 * order of the entries, which the codes index, is the same as that of a
 * plain array shifted on every push. */
#define ML__RING 16
_Static_assert(ML__CLASS_DEPTH == ML__RING && ML__RECENT == ML__RING, "the model's lists are rings of 16");

typedef struct {
    uint64_t usable;
    uint64_t ptr[ML__CLASS_DEPTH];
    uint8_t n, h;
} ml__size_class_t;

typedef struct {
    uint64_t v[ML__CURSORS];
    uint8_t age[ML__CURSORS];
} ml__cursors_t;

typedef struct {
    ml__cursors_t alloc_cur, free_cur;
    uint64_t freed[ML__RECENT];
    uint8_t nfreed, hfreed, nlive, hlive;
    uint64_t live_ptr[ML__RECENT], live_usable[ML__RECENT];
    /* The classes of cls and live_cls written since the last reset, a bit
     * each: a reset zeroes those only. The two tables are 290 KB, and a
     * trace writer was reset at its start and before its snapshot: zeroing
     * them whole was a quarter of the collector's time with many short
     * processes, and made every live process hold all of their pages. */
    uint64_t dirty[2][ML__CLASSES / 64];
    ml__size_class_t cls[ML__CLASSES];      /* per usable size, the last blocks freed */
    ml__size_class_t live_cls[ML__CLASSES]; /* per usable size, the last blocks allocated, still live */
} ml__model_t;

/* What the records of one chunk are encoded against, the writer's and the
 * reader's alike: the clock and thread of the previous record (changes are
 * ML_T_TIME and ML_T_THREAD_SWITCH records), the previous pointer, node id
 * and return address (deltas), and the address model. Every chunk starts
 * from zero, so that it decodes on its own. */
typedef struct {
    uint32_t time_ms, thread;
    uint64_t prev_ptr;
    uint32_t prev_node;
    uint64_t prev_pc;
    ml__model_t model;
} ml__chunk_state_t;

/* Zeroes the state; its model's classes only where they were written (a
 * state that was all zero, as from calloc or mmap, stays untouched there). */
static inline void ml__chunk_state_reset(ml__chunk_state_t *s) {
    ml__model_t *m = &s->model;
    for (int t = 0; t < 2; t++) {
        ml__size_class_t *tab = t ? m->live_cls : m->cls;
        for (unsigned w = 0; w < ML__CLASSES / 64; w++)
            for (uint64_t bits = m->dirty[t][w]; bits; bits &= bits - 1)
                memset(&tab[w * 64 + (unsigned)__builtin_ctzll(bits)], 0, sizeof *tab);
    }
    memset(s, 0, offsetof(ml__chunk_state_t, model) + offsetof(ml__model_t, cls));
}

static inline void ml__model_dirty(ml__model_t *m, int table, unsigned cl) {
    m->dirty[table][cl / 64] |= 1ull << (cl % 64);
}

/* ------------------------------------------------------------------------- */
/* Cursors                                                                   */
/* ------------------------------------------------------------------------- */

static inline int ml__cursor_pick(const ml__cursors_t *c, uint64_t p) {
    int best = 0, lru = 0;
    uint64_t bd = UINT64_MAX;
    for (int i = 0; i < ML__CURSORS; i++) {
        uint64_t d = p > c->v[i] ? p - c->v[i] : c->v[i] - p;
        if (d < bd) bd = d, best = i;
        if (c->age[i] > c->age[lru]) lru = i;
    }
    return bd < (1u << 20) ? best : lru;
}

/* A pointer within 4 KiB of a cursor: a stream of such frees
 * (walking an array of blocks) compresses better as cursor deltas. */
static inline bool ml__near_cursor(const ml__cursors_t *c, uint64_t p) {
    for (int i = 0; i < ML__CURSORS; i++) {
        uint64_t d = p > c->v[i] ? p - c->v[i] : c->v[i] - p;
        if (d < 4096) return true;
    }
    return false;
}

static inline void ml__cursor_set(ml__cursors_t *c, int i, uint64_t v) {
    c->v[i] = v;
    for (int j = 0; j < ML__CURSORS; j++)
        if (c->age[j] < 255) c->age[j]++;
    c->age[i] = 0;
}

/* ------------------------------------------------------------------------- */
/* Rings: small ordered lists, the most recent first                         */
/* ------------------------------------------------------------------------- */

static inline unsigned ml__class_of(uint64_t usable) {
    if (usable < 16 * ML__CLASSES) return (unsigned)(usable >> 4);
    return (unsigned)((usable * 0x9e3779b97f4a7c15ull) >> 54);
}

static inline unsigned ml__ring_slot(uint8_t h, int i) {
    return (unsigned)(h + i) & (ML__RING - 1);
}

/* The position of p in the list (0: the most recent), or -1. */
static inline int ml__ring_find(const uint64_t *v, uint8_t n, uint8_t h, uint64_t p) {
    for (int i = 0; i < n; i++)
        if (v[ml__ring_slot(h, i)] == p) return i;
    return -1;
}

/* p becomes entry 0; when the list was full, its oldest entry is gone. */
static inline void ml__ring_push(uint64_t *v, uint8_t *n, uint8_t *h, uint64_t p) {
    *h = (uint8_t)((*h - 1) & (ML__RING - 1));
    v[*h] = p;
    if (*n < ML__RING) (*n)++;
}

/* Removes entry k: the k entries before it move one place back. */
static inline void ml__ring_drop(uint64_t *v, uint8_t *n, uint8_t *h, int k) {
    for (int i = k; i > 0; i--) v[ml__ring_slot(*h, i)] = v[ml__ring_slot(*h, i - 1)];
    *h = (uint8_t)((*h + 1) & (ML__RING - 1));
    (*n)--;
}

/* ------------------------------------------------------------------------- */
/* The model                                                                 */
/* ------------------------------------------------------------------------- */

/* Where `ptr`, about to be allocated with `usable` bytes, stands in the
 * model's lists of freed blocks: its size class's (-1 if not there) and the
 * global one (-1). The writer predicts from it, and both sides then update
 * the model with it (ml__model_alloc_at), so the lists are searched once. */
typedef struct {
    int cls, freed;
} ml__model_pos_t;

static inline ml__model_pos_t ml__model_find_freed(const ml__model_t *m, uint64_t usable,
                                                   uint64_t ptr) {
    const ml__size_class_t *c = &m->cls[ml__class_of(usable)];
    ml__model_pos_t at = {-1, -1};
    if (c->usable == usable) at.cls = ml__ring_find(c->ptr, c->n, c->h, ptr);
    at.freed = ml__ring_find(m->freed, m->nfreed, m->hfreed, ptr);
    return at;
}

/* The code that predicts the allocation found at `at`, or -1. */
static inline int ml__model_code(ml__model_pos_t at) {
    if (at.cls >= 0) return at.cls;
    return at.freed >= 0 ? ML__CODE_GLOBAL + at.freed : -1;
}

/* The code that predicts `ptr` for an allocation of `usable` bytes, or -1. */
static inline int ml__model_predict(const ml__model_t *m, uint64_t usable, uint64_t ptr) {
    return ml__model_code(ml__model_find_freed(m, usable, ptr));
}

/* The address a code stands for (the reader's side), or 0 if invalid. */
static inline uint64_t ml__model_resolve(const ml__model_t *m, uint64_t usable, unsigned code) {
    const ml__size_class_t *c = &m->cls[ml__class_of(usable)];
    if (code < ML__CODE_GLOBAL) return c->usable == usable && code < c->n ? c->ptr[ml__ring_slot(c->h, (int)code)] : 0;
    code -= ML__CODE_GLOBAL;
    return code < m->nfreed ? m->freed[ml__ring_slot(m->hfreed, (int)code)] : 0;
}

/* The model after an allocation of `ptr` that ml__model_find_freed placed
 * at `at` (nothing changed the model in between). */
static inline void ml__model_alloc_at(ml__model_t *m, uint64_t ptr, uint64_t usable,
                                      ml__model_pos_t at) {
    unsigned cl = ml__class_of(usable);
    ml__size_class_t *c = &m->cls[cl];
    if (at.cls >= 0) ml__ring_drop(c->ptr, &c->n, &c->h, at.cls);
    ml__size_class_t *lc = &m->live_cls[cl];
    if (lc->usable != usable) {
        lc->usable = usable;
        lc->n = 0;
    }
    ml__ring_push(lc->ptr, &lc->n, &lc->h, ptr);
    ml__model_dirty(m, 1, cl);
    if (at.freed >= 0) ml__ring_drop(m->freed, &m->nfreed, &m->hfreed, at.freed);
    uint8_t n = m->nlive;
    ml__ring_push(m->live_ptr, &n, &m->hlive, ptr);
    m->live_usable[m->hlive] = usable;
    m->nlive = n;
}

static inline void ml__model_alloc(ml__model_t *m, uint64_t ptr, uint64_t usable) {
    ml__model_alloc_at(m, ptr, usable, ml__model_find_freed(m, usable, ptr));
}

/* Index of `ptr` among the last RECENT allocations still live, or -1. */
static inline int ml__model_find_live(const ml__model_t *m, uint64_t ptr) {
    return ml__ring_find(m->live_ptr, m->nlive, m->hlive, ptr);
}

/* The k-th of the last RECENT allocations still live (k < nlive). */
static inline void ml__model_live_at(const ml__model_t *m, int k, uint64_t *ptr, uint64_t *usable) {
    unsigned s = ml__ring_slot(m->hlive, k);
    *ptr = m->live_ptr[s];
    *usable = m->live_usable[s];
}

static inline void ml__model_drop_live(ml__model_t *m, int k) {
    for (int i = k; i > 0; i--) {
        unsigned to = ml__ring_slot(m->hlive, i), from = ml__ring_slot(m->hlive, i - 1);
        m->live_ptr[to] = m->live_ptr[from];
        m->live_usable[to] = m->live_usable[from];
    }
    m->hlive = (uint8_t)((m->hlive + 1) & (ML__RING - 1));
    m->nlive--;
}

/* Position of a live block in its size class's list, or -1. */
static inline int ml__model_find_live_class(const ml__model_t *m, uint64_t ptr, uint64_t usable) {
    const ml__size_class_t *lc = &m->live_cls[ml__class_of(usable)];
    return usable && lc->usable == usable ? ml__ring_find(lc->ptr, lc->n, lc->h, ptr) : -1;
}

/* The reader's side of ml__model_find_live_class: the k-th live block of
 * that usable size, or false when the model holds no such block. */
static inline bool ml__model_live_class_at(const ml__model_t *m, uint64_t usable, unsigned k,
                                           uint64_t *ptr) {
    const ml__size_class_t *lc = &m->live_cls[ml__class_of(usable)];
    if (!usable || lc->usable != usable || k >= lc->n) return false;
    *ptr = lc->ptr[ml__ring_slot(lc->h, (int)k)];
    return true;
}

static inline void ml__model_free(ml__model_t *m, uint64_t ptr, uint64_t usable) {
    ml__ring_push(m->freed, &m->nfreed, &m->hfreed, ptr);
    if (!usable) return;
    unsigned cl = ml__class_of(usable);
    ml__size_class_t *lc = &m->live_cls[cl];
    int k;
    if (lc->usable == usable && (k = ml__ring_find(lc->ptr, lc->n, lc->h, ptr)) >= 0)
        ml__ring_drop(lc->ptr, &lc->n, &lc->h, k);
    ml__size_class_t *c = &m->cls[cl];
    if (c->usable != usable) {
        c->usable = usable;
        c->n = 0;
    }
    ml__ring_push(c->ptr, &c->n, &c->h, ptr);
    ml__model_dirty(m, 0, cl);
}

#endif
