/* The only pointer to the block is stored at an unaligned address (scanners
 * read aligned words only).
 * expect: definite=128/1 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
_Alignas(16) unsigned char g[32];
int main(void) {
    void *p = lk_alloc(128);
    memcpy(g + 3, &p, sizeof p);
    p = NULL;
    lk_use(g);
    return 0;
}
