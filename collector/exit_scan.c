/* exit_scan.c - leak reachability, read from the target at exit.
 *
 * When the traced process runs its exit handlers, libmemlens.so waits in its
 * last destructor until the collector says it is done; the process' memory
 * is intact and its program code no longer runs. The collector (its parent,
 * so ptrace access rules allow it) then:
 *
 *  1. lists the blocks still live (the collector's own analysis of the
 *     stream up to the exit record);
 *  2. reads /proc/PID/smaps and takes as roots every readable and writable
 *     mapping, private or shared (not memlens' rings, not devices), with
 *     resident (or swapped) pages - modules' .data/.bss,
 *     thread stacks, anonymous memory - except the brk heap, the heap parts
 *     of mappings that hold a live block (malloc arenas, mmapped chunks:
 *     their contents are scanned block by block, not as roots;
 *     glibc_heap_parts) and memlens' own library. Stacks are scanned from
 *     each thread's stack pointer (from /proc/PID/task/TID/syscall) upwards;
 *  3. runs the conservative pointer scan of analysis/ml_reach.h over them
 *     with process_vm_readv, and
 *  4. writes an ML_T_BLOCK_REACH record for each live block whose verdict
 *     is not the most common one, an ML_T_REACH_REST record that gives the
 *     others that one, and an ML_T_REACH_SCAN summary into the trace.
 *
 * Other threads' registers are roots too, read with ptrace where stopping
 * the thread cannot show (thread_registers); the exiting thread's are not
 * (it runs memlens' destructor), but the callee-saved registers of the frame
 * that called exit() or abort() are, as the process saved them
 * (ml_ring_hdr_t.exit_regs).
 *
 * Limits (docs/analysis.md): other threads still
 * running may store pointers during the scan, but not allocate or free: the
 * recorder holds them at their next allocation call (interpose/runtime.c,
 * ml__exit_hold); stale pointers left in dead
 * stack slots above the stack pointer or in free memory inside a root can
 * make a leak look reachable, as with every conservative scanner.
 */
#define _GNU_SOURCE
#include "collector_internal.h"
#include "ml_reach.h"
#include "ml_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SCAN_BUDGET_NS (20ull * 1000000000ull) /* the target waits at most 30 s */
#define MAX_IOV 1024
#define SCAN_THREADS 4 /* threads that read the blocks, at most */

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------- */
/* Reading the target                                                        */
/* ------------------------------------------------------------------------- */

/* Called from several threads at once (ml_reach_io_t.threads): no state
 * but the pid. */
/* A file-backed mapping of the target: what the multiple-inheritance
 * heuristic asks of a vtable address and its entries (ml_reach_io_t). */
typedef struct {
    uint64_t lo, hi;
    unsigned flags; /* ML_REACH_MAP_* */
} filemap_t;

typedef struct {
    pid_t pid;
    filemap_t *maps; /* sorted by address */
    size_t nmaps;
    const uint64_t *regs; /* other threads' registers, read at REGS_AT (thread_registers) */
    size_t nregs;
    ml_range_t *anon; /* private anonymous mappings, sorted (resident_run) */
    size_t nanon;
    int pagemap;      /* /proc/PID/pagemap, or -1 */
    uint64_t page;
} reader_t;

/* Where the scan reads the registers of the target's other threads: an
 * address no user mapping can have (the kernel's half), served from
 * reader_t.regs instead of the target's memory. */
#define REGS_AT 0xffff900000000000ull

static unsigned map_flags(void *ctx, uint64_t addr, uint64_t *end) {
    const reader_t *rd = ctx;
    size_t lo = 0, hi = rd->nmaps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rd->maps[mid].hi <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo == rd->nmaps || addr < rd->maps[lo].lo) return 0;
    *end = rd->maps[lo].hi;
    return rd->maps[lo].flags;
}

/* The target's file-backed mappings, from /proc/PID/maps (in address
 * order). Without them the heuristic that needs them is off. Its private
 * anonymous ones too, for resident_run. */
static void read_filemaps(reader_t *rd) {
    char path[64], line[PATH_MAX + 256];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)rd->pid);
    FILE *f = fopen(path, "r");
    if (!f) return;
    uint32_t cap = 0, acap = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off;
        unsigned long inode;
        char perms[8], dev[16];
        if (sscanf(line, "%llx-%llx %7s %llx %15s %lu", &lo, &hi, perms, &off, dev, &inode) != 6) continue;
        if (!inode && perms[3] == 'p' && ml_grow((void **)&rd->anon, &acap, rd->nanon + 1, sizeof *rd->anon, 0) == 0)
            rd->anon[rd->nanon++] = (ml_range_t){lo, hi};
        if (!inode) continue;
        if (ml_grow((void **)&rd->maps, &cap, rd->nmaps + 1, sizeof *rd->maps, 0) < 0) break;
        rd->maps[rd->nmaps++] = (filemap_t){lo, hi, (perms[0] == 'r' ? ML_REACH_MAP_R : 0u) |
                                                        (perms[2] == 'x' ? ML_REACH_MAP_X : 0u)};
    }
    fclose(f);
}

/* Pages of private anonymous memory that are neither in memory nor in
 * swap were never written (or were given back with MADV_DONTNEED): they
 * read as zeros. Reading them through process_vm_readv would make the
 * target's kernel back each with memory: a program that exits with eight
 * untouched 16 GiB blocks grew by 430 MB/s while the scan read them, until
 * the scan's 20 s were up (and the verdicts lost). So big blocks and roots
 * are read run by run of /proc/PID/pagemap: bit 63 present, 62 swapped.
 * Anything else (file or shared memory, no pagemap) is read whole. */
#define PAGEMAP_BATCH 4096 /* entries read at once */

static uint64_t resident_run(void *ctx, uint64_t addr, uint64_t len, bool *resident) {
    const reader_t *rd = ctx;
    *resident = true;
    if (rd->pagemap < 0 || !rd->page || !len) return len;
    size_t lo = 0, hi = rd->nanon;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rd->anon[mid].hi <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo == rd->nanon || addr < rd->anon[lo].lo) return len;
    uint64_t end = addr + len < rd->anon[lo].hi ? addr + len : rd->anon[lo].hi;
    uint64_t first = addr / rd->page, last = (end - 1) / rd->page;
    uint64_t e[PAGEMAP_BATCH];
    bool state = true;
    uint64_t pg = first;
    while (pg <= last) {
        size_t want = last - pg + 1 > PAGEMAP_BATCH ? PAGEMAP_BATCH : (size_t)(last - pg + 1);
        ssize_t r = pread(rd->pagemap, e, want * sizeof *e, (off_t)(pg * sizeof *e));
        if (r < (ssize_t)sizeof *e) { /* unreadable from here: read the rest */
            if (pg == first) return len;
            *resident = state;
            return pg * rd->page - addr;
        }
        size_t got = (size_t)r / sizeof *e;
        for (size_t k = 0; k < got; k++, pg++) {
            bool in = (e[k] >> 62) & 3u; /* present or swapped */
            if (pg == first) state = in;
            else if (in != state) {
                *resident = state;
                return pg * rd->page - addr;
            }
        }
    }
    *resident = state;
    return end - addr;
}

