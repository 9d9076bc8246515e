/* advisor_groups.c - the strategy advisor's pass 1: each group's statistics
 * (advisor_internal.h; the rules that read them are in advisor_rules.c).
 *
 * Pass 1 replays the trace through every policy and, in the same stream of
 * ops, summarises each group (the function that called the allocator when
 * an analysis is given, else the recorded stack):
 *   - calls, bytes, the most frequent sizes, sizes just above a power of two;
 *   - lifetimes in allocations (a logical clock: the number of allocations
 *     made between a block's allocation and its free) and in milliseconds;
 *   - temporaries (freed before any other allocation, heaptrack's rule);
 *   - realloc chains: how many times one block was grown by realloc, by how
 *     much per step, and the bytes a moving realloc copies;
 *   - batches ("generations"): the site's live count goes up from zero and
 *     back to zero without an allocation between its first and last free.
 */
#define _GNU_SOURCE
#include "advisor_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Groups                                                                     */
/* ------------------------------------------------------------------------- */

static inline uint64_t hash32(uint32_t k) {
    uint64_t x = (uint64_t)k * 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 31);
}

static ml__adv_smap_t *smap_slot(ml__adv_smap_t *m, uint64_t cap, uint32_t key) {
    uint64_t i = hash32(key) & (cap - 1);
    while (m[i].stack && m[i].stack != key + 1) i = (i + 1) & (cap - 1);
    return &m[i];
}

static int smap_grow(ml__adv_smap_t **m, uint64_t *cap) {
    uint64_t ncap = *cap ? *cap * 2 : 1024;
    ml__adv_smap_t *n = calloc(ncap, sizeof *n);
    if (!n) return -ENOMEM;
    for (uint64_t i = 0; i < *cap; i++)
        if ((*m)[i].stack) *smap_slot(n, ncap, (*m)[i].stack - 1) = (*m)[i];
    free(*m);
    *m = n;
    *cap = ncap;
    return 0;
}

/* The key of a stack. With an analysis: the function that called the
 * allocator (frames[0] of the stack's site), because that is where the code
 * changes, and one function reached from several call paths is several sites
 * but one allocation pattern. Without one: the stack itself. */
static uint32_t key_of_stack(const ml__adv_t *A, uint32_t stack) {
    if (!A->o->analysis) return stack;
    uint32_t site = ml_analysis_node_site(A->o->analysis, stack);
    if (site == UINT32_MAX || site >= A->nsites) return UINT32_MAX - 1; /* not in the build */
    return A->site_key[site];
}

static int cmp_name(const void *x, const void *y) {
    const char *const *a = x, *const *b = y;
    return strcmp(*a, *b);
}

static const char *site_function_name(const ml_site_t *s) {
    return s->nframes && s->frames[0].function ? s->frames[0].function : "";
}

/* site -> key: sites whose frames[0] names the same function share a key
 * (the index of the name in a sorted table). */
int ml__adv_build_site_keys(ml__adv_t *A) {
    size_t n = 0;
    const ml_site_t *s = ml_analysis_sites(A->o->analysis, &n);
    A->nsites = (uint32_t)n;
    if (!n) return 0;
    const char **names = malloc(n * sizeof *names);
    A->site_key = malloc(n * sizeof *A->site_key);
    if (!names || !A->site_key) {
        free(names);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) names[i] = site_function_name(&s[i]);
    if (n) qsort(names, n, sizeof *names, cmp_name);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || strcmp(names[u - 1], names[i])) names[u++] = names[i];
    for (size_t i = 0; i < n; i++) {
        const char *key = site_function_name(&s[i]);
        const char **hit = bsearch(&key, names, u, sizeof *names, cmp_name);
        A->site_key[i] = hit ? (uint32_t)(hit - names) : UINT32_MAX - 1;
    }
    free(names);
    return 0;
}

/* The site of the group with the most calls (the suggestion's "site"), and
 * up to `max` of its sites. */
