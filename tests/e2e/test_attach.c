/* test_attach.c - `memlens attach PID` on a running fixture (fx_attach).
 *
 * The fixture allocates before the attach, then does exactly known steps
 * on command (its stdin), so the window's counts are exact: per step and
 * worker, 3 mallocs (4001, 4002, 4003 bytes, kept), calloc(5, 1001) (kept),
 * malloc(4007) freed at once, realloc(NULL, 4009) grown to 4011 (kept);
 * 'f' frees its 10 blocks of 1000 bytes made before the attach. After the
 * detach it must go on with its own output and exit status (7).
 *
 * Tests skip (with the reason) when this system refuses ptrace.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

typedef struct {
    pid_t pid;
    int in;     /* its stdin */
    FILE *out;  /* its stdout */
} fx_t;

static void fx_start_at(fx_t *f, const char *path, const char *threads);

static void fx_start(fx_t *f, const char *bin, const char *threads) {
    fx_start_at(f, h_bin(bin), threads);
}

/* The fixture at path (a copy under another name). */
static void fx_start_at(fx_t *f, const char *path, const char *threads) {
    int i[2], o[2];
    cr_assert_eq(pipe(i), 0);
    cr_assert_eq(pipe(o), 0);
    f->pid = fork();
    cr_assert_geq(f->pid, 0);
    if (f->pid == 0) {
        dup2(i[0], 0);
        dup2(o[1], 1);
        close(i[0]), close(i[1]), close(o[0]), close(o[1]);
        execl(path, path, threads, (char *)NULL);
        _exit(127);
    }
    close(i[0]);
    close(o[1]);
    f->in = i[1];
    f->out = fdopen(o[0], "r");
    char line[256];
    cr_assert(fgets(line, sizeof line, f->out), "fx_attach says ready");
    cr_assert(!strncmp(line, "ready ", 6), "%s", line);
}

/* Sends one command and returns its answer line. */
static const char *fx_cmd(fx_t *f, char c) {
    static char line[256];
    cr_assert_eq(write(f->in, &c, 1), 1);
    cr_assert(fgets(line, sizeof line, f->out), "an answer to '%c'", c);
    line[strcspn(line, "\n")] = '\0';
    return line;
}

/* Ends the fixture: its last line and its exit status. */
static int fx_finish(fx_t *f, char *last, size_t len) {
    char c = 'q';
    cr_assert_eq(write(f->in, &c, 1), 1);
    close(f->in);
    last[0] = '\0';
    char line[256];
    while (fgets(line, sizeof line, f->out)) snprintf(last, len, "%s", line);
    fclose(f->out);
    int st;
    cr_assert_eq(waitpid(f->pid, &st, 0), f->pid);
    return st;
}

typedef struct {
    pid_t pid;
    int err; /* its stderr */
} ml_t;

/* Starts `memlens attach -o TRACE PID` and waits for it to say that it is
 * recording (or to end: returns false with its stderr in *why). */
