/* dispatch.c - stage 2 of the collector: the batch of records between the
 * decode stage and the sinks, and the sinks' part in a process' life (open,
 * write, end, release).
 *
 * One batch is filled at a time: it holds records of one process, and is
 * handed to the sinks (ml__flush) when it is full, when a record of another
 * process comes, when its strings could run out, at the end of each drain,
 * before the exit scan and before a process ends.
 *
 * With two CPUs or more, the sinks whose ops are `threaded` (the analysis:
 * the collector's largest cost on a big live heap, one cache miss per event
 * in its block map) write on a thread of their own. ml__flush then writes
 * the other sinks (the trace) on stage 1, queues the batch for stage 2 and
 * takes a free one from a pool of ML__POOL; stage 1 waits when none is free,
 * and the program then waits on its full ring: memory stays bounded. Stage 2
 * writes batches in the order they were queued, so each sink still sees one
 * process' records in order. Stage 1 waits for stage 2 to be idle
 * (ml__stage2_wait) before it reads an analysis session (the exit scan) and
 * before it ends or releases a process' sinks. On one CPU everything runs on
 * stage 1, as before.
 */
#define _GNU_SOURCE
#include "collector_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */
/* Stage 2's thread                                                          */
/* ------------------------------------------------------------------------- */

static bool any_threaded_state(const ml_collector_t *c, const ml__proc_t *p) {
    for (int i = 0; i < c->nsinks; i++)
        if (c->sinks[i].ops->threaded && p->sink_state[i]) return true;
    return false;
}

static void write_sinks(ml_collector_t *c, ml__proc_t *p, const ml_batch_t *b, bool threaded) {
    for (int i = 0; i < c->nsinks; i++)
        if (p->sink_state[i] && c->sinks[i].ops->threaded == threaded)
            c->sinks[i].ops->write(c->sinks[i].self, p->sink_state[i], b);
}

static void *stage2_main(void *arg) {
    ml_collector_t *c = arg;
    pthread_mutex_lock(&c->q_lock);
    for (;;) {
        while (!c->q_n && !c->q_stop) {
            c->w_waiting = true;
            pthread_cond_wait(&c->q_work, &c->q_lock);
            c->w_waiting = false;
        }
        if (!c->q_n) break; /* stop, and nothing left */
        ml_batch_t *b = c->q[c->q_head].b;
        ml__proc_t *p = c->q[c->q_head].p;
        c->q_head = (c->q_head + 1) % ML__POOL;
        c->q_n--;
        c->q_busy = true;
        pthread_mutex_unlock(&c->q_lock);
        write_sinks(c, p, b, true);
        b->n = 0;
        b->strings_used = 0;
        pthread_mutex_lock(&c->q_lock);
        c->pool[c->npool++] = b;
        c->q_busy = false;
        if (c->s1_waiting) pthread_cond_signal(&c->q_cond);
    }
    pthread_mutex_unlock(&c->q_lock);
    return NULL;
}

void ml__stage2_start(ml_collector_t *c) {
    bool want = false;
    for (int i = 0; i < c->nsinks; i++) want |= c->sinks[i].ops->threaded;
    /* Stage 2 pays off only when the program, stage 1 and stage 2 each have
     * a CPU: on two, the three threads share them and the analysis, the
     * slowest stage, gets two thirds of one (measured: 44 s -> 56 s on the
     * python3 big heap). MEMLENS_COLLECTOR_THREADS=1 or 2 overrides. */
    const char *env = getenv("MEMLENS_COLLECTOR_THREADS");
    bool on = env && *env ? strcmp(env, "1") != 0 : sysconf(_SC_NPROCESSORS_ONLN) >= 3;
    if (!want || !on) return;
    for (c->npool = 0; c->npool < ML__POOL - 1; c->npool++) {
        ml_batch_t *b = malloc(sizeof(ml_batch_t));
        if (!b) goto nomem;
        b->n = 0; /* stage 1 fills a batch from the pool from its first record */
        b->strings_used = 0;
        b->proc = NULL;
        c->pool[c->npool] = b;
    }
    if (pthread_mutex_init(&c->q_lock, NULL)) goto nomem;
    if (pthread_cond_init(&c->q_cond, NULL)) {
        pthread_mutex_destroy(&c->q_lock);
        goto nomem;
    }
    if (pthread_cond_init(&c->q_work, NULL)) {
        pthread_cond_destroy(&c->q_cond);
        pthread_mutex_destroy(&c->q_lock);
        goto nomem;
    }
    if (pthread_create(&c->worker, NULL, stage2_main, c)) {
        pthread_cond_destroy(&c->q_work);
        pthread_cond_destroy(&c->q_cond);
        pthread_mutex_destroy(&c->q_lock);
        goto nomem;
    }
    c->threaded = true;
    return;
nomem:
    while (c->npool) free(c->pool[--c->npool]);
    /* one thread works too */
}

