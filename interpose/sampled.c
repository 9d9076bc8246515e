/* sampled.c - the set of live sampled blocks (--sample).
 *
 * With sampling, a free must be recorded exactly when its block was sampled:
 * recording every free would cost as much as not sampling, and a filter that
 * only says "maybe" fails on allocators that reuse one address millions of
 * times. So the sampled blocks alive now are kept in an exact set:
 *
 *   - membership tests (every free) are lock-free: probe an open-addressing
 *     table whose entries are published with release stores;
 *   - inserts and removals (sampled blocks only, a few per MiB allocated)
 *     take a spinlock; removal leaves a tombstone, so a concurrent probe is
 *     never cut short;
 *   - when live entries plus tombstones pass half the table, a new table is
 *     built and published. Old tables stay mapped, since a probe may still be
 *     reading one; a block inserted after the swap cannot be freed by a
 *     thread still looking at the old table (its free happens after the
 *     insert, which happens after the swap).
 */
#define _GNU_SOURCE
#include "interpose_internal.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TOMBSTONE 1u

typedef struct {
    uint64_t cap;   /* entries, power of two */
    uint64_t used;  /* live + tombstones */
    uint64_t live;
    _Atomic uint64_t key[];
} set_t;

static _Atomic(set_t *) current;
static _Atomic int lock;

static set_t *set_new(uint64_t cap) {
    set_t *s = ml__raw_alloc(sizeof(set_t) + cap * sizeof(uint64_t));
    if (!s) return NULL;
    s->cap = cap;
    return s;
}

static inline uint64_t home(const set_t *s, uint64_t p) {
    return ((p >> 4) * 0x9e3779b97f4a7c15ull >> 20) & (s->cap - 1);
}

static void lock_take(void) {
    ml__spin_lock(&lock);
}

static void lock_drop(void) {
    ml__spin_unlock(&lock);
}

static _Atomic uint64_t *probe(set_t *s, uint64_t p) {
    uint64_t mask = s->cap - 1;
    for (uint64_t i = home(s, p), n = 0; n < s->cap; i = (i + 1) & mask, n++) {
        uint64_t k = ml_atomic_load_acquire(&s->key[i]);
        if (k == p) return &s->key[i];
        if (k == 0) return NULL;
    }
    return NULL;
}

static void put(set_t *s, uint64_t p) {
    uint64_t mask = s->cap - 1;
    uint64_t i = home(s, p);
    for (;;) {
        uint64_t k = ml_atomic_load_relaxed(&s->key[i]);
        if (k == 0 || k == TOMBSTONE) break;
        i = (i + 1) & mask;
    }
    if (ml_atomic_load_relaxed(&s->key[i]) == 0) s->used++;
    ml_atomic_store_release(&s->key[i], p);
    s->live++;
}

bool ml__sampled_contains(const void *ptr) {
    set_t *s = ml_atomic_load_acquire(&current);
    return s && probe(s, (uint64_t)(uintptr_t)ptr) != NULL;
}

void ml__sampled_add(const void *ptr) {
    uint64_t p = (uint64_t)(uintptr_t)ptr;
    lock_take();
    set_t *s = ml_atomic_load_acquire(&current);
    if (!s || (s->used + 1) * 2 > s->cap) {
        uint64_t live = s ? s->live : 0;
        uint64_t cap = 4096;
        while (cap < (live + 1) * 4) cap *= 2;
        set_t *n = set_new(cap);
        if (!n) {
            /* No memory for the set: this block's free will not be seen,
             * and the analysis will report it live. Count it as truncated. */
            if (ml__ring) ml_atomic_add_relaxed(&ml__ring->lost, 1);
            lock_drop();
            return;
        }
        if (s)
            for (uint64_t i = 0; i < s->cap; i++) {
                uint64_t k = ml_atomic_load_relaxed(&s->key[i]);
                if (k > TOMBSTONE) put(n, k);
            }
        ml_atomic_store_release(&current, n);
        s = n;
    }
    if (!probe(s, p)) put(s, p);
    lock_drop();
}

bool ml__sampled_remove(const void *ptr) {
    uint64_t p = (uint64_t)(uintptr_t)ptr;
    if (!ml__sampled_contains(ptr)) return false;
    lock_take();
    set_t *s = ml_atomic_load_acquire(&current);
    _Atomic uint64_t *k = s ? probe(s, p) : NULL;
    if (k) {
        ml_atomic_store_release(k, TOMBSTONE);
        s->live--;
    }
    lock_drop();
    return k != NULL;
}

void ml__sampled_lock(void) {
    lock_take();
}

void ml__sampled_unlock(void) {
    lock_drop();
}

void ml__sampled_reset(void) {
    /* After fork the child starts a new trace: blocks sampled by the parent
     * are unknown to it. The lock was taken in fork_prepare. */
    ml_atomic_store_release(&current, NULL);
}
