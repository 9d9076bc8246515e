/* advisor_rules.c - the strategy advisor's rules and decisions
 * (advisor_internal.h, docs/strategies.md).
 *
 * Rules on the groups' statistics (advisor_groups.c) pick candidate sites;
 * pass 2 prices each candidate with a router policy (ml_sim_router_new): the
 * site's ops go to a dedicated allocator, the rest to a fresh baseline, and
 * the router's peak footprint is compared with the baseline's peak from
 * pass 1 (same ops, same deterministic simulator, so the difference is the
 * site's routing alone). A suggestion is made when the evidence holds and
 * the simulation backs it; it carries a message in words and its evidence.
 */
#define _GNU_SOURCE
#include "advisor_internal.h"
#include "ml_gpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Thresholds (docs/strategies.md, "When a suggestion is made")              */
/* ------------------------------------------------------------------------- */

#define HOT_CALLS 10000          /* slab/pool: a hot site */
#define CHURN_FRACTION 0.10      /* ... that frees as it goes (frees followed by more of its allocations) */
#define FEW_SIZES_COVER 0.95     /* pool: one size, slab: <= 4 sizes cover this share of calls */
#define TEMP_MIN 1000            /* reuse_buffer/stack: temporaries */
#define TEMP_FRACTION 0.50       /* ... as a share of the site's calls */
#define STACK_MAX_BYTES 4096     /* small enough for a local array */
#define CHAIN_MIN_STEPS 256      /* reserve_capacity: reallocs in chains */
#define CHAIN_MIN_LONGEST 16     /* ... one chain at least this long */
#define SMALL_GROWTH_FRACTION 0.5 /* ... most steps grow by little */
#define BATCH_MIN_GENERATIONS 2  /* arena: batches that die together */
#define BATCH_MIN_BLOCKS 16      /* ... of this many blocks on average */
#define BATCH_PURE_FRACTION 0.8  /* ... holding this share of the calls */
#define LONG_FRACTION 0.8        /* separate_lifetimes: blocks of the site that live long */
#define LONG_MAX_SIZE 4096       /* ... and are small */
#define LONG_MIN_CALLS 256
#define PINNED_MIN_PAGES 16      /* ... pinning at least this many pages */
#define POW2_FRACTION 0.5        /* segregated_fit: requests just above a power of two */
#define MIN_SAVING_PAGES 4       /* footprint suggestions: at least 4 pages ... */
#define MIN_SAVING_SHARE 0.01    /* ... and 1 % of the baseline's peak */
#define TUNING_MIN_BYTES (1u << 20) /* allocator_tuning: at least 1 MiB ... */
#define TUNING_SHARE 0.10        /* ... and 10 % of the real allocator's peak */
#define PAGE 4096                /* the simulator's page */

/* ------------------------------------------------------------------------- */
/* Candidates                                                                 */
/* ------------------------------------------------------------------------- */

uint64_t ml__adv_min_saving(uint64_t base_peak) {
    uint64_t min_saving = (uint64_t)(MIN_SAVING_SHARE * (double)base_peak);
    if (min_saving < MIN_SAVING_PAGES * PAGE) min_saving = MIN_SAVING_PAGES * PAGE;
    return min_saving;
}

uint64_t ml__adv_long_life(const ml__adv_t *A) {
    return A->seq / 8 > 1024 ? A->seq / 8 : 1024;
}

static int add_candidate(ml__adv_cand_t *c, size_t *n, ml__adv_kind_t k, uint32_t gi, const ml__adv_t *A) {
    if (*n >= ML__ADV_MAX_CANDIDATES) return -1;
    c[*n] = (ml__adv_cand_t){.kind = k, .gi = gi, .A = A,
                             .priority = A->g[gi].max_live_bytes + A->g[gi].calls, .pair = -1};
    return (int)(*n)++;
}

typedef struct {
    uint32_t gi;
    uint64_t weight;
} rank_t;

static int cmp_rank(const void *x, const void *y) {
    const rank_t *a = x, *b = y;
    return a->weight < b->weight ? 1 : a->weight > b->weight ? -1 : 0;
}

