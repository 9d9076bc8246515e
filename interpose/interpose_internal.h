/* interpose_internal.h - shared state of libmemlens.so (the preload library).
 *
 * Everything here runs inside the traced program, often inside its malloc.
 * Rules (STYLE 11-16): no malloc, no stdio, no locks on the hot path; our own
 * memory comes from raw mmap; all internal work runs with the per-thread
 * guard raised. An allocation or free that libc (or libunwind) makes while
 * the guard is raised is not recorded on the spot (we may be inside
 * ml__emit): it waits in the thread's small stash (ml_tls_t.nest) and is
 * recorded as soon as the hook that was running leaves memlens, attributed
 * to the program's call that was being recorded (issue 13: memory libc
 * allocates inside the hook on the program's behalf, e.g. a pthread key
 * array, is then a block like any other, scanned at exit). Only what does
 * not fit in the stash is passed through and counted as nested_skipped.
 */
#ifndef ML_INTERPOSE_INTERNAL_H
#define ML_INTERPOSE_INTERNAL_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>
#include "../trace/ml_event.h"
#include "../trace/ml_ring.h"

#define ML_EXPORT __attribute__((visibility("default")))

/* The next definition of `name` after libmemlens.so (the real execve, sbrk,
 * ...), looked up on first use and kept in *slot. NULL when there is none. */
static inline void *ml__next_symbol(void *_Atomic *slot, const char *name) {
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}
#define ML_TLS __attribute__((tls_model("initial-exec"))) __thread

/* Process state. */
enum {
    ML_STATE_UNINIT = 0,   /* nothing resolved yet */
    ML_STATE_INIT = 1,     /* ml__init() is running */
    ML_STATE_READY = 2,    /* recording */
    ML_STATE_OFF = 3,      /* pass-through: no collector, child not followed, or gave up */
};

typedef struct {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    void *(*mmap64)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    void *(*mremap)(void *, size_t, size_t, int, ...);
    void *(*dlopen)(const char *, int);
    void *(*dlmopen)(long, const char *, int); /* Lmid_t is a long */
    int (*dlclose)(void *);
    size_t (*malloc_usable_size)(void *);
} ml_real_t;

extern ml_real_t ml__real;
/* The address range of the object whose malloc the hooks call, when that is
 * not glibc (jemalloc, tcmalloc, mimalloc linked or preloaded after us, or
 * any other library that defines malloc); both 0 otherwise. Set once by
 * ml__init before recording starts. An anonymous mapping made from its code
 * is its heap's backing store (ML_EVF_ALLOCATOR). */
extern uintptr_t ml__alloc_code_lo, ml__alloc_code_hi;
/* dl_iterate_phdr's callback that finds the address range of one object's
 * PT_LOAD segments: arg is uintptr_t[3], [0] the object's load base (its
 * dlpi_addr), [1] and [2] set to its range (runtime.c; cxx.c uses it too). */
struct dl_phdr_info;
int ml__object_segments(struct dl_phdr_info *info, size_t size, void *arg);
/* The process state (ML_STATE_*). Written by the thread that initialises,
 * forks or gives up, read by every hook: through these wrappers only. The
 * hooks' check is a relaxed load (one plain load on x86, as cheap as the
 * volatile int it replaced); a thread that waits for another's init loads
 * with acquire, and a new state is stored with release, so that what init
 * wrote (the real functions, the ring) is visible to whoever sees READY. */
extern _Atomic int ml__state;
static inline int ml__state_relaxed(void) {
    return ml_atomic_load_relaxed(&ml__state);
}
static inline int ml__state_acquire(void) {
    return ml_atomic_load_acquire(&ml__state);
}
static inline void ml__state_set(int st) {
    ml_atomic_store_release(&ml__state, st);
}
extern ml_ctl_t *ml__ctl;
extern ml_ring_hdr_t *ml__ring;
extern uint64_t ml__sample_bytes;
extern _Atomic int ml__modcheck; /* events left that re-check the module list (after dlopen) */
extern uint32_t ml__mallinfo_seen;

