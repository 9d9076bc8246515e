/* discover.c - processes that registered in the session: their rings, their
 * trace files, their first record, and whether they are gone.
 *
 * A traced process claims a slot with one atomic add on ctl->nprocs, marks
 * it CLAIMED, creates its ring (<ctl>.<slot>) and marks it READY. The
 * collector takes slots strictly in order, so a process' trace never starts
 * before that of the image it forked or exec'd from.
 */
#define _GNU_SOURCE
#include "collector_internal.h"
#include "ml_config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void child_trace_path(const ml_collector_t *c, uint32_t pid, char *out, size_t len) {
    /* The stem is at most PATH_MAX - 5 bytes: a truncated name still names a
     * new file of ours, never the parent's trace. */
    if (snprintf(out, len, "%s.%u.mlt", c->stem, pid) >= (int)len) out[len - 1] = '\0';
    for (int n = 2; access(out, F_OK) == 0 && n < 1000; n++)
        if (snprintf(out, len, "%s.%u.%d.mlt", c->stem, pid, n) >= (int)len) out[len - 1] = '\0';
}

/* Maps the ring of `slot` (and unlinks its file: the mapping is all that is
 * needed from now on). NULL if it is not a ring of this session. */
static ml_ring_hdr_t *map_ring(const ml_collector_t *c, uint32_t slot, size_t *bytes) {
    char path[256];
    ml__ring_file_path(c, slot, path, sizeof path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < ml_ring_bytes(c->o.ring_slots)) {
        close(fd);
        return NULL;
    }
    ml_ring_hdr_t *h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    unlink(path);
    if (h == MAP_FAILED) return NULL;
    if (h->magic != ML_RING_MAGIC || h->capacity != c->o.ring_slots) {
        munmap(h, (size_t)st.st_size);
        return NULL;
    }
    *bytes = (size_t)st.st_size;
    return h;
}

/* The trace file: the root's was opened before the program started; a
 * child's is created here. Returns the descriptor or -1 (with a warning). */
static int open_trace(ml_collector_t *c, ml__proc_t *p) {
    if (p->info.is_root) {
        int fd = c->root_fd;
        c->root_fd = -1;
        snprintf(p->path, sizeof p->path, "%s", c->root_path);
        return fd;
    }
    child_trace_path(c, p->info.pid, p->path, sizeof p->path);
    int fd = open(p->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        fprintf(stderr, "memlens: warning: cannot write %s: %s; process %u is not recorded\n",
                p->path, strerror(errno), p->info.pid);
    return fd;
}

/* The first record says which process this is. Its strings live in p (or
 * the parent's p, or the root's arguments) until the collector is freed. */
static void process_record(ml_collector_t *c, ml__proc_t *p) {
    const ml_ring_hdr_t *h = p->ring;
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_PROCESS;
    /* The time the process registered, not the time we noticed it: the
     * events already in its ring are older than now (dump times never go
     * backwards, issue 13). */
    r.time_ms = h->start_ms;
    if (r.time_ms > ml__now_ms(c)) r.time_ms = ml__now_ms(c);
    typeof(r.u.process) *pr = &r.u.process;
    pr->pid = p->info.pid;
    pr->ppid = p->info.ppid;
    pr->start_realtime_ns = h->start_realtime_ns;
    pr->page_size = (uint32_t)sysconf(_SC_PAGESIZE);
    pr->unwinder = c->o.unwind_fp ? ML_UNWIND_FP : ML_UNWIND_LIBUNWIND;
    pr->depth = c->o.depth;
    pr->sample_bytes = c->o.sample_bytes;
    pr->options = c->ctl->options;
    uint32_t parent = c->ctl->procs[p->info.slot].parent_slot;
    pr->parent_trace = parent < ML_MAX_PROCS && c->procs[parent] ? c->procs[parent]->path : "";
    size_t n = strnlen(h->exe, sizeof h->exe - 1);
    memcpy(p->exe, h->exe, n);
    p->exe[n] = '\0';
    pr->exe = p->info.is_root && c->root_exe[0] ? c->root_exe : p->exe;
    if (p->info.is_root) {
        pr->argc = (uint32_t)(c->root_argc > ML_MAX_ARGS ? ML_MAX_ARGS : c->root_argc);
        for (uint32_t i = 0; i < pr->argc; i++) pr->argv[i] = c->root_argv[i];
    } else {
        n = h->cmdline_len < sizeof h->cmdline ? h->cmdline_len : sizeof h->cmdline;
        memcpy(p->cmdline, h->cmdline, n);
        p->cmdline[n] = '\0';
        for (uint32_t i = 0; i < n && pr->argc < ML_MAX_ARGS;) {
            pr->argv[pr->argc++] = p->cmdline + i;
            i += (uint32_t)strlen(p->cmdline + i) + 1;
        }
    }
    pr->producer = "memlens " ML_VERSION;
    ml__emit(c, p, &r);
}

static ml__proc_t *open_proc(ml_collector_t *c, uint32_t slot) {
    const ml_ctl_proc_t *cp = &c->ctl->procs[slot];
    size_t ring_bytes = 0;
    ml_ring_hdr_t *h = map_ring(c, slot, &ring_bytes);
    if (!h) return NULL;
    ml__proc_t *p = calloc(1, sizeof *p);
    if (!p) goto fail_proc;
    p->collector = c;
    p->info.slot = slot;
    p->info.pid = cp->pid;
    p->info.ppid = cp->ppid;
    p->info.path = p->path;
    p->ring = h;
    p->ring_bytes = ring_bytes;
    p->pidfd = -1;
    p->analysis_sink = -1;
    p->info.is_root = (pid_t)cp->pid == c->root_pid && cp->parent_slot == ~0u && c->root_fd >= 0;
    p->info.fd = open_trace(c, p);
    if (p->info.fd < 0) goto fail_trace;
    if (!p->info.is_root) {
        p->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)p->info.pid, 0);
        if (p->pidfd < 0) p->ended = true, p->end_kind = ML_END_UNKNOWN;
    }
    if (ml__sinks_open(c, p) < 0) goto fail_sinks;
    process_record(c, p);

    /* An image that replaced another by exec ends that one. */
    if (cp->parent_slot < ML_MAX_PROCS && c->procs[cp->parent_slot]) {
        ml__proc_t *q = c->procs[cp->parent_slot];
        if (q->info.pid == p->info.pid && !q->ended) {
            q->ended = true;
            q->end_kind = ML_END_EXEC;
        }
    }
    return p;