int ml__adv_candidates(const ml__adv_t *A, uint64_t long_life, ml__adv_cand_t *cands) {
    rank_t *rank = calloc(A->ng, sizeof *rank);
    if (!rank) return -ENOMEM;
    for (uint32_t gi = 0; gi < A->ng; gi++)
        rank[gi] = (rank_t){gi, A->g[gi].max_live_bytes * 4 + A->g[gi].calls};
    if (A->ng) qsort(rank, A->ng, sizeof *rank, cmp_rank);
    size_t nc = 0;
    for (uint32_t r = 0; r < A->ng && nc + 2 <= ML__ADV_MAX_CANDIDATES; r++) {
        uint32_t gi = rank[r].gi;
        const ml__adv_group_t *g = &A->g[gi];
        if (!g->calls) continue;
        bool temp = g->temps >= TEMP_MIN && (double)g->temps >= TEMP_FRACTION * (double)g->calls;
        bool chain = g->chain_steps >= CHAIN_MIN_STEPS && g->chain_max >= CHAIN_MIN_LONGEST &&
                     (double)g->small_growth >= SMALL_GROWTH_FRACTION * (double)g->chain_steps;
        if (temp)
            add_candidate(cands, &nc, g->temp_max <= STACK_MAX_BYTES ? ML__ADV_STACK : ML__ADV_REUSE, gi, A);
        if (chain) add_candidate(cands, &nc, ML__ADV_GROWTH, gi, A);
        if (!temp && !chain && g->calls >= HOT_CALLS &&
            (double)g->churn_frees >= CHURN_FRACTION * (double)g->calls) {
            if ((double)ml__adv_top_calls(g, 1) >= FEW_SIZES_COVER * (double)g->calls && g->size[0] <= 65536)
                add_candidate(cands, &nc, ML__ADV_POOL, gi, A);
            else if (g->nsizes >= 2 &&
                     (double)ml__adv_top_calls(g, 4) >= FEW_SIZES_COVER * (double)g->calls &&
                     g->max_size <= 16384)
                add_candidate(cands, &nc, ML__ADV_SLAB, gi, A);
        }
        if (!temp && g->pure_gens >= BATCH_MIN_GENERATIONS &&
            (double)g->pure_blocks >= BATCH_PURE_FRACTION * (double)g->calls &&
            g->pure_blocks / g->pure_gens >= BATCH_MIN_BLOCKS)
            add_candidate(cands, &nc, ML__ADV_ARENA, gi, A);
        if (!temp && g->calls >= LONG_MIN_CALLS && g->max_size <= LONG_MAX_SIZE &&
            (double)ml__adv_lived_at_least(g, long_life) >= LONG_FRACTION * (double)g->calls)
            add_candidate(cands, &nc, ML__ADV_SEPARATE, gi, A);
        /* No segregated_fit candidate: it would tell a program on glibc (a
         * segregated-fit allocator, the baseline) to keep what it has. */
    }
    free(rank);
    return (int)nc;
}

/* ------------------------------------------------------------------------- */
/* What-ifs: the routers of pass 2                                            */
/* ------------------------------------------------------------------------- */

static bool route_group(void *ctx, const ml_sim_op_t *op) {
    const ml__adv_cand_t *c = ctx;
    return ml__adv_group_lookup(c->A, op->site) == c->gi;
}

static bool route_temporaries(void *ctx, const ml_sim_op_t *op) {
    const ml__adv_cand_t *c = ctx;
    return (op->flags & ML_SIM_F_TEMPORARY) && ml__adv_group_lookup(c->A, op->site) == c->gi;
}

