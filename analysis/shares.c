/* shares.c - who holds the heap: the stacks holding the most live bytes
 * now, and the sites whose blocks lie in an address range at a moment. The
 * viewer's timeline (the live set at the cursor) and heap map (the sites
 * pinning a cell) ask these.
 *
 * Stack ids are the indexes of the per-stack statistics, which never move
 * while a session is fed, so shares taken while feeding can be turned into
 * sites by any later build: the site a stack belongs to is recorded in its
 * statistics by ml_analysis_build(). A share taken after the last build may
 * name a stack that build has not seen; it maps to no site (see below).
 */
#include "analysis_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Keeps the `max` largest shares in out[0..*n), sorted, by insertion: max is
 * small (a screenful), so this beats a heap. */
static void keep_top(ml_share_t *out, size_t *n, size_t max, const ml_share_t *s) {
    if (!max) return;
    if (*n == max && out[max - 1].bytes >= s->bytes) return;
    size_t i = *n < max ? (*n)++ : max - 1;
    while (i > 0 && (out[i - 1].bytes < s->bytes ||
                     (out[i - 1].bytes == s->bytes && out[i - 1].id > s->id))) {
        out[i] = out[i - 1];
        i--;
    }
    out[i] = *s;
}

size_t ml_analysis_top_stacks(const ml_analysis_t *a, ml_share_t *out, size_t max) {
    size_t n = 0;
    for (uint32_t i = 0; i < a->nstats; i++) {
        const ml__stack_stats_t *st = &a->stats[i];
        if (!st->live_bytes && !st->live_blocks) continue;
        ml_share_t s = {i, st->live_bytes, st->live_blocks};
        keep_top(out, &n, max, &s);
    }
    return n;
}

static size_t nsites(const ml_analysis_t *a) {
    size_t n = 0;
    ml_analysis_sites(a, &n);
    return n;
}

/* The site of a stack in the last build, or UINT32_MAX. */
static uint32_t stack_site(const ml_analysis_t *a, uint32_t stack, size_t ns) {
    if (stack >= a->nstats) return UINT32_MAX;
    uint32_t s = a->stats[stack].site;
    return s < ns ? s : UINT32_MAX;
}

uint32_t ml_analysis_node_site(const ml_analysis_t *a, uint32_t node) {
    /* as stat_of() files allocations: unknown nodes under stats[0] */
    uint32_t st = node && node < a->nnodes ? a->node_stat[node] : 0;
    if (node && node < a->nnodes && !st) return UINT32_MAX; /* never allocated from */
    return stack_site(a, st, nsites(a));
}

/* Merges (site, bytes, blocks) triples by site: sorts by site, sums runs,
 * then keeps the largest. */
static int cmp_id(const void *x, const void *y) {
    const ml_share_t *a = x, *b = y;
    return a->id < b->id ? -1 : a->id > b->id;
}

static size_t merge_top(ml_share_t *v, size_t n, ml_share_t *out, size_t max) {
    qsort(v, n, sizeof *v, cmp_id);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        ml_share_t s = {v[i].id, 0, 0};
        for (; i < n && v[i].id == s.id; i++) {
            s.bytes += v[i].bytes;
            s.blocks += v[i].blocks;
        }
        keep_top(out, &k, max, &s);
    }
    return k;
}

size_t ml_analysis_shares_to_sites(const ml_analysis_t *a, const ml_share_t *in, size_t n,
                                   ml_share_t *out, size_t max) {
    ml_share_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return 0;
    size_t ns = nsites(a), k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = stack_site(a, in[i].id, ns);
        if (s != UINT32_MAX) v[k++] = (ml_share_t){s, in[i].bytes, in[i].blocks};
    }
    size_t r = merge_top(v, k, out, max);
    free(v);
    return r;
}

/* Blocks live at a moment, as sites.c reconstructs them for fragmentation:
 * live now and allocated by then, plus the blocks freed after the moment
 * (its graveyard). END is everything live now. */
int64_t ml_analysis_sites_in_range(const ml_analysis_t *a, ml_moment_t m, uint64_t lo, uint64_t hi,
                                   ml_share_t *out, size_t max) {
    const ml__moment_t *mo = m == ML_MOMENT_PEAK    ? &a->mom[0]
                             : m == ML_MOMENT_WORST ? &a->mom[1]
                                                    : NULL;
    if (mo && !mo->set) return 0;
    /* A restored snapshot has the fragmentation of the peak and worst
     * moments, not their blocks. */
    if (mo && (a->from_snapshot || mo->closed)) return -ENOTSUP; /* and a closed moment (analysis.c) */
    size_t ns = nsites(a), cap = 64, k = 0;
    ml_share_t *v = malloc(cap * sizeof *v);
    if (!v) return -ENOMEM;
    ml__live_cursor_t cur;
    if (ml__live_cursor_init(&cur, &a->heap) < 0) {
        free(v);
        return -ENOMEM;
    }
    bool live_done = false;
    for (uint64_t gi = 0;;) {
        uint64_t ptr, size;
        uint32_t stack;
        ml__block_t b;
        if (!live_done && ml__live_next(&cur, &b)) {
            if (mo && b.seq > mo->seq) continue;
            ptr = b.ptr, size = b.size, stack = b.stack;
        } else {
            live_done = true;
            if (!mo || gi >= mo->ngrave) break;
            const ml__grave_t *g = &mo->grave[gi++];
            ptr = g->ptr, size = g->size, stack = g->stack;
        }
        if (ptr >= hi || ptr + size <= lo) continue;
        uint32_t s = stack_site(a, stack, ns);
        if (s == UINT32_MAX) continue;
        if (k == cap) {
            ml_share_t *nv = realloc(v, cap * 2 * sizeof *nv);
            if (!nv) {
                free(v);
                ml__live_cursor_free(&cur);
                return -ENOMEM;
            }
            v = nv;
            cap *= 2;
        }
        v[k++] = (ml_share_t){s, size, 1};
    }
    ml__live_cursor_free(&cur);
    size_t r = merge_top(v, k, out, max);
    free(v);
    return (int64_t)r;
}
