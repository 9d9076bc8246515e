/* first_touch.c - how fast this machine hands out memory the process has
 * never touched (docs/benchmarks.md, "Memory the machine has not used").
 * Maps SIZE MiB of anonymous memory three times over, writes one byte per
 * 4 KiB page and prints the rate; with HUGE=1 the mapping is advised
 * MADV_HUGEPAGE first. On a virtual machine whose host backs guest memory
 * on first use, the first round can be tens of times slower than the
 * rounds that reuse the pages the kernel just got back.
 *
 * usage: cc -O2 -o first_touch bench/first_touch.c && ./first_touch SIZE_MIB [HUGE] */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 2 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: first_touch SIZE_MIB [HUGE]\n");
        return 2;
    }
    size_t bytes = (size_t)atoi(argv[1]) << 20;
    int huge = argc > 2 && atoi(argv[2]);
    for (int round = 1; round <= 3; round++) {
        char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        if (huge) madvise(p, bytes, MADV_HUGEPAGE);
        double t0 = now();
        for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
        double dt = now() - t0;
        printf("round %d: %zu MiB %s pages in %.3f s, %.0f MB/s\n", round, bytes >> 20, huge ? "huge" : "4 KiB",
               dt, (double)bytes / 1e6 / dt);
        munmap(p, bytes);
    }
    return 0;
}
