/* A signal handler's alternate stack from malloc, whose pointer the program
 * then lost. The handler allocates, so memlens' recorder walks the stack
 * through the signal frame with libunwind, which notes the pages of the
 * alternate stack it checked in its own memory. libunwind is memlens', not
 * the program's: valgrind never sees it, and the exit scan must not take
 * those notes for pointers into the block ("possible" instead of
 * "definite" before libunwind's data was left out of the roots).
 * expect: definite=32768/1 indirect=0/0 possible=0/0 reachable=120/5 */
#include "lk_common.h"
void *volatile kept[5];
static volatile int nkept;
static void on_usr1(int sig) {
    (void)sig;
    kept[nkept] = lk_alloc(24);
    nkept++;
}
static __attribute__((noinline)) void install(void) {
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = lk_alloc(32768);
    ss.ss_size = 32768;
    if (sigaltstack(&ss, NULL) < 0) LK_FAIL();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    if (sigaction(SIGUSR1, &sa, NULL) < 0) LK_FAIL();
    memset(&ss, 0, sizeof ss);
    lk_use(&ss);
}
static __attribute__((noinline)) void scrub(void) {
    volatile char pad[4096];
    memset((char *)pad, 0, sizeof pad);
}
int main(void) {
    install();
    scrub();
    for (int i = 0; i < 5; i++) raise(SIGUSR1);
    if (nkept != 5) LK_FAIL();
    return 0;
}