static int vm_read(void *ctx, ml_reach_req_t *reqs, size_t n) {
    const reader_t *rd = ctx;
    struct iovec loc[MAX_IOV], rem[MAX_IOV];
    size_t i = 0;
    while (i < n) {
        size_t k = n - i > MAX_IOV ? MAX_IOV : n - i, nloc = 0;
        for (size_t j = 0; j < k; j++) {
            /* Buffers that follow each other are one local element: the
             * kernel copies element by element, and with millions of small
             * blocks this took 10-15 % off process_vm_readv's time. Which
             * requests were read whole is counted on the remote side
             * (below). */
            if (nloc && (uint8_t *)loc[nloc - 1].iov_base + loc[nloc - 1].iov_len == reqs[i + j].buf)
                loc[nloc - 1].iov_len += reqs[i + j].len;
            else
                loc[nloc++] = (struct iovec){reqs[i + j].buf, reqs[i + j].len};
            rem[j] = (struct iovec){(void *)(uintptr_t)reqs[i + j].addr, reqs[i + j].len};
            reqs[i + j].got = 0;
        }
        ssize_t r = process_vm_readv(rd->pid, loc, nloc, rem, k, 0);
        if (r < 0) {
            if (errno == EPERM || errno == ESRCH || errno == ENOSYS) return -errno; /* reading is pointless */
            i++; /* the first element cannot be read: skip it */
            continue;
        }
        /* Transfers never split an element: whole elements were read up to
         * the first one that failed. */
        size_t j = 0;
        while (j < k && (size_t)r >= reqs[i + j].len) {
            reqs[i + j].got = reqs[i + j].len;
            r -= (ssize_t)reqs[i + j].len;
            j++;
        }
        i += j < k ? j + 1 : k;
    }
    return 0;
}

/* vm_read, with the registers' pseudo-range served from memory. */
static bool in_regs(const reader_t *rd, const ml_reach_req_t *q) {
    return rd->nregs && q->addr >= REGS_AT && q->addr + q->len <= REGS_AT + rd->nregs * 8;
}

static int scan_read(void *ctx, ml_reach_req_t *reqs, size_t n) {
    const reader_t *rd = ctx;
    size_t i = 0;
    while (i < n) {
        if (in_regs(rd, &reqs[i])) {
            memcpy(reqs[i].buf, (const char *)rd->regs + (reqs[i].addr - REGS_AT), reqs[i].len);
            reqs[i].got = reqs[i].len;
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && !in_regs(rd, &reqs[j])) j++;
        int rc = vm_read(ctx, reqs + i, j - i);
        if (rc < 0) return rc;
        i = j;
    }
    return 0;
}

/* A task's state letter from /proc/PID/task/TID/stat ('R', 'S', 'Z'...),
 * or 0 when it cannot be read. */
static char task_state(pid_t pid, const char *tid) {
    char path[320], buf[512];
    snprintf(path, sizeof path, "/proc/%d/task/%s/stat", (int)pid, tid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    const char *paren = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return paren && paren[1] == ' ' ? paren[2] : 0;
}

static bool task_gone(char state) {
    return state == 'Z' || state == 'X' || state == 'x';
}

/* A thread's /proc/PID/task/TID/syscall into buf: "running", or "nr args...
 * sp pc" for a thread in a system call. False when it cannot be read. */
static bool read_syscall_line(pid_t pid, const char *tid, char *buf, size_t len) {
    char path[320];
    snprintf(path, sizeof path, "/proc/%d/task/%s/syscall", (int)pid, tid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t got = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[got] = '\0';
    return true;
}

/* The stack pointer in such a line (its second-to-last field); false for a
 * thread that was running. Takes the line apart. */
static bool syscall_line_sp(char *line, uint64_t *sp) {
    char *tok[16];
    int nt = 0;
    char *save = NULL;
    for (char *s = strtok_r(line, " \n", &save); s && nt < 16; s = strtok_r(NULL, " \n", &save)) tok[nt++] = s;
    if (nt < 3 || !strncmp(tok[0], "running", 7)) return false;
    *sp = strtoull(tok[nt - 2], NULL, 16);
    return true;
}

/* ------------------------------------------------------------------------- */
/* Other threads' registers                                                  */
/* ------------------------------------------------------------------------- */

/* valgrind and LeakSanitizer take every thread's registers for roots: a
 * thread blocked in a system call keeps its callee-saved registers on its
 * kernel stack, which process_vm_readv cannot read, and a pointer held only
 * there made a block look leaked (tests/leaks/lk_regs.c). The collector, the program's parent,
 * stops each other thread briefly with ptrace (PTRACE_SEIZE, then
 * PTRACE_INTERRUPT) and reads them. Only threads whose stop the program
 * cannot notice: running, or blocked in a call the kernel restarts by
 * itself after the stop (futex, nanosleep, clock_nanosleep, pause, poll,
 * ppoll, select, pselect6, wait4, waitid). A
 * thread in epoll_wait, a socket read with a timeout and the like would get
 * EINTR: those are left as they are, and their registers are not read. Not
 * the exiting thread (its registers hold memlens' destructor), nor the
 * main thread unless it is the exiting one (its ptrace stops would reach
 * the `wait4` with which memlens waits for the program). Returns the number
 * of words in *out (15 a thread), 0 when none could be read. */
#define REGS_THREADS_MAX 4096
#define REGS_STOP_WAIT_NS (200ull * 1000000ull)

/* Threads whose stack pointer is known: from ptrace (thread_registers) or
 * from /proc/PID/task/TID/syscall (thread_sps). */
#define KNOWN_MAX 256
typedef struct {
    pid_t tid[KNOWN_MAX];
    uint64_t sp[KNOWN_MAX];
    size_t n;
} known_sps_t;

static bool known_sp(const known_sps_t *k, pid_t tid, uint64_t *sp) {
    for (size_t i = 0; i < k->n; i++)
        if (k->tid[i] == tid) {
            *sp = k->sp[i];
            return true;
        }
    return false;
}

#if defined(__x86_64__)
static bool restarts_by_itself(const char *syscall_line) {
    if (!strncmp(syscall_line, "running", 7)) return true;
    long nr = strtol(syscall_line, NULL, 10);
    /* Each returns -ERESTARTNOHAND, -ERESTARTSYS or -ERESTART_RESTARTBLOCK
     * when a stop interrupts it, which the kernel turns into a restart when
     * no handler runs (poll and select with the time left). Not epoll_wait,
     * which returns -EINTR, nor read, recv or accept, which return -EINTR
     * on a socket with a receive timeout. */
    return nr == 202 /* futex */ || nr == 35 /* nanosleep */ || nr == 230 /* clock_nanosleep */ ||
           nr == 34 /* pause */ || nr == 7 /* poll */ || nr == 271 /* ppoll */ || nr == 23 /* select */ ||
           nr == 270 /* pselect6 */ || nr == 61 /* wait4 */ || nr == 247 /* waitid */;
}

static bool stop_and_read(pid_t tid, struct user_regs_struct *regs) {
    if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0) return false;
    bool ok = false;
    if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) == 0) {
        uint64_t t0 = mono_ns();
        int st;
        for (;;) {
            pid_t w = waitpid(tid, &st, __WALL | WNOHANG);
            if (w == tid) {
                ok = WIFSTOPPED(st);
                break;
            }
            if (w < 0 || mono_ns() - t0 > REGS_STOP_WAIT_NS) break;
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        if (ok) ok = ptrace(PTRACE_GETREGS, tid, NULL, regs) == 0;
    }
    /* Not stopped in time: the stop comes later and ends when memlens
     * exits (the process is ending anyway). */
    ptrace(PTRACE_DETACH, tid, NULL, NULL);
    return ok;
}

