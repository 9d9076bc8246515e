/* session.c - the control segment of a recording session and its clock.
 *
 * The collector creates /dev/shm/memlens-PID-RAND (an ml_ctl_t, ml_event.h)
 * and the program finds it through ML_CTL. It carries the options every
 * traced process reads, the clock the collector ticks (events read it with
 * one relaxed load), and the table of process slots. Each process creates
 * its own ring beside it (<ctl>.<slot>.<tag>); the collector unlinks a ring as
 * soon as it has mapped it, and everything else at the end.
 */
#define _GNU_SOURCE
#include "collector_internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint32_t ml__now_ms(const ml_collector_t *c) {
    return (uint32_t)((mono_ns() - c->t0_ns) / 1000000u);
}

void ml__ring_file_path(const ml_collector_t *c, uint32_t slot, char *out, size_t len) {
    snprintf(out, len, "%s.%u.%016" PRIx64, c->ctl_path, slot, ml_ring_name_tag(c->ctl->ring_key, slot));
}

/* The secret of the ring files' names (ml_ring_name_tag), from getrandom;
 * where it gives nothing (a kernel before 3.17), from the clock, the pid
 * and addresses, which another user cannot read either. */
static void ring_key(uint64_t key[2]) {
    if (getrandom(key, 2 * sizeof key[0], GRND_NONBLOCK) == (ssize_t)(2 * sizeof key[0])) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    key[0] ^= mono_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)key;
    key[1] ^= ((uint64_t)ts.tv_nsec << 32 | (uint64_t)getpid()) * 0xbf58476d1ce4e5b9ull ^ (uint64_t)(uintptr_t)&ts;
}

/* The process table's pages are allocated this many slots at a time (one
 * 256 KiB step, 16,384 images), a step ahead: the collector grows the table
 * when fewer than RESERVE_AHEAD free slots are left. */
#define RESERVE_STEP 16384u
#define RESERVE_AHEAD 8192u

/* The file offset just past slot `n` of the table. */
static off_t table_end(uint32_t n) {
    return n >= ML_MAX_PROCS ? (off_t)sizeof(ml_ctl_t)
                             : (off_t)(offsetof(ml_ctl_t, procs) + (size_t)n * sizeof(ml_ctl_proc_t));
}

/* Allocates [from, to) of the control file in /dev/shm now. A tmpfs page is
 * otherwise allocated when first touched, and when tmpfs is full that touch
 * is a SIGBUS: in the collector, or in the program, which writes its slot.
 * 0, or -errno; a file system that cannot allocate ahead counts as done. */
static int allocate(int fd, off_t from, off_t to) {
    if (fallocate(fd, 0, from, to - from) == 0) return 0;
    return errno == EOPNOTSUPP || errno == ENOSYS ? 0 : -errno;
}

void ml__session_reserve(ml_collector_t *c, uint32_t nprocs) {
    if (c->ctl_fd < 0 || c->ctl_cap >= ML_MAX_PROCS || nprocs + RESERVE_AHEAD <= c->ctl_cap) return;
    uint32_t now = ml__now_ms(c);
    if (c->ctl_full && now < c->ctl_retry_ms) return;
    uint32_t want = c->ctl_cap + RESERVE_STEP < ML_MAX_PROCS ? c->ctl_cap + RESERVE_STEP : ML_MAX_PROCS;
    int rc = allocate(c->ctl_fd, table_end(c->ctl_cap), table_end(want));
    if (rc < 0) {
        if (!c->ctl_full)
            fprintf(stderr, "memlens: warning: cannot grow the process table in %s: %s; processes that "
                            "start while /dev/shm has no room run untraced\n",
                    c->ctl_path, strerror(-rc));
        c->ctl_full = true;
        c->ctl_retry_ms = now + 100;
        return;
    }
    c->ctl_cap = want;
    ml_atomic_store_release(&c->ctl->procs_cap, want);
}

/* The control file's name, /dev/shm/memlens-PID-RAND: RAND from getrandom,
 * so that another user of /dev/shm cannot create the name first and keep
 * memlens from starting; a name taken all the same (by chance, or by a
 * file left behind) is drawn again, a few times. */
#define CTL_NAME_TRIES 8

static int create_ctl(ml_collector_t *c) {
    int fd = -1;
    for (int i = 0; i < CTL_NAME_TRIES; i++) {
        uint32_t r;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = (uint32_t)(mono_ns() * 0x9e3779b97f4a7c15ull >> 32) ^ (uint32_t)i * 0x85ebca6bu;
        snprintf(c->ctl_path, sizeof c->ctl_path, "/dev/shm/memlens-%d-%08" PRIx32, (int)getpid(), r);
        fd = open(c->ctl_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0 || errno != EEXIST) break;
    }
    return fd;
}

