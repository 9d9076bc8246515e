/* symbols.c - return addresses to functions, files and lines with libdw.
 *
 * Symbolization happens after the run, from the module map recorded in the
 * trace (path, load bias, build-id), so a trace can be analysed on another
 * machine that has the same binaries or their debug files. Each module gets
 * its own offline Dwfl session, created the first time one of its addresses
 * is asked for: modules that were dlclosed before the program exited are
 * read from their file like any other, and two modules that occupied the
 * same addresses at different times never collide.
 *
 * A module whose file no longer matches the recorded build-id is not used
 * for names (it would give wrong ones); its debug file is looked up by
 * build-id under /usr/lib/debug/.build-id instead, and failing that its
 * frames stay "[module+0xOFFSET]" with a warning.
 *
 * One return address expands into several frames when the call was
 * inlined: DWARF scopes give the chain of DW_TAG_inlined_subroutine entries
 * up to the real function, each inlined frame located at its caller's
 * DW_AT_call_file:DW_AT_call_line. Names come from the linkage name (C++
 * demangled with __cxa_demangle), so templates read `ns::Factory<int>::make()`.
 */
#define _GNU_SOURCE
#include "analysis_internal.h"
#include "ml_options.h"

#include <dlfcn.h>
#include <link.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* __cxa_demangle, from libstdc++ (the Itanium C++ ABI), loaded at the first
 * C++ name rather than linked: `memlens run`'s collector never demangles,
 * and libstdc++ mapped and relocated in it was about 1 MB of its RSS (issue 12). */
typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);
static demangle_fn cxa_demangle;
static pthread_once_t demangle_once = PTHREAD_ONCE_INIT;

static void demangle_load(void) {
    void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
    if (h) *(void **)&cxa_demangle = dlsym(h, "__cxa_demangle");
    if (!cxa_demangle)
        fprintf(stderr, "memlens: cannot load __cxa_demangle from libstdc++.so.6 (%s): C++ names are "
                        "shown mangled\n", h ? "no such symbol" : dlerror());
}

#define MAX_INLINE ML__SYMC_MAX_FRAMES /* frames one address expands into, at most */
#define FRAME_CHUNK 4096
#define STR_CHUNK (64u << 10)

/* A symbol of a module's table, in the index that replaces libdw's linear
 * search (elf_symbol()). */
typedef struct {
    GElf_Addr value, size;
    const char *name;
    int ndx;
    int bind; /* 3 global, 2 weak, 1 local, 0 other: libdw's preference */
} symidx_t;

typedef struct {
    Dwfl *dwfl;
    Dwfl_Module *dm;
    int state; /* 0: not tried, 1: usable, -1: no symbols */
    symidx_t *gsyms; /* the global symbols with a size, by value then index */
    size_t ngsyms;
    symidx_t *lsyms; /* the local symbols with a size, likewise */
    size_t nlsyms;
    GElf_Addr *greach, *lreach; /* prefix maxima of the ends of gsyms, lsyms */
    GElf_Addr *reach; /* reach[i]: the highest end of sized symbols 0..i of
                         `starts` (every binding), a prefix maximum */
    GElf_Addr *starts; /* the sized symbols' start values, sorted */
    size_t nsized;
    GElf_Addr *labels; /* the sizeless symbols' values, sorted */
    size_t nlabels;
    GElf_Addr (*secs)[2]; /* the allocated sections' [start, end), sorted */
    size_t nsecs;
    ml_map_t gaps; /* libdw's answers where a label may name an address */
    bool indexed; /* the index was built (or there is nothing to index) */
    uint64_t base0; /* where the module is reported in `dwfl`: the load base
                       of the trace that opened it (shared ones: see below) */
    bool shared;    /* owned by the shared cache, not by a symbolizer */
    /* The compilation units by their address ranges, built the first time
     * libdw finds no unit for an address (cu_of()). */
    struct curange *cus;
    size_t ncus;
    bool cus_built;
    /* The units whose scopes were indexed, by unit offset (unit_fns()). */
    struct cufns *cufns;
    size_t ncufns, cufns_cap;
    size_t cufns_bytes; /* their ranges' memory, held under SCOPE_INDEX_BUDGET */
    ml__symc_t *symc; /* frames resolved by earlier reports (symcache.c), or NULL */
    bool zstd_debug;  /* its separate debug file's sections are zstd's (find_debuginfo()) */
} modsym_t;

/* The memory one module's unit indexes may hold. A -g build of a program
 * with large units (56 bytes a scope range: a unit of 130,000 inlined
 * instances and blocks takes 7 MB) could otherwise hold them all; past the
 * budget the indexes built so far are dropped, and rebuilt if needed. */
#define SCOPE_INDEX_BUDGET (256u << 20)

/* ML_SYM_SCOPE_BUDGET=BYTES in the environment replaces the budget (tests:
 * a budget of 1 drops every index at the next unit, and the frames must not
 * change). */
static size_t scope_budget(void) {
    static size_t budget;
    if (!budget) {
        const char *e = getenv("ML_SYM_SCOPE_BUDGET");
        char *end;
        unsigned long long v = e && e[0] ? strtoull(e, &end, 10) : 0;
        budget = v && !*end ? (size_t)v : SCOPE_INDEX_BUDGET;
    }
    return budget;
}

/* One address range of one scope of a unit (a function, an inlined
 * instance, a lexical block), and the innermost range that holds it. */
typedef struct {
    Dwarf_Addr lo, hi;
    Dwarf_Die die;
    uint32_t parent; /* index + 1 in the unit's array; 0: none */
    uint32_t depth;  /* of the DIE, for ranges that are equal */
} scoperange_t;

typedef struct cufns {
    Dwarf_Off cu; /* the unit DIE's offset */
    scoperange_t *v;
    size_t n;
} cufns_t;

/* One address range of one compilation unit; `reach` is the highest end of
 * this range and every range sorted before it. */
typedef struct curange {
    Dwarf_Addr lo, hi, reach;
    Dwarf_Die *cudie;
    Dwarf_Addr bias;
} curange_t;

typedef struct {
    uint64_t pc;
    int32_t mod;
    uint32_t n;
    ml_frame_t *f; /* NULL: empty slot */
} pcent_t;

typedef struct chunk_s {
    struct chunk_s *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} chunk_t;

struct ml__symbolizer_s {
    ml_analysis_t *a;
    bool no_symbols;
    modsym_t **ms; /* by module index; NULL: not opened yet */
    uint32_t nms;
    pcent_t *pcs;
    uint64_t pcs_cap, pcs_count;
    const char **strs; /* interned strings, open addressing */
    uint64_t strs_cap, strs_count;
    chunk_t *chunks;
    bool verify; /* ML_SYM_VERIFY: see elf_symbol() */
    uint64_t verify_asked, verify_differ;
};

/* ------------------------------------------------------------------------- */
/* Arena and string pool                                                     */
/* ------------------------------------------------------------------------- */

static void *arena_alloc(ml__symbolizer_t *s, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!s->chunks || s->chunks->used + n > s->chunks->cap) {
        size_t cap = n > STR_CHUNK ? n : STR_CHUNK;
        chunk_t *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = s->chunks;
        c->used = 0;
        c->cap = cap;
        s->chunks = c;
    }
    void *p = s->chunks->data + s->chunks->used;
    s->chunks->used += n;
    return p;
}

/* The string pool is not an ml_map (ml_map.h): its key is the string, and
 * two strings may share any 64-bit hash, so a lookup compares the text. */
static uint64_t hash_str(const char *str) {
    uint64_t h = 1469598103934665603ull;
    for (; *str; str++) h = (h ^ (unsigned char)*str) * 1099511628211ull;
    return h;
}

const char *ml__sym_intern(ml__symbolizer_t *s, const char *str) {
    if (!str) return NULL;
    if ((s->strs_count + 1) * 2 > s->strs_cap) {
        uint64_t cap = s->strs_cap ? s->strs_cap * 2 : 1024;
        const char **n = calloc(cap, sizeof *n);
        if (!n) return NULL;
        for (uint64_t i = 0; i < s->strs_cap; i++) {
            if (!s->strs[i]) continue;
            uint64_t j = hash_str(s->strs[i]) & (cap - 1);
            while (n[j]) j = (j + 1) & (cap - 1);
            n[j] = s->strs[i];
        }
        free(s->strs);
        s->strs = n;
        s->strs_cap = cap;
    }
    uint64_t j = hash_str(str) & (s->strs_cap - 1);
    while (s->strs[j]) {
        if (!strcmp(s->strs[j], str)) return s->strs[j];
        j = (j + 1) & (s->strs_cap - 1);
    }
    size_t len = strlen(str) + 1;
    char *c = arena_alloc(s, len);
    if (!c) return NULL;
    memcpy(c, str, len);
    s->strs[j] = c;
    s->strs_count++;
    return c;
}

/* ------------------------------------------------------------------------- */
/* Lifecycle                                                                 */
/* ------------------------------------------------------------------------- */

static void modsym_free(modsym_t *ms);
static void index_free(modsym_t *ms);

int ml__sym_new(ml__symbolizer_t **out, bool no_symbols) {
    ml__symbolizer_t *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->no_symbols = no_symbols;
    const char *v = getenv("ML_SYM_VERIFY");
    s->verify = v && v[0] && strcmp(v, "0");
    *out = s;
    return 0;
}

void ml__sym_free(ml__symbolizer_t *s) {
    if (!s) return;
    for (uint32_t i = 0; i < s->nms; i++)
        if (s->ms[i] && !s->ms[i]->shared) modsym_free(s->ms[i]);
    free(s->ms);
    free(s->pcs);
    free(s->strs);
    while (s->chunks) {
        chunk_t *n = s->chunks->next;
        free(s->chunks);
        s->chunks = n;
    }
    free(s);
}

void ml__sym_set_owner(ml__symbolizer_t *s, ml_analysis_t *a) {
    s->a = a;
}

/* ------------------------------------------------------------------------- */
/* Modules                                                                   */
/* ------------------------------------------------------------------------- */

static char *debuginfo_path = NULL;

static bool is_regular_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}


/* When every local place libdw's search looks at is empty, and no debuginfod
 * server is configured, the answer is "none" without asking libdw: its last
 * resort, debuginfod, loads libdebuginfod and with it curl, gnutls, kerberos
 * and a dozen more libraries (about 15 ms) even with no server to ask. The
 * places (libdwfl's find-debuginfo.c, default path ":.debug:/usr/lib/debug"):
 * the build-id file; the debuglink name (or the file's base name with and
 * without ".debug") beside the file, under .debug/ beside it, and under
 * /usr/lib/debug followed by each tail of the file's directory, for the file
 * and for the target of its link. When one of them exists, libdw searches. */
static bool debuginfod_servers(void) {
    const char *u = getenv("DEBUGINFOD_URLS");
    return u && u[0];
}

static bool exists_in(const char *dir, const char *sub, const char *name, const char *self) {
    char p[4096];
    int n = snprintf(p, sizeof p, "%s%s/%s", dir, sub, name);
    if (n < 0 || (size_t)n >= sizeof p) return true; /* cannot tell: let libdw look */
    if (!is_regular_file(p)) return false;
    struct stat a, b;
    /* The file itself (its base name, beside it) is not a debug file. */
    return !(self && stat(p, &a) == 0 && stat(self, &b) == 0 && a.st_dev == b.st_dev &&
             a.st_ino == b.st_ino);
}

static bool names_in(const char *dir, const char *sub, const char *link, const char *base,
                     const char *self) {
    char dbg[1024];
    if (link) return exists_in(dir, sub, link, self);
    snprintf(dbg, sizeof dbg, "%s.debug", base);
    return exists_in(dir, sub, dbg, self) || exists_in(dir, sub, base, self);
}

