/* live.c - the live heap blocks, kept compact (ml__live_t in
 * analysis_internal.h).
 *
 * Why not a hash map of blocks: the collector keeps every live block of the
 * program, one lookup per event. As a map of 32-byte entries at most 3/4
 * full, 19 M live blocks took a 1 GiB table (2 GiB while it doubled), twice
 * the program's own RSS, and each event paid a cache and TLB miss somewhere
 * in that gigabyte (issue 12).
 *
 * Layout. Blocks are grouped by the 4 KiB page their address is in (a
 * chunk). A directory (ml_map.h) finds a page's chunk; a chunk is one
 * allocation holding two arrays sorted by address: the 12-bit offsets in
 * the page (with the leak kind in the 3 bits above), and an 18-byte record
 * per block. A block costs 20 bytes plus the chunks' spare room (an eighth
 * at most: chunks come in size classes, below), against 32 bytes in a table
 * half empty on average.
 *
 * The record keeps the size in 24 bits and the slack (usable size - size)
 * in the 8 above: 0-253, or SLACK_NONE for "not recorded". Sizes of 16 MiB
 * and more, and slacks of 254 bytes and more (glibc's mmapped chunks, size
 * classes of other allocators: large blocks, few of them), take the code
 * SIDE, and the block's size and slack live in a small side map. With a
 * 32-bit size and a 16-bit slack the record was 20 bytes, and a block 22:
 * on python3-dicts (2.4 M blocks at the peak) the 2 bytes were 4.8 MB of
 * the collector's 82 MB.
 *
 * Heap addresses are dense and programs free near where they allocate, so
 * most events land in the chunk of the event before (kept in `last`) or in
 * a directory slot that is cached; a chunk's offsets are a few cache lines.
 * Inserting in a chunk moves the entries after it: at most 4096, usually a
 * few dozen (a page holds 256 blocks of 16 bytes).
 *
 * Order. The layout is a function of the set of live blocks, not of the
 * history that led to it, and walking it (ml__live_cursor_t) gives blocks
 * in address order: snapshots store blocks in that order, and a restored
 * set is the same set.
 */
#include "analysis_internal.h"
#include "ml_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SHIFT 12
#define CHUNK_MASK ((1u << CHUNK_SHIFT) - 1)
#define REACH_SHIFT 12
#define SIZE_BITS 24
#define SIZE_MASK ((1u << SIZE_BITS) - 1)
#define SLACK_NONE 0xfeu /* slack code: not recorded (ML__SLACK_UNKNOWN) */
#define SIDE 0xffu       /* slack code: size and slack are in `big` */
#define DEAD 0x8000u        /* an offset's mark: the block was removed (below) */

/* A packed set (ml__live_set_packed): the snapshot's bytes of its blocks. */
struct ml__lpacked_s {
    void *buf;        /* freed with the set (NULL: the bytes belong to the caller) */
    const uint8_t *p; /* the first block's bytes */
    size_t len;
    uint32_t nstats;
};

typedef struct {
    uint64_t key; /* page number + 1 */
    ml__lchunk_t *c;
} dir_t;
ML_MAP_TYPED(dir, dir_t, 64)

typedef struct {
    uint64_t ptr;
    uint64_t size;
    uint16_t slack;
} big_t;
ML_MAP_TYPED(bigs, big_t, 16)

/* Removal marks the entry DEAD instead of moving the entries after it: a
 * program that frees its heap in address order (Python's teardown) removed
 * each chunk's first entry, and moved all the others, once per free. Dead
 * entries keep their offset, so the array stays sorted; an insert at a dead
 * entry's offset takes it over, a full chunk drops its dead entries before
 * it grows, and a chunk whose live entries are all gone is freed. */
struct ml__lchunk_s {
    uint16_t n, cap; /* entries (dead ones included), room */
    uint16_t nlive;  /* entries not DEAD */
    uint16_t pad;
    /* uint16_t off[cap]; then ml__lrec_t rec[cap] */
};

static inline uint16_t *offs(ml__lchunk_t *c) {
    return (uint16_t *)(c + 1);
}
static inline ml__lrec_t *recs(ml__lchunk_t *c) {
    return (ml__lrec_t *)((char *)(c + 1) + (size_t)c->cap * sizeof(uint16_t));
}

/* A chunk's bytes, rounded to 8 (a free chunk holds a free-list link). */
static size_t chunk_bytes(uint32_t cap) {
    size_t b = sizeof(ml__lchunk_t) + (size_t)cap * (sizeof(uint16_t) + sizeof(ml__lrec_t));
    return (b + 7) & ~(size_t)7;
}

/* ------------------------------------------------------------------------- */
/* Chunk memory                                                              */
/* ------------------------------------------------------------------------- */

/* Chunks have a capacity of a size class: 8, then steps of 4 up to 32,
 * then 8 classes per doubling up to 4096 (so a chunk of more than 32 has at
 * most an eighth spare, 6 % on average; a smaller one at most 3 entries).
 * The small classes were even numbers from 4 up to 32: a page filled with
 * 40 blocks went through 17 chunks and copied 300 entries, and on
 * clang-format the collector made 830,000 chunks for 3.9 M calls
 * (chunk_resize: 6 % of its time). Now 9 chunks and 176 entries. Each class has a free list; new chunks are carved from
 * arenas that double from 64 KiB to 8 MiB, the large ones advised for
 * transparent huge pages. With malloc, 17 % of a big heap's replay was in
 * _int_malloc, nearly all of it the first touch of fresh 4 KiB pages
 * (perf); an arena's 2 MiB pages fault once each. Memory is given back when
 * the set is freed, and reused by its class before. */
