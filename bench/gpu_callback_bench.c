/* gpu_callback_bench.c - what memlens adds to one cudaMallocAsync/cudaFreeAsync
 * pair, measured without a GPU (bench/gpu_callback_bench.sh runs it).
 *
 * usage: gpu_callback_bench FAKE_LIBCUPTI INJECTION_LIB PAIRS DEPTH
 *
 * It plays the CUDA driver the way tests/e2e/fixtures/fx_gpu_inject.c does:
 * loads the fake libcupti (tests/e2e/fixtures/fake_cupti.c), calls
 * libmemlens_cupti.so's InitializeInjection, takes the subscriber callback
 * from the fake, and then, DEPTH frames deep, calls it at API entry and exit
 * for PAIRS cuMemAllocAsync/cuMemFreeAsync pairs with real params structs:
 * the four callbacks CUPTI makes for one pair. Outside memlens the collector
 * does not subscribe and the loop calls an empty callback instead, so the
 * difference between the two runs is memlens' own work per pair (translation,
 * the stack unwind of the allocation, the ring), without CUPTI's dispatch or
 * the driver's own time, which only a GPU machine can measure
 * (tests/gpu/run.sh). Prints "pairs=N depth=D ns_per_pair=X subscribed=0|1".
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static CUpti_CallbackFunc cb;
static void *ud;
static const CUcontext ctx = (CUcontext)(uintptr_t)0x0100; /* device 0, uid 1 */
static uint32_t correlation;

static void CUPTIAPI empty_callback(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                    const void *data) {
    (void)u;
    (void)d;
    (void)id;
    __asm__ volatile("" : : "r"(data) : "memory");
}

static __attribute__((noinline)) void call(CUpti_CallbackId id, const void *params) {
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    d.context = ctx;
    d.contextUid = 1;
    d.functionParams = params;
    d.correlationId = ++correlation;
    uint64_t scratch = 0;
    d.correlationData = &scratch;
    CUresult rc = CUDA_SUCCESS;
    d.callbackSite = CUPTI_API_ENTER;
    cb(ud, CUPTI_CB_DOMAIN_DRIVER_API, id, &d);
    d.callbackSite = CUPTI_API_EXIT;
    d.functionReturnValue = &rc;
    cb(ud, CUPTI_CB_DOMAIN_DRIVER_API, id, &d);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The pairs, the way bench_async.cu makes them: one 1 MiB block on one
 * stream, allocated and freed; the pool hands back the same address. */
static __attribute__((noinline)) double loop(long pairs) {
    CUstream s = (CUstream)(uintptr_t)0x5151;
    double t0 = now();
    for (long i = 0; i < pairs; i++) {
        CUdeviceptr p = 0x30000000;
        cuMemAllocAsync_params a = {.dptr = &p, .bytesize = 1 << 20, .hStream = s};
        call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &a);
        cuMemFreeAsync_params f = {.dptr = p, .hStream = s};
        call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &f);
    }
    return now() - t0;
}

/* A program's stack above its allocation loop. */
static __attribute__((noinline)) double nest(int depth, long pairs) {
    if (depth <= 0) return loop(pairs);
    double t = nest(depth - 1, pairs);
    __asm__ volatile("" : : : "memory"); /* not a tail call */
    return t;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: gpu_callback_bench FAKE_LIBCUPTI INJECTION_LIB PAIRS DEPTH\n");
        return 2;
    }
    long pairs = atol(argv[3]);
    int depth = atoi(argv[4]);
    void *fake = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    void *lib = fake ? dlopen(argv[2], RTLD_NOW) : NULL;
    int (*init)(void) = lib ? (int (*)(void))dlsym(lib, "InitializeInjection") : NULL;
    CUpti_CallbackFunc (*get)(void **) =
        fake ? (CUpti_CallbackFunc(*)(void **))dlsym(fake, "fake_cupti_callback") : NULL;
    if (!init || !get) {
        fprintf(stderr, "gpu_callback_bench: %s\n", dlerror());
        return 2;
    }
    init();
    cb = get(&ud);
    int subscribed = cb != NULL;
    if (!cb) cb = empty_callback;
    nest(depth, pairs / 10 + 1); /* warm-up: the unwinder's caches, the stack table */
    double t = nest(depth, pairs);
    printf("pairs=%ld depth=%d ns_per_pair=%.1f subscribed=%d\n", pairs, depth, t * 1e9 / (double)pairs,
           subscribed);
    return 0;
}
