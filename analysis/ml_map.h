/* ml_map.h - the analysis layer's hash map: open addressing on a 64-bit key,
 * the value stored inline in an entry of the caller's type.
 *
 * High-level (analysis/); may allocate. One map, one hash, one growth rule
 * for every table keyed by a 64-bit word: the live set's page directory
 * (one lookup per event of a trace, live.c), the live mappings, the page
 * regions, the GPU sites, the site keys of a build, the simulator's address
 * and page tables.
 *
 * An entry is a struct of the caller whose FIRST member is the key, a
 * uint64_t; the rest of the entry is the value. Its size is a multiple of 8
 * bytes. ML_MAP_TYPED() below makes typed functions for one entry type, so
 * the entry size is a constant at every call and the compiler inlines the
 * probes with it (the live set's directory is on the collector's per-event path).
 *
 * Invariants:
 *   - key 0 is the empty slot and is never stored: a table whose keys may be
 *     0 stores key + 1 (or another encoding that is never 0), and says so;
 *   - every empty slot is all zero bytes, so a new entry's value starts zeroed;
 *   - cap is 0 (nothing allocated yet) or a power of two, at least the type's
 *     first capacity; the table grows by doubling before an insert would take
 *     it past 3/4 full, so a probe always ends at an empty slot;
 *   - linear probing from ml_map_hash(key) & (cap - 1); removal shifts the
 *     entries after the removed one back into place (backward-shift deletion),
 *     so there are no tombstones and lookups never slow down with churn;
 *   - the layout is a function of the keys inserted and removed, in order:
 *     two maps fed the same operations have every entry in the same slot (the
 *     analysis snapshot relies on it: it saves each live block's slot).
 *
 * Ownership: the map owns its table (ml_map_free releases it); entries are
 * plain data, and whatever an entry points to belongs to the caller.
 * Pointers to entries are valid until the next insert (which may grow the
 * table) or removal (which may move entries).
 *
 * Errors and out of memory: only an insert allocates. When the table cannot
 * grow, the insert returns NULL and the map is unchanged; the caller decides
 * what is lost and counts it. The table is allocated through
 * ml_alloc_hooks_t (ml_util.h), so a test can make that fail, and released
 * with free().
 *
 * Thread-safety: none. A map is read and written by one thread at a time;
 * concurrent finds without writers are safe.
 *
 * An all-zero ml_map_t is an empty map: a map inside a calloc'd struct needs
 * no initialisation.
 */
#ifndef ML_MAP_H
#define ML_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    void *e;        /* cap entries, of the size the typed functions give */
    uint64_t cap;   /* 0 or a power of two */
    uint64_t count; /* entries in use */
} ml_map_t;

/** The one hash of the analysis layer's tables: the first half of
 * MurmurHash3's 64-bit finalizer. Heap addresses differ in their middle bits;
 * the xor-shifts bring the high bits down and the multiply spreads every bit
 * upwards, so the low bits that index a table depend on all of them. The
 * analysis snapshot stores live blocks' slots relative to this hash: changing
 * it changes the snapshot format (ML_ANALYSIS_SNAPSHOT_VERSION). */
