/* A thread running at exit (spinning on a CPU, in no system call) whose
 * red zone, the 128 bytes below its stack pointer, holds the only copy of
 * a pointer: a local of a function it returned from. The x86-64 ABI makes
 * the red zone volatile across calls and returns, and valgrind marks it
 * undefined at each, so the copy is no root and the block is definite.
 * (LLVM's LeakSanitizer test use_registers_extra, built -O2, left such a
 * copy: a callee's saved register; memlens called the block reachable
 * whenever the exit caught its thread outside sched_yield.) The thread's
 * TLS vector is possible, as valgrind says; reachable blocks are not
 * compared (valgrind frees glibc's own at exit).
 * reachable: any
 * expect: definite=40/1 indirect=0/0 possible=0/0 */
#include "lk_common.h"
#include <pthread.h>
#include <unistd.h>
static volatile int stop, started;
static __attribute__((noinline)) void small_frame(void) {
    void *volatile slot[2];
    slot[0] = lk_alloc(40);
    slot[1] = NULL;
    lk_use((void *)slot);
}
static void *spin(void *arg) {
    small_frame();
    LK_CLEAR_REGISTERS();
    started = 1;
    while (!stop) lk_use((void *)&stop);
    return arg;
}
int main(void) {
    pthread_t s;
    if (pthread_create(&s, NULL, spin, NULL)) LK_FAIL();
    while (!started) usleep(1000);
    usleep(20000);
    LK_CLEAR_REGISTERS();
    return 0;
}
