/* snapshot.c - an analysis session as bytes, and back.
 *
 * The collector feeds every record to an analysis session while it writes
 * the trace (cli/run.c). At the end it saves that session's state after the
 * end record, streamed into the trace as it is made
 * (ml_analysis_snapshot_stream, collector/sink_trace.c: a buffer of 1 MiB,
 * not one of the whole snapshot); `memlens report` restores it instead
 * of decoding and replaying every record again, which is most of a report's
 * time. The state is what ml_analysis_build() reads: totals, the live blocks,
 * the stack trie and per-stack statistics, modules, the peak and worst
 * moments, the timeline, histograms, threads, the exit scan and the
 * warnings. Its size follows the blocks live at the end and the stacks,
 * never the trace length. The moments' graveyards (every block live at the
 * peak: millions in some programs) are not saved; their fragmentation is
 * computed here, as build() would, and saved instead.
 *
 * Encoding (snap_codec.h): LEB128 varints (zig-zag for signed values),
 * doubles as their 64 bits, strings as length + bytes. Live blocks go by address, with each
 * block's map slot, so a restored map iterates in the same order as the
 * collector's and the reports built from either are byte for byte the same
 * (tests/e2e/test_snapshot.c compares them). Everything read is checked -- counts against the bytes
 * left, indexes against their tables -- so a damaged snapshot is refused
 * (the caller then replays the records), never trusted.
 *
 * GPU records: gpu_snapshot.c saves and restores its own state (ml__gpu_save,
 * ml__gpu_restore) with the same codec, after the warnings.
 *
 * Not saved: the page map (only the counters: a restored session is
 * finished and is not fed again), per-thread realloc stashes.
 */
#define _GNU_SOURCE
#include "analysis_internal.h"
#include "gpu_internal.h" /* ml__gpu_save, ml__gpu_restore */
#include "snap_codec.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first and last number of a snapshot, which also says its layout:
 * version 1 ("SNAP", before the GPU state was saved) has no GPU section;
 * version 2 ("SNP2") has one before its last number; version 3 ("SNP3")
 * adds the kernel's peak RSS (ML_T_PEAK_RSS) after it; version 4 ("SNP4")
 * the process record's options (ML_OPT_*: attached) and the unknown frees'
 * usable bytes after that; version 5 ("SNP5") saves the live heap blocks
 * without map slots (the live set has none: live.c); version 6 ("SNP6")
 * adds the RSS samples' interval (ML_T_RSS.interval_ms) at the end; version
 * 7 ("SNP7") has version 6's layout, with a sampled block's counts its
 * weight (analysis.c, ml__block_count), not 1; version 8 ("SNP8") adds
 * the allocator's own mappings (calls, unmaps, bytes, peak) at the end.
 * Restore reads all. */
#define SNAP_MAGIC_V1 0x50414e53u /* "SNAP" */
#define SNAP_MAGIC_V2 0x32504e53u /* "SNP2" */
#define SNAP_MAGIC_V3 0x33504e53u /* "SNP3" */
#define SNAP_MAGIC_V4 0x34504e53u /* "SNP4" */
#define SNAP_MAGIC_V5 0x35504e53u /* "SNP5" */
#define SNAP_MAGIC_V6 0x36504e53u /* "SNP6" */
#define SNAP_MAGIC_V7 0x37504e53u /* "SNP7" */
#define SNAP_MAGIC 0x38504e53u    /* "SNP8" */

/* ------------------------------------------------------------------------- */
/* Writing                                                                   */
/* ------------------------------------------------------------------------- */

/* A block without its address (the caller writes it). */
static void put_block(ml__obuf_t *b, const ml__block_t *e) {
    ml__put_u(b, e->size);
    ml__put_u(b, e->reach);
    ml__put_u(b, e->seq);
    ml__put_u(b, e->slack);
    ml__put_u(b, e->stack);
    ml__put_u(b, e->time_ms);
}

typedef struct {
    ml__block_t b;
    uint64_t slot;
} slotted_t;

static int cmp_slotted(const void *x, const void *y) {
    uint64_t l = ((const slotted_t *)x)->b.ptr, r = ((const slotted_t *)y)->b.ptr;
    return l < r ? -1 : l > r;
}

/* A map: its capacity, then its blocks by address, each address as the
 * delta from the one before (small, and zstd likes it) and each slot as its
 * distance from the block's home slot (almost always 0), so the restored map
 * has every block in the slot it had. */
static void put_map(ml__obuf_t *b, const ml_map_t *m) {
    ml__put_u(b, m->cap);
    ml__put_u(b, m->count);
    slotted_t *v = m->count ? malloc(m->count * sizeof *v) : NULL;
    if (m->count && !v) {
        b->oom = true;
        return;
    }
    const ml__block_t *e = ml__blocks_entries(m);
    uint64_t n = 0;
    for (uint64_t i = 0; i < m->cap && n < m->count; i++)
        if (e[i].ptr) v[n++] = (slotted_t){e[i], i};
    if (n > 1) qsort(v, n, sizeof *v, cmp_slotted);
    uint64_t prev = 0;
    for (uint64_t i = 0; i < n; i++) {
        ml__put_u(b, v[i].b.ptr - prev);
        prev = v[i].b.ptr;
        ml__put_u(b, (v[i].slot - ml_map_hash(v[i].b.ptr)) & (m->cap - 1));
        put_block(b, &v[i].b);
    }
    free(v);
}

/* The live heap blocks (version 5): their count, then each block by
 * address, the address as the delta from the one before. */
static void put_live(ml__obuf_t *b, const ml__live_t *L) {
    ml__put_u(b, L->count);
    ml__live_cursor_t cur;
    if (ml__live_cursor_init(&cur, L) < 0) {
        b->oom = true;
        return;
    }
    ml__block_t e;
    uint64_t prev = 0, n = 0;
    while (n < L->count && ml__live_next(&cur, &e)) {
        ml__put_u(b, e.ptr - prev);
        prev = e.ptr;
        put_block(b, &e);
        n++;
    }
    ml__live_cursor_free(&cur);
}

