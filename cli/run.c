/* run.c - `memlens run`: start the target with the preload library, collect
 * every traced process's ring into its trace file, print a summary.
 *
 * The collector is one thread. Each loop it ticks the shared clock, picks up
 * newly registered processes, drains every ring into its writer (and into an
 * analysis session for the summary), samples RSS, and checks which processes
 * have ended. A process that ended is drained to its last published event;
 * slots it claimed but never published (it died mid-event) are counted in
 * the trace's end record, never silently skipped.
 */
#define _GNU_SOURCE
#include "ml_cli.h"
#include "ml_analysis.h"
#include "ml_config.h"
#include "ml_event.h"
#include "ml_exit_scan.h"
#include "ml_ring.h"
#include "ml_trace_io.h"
#include "ml_viewer.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RSS_INTERVAL_MS 10
/* mallinfo2() consolidates glibc's fast bins and takes every arena lock:
 * cheap twice a second, measurable (2-3 %) at ten times a second. */
#define MALLINFO_INTERVAL_MS 500
#define DRAIN_BUDGET 65536
#define PREFETCH_AHEAD 8

typedef struct {
    const char *out;
    bool follow_fork, quiet, unwind_fp, no_gpu, no_snapshot;
    bool unwind_verify; /* --unwind verify (hidden): docs/recorder.md#stacks */
    bool gpu_pools; /* --gpu-pools: CUPTI activity records of memory pools (ML_GPU_POOLS=1) */
    bool live; /* --live: the terminal viewer follows the root process */
    uint64_t sample_bytes;
    uint32_t depth, ring_slots;
    int argc;
    char **argv;
} run_opts_t;

typedef struct {
    uint32_t slot, pid, ppid, parent_slot;
    ml_ring_hdr_t *ring;
    size_t ring_bytes;
    uint64_t pos, events, lost_in_crash;
    int fd, pidfd;
    ml_writer_t *w;
    ml_analysis_t *an;
    ml_vmodel_t *live; /* --live, root process: `an` is this viewer model's, fed under its lock */
    char path[PATH_MAX];
    bool is_root, ended, done;
    uint32_t end_kind;
    int32_t end_status;
    uint32_t last_time, last_thread;
} proc_t;

typedef struct {
    run_opts_t o;
    ml_ctl_t *ctl;
    char ctl_path[128];
    pid_t root_pid;
    int root_fd;
    char root_path[PATH_MAX];
    bool root_exited;
    int root_status;
    ml_vmodel_t *live_model; /* --live */
    ml_viewer_live_t *live_ui;
    proc_t *procs[ML_MAX_PROCS];
    uint32_t nseen;
    uint32_t free_since_ms; /* when slot nseen was first seen counted but still FREE (+1) */
    uint64_t t0_ns;
    char stem[PATH_MAX];
    char prog[PATH_MAX]; /* the program's absolute path */
} session_t;

static volatile sig_atomic_t forward_sig;
static volatile pid_t child_pid;

/* ------------------------------------------------------------------------- */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------- */

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage_run(FILE *f) {
    fprintf(f,
            "usage: memlens run [-o FILE] [--follow-fork] [--sample BYTES] [--unwind libunwind|fp]\n"
            "                   [--depth N] [--no-gpu] [--gpu-pools] [--no-snapshot] [--live] [-q]\n"
            "                   -- PROG [ARGS...]\n"
            "\n"
            "  -o, --output FILE   trace file (default: memlens.PROG.PID.mlt in the current directory)\n"
            "  --follow-fork       trace forked and exec'd children too, each into FILE-stem.PID.mlt\n"
            "  --sample BYTES      record one allocation per BYTES allocated on average (Poisson)\n"
            "  --unwind KIND       libunwind (default, exact) or fp (frame pointers, faster)\n"
            "  --depth N           deepest stack recorded (default %d, at most %d)\n"
            "  --no-gpu            do not load the CUPTI collector\n"
            "  --gpu-pools         also record CUDA memory pools (reserved vs used bytes, trims)\n"
            "                      from CUPTI activity records (docs/gpu.md); off by default\n"
            "  --no-snapshot       do not analyse while recording (less CPU beside PROG); reports\n"
            "                      then replay the whole trace instead of starting from the\n"
            "                      analysis saved at its end\n"
            "  --live              show the terminal viewer while PROG runs (it stays open on the\n"
            "                      final data until q); redirect PROG's output, which would\n"
            "                      otherwise share the terminal with the view\n"
            "  -q, --quiet         no summary on stderr\n",
            ML_DEFAULT_DEPTH, ML_MAX_DEPTH);
}

static int parse_run(int argc, char **argv, run_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->depth = ML_DEFAULT_DEPTH;
    o->ring_slots = ML_DEFAULT_RING_SLOTS;
    const char *rs = getenv("ML_RING_SLOTS");
    if (rs) {
        uint64_t v;
        if (ml_parse_bytes(rs, &v) < 0 || v < 64 || v > (1u << 28) || (v & (v - 1))) {
            ml_die_msg("ML_RING_SLOTS must be a power of two between 64 and 2^28");
            return -1;
        }
        o->ring_slots = (uint32_t)v;
    }
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-') break;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc) goto missing;
            o->out = argv[i];
        } else if (!strcmp(a, "--follow-fork")) {
            o->follow_fork = true;
        } else if (!strcmp(a, "--sample")) {
            if (++i >= argc) goto missing;
            if (ml_parse_bytes(argv[i], &o->sample_bytes) < 0 || o->sample_bytes == 0) {
                ml_die_msg("--sample takes a positive byte count, like 512k");
                return -1;
            }
        } else if (!strcmp(a, "--unwind")) {
            if (++i >= argc) goto missing;
            if (!strcmp(argv[i], "fp")) o->unwind_fp = true;
            else if (!strcmp(argv[i], "verify")) o->unwind_verify = true;
            else if (strcmp(argv[i], "libunwind")) {
                ml_die_msg("--unwind takes libunwind or fp");
                return -1;
            }
        } else if (!strcmp(a, "--depth")) {
            if (++i >= argc) goto missing;
            uint64_t v;
            if (ml_parse_bytes(argv[i], &v) < 0 || v < 1 || v > ML_MAX_DEPTH) {
                ml_die_msg("--depth takes a number from 1 to %d", ML_MAX_DEPTH);
                return -1;
            }
            o->depth = (uint32_t)v;
        } else if (!strcmp(a, "--no-gpu")) {
            o->no_gpu = true;
        } else if (!strcmp(a, "--gpu-pools")) {
            o->gpu_pools = true;
        } else if (!strcmp(a, "--no-snapshot")) {
            o->no_snapshot = true;
        } else if (!strcmp(a, "--live")) {
            o->live = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o->quiet = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_run(stdout);
            exit(ML_EXIT_OK);
        } else {
            ml_die_msg("run: unknown option '%s'", a);
            usage_run(stderr);
            return -1;
        }
    }
    if (o->gpu_pools && o->no_gpu)
        fprintf(stderr, "memlens: warning: --gpu-pools does nothing with --no-gpu\n");
    if (i >= argc) {
        ml_die_msg("run: no program given");
        usage_run(stderr);
        return -1;
    }
    o->argc = argc - i;
    o->argv = argv + i;
    return 0;
