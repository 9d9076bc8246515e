/* attach.c - the library's side of `memlens attach PID` (cli/attach.c).
 *
 * `memlens attach` makes the running program dlopen this library (it runs
 * the call itself, through ptrace) and then call ml_attach_start() with the
 * session's control segment. The library is loaded RTLD_LOCAL, so its
 * exported malloc & co. interpose nothing: ml_attach_start() joins the
 * session as a preloaded process would, then redirects the program's calls
 * by rewriting the GOT entries (JUMP_SLOT and GLOB_DAT relocations) that
 * name an allocation function, in every loaded module except this library,
 * the module that defines the allocator (glibc's libc.so.6 normally) and the
 * dynamic loader. ml_attach_stop() puts every entry it changed back, stops
 * recording, waits until the collector has read the ring, and gives the
 * ring's slot pages back; the library stays loaded (its code may still be on a
 * stack) and inert. docs/recorder.md#attach has the limits.
 *
 * The real functions are the ones the program's own lookups find
 * (dlsym(RTLD_DEFAULT)): the global scope holds the program and what it was
 * linked or preloaded with, not this library.
 */
#define _GNU_SOURCE
#include "interpose_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <libunwind.h>
#include <link.h>
#include <malloc.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

extern __typeof(malloc) ml__hook_malloc;
extern __typeof(free) ml__hook_free;
extern __typeof(calloc) ml__hook_calloc;
extern __typeof(realloc) ml__hook_realloc;
extern __typeof(reallocarray) ml__hook_reallocarray;
extern __typeof(posix_memalign) ml__hook_posix_memalign;
extern __typeof(aligned_alloc) ml__hook_aligned_alloc;
extern __typeof(memalign) ml__hook_memalign;
extern __typeof(valloc) ml__hook_valloc;
extern __typeof(pvalloc) ml__hook_pvalloc;
extern __typeof(mmap) ml__hook_mmap;
extern __typeof(mmap64) ml__hook_mmap64;
extern __typeof(munmap) ml__hook_munmap;
extern __typeof(mremap) ml__hook_mremap;
extern __typeof(pipe2) ml__unw_pipe2; /* stacks.c */

/* The functions whose GOT entries are redirected: name, our hook, and where
 * the real function goes (a slot of ml__real). */
typedef struct {
    const char *name;
    void *hook;
    void **real;
} hooked_fn_t;

#define FN(n) {#n, (void *)ml__hook_##n, (void **)&ml__real.n}
static const hooked_fn_t fns[] = {
    FN(malloc),        FN(free),     FN(calloc),  FN(realloc), FN(reallocarray),
    FN(posix_memalign), FN(aligned_alloc), FN(memalign), FN(valloc), FN(pvalloc),
    FN(mmap),          FN(mmap64),   FN(munmap),  FN(mremap),
};
#undef FN
#define NFNS (sizeof fns / sizeof fns[0])

/* The address the program's lookups give for each function when it is not
 * the function itself: a non-PIE program whose code takes the address of
 * malloc (`mov $malloc, %eax`: Debian's python3.11 does) has a "canonical
 * PLT entry", an undefined dynamic symbol whose value is its own PLT stub,
 * and every lookup, dlsym(RTLD_DEFAULT) and other modules' GOT entries
 * included, answers that stub, which jumps through the program's own GOT
 * entry. NULL: none. */
static void *canonical[NFNS];

/* One GOT entry we changed: where, and what it held. */
typedef struct {
    void **slot;
    void *old;
    void *hook;
    uint64_t relro_lo, relro_hi; /* the module's RELRO pages ([lo, hi)), 0 0: none */
} patch_t;

#define MAX_PATCHES 16384
static patch_t *patches; /* raw mmap: MAX_PATCHES entries */
static uint32_t npatches;
static bool attached_once;

/* ------------------------------------------------------------------------- */
/* Modules and their relocations                                             */
/* ------------------------------------------------------------------------- */

static bool module_contains(const struct dl_phdr_info *info, uintptr_t addr) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && addr >= lo && addr < lo + ph->p_memsz) return true;
    }
    return false;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Modules left alone: this library, the one that defines the allocator
 * (libc.so.6, or a replacement such as libjemalloc), glibc's libc.so.6
 * whatever the allocator, and the dynamic loader. */
