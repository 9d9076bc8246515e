/* sim_replay.c - from trace records to ops, and ops to every policy.
 *
 * Decoding (in the caller's thread): a hash from recorded address to a dense
 * id (ids are recycled last-in first-out, so the largest id stays close to
 * the largest number of live blocks), a realloc as free + alloc, a failed
 * realloc restoring the old block, the alignment a kind implies, and the
 * temporary flag, which needs the op after the allocation: the batch keeps
 * the ops from the last allocation on when it is handed over, so that the
 * flag can still be set.
 *
 * A replay may log every op it dispatches (ml_sim_replay_log, sim_oplog.c);
 * a later replay of the same trace is then fed from the log
 * (ml_sim_replay_oplog) and decodes nothing.
 *
 * Dispatch: NBUF op buffers. The caller fills one while the workers run
 * the tasks (each policy, the observer, the log) over the batches handed
 * over before it. A task is run by one worker at a time and takes the
 * batches in order, so each policy still sees every op in order and needs
 * no locking; but the tasks go at their own pace, so a worker that is done
 * with one takes another's next batch instead of waiting for the slowest
 * at a barrier after every batch.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define BATCH_OPS 65536
#define NBUF 4 /* batches in flight: one filled, three for the workers */
#define FEED_AHEAD 8
#define STASH_THREADS 1024
/* A free of a block allocated more than this many ops before is "far": its
 * tables have left the caches of the worker that replays it. */
#define FAR_OPS 4096

typedef struct {
    uint64_t ptr;
    uint32_t id;
    uint32_t unused;
} idslot_t;

ML_MAP_TYPED(ids, idslot_t, 4096)

typedef struct {
    uint64_t ptr, size;
    uint32_t site;
    uint32_t thread; /* + 1; 0 = empty */
} stash_t;

struct ml_sim_replay_s {
    ml_sim_policy_t **pol;
    double *cost;     /* CPU seconds of each policy's last batch (under mu) */
    size_t npol, polcap;
    /* id map */
    ml_map_t map; /* idslot_t by recorded address */
    uint64_t *id_size;
    uint32_t *id_site, *id_free;
    uint32_t *id_at; /* the op index (mod 2^32) of each live id's allocation */
    uint32_t idcap, idcap2, nfree_ids, next_id;
    stash_t stash[STASH_THREADS];
    /* batches: batch b (from 0) is filled in buf[b % NBUF] */
    ml_sim_op_t *buf[NBUF];
    size_t buf_n[NBUF]; /* the ops handed over in each buffer */
    bool buf_pf[NBUF];  /* whether the workers prefetch for the batch (run_policy) */
    uint32_t batch_frees, batch_far; /* the fill buffer's frees, and those that are far */
    bool from_log;      /* fed from an op log: no ages, every batch prefetched */
    size_t len;  /* ops in buf[fill] */
    int fill;
    size_t last_alloc; /* index in buf[fill] of the last alloc, or SIZE_MAX */
    uint32_t last_alloc_id;
    uint64_t ops;
    uint64_t sample_bytes;
    bool sampled;
    ml_sim_observer_fn observe;
    void *observe_ctx;
    ml_sim_record_fn on_record;
    void *on_record_ctx;
    ml_sim_oplog_t *log; /* every dispatched op is appended (sim_oplog.c) */
    ml_sim_fpseries_t *series; /* policy series_pol's footprint, op by op */
    size_t series_pol;
    uint64_t series_last; /* the value last given to the series (0 before: its start) */
    /* ml_sim_replay_reserve's size, for the policies whose flag is set:
     * each is sized by the thread that runs its first batch */
    uint32_t reserve_live;
    bool reserve_driver; /* the map and id tables: at the first record fed (none from a log) */
    uint8_t *reserve_pending; /* reserve_n flags */
    size_t reserve_n;
    /* workers. A task is a policy, or the observer or the log (run_extra),
     * which see every batch in order as a policy does. Each task goes
     * through the batches at its own pace: a worker takes any task that is
     * not running and has a batch it has not done, so a slow policy does
     * not hold the others at a barrier after every batch. A buffer is
     * filled again once every task is past the batch it held. */
    unsigned nthreads;
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t published;  /* batches handed over */
    unsigned nextra;     /* tasks before the policies (run_extra) */
    unsigned ntasks;     /* nextra + npol */
    uint64_t *task_done; /* ntasks: batches each task has done */
    uint8_t *task_busy;  /* ntasks: a worker runs it */
    bool quit, started, finished;
    int err;
};

