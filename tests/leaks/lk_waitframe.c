/* A thread drops a block, then waits inside a function whose large frame it
 * never writes: that live frame covers the stack where the allocation ran,
 * so whatever the allocator (and memlens' hooks) left there lies inside a
 * live frame, above the waiting thread's stack pointer. valgrind reads only
 * written stack and says definite; memlens' hooks must leave no copy of the
 * pointer there (issue 13, item 1). drop() is optimised so that the
 * program itself keeps the pointer in registers only.
 * expect: definite=72/1 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
#include <pthread.h>
#include <unistd.h>
static volatile int ready;
static __attribute__((noinline, optimize("O2"))) void drop(void) {
    void *p = malloc(72);
    if (!p) LK_FAIL();
    __asm__ volatile("" : : "r"(p) : "memory"); /* lk_use would spill it at -O0 */
}
static __attribute__((noinline)) void wait_deep(void) {
    volatile char pad[8192]; /* allocated, never written */
    lk_use((void *)pad);
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    /* Registers are roots (valgrind reads them): none may hold the pointer. */
    LK_CLEAR_REGISTERS();
    for (;;) pause();
}
static void *dropper(void *arg) {
    (void)arg;
    drop();
    wait_deep();
    return NULL;
}
int main(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, dropper, NULL)) return 1;
    while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < 1) usleep(1000);
    usleep(20000);
    return 0;
}
