/* debug_cache.c - uncompressed copies of debug files, kept between reports.
 *
 * Debian's and Fedora's debug packages compress their DWARF sections
 * (SHF_COMPRESSED, zlib). libdw inflates every debug section of a file the
 * moment it opens it (dwarf_begin_elf), whichever sections the lookups then
 * read: for glibc's debug file that is 10 MiB of inflate, about 80 ms, paid
 * by every report whose stacks pass through libc, and it was two thirds of
 * `report --no-advisor` on most real traces (issue 12, item 4).
 *
 * So the first report that opens such a file writes an uncompressed copy of
 * it to the cache, named by its build-id, and later reports hand libdw the
 * copy, which it maps without inflating anything. The copy keeps every
 * section, in the same order and with the same headers (less the
 * compression flag); sections before the first compressed one keep their
 * file offsets, so the program headers' notes still point at the build-id.
 *
 * The cache is a convenience, never a source of truth:
 *   - a copy is used only when its build-id equals the original's (a file
 *     without a build-id is never cached), it has no compressed section
 *     left, it is a regular file owned by us, and no link is followed;
 *   - any failure (no HOME, a read-only disk, a full one, a copy that does
 *     not check out) falls back to libdw's own inflating, silently, since
 *     the answers are the same;
 *   - copies are written to a temporary name and renamed, so a report
 *     killed while writing leaves no half copy under the final name;
 *   - the directory is created 0700, and refused when it is a link, is not
 *     ours, or is writable by others;
 *   - files above ML_DEBUG_CACHE_FILE_MAX are not copied, and when the
 *     cache grows past ML_DEBUG_CACHE_MAX the least recently used copies go.
 *
 * Where: $MEMLENS_DEBUG_CACHE if set ("off" or "0" turns the cache off),
 * else $XDG_CACHE_HOME/memlens/debug, else $HOME/.cache/memlens/debug if
 * $HOME exists (else no cache).
 */
#define _GNU_SOURCE
#include "analysis_internal.h"

#include <dirent.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ML_DEBUG_CACHE_FILE_MAX (1ull << 30) /* one uncompressed copy */
#define ML_DEBUG_CACHE_MAX (4ull << 30)      /* the whole cache */
#define ML_SYMBOL_FILE_AGE (30 * 86400)      /* a symbol file unused this long goes */

/* ------------------------------------------------------------------------- */
/* The directory                                                             */
/* ------------------------------------------------------------------------- */

/* Makes the directory `path` (0700) unless it exists. Only inside a
 * directory where it stays the user's alone: one of the user's, a system
 * one (root's, not writable by others), or a sticky one such as /tmp. Not
 * in another user's: root run with HOME=/home/alice (sudo -E) would leave
 * directories of root's in alice's home that she cannot empty. */
