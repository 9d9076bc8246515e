/* test_advisor.c - the strategy advisor end to end: the real `memlens run` on
 * fixture programs with known behaviour, then the advisor on the trace (with
 * the analysis built from it, so that suggestions name functions). */
#define _GNU_SOURCE
#include "harness.h"
#include "ml_advisor.h"
#include "ml_report.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ml_analysis_t *a;
    ml_advice_t *adv;
    const ml_suggestion_t *s;
    size_t n;
    char trace[4096];
    char out[512]; /* the fixture's stdout under memlens */
} adv_run_t;

/* The evidence as the JSON report writes it. */
static char *evidence_text(const ml_suggestion_t *s) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert(f);
    cr_assert_eq(ml_report_json_evidence(f, s), 0);
    fclose(f);
    return text;
}

/* fixture run with one argument (or none: arg NULL), recorded and advised. */
static void advise_arg(const char *fixture, const char *arg, adv_run_t *r) {
    memset(r, 0, sizeof *r);
    char name[256];
    snprintf(name, sizeof name, "%s%s%s.mlt", fixture, arg ? "-" : "", arg ? arg : "");
    snprintf(r->trace, sizeof r->trace, "%s", h_tmp(name));
    const char *argv[] = {h_bin("memlens"), "run", "-q", "-o", r->trace, "--", h_bin(fixture), arg, NULL};
    h_run_t run;
    h_run(&run, argv);
    cr_assert_eq(run.status, 0, "%s: memlens run exited %d: %s", fixture, run.status, run.err);
    snprintf(r->out, sizeof r->out, "%s", run.out ? run.out : "");
    h_run_free(&run);
    char err[1024] = "";
    cr_assert_eq(ml_analysis_new(&r->a), 0);
    cr_assert_eq(ml_analysis_load(r->a, r->trace, err, sizeof err), 0, "%s", err);
    ml_build_opts_t bo = {0};
    cr_assert_eq(ml_analysis_build(r->a, &bo, err, sizeof err), 0, "%s", err);
    ml_advisor_opts_t o = {.threads = 2, .analysis = r->a};
    cr_assert_eq(ml_advisor_run(r->trace, &o, &r->adv, err, sizeof err), 0, "advisor: %s", err);
    r->n = ml_advice_suggestions(r->adv, &r->s);
    for (size_t i = 0; i < r->n; i++) {
        char *ev = evidence_text(&r->s[i]);
        cr_log_info("%s: [%s] site %lld saving %llu (%s)\n  %s\n  %s", fixture, r->s[i].strategy,
                    (long long)r->s[i].site, (unsigned long long)r->s[i].estimated_saving_bytes, r->s[i].what_if,
                    r->s[i].message, ev);
        free(ev);
    }
    /* Right by construction, on every fixture (issue 13, item 7). */
    for (size_t i = 0; i < r->n; i++) {
        const ml_suggestion_t *x = &r->s[i];
        cr_expect_null(strstr(x->message, ")()"), "%s: doubled parentheses: %s", fixture, x->message);
        cr_expect_str_neq(x->strategy, "segregated_fit", "%s: no suggestion to keep what the program has",
                          fixture);
        if (x->evidence.kind == ML_EVIDENCE_SITE && strcmp(x->strategy, "separate_lifetimes"))
            cr_expect_leq(x->estimated_saving_bytes, x->evidence.site.max_live_bytes,
                          "%s: %s saves more than its site ever holds live", fixture, x->strategy);
    }
}

static void advise(const char *fixture, adv_run_t *r) {
    advise_arg(fixture, NULL, r);
}

static void done(adv_run_t *r) {
    ml_advice_free(r->adv);
    ml_analysis_free(r->a);
}

/* The function the suggestion's site calls the allocator from. */
static const char *site_function(const adv_run_t *r, const ml_suggestion_t *s) {
    size_t n = 0;
    const ml_site_t *sites = ml_analysis_sites(r->a, &n);
    if (s->site < 0 || (size_t)s->site >= n || !sites[s->site].nframes) return "";
    return sites[s->site].frames[0].function;
}

/* The suggestion for the site in `function` whose strategy is one of the
 * '|'-separated names, or NULL. */
