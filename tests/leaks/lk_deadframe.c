/* A pointer left in a dead stack frame: the function that held it returned.
 * One frame lies right below main's, where exit's own calls write over it
 * later; the other 32 KiB below, where nothing writes after it returned: it
 * is leaked only because the scan starts at the stack pointer (exit_scan.c,
 * consider), as valgrind's does.
 * expect: definite=160/2 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
static __attribute__((noinline)) void drop(size_t n) {
    void *volatile local[4];
    local[1] = lk_alloc(n);
    lk_use((void *)local);
}
/* Calls drop() under 32 KiB of stack of its own. */
static __attribute__((noinline)) void deep(void) {
    volatile char pad[32768];
    pad[0] = 0;
    pad[sizeof pad - 1] = 0;
    drop(64);
    lk_use((void *)pad);
}
int main(void) {
    drop(96);
    deep();
    return 0;
}
