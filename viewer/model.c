/* model.c - the viewer's model: a snapshot of the analysis results plus
 * presentation state (sort, filter, call-tree expansion). No curses here.
 *
 * The model computes no metric. Everything the panels show comes from the
 * analysis session through the "source" section below, the only code in
 * viewer/ that calls analysis accessors. What the model adds is ordering
 * (sort, filter), identity (a site keeps its id across refreshes, although
 * every analysis build numbers its sites anew), and snapshots: while a trace
 * is read (or a live program runs) the model keeps, at regular points, the
 * analysis' answer to "which stacks hold the most live bytes now" and the
 * heap map of that moment, so that the timeline cursor can show the live set
 * and the heap at an earlier instant without a re-scan of the trace.
 */
#define _GNU_SOURCE
#include "ml_viewer_model.h"
#include "ml_advisor.h"
#include "ml_gpu.h"
#include "ml_report.h"
#include "ml_map.h"
#include "viewer_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <malloc.h>

/* Snapshots: how many stacks each keeps, how many of them at most (thinned
 * by halves beyond), and how often. */
#define SNAP_STACKS 32
#define SNAP_MAX 1024
#define SNAP_EVERY_PERMILLE 4 /* post-mortem: every 0.4 % of the file */
#define SNAP_EVERY_MS 200     /* live: at most every 200 ms of program time */
#define MAPS_MAX 128
/* Post-mortem builds for heap-map snapshots stay within this share of the
 * loading time, so a huge trace is not slowed down by them. */
#define MAP_BUILD_BUDGET 0.10

/* ------------------------------------------------------------------------- */
/* State                                                                     */
/* ------------------------------------------------------------------------- */

typedef struct {
    uint32_t time_ms;
    uint32_t n;
    ml_share_t stacks[SNAP_STACKS];
} snap_t;

typedef struct {
    uint32_t time_ms;
    uint64_t base, cell_bytes;
    uint32_t ncells;
    int8_t *cells;
    ml_vfrag_t frag;
} mapsnap_t;

/* The time-travel snapshots: who held the heap, and heap maps, over time. */
typedef struct {
    snap_t *snaps;
    uint32_t nsnaps, cap_snaps;
    uint32_t last_snap_ms;
    mapsnap_t maps[MAPS_MAX];
    uint32_t nmaps;
} travel_t;

/* The history replay (a trace opened from its analysis snapshot): a second
 * analysis session on a thread of its own reads the records from the start
 * and takes the time-travel snapshots, within a memory budget. The thread
 * owns `tt`, the reader and its session until it sets `state` to an end
 * state; the UI thread then takes `tt` in (ml_vmodel_poll). */
enum { HIST_NONE = 0, HIST_RUNNING, HIST_DONE, HIST_BUDGET, HIST_DAMAGED, HIST_FAILED };

typedef struct {
    pthread_t thread;
    atomic_int state;
    atomic_bool stop;     /* the model is being freed */
    atomic_uint permille; /* records replayed, share of the file */
    atomic_bool held;     /* the replay's session is alive */
    atomic_ullong used;   /* the most the process grew by while it ran */
    bool started, joined, imported;
    ml_reader_t *reader;
    ml_build_opts_t opts;
    travel_t tt;
    uint32_t covered_ms; /* the replay read the records up to this instant */
    char why[256];       /* HIST_DAMAGED, HIST_FAILED: the message */
    /* A replay that finished within its budget is kept: unlike the restored
     * session it has the blocks of the peak and worst moments, so it says
     * who pins a heap-map cell there. Built by the replay's thread. */
    ml_analysis_t *an;
    int an_built; /* by the replay's thread: 1 built, -1 failed or over the budget */
    int pins[2];  /* per moment (peak, worst): 0 unknown, 1 known, -1 not kept */
} hist_t;

/* The strategy advisor replays the whole trace (twice) in a thread of its
 * own once the data is final; until it is done the views show the GPU advice
 * the analysis has at once. */
enum { ADV_IDLE = 0, ADV_RUNNING, ADV_DONE, ADV_FAILED, ADV_OFF };

/* Site identity: a hash of the frames -> the model's id. */
typedef struct {
    uint64_t key; /* site_key(), never 0 */
    uint32_t id;
    uint32_t unused;
} idslot_t;

ML_MAP_TYPED(site_ids, idslot_t, 1024)

typedef struct {
    uint64_t *keys; /* open addressing, 0 = empty */
    uint32_t cap, count;
} keyset_t;

struct ml_vmodel_s {
    ml_analysis_t *an;
    pthread_mutex_t lock;
    ml_build_opts_t build_opts;

    /* loading */
    ml_reader_t *reader;
    bool loading, truncated;
    double progress;
    uint64_t load_ms, build_ms; /* time spent loading, and building for snapshots */
    uint32_t next_snap_permille;
    char path[4096];
    char error[512];
    char build_error[256];

    /* live */
    bool live;
    ml_vproc_state_t live_state;
    int live_status;

    /* snapshot of the analysis */
    ml_vsummary_t sum;
    ml_vsite_t *sites; /* sorted by id */
    uint32_t nsites, cap_sites;
    uint32_t *by_build; /* analysis site index -> index into sites */
    uint32_t cap_by_build;
    const ml_site_t *an_sites;
    size_t an_nsites;
    ml_vsuggestion_t *sugg;
    uint32_t nsugg, cap_sugg;
    char *sugg_text; /* messages and evidence of the GPU advice, or the advisor's evidence */
    ml_vpoint_t *points;
    uint32_t npoints, cap_points;
    uint64_t generation;
    bool built;
    uint64_t built_records; /* records fed when the last build ran */
    uint32_t refresh_ms;    /* how long the last refresh held the lock */

    /* identity */
    ml_map_t ids; /* idslot_t */
    uint32_t next_id;

    /* strategy advice */
    pthread_t adv_thread;
    atomic_int adv_state;
    ml_advice_t *advice;
    bool adv_imported, adv_joined;
    uint64_t adv_budget_bytes, adv_budget_ops; /* ml_vmodel_set_advisor_budget */
    char adv_error[256];

    /* snapshots over time */
    travel_t tt;
    bool use_snapshot, from_snapshot;
    uint64_t hist_budget;
    hist_t hist;
    char travel_why[320];
    unsigned hist_shown_pm;
    uint64_t nbuilds;    /* analysis builds so far */
    uint64_t pins_of[2]; /* the build pins[] was probed on (peak, worst moment) */
    bool pins[2];        /* that build has the moment's blocks */

    /* presentation */
    ml_vsort_t sort;
    char filter[128];
    uint32_t *order; /* visible sites (indices into sites), sorted */
    uint32_t norder;
    uint32_t *sugg_order;
    uint32_t nsugg_order;

    /* long steps on the UI thread say how far they got */
    ml_vprogress_fn progress_fn;
    void *progress_ctx;

    /* call tree */
    bool bottom_up, tree_dirty;
    bool rows_dirty; /* the same nodes, listed again (a new sort key) */
    const ml_calltree_node_t *nodes; /* the analysis' tree, or own_nodes */
    ml_calltree_node_t *own_nodes;   /* a tree built for the filter or bottom-up */
    int64_t nnodes;
    uint64_t *node_key; /* path hash per node: keeps expansion across refreshes */
    keyset_t expanded;
    ml_vtree_row_t *rows;
    uint32_t nrows, cap_rows;

    /* heap map */
    ml_vcell_t *cells;
    uint32_t cap_cells;

    /* GPU view: devices, their sites (ML_VGPU_LISTS_ lists each) and the
     * sites' frames, rebuilt on every refresh */
    ml_vgpu_device_t *gdevs;
    uint32_t ngdevs, cap_gdevs;
    ml_vgpu_site_t *gsites;
    uint32_t ngsites, cap_gsites;
    uint32_t *gsite_frame0; /* per site: its first frame in gframes */
    uint32_t cap_gsite_frame0;
    ml_vframe_t *gframes;
    uint32_t ngframes, cap_gframes;
};

/* The array p grown to hold `need` elements (ml_grow), or NULL (p is then
 * unchanged and still the caller's). */
