/* ml_map.c - growing the analysis layer's hash map (ml_map.h); the probes
 * are inline in the header. */
#include "ml_map.h"
#include "ml_util.h"

#include <errno.h>
#include <stdlib.h>

int ml_map_grow(ml_map_t *m, size_t esize, uint64_t first_cap) {
    uint64_t ncap = m->cap ? m->cap * 2 : first_cap;
    void *n = ml__alloc.calloc(ncap, esize);
    if (!n) return -ENOMEM;
    /* Re-insert in slot order: the new layout follows from the old one. */
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

void ml_map_free(ml_map_t *m) {
    free(m->e);
    m->e = NULL;
    m->cap = m->count = 0;
}