static const ml_suggestion_t *find(const adv_run_t *r, const char *strategies, const char *function) {
    for (size_t i = 0; i < r->n; i++) {
        char list[128];
        snprintf(list, sizeof list, "|%s|", strategies);
        char want[64];
        snprintf(want, sizeof want, "|%s|", r->s[i].strategy);
        if (!strstr(list, want)) continue;
        if (function && strcmp(site_function(r, &r->s[i]), function)) continue;
        return &r->s[i];
    }
    return NULL;
}

/* A heap site's evidence: the site's pattern and the what-if that backs
 * the suggestion, with the finding of its strategy. */
static void expect_evidence(const ml_suggestion_t *s, ml_finding_t finding) {
    cr_expect_gt(strlen(s->message), 40, "a message in words");
    const ml_site_evidence_t *e = &s->evidence.site;
    cr_assert_eq(s->evidence.kind, ML_EVIDENCE_SITE);
    cr_expect_eq(e->finding, finding);
    cr_expect_gt(e->calls, 0);
    cr_expect_eq(e->stack, s->stack);
    cr_expect_geq(e->sizes.max, e->sizes.min);
    cr_expect_gt(e->sizes.ntop, 0);
    cr_expect_eq(e->lifetimes.freed, e->frees);
    cr_expect_str_eq(e->simulation.baseline, "segregated_fit");
    cr_expect_gt(e->simulation.baseline_peak_bytes, 0);
    cr_expect_gt(e->nsites, 0, "the analysis' sites of the function");
    bool listed = false;
    for (uint32_t i = 0; i < e->nsites; i++) listed |= e->sites[i] == (uint32_t)s->site;
    cr_expect(listed || e->nsites == ML_EVIDENCE_SITES, "the suggestion's site is one of its function's");
    char *text = evidence_text(s);
    cr_expect(!strncmp(text, "{\"calls\": ", strlen("{\"calls\": ")), "%s", text);
    free(text);
}

Test(advisor, fixed_size_churn_gets_a_pool_varied_sizes_do_not, .timeout = 600) {
    adv_run_t r;
    advise("fx_adv_slab", &r);
    const ml_suggestion_t *s = find(&r, "pool|slab", "make_node");
    cr_assert(s, "no pool/slab suggestion for make_node (%zu suggestions)", r.n);
    cr_expect_gt(s->estimated_saving_bytes, 0);
    const ml_site_evidence_t *e = &s->evidence.site;
    cr_expect_geq(e->calls, 1000000 + 20000);
    cr_expect(strstr(s->message, "make_node"), "the message names the function: %s", s->message);
    cr_expect_eq(e->sizes.top[0].size, 48);
    cr_expect_lt(e->simulation.what_if_peak_bytes, e->simulation.baseline_peak_bytes);
    cr_expect_eq(e->simulation.baseline_peak_bytes - e->simulation.what_if_peak_bytes,
                 s->estimated_saving_bytes);
    expect_evidence(s, ML_FINDING_CALLS);
    cr_expect_eq(e->work.calls_avoided, e->calls + e->frees);
    cr_expect_not(e->work.time_only, "the pool saves memory here");
    cr_expect_null(find(&r, "pool|slab", "make_blob"), "varied sizes get no pool or slab");
    /* The comparison table: every policy and the real allocator. */
    const ml_sim_metrics_t *p;
    size_t np = ml_advice_policies(r.adv, &p);
    cr_expect_eq(np, 6, "segregated fit, TLSF, buddy, slab, arena and the real allocator");
    cr_expect_str_eq(p[np - 1].name, "real");
    for (size_t i = 0; i < np; i++) {
        cr_expect_gt(p[i].peak_footprint, 20000 * 48, "%s", p[i].name);
        cr_expect_eq(p[i].allocs, e->calls + 2000 + 200000, "%s sees every allocation", p[i].name);
    }
    done(&r);
}

Test(advisor, byte_by_byte_realloc_gets_reserve_capacity, .timeout = 300) {
    adv_run_t r;
    advise("fx_adv_realloc", &r);
    const ml_suggestion_t *s = find(&r, "reserve_capacity", "append_byte");
    cr_assert(s, "no reserve_capacity for append_byte (%zu suggestions)", r.n);
    const ml_site_evidence_t *e = &s->evidence.site;
    cr_expect_geq(e->chains.realloc_steps, 5 * 19999 - 5);
    cr_expect_geq(e->chains.longest_chain, 19999);
    cr_expect_gt(e->chains.reallocs_avoided, e->chains.realloc_steps / 2);
    expect_evidence(s, ML_FINDING_CHAINS);
    done(&r);
}