void ml__stage2_wait(ml_collector_t *c) {
    if (!c->threaded) return;
    pthread_mutex_lock(&c->q_lock);
    while (c->q_n || c->q_busy) {
        c->s1_waiting = true;
        pthread_cond_wait(&c->q_cond, &c->q_lock);
        c->s1_waiting = false;
    }
    pthread_mutex_unlock(&c->q_lock);
}

void ml__stage2_stop(ml_collector_t *c) {
    if (!c->threaded) return;
    pthread_mutex_lock(&c->q_lock);
    c->q_stop = true;
    pthread_cond_signal(&c->q_work);
    pthread_mutex_unlock(&c->q_lock);
    pthread_join(c->worker, NULL);
    pthread_cond_destroy(&c->q_work);
    pthread_cond_destroy(&c->q_cond);
    pthread_mutex_destroy(&c->q_lock);
    c->threaded = false;
    while (c->npool) free(c->pool[--c->npool]);
}

/* ------------------------------------------------------------------------- */
/* The batch                                                                 */
/* ------------------------------------------------------------------------- */

void ml__flush(ml_collector_t *c) {
    ml_batch_t *b = c->batch;
    if (!b->n) return;
    ml__proc_t *p = c->batch_proc;
    write_sinks(c, p, b, false);
    if (any_threaded_state(c, p)) {
        if (!c->threaded) {
            write_sinks(c, p, b, true);
        } else {
            pthread_mutex_lock(&c->q_lock);
            c->q[(c->q_head + c->q_n) % ML__POOL].b = b;
            c->q[(c->q_head + c->q_n) % ML__POOL].p = p;
            c->q_n++;
            if (c->w_waiting) pthread_cond_signal(&c->q_work);
            if (!c->npool) c->q_waits++;
            while (!c->npool) {
                c->s1_waiting = true;
                pthread_cond_wait(&c->q_cond, &c->q_lock);
                c->s1_waiting = false;
            }
            c->batch = c->pool[--c->npool];
            pthread_mutex_unlock(&c->q_lock);
            return; /* the pool's batches are empty */
        }
    }
    b->n = 0;
    b->strings_used = 0;
}

/* The next free record of the batch, for process p, with `strings` bytes of
 * string space after it: the batch is handed on first when it cannot take
 * them. Fill it, then ml__batch_commit(). */
ml_record_t *ml__batch_slot(ml_collector_t *c, ml__proc_t *p, size_t strings) {
    ml_batch_t *b = c->batch;
    if (b->n && (c->batch_proc != p || b->n == ML_BATCH_RECORDS ||
                 ML_BATCH_STRINGS - b->strings_used < strings)) {
        ml__flush(c);
        b = c->batch; /* another one when stage 2 took it */
    }
    c->batch_proc = p;
    b->proc = &p->info;
    return &b->rec[b->n];
}

void ml__batch_commit(ml_collector_t *c, uint32_t strings_used) {
    c->batch->strings_used += strings_used;
    c->batch->n++;
}

/* A process' records are in time order: a record stamped earlier than the
 * one before it (threads read the clock before they claim their ring slot;
 * RSS is sampled at the collector's now, ahead of events still in the ring)
 * takes the previous record's time. Times move by at most the few
 * milliseconds of that race, and `memlens dump` never goes backwards. */
void ml__time_order(ml__proc_t *p, ml_record_t *r) {
    if (r->time_ms < p->last_time) r->time_ms = p->last_time;
    p->last_time = r->time_ms;
}

/* A record the collector makes itself (process, RSS, reachability, end):
 * its strings, if any, must outlive the batch (ml_batch_t). */