int64_t ml__adv_group_sites(const ml__adv_t *A, uint32_t key, uint32_t *out, size_t max, size_t *n) {
    size_t ns = 0;
    const ml_site_t *s = ml_analysis_sites(A->o->analysis, &ns);
    int64_t best = -1;
    uint64_t best_calls = 0;
    *n = 0;
    for (size_t i = 0; i < ns && i < A->nsites; i++) {
        if (A->site_key[i] != key) continue;
        if (*n < max) out[(*n)++] = (uint32_t)i;
        if (best < 0 || s[i].alloc_calls > best_calls) {
            best = (int64_t)i;
            best_calls = s[i].alloc_calls;
        }
    }
    return best;
}

static int grow_arr(void **arr, uint32_t *cap, uint32_t id, size_t elem);

/* Notes stack -> gi in the table (ml__adv_t.sgi); a table that cannot grow
 * is dropped, and the hash answers alone. */
static void dense_note(ml__adv_t *A, uint32_t stack, uint32_t gi) {
    if (A->sgi_off || stack >= ML__ADV_DENSE_STACKS) return;
    if (stack >= A->nsgi && grow_arr((void **)&A->sgi, &A->nsgi, stack, sizeof *A->sgi) < 0) {
        free(A->sgi);
        A->sgi = NULL;
        A->nsgi = 0;
        A->sgi_off = true;
        return;
    }
    A->sgi[stack] = gi + 1;
}

/* The group of a stack, made when it is new. The table answers first: the
 * hash's probes were most of the group lookups' time, in pass 1's observer
 * and in pass 2's routers (ml__adv_group_lookup). */
static int group_of(ml__adv_t *A, uint32_t stack, uint32_t *gi) {
    if (stack < A->nsgi && A->sgi[stack]) {
        *gi = A->sgi[stack] - 1;
        return 0;
    }
    if ((A->smused + 1) * 4 > A->smcap * 3 && smap_grow(&A->sm, &A->smcap) < 0) return -ENOMEM;
    ml__adv_smap_t *s = smap_slot(A->sm, A->smcap, stack);
    if (s->stack) {
        *gi = s->gi;
        return 0;
    }
    uint32_t key = key_of_stack(A, stack);
    if ((A->kmused + 1) * 4 > A->kmcap * 3 && smap_grow(&A->km, &A->kmcap) < 0) return -ENOMEM;
    ml__adv_smap_t *k = smap_slot(A->km, A->kmcap, key);
    if (!k->stack) {
        if (A->ng == A->capg) {
            uint32_t ncap = A->capg ? A->capg * 2 : 256;
            ml__adv_group_t *n = realloc(A->g, (size_t)ncap * sizeof *n);
            if (!n) return -ENOMEM;
            A->g = n;
            A->capg = ncap;
        }
        ml__adv_group_t *g = &A->g[A->ng];
        memset(g, 0, sizeof *g);
        g->key = key;
        g->stack = stack;
        g->min_size = UINT64_MAX;
        k->stack = key + 1;
        k->gi = A->ng++;
        A->kmused++;
    }
    s = smap_slot(A->sm, A->smcap, stack); /* the key map may not move this one, but be plain */
    s->stack = stack + 1;
    s->gi = k->gi;
    A->smused++;
    *gi = k->gi;
    dense_note(A, stack, k->gi);
    return 0;
}

/* Read-only lookup, safe from the replay's worker threads in pass 2. */
uint32_t ml__adv_group_lookup(const ml__adv_t *A, uint32_t stack) {
    if (stack < A->nsgi) return A->sgi[stack] - 1; /* UINT32_MAX for none */
    if (!A->smcap) return UINT32_MAX;
    uint64_t i = hash32(stack) & (A->smcap - 1);
    while (A->sm[i].stack) {
        if (A->sm[i].stack == stack + 1) return A->sm[i].gi;
        i = (i + 1) & (A->smcap - 1);
    }
    return UINT32_MAX;
}

