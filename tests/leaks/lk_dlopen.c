/* A library loaded with dlopen and kept (liblk_dlopen_lib.so, beside the
 * program: one that neither memlens nor valgrind has loaded already). The
 * dynamic loader allocates tables of its own for it (the _dl_find_object
 * segments), which its data reaches only through pointers it aligned into
 * them, and which valgrind's default run frees at exit (__libc_freeres):
 * they are no leak of the program. Reachable blocks are not compared: glibc's
 * own (the library's link map and name) are reachable here and freed under
 * valgrind, whose numbers for them differ by build.
 * reachable: any
 * expect: definite=32/1 indirect=0/0 possible=0/0 */
#include "lk_common.h"
#include <dlfcn.h>
#include <unistd.h>
void *volatile kept, *volatile dropped;
int main(void) {
    void *volatile h = lk_dlopen_lib();
    kept = lk_alloc(48);
    dropped = lk_alloc(32);
    dropped = NULL;
    LK_CLEAR_REGISTERS();
    return 0;
}
