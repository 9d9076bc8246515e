/* Threads that ended and were joined, then abort(). glibc keeps the
 * threads' stacks for threads to come, each with its descriptor at the
 * top, which reaches the thread's TLS vector (dtv, a block of ld.so's) 16
 * bytes into it. At a normal exit valgrind frees that cache first
 * (__libc_freeres), and memlens calls the vectors reachable (lk_joined);
 * a program killed by a signal runs no freeres, the cache is still there,
 * and valgrind reads each ended thread's static TLS and descriptor: the
 * vectors are possibly lost, and what a __thread variable held is
 * reachable. memlens called the vectors reachable and the TLS blocks
 * definite. Each thread frees its argument, a 24-byte block, whose address
 * the descriptor keeps (`arg`); glibc's malloc gives it to main's next
 * 24-byte block, which main drops: definite, as under valgrind, whose
 * allocator does not reuse an address so soon.
 * expect: definite=64/2 indirect=0/0 possible=0/0 reachable=320/8 */
#include "lk_common.h"
#include <pthread.h>
void *volatile keep[4], *volatile dropped;
static __thread void *volatile tls_keep;
static void *work(void *arg) {
    keep[*(long *)arg] = lk_alloc(24);
    tls_keep = lk_alloc(56);
    free(arg);
    return NULL;
}
/* The argument is made here, so that no copy of it stays in main's frame
 * (main's next 24-byte block may take its address). */
static __attribute__((noinline)) void start(pthread_t *t, long i) {
    long *arg = lk_alloc(24);
    *arg = i;
    if (pthread_create(t, NULL, work, arg)) LK_FAIL();
}
static __attribute__((noinline)) void scrub(void) {
    volatile char pad[4096];
    memset((char *)pad, 0, sizeof pad);
}
int main(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++) start(&t[i], i);
    scrub();
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    dropped = lk_alloc(40);
    dropped = lk_alloc(24);
    dropped = NULL;
    LK_CLEAR_REGISTERS();
    abort();
}