static void *grow(void *p, uint32_t *cap, uint32_t need, size_t elem) {
    return ml_grow(&p, cap, need, elem, 0) < 0 ? NULL : p;
}

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t hash_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (s && *s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

/* ------------------------------------------------------------------------- */
/* Site identity                                                             */
/* ------------------------------------------------------------------------- */

/* A site is its stack: the frames' addresses (and, for inlined frames that
 * share an address, their names) identify it across builds. */
static uint64_t site_key(const ml_site_t *s) {
    uint64_t h = 0x51735173ull + s->nframes;
    for (uint32_t i = 0; i < s->nframes; i++) {
        h = hash_mix(h, s->frames[i].address);
        if (s->frames[i].inlined) h = hash_mix(h, hash_str(s->frames[i].function));
    }
    return h ? h : 1;
}

static uint32_t site_id(ml_vmodel_t *m, uint64_t key) {
    bool existed;
    idslot_t *e = site_ids_put(&m->ids, key, &existed);
    if (!e) return ML_VSITE_NONE;
    if (!existed) e->id = m->next_id++;
    return e->id;
}

/* ------------------------------------------------------------------------- */
/* Source: the analysis accessors the model reads (called with the lock held) */
/* ------------------------------------------------------------------------- */

static ml_vfrag_t vfrag(const ml_frag_t *f) {
    ml_vfrag_t v = {0};
    if (!f || !f->valid) return v;
    v.valid = true;
    v.page_utilization = f->page_utilization;
    v.free_bytes = f->free_bytes;
    v.largest_free_bytes = f->largest_free_bytes;
    v.external = f->external;
    return v;
}

static void src_summary(ml_vmodel_t *m, ml_vsummary_t *s) {
    const ml_totals_t *t = ml_analysis_totals(m->an);
    s->totals = *t;
    s->totals.truncated |= m->truncated;
    s->duration_ms =
        t->complete && t->end.duration_ms ? (uint32_t)t->end.duration_ms : t->last_time_ms;
    s->sampled = t->sample_bytes != 0;
    s->sample_bytes = t->sample_bytes;
    s->peak_rss_bytes = t->peak_rss_bytes;
    const ml_process_info_t *p = ml_analysis_process(m->an);
    if (p) {
        s->pid = p->pid;
        s->attached = (p->options & ML_OPT_ATTACHED) != 0;
        s->ended_in_window = ml_analysis_ended_in_window(m->an);
        snprintf(s->exe, sizeof s->exe, "%s", p->exe ? p->exe : "");
        size_t o = 0;
        for (uint32_t i = 0; i < p->argc && o + 1 < sizeof s->cmdline; i++) {
            int n = snprintf(s->cmdline + o, sizeof s->cmdline - o, "%s%s", i ? " " : "",
                             p->argv[i] ? p->argv[i] : "");
            if (n < 0) break;
            o += (size_t)n;
        }
    }
    if (m->built) {
        const ml_leaks_t *l = ml_analysis_leaks(m->an);
        if (l) {
            s->leak_bytes[0] = l->lost_bytes;
            s->leak_blocks[0] = l->lost_blocks;
            s->leak_bytes[ML_VLEAK_POSSIBLE] = l->kind_bytes[ML_LEAK_POSSIBLE];
            s->leak_blocks[ML_VLEAK_POSSIBLE] = l->kind_blocks[ML_LEAK_POSSIBLE];
            s->leak_bytes[ML_VLEAK_DEFINITE] = l->kind_bytes[ML_LEAK_DEFINITE];
            s->leak_bytes[ML_VLEAK_INDIRECT] = l->kind_bytes[ML_LEAK_INDIRECT];
            s->leak_bytes[ML_VLEAK_REACHABLE] = l->kind_bytes[ML_LEAK_REACHABLE];
            s->leak_blocks[ML_VLEAK_DEFINITE] = l->kind_blocks[ML_LEAK_DEFINITE];
            s->leak_blocks[ML_VLEAK_INDIRECT] = l->kind_blocks[ML_LEAK_INDIRECT];
            s->leak_blocks[ML_VLEAK_REACHABLE] = l->kind_blocks[ML_LEAK_REACHABLE];
            s->leaks_scanned = l->scanned;
        }
        s->frag_peak = vfrag(ml_analysis_frag(m->an, ML_MOMENT_PEAK));
        s->frag_end = vfrag(ml_analysis_frag(m->an, ML_MOMENT_END));
    } else {
        ml_live_split_t ls = ml_analysis_live_split(m->an);
        s->leak_bytes[0] = ls.lost_bytes;
        s->leak_blocks[0] = ls.lost_blocks;
        s->leak_bytes[ML_VLEAK_REACHABLE] = ls.reachable_bytes;
        s->leak_blocks[ML_VLEAK_REACHABLE] = ls.reachable_blocks;
    }
    const char *const *w;
    size_t nw = ml_analysis_warnings(m->an, &w);
    s->nwarnings = (uint32_t)nw;
    for (size_t i = 0; i < nw && i < ML_VMAX_WARNINGS; i++)
        snprintf(s->warnings[i], sizeof s->warnings[i], "%s", w[i] ? w[i] : "");
    const ml_gpu_t *g = ml_analysis_gpu(m->an);
    s->ngpus = 0;
    for (size_t i = 0; g && i < ml_gpu_device_count(g) && s->ngpus < ML_VMAX_GPUS; i++) {
        const ml_gpu_device_t *d = ml_gpu_device(g, i);
        s->gpus[s->ngpus++] = (ml_vgpu_t){(uint32_t)d->device, d->peak_bytes, d->leaked_bytes,
                                          d->alloc_calls, d->free_calls};
    }
}

static ml_vleak_t dominant_kind(const ml_site_t *s) {
    if (!s->live_at_exit_bytes) return ML_VLEAK_NONE;
    int best = 0;
    for (int k = 1; k < ML_LEAK_KINDS; k++)
        if (s->leaked_kind_bytes[k] > s->leaked_kind_bytes[best]) best = k;
    if (!s->leaked_kind_bytes[best]) return ML_VLEAK_NONE; /* not classified (no exit scan) */
    return best == ML_LEAK_DEFINITE   ? ML_VLEAK_DEFINITE
           : best == ML_LEAK_INDIRECT ? ML_VLEAK_INDIRECT
           : best == ML_LEAK_POSSIBLE ? ML_VLEAK_POSSIBLE
                                      : ML_VLEAK_REACHABLE;
}

static int cmp_vsite_id(const void *a, const void *b) {
    const ml_vsite_t *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int src_sites(ml_vmodel_t *m) {
    size_t n = 0;
    const ml_site_t *s = m->built ? ml_analysis_sites(m->an, &n) : NULL;
    m->an_sites = s;
    m->an_nsites = s ? n : 0;
    ml_vsite_t *v = grow(m->sites, &m->cap_sites, (uint32_t)n + 1, sizeof *v);
    uint32_t *bb = grow(m->by_build, &m->cap_by_build, (uint32_t)n + 1, sizeof *bb);
    if (v) m->sites = v;
    if (bb) m->by_build = bb;
    if (!v || !bb) {
        m->nsites = 0;
        return -ENOMEM;
    }
    m->nsites = 0;
    for (size_t i = 0; i < m->an_nsites; i++) {
        const ml_site_t *a = &s[i];
        ml_vsite_t *o = &m->sites[m->nsites++];
        o->id = site_id(m, site_key(a));
        o->number = a->id;
        o->nframes = a->nframes;
        o->frames = a->frames;
        o->headline = a->headline < a->nframes ? a->headline : 0;
        o->alloc_calls = a->alloc_calls;
        o->bytes_allocated = a->bytes_allocated;
        o->temporary_allocs = a->temporary_allocs;
        o->peak_bytes = a->peak_bytes;
        o->leaked_bytes = a->leaked_bytes;
        o->leaked_blocks = a->leaked_blocks;
        o->leak_kind = dominant_kind(a);
        /* Live now is what the analysis counts as leaked while the program
         * still runs (live at the end of what was read). */
        o->live_bytes = a->live_at_exit_bytes;
        o->live_blocks = a->live_at_exit_blocks;
        o->src = a;
    }
    qsort(m->sites, m->nsites, sizeof *m->sites, cmp_vsite_id);
    /* by_build: the analysis' site index -> our index, through src. */
    for (uint32_t i = 0; i < m->nsites; i++)
        m->by_build[m->sites[i].src - s] = i;
    return 0;
}

/* The strategy advisor's suggestions once its replay is done (they include
 * the GPU advice); before that, the GPU advice the analysis has at once.
 * The evidence is put in words for people (evidence.c; the JSON report's
 * "evidence" object has the same numbers), one NUL-terminated text after the
 * other in sugg_text. */
static int src_advice(ml_vmodel_t *m) {
    const ml_suggestion_t *a = NULL;
    size_t n = ml_advice_suggestions(m->advice, &a);
    ml_vsuggestion_t *v = grow(m->sugg, &m->cap_sugg, (uint32_t)n + 1, sizeof *v);
    if (!v) return -ENOMEM;
    m->sugg = v;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = ml__evidence_text(f, &a[i]);
        if (rc == 0 && fputc('\0', f) == EOF) rc = -ENOMEM;
    }
    if (fclose(f) != 0 && rc == 0) rc = -ENOMEM;
    if (rc < 0) {
        free(text);
        return rc;
    }
    free(m->sugg_text);
    m->sugg_text = text;
    const char *ev = text;
    for (size_t i = 0; i < n; i++, ev += strlen(ev) + 1) {
        uint32_t site = ML_VSITE_NONE;
        if (a[i].site >= 0 && (size_t)a[i].site < m->an_nsites)
            site = m->sites[m->by_build[a[i].site]].id;
        m->sugg[m->nsugg++] = (ml_vsuggestion_t){a[i].strategy, a[i].message, site,
                                                 a[i].estimated_saving_bytes, ev};
    }
    return 0;
}

static int src_suggestions(ml_vmodel_t *m) {
    m->nsugg = 0;
    free(m->sugg_text);
    m->sugg_text = NULL;
    if (m->adv_imported) return src_advice(m);
    const ml_gpu_t *g = ml_analysis_gpu(m->an);
    if (!g) return 0;
    ml_gpu_suggestion_t gs[32];
    size_t n = ml_gpu_suggest(g, gs, 32);
    if (!n) return 0;
    ml_vsuggestion_t *v = grow(m->sugg, &m->cap_sugg, (uint32_t)n, sizeof *v);
    char *text = malloc(n * (sizeof gs[0].message + sizeof gs[0].evidence));
    if (!v || !text) {
        if (v) m->sugg = v;
        free(text);
        return -ENOMEM;
    }
    m->sugg = v;
    m->sugg_text = text;
    for (size_t i = 0; i < n; i++) {
        char *msg = text + i * (sizeof gs[0].message + sizeof gs[0].evidence);
        char *ev = msg + sizeof gs[0].message;
        memcpy(msg, gs[i].message, sizeof gs[0].message);
        memcpy(ev, gs[i].evidence, sizeof gs[0].evidence);
        m->sugg[m->nsugg++] = (ml_vsuggestion_t){gs[i].strategy, msg, ML_VSITE_NONE,
                                                 gs[i].estimated_saving_bytes, ev};
    }
    return 0;
}

static int src_timeline(ml_vmodel_t *m) {
    const ml_timeline_point_t *p = NULL;
    size_t n = m->built ? ml_analysis_timeline(m->an, &p) : 0;
    ml_vpoint_t *v = grow(m->points, &m->cap_points, (uint32_t)n + 1, sizeof *v);
    if (!v) return -ENOMEM;
    m->points = v;
    m->npoints = 0;
    for (size_t i = 0; i < n; i++)
        m->points[m->npoints++] = (ml_vpoint_t){p[i].time_ms, p[i].heap_bytes, p[i].rss_bytes,
                                                p[i].mmap_bytes, p[i].gpu_bytes};
    return 0;
}

/* The GPU view's devices: every number of ml_gpu_device_t, the per-kind
 * table, and three site lists (peak, leak, churn) with their frames. The
 * frames' strings belong to the session's symbolizer, which lives as long as
 * the session (ml_gpu_stack_frames), so copying the frame structs is enough;
 * they are collected first and pointed to at the end, once the array has
 * stopped growing. */
#define GPU_MAX_FRAMES 64

static ml_vgpu_frag_t vgpu_frag(const ml_gpu_frag_t *f) {
    ml_vgpu_frag_t v = {0};
    if (!f->valid) return v;
    v = (ml_vgpu_frag_t){true,           f->time_ms,    f->live_bytes, f->blocks,
                         f->span_bytes,  f->hole_bytes, f->holes,      f->largest_hole_bytes,
                         f->utilization, f->external,   f->regions};
    return v;
}

static int gpu_site(ml_vmodel_t *m, const ml_gpu_t *g, const ml_gpu_site_t *s, ml_vgpu_list_t l) {
    ml_vgpu_site_t *v = &m->gsites[m->ngsites];
    memset(v, 0, sizeof *v);
    v->stack = s->stack;
    v->kind = s->kind;
    v->kind_name = ml_gpu_kind_name(s->kind);
    switch (l) {
    case ML_VGPU_PEAK:
        v->bytes = s->peak_bytes;
        v->blocks = s->peak_blocks;
        break;
    case ML_VGPU_LEAK:
        v->bytes = s->leaked_bytes;
        v->blocks = s->leaked_blocks;
        v->ctx_destroy_bytes = s->ctx_destroy_bytes;
        break;
    default: /* churn: what the pairs moved */
        v->bytes = s->bytes_allocated;
        v->blocks = s->alloc_calls;
        break;
    }
    v->alloc_calls = s->alloc_calls;
    v->bytes_allocated = s->bytes_allocated;
    v->pairs = s->frees;
    v->pairs_per_s = ml_gpu_site_pairs_per_s(g, s);
    v->mean_lifetime_ms = s->frees ? (double)s->lifetime_ms_sum / (double)s->frees : 0;
    v->min_size = s->min_size;
    v->max_size = s->max_size;
    v->top_size = s->top_size;
    v->distinct_sizes = s->distinct_sizes;
    ml_vframe_t f[GPU_MAX_FRAMES];
    size_t nf = ml_gpu_stack_frames(m->an, s->stack, f, GPU_MAX_FRAMES);
    if (nf) { /* none before the analysis was built */
        ml_vframe_t *fr = grow(m->gframes, &m->cap_gframes, m->ngframes + (uint32_t)nf, sizeof *fr);
        if (!fr) return -ENOMEM;
        m->gframes = fr;
        memcpy(m->gframes + m->ngframes, f, nf * sizeof *f);
    }
    m->gsite_frame0[m->ngsites] = m->ngframes;
    m->ngframes += (uint32_t)nf;
    v->nframes = (uint32_t)nf;
    m->ngsites++;
    return 0;
}

static int src_gpu(ml_vmodel_t *m) {
    const ml_gpu_t *g = ml_analysis_gpu(m->an);
    uint32_t nd = (uint32_t)ml_gpu_device_count(g);
    m->ngdevs = m->ngsites = m->ngframes = 0;
    if (!nd) return 0;
    uint32_t maxs = nd * ML_VGPU_LISTS_ * ML_VGPU_MAX_SITES;
    ml_vgpu_device_t *dv = grow(m->gdevs, &m->cap_gdevs, nd, sizeof *dv);
    if (dv) m->gdevs = dv;
    ml_vgpu_site_t *sv = grow(m->gsites, &m->cap_gsites, maxs, sizeof *sv);
    if (sv) m->gsites = sv;
    uint32_t *f0 = grow(m->gsite_frame0, &m->cap_gsite_frame0, maxs, sizeof *f0);
    if (f0) m->gsite_frame0 = f0;
    if (!dv || !sv || !f0) return -ENOMEM;
    static const ml_gpu_order_t order[ML_VGPU_LISTS_] = {ML_GPU_BY_PEAK, ML_GPU_BY_LEAKED,
                                                         ML_GPU_BY_CHURN};
    for (uint32_t i = 0; i < nd; i++) {
        const ml_gpu_device_t *d = ml_gpu_device(g, i);
        ml_vgpu_device_t *o = &m->gdevs[m->ngdevs++];
        memset(o, 0, sizeof *o);
        o->device = d->device;
        o->peak_bytes = d->peak_bytes;
        o->peak_blocks = d->peak_blocks;
        o->peak_time_ms = d->peak_time_ms;
        o->live_bytes = d->live_bytes;
        o->live_blocks = d->live_blocks;
        o->leaked_bytes = d->leaked_bytes;
        o->leaked_blocks = d->leaked_blocks;
        o->ctx_destroy_bytes = d->ctx_destroy_bytes;
        o->ctx_destroy_blocks = d->ctx_destroy_blocks;
        o->alloc_calls = d->alloc_calls;
        o->free_calls = d->free_calls;
        o->bytes_allocated = d->bytes_allocated;
        o->failed_frees = d->failed_frees;
        o->unknown_frees = d->unknown_frees;
        o->pinned_peak_bytes = d->pinned_peak_bytes;
        o->pinned_live_bytes = d->pinned_live_bytes;
        o->pinned_leaked_bytes = d->pinned_leaked_bytes;
        o->pinned_bytes_allocated = d->pinned_bytes_allocated;
        o->pinned_alloc_calls = d->pinned_alloc_calls;
        o->pinned_free_calls = d->pinned_free_calls;
        o->empty_cache_cycles = d->empty_cache_cycles;
        o->pool_trims = d->pool_trims;
        o->frag_peak = vgpu_frag(&d->frag_peak);
        o->frag_end = vgpu_frag(&d->frag_now);
        for (unsigned k = 0; k < ML_GPU_KIND_COUNT_; k++) {
            const ml_gpu_kind_stats_t *ks = &d->kinds[k];
            if (!ks->alloc_calls && !ks->free_calls) continue;
            o->kinds[o->nkinds++] =
                (ml_vgpu_kind_t){(uint8_t)k,     ml_gpu_kind_name(k), ks->alloc_calls,
                                 ks->free_calls, ks->bytes_allocated, ks->peak_bytes,
                                 ks->live_bytes, ks->leaked_bytes,    ks->leaked_blocks};
        }
        for (int l = 0; l < ML_VGPU_LISTS_; l++) {
            ml_gpu_site_t buf[ML_VGPU_MAX_SITES];
            size_t n = ml_gpu_sites(g, i, order[l], buf, ML_VGPU_MAX_SITES);
            for (size_t k = 0; k < n; k++) {
                int rc = gpu_site(m, g, &buf[k], (ml_vgpu_list_t)l);
                if (rc < 0) {
                    m->ngdevs = 0; /* no half-made device with dangling lists */
                    return rc;
                }
            }
            o->nsites[l] = (uint32_t)n;
        }
    }
    for (uint32_t i = 0; i < m->ngsites; i++)
        m->gsites[i].frames = m->gsites[i].nframes ? m->gframes + m->gsite_frame0[i] : NULL;
    /* Sites were appended device by device, list by list. */
    uint32_t next = 0;
    for (uint32_t i = 0; i < m->ngdevs; i++)
        for (int l = 0; l < ML_VGPU_LISTS_; l++) {
            m->gdevs[i].sites[l] = m->gsites + next;
            next += m->gdevs[i].nsites[l];
        }
    return 0;
}

/* Units of work (sites, rows, nodes) between two progress calls. */
#define PROGRESS_EVERY 4096

static void progress(ml_vmodel_t *m, const char *what, uint64_t done, uint64_t total) {
    if (m->progress_fn) m->progress_fn(m->progress_ctx, what, done, total);
}

static void tree_progress(void *ctx, size_t done, size_t total) {
    ml_vmodel_t *m = ctx;
    progress(m, m->bottom_up ? "Building the bottom-up call tree" : "Building the call tree", done,
             total);
}

void ml_vmodel_set_progress(ml_vmodel_t *m, ml_vprogress_fn fn, void *ctx) {
    m->progress_fn = fn;
    m->progress_ctx = ctx;
}

/* The call tree of the last build: the analysis' own (ml_analysis_calltree)
 * when every site is shown top-down, else one the analysis builds with the
 * same merge key from the sites the filter keeps, or bottom-up, into
 * m->own_nodes. Returns the node count, 0 or -ENOMEM. */
static int64_t src_calltree(ml_vmodel_t *m) {
    m->nodes = NULL;
    if (!m->an_nsites) return 0;
    if (!m->filter[0] && !m->bottom_up) {
        size_t n = ml_analysis_calltree(m->an, &m->nodes);
        if (n) progress(m, "Indexing the call tree", 0, n);
        return (int64_t)n;
    }
    bool *use = malloc(m->an_nsites * sizeof *use);
    if (!use) return -ENOMEM;
    for (size_t i = 0; i < m->an_nsites; i++) {
        if (i % PROGRESS_EVERY == 0) progress(m, "Filtering the sites", i, m->an_nsites);
        use[i] = ml_vmodel_site_matches(m, &m->sites[m->by_build[i]]);
    }
    int64_t n = ml_calltree_build_progress(m->an_sites, m->an_nsites, use, m->bottom_up,
                                           &m->own_nodes, tree_progress, m);
    free(use);
    m->nodes = m->own_nodes;
    return n;
}

/* A snapshot of who holds the heap now in session `an` (stacks: mapped to
 * sites later; stack ids are the order in which stacks first allocated, so a
 * replay's ids are the restored session's too). */
static void tt_snapshot(travel_t *tt, const ml_analysis_t *an, uint32_t time_ms) {
    if (tt->nsnaps == SNAP_MAX) {
        /* Thin out: keep every other snapshot, so they still cover the run. */
        uint32_t k = 0;
        for (uint32_t i = 0; i < tt->nsnaps; i += 2)
            tt->snaps[k++] = tt->snaps[i];
        tt->nsnaps = k;
    }
    snap_t *v = grow(tt->snaps, &tt->cap_snaps, tt->nsnaps + 1, sizeof *v);
    if (!v) return;
    tt->snaps = v;
    snap_t *s = &tt->snaps[tt->nsnaps++];
    s->time_ms = time_ms;
    s->n = (uint32_t)ml_analysis_top_stacks(an, s->stacks, SNAP_STACKS);
    tt->last_snap_ms = time_ms;
}

/* A copy of the heap map at the end of what `an` built (needs a build). */
static void tt_mapsnap(travel_t *tt, const ml_analysis_t *an) {
    const ml_frag_t *f = ml_analysis_frag(an, ML_MOMENT_END);
    if (!f || !f->valid || !f->map_ncells || !f->map_cells) return;
    if (tt->nmaps && tt->maps[tt->nmaps - 1].time_ms == f->time_ms) return;
    if (tt->nmaps == MAPS_MAX) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < tt->nmaps; i++) {
            if (i % 2 == 0)
                tt->maps[k++] = tt->maps[i];
            else
                free(tt->maps[i].cells);
        }
        tt->nmaps = k;
    }
    int8_t *c = malloc(f->map_ncells);
    if (!c) return;
    memcpy(c, f->map_cells, f->map_ncells);
    tt->maps[tt->nmaps++] =
        (mapsnap_t){f->time_ms, f->map_base, f->map_cell_bytes, f->map_ncells, c, vfrag(f)};
}

