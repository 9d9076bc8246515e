/* Pointers held only in shared mappings: an anonymous MAP_SHARED one, a
 * memfd mapped MAP_SHARED and a file in /dev/shm mapped MAP_SHARED. valgrind
 * scans every readable and writable client mapping, shared or private, so
 * all three blocks are reachable; a block whose only pointer lay in a shared
 * mapping that was unmapped is definite.
 * expect: definite=40/1 indirect=0/0 possible=0/0 reachable=96/3 */
#define _GNU_SOURCE
#include "lk_common.h"
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#define LEN 65536
static void *map_shared(int fd) {
    if (fd >= 0 && ftruncate(fd, LEN)) LK_FAIL();
    void *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | (fd < 0 ? MAP_ANONYMOUS : 0), fd, 0);
    if (m == MAP_FAILED) LK_FAIL();
    if (fd >= 0) close(fd);
    return m;
}
int main(void) {
    void **anon = map_shared(-1);
    anon[10] = lk_alloc(24);
    void **mem = map_shared(memfd_create("lk_shared", 0));
    mem[20] = lk_alloc(32);
    char name[64];
    snprintf(name, sizeof name, "/dev/shm/lk_shared-%d", (int)getpid());
    int fd = open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) LK_FAIL();
    unlink(name);
    void **file = map_shared(fd);
    file[30] = lk_alloc(40);
    void **gone = map_shared(-1);
    gone[40] = lk_alloc(40);
    munmap(gone, LEN);
    LK_CLEAR_REGISTERS();
    return 0;
}
