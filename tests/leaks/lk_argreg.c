/* Blocks whose last pointer went into an allocation hook as an argument:
 * realloc shrinking a block in place (the pointer goes in and comes back
 * out), malloc_usable_size of a block, and posix_memalign, which writes
 * the pointer through its first argument (the program clears its own
 * copy there). Each function drops its block
 * and is optimised, so that the program keeps the pointer in registers
 * only; the thread then waits in a large frame it never writes, which
 * covers the stack those calls used. valgrind reads only written stack:
 * all three definite. memlens' hooks must leave no copy there that a
 * conservative scan would take for a root (docs/analysis.md, "memlens'
 * own hooks leave no copies"). The thread's TLS vector is compared by
 * count only.
 * expect: definite=184/3 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>
static volatile int ready;
static __attribute__((noinline, optimize("O2"))) void drop_shrunk(void) {
    void *p = malloc(400);
    if (!p) LK_FAIL();
    void *q = realloc(p, 40); /* glibc shrinks in place (valgrind's realloc moves) */
    if (!q) LK_FAIL();
    __asm__ volatile("" : : "r"(q) : "memory");
}
static __attribute__((noinline, optimize("O2"))) void drop_measured(void) {
    void *p = malloc(56);
    if (!p || malloc_usable_size(p) < 56) LK_FAIL();
    __asm__ volatile("" : : "r"(p) : "memory");
}
static __attribute__((noinline, optimize("O2"))) void drop_aligned(void) {
    void *slot = NULL;
    if (posix_memalign(&slot, 64, 88)) LK_FAIL();
    void *p = slot;
    *(void *volatile *)&slot = NULL; /* the program's own copy, in its frame */
    __asm__ volatile("" : : "r"(p) : "memory");
}
static __attribute__((noinline)) void wait_deep(void) {
    volatile char pad[8192]; /* allocated, never written */
    lk_use((void *)pad);
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    LK_CLEAR_REGISTERS();
    for (;;) pause();
}
static void *dropper(void *arg) {
    (void)arg;
    drop_shrunk();
    drop_measured();
    drop_aligned();
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