static void tt_free(travel_t *tt) {
    free(tt->snaps);
    for (uint32_t i = 0; i < tt->nmaps; i++)
        free(tt->maps[i].cells);
    memset(tt, 0, sizeof *tt);
}

static void src_snapshot(ml_vmodel_t *m, uint32_t time_ms) {
    tt_snapshot(&m->tt, m->an, time_ms);
}

static void src_mapsnap(ml_vmodel_t *m) {
    tt_mapsnap(&m->tt, m->an);
}

static int src_build(ml_vmodel_t *m) {
    char err[256];
    int rc = ml_analysis_build(m->an, &m->build_opts, err, sizeof err);
    if (rc < 0) {
        snprintf(m->build_error, sizeof m->build_error, "%s", err);
        return rc;
    }
    m->built = true;
    m->nbuilds++;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------- */

int ml_vmodel_new(ml_vmodel_t **out) {
    ml_vmodel_t *m = calloc(1, sizeof *m);
    if (!m) return -ENOMEM;
    int rc = ml_analysis_new(&m->an);
    if (rc < 0) {
        free(m);
        return rc;
    }
    /* Recursive: the collector may hold it around a larger step (an exit
     * scan) that feeds records, each taking it again. */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&m->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    m->sort = ML_VSORT_PEAK;
    m->use_snapshot = true;
    m->hist_budget = ML_VHISTORY_BUDGET_DEFAULT;
    m->tree_dirty = true;
    m->sum.state = ML_VPROC_LOADING;
    *out = m;
    return 0;
}

void ml_vmodel_free(ml_vmodel_t *m) {
    if (!m) return;
    /* The advisor cannot be interrupted, and it reads the session: when it
     * still runs, the model is left to it (the process is about to exit). */
    atomic_store(&m->hist.stop, true);
    int st = atomic_load(&m->adv_state);
    if (st == ADV_RUNNING) {
        pthread_detach(m->adv_thread);
        if (m->hist.started && !m->hist.joined) pthread_detach(m->hist.thread);
        return;
    }
    if (m->hist.started && !m->hist.joined) {
        /* The history replay looks at `stop` every 1024 records, but not
         * inside a build (seconds on a big heap): `q` must not wait for one.
         * When it still runs, the model is left to it, as to the advisor. */
        if (atomic_load(&m->hist.state) == HIST_RUNNING) {
            pthread_detach(m->hist.thread);
            return;
        }
        pthread_join(m->hist.thread, NULL);
    }
    if ((st == ADV_DONE || st == ADV_FAILED) && !m->adv_joined) pthread_join(m->adv_thread, NULL);
    if (m->hist.reader) ml_reader_close(m->hist.reader);
    ml_analysis_free(m->hist.an);
    ml_advice_free(m->advice);
    if (m->reader) ml_reader_close(m->reader);
    ml_analysis_free(m->an);
    pthread_mutex_destroy(&m->lock);
    free(m->sites);
    free(m->by_build);
    free(m->sugg);
    free(m->sugg_text);
    free(m->points);
    ml_map_free(&m->ids);
    tt_free(&m->tt);
    tt_free(&m->hist.tt);
    free(m->order);
    free(m->sugg_order);
    free(m->own_nodes);
    free(m->node_key);
    free(m->expanded.keys);
    free(m->rows);
    free(m->cells);
    free(m->gdevs);
    free(m->gsites);
    free(m->gsite_frame0);
    free(m->gframes);
    free(m);
}

void ml_vmodel_set_build_opts(ml_vmodel_t *m, const ml_build_opts_t *o) {
    m->build_opts = o ? *o : (ml_build_opts_t){0};
}

void ml_vmodel_set_advice(ml_vmodel_t *m, bool on) {
    int idle = ADV_IDLE, off = ADV_OFF;
    if (on)
        atomic_compare_exchange_strong(&m->adv_state, &off, ADV_IDLE);
    else
        atomic_compare_exchange_strong(&m->adv_state, &idle, ADV_OFF);
}

const char *ml_vmodel_error(const ml_vmodel_t *m) {
    return m->error;
}
const char *ml_vmodel_path(const ml_vmodel_t *m) {
    return m->path;
}
void ml_vmodel_set_path(ml_vmodel_t *m, const char *path) {
    snprintf(m->path, sizeof m->path, "%s", path ? path : "");
}
ml_analysis_t *ml_vmodel_analysis(ml_vmodel_t *m) {
    return m->an;
}
void ml_vmodel_lock(ml_vmodel_t *m) {
    pthread_mutex_lock(&m->lock);
}
void ml_vmodel_unlock(ml_vmodel_t *m) {
    pthread_mutex_unlock(&m->lock);
}
bool ml_vmodel_loading(const ml_vmodel_t *m) {
    return m->loading;
}
double ml_vmodel_progress(const ml_vmodel_t *m) {
    return m->progress;
}
uint64_t ml_vmodel_generation(const ml_vmodel_t *m) {
    return m->generation;
}
uint32_t ml_vmodel_gpu_ndevices(const ml_vmodel_t *m) {
    return m->ngdevs;
}

const ml_vgpu_device_t *ml_vmodel_gpu_device(const ml_vmodel_t *m, uint32_t i) {
    return i < m->ngdevs ? &m->gdevs[i] : NULL;
}

const ml_vsummary_t *ml_vmodel_summary(const ml_vmodel_t *m) {
    return &m->sum;
}

void ml_vmodel_feed(ml_vmodel_t *m, const ml_record_t *rec) {
    ml_analysis_feed(m->an, rec);
}

void ml_vmodel_set_process_state(ml_vmodel_t *m, ml_vproc_state_t st, int status) {
    pthread_mutex_lock(&m->lock);
    m->live = true;
    m->live_state = st;
    m->live_status = status;
    pthread_mutex_unlock(&m->lock);
}

/* ------------------------------------------------------------------------- */
/* Loading                                                                   */
/* ------------------------------------------------------------------------- */

int ml_vmodel_open(ml_vmodel_t *m, const char *path, char *err, size_t errlen) {
    int rc = ml_reader_open(path, &m->reader, err, errlen);
    if (rc < 0) return rc;
    ml_vmodel_set_path(m, path);
    m->loading = true;
    m->progress = 0;
    m->error[0] = '\0';
    m->next_snap_permille = SNAP_EVERY_PERMILLE;
    /* The analysis snapshot the collector saved at the end of the trace
     * gives the final results without reading a record (what `memlens
     * report` does); without a sound one the steps below replay. */
    char e[256];
    m->from_snapshot =
        m->use_snapshot && ml_analysis_load_ex(m->an, path, ML_LOAD_SNAPSHOT | ML_LOAD_NO_REPLAY, e,
                                               sizeof e) == 0;
    return 0;
}

void ml_vmodel_set_snapshot(ml_vmodel_t *m, bool use) {
    m->use_snapshot = use;
}

bool ml_vmodel_from_snapshot(const ml_vmodel_t *m) {
    return m->from_snapshot;
}

void ml_vmodel_set_history_budget(ml_vmodel_t *m, uint64_t bytes) {
    m->hist_budget = bytes;
}

static void finish_load(ml_vmodel_t *m) {
    m->truncated = ml_reader_truncated(m->reader);
    ml_reader_close(m->reader);
    m->reader = NULL;
    m->loading = false;
    m->progress = 1;
    ml_vmodel_refresh(m);
}

/* Snapshots while reading: who holds the heap every few permille of the
 * file, and a heap map as often as the build budget allows. */
static void load_snapshots(ml_vmodel_t *m) {
    uint32_t pm = (uint32_t)(m->progress * 1000);
    if (pm < m->next_snap_permille) return;
    m->next_snap_permille = pm + SNAP_EVERY_PERMILLE;
    const ml_totals_t *t = ml_analysis_totals(m->an);
    src_snapshot(m, t->last_time_ms);
    if ((double)m->build_ms <= MAP_BUILD_BUDGET * (double)m->load_ms) {
        uint64_t t0 = mono_ms();
        if (src_build(m) == 0) {
            src_mapsnap(m);
            /* A build frees the previous one's sites and frames, which the
             * snapshot points into: take the new ones at once (the views
             * then show the sites read so far). */
            ml_vmodel_refresh(m);
        }
        m->build_ms += mono_ms() - t0 + 1;
    }
}

static void hist_start(ml_vmodel_t *m);
static bool adv_poll(ml_vmodel_t *m);

int ml_vmodel_load_step(ml_vmodel_t *m, uint32_t max_ms) {
    if (!m->reader) return 0;
    if (m->from_snapshot) {
        /* The results are final: build them, and replay for time travel in
         * the background, with the reader (at the first record). */
        m->truncated = false; /* a snapshot is written after the end record */
        m->hist.reader = m->reader;
        m->reader = NULL;
        m->loading = false;
        m->progress = 1;
        ml_vmodel_refresh(m);
        hist_start(m);
        return 0;
    }
    uint64_t t0 = mono_ms(), end = t0 + max_ms;
    ml_record_t rec;
    int rc;
    uint64_t size = ml_reader_size(m->reader);
    for (uint32_t n = 1;; n++) {
        rc = ml_reader_next(m->reader, &rec);
        if (rc <= 0) break;
        ml_analysis_feed(m->an, &rec);
        if ((n & 1023) == 0) {
            m->progress = size ? (double)ml_reader_offset(m->reader) / (double)size : 1.0;
            load_snapshots(m);
            if (mono_ms() >= end) break;
        }
    }
    m->load_ms += mono_ms() - t0;
    m->progress = size ? (double)ml_reader_offset(m->reader) / (double)size : 1.0;
    if (m->progress > 1) m->progress = 1;
    if (rc < 0) {
        snprintf(m->error, sizeof m->error, "%s", ml_reader_error(m->reader));
        finish_load(m);
        return -EINVAL;
    }
    if (rc == 0) {
        finish_load(m);
        return 0;
    }
    return 1;
}

int ml_vmodel_load_all(ml_vmodel_t *m) {
    int rc;
    while ((rc = ml_vmodel_load_step(m, 1000)) > 0) {
    }
    return rc;
}

/* ------------------------------------------------------------------------- */
/* The history replay (opened from the snapshot)                             */
/* ------------------------------------------------------------------------- */

/* The process' resident memory now and its high-water mark (VmRSS, VmHWM
 * of /proc/self/status; 0 when unreadable). The replay's cost is how much
 * the process grows while it runs: the session's tables live on the heap
 * with everything else, so this is the number the user sees, not an
 * estimate. The high-water mark also catches what a build allocates and
 * frees between two checks. */
static void rss_read(uint64_t *rss, uint64_t *hwm) {
    *rss = *hwm = 0;
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return;
    char line[128];
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) *rss = kb << 10;
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) *hwm = kb << 10;
    }
    fclose(f);
}

