/* Two threads that ended and were joined, and two that ended and were
 * never joined. glibc keeps all four stacks, each with its descriptor at
 * the top pointing 16 bytes into the thread's TLS vector (dtv): the joined
 * threads' stacks in its cache, which valgrind's default run frees at exit
 * (__libc_freeres), the unjoined ones on its list of stacks in use, which
 * it leaves: valgrind calls their two vectors possibly lost, through the
 * interior pointer (the classic "272 bytes possibly lost ... pthread_create"
 * of a program that forgot a join). memlens tells the lists apart
 * (collector/glibc_stacks.c). The threads' blocks are held in a global;
 * main drops one. Reachable blocks are not compared: the cached threads'
 * vectors are reachable here and freed under valgrind.
 * reachable: any
 * expect: definite=40/1 indirect=0/0 possible=0/0 */
#include "lk_common.h"
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
void *volatile keep[4], *volatile dropped;
static volatile long tids[4];
static void *work(void *arg) {
    keep[(long)arg] = lk_alloc(24);
    tids[(long)arg] = syscall(SYS_gettid);
    return NULL;
}
/* Until the kernel has ended thread `tid` (its /proc entry is gone). */
static void wait_gone(long tid) {
    char path[32] = "/proc/self/task/", digits[20];
    int n = 0, at = 16;
    do digits[n++] = (char)('0' + tid % 10);
    while ((tid /= 10) && n < 20);
    while (n) path[at++] = digits[--n];
    path[at] = '\0';
    while (access(path, F_OK) == 0) usleep(1000);
}
int main(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, work, (void *)i)) LK_FAIL();
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 2; i < 4; i++) {
        while (!tids[i]) usleep(1000);
        wait_gone(tids[i]);
    }
    dropped = lk_alloc(40);
    dropped = NULL;
    LK_CLEAR_REGISTERS();
    return 0;
}