#define NCLASS 63 /* class_index(4096) + 1 */
#define ARENA_MIN (64u << 10)
#define ARENA_MAX (8u << 20)

typedef struct ml__lslab_s ml__lslab_t;
struct ml__lslab_s {
    void *free[NCLASS];  /* free chunks of each class, linked through their first word */
    char *cur;           /* the arena being carved */
    size_t left;         /* bytes left in it */
    size_t next_arena;   /* the size of the next arena */
    void **arenas;
    size_t narenas, arenas_cap;
};

/* The smallest class capacity that holds `need` blocks (need <= 4096). */
static uint32_t class_cap(uint32_t need) {
    if (need <= 8) return 8;
    if (need <= 32) return (need + 3) & ~3u;
    uint32_t lg = 31 - (uint32_t)__builtin_clz(need - 1); /* floor(log2(need - 1)) */
    uint32_t step = 1u << (lg - 3);
    return (need + step - 1) & ~(step - 1);
}

static uint32_t class_index(uint32_t cap) {
    if (cap <= 32) return cap / 4 - 2;
    uint32_t lg = 31 - (uint32_t)__builtin_clz(cap - 1);
    return 7 + (lg - 5) * 8 + (cap - (1u << lg)) / (1u << (lg - 3)) - 1;
}

static void *slab_alloc(ml__live_t *L, uint32_t cap) {
    ml__lslab_t *S = L->slab;
    if (!S) {
        S = L->slab = calloc(1, sizeof *S);
        if (!S) return NULL;
        S->next_arena = ARENA_MIN;
    }
    uint32_t k = class_index(cap);
    if (S->free[k]) {
        void *p = S->free[k];
        S->free[k] = *(void **)p;
        return p;
    }
    size_t bytes = chunk_bytes(cap);
    if (S->left < bytes) {
        if (S->narenas == S->arenas_cap) {
            size_t n = S->arenas_cap ? S->arenas_cap * 2 : 16;
            void **v = realloc(S->arenas, n * sizeof *v);
            if (!v) return NULL;
            S->arenas = v;
            S->arenas_cap = n;
        }
        size_t size = S->next_arena;
        char *a = ml__alloc.realloc(NULL, size); /* tests can starve it */
        if (!a) return NULL;
        if (size >= (4u << 20)) ml_advise_huge(a, size);
        S->arenas[S->narenas++] = a;
        S->cur = a;
        S->left = size;
        if (S->next_arena < ARENA_MAX) S->next_arena *= 2;
    }
    void *p = S->cur;
    S->cur += bytes;
    S->left -= bytes;
    return p;
}

static void slab_free(ml__live_t *L, ml__lchunk_t *c) {
    uint32_t k = class_index(c->cap);
    *(void **)c = L->slab->free[k];
    L->slab->free[k] = c;
}

/* A chunk of `cap` slots (a class capacity, at least c's live entries)
 * holding c's live entries (c may be NULL: empty); c goes back to its
 * class. */
static ml__lchunk_t *chunk_resize(ml__live_t *L, ml__lchunk_t *c, uint32_t cap) {
    ml__lchunk_t *n = slab_alloc(L, cap);
    if (!n) return NULL;
    n->n = n->nlive = 0;
    n->cap = (uint16_t)cap;
    n->pad = 0;
    if (c && c->nlive == c->n) {
        /* No dead entries (a page being filled): two copies. */
        memcpy(offs(n), offs(c), (size_t)c->n * sizeof(uint16_t));
        memcpy(recs(n), recs(c), (size_t)c->n * sizeof(ml__lrec_t));
        n->n = c->n;
    } else {
        for (uint32_t i = 0; c && i < c->n; i++) {
            if (offs(c)[i] & DEAD) continue;
            offs(n)[n->n] = offs(c)[i];
            recs(n)[n->n++] = recs(c)[i];
        }
    }
    n->nlive = n->n;
    if (c) slab_free(L, c);
    return n;
}

/* Drops the dead entries in place. */
static void compact(ml__lchunk_t *c) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        if (offs(c)[i] & DEAD) continue;
        if (k != i) {
            offs(c)[k] = offs(c)[i];
            recs(c)[k] = recs(c)[i];
        }
        k++;
    }
    c->n = c->nlive = (uint16_t)k;
}

/* The first index whose offset is >= off (n: none). Branch-free: each
 * halving picks its side with a conditional move, so a search costs its
 * loads and no mispredicted branch. A chunk of 256 entries takes 8 steps,
 * half of them mispredicted as branches; with the branches, the search led
 * the collector's samples in the big heap's teardown (issue 12). */
static inline uint32_t lower(ml__lchunk_t *c, uint32_t off) {
    const uint16_t *o = offs(c);
    uint32_t n = c->n, base = 0;
    if (!n) return 0;
    while (n > 1) {
        uint32_t half = n / 2;
        base = (uint32_t)(o[base + half] & CHUNK_MASK) < off ? base + half : base;
        n -= half;
    }
    return base + ((uint32_t)(o[base] & CHUNK_MASK) < off);
}

/* lower() for an insert: a page being filled gets blocks at rising
 * addresses, so the end of the chunk is tried first. */
static inline uint32_t lower_put(ml__lchunk_t *c, uint32_t off) {
    uint32_t n = c->n;
    if (!n || (uint32_t)(offs(c)[n - 1] & CHUNK_MASK) < off) return n;
    return lower(c, off);
}

/* The chunk of a page (NULL: none), through the one-entry cache that
 * writers keep; readers (ml__live_get) leave the cache alone, so that
 * concurrent readers share nothing they write. */
