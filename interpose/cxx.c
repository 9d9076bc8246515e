/* cxx.c - C++'s operator new and delete, where an allocator library
 * defines them.
 *
 * libstdc++'s (and libc++'s) operator new calls malloc, and its delete
 * free: those reach the hooks (hooks.c), and a C++ program needs nothing
 * here. But jemalloc, tcmalloc and mimalloc define operator new and delete
 * too, on their own heap, without a call to malloc: in a program linked to
 * one of them, or run with it preloaded, every new and delete went past
 * memlens, unsaid (a helper's test: 4 calls seen of 106; with jemalloc, an
 * aligned new that calls aligned_alloc was seen and its delete was not, a
 * false 64-byte leak).
 *
 * So libmemlens.so defines them all. Each one looks up, on its first call,
 * the definition it would otherwise have bound to (RTLD_NEXT). When that
 * one lives in the object whose malloc the hooks call (an allocator
 * library), new is that allocator's malloc, through our malloc hook, and
 * delete its free, through our free: the same heap, recorded. Otherwise
 * (libstdc++, a library with its own pools) the call goes on to it as it
 * was, by a tail call that leaves no frame of ours on the stack. A program
 * that defines operator new itself comes first in the lookup order, and
 * never calls these. A failed allocation goes to the next operator new,
 * which calls the new-handler and throws std::bad_alloc (or returns NULL
 * for the nothrow forms) as the program expects.
 */
#define _GNU_SOURCE
#include "interpose_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* One caller's own definition of an operator (op_mode): its object's
 * code [lo, hi), and the loader's counts of objects loaded and unloaded
 * when it was found; while neither changed, the object and what its scope
 * binds to are the same. */
typedef struct {
    uintptr_t lo, hi;
    unsigned long long adds, subs;
    void *f;
} op_local_t;

enum { OP_LOCALS = 4 };

/* The next definition of one operator, and how to treat it: 0 not yet
 * looked up, 1 pass through, 2 the allocator's (malloc & co.); and the
 * last callers' own definitions, under locals_mu, when there is none in
 * the global scope. */
typedef struct {
    void *_Atomic next;
    _Atomic int mode;
    unsigned turn;
    op_local_t local[OP_LOCALS];
} op_t;

static pthread_mutex_t locals_mu = PTHREAD_MUTEX_INITIALIZER;

/* locals_mu, tried a while: never waited for without end (a fork child of
 * a thread that held it); not taken, the caller looks up as if unknown. */
static bool lock_locals(void) {
    for (int i = 0; i < 256; i++) {
        if (!pthread_mutex_trylock(&locals_mu)) return true;
        sched_yield();
    }
    return false;
}

enum { OP_UNKNOWN = 0, OP_PASS = 1, OP_MALLOC = 2 };

/* The allocator library's code, once one operator was found in it: the
 * calls it makes to operator new itself (tcmalloc's MallocExtension
 * singleton, taken while its own heap starts) go to its own operator, as
 * without memlens; through its malloc there, tcmalloc crashed. */
static uintptr_t _Atomic alloc_lo, alloc_hi;

/* The allocator libraries whose operator new is their malloc under
 * another name. Another library that defines both malloc and operator new
 * (one that counts its calls, or keeps pools) keeps its own operator: its
 * new is called as it was. */
