/* advice_cache.c - the strategy advisor's result saved in the trace, so that
 * a second `memlens report` and the viewer get it without replaying the
 * trace twice more (ml_advisor.h, docs/trace-format.md "The saved advice").
 *
 * What the advice depends on, folded into its key:
 *   - the records: the checksum of the header and every chunk that the
 *     trailer holds, checked against the file (ml_reader_records_hash);
 *   - the advisor: ML_ADVICE_CACHE_VERSION (raise it whenever a change of
 *     the advisor or the simulator changes what it finds), the memlens
 *     version, and the layout of ml_suggestion_t;
 *   - the options that change the result: all_policies, no_what_if and the
 *     two budgets as they take effect (0 reads as the default). The number
 *     of threads and the progress line change nothing and are left out;
 *   - the analysis the advisor names sites with: every site's frames
 *     (function, file, line, module, address) and call count, and the site
 *     of every stack node. Symbols that changed (a rebuilt binary, another
 *     machine, --no-symbols) change the messages, so they change the key.
 * A saved result whose key differs is not used, and the next report that
 * runs the advisor replaces it.
 *
 * The encoding is snap_codec.h's (varints, doubles as their bits), field by
 * field: a saved result reads back into exactly the structure the advisor
 * returned, so the JSON written from either is the same byte for byte
 * (tests/e2e/test_advice_cache.sh). Everything read is checked; a damaged
 * result is refused with a reason and the advisor runs again.
 */
#define _GNU_SOURCE
#include "advisor_internal.h"
#include "analysis_internal.h"
#include "ml_config.h"
#include "ml_map.h"
#include "ml_options.h"
#include "ml_trace_io.h"
#include "snap_codec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADVICE_MAGIC 0x31564441u /* "ADV1": the layout below */

/* ------------------------------------------------------------------------- */
/* The key                                                                   */
/* ------------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static uint64_t fnv(const char *s) {
    uint64_t f = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++) f = (f ^ (uint8_t)*s) * 0x100000001b3ull;
    return f;
}

static uint64_t mix_str(uint64_t h, const char *s) {
    return mix(h, s ? fnv(s) : 0x5bd1e995u);
}

/* The frames' strings come interned (the symbolizer gives one pointer per
 * distinct string), so each is hashed once, by pointer: clang-format's
 * 93,478 sites hold 1.9 M frames of C++ names, and hashing their bytes at
 * every frame was 28 % of a report's CPU time. The key is the same as
 * hashing every string (mix_str); a string seen at two pointers is just
 * hashed twice. */
typedef struct {
    uint64_t ptr; /* the key: the string's address */
    uint64_t fnv;
} strhash_t;

ML_MAP_TYPED(strhash, strhash_t, 4096)

static uint64_t mix_interned(uint64_t h, ml_map_t *memo, const char *s) {
    if (!s) return mix(h, 0x5bd1e995u);
    bool existed;
    strhash_t *e = strhash_put(memo, (uint64_t)(uintptr_t)s, &existed);
    if (!e) return mix_str(h, s); /* out of memory: the slow way, the same value */
    if (!existed) e->fnv = fnv(s);
    return mix(h, e->fnv);
}

