/* p = malloc(1024); p = NULL;
 * expect: definite=1024/1 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
void *volatile p;
int main(void) {
    p = lk_alloc(1024);
    p = NULL;
    return 0;
}
