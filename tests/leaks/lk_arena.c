/* A stale pointer in glibc's malloc state. malloc's main arena (libc's
 * .data) keeps last_remainder, the chunk a split of a small request left
 * over, until the next such split, even once that chunk was merged and
 * handed out again. Here it ends up 192 bytes inside a 7,000-byte block
 * nothing of the program points to. valgrind replaces malloc, so no such
 * word exists for it: definite. memlens scanned libc's data whole and
 * called the block possibly lost; the arena is not a root now
 * (collector/exit_scan.c, main_arena_in).
 *   X = malloc(8000), a guard after it; free(X): X is free, whole.
 *   A = malloc(200), with the tcache for its size empty: split from X,
 *       last_remainder = X + 208, the rest.
 *   seven frees of that size fill its tcache; free(A) then reaches the
 *       arena and merges with the rest: X is free and whole again.
 *   B = malloc(7000): split from X, its chunk at X; last_remainder lies
 *       inside it. B is dropped.
 * expect: definite=7000/1 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
int main(void) {
    void *t[7];
    for (int i = 0; i < 7; i++) t[i] = lk_alloc(200);
    char *x = lk_alloc(8000);
    void *guard = lk_alloc(24);
    free(x);
    void *a = lk_alloc(200);
    for (int i = 0; i < 7; i++) free(t[i]);
    free(a);
    char *b = lk_alloc(7000);
    /* Not the layout this is about (valgrind's allocator has its own). */
    const char *pre = getenv("LD_PRELOAD");
    if (b != x && !(pre && strstr(pre, "vgpreload"))) LK_FAIL();
    lk_use(b);
    b = NULL;
    x = NULL;
    free(guard);
    return 0;
}