static void put_totals(ml__obuf_t *b, const ml_totals_t *t) {
    ml__put_u(b, t->alloc_calls);
    ml__put_u(b, t->free_calls);
    ml__put_u(b, t->realloc_calls);
    ml__put_u(b, t->bytes_allocated);
    ml__put_u(b, t->temporary_allocs);
    ml__put_u(b, t->mmap_calls);
    ml__put_u(b, t->munmap_calls);
    ml__put_u(b, t->heap_bytes);
    ml__put_u(b, t->heap_blocks);
    ml__put_u(b, t->peak_bytes);
    ml__put_u(b, t->peak_time_ms);
    ml__put_u(b, t->mmap_bytes);
    ml__put_u(b, t->peak_mmap_bytes);
    ml__put_u(b, t->unknown_frees);
    ml__put_u(b, ML_KIND_COUNT_);
    for (int k = 0; k < ML_KIND_COUNT_; k++) ml__put_u(b, t->calls_by_kind[k]);
    ml__put_u(b, t->last_time_ms);
    ml__put_u(b, t->sample_bytes);
    ml__put_u(b, t->complete);
    ml__put_u(b, t->end.status_kind);
    ml__put_s(b, t->end.status);
    ml__put_u(b, t->end.events);
    ml__put_u(b, t->end.ring_waits);
    ml__put_u(b, t->end.ring_wait_ns);
    ml__put_u(b, t->end.lost_in_crash);
    ml__put_u(b, t->end.lost_dead_collector);
    ml__put_u(b, t->end.nested_skipped);
    ml__put_u(b, t->end.truncated_stacks);
    ml__put_u(b, t->end.duration_ms);
    ml__put_u(b, t->peak_blocks);
    ml__put_u(b, t->records);
    ml__put_u(b, t->rss_bytes);
    ml__put_u(b, t->peak_rss_bytes);
    ml__put_u(b, t->gpu_bytes);
    ml__put_u(b, t->peak_gpu_bytes);
    ml__put_u(b, t->exited);
}

static void put_moment(ml__obuf_t *b, const ml__moment_t *m) {
    ml__put_u(b, m->set);
    ml__put_u(b, m->seq);
    ml__put_u(b, m->time_ms);
    ml__put_u(b, m->heap_bytes);
    ml__put_u(b, m->heap_blocks);
    ml__put_u(b, m->page_waste);
    ml__put_u(b, m->have_mallinfo);
    ml__put_u(b, m->have_rss);
    ml__put_u(b, m->mallinfo_time_ms);
    for (int i = 0; i < 5; i++) ml__put_u(b, m->mallinfo[i]);
    ml__put_u(b, m->rss_bytes);
}

/* The fragmentation of one moment, computed from its graveyard as build()
 * would. */
typedef struct {
    const ml_analysis_t *a;
    const ml__moment_t *m;
    ml_frag_t f;
    int8_t *cells;
    bool ok;
} frag_job_t;

static void *frag_job(void *arg) {
    frag_job_t *j = arg;
    ml__mstream_t st;
    if (ml__mstream_open(&st, j->a, j->m) < 0) return NULL;
    ml__frag_compute(j->a, &st, &j->f, &j->cells);
    ml__mstream_close(&st);
    j->ok = true;
    return NULL;
}

#define JOINT_GRAVES_MAX (1u << 20) /* graves of both moments, copied at once */

/* Both moments: the same one computed once, two different ones in two
 * threads (the program has exited: its core is free), unless their blocks
 * are very many. Both walk the live set, which nobody changes meanwhile. */
static void frag_jobs(const ml_analysis_t *a, frag_job_t j[2]) {
    /* A moment closed while feeding (analysis.c) has its fragmentation
     * already: only the others are computed. */
    bool need[2];
    for (int i = 0; i < 2; i++) need[i] = a->mom[i].set && !a->snap_frag_set[i];
    for (int i = 0; i < 2; i++) {
        j[i] = (frag_job_t){.a = a, .m = &a->mom[i]};
        if (!a->mom[i].set || need[i]) continue;
        j[i].f = a->snap_frag[i];
        j[i].cells = a->snap_cells[i] && j[i].f.map_ncells ? malloc(j[i].f.map_ncells) : NULL;
        if (j[i].cells) memcpy(j[i].cells, a->snap_cells[i], j[i].f.map_ncells);
        j[i].ok = !a->snap_cells[i] || !j[i].f.map_ncells || j[i].cells;
    }
    bool same = need[0] && need[1] && a->mom[0].seq == a->mom[1].seq;
    /* Two different moments with few graves between them (a heap that
     * grew to its end): both in one walk of the live set, as their close
     * does it. On 7.5 M live blocks the two walks took 0.37-0.42 s. */
    if (need[0] && need[1] && !same && a->mom[0].ngrave + a->mom[1].ngrave < JOINT_GRAVES_MAX) {
        const ml__moment_t *m[2] = {&a->mom[0], &a->mom[1]};
        ml_frag_t f[2];
        int8_t *cells[2] = {NULL, NULL};
        if (ml__frag_compute2_keep(a, m, f, cells) == 0) {
            for (int i = 0; i < 2; i++) {
                j[i].f = f[i];
                j[i].cells = cells[i];
                j[i].ok = true;
            }
            return;
        }
    }
    bool small = a->mom[0].ngrave + a->mom[1].ngrave + 2 * a->heap.count < (1u << 21);
    pthread_t t;
    bool threaded = !same && small && need[0] && need[1] && pthread_create(&t, NULL, frag_job, &j[1]) == 0;
    if (need[0]) frag_job(&j[0]);
    if (threaded) pthread_join(t, NULL);
    else if (same && j[0].ok) {
        j[1].f = j[0].f;
        j[1].cells = j[0].cells && j[0].f.map_ncells ? malloc(j[0].f.map_ncells) : NULL;
        if (j[1].cells) memcpy(j[1].cells, j[0].cells, j[0].f.map_ncells);
        j[1].ok = !j[0].cells || j[1].cells;
    } else if (need[1]) {
        frag_job(&j[1]);
    }
}