int ml__session_open(ml_collector_t *c, char *err, size_t errlen) {
    int rc = 0;
    int fd = create_ctl(c);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot create %s: %s (memlens needs a writable /dev/shm)",
                 c->ctl_path, strerror(-rc));
        goto fail_open;
    }
    if (ftruncate(fd, sizeof(ml_ctl_t)) < 0) {
        rc = -errno;
        /* The limit is on each file, not on their sum: the control file is
         * the largest (a ring is 2 MiB), so its size is the whole need. It
         * said "about 16 MiB, and each traced process 2 MiB more": a limit
         * of 17 MiB still failed, and 20 MiB and 1 KiB runs any number. */
        char need[160] = "";
        if (rc == -EFBIG)
            snprintf(need, sizeof need,
                     " (the file size limit, `ulimit -f`, is lower: memlens needs it to be %zu KiB or more, "
                     "`ulimit -f %zu` in bash)",
                     (sizeof(ml_ctl_t) + 1023) / 1024, (sizeof(ml_ctl_t) + 1023) / 1024);
        snprintf(err, errlen, "cannot size %s to %zu bytes: %s%s", c->ctl_path, sizeof(ml_ctl_t), strerror(-rc), need);
        goto fail_map;
    }
    /* The header and the first step of the table now: a full /dev/shm is an
     * error here, before the program runs, not a SIGBUS later. */
    uint32_t cap = RESERVE_STEP;
    if ((rc = allocate(fd, 0, table_end(cap))) < 0) {
        snprintf(err, errlen, "cannot allocate %lld KiB in %s: %s%s", (long long)table_end(cap) / 1024,
                 c->ctl_path, strerror(-rc),
                 rc == -ENOSPC ? " (/dev/shm is full: memlens needs about 260 KiB there, and each traced "
                                 "process 2 MiB more; a container's is set by `docker run --shm-size`)"
                               : "");
        goto fail_map;
    }
    ml_ctl_t *ctl = mmap(NULL, sizeof(ml_ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ctl == MAP_FAILED) {
        rc = -errno;
        snprintf(err, errlen, "cannot map %s: %s", c->ctl_path, strerror(-rc));
        goto fail_map;
    }
    c->ctl_fd = fd;
    c->ctl_cap = cap;
    c->ctl_full = false;
    ctl->procs_cap = cap;
    ctl->version = ML_SHM_VERSION;
    ctl->options = (c->o.follow_fork ? ML_OPT_FOLLOW_FORK : 0) | (c->o.unwind_fp ? ML_OPT_UNWIND_FP : 0) |
                   (c->o.unwind_verify ? ML_OPT_UNWIND_VERIFY : 0) | (c->o.attached ? ML_OPT_ATTACHED : 0);
    ctl->sample_bytes = c->o.sample_bytes;
    ctl->collector_pid = (uint32_t)getpid();
    ctl->depth = c->o.depth;
    ctl->ring_slots = c->o.ring_slots;
    struct stat es;
    /* A stderr memlens cannot write to (closed when it started: main holds
     * the number with /dev/null opened read-only) is nowhere to write. */
    int efl = fcntl(2, F_GETFL);
    if (efl >= 0 && (efl & O_ACCMODE) != O_RDONLY && fstat(2, &es) == 0) {
        ctl->err_open = 1;
        ctl->err_dev = (uint64_t)es.st_dev;
        ctl->err_ino = (uint64_t)es.st_ino;
    }
    ring_key(ctl->ring_key);
    atomic_thread_fence(memory_order_release);
    ctl->magic = ML_CTL_MAGIC;
    c->ctl = ctl;
    c->t0_ns = mono_ns();
    return 0;
fail_map:
    close(fd);
    unlink(c->ctl_path);
fail_open:
    c->ctl_path[0] = '\0';
    return rc;
}

/* Removes the ring files that are still there (their processes never got
 * mapped) and the control file, and unmaps the segment. */
void ml__session_close(ml_collector_t *c) {
    if (!c->ctl) return;
    /* First, so that a process still running (memlens stopped waiting for
     * it at a signal) forks children that stay silent: they used to say
     * "memlens (pid N) is gone" into the program's stderr, once a fork. */
    ml_atomic_store_release(&c->ctl->closed, 1);
    uint32_t n = ml_atomic_load_acquire(&c->ctl->nprocs);
    if (n > ML_MAX_PROCS) n = ML_MAX_PROCS;
    char p[256];
    for (uint32_t i = 0; i < n; i++) {
        ml__ring_file_path(c, i, p, sizeof p);
        unlink(p);
    }
    unlink(c->ctl_path);
    munmap(c->ctl, sizeof(ml_ctl_t));
    c->ctl = NULL;
    if (c->ctl_fd >= 0) close(c->ctl_fd);
    c->ctl_fd = -1;
}

/* Files of sessions whose memlens is gone: /dev/shm/memlens-PID-RAND and
 * its rings (.SLOT.TAG, or .SLOT before shm version 23), owned by us,
 * where no process PID exists any more.
 * A PID that was reused keeps its files until that process is gone too. */
int ml_collector_sweep(uint64_t *bytes, uint32_t *files) {
    *bytes = 0;
    *files = 0;
    DIR *d = opendir("/dev/shm");
    if (!d) return -errno;
    int dfd = dirfd(d);
    uid_t me = geteuid();
    pid_t self = getpid();
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (strncmp(n, "memlens-", 8) != 0) continue;
        char *end;
        long pid = strtol(n + 8, &end, 10);
        if (end == n + 8 || *end != '-' || pid <= 0 || pid == self) continue;
        /* RAND: 8 hex digits, then nothing, ".SLOT" or ".SLOT.TAG" (TAG: 16 hex digits). */
        const char *r = end + 1;
        size_t k = 0;
        while (k < 8 && ((r[k] >= '0' && r[k] <= '9') || (r[k] >= 'a' && r[k] <= 'f'))) k++;
        if (k != 8 || (r[8] && r[8] != '.')) continue;
        if (r[8] == '.') {
            const char *sl = r + 9;
            if (*sl < '0' || *sl > '9') continue;
            while (*sl >= '0' && *sl <= '9') sl++;
            if (*sl == '.') {
                size_t t = 0;
                for (sl++; (sl[t] >= '0' && sl[t] <= '9') || (sl[t] >= 'a' && sl[t] <= 'f'); t++) {
                }
                if (t != 16) continue;
                sl += t;
            }
            if (*sl) continue;
        }
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        struct stat st;
        if (fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) || st.st_uid != me)
            continue;
        if (unlinkat(dfd, n, 0) == 0) {
            *bytes += (uint64_t)st.st_blocks * 512u;
            (*files)++;
        }
    }
    closedir(d);
    return 0;
}
