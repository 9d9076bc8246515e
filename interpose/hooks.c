/* hooks.c - the exported allocation functions of libmemlens.so.
 *
 * Each hook forwards to the next definition (dlsym(RTLD_NEXT)), so a program
 * that brings its own allocator as a shared library keeps it. Ordering rule
 * (STYLE 14): an allocation is recorded after the real call succeeded, a free
 * before the real free, so that the ring order is the order in which
 * addresses change hands between threads. realloc is a free of the old block
 * (recorded before the call) and an allocation of the new one (after); when it
 * fails the old block lives on, which ML_EV_REALLOC_FAIL says.
 */
#define _GNU_SOURCE
#include "interpose_internal.h"
#ifdef ML_TEST_HOOKS
#include "../trace/ml_options.h"
#endif

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */
/* Recording                                                                 */
/* ------------------------------------------------------------------------- */

/* The allocator's usable size of a block: it tells the size class the block
 * came from (internal waste, and the trace's address model), whatever the
 * allocator. glibc reads it from the chunk header in a few nanoseconds. */
static inline uint64_t usable_size(void *p) {
    return ml__real.malloc_usable_size ? ml__real.malloc_usable_size(p) : 0;
}

/* Sampling: a free is recorded exactly when its block was sampled (the set
 * in sampled.c); without sampling, always. */
static inline bool wants_free(const void *p) {
    return !ml__sample_bytes || ml__sampled_remove(p);
}

/* No copy of a returned pointer may stay in the stack memory below the
 * program's frame: the exit scan would read a stale copy in a dead (or a
 * later, never-written) frame as a root and call a dropped block reachable
 * (docs/analysis.md, "Root rules"). So an allocation hook
 *
 *   1. takes the stack before the real call (take_stack), when the pointer
 *      does not exist yet: the unwinders, by far the deepest part, never see
 *      it;
 *   2. hands the pointer only to record_alloc, whose calls are shallow, and
 *   3. zeroes the stack below its own frame afterwards, as deep as
 *      record_alloc and its callees went: SCRUB_BYTES on the usual path,
 *      SCRUB_SLOW_BYTES when the ring was full (the producer waited) or the
 *      thread announced itself, SCRUB_DEEP_BYTES after ml__attention.
 *
 * The sizes are measured with gcc -fstack-usage on this library. The usual
 * path is record_alloc (80 bytes) -> ml__emit (80), glibc's
 * malloc_usable_size and ml__sampled_add (48): about 210 bytes. The deepest
 * other chain is record_alloc -> ml__emit -> announce_thread (64) ->
 * ml__emit_blob (80) -> ml_ring_write_blob (96) -> ml_ring__claim_slow
 * (144) -> ml__collector_alive (16) and a system call wrapper: about 620
 * bytes. ml__attention (a module scan after dlopen, a glibc counter sample)
 * goes deeper still: dl_iterate_phdr and a 4 KiB path buffer.
 * tests/leaks/scrub_probe.cc counts the copies an allocation leaves with and
 * without memlens (tests/leaks/scrub_check.py). */
#define SCRUB_BYTES 256
#define SCRUB_SLOW_BYTES 1024
#define SCRUB_DEEP_BYTES (16 * 1024)

enum { SCRUB_USUAL, SCRUB_SLOW, SCRUB_DEEP };

/* 16 plain 16-byte stores: memset of 256 bytes compiles to `rep stos`,
 * whose start-up costs more than the stores (about 10 ns a call here). */
typedef long long ml_v2_t __attribute__((vector_size(16)));

/* force_align_arg_pointer: one `and` that realigns the stack, for a caller
 * that called malloc with it misaligned (the stores below are aligned
 * ones; docs/recorder.md, "A misaligned stack"). */
