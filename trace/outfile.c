/* outfile.c - output files created privately, exclusively and atomically
 * (ml_outfile.h says the rules). */
#define _GNU_SOURCE
#include "ml_outfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* ------------------------------------------------------------------------- */
/* Is this file one of ours?                                                 */
/* ------------------------------------------------------------------------- */

static bool folded_stacks(const char *b, size_t n) {
    bool semicolon = false;
    size_t lines = 0, i = 0;
    while (i < n) {
        const char *nl = memchr(b + i, '\n', n - i);
        if (!nl) break; /* a line cut by the buffer's end is not judged */
        size_t end = (size_t)(nl - b);
        size_t sp = end;
        while (sp > i && b[sp - 1] != ' ') sp--;
        if (sp == i || sp == end || sp - 1 == i) return false; /* "FRAMES COUNT" */
        for (size_t k = sp; k < end; k++)
            if (b[k] < '0' || b[k] > '9') return false;
        for (size_t k = i; k < sp - 1; k++) {
            if (b[k] == ';') semicolon = true;
            if ((unsigned char)b[k] < 0x20) return false;
        }
        lines++;
        i = end + 1;
    }
    return lines > 0 && semicolon;
}

bool ml_outfile_is_ours(int fd) {
    char b[4096];
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    if (n <= 0) return false;
    b[n] = '\0';
    if (n >= 7 && !memcmp(b, "MLTRACE", 7)) return true;
    if (!strncmp(b, "{\"schema_version\":", 18) && strstr(b, "\"generator\": \"memlens ")) return true;
    if (!strncmp(b, "<!DOCTYPE html>", 15) && strstr(b, "<title>memlens")) return true;
    if (!strncmp(b, "{\"$schema\": \"https://www.speedscope.app/", 40) && strstr(b, "\"exporter\": \"memlens "))
        return true;
    /* gzip (RFC 1952): ID1 ID2, deflate, FLG with FCOMMENT (0x10) and
     * neither FEXTRA (0x04) nor FNAME (0x08); the comment follows the
     * 10-byte header. */
    static const char comment[] = ML_PPROF_GZIP_COMMENT;
    if (n >= 10 + (ssize_t)sizeof comment && (unsigned char)b[0] == 0x1f && (unsigned char)b[1] == 0x8b &&
        b[2] == 8 && (b[3] & 0x1c) == 0x10 && !memcmp(b + 10, comment, sizeof comment))
        return true;
    return memchr(b, '\0', (size_t)n) == NULL && folded_stacks(b, (size_t)n);
}

/* ------------------------------------------------------------------------- */
/* The destination                                                           */
/* ------------------------------------------------------------------------- */

/* How much of PATH names its temporary file, PATH.tmp.XXXXXX: all of it,
 * unless its last name is too long to take the 11 characters more (a
 * name of 245 to 255 bytes is valid, but failed with ENAMETOOLONG); then
 * that name is cut so that the temporary one is NAME_MAX long. */
#define TMP_SUFFIX_LEN 11 /* ".tmp.XXXXXX" */
static size_t tmp_stem_len(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash + 1 - path) : 0, base = strlen(path + dir);
    return dir + (base > NAME_MAX - TMP_SUFFIX_LEN ? NAME_MAX - TMP_SUFFIX_LEN : base);
}

/* ------------------------------------------------------------------------- */
/* Reports being written, for a signal to remove                             */
/* ------------------------------------------------------------------------- */

/* The temporary files of the reports being written (ML_OUTFILE_NOSYNC: made
 * from a trace, made again by the next report). A report killed by SIGTERM
 * or SIGHUP left PATH.tmp.XXXXXX behind, half written: the analysis
 * commands' handler (cli/main.c) calls ml_outfile_unlink_live, which only
 * reads these slots and unlinks, both safe in a signal handler. A trace
 * (run, attach) is never registered: cut short, it is still a trace. */
#define LIVE_MAX 16
static char *_Atomic live[LIVE_MAX];

static void live_add(char *tmp) {
    for (int i = 0; i < LIVE_MAX; i++) {
        char *none = NULL;
        if (atomic_compare_exchange_strong(&live[i], &none, tmp)) return;
    }
}

static void live_drop(const char *tmp) {
    for (int i = 0; tmp && i < LIVE_MAX; i++)
        if (atomic_load(&live[i]) == tmp) atomic_store(&live[i], NULL);
}

void ml_outfile_unlink_live(void) {
    for (int i = 0; i < LIVE_MAX; i++) {
        char *p = atomic_load(&live[i]);
        if (p) unlink(p);
    }
}