int ml__adv_make_router(ml__adv_cand_t *c, const ml__adv_group_t *g, const ml_sim_fpseries_t *base_series) {
    ml_sim_policy_t *gen = NULL, *ded = NULL, *cmp = NULL;
    int rc = ml_sim_policy_new(ML__ADV_BASELINE, NULL, &gen);
    if (rc < 0) return rc;
    ml_sim_route_fn route = route_group;
    switch (c->kind) {
    case ML__ADV_POOL:
        rc = ml_sim_pool_new(NULL, g->size[0], &ded);
        snprintf(c->name, sizeof c->name, "pool(%lu)", (unsigned long)((g->size[0] + 7) & ~7ull));
        break;
    case ML__ADV_SLAB: {
        uint64_t cls[4];
        uint32_t n = 0;
        for (uint32_t i = 0; i < 4 && i < g->nsizes; i++) cls[n++] = (g->size[i] + 7) & ~7ull;
        for (uint32_t i = 1; i < n; i++) /* ascending, unique */
            for (uint32_t j = i; j > 0 && cls[j - 1] > cls[j]; j--) {
                uint64_t t = cls[j];
                cls[j] = cls[j - 1];
                cls[j - 1] = t;
            }
        uint32_t u = 0;
        for (uint32_t i = 0; i < n; i++)
            if (!u || cls[u - 1] != cls[i]) cls[u++] = cls[i];
        rc = ml_sim_slab_new_classes(NULL, cls, u, &ded);
        snprintf(c->name, sizeof c->name, "slab(%u classes)", u);
        break;
    }
    case ML__ADV_ARENA:
        rc = ml_sim_arena_new(NULL, true, &ded);
        snprintf(c->name, sizeof c->name, "arena");
        break;
    case ML__ADV_REUSE:
    case ML__ADV_STACK:
        rc = ml_sim_buffer_new(NULL, c->kind == ML__ADV_STACK, &ded);
        route = route_temporaries;
        snprintf(c->name, sizeof c->name, "%s", c->kind == ML__ADV_STACK ? "stack" : "reuse_buffer");
        break;
    case ML__ADV_GROWTH: {
        ml_sim_policy_t *in = NULL;
        rc = ml_sim_policy_new(ML__ADV_BASELINE, NULL, &in);
        if (rc == 0) rc = ml_sim_growth_new(in, 2.0, &ded);
        c->inner = ded;
        snprintf(c->name, sizeof c->name, "reserve_capacity(x2)");
        break;
    }
    case ML__ADV_SEPARATE:
        /* The compare copy is the baseline fed every op, which pass 1 ran:
         * its footprint series stands in for it when it was recorded. */
        rc = ml_sim_policy_new(ML__ADV_BASELINE, NULL, &ded);
        if (rc == 0 && !ml_sim_fpseries_ok(base_series)) rc = ml_sim_policy_new(ML__ADV_BASELINE, NULL, &cmp);
        snprintf(c->name, sizeof c->name, "own %s heap", ML__ADV_BASELINE);
        if (rc == 0 && !cmp) return ml_sim_router_new_series(c->name, route, c, gen, ded, base_series, &c->router);
        break;
    case ML__ADV_POW2_BUDDY:
        rc = ml_sim_buddy_new(NULL, &ded);
        snprintf(c->name, sizeof c->name, "buddy");
        break;
    case ML__ADV_POW2_SEG:
        rc = ml_sim_policy_new(ML__ADV_BASELINE, NULL, &ded);
        snprintf(c->name, sizeof c->name, "own %s heap", ML__ADV_BASELINE);
        break;
    }
    if (rc < 0) {
        ml_sim_policy_free(gen);
        ml_sim_policy_free(ded);
        ml_sim_policy_free(cmp);
        return rc;
    }
    return ml_sim_router_new(c->name, route, c, gen, ded, cmp, &c->router);
}

/* ------------------------------------------------------------------------- */
/* Messages and evidence                                                      */
/* ------------------------------------------------------------------------- */

/* A frame in code the user cannot change: a system library, the C++
 * standard library or an interpreter. */
static bool system_frame(const ml_frame_t *f) {
    static const char *const dirs[] = {"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/libexec/", NULL};
    static const char *const interp[] = {"python", "libpython", "perl", "libperl", "ruby", "libruby", "node",
                                         "lua", "liblua", "java", NULL};
    if (f->file && (!strncmp(f->file, "/usr/include/", 13) || strstr(f->file, "/c++/"))) return true;
    if (f->function && (!strncmp(f->function, "std::", 5) || !strncmp(f->function, "__gnu_cxx::", 11)))
        return true;
    if (!f->module) return false;
    for (int i = 0; dirs[i]; i++)
        if (!strncmp(f->module, dirs[i], strlen(dirs[i]))) return true;
    const char *base = strrchr(f->module, '/');
    base = base ? base + 1 : f->module;
    for (int i = 0; interp[i]; i++)
        if (!strncmp(base, interp[i], strlen(interp[i]))) return true;
    return false;
}

/* "fn() (file:line)": no "()" after a name that has its parameters already
 * (C++) or is an address ("[module+0x...]"). */
static void frame_name(const ml_frame_t *f, char *buf, size_t len) {
    const char *fn = f->function ? f->function : "?";
    const char *paren = fn[0] == '[' || strchr(fn, '(') ? "" : "()";
    if (f->file && f->line) {
        const char *base = strrchr(f->file, '/');
        snprintf(buf, len, "%s%s (%s:%u)", fn, paren, base ? base + 1 : f->file, f->line);
    } else {
        snprintf(buf, len, "%s%s", fn, paren);
    }
}

/* The function that called the allocator; when that is library code, also
 * the first frame of the user's own code that led there. */
static void site_name(const ml__adv_t *A, const ml__adv_group_t *g, char *buf, size_t len) {
    const ml_analysis_t *a = A->o->analysis;
    if (a && g->key < UINT32_MAX - 1) {
        size_t n = 0, nsite = 0;
        uint32_t ids[1];
        const ml_site_t *s = ml_analysis_sites(a, &n);
        int64_t best = ml__adv_group_sites(A, g->key, ids, 1, &nsite);
        if (best >= 0 && (size_t)best < n && s[best].nframes) {
            const ml_site_t *st = &s[best];
            frame_name(&st->frames[0], buf, len);
            if (!system_frame(&st->frames[0])) return;
            for (uint32_t i = 1; i < st->nframes; i++) {
                if (system_frame(&st->frames[i])) continue;
                size_t used = strlen(buf);
                if (used + 16 >= len) return;
                snprintf(buf + used, len - used, ", called from ");
                used = strlen(buf);
                frame_name(&st->frames[i], buf + used, len - used);
                return;
            }
            return;
        }
    }
    snprintf(buf, len, "the allocation site with stack #%u", g->stack);
}