static bool attach_start(ml_t *m, const char *trace, pid_t pid, char *why, size_t len) {
    int e[2];
    cr_assert_eq(pipe(e), 0);
    char spid[32];
    snprintf(spid, sizeof spid, "%d", (int)pid);
    m->pid = fork();
    cr_assert_geq(m->pid, 0);
    if (m->pid == 0) {
        dup2(e[1], 2);
        close(e[0]), close(e[1]);
        execl(h_bin("memlens"), "memlens", "attach", "-o", trace, spid, (char *)NULL);
        _exit(127);
    }
    close(e[1]);
    m->err = e[0];
    size_t n = 0;
    why[0] = '\0';
    while (n < len - 1) {
        ssize_t k = read(m->err, why + n, len - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
        why[n] = '\0';
        if (strstr(why, "recording until Ctrl-C")) return true;
    }
    return false;
}

static int attach_stop(ml_t *m, char *err, size_t len) {
    kill(m->pid, SIGINT);
    size_t n = strlen(err);
    ssize_t k;
    while (n < len - 1 && (k = read(m->err, err + n, len - 1 - n)) > 0) n += (size_t)k;
    err[n] = '\0';
    close(m->err);
    int st;
    cr_assert_eq(waitpid(m->pid, &st, 0), m->pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Whether this system lets us trace a process we did not start as a
 * tracer (Yama, seccomp, containers): checked on a child, like the real
 * case. Skips the test when not, saying why. */
static void skip_unless_ptrace(void) {
    pid_t p = fork();
    if (p == 0) {
        pause();
        _exit(0);
    }
    long r = ptrace(PTRACE_SEIZE, p, 0, 0);
    int e = errno;
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    if (r < 0) cr_skip_test("ptrace is not permitted here (%s): memlens attach cannot be tested", strerror(e));
}

static void attach_window(const char *fixture, const char *threads, int workers) {
    skip_unless_ptrace();
    char trace[4096], name[256];
    snprintf(name, sizeof name, "%s%s.mlt", fixture, workers ? "_mt" : "");
    snprintf(trace, sizeof trace, "%s", h_tmp(name));
    fx_t f;
    fx_start(&f, fixture, threads);
    cr_assert_str_eq(fx_cmd(&f, 's'), "step 1", "a step before the attach (not recorded)");
    ml_t m;
    char err[8192];
    cr_assert(attach_start(&m, trace, f.pid, err, sizeof err), "memlens attach: %s", err);
    const int steps = 3;
    for (int i = 0; i < steps; i++) {
        char want[32];
        snprintf(want, sizeof want, "step %d", i + 2);
        cr_assert_str_eq(fx_cmd(&f, 's'), want);
    }
    cr_assert_str_eq(fx_cmd(&f, 'f'), "freed");
    int rc = attach_stop(&m, err, sizeof err);
    cr_assert_eq(rc, 0, "memlens attach: %s", err);
    /* After the detach: not recorded, and the program goes on. */
    cr_assert_str_eq(fx_cmd(&f, 's'), "step 5");
    char last[256];
    int st = fx_finish(&f, last, sizeof last);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 7, "its own exit status (status 0x%x)", st);
    int w = workers ? workers : 1;
    char want[128];
    snprintf(want, sizeof want, "bye steps=5 blocks=%d checksum=%d\n", 5 * 5 * w, 5 * w);
    cr_assert_str_eq(last, want, "its own output");

    h_trace_t t;
    h_trace_load(&t, trace);
    uint64_t n = (uint64_t)steps * w;
    for (uint64_t size = 4001; size <= 4003; size++)
        cr_expect_eq(h_allocs_of_size(&t, size), n, "malloc(%lu) in the window", (unsigned long)size);
    cr_expect_eq(h_allocs_of_size(&t, 5005), n, "calloc(5, 1001)");
    cr_expect_eq(h_allocs_of_size(&t, 4007), n, "the temporary malloc(4007)");
    cr_expect_eq(h_allocs_of_size(&t, 4009), n, "realloc(NULL, 4009)");
    cr_expect_eq(h_allocs_of_size(&t, 4011), n, "realloc to 4011");
    cr_expect_eq(h_allocs_of_size(&t, 1000), 0, "nothing from before the attach");
    cr_expect_eq(t.pid, (uint32_t)f.pid);
    h_trace_free(&t);

    ml_analysis_t *a;
    char aerr[512];
    cr_assert_eq(ml_analysis_new(&a), 0);
    cr_assert_eq(ml_analysis_load(a, trace, aerr, sizeof aerr), 0, "%s", aerr);
    cr_assert_eq(ml_analysis_build(a, NULL, aerr, sizeof aerr), 0, "%s", aerr);
    const ml_totals_t *tt = ml_analysis_totals(a);
    void *probe = malloc(1000); /* the same glibc: the usable size of a 1000-byte block */
    cr_expect(ml_analysis_process(a)->options & ML_OPT_ATTACHED, "the trace is marked attached");
    cr_expect_eq(tt->unknown_frees, 10, "the 10 blocks of before the attach");
    cr_expect_eq(tt->unknown_free_bytes, 10 * malloc_usable_size(probe), "their usable bytes (%lu)", (unsigned long)tt->unknown_free_bytes);
    cr_expect_eq(tt->heap_blocks, 5 * n, "live at detach: 5 blocks per step");
    cr_expect_eq(tt->heap_bytes, (4001 + 4002 + 4003 + 5005 + 4011) * n);
    cr_expect_eq(tt->free_calls, n + 10, "the temporary frees and the 10 unknown ones");
    free(probe);
    ml_analysis_free(a);

    const char *argv[] = {h_bin("memlens"), "report", trace, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "\nattached at "), "%s", r.out);
    cr_expect(strstr(r.out, "frees of blocks allocated before the attach: 10 ("), "%s", r.out);
    cr_expect(strstr(r.out, "leaks: not reported"), "%s", r.out);
    cr_expect(!strstr(r.out, "leaked at exit"), "%s", r.out);
    cr_expect(strstr(r.out, "growth by site"), "%s", r.out);
    h_run_free(&r);

    /* The gates judge what the window knows (docs/recorder.md, attach):
     * --fail-on-leak the growth live at the detach, not a refusal of the
     * trace as one of a program still running. */
    const char *gate[] = {h_bin("memlens"), "report", trace, "--fail-on-leak", "0", NULL};
    h_run(&r, gate);
    cr_expect_eq(r.status, 3, "%s", r.err);
    cr_expect(strstr(r.err, "gate exceeded: leaks"), "%s", r.err);
    cr_expect(!strstr(r.err, "incomplete"), "%s", r.err);
    h_run_free(&r);
}

Test(attach, single_thread_window, .timeout = 120) {
    attach_window("fx_attach", "0", 0);
}

Test(attach, four_threads_window, .timeout = 120) {
    attach_window("fx_attach", "4", 4);
}

/* After the program ended in the window: the rest of memlens attach's
 * stderr into err (after what is there), and memlens ending by itself,
 * status 0, saying so. */
static void ends_by_itself(ml_t *m, char *err, size_t len) {
    size_t n = strlen(err);
    ssize_t k;
    while (n < len - 1 && (k = read(m->err, err + n, len - 1 - n)) > 0) n += (size_t)k;
    err[n] = '\0';
    close(m->err);
    int mst;
    cr_assert_eq(waitpid(m->pid, &mst, 0), m->pid);
    cr_expect(WIFEXITED(mst) && WEXITSTATUS(mst) == 0, "memlens attach ends by itself (status 0x%x): %s", mst, err);
    cr_expect(strstr(err, "ended during the window"), "%s", err);
}

/* fx_attach started and past its first step, memlens attached to it (its
 * trace at h_tmp(name), into trace), and the program's second step done
 * while attached. */
static void attach_for_two_steps(fx_t *f, ml_t *m, char *trace, size_t tlen, const char *name, char *err,
                                 size_t errlen) {
    snprintf(trace, tlen, "%s", h_tmp(name));
    fx_start(f, "fx_attach", "0");
    cr_assert_str_eq(fx_cmd(f, 's'), "step 1");
    cr_assert(attach_start(m, trace, f->pid, err, errlen), "memlens attach: %s", err);
    cr_assert_str_eq(fx_cmd(f, 's'), "step 2");
}

/* A program that exits during the window: memlens attach ends by itself,
 * and the report says the program exited (it used to say "the program did
 * not exit while attached (no exit scan ...)" of a program it had scanned
 * at its exit). Leaks are still not reported: the blocks of before the
 * attach are unknown. */
Test(attach, a_program_that_exits_in_the_window, .timeout = 120) {
    skip_unless_ptrace();
    char trace[4096], err[8192];
    fx_t f;
    ml_t m;
    attach_for_two_steps(&f, &m, trace, sizeof trace, "exits.mlt", err, sizeof err);
    char last[256];
    int st = fx_finish(&f, last, sizeof last);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 7, "its own exit status (status 0x%x)", st);
    ends_by_itself(&m, err, sizeof err);

    const char *argv[] = {h_bin("memlens"), "report", trace, "--no-advisor", NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "still live at its exit\n"), "%s", r.out);
    cr_expect(strstr(r.out, "leaks: not reported: the program exited while attached, but the blocks it "
                            "allocated before the attach are unknown"), "%s", r.out);
    cr_expect(!strstr(r.out, "did not exit"), "%s", r.out);
    h_run_free(&r);
}