static __attribute__((noinline, force_align_arg_pointer)) void scrub(void) {
    ml_v2_t buf[SCRUB_BYTES / sizeof(ml_v2_t)];
    volatile ml_v2_t *v = buf; /* volatile: neither dead nor turned back into memset */
#pragma GCC unroll 16
    for (unsigned i = 0; i < SCRUB_BYTES / sizeof(ml_v2_t); i++) v[i] = (ml_v2_t){0, 0};
}

static __attribute__((noinline)) void scrub_slow(void) {
    char buf[SCRUB_SLOW_BYTES];
    __builtin_memset(buf, 0, sizeof buf);
    __asm__ volatile("" : : "r"(buf) : "memory");
}

static __attribute__((noinline)) void scrub_deep(void) {
    char buf[SCRUB_DEEP_BYTES];
    __builtin_memset(buf, 0, sizeof buf);
    __asm__ volatile("" : : "r"(buf) : "memory");
}

/* What an allocation hook decided before the real call. */
typedef struct {
    uint32_t stack;
    uint8_t flags;
    uint8_t what; /* PRE_* */
    bool busy;    /* ml__recording said yes: ml__call_done when the call ends */
} pre_t;

enum { PRE_NONE, PRE_RECORD, PRE_NESTED };

#ifdef ML_TEST_HOOKS
static void test_nested(void);
static void test_slow(size_t n);
static void test_signal_arm(size_t n);
static void test_signal(void);
#endif

static __attribute__((noinline)) uint32_t take_stack(uint8_t *flags) {
    ml__tls.guard++;
    /* After this thread's dlopen: the new object into the module map before
     * a stack that may run in it is interned (runtime.c, SCAN_WAIT_NS). */
    if (ml_unlikely(ml__tls.dlopened)) ml__modules_scan_own_dlopen();
    uint32_t stack = ml__stack_capture(flags);
#ifdef ML_TEST_HOOKS
    test_nested();
    test_signal();
#endif
    ml__tls.guard--;
    return stack;
}

/* An allocation or free made while memlens works (the guard is up): kept
 * for nest_flush, or counted as skipped when the stash is full. A signal
 * handler of the program that allocates can run in the middle of this (its
 * call is nested too) or of nest_flush, on the same thread: the entry is
 * claimed with one atomic step before it is written, so that two never
 * share one, and nest_flush empties the stash only while no entry came
 * after its last read. Nothing is lost without being counted. */
