/* quick_exit runs the at_quick_exit handlers and ends the process with
 * _exit inside libc, so no destructor runs and the _exit hook is not
 * reached: memlens' own handler, registered before the program's, runs
 * last. The program's handler drops a block first (definite); another
 * stays in a global (reachable).
 * expect: definite=64/1 indirect=0/0 possible=0/0 reachable=48/1 */
#include "lk_common.h"
void *volatile keep, *volatile gone;
static void handler(void) {
    lk_use((void *)gone);
    gone = NULL;
}
int main(void) {
    if (at_quick_exit(handler)) return 1;
    keep = lk_alloc(48);
    gone = lk_alloc(64);
    quick_exit(0);
}
