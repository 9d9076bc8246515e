/* merge.c - many processes in one report (ml_merge.h): the sites of several
 * built sessions merged by the call tree's key, with each process's share.
 *
 * Each added session's frame strings are interned in the merge's own string
 * table, so that a frame's key (function, file, module) is three pointers
 * and the sites of every process can go through ml_calltree_build(), which
 * compares frames by their interned strings, as the sites of one build.
 */
#define _GNU_SOURCE /* vasprintf */
#include "analysis_internal.h"
#include "ml_gpu.h"
#include "ml_merge.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* State                                                                     */
/* ------------------------------------------------------------------------- */

typedef struct {
    ml_site_t site;            /* the sums; site.id: index after the final sort */
    uint32_t nshares;
    ml_frame_t *frames;        /* owned: the first contributor's frames, strings interned */
    ml_merge_share_t *shares;  /* owned, by process index (each process adds once, in order) */
    uint32_t cap;
    uint32_t orig;             /* index before the final sort (leak groups refer to it) */
    uint32_t holder;           /* the process (index at add time) whose frames it holds */
    uint64_t hash;
} msite_t;

/* A leak group as a process had it, with its site's merged index. */
typedef struct {
    uint32_t site;
    ml_leak_kind_t kind;
    bool suppressed;
    uint64_t bytes, blocks;
} rawgroup_t;

/* The interned copy of a string of the process being added, by the
 * string's address (see frame_str). */
#define MEMO_SLOTS 4096
typedef struct {
    const char *src, *dst;
    uint32_t gen; /* the ml_merge_add that filled it; 0 never */
} memo_t;

struct ml_merge_s {
    /* interned strings: open addressing, NULL empty */
    char **strs;
    size_t nstrs, strs_cap;
    memo_t memo[MEMO_SLOTS];
    uint32_t memo_gen;

    ml_merge_process_t *procs;
    size_t nprocs, procs_cap;

    msite_t *sites;
    size_t nsites, sites_cap;
    int32_t *slots;            /* key hash -> index in sites, -1 empty */
    size_t slots_cap;

    rawgroup_t *groups;
    size_t ngroups, groups_cap;

    ml_merge_totals_t tot;
    ml_histograms_t hist;
    bool hist_any;

    ml_merge_gpu_device_t *gpu;
    size_t ngpu, gpu_cap;

    ml_thread_stats_t *threads;
    uint32_t *thread_proc;
    size_t nthreads, threads_cap, thread_proc_cap;

    char **warnings;
    uint32_t *warning_proc;    /* the process (index at add time) of each warning */
    size_t nwarnings, warnings_cap, warning_proc_cap;

    /* after finish */
    bool finished;
    ml_leak_group_t *leak_groups;
    ml_site_t *flat;           /* the sorted sites, contiguous, for the call tree */
    ml_calltree_node_t *flame;
    size_t nflame;
    size_t ntree; /* the whole call tree's nodes, before the pruning */
};

/* Grows *arr (elements of `elem` bytes, capacity *cap) to hold need. */
static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *p = realloc(*arr, c * elem);
    if (!p) return -ENOMEM;
    memset((char *)p + *cap * elem, 0, (c - *cap) * elem);
    *arr = p;
    *cap = c;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Strings                                                                   */
/* ------------------------------------------------------------------------- */

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The merge's copy of s (NULL stays NULL); *oom set when memory ran out. */
static const char *intern(ml_merge_t *m, const char *s, bool *oom) {
    if (!s) return NULL;
    if ((m->nstrs + 1) * 2 > m->strs_cap) {
        size_t cap = m->strs_cap ? m->strs_cap * 2 : 1024;
        char **t = calloc(cap, sizeof *t);
        if (!t) {
            *oom = true;
            return NULL;
        }
        for (size_t i = 0; i < m->strs_cap; i++) {
            if (!m->strs[i]) continue;
            size_t j = str_hash(m->strs[i]) & (cap - 1);
            while (t[j]) j = (j + 1) & (cap - 1);
            t[j] = m->strs[i];
        }
        free(m->strs);
        m->strs = t;
        m->strs_cap = cap;
    }
    size_t j = str_hash(s) & (m->strs_cap - 1);
    for (; m->strs[j]; j = (j + 1) & (m->strs_cap - 1))
        if (!strcmp(m->strs[j], s)) return m->strs[j];
    char *c = strdup(s);
    if (!c) {
        *oom = true;
        return NULL;
    }
    m->strs[j] = c;
    m->nstrs++;
    return c;
}

