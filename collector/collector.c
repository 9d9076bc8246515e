/* collector.c - the collector's life cycle and its poll loop: one round
 * drains every process into the sinks, samples RSS, and finishes the
 * processes that ended.
 *
 * The collector is one thread. Each round it ticks the shared clock, picks
 * up newly registered processes, drains every ring into the batch and the
 * sinks, samples RSS, and (ml_collector_reap) finishes the processes that
 * have ended. A process that ended is drained to its last published event;
 * slots it claimed but never published (it died mid-event) are counted in
 * the trace's end record, never silently skipped.
 */
#define _GNU_SOURCE
#include "collector_internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define RSS_INTERVAL_MS ML_RSS_SAMPLE_MS /* the reports' labels say it */
/* A tick reads at most this many processes' /proc/PID/status (and checks as
 * many for an exec without libmemlens.so): with more traced processes alive
 * at once, they take turns, and each sample says how often its process is
 * sampled (ML_T_RSS.interval_ms), so the reports' labels stay true. Reading
 * every live process every tick grew without bound: 100,000 reads a second
 * with 1,000 alive (docs/recorder.md, "RSS samples"). */
#define RSS_PER_TICK 32
/* mallinfo2() consolidates glibc's fast bins and takes every arena lock:
 * cheap twice a second, measurable (2-3 %) at ten times a second. */
#define MALLINFO_INTERVAL_MS 500
/* The largest blob the decode stage takes (a module: its header, a path of
 * up to 4096 bytes and a build-id); our producer writes nothing bigger. */
#define BLOB_CAP (sizeof(ml_blob_module_t) + 8192)

/* ------------------------------------------------------------------------- */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------- */

int ml_collector_new(const ml_collector_opts_t *o, ml_collector_t **out, char *err, size_t errlen) {
    int rc = -ENOMEM;
    ml_collector_t *c = calloc(1, sizeof *c);
    if (!c) goto fail_alloc;
    c->o = *o;
    c->root_fd = -1;
    c->root_out.fd = -1;
    c->ctl_fd = -1;
    c->root_pid = -1;
    c->next_mallinfo = MALLINFO_INTERVAL_MS;
    c->blob_cap = BLOB_CAP;
    c->batch = malloc(sizeof *c->batch);
    c->blob = malloc(c->blob_cap);
    if (!c->batch || !c->blob) goto fail_buffers;
    c->batch->n = 0;
    c->batch->strings_used = 0;
    c->batch->proc = NULL;
    rc = ml__session_open(c, err, errlen);
    if (rc < 0) goto fail_session;
    *out = c;
    return 0;
fail_session:
fail_buffers:
    free(c->blob);
    free(c->batch);
    free(c);
fail_alloc:
    if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
    return rc;
}

const char *ml_collector_ctl_path(const ml_collector_t *c) {
    return c->ctl_path;
}

void ml_collector_set_root(ml_collector_t *c, const ml_collector_root_t *root) {
    c->root_pid = root->pid;
    c->root_out = *root->file;
    memset(root->file, 0, sizeof *root->file);
    root->file->fd = -1;
    c->root_fd = c->root_out.fd;
    snprintf(c->root_path, sizeof c->root_path, "%s", root->path);
    snprintf(c->root_exe, sizeof c->root_exe, "%s", root->exe ? root->exe : "");
    c->root_argc = root->argc;
    c->root_argv = root->argv;
    snprintf(c->stem, sizeof c->stem, "%s", c->root_path);
    size_t sl = strlen(c->stem);
    if (sl > 4 && !strcmp(c->stem + sl - 4, ".mlt")) c->stem[sl - 4] = '\0';
}

void ml_collector_free(ml_collector_t *c) {
    if (!c) return;
    for (uint32_t i = 0; i < c->nseen; i++) {
        ml__proc_t *p = c->procs[i];
        if (!p) continue;
        ml__sinks_release(c, p);
        if (!p->done) {
            /* Stopped before the process ended: what was written is kept. */
            if (p->out.fd >= 0) ml__trace_commit(p);
            if (p->ring) munmap(p->ring, p->ring_bytes);
            if (p->pidfd >= 0) close(p->pidfd);
        }
        free(p->untraced);
        free(p->exec_unseen);
        free(p->scan_note);
        ml__backlog_free(c, p);
        ml__inherit_release(c, p);
        free(p->str);
        free(p->path);
        free(p);
    }
    ml__inherit_free_all(c);
    ml__stage2_stop(c);
    free(c->procs);
    free(c->active);
    for (int i = 0; i < c->nsinks; i++)
        if (c->sinks[i].ops->free) c->sinks[i].ops->free(c->sinks[i].self);
    if (c->root_fd >= 0) ml_outfile_abort(&c->root_out); /* never registered: no trace */
    ml__session_close(c);
    free(c->blob);
    free(c->batch);
    free(c);
}

/* ------------------------------------------------------------------------- */
/* One round                                                                 */
/* ------------------------------------------------------------------------- */

/* The kernel's high-water mark of the resident set (VmHWM) in a
 * /proc/PID/status text. Unlike the samples below it counts RssShmem too, so
 * it includes the pages of memlens' event ring the process touched. */
uint64_t ml__status_hwm(const char *status) {
    const char *h = strstr(status, "VmHWM:");
    return h ? strtoull(h + 6, NULL, 10) * 1024 : 0;
}