static ml__lchunk_t *chunk_of(ml__live_t *L, uint64_t key) {
    if (L->last && L->last_key == key) return L->last;
    dir_t *d = dir_find(&L->dir, key);
    if (!d) return NULL;
    L->last = d->c;
    L->last_key = key;
    return d->c;
}

static ml__lchunk_t *chunk_find(const ml__live_t *L, uint64_t key) {
    if (L->last && L->last_key == key) return L->last;
    const dir_t *d = dir_find(&L->dir, key);
    return d ? d->c : NULL;
}

static inline bool rec_side(const ml__lrec_t *r) {
    return r->size_slack >> SIZE_BITS == SIDE;
}

/* The size and slack of record r of the block at ptr. A side entry that is
 * missing (it cannot be) reads as the largest size, slack unknown. */
static inline uint64_t rec_size(const ml__live_t *L, const ml__lrec_t *r, uint64_t ptr,
                                uint32_t *slack) {
    uint32_t v = r->size_slack, code = v >> SIZE_BITS;
    if (ml_likely(code < SLACK_NONE)) {
        *slack = code;
        return v & SIZE_MASK;
    }
    if (code == SLACK_NONE) {
        *slack = ML__SLACK_UNKNOWN;
        return v & SIZE_MASK;
    }
    const big_t *b = bigs_find(&L->big, ptr);
    *slack = b ? b->slack : ML__SLACK_UNKNOWN;
    return b ? b->size : ML__SIZE_MAX;
}

static void decode(const ml__live_t *L, ml__lchunk_t *c, uint32_t i, uint64_t ptr, ml__block_t *out) {
    const ml__lrec_t *r = &recs(c)[i];
    uint32_t slack;
    uint64_t size = rec_size(L, r, ptr, &slack);
    *out = ml__block_make(ptr, size, (offs(c)[i] >> REACH_SHIFT) & 7u, (uint64_t)r->seq_hi << 32 | r->seq_lo,
                          slack, r->stack, r->time_ms);
}

/* Stores b (size included) at index i of c, whose record had a side entry
 * if was_side; -ENOMEM when the side map found no room (nothing changed
 * then). */
static int encode(ml__live_t *L, ml__lchunk_t *c, uint32_t i, const ml__block_t *b, bool was_side) {
    uint32_t code;
    if (b->slack == ML__SLACK_UNKNOWN)
        code = SLACK_NONE;
    else
        code = b->slack < SLACK_NONE ? (uint32_t)b->slack : SIDE;
    if (b->size > SIZE_MASK) code = SIDE;
    if (code == SIDE) {
        bool existed;
        big_t *e = bigs_put(&L->big, b->ptr, &existed);
        if (!e) return -ENOMEM;
        e->size = b->size;
        e->slack = (uint16_t)b->slack;
    } else if (was_side) {
        big_t *e = bigs_find(&L->big, b->ptr);
        if (e) bigs_remove(&L->big, e);
    }
    offs(c)[i] = (uint16_t)((b->ptr & CHUNK_MASK) | (uint32_t)b->reach << REACH_SHIFT);
    recs(c)[i] = (ml__lrec_t){
        .stack = b->stack,
        .size_slack = code << SIZE_BITS | (code == SIDE ? 0 : (uint32_t)b->size),
        .time_ms = b->time_ms,
        .seq_lo = (uint32_t)b->seq,
        .seq_hi = (uint16_t)(b->seq >> 32),
    };
    return 0;
}

int ml__live_put(ml__live_t *L, const ml__block_t *b, ml__block_t *old, bool *existed) {
    *existed = false;
    if (ml_unlikely(L->packed != NULL) && ml__live_unpack(L) < 0) return -ENOMEM;
    uint64_t key = (b->ptr >> CHUNK_SHIFT) + 1;
    uint32_t off = (uint32_t)(b->ptr & CHUNK_MASK);
    ml__lchunk_t *c = chunk_of(L, key);
    if (c) {
        uint32_t i = lower_put(c, off);
        if (i < c->n && (offs(c)[i] & CHUNK_MASK) == off) {
            if (offs(c)[i] & DEAD) { /* the slot of a removed block */
                if (encode(L, c, i, b, false) < 0) return -ENOMEM;
                c->nlive++;
                L->count++;
                return 0;
            }
            decode(L, c, i, b->ptr, old);
            *existed = true;
            return encode(L, c, i, b, rec_side(&recs(c)[i]));
        }
        if (c->n == c->cap && c->nlive < c->n) compact(c);
    }
    /* A new block: the chunk may need to be made, or to grow. */
    if (!c || c->n == c->cap) {
        uint32_t n = c ? c->n : 0;
        uint32_t cap = class_cap(n + 1);
        bool fresh = !c;
        dir_t *d = NULL;
        if (fresh) {
            bool e;
            d = dir_put(&L->dir, key, &e);
            if (!d) return -ENOMEM;
        } else {
            d = dir_find(&L->dir, key);
        }
        ml__lchunk_t *nc = chunk_resize(L, c, cap);
        if (!nc) {
            if (fresh) dir_remove(&L->dir, d);
            return -ENOMEM;
        }
        d->c = nc;
        c = nc;
        L->last = c;
        L->last_key = key;
        L->bytes += chunk_bytes(cap) - (fresh ? 0 : chunk_bytes(n));
    }
    uint32_t i = lower_put(c, off);
    uint32_t tail = c->n - i;
    if (tail) {
        memmove(&offs(c)[i + 1], &offs(c)[i], tail * sizeof(uint16_t));
        memmove(&recs(c)[i + 1], &recs(c)[i], tail * sizeof(ml__lrec_t));
    }
    c->n++;
    if (encode(L, c, i, b, false) < 0) {
        c->n--;
        if (tail) {
            memmove(&offs(c)[i], &offs(c)[i + 1], tail * sizeof(uint16_t));
            memmove(&recs(c)[i], &recs(c)[i + 1], tail * sizeof(ml__lrec_t));
        }
        return -ENOMEM;
    }
    c->nlive++;
    L->count++;
    return 0;
}