/* A program killed by SIGKILL during the window: memlens attach ends by
 * itself and says so, and so must the trace, for every report of it. It
 * said nothing: its end was "unknown" as after any detach, and the report
 * said "the program did not exit while attached" and "still live at
 * detach" of a program that was dead and never detached from. The two
 * steps of the window are in it (5 blocks each, 4001..4011 bytes). */
Test(attach, a_program_killed_in_the_window_is_said, .timeout = 120) {
    skip_unless_ptrace();
    char trace[4096], err[8192];
    fx_t f;
    ml_t m;
    attach_for_two_steps(&f, &m, trace, sizeof trace, "killed.mlt", err, sizeof err);
    cr_assert_str_eq(fx_cmd(&f, 's'), "step 3");
    cr_assert_eq(kill(f.pid, SIGKILL), 0);
    int st;
    cr_assert_eq(waitpid(f.pid, &st, 0), f.pid);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "killed (status 0x%x)", st);
    close(f.in);
    fclose(f.out);
    ends_by_itself(&m, err, sizeof err);

    h_trace_t t;
    h_trace_load(&t, trace);
    for (uint64_t size = 4001; size <= 4003; size++)
        cr_expect_eq(h_allocs_of_size(&t, size), 2, "malloc(%lu) in the window", (unsigned long)size);
    h_trace_free(&t);

    const char *argv[] = {h_bin("memlens"), "report", trace, "--no-advisor", NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "grown in the window: 41.1 KiB in 10 blocks allocated while attached and still live "
                            "at its end\n"), "%s", r.out);
    cr_expect(strstr(r.out, "leaks: not reported: the program ended during the window without an exit memlens "
                            "saw (killed by SIGKILL?)"), "%s", r.out);
    char said[256];
    snprintf(said, sizeof said, "  " ML_UNTRACED_ENDED_PREFIX "process %d (", (int)f.pid);
    cr_expect(strstr(r.out, said), "the trace says it: %s", r.out);
    cr_expect(!strstr(r.out, "did not exit"), "%s", r.out);
    cr_expect(!strstr(r.out, "detach"), "%s", r.out);
    h_run_free(&r);
}

