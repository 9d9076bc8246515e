// alloc_kinds.cu - every GPU allocation kind memlens records, with known sizes.
//
// Built and run by tests/gpu/run.sh on a machine with a GPU. Host code only
// (no kernels): the runtime API for what programs usually call, the driver API
// for the rest (cuMemAlloc, the VMM calls). Everything is allocated first and
// kept alive together, so the device's peak is their sum; then all is freed
// except one 5 MiB cudaMalloc made in leak_here(), and a worker thread
// allocates and frees 3 MiB. The last line of stdout is a JSON object with
// what the report must say (tests/gpu/check.py compares).
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024ull * 1024)

static void check_rt(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "alloc_kinds: %s: %s\n", what, cudaGetErrorString(e));
        exit(2);
    }
}
static void check_drv(CUresult r, const char *what) {
    if (r != CUDA_SUCCESS) {
        const char *s = "?";
        cuGetErrorString(r, &s);
        fprintf(stderr, "alloc_kinds: %s: %s\n", what, s);
        exit(2);
    }
}
#define RT(x) check_rt((x), #x)
#define DRV(x) check_drv((x), #x)

__attribute__((noinline)) void *leak_here(size_t n) {
    void *p = NULL;
    RT(cudaMalloc(&p, n));
    return p;
}

static void *worker(void *arg) {
    (void)arg;
    void *p = NULL;
    RT(cudaMalloc(&p, 3 * MiB));
    RT(cudaFree(p));
    return NULL;
}

int main(void) {
    RT(cudaSetDevice(0));
    RT(cudaFree(0)); // creates the context: no allocation event
    cudaStream_t s;
    RT(cudaStreamCreate(&s));

    void *d = NULL, *pitched = NULL, *managed = NULL, *h1 = NULL, *h2 = NULL, *a1 = NULL, *a2 = NULL;
    size_t pitch = 0;
    RT(cudaMalloc(&d, 1 * MiB));
    RT(cudaMallocPitch(&pitched, &pitch, 1000, 100));
    RT(cudaMallocManaged(&managed, 4 * MiB));
    RT(cudaMallocHost(&h1, 64 * 1024));
    RT(cudaHostAlloc(&h2, 64 * 1024, cudaHostAllocMapped | cudaHostAllocPortable));
    void *h3 = aligned_alloc(4096, 64 * 1024);
    RT(cudaHostRegister(h3, 64 * 1024, cudaHostRegisterDefault));
    RT(cudaMallocAsync(&a1, 1 * MiB, s));
    cudaMemPool_t pool;
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    RT(cudaMemPoolCreate(&pool, &props));
    RT(cudaMallocFromPoolAsync(&a2, 4 * MiB, pool, s));
    RT(cudaStreamSynchronize(s));
    cudaArray_t arr;
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
    RT(cudaMallocArray(&arr, &fd, 64, 64));

    CUdeviceptr dd;
    DRV(cuMemAlloc(&dd, 2 * MiB));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    DRV(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUdeviceptr va;
    DRV(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
    CUmemGenericAllocationHandle hnd;
    DRV(cuMemCreate(&hnd, 2 * gran, &prop, 0));
    DRV(cuMemMap(va, 2 * gran, 0, hnd, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    DRV(cuMemSetAccess(va, 2 * gran, &acc, 1));
    void *leak = leak_here(5 * MiB);
    (void)leak;
    // Everything above is alive together: this is the peak.

    DRV(cuMemUnmap(va, 2 * gran));
    DRV(cuMemRelease(hnd));
    DRV(cuMemAddressFree(va, 4 * gran));
    DRV(cuMemFree(dd));
    RT(cudaFreeArray(arr));
    RT(cudaFreeAsync(a2, s));
    RT(cudaFreeAsync(a1, s));
    RT(cudaStreamSynchronize(s));
    RT(cudaMemPoolDestroy(pool));
    RT(cudaFree(managed));
    RT(cudaHostUnregister(h3));
    free(h3);
    RT(cudaFreeHost(h2));
    RT(cudaFreeHost(h1));
    RT(cudaFree(pitched));
    RT(cudaFree(d));
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    RT(cudaStreamDestroy(s));

    unsigned long long vmm = 2ull * gran, pitch_bytes = (unsigned long long)pitch * 100;
    unsigned long long peak = 1 * MiB + pitch_bytes + 4 * MiB + 1 * MiB + 4 * MiB + 64 * 64 * 4 + 2 * MiB +
                              vmm + 5 * MiB;
    printf("{\"device\": 0, \"peak_bytes\": %llu, \"leaked_bytes\": %llu, \"kinds\": {"
           "\"device\": %llu, \"pitch\": %llu, \"managed\": %llu, \"host_pinned\": %llu, "
           "\"host_registered\": %llu, \"async\": %llu, \"pool\": %llu, \"array\": %llu, "
           "\"vmm_physical\": %llu, \"vmm_reserve\": %llu, \"vmm_map\": %llu}, "
           "\"leak_function\": \"leak_here\"}\n",
           peak, 5 * MiB, 1 * MiB + 2 * MiB + 5 * MiB + 3 * MiB, pitch_bytes, 4 * MiB, 128 * 1024ull,
           64 * 1024ull, 1 * MiB, 4 * MiB, 64 * 64 * 4ull, vmm, 4ull * gran, vmm);
    return 0;
}