static bool skipped(const struct dl_phdr_info *info) {
    if (module_contains(info, (uintptr_t)ml__attach_session)) return true;
    if (module_contains(info, (uintptr_t)ml__real.malloc)) return true;
    const char *name = info->dlpi_name ? base_name(info->dlpi_name) : "";
    if (!strncmp(name, "libc.so", 7) || !strncmp(name, "ld-linux", 8) || !strncmp(name, "linux-vdso", 10))
        return true;
    return false;
}

/* A value of the dynamic section: glibc has relocated most pointers in
 * place (d_ptr is then an address), the vDSO's are offsets. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v) {
    return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

/* Stores v into the GOT entry, opening its RELRO page for the time of the
 * store. An aligned 8-byte store is atomic: a thread calling through the
 * entry sees the old function or the new one. */
static bool got_store(void **slot, void *v, uint64_t relro_lo, uint64_t relro_hi) {
    uintptr_t a = (uintptr_t)slot;
    bool ro = a >= relro_lo && a < relro_hi;
    uintptr_t page = a & ~(uintptr_t)4095;
    if (ro && mprotect((void *)page, 4096, PROT_READ | PROT_WRITE) != 0) return false;
    __atomic_store_n(slot, v, __ATOMIC_RELEASE);
    if (ro) mprotect((void *)page, 4096, PROT_READ);
    return true;
}

static void patch_relocs(const struct dl_phdr_info *info, const ElfW(Rela) *rel, size_t bytes,
                         const ElfW(Sym) *symtab, const char *strtab, uint64_t rlo, uint64_t rhi) {
    if (!rel || !symtab || !strtab) return;
    for (size_t i = 0; i < bytes / sizeof *rel; i++) {
        uint32_t type = ELF64_R_TYPE(rel[i].r_info);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
        const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(rel[i].r_info)];
        const char *name = strtab + sym->st_name;
        for (size_t f = 0; f < NFNS; f++) {
            if (strcmp(name, fns[f].name)) continue;
            void **slot = (void **)(info->dlpi_addr + rel[i].r_offset);
            void *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
            /* Bound to the program's function, or not bound yet (lazy
             * binding: the module's own PLT stub). Anything else is an
             * entry this module binds elsewhere on purpose: left alone. */
            if (cur != *fns[f].real && (!canonical[f] || cur != canonical[f]) &&
                !module_contains(info, (uintptr_t)cur))
                break;
            if (npatches == MAX_PATCHES) break;
            patch_t *p = &patches[npatches];
            *p = (patch_t){slot, cur, fns[f].hook, rlo, rhi};
            if (got_store(slot, fns[f].hook, rlo, rhi)) npatches++;
            break;
        }
    }
}

/* What a module's dynamic section says about its relocations: its symbol
 * and string tables, its PLT and other RELA relocations, its RELRO pages
 * ([rlo, rhi), 0 0: none) and the end of its highest segment as linked
 * (`span`: a GOT entry below it holds a link-time value). */
typedef struct {
    const ElfW(Sym) *symtab;
    const char *strtab;
    const ElfW(Rela) *jmprel, *rela; /* jmprel NULL when the PLT's are not RELA */
    size_t jmpsz, relasz;
    uint64_t rlo, rhi, span;
} dynamic_t;

static bool read_dynamic(const struct dl_phdr_info *info, dynamic_t *d) {
    *d = (dynamic_t){0};
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type == PT_LOAD && ph->p_vaddr + ph->p_memsz > d->span) d->span = ph->p_vaddr + ph->p_memsz;
        if (ph->p_type == PT_GNU_RELRO) {
            d->rlo = (info->dlpi_addr + ph->p_vaddr) & ~(uint64_t)4095;
            d->rhi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(uint64_t)4095;
        }
    }
    if (!dyn) return false;
    bool plt_rela = true;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: d->symtab = (const ElfW(Sym) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_STRTAB: d->strtab = (const char *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_JMPREL: d->jmprel = (const ElfW(Rela) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_PLTRELSZ: d->jmpsz = dyn->d_un.d_val; break;
        case DT_PLTREL: plt_rela = dyn->d_un.d_val == DT_RELA; break;
        case DT_RELA: d->rela = (const ElfW(Rela) *)dyn_ptr(info, dyn->d_un.d_ptr); break;
        case DT_RELASZ: d->relasz = dyn->d_un.d_val; break;
        default: break;
        }
    }
    if (!plt_rela) d->jmprel = NULL;
    return true;
}