/* Blocks in rising address order, a page at a time (a snapshot's
 * restore): restoring 5 M blocks through ml__live_put looked each one's
 * chunk up, grew each page's chunk through its classes (8, 12, ... 64 for a
 * page of 64 blocks, a copy each time) and searched its end; ml__live_put
 * was the largest part of the restore after the varints (perf, c-tiny-10M).
 * Here a page's blocks are counted first, so its chunk is made once, at the
 * class capacity that ml__live_put's growth ends at, and filled in order:
 * the set is the one ml__live_put would make of the same blocks (the same
 * chunks, directory and side map, inserted in the same order). A page that
 * already has a chunk (blocks not above the set's) goes through
 * ml__live_put. */
uint32_t ml__live_append(ml__live_t *L, const ml__block_t *v, uint32_t n, bool all, int *err) {
    *err = 0;
    if (ml_unlikely(L->packed != NULL) && (*err = ml__live_unpack(L)) < 0) return 0;
    uint32_t i = 0;
    while (i < n) {
        uint64_t key = (v[i].ptr >> CHUNK_SHIFT) + 1;
        uint32_t j = i + 1;
        while (j < n && (v[j].ptr >> CHUNK_SHIFT) + 1 == key && v[j].ptr > v[j - 1].ptr) j++;
        if (j == n && !all) break; /* the page may go on in the next blocks */
        bool sorted = j == n || (v[j].ptr >> CHUNK_SHIFT) + 1 != key;
        if (!sorted || j - i > CHUNK_MASK + 1 || chunk_find(L, key)) {
            /* Not in order (or the page has blocks already): one at a time. */
            for (; i < j; i++) {
                ml__block_t old;
                bool existed;
                if (ml__live_put(L, &v[i], &old, &existed) < 0) {
                    *err = -ENOMEM;
                    return i;
                }
            }
            continue;
        }
        uint32_t cap = class_cap(j - i);
        bool e;
        dir_t *d = dir_put(&L->dir, key, &e);
        if (!d) {
            *err = -ENOMEM;
            return i;
        }
        ml__lchunk_t *c = slab_alloc(L, cap);
        if (!c) {
            dir_remove(&L->dir, d);
            *err = -ENOMEM;
            return i;
        }
        c->n = c->nlive = 0;
        c->cap = (uint16_t)cap;
        c->pad = 0;
        uint16_t *o = offs(c);
        ml__lrec_t *rc = recs(c);
        for (uint32_t k = i; k < j; k++) {
            const ml__block_t *b = &v[k];
            if (ml_likely(b->size <= SIZE_MASK && (b->slack < SLACK_NONE || b->slack == ML__SLACK_UNKNOWN))) {
                /* encode()'s record without a side entry, inline */
                uint32_t code = b->slack == ML__SLACK_UNKNOWN ? SLACK_NONE : (uint32_t)b->slack;
                o[c->n] = (uint16_t)((b->ptr & CHUNK_MASK) | (uint32_t)b->reach << REACH_SHIFT);
                rc[c->n] = (ml__lrec_t){
                    .stack = b->stack,
                    .size_slack = code << SIZE_BITS | (uint32_t)b->size,
                    .time_ms = b->time_ms,
                    .seq_lo = (uint32_t)b->seq,
                    .seq_hi = (uint16_t)(b->seq >> 32),
                };
                c->n++;
                continue;
            }
            if (encode(L, c, c->n, b, false) < 0) {
                /* Back out the page: its side entries, its chunk. */
                for (uint32_t q = 0; q < c->n; q++)
                    if (rec_side(&recs(c)[q])) {
                        big_t *bg = bigs_find(&L->big, v[i + q].ptr);
                        if (bg) bigs_remove(&L->big, bg);
                    }
                slab_free(L, c);
                dir_remove(&L->dir, dir_find(&L->dir, key));
                *err = -ENOMEM;
                return i;
            }
            c->n++;
        }
        c->nlive = c->n;
        d->c = c;
        L->last = c;
        L->last_key = key;
        L->bytes += chunk_bytes(cap);
        L->count += c->n;
        i = j;
    }
    return i;
}

/* The index of the live block at offset `off` of c, or -1. */
static inline int32_t index_of(ml__lchunk_t *c, uint32_t off) {
    uint32_t i = lower(c, off);
    if (i >= c->n || (offs(c)[i] & (CHUNK_MASK | DEAD)) != off) return -1;
    return (int32_t)i;
}

bool ml__live_get(const ml__live_t *L, uint64_t ptr, ml__block_t *out) {
    if (L->packed) {
        /* by address: the walk stops at the first block at or above ptr */
        ml__live_cursor_t cur;
        ml__block_t e;
        bool found = false;
        if (ml__live_cursor_init(&cur, L) < 0) return false;
        while (ml__live_next(&cur, &e) && e.ptr <= ptr)
            if (e.ptr == ptr) {
                *out = e;
                found = true;
                break;
            }
        ml__live_cursor_free(&cur);
        return found;
    }
    ml__lchunk_t *c = chunk_find(L, (ptr >> CHUNK_SHIFT) + 1);
    if (!c) return false;
    int32_t i = index_of(c, (uint32_t)(ptr & CHUNK_MASK));
    if (i < 0) return false;
    decode(L, c, (uint32_t)i, ptr, out);
    return true;
}

