/* discover.c - processes that registered in the session: their rings, their
 * trace files, their first record, and whether they are gone.
 *
 * A traced process claims a slot with one atomic add on ctl->nprocs, marks
 * it CLAIMED, creates its ring (<ctl>.<slot>.<tag>) and marks it READY. The
 * collector takes slots strictly in order, so a process' trace never starts
 * before that of the image it forked or exec'd from.
 */
#define _GNU_SOURCE
#include "collector_internal.h"
#include "ml_config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A name nothing holds yet (lstat: a dangling link counts as taken), nor a
 * trace of this session still written under its temporary name. */
static bool name_free(const ml_collector_t *c, const char *path) {
    for (uint32_t i = 0; i < c->nseen; i++)
        if (c->procs[i] && c->procs[i]->path && !strcmp(c->procs[i]->path, path)) return false;
    struct stat st;
    return lstat(path, &st) < 0 && errno == ENOENT;
}

/* STEM.PID.mlt, or STEM.PID.N.mlt when that is taken. The stem is at most
 * PATH_MAX - 5 bytes: a truncated name still names a new file of ours,
 * never the parent's trace. A stem whose last name leaves no room for the
 * suffix within NAME_MAX (a -o name of 240 bytes) is cut there: the name
 * whole failed with ENAMETOOLONG and the child ran untraced. */
static void child_trace_path(const ml_collector_t *c, uint32_t pid, char *out, size_t len) {
    const char *slash = strrchr(c->stem, '/');
    size_t dir = slash ? (size_t)(slash + 1 - c->stem) : 0, base = strlen(c->stem + dir);
    char suffix[32];
    for (int n = 1; n < 1000; n++) {
        if (n == 1)
            snprintf(suffix, sizeof suffix, ".%u.mlt", pid);
        else
            snprintf(suffix, sizeof suffix, ".%u.%d.mlt", pid, n);
        size_t keep = base + strlen(suffix) > NAME_MAX ? NAME_MAX - strlen(suffix) : base;
        if (snprintf(out, len, "%.*s%s", (int)(dir + keep), c->stem, suffix) >= (int)len) out[len - 1] = '\0';
        if (name_free(c, out)) return;
    }
}

/* Maps the ring of `slot` (and unlinks its file: the mapping is all that is
 * needed from now on). NULL if it is not a ring of this session, with errno
 * set (EMFILE: the collector has no descriptor left). */
static ml_ring_hdr_t *map_ring(const ml_collector_t *c, uint32_t slot, size_t *bytes) {
    char path[256];
    ml__ring_file_path(c, slot, path, sizeof path);
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return NULL;
    struct stat st;
    /* Only a regular file, never through a link: the process made it with
     * O_EXCL under a name only the session's processes can know
     * (ml_ring_name_tag). Its owner may differ from ours: a followed child
     * that dropped root (setuid) before it forked. */
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size < ml_ring_bytes(c->o.ring_slots)) {
        close(fd);
        errno = EPROTO;
        return NULL;
    }
    ml_ring_hdr_t *h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    unlink(path);
    errno = e;
    if (h == MAP_FAILED) return NULL;
    if (h->magic != ML_RING_MAGIC || h->capacity != c->o.ring_slots) {
        munmap(h, (size_t)st.st_size);
        errno = EPROTO;
        return NULL;
    }
    *bytes = (size_t)st.st_size;
    return h;
}

/* The trace file: the root's was opened before the program started; a
 * child's is created here, under a free name (ml_outfile.h: privately, never
 * replacing anything). Returns the descriptor, or -errno (with a warning). */
