/* A binary tree of depth 3 whose root is dropped: the root is definite,
 * its six descendants indirect.
 * expect: definite=100/1 indirect=300/6 possible=0/0 reachable=0/0 */
#include "lk_common.h"
static __attribute__((noinline)) void **node(size_t n, int depth) {
    void **b = lk_alloc(n);
    if (depth > 1) {
        b[0] = node(50, depth - 1);
        b[1] = node(50, depth - 1);
    }
    return b;
}
void **volatile root;
int main(void) {
    root = node(100, 3);
    root = NULL;
    return 0;
}