/* frag_jobs on a thread of its own, while the caller writes the live
 * blocks: on 7.5 M blocks each took about a third of the snapshot's time
 * (the two only read the analysis). */
typedef struct {
    const ml_analysis_t *a;
    frag_job_t j[2];
    pthread_t t;
    bool running;
} frag_bg_t;

static void *frag_bg_main(void *arg) {
    frag_bg_t *f = arg;
    frag_jobs(f->a, f->j);
    return NULL;
}

static void frag_bg_start(frag_bg_t *f, const ml_analysis_t *a) {
    f->a = a;
    f->running = sysconf(_SC_NPROCESSORS_ONLN) > 1 && pthread_create(&f->t, NULL, frag_bg_main, f) == 0;
}

static void frag_bg_finish(frag_bg_t *f) {
    if (f->running) pthread_join(f->t, NULL);
    else frag_jobs(f->a, f->j);
}

static void put_frag(ml__obuf_t *b, const ml__moment_t *m, frag_job_t *j) {
    ml__put_u(b, m->set);
    if (!m->set) return;
    if (!j->ok) {
        b->oom = true;
        return;
    }
    const ml_frag_t f = j->f;
    const int8_t *cells = j->cells;
    ml__put_u(b, f.live_bytes);
    ml__put_u(b, f.live_blocks);
    ml__put_u(b, f.pages);
    ml__put_u(b, f.page_bytes);
    ml__put_d(b, f.page_utilization);
    ml__put_u(b, f.free_bytes);
    ml__put_u(b, f.largest_free_bytes);
    ml__put_u(b, f.gaps);
    ml__put_u(b, f.regions);
    ml__put_u(b, f.span_bytes);
    ml__put_d(b, f.external);
    ml__put_u(b, f.usable_bytes);
    ml__put_u(b, f.internal_waste_bytes);
    ml__put_u(b, f.usable_measured_blocks);
    ml__put_d(b, f.internal_ratio);
    ml__put_u(b, f.map_base);
    ml__put_u(b, f.map_cell_bytes);
    ml__put_u(b, cells ? f.map_ncells : 0);
    for (uint32_t i = 0; cells && i < f.map_ncells; i++) ml__put_s(b, cells[i]);
}

/* Version 4's live heap: the blocks in a map with slots (read by
 * get_live_map). The map is made here, by address. */
static void put_live_as_map(ml__obuf_t *b, const ml__live_t *L) {
    ml_map_t m = {0};
    ml__live_cursor_t cur;
    if (ml__live_cursor_init(&cur, L) < 0) {
        b->oom = true;
        return;
    }
    ml__block_t e;
    while (ml__live_next(&cur, &e)) {
        bool existed;
        ml__block_t *slot = ml__blocks_put(&m, e.ptr, &existed);
        if (!slot) {
            b->oom = true;
            break;
        }
        *slot = e;
    }
    ml__live_cursor_free(&cur);
    put_map(b, &m);
    ml_map_free(&m);
}

/* The one writer of a snapshot's bytes, into a growing buffer or a
 * spilling one (the two callers below), so that both are the same bytes.
 * `version` is checked by the callers. Returns 0 or a negative errno (the
 * GPU state's); b->oom says whether the bytes are whole. */
