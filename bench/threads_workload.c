/* threads_workload.c - many threads allocating (bench/threads_bench.sh).
 * Built at -O0 by the bench so that the pairs stay calls.
 *
 * usage: threads_workload THREADS [PAIRS] [MODE]
 *   together  THREADS threads start together (a barrier) and each do PAIRS
 *             malloc/free pairs of 16 to 271 bytes: every thread is on the
 *             ring at once, the case that fills it and puts hundreds of
 *             producers to sleep (the default);
 *   churn     THREADS short-lived threads in waves of 50, each doing PAIRS
 *             pairs and exiting: the recorder sets up and retires a
 *             thread's state THREADS times;
 *   handoff   THREADS / 2 producer threads each malloc PAIRS blocks and
 *             hand them to a consumer thread of their own, which frees
 *             them: every free is of another thread's block, as in a
 *             server's queue. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_barrier_t start;
static long pairs = 2000;

static void *work(void *arg) {
    if (arg) pthread_barrier_wait(&start);
    for (long i = 0; i < pairs; i++) free(malloc(16 + (size_t)(i & 255)));
    return NULL;
}

/* handoff: a ring of slots per producer/consumer pair; an empty slot is
 * NULL. */
#define SLOTS 1024
typedef struct {
    void *_Atomic slot[SLOTS];
} queue_t;

static void *produce(void *arg) {
    queue_t *q = arg;
    for (long i = 0; i < pairs; i++) {
        void *p = malloc(16 + (size_t)(i & 255)), *empty = NULL;
        while (!atomic_compare_exchange_weak(&q->slot[i % SLOTS], &empty, p)) {
            empty = NULL;
            sched_yield();
        }
    }
    return NULL;
}

static void *consume(void *arg) {
    queue_t *q = arg;
    for (long i = 0; i < pairs; i++) {
        void *p;
        while (!(p = atomic_exchange(&q->slot[i % SLOTS], NULL))) sched_yield();
        free(p);
    }
    return NULL;
}

static int spawn(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    if (pthread_create(t, attr, fn, arg) == 0) return 0;
    perror("pthread_create");
    return -1;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    if (argc > 2) pairs = atol(argv[2]);
    const char *mode = argc > 3 ? argv[3] : "together";
    bool churn = !strcmp(mode, "churn"), handoff = !strcmp(mode, "handoff");
    if (n < 1 || (!churn && !handoff && strcmp(mode, "together")) || (handoff && n < 2)) {
        fprintf(stderr, "usage: threads_workload THREADS [PAIRS] [together|churn|handoff]\n");
        return 2;
    }
    pthread_t *t = malloc((size_t)n * sizeof *t);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    if (churn) {
        for (int i = 0; i < n; i += 50) {
            int w = n - i < 50 ? n - i : 50;
            for (int k = 0; k < w; k++)
                if (spawn(&t[k], &attr, work, NULL)) return 1;
            for (int k = 0; k < w; k++) pthread_join(t[k], NULL);
        }
    } else if (handoff) {
        int np = n / 2;
        queue_t *q = calloc((size_t)np, sizeof *q);
        for (int i = 0; i < np; i++)
            if (spawn(&t[2 * i], &attr, produce, &q[i]) || spawn(&t[2 * i + 1], &attr, consume, &q[i])) return 1;
        for (int i = 0; i < 2 * np; i++) pthread_join(t[i], NULL);
        free(q);
    } else {
        pthread_barrier_init(&start, NULL, (unsigned)n);
        for (int i = 0; i < n; i++)
            if (spawn(&t[i], &attr, work, &start)) return 1;
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    }
    free(t);
    return 0;
}