/* Bytes copied are the reallocs that moved the block, as the recorded
 * addresses say: glibc grows grow_alone's buffer in place at the top of the
 * heap (nothing copied, yet the replay used to count every step's old size,
 * 76 MiB), while grow_among's kept notes make some steps move. The fixture
 * counts its own moves from the pointers realloc returns: the oracle. */
Test(advisor, reserve_capacity_counts_only_the_copies_the_allocator_made, .timeout = 300) {
    adv_run_t r;
    advise("fx_adv_inplace", &r);
    unsigned long moved[2], copied[2];
    cr_assert_eq(sscanf(r.out, "alone moved %lu copied %lu among moved %lu copied %lu", &moved[0], &copied[0],
                        &moved[1], &copied[1]),
                 4, "fixture output: %s", r.out);
    cr_expect_lt(moved[0], 10, "glibc grows a lone buffer in place: %s", r.out);
    cr_expect_gt(moved[1], 0, "the notes make the buffer move: %s", r.out);
    const char *fn[2] = {"grow_alone", "grow_among"};
    for (int i = 0; i < 2; i++) {
        const ml_suggestion_t *s = find(&r, "reserve_capacity", fn[i]);
        cr_assert(s, "no reserve_capacity for %s (%zu suggestions)", fn[i], r.n);
        const ml_site_evidence_t *e = &s->evidence.site;
        expect_evidence(s, ML_FINDING_CHAINS);
        cr_expect_eq(e->chains.realloc_steps, 5 * 1999, "%s", fn[i]);
        cr_expect_eq(e->chains.bytes_copied_at_most, copied[i], "%s: copied %llu, the program saw %lu", fn[i],
                     (unsigned long long)e->chains.bytes_copied_at_most, copied[i]);
        cr_expect_leq(e->chains.bytes_not_copied, e->chains.bytes_copied_at_most, "%s", fn[i]);
        cr_expect_gt(e->chains.reallocs_avoided, e->chains.realloc_steps / 2, "%s", fn[i]);
        if (!copied[i])
            cr_expect(strstr(s->message, "grew the block in place each time, nothing was copied"), "%s",
                      s->message);
        else
            cr_expect_null(strstr(s->message, "nothing was copied"), "%s", s->message);
    }
    done(&r);
}

/* 1 M fixed 48-byte blocks, <= 1000 live, FIFO, while another function
 * holds the peak: the pool saves no memory, but time. */
Test(advisor, hot_fifo_churn_gets_a_pool_for_time_and_library_sites_name_the_caller, .timeout = 600) {
    adv_run_t r;
    advise("fx_adv_churn", &r);
    const ml_suggestion_t *s = find(&r, "pool|slab", "churn::make_msg(int)");
    cr_assert(s, "no pool for churn::make_msg(int) (%zu suggestions)", r.n);
    cr_expect_str_eq(s->strategy, "pool");
    const ml_site_evidence_t *e = &s->evidence.site;
    expect_evidence(s, ML_FINDING_CALLS);
    cr_expect_eq(e->calls, 1000000);
    cr_expect_eq(e->frees, 1000000);
    cr_expect_eq(e->max_live_blocks, 1000);
    cr_expect_eq(e->max_live_bytes, 48000);
    cr_expect_eq(e->sizes.top[0].size, 48);
    cr_expect(e->work.time_only, "the peak is hold_block's: the gain is time");
    cr_expect_eq(s->estimated_saving_bytes, 0);
    cr_expect_eq(e->work.calls_avoided, 2000000);
    cr_expect(strstr(s->message, "The gain is time"), "%s", s->message);
    cr_expect(strstr(s->message, "2,000,000 malloc and free calls"), "%s", s->message);
    cr_expect_null(find(&r, "pool|slab|arena", "churn::hold_block(int)"), "hold_block never churns");
    /* The std::string temporaries are allocated in libstdc++ code: the
     * message names the user's function that called it. */
    const ml_suggestion_t *t = find(&r, "stack|reuse_buffer", NULL);
    cr_assert(t, "no stack/reuse_buffer for the temporary strings");
    cr_expect(strstr(t->message, ", called from churn::format_key(int) (fx_adv_churn.cpp:"), "%s", t->message);
    cr_expect_eq(t->evidence.site.temporaries.temporaries, 20000);
    cr_expect_eq(r.n, 2, "a pool and a stack, nothing else");
    done(&r);
}

