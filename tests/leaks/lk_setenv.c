/* setenv 40 times: glibc keeps every string it made in a tsearch tree
 * (setenv.c, known_values), whose red nodes' left children are pointed to
 * by their address + 1 (the colour bit). valgrind's default run frees the
 * tree at exit and reports nothing; memlens called those children
 * "possibly lost" (24 B each, from about ten calls on). Nothing is lost.
 * reachable: any
 * expect: definite=0/0 indirect=0/0 possible=0/0 */
#include "lk_common.h"

int main(void) {
    char name[] = "LK_SETENV_00";
    for (int i = 0; i < 40; i++) {
        name[10] = (char)('0' + i / 10);
        name[11] = (char)('0' + i % 10);
        if (setenv(name, "value", 1) != 0) LK_FAIL();
    }
    return 0;
}
