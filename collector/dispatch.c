/* dispatch.c - stage 2 of the collector: the batch of records between the
 * decode stage and the sinks, and the sinks' part in a process' life (open,
 * write, end, release).
 *
 * One batch serves the whole collector: it holds records of one process at
 * a time, and is handed to the sinks (ml__flush) when it is full, when a
 * record of another process comes, when its strings could run out, at the
 * end of each drain, before the exit scan and before a process ends. The
 * hand-off is a plain call today; docs/recorder.md says how it becomes a
 * queue between threads.
 */
#include "collector_internal.h"

#include <errno.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------- */
/* The batch                                                                 */
/* ------------------------------------------------------------------------- */

void ml__flush(ml_collector_t *c) {
    ml_batch_t *b = c->batch;
    if (!b->n) return;
    ml__proc_t *p = c->batch_proc;
    for (int i = 0; i < c->nsinks; i++)
        if (p->sink_state[i]) c->sinks[i].ops->write(c->sinks[i].self, p->sink_state[i], b);
    b->n = 0;
    b->strings_used = 0;
}

/* The next free record of the batch, for process p, with `strings` bytes of
 * string space after it: the batch is handed on first when it cannot take
 * them. Fill it, then ml__batch_commit(). */
ml_record_t *ml__batch_slot(ml_collector_t *c, ml__proc_t *p, size_t strings) {
    ml_batch_t *b = c->batch;
    if (b->n && (c->batch_proc != p || b->n == ML_BATCH_RECORDS ||
                 ML_BATCH_STRINGS - b->strings_used < strings))
        ml__flush(c);
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
    *r = *rec;
    ml__time_order(p, r);
    ml__batch_commit(c, 0);
}

/* ------------------------------------------------------------------------- */
/* A process' sinks                                                          */
/* ------------------------------------------------------------------------- */

void ml__sinks_release(ml_collector_t *c, ml__proc_t *p) {
    for (int i = 0; i < c->nsinks; i++) {
        if (!p->sink_state[i]) continue;
        c->sinks[i].ops->release(c->sinks[i].self, p->sink_state[i]);
        p->sink_state[i] = NULL;
    }
    p->info.analysis = NULL;
    p->analysis_sink = -1;
}

/* Opens every sink for p, in order; the first one that keeps an analysis
 * session for it provides ml_proc_info_t.analysis to the later ones. */
int ml__sinks_open(ml_collector_t *c, ml__proc_t *p) {
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

/* Every record of p is in the batch: hands it on, saves the analysis
 * session when the options ask for it, and ends every sink with it. Without
 * a snapshot (out of memory, or state the snapshot cannot hold exactly:
 * -ENOTSUP) reports replay the records: slower, the same numbers. */
void ml__sinks_end(ml_collector_t *c, ml__proc_t *p) {
    ml__flush(c);
    void *data = NULL;
    ml_snapshot_t snap = {NULL, 0, ML_ANALYSIS_SNAPSHOT_VERSION};
    bool have = false;
    if (c->o.snapshot && p->analysis_sink >= 0) {
        const ml_sink_t *s = &c->sinks[p->analysis_sink];
        have = s->ops->snapshot &&
               s->ops->snapshot(s->self, p->sink_state[p->analysis_sink], &data, &snap.len) == 0;
        snap.data = data;
    }
    for (int i = 0; i < c->nsinks; i++)
        if (p->sink_state[i]) c->sinks[i].ops->end(c->sinks[i].self, p->sink_state[i], have ? &snap : NULL);
    free(data);
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