Test(advisor, malloc_then_free_in_a_loop_gets_stack_or_reuse_buffer, .timeout = 300) {
    adv_run_t r;
    advise("fx_adv_temp", &r);
    const ml_suggestion_t *s = find(&r, "stack|reuse_buffer", "format_line");
    cr_assert(s, "no stack/reuse_buffer for format_line (%zu suggestions)", r.n);
    cr_expect_eq(s->evidence.site.temporaries.temporaries, 100000);
    cr_expect_eq(s->evidence.site.temporaries.calls_avoided, 200000);
    cr_expect_str_eq(s->strategy, "stack", "256 bytes fit on the stack");
    expect_evidence(s, ML_FINDING_TEMPORARIES);
    done(&r);
}

Test(advisor, long_lived_blocks_between_short_ones_get_separate_lifetimes, .timeout = 300) {
    adv_run_t r;
    advise("fx_adv_lifetimes", &r);
    const ml_suggestion_t *s = find(&r, "separate_lifetimes", "keep_record");
    cr_assert(s, "no separate_lifetimes for keep_record (%zu suggestions)", r.n);
    /* 20000 records of 64 bytes (80 with the header) among 1000-byte blocks:
     * once those are gone, about 5300 pages each hold a record or two, where
     * packed together the records need about 400. */
    const ml_site_evidence_t *e = &s->evidence.site;
    cr_expect_geq(e->pinned.pinned_pages, 3000, "pinned pages: %llu",
                  (unsigned long long)e->pinned.pinned_pages);
    cr_expect_eq(e->pinned.pinned_bytes / 4096, e->pinned.pinned_pages);
    cr_expect_gt(s->estimated_saving_bytes, 4 << 20, "the 16 KiB blocks reuse the freed pages");
    cr_expect_null(find(&r, "separate_lifetimes", "scratch"));
    expect_evidence(s, ML_FINDING_PINNED);
    done(&r);
}

/* fx_adv_lifetimes' pinned pages also give allocator_tuning, whose estimate
 * is the slab row: a page given back as soon as it holds no live block.
 * jemalloc by LD_PRELOAD keeps freed pages for its decay and peaked higher
 * than glibc on this fixture (VmHWM 38.2 MB against 34.6 MB; 25.7 MB with
 * both decays at 0), so the message names the setting the estimate assumes. */
Test(advisor, allocator_tuning_names_the_jemalloc_setting_its_estimate_assumes, .timeout = 300) {
    adv_run_t r;
    advise("fx_adv_lifetimes", &r);
    const ml_suggestion_t *s = NULL;
    for (size_t i = 0; i < r.n && !s; i++)
        if (!strcmp(r.s[i].strategy, "allocator_tuning")) s = &r.s[i];
    cr_assert(s, "no allocator_tuning (%zu suggestions)", r.n);
    cr_expect_eq(s->evidence.kind, ML_EVIDENCE_TUNING);
    const ml_tuning_evidence_t *e = &s->evidence.tuning;
    cr_expect_str_eq(e->best_policy, "slab");
    cr_expect_eq(s->estimated_saving_bytes, e->real_peak_footprint_bytes - e->best_peak_footprint_bytes);
    cr_expect(strstr(s->message, "jemalloc with MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0, as the replay "
                                 "gives a page back once it holds no live block"),
              "%s", s->message);
    done(&r);
}

/* Pass 2 reads pass 1's ops back from a log in a temporary file, and its
 * separate_lifetimes routers read pass 1's baseline footprint from another;
 * where no temporary file can be made ($TMPDIR is not a directory) it
 * decodes the trace again and each such router runs its own copy of the
 * baseline. Both give the same advice, number for number, on a fixture
 * whose advice includes separate_lifetimes. */
