/* attach.c - `memlens attach PID`: record a process that is already running.
 *
 * memlens creates a session (collector, trace writer, analysis) as `run`
 * does, then, through ptrace on the target's main thread, makes the program
 * call dlopen("…/libmemlens.so", RTLD_NOW) and ml_attach_start(CTL) (the
 * library's side is interpose/attach.c: it joins the session and rewrites
 * the program's GOT entries of the allocation functions), and lets it go.
 * At Ctrl-C (SIGINT, SIGTERM, SIGHUP) or after --duration, it calls
 * ml_attach_stop() the same way (every GOT entry put back), finishes the
 * trace, and leaves the program running. docs/recorder.md#attach says how,
 * and what is left out.
 *
 * A remote call: the thread's registers and extended state are saved; the
 * call's registers are the saved ones with rip = the function, the
 * arguments in rdi/rsi (rdx, rcx, r8, r9 for mmap), a stack memlens maps in
 * the program for the time of the stop (the strings it needs are written
 * there too; the mmap and munmap of it run below the thread's red zone) and
 * a return address of 0, so that the return faults
 * and ptrace reports a SIGSEGV with rip 0, where rax is the result. Then
 * every register is restored. orig_rax is -1 during the call, so that a
 * thread stopped inside a system call does not have the call's rip moved
 * back by the kernel's restart logic; restoring the saved orig_rax and rax
 * (-ERESTARTSYS...) at the end restarts that system call as the signal
 * path would have. The main thread is only interrupted where it holds no
 * libc lock we might need: not inside libc or the loader, nor in a memory
 * system call (malloc may be making it); otherwise it runs on for a
 * millisecond and is interrupted again.
 */
#define _GNU_SOURCE
#include "ml_cli.h"
#include "ml_analysis.h"
#include "ml_collector.h"
#include "ml_config.h"
#include "ml_event.h"
#include "ml_options.h"
#include "ml_outfile.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *out;
    double duration; /* seconds; 0: until a signal */
    bool quiet;
    unsigned out_flags;
    pid_t pid;
} attach_opts_t;

static volatile sig_atomic_t stop_sig;

static void usage_attach(FILE *f) {
    fprintf(f,
            "usage: memlens attach [-o FILE] [--duration SECONDS] [-q] [--force] [--group-readable] PID\n"
            "\n"
            "Records the allocations of running process PID from now until Ctrl-C (or SIGTERM)\n"
            "or SECONDS, then leaves it running as it was. The trace is marked as attached: its\n"
            "report shows what was allocated in the window and is still live at the end, by site.\n"
            "Needs ptrace permission over PID (docs/recorder.md#attach); x86-64 only.\n"
            "\n"
            "  -o, --output FILE   trace file (default: memlens.PROG.PID-RANDOM.mlt here)\n"
            "  --duration SECONDS  stop after SECONDS (decimals allowed)\n"
            "  --force             replace FILE even when memlens did not write it\n"
            "  --group-readable    create the trace 0640 instead of 0600\n"
            "  -q, --quiet         no summary on stderr\n");
}

static int parse_attach(int argc, char **argv, attach_opts_t *o) {
    memset(o, 0, sizeof *o);
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-') break;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc) goto missing;
            o->out = argv[i];
            if (!strcmp(o->out, "-")) {
                /* The reports' "-" is stdout; a file named "-" surprises. */
                ml_cli_error("attach: -o - is not a trace file: a trace goes to a file; name one, such "
                             "as -o ./-");
                return -1;
            }
        } else if (!strcmp(a, "--duration")) {
            if (++i >= argc) goto missing;
            char *end;
            errno = 0;
            o->duration = strtod(argv[i], &end);
            if (errno || *end || end == argv[i] || !(o->duration > 0) || o->duration > 1e9) {
                ml_cli_error("--duration takes a positive number of seconds, like 30 or 0.5");
                return -1;
            }
        } else if (!strcmp(a, "--force")) {
            o->out_flags |= ML_OUTFILE_FORCE;
        } else if (!strcmp(a, "--group-readable")) {
            o->out_flags |= ML_OUTFILE_GROUP;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o->quiet = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_attach(stdout);
            exit(ML_EXIT_OK);
        } else {
            ml_cli_error("attach: unknown option '%s'", a);
            usage_attach(stderr);
            return -1;
        }
    }
    if (i != argc - 1) {
        ml_cli_error(i >= argc ? "attach: no PID given" : "attach: one PID, after the options");
        usage_attach(stderr);
        return -1;
    }
    char *end;
    errno = 0;
    long v = strtol(argv[i], &end, 10);
    if (errno || *end || end == argv[i] || v <= 0 || v > INT32_MAX) {
        ml_cli_error("attach: '%s' is not a process id", argv[i]);
        return -1;
    }
    o->pid = (pid_t)v;
    return 0;
missing:
    ml_cli_error("attach: %s needs a value", argv[i - 1]);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Can this process be attached?                                             */
/* ------------------------------------------------------------------------- */

/* The target and what memlens found out about it. */
typedef struct {
    pid_t pid;
    char exe[PATH_MAX];
    char cmdline[8192];
    char *argv[ML_MAX_ARGS + 1];
    int argc;
    char libc_path[PATH_MAX];
    uint64_t libc_base; /* its mapping at file offset 0 */
    int mem;            /* /proc/PID/mem */
    bool seized;
    /* the main thread as it was when interrupted */
    struct user_regs_struct regs;
    uint8_t *xstate;
    size_t xstate_len; /* 0: extended state not saved, the FP registers are */
    struct user_fpregs_struct fpregs;
    /* its signal mask, which memlens' calls replace (mask_saved) */
    uint64_t sigmask;
    bool mask_saved;
    /* its errno, which memlens' calls clobber: where (0: not known yet),
     * and its value when the thread was stopped (errno_saved) */
    uint64_t errno_addr;
    int errno_val;
    bool errno_saved;
    /* remote addresses */
    uint64_t r_dlopen, r_dlerror, r_dlsym, r_errno_location, r_mmap, r_munmap;
    /* the stack memlens' calls run on (mapped in the program for the time
     * of one stop; 0: none, they run below the thread's own) */
    uint64_t call_stack;
    bool mapping_stack;
    uint64_t more_args[4]; /* rdx, rcx, r8, r9 of the next call */
    /* [lo, hi) of glibc's functions that wait for or release a lock of its
     * own, and of fork; 0 0: unknown */
    uint64_t r_lll_lo[2], r_lll_hi[2], r_fork_lo, r_fork_hi;
    double fork_seen; /* when this stop first looked inside fork (0: not yet) */
    uint64_t r_start, r_stop;
} target_t;

