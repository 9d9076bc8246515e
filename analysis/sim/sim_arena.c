/* sim_arena.c - bump (arena) allocation for phase-local groups.
 *
 * Each group (the allocation site, or everything with single_group) bumps a
 * pointer through its current 64 KiB chunk; a block that does not fit starts
 * a new chunk (one split), at least as large as the block rounded to pages.
 * Freeing a block only decrements its chunk's live count: the space comes
 * back when the whole chunk dies. A dead chunk is given back (one merge); the
 * group's current chunk is instead reset to its start and keeps its pages, as
 * an arena that is reset between phases does. Footprint: the pages a chunk
 * has touched, while it is held.
 *
 * This is the right tool for blocks allocated together and freed together
 * (a request, a frame, a parse): one pointer bump per allocation, no per-block
 * free, no fragmentation among them; and the wrong one when a single
 * long-lived block keeps a whole chunk alive. Free space inside a chunk is
 * dead until the chunk empties, so the external measure counts all of it.
 */
#include "sim_internal.h"

#define ARENA_CHUNK (64 * 1024)

typedef struct {
    uint64_t size, used, live_bytes, pages;
    uint32_t live, group, next_free;
    bool current;
} chunk_t;

typedef struct {
    uint64_t key; /* site + 1 */
    uint32_t cur; /* current chunk or ML__NIL */
    uint32_t unused;
} group_t;

ML_MAP_TYPED(groups, group_t, 256)

typedef struct {
    ml_sim_policy_t base;
    bool single;
    chunk_t *c;
    uint32_t ccap, cused, crecycle;
    ml_map_t g; /* group_t by site + 1 */
    uint32_t *id_chunk;
    uint32_t idcap;
    uint64_t held_bytes, live_bytes;
} arena_t;

static group_t *group_of(arena_t *a, uint32_t site) {
    bool existed;
    group_t *g = groups_put(&a->g, (uint64_t)(a->single ? 0 : site) + 1, &existed);
    if (g && !existed) g->cur = ML__NIL;
    return g;
}

static void chunk_release(arena_t *a, uint32_t x) {
    ml__sim_pages_sub(&a->base, a->c[x].pages);
    a->held_bytes -= a->c[x].pages * a->base.cfg.page_size;
    a->c[x].next_free = a->crecycle;
    a->crecycle = x;
    a->base.merges++;
}

static int arena_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block) {
    arena_t *a = (arena_t *)p;
    uint64_t align = ml__op_align(p, op), page = p->cfg.page_size;
    uint64_t size = ml__round_up(op->size ? op->size : 1, p->cfg.align);
    if (op->id >= a->idcap &&
        ml__sim_grow((void **)&a->id_chunk, &a->idcap, op->id, sizeof *a->id_chunk, 0xff) < 0)
        return -ENOMEM;
    group_t *g = group_of(a, op->site);
    if (!g) return -ENOMEM;
    p->search_steps++;
    uint32_t x = g->cur;
    uint64_t start = x != ML__NIL ? ml__round_up(a->c[x].used, align) : 0;
    if (x == ML__NIL || start + size > a->c[x].size) {
        if (x != ML__NIL) {
            a->c[x].current = false;
            if (!a->c[x].live) chunk_release(a, x);
        }
        if (a->crecycle != ML__NIL) {
            x = a->crecycle;
            a->crecycle = a->c[x].next_free;
        } else {
            if (a->cused == a->ccap) {
                uint32_t ncap = a->ccap ? a->ccap * 2 : 256;
                chunk_t *n = realloc(a->c, (size_t)ncap * sizeof *n);
                if (!n) return -ENOMEM;
                ml_advise_huge(n, (size_t)ncap * sizeof *n);
                a->c = n;
                a->ccap = ncap;
            }
            x = a->cused++;
        }
        uint64_t csize = ARENA_CHUNK;
        if (size + align > csize) csize = ml__round_up(size + align, page);
        a->c[x] = (chunk_t){.size = csize, .group = (uint32_t)(g - groups_entries(&a->g)), .current = true};
        g->cur = x;
        start = 0;
        p->splits++;
    }
    chunk_t *c = &a->c[x];
    c->used = start + size;
    c->live++;
    c->live_bytes += size;
    a->live_bytes += size;
    uint64_t pages = ml__round_up(c->used, page) >> p->pages.shift; /* page: a power of two, as round_up assumes */
    if (pages > c->pages) {
        ml__sim_pages_add(p, pages - c->pages);
        a->held_bytes += (pages - c->pages) * page;
        c->pages = pages;
    }
    a->id_chunk[op->id] = x;
    *addr = ((uint64_t)x << 32) + start;
    *block = size;
    return 0;
}

static void arena_free(ml_sim_policy_t *p, uint32_t id) {
    arena_t *a = (arena_t *)p;
    uint32_t x = a->id_chunk[id];
    chunk_t *c = &a->c[x];
    c->live--;
    c->live_bytes -= p->ids[id].blk;
    a->live_bytes -= p->ids[id].blk;
    if (c->live) return;
    if (c->current) c->used = 0; /* reset, keep the pages */
    else chunk_release(a, x);
}

static void arena_summary(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest) {
    const arena_t *a = (const arena_t *)p;
    *free_bytes = a->held_bytes - a->live_bytes;
    *largest = 0;
}

static uint64_t arena_state(const ml_sim_policy_t *p) {
    const arena_t *a = (const arena_t *)p;
    return sizeof *a + (uint64_t)a->ccap * sizeof *a->c + a->g.cap * sizeof(group_t) + (uint64_t)a->idcap * 4;
}

static void arena_destroy(ml_sim_policy_t *p) {
    arena_t *a = (arena_t *)p;
    free(a->c);
    ml_map_free(&a->g);
    free(a->id_chunk);
    free(a);
}

/* A free reads its chunk through id_chunk. */
static void arena_prefetch(const ml_sim_policy_t *p, const ml_sim_op_t *op, int stage) {
    const arena_t *a = (const arena_t *)p;
    if (op->type != ML_SIM_FREE || op->id >= a->idcap || stage == 2) return;
    if (stage == 0) {
        __builtin_prefetch(&a->id_chunk[op->id]);
        return;
    }
    uint32_t x = a->id_chunk[op->id];
    if (x < a->ccap) __builtin_prefetch(&a->c[x], 0);
}
static int arena_reserve(ml_sim_policy_t *p, uint32_t ids) {
    arena_t *a = (arena_t *)p;
    return ml__sim_reserve_ids((void **)&a->id_chunk, &a->idcap, ids, sizeof *a->id_chunk, 0xff);
}

static const ml__sim_vt_t arena_vt = {
    .reserve = arena_reserve,
    .prefetch = arena_prefetch,
    .alloc = arena_alloc,
    .free = arena_free,
    .free_summary = arena_summary,
    .state_bytes = arena_state,
    .destroy = arena_destroy,
};

int ml_sim_arena_new(const ml_sim_config_t *c, bool single_group, ml_sim_policy_t **out) {
    arena_t *a = calloc(1, sizeof *a);
    if (!a) return -ENOMEM;
    ml__sim_init(&a->base, &arena_vt, "arena", c, false);
    a->single = single_group;
    a->crecycle = ML__NIL;
    *out = &a->base;
    return 0;
}