/* Standard descriptors closed at memlens' start, held by /dev/null. */
static unsigned held_closed;

void ml_outfile_held_closed(int fd) {
    if (fd >= 0 && fd <= 2) held_closed |= 1u << fd;
}

int ml_outfile_own_fd(const char *path) {
    static const char *const prefix[] = {"/dev/fd/", "/proc/self/fd/"};
    if (!strcmp(path, "/dev/stdout")) return 1;
    if (!strcmp(path, "/dev/stderr")) return 2;
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(prefix[i]);
        if (strncmp(path, prefix[i], n)) continue;
        const char *d = path + n;
        long v = 0;
        if (!*d || strlen(d) > 9) return -1;
        for (; *d; d++) {
            if (*d < '0' || *d > '9') return -1;
            v = v * 10 + (*d - '0');
        }
        return (int)v;
    }
    return -1;
}

/* A FIFO in a sticky directory anyone may write to (/tmp), owned neither
 * by us nor by the directory's owner: another user's, which memlens does
 * not write into (its reader would get root's report or trace). The
 * kernel's fs.protected_fifos makes that rule for opens that may create
 * the file; memlens' open of an existing FIFO does not, so it is checked
 * here. */
static bool parent_dir(const char *path, char *dir, size_t len);

static bool foreign_fifo(const char *path, const struct stat *st) {
    if (st->st_uid == geteuid()) return false;
    char dir[4096];
    struct stat d;
    if (!parent_dir(path, dir, sizeof dir) || stat(dir, &d) < 0) return true; /* cannot tell: refused */
    return (d.st_mode & S_ISVTX) && (d.st_mode & S_IWOTH) && d.st_uid != st->st_uid;
}

/* What is at PATH now: 0 nothing, 1 a regular file we may replace, 2 a
 * device or FIFO to write in place (its stat in *seen when given), 3 one
 * of memlens' own descriptors (ml_outfile_own_fd); or a negative errno
 * with a message. */
static int inspect(const char *path, unsigned flags, char *err, size_t errlen, struct stat *seen) {
    struct stat st;
    int own = ml_outfile_own_fd(path);
    if (own >= 0) {
        int fl = own <= 2 && (held_closed >> own & 1) ? -1 : fcntl(own, F_GETFL);
        if (fl < 0) {
            snprintf(err, errlen, "cannot write %s: descriptor %d is not open (EBADF)", path, own);
            return -EBADF;
        }
        if ((fl & O_ACCMODE) == O_RDONLY) {
            snprintf(err, errlen, "cannot write %s: descriptor %d is open for reading only (EBADF)", path,
                     own);
            return -EBADF;
        }
        return 3;
    }
    if (!*path) { /* lstat("") fails with ENOENT: it would pass for a new name */
        snprintf(err, errlen, "cannot write to an empty file name (ENOENT)");
        return -ENOENT;
    }
    if (lstat(path, &st) < 0) {
        if (errno == ENOENT) return 0;
        int e = errno;
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
        return -e;
    }
    if (S_ISLNK(st.st_mode)) {
        snprintf(err, errlen,
                 "cannot write %s: it is a symbolic link, and memlens never writes through one "
                 "(ELOOP); give the link's target, or remove the link",
                 path);
        return -ELOOP;
    }
    if (flags & ML_OUTFILE_NEW) {
        snprintf(err, errlen, "cannot write %s: the name is taken (EEXIST); nothing was overwritten",
                 path);
        return -EEXIST;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "cannot write %s: it is a directory (EISDIR)", path);
        return -EISDIR;
    }
    if (S_ISFIFO(st.st_mode) && foreign_fifo(path, &st)) {
        snprintf(err, errlen,
                 "cannot write %s: it is a FIFO of another user (uid %u) in a directory anyone may write to "
                 "(EACCES); memlens writes only into its own FIFOs there",
                 path, (unsigned)st.st_uid);
        return -EACCES;
    }
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
        if (seen) *seen = st;
        return 2;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "cannot write %s: it is not a regular file, a device or a FIFO", path);
        return -EINVAL;
    }
    if (flags & ML_OUTFILE_FORCE) return 1;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    int open_errno = fd < 0 ? errno : 0;
    bool ours = false;
    if (fd >= 0) {
        struct stat now;
        ours = fstat(fd, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino &&
               ml_outfile_is_ours(fd);
        close(fd);
    }
    if (!ours && (open_errno == EACCES || open_errno == EPERM)) {
        /* Perhaps ours, but another user's, or made unreadable: it cannot
         * be checked, so it is not replaced. */
        snprintf(err, errlen,
                 "cannot write %s: the file exists and memlens cannot read it to check that it wrote "
                 "it (%s); not overwritten (pass --force to replace it)",
                 path, strerror(open_errno));
        return -EEXIST;
    }
    if (!ours) {
        snprintf(err, errlen,
                 "cannot write %s: the file exists and is not one memlens wrote (EEXIST); "
                 "not overwritten (pass --force to replace it)",
                 path);
        return -EEXIST;
    }
    return 1;
}