static int patch_module(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    dynamic_t d;
    if (skipped(info) || !read_dynamic(info, &d)) return 0;
    patch_relocs(info, d.jmprel, d.jmpsz, d.symtab, d.strtab, d.rlo, d.rhi);
    patch_relocs(info, d.rela, d.relasz, d.symtab, d.strtab, d.rlo, d.rhi);
    return 0;
}

/* libunwind (loaded with this library) opens a pipe when it initialises,
 * for its address checks. Bound to glibc's pipe2 it took the program's
 * lowest free descriptors (3 and 4 in most programs), and kept them after
 * the detach: the program's next open() returned 5, and a program that
 * lists its descriptors saw two it never opened. Its GOT entry of pipe2 is
 * redirected to this library's (stacks.c), as a preloaded libmemlens
 * interposes it under `memlens run`: nothing is opened while libunwind
 * initialises, and the pipe its first address check asks for (a frame
 * without unwind information) is moved to the top of the first 1024
 * descriptors. The entry goes back at the detach with the others. */
static int patch_unwinder(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    void *glibc_pipe2 = data;
    dynamic_t d;
    if (!module_contains(info, (uintptr_t)unw_backtrace)) return 0;
    if (!read_dynamic(info, &d) || !d.symtab || !d.strtab) return 1;
    const ElfW(Rela) *rels[2] = {d.jmprel, d.rela};
    size_t sizes[2] = {d.jmpsz, d.relasz};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; rels[k] && i < sizes[k] / sizeof *rels[k]; i++) {
            const ElfW(Rela) *rel = &rels[k][i];
            uint32_t type = ELF64_R_TYPE(rel->r_info);
            if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
            if (strcmp(d.strtab + d.symtab[ELF64_R_SYM(rel->r_info)].st_name, "pipe2")) continue;
            void **slot = (void **)(info->dlpi_addr + rel->r_offset);
            void *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
            if (cur != glibc_pipe2 && !module_contains(info, (uintptr_t)cur)) continue;
            if (npatches == MAX_PATCHES) return 1;
            patch_t *p = &patches[npatches];
            *p = (patch_t){slot, cur, (void *)ml__unw_pipe2, d.rlo, d.rhi};
            if (got_store(slot, (void *)ml__unw_pipe2, d.rlo, d.rhi)) npatches++;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------- */
/* Libraries opened with RTLD_DEEPBIND (memlens run)                         */
/* ------------------------------------------------------------------------- */

/* Such a library, and what it loads with it, looks symbols up in its own
 * scope first: its calls to malloc & co. bind to libc's, past
 * libmemlens.so in the global scope, while libc's own calls (strdup's
 * malloc) still reach the hooks. Untouched, its frees of blocks libc made
 * for it went unseen and those blocks read as leaked. Its GOT entries that
 * name an allocation function are redirected to the hooks, as attach does:
 * those bound to the function the hooks call (ml__real), and those not
 * bound yet (lazy binding: the module's own PLT stub). An entry bound to a
 * definition of the module's own, or to another library's allocator, is
 * left alone. Returns 1 once every such entry is relocated (the loader has
 * finished with the module), 0 while one is not: the loader may still be
 * at it (the scan that found the module can run inside dlopen), and its
 * relocation would overwrite a redirected entry. */
static int redirect_relocs(const struct dl_phdr_info *info, const ElfW(Rela) *rel, size_t bytes,
                           const ElfW(Sym) *symtab, const char *strtab, uint64_t span, uint64_t rlo,
                           uint64_t rhi) {
    if (!rel || !symtab || !strtab) return 1;
    int done = 1;
    for (size_t i = 0; i < bytes / sizeof *rel; i++) {
        uint32_t type = ELF64_R_TYPE(rel[i].r_info);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
        const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(rel[i].r_info)];
        if (sym->st_shndx != SHN_UNDEF) continue; /* the module's own definition */
        const char *name = strtab + sym->st_name;
        for (size_t f = 0; f < NFNS; f++) {
            if (strcmp(name, fns[f].name)) continue;
            void **slot = (void **)(info->dlpi_addr + rel[i].r_offset);
            void *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
            if (cur == fns[f].hook) break;
            if ((uintptr_t)cur < span) { /* a link-time value: not relocated yet */
                done = 0;
                break;
            }
            if (*fns[f].real && (cur == *fns[f].real || module_contains(info, (uintptr_t)cur)))
                (void)got_store(slot, fns[f].hook, rlo, rhi);
            break;
        }
    }
    return done;
}