uint64_t ml__advice_key(uint64_t records_hash, const ml_advisor_opts_t *o) {
    uint64_t h = mix(0x6d6c2d6164766963ull, records_hash);
    h = mix(h, ML_ADVICE_CACHE_VERSION);
    h = mix_str(h, ML_VERSION);
    h = mix(h, sizeof(ml_suggestion_t));
    h = mix(h, (uint64_t)o->all_policies << 1 | (uint64_t)o->no_what_if);
    h = mix(h, o->budget_bytes ? o->budget_bytes : ML_ADVISOR_BUDGET_BYTES);
    h = mix(h, o->budget_ops ? o->budget_ops : ML_ADVISOR_BUDGET_OPS);
    const ml_analysis_t *a = o->analysis;
    if (!a) return mix(h, 0);
    size_t ns = 0;
    const ml_site_t *s = ml_analysis_sites(a, &ns);
    h = mix(h, ns + 1);
    ml_map_t memo = {0};
    for (size_t i = 0; i < ns; i++) {
        h = mix(h, (uint64_t)s[i].nframes << 32 | s[i].headline);
        h = mix(h, s[i].alloc_calls);
        for (uint32_t f = 0; f < s[i].nframes; f++) {
            const ml_frame_t *fr = &s[i].frames[f];
            h = mix_interned(h, &memo, fr->function);
            h = mix_interned(h, &memo, fr->file);
            h = mix_interned(h, &memo, fr->module);
            h = mix(h, (uint64_t)fr->line << 2 | (uint64_t)fr->inlined << 1 | fr->own);
            h = mix(h, fr->address);
        }
    }
    ml_map_free(&memo);
    h = mix(h, a->nnodes);
    for (uint32_t n = 1; n < a->nnodes; n++) h = mix(h, ml_analysis_node_site(a, n));
    return h;
}

/* ------------------------------------------------------------------------- */
/* Writing                                                                   */
/* ------------------------------------------------------------------------- */

static void put_frag(ml__obuf_t *b, const ml_sim_frag_t *f) {
    ml__put_u(b, f->live_requested);
    ml__put_u(b, f->live_blocks);
    ml__put_u(b, f->live_count);
    ml__put_u(b, f->footprint);
    ml__put_u(b, f->free_bytes);
    ml__put_u(b, f->largest_free);
    ml__put_d(b, f->internal);
    ml__put_d(b, f->external);
    ml__put_d(b, f->page_utilization);
    ml__put_u(b, f->op);
    ml__put_u(b, f->time_ms);
}

static void put_metrics(ml__obuf_t *b, const ml_sim_metrics_t *m) {
    ml__put_str(b, m->name);
    ml__put_u(b, m->peak_footprint);
    ml__put_u(b, m->peak_extent);
    put_frag(b, &m->at_peak);
    put_frag(b, &m->at_end);
    ml__put_u(b, m->allocs);
    ml__put_u(b, m->frees);
    ml__put_u(b, m->failed);
    ml__put_u(b, m->search_steps);
    ml__put_u(b, m->splits);
    ml__put_u(b, m->merges);
    ml__put_u(b, m->max_op_steps);
    ml__put_d(b, m->cost_per_op);
    ml__put_u(b, m->known_fragmentation);
    ml__put_u(b, m->known_cost);
    ml__put_u(b, m->os_held_peak);
    ml__put_u(b, m->state_bytes);
    ml__put_d(b, m->cpu_seconds);
}

