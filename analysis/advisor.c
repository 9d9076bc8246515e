/* advisor.c - the strategy advisor's driver (ml_advisor.h, docs/strategies.md).
 *
 * The run, in order:
 *   1. pass 1 replays the trace through every policy for the comparison
 *      table, and feeds the same ops to the group statistics
 *      (advisor_groups.c);
 *   2. the rules pick candidates from the statistics (advisor_rules.c);
 *   3. pass 2 replays the trace once more through one router per candidate,
 *      all in the same replay;
 *   4. the decisions turn each priced candidate into a suggestion or none,
 *      and each candidate the budget left unpriced into the suggestion its
 *      counts support (as in the statistics pass below), if any;
 *      keep one footprint strategy per site, add allocator_tuning and the
 *      GPU advice, and order the list by value.
 *
 * A trace too long for even two policies within the time budget (but whose
 * statistics fit the memory budget) gets a statistics pass instead: pass 1
 * with no policy, only the group statistics, then the rules, and the
 * suggestions whose evidence is counts (stack, reuse_buffer, pool, slab,
 * arena) without a replayed saving (docs/strategies.md, "Budgets").
 */
#define _GNU_SOURCE
#include "advisor_internal.h"
#include "ml_options.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* The budgets' cost model (docs/strategies.md, "Budgets"): bytes each
 * replayed policy keeps per live block (a free-list node of 48 bytes for
 * about 1.5 nodes per live block, the id tables, growth slack), bytes the
 * driver keeps per live block (the address map, the ids, pass 1's
 * per-block statistics), and what a what-if router costs in policies:
 * the general part sees every op, the dedicated one the site's, a compare
 * copy (separate_lifetimes) every op again. */
#define BYTES_PER_LIVE_POLICY 112
#define BYTES_PER_LIVE_DRIVER 96
#define ROUTER_UNITS_X2 3 /* 1.5 policies */
#define SEPARATE_UNITS_X2 5
/* The statistics pass reads the trace once, as heaptrack_print does: it is
 * allowed on traces of up to this many times the replay budget's operations
 * (400 M by default), beyond which nothing is replayed at all. */
#define STATS_OPS_FACTOR 10

typedef struct {
    uint64_t live, ops;       /* live blocks at the peak, ops to replay (0: unknown) */
    uint64_t bytes, units_x2; /* what is left of the budgets: bytes, and policy-passes x 2 */
    uint64_t ops_budget;      /* the operations budget itself */
    bool known;
} budget_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

ml_suggestion_t *ml__advice_add(ml_advice_t *adv) {
    if (adv->n == adv->cap) {
        size_t ncap = adv->cap ? adv->cap * 2 : 16;
        ml_suggestion_t *n = realloc(adv->s, ncap * sizeof *n);
        if (!n) return NULL;
        adv->s = n;
        adv->cap = ncap;
    }
    ml_suggestion_t *s = &adv->s[adv->n++];
    memset(s, 0, sizeof *s);
    s->device = -1;
    s->site = -1;
    return s;
}

const ml_sim_metrics_t *ml__advice_policy(const ml_advice_t *adv, const char *name) {
    for (size_t i = 0; i < adv->npol; i++)
        if (!strcmp(adv->pol[i].name, name)) return &adv->pol[i];
    return NULL;
}

/* The list-based fits of the textbooks and bitmap fit: they rank designs no
 * program can switch to as such, and their searches make them the slow
 * part of the replay (docs/strategies.md, Speed), so only
 * `memlens report --all-policies` runs them. */
static bool is_textbook(const char *name) {
    static const char *const textbook[] = {"first_fit", "next_fit", "best_fit", "worst_fit",
                                           "bitmap_fit", NULL};
    for (int i = 0; textbook[i]; i++)
        if (!strcmp(name, textbook[i])) return true;
    return false;
}

/* ML_ADVISOR_DEBUG=1: each group's statistics on stderr, for tuning the rules. */
static void debug_groups(const ml__adv_t *A, uint64_t long_life) {
    for (uint32_t gi = 0; gi < A->ng; gi++) {
        const ml__adv_group_t *g = &A->g[gi];
        if (g->calls < 100) continue;
        fprintf(stderr,
                "advisor: group key %u stack %u: calls %llu frees %llu churn %llu temps %llu sizes %u "
                "top %llu (%llu) chains %llu steps %llu max %llu small %llu gens %llu pure %llu/%llu "
                "long %llu live %llu\n",
                g->key, g->stack, (unsigned long long)g->calls, (unsigned long long)g->frees,
                (unsigned long long)g->churn_frees, (unsigned long long)g->temps, g->nsizes,
                (unsigned long long)g->size[0], (unsigned long long)g->size_calls[0],
                (unsigned long long)g->chains, (unsigned long long)g->chain_steps,
                (unsigned long long)g->chain_max, (unsigned long long)g->small_growth,
                (unsigned long long)g->gens, (unsigned long long)g->pure_gens,
                (unsigned long long)g->pure_blocks, (unsigned long long)ml__adv_lived_at_least(g, long_life),
                (unsigned long long)g->live);
    }
}