fail_sinks:
    if (p->pidfd >= 0) close(p->pidfd);
    close(p->info.fd);
fail_trace:
    free(p);
fail_proc:
    munmap(h, ring_bytes);
    return NULL;
}

void ml__discover(ml_collector_t *c) {
    uint32_t n = ml_atomic_load_acquire(&c->ctl->nprocs);
    if (n > ML_MAX_PROCS) n = ML_MAX_PROCS;
    while (c->nseen < n) {
        uint32_t st = ml_atomic_load_acquire(&c->ctl->procs[c->nseen].state);
        if (st == ML_PROC_FREE) {
            /* A process counts itself in nprocs a moment before it marks its
             * slot claimed: wait for it, or its whole recording would be
             * skipped (and the program would wait at exit for a scan that
             * never comes). Only an owner killed between the two stores
             * leaves a slot free for good: after 2 s, give up on it. */
            uint32_t now = ml__now_ms(c);
            if (!c->free_since_ms) c->free_since_ms = now + 1;
            if (now + 1 - c->free_since_ms < 2000) break;
            fprintf(stderr, "memlens: warning: process slot %u was never claimed; skipped\n",
                    c->nseen);
            c->free_since_ms = 0;
            c->nseen++;
            continue;
        }
        c->free_since_ms = 0;
        if (st == ML_PROC_CLAIMED) {
            /* Still creating its ring. If it died meanwhile, give up on it. */
            pid_t pid = (pid_t)c->ctl->procs[c->nseen].pid;
            if (pid && kill(pid, 0) < 0 && errno == ESRCH) {
                c->nseen++;
                continue;
            }
            if (pid == c->root_pid && c->root_exited) {
                c->nseen++;
                continue;
            }
            break;
        }
        if (st == ML_PROC_READY) {
            c->procs[c->nseen] = open_proc(c, c->nseen);
            if (!c->procs[c->nseen])
                fprintf(stderr, "memlens: warning: cannot open the event ring of process %u\n",
                        c->ctl->procs[c->nseen].pid);
        }
        c->nseen++;
    }
}

/* Children end when their pidfd says so; the root (and an exec'd image of
 * it) when waitpid does (ml_collector_root_ended). */
bool ml__proc_gone(ml__proc_t *p) {
    if (p->ended) return true;
    if (p->info.is_root) return false;
    struct pollfd pf = {p->pidfd, POLLIN, 0};
    if (poll(&pf, 1, 0) > 0) {
        p->ended = true;
        p->end_kind = ML_END_UNKNOWN;
    }
    return p->ended;
}