static __attribute__((noinline)) void nest_push(uint8_t type, uint8_t kind, void *p, uint64_t size) {
    ml_tls_t *t = &ml__tls;
    if (ml__state_relaxed() != ML_STATE_READY || !ml__ring) return;
    uint32_t i = __atomic_load_n(&t->nnest, __ATOMIC_RELAXED);
    do {
        if (i >= sizeof t->nest / sizeof *t->nest) {
            ml_atomic_add_relaxed(&ml__ring->nested_skipped, 1);
            return;
        }
    } while (!__atomic_compare_exchange_n(&t->nnest, &i, i + 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    t->nest[i].ptr = (uint64_t)(uintptr_t)p;
    t->nest[i].size = size;
    t->nest[i].type = type;
    t->nest[i].kind = kind;
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* written before an interrupted flush goes on */
}

/* Records what nest_push kept, in order, once the hook has left memlens;
 * allocations get the stack of the program's call that was being recorded. */
static __attribute__((noinline)) void nest_flush(uint32_t stack) {
    ml_tls_t *t = &ml__tls;
    t->guard++;
    for (uint32_t i = 0;; i++) {
        uint32_t n = __atomic_load_n(&t->nnest, __ATOMIC_RELAXED);
        if (i == n) {
            if (__atomic_compare_exchange_n(&t->nnest, &n, 0, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) break;
            i--; /* a handler added one after the read: record it too */
            continue;
        }
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        uint8_t type = t->nest[i].type;
        ml__emit(type, t->nest[i].kind, 0, t->nest[i].ptr, t->nest[i].size, type == ML_EV_ALLOC ? stack : 0);
    }
    t->guard--;
}

/* The size word of an allocation event: requested size, slack on top. */
static inline uint64_t alloc_size_word(void *p, size_t n) {
    uint64_t size = n;
    if (size >> 48 == 0) {
        uint64_t u = usable_size(p), slack = u > n ? u - n : 0;
        size |= (slack > 0xffff ? 0xffff : slack) << 48;
    }
    return size;
}

/* Returns how deep the caller scrubs (SCRUB_*). */
static __attribute__((noinline)) int record_alloc(void *p, size_t n, uint8_t kind, pre_t pre) {
    ml_tls_t *t = &ml__tls;
    t->guard++;
    int depth = t->has_thread ? SCRUB_USUAL : SCRUB_SLOW; /* ml__emit announces the thread */
    uint64_t waits = ml_atomic_load_relaxed(&ml__ring->waits);
    uint8_t flags = pre.flags;
    if (ml__sample_bytes) { /* before_alloc's ml__sample_hit chose this one */
        flags |= ML_EVF_SAMPLED;
        ml__sampled_add(p);
    }
    ml__emit(ML_EV_ALLOC, kind, flags, (uint64_t)(uintptr_t)p, alloc_size_word(p, n), pre.stack);
    if (ml_unlikely(ml_atomic_load_relaxed(&ml__ring->waits) != waits)) depth = SCRUB_SLOW;
    if (ml_unlikely(ml_atomic_load_relaxed(&ml__modcheck) > 0 ||
                    ml_atomic_load_relaxed(&ml__ctl->mallinfo_gen) != ml__mallinfo_seen)) {
        ml__attention();
        depth = SCRUB_DEEP;
    }
    t->guard--;
    return depth;
}

static __attribute__((noinline)) void record_free(void *p, uint8_t kind) {
    ml__tls.guard++;
    ml__emit(ML_EV_FREE, kind, 0, (uint64_t)(uintptr_t)p, usable_size(p), 0);
    ml__tls.guard--;
}

static __attribute__((noinline)) void record_plain(uint8_t type, uint8_t kind, void *p, size_t n) {
    ml__tls.guard++;
    ml__emit(type, kind, 0, (uint64_t)(uintptr_t)p, n, 0);
    ml__tls.guard--;
}

/* As for record_alloc, the stack was taken before the real call. */
static __attribute__((noinline)) void record_mmap(void *p, size_t n, uint8_t kind, uint32_t stack,
                                                  uint8_t flags) {
    ml__tls.guard++;
    ml__emit(ML_EV_MMAP, kind, flags, (uint64_t)(uintptr_t)p, n, stack);
    ml__tls.guard--;
}

/* A hook called while memlens itself is working (libunwind, dlsym, libc on
 * our behalf), or by a signal handler of the program that interrupted it:
 * passed through. The trace says how many, as calls of the program it
 * lacks, unless the caller is memlens' own code or its libunwind's: those
 * are memlens' own (libunwind maps its per-thread caches), no loss. */
static __attribute__((noinline)) void count_nested(const void *caller) {
    if (ml__state_relaxed() == ML_STATE_READY && ml__ring && !ml__own_code(caller))
        ml_atomic_add_relaxed(&ml__ring->nested_skipped, 1);
}

/* Whether an allocation of n bytes is recorded: always, or when sampling,
 * when the countdown says so. */
static inline bool wants_alloc(size_t n) {
    return !ml__sample_bytes || ml__sample_hit(n);
}

/* Before the real call: record (and take the stack now), count as nested,
 * or nothing. */
static inline pre_t before_alloc(size_t n) {
    pre_t pre = {0, 0, PRE_NONE, false};
    if (ml__recording()) {
        pre.busy = true;
        if (wants_alloc(n)) {
#ifdef ML_TEST_HOOKS
            test_slow(n);
            test_signal_arm(n);
#endif
            pre.what = PRE_RECORD;
            pre.stack = take_stack(&pre.flags);
            if (ml_unlikely(ml__tls.nnest)) nest_flush(pre.stack);
        }
    } else if (ml__tls.guard) {
        pre.what = PRE_NESTED;
    }
    return pre;
}

static inline void after_alloc(void *p, size_t n, uint8_t kind, pre_t pre) {
    if (ml_unlikely(p == NULL)) {
        if (pre.busy) ml__call_done();
        return;
    }
    if (ml_likely(pre.what == PRE_RECORD)) {
        int depth = record_alloc(p, n, kind, pre);
        if (ml_unlikely(ml__tls.nnest)) nest_flush(pre.stack);
        ml__call_done();
        if (ml_likely(depth == SCRUB_USUAL)) scrub();
        else if (depth == SCRUB_SLOW) scrub_slow();
        else scrub_deep();
        return;
    }
    if (pre.what == PRE_NESTED) nest_push(ML_EV_ALLOC, kind, p, alloc_size_word(p, n));
    if (pre.busy) ml__call_done();
}

/* Makes sure the real function is known; during start-up returns false and
 * the caller serves the request from the bootstrap pool. */
static inline bool ready(void *fn) {
    if (ml_likely(fn != NULL)) return true;
    if (ml__state_relaxed() == ML_STATE_UNINIT) ml__init();
    return false;
}

/* ------------------------------------------------------------------------- */
/* malloc family                                                             */
/* ------------------------------------------------------------------------- */

ML_EXPORT void *malloc(size_t n) {
    if (ml_unlikely(!ready((void *)ml__real.malloc)) && !ml__real.malloc)
        return ml__boot_alloc(n, 16);
    pre_t pre = before_alloc(n);
    void *p = ml__real.malloc(n);
    after_alloc(p, n, ML_KIND_MALLOC, pre);
    return p;
}

ML_EXPORT void free(void *p) {
    if (!p || ml_unlikely(ml__is_boot(p))) return;
    if (ml_unlikely(!ml__real.free)) ml__init();
    if (ml__recording()) {
        if (wants_free(p)) record_free(p, ML_KIND_FREE);
        if (ml_unlikely(ml__tls.nnest)) nest_flush(0);
        ml__call_done();
    }
    else if (ml__tls.guard) nest_push(ML_EV_FREE, ML_KIND_FREE, p, usable_size(p));
    ml__real.free(p);
}

ML_EXPORT void *calloc(size_t n, size_t m) {
    if (ml_unlikely(!ready((void *)ml__real.calloc)) && !ml__real.calloc) {
        size_t total;
        if (__builtin_mul_overflow(n, m, &total)) return NULL;
        return ml__boot_alloc(total, 16); /* static storage: already zero */
    }
    pre_t pre = before_alloc(n * m);
    void *p = ml__real.calloc(n, m);
    after_alloc(p, n * m, ML_KIND_CALLOC, pre);
    return p;
}

static void *boot_realloc(void *old, size_t n) {
    /* A block from the bootstrap pool moves to the real allocator. */
    void *p = ml__real.malloc ? malloc(n) : ml__boot_alloc(n, 16);
    if (p && old) {
        size_t avail = ml__boot_avail(old);
        memcpy(p, old, n < avail ? n : avail);
    }
    return p;
}

/* realloc and reallocarray share this body. glibc's reallocarray calls
 * realloc through the PLT, so forwarding to the real reallocarray would
 * record the call twice; the overflow check is all it adds. */
static void *realloc_impl(void *old, size_t n, uint8_t kind) {
    if (ml_unlikely(old && ml__is_boot(old))) return boot_realloc(old, n);
    if (ml_unlikely(!ready((void *)ml__real.realloc)) && !ml__real.realloc)
        return boot_realloc(old, n);
    bool rec = ml__recording();
    bool freed = old && rec && wants_free(old);
    if (freed) record_free(old, kind);
    /* Inside memlens: the old block's end waits in the stash with the new one. */
    bool nested_old = old && !rec && ml__tls.guard && ml__state_relaxed() == ML_STATE_READY;
    uint32_t mark = ml__tls.nnest;
    if (nested_old) nest_push(ML_EV_FREE, kind, old, usable_size(old));
    pre_t pre = before_alloc(n);
    void *p = ml__real.realloc(old, n);
    if (p) {
        after_alloc(p, n, kind, pre);
    } else {
        if (freed && n) record_plain(ML_EV_REALLOC_FAIL, kind, old, 0);
        else if (nested_old && n && ml__tls.nnest > mark) ml__tls.nnest = mark; /* failed: old stays */
        if (pre.busy) ml__call_done();
    }
    return p;
}

ML_EXPORT void *realloc(void *old, size_t n) {
    return realloc_impl(old, n, ML_KIND_REALLOC);
}

ML_EXPORT void *reallocarray(void *old, size_t n, size_t m) {
    size_t total;
    if (__builtin_mul_overflow(n, m, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_impl(old, total, ML_KIND_REALLOCARRAY);
}

ML_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
    if (ml_unlikely(!ready((void *)ml__real.posix_memalign)) && !ml__real.posix_memalign) {
        *out = ml__boot_alloc(n, align);
        return *out ? 0 : ENOMEM;
    }
    size_t req = ml__aligned_request(n, align, __builtin_return_address(0));
    pre_t pre = before_alloc(req);
    int rc = ml__real.posix_memalign(out, align, n);
    after_alloc(rc == 0 ? *out : NULL, req, ML_KIND_POSIX_MEMALIGN, pre);
    return rc;
}

#define ALIGNED_HOOK(name, kind)                                                                   \
    ML_EXPORT void *name(size_t align, size_t n) {                                                 \
        if (ml_unlikely(!ready((void *)ml__real.name)) && !ml__real.name)                          \
            return ml__boot_alloc(n, align);                                                       \
        size_t req = ml__aligned_request(n, align, __builtin_return_address(0));                     \
        pre_t pre = before_alloc(req);                                                             \
        void *p = ml__real.name(align, n);                                                         \
        after_alloc(p, req, kind, pre);                                                            \
        return p;                                                                                  \
    }

ALIGNED_HOOK(aligned_alloc, ML_KIND_ALIGNED_ALLOC)
ALIGNED_HOOK(memalign, ML_KIND_MEMALIGN)

#define PAGE_HOOK(name, kind)                                                                      \
    ML_EXPORT void *name(size_t n) {                                                               \
        if (ml_unlikely(!ready((void *)ml__real.name)) && !ml__real.name)                          \
            return ml__boot_alloc(n, 4096);                                                        \
        pre_t pre = before_alloc(n);                                                               \
        void *p = ml__real.name(n);                                                                \
        after_alloc(p, n, kind, pre);                                                              \
        return p;                                                                                  \
    }

PAGE_HOOK(valloc, ML_KIND_VALLOC)
PAGE_HOOK(pvalloc, ML_KIND_PVALLOC)

/* ------------------------------------------------------------------------- */
/* jemalloc's own API                                                        */
/* ------------------------------------------------------------------------- */

/* mallocx, rallocx, xallocx, dallocx and sdallocx, jemalloc's
 * non-standard API: a block from malloc freed with dallocx was a false
 * definite leak, and one from mallocx was missed. They are recorded as
 * malloc, realloc and free are, when the next definition is in the object
 * whose malloc the hooks call (jemalloc is the program's allocator); any
 * other definition of those names is called as it is. */
static bool same_object_as_malloc(void *f) {
    Dl_info a, b;
    return f && ml__real.malloc && dladdr(f, &a) && dladdr((void *)ml__real.malloc, &b) && a.dli_fbase == b.dli_fbase;
}

typedef struct {
    void *_Atomic fn;
    _Atomic int mode; /* 0 unknown, 1 pass through, 2 record */
} xfn_t;

static void *xfn(xfn_t *x, const char *name, bool *record) {
    int mode = __atomic_load_n(&x->mode, __ATOMIC_ACQUIRE);
    void *f = ml__next_symbol(&x->fn, name);
    if (ml_unlikely(mode == 0) && ml__real.malloc) {
        mode = same_object_as_malloc(f) ? 2 : 1;
        __atomic_store_n(&x->mode, mode, __ATOMIC_RELEASE);
    }
    *record = mode == 2;
    return f;
}

static void free_hook(void *p, uint8_t kind) {
    if (ml__recording()) {
        if (wants_free(p)) record_free(p, kind);
        if (ml_unlikely(ml__tls.nnest)) nest_flush(0);
        ml__call_done();
    } else if (ml__tls.guard) {
        nest_push(ML_EV_FREE, kind, p, usable_size(p));
    }
}

ML_EXPORT void *mallocx(size_t n, int flags);
ML_EXPORT void *mallocx(size_t n, int flags) {
    static xfn_t x;
    bool rec;
    void *(*f)(size_t, int) = (void *(*)(size_t, int))xfn(&x, "mallocx", &rec);
    if (!f) return NULL;
    if (!rec) return f(n, flags);
    pre_t pre = before_alloc(n);
    void *p = f(n, flags);
    after_alloc(p, n, flags & 0x40 ? ML_KIND_CALLOC : ML_KIND_MALLOC, pre); /* MALLOCX_ZERO */
    return p;
}

ML_EXPORT void dallocx(void *p, int flags);
ML_EXPORT void dallocx(void *p, int flags) {
    static xfn_t x;
    bool rec;
    void (*f)(void *, int) = (void (*)(void *, int))xfn(&x, "dallocx", &rec);
    if (!f) return;
    if (rec && p) free_hook(p, ML_KIND_FREE);
    f(p, flags);
}

ML_EXPORT void sdallocx(void *p, size_t n, int flags);
ML_EXPORT void sdallocx(void *p, size_t n, int flags) {
    static xfn_t x;
    bool rec;
    void (*f)(void *, size_t, int) = (void (*)(void *, size_t, int))xfn(&x, "sdallocx", &rec);
    if (!f) return;
    if (rec && p) free_hook(p, ML_KIND_FREE);
    f(p, n, flags);
}

/* rallocx moves or resizes a block (never NULL in, NULL out on failure,
 * the old block then kept); xallocx resizes it in place and returns its
 * usable size. Both are a free of the old block and an allocation at the
 * result, as realloc is. */
ML_EXPORT void *rallocx(void *old, size_t n, int flags);
ML_EXPORT void *rallocx(void *old, size_t n, int flags) {
    static xfn_t x;
    bool rec;
    void *(*f)(void *, size_t, int) = (void *(*)(void *, size_t, int))xfn(&x, "rallocx", &rec);
    if (!f) return NULL;
    if (!rec) return f(old, n, flags);
    bool freed = old && ml__recording() && wants_free(old);
    if (freed) record_free(old, ML_KIND_REALLOC);
    pre_t pre = before_alloc(n);
    void *p = f(old, n, flags);
    if (p) {
        after_alloc(p, n, ML_KIND_REALLOC, pre);
    } else {
        if (freed) record_plain(ML_EV_REALLOC_FAIL, ML_KIND_REALLOC, old, 0);
        if (pre.busy) ml__call_done();
    }
    return p;
}

ML_EXPORT size_t xallocx(void *p, size_t n, size_t extra, int flags);
ML_EXPORT size_t xallocx(void *p, size_t n, size_t extra, int flags) {
    static xfn_t x;
    bool rec;
    size_t (*f)(void *, size_t, size_t, int) = (size_t (*)(void *, size_t, size_t, int))xfn(&x, "xallocx", &rec);
    if (!f) return 0;
    if (!rec || !p) return f(p, n, extra, flags);
    size_t before = usable_size(p);
    size_t got = f(p, n, extra, flags);
    if (got != before && ml__recording()) { /* resized in place: the block is `got` bytes now */
        if (wants_free(p)) record_free(p, ML_KIND_REALLOC);
        ml__call_done();
        pre_t pre = before_alloc(got);
        after_alloc(p, got, ML_KIND_REALLOC, pre);
    }
    return got;
}

/* ------------------------------------------------------------------------- */
/* Anonymous mappings                                                        */
/* ------------------------------------------------------------------------- */

/* Whether the code at `caller` is the allocator's whose malloc the hooks
 * call (ml__alloc_code_lo/hi; never when that is glibc's). One unsigned
 * compare: an empty range holds nothing. */
static inline bool from_alloc_code(const void *caller) {
    return (uintptr_t)caller - ml__alloc_code_lo < ml__alloc_code_hi - ml__alloc_code_lo;
}

static inline __attribute__((always_inline)) void *mmap_hook(void *addr, size_t len, int prot, int flags,
                                                             int fd, off_t off, const void *caller) {
    if (ml_unlikely(!ml__real.mmap)) {
        ml__init();
        if (!ml__real.mmap) return MAP_FAILED;
    }
    bool rec = (flags & MAP_ANONYMOUS) && ml__recording();
    uint8_t sflags = 0;
    uint32_t stack = rec ? take_stack(&sflags) : 0;
    if (rec && from_alloc_code(caller)) sflags |= ML_EVF_ALLOCATOR;
    void *p = ml__real.mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && (flags & MAP_ANONYMOUS)) {
        if (rec) {
            record_mmap(p, len, ML_KIND_MMAP, stack, sflags);
            if (ml_unlikely(ml__tls.nnest)) nest_flush(stack);
            ml__call_done();
            scrub_slow(); /* rare: the deeper one costs nothing that counts */
        } else if (ml__tls.guard) {
            count_nested(caller);
        }
    }
    if (rec) ml__call_done(); /* (again, or a failed call's) */
    return p;
}

ML_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return mmap_hook(addr, len, prot, flags, fd, off, __builtin_return_address(0));
}

ML_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return mmap_hook(addr, len, prot, flags, fd, off, __builtin_return_address(0));
}

ML_EXPORT int munmap(void *addr, size_t len) {
    if (ml_unlikely(!ml__real.munmap)) {
        ml__init();
        if (!ml__real.munmap) return -1;
    }
    if (ml__recording()) {
        record_plain(ML_EV_MUNMAP, ML_KIND_MUNMAP, addr, len);
        ml__call_done();
    }
    return ml__real.munmap(addr, len);
}

ML_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
    void *new_addr = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    if (ml_unlikely(!ml__real.mremap)) {
        ml__init();
        if (!ml__real.mremap) return MAP_FAILED;
    }
    bool rec = ml__recording();
    uint8_t sflags = 0;
    uint32_t stack = rec ? take_stack(&sflags) : 0;
    if (rec && from_alloc_code(__builtin_return_address(0))) sflags |= ML_EVF_ALLOCATOR;
    if (rec) record_plain(ML_EV_MUNMAP, ML_KIND_MREMAP, old, old_len);
    void *p = ml__real.mremap(old, old_len, new_len, flags, new_addr);
    if (rec) {
        if (p != MAP_FAILED) record_mmap(p, new_len, ML_KIND_MREMAP, stack, sflags);
        else record_plain(ML_EV_MMAP_FAIL, ML_KIND_MREMAP, old, old_len);
        if (ml_unlikely(ml__tls.nnest)) nest_flush(stack);
        ml__call_done();
        scrub_slow();
    }
    return p;
}

