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
 * offset} (nptl_db/db_info.c); _rtld_global is a symbol of ld.so. They are
 * read in memlens' own libc and loader, found with dlsym, which are the
 * target's when they are the same files (as `memlens attach` finds its
 * dlopen: cli/attach.c); the list itself is read from the target's memory.
 * Anything missing (other files, another libc, an older glibc, a list that
 * does not hold together) gives "unknown".
 */
#define _GNU_SOURCE
#include "collector_internal.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DESCRIPTORS 65536 /* a longer list is taken as not holding together */

/* The start of the offset-0 mappings of the loader and of libc in process
 * pid, and their paths there, from /proc/PID/maps. */
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

/* Whether `theirs`, a path in process pid's file system, is the file
 * `ours` names in memlens'. */
static bool same_file(pid_t pid, const char *theirs, const char *ours) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "/proc/%d/root%s", (int)pid, theirs);
    struct stat a, b;
    return ours && stat(path, &a) == 0 && stat(ours, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* A libthread_db descriptor's offset (its third word), where the field is a
 * list_t (two pointers). */
static bool db_offset(const uint32_t *d, uint32_t *offset) {
    if (!d || d[0] != 8 * 2 * sizeof(void *) || d[2] >= (1u << 16)) return false;
    *offset = d[2];
    return true;
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
    void *self = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    const uint32_t *d_used = self ? dlsym(self, "_thread_db_rtld_global__dl_stack_used") : NULL;
    const uint32_t *d_list = self ? dlsym(self, "_thread_db_pthread_list") : NULL;
    void *rtld = dlsym(RTLD_DEFAULT, "_rtld_global");
    Dl_info li, di;
    uint32_t off_used, off_list;
    bool ok = db_offset(d_used, &off_used) && db_offset(d_list, &off_list) && rtld &&
              dladdr(d_used, &li) && dladdr(rtld, &di) && same_file(pid, libc, li.dli_fname) &&
              same_file(pid, ld, di.dli_fname);
    uint64_t at = ok ? (uint64_t)(uintptr_t)rtld - (uint64_t)(uintptr_t)di.dli_fbase : 0;
    if (self) dlclose(self);
    if (!ok) return -1;
    uint64_t head = ld_start + at + off_used, next;
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