#define REFUSE(...)                                                                                \
    do {                                                                                           \
        ml_cli_error(__VA_ARGS__);                                                                 \
        return -1;                                                                                 \
    } while (0)

static bool have_cap_sys_ptrace(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return false;
    char line[256];
    bool cap = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (sscanf(line, "CapEff: %llx", &v) == 1) cap = v >> 19 & 1; /* CAP_SYS_PTRACE */
    }
    fclose(f);
    return cap;
}

static int read_small(const char *path, char *buf, size_t len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int e = errno;
    close(fd);
    if (n < 0) return -e;
    buf[n] = '\0';
    return (int)n;
}

/* The process tracing pid (TracerPid), 0 when none or unknown. */
static int tracer_of(pid_t pid) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (read_small(path, buf, sizeof buf) <= 0) return 0;
    const char *tp = strstr(buf, "TracerPid:");
    return tp ? atoi(tp + 10) : 0;
}

static const char *how_to_allow =
    "to allow it: run memlens as root or give it CAP_SYS_PTRACE (sudo setcap cap_sys_ptrace+ep "
    "$(command -v memlens)), or lower Yama's setting (sudo sysctl kernel.yama.ptrace_scope=0)";

/* Yama's ptrace_scope (0 when Yama is not there) against our capability. */
static int check_ptrace_policy(pid_t pid) {
    char buf[32];
    int scope = 0;
    if (read_small("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof buf) > 0) scope = atoi(buf);
    bool cap = have_cap_sys_ptrace();
    if (scope >= 3)
        REFUSE("cannot attach to process %d: ptrace is disabled on this system "
               "(/proc/sys/kernel/yama/ptrace_scope is 3, which only a reboot undoes)",
               (int)pid);
    if (scope == 2 && !cap)
        REFUSE("cannot attach to process %d: /proc/sys/kernel/yama/ptrace_scope is 2 (only "
               "CAP_SYS_PTRACE may trace); %s",
               (int)pid, how_to_allow);
    return 0;
}

static int check_alive(pid_t pid) {
    if (kill(pid, 0) < 0 && errno == ESRCH) REFUSE("cannot attach to process %d: no such process", (int)pid);
    char state = ml_cli_proc_state(pid);
    if (!state) REFUSE("cannot attach to process %d: no such process", (int)pid);
    if (state == 'Z' || state == 'X')
        REFUSE("cannot attach to process %d: it has exited (a zombie waiting for its parent)", (int)pid);
    if (pid == getpid()) REFUSE("cannot attach to memlens itself");
    /* Another PID namespace (a container's, `unshare -p`): the library
     * checks that memlens is alive by its pid, which the program cannot
     * see there; it wrote "memlens (pid N) is gone" into the program's
     * stderr and memlens exited 1. */
    char ns_path[64];
    struct stat ours, theirs;
    snprintf(ns_path, sizeof ns_path, "/proc/%d/ns/pid", (int)pid);
    if (stat("/proc/self/ns/pid", &ours) == 0 && stat(ns_path, &theirs) == 0 &&
        (ours.st_dev != theirs.st_dev || ours.st_ino != theirs.st_ino))
        REFUSE("cannot attach to process %d: it runs in another PID namespace (a container?), where it "
               "cannot see memlens' process; run memlens attach in its namespaces (nsenter -t %d -a)",
               (int)pid, (int)pid);
    /* Strict seccomp (only read, write, exit and sigreturn): the first
     * system call of the injected dlopen kills it. */
    char status[4096];
    snprintf(ns_path, sizeof ns_path, "/proc/%d/status", (int)pid);
    const char *sc = read_small(ns_path, status, sizeof status) > 0 ? strstr(status, "\nSeccomp:") : NULL;
    if (sc && atoi(sc + 9) == 1)
        REFUSE("cannot attach to process %d: it runs in strict seccomp mode, which would kill it at the "
               "first system call of memlens' dlopen", (int)pid);
    int tracer = tracer_of(pid);
    if (tracer)
        REFUSE("cannot attach to process %d: it is already traced by process %d (a debugger, "
               "strace, or another memlens attach); only one tracer at a time",
               (int)pid, tracer);
    return 0;
}

/* The executable: a 64-bit x86-64 ELF with a dynamic loader. */
static int check_exe(target_t *t) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)t->pid);
    ssize_t n = readlink(path, t->exe, sizeof t->exe - 1);
    if (n <= 0) {
        if (errno == EACCES || errno == EPERM)
            REFUSE("cannot attach to process %d: permission denied reading /proc/%d (it belongs to "
                   "another user?); %s",
                   (int)t->pid, (int)t->pid, how_to_allow);
        REFUSE("cannot attach to process %d: cannot read %s: %s", (int)t->pid, path, strerror(errno));
    }
    t->exe[n] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) REFUSE("cannot attach to process %d: cannot open %s: %s", (int)t->pid, path, strerror(errno));
    Elf64_Ehdr eh;
    bool ok = pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG);
    if (!ok || eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
        close(fd);
        REFUSE("cannot attach to process %d (%s): not a 64-bit x86-64 program", (int)t->pid, t->exe);
    }
    bool interp = false;
    for (int i = 0; i < eh.e_phnum && !interp; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != (ssize_t)sizeof ph)
            break;
        interp = ph.p_type == PT_INTERP;
    }
    close(fd);
    if (!interp)
        REFUSE("cannot attach to process %d (%s): it is statically linked, so there is no dlopen to "
               "load libmemlens.so with",
               (int)t->pid, t->exe);
    /* Its arguments, for the process record. */
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)t->pid);
    int len = read_small(path, t->cmdline, sizeof t->cmdline);
    for (int i = 0; i < len && t->argc < ML_MAX_ARGS; i += (int)strlen(t->cmdline + i) + 1)
        t->argv[t->argc++] = t->cmdline + i;
    t->argv[t->argc] = NULL;
    return 0;
}

