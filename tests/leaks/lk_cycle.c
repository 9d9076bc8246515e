/* A cycle of three dropped blocks: one definite (the clique's leader), two
 * indirect; and a reachable cycle of two.
 * expect: definite=40/1 indirect=80/2 possible=0/0 reachable=112/2 */
#include "lk_common.h"
void **volatile root;
int main(void) {
    void **a = lk_alloc(40), **b = lk_alloc(40), **c = lk_alloc(40);
    a[0] = b;
    b[0] = c;
    c[0] = a;
    lk_use(a);
    a = b = c = NULL;
    void **x = lk_alloc(56), **y = lk_alloc(56);
    x[0] = y;
    y[0] = x;
    root = x;
    x = y = NULL;
    return 0;
}