/* The site's pattern over the whole trace: the first part of its evidence. */
static void site_pattern(ml_site_evidence_t *e, const ml__adv_group_t *g, uint64_t long_life) {
    e->calls = g->calls;
    e->bytes_allocated = g->bytes;
    e->frees = g->frees;
    e->stack = g->stack;
    e->max_live_bytes = g->max_live_bytes;
    e->max_live_blocks = g->max_live;
    e->sizes.min = g->calls ? g->min_size : 0;
    e->sizes.max = g->max_size;
    e->sizes.distinct = g->nsizes;
    e->sizes.more_distinct = g->other_size_calls != 0;
    e->sizes.ntop = 0;
    for (uint32_t i = 0; i < g->nsizes && i < ML_EVIDENCE_TOP_SIZES; i++)
        e->sizes.top[e->sizes.ntop++] = (ml_size_calls_t){g->size[i], g->size_calls[i]};
    e->lifetimes.freed = g->frees;
    e->lifetimes.live_at_end = g->live;
    e->lifetimes.mean_ms = g->frees ? (double)g->life_ms_sum / (double)g->frees : 0.0;
    e->lifetimes.max_ms = g->life_ms_max;
    e->lifetimes.median_allocations_at_most = ml__adv_life_quantile(g, 0.5);
    e->lifetimes.p90_allocations_at_most = ml__adv_life_quantile(g, 0.9);
    e->lifetimes.long_lived_fraction =
        g->calls ? (double)ml__adv_lived_at_least(g, long_life) / (double)g->calls : 0.0;
    e->lifetimes.long_lived_at_least_allocations = long_life;
}

static const char *fmtb(uint64_t b, char *buf) {
    return ml_fmt_bytes(b, buf, 32);
}

static const char *fmtn(uint64_t v, char *buf) {
    /* 1234567 -> "1,234,567" */
    char t[32];
    int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < n; i++) {
        buf[o++] = t[i];
        if ((n - i - 1) % 3 == 0 && i != n - 1) buf[o++] = ',';
    }
    buf[o] = 0;
    return buf;
}

/* ------------------------------------------------------------------------- */
/* Decisions                                                                  */
/* ------------------------------------------------------------------------- */

/* The calls behind a suggestion: the order's tie-break. */
static uint64_t calls_of(const ml_suggestion_t *s) {
    switch (s->evidence.kind) {
    case ML_EVIDENCE_SITE: return s->evidence.site.calls;
    case ML_EVIDENCE_TUNING: return s->evidence.tuning.calls;
    case ML_EVIDENCE_GPU: return s->evidence.gpu.calls;
    default: return 0;
    }
}

static int cmp_suggestion(const void *x, const void *y) {
    const ml_suggestion_t *a = x, *b = y;
    if (a->estimated_saving_bytes != b->estimated_saving_bytes)
        return a->estimated_saving_bytes < b->estimated_saving_bytes ? 1 : -1;
    uint64_t ca = calls_of(a), cb = calls_of(b);
    return ca < cb ? 1 : ca > cb ? -1 : 0;
}

void ml__adv_sort(ml_advice_t *adv) {
    if (adv->n) qsort(adv->s, adv->n, sizeof *adv->s, cmp_suggestion);
}

static bool footprint_family(const char *s) {
    return !strcmp(s, "pool") || !strcmp(s, "slab") || !strcmp(s, "arena");
}

void ml__adv_dedupe(ml_advice_t *adv) {
    ml__adv_sort(adv);
    size_t w = 0;
    for (size_t i = 0; i < adv->n; i++) {
        bool dup = false;
        if (footprint_family(adv->s[i].strategy))
            for (size_t k = 0; k < w && !dup; k++)
                dup = adv->s[k].stack == adv->s[i].stack && footprint_family(adv->s[k].strategy);
        if (!dup) adv->s[w++] = adv->s[i];
    }
    adv->n = w;
}