static int open_trace(ml_collector_t *c, ml__proc_t *p) {
    if (p->info.is_root) {
        if (!(p->path = strdup(c->root_path))) return -ENOMEM;
        p->out = c->root_out;
        memset(&c->root_out, 0, sizeof c->root_out);
        c->root_out.fd = -1;
        c->root_fd = -1;
        return p->out.fd;
    }
    char path[PATH_MAX];
    child_trace_path(c, p->info.pid, path, sizeof path);
    if (!(p->path = strdup(path))) {
        fprintf(stderr, "memlens: warning: out of memory; process %u is not recorded\n", p->info.pid);
        return -ENOMEM;
    }
    char err[PATH_MAX + 256];
    unsigned flags = (c->o.out_flags & ML_OUTFILE_GROUP) | ML_OUTFILE_NEW | ML_OUTFILE_KEEP;
    int rc = ml_outfile_open(&p->out, p->path, flags, err, sizeof err);
    if (rc < 0) {
        char shown[sizeof err];
        fprintf(stderr, "memlens: warning: %s; process %u is not recorded\n", ml_text_safe(err, shown, sizeof shown),
                p->info.pid);
        return rc;
    }
    return p->out.fd;
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
    pr->options = c->ctl->options | (h->fork_seq ? ML_OPT_FORKED : 0);
    uint32_t parent = c->ctl->procs[p->info.slot].parent_slot;
    pr->parent_trace = parent < c->nseen && c->procs[parent] ? c->procs[parent]->path : "";
    ml__proc_strings_t *str = p->str;
    size_t n = strnlen(h->exe, sizeof h->exe - 1);
    memcpy(str->exe, h->exe, n);
    str->exe[n] = '\0';
    pr->exe = p->info.is_root && c->root_exe[0] ? c->root_exe : str->exe;
    /* A record keeps ML_MAX_ARGS entries, and a child's command line what
     * fits the ring header: what is left out is said in the last entry,
     * never dropped silently. */
    if (p->info.is_root) {
        pr->argc = (uint32_t)(c->root_argc > ML_MAX_ARGS ? ML_MAX_ARGS - 1 : c->root_argc);
        for (uint32_t i = 0; i < pr->argc; i++) pr->argv[i] = c->root_argv[i];
        if (c->root_argc > ML_MAX_ARGS) {
            snprintf(str->argv_more, sizeof str->argv_more, "... (%d more arguments not kept)",
                     c->root_argc - (int)pr->argc);
            pr->argv[pr->argc++] = str->argv_more;
        }
    } else {
        bool cut = h->cmdline_len > sizeof h->cmdline;
        n = cut ? sizeof h->cmdline : h->cmdline_len;
        memcpy(str->cmdline, h->cmdline, n);
        str->cmdline[n] = '\0';
        uint32_t total = 0;
        for (uint32_t i = 0; i < n; i += (uint32_t)strlen(str->cmdline + i) + 1) total++;
        uint32_t keep = cut || total > ML_MAX_ARGS ? (total < ML_MAX_ARGS ? total : ML_MAX_ARGS - 1) : total;
        if (cut && keep == total && keep) keep--; /* the last one kept would be cut short */
        for (uint32_t i = 0; i < n && pr->argc < keep;) {
            pr->argv[pr->argc++] = str->cmdline + i;
            i += (uint32_t)strlen(str->cmdline + i) + 1;
        }
        if (cut)
            snprintf(str->argv_more, sizeof str->argv_more, "... (command line cut: arguments after the first %u not kept)",
                     keep);
        else if (total > keep)
            snprintf(str->argv_more, sizeof str->argv_more, "... (%u more arguments not kept)", total - keep);
        if (cut || total > keep) pr->argv[pr->argc++] = str->argv_more;
    }
    pr->producer = "memlens " ML_VERSION;
    ml__emit(c, p, &r);
}

/* An image that replaced another by exec ends that one (whether or not the
 * new image could be recorded). */
static void end_replaced(ml_collector_t *c, const ml_ctl_proc_t *cp) {
    if (cp->parent_slot < c->nseen && c->procs[cp->parent_slot]) {
        ml__proc_t *q = c->procs[cp->parent_slot];
        if (q->info.pid == cp->pid && !q->ended) {
            q->ended = true;
            q->end_kind = ML_END_EXEC;
        }
    }
}