/* Per-thread state, initial-exec TLS (the library is loaded at start-up). */
typedef struct {
    int guard;          /* inside memlens: hooks pass through */
    uint16_t thread;    /* per-process thread index */
    uint8_t has_thread; /* thread index assigned and announced */
    uint8_t has_sample;
    uint16_t dlopened; /* stacks left that look for new modules first (after a dlopen of this thread) */
    uint8_t exiting; /* this thread made the exit handshake: never held (ml__exit_hold) */
    uint8_t holding; /* waiting in ml__exit_hold_wait */
    volatile uint8_t deferred_sig; /* a fatal signal that came inside memlens (runtime.c) */
    uint8_t fork_inside; /* forks under way that came inside memlens (runtime.c, fork_prepare) */
    _Atomic uint32_t *busy; /* this thread's flag in ml__busy (NULL until its first hook call) */
    int64_t sample_left; /* bytes until the next sampled allocation */
    uint64_t rng;
    uint32_t nnest; /* events waiting in nest */
    uint32_t fork_seq; /* the number of this thread's last fork (ML_BLOB_FORK): its child reads it */
    uint32_t tid;      /* as announced (ML_BLOB_THREAD), for a rename by another thread */
    struct {
        uint64_t ptr, size; /* size: as ml__emit takes it (slack in the top 16 bits for an alloc) */
        uint8_t type, kind;
    } nest[8]; /* allocations and frees made inside memlens (see above) */
    /* An aligned operator new passed on to the next definition (cxx.c):
     * the size the program asked for and the alignment, while the call is
     * on its way to aligned_alloc, which libstdc++ asks for the size
     * rounded up to a multiple of the alignment. The aligned hooks record
     * the program's size instead (ml__aligned_request); 0: none. */
    size_t new_req, new_align;
    uintptr_t new_fn; /* the definition it was passed on to */
} ml_tls_t;

extern ML_TLS ml_tls_t ml__tls;

/* The size to record for an aligned allocation of n bytes at `align`: the
 * size an aligned operator new was asked for when this call is the one it
 * makes (n is that size rounded up to the alignment), else n. Takes the
 * note either way: only the operator's first aligned call is its own. */
/* `ret` is the hook's return address: the note is the call's only when
 * that lies in the first ML_NEW_FN_SPAN bytes of the definition the note
 * names (libstdc++'s aligned new is a few dozen instructions). */
#define ML_NEW_FN_SPAN 1024
static inline size_t ml__aligned_request(size_t n, size_t align, const void *ret) {
    ml_tls_t *t = &ml__tls;
    size_t req = t->new_req;
    if (ml_likely(req == 0)) return n;
    t->new_req = 0;
    if ((uintptr_t)ret - t->new_fn < ML_NEW_FN_SPAN && align >= t->new_align && align &&
        !(align & (align - 1)) && req < n && n - req < align && n % align == 0)
        return req;
    return n;
}

/* Our own memory and locks (never the program's malloc, never traced). */
void *ml__raw_mmap(size_t len, int prot, int flags, int fd); /* NULL on failure */
/* Zeroed, private, anonymous, and listed in the registry the exit scan
 * leaves out of the roots (ml_ring_hdr_t.raw_registry). */
void *ml__raw_alloc(size_t len);
/* The same, unlisted: memory that holds nothing of the program's and is
 * unmapped again (exec's environment). */