static inline uint64_t ml_map_hash(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/** Doubles the table of entries of `esize` bytes (to `first_cap` when it has
 * none) and re-inserts every entry. Returns 0 or -ENOMEM (the map is then
 * unchanged). Inserts call it; call it directly only to size a map ahead. */
int ml_map_grow(ml_map_t *m, size_t esize, uint64_t first_cap);

/** Moves the entries to the smallest table (at least `first_cap` slots) that
 * takes one more insert without growing, re-inserting them in slot order,
 * when that is smaller than the table now: the layout is again a function
 * of the layout before. Returns 0 (also when nothing was done) or -ENOMEM
 * (the map is then unchanged). A map keeps its largest size otherwise. */
int ml_map_shrink(ml_map_t *m, size_t esize, uint64_t first_cap);

/** Releases the table; the map is empty (and usable) again. */
void ml_map_free(ml_map_t *m);

/* ------------------------------------------------------------------------- */
/* The probes, for entries of `esize` bytes (use ML_MAP_TYPED's functions)   */
/* ------------------------------------------------------------------------- */

static inline uint64_t *ml__map_key(const ml_map_t *m, uint64_t i, size_t esize) {
    return (uint64_t *)((char *)m->e + i * esize);
}

/* The entry with this key, or NULL. */
__attribute__((always_inline)) static inline void *ml__map_find(const ml_map_t *m, uint64_t key,
                                                               size_t esize) {
    if (!m->cap || !key) return NULL;
    uint64_t mask = m->cap - 1;
    for (uint64_t i = ml_map_hash(key) & mask;; i = (i + 1) & mask) {
        uint64_t *k = ml__map_key(m, i, esize);
        if (*k == key) return k;
        if (!*k) return NULL;
    }
}

/* The entry with this key, inserted (key set, value zero) when there was
 * none; *existed says which. NULL when the table could not grow (or key is
 * 0). The table grows before the probe whenever the next insert could take
 * it past 3/4 full, even when the key turns out to be there: the layout then
 * depends on the operations only. */
__attribute__((always_inline)) static inline void *ml__map_put(ml_map_t *m, uint64_t key,
                                                              size_t esize, uint64_t first_cap,
                                                              bool *existed) {
    *existed = false;
    if (!key) return NULL;
    if ((m->count + 1) * 4 > m->cap * 3 && ml_map_grow(m, esize, first_cap) < 0) return NULL;
    uint64_t mask = m->cap - 1;
    uint64_t i = ml_map_hash(key) & mask;
    uint64_t *k;
    while (*(k = ml__map_key(m, i, esize)) && *k != key) i = (i + 1) & mask;
    if (*k) {
        *existed = true;
    } else {
        *k = key;
        m->count++;
    }
    return k;
}

/* Removes the entry e points to (an entry of this map). Entries after it in
 * its probe run move back to where a lookup finds them sooner; the slot left
 * empty at the end is zeroed. */
__attribute__((always_inline)) static inline void ml__map_remove(ml_map_t *m, void *e,
                                                                size_t esize) {
    uint64_t mask = m->cap - 1;
    uint64_t i = (uint64_t)((char *)e - (char *)m->e) / esize;
    m->count--;
    for (uint64_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        uint64_t *kj = ml__map_key(m, j, esize);
        if (!*kj) break;
        uint64_t home = ml_map_hash(*kj) & mask;
        /* The entry at j may fill slot i when i lies on its probe path, that
         * is, when i is no farther from j than j's home slot is. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            memcpy(ml__map_key(m, i, esize), kj, esize);
            i = j;
        }
    }
    memset(ml__map_key(m, i, esize), 0, esize);
}

/** Makes typed functions for a map of entries of type T (its first member
 * the uint64_t key) whose first table has FIRST_CAP slots (a power of two):
 *
 *   T *NAME_find(const ml_map_t *m, uint64_t key);       NULL: not there
 *   T *NAME_put(ml_map_t *m, uint64_t key, bool *existed);
 *         the entry (inserted with a zero value when *existed is false);
 *         NULL when out of memory, the map unchanged
 *   void NAME_remove(ml_map_t *m, T *e);                  e from find or put
 *   T *NAME_entries(const ml_map_t *m);                   the table, cap
 *         slots, to walk it (key 0: an empty slot)
 *   void NAME_prefetch(const ml_map_t *m, uint64_t key);  starts loading the
 *         slot a lookup of key begins at
 */
#define ML_MAP_TYPED(NAME, T, FIRST_CAP)                                                           \
    _Static_assert(sizeof(T) % 8 == 0, #T " must be a multiple of 8 bytes, its key first");       \
    _Static_assert(((FIRST_CAP) & ((FIRST_CAP) - 1)) == 0 && (FIRST_CAP) >= 4,                     \
                   "a map's first capacity is a power of two");                                    \
    static inline T *NAME##_find(const ml_map_t *m, uint64_t key) {                                \
        return (T *)ml__map_find(m, key, sizeof(T));                                               \
    }                                                                                              \
    static inline T *NAME##_put(ml_map_t *m, uint64_t key, bool *existed) {                        \
        return (T *)ml__map_put(m, key, sizeof(T), (FIRST_CAP), existed);                          \
    }                                                                                              \
    static inline void NAME##_remove(ml_map_t *m, T *e) {                                          \
        ml__map_remove(m, e, sizeof(T));                                                           \
    }                                                                                              \
    static inline T *NAME##_entries(const ml_map_t *m) {                                           \
        return (T *)m->e;                                                                          \
    }                                                                                              \
    /* A read prefetch, always inlined: GCC 12 emits nothing for                                   \
     * __builtin_prefetch(p, 1) on x86-64 without -mprfchw, and its pure-const                     \
     * analysis deletes calls to a function whose only effect is a prefetch.                       \
     * Both left this prefetch empty until issue 12. */                                            \
    __attribute__((always_inline)) static inline void NAME##_prefetch(const ml_map_t *m,            \
                                                                      uint64_t key) {               \
        if (m->cap) __builtin_prefetch((T *)m->e + (ml_map_hash(key) & (m->cap - 1)), 0);          \
    }

#endif