/* How much the process grew since the replay started: its resident memory,
 * or its high-water mark once that passed the one before the replay (from
 * then on it was reached while the replay ran). */
static uint64_t hist_grew(uint64_t rss0, uint64_t hwm0) {
    uint64_t r, hwm;
    rss_read(&r, &hwm);
    if (hwm > hwm0 && hwm > r) r = hwm;
    return r > rss0 ? r - rss0 : 0;
}

/* Checks the memory every this many records (a read costs ~20 us). */
#define HIST_CHECK_RECORDS 16384

static void *hist_main(void *arg) {
    ml_vmodel_t *m = arg;
    hist_t *h = &m->hist;
    ml_analysis_t *an = NULL;
    uint64_t rss0, hwm0, used = 0;
    rss_read(&rss0, &hwm0);
    int st = HIST_DONE;
    if (ml_analysis_new(&an) < 0) {
        snprintf(h->why, sizeof h->why, "out of memory");
        atomic_store(&h->state, HIST_FAILED);
        return NULL;
    }
    atomic_store(&h->held, true);
    /* Snapshots as a replay load takes them (load_snapshots): every few
     * permille of the file, a heap map as often as the build budget allows.
     * The builds use the model's options: a session's symbolizer is made by
     * its first build, and a kept session's sites must be the model's. */
    const ml_build_opts_t *bo = &h->opts;
    uint64_t size = ml_reader_size(h->reader), t0 = mono_ms(), build_ms = 0, build_spike = 0;
    bool mapsnap = false;
    uint32_t next_pm = SNAP_EVERY_PERMILLE;
    ml_record_t rec;
    int rc;
    for (uint64_t n = 1;; n++) {
        rc = ml_reader_next(h->reader, &rec);
        if (rc <= 0) break;
        ml_analysis_feed(an, &rec);
        if (n & 1023) continue;
        if (atomic_load(&h->stop)) break;
        double f = size ? (double)ml_reader_offset(h->reader) / (double)size : 1.0;
        uint32_t pm = f >= 1 ? 1000 : (uint32_t)(f * 1000);
        atomic_store(&h->permille, pm);
        bool snap = pm >= next_pm;
        if (snap || n % HIST_CHECK_RECORDS == 0) {
            uint64_t grew = hist_grew(rss0, hwm0);
            if (grew > used) atomic_store(&h->used, used = grew);
            if (grew > m->hist_budget) {
                st = HIST_BUDGET;
                break;
            }
            /* A build (for a heap map) allocates and frees a good share of
             * the live set's size again: one that would not fit beside what
             * the replay holds is skipped. Its cost is the last one's,
             * doubled, since the live set may have grown since. */
            uint64_t now = mono_ms();
            if (snap && (double)build_ms <= MAP_BUILD_BUDGET * (double)(now - t0) &&
                grew + 2 * build_spike <= m->hist_budget) {
                uint64_t before, hwm;
                rss_read(&before, &hwm);
                char err[64];
                if (ml_analysis_build(an, bo, err, sizeof err) == 0) mapsnap = true;
                build_ms += mono_ms() - now + 1;
                uint64_t after, hwm2;
                rss_read(&after, &hwm2);
                uint64_t top = hwm2 > hwm ? hwm2 : after;
                if (top > before && top - before > build_spike) build_spike = top - before;
            }
        }
        if (snap) {
            next_pm = pm + SNAP_EVERY_PERMILLE;
            tt_snapshot(&h->tt, an, ml_analysis_totals(an)->last_time_ms);
            if (mapsnap) tt_mapsnap(&h->tt, an);
            mapsnap = false;
        }
    }
    h->covered_ms = ml_analysis_totals(an)->last_time_ms;
    if (rc < 0 && st == HIST_DONE) {
        st = HIST_DAMAGED;
        snprintf(h->why, sizeof h->why, "%s", ml_reader_error(h->reader));
    }
    ml_reader_close(h->reader);
    h->reader = NULL;
    if (st == HIST_DONE && !atomic_load(&h->stop)) {
        /* Within its budget: kept for the peak's and worst moment's blocks
         * ("who pins this cell"), built here rather than on the UI thread
         * when the heap map first asks (4.4 s on 262,144 deep stacks, the
         * view frozen). A build that takes the process over the budget is
         * given back, and those two moments say "not kept". */
        char err[64];
        /* A build that would not fit beside the replay (twice the largest
         * heap-map build's spike, as above) is not tried. */
        uint64_t grew = hist_grew(rss0, hwm0);
        if (grew > used) atomic_store(&h->used, used = grew);
        h->an_built = grew + 2 * build_spike > m->hist_budget ? -1
                      : ml_analysis_build(an, bo, err, sizeof err) == 0 ? 1
                                                                        : -1;
        grew = hist_grew(rss0, hwm0);
        if (grew > used) atomic_store(&h->used, used = grew);
        if (h->an_built > 0 && grew <= m->hist_budget) {
            h->an = an;
        } else {
            h->an_built = -1;
            ml_analysis_free(an);
            malloc_trim(0);
            atomic_store(&h->held, false);
        }
    } else {
        ml_analysis_free(an);
        malloc_trim(0); /* give the replay's pages back now, not at the next big free */
        atomic_store(&h->held, false);
    }
    atomic_store(&h->state, st);
    return NULL;
}

