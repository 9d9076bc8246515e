/* Threads that ended and were joined. glibc keeps their stacks for threads
 * to come, each with its descriptor at the top, which reaches the thread's
 * TLS vector (dtv, a block of ld.so's) 16 bytes into it. valgrind's default
 * run frees that cache at exit (__libc_freeres) and LeakSanitizer takes the
 * interior pointer: neither reports a leak. The threads' blocks are held in
 * a global; main drops one. Reachable blocks are not compared: the cached
 * threads' TLS vectors are reachable here and freed under valgrind.
 * reachable: any
 * expect: definite=40/1 indirect=0/0 possible=0/0 */
#include "lk_common.h"
#include <pthread.h>
void *volatile keep[4], *volatile dropped;
static void *work(void *arg) {
    keep[(long)arg] = lk_alloc(24);
    return NULL;
}
int main(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, work, (void *)i)) LK_FAIL();
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    dropped = lk_alloc(40);
    dropped = NULL;
    LK_CLEAR_REGISTERS();
    return 0;
}