/* /proc/PID/status (tid 0) or /proc/PID/task/TID/status into buf. */
static bool read_status(uint32_t pid, uint32_t tid, char *buf, size_t len) {
    char path[64];
    if (tid) snprintf(path, sizeof path, "/proc/%u/task/%u/status", pid, tid);
    else snprintf(path, sizeof path, "/proc/%u/status", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    return true;
}

uint32_t ml__memory_task(uint32_t pid, char *buf, size_t len) {
    if (read_status(pid, 0, buf, len) && strstr(buf, "RssAnon:")) return pid;
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/task", pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    uint32_t found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        uint32_t tid = (uint32_t)strtoul(e->d_name, NULL, 10);
        if (tid && tid != pid && read_status(pid, tid, buf, len) && strstr(buf, "RssAnon:")) found = tid;
    }
    closedir(d);
    return found;
}

uint64_t ml__read_hwm(uint32_t pid) {
    char buf[4096];
    return ml__memory_task(pid, buf, sizeof buf) ? ml__status_hwm(buf) : 0;
}

/* RssAnon + RssFile from /proc/PID/status: resident memory without
 * RssShmem, where our own event ring would otherwise show up as the
 * program's. A process whose main thread ended (pthread_exit in main) and
 * whose other threads run on shows no memory there any more: it is read
 * through one of those threads (the samples stopped at the main thread's
 * end before 2026-12-04). */
static void sample_rss(ml_collector_t *c, ml__proc_t *p, uint32_t interval_ms) {
    char buf[4096];
    if (!p->rss_tid || !read_status(p->info.pid, p->rss_tid, buf, sizeof buf) || !strstr(buf, "RssAnon:")) {
        uint32_t t = ml__memory_task(p->info.pid, buf, sizeof buf);
        if (!t) return;
        p->rss_tid = t == p->info.pid ? 0 : t;
    }
    uint64_t hwm = ml__status_hwm(buf);
    if (hwm > p->hwm_sampled) p->hwm_sampled = hwm;
    char *a = strstr(buf, "RssAnon:"), *f = strstr(buf, "RssFile:");
    if (!a || !f) return;
    uint64_t anon = strtoull(a + 8, NULL, 10), file = strtoull(f + 8, NULL, 10);
    uint32_t now = ml__now_ms(c);
    /* With events set aside (drain.c's backlog), a sample written now would
     * come before them and push their times forward (ml__time_order): it
     * waits for the first event stamped after it. */
    if (p->bl_head) {
        if (p->nrss_held == ML__RSS_HELD) { /* a burst of over 0.6 s: every other sample goes */
            for (uint32_t i = 0; i < ML__RSS_HELD / 2; i++) p->rss_held[i] = p->rss_held[2 * i + 1];
            p->nrss_held = ML__RSS_HELD / 2;
        }
        p->rss_held[p->nrss_held].time_ms = now;
        p->rss_held[p->nrss_held].interval_ms = interval_ms;
        p->rss_held[p->nrss_held++].bytes = (anon + file) * 1024;
        return;
    }
    ml__rss_held_flush(c, p, UINT32_MAX);
    ml__rss_emit(c, p, now, (anon + file) * 1024, interval_ms);
}

void ml__rss_emit(ml_collector_t *c, ml__proc_t *p, uint32_t time_ms, uint64_t bytes, uint32_t interval_ms) {
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_RSS;
    r.time_ms = time_ms < p->last_time ? p->last_time : time_ms;
    r.thread = p->last_thread;
    r.u.rss.rss_bytes = bytes;
    r.u.rss.interval_ms = interval_ms;
    ml__emit(c, p, &r);
}

void ml__rss_held_flush(ml_collector_t *c, ml__proc_t *p, uint32_t until) {
    uint32_t k = 0;
    for (; k < p->nrss_held && p->rss_held[k].time_ms <= until; k++)
        ml__rss_emit(c, p, p->rss_held[k].time_ms, p->rss_held[k].bytes, p->rss_held[k].interval_ms);
    if (!k) return;
    memmove(&p->rss_held[0], &p->rss_held[k], (p->nrss_held - k) * sizeof p->rss_held[0]);
    p->nrss_held -= k;
}

/* A followed process that exec'd a program without libmemlens.so (its
 * LD_PRELOAD was replaced, or the program is set-user-ID or static) never
 * registers its new image: its /proc/PID/exe changed, and no later slot of
 * the session has its pid. After a second of that, say so and end the old
 * image's trace there (status exec): memlens does not wait for a program it
 * does not trace. The root process is only named: its end comes from
 * waitpid. A re-exec of the same file is not seen. */