static bool candidates_of(const char *file, const char *link) {
    char dir[4096];
    const char *slash = strrchr(file, '/');
    if (!slash || (size_t)(slash - file) >= sizeof dir) return true;
    memcpy(dir, file, (size_t)(slash - file));
    dir[slash - file] = '\0';
    const char *base = slash + 1;
    if (names_in(dir, "", link, base, file) || names_in(dir, "/.debug", link, base, file)) return true;
    for (const char *tail = dir; tail; tail = strchr(tail + 1, '/')) {
        char sys[4200];
        snprintf(sys, sizeof sys, "/usr/lib/debug%s", tail);
        if (names_in(sys, "", link, base, file)) return true;
    }
    return names_in("/usr/lib/debug", "", link, base, file);
}

static bool local_candidate(const unsigned char *bits, int len, const char *file, const char *link) {
    if (bits && len >= 2) {
        char p[600];
        int k = snprintf(p, sizeof p, "/usr/lib/debug/.build-id/%02x/", bits[0]);
        for (int i = 1; i < len && k < (int)sizeof p - 8; i++)
            k += snprintf(p + k, sizeof p - (size_t)k, "%02x", bits[i]);
        snprintf(p + k, sizeof p - (size_t)k, ".debug");
        if (is_regular_file(p)) return true;
    }
    if (!file || file[0] != '/') return true;
    if (candidates_of(file, link)) return true;
    char *real = realpath(file, NULL);
    bool r = real && strcmp(real, file) && candidates_of(real, link);
    free(real);
    return r;
}

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2 /* the gABI's value; glibc's elf.h of 2023 lacks it */
#endif

/* Debug sections compressed with zstd (`-gz=zstd`, `objcopy
 * --compress-debug-sections=zstd`, the default of some distributions'
 * toolchains) are read by elfutils from 0.189 on only: libdw 0.188 loads no
 * DWARF from such a file, and its frames had the symbol table's names and
 * no file, line or inlined frame, where GNU addr2line gives them, without a
 * word. Now they get a warning: for the file itself (open_module()) or its
 * separate debug file (find_debuginfo(), which marks the module). */
static bool zstd_debug_sections(Elf *elf) {
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) return false;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_COMPRESSED)) continue;
        const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
        GElf_Chdr ch;
        if (name && !strncmp(name, ".debug_", 7) && gelf_getchdr(scn, &ch) &&
            ch.ch_type == ELFCOMPRESS_ZSTD)
            return true;
    }
    return false;
}

/* A separate debug file: its uncompressed copy from the debug cache
 * (debug_cache.c) when there is one; else libdw's own search (build-id,
 * debuglink), after which a copy is made for the next reports. The copy
 * cannot replace the file libdw just found: its build-id search keeps the
 * Elf handle it opened to check the file, whatever fd is returned here. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name) {
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    if (len > 0) {
        char *copy;
        int cfd = ml__debug_cache_find(bits, len, &copy);
        if (cfd >= 0) {
            free(*debuginfo_file_name);
            *debuginfo_file_name = copy;
            return cfd;
        }
    }
    if (!debuginfod_servers() && !local_candidate(len > 0 ? bits : NULL, len, file_name, debuglink_file))
        return -1;
    int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                          debuglink_crc, debuginfo_file_name);
    modsym_t *ms = userdata ? *userdata : NULL;
    if (fd >= 0 && ms) {
        Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        if (zstd_debug_sections(elf)) ms->zstd_debug = true;
        elf_end(elf);
    }
    if (fd >= 0) {
        char *unused;
        ml__debug_cache_open(fd, &unused, false);
    }
    return fd;
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

static bool build_id_matches(Dwfl_Module *dm, const ml__module_t *m) {
    if (!m->build_id_len) return true; /* nothing recorded to compare with */
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(dm, &bits, &vaddr);
    return len == (int)m->build_id_len && memcmp(bits, m->build_id, (size_t)len) == 0;
}

/* A file without a GNU build-id (linked with --build-id=none, or by a
 * toolchain that does not ask for one) has nothing to compare with the
 * trace, and a program rebuilt in place after the recording would have
 * named its return addresses by the new code: other functions, other lines,
 * silently (until 2026-12-08 a program rebuilt with one more function had
 * its frames named by that function, which the recorded program did not
 * have, and no warning: test_report's
 * rebuilt_binary_without_build_id_is_a_warning_not_wrong_names). Such a file is trusted only if it was
 * last modified before the recording ended. The end is bounded from above
 * by the process' start (wall clock) plus the time of the trace's last
 * record (milliseconds since `memlens run` started, which is no later than
 * the process): a file written after that bound is not the one that ran.
 * A rebuild within the same few milliseconds, or one that kept the old
 * modification time (cp -p, tar), is not seen; a build-id is the sure way. */
static bool modified_after_recording(const ml_analysis_t *a, const char *path) {
    if (!a || !a->proc.start_realtime_ns) return false; /* no clock in the trace: cannot tell */
    struct stat st;
    if (stat(path, &st) != 0) return false;
    uint64_t end = a->proc.start_realtime_ns + (uint64_t)a->t.last_time_ms * 1000000u;
    uint64_t mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    return st.st_mtim.tv_sec >= 0 && mtime > end;
}

static bool has_section(Elf *elf, const char *want);

/* Whether the module's DWARF has a skeleton unit (-gsplit-dwarf). Only
 * files with a .debug_addr section, which split DWARF needs, are walked. */
static bool has_split_units(Dwfl_Module *dm) {
    Dwarf_Addr bias;
    Dwarf *dw = dwfl_module_getdwarf(dm, &bias);
    if (!dw || !has_section(dwarf_getelf(dw), ".debug_addr")) return false;
    Dwarf_CU *cu = NULL;
    uint8_t type;
    while (dwarf_get_units(dw, cu, &cu, NULL, &type, NULL, NULL) == 0)
        if (type == DW_UT_skeleton) return true;
    return false;
}

static Dwfl_Module *report_as(modsym_t *ms, const ml__module_t *m, const char *file) {
    if (ms->dwfl) dwfl_end(ms->dwfl);
    ms->dwfl = dwfl_begin(&callbacks);
    if (!ms->dwfl) return NULL;
    dwfl_report_begin(ms->dwfl);
    const char *base = strrchr(m->path, '/');
    Dwfl_Module *dm =
        dwfl_report_elf(ms->dwfl, base ? base + 1 : m->path, file, -1, m->base, false);
    void **userdata; /* find_debuginfo() marks the module */
    if (dm && dwfl_module_info(dm, &userdata, NULL, NULL, NULL, NULL, NULL, NULL)) *userdata = ms;
    dwfl_report_end(ms->dwfl, NULL, NULL);
    return dm;
}

/* A file whose own debug sections are compressed is read from its
 * uncompressed copy (same build-id, same program headers), unless it has
 * split units: libdw looks for a unit's .dwo first in the directory of the
 * file it reads (then under DW_AT_comp_dir, which -fdebug-prefix-map makes
 * "." or another place), and the copy is in the debug cache. Until
 * 2026-12-08 a program built -gz -gsplit-dwarf lost its inlined frames
 * whenever the cache was on ("outer fx_inline_deep.c:7" where
 * llvm-symbolizer and the cache off give level3 <- level2 <- level1 <-
 * outer; test_symbols split_dwarf_compressed_program_finds_its_dwo). Such
 * a file is read as it is: libdw inflates its small skeleton itself. */
static Dwfl_Module *report(modsym_t *ms, const ml__module_t *m, const char *file) {
    char *copy = NULL;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        int cfd = ml__debug_cache_open(fd, &copy, true);
        if (cfd >= 0) close(cfd);
        close(fd);
    }
    Dwfl_Module *dm = report_as(ms, m, copy ? copy : file);
    if (copy && dm && has_split_units(dm)) dm = report_as(ms, m, file);
    free(copy);
    return dm;
}

static void modsym_free(modsym_t *ms) {
    ml__symc_close(ms->symc);
    if (ms->dwfl) dwfl_end(ms->dwfl);
    index_free(ms);
    free(ms->cus);
    for (size_t i = 0; i < ms->ncufns; i++) free(ms->cufns[i].v);
    free(ms->cufns);
    ml_map_free(&ms->gaps);
    free(ms);
}

/* Modules shared by the symbolizers of one process (ml_symbols_share):
 * `memlens report DIR` analyses thousands of traces of the same programs,
 * one after the other, and opened and indexed libc, ld.so and the shell
 * again for each (2,003 small traces took 12-14 s, a fifth of it in libdw;
 * now 1.9 s).
 * A module is shared by its path and build-id; it stays reported at the
 * load base of the trace that opened it, and a trace whose copy was loaded
 * elsewhere asks for its addresses moved by the difference. Only modules
 * that opened are shared (a failure says its warning in every trace). The
 * symbolizers that use them must run one at a time: libdw's lookups and
 * the lazily built index are not safe from two threads. */
typedef struct {
    char *path;
    uint8_t *build_id;
    uint32_t build_id_len;
    modsym_t *ms;
} shared_mod_t;

static bool share_on;
static shared_mod_t *shared_mods;
static uint32_t nshared, shared_cap;

void ml_symbols_share(bool on) {
    share_on = on;
    if (on) return;
    for (uint32_t i = 0; i < nshared; i++) {
        modsym_free(shared_mods[i].ms);
        free(shared_mods[i].path);
        free(shared_mods[i].build_id);
    }
    free(shared_mods);
    shared_mods = NULL;
    nshared = shared_cap = 0;
}

static modsym_t *shared_find(const ml__module_t *m) {
    for (uint32_t i = 0; i < nshared; i++) {
        const shared_mod_t *e = &shared_mods[i];
        if (e->build_id_len == m->build_id_len && !memcmp(e->build_id, m->build_id, m->build_id_len) &&
            !strcmp(e->path, m->path))
            return e->ms;
    }
    return NULL;
}

static void shared_add(const ml__module_t *m, modsym_t *ms) {
    if (ml_grow((void **)&shared_mods, &shared_cap, (uint64_t)nshared + 1, sizeof *shared_mods, 0) < 0) return;
    char *path = strdup(m->path);
    uint8_t *id = malloc(m->build_id_len);
    if (!path || !id) {
        free(path);
        free(id);
        return;
    }
    memcpy(id, m->build_id, m->build_id_len);
    shared_mod_t *e = &shared_mods[nshared++];
    e->path = path;
    e->build_id = id;
    e->build_id_len = m->build_id_len;
    e->ms = ms;
    ms->shared = true;
}

/* The symbol cache's stamp (symcache.c): what the frames of this module's
 * addresses depend on. This memlens' own build-id stands for the resolving
 * code; then each file libdw reads the module from (the one reported, and
 * the separate debug file it found, if any) by path and identity. Asking
 * for the DWARF here makes libdw look for the debug file, which it would
 * do at the first address anyway. */
static char self_id[130];

/* The build-id note of the object this code is in, read from memory. */
static int note_of_self(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    uintptr_t want = (uintptr_t)note_of_self;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && want >= lo && want - lo < ph->p_memsz) mine = true;
    }
    for (int i = 0; mine && i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + 12 <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            size_t name = (nh->n_namesz + 3) & ~(size_t)3, desc = (nh->n_descsz + 3) & ~(size_t)3;
            if ((size_t)(end - p) < 12 + name + desc) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(p + 12, "GNU", 4) &&
                nh->n_descsz >= 8 && nh->n_descsz <= 64) {
                for (size_t k = 0; k < nh->n_descsz; k++) snprintf(self_id + 2 * k, 3, "%02x", p[12 + name + k]);
                return 1;
            }
            p += 12 + name + desc;
        }
    }
    return mine;
}

static void self_build_id_find(void) {
    dl_iterate_phdr(note_of_self, NULL);
}

static const char *self_build_id(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, self_build_id_find);
    return self_id[0] ? self_id : NULL;
}