static void hist_start(ml_vmodel_t *m) {
    hist_t *h = &m->hist;
    if (!m->hist_budget) {
        ml_reader_close(h->reader);
        h->reader = NULL;
        return;
    }
    h->opts = m->build_opts;
    atomic_store(&h->state, HIST_RUNNING);
    if (pthread_create(&h->thread, NULL, hist_main, m) != 0) {
        snprintf(h->why, sizeof h->why, "cannot start a thread");
        atomic_store(&h->state, HIST_FAILED);
        ml_reader_close(h->reader);
        h->reader = NULL;
        return;
    }
    h->started = true;
}

/* Takes in the finished replay's snapshots: they go before the ones the
 * model has (the heap map at the end, taken by the last refresh). */
static bool hist_poll(ml_vmodel_t *m) {
    hist_t *h = &m->hist;
    int st = atomic_load(&h->state);
    if (st == HIST_NONE || st == HIST_RUNNING || h->imported) return false;
    if (h->started && !h->joined) {
        pthread_join(h->thread, NULL);
        h->joined = true;
    }
    h->imported = true;
    travel_t *a = &h->tt, *b = &m->tt;
    uint32_t last = a->nmaps ? a->maps[a->nmaps - 1].time_ms : 0;
    for (uint32_t i = 0; i < b->nmaps; i++) {
        if (a->nmaps < MAPS_MAX && (!a->nmaps || b->maps[i].time_ms > last))
            a->maps[a->nmaps++] = b->maps[i];
        else
            free(b->maps[i].cells);
    }
    b->nmaps = 0;
    free(b->snaps);
    *b = *a;
    memset(a, 0, sizeof *a);
    m->generation++;
    return true;
}

ml_vtravel_t ml_vmodel_travel(const ml_vmodel_t *m) {
    const hist_t *h = &m->hist;
    ml_vtravel_t t = {.state = ML_VTRAVEL_FULL,
                      .until_ms = m->sum.duration_ms,
                      .budget_bytes = m->hist_budget,
                      .used_bytes = atomic_load(&h->used),
                      .session_held = atomic_load(&h->held),
                      .session_built = h->imported && h->an && h->an_built > 0,
                      .reason = ""};
    if (!m->from_snapshot) return t;
    if (!m->hist_budget) {
        t.state = ML_VTRAVEL_OFF;
        t.until_ms = 0;
        t.reason = "the history replay is off (a memory budget of 0: --history-mb)";
        return t;
    }
    int st = atomic_load(&h->state);
    if (st == HIST_NONE || st == HIST_RUNNING || !h->imported) {
        t.state = ML_VTRAVEL_BUILDING;
        t.until_ms = 0;
        t.progress = atomic_load(&h->permille) / 1000.0;
        return t;
    }
    if (st == HIST_DONE) return t;
    t.state = st == HIST_BUDGET ? ML_VTRAVEL_PARTIAL : ML_VTRAVEL_FAILED;
    t.until_ms = h->covered_ms;
    t.reason = m->travel_why;
    return t;
}

/* ------------------------------------------------------------------------- */
/* Sort and filter                                                           */
/* ------------------------------------------------------------------------- */

static const char *const sort_names[ML_VSORT_COUNT_] = {"peak", "leaked", "allocated", "calls",
                                                        "temporary"};

const char *ml_vmodel_sort_name(ml_vsort_t k) {
    return k < ML_VSORT_COUNT_ ? sort_names[k] : "?";
}

uint64_t ml_vmodel_site_cost(const ml_vsite_t *s, ml_vsort_t k) {
    switch (k) {
    case ML_VSORT_PEAK:
        return s->peak_bytes;
    case ML_VSORT_LEAKED:
        return s->leaked_bytes;
    case ML_VSORT_ALLOCATED:
        return s->bytes_allocated;
    case ML_VSORT_CALLS:
        return s->alloc_calls;
    case ML_VSORT_TEMPORARY:
        return s->temporary_allocs;
    default:
        return 0;
    }
}

static bool icontains(const char *hay, const char *needle) {
    return hay && strcasestr(hay, needle) != NULL;
}

/* A file or module is matched by the name the views show, its last path
 * component, unless the filter has a '/': "x" matched every site through
 * "/lib/x86_64-linux-gnu/", a directory no view shows. */
static bool path_contains(const char *path, const char *needle, bool whole) {
    if (!path) return false;
    const char *base = whole ? NULL : strrchr(path, '/');
    return icontains(base && base[1] ? base + 1 : path, needle);
}

bool ml_vmodel_site_matches(const ml_vmodel_t *m, const ml_vsite_t *s) {
    if (!m->filter[0]) return true;
    bool whole = strchr(m->filter, '/') != NULL;
    for (uint32_t i = 0; i < s->nframes; i++) {
        const ml_vframe_t *f = &s->frames[i];
        if (icontains(f->function, m->filter) || path_contains(f->file, m->filter, whole) ||
            path_contains(f->module, m->filter, whole))
            return true;
    }
    return false;
}

/* qsort has no context argument in C11; the model belongs to one thread. */
static const ml_vmodel_t *sort_model;

