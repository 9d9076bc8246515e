/* A leaked block whose only copy was in a register that memlens' unwinder
 * saw: code built without frame pointers keeps anything in rbp, and the
 * unwinder keeps each frame's rbp in libmemlens.so's own memory, which the
 * exit scan must not take for a root (valgrind never sees it). `outer` holds
 * its block in rbp while `inner`'s allocation is recorded through its
 * frame, then drops it.
 * expect: definite=100/1 indirect=0/0 possible=0/0 reachable=8/1 */
#include "lk_common.h"
void *volatile keep;
static __attribute__((noinline)) void *inner(void) {
    return lk_alloc(8);
}
static __attribute__((noinline, optimize("omit-frame-pointer"))) void outer(void) {
    register void *p __asm__("rbp") = lk_alloc(100);
    __asm__ volatile("" : "+r"(p));
    keep = inner();
    __asm__ volatile("" : "+r"(p));
    p = 0;
    __asm__ volatile("" : "+r"(p));
}
int main(void) {
    outer();
    return 0;
}
