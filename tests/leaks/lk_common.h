/* lk_common.h - helpers of the leak-kind programs (tests/leaks/README.md).
 * No stdio: its buffers would be heap blocks of libc's, which valgrind frees
 * at exit (--run-libc-freeres) and memlens sees live. */
#ifndef LK_COMMON_H
#define LK_COMMON_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Memory the compiler must assume is read: keeps stores and blocks alive. */
static inline void lk_use(void *p) {
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* Allocates and writes n bytes (so the block is really used), nothing else. */
static __attribute__((noinline, unused)) void *lk_alloc(size_t n) {
    void *p = malloc(n);
    if (!p) abort();
    memset(p, 0, n);
    lk_use(p);
    return p;
}
#endif