static int cmp_sites(const void *a, const void *b) {
    const ml_vsite_t *x = &sort_model->sites[*(const uint32_t *)a];
    const ml_vsite_t *y = &sort_model->sites[*(const uint32_t *)b];
    uint64_t cx = ml_vmodel_site_cost(x, sort_model->sort),
             cy = ml_vmodel_site_cost(y, sort_model->sort);
    if (cx != cy) return cx > cy ? -1 : 1;
    /* Ties in the report's order (the analysis' site numbers) once the data
     * is final, so that a trace opened from its snapshot and one replayed
     * list them alike; live, where every build renumbers, by the model's id. */
    if (!sort_model->live && x->number != y->number) return x->number < y->number ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_sugg(const void *a, const void *b) {
    const ml_vsuggestion_t *x = &sort_model->sugg[*(const uint32_t *)a];
    const ml_vsuggestion_t *y = &sort_model->sugg[*(const uint32_t *)b];
    if (x->estimated_saving_bytes != y->estimated_saving_bytes)
        return x->estimated_saving_bytes > y->estimated_saving_bytes ? -1 : 1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* Lists the sites the filter keeps in the sort order. tree: the call tree
 * must be built again (new data, a new filter); a new sort key only lists
 * its rows again, in the new order. */
static void reorder_tree(ml_vmodel_t *m, bool tree) {
    free(m->order);
    m->order = malloc(((size_t)m->nsites + 1) * sizeof *m->order);
    m->norder = 0;
    if (m->order) {
        for (uint32_t i = 0; i < m->nsites; i++) {
            if (m->filter[0] && i % PROGRESS_EVERY == 0)
                progress(m, "Filtering the sites", i, m->nsites);
            if (ml_vmodel_site_matches(m, &m->sites[i])) m->order[m->norder++] = i;
        }
        sort_model = m;
        qsort(m->order, m->norder, sizeof *m->order, cmp_sites);
    }
    free(m->sugg_order);
    m->sugg_order = malloc(((size_t)m->nsugg + 1) * sizeof *m->sugg_order);
    m->nsugg_order = 0;
    if (m->sugg_order) {
        for (uint32_t i = 0; i < m->nsugg; i++) {
            const ml_vsuggestion_t *g = &m->sugg[i];
            const ml_vsite_t *s = g->site == ML_VSITE_NONE ? NULL : ml_vmodel_site(m, g->site);
            if (!m->filter[0] || !s || ml_vmodel_site_matches(m, s))
                m->sugg_order[m->nsugg_order++] = i;
        }
        sort_model = m;
        qsort(m->sugg_order, m->nsugg_order, sizeof *m->sugg_order, cmp_sugg);
    }
    if (tree)
        m->tree_dirty = true;
    else
        m->rows_dirty = true;
}

static void reorder(ml_vmodel_t *m) {
    reorder_tree(m, true);
}

void ml_vmodel_set_sort(ml_vmodel_t *m, ml_vsort_t key) {
    if (key >= ML_VSORT_COUNT_) return;
    m->sort = key;
    reorder_tree(m, false);
}

ml_vsort_t ml_vmodel_sort(const ml_vmodel_t *m) {
    return m->sort;
}

void ml_vmodel_set_filter(ml_vmodel_t *m, const char *text) {
    snprintf(m->filter, sizeof m->filter, "%s", text ? text : "");
    reorder(m);
}

const char *ml_vmodel_filter(const ml_vmodel_t *m) {
    return m->filter;
}

uint32_t ml_vmodel_nsites(const ml_vmodel_t *m) {
    return m->norder;
}

const ml_vsite_t *ml_vmodel_site_at(const ml_vmodel_t *m, uint32_t i) {
    return i < m->norder ? &m->sites[m->order[i]] : NULL;
}

const ml_vsite_t *ml_vmodel_site(const ml_vmodel_t *m, uint32_t id) {
    uint32_t lo = 0, hi = m->nsites;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (m->sites[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->nsites && m->sites[lo].id == id ? &m->sites[lo] : NULL;
}

/* The analysis keeps whole-program histograms with counts, and per site a
 * mask of the buckets it touched: the site view shows the program's bars
 * and marks the site's buckets. Bucket k is (2^(k-1), 2^k]. */
uint32_t ml_vmodel_site_hist(ml_vmodel_t *m, uint32_t site, ml_vhist_t kind, ml_vbucket_t *out,
                             uint32_t max) {
    const ml_vsite_t *s = ml_vmodel_site(m, site);
    if (!s || !s->src || !m->built) return 0;
    ml_vmodel_lock(m);
    const ml_histograms_t *h = ml_analysis_histograms(m->an);
    uint32_t n = 0;
    if (h) {
        uint64_t mask = kind == ML_VHIST_SIZE ? s->src->size_log2_mask : s->src->lifetime_log2_mask;
        uint32_t first = kind == ML_VHIST_SIZE ? h->size_first : 0;
        uint32_t last = kind == ML_VHIST_SIZE ? h->size_last : h->life_last;
        for (uint32_t k = first; k <= last && k < 64 && n < max; k++) {
            uint64_t count = kind == ML_VHIST_SIZE ? h->size_count[k] : h->life_count[k];
            bool mine = (mask >> k) & 1;
            if (!count && !mine) continue;
            uint64_t hi = k >= 63 ? UINT64_MAX - 1 : (1ull << k);
            uint64_t lo = k == 0 ? 0 : hi / 2;
            out[n++] = (ml_vbucket_t){lo, hi, count, mine};
        }
    }
    ml_vmodel_unlock(m);
    return n;
}

uint32_t ml_vmodel_nsuggestions(const ml_vmodel_t *m) {
    return m->nsugg_order;
}

const ml_vsuggestion_t *ml_vmodel_suggestion_at(const ml_vmodel_t *m, uint32_t i) {
    return i < m->nsugg_order ? &m->sugg[m->sugg_order[i]] : NULL;
}

const ml_vsuggestion_t *ml_vmodel_site_suggestion(const ml_vmodel_t *m, uint32_t site) {
    const ml_vsuggestion_t *best = NULL;
    for (uint32_t i = 0; i < m->nsugg; i++)
        if (m->sugg[i].site == site &&
            (!best || m->sugg[i].estimated_saving_bytes > best->estimated_saving_bytes))
            best = &m->sugg[i];
    return best;
}

/* ------------------------------------------------------------------------- */
/* Timeline and heap map                                                     */
/* ------------------------------------------------------------------------- */

uint32_t ml_vmodel_npoints(const ml_vmodel_t *m) {
    return m->npoints;
}
const ml_vpoint_t *ml_vmodel_point(const ml_vmodel_t *m, uint32_t i) {
    return i < m->npoints ? &m->points[i] : NULL;
}

uint64_t ml_vmodel_point_value(const ml_vpoint_t *p, ml_vseries_t s) {
    switch (s) {
    case ML_VSERIES_HEAP:
        return p->heap_bytes;
    case ML_VSERIES_RSS:
        return p->rss_bytes;
    case ML_VSERIES_MMAP:
        return p->mmap_bytes;
    case ML_VSERIES_GPU:
        return p->gpu_bytes;
    default:
        return 0;
    }
}

const char *ml_vmodel_series_name(ml_vseries_t s) {
    static const char *const n[] = {"heap", "RSS", "mmap", "GPU"};
    return s < ML_VSERIES_COUNT_ ? n[s] : "?";
}

static uint32_t shares_out(ml_vmodel_t *m, const ml_share_t *v, uint32_t n, ml_vlive_t *out,
                           uint32_t max) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n && k < max; i++) {
        if (v[i].id >= m->an_nsites) continue;
        out[k++] = (ml_vlive_t){m->sites[m->by_build[v[i].id]].id, v[i].bytes, v[i].blocks};
    }
    return k;
}

static int cmp_live(const void *a, const void *b) {
    const ml_vlive_t *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->site < y->site ? -1 : x->site > y->site;
}

uint32_t ml_vmodel_live_at(ml_vmodel_t *m, uint32_t time_ms, ml_vlive_t *out, uint32_t max,
                           uint32_t *as_of_ms) {
    const ml_vsummary_t *s = &m->sum;
    *as_of_ms = time_ms;
    if (!m->built || !max) return 0;
    /* Exact moments first: the peak (sites' bytes at the peak) and the end
     * (sites' live bytes); the snapshots in between. */
    bool at_end = m->npoints && time_ms >= m->points[m->npoints - 1].time_ms;
    if (time_ms == s->totals.peak_time_ms || at_end) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < m->nsites; i++) {
            const ml_vsite_t *v = &m->sites[i];
            uint64_t b = at_end ? v->live_bytes : v->peak_bytes;
            uint64_t n = at_end ? v->live_blocks : v->src ? v->src->peak_blocks : 0;
            if (!b) continue;
            ml_vlive_t l = {v->id, b, n};
            /* keep the `max` largest, sorted (max is a screenful) */
            if (k == max && cmp_live(&l, &out[k - 1]) >= 0) continue;
            uint32_t j = k < max ? k++ : max - 1;
            while (j > 0 && cmp_live(&l, &out[j - 1]) < 0) {
                out[j] = out[j - 1];
                j--;
            }
            out[j] = l;
        }
        *as_of_ms = at_end ? m->points[m->npoints - 1].time_ms : time_ms;
        return k;
    }
    const snap_t *best = NULL;
    for (uint32_t i = 0; i < m->tt.nsnaps && m->tt.snaps[i].time_ms <= time_ms; i++)
        best = &m->tt.snaps[i];
    if (!best) return 0;
    ml_share_t v[SNAP_STACKS];
    ml_vmodel_lock(m);
    size_t n = ml_analysis_shares_to_sites(m->an, best->stacks, best->n, v, SNAP_STACKS);
    ml_vmodel_unlock(m);
    *as_of_ms = best->time_ms;
    return shares_out(m, v, (uint32_t)n, out, max);
}

static ml_moment_t moment_of(ml_vmap_at_t at) {
    return at == ML_VMAP_PEAK    ? ML_MOMENT_PEAK
           : at == ML_VMAP_WORST ? ML_MOMENT_WORST
                                 : ML_MOMENT_END;
}

/* Whether the kept history session knows who pins the cells at the peak or
 * the worst moment: 1 yes, -1 no (none kept, or a closed moment). The
 * replay's thread built it, with the model's options, so that its sites are
 * the model's sites: nothing is built here, on the UI thread. */
static int hist_pins(ml_vmodel_t *m, ml_vmap_at_t at) {
    hist_t *h = &m->hist;
    if (!h->an || !h->imported || (at != ML_VMAP_PEAK && at != ML_VMAP_WORST)) return -1;
    int *known = &h->pins[at == ML_VMAP_WORST];
    if (*known) return *known;
    ml_share_t probe;
    *known = h->an_built > 0 &&
                     ml_analysis_sites_in_range(h->an, moment_of(at), 0, 0, &probe, 1) >= 0
                 ? 1
                 : -1;
    return *known;
}