static int put_session(const ml_analysis_t *a, uint32_t version, ml__obuf_t *b) {
    const uint64_t magic = version == 4 ? SNAP_MAGIC_V4 : SNAP_MAGIC;
    frag_bg_t frag = {0};
    frag_bg_start(&frag, a);
    ml__put_u(b, magic);
    put_totals(b, &a->t);
    ml__put_d(b, a->w_calls);
    ml__put_d(b, a->w_bytes);
    ml__put_d(b, a->w_reallocs);
    ml__put_u(b, a->seq);

    const ml_process_info_t *q = &a->proc;
    ml__put_u(b, q->pid);
    ml__put_u(b, q->ppid);
    ml__put_u(b, a->page_size);
    ml__put_u(b, q->start_realtime_ns);
    ml__put_u(b, q->sample_bytes);
    ml__put_u(b, q->unwinder);
    ml__put_u(b, q->depth);
    ml__put_str(b, q->exe);
    ml__put_str(b, q->parent_trace);
    ml__put_str(b, q->producer);
    ml__put_u(b, q->argc);
    for (uint32_t i = 0; i < q->argc; i++) ml__put_str(b, q->argv[i]);

    ml__put_u(b, a->nmods);
    for (uint32_t i = 0; i < a->nmods; i++) {
        const ml__module_t *m = &a->mods[i];
        ml__put_str(b, m->path);
        ml__put_u(b, m->base);
        ml__put_u(b, m->lo);
        ml__put_u(b, m->hi);
        ml__put_bytes(b, m->build_id, m->build_id_len);
        ml__put_u(b, m->loaded);
    }

    ml__put_u(b, a->nstats);
    for (uint32_t i = 0; i < a->nstats; i++) {
        const ml__stack_stats_t *st = &a->stats[i];
        ml__put_u(b, st->node);
        ml__put_d(b, st->w_calls);
        ml__put_d(b, st->w_bytes);
        ml__put_u(b, st->temporary);
        ml__put_u(b, st->reallocs);
        ml__put_u(b, st->freed);
        ml__put_u(b, st->live_bytes);
        ml__put_u(b, st->live_blocks);
        ml__put_u(b, st->peak_bytes);
        ml__put_u(b, st->peak_blocks);
        ml__put_u(b, st->last_change);
        ml__put_u(b, st->min_size);
        ml__put_u(b, st->max_size);
        ml__put_u(b, st->size_mask);
        ml__put_u(b, st->life_sum);
        ml__put_u(b, st->life_max);
        ml__put_u(b, st->life_mask);
        ml__put_u(b, st->thread_mask);
    }

    /* Nodes 1..nnodes-1 (0 is the root); the pc as a delta from the last. */
    ml__put_u(b, a->nnodes);
    uint64_t prev_pc = 0;
    for (uint32_t i = 1; i < a->nnodes; i++) {
        ml__put_u(b, i - a->node_parent[i]);
        ml__put_s(b, (int64_t)(a->node_pc[i] - prev_pc));
        prev_pc = a->node_pc[i];
        ml__put_s(b, a->node_module[i]);
        ml__put_u(b, a->node_stat[i]);
    }

    if (version == 4) put_live_as_map(b, &a->heap);
    else put_live(b, &a->heap);
    put_map(b, &a->maps);
    frag_bg_finish(&frag);
    for (int i = 0; i < 2; i++) {
        put_moment(b, &a->mom[i]);
        put_frag(b, &a->mom[i], &frag.j[i]);
        free(frag.j[i].cells);
    }
    ml__put_u(b, a->pages.nonzero);
    ml__put_u(b, a->pages.interior);

    ml__put_u(b, a->have_mallinfo);
    ml__put_u(b, a->have_rss);
    ml__put_u(b, a->mallinfo_time_ms);
    for (int i = 0; i < 5; i++) ml__put_u(b, a->mallinfo[i]);

    ml__put_u(b, a->tl_width);
    for (uint32_t i = 0; i < ML_TIMELINE_MAX; i++) {
        const ml__tl_bucket_t *k = &a->tl[i];
        ml__put_u(b, k->used);
        if (!k->used) continue;
        ml__put_u(b, k->t_max);
        ml__put_u(b, k->heap_max);
        ml__put_u(b, k->rss);
        ml__put_u(b, k->mmap_max);
        ml__put_u(b, k->gpu_max);
        ml__put_u(b, k->calls);
    }

    const ml_histograms_t *h = &a->hist;
    for (int i = 0; i < 64; i++) {
        ml__put_u(b, h->size_count[i]);
        ml__put_u(b, h->size_bytes[i]);
        ml__put_u(b, h->life_count[i]);
    }
    ml__put_u(b, h->size_first);
    ml__put_u(b, h->size_last);
    ml__put_u(b, h->life_last);
    ml__put_u(b, h->live_at_end);

    ml__put_u(b, a->nthreads);
    for (uint32_t i = 0; i < a->nthreads; i++) {
        const ml__thread_t *th = &a->threads[i];
        ml__put_u(b, th->seen);
        if (!th->seen) continue;
        ml__put_u(b, th->tid);
        ml__put_str(b, th->name);
        ml__put_u(b, th->alloc_calls);
        ml__put_u(b, th->bytes_allocated);
        ml__put_u(b, th->free_calls);
        ml__put_u(b, th->temporary);
        ml__put_d(b, th->w_calls);
        ml__put_d(b, th->w_bytes);
    }

    ml__put_u(b, a->scanned);
    ml__put_u(b, a->scan.scanned);
    ml__put_s(b, a->scan.scan_status);
    ml__put_u(b, a->scan.scan_root_bytes);
    ml__put_u(b, a->scan.scan_heap_bytes);
    ml__put_u(b, a->scan.scan_duration_us);

    /* Not those of a build: the restored session's build says them again,
     * as they hold then. */
    size_t nwarn = 0;
    for (size_t i = 0; i < a->nwarn; i++) nwarn += !a->warn_built[i];
    ml__put_u(b, nwarn);
    for (size_t i = 0; i < a->nwarn; i++)
        if (!a->warn_built[i]) ml__put_str(b, a->warn[i]);
    ml__put_u(b, a->gpu != NULL);
    int rc = a->gpu ? ml__gpu_save(a->gpu, b) : 0;
    ml__put_u(b, a->t.hwm_rss_bytes);
    ml__put_u(b, a->t.hwm_rss_source);
    ml__put_u(b, a->proc.options);
    ml__put_u(b, a->t.unknown_free_bytes);
    if (magic == SNAP_MAGIC) {
        ml__put_u(b, a->t.rss_interval_ms);
        ml__put_u(b, a->t.alloc_mmap_calls);
        ml__put_u(b, a->t.alloc_munmap_calls);
        ml__put_u(b, a->t.alloc_mmap_bytes);
        ml__put_u(b, a->t.peak_alloc_mmap_bytes);
    }
    ml__put_u(b, magic); /* the end: the reader checks that it got here */

    return rc;
}


int ml_analysis_snapshot(const ml_analysis_t *a, void **out, size_t *len) {
    return ml_analysis_snapshot_version(a, ML_ANALYSIS_SNAPSHOT_VERSION, out, len);
}

/* An unknown version leaves the caller's out-params as they were (as it
 * always did: tests/e2e/test_snapshot.c relies on it). */
static bool known_version(uint32_t version) {
    return version == 4 || version == ML_ANALYSIS_SNAPSHOT_VERSION;
}

