/* A stdio buffer carved from freed chunks. 400 blocks of 40 bytes hold
 * pointers to each other, and are freed; 100 blocks of 40 bytes are then
 * allocated (glibc hands back some of the same chunks) and dropped; then
 * printf allocates stdout's 4 KiB buffer from the merged rest, whose words
 * past the line it writes are the freed blocks' old pointers, now to
 * dropped blocks. The program holds none: valgrind, which reads only words
 * that were written, says the 100 are definitely lost. memlens read the
 * buffer whole and called 82 of them reachable; it now counts stdio's
 * buffers reachable without reading them (ml_ring_hdr_t.stdio_list).
 * The buffer itself is glibc's, freed at exit under valgrind.
 * reachable: any
 * expect: definite=4000/100 indirect=0/0 possible=0/0 */
#include "lk_common.h"
#include <stdio.h>
int main(void) {
    static void *a[400];
    for (int i = 0; i < 400; i++) a[i] = lk_alloc(40);
    for (int i = 0; i < 400; i++)
        for (int k = 1; k < 5; k++) ((void **)a[i])[k] = a[399 - i];
    for (int i = 0; i < 400; i++) free(a[i]);
    memset(a, 0, sizeof a);
    for (int i = 0; i < 100; i++) lk_use(lk_alloc(40));
    printf("done\n");
    return 0;
}