/* index_of() for a removal. Programs often free blocks in the order they
 * were made, so in address order within a page: a teardown frees the entry
 * after the one freed last, a program that frees every other block the
 * one after that, a stack-like one the one before. Those three are tried
 * first, each checked, so a guess is never wrong (a chunk holds one live
 * entry per offset). The search's chain of dependent loads was the most
 * of ml__live_take's cost: 10 M blocks kept, every other one freed in
 * address order, ml__live_take took 13 % of the collector's samples while
 * the program freed. */
static inline int32_t take_index(const ml__live_t *L, ml__lchunk_t *c, uint32_t off) {
    const uint16_t *o = offs(c);
    uint32_t h = L->take_next, n = c->n;
    if (h < n && (o[h] & (CHUNK_MASK | DEAD)) == off) return (int32_t)h;
    if (h + 1 < n && (o[h + 1] & (CHUNK_MASK | DEAD)) == off) return (int32_t)h + 1;
    if (h >= 2 && h - 2 < n && (o[h - 2] & (CHUNK_MASK | DEAD)) == off) return (int32_t)h - 2;
    return index_of(c, off);
}

bool ml__live_take(ml__live_t *L, uint64_t ptr, ml__block_t *out) {
    if (ml_unlikely(L->packed != NULL) && ml__live_unpack(L) < 0) return false;
    uint64_t key = (ptr >> CHUNK_SHIFT) + 1;
    ml__lchunk_t *c = chunk_of(L, key);
    if (!c) return false;
    int32_t i = take_index(L, c, (uint32_t)(ptr & CHUNK_MASK));
    if (i < 0) return false;
    L->take_next = (uint32_t)i + 1;
    decode(L, c, (uint32_t)i, ptr, out);
    if (rec_side(&recs(c)[i])) {
        big_t *e = bigs_find(&L->big, ptr);
        if (e) bigs_remove(&L->big, e);
    }
    offs(c)[i] |= DEAD;
    c->nlive--;
    L->count--;
    if (c->nlive == 0) {
        dir_t *d = dir_find(&L->dir, key);
        L->bytes -= chunk_bytes(c->cap);
        slab_free(L, c);
        dir_remove(&L->dir, d);
        L->last = NULL;
    } else if (c->cap > 8 && c->nlive < c->cap / 4) {
        /* Give the room back once three quarters are free (growth leaves an
         * eighth spare: no chunk flips between the two). */
        uint32_t cap = class_cap(c->nlive + c->nlive / 8 + 1);
        uint32_t was = c->cap;
        ml__lchunk_t *nc = chunk_resize(L, c, cap);
        if (nc) {
            dir_find(&L->dir, key)->c = nc;
            L->last = nc;
            L->last_key = key;
            L->bytes -= chunk_bytes(was) - chunk_bytes(cap);
        }
    }
    return true;
}

bool ml__live_set_reach(ml__live_t *L, uint64_t ptr, unsigned reach) {
    if (ml_unlikely(L->packed != NULL) && ml__live_unpack(L) < 0) return false;
    ml__lchunk_t *c = chunk_of(L, (ptr >> CHUNK_SHIFT) + 1);
    if (!c) return false;
    uint32_t off = (uint32_t)(ptr & CHUNK_MASK);
    /* The exit scan's verdicts come in address order, so the block is
     * usually the entry after the one set last. The guess is checked, so
     * it can never be wrong: a chunk holds one live entry per offset. With
     * 7.5 M verdicts, the search was the largest part of writing them. */
    uint32_t h = L->reach_next;
    int32_t i = h < c->n && (offs(c)[h] & (CHUNK_MASK | DEAD)) == off ? (int32_t)h : index_of(c, off);
    if (i < 0) return false;
    offs(c)[i] = (uint16_t)(off | (reach & 7u) << REACH_SHIFT);
    L->reach_next = (uint32_t)i + 1;
    return true;
}

uint64_t ml__live_set_reach_rest(ml__live_t *L, unsigned reach) {
    if (L->packed && ml__live_unpack(L) < 0) return 0;
    const dir_t *d = dir_entries(&L->dir);
    uint16_t mark = (uint16_t)((reach & 7u) << REACH_SHIFT);
    uint64_t n = 0;
    for (uint64_t k = 0; k < L->dir.cap; k++) {
        if (!d[k].key) continue;
        ml__lchunk_t *c = d[k].c;
        uint16_t *o = offs(c);
        for (uint32_t i = 0; i < c->n; i++)
            if (!(o[i] & (DEAD | 7u << REACH_SHIFT))) {
                o[i] |= mark;
                n++;
            }
    }
    return n;
}

void ml__live_prefetch(const ml__live_t *L, uint64_t ptr) {
    if (L->packed) return; /* the change that follows builds the chunks */
    dir_prefetch(&L->dir, (ptr >> CHUNK_SHIFT) + 1);
}

void ml__live_free(ml__live_t *L) {
    if (L->packed) {
        free(L->packed->buf);
        free(L->packed);
    }
    if (L->slab) {
        for (size_t i = 0; i < L->slab->narenas; i++) free(L->slab->arenas[i]);
        free(L->slab->arenas);
        free(L->slab);
    }
    ml_map_free(&L->dir);
    ml_map_free(&L->big);
    memset(L, 0, sizeof *L);
}

