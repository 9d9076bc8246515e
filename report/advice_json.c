/* advice_json.c - the strategy advisor's keys of the JSON report:
 * "suggestions" (DESIGN.md's contract) and "policies" (the comparison table
 * of every simulated allocator on the whole trace), plus "advisor" (how the
 * numbers were made). Presentation only: the numbers come from
 * analysis/ml_advisor.h; docs/strategies.md says what they mean. */
#include "ml_report.h"
#include "ml_advisor.h"

#include <inttypes.h>
#include <math.h>

static void num(FILE *o, double v) {
    if (isfinite(v)) fprintf(o, "%.6g", v);
    else fputs("null", o);
}

static void frag(FILE *o, const ml_sim_frag_t *f, bool known) {
    fprintf(o, "{\"footprint_bytes\": %" PRIu64 ", \"live_requested_bytes\": %" PRIu64 ", \"live_blocks\": %" PRIu64,
            f->footprint, f->live_requested, f->live_count);
    if (known) {
        fprintf(o, ", \"block_bytes\": %" PRIu64 ", \"free_bytes\": %" PRIu64 ", \"largest_free_bytes\": %" PRIu64
                   ", \"internal\": ",
                f->live_blocks, f->free_bytes, f->largest_free);
        num(o, f->internal);
        fputs(", \"external\": ", o);
        num(o, f->external);
    } else {
        fputs(", \"block_bytes\": null, \"free_bytes\": null, \"largest_free_bytes\": null, \"internal\": null, "
              "\"external\": null",
              o);
    }
    fputs(", \"page_utilization\": ", o);
    num(o, f->page_utilization);
    fprintf(o, ", \"time_s\": %.3f}", f->time_ms / 1000.0);
}

static void policy(FILE *o, const ml_sim_metrics_t *m) {
    bool k = m->known_fragmentation;
    fputs("{\"name\": ", o);
    ml_json_string(o, m->name);
    fprintf(o, ", \"peak_footprint_bytes\": %" PRIu64 ", \"peak_extent_bytes\": ", m->peak_footprint);
    if (m->peak_extent) fprintf(o, "%" PRIu64, m->peak_extent);
    else fputs("null", o);
    fputs(", \"external_fragmentation\": ", o);
    if (k) num(o, m->at_peak.external);
    else fputs("null", o);
    fputs(", \"internal_fragmentation\": ", o);
    if (k) num(o, m->at_peak.internal);
    else fputs("null", o);
    fputs(", \"page_utilization\": ", o);
    num(o, m->at_peak.page_utilization);
    fputs(", \"cost_per_op\": ", o);
    if (m->known_cost) num(o, m->cost_per_op);
    else fputs("null", o);
    if (m->known_cost)
        fprintf(o, ", \"search_steps\": %" PRIu64 ", \"splits\": %" PRIu64 ", \"merges\": %" PRIu64
                   ", \"max_op_steps\": %" PRIu64,
                m->search_steps, m->splits, m->merges, m->max_op_steps);
    fprintf(o, ", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64, m->allocs, m->frees);
    if (!k) fprintf(o, ", \"os_held_peak_bytes\": %" PRIu64, m->os_held_peak);
    fputs(",\n   \"at_peak\": ", o);
    frag(o, &m->at_peak, k);
    fputs(",\n   \"at_end\": ", o);
    frag(o, &m->at_end, k);
    fputs("}", o);
}

void ml_report_json_advice(FILE *o, const ml_analysis_t *a, const struct ml_advice_s *adv) {
    const ml_suggestion_t *s = NULL;
    ml_suggestion_t gpu[16];
    size_t n = adv ? ml_advice_suggestions(adv, &s) : ml_advisor_gpu_suggestions(a, gpu, 16);
    if (!adv) s = gpu;
    fputs("\"suggestions\": [", o);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n  {" : "\n  {", o);
        fputs("\"strategy\": ", o);
        ml_json_string(o, s[i].strategy);
        fputs(", \"message\": ", o);
        ml_json_string(o, s[i].message);
        if (s[i].site >= 0) fprintf(o, ", \"site\": %" PRId64, s[i].site);
        else fputs(", \"site\": null", o);
        fprintf(o, ", \"estimated_saving_bytes\": %" PRIu64, s[i].estimated_saving_bytes);
        if (s[i].device >= 0) fprintf(o, ", \"device\": %d", (int)s[i].device);
        if (s[i].what_if[0]) {
            fputs(", \"what_if\": ", o);
            ml_json_string(o, s[i].what_if);
        }
        /* the advisor builds the evidence object itself (numbers and escaped names) */
        fprintf(o, ",\n   \"evidence\": %s}", s[i].evidence[0] ? s[i].evidence : "{}");
    }
    fputs(n ? "\n],\n" : "],\n", o);
    const ml_sim_metrics_t *p = NULL;
    size_t np = adv ? ml_advice_policies(adv, &p) : 0;
    fputs("\"policies\": [", o);
    for (size_t i = 0; i < np; i++) {
        fputs(i ? ",\n  " : "\n  ", o);
        policy(o, &p[i]);
    }
    fputs(np ? "\n],\n" : "],\n", o);
    fputs("\"advisor\": {\"ran\": ", o);
    fputs(adv ? "true" : "false", o);
    if (adv) {
        uint64_t ops = 0;
        double secs = 0;
        ml_advice_stats(adv, &ops, &secs);
        fputs(", \"baseline\": ", o);
        ml_json_string(o, ml_advice_baseline(adv));
        fprintf(o, ", \"sampled\": %s, \"replayed_ops\": %" PRIu64 ", \"seconds\": %.3f",
                ml_advice_sampled(adv) ? "true" : "false", ops, secs);
    }
    fputs("}", o);
}