missing:
    ml_die_msg("run: %s needs a value", argv[i - 1]);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Can this program be preloaded?                                            */
/* ------------------------------------------------------------------------- */

static int resolve_program(const char *name, char *out, size_t len) {
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0 ? 0 : -errno;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    int err = -ENOENT;
    while (*path) {
        const char *c = strchr(path, ':');
        size_t n = c ? (size_t)(c - path) : strlen(path);
        snprintf(out, len, "%.*s%s%s", (int)n, path, n ? "/" : "", name);
        if (access(out, X_OK) == 0) {
            struct stat st;
            if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) return 0;
        } else if (errno == EACCES) {
            err = -EACCES;
        }
        if (!c) break;
        path = c + 1;
    }
    return err;
}

/* Returns NULL when the program can be preloaded, else why not. */
static const char *preload_obstacle(const char *path, int depth) {
    static char why[PATH_MAX + 128];
    struct stat st;
    if (stat(path, &st) < 0) return NULL; /* exec will report it */
    if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
        ((st.st_mode & S_ISGID) && st.st_gid != getegid())) {
        snprintf(why, sizeof why,
                 "%s is set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD for it "
                 "(secure-execution mode), so memlens cannot see its allocations",
                 path);
        return why;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    unsigned char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n >= 2 && buf[0] == '#' && buf[1] == '!' && depth == 0) {
        char interp[PATH_MAX];
        ssize_t i = 2, j = 0;
        while (i < n && (buf[i] == ' ' || buf[i] == '\t')) i++;
        while (i < n && buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && j < PATH_MAX - 1)
            interp[j++] = (char)buf[i++];
        interp[j] = '\0';
        return j ? preload_obstacle(interp, 1) : NULL;
    }
    if (n < (ssize_t)sizeof(Elf64_Ehdr) || memcmp(buf, ELFMAG, SELFMAG) != 0) return NULL;
    if (buf[EI_CLASS] != ELFCLASS64) {
        snprintf(why, sizeof why, "%s is a 32-bit program; memlens records 64-bit programs only",
                 path);
        return why;
    }
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
    if (eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > (uint64_t)n) return NULL;
    bool interp = false;
    for (int i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(buf + eh->e_phoff + i * sizeof(Elf64_Phdr));
        if (ph->p_type == PT_INTERP) interp = true;
    }
    if (!interp) {
        snprintf(why, sizeof why,
                 "%s is statically linked: there is no dynamic loader to preload libmemlens.so "
                 "into, so its allocations cannot be recorded. Link it dynamically to profile it",
                 path);
        return why;
    }
    return NULL;
}

