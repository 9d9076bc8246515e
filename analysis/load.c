/* load.c - reading a trace file into a session: open it, then restore the
 * analysis snapshot saved at its end when it has a sound one (ML_LOAD_SNAPSHOT),
 * or read and feed every record (the replay). Above the streaming pass
 * (analysis.c) and the snapshot (snapshot.c), which know nothing of files.
 */
#include "analysis_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Restores the trace's snapshot into the fresh session `a`. True when it
 * did; false (with a warning when the snapshot is there but unusable) when
 * the records must be replayed. */
/* Whether the trace at `path` was recorded with --sample (its process
 * record, among the first records, says so). */
static bool trace_sampled(const char *path) {
    ml_reader_t *r;
    if (ml_reader_open(path, &r, NULL, 0) < 0) return false;
    ml_record_t rec;
    bool sampled = false;
    for (int i = 0; i < 4096 && ml_reader_next(r, &rec) == 1; i++)
        if (rec.tag == ML_T_PROCESS) {
            sampled = rec.u.process.sample_bytes != 0;
            break;
        }
    ml_reader_close(r);
    return sampled;
}

static bool load_snapshot(ml_analysis_t *a, ml_reader_t *r, const char *path, bool packed) {
    void *data;
    size_t len;
    uint32_t version = 0;
    int rc = ml_reader_snapshot(r, &data, &len, &version);
    if (rc == -ENOENT) return false;
    if (rc < 0) {
        ml__warn(a, "%s: %s; the records were replayed instead", path, ml_reader_error(r));
        return false;
    }
    char err[256];
    /* Another memlens' snapshot (a newer one, or one older than we read):
     * replay. Snapshots carry their layout, so restore reads each version
     * it knows. */
    bool ok = version >= ML_ANALYSIS_SNAPSHOT_OLDEST && version <= ML_ANALYSIS_SNAPSHOT_VERSION;
    /* An older snapshot of a sampled trace counted its blocks one per
     * sample, where the records give their estimates: replay. */
    if (ok && version < ML_ANALYSIS_SNAPSHOT_WEIGHTED_BLOCKS && trace_sampled(path)) ok = false;
    int rc2 = !ok ? 0
              : packed ? ml__analysis_restore_packed(a, data, len, err, sizeof err)
                       : ml_analysis_restore(a, data, len, err, sizeof err);
    if (rc2 < 0) {
        ml__warn(a, "%s: %s; the records were replayed instead", path, err);
        ok = false;
    }
    if (rc2 != 1) free(data); /* 1: the live set keeps it (ml__live_set_packed) */
    if (ok) a->from_snapshot = true;
    return ok;
}

bool ml_analysis_from_snapshot(const ml_analysis_t *a) {
    return a->from_snapshot;
}

int ml_analysis_load_ex(ml_analysis_t *a, const char *path, unsigned flags, char *err,
                        size_t errlen) {
    ml_reader_t *r;
    int rc = ml_reader_open(path, &r, err, errlen);
    if (rc < 0) return rc;
    if ((flags & ML_LOAD_SNAPSHOT) && a->t.records == 0 && !a->light && load_snapshot(a, r, path, flags & ML_LOAD_PACKED)) {
        ml_reader_close(r);
        return 0;
    }
    if (flags & ML_LOAD_NO_REPLAY) {
        snprintf(err, errlen, "%s: no analysis snapshot to restore", path);
        ml_reader_close(r);
        return -ENOENT;
    }
    ml_progress_t progress;
    ml_progress_start(&progress, r, "reading", path);
    progress.on = progress.on && (flags & ML_LOAD_PROGRESS);
    ml_record_t rec;
    while ((rc = ml_reader_next(r, &rec)) > 0) {
        ml_analysis_feed(a, &rec);
        ml_progress_tick(&progress);
    }
    ml_progress_end(&progress);
    if (rc < 0) snprintf(err, errlen, "%s: %s", path, ml_reader_error(r));
    a->t.truncated = ml_reader_truncated(r);
    if (a->t.truncated)
        ml__warn(a, "the trace ends early (the collector was stopped?): what it holds is reported");
    ml_reader_close(r);
    return rc < 0 ? rc : 0;
}

int ml_analysis_load(ml_analysis_t *a, const char *path, char *err, size_t errlen) {
    return ml_analysis_load_ex(a, path, 0, err, errlen);
}
