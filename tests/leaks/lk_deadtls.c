/* Blocks held only by thread-local variables of threads that ended and
 * were joined: a __thread variable of the program (static TLS, at the top
 * of the thread's stack) and one of a dlopen'd library (dynamic TLS, a
 * block glibc malloc'd for the thread). glibc keeps such a stack in its
 * cache for threads to come; valgrind's default run frees the cache at exit
 * (__libc_freeres) and LeakSanitizer scans live threads only: both call
 * the blocks definitely lost. Two worker threads, 2222 and 1337 bytes each;
 * the main thread's own copies (100 and 200 bytes) stay reachable.
 * Reachable blocks are not compared: glibc's own (the cached threads' TLS
 * vectors and dynamic TLS blocks, the library's link map) are reachable
 * here and freed under valgrind.
 * reachable: any
 * expect: definite=7118/4 indirect=0/0 possible=0/0 */
#include "lk_common.h"
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
static __thread void *mine;
static void (*set_lib_tls)(void *);
static void *work(void *arg) {
    (void)arg;
    mine = lk_alloc(2222);
    set_lib_tls(lk_alloc(1337));
    LK_CLEAR_REGISTERS();
    return NULL;
}
int main(void) {
    void *volatile h = lk_dlopen_lib();
    if (!(set_lib_tls = (void (*)(void *))dlsym(h, "lk_dlopen_lib_tls_set"))) LK_FAIL();
    mine = lk_alloc(100);
    set_lib_tls(lk_alloc(200));
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, work, (void *)i)) LK_FAIL();
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    LK_CLEAR_REGISTERS();
    return 0;
}