/* libc.so.6 in the target's maps, and the same file as ours (so that the
 * offsets of dlopen & co. in our libc are theirs). */
static int find_libc(target_t *t) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)t->pid);
    FILE *f = fopen(path, "r");
    if (!f) REFUSE("cannot attach to process %d: cannot read %s: %s", (int)t->pid, path, strerror(errno));
    char line[PATH_MAX + 128];
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, off;
        int pos = 0;
        if (sscanf(line, "%lx-%*x %*s %lx %*s %*s %n", &lo, &off, &pos) < 2 || !pos) continue;
        char *file = line + pos;
        file[strcspn(file, "\n")] = '\0';
        const char *base = strrchr(file, '/');
        if (!base || strncmp(base + 1, "libc.so.6", 9) || off != 0) continue;
        if (!t->libc_base || lo < t->libc_base) {
            t->libc_base = lo;
            snprintf(t->libc_path, sizeof t->libc_path, "%s", file);
        }
    }
    fclose(f);
    if (!t->libc_base)
        REFUSE("cannot attach to process %d (%s): it does not use glibc's libc.so.6, whose dlopen "
               "loads libmemlens.so",
               (int)t->pid, t->exe);
    void *self = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *f_dlopen = self ? dlsym(self, "dlopen") : NULL;
    void *f_dlerror = self ? dlsym(self, "dlerror") : NULL;
    void *f_dlsym = self ? dlsym(self, "dlsym") : NULL;
    void *f_errno = self ? dlsym(self, "__errno_location") : NULL;
    void *f_mmap = self ? dlsym(self, "mmap") : NULL;
    void *f_munmap = self ? dlsym(self, "munmap") : NULL;
    Dl_info di;
    if (!f_dlopen || !f_dlerror || !f_dlsym || !f_errno || !f_mmap || !f_munmap || !dladdr(f_dlopen, &di) || !di.dli_fname) {
        if (self) dlclose(self);
        REFUSE("cannot find dlopen in memlens' own libc.so.6");
    }
    char theirs[PATH_MAX + 64];
    snprintf(theirs, sizeof theirs, "/proc/%d/root%s", (int)t->pid, t->libc_path);
    struct stat a, b;
    if (stat(di.dli_fname, &a) < 0 || stat(theirs, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        dlclose(self);
        REFUSE("cannot attach to process %d: it uses %s, not the libc.so.6 memlens runs with (%s); "
               "run the memlens built for that system (in its container)",
               (int)t->pid, t->libc_path, di.dli_fname);
    }
    uint64_t ours = (uint64_t)(uintptr_t)di.dli_fbase;
    t->r_dlopen = t->libc_base + ((uint64_t)(uintptr_t)f_dlopen - ours);
    t->r_dlerror = t->libc_base + ((uint64_t)(uintptr_t)f_dlerror - ours);
    t->r_dlsym = t->libc_base + ((uint64_t)(uintptr_t)f_dlsym - ours);
    t->r_errno_location = t->libc_base + ((uint64_t)(uintptr_t)f_errno - ours);
    t->r_mmap = t->libc_base + ((uint64_t)(uintptr_t)f_mmap - ours);
    t->r_munmap = t->libc_base + ((uint64_t)(uintptr_t)f_munmap - ours);
    /* where glibc waits for or releases a lock of its own (malloc's
     * arenas, stdio's, fork's), and fork: see safe_point */
    static const char *const fn_names[3] = {"__lll_lock_wait_private", "__lll_lock_wake_private", "fork"};
    uint64_t *lo[3] = {&t->r_lll_lo[0], &t->r_lll_lo[1], &t->r_fork_lo};
    uint64_t *hi[3] = {&t->r_lll_hi[0], &t->r_lll_hi[1], &t->r_fork_hi};
    for (int i = 0; i < 3; i++) {
        void *fn = dlsym(self, fn_names[i]);
        const ElfW(Sym) *sym = NULL;
        Dl_info li;
        if (fn && dladdr1(fn, &li, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
            *lo[i] = t->libc_base + ((uint64_t)(uintptr_t)fn - ours);
            *hi[i] = *lo[i] + sym->st_size;
        }
    }
    dlclose(self);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* ptrace                                                                    */
/* ------------------------------------------------------------------------- */

typedef void (*idle_fn)(void *ctx);

#define CALL_STACK_BYTES ((uint64_t)1 << 20)

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

/* Waits for the next stop of the main thread, running idle(ctx) meanwhile
 * (the collector keeps draining while the program runs our call). Returns
 * the wait status, or -1 when the process is gone or wait failed. */
static int wait_stop(target_t *t, idle_fn idle, void *ctx) {
    for (;;) {
        int st;
        pid_t r = waitpid(t->pid, &st, __WALL | WNOHANG);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == t->pid) {
            if (WIFEXITED(st) || WIFSIGNALED(st)) return -1;
            return st;
        }
        if (idle) idle(ctx);
        sleep_us(200);
    }
}

static int mem_write(target_t *t, uint64_t addr, const void *buf, size_t len) {
    return pwrite(t->mem, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

/* Interrupts the main thread where it is safe to call into libc. */
static bool in_range_of(const target_t *t, uint64_t rip, bool *in_libc) {
    char path[64], line[PATH_MAX + 128];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)t->pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        int pos = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &pos) < 2) continue;
        if (rip < lo || rip >= hi) continue;
        found = true;
        const char *file = pos ? line + pos : "";
        const char *base = strrchr(file, '/');
        base = base ? base + 1 : file;
        /* and the allocators programs preload or link, whose locks the
         * injected dlopen's mallocs would wait on for good when the thread
         * was stopped holding one (jemalloc: 1 attach in 5 deadlocked) */
        static const char *const unsafe[] = {"libc.so", "ld-linux", "libmemlens.so", "libjemalloc", "libtcmalloc",
                                             "libmimalloc", "libtbbmalloc", "libhoard", "libsnmalloc", "librpmalloc"};
        *in_libc = false;
        for (size_t i = 0; i < sizeof unsafe / sizeof unsafe[0]; i++)
            *in_libc |= !strncmp(base, unsafe[i], strlen(unsafe[i]));
    }
    fclose(f);
    return found;
}

