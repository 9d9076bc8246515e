/* ml_map.c - growing the analysis layer's hash map (ml_map.h); the probes
 * are inline in the header. */
#include "ml_map.h"
#include "ml_util.h"

#include <errno.h>
#include <stdlib.h>

/* Re-inserts every entry, in slot order, into a table of ncap slots: the
 * new layout follows from the old one. */
static int rehash(ml_map_t *m, size_t esize, uint64_t ncap) {
    void *n = ml__alloc.calloc(ncap, esize);
    if (!n) return -ENOMEM;
    /* The hooks' calloc asks for huge pages for a large table: its probes
     * go to random slots, and with 4 KiB pages a table of millions of live
     * blocks missed the TLB on nearly every event (the collector's per-event
     * cost on a 7 M-block heap was mostly that one load). */
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