/* intern() of a frame's string. A process' frames come from its own
 * symbolizer, which interned them: the same function, file or module is
 * the same address in every site of the process, and within one
 * ml_merge_add an address always holds the same string. So the merge's
 * copy is remembered by address, and only a new address is hashed and
 * compared. On a folder of 976 traces of a build (make, cc1, as), hashing
 * and comparing every frame's three strings was a third of the report's
 * time. */
static const char *frame_str(ml_merge_t *m, const char *s, bool *oom) {
    if (!s) return NULL;
    memo_t *e = &m->memo[ml_map_hash((uint64_t)(uintptr_t)s) & (MEMO_SLOTS - 1)];
    if (e->gen == m->memo_gen && e->src == s) return e->dst;
    const char *d = intern(m, s, oom);
    if (d) *e = (memo_t){.src = s, .dst = d, .gen = m->memo_gen};
    return d;
}

/* ------------------------------------------------------------------------- */
/* Sites and their key                                                       */
/* ------------------------------------------------------------------------- */

/* The key of interned frames: (function, file, module) of each frame. */
static uint64_t frames_hash(const ml_frame_t *f, uint32_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (uint32_t i = 0; i < n; i++) {
        h = ml_map_hash(h ^ (uint64_t)(uintptr_t)f[i].function);
        h = ml_map_hash(h ^ (uint64_t)(uintptr_t)f[i].file * 3);
        h = ml_map_hash(h ^ (uint64_t)(uintptr_t)f[i].module * 5);
    }
    return h;
}

static bool same_frames(const ml_frame_t *a, uint32_t na, const ml_frame_t *b, uint32_t nb) {
    if (na != nb) return false;
    for (uint32_t i = 0; i < na; i++)
        if (a[i].function != b[i].function || a[i].file != b[i].file || a[i].module != b[i].module)
            return false;
    return true;
}

static int grow_slots(ml_merge_t *m) {
    size_t cap = m->slots_cap ? m->slots_cap * 2 : 1024;
    int32_t *s = malloc(cap * sizeof *s);
    if (!s) return -ENOMEM;
    memset(s, 0xff, cap * sizeof *s);
    for (size_t i = 0; i < m->nsites; i++) {
        size_t j = m->sites[i].hash & (cap - 1);
        while (s[j] >= 0) j = (j + 1) & (cap - 1);
        s[j] = (int32_t)i;
    }
    free(m->slots);
    m->slots = s;
    m->slots_cap = cap;
    return 0;
}

static int cmp_proc(const void *x, const void *y);

/* The merged site of interned frames f[0..n) of process pi; f is taken over
 * (kept, or freed). A site holds the frames of the first process, in the
 * final order of the processes, that has it, whatever order they were added
 * in. Returns its index, or -1 out of memory. */
static int32_t site_for(ml_merge_t *m, ml_frame_t *f, uint32_t n, const ml_site_t *src, uint32_t pi) {
    if ((m->nsites + 1) * 2 > m->slots_cap && grow_slots(m) < 0) return -1;
    uint64_t h = frames_hash(f, n);
    size_t j = h & (m->slots_cap - 1);
    for (; m->slots[j] >= 0; j = (j + 1) & (m->slots_cap - 1)) {
        msite_t *s = &m->sites[m->slots[j]];
        if (s->hash == h && same_frames(s->frames, s->site.nframes, f, n)) {
            if (s->holder != pi && cmp_proc(&m->procs[pi], &m->procs[s->holder]) < 0) {
                free(s->frames);
                s->frames = f;
                s->site.headline = src->headline < n ? src->headline : 0;
                s->holder = pi;
            } else {
                free(f);
            }
            return m->slots[j];
        }
    }
    if (m->nsites >= INT32_MAX || grow((void **)&m->sites, &m->sites_cap, m->nsites + 1, sizeof *m->sites) < 0)
        return -1;
    int32_t id = (int32_t)m->nsites++;
    msite_t *s = &m->sites[id];
    memset(s, 0, sizeof *s);
    s->frames = f;
    s->hash = h;
    s->orig = (uint32_t)id;
    s->holder = pi;
    s->site.nframes = n;
    s->site.headline = src->headline < n ? src->headline : 0;
    s->site.min_size = UINT64_MAX;
    m->slots[j] = id;
    return id;
}