void ml__emit(ml_collector_t *c, ml__proc_t *p, const ml_record_t *rec) {
    ml_record_t *r = ml__batch_slot(c, p, 0);
    /* A block's reachability (one record per block live at exit: millions)
     * uses the allocation part of the union, as the reader's records of
     * those tags do; the whole record is ~600 bytes. */
    _Static_assert(sizeof rec->u.block_reach <= sizeof rec->u.alloc, "block_reach fits the alloc part");
    if (rec->tag == ML_T_BLOCK_REACH || rec->tag == ML_T_REACH_REST)
        memcpy(r, rec, offsetof(ml_record_t, u) + sizeof rec->u.alloc);
    else *r = *rec;
    ml__time_order(p, r);
    ml__batch_commit(c, 0);
}

/* ------------------------------------------------------------------------- */
/* A process' sinks                                                          */
/* ------------------------------------------------------------------------- */

void ml__sinks_release(ml_collector_t *c, ml__proc_t *p) {
    ml__stage2_wait(c);
    for (int i = 0; i < c->nsinks; i++) {
        if (!p->sink_state[i]) continue;
        c->sinks[i].ops->release(c->sinks[i].self, p->sink_state[i]);
        p->sink_state[i] = NULL;
    }
    p->info.analysis = NULL;
    p->analysis_sink = -1;
}

void ml__sinks_release_analysis(ml_collector_t *c, ml__proc_t *p) {
    int i = p->analysis_sink;
    if (i < 0 || !c->sinks[i].ops->release || !c->sinks[i].ops->owns_analysis) return;
    ml__stage2_wait(c);
    c->sinks[i].ops->release(c->sinks[i].self, p->sink_state[i]);
    p->sink_state[i] = NULL;
    p->info.analysis = NULL;
    p->analysis_sink = -1;
}

/* Opens every sink for p, in order; the first one that keeps an analysis
 * session for it provides ml_proc_info_t.analysis to the later ones. */
int ml__sinks_open(ml_collector_t *c, ml__proc_t *p) {
    if (!c->stage2_tried) {
        c->stage2_tried = true;
        ml__stage2_start(c);
    }
    p->info.analysis = NULL;
    p->analysis_sink = -1;
    for (int i = 0; i < c->nsinks; i++) {
        const ml_sink_t *s = &c->sinks[i];
        void *st = NULL;
        int rc = s->ops->open(s->self, &p->info, &st);
        if (rc < 0) {
            ml__sinks_release(c, p);
            return rc;
        }
        p->sink_state[i] = st;
        if (st && !p->info.analysis && s->ops->analysis) {
            p->info.analysis = s->ops->analysis(s->self, st);
            if (p->info.analysis) p->analysis_sink = i;
        }
    }
    return 0;
}

/* Every record of p is in the batch: hands it on, and ends every sink,
 * offering them the analysis session to save when the options ask for it.
 * The snapshot is offered as a stream (ml_snapshot_t), made while the trace
 * sink writes it, never held whole. Without a snapshot (out of memory, or
 * state the snapshot cannot hold exactly: -ENOTSUP) reports replay the
 * records: slower, the same numbers. */
void ml__sinks_end(ml_collector_t *c, ml__proc_t *p) {
    ml__flush(c);
    ml__stage2_wait(c);
    ml_snapshot_t snap = {0};
    bool have = false;
    if (c->o.snapshot && p->analysis_sink >= 0) {
        const ml_sink_t *s = &c->sinks[p->analysis_sink];
        have = s->ops->snapshot != NULL;
        snap = (ml_snapshot_t){s->ops, s->self, p->sink_state[p->analysis_sink], ML_ANALYSIS_SNAPSHOT_VERSION};
    }
    for (int i = 0; i < c->nsinks; i++)
        if (p->sink_state[i]) c->sinks[i].ops->end(c->sinks[i].self, p->sink_state[i], have ? &snap : NULL);
}

/* ------------------------------------------------------------------------- */
/* Registration                                                              */
/* ------------------------------------------------------------------------- */

int ml_collector_add_sink(ml_collector_t *c, ml_sink_t sink) {
    if (c->nsinks == ML__MAX_SINKS) {
        if (sink.ops->free) sink.ops->free(sink.self);
        return -ENOSPC;
    }
    c->sinks[c->nsinks++] = sink;
    return 0;
}