/* Whether "who pins this cell" has an answer at a moment. A restored
 * snapshot keeps the peak's and the worst moment's layout, not their blocks
 * (ml_analysis_sites_in_range: -ENOTSUP), nor does a moment the analysis
 * closed to bound its memory; a finished history replay has the blocks
 * unless it closed the moment too. One probe per build. */
static bool moment_pins(ml_vmodel_t *m, ml_vmap_at_t at) {
    if (at != ML_VMAP_PEAK && at != ML_VMAP_WORST) return true;
    if (m->from_snapshot) return hist_pins(m, at) > 0;
    int i = at == ML_VMAP_WORST;
    if (m->pins_of[i] != m->nbuilds) {
        ml_share_t probe;
        ml_vmodel_lock(m);
        m->pins[i] = ml_analysis_sites_in_range(m->an, moment_of(at), 0, 0, &probe, 1) >= 0;
        ml_vmodel_unlock(m);
        m->pins_of[i] = m->nbuilds;
    }
    return m->pins[i];
}

/* Shares of the history session's sites as the model's sites: the same
 * stack, the same site (site_key), whatever each build numbered it. */
static uint32_t hist_shares_out(ml_vmodel_t *m, const ml_share_t *v, uint32_t n, ml_vlive_t *out,
                                uint32_t max) {
    size_t ns = 0;
    const ml_site_t *hs = ml_analysis_sites(m->hist.an, &ns);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n && k < max; i++) {
        if (v[i].id >= ns) continue;
        const idslot_t *e = site_ids_find(&m->ids, site_key(&hs[v[i].id]));
        if (e) out[k++] = (ml_vlive_t){e->id, v[i].bytes, v[i].blocks};
    }
    return k;
}

/* Merges the analysis' cells k at a time into at most ncells view cells; a
 * merged cell shows the average utilization of its cells that hold pages
 * (this is scaling a picture down, not a new measure). */
static int fill_cells(ml_vmodel_t *m, uint64_t base, uint64_t cell_bytes, const int8_t *c,
                      uint32_t nc, uint32_t ncells, ml_vheapmap_t *out) {
    if (!nc || !ncells) return -ENOENT;
    uint32_t k = (nc + ncells - 1) / ncells, n = (nc + k - 1) / k;
    ml_vcell_t *v = grow(m->cells, &m->cap_cells, n, sizeof *v);
    if (!v) return -ENOMEM;
    m->cells = v;
    for (uint32_t i = 0; i < n; i++) {
        int sum = 0, used = 0;
        for (uint32_t j = i * k; j < (i + 1) * k && j < nc; j++)
            if (c[j] >= 0) sum += c[j], used++;
        v[i] = (ml_vcell_t){base + (uint64_t)i * k * cell_bytes, (uint64_t)k * cell_bytes,
                            (int8_t)(used ? (sum + used / 2) / used : -1)};
    }
    out->ncells = n;
    out->cells = v;
    out->lo = base;
    out->hi = base + (uint64_t)nc * cell_bytes;
    out->valid = true;
    return 0;
}

int ml_vmodel_heapmap(ml_vmodel_t *m, ml_vmap_at_t at, uint32_t time_ms, uint32_t ncells,
                      ml_vheapmap_t *out) {
    memset(out, 0, sizeof *out);
    out->at = at;
    if (!m->built) return -ENOENT;
    if (at == ML_VMAP_CURSOR) {
        const mapsnap_t *best = NULL;
        for (uint32_t i = 0; i < m->tt.nmaps && m->tt.maps[i].time_ms <= time_ms; i++)
            best = &m->tt.maps[i];
        if (best) {
            out->time_ms = best->time_ms;
            out->frag = best->frag;
            return fill_cells(m, best->base, best->cell_bytes, best->cells, best->ncells, ncells,
                              out);
        }
        /* No snapshot before the cursor: the peak is the nearest we know. */
        out->at = at = ML_VMAP_PEAK;
    }
    /* The built results are only replaced by a refresh, which runs on this
     * thread: no lock needed to read them. */
    const ml_frag_t *f = ml_analysis_frag(m->an, moment_of(at));
    if (!f || !f->valid || !f->map_cells) return -ENOENT;
    out->time_ms = f->time_ms;
    out->frag = vfrag(f);
    out->sites_known = moment_pins(m, at);
    return fill_cells(m, f->map_base, f->map_cell_bytes, f->map_cells, f->map_ncells, ncells, out);
}

uint32_t ml_vmodel_cell_sites(ml_vmodel_t *m, ml_vmap_at_t at, uint64_t addr, uint64_t span,
                              ml_vlive_t *out, uint32_t max) {
    if (!m->built || at == ML_VMAP_CURSOR || !max) return 0;
    if (m->from_snapshot && at != ML_VMAP_END) {
        if (hist_pins(m, at) <= 0) return 0;
        ml_share_t v[64];
        int64_t n = ml_analysis_sites_in_range(m->hist.an, moment_of(at), addr, addr + span, v,
                                               max < 64 ? max : 64);
        return n > 0 ? hist_shares_out(m, v, (uint32_t)n, out, max) : 0;
    }
    ml_share_t v[64];
    ml_vmodel_lock(m);
    int64_t n =
        ml_analysis_sites_in_range(m->an, moment_of(at), addr, addr + span, v, max < 64 ? max : 64);
    ml_vmodel_unlock(m);
    return n > 0 ? shares_out(m, v, (uint32_t)n, out, max) : 0;
}

/* ------------------------------------------------------------------------- */
/* Refresh                                                                   */
/* ------------------------------------------------------------------------- */

static void *advice_main(void *arg) {
    ml_vmodel_t *m = arg;
    ml_advisor_opts_t o = {.threads = 0, .analysis = m->an, .budget_bytes = m->adv_budget_bytes,
                           .budget_ops = m->adv_budget_ops};
    /* The advice a report saved in the trace when it is there (no replay),
     * else a fresh run; the viewer reads the trace and never writes it. */
    char warn[256];
    int rc = ml_advisor_run_cached(m->path, &o, ML_ADVICE_CACHE_READ, &m->advice, m->adv_error,
                                   sizeof m->adv_error, warn, sizeof warn);
    atomic_store(&m->adv_state, rc < 0 ? ADV_FAILED : ADV_DONE);
    return NULL;
}

static void start_advice(ml_vmodel_t *m) {
    atomic_store(&m->adv_state, ADV_RUNNING);
    if (pthread_create(&m->adv_thread, NULL, advice_main, m) != 0) {
        snprintf(m->adv_error, sizeof m->adv_error, "cannot start a thread");
        atomic_store(&m->adv_state, ADV_OFF);
    }
}

static ml_vadvice_t advice_state(const ml_vmodel_t *m) {
    switch (atomic_load(&m->adv_state)) {
    case ADV_RUNNING:
        return ML_VADVICE_RUNNING;
    case ADV_DONE:
        return m->adv_imported ? ML_VADVICE_DONE : ML_VADVICE_RUNNING;
    case ADV_FAILED:
        return ML_VADVICE_FAILED;
    case ADV_OFF:
        return ML_VADVICE_OFF;
    default:
        return ML_VADVICE_PENDING;
    }
}

bool ml_vmodel_poll(ml_vmodel_t *m) {
    bool redraw = false;
    if (hist_poll(m)) {
        const hist_t *h = &m->hist;
        char b1[16], b2[16];
        if (atomic_load(&h->state) == HIST_BUDGET)
            snprintf(m->travel_why, sizeof m->travel_why,
                     "the replay used %s, over its %s budget (--history-mb); freed",
                     ml_fmt_bytes(atomic_load(&h->used), b1, sizeof b1),
                     ml_fmt_bytes(m->hist_budget, b2, sizeof b2));
        else
            snprintf(m->travel_why, sizeof m->travel_why, "the history replay stopped: %s", h->why);
        redraw = true;
    } else if (m->hist.started && !m->hist.imported) {
        unsigned pm = atomic_load(&m->hist.permille);
        if (pm != m->hist_shown_pm) {
            m->hist_shown_pm = pm;
            redraw = true;
        }
    }
    return adv_poll(m) || redraw;
}

static bool adv_poll(ml_vmodel_t *m) {
    int st = atomic_load(&m->adv_state);
    if ((st == ADV_DONE || st == ADV_FAILED) && !m->adv_joined) {
        pthread_join(m->adv_thread, NULL);
        m->adv_joined = true;
    }
    if (st == ADV_DONE && !m->adv_imported) {
        m->adv_imported = true;
        m->nsugg = 0;
        src_advice(m);
        m->sum.nsuggestions = m->nsugg;
        m->sum.advice = ML_VADVICE_DONE;
        m->generation++;
        reorder_tree(m, false); /* new suggestions; the sites and their tree stay */
        return true;
    }
    if (st == ADV_FAILED && m->sum.advice != ML_VADVICE_FAILED) {
        m->sum.advice = ML_VADVICE_FAILED;
        m->generation++;
        return true;
    }
    return false;
}

bool ml_vmodel_busy(const ml_vmodel_t *m) {
    if (m->hist.started && !m->hist.imported) return true;
    return atomic_load(&m->adv_state) == ADV_RUNNING ||
           (atomic_load(&m->adv_state) == ADV_DONE && !m->adv_imported);
}

const char *ml_vmodel_advice_error(const ml_vmodel_t *m) {
    return m->adv_error;
}

void ml_vmodel_set_advisor_budget(ml_vmodel_t *m, uint64_t bytes, uint64_t ops) {
    m->adv_budget_bytes = bytes;
    m->adv_budget_ops = ops;
}

const char *ml_vmodel_advice_skipped(const ml_vmodel_t *m, size_t i) {
    return m->adv_imported ? ml_advice_skipped(m->advice, i) : NULL;
}

void ml_vmodel_wait(ml_vmodel_t *m) {
    if (m->hist.started && !m->hist.joined) {
        pthread_join(m->hist.thread, NULL);
        m->hist.joined = true;
    }
    int st = atomic_load(&m->adv_state);
    if ((st == ADV_RUNNING || st == ADV_DONE || st == ADV_FAILED) && !m->adv_joined) {
        pthread_join(m->adv_thread, NULL);
        m->adv_joined = true;
    }
    ml_vmodel_poll(m);
}

