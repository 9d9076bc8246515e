/* exit_scan_workload.c - a program that exits with its heap live, for
 * bench/exit_scan_bench.sh. Nothing is freed.
 *
 *   exit_scan_workload N lists   N small blocks (16 to 64 bytes) in lists of
 *       64, each block pointing to the next. Every other list's head is kept
 *       in a global array (reachable); the others are dropped (one definite
 *       block and 63 indirect ones each).
 *   exit_scan_workload N array   N small blocks held by one array that is
 *       dropped (one definite block, N indirect ones).
 *   exit_scan_workload N churn   as array, then every other block freed and
 *       every fourth made again (40 bytes): 3N/4 blocks live at exit, and
 *       the pages of the collector's live set hold the dead entries of the
 *       frees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
    struct node *next;
    long payload[];
};

struct node **heads; /* global: the compiler must store it */

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    if (argc > 2 && (!strcmp(argv[2], "array") || !strcmp(argv[2], "churn"))) {
        void **v = malloc((size_t)n * sizeof *v);
        if (!v) return 1;
        for (long i = 0; i < n; i++)
            if (!(v[i] = malloc(16 + (size_t)(i % 7) * 8))) return 1;
        if (!strcmp(argv[2], "churn")) {
            for (long i = 0; i < n; i += 2) free(v[i]);
            for (long i = 0; i < n; i += 4)
                if (!(v[i] = malloc(40))) return 1;
        }
        printf("%ld blocks in an array at %p\n", n, (void *)v);
        return 0;
    }
    long lists = (n + 63) / 64;
    heads = calloc((size_t)lists, sizeof *heads);
    if (!heads) return 1;
    for (long l = 0; l < lists; l++) {
        struct node *head = NULL;
        for (long i = 0; i < 64 && l * 64 + i < n; i++) {
            struct node *x = malloc(sizeof *x + (size_t)(i % 7) * 8);
            if (!x) return 1;
            x->next = head;
            head = x;
        }
        if (l % 2 == 0) heads[l] = head;
    }
    printf("%ld blocks in %ld lists\n", n, lists);
    return 0;
}
