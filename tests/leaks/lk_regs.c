/* Blocks held only in another thread's registers at exit: one thread keeps
 * its pointer in r12 while it waits in pause(), one in rbx while it waits
 * in a futex, one in r13 in poll() and one in r14 in select() (the kernel
 * keeps these registers on its kernel stack, where no memory scan
 * reaches). valgrind takes every thread's registers for roots: the four
 * blocks are reachable. A block nothing points to is definite. Each
 * thread's TLS vector (glibc's dtv, reached through an interior pointer:
 * possible) is compared by count only.
 * expect: definite=40/1 indirect=0/0 possible=0/0 reachable=4024/4 */
#include "lk_common.h"
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
static volatile int ready;
static int never; /* the futex word: 0 forever */

/* A thread function that mallocs 1006 bytes, keeps the pointer in register
 * REG only (SCRATCH holds the stack pointer around the call, then is
 * cleared), says it is ready, then waits in a system call forever: ARGS
 * sets the call's number and arguments, the other argument registers are
 * cleared first. */
#define HOLD_AND_WAIT(name, REG, SCRATCH, ARGS)                                                    \
    static void *name(void *arg) {                                                                 \
        (void)arg;                                                                                 \
        __asm__ volatile("mov %%rsp, %%" SCRATCH "\n\t"                                            \
                         "and $-16, %%rsp\n\t"                                                     \
                         "mov $1006, %%edi\n\t"                                                    \
                         "call malloc@PLT\n\t"                                                     \
                         "mov %%" SCRATCH ", %%rsp\n\t"                                            \
                         "mov %%rax, %%" REG "\n\t"                                                \
                         "xor %%" SCRATCH ", %%" SCRATCH "\n\t"                                    \
                         "lock incl %[ready]\n\t"                                                  \
                         "1:\n\t"                                                                  \
                         "xor %%eax, %%eax\n\t"                                                    \
                         "xor %%ecx, %%ecx\n\t"                                                    \
                         "xor %%edx, %%edx\n\t"                                                    \
                         "xor %%esi, %%esi\n\t"                                                    \
                         "xor %%edi, %%edi\n\t"                                                    \
                         "xor %%r8d, %%r8d\n\t"                                                    \
                         "xor %%r9d, %%r9d\n\t"                                                    \
                         "xor %%r10d, %%r10d\n\t"                                                  \
                         "xor %%r11d, %%r11d\n\t" ARGS "syscall\n\t"                               \
                         "jmp 1b"                                                                  \
                         : [ready] "+m"(ready)                                                     \
                         : [never] "m"(never)                                                      \
                         : "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", \
                           "r13", "r14", "memory");                                                \
        return NULL;                                                                               \
    }

/* in r12, in pause() */
HOLD_AND_WAIT(in_r12, "r12", "rbx", "mov $34, %%eax\n\t")
/* in rbx, in futex(FUTEX_WAIT) on a word that stays 0 */
HOLD_AND_WAIT(in_rbx, "rbx", "r12", "lea %[never], %%rdi\n\tmov $202, %%eax\n\t")
/* in r13, in poll() with no descriptor and no timeout */
HOLD_AND_WAIT(in_r13_poll, "r13", "r12", "mov $-1, %%rdx\n\tmov $7, %%eax\n\t")
/* in r14, in select() with no descriptor and no timeout */
HOLD_AND_WAIT(in_r14_select, "r14", "r12", "mov $23, %%eax\n\t")

static __attribute__((noinline)) void drop(void) {
    void *volatile p = lk_alloc(40);
    p = NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, in_r12, NULL);
    pthread_create(&t, NULL, in_rbx, NULL);
    pthread_create(&t, NULL, in_r13_poll, NULL);
    pthread_create(&t, NULL, in_r14_select, NULL);
    while (ready < 4) usleep(1000);
    usleep(20000); /* all in their system calls */
    drop();
    LK_CLEAR_REGISTERS();
    return 0;
}
