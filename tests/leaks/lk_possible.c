/* A 200,000-byte block reached only through an interior pointer (possibly
 * lost), and a small one pointed to only by it (possible too: valgrind
 * propagates "possible" through possibly lost blocks).
 * expect: definite=0/0 indirect=0/0 possible=200040/2 reachable=0/0 */
#include "lk_common.h"
char *volatile inner;
int main(void) {
    char *big = lk_alloc(200000);
    void *small = lk_alloc(40);
    memcpy(big + 5000, &small, sizeof small);
    inner = big + 1000;
    big = NULL;
    small = NULL;
    return 0;
}
