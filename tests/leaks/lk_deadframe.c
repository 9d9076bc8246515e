/* A pointer left in a dead stack frame: the function that held it returned.
 * expect: definite=96/1 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
static __attribute__((noinline)) void drop(void) {
    void *volatile local[4];
    local[1] = lk_alloc(96);
    lk_use((void *)local);
}
int main(void) {
    drop();
    return 0;
}