static int find_preload_lib(char *out, size_t len) {
    const char *env = getenv("ML_PRELOAD_LIB");
    if (env) {
        snprintf(out, len, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return -1;
    *slash = '\0';
    if (snprintf(out, len, "%s/libmemlens.so", self) < (int)len && access(out, R_OK) == 0)
        return 0;
    if (snprintf(out, len, "%s/../lib/memlens/libmemlens.so", self) < (int)len &&
        access(out, R_OK) == 0)
        return 0;
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Session set-up                                                            */
/* ------------------------------------------------------------------------- */

static int create_ctl(session_t *s) {
    uint64_t r = mono_ns() ^ ((uint64_t)getpid() << 20);
    snprintf(s->ctl_path, sizeof s->ctl_path, "/dev/shm/memlens-%d-%08" PRIx64, (int)getpid(),
             r & 0xffffffffu);
    int fd = open(s->ctl_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        ml_die_msg("cannot create %s: %s (memlens needs a writable /dev/shm)", s->ctl_path,
                   strerror(errno));
        return -1;
    }
    if (ftruncate(fd, sizeof(ml_ctl_t)) < 0) {
        ml_die_msg("cannot size %s: %s", s->ctl_path, strerror(errno));
        close(fd);
        unlink(s->ctl_path);
        return -1;
    }
    ml_ctl_t *c = mmap(NULL, sizeof(ml_ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c == MAP_FAILED) {
        ml_die_msg("cannot map %s: %s", s->ctl_path, strerror(errno));
        unlink(s->ctl_path);
        return -1;
    }
    c->version = ML_SHM_VERSION;
    c->options = (s->o.follow_fork ? ML_OPT_FOLLOW_FORK : 0) | (s->o.unwind_fp ? ML_OPT_UNWIND_FP : 0) |
                 (s->o.unwind_verify ? ML_OPT_UNWIND_VERIFY : 0);
    c->sample_bytes = s->o.sample_bytes;
    c->collector_pid = (uint32_t)getpid();
    c->depth = s->o.depth;
    c->ring_slots = s->o.ring_slots;
    atomic_thread_fence(memory_order_release);
    c->magic = ML_CTL_MAGIC;
    s->ctl = c;
    return 0;
}

static void ring_file_path(const session_t *s, uint32_t slot, char *out, size_t len) {
    snprintf(out, len, "%s.%u", s->ctl_path, slot);
}

static void cleanup_shm(session_t *s) {
    if (!s->ctl) return;
    uint32_t n = ml_atomic_load_acquire(&s->ctl->nprocs);
    if (n > ML_MAX_PROCS) n = ML_MAX_PROCS;
    char p[256];
    for (uint32_t i = 0; i < n; i++) {
        ring_file_path(s, i, p, sizeof p);
        unlink(p);
    }
    unlink(s->ctl_path);
}

/* ------------------------------------------------------------------------- */
/* Processes                                                                 */
/* ------------------------------------------------------------------------- */

static uint32_t now_ms(const session_t *s) {
    return (uint32_t)((mono_ns() - s->t0_ns) / 1000000u);
}

static void proc_add(proc_t *p, const ml_record_t *rec) {
    if (ml_writer_add(p->w, rec) < 0 && !p->done) {
        /* Reported once at the end from the writer's error state. */
    }
    ml_record_t canon;
    if (rec->tag == ML_T_ALLOC && rec->u.alloc.usable < rec->u.alloc.size) {
        /* The analysis sees what a reader of the trace will see (the writer
         * stores usable >= size), so the snapshot saved at the end equals a
         * replay of the file. */
        canon = *rec;
        canon.u.alloc.usable = canon.u.alloc.size;
        rec = &canon;
    }
    if (p->live) {
        /* The viewer's thread reads the session between records. */
        ml_vmodel_lock(p->live);
        ml_vmodel_feed(p->live, rec);
        ml_vmodel_unlock(p->live);
        return;
    }
    ml_analysis_feed(p->an, rec);
}

/* The analysis session of a new process: its own, or for the root process
 * under --live the viewer model's. */
static int proc_analysis(session_t *s, proc_t *p) {
    if (p->is_root && s->live_model) {
        p->live = s->live_model;
        p->an = ml_vmodel_analysis(s->live_model);
        return 0;
    }
    /* The collector runs the whole streaming analysis beside the program
     * and saves it at the end of the trace (finish_proc), so `memlens
     * report` starts from it instead of replaying every record. With
     * --no-snapshot it keeps only what the summary and the exit scan need
     * (a light session, which cannot be saved). */
    return s->o.no_snapshot ? ml_analysis_new_light(&p->an) : ml_analysis_new(&p->an);
}

static void child_trace_path(session_t *s, uint32_t pid, char *out, size_t len) {
    /* The stem is at most PATH_MAX - 5 bytes: a truncated name still names a
     * new file of ours, never the parent's trace. */
    if (snprintf(out, len, "%s.%u.mlt", s->stem, pid) >= (int)len) out[len - 1] = '\0';
    for (int n = 2; access(out, F_OK) == 0 && n < 1000; n++)
        if (snprintf(out, len, "%s.%u.%d.mlt", s->stem, pid, n) >= (int)len) out[len - 1] = '\0';
}

static proc_t *open_proc(session_t *s, uint32_t slot) {
    ml_ctl_proc_t *cp = &s->ctl->procs[slot];
    char path[256];
    ring_file_path(s, slot, path, sizeof path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < ml_ring_bytes(s->o.ring_slots)) {
        close(fd);
        return NULL;
    }
    ml_ring_hdr_t *h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    unlink(path);
    if (h == MAP_FAILED) return NULL;
    if (h->magic != ML_RING_MAGIC || h->capacity != s->o.ring_slots) {
        munmap(h, (size_t)st.st_size);
        return NULL;
    }
    proc_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->slot = slot;
    p->pid = cp->pid;
    p->ppid = cp->ppid;
    p->parent_slot = cp->parent_slot;
    p->ring = h;
    p->ring_bytes = (size_t)st.st_size;
    p->pidfd = -1;
    p->is_root = (pid_t)p->pid == s->root_pid && p->parent_slot == ~0u && s->root_fd >= 0;
    if (p->is_root) {
        p->fd = s->root_fd;
        s->root_fd = -1;
        snprintf(p->path, sizeof p->path, "%s", s->root_path);
    } else {
        child_trace_path(s, p->pid, p->path, sizeof p->path);
        p->fd = open(p->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (p->fd < 0) {
            fprintf(stderr, "memlens: warning: cannot write %s: %s; process %u is not recorded\n",
                    p->path, strerror(errno), p->pid);
        }
        p->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)p->pid, 0);
        if (p->pidfd < 0) p->ended = true, p->end_kind = ML_END_UNKNOWN;
    }
    if (p->fd < 0 || ml_writer_new(p->fd, 3, &p->w) < 0 || proc_analysis(s, p) < 0) {
        if (p->fd >= 0) close(p->fd);
        munmap(h, p->ring_bytes);
        free(p);
        return NULL;
    }

    /* The first record says which process this is. */
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_PROCESS;
    r.time_ms = now_ms(s);
    typeof(r.u.process) *pr = &r.u.process;
    pr->pid = p->pid;
    pr->ppid = p->ppid;
    pr->start_realtime_ns = h->start_realtime_ns;
    pr->page_size = (uint32_t)sysconf(_SC_PAGESIZE);
    pr->unwinder = s->o.unwind_fp ? ML_UNWIND_FP : ML_UNWIND_LIBUNWIND;
    pr->depth = s->o.depth;
    pr->sample_bytes = s->o.sample_bytes;
    pr->options = s->ctl->options;
    pr->parent_trace = (p->parent_slot < ML_MAX_PROCS && s->procs[p->parent_slot])
                           ? s->procs[p->parent_slot]->path
                           : "";
    char cmdline[sizeof h->cmdline + 1];
    pr->exe = h->exe;
    if (p->is_root && s->prog[0]) pr->exe = s->prog;
    if (p->is_root) {
        pr->argc = (uint32_t)(s->o.argc > ML_MAX_ARGS ? ML_MAX_ARGS : s->o.argc);
        for (uint32_t i = 0; i < pr->argc; i++) pr->argv[i] = s->o.argv[i];
    } else {
        uint32_t n = h->cmdline_len < sizeof h->cmdline ? h->cmdline_len : sizeof h->cmdline;
        memcpy(cmdline, h->cmdline, n);
        cmdline[n] = '\0';
        for (uint32_t i = 0; i < n && pr->argc < ML_MAX_ARGS;) {
            pr->argv[pr->argc++] = cmdline + i;
            i += (uint32_t)strlen(cmdline + i) + 1;
        }
    }
    pr->producer = "memlens " ML_VERSION;
    proc_add(p, &r);
    p->last_time = r.time_ms;

    /* An image that replaced another by exec ends that one. */
    if (p->parent_slot < ML_MAX_PROCS && s->procs[p->parent_slot]) {
        proc_t *q = s->procs[p->parent_slot];
        if (q->pid == p->pid && !q->ended) {
            q->ended = true;
            q->end_kind = ML_END_EXEC;
        }
    }
    return p;
}

static void discover(session_t *s) {
    uint32_t n = ml_atomic_load_acquire(&s->ctl->nprocs);
    if (n > ML_MAX_PROCS) n = ML_MAX_PROCS;
    while (s->nseen < n) {
        uint32_t st = ml_atomic_load_acquire(&s->ctl->procs[s->nseen].state);
        if (st == ML_PROC_FREE) {
            /* A process counts itself in nprocs a moment before it marks its
             * slot claimed: wait for it, or its whole recording would be
             * skipped (and the program would wait at exit for a scan that
             * never comes). Only an owner killed between the two stores
             * leaves a slot free for good: after 2 s, give up on it. */
            uint32_t now = now_ms(s);
            if (!s->free_since_ms) s->free_since_ms = now + 1;
            if (now + 1 - s->free_since_ms < 2000) break;
            fprintf(stderr, "memlens: warning: process slot %u was never claimed; skipped\n",
                    s->nseen);
            s->free_since_ms = 0;
            s->nseen++;
            continue;
        }
        s->free_since_ms = 0;
        if (st == ML_PROC_CLAIMED) {
            /* Still creating its ring. If it died meanwhile, give up on it. */
            pid_t pid = (pid_t)s->ctl->procs[s->nseen].pid;
            if (pid && kill(pid, 0) < 0 && errno == ESRCH) {
                s->nseen++;
                continue;
            }
            if (pid == s->root_pid && s->root_exited) {
                s->nseen++;
                continue;
            }
            break;
        }
        if (st == ML_PROC_READY) {
            s->procs[s->nseen] = open_proc(s, s->nseen);
            if (!s->procs[s->nseen])
                fprintf(stderr, "memlens: warning: cannot open the event ring of process %u\n",
                        s->ctl->procs[s->nseen].pid);
        }
        s->nseen++;
    }
}

/* The process has run its exit handlers and waits in libmemlens' destructor
 * until we answer: its memory is intact, so this is where reachability of
 * the blocks still live can be examined. Then it is released. */
static void scan_emit(void *ctx, const ml_record_t *rec) {
    proc_add((proc_t *)ctx, rec);
}

static void exit_scan(session_t *s, proc_t *p) {
    (void)s;
    if (p->w) ml_exit_scan((pid_t)p->pid, p->an, scan_emit, p, p->last_time, p->last_thread);
    ml_atomic_store_release(&p->ring->exit_scan, ML_EXIT_SCAN_DONE);
}

/* An ML_BLOB_GPU payload (docs/gpu.md) as an ML_T_GPU_ALLOC/FREE/POOL record.
 * A shorter payload (an older libmemlens, or any op but POOL_STATE, which
 * stops at `handle`) reads as zeros past its end. */
static bool deliver_gpu(ml_record_t *r, const ml_event_t *ev, const uint8_t *blob) {
    ml_gpu_event_t g;
    memset(&g, 0, sizeof g);
    if (ev->size < offsetof(ml_gpu_event_t, handle)) return false;
    memcpy(&g, blob, ev->size < sizeof g ? ev->size : sizeof g);
    if (g.op != ML_GPU_OP_ALLOC && g.op != ML_GPU_OP_FREE && g.op != ML_GPU_OP_FREE_FAILED &&
        g.op != ML_GPU_OP_CTX_DESTROY && g.op != ML_GPU_OP_POOL_TRIM &&
        g.op != ML_GPU_OP_POOL_STATE)
        return false;
    r->tag = g.op == ML_GPU_OP_ALLOC        ? ML_T_GPU_ALLOC
             : g.op == ML_GPU_OP_POOL_STATE ? ML_T_GPU_POOL
                                            : ML_T_GPU_FREE;
    r->u.gpu.op = g.op;
    r->u.gpu.kind = g.kind;
    r->u.gpu.flags = g.flags;
    r->u.gpu.device = g.device;
    r->u.gpu.context = g.context;
    r->u.gpu.stack = g.op == ML_GPU_OP_ALLOC ? g.stack : 0;
    r->u.gpu.cbid = g.cbid;
    r->u.gpu.correlation = g.correlation;
    r->u.gpu.stream = g.stream;
    r->u.gpu.ptr = g.ptr;
    r->u.gpu.size = g.size;
    r->u.gpu.handle = g.handle;
    r->u.gpu.pool_used = g.pool_used;
    r->u.gpu.pool_threshold = g.pool_threshold;
    return true;
}

/* Translates one ring event (and its blob payload) into a trace record. */
static void deliver(session_t *s, proc_t *p, const ml_event_t *ev, const uint8_t *blob) {
    ml_record_t r;
    /* Only the part an allocation record uses: the whole union is ~1 KiB and
     * this runs for every event. Other cases clear r.u themselves. */
    memset(&r, 0, offsetof(ml_record_t, u) + sizeof r.u.alloc);
    r.time_ms = ev->time;
    r.thread = ev->thread;
    r.u.alloc.kind = ev->kind;
    r.u.alloc.flags = (uint8_t)ml_ev_flags(ev);
    r.u.alloc.ptr = ev->ptr;
    r.u.alloc.size = ev->size;
    r.u.alloc.stack = ev->stack;
    switch (ml_ev_type(ev)) {
    case ML_EV_ALLOC:
        r.tag = ML_T_ALLOC;
        r.u.alloc.size = ev->size & 0xffffffffffffull;
        r.u.alloc.usable = r.u.alloc.size + (ev->size >> 48);
        break;
    case ML_EV_FREE:
        r.tag = ML_T_FREE;
        r.u.alloc.size = 0;
        r.u.alloc.usable = ev->size;
        break;
    case ML_EV_REALLOC_FAIL: r.tag = ML_T_REALLOC_FAIL; break;
    case ML_EV_MMAP: r.tag = ML_T_MMAP; break;
    case ML_EV_MUNMAP: r.tag = ML_T_MUNMAP; break;
    case ML_EV_MMAP_FAIL: r.tag = ML_T_MMAP_FAIL; break;
    case ML_EV_NODE:
        memset(&r.u, 0, sizeof r.u);
        r.tag = ML_T_NODE;
        r.u.node.id = ev->stack;
        r.u.node.pc = ev->ptr;
        r.u.node.parent = (uint32_t)ev->size;
        break;
    case ML_EV_BLOB:
        memset(&r.u, 0, sizeof r.u);
        switch (ev->kind) {
        case ML_BLOB_MODULE: {
            const ml_blob_module_t *m = (const ml_blob_module_t *)blob;
            static char path[4097];
            if (ev->size < sizeof *m || sizeof *m + m->path_len + m->build_id_len > ev->size ||
                m->path_len > 4096)
                return;
            memcpy(path, blob + sizeof *m, m->path_len);
            path[m->path_len] = '\0';
            r.tag = ML_T_MODULE;
            r.u.module.base = m->base;
            r.u.module.path = path;
            r.u.module.build_id = blob + sizeof *m + m->path_len;
            r.u.module.build_id_len = m->build_id_len;
            r.u.module.nsegs = m->nsegs > ML_MAX_SEGMENTS ? ML_MAX_SEGMENTS : m->nsegs;
            for (uint32_t i = 0; i < r.u.module.nsegs; i++) {
                r.u.module.segs[i].vaddr = m->segs[i].vaddr;
                r.u.module.segs[i].memsz = m->segs[i].memsz;
                r.u.module.segs[i].flags = m->segs[i].flags;
            }
            break;
        }
        case ML_BLOB_MODULE_UNLOAD:
            if (ev->size < 8) return;
            r.tag = ML_T_MODULE_UNLOAD;
            memcpy(&r.u.module.base, blob, 8);
            break;
        case ML_BLOB_THREAD: {
            ml_blob_thread_t t;
            static char name[17];
            if (ev->size < sizeof t) return;
            memcpy(&t, blob, sizeof t);
            memcpy(name, t.name, 16);
            name[16] = '\0';
            r.tag = ML_T_THREAD;
            r.u.thread.index = t.index;
            r.u.thread.tid = t.tid;
            r.u.thread.name = name;
            break;
        }
        case ML_BLOB_MALLINFO: {
            ml_blob_mallinfo_t m;
            if (ev->size < sizeof m) return;
            memcpy(&m, blob, sizeof m);
            r.tag = ML_T_MALLINFO;
            r.u.mallinfo.arena = m.arena;
            r.u.mallinfo.hblkhd = m.hblkhd;
            r.u.mallinfo.uordblks = m.uordblks;
            r.u.mallinfo.fordblks = m.fordblks;
            r.u.mallinfo.keepcost = m.keepcost;
            break;
        }
        case ML_BLOB_EXIT: {
            ml_blob_exit_t e;
            if (ev->size < sizeof e) return;
            memcpy(&e, blob, sizeof e);
            r.tag = ML_T_PROC_EXIT;
            r.u.proc_exit.nested_skipped = e.nested_skipped;
            break;
        }
        case ML_BLOB_GPU:
            if (!deliver_gpu(&r, ev, blob)) return;
            break;
        default:
            return;
        }
        break;
    default:
        return;
    }
    proc_add(p, &r);
    p->last_time = r.time_ms;
    p->last_thread = r.thread;
    if (r.tag == ML_T_PROC_EXIT) exit_scan(s, p);
}

/* Drains published events. With `final` the process is gone: positions that
 * were claimed but never published are counted as lost and skipped. Returns
 * the number of events read. */
static uint64_t drain(session_t *s, proc_t *p, bool final) {
    static uint8_t blob[sizeof(ml_blob_module_t) + 8192];
    ml_ring_hdr_t *h = p->ring;
    uint64_t got = 0;
    uint64_t head = final ? ml_atomic_load_acquire(&h->head) : 0;
    for (;;) {
        if (!final && got >= DRAIN_BUDGET) break;
        if (final && p->pos >= head) break;
        ml_slot_t *sl = ml_ring_peek(h, p->pos);
        if (!sl) {
            if (!final) break;
            p->lost_in_crash++;
            p->pos++;
            continue;
        }
        ml_slot_t *ahead = ml_ring_peek(h, p->pos + PREFETCH_AHEAD);
        if (ahead && ml_ev_type(&ahead->ev) <= ML_EV_FREE)
            ml_analysis_prefetch(p->an, ahead->ev.ptr);
        ml_event_t ev;
        memcpy(&ev, &sl->ev, sizeof ev);
        if (ml_ev_type(&ev) == ML_EV_BLOB) {
            uint32_t need = 1 + ml_blob_slots(ev.size);
            if (ev.size > sizeof blob) {
                /* Cannot happen with our producer; skip the claimed run. */
                for (uint32_t i = 0; i < need; i++) ml_ring_release(h, p->pos + i);
                p->pos += need;
                continue;
            }
            uint32_t n = ml_ring_read_blob(h, p->pos, (uint32_t)ev.size, blob, sizeof blob);
            if (!n) {
                if (!final) break;
                /* The producer died inside the blob. */
                p->lost_in_crash += need;
                p->pos += need;
                continue;
            }
            deliver(s, p, &ev, blob);
            for (uint32_t i = 0; i < n; i++) ml_ring_release(h, p->pos + i);
            p->pos += n;
        } else {
            deliver(s, p, &ev, NULL);
            ml_ring_release(h, p->pos);
            p->pos++;
        }
        p->events++;
        got++;
    }
    ml_atomic_store_release(&h->tail, p->pos);
    return got;
}

static void sample_rss(session_t *s, proc_t *p) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%u/status", p->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = '\0';
    /* RssAnon + RssFile: resident memory without RssShmem, where our own
     * event ring would otherwise show up as the program's. */
    uint64_t anon = 0, file = 0;
    char *a = strstr(buf, "RssAnon:"), *f = strstr(buf, "RssFile:");
    if (!a || !f) return;
    anon = strtoull(a + 8, NULL, 10);
    file = strtoull(f + 8, NULL, 10);
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_RSS;
    r.time_ms = now_ms(s);
    if (r.time_ms < p->last_time) r.time_ms = p->last_time;
    r.thread = p->last_thread;
    r.u.rss.rss_bytes = (anon + file) * 1024;
    proc_add(p, &r);
}

/* Appends the analysis session (GPU state included) to the trace, after the
 * end record. Without it (out of memory, or state the snapshot cannot hold
 * exactly: -ENOTSUP) reports replay the records: slower, the same numbers. */
static void save_snapshot(const session_t *s, proc_t *p) {
    void *data;
    size_t len;
    if (s->o.no_snapshot) return;
    if (p->live) ml_vmodel_lock(p->live);
    int rc = ml_analysis_snapshot(p->an, &data, &len);
    if (p->live) ml_vmodel_unlock(p->live);
    if (rc < 0) return;
    rc = ml_writer_add_snapshot(p->w, data, len, ML_ANALYSIS_SNAPSHOT_VERSION);
    free(data);
    (void)rc; /* a write error is in the writer's state: reported by finish_proc */
}

/* --unwind verify: the recorder's stacks against libunwind's, into the trace
 * and on stderr (docs/recorder.md#stacks). */
static void unwind_check(const session_t *s, proc_t *p) {
    if (!s->o.unwind_verify) return;
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
    proc_add(p, &r);
    if (s->o.quiet) return;
    fprintf(stderr,
            "memlens: unwind verify: pid %u: %" PRIu64 " stacks compared (%" PRIu64
            " taken by libunwind, %" PRIu64 " reusing the previous stack), %" PRIu64 " differ\n",
            p->pid, q->stacks, q->fallbacks, q->reused, q->mismatches);
    if (q->mismatches)
        fprintf(stderr,
                "memlens: unwind verify: first difference at frame %" PRIu64 ": 0x%" PRIx64
                " (%u frames%s) against libunwind's 0x%" PRIx64 " (%u frames)\n",
                q->first_frame, q->fast_pc, h->unwind_bad.fast_frames,
                h->unwind_bad.fell_back ? ", libunwind's own" : "", q->full_pc,
                h->unwind_bad.full_frames);
}

static void finish_proc(session_t *s, proc_t *p) {
    drain(s, p, true);
    unwind_check(s, p);
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
    e->duration_ms = now_ms(s);
    proc_add(p, &r);
    save_snapshot(s, p);
    int rc = ml_writer_free(p->w);
    p->w = NULL;
    if (rc < 0)
        fprintf(stderr, "memlens: error: writing %s failed: %s; the trace is incomplete\n", p->path,
                strerror(-rc));
    if (fsync(p->fd) < 0 && errno != EINVAL && errno != EROFS) { /* best effort */
    }
    close(p->fd);
    munmap(p->ring, p->ring_bytes);
    p->ring = NULL;
    if (p->pidfd >= 0) close(p->pidfd);
    p->done = true;
}

static bool proc_gone(proc_t *p) {
    if (p->ended) return true;
    if (p->is_root) return false; /* decided by waitpid */
    struct pollfd pf = {p->pidfd, POLLIN, 0};
    if (poll(&pf, 1, 0) > 0) {
        p->ended = true;
        p->end_kind = ML_END_UNKNOWN;
    }
    return p->ended;
}

/* ------------------------------------------------------------------------- */
/* Summary                                                                   */
/* ------------------------------------------------------------------------- */

static void print_summary(session_t *s) {
    proc_t *root = NULL;
    uint32_t nchild = 0;
    for (uint32_t i = 0; i < s->nseen; i++) {
        if (!s->procs[i]) continue;
        if (s->procs[i]->is_root) root = s->procs[i];
        else nchild++;
    }
    if (!root) return;
    const ml_totals_t *t = ml_analysis_totals(root->an);
    char b1[32], b2[32], b3[32];
    struct stat st;
    uint64_t size = stat(root->path, &st) == 0 ? (uint64_t)st.st_size : 0;
    fprintf(stderr,
            "memlens: %" PRIu64 " allocation calls (%" PRIu64 " temporary), %" PRIu64
            " frees, %" PRIu64 " reallocs, %" PRIu64 " mmaps\n",
            t->alloc_calls, t->temporary_allocs, t->free_calls, t->realloc_calls, t->mmap_calls);
    fprintf(stderr, "memlens: peak heap %s at %.3f s; leaked %s in %" PRIu64 " blocks%s\n",
            ml_fmt_bytes(t->peak_bytes, b1, sizeof b1), t->peak_time_ms / 1000.0,
            ml_fmt_bytes(t->heap_bytes, b2, sizeof b2), t->heap_blocks,
            s->o.sample_bytes ? " (sampled: estimates)" : "");
    fprintf(stderr, "memlens: trace %s (%s", root->path, ml_fmt_bytes(size, b3, sizeof b3));
    if (t->alloc_calls) fprintf(stderr, ", %.1f bytes/call", (double)size / (double)t->alloc_calls);
    fprintf(stderr, ")\n");
    if (nchild) {
        fprintf(stderr, "memlens: %u more trace%s:", nchild, nchild > 1 ? "s" : "");
        for (uint32_t i = 0; i < s->nseen; i++)
            if (s->procs[i] && !s->procs[i]->is_root) fprintf(stderr, " %s", s->procs[i]->path);
        fprintf(stderr, "\n");
    }
    for (uint32_t i = 0; i < s->nseen; i++) {
        proc_t *p = s->procs[i];
        if (!p) continue;
        const ml_totals_t *pt = ml_analysis_totals(p->an);
        if (pt->end.lost_in_crash || pt->end.lost_dead_collector)
            fprintf(stderr,
                    "memlens: %s: %" PRIu64 " events were being written when the process died "
                    "and are missing\n",
                    p->path, pt->end.lost_in_crash + pt->end.lost_dead_collector);
        if (pt->end.ring_waits)
            fprintf(stderr,
                    "memlens: %s: the event ring was full %" PRIu64
                    " times; the program waited %.3f s in total (nothing was dropped)\n",
                    p->path, pt->end.ring_waits, pt->end.ring_wait_ns / 1e9);
    }
}

/* ------------------------------------------------------------------------- */
/* The command                                                               */
/* ------------------------------------------------------------------------- */

static void on_forward(int sig) {
    forward_sig = sig;
    if (child_pid > 0) kill(child_pid, sig);
}

static char *env_entry(const char *name, const char *value) {
    size_t n = strlen(name) + strlen(value) + 2;
    char *e = malloc(n);
    if (e) snprintf(e, n, "%s=%s", name, value);
    return e;
}

/* The CUPTI collector (docs/gpu.md): CUDA_INJECTION64_PATH names
 * libmemlens_cupti.so beside libmemlens.so, so that the CUDA driver loads it
 * at cuInit in processes that use CUDA, and only in those. Returns the entry
 * to add, or NULL: --no-gpu, a build without CUPTI, or the variable already
 * set by the user or another CUDA tool (Nsight, compute-sanitizer), which is
 * left alone with a warning since only one injection library can be named. */
static char *gpu_env_entry(const session_t *s, const char *lib) {
    static char entry[PATH_MAX + 32];
    if (s->o.no_gpu) return NULL;
    char cupti[PATH_MAX];
    snprintf(cupti, sizeof cupti, "%s", lib);
    char *slash = strrchr(cupti, '/');
    size_t dir = slash ? (size_t)(slash - cupti) + 1 : 0;
    if (snprintf(cupti + dir, sizeof cupti - dir, "libmemlens_cupti.so") >= (int)(sizeof cupti - dir) ||
        access(cupti, R_OK) != 0)
        return NULL;
    const char *cur = getenv("CUDA_INJECTION64_PATH");
    if (cur && *cur) {
        if (strcmp(cur, cupti) != 0)
            fprintf(stderr,
                    "memlens: warning: CUDA_INJECTION64_PATH is already set (to %s), so GPU "
                    "allocations will not be recorded; unset it to record them, or pass --no-gpu\n",
                    cur);
        return NULL;
    }
    snprintf(entry, sizeof entry, "CUDA_INJECTION64_PATH=%s", cupti);
    return entry;
}

static char **build_env(const session_t *s, const char *lib) {
    extern char **environ;
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 6, sizeof *env);
    if (!env) return NULL;
    const char *orig = getenv("LD_PRELOAD");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(environ[i], "LD_PRELOAD=", 11) || !strncmp(environ[i], "ML_CTL=", 7) ||
            !strncmp(environ[i], "ML_LD_PRELOAD_ORIG=", 19) ||
            !strncmp(environ[i], "ML_GPU_POOLS=", 13))
            continue;
        env[k++] = environ[i];
    }
    char pre[PATH_MAX * 2];
    if (orig && *orig) snprintf(pre, sizeof pre, "%s:%s", lib, orig);
    else snprintf(pre, sizeof pre, "%s", lib);
    env[k++] = env_entry("LD_PRELOAD", pre);
    env[k++] = env_entry("ML_LD_PRELOAD_ORIG", orig ? orig : "");
    env[k++] = env_entry("ML_CTL", s->ctl_path);
    char *gpu = gpu_env_entry(s, lib);
    if (gpu) env[k++] = gpu;
    /* Read by libmemlens_cupti.so at InitializeInjection; only --gpu-pools
     * turns the activity records on, whatever the caller's environment says. */
    if (gpu && s->o.gpu_pools) env[k++] = (char *)"ML_GPU_POOLS=1";
    else if (s->o.gpu_pools && !s->o.no_gpu && !getenv("CUDA_INJECTION64_PATH"))
        fprintf(stderr, "memlens: warning: --gpu-pools does nothing: this memlens was built "
                        "without GPU (CUPTI) support\n");
    env[k] = NULL;
    return env;
}