static void check_exec(ml_collector_t *c, ml__proc_t *p) {
    if (!c->o.follow_fork || !p->str || !p->str->exe[0]) return;
    char link[64], exe[sizeof p->str->exe];
    snprintf(link, sizeof link, "/proc/%u/exe", p->info.pid);
    ssize_t n = readlink(link, exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = '\0';
    size_t k = strlen(p->str->exe);
    if (!strcmp(exe, p->str->exe) || (!strncmp(exe, p->str->exe, k) && !strcmp(exe + k, " (deleted)"))) {
        p->exec_seen_ms = 0;
        return;
    }
    uint32_t nprocs = ml_atomic_load_acquire(&c->ctl->nprocs);
    if (nprocs > ML_MAX_PROCS) nprocs = ML_MAX_PROCS;
    for (uint32_t i = p->info.slot + 1; i < nprocs; i++)
        if (c->ctl->procs[i].pid == p->info.pid) return; /* a traced image follows */
    uint32_t now = ml__now_ms(c);
    if (!p->exec_seen_ms) {
        p->exec_seen_ms = now + 1;
        return;
    }
    if (p->exec_seen_ms == UINT32_MAX || now + 1 - p->exec_seen_ms < 1000) return;
    p->exec_seen_ms = UINT32_MAX; /* said once */
    fprintf(stderr,
            "memlens: warning: process %u exec'd %s without libmemlens.so (its LD_PRELOAD "
            "was replaced or emptied, or the program is set-user-ID or static): it is not "
            "traced from there on\n",
            p->info.pid, exe);
    free(p->exec_unseen);
    p->exec_unseen = strdup(exe); /* for its trace, at its end (say_exec_unseen) */
    if (!p->info.is_root && p->info.pid != (uint32_t)c->root_pid) {
        p->ended = true;
        p->end_kind = ML_END_EXEC;
    }
}

/* One tick of the RSS samples: every live process when there are at most
 * RSS_PER_TICK, else the next RSS_PER_TICK in turn from where the last tick
 * stopped (ml_collector_reap keeps the place when processes leave), so each
 * is read at least once every ceil(live / RSS_PER_TICK) ticks (a turn that
 * wraps round the list reads some sooner): the interval the samples say is
 * a bound, never shorter than a gap between them. */
static void sample_tick(ml_collector_t *c) {
    uint32_t n = c->nactive, live = 0;
    for (uint32_t i = 0; i < n; i++) live += !c->active[i]->ended;
    if (!live) return;
    uint32_t interval = RSS_INTERVAL_MS * ((live + RSS_PER_TICK - 1) / RSS_PER_TICK);
    if (c->rss_next >= n) c->rss_next = 0;
    uint32_t k = 0, budget = RSS_PER_TICK;
    for (; k < n && budget; k++) {
        ml__proc_t *p = c->active[(c->rss_next + k) % n];
        if (p->ended) continue;
        sample_rss(c, p, interval);
        check_exec(c, p);
        budget--;
    }
    c->rss_next = (c->rss_next + k) % n;
}

uint64_t ml_collector_poll(ml_collector_t *c) {
    uint32_t now = ml__now_ms(c);
    ml_atomic_store_relaxed(&c->ctl->clock_ms, now);
    ml__discover(c);
    uint64_t got = 0;
    for (uint32_t i = 0; i < c->nactive; i++) got += ml__drain(c, c->active[i], false);
    if (now >= c->next_rss) {
        c->next_rss = now + RSS_INTERVAL_MS;
        sample_tick(c);
        ml__flush(c);
    }
    if (now >= c->next_mallinfo) {
        c->next_mallinfo = now + MALLINFO_INTERVAL_MS;
        ml_atomic_add_relaxed(&c->ctl->mallinfo_gen, 1);
    }
    return got;
}

/* ------------------------------------------------------------------------- */
/* Ends                                                                      */
/* ------------------------------------------------------------------------- */

void ml_collector_root_maxrss(ml_collector_t *c, uint64_t bytes) {
    c->root_maxrss = bytes;
}

/* What kept an image whose slot is ML_PROC_FAILED from being recorded,
 * from its err (ml_ctl_proc_t): "could not make its event ring (REASON)"
 * when its libmemlens.so failed, else what the collector could not do. */
static const char *failed_why(uint32_t err, char *buf, size_t len) {
    if (err == ML_PROC_ERR_PIDNS)
        snprintf(buf, len, "runs in another PID namespace than memlens (unshare -p, a container), where memlens "
                           "cannot follow it,");
    else if (!(err & ML_PROC_ERR_COLLECTOR))
        snprintf(buf, len, "could not make its event ring (%s)", strerror((int)err));
    else if (err & ML_PROC_ERR_RING)
        snprintf(buf, len, "got no trace: memlens could not open its event ring (%s)", strerror(ML_PROC_ERRNO(err)));
    else
        snprintf(buf, len, "got no trace: memlens could not start it (%s)", strerror(ML_PROC_ERRNO(err)));
    return buf;
}

/* The reason libmemlens.so wrote before p's image exec'd a program it
 * cannot follow (set-user-ID or static; cleared when the exec failed), when
 * no traced image of the process came after it; else NULL. `why` holds
 * what the ring header said. */
static const char *exec_untraced(const ml_collector_t *c, const ml__proc_t *p,
                                 char why[sizeof p->ring->exec_untraced]) {
    memcpy(why, p->ring->exec_untraced, sizeof p->ring->exec_untraced);
    why[sizeof p->ring->exec_untraced - 1] = '\0';
    /* Every image ends here: the table is searched only when there is
     * something to find (a reason, or an image that failed), or thousands
     * of images under --follow-fork would cost the square of their count. */
    if (!why[0] && !ml_atomic_load_acquire(&c->ctl->procs_failed)) return NULL;
    uint32_t nprocs = ml_atomic_load_acquire(&c->ctl->nprocs);
    if (nprocs > ML_MAX_PROCS) nprocs = ML_MAX_PROCS;
    for (uint32_t i = p->info.slot + 1; i < nprocs; i++) {
        if (c->ctl->procs[i].pid != p->info.pid) continue;
        /* An image after it that could not make its ring (its file size
         * limit, no descriptor left), or whose trace the collector could
         * not start (a full disk), is no traced image. */
        if (ml_atomic_load_acquire(&c->ctl->procs[i].state) != ML_PROC_FAILED) return NULL;
        if (!why[0] && c->ctl->procs[i].err) {
            char b[160];
            snprintf(why, sizeof p->ring->exec_untraced, "its new image %s",
                     failed_why(c->ctl->procs[i].err, b, sizeof b));
        }
    }
    return why[0] ? why : NULL;
}

void ml_collector_root_ended(ml_collector_t *c, int st) {
    c->root_exited = true;
    c->root_status = st;
    ml__discover(c);
    for (uint32_t i = 0; i < c->nactive; i++) {
        ml__proc_t *p = c->active[i];
        /* The root, or an exec'd image of the root process. */
        if (p->ended || !(p->info.is_root || p->info.pid == (uint32_t)c->root_pid)) continue;
        p->ended = true;
        char why[sizeof p->ring->exec_untraced];
        if (exec_untraced(c, p, why)) {
            /* The status is the untraced program's; this image ended by
             * its exec (what it held then is no leak). */
            p->end_kind = ML_END_EXEC;
            p->end_status = 0;
            continue;
        }
        p->end_kind = WIFSIGNALED(st) ? ML_END_SIGNALED : ML_END_EXITED;
        p->end_status = WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st);
    }
}

