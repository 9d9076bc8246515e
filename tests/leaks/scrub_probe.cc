// scrub_probe.cc - counts the copies of a just-returned heap pointer that an
// allocation leaves in dead stack memory (issue 13, item 1).
//
// For each allocation function it zeroes 96 KiB of stack below its own
// frame, calls a helper that allocates (the helper's frame, the allocator's
// and, under memlens, libmemlens' hooks all run in that zeroed region), and
// after the helper returned counts the 8-byte words below its stack pointer
// that equal the returned pointer. Run without memlens it measures what the
// C library itself leaves; under memlens the count must not be higher.
//
// Output: one line per function, "NAME copies=N".
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unistd.h>

#define SCRUB_SPAN (96 * 1024)

static uintptr_t sink;

// Zeroes SCRUB_SPAN bytes below the caller's frame (and touches them, so the
// scan below never reads unmapped stack).
static __attribute__((noinline)) void clear_below(void) {
    volatile char buf[SCRUB_SPAN];
    for (size_t i = 0; i < sizeof buf; i += 1) buf[i] = 0;
    __asm__ volatile("" : : "r"(buf) : "memory");
}

enum kind { K_MALLOC, K_CALLOC, K_REALLOC, K_NEW };

// The program's allocating function: its frame is dead once it returns.
static __attribute__((noinline)) void *helper(int k, void *old) {
    void *p = nullptr;
    switch (k) {
    case K_MALLOC: p = malloc(200); break;
    case K_CALLOC: p = calloc(5, 40); break;
    case K_REALLOC: p = realloc(old, 100000); break; /* moves: a new block */
    case K_NEW: p = ::operator new(200); break;
    }
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

// Counts the words equal to v in [sp - SCRUB_SPAN + 512, sp) without calling
// anything (a call would write into the region it reads).
static __attribute__((noinline)) unsigned probe(int k, void *old, uintptr_t *out) {
    clear_below();
    uintptr_t v = (uintptr_t)helper(k, old);
    uintptr_t sp;
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
    unsigned n = 0;
    for (uintptr_t a = sp - SCRUB_SPAN + 512; a < sp; a += 8)
        if (*(volatile uintptr_t *)a == v) n++;
    *out = v;
    return n;
}

static void say(const char *name, unsigned n) {
    char line[64];
    size_t len = 0;
    for (const char *s = name; *s; s++) line[len++] = *s;
    const char *t = " copies=";
    for (const char *s = t; *s; s++) line[len++] = *s;
    char num[16];
    int d = 0;
    do {
        num[d++] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    while (d) line[len++] = num[--d];
    line[len++] = '\n';
    ssize_t rc = write(1, line, len);
    (void)rc;
}

int main() {
    uintptr_t v;
    // Warm up every path once (first calls run the dynamic linker and, under
    // memlens, set up the thread's state), so that the counts are steady.
    for (int k = K_MALLOC; k <= K_NEW; k++) {
        void *old = k == K_REALLOC ? malloc(16) : nullptr;
        probe(k, old, &v);
        if (k == K_NEW) ::operator delete((void *)v);
        else free((void *)v);
    }
    static const char *const names[] = {"malloc", "calloc", "realloc", "new"};
    for (int k = K_MALLOC; k <= K_NEW; k++) {
        void *old = k == K_REALLOC ? malloc(16) : nullptr;
        unsigned n = probe(k, old, &v);
        sink ^= v;
        say(names[k], n);
        if (k == K_NEW) ::operator delete((void *)v);
        else free((void *)v);
    }
    return 0;
}
