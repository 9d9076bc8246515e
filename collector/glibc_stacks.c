/* glibc_stacks.c - the thread descriptors on glibc's list of used stacks.
 *
 * glibc keeps two lists of thread stacks in the loader's _rtld_global
 * (glibc 2.34 and later; nptl/nptl-stack.c): the stacks in use, of the
 * threads that run and of those that ended but were not joined yet, and
 * the cache of stacks whose threads are gone for good (joined, or ended
 * detached). Each stack holds its thread's descriptor (struct pthread),
 * linked into one of them through its `list` member. The exit scan tells
 * the two apart for a stack no live thread uses (exit_scan.c,
 * cached_stack_dtv): on the used list it belongs to a thread that ended
 * unjoined, whose TLS vector valgrind reports possibly lost.
 *
 * Where the list head and the link lie is what glibc tells libthread_db:
 * libc.so exports `_thread_db_rtld_global__dl_stack_used` and
 * `_thread_db_pthread_list`, each three 32-bit words {bits, count,
 * offset} (nptl_db/db_info.c); _rtld_global is a symbol of ld.so. Both
 * are read from the files the process mapped, the list from its memory.
 * Anything missing (another libc, an older glibc, a file that cannot be
 * read, a list that does not hold together) gives "unknown".
 */
#define _GNU_SOURCE
#include "collector_internal.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DESCRIPTORS 65536 /* a longer list is taken as not holding together */

/* An ELF file, its header and program headers read. */
typedef struct {
    int fd;
    Elf64_Ehdr eh;
    Elf64_Phdr ph[32];
    unsigned nph;
} elf_t;

static bool elf_open(elf_t *e, const char *path) {
    e->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (e->fd < 0) return false;
    if (pread(e->fd, &e->eh, sizeof e->eh, 0) != (ssize_t)sizeof e->eh || memcmp(e->eh.e_ident, ELFMAG, SELFMAG) ||
        e->eh.e_ident[EI_CLASS] != ELFCLASS64 || e->eh.e_phentsize != sizeof(Elf64_Phdr) ||
        e->eh.e_shentsize != sizeof(Elf64_Shdr)) {
        close(e->fd);
        return false;
    }
    e->nph = e->eh.e_phnum < 32 ? e->eh.e_phnum : 32;
    if (pread(e->fd, e->ph, e->nph * sizeof *e->ph, (off_t)e->eh.e_phoff) != (ssize_t)(e->nph * sizeof *e->ph)) {
        close(e->fd);
        return false;
    }
    return true;
}

/* The file offset of the virtual address `va`: false when no loadable
 * segment holds it. */
static bool elf_file_offset(const elf_t *e, uint64_t va, uint64_t *off) {
    for (unsigned i = 0; i < e->nph; i++) {
        const Elf64_Phdr *p = &e->ph[i];
        if (p->p_type == PT_LOAD && va >= p->p_vaddr && va < p->p_vaddr + p->p_filesz) {
            *off = p->p_offset + (va - p->p_vaddr);
            return true;
        }
    }
    return false;
}

/* The load bias of a file whose offset-0 mapping starts at `start`. */
static bool elf_bias(const elf_t *e, uint64_t start, uint64_t *bias) {
    for (unsigned i = 0; i < e->nph; i++)
        if (e->ph[i].p_type == PT_LOAD && e->ph[i].p_offset == 0) {
            *bias = start - (e->ph[i].p_vaddr & ~0xfffull);
            return true;
        }
    return false;
}

/* The value of each of the n dynamic symbols names[] (0 where absent). */
static void elf_dynsyms(const elf_t *e, const char *const *names, uint64_t *vals, size_t n) {
    memset(vals, 0, n * sizeof *vals);
    unsigned nsh = e->eh.e_shnum;
    if (!nsh || nsh > 4096) return;
    Elf64_Shdr *sh = malloc(nsh * sizeof *sh);
    if (!sh) return;
    if (pread(e->fd, sh, nsh * sizeof *sh, (off_t)e->eh.e_shoff) != (ssize_t)(nsh * sizeof *sh)) goto out;
    for (unsigned i = 0; i < nsh; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= nsh || sh[i].sh_entsize != sizeof(Elf64_Sym)) continue;
        const Elf64_Shdr *st = &sh[sh[i].sh_link];
        if (sh[i].sh_size > (64u << 20) || st->sh_size > (64u << 20)) break;
        Elf64_Sym *sym = malloc(sh[i].sh_size);
        char *str = malloc(st->sh_size + 1);
        if (sym && str && pread(e->fd, sym, sh[i].sh_size, (off_t)sh[i].sh_offset) == (ssize_t)sh[i].sh_size &&
            pread(e->fd, str, st->sh_size, (off_t)st->sh_offset) == (ssize_t)st->sh_size) {
            str[st->sh_size] = '\0';
            for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
                if (sym[k].st_name >= st->sh_size || sym[k].st_shndx == SHN_UNDEF) continue;
                for (size_t j = 0; j < n; j++)
                    if (!vals[j] && !strcmp(str + sym[k].st_name, names[j])) vals[j] = sym[k].st_value;
            }
        }
        free(sym);
        free(str);
        break;
    }