/* NULL when the image is refused: *err then says why (ML_PROC_ERR_*). */
static ml__proc_t *open_proc(ml_collector_t *c, uint32_t slot, uint32_t *err) {
    const ml_ctl_proc_t *cp = &c->ctl->procs[slot];
    size_t ring_bytes = 0;
    ml_ring_hdr_t *h = map_ring(c, slot, &ring_bytes);
    if (!h) {
        int e = errno ? errno : EIO;
        fprintf(stderr, "memlens: warning: cannot open the event ring of process %u (%s); it is not recorded\n",
                cp->pid, strerror(e));
        *err = ML_PROC_ERR_COLLECTOR | ML_PROC_ERR_RING | (uint32_t)(e & 0xffff);
        return NULL;
    }
    int rc = -ENOMEM;
    ml__proc_t *p = calloc(1, sizeof *p);
    if (!p) goto fail_proc;
    p->collector = c;
    if (!(p->str = calloc(1, sizeof *p->str))) goto fail_trace;
    p->info.slot = slot;
    p->info.pid = cp->pid;
    p->info.ppid = cp->ppid;
    p->ring = h;
    p->ring_bytes = ring_bytes;
    p->pidfd = -1;
    p->analysis_sink = -1;
    p->info.is_root = (pid_t)cp->pid == c->root_pid && cp->parent_slot == ~0u && c->root_fd >= 0;
    p->info.fd = open_trace(c, p);
    if (p->info.fd < 0) {
        rc = p->info.fd;
        goto fail_trace;
    }
    p->info.path = p->path;
    /* The root process is memlens's child: its end, and that of every image
     * it exec'd, comes from waitpid (ml_collector_root_ended), with the exit
     * status. A pidfd for an exec'd image would race with it and could end
     * the image as "unknown" first. */
    bool waited = (pid_t)cp->pid == c->root_pid && !c->o.attached;
    if (!p->info.is_root && !waited) {
        p->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)p->info.pid, 0);
        if (p->pidfd < 0 && errno == ESRCH) {
            ml__proc_end_unwaited(p); /* gone already */
        } else if (p->pidfd < 0) {
            /* No descriptor to see it end (memlens at its own limit,
             * EMFILE): it was taken for ended at once, its trace closed
             * with what the ring held ("unknown" end, calls missing), and
             * the live process waited 30 s at its exit for a scan nobody
             * would make. Refused instead, as a ring memlens cannot open:
             * it runs untraced, is counted, and stops waiting. */
            rc = -errno;
            fprintf(stderr, "memlens: warning: cannot watch process %u for its end (%s); it is not recorded\n",
                    p->info.pid, strerror(-rc));
            goto fail_sinks;
        }
    }
    if ((rc = ml__sinks_open(c, p)) < 0) {
        /* The trace's header could not be written (a full disk, a device
         * such as /dev/full), or memory ran out. */
        char shown[PATH_MAX];
        fprintf(stderr, "memlens: error: cannot start the trace %s of process %u: %s%s; it is not recorded\n",
                ml_text_safe(p->path, shown, sizeof shown), p->info.pid, strerror(-rc), rc == -ENOSPC ? " (ENOSPC: the disk is full)" : "");
        goto fail_sinks;
    }
    process_record(c, p);
    ml__inherit_take(c, p);

    end_replaced(c, cp);
    return p;
fail_sinks:
    if (p->pidfd >= 0) close(p->pidfd);
    ml_outfile_abort(&p->out);
fail_trace:
    free(p->str);
    free(p->path);
    free(p);
fail_proc:
    if (!p) fprintf(stderr, "memlens: warning: out of memory; process %u is not recorded\n", cp->pid);
    munmap(h, ring_bytes);
    *err = ML_PROC_ERR_COLLECTOR | (uint32_t)((rc < 0 ? -rc : EIO) & 0xffff);
    return NULL;
}

/* Room for slot c->nseen in procs and one more entry in active. */
static int grow(ml_collector_t *c) {
    if (c->nseen < c->procs_cap) return 0;
    uint32_t cap = c->procs_cap ? c->procs_cap * 2 : 64;
    ml__proc_t **procs = realloc(c->procs, cap * sizeof *procs);
    if (!procs) return -ENOMEM;
    c->procs = procs;
    ml__proc_t **active = realloc(c->active, cap * sizeof *active);
    if (!active) return -ENOMEM;
    c->active = active;
    c->procs_cap = cap;
    return 0;
}

