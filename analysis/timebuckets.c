/* timebuckets.c - per-site time buckets: what each site allocated in each of
 * N equal slices of the trace's span, and which of those blocks were still
 * live at the end (by leak kind). The HTML page's time-range selection sums
 * them (docs/html-report.md, "Time-range selection"); nothing here is needed
 * by the other reports.
 *
 * The allocations come from a second read of the trace's records (a session
 * restored from the trace's snapshot holds no per-allocation times), their
 * own or one that runs anyway (ml_time_buckets_acc_t); the blocks live at
 * the end come from the session's live set, which keeps each block's
 * allocation time. Sites are those of the last ml_analysis_build. */
#include "analysis_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ml_time_buckets_s {
    uint32_t count, width_ms;
    size_t nsites;
    size_t *alloc_off; /* nsites + 1: site i's entries are alloc[alloc_off[i] .. alloc_off[i+1]) */
    ml_bucket_alloc_t *alloc;
    size_t *live_off;  /* the same for live */
    ml_bucket_live_t *live;
};

/* The blocks live at the end of one (site, bucket, kind): key is site << 32
 * | bucket << 8 | kind + 1 (0: an empty slot), so that the keys sort in
 * (site, bucket, kind) order. The blocks are summed into these as the live
 * set is walked: sorting one item per block (24 bytes each, 170 MB and a
 * merge sort's as much again on 7 M live blocks) took most of a page's
 * build on big heaps, and the sums are the same in any order. */
typedef struct {
    uint64_t key, blocks, bytes;
} live_sum_t;

ML_MAP_TYPED(live_sums, live_sum_t, 1024)

static uint64_t live_key(uint32_t site, uint32_t bucket, uint32_t kind) {
    return ((uint64_t)site << 32 | (uint64_t)bucket << 8 | kind) + 1;
}

static int cmp_live_sum(const void *x, const void *y) {
    const live_sum_t *a = x, *b = y;
    return a->key < b->key ? -1 : a->key > b->key;
}

static uint32_t site_of_stat(const ml_analysis_t *a, uint32_t stat) {
    return a->stats[stat < a->nstats ? stat : 0].site;
}

static ml_leak_kind_t kind_of(const ml__block_t *e) {
    if (e->reach == ML_REACH_REACHABLE) return ML_LEAK_REACHABLE;
    if (e->reach == ML_REACH_INDIRECT) return ML_LEAK_INDIRECT;
    if (e->reach == ML_REACH_POSSIBLE) return ML_LEAK_POSSIBLE;
    return ML_LEAK_DEFINITE;
}

/* The allocations' (site, bucket) sums, fed record by record: by their own
 * read of the trace, or by a reader of the same trace that runs anyway (the
 * strategy advisor's first pass), which saves a read.
 *
 * Records come in time order, so a site's allocations fall into one bucket
 * after another: each site keeps one open run (its bucket and sums), and a
 * record in another bucket opens a new run. The runs are the non-empty
 * (site, bucket) pairs, 24 bytes each; a dense table of every site and
 * bucket was 96 MB on clang-format's 93,478 sites, most of it zero, touched
 * at random. A clock that goes back only makes more runs of one pair, which
 * the finish adds up in record order. */
typedef struct {
    uint32_t site, bucket;
    double calls, bytes;
} run_t;

struct ml_time_buckets_acc_s {
    const ml_analysis_t *a;
    uint32_t nb, width;
    size_t nsites;
    uint64_t sample;
    uint32_t *open; /* nsites: the index + 1 of the site's open run, 0: none */
    run_t *runs;
    size_t nruns, cap;
    int err;       /* -ENOMEM: a run could not be added (sticky) */
    bool complete; /* every record of the trace was fed */
};

