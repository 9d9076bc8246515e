/* Threads alive at exit: one blocked with a pointer in a local, one spinning
 * on a CPU with a pointer in a local, and one that dropped its block before
 * blocking (definite). Each thread's TLS vector (glibc's dtv, reached
 * through an interior pointer: possible) is compared by count only.
 * expect: definite=56/1 indirect=0/0 possible=0/0 reachable=232/2 */
#include "lk_common.h"
#include <pthread.h>
#include <unistd.h>
static volatile int ready;
static __attribute__((noinline)) void *blocked(void *arg) {
    (void)arg;
    void *volatile keep = lk_alloc(112);
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    for (;;) pause();
    lk_use((void *)&keep);
    return NULL;
}
static __attribute__((noinline)) void *spinning(void *arg) {
    (void)arg;
    void *volatile keep = lk_alloc(120);
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    for (;;) lk_use((void *)&keep);
    return NULL;
}
static __attribute__((noinline)) void drop(void) {
    void *volatile p = lk_alloc(56);
    p = NULL;
}
static __attribute__((noinline)) void *dropper(void *arg) {
    (void)arg;
    drop();
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    /* Registers are roots (valgrind reads them): none may still hold the
     * pointer memset and lk_alloc returned. */
    LK_CLEAR_REGISTERS();
    for (;;) pause();
    return NULL;
}
int main(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, blocked, NULL) || pthread_create(&t, NULL, spinning, NULL) ||
        pthread_create(&t, NULL, dropper, NULL))
        return 1;
    while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < 3) usleep(1000);
    usleep(20000);
    return 0;
}