/* A non-PIE program with canonical PLT entries for malloc & co. (Debian's
 * python3.11): the lookups answer its PLT stubs, which the attach took for
 * the allocator's module and skipped the program: not one call recorded. */
Test(attach, non_pie_program_with_canonical_plt_entries, .timeout = 120) {
    attach_window("fx_attach_nopie", "0", 0);
}

Test(attach, no_such_process_exits_2, .timeout = 60) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0); /* a pid that was just freed */
    char spid[32];
    snprintf(spid, sizeof spid, "%d", (int)p);
    const char *argv[] = {h_bin("memlens"), "attach", "-o", h_tmp("none.mlt"), spid, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 2, "%s", r.err);
    cr_expect(strstr(r.err, "no such process"), "%s", r.err);
    cr_expect(!h_file_exists(h_tmp("none.mlt")), "no trace");
    h_run_free(&r);
}

/* A process already under ptrace (this test is its tracer): the kernel
 * would say EPERM; memlens says who traces it. */
Test(attach, already_traced_process_exits_2, .timeout = 60) {
    skip_unless_ptrace();
    pid_t p = fork();
    if (p == 0) {
        pause();
        _exit(0);
    }
    cr_assert_eq(ptrace(PTRACE_SEIZE, p, 0, 0), 0, "%s", strerror(errno));
    char spid[32];
    snprintf(spid, sizeof spid, "%d", (int)p);
    const char *argv[] = {h_bin("memlens"), "attach", "-o", h_tmp("traced.mlt"), spid, NULL};
    h_run_t r;
    h_run(&r, argv);
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    cr_expect_eq(r.status, 2, "%s", r.err);
    cr_expect(strstr(r.err, "already traced by process"), "%s", r.err);
    h_run_free(&r);
}