/* --unwind verify: the recorder's stacks against libunwind's, into the trace
 * and on verify_out (docs/recorder.md#stacks). */
static void unwind_check(ml_collector_t *c, ml__proc_t *p) {
    if (!c->o.unwind_verify) return;
    ml_ring_hdr_t *h = p->ring;
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_UNWIND_CHECK;
    r.time_ms = p->last_time;
    r.thread = p->last_thread;
    typeof(r.u.unwind_check) *q = &r.u.unwind_check;
    q->stacks = ml_atomic_load_relaxed(&h->unwind_checked);
    q->mismatches = ml_atomic_load_relaxed(&h->unwind_mismatch);
    q->fallbacks = ml_atomic_load_relaxed(&h->unwind_fallback);
    q->reused = ml_atomic_load_relaxed(&h->unwind_reused);
    if (ml_atomic_load_acquire(&h->unwind_bad.set)) {
        q->first_frame = h->unwind_bad.frame;
        q->fast_pc = h->unwind_bad.fast_pc;
        q->full_pc = h->unwind_bad.full_pc;
    }
    ml__emit(c, p, &r);
    FILE *out = c->o.verify_out;
    if (!out) return;
    fprintf(out,
            "memlens: unwind verify: pid %u: %" PRIu64 " stacks compared (%" PRIu64 " taken by libunwind, %" PRIu64
            " reusing the previous stack), %" PRIu64 " differ\n",
            p->info.pid, q->stacks, q->fallbacks, q->reused, q->mismatches);
    if (q->mismatches)
        fprintf(out,
                "memlens: unwind verify: first difference at frame %" PRIu64 ": 0x%" PRIx64
                " (%u frames%s) against libunwind's 0x%" PRIx64 " (%u frames)\n",
                q->first_frame, q->fast_pc, h->unwind_bad.fast_frames, h->unwind_bad.fell_back ? ", libunwind's own" : "",
                q->full_pc, h->unwind_bad.full_frames);
}

/* Syncs the trace file and renames it into place (ml_outfile.h). */
void ml__trace_commit(ml__proc_t *p) {
    char err[PATH_MAX * 2 + 256];
    if (ml_outfile_commit(&p->out, err, sizeof err) < 0) {
        char shown[sizeof err]; /* names a directory someone else may have renamed */
        fprintf(stderr, "memlens: error: process %u: %s\n", p->info.pid, ml_text_safe(err, shown, sizeof shown));
        p->info.unsaved = true;
    }
    p->info.fd = -1;
}

/* Drains what the process published, writes its end record and ends its
 * sinks (the snapshot goes after the end record), then lets go of its
 * trace file and ring. */
/* The kernel's peak RSS of p, best source first (ML_HWM_*): VmHWM read
 * while the process waited at exit, or by an image before its exec (exact,
 * this image alone); else, for
 * the last image of the root process (it crashed, was killed or called
 * _exit), wait4's ru_maxrss (the kernel's maximum over the process' whole
 * life, images before an exec and the children it waited for included);
 * else the last VmHWM read with the samples (a lower bound). */
