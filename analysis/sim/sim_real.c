/* sim_real.c - the allocator the program really used, measured from the
 * recorded addresses: the pages holding at least one live block [ptr,
 * ptr + size), the same page model as the simulated policies (the real
 * allocator's headers and rounding are not in the trace, so this is a lower
 * bound of what it touched). What it held from the OS, when the trace has
 * mallinfo samples, is kept apart (os_held_peak). Its free space and search
 * costs are not known. */
#include "sim_internal.h"

typedef struct {
    ml_sim_policy_t base;
    uint64_t *id_ptr;
    uint32_t idcap;
} real_t;

static int real_alloc(ml_sim_policy_t *p, const ml_sim_op_t *op, uint64_t *addr, uint64_t *block) {
    real_t *r = (real_t *)p;
    if (op->id >= r->idcap && ml__sim_grow((void **)&r->id_ptr, &r->idcap, op->id, sizeof *r->id_ptr, 0) < 0)
        return -ENOMEM;
    uint64_t size = op->size ? op->size : 1;
    if (ml__sim_extent_add(p, op->ptr, size) < 0) return -ENOMEM;
    r->id_ptr[op->id] = op->ptr;
    *addr = op->ptr;
    *block = op->size;
    return 0;
}

static void real_free(ml_sim_policy_t *p, uint32_t id) {
    real_t *r = (real_t *)p;
    uint64_t size = p->ids[id].req - 1;
    ml__sim_extent_remove(p, r->id_ptr[id], size ? size : 1);
}

static void real_summary(const ml_sim_policy_t *p, uint64_t *free_bytes, uint64_t *largest) {
    (void)p;
    *free_bytes = *largest = 0;
}

static uint64_t real_state(const ml_sim_policy_t *p) {
    return (uint64_t)((const real_t *)p)->idcap * 8;
}

static void real_destroy(ml_sim_policy_t *p) {
    free(((real_t *)p)->id_ptr);
    free(p);
}

/* Frees carry the recorded address: its page slot can load at once. */
static void real_prefetch(const ml_sim_policy_t *p, const ml_sim_op_t *op, int stage) {
    if (op->type == ML_SIM_FREE && stage == 0) ml__sim_prefetch_page(p, op->ptr);
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
