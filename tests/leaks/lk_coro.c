/* Coroutines on stacks the program mallocs (makecontext/swapcontext), each
 * allocating and swapping back five times: per coroutine i, blocks of
 * 100(i+1)+k bytes for k = 0..4, of which k = 1 and 3 are freed, k = 4
 * kept in a global, k = 0 and 2 lost. The coroutine stacks stay reachable
 * (globals point at them), so their dead frames are scanned as blocks; a
 * copy memlens' hooks left there would keep a lost block reachable. The
 * build before the hooks' 2 KiB arrays left the stack (5f38c3c) called
 * the 102-byte block reachable: 1,104 B in 5 definite, where valgrind says
 * 1,206 B in 6. Linked with -z now (leaks_tests.cmake): lazy binding's
 * saved registers are a copy of the loader's, not of memlens'.
 * reachable: any
 * expect: definite=1206/6 indirect=0/0 possible=0/0 */
#include "lk_common.h"
#include <ucontext.h>

#define STACK 16384

static ucontext_t main_ctx, co_ctx[3];
void *keep[3];

static void co(int i) {
    for (int k = 0; k < 5; k++) {
        void *p = lk_alloc((size_t)(100 * (i + 1) + k));
        if (k == 4)
            keep[i] = p;
        else if (k % 2)
            free(p);
        swapcontext(&co_ctx[i], &main_ctx);
    }
}

int main(void) {
    for (int i = 0; i < 3; i++) {
        if (getcontext(&co_ctx[i]) != 0) LK_FAIL();
        co_ctx[i].uc_stack.ss_sp = lk_alloc(STACK);
        co_ctx[i].uc_stack.ss_size = STACK;
        co_ctx[i].uc_link = &main_ctx;
        makecontext(&co_ctx[i], (void (*)(void))co, 1, i);
    }
    for (int r = 0; r < 6; r++)
        for (int i = 0; i < 3; i++) swapcontext(&main_ctx, &co_ctx[i]);
    return 0;
}