out:
    free(sh);
}

/* A libthread_db descriptor's offset (its third word), read from the file. */
static bool db_offset(const elf_t *e, uint64_t va, uint32_t *offset) {
    uint32_t d[3];
    uint64_t off;
    if (!va || !elf_file_offset(e, va, &off) || pread(e->fd, d, sizeof d, (off_t)off) != (ssize_t)sizeof d)
        return false;
    if (d[0] != 8 * sizeof(uint64_t) * 2 && d[0] != 8 * sizeof(uint64_t)) return false; /* list_t, or a pointer */
    *offset = d[2];
    return d[2] < (1u << 16);
}

/* The start of the offset-0 mappings of the loader and of libc, and their
 * paths, from /proc/PID/maps. */
static bool find_files(pid_t pid, char *ld, uint64_t *ld_start, char *libc, uint64_t *libc_start) {
    char path[64], line[PATH_MAX + 128];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    *ld_start = *libc_start = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off;
        int at = 0;
        char perms[8];
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*u %n", &lo, &hi, perms, &off, &at) < 4 || !at || off) continue;
        char *name = line + at;
        name[strcspn(name, "\n")] = '\0';
        const char *base = strrchr(name, '/');
        if (!base || strlen(name) >= PATH_MAX) continue;
        base++;
        if (!*ld_start && !strncmp(base, "ld-linux", 8)) {
            strcpy(ld, name);
            *ld_start = lo;
        } else if (!*libc_start && !strncmp(base, "libc.so", 7)) {
            strcpy(libc, name);
            *libc_start = lo;
        }
    }
    fclose(f);
    return *ld_start && *libc_start;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int ml__glibc_used_stacks(pid_t pid, ml__read_words_fn read_words, uint64_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    char ld[PATH_MAX], libc[PATH_MAX];
    uint64_t ld_start, libc_start;
    if (!find_files(pid, ld, &ld_start, libc, &libc_start)) return -1;
    elf_t e;
    if (!elf_open(&e, libc)) return -1;
    static const char *const db_names[] = {"_thread_db_rtld_global__dl_stack_used", "_thread_db_pthread_list"};
    uint64_t db[2];
    uint32_t off_used, off_list;
    elf_dynsyms(&e, db_names, db, 2);
    bool ok = db_offset(&e, db[0], &off_used) && db_offset(&e, db[1], &off_list);
    close(e.fd);
    if (!ok || !elf_open(&e, ld)) return -1;
    static const char *const rtld_names[] = {"_rtld_global"};
    uint64_t rtld, bias;
    elf_dynsyms(&e, rtld_names, &rtld, 1);
    ok = rtld && elf_bias(&e, ld_start, &bias);
    close(e.fd);
    if (!ok) return -1;
    uint64_t head = bias + rtld + off_used, next;
    if (!read_words(pid, head, &next, 1)) return -1;
    size_t cap = 0;
    uint64_t *v = NULL;
    while (next != head) {
        if (*n == MAX_DESCRIPTORS || (next & 7) || next < off_list) goto broken;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            uint64_t *nv = realloc(v, cap * sizeof *v);
            if (!nv) goto broken;
            v = nv;
        }
        v[(*n)++] = next - off_list;
        if (!read_words(pid, next, &next, 1)) goto broken;
    }
    if (*n) qsort(v, *n, sizeof *v, cmp_u64);
    *out = v;
    return 0;
broken:
    free(v);
    *n = 0;
    return -1;
}

bool ml__glibc_stack_used(const uint64_t *v, size_t n, uint64_t descriptor) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < descriptor) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && v[lo] == descriptor;
}