void ml__live_shrink(ml__live_t *L) {
    if (L->packed) return; /* nothing spare */
    (void)ml_map_shrink(&L->dir, sizeof(dir_t), 64);
    (void)ml_map_shrink(&L->big, sizeof(big_t), 16);
    L->last = NULL;
}

/* ------------------------------------------------------------------------- */
/* A packed set: the snapshot's bytes                                        */
/* ------------------------------------------------------------------------- */

int ml__live_set_packed(ml__live_t *L, const uint8_t *p, size_t len, uint64_t count, uint32_t nstats) {
    struct ml__lpacked_s *k = malloc(sizeof *k);
    if (!k) return -ENOMEM;
    *k = (struct ml__lpacked_s){.p = p, .len = len, .nstats = nstats};
    L->packed = k;
    L->count = count;
    return 0;
}

void ml__live_own_packed(ml__live_t *L, void *buf) {
    if (L->packed) L->packed->buf = buf;
}

/* The packed walk's next block: false at the end. The bytes were checked
 * when they were restored, so a block that does not decode (it cannot)
 * ends the walk. */
static inline bool packed_next(ml__live_cursor_t *cur, const struct ml__lpacked_s *k, ml__block_t *e) {
    if (!cur->pk_left) return false;
    ml__ibuf_t b = {.p = k->p, .len = k->len, .pos = cur->pk_pos};
    if (!ml__snap_next_block(&b, &cur->pk_ptr, e, k->nstats)) {
        cur->pk_left = 0;
        return false;
    }
    cur->pk_pos = b.pos;
    cur->pk_left--;
    return true;
}

static void packed_rewind(ml__live_cursor_t *cur, uint64_t count) {
    cur->pk_pos = 0;
    cur->pk_ptr = 0;
    cur->pk_left = count;
}

/* Blocks decoded ahead of the set, which takes them a page at a time
 * (ml__live_append): more than a page's 4096, so a full batch always holds
 * a whole page. */
#define LOAD_BATCH 8192u

int ml__live_load(ml__live_t *L, ml__ibuf_t *b, uint64_t count, uint32_t nstats) {
    uint64_t ptr = 0;
    ml__block_t *v = malloc(LOAD_BATCH * sizeof *v);
    if (!v) {
        /* No room for the batch: one block at a time. */
        for (uint64_t i = 0; i < count && !b->bad; i++) {
            ml__block_t e, old;
            bool existed;
            if (ml__snap_next_block(b, &ptr, &e, nstats) && ml__live_put(L, &e, &old, &existed) < 0)
                return -ENOMEM;
        }
        return 0;
    }
    int err = 0;
    uint32_t n = 0;
    for (uint64_t i = 0; i < count && ml__snap_next_block(b, &ptr, &v[n], nstats); i++) {
        if (++n == LOAD_BATCH) {
            uint32_t k = ml__live_append(L, v, n, false, &err);
            if (err < 0) break;
            memmove(v, v + k, (size_t)(n - k) * sizeof *v);
            n -= k;
        }
    }
    if (!b->bad && err == 0 && n) ml__live_append(L, v, n, true, &err);
    free(v);
    return err;
}

int ml__live_unpack(ml__live_t *L) {
    struct ml__lpacked_s *k = L->packed;
    if (!k) return 0;
    ml__ibuf_t b = {.p = k->p, .len = k->len};
    uint64_t count = L->count;
    /* the chunks are built as for any set, from empty */
    L->packed = NULL;
    L->count = 0;
    int err = ml__live_load(L, &b, count, k->nstats);
    free(k->buf);
    free(k);
    return err;
}

/* ------------------------------------------------------------------------- */
/* Walking in address order                                                  */
/* ------------------------------------------------------------------------- */

/* The cursor's copy of the directory: a chunk and its page number + 1
 * (named ptr for the radix sort), sorted by page. qsort took 45-75 ms of
 * each moment's close on the big heap (257,631 chunks, a perf probe). */
typedef struct {
    uint64_t ptr; /* the directory's key */
    ml__lchunk_t *c;
} cpage_t;

static int cmp_cpage(const void *x, const void *y) {
    uint64_t l = ((const cpage_t *)x)->ptr, r = ((const cpage_t *)y)->ptr;
    return l < r ? -1 : l > r;
}

RADIX_SORT(ml__sort_cpages, cpage_t, cmp_cpage)

int ml__live_cursor_init(ml__live_cursor_t *cur, const ml__live_t *L) {
    memset(cur, 0, sizeof *cur);
    cur->L = L;
    if (L->packed) {
        packed_rewind(cur, L->count);
        return 0;
    }
    uint64_t n = L->dir.count;
    if (!n) return 0;
    cpage_t *v = malloc(n * sizeof *v);
    if (!v) return -ENOMEM;
    const dir_t *d = dir_entries(&L->dir);
    for (uint64_t i = 0; i < L->dir.cap && cur->nkeys < n; i++)
        if (d[i].key) v[cur->nkeys++] = (cpage_t){d[i].key, d[i].c};
    ml__sort_cpages(v, cur->nkeys);
    cur->pages = v;
    return 0;
}

/* The next live entry's index in the cursor's chunk (moving on to the next
 * chunk as needed), or false at the end. */
static inline bool cursor_step(ml__live_cursor_t *cur, uint32_t *at) {
    const cpage_t *pages = cur->pages;
    for (;;) {
        if (cur->k >= cur->nkeys) return false;
        ml__lchunk_t *c = pages[cur->k].c;
        const uint16_t *o = offs(c);
        while (cur->i < c->n && (o[cur->i] & DEAD)) cur->i++;
        if (cur->i < c->n) {
            *at = cur->i++;
            return true;
        }
        cur->i = 0;
        cur->k++;
    }
}

