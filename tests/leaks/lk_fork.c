/* A forked child leaks; the parent waits for it and keeps one reachable
 * block. (Blocks the parent allocated before the fork are not in the
 * child's trace: docs/analysis.md, "Forked children".)
 * expect: definite=0/0 indirect=0/0 possible=0/0 reachable=48/1
 * expect-child: definite=256/1 indirect=0/0 possible=0/0 reachable=0/0 */
#include "lk_common.h"
#include <sys/wait.h>
#include <unistd.h>
void *volatile keep;
int main(void) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        void *volatile p = lk_alloc(256);
        p = NULL;
        exit(0);
    }
    keep = lk_alloc(48);
    int st;
    waitpid(pid, &st, 0);
    return 0;
}
