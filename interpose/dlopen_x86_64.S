/* dlopen_x86_64.S - the dlopen and dlmopen hooks, as tail jumps.
 *
 * glibc's dlopen and dlmopen resolve $ORIGIN, RUNPATH and the link
 * namespace from their caller's return address. A C wrapper would make
 * libmemlens the caller and break plugins found through the program's
 * RUNPATH. Each trampoline calls its enter function (which marks the module
 * list for re-checking and returns the real function; it gets the call's
 * arguments, whose registers the pushes leave as they were: the flags say
 * RTLD_DEEPBIND), restores the arguments and jumps: the
 * real function sees the program's own return address on the stack. Three
 * argument registers are kept (dlmopen has three; dlopen's third is not
 * used, and keeping it costs nothing); three pushes leave the stack 16-byte
 * aligned for the call.
 */
#include "asm_save.inc"

    .macro TRAMPOLINE name, enter
    .text
    .globl \name
    .type \name, @function
    .p2align 4
\name:
    .cfi_startproc
    SAVE rdi, rsi, rdx
    call \enter
    RESTORE rdx, rsi, rdi
    jmp *%rax
    .cfi_endproc
    .size \name, .-\name
    .endm

    TRAMPOLINE dlopen, ml__dlopen_enter
    TRAMPOLINE dlmopen, ml__dlmopen_enter

    .section .note.GNU-stack,"",@progbits
