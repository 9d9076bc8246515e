/* A program killed by SIGTERM, as timeout(1), kill and a CI runner's stop
 * end one: no destructor runs, and valgrind checks the leaks at the signal.
 * memlens' handler for the signals sent from outside (interpose/runtime.c,
 * installed where the action is the default) makes the exit handshake, then
 * sends the signal again with the default action. Before, nothing was
 * scanned and every live block counted definite (96 B here). The signal is
 * sent by the program itself so that both tools get it at the same point.
 * expect: definite=48/1 indirect=16/1 possible=0/0 reachable=32/1 */
#include "lk_common.h"
int main(void) {
    LK_PAIR_AND_KEEP();
    kill(getpid(), SIGTERM);
    return 3;
}
