// bench_async.cu - N cudaMallocAsync/cudaFreeAsync pairs of 1 MiB on one
// stream, timed inside the program (the allocation loop only, after a
// warm-up), for tests/gpu/run.sh's overhead measurement. Prints
// "pairs=N seconds=S".
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    cudaStream_t s;
    if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&s) != cudaSuccess) {
        fprintf(stderr, "bench_async: no CUDA device\n");
        return 2;
    }
    void *p;
    for (int i = 0; i < 1000; i++) { // warm-up: the pool, the unwinder's caches
        if (cudaMallocAsync(&p, 1 << 20, s) != cudaSuccess) return 2;
        cudaFreeAsync(p, s);
    }
    cudaStreamSynchronize(s);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        if (cudaMallocAsync(&p, 1 << 20, s) != cudaSuccess) {
            fprintf(stderr, "bench_async: cudaMallocAsync failed at %ld\n", i);
            return 2;
        }
        cudaFreeAsync(p, s);
    }
    cudaStreamSynchronize(s);
    double t1 = now();
    printf("pairs=%ld seconds=%.6f\n", n, t1 - t0);
    cudaStreamDestroy(s);
    return 0;
}