static void emit_peak_rss(ml_collector_t *c, ml__proc_t *p) {
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_PEAK_RSS;
    r.time_ms = p->last_time;
    r.thread = p->last_thread;
    bool last_root_image = p->info.pid == (uint32_t)c->root_pid && p->end_kind != ML_END_EXEC;
    uint64_t exec_hwm = p->end_kind == ML_END_EXEC ? ml_atomic_load_acquire(&p->ring->exec_hwm) : 0;
    if (p->hwm_exit) {
        r.u.peak_rss.bytes = p->hwm_exit;
        r.u.peak_rss.source = ML_HWM_EXIT;
    } else if (exec_hwm) {
        /* Read by the image itself just before its exec: the samples may be
         * the next program's, whose VmHWM starts again (`env` then showed
         * 480 KB "sampled" where the kernel said 1.6 MB). */
        r.u.peak_rss.bytes = exec_hwm;
        r.u.peak_rss.source = ML_HWM_EXIT;
    } else if (last_root_image && c->root_maxrss) {
        r.u.peak_rss.bytes = c->root_maxrss;
        r.u.peak_rss.source = ML_HWM_WAIT4;
    } else if (p->hwm_sampled) {
        r.u.peak_rss.bytes = p->hwm_sampled;
        r.u.peak_rss.source = ML_HWM_SAMPLED;
    } else {
        return;
    }
    ml__emit(c, p, &r);
}

/* What p's trace does not hold, and why: said on stderr when `say`, and
 * written into the trace (ML_T_UNTRACED, before its end) in any case, so
 * that every report of the trace says it too (its warnings), not only the
 * run that made it. */
static void __attribute__((format(printf, 6, 7)))
note_untraced(ml_collector_t *c, ml__proc_t *p, uint8_t what, uint64_t count, bool say, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = strlen(msg) + 1;
    if (say) { /* the program's names, with no control byte for the terminal (the trace keeps them) */
        char shown[sizeof msg + 1];
        fprintf(stderr, "memlens: %s\n", ml_text_safe(msg, shown, sizeof shown));
    }
    ml_record_t *r = ml__batch_slot(c, p, len);
    ml_batch_t *b = c->batch; /* after the slot: a full one was handed over */
    char *text = b->strings + b->strings_used;
    memcpy(text, msg, len);
    memset(r, 0, sizeof *r);
    r->tag = ML_T_UNTRACED;
    r->time_ms = p->last_time;
    r->thread = p->last_thread;
    r->u.untraced.what = what;
    r->u.untraced.count = count;
    r->u.untraced.message = text;
    ml__time_order(p, r);
    ml__batch_commit(c, (uint32_t)len);
}

/* The image exec'd a program that libmemlens.so cannot follow (set-user-ID
 * or static: the library wrote why into the ring before the exec) and no
 * traced image came after it: say which program went untraced and which
 * trace holds the process up to its exec. */
static void say_exec_untraced(ml_collector_t *c, ml__proc_t *p) {
    char why[sizeof p->ring->exec_untraced];
    if (!exec_untraced(c, p, why)) return;
    note_untraced(c, p, ML_UNTRACED_EXEC, 1, true,
                  "not traced: process %u exec'd a program memlens cannot follow: %s; %s holds the process up "
                  "to that exec",
                  p->info.pid, why, p->info.path);
}

/* An exec check_exec found (the hook saw none: the program's LD_PRELOAD
 * was taken away), into the trace as well; said on stderr when found. An
 * exec the hook saw and said why (say_exec_untraced) is not said twice. */
static void say_exec_unseen(ml_collector_t *c, ml__proc_t *p) {
    if (!p->exec_unseen) return;
    char why[sizeof p->ring->exec_untraced];
    if (!exec_untraced(c, p, why))
        note_untraced(c, p, ML_UNTRACED_EXEC, 1, false,
                      "not traced: process %u exec'd %s without libmemlens.so (its LD_PRELOAD was replaced or "
                      "emptied, or the program is set-user-ID or static): it is not traced from there on",
                      p->info.pid, p->exec_unseen);
    free(p->exec_unseen);
    p->exec_unseen = NULL;
}

/* Memory the exit scan did not read for pointers (exit_scan.c said it on
 * stderr then): the leak verdicts' caveat, in the trace for its reports. */
static void say_unscanned(ml_collector_t *c, ml__proc_t *p) {
    if (!p->scan_note) return;
    note_untraced(c, p, ML_UNTRACED_UNSCANNED, p->scan_note->count, false, "%s", p->scan_note->text);
    free(p->scan_note);
    p->scan_note = NULL;
}

/* One child started without a fork that runs a program memlens cannot
 * follow (ML_BLOB_UNTRACED). */
struct ml__untraced_s {
    uint32_t pid;
    uint16_t via;
    char why[ML_UNTRACED_REASON_MAX + 1];
};

void ml__untraced_note(ml__proc_t *p, const uint8_t *blob, uint32_t len) {
    ml_blob_untraced_t u;
    if (len < sizeof u) return;
    memcpy(&u, blob, sizeof u);
    if (u.op == ML_UNTRACED_CANCEL) {
        /* The vfork child's exec failed: nothing ran. */
        for (uint32_t i = p->nuntraced; i-- > 0;)
            if (p->untraced[i].pid == u.pid) {
                memmove(&p->untraced[i], &p->untraced[i + 1], (p->nuntraced - i - 1) * sizeof *p->untraced);
                p->nuntraced--;
                return;
            }
        if (p->untraced_more) p->untraced_more--; /* one of those not kept */
        return;
    }
    if (!p->untraced) p->untraced = calloc(ML__UNTRACED_KEEP, sizeof *p->untraced);
    if (!p->untraced || p->nuntraced == ML__UNTRACED_KEEP) {
        p->untraced_more++; /* counted, and said as a number */
        return;
    }
    struct ml__untraced_s *e = &p->untraced[p->nuntraced++];
    e->pid = u.pid;
    e->via = u.via;
    size_t n = len - sizeof u;
    if (n > ML_UNTRACED_REASON_MAX) n = ML_UNTRACED_REASON_MAX;
    memcpy(e->why, blob + sizeof u, n);
    e->why[n] = '\0';
}

