/* main.c - `memlens`: dispatch to the subcommands. */
#include "ml_cli.h"
#include "ml_config.h"
#include "ml_options.h"
#include "ml_outfile.h"
#include "ml_trace_format.h"
#include "ml_viewer.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* Errors quote paths, and some of those come from a directory's listing or
 * a trace (a trace file named "x\033]0;...\a.mlt" in a --follow-fork
 * folder): the message goes out without control bytes, as the warnings
 * that quote a trace's strings do (trace/text_clean.c). */
void ml_cli_error(const char *fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *msg = n >= 0 ? malloc(2 * ((size_t)n + 2)) : NULL; /* the message, then its safe copy */
    if (msg) {
        vsnprintf(msg, (size_t)n + 1, fmt, again);
        fprintf(stderr, "memlens: error: %s\n", ml_cli_safe(msg, msg + n + 2, (size_t)n + 2));
    } else {
        fputs("memlens: error: ", stderr); /* no memory for a copy: as it is */
        vfprintf(stderr, fmt, again);
        fputc('\n', stderr);
    }
    va_end(again);
    free(msg);
}

/* A byte count with an optional k, M or G suffix (powers of 1024): the
 * environment's syntax (ml_options.c), so options and variables agree. */
int ml_parse_bytes(const char *s, uint64_t *out) {
    return ml_parse_uint(s, out);
}

/* The resolved directory of path and its last name, joined. */
static bool canonical(const char *path, char *out, size_t len) {
    char d[PATH_MAX], b[PATH_MAX], dir[PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    snprintf(b, sizeof b, "%s", path);
    if (!realpath(dirname(d), dir)) return false;
    int n = snprintf(out, len, "%s/%s", dir, basename(b));
    return n > 0 && (size_t)n < len;
}

const char *ml_cli_out_name(const char *path) {
    return path && ml_outfile_own_fd(path) == 1 ? "-" : path;
}

char ml_cli_proc_state(pid_t pid) {
    char path[48] = "/proc/", buf[512];
    size_t n = 6;
    char num[16], *e = num + sizeof num;
    unsigned v = (unsigned)pid;
    do *--e = (char)('0' + v % 10), v /= 10; while (v);
    while (e < num + sizeof num) path[n++] = *e++;
    memcpy(path + n, "/stat", 6);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) return 0;
    buf[r] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    return p && p[1] == ' ' ? p[2] : 0;
}

bool ml_cli_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb) return false;
    char ca[PATH_MAX + 1], cb[PATH_MAX + 1];
    return canonical(a, ca, sizeof ca) && canonical(b, cb, sizeof cb) && !strcmp(ca, cb);
}

