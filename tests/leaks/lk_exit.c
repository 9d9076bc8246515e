/* Processes that end with _exit or _Exit run no destructor: the forked
 * child ends with _exit (as children that do not exec do, and dash always),
 * the parent with _Exit. Both keep one block and lose another: the child
 * drops its pointer, the parent holds its only copy in a callee-saved
 * register when it calls _Exit, which is not a root (valgrind checks at
 * the exit_group system call and reads no registers). (Blocks the
 * parent allocates before the fork would be in valgrind's child and not in
 * memlens': docs/analysis.md, "Forked children"; so it allocates after.)
 * expect: definite=64/1 indirect=0/0 possible=0/0 reachable=48/1
 * expect-child: definite=256/1 indirect=0/0 possible=0/0 reachable=96/1 */
#include "lk_common.h"
#include <sys/wait.h>
#include <unistd.h>
void *volatile keep;
static __attribute__((noinline)) void drop(size_t n) {
    void *volatile p = lk_alloc(n);
    p = NULL;
}
int main(void) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        keep = lk_alloc(96);
        drop(256);
        _exit(0);
    }
    keep = lk_alloc(48);
    register void *lost __asm__("r12") = lk_alloc(64);
    __asm__ volatile("" : "+r"(lost));
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 1;
    __asm__ volatile("" : "+r"(lost));
    _Exit(0);
}