/* Whether the stack of the stopped thread, from rsp up (64 KiB at most),
 * holds a return address into glibc's fork: the thread is inside fork,
 * maybe in the program's own atfork handler, which glibc runs holding its
 * atfork lock; the injected start registers memlens' handlers
 * (pthread_atfork), which takes that lock, and waited for good. A value
 * left over from an earlier fork only makes memlens try again 1 ms later. */
static bool inside_fork(const target_t *t, uint64_t rsp) {
    if (t->mem < 0 || !t->r_fork_hi) return false;
    uint64_t buf[512];
    for (uint64_t at = rsp & ~(uint64_t)7, end = at + 65536; at < end; at += sizeof buf) {
        ssize_t n = pread(t->mem, buf, sizeof buf, (off_t)at);
        for (ssize_t i = 0; i < n / 8; i++)
            if (buf[i] >= t->r_fork_lo && buf[i] < t->r_fork_hi) return true;
        if (n < (ssize_t)sizeof buf) break; /* the top of the stack */
    }
    return false;
}

/* How long a stop that looks inside fork is put off. A thread inside fork
 * leaves it within milliseconds, an atfork handler's included; a return
 * address into fork left in a live frame (a buffer that a deeper call, fork,
 * wrote before) looks the same for good, and made every attach to such a
 * program give up after 5 s. */
#define FORK_WAIT_S 0.5

static double now_s(void);

static bool safe_point(target_t *t, const struct user_regs_struct *r) {
    long nr = (long)r->orig_rax;
    bool in_libc = false;
    bool forkish = inside_fork(t, r->rsp), fork_recent = false;
    if (forkish) {
        double now = now_s();
        if (t->fork_seen == 0) t->fork_seen = now;
        fork_recent = now - t->fork_seen < FORK_WAIT_S;
    }
    if (nr >= 0) {
        /* Blocked in a system call. Not one that glibc makes holding a lock
         * that the injected dlopen takes again, which would wait for good
         * on the thread that holds it, itself: malloc's memory calls (its
         * arena's lock); fork's clone (fork holds every arena's lock and
         * stdio's around it: 11 attaches in 20 to a program whose main
         * thread forked in a loop beside allocating threads hung, it and
         * memlens); a release of one of glibc's own locks
         * (__lll_lock_wake_private: fork releases them one by one). */
        if (nr == SYS_mmap || nr == SYS_munmap || nr == SYS_mremap || nr == SYS_brk || nr == SYS_mprotect ||
            nr == SYS_madvise || nr == SYS_clone || nr == SYS_clone3 || nr == SYS_fork || nr == SYS_vfork)
            return false;
        /* A release is over at once; a wait may last (another thread holds
         * stdout's lock, and stdout is a pipe nobody reads): a main thread
         * waiting for a lock is unsafe only inside fork, which takes the
         * arenas' locks one by one, holding the ones before (a main thread
         * waiting for stdout's lock made every attach give up after 5 s). */
        if (r->rip >= t->r_lll_lo[1] && r->rip < t->r_lll_hi[1]) return false;
        if (forkish && r->rip >= t->r_lll_lo[0] && r->rip < t->r_lll_hi[0]) return false;
        return !fork_recent;
    }
    return !fork_recent && in_range_of(t, r->rip, &in_libc) && !in_libc;
}

/* Whether the thread, stopped by our PTRACE_INTERRUPT, was in a system
 * call that the stop made fail with EINTR. A stopped and resumed thread
 * restarts most blocking calls (rax is then -ERESTARTSYS... and the kernel
 * restarts it), but not epoll_wait, sigtimedwait, semtimedop, or a recv or
 * send with a timeout (signal(7), "Interruption of system calls and
 * library functions by stop signals"): the program saw EINTR there, which
 * it never sees without memlens (an event loop that treats it as fatal).
 * Not when a signal is pending for the thread or the process and not
 * blocked: that signal's handler runs once the program goes on, and the
 * EINTR may be its own, which the program must see. The instruction
 * before rip must be `syscall`. */
static bool eintr_of_our_stop(target_t *t) {
    const struct user_regs_struct *r = &t->regs;
    if (t->mem < 0 || (long long)r->orig_rax < 0 || (long long)r->rax != -EINTR || r->rip < 2) return false;
    uint8_t insn[2];
    if (pread(t->mem, insn, 2, (off_t)(r->rip - 2)) != 2 || insn[0] != 0x0f || insn[1] != 0x05) return false;
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)t->pid, (int)t->pid);
    if (read_small(path, buf, sizeof buf) <= 0) return false;
    const char *pnd = strstr(buf, "SigPnd:"), *shd = strstr(buf, "ShdPnd:"), *blk = strstr(buf, "SigBlk:");
    if (!pnd || !shd || !blk) return false;
    unsigned long long pending = strtoull(pnd + 7, NULL, 16) | strtoull(shd + 7, NULL, 16);
    /* the program's mask, not the one memlens' calls run under */
    unsigned long long blocked = t->mask_saved ? t->sigmask : strtoull(blk + 7, NULL, 16);
    return (pending & ~blocked) == 0;
}

static int save_state(target_t *t) {
    if (ptrace(PTRACE_GETREGS, t->pid, 0, &t->regs) < 0) return -1;
    t->mask_saved = ptrace(PTRACE_GETSIGMASK, t->pid, (void *)sizeof t->sigmask, &t->sigmask) == 0;
    t->errno_saved = false;
    if (!t->xstate) t->xstate = malloc(65536);
    struct iovec iov = {t->xstate, 65536};
    if (t->xstate && ptrace(PTRACE_GETREGSET, t->pid, (void *)NT_X86_XSTATE, &iov) == 0) {
        t->xstate_len = iov.iov_len;
        return 0;
    }
    t->xstate_len = 0;
    return ptrace(PTRACE_GETFPREGS, t->pid, 0, &t->fpregs) < 0 ? -1 : 0;
}