static size_t thread_registers(pid_t pid, uint64_t exit_sp, uint64_t **out, known_sps_t *known) {
    *out = NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    uint64_t *v = NULL;
    size_t n = 0, cap = 0, threads = 0;
    struct dirent *e;
    while ((e = readdir(d)) && threads < REGS_THREADS_MAX) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);
        char buf[512];
        uint64_t sp;
        if (tid == pid || !read_syscall_line(pid, e->d_name, buf, sizeof buf) || !restarts_by_itself(buf))
            continue;
        /* the exiting thread: its stack pointer just below exit_sp */
        if (syscall_line_sp(buf, &sp) && exit_sp && sp <= exit_sp && exit_sp - sp < (1u << 20)) continue;
        struct user_regs_struct r;
        if (!stop_and_read(tid, &r)) continue;
        threads++;
        /* A thread that was running has no stack pointer in /proc: this one
         * is, and its stack is a root from it up; one stopped in a system
         * call is found again by thread_sps. The red zone below the pointer
         * is no root here either: the ABI makes it volatile across calls and
         * returns (valgrind marks it undefined at each), so what lies there
         * is mostly what the frames just returned from left. Only a leaf
         * function's locals kept there, and in no register, are missed
         * (tests/leaks/lk_redzone.c). */
        if (known->n < KNOWN_MAX && !strncmp(buf, "running", 7)) {
            known->tid[known->n] = tid;
            known->sp[known->n++] = r.rsp;
        }
        if (n + 15 > cap) {
            size_t ncap = cap ? cap * 2 : 15 * 16;
            uint64_t *nv = realloc(v, ncap * sizeof *nv);
            if (!nv) break;
            v = nv;
            cap = ncap;
        }
        const uint64_t w[15] = {r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.r8,
                                r.r9,  r.r10, r.r11, r.r12, r.r13, r.r14, r.r15};
        memcpy(v + n, w, sizeof w);
        n += 15;
    }
    closedir(d);
    *out = v;
    return n;
}
#else /* the system call numbers and registers above are x86-64's */
static size_t thread_registers(pid_t pid, uint64_t exit_sp, uint64_t **out, known_sps_t *known) {
    (void)pid;
    (void)exit_sp;
    (void)known;
    *out = NULL;
    return 0;
}
#endif

/* ------------------------------------------------------------------------- */
/* Roots                                                                     */
/* ------------------------------------------------------------------------- */

typedef struct {
    ml_range_t *v;
    size_t n, cap;
} ranges_t;

static int push_range(ranges_t *r, uint64_t lo, uint64_t hi) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        ml_range_t *p = realloc(r->v, cap * sizeof *p);
        if (!p) return -ENOMEM;
        r->v = p;
        r->cap = cap;
    }
    r->v[r->n++] = (ml_range_t){lo, hi};
    return 0;
}

/* Stack pointers of the target's threads (a thread blocked in a system call,
 * as all are while the main thread waits in our destructor, shows it in
 * /proc/PID/task/TID/syscall: "nr args... sp pc"). */
static size_t thread_sps(pid_t pid, const known_sps_t *known, uint64_t *sps, size_t max, size_t *ntasks) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    *ntasks = SIZE_MAX; /* unknown */
    DIR *d = opendir(path);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *e;
    *ntasks = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        /* A thread that ended (the main thread after pthread_exit stays a
         * zombie until the last one ends) has no stack any more. */
        if (task_gone(task_state(pid, e->d_name))) continue;
        if (n == max) { /* more threads than are looked at: not all known */
            *ntasks = SIZE_MAX;
            break;
        }
        ++*ntasks;
        if (known_sp(known, (pid_t)strtol(e->d_name, NULL, 10), &sps[n])) { /* read with ptrace */
            n++;
            continue;
        }
        char buf[512];
        /* A thread caught between two system calls reads "running"; the
         * waiting main thread is back in nanosleep within a millisecond. */
        for (int tries = 0; tries < 100 && read_syscall_line(pid, e->d_name, buf, sizeof buf); tries++) {
            if (syscall_line_sp(buf, &sps[n])) {
                n++;
                break;
            }
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    closedir(d);
    return n;
}

/* One mapping of /proc/PID/smaps, decided once its Rss and Swap are known. */
typedef struct {
    uint64_t lo, hi, resident;
    bool candidate;
    bool loader; /* writable data of glibc's dynamic loader: an owned root */
    bool stack;  /* anonymous, right above a guard page: maybe a thread stack glibc keeps */
    bool libc;   /* writable data of glibc's libc.so: holds malloc's main arena */
} mapping_t;

/* What every mapping is decided with. */
typedef struct {
    pid_t pid;
    const ml_reach_blocks_t *b;
    size_t nb;
    const uint64_t *sps;
    size_t nsp;
    bool glibc;       /* the program's allocator is glibc's (its chunk headers are read) */
    uint64_t page;    /* the page size */
    size_t reads;     /* chunk headers read so far */
    ranges_t parts;   /* scratch: the parts of one mapping that are not roots */
    ranges_t raw;     /* libmemlens.so's own mappings, sorted and merged */
    ranges_t *roots;  /* the result */
    ranges_t *owned;  /* the result's owned roots (ml_reach_io_t.owned) */
    ranges_t *freed;  /* blocks glibc frees at exit (ml_reach_io_t.freed) */
    bool all_sps;     /* every thread of the target has its stack pointer in sps */
    bool crash;       /* it dies of a signal: no freeres, glibc's cached stacks stay (cached_stack_dtv) */
    int used_state;   /* glibc's used stacks: 0 not read yet, 1 in used/nused, -1 unknown */
    uint64_t *used;   /* their descriptors (glibc_stacks.c), sorted */
    size_t nused;
    uint64_t huge_bytes; /* mappings not taken as roots for their size (HUGE_ROOT) */
    size_t nhuge;
    uint64_t huge_lo, huge_hi; /* the first of them */
} roots_ctx_t;

/* A writable mapping of 1 TiB or more is not a root. Such address space is
 * a sanitizer's shadow (ThreadSanitizer reserves 16 TiB and 4 TiB of it,
 * with some 50 KiB in memory at exit), which holds states, not the
 * program's pointers; and its pages in memory could not be found in time:
 * /proc/PID/pagemap has 8 bytes per page, 2 GiB for 1 TiB, 34 GB for the
 * 16 TiB one, and walking it ran the scan into its 20 s limit, every
 * verdict lost and the program held at exit all that time. Skipped, and
 * said on stderr (collect_roots). */
#define HUGE_ROOT (1ull << 40)

/* glibc's malloc (malloc/malloc.c, malloc/arena.c): a block is preceded by
 * its chunk's prev_size and size words; IS_MMAPPED in the size word marks a
 * chunk served by an mmap of its own (prev_size is then its offset in that
 * mapping), NON_MAIN_ARENA one of a thread arena, whose memory is a heap
 * aligned to HEAP_MAX_SIZE (64 MiB on 64-bit) that starts with its heap_info
 * {ar_ptr, prev, size, mprotect_size}. */
#define GLIBC_HEAP_MAX (64ull << 20)
#define GLIBC_IS_MMAPPED 2u
#define GLIBC_NON_MAIN_ARENA 4u
#define HEADER_READS_MAX 65536 /* a scan's chunk-header reads, at most */

/* n words at addr, all of them or false (the scan's own reader). */
static bool read_words(pid_t pid, uint64_t addr, uint64_t *w, size_t n) {
    reader_t rd = {.pid = pid};
    ml_reach_req_t q = {.addr = addr, .len = n * sizeof *w, .buf = w};
    return vm_read(&rd, &q, 1) == 0 && q.got == q.len;
}

/* Appends [lo, hi) to ranges given in address order, joining it to the last
 * one when they touch. */
static int push_joined(ranges_t *r, uint64_t lo, uint64_t hi) {
    if (r->n && lo <= r->v[r->n - 1].hi) {
        if (hi > r->v[r->n - 1].hi) r->v[r->n - 1].hi = hi;
        return 0;
    }
    return push_range(r, lo, hi);
}

