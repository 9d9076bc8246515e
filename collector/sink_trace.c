/* sink_trace.c - the trace writer as a sink: every record of a process
 * into its .mlt file, and the analysis snapshot after the end record. */
#include "collector_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ml_writer_t *w;
    const ml_proc_info_t *proc;
} trace_proc_t;

typedef struct {
    uint32_t failed; /* processes whose trace could not be written whole */
} trace_sink_t;

static int trace_open(void *self, const ml_proc_info_t *proc, void **state) {
    (void)self;
    trace_proc_t *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    int rc = ml_writer_new(proc->fd, 3, &t->w);
    if (rc < 0) {
        free(t);
        return rc;
    }
    t->proc = proc;
    *state = t;
    return 0;
}

static void trace_write(void *self, void *state, const ml_batch_t *b) {
    (void)self;
    trace_proc_t *t = state;
    /* A write error stays in the writer's state: reported by trace_end. */
    for (uint32_t i = 0; i < b->n; i++) (void)ml_writer_add(t->w, &b->rec[i]);
}

/* Where the snapshot's pieces go: compressed into the trace as they come. */
static int snap_out(void *ctx, const void *p, size_t n) {
    return ml_writer_snapshot_write(ctx, p, n);
}

/* The snapshot streams from the analysis session into the writer (a few
 * MiB of buffers, whatever its size: issue 12). When it cannot be written
 * whole the writer cuts the file back, and the trace ends as one without a
 * snapshot (reports replay it): said on stderr, unless the session simply
 * cannot be saved (-ENOTSUP), the file cannot take a streamed snapshot
 * (-ESPIPE: a pipe) or the writer had failed already. */
static void write_snapshot(trace_proc_t *t, const ml_snapshot_t *snap) {
    int rc = ml_writer_snapshot_begin(t->w, snap->version);
    if (rc == 0) {
        uint64_t raw_len = 0;
        rc = ml_writer_snapshot_end(t->w, ml_snapshot_stream(snap, snap_out, t->w, &raw_len));
    }
    /* A writer that failed before says so itself (trace_end). */
    if (rc < 0 && rc != -ENOTSUP && rc != -ESPIPE && ml_writer_flush(t->w) == 0) {
        char shown[PATH_MAX];
        fprintf(stderr, "memlens: warning: %s: no analysis snapshot (%s); reports will replay its records\n",
                ml_text_safe(t->proc->path, shown, sizeof shown), strerror(-rc));
    }
}

static void trace_end(void *self, void *state, const ml_snapshot_t *snap) {
    trace_sink_t *ts = self;
    trace_proc_t *t = state;
    if (snap) write_snapshot(t, snap);
    int rc = ml_writer_free(t->w);
    t->w = NULL;
    if (rc < 0) {
        ts->failed++;
        fprintf(stderr,
                "memlens: error: writing %s failed: %s%s; the trace is incomplete: it holds "
                "the records written before the failure\n",
                t->proc->path, strerror(-rc), rc == -ENOSPC ? " (ENOSPC: the disk is full)" : "");
    }
}

static void trace_release(void *self, void *state) {
    (void)self;
    trace_proc_t *t = state;
    ml_writer_free(t->w);
    free(t);
}

static void trace_free(void *self) {
    free(self);
}

static const ml_sink_ops_t trace_ops = {
    .name = "trace",
    .open = trace_open,
    .write = trace_write,
    .end = trace_end,
    .release = trace_release,
    .free = trace_free,
};

int ml_trace_sink_new(ml_sink_t *out) {
    trace_sink_t *ts = calloc(1, sizeof *ts);
    if (!ts) return -ENOMEM;
    *out = (ml_sink_t){&trace_ops, ts};
    return 0;
}

uint32_t ml_trace_sink_failures(const ml_sink_t *sink) {
    return sink->ops == &trace_ops ? ((const trace_sink_t *)sink->self)->failed : 0;
}