static void put_site_evidence(ml__obuf_t *b, const ml_site_evidence_t *e) {
    ml__put_u(b, e->calls);
    ml__put_u(b, e->bytes_allocated);
    ml__put_u(b, e->frees);
    ml__put_u(b, e->stack);
    ml__put_u(b, e->max_live_bytes);
    ml__put_u(b, e->max_live_blocks);
    ml__put_u(b, e->sizes.min);
    ml__put_u(b, e->sizes.max);
    ml__put_u(b, e->sizes.distinct);
    ml__put_u(b, e->sizes.more_distinct);
    ml__put_u(b, e->sizes.ntop);
    for (int i = 0; i < ML_EVIDENCE_TOP_SIZES; i++) {
        ml__put_u(b, e->sizes.top[i].size);
        ml__put_u(b, e->sizes.top[i].calls);
    }
    ml__put_u(b, e->lifetimes.freed);
    ml__put_u(b, e->lifetimes.live_at_end);
    ml__put_d(b, e->lifetimes.mean_ms);
    ml__put_u(b, e->lifetimes.max_ms);
    ml__put_u(b, e->lifetimes.median_allocations_at_most);
    ml__put_u(b, e->lifetimes.p90_allocations_at_most);
    ml__put_d(b, e->lifetimes.long_lived_fraction);
    ml__put_u(b, e->lifetimes.long_lived_at_least_allocations);
    ml__put_str(b, e->simulation.baseline);
    ml__put_u(b, e->simulation.baseline_peak_bytes);
    ml__put_u(b, e->simulation.what_if_peak_bytes);
    ml__put_u(b, e->nsites);
    for (int i = 0; i < ML_EVIDENCE_SITES; i++) ml__put_u(b, e->sites[i]);
    ml__put_u(b, e->finding);
    switch (e->finding) {
    case ML_FINDING_BATCHES:
        ml__put_u(b, e->batches.batches);
        ml__put_u(b, e->batches.blocks_in_batches);
        break;
    case ML_FINDING_TEMPORARIES:
        ml__put_u(b, e->temporaries.temporaries);
        ml__put_d(b, e->temporaries.temporary_fraction);
        ml__put_u(b, e->temporaries.max_temporary_bytes);
        ml__put_u(b, e->temporaries.calls_avoided);
        break;
    case ML_FINDING_CHAINS:
        ml__put_u(b, e->chains.realloc_calls);
        ml__put_u(b, e->chains.chains);
        ml__put_u(b, e->chains.realloc_steps);
        ml__put_u(b, e->chains.longest_chain);
        ml__put_u(b, e->chains.small_growth_steps);
        ml__put_u(b, e->chains.mean_growth_bytes);
        ml__put_u(b, e->chains.bytes_copied_at_most);
        ml__put_u(b, e->chains.reallocs_avoided);
        ml__put_u(b, e->chains.bytes_not_copied);
        break;
    case ML_FINDING_CALLS:
        ml__put_u(b, e->work.calls_avoided);
        ml__put_u(b, e->work.allocator_steps_saved);
        ml__put_u(b, e->work.time_only);
        break;
    case ML_FINDING_PINNED:
        ml__put_u(b, e->pinned.pinned_pages);
        ml__put_u(b, e->pinned.pinned_bytes);
        ml__put_u(b, e->pinned.pinned_at_ms);
        ml__put_u(b, e->pinned.long_lived_blocks);
        break;
    case ML_FINDING_POW2:
        ml__put_u(b, e->pow2.just_over_pow2_calls);
        ml__put_u(b, e->pow2.buddy_peak_bytes);
        ml__put_u(b, e->pow2.waste_under_buddy_bytes);
        break;
    case ML_FINDING_NONE:
        break;
    }
}

static void put_suggestion(ml__obuf_t *b, const ml_suggestion_t *s) {
    ml__put_str(b, s->strategy);
    ml__put_str(b, s->message);
    ml__put_s(b, s->site);
    ml__put_u(b, s->stack);
    ml__put_s(b, s->device);
    ml__put_u(b, s->estimated_saving_bytes);
    ml__put_str(b, s->what_if);
    const ml_evidence_t *e = &s->evidence;
    ml__put_u(b, e->kind);
    switch (e->kind) {
    case ML_EVIDENCE_SITE:
        put_site_evidence(b, &e->site);
        break;
    case ML_EVIDENCE_TUNING:
        ml__put_u(b, e->tuning.real_peak_footprint_bytes);
        ml__put_u(b, e->tuning.real_os_held_peak_bytes);
        ml__put_str(b, e->tuning.best_policy);
        ml__put_u(b, e->tuning.best_peak_footprint_bytes);
        ml__put_u(b, e->tuning.threads);
        ml__put_u(b, e->tuning.calls);
        break;
    case ML_EVIDENCE_GPU:
        ml__put_u(b, e->gpu.device);
        ml__put_u(b, e->gpu.stack);
        ml__put_u(b, e->gpu.calls);
        ml__put_u(b, e->gpu.pairs);
        ml__put_u(b, e->gpu.bytes);
        ml__put_d(b, e->gpu.pairs_per_s);
        ml__put_u(b, e->gpu.distinct_sizes);
        ml__put_u(b, e->gpu.cycles);
        ml__put_d(b, e->gpu.share);
        ml__put_str(b, e->gpu.summary);
        break;
    case ML_EVIDENCE_NONE:
        break;
    }
}