/* The heap inside a mapping that holds blocks: the thread-arena heaps and
 * mmapped chunks its blocks lie in, into ctx->parts in address order. The
 * kernel merges neighbouring anonymous mappings, so one mapping can hold a
 * chunk of glibc's and, next to it, memory the program mapped itself (a
 * pool, an interpreter's arena): that memory is a root, as valgrind sees it.
 * False when a block lies in neither kind of part, or a header cannot be
 * read or does not hold together: the whole mapping is then heap. */
static bool glibc_heap_parts(roots_ctx_t *x, const mapping_t *m) {
    size_t i = ml_reach_blocks_first(x->b, m->lo);
    while (i < x->nb && ml_reach_block_ptr(x->b, i) < m->hi) {
        uint64_t p = ml_reach_block_ptr(x->b, i), end = p + ml_reach_block_size(x->b, i), hdr[2], lo, hi;
        if (++x->reads > HEADER_READS_MAX || p < 16 || !read_words(x->pid, p - 16, hdr, 2)) return false;
        if (hdr[1] & GLIBC_IS_MMAPPED) {
            uint64_t chunk = p - 16;
            lo = chunk - hdr[0];
            hi = chunk + (hdr[1] & ~7ull);
            if (lo > chunk || hi < end || (lo | hi) & (x->page - 1)) return false;
        } else if (hdr[1] & GLIBC_NON_MAIN_ARENA) {
            uint64_t info[4]; /* ar_ptr, prev, size, mprotect_size */
            lo = p & ~(GLIBC_HEAP_MAX - 1);
            if (++x->reads > HEADER_READS_MAX || !read_words(x->pid, lo, info, 4)) return false;
            hi = lo + info[2];
            if (!info[0] || info[1] & (GLIBC_HEAP_MAX - 1) || !info[2] || info[2] > GLIBC_HEAP_MAX ||
                info[2] & (x->page - 1) || info[3] < info[2] || hi < end)
                return false;
        } else {
            return false; /* the main arena outside [heap], or not glibc's */
        }
        if (lo < m->lo) lo = m->lo;
        if (hi > m->hi) hi = m->hi;
        if (push_joined(&x->parts, lo, hi) < 0) return false;
        i = ml_reach_blocks_first(x->b, hi);
    }
    return true;
}

static int cmp_range(const void *a, const void *b) {
    uint64_t x = ((const ml_range_t *)a)->lo, y = ((const ml_range_t *)b)->lo;
    return x < y ? -1 : x > y;
}

/* The index of the first range of r (sorted, disjoint) that ends above lo. */
static size_t first_range(const ranges_t *r, uint64_t lo) {
    size_t l = 0, h = r->n;
    while (l < h) {
        size_t m = (l + h) / 2;
        if (r->v[m].hi <= lo) l = m + 1;
        else h = m;
    }
    return l;
}

/* libmemlens.so's own mappings in the target (ml_raw_registry_t at addr),
 * sorted and merged into out. Unreadable or implausible: none, and that
 * memory is scanned as roots, as before the registry. */
#define RAW_MAX (1u << 20)
static void read_raw_registry(pid_t pid, uint64_t addr, ranges_t *out) {
    uint64_t hdr[2]; /* n, cap */
    if (!addr || !read_words(pid, addr, hdr, 2) || !hdr[0] || hdr[0] > hdr[1] || hdr[0] > RAW_MAX) return;
    ml_range_t *v = malloc(hdr[0] * sizeof *v);
    _Static_assert(sizeof *v == 2 * sizeof(uint64_t), "a registry entry is lo, hi");
    if (!v || !read_words(pid, addr + sizeof hdr, (uint64_t *)v, 2 * hdr[0])) {
        free(v);
        return;
    }
    qsort(v, hdr[0], sizeof *v, cmp_range);
    for (size_t i = 0; i < hdr[0]; i++)
        if (v[i].hi > v[i].lo && push_joined(out, v[i].lo, v[i].hi) < 0) break;
    free(v);
}

/* The stacks of threads that ended stay mapped in glibc's stack cache, for
 * threads to come (nptl/allocatestack.c), and each keeps its thread
 * descriptor at its top, which points to the thread's TLS vector (dtv), a
 * block ld.so allocated, 16 bytes into it: only an interior pointer reaches
 * it, so a program that joined its threads had one "possibly lost" block
 * per cached stack, where valgrind's default run, which frees the cache at
 * exit (__libc_freeres), reports none, and LeakSanitizer takes the interior
 * pointer. The vector is marked reachable (below). A descriptor is
 * known by the x86-64 TCB header that starts it: its first and third words
 * (tcb, self) hold its own address and the second the dtv, in the last page
 * of an anonymous mapping right above a guard page that holds no live
 * thread's stack pointer; when a thread's stack pointer is unknown (it was
 * running), no stack is taken for cached. A thread that ended and was not
 * joined keeps its stack the same way, but on glibc's list of stacks in
 * use, not in the cache, and freeres leaves it: valgrind calls its dtv
 * possibly lost. Such a descriptor (glibc_stacks.c) is an ordinary root, so
 * its interior pointer makes the vector possibly lost here too; where the
 * list cannot be read, it is taken as cached.
 *
 * A cached stack is no root at all: valgrind's freeres unmaps the cache and
 * frees each vector and the dynamic TLS blocks its entries hold (to_free),
 * so a block that only a joined thread's __thread variable pointed to is
 * definitely lost there (and to LeakSanitizer, which scans live threads
 * only); here the stack was scanned and made it reachable. The vector and
 * those dynamic TLS blocks go to x->freed: reachable, never scanned.
 *
 * Only at an exit, though. A process that dies of a signal runs no freeres,
 * under valgrind neither: the cache stays, valgrind reads the ended
 * threads' static TLS and descriptors and calls each vector possibly lost,
 * and so does memlens (x->crash: the handshake came from its signal
 * handler, ML_EXIT_CRASH; crashed_thread_roots, below;
 * tests/leaks/lk_abortjoined.c). Before, it called them reachable.
 * Returns 1 for a cached stack, 0 for any other mapping, -ENOMEM. */
#define DTV_ENTRIES_MAX 65536 /* entries of a vector read for its dynamic TLS blocks */

/* A cached stack when the process dies of a signal (x->crash): nothing
 * frees the cache then, under valgrind neither, which reads the ended
 * thread's static TLS and its descriptor, and so reaches the vector
 * through the descriptor's interior pointer: possibly lost. The roots here
 * are the static TLS (from the lowest entry of the vector at `blk`, `len`
 * entries, that points into this mapping below the descriptor) and the
 * descriptor's word that points at the vector; not the dead frames below,
 * which valgrind does not read either, nor the rest of the descriptor,
 * whose stale words (`arg`: std::thread's state, freed when the thread
 * ended) point at whatever glibc's malloc put at those addresses since,
 * where valgrind's allocator would not have reused them yet.
 * Returns 1 (the mapping is decided), or -ENOMEM. */