/* Builds the suggestion of one evaluated candidate, or none. */
void ml__adv_decide(ml_advice_t *adv, const ml__adv_t *A, ml__adv_cand_t *cands, size_t i, uint64_t base_peak,
                   uint64_t min_saving, uint64_t long_life) {
    ml__adv_cand_t *c = &cands[i];
    const ml__adv_group_t *g = &A->g[c->gi];
    /* Without a router (the statistics pass, or a what-if over the budget)
     * only counts are known. */
    bool priced = c->router != NULL;
    if (!priced && c->kind != ML__ADV_POOL && c->kind != ML__ADV_SLAB && c->kind != ML__ADV_ARENA &&
        c->kind != ML__ADV_REUSE && c->kind != ML__ADV_STACK)
        return;
    ml_sim_metrics_t m = {0};
    if (priced) ml_sim_metrics(c->router, &m);
    uint64_t wpeak = m.peak_footprint;
    int64_t saving = priced ? (int64_t)base_peak - (int64_t)wpeak : 0;
    uint64_t save = saving > 0 ? (uint64_t)saving : 0;
    /* Moving a site's blocks elsewhere cannot save more than the site ever
     * holds live; anything above that is the baseline placing other blocks
     * differently (noise of the replay), not the strategy. The one
     * exception is separate_lifetimes, whose point is the pages its blocks
     * pin: there the bound is the pages those blocks can touch (each of its
     * blocks is at most 4 KiB, so it touches at most two pages). */
    uint64_t bound = c->kind == ML__ADV_SEPARATE ? g->max_live * 2 * PAGE : g->max_live_bytes;
    if (save > bound) save = bound;
    char name[1024], b1[32], b2[32], b3[32], n1[32], n2[32];
    site_name(A, g, name, sizeof name);
    const char *strategy = NULL;
    char msg[1024] = "";
    ml_site_evidence_t ev = {.finding = ML_FINDING_NONE};

    switch (c->kind) {
    case ML__ADV_POOL:
    case ML__ADV_SLAB: {
        /* Memory when the replay shows it, time always: the site is hot
         * (the candidate rule) and every one of its calls leaves malloc. */
        bool time_only = !priced || save < min_saving;
        uint64_t steps_saved = 0;
        if (priced) {
            ml_sim_router_gain_t gain;
            ml_sim_router_gain(c->router, &gain);
            const ml_sim_metrics_t *bm = ml__advice_policy(adv, ML__ADV_BASELINE);
            uint64_t bsteps = bm ? bm->search_steps + bm->splits + bm->merges : 0;
            uint64_t wsteps = gain.general.search_steps + gain.general.splits + gain.general.merges +
                              gain.dedicated.search_steps + gain.dedicated.splits + gain.dedicated.merges;
            steps_saved = bsteps > wsteps ? bsteps - wsteps : 0;
        }
        uint64_t avoided = g->calls + g->frees;
        char gainmsg[256];
        if (!priced) {
            save = 0;
            snprintf(gainmsg, sizeof gainmsg, "The gain is time: %s malloc and free calls go away.",
                     fmtn(avoided, n1));
        } else if (time_only) {
            save = 0;
            snprintf(gainmsg, sizeof gainmsg,
                     "The gain is time, not memory (the replayed peak does not drop): %s malloc and free "
                     "calls go away, and the general allocator does %s fewer search steps, splits and merges "
                     "in the replay.",
                     fmtn(avoided, n1), fmtn(steps_saved, n2));
        } else {
            snprintf(gainmsg, sizeof gainmsg,
                     "Replaying the trace, the heap then needs %s less at its peak, and %s malloc and free "
                     "calls go away.",
                     fmtb(save, b1), fmtn(avoided, n1));
        }
        strategy = c->kind == ML__ADV_POOL ? "pool" : "slab";
        if (c->kind == ML__ADV_POOL)
            snprintf(msg, sizeof msg,
                     "%s allocates %s blocks of %llu bytes (up to %s live) and frees them as it goes. "
                     "Give them a fixed-size pool: keep freed %llu-byte objects on a free list and carve new "
                     "ones from page-sized slabs instead of calling malloc and free for each. %s",
                     name, fmtn(g->calls, b2), (unsigned long long)g->size[0], fmtn(g->max_live, b3),
                     (unsigned long long)g->size[0], gainmsg);
        else
            snprintf(msg, sizeof msg,
                     "%s allocates %s blocks in only %u sizes (up to %s live) and frees them as it goes. "
                     "Give each size its own slab of fixed-size slots (a slab cache per size) instead of "
                     "calling malloc and free for each. %s",
                     name, fmtn(g->calls, b2), g->nsizes, fmtn(g->max_live, b3), gainmsg);
        ev.finding = ML_FINDING_CALLS;
        ev.work.calls_avoided = avoided;
        ev.work.allocator_steps_saved = steps_saved;
        ev.work.time_only = time_only;
        break;
    }
    case ML__ADV_ARENA:
        /* The gain is the calls. A cost below the minimum saving is the
         * arena's rounding (a batch of a few hundred bytes takes a page of
         * its 64 KiB chunk), noise as for stack and reuse_buffer: it is
         * said, not a reason to stay silent. A real cost is. */
        if (saving < -(int64_t)min_saving) return;
        /* At a cost, the calls alone are the gain: as for a pool whose
         * gain is time, only a hot function's (python3's interpreter got
         * two of 882 calls each, "the replayed peak grows by 8.0 KiB"). */
        if (saving < 0 && g->calls < HOT_CALLS) return;
        strategy = "arena";
        snprintf(msg, sizeof msg,
                 "%s allocates its blocks in batches that are freed together (%llu batches of %llu blocks on "
                 "average). Allocate each batch from an arena (bump a pointer through a large chunk and "
                 "release the whole chunk when the batch is done) instead of one malloc and free per block: "
                 "%s calls to malloc and free go away%s%s.",
                 name, (unsigned long long)g->pure_gens,
                 (unsigned long long)(g->pure_gens ? g->pure_blocks / g->pure_gens : 0), fmtn(2 * g->pure_blocks, n1),
                 !priced  ? ""
                 : save   ? " and the replayed peak drops by "
                 : saving ? " and the replayed peak grows by "
                          : ", at no cost in peak memory",
                 save ? fmtb(save, b1) : priced && saving ? fmtb((uint64_t)-saving, b1) : "");
        ev.finding = ML_FINDING_BATCHES;
        ev.batches.batches = g->pure_gens;
        ev.batches.blocks_in_batches = g->pure_blocks;
        break;
    case ML__ADV_REUSE:
    case ML__ADV_STACK:
        /* The gain is calls; a buffer kept for good must not cost real memory. */
        if (saving < -(int64_t)min_saving) return;
        strategy = c->kind == ML__ADV_STACK ? "stack" : "reuse_buffer";
        if (c->kind == ML__ADV_STACK)
            snprintf(msg, sizeof msg,
                     "%s allocates a temporary block and frees it before anything else is allocated, %s "
                     "times (%.0f%% of its calls), never more than %llu bytes. Use a local array of %llu bytes "
                     "on the stack instead of malloc and free.",
                     name, fmtn(g->temps, n1), 100.0 * (double)g->temps / (double)g->calls,
                     (unsigned long long)g->temp_max, (unsigned long long)g->temp_max);
        else
            snprintf(msg, sizeof msg,
                     "%s allocates a temporary buffer and frees it before anything else is allocated, %s "
                     "times (%.0f%% of its calls), up to %s. Allocate one buffer once, outside the loop, and "
                     "reuse it (grow it when a larger one is needed) instead of malloc and free each time.",
                     name, fmtn(g->temps, n1), 100.0 * (double)g->temps / (double)g->calls,
                     fmtb(g->temp_max, b1));
        ev.finding = ML_FINDING_TEMPORARIES;
        ev.temporaries.temporaries = g->temps;
        ev.temporaries.temporary_fraction = (double)g->temps / (double)g->calls;
        ev.temporaries.max_temporary_bytes = g->temp_max;
        ev.temporaries.calls_avoided = 2 * g->temps;
        break;
    case ML__ADV_GROWTH: {
        uint64_t avoided = 0, avoided_bytes = 0, moves = 0;
        ml_sim_growth_stats(c->inner, &avoided, &avoided_bytes, &moves);
        if (avoided * 2 < g->chain_steps) return;
        strategy = "reserve_capacity";
        snprintf(msg, sizeof msg,
                 "%s grows a buffer with realloc in small steps (%s reallocs in chains of up to %llu, +%s "
                 "per step on average; %s%s%s). Reserve the final size up front, or grow the "
                 "capacity geometrically (double it when it is full, as std::vector does): in the replay %s "
                 "of the reallocs go away.",
                 name, fmtn(g->chain_steps, n1), (unsigned long long)g->chain_max,
                 fmtb(g->chain_steps ? g->growth_sum / g->chain_steps : 0, b2),
                 g->chain_copy ? "up to " : "the allocator grew the block in place each time, nothing was copied",
                 g->chain_copy ? fmtb(g->chain_copy, b1) : "", g->chain_copy ? " copied" : "", fmtn(avoided, n2));
        ev.finding = ML_FINDING_CHAINS;
        ev.chains.realloc_calls = g->reallocs;
        ev.chains.chains = g->chains;
        ev.chains.realloc_steps = g->chain_steps;
        ev.chains.longest_chain = g->chain_max;
        ev.chains.small_growth_steps = g->small_growth;
        ev.chains.mean_growth_bytes = g->chain_steps ? g->growth_sum / g->chain_steps : 0;
        ev.chains.bytes_copied_at_most = g->chain_copy;
        ev.chains.reallocs_avoided = avoided;
        ev.chains.bytes_not_copied = avoided_bytes;
        break;
    }
    case ML__ADV_SEPARATE: {
        ml_sim_router_gain_t gain;
        ml_sim_router_gain(c->router, &gain);
        if (gain.compare_failed) return; /* the series did not read back: nothing is known */
        uint64_t pinned = gain.max_gain_bytes / PAGE;
        /* The site's blocks must be alive when the pages are pinned: routing
         * away the short-lived neighbours separates the lifetimes as well,
         * but the pages are held by the ones that stay. */
        if (pinned < PINNED_MIN_PAGES || (double)gain.max_gain_bytes < 0.05 * (double)base_peak ||
            !gain.dedicated_live_blocks)
            return;
        strategy = "separate_lifetimes";
        snprintf(msg, sizeof msg,
                 "%s allocates small blocks that live long (%.0f%% of them outlive %s later allocations or "
                 "the program) in between short-lived blocks of other code, so each keeps a page in use "
                 "that is otherwise empty: at %.1f s, %s pages (%s) were held only because of them. "
                 "Allocate the long-lived blocks from a pool or arena of their own, so that they share "
                 "pages with each other%s%s.",
                 name, 100.0 * (double)ml__adv_lived_at_least(g, long_life) / (double)g->calls, fmtn(long_life, n1),
                 gain.max_gain_time_ms / 1000.0, fmtn(pinned, n2), fmtb(gain.max_gain_bytes, b1),
                 save ? "; the replayed peak drops by " : "", save ? fmtb(save, b2) : "");
        ev.finding = ML_FINDING_PINNED;
        ev.pinned.pinned_pages = pinned;
        ev.pinned.pinned_bytes = gain.max_gain_bytes;
        ev.pinned.pinned_at_ms = gain.max_gain_time_ms;
        ev.pinned.long_lived_blocks = ml__adv_lived_at_least(g, long_life);
        break;
    }
    case ML__ADV_POW2_BUDDY: {
        if (c->pair < 0) return;
        ml_sim_metrics_t ms;
        ml_sim_metrics(cands[c->pair].router, &ms);
        uint64_t waste = m.peak_footprint > ms.peak_footprint ? m.peak_footprint - ms.peak_footprint : 0;
        if (waste < min_saving) return;
        strategy = "segregated_fit";
        save = waste;
        wpeak = ms.peak_footprint;
        uint64_t ex = g->pow2_example, p = (uint64_t)1 << (63 - __builtin_clzll(ex));
        snprintf(msg, sizeof msg,
                 "%s requests sizes just above a power of two (%s of its %s calls, e.g. %llu bytes). A "
                 "power-of-two allocator (buddy, and many pool and GPU allocators) rounds each up to %llu and "
                 "in the replay holds %s more at the peak than size classes do. Keep this site on a "
                 "segregated-fit (size-class) allocator, or trim the object to %llu bytes.",
                 name, fmtn(g->pow2_calls, n1), fmtn(g->calls, n2), (unsigned long long)ex,
                 (unsigned long long)(2 * p), fmtb(waste, b3), (unsigned long long)p);
        ev.finding = ML_FINDING_POW2;
        ev.pow2.just_over_pow2_calls = g->pow2_calls;
        ev.pow2.buddy_peak_bytes = m.peak_footprint;
        ev.pow2.waste_under_buddy_bytes = waste;
        break;
    }
    case ML__ADV_POW2_SEG:
        return;
    }
    ml_suggestion_t *s = ml__advice_add(adv);
    if (!s) return;
    s->strategy = strategy;
    snprintf(s->message, sizeof s->message, "%s", msg);
    size_t nsite = 0;
    s->site = A->o->analysis ? ml__adv_group_sites(A, g->key, ev.sites, ML_EVIDENCE_SITES, &nsite)
                             : (int64_t)g->stack;
    s->stack = g->stack;
    s->estimated_saving_bytes = save;
    snprintf(s->what_if, sizeof s->what_if, "%s",
             c->kind == ML__ADV_POW2_BUDDY ? "buddy vs size classes" : c->name);
    ev.nsites = (uint32_t)nsite;
    site_pattern(&ev, g, long_life);
    if (priced) {
        ev.simulation.baseline = ML__ADV_BASELINE;
        ev.simulation.baseline_peak_bytes = base_peak;
        ev.simulation.what_if_peak_bytes = wpeak;
    } else {
        size_t len = strlen(s->message);
        snprintf(s->message + len, sizeof s->message - len,
                 " (From the call statistics alone: replaying it was over the advisor's budget, so no "
                 "saving in memory was measured; --advisor-ops and --advisor-mem raise the budget.)");
    }
    s->evidence.kind = ML_EVIDENCE_SITE;
    s->evidence.site = ev;
}