/* Adds a process's site into merged site `ms`. */
static int add_site(ml_merge_t *m, msite_t *ms, const ml_site_t *src, uint32_t proc, bool *oom) {
    ml_site_t *d = &ms->site;
    d->stacks += src->stacks;
    d->alloc_calls += src->alloc_calls;
    d->bytes_allocated += src->bytes_allocated;
    d->temporary_allocs += src->temporary_allocs;
    d->realloc_calls += src->realloc_calls;
    d->freed_blocks += src->freed_blocks;
    d->peak_bytes += src->peak_bytes;
    d->peak_blocks += src->peak_blocks;
    d->leaked_bytes += src->leaked_bytes;
    d->leaked_blocks += src->leaked_blocks;
    for (int k = 0; k < ML_LEAK_KINDS; k++) {
        d->leaked_kind_bytes[k] += src->leaked_kind_bytes[k];
        d->leaked_kind_blocks[k] += src->leaked_kind_blocks[k];
    }
    if (src->alloc_calls && src->min_size < d->min_size) d->min_size = src->min_size;
    if (src->max_size > d->max_size) d->max_size = src->max_size;
    d->size_log2_mask |= src->size_log2_mask;
    d->lifetime_ms_sum += src->lifetime_ms_sum;
    if (src->lifetime_ms_max > d->lifetime_ms_max) d->lifetime_ms_max = src->lifetime_ms_max;
    d->lifetime_log2_mask |= src->lifetime_log2_mask;
    d->pinned_pages += src->pinned_pages;
    d->sparse_pinned_pages += src->sparse_pinned_pages;
    if (src->suppressed && !d->suppressed) {
        d->suppressed = true;
        d->suppressed_by = intern(m, src->suppressed_by, oom);
    }
    /* Processes are added in order, so this process's share is the last or new. */
    ml_merge_share_t *sh = ms->nshares ? &ms->shares[ms->nshares - 1] : NULL;
    if (!sh || sh->process != proc) {
        if (ms->nshares == ms->cap) {
            uint32_t cap = ms->cap ? ms->cap * 2 : 2;
            ml_merge_share_t *v = realloc(ms->shares, cap * sizeof *v);
            if (!v) return -ENOMEM;
            ms->shares = v;
            ms->cap = cap;
        }
        sh = &ms->shares[ms->nshares++];
        memset(sh, 0, sizeof *sh);
        sh->process = proc;
    }
    sh->sites++;
    sh->alloc_calls += src->alloc_calls;
    sh->bytes_allocated += src->bytes_allocated;
    sh->temporary_allocs += src->temporary_allocs;
    sh->peak_bytes += src->peak_bytes;
    sh->peak_blocks += src->peak_blocks;
    sh->leaked_bytes += src->leaked_bytes;
    sh->leaked_blocks += src->leaked_blocks;
    sh->reachable_bytes += src->leaked_kind_bytes[ML_LEAK_REACHABLE];
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Adding a process                                                          */
/* ------------------------------------------------------------------------- */

static void sum_totals(ml_totals_t *d, const ml_totals_t *t, bool first) {
    d->alloc_calls += t->alloc_calls;
    d->free_calls += t->free_calls;
    d->realloc_calls += t->realloc_calls;
    d->bytes_allocated += t->bytes_allocated;
    d->temporary_allocs += t->temporary_allocs;
    d->mmap_calls += t->mmap_calls;
    d->munmap_calls += t->munmap_calls;
    d->heap_bytes += t->heap_bytes;
    d->heap_blocks += t->heap_blocks;
    d->peak_bytes += t->peak_bytes;
    d->peak_blocks += t->peak_blocks;
    d->mmap_bytes += t->mmap_bytes;
    d->peak_mmap_bytes += t->peak_mmap_bytes;
    d->alloc_mmap_calls += t->alloc_mmap_calls;
    d->alloc_munmap_calls += t->alloc_munmap_calls;
    d->alloc_mmap_bytes += t->alloc_mmap_bytes;
    d->peak_alloc_mmap_bytes += t->peak_alloc_mmap_bytes;
    d->unknown_frees += t->unknown_frees;
    for (int k = 0; k < ML_KIND_COUNT_; k++) d->calls_by_kind[k] += t->calls_by_kind[k];
    if (t->last_time_ms > d->last_time_ms) d->last_time_ms = t->last_time_ms;
    if (t->sample_bytes > d->sample_bytes) d->sample_bytes = t->sample_bytes;
    d->complete = first ? t->complete : d->complete && t->complete;
    d->exited = first ? t->exited : d->exited && t->exited;
    d->truncated = d->truncated || t->truncated;
    d->records += t->records;
    d->rss_bytes += t->rss_bytes;
    d->peak_rss_bytes += t->peak_rss_bytes;
    if (t->rss_interval_ms > d->rss_interval_ms) d->rss_interval_ms = t->rss_interval_ms;
    d->gpu_bytes += t->gpu_bytes;
    d->peak_gpu_bytes += t->peak_gpu_bytes;
    /* The high-water marks sum only when every process has one. */
    if (first || d->hwm_rss_source) {
        d->hwm_rss_source = t->hwm_rss_source ? t->hwm_rss_source : ML_HWM_NONE;
        d->hwm_rss_bytes = t->hwm_rss_source ? d->hwm_rss_bytes + t->hwm_rss_bytes : 0;
    }
    /* The end record's loss counters, summed: the gates read them. */
    d->end.lost_in_crash += t->end.lost_in_crash;
    d->end.lost_dead_collector += t->end.lost_dead_collector;
    d->end.truncated_stacks += t->end.truncated_stacks;
    d->end.ring_waits += t->end.ring_waits;
}

static void sum_leaks(ml_leaks_t *d, const ml_leaks_t *L, bool first) {
    d->bytes += L->bytes;
    d->blocks += L->blocks;
    for (int k = 0; k < ML_LEAK_KINDS; k++) {
        d->kind_bytes[k] += L->kind_bytes[k];
        d->kind_blocks[k] += L->kind_blocks[k];
    }
    d->suppressed_bytes += L->suppressed_bytes;
    d->suppressed_blocks += L->suppressed_blocks;
    d->lost_bytes += L->lost_bytes;
    d->lost_blocks += L->lost_blocks;
    d->gate_bytes += L->gate_bytes;
    d->scanned = first ? L->scanned : d->scanned && L->scanned;
    if (!d->scan_status) d->scan_status = L->scan_status;
    d->scan_root_bytes += L->scan_root_bytes;
    d->scan_heap_bytes += L->scan_heap_bytes;
    d->scan_duration_us += L->scan_duration_us;
    d->unscanned_blocks += L->unscanned_blocks;
}

static void sum_hist(ml_merge_t *m, const ml_histograms_t *h, bool allocated) {
    ml_histograms_t *d = &m->hist;
    for (int k = 0; k < 64; k++) {
        d->size_count[k] += h->size_count[k];
        d->size_bytes[k] += h->size_bytes[k];
        d->life_count[k] += h->life_count[k];
    }
    d->live_at_end += h->live_at_end;
    if (h->life_last > d->life_last) d->life_last = h->life_last;
    if (!allocated) return; /* its size range is empty */
    if (!m->hist_any || h->size_first < d->size_first) d->size_first = h->size_first;
    if (!m->hist_any || h->size_last > d->size_last) d->size_last = h->size_last;
    m->hist_any = true;
}

static int add_warning(ml_merge_t *m, uint32_t proc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int add_warning(ml_merge_t *m, uint32_t proc, const char *fmt, ...) {
    if (grow((void **)&m->warnings, &m->warnings_cap, m->nwarnings + 1, sizeof *m->warnings) < 0 ||
        grow((void **)&m->warning_proc, &m->warning_proc_cap, m->nwarnings + 1, sizeof *m->warning_proc) < 0)
        return -ENOMEM;
    m->warning_proc[m->nwarnings] = proc;
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&m->warnings[m->nwarnings], fmt, ap);
    va_end(ap);
    if (rc < 0) return -ENOMEM;
    m->nwarnings++;
    return 0;
}

/* A process's GPU device, summed into the merge's device of that ordinal
 * (kept in ascending ordinal order). */
static int add_gpu(ml_merge_t *m, const ml_gpu_device_t *dev) {
    size_t i = 0;
    while (i < m->ngpu && m->gpu[i].device < dev->device) i++;
    if (i == m->ngpu || m->gpu[i].device != dev->device) {
        if (grow((void **)&m->gpu, &m->gpu_cap, m->ngpu + 1, sizeof *m->gpu) < 0) return -ENOMEM;
        memmove(&m->gpu[i + 1], &m->gpu[i], (m->ngpu - i) * sizeof *m->gpu);
        m->gpu[i] = (ml_merge_gpu_device_t){.device = dev->device};
        m->ngpu++;
    }
    ml_merge_gpu_device_t *d = &m->gpu[i];
    d->processes++;
    d->peak_bytes += dev->peak_bytes;
    if (dev->peak_bytes > d->max_process_peak_bytes) d->max_process_peak_bytes = dev->peak_bytes;
    d->leaked_bytes += dev->leaked_bytes;
    d->alloc_calls += dev->alloc_calls;
    d->free_calls += dev->free_calls;
    return 0;
}

int ml_merge_new(ml_merge_t **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return -ENOMEM;
    (*out)->hist.size_first = 3;
    (*out)->hist.size_last = 3;
    return 0;
}

int ml_merge_add(ml_merge_t *m, const ml_analysis_t *a, const char *trace_path, uint64_t trace_size) {
    if (m->finished) return -EINVAL;
    bool oom = false;
    if (grow((void **)&m->procs, &m->procs_cap, m->nprocs + 1, sizeof *m->procs) < 0) return -ENOMEM;
    uint32_t pi = (uint32_t)m->nprocs;
    bool first = pi == 0;
    if (++m->memo_gen == 0) { /* after 2^32 processes: forget every address */
        memset(m->memo, 0, sizeof m->memo);
        m->memo_gen = 1;
    }
    const ml_process_info_t *p = ml_analysis_process(a);
    const ml_totals_t *t = ml_analysis_totals(a);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    ml_merge_process_t *P = &m->procs[pi];
    memset(P, 0, sizeof *P);
    P->index = pi;
    P->pid = p->pid;
    P->ppid = p->ppid;
    P->exe = intern(m, p->exe ? p->exe : "", &oom);
    P->trace_path = intern(m, trace_path ? trace_path : "", &oom);
    P->parent_trace = intern(m, p->parent_trace ? p->parent_trace : "", &oom);
    P->start_realtime_ns = p->start_realtime_ns;
    const char **argv = p->argc ? calloc(p->argc, sizeof *argv) : NULL;
    if (p->argc && !argv) return -ENOMEM;
    for (uint32_t i = 0; i < p->argc; i++) argv[i] = intern(m, p->argv[i], &oom);
    P->argv = argv;
    P->argc = p->argc;
    m->nprocs++; /* from here the process owns argv, whatever fails below */
    P->totals = *t;
    P->leaked_bytes = L->lost_bytes;
    P->leaked_blocks = L->lost_blocks;
    P->reachable_bytes = L->kind_bytes[ML_LEAK_REACHABLE];
    P->reachable_blocks = L->kind_blocks[ML_LEAK_REACHABLE];
    P->live_bytes = L->bytes;
    P->live_blocks = L->blocks;
    P->gate_bytes = L->gate_bytes;
    P->scanned = L->scanned;
    P->trace_size = trace_size;
    const ml_gpu_t *g = ml_analysis_gpu(a);
    for (size_t d = 0; d < ml_gpu_device_count(g); d++) {
        const ml_gpu_device_t *dev = ml_gpu_device(g, d);
        P->gpu_peak_bytes += dev->peak_bytes;
        P->gpu_leaked_bytes += dev->leaked_bytes;
        if (add_gpu(m, dev) < 0) return -ENOMEM;
    }

    sum_totals(&m->tot.sum, t, first);
    sum_leaks(&m->tot.leaks, L, first);
    if (first || t->peak_bytes > m->tot.max_process_peak_bytes) {
        m->tot.max_process_peak_bytes = t->peak_bytes;
        m->tot.max_process = pi;
    }
    if (t->sample_bytes) m->tot.sampled = true;
    sum_hist(m, ml_analysis_histograms(a), t->alloc_calls != 0);

    /* Sites: intern their frames, find or make the merged site. */
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    P->sites = (uint32_t)n;
    int32_t *map = n ? malloc(n * sizeof *map) : NULL;
    if (n && !map) return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        ml_frame_t *f = s[i].nframes ? malloc(s[i].nframes * sizeof *f) : NULL;
        if (s[i].nframes && !f) {
            rc = -ENOMEM;
            break;
        }
        for (uint32_t k = 0; k < s[i].nframes; k++) {
            f[k] = s[i].frames[k];
            /* Code in no module (a JIT's) lies at another address in each
             * process: "[?]", as diff keys it, so that its sites merge. */
            if (ml__frame_in_no_module(&f[k])) f[k].function = "[?]";
            f[k].function = frame_str(m, f[k].function, &oom);
            f[k].file = frame_str(m, f[k].file, &oom);
            f[k].module = frame_str(m, f[k].module, &oom);
        }
        int32_t id = oom ? -1 : site_for(m, f, s[i].nframes, &s[i], pi);
        if (id < 0) {
            if (!oom) free(f);
            rc = -ENOMEM;
            break;
        }
        map[i] = id;
        rc = add_site(m, &m->sites[id], &s[i], pi, &oom);
    }
    /* Leak groups, by merged site (combined in ml_merge_finish). */
    for (size_t i = 0; i < L->ngroups && rc == 0; i++) {
        const ml_leak_group_t *lg = &L->groups[i];
        if (grow((void **)&m->groups, &m->groups_cap, m->ngroups + 1, sizeof *m->groups) < 0) {
            rc = -ENOMEM;
            break;
        }
        m->groups[m->ngroups++] = (rawgroup_t){
            .site = lg->site < n ? (uint32_t)map[lg->site] : UINT32_MAX,
            .kind = lg->kind, .suppressed = lg->suppressed, .bytes = lg->bytes, .blocks = lg->blocks};
    }
    free(map);
    /* Threads and warnings. */
    const ml_thread_stats_t *th;
    size_t nt = ml_analysis_threads(a, &th);
    if (rc == 0 && (grow((void **)&m->threads, &m->threads_cap, m->nthreads + nt, sizeof *m->threads) < 0 ||
                    grow((void **)&m->thread_proc, &m->thread_proc_cap, m->nthreads + nt, sizeof *m->thread_proc) < 0))
        rc = -ENOMEM;
    for (size_t i = 0; i < nt && rc == 0; i++) {
        m->threads[m->nthreads] = th[i];
        m->threads[m->nthreads].name = intern(m, th[i].name, &oom);
        m->thread_proc[m->nthreads++] = pi;
    }
    const char *const *w;
    size_t nw = ml_analysis_warnings(a, &w);
    for (size_t i = 0; i < nw && rc == 0; i++) rc = add_warning(m, pi, "pid %u: %s", p->pid, w[i]);
    return rc < 0 || oom ? -ENOMEM : 0;
}

