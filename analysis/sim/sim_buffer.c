/* sim_buffer.c - what-if targets that take (almost) no heap: one buffer that
 * is reused for every request (its size is the largest request so far, held
 * from the first use on), or the stack (nothing on the heap at all). Used by
 * the advisor to price "reuse_buffer" and "stack" for temporary allocations. */
#include "sim_internal.h"

typedef struct {
    ml_sim_policy_t base;
    bool on_stack;
    uint64_t max, pages, live;
} buffer_t;

static int buf_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block) {
    buffer_t *b = (buffer_t *)p;
    uint64_t size = op->size ? op->size : 1;
    if (size > b->max) b->max = size;
    if (!b->on_stack) {
        uint64_t pages = ml__round_up(b->max, p->cfg.page_size) / p->cfg.page_size;
        if (pages > b->pages) {
            ml__sim_pages_add(p, pages - b->pages);
            b->pages = pages;
        }
    }
    b->live++;
    *addr = 0;
    *block = size;
    return 0;
}

static void buf_free(ml_sim_policy_t *p, uint32_t id) {
    (void)id;
    ((buffer_t *)p)->live--;
}

static void buf_summary(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest) {
    const buffer_t *b = (const buffer_t *)p;
    *free_bytes = b->live ? 0 : b->pages * p->cfg.page_size;
    *largest = *free_bytes;
}

static void buf_destroy(ml_sim_policy_t *p) {
    free(p);
}

static const ml__sim_vt_t buf_vt = {
    .alloc = buf_alloc,
    .free = buf_free,
    .free_summary = buf_summary,
    .destroy = buf_destroy,
};

int ml_sim_buffer_new(const ml_sim_config_t *c, bool on_stack, ml_sim_policy_t **out) {
    buffer_t *b = calloc(1, sizeof *b);
    if (!b) return -ENOMEM;
    ml__sim_init(&b->base, &buf_vt, on_stack ? "stack" : "reuse_buffer", c, false);
    b->on_stack = on_stack;
    *out = &b->base;
    return 0;
}