void ml__adv_decide_tuning(ml_advice_t *adv, const ml__adv_t *A) {
    const ml_sim_metrics_t *real = ml__advice_policy(adv, "real");
    if (!real || !real->peak_footprint) return;
    static const char *const general[] = {"segregated_fit", "tlsf", "best_fit", "first_fit", "slab", NULL};
    const ml_sim_metrics_t *best = NULL;
    for (int i = 0; general[i]; i++) {
        const ml_sim_metrics_t *m = ml__advice_policy(adv, general[i]);
        if (m && (!best || m->peak_footprint < best->peak_footprint)) best = m;
    }
    if (!best || best->peak_footprint >= real->peak_footprint) return;
    uint64_t diff = real->peak_footprint - best->peak_footprint;
    if (diff < TUNING_MIN_BYTES || (double)diff < TUNING_SHARE * (double)real->peak_footprint) return;
    ml_suggestion_t *s = ml__advice_add(adv);
    if (!s) return;
    unsigned nthreads = (unsigned)__builtin_popcountll(A->threads_mask);
    char b1[32], b2[32], b3[32];
    s->strategy = "allocator_tuning";
    snprintf(s->message, sizeof s->message,
             "The program's allocator kept live blocks on %s of pages at the peak%s%s%s, while a %s "
             "allocator replaying the same allocations needs %s. Try a size-class allocator (jemalloc or "
             "mimalloc, e.g. through LD_PRELOAD; jemalloc with MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0, "
             "as the replay gives a page back once it holds no live block: by default jemalloc keeps freed "
             "pages for seconds, and its peak can exceed glibc's), or tune glibc: %smalloc_trim(0) after the peak, "
             "M_TRIM_THRESHOLD and M_MMAP_THRESHOLD (mallopt or GLIBC_TUNABLES) for large blocks.",
             fmtb(real->peak_footprint, b1), real->os_held_peak ? " (" : "",
             real->os_held_peak ? fmtb(real->os_held_peak, b2) : "",
             real->os_held_peak ? " held from the OS per mallinfo)" : "", best->name, fmtb(best->peak_footprint, b3),
             nthreads > 1 ? "MALLOC_ARENA_MAX=2 (threads allocate here, and each gets its own arena), " : "");
    s->estimated_saving_bytes = diff;
    snprintf(s->what_if, sizeof s->what_if, "%s", best->name);
    s->evidence.kind = ML_EVIDENCE_TUNING;
    ml_tuning_evidence_t *e = &s->evidence.tuning;
    e->real_peak_footprint_bytes = real->peak_footprint;
    e->real_os_held_peak_bytes = real->os_held_peak;
    snprintf(e->best_policy, sizeof e->best_policy, "%s", best->name);
    e->best_peak_footprint_bytes = best->peak_footprint;
    e->threads = nthreads;
    e->calls = real->allocs;
}

