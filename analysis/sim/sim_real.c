/* sim_real.c - the allocator the program really used, measured from the
 * recorded addresses: the pages holding at least one live block [ptr,
 * ptr + size), the same page model as the simulated policies (the real
 * allocator's headers and rounding are not in the trace, so this is a lower
 * bound of what it touched). What it held from the OS, when the trace has
 * mallinfo samples, is kept apart (os_held_peak). Its free space and search
 * costs are not known. */
#include "sim_internal.h"

/* The page counts: a window of WIN_PAGES pages (64 GiB of addresses with
 * 4 KiB pages) placed around the first block's page, counted in chunks of
 * 4,096 counters made when first touched, and the generic sparse hash
 * (sim_core.c) for the pages outside it (another arena, a far mmap). The
 * recorded addresses of one heap are close together: the hash's probes
 * were half of this policy's time on cppcheck's report. A page is always
 * counted in the same place (the window does not move), so the counts,
 * and `held`, are those of the hash alone. */
#define CHUNK_LOG 12
#define WIN_CHUNKS 4096
#define WIN_PAGES ((uint64_t)WIN_CHUNKS << CHUNK_LOG)

typedef struct {
    ml_sim_policy_t base;
    uint64_t *id_ptr;
    uint32_t idcap;
    bool placed;   /* the window is placed (at the first block) */
    uint64_t wbase; /* its first page */
    uint32_t *chunk[WIN_CHUNKS];
    uint32_t nchunks;
} real_t;

static uint32_t *chunk_new(real_t *r, uint64_t c) {
    uint32_t *n = calloc((size_t)1 << CHUNK_LOG, sizeof *n);
    if (n) {
        r->chunk[c] = n;
        r->nchunks++;
    }
    return n;
}

static inline int page_inc(real_t *r, uint64_t page) {
    uint64_t k = page - r->wbase;
    if (k >= WIN_PAGES) return ml__sim_page_inc_slow(&r->base.pages, page);
    uint32_t *c = r->chunk[k >> CHUNK_LOG];
    if (!c && !(c = chunk_new(r, k >> CHUNK_LOG))) return -ENOMEM;
    if (c[k & ((1u << CHUNK_LOG) - 1)]++ == 0) r->base.pages.held++;
    return 0;
}

static inline void page_dec(real_t *r, uint64_t page) {
    uint64_t k = page - r->wbase;
    if (k >= WIN_PAGES) {
        ml__sim_page_dec_slow(&r->base.pages, page);
        return;
    }
    uint32_t *c = r->chunk[k >> CHUNK_LOG];
    if (!c) return;
    uint32_t *n = &c[k & ((1u << CHUNK_LOG) - 1)];
    if (*n && --*n == 0) r->base.pages.held--;
}

/* ml__sim_extent_add/remove with the window's counter. */
static int extent_add(real_t *r, uint64_t addr, uint64_t len) {
    ml_sim_policy_t *p = &r->base;
    uint64_t first = addr >> p->pages.shift, last = (addr + len - 1) >> p->pages.shift;
    if (!r->placed) { /* an eighth below the first page, the rest above: heaps grow up */
        r->placed = true;
        r->wbase = first > WIN_PAGES / 8 ? first - WIN_PAGES / 8 : 0;
    }
    if (addr + len > p->max_end) p->max_end = addr + len;
    if (page_inc(r, first) < 0) return -ENOMEM;
    if (last != first) {
        if (page_inc(r, last) < 0) {
            page_dec(r, first);
            return -ENOMEM;
        }
        p->pages.held += last - first - 1;
    }
    return 0;
}

static void extent_remove(real_t *r, uint64_t addr, uint64_t len) {
    ml_sim_policy_t *p = &r->base;
    uint64_t first = addr >> p->pages.shift, last = (addr + len - 1) >> p->pages.shift;
    page_dec(r, first);
    if (last != first) {
        page_dec(r, last);
        p->pages.held -= last - first - 1;
    }
}

static int real_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block) {
    real_t *r = (real_t *)p;
    if (op->id >= r->idcap && ml__sim_grow((void **)&r->id_ptr, &r->idcap, op->id, sizeof *r->id_ptr, 0) < 0)
        return -ENOMEM;
    uint64_t size = op->size ? op->size : 1;
    if (extent_add(r, op->ptr, size) < 0) return -ENOMEM;
    r->id_ptr[op->id] = op->ptr;
    *addr = op->ptr;
    *block = op->size;
    return 0;
}

static void real_free(ml_sim_policy_t *p, uint32_t id) {
    real_t *r = (real_t *)p;
    uint64_t size = p->ids[id].req - 1;
    extent_remove(r, r->id_ptr[id], size ? size : 1);
}

static void real_summary(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest) {
    (void)p;
    *free_bytes = *largest = 0;
}

static uint64_t real_state(const ml_sim_policy_t *p) {
    const real_t *r = (const real_t *)p;
    return (uint64_t)r->idcap * 8 + sizeof *r + (uint64_t)r->nchunks * (sizeof(uint32_t) << CHUNK_LOG);
}

static void real_destroy(ml_sim_policy_t *p) {
    real_t *r = (real_t *)p;
    for (uint32_t i = 0; i < WIN_CHUNKS; i++) free(r->chunk[i]);
    free(r->id_ptr);
    free(p);
}

/* Frees carry the recorded address: its page counter can load at once. */
static void real_prefetch(const ml_sim_policy_t *p, const ml_sim_op_t *op, int stage) {
    if (op->type != ML_SIM_FREE || stage != 0) return;
    const real_t *r = (const real_t *)p;
    uint64_t k = (op->ptr >> p->pages.shift) - r->wbase;
    if (k >= WIN_PAGES) {
        ml__sim_prefetch_page(p, op->ptr);
        return;
    }
    const uint32_t *c = r->chunk[k >> CHUNK_LOG];
    if (c) __builtin_prefetch(&c[k & ((1u << CHUNK_LOG) - 1)], 0);
}

static int real_reserve(ml_sim_policy_t *p, uint32_t ids) {
    real_t *r = (real_t *)p;
    return ml__sim_reserve_ids((void **)&r->id_ptr, &r->idcap, ids, sizeof *r->id_ptr, 0);
}

static const ml__sim_vt_t real_vt = {
    .reserve = real_reserve,
    .prefetch = real_prefetch,
    .alloc = real_alloc,
    .free = real_free,
    .free_summary = real_summary,
    .state_bytes = real_state,
    .destroy = real_destroy,
};

int ml_sim_real_new(const ml_sim_config_t *c, ml_sim_policy_t **out) {
    real_t *r = calloc(1, sizeof *r);
    if (!r) return -ENOMEM;
    ml__sim_init(&r->base, &real_vt, "real", c, true);
    r->base.known_fragmentation = false;
    r->base.known_cost = false;
    *out = &r->base;
    return 0;
}