bool ml__live_next(ml__live_cursor_t *cur, ml__block_t *out) {
    if (cur->L->packed) return packed_next(cur, cur->L->packed, out);
    uint32_t i;
    if (!cursor_step(cur, &i)) return false;
    const cpage_t *p = &((const cpage_t *)cur->pages)[cur->k];
    decode(cur->L, p->c, i, (p->ptr - 1) << CHUNK_SHIFT | (offs(p->c)[i] & CHUNK_MASK), out);
    return true;
}

uint32_t ml__live_next_ends(ml__live_cursor_t *cur, ml__eblock_t *out, uint32_t max) {
    uint32_t n = 0, i;
    if (cur->L->packed) {
        ml__block_t b;
        while (n < max && packed_next(cur, cur->L->packed, &b))
            out[n++] = (ml__eblock_t){.ptr = b.ptr, .size = b.size, .slack = b.slack, .stack = b.stack,
                                      .reach = b.reach};
        return n;
    }
    while (n < max && cursor_step(cur, &i)) {
        const cpage_t *p = &((const cpage_t *)cur->pages)[cur->k];
        ml__lchunk_t *c = p->c;
        const ml__lrec_t *r = &recs(c)[i];
        uint16_t o = offs(c)[i];
        ml__eblock_t *e = &out[n++];
        e->ptr = (p->ptr - 1) << CHUNK_SHIFT | (o & CHUNK_MASK);
        e->size = rec_size(cur->L, r, e->ptr, &e->slack);
        e->stack = r->stack;
        e->reach = (o >> REACH_SHIFT) & 7u;
    }
    return n;
}

static inline bool next_fblock(ml__live_cursor_t *cur, uint64_t max_seq, ml__fblock_t *out,
                               uint64_t *seq) {
    if (cur->L->packed) {
        ml__block_t b;
        while (packed_next(cur, cur->L->packed, &b)) {
            if (b.seq > max_seq) continue;
            *out = ml__fblock_make(b.ptr, ml__size48(b.size), b.slack);
            *seq = b.seq;
            return true;
        }
        return false;
    }
    const cpage_t *pages = cur->pages;
    for (;;) {
        uint32_t i;
        if (!cursor_step(cur, &i)) return false;
        ml__lchunk_t *c = pages[cur->k].c;
        const ml__lrec_t *r = &recs(c)[i];
        uint64_t q = (uint64_t)r->seq_hi << 32 | r->seq_lo;
        if (q > max_seq) continue;
        uint64_t ptr = (pages[cur->k].ptr - 1) << CHUNK_SHIFT | (offs(c)[i] & CHUNK_MASK);
        uint32_t slack;
        uint64_t size = rec_size(cur->L, r, ptr, &slack);
        *out = ml__fblock_make(ptr, ml__size48(size), (uint16_t)slack);
        *seq = q;
        return true;
    }
}

bool ml__live_next_fblock(ml__live_cursor_t *cur, uint64_t max_seq, ml__fblock_t *out) {
    uint64_t seq;
    return next_fblock(cur, max_seq, out, &seq);
}

bool ml__live_next_fblock_seq(ml__live_cursor_t *cur, uint64_t max_seq, ml__fblock_t *out,
                              uint64_t *seq) {
    return next_fblock(cur, max_seq, out, seq);
}

void ml__live_cursor_rewind(ml__live_cursor_t *cur) {
    if (cur->L->packed) packed_rewind(cur, cur->L->count);
    cur->k = 0;
    cur->i = 0;
}

void ml__live_cursor_free(ml__live_cursor_t *cur) {
    free(cur->pages);
    memset(cur, 0, sizeof *cur);
}

/* ------------------------------------------------------------------------- */
/* Blocks by index (the exit scan)                                           */
/* ------------------------------------------------------------------------- */

/* Chunks further apart than this many pages start another region. */
#define REGION_GAP_PAGES (16384u) /* 64 MiB */

/* The page index of the region (chunks with no gap of REGION_GAP_PAGES
 * between them) that holds the most chunks, when it has at most 16 pages
 * per chunk: a word's chunk is then one load away instead of a search
 * among all chunks, which tripled the exit scan's time on 7.5 M blocks
 * (1.0 to 2.9 s). Without it (no memory, no dense region), the search. */
static void page_chunks(ml__live_index_t *x) {
    const cpage_t *pg = x->pages;
    uint64_t best = 0, best_n = 0;
    for (uint64_t k = 0, start = 0; k <= x->npages; k++) {
        if (k < x->npages && !(k > start && pg[k].ptr - pg[k - 1].ptr > REGION_GAP_PAGES)) continue;
        if (k - start > best_n) {
            best = start;
            best_n = k - start;
        }
        start = k;
    }
    if (best_n < 64 || x->npages >= UINT32_MAX) return;
    uint64_t plo = pg[best].ptr, phi = pg[best + best_n - 1].ptr + 1; /* keys, [plo, phi) */
    uint64_t npg = phi - plo;
    if (npg > 16 * best_n) return;
    uint32_t *pgk = malloc((size_t)(npg + 1) * sizeof *pgk);
    if (!pgk) return;
    uint64_t k = best;
    for (uint64_t j = 0; j <= npg; j++) {
        while (k < x->npages && pg[k].ptr < plo + j) k++;
        pgk[j] = (uint32_t)k;
    }
    x->pgk = pgk;
    x->plo = plo;
    x->npg = npg;
}