Test(advisor, the_second_pass_gives_the_same_advice_from_the_op_log_as_from_the_trace, .timeout = 300) {
    adv_run_t logged;
    advise("fx_adv_lifetimes", &logged);
    const char *old = getenv("TMPDIR");
    char *keep = old ? strdup(old) : NULL;
    setenv("TMPDIR", "/nonexistent/memlens-no-tmp", 1);
    ml_advisor_opts_t o = {.threads = 2, .analysis = logged.a};
    ml_advice_t *adv = NULL;
    char err[1024] = "";
    int rc = ml_advisor_run(logged.trace, &o, &adv, err, sizeof err);
    if (keep) setenv("TMPDIR", keep, 1);
    else unsetenv("TMPDIR");
    free(keep);
    cr_assert_eq(rc, 0, "advisor without a temporary file: %s", err);
    const ml_suggestion_t *rs;
    size_t rn = ml_advice_suggestions(adv, &rs);
    cr_assert_eq(logged.n, rn, "%zu suggestions from the log, %zu from the trace", logged.n, rn);
    cr_assert_gt(logged.n, 0);
    for (size_t i = 0; i < logged.n; i++) {
        const ml_suggestion_t *a = &logged.s[i], *b = &rs[i];
        cr_expect_str_eq(a->strategy, b->strategy);
        cr_expect_eq(a->site, b->site);
        cr_expect_eq(a->estimated_saving_bytes, b->estimated_saving_bytes, "%s", a->strategy);
        cr_expect_str_eq(a->what_if, b->what_if);
        char *ea = evidence_text(a), *eb = evidence_text(b);
        cr_expect_str_eq(ea, eb, "%s:\n%s\n%s", a->strategy, ea, eb);
        free(ea);
        free(eb);
    }
    cr_expect_not_null(find(&logged, "separate_lifetimes", "keep_record"));
    ml_advice_free(adv);
    done(&logged);
}

Test(advisor, batches_that_die_together_get_an_arena, .timeout = 300) {
    adv_run_t r;
    advise("fx_adv_arena", &r);
    const ml_suggestion_t *s = find(&r, "arena", "parse_node");
    cr_assert(s, "no arena for parse_node (%zu suggestions)", r.n);
    cr_expect_eq(s->evidence.site.batches.batches, 500);
    expect_evidence(s, ML_FINDING_BATCHES);
    char *text = evidence_text(s);
    cr_expect(strstr(text, ", \"batches\": 500, \"blocks_in_batches\": "), "%s", text);
    free(text);
    done(&r);
}

/* A tokenizer whose tokens die with their line: the arena's pattern, whose
 * gain is the calls (rewritten with a bump arena the program ran ~30 %
 * faster). The replayed arena costs one page over the baseline (a line's
 * tokens take a page of the chunk): below the minimum saving, which the
 * rule used to read as a cost and so said nothing. */
Test(advisor, small_batches_get_an_arena_for_the_calls_at_a_cost_below_noise, .timeout = 300) {
    adv_run_t r;
    advise("fx_adv_tokens", &r);
    const ml_suggestion_t *s = find(&r, "arena", "copy_token");
    cr_assert(s, "no arena for copy_token (%zu suggestions)", r.n);
    const ml_site_evidence_t *e = &s->evidence.site;
    expect_evidence(s, ML_FINDING_BATCHES);
    cr_expect_eq(e->calls, 2000 * 40);
    cr_expect_eq(e->frees, 2000 * 40);
    cr_expect_eq(e->batches.batches, 2000);
    cr_expect_eq(e->batches.blocks_in_batches, 2000 * 40);
    cr_expect_eq(s->estimated_saving_bytes, 0);
    cr_expect(strstr(s->message, "copy_token() (fx_adv_tokens.c:17) allocates its blocks in batches"), "%s",
              s->message);
    cr_expect(strstr(s->message, "160,000 calls to malloc and free go away"), "%s", s->message);
    /* the replay's cost is said, not hidden: one page */
    cr_expect(strstr(s->message, "the replayed peak grows by 4.0 KiB."), "%s", s->message);
    cr_expect_eq(e->simulation.what_if_peak_bytes, e->simulation.baseline_peak_bytes + 4096);
    done(&r);
}

