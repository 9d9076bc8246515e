/* A block whose only pointer lies in memory the program took with sbrk
 * itself, in the brk heap beside glibc's main arena: valgrind scans it as
 * any client memory, so the block is reachable. A block nothing points to
 * is definite, and memory sbrk gave back holds nothing.
 * expect: definite=33/1 indirect=0/0 possible=0/0 reachable=1006/1 */
#include "lk_common.h"
#include <stdint.h>
#include <unistd.h>
void **volatile b;
int main(void) {
    free(lk_alloc(16)); /* glibc's arena first, then ours after it */
    b = sbrk(8192);
    if (b == (void *)-1) LK_FAIL();
    b[5] = lk_alloc(1006);
    void **top = (void **)((char *)b + 4096);
    top[7] = lk_alloc(33); /* in the half given back below */
    if (sbrk(-4096) == (void *)-1) LK_FAIL();
    LK_CLEAR_REGISTERS();
    return 0;
}
