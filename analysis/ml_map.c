/* ml_map.c - growing the analysis layer's hash map (ml_map.h); the probes
 * are inline in the header. */
#include "ml_map.h"
#include "ml_util.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

/* A table this large asks for transparent huge pages. Its probes go to
 * random slots: with 4 KiB pages a table of millions of live blocks misses
 * the TLB on nearly every event, and the page walk misses the cache too
 * (the collector's per-event cost on a 7 M-block heap was mostly that one
 * load). With 2 MiB pages a GiB of table needs 512 TLB entries. Only the
 * whole 2 MiB pages inside the table are advised; a kernel without THP, or
 * with it off, ignores the advice. */
#define HUGE_TABLE_BYTES (8u << 20)
#define HUGE_PAGE (2u << 20)

static void advise_huge(void *p, size_t len) {
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + len) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

/* Re-inserts every entry, in slot order, into a table of ncap slots: the
 * new layout follows from the old one. */
static int rehash(ml_map_t *m, size_t esize, uint64_t ncap) {
    void *n = ml__alloc.calloc(ncap, esize);
    if (!n) return -ENOMEM;
    if (ncap * esize >= HUGE_TABLE_BYTES) advise_huge(n, ncap * esize);
    for (uint64_t i = 0; i < m->cap; i++) {
        const uint64_t *k = ml__map_key(m, i, esize);
        if (!*k) continue;
        uint64_t j = ml_map_hash(*k) & (ncap - 1);
        while (*(uint64_t *)((char *)n + j * esize)) j = (j + 1) & (ncap - 1);
        memcpy((char *)n + j * esize, k, esize);
    }
    free(m->e);
    m->e = n;
    m->cap = ncap;
    return 0;
}

int ml_map_grow(ml_map_t *m, size_t esize, uint64_t first_cap) {
    return rehash(m, esize, m->cap ? m->cap * 2 : first_cap);
}

int ml_map_shrink(ml_map_t *m, size_t esize, uint64_t first_cap) {
    uint64_t ncap = first_cap;
    while ((m->count + 1) * 4 > ncap * 3) ncap *= 2;
    if (ncap >= m->cap) return 0;
    return rehash(m, esize, ncap);
}

void ml_map_free(ml_map_t *m) {
    free(m->e);
    m->e = NULL;
    m->cap = m->count = 0;
}