int ml__advice_encode(const ml_advice_t *adv, void **out, size_t *len) {
    ml__obuf_t b = {0};
    ml__put_u(&b, ADVICE_MAGIC);
    ml__put_u(&b, adv->npol);
    for (size_t i = 0; i < adv->npol; i++) put_metrics(&b, &adv->pol[i]);
    ml__put_u(&b, adv->sampled);
    ml__put_u(&b, adv->ops);
    ml__put_d(&b, adv->seconds);
    ml__put_u(&b, adv->nskipped);
    for (size_t i = 0; i < adv->nskipped; i++) ml__put_str(&b, adv->skipped[i]);
    ml__put_u(&b, adv->n);
    for (size_t i = 0; i < adv->n; i++) put_suggestion(&b, &adv->s[i]);
    ml__put_u(&b, ADVICE_MAGIC);
    if (b.oom) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Reading                                                                   */
/* ------------------------------------------------------------------------- */

/* A string into a fixed array: refused when it does not fit. */
static void get_fixed(ml__ibuf_t *b, char *dst, size_t cap, const char *what) {
    char *s = ml__get_str(b);
    if (!s) return;
    if (strlen(s) >= cap) ml__snap_bad(b, what);
    else memcpy(dst, s, strlen(s) + 1);
    free(s);
}

static void get_frag(ml__ibuf_t *b, ml_sim_frag_t *f) {
    f->live_requested = ml__get_u(b);
    f->live_blocks = ml__get_u(b);
    f->live_count = ml__get_u(b);
    f->footprint = ml__get_u(b);
    f->free_bytes = ml__get_u(b);
    f->largest_free = ml__get_u(b);
    f->internal = ml__get_d(b);
    f->external = ml__get_d(b);
    f->page_utilization = ml__get_d(b);
    f->op = ml__get_u(b);
    f->time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "frag time");
}

static void get_metrics(ml__ibuf_t *b, ml_sim_metrics_t *m) {
    get_fixed(b, m->name, sizeof m->name, "policy name");
    m->peak_footprint = ml__get_u(b);
    m->peak_extent = ml__get_u(b);
    get_frag(b, &m->at_peak);
    get_frag(b, &m->at_end);
    m->allocs = ml__get_u(b);
    m->frees = ml__get_u(b);
    m->failed = ml__get_u(b);
    m->search_steps = ml__get_u(b);
    m->splits = ml__get_u(b);
    m->merges = ml__get_u(b);
    m->max_op_steps = ml__get_u(b);
    m->cost_per_op = ml__get_d(b);
    m->known_fragmentation = ml__get_max(b, 1, "flag");
    m->known_cost = ml__get_max(b, 1, "flag");
    m->os_held_peak = ml__get_u(b);
    m->state_bytes = ml__get_u(b);
    m->cpu_seconds = ml__get_d(b);
}

static uint32_t get_u32(ml__ibuf_t *b, const char *what) {
    return (uint32_t)ml__get_max(b, UINT32_MAX, what);
}