static bool stamp_file(char *buf, size_t len, size_t *at, const char *file) {
    struct stat st;
    int n;
    if (!file)
        n = snprintf(buf + *at, len - *at, "-\n");
    else if (stat(file, &st) == 0)
        n = snprintf(buf + *at, len - *at, "%s %ju %ju %jd %jd.%09ld\n", file, (uintmax_t)st.st_dev,
                     (uintmax_t)st.st_ino, (intmax_t)st.st_size, (intmax_t)st.st_mtim.tv_sec,
                     st.st_mtim.tv_nsec);
    else
        return false;
    if (n < 0 || (size_t)n >= len - *at) return false;
    *at += (size_t)n;
    return true;
}

/* The .dwo files of a -gsplit-dwarf module's skeleton units, into the
 * stamp: libdw reads a unit's functions and inlined calls from there
 * (split_unit()), and a unit whose .dwo it cannot find gets the symbol
 * table's name and no inlined frame. Left out of the stamp until
 * 2026-12-08, a report made while a .dwo was missing (a build tree not yet
 * there, objects cleaned) kept "outer fx_inline_deep.c:7" in the cache,
 * and every later report gave it, .dwo back or not, where libdw gives the
 * chain level3 <- level2 <- level1 <- outer (test_symbols
 * split_dwarf_frames_follow_their_dwo_file). Each candidate path libdw
 * tries (elfutils 0.188, __libdw_find_split_unit: the name beside the file
 * the DWARF is read from, then under DW_AT_comp_dir) is stat'ed: identity,
 * size and time, or absent. Hashed (FNV-1a) into one line, so that a
 * program of thousands of units keeps a stamp of bounded size. Only files
 * with a .debug_addr section (which split DWARF needs) are walked. */
static bool has_section(Elf *elf, const char *want) {
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) return false;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
        GElf_Shdr sh;
        const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
        if (name && !strcmp(name, want)) return true;
    }
    return false;
}

static uint64_t fnv_add(uint64_t h, const char *s) {
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static uint64_t stamp_dwo_path(uint64_t h, const char *dir, const char *sub, const char *file) {
    char path[PATH_MAX], line[PATH_MAX + 128];
    int n = file[0] == '/'         ? snprintf(path, sizeof path, "%s", file)
            : sub && sub[0] == '/' ? snprintf(path, sizeof path, "%s/%s", sub, file)
            : sub                  ? snprintf(path, sizeof path, "%s%s/%s", dir, sub, file)
                                   : snprintf(path, sizeof path, "%s%s", dir, file);
    if (n < 0 || (size_t)n >= sizeof path) return fnv_add(h, "?\n");
    struct stat st;
    if (stat(path, &st) == 0)
        snprintf(line, sizeof line, "%s %ju %ju %jd %jd.%09ld\n", path, (uintmax_t)st.st_dev,
                 (uintmax_t)st.st_ino, (intmax_t)st.st_size, (intmax_t)st.st_mtim.tv_sec,
                 st.st_mtim.tv_nsec);
    else
        snprintf(line, sizeof line, "%s -\n", path);
    return fnv_add(h, line);
}

static bool stamp_split_units(Dwarf *dw, const char *dwarf_file, char *buf, size_t len,
                              size_t *at) {
    if (!dw || !has_section(dwarf_getelf(dw), ".debug_addr")) return true;
    /* libdw's debugdir: the DWARF file's directory, with its slash */
    char dir[PATH_MAX] = "";
    const char *slash = dwarf_file ? strrchr(dwarf_file, '/') : NULL;
    if (slash && (size_t)(slash - dwarf_file + 1) < sizeof dir) {
        memcpy(dir, dwarf_file, (size_t)(slash - dwarf_file + 1));
        dir[slash - dwarf_file + 1] = '\0';
    }
    uint64_t h = 0xcbf29ce484222325ull;
    uint32_t units = 0;
    Dwarf_CU *cu = NULL;
    Dwarf_Die cudie;
    uint8_t type;
    while (dwarf_get_units(dw, cu, &cu, NULL, &type, &cudie, NULL) == 0) {
        if (type != DW_UT_skeleton) continue;
        Dwarf_Attribute a;
        const char *file = NULL, *comp = NULL;
        if (dwarf_attr(&cudie, DW_AT_dwo_name, &a) || dwarf_attr(&cudie, DW_AT_GNU_dwo_name, &a))
            file = dwarf_formstring(&a);
        if (!file) continue;
        if (dwarf_attr(&cudie, DW_AT_comp_dir, &a)) comp = dwarf_formstring(&a);
        h = stamp_dwo_path(h, dir, NULL, file);
        if (comp) h = stamp_dwo_path(h, dir, comp, file);
        units++;
    }
    if (!units) return true;
    int n = snprintf(buf + *at, len - *at, "split units %" PRIu32 " %016" PRIx64 "\n", units, h);
    if (n < 0 || (size_t)n >= len - *at) return false;
    *at += (size_t)n;
    return true;
}

/* Off with the debug cache (MEMLENS_DEBUG_CACHE=off), on its own with
 * ML_SYMBOL_CACHE=0, and where a test looks at the resolving itself
 * (ML_SYM_VERIFY, ML_SYM_SCOPE_BUDGET). */
static ml__symc_t *open_symc(ml__symbolizer_t *s, modsym_t *ms, const ml__module_t *m) {
    const char *budget = getenv("ML_SYM_SCOPE_BUDGET");
    const char *self = self_build_id();
    if (s->verify || (budget && budget[0]) || !ml_option_bool(ML_ENV_SYMBOL_CACHE) || !self ||
        m->build_id_len < 2)
        return NULL;
    Dwarf_Addr bias;
    Dwarf *dw = dwfl_module_getdwarf(ms->dm, &bias);
    const char *mainfile = NULL, *debugfile = NULL;
    dwfl_module_info(ms->dm, NULL, NULL, NULL, NULL, NULL, &mainfile, &debugfile);
    if (debugfile && mainfile && !strcmp(debugfile, mainfile)) debugfile = NULL;
    char stamp[8192];
    size_t at = 0;
    int n = snprintf(stamp, sizeof stamp, "memlens %s\n", self);
    if (n < 0 || (size_t)n >= sizeof stamp) return NULL;
    at = (size_t)n;
    if (!mainfile || !stamp_file(stamp, sizeof stamp, &at, mainfile) ||
        !stamp_file(stamp, sizeof stamp, &at, debugfile) ||
        !stamp_split_units(dw, debugfile ? debugfile : mainfile, stamp, sizeof stamp, &at))
        return NULL;
    return ml__symc_open(m->build_id, m->build_id_len, self, stamp, at);
}

static modsym_t *open_module(ml__symbolizer_t *s, int32_t idx, const ml__module_t *m) {
    if ((uint32_t)idx >= s->nms) {
        uint32_t n = (uint32_t)idx + 16;
        modsym_t **p = realloc(s->ms, n * sizeof *p);
        if (!p) return NULL;
        memset(p + s->nms, 0, (n - s->nms) * sizeof *p);
        s->ms = p;
        s->nms = n;
    }
    if (s->ms[idx]) return s->ms[idx];
    bool share = share_on && !s->no_symbols && m->build_id_len > 0;
    modsym_t *ms = share ? shared_find(m) : NULL;
    if (ms) return s->ms[idx] = ms;
    if (!(ms = calloc(1, sizeof *ms))) return NULL;
    s->ms[idx] = ms;
    ms->base0 = m->base;
    ms->state = -1;
    if (s->no_symbols || !m->path[0] || m->path[0] != '/') return ms; /* vdso and friends */
    char dbg[512];
    dbg[0] = '\0';
    if (m->build_id_len >= 2) {
        int k = snprintf(dbg, sizeof dbg, "/usr/lib/debug/.build-id/%02x/", m->build_id[0]);
        for (uint32_t i = 1; i < m->build_id_len && k < (int)sizeof dbg - 8; i++)
            k += snprintf(dbg + k, sizeof dbg - (size_t)k, "%02x", m->build_id[i]);
        snprintf(dbg + k, sizeof dbg - (size_t)k, ".debug");
    }
    Dwfl_Module *dm = NULL;
    if (!m->build_id_len && is_regular_file(m->path) && modified_after_recording(s->a, m->path)) {
        if (s->a)
            ml__warn(s->a,
                     "%s has no build-id and was modified after the trace was recorded: its "
                     "frames are shown as addresses",
                     m->path);
    } else if (is_regular_file(m->path)) {
        dm = report(ms, m, m->path);
        if (dm && !build_id_matches(dm, m)) {
            dm = NULL;
            if (dbg[0] && is_regular_file(dbg)) {
                dm = report(ms, m, dbg);
                if (dm && !build_id_matches(dm, m)) dm = NULL;
            }
            if (!dm && s->a)
                ml__warn(s->a,
                         "%s changed since the trace was recorded (its build-id differs): its "
                         "frames are shown as addresses",
                         m->path);
        } else if (!dm && s->a) {
            ml__warn(s->a, "cannot read symbols of %s: %s", m->path, dwfl_errmsg(-1));
        }
    } else if (dbg[0] && is_regular_file(dbg)) {
        dm = report(ms, m, dbg);
        if (dm && !build_id_matches(dm, m)) dm = NULL;
    } else if (s->a) {
        ml__warn(s->a, "%s is not there any more: its frames are shown as addresses", m->path);
    }
    if (!dm) {
        if (ms->dwfl) dwfl_end(ms->dwfl);
        ms->dwfl = NULL;
        return ms;
    }
    ms->dm = dm;
    ms->state = 1;
    Dwarf_Addr zbias;
    if (s->a && !dwfl_module_getdwarf(dm, &zbias) &&
        (ms->zstd_debug || zstd_debug_sections(dwfl_module_getelf(dm, &zbias))))
        ml__warn(s->a,
                 "the debug sections of %s%s are compressed with zstd, which this libdw cannot "
                 "read: its frames have no file, line or inlined frame (objcopy "
                 "--decompress-debug-sections gives them back)",
                 m->path, ms->zstd_debug ? "'s debug file" : "");
    ms->symc = open_symc(s, ms, m);
    if (share) shared_add(m, ms);
    return ms;
}

/* ------------------------------------------------------------------------- */
/* Names                                                                     */
/* ------------------------------------------------------------------------- */

/* gfortran names a procedure of module M `__M_MOD_P` (identifiers are
 * lowercased, so "_MOD_" is never part of one); gdb shows it as `M::P`, and
 * so does memlens. valgrind and heaptrack print the symbol. */
static bool fortran_module_procedure(const char *name, char *out, size_t len) {
    if (name[0] != '_' || name[1] != '_') return false;
    const char *mod = name + 2, *sep = strstr(mod, "_MOD_");
    if (!sep || sep == mod || !sep[5]) return false;
    for (const char *c = mod; c < sep; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
    int n = snprintf(out, len, "%.*s::%s", (int)(sep - mod), mod, sep + 5);
    return n > 0 && (size_t)n < len;
}

/* The symbol of a name fortran_module_procedure() made: "M::P" with
 * gfortran's lowercase identifiers, for patterns written against the
 * symbol (valgrind's and LeakSanitizer's suppressions, --alloc-fn). */
bool ml__fortran_symbol(const char *function, char *out, size_t len) {
    const char *sep = function ? strstr(function, "::") : NULL;
    if (!sep || sep == function || !sep[2]) return false;
    for (const char *c = function; *c; c++) {
        if (c == sep || c == sep + 1) continue;
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
    }
    int n = snprintf(out, len, "__%.*s_MOD_%s", (int)(sep - function), function, sep + 2);
    return n > 0 && (size_t)n < len;
}

/* GNAT encodes an Ada name for the linker: the units of an expanded name
 * joined by "__" in lowercase ("shapes__make" for Shapes.Make), a library
 * level main subprogram prefixed "_ada_" ("_ada_main2"), and suffixes of
 * its own: a number on a subprogram nested in another (".0", "$2", "__3"),
 * "TB" or "TKB" on a task body, "B" on a subprogram nested in a body, "N"
 * or "P" on a protected subprogram, "___X..." on debugging types. gdb
 * decodes them (shapes.make, main2, main2.churn, tasks.worker; ada-lang.c,
 * ada_decode, in the same order), and so does memlens for the functions of
 * an Ada unit (DW_AT_language: a C function may well be called "a__b").
 * valgrind and heaptrack print the symbol. What gdb cannot decode either
 * (operators "Oadd", the compiler's own "P118b", anything with another
 * capital) is left as it is; gdb shows it in angle brackets. */
static bool ada_lower_or_digit(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool ada_decode(const char *name, char *out, size_t len) {
    if (!strncmp(name, "_ada_", 5)) name += 5;
    if (name[0] == '_') return false;
    size_t n = strlen(name);
    for (;;) { /* ".0", "$2", "__3", innermost last */
        size_t d = n;
        while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9') d--;
        if (d == n || d == 0) break;
        if (name[d - 1] == '.' || name[d - 1] == '$')
            n = d - 1;
        else if (d >= 2 && name[d - 1] == '_' && name[d - 2] == '_')
            n = d - 2;
        else
            break;
    }
    if (n > 1 && (name[n - 1] == 'N' || name[n - 1] == 'P') && ada_lower_or_digit(name[n - 2])) n--;
    const char *x = strstr(name, "___");
    if (x && (size_t)(x - name) < n) {
        if (x[3] != 'X') return false;
        n = (size_t)(x - name);
    }
    if (n > 3 && !strncmp(name + n - 3, "TKB", 3)) n -= 3;
    if (n > 2 && !strncmp(name + n - 2, "TB", 2)) n -= 2;
    if (n > 1 && name[n - 1] == 'B') n--;
    if (n == 0 || n >= len || name[n - 1] == '_') return false;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 3 < n && !strncmp(name + i, "TK__", 4)) i += 2; /* a task's entity: TK__ is "__" */
        char c = name[i];
        if (c == '_' && i + 1 < n && name[i + 1] == '_') {
            out[o++] = '.';
            i++;
        } else if (ada_lower_or_digit(c) || c == '_') {
            out[o++] = c;
        } else {
            return false;
        }
    }
    out[o] = '\0';
    return true;
}

/* DW_LANG_Ada83, DW_LANG_Ada95, and DWARF 6's Ada2005 and Ada2012 (0x2e,
 * 0x2f), which elfutils' dwarf.h may not name yet. */
static bool ada_unit(Dwarf_Die *cu) {
    int lang = cu ? dwarf_srclang(cu) : -1;
    return lang == DW_LANG_Ada83 || lang == DW_LANG_Ada95 || lang == 0x2e || lang == 0x2f;
}

/* The symbol of a name ada_decode() made, for patterns written against
 * it as valgrind prints it: "shapes.make" is shapes__make. A nested
 * subprogram's number is gone (`main2__churn*` matches it), and a name of
 * one unit has none: a main subprogram's "_ada_main2" would be every C
 * function's too ("_*" would name them all), so it is matched as main2. */
bool ml__ada_symbol(const char *function, char *out, size_t len) {
    if (!function || !function[0]) return false;
    bool dot = false;
    for (const char *c = function; *c; c++) {
        if (*c == '.') {
            if (c == function || c[1] == '.' || !c[1]) return false;
            dot = true;
        } else if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) {
            return false;
        }
    }
    if (!dot) return false;
    size_t o = 0;
    for (const char *c = function; *c; c++) {
        if (o + 3 > len) return false;
        if (*c == '.') {
            out[o++] = '_';
            out[o++] = '_';
        } else {
            out[o++] = *c;
        }
    }
    out[o] = '\0';
    return true;
}