/* ML_ADVISOR_DEBUG=1: the CPU time each replayed policy took. */
static void debug_cpu(const char *pass, const ml_sim_replay_t *r) {
    for (size_t i = 0; i < ml_sim_replay_count(r); i++) {
        ml_sim_metrics_t m;
        ml_sim_replay_metrics(r, i, &m);
        fprintf(stderr, "advisor: %s: %s %.3f s CPU\n", pass, m.name, m.cpu_seconds);
    }
}

static void skip(ml_advice_t *adv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void skip(ml_advice_t *adv, const char *fmt, ...) {
    if (adv->nskipped >= sizeof adv->skipped / sizeof adv->skipped[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(adv->skipped[adv->nskipped++], sizeof adv->skipped[0], fmt, ap);
    va_end(ap);
}

/* The budgets from the analysis' totals; unknown without an analysis. */
static budget_t budget_of(const ml_advisor_opts_t *o) {
    budget_t b = {0};
    const ml_totals_t *t = o->analysis ? ml_analysis_totals(o->analysis) : NULL;
    if (!t) return b;
    b.known = true;
    b.live = t->peak_blocks > t->heap_blocks ? t->peak_blocks : t->heap_blocks;
    b.ops = t->alloc_calls + t->free_calls;
    if (t->sample_bytes && t->alloc_calls) {
        /* The replay runs the recorded samples, while the block and call
         * counts are the estimates (each sample weighs 1 / its chance):
         * the samples' share of the estimated calls scales the blocks
         * back, and the operations are the recorded calls. With the
         * estimated allocations, 1,112 recorded operations of 30 M
         * malloc(16)s at --sample 1M were taken for 30 M, over the
         * budget: no policy table, no what-ifs. */
        uint64_t raw = 0;
        for (int k = ML_KIND_MALLOC; k < ML_KIND_FREE; k++) raw += t->calls_by_kind[k];
        double share = (double)raw / (double)t->alloc_calls;
        b.live = (uint64_t)((double)b.live * (share < 1 ? share : 1) + 0.5);
        b.ops = raw + t->calls_by_kind[ML_KIND_FREE];
    }
    b.bytes = o->budget_bytes ? o->budget_bytes : ML_ADVISOR_BUDGET_BYTES;
    b.ops_budget = o->budget_ops ? o->budget_ops : ML_ADVISOR_BUDGET_OPS;
    b.units_x2 = b.ops ? 2 * b.ops_budget / b.ops : UINT64_MAX;
    return b;
}

/* How many policies pass 1 may replay: the whole table, or only the
 * baseline and the real allocator (the what-ifs need the first, tuning
 * both), or none. Returns the number, 0 when the replay must be skipped;
 * then *stats says whether the statistics pass fits instead: the driver's
 * memory within the memory budget, the trace within STATS_OPS_FACTOR times
 * the operations budget. */
static unsigned pass1_policies(ml_advice_t *adv, budget_t *b, unsigned full, bool *stats) {
    *stats = false;
    if (!b->known) return full;
    uint64_t per_policy = b->live * BYTES_PER_LIVE_POLICY, driver = b->live * BYTES_PER_LIVE_DRIVER;
    unsigned n = full;
    while (n >= 2 && (driver + n * per_policy > b->bytes || 2ull * n > b->units_x2)) n = n > 2 ? 2 : 0;
    char need[32], have[32];
    if (!n) {
        *stats = driver <= b->bytes && b->ops / STATS_OPS_FACTOR <= b->ops_budget;
        skip(adv,
             "the replay: %llu live blocks at the peak and %llu operations need about %s and %llu "
             "policy passes, over the budget (%s, %llu pass%s: --advisor-mem, --advisor-ops); no "
             "policy table, no what-ifs%s",
             (unsigned long long)b->live, (unsigned long long)b->ops,
             ml_fmt_bytes(driver + 2 * per_policy, need, sizeof need), 2ull,
             ml_fmt_bytes(b->bytes, have, sizeof have), (unsigned long long)(b->units_x2 / 2),
             b->units_x2 / 2 == 1 ? "" : "es",
             *stats ? "; the suggestions come from the call statistics alone (one pass over the trace), "
                      "with no saving estimated"
                    : "");
        return 0;
    }
    if (n < full)
        skip(adv,
             "policy table: %u of %u policies not replayed (about %s and %u passes over %llu "
             "operations would exceed the budget of %s and %llu passes: --advisor-mem, "
             "--advisor-ops); kept the baseline and the real allocator",
             full - n, full, ml_fmt_bytes(driver + full * per_policy, need, sizeof need), full,
             (unsigned long long)b->ops, ml_fmt_bytes(b->bytes, have, sizeof have),
             (unsigned long long)(b->units_x2 / 2));
    b->bytes -= driver + n * per_policy < b->bytes ? driver + n * per_policy : b->bytes;
    b->units_x2 -= 2ull * n;
    return n;
}

/* The ids to make room for at once: the live blocks at the peak, when the
 * analysis knows them (ml_sim_replay_reserve). */
static uint32_t reserve_ids(const budget_t *b) {
    return b->known && b->live < UINT32_MAX ? (uint32_t)b->live : 0;
}

/* Pass 1: every policy of the comparison table (and the real allocator),
 * with the group statistics fed from the same ops. `npol` > 2 keeps the
 * whole table, 2 only the baseline and the real allocator, 0 none (the
 * statistics pass). */
static int pass1(const char *trace_path, ml_advice_t *adv, ml__adv_t *A, unsigned npol, uint32_t ids,
                 ml_sim_oplog_t *log, char *err, size_t errlen) {
    const ml_advisor_opts_t *o = A->o;
    ml_sim_replay_t *r1 = NULL;
    int rc = ml_sim_replay_new(o->threads, &r1);
    if (rc < 0) return rc;
    for (const char *const *nm = ml_sim_policy_names; *nm && rc == 0 && npol; nm++) {
        if (!o->all_policies && is_textbook(*nm)) continue;
        if (npol <= 2 && strcmp(*nm, ML__ADV_BASELINE)) continue;
        ml_sim_policy_t *p;
        rc = ml_sim_policy_new(*nm, NULL, &p);
        if (rc == 0) rc = ml_sim_replay_add(r1, p);
    }
    if (rc == 0 && npol) {
        ml_sim_policy_t *p;
        rc = ml_sim_real_new(NULL, &p);
        if (rc == 0) rc = ml_sim_replay_add(r1, p);
    }
    if (rc == 0) rc = ml_sim_replay_reserve(r1, ids);
    if (rc == 0 && !o->no_what_if) rc = ml__adv_observe_reserve(A, ids);
    if (rc < 0) goto done;
    if (!o->no_what_if) ml_sim_replay_observe(r1, ml__adv_observe, A);
    if (log) ml_sim_replay_log(r1, log);
    ml_sim_replay_records(r1, o->on_record, o->on_record_ctx);
    /* The baseline's footprint, op by op, for pass 2's separate_lifetimes
     * routers; without a temporary file each runs its own copy instead. */
    for (size_t i = 0; A->base_series && i < ml_sim_replay_count(r1); i++) {
        ml_sim_metrics_t m;
        ml_sim_replay_metrics(r1, i, &m);
        if (!strcmp(m.name, ML__ADV_BASELINE)) ml_sim_replay_series(r1, i, A->base_series);
    }
    const char *label = !o->progress ? NULL : npol ? "simulating allocators" : "reading the allocation statistics";
    if ((rc = ml_sim_replay_file_progress(r1, trace_path, label, err, errlen)) < 0)
        goto done;
    if ((rc = ml_sim_replay_finish(r1)) < 0) goto done;
    if (ml_option_bool(ML_ENV_ADVISOR_DEBUG)) debug_cpu("pass 1", r1);
    adv->npol = ml_sim_replay_count(r1);
    for (size_t i = 0; i < adv->npol && i < 16; i++) ml_sim_replay_metrics(r1, i, &adv->pol[i]);
    adv->sampled = ml_sim_replay_sampled(r1);
    adv->ops = ml_sim_replay_ops(r1);
    if (A->oom) rc = -ENOMEM;
done:
    ml_sim_replay_free(r1);
    return rc;
}

/* Puts the candidates (most important first) whose routers fit what is
 * left of the budgets in front, keeping their order, and the others after
 * them; says how many were left out. Returns how many are priced: the
 * others get the suggestions whose evidence is counts, as in the
 * statistics pass. */
static size_t fit_candidates(ml_advice_t *adv, budget_t *b, ml__adv_cand_t *cands, size_t nc) {
    if (!b->known) return nc;
    ml__adv_cand_t rest[ML__ADV_MAX_CANDIDATES];
    size_t k = 0, nrest = 0;
    uint64_t units = 0, bytes = 0;
    for (size_t i = 0; i < nc; i++) {
        /* a pow2 pair (buddy, then its segregated-fit twin) is priced together or not at all */
        bool pair = cands[i].kind == ML__ADV_POW2_BUDDY && cands[i].pair >= 0;
        uint64_t u = cands[i].kind == ML__ADV_SEPARATE ? SEPARATE_UNITS_X2 : ROUTER_UNITS_X2;
        if (pair) u *= 2;
        uint64_t m = b->live * BYTES_PER_LIVE_POLICY * u / 2;
        bool fits = units + u <= b->units_x2 && bytes + m <= b->bytes;
        for (size_t j = i; j <= i + pair; j++) {
            ml__adv_cand_t c = cands[j];
            if (fits) {
                if (pair) c.pair = j == i ? (int)k + 1 : -1;
                cands[k++] = c;
            } else {
                c.pair = -1; /* pow2 advice needs both replays: none without them */
                rest[nrest++] = c;
            }
        }
        if (fits) {
            units += u;
            bytes += m;
        }
        i += pair;
    }
    memcpy(cands + k, rest, nrest * sizeof *rest);
    if (k < nc)
        skip(adv,
             "what-ifs: %zu of %zu candidates not priced (each replays %llu operations through a copy of "
             "the baseline: over the budget, --advisor-mem and --advisor-ops); those whose evidence is counts are "
             "suggested from the call statistics alone, with no saving estimated",
             nc - k, nc, (unsigned long long)b->ops);
    return k;
}

/* Pass 2: one router per candidate, all in one replay; then the decisions. */
static int pass2(const char *trace_path, ml_sim_oplog_t *log, ml_advice_t *adv, const ml__adv_t *A,
                 ml__adv_cand_t *cands, size_t nc, uint64_t base_peak, uint64_t long_life, uint32_t ids,
                 bool debug, char *err, size_t errlen) {
    uint64_t min_saving = ml__adv_min_saving(base_peak);
    ml_sim_replay_t *r2 = NULL;
    int rc = ml_sim_replay_new(A->o->threads, &r2);
    for (size_t i = 0; i < nc && rc == 0; i++) {
        rc = ml__adv_make_router(&cands[i], &A->g[cands[i].gi], A->base_series);
        if (rc == 0) rc = ml_sim_replay_add(r2, cands[i].router);
    }
    if (rc == 0) rc = ml_sim_replay_reserve(r2, ids);
    /* Pass 1's ops when they were logged; the trace again otherwise. */
    const char *label = A->o->progress ? "pricing what-ifs" : NULL;
    if (rc == 0 && ml_sim_oplog_ok(log)) rc = ml_sim_replay_oplog(r2, log, label, err, errlen);
    else if (rc == 0) rc = ml_sim_replay_file_progress(r2, trace_path, label, err, errlen);
    if (rc == 0) rc = ml_sim_replay_finish(r2);
    if (rc == 0 && debug) {
        debug_cpu("pass 2", r2);
        fprintf(stderr, "advisor: pass 2 read %s (%llu bytes)\n",
                ml_sim_oplog_ok(log) ? "pass 1's op log" : "the trace",
                (unsigned long long)ml_sim_oplog_bytes(log));
    }
    if (rc == 0) {
        for (size_t i = 0; i < nc; i++) {
            if (debug) {
                ml_sim_metrics_t m;
                ml_sim_metrics(cands[i].router, &m);
                fprintf(stderr,
                        "advisor: candidate %s for stack %u: peak %llu vs baseline %llu (min saving %llu)\n",
                        cands[i].name, A->g[cands[i].gi].stack, (unsigned long long)m.peak_footprint,
                        (unsigned long long)base_peak, (unsigned long long)min_saving);
            }
            ml__adv_decide(adv, A, cands, i, base_peak, min_saving, long_life);
        }
    }
    ml_sim_replay_free(r2);
    return rc;
}

int ml_advisor_run(const char *trace_path, const ml_advisor_opts_t *o, ml_advice_t **out, char *err,
                   size_t errlen) {
    static const ml_advisor_opts_t none = {0};
    if (!o) o = &none;
    double t0 = now_s();
    ml_advice_t *adv = calloc(1, sizeof *adv);
    if (!adv) return -ENOMEM;
    ml__adv_t A = {.o = o};
    ml__adv_cand_t *cands = NULL;
    ml_sim_oplog_t *log = NULL;
    int rc = 0;
    bool debug = ml_option_bool(ML_ENV_ADVISOR_DEBUG);

    if (o->analysis && ml__adv_build_site_keys(&A) < 0) {
        rc = -ENOMEM;
        goto fail;
    }
    budget_t b = budget_of(o);
    unsigned full = 1; /* the real allocator */
    for (const char *const *nm = ml_sim_policy_names; *nm; nm++)
        if (o->all_policies || !is_textbook(*nm)) full++;
    bool stats;
    unsigned npol = pass1_policies(adv, &b, full, &stats);
    if (!npol && (!stats || o->no_what_if)) goto done;
    /* Pass 2 reads pass 1's ops back from a log rather than decoding the
     * trace again, when a temporary file can be had (ml_sim.h). */
    if (npol && !o->no_what_if && ml_sim_oplog_new(&log) < 0) log = NULL;
    if (npol && !o->no_what_if && ml_sim_fpseries_new(&A.base_series) < 0) A.base_series = NULL;
    if ((rc = pass1(trace_path, adv, &A, npol, reserve_ids(&b), log, err, errlen)) < 0) goto fail;
    ml__adv_observe_end(&A);

    const ml_sim_metrics_t *base = ml__advice_policy(adv, ML__ADV_BASELINE);
    uint64_t base_peak = base ? base->peak_footprint : 0;
    uint64_t long_life = ml__adv_long_life(&A);
    if (!adv->sampled && !o->no_what_if && A.ng) {
        if (debug) debug_groups(&A, long_life);
        cands = calloc(ML__ADV_MAX_CANDIDATES, sizeof *cands);
        int nc = cands ? ml__adv_candidates(&A, long_life, cands) : -ENOMEM;
        if (nc < 0) {
            rc = nc;
            goto fail;
        }
        if (!npol) {
            /* The statistics pass: no router, the evidence is counts. */
            for (int i = 0; i < nc; i++) ml__adv_decide(adv, &A, cands, (size_t)i, 0, 0, long_life);
        } else {
            size_t priced = fit_candidates(adv, &b, cands, (size_t)nc);
            if (priced && (rc = pass2(trace_path, log, adv, &A, cands, priced, base_peak, long_life,
                                      reserve_ids(&b), debug, err, errlen)) < 0)
                goto fail;
            /* The ones the budget left unpriced: their counts, as in the statistics pass. */
            for (size_t i = priced; i < (size_t)nc; i++) ml__adv_decide(adv, &A, cands, i, 0, 0, long_life);
        }
        free(cands);
        cands = NULL;
        ml__adv_dedupe(adv);
        ml__adv_decide_tuning(adv, &A);
    }
done:
    if (o->analysis && !adv->sampled) {
        ml_suggestion_t gpu[16];
        size_t n = ml_advisor_gpu_suggestions(o->analysis, gpu, 16);
        for (size_t i = 0; i < n; i++) {
            ml_suggestion_t *s = ml__advice_add(adv);
            if (s) *s = gpu[i];
        }
    }
    ml__adv_sort(adv);
    if (adv->n > ML__ADV_MAX_SUGGESTIONS) adv->n = ML__ADV_MAX_SUGGESTIONS;
    adv->seconds = now_s() - t0;
    ml__adv_state_free(&A);
    ml_sim_oplog_free(log);
    *out = adv;
    return 0;
fail:
    free(cands);
    ml_sim_oplog_free(log);
    ml__adv_state_free(&A);
    ml_advice_free(adv);
    if (rc == -ENOMEM && err && errlen && !err[0]) snprintf(err, errlen, "out of memory");
    return rc;
}

size_t ml_advice_suggestions(const ml_advice_t *a, const ml_suggestion_t **out) {
    *out = a->s;
    return a->n;
}

const char *ml_advice_skipped(const ml_advice_t *a, size_t i) {
    return a && i < a->nskipped ? a->skipped[i] : NULL;
}

size_t ml_advice_policies(const ml_advice_t *a, const ml_sim_metrics_t **out) {
    *out = a->pol;
    return a->npol;
}

const char *ml_advice_baseline(const ml_advice_t *a) {
    (void)a;
    return ML__ADV_BASELINE;
}

bool ml_advice_sampled(const ml_advice_t *a) {
    return a->sampled;
}

void ml_advice_stats(const ml_advice_t *a, uint64_t *ops, double *seconds) {
    if (ops) *ops = a->ops;
    if (seconds) *seconds = a->seconds;
}

void ml_advice_free(ml_advice_t *a) {
    if (!a) return;
    free(a->strategies);
    free(a->s);
    free(a);
}
