/* A block whose only pointer is in a callee-saved register (r12) of the
 * function that calls abort(). valgrind reads the thread's registers at
 * the signal, or the slots of abort's frames that saved them: reachable.
 * memlens scans the stack from abort's caller up (interpose/runtime.c,
 * crash_handler) and takes the caller's callee-saved registers, recovered
 * by unwinding, for roots (ml_ring_hdr_t.exit_regs); without them the
 * block was definite. die_holding is written in assembly so that no copy
 * of the pointer is in memory.
 * expect: definite=0/0 indirect=0/0 possible=0/0 reachable=88/1 */
#include "lk_common.h"
void die_holding(void *p);
__asm__(".text\n"
        ".globl die_holding\n"
        ".type die_holding, @function\n"
        "die_holding:\n"
        "    push %r12\n"
        "    mov %rdi, %r12\n"
        LK_CLEAR_SCRATCH_REGS
        "    call abort@PLT\n"
        ".size die_holding, .-die_holding\n");
int main(void) {
    die_holding(lk_alloc(88));
    return 0;
}