/* The same batches, 200 lines (8,000 calls): at the replay's cost of a
 * page, the calls alone are the gain, and so few are not worth a change
 * (as a pool whose gain is time: HOT_CALLS). python3's interpreter got two
 * such arenas of 882 calls each before the rule asked for a hot function. */
Test(advisor, small_batches_of_a_cold_function_at_a_cost_get_no_arena, .timeout = 300) {
    adv_run_t r;
    advise_arg("fx_adv_tokens", "200", &r);
    cr_expect_null(find(&r, "arena", "copy_token"), "an arena for 8,000 calls at a cost");
    done(&r);
}

Test(advisor, a_clean_program_gets_no_suggestions, .timeout = 300) {
    adv_run_t r;
    advise("fx_adv_clean", &r);
    cr_expect_eq(r.n, 0, "%zu suggestions for a clean program", r.n);
    const ml_sim_metrics_t *p;
    cr_expect_eq(ml_advice_policies(r.adv, &p), 6, "the table is there all the same");
    done(&r);
}

Test(advisor, a_sampled_trace_gets_the_table_but_no_suggestions, .timeout = 300) {
    /* The same loop of temporaries as fx_adv_temp, recorded one allocation
     * per 4 KiB on average: its blocks are a sample, not the heap. */
    const char *trace = h_tmp("sampled.mlt");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "--sample", "4096", "-o", trace, "--",
                          h_bin("fx_adv_temp"), NULL};
    h_run_t run;
    h_run(&run, argv);
    cr_assert_eq(run.status, 0, "%s", run.err);
    h_run_free(&run);
    ml_advice_t *adv = NULL;
    char err[512] = "";
    ml_advisor_opts_t o = {.threads = 0};
    cr_assert_eq(ml_advisor_run(trace, &o, &adv, err, sizeof err), 0, "%s", err);
    const ml_suggestion_t *s;
    const ml_sim_metrics_t *p;
    cr_expect(ml_advice_sampled(adv));
    cr_expect_eq(ml_advice_suggestions(adv, &s), 0);
    cr_expect_eq(ml_advice_policies(adv, &p), 6, "five designs and the real allocator");
    cr_expect_gt(p[0].allocs, 0);
    cr_expect_lt(p[0].allocs, 100000, "a sample: %lu", (unsigned long)p[0].allocs);
    ml_advice_free(adv);
}

/* The replay of a sampled trace runs the recorded samples: its budget is
 * theirs, not the estimated calls'. fx_sample's 20,000 malloc(1000) at
 * one sample per 64 KiB are about 300 recorded allocations and 150 frees,
 * under a budget of 5,000 operations; taken for the estimated 20,000 calls
 * they were over it, and the table and the what-ifs were skipped (30 M
 * malloc(16)s at --sample 1M: 1,112 operations skipped at the default
 * budget). */
Test(advisor, a_sampled_trace_is_budgeted_by_its_samples, .timeout = 300) {
    const char *trace = h_tmp("sampled_budget.mlt");
    const char *argv[] = {h_bin("memlens"), "run", "-q", "--sample", "64k", "-o", trace, "--", h_bin("fx_sample"),
                          NULL};
    h_run_t run;
    h_run(&run, argv);
    cr_assert_eq(run.status, 0, "%s", run.err);
    h_run_free(&run);
    ml_analysis_t *a;
    char err[1024] = "";
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_assert_eq(ml_analysis_load(a, trace, err, sizeof err), 0, "%s", err);
    ml_build_opts_t bo = {.no_symbols = true};
    cr_assert_eq(ml_analysis_build(a, &bo, err, sizeof err), 0, "%s", err);
    const ml_totals_t *t = ml_analysis_totals(a);
    cr_assert_gt(t->alloc_calls, 15000, "the estimate of 20,000 calls: %lu", (unsigned long)t->alloc_calls);
    cr_assert_lt(t->calls_by_kind[ML_KIND_MALLOC], 1000, "a sample: %lu",
                 (unsigned long)t->calls_by_kind[ML_KIND_MALLOC]);
    ml_advice_t *adv = NULL;
    ml_advisor_opts_t o = {.threads = 0, .analysis = a, .budget_ops = 5000};
    cr_assert_eq(ml_advisor_run(trace, &o, &adv, err, sizeof err), 0, "%s", err);
    const char *sk = ml_advice_skipped(adv, 0);
    cr_expect_null(sk, "nothing skipped: %s", sk ? sk : "");
    const ml_sim_metrics_t *p;
    cr_expect_eq(ml_advice_policies(adv, &p), 6, "five designs and the real allocator");
    ml_advice_free(adv);
    ml_analysis_free(a);
}

