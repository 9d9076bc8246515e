/* syscall_x86_64.S - syscall(), for libunwind's address check.
 *
 * libunwind checks that an address is readable with syscall(SYS_write,
 * pipe, address, 1). When the program has no descriptor left for that pipe
 * the descriptor is -1 (stacks.c, pipe2), and such a write from libunwind's
 * code goes to ml__unw_check, which does the check without a descriptor.
 * A fork, or a clone with fork semantics and no stack of its own, goes to
 * ml__raw_fork (runtime.c), which runs the recorder's fork handlers around
 * it. Every other call goes on to glibc's syscall() with its registers and
 * stack untouched, by a jump: a raw vfork, or a clone with a stack or
 * sharing our memory, still returns into no frame of ours. Until ml__stacks_init has looked glibc's
 * up, the call is made here, as glibc's own syscall.S makes it. A seccomp
 * call is noted on its way (runtime.c: memlens then makes no system call
 * at exit that a filter may forbid).
 */
#include "asm_save.inc"

    .text
    .globl syscall
    .type syscall, @function
    .p2align 4
syscall:
    .cfi_startproc
    cmpq $317, %rdi               /* SYS_seccomp: noted (runtime.c, ml__seccomp_mode) */
    jne 1f
    movl $2, ml__seccomp_mode(%rip)
    jmp 2f
1:
    cmpq $57, %rdi                /* SYS_fork */
    je 5f
    cmpq $56, %rdi                /* SYS_clone */
    je 5f
    cmpq $435, %rdi               /* SYS_clone3 */
    je 5f
    cmpq $1, %rdi                 /* SYS_write */
    jne 2f
    testl %esi, %esi              /* the descriptor (an int) is negative */
    jns 2f
    movq (%rsp), %rax             /* called from libunwind's code */
    cmpq ml__unw_lo(%rip), %rax
    jb 2f
    cmpq ml__unw_hi(%rip), %rax
    jae 2f
    movq %rdx, %rdi               /* ml__unw_check(address, length) */
    movq %rcx, %rsi
    jmp ml__unw_check
5:
    /* A fork by another name? ml__raw_forklike(number, arg1, arg2) says
     * (runtime.c); the arguments are kept around the call, and the stack is
     * as it came when the call is made or handed on. */
    SAVE rdi, rsi, rdx, rcx, r8, r9
    subq $8, %rsp                 /* 16-byte alignment at the call */
    .cfi_adjust_cfa_offset 8
    call ml__raw_forklike
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    RESTORE r9, r8, rcx, rdx, rsi, rdi
    testl %eax, %eax
    jz 2f
    /* ml__raw_fork(number, arg1..arg5) takes syscall()'s registers as
     * they are: a fork to the recorder (runtime.c) */
    jmp ml__raw_fork
2:
    movq ml__real_syscall(%rip), %rax
    testq %rax, %rax
    jz 3f
    jmp *%rax
3:
    movq %rdi, %rax               /* the number, then up to six arguments */
    movq %rsi, %rdi
    movq %rdx, %rsi
    movq %rcx, %rdx
    movq %r8, %r10
    movq %r9, %r8
    movq 8(%rsp), %r9
    syscall
    cmpq $-4095, %rax
    jae 4f
    ret
4:
    negl %eax                     /* errno = -rax, return -1 */
    pushq %rax
    .cfi_adjust_cfa_offset 8
    call __errno_location@PLT
    popq %rcx
    .cfi_adjust_cfa_offset -8
    movl %ecx, (%rax)
    movq $-1, %rax
    ret
    .cfi_endproc
    .size syscall, .-syscall

    .section .note.GNU-stack,"",@progbits