/* A device or a FIFO, opened for writing without following a link. A
 * FIFO's open blocks until a reader opens it, in a system call that
 * restarts after memlens' handlers of SIGINT and SIGTERM: with no reader,
 * `memlens run -o FIFO` hung for good and ignored both. So the open does
 * not block: it is tried again every 10 ms for FIFO_WAIT_MS (a reader
 * started just before memlens, `cat FIFO > x & memlens ...`, may not have
 * opened it yet), then fails with ENXIO. The descriptor blocks again once
 * open, as a plain open's would. A device's ENXIO is not waited on, nor
 * called a FIFO's: `--json /dev/tty` in a session without a terminal
 * waited 2 s and said "it is a FIFO (named pipe) and nothing opened it". */
#define FIFO_WAIT_MS 2000
static int open_in_place(const char *path, const struct stat *seen) {
    for (int waited = 0;; waited += 10) {
        int fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd >= 0) {
            /* Still what inspect() saw: the name may have been given to
             * another file meanwhile (a user who owns the directory
             * renames a file of theirs over the FIFO while memlens waits
             * for a reader), and memlens writes in place only into that
             * device or FIFO. */
            struct stat now;
            if (fstat(fd, &now) < 0 || now.st_dev != seen->st_dev || now.st_ino != seen->st_ino ||
                (now.st_mode & S_IFMT) != (seen->st_mode & S_IFMT)) {
                close(fd);
                errno = ESTALE;
                return -1;
            }
            int fl = fcntl(fd, F_GETFL);
            if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
            return fd;
        }
        /* Only a FIFO waits: a device's ENXIO (/dev/tty without a
         * controlling terminal, a port with no hardware) is its answer. */
        if (errno != ENXIO || !S_ISFIFO(seen->st_mode) || waited >= FIFO_WAIT_MS) return -1;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
        errno = ENXIO;
    }
}

int ml_outfile_check(const char *path, unsigned flags, char *err, size_t errlen) {
    int rc = inspect(path, flags, err, errlen, NULL);
    return rc < 0 ? rc : 0;
}

