/* runtime.c - start-up, the link to the collector, event emission, modules,
 * fork and exit handling for libmemlens.so. */
#define _GNU_SOURCE
#include "interpose_internal.h"
#include "../trace/ml_options.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/single_threaded.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

ml_real_t ml__real;
_Atomic int ml__state = ML_STATE_UNINIT;
ml_ctl_t *ml__ctl;
ml_ring_hdr_t *ml__ring;
uint64_t ml__sample_bytes;
_Atomic int ml__modcheck;
uint32_t ml__mallinfo_seen;
ML_TLS ml_tls_t ml__tls;

static uint32_t proc_slot = ~0u;
static _Atomic uint32_t recorded_pid; /* the pid this image registered with */
static _Atomic int exit_asked;        /* the exit handshake was made (exit_handshake) */
static _Atomic int exit_over;         /* ... and has ended */
static _Atomic int first_exit_tid;    /* the thread whose exit() call came first (0: none yet) */
static _Atomic uint64_t hold_until_ns; /* the end of ml__exit_hold (CLOCK_MONOTONIC); 0: scan not done */
static char ctl_path[256];
static ml_ctl_proc_t *ctl_proc(uint32_t i);
static _Atomic uint32_t next_thread;
static struct mallinfo2 (*real_mallinfo2)(void);

/* The busy flags (interpose_internal.h): one cache line a thread, in .bss,
 * so that only the pages of threads that ran are ever touched. A process
 * that starts more than ML_BUSY_SLOTS threads shares slots between them
 * (counted modulo): the exit settle then cannot tell two such threads
 * apart, and a call of one may come after the exit record, as it could
 * before the flags existed. */
ml_busy_t ml__busy[ML_BUSY_SLOTS] __attribute__((aligned(64)));
static _Atomic uint32_t busy_next; /* slots handed out (modulo ML_BUSY_SLOTS) */

_Atomic uint32_t *ml__busy_assign(void) {
    uint32_t i = ml_atomic_add_relaxed(&busy_next, 1) % ML_BUSY_SLOTS;
    ml__tls.busy = &ml__busy[i].flag;
    return ml__tls.busy;
}

/* ------------------------------------------------------------------------- */
/* Small libc-free helpers                                                   */
/* ------------------------------------------------------------------------- */

void *ml__raw_mmap(size_t len, int prot, int flags, int fd) {
    long r = syscall(SYS_mmap, NULL, len, prot, flags, fd, 0);
    return (r < 0 && r > -4096) ? NULL : (void *)r;
}

/* The registry of our own mappings (ml_raw_registry_t), grown by doubling
 * under raw_lock; the ring header of each process image points to it. */
static ml_raw_registry_t *raw_reg;
static _Atomic int raw_lock;

/* The brk heap memory the program took with sbrk/brk itself (the sbrk and
 * brk hooks below): roots for the exit scan, which otherwise leaves the brk
 * heap to the block-by-block scan of glibc's main arena. */
static ml_sbrk_registry_t sbrk_reg;

static void raw_publish(void) {
    if (!ml__ring) return;
    ml_atomic_store_release(&ml__ring->raw_registry, (uint64_t)(uintptr_t)raw_reg);
    ml_atomic_store_release(&ml__ring->sbrk_registry, (uint64_t)(uintptr_t)&sbrk_reg);
}

static uint64_t page_up(uint64_t v) {
    uint64_t page = (uint64_t)getauxval(AT_PAGESZ);
    if (!page) page = 4096;
    return (v + page - 1) & ~(page - 1);
}