static const char *demangled(ml__symbolizer_t *s, const char *name) {
    if (!name) return NULL;
    /* ELF symbol versions ("_IO_file_overflow@@GLIBC_2.2.5") are not part of the name. */
    char plain[1024];
    const char *at = strchr(name, '@');
    if (at && at != name && (size_t)(at - name) < sizeof plain) {
        memcpy(plain, name, (size_t)(at - name));
        plain[at - name] = '\0';
        name = plain;
    }
    char fortran[1024];
    if (fortran_module_procedure(name, fortran, sizeof fortran)) return ml__sym_intern(s, fortran);
    if (name[0] == '_' && (name[1] == 'R' || (name[1] == 'Z' && name[2] == 'N'))) {
        char *r = ml_rust_demangle(name);
        if (r) {
            const char *i = ml__sym_intern(s, r);
            free(r);
            return i;
        }
    }
    if (name[0] == '_' && name[1] == 'Z') {
        int status = 0;
        pthread_once(&demangle_once, demangle_load);
        char *d = cxa_demangle ? cxa_demangle(name, NULL, NULL, &status) : NULL;
        if (d && status == 0) {
            const char *r = ml__sym_intern(s, d);
            free(d);
            return r;
        }
        free(d);
    }
    return ml__sym_intern(s, name);
}

static const char *die_name(ml__symbolizer_t *s, Dwarf_Die *die) {
    Dwarf_Attribute at;
    const char *name = NULL;
    if (dwarf_attr_integrate(die, DW_AT_linkage_name, &at) ||
        dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at))
        name = dwarf_formstring(&at);
    if (!name && dwarf_attr_integrate(die, DW_AT_name, &at)) name = dwarf_formstring(&at);
    return name ? demangled(s, name) : NULL;
}

/* A frame without a symbol: "[module+0xoffset]", or "[0xaddress]" in no
 * module (ml__frame_in_no_module, which diff and merge rely on). */
static const char *unknown_name(ml__symbolizer_t *s, const ml__module_t *m, uint64_t pc) {
    char buf[512];
    if (m) {
        const char *base = strrchr(m->path, '/');
        snprintf(buf, sizeof buf, "[%s+0x%" PRIx64 "]", base ? base + 1 : m->path, pc - m->base);
    } else {
        snprintf(buf, sizeof buf, "[0x%" PRIx64 "]", pc);
    }
    return ml__sym_intern(s, buf);
}

/* ------------------------------------------------------------------------- */
/* Resolution                                                                */
/* ------------------------------------------------------------------------- */

/* The cache of resolved addresses is not an ml_map: its key is two parts,
 * the address and the module it was resolved in (one address may belong to
 * different modules over time, after a dlclose), and a recorded address
 * may use all 64 bits, so they cannot be folded into one word without
 * collisions. It hashes with the map's hash all the same. */
static uint64_t pc_hash(uint64_t pc, int32_t mod) {
    return ml_map_hash(pc ^ ((uint64_t)(uint32_t)mod << 48));
}

static pcent_t *pc_slot(ml__symbolizer_t *s, uint64_t pc, int32_t mod) {
    if ((s->pcs_count + 1) * 2 > s->pcs_cap) {
        uint64_t cap = s->pcs_cap ? s->pcs_cap * 2 : 1024;
        pcent_t *n = calloc(cap, sizeof *n);
        if (!n) return NULL;
        for (uint64_t i = 0; i < s->pcs_cap; i++) {
            if (!s->pcs[i].f) continue;
            uint64_t j = pc_hash(s->pcs[i].pc, s->pcs[i].mod) & (cap - 1);
            while (n[j].f) j = (j + 1) & (cap - 1);
            n[j] = s->pcs[i];
        }
        free(s->pcs);
        s->pcs = n;
        s->pcs_cap = cap;
    }
    uint64_t j = pc_hash(pc, mod) & (s->pcs_cap - 1);
    while (s->pcs[j].f && (s->pcs[j].pc != pc || s->pcs[j].mod != mod)) j = (j + 1) & (s->pcs_cap - 1);
    return &s->pcs[j];
}

/* The ELF symbol of an address: what dwfl_module_addrinfo() gives, without
 * its linear scan of the whole symbol table per address (libLLVM's has
 * hundreds of thousands of entries: that scan was two thirds of `report` on
 * clang-format). libdw's rules (dwfl_module_addrsym.c) are kept:
 *   - the global symbols are searched first, and the local ones only when no
 *     global symbol holds the address (and no global label is exactly at it);
 *   - among the symbols that hold it (value <= addr < value + size) the
 *     closest start wins, then at the same start the better binding (global,
 *     weak, local), then the smaller size at no worse binding, then the first
 *     in the table;
 *   - when no sized symbol holds it, a sizeless symbol (an assembly label)
 *     may name it, but only one at or above the end of every sized symbol
 *     that starts at or before the address.
 * The index answers the first two rules, and the third when no label lies
 * between that end and the address: the answer is then "no symbol" (a
 * stripped library's internal functions; the common case on Debian's
 * libLLVM, where the old index still went to libdw's scan for each such
 * address). Otherwise, whenever a label could be the answer, libdw itself
 * is asked, so the answer is always libdw's; that answer is kept for every
 * address with the same symbols below it and in the same section (`gaps`),
 * since nothing else enters libdw's choice there. */
/* Sorts v by value, keeping the order of equal values: for entries made in
 * increasing ndx, that is cmp_symidx's order (value, then ndx). An LSD radix
 * sort on (value - the smallest), 11 bits a pass, as many passes as the span
 * of the values needs: libclang's and libLLVM's tables took 11 % of a
 * report through qsort. Falls back to qsort without memory. */
static int cmp_symidx(const void *x, const void *y);
static void sort_symidx(symidx_t *v, size_t n) {
    if (n < 64) {
        qsort(v, n, sizeof *v, cmp_symidx);
        return;
    }
    GElf_Addr lo = v[0].value, hi = v[0].value;
    for (size_t i = 1; i < n; i++) {
        if (v[i].value < lo) lo = v[i].value;
        if (v[i].value > hi) hi = v[i].value;
    }
    symidx_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) {
        qsort(v, n, sizeof *v, cmp_symidx);
        return;
    }
    unsigned bits = hi > lo ? 64 - (unsigned)__builtin_clzll(hi - lo) : 0;
    symidx_t *src = v, *dst = tmp;
    for (unsigned shift = 0; shift < bits; shift += 11) {
        size_t count[2048] = {0};
        for (size_t i = 0; i < n; i++) count[((src[i].value - lo) >> shift) & 2047]++;
        size_t sum = 0;
        for (size_t d = 0; d < 2048; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) dst[count[((src[i].value - lo) >> shift) & 2047]++] = src[i];
        symidx_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) memcpy(v, src, n * sizeof *v);
    free(tmp);
}

static int cmp_symidx(const void *x, const void *y) {
    const symidx_t *a = x, *b = y;
    if (a->value != b->value) return a->value < b->value ? -1 : 1;
    return (a->ndx > b->ndx) - (a->ndx < b->ndx);
}

typedef struct {
    uint64_t key; /* (sized symbols below, labels below, section) + 1 */
    const char *name;
} gap_t;
ML_MAP_TYPED(gap, gap_t, 64)

static int cmp_addr(const void *x, const void *y) {
    GElf_Addr a = *(const GElf_Addr *)x, b = *(const GElf_Addr *)y;
    return (a > b) - (a < b);
}

/* How many values of the sorted array v[0..n) are <= addr. */
static size_t upto(const GElf_Addr *v, size_t n, GElf_Addr addr) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void index_free(modsym_t *ms) {
    free(ms->secs);
    ms->secs = NULL;
    ms->nsecs = 0;
    free(ms->gsyms);
    free(ms->lsyms);
    free(ms->greach);
    free(ms->lreach);
    free(ms->reach);
    free(ms->starts);
    free(ms->labels);
    ms->gsyms = ms->lsyms = NULL;
    ms->greach = ms->lreach = ms->reach = ms->starts = ms->labels = NULL;
    ms->ngsyms = ms->nlsyms = ms->nsized = ms->nlabels = 0;
}

/* reach[i]: the highest end of the symbols v[0..i] (sorted by value), a
 * prefix maximum; an end past 2^64 counts as 2^64 - 1. No symbol of v[0..i]
 * holds an address at or above reach[i]. */