static int restore_state(target_t *t) {
    int rc = ptrace(PTRACE_SETREGS, t->pid, 0, &t->regs) < 0 ? -1 : 0;
    if (t->mask_saved && ptrace(PTRACE_SETSIGMASK, t->pid, (void *)sizeof t->sigmask, &t->sigmask) < 0) rc = -1;
    if (t->errno_saved && t->mem >= 0 &&
        pwrite(t->mem, &t->errno_val, sizeof t->errno_val, (off_t)t->errno_addr) != (ssize_t)sizeof t->errno_val)
        rc = -1;
    if (t->xstate_len) {
        struct iovec iov = {t->xstate, t->xstate_len};
        if (ptrace(PTRACE_SETREGSET, t->pid, (void *)NT_X86_XSTATE, &iov) < 0) rc = -1;
    } else if (ptrace(PTRACE_SETFPREGS, t->pid, 0, &t->fpregs) < 0) {
        rc = -1;
    }
    return rc;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Seizes the process and stops its main thread at a safe point, with its
 * state saved. On failure says why. */
static int stop_target(target_t *t, idle_fn idle, void *ctx) {
    if (!t->seized) {
        if (ptrace(PTRACE_SEIZE, t->pid, 0, 0) < 0) {
            int e = errno;
            int tracer = e == EPERM ? tracer_of(t->pid) : 0;
            if (tracer) /* one that attached since check_target looked */
                REFUSE("cannot attach to process %d: it is already traced by process %d (a debugger, "
                       "strace, or another memlens attach); only one tracer at a time",
                       (int)t->pid, tracer);
            if (e == EPERM || e == EACCES)
                REFUSE("cannot attach to process %d: ptrace is not permitted (%s); %s", (int)t->pid,
                       strerror(e), how_to_allow);
            if (e == ESRCH) REFUSE("cannot attach to process %d: no such process", (int)t->pid);
            REFUSE("cannot attach to process %d: ptrace: %s", (int)t->pid, strerror(e));
        }
        t->seized = true;
    }
    if (t->mem < 0) { /* for safe_point's look at the stack; now that it is ours to read */
        char mem[64];
        snprintf(mem, sizeof mem, "/proc/%d/mem", (int)t->pid);
        t->mem = open(mem, O_RDWR | O_CLOEXEC);
    }
    /* 5 s of wall time, not 5,000 tries: each try reads /proc/PID/maps,
     * and a main thread busy inside libc took 48 s to be given up on. */
    t->fork_seen = 0;
    for (double t0 = now_s(); now_s() - t0 < 5.0;) {
        if (ptrace(PTRACE_INTERRUPT, t->pid, 0, 0) < 0) REFUSE("process %d: ptrace interrupt: %s", (int)t->pid, strerror(errno));
        int st = wait_stop(t, idle, ctx);
        if (st < 0) REFUSE("process %d ended", (int)t->pid);
        if (st >> 16 != PTRACE_EVENT_STOP) {
            /* A signal on its way to the program: let it have it. */
            ptrace(PTRACE_CONT, t->pid, 0, (void *)(uintptr_t)WSTOPSIG(st));
            continue;
        }
        if (save_state(t) < 0) REFUSE("process %d: cannot read its registers: %s", (int)t->pid, strerror(errno));
        if (safe_point(t, &t->regs)) return 0;
        ptrace(PTRACE_CONT, t->pid, 0, 0);
        if (idle) idle(ctx);
        sleep_us(1000);
    }
    REFUSE("process %d: its main thread stayed inside libc or a memory system call for 5 s; "
           "try again",
           (int)t->pid);
}

static int remote_call(target_t *t, uint64_t fn, uint64_t a0, uint64_t a1, const void *data, size_t len,
                       uint64_t *ret, idle_fn idle, void *ctx);

/* Lets the program go on exactly where it was. A system call that our stop
 * made fail with EINTR is issued again: the thread goes back to its
 * `syscall` instruction with the call's number in rax (its arguments are
 * still in their registers; the instruction clobbers only rcx and r11). */
static void release_target(target_t *t) {
    if (!t->seized) return;
    if (t->call_stack) { /* its own again, before its registers */
        uint64_t stack = t->call_stack, r = 0;
        t->call_stack = 0;
        t->mapping_stack = true; /* munmap runs below the thread's stack, as mmap did */
        t->more_args[0] = 0;
        (void)remote_call(t, t->r_munmap, stack, CALL_STACK_BYTES, NULL, 0, &r, NULL, NULL);
        t->mapping_stack = false;
    }
    if (eintr_of_our_stop(t)) {
        t->regs.rip -= 2;
        t->regs.rax = t->regs.orig_rax;
        t->regs.orig_rax = (unsigned long long)-1;
    }
    if (restore_state(t) < 0)
        fprintf(stderr, "memlens: warning: process %d: could not restore its registers: %s\n", (int)t->pid,
                strerror(errno));
    ptrace(PTRACE_DETACH, t->pid, 0, 0);
    t->seized = false;
}

/* Calls fn(a0, a1) in the stopped main thread; `data` (len bytes), when
 * given, is copied below the red zone first and its address passed as the
 * argument that is 0 (a0, else a1). Returns 0 with the result in *ret, or
 * -1 (said why). */
static int remote_call(target_t *t, uint64_t fn, uint64_t a0, uint64_t a1, const void *data, size_t len,
                       uint64_t *ret, idle_fn idle, void *ctx) {
    /* The calls set the thread's errno (dlopen left EAGAIN there): a
     * program stopped between `errno = 0` and its check of errno after
     * strtol saw an error it never had. Its value is read before the first
     * call and written back with the registers (restore_state). */
    if (!t->errno_saved && fn != t->r_errno_location) {
        uint64_t a = t->errno_addr;
        if (!a && remote_call(t, t->r_errno_location, 0, 0, NULL, 0, &a, idle, ctx) < 0) return -1;
        if (!a || pread(t->mem, &t->errno_val, sizeof t->errno_val, (off_t)a) != (ssize_t)sizeof t->errno_val)
            REFUSE("process %d: cannot read its errno", (int)t->pid);
        t->errno_addr = a;
        t->errno_saved = true;
    }
    /* A stack of memlens' own: the thread may be running on a small one
     * (a coroutine's: the injected dlopen wrote 1,935 bytes past a 4 KiB
     * one, into the program's heap block beside it). Only mmap's call
     * runs on the thread's stack, a few hundred bytes below its red zone;
     * when it fails, the calls run there as they did. */
    if (!t->call_stack && !t->mapping_stack && fn != t->r_errno_location) {
        uint64_t a = 0;
        t->mapping_stack = true;
        t->more_args[0] = PROT_READ | PROT_WRITE;
        t->more_args[1] = MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE;
        t->more_args[2] = (uint64_t)-1;
        t->more_args[3] = 0;
        int rc = remote_call(t, t->r_mmap, 0, CALL_STACK_BYTES, NULL, 0, &a, idle, ctx);
        t->mapping_stack = false;
        if (rc < 0) return -1;
        if (a && a < (uint64_t)-4096) t->call_stack = a;
    }
    struct user_regs_struct r = t->regs;
    uint64_t sp = t->call_stack ? t->call_stack + CALL_STACK_BYTES : t->regs.rsp - 128; /* the red zone stays */
    if (data) {
        sp = (sp - len) & ~(uint64_t)15;
        if (mem_write(t, sp, data, len) < 0)
            REFUSE("process %d: cannot write to its stack: %s", (int)t->pid, strerror(errno));
        if (!a0) a0 = sp;
        else a1 = sp;
    }
    sp = (sp - 256) & ~(uint64_t)15;
    sp -= 8; /* the return address: as after a call instruction */
    uint64_t zero = 0;
    if (mem_write(t, sp, &zero, sizeof zero) < 0)
        REFUSE("process %d: cannot write to its stack: %s", (int)t->pid, strerror(errno));
    r.rip = fn;
    r.rsp = sp;
    r.rdi = a0;
    r.rsi = a1;
    r.rdx = t->more_args[0];
    r.rcx = t->more_args[1];
    r.r8 = t->more_args[2];
    r.r9 = t->more_args[3];
    memset(t->more_args, 0, sizeof t->more_args);
    r.rax = 0;
    r.orig_rax = (unsigned long long)-1; /* no system call restart on the way */
    r.eflags &= ~(1ull << 10);           /* the ABI's direction flag: clear */
    /* Every signal but SIGSEGV blocked while the call runs: a handler of
     * the program's must not run in the middle of the injected dlopen (one
     * that longjmps leaves the loader's lock taken); what comes meanwhile
     * waits, pending, until the thread has its own mask back
     * (restore_state), as if it had come then. SIGSEGV, the return to
     * address 0, must not be blocked: the kernel unblocks a fault's signal
     * that is blocked, for good, and resets its handler to SIG_DFL (a
     * program whose main thread blocked every signal had SIGSEGV unblocked
     * after the attach). */
    uint64_t call_mask = ~(1ull << (SIGSEGV - 1));
    if (t->mask_saved) (void)ptrace(PTRACE_SETSIGMASK, t->pid, (void *)sizeof call_mask, &call_mask);
    if (ptrace(PTRACE_SETREGS, t->pid, 0, &r) < 0) REFUSE("process %d: cannot set its registers: %s", (int)t->pid, strerror(errno));
    int sig = 0;
    for (;;) {
        if (ptrace(PTRACE_CONT, t->pid, 0, (void *)(uintptr_t)sig) < 0)
            REFUSE("process %d: ptrace: %s", (int)t->pid, strerror(errno));
        int st = wait_stop(t, idle, ctx);
        if (st < 0) REFUSE("process %d ended during memlens' call into it", (int)t->pid);
        sig = 0;
        if (st >> 16 == PTRACE_EVENT_STOP) continue; /* a group stop: the call goes on */
        if (WSTOPSIG(st) == SIGSEGV) {
            struct user_regs_struct now;
            if (ptrace(PTRACE_GETREGS, t->pid, 0, &now) < 0) REFUSE("process %d: ptrace: %s", (int)t->pid, strerror(errno));
            if (now.rip == 0) {
                *ret = now.rax;
                return 0;
            }
            /* A fault inside the call: memlens' doing. The program gets its
             * registers back and goes on as if nothing ran. */
            REFUSE("process %d: the call at 0x%" PRIx64 " faulted at 0x%llx; the process was put "
                   "back as it was",
                   (int)t->pid, fn, now.rip);
        }
        sig = WSTOPSIG(st); /* the program's signal: delivered */
    }
}

static int read_remote_str(target_t *t, uint64_t addr, char *out, size_t len) {
    if (!addr) return -1;
    ssize_t n = pread(t->mem, out, len - 1, (off_t)addr);
    if (n <= 0) return -1;
    out[n] = '\0';
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The session                                                               */
/* ------------------------------------------------------------------------- */

typedef struct {
    attach_opts_t o;
    target_t t;
    char lib[PATH_MAX];
    char trace[PATH_MAX];
    ml_outfile_t file;
    ml_collector_t *c;
    int pidfd;
} attach_t;

static void idle_poll(void *ctx) {
    attach_t *s = ctx;
    ml_collector_poll(s->c);
}

static int start_collector(attach_t *s) {
    ml_collector_opts_t co = {
        .snapshot = true,
        .depth = ML_DEFAULT_DEPTH,
        .ring_slots = (uint32_t)ml_option(ML_ENV_RING_SLOTS)->value,
        .out_flags = s->o.out_flags,
        .attached = true,
        .quiet = s->o.quiet,
    };
    uint32_t slots = co.ring_slots;
    if (!ml_option(ML_ENV_RING_SLOTS)->valid || !ml_ring_slots_ok(slots))
        REFUSE("ML_RING_SLOTS must be a power of two between %u and 2^28", ML_MIN_RING_SLOTS);
    char err[512];
    if (ml_collector_new(&co, &s->c, err, sizeof err) < 0) REFUSE("%s", err);
    ml_sink_t sink;
    int rc = ml_trace_sink_new(&sink);
    if (rc == 0) rc = ml_collector_add_sink(s->c, sink);
    if (rc == 0) rc = ml_analysis_sink_new(false, &sink);
    if (rc == 0) rc = ml_collector_add_sink(s->c, sink);
    if (rc < 0) REFUSE("%s", strerror(-rc));
    unsigned flags = s->o.out_flags | ML_OUTFILE_KEEP;
    if (s->o.out) {
        snprintf(s->trace, sizeof s->trace, "%s", s->o.out);
    } else {
        ml_cli_default_trace_name(s->trace, sizeof s->trace, s->t.argc ? s->t.argv[0] : s->t.exe, (int)s->t.pid);
        flags = (flags & ML_OUTFILE_GROUP) | ML_OUTFILE_KEEP | ML_OUTFILE_NEW;
    }
    char ferr[PATH_MAX + 256];
    if (ml_outfile_open(&s->file, s->trace, flags, ferr, sizeof ferr) < 0) REFUSE("%s", ferr);
    ml_collector_root_t root = {s->t.pid, s->trace, &s->file, s->t.exe, s->t.argc, s->t.argv};
    ml_collector_set_root(s->c, &root);
    return 0;
}

static const char *start_error(int rc) {
    switch (rc) {
    case -EALREADY: return "memlens was attached to this process before; it attaches once per process";
    case -EBUSY: return "libmemlens.so is already preloaded in it (memlens run records it)";
    case -ENOENT: return "it could not open the session in /dev/shm";
    case -EACCES:
        return "it runs as another user, who may not open the session memlens made in /dev/shm; attach as "
               "that user";
    case -EAGAIN: return "it could not create its event ring (see its stderr)";
    case -ENOMEM: return "out of memory";
    default: return "unexpected error";
    }
}

/* Loads the library into the stopped target and starts recording. Leaves
 * the target stopped (the caller restores it and detaches). */
static int inject(attach_t *s) {
    target_t *t = &s->t;
    uint64_t handle = 0, rc = 0;
    if (remote_call(t, t->r_dlopen, 0, RTLD_NOW, s->lib, strlen(s->lib) + 1, &handle, idle_poll, s) < 0)
        return -1;
    if (!handle) {
        char msg[512] = "";
        uint64_t e = 0;
        if (remote_call(t, t->r_dlerror, 0, 0, NULL, 0, &e, idle_poll, s) == 0) read_remote_str(t, e, msg, sizeof msg);
        REFUSE("process %d could not load %s: %s", (int)t->pid, s->lib, *msg ? msg : "dlopen failed");
    }
    static const char start[] = "ml_attach_start", stop[] = "ml_attach_stop";
    if (remote_call(t, t->r_dlsym, handle, 0, start, sizeof start, &t->r_start, idle_poll, s) < 0 ||
        remote_call(t, t->r_dlsym, handle, 0, stop, sizeof stop, &t->r_stop, idle_poll, s) < 0)
        return -1;
    if (!t->r_start || !t->r_stop) REFUSE("%s does not export ml_attach_start/ml_attach_stop", s->lib);
    const char *ctl = ml_collector_ctl_path(s->c);
    if (remote_call(t, t->r_start, 0, 0, ctl, strlen(ctl) + 1, &rc, idle_poll, s) < 0) return -1;
    int r = (int)(int32_t)rc;
    if (r == -EALREADY || r == -EBUSY) {
        /* refusals, as the other refusals: exit 2 */
        ml_cli_error("cannot record process %d: %s", (int)t->pid, start_error(r));
        return -2;
    }
    if (r < 0) REFUSE("cannot record process %d: %s", (int)t->pid, start_error(r));
    if (r == 0 && !s->o.quiet)
        fprintf(stderr, "memlens: warning: process %d: no module calls malloc & co. through its GOT; "
                        "nothing will be recorded\n", (int)t->pid);
    return 0;
}

static void on_stop(int sig) {
    if (!stop_sig) stop_sig = sig;
}

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

/* Records until a signal, --duration, or the end of the target. Returns
 * true when the target is still there. */
static bool record(attach_t *s) {
    double end = s->o.duration > 0 ? now_s() + s->o.duration : INFINITY;
    while (!stop_sig && now_s() < end) {
        uint64_t got = ml_collector_poll(s->c);
        if (s->pidfd >= 0) {
            struct pollfd pf = {s->pidfd, POLLIN, 0};
            if (poll(&pf, 1, 0) > 0) return false;
        } else if (kill(s->t.pid, 0) < 0 && errno == ESRCH) {
            return false;
        }
        if (!got) sleep_us(1000);
    }
    return true;
}

/* Whether the library is mapped in the process: not once it has started
 * another program (exec), whose image has neither the library nor its
 * hooks. */
static bool lib_mapped(pid_t pid, const char *lib) {
    char path[64], line[PATH_MAX + 128];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return true; /* not known: as before */
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char *file = strchr(line, '/');
        if (!file) continue;
        file[strcspn(file, "\n")] = '\0';
        /* The library replaced or removed meanwhile (a rebuild, an
         * upgrade) is still mapped, named "PATH (deleted)": no exec. */
        size_t n = strlen(lib);
        found = !strncmp(file, lib, n) && (!file[n] || !strcmp(file + n, " (deleted)"));
    }
    fclose(f);
    return found;
}

static void print_summary(attach_t *s, double window) {
    const ml_proc_info_t *p = ml_collector_nprocs(s->c) ? ml_collector_proc(s->c, 0) : NULL;
    if (!p || !p->analysis) return;
    const ml_totals_t *tt = ml_analysis_totals(p->analysis);
    char b1[32], b2[32], exe[sizeof s->t.exe + 1];
    fprintf(stderr,
            "memlens: attached to process %d (%s) for %.1f s: %" PRIu64 " allocation calls, %" PRIu64
            " frees, %" PRIu64 " frees of blocks allocated before the attach\n",
            (int)s->t.pid, ml_cli_safe(s->t.exe, exe, sizeof exe), window, tt->alloc_calls, tt->free_calls, tt->unknown_frees);
    fprintf(stderr, "memlens: allocated in the window and still live: %s in %" PRIu64 " blocks (peak %s)\n",
            ml_fmt_bytes(tt->heap_bytes, b1, sizeof b1), tt->heap_blocks, ml_fmt_bytes(tt->peak_bytes, b2, sizeof b2));
    fprintf(stderr, "memlens: trace %s\n", p->path);
}

int ml_cmd_attach(int argc, char **argv) {
    attach_t *s = calloc(1, sizeof *s);
    if (!s) {
        ml_cli_error("out of memory");
        return ML_EXIT_ERROR;
    }
    int code = ML_EXIT_USAGE;
    s->t.mem = -1;
    s->pidfd = -1;
    s->file.fd = -1;
    /* As `memlens run`: a reader of stderr gone before the last line must
     * not kill memlens with the target stopped or its session in /dev/shm. */
    signal(SIGPIPE, SIG_IGN);
    if (parse_attach(argc, argv, &s->o) < 0) goto out;
#if !defined(__x86_64__)
    ml_cli_error("memlens attach supports x86-64 only (it sets up a function call in the target's registers)");
    goto out;
#endif
    s->t.pid = s->o.pid;
    /* Refusals (exit 2): what makes attaching impossible, said before
     * anything is touched. */
    if (check_alive(s->t.pid) < 0 || check_ptrace_policy(s->t.pid) < 0 || check_exe(&s->t) < 0 ||
        find_libc(&s->t) < 0)
        goto out;
    code = ML_EXIT_ERROR;
    if (ml_cli_find_preload_lib(s->lib, sizeof s->lib) < 0) {
        ml_cli_error("cannot find libmemlens.so beside the memlens binary (set ML_PRELOAD_LIB)");
        goto out;
    }
    char real[PATH_MAX];
    if (realpath(s->lib, real)) snprintf(s->lib, sizeof s->lib, "%s", real);
    if (start_collector(s) < 0) goto out;
    struct sigaction sa = {.sa_handler = on_stop}, old[3];
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) sigaction(stop_signals[i], &sa, &old[i]);
    s->pidfd = (int)syscall(SYS_pidfd_open, s->t.pid, 0);
    char mem[64];
    snprintf(mem, sizeof mem, "/proc/%d/mem", (int)s->t.pid);
    if (stop_target(&s->t, idle_poll, s) < 0) {
        code = ML_EXIT_USAGE; /* not permitted, or gone: a refusal */
        goto restore_signals;
    }
    if (s->t.mem < 0) s->t.mem = open(mem, O_RDWR | O_CLOEXEC);
    if (s->t.mem < 0) {
        ml_cli_error("cannot open %s: %s", mem, strerror(errno));
        release_target(&s->t);
        goto restore_signals;
    }
    int irc = inject(s);
    release_target(&s->t);
    if (irc < 0) {
        if (irc == -2) code = ML_EXIT_USAGE;
        goto restore_signals;
    }
    double t0 = now_s();
    if (!s->o.quiet) {
        char exe[sizeof s->t.exe + 1]; /* the target's file name: its owner chose it */
        fprintf(stderr, "memlens: attached to process %d (%s); recording %s\n", (int)s->t.pid,
                ml_cli_safe(s->t.exe, exe, sizeof exe), s->o.duration > 0 ? "for the given duration" : "until Ctrl-C");
    }
    bool alive = record(s), detach_failed = false;
    double window = now_s() - t0;
    if (alive) {
        /* Stop: the hooks out, the ring read to its end. */
        bool stopped = stop_target(&s->t, idle_poll, s) == 0;
        if (stopped && !lib_mapped(s->t.pid, s->lib)) {
            /* It started another program (exec) in the window: the hooks
             * went with the old image, and the addresses memlens knows
             * (ml_attach_stop, the stack through /proc/PID/mem) are not
             * this image's. Nothing to undo; the new program goes on. */
            release_target(&s->t);
            if (!s->o.quiet)
                fprintf(stderr, "memlens: process %d started another program (exec) during the window; "
                                "recording ended there\n", (int)s->t.pid);
        } else if (stopped) {
            uint64_t restored = 0;
            int rc = remote_call(&s->t, s->t.r_stop, 0, 0, NULL, 0, &restored, idle_poll, s);
            release_target(&s->t);
            if (rc < 0) {
                fprintf(stderr, "memlens: warning: process %d: the hooks may still be in place\n", (int)s->t.pid);
                detach_failed = true;
            }
        } else {
            fprintf(stderr, "memlens: warning: process %d: could not stop it to take the hooks out; "
                            "they stay, recording into nothing\n", (int)s->t.pid);
            detach_failed = true;
        }
    } else {
        /* Its trace ends with its exit, or says that it ended without one. */
        ml_collector_root_gone(s->c);
        if (!s->o.quiet) fprintf(stderr, "memlens: process %d ended during the window\n", (int)s->t.pid);
    }
    for (int i = 0; i < 20; i++) {
        if (!ml_collector_poll(s->c)) break;
    }
    ml_collector_stop(s->c);
    if (!ml_collector_root_traced(s->c)) {
        ml_cli_error("process %d never joined the session; no trace written", (int)s->t.pid);
        goto restore_signals;
    }
    if (!s->o.quiet) print_summary(s, window);
    /* The trace is written, but the program keeps memlens' hooks: a script
     * must not take that for a clean detach (it exited 0). */
    code = detach_failed ? ML_EXIT_ERROR : ML_EXIT_OK;
restore_signals:
    for (int i = 0; i < 3; i++) sigaction(stop_signals[i], &old[i], NULL);
out:
    if (s->t.mem >= 0) close(s->t.mem);
    if (s->pidfd >= 0) close(s->pidfd);
    ml_collector_free(s->c);
    free(s->t.xstate);
    free(s);
    return code;
}