size_t ml_advisor_gpu_suggestions(const ml_analysis_t *a, ml_suggestion_t *out, size_t max) {
    const ml_gpu_t *g = a ? ml_analysis_gpu(a) : NULL;
    if (!g || !max) return 0;
    ml_gpu_suggestion_t *gs = calloc(max, sizeof *gs);
    if (!gs) return 0;
    size_t n = ml_gpu_suggest(g, gs, max);
    for (size_t i = 0; i < n; i++) {
        ml_suggestion_t *s = &out[i];
        memset(s, 0, sizeof *s);
        s->strategy = gs[i].strategy;
        snprintf(s->message, sizeof s->message, "%s", gs[i].message);
        s->site = -1;
        s->stack = gs[i].stack;
        s->device = gs[i].device;
        s->estimated_saving_bytes = gs[i].estimated_saving_bytes;
        s->evidence.kind = ML_EVIDENCE_GPU;
        ml_gpu_evidence_t *e = &s->evidence.gpu;
        e->device = gs[i].device < 0 ? 0 : (uint32_t)gs[i].device;
        e->stack = gs[i].stack;
        e->calls = gs[i].calls;
        e->pairs = gs[i].pairs;
        e->bytes = gs[i].bytes;
        e->pairs_per_s = gs[i].pairs_per_s;
        e->distinct_sizes = gs[i].distinct_sizes;
        e->cycles = gs[i].cycles;
        e->share = gs[i].share;
        snprintf(e->summary, sizeof e->summary, "%s", gs[i].evidence);
    }
    free(gs);
    return n;
}