static int crashed_thread_roots(roots_ctx_t *x, const mapping_t *m, uint64_t desc, uint64_t blk, uint64_t len) {
    uint64_t lo = desc, e[512];
    for (uint64_t first = 0; first < len && first < DTV_ENTRIES_MAX; first += 256) {
        size_t cnt = len - first < 256 ? (size_t)(len - first) : 256;
        if (!read_words(x->pid, blk + 32 + 16 * first, e, 2 * cnt)) break;
        for (size_t j = 0; j < cnt; j++)
            if (e[2 * j] >= m->lo && e[2 * j] < lo) lo = e[2 * j];
    }
    lo &= ~7ull;
    if (lo < desc && push_range(x->roots, lo, desc) < 0) return -ENOMEM;
    return push_range(x->roots, desc + 8, desc + 16) < 0 ? -ENOMEM : 1;
}
static int cached_stack_dtv(roots_ctx_t *x, const mapping_t *m) {
    if (!m->stack || !x->all_sps || m->hi - m->lo < 2 * x->page) return 0;
    for (size_t i = 0; i < x->nsp; i++)
        if (x->sps[i] >= m->lo && x->sps[i] < m->hi) return 0;
    uint64_t w[512], at = m->hi - sizeof w;
    if (!read_words(x->pid, at, w, 512)) return 0;
    for (size_t i = 0; i + 2 < 512; i++) {
        if (w[i] != at + 8 * i || w[i + 2] != w[i] || w[i + 1] < 16) continue;
        /* glibc's vector is a block of (length + 2) 16-byte entries whose
         * first holds the length, and the descriptor points at the second
         * (elf/dl-tls.c, allocate_dtv and _dl_resize_dtv). A slot that
         * points anywhere else, or into a block of another shape (a stack
         * glibc did not keep, the program's own, whose vector was freed and
         * its memory given to another block), is left alone. */
        uint64_t blk = w[i + 1] - 16, len;
        size_t k = ml_reach_blocks_first(x->b, blk);
        if (!(k < x->nb && ml_reach_block_ptr(x->b, k) == blk && read_words(x->pid, blk, &len, 1) &&
              len < (1u << 20) && (len + 2) * 16 == ml_reach_block_size(x->b, k)))
            return 0;
        if (!x->used_state) x->used_state = ml__glibc_used_stacks(x->pid, read_words, &x->used, &x->nused) ? -1 : 1;
        if (x->used_state > 0 && ml__glibc_stack_used(x->used, x->nused, at + 8 * i)) return 0;
        if (x->crash) return crashed_thread_roots(x, m, at + 8 * i, blk, len);
        if (push_range(x->freed, blk, blk + 1) < 0) return -ENOMEM;
        /* Entries 1..len follow the length and the generation: {val,
         * to_free}; to_free is the block malloc gave for a module's dynamic
         * TLS (NULL for static TLS). */
        uint64_t e[512];
        for (uint64_t first = 0; first < len && first < DTV_ENTRIES_MAX; first += 256) {
            size_t cnt = len - first < 256 ? (size_t)(len - first) : 256;
            if (!read_words(x->pid, blk + 32 + 16 * first, e, 2 * cnt)) break;
            for (size_t j = 0; j < cnt; j++) {
                uint64_t tf = e[2 * j + 1];
                size_t q = tf ? ml_reach_blocks_first(x->b, tf) : x->nb;
                if (q < x->nb && ml_reach_block_ptr(x->b, q) == tf && push_range(x->freed, tf, tf + 1) < 0)
                    return -ENOMEM;
            }
        }
        return 1;
    }
    return 0;
}

/* glibc's malloc keeps the main arena's state (struct malloc_state,
 * malloc/malloc.c) in libc's .data: its fast bins, top chunk, last
 * remainder and bins point at chunk headers in the heap, and last_remainder
 * stays where a split once left it, so it can hold the start or the inside
 * of a block allocated since. valgrind replaces malloc, so no such words
 * exist for it; here they made a block nothing of the program points to
 * reachable (three memalign calls: the third's block started where
 * last_remainder pointed; valgrind says definite). The state is not a root.
 *
 * libc exports no symbol for it, so it is found by its shape, in glibc's
 * layout since 2.27 (x86_64): an int mutex, int flags, int
 * have_fastchunks, 10 fast bins from 16, top at 96, last_remainder at 104,
 * 127 bin headers of two words from 112 (an empty bin's fd and bk both
 * hold the header's own address - 16, a non-empty one's point at chunks:
 * 16-aligned, outside the arena), the bin map, then `next` at 2160, the
 * ring of arenas, which comes back to the main arena. A candidate must fit
 * all of that and hold at least 16 empty bins; none found (another layout,
 * another libc): the mapping is a root whole, as before. */
#define ARENA_BINS 112
#define ARENA_NEXT 2160
#define ARENA_SIZE 2200
#define ARENA_NBINS 127

static bool arena_chunk_ptr(uint64_t v, uint64_t m) {
    return v && !(v & 15) && (v < m || v >= m + ARENA_SIZE);
}

static bool arena_at(const roots_ctx_t *x, const uint64_t *w, uint64_t lo, uint64_t m) {
    const uint64_t *a = w + (m - lo) / 8;
    size_t empty = 0;
    for (int j = 0; j < ARENA_NBINS; j++) {
        uint64_t at = m + ARENA_BINS + 16 * (uint64_t)j, fd = a[ARENA_BINS / 8 + 2 * j], bk = a[ARENA_BINS / 8 + 2 * j + 1];
        if (fd == at - 16 && bk == at - 16)
            empty++;
        else if (!arena_chunk_ptr(fd, m) || !arena_chunk_ptr(bk, m))
            return false;
    }
    if (empty < 16) return false;
    for (int j = 0; j < 10; j++) /* fast bins */
        if (a[2 + j] && !arena_chunk_ptr(a[2 + j], m)) return false;
    if (a[12] != m + 96 && !arena_chunk_ptr(a[12], m)) return false; /* top: the unsorted bin before any */
    if (a[13] && !arena_chunk_ptr(a[13], m)) return false;          /* last_remainder */
    /* The ring of arenas: main_arena.next is itself, or the newest thread
     * arena, whose state is read from the process. */
    uint64_t next = a[ARENA_NEXT / 8];
    for (int hops = 0; hops < 256 && next; hops++) {
        if (next == m) return true;
        if (next & 7) return false;
        uint64_t nx;
        if (!read_words(x->pid, next + ARENA_NEXT, &nx, 1)) return false;
        next = nx;
    }
    return false;
}

/* The address of the main arena's state in libc's data mapping m, or 0. */
static uint64_t main_arena_in(const roots_ctx_t *x, const mapping_t *m) {
    uint64_t len = m->hi - m->lo;
    if (len < ARENA_SIZE || len > (1u << 20)) return 0;
    uint64_t *w = malloc(len);
    if (!w || !read_words(x->pid, m->lo, w, len / 8)) {
        free(w);
        return 0;
    }
    uint64_t found = 0;
    size_t nw = len / 8;
    /* The first empty bin: the arena is one of 127 places around it. */
    for (size_t i = 0; i + 1 < nw && !found; i++) {
        uint64_t at = m->lo + 8 * i;
        if (w[i] != at - 16 || w[i + 1] != at - 16) continue;
        for (int j = 0; j < ARENA_NBINS && !found; j++) {
            uint64_t cand = at - ARENA_BINS - 16 * (uint64_t)j;
            if (cand < m->lo || cand + ARENA_SIZE > m->hi) continue;
            if (arena_at(x, w, m->lo, cand)) found = cand;
        }
        if (!found) break; /* the first empty bin was no arena's: give up */
    }
    free(w);
    return found;
}