int ml_outfile_open(ml_outfile_t *o, const char *path, unsigned flags, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    struct stat seen;
    int what = inspect(path, flags, err, errlen, &seen);
    if (what < 0) return what;
    o->flags = flags;
    o->path = strdup(path);
    if (!o->path) goto oom;
    if (what >= 2) {
        /* Written in place: a device or FIFO opened without following a
         * link, or a copy of one of memlens' own descriptors. */
        o->fd = what == 3 ? fcntl(ml_outfile_own_fd(path), F_DUPFD_CLOEXEC, 3) : open_in_place(path, &seen);
        if (o->fd < 0) {
            int e = errno;
            if (e == ENXIO && S_ISFIFO(seen.st_mode))
                snprintf(err, errlen,
                         "cannot write %s: it is a FIFO (named pipe) and nothing opened it for reading "
                         "within %d s (ENXIO); start its reader first",
                         path, FIFO_WAIT_MS / 1000);
            else if (e == ESTALE)
                snprintf(err, errlen,
                         "cannot write %s: it was replaced while memlens opened it (it was a %s); nothing "
                         "was written",
                         path, S_ISFIFO(seen.st_mode) ? "FIFO" : "device");
            else
                snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
            free(o->path);
            o->path = NULL;
            return -e;
        }
        return 0;
    }
    if (asprintf(&o->tmp, "%.*s.tmp.XXXXXX", (int)tmp_stem_len(path), path) < 0) {
        o->tmp = NULL;
        goto oom;
    }
    /* mkostemp: O_CREAT|O_EXCL, mode 0600, a random name. A report's file
     * is registered for the signal handler before a signal can arrive:
     * one taken between the two would leave it behind. */
    sigset_t fatal, was;
    sigemptyset(&fatal);
    sigaddset(&fatal, SIGINT);
    sigaddset(&fatal, SIGTERM);
    sigaddset(&fatal, SIGHUP);
    bool masked = (flags & ML_OUTFILE_NOSYNC) && pthread_sigmask(SIG_BLOCK, &fatal, &was) == 0;
    o->fd = mkostemp(o->tmp, O_CLOEXEC);
    if (o->fd >= 0 && (flags & ML_OUTFILE_NOSYNC)) live_add(o->tmp);
    if (masked) pthread_sigmask(SIG_SETMASK, &was, NULL);
    if (o->fd < 0) {
        int e = errno;
        char cwd[16];
        if (e == ENOENT && path[0] != '/' && !getcwd(cwd, sizeof cwd) && errno == ENOENT)
            snprintf(err, errlen,
                     "cannot write %s: the current directory was removed (ENOENT); run from an existing "
                     "directory or give -o a path in one",
                     path);
        else
            snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
        free(o->tmp);
        free(o->path);
        memset(o, 0, sizeof *o);
        o->fd = -1;
        return -e;
    }
    if (flags & ML_OUTFILE_GROUP) {
        mode_t um = umask(0);
        umask(um);
        if (fchmod(o->fd, 0640 & ~um) < 0) { /* stays 0600: private is the safe side */
        }
    }
    return 0;
oom:
    free(o->path);
    memset(o, 0, sizeof *o);
    o->fd = -1;
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

static void release(ml_outfile_t *o) {
    live_drop(o->tmp);
    free(o->path);
    free(o->tmp);
    memset(o, 0, sizeof *o);
    o->fd = -1;
}

void ml_outfile_abort(ml_outfile_t *o) {
    if (o->fd >= 0) close(o->fd);
    if (o->tmp) unlink(o->tmp);
    release(o);
}

/* Puts tmp in the place of the file at path. ext4 (auto_da_alloc) writes a
 * file's data out before a rename that replaces another file, which for an
 * unsynced report of 36 MB took 20 ms; exchanging the two names and then
 * removing the old file does not trigger it (2 ms), and readers of path
 * still see the old file or the whole new one. Where the file system has no
 * RENAME_EXCHANGE, a plain rename. */
static int replace(ml_outfile_t *o) {
    if (renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_EXCHANGE) == 0) {
        if (unlink(o->tmp) == 0) return 0;
        int e = errno; /* a directory was put there meanwhile: give it back */
        (void)renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_EXCHANGE);
        return -e;
    }
    if (errno != EINVAL && errno != ENOSYS) return -errno;
    return rename(o->tmp, o->path) < 0 ? -errno : 0;
}

/* Renames tmp to path unless something that may not be replaced appeared. */
static int place(ml_outfile_t *o, char *err, size_t errlen) {
    for (int tries = 0; tries < 3; tries++) {
        int what = inspect(o->path, o->flags, err, errlen, NULL);
        if (what < 0) return what;
        if (what == 2) {
            snprintf(err, errlen, "cannot write %s: a device or FIFO appeared there (EEXIST)",
                     o->path);
            return -EEXIST;
        }
        if (what == 1) return replace(o);
        if (renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_NOREPLACE) == 0) return 0;
        if (errno == EEXIST) continue; /* created meanwhile: judge it */
        if (errno != EINVAL && errno != ENOSYS) return -errno;
        /* A file system without RENAME_NOREPLACE: link() never replaces. */
        if (link(o->tmp, o->path) == 0) {
            unlink(o->tmp);
            return 0;
        }
        if (errno != EEXIST) return -errno;
    }
    snprintf(err, errlen, "cannot write %s: the name keeps being taken (EEXIST)", o->path);
    return -EEXIST;
}

/* Where a kept temporary file is, for the message of a failed commit: its
 * own name, unless its directory was renamed or removed while memlens wrote
 * it (the file goes with the directory, and a removed one is gone with its
 * data: "kept in d/t.mlt.tmp.X" was said of a file that no longer was). What
 * the descriptor names is read before it is closed. */
typedef struct {
    bool known; /* fstat worked */
    dev_t dev;
    ino_t ino;
    nlink_t nlink;
    char now[PATH_MAX]; /* the kernel's name of the descriptor, or "" */
} kept_t;

static void kept_take(const ml_outfile_t *o, kept_t *k) {
    struct stat st;
    memset(k, 0, sizeof *k);
    if (fstat(o->fd, &st) == 0) {
        k->known = true;
        k->dev = st.st_dev;
        k->ino = st.st_ino;
        k->nlink = st.st_nlink;
    }
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", o->fd);
    ssize_t n = readlink(link, k->now, sizeof k->now - 1);
    k->now[n > 0 ? n : 0] = '\0';
}

