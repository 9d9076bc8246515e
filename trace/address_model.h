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
#include <stdint.h>
#include <string.h>

#define ML__RECENT 16
#define ML__CLASSES 1024
#define ML__CLASS_DEPTH 16
#define ML__CODE_GLOBAL ML__CLASS_DEPTH
#define ML__CURSORS 4

typedef struct {
    uint64_t usable;
    uint64_t ptr[ML__CLASS_DEPTH];
    uint8_t n;
} ml__size_class_t;

typedef struct {
    uint64_t v[ML__CURSORS];
    uint8_t age[ML__CURSORS];
} ml__cursors_t;

typedef struct {
    ml__cursors_t alloc_cur, free_cur;
    uint64_t freed[ML__RECENT];
    uint8_t nfreed, nlive;
    struct {
        uint64_t ptr, usable;
    } live[ML__RECENT];
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

static inline void ml__chunk_state_reset(ml__chunk_state_t *s) {
    memset(s, 0, sizeof *s);
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
/* Small ordered lists                                                       */
/* ------------------------------------------------------------------------- */

static inline unsigned ml__class_of(uint64_t usable) {
    if (usable < 16 * ML__CLASSES) return (unsigned)(usable >> 4);
    return (unsigned)((usable * 0x9e3779b97f4a7c15ull) >> 54);
}

static inline int ml__find_u64(const uint64_t *v, int n, uint64_t p) {
    for (int i = 0; i < n; i++)
        if (v[i] == p) return i;
    return -1;
}

static inline void ml__drop_u64(uint64_t *v, uint8_t *n, int k) {
    memmove(v + k, v + k + 1, (size_t)(*n - k - 1) * sizeof *v);
    (*n)--;
}

static inline void ml__push_u64(uint64_t *v, uint8_t *n, int cap, uint64_t p) {
    int keep = *n < cap ? *n : cap - 1;
    memmove(v + 1, v, (size_t)keep * sizeof *v);
    v[0] = p;
    *n = (uint8_t)(keep + 1);
}

/* ------------------------------------------------------------------------- */
/* The model                                                                 */
/* ------------------------------------------------------------------------- */

/* The code that predicts `ptr` for an allocation of `usable` bytes, or -1. */
static inline int ml__model_predict(const ml__model_t *m, uint64_t usable, uint64_t ptr) {
    const ml__size_class_t *c = &m->cls[ml__class_of(usable)];
    if (c->usable == usable) {
        int k = ml__find_u64(c->ptr, c->n, ptr);
        if (k >= 0) return k;
    }
    int k = ml__find_u64(m->freed, m->nfreed, ptr);
    return k >= 0 ? ML__CODE_GLOBAL + k : -1;
}

/* The address a code stands for (the reader's side), or 0 if invalid. */
static inline uint64_t ml__model_resolve(const ml__model_t *m, uint64_t usable, unsigned code) {
    const ml__size_class_t *c = &m->cls[ml__class_of(usable)];
    if (code < ML__CODE_GLOBAL) return c->usable == usable && code < c->n ? c->ptr[code] : 0;
    code -= ML__CODE_GLOBAL;
    return code < m->nfreed ? m->freed[code] : 0;
}

static inline void ml__model_alloc(ml__model_t *m, uint64_t ptr, uint64_t usable) {
    ml__size_class_t *c = &m->cls[ml__class_of(usable)];
    int k;
    if (c->usable == usable && (k = ml__find_u64(c->ptr, c->n, ptr)) >= 0)
        ml__drop_u64(c->ptr, &c->n, k);
    ml__size_class_t *lc = &m->live_cls[ml__class_of(usable)];
    if (lc->usable != usable) {
        lc->usable = usable;
        lc->n = 0;
    }
    ml__push_u64(lc->ptr, &lc->n, ML__CLASS_DEPTH, ptr);
    if ((k = ml__find_u64(m->freed, m->nfreed, ptr)) >= 0) ml__drop_u64(m->freed, &m->nfreed, k);
    int keep = m->nlive < ML__RECENT ? m->nlive : ML__RECENT - 1;
    memmove(m->live + 1, m->live, (size_t)keep * sizeof m->live[0]);
    m->live[0].ptr = ptr;
    m->live[0].usable = usable;
    m->nlive = (uint8_t)(keep + 1);
}

/* Index of `ptr` among the last RECENT allocations still live, or -1. */
static inline int ml__model_find_live(const ml__model_t *m, uint64_t ptr) {
    for (int i = 0; i < m->nlive; i++)
        if (m->live[i].ptr == ptr) return i;
    return -1;
}

static inline void ml__model_drop_live(ml__model_t *m, int k) {
    memmove(m->live + k, m->live + k + 1, (size_t)(m->nlive - k - 1) * sizeof m->live[0]);
    m->nlive--;
}

/* Position of a live block in its size class's list, or -1. */
static inline int ml__model_find_live_class(const ml__model_t *m, uint64_t ptr, uint64_t usable) {
    const ml__size_class_t *lc = &m->live_cls[ml__class_of(usable)];
    return usable && lc->usable == usable ? ml__find_u64(lc->ptr, lc->n, ptr) : -1;
}

/* The reader's side of ml__model_find_live_class: the k-th live block of
 * that usable size, or false when the model holds no such block. */
static inline bool ml__model_live_class_at(const ml__model_t *m, uint64_t usable, unsigned k,
                                           uint64_t *ptr) {
    const ml__size_class_t *lc = &m->live_cls[ml__class_of(usable)];
    if (!usable || lc->usable != usable || k >= lc->n) return false;
    *ptr = lc->ptr[k];
    return true;
}

static inline void ml__model_free(ml__model_t *m, uint64_t ptr, uint64_t usable) {
    ml__push_u64(m->freed, &m->nfreed, ML__RECENT, ptr);
    if (!usable) return;
    ml__size_class_t *lc = &m->live_cls[ml__class_of(usable)];
    int k;
    if (lc->usable == usable && (k = ml__find_u64(lc->ptr, lc->n, ptr)) >= 0)
        ml__drop_u64(lc->ptr, &lc->n, k);
    ml__size_class_t *c = &m->cls[ml__class_of(usable)];
    if (c->usable != usable) {
        c->usable = usable;
        c->n = 0;
    }
    ml__push_u64(c->ptr, &c->n, ML__CLASS_DEPTH, ptr);
}

#endif
