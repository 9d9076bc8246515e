/* Pointers held only in thread-local storage: the main thread's, and that of
 * a thread blocked (alive) at exit. Both blocks are reachable. (The
 * thread's TLS vector, glibc's dtv, is compared by count only.)
 * expect: definite=0/0 indirect=0/0 possible=0/0 reachable=160/2 */
#include "lk_common.h"
#include <pthread.h>
#include <unistd.h>
static __thread void *volatile tp;
static int fds[2];
static void *run(void *arg) {
    (void)arg;
    tp = lk_alloc(88);
    char c;
    (void)!write(fds[1], "x", 1);
    for (;;) (void)!read(fds[0] + 100, &c, 1), pause();
    return NULL;
}
int main(void) {
    if (pipe(fds)) return 1;
    tp = lk_alloc(72);
    pthread_t t;
    if (pthread_create(&t, NULL, run, NULL)) return 1;
    char c;
    if (read(fds[0], &c, 1) != 1) return 1;
    return 0;
}
