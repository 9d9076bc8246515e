/* evidence.c - a suggestion's evidence in words, for the Suggestions view.
 *
 * The advisor hands each suggestion its numbers as plain fields
 * (ml_evidence_t, analysis/ml_advisor.h); the JSON report writes them as an
 * object with one key per field (report/advice_json.c, docs/strategies.md,
 * "Evidence"). A person reading a terminal wants the same numbers with
 * labels and units: "calls avoided 2,000,000", "mean lifetime 0.14 us",
 * "48 B x 1,000,000". The recorded stack id (an internal number) is left
 * out; the analysis sites are named by their "#N", as everywhere in the
 * viewer and on the HTML page. No number is computed here.
 */
#include "viewer_internal.h"

#include "ml_advisor.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* A duration given in milliseconds, in the unit that keeps it readable:
 * "0.14 us", "35 us", "2.5 ms", "1.93 s". */
static const char *fmt_ms(double ms, char *buf, size_t len) {
    if (ms <= 0)
        snprintf(buf, len, "0 s");
    else if (ms < 0.001)
        snprintf(buf, len, "%.3g ns", ms * 1e6);
    else if (ms < 1)
        snprintf(buf, len, "%.3g us", ms * 1e3);
    else if (ms < 1000)
        snprintf(buf, len, "%.3g ms", ms);
    else
        snprintf(buf, len, "%.3g s", ms / 1000);
    return buf;
}

/* "2,000,000" */
#define G(n, b) ml__fmt_group((n), (b), sizeof(b))
/* "45.8 MiB" */
#define B(n, b) ml_fmt_bytes((n), (b), sizeof(b))

/* A lifetime counted in allocations made meanwhile, as the advisor's
 * power-of-two bucket bound (UINT64_MAX: the last, open bucket). */
static const char *fmt_allocs(uint64_t n, char *buf, size_t len) {
    char g[40];
    if (n == UINT64_MAX)
        snprintf(buf, len, "more than any bucket of allocations");
    else
        snprintf(buf, len, "%s %s", G(n, g), n == 1 ? "allocation" : "allocations");
    return buf;
}

