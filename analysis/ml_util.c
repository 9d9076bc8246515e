/* ml_util.c - byte counts for people, array growth, the allocator hook
 * (ml_util.h). */
#include "ml_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ------------------------------------------------------------------------- */
/* Huge pages                                                                */
/* ------------------------------------------------------------------------- */

#define HUGE_PAGE (2u << 20)

void ml_advise_huge(void *p, size_t len) {
    if (!p || len < ML_HUGE_TABLE_BYTES) return;
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + len) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

/* From 1 MiB, an array is taken in whole 2 MiB pages at a 2 MiB boundary and
 * advised: calloc places a 1-4 MiB table anywhere, so that no whole huge page
 * lies in it. Such a table is zeroed here when asked (the kernel zeroes a
 * huge page when it maps it: this writes it once more, which only a table of
 * up to 32 MiB can afford). A larger zeroed table comes from calloc, whose
 * fresh pages the kernel zeroes, and is advised inside: at most its first
 * and last 2 MiB are left out. */
#define HUGE_ALLOC_MIN ((size_t)1 << 20)
#define ALIGNED_ZERO_MAX ((size_t)32 << 20)

void *ml_huge_alloc(size_t bytes, bool zero) {
    if (!bytes) bytes = 1;
    if (bytes < HUGE_ALLOC_MIN) return zero ? calloc(1, bytes) : malloc(bytes);
    if (zero && bytes > ALIGNED_ZERO_MAX) {
        void *p = calloc(1, bytes);
        ml_advise_huge(p, bytes);
        return p;
    }
    size_t whole = (bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
    if (whole < bytes) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, whole) != 0) return NULL;
    (void)madvise(p, whole, MADV_HUGEPAGE); /* advice: failure is harmless */
    if (zero) memset(p, 0, bytes);
    return p;
}

/* ------------------------------------------------------------------------- */
/* Allocator hook                                                            */
/* ------------------------------------------------------------------------- */

/* Tables of a huge page or more (the advisor's per-id tables, the maps) come
 * from ml_huge_alloc; smaller ones from calloc. */
static void *libc_calloc(size_t n, size_t size) {
    if (!size || n > SIZE_MAX / size || n * size < HUGE_PAGE) return calloc(n, size);
    return ml_huge_alloc(n * size, true);
}

static void *libc_realloc(void *p, size_t size) {
    void *n = realloc(p, size);
    ml_advise_huge(n, size);
    return n;
}

ml_alloc_hooks_t ml__alloc = {libc_calloc, libc_realloc};

void ml_set_alloc_hooks(const ml_alloc_hooks_t *h) {
    ml__alloc.calloc = h && h->calloc ? h->calloc : libc_calloc;
    ml__alloc.realloc = h && h->realloc ? h->realloc : libc_realloc;
}

/* ------------------------------------------------------------------------- */
/* Arrays                                                                    */
/* ------------------------------------------------------------------------- */

int ml_grow(void **arr, uint32_t *cap, uint64_t need, size_t elem, int fill) {
    if (need <= *cap) return 0;
    if (need > UINT32_MAX) return -ENOMEM;
    uint64_t ncap = *cap ? (uint64_t)*cap * 2 : 64;
    while (ncap < need) ncap *= 2;
    if (ncap > UINT32_MAX) ncap = UINT32_MAX;
    void *n = ml__alloc.realloc(*arr, ncap * elem);
    if (!n) return -ENOMEM;
    memset((char *)n + (size_t)*cap * elem, fill, (size_t)(ncap - *cap) * elem);
    *arr = n;
    *cap = (uint32_t)ncap;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Formatting                                                                */
/* ------------------------------------------------------------------------- */

const char *ml_fmt_bytes(uint64_t b, char *buf, size_t len) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (b < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)b);
        return buf;
    }
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}