static int make_level(char *path) {
    struct stat st;
    if (lstat(path, &st) == 0) return 0;
    char *slash = strrchr(path, '/');
    if (slash) *slash = '\0';
    const char *parent = !slash ? "." : path[0] ? path : "/";
    bool ok = stat(parent, &st) == 0 && S_ISDIR(st.st_mode) &&
              (st.st_uid == geteuid() || (st.st_mode & S_ISVTX) || (st.st_uid == 0 && !(st.st_mode & 022)));
    if (slash) *slash = '/';
    if (!ok) return -1;
    return mkdir(path, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

/* Opens (creating the missing levels 0700, see make_level) the directory
 * `path`; -1 when it cannot, or when the last level is a link, not ours, or
 * writable by others. */
static int open_dir(const char *path, bool create) {
    char buf[4096];
    if (!path[0] || strlen(path) >= sizeof buf) return -1;
    memcpy(buf, path, strlen(path) + 1);
    for (char *p = buf + 1; create && *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (make_level(buf) < 0) return -1;
        *p = '/';
    }
    if (create && make_level(buf) < 0) return -1;
    int fd = open(buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The cache directory; made only when a copy is to be written, so a
 * lookup leaves no directory behind. $HOME itself is never made: only
 * .cache and below, in a home that exists. System accounts have a home
 * that must not (nobody's is /nonexistent), and root run with such a HOME
 * made /nonexistent/.cache/memlens/debug. */
static bool home_exists(const char *home) {
    struct stat st;
    return stat(home, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cache_dir(bool create) {
    const char *env = getenv("MEMLENS_DEBUG_CACHE");
    char path[4096];
    if (env && (!strcmp(env, "off") || !strcmp(env, "0") || !env[0])) return -1;
    if (env) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0] == '/')
            snprintf(path, sizeof path, "%s/memlens/debug", xdg);
        else if (home && home[0] == '/' && home_exists(home))
            snprintf(path, sizeof path, "%s/.cache/memlens/debug", home);
        else
            return -1;
    }
    return open_dir(path, create);
}

/* Removes the least recently used copies until the cache holds at most
 * ML_DEBUG_CACHE_MAX - `incoming` bytes. Temporary files of reports that
 * died are removed after a day, symbol files unused for ML_SYMBOL_FILE_AGE. */
typedef struct {
    char name[256];
    time_t used;
    uint64_t bytes;
} entry_t;

static int cmp_used(const void *x, const void *y) {
    const entry_t *a = x, *b = y;
    return (a->used > b->used) - (a->used < b->used);
}

static void prune(int dfd, uint64_t incoming) {
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    entry_t *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (de->d_name[0] == '.' || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode) || strlen(de->d_name) >= sizeof v->name)
            continue;
        if (strstr(de->d_name, ".tmp.")) {
            if (now - st.st_mtime > 86400) unlinkat(dfd, de->d_name, 0);
            continue;
        }
        /* Frames of a program not reported on for a month (symcache.c):
         * every build of a program has its own, and most are not seen again. */
        size_t len = strlen(de->d_name);
        time_t used = st.st_atime > st.st_mtime ? st.st_atime : st.st_mtime;
        if (len > 4 && !strcmp(de->d_name + len - 4, ".sym") && now - used > ML_SYMBOL_FILE_AGE) {
            unlinkat(dfd, de->d_name, 0);
            continue;
        }
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            entry_t *p = realloc(v, c * sizeof *p);
            if (!p) break;
            v = p;
            cap = c;
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
        v[n].used = st.st_atime > st.st_mtime ? st.st_atime : st.st_mtime;
        v[n].bytes = (uint64_t)st.st_blocks * 512;
        total += v[n].bytes;
        n++;
    }
    closedir(d);
    if (n > 1) qsort(v, n, sizeof *v, cmp_used);
    for (size_t i = 0; i < n && total + incoming > ML_DEBUG_CACHE_MAX; i++) {
        if (unlinkat(dfd, v[i].name, 0) == 0) total -= v[i].bytes;
    }
    free(v);
}

/* ------------------------------------------------------------------------- */
/* ELF                                                                       */
/* ------------------------------------------------------------------------- */

/* The build-id of `e` as hex (false when it has none), and whether it has
 * sections compressed the gABI way (and none the old GNU way, .zdebug_*,
 * which would need renaming: those files are left to libdw). */
static bool inspect(Elf *e, char *hex, size_t hexlen, bool *compressed) {
    *compressed = false;
    const void *id;
    ssize_t len = dwelf_elf_gnu_build_id(e, &id);
    if (len < 2 || (size_t)len * 2 + 1 > hexlen) return false;
    for (ssize_t i = 0; i < len; i++) snprintf(hex + 2 * i, 3, "%02x", ((const unsigned char *)id)[i]);
    size_t shstrndx;
    if (elf_getshdrstrndx(e, &shstrndx) < 0) return false;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh)) return false;
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        if (name && !strncmp(name, ".zdebug", 7)) return false;
        if (sh.sh_flags & SHF_COMPRESSED) *compressed = true;
    }
    return true;
}

typedef struct {
    Elf_Scn *scn;
    GElf_Shdr old, sh; /* before and after inflating */
} sec_t;

static int cmp_off(const void *x, const void *y) {
    const sec_t *a = x, *b = y;
    if (a->old.sh_offset != b->old.sh_offset) return a->old.sh_offset < b->old.sh_offset ? -1 : 1;
    return (elf_ndxscn(a->scn) > elf_ndxscn(b->scn)) - (elf_ndxscn(a->scn) < elf_ndxscn(b->scn));
}

static uint64_t align_up(uint64_t x, uint64_t a) {
    return a > 1 ? (x + a - 1) / a * a : x;
}

/* Writes to `out` the ELF file `src` with its compressed sections inflated.
 * 0, or -1 with nothing promised about `out`. */
