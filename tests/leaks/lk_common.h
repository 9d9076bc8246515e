/* lk_common.h - helpers of the leak-kind programs (tests/leaks/README.md).
 * No stdio: its buffers would be heap blocks of libc's, which valgrind frees
 * at exit (--run-libc-freeres) and memlens sees live. */
#ifndef LK_COMMON_H
#define LK_COMMON_H
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A program that cannot set its situation up ends by SIGKILL: no tool scans
 * it, so the comparison fails ("not scanned"). abort() would not do: memlens,
 * like valgrind, scans a program that dies of SIGABRT. */
#define LK_FAIL() kill(getpid(), SIGKILL)

/* Assembly that zeroes the argument and scratch registers before a call,
 * so that the only copy of a pointer is where the program put it (a
 * callee-saved register: lk_abortreg, lk_exitreg). */
#define LK_CLEAR_SCRATCH_REGS                                                                      \
    "    xor %edi, %edi\n"                                                                         \
    "    xor %eax, %eax\n"                                                                         \
    "    xor %ecx, %ecx\n"                                                                         \
    "    xor %edx, %edx\n"                                                                         \
    "    xor %esi, %esi\n"                                                                         \
    "    xor %r8d, %r8d\n"                                                                         \
    "    xor %r9d, %r9d\n"                                                                         \
    "    xor %r10d, %r10d\n"                                                                       \
    "    xor %r11d, %r11d\n"

/* Memory the compiler must assume is read: keeps stores and blocks alive. */
static inline void lk_use(void *p) {
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* Allocates and writes n bytes (so the block is really used), nothing else. */
static __attribute__((noinline, unused)) void *lk_alloc(size_t n) {
    void *p = malloc(n);
    if (!p) LK_FAIL();
    memset(p, 0, n);
    lk_use(p);
    return p;
}
/* dlopen of liblk_dlopen_lib.so, beside the program (lk_dlopen, lk_deadtls). */
static __attribute__((noinline, unused)) void *lk_dlopen_lib(void) {
    static char path[4096 + 32];
    ssize_t n = readlink("/proc/self/exe", path, 4096);
    if (n <= 0) LK_FAIL();
    while (n > 0 && path[n - 1] != '/') n--;
    memcpy(path + n, "liblk_dlopen_lib.so", sizeof "liblk_dlopen_lib.so");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) LK_FAIL();
    return h;
}

/* Clears the caller-saved registers: valgrind reads the registers of a
 * thread still alive at exit as roots (not those of the thread that ends
 * the process), and none may still hold a pointer a test drops. */
#define LK_CLEAR_REGISTERS()                                                                       \
    __asm__ volatile("xor %%eax, %%eax\n\txor %%edi, %%edi\n\txor %%esi, %%esi\n\t"            \
                     "xor %%edx, %%edx\n\txor %%ecx, %%ecx\n\txor %%r8d, %%r8d\n\t"            \
                     "xor %%r9d, %%r9d\n\txor %%r10d, %%r10d\n\txor %%r11d, %%r11d"             \
                     :                                                                             \
                     :                                                                             \
                     : "rax", "rdi", "rsi", "rdx", "rcx", "r8", "r9", "r10", "r11", "memory")

/* The heap of the programs that die by a signal (lk_abort, lk_sigterm): a
 * 32-byte block held by a global (reachable), and a dropped 48-byte node
 * (definite) whose 16-byte child only it points to (indirect). Ends with
 * the registers cleared, just before the program's end. */
struct lk_node {
    struct lk_node *next;
    char pad[40];
};
static void *volatile lk_held;
#define LK_PAIR_AND_KEEP()                                                                             do {                                                                                                   lk_held = lk_alloc(32);                                                                            struct lk_node *n_ = lk_alloc(sizeof *n_);                                                         n_->next = lk_alloc(16);                                                                           n_ = NULL;                                                                                         lk_use(n_);                                                                                        LK_CLEAR_REGISTERS();                                                                          } while (0)
#endif