static void prefix_reach(const symidx_t *v, size_t n, GElf_Addr *reach) {
    GElf_Addr hi = 0;
    for (size_t i = 0; i < n; i++) {
        GElf_Addr end = v[i].value + v[i].size;
        if (end < v[i].value) end = UINT64_MAX;
        if (end > hi) hi = end;
        reach[i] = hi;
    }
}

static void index_symbols(modsym_t *ms) {
    ms->indexed = true;
    int n = dwfl_module_getsymtab(ms->dm);
    int first = dwfl_module_getsymtab_first_global(ms->dm);
    if (n < 256 || first < 0) return; /* small (libdw is quick enough), or none */
    /* libdw's global pass is [first, n), or [1, n) when only the dynamic
     * table is there (first == 0); its local pass [1, first). */
    int gfirst = first > 0 ? first : 1;
    size_t cap = (size_t)n;
    ms->gsyms = malloc(cap * sizeof *ms->gsyms);
    ms->lsyms = malloc(cap * sizeof *ms->lsyms);
    ms->starts = malloc(cap * sizeof *ms->starts);
    ms->reach = malloc(cap * sizeof *ms->reach);
    ms->labels = malloc(cap * sizeof *ms->labels);
    ms->greach = malloc(cap * sizeof *ms->greach);
    ms->lreach = malloc(cap * sizeof *ms->lreach);
    symidx_t *all = malloc(cap * sizeof *all);
    if (!ms->gsyms || !ms->lsyms || !ms->starts || !ms->reach || !ms->labels || !ms->greach ||
        !ms->lreach || !all) {
        free(all);
        index_free(ms); /* libdw answers everything */
        return;
    }
    size_t nall = 0;
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr value;
        GElf_Word shndx;
        const char *name = dwfl_module_getsym_info(ms->dm, i, &sym, &value, &shndx, NULL, NULL);
        int type = GELF_ST_TYPE(sym.st_info);
        if (!name || !name[0] || sym.st_shndx == SHN_UNDEF || type == STT_SECTION ||
            type == STT_FILE || type == STT_TLS)
            continue;
        if (sym.st_size == 0) {
            ms->labels[ms->nlabels++] = value;
            continue;
        }
        int b = GELF_ST_BIND(sym.st_info);
        symidx_t e = {value, sym.st_size, name, i,
                      b == STB_GLOBAL ? 3 : b == STB_WEAK ? 2 : b == STB_LOCAL ? 1 : 0};
        all[nall++] = e;
        if (i >= gfirst) ms->gsyms[ms->ngsyms++] = e;
        else ms->lsyms[ms->nlsyms++] = e;
    }
    sort_symidx(ms->gsyms, ms->ngsyms); /* both were filled in increasing ndx */
    sort_symidx(ms->lsyms, ms->nlsyms);
    /* all = gsyms + lsyms: merged, in the order a sort would give (the
     * comparison is total: no two entries share ndx). */
    for (size_t i = 0, j = 0, k = 0; k < nall; k++) {
        if (j >= ms->nlsyms || (i < ms->ngsyms && cmp_symidx(&ms->gsyms[i], &ms->lsyms[j]) < 0))
            all[k] = ms->gsyms[i++];
        else
            all[k] = ms->lsyms[j++];
    }
    qsort(ms->labels, ms->nlabels, sizeof *ms->labels, cmp_addr);
    for (size_t i = 0; i < nall; i++) ms->starts[i] = all[i].value;
    prefix_reach(all, nall, ms->reach);
    prefix_reach(ms->gsyms, ms->ngsyms, ms->greach);
    prefix_reach(ms->lsyms, ms->nlsyms, ms->lreach);
    ms->nsized = nall;
    free(all);
    GElf_Addr bias;
    Elf *elf = dwfl_module_getelf(ms->dm, &bias);
    size_t nscn = 0;
    if (elf && elf_getshdrnum(elf, &nscn) == 0 && nscn && (ms->secs = malloc(nscn * sizeof *ms->secs))) {
        for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || !sh.sh_size) continue;
            ms->secs[ms->nsecs][0] = sh.sh_addr + bias;
            ms->secs[ms->nsecs][1] = sh.sh_addr + bias + sh.sh_size;
            ms->nsecs++;
        }
        qsort(ms->secs, ms->nsecs, sizeof *ms->secs, cmp_addr);
    }
}

/* The allocated section holding addr, as an index of ms->secs; -1 when none
 * (or sections overlap there: then the answer is not memoised). */
static long section_of(const modsym_t *ms, GElf_Addr addr) {
    size_t lo = 0, hi = ms->nsecs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ms->secs[mid][0] <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (!lo || addr >= ms->secs[lo - 1][1]) return -1;
    if (lo >= 2 && ms->secs[lo - 2][1] > addr) return -1;
    return (long)(lo - 1);
}

/* libdw's choice among the sized symbols of one pass (v, sorted, reach its
 * prefix maxima of ends) that hold addr; NULL when none does. *unsure when
 * the walk gave up (libdw asks). */
static const char *held_by(const symidx_t *v, const GElf_Addr *reach, size_t n, GElf_Addr addr,
                           bool *unsure) {
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the last symbol starting at or before addr */
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].value <= addr) lo = mid + 1;
        else hi = mid;
    }
    /* Walk back to the closest start that holds addr (a few steps: symbols
     * rarely nest), then apply the rules at that start. The walk ends as
     * soon as no symbol below can reach addr: in a stripped module (only
     * .dynsym) most addresses lie in functions that have no symbol, and
     * without that bound each of them walked the 64 steps and went to
     * libdw's linear scan. */
    size_t steps = 0;
    for (size_t i = lo; i > 0; i--, steps++) {
        if (reach[i - 1] <= addr) return NULL;
        if (steps == 64) {
            *unsure = true;
            return NULL;
        }
        const symidx_t *c = &v[i - 1];
        if (addr - c->value >= c->size) continue;
        size_t j = i - 1;
        while (j > 0 && v[j - 1].value == c->value) j--;
        const symidx_t *best = NULL;
        for (; j < n && v[j].value == c->value; j++) {
            const symidx_t *e = &v[j];
            if (addr - e->value >= e->size) continue;
            if (!best || best->bind < e->bind || (best->size > e->size && best->bind <= e->bind))
                best = e;
        }
        return best->name;
    }
    return NULL;
}

static const char *elf_symbol_indexed(modsym_t *ms, Dwarf_Addr addr) {
    if (!ms->indexed) index_symbols(ms);
    if (ms->gsyms) {
        bool unsure = false;
        const char *name = held_by(ms->gsyms, ms->greach, ms->ngsyms, addr, &unsure);
        if (name) return name;
        size_t nl = unsure ? 0 : upto(ms->labels, ms->nlabels, addr);
        /* A label exactly at addr: libdw's local pass depends on its section. */
        if (!unsure && !(nl && ms->labels[nl - 1] == addr)) {
            name = held_by(ms->lsyms, ms->lreach, ms->nlsyms, addr, &unsure);
            if (name) return name;
            if (!unsure) {
                size_t ns = upto(ms->starts, ms->nsized, addr);
                GElf_Addr floor = ns ? ms->reach[ns - 1] : 0;
                /* No label in [floor, addr]: no sizeless symbol can name it. */
                if (!nl || ms->labels[nl - 1] < floor) return NULL;
                /* Otherwise libdw's answer depends only on the symbols at
                 * or below addr (ns sized ones, nl labels) and on addr's
                 * section: addresses that share all three share it. */
                long sec = section_of(ms, addr);
                if (sec >= 0 && sec < 1024 && ns < (1ull << 30) && nl < (1ull << 24)) {
                    uint64_t key = (((uint64_t)ns << 34) | ((uint64_t)nl << 10) | (uint64_t)sec) + 1;
                    gap_t *g = gap_find(&ms->gaps, key);
                    if (g) return g->name;
                    GElf_Off off;
                    GElf_Sym sym;
                    name = dwfl_module_addrinfo(ms->dm, addr, &off, &sym, NULL, NULL, NULL);
                    bool existed;
                    g = gap_put(&ms->gaps, key, &existed);
                    if (g) g->name = name;
                    return name;
                }
            }
        }
    }
    GElf_Off off;
    GElf_Sym sym;
    return dwfl_module_addrinfo(ms->dm, addr, &off, &sym, NULL, NULL, NULL);
}

/* ML_SYM_VERIFY=1 in the environment: every answer of the index is
 * compared with libdw's own (dwfl_module_addrinfo), each difference is a
 * warning, and ml__sym_verify_summary() tells how many were checked. Slow
 * (libdw's linear scan per address): for tests and proofs only. */
static const char *elf_symbol(ml__symbolizer_t *s, modsym_t *ms, Dwarf_Addr addr) {
    const char *mine = elf_symbol_indexed(ms, addr);
    if (!s->verify) return mine;
    s->verify_asked++;
    GElf_Off off;
    GElf_Sym sym;
    const char *theirs = dwfl_module_addrinfo(ms->dm, addr, &off, &sym, NULL, NULL, NULL);
    if (!(mine == theirs || (mine && theirs && !strcmp(mine, theirs)))) {
        s->verify_differ++;
        if (s->a)
            ml__warn(s->a, "ML_SYM_VERIFY: %s+0x%" PRIx64 ": the index says %s, libdw %s",
                     dwfl_module_info(ms->dm, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
                     (uint64_t)addr, mine ? mine : "(none)", theirs ? theirs : "(none)");
    }
    return mine;
}

void ml__sym_verify_summary(ml__symbolizer_t *s) {
    if (s->verify && s->a)
        ml__warn(s->a, "ML_SYM_VERIFY: %" PRIu64 " addresses checked against libdw, %" PRIu64 " differ",
                 s->verify_asked, s->verify_differ);
}

/* ------------------------------------------------------------------------- */
/* Units and scopes libdw 0.188 does not find                                */
/* ------------------------------------------------------------------------- */

static int curange_cmp(const void *a, const void *b) {
    const curange_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : (x->hi > y->hi) - (x->hi < y->hi);
}

/* Every compilation unit's address ranges, sorted. libdw finds the unit of
 * an address through .debug_aranges only, and LLVM (clang, rustc with some
 * settings) writes no such section unless asked (-gdwarf-aranges): without
 * this, a clang-built program got no file, no line and no inlined frame. */
static void build_cus(modsym_t *ms) {
    ms->cus_built = true;
    size_t cap = 0;
    Dwarf_Die *cu = NULL;
    Dwarf_Addr bias;
    while ((cu = dwfl_module_nextcu(ms->dm, cu, &bias)) != NULL) {
        /* Partial and type units hold no code. A DWARF 5 skeleton unit
         * (-gsplit-dwarf) does: its ranges are here, its functions in the
         * split unit (split_unit()). Skipped until 2026-12-08, a clang
         * -gsplit-dwarf program (no .debug_aranges either) had no file, no
         * line and no inlined frame where llvm-symbolizer gives them all
         * (test_symbols inline_chain_three_deep_split_dwarf_clang). */
        int tag = dwarf_tag(cu);
        if (tag != DW_TAG_compile_unit && tag != DW_TAG_skeleton_unit) continue;
        Dwarf_Addr base, lo, hi;
        ptrdiff_t off = 0;
        while ((off = dwarf_ranges(cu, off, &base, &lo, &hi)) > 0) {
            if (hi <= lo) continue;
            if (ms->ncus == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                curange_t *n = realloc(ms->cus, ncap * sizeof *n);
                if (!n) { /* out of memory: no fallback, as before */
                    free(ms->cus);
                    ms->cus = NULL;
                    ms->ncus = 0;
                    return;
                }
                ms->cus = n;
                cap = ncap;
            }
            ms->cus[ms->ncus++] = (curange_t){.lo = lo, .hi = hi, .cudie = cu, .bias = bias};
        }
    }
    if (!ms->ncus) return;
    qsort(ms->cus, ms->ncus, sizeof *ms->cus, curange_cmp);
    Dwarf_Addr reach = 0;
    for (size_t i = 0; i < ms->ncus; i++) {
        if (ms->cus[i].hi > reach) reach = ms->cus[i].hi;
        ms->cus[i].reach = reach;
    }
}

/* The unit holding `addr` (in the module's libdw address space): libdw's
 * answer, or else the one whose ranges hold it. */
static Dwarf_Die *cu_of(modsym_t *ms, Dwarf_Addr addr, Dwarf_Addr *bias) {
    Dwarf_Die *cu = dwfl_module_addrdie(ms->dm, addr, bias);
    if (cu) return cu;
    if (!ms->cus_built) build_cus(ms);
    if (!ms->ncus) return NULL;
    /* The last range starting at or below the address, then back while an
     * earlier range may still reach it (nested or overlapping units). */
    size_t lo = 0, hi = ms->ncus;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ms->cus[mid].lo + ms->cus[mid].bias <= addr) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = lo; i-- > 0;) {
        const curange_t *r = &ms->cus[i];
        if (r->reach + r->bias <= addr) break;
        if (addr < r->hi + r->bias) {
            *bias = r->bias;
            return r->cudie;
        }
    }
    return NULL;
}

