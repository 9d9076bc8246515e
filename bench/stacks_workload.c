/* stacks_workload.c - many distinct call stacks (bench/stacks_bench.sh):
 * a binary recursion LEVELS deep; bit d-1 of v picks the left or the right
 * call at level d, so the 2^LEVELS values are 2^LEVELS distinct paths, each
 * about 2 * LEVELS frames deep. Every path allocates 16 bytes and frees
 * them, REPS times over (the innermost frames change fastest, as in a
 * program walking a tree).
 *
 * usage: stacks_workload LEVELS REPS */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static void *down(int d, unsigned v);
__attribute__((noinline)) static void *left(int d, unsigned v) {
    void *p = down(d - 1, v);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return p;
}
__attribute__((noinline)) static void *right(int d, unsigned v) {
    void *p = down(d - 1, v);
    __asm__ volatile("" ::: "memory");
    return p;
}
__attribute__((noinline)) static void *down(int d, unsigned v) {
    if (!d) return malloc(16);
    return (v >> (d - 1)) & 1 ? right(d, v) : left(d, v);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: stacks_workload LEVELS REPS\n");
        return 2;
    }
    int levels = atoi(argv[1]), reps = atoi(argv[2]);
    if (levels < 1 || levels > 30 || reps < 1) return 2;
    for (int r = 0; r < reps; r++)
        for (unsigned v = 0; v < 1u << levels; v++) free(down(levels, v));
    return 0;
}
