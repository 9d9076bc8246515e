/* output.c - report files that are never half-written, never written
 * through a link, and never replace a file memlens did not make.
 *
 * A report goes to a private temporary file in the target's directory,
 * which is flushed, synced and renamed over the target (ml_outfile.h):
 * readers see the old file or the whole new one. "-" is stdout; a device or
 * a FIFO is written in place.
 */
#define _GNU_SOURCE
#include "ml_report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ml_out_open(ml_out_t *o, const char *path, char *err, size_t errlen) {
    return ml_out_open_flags(o, path, 0, err, errlen);
}

int ml_out_open_flags(ml_out_t *o, const char *path, unsigned flags, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->file.fd = -1;
    if (!strcmp(path, "-")) {
        o->f = stdout;
        return 0;
    }
    /* Every file here is made from a trace: no fsync (ml_outfile.h). */
    int rc = ml_outfile_open(&o->file, path, flags | ML_OUTFILE_NOSYNC, err, errlen);
    if (rc < 0) return rc;
    o->f = fdopen(o->file.fd, "w");
    if (!o->f) {
        int e = errno;
        ml_outfile_abort(&o->file);
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
        return -e;
    }
    o->path = o->file.path;
    o->tmp = o->file.tmp;
    return 0;
}

void ml_out_abort(ml_out_t *o) {
    if (o->f == stdout) clearerr(stdout); /* the caller says why: not again at exit */
    if (o->f && o->f != stdout) {
        /* The stream owns the descriptor: close it through the stream. */
        fclose(o->f);
        o->file.fd = -1;
    }
    ml_outfile_abort(&o->file);
    memset(o, 0, sizeof *o);
    o->file.fd = -1;
}

int ml_out_commit(ml_out_t *o, char *err, size_t errlen) {
    int rc = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) rc = -(errno ? errno : EIO);
    if (o->f == stdout) {
        if (rc) {
            snprintf(err, errlen, "cannot write the output: %s", strerror(-rc));
            clearerr(stdout); /* said here: not again at exit (cli/main.c) */
        }
        memset(o, 0, sizeof *o);
        o->file.fd = -1;
        return rc;
    }
    if (rc) {
        snprintf(err, errlen, "cannot write %s: %s", o->file.path, strerror(-rc));
        ml_out_abort(o);
        return rc;
    }
    /* Hand the descriptor to the commit: the stream is freed without
     * closing it. */
    int fd = dup(o->file.fd);
    fclose(o->f);
    o->f = NULL;
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot write %s: %s", o->file.path, strerror(-rc));
        o->file.fd = -1;
        ml_outfile_abort(&o->file);
        memset(o, 0, sizeof *o);
        return rc;
    }
    o->file.fd = fd;
    rc = ml_outfile_commit(&o->file, err, errlen);
    memset(o, 0, sizeof *o);
    o->file.fd = -1;
    return rc;
}
