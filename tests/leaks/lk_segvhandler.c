/* A program with a crash handler of its own, which sets the default action
 * back and raises the signal again (as most do, after printing a backtrace):
 * it dies of SIGSEGV, and valgrind checks the leaks at that signal. memlens
 * hides its own handler: a program that asks sees the default action, one
 * that installs a handler replaces it, and one that sets the default action
 * back gets memlens' handler again, which makes the exit handshake. Were
 * memlens' handler visible, the program would hold one more block (1000
 * bytes reachable) than under valgrind.
 * expect: definite=56/1 indirect=0/0 possible=0/0 reachable=24/1 */
#include "lk_common.h"
#include <signal.h>
void *volatile held, *volatile seen;
static void on_segv(int sig) {
    signal(sig, SIG_DFL);
    raise(sig);
}
int main(void) {
    struct sigaction old;
    if (sigaction(SIGSEGV, NULL, &old) || old.sa_handler != SIG_DFL || old.sa_flags) seen = lk_alloc(1000);
    if (signal(SIGBUS, SIG_DFL) != SIG_DFL || signal(SIGBUS, SIG_DFL) != SIG_DFL) seen = lk_alloc(1000);
    held = lk_alloc(24);
    void *volatile lost = lk_alloc(56);
    lost = NULL;
    signal(SIGSEGV, on_segv);
    LK_CLEAR_REGISTERS();
    *(volatile int *)16 = 1;
    return 0;
}