/* A static program has no dlopen: refused before anything is touched
 * (fx_attach_static is fx_attach linked -static). */
Test(attach, static_program_exits_2, .timeout = 60) {
    fx_t f;
    fx_start(&f, "fx_attach_static", "0");
    char spid[32];
    snprintf(spid, sizeof spid, "%d", (int)f.pid);
    const char *argv[] = {h_bin("memlens"), "attach", "-o", h_tmp("static.mlt"), spid, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 2, "%s", r.err);
    cr_expect(strstr(r.err, "statically linked"), "%s", r.err);
    h_run_free(&r);
    cr_expect_str_eq(fx_cmd(&f, 's'), "step 1", "untouched");
    char last[256];
    int st = fx_finish(&f, last, sizeof last);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 7);
}

/* A main thread blocked in a system call when memlens attaches and when it
 * detaches: the call ends as it does without memlens. The attach's stop
 * made epoll_wait fail with EINTR (signal(7): calls a stopped thread does
 * not restart), and the detach's nanosleep (in ml_attach_stop) reset the
 * restart of an interrupted nanosleep or futex wait, which then failed
 * with EINTR. */
static void attach_during(const char *mode) {
    skip_unless_ptrace();
    fx_t f;
    fx_start(&f, "fx_attach_wait", mode);
    char spid[32], name[64];
    snprintf(spid, sizeof spid, "%d", (int)f.pid);
    snprintf(name, sizeof name, "wait_%s.mlt", mode);
    const char *argv[] = {h_bin("memlens"), "attach", "-q", "--duration", "1", "-o", h_tmp(name), spid, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 0, "%s: %s", mode, r.err);
    h_run_free(&r);
    char line[256] = "";
    cr_expect(fgets(line, sizeof line, f.out) != NULL, "%s: its result", mode);
    fclose(f.out);
    close(f.in);
    int st;
    cr_assert_eq(waitpid(f.pid, &st, 0), f.pid);
    char want[64];
    snprintf(want, sizeof want, "ok %s\n", mode);
    cr_expect_str_eq(line, want);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status 0x%x", mode, st);
}

Test(attach, a_blocking_call_ends_as_without_memlens, .timeout = 60) {
    attach_during("epoll");
    attach_during("nanosleep");
    attach_during("futex");
}

/* The thread's own state after memlens' calls into it (the dlopen, the
 * start, the stop): its errno (EAGAIN was left there), its signal mask and
 * handlers (the fault that ends each call unblocked SIGSEGV for good and
 * reset its handler to SIG_DFL), and no handler of the program's runs in
 * the middle of a call (one that siglongjmps left the call: memlens waited
 * for its end until the program exited, then exited 1). */
Test(attach, the_thread_keeps_its_errno_mask_and_handlers, .timeout = 60) {
    attach_during("errno");
    attach_during("sigmask");
    attach_during("sigjmp");
}

/* A program in strict seccomp mode: the first system call of the injected
 * dlopen killed it (SIGKILL). Refused, untouched. */
