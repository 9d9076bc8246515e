/* threads_workload.c - N threads that start together (a barrier) and each
 * do M malloc/free pairs of 16 to 271 bytes: every thread is on the ring at
 * once, the case that fills it and puts hundreds of producers to sleep
 * (bench/threads_bench.sh). Built at -O0 by the bench so that the pairs
 * stay calls. usage: threads_workload THREADS [PAIRS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_barrier_t start;
static long pairs = 2000;

static void *work(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < pairs; i++) free(malloc(16 + (size_t)(i & 255)));
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    if (argc > 2) pairs = atol(argv[2]);
    if (n < 1) {
        fprintf(stderr, "usage: threads_workload THREADS [PAIRS]\n");
        return 2;
    }
    pthread_t *t = malloc((size_t)n * sizeof *t);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_barrier_init(&start, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], &attr, work, NULL)) {
            perror("pthread_create");
            return 1;
        }
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    free(t);
    return 0;
}