/* ------------------------------------------------------------------------- */
/* Finishing                                                                 */
/* ------------------------------------------------------------------------- */

static int cmp_msite(const void *x, const void *y) {
    const ml_site_t *a = &((const msite_t *)x)->site, *b = &((const msite_t *)y)->site;
    if (a->peak_bytes != b->peak_bytes) return a->peak_bytes > b->peak_bytes ? -1 : 1;
    if (a->leaked_bytes != b->leaked_bytes) return a->leaked_bytes > b->leaked_bytes ? -1 : 1;
    if (a->bytes_allocated != b->bytes_allocated) return a->bytes_allocated > b->bytes_allocated ? -1 : 1;
    if (a->alloc_calls != b->alloc_calls) return a->alloc_calls > b->alloc_calls ? -1 : 1;
    uint32_t ia = ((const msite_t *)x)->orig, ib = ((const msite_t *)y)->orig;
    return ia < ib ? -1 : ia > ib;
}

static int cmp_raw(const void *x, const void *y) {
    const rawgroup_t *a = x, *b = y;
    if (a->site != b->site) return a->site < b->site ? -1 : 1;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    return (int)a->suppressed - (int)b->suppressed;
}

static int cmp_group(const void *x, const void *y) {
    const ml_leak_group_t *a = x, *b = y;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    return a->site < b->site ? -1 : a->site > b->site;
}