static void get_site_evidence(ml__ibuf_t *b, ml_site_evidence_t *e) {
    e->calls = ml__get_u(b);
    e->bytes_allocated = ml__get_u(b);
    e->frees = ml__get_u(b);
    e->stack = get_u32(b, "stack");
    e->max_live_bytes = ml__get_u(b);
    e->max_live_blocks = ml__get_u(b);
    e->sizes.min = ml__get_u(b);
    e->sizes.max = ml__get_u(b);
    e->sizes.distinct = get_u32(b, "sizes");
    e->sizes.more_distinct = ml__get_max(b, 1, "flag");
    e->sizes.ntop = (uint32_t)ml__get_max(b, ML_EVIDENCE_TOP_SIZES, "top sizes");
    for (int i = 0; i < ML_EVIDENCE_TOP_SIZES; i++) {
        e->sizes.top[i].size = ml__get_u(b);
        e->sizes.top[i].calls = ml__get_u(b);
    }
    e->lifetimes.freed = ml__get_u(b);
    e->lifetimes.live_at_end = ml__get_u(b);
    e->lifetimes.mean_ms = ml__get_d(b);
    e->lifetimes.max_ms = ml__get_u(b);
    e->lifetimes.median_allocations_at_most = ml__get_u(b);
    e->lifetimes.p90_allocations_at_most = ml__get_u(b);
    e->lifetimes.long_lived_fraction = ml__get_d(b);
    e->lifetimes.long_lived_at_least_allocations = ml__get_u(b);
    char base[32] = "";
    get_fixed(b, base, sizeof base, "baseline");
    /* the only baseline there is, a pointer to the advisor's own string; or
     * none (written as ""): a suggestion of the statistics pass */
    if (base[0] && strcmp(base, ML__ADV_BASELINE)) ml__snap_bad(b, "baseline");
    e->simulation.baseline = base[0] ? ML__ADV_BASELINE : NULL;
    e->simulation.baseline_peak_bytes = ml__get_u(b);
    e->simulation.what_if_peak_bytes = ml__get_u(b);
    e->nsites = (uint32_t)ml__get_max(b, ML_EVIDENCE_SITES, "sites");
    for (int i = 0; i < ML_EVIDENCE_SITES; i++) e->sites[i] = get_u32(b, "site");
    e->finding = (ml_finding_t)ml__get_max(b, ML_FINDING_POW2, "finding");
    switch (e->finding) {
    case ML_FINDING_BATCHES:
        e->batches.batches = ml__get_u(b);
        e->batches.blocks_in_batches = ml__get_u(b);
        break;
    case ML_FINDING_TEMPORARIES:
        e->temporaries.temporaries = ml__get_u(b);
        e->temporaries.temporary_fraction = ml__get_d(b);
        e->temporaries.max_temporary_bytes = ml__get_u(b);
        e->temporaries.calls_avoided = ml__get_u(b);
        break;
    case ML_FINDING_CHAINS:
        e->chains.realloc_calls = ml__get_u(b);
        e->chains.chains = ml__get_u(b);
        e->chains.realloc_steps = ml__get_u(b);
        e->chains.longest_chain = ml__get_u(b);
        e->chains.small_growth_steps = ml__get_u(b);
        e->chains.mean_growth_bytes = ml__get_u(b);
        e->chains.bytes_copied_at_most = ml__get_u(b);
        e->chains.reallocs_avoided = ml__get_u(b);
        e->chains.bytes_not_copied = ml__get_u(b);
        break;
    case ML_FINDING_CALLS:
        e->work.calls_avoided = ml__get_u(b);
        e->work.allocator_steps_saved = ml__get_u(b);
        e->work.time_only = ml__get_max(b, 1, "flag");
        break;
    case ML_FINDING_PINNED:
        e->pinned.pinned_pages = ml__get_u(b);
        e->pinned.pinned_bytes = ml__get_u(b);
        e->pinned.pinned_at_ms = get_u32(b, "time");
        e->pinned.long_lived_blocks = ml__get_u(b);
        break;
    case ML_FINDING_POW2:
        e->pow2.just_over_pow2_calls = ml__get_u(b);
        e->pow2.buddy_peak_bytes = ml__get_u(b);
        e->pow2.waste_under_buddy_bytes = ml__get_u(b);
        break;
    case ML_FINDING_NONE:
        break;
    }
}

