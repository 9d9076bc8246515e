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

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
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

static __attribute__((noinline)) void record_alloc(void *p, size_t n, uint8_t kind) {
    ml_tls_t *t = &ml__tls;
    t->guard++;
    uint8_t flags = 0;
    if (ml__sample_bytes) { /* the caller's ml__sample_hit chose this one */
        flags |= ML_EVF_SAMPLED;
        ml__sampled_add(p);
    }
    uint32_t stack = ml__stack_capture(&flags);
    uint64_t size = n;
    if (size >> 48 == 0) {
        uint64_t u = usable_size(p), slack = u > n ? u - n : 0;
        size |= (slack > 0xffff ? 0xffff : slack) << 48;
    }
    ml__emit(ML_EV_ALLOC, kind, flags, (uint64_t)(uintptr_t)p, size, stack);
    if (ml_unlikely(ml_atomic_load_relaxed(&ml__modcheck) > 0 ||
                    ml_atomic_load_relaxed(&ml__ctl->mallinfo_gen) != ml__mallinfo_seen))
        ml__attention();
    t->guard--;
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

static __attribute__((noinline)) void record_mmap(void *p, size_t n, uint8_t kind) {
    ml_tls_t *t = &ml__tls;
    t->guard++;
    uint8_t flags = 0;
    uint32_t stack = ml__stack_capture(&flags);
    ml__emit(ML_EV_MMAP, kind, flags, (uint64_t)(uintptr_t)p, n, stack);
    t->guard--;
}

/* A hook called while memlens itself is working (libunwind, dlsym, libc on
 * our behalf) is not the program's: pass it through and count it. */
static __attribute__((noinline)) void count_nested(void) {
    if (ml__state_relaxed() == ML_STATE_READY && ml__ring)
        ml_atomic_add_relaxed(&ml__ring->nested_skipped, 1);
}

/* Whether an allocation of n bytes is recorded: always, or when sampling,
 * when the countdown says so. */
static inline bool wants_alloc(size_t n) {
    return !ml__sample_bytes || ml__sample_hit(n);
}

#define AFTER_ALLOC(p, n, kind)                                                                    \
    do {                                                                                           \
        if (ml_likely(p != NULL)) {                                                                \
            if (ml__recording()) {                                                                 \
                if (wants_alloc(n)) record_alloc(p, n, kind);                                      \
            } else if (ml__tls.guard) {                                                            \
                count_nested();                                                                    \
            }                                                                                      \
        }                                                                                          \
    } while (0)

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
    void *p = ml__real.malloc(n);
    AFTER_ALLOC(p, n, ML_KIND_MALLOC);
    return p;
}

ML_EXPORT void free(void *p) {
    if (!p || ml_unlikely(ml__is_boot(p))) return;
    if (ml_unlikely(!ml__real.free)) ml__init();
    if (ml__recording()) {
        if (wants_free(p)) record_free(p, ML_KIND_FREE);
    }
    else if (ml__tls.guard) count_nested();
    ml__real.free(p);
}

ML_EXPORT void *calloc(size_t n, size_t m) {
    if (ml_unlikely(!ready((void *)ml__real.calloc)) && !ml__real.calloc) {
        size_t total;
        if (__builtin_mul_overflow(n, m, &total)) return NULL;
        return ml__boot_alloc(total, 16); /* static storage: already zero */
    }
    void *p = ml__real.calloc(n, m);
    AFTER_ALLOC(p, n * m, ML_KIND_CALLOC);
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
    void *p = ml__real.realloc(old, n);
    if (rec) {
        if (p) {
            if (wants_alloc(n)) record_alloc(p, n, kind);
        } else if (freed && n) {
            record_plain(ML_EV_REALLOC_FAIL, kind, old, 0);
        }
    } else if (ml__tls.guard) {
        count_nested();
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
    int rc = ml__real.posix_memalign(out, align, n);
    if (rc == 0) AFTER_ALLOC(*out, n, ML_KIND_POSIX_MEMALIGN);
    return rc;
}

#define ALIGNED_HOOK(name, kind)                                                                   \
    ML_EXPORT void *name(size_t align, size_t n) {                                                 \
        if (ml_unlikely(!ready((void *)ml__real.name)) && !ml__real.name)                          \
            return ml__boot_alloc(n, align);                                                       \
        void *p = ml__real.name(align, n);                                                         \
        AFTER_ALLOC(p, n, kind);                                                                   \
        return p;                                                                                  \
    }

ALIGNED_HOOK(aligned_alloc, ML_KIND_ALIGNED_ALLOC)
ALIGNED_HOOK(memalign, ML_KIND_MEMALIGN)

#define PAGE_HOOK(name, kind)                                                                      \
    ML_EXPORT void *name(size_t n) {                                                               \
        if (ml_unlikely(!ready((void *)ml__real.name)) && !ml__real.name)                          \
            return ml__boot_alloc(n, 4096);                                                        \
        void *p = ml__real.name(n);                                                                \
        AFTER_ALLOC(p, n, kind);                                                                   \
        return p;                                                                                  \
    }

PAGE_HOOK(valloc, ML_KIND_VALLOC)
PAGE_HOOK(pvalloc, ML_KIND_PVALLOC)

/* ------------------------------------------------------------------------- */
/* Anonymous mappings                                                        */
/* ------------------------------------------------------------------------- */

ML_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (ml_unlikely(!ml__real.mmap)) {
        ml__init();
        if (!ml__real.mmap) return MAP_FAILED;
    }
    void *p = ml__real.mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && (flags & MAP_ANONYMOUS)) {
        if (ml__recording()) record_mmap(p, len, ML_KIND_MMAP);
        else if (ml__tls.guard) count_nested();
    }
    return p;
}

ML_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return mmap(addr, len, prot, flags, fd, off);
}

ML_EXPORT int munmap(void *addr, size_t len) {
    if (ml_unlikely(!ml__real.munmap)) {
        ml__init();
        if (!ml__real.munmap) return -1;
    }
    if (ml__recording()) record_plain(ML_EV_MUNMAP, ML_KIND_MUNMAP, addr, len);
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
    if (rec) record_plain(ML_EV_MUNMAP, ML_KIND_MREMAP, old, old_len);
    void *p = ml__real.mremap(old, old_len, new_len, flags, new_addr);
    if (rec) {
        if (p != MAP_FAILED) record_mmap(p, new_len, ML_KIND_MREMAP);
        else record_plain(ML_EV_MMAP_FAIL, ML_KIND_MREMAP, old, old_len);
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
#define ML_HOOK_ALIAS(name) extern __typeof(name) ml__hook_##name __attribute__((alias(#name), visibility("hidden")));
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