static int consider(roots_ctx_t *x, const mapping_t *m) {
    /* Never touched (reserved address space: sanitizer shadows, GPU
     * apertures, thread-stack guards): only zeros, nothing to read. */
    if (!m->candidate || !m->resident) return 0;
    if (m->hi - m->lo >= HUGE_ROOT) {
        if (!x->nhuge++) x->huge_lo = m->lo, x->huge_hi = m->hi;
        x->huge_bytes += m->hi - m->lo;
        return 0;
    }
    if (m->loader) return push_range(x->owned, m->lo, m->hi);
#if defined(__x86_64__)
    int cached = cached_stack_dtv(x, m);
    if (cached < 0) return -ENOMEM;
    if (cached) return 0; /* glibc's cache of stacks: freed at exit, no root */
#endif
    uint64_t lo = m->lo;
    /* A stack: only from its thread's stack pointer up (below it lie dead
     * frames). The 128-byte red zone below the pointer is not a root: a
     * thread waits in a system call wrapper, or runs code that calls and
     * returns, and the frames it just returned from lie there (valgrind
     * marks the red zone undefined at every call and return). */
    for (size_t i = 0; i < x->nsp; i++)
        if (x->sps[i] >= m->lo && x->sps[i] < m->hi) {
            uint64_t from = x->sps[i] & ~7ull;
            if (from > lo) lo = from;
        }
    x->parts.n = 0;
    size_t first = ml_reach_blocks_first(x->b, m->lo);
    /* Heap memory is scanned per block, not as a root: free chunks hold
     * stale pointers. Only what lies beside glibc's parts is a root. */
    if (first < x->nb && ml_reach_block_ptr(x->b, first) < m->hi && (!x->glibc || !glibc_heap_parts(x, m))) return 0;
    /* Nor is memlens' own memory, nor malloc's main arena. */
    for (size_t k = first_range(&x->raw, m->lo); k < x->raw.n && x->raw.v[k].lo < m->hi; k++) {
        uint64_t a = x->raw.v[k].lo > m->lo ? x->raw.v[k].lo : m->lo;
        uint64_t z = x->raw.v[k].hi < m->hi ? x->raw.v[k].hi : m->hi;
        int rc = push_range(&x->parts, a, z);
        if (rc < 0) return rc;
    }
    if (x->glibc && m->libc) {
        uint64_t a = main_arena_in(x, m);
        int rc = a ? push_range(&x->parts, a, a + ARENA_SIZE) : 0;
        if (rc < 0) return rc;
    }
    if (x->parts.n > 1) qsort(x->parts.v, x->parts.n, sizeof *x->parts.v, cmp_range);
    for (size_t k = 0; k < x->parts.n; k++) {
        if (x->parts.v[k].lo > lo) {
            int rc = push_range(x->roots, lo, x->parts.v[k].lo);
            if (rc < 0) return rc;
        }
        if (x->parts.v[k].hi > lo) lo = x->parts.v[k].hi;
    }
    return lo < m->hi ? push_range(x->roots, lo, m->hi) : 0;
}

/* The program's own sbrk memory (ml_sbrk_registry_t at addr) that lies in
 * [lo, hi), the brk heap, as roots. Unreadable or implausible: none. A
 * range that holds a live block is an allocator's heap (tcmalloc takes its
 * memory with sbrk), scanned per block like any other (consider): as a
 * root, every leaked block in it held what it points to, and a leaked cycle
 * or a leaked block's children came out reachable. */
static int sbrk_roots(const roots_ctx_t *x, uint64_t addr, uint64_t lo, uint64_t hi) {
    uint64_t w[1 + 2 * ML_SBRK_RANGES];
    _Static_assert(sizeof w == sizeof(ml_sbrk_registry_t), "the registry is n, then lo, hi pairs");
    if (!addr || !read_words(x->pid, addr, w, 1 + 2 * ML_SBRK_RANGES) || w[0] > ML_SBRK_RANGES) return 0;
    for (uint64_t i = 0; i < w[0]; i++) {
        uint64_t a = w[1 + 2 * i] > lo ? w[1 + 2 * i] : lo, z = w[2 + 2 * i] < hi ? w[2 + 2 * i] : hi;
        if (a >= z) continue;
        size_t k = ml_reach_blocks_first(x->b, a);
        if (k < x->nb && ml_reach_block_ptr(x->b, k) < z) continue; /* an allocator's heap */
        int rc = push_range(x->roots, a & ~7ull, z);
        if (rc < 0) return rc;
    }
    return 0;
}

/* glibc's dynamic loader (ld-linux-x86-64.so.2, ld-linux.so.2, ld-2.31.so
 * ...): its data holds the loader's tables, among them pointers into blocks
 * it allocated for itself at an aligned offset (dl-find_object.c aligns the
 * segments it mallocs), which only interior pointers reach. valgrind's
 * default run frees those blocks at exit (__libc_freeres) and so reports
 * nothing; LeakSanitizer takes interior pointers as references. Scanned as
 * an owned root (ml_reach_io_t.owned), they are reachable, and a program
 * that loads a library with dlopen has no "possibly lost" blocks of the
 * loader's (tests/leaks/lk_dlopen.c). */
static bool is_glibc_loader(const char *base) {
    return !strncmp(base, "ld-linux", 8) || (!strncmp(base, "ld-2.", 5) && strstr(base, ".so"));
}

/* glibc's C library: libc.so.6, libc-2.31.so ... */
static bool is_glibc_libc(const char *base) {
    return !strncmp(base, "libc.so", 7) || (!strncmp(base, "libc-2.", 7) && strstr(base, ".so"));
}

/* pid names the process (its threads); mem_pid a live thread of it, whose
 * /proc entry and process_vm_readv show its memory: the process' own entry
 * shows none once its main thread has ended (pthread_exit in main), though
 * the others still run. leader_gone: that main thread's stack is then no
 * root (valgrind does not scan the stack of a thread that ended). */