static void raw_list(uint64_t lo, uint64_t hi) {
    ml__spin_lock(&raw_lock);
    ml_raw_registry_t *g = raw_reg;
    if (!g || g->n + 2 > g->cap) { /* room for the entry and the new registry */
        uint64_t cap = g ? g->cap * 2 : 256;
        size_t bytes = sizeof *g + cap * sizeof g->r[0];
        ml_raw_registry_t *ng = ml__raw_mmap(bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
        if (!ng) {
            ml__spin_unlock(&raw_lock);
            return; /* unlisted: scanned as a root, as before the registry */
        }
        ng->cap = cap;
        if (g) {
            memcpy(ng->r, g->r, g->n * sizeof g->r[0]);
            ng->n = g->n;
        }
        ng->r[ng->n].lo = (uint64_t)(uintptr_t)ng;
        ng->r[ng->n].hi = page_up((uint64_t)(uintptr_t)ng + bytes);
        ng->n++;
        raw_reg = g = ng;
        raw_publish();
    }
    g->r[g->n].lo = lo;
    g->r[g->n].hi = hi;
    g->n++;
    ml__spin_unlock(&raw_lock);
}

void *ml__raw_alloc(size_t len) {
    void *p = ml__raw_alloc_unlisted(len);
    if (p) raw_list((uint64_t)(uintptr_t)p, page_up((uint64_t)(uintptr_t)p + len));
    return p;
}

void ml__spin_lock(_Atomic int *lock) {
    int expected = 0;
    while (!ml_atomic_cas_strong_acq_rel(lock, &expected, 1)) {
        expected = 0;
        sched_yield();
    }
}

static size_t ml_strlen(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

/* Whether descriptor 2 is memlens' own stderr, where `memlens run` writes
 * its messages: the file the session's control header names (err_dev,
 * err_ino), or before the header is mapped, the file /proc/PID/fd/2 of
 * memlens names, whose pid is in the session's name (memlens-PID-...). A
 * program may have closed its stderr and opened a file of its own on
 * descriptor 2 (run with `2>&-`, or a daemon), or pointed it at a log
 * (`exec 2>log`): the library's warnings went into that file. So a warning
 * is written only where memlens' are; when memlens' stderr is closed or
 * cannot be looked at (the process runs as another user now), nothing is.
 * What the warnings say is in the trace or the run's summary as well. */
static bool stderr_is_memlens(void) {
    struct stat a, b;
    if (ml__ctl)
        return ml__ctl->err_open && fstat(2, &b) == 0 && (uint64_t)b.st_dev == ml__ctl->err_dev &&
               (uint64_t)b.st_ino == ml__ctl->err_ino;
    const char *name = ctl_path;
    for (const char *q = ctl_path; *q; q++)
        if (*q == '/') name = q + 1;
    const char *pre = "memlens-";
    for (size_t i = 0; pre[i]; i++, name++)
        if (*name != pre[i]) return true; /* no session named yet: as before */
    char proc[48] = "/proc/";
    size_t n = 6;
    while (*name >= '0' && *name <= '9' && n < 6 + 12) proc[n++] = *name++;
    if (n == 6) return true;
    const char *tail = "/fd/2";
    for (size_t i = 0; tail[i]; i++) proc[n++] = tail[i];
    proc[n] = '\0';
    return stat(proc, &a) == 0 && fstat(2, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Writes buf to descriptor 2 without SIGPIPE, the program's errno kept.
 * memlens' stderr may be a pipe whose reader is gone (`memlens run ...
 * 2>&1 | head -1`): a warning of ours then raised SIGPIPE in the program,
 * killing a child that would not write there itself (status 141 where it
 * exits 3 alone). SIGPIPE is blocked in this thread across the write; the
 * one the write raised (directed at this thread) is taken back, unless one
 * was pending already (the program's own). */
static void write_stderr(const char *buf, size_t n) {
    int saved = errno;
    sigset_t pipe_only, old, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    bool masked = pthread_sigmask(SIG_BLOCK, &pipe_only, &old) == 0;
    ssize_t rc = write(2, buf, n);
    if (rc < 0 && errno == EPIPE && masked && !was_pending) {
        struct timespec zero = {0, 0};
        (void)sigtimedwait(&pipe_only, NULL, &zero);
    }
    if (masked) pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
}

static void warn(const char *msg) {
    if (!stderr_is_memlens()) return;
    char buf[256];
    size_t n = 0;
    const char *pre = "memlens: warning: ";
    for (size_t i = 0; pre[i] && n < sizeof buf - 2; i++) buf[n++] = pre[i];
    for (size_t i = 0; msg[i] && n < sizeof buf - 2; i++) buf[n++] = msg[i];
    buf[n++] = '\n';
    write_stderr(buf, n);
}

/** A warning of libmemlens_cupti.so (found with dlsym, as memlens_gpu_record
 * is), written as this library writes its own: only where descriptor 2 is
 * memlens' stderr, never into a file of the program's, and without
 * SIGPIPE. */
ML_EXPORT void memlens_warn(const char *msg);
ML_EXPORT void memlens_warn(const char *msg) {
    if (msg) warn(msg);
}

/* "memlens: warning: " and the parts (NULL-terminated) on one line. */
static void warnv(const char *const *parts) {
    if (!stderr_is_memlens()) return;
    char buf[512];
    size_t n = 0;
    const char *pre = "memlens: warning: ";
    for (size_t i = 0; pre[i] && n < sizeof buf - 2; i++) buf[n++] = pre[i];
    for (; *parts; parts++)
        for (size_t i = 0; (*parts)[i] && n < sizeof buf - 2; i++) buf[n++] = (*parts)[i];
    buf[n++] = '\n';
    write_stderr(buf, n);
}

/* The reason for an errno, without strerror (which may allocate). */
static const char *errno_reason(int e) {
    switch (e) {
    case EEXIST: return "the name is taken (EEXIST)";
    case EACCES: return "permission denied (EACCES)";
    case EPERM: return "operation not permitted (EPERM)";
    case ENOSPC: return "no space left in /dev/shm (ENOSPC)";
    case ENOMEM: return "out of memory (ENOMEM)";
    case EMFILE: return "too many open files (EMFILE)";
    case ENFILE: return "too many open files in the system (ENFILE)";
    case ENOENT: return "/dev/shm or the session is gone (ENOENT)";
    case EROFS: return "read-only file system (EROFS)";
    case EFBIG: return "the program's file size limit is below the ring's size (EFBIG)";
    default: return "unexpected error";
    }
}

static char *u32_to_str(char *end, uint32_t v) {
    *--end = '\0';
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

/* ------------------------------------------------------------------------- */
/* Bootstrap pool                                                            */
/* ------------------------------------------------------------------------- */

/* dlsym() calls calloc() while we resolve calloc; these early requests (and
 * any made by other threads before the real allocator is known) are served
 * from this static pool and never reach the real free(). */
static _Alignas(64) char boot_pool[256 * 1024];
static _Atomic size_t boot_used;

void *ml__boot_alloc(size_t n, size_t align) {
    if (align < 16) align = 16;
    for (;;) {
        size_t old = ml_atomic_load_relaxed(&boot_used);
        size_t start = (old + align - 1) & ~(align - 1);
        if (start + n > sizeof boot_pool || start + n < start) return NULL;
        if (ml_atomic_cas_strong_acq_rel(&boot_used, &old, start + n)) return boot_pool + start;
    }
}

size_t ml__boot_avail(const void *p) {
    return (size_t)(boot_pool + sizeof boot_pool - (const char *)p);
}

bool ml__is_boot(const void *p) {
    return (const char *)p >= boot_pool && (const char *)p < boot_pool + sizeof boot_pool;
}

/* libmemlens.so's writable segments (.data, and .bss, whose part past the
 * file is an anonymous mapping without a name) are ours too, except the
 * boot pool, which holds blocks the loader and libc allocated before we
 * could record them (they may point to the program's).
 *
 * So are libunwind's, which memlens loads into the program. Its .bss keeps
 * the pages it last checked were readable while it walked a stack (its
 * fallback path: signal frames, code without unwind tables). A signal
 * handler's alternate stack or a coroutine's stack is often a heap block,
 * and those page addresses pointed into it: the exit scan called a
 * malloc'd sigaltstack that the program had lost "possible", where valgrind
 * (no libunwind in the program) says "definite" (tests/leaks/lk_altstack.c).
 * A program that uses libunwind itself keeps no heap pointers there:
 * local unwinding takes its memory from mmap, never from malloc. */
typedef struct {
    const void *self, *unwinder; /* the modules' load bases */
} own_modules_t;

static int list_own_segments(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    const own_modules_t *own = arg;
    const void *base = (const void *)info->dlpi_addr;
    if (base != own->self && (base != own->unwinder || !own->unwinder)) return 0;
    uint64_t pool_lo = (uint64_t)(uintptr_t)boot_pool, pool_hi = pool_lo + sizeof boot_pool;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W)) continue;
        uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = page_up(lo + ph->p_memsz);
        if (pool_lo >= lo && pool_hi <= hi) {
            raw_list(lo, pool_lo);
            raw_list(pool_hi, hi);
        } else {
            raw_list(lo, hi);
        }
    }
    return 0; /* the other module may come later */
}

static void list_own_memory(void) {
    Dl_info self, uw;
    own_modules_t own = {NULL, NULL};
    if (dladdr((void *)ml__init, &self)) own.self = self.dli_fbase;
    if (dladdr(ml__unwinder_text(), &uw) && uw.dli_fbase != own.self) own.unwinder = uw.dli_fbase;
    if (own.self || own.unwinder) dl_iterate_phdr(list_own_segments, &own);
}

/* ------------------------------------------------------------------------- */
/* Emission                                                                  */
/* ------------------------------------------------------------------------- */

bool ml__collector_alive(void) {
    /* The collector refused this image (it could not open its ring or
     * write its trace): nobody will drain the ring. */
    ml_ctl_proc_t *own = proc_slot < ML_MAX_PROCS ? ctl_proc(proc_slot) : NULL;
    if (own && ml_atomic_load_acquire(&own->state) == ML_PROC_FAILED) return false;
    return kill((pid_t)ml__ctl->collector_pid, 0) == 0 || errno == EPERM;
}

static void give_up(void) {
    /* The collector is gone: nothing can read the ring any more. Stop
     * recording; the program goes on untouched. */
    ml__state_set(ML_STATE_OFF);
}

static void announce_thread(void) {
    ml_tls_t *t = &ml__tls;
    uint32_t idx = ml_atomic_add_relaxed(&next_thread, 1);
    t->thread = idx > 0xffff ? 0xffff : (uint16_t)idx;
    t->has_thread = 1;
    ml_blob_thread_t b;
    memset(&b, 0, sizeof b);
    b.index = t->thread;
    b.tid = (uint32_t)syscall(SYS_gettid);
    t->tid = b.tid;
    prctl(PR_GET_NAME, b.name, 0, 0, 0);
    ml__emit_blob(ML_BLOB_THREAD, &b, sizeof b);
}

/* A thread the program renamed (prctl(PR_SET_NAME), pthread_setname_np)
 * after its first hook call had announced it: its record again, with the
 * new name, which the analysis takes for that index. The threads table
 * then has the names the program gave, as /proc/PID/task/TID/comm says
 * them: a daemon that named itself (rsyslogd's "rs:main Q:Reg", a worker
 * named by its creator once started) kept the name it had at its first
 * allocation (the executable's, or its creator's). t is the thread's state:
 * its own, or another thread's at the same offset from that thread's
 * pointer (initial-exec TLS; the caller holds a live pthread_t). */
static void thread_renamed(ml_tls_t *t, const char *name) {
    if (!ml__recording()) return;
    ml__tls.guard++;
    if (t->has_thread) {
        ml_blob_thread_t b;
        memset(&b, 0, sizeof b);
        b.index = t->thread;
        b.tid = t->tid;
        strncpy(b.name, name, sizeof b.name - 1); /* the kernel keeps 15 bytes, as here */
        ml__emit_blob(ML_BLOB_THREAD, &b, sizeof b);
    }
    ml__tls.guard--;
    ml__call_done();
}

static void *_Atomic real_setname;

ML_EXPORT int pthread_setname_np(pthread_t th, const char *name);
ML_EXPORT int pthread_setname_np(pthread_t th, const char *name) {
    int (*f)(pthread_t, const char *) =
        (int (*)(pthread_t, const char *))ml__next_symbol(&real_setname, "pthread_setname_np");
    if (!f) return ENOSYS;
    int rc = f(th, name);
    if (rc == 0) {
        int e = errno;
        pthread_t self = pthread_self();
        thread_renamed(th == self ? &ml__tls : (ml_tls_t *)((char *)th + ((char *)&ml__tls - (char *)self)), name);
        errno = e;
    }
    return rc;
}

void ml__emit(uint8_t type, uint8_t kind, uint8_t flags, uint64_t ptr, uint64_t size,
              uint32_t stack) {
    if (ml_unlikely(!ml__tls.has_thread)) announce_thread();
    ml_ring_hdr_t *h = ml__ring;
    uint64_t pos = ml_ring_claim(h, 1, ml__collector_alive);
    if (ml_unlikely(pos == ML_RING_GONE)) {
        give_up();
        return;
    }
    ml_slot_t *s = ml_ring_slot(h, pos);
    s->ev.type = (uint8_t)(type | flags << 4);
    s->ev.kind = kind;
    s->ev.thread = ml__tls.thread;
    s->ev.stack = stack;
    s->ev.time = ml_atomic_load_relaxed(&ml__ctl->clock_ms);
    s->ev.ptr = ptr;
    s->ev.size = size;
    ml_ring_publish(h, s, pos);
}

void ml__emit_blob(uint8_t kind, const void *payload, uint32_t len) {
    if (ml_unlikely(!ml__tls.has_thread)) announce_thread();
    ml_event_t hdr;
    memset(&hdr, 0, sizeof hdr);
    hdr.kind = kind;
    hdr.thread = ml__tls.thread;
    hdr.time = ml_atomic_load_relaxed(&ml__ctl->clock_ms);
    if (!ml_ring_write_blob(ml__ring, &hdr, payload, len, ml__collector_alive)) give_up();
}

/* ------------------------------------------------------------------------- */
/* Modules                                                                   */
/* ------------------------------------------------------------------------- */

/* The module map is what makes offline symbolization possible: every loaded
 * object's path, load bias, segments and build-id are recorded when first
 * seen, and an unload record is written when it disappears, so that PCs from
 * a plugin dlclose()d before exit still resolve (from its file) and an address
 * reused by a later dlopen is not confused with it. */

#define MAX_MODULES 4096
typedef struct {
    uint64_t base;
    uint64_t name_hash;
    uint64_t lo, hi;   /* the addresses its PT_LOAD segments span */
    uint64_t ident;    /* its path and build-id, hashed */
    uint32_t gen;
    uint16_t redirect; /* loaded since a dlopen with RTLD_DEEPBIND: tries left to redirect its GOT (0: done) */
} known_module_t;

static known_module_t known[MAX_MODULES];
static uint32_t nknown;

/* The stack nodes of unloaded objects. The stack trie (stacks.c) keys a
 * frame by its return address: when plugin b was loaded where plugin a had
 * been, with the same code layout, b's stacks were a's nodes, which the
 * analysis resolves in a's module, and b's blocks were reported as a's
 * (test_report `a_plugin_loaded_where_another_was_keeps_its_own_sites`).
 * An object the scan finds gone is listed in `gone`, its nodes left in the
 * trie: the same object (path and build-id) loaded again at the same place
 * keeps them, at no cost, and stays one site. When the scan finds another
 * object over a gone one's addresses, the gone one's nodes are parked:
 * taken out of the trie (in place, into a pool taken at start-up: nothing
 * is mapped then) and kept aside, and the new object's stacks get nodes of
 * their own. When an object comes back to where it was after another one
 * was there, its parked nodes go back in. A node recorded before the scan
 * found its object is given to that object by the analysis (analysis.c,
 * add_node). The thread that called dlopen looks for new objects before
 * each of its next stacks (SCAN_WAIT_NS): a stack taken in the new object
 * before that (another thread calling into it while dlopen runs) would
 * still get the gone object's nodes. At most MAX_GONE and MAX_PARKED
 * objects are kept: a gone one pushed out is parked, a parked one pushed
 * out is dropped (its stacks take new nodes if it comes back: more sites,
 * never wrong ones). */
#define MAX_GONE 64
#define MAX_PARKED 64
static ml_parked_t gone[MAX_GONE], parked[MAX_PARKED];
static uint32_t ngone, nparked;

/* What the scan decided while the loader's list was locked (dl_iterate_phdr),
 * done once it is not: parking takes the trie's lock, which a thread that
 * holds it must never wait for with the loader's list locked. In order: a
 * park before the unpark of the object that came back in its place. */
#define MAX_TODO 64
static struct {
    bool back;
    ml_parked_t m;
} todo[MAX_TODO];
static uint32_t ntodo;

static bool same_object(const ml_parked_t *a, uint64_t lo, uint64_t hi, uint64_t ident) {
    return a->ident == ident && a->lo == lo && a->hi == hi;
}

static void gone_drop(uint32_t i) {
    memmove(&gone[i], &gone[i + 1], (ngone - i - 1) * sizeof gone[0]);
    ngone--;
}

static void parked_drop(uint32_t i) {
    ml__stacks_park_free(&parked[i], parked, nparked);
    memmove(&parked[i], &parked[i + 1], (nparked - i - 1) * sizeof parked[0]);
    nparked--;
}

static void todo_add(bool back, const ml_parked_t *m) {
    if (ntodo < MAX_TODO) todo[ntodo++] = (typeof(todo[0])){back, *m};
}

static void todo_run(void) {
    for (uint32_t t = 0; t < ntodo; t++) {
        const ml_parked_t *m = &todo[t].m;
        if (!todo[t].back) {
            if (nparked == MAX_PARKED) parked_drop(0);
            parked[nparked] = *m;
            ml__stacks_park(m->lo, m->hi, &parked[nparked]);
            nparked++;
            continue;
        }
        for (uint32_t i = nparked; i > 0; i--)
            if (same_object(&parked[i - 1], m->lo, m->hi, m->ident)) {
                ml__stacks_unpark(&parked[i - 1]);
                parked_drop(i - 1);
                break;
            }
    }
    ntodo = 0;
}

/* A module that is no longer loaded. */
static void module_gone(const known_module_t *k) {
    if (k->hi <= k->lo) return;
    if (ngone == MAX_GONE) {
        todo_add(false, &gone[0]);
        gone_drop(0);
    }
    gone[ngone++] = (ml_parked_t){.lo = k->lo, .hi = k->hi, .ident = k->ident};
}

/* A module seen for the first time. */
static void module_back(const known_module_t *k) {
    for (uint32_t i = 0; i < ngone;) {
        ml_parked_t *g = &gone[i];
        if (g->hi <= k->lo || g->lo >= k->hi) {
            i++;
            continue;
        }
        if (!same_object(g, k->lo, k->hi, k->ident)) todo_add(false, g);
        gone_drop(i); /* else: this object back, its nodes still in the trie */
    }
    bool was = false;
    for (uint32_t i = 0; i < nparked; i++) was |= same_object(&parked[i], k->lo, k->hi, k->ident);
    for (uint32_t t = 0; t < ntodo; t++) was |= !todo[t].back && same_object(&todo[t].m, k->lo, k->hi, k->ident);
    if (was) todo_add(true, &(ml_parked_t){.lo = k->lo, .hi = k->hi, .ident = k->ident});
}

static uint32_t scan_gen;
static uint64_t last_adds = ~0ull, last_subs = ~0ull;
static _Atomic int scan_lock;
_Atomic uint64_t ml__scanned_adds;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static uint32_t find_build_id(struct dl_phdr_info *info, uint8_t *out) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
        const char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *n;
            const char *desc = name + ((n->n_namesz + 3) & ~3u);
            if (desc + n->n_descsz > end) break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                uint32_t len = n->n_descsz > 64 ? 64 : n->n_descsz;
                memcpy(out, desc, len);
                return len;
            }
            p = desc + ((n->n_descsz + 3) & ~3u);
        }
    }
    return 0;
}

static bool has_slash(const char *s) {
    for (; *s; s++)
        if (*s == '/') return true;
    return false;
}

/* A library opened by a relative path (dlopen("./plugin.so"), or a relative
 * entry of LD_LIBRARY_PATH) is listed by the loader under that path, which
 * means nothing to a report run in another directory. It is made absolute
 * against the working directory now, when the scan follows the dlopen that
 * loaded it; leading "./" components are dropped. false when it does not
 * fit: the path is then recorded as the loader gives it. */
static bool absolute_path(const char *rel, char *out, size_t cap) {
    if (!getcwd(out, cap) || out[0] != '/') return false;
    size_t n = ml_strlen(out);
    while (rel[0] == '.' && rel[1] == '/') {
        rel += 2;
        while (*rel == '/') rel++;
    }
    size_t len = ml_strlen(rel);
    if (n > 1) out[n++] = '/';
    if (n + len + 1 > cap) return false;
    memcpy(out + n, rel, len + 1);
    return true;
}

/* RTLD_DEEPBIND (ml__dlopen_enter): set once such a dlopen was called; the
 * modules found after it get their GOT entries redirected to the hooks
 * (attach.c, ml__deepbind_redirect), retried on the events after the
 * dlopen (ml__modcheck) until the loader has relocated them. A module
 * still not relocated after REDIRECT_TRIES is given up and counted. */
#define REDIRECT_TRIES 512
static _Atomic int deepbind_seen;
static uint32_t redirect_pending; /* under scan_lock */

static int redirect_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    for (uint32_t i = 0; i < nknown; i++) {
        known_module_t *k = &known[i];
        if (k->base != info->dlpi_addr || !k->redirect || k->gen != scan_gen) continue;
        if (!ml__deepbind_redirect || ml__deepbind_redirect(info) || !--k->redirect) {
            if (!k->redirect && ml__ring) ml_atomic_add_relaxed(&ml__ring->deepbind_unredirected, 1);
            k->redirect = 0;
            redirect_pending--;
        }
        break;
    }
    return 0;
}

static int scan_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    const char *name = info->dlpi_name;
    char exe[4096];
    if (!name || !*name) {
        /* The main program is the entry with an empty name. */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) return 0;
        exe[n] = '\0';
        name = exe;
    } else if (name[0] != '/' && has_slash(name) && absolute_path(name, exe, sizeof exe)) {
        name = exe;
    }
    uint64_t h = hash_str(name);
    for (uint32_t i = 0; i < nknown; i++)
        if (known[i].base == info->dlpi_addr && known[i].name_hash == h) {
            known[i].gen = scan_gen;
            return 0;
        }
    if (nknown == MAX_MODULES) return 0;

    struct {
        ml_blob_module_t m;
        uint8_t tail[4096 + 64];
    } b;
    _Static_assert((sizeof b + ML_SLOT_PAYLOAD - 1) / ML_SLOT_PAYLOAD + 1 < ML_MIN_RING_SLOTS,
                   "a module blob must fit in the smallest ring");
    memset(&b.m, 0, sizeof b.m);
    b.m.base = info->dlpi_addr;
    known_module_t *k = &known[nknown++];
    *k = (known_module_t){.base = info->dlpi_addr, .name_hash = h, .lo = UINT64_MAX, .gen = scan_gen};
    if (ml_atomic_load_relaxed(&deepbind_seen) && ml__ring && !ml__ring->malloc_elsewhere[0]) {
        k->redirect = REDIRECT_TRIES;
        redirect_pending++;
    }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (lo < k->lo) k->lo = lo;
        if (hi > k->hi) k->hi = hi;
        if (b.m.nsegs == ML_MAX_SEGMENTS) continue;
        b.m.segs[b.m.nsegs].vaddr = ph->p_vaddr;
        b.m.segs[b.m.nsegs].memsz = ph->p_memsz;
        b.m.segs[b.m.nsegs].flags = ph->p_flags;
        b.m.nsegs++;
    }
    if (k->lo > k->hi) k->lo = k->hi = 0;
    size_t plen = ml_strlen(name);
    if (plen > 4096) plen = 4096;
    memcpy(b.tail, name, plen);
    b.m.path_len = (uint32_t)plen;
    b.m.build_id_len = (uint16_t)find_build_id(info, b.tail + plen);
    k->ident = h;
    for (uint32_t i = 0; i < b.m.build_id_len; i++) k->ident = (k->ident ^ b.tail[plen + i]) * 1099511628211ull;
    /* Two objects never share addresses: one listed where this one is was
     * unloaded since the last scan. */
    for (uint32_t i = 0; i + 1 < nknown;) {
        known_module_t *o = &known[i];
        if (o->hi <= o->lo || o->hi <= k->lo || o->lo >= k->hi) {
            i++;
            continue;
        }
        module_gone(o);
        uint64_t base = o->base;
        ml__emit_blob(ML_BLOB_MODULE_UNLOAD, &base, sizeof base);
        memmove(o, o + 1, (nknown - i - 1) * sizeof *o);
        k = &known[--nknown - 1];
    }
    module_back(k);
    ml__emit_blob(ML_BLOB_MODULE, &b, (uint32_t)(sizeof b.m + plen + b.m.build_id_len));
    return 0;
}

static uint64_t mono_ns(void);

/* A program that sandboxes itself with a seccomp filter (sshd's pre-auth
 * child, browsers' renderers) may be killed by a system call it never
 * makes itself, and memlens must not make one there that the program
 * would not have made. Its exit handshake asked prctl(PR_GET_DUMPABLE) of
 * every process: a filter that kills on prctl killed the program at its
 * exit (SIGSYS, its stdout never flushed). So memlens notes a filter the
 * program installs (prctl(PR_SET_SECCOMP), here; the seccomp system call
 * through syscall(), syscall_x86_64.S; a fork child inherits the note). A
 * filter the image started under is not noted: containers run everything
 * under one (Docker's default allows prctl), and a process that dropped
 * its privileges there is not dumpable, so its scan needs the prctl.
 * 1: strict mode, 2: a filter. */
int ml__seccomp_mode;

/* setsid() of the program `memlens run` started. Run alone by a shell with
 * job control (or by anything that gives it a process group of its own:
 * systemd, start_new_session), the program leads its process group, and
 * setsid() fails with EPERM: a group leader cannot make a session. Under
 * memlens, memlens holds that place and the program is a member of its
 * group, so the call succeeded: the program left the terminal's session,
 * Ctrl-C no longer reached it, and a program that prints the result
 * printed another one. So while this process is memlens' child and
 * memlens leads the group this process is in (where the program alone
 * would lead it), the call fails as it would have. Anywhere else (a
 * fork's child daemonising, a script without job control, attach) it is
 * passed on. */
static void *_Atomic real_setsid;

ML_EXPORT pid_t setsid(void);
ML_EXPORT pid_t setsid(void) {
    pid_t (*f)(void) = (pid_t (*)(void))ml__next_symbol(&real_setsid, "setsid");
    ml_ctl_t *c = ml__ctl;
    pid_t m = c ? (pid_t)c->collector_pid : 0;
    if (m > 0 && getppid() == m && getpgrp() == m) {
        errno = EPERM;
        return -1;
    }
    return f ? f() : (pid_t)syscall(SYS_setsid);
}

static void *_Atomic real_prctl;

ML_EXPORT int prctl(int option, ...);
ML_EXPORT int prctl(int option, ...) {
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
                  a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
    va_end(ap);
    int (*f)(int, ...) = (int (*)(int, ...))ml__next_symbol(&real_prctl, "prctl");
    if (!f) return (int)syscall(SYS_prctl, option, a2, a3, a4, a5);
    if (option == PR_SET_SECCOMP) ml__seccomp_mode = a2 == 1 ? 1 : 2; /* before: it may apply at once */
    int rc = f(option, a2, a3, a4, a5);
    if (option == PR_SET_NAME && rc == 0 && a2) {
        int e = errno;
        thread_renamed(&ml__tls, (const char *)a2);
        errno = e;
    }
    return rc;
}

/* How long the thread that called dlopen waits, before it takes a stack,
 * for a scan under way in another thread: not long, since it may hold the
 * loader's lock that the other scan needs (an allocation inside dlopen),
 * but long enough for a scan that is not held up, so that the new object
 * is most often in the module map before a stack that runs in it is taken
 * (such a stack is right either way, analysis.c add_node; but when the
 * object came back to where it was, a stack taken before the scan sees it
 * gets a new node rather than its parked one: one more site). Other threads
 * skip a scan that finds another one under way, as they always did. */
#define SCAN_WAIT_NS 200000
/* Stacks of the thread that called dlopen that look first. */
#define DLOPEN_STACKS 256

void ml__modules_scan(bool full) {
    ml__modules_scan_waiting(full, 0);
}

void ml__modules_scan_own_dlopen(void) {
    ml__tls.dlopened--;
    /* Not keyed on ml__modcheck: other threads' events use that up. */
    ml__modules_scan_waiting(false, SCAN_WAIT_NS);
}

static void modules_scan_waiting(bool full, uint64_t wait_ns);

/* The program's errno is put back: the scan reads links and files. */
void ml__modules_scan_waiting(bool full, uint64_t wait_ns) {
    int saved_errno = errno;
    modules_scan_waiting(full, wait_ns);
    errno = saved_errno;
}

static void modules_scan_waiting(bool full, uint64_t wait_ns) {
    int st = ml__state_relaxed();
    if (st != ML_STATE_READY && st != ML_STATE_INIT) return;
    int expected = 0;
    /* One scanner at a time; a thread that finds a scan under way skips
     * its own (the scanner will see the same list), or waits for it up to
     * wait_ns: the scan under way may be waiting for the loader's lock
     * (dl_iterate_phdr), which the waiting thread may hold (an allocation
     * inside dlopen), so never for long. dlclose, once the real one
     * returned, holds none, and waits longer for the scan that must see its
     * object gone before another is loaded there. */
    uint64_t until = wait_ns ? mono_ns() + wait_ns : 0;
    for (unsigned tries = 0; !ml_atomic_cas_strong_acq_rel(&scan_lock, &expected, 1); tries++) {
        if (!wait_ns || mono_ns() > until) return;
        expected = 0;
        if (tries < 64) {
            sched_yield();
        } else { /* a scan held up (by a full ring, say): sleep, leave the CPU to the collector */
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    uint64_t v[2];
    ml__loader_counts(v);
    if (full || v[0] != last_adds || v[1] != last_subs) {
        /* An object was added: most likely this thread's dlopen's, which
         * its looks before its stacks were waiting for (SCAN_WAIT_NS); they
         * stop here rather than scan before each of 256 stacks (8 threads
         * opening and closing libraries took three times the CPU). */
        if (v[0] != last_adds) ml__tls.dlopened = 0;
        last_adds = v[0];
        last_subs = v[1];
        scan_gen++;
        dl_iterate_phdr(scan_cb, NULL);
        uint32_t j = 0;
        for (uint32_t i = 0; i < nknown; i++) {
            if (known[i].gen != scan_gen) {
                if (known[i].redirect) redirect_pending--; /* unloaded before it was redirected */
                module_gone(&known[i]);
                uint64_t base = known[i].base;
                ml__emit_blob(ML_BLOB_MODULE_UNLOAD, &base, sizeof base);
                continue;
            }
            known[j++] = known[i];
        }
        nknown = j;
        todo_run();
        static uint64_t lohi[MAX_MODULES][2]; /* under scan_lock */
        uint32_t n = 0;
        for (uint32_t i = 0; i < nknown; i++)
            if (known[i].hi > known[i].lo) lohi[n][0] = known[i].lo, lohi[n++][1] = known[i].hi;
        ml__stacks_set_modules(lohi, n);
    }
    if (redirect_pending) dl_iterate_phdr(redirect_cb, NULL);
    ml_atomic_store_release(&ml__scanned_adds, v[0]);
    ml_atomic_store_release(&scan_lock, 0);
}

/* Before a stack is interned whose walk went through an object that
 * dlclose can unload: the walker read the loader's count of loaded objects
 * (`adds`) for it (unwind.c). When that count is ahead of the last scan's,
 * an object was loaded that the module map does not have yet, and the
 * stack may run in it: maybe where an unloaded object was, whose trie
 * nodes (keyed by return address) it would take until a scan parks them.
 * So the scan is made first, as for the stacks of the thread that called
 * dlopen. This is the case of a thread that calls into an object another
 * thread has just loaded, before anything else has looked (a plugin host's
 * worker). A scan under way is waited for longer than in the dlopen
 * thread (which may hold the loader's lock): with more threads than CPUs
 * its holder can be off the CPU for milliseconds. Still bounded: a program
 * that allocates inside its own dl_iterate_phdr callback holds the lock
 * that scan waits for. Returns whether the module map has `adds` now. */
#define SCAN_BEHIND_WAIT_NS 100000000
bool ml__modules_scan_behind(uint64_t adds) {
    ml__modules_scan_waiting(false, SCAN_BEHIND_WAIT_NS);
    return ml_atomic_load_acquire(&ml__scanned_adds) >= adds;
}

/* glibc's mallinfo2() walks every chunk of every free list under each
 * arena's lock: microseconds on a fresh heap, but seconds once a program
 * has freed millions of small blocks (Python's teardown of a 7 M-object
 * heap made the program spend all its time there when called twice a
 * second). So a sample is taken only when the time since the last one is at
 * least MALLINFO_COST_FACTOR times what the last one cost: mallinfo2 never
 * takes more than about 1 % of the program's time, and a cheap call keeps
 * the collector's rate. Races between threads only move a sample by one
 * request. The timeline's mallinfo samples thin out accordingly. */
#define MALLINFO_COST_FACTOR 100
/* The sample at exit is taken anyway when the last one took at most this. */
#define MALLINFO_FINAL_MAX_NS 10000000u
/* The cost of the last sample does not tell the cost of the next one after
 * the heap lost millions of blocks: on a 700,000-object copy of the python3
 * big heap the sample at exit, after the teardown freed its 6.66 M blocks,
 * took 381 ms, the one before it 1.4 ms (perf probe on mallinfo2); on the
 * whole heap, 19.0 M blocks, 1.25-1.28 s: about 0.06 us per block freed.
 * So no sample is taken while the heap holds more than this many blocks
 * fewer than it held at most since the last one (ml_ring_hdr_t.heap_drop,
 * the collector's count): about 4 ms of mallinfo2. */
#define MALLINFO_DROP_MAX 65536u
static uint64_t mallinfo_next_ns; /* monotonic time before which requests are skipped */
static uint64_t mallinfo_cost_ns; /* what the last sample took */

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool mallinfo_due(void) {
    uint64_t next = ml_atomic_load_relaxed(&mallinfo_next_ns);
    return !next || mono_ns() >= next;
}

static bool heap_dropped(void) {
    return ml__ring && ml_atomic_load_relaxed(&ml__ring->heap_drop) > MALLINFO_DROP_MAX;
}

static void mallinfo_sample(void) {
    uint64_t t0 = mono_ns();
    struct mallinfo2 mi = real_mallinfo2();
    uint64_t t1 = mono_ns();
    ml_atomic_store_relaxed(&mallinfo_cost_ns, t1 - t0);
    ml_atomic_store_relaxed(&mallinfo_next_ns, t1 + MALLINFO_COST_FACTOR * (t1 - t0));
    ml_blob_mallinfo_t b = {mi.arena, mi.hblkhd, mi.uordblks, mi.fordblks, mi.keepcost};
    ml__emit_blob(ML_BLOB_MALLINFO, &b, sizeof b);
}

/* Called after an event when the cheap attention checks fire: after a dlopen
 * (a bounded number of re-checks, since the new module may be added to the
 * link map after the first allocation inside dlopen) or when the collector
 * asked for a glibc counter sample. */
void ml__attention(void) {
    int saved_errno = errno; /* the scan's and the sample's system calls */
    if (ml_atomic_load_relaxed(&ml__modcheck) > 0) {
        ml_atomic_add_relaxed(&ml__modcheck, -1);
        ml__modules_scan(false);
    }
    uint32_t gen = ml_atomic_load_relaxed(&ml__ctl->mallinfo_gen);
    if (gen != ml__mallinfo_seen) {
        ml__mallinfo_seen = gen;
        if (real_mallinfo2 && mallinfo_due() && !heap_dropped()) mallinfo_sample();
    }
    errno = saved_errno;
}



/* ------------------------------------------------------------------------- */
/* Sampling                                                                  */
/* ------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* -ln(u) for a normal double u in (0, 1], without libm: the library would
 * otherwise load libm into every program it is preloaded into, and change
 * what a program that loads libm itself later allocates (ld.so's records
 * of a library already there; docs/analysis.md, "Programs no test was
 * written for"). u = m * 2^e with m in [sqrt(1/2), sqrt(2)), and
 * ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: six terms of the
 * series leave an error below 2e-11 of ln 2, relative to the result
 * (test_interpose checks it against libm). */
double ml__neg_log(double u) {
    uint64_t b;
    memcpy(&b, &u, sizeof b);
    int e = (int)((b >> 52) & 0x7ff) - 1023;
    b = (b & ((1ull << 52) - 1)) | (1023ull << 52); /* m in [1, 2) */
    double m;
    memcpy(&m, &b, sizeof m);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double ln_m = 2.0 * s * (1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 + s2 / 11)))));
    return -((double)e * 0.6931471805599453 + ln_m);
}

static int64_t draw_interval(ml_tls_t *t) {
    /* Exponential with mean sample_bytes: the gaps of a Poisson process over
     * allocated bytes, as tcmalloc's heap sampler draws them. */
    double u = (double)(rng_next(&t->rng) >> 11) * (1.0 / 9007199254740992.0);
    if (u < 1e-12) u = 1e-12;
    double v = ml__neg_log(u) * (double)ml__sample_bytes;
    return v > 1e15 ? (int64_t)1e15 : (int64_t)v + 1;
}

/* The countdown crossed zero (ml__sample_hit already subtracted n), or the
 * thread has not drawn its first interval yet. The next sample point is a
 * fresh draw from the end of this allocation: the gaps are exponential, so
 * what is left of the crossed one past the allocation has the same law as a
 * new gap (memoryless). Stepping through the gaps the allocation covers
 * instead took a draw per sample_bytes of it: 2^56 logarithms for a
 * malloc(2^62) that fails anyway, sampled at 64 bytes. */
bool ml__sample_slow(size_t n) {
    ml_tls_t *t = &ml__tls;
    if (ml_unlikely(!t->has_sample)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t->rng = ((uint64_t)syscall(SYS_gettid) << 32) ^ (uint64_t)ts.tv_nsec ^ 0x9e3779b97f4a7c15ull;
        if (!t->rng) t->rng = 1;
        t->has_sample = 1;
        int64_t gap = draw_interval(t);
        if ((uint64_t)gap > n) {
            t->sample_left = gap - (int64_t)n;
            return false;
        }
    }
    t->sample_left = draw_interval(t);
    return true;
}

/* ------------------------------------------------------------------------- */
/* Registration with the collector                                           */
/* ------------------------------------------------------------------------- */

/* ml__attach_session is running: `memlens attach` says what fails, not
 * the library into the program's stderr (which is the program's own). */
static bool attaching;

/* The control file's table of process slots is mapped a piece at a time.
 * Mapped whole, its ML_MAX_PROCS slots took 20 MiB of address space in
 * every traced process, counted in its RLIMIT_AS (`ulimit -v`): a program
 * that fit its limit alone failed to allocate under memlens (a C++ program
 * under `ulimit -v 100000` got std::bad_alloc after 66 blocks of 1 MiB, 91
 * alone, 83 under heaptrack). attach_ctl maps the header and the first
 * piece (324 KiB); a slot past it maps its piece when the process first
 * uses it, from a descriptor it opens and closes at once. A piece that
 * cannot be mapped (no descriptor left, the session's file gone or
 * replaced) leaves the slot out: a process then runs untraced, as past the
 * bound. A fork child inherits its parent's pieces. */
#define CTL_PIECE 16384u
static ml_ctl_proc_t *_Atomic ctl_pieces[ML_MAX_PROCS / CTL_PIECE];
static uint64_t ctl_dev, ctl_ino; /* the session's control file */

static uint64_t page_down(uint64_t v) {
    uint64_t page = (uint64_t)getauxval(AT_PAGESZ);
    if (!page) page = 4096;
    return v & ~(page - 1);
}

/* The mapping of piece k (k > 0), made now; NULL when it cannot be. */
static ml_ctl_proc_t *ctl_map_piece(uint32_t k) {
    int saved = errno;
    uint64_t off = offsetof(ml_ctl_t, procs) + (uint64_t)k * CTL_PIECE * sizeof(ml_ctl_proc_t);
    uint64_t start = page_down(off), len = page_up(off + CTL_PIECE * sizeof(ml_ctl_proc_t)) - start;
    ml_ctl_proc_t *got = NULL;
    int fd = open(ctl_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) == 0 && (uint64_t)st.st_dev == ctl_dev && (uint64_t)st.st_ino == ctl_ino &&
            (uint64_t)st.st_size >= sizeof(ml_ctl_t)) {
            long r = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (long)start);
            if (!(r < 0 && r > -4096)) {
                ml_ctl_proc_t *p = (ml_ctl_proc_t *)((char *)r + (off - start)), *expected = NULL;
                if (atomic_compare_exchange_strong(&ctl_pieces[k], &expected, p)) {
                    got = p;
                } else { /* another thread mapped it first */
                    syscall(SYS_munmap, (void *)r, len);
                    got = expected;
                }
            }
        }
        close(fd);
    }
    errno = saved;
    return got;
}

/* Slot i of the session's table, its piece mapped if it was not; NULL when
 * it cannot be. */
static ml_ctl_proc_t *ctl_proc(uint32_t i) {
    if (i >= ML_MAX_PROCS) return NULL;
    ml_ctl_proc_t *base = ml_atomic_load_acquire(&ctl_pieces[i / CTL_PIECE]);
    if (!base && i >= CTL_PIECE) base = ctl_map_piece(i / CTL_PIECE);
    return base ? base + i % CTL_PIECE : NULL;
}

static int attach_ctl(const char *p) {
    if (!p || ml_strlen(p) >= sizeof ctl_path - 16) return -1;
    memcpy(ctl_path, p, ml_strlen(p) + 1);
    int fd = open(ctl_path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        /* The session is there, but not for this user: a followed process
         * that changed its user (runuser, setpriv, a server dropping root)
         * and then exec'd. Said rather than left out silently. A session
         * that is gone (ENOENT: a process that outlived memlens with our
         * variables) is no news to its users: nothing is said. */
        int e = errno;
        if ((e == EACCES || e == EPERM) && !attaching) {
            char exe[256], num[16];
            ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            exe[n > 0 ? n : 0] = '\0';
            const char *parts[] = {"process ", u32_to_str(num + sizeof num, (uint32_t)syscall(SYS_getpid)), " (",
                                   exe, ") is not traced: it cannot open the session's control file (",
                                   errno_reason(e), "): it runs as another user than memlens", NULL};
            warnv(parts);
        }
        errno = e;
        return -1;
    }
    /* A file shorter than a session's would be a SIGBUS at the first read. */
    struct stat st;
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < sizeof(ml_ctl_t)) {
        close(fd);
        warn("ML_CTL does not point at a memlens session of this version; not recording");
        return -1;
    }
    ctl_dev = (uint64_t)st.st_dev;
    ctl_ino = (uint64_t)st.st_ino;
    ml_ctl_t *c = ml__raw_mmap(page_up(offsetof(ml_ctl_t, procs) + CTL_PIECE * sizeof(ml_ctl_proc_t)),
                               PROT_READ | PROT_WRITE, MAP_SHARED, fd);
    close(fd);
    if (!c) return -1;
    if (c->magic != ML_CTL_MAGIC || c->version != ML_SHM_VERSION) {
        warn("ML_CTL does not point at a memlens session of this version; not recording");
        return -1;
    }
    /* A later session (`memlens attach` again) has pieces of its own; the
     * earlier one's stay mapped, unused, as its header does. */
    for (uint32_t k = 1; k < ML_MAX_PROCS / CTL_PIECE; k++) ml_atomic_store_relaxed(&ctl_pieces[k], NULL);
    ml_atomic_store_release(&ctl_pieces[0], c->procs);
    ml__ctl = c;
    ml__sample_bytes = c->sample_bytes;
    return 0;
}

#ifdef ML_TEST_HOOKS
/* Sleeps as many milliseconds as the test variable `id` says (at most 10 s). */
static void test_sleep_ms(ml_env_id_t id) {
    uint64_t ms = ml_option_uint(id);
    if (ms > 10000) ms = 10000;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The collector sees a slot counted a moment before its owner marks it
 * claimed. libmemlens_test.so (never the shipped library) widens that
 * window with ML_TEST_CLAIM_DELAY_MS, so that test_record's
 * slot_counted_before_it_is_claimed can check the collector waits. */
static void test_claim_delay(void) {
    test_sleep_ms(ML_ENV_TEST_CLAIM_DELAY_MS);
}

/* An exit handshake that takes its time (a big heap's settle and scan):
 * ML_TEST_EXIT_DELAY_MS, for test_report's
 * a_signal_on_another_thread_waits_for_the_exit_scan. */
static void test_exit_delay(void) {
    test_sleep_ms(ML_ENV_TEST_EXIT_DELAY_MS);
}

/* A signal in the middle of fork_prepare, locks held (ML_TEST_FORK_SIGNAL:
 * its number), once: fx_forksig's handler forks there, as glibc's
 * tst-mallocfork2 does by chance. */
static void test_fork_signal(void) {
    static _Atomic int fired;
    unsigned sig = (unsigned)ml_option_uint(ML_ENV_TEST_FORK_SIGNAL);
    if (sig && sig < 65 && !ml_atomic_exchange_acq_rel(&fired, 1)) raise((int)sig);
}
#endif

/* Whether the collector still ticks the session's clock (it does every
 * loop, at least every millisecond or so while it runs): when its pid
 * answers ESRCH all the same, this process cannot see it, because it runs
 * in another PID namespace (a child of `unshare -p`, a container started
 * under memlens). Looked at for up to 50 ms, only then. */
static bool collector_ticking(ml_ctl_t *c) {
    /* Seen through a /proc that is memlens' (not mounted again in the
     * namespace), its namespace differs from ours: no need to wait. */
    char path[48], num[16], mine[64], its[64];
    const char *s = u32_to_str(num + sizeof num, c->collector_pid);
    size_t n = ml_strlen(s);
    memcpy(path, "/proc/", 6);
    memcpy(path + 6, s, n);
    memcpy(path + 6 + n, "/ns/pid", 8);
    ssize_t a = readlink("/proc/self/ns/pid", mine, sizeof mine), b = readlink(path, its, sizeof its);
    if (a > 0 && b > 0) return a != b || memcmp(mine, its, (size_t)a) != 0;
    uint32_t t0 = ml_atomic_load_relaxed(&c->clock_ms);
    for (int i = 0; i < 10; i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        if (ml_atomic_load_relaxed(&c->clock_ms) != t0) return true;
    }
    return false;
}

/* This process' pid as /proc numbers it (the first of NSpid's), which is
 * memlens' numbering when /proc was not mounted again in the namespace;
 * getpid() otherwise. */
static uint32_t proc_pid(void) {
    uint32_t pid = (uint32_t)getpid();
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pid;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return pid;
    buf[n] = '\0';
    const char *p = strstr(buf, "\nNSpid:");
    if (!p) return pid;
    p += 8;
    while (*p == ' ' || *p == '\t') p++;
    uint32_t v = 0;
    while (*p >= '0' && *p <= '9') v = v * 10 + (uint32_t)(*p++ - '0');
    return v ? v : pid;
}

/* A process in another PID namespace than memlens: the collector knows
 * processes by their pids in its own namespace, and their libmemlens.so
 * checks its liveness by its pid, so such a process is not recorded. It
 * said "memlens (pid N) is gone", which was false, and nothing else did:
 * `memlens run --follow-fork -- unshare -p -f PROG` ran PROG untraced with
 * no word in any trace or in the summary. Its slot is now taken and marked
 * failed (ML_PROC_ERR_PIDNS), so the run counts it and the trace of the
 * image it forked from says why (collector.c, say_failed_children). */
static void other_pid_namespace(ml_ctl_t *c, uint32_t parent_slot) {
    uint32_t pid = proc_pid(), own = (uint32_t)getpid();
    char pnum[16], inum[16];
    const char *parts[] = {"process ", u32_to_str(pnum + sizeof pnum, pid), pid == own ? "" : " (pid ",
                           pid == own ? "" : u32_to_str(inum + sizeof inum, own), pid == own ? "" : " in its own)",
                           " runs in another PID namespace than memlens, which cannot follow it there; it is not "
                           "recorded",
                           NULL};
    warnv(parts);
    uint32_t idx = ml_atomic_load_relaxed(&c->nprocs);
    ml_ctl_proc_t *pr;
    for (;;) {
        if (idx >= ML_MAX_PROCS || idx >= ml_atomic_load_acquire(&c->procs_cap) || !(pr = ctl_proc(idx))) {
            ml_atomic_add_relaxed(&c->procs_refused, 1);
            return;
        }
        if (atomic_compare_exchange_weak_explicit(&c->nprocs, &idx, idx + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            break;
    }
    pr->pid = pid;
    pr->ppid = (uint32_t)getppid();
    pr->parent_slot = parent_slot;
    pr->err = ML_PROC_ERR_PIDNS;
    ml_atomic_add_relaxed(&c->procs_failed, 1);
    ml_atomic_store_release(&pr->state, ML_PROC_FAILED);
}

/* Claims a process slot and creates this image's ring (<ctl>.<slot>.<tag>). */
/* fork_seq: the number of the parent's fork this child came from, 0 for
 * an image that is not a fork child (ml_ring_hdr_t.fork_seq). */
static int register_process(uint32_t parent_slot, uint32_t fork_seq) {
    ml_ctl_t *c = ml__ctl;
    /* memlens ended the session and said so ("stops waiting ... the
     * processes go on untraced"): nothing to register, nothing to say, as
     * for an exec after its control file is gone (ENOENT). */
    if (ml_atomic_load_acquire(&c->closed)) return -1;
    /* A ring nobody will read (the collector was killed) would stay in
     * /dev/shm: check first. The next `memlens run` sweeps what a collector
     * that dies after this check leaves behind. */
    if (!ml__collector_alive()) {
        if (collector_ticking(c)) {
            other_pid_namespace(c, parent_slot);
            return -1;
        }
        char cnum[16], pnum[16];
        const char *parts[] = {"memlens (pid ", u32_to_str(cnum + sizeof cnum, c->collector_pid),
                               ") is gone; process ", u32_to_str(pnum + sizeof pnum, (uint32_t)getpid()),
                               " is not recorded", NULL};
        warnv(parts);
        return -1;
    }
    /* A slot is claimed only below procs_cap: its page is allocated in
     * /dev/shm already, so writing it cannot fault on a full tmpfs. The
     * claim and the bound are one step, so a process refused takes no slot
     * (the collector would wait for it to be filled). */
    uint32_t idx = ml_atomic_load_relaxed(&c->nprocs);
    ml_ctl_proc_t *pr;
    for (;;) {
        if (idx >= ML_MAX_PROCS || idx >= ml_atomic_load_acquire(&c->procs_cap)) {
            ml_atomic_add_relaxed(&c->procs_refused, 1);
            warn(idx >= ML_MAX_PROCS ? "too many traced processes in this session; this one is not recorded"
                                     : "/dev/shm has no room for this process' entry; it is not recorded");
            return -1;
        }
        /* Its piece of the table mapped before the claim: a slot claimed
         * and never filled would hold the collector up. */
        if (!(pr = ctl_proc(idx))) {
            ml_atomic_add_relaxed(&c->procs_refused, 1);
            warn("cannot map this process' entry of memlens' session file (no descriptor left, or the file is "
                 "gone); it is not recorded");
            return -1;
        }
        if (atomic_compare_exchange_weak_explicit(&c->nprocs, &idx, idx + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            break;
    }
#ifdef ML_TEST_HOOKS
    test_claim_delay();
#endif
    pr->pid = (uint32_t)getpid();
    ml_atomic_store_relaxed(&recorded_pid, pr->pid);
    ml_atomic_store_relaxed(&exit_asked, 0);
    ml_atomic_store_relaxed(&exit_over, 0);
    ml_atomic_store_relaxed(&first_exit_tid, 0);
    pr->ppid = (uint32_t)getppid();
    pr->parent_slot = parent_slot;
    ml_atomic_store_release(&pr->state, ML_PROC_CLAIMED);

    /* CTL.SLOT.TAG: a name another user cannot take first (ml_ring_name_tag) */
    char path[sizeof ctl_path + 32], num[16];
    size_t n = ml_strlen(ctl_path);
    memcpy(path, ctl_path, n);
    path[n++] = '.';
    const char *s = u32_to_str(num + sizeof num, idx);
    size_t sl = ml_strlen(s);
    memcpy(path + n, s, sl);
    n += sl;
    path[n++] = '.';
    uint64_t tag = ml_ring_name_tag(c->ring_key, idx);
    for (int i = 15; i >= 0; i--, tag >>= 4) path[n + (size_t)i] = "0123456789abcdef"[tag & 15];
    path[n + 16] = '\0';

    uint32_t cap = c->ring_slots;
    int err = 0;
    /* A program that lowered its file size limit below the ring's size
     * (`ulimit -f 1024` in a script) would get SIGXFSZ from the fallocate
     * below, which ends it: `sh -c 'ulimit -f 1024; exec true'` died of it
     * under memlens. Such an image is not recorded, and said, as with a
     * full /dev/shm. */
    struct rlimit fsize;
    if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
        fsize.rlim_cur < ml_ring_bytes(cap)) {
        err = EFBIG;
        goto fail;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        err = errno;
        goto fail;
    }
    /* Allocated now, not page by page as the ring is first written: on a
     * full /dev/shm that write would be a SIGBUS in the program. */
    if (fallocate(fd, 0, 0, (off_t)ml_ring_bytes(cap)) < 0 &&
        ((errno != EOPNOTSUPP && errno != ENOSYS) || ftruncate(fd, (off_t)ml_ring_bytes(cap)) < 0)) {
        err = errno;
        close(fd);
        unlink(path);
        goto fail;
    }
    ml_ring_hdr_t *h = ml__raw_mmap(ml_ring_bytes(cap), PROT_READ | PROT_WRITE, MAP_SHARED, fd);
    close(fd);
    if (!h) {
        err = ENOMEM;
        unlink(path);
        goto fail;
    }
    ml_ring_init(h, cap);
    h->pid = pr->pid;
    h->ppid = pr->ppid;
    h->fork_seq = fork_seq;
    /* No event of this image is older: its process record takes this time. */
    h->start_ms = ml_atomic_load_relaxed(&c->clock_ms);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->start_realtime_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    ssize_t k = readlink("/proc/self/exe", h->exe, sizeof h->exe - 1);
    h->exe[k > 0 ? k : 0] = '\0';
    int cfd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (cfd >= 0) {
        ssize_t m = read(cfd, h->cmdline, sizeof h->cmdline);
        h->cmdline_len = m > 0 ? (uint32_t)m : 0;
        char more;
        /* longer than the buffer: a length past it says the line was cut */
        if (m == (ssize_t)sizeof h->cmdline && read(cfd, &more, 1) == 1) h->cmdline_len = sizeof h->cmdline + 1;
        close(cfd);
    }
    ml__ring = h;
    raw_publish();
    proc_slot = idx;
    ml_atomic_store_release(&pr->state, ML_PROC_READY);
    return 0;
fail:
    pr->err = (uint32_t)err;
    ml_atomic_add_relaxed(&c->procs_failed, 1);
    ml_atomic_store_release(&pr->state, ML_PROC_FAILED);
    {
        char pnum[16];
        const char *parts[] = {"cannot create the event ring ", path, ": ", errno_reason(err),
                               "; process ", u32_to_str(pnum + sizeof pnum, pr->pid),
                               " is not recorded", NULL};
        warnv(parts);
    }
    return -1;
}

/* The slot of the image this one comes from (its trace is named as the
 * parent's): the image this process replaced by exec (the latest slot with
 * our pid), else the traced image of the process that started this one
 * (the latest ready slot with our parent's pid). The second covers every
 * child memlens saw no fork of: posix_spawn and vfork+exec (glibc's
 * posix_spawn is a clone(CLONE_VM | CLONE_VFORK) and its internal execve;
 * a vfork child shares its parent's memory and registers nothing), system()
 * and popen() (posix_spawn inside glibc), a raw clone. A followed fork child
 * registered its own slot (follow_child) and is found by its pid. ~0 for
 * neither: the root, or a process whose parent is not traced (or has
 * already exited: the child then belongs to init or a subreaper). */
static uint32_t parent_image_slot(void) {
    uint32_t n = ml_atomic_load_acquire(&ml__ctl->nprocs);
    if (n > ML_MAX_PROCS) n = ML_MAX_PROCS;
    uint32_t pid = (uint32_t)getpid(), ppid = (uint32_t)getppid(), by_ppid = ~0u;
    for (uint32_t i = n; i-- > 0;) {
        ml_ctl_proc_t *p = ctl_proc(i);
        if (!p) { /* a piece that cannot be mapped: none of its slots */
            i -= i % CTL_PIECE;
            continue;
        }
        if (p->pid == pid) return i;
        if (by_ppid == ~0u && p->pid == ppid &&
            ml_atomic_load_acquire(&p->state) == ML_PROC_READY)
            by_ppid = i;
    }
    return by_ppid;
}

/* Our variables leave the environment so that children of a program we do
 * not follow start clean, exactly as they would without memlens. `environ`
 * is edited in place: entries are dropped by moving the later ones down, and
 * LD_PRELOAD's entry is replaced by one in memory we map ourselves. Neither
 * malloc nor setenv/unsetenv is called: those allocate, and a program may
 * define its own (bash does, for its shell variables) and expect them to
 * run after its own initialisation, not in our constructor. */
static bool env_is(const char *entry, const char *name, size_t n) {
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static void env_remove(const char *name) {
    extern char **environ;
    if (!environ) return;
    size_t n = ml_strlen(name);
    char **w = environ;
    for (char **r = environ; *r; r++)
        if (!env_is(*r, name, n)) *w++ = *r;
    *w = NULL;
}

/* LD_PRELOAD=value in the place of the first LD_PRELOAD entry, the others
 * dropped. The new entry lives in memory of our own, mapped for the rest of
 * the process' life; when none can be mapped, the entry stays as it was (a
 * child then loads libmemlens, which without ML_CTL passes everything
 * through). */
static void env_replace_ld_preload(const char *value) {
    extern char **environ;
    static const char name[] = "LD_PRELOAD";
    if (!environ) return;
    size_t n = sizeof name - 1, len = ml_strlen(value);
    bool placed = false;
    char **w = environ;
    for (char **r = environ; *r; r++) {
        if (!env_is(*r, name, n)) {
            *w++ = *r;
            continue;
        }
        if (placed) continue;
        placed = true;
        char *entry = ml__raw_alloc(n + 1 + len + 1);
        if (entry) {
            memcpy(entry, name, n);
            entry[n] = '=';
            memcpy(entry + n + 1, value, len + 1);
        }
        *w++ = entry ? entry : *r;
    }
    *w = NULL;
}

/* CUDA_INJECTION64_PATH as `memlens run` set it (naming our
 * libmemlens_cupti.so), once it has left the environment: the CUDA driver
 * of this process still finds it through getenv() below, its children do
 * not inherit it. NULL when the variable was the user's, or absent. */
static const char *cuda_injection;

static bool ends_with(const char *s, const char *tail) {
    size_t n = ml_strlen(s), k = ml_strlen(tail);
    return n >= k && memcmp(s + n - k, tail, k) == 0;
}

static void clean_environment(void) {
    /* ML_LD_PRELOAD_ORIG is there when the caller had LD_PRELOAD, even
     * empty (`LD_PRELOAD= prog` is not `prog`). */
    const char *orig = ml_option_str(ML_ENV_LD_PRELOAD_ORIG);
    if (orig) env_replace_ld_preload(orig);
    else env_remove("LD_PRELOAD");
    env_remove("ML_CTL");
    env_remove("ML_LD_PRELOAD_ORIG");
    const char *cuda = ml_getenv("CUDA_INJECTION64_PATH");
    if (cuda && ends_with(cuda, "/libmemlens_cupti.so")) {
        cuda_injection = cuda; /* the string itself stays where it is */
        env_remove("CUDA_INJECTION64_PATH");
    }
}

/* The CUDA_INJECTION64_PATH `memlens run` gave this session (naming our
 * libmemlens_cupti.so), whether clean_environment took it out of environ
 * or --follow-fork left it there; NULL when there is none (--no-gpu) or
 * the variable is the user's. exec.c puts it back into the environment of
 * an image it follows, as it puts back LD_PRELOAD and ML_CTL. */
const char *ml__cuda_injection(void) {
    if (cuda_injection) return cuda_injection;
    const char *cuda = ml_getenv("CUDA_INJECTION64_PATH");
    return cuda && ends_with(cuda, "/libmemlens_cupti.so") ? cuda : NULL;
}

/* getenv and secure_getenv read `environ` as glibc's do, except that this
 * process still sees the CUDA_INJECTION64_PATH that clean_environment took
 * out of the environment: the CUDA driver reads it at cuInit, long after our
 * constructor. A program that defines its own getenv (bash) keeps its own. */
static char *env_lookup(const char *name) {
    if (!name) return NULL;
    if (cuda_injection && !strcmp(name, "CUDA_INJECTION64_PATH")) return (char *)cuda_injection;
    return (char *)ml_getenv(name);
}

ML_EXPORT char *getenv(const char *name);
ML_EXPORT char *getenv(const char *name) {
    return env_lookup(name);
}

ML_EXPORT char *secure_getenv(const char *name);
ML_EXPORT char *secure_getenv(const char *name) {
    return getauxval(AT_SECURE) ? NULL : env_lookup(name);
}

/* ------------------------------------------------------------------------- */
/* fork                                                                      */
/* ------------------------------------------------------------------------- */

/* This image's forks so far (ML_BLOB_FORK). Threads may fork at once: each
 * keeps the number of its own in ml__tls.fork_seq, where its child (that
 * thread alone) reads it. */
static _Atomic uint32_t forks;

void ml__note_unfollowed_child(void) {
    if (ml__ring && ml__ctl && !(ml__ctl->options & ML_OPT_FOLLOW_FORK))
        ml_atomic_add_relaxed(&ml__ring->children_unfollowed, 1);
}

/* A fork from a signal handler that interrupted this thread inside memlens
 * (in fork_prepare itself, or while it held the stack table's lock): the
 * locks below may be this thread's already, and they do not nest, so
 * taking them again waited for ever (glibc's tst-mallocfork2, a handler
 * that forks while the main thread forks in a loop). Such a fork takes no
 * lock; its child, which may have our state half changed, records nothing
 * (counted as a child not followed), and its parent goes on as before. */
static bool fork_inside_memlens(void) {
    if (!ml__tls.guard) return false;
    ml__tls.fork_inside++;
    ml__tls.guard++;
    return true;
}

static void fork_prepare(void) {
    if (fork_inside_memlens()) return;
    /* The collector keeps the live blocks as of here for the child's exit
     * scan (ml_blob_fork_t). Nothing is written without --follow-fork. */
    ml__tls.fork_seq = 0;
    /* Not from inside memlens (a signal handler that forks while this thread
     * writes an event): the child then gets no copy, as before. */
    if ((ml__ctl->options & ML_OPT_FOLLOW_FORK) && ml__state_relaxed() == ML_STATE_READY && ml__ring &&
        !ml__tls.guard) {
        ml_blob_fork_t b = {ml_atomic_add_relaxed(&forks, 1) + 1};
        ml__emit_blob(ML_BLOB_FORK, &b, sizeof b);
        ml__tls.fork_seq = b.seq;
    } else if (ml__state_relaxed() == ML_STATE_READY && ml__ring && !ml__tls.guard) {
        ml__note_unfollowed_child(); /* counted for the run summary */
    }
    ml__tls.guard++;
    ml__stacks_lock();
#ifdef ML_TEST_HOOKS
    test_fork_signal();
#endif
    ml__sampled_lock();
    ml__spin_lock(&raw_lock);
}

static void fork_parent(void) {
    if (ml__tls.fork_inside) {
        ml__tls.fork_inside--;
        ml__tls.guard--;
        return;
    }
    ml__spin_unlock(&raw_lock);
    ml__sampled_unlock();
    ml__stacks_unlock();
    ml__tls.guard--;
}

/* ------------------------------------------------------------------------- */
/* The loader's list lock after fork                                         */
/* ------------------------------------------------------------------------- */

/* dl_iterate_phdr holds the loader's recursive lock over its list of
 * modules (_dl_load_write_lock, in ld.so's _rtld_global) while it runs,
 * and dlopen and dlclose take it to change the list. glibc's fork resets
 * the loader's other locks in the child, not this one (2.36): when a
 * thread of the parent holds it as another thread forks, the child's next
 * dl_iterate_phdr waits forever, as no thread of the child can release it.
 * Under memlens that is likely in a threaded program that forks: the hooks
 * of its other threads call dl_iterate_phdr (module scans, and libunwind at
 * code it meets for the first time), and a followed child calls it at once
 * (its module scan). So the lock is found once, at start: the one mutex of
 * _rtld_global that this thread holds while inside dl_iterate_phdr (locked,
 * count 1, owner this thread, recursive: the fields of glibc's
 * pthread_mutex_t, part of its ABI). A forked child whose lock is held by
 * a thread not its own resets it, as glibc resets the others. Found more or
 * less than once: nothing is done. */
static int *loader_list_lock; /* the mutex's first int (__lock); NULL: not found */

typedef struct {
    const char *lo;
    size_t len;
    int tid;
    int *found;
    int matches;
} lock_search_t;

static int find_list_lock_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)info;
    (void)size;
    lock_search_t *q = data;
    for (size_t off = 0; off + 5 * sizeof(int) <= q->len; off += 8) {
        const int *m = (const int *)(const void *)(q->lo + off);
        /* __lock, __count, __owner, __nusers, __kind */
        if (m[0] != 0 && m[1] == 1 && m[2] == q->tid && (m[4] & 3) == PTHREAD_MUTEX_RECURSIVE_NP) {
            q->found = (int *)m;
            q->matches++;
        }
    }
    return 1; /* once is enough */
}

static void find_loader_list_lock(void) {
    void *g = dlsym(RTLD_DEFAULT, "_rtld_global");
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!g || !dladdr1(g, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || sym->st_size < 64) return;
    lock_search_t q = {g, (size_t)sym->st_size, (int)syscall(SYS_gettid), NULL, 0};
    dl_iterate_phdr(find_list_lock_cb, &q);
    if (q.matches == 1) loader_list_lock = q.found;
}

static void reset_loader_list_lock(void) {
    int *m = loader_list_lock;
    if (!m || m[0] == 0 || m[2] == (int)syscall(SYS_gettid)) return;
    m[1] = 0; /* __count */
    m[2] = 0; /* __owner */
    m[3] = 0; /* __nusers */
    ml_atomic_store_release((_Atomic int *)m, 0);
}

/* A followed child: a new ring and a new trace, with its own ids. Returns
 * the state the child records in. */
static int follow_child(void) {
    /* Not followed: the child must never write into the parent's ring. */
    if (!(ml__ctl->options & ML_OPT_FOLLOW_FORK)) return ML_STATE_OFF;
    ml__state_set(ML_STATE_INIT);
    uint32_t parent = proc_slot;
    ml__ring = NULL;
    /* The slot is the parent's: one the collector refused (its trace could
     * not be started: a full disk) made register_process take the
     * collector for dead, and the child, which gets a ring and a trace of
     * its own, went unrecorded with "memlens (pid N) is gone". */
    proc_slot = ~0u;
    if (register_process(parent, ml__tls.fork_seq) < 0) return ML_STATE_OFF;
    ml_atomic_store_relaxed(&forks, 0); /* this image's own forks */
    ml_atomic_store_relaxed(&next_thread, 0);
    ml__tls.has_thread = 0;
    nknown = 0;
    ngone = nparked = 0; /* the node table starts again (ml__stacks_reset) */
    ntodo = 0;
    last_adds = last_subs = ~0ull;
    ml_atomic_store_relaxed(&scan_lock, 0);
    ml__stacks_reset();
    ml__sampled_reset();
    ml__modules_scan(true);
    return ML_STATE_READY;
}

static void fork_child(void) {
    if (ml__tls.fork_inside) {
        ml__tls.fork_inside--;
        ml__tls.guard--;
        if (ml__state_relaxed() == ML_STATE_READY) {
            ml__note_unfollowed_child();
            ml__state_set(ML_STATE_OFF);
        }
        return;
    }
    /* A thread that forked while its parent's exit scan held the others:
     * the child's own exit comes later, with a hold of its own. */
    ml_atomic_store_relaxed(&ml__exit_hold, 0);
    ml_atomic_store_relaxed(&hold_until_ns, 0);
    ml__tls.exiting = 0;
    /* The parent's other threads are not here: neither are their calls. */
    uint32_t nbusy = ml_atomic_load_relaxed(&busy_next);
    for (uint32_t i = 0; i < nbusy && i < ML_BUSY_SLOTS; i++) ml_atomic_store_relaxed(&ml__busy[i].flag, 0);
    ml__spin_unlock(&raw_lock);
    ml__sampled_unlock();
    ml__stacks_unlock();
    reset_loader_list_lock();
    if (ml__state_relaxed() == ML_STATE_READY) ml__state_set(follow_child());
    ml__tls.guard--;
}

/* glibc's clone() runs no atfork handler: a child made by it without
 * CLONE_VM (fork semantics: a copy of our memory, our ring's mapping
 * included) would record its allocations and frees into this process'
 * ring, as if they were ours (a block the child frees would no longer be
 * leaked here). Such a clone is a fork to us: the same handlers run around
 * it, so the child is followed with --follow-fork and silent without. A
 * clone sharing our memory (CLONE_VM: its heap is ours) or setting up a
 * thread of its own (CLONE_THREAD, CLONE_SETTLS) is left as it is. The raw
 * system call through syscall() is seen too (ml__raw_forklike, below). */
typedef int (*clone_fn_t)(int (*)(void *), void *, int, void *, ...);
static void *_Atomic real_clone;

typedef struct {
    int (*fn)(void *);
    void *arg;
} clone_start_t;

static int clone_child_start(void *p) {
    clone_start_t cs = *(clone_start_t *)p; /* our copy of the parent's stack */
    fork_child();
    return cs.fn(cs.arg);
}

ML_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    pid_t *ptid = va_arg(ap, pid_t *);
    void *tls = va_arg(ap, void *);
    pid_t *ctid = va_arg(ap, pid_t *);
    va_end(ap);
    clone_fn_t f = (clone_fn_t)ml__next_symbol(&real_clone, "clone");
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    if ((flags & (CLONE_VM | CLONE_THREAD | CLONE_SETTLS)) || !fn || ml__state_relaxed() != ML_STATE_READY)
        return f(fn, stack, flags, arg, ptid, tls, ctid);
    clone_start_t cs = {fn, arg};
    fork_prepare();
    int rc = f(clone_child_start, stack, flags, &cs, ptid, tls, ctid);
    int e = errno;
    fork_parent();
    errno = e;
    return rc;
}

/* The fork-like system calls made through syscall() (syscall_x86_64.S
 * asks ml__raw_forklike first): SYS_fork, and SYS_clone and SYS_clone3
 * with fork semantics (no CLONE_VM, CLONE_THREAD or CLONE_SETTLS) and no
 * stack of their own, so that the child returns on its copy of this stack,
 * through our frames, as from fork(). Such a child had our state and our
 * ring: its allocations were recorded as the parent's, and a block of the
 * parent's that it freed vanished from the parent's leaks. Now they are a
 * fork to us, as glibc's clone() is (above). A raw clone with a stack, or
 * sharing our memory, is left untouched: the trampoline jumps to glibc's
 * syscall() without a frame of ours. */
int ml__raw_forklike(long nr, long a1, long a2);
int ml__raw_forklike(long nr, long a1, long a2) {
    if (ml__state_relaxed() != ML_STATE_READY || !ml__ring || ml__tls.guard) return 0;
    const long shared = CLONE_VM | CLONE_THREAD | CLONE_SETTLS;
    if (nr == SYS_fork) return 1;
    if (nr == SYS_clone) return !(a1 & shared) && a2 == 0;
#ifdef SYS_clone3
    if (nr == SYS_clone3 && a1 && (size_t)a2 >= 64) {
        /* struct clone_args: flags at 0, stack at 40, stack_size at 48.
         * Read without a fault: the kernel answers EFAULT to a bad one. */
        uint64_t args[7];
        int e = errno;
        struct iovec to = {args, sizeof args}, from = {(void *)a1, sizeof args};
        long r = syscall(SYS_process_vm_readv, (long)syscall(SYS_getpid), &to, 1L, &from, 1L, 0L);
        errno = e;
        return r == (long)sizeof args && !(args[0] & (uint64_t)shared) && args[5] == 0 && args[6] == 0;
    }
#endif
    return 0;
}

static long raw_syscall5(long nr, long a1, long a2, long a3, long a4, long a5) {
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    if (ret < 0 && ret > -4096) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

long ml__raw_fork(long nr, long a1, long a2, long a3, long a4, long a5);
long ml__raw_fork(long nr, long a1, long a2, long a3, long a4, long a5) {
    fork_prepare();
    long rc = raw_syscall5(nr, a1, a2, a3, a4, a5);
    int e = errno;
    if (rc == 0)
        fork_child();
    else
        fork_parent();
    errno = e;
    return rc;
}

/* sbrk and brk as the program calls them (glibc's malloc grows the heap
 * through its internal __sbrk, which does not come here): the range the
 * break moved up over is noted in sbrk_reg, a range it moved back down over
 * is taken out. Programs call them from one thread (they are not
 * thread-safe), so the notes take no lock; a reader (the exit scan) sees
 * `n` only after the entry it counts. */
static void sbrk_note(uint64_t before, uint64_t after) {
    uint64_t n = ml_atomic_load_relaxed(&sbrk_reg.n);
    if (after < before) { /* down: trim what lies above the new break */
        while (n && sbrk_reg.r[n - 1].lo >= after) n--;
        if (n && sbrk_reg.r[n - 1].hi > after) sbrk_reg.r[n - 1].hi = after;
        ml_atomic_store_release(&sbrk_reg.n, n);
        return;
    }
    if (after == before) return;
    if (n && sbrk_reg.r[n - 1].hi == before) { /* contiguous with the last */
        sbrk_reg.r[n - 1].hi = after;
        return;
    }
    if (n == ML_SBRK_RANGES) { /* full: the last range grows over the gap */
        sbrk_reg.r[n - 1].hi = after;
        return;
    }
    sbrk_reg.r[n].lo = before;
    sbrk_reg.r[n].hi = after;
    ml_atomic_store_release(&sbrk_reg.n, n + 1);
}

static void *_Atomic real_sbrk, *_Atomic real_brk;

ML_EXPORT void *sbrk(intptr_t inc) {
    void *(*f)(intptr_t) = (void *(*)(intptr_t))ml__next_symbol(&real_sbrk, "sbrk");
    if (!f) {
        errno = ENOMEM;
        return (void *)-1;
    }
    void *old = f(inc);
    if (old != (void *)-1 && inc)
        sbrk_note((uint64_t)(uintptr_t)old, (uint64_t)(uintptr_t)old + (uint64_t)inc);
    return old;
}

ML_EXPORT int brk(void *addr) {
    void *(*s)(intptr_t) = (void *(*)(intptr_t))ml__next_symbol(&real_sbrk, "sbrk");
    int (*f)(void *) = (int (*)(void *))ml__next_symbol(&real_brk, "brk");
    if (!f || !s) {
        errno = ENOMEM;
        return -1;
    }
    void *before = s(0);
    int rc = f(addr);
    if (rc == 0 && before != (void *)-1) sbrk_note((uint64_t)(uintptr_t)before, (uint64_t)(uintptr_t)addr);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Start-up and exit                                                         */
/* ------------------------------------------------------------------------- */

uintptr_t ml__alloc_code_lo, ml__alloc_code_hi;

/* One object's PT_LOAD range (interpose_internal.h). */
int ml__object_segments(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t *r = arg; /* r[0]: the base looked for; r[1], r[2]: its range */
    if (info->dlpi_addr != r[0]) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!r[1] || lo < r[1]) r[1] = lo;
        if (hi > r[2]) r[2] = hi;
    }
    return 1;
}

/* The allocator that is not glibc's maps its heap with mmap through its
 * PLT, so those mappings reached the mmap hook and were counted as the
 * program's own anonymous mappings, on top of the heap blocks they hold
 * (a program linked to jemalloc: 7 mmaps and 22 MiB of "anonymous mmap"
 * for a 10 MiB heap; the same program on glibc: none, as glibc maps its
 * arenas and large chunks without a hook). The hooks flag them instead
 * (ML_EVF_ALLOCATOR), and the analysis counts them apart. */
static void alloc_code_range(uintptr_t base) {
    uintptr_t r[3] = {base, 0, 0};
    dl_iterate_phdr(ml__object_segments, r);
    if (!r[2] || r[1] >= r[2]) return;
    Dl_info self;
    if (dladdr((void *)ml__init, &self) && (uintptr_t)self.dli_fbase >= r[1] && (uintptr_t)self.dli_fbase < r[2])
        return; /* never our own code */
    ml__alloc_code_lo = r[1];
    ml__alloc_code_hi = r[2];
}

/* The object whose malloc the hooks call, when it is not glibc's. Called
 * when recording starts, not from resolve_real: that can run before libc
 * itself is set up (ThreadSanitizer's runtime allocates from the program's
 * .preinit_array), and dl_iterate_phdr there, which ThreadSanitizer
 * intercepts, made such a program exit with status 1 before main. */
static void find_alloc_code(void) {
    Dl_info di;
    struct link_map *lm = NULL;
    if (dladdr1((void *)ml__real.malloc, &di, (void **)&lm, RTLD_DL_LINKMAP) && di.dli_fname && lm &&
        !strstr(di.dli_fname, "libc.so"))
        alloc_code_range(lm->l_addr);
}

#define RESOLVE(name) ml__real.name = (typeof(ml__real.name))dlsym(RTLD_NEXT, #name)

/* The real functions, found once with dlsym(RTLD_NEXT). Without malloc
 * and free nothing can go on: the one abort (STYLE 8). */
static void resolve_real(void) {
    RESOLVE(malloc);
    RESOLVE(free);
    RESOLVE(calloc);
    RESOLVE(realloc);
    RESOLVE(reallocarray);
    RESOLVE(posix_memalign);
    RESOLVE(aligned_alloc);
    RESOLVE(memalign);
    RESOLVE(valloc);
    RESOLVE(pvalloc);
    RESOLVE(mmap);
    RESOLVE(mmap64);
    RESOLVE(munmap);
    RESOLVE(mremap);
    RESOLVE(dlopen);
    RESOLVE(dlclose);
    RESOLVE(malloc_usable_size);
    if (!ml__real.malloc || !ml__real.free || !ml__real.calloc || !ml__real.realloc) {
        static const char msg[] = "memlens: fatal: cannot resolve the real malloc/free\n";
        write_stderr(msg, sizeof msg - 1);
        abort();
    }
    /* glibc's counters mean something only when glibc is the allocator. */
    Dl_info di;
    if (dladdr((void *)ml__real.malloc, &di) && di.dli_fname && strstr(di.dli_fname, "libc.so"))
        real_mallinfo2 = (typeof(real_mallinfo2))dlsym(RTLD_NEXT, "mallinfo2");
}

/* Our environment variables, read once (ml_options.h); ML_VERBOSE prints
 * them as "memlens: libmemlens.so (pid N): option ...". */
static void read_options(void) {
    char who[48] = "libmemlens.so (pid ", num[16];
    size_t n = ml_strlen(who);
    const char *pid = u32_to_str(num + sizeof num, (uint32_t)getpid());
    size_t k = ml_strlen(pid);
    memcpy(who + n, pid, k);
    who[n + k] = ')';
    who[n + k + 1] = '\0';
    ml_options_init(ML_ENV_PRELOAD, who);
}

/* A path into a ring header's field of `size` bytes: whole, or "..." and
 * its end when longer. */
static void path_tail(char *to, size_t size, const char *path) {
    size_t cap = size - 1, n = strlen(path);
    if (n > cap) {
        memcpy(to, "...", 3);
        memcpy(to + 3, path + n - (cap - 3), cap - 3);
        n = cap;
    } else {
        memcpy(to, path, n);
    }
    to[n] = '\0';
}

/* When an object ahead of us in the lookup order (another preloaded
 * allocator, or a program with its own malloc) defines malloc, the
 * program's calls never reach our hooks: say so, since the trace would
 * otherwise hold no allocation without a word. */
static void check_allocator_order(void) {
    Dl_info self, first;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    if (!m || !dladdr((void *)ml__init, &self) || !dladdr(m, &first)) return;
    if (first.dli_fbase == self.dli_fbase) return;
    /* A program that takes malloc's address makes its PLT entry the
     * canonical address: an undefined symbol there, whose calls reach us. */
    Dl_info again;
    const ElfW(Sym) *sym = NULL;
    if (dladdr1(m, &again, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_shndx == SHN_UNDEF) return;
    /* A library ahead of us (jemalloc preloaded first): its mappings are
     * its heap's, as when it comes after us. Not the program itself, whose
     * own mmaps are its own. */
    struct link_map *lm = NULL;
    if (dladdr1(m, &again, (void **)&lm, RTLD_DL_LINKMAP) && lm && lm->l_name && *lm->l_name &&
        !strstr(lm->l_name, "libc.so"))
        alloc_code_range(lm->l_addr);
    char pnum[16];
    const char *where = first.dli_fname && *first.dli_fname ? first.dli_fname : "the program itself";
    /* The executable's name is as the program was started ("./prog"): its path instead. */
    char exe[512];
    if (where[0] != '/') {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = '\0';
            where = exe;
        }
    }
    if (ml__ring) /* for the trace */
        path_tail(ml__ring->malloc_elsewhere, sizeof ml__ring->malloc_elsewhere, where);
    const char *parts[] = {"process ", u32_to_str(pnum + sizeof pnum, (uint32_t)getpid()),
                           ": malloc comes from ", where,
                           ", ahead of libmemlens.so (the program's own allocator, or another one "
                           "preloaded first): its allocations do not reach memlens and are not recorded",
                           NULL};
    warnv(parts);
}

static void ml_quick_exit(void);
static void ml_on_exit(int status, void *arg);

/* Attaches to the session and registers this process image. Returns the
 * state it records in: READY, or OFF (not under memlens, or no ring). */
static void crash_handlers_install(void); /* below, with the exit handling */

static int start_recording(void) {
    if (attach_ctl(ml_option_str(ML_ENV_CTL)) < 0) return ML_STATE_OFF;
    bool follow = ml__ctl->options & ML_OPT_FOLLOW_FORK;
    uint32_t parent = parent_image_slot();
    if (!follow) clean_environment();
    list_own_memory();
    if (register_process(parent, 0) < 0 || ml__stacks_init() < 0) return ML_STATE_OFF;
    find_loader_list_lock();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    /* quick_exit runs no destructor either; registered first, this runs
     * after the program's own at_quick_exit handlers. */
    (void)at_quick_exit(ml_quick_exit);
    /* The exit status of exit() and of a return from main (note_end_status). */
    (void)on_exit(ml_on_exit, NULL);
    find_alloc_code();
    check_allocator_order();
    crash_handlers_install();
    ml__modules_scan(true);
    ml__mallinfo_seen = ml_atomic_load_relaxed(&ml__ctl->mallinfo_gen);
    return ML_STATE_READY;
}

/* Set by the first ml__init, or by ml__attach_session. */
static _Atomic int init_once;

/* `memlens attach` (attach.c): libmemlens.so was dlopen'd into a running
 * process, whose ml_ctor found no ML_CTL and left it uninitialised. Joins the
 * session at `ctl` as a preloaded process would at start-up, with the
 * environment left alone (the program's children never saw our variables).
 * Returns 0 (the state is then READY) or a negative errno (still OFF). */
int ml__attach_session(const char *ctl) {
    static bool atfork_done;
    int expected = 0;
    /* ml__init (dlsym(RTLD_NEXT), which glibc cannot do for a library
     * dlopen'd by code outside any module) must never run from now on. */
    if (!ml_atomic_cas_strong_acq_rel(&init_once, &expected, 1) && !atfork_done) return -EBUSY;
    ml__tls.guard++;
    int rc = -ENOENT;
    ml__state_set(ML_STATE_INIT);
    attaching = true;
    int got = attach_ctl(ctl), e = errno;
    attaching = false;
    if (got < 0) {
        if (e == EACCES || e == EPERM) rc = -EACCES;
        goto off;
    }
    rc = -EAGAIN;
    if (register_process(~0u, 0) < 0 || ml__stacks_init() < 0) goto off;
    if (!atfork_done) {
        find_loader_list_lock();
        pthread_atfork(fork_prepare, fork_parent, fork_child);
    }
    atfork_done = true;
    ml__modules_scan(true);
    ml__mallinfo_seen = ml_atomic_load_relaxed(&ml__ctl->mallinfo_gen);
    ml__state_set(ML_STATE_READY);
    ml__tls.guard--;
    return 0;
off:
    ml__state_set(ML_STATE_OFF);
    ml__tls.guard--;
    return rc;
}

/* glibc's counters, for an attached process whose allocator is glibc's. */
void ml__attach_mallinfo(void *fn) {
    real_mallinfo2 = (typeof(real_mallinfo2))fn;
}

/* Set when the first ml__init ran before libc had set up `environ`. A
 * sanitizer's runtime (ThreadSanitizer, LeakSanitizer) initialises from
 * the program's .preinit_array, before libc's own initialisation, and
 * allocates there: the first hook call found no environment, so no ML_CTL,
 * and the process stayed unrecorded ("ran but was never traced"). Then the
 * real functions are resolved (the hooks pass calls through), and joining
 * the session waits for ml_ctor, which runs once libc is initialised. */
static _Atomic int start_deferred, start_once;

static void start_session(void) {
    int expected = 0;
    if (!ml_atomic_cas_strong_acq_rel(&start_once, &expected, 1)) return;
    ml__tls.guard++;
    ml__state_set(ML_STATE_INIT);
    read_options();
    ml__state_set(start_recording());
    ml__tls.guard--;
}

static void init_once_or_wait(void);

/* The start leaves the program's errno as it was: it opens files, and
 * libunwind's first backtrace reads descriptor -1 on purpose (EBADF). */
void ml__init(void) {
    int saved_errno = errno;
    init_once_or_wait();
    errno = saved_errno;
}

static void init_once_or_wait(void) {
    int expected = 0;
    if (ml_atomic_cas_strong_acq_rel(&init_once, &expected, 1)) {
        ml__tls.guard++;
        ml__state_set(ML_STATE_INIT);
        resolve_real();
        if (!environ) {
            ml_atomic_store_release(&start_deferred, 1);
            ml__state_set(ML_STATE_UNINIT);
            ml__tls.guard--;
            return;
        }
        ml__tls.guard--;
        start_session();
    } else if (ml_atomic_load_acquire(&start_deferred) && environ) {
        start_session();
        while (ml__state_acquire() == ML_STATE_INIT && !ml__tls.guard) ml_cpu_relax();
    } else {
        /* Another thread is initialising: wait for the real functions (the
         * initialising thread itself gets here with its guard raised). */
        while (ml__state_acquire() == ML_STATE_INIT && !ml__tls.guard) ml_cpu_relax();
    }
}

/* Runs first among constructors we can influence, so that an idle program
 * still registers; allocations made earlier initialise us lazily. */
__attribute__((constructor(101))) static void ml_ctor(void) {
    /* Without ML_CTL there is no session to join now (a library dlopen'd by
     * `memlens attach` waits for ml_attach_start; glibc's dlsym(RTLD_NEXT)
     * would even crash there, its caller being outside any module): the
     * first hook call, if any, initialises, and finds no session. */
    if (!ml_getenv("ML_CTL")) return;
    if (ml__state_relaxed() == ML_STATE_UNINIT) ml__init();
}

_Atomic uint32_t ml__exit_hold;

/* Another thread's hook call once the process is exiting: wait while the
 * hold lasts, then go on as usual. Only the program's calls get here: the
 * exiting thread's guard is up while it sets the hold, and memlens' own
 * calls are nested. The hold lasts while the collector scans (at most
 * HOLD_SCAN_NS, as long as the exiting thread waits for it), then
 * HOLD_AFTER_NS more: the process usually ends within it (exit_group ends
 * the waiting threads), so the live set at the trace's end is the one the
 * scan judged. A destructor that runs after ours and waits for one of these
 * threads (a library's thread pool joined at exit) waits that long, no
 * more: the thread then goes on, and its blocks from then on have no
 * verdict. */
#define HOLD_SCAN_NS (30ull * 1000000000ull)
#define HOLD_AFTER_NS (100ull * 1000000ull)
void ml__exit_hold_wait(void) {
    if (ml__tls.exiting) return;
    ml_atomic_store_release(ml__tls.busy, 0); /* waiting here is not being in a call */
    ml__tls.guard++;
    ml__tls.holding = 1;
    uint64_t t0 = mono_ns();
    while (ml_atomic_load_acquire(&ml__exit_hold)) {
        uint64_t now = mono_ns(), until = ml_atomic_load_acquire(&hold_until_ns);
        if ((until && now >= until) || now - t0 >= HOLD_SCAN_NS) break;
        uint64_t slice = until && until - now < 10000000ull ? until - now : 10000000ull;
        struct timespec ts = {0, (long)slice};
        syscall(SYS_futex, &ml__exit_hold, FUTEX_WAIT_PRIVATE, 1, &ts, NULL, 0);
    }
    ml__tls.holding = 0;
    ml__tls.guard--;
}

/* Lets the calls other threads were in the middle of when the hold began
 * claim their slots before the exit record. Each such call has its busy flag
 * up (interpose_internal.h) from before its check of the hold until its
 * records are in the ring: this waits until every flag but this thread's is
 * down, however long the kernel keeps a preempted thread off the CPU (a
 * 2-core machine running other work: a 1 ms quiet period, what this waited
 * for before, was not enough there). membarrier makes every other thread's
 * flag store visible before the flags are read (the hooks pay no fence for
 * it); where the kernel refuses it, the head of the ring must also stay
 * still for 1 ms. The wait ends after SETTLE_MAX_NS in any case (a thread
 * stopped inside a hook by a debugger or SIGSTOP): that call then comes
 * after the exit record, and its block has no verdict from the scan
 * (docs/analysis.md). */
#define SETTLE_MAX_NS (2ull * 1000000000ull)
static void settle(void) {
    bool fenced = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
                  syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
    if (!fenced) fenced = syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0;
    if (!fenced) atomic_thread_fence(memory_order_seq_cst);
    const _Atomic uint32_t *own = ml__tls.busy;
    uint32_t n = ml_atomic_load_relaxed(&busy_next);
    if (n > ML_BUSY_SLOTS) n = ML_BUSY_SLOTS;
    uint64_t t0 = mono_ns();
    for (uint32_t i = 0; i < n; i++) {
        if (&ml__busy[i].flag == own) continue;
        while (ml_atomic_load_acquire(&ml__busy[i].flag) && mono_ns() - t0 < SETTLE_MAX_NS) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    if (fenced) return;
    uint64_t last = ml_atomic_load_acquire(&ml__ring->head);
    for (int i = 0, quiet = 0; i < 100 && quiet < 5; i++) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
        uint64_t now = ml_atomic_load_acquire(&ml__ring->head);
        quiet = now == last ? quiet + 1 : 0;
        last = now;
    }
}

/* glibc's list of open FILEs (libio), and its lock: exported, not declared
 * by any header. */
extern FILE *_IO_list_all;
void _IO_list_lock(void);
void _IO_list_unlock(void);

/* The buffers glibc's stdio allocated for the open FILEs, for the exit scan
 * (ml_ring_hdr_t.stdio_list). A buffer the program gave (setvbuf: the
 * _IO_USER_BUF flag) is the program's and left out. Walked under libio's
 * list lock, before other threads are held (one may own it); at most 1024
 * FILEs (a chain run into a loop ends). Not in a crash: the dying thread
 * may hold the lock. */
static uint64_t stdio_list[1 + ML_STDIO_BUFS];
static void note_stdio_buffers(void) {
    uint64_t n = 0;
    _IO_list_lock();
    int seen = 0;
    for (FILE *f = _IO_list_all; f && seen < 1024 && n < ML_STDIO_BUFS; f = f->_chain, seen++)
        if (f->_IO_buf_base && !(f->_flags & 1 /* _IO_USER_BUF */)) stdio_list[1 + n++] = (uint64_t)(uintptr_t)f->_IO_buf_base;
    _IO_list_unlock();
    stdio_list[0] = n;
    ml_atomic_store_relaxed(&ml__ring->stdio_list, n ? (uint64_t)(uintptr_t)stdio_list : 0);
}

/* The exit handshake, once per process image: the final module list, a last
 * mallinfo sample, the exit record, and the wait for the collector's exit
 * scan. `sp` is where the program's part of this thread's stack starts.
 * The other threads' allocation calls are held from just before the exit
 * record on (ml__exit_hold): not before the module scan and the mallinfo
 * sample, which take the loader's and the arenas' locks that a held thread
 * might own. What runs after this destructor (libc's own clean-up) takes
 * no lock a held thread could own: it runs in the exiting thread, and held
 * threads wait before the real allocator is called. */
static void exit_handshake(uint64_t sp, bool crash, const uint64_t *regs, uint32_t nregs) {
#ifdef ML_TEST_HOOKS
    test_exit_delay();
#endif
    ml__modules_scan(false);
    if (!crash) note_stdio_buffers();
    /* One last sample, unless the last one was slow (then only when due), or
     * the heap lost many blocks since (then it would be slow). Never in a
     * crash: the thread may have died inside malloc, holding its lock. */
    if (real_mallinfo2 && !crash && !heap_dropped() &&
        (mallinfo_due() || ml_atomic_load_relaxed(&mallinfo_cost_ns) <= MALLINFO_FINAL_MAX_NS))
        mallinfo_sample();
    /* Set before the exit record, which the collector reads with acquire
     * order. */
    for (uint32_t k = 0; k < nregs && k < 6; k++) ml__ring->exit_regs[k] = regs[k];
    ml_atomic_store_relaxed(&ml__ring->exit_nregs, (nregs < 6 ? nregs : 6) | (crash ? ML_EXIT_CRASH : 0));
    ml_atomic_store_relaxed(&ml__ring->exit_sp, sp);
    ml__tls.exiting = 1;
    ml_atomic_store_release(&ml__exit_hold, 1);
    if (!__libc_single_threaded) settle();
    ml_blob_exit_t b = {ml_atomic_load_relaxed(&ml__ring->nested_skipped)};
    ml__emit_blob(ML_BLOB_EXIT, &b, sizeof b);
    /* A process that made itself non-dumpable (PR_SET_DUMPABLE 0, as
     * ssh-agent does) cannot be read by another process of its
     * user: the collector's scan would fail, and every live block count as
     * a definite leak. It is dumpable for the scan only, then as it was. */
    int dumpable = ml__seccomp_mode ? 1 : prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); /* not asked under seccomp */
    if (dumpable == 0) (void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    /* Let the collector look at the heap before exit tears it down; never
     * wait for a collector that is gone, nor for longer than 30 s. */
    ml_atomic_store_release(&ml__ring->exit_scan, ML_EXIT_SCAN_ASKED);
    /* The collector wakes the futex when it is done: a small process' scan
     * takes well under a millisecond, and every process that ends pays this
     * wait (thousands of them under --follow-fork). */
    /* Bounded by the clock, not by the count of waits: a futex that fails
     * at once (a seccomp filter's EPERM) would otherwise end the wait in
     * microseconds, before the scan. Then it sleeps instead, or spins. */
    int saved_errno = errno;
    uint64_t give_up_at = mono_ns() + 30 * 1000000000ull;
    for (int i = 0; ml__state_acquire() == ML_STATE_READY; i++) {
        if (ml_atomic_load_acquire(&ml__ring->exit_scan) == ML_EXIT_SCAN_DONE) break;
        if (i % 100 == 99 && (!ml__collector_alive() || mono_ns() > give_up_at)) break;
        struct timespec ts = {0, 1000000};
        if (syscall(SYS_futex, &ml__ring->exit_scan, FUTEX_WAIT, ML_EXIT_SCAN_ASKED, &ts, NULL, 0) < 0 &&
            errno != ETIMEDOUT && errno != EAGAIN && errno != EINTR && nanosleep(&ts, NULL) < 0 && errno != EINTR)
            ml_cpu_relax();
    }
    errno = saved_errno;
    if (dumpable == 0) (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    if (ml_atomic_load_acquire(&ml__ring->exit_scan) != ML_EXIT_SCAN_DONE) {
        /* No scan (the collector is gone, or took too long): nothing to keep still. */
        ml_atomic_store_release(&ml__exit_hold, 0);
        syscall(SYS_futex, &ml__exit_hold, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
    } else {
        ml_atomic_store_release(&hold_until_ns, mono_ns() + HOLD_AFTER_NS);
    }
    ml_atomic_store_release(&exit_over, 1);
}

/* Preloaded first, destroyed last: the program's own destructors have run.
 * Keep recording after the handshake, since later destructors (libc's,
 * other libraries') may still free memory. */
__attribute__((destructor(101))) static void ml_dtor(void) {
    if (ml__state_relaxed() != ML_STATE_READY || ml__tls.guard) return;
    ml__tls.guard++;
    if (!ml_atomic_exchange_acq_rel(&exit_asked, 1)) {
        /* exit()'s caller may hold a pointer in a callee-saved register,
         * which exit's frames (left out of the scan) saved or still hold:
         * roots, as valgrind finds them at exit_group (lk_exitreg). */
        uint64_t regs[6];
        uint64_t sp = ml__caller_sp("exit", regs);
        exit_handshake(sp, false, regs, sp ? 6 : 0);
    }
    ml__tls.guard--;
    if (ml__tls.deferred_sig) ml__deferred_signal();
}

/* A program that ends with _exit or _Exit (dash does, and so do forked
 * children that did not exec) runs no destructor: the handshake is made
 * here, before the process is gone, with its memory as it was (valgrind
 * checks leaks at that point too). glibc's exit() reaches its own _exit
 * without the PLT, so this is not called twice. A vfork child shares its
 * parent's memory and must leave it alone: its pid is not the one this
 * image registered with. */
static bool handshake_here(uint64_t sp, bool crash, const uint64_t *regs, uint32_t nregs) {
    if (ml__state_relaxed() == ML_STATE_READY && !ml__tls.guard &&
        (uint32_t)getpid() == ml_atomic_load_relaxed(&recorded_pid) && !ml_atomic_exchange_acq_rel(&exit_asked, 1)) {
        ml__tls.guard++;
        exit_handshake(sp, crash, regs, nregs);
        ml__tls.guard--;
        if (ml__tls.deferred_sig) ml__deferred_signal();
        return true;
    }
    return false;
}

/* The exit status, into the ring header (ml_ring_hdr_t.end_status) for
 * the collector, which is not a followed child's parent and so has no
 * other way to learn it: written at the last moment memlens sees, so that
 * a process killed before (in a destructor, during the exit scan) stays
 * "unknown". Only by this image's own process: a vfork child shares our
 * memory, ring included, and must not write its status there. */
static void note_end_status(int status, bool signaled) {
    if (ml__state_relaxed() != ML_STATE_READY || !ml__ring ||
        (uint32_t)getpid() != ml_atomic_load_relaxed(&recorded_pid))
        return;
    ml_atomic_store_release(&ml__ring->end_status, ML_END_STATUS_SET | (signaled ? ML_END_STATUS_SIGNALED : 0) |
                                                        ((uint32_t)status & 0xffu));
}

/* Another thread is making the exit handshake (a second signal, or a
 * fault while the program exits): the scan it asked for ends before this
 * thread's signal ends the process, at most 30 s later. Not from inside
 * memlens (the guard is up), where the thread may hold what the scan
 * needs, except from the exit hold's wait, which holds nothing. */
static void wait_for_the_scan(void) {
    if (ml__state_relaxed() != ML_STATE_READY || (ml__tls.guard && !ml__tls.holding) ||
        (uint32_t)getpid() != ml_atomic_load_relaxed(&recorded_pid) || !ml_atomic_load_acquire(&exit_asked))
        return;
    for (int i = 0; i < 30000 && !ml_atomic_load_acquire(&exit_over); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* exit() and a return from main (glibc's start code calls exit with main's
 * result): registered in the constructor, before glibc's start code
 * registers the loader's destructor pass, so it runs after every
 * destructor (ours too), just before stdio's last flush and _exit.
 *
 * Threads that call exit() at once share glibc's list of exit handlers:
 * each takes the next one. While one runs the loader's destructor pass,
 * and in it memlens' exit handshake, another can take this handler, the
 * last, and go on to _exit, which ended the process in the middle of the
 * scan (four threads calling exit(3): every live block "definite", the
 * scan never written). So the handshake is made here when no thread has
 * made it yet, and otherwise this thread waits until it is over (at once
 * after the usual single exit: our destructor made it). */
static void ml_on_exit(int status, void *arg) {
    (void)arg;
    if (ml__state_relaxed() == ML_STATE_READY && !ml__tls.guard && !ml_atomic_load_acquire(&exit_asked)) {
        uint64_t regs[6];
        ml__tls.guard++;
        uint64_t sp = ml__caller_sp("exit", regs);
        ml__tls.guard--;
        if (!handshake_here(sp, false, regs, sp ? 6 : 0)) wait_for_the_scan();
    } else {
        wait_for_the_scan();
    }
    note_end_status(status, false);
}

static _Noreturn void exit_now(int status, uint64_t sp) {
    handshake_here(sp, false, NULL, 0);
    note_end_status(status, false);
    for (;;) syscall(SYS_exit_group, status);
}

/* quick_exit's status, kept by its hook until its last handler runs. */
static _Atomic int quick_exit_status;

/* quick_exit's last handler: the program's handlers have run, and glibc
 * goes on to _exit without the PLT. The stack is scanned from this
 * thread's stack pointer, as valgrind scans it at exit_group. */
static void ml_quick_exit(void) {
    handshake_here(0, false, NULL, 0);
    note_end_status(ml_atomic_load_relaxed(&quick_exit_status), false);
}

/* The caller's stack starts right above the return address: libmemlens.so
 * keeps frame pointers. Registers are not roots: valgrind, which checks at
 * the exit_group system call, does not read them either (a block held only
 * in a callee-saved register at _exit is definitely lost for it). */
#define CALLER_SP() ((uint64_t)(uintptr_t)__builtin_frame_address(0) + 2 * sizeof(void *))

ML_EXPORT _Noreturn void _exit(int status) {
    exit_now(status, CALLER_SP());
}

ML_EXPORT _Noreturn void _Exit(int status) {
    exit_now(status, CALLER_SP());
}

/* daemon(): glibc's forks, and its parent ends by glibc's own _exit,
 * inside libc, past the hook above. So the process `memlens run` started
 * (a server that daemonises) ended with no handshake: its trace had no
 * exit scan and called every block it still held a definite leak
 * (fx_daemon: 300 B definite, "not_scanned", where valgrind says 200 B
 * definite and 100 B reachable; --fail-on-leak failed). The same steps
 * here, with the parent's end through exit_now: the fork
 * through libc's fork (the pthread_atfork handlers run, as in glibc's),
 * then, in the child, what glibc 2.36's misc/daemon.c does: setsid, chdir
 * to / unless nochdir, and unless noclose /dev/null, checked to be the
 * character device 1,3 (else ENODEV), on descriptors 0, 1 and 2. */
ML_EXPORT int daemon(int nochdir, int noclose);
ML_EXPORT int daemon(int nochdir, int noclose) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid > 0) exit_now(0, CALLER_SP());
    if (setsid() == -1) return -1;
    if (!nochdir) (void)chdir("/");
    if (noclose) return 0;
    int fd = open("/dev/null", O_RDWR, 0);
    if (fd == -1) return -1;
    struct stat st;
    int err = fstat(fd, &st) != 0 ? errno : 0;
    if (!err && (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3))) err = ENODEV;
    if (err) {
        (void)close(fd);
        errno = err;
        return -1;
    }
    (void)dup2(fd, STDIN_FILENO);
    (void)dup2(fd, STDOUT_FILENO);
    (void)dup2(fd, STDERR_FILENO);
    if (fd > 2) (void)close(fd);
    return 0;
}

/* exit() called by a thread while another thread is in exit() already.
 * The threads share glibc's list of exit handlers, each taking the next:
 * one runs the loader's destructor pass (and memlens' handshake in it),
 * one our last handler (ml_on_exit, which waits), and a third finds the
 * list empty and goes straight on to _exit, ending the process under the
 * scan: four threads calling exit(3) at once had every live block
 * "definite", the scan never written. Such a thread makes the handshake
 * itself, here, where no thread has made it yet (the process ends once
 * its exit() gets through, as valgrind scans at whichever thread's
 * exit_group), or waits until the scan is over. The first thread, and
 * one that calls exit() again from a handler, goes on as before. A return
 * from main calls glibc's exit() without this: a thread's exit() that
 * comes first takes handlers the main thread would have run, among them
 * the loader's (our destructor's handshake) or ours (ml_on_exit); only a
 * main thread that returns after other threads took every handler goes
 * on to _exit unheld. */
static void *_Atomic real_exit;

ML_EXPORT _Noreturn void exit(int status) {
    int me = (int)syscall(SYS_gettid), first = 0;
    /* Not in a vfork child (it shares our memory) nor a child we do not
     * follow: their pid is not this image's. */
    if (ml__state_relaxed() == ML_STATE_READY && (uint32_t)getpid() == ml_atomic_load_relaxed(&recorded_pid) &&
        !atomic_compare_exchange_strong(&first_exit_tid, &first, me) && first != me &&
        !handshake_here(CALLER_SP(), false, NULL, 0))
        wait_for_the_scan();
    void (*f)(int) = (void (*)(int))ml__next_symbol(&real_exit, "exit");
    if (f) f(status);
    for (;;) syscall(SYS_exit_group, status);
}

/* quick_exit(status): the status for ml_quick_exit, then glibc's. */
static void *_Atomic real_quick_exit;

ML_EXPORT _Noreturn void quick_exit(int status) {
    ml_atomic_store_relaxed(&quick_exit_status, status);
    void (*f)(int) = (void (*)(int))ml__next_symbol(&real_quick_exit, "quick_exit");
    if (f) f(status);
    for (;;) syscall(SYS_exit_group, status); /* no quick_exit in this libc: as _exit */
}

/* ------------------------------------------------------------------------- */
/* A process that dies by a signal                                           */
/* ------------------------------------------------------------------------- */

/* A program killed by a signal runs no destructor: SIGABRT (abort, a failed
 * assert, an uncaught C++ exception, glibc's heap checks), SIGSEGV, SIGBUS,
 * SIGFPE, SIGILL, SIGTRAP and SIGSYS, the signals a program raises on
 * itself by what it does, and those sent to it (SIGTERM...). It used to end
 * with no scan: every live block counted
 * definite, where valgrind scans at the signal (73 KiB "definite" for a
 * C++ program that threw, against valgrind's 64 B). memlens installs its
 * own handler for each of these signals whose action is the default: it
 * makes the exit handshake (from abort's caller for SIGABRT, from the
 * interrupted stack pointer for the others), then sends the signal again,
 * now with the default action, which ends the process as
 * it would have ended (the same signal, a core dump where there would have
 * been one). The handler stays out of the program's way: a program that
 * installs its own replaces it, one that asks sees the default action
 * (sigaction and signal below), and one that sets the default action back
 * (as crash handlers do before they raise the signal again) gets memlens'
 * handler back, hidden the same way. What cannot be hidden: the raw
 * rt_sigaction system call, /proc/PID/status' SigCgt, and the obsolete
 * bsd_signal, sysv_signal and sigset, which return memlens' handler.
 * x86-64 only (the stack pointer is read from the signal's context). */
#if defined(__x86_64__)
/* Also every signal whose default action ends the process and that comes
 * from outside (SENT_SIGNALS below): SIGTERM from timeout(1), kill or a CI
 * runner, SIGINT and SIGHUP from a terminal, SIGPIPE from a reader gone...
 * valgrind scans at those too. Not SIGKILL, which nothing can catch. */
#define CRASH_SIGNALS(X)                                                                            \
    X(SIGABRT) X(SIGSEGV) X(SIGBUS) X(SIGFPE) X(SIGILL) X(SIGTRAP) X(SIGSYS) X(SIGTERM) X(SIGINT) X(SIGHUP) \
    X(SIGQUIT) X(SIGPIPE) X(SIGALRM) X(SIGUSR1) X(SIGUSR2) X(SIGXCPU) X(SIGXFSZ) X(SIGVTALRM) X(SIGPROF)
#define CRASH_BIT(sig) | (1u << (sig))
static const uint32_t crash_set = 0 CRASH_SIGNALS(CRASH_BIT);
/* those that only come from outside (kill, the terminal, a timer, a limit) */
#define SENT_SIGNALS(X)                                                                             \
    X(SIGTERM) X(SIGINT) X(SIGHUP) X(SIGQUIT) X(SIGPIPE) X(SIGALRM) X(SIGUSR1) X(SIGUSR2) X(SIGXCPU) \
    X(SIGXFSZ) X(SIGVTALRM) X(SIGPROF)
static const uint32_t sent_set = 0 SENT_SIGNALS(CRASH_BIT);
static _Atomic uint32_t crash_ours; /* bit per signal: memlens' handler is the one installed */
static void *_Atomic real_sigaction_fn, *_Atomic real_signal_fn;
typedef int (*sigaction_fn_t)(int, const struct sigaction *, struct sigaction *);

static bool is_crash_signal(int sig) {
    return sig > 0 && sig < 32 && (crash_set >> sig & 1);
}

static void crash_handler(int sig, siginfo_t *si, void *ucv) {
    (void)si;
    int saved = errno;
    const ucontext_t *uc = ucv;
    /* A signal sent from outside that finds the thread inside memlens, in a
     * recording call (its busy flag up) or in its own exit handshake: the
     * thread may hold a ring slot or a lock the handshake needs. Put off
     * until the call is done (ml__call_done) or the handshake over; both
     * are moments away. Elsewhere inside memlens (the guard up otherwise),
     * the process dies unscanned, as before. */
    if ((sent_set >> sig & 1) && ml__tls.guard && !ml__tls.holding && !ml__tls.deferred_sig &&
        ((ml__tls.busy && ml_atomic_load_relaxed(ml__tls.busy)) ||
         (ml__tls.exiting && !ml_atomic_load_acquire(&exit_over)))) {
        ml__tls.deferred_sig = (uint8_t)sig;
        errno = saved;
        return;
    }
    /* abort()'s own frames (raise, pthread_kill, and the loader's lazy
     * binding before them) lie below its caller's and hold slots they never
     * wrote, with stale pointers of calls that returned before; valgrind
     * skips such undefined words. Whether those slots were overwritten
     * varies from run to run (lk_abort's dropped block was reachable in 8
     * of 30). The thread's stack counts from abort's caller, where it can
     * be found, and the caller's callee-saved registers, which abort's
     * frames kept, are roots. */
    uint64_t sp = 0, regs[6];
    if (sig == SIGABRT && ml__state_relaxed() == ML_STATE_READY && !ml__tls.guard) {
        ml__tls.guard++;
        sp = ml__caller_sp("abort", regs);
        ml__tls.guard--;
    }
    bool made = sp ? handshake_here(sp, true, regs, 6)
                   : handshake_here((uint64_t)uc->uc_mcontext.gregs[REG_RSP], true, NULL, 0);
    if (!made) wait_for_the_scan();
    /* The default action again, then the signal once more: it is blocked
     * while this runs, and arrives as this returns (a fault, as the
     * instruction runs again). Not SA_RESETHAND: that resets the action
     * when the signal is delivered, before the kernel blocks it for the
     * handler, and a second one sent meanwhile (timeout(1) signals the
     * program, and memlens forwards its own) killed the process before the
     * handler ran, in about 1 run of 8. */
    sigaction_fn_t real = (sigaction_fn_t)ml_atomic_load_relaxed(&real_sigaction_fn);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ml_atomic_and_relaxed(&crash_ours, ~(1u << sig));
    if (real) real(sig, &dfl, NULL); /* known: it installed this handler */
    note_end_status(sig, true);
    syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
    errno = saved;
}

/* Puts memlens' handler on `sig` with the real sigaction: true if done. */
static bool crash_install(sigaction_fn_t real, int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = crash_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    /* the others wait until this one has made the handshake */
    sigemptyset(&sa.sa_mask);
#define CRASH_MASK(s) sigaddset(&sa.sa_mask, s);
    CRASH_SIGNALS(CRASH_MASK)
#undef CRASH_MASK
    if (real(sig, &sa, NULL) != 0) return false;
    ml_atomic_or_relaxed(&crash_ours, 1u << sig);
    return true;
}

/* At start: every crash signal whose action is the default. */
static void crash_handlers_install(void) {
    sigaction_fn_t real = (sigaction_fn_t)ml__next_symbol(&real_sigaction_fn, "sigaction");
    if (!real) return;
#define CRASH_INSTALL(sig)                                                                          \
    {                                                                                              \
        struct sigaction old;                                                                      \
        if (real(sig, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) \
            crash_install(real, sig);                                                              \
    }
    CRASH_SIGNALS(CRASH_INSTALL)
#undef CRASH_INSTALL
}

/* What the program sees of a crash signal's old action: the default one
 * where memlens' handler was installed. */
static void crash_hide(struct sigaction *old) {
    memset(old, 0, sizeof *old);
    old->sa_handler = SIG_DFL;
    sigemptyset(&old->sa_mask);
}

ML_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    sigaction_fn_t real = (sigaction_fn_t)ml__next_symbol(&real_sigaction_fn, "sigaction");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    if (!is_crash_signal(sig)) return real(sig, act, old);
    bool ours = ml_atomic_load_relaxed(&crash_ours) >> sig & 1;
    /* (read before the call: act and old may be the same struct) */
    bool to_default = act && !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL;
    int rc = real(sig, act, old);
    if (rc != 0) return rc;
    if (old && ours) crash_hide(old);
    if (act) {
        ml_atomic_and_relaxed(&crash_ours, ~(1u << sig));
        if (to_default && ml__state_relaxed() == ML_STATE_READY) crash_install(real, sig);
    }
    return 0;
}

ML_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
    sighandler_t (*real)(int, sighandler_t) =
        (sighandler_t(*)(int, sighandler_t))ml__next_symbol(&real_signal_fn, "signal");
    if (!real) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    if (!is_crash_signal(sig)) return real(sig, handler);
    bool ours = ml_atomic_load_relaxed(&crash_ours) >> sig & 1;
    sighandler_t prev = real(sig, handler);
    if (prev == SIG_ERR) return prev;
    ml_atomic_and_relaxed(&crash_ours, ~(1u << sig));
    sigaction_fn_t real_sa = (sigaction_fn_t)ml__next_symbol(&real_sigaction_fn, "sigaction");
    if (handler == SIG_DFL && real_sa && ml__state_relaxed() == ML_STATE_READY) crash_install(real_sa, sig);
    return ours ? SIG_DFL : prev;
}
#else
static void crash_handlers_install(void) {
}
#endif

/* The signal crash_handler put off: sent again now that the thread is out
 * of memlens, where its handler makes the handshake. */
void ml__deferred_signal(void) {
    int sig = ml__tls.deferred_sig;
    ml__tls.deferred_sig = 0;
    if (sig) syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
}

/* A dlopen with RTLD_DEEPBIND: counted, its library named (the first
 * one) for the trace, and the modules found from now on redirected to the
 * hooks (redirect_cb). */
static void deepbind_note(const char *file) {
    ml_atomic_store_relaxed(&deepbind_seen, 1);
    if (!ml__ring) return;
    if (ml_atomic_add_relaxed(&ml__ring->deepbind, 1) != 0) return;
    path_tail(ml__ring->deepbind_first, sizeof ml__ring->deepbind_first, file ? file : "the program itself");
}

/* Called by the dlopen trampoline before it jumps to the real dlopen, with
 * dlopen's arguments. */
void *ml__dlopen_enter(const char *file, int flags);
void *ml__dlopen_enter(const char *file, int flags) {
    if (ml__state_relaxed() == ML_STATE_UNINIT) ml__init();
    if (!ml__real.dlopen) ml__real.dlopen = (typeof(ml__real.dlopen))dlsym(RTLD_NEXT, "dlopen");
    if (flags & RTLD_DEEPBIND) deepbind_note(file);
    ml_atomic_store_relaxed(&ml__modcheck, 4096);
    ml__tls.dlopened = DLOPEN_STACKS;
    return (void *)ml__real.dlopen;
}

/* Called by the dlmopen trampoline. Into the program's own namespace
 * (LM_ID_BASE) it is a dlopen. Into another one, the objects get their own
 * copy of libc, whose malloc this library does not replace (LD_PRELOAD
 * objects are loaded into the first namespace only): what code there
 * allocates is not traced. Counted (ml_ring_hdr_t.dlmopen_other), and the
 * collector says so. */
void *ml__dlmopen_enter(Lmid_t lmid, const char *file, int flags);
void *ml__dlmopen_enter(Lmid_t lmid, const char *file, int flags) {
    if (ml__state_relaxed() == ML_STATE_UNINIT) ml__init();
    if (!ml__real.dlmopen) ml__real.dlmopen = (typeof(ml__real.dlmopen))dlsym(RTLD_NEXT, "dlmopen");
    if (lmid == LM_ID_BASE && (flags & RTLD_DEEPBIND)) deepbind_note(file);
    ml_atomic_store_relaxed(&ml__modcheck, 4096);
    ml__tls.dlopened = DLOPEN_STACKS;
    if (lmid != LM_ID_BASE && ml__ring) ml_atomic_add_relaxed(&ml__ring->dlmopen_other, 1);
    return (void *)ml__real.dlmopen;
}

ML_EXPORT int dlclose(void *handle) {
    if (ml__state_relaxed() == ML_STATE_UNINIT) ml__init();
    bool rec = ml__recording();
    /* Module records carry no block: the exit settle need not wait for them
     * (nor for the library's destructors, which may wait for anything). */
    if (rec) ml__call_done();
    if (rec) {
        ml__tls.guard++;
        ml__modules_scan(false);
        ml__tls.guard--;
    }
    int rc = ml__real.dlclose(handle);
    if (rec && ml__state_relaxed() == ML_STATE_READY) {
        ml__tls.guard++;
        ml__modules_scan_waiting(false, 100000000); /* 100 ms at most */
        ml__tls.guard--;
    }
    return rc;
}