int ml_analysis_snapshot_version(const ml_analysis_t *a, uint32_t version, void **out, size_t *len) {
    if (!known_version(version)) return -EINVAL;
    *out = NULL;
    *len = 0;
    if (a->light) return -ENOTSUP;
    ml__obuf_t b = {0};
    int rc = put_session(a, version, &b);
    if (rc == 0 && b.oom) rc = -ENOMEM;
    if (rc < 0) {
        free(b.p);
        return rc;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

int ml_analysis_snapshot_stream(const ml_analysis_t *a, uint32_t version, ml_analysis_out_fn out, void *ctx,
                                uint64_t *raw_len) {
    if (!known_version(version)) return -EINVAL;
    *raw_len = 0;
    if (a->light) return -ENOTSUP;
    ml__obuf_t b;
    ml__obuf_spill_init(&b, out, ctx);
    int rc = put_session(a, version, &b);
    /* The hook's error first: the GPU state's -ENOMEM only echoes it. */
    int done = ml__obuf_spill_finish(&b, rc == 0, raw_len);
    return done < 0 ? done : rc;
}

/* ------------------------------------------------------------------------- */
/* Reading                                                                   */
/* ------------------------------------------------------------------------- */

static void get_block(ml__ibuf_t *b, ml__block_t *e, uint32_t nstats) {
    e->size = ml__get_max(b, ML__SIZE_MAX, "a block size is out of range");
    e->reach = ml__get_max(b, ML_REACH_POSSIBLE, "a block's leak kind is out of range");
    e->seq = ml__get_max(b, (1ull << 48) - 1, "a block's event number is out of range");
    e->slack = ml__get_max(b, 0xffff, "a block's slack is out of range");
    e->stack = (uint32_t)ml__get_max(b, nstats ? nstats - 1 : 0, "a block names an unknown stack");
    e->time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "a block's time is out of range");
}

static void get_map(ml__ibuf_t *b, ml_map_t *m, uint32_t nstats) {
    uint64_t cap = ml__get_max(b, 1ull << 40, "a map is too large");
    uint64_t count = ml__get_count(b, 8, "a map holds more blocks than the snapshot");
    if (b->bad) return;
    /* Open addressing needs a power of two and free slots to end a probe. */
    if (cap & (cap - 1) || count * 4 > cap * 3) {
        ml__snap_bad(b, "a map's capacity does not fit its blocks");
        return;
    }
    if (!cap) return;
    /* The table as the collector's map had it: `cap` slots, each block in
     * its slot (found from the map's hash). */
    if (ml_map_grow(m, sizeof(ml__block_t), cap) < 0) {
        ml__snap_bad(b, "out of memory");
        return;
    }
    ml__block_t *e = ml__blocks_entries(m);
    uint64_t ptr = 0;
    for (uint64_t i = 0; i < count && !b->bad; i++) {
        uint64_t d = ml__get_u(b);
        if ((i > 0 && d == 0) || d > UINT64_MAX - ptr || (i == 0 && d == 0)) {
            ml__snap_bad(b, "the blocks' addresses are not increasing");
            return;
        }
        ptr += d;
        uint64_t slot = (ml_map_hash(ptr) + ml__get_max(b, cap - 1, "a map slot is out of range")) & (cap - 1);
        if (b->bad) return;
        if (e[slot].ptr) {
            ml__snap_bad(b, "two blocks in one map slot");
            return;
        }
        get_block(b, &e[slot], nstats);
        e[slot].ptr = ptr;
        m->count++;
    }
}

bool ml__snap_live_block(ml__ibuf_t *b, uint64_t *ptr, ml__block_t *e, uint32_t nstats) {
    if (ml__snap_fast_block(b, ptr, e, nstats)) return true;
    uint64_t d = ml__get_u(b);
    if (d == 0 || d > UINT64_MAX - *ptr) return ml__snap_bad(b, "the blocks' addresses are not increasing");
    *ptr += d;
    *e = (ml__block_t){.ptr = *ptr};
    get_block(b, e, nstats);
    return !b->bad;
}

/* The live heap (version 5): `count` blocks by rising address. Each block
 * is checked as ml__get_u and get_block check it, in the same order, so a
 * damaged one fails with the same reason. With `packed`, every block is
 * checked and the set keeps their bytes (ml__live_set_packed) instead of
 * building its chunks (ml__live_load). */
static void get_live(ml__ibuf_t *b, ml__live_t *L, uint32_t nstats, bool packed) {
    uint64_t count = ml__get_count(b, 8, "the live set holds more blocks than the snapshot");
    if (packed && count) {
        size_t start = b->pos;
        uint64_t ptr = 0;
        ml__block_t e;
        for (uint64_t i = 0; i < count && ml__snap_next_block(b, &ptr, &e, nstats); i++) {
        }
        if (!b->bad && ml__live_set_packed(L, b->p + start, b->pos - start, count, nstats) < 0)
            ml__snap_bad(b, "out of memory");
        return;
    }
    if (count && ml__live_load(L, b, count, nstats) < 0) ml__snap_bad(b, "out of memory");
}

/* The live heap blocks of a version 1-4 snapshot: a map with slots, read
 * as a map and moved into the live set. */
static void get_live_map(ml__ibuf_t *b, ml__live_t *L, uint32_t nstats) {
    ml_map_t m = {0};
    get_map(b, &m, nstats);
    const ml__block_t *e = ml__blocks_entries(&m);
    for (uint64_t i = 0; i < m.cap && !b->bad; i++) {
        if (!e[i].ptr) continue;
        ml__block_t old;
        bool existed;
        if (ml__live_put(L, &e[i], &old, &existed) < 0) ml__snap_bad(b, "out of memory");
    }
    ml_map_free(&m);
}

static void get_moment(ml__ibuf_t *b, ml__moment_t *m) {
    m->set = ml__get_max(b, 1, "bad flag");
    m->seq = ml__get_u(b);
    m->time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "a moment's time is out of range");
    m->heap_bytes = ml__get_u(b);
    m->heap_blocks = ml__get_u(b);
    m->page_waste = ml__get_u(b);
    m->have_mallinfo = ml__get_max(b, 1, "bad flag");
    m->have_rss = ml__get_max(b, 1, "bad flag");
    m->mallinfo_time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "a moment's time is out of range");
    for (int i = 0; i < 5; i++) m->mallinfo[i] = ml__get_u(b);
    m->rss_bytes = ml__get_u(b);
}