static int collect_roots(pid_t pid, pid_t mem_pid, bool leader_gone, const known_sps_t *known,
                         const ml_reach_blocks_t *b, size_t nb, uint64_t exit_sp, bool glibc, bool crash,
                         uint64_t raw_registry, uint64_t sbrk_registry, ranges_t *roots, ranges_t *owned,
                         ranges_t *freed, ml__scan_note_t *note) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/smaps", (int)mem_pid);
    FILE *f = fopen(path, "r");
    if (!f) return -errno;
    uint64_t sps[257];
    size_t ntasks;
    size_t nsp = thread_sps(pid, known, sps, 256, &ntasks);
    bool all_sps = nsp == ntasks;
    /* The exiting thread's stack counts from exit()'s caller up: below lie
     * exit's handlers and our destructor, whose never-written slots still
     * hold whatever earlier calls left there (valgrind sees such slots as
     * undefined and skips them). The red zone rule below does not apply. */
    if (exit_sp) sps[nsp++] = exit_sp;
    long page = sysconf(_SC_PAGESIZE);
    roots_ctx_t x = {.pid = mem_pid, .b = b, .nb = nb, .sps = sps, .nsp = nsp, .glibc = glibc,
                     .page = page > 0 ? (uint64_t)page : 4096, .roots = roots, .owned = owned, .freed = freed,
                     .all_sps = all_sps, .crash = crash};
    read_raw_registry(mem_pid, raw_registry, &x.raw);
    char line[PATH_MAX + 256];
    int rc = 0;
    mapping_t m = {0};
    bool have = false;
    uint64_t guard_hi = 0; /* the end of the mapping before, when it was a guard page (---p) */
    while (rc == 0 && fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off, kb;
        char perms[8] = "", dev[16];
        unsigned long inode;
        int name_at = 0;
        if (sscanf(line, "Rss: %llu kB", &kb) == 1 || sscanf(line, "Swap: %llu kB", &kb) == 1) {
            m.resident += kb;
            continue;
        }
        if (sscanf(line, "%llx-%llx %7s %llx %15s %lu %n", &lo, &hi, perms, &off, dev, &inode,
                   &name_at) < 6 ||
            !strchr(line, '-') || line[0] == ' ')
            continue;
        if (have) rc = consider(&x, &m);
        have = true;
        char *name = line + name_at;
        name[strcspn(name, "\n")] = '\0';
        const char *base = strrchr(name, '/');
        base = base ? base + 1 : name;
        m = (mapping_t){lo, hi, 0, perms[0] == 'r' && perms[1] == 'w' && (perms[3] == 'p' || perms[3] == 's'),
                        inode != 0 && perms[3] == 'p' && is_glibc_loader(base),
                        inode == 0 && !name[0] && !strcmp(perms, "rw-p") && lo == guard_hi,
                        inode != 0 && !strcmp(perms, "rw-p") && is_glibc_libc(base)};
        guard_hi = !strcmp(perms, "---p") ? hi : 0;
        /* The brk heap is glibc's main arena, scanned block by block, but
         * for what the program took with sbrk itself. */
        if (!strcmp(name, "[heap]") && (rc = sbrk_roots(&x, sbrk_registry, lo, hi)) < 0) break;
        if (!strcmp(name, "[heap]") || !strcmp(name, "[vvar]") || !strcmp(name, "[vsyscall]") ||
            !strcmp(name, "[vdso]") || !strncmp(base, "libmemlens", 10)) /* ours, or not roots */
            m.candidate = false;
        if (leader_gone && !strcmp(name, "[stack]")) m.candidate = false;
        /* Shared mappings are roots as valgrind's (anonymous MAP_SHARED,
         * memfd, SysV, /dev/shm files), except memlens' own session and
         * rings, whose events name every block, and device memory (GPU
         * apertures, /dev/mem...: valgrind skips those too; /dev/zero is
         * plain memory, and names an anonymous MAP_SHARED mapping). */
        if (perms[3] == 's' &&
            (!strncmp(name, "/dev/shm/memlens-", 17) || !strncmp(name, "anon_inode:", 11) ||
             (!strncmp(name, "/dev/", 5) && strncmp(name, "/dev/shm/", 9) && strncmp(name, "/dev/zero", 9))))
            m.candidate = false;
    }
    if (have && rc == 0) rc = consider(&x, &m);
    fclose(f);
    if (rc == 0 && x.nhuge) {
        /* Said now on stderr, and kept for the trace (the collector writes
         * it at the process' end): the same words. */
        static const char lead[] = "not scanned: ";
        ml__scan_note_t own, *n = note ? note : &own;
        char sz[32];
        n->count = x.nhuge;
        snprintf(n->text, sizeof n->text,
                 "%sprocess %d: %zu mapping%s of %s (%#" PRIx64 "-%#" PRIx64 "%s) not scanned for pointers at "
                 "exit: 1 TiB or more each, a sanitizer's shadow or other reserved address space; a block held "
                 "only from there counts as leaked",
                 lead, (int)pid, x.nhuge, x.nhuge == 1 ? "" : "s", ml_fmt_bytes(x.huge_bytes, sz, sizeof sz),
                 x.huge_lo, x.huge_hi, x.nhuge == 1 ? "" : " and more");
        fprintf(stderr, "memlens: %s\n", n->text + sizeof lead - 1);
    }
    free(x.parts.v);
    free(x.raw.v);
    free(x.used);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* The scan                                                                  */
/* ------------------------------------------------------------------------- */

/* A fork child's own live blocks merged with those it inherited (inherit.c)
 * into *b, as an array (*merged, is_own[i] for each); the count of its own
 * in *nown. *seq: each block's allocation sequence number, which orders the
 * leaked cliques' leaders (reach.c): the inherited blocks 0 (made before
 * the fork, before any of the child's own; among them, address order);
 * NULL without memory (address order). */
static int64_t merged_blocks(ml_analysis_t *an, const ml__inherit_t *inh, ml_reach_blocks_t *b,
                             ml_live_block_t **merged, uint8_t **is_own, int64_t *nown, uint64_t **seq) {
    ml_live_block_t *own = NULL;
    *nown = ml_analysis_live_blocks(an, &own);
    if (*nown < 0) return *nown;
    if (!*nown) {
        free(own);
        return ml_analysis_live_reach_blocks(an, b); /* nothing of its own to judge */
    }
    memset(b, 0, sizeof *b);
    int64_t n = ml__inherit_merge(inh, own, (size_t)*nown, merged, is_own);
    free(own);
    if (n < 0) return -ENOMEM;
    b->arr = *merged;
    b->n = (size_t)n;
    uint64_t *own_seq = NULL;
    if (ml_analysis_live_seqs(an, &own_seq) == *nown && (*seq = malloc(((size_t)n ? (size_t)n : 1) * sizeof **seq))) {
        /* Every own block is in the merge, in the same order. */
        for (int64_t k = 0, i = 0; k < n; k++) (*seq)[k] = (*is_own)[k] ? own_seq[i++] : 0;
        b->seq = *seq;
    }
    free(own_seq);
    return n;
}

/* stdio's buffers, listed by the process (ml_ring_hdr_t.stdio_list), into
 * `freed`: reachable, and never read. A buffer is text, but one carved from
 * freed chunks keeps their words past what was written, and those made
 * dropped blocks reachable: 82 of 100 in a program that freed 400 blocks
 * holding pointers to each other, then allocated 100 and printed a line
 * (valgrind, which reads only written words, said definite; gperftools'
 * heap-checker test DoTestSTLAllocInverse the same way). Unreadable or
 * implausible: none. */
static int stdio_buffers(pid_t pid, uint64_t addr, ranges_t *freed) {
    uint64_t w[1 + ML_STDIO_BUFS];
    if (!addr || !read_words(pid, addr, w, 1) || w[0] > ML_STDIO_BUFS) return 0;
    if (!w[0] || !read_words(pid, addr + 8, w + 1, (size_t)w[0])) return 0;
    for (uint64_t i = 0; i < w[0]; i++)
        if (w[1 + i] && push_range(freed, w[1 + i], w[1 + i] + 1) < 0) return -ENOMEM;
    return 0;
}

