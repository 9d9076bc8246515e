/* output.c - output files that are never half-written.
 *
 * A report goes to a temporary file in the target's directory, which is
 * flushed, synced and renamed over the target: readers see the old file or
 * the whole new one. Targets that are not regular files (stdout, /dev/null,
 * a FIFO) cannot be renamed over and are written in place.
 */
#define _GNU_SOURCE
#include "ml_report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ml_out_open(ml_out_t *o, const char *path, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    if (!strcmp(path, "-")) {
        o->f = stdout;
        return 0;
    }
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "cannot write %s: it is a directory", path);
            return -EISDIR;
        }
        o->f = fopen(path, "w");
        if (!o->f) {
            int e = errno;
            snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
            return -e;
        }
        return 0;
    }
    o->path = strdup(path);
    if (!o->path || asprintf(&o->tmp, "%s.tmp.XXXXXX", path) < 0) {
        free(o->path);
        o->path = NULL;
        o->tmp = NULL;
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int fd = mkostemp(o->tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
        free(o->path);
        free(o->tmp);
        memset(o, 0, sizeof *o);
        return -e;
    }
    /* mkostemp makes it 0600; a report is an ordinary file. */
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
    o->f = fdopen(fd, "w");
    if (!o->f) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
        free(o->path);
        free(o->tmp);
        memset(o, 0, sizeof *o);
        return -e;
    }
    return 0;
}

void ml_out_abort(ml_out_t *o) {
    if (o->f && o->f != stdout) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->path);
    free(o->tmp);
    memset(o, 0, sizeof *o);
}

int ml_out_commit(ml_out_t *o, char *err, size_t errlen) {
    const char *shown = o->path ? o->path : "the output";
    int rc = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) rc = -(errno ? errno : EIO);
    if (!rc && o->tmp && fsync(fileno(o->f)) < 0 && errno != EINVAL) rc = -errno;
    if (o->f != stdout) {
        if (fclose(o->f) != 0 && !rc) rc = -(errno ? errno : EIO);
    }
    o->f = NULL;
    if (!rc && o->tmp && rename(o->tmp, o->path) < 0) rc = -errno;
    if (rc) {
        snprintf(err, errlen, "cannot write %s: %s", shown, strerror(-rc));
        if (o->tmp) unlink(o->tmp);
    }
    free(o->path);
    free(o->tmp);
    memset(o, 0, sizeof *o);
    return rc;
}
