/* symcache.c - resolved frames kept between reports, per module.
 *
 * Most of a small report's symbolization is spent in the system libraries,
 * not in the program: with glibc's debug file installed, the 57 return
 * addresses of git's trace that fall in libc took 5-7 ms of the report's
 * 12 ms (line tables and scope trees of whole units decoded for one
 * address each), the program's own 442 addresses 0.7 ms. The same libc
 * addresses come back in every report of every program. So each module
 * with a build-id gets a file in the debug cache (debug_cache.c: the same
 * directory, the same rules), "<build-id>.<memlens' build-id, 16 digits>.sym"
 * (two builds of memlens used in turn keep a file each), holding the frames its
 * addresses resolved to, by address relative to the module's load base,
 * and later reports read the frames from it instead of asking libdw.
 *
 * A cached answer must be the answer libdw would give now, so a file is
 * used only when its stamp equals the current one, byte for byte. The
 * stamp (symbols.c, sym_stamp) names this build of memlens (its own
 * build-id: any change to the resolving code changes it) and, for each
 * file libdw reads the module's symbols and DWARF from, its path, device,
 * inode, size and modification time, and a hash of the same for the .dwo
 * files of a -gsplit-dwarf module's skeleton units (stamp_split_units): a
 * debug package installed, removed or upgraded, a program rebuilt in place
 * or a .dwo come back gives another stamp, and the file is rebuilt from
 * scratch. A file that does not check out (short,
 * inconsistent, failing its checksum, not a regular file of ours, a link)
 * is ignored and replaced; reading it never trusts a length or an offset.
 *
 * The files count in the cache's size limit and its pruning, least recently
 * used first (a new file prunes, as a new debug copy does); a file unused
 * for 30 days goes then too (debug_cache.c, ML_SYMBOL_FILE_AGE).
 *
 * Writing: at the end of the report, when it resolved addresses the file
 * did not have, the old entries and the new ones go to a temporary file,
 * renamed over the old one: a report killed meanwhile leaves the old file,
 * and two reports at once lose one's additions, never the file.
 *
 * Layout (little-endian):
 *   "MLSYMC\0\1", u32 stamp length, stamp,
 *   u32 entries, u32 frames, u32 string bytes,
 *   entries: u64 address, u32 first frame, u32 frames (1..ML__SYMC_MAX_FRAMES)
 *   frames:  u32 function (string offset; NO_STR: the "[module+0xOFF]" name),
 *            u32 file (NO_STR: none), u32 line, u32 flags (1: inlined)
 *   strings, NUL-terminated; u64 FNV-1a of everything before.
 */
#define _GNU_SOURCE
#include "analysis_internal.h"
#include "ml_map.h"
#include "ml_trace_io.h" /* ml_write_all */
#include "ml_util.h"     /* ml_grow */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "MLSYMC\0\1"
#define NO_STR 0xffffffffu
#define FILE_MAX (64u << 20)    /* a larger file is not read, nor written */
#define ENTRIES_MAX (1u << 21)  /* addresses kept per module */

typedef struct {
    uint64_t key; /* address + 1 */
    uint32_t first, n;
} sent_t;
ML_MAP_TYPED(sent, sent_t, 64)

typedef struct {
    uint32_t fn, file, line, flags;
} sframe_t;

struct ml__symc_s {
    char name[300]; /* "<hex build-id>.<16 hex digits of memlens' build-id>.sym" */
    char *stamp;
    uint32_t stamp_len;
    ml_map_t idx;
    sframe_t *fr;
    uint32_t nfr, fr_cap;
    char *str;
    uint32_t nstr, str_cap;
    ml_map_t strs; /* string offset + 1 by hash: new strings are shared */
    bool dirty, full;
};

