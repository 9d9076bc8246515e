/* The forked child stores a block it allocates in a table its parent made
 * before the fork: the block is reachable through the child's copy of the
 * table (valgrind: still reachable). The child's trace starts at the fork,
 * so memlens keeps the parent's live blocks at the fork for the child's exit
 * scan (collector/inherit.c); before, the block was "definitely lost". The
 * table itself is the parent's allocation: valgrind counts it in the child
 * too, memlens in the parent only (compare_valgrind.py leaves what the
 * child inherited, allocated through lk_inherited, out of its numbers).
 * The child also stores a block in another inherited block, `box`, and then
 * frees box (a global still points to it): freed memory is no root, so that
 * block is lost, as is one the child drops.
 * expect: definite=0/0 indirect=0/0 possible=0/0 reachable=96/2
 * expect-child: definite=224/2 indirect=0/0 possible=0/0 reachable=256/1 */
#include "lk_common.h"
#include <sys/wait.h>
#include <unistd.h>
void **volatile table;
void **volatile box;
static __attribute__((noinline)) void *lk_inherited(size_t n) {
    return lk_alloc(n);
}
static __attribute__((noinline)) void drop(size_t n) {
    void *volatile p = lk_alloc(n);
    p = NULL;
}
int main(void) {
    table = lk_inherited(8 * sizeof(void *));
    box = lk_inherited(4 * sizeof(void *));
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        table[0] = lk_alloc(256);
        box[2] = lk_alloc(128); /* past glibc's free-list words */
        free(box);
        drop(96);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return 0;
}