Test(attach, a_program_in_strict_seccomp_mode_exits_2, .timeout = 60) {
    skip_unless_ptrace();
    fx_t f;
    fx_start(&f, "fx_attach_wait", "strict");
    char spid[32];
    snprintf(spid, sizeof spid, "%d", (int)f.pid);
    const char *argv[] = {h_bin("memlens"), "attach", "-q", "-o", h_tmp("strict.mlt"), spid, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 2, "%s", r.err);
    cr_expect(strstr(r.err, "strict seccomp mode"), "%s", r.err);
    h_run_free(&r);
    char line[256] = "";
    cr_expect(fgets(line, sizeof line, f.out) != NULL);
    cr_expect_str_eq(line, "ok strict\n");
    fclose(f.out);
    close(f.in);
    int st;
    cr_assert_eq(waitpid(f.pid, &st, 0), f.pid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
}

/* A program in another PID namespace (`unshare -fp`): the library, which
 * checks memlens' liveness by its pid, could not see memlens there, wrote
 * "memlens (pid N) is gone; process 1 is not recorded" into the program's
 * stderr, and memlens exited 1. Refused before anything is touched. */
Test(attach, a_program_in_another_pid_namespace_exits_2, .timeout = 60) {
    skip_unless_ptrace();
    int o[2], e[2];
    cr_assert_eq(pipe(o), 0);
    cr_assert_eq(pipe(e), 0);
    pid_t u = fork();
    if (u == 0) {
        dup2(o[1], 1);
        dup2(e[1], 2);
        close(o[0]), close(o[1]), close(e[0]), close(e[1]);
        execlp("unshare", "unshare", "-fp", h_bin("fx_attach_wait"), "nanosleep", (char *)NULL);
        _exit(127);
    }
    close(o[1]);
    close(e[1]);
    FILE *out = fdopen(o[0], "r");
    char line[256] = "", path[96], kids[64] = "";
    if (!fgets(line, sizeof line, out)) {
        waitpid(u, NULL, 0);
        cr_skip_test("unshare -fp is not permitted here");
    }
    cr_assert_str_eq(line, "ready 1\n", "pid 1 of its namespace");
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)u, (int)u);
    FILE *c = fopen(path, "r");
    cr_assert(c && fgets(kids, sizeof kids, c), "unshare's child");
    fclose(c);
    pid_t pid = (pid_t)atoi(kids);
    char spid[32];
    snprintf(spid, sizeof spid, "%d", (int)pid);
    const char *argv[] = {h_bin("memlens"), "attach", "-q", "--duration", "1", "-o", h_tmp("pidns.mlt"), spid, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 2, "%s", r.err);
    cr_expect(strstr(r.err, "another PID namespace"), "%s", r.err);
    h_run_free(&r);
    cr_expect(fgets(line, sizeof line, out) != NULL);
    cr_expect_str_eq(line, "ok nanosleep\n");
    fclose(out);
    char err[1024];
    ssize_t n = read(e[0], err, sizeof err - 1);
    err[n > 0 ? n : 0] = '\0';
    close(e[0]);
    cr_expect_str_eq(err, "", "nothing in the program's stderr");
    int st;
    cr_assert_eq(waitpid(u, &st, 0), u);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
}

/* A main thread inside fork, interrupted in fork's clone (fx_attach_wait
 * fork: most of its time goes there), where glibc holds every malloc
 * arena's lock: the injected dlopen's malloc waited for good for the lock
 * its own thread held, and memlens and the program hung. memlens now waits
 * until the thread has left fork. A main thread forking in a loop beside
 * allocating threads hung 11 attaches in 20, interrupted in fork's clone
 * or in its release of malloc's locks. */
Test(attach, a_main_thread_inside_fork, .timeout = 60) {
    attach_during("fork");
}

/* Copies a file (no criterion calls: also run in a forked child). */
static int copy_file(const char *from, const char *to) {
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    char buf[65536];
    ssize_t n = 0;
    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) n = -1;
    int rc = in >= 0 && out >= 0 && n == 0 ? 0 : -1;
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return rc;
}

