/* A program that ends by abort(), as a failed assert and an uncaught C++
 * exception do: no destructor runs, and valgrind checks the leaks at the
 * signal, scanning the stack from where the signal found it. memlens'
 * handler for SIGABRT (interpose/runtime.c, installed where the action is
 * the default) makes the exit handshake from the interrupted stack pointer,
 * then sends the signal again with the default action. Before, nothing was
 * scanned and every live block counted definite (96 B here).
 * expect: definite=48/1 indirect=16/1 possible=0/0 reachable=32/1 */
#include "lk_common.h"
int main(void) {
    LK_PAIR_AND_KEEP();
    abort();
}