/* A program built with -gsplit-dwarf keeps a skeleton of each unit (its
 * ranges and line table) and puts the DIEs in a .dwo file beside the
 * object: the skeleton has no function, so no inlined frame, and the
 * concrete function came from the symbol table at the line of the
 * innermost inlined call ("beta app.c:5" where gdb and llvm-symbolizer
 * say "inner app.c:5 <- mid app.c:6 <- beta app.c:9"). libdw opens the
 * split unit (dwarf_cu_info's sub DIE); its scopes are the unit's. A .dwp
 * package is not read by libdw 0.188: such units keep the skeleton. */
static Dwarf_Die *split_unit(Dwarf_Die *cudie, Dwarf_Die *split) {
    uint8_t type = 0;
    if (dwarf_cu_info(cudie->cu, NULL, &type, NULL, split, NULL, NULL, NULL) == 0 &&
        type == DW_UT_skeleton && dwarf_tag(split) == DW_TAG_compile_unit)
        return split;
    return cudie;
}

typedef struct {
    scoperange_t *v;
    size_t n, cap;
    bool oom;
} scopevec_t;

static bool is_scope_tag(int tag) {
    return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
           tag == DW_TAG_lexical_block || tag == DW_TAG_entry_point || tag == DW_TAG_try_block ||
           tag == DW_TAG_catch_block || tag == DW_TAG_with_stmt;
}

/* Every scope with code under `parent`: functions, the inlined instances
 * and lexical blocks inside them, found also through the DIEs that hold
 * functions without having an address themselves (namespaces, types,
 * imported units). */
static void collect_scopes(Dwarf_Die *parent, scopevec_t *out, uint32_t depth) {
    Dwarf_Die child;
    if (depth > 256 || dwarf_child(parent, &child) != 0) return;
    do {
        int tag = dwarf_tag(&child);
        if (is_scope_tag(tag)) {
            Dwarf_Addr base, lo, hi;
            ptrdiff_t off = 0;
            bool any = false;
            while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
                if (hi <= lo) continue;
                if (out->n == out->cap) {
                    size_t cap = out->cap ? out->cap * 2 : 256;
                    scoperange_t *v = realloc(out->v, cap * sizeof *v);
                    if (!v) {
                        out->oom = true;
                        return;
                    }
                    out->v = v;
                    out->cap = cap;
                }
                out->v[out->n++] = (scoperange_t){.lo = lo, .hi = hi, .die = child, .depth = depth};
                any = true;
            }
            /* A declaration or an abstract instance holds no code. */
            if (any && dwarf_haschildren(&child)) collect_scopes(&child, out, depth + 1);
        } else if (tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_class_type ||
                   tag == DW_TAG_structure_type || tag == DW_TAG_union_type) {
            collect_scopes(&child, out, depth + 1);
        } else if (tag == DW_TAG_imported_unit) {
            Dwarf_Attribute at;
            Dwarf_Die unit;
            if (dwarf_attr(&child, DW_AT_import, &at) && dwarf_formref_die(&at, &unit))
                collect_scopes(&unit, out, depth + 1);
        }
    } while (!out->oom && dwarf_siblingof(&child, &child) == 0);
}

/* Outer first: by start, then the longer, then the shallower DIE. */
static int scoperange_cmp(const void *a, const void *b) {
    const scoperange_t *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    if (x->hi != y->hi) return x->hi > y->hi ? -1 : 1;
    return (x->depth > y->depth) - (x->depth < y->depth);
}

/* The unit's scopes by address, built the first time one of its addresses
 * is resolved; NULL when memory ran out. They are found under `scopes_die`:
 * the unit's DIE, or for a skeleton unit its split unit's (split_unit());
 * the index is keyed by the unit's offset in the module's own DWARF. Each range's parent is the
 * innermost range before it that holds it (a sweep with a stack). */
static cufns_t *unit_fns(modsym_t *ms, Dwarf_Die *cudie, Dwarf_Die *scopes_die) {
    Dwarf_Off off = dwarf_dieoffset(cudie);
    size_t lo = 0, hi = ms->ncufns;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ms->cufns[mid].cu < off) lo = mid + 1;
        else hi = mid;
    }
    if (lo < ms->ncufns && ms->cufns[lo].cu == off) return &ms->cufns[lo];
    scopevec_t v = {0};
    collect_scopes(scopes_die, &v, 0);
    uint32_t *stack = v.oom || v.n > UINT32_MAX - 1 ? NULL : malloc((v.n + 1) * sizeof *stack);
    if (!stack) {
        free(v.v);
        return NULL;
    }
    qsort(v.v, v.n, sizeof *v.v, scoperange_cmp);
    size_t top = 0;
    for (size_t i = 0; i < v.n; i++) {
        while (top && !(v.v[stack[top - 1]].lo <= v.v[i].lo && v.v[i].hi <= v.v[stack[top - 1]].hi))
            top--;
        v.v[i].parent = top ? stack[top - 1] + 1 : 0;
        stack[top++] = (uint32_t)i;
    }
    free(stack);
    size_t bytes = v.n * sizeof *v.v;
    if (ms->ncufns && ms->cufns_bytes + bytes > scope_budget()) {
        for (size_t i = 0; i < ms->ncufns; i++) free(ms->cufns[i].v);
        ms->ncufns = 0;
        ms->cufns_bytes = 0;
        lo = 0;
    }
    if (ms->ncufns == ms->cufns_cap) {
        size_t cap = ms->cufns_cap ? ms->cufns_cap * 2 : 16;
        cufns_t *n = realloc(ms->cufns, cap * sizeof *n);
        if (!n) {
            free(v.v);
            return NULL;
        }
        ms->cufns = n;
        ms->cufns_cap = cap;
    }
    memmove(&ms->cufns[lo + 1], &ms->cufns[lo], (ms->ncufns - lo) * sizeof *ms->cufns);
    ms->cufns[lo] = (cufns_t){.cu = off, .v = v.v, .n = v.n};
    ms->cufns_bytes += bytes;
    ms->ncufns++;
    return &ms->cufns[lo];
}

/* The scopes holding `pc` in an indexed unit, innermost first: the
 * innermost range holding it is the last range starting at or before it,
 * or one of that range's parents. */
static int unit_scopes(const cufns_t *u, Dwarf_Addr pc, Dwarf_Die *chain, int max) {
    size_t lo = 0, hi = u->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->v[mid].lo <= pc) lo = mid + 1;
        else hi = mid;
    }
    uint32_t at = (uint32_t)lo; /* index + 1 of the last range starting at or before pc */
    while (at && !(pc < u->v[at - 1].hi)) at = u->v[at - 1].parent;
    int n = 0;
    for (; at && n < max; at = u->v[at - 1].parent) chain[n++] = u->v[at - 1].die;
    return n;
}

/* The frames of one address with DWARF, innermost first.
 *
 * dwarf_getscopes() finds the innermost scope holding the address, but
 * past the first DW_TAG_inlined_subroutine it continues with the scopes of
 * that function's abstract definition (where its source is), not with the
 * code it was inlined into: a chain inlined three deep would lose its middle
 * levels. So only its first scope is used; dwarf_getscopes_die() then gives
 * the DIEs that physically contain that one, up to the CU: every inlined
 * instance and the concrete function, each nested in its caller. An inlined
 * frame's location is the innermost line (for the first) or the call site
 * (DW_AT_call_file:DW_AT_call_line) of the inlined frame below it; the
 * function it is in is the next inlined instance or subprogram outwards
 * (lexical blocks may sit in between). This is what `eu-addr2line -i` and
 * `addr2line -i` print. */
