/* sim_test.h - helpers shared by the simulator's unit tests. */
#ifndef ML_SIM_TEST_H
#define ML_SIM_TEST_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include "ml_sim.h"

/* Textbook layout: no headers, 16-byte granules, and 16-byte "pages" so that
 * footprint and extent are exact byte counts. */
static inline ml_sim_config_t st_cfg(void) {
    ml_sim_config_t c = {.page_size = 16, .align = 16, .header = 0};
    return c;
}

static inline ml_sim_config_t st_cfg_pages(void) {
    ml_sim_config_t c = {.page_size = 4096, .align = 16, .header = 0};
    return c;
}

static inline ml_sim_policy_t *st_new(const char *name, const ml_sim_config_t *c) {
    ml_sim_policy_t *p = NULL;
    cr_assert_eq(ml_sim_policy_new(name, c, &p), 0, "creating %s", name);
    return p;
}

/* Allocates and returns the address. */
static inline uint64_t st_alloc(ml_sim_policy_t *p, uint32_t id, uint64_t size) {
    uint64_t a = UINT64_MAX;
    cr_assert_eq(ml_sim_alloc(p, id, size, 0, &a), 0, "%s: alloc id %u", ml_sim_name(p), id);
    return a;
}

static inline void st_free(ml_sim_policy_t *p, uint32_t id) {
    cr_assert_eq(ml_sim_free(p, id), 0, "%s: free id %u", ml_sim_name(p), id);
}

static inline ml_sim_metrics_t st_metrics(const ml_sim_policy_t *p) {
    ml_sim_metrics_t m;
    ml_sim_metrics(p, &m);
    return m;
}

/* A reproducible pseudo-random sequence: xorshift64. */
static inline uint64_t st_rand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

#endif