static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double run_policy(ml_sim_replay_t *r, uint32_t k, const ml_sim_op_t *ops, size_t n, bool prefetch) {
    ml_sim_policy_t *p = r->pol[k];
    double t0 = thread_cpu();
    if (k < r->reserve_n && r->reserve_pending[k]) {
        /* A hint only: on failure the tables grow as the ops need them. */
        (void)ml_sim_reserve(p, r->reserve_live);
        r->reserve_pending[k] = 0;
    }
    void (*pf)(const ml_sim_policy_t *, const ml_sim_op_t *, int) = p->vt->prefetch;
    ml_sim_fpseries_t *series = r->series && k == r->series_pol ? r->series : NULL;
    /* Prefetch, when the batch's frees are far (batch_prefetch), in three
     * stages (sim_internal.h): the per-id tables 16 ops ahead, what they
     * point to 8 ahead, the next level 4 ahead. */
    for (size_t i = 0; i < n; i++) {
        if (prefetch) {
            if (i + 16 < n) ml__sim_prefetch(p, pf, &ops[i + 16], 0);
            if (i + 8 < n) ml__sim_prefetch(p, pf, &ops[i + 8], 1);
            if (i + 4 < n) ml__sim_prefetch(p, pf, &ops[i + 4], 2);
        }
        ml__sim_apply(p, &ops[i]);
        /* the series keeps only changes: most ops leave the footprint as
         * it was, and need no call */
        if (series) {
            uint64_t fp = ml__sim_footprint(p);
            if (fp != r->series_last) {
                ml__sim_fpseries_note(series, p->seq, fp);
                r->series_last = fp;
            }
        }
    }
    double dt = thread_cpu() - t0;
    p->cpu_seconds += dt;
    return dt;
}

/* The tasks of a batch besides the policies, first (the longest): the
 * observer and the log read the batch as the policies do, and running them
 * on the workers leaves the caller's thread to decode the next batch
 * (clang-format's pass 1 waited on that thread, the two policies' workers
 * mostly idle). */
static unsigned extra_tasks(const ml_sim_replay_t *r) {
    return (r->observe != NULL) + (r->log != NULL);
}

static void run_extra(ml_sim_replay_t *r, unsigned t, const ml_sim_op_t *ops, size_t n) {
    if (t == 0 && r->observe) r->observe(r->observe_ctx, ops, n);
    else ml__sim_oplog_append(r->log, ops, n);
}

/* Runs task t (an extra, then the policies) over ops; its CPU seconds for
 * a policy, 0 for an extra. */
static double run_task(ml_sim_replay_t *r, unsigned t, const ml_sim_op_t *ops, size_t n, bool prefetch) {
    if (t < r->nextra) {
        run_extra(r, t, ops, n);
        return 0;
    }
    return run_policy(r, t - r->nextra, ops, n, prefetch);
}

/* The task a worker should take now, or -1: of those not running and with
 * a batch to do, the one furthest behind, then the costliest (its last
 * batch's CPU time) -- the extras first, being the longest. Under mu. */
static int pick_task(const ml_sim_replay_t *r) {
    int best = -1;
    for (unsigned t = 0; t < r->ntasks; t++) {
        if (r->task_busy[t] || r->task_done[t] >= r->published) continue;
        if (best < 0 || r->task_done[t] < r->task_done[best]) {
            best = (int)t;
            continue;
        }
        if (r->task_done[t] == r->task_done[best] && t >= r->nextra && best >= (int)r->nextra &&
            r->cost[t - r->nextra] > r->cost[best - r->nextra])
            best = (int)t;
    }
    return best;
}