static uint32_t resolve_dwarf(ml__symbolizer_t *s, modsym_t *ms, const ml__module_t *m,
                              uint64_t pc, ml_frame_t *f) {
    /* The call instruction, not the return address; where the module sits
     * in ms' libdw session (base0: another trace's load base, when shared). */
    Dwarf_Addr addr = pc - m->base + ms->base0 - 1;
    const char *module = ml__sym_intern(s, m->path);
    const char *elfname = elf_symbol(s, ms, addr);
    /* A return address that no call precedes: the first instruction of a
     * function, put there as the outermost frame's return address
     * (makecontext's __start_context, where a coroutine's function returns).
     * The byte before it is no function's; the function is the one that
     * starts at the address itself, as `eu-addr2line` names it. */
    if (!elfname) {
        const char *at = elf_symbol(s, ms, addr + 1);
        if (at) {
            addr++;
            elfname = at;
        }
    }
    const char *outer = elfname ? demangled(s, elfname) : NULL;

    const char *file = NULL;
    int line = 0;
    Dwfl_Line *dl = dwfl_module_getsrc(ms->dm, addr);
    if (dl) file = dwfl_lineinfo(dl, NULL, &line, NULL, NULL, NULL);

    uint32_t n = 0;
    Dwarf_Addr bias;
    Dwarf_Die *cudie = cu_of(ms, addr, &bias);
    if (!dl && cudie) {
        /* dwfl_module_getsrc() finds the unit as dwfl_module_addrdie() does. */
        Dwarf_Line *l = dwarf_getsrc_die(cudie, addr - bias);
        if (l) {
            file = dwarf_linesrc(l, NULL, NULL);
            if (dwarf_lineno(l, &line) != 0) line = 0;
        }
    }
    Dwarf_Die split;
    Dwarf_Die *scu = cudie ? split_unit(cudie, &split) : NULL;
    Dwarf_Die *scopes = NULL;
    int nscopes = 0;
    Dwarf_Die chain[MAX_INLINE * 2];
    int max = (int)(sizeof chain / sizeof chain[0]);
    /* The unit's scopes, indexed once by address range: the innermost one
     * holding the address, and those holding it. libdw's dwarf_getscopes()
     * walks the unit from its top for every address (12,000 addresses in a
     * unit of 3,000 functions took 213 s), and does not look inside
     * namespaces (clang, rustc). */
    cufns_t *u = cudie ? unit_fns(ms, cudie, scu) : NULL;
    if (u) {
        nscopes = unit_scopes(u, addr - bias, chain, max);
    } else if (cudie) { /* out of memory for the index: libdw's walk (no namespaces) */
        nscopes = dwarf_getscopes(scu, addr - bias, &scopes);
        if (nscopes > 0) {
            Dwarf_Die inner = scopes[0];
            free(scopes);
            scopes = NULL;
            nscopes = dwarf_getscopes_die(&inner, &scopes);
        }
    }
    /* libdw answers an address in a gap after a unit's last code with that
     * unit (dwfl_module_addrdie takes the nearest range below) and the
     * code's last line: the C runtime's _start, placed after a unit's last
     * function, read as that function's last line, where addr2line says
     * ??:0. An address no function of the unit holds keeps its line only
     * if the unit's ranges hold it (assembly units have lines and no
     * functions; dwarf_haspc is -1 for a unit without ranges). */
    if (nscopes <= 0 && cudie && file && dwarf_haspc(cudie, addr - bias) == 0) {
        file = NULL;
        line = 0;
    }
    Dwarf_Die *sc = u ? chain : scopes; /* libdw's is malloc'd, freed below */
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    if (nscopes > 0) dwarf_getsrcfiles(scu, &files, &nfiles); /* DW_AT_call_file's table */
    for (int i = 0; i < nscopes && n < MAX_INLINE; i++) {
        int tag = dwarf_tag(&sc[i]);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram &&
            tag != DW_TAG_entry_point)
            continue;
        ml_frame_t *fr = &f[n++];
        fr->module = module;
        fr->address = pc;
        fr->file = file ? ml__sym_intern(s, file) : NULL;
        fr->line = line > 0 ? (uint32_t)line : 0;
        if (tag != DW_TAG_inlined_subroutine) {
            fr->function = outer ? outer : die_name(s, &sc[i]);
            fr->inlined = false;
            break;
        }
        fr->function = die_name(s, &sc[i]);
        fr->inlined = true;
        /* The caller's location is where this inlined call was made. */
        Dwarf_Attribute at;
        Dwarf_Word cf = 0, cl = 0;
        file = NULL;
        line = 0;
        if (dwarf_attr(&sc[i], DW_AT_call_file, &at) && dwarf_formudata(&at, &cf) == 0 &&
            files && cf < nfiles)
            file = dwarf_filesrc(files, (size_t)cf, NULL, NULL);
        if (dwarf_attr(&sc[i], DW_AT_call_line, &at) && dwarf_formudata(&at, &cl) == 0)
            line = (int)cl;
    }
    free(scopes);
    /* An inlined chain with no concrete function around it (DWARF that
     * describes only part of the code): the function it was inlined into
     * is the ELF symbol at the address, called at the last call site. */
    if (n > 0 && f[n - 1].inlined && n < MAX_INLINE && outer) {
        ml_frame_t *fr = &f[n++];
        fr->module = module;
        fr->address = pc;
        fr->file = file ? ml__sym_intern(s, file) : NULL;
        fr->line = line > 0 ? (uint32_t)line : 0;
        fr->function = outer;
        fr->inlined = false;
    }
    if (n == 0 || !f[n - 1].function) {
        /* No DWARF for this address: the symbol table alone. */
        if (n == 0) {
            f[0].module = module;
            f[0].address = pc;
            f[0].file = file ? ml__sym_intern(s, file) : NULL;
            f[0].line = line > 0 ? (uint32_t)line : 0;
            f[0].inlined = false;
            n = 1;
        }
        f[n - 1].function = outer ? outer : unknown_name(s, m, pc);
    }
    for (uint32_t i = 0; i < n; i++)
        if (!f[i].function) f[i].function = unknown_name(s, m, pc);
    if (ada_unit(cudie)) {
        char ada[1024];
        for (uint32_t i = 0; i < n; i++)
            if (ada_decode(f[i].function, ada, sizeof ada)) f[i].function = ml__sym_intern(s, ada);
    }
    return n;
}

/* A function of a standard library compiled into the program, known by its
 * name where no source file tells (a prebuilt Rust standard library has no
 * line table for much of itself; libstdc++ linked in with -static-libstdc++
 * and a program built without -g have none at all): Rust's std, core and
 * alloc, the crates std vendors, C++'s std and the C++ ABI's runtime
 * (__cxa_allocate_exception, ...). A C++ template function's name starts
 * with its return type, which says nothing: "void std::vector<…>::
 * _M_realloc_insert<…>(…)" is the library's, "std::vector<long, …>
 * make_table<long>(int)" the program's. The name is read without it, as
 * it is shown (ml_frame_short_name). */
static bool library_name(const char *fn) {
    if (!fn) return false;
    char shown[512];
    if (fn[0] != '<' && strchr(fn, ' ')) fn = ml_frame_short_name(fn, shown, sizeof shown);
    if (fn[0] == '<') fn++; /* "<alloc::vec::Vec<u8> as ...>::..." */
    static const char *const prefixes[] = {"std::", "core::", "alloc::", "hashbrown::", "gimli::",
                                           "addr2line::", "miniz_oxide::", "rustc_demangle::",
                                           "object::", "memchr::", "__gnu_cxx::", "__cxa_",
                                           "__cxxabiv1::", "__gxx_"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(fn, prefixes[i], strlen(prefixes[i]))) return true;
    return false;
}

static uint8_t frame_role(const ml_frame_t *f);