int ml__deepbind_redirect(struct dl_phdr_info *info) {
    dynamic_t d;
    if (skipped(info) || !read_dynamic(info, &d)) return 1;
    int done = redirect_relocs(info, d.jmprel, d.jmpsz, d.symtab, d.strtab, d.span, d.rlo, d.rhi);
    done &= redirect_relocs(info, d.rela, d.relasz, d.symtab, d.strtab, d.span, d.rlo, d.rhi);
    return done;
}

/* ------------------------------------------------------------------------- */
/* Start and stop                                                            */
/* ------------------------------------------------------------------------- */

/* The modules of the global scope after the program, in lookup order. */
#define MAX_SCOPE 256
typedef struct {
    const char *name[MAX_SCOPE];
    uint32_t n;
    bool first;
} scope_t;

static int collect_scope(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    scope_t *s = data;
    if (s->first) { /* the program itself */
        s->first = false;
        return 0;
    }
    if (module_contains(info, (uintptr_t)ml__attach_session)) return 0; /* this library: RTLD_LOCAL */
    if (info->dlpi_name && info->dlpi_name[0] && s->n < MAX_SCOPE) s->name[s->n++] = info->dlpi_name;
    return 0;
}

/* The definition behind a canonical PLT entry (see `canonical`): the first
 * module after the program whose lookup finds `name` elsewhere than `stub`.
 * The names are collected first: dlopen is not called under
 * dl_iterate_phdr's lock. NULL when none. */
static void *definition_after_program(const char *name, void *stub) {
    scope_t s = {.first = true};
    dl_iterate_phdr(collect_scope, &s);
    for (uint32_t i = 0; i < s.n; i++) {
        void *h = dlopen(s.name[i], RTLD_NOLOAD | RTLD_LAZY);
        if (!h) continue;
        void *p = dlsym(h, name);
        dlclose(h);
        if (p && p != stub) return p;
    }
    return NULL;
}

/* Whether p is a canonical PLT entry: its symbol, in the module holding
 * it, is undefined there. */
