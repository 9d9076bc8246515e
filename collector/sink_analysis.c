/* sink_analysis.c - the streaming analysis as a sink.
 *
 * The collector runs the whole streaming analysis beside the program and
 * saves it at the end of the trace (the snapshot), so `memlens report`
 * starts from it instead of replaying every record. A light session keeps
 * only what the summary and the exit scan need (`memlens run
 * --no-snapshot`), and cannot be saved.
 */
#include "collector_internal.h"

#include <errno.h>
#include <stdlib.h>

/* Records ahead whose block the analysis starts loading: hides most cache
 * misses of a large live set. */
#define PREFETCH_AHEAD 8

typedef struct {
    bool light;
} analysis_sink_t;

static int an_open(void *self, const ml_proc_info_t *proc, void **state) {
    const analysis_sink_t *s = self;
    if (proc->analysis) return 0; /* an earlier sink keeps one (the live viewer) */
    ml_analysis_t *a;
    int rc = s->light ? ml_analysis_new_light(&a) : ml_analysis_new(&a);
    if (rc < 0) return rc;
    *state = a;
    return 0;
}

static void an_write(void *self, void *state, const ml_batch_t *b) {
    (void)self;
    ml_analysis_t *a = state;
    for (uint32_t i = 0; i < b->n; i++) {
        if (i + PREFETCH_AHEAD < b->n) {
            const ml_record_t *ahead = &b->rec[i + PREFETCH_AHEAD];
            if (ahead->tag == ML_T_ALLOC || ahead->tag == ML_T_FREE)
                ml_analysis_prefetch(a, ahead->u.alloc.ptr);
        }
        ml_record_t tmp;
        ml_analysis_feed(a, ml_record_as_stored(&b->rec[i], &tmp));
    }
}

static ml_analysis_t *an_analysis(void *self, void *state) {
    (void)self;
    return state;
}

static int an_snapshot(void *self, void *state, uint32_t version, ml_analysis_out_fn out, void *ctx,
                       uint64_t *raw_len) {
    (void)self;
    return ml_analysis_snapshot_stream(state, version, out, ctx, raw_len);
}

static void an_end(void *self, void *state, const ml_snapshot_t *snap) {
    (void)self;
    (void)state;
    (void)snap; /* the session stays for the summary: released later (owns_analysis) */
}

static void an_release(void *self, void *state) {
    (void)self;
    ml_analysis_free(state);
}

static void an_free(void *self) {
    free(self);
}

static const ml_sink_ops_t analysis_ops = {
    .name = "analysis",
    .open = an_open,
    .write = an_write,
    .analysis = an_analysis,
    .snapshot = an_snapshot,
    .end = an_end,
    .release = an_release,
    .free = an_free,
    .threaded = true,
    .owns_analysis = true,
};

int ml_analysis_sink_new(bool light, ml_sink_t *out) {
    analysis_sink_t *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->light = light;
    *out = (ml_sink_t){&analysis_ops, s};
    return 0;
}
