/* threads_heap.c - many threads that leave a big live heap behind
 * (docs/benchmarks.md, "Fifth session of 2026-12-05"). NT threads each make
 * PER allocations of 16-79 bytes and free every other one at once, so
 * NT * PER / 2 blocks (2.5 M by default) are live at the end, allocated from
 * NT stacks' worth of threads at the same time: the report's whole build
 * (the page's live-at-end buckets, the advisor's per-id arrays) scales with
 * them.
 *
 * usage: cc -O1 -g -pthread -o threads_heap bench/threads_heap.c && ./threads_heap [NT [PER]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int per = 10000;
static void ***keep; /* a global: the blocks stay reachable at exit */

static void *work(void *arg) {
    void **mine = malloc((size_t)per * sizeof *mine);
    for (int i = 0; mine && i < per; i++) {
        mine[i] = malloc(16 + (i & 63));
        if (i & 1) {
            free(mine[i]);
            mine[i] = NULL;
        }
    }
    *(void ***)arg = mine;
    return NULL;
}

int main(int argc, char **argv) {
    int nt = argc > 1 ? atoi(argv[1]) : 500;
    if (argc > 2) per = atoi(argv[2]);
    if (nt < 1 || per < 1) {
        fprintf(stderr, "usage: threads_heap [THREADS [ALLOCATIONS_PER_THREAD]]\n");
        return 2;
    }
    pthread_t *th = malloc((size_t)nt * sizeof *th);
    keep = calloc((size_t)nt, sizeof *keep);
    if (!th || !keep) return 1;
    for (int i = 0; i < nt; i++)
        if (pthread_create(&th[i], NULL, work, &keep[i])) return 1;
    long live = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        for (int k = 0; keep[i] && k < per; k++) live += keep[i][k] != NULL;
    }
    printf("%ld live\n", live);
    return 0;
}