/* The children of p that run a program memlens cannot follow (started by
 * posix_spawn or a vfork and exec), said as an exec of p itself is. */
static void say_untraced_children(ml_collector_t *c, ml__proc_t *p) {
    for (uint32_t i = 0; i < p->nuntraced; i++) {
        const struct ml__untraced_s *e = &p->untraced[i];
        if (e->via == ML_UNTRACED_VIA_VFORK)
            note_untraced(c, p, ML_UNTRACED_SPAWNED, 1, true,
                          "not traced: process %u, a vfork child of process %u, exec'd a program memlens "
                          "cannot follow: %s; %s holds process %u",
                          e->pid, p->info.pid, e->why, p->info.path, p->info.pid);
        else
            note_untraced(c, p, ML_UNTRACED_SPAWNED, 1, true,
                          "not traced: process %u, started by process %u with %s, runs a program memlens "
                          "cannot follow: %s; %s holds process %u",
                          e->pid, p->info.pid,
                          e->via == ML_UNTRACED_VIA_POSIX_SPAWNP ? "posix_spawnp" : "posix_spawn", e->why,
                          p->info.path, p->info.pid);
    }
    if (p->untraced_more)
        note_untraced(c, p, ML_UNTRACED_SPAWNED, p->untraced_more, true,
                      "not traced: %u more programs started by process %u (posix_spawn or vfork) that memlens "
                      "cannot follow (set-user-ID or static)",
                      p->untraced_more, p->info.pid);
    free(p->untraced);
    p->untraced = NULL;
    p->nuntraced = p->untraced_more = 0;
}

/* Without --follow-fork: the children p started, not traced (their
 * allocations are not in any trace), said once as a number. */
static void say_unfollowed_children(ml_collector_t *c, ml__proc_t *p) {
    uint32_t n = ml_atomic_load_relaxed(&p->ring->children_unfollowed);
    if (!n) return;
    note_untraced(c, p, ML_UNTRACED_CHILDREN, n, !c->o.quiet,
                  "not traced: %u child process%s started by process %u (%s); --follow-fork traces them", n,
                  n == 1 ? "" : "es", p->info.pid, p->ring->exe[0] ? p->ring->exe : "?");
}

/* Objects the program loaded into other link namespaces (dlmopen): their
 * allocations went to those namespaces' own libc, untraced. */
static void say_other_namespaces(ml_collector_t *c, ml__proc_t *p) {
    uint32_t n = ml_atomic_load_relaxed(&p->ring->dlmopen_other);
    if (!n) return;
    note_untraced(c, p, ML_UNTRACED_NAMESPACE, n, !c->o.quiet,
                  "not traced: allocations by code that process %u (%s) loaded into another link namespace "
                  "(%u dlmopen call%s): each namespace has its own libc, whose malloc memlens does not replace",
                  p->info.pid, p->ring->exe[0] ? p->ring->exe : "?", n, n == 1 ? "" : "s");
}

/* malloc came from an object ahead of libmemlens.so: none of p's heap calls
 * reached the hooks. The process said so on its stderr as it started; this
 * says it again at its end, beside the run's summary, and in the trace. */
static void say_allocator_elsewhere(ml_collector_t *c, ml__proc_t *p) {
    char where[sizeof p->ring->malloc_elsewhere];
    memcpy(where, p->ring->malloc_elsewhere, sizeof where);
    where[sizeof where - 1] = '\0';
    if (!where[0]) return;
    note_untraced(c, p, ML_UNTRACED_ALLOCATOR, 1, !c->o.quiet,
                  ML_UNTRACED_HEAP_PREFIX "%u (%s): malloc comes from %s, ahead of libmemlens.so "
                  "in the loader's lookup order (its own allocator, or one preloaded first), so none of them "
                  "reached memlens; the allocation counts, peak and leaks here leave them out",
                  p->info.pid, p->ring->exe[0] ? p->ring->exe : "?", where);
}

/* Libraries opened with RTLD_DEEPBIND bind malloc & co. past
 * libmemlens.so; the process redirects them once the loader has relocated
 * them (interpose/attach.c). What they called before that is not traced,
 * nor anything of the ones that could not be redirected: said in the trace,
 * and on stderr when some could not be. */
static void say_deepbind(ml_collector_t *c, ml__proc_t *p) {
    uint32_t n = ml_atomic_load_relaxed(&p->ring->deepbind);
    if (!n) return;
    uint32_t bad = ml_atomic_load_relaxed(&p->ring->deepbind_unredirected);
    char first[sizeof p->ring->deepbind_first];
    memcpy(first, p->ring->deepbind_first, sizeof first);
    first[sizeof first - 1] = '\0';
    char tail[160] = "";
    if (bad)
        snprintf(tail, sizeof tail, "; %u librar%s could not be redirected, and none of %s heap calls is traced",
                 bad, bad == 1 ? "y" : "ies", bad == 1 ? "its" : "their");
    note_untraced(c, p, ML_UNTRACED_DEEPBIND, n, bad && !c->o.quiet,
                  "not traced: heap calls made before the loader had relocated them by the libraries that "
                  "process %u (%s) opened with RTLD_DEEPBIND (%u dlopen call%s, the first of %s): such a library "
                  "binds malloc and free past libmemlens.so, and memlens redirects its calls once it is "
                  "relocated, usually before its constructors run%s",
                  p->info.pid, p->ring->exe[0] ? p->ring->exe : "?", n, n == 1 ? "" : "s",
                  first[0] ? first : "?", tail);
}

