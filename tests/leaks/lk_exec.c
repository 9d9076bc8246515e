/* The process replaces itself by exec after losing one block and keeping
 * another: exec hands the whole image back to the system, so neither is a
 * leak. valgrind writes no leak summary for an image that exec'd (only for
 * the program that ran after it); memlens counts the two blocks live "when
 * the image was replaced by exec", with no leak kind (JSON leaks.judged
 * false). The program after the exec is /bin/true, which allocates nothing
 * and is the "child" trace here.
 * expect-exec: live=112/2
 * expect-child: definite=0/0 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
#include <unistd.h>
void *volatile keep;
static __attribute__((noinline)) void drop(size_t n) {
    void *volatile p = lk_alloc(n);
    p = NULL;
}
int main(void) {
    drop(64);
    keep = lk_alloc(48);
    char *args[] = {"/bin/true", NULL};
    execv(args[0], args);
    return 126;
}