static inline void *ml__raw_alloc_unlisted(size_t len) {
    return ml__raw_mmap(len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
}
void ml__spin_lock(_Atomic int *lock); /* for the rare paths: new stack nodes, sampled blocks */
static inline void ml__spin_unlock(_Atomic int *lock) {
    ml_atomic_store_release(lock, 0);
}

/* runtime.c: this session's CUDA_INJECTION64_PATH value, or NULL. */
const char *ml__cuda_injection(void);

/* runtime.c */
void ml__init(void);
void *ml__boot_alloc(size_t n, size_t align);
bool ml__is_boot(const void *p);
size_t ml__boot_avail(const void *p);
bool ml__collector_alive(void);
void ml__emit(uint8_t type, uint8_t kind, uint8_t flags, uint64_t ptr, uint64_t size,
              uint32_t stack);
void ml__emit_blob(uint8_t kind, const void *payload, uint32_t len);
/* Without --follow-fork: one more child process this image started, which
 * is not traced (ml_ring_hdr_t.children_unfollowed). Counted by the fork
 * handler (runtime.c) and the exec, spawn, system and popen hooks (exec.c). */
void ml__note_unfollowed_child(void);
void ml__attention(void);
void ml__modules_scan(bool full);
void ml__modules_scan_waiting(bool full, uint64_t wait_ns); /* waits a while for a scan under way */
void ml__modules_scan_own_dlopen(void); /* before a stack, after this thread's dlopen (hooks.c) */
/* The dynamic loader's counts of objects loaded (v[0], dlpi_adds) and
 * unloaded (v[1], dlpi_subs) since the process started. Takes the loader's
 * list lock (dl_iterate_phdr). unwind.c. */
void ml__loader_counts(uint64_t v[2]);
/* The loader's count of loaded objects (dlpi_adds) at the last module scan,
 * and the scan for a stack whose walk read a larger one (stacks.c). */
extern _Atomic uint64_t ml__scanned_adds;
bool ml__modules_scan_behind(uint64_t adds);
int ml__attach_session(const char *ctl); /* attach.c's start: 0 or -errno */
void ml__attach_mallinfo(void *fn);
struct dl_phdr_info;
/* attach.c: a module loaded with RTLD_DEEPBIND (or with one) calls the
 * hooks from now on; 1 done, 0 not relocated yet (try again). Weak: the
 * unit test of runtime.c links neither attach.c nor the hooks. */
int ml__deepbind_redirect(struct dl_phdr_info *info) __attribute__((weak));
bool ml__sample_slow(size_t n);
double ml__neg_log(double u); /* -ln(u) for u in (0, 1], without libm (runtime.c) */

/* Sampling's fast path, inlined into the hooks: one subtraction and a branch
 * for the allocations that are not sampled. */
static inline bool ml__sample_hit(size_t n) {
    ml_tls_t *t = &ml__tls;
    /* sample_left is between 0 and 10^15 here: no overflow, and a
     * request past INT64_MAX (malloc(-1)) counts as INT64_MAX bytes. */
    t->sample_left -= n < (size_t)INT64_MAX ? (int64_t)n : INT64_MAX;
    if (ml_likely(t->sample_left > 0)) return false;
    return ml__sample_slow(n);
}

/* sampled.c: the live sampled blocks (--sample) */
bool ml__sampled_contains(const void *p);
void ml__sampled_add(const void *p);
bool ml__sampled_remove(const void *p); /* true if p was sampled (and is no longer) */
void ml__sampled_lock(void);
void ml__sampled_unlock(void);
void ml__sampled_reset(void);

/* stacks.c */
int ml__stacks_init(void);
const void *ml__unwinder_text(void);
/* Whether pc lies in the code of libmemlens.so or of its libunwind. */
bool ml__own_code(const void *pc);
void ml__stacks_reset(void); /* after fork: new trace, new ids */
/* Stack nodes of an object that was unloaded, out of the trie until it
 * comes back to where it was (runtime.c, module_gone). */
typedef struct {
    uint32_t id, parent;
    uint64_t pc;
} ml_parked_node_t;
typedef struct {
    uint64_t lo, hi, ident; /* the object */
    uint32_t off, n;        /* its nodes in stacks.c's pool */
} ml_parked_t;
void ml__stacks_set_modules(const uint64_t (*lohi)[2], uint32_t n); /* the module map's ranges */
void ml__stacks_park(uint64_t lo, uint64_t hi, ml_parked_t *p);
void ml__stacks_unpark(const ml_parked_t *p);
void ml__stacks_park_free(const ml_parked_t *p, ml_parked_t *sets, uint32_t nsets);
uint32_t ml__stack_capture(uint8_t *flags);
/* The stack pointer in the frame that called the exported function `fn`
 * (exit, abort: the caller's SP once fn returned), found by unwinding from
 * wherever this is called (a signal handler included: libunwind steps
 * through the signal frame); 0 when no frame of fn is on this thread's
 * stack. With regs, also the callee-saved registers (rbx, rbp, r12-r15) of
 * fn's caller as fn received them. Slow (libunwind's proc info, dladdr):
 * once per process, at its end. */
uint64_t ml__caller_sp(const char *fn, uint64_t regs[6]);
void ml__stacks_lock(void);
void ml__stacks_unlock(void);

/* runtime.c: set while the collector scans this process at exit. The
 * program's other threads wait at their next hook call until it is done, so
 * the heap the scan reads is the one the exit record describes (valgrind
 * and LeakSanitizer stop every thread for their scan too). */
extern _Atomic uint32_t ml__exit_hold;
void ml__exit_hold_wait(void);

/* A hook call that is to record something is "busy" from its check of the
 * hold (ml__recording) until it has claimed its ring slots (ml__call_done):
 * the thread's flag in ml__busy is 1 meanwhile. The exiting thread sets the
 * hold, then waits until no other thread's flag is up before it writes the
 * exit record (runtime.c, settle), so that a call which passed the check
 * just before the hold, and was then preempted, still lands before the exit
 * record and the scan judges its block. The fast path is two plain stores
 * to the thread's own cache line; the ordering a store followed by a load
 * needs is given by the exiting side (membarrier), not paid on every call. */
#define ML_BUSY_SLOTS 4096
typedef struct {
    _Atomic uint32_t flag;
    char pad[60];
} ml_busy_t;
extern ml_busy_t ml__busy[ML_BUSY_SLOTS];
_Atomic uint32_t *ml__busy_assign(void);

static inline bool ml__recording(void) {
    if (ml_likely(ml__state_relaxed() == ML_STATE_READY) && !ml__tls.guard) {
        _Atomic uint32_t *b = ml__tls.busy;
        if (ml_unlikely(!b)) b = ml__busy_assign();
        ml_atomic_store_relaxed(b, 1);
        __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the store before the load below */
        if (ml_unlikely(ml_atomic_load_relaxed(&ml__exit_hold))) ml__exit_hold_wait();
        return true;
    }
    return false;
}

/* runtime.c: sends this thread the signal its handler put off while the
 * thread was inside memlens (ml_tls_t.deferred_sig). */
void ml__deferred_signal(void);

/* The end of a call ml__recording said yes to: its records are in the ring. */
static inline void ml__call_done(void) {
    ml_atomic_store_release(ml__tls.busy, 0);
    if (ml_unlikely(ml__tls.deferred_sig)) ml__deferred_signal();
}

#endif
