/* main ends with pthread_exit; the process lives on in its other thread,
 * whose exit ends it. The main thread's stack is no root any more (valgrind
 * does not scan the stack of a thread that ended): the block only main's
 * frame held is definite, and so is one whose pointer was left in a dead
 * frame 256 KiB below it, deeper than pthread_exit's own calls reach. Before, the scan read the process through its
 * main thread, which had no memory left to show, and failed: every block
 * was counted definite. The thread's TLS vector is compared by count;
 * reachable blocks are not compared (pthread_exit loads libgcc_s, whose
 * loader blocks valgrind frees at exit).
 * reachable: any
 * expect: definite=72/3 indirect=0/0 possible=0/0 */
#include "lk_common.h"
#include <pthread.h>
#include <unistd.h>
void *volatile kept, *volatile dropped;
static void *last(void *arg) {
    usleep(200000); /* until main has ended */
    kept = lk_alloc(64);
    dropped = lk_alloc(16);
    dropped = NULL;
    LK_CLEAR_REGISTERS();
    return arg;
}
static __attribute__((noinline)) void deep(void) {
    void *volatile slots[32768];
    slots[0] = lk_alloc(24); /* the lowest address of the frame */
    lk_use((void *)slots);
}
int main(void) {
    deep();
    pthread_t t;
    if (pthread_create(&t, NULL, last, NULL)) LK_FAIL();
    void *volatile local = lk_alloc(32);
    lk_use((void *)&local);
    pthread_exit(NULL);
}