static void site_evidence(FILE *f, const ml_site_evidence_t *e, const char *what_if) {
    char a[48], b[48], c[48], d[48], e2[48], t1[32], t2[32];
    fprintf(f, "calls %s (%s allocated), frees %s; at most %s live in %s %s", G(e->calls, a),
            B(e->bytes_allocated, b), G(e->frees, c), B(e->max_live_bytes, d),
            G(e->max_live_blocks, t1), e->max_live_blocks == 1 ? "block" : "blocks");
    /* sizes */
    if (e->sizes.min == e->sizes.max)
        fprintf(f, "\nsizes: %s only", B(e->sizes.min, a));
    else
        fprintf(f, "\nsizes: %s to %s, %s%u distinct", B(e->sizes.min, a), B(e->sizes.max, b),
                e->sizes.more_distinct ? "more than " : "", e->sizes.distinct);
    for (uint32_t i = 0; i < e->sizes.ntop && i < ML_EVIDENCE_TOP_SIZES; i++)
        fprintf(f, "%s%s x %s", i ? ", " : "; most often ", B(e->sizes.top[i].size, a),
                G(e->sizes.top[i].calls, b));
    /* lifetimes */
    if (e->lifetimes.freed) {
        fprintf(f, "\nlifetimes: mean %s, longest %s; half were freed within %s",
                fmt_ms(e->lifetimes.mean_ms, t1, sizeof t1),
                fmt_ms((double)e->lifetimes.max_ms, t2, sizeof t2),
                fmt_allocs(e->lifetimes.median_allocations_at_most, a, sizeof a));
        fprintf(f, ", nine in ten within %s",
                fmt_allocs(e->lifetimes.p90_allocations_at_most, a, sizeof a));
    } else {
        fprintf(f, "\nlifetimes: no block was freed");
    }
    fprintf(f, "; %s live at the end", G(e->lifetimes.live_at_end, a));
    if (e->lifetimes.long_lived_fraction > 0)
        fprintf(f, "; %.0f%% of the calls lived %s or to the end",
                e->lifetimes.long_lived_fraction * 100,
                fmt_allocs(e->lifetimes.long_lived_at_least_allocations, b, sizeof b));
    /* the replay */
    if (e->simulation.baseline)
        fprintf(f, "\nreplayed heap peak: %s with %s, %s with %s", B(e->simulation.baseline_peak_bytes, a),
                e->simulation.baseline, B(e->simulation.what_if_peak_bytes, b),
                what_if && what_if[0] ? what_if : "the suggestion");
    if (e->nsites) {
        fprintf(f, "\nsites:");
        for (uint32_t i = 0; i < e->nsites && i < ML_EVIDENCE_SITES; i++)
            fprintf(f, "%s #%" PRIu32, i ? "," : "", e->sites[i]);
    }
    switch (e->finding) {
    case ML_FINDING_NONE:
        break;
    case ML_FINDING_CALLS:
        fprintf(f, "\ncalls avoided %s, allocator steps saved %s; the gain is %s",
                G(e->work.calls_avoided, a), G(e->work.allocator_steps_saved, b),
                e->work.time_only ? "time" : "memory and time");
        break;
    case ML_FINDING_BATCHES:
        fprintf(f, "\nbatches freed whole %s, holding %s %s", G(e->batches.batches, a),
                G(e->batches.blocks_in_batches, b),
                e->batches.blocks_in_batches == 1 ? "block" : "blocks");
        break;
    case ML_FINDING_TEMPORARIES:
        fprintf(f, "\ntemporaries %s (%.0f%% of the calls), the largest %s; calls avoided %s",
                G(e->temporaries.temporaries, a), e->temporaries.temporary_fraction * 100,
                B(e->temporaries.max_temporary_bytes, b), G(e->temporaries.calls_avoided, c));
        break;
    case ML_FINDING_CHAINS:
        fprintf(f,
                "\nreallocs %s in %s growth chains (%s steps, the longest %s; %s small steps, "
                "mean growth %s); copied at most %s",
                G(e->chains.realloc_calls, a), G(e->chains.chains, b),
                G(e->chains.realloc_steps, c), G(e->chains.longest_chain, d),
                G(e->chains.small_growth_steps, t1), B(e->chains.mean_growth_bytes, t2),
                B(e->chains.bytes_copied_at_most, e2));
        fprintf(f, "\nwith geometric growth: reallocs avoided %s, copying avoided %s",
                G(e->chains.reallocs_avoided, a), B(e->chains.bytes_not_copied, b));
        break;
    case ML_FINDING_PINNED:
        fprintf(f, "\npinned pages %s (%s) at %s, by %s long-lived %s", G(e->pinned.pinned_pages, a),
                B(e->pinned.pinned_bytes, b), fmt_ms(e->pinned.pinned_at_ms, t1, sizeof t1),
                G(e->pinned.long_lived_blocks, c),
                e->pinned.long_lived_blocks == 1 ? "block" : "blocks");
        break;
    case ML_FINDING_POW2:
        fprintf(f,
                "\ncalls just over a power of two %s; on a buddy allocator the peak is %s, of "
                "which %s is waste",
                G(e->pow2.just_over_pow2_calls, a), B(e->pow2.buddy_peak_bytes, b),
                B(e->pow2.waste_under_buddy_bytes, c));
        break;
    }
}

int ml__evidence_text(FILE *f, const struct ml_suggestion_s *s) {
    const ml_evidence_t *e = &s->evidence;
    char a[48], b[48], c[48];
    switch (e->kind) {
    case ML_EVIDENCE_NONE:
        break;
    case ML_EVIDENCE_SITE:
        site_evidence(f, &e->site, s->what_if);
        break;
    case ML_EVIDENCE_TUNING:
        fprintf(f, "the program's allocator: peak footprint %s",
                B(e->tuning.real_peak_footprint_bytes, a));
        if (e->tuning.real_os_held_peak_bytes)
            fprintf(f, ", held from the system at most %s (mallinfo)",
                    B(e->tuning.real_os_held_peak_bytes, b));
        fprintf(f, "\nthe best design replayed: %s, peak footprint %s", e->tuning.best_policy,
                B(e->tuning.best_peak_footprint_bytes, c));
        fprintf(f, "\n%s allocating %s, %s calls", G(e->tuning.threads, a),
                e->tuning.threads == 1 ? "thread" : "threads", G(e->tuning.calls, b));
        break;
    case ML_EVIDENCE_GPU:
        fprintf(f, "device %" PRIu32 ": %s", e->gpu.device, e->gpu.summary);
        break;
    }
    return ferror(f) ? -EIO : 0;
}