static void kept_say(const ml_outfile_t *o, const kept_t *k, char *err, size_t errlen) {
    size_t n = strlen(err);
    if (n >= errlen) return;
    struct stat st;
    static const char deleted[] = " (deleted)";
    size_t nl = strlen(k->now), dl = sizeof deleted - 1;
    if (!k->known || (lstat(o->tmp, &st) == 0 && st.st_dev == k->dev && st.st_ino == k->ino))
        snprintf(err + n, errlen - n, "; the data is kept in %s", o->tmp);
    else if (k->nlink == 0 || (nl > dl && strcmp(k->now + nl - dl, deleted) == 0))
        snprintf(err + n, errlen - n,
                 "; the recording is lost: its temporary file %s was removed while memlens wrote it (with its "
                 "directory?)",
                 o->tmp);
    else if (k->now[0] == '/')
        snprintf(err + n, errlen - n,
                 "; the data is kept in %s (its temporary file %s was moved there while memlens wrote it: its "
                 "directory was renamed?)",
                 k->now, o->tmp);
    else
        snprintf(err + n, errlen - n, "; its temporary file %s, which held the data, is no longer there", o->tmp);
}

int ml_outfile_commit(ml_outfile_t *o, char *err, size_t errlen) {
    int rc = 0;
    kept_t kept = {0};
    if (o->tmp && !(o->flags & ML_OUTFILE_NOSYNC) && fsync(o->fd) < 0 && errno != EINVAL && errno != EROFS)
        rc = -errno;
    if (o->tmp && (o->flags & ML_OUTFILE_KEEP)) kept_take(o, &kept);
    if (close(o->fd) < 0 && !rc) rc = -errno;
    o->fd = -1;
    if (rc) {
        snprintf(err, errlen, "cannot write %s: %s", o->path, strerror(-rc));
    } else if (o->tmp) {
        err[0] = '\0';
        rc = place(o, err, errlen);
        if (rc < 0 && !err[0]) snprintf(err, errlen, "cannot write %s: %s", o->path, strerror(-rc));
    }
    if (rc < 0 && o->tmp) {
        if (o->flags & ML_OUTFILE_KEEP) {
            kept_say(o, &kept, err, errlen);
        } else {
            unlink(o->tmp);
        }
    }
    release(o);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* A file still being written                                                */
/* ------------------------------------------------------------------------- */

/* The directory PATH's last name is in ("." for a bare name, "/" for one
 * at the root) into dir; false when it does not fit. */
static bool parent_dir(const char *path, char *dir, size_t len) {
    const char *slash = strrchr(path, '/');
    int dn = slash ? snprintf(dir, len, "%.*s", (int)(slash - path) ? (int)(slash - path) : 1, path)
                   : snprintf(dir, len, ".");
    return dn >= 0 && (size_t)dn < len;
}

bool ml_outfile_pending(const char *path, char *out, size_t len) {
    struct stat st;
    if (!path || !*path || lstat(path, &st) == 0 || errno != ENOENT) return false;
    const char *slash = strrchr(path, '/');
    char dir[4096];
    const char *base = slash ? slash + 1 : path;
    if (!parent_dir(path, dir, sizeof dir) || !*base) return false;
    DIR *d = opendir(dir);
    if (!d) return false;
    size_t bl = tmp_stem_len(base);
    bool found = false;
    struct timespec newest = {0, 0};
    struct dirent *e;
    while ((e = readdir(d))) {
        /* mkostemp's name: PATH (cut: tmp_stem_len), ".tmp.", six characters */
        if (strncmp(e->d_name, base, bl) || strncmp(e->d_name + bl, ".tmp.", 5) || strlen(e->d_name + bl + 5) != 6)
            continue;
        struct stat fs;
        if (fstatat(dirfd(d), e->d_name, &fs, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(fs.st_mode)) continue;
        if (found && (fs.st_mtim.tv_sec < newest.tv_sec ||
                      (fs.st_mtim.tv_sec == newest.tv_sec && fs.st_mtim.tv_nsec <= newest.tv_nsec)))
            continue;
        int n = slash ? snprintf(out, len, "%s/%s", dir, e->d_name) : snprintf(out, len, "%s", e->d_name);
        if (n < 0 || (size_t)n >= len) continue;
        newest = fs.st_mtim;
        found = true;
    }
    closedir(d);
    return found;
}
