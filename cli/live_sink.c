/* live_sink.c - `memlens run --live`: the root process' records go to the
 * viewer model's analysis session, which the viewer's own thread reads
 * between batches (docs/viewer.md). The model's lock is held for a batch at
 * a time, and while the session is saved.
 *
 * This sink keeps the root process' analysis, so the collector's analysis
 * sink (added after it) keeps none of its own for that process: the summary,
 * the exit scan and the snapshot all use the model's session. */
#include "ml_cli.h"

#include <stddef.h>

static int live_open(void *self, const ml_proc_info_t *proc, void **state) {
    if (proc->is_root) *state = self; /* children are not shown */
    return 0;
}

static void live_write(void *self, void *state, const ml_batch_t *b) {
    (void)self;
    ml_vmodel_t *m = state;
    ml_vmodel_lock(m);
    for (uint32_t i = 0; i < b->n; i++) {
        ml_record_t tmp;
        ml_vmodel_feed(m, ml_record_as_stored(&b->rec[i], &tmp));
    }
    ml_vmodel_unlock(m);
}

static ml_analysis_t *live_analysis(void *self, void *state) {
    (void)self;
    return ml_vmodel_analysis(state);
}

/* The lock is held while the snapshot streams into the trace, the
 * viewer's reads wait meanwhile: the session must not change under it. */
static int live_snapshot(void *self, void *state, uint32_t version, ml_analysis_out_fn out, void *ctx,
                         uint64_t *raw_len) {
    (void)self;
    ml_vmodel_t *m = state;
    ml_vmodel_lock(m);
    int rc = ml_analysis_snapshot_stream(ml_vmodel_analysis(m), version, out, ctx, raw_len);
    ml_vmodel_unlock(m);
    return rc;
}

static void live_end(void *self, void *state, const ml_snapshot_t *snap) {
    (void)self;
    (void)state;
    (void)snap;
}

static void live_release(void *self, void *state) {
    (void)self;
    (void)state; /* the model is the caller's */
}

static const ml_sink_ops_t live_ops = {
    .name = "live viewer",
    .open = live_open,
    .write = live_write,
    .analysis = live_analysis,
    .snapshot = live_snapshot,
    .end = live_end,
    .release = live_release,
};

ml_sink_t ml_cli_live_sink(ml_vmodel_t *m) {
    return (ml_sink_t){&live_ops, m};
}