static void get_frag(ml__ibuf_t *b, bool *set, ml_frag_t *f, int8_t **cells) {
    *set = ml__get_max(b, 1, "bad flag");
    if (!*set || b->bad) return;
    memset(f, 0, sizeof *f);
    f->valid = true;
    f->live_bytes = ml__get_u(b);
    f->live_blocks = ml__get_u(b);
    f->pages = ml__get_u(b);
    f->page_bytes = ml__get_u(b);
    f->page_utilization = ml__get_d(b);
    f->free_bytes = ml__get_u(b);
    f->largest_free_bytes = ml__get_u(b);
    f->gaps = ml__get_u(b);
    f->regions = ml__get_u(b);
    f->span_bytes = ml__get_u(b);
    f->external = ml__get_d(b);
    f->usable_bytes = ml__get_u(b);
    f->internal_waste_bytes = ml__get_u(b);
    f->usable_measured_blocks = ml__get_u(b);
    f->internal_ratio = ml__get_d(b);
    f->map_base = ml__get_u(b);
    f->map_cell_bytes = ml__get_u(b);
    uint64_t n = ml__get_max(b, ML_HEAP_MAP_CELLS + 1, "too many heap map cells");
    if (b->bad || !n) return;
    *cells = malloc(n);
    if (!*cells) return (void)ml__snap_bad(b, "out of memory");
    f->map_ncells = (uint32_t)n;
    for (uint64_t i = 0; i < n && !b->bad; i++) {
        int64_t c = ml__get_s(b);
        if (c < -1 || c > 100) ml__snap_bad(b, "a heap map cell is out of range");
        (*cells)[i] = (int8_t)c;
    }
}

static void get_totals(ml__ibuf_t *b, ml_totals_t *t) {
    t->alloc_calls = ml__get_u(b);
    t->free_calls = ml__get_u(b);
    t->realloc_calls = ml__get_u(b);
    t->bytes_allocated = ml__get_u(b);
    t->temporary_allocs = ml__get_u(b);
    t->mmap_calls = ml__get_u(b);
    t->munmap_calls = ml__get_u(b);
    t->heap_bytes = ml__get_u(b);
    t->heap_blocks = ml__get_u(b);
    t->peak_bytes = ml__get_u(b);
    t->peak_time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "the peak's time is out of range");
    t->mmap_bytes = ml__get_u(b);
    t->peak_mmap_bytes = ml__get_u(b);
    t->unknown_frees = ml__get_u(b);
    uint64_t kinds = ml__get_max(b, 255, "too many allocation kinds");
    for (uint64_t k = 0; k < kinds; k++) {
        uint64_t v = ml__get_u(b);
        if (k < ML_KIND_COUNT_) t->calls_by_kind[k] = v;
    }
    t->last_time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "the last time is out of range");
    t->sample_bytes = ml__get_u(b);
    t->complete = ml__get_max(b, 1, "bad flag");
    t->end.status_kind = (uint32_t)ml__get_max(b, UINT32_MAX, "bad end status");
    t->end.status = (int32_t)ml__get_s(b);
    t->end.events = ml__get_u(b);
    t->end.ring_waits = ml__get_u(b);
    t->end.ring_wait_ns = ml__get_u(b);
    t->end.lost_in_crash = ml__get_u(b);
    t->end.lost_dead_collector = ml__get_u(b);
    t->end.nested_skipped = ml__get_u(b);
    t->end.truncated_stacks = ml__get_u(b);
    t->end.duration_ms = ml__get_u(b);
    t->peak_blocks = ml__get_u(b);
    t->records = ml__get_u(b);
    t->rss_bytes = ml__get_u(b);
    t->peak_rss_bytes = ml__get_u(b);
    t->gpu_bytes = ml__get_u(b);
    t->peak_gpu_bytes = ml__get_u(b);
    t->exited = ml__get_max(b, 1, "bad flag");
}

