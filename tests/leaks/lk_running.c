/* A thread still running at exit (spinning on a CPU), made after four
 * threads that ended and were joined. The running thread's stack counts
 * from its stack pointer up, as for a thread blocked in a system call: the
 * block it left only in a frame it returned from is definite (before,
 * running threads had no known stack pointer and their whole stack was
 * scanned: reachable). Its pointer is read with ptrace; with it every
 * thread's stack pointer is known, so the stacks the joined threads left
 * in glibc's cache are known as such and their TLS vectors are not lost
 * (tests/leaks/lk_joined.c). The running thread's own TLS vector is
 * possible, as valgrind says; reachable blocks are not compared (valgrind
 * frees the cached ones at exit).
 * reachable: any
 * expect: definite=56/1 indirect=0/0 possible=0/0 */
#include "lk_common.h"
#include <pthread.h>
#include <unistd.h>
static volatile int stop;
void *volatile held[4];
static void *work(void *arg) {
    held[(long)arg] = lk_alloc(24);
    return NULL;
}
static __attribute__((noinline)) void returned_from(void) {
    void *volatile slots[64];
    slots[0] = lk_alloc(56);
    lk_use((void *)slots);
}
static void *spin(void *arg) {
    returned_from();
    void *volatile keep = lk_alloc(120);
    while (!stop) lk_use((void *)&keep);
    return arg;
}
int main(void) {
    pthread_t t[4], s;
    for (long i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, work, (void *)i)) LK_FAIL();
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    if (pthread_create(&s, NULL, spin, NULL)) LK_FAIL();
    usleep(100000);
    LK_CLEAR_REGISTERS();
    return 0;
}
