/* advice_json.c - the strategy advisor's keys of the JSON report:
 * "suggestions" (DESIGN.md's contract) and "policies" (the comparison table
 * of every simulated allocator on the whole trace), plus "advisor" (how the
 * numbers were made). Presentation only: the numbers come from
 * analysis/ml_advisor.h; docs/strategies.md says what they mean. */
#include "report_internal.h"

#include <math.h>

static void frag(ml_json_t *w, const ml_sim_frag_t *f, bool known) {
    ml_json_object(w);
    ml_json_kv_u64(w, "footprint_bytes", f->footprint);
    ml_json_kv_u64(w, "live_requested_bytes", f->live_requested);
    ml_json_kv_u64(w, "live_blocks", f->live_count);
    if (known) {
        ml_json_kv_u64(w, "block_bytes", f->live_blocks);
        ml_json_kv_u64(w, "free_bytes", f->free_bytes);
        ml_json_kv_u64(w, "largest_free_bytes", f->largest_free);
        ml_json_kv_double(w, "internal", f->internal);
        ml_json_kv_double(w, "external", f->external);
    } else {
        ml_json_kv_null(w, "block_bytes");
        ml_json_kv_null(w, "free_bytes");
        ml_json_kv_null(w, "largest_free_bytes");
        ml_json_kv_null(w, "internal");
        ml_json_kv_null(w, "external");
    }
    ml_json_kv_double(w, "page_utilization", f->page_utilization);
    ml_json_kv_ms_as_s(w, "time_s", f->time_ms);
    ml_json_end(w);
}

static void policy(ml_json_t *w, const ml_sim_metrics_t *m) {
    bool k = m->known_fragmentation;
    ml_json_object(w);
    ml_json_kv_str(w, "name", m->name);
    ml_json_kv_u64(w, "peak_footprint_bytes", m->peak_footprint);
    if (m->peak_extent) ml_json_kv_u64(w, "peak_extent_bytes", m->peak_extent);
    else ml_json_kv_null(w, "peak_extent_bytes");
    ml_json_kv_double(w, "external_fragmentation", k ? m->at_peak.external : NAN);
    ml_json_kv_double(w, "internal_fragmentation", k ? m->at_peak.internal : NAN);
    ml_json_kv_double(w, "page_utilization", m->at_peak.page_utilization);
    ml_json_kv_double(w, "cost_per_op", m->known_cost ? m->cost_per_op : NAN);
    if (m->known_cost) {
        ml_json_kv_u64(w, "search_steps", m->search_steps);
        ml_json_kv_u64(w, "splits", m->splits);
        ml_json_kv_u64(w, "merges", m->merges);
        ml_json_kv_u64(w, "max_op_steps", m->max_op_steps);
    }
    ml_json_kv_u64(w, "allocs", m->allocs);
    ml_json_kv_u64(w, "frees", m->frees);
    if (!k) ml_json_kv_u64(w, "os_held_peak_bytes", m->os_held_peak);
    ml_json_break(w, 3);
    ml_json_key(w, "at_peak");
    frag(w, &m->at_peak, k);
    ml_json_break(w, 3);
    ml_json_key(w, "at_end");
    frag(w, &m->at_end, k);
    ml_json_end(w);
}

void ml__report_json_advice(ml_json_t *w, const ml_analysis_t *a, const struct ml_advice_s *adv) {
    const ml_suggestion_t *s = NULL;
    ml_suggestion_t gpu[16];
    size_t n = adv ? ml_advice_suggestions(adv, &s) : ml_advisor_gpu_suggestions(a, gpu, 16);
    if (!adv) s = gpu;
    ml_json_key(w, "suggestions");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_str(w, "strategy", s[i].strategy);
        ml_json_kv_str(w, "message", s[i].message);
        if (s[i].site >= 0) ml_json_kv_i64(w, "site", s[i].site);
        else ml_json_kv_null(w, "site");
        ml_json_kv_u64(w, "estimated_saving_bytes", s[i].estimated_saving_bytes);
        if (s[i].device >= 0) ml_json_kv_i64(w, "device", s[i].device);
        if (s[i].what_if[0]) ml_json_kv_str(w, "what_if", s[i].what_if);
        ml_json_break(w, 3);
        ml_json_key(w, "evidence");
        ml__report_json_evidence(w, &s[i]);
        ml_json_end(w);
    }
    ml_json_break(w, 0);
    ml_json_end(w);
    const ml_sim_metrics_t *p = NULL;
    size_t np = adv ? ml_advice_policies(adv, &p) : 0;
    ml_json_break(w, 0);
    ml_json_key(w, "policies");
    ml_json_array(w);
    for (size_t i = 0; i < np; i++) {
        ml_json_break(w, 2);
        policy(w, &p[i]);
    }
    ml_json_break(w, 0);
    ml_json_end(w);
    ml_json_break(w, 0);
    ml_json_key(w, "advisor");
    ml_json_object(w);
    ml_json_kv_bool(w, "ran", adv != NULL);
    if (adv) {
        uint64_t ops = 0;
        double secs = 0;
        ml_advice_stats(adv, &ops, &secs);
        ml_json_kv_str(w, "baseline", ml_advice_baseline(adv));
        ml_json_kv_bool(w, "sampled", ml_advice_sampled(adv));
        ml_json_kv_u64(w, "replayed_ops", ops);
        /* wall time, to the millisecond like the report's other times */
        ml_json_kv_ms_as_s(w, "seconds", secs > 0 ? (uint64_t)llround(secs * 1000) : 0);
        /* what the budgets left out (ml_advisor_opts_t); absent when nothing */
        if (ml_advice_skipped(adv, 0)) {
            ml_json_key(w, "skipped");
            ml_json_array(w);
            for (size_t i = 0; ml_advice_skipped(adv, i); i++) ml_json_str(w, ml_advice_skipped(adv, i));
            ml_json_end(w);
        }
    }
    ml_json_end(w);
}