typedef struct {
    uint64_t key; /* hash, never 0 */
    uint32_t off;
    uint32_t pad;
} sstr_t;
ML_MAP_TYPED(sstr, sstr_t, 64)

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
#define FNV0 1469598103934665603ull

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) {
    return rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* A string's offset in the pool, added when new; NO_STR without memory. */
static uint32_t str_add(ml__symc_t *c, const char *s) {
    size_t len = strlen(s) + 1;
    uint64_t h = fnv(FNV0, s, len) | 1;
    const sstr_t *old = sstr_find(&c->strs, h);
    if (old && !strcmp(c->str + old->off, s)) return old->off; /* else a collision: stored again */
    if (len > FILE_MAX || c->nstr + len > FILE_MAX) return NO_STR;
    if (ml_grow((void **)&c->str, &c->str_cap, (uint64_t)c->nstr + len, 1, 0) < 0) return NO_STR;
    uint32_t off = c->nstr;
    memcpy(c->str + off, s, len);
    c->nstr += (uint32_t)len;
    bool existed;
    sstr_t *e = sstr_put(&c->strs, h, &existed);
    if (e && !existed) e->off = off;
    return off;
}

/* Reads and checks the file; false leaves `c` empty. */
static bool load(ml__symc_t *c, int dfd) {
    int fd = openat(dfd, c->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    struct stat st;
    unsigned char *b = NULL;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
              st.st_size >= 32 && st.st_size <= FILE_MAX;
    size_t size = ok ? (size_t)st.st_size : 0;
    if (ok && !(b = malloc(size))) ok = false;
    if (ok) {
        size_t got = 0;
        while (got < size) {
            ssize_t r = pread(fd, b + got, size - got, (off_t)got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        ok = got == size;
    }
    /* Its access time orders the pruning, as a debug copy's does. */
    if (ok) futimens(fd, (struct timespec[2]){{.tv_nsec = UTIME_NOW}, {.tv_nsec = UTIME_OMIT}});
    close(fd);
    /* Header, stamp, counts; then every length within the file. */
    ok = ok && !memcmp(b, MAGIC, 8) && rd64(b + size - 8) == fnv(FNV0, b, size - 8);
    uint64_t at = 12, slen = ok ? rd32(b + 8) : 0;
    ok = ok && slen == c->stamp_len && at + slen + 12 <= size - 8 && !memcmp(b + at, c->stamp, slen);
    at += slen;
    uint64_t ne = ok ? rd32(b + at) : 0, nf = ok ? rd32(b + at + 4) : 0, ns = ok ? rd32(b + at + 8) : 0;
    at += 12;
    ok = ok && ne <= ENTRIES_MAX && at + ne * 16 + nf * 16 + ns + 8 == size && (ns == 0 || b[size - 9] == 0);
    const unsigned char *E = b + at, *F = E + ne * 16, *S = F + nf * 16;
    if (ok && ns) {
        if (!(c->str = malloc(ns))) ok = false;
        else memcpy(c->str, S, ns), c->nstr = c->str_cap = (uint32_t)ns;
    }
    if (ok && nf) {
        if (!(c->fr = malloc(nf * sizeof *c->fr))) ok = false;
        for (uint64_t i = 0; ok && i < nf; i++) {
            sframe_t f = {rd32(F + 16 * i), rd32(F + 16 * i + 4), rd32(F + 16 * i + 8), rd32(F + 16 * i + 12)};
            ok = (f.fn == NO_STR || f.fn < ns) && (f.file == NO_STR || f.file < ns) && f.flags <= 1;
            c->fr[i] = f;
        }
        c->nfr = c->fr_cap = (uint32_t)nf;
    }
    for (uint64_t i = 0; ok && i < ne; i++) {
        uint64_t addr = rd64(E + 16 * i);
        uint32_t first = rd32(E + 16 * i + 8), n = rd32(E + 16 * i + 12);
        ok = addr != UINT64_MAX && n >= 1 && n <= ML__SYMC_MAX_FRAMES && (uint64_t)first + n <= nf;
        bool existed;
        sent_t *e = ok ? sent_put(&c->idx, addr + 1, &existed) : NULL;
        ok = e && !existed;
        if (ok) e->first = first, e->n = n;
    }
    free(b);
    if (!ok) {
        ml_map_free(&c->idx);
        free(c->fr);
        free(c->str);
        c->fr = NULL;
        c->str = NULL;
        c->nfr = c->fr_cap = c->nstr = c->str_cap = 0;
    }
    return ok;
}

ml__symc_t *ml__symc_open(const uint8_t *id, uint32_t idlen, const char *self, const char *stamp,
                          size_t stamp_len) {
    if (idlen < 2 || idlen > 64 || strlen(self) < 16 || stamp_len > 65536) return NULL;
    int dfd = ml__debug_cache_dir(false);
    ml__symc_t *c = calloc(1, sizeof *c);
    if (!c || !(c->stamp = malloc(stamp_len ? stamp_len : 1))) {
        free(c);
        if (dfd >= 0) close(dfd);
        return NULL;
    }
    memcpy(c->stamp, stamp, stamp_len);
    c->stamp_len = (uint32_t)stamp_len;
    int k = 0;
    for (uint32_t i = 0; i < idlen; i++) k += snprintf(c->name + k, sizeof c->name - (size_t)k, "%02x", id[i]);
    snprintf(c->name + k, sizeof c->name - (size_t)k, ".%.16s.sym", self);
    if (dfd >= 0) {
        load(c, dfd);
        close(dfd);
    }
    return c;
}

uint32_t ml__symc_get(const ml__symc_t *c, uint64_t addr, ml__symc_frame_t *out) {
    const sent_t *e = c && addr != UINT64_MAX ? sent_find(&c->idx, addr + 1) : NULL;
    if (!e) return 0;
    for (uint32_t i = 0; i < e->n; i++) {
        const sframe_t *f = &c->fr[e->first + i];
        out[i] = (ml__symc_frame_t){
            .function = f->fn == NO_STR ? NULL : c->str + f->fn,
            .file = f->file == NO_STR ? NULL : c->str + f->file,
            .line = f->line,
            .inlined = f->flags & 1,
        };
    }
    return e->n;
}

void ml__symc_put(ml__symc_t *c, uint64_t addr, const ml__symc_frame_t *f, uint32_t n) {
    if (!c || c->full || n == 0 || n > ML__SYMC_MAX_FRAMES || addr == UINT64_MAX) return;
    if (c->idx.count >= ENTRIES_MAX || c->nfr + n > ENTRIES_MAX * 4u) {
        c->full = true;
        return;
    }
    if (sent_find(&c->idx, addr + 1)) return;
    if (ml_grow((void **)&c->fr, &c->fr_cap, (uint64_t)c->nfr + n, sizeof *c->fr, 0) < 0) return;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t fn = f[i].function ? str_add(c, f[i].function) : NO_STR;
        uint32_t file = f[i].file ? str_add(c, f[i].file) : NO_STR;
        if ((f[i].function && fn == NO_STR) || (f[i].file && file == NO_STR)) return;
        c->fr[c->nfr + i] = (sframe_t){fn, file, f[i].line, f[i].inlined ? 1u : 0u};
    }
    bool existed;
    sent_t *e = sent_put(&c->idx, addr + 1, &existed);
    if (!e) return;
    e->first = c->nfr;
    e->n = n;
    c->nfr += n;
    c->dirty = true;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Writes the whole file under a temporary name, then renames it. */
static void save(const ml__symc_t *c) {
    uint64_t ne = c->idx.count;
    uint64_t size = 8 + 4 + c->stamp_len + 12 + ne * 16 + (uint64_t)c->nfr * 16 + c->nstr + 8;
    if (size > FILE_MAX) return;
    unsigned char *b = malloc(size), *p = b;
    if (!b) return;
    memcpy(p, MAGIC, 8), p += 8;
    put32(p, c->stamp_len), p += 4;
    memcpy(p, c->stamp, c->stamp_len), p += c->stamp_len;
    put32(p, (uint32_t)ne), put32(p + 4, c->nfr), put32(p + 8, c->nstr), p += 12;
    const sent_t *v = sent_entries(&c->idx);
    for (uint64_t i = 0; i < c->idx.cap; i++) {
        if (!v[i].key) continue;
        put32(p, (uint32_t)(v[i].key - 1)), put32(p + 4, (uint32_t)((v[i].key - 1) >> 32));
        put32(p + 8, v[i].first), put32(p + 12, v[i].n), p += 16;
    }
    for (uint32_t i = 0; i < c->nfr; i++, p += 16)
        put32(p, c->fr[i].fn), put32(p + 4, c->fr[i].file), put32(p + 8, c->fr[i].line),
            put32(p + 12, c->fr[i].flags);
    if (c->nstr) memcpy(p, c->str, c->nstr), p += c->nstr;
    uint64_t h = fnv(FNV0, b, (size_t)(p - b));
    put32(p, (uint32_t)h), put32(p + 4, (uint32_t)(h >> 32));
    int dfd = ml__debug_cache_dir(true);
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%ld", c->name, (long)getpid(), (long)gettid());
    struct stat st;
    if (dfd >= 0 && fstatat(dfd, c->name, &st, AT_SYMLINK_NOFOLLOW) < 0) ml__debug_cache_prune(dfd, size);
    int fd = dfd >= 0 ? openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    if (fd >= 0) {
        bool ok = ml_write_all(fd, b, size) == 0;
        ok = close(fd) == 0 && ok;
        if (!ok || renameat(dfd, tmp, dfd, c->name) < 0) unlinkat(dfd, tmp, 0);
    }
    if (dfd >= 0) close(dfd);
    free(b);
}

void ml__symc_close(ml__symc_t *c) {
    if (!c) return;
    if (c->dirty) save(c);
    ml_map_free(&c->idx);
    ml_map_free(&c->strs);
    free(c->fr);
    free(c->str);
    free(c->stamp);
    free(c);
}