int ml_time_buckets_acc_new(const ml_analysis_t *a, uint32_t nbuckets, ml_time_buckets_acc_t **out, char *err,
                            size_t errlen) {
    *out = NULL;
    size_t nsites;
    const ml_site_t *sites = ml_analysis_sites(a, &nsites);
    if (!sites && nsites) return -EINVAL;
    if (nbuckets < 1 || nbuckets > 4096) {
        snprintf(err, errlen, "time buckets: %u buckets (1 to 4096)", nbuckets);
        return -EINVAL;
    }
    uint64_t span = (uint64_t)a->t.last_time_ms + 1;
    uint32_t width = (uint32_t)((span + nbuckets - 1) / nbuckets);
    if (!width) width = 1;
    uint32_t nb = (uint32_t)((span + width - 1) / width);
    if (!nb) nb = 1;
    ml_time_buckets_acc_t *c = calloc(1, sizeof *c);
    if (c) {
        *c = (ml_time_buckets_acc_t){.a = a, .nb = nb, .width = width, .nsites = nsites,
                                     .sample = a->t.sample_bytes};
        c->open = calloc(nsites + 1, sizeof *c->open);
    }
    if (!c || !c->open) {
        ml_time_buckets_acc_free(c);
        snprintf(err, errlen, "time buckets: out of memory");
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

static run_t *new_run(ml_time_buckets_acc_t *c, uint32_t si, uint32_t k) {
    if (c->nruns == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 4096;
        run_t *n = realloc(c->runs, ncap * sizeof *n);
        if (!n) {
            c->err = -ENOMEM;
            return NULL;
        }
        c->runs = n;
        c->cap = ncap;
    }
    run_t *r = &c->runs[c->nruns++];
    *r = (run_t){si, k, 0, 0};
    c->open[si] = (uint32_t)c->nruns;
    return r;
}

void ml_time_buckets_acc_record(void *acc, const ml_record_t *rec) {
    ml_time_buckets_acc_t *c = acc;
    if (!rec) {
        c->complete = true;
        return;
    }
    if (rec->tag != ML_T_ALLOC) return;
    const ml_analysis_t *a = c->a;
    uint32_t stack = rec->u.alloc.stack;
    uint32_t stat = stack && stack < a->nnodes ? a->node_stat[stack] : 0;
    uint32_t si = site_of_stat(a, stat);
    if (si >= c->nsites) return;
    uint32_t k = rec->time_ms / c->width;
    if (k >= c->nb) k = c->nb - 1;
    uint32_t o = c->open[si];
    run_t *r = o && c->runs[o - 1].bucket == k ? &c->runs[o - 1] : new_run(c, si, k);
    if (!r) return;
    double w = 1.0, raw = (double)rec->u.alloc.size;
    if ((rec->u.alloc.flags & ML_EVF_SAMPLED) && c->sample) w = 1.0 / -expm1(-raw / (double)c->sample);
    r->calls += w;
    r->bytes += w * raw;
}

bool ml_time_buckets_acc_complete(const ml_time_buckets_acc_t *acc) {
    return acc && acc->complete;
}

int ml_time_buckets_acc_read(ml_time_buckets_acc_t *c, const char *path, char *err, size_t errlen) {
    /* from the start: a reader that stopped halfway may have fed some */
    memset(c->open, 0, (c->nsites + 1) * sizeof *c->open);
    c->nruns = 0;
    c->err = 0;
    c->complete = false;
    ml_reader_t *r;
    int rc = ml_reader_open(path, &r, err, errlen);
    if (rc < 0) return rc;
    ml_record_t rec;
    while ((rc = ml_reader_next(r, &rec)) > 0) ml_time_buckets_acc_record(c, &rec);
    if (rc < 0) snprintf(err, errlen, "%s: %s", path, ml_reader_error(r));
    else ml_time_buckets_acc_record(c, NULL);
    ml_reader_close(r);
    return rc < 0 ? rc : 0;
}

void ml_time_buckets_acc_free(ml_time_buckets_acc_t *acc) {
    if (!acc) return;
    free(acc->open);
    free(acc->runs);
    free(acc);
}

int ml_time_buckets_acc_finish(ml_time_buckets_acc_t *c, ml_time_buckets_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (!c->complete) {
        snprintf(err, errlen, "time buckets: the trace was not read to its end");
        return -EINVAL;
    }
    const ml_analysis_t *a = c->a;
    size_t nsites = c->nsites;
    uint32_t nb = c->nb, width = c->width;
    int rc = -ENOMEM;
    ml_map_t sums = {NULL, 0, 0};
    run_t *by_site = NULL;
    ml_time_buckets_t *tb = calloc(1, sizeof *tb);
    if (!tb || c->err) goto out;
    tb->count = nb;
    tb->width_ms = width;
    tb->nsites = nsites;
    tb->alloc_off = calloc(nsites + 1, sizeof *tb->alloc_off);
    tb->live_off = calloc(nsites + 1, sizeof *tb->live_off);
    by_site = malloc((c->nruns + 1) * sizeof *by_site);
    if (!tb->alloc_off || !tb->live_off || !by_site) goto out;

    /* Allocations: the non-empty buckets of each site, in bucket order. The
     * runs are placed by site, keeping their order (a counting sort); a
     * site's runs are then in bucket order already, unless the clock went
     * back, when an insertion sort (stable) puts them in order. Runs of one
     * pair are added up in record order. */
    size_t *at = tb->alloc_off; /* first: the count of runs before each site */
    for (size_t i = 0; i < c->nruns; i++) at[c->runs[i].site + 1]++;
    for (size_t s = 0; s < nsites; s++) at[s + 1] += at[s];
    for (size_t i = 0; i < c->nruns; i++) by_site[at[c->runs[i].site]++] = c->runs[i];
    /* at[s] is now the end of site s's runs; the ends give the starts back */
    tb->alloc = calloc(c->nruns + 1, sizeof *tb->alloc);
    if (!tb->alloc) goto out;
    size_t n = 0, from = 0;
    for (size_t s = 0; s < nsites; s++) {
        size_t to = at[s];
        for (size_t i = from + 1; i < to; i++) {
            run_t x = by_site[i];
            size_t j = i;
            for (; j > from && by_site[j - 1].bucket > x.bucket; j--) by_site[j] = by_site[j - 1];
            by_site[j] = x;
        }
        at[s] = n;
        for (size_t i = from; i < to;) {
            double calls = 0, bytes = 0;
            uint32_t k = by_site[i].bucket;
            for (; i < to && by_site[i].bucket == k; i++) {
                calls += by_site[i].calls;
                bytes += by_site[i].bytes;
            }
            if (calls > 0) tb->alloc[n++] = (ml_bucket_alloc_t){k, (uint64_t)llround(calls), (uint64_t)llround(bytes)};
        }
        from = to;
    }
    tb->alloc_off[nsites] = n;

    /* Blocks live at the end, by the bucket of their allocation and kind;
     * none when they have no kind (the process did not exit: the page's
     * time ranges then count no leak, as the whole run does). */
    ml__live_cursor_t cur;
    if (ml__live_cursor_init(&cur, &a->heap) < 0) goto out;
    ml__block_t blk, *e = &blk;
    bool judged = !ml_totals_unjudged(&a->t, NULL), oom = false;
    while (judged && !oom && ml__live_next(&cur, e)) {
        uint32_t si = site_of_stat(a, e->stack);
        if (si >= nsites) continue;
        uint32_t k = e->time_ms / width;
        bool existed;
        live_sum_t *x = live_sums_put(&sums, live_key(si, k < nb ? k : nb - 1, kind_of(e)), &existed);
        if (!(oom = !x)) {
            x->blocks += ml__block_count(a, e->ptr, e->size); /* a sampled block: its weight */
            x->bytes += e->size;
        }
    }
    ml__live_cursor_free(&cur);
    if (oom) goto out;
    /* The sums in key order: packed to the front of the table, then sorted. */
    live_sum_t *v = live_sums_entries(&sums);
    size_t nl = 0;
    for (uint64_t i = 0; i < sums.cap; i++)
        if (v[i].key) v[nl++] = v[i];
    if (nl > 1) qsort(v, nl, sizeof *v, cmp_live_sum); /* v is NULL when the map never grew */
    tb->live = calloc(nl + 1, sizeof *tb->live);
    if (!tb->live) goto out;
    size_t s = 0;
    for (size_t i = 0; i < nl; i++) {
        const live_sum_t *x = &v[i];
        uint32_t site = (uint32_t)((x->key - 1) >> 32);
        while (s <= site) tb->live_off[s++] = i;
        tb->live[i] = (ml_bucket_live_t){(uint32_t)((x->key - 1) >> 8 & 0xffffff),
                                         (ml_leak_kind_t)((x->key - 1) & 0xff), x->blocks, x->bytes};
    }
    while (s <= nsites) tb->live_off[s++] = nl;
    rc = 0;
out:
    ml_map_free(&sums);
    free(by_site);
    if (rc < 0) {
        snprintf(err, errlen, "time buckets: out of memory");
        ml_time_buckets_free(tb);
        return rc;
    }
    *out = tb;
    return 0;
}

int ml_analysis_time_buckets(const ml_analysis_t *a, const char *trace_path, uint32_t nbuckets,
                             ml_time_buckets_t **out, char *err, size_t errlen) {
    *out = NULL;
    ml_time_buckets_acc_t *c;
    int rc = ml_time_buckets_acc_new(a, nbuckets, &c, err, errlen);
    if (rc == 0) rc = ml_time_buckets_acc_read(c, trace_path, err, errlen);
    if (rc == 0) rc = ml_time_buckets_acc_finish(c, out, err, errlen);
    ml_time_buckets_acc_free(c);
    return rc;
}

uint32_t ml_time_buckets_count(const ml_time_buckets_t *tb, uint32_t *width_ms) {
    if (width_ms) *width_ms = tb ? tb->width_ms : 0;
    return tb ? tb->count : 0;
}

const ml_bucket_alloc_t *ml_time_buckets_alloc(const ml_time_buckets_t *tb, uint32_t site, size_t *n) {
    *n = 0;
    if (!tb || site >= tb->nsites) return NULL;
    *n = tb->alloc_off[site + 1] - tb->alloc_off[site];
    return tb->alloc + tb->alloc_off[site];
}

const ml_bucket_live_t *ml_time_buckets_live(const ml_time_buckets_t *tb, uint32_t site, size_t *n) {
    *n = 0;
    if (!tb || site >= tb->nsites) return NULL;
    *n = tb->live_off[site + 1] - tb->live_off[site];
    return tb->live + tb->live_off[site];
}

void ml_time_buckets_free(ml_time_buckets_t *tb) {
    if (!tb) return;
    free(tb->alloc_off);
    free(tb->alloc);
    free(tb->live_off);
    free(tb->live);
    free(tb);
}