/* `memlens report --json`: the suggestions and the policy table in the document. */
static char *report_json_opt(const char *fixture, const char *opt) {
    char name[256];
    snprintf(name, sizeof name, "%s%s.report.mlt", fixture, opt ? opt : "");
    char trace[4096], json[4096];
    snprintf(trace, sizeof trace, "%s", h_tmp(name));
    snprintf(name, sizeof name, "%s%s.json", fixture, opt ? opt : "");
    snprintf(json, sizeof json, "%s", h_tmp(name));
    const char *run[] = {h_bin("memlens"), "run", "-q", "-o", trace, "--", h_bin(fixture), NULL};
    h_run_t r;
    h_run(&r, run);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    const char *rep[] = {h_bin("memlens"), "report", trace, "--json", json, opt, NULL};
    h_run(&r, rep);
    cr_assert_eq(r.status, 0, "memlens report: %s", r.err);
    h_run_free(&r);
    char *doc = h_read_file(json);
    cr_assert(doc, "no %s", json);
    return doc;
}

static char *report_json(const char *fixture) {
    return report_json_opt(fixture, NULL);
}

Test(advisor_json, report_carries_suggestions_and_policies, .timeout = 300) {
    char *doc = report_json_opt("fx_adv_temp", "--all-policies");
    cr_expect(strstr(doc, "\"suggestions\": [\n  {\"strategy\": \"stack\""), "%.2000s", strstr(doc, "\"suggestions\""));
    cr_expect(strstr(doc, "format_line"), "the message names the function");
    cr_expect(strstr(doc, "\"temporaries\": 100000"));
    cr_expect(strstr(doc, "\"policies\": [\n  {\"name\": \"first_fit\", \"peak_footprint_bytes\": "));
    static const char *const names[] = {"next_fit", "best_fit", "worst_fit", "segregated_fit", "tlsf",
                                        "buddy", "slab", "bitmap_fit", "arena", "real"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char want[64];
        snprintf(want, sizeof want, "{\"name\": \"%s\"", names[i]);
        cr_expect(strstr(doc, want), "policy %s in the table", names[i]);
    }
    cr_expect(strstr(doc, "\"external_fragmentation\": "));
    cr_expect(strstr(doc, "\"cost_per_op\": null"), "the real allocator's cost is unknown");
    free(doc);
}

/* Without --all-policies the table holds the designs of real allocators,
 * and the suggestions are the same. */
Test(advisor_json, default_policies_skip_the_textbook_fits, .timeout = 300) {
    char *doc = report_json("fx_adv_temp");
    cr_expect(strstr(doc, "\"suggestions\": [\n  {\"strategy\": \"stack\""), "%.2000s", strstr(doc, "\"suggestions\""));
    cr_expect(strstr(doc, "\"temporaries\": 100000"));
    cr_expect(strstr(doc, "\"policies\": [\n  {\"name\": \"segregated_fit\", \"peak_footprint_bytes\": "),
              "%.300s", strstr(doc, "\"policies\""));
    static const char *const in[] = {"tlsf", "buddy", "slab", "arena", "real"};
    static const char *const out[] = {"first_fit", "next_fit", "best_fit", "worst_fit", "bitmap_fit"};
    for (size_t i = 0; i < 5; i++) {
        char want[64];
        snprintf(want, sizeof want, "{\"name\": \"%s\"", in[i]);
        cr_expect(strstr(doc, want), "policy %s in the table", in[i]);
        snprintf(want, sizeof want, "{\"name\": \"%s\"", out[i]);
        cr_expect(!strstr(doc, want), "policy %s not in the table", out[i]);
    }
    free(doc);
}

Test(advisor_json, clean_program_has_an_empty_list, .timeout = 300) {
    char *doc = report_json("fx_adv_clean");
    cr_expect(strstr(doc, "\"suggestions\": [],"), "%.500s", strstr(doc, "\"suggestions\""));
    cr_expect(strstr(doc, "\"policies\": [\n  {"));
    free(doc);
}