static int write_inflated(Elf *src, int out) {
    int rc = -1;
    sec_t *v = NULL;
    Elf *dst = NULL;
    size_t shnum, shstrndx, phnum;
    GElf_Ehdr eh;
    if (elf_getshdrnum(src, &shnum) < 0 || elf_getshdrstrndx(src, &shstrndx) < 0 ||
        elf_getphdrnum(src, &phnum) < 0 || !gelf_getehdr(src, &eh))
        goto out;
    /* Extended numbering keeps counts in section 0: not worth copying. */
    if (shnum < 2 || shnum >= SHN_LORESERVE || shstrndx >= SHN_LORESERVE || phnum >= PN_XNUM)
        goto out;
    v = calloc(shnum - 1, sizeof *v);
    if (!v) goto out;
    uint64_t total = 0;
    for (size_t i = 1; i < shnum; i++) {
        sec_t *s = &v[i - 1];
        s->scn = elf_getscn(src, i);
        if (!s->scn || !gelf_getshdr(s->scn, &s->old)) goto out;
        if ((s->old.sh_flags & SHF_COMPRESSED) && elf_compress(s->scn, 0, 0) < 0) goto out;
        if (!gelf_getshdr(s->scn, &s->sh)) goto out;
        if (s->sh.sh_type != SHT_NOBITS) total += s->sh.sh_size;
    }
    if (total > ML_DEBUG_CACHE_FILE_MAX) goto out;

    /* Layout: in the original order of offsets, each section at its old
     * offset or, once an inflated section pushed the rest, right after the
     * previous one at its alignment. */
    qsort(v, shnum - 1, sizeof *v, cmp_off);
    int cls = gelf_getclass(src);
    uint64_t end = cls == ELFCLASS32 ? sizeof(Elf32_Ehdr) : sizeof(Elf64_Ehdr);
    if (phnum)
        end = eh.e_phoff + (uint64_t)phnum * (cls == ELFCLASS32 ? sizeof(Elf32_Phdr) : sizeof(Elf64_Phdr));
    for (size_t i = 0; i < shnum - 1; i++) {
        sec_t *s = &v[i];
        uint64_t off = align_up(end, s->sh.sh_addralign ? s->sh.sh_addralign : 1);
        if (s->old.sh_offset > off) off = s->old.sh_offset;
        s->sh.sh_offset = off;
        if (s->sh.sh_type != SHT_NOBITS) end = off + s->sh.sh_size;
    }

    dst = elf_begin(out, ELF_C_WRITE, NULL);
    if (!dst || !gelf_newehdr(dst, cls)) goto out;
    elf_flagelf(dst, ELF_C_SET, ELF_F_LAYOUT);
    if (phnum) {
        if (!gelf_newphdr(dst, phnum)) goto out;
        for (size_t i = 0; i < phnum; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(src, (int)i, &ph)) goto out;
            /* A segment inside a section that moved moves with it. */
            for (size_t k = 0; ph.p_filesz && k < shnum - 1; k++) {
                const sec_t *s = &v[k];
                if (s->old.sh_type != SHT_NOBITS && ph.p_offset >= s->old.sh_offset &&
                    ph.p_offset < s->old.sh_offset + s->old.sh_size) {
                    ph.p_offset = ph.p_offset - s->old.sh_offset + s->sh.sh_offset;
                    break;
                }
            }
            if (!gelf_update_phdr(dst, (int)i, &ph)) goto out;
        }
    }
    /* Sections in index order, so every sh_link and symbol index holds. */
    sec_t **byidx = calloc(shnum, sizeof *byidx);
    if (!byidx) goto out;
    for (size_t i = 0; i < shnum - 1; i++) byidx[elf_ndxscn(v[i].scn)] = &v[i];
    bool ok = true;
    for (size_t i = 1; i < shnum && ok; i++) {
        sec_t *s = byidx[i];
        Elf_Scn *ns = elf_newscn(dst);
        ok = s && ns && elf_ndxscn(ns) == i;
        if (ok && s->sh.sh_type != SHT_NOBITS) {
            Elf_Data *d = elf_getdata(s->scn, NULL), *nd = elf_newdata(ns);
            ok = d && nd;
            if (ok) {
                nd->d_buf = d->d_buf;
                nd->d_type = d->d_type;
                nd->d_size = d->d_size;
                nd->d_off = 0;
                nd->d_align = d->d_align;
                nd->d_version = EV_CURRENT;
                ok = elf_getdata(s->scn, d) == NULL; /* one block, as read */
            }
        }
        if (ok) ok = gelf_update_shdr(ns, &s->sh) != 0;
    }
    free(byidx);
    if (!ok) goto out;
    GElf_Ehdr neh = eh;
    neh.e_shoff = align_up(end, cls == ELFCLASS32 ? 4 : 8);
    neh.e_shnum = (GElf_Half)shnum;
    neh.e_shstrndx = (GElf_Half)shstrndx;
    neh.e_phnum = (GElf_Half)phnum;
    if (!gelf_update_ehdr(dst, &neh) || elf_update(dst, ELF_C_WRITE) < 0) goto out;
    rc = 0;