static int cmp_proc(const void *x, const void *y) {
    const ml_merge_process_t *a = x, *b = y;
    /* A trace cut before its process record has no start (0): last. */
    uint64_t sa = a->start_realtime_ns ? a->start_realtime_ns : UINT64_MAX;
    uint64_t sb = b->start_realtime_ns ? b->start_realtime_ns : UINT64_MAX;
    if (sa != sb) return sa < sb ? -1 : 1;
    if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
    int c = strcmp(a->trace_path, b->trace_path);
    return c ? c : (a->index < b->index ? -1 : a->index > b->index);
}

static int cmp_share(const void *x, const void *y) {
    const ml_merge_share_t *a = x, *b = y;
    return a->process < b->process ? -1 : a->process > b->process;
}

/* Puts the processes in start order (then pid, then trace path): the order
 * of the report's processes table, whatever order the traces came in. */
static int order_processes(ml_merge_t *m) {
    qsort(m->procs, m->nprocs, sizeof *m->procs, cmp_proc);
    uint32_t *to = m->nprocs ? malloc(m->nprocs * sizeof *to) : NULL;
    if (m->nprocs && !to) return -ENOMEM;
    for (size_t i = 0; i < m->nprocs; i++) {
        to[m->procs[i].index] = (uint32_t)i;
        m->procs[i].index = (uint32_t)i;
    }
    for (size_t i = 0; i < m->nsites; i++) {
        msite_t *s = &m->sites[i];
        for (uint32_t k = 0; k < s->nshares; k++) s->shares[k].process = to[s->shares[k].process];
        qsort(s->shares, s->nshares, sizeof *s->shares, cmp_share);
    }
    /* Threads follow their processes (stable: each process's own order). */
    ml_thread_stats_t *th = m->nthreads ? malloc(m->nthreads * sizeof *th) : NULL;
    uint32_t *tp = m->nthreads ? malloc(m->nthreads * sizeof *tp) : NULL;
    if (m->nthreads && (!th || !tp)) {
        free(th);
        free(tp);
        free(to);
        return -ENOMEM;
    }
    size_t k = 0;
    for (uint32_t p = 0; p < m->nprocs; p++)
        for (size_t i = 0; i < m->nthreads; i++)
            if (to[m->thread_proc[i]] == p) {
                th[k] = m->threads[i];
                tp[k++] = p;
            }
    free(m->threads);
    free(m->thread_proc);
    m->threads = th;
    m->thread_proc = tp;
    m->threads_cap = m->thread_proc_cap = m->nthreads;
    /* Warnings too. */
    char **wv = m->nwarnings ? malloc(m->nwarnings * sizeof *wv) : NULL;
    if (m->nwarnings && !wv) {
        free(to);
        return -ENOMEM;
    }
    k = 0;
    for (uint32_t p = 0; p < m->nprocs; p++)
        for (size_t i = 0; i < m->nwarnings; i++)
            if (to[m->warning_proc[i]] == p) wv[k++] = m->warnings[i];
    free(m->warnings);
    m->warnings = wv;
    m->warnings_cap = m->nwarnings;
    m->tot.max_process = m->nprocs ? to[m->tot.max_process] : 0;
    free(to);
    return 0;
}