int ml__exit_scan(pid_t pid, ml_analysis_t *an, const ml__inherit_t *inh, ml__exit_scan_emit_t emit,
                  void (*release)(void *ctx), void *ctx, uint32_t time_ms, uint32_t thread, uint64_t exit_sp,
                  const uint64_t *exit_regs, uint32_t exit_nregs, bool crash, uint64_t raw_registry,
                  uint64_t sbrk_registry, uint64_t stdio_list, ml__scan_note_t *note) {
    uint64_t t0 = mono_ns();
    ml_record_t sum = {.tag = ML_T_REACH_SCAN, .time_ms = time_ms, .thread = thread};
    ml_reach_blocks_t b = {0};
    uint8_t *v = NULL;
    ranges_t roots = {0}, owned = {0}, freed = {0};
    /* A fork child's inherited blocks are nodes of the graph like its own,
     * but get no verdict: is_own says which are its own (all when NULL). */
    ml_live_block_t *merged = NULL;
    uint8_t *is_own = NULL;
    uint64_t *merged_seq = NULL;
    int64_t nown = 0;
    int64_t nb = inh ? merged_blocks(an, inh, &b, &merged, &is_own, &nown, &merged_seq) : ml_analysis_live_reach_blocks(an, &b);
    if (!inh) nown = nb;
    int rc = nb < 0 ? (int)nb : 0;
    bool glibc = !strcmp(ml_analysis_allocator_model(an), "glibc");
    char status[4096];
    uint32_t mem_task = ml__memory_task((uint32_t)pid, status, sizeof status);
    bool leader_gone = mem_task && mem_task != (uint32_t)pid; /* main ended: read through another thread */
    pid_t mem_pid = leader_gone ? (pid_t)mem_task : pid;
    /* Registers first: they give the stack pointers of running threads. */
    uint64_t *regs = NULL;
    known_sps_t known = {.n = 0};
    size_t nregs = rc == 0 && nb > 0 ? thread_registers(pid, exit_sp, &regs, &known) : 0;
    /* The exiting thread's registers the process saved (exit or abort's caller). */
    if (rc == 0 && nb > 0 && exit_nregs) {
        uint64_t *nv = realloc(regs, (nregs + exit_nregs) * sizeof *nv);
        if (nv) {
            memcpy(nv + nregs, exit_regs, exit_nregs * sizeof *nv);
            regs = nv;
            nregs += exit_nregs;
        }
    }
    if (rc == 0) rc = collect_roots(pid, mem_pid, leader_gone, &known, &b, (size_t)nb, exit_sp, glibc, crash,
                                    raw_registry, sbrk_registry, &roots, &owned, &freed, note);
    if (rc == 0 && nregs && push_range(&roots, REGS_AT, REGS_AT + nregs * 8) < 0) nregs = 0;
    if (rc == 0 && nb > 0) rc = stdio_buffers(mem_pid, stdio_list, &freed);
    ml_reach_stats_t st = {0};
    if (rc == 0 && nb > 0) {
        v = malloc((size_t)nb);
        long page = sysconf(_SC_PAGESIZE);
        char pm[64];
        snprintf(pm, sizeof pm, "/proc/%d/pagemap", (int)mem_pid);
        reader_t rd = {mem_pid, NULL, 0, regs, nregs, NULL, 0, open(pm, O_RDONLY | O_CLOEXEC),
                       page > 0 ? (uint64_t)page : 4096};
        read_filemaps(&rd);
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        ml_reach_io_t io = {
            .read = scan_read,
            .ctx = &rd,
            .glibc_chunk_alias = glibc,
            .deadline_ns = t0 + SCAN_BUDGET_NS,
            /* The target waits for the scan: its CPU is free. */
            .threads = cpus > SCAN_THREADS ? SCAN_THREADS : (int)cpus,
            .heuristics = true, /* as valgrind's default */
            .map_flags = map_flags,
            .owned = owned.v,
            .nowned = owned.n,
            .freed = freed.v,
            .nfreed = freed.n,
            .resident_run = resident_run,
        };
        /* Blocks of 1 TiB or more are not read (ML_REACH_HUGE_BLOCK): said on
         * stderr, and in the trace when no huge mapping took the note. */
        uint64_t nbig = 0, big_bytes = 0, hint = 0;
        for (int64_t i = 0; i < nb; i++) {
            uint64_t bp, bs;
            ml_reach_block_at(&b, (size_t)i, &hint, &bp, &bs);
            if (bs >= ML_REACH_HUGE_BLOCK) nbig++, big_bytes += bs;
        }
        if (nbig) {
            static const char lead[] = "not scanned: ";
            ml__scan_note_t own, *n = note && !note->count ? note : &own;
            char sz[32];
            n->count = nbig;
            snprintf(n->text, sizeof n->text,
                     "%sprocess %d: %" PRIu64 " heap block%s of %s not scanned for pointers at exit: 1 TiB or "
                     "more each, address space an allocator granted; a block held only from there counts as "
                     "leaked",
                     lead, (int)pid, nbig, nbig == 1 ? "" : "s", ml_fmt_bytes(big_bytes, sz, sizeof sz));
            fprintf(stderr, "memlens: %s\n", n->text + sizeof lead - 1);
        }
        rc = v ? ml_reach_classify_blocks(&b, roots.v, roots.n, &io, v, &st) : -ENOMEM;
        free(rd.maps);
        free(rd.anon);
        if (rd.pagemap >= 0) close(rd.pagemap);
    }
    free(regs);
    /* The verdicts are made: the process need not wait while they are
     * written (on 7.5 M blocks, 0.3 s; its own exit then overlaps it). */
    release(ctx);
    if (rc == 0) {
        /* A record for each block whose verdict is not the most common one,
         * then one (ML_T_REACH_REST) for all the others: a program that
         * exits with 7.5 M blocks still reachable wrote 7.5 M records,
         * 0.25-0.4 s of the collector's time after the program's exit, and
         * every report read them back. */
        uint64_t count[ML_REACH_POSSIBLE + 1] = {0};
        for (int64_t i = 0; i < nb; i++)
            if (!is_own || is_own[i]) count[v[i] <= ML_REACH_POSSIBLE ? v[i] : 0]++;
        uint8_t most = ML_REACH_REACHABLE;
        for (uint8_t k = ML_REACH_REACHABLE; k <= ML_REACH_POSSIBLE; k++)
            if (count[k] > count[most]) most = k;
        /* The addresses first, and the table freed: it reads the live set
         * in place, and the records emitted go to the analysis on the
         * stage-2 thread, which writes the verdicts into that same set. */
        uint64_t others = (uint64_t)nown - count[most], k = 0, hint = 0, size;
        uint64_t *at = others ? malloc(others * sizeof *at) : NULL;
        if (others && !at) {
            rc = -ENOMEM;
            others = 0;
            count[most] = 0;
        }
        for (int64_t i = 0; k < others && i < nb; i++)
            if (v[i] != most && (!is_own || is_own[i])) ml_reach_block_at(&b, (size_t)i, &hint, &at[k++], &size);
        ml_reach_blocks_free(&b);
        /* Set up once: a record is ~600 bytes. */
        ml_record_t r = {.tag = ML_T_BLOCK_REACH, .time_ms = time_ms, .thread = thread};
        for (int64_t i = 0, j = 0; j < (int64_t)k && i < nb; i++) {
            if (v[i] == most || (is_own && !is_own[i])) continue;
            r.u.block_reach.ptr = at[j++];
            r.u.block_reach.reach = v[i];
            emit(ctx, &r);
        }
        free(at);
        if (count[most]) {
            r.tag = ML_T_REACH_REST;
            r.u.block_reach.ptr = 0;
            r.u.block_reach.reach = most;
            emit(ctx, &r);
        }
    }
    if (rc == 0 && is_own) {
        /* The summary counts the child's own blocks (ML_T_REACH_SCAN). */
        st.reachable = st.indirect = st.definite = st.possible = 0;
        for (int64_t i = 0; i < nb; i++) {
            if (!is_own[i]) continue;
            if (v[i] == ML_REACH_REACHABLE) st.reachable++;
            else if (v[i] == ML_REACH_INDIRECT) st.indirect++;
            else if (v[i] == ML_REACH_DEFINITE) st.definite++;
            else if (v[i] == ML_REACH_POSSIBLE) st.possible++;
        }
    }
    if (rc == 0) {
        sum.u.reach_scan.root_bytes = st.root_bytes;
        sum.u.reach_scan.heap_bytes = st.heap_bytes;
        sum.u.reach_scan.blocks = (uint64_t)nown;
        sum.u.reach_scan.reachable = st.reachable;
        sum.u.reach_scan.indirect = st.indirect;
        sum.u.reach_scan.definite = st.definite;
    }
    sum.u.reach_scan.status = rc;
    sum.u.reach_scan.duration_us = (mono_ns() - t0) / 1000;
    emit(ctx, &sum);
    ml_reach_blocks_free(&b);
    free(merged);
    free(is_own);
    free(merged_seq);
    free(v);
    free(roots.v);
    free(owned.v);
    free(freed.v);
    /* The scan's tables for a fork child's inherited blocks come and go with
     * each child: 1,300 forks of a bash holding 12.8 k blocks left the
     * collector's heap 25 MB larger without this. */
    if (inh && nb > 4096) malloc_trim(0);
    return rc;
}
