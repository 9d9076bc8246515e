/* gpu_internal.h - shared by the GPU files of analysis/; never included
 * from another folder.
 *
 *   gpu.c           the streaming pass over GPU records, and the queries
 *   gpu_treap.c     the live address ranges of a device (gpu_treap.h)
 *   gpu_advice.c    the advice rules (ml_gpu_suggest)
 *   gpu_snapshot.c  the GPU state in the analysis snapshot
 *   gpu_session.c   what needs the session: its GPU state, a stack's frames
 *
 * The session (analysis.c, snapshot.c) uses the four hooks below and
 * nothing else of this header.
 */
#ifndef ML_GPU_INTERNAL_H
#define ML_GPU_INTERNAL_H

#include "gpu_treap.h"
#include "ml_gpu.h"
#include "ml_map.h"
#include "snap_codec.h"

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------------------- */
/* The session's hooks                                                       */
/* ------------------------------------------------------------------------- */

/* gpu.c: consumes one record (any tag: only GPU records change the state).
 * Allocates *g at the first GPU record. When `t` is given, keeps
 * t->gpu_bytes / t->peak_gpu_bytes (device bytes, all devices) current for
 * the heap timeline. Out of memory drops the record and counts it
 * (ml_gpu_summary_t.dropped). */
void ml__gpu_feed(ml_gpu_t **g, const ml_record_t *r, ml_totals_t *t);

/* gpu.c: frees the state (NULL is fine). */
void ml__gpu_free(ml_gpu_t *g);

/* gpu_snapshot.c: the GPU state of a session (ml_gpu_t) in a snapshot. Save
 * returns 0, -ENOMEM (b->oom), or -ENOTSUP for a state it cannot restore
 * exactly. Restore allocates *g; on damaged bytes it marks b bad, frees what
 * it built and leaves *g NULL. */
int ml__gpu_save(const ml_gpu_t *g, ml__obuf_t *b);
void ml__gpu_restore(ml_gpu_t **g, ml__ibuf_t *b);

#define ML__MIB (1024ull * 1024)

/* ------------------------------------------------------------------------- */
/* Kinds                                                                     */
/* ------------------------------------------------------------------------- */

enum { S_DPTR, S_HOST_PINNED, S_HOST_REG, S_VMM_HANDLE, S_VMM_VA, S_VMM_MAP, S_ARRAY, S_COUNT };

static inline int space_of(unsigned kind) {
    switch (kind) {
    case ML_GPU_KIND_HOST_PINNED: return S_HOST_PINNED;
    case ML_GPU_KIND_HOST_REGISTERED: return S_HOST_REG;
    case ML_GPU_KIND_VMM_PHYSICAL: return S_VMM_HANDLE;
    case ML_GPU_KIND_VMM_RESERVE: return S_VMM_VA;
    case ML_GPU_KIND_VMM_MAP: return S_VMM_MAP;
    case ML_GPU_KIND_ARRAY: return S_ARRAY;
    default: return S_DPTR; /* device, pitch, managed, async, pool: one address space */
    }
}

/* What a block's bytes count as. */
enum { B_DEVICE, B_PINNED, B_NONE };

static inline int bytes_class(unsigned kind, uint16_t flags) {
    switch (kind) {
    case ML_GPU_KIND_HOST_PINNED:
    case ML_GPU_KIND_HOST_REGISTERED: return B_PINNED;
    case ML_GPU_KIND_VMM_PHYSICAL: return (flags & ML_GPU_F_HOST) ? B_PINNED : B_DEVICE;
    case ML_GPU_KIND_VMM_RESERVE:
    case ML_GPU_KIND_VMM_MAP: return B_NONE;
    default: return B_DEVICE;
    }
}

/* Ranges that occupy the device's virtual address space. */
static inline bool in_va(unsigned kind) {
    return space_of(kind) == S_DPTR || kind == ML_GPU_KIND_VMM_MAP;
}