int ml_merge_finish(ml_merge_t *m) {
    if (m->finished) return 0;
    m->finished = true;
    if (order_processes(m) < 0) return -ENOMEM;
    qsort(m->sites, m->nsites, sizeof *m->sites, cmp_msite);
    uint32_t *newidx = m->nsites ? malloc(m->nsites * sizeof *newidx) : NULL;
    m->flat = m->nsites ? malloc(m->nsites * sizeof *m->flat) : NULL;
    if (m->nsites && (!newidx || !m->flat)) {
        free(newidx);
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->nsites; i++) {
        msite_t *s = &m->sites[i];
        newidx[s->orig] = (uint32_t)i;
        s->site.id = (uint32_t)i;
        s->site.frames = s->frames;
        if (s->site.min_size == UINT64_MAX) s->site.min_size = 0;
        m->flat[i] = s->site;
    }
    /* Leak groups: one per (merged site, kind, suppressed), largest first. */
    for (size_t i = 0; i < m->ngroups; i++)
        if (m->groups[i].site != UINT32_MAX) m->groups[i].site = newidx[m->groups[i].site];
    free(newidx);
    qsort(m->groups, m->ngroups, sizeof *m->groups, cmp_raw);
    m->leak_groups = m->ngroups ? malloc(m->ngroups * sizeof *m->leak_groups) : NULL;
    if (m->ngroups && !m->leak_groups) return -ENOMEM;
    size_t ng = 0;
    for (size_t i = 0; i < m->ngroups; i++) {
        const rawgroup_t *r = &m->groups[i];
        ml_leak_group_t *g = ng ? &m->leak_groups[ng - 1] : NULL;
        if (!g || r->site == UINT32_MAX || g->site != r->site || g->kind != r->kind || g->suppressed != r->suppressed) {
            g = &m->leak_groups[ng++];
            *g = (ml_leak_group_t){.site = r->site, .kind = r->kind, .suppressed = r->suppressed};
        }
        g->bytes += r->bytes;
        g->blocks += r->blocks;
    }
    qsort(m->leak_groups, ng, sizeof *m->leak_groups, cmp_group);
    m->tot.leaks.groups = m->leak_groups;
    m->tot.leaks.ngroups = ng;
    /* The call tree of the merged sites, pruned as a session's flame tree. */
    ml_calltree_node_t *tree;
    int64_t nt = ml_calltree_build(m->flat, m->nsites, NULL, false, &tree);
    if (nt < 0) return (int)nt;
    m->ntree = (size_t)nt;
    int rc = ml__calltree_prune(tree, (size_t)nt, 0, 0, &m->flame, &m->nflame);
    free(tree);
    return rc;
}