bool ml_cli_output_clobbers_input(const char *cmd, const char *option, const char *out,
                                  const char *const *inputs, size_t ninputs) {
    if (!out || !strcmp(out, "-")) return false;
    for (size_t i = 0; i < ninputs; i++) {
        struct stat st;
        if (stat(inputs[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            /* a merged report reads every *.mlt file of the directory */
            size_t n = strlen(out);
            char od[PATH_MAX], in[PATH_MAX], o2[PATH_MAX];
            snprintf(o2, sizeof o2, "%s", out);
            if (n >= 4 && !strcmp(out + n - 4, ".mlt") && realpath(dirname(o2), od) && realpath(inputs[i], in) &&
                !strcmp(od, in)) {
                ml_cli_error("%s: %s %s is a trace file of %s, an input of this report: it would be "
                             "replaced; give another name",
                             cmd, option, out, inputs[i]);
                return true;
            }
        } else if (ml_cli_same_file(out, inputs[i])) {
            ml_cli_error("%s: %s %s is the trace %s: it would be replaced by the report; give another name",
                         cmd, option, out, inputs[i]);
            return true;
        }
    }
    return false;
}

static void usage(FILE *f) {
    fputs("usage: memlens COMMAND [ARGS]\n"
          "\n"
          "  run [-o FILE] [--follow-fork] [--sample BYTES] [--unwind libunwind|fp] [--depth N] [--live] -- PROG [ARGS...]\n"
          "                 record every heap allocation of PROG into a trace (.mlt)\n"
          "  attach [-o FILE] [--duration SECONDS] [-q] PID\n"
          "                 record a running process from now until Ctrl-C or SECONDS (x86-64)\n"
          "  report FILE [--json OUT] [--html OUT] [--folded OUT] [--fail-on-leak BYTES] [--max-peak BYTES]\n"
          "                 analyse a trace; CI gates exit 3 when exceeded\n"
          "  diff BASE NEW [--json OUT] [--fail-on-increase PERCENT]\n"
          "                 per-site deltas between two traces\n"
          "  view FILE      browse a trace in the terminal UI (keys: ?; docs/viewer.md)\n"
          "  dump FILE      print every record of a trace as text\n"
          "  --version      print the version and build options\n"
          "\n"
          "Exit codes: 0 ok, 1 memlens error, 2 usage, 3 CI gate exceeded; `run` exits with the\n"
          "program's own status (128+signal when it was killed).\n",
          f);
}

/* The analysis commands run with glibc's malloc in transparent huge pages.
 *
 * A big report is bound by page faults on this kind of machine: the live set,
 * the advisor's tables and the page's buckets are hundreds of MB touched once,
 * and a virtual machine's fault is dear (docs/benchmarks.md, "Fifth session
 * of 2026-12-05"). The arrays memlens sizes itself are advised already
 * (ml_huge_alloc); the rest are malloc's own heap and chunks, which glibc
 * advises only with the tunable glibc.malloc.hugetlb=1, read when the
 * program starts. So `report`, `view` and `diff` start themselves once more
 * with it added to GLIBC_TUNABLES, and the restarted process puts the
 * variable back as it found it (they start no programs, but the environment
 * stays the user's all the same). Measured: a 2.5 M-block report 0.94 s
 * instead of 1.4-2.0 s (50 k page faults to 12 k), cppcheck's 0.90 s
 * instead of 1.00 s, clang-format's 1.7-1.9 s instead of 2.1-2.2 s.
 *
 * Not done with ML_HUGE_PAGES=0, nor when it cannot help or would get in
 * the way: the kernel's huge pages are off or already on for every mapping
 * ("always"); the user's GLIBC_TUNABLES says glibc.malloc.hugetlb already;
 * memlens runs under valgrind (its preload in LD_PRELOAD: the new image
 * would run outside it) or was started through ld.so; a sanitizer build
 * (its allocator is not glibc's).
 * When the new start fails, the command goes on as it is.
 *
 * Nor for small traces: the new start costs a second exec and the loading
 * of memlens' libraries again, and a huge page is 2 MiB zeroed at its first
 * touch, about 1.5 ms of a report that takes 10 (git's 240 KB trace: 10.5
 * against 12.0 ms, `perf stat -r 30`), and a report of cppcheck's 540 KB
 * trace (2 M calls) took as long either way. So it is done only when one of
 * the arguments is a directory or a trace of at least HUGE_MIN_BYTES (a
 * file that starts with the trace's magic: the JSON or the page an earlier
 * report left under the output's name does not count). */
#define HUGE_MIN_BYTES (1u << 20)
#define HUGE_MARK "ML__HUGE_RESTART" /* "-": GLIBC_TUNABLES was unset; "=V": it was V */

static bool thp_on_request(void) {
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
    if (!f) return false;
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    return ok && strstr(buf, "[madvise]") != NULL;
}

static bool big_input(char **argv) {
    for (char **a = argv + 2; *a; a++) {
        struct stat st;
        if ((*a)[0] == '-' || stat(*a, &st) < 0) continue;
        if (S_ISDIR(st.st_mode)) return true;
        if (!S_ISREG(st.st_mode) || st.st_size < HUGE_MIN_BYTES) continue;
        /* A trace, not an output file left by an earlier report. */
        char magic[ML_TRACE_MAGIC_LEN];
        int fd = open(*a, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        bool trace = fd >= 0 && read(fd, magic, sizeof magic) == (ssize_t)sizeof magic &&
                     !memcmp(magic, ML_TRACE_MAGIC, ML_TRACE_MAGIC_LEN);
        if (fd >= 0) close(fd);
        if (trace) return true;
    }
    return false;
}

static void restart_with_huge_pages(char **argv) {
    const char *mark = getenv(HUGE_MARK);
    if (mark) { /* the restarted process: the environment back as it was */
        if (mark[0] == '=') setenv("GLIBC_TUNABLES", mark + 1, 1);
        else unsetenv("GLIBC_TUNABLES");
        unsetenv(HUGE_MARK);
        return;
    }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return;
#endif
    const char *pre = getenv("LD_PRELOAD"), *tun = getenv("GLIBC_TUNABLES");
    /* AT_BASE 0: no interpreter was loaded for us, so the dynamic linker is
     * the program the kernel ran (`ld.so memlens report ...`), and
     * /proc/self/exe is ld.so, which would take "report" for the program. */
    if (!ml_option_bool(ML_ENV_HUGE_PAGES) || (pre && strstr(pre, "vgpreload")) ||
        (tun && strstr(tun, "glibc.malloc.hugetlb")) || !getauxval(AT_BASE) || !thp_on_request() ||
        !big_input(argv))
        return;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return;
    self[n] = '\0';
    size_t len = (tun ? strlen(tun) : 0) + 32;
    char *val = malloc(len), *was = malloc(len);
    if (!val || !was) goto out;
    snprintf(val, len, "%s%sglibc.malloc.hugetlb=1", tun ? tun : "", tun && *tun ? ":" : "");
    snprintf(was, len, "%s%s", tun ? "=" : "-", tun ? tun : "");
    if (setenv(HUGE_MARK, was, 1) == 0 && setenv("GLIBC_TUNABLES", val, 1) == 0) execv(self, argv);
    /* not restarted: as it was */
    if (tun) setenv("GLIBC_TUNABLES", was + 1, 1);
    else unsetenv("GLIBC_TUNABLES");
    unsetenv(HUGE_MARK);
out:
    free(val);
    free(was);
}

struct sigaction ml_cli_old_xfsz;

/* What a command printed on stdout (a summary, `dump`'s records, a report
 * given "-") reaches it only when stdout takes it: `memlens report T >
 * /dev/full` exited 0 with nothing written. At exit, as coreutils' tools do,
 * the rest is flushed, and a write that failed is said and turns the exit
 * status into 1. A report given "-" says its own failure (ml_out_commit),
 * and clears the stream's error, so that it is said once. */
static void close_stdout(void) {
    errno = 0;
    bool flushed = fflush(stdout) == 0;
    if (flushed && !ferror(stdout)) return;
    int e = errno;
    if (!flushed && e)
        fprintf(stderr, "memlens: error: cannot write to stdout: %s\n", strerror(e));
    else
        fprintf(stderr, "memlens: error: cannot write to stdout: a write failed; the output is incomplete\n");
    _exit(ML_EXIT_ERROR);
}

/* report and diff write their files under temporary names (ml_outfile.h).
 * Killed by SIGINT, SIGTERM or SIGHUP, they left PATH.tmp.XXXXXX behind,
 * half written. They now remove them first, then die of the same signal,
 * as a calling script expects. A signal ignored at the start (a background
 * job of a script ignores SIGINT) stays ignored. */
static void remove_partial_reports(int sig) {
    ml_outfile_unlink_live();
    raise(sig); /* SA_RESETHAND: the default action, once this handler returns */
}

static void on_fatal_signals_remove_reports(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa = {.sa_handler = remove_partial_reports, .sa_flags = SA_RESETHAND};
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) sigaction(sigs[i], &sa, NULL);
    }
}

/* Started with a standard descriptor closed (`memlens run ... 2>&-`, a
 * daemon's launcher), memlens' first open() took its number: under `run`
 * the session's control file in /dev/shm became descriptor 2, and memlens'
 * own messages ("PROG exited with status 0; 2 processes it started are
 * still running ...") were written over the control segment's header, read
 * by every traced process: memlens never ended, its files left in
 * /dev/shm. Each closed one is held by /dev/null opened the other way
 * round (stdout and stderr read-only, stdin write-only), so that its own
 * use still fails with EBADF as on a closed descriptor (a write to stdout
 * or stderr, a read from stdin: a closed stdout still makes `report` exit
 * 1); an output path that names it (`--json /dev/fd/0`) is refused as a
 * closed descriptor (ml_outfile_held_closed); and close-on-exec, so that
 * the program still starts with it closed. */
static void hold_closed_std_descriptors(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
        int got = open("/dev/null", (fd == 0 ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
        if (got >= 0 && got != fd) close(got); /* cannot be: fd is the lowest free one */
        /* An output path naming it (`--json /dev/fd/0`) is refused as a
         * closed descriptor, not written into /dev/null with exit 0. */
        if (got == fd) ml_outfile_held_closed(fd);
    }
}

/* report, view, diff and dump start no program, and hold a descriptor for
 * each trace they read and each module they symbolize (libdw keeps its
 * ELF and debug files open): `memlens report DIR` of a --follow-fork run
 * of 92 images failed with "Too many open files" under a soft limit of 20,
 * where the hard one was far above. They raise their soft limit to the
 * hard one, as `run` does for its collector (run.c, raise_nofile); a hard
 * limit stays what it is. */
static void raise_nofile_soft(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv) {
    hold_closed_std_descriptors();
    if (argc >= 2 && (!strcmp(argv[1], "report") || !strcmp(argv[1], "view") || !strcmp(argv[1], "diff") ||
                      !strcmp(argv[1], "dump")))
        raise_nofile_soft();
    if (argc >= 2 && (!strcmp(argv[1], "report") || !strcmp(argv[1], "view") || !strcmp(argv[1], "diff")))
        restart_with_huge_pages(argv);
    atexit(close_stdout);
    /* A file past the user's size limit (`ulimit -f`) is a write error
     * (EFBIG), said and cleaned up as a full disk is, not SIGXFSZ killing
     * memlens with its traces half written and its files left in /dev/shm.
     * `run` gives the program the caller's disposition back. */
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigemptyset(&ign.sa_mask);
    sigaction(SIGXFSZ, &ign, &ml_cli_old_xfsz);
    ml_options_init(ML_ENV_CLI, "");
    ml_cli_progress_install();
    if (argc < 2) {
        usage(stderr);
        return ML_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run")) return ml_cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "attach")) return ml_cmd_attach(argc - 1, argv + 1);
    if (!strcmp(cmd, "dump")) return ml_cmd_dump(argc - 1, argv + 1);
    if (!strcmp(cmd, "view")) return ml_cmd_view(argc - 1, argv + 1);
    if (!strcmp(cmd, "report") || !strcmp(cmd, "diff")) on_fatal_signals_remove_reports();
    if (!strcmp(cmd, "report")) return ml_cmd_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "diff")) return ml_cmd_diff(argc - 1, argv + 1);
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("memlens %s\nGPU (CUPTI) support: %s\n", ML_VERSION,
               ML_HAVE_CUPTI ? "yes" : "no (built without the CUDA toolkit)");
        return ML_EXIT_OK;
    }
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return ML_EXIT_OK;
    }
    ml_cli_error("unknown command '%s'", cmd);
    usage(stderr);
    return ML_EXIT_USAGE;
}
