/* Blocks whose only pointers are in the callee-saved registers (rbx, rbp,
 * r12-r15) of the function that calls exit(). glibc's exit keeps them in
 * the registers or saves them in its own frames, which valgrind scans at
 * exit_group: reachable. memlens scans the stack from exit's caller up
 * and takes the caller's callee-saved registers, recovered by unwinding,
 * for roots; without them the six blocks were definite (an -O2 program
 * that calls exit() from a helper while main keeps a pointer in rbx).
 * exit_holding is written in assembly so that no copy of the pointers is
 * in memory. A block nothing points to is definite.
 * expect: definite=40/1 indirect=0/0 possible=0/0 reachable=621/6 */
#include "lk_common.h"
void exit_holding(void *const *p);
__asm__(".text\n"
        ".globl exit_holding\n"
        ".type exit_holding, @function\n"
        "exit_holding:\n"
        "    push %rbx\n"
        "    mov 0(%rdi), %rbx\n"
        "    mov 8(%rdi), %rbp\n"
        "    mov 16(%rdi), %r12\n"
        "    mov 24(%rdi), %r13\n"
        "    mov 32(%rdi), %r14\n"
        "    mov 40(%rdi), %r15\n"
        "    movq $0, 0(%rdi)\n"
        "    movq $0, 8(%rdi)\n"
        "    movq $0, 16(%rdi)\n"
        "    movq $0, 24(%rdi)\n"
        "    movq $0, 32(%rdi)\n"
        "    movq $0, 40(%rdi)\n"
        LK_CLEAR_SCRATCH_REGS
        "    call exit@PLT\n"
        ".size exit_holding, .-exit_holding\n");
int main(void) {
    static void *p[6];
    for (int i = 0; i < 6; i++) p[i] = lk_alloc(101 + (size_t)i);
    lk_use(lk_alloc(40));
    exit_holding(p);
    return 0;
}