int ml__live_index_init(ml__live_index_t *x, ml__live_t *L) {
    memset(x, 0, sizeof *x);
    if (L->packed && ml__live_unpack(L) < 0) return -ENOMEM;
    x->L = L;
    ml__live_cursor_t cur;
    if (ml__live_cursor_init(&cur, L) < 0) return -ENOMEM;
    x->pages = cur.pages;
    x->npages = cur.nkeys;
    x->base = malloc((x->npages + 1) * sizeof *x->base);
    if (!x->base) {
        ml__live_index_free(x);
        return -ENOMEM;
    }
    const cpage_t *pg = x->pages;
    uint64_t n = 0;
    for (uint64_t k = 0; k < x->npages; k++) {
        ml__lchunk_t *c = pg[k].c;
        if (c->nlive != c->n) compact(c); /* an index counts live entries only */
        x->base[k] = n;
        n += c->n;
    }
    x->base[x->npages] = n;
    x->n = n;
    L->last = NULL; /* the writers' cache is left valid, but drop it all the same */
    page_chunks(x);
    return 0;
}

void ml__live_index_free(ml__live_index_t *x) {
    free(x->pages);
    free(x->base);
    free(x->pgk);
    memset(x, 0, sizeof *x);
}

static inline void index_entry(const ml__live_index_t *x, uint64_t k, uint32_t j, uint64_t *ptr,
                               uint64_t *size) {
    const cpage_t *p = &((const cpage_t *)x->pages)[k];
    ml__lchunk_t *c = p->c;
    *ptr = (p->ptr - 1) << CHUNK_SHIFT | (offs(c)[j] & CHUNK_MASK);
    uint32_t slack;
    *size = rec_size(x->L, &recs(c)[j], *ptr, &slack);
}

/* The chunk that holds block i (*hint, below). */
static uint64_t index_chunk(const ml__live_index_t *x, uint64_t i, uint64_t *hint) {
    const uint64_t *base = x->base;
    uint64_t k = *hint;
    if (!(k < x->npages && base[k] <= i && i < base[k + 1])) {
        if (k + 1 < x->npages && base[k + 1] <= i && i < base[k + 2]) {
            k++;
        } else {
            /* The last chunk whose first block is at or below i. */
            uint64_t lo = 0, hi = x->npages;
            while (hi - lo > 1) {
                uint64_t mid = (lo + hi) / 2;
                if (base[mid] <= i) lo = mid;
                else hi = mid;
            }
            k = lo;
        }
        *hint = k;
    }
    return k;
}

void ml__live_index_block(const ml__live_index_t *x, uint64_t i, uint64_t *hint, uint64_t *ptr,
                          uint64_t *size) {
    uint64_t k = index_chunk(x, i, hint);
    index_entry(x, k, (uint32_t)(i - x->base[k]), ptr, size);
}

uint64_t ml__live_index_seq(const ml__live_index_t *x, uint64_t i, uint64_t *hint) {
    uint64_t k = index_chunk(x, i, hint);
    const ml__lrec_t *r = &recs(((const cpage_t *)x->pages)[k].c)[i - x->base[k]];
    return (uint64_t)r->seq_hi << 32 | r->seq_lo;
}

int64_t ml__live_index_floor(const ml__live_index_t *x, uint64_t p, uint64_t *hint, uint64_t *ptr,
                             uint64_t *size) {
    if (!x->npages) return -1;
    uint64_t key = (p >> CHUNK_SHIFT) + 1;
    const cpage_t *g;
    if (hint && *hint < x->npages && ((const cpage_t *)x->pages)[*hint].ptr == key) {
        /* The page of the word before: the words of a block point near
         * each other (an array of pointers to blocks made in turn). */
        g = (const cpage_t *)x->pages + *hint;
    } else if (x->pgk && key - x->plo < x->npg) {
        /* The first chunk at or after p's page; if it is not p's page's,
         * the one before it. */
        uint32_t k = x->pgk[key - x->plo];
        g = (const cpage_t *)x->pages + k;
        if (g->ptr != key) {
            if (k == 0) return -1;
            g--;
        }
    } else {
        /* The last chunk whose page is at or below p's, without a branch
         * on the data (as reach.c's searches). */
        g = x->pages;
        uint64_t n = x->npages;
        while (n > 1) {
            uint64_t half = n / 2;
            g = g[half].ptr <= key ? g + half : g;
            n -= half;
        }
    }
    if (g->ptr > key) return -1;
    uint64_t k = (uint64_t)(g - (const cpage_t *)x->pages);
    if (hint) *hint = k;
    int64_t j = (int64_t)g->c->n - 1;
    if (g->ptr == key) {
        /* The last entry at or below p's offset, without a branch on the
         * data: lower()'s branches made this search 6 % of the collector's
         * samples on big10 (perf). */
        const uint16_t *o = offs(g->c), *q = o;
        uint32_t off = (uint32_t)(p & CHUNK_MASK), m = g->c->n;
        while (m > 1) {
            uint32_t half = m / 2;
            q = (q[half] & CHUNK_MASK) <= off ? q + half : q;
            m -= half;
        }
        j = (int64_t)(q - o) + ((*q & CHUNK_MASK) <= off) - 1;
    }
    if (j < 0) {
        if (k == 0) return -1; /* p lies before the first block */
        k--;
        j = (int64_t)((const cpage_t *)x->pages)[k].c->n - 1;
    }
    index_entry(x, k, (uint32_t)j, ptr, size);
    return (int64_t)(x->base[k] + (uint64_t)j);
}
