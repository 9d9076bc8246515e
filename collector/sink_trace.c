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

static void trace_end(void *self, void *state, const ml_snapshot_t *snap) {
    (void)self;
    trace_proc_t *t = state;
    if (snap) (void)ml_writer_add_snapshot(t->w, snap->data, snap->len, snap->version);
    int rc = ml_writer_free(t->w);
    t->w = NULL;
    if (rc < 0)
        fprintf(stderr, "memlens: error: writing %s failed: %s; the trace is incomplete\n",
                t->proc->path, strerror(-rc));
}

static void trace_release(void *self, void *state) {
    (void)self;
    trace_proc_t *t = state;
    ml_writer_free(t->w);
    free(t);
}

static const ml_sink_ops_t trace_ops = {
    .name = "trace",
    .open = trace_open,
    .write = trace_write,
    .end = trace_end,
    .release = trace_release,
};

int ml_trace_sink_new(ml_sink_t *out) {
    *out = (ml_sink_t){&trace_ops, NULL};
    return 0;
}