static bool known_allocator(const char *path) {
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    if (!base) return false;
    static const char *const names[] = {"libjemalloc.so", "libtcmalloc.so", "libtcmalloc_minimal.so",
                                        "libtcmalloc_debug.so", "libtcmalloc_and_profiler.so", "libmimalloc.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(base, names[i], strlen(names[i]))) return true;
    return false;
}

/* Whether f lies in a known allocator library that also defines the malloc
 * our hooks call. */
static bool in_allocator(void *f) {
    static void *_Atomic next_malloc;
    void *m = ml__next_symbol(&next_malloc, "malloc");
    Dl_info a, b;
    struct link_map *lm = NULL;
    if (!f || !m || !dladdr1(f, &a, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !dladdr(m, &b) ||
        a.dli_fbase != b.dli_fbase || !known_allocator(a.dli_fname))
        return false;
    uintptr_t r[3] = {(uintptr_t)lm->l_addr, 0, 0};
    dl_iterate_phdr(ml__object_segments, r);
    if (!r[2]) return false; /* its code cannot be told: left alone */
    __atomic_store_n(&alloc_lo, r[1], __ATOMIC_RELAXED);
    __atomic_store_n(&alloc_hi, r[2], __ATOMIC_RELEASE);
    return true;
}

static inline bool from_allocator(const void *ret) {
    uintptr_t a = (uintptr_t)ret;
    return a >= __atomic_load_n(&alloc_lo, __ATOMIC_RELAXED) && a < __atomic_load_n(&alloc_hi, __ATOMIC_ACQUIRE);
}

/* Set while one of ours runs malloc & co. for an operator: the allocator
 * may call operator new itself inside (tcmalloc's malloc_usable_size,
 * which the malloc hook asks, takes its MallocExtension singleton with
 * new), and that call goes to the allocator's own operator, as without
 * memlens: through malloc again, it recursed until the stack overflowed. */
static ML_TLS int in_op;

/* The definition of `name` that the code at `caller` would bind to if
 * libmemlens.so did not define it, when none follows libmemlens.so in the
 * global scope: a C program that dlopens a library (RTLD_LOCAL) needing
 * libstdc++ (ar and ld load their LLVM plugin so) has libstdc++ only in
 * that library's own scope, which RTLD_NEXT does not search, while the
 * library's calls bind to libmemlens.so's operators, which come first (the
 * global scope is searched before the local one). The caller's object,
 * opened again by name (RTLD_NOLOAD: nothing is loaded, its dependencies
 * are not run again), is asked instead: its dependencies are its scope.
 * NULL for the program itself (its scope is the global one) and for
 * libmemlens.so. */
static void *callers_definition(const char *name, const void *caller, op_local_t *at) {
    Dl_info c, self;
    struct link_map *lm = NULL;
    if (!caller || !dladdr1(caller, &c, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_name ||
        !*lm->l_name || !dladdr((void *)callers_definition, &self) || c.dli_fbase == self.dli_fbase)
        return NULL;
    void *h = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return NULL;
    void *f = dlsym(h, name);
    Dl_info d;
    if (f && (!dladdr(f, &d) || d.dli_fbase == self.dli_fbase))
        f = NULL; /* never ours: that recurses */
    uintptr_t r[3] = {(uintptr_t)lm->l_addr, 0, 0};
    dl_iterate_phdr(ml__object_segments, r);
    at->lo = r[1];
    at->hi = r[2];
    dlclose(h);
    return f;
}

static int load_counts(struct dl_phdr_info *info, size_t size, void *arg) {
    unsigned long long *n = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        n[0] = info->dlpi_adds;
        n[1] = info->dlpi_subs;
        n[2] = 1;
    }
    return 1;
}

/* The definition after libmemlens.so in the global scope, when there is
 * one now; otherwise NULL, and in *local the caller's own definition
 * (NULL: none, fall back to malloc & co.), from op->local while nothing
 * was loaded or unloaded since it was found: a lookup takes the loader's
 * lock, and its failed dlsym allocates (a loop of news in such a plugin
 * ran 70 times slower, and recorded six blocks of the loader's a new). */
static void *callers_own(op_t *op, const char *name, const void *caller, void **local) {
    unsigned long long n[3] = {0, 0, 0};
    uintptr_t a = (uintptr_t)caller;
    dl_iterate_phdr(load_counts, n);
    if (n[2] && lock_locals()) {
        for (int i = 0; i < OP_LOCALS; i++) {
            op_local_t *l = &op->local[i];
            if (a >= l->lo && a < l->hi && l->adds == n[0] && l->subs == n[1]) {
                *local = l->f;
                pthread_mutex_unlock(&locals_mu);
                return NULL;
            }
        }
        pthread_mutex_unlock(&locals_mu);
    }
    void *f = dlsym(RTLD_NEXT, name);
    if (f) return f; /* one in the global scope now: op_mode keeps it */
    op_local_t at = {0, 0, n[0], n[1], NULL};
    at.f = callers_definition(name, caller, &at);
    if (n[2] && at.hi && lock_locals()) {
        op->local[op->turn++ % OP_LOCALS] = at;
        pthread_mutex_unlock(&locals_mu);
    }
    *local = at.f;
    return NULL;
}

/* How to treat one operator's call. A definition found after
 * libmemlens.so in the global scope is everyone's, and is kept. One found
 * in the caller's own scope (callers_definition) is that caller's alone,
 * and goes to *local for this call only, never into op->next: kept, it
 * became every other library's operator too (a plugin with its own
 * operator new and delete had its new given to another plugin's
 * libstdc++ code, whose delete, found in its own scope, freed the
 * plugin's block with free: "double free or corruption"), and it still
 * pointed into the plugin's code after dlclose unmapped it (SIGSEGV at
 * the next new). Without memlens each library's calls bind in its own
 * scope; so they do here. */
static inline int op_mode(op_t *op, const char *name, const void *caller, void **local) {
    int mode = __atomic_load_n(&op->mode, __ATOMIC_ACQUIRE);
    if (ml_likely(mode != OP_UNKNOWN)) return in_op && mode == OP_MALLOC ? OP_PASS : mode;
    void *f = __atomic_load_n(&op->next, __ATOMIC_ACQUIRE);
    if (!f) {
        /* None in the global scope (yet): the caller's, for this call;
         * NULL: the operators below fall back to malloc & co. Asked again
         * at the next call (libstdc++ may be opened RTLD_GLOBAL later).
         * Before, the first lookup's failure was kept and operator new
         * aborted the program. */
        f = callers_own(op, name, caller, local);
        if (!f) return OP_PASS;
    }
    __atomic_store_n(&op->next, f, __ATOMIC_RELEASE); /* never NULL over another's find */
    mode = in_allocator(f) ? OP_MALLOC : OP_PASS;
    __atomic_store_n(&op->mode, mode, __ATOMIC_RELEASE);
    return in_op && mode == OP_MALLOC ? OP_PASS : mode;
}

static inline void *op_malloc(size_t n) {
    in_op++;
    void *p = malloc(n ? n : 1);
    in_op--;
    return p;
}

static inline void op_free(void *p) {
    in_op++;
    free(p);
    in_op--;
}

static inline void *op_next(op_t *op, void *local) {
    return local ? local : __atomic_load_n(&op->next, __ATOMIC_ACQUIRE);
}

typedef void *(*new_fn)(size_t);
typedef void *(*new_nt_fn)(size_t, const void *);
typedef void *(*new_al_fn)(size_t, size_t);
typedef void *(*new_al_nt_fn)(size_t, size_t, const void *);
typedef void (*del_fn)(void *);
typedef void (*del_sz_fn)(void *, size_t);
typedef void (*del_nt_fn)(void *, const void *);
typedef void (*del_al_fn)(void *, size_t);
typedef void (*del_sz_al_fn)(void *, size_t, size_t);
typedef void (*del_al_nt_fn)(void *, size_t, const void *);

static void *aligned(size_t n, size_t al) {
    void *p = NULL;
    if (al < sizeof(void *)) al = sizeof(void *);
    in_op++;
    int rc = posix_memalign(&p, al, n ? n : 1);
    in_op--;
    return rc == 0 ? p : NULL;
}

/* Before an aligned operator new is passed on: libstdc++'s (GCC 7 and
 * later, where the C library has aligned_alloc) rounds the size up to a
 * multiple of the alignment, as C11 asks of aligned_alloc, and memlens
 * recorded the rounded size: ::operator new(48, std::align_val_t(128))
 * counted 128 bytes where valgrind and massif, which intercept the
 * operator, count the 48 the program asked for (the size every other
 * allocation is counted by). The note tells the aligned hook that follows
 * (hooks.c, ml__aligned_request); a size that is already a multiple needs
 * none. The call stays a tail call: no frame of ours on the stack. */
static inline void note_request(size_t n, size_t al, const void *fn) {
    /* An alignment that is not a power of two is thrown at before any
     * allocation: no note, which nothing would take. The definition the
     * call goes to is noted too: only an aligned call made from its code
     * takes the note (another library's aligned new, such as jemalloc's,
     * may reach no hook at all, and the program's own aligned_alloc of
     * the rounded size came next and took it: fx_alignown). */
    if (n && al && !(al & (al - 1)) && n % al) {
        ml__tls.new_req = n;
        ml__tls.new_align = al;
        ml__tls.new_fn = (uintptr_t)fn;
    }
}

/* operator new(size_t), new[](size_t) */
#define NEW_PLAIN(sym)                                                          \
    ML_EXPORT void *sym(size_t n);                                              \
    ML_EXPORT void *sym(size_t n) {                                             \
        static op_t op;                                                         \
        const void *ret = __builtin_return_address(0);                          \
        void *local = NULL;                                                     \
        if (op_mode(&op, #sym, ret, &local) == OP_MALLOC && !from_allocator(ret)) { \
            void *p = op_malloc(n);                                             \
            if (ml_likely(p != NULL)) return p;                                 \
        }                                                                       \
        new_fn f = (new_fn)op_next(&op, local);                                 \
        if (f) return f(n);                                                     \
        void *p = op_malloc(n); /* no operator new found to bind to */         \
        if (!p) abort(); /* and no std::bad_alloc to throw */                  \
        return p;                                                               \
    }
NEW_PLAIN(_Znwm)
NEW_PLAIN(_Znam)

/* operator new(size_t, const std::nothrow_t &), and new[] */
#define NEW_NOTHROW(sym)                                                        \
    ML_EXPORT void *sym(size_t n, const void *nt);                              \
    ML_EXPORT void *sym(size_t n, const void *nt) {                             \
        static op_t op;                                                         \
        const void *ret = __builtin_return_address(0);                          \
        void *local = NULL;                                                     \
        if (op_mode(&op, #sym, ret, &local) == OP_MALLOC && !from_allocator(ret)) { \
            void *p = op_malloc(n);                                             \
            if (ml_likely(p != NULL)) return p;                                 \
        }                                                                       \
        new_nt_fn f = (new_nt_fn)op_next(&op, local);                           \
        return f ? f(n, nt) : op_malloc(n);                                     \
    }
NEW_NOTHROW(_ZnwmRKSt9nothrow_t)
NEW_NOTHROW(_ZnamRKSt9nothrow_t)

/* operator new(size_t, std::align_val_t), and new[] */
#define NEW_ALIGNED(sym)                                                        \
    ML_EXPORT void *sym(size_t n, size_t al);                                   \
    ML_EXPORT void *sym(size_t n, size_t al) {                                  \
        static op_t op;                                                         \
        const void *ret = __builtin_return_address(0);                          \
        void *local = NULL;                                                     \
        if (op_mode(&op, #sym, ret, &local) == OP_MALLOC && !from_allocator(ret)) { \
            void *p = aligned(n, al);                                           \
            if (ml_likely(p != NULL)) return p;                                 \
        }                                                                       \
        new_al_fn f = (new_al_fn)op_next(&op, local);                           \
        if (f) {                                                                \
            note_request(n, al, (const void *)f);                               \
            return f(n, al);                                                    \
        }                                                                       \
        void *p = aligned(n, al);                                               \
        if (!p) abort();                                                        \
        return p;                                                               \
    }
NEW_ALIGNED(_ZnwmSt11align_val_t)
NEW_ALIGNED(_ZnamSt11align_val_t)

/* operator new(size_t, std::align_val_t, const std::nothrow_t &), and new[] */
#define NEW_ALIGNED_NOTHROW(sym)                                                \
    ML_EXPORT void *sym(size_t n, size_t al, const void *nt);                   \
    ML_EXPORT void *sym(size_t n, size_t al, const void *nt) {                  \
        static op_t op;                                                         \
        const void *ret = __builtin_return_address(0);                          \
        void *local = NULL;                                                     \
        if (op_mode(&op, #sym, ret, &local) == OP_MALLOC && !from_allocator(ret)) { \
            void *p = aligned(n, al);                                           \
            if (ml_likely(p != NULL)) return p;                                 \
        }                                                                       \
        new_al_nt_fn f = (new_al_nt_fn)op_next(&op, local);                     \
        if (!f) return aligned(n, al);                                          \
        note_request(n, al, (const void *)f);                                   \
        return f(n, al, nt);                                                    \
    }
NEW_ALIGNED_NOTHROW(_ZnwmSt11align_val_tRKSt9nothrow_t)
NEW_ALIGNED_NOTHROW(_ZnamSt11align_val_tRKSt9nothrow_t)

/* The deletes: the allocator's free, or the next delete with the same
 * arguments. Whoever calls: a block the allocator's own code allocated
 * with new (not recorded) and the program deletes is a free the trace
 * does not know, and one the program's code allocated and the
 * allocator's code deletes (tcmalloc's start-up builds a std::string from
 * libstdc++'s inlined code and destroys it from its own) must be a free,
 * or it stays a leak. */
#define DELETE(sym, fn_t, params, args)                                         \
    ML_EXPORT void sym params;                                                  \
    ML_EXPORT void sym params {                                                 \
        static op_t op;                                                         \
        void *local = NULL;                                                     \
        if (op_mode(&op, #sym, __builtin_return_address(0), &local) == OP_MALLOC) { \
            op_free(p);                                                         \
            return;                                                             \
        }                                                                       \
        fn_t f = (fn_t)op_next(&op, local);                                     \
        if (f)                                                                  \
            f args;                                                             \
        else                                                                    \
            op_free(p); /* none found: what libstdc++'s does */                 \
    }
DELETE(_ZdlPv, del_fn, (void *p), (p))
DELETE(_ZdaPv, del_fn, (void *p), (p))
DELETE(_ZdlPvm, del_sz_fn, (void *p, size_t n), (p, n))
DELETE(_ZdaPvm, del_sz_fn, (void *p, size_t n), (p, n))
DELETE(_ZdlPvRKSt9nothrow_t, del_nt_fn, (void *p, const void *nt), (p, nt))
DELETE(_ZdaPvRKSt9nothrow_t, del_nt_fn, (void *p, const void *nt), (p, nt))
DELETE(_ZdlPvSt11align_val_t, del_al_fn, (void *p, size_t al), (p, al))
DELETE(_ZdaPvSt11align_val_t, del_al_fn, (void *p, size_t al), (p, al))
DELETE(_ZdlPvmSt11align_val_t, del_sz_al_fn, (void *p, size_t n, size_t al), (p, n, al))
DELETE(_ZdaPvmSt11align_val_t, del_sz_al_fn, (void *p, size_t n, size_t al), (p, n, al))
DELETE(_ZdlPvSt11align_val_tRKSt9nothrow_t, del_al_nt_fn, (void *p, size_t al, const void *nt), (p, al, nt))
DELETE(_ZdaPvSt11align_val_tRKSt9nothrow_t, del_al_nt_fn, (void *p, size_t al, const void *nt), (p, al, nt))