/* --live: the viewer runs in a thread of its own on the root process'
 * session (the model's) while this thread collects; see docs/viewer.md. */
static void live_start(session_t *s) {
    if (!s->live_model) return;
    ml_vmodel_set_path(s->live_model, s->root_path);
    ml_vmodel_set_process_state(s->live_model, ML_VPROC_RUNNING, 0);
    char err[512];
    if (ml_viewer_live_start(s->live_model, err, sizeof err, &s->live_ui) < 0)
        fprintf(stderr, "memlens: warning: no live view (%s); recording goes on\n", err);
}

/* The user quit the view while the program runs: recording goes on. */
static void live_poll(session_t *s) {
    if (!s->live_ui || ml_viewer_live_open(s->live_ui)) return;
    ml_viewer_live_wait(s->live_ui);
    s->live_ui = NULL;
    fprintf(stderr, "memlens: view closed; recording %s until it exits (Ctrl-C stops it)\n", s->o.argv[0]);
}

/* The program has ended: the view shows the final data until q. */
static void live_end(session_t *s) {
    if (!s->live_model) return;
    int st = s->root_status;
    ml_vmodel_set_process_state(s->live_model, WIFSIGNALED(st) ? ML_VPROC_SIGNALED : ML_VPROC_EXITED,
                                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    if (s->live_ui) ml_viewer_live_wait(s->live_ui);
    s->live_ui = NULL;
}

int ml_cmd_run(int argc, char **argv) {
    session_t *s = calloc(1, sizeof *s);
    if (!s) return ML_EXIT_ERROR;
    s->root_fd = -1;
    if (parse_run(argc, argv, &s->o) < 0) {
        free(s);
        return ML_EXIT_USAGE;
    }
    char prog[PATH_MAX], lib[PATH_MAX];
    int rc = resolve_program(s->o.argv[0], prog, sizeof prog);
    if (rc < 0) {
        ml_die_msg("cannot run '%s': %s", s->o.argv[0], strerror(-rc));
        free(s);
        return ML_EXIT_ERROR;
    }
    if (!realpath(prog, s->prog)) s->prog[0] = '\0';
    const char *why = preload_obstacle(prog, 0);
    if (why) {
        ml_die_msg("%s", why);
        free(s);
        return ML_EXIT_ERROR;
    }
    if (find_preload_lib(lib, sizeof lib) < 0) {
        ml_die_msg("cannot find libmemlens.so beside the memlens binary (set ML_PRELOAD_LIB)");
        free(s);
        return ML_EXIT_ERROR;
    }
    if (s->o.live) {
        /* Before the program starts: no terminal is a usage problem to say now. */
        char why_live[512];
        if (ml_viewer_live_check(why_live, sizeof why_live) < 0) {
            ml_die_msg("%s", why_live);
            free(s);
            return ML_EXIT_ERROR;
        }
        if (ml_vmodel_new(&s->live_model) < 0) {
            ml_die_msg("out of memory");
            free(s);
            return ML_EXIT_ERROR;
        }
    }
    if (create_ctl(s) < 0) {
        free(s);
        return ML_EXIT_ERROR;
    }
    char **env = build_env(s, lib);

    /* The child waits on `go` until its trace file is open; exec failures
     * come back through the close-on-exec `err` pipe. */
    int go[2], err[2];
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        ml_die_msg("pipe: %s", strerror(errno));
        cleanup_shm(s);
        return ML_EXIT_ERROR;
    }
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit, fwd = {.sa_handler = on_forward};
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    s->t0_ns = mono_ns();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        ml_die_msg("fork: %s", strerror(errno));
        cleanup_shm(s);
        return ML_EXIT_ERROR;
    }
    if (pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        close(go[1]);
        close(err[0]);
        char c;
        if (read(go[0], &c, 1) != 1) _exit(127);
        execve(prog, s->o.argv, env);
        int e = errno;
        ssize_t w = write(err[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    child_pid = pid;
    s->root_pid = pid;
    close(go[0]);
    close(err[1]);
    sigaction(SIGTERM, &fwd, NULL);
    sigaction(SIGHUP, &fwd, NULL);

    /* The root trace file: opened before the program starts, so that an
     * unwritable path fails before any work is done. */
    if (s->o.out) {
        snprintf(s->root_path, sizeof s->root_path, "%s", s->o.out);
    } else {
        const char *base = strrchr(s->o.argv[0], '/');
        base = base ? base + 1 : s->o.argv[0];
        snprintf(s->root_path, sizeof s->root_path, "memlens.%s.%d.mlt", base, (int)pid);
    }
    snprintf(s->stem, sizeof s->stem, "%s", s->root_path);
    size_t sl = strlen(s->stem);
    if (sl > 4 && !strcmp(s->stem + sl - 4, ".mlt")) s->stem[sl - 4] = '\0';
    s->root_fd = open(s->root_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s->root_fd < 0) {
        int e = errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        ml_die_msg("cannot write the trace %s: %s", s->root_path, strerror(e));
        cleanup_shm(s);
        return ML_EXIT_ERROR;
    }
    if (write(go[1], "g", 1) != 1) { /* the child died: waitpid below reports it */
    }
    close(go[1]);
    int e = 0;
    if (read(err[0], &e, sizeof e) == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        close(s->root_fd);
        unlink(s->root_path);
        ml_die_msg("cannot run '%s': %s", prog, strerror(e));
        cleanup_shm(s);
        return ML_EXIT_ERROR;
    }
    close(err[0]);
    live_start(s);

    /* Collect. */
    uint32_t next_rss = 0, next_mallinfo = MALLINFO_INTERVAL_MS;
    for (;;) {
        live_poll(s);
        uint32_t now = now_ms(s);
        ml_atomic_store_relaxed(&s->ctl->clock_ms, now);
        discover(s);
        uint64_t got = 0;
        for (uint32_t i = 0; i < s->nseen; i++) {
            proc_t *p = s->procs[i];
            if (!p || p->done) continue;
            got += drain(s, p, false);
        }
        if (now >= next_rss) {
            next_rss = now + RSS_INTERVAL_MS;
            for (uint32_t i = 0; i < s->nseen; i++)
                if (s->procs[i] && !s->procs[i]->done && !s->procs[i]->ended)
                    sample_rss(s, s->procs[i]);
        }
        if (now >= next_mallinfo) {
            next_mallinfo = now + MALLINFO_INTERVAL_MS;
            ml_atomic_add_relaxed(&s->ctl->mallinfo_gen, 1);
        }
        if (!s->root_exited) {
            int st;
            pid_t w = waitpid(pid, &st, WNOHANG);
            if (w == pid) {
                s->root_exited = true;
                s->root_status = st;
                discover(s);
                for (uint32_t i = 0; i < s->nseen; i++) {
                    proc_t *p = s->procs[i];
                    if (p && p->is_root && !p->ended) {
                        p->ended = true;
                        p->end_kind = WIFSIGNALED(st) ? ML_END_SIGNALED : ML_END_EXITED;
                        p->end_status = WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st);
                    } else if (p && p->pid == (uint32_t)pid && !p->ended) {
                        /* an exec'd image of the root process */
                        p->ended = true;
                        p->end_kind = WIFSIGNALED(st) ? ML_END_SIGNALED : ML_END_EXITED;
                        p->end_status = WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st);
                    }
                }
            }
        }
        bool active = false;
        for (uint32_t i = 0; i < s->nseen; i++) {
            proc_t *p = s->procs[i];
            if (!p || p->done) continue;
            if (proc_gone(p)) finish_proc(s, p);
            else active = true;
        }
        if (s->root_exited && !active && s->nseen >= ml_atomic_load_acquire(&s->ctl->nprocs))
            break;
        if (!got) {
            struct timespec ts = {0, 500000};
            nanosleep(&ts, NULL);
        }
    }
    live_end(s);
    if (s->root_fd >= 0) {
        /* The program never registered: it could not be preloaded. */
        close(s->root_fd);
        s->root_fd = 0;
        unlink(s->root_path);
        fprintf(stderr,
                "memlens: error: %s ran but was never traced: libmemlens.so was not loaded into it "
                "(a static or set-user-ID program behind a script?); no trace written\n",
                prog);
    } else if (!s->o.quiet) {
        print_summary(s);
    }
    int st = s->root_status;
    int code = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
    if (s->root_fd >= 0) code = ML_EXIT_ERROR;
    for (uint32_t i = 0; i < s->nseen; i++) {
        if (!s->procs[i]) continue;
        if (!s->procs[i]->live) ml_analysis_free(s->procs[i]->an);
        free(s->procs[i]);
    }
    ml_vmodel_free(s->live_model);
    cleanup_shm(s);
    munmap(s->ctl, sizeof(ml_ctl_t));
    for (char **e2 = env; *e2; e2++)
        if (!strncmp(*e2, "LD_PRELOAD=", 11) || !strncmp(*e2, "ML_CTL=", 7) ||
            !strncmp(*e2, "ML_LD_PRELOAD_ORIG=", 19))
            free(*e2);
    free(env);
    free(s);
    return code;
}
