/* dlopen_x86_64.S - the dlopen and dlmopen hooks, as tail jumps.
 *
 * glibc's dlopen resolves $ORIGIN, RUNPATH and the link namespace from its
 * caller's return address. A C wrapper would make libmemlens the caller and
 * break plugins found through the program's RUNPATH. This trampoline calls
 * ml__dlopen_enter (which marks the module list for re-checking and returns
 * the real dlopen), restores the arguments and jumps: the real dlopen sees
 * the program's own return address on the stack.
 */
    .text
    .globl dlopen
    .type dlopen, @function
    .p2align 4
dlopen:
    .cfi_startproc
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call ml__dlopen_enter
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    jmp *%rax
    .cfi_endproc
    .size dlopen, .-dlopen

/* dlmopen(lmid, file, mode): the same, with three arguments to keep.
 * ml__dlmopen_enter gets lmid (still in rdi) and returns the real dlmopen.
 * Three pushes leave the stack 16-byte aligned for the call. */
    .globl dlmopen
    .type dlmopen, @function
    .p2align 4
dlmopen:
    .cfi_startproc
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    pushq %rdx
    .cfi_adjust_cfa_offset 8
    call ml__dlmopen_enter
    popq %rdx
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    jmp *%rax
    .cfi_endproc
    .size dlmopen, .-dlmopen

    .section .note.GNU-stack,"",@progbits