/* ------------------------------------------------------------------------- */
/* The hooks' own addresses, for `memlens attach` (attach.c)                 */
/* ------------------------------------------------------------------------- */

/* Inside the library a reference to `malloc` goes through the GOT to the
 * first definition in the process, which in an attached process is the
 * program's allocator, not these hooks. attach.c writes these hidden aliases
 * into the program's GOT entries instead. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 9
/* GCC warns when an alias has fewer attributes than its target (libc
 * declares mmap leaf and nothrow, aligned_alloc malloc): the alias takes
 * them all. It is only ever used for its address. */
#define ML_HOOK_ATTRS(name) copy(name),
#else
#define ML_HOOK_ATTRS(name)
#endif
#define ML_HOOK_ALIAS(name)                                                                                \
    extern __typeof(name) ml__hook_##name __attribute__((ML_HOOK_ATTRS(name) alias(#name), visibility("hidden")));
ML_HOOK_ALIAS(malloc)
ML_HOOK_ALIAS(free)
ML_HOOK_ALIAS(calloc)
ML_HOOK_ALIAS(realloc)
ML_HOOK_ALIAS(reallocarray)
ML_HOOK_ALIAS(posix_memalign)
ML_HOOK_ALIAS(aligned_alloc)
ML_HOOK_ALIAS(memalign)
ML_HOOK_ALIAS(valloc)
ML_HOOK_ALIAS(pvalloc)
ML_HOOK_ALIAS(mmap)
ML_HOOK_ALIAS(mmap64)
ML_HOOK_ALIAS(munmap)
ML_HOOK_ALIAS(mremap)