out:
    if (dst) elf_end(dst);
    free(v);
    return rc;
}

/* An existing copy is used when it is ours, regular, of the same build-id,
 * and has nothing compressed. */
static int open_copy(int dfd, const char *name, const char *hex) {
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
    Elf *e = ok ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
    char h[256];
    bool compressed = true;
    ok = e && inspect(e, h, sizeof h, &compressed) && !compressed && !strcmp(h, hex);
    if (e) elf_end(e);
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The path of `name` in the directory open at dfd, malloc'd. */
static char *path_in(int dfd, const char *name) {
    char link[64], dir[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dfd);
    ssize_t n = readlink(link, dir, sizeof dir - 1);
    if (n <= 0) return NULL;
    dir[n] = '\0';
    char *p;
    return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

/* The cached copy for this hex build-id, or -1. */
static int find_hex(int dfd, const char *hex, char **path) {
    char name[300];
    snprintf(name, sizeof name, "%s.debug", hex);
    int out = open_copy(dfd, name, hex);
    if (out < 0) return -1;
    /* Its access time orders the pruning (noatime mounts do not keep it). */
    futimens(out, (struct timespec[2]){{.tv_nsec = UTIME_NOW}, {.tv_nsec = UTIME_OMIT}});
    if (!(*path = path_in(dfd, name))) {
        close(out);
        return -1;
    }
    return out;
}

/* Writes the copy of `e` (hex: its build-id) under its final name. */
static int add_copy(int dfd, Elf *e, const char *hex) {
    char name[300], tmp[340];
    snprintf(name, sizeof name, "%s.debug", hex);
    /* Per thread: the viewer's history replay may symbolize beside the main
     * session (a second thread that finds the name taken just skips). */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%ld", name, (long)getpid(), (long)gettid());
    int t = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (t < 0) return -1;
    prune(dfd, 0);
    bool ok = write_inflated(e, t) == 0 && fsync(t) == 0;
    close(t);
    if (!ok || renameat(dfd, tmp, dfd, name) < 0) {
        unlinkat(dfd, tmp, 0);
        return -1;
    }
    return 0;
}

int ml__debug_cache_dir(bool create) {
    return cache_dir(create);
}

void ml__debug_cache_prune(int dfd, uint64_t incoming) {
    prune(dfd, incoming);
}

int ml__debug_cache_find(const unsigned char *id, int len, char **path) {
    *path = NULL;
    char hex[256];
    if (len < 2 || (size_t)len * 2 + 1 > sizeof hex) return -1;
    for (int i = 0; i < len; i++) snprintf(hex + 2 * i, 3, "%02x", id[i]);
    elf_version(EV_CURRENT);
    int dfd = cache_dir(false);
    if (dfd < 0) return -1;
    int out = find_hex(dfd, hex, path);
    close(dfd);
    return out;
}

int ml__debug_cache_open(int fd, char **path, bool keep) {
    *path = NULL;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e) return -1;
    char hex[256];
    bool compressed;
    int out = -1, dfd = -1;
    if (!inspect(e, hex, sizeof hex, &compressed) || !compressed) goto done;
    if ((dfd = cache_dir(true)) < 0) goto done;
    out = find_hex(dfd, hex, path);
    if (out < 0 && add_copy(dfd, e, hex) == 0) {
        out = find_hex(dfd, hex, path);
        if (out < 0) { /* it did not check out: do not keep it */
            char name[300];
            snprintf(name, sizeof name, "%s.debug", hex);
            unlinkat(dfd, name, 0);
        }
    }
    if (out >= 0 && !keep) {
        close(out);
        free(*path);
        *path = NULL;
        out = 0;
    }
done:
    if (dfd >= 0) close(dfd);
    elf_end(e);
    return out;
}