void ml_merge_free(ml_merge_t *m) {
    if (!m) return;
    for (size_t i = 0; i < m->strs_cap; i++) free(m->strs[i]);
    free(m->strs);
    for (size_t i = 0; i < m->nprocs; i++) free((void *)m->procs[i].argv);
    free(m->procs);
    for (size_t i = 0; i < m->nsites; i++) {
        free(m->sites[i].frames);
        free(m->sites[i].shares);
    }
    free(m->sites);
    free(m->slots);
    free(m->groups);
    free(m->gpu);
    free(m->threads);
    free(m->thread_proc);
    for (size_t i = 0; i < m->nwarnings; i++) free(m->warnings[i]);
    free(m->warnings);
    free(m->warning_proc);
    free(m->leak_groups);
    free(m->flat);
    free(m->flame);
    free(m);
}

/* ------------------------------------------------------------------------- */
/* Queries                                                                   */
/* ------------------------------------------------------------------------- */

size_t ml_merge_process_count(const ml_merge_t *m) {
    return m->nprocs;
}

const ml_merge_process_t *ml_merge_process(const ml_merge_t *m, size_t i) {
    return i < m->nprocs ? &m->procs[i] : NULL;
}

const ml_site_t *ml_merge_sites(const ml_merge_t *m, size_t *count) {
    *count = m->finished ? m->nsites : 0;
    return m->finished ? m->flat : NULL;
}

