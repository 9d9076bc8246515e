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

/* malloc(size), the result kept in r12 only, then pause() forever. */
static void *in_r12(void *arg) {
    (void)arg;
    __asm__ volatile("mov %%rsp, %%rbx\n\t"
                     "and $-16, %%rsp\n\t"
                     "mov $1006, %%edi\n\t"
                     "call malloc@PLT\n\t"
                     "mov %%rbx, %%rsp\n\t"
                     "mov %%rax, %%r12\n\t"
                     "lock incl %[ready]\n\t"
                     "1:\n\t"
                     "xor %%eax, %%eax\n\t"
                     "xor %%ecx, %%ecx\n\t"
                     "xor %%edx, %%edx\n\t"
                     "xor %%esi, %%esi\n\t"
                     "xor %%edi, %%edi\n\t"
                     "xor %%r8d, %%r8d\n\t"
                     "xor %%r9d, %%r9d\n\t"
                     "xor %%r10d, %%r10d\n\t"
                     "xor %%r11d, %%r11d\n\t"
                     "mov $34, %%eax\n\t" /* pause */
                     "syscall\n\t"
                     "jmp 1b"
                     : [ready] "+m"(ready)
                     :
                     : "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "memory");
    return NULL;
}

/* The same in rbx, waiting in futex(FUTEX_WAIT) on a word that stays 0. */
static void *in_rbx(void *arg) {
    (void)arg;
    __asm__ volatile("mov %%rsp, %%r12\n\t"
                     "and $-16, %%rsp\n\t"
                     "mov $1006, %%edi\n\t"
                     "call malloc@PLT\n\t"
                     "mov %%r12, %%rsp\n\t"
                     "mov %%rax, %%rbx\n\t"
                     "xor %%r12d, %%r12d\n\t"
                     "lock incl %[ready]\n\t"
                     "1:\n\t"
                     "xor %%ecx, %%ecx\n\t"
                     "xor %%r8d, %%r8d\n\t"
                     "xor %%r9d, %%r9d\n\t"
                     "xor %%r10d, %%r10d\n\t"
                     "xor %%r11d, %%r11d\n\t"
                     "lea %[never], %%rdi\n\t"
                     "xor %%esi, %%esi\n\t" /* FUTEX_WAIT */
                     "xor %%edx, %%edx\n\t" /* while the word is 0 */
                     "mov $202, %%eax\n\t"
                     "syscall\n\t"
                     "jmp 1b"
                     : [ready] "+m"(ready)
                     : [never] "m"(never)
                     : "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "memory");
    return NULL;
}

/* The same in r13, waiting in poll() with no descriptor and no timeout. */
static void *in_r13_poll(void *arg) {
    (void)arg;
    __asm__ volatile("mov %%rsp, %%r12\n\t"
                     "and $-16, %%rsp\n\t"
                     "mov $1006, %%edi\n\t"
                     "call malloc@PLT\n\t"
                     "mov %%r12, %%rsp\n\t"
                     "mov %%rax, %%r13\n\t"
                     "xor %%r12d, %%r12d\n\t"
                     "lock incl %[ready]\n\t"
                     "1:\n\t"
                     "xor %%ecx, %%ecx\n\t"
                     "xor %%r8d, %%r8d\n\t"
                     "xor %%r9d, %%r9d\n\t"
                     "xor %%r10d, %%r10d\n\t"
                     "xor %%r11d, %%r11d\n\t"
                     "xor %%edi, %%edi\n\t" /* no fds */
                     "xor %%esi, %%esi\n\t" /* nfds 0 */
                     "mov $-1, %%rdx\n\t"   /* no timeout */
                     "mov $7, %%eax\n\t"    /* poll */
                     "syscall\n\t"
                     "jmp 1b"
                     : [ready] "+m"(ready)
                     :
                     : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "memory");
    return NULL;
}

/* The same in r14, waiting in select() with no descriptor and no timeout. */
static void *in_r14_select(void *arg) {
    (void)arg;
    __asm__ volatile("mov %%rsp, %%r12\n\t"
                     "and $-16, %%rsp\n\t"
                     "mov $1006, %%edi\n\t"
                     "call malloc@PLT\n\t"
                     "mov %%r12, %%rsp\n\t"
                     "mov %%rax, %%r14\n\t"
                     "xor %%r12d, %%r12d\n\t"
                     "lock incl %[ready]\n\t"
                     "1:\n\t"
                     "xor %%ecx, %%ecx\n\t"
                     "xor %%r9d, %%r9d\n\t"
                     "xor %%r11d, %%r11d\n\t"
                     "xor %%edi, %%edi\n\t" /* nfds 0 */
                     "xor %%esi, %%esi\n\t" /* no sets */
                     "xor %%edx, %%edx\n\t"
                     "xor %%r10d, %%r10d\n\t"
                     "xor %%r8d, %%r8d\n\t" /* no timeout */
                     "mov $23, %%eax\n\t"   /* select */
                     "syscall\n\t"
                     "jmp 1b"
                     : [ready] "+m"(ready)
                     :
                     : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r14", "memory");
    return NULL;
}

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