/* ------------------------------------------------------------------------- */
/* State                                                                     */
/* ------------------------------------------------------------------------- */

typedef struct {
    uint64_t key; /* address or handle */
    uint64_t size;
    uint64_t handle;    /* VMM_MAP: the physical handle behind it */
    uint32_t site;      /* index into sites */
    uint32_t context;
    uint32_t time_ms;
    uint32_t maps;      /* VMM_PHYSICAL: live mappings of this handle */
    uint16_t flags;
    uint8_t space;      /* S_*, + 1 (0: empty slot) */
    uint8_t kind;
    uint8_t released;   /* VMM_PHYSICAL: cuMemRelease seen, freed at the last unmap */
    uint8_t dev;        /* index into devs */
} gblock_t;

typedef struct {
    gblock_t *e;
    uint64_t cap, count;
} gmap_t;

typedef struct {
    ml_gpu_site_t pub;
    uint32_t dev;
    uint64_t sizes[ML_GPU_SITE_SIZES], size_counts[ML_GPU_SITE_SIZES];
    bool many_sizes;
} gsite_t;

typedef struct {
    ml_gpu_device_t pub;
    treap_t va;
    bool peak_dirty; /* nothing decreased since the last new peak: live == at peak */
    uint64_t kind_ctx_bytes[ML_GPU_KIND_COUNT_], kind_ctx_blocks[ML_GPU_KIND_COUNT_];
    uint64_t pinned_ctx_bytes;
    /* timeline */
    ml_gpu_point_t *tl;
    size_t ntl;
    uint32_t tl_width;
    /* empty_cache detection */
    bool in_burst, burst_counted, drained, trim_pending;
    uint32_t burst_frees;
    uint64_t burst_start, drain_level;
    /* memory pools (ML_T_GPU_POOL) */
    struct gpool *pools;
    uint32_t pools_cap;
    uint32_t peak_corr; /* correlation id of the record that made the current peak */
} gdev_t;

/* A pool and the correlation ids of the states kept (ml_gpu.h explains the
 * join). */
typedef struct gpool {
    ml_gpu_pool_t pub;
    uint32_t cur_corr, peak_corr;
    bool have_cur, have_peak;
} gpool_t;

/* The last freed blocks, to restore one whose free failed. */
#define STASH 64

typedef struct {
    uint64_t key; /* ml__gpu_site_key() */
    uint32_t idx; /* index in sites */
    uint32_t unused;
} gsite_slot_t;

ML_MAP_TYPED(ml__gsite_index, gsite_slot_t, 256)

struct ml_gpu_s {
    ml_gpu_summary_t sum;
    gmap_t live;
    gdev_t *devs;
    size_t ndevs;
    gsite_t *sites;
    uint32_t nsites, sites_cap;
    ml_map_t site_index; /* gsite_slot_t: (device, stack, kind) -> index in sites */
    gblock_t stash[STASH];
    uint32_t stash_next;
    bool have_time;
    uint32_t corr; /* correlation id of the record being fed */
};

/* ------------------------------------------------------------------------- */
/* Shared by the GPU files                                                   */
/* ------------------------------------------------------------------------- */

/* gpu.c: the live block of (space, key), or NULL. */
gblock_t *ml__gmap_find(const gmap_t *m, int space, uint64_t key);
/* gpu.c: a device's pool sums at its peak, from its pools. */
void ml__gpu_pool_sums(gdev_t *d);

/* A site's key in the site index: (device ordinal, stack, kind), + 1 since
 * device 0's unknown stack with kind 0 would be 0, the map's empty key.
 * Sites are keyed by device ordinal, not by index, so that inserting a
 * device does not change keys. */
static inline uint64_t ml__gpu_site_key(int32_t device, uint32_t stack, unsigned kind) {
    return ((uint64_t)stack << 24 | (uint64_t)(uint8_t)kind << 16 | (uint16_t)(int16_t)device) + 1;
}

#endif