/* Fills the fresh session `a` (nothing fed yet) from the bytes. */
static void restore(ml__ibuf_t *b, ml_analysis_t *a, bool packed) {
    uint64_t magic = ml__get_u(b);
    if (magic != SNAP_MAGIC && magic != SNAP_MAGIC_V7 && magic != SNAP_MAGIC_V6 && magic != SNAP_MAGIC_V5 &&
        magic != SNAP_MAGIC_V4 && magic != SNAP_MAGIC_V3 && magic != SNAP_MAGIC_V2 && magic != SNAP_MAGIC_V1) {
        ml__snap_bad(b, "it does not start with its magic number");
        return;
    }
    get_totals(b, &a->t);
    a->w_calls = ml__get_d(b);
    a->w_bytes = ml__get_d(b);
    a->w_reallocs = ml__get_d(b);
    a->seq = ml__get_max(b, (1ull << 48) - 1, "the event number is out of range");

    ml_process_info_t *q = &a->proc;
    q->pid = (uint32_t)ml__get_max(b, UINT32_MAX, "bad pid");
    q->ppid = (uint32_t)ml__get_max(b, UINT32_MAX, "bad pid");
    a->page_size = (uint32_t)ml__get_max(b, 1u << 30, "bad page size");
    if (!b->bad && (a->page_size < 512 || (a->page_size & (a->page_size - 1))))
        ml__snap_bad(b, "bad page size");
    q->page_size = a->page_size;
    q->start_realtime_ns = ml__get_u(b);
    q->sample_bytes = ml__get_u(b);
    q->unwinder = (uint32_t)ml__get_max(b, UINT32_MAX, "bad unwinder");
    q->depth = (uint32_t)ml__get_max(b, UINT32_MAX, "bad depth");
    char **s = a->proc_strings;
    s[0] = ml__get_str(b);
    s[1] = ml__get_str(b);
    s[2] = ml__get_str(b);
    q->argc = (uint32_t)ml__get_max(b, ML_MAX_ARGS, "too many arguments");
    for (uint32_t i = 0; i < q->argc && !b->bad; i++) s[4 + i] = ml__get_str(b);
    if (b->bad) return;
    q->exe = s[0];
    q->parent_trace = s[1];
    q->producer = s[2];
    q->argv = (const char *const *)(s + 4);

    uint64_t nmods = ml__get_count(b, 6, "more modules than the snapshot holds");
    if (b->bad) return;
    if (nmods) {
        a->mods = calloc(nmods, sizeof *a->mods);
        a->loaded_sorted = calloc(nmods, sizeof *a->loaded_sorted);
        if (!a->mods || !a->loaded_sorted) return (void)ml__snap_bad(b, "out of memory");
        a->mods_cap = (uint32_t)nmods;
    }
    for (uint64_t i = 0; i < nmods && !b->bad; i++) {
        ml__module_t *m = &a->mods[a->nmods++];
        m->path = ml__get_str(b);
        m->base = ml__get_u(b);
        m->lo = ml__get_u(b);
        m->hi = ml__get_u(b);
        uint64_t n = ml__get_count(b, 1, "a build-id is longer than the snapshot");
        if (b->bad) break;
        if (n) {
            m->build_id = malloc(n);
            if (!m->build_id) return (void)ml__snap_bad(b, "out of memory");
            memcpy(m->build_id, b->p + b->pos, n);
            b->pos += n;
            m->build_id_len = (uint32_t)n;
        }
        m->loaded = ml__get_max(b, 1, "bad flag");
    }
    a->loaded_dirty = true;

    uint64_t nstats = ml__get_count(b, 32, "more stacks than the snapshot holds");
    if (b->bad) return;
    if (nstats == 0) return (void)ml__snap_bad(b, "no stack table");
    free(a->stats);
    a->stats = calloc(nstats, sizeof *a->stats);
    if (!a->stats) return (void)ml__snap_bad(b, "out of memory");
    a->stats_cap = a->nstats = (uint32_t)nstats;
    for (uint32_t i = 0; i < a->nstats && !b->bad; i++) {
        ml__stack_stats_t *st = &a->stats[i];
        st->node = (uint32_t)ml__get_max(b, UINT32_MAX, "bad node");
        st->w_calls = ml__get_d(b);
        st->w_bytes = ml__get_d(b);
        st->temporary = ml__get_u(b);
        st->reallocs = ml__get_u(b);
        st->freed = ml__get_u(b);
        st->live_bytes = ml__get_u(b);
        st->live_blocks = ml__get_u(b);
        st->peak_bytes = ml__get_u(b);
        st->peak_blocks = ml__get_u(b);
        st->last_change = ml__get_u(b);
        st->min_size = ml__get_u(b);
        st->max_size = ml__get_u(b);
        st->size_mask = ml__get_u(b);
        st->life_sum = ml__get_u(b);
        st->life_max = ml__get_u(b);
        st->life_mask = ml__get_u(b);
        st->thread_mask = ml__get_u(b);
    }

    uint64_t nnodes = ml__get_count(b, 4, "more stack nodes than the snapshot holds");
    if (b->bad) return;
    if (nnodes) {
        uint32_t cap = 1024;
        while (cap < nnodes) cap *= 2;
        a->node_parent = calloc(cap, sizeof *a->node_parent);
        a->node_pc = calloc(cap, sizeof *a->node_pc);
        a->node_module = malloc(cap * sizeof *a->node_module);
        a->node_stat = calloc(cap, sizeof *a->node_stat);
        if (!a->node_parent || !a->node_pc || !a->node_module || !a->node_stat)
            return (void)ml__snap_bad(b, "out of memory");
        for (uint32_t i = 0; i < cap; i++) a->node_module[i] = -1;
        a->node_cap = cap;
        a->nnodes = (uint32_t)nnodes;
    }
    uint64_t pc = 0;
    for (uint32_t i = 1; i < a->nnodes && !b->bad; i++) {
        uint64_t up = ml__get_u(b);
        if (up == 0 || up > i) return (void)ml__snap_bad(b, "a stack node's parent is not before it");
        a->node_parent[i] = i - (uint32_t)up;
        pc += (uint64_t)ml__get_s(b);
        a->node_pc[i] = pc;
        int64_t mod = ml__get_s(b);
        if (mod < -1 || mod >= (int64_t)a->nmods) return (void)ml__snap_bad(b, "a stack node names an unknown module");
        a->node_module[i] = (int32_t)mod;
        a->node_stat[i] = (uint32_t)ml__get_max(b, a->nstats - 1, "a stack node names an unknown stack");
    }
    for (uint32_t i = 1; i < a->nstats && !b->bad; i++)
        if (a->stats[i].node == 0 || a->stats[i].node >= a->nnodes)
            return (void)ml__snap_bad(b, "a stack names an unknown node");

    if (magic == SNAP_MAGIC || magic == SNAP_MAGIC_V7 || magic == SNAP_MAGIC_V6 || magic == SNAP_MAGIC_V5)
        get_live(b, &a->heap, a->nstats, packed);
    else get_live_map(b, &a->heap, a->nstats);
    get_map(b, &a->maps, UINT32_MAX);
    /* Saved before the maps were shrunk at the end record (older traces):
     * shrunk now, as a replay does (analysis.c, ml__shrink_live). */
    if (!b->bad && a->t.complete) ml__shrink_live(a);
    for (int i = 0; i < 2 && !b->bad; i++) {
        get_moment(b, &a->mom[i]);
        get_frag(b, &a->snap_frag_set[i], &a->snap_frag[i], &a->snap_cells[i]);
        if (!b->bad && a->mom[i].set != a->snap_frag_set[i]) ml__snap_bad(b, "a moment without its fragmentation");
    }
    a->pages.nonzero = ml__get_u(b);
    a->pages.interior = ml__get_u(b);

    a->have_mallinfo = ml__get_max(b, 1, "bad flag");
    a->have_rss = ml__get_max(b, 1, "bad flag");
    a->mallinfo_time_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "bad time");
    for (int i = 0; i < 5; i++) a->mallinfo[i] = ml__get_u(b);

    a->tl_width = (uint32_t)ml__get_max(b, UINT32_MAX, "bad timeline width");
    if (!b->bad && a->tl_width == 0) return (void)ml__snap_bad(b, "bad timeline width");
    for (uint32_t i = 0; i < ML_TIMELINE_MAX && !b->bad; i++) {
        ml__tl_bucket_t *k = &a->tl[i];
        k->used = ml__get_max(b, 1, "bad flag");
        if (!k->used) continue;
        k->t_max = (uint32_t)ml__get_max(b, UINT32_MAX, "bad time");
        k->heap_max = ml__get_u(b);
        k->rss = ml__get_u(b);
        k->mmap_max = ml__get_u(b);
        k->gpu_max = ml__get_u(b);
        k->calls = ml__get_u(b);
    }

    ml_histograms_t *h = &a->hist;
    for (int i = 0; i < 64; i++) {
        h->size_count[i] = ml__get_u(b);
        h->size_bytes[i] = ml__get_u(b);
        h->life_count[i] = ml__get_u(b);
    }
    h->size_first = (uint32_t)ml__get_max(b, 63, "bad histogram bucket");
    h->size_last = (uint32_t)ml__get_max(b, 63, "bad histogram bucket");
    h->life_last = (uint32_t)ml__get_max(b, 63, "bad histogram bucket");
    h->live_at_end = ml__get_u(b);

    uint64_t nthreads = ml__get_count(b, 1, "more threads than the snapshot holds");
    if (!b->bad && nthreads > ML__MAX_THREADS) return (void)ml__snap_bad(b, "too many threads");
    if (b->bad) return;
    if (nthreads) {
        a->threads = calloc(nthreads, sizeof *a->threads);
        if (!a->threads) return (void)ml__snap_bad(b, "out of memory");
        a->nthreads = (uint32_t)nthreads;
    }
    for (uint32_t i = 0; i < a->nthreads && !b->bad; i++) {
        ml__thread_t *th = &a->threads[i];
        th->seen = ml__get_max(b, 1, "bad flag");
        if (!th->seen) continue;
        th->tid = (uint32_t)ml__get_max(b, UINT32_MAX, "bad tid");
        th->name = ml__get_str(b);
        th->alloc_calls = ml__get_u(b);
        th->bytes_allocated = ml__get_u(b);
        th->free_calls = ml__get_u(b);
        th->temporary = ml__get_u(b);
        th->w_calls = ml__get_d(b);
        th->w_bytes = ml__get_d(b);
    }

    a->scanned = ml__get_max(b, 1, "bad flag");
    a->scan.scanned = ml__get_max(b, 1, "bad flag");
    int64_t status = ml__get_s(b);
    if (status > 0 || status < INT32_MIN) ml__snap_bad(b, "bad scan status");
    a->scan.scan_status = (int32_t)status;
    a->scan.scan_root_bytes = ml__get_u(b);
    a->scan.scan_heap_bytes = ml__get_u(b);
    a->scan.scan_duration_us = ml__get_u(b);

    uint64_t nwarn = ml__get_count(b, 1, "more warnings than the snapshot holds");
    for (uint64_t i = 0; i < nwarn && !b->bad; i++) {
        char *w = ml__get_str(b);
        if (w) {
            ml__warn(a, "%s", w);
            free(w);
        }
    }
    if (magic != SNAP_MAGIC_V1 && !b->bad && ml__get_max(b, 1, "bad flag"))
        ml__gpu_restore(&a->gpu, b);
    if ((magic == SNAP_MAGIC || magic == SNAP_MAGIC_V7 || magic == SNAP_MAGIC_V6 || magic == SNAP_MAGIC_V5 ||
         magic == SNAP_MAGIC_V4 || magic == SNAP_MAGIC_V3) &&
        !b->bad) {
        a->t.hwm_rss_bytes = ml__get_u(b);
        a->t.hwm_rss_source = (uint8_t)ml__get_max(b, ML_HWM_SOURCE_COUNT_ - 1, "bad peak RSS source");
    }
    if ((magic == SNAP_MAGIC || magic == SNAP_MAGIC_V7 || magic == SNAP_MAGIC_V6 || magic == SNAP_MAGIC_V5 ||
         magic == SNAP_MAGIC_V4) &&
        !b->bad) {
        a->proc.options = (uint32_t)ml__get_max(b, UINT32_MAX, "bad options");
        a->t.unknown_free_bytes = ml__get_u(b);
    }
    if ((magic == SNAP_MAGIC || magic == SNAP_MAGIC_V7 || magic == SNAP_MAGIC_V6) && !b->bad)
        a->t.rss_interval_ms = (uint32_t)ml__get_max(b, UINT32_MAX, "bad RSS interval");
    if (magic == SNAP_MAGIC && !b->bad) {
        a->t.alloc_mmap_calls = ml__get_u(b);
        a->t.alloc_munmap_calls = ml__get_u(b);
        a->t.alloc_mmap_bytes = ml__get_u(b);
        a->t.peak_alloc_mmap_bytes = ml__get_u(b);
    }
    if (ml__get_u(b) != magic || b->pos != b->len) ml__snap_bad(b, "it does not end where it should");
}

static int restore_into(ml_analysis_t *a, const void *data, size_t len, bool packed, char *err,
                        size_t errlen) {
    ml_analysis_t *n;
    if (ml_analysis_new(&n) < 0) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    ml__ibuf_t b = {.p = data, .len = len};
    restore(&b, n, packed);
    if (b.bad) {
        snprintf(err, errlen, "the analysis snapshot is damaged (%s)", b.why);
        ml_analysis_free(n);
        return -EINVAL;
    }
    /* Swap the restored state into the caller's (fresh) session. */
    ml_analysis_t old = *a;
    *a = *n;
    *n = old;
    a->proc.argv = (const char *const *)(a->proc_strings + 4); /* pointed into n */
    ml_analysis_free(n);
    return 0;
}

int ml_analysis_restore(ml_analysis_t *a, const void *data, size_t len, char *err, size_t errlen) {
    return restore_into(a, data, len, false, err, errlen);
}

int ml__analysis_restore_packed(ml_analysis_t *a, void *data, size_t len, char *err, size_t errlen) {
    int rc = restore_into(a, data, len, true, err, errlen);
    if (rc < 0) return rc;
    if (!a->heap.packed) return 0;
    ml__live_own_packed(&a->heap, data);
    return 1;
}