/* ------------------------------------------------------------------------- */
/* Evidence                                                                  */
/* ------------------------------------------------------------------------- */

/* The evidence of a heap site: its pattern, the what-if, its sites, then
 * what the strategy adds. Keys and their order: docs/strategies.md. */
static void site_evidence(ml_json_t *w, const ml_site_evidence_t *e, const char *what_if) {
    ml_json_kv_u64(w, "calls", e->calls);
    ml_json_kv_u64(w, "bytes_allocated", e->bytes_allocated);
    ml_json_kv_u64(w, "frees", e->frees);
    ml_json_kv_u64(w, "stack", e->stack);
    ml_json_kv_u64(w, "max_live_bytes", e->max_live_bytes);
    ml_json_kv_u64(w, "max_live_blocks", e->max_live_blocks);
    ml_json_key(w, "sizes");
    ml_json_object(w);
    ml_json_kv_u64(w, "min", e->sizes.min);
    ml_json_kv_u64(w, "max", e->sizes.max);
    ml_json_kv_u64(w, "distinct", e->sizes.distinct);
    ml_json_kv_bool(w, "more_distinct", e->sizes.more_distinct);
    ml_json_key(w, "top");
    ml_json_array(w);
    for (uint32_t i = 0; i < e->sizes.ntop && i < ML_EVIDENCE_TOP_SIZES; i++) {
        ml_json_object(w);
        ml_json_kv_u64(w, "size", e->sizes.top[i].size);
        ml_json_kv_u64(w, "calls", e->sizes.top[i].calls);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
    ml_json_key(w, "lifetimes");
    ml_json_object(w);
    ml_json_kv_u64(w, "freed", e->lifetimes.freed);
    ml_json_kv_u64(w, "live_at_end", e->lifetimes.live_at_end);
    ml_json_kv_double(w, "mean_ms", e->lifetimes.mean_ms);
    ml_json_kv_u64(w, "max_ms", e->lifetimes.max_ms);
    ml_json_kv_u64(w, "median_allocations_at_most", e->lifetimes.median_allocations_at_most);
    ml_json_kv_u64(w, "p90_allocations_at_most", e->lifetimes.p90_allocations_at_most);
    ml_json_kv_double(w, "long_lived_fraction", e->lifetimes.long_lived_fraction);
    ml_json_kv_u64(w, "long_lived_at_least_allocations", e->lifetimes.long_lived_at_least_allocations);
    ml_json_end(w);
    if (!e->simulation.baseline) {
        /* the statistics pass: nothing was replayed (docs/strategies.md, "Budgets") */
        ml_json_kv_null(w, "simulation");
    } else {
        ml_json_key(w, "simulation");
        ml_json_object(w);
        ml_json_kv_str(w, "baseline", e->simulation.baseline);
        ml_json_kv_u64(w, "baseline_peak_bytes", e->simulation.baseline_peak_bytes);
        ml_json_kv_str(w, "what_if", what_if);
        ml_json_kv_u64(w, "what_if_peak_bytes", e->simulation.what_if_peak_bytes);
        ml_json_end(w);
    }
    if (e->nsites) {
        ml_json_key(w, "sites");
        ml_json_array(w);
        for (uint32_t i = 0; i < e->nsites && i < ML_EVIDENCE_SITES; i++) ml_json_u64(w, e->sites[i]);
        ml_json_end(w);
    }
    switch (e->finding) {
    case ML_FINDING_NONE:
        break;
    case ML_FINDING_CALLS:
        ml_json_kv_u64(w, "calls_avoided", e->work.calls_avoided);
        ml_json_kv_u64(w, "allocator_steps_saved", e->work.allocator_steps_saved);
        ml_json_kv_str(w, "gain", e->work.time_only ? "time" : "memory and time");
        break;
    case ML_FINDING_BATCHES:
        ml_json_kv_u64(w, "batches", e->batches.batches);
        ml_json_kv_u64(w, "blocks_in_batches", e->batches.blocks_in_batches);
        break;
    case ML_FINDING_TEMPORARIES:
        ml_json_kv_u64(w, "temporaries", e->temporaries.temporaries);
        ml_json_kv_double(w, "temporary_fraction", e->temporaries.temporary_fraction);
        ml_json_kv_u64(w, "max_temporary_bytes", e->temporaries.max_temporary_bytes);
        ml_json_kv_u64(w, "calls_avoided", e->temporaries.calls_avoided);
        break;
    case ML_FINDING_CHAINS:
        ml_json_kv_u64(w, "realloc_calls", e->chains.realloc_calls);
        ml_json_kv_u64(w, "chains", e->chains.chains);
        ml_json_kv_u64(w, "realloc_steps", e->chains.realloc_steps);
        ml_json_kv_u64(w, "longest_chain", e->chains.longest_chain);
        ml_json_kv_u64(w, "small_growth_steps", e->chains.small_growth_steps);
        ml_json_kv_u64(w, "mean_growth_bytes", e->chains.mean_growth_bytes);
        ml_json_kv_u64(w, "bytes_copied_at_most", e->chains.bytes_copied_at_most);
        ml_json_kv_u64(w, "reallocs_avoided", e->chains.reallocs_avoided);
        ml_json_kv_u64(w, "bytes_not_copied", e->chains.bytes_not_copied);
        break;
    case ML_FINDING_PINNED:
        ml_json_kv_u64(w, "pinned_pages", e->pinned.pinned_pages);
        ml_json_kv_u64(w, "pinned_bytes", e->pinned.pinned_bytes);
        ml_json_kv_ms_as_s(w, "pinned_at_s", e->pinned.pinned_at_ms);
        ml_json_kv_u64(w, "long_lived_blocks", e->pinned.long_lived_blocks);
        break;
    case ML_FINDING_POW2:
        ml_json_kv_u64(w, "just_over_pow2_calls", e->pow2.just_over_pow2_calls);
        ml_json_kv_u64(w, "buddy_peak_bytes", e->pow2.buddy_peak_bytes);
        ml_json_kv_u64(w, "waste_under_buddy_bytes", e->pow2.waste_under_buddy_bytes);
        break;
    }
}

void ml__report_json_evidence(ml_json_t *w, const ml_suggestion_t *s) {
    const ml_evidence_t *e = &s->evidence;
    ml_json_object(w);
    switch (e->kind) {
    case ML_EVIDENCE_NONE:
        break;
    case ML_EVIDENCE_SITE:
        site_evidence(w, &e->site, s->what_if);
        break;
    case ML_EVIDENCE_TUNING:
        ml_json_kv_u64(w, "real_peak_footprint_bytes", e->tuning.real_peak_footprint_bytes);
        ml_json_kv_u64(w, "real_os_held_peak_bytes", e->tuning.real_os_held_peak_bytes);
        ml_json_kv_str(w, "best_policy", e->tuning.best_policy);
        ml_json_kv_u64(w, "best_peak_footprint_bytes", e->tuning.best_peak_footprint_bytes);
        ml_json_kv_u64(w, "threads", e->tuning.threads);
        ml_json_kv_u64(w, "calls", e->tuning.calls);
        break;
    case ML_EVIDENCE_GPU:
        ml_json_kv_u64(w, "device", e->gpu.device);
        ml_json_kv_u64(w, "stack", e->gpu.stack);
        ml_json_kv_u64(w, "calls", e->gpu.calls);
        ml_json_kv_u64(w, "pairs", e->gpu.pairs);
        ml_json_kv_u64(w, "bytes", e->gpu.bytes);
        ml_json_kv_double(w, "pairs_per_s", e->gpu.pairs_per_s);
        ml_json_kv_u64(w, "distinct_sizes", e->gpu.distinct_sizes);
        ml_json_kv_u64(w, "cycles", e->gpu.cycles);
        ml_json_kv_double(w, "share", e->gpu.share);
        ml_json_kv_str(w, "summary", e->gpu.summary);
        break;
    }
    ml_json_end(w);
}

int ml_report_json_evidence(FILE *out, const struct ml_suggestion_s *s) {
    ml_json_t *w;
    int rc = ml_json_new(out, &w);
    if (rc < 0) return rc;
    ml__report_json_evidence(w, s);
    rc = ml_json_finish(w);
    ml_json_free(w);
    return rc;
}