int ml__sym_resolve(ml__symbolizer_t *s, int32_t mod, const ml__module_t *m, uint64_t pc,
                    ml__pc_frames_t *out) {
    if (!m) mod = -1;
    pcent_t *e = pc_slot(s, pc, mod);
    if (!e) return -ENOMEM;
    if (e->f) {
        out->f = e->f;
        out->n = e->n;
        return 0;
    }
    ml_frame_t tmp[MAX_INLINE];
    memset(tmp, 0, sizeof tmp);
    uint32_t n = 0;
    modsym_t *ms = m ? open_module(s, mod, m) : NULL;
    ml__symc_frame_t cf[MAX_INLINE];
    if (ms && ms->state == 1 && (n = ml__symc_get(ms->symc, pc - m->base, cf)) > 0) {
        const char *module = ml__sym_intern(s, m->path);
        for (uint32_t i = 0; i < n; i++)
            tmp[i] = (ml_frame_t){
                .function = cf[i].function ? ml__sym_intern(s, cf[i].function) : unknown_name(s, m, pc),
                .file = ml__sym_intern(s, cf[i].file),
                .module = module,
                .address = pc,
                .line = cf[i].line,
                .inlined = cf[i].inlined,
            };
    } else if (ms && ms->state == 1) {
        n = resolve_dwarf(s, ms, m, pc, tmp);
        if (ms->symc) {
            const char *unknown = unknown_name(s, m, pc);
            for (uint32_t i = 0; i < n; i++)
                cf[i] = (ml__symc_frame_t){
                    .function = tmp[i].function == unknown ? NULL : tmp[i].function,
                    .file = tmp[i].file,
                    .line = tmp[i].line,
                    .inlined = tmp[i].inlined,
                };
            ml__symc_put(ms->symc, pc - m->base, cf, n);
        }
    } else {
        tmp[0].function = unknown_name(s, m, pc);
        tmp[0].module = m ? ml__sym_intern(s, m->path) : NULL;
        tmp[0].address = pc;
        n = 1;
    }
    const char *exe = s->a ? ml_analysis_process(s->a)->exe : NULL;
    for (uint32_t i = 0; i < n; i++) {
        tmp[i].own = ml_frame_is_own_code(tmp[i].module, tmp[i].file, exe) &&
                     !(!tmp[i].file && library_name(tmp[i].function));
        tmp[i].role = 0;
        tmp[i].role = frame_role(&tmp[i]);
    }
    ml_frame_t *f = arena_alloc(s, n * sizeof *f);
    if (!f) return -ENOMEM;
    memcpy(f, tmp, n * sizeof *f);
    /* pc_slot may have grown the table meanwhile? No: nothing above inserts. */
    e->pc = pc;
    e->mod = mod;
    e->n = n;
    e->f = f;
    s->pcs_count++;
    out->f = f;
    out->n = n;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The allocator's own frames                                                */
/* ------------------------------------------------------------------------- */

static const char *const alloc_exact[] = {
    "malloc", "calloc", "realloc", "free", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "__libc_malloc", "__libc_calloc", "__libc_realloc",
    "__libc_memalign", "__libc_valloc", "__libc_pvalloc", "__posix_memalign",
    "__libc_reallocarray", "__malloc", "__calloc", "__realloc",
    /* GNAT's: an allocator `new` and Unchecked_Deallocation call
     * System.Memory (exported as __gnat_malloc, __gnat_free), through the
     * global storage pool for a controlled type, as C++'s new calls
     * operator new. libgnat has no debug information in Debian, so these
     * are its symbols; with it, the names gdb decodes them to. */
    "__gnat_malloc", "__gnat_realloc", "system__memory__alloc", "system__memory__realloc",
    "system.memory.alloc", "system.memory.realloc", "system__pool_global__allocate",
    "system.pool_global.allocate", "system__storage_pools__subpools__allocate_any_controlled",
    "system.storage_pools.subpools.allocate_any_controlled",
};

/* C++ allocation plumbing: operator new and the standard allocators'
 * allocate(), so that frames[0] is the code that wanted the memory. libc++
 * (clang's -stdlib=libc++) spells them in std::__1 and adds two helpers
 * (its template ones demangle with their return type in front). */
static bool is_cxx_allocator(const char *fn) {
    if (!strncmp(fn, "operator new", 12)) return true;
    if (!strncmp(fn, "void* ", 6)) fn += 6;
    if (!strncmp(fn, "std::__1::__libcpp_operator_new<", 32) ||
        !strncmp(fn, "std::__1::__libcpp_allocate(", 28))
        return true;
    if (!strncmp(fn, "std::__1::allocator<", 20) || !strncmp(fn, "std::__1::allocator_traits<", 27))
        return strstr(fn, "::allocate(") != NULL;
    static const char *const prefixes[] = {"__gnu_cxx::new_allocator<", "std::__new_allocator<",
                                           "std::allocator<", "std::allocator_traits<",
                                           "__gnu_cxx::__alloc_traits<"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(fn, prefixes[i], strlen(prefixes[i])))
            return strstr(fn, "::allocate(") != NULL;
    return false;
}

/* Rust's allocation plumbing, the counterpart of operator new: the global
 * allocator's entry points (__rust_alloc and the shims rustc generates for
 * them), alloc::alloc's functions and the Global and System allocators'
 * methods, in the names both manglings demangle to. RawVec and Box stay:
 * like std::vector's _M_allocate they are where the program's own call is
 * turned into a request, and the site is named past them (own code). */
static bool is_rust_allocator(const char *fn) {
    static const char *const prefixes[] = {
        "__rust_alloc", "__rust_realloc", "__rdl_alloc", "__rdl_realloc", "__rg_alloc",
        "__rg_realloc", "alloc::alloc::", "<alloc::alloc::Global", "std::alloc::System::",
        "<std::alloc::System", "std::sys::alloc::", "std::sys::unix::alloc::",
        "std::sys::pal::unix::alloc::"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(fn, prefixes[i], strlen(prefixes[i]))) return true;
    return false;
}

/* A frame's role, which depends on its names only: every site that passes
 * through a return address asks it again, and the site table and the call
 * tree ask for every frame of every site. On clang-format's 48,835 sites of
 * up to 64 frames, the prefix compares below were half of the report's
 * instructions (callgrind), so ml__sym_resolve computes the role once per
 * address and keeps it in the frame (ml_frame_t.role). */
#define ROLE_SET 1u
#define ROLE_ALLOCATOR 2u
#define ROLE_RUNTIME 4u

static bool is_allocator(const ml_frame_t *f);
static bool is_runtime(const ml_frame_t *f);

static uint8_t frame_role(const ml_frame_t *f) {
    if (f->role) return f->role;
    return (uint8_t)(ROLE_SET | (is_allocator(f) ? ROLE_ALLOCATOR : 0) | (is_runtime(f) ? ROLE_RUNTIME : 0));
}

bool ml__frame_is_allocator(const ml_frame_t *f) {
    return frame_role(f) & ROLE_ALLOCATOR;
}

bool ml__frame_is_runtime(const ml_frame_t *f) {
    return frame_role(f) & ROLE_RUNTIME;
}

static bool is_allocator(const ml_frame_t *f) {
    if (f->module) {
        const char *base = strrchr(f->module, '/');
        base = base ? base + 1 : f->module;
        if (!strncmp(base, "libmemlens", 10)) return true;
    }
    const char *fn = f->function;
    if (!fn || fn[0] == '[') return false;
    for (size_t i = 0; i < sizeof alloc_exact / sizeof alloc_exact[0]; i++)
        if (!strcmp(fn, alloc_exact[i])) return true;
    return is_cxx_allocator(fn) || is_rust_allocator(fn);
}

/* ------------------------------------------------------------------------- */
/* The program's own code, and names for display                             */
/* ------------------------------------------------------------------------- */

static bool under(const char *path, const char *dir) {
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

/* Rust's standard library and the crates Cargo downloads: compiled into
 * the program, but library code as much as a header under /usr/include.
 * rustup's toolchains name their sources /rustc/<commit>/library/... (and
 * /rust/deps/... for what they vendor), Debian's /usr/src/rustc-<version>/,
 * and a prebuilt standard library keeps relative library/<crate>/src/...
 * and vendor/<crate>-<version>/... for the crates it vendors (gimli, ...);
 * Cargo unpacks dependencies under $CARGO_HOME/registry/src/<index>/ and
 * git ones under $CARGO_HOME/git/checkouts/. */
static bool rust_library_file(const char *file) {
    if (under(file, "/rustc") || under(file, "/rust/deps") || !strncmp(file, "/usr/src/rustc-", 15))
        return true;
    static const char *const rel[] = {"library/alloc/", "library/core/", "library/std/",
                                      "library/panic_unwind/", "library/proc_macro/",
                                      "vendor/"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++)
        if (!strncmp(file, rel[i], strlen(rel[i]))) return true;
    return strstr(file, "/.cargo/registry/src/") || strstr(file, "/.cargo/git/checkouts/") ||
           strstr(file, "/registry/src/index.crates.io-") ||
           strstr(file, "/registry/src/github.com-");
}

/* `path` with its "." and ".." components and repeated slashes taken out,
 * as text (no link is followed), into buf; `path` itself when it has none
 * or does not fit. clang names libstdc++'s headers by the directory it
 * found them through: "/usr/bin/../lib/gcc/x86_64-linux-gnu/12/../../../../
 * include/c++/12/bits/stl_vector.h" is /usr/include/c++/12/bits/... */
static const char *lexical_path(const char *path, char *buf, size_t size) {
    if (path[0] != '/' || (!strstr(path, "/./") && !strstr(path, "/../") && !strstr(path, "//")))
        return path;
    size_t len = 0;
    for (const char *p = path; *p;) {
        while (*p == '/') p++;
        const char *e = p;
        while (*e && *e != '/') e++;
        size_t n = (size_t)(e - p);
        if (n == 0 || (n == 1 && p[0] == '.')) {
            /* nothing */
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (len > 0 && buf[len - 1] != '/') len--; /* the last component, */
            if (len > 0) len--;                            /* and its slash (none above the root) */
        } else {
            if (len + 1 + n + 1 > size) return path;
            buf[len++] = '/';
            memcpy(buf + len, p, n);
            len += n;
        }
        p = e;
    }
    if (len == 0) buf[len++] = '/';
    buf[len] = '\0';
    return buf;
}

/* A source file of a library's, even when compiled into the program: a
 * system header or library source, a C++ standard library's header
 * wherever its compiler is installed, or Rust's standard library.
 * libstdc++ and libc++ keep their headers in <prefix>/include/c++/<version>
 * (libc++: v1): /usr/include for the system's compiler, /usr/local/include
 * for a GCC built with its default prefix (the gcc Docker images),
 * /opt/rh/gcc-toolset-12/root/usr/include, a conda environment's or
 * Homebrew's prefix for the others. */
static bool cxx_library_header(const char *file) {
    for (const char *p = strstr(file, "/include/c++/"); p; p = strstr(p + 1, "/include/c++/")) {
        const char *v = p + 13; /* the version: "12", "4.8.5", "v1" */
        if ((*v >= '0' && *v <= '9') || (v[0] == 'v' && v[1] == '1' && v[2] == '/')) return true;
    }
    return false;
}

static bool library_file(const char *file) {
    if (!file) return false;
    char buf[1024];
    file = lexical_path(file, buf, sizeof buf);
    return under(file, "/usr/include") || under(file, "/usr/lib") || cxx_library_header(file) ||
           rust_library_file(file);
}

/* A frame that would name a site no better than the allocator does: no
 * name (an address), the allocator or memlens (ml__frame_is_allocator), a
 * standard library's (library_name, library_file), or code of the C and C++
 * runtimes, where the allocation wrappers are (strdup, fopen, the loader's
 * tables). */
static bool is_runtime(const ml_frame_t *f) {
    if (!f->function || f->function[0] == '[' || is_allocator(f) || library_name(f->function) ||
        library_file(f->file))
        return true;
    const char *base = f->module ? strrchr(f->module, '/') : NULL;
    base = base ? base + 1 : f->module;
    if (!base) return true;
    static const char *const runtime[] = {"libc.so", "libc-", "libm.so", "libpthread.so", "libdl.so",
                                          "librt.so", "ld-linux", "ld64.so", "libstdc++.so", "libgcc_s.so",
                                          "libc++.so", "libc++abi.so", "libunwind.so"};
    for (size_t i = 0; i < sizeof runtime / sizeof runtime[0]; i++)
        if (!strncmp(base, runtime[i], strlen(runtime[i]))) return true;
    return false;
}

bool ml_frame_is_own_code(const char *module, const char *file, const char *exe) {
    if (!module || module[0] != '/') return false; /* unknown, [vdso] */
    if (library_file(file)) return false;
    if (exe && exe[0] && !strcmp(module, exe)) return true;
    const char *base = strrchr(module, '/') + 1;
    if (!strncmp(base, "libmemlens", 10)) return false;
    static const char *const system_dirs[] = {"/usr", "/lib", "/lib32", "/lib64", "/libx32",
                                              "/bin", "/sbin", "/opt", "/snap", "/nix"};
    if (under(module, "/usr/local")) return true;
    for (size_t i = 0; i < sizeof system_dirs / sizeof system_dirs[0]; i++)
        if (under(module, system_dirs[i])) return false;
    return true;
}

/* The symbols of C++ operators, longest first, as the demangler spells
 * them after "operator". */
static size_t operator_len(const char *p) {
    static const char *const ops[] = {
        " delete[]", " new[]", " delete", " new", "<=>", "<<=", ">>=", "->*", "()", "[]", "<<",
        ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "--", "->", "+=", "-=", "*=", "/=",
        "%=", "&=", "|=", "^=", "<", ">", "+", "-", "*", "/", "%", "^", "&", "|", "~", "!",
        "=", ",", "\"\" "};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strncmp(p, ops[i], strlen(ops[i]))) return strlen(ops[i]);
    return 0;
}

static bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Where the bracketed group that opens at p ('<', '(', '{' or '[') ends:
 * the character after its closing bracket, or the end of the string. */
static const char *group_end(const char *p) {
    int depth = 0;
    for (; *p; p++) {
        if (*p == '<' || *p == '(' || *p == '{' || *p == '[') depth++;
        else if ((*p == '>' || *p == ')' || *p == '}' || *p == ']') && --depth == 0) return p + 1;
    }
    return p;
}

/* The Itanium demangler's names of functions the compiler makes for an
 * entity: the entity's name follows. Shortened as a whole, "TLS init
 * function for holder" lost its words up to the last space and read
 * "holder", a variable's name, for two different functions (the C++
 * thread_local's initialiser and its wrapper), where addr2line and gdb
 * name them. The words stay, and the entity's name is shortened. */
static size_t special_prefix(const char *full) {
    static const char *const prefixes[] = {"TLS init function for ", "TLS wrapper function for ",
                                           "non-virtual thunk to ", "virtual thunk to ",
                                           "covariant return thunk to ", "transaction clone for ",
                                           "guard variable for "};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(full, prefixes[i], strlen(prefixes[i]))) return strlen(prefixes[i]);
    return 0;
}

const char *ml_frame_short_name(const char *full, char *buf, size_t len) {
    if (!len) return buf;
    buf[0] = '\0';
    if (!full) return buf;
    size_t pre = special_prefix(full);
    if (pre) {
        if (pre + 1 >= len) return buf;
        memcpy(buf, full, pre);
        ml_frame_short_name(full + pre, buf + pre, len - pre);
        return buf;
    }
    if (full[0] == '<' && full[1]) {
        /* A Rust qualified path ("<alloc::vec::Vec<u8> as core::ops::Drop>::drop",
         * "<str>::trim"): no C++ name starts with '<'. The type and trait in
         * front say which method this is, so they stay, with their own
         * generic arguments collapsed; the rest is shortened as usual. */
        const char *e = group_end(full);
        size_t n = 0;
        if (len > 1) buf[n++] = '<';
        for (const char *p = full + 1; p < e - 1 && n + 5 < len;) {
            if (*p == '<') {
                memcpy(buf + n, "<\xe2\x80\xa6>", 5);
                n += 5;
                p = group_end(p);
            } else {
                buf[n++] = *p++;
            }
        }
        if (n + 1 < len && e[-1] == '>') buf[n++] = '>';
        buf[n] = '\0';
        if (*e && n + 1 < len) ml_frame_short_name(e, buf + n, len - n);
        return buf;
    }
    if (full[0] == '[' || !strpbrk(full, "<( ")) {
        snprintf(buf, len, "%s", full);
        return buf;
    }
    /* Pass 1: collapse templates, drop argument lists and what follows the
     * last one, keep operators and lambdas. */
    size_t n = 0, cap = strlen(full) + 8;
    char *t = malloc(cap);
    if (!t) {
        snprintf(buf, len, "%s", full);
        return buf;
    }
    size_t op_at = (size_t)-1; /* where the last "operator" starts in t */
    const char *p = full;
    while (*p) {
        if (!strncmp(p, "operator", 8) && (p == full || !ident_char(p[-1])) && !ident_char(p[8])) {
            op_at = n;
            memcpy(t + n, p, 8);
            n += 8;
            p += 8;
            size_t k = operator_len(p);
            memcpy(t + n, p, k);
            n += k;
            p += k;
        } else if (*p == '<') {
            memcpy(t + n, "<\xe2\x80\xa6>", 5); /* <…> */
            n += 5;
            p = group_end(p);
        } else if (*p == '(') {
            const char *e = group_end(p);
            if (!strncmp(p, "(anonymous namespace)", 21)) {
                memcpy(t + n, p, (size_t)(e - p));
                n += (size_t)(e - p);
            } else if (strncmp(e, "::", 2)) {
                break; /* the argument list: qualifiers follow, then nothing */
            }
            p = e; /* a function's arguments before "::" (a local entity) */
        } else if (*p == '{') {
            const char *e = group_end(p); /* {lambda(int)#1}, {unnamed type#1} */
            memcpy(t + n, p, (size_t)(e - p));
            n += (size_t)(e - p);
            p = e;
        } else {
            t[n++] = *p++;
        }
    }
    t[n] = '\0';
    /* Pass 2: the return type is what comes before the last space outside
     * brackets and before the last operator's name. */
    size_t start = 0, depth = 0;
    for (size_t i = 0; i < n && i < op_at; i++) {
        if (t[i] == '(' || t[i] == '{' || t[i] == '[') depth++;
        else if ((t[i] == ')' || t[i] == '}' || t[i] == ']') && depth) depth--;
        else if (t[i] == ' ' && !depth && !(i >= 1 && t[i - 1] == ',')) start = i + 1;
    }
    /* Cut at a character boundary (UTF-8). */
    size_t m = strlen(t + start);
    if (m >= len) {
        m = len - 1;
        while (m && ((unsigned char)t[start + m] & 0xC0) == 0x80) m--;
    }
    memcpy(buf, t + start, m);
    buf[m] = '\0';
    free(t);
    return buf;
}