static void get_suggestion(ml__ibuf_t *b, ml_suggestion_t *s, char *strategy, size_t cap) {
    get_fixed(b, strategy, cap, "strategy");
    s->strategy = strategy;
    get_fixed(b, s->message, sizeof s->message, "message");
    s->site = ml__get_s(b);
    s->stack = get_u32(b, "stack");
    int64_t dev = ml__get_s(b);
    if (dev < INT32_MIN || dev > INT32_MAX) ml__snap_bad(b, "device");
    s->device = (int32_t)dev;
    s->estimated_saving_bytes = ml__get_u(b);
    get_fixed(b, s->what_if, sizeof s->what_if, "what-if");
    ml_evidence_t *e = &s->evidence;
    e->kind = (ml_evidence_kind_t)ml__get_max(b, ML_EVIDENCE_GPU, "evidence kind");
    switch (e->kind) {
    case ML_EVIDENCE_SITE:
        get_site_evidence(b, &e->site);
        break;
    case ML_EVIDENCE_TUNING:
        e->tuning.real_peak_footprint_bytes = ml__get_u(b);
        e->tuning.real_os_held_peak_bytes = ml__get_u(b);
        get_fixed(b, e->tuning.best_policy, sizeof e->tuning.best_policy, "policy");
        e->tuning.best_peak_footprint_bytes = ml__get_u(b);
        e->tuning.threads = get_u32(b, "threads");
        e->tuning.calls = ml__get_u(b);
        break;
    case ML_EVIDENCE_GPU:
        e->gpu.device = get_u32(b, "device");
        e->gpu.stack = get_u32(b, "stack");
        e->gpu.calls = ml__get_u(b);
        e->gpu.pairs = ml__get_u(b);
        e->gpu.bytes = ml__get_u(b);
        e->gpu.pairs_per_s = ml__get_d(b);
        e->gpu.distinct_sizes = get_u32(b, "sizes");
        e->gpu.cycles = get_u32(b, "cycles");
        e->gpu.share = ml__get_d(b);
        get_fixed(b, e->gpu.summary, sizeof e->gpu.summary, "summary");
        break;
    case ML_EVIDENCE_NONE:
        break;
    }
}