int ml_vmodel_refresh(ml_vmodel_t *m) {
    ml_vsummary_t s;
    memset(&s, 0, sizeof s);
    ml_vmodel_lock(m);
    uint64_t t0 = mono_ms();
    /* Post-mortem the whole analysis is built once, at the end; while
     * loading the views show the running totals. Live, a refresh builds when
     * records came in since the last build (the analysis reuses its symbol
     * cache); once the program has ended the data stays put. */
    int rc = 0;
    const ml_totals_t *t = ml_analysis_totals(m->an);
    if (!m->loading && (!m->built || t->records != m->built_records)) {
        rc = src_build(m);
        m->built_records = t->records;
    }
    bool final = !m->loading && (!m->live || m->live_state != ML_VPROC_RUNNING);
    if (m->live && t->last_time_ms >= m->tt.last_snap_ms + SNAP_EVERY_MS) {
        src_snapshot(m, t->last_time_ms);
        if (m->built) src_mapsnap(m);
    } else if (!m->loading && !m->live && m->built) {
        src_mapsnap(m); /* the end, so the cursor map reaches it */
    }
    src_summary(m, &s);
    if (rc == 0) rc = src_sites(m);
    if (rc == 0) rc = src_suggestions(m);
    if (rc == 0) rc = src_timeline(m);
    if (rc == 0) rc = src_gpu(m);
    if (m->live) {
        s.state = m->live_state;
        s.status = m->live_status;
    } else if (m->loading) {
        s.state = ML_VPROC_LOADING;
    } else if (s.totals.complete) {
        s.state = s.totals.end.status_kind == ML_END_EXITED     ? ML_VPROC_EXITED
                  : s.totals.end.status_kind == ML_END_SIGNALED ? ML_VPROC_SIGNALED
                                                                : ML_VPROC_ENDED;
        s.status = s.totals.end.status;
    } else {
        s.state = ML_VPROC_TRUNCATED;
    }
    m->refresh_ms = (uint32_t)(mono_ms() - t0);
    ml_vmodel_unlock(m);
    s.nsites = m->nsites;
    s.nsuggestions = m->nsugg;
    /* The data is final and built: the advisor may read the session, which
     * no build changes any more. */
    if (final && rc == 0 && m->built && m->path[0] && atomic_load(&m->adv_state) == ADV_IDLE)
        start_advice(m);
    s.advice = advice_state(m);
    if (memcmp(&s, &m->sum, sizeof s) != 0) m->generation++;
    m->sum = s;
    reorder(m);
    return rc;
}

const char *ml_vmodel_build_error(const ml_vmodel_t *m) {
    return m->build_error;
}
uint32_t ml_vmodel_refresh_cost_ms(const ml_vmodel_t *m) {
    return m->refresh_ms;
}

/* ------------------------------------------------------------------------- */
/* Call tree                                                                 */
/* ------------------------------------------------------------------------- */

/* The tree itself comes from the analysis (src_calltree); the model keeps
 * which nodes are expanded, by a hash of their path so that expansion
 * survives live refreshes, and lists the visible rows with children ordered
 * by the sort key. The analysis' root ("all") is not a row: the rows start
 * with its children, at depth 0. */

static bool keyset_has(const keyset_t *k, uint64_t key) {
    if (!k->cap) return false;
    for (uint32_t i = (uint32_t)key & (k->cap - 1);; i = (i + 1) & (k->cap - 1)) {
        if (k->keys[i] == key) return true;
        if (!k->keys[i]) return false;
    }
}

static void keyset_set(keyset_t *k, uint64_t key, bool on) {
    if (on && (k->count + 1) * 2 > k->cap) {
        uint32_t ncap = k->cap ? k->cap * 2 : 256;
        uint64_t *n = calloc(ncap, sizeof *n);
        if (!n) return;
        for (uint32_t i = 0; i < k->cap; i++) {
            if (!k->keys[i]) continue;
            uint32_t j = (uint32_t)k->keys[i] & (ncap - 1);
            while (n[j])
                j = (j + 1) & (ncap - 1);
            n[j] = k->keys[i];
        }
        free(k->keys);
        k->keys = n;
        k->cap = ncap;
    }
    if (!k->cap) return;
    uint32_t i = (uint32_t)key & (k->cap - 1);
    while (k->keys[i] && k->keys[i] != key)
        i = (i + 1) & (k->cap - 1);
    if (on && !k->keys[i]) {
        k->keys[i] = key;
        k->count++;
    } else if (!on && k->keys[i]) {
        /* Re-insert the rest of the probe run so later keys stay reachable. */
        k->keys[i] = 0;
        k->count--;
        for (uint32_t j = (i + 1) & (k->cap - 1); k->keys[j]; j = (j + 1) & (k->cap - 1)) {
            uint64_t v = k->keys[j];
            k->keys[j] = 0;
            k->count--;
            keyset_set(k, v, true);
        }
    }
}

/* A node's identity along its path: the analysis' merge key (function,
 * file, module), as text, so that it is the same in every build. */
static uint64_t frame_ident(const ml_frame_t *f) {
    return hash_mix(hash_mix(hash_str(f->function), hash_str(f->file)), hash_str(f->module));
}

static void tree_build(ml_vmodel_t *m) {
    free(m->own_nodes);
    free(m->node_key);
    m->own_nodes = NULL;
    m->nodes = NULL;
    m->node_key = NULL;
    m->nnodes = 0;
    ml_vmodel_lock(m);
    int64_t n = src_calltree(m);
    ml_vmodel_unlock(m);
    if (n <= 0) return;
    m->node_key = malloc((size_t)n * sizeof *m->node_key);
    if (!m->node_key) {
        free(m->own_nodes);
        m->own_nodes = NULL;
        m->nodes = NULL;
        return;
    }
    /* Parents come before their children in the node array. */
    m->node_key[0] = m->bottom_up ? 0xb0ull : 0x70ull;
    for (int64_t i = 1; i < n; i++) {
        if (i % (16 * PROGRESS_EVERY) == 0) progress(m, "Indexing the call tree", (uint64_t)i, (uint64_t)n);
        const ml_calltree_node_t *c = &m->nodes[i];
        uint64_t k = hash_mix(m->node_key[c->parent], frame_ident(c->frame));
        m->node_key[i] = k ? k : 1;
    }
    m->nnodes = n;
}

static int cmp_nodes(const void *a, const void *b) {
    const ml_calltree_node_t *x = &sort_model->nodes[*(const int32_t *)a];
    const ml_calltree_node_t *y = &sort_model->nodes[*(const int32_t *)b];
    uint64_t cx = x->incl[sort_model->sort], cy = y->incl[sort_model->sort];
    if (cx != cy) return cx > cy ? -1 : 1;
    return *(const int32_t *)a < *(const int32_t *)b ? -1 : 1;
}

static void tree_emit(ml_vmodel_t *m, int32_t first) {
    uint32_t n = 0;
    for (int32_t c = first; c >= 0; c = m->nodes[c].next_sibling)
        n++;
    if (!n) return;
    int32_t *kids = malloc(n * sizeof *kids);
    if (!kids) return;
    n = 0;
    for (int32_t c = first; c >= 0; c = m->nodes[c].next_sibling)
        kids[n++] = c;
    sort_model = m;
    qsort(kids, n, sizeof *kids, cmp_nodes);
    for (uint32_t i = 0; i < n; i++) {
        const ml_calltree_node_t *t = &m->nodes[kids[i]];
        ml_vtree_row_t *r = grow(m->rows, &m->cap_rows, m->nrows + 1, sizeof *r);
        if (!r) break;
        m->rows = r;
        if (m->nrows % (16 * PROGRESS_EVERY) == 0 && m->nrows)
            progress(m, "Listing the call tree's rows", m->nrows, (uint64_t)m->nnodes);
        r = &m->rows[m->nrows++];
        r->node = (uint32_t)kids[i];
        r->depth = t->depth - 1;
        r->has_children = t->first_child >= 0;
        r->expanded = r->has_children && keyset_has(&m->expanded, m->node_key[kids[i]]);
        r->frame = t->frame;
        memcpy(r->incl, t->incl, sizeof r->incl);
        memcpy(r->self, t->self, sizeof r->self);
        if (r->expanded) tree_emit(m, t->first_child);
    }
    free(kids);
}

static void tree_rows(ml_vmodel_t *m) {
    m->nrows = 0;
    if (m->nnodes > 0) {
        progress(m, "Listing the call tree's rows", 0, (uint64_t)m->nnodes);
        tree_emit(m, m->nodes[0].first_child);
    }
}

static void tree_update(ml_vmodel_t *m) {
    if (m->tree_dirty) {
        tree_build(m);
        m->tree_dirty = false;
    } else if (!m->rows_dirty) {
        return;
    }
    tree_rows(m);
    m->rows_dirty = false;
}

void ml_vmodel_tree_set_mode(ml_vmodel_t *m, bool bottom_up) {
    if (m->bottom_up == bottom_up) return;
    m->bottom_up = bottom_up;
    m->tree_dirty = true;
}

bool ml_vmodel_tree_bottom_up(const ml_vmodel_t *m) {
    return m->bottom_up;
}

uint32_t ml_vmodel_tree_nrows(ml_vmodel_t *m) {
    tree_update(m);
    return m->nrows;
}

const ml_vtree_row_t *ml_vmodel_tree_row(ml_vmodel_t *m, uint32_t i) {
    tree_update(m);
    return i < m->nrows ? &m->rows[i] : NULL;
}

static void expand_all(ml_vmodel_t *m, int32_t node, bool on, uint64_t *done) {
    if (++*done % (16 * PROGRESS_EVERY) == 0)
        progress(m, on ? "Expanding the subtree" : "Collapsing the subtree", *done,
                 (uint64_t)m->nnodes);
    keyset_set(&m->expanded, m->node_key[node], on);
    for (int32_t c = m->nodes[node].first_child; c >= 0; c = m->nodes[c].next_sibling)
        expand_all(m, c, on, done);
}

void ml_vmodel_tree_toggle(ml_vmodel_t *m, uint32_t row, bool expand, bool all) {
    tree_update(m);
    if (row >= m->nrows) return;
    int32_t node = (int32_t)m->rows[row].node;
    if (all) {
        uint64_t done = 0;
        progress(m, expand ? "Expanding the subtree" : "Collapsing the subtree", 0,
                 (uint64_t)m->nnodes);
        expand_all(m, node, expand, &done);
    } else {
        keyset_set(&m->expanded, m->node_key[node], expand);
    }
    /* The node array stays; only the visible rows change. */
    tree_rows(m);
}

uint32_t ml_vmodel_tree_parent_row(ml_vmodel_t *m, uint32_t row) {
    tree_update(m);
    if (row >= m->nrows) return row;
    int32_t parent = m->nodes[m->rows[row].node].parent;
    if (parent <= 0) return row; /* a child of the root: at the top */
    for (uint32_t i = row; i-- > 0;)
        if ((int32_t)m->rows[i].node == parent) return i;
    return row;
}