/* libmemlens.so replaced while memlens is attached (a rebuild, an
 * upgrade): the program's mapping of it is named "PATH (deleted)". memlens
 * took that for an exec of the program, left the hooks in (recording into
 * nothing) and exited 0 saying the program had started another one. */
Test(attach, a_library_replaced_in_the_window_is_no_exec, .timeout = 60) {
    skip_unless_ptrace();
    char lib[4096];
    snprintf(lib, sizeof lib, "%s", h_tmp("libmemlens.so"));
    cr_assert_eq(copy_file(h_bin("libmemlens.so"), lib), 0);
    fx_t f;
    fx_start(&f, "fx_attach_wait", "futex");
    char spid[32];
    snprintf(spid, sizeof spid, "%d", (int)f.pid);
    pid_t kid = fork();
    cr_assert(kid >= 0);
    if (kid == 0) { /* in the window: the file replaced */
        usleep(600000);
        _exit(unlink(lib) == 0 && copy_file(h_bin("libmemlens.so"), lib) == 0 ? 0 : 1);
    }
    cr_assert_eq(setenv("ML_PRELOAD_LIB", lib, 1), 0);
    const char *argv[] = {h_bin("memlens"), "attach", "--duration", "1.5", "-o", h_tmp("replaced.mlt"), spid, NULL};
    h_run_t r;
    h_run(&r, argv);
    unsetenv("ML_PRELOAD_LIB");
    int kst;
    cr_assert_eq(waitpid(kid, &kst, 0), kid);
    cr_expect(WIFEXITED(kst) && WEXITSTATUS(kst) == 0, "the library was replaced");
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(!strstr(r.err, "started another program"), "no exec: %s", r.err);
    cr_expect(strstr(r.err, "memlens: attached to process") && strstr(r.err, " for 1.5 s: "),
              "the detach's summary: %s", r.err);
    h_run_free(&r);
    char line[256] = "";
    cr_expect(fgets(line, sizeof line, f.out) != NULL, "its result");
    fclose(f.out);
    close(f.in);
    int st;
    cr_assert_eq(waitpid(f.pid, &st, 0), f.pid);
    cr_expect_str_eq(line, "ok futex\n");
}

/* A program whose file name holds an escape (its owner chose it): the
 * lines that name it on attach and on detach show '?' for the control
 * bytes; they sent them to root's terminal as they were. */
Test(attach, the_programs_name_reaches_the_terminal_without_control_bytes, .timeout = 60) {
    skip_unless_ptrace();
    char exe[4096];
    snprintf(exe, sizeof exe, "%s", h_tmp("fx\033]0;x\007\302\233wait"));
    cr_assert_eq(copy_file(h_bin("fx_attach_wait"), exe), 0);
    cr_assert_eq(chmod(exe, 0755), 0);
    fx_t f;
    fx_start_at(&f, exe, "futex");
    char spid[32];
    snprintf(spid, sizeof spid, "%d", (int)f.pid);
    const char *argv[] = {h_bin("memlens"), "attach", "--duration", "1", "-o", h_tmp("escname.mlt"), spid, NULL};
    h_run_t r;
    h_run(&r, argv);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "fx?]0;x??wait); recording ") != NULL, "the attach line: %s", r.err);
    cr_expect(strstr(r.err, "fx?]0;x??wait) for ") != NULL, "the detach line: %s", r.err);
    cr_expect(!strchr(r.err, '\033') && !strchr(r.err, '\007') && !strstr(r.err, "\302\233"),
              "no control byte: %s", r.err);
    h_run_free(&r);
    char line[256] = "";
    cr_expect(fgets(line, sizeof line, f.out) != NULL, "its result");
    fclose(f.out);
    close(f.in);
    int st;
    cr_assert_eq(waitpid(f.pid, &st, 0), f.pid);
    cr_expect_str_eq(line, "ok futex\n");
}

/* A main thread waiting for stdout's lock, which another thread holds for
 * 8 s: memlens took every stop in glibc's lock wait for unsafe and gave up
 * (attach, detach) after 5 s; a wait outside fork is safe. */