int ml__advice_decode(const void *data, size_t len, ml_advice_t **out, char *err, size_t errlen) {
    ml__ibuf_t b = {.p = data, .len = len};
    ml_advice_t *adv = calloc(1, sizeof *adv);
    if (!adv) return -ENOMEM;
    if (ml__get_u(&b) != ADVICE_MAGIC) ml__snap_bad(&b, "not saved advice");
    adv->npol = (size_t)ml__get_max(&b, sizeof adv->pol / sizeof adv->pol[0], "policies");
    for (size_t i = 0; i < adv->npol && !b.bad; i++) get_metrics(&b, &adv->pol[i]);
    adv->sampled = ml__get_max(&b, 1, "flag");
    adv->ops = ml__get_u(&b);
    adv->seconds = ml__get_d(&b);
    adv->nskipped = (size_t)ml__get_max(&b, sizeof adv->skipped / sizeof adv->skipped[0], "skipped");
    for (size_t i = 0; i < adv->nskipped && !b.bad; i++)
        get_fixed(&b, adv->skipped[i], sizeof adv->skipped[i], "skipped");
    /* each suggestion takes at least 8 bytes: the count cannot ask for more;
     * and the advisor never makes more than ML__ADV_MAX_SUGGESTIONS: a
     * hostile count (a million empty suggestions in a few hundred bytes of
     * zstd) is refused, not given gigabytes and a report that lists them */
    uint64_t n = ml__get_count(&b, 8, "suggestions");
    if (!b.bad && n > ML__ADV_MAX_SUGGESTIONS) ml__snap_bad(&b, "more suggestions than the advisor makes");
    if (n && !b.bad) {
        adv->s = calloc(n, sizeof *adv->s);
        adv->strategies = calloc(n, sizeof *adv->strategies);
        if (!adv->s || !adv->strategies) {
            ml_advice_free(adv);
            return -ENOMEM;
        }
        adv->cap = n;
        for (size_t i = 0; i < n && !b.bad; i++) {
            get_suggestion(&b, &adv->s[i], adv->strategies[i], sizeof adv->strategies[i]);
            adv->n = i + 1;
        }
    }
    if (!b.bad && ml__get_u(&b) != ADVICE_MAGIC) ml__snap_bad(&b, "no end mark");
    if (!b.bad && b.pos != b.len) ml__snap_bad(&b, "bytes after the end");
    if (b.bad) {
        if (err) snprintf(err, errlen, "damaged saved advice (%s)", b.why ? b.why : "?");
        ml_advice_free(adv);
        return -EINVAL;
    }
    adv->from_cache = true;
    *out = adv;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The cached run                                                            */
/* ------------------------------------------------------------------------- */

int ml_advisor_run_cached(const char *trace_path, const ml_advisor_opts_t *o, unsigned flags,
                          ml_advice_t **out, char *err, size_t errlen, char *warn, size_t warnlen) {
    static const ml_advisor_opts_t none = {0};
    if (!o) o = &none;
    if (warn && warnlen) warn[0] = '\0';
    uint64_t records = 0, key = 0;
    bool keyed = false, saved = false; /* saved: the trace holds sound advice under this key */
    if (flags & (ML_ADVICE_CACHE_READ | ML_ADVICE_CACHE_WRITE)) {
        ml_reader_t *r;
        if (ml_reader_open(trace_path, &r, NULL, 0) == 0) {
            keyed = ml_reader_records_hash(r, &records) == 0;
            if (keyed) key = ml__advice_key(records, o);
            void *data = NULL;
            size_t len = 0;
            uint64_t saved_key = 0;
            uint32_t version = 0;
            int rc = keyed ? ml_reader_advice(r, &data, &len, &saved_key, &version) : -ENOENT;
            if (rc < 0 && rc != -ENOENT && warn)
                snprintf(warn, warnlen, "%s; the advisor ran again", ml_reader_error(r));
            ml_reader_close(r);
            /* Another key: other records, another advisor or other options:
             * not an error, the advice is just not this run's. */
            if (rc == 0 && saved_key == key) {
                char why[160] = "";
                rc = version == ML_ADVICE_BLOCK_VERSION ? ml__advice_decode(data, len, out, why, sizeof why)
                                                        : -EPROTONOSUPPORT;
                free(data);
                saved = rc == 0;
                if (rc == 0 && (flags & ML_ADVICE_CACHE_READ)) {
                    if (ml_option_bool(ML_ENV_ADVISOR_DEBUG))
                        fprintf(stderr, "advisor: the advice saved in %s is used\n", trace_path);
                    return 0;
                }
                if (rc == 0) { /* checked, not used: the caller wants a fresh run */
                    ml_advice_free(*out);
                    *out = NULL;
                }
                if (rc == -ENOMEM) return rc;
                if (rc < 0 && warn)
                    snprintf(warn, warnlen, "%s: %s; the advisor ran again", trace_path,
                             rc == -EPROTONOSUPPORT ? "saved advice of an unknown version" : why);
            } else {
                free(data);
            }
        }
    }
    int rc = ml_advisor_run(trace_path, o, out, err, errlen);
    if (rc < 0 || !keyed || saved || !(flags & ML_ADVICE_CACHE_WRITE)) return rc;
    void *data;
    size_t len;
    if (ml__advice_encode(*out, &data, &len) < 0) return 0;
    char why[512];
    int s = ml_trace_save_advice(trace_path, records, data, len, ML_ADVICE_BLOCK_VERSION, key, why,
                                 sizeof why);
    free(data);
    /* Not ours to write (read-only, another owner, a link, locked, a file
     * system mounted read-only): the advice is simply not saved. Anything
     * else is said. */
    if (s < 0 && s != -EACCES && s != -EPERM && s != -EROFS && s != -ELOOP && s != -EWOULDBLOCK &&
        s != -ENOENT && warn && !warn[0])
        snprintf(warn, warnlen, "could not save the advice in the trace: %s", why);
    return 0;
}

bool ml_advice_from_cache(const ml_advice_t *a) {
    return a && a->from_cache;
}
