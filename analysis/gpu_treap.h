/* gpu_treap.h - the live address ranges of one GPU device, summarised at
 * every moment: an augmented treap (gpu_treap.c). Internal to analysis/.
 *
 * Each node is a range [start, end) and also holds the summary of its
 * subtree, so the root answers "how fragmented is the device now" in O(1)
 * and insert/remove cost O(log n). Ranges never overlap within one device
 * (the live map holds one block per address of a space). Out of memory:
 * ml__treap_insert returns -ENOMEM and the treap is unchanged. One thread at
 * a time; the treap owns its node array (free(t->n)).
 */
#ifndef ML_GPU_TREAP_H
#define ML_GPU_TREAP_H

#include "ml_gpu.h"

#include <stdint.h>

/* A node: its range, then the summary of its subtree. */
typedef struct {
    uint64_t start, end;
    uint64_t lo, hi, bytes, gaps, max_gap, holes, count;
    uint64_t breaks, nbreaks; /* gaps wider than ML_GPU_REGION_GAP: bytes, count */
    uint32_t prio;
    int32_t l, r;
} tnode_t;

typedef struct {
    tnode_t *n;
    int32_t cap, used, free_head, root;
    uint32_t rng;
} treap_t;

void ml__treap_init(treap_t *t);
/* Inserts [start, start + size) (a size of 0 counts as 1 byte). 0 or -ENOMEM. */
int ml__treap_insert(treap_t *t, uint64_t start, uint64_t size);
/* Removes the range that starts at `start` (none: nothing happens). */
void ml__treap_remove(treap_t *t, uint64_t start);
/* The device's fragmentation now, from the root's summary. */
void ml__treap_frag(const treap_t *t, uint32_t time_ms, ml_gpu_frag_t *f);

#endif
