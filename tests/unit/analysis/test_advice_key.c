/* test_advice_key.c - the key of the advice saved in a trace
 * (analysis/advice_cache.c) hashes each distinct frame string once; it must
 * equal the key that hashes every frame's strings byte by byte, the way the
 * key was defined (and saved in traces) before. The reference below is
 * that definition, written out. */
#define _GNU_SOURCE
#include "advisor_internal.h"
#include "analysis_internal.h"
#include "ml_config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static uint64_t mix_str(uint64_t h, const char *s) {
    if (!s) return mix(h, 0x5bd1e995u);
    uint64_t f = 0xcbf29ce484222325ull;
    for (; *s; s++) f = (f ^ (uint8_t)*s) * 0x100000001b3ull;
    return mix(h, f);
}

static uint64_t reference_key(uint64_t records_hash, const ml_advisor_opts_t *o) {
    uint64_t h = mix(0x6d6c2d6164766963ull, records_hash);
    h = mix(h, ML_ADVICE_CACHE_VERSION);
    h = mix_str(h, ML_VERSION);
    h = mix(h, sizeof(ml_suggestion_t));
    h = mix(h, (uint64_t)o->all_policies << 1 | (uint64_t)o->no_what_if);
    h = mix(h, o->budget_bytes ? o->budget_bytes : ML_ADVISOR_BUDGET_BYTES);
    h = mix(h, o->budget_ops ? o->budget_ops : ML_ADVISOR_BUDGET_OPS);
    const ml_analysis_t *a = o->analysis;
    size_t ns = 0;
    const ml_site_t *s = ml_analysis_sites(a, &ns);
    h = mix(h, ns + 1);
    for (size_t i = 0; i < ns; i++) {
        h = mix(h, (uint64_t)s[i].nframes << 32 | s[i].headline);
        h = mix(h, s[i].alloc_calls);
        for (uint32_t f = 0; f < s[i].nframes; f++) {
            const ml_frame_t *fr = &s[i].frames[f];
            h = mix_str(h, fr->function);
            h = mix_str(h, fr->file);
            h = mix_str(h, fr->module);
            h = mix(h, (uint64_t)fr->line << 2 | (uint64_t)fr->inlined << 1 | fr->own);
            h = mix(h, fr->address);
        }
    }
    h = mix(h, a->nnodes);
    for (uint32_t n = 1; n < a->nnodes; n++) h = mix(h, ml_analysis_node_site(a, n));
    return h;
}

static void feed(ml_analysis_t *a, ml_record_t r) {
    ml_analysis_feed(a, &r);
}

/* Sites whose stacks share frames (the same strings at several frames),
 * built with or without a suffix on one function's name. */
static ml_analysis_t *analysis(void) {
    ml_analysis_t *a;
    cr_assert_eq(ml_analysis_new(&a), 0);
    ml_record_t p = {.tag = ML_T_PROCESS};
    p.u.process.page_size = 4096;
    p.u.process.exe = "/bin/true";
    p.u.process.parent_trace = "";
    p.u.process.producer = "test";
    feed(a, p);
    /* node id: parent, pc; 1..3 outermost, 4..9 under them */
    static const uint32_t parent[] = {0, 0, 0, 0, 1, 1, 2, 4, 4, 5};
    for (uint32_t id = 1; id <= 9; id++) {
        ml_record_t n = {.tag = ML_T_NODE};
        n.u.node.id = id;
        n.u.node.parent = parent[id];
        n.u.node.pc = 0x1000ull * (id % 4 + 1); /* pcs repeat: one string at many frames */
        feed(a, n);
    }
    for (uint32_t i = 0; i < 90; i++) {
        ml_record_t r = {.tag = ML_T_ALLOC, .time_ms = i};
        r.u.alloc.kind = ML_KIND_MALLOC;
        r.u.alloc.ptr = 0x100000 + 0x100ull * i;
        r.u.alloc.size = 16 + i;
        r.u.alloc.stack = 1 + i % 9;
        feed(a, r);
    }
    ml_build_opts_t o = {.no_symbols = true};
    char err[256];
    cr_assert_eq(ml_analysis_build(a, &o, err, sizeof err), 0, "%s", err);
    return a;
}

Test(advice_key, equals_the_key_that_hashes_every_string) {
    ml_analysis_t *a = analysis();
    size_t ns;
    const ml_site_t *s = ml_analysis_sites(a, &ns);
    cr_assert_gt(ns, 5, "several sites (%zu)", ns);
    size_t named = 0;
    for (size_t i = 0; i < ns; i++)
        for (uint32_t f = 0; f < s[i].nframes; f++) named += s[i].frames[f].function != NULL;
    cr_assert_gt(named, ns, "the frames have names, repeated across sites (%zu)", named);
    ml_advisor_opts_t o = {.analysis = a};
    for (uint64_t rh = 0; rh < 3; rh++) cr_expect_eq(ml__advice_key(rh, &o), reference_key(rh, &o), "records %lu", rh);
    o.all_policies = true;
    o.budget_bytes = 1 << 20;
    cr_expect_eq(ml__advice_key(7, &o), reference_key(7, &o));
    cr_expect_neq(ml__advice_key(7, &o), ml__advice_key(8, &o));
    ml_analysis_free(a);
}

/* Saved advice of n empty suggestions (8 bytes each, the least one takes),
 * as advice_cache.c encodes it. */
static size_t empty_suggestions(uint8_t *p, uint64_t n) {
    size_t k = 0;
    uint64_t v;
#define PUT_U(x)                                                                                                       \
    for (v = (x); v >= 0x80; v >>= 7) p[k++] = (uint8_t)(v | 0x80);                                                    \
    p[k++] = (uint8_t)v
    PUT_U(0x31564441u); /* "ADV1" */
    PUT_U(0);           /* policies */
    PUT_U(0);           /* sampled */
    PUT_U(0);           /* ops */
    memset(p + k, 0, 8); /* seconds */
    k += 8;
    PUT_U(0); /* skipped */
    PUT_U(n);
    memset(p + k, 0, 8 * n);
    k += 8 * n;
    PUT_U(0x31564441u);
#undef PUT_U
    return k;
}

/* The advisor never makes more than ML__ADV_MAX_SUGGESTIONS: saved advice
 * that claims more is a hostile trace's (a million suggestions cost a few
 * hundred bytes of zstd, and gigabytes to decode and write out), refused. */
Test(advice_cache, refuses_more_suggestions_than_the_advisor_makes) {
    static uint8_t buf[64 + 8 * 1000];
    char why[160] = "";
    ml_advice_t *adv = NULL;
    size_t len = empty_suggestions(buf, ML__ADV_MAX_SUGGESTIONS);
    cr_assert_eq(ml__advice_decode(buf, len, &adv, why, sizeof why), 0, "%s", why);
    const ml_suggestion_t *s;
    cr_expect_eq(ml_advice_suggestions(adv, &s), ML__ADV_MAX_SUGGESTIONS);
    ml_advice_free(adv);
    for (uint64_t n = ML__ADV_MAX_SUGGESTIONS + 1; n <= 1000; n += 979) {
        adv = NULL;
        why[0] = '\0';
        len = empty_suggestions(buf, n);
        cr_expect_eq(ml__advice_decode(buf, len, &adv, why, sizeof why), -EINVAL, "%llu suggestions accepted",
                     (unsigned long long)n);
        cr_expect(strstr(why, "more suggestions than the advisor makes"), "%s", why);
        if (adv) ml_advice_free(adv);
    }
}