Test(attach, a_main_thread_waiting_for_stdouts_lock, .timeout = 60) {
    attach_during("stdiolock");
}

/* A return address into glibc's fork left in a live frame of the main
 * thread (blocked in nanosleep): memlens took it for a thread inside fork
 * at every stop and gave up after 5 s. It is believed for half a second. */
Test(attach, a_stale_fork_address_on_the_stack, .timeout = 60) {
    attach_during("stalefork");
}

/* A main thread running on a small stack of its own (a coroutine's, 4 KiB):
 * memlens' calls ran on it, and the injected dlopen wrote 1,935 bytes past
 * it, into the program's heap. They run on a stack memlens maps for them. */
Test(attach, a_main_thread_on_a_small_stack, .timeout = 60) {
    attach_during("coroutine");
}

/* A program that starts another (exec) in the window: memlens has nothing
 * to undo (the hooks went with the old image) and exits 0; it wrote into
 * the new image through the old one's /proc/PID/mem, failed, and exited 1
 * saying the hooks might still be in place. */
Test(attach, a_program_that_execs_in_the_window, .timeout = 60) {
    attach_during("exec");
}

/* The descriptors of process pid, "NUMBER -> TARGET " each, by number. */
static void fd_list(pid_t pid, char *out, size_t len) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    out[0] = '\0';
    for (int fd = 0; fd < 4096; fd++) {
        char path[96], target[512];
        snprintf(path, sizeof path, "%s/%d", dir, fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n < 0) continue;
        target[n] = '\0';
        snprintf(out + strlen(out), len - strlen(out), "%d -> %s\n", fd, target);
    }
}

/* After the detach the program holds the descriptors it held before: the
 * pipe libunwind opened while it initialised in the program took its
 * lowest free descriptors (3 and 4) and kept them for good, so its next
 * open() returned 5. */
Test(attach, the_program_keeps_its_descriptors, .timeout = 120) {
    skip_unless_ptrace();
    fx_t f;
    fx_start(&f, "fx_attach", "0");
    char before[8192], after[8192];
    fd_list(f.pid, before, sizeof before);
    ml_t m;
    char err[8192];
    cr_assert(attach_start(&m, h_tmp("fds.mlt"), f.pid, err, sizeof err), "memlens attach: %s", err);
    cr_assert_str_eq(fx_cmd(&f, 's'), "step 1");
    cr_assert_eq(attach_stop(&m, err, sizeof err), 0, "memlens attach: %s", err);
    fd_list(f.pid, after, sizeof after);
    cr_expect_str_eq(after, before, "its descriptors after the detach");
    char last[256];
    int st = fx_finish(&f, last, sizeof last);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 7);
}

/* A second attach is refused as the other refusals are, with exit 2 (it
 * exited 1), and the program goes on. */
Test(attach, a_second_attach_exits_2, .timeout = 60) {
    skip_unless_ptrace();
    fx_t f;
    fx_start(&f, "fx_attach", "0");
    char spid[32];
    snprintf(spid, sizeof spid, "%d", (int)f.pid);
    const char *first[] = {h_bin("memlens"), "attach", "-q", "--duration", "0.3", "-o", h_tmp("once1.mlt"), spid, NULL};
    h_run_t r;
    h_run(&r, first);
    cr_expect_eq(r.status, 0, "%s", r.err);
    h_run_free(&r);
    const char *second[] = {h_bin("memlens"), "attach", "-q", "--duration", "0.3", "-o", h_tmp("once2.mlt"), spid, NULL};
    h_run(&r, second);
    cr_expect_eq(r.status, 2, "%s", r.err);
    cr_expect(strstr(r.err, "it attaches once per process"), "%s", r.err);
    h_run_free(&r);
    cr_expect_str_eq(fx_cmd(&f, 's'), "step 1", "the program goes on");
    char last[256];
    int st = fx_finish(&f, last, sizeof last);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 7);
}