const ml_merge_share_t *ml_merge_site_processes(const ml_merge_t *m, size_t i, size_t *count) {
    *count = m->finished && i < m->nsites ? m->sites[i].nshares : 0;
    return *count ? m->sites[i].shares : NULL;
}

const ml_merge_totals_t *ml_merge_totals(const ml_merge_t *m) {
    return &m->tot;
}

const ml_histograms_t *ml_merge_histograms(const ml_merge_t *m) {
    return &m->hist;
}

size_t ml_merge_threads(const ml_merge_t *m, const ml_thread_stats_t **threads, const uint32_t **process) {
    *threads = m->threads;
    if (process) *process = m->thread_proc;
    return m->nthreads;
}

size_t ml_merge_gpu_devices(const ml_merge_t *m, const ml_merge_gpu_device_t **devices) {
    *devices = m->gpu;
    return m->ngpu;
}

size_t ml_merge_flame(const ml_merge_t *m, const ml_calltree_node_t **nodes) {
    *nodes = m->flame;
    return m->nflame;
}

size_t ml_merge_calltree_nodes(const ml_merge_t *m) {
    return m->ntree;
}

size_t ml_merge_warnings(const ml_merge_t *m, const char *const **warnings) {
    *warnings = (const char *const *)m->warnings;
    return m->nwarnings;
}

uint32_t ml_merge_warning_process(const ml_merge_t *m, size_t i) {
    return i < m->nwarnings ? m->warning_proc[i] : UINT32_MAX;
}
