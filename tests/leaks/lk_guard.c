/* A page of a live block made unreadable (mprotect PROT_NONE: a guard page
 * inside a buffer, as fence allocators and some runtimes make). The kernel
 * reads a block whole or not at all, so the scan saw none of the block's
 * pointers, and what its readable pages held counted as definitely lost.
 *   big      64 KiB, held by a global                        reachable
 *   before   100 bytes, pointed to from big's first page      reachable
 *   inside   200 bytes, pointed to only from the guard page   definite
 *            (neither tool reads a page it may not read)
 *   after    300 bytes, pointed to from a page past the guard reachable
 * expect: definite=200/1 indirect=0/0 possible=0/0 reachable=65936/3 */
#include <sys/mman.h>
#include "lk_common.h"

void *volatile root;

static __attribute__((noinline)) void setup(void) {
    char *big = lk_alloc(64 * 1024);
    char *guard = (char *)(((uintptr_t)big + 2 * 4096 - 1) & ~(uintptr_t)4095);
    void *before = lk_alloc(100), *inside = lk_alloc(200), *after = lk_alloc(300);
    memcpy(big, &before, sizeof before);
    memcpy(guard, &inside, sizeof inside);
    memcpy(guard + 2 * 4096, &after, sizeof after);
    if (mprotect(guard, 4096, PROT_NONE) != 0) LK_FAIL();
    root = big;
}

int main(void) {
    setup();
    LK_CLEAR_REGISTERS();
    return 0;
}