static int grow_arr(void **arr, uint32_t *cap, uint32_t id, size_t elem) {
    if (id < *cap) return 0;
    uint64_t ncap = *cap ? (uint64_t)*cap * 2 : 1024;
    while (ncap <= id) ncap *= 2;
    void *n = realloc(*arr, ncap * elem);
    if (!n) return -ENOMEM;
    ml_advise_huge(n, ncap * elem); /* before the new part is zeroed: in huge pages */
    memset((char *)n + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *arr = n;
    *cap = (uint32_t)ncap;
    return 0;
}

static int grow_ids(ml__adv_t *A, uint32_t id) {
    if (id < A->idcap) return 0;
    return grow_arr((void **)&A->id, &A->idcap, id, sizeof *A->id);
}

int ml__adv_observe_reserve(ml__adv_t *A, uint32_t ids) {
    A->reserve_ids = ids;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Pass 1: the summaries                                                      */
/* ------------------------------------------------------------------------- */

static bool just_over_pow2(uint64_t s) {
    if (s < 33) return false;
    uint64_t p = (uint64_t)1 << (63 - __builtin_clzll(s));
    return p != s && s - p <= p / 8;
}

static void note_size(ml__adv_group_t *g, uint64_t size) {
    for (uint32_t i = 0; i < g->nsizes; i++) {
        if (g->size[i] == size) {
            g->size_calls[i]++;
            return;
        }
    }
    if (g->nsizes < ML__ADV_TOP_SIZES) {
        g->size[g->nsizes] = size;
        g->size_calls[g->nsizes++] = 1;
    } else {
        g->other_size_calls++;
    }
}

static void chain_end(ml__adv_t *A, uint32_t id) {
    uint32_t ch = A->id[id].chain;
    if (!ch) return;
    ml__adv_group_t *g = &A->g[A->id[id].group];
    g->chains++;
    if (ch > g->chain_max) g->chain_max = ch;
}

void ml__adv_observe(void *ctx, const ml_sim_op_t *ops, size_t n) {
    ml__adv_t *A = ctx;
    if (A->reserve_ids) { /* a hint: the table grows as the ids need it when this fails */
        (void)grow_ids(A, A->reserve_ids - 1);
        A->reserve_ids = 0;
    }
    for (size_t i = 0; i < n && !A->oom; i++) {
        const ml_sim_op_t *op = &ops[i];
        uint32_t id = op->id, gi;
        ml__adv_chain_stash_t *st = &A->stash[op->thread % 1024];
        if (op->type == ML_SIM_ALLOC) {
            if (grow_ids(A, id) < 0 || group_of(A, op->site, &gi) < 0) {
                A->oom = true;
                return;
            }
            ml__adv_group_t *g = &A->g[gi];
            uint64_t size = op->size;
            g->calls++;
            g->bytes += size;
            if (size < g->min_size) g->min_size = size;
            if (size > g->max_size) g->max_size = size;
            note_size(g, size);
            if (just_over_pow2(size)) {
                g->pow2_calls++;
                g->pow2_example = size;
            }
            if (op->flags & ML_SIM_F_TEMPORARY) {
                g->temps++;
                if (size > g->temp_max) g->temp_max = size;
            }
            if (g->gen_draining) { /* an allocation while the batch drains */
                g->gen_impure = true;
                g->gen_draining = false;
            }
            g->gen_blocks++;
            g->churn_frees += g->pending_frees;
            g->pending_frees = 0;
            g->live++;
            g->live_bytes += size;
            if (g->live_bytes > g->max_live_bytes) g->max_live_bytes = g->live_bytes;
            if (g->live > g->max_live) g->max_live = g->live;
            uint32_t chain = 0;
            if (op->flags & ML_SIM_F_REALLOC) {
                g->reallocs++;
                if (st->thread == op->thread + 1u) {
                    chain = st->chain + 1;
                    g->chain_steps++;
                    /* The allocator copied only if the block moved: glibc
                     * grows a block in place when the memory after it is
                     * free (the top of the heap), and the recorded
                     * addresses say so. Unknown addresses count as moved. */
                    if (!st->old_ptr || st->old_ptr != op->ptr) g->chain_copy += st->old_size;
                    if (size > st->old_size) {
                        uint64_t d = size - st->old_size, small = st->old_size / 8 > 64 ? st->old_size / 8 : 64;
                        g->growth_sum += d;
                        if (d <= small) g->small_growth++;
                    }
                }
            }
            st->thread = 0;
            A->id[id].group = gi;
            A->id[id].chain = chain;
            A->id[id].seq = A->seq++;
            A->id[id].ms = op->time_ms;
            A->id[id].live = 1;
            A->threads_mask |= 1ull << (op->thread < 63 ? op->thread : 63);
        } else if (op->type == ML_SIM_FREE) {
            if (id >= A->idcap || !A->id[id].live) continue;
            ml__adv_group_t *g = &A->g[A->id[id].group];
            uint64_t life = A->seq - A->id[id].seq;
            g->life_hist[63 - __builtin_clzll(life + 1)]++;
            uint64_t ms = op->time_ms >= A->id[id].ms ? op->time_ms - A->id[id].ms : 0;
            g->life_ms_sum += ms;
            if (ms > g->life_ms_max) g->life_ms_max = ms;
            g->frees++;
            g->pending_frees++;
            g->live--;
            g->live_bytes -= op->size;
            g->gen_draining = true;
            if (g->live == 0) {
                g->gens++;
                if (!g->gen_impure && g->gen_blocks >= 2) {
                    g->pure_gens++;
                    g->pure_blocks += g->gen_blocks;
                }
                g->gen_blocks = 0;
                g->gen_impure = g->gen_draining = false;
            }
            if (op->flags & ML_SIM_F_REALLOC) {
                *st = (ml__adv_chain_stash_t){.chain = A->id[id].chain, .thread = op->thread + 1u,
                                              .old_size = op->size, .old_ptr = op->ptr};
            } else {
                chain_end(A, id);
            }
            A->id[id].live = 0;
        }
    }
}

/* Blocks of the group that lived at least `min_life` allocations, or to the end. */
uint64_t ml__adv_lived_at_least(const ml__adv_group_t *g, uint64_t min_life) {
    unsigned b0 = 63 - (unsigned)__builtin_clzll(min_life + 1);
    uint64_t n = g->live;
    for (unsigned b = b0; b < 64; b++) n += g->life_hist[b];
    return n;
}

/* Sizes by calls, most frequent first. */
static void sort_sizes(ml__adv_group_t *g) {
    for (uint32_t i = 1; i < g->nsizes; i++) {
        uint64_t s = g->size[i], c = g->size_calls[i];
        uint32_t j = i;
        while (j > 0 && g->size_calls[j - 1] < c) {
            g->size[j] = g->size[j - 1];
            g->size_calls[j] = g->size_calls[j - 1];
            j--;
        }
        g->size[j] = s;
        g->size_calls[j] = c;
    }
}

uint64_t ml__adv_top_calls(const ml__adv_group_t *g, uint32_t k) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < k && i < g->nsizes; i++) n += g->size_calls[i];
    return n;
}
/* Upper bound of the lifetime (in allocations) below which `q` of the freed blocks died. */
uint64_t ml__adv_life_quantile(const ml__adv_group_t *g, double q) {
    uint64_t total = 0, acc = 0;
    for (int b = 0; b < 64; b++) total += g->life_hist[b];
    if (!total) return 0;
    for (int b = 0; b < 64; b++) {
        acc += g->life_hist[b];
        if ((double)acc >= q * (double)total) return b >= 63 ? UINT64_MAX : ((uint64_t)2 << b) - 1;
    }
    return UINT64_MAX;
}

void ml__adv_observe_end(ml__adv_t *A) {
    for (uint32_t id = 0; id < A->idcap; id++)
        if (A->id[id].live) chain_end(A, id);
    for (uint32_t gi = 0; gi < A->ng; gi++) sort_sizes(&A->g[gi]);
}

void ml__adv_state_free(ml__adv_t *A) {
    free(A->g);
    free(A->sm);
    free(A->sgi);
    free(A->km);
    free(A->id);
    free(A->site_key);
    ml_sim_fpseries_free(A->base_series);
}