/* A fork child whose exit scan ran without its parent's blocks (over the
 * bounds of inherit.c): its leak verdicts' caveat, in the trace. The run
 * says it once on stderr, for all such children (ml__inherit_free_all). */
static void say_uninherited(ml_collector_t *c, ml__proc_t *p) {
    if (!p->inherit_unscanned) return;
    note_untraced(c, p, ML_UNTRACED_INHERITED, p->inherit_unscanned, false,
                  "not inherited: process %u, a fork child, was given no copy of the %llu blocks its parent "
                  "had live at the fork (over %llu M blocks, or %llu MiB for all copies at once): a block it "
                  "held only through one of them is reported as definitely lost",
                  p->info.pid, (unsigned long long)p->inherit_unscanned,
                  (unsigned long long)(ML__INHERIT_MAX_BLOCKS >> 20),
                  (unsigned long long)(ML__INHERIT_MAX_BYTES >> 20));
    p->inherit_unscanned = 0;
}

/* Children of this image (forked, or started by posix_spawn or vfork)
 * whose libmemlens.so could not make its event ring (too many open files,
 * a file size limit, no memory), or whose ring or trace the collector could
 * not open (a full disk, no descriptor left), ran unrecorded: said in this
 * image's trace, as the warning may have gone nowhere (into a file the
 * program opened as descriptor 2, or nowhere when it closed it). The run's
 * summary counts them all. */
static void say_failed_children(ml_collector_t *c, ml__proc_t *p) {
    if (!ml_atomic_load_acquire(&c->ctl->procs_failed)) return; /* the usual case: nothing to search for */
    uint32_t nprocs = ml_atomic_load_acquire(&c->ctl->nprocs);
    if (nprocs > ML_MAX_PROCS) nprocs = ML_MAX_PROCS;
    for (uint32_t i = p->info.slot + 1; i < nprocs; i++) {
        const ml_ctl_proc_t *cp = &c->ctl->procs[i];
        if (cp->parent_slot != p->info.slot || cp->pid == p->info.pid || !cp->err ||
            ml_atomic_load_acquire(&cp->state) != ML_PROC_FAILED)
            continue;
        char b[160];
        note_untraced(c, p, ML_UNTRACED_CHILDREN, 1, false,
                      "not recorded: process %u, a child of process %u, %s and ran untraced", cp->pid,
                      p->info.pid, failed_why(cp->err, b, sizeof b));
    }
}

/* An attached process that ended during the window with no exit memlens
 * saw: no exit scan, and what was live at its end is not what was live at
 * a detach (the program did not run on). Said in the trace, for every
 * report of it (ML_UNTRACED_ENDED_PREFIX); attach.c said it on stderr. */
static void say_gone_unseen(ml_collector_t *c, ml__proc_t *p) {
    if (!p->gone_unseen) return;
    note_untraced(c, p, ML_UNTRACED_ENDED, 1, false,
                  ML_UNTRACED_ENDED_PREFIX "process %u (%s) ended during the attach window without an exit memlens "
                  "saw (killed by SIGKILL or by a signal it could not catch, or a raw exit_group system call): the "
                  "trace holds its calls up to its end, what was live then is shown, and there was no exit scan",
                  p->info.pid, p->ring->exe[0] ? p->ring->exe : "?");
    p->gone_unseen = false;
}

void ml_collector_root_gone(ml_collector_t *c) {
    c->root_gone = true;
}

static void finish_proc(ml_collector_t *c, ml__proc_t *p) {
    ml__drain(c, p, true);
    ml__rss_held_flush(c, p, UINT32_MAX);
    say_exec_untraced(c, p);
    say_exec_unseen(c, p);
    say_failed_children(c, p);
    say_untraced_children(c, p);
    say_unfollowed_children(c, p);
    say_other_namespaces(c, p);
    say_allocator_elsewhere(c, p);
    say_deepbind(c, p);
    say_unscanned(c, p);
    say_uninherited(c, p);
    say_gone_unseen(c, p);
    unwind_check(c, p);
    emit_peak_rss(c, p);
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_END;
    r.time_ms = p->last_time;
    r.thread = p->last_thread;
    ml_rec_end_t *e = &r.u.end;
    e->status_kind = p->end_kind;
    e->status = p->end_status;
    e->events = p->events;
    e->ring_waits = ml_atomic_load_relaxed(&p->ring->waits);
    e->ring_wait_ns = ml_atomic_load_relaxed(&p->ring->wait_ns);
    e->lost_in_crash = p->lost_in_crash;
    e->lost_dead_collector = ml_atomic_load_relaxed(&p->ring->lost);
    e->nested_skipped = ml_atomic_load_relaxed(&p->ring->nested_skipped);
    e->truncated_stacks = ml_atomic_load_relaxed(&p->ring->truncated);
    e->duration_ms = ml__now_ms(c);
    ml__emit(c, p, &r);
    p->info.end = *e;
    p->info.ended = true;
    ml__sinks_end(c, p);
    ml__trace_commit(p);
    /* Only the root process' images are summarised from their analysis:
     * another's session goes now, or thousands of images would hold
     * hundreds of MB (200 KB each for /bin/true). */
    if (p->info.pid != (uint32_t)c->root_pid) {
        ml__sinks_release_analysis(c, p);
        if (!p->info.analysis) { /* nothing points at its record's strings now */
            free(p->str);
            p->str = NULL;
        }
    }
    munmap(p->ring, p->ring_bytes);
    p->ring = NULL;
    if (p->pidfd >= 0) close(p->pidfd);
    p->pidfd = -1;
    ml__inherit_release(c, p);
    p->done = true;
}