static bool is_canonical_plt(void *p) {
    Dl_info di;
    const ElfW(Sym) *sym = NULL;
    return p && dladdr1(p, &di, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_shndx == SHN_UNDEF;
}

/* The program's own functions, as its modules' lookups find them. */
static bool resolve_program_functions(void) {
    for (size_t f = 0; f < NFNS; f++) {
        void *p = dlsym(RTLD_DEFAULT, fns[f].name);
        if (p == fns[f].hook) return false; /* we are preloaded: `memlens run` records it */
        canonical[f] = NULL;
        if (is_canonical_plt(p)) {
            /* Calling the stub would go through the program's GOT entry,
             * which is about to point at our hook: the real function is the
             * one the stub reaches. */
            void *def = definition_after_program(fns[f].name, p);
            if (!def) return false;
            canonical[f] = p;
            p = def;
        }
        *fns[f].real = p;
    }
    ml__real.malloc_usable_size = (typeof(ml__real.malloc_usable_size))dlsym(RTLD_DEFAULT, "malloc_usable_size");
    if (!ml__real.malloc || !ml__real.free || !ml__real.calloc || !ml__real.realloc) return false;
    Dl_info di;
    if (dladdr((void *)ml__real.malloc, &di) && di.dli_fname && strstr(di.dli_fname, "libc.so"))
        ml__attach_mallinfo(dlsym(RTLD_DEFAULT, "mallinfo2"));
    return true;
}

/* Puts back every GOT entry changed (one changed since by someone else
 * stays as it is); returns how many. */
static int unpatch_all(void) {
    int restored = 0;
    for (uint32_t i = npatches; i-- > 0;) {
        patch_t *p = &patches[i];
        if (__atomic_load_n(p->slot, __ATOMIC_ACQUIRE) != p->hook) continue;
        if (got_store(p->slot, p->old, p->relro_lo, p->relro_hi)) restored++;
    }
    npatches = 0;
    return restored;
}

/** Called by `memlens attach` in the program (through ptrace, on the main
 * thread): joins the session whose control segment is `ctl` and hooks the
 * allocation functions. Returns the number of GOT entries redirected, or a
 * negative errno: -EALREADY attached before in this process' life (once
 * per process: other threads' caches hold the old session's stack ids),
 * -EBUSY the library is preloaded (`memlens run` records this process),
 * -ENOENT the session is gone, -EAGAIN no ring, -ENOMEM. */
ML_EXPORT int ml_attach_start(const char *ctl);
ML_EXPORT int ml_attach_start(const char *ctl) {
    if (attached_once) return -EALREADY;
    int st = ml__state_relaxed();
    if (st != ML_STATE_UNINIT && st != ML_STATE_OFF) return -EBUSY;
    ml__tls.guard++;
    int rc = -EBUSY;
    if (!resolve_program_functions()) goto out;
    rc = -ENOMEM;
    if (!patches && !(patches = ml__raw_alloc(MAX_PATCHES * sizeof *patches))) goto out;
    attached_once = true;
    dl_iterate_phdr(patch_unwinder, dlsym(RTLD_DEFAULT, "pipe2"));
    uint32_t unw_patches = npatches;
    rc = ml__attach_session(ctl);
    if (rc < 0) {
        (void)unpatch_all(); /* libunwind's pipe2 */
        goto out;
    }
    dl_iterate_phdr(patch_module, NULL);
    rc = (int)(npatches - unw_patches);
out:
    ml__tls.guard--;
    return rc;
}

/* A pause by poll, not nanosleep: this runs in a thread that memlens may
 * have interrupted inside a system call, which the kernel restarts through
 * the thread's restart block once memlens lets it go (nanosleep,
 * clock_nanosleep, poll, futex waits with a timeout). nanosleep's entry
 * resets that block, and the interrupted call then failed with EINTR, a
 * result the program never gets on its own. poll sets it only when it is
 * interrupted itself. */
static void sleep_ms(long ms) {
    (void)poll(NULL, 0, (int)ms);
}

/** Called by `memlens attach` when the window ends: puts back every GOT
 * entry ml_attach_start changed (one that something else has changed since
 * is left as it is), stops recording, waits (at most 2 s) until the
 * collector has read every event, and gives the ring's pages back. Returns
 * the number of entries restored, or -EINVAL when not attached. */
ML_EXPORT int ml_attach_stop(void);
ML_EXPORT int ml_attach_stop(void) {
    if (!attached_once || !patches) return -EINVAL;
    ml__tls.guard++;
    int restored = unpatch_all();
    ml_ring_hdr_t *h = ml__ring;
    if (ml__state_relaxed() == ML_STATE_READY) {
        ml__modules_scan(false);
        ml__state_set(ML_STATE_OFF);
    }
    /* Hooks already past their state check finish their event; then the
     * collector reads up to the head. A hook that writes later still finds
     * the ring mapped (its pages come back zeroed), never a hole. */
    sleep_ms(20);
    if (h) {
        for (int i = 0; i < 2000; i++) {
            if (ml_atomic_load_acquire(&h->tail) >= ml_atomic_load_acquire(&h->head)) break;
            sleep_ms(1);
        }
        /* The slots only: the header (capacity, counters) stays, so that a
         * late writer finds a ring whose slots are not free and gives up
         * once memlens is gone (ml_ring_claim). */
        uintptr_t lo = ((uintptr_t)ml_ring_slots(h) + 4095) & ~(uintptr_t)4095;
        uintptr_t hi = ((uintptr_t)h + ml_ring_bytes(h->capacity)) & ~(uintptr_t)4095;
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_REMOVE);
    }
    ml__tls.guard--;
    return restored;
}