static void *worker(void *arg) {
    ml_sim_replay_t *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        int t;
        while ((t = pick_task(r)) < 0 && !r->quit) pthread_cond_wait(&r->cv_work, &r->mu);
        if (t < 0) break; /* quit, and nothing left to do */
        uint64_t b = r->task_done[t];
        const ml_sim_op_t *ops = r->buf[b % NBUF];
        size_t n = r->buf_n[b % NBUF];
        bool prefetch = r->buf_pf[b % NBUF];
        r->task_busy[t] = 1;
        pthread_mutex_unlock(&r->mu);
        double dt = run_task(r, (unsigned)t, ops, n, prefetch);
        pthread_mutex_lock(&r->mu);
        if ((unsigned)t >= r->nextra) r->cost[t - r->nextra] = dt;
        r->task_busy[t] = 0;
        r->task_done[t]++;
        /* the caller may wait for a buffer, or for the end; the other
         * workers for this task */
        pthread_cond_broadcast(&r->cv_done);
        pthread_cond_broadcast(&r->cv_work);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* The fewest batches any task has done. Under mu. */
static uint64_t slowest(const ml_sim_replay_t *r) {
    uint64_t m = UINT64_MAX;
    for (unsigned t = 0; t < r->ntasks; t++)
        if (r->task_done[t] < m) m = r->task_done[t];
    return m == UINT64_MAX ? r->published : m;
}

/* Waits until every task has done at least `batches` batches. */
static void wait_done(ml_sim_replay_t *r, uint64_t batches) {
    if (!r->started) return;
    pthread_mutex_lock(&r->mu);
    while (slowest(r) < batches) pthread_cond_wait(&r->cv_done, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

static void wait_idle(ml_sim_replay_t *r) {
    wait_done(r, r->published);
}

static int start_workers(ml_sim_replay_t *r) {
    r->nextra = extra_tasks(r);
    r->ntasks = r->nextra + (unsigned)r->npol;
    r->task_done = calloc(r->ntasks, sizeof *r->task_done);
    r->task_busy = calloc(r->ntasks, sizeof *r->task_busy);
    r->th = calloc(r->nthreads, sizeof *r->th);
    if (!r->th || !r->task_done || !r->task_busy) return -ENOMEM;
    for (unsigned i = 0; i < r->nthreads; i++) {
        if (pthread_create(&r->th[i], NULL, worker, r) != 0) {
            r->nthreads = i; /* run with the ones that started */
            break;
        }
    }
    r->started = r->nthreads > 0;
    return 0;
}

/* Whether the workers prefetch for the batch in the fill buffer: when at
 * least a third of its frees are far (FAR_OPS). A free that follows its
 * allocation closely finds the policies' tables in the caches, and then the
 * prefetches (three calls an op) are only work: on cppcheck's report, where
 * 12 % of the frees are far, they were about a tenth of pass 1's CPU time;
 * on bench/report_workload.c's trace, whose blocks are freed at random
 * (93 % far), they save a quarter of it. Which batches prefetch changes no
 * result. A replay fed from a log knows no ages and prefetches as before. */
static bool batch_prefetch(ml_sim_replay_t *r) {
    bool pf = r->from_log || r->batch_far * 3 >= r->batch_frees;
    r->batch_far = r->batch_frees = 0;
    return pf;
}

/* Hands the first n ops of the fill buffer to the tasks, and moves the fill
 * buffer on to the next, once every task is past the batch it held. */
static void dispatch(ml_sim_replay_t *r, size_t n) {
    ml_sim_op_t *ops = r->buf[r->fill];
    bool prefetch = batch_prefetch(r);
    r->ops += n;
    if (r->nthreads && r->npol && !r->started && start_workers(r) < 0) r->nthreads = 0;
    if (!r->started) {
        for (unsigned t = 0; t < extra_tasks(r); t++) run_extra(r, t, ops, n);
        for (uint32_t k = 0; k < r->npol; k++) run_policy(r, k, ops, n, prefetch);
        return;
    }
    pthread_mutex_lock(&r->mu);
    r->buf_n[r->fill] = n;
    r->buf_pf[r->fill] = prefetch;
    r->published++;
    pthread_cond_broadcast(&r->cv_work);
    pthread_mutex_unlock(&r->mu);
    r->fill = (int)(r->published % NBUF);
    /* the next batch's buffer held batch published - NBUF */
    if (r->published >= NBUF) wait_done(r, r->published - NBUF + 1);
}

/* The fill buffer is full: hand it over, keeping the ops from the last
 * allocation on (when that is at most half of it) for its temporary flag. */
static void flush_full(ml_sim_replay_t *r) {
    size_t keep_from = r->len;
    if (r->last_alloc != SIZE_MAX && r->len - r->last_alloc <= BATCH_OPS / 2) keep_from = r->last_alloc;
    ml_sim_op_t *old = r->buf[r->fill];
    size_t keep = r->len - keep_from;
    if (!keep_from) { /* nothing to hand over without the pending tail */
        keep_from = r->len;
        keep = 0;
    }
    dispatch(r, keep_from);
    ml_sim_op_t *nb = r->buf[r->fill];
    if (nb != old) {
        memcpy(nb, old + keep_from, keep * sizeof *nb);
    } else {
        memmove(nb, old + keep_from, keep * sizeof *nb);
    }
    r->len = keep;
    r->last_alloc = keep ? 0 : SIZE_MAX;
}

static inline ml_sim_op_t *push(ml_sim_replay_t *r) {
    if (r->len == BATCH_OPS) flush_full(r);
    ml_sim_op_t *op = &r->buf[r->fill][r->len++];
    *op = (ml_sim_op_t){0};
    return op;
}

/* ------------------------------------------------------------------------- */
/* Address -> id                                                              */
/* ------------------------------------------------------------------------- */


static int new_id(ml_sim_replay_t *r, uint32_t *id) {
    if (r->nfree_ids) {
        *id = r->id_free[--r->nfree_ids];
        return 0;
    }
    uint32_t x = r->next_id;
    if (x >= r->idcap) {
        uint32_t cap = r->idcap;
        if (ml__sim_grow((void **)&r->id_size, &cap, x, sizeof *r->id_size, 0) < 0) return -ENOMEM;
        cap = r->idcap;
        if (ml__sim_grow((void **)&r->id_site, &cap, x, sizeof *r->id_site, 0) < 0) return -ENOMEM;
        cap = r->idcap;
        if (ml__sim_grow((void **)&r->id_free, &cap, x, sizeof *r->id_free, 0) < 0) return -ENOMEM;
        cap = r->idcap;
        if (ml__sim_grow((void **)&r->id_at, &cap, x, sizeof *r->id_at, 0) < 0) return -ENOMEM;
        r->idcap = cap;
    }
    r->next_id++;
    *id = x;
    return 0;
}

static unsigned kind_align(unsigned kind, uint64_t ptr, unsigned page_log2) {
    switch (kind) {
    case ML_KIND_VALLOC:
    case ML_KIND_PVALLOC:
        return page_log2;
    case ML_KIND_POSIX_MEMALIGN:
    case ML_KIND_ALIGNED_ALLOC:
    case ML_KIND_MEMALIGN: {
        /* The trace has no alignment argument; the address's own alignment
         * bounds it from above. Capped at a page. */
        unsigned a = ptr ? (unsigned)__builtin_ctzll(ptr) : page_log2;
        return a > page_log2 ? page_log2 : a;
    }
    default:
        return 0;
    }
}

/* The free op of live block `id` at `ptr`; its id goes back to the pool (the
 * caller removes or reuses its map entry). */
static void emit_free_op(ml_sim_replay_t *r, uint32_t id, uint64_t ptr, const ml_record_t *rec, uint8_t flags) {
    ml_sim_op_t *op = push(r);
    op->type = ML_SIM_FREE;
    op->id = id;
    op->ptr = ptr;
    op->size = r->id_size[id];
    op->site = r->id_site[id];
    op->time_ms = rec->time_ms;
    op->thread = (uint16_t)rec->thread;
    op->flags = flags;
    r->batch_frees++;
    r->batch_far += (uint32_t)(r->ops + r->len) - r->id_at[id] > FAR_OPS;
    if (!(flags & ML_SIM_F_REALLOC) && r->last_alloc != SIZE_MAX && r->last_alloc_id == id) {
        r->buf[r->fill][r->last_alloc].flags |= ML_SIM_F_TEMPORARY;
    }
    if (r->last_alloc != SIZE_MAX && r->last_alloc_id == id) r->last_alloc = SIZE_MAX;
    r->id_free[r->nfree_ids++] = id;
}

static void emit_free(ml_sim_replay_t *r, idslot_t *e, const ml_record_t *rec, uint8_t flags) {
    emit_free_op(r, e->id, e->ptr, rec, flags);
    ids_remove(&r->map, e);
}

static int emit_alloc(ml_sim_replay_t *r, uint64_t ptr, uint64_t size, uint32_t site, uint8_t align,
                      uint8_t flags, const ml_record_t *rec) {
    bool existed;
    idslot_t *e = ids_put(&r->map, ptr, &existed); /* one probe: the entry is reused */
    if (!e) return -ENOMEM;
    if (existed) emit_free_op(r, e->id, ptr, rec, 0); /* a free we never saw */
    uint32_t id;
    if (new_id(r, &id) < 0) {
        ids_remove(&r->map, e);
        return -ENOMEM;
    }
    e->id = id;
    r->id_size[id] = size;
    r->id_site[id] = site;
    ml_sim_op_t *op = push(r);
    r->id_at[id] = (uint32_t)(r->ops + r->len);
    op->type = ML_SIM_ALLOC;
    op->id = id;
    op->ptr = ptr;
    op->size = size;
    op->site = site;
    op->time_ms = rec->time_ms;
    op->thread = (uint16_t)rec->thread;
    op->align = align;
    op->flags = flags;
    r->last_alloc = r->len - 1;
    r->last_alloc_id = id;
    return 0;
}

static void driver_reserve(ml_sim_replay_t *r);

int ml_sim_replay_feed(ml_sim_replay_t *r, const ml_record_t *rec) {
    if (r->err) return r->err;
    if (__builtin_expect(r->reserve_driver, 0)) driver_reserve(r);
    stash_t *st = &r->stash[rec->thread % STASH_THREADS];
    switch (rec->tag) {
    case ML_T_PROCESS:
        r->sample_bytes = rec->u.process.sample_bytes;
        break;
    case ML_T_ALLOC: {
        unsigned kind = rec->u.alloc.kind;
        uint64_t ptr = rec->u.alloc.ptr, size = rec->u.alloc.size;
        if (!ptr) break;
        uint8_t flags = 0;
        if (kind == ML_KIND_REALLOC || kind == ML_KIND_REALLOCARRAY) flags |= ML_SIM_F_REALLOC;
        if (rec->u.alloc.flags & ML_EVF_SAMPLED) {
            flags |= ML_SIM_F_SAMPLED;
            r->sampled = true;
        }
        if (kind == ML_KIND_PVALLOC) size = (size + 4095) & ~(uint64_t)4095;
        if (st->thread == rec->thread + 1) st->thread = 0;
        r->err = emit_alloc(r, ptr, size, rec->u.alloc.stack, (uint8_t)kind_align(kind, ptr, 12), flags, rec);
        break;
    }
    case ML_T_FREE: {
        idslot_t *e = ids_find(&r->map, rec->u.alloc.ptr);
        if (!e) break;
        bool re = rec->u.alloc.kind != ML_KIND_FREE;
        if (re) *st = (stash_t){e->ptr, r->id_size[e->id], r->id_site[e->id], rec->thread + 1};
        emit_free(r, e, rec, re ? ML_SIM_F_REALLOC : 0);
        break;
    }
    case ML_T_REALLOC_FAIL:
        if (st->thread == rec->thread + 1 && st->ptr == rec->u.alloc.ptr) {
            st->thread = 0;
            r->err = emit_alloc(r, st->ptr, st->size, st->site, 0, ML_SIM_F_REALLOC, rec);
        }
        break;
    case ML_T_MALLINFO: {
        ml_sim_op_t *op = push(r);
        op->type = ML_SIM_MALLINFO;
        op->size = rec->u.mallinfo.arena + rec->u.mallinfo.hblkhd;
        op->time_ms = rec->time_ms;
        break;
    }
    default:
        break;
    }
    return r->err;
}

int ml_sim_replay_file_progress(ml_sim_replay_t *r, const char *path, const char *label, char *err,
                                size_t errlen) {
    ml_reader_t *rd;
    int rc = ml_reader_open(path, &rd, err, errlen);
    if (rc < 0) return rc;
    ml_progress_t progress;
    ml_progress_start(&progress, rd, label ? label : "", NULL);
    progress.on = progress.on && label;
    /* Records are read FEED_AHEAD ahead of the one fed, and the address map
     * slot of each is prefetched when it is read: the map's probes go to
     * random slots of a table of the live blocks, and waiting for that miss
     * was a third of this thread's time. The feed uses no record strings,
     * which are valid only until the next read. */
    ml_record_t *ahead = malloc(FEED_AHEAD * sizeof *ahead);
    if (!ahead) {
        ml_progress_end(&progress);
        ml_reader_close(rd);
        snprintf(err, errlen, "out of memory replaying %s", path);
        return -ENOMEM;
    }
    size_t head = 0, n = 0;
    bool eof = false;
    for (;;) {
        while (!eof && n < FEED_AHEAD) {
            ml_record_t *rec = &ahead[(head + n) % FEED_AHEAD];
            if ((rc = ml_reader_next(rd, rec)) <= 0) {
                eof = true;
                break;
            }
            if (r->on_record) r->on_record(r->on_record_ctx, rec);
            if (rec->tag == ML_T_ALLOC || rec->tag == ML_T_FREE) ids_prefetch(&r->map, rec->u.alloc.ptr);
            n++;
        }
        if (!n) break;
        int frc = ml_sim_replay_feed(r, &ahead[head]);
        head = (head + 1) % FEED_AHEAD;
        n--;
        if (frc < 0) {
            rc = frc;
            snprintf(err, errlen, "out of memory replaying %s", path);
            break;
        }
        ml_progress_tick(&progress);
    }
    free(ahead);
    ml_progress_end(&progress);
    if (rc == 0 && r->on_record) r->on_record(r->on_record_ctx, NULL);
    if (rc < 0 && rc != -ENOMEM) snprintf(err, errlen, "%s: %s", path, ml_reader_error(rd));
    ml_reader_close(rd);
    return rc < 0 ? rc : 0;
}

int ml_sim_replay_file(ml_sim_replay_t *r, const char *path, char *err, size_t errlen) {
    return ml_sim_replay_file_progress(r, path, NULL, err, errlen);
}

void ml_sim_replay_log(ml_sim_replay_t *r, ml_sim_oplog_t *log) {
    r->log = log;
}

void ml_sim_replay_series(ml_sim_replay_t *r, size_t i, ml_sim_fpseries_t *s) {
    r->series = i < r->npol ? s : NULL;
    r->series_pol = i;
}

/* Where the log decodes its next op: the fill buffer's next slot (it used
 * to be decoded on the stack and copied there by a callback). The op
 * decoded before it is complete now: its flags are final, so a full batch
 * goes whole. */
static ml_sim_op_t *logged_slot(void *ctx) {
    ml_sim_replay_t *r = ctx;
    if (r->len) {
        if (r->buf[r->fill][r->len - 1].flags & ML_SIM_F_SAMPLED) r->sampled = true;
        if (r->len == BATCH_OPS) {
            dispatch(r, r->len);
            r->len = 0;
        }
    }
    return &r->buf[r->fill][r->len++];
}

int ml_sim_replay_oplog(ml_sim_replay_t *r, ml_sim_oplog_t *log, const char *label, char *err,
                        size_t errlen) {
    if (r->err) return r->err;
    if (r->ops || r->len) {
        snprintf(err, errlen, "a replay reads a log only from its start");
        return -EINVAL;
    }
    int rc = ml__sim_oplog_rewind(log);
    if (rc < 0) {
        snprintf(err, errlen, "the replay's log of operations is not usable");
        return rc;
    }
    uint64_t at = 0;
    r->from_log = true;
    ml_progress_t progress;
    ml_progress_start_at(&progress, &at, ml_sim_oplog_bytes(log), label ? label : "", NULL);
    progress.on = progress.on && label;
    rc = ml__sim_oplog_read(log, logged_slot, r, &at, &progress);
    ml_progress_end(&progress);
    if (rc == 0 && r->len && (r->buf[r->fill][r->len - 1].flags & ML_SIM_F_SAMPLED)) r->sampled = true;
    if (rc < 0) r->len = 0; /* the last slot may hold an op cut short: the replay has failed */
    if (rc < 0)
        snprintf(err, errlen, "reading the replay's log of operations back: %s",
                 rc == -ENOMEM ? "out of memory" : "it is shorter than written");
    return rc;
}

int ml_sim_replay_finish(ml_sim_replay_t *r) {
    if (r->finished) return r->err;
    r->finished = true;
    if (r->len) dispatch(r, r->len);
    r->len = 0;
    r->last_alloc = SIZE_MAX;
    wait_idle(r);
    if (r->series) ml__sim_fpseries_finish(r->series);
    return r->err;
}

/* ------------------------------------------------------------------------- */
/* Lifecycle                                                                  */
/* ------------------------------------------------------------------------- */

int ml_sim_replay_new(unsigned threads, ml_sim_replay_t **out) {
    ml_sim_replay_t *r = calloc(1, sizeof *r);
    if (!r) return -ENOMEM;
    bool ok = true;
    for (int i = 0; i < NBUF; i++) ok = (r->buf[i] = malloc(BATCH_OPS * sizeof(ml_sim_op_t))) && ok;
    if (!ok) {
        for (int i = 0; i < NBUF; i++) free(r->buf[i]);
        free(r);
        return -ENOMEM;
    }
    r->nthreads = threads;
    r->last_alloc = SIZE_MAX;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv_work, NULL);
    pthread_cond_init(&r->cv_done, NULL);
    *out = r;
    return 0;
}

int ml_sim_replay_add(ml_sim_replay_t *r, ml_sim_policy_t *p) {
    if (!p) return -EINVAL;
    if (r->ops || r->started) { /* policies join before the first op */
        ml_sim_policy_free(p);
        return -EBUSY;
    }
    if (r->npol == r->polcap) {
        size_t ncap = r->polcap ? r->polcap * 2 : 16;
        ml_sim_policy_t **n = realloc(r->pol, ncap * sizeof *n);
        double *c = realloc(r->cost, ncap * sizeof *c);
        if (n) r->pol = n;
        if (c) r->cost = c;
        if (!n || !c) {
            ml_sim_policy_free(p);
            return -ENOMEM;
        }
        r->polcap = ncap;
    }
    r->cost[r->npol] = 0;
    r->pol[r->npol++] = p;
    return 0;
}

/* The address map and the id tables for reserve_live blocks, made when the
 * first record is fed: a replay fed from an op log (pass 2) decodes nothing
 * and needs none of them, and making them (some 10 MiB on cppcheck's trace,
 * zeroed page by page by the kernel) was most of the time pass 2's reading
 * thread spent alone before its workers started. A hint: a table that
 * cannot be made now grows as the records need it. */
static void driver_reserve(ml_sim_replay_t *r) {
    r->reserve_driver = false;
    uint32_t live = r->reserve_live;
    while ((uint64_t)(live + 1) * 4 > r->map.cap * 3)
        if (ml_map_grow(&r->map, sizeof(idslot_t), 4096) < 0) return;
    uint32_t cap = r->idcap;
    if (ml__sim_reserve_ids((void **)&r->id_size, &cap, live, sizeof *r->id_size, 0) < 0) return;
    cap = r->idcap;
    if (ml__sim_reserve_ids((void **)&r->id_site, &cap, live, sizeof *r->id_site, 0) < 0) return;
    cap = r->idcap;
    if (ml__sim_reserve_ids((void **)&r->id_free, &cap, live, sizeof *r->id_free, 0) < 0) return;
    cap = r->idcap;
    if (ml__sim_reserve_ids((void **)&r->id_at, &cap, live, sizeof *r->id_at, 0) < 0) return;
    r->idcap = cap;
}

int ml_sim_replay_reserve(ml_sim_replay_t *r, uint32_t live) {
    if (!live) return 0;
    r->reserve_live = live;
    r->reserve_driver = true;
    if (!r->npol) return 0;
    uint8_t *pend = realloc(r->reserve_pending, r->npol);
    if (!pend) return -ENOMEM;
    memset(pend, 1, r->npol);
    r->reserve_pending = pend;
    r->reserve_n = r->npol;
    r->reserve_live = live;
    return 0;
}

void ml_sim_replay_records(ml_sim_replay_t *r, ml_sim_record_fn fn, void *ctx) {
    r->on_record = fn;
    r->on_record_ctx = ctx;
}

void ml_sim_replay_observe(ml_sim_replay_t *r, ml_sim_observer_fn fn, void *ctx) {
    r->observe = fn;
    r->observe_ctx = ctx;
}

size_t ml_sim_replay_count(const ml_sim_replay_t *r) {
    return r->npol;
}

ml_sim_policy_t *ml_sim_replay_policy(const ml_sim_replay_t *r, size_t i) {
    return i < r->npol ? r->pol[i] : NULL;
}

void ml_sim_replay_metrics(const ml_sim_replay_t *r, size_t i, ml_sim_metrics_t *m) {
    ml_sim_metrics(r->pol[i], m);
}

uint64_t ml_sim_replay_ops(const ml_sim_replay_t *r) {
    return r->ops;
}

bool ml_sim_replay_sampled(const ml_sim_replay_t *r) {
    return r->sampled;
}

uint64_t ml_sim_replay_state_bytes(const ml_sim_replay_t *r) {
    return sizeof *r + NBUF * BATCH_OPS * sizeof(ml_sim_op_t) + r->map.cap * sizeof(idslot_t) +
           (uint64_t)r->idcap * 20;
}

void ml_sim_replay_free(ml_sim_replay_t *r) {
    if (!r) return;
    if (r->started) {
        wait_idle(r);
        pthread_mutex_lock(&r->mu);
        r->quit = true;
        pthread_cond_broadcast(&r->cv_work);
        pthread_mutex_unlock(&r->mu);
        for (unsigned i = 0; i < r->nthreads; i++) pthread_join(r->th[i], NULL);
    }
    free(r->th);
    for (size_t i = 0; i < r->npol; i++) ml_sim_policy_free(r->pol[i]);
    free(r->pol);
    free(r->cost);
    free(r->reserve_pending);
    ml_map_free(&r->map);
    free(r->id_size);
    free(r->id_site);
    free(r->id_free);
    free(r->id_at);
    for (int i = 0; i < NBUF; i++) free(r->buf[i]);
    free(r->task_done);
    free(r->task_busy);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv_work);
    pthread_cond_destroy(&r->cv_done);
    free(r);
}