/* Finished processes leave the active list (which keeps its order). The
 * session is over once the root exited, nothing is active and every slot
 * that was counted has been looked at: nprocs counts the images refused for
 * want of a slot too, so it is capped at the table's size (issue 12: past
 * 1024 images the comparison never held and memlens never exited). */
bool ml_collector_reap(ml_collector_t *c) {
    uint32_t j = 0, before = 0; /* finished ones before the RSS samples' turn */
    for (uint32_t i = 0; i < c->nactive; i++) {
        ml__proc_t *p = c->active[i];
        if (ml__proc_gone(p)) {
            finish_proc(c, p);
            before += i < c->rss_next;
        } else {
            c->active[j++] = p;
        }
    }
    c->nactive = j;
    c->rss_next -= before;
    uint32_t n = ml_atomic_load_acquire(&c->ctl->nprocs);
    if (n > ML_MAX_PROCS) n = ML_MAX_PROCS;
    return c->root_exited && !c->nactive && c->nseen >= n;
}

void ml_collector_stop(ml_collector_t *c) {
    ml__discover(c);
    for (uint32_t i = 0; i < c->nseen; i++) {
        ml__proc_t *p = c->procs[i];
        if (!p || p->done) continue;
        if (!p->ended && c->o.attached && c->root_gone && p->info.pid == (uint32_t)c->root_pid) {
            /* Ended during the attach window: the status its exit hooks
             * wrote, else unknown; without an exit of it seen (SIGKILL, a
             * raw exit_group) the trace says so (say_gone_unseen). */
            ml__proc_end_unwaited(p);
            p->gone_unseen = !p->exit_seen;
        } else if (!p->ended) {
            /* An attached trace has its own mark (ML_OPT_ATTACHED) and its
             * own rules for what is live at the detach (docs/recorder.md,
             * attach): its end stays unknown. */
            p->ended = true;
            p->end_kind = c->o.attached ? ML_END_UNKNOWN : ML_END_RUNNING;
        }
        finish_proc(c, p);
    }
    c->nactive = 0; /* every process is finished */
}

/* ------------------------------------------------------------------------- */
/* Queries                                                                   */
/* ------------------------------------------------------------------------- */

bool ml_collector_root_traced(const ml_collector_t *c) {
    return c->root_fd < 0;
}

bool ml_collector_root_refused(const ml_collector_t *c) {
    uint32_t n = ml_atomic_load_acquire(&c->ctl->nprocs);
    if (n > ML_MAX_PROCS) n = ML_MAX_PROCS;
    for (uint32_t i = 0; i < n; i++)
        if ((pid_t)c->ctl->procs[i].pid == c->root_pid &&
            ml_atomic_load_acquire(&c->ctl->procs[i].state) == ML_PROC_FAILED)
            return true;
    return false;
}

uint32_t ml_collector_nprocs(const ml_collector_t *c) {
    return c->nseen;
}

uint64_t ml_collector_backlog_peak(const ml_collector_t *c) {
    return c->backlog_peak;
}

uint32_t ml_collector_running(const ml_collector_t *c, pid_t *pids, uint32_t max) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->nactive; i++) {
        const ml__proc_t *p = c->active[i];
        if (p->ended) continue;
        if (n < max) pids[n] = (pid_t)p->info.pid;
        n++;
    }
    return n;
}

uint32_t ml_collector_procs_refused(const ml_collector_t *c) {
    return ml_atomic_load_relaxed(&c->ctl->procs_refused);
}

uint32_t ml_collector_procs_failed(const ml_collector_t *c) {
    uint32_t n = ml_atomic_load_acquire(&c->ctl->nprocs), failed = 0;
    if (n > ML_MAX_PROCS) n = ML_MAX_PROCS;
    for (uint32_t i = 0; i < n; i++) failed += ml_atomic_load_acquire(&c->ctl->procs[i].state) == ML_PROC_FAILED;
    return failed;
}

const ml_proc_info_t *ml_collector_proc(const ml_collector_t *c, uint32_t slot) {
    /* The caller may read the analysis session: stage 2 must be done with
     * what was handed to it (a const query that waits, on the caller's
     * thread, which is stage 1's). */
    ml__stage2_wait((ml_collector_t *)c);
    return slot < c->nseen && c->procs[slot] ? &c->procs[slot]->info : NULL;
}