void ml__discover(ml_collector_t *c) {
    uint32_t n = ml_atomic_load_acquire(&c->ctl->nprocs);
    if (n > ML_MAX_PROCS) n = ML_MAX_PROCS;
    /* A process claims a slot only below the table's allocated size, which
     * we set: a count past it was written by something else (the program
     * can write the control file). */
    if (n > c->ctl_cap) n = c->ctl_cap;
    ml__session_reserve(c, n);
    while (c->nseen < n) {
        if (grow(c) < 0) {
            /* Try again next round; the process waits at exit, bounded. */
            fprintf(stderr, "memlens: warning: out of memory for the process table\n");
            break;
        }
        c->procs[c->nseen] = NULL;
        uint32_t st = ml_atomic_load_acquire(&c->ctl->procs[c->nseen].state);
        if (st == ML_PROC_FREE) {
            /* A process counts itself in nprocs a moment before it marks its
             * slot claimed: wait for it, or its whole recording would be
             * skipped (and the program would wait at exit for a scan that
             * never comes). Only an owner killed between the two stores
             * leaves a slot free for good: after 2 s, give up on it. */
            uint32_t now = ml__now_ms(c);
            if (!c->free_since_ms) {
                c->free_since_ms = now + 1;
                c->free_upto = n;
            }
            if (now + 1 - c->free_since_ms < 2000) break;
            /* Every free slot below free_upto was counted 2 s ago too: all
             * are skipped now, not after 2 s each (a count of 10^6 written
             * into the control file kept memlens waiting for days). */
            uint32_t first = c->nseen;
            while (c->nseen < c->free_upto && c->nseen < n &&
                   ml_atomic_load_acquire(&c->ctl->procs[c->nseen].state) == ML_PROC_FREE) {
                if (grow(c) < 0) break;
                c->procs[c->nseen++] = NULL;
            }
            if (c->nseen == first) c->procs[c->nseen++] = NULL;
            if (c->nseen - first == 1)
                fprintf(stderr, "memlens: warning: process slot %u was never claimed; skipped\n", first);
            else
                fprintf(stderr, "memlens: warning: process slots %u to %u were never claimed; skipped\n", first,
                        c->nseen - 1);
            c->free_since_ms = 0;
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
            uint32_t err = 0;
            ml__proc_t *p = open_proc(c, c->nseen, &err);
            c->procs[c->nseen] = p;
            if (p) c->active[c->nactive++] = p;
            /* Refused (open_proc said why): its recorder, which would wait
             * on a ring nobody drains once it is full, stops recording and
             * lets the program run on. */
            else {
                /* Why goes into the trace of the image that started it
                 * (say_failed_children), as for an image that could not
                 * make its ring: stderr alone may be a file of the
                 * program's, or gone. */
                c->ctl->procs[c->nseen].err = err;
                ml_atomic_add_relaxed(&c->ctl->procs_failed, 1);
                ml_atomic_store_release(&c->ctl->procs[c->nseen].state, ML_PROC_FAILED);
                end_replaced(c, &c->ctl->procs[c->nseen]);
            }
        }
        c->nseen++;
    }
}

/* A process that is gone and was not memlens' child: the status it wrote
 * into its ring header as it ended by exit, _exit or quick_exit (or a
 * return from main), or the signal memlens' handler let end it, else
 * unknown (SIGKILL: no process gets to say it). */
void ml__proc_end_unwaited(ml__proc_t *p) {
    uint32_t st = ml_atomic_load_acquire(&p->ring->end_status);
    p->ended = true;
    if (st & ML_END_STATUS_SET) {
        p->end_kind = st & ML_END_STATUS_SIGNALED ? ML_END_SIGNALED : ML_END_EXITED;
        p->end_status = (int32_t)(st & 0xffu);
    } else {
        p->end_kind = ML_END_UNKNOWN;
    }
}

/* Children end when their pidfd says so; the root (and an exec'd image of
 * it) when waitpid does (ml_collector_root_ended). */
bool ml__proc_gone(ml__proc_t *p) {
    if (p->ended) return true;
    if (p->info.is_root || p->pidfd < 0) return false; /* waitpid ends it */
    struct pollfd pf = {p->pidfd, POLLIN, 0};
    if (poll(&pf, 1, 0) > 0) ml__proc_end_unwaited(p);
    return p->ended;
}
