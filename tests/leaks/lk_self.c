/* A block that points only to itself.
 * expect: definite=64/1 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
void *volatile p;
int main(void) {
    void **b = lk_alloc(64);
    b[0] = b;
    b[3] = (char *)b + 8;
    lk_use(b);
    b = NULL;
    return 0;
}
