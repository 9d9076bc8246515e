/* The only reference is XOR-hidden: no scanner can see it.
 * expect: definite=48/1 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
volatile uintptr_t hidden;
int main(void) {
    hidden = (uintptr_t)lk_alloc(48) ^ 0x5a5a5a5a5a5a5a5aull;
    return 0;
}
