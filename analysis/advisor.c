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
 *      keep one footprint strategy per site, add allocator_tuning and the
 *      GPU advice, and order the list by value.
 */
#define _GNU_SOURCE
#include "advisor_internal.h"
#include "ml_options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SUGGESTIONS 20

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

/* Pass 1: every policy of the comparison table (and the real allocator),
 * with the group statistics fed from the same ops. */
static int pass1(const char *trace_path, ml_advice_t *adv, ml__adv_t *A, char *err, size_t errlen) {
    const ml_advisor_opts_t *o = A->o;
    ml_sim_replay_t *r1 = NULL;
    int rc = ml_sim_replay_new(o->threads, &r1);
    if (rc < 0) return rc;
    for (const char *const *nm = ml_sim_policy_names; *nm && rc == 0; nm++) {
        if (!o->all_policies && is_textbook(*nm)) continue;
        ml_sim_policy_t *p;
        rc = ml_sim_policy_new(*nm, NULL, &p);
        if (rc == 0) rc = ml_sim_replay_add(r1, p);
    }
    if (rc == 0) {
        ml_sim_policy_t *p;
        rc = ml_sim_real_new(NULL, &p);
        if (rc == 0) rc = ml_sim_replay_add(r1, p);
    }
    if (rc < 0) goto done;
    if (!o->no_what_if) ml_sim_replay_observe(r1, ml__adv_observe, A);
    if ((rc = ml_sim_replay_file_progress(r1, trace_path, o->progress ? "simulating allocators" : NULL,
                                          err, errlen)) < 0)
        goto done;
    if ((rc = ml_sim_replay_finish(r1)) < 0) goto done;
    adv->npol = ml_sim_replay_count(r1);
    for (size_t i = 0; i < adv->npol && i < 16; i++) ml_sim_replay_metrics(r1, i, &adv->pol[i]);
    adv->sampled = ml_sim_replay_sampled(r1);
    adv->ops = ml_sim_replay_ops(r1);
    if (A->oom) rc = -ENOMEM;
done:
    ml_sim_replay_free(r1);
    return rc;
}

/* Pass 2: one router per candidate, all in one replay; then the decisions. */
static int pass2(const char *trace_path, ml_advice_t *adv, const ml__adv_t *A, ml__adv_cand_t *cands,
                 size_t nc, uint64_t base_peak, uint64_t long_life, bool debug, char *err, size_t errlen) {
    uint64_t min_saving = ml__adv_min_saving(base_peak);
    ml_sim_replay_t *r2 = NULL;
    int rc = ml_sim_replay_new(A->o->threads, &r2);
    for (size_t i = 0; i < nc && rc == 0; i++) {
        rc = ml__adv_make_router(&cands[i], &A->g[cands[i].gi]);
        if (rc == 0) rc = ml_sim_replay_add(r2, cands[i].router);
    }
    if (rc == 0)
        rc = ml_sim_replay_file_progress(r2, trace_path, A->o->progress ? "pricing what-ifs" : NULL, err,
                                         errlen);
    if (rc == 0) rc = ml_sim_replay_finish(r2);
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
    int rc = 0;
    bool debug = ml_option_bool(ML_ENV_ADVISOR_DEBUG);

    if (o->analysis && ml__adv_build_site_keys(&A) < 0) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = pass1(trace_path, adv, &A, err, errlen)) < 0) goto fail;
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
        if (nc && (rc = pass2(trace_path, adv, &A, cands, (size_t)nc, base_peak, long_life, debug, err,
                              errlen)) < 0)
            goto fail;
        free(cands);
        cands = NULL;
        ml__adv_dedupe(adv);
        ml__adv_decide_tuning(adv, &A);
    }
    if (o->analysis && !adv->sampled) {
        ml_suggestion_t gpu[16];
        size_t n = ml_advisor_gpu_suggestions(o->analysis, gpu, 16);
        for (size_t i = 0; i < n; i++) {
            ml_suggestion_t *s = ml__advice_add(adv);
            if (s) *s = gpu[i];
        }
    }
    ml__adv_sort(adv);
    if (adv->n > MAX_SUGGESTIONS) adv->n = MAX_SUGGESTIONS;
    adv->seconds = now_s() - t0;
    ml__adv_state_free(&A);
    *out = adv;
    return 0;
fail:
    free(cands);
    ml__adv_state_free(&A);
    ml_advice_free(adv);
    if (rc == -ENOMEM && err && errlen && !err[0]) snprintf(err, errlen, "out of memory");
    return rc;
}

size_t ml_advice_suggestions(const ml_advice_t *a, const ml_suggestion_t **out) {
    *out = a->s;
    return a->n;
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
    free(a->s);
    free(a);
}
