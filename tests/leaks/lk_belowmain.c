/* A pointer written below main's frame (its red zone) right before main
 * returns; exit's frames later lie over that slot.
 * expect: definite=160/1 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
int main(void) {
    void *p = lk_alloc(160);
    __asm__ volatile("movq %0, -64(%%rsp)\n\tmovq %0, -120(%%rsp)" : : "r"(p) : "memory");
    p = NULL;
    return 0;
}
