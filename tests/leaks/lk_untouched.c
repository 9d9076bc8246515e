/* Big blocks the program never touches, or touches on one page: the scan
 * reads only pages in memory or swap (reading the others would make the
 * kernel back them with memory: a program exiting with 128 GiB of untouched
 * blocks grew by 430 MB/s while the scan read it). A pointer on the one
 * touched page of a big block must still be found.
 *   held[0]  16 MiB, untouched, held by a global     reachable
 *   held[1]  16 MiB, a pointer to a 4 KiB block at 8 MiB in: both reachable
 *   dropped  16 MiB, a pointer to a 100-byte block at 12 MiB in: definite,
 *            and the small block indirect
 *   an 8 MiB block, untouched, dropped                definite
 * (Under valgrind a dropped block of 32 MiB or more is "possibly lost":
 * some value among its roots falls inside so wide a range.)
 * expect: definite=25165824/2 indirect=100/1 possible=0/0 reachable=33558528/3
 * expect-read: heap<=1048576 */
#include "lk_common.h"

void *volatile held[2];

static __attribute__((noinline)) void *untouched(size_t n) {
    void *p = malloc(n);
    if (!p) LK_FAIL();
    lk_use(p);
    return p;
}

/* Stores a new block's address `at` bytes into the big block `big`. */
static __attribute__((noinline)) void put(char *big, size_t at, size_t n) {
    void *p = lk_alloc(n);
    memcpy(big + at, &p, sizeof p);
}

static __attribute__((noinline)) void setup(void) {
    held[0] = untouched((size_t)16 << 20);
    char *a = untouched((size_t)16 << 20);
    put(a, (size_t)8 << 20, 4096);
    held[1] = a;
    put(untouched((size_t)16 << 20), (size_t)12 << 20, 100);
    lk_use(untouched((size_t)8 << 20));
}

int main(void) {
    setup();
    LK_CLEAR_REGISTERS();
    return 0;
}
