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
    static char path[4096 + 32];
    ssize_t n = readlink("/proc/self/exe", path, 4096);
    if (n <= 0) LK_FAIL();
    while (n > 0 && path[n - 1] != '/') n--;
    memcpy(path + n, "liblk_dlopen_lib.so", sizeof "liblk_dlopen_lib.so");
    void *volatile h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) LK_FAIL();
    kept = lk_alloc(48);
    dropped = lk_alloc(32);
    dropped = NULL;
    LK_CLEAR_REGISTERS();
    return 0;
}