#ifdef ML_TEST_HOOKS
/* ML_TEST_NESTED_ALLOC=N (test builds only): every stack capture also
 * allocates N bytes through malloc, as libc does when it allocates inside
 * our hook, and frees the one it made 16 captures before; the last 16 stay
 * in this array. Lets test_record check that such blocks are recorded.
 * With ML_TEST_NESTED_BURST=K it makes K blocks of N bytes instead, each
 * freed at once (2K calls in one capture, more than the stash holds: the
 * rest are counted as skipped). */
void *ml__test_nested_keep[16];
static void test_nested(void) {
    static uint64_t n = ~0ull, burst;
    static unsigned i;
    if (n == ~0ull) {
        n = ml_option_uint(ML_ENV_TEST_NESTED_ALLOC);
        burst = ml_option_uint(ML_ENV_TEST_NESTED_BURST);
    }
    if (!n) return;
    if (burst) {
        for (uint64_t k = 0; k < burst; k++) free(malloc(n));
        return;
    }
    void *old = ml__test_nested_keep[i % 16];
    ml__test_nested_keep[i % 16] = malloc(n);
    i++;
    free(old);
}

/* A call preempted between its check of the exit hold and its record, for
 * as long as a loaded machine may keep a thread off the CPU: the exit
 * settle must wait for it (test_report's
 * a_call_under_way_at_exit_lands_before_the_exit_record). The program's
 * ml_test_slow_entered, if it exports one, learns that the call is past its
 * check. */
static void test_slow(size_t n) {
    static uint64_t size = ~0ull;
    if (size == ~0ull) size = ml_option_uint(ML_ENV_TEST_SLOW_SIZE);
    if (!size || n != size) return;
    ml__tls.guard++;
    void (*entered)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "ml_test_slow_entered");
    ml__tls.guard--;
    if (entered) entered();
    struct timespec ts = {0, 300000000L};
    nanosleep(&ts, NULL);
}

/* A SIGTERM sent from outside that lands while memlens is inside a
 * recording call, taking the stack: the handler must put it off until the
 * call is done, then scan (test_report's
 * a_sigterm_inside_memlens_waits_for_the_call_then_scans). kill(), as
 * another process would send it: the kernel delivers it to this thread on
 * the way back from the system call, with the guard up. */
static ML_TLS int test_signal_armed;
static void test_signal_arm(size_t n) {
    static uint64_t size = ~0ull;
    if (size == ~0ull) size = ml_option_uint(ML_ENV_TEST_SIGNAL_SIZE);
    test_signal_armed = size && n == size;
}
static void test_signal(void) {
    if (!test_signal_armed) return;
    test_signal_armed = 0;
    kill(getpid(), SIGTERM);
}
#endif
