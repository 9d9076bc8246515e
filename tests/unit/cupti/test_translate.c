/* test_translate.c - the CUPTI callback -> GPU event translation, for every
 * callback id the collector enables, with synthesized CUpti_CallbackData and
 * params structs (no GPU, no libcupti needed: the function is pure). */
#include "ml_cupti.h"

#include <criterion/criterion.h>
#include <string.h>

static const CUresult ok = CUDA_SUCCESS, oom = CUDA_ERROR_OUT_OF_MEMORY;

/* A driver callback as CUPTI would deliver it. */
static CUpti_CallbackData cb(CUpti_ApiCallbackSite site, const void *params, const CUresult *rc) {
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    d.callbackSite = site;
    d.functionParams = params;
    d.functionReturnValue = (void *)rc;
    d.context = (CUcontext)(uintptr_t)0xc0ffee;
    d.contextUid = 7;
    d.correlationId = 4242;
    return d;
}

static int tr(CUpti_CallbackId id, const CUpti_CallbackData *d, ml_gpu_event_t *e) {
    memset(e, 0xa5, sizeof *e); /* catch fields left unset */
    return ml_cupti_translate(CUPTI_CB_DOMAIN_DRIVER_API, id, d, e);
}

/* Every callback id tested below, to compare with what the collector enables. */
static const CUpti_CallbackId tested[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,          CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,      CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,         CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister,      CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,   CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2,       CUPTI_DRIVER_TRACE_CBID_cuArray3DCreate_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayCreate, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,         CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,          CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,           CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,             CUPTI_DRIVER_TRACE_CBID_cuArrayDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayDestroy, CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo,
};

Test(translate, every_enabled_callback_id_is_tested) {
    size_t nt = sizeof tested / sizeof tested[0];
    cr_assert_eq(ml_cupti_driver_cbids_n, nt, "enabled %zu ids, tested %zu",
                 ml_cupti_driver_cbids_n, nt);
    for (size_t i = 0; i < ml_cupti_driver_cbids_n; i++) {
        bool found = false;
        for (size_t j = 0; j < nt; j++) found |= tested[j] == ml_cupti_driver_cbids[i];
        cr_expect(found, "callback id %u is enabled but has no test", ml_cupti_driver_cbids[i]);
    }
}

/* The common contract of an allocation: an event only at exit and only on
 * success; the callback's context uid and correlation id are carried. */
static void expect_alloc(CUpti_CallbackId id, const void *params, unsigned kind, uint64_t ptr,
                         uint64_t size) {
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_ENTER, params, NULL);
    cr_expect_eq(tr(id, &d, &e), 0, "cbid %u: nothing at entry", id);
    d = cb(CUPTI_API_EXIT, params, &oom);
    cr_expect_eq(tr(id, &d, &e), 0, "cbid %u: nothing when the call failed", id);
    d = cb(CUPTI_API_EXIT, params, NULL);
    cr_expect_eq(tr(id, &d, &e), 0, "cbid %u: nothing without a return value", id);
    d = cb(CUPTI_API_EXIT, params, &ok);
    cr_assert_eq(tr(id, &d, &e), 1, "cbid %u: an event at exit", id);
    cr_expect_eq(e.struct_size, sizeof e);
    cr_expect_eq(e.op, ML_GPU_OP_ALLOC, "cbid %u", id);
    cr_expect_eq(e.kind, kind, "cbid %u: kind %u", id, e.kind);
    cr_expect_eq(e.ptr, ptr, "cbid %u: ptr %#lx", id, (unsigned long)e.ptr);
    cr_expect_eq(e.size, size, "cbid %u: size %lu", id, (unsigned long)e.size);
    cr_expect_eq(e.cbid, id);
    cr_expect_eq(e.context, 7);
    cr_expect_eq(e.correlation, 4242);
    cr_expect_eq(e.stack, 0);
}

/* A free: an event at entry (before the driver can reuse the address), a
 * compensating free-failed at exit when it failed, nothing at a successful
 * exit. */
static void expect_free(CUpti_CallbackId id, const void *params, unsigned kind, uint64_t ptr) {
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_ENTER, params, NULL);
    cr_assert_eq(tr(id, &d, &e), 1, "cbid %u: an event at entry", id);
    cr_expect_eq(e.op, ML_GPU_OP_FREE, "cbid %u", id);
    cr_expect_eq(e.kind, kind, "cbid %u", id);
    cr_expect_eq(e.ptr, ptr, "cbid %u", id);
    cr_expect_eq(e.context, 7);
    cr_expect_eq(e.device, ML_GPU_DEVICE_UNKNOWN);
    d = cb(CUPTI_API_EXIT, params, &ok);
    cr_expect_eq(tr(id, &d, &e), 0, "cbid %u: nothing more after a successful free", id);
    CUresult bad = CUDA_ERROR_INVALID_VALUE;
    d = cb(CUPTI_API_EXIT, params, &bad);
    cr_assert_eq(tr(id, &d, &e), 1, "cbid %u: a failed free is reported", id);
    cr_expect_eq(e.op, ML_GPU_OP_FREE_FAILED);
    cr_expect_eq(e.ptr, ptr);
    cr_expect_eq(e.kind, kind);
}

/* ------------------------------------------------------------------------- */
/* Allocations                                                               */
/* ------------------------------------------------------------------------- */

Test(translate, cuMemAlloc_v2) {
    CUdeviceptr p = 0x7f0000001000ull;
    cuMemAlloc_v2_params pa = {.dptr = &p, .bytesize = 1 << 20};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &pa, ML_GPU_KIND_DEVICE, p, 1 << 20);
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_EXIT, &pa, &ok);
    tr(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &d, &e);
    cr_expect_eq(e.device, ML_GPU_DEVICE_UNKNOWN, "the device comes from the context, later");
    cr_expect_eq(e.stream, 0);
    cr_expect_eq(e.handle, 0);
    cr_expect_eq(e.flags, 0);
}

Test(translate, cuMemAllocPitch_v2_counts_pitch_times_height) {
    CUdeviceptr p = 0x7f0000200000ull;
    size_t pitch = 1024;
    cuMemAllocPitch_v2_params pa = {.dptr = &p, .pPitch = &pitch, .WidthInBytes = 1000, .Height = 100,
                                    .ElementSizeBytes = 4};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, &pa, ML_GPU_KIND_PITCH, p, 1024 * 100);
}

Test(translate, cuMemAllocManaged) {
    CUdeviceptr p = 0x7f0010000000ull;
    cuMemAllocManaged_params pa = {.dptr = &p, .bytesize = 3 << 20, .flags = CU_MEM_ATTACH_GLOBAL};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, &pa, ML_GPU_KIND_MANAGED, p, 3 << 20);
}

Test(translate, cuMemAllocHost_v2_reads_the_host_pointer) {
    void *h = (void *)(uintptr_t)0x7fff00001000ull;
    cuMemAllocHost_v2_params pa = {.pp = &h, .bytesize = 65536};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, &pa, ML_GPU_KIND_HOST_PINNED,
                 0x7fff00001000ull, 65536);
}

Test(translate, cuMemHostAlloc) {
    void *h = (void *)(uintptr_t)0x7fff00100000ull;
    cuMemHostAlloc_params pa = {.pp = &h, .bytesize = 8 << 20, .Flags = CU_MEMHOSTALLOC_PORTABLE};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, &pa, ML_GPU_KIND_HOST_PINNED,
                 0x7fff00100000ull, 8 << 20);
}

Test(translate, cuMemHostRegister_both_versions) {
    cuMemHostRegister_v2_params pa = {.p = (void *)(uintptr_t)0x55550000ull, .bytesize = 4096, .Flags = 0};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2, &pa, ML_GPU_KIND_HOST_REGISTERED,
                 0x55550000ull, 4096);
    cuMemHostRegister_params pb = {.p = (void *)(uintptr_t)0x55560000ull, .bytesize = 8192, .Flags = 0};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister, &pb, ML_GPU_KIND_HOST_REGISTERED,
                 0x55560000ull, 8192);
}

Test(translate, cuMemAllocAsync_and_ptsz_carry_the_stream) {
    CUdeviceptr p = 0x7f0020000000ull;
    CUstream s = (CUstream)(uintptr_t)0x5151;
    cuMemAllocAsync_params pa = {.dptr = &p, .bytesize = 1 << 20, .hStream = s};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &pa, ML_GPU_KIND_ASYNC, p, 1 << 20);
    cuMemAllocAsync_ptsz_params pb = {.dptr = &p, .bytesize = 2 << 20, .hStream = s};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, &pb, ML_GPU_KIND_ASYNC, p, 2 << 20);
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_EXIT, &pb, &ok);
    tr(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, &d, &e);
    cr_expect_eq(e.stream, 0x5151);
}

Test(translate, cuMemAllocFromPoolAsync_and_ptsz_carry_pool_and_stream) {
    CUdeviceptr p = 0x7f0030000000ull;
    cuMemAllocFromPoolAsync_params pa = {.dptr = &p, .bytesize = 4 << 20,
                                         .pool = (CUmemoryPool)(uintptr_t)0x9001,
                                         .hStream = (CUstream)(uintptr_t)0x77};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, &pa, ML_GPU_KIND_POOL, p, 4 << 20);
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, &pa, ML_GPU_KIND_POOL, p, 4 << 20);
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_EXIT, &pa, &ok);
    tr(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, &d, &e);
    cr_expect_eq(e.handle, 0x9001);
    cr_expect_eq(e.stream, 0x77);
}

Test(translate, cuMemCreate_on_a_device_and_on_the_host) {
    CUmemGenericAllocationHandle h = 0xabc0;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 3;
    cuMemCreate_params pa = {.handle = &h, .size = 2 << 20, .prop = &prop, .flags = 0};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &pa, ML_GPU_KIND_VMM_PHYSICAL, 0xabc0, 2 << 20);
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_EXIT, &pa, &ok);
    tr(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &d, &e);
    cr_expect_eq(e.device, 3, "the location names the device");
    cr_expect_eq(e.flags & ML_GPU_F_HOST, 0);
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = 1;
    tr(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &d, &e);
    cr_expect_eq(e.device, ML_GPU_DEVICE_UNKNOWN, "a NUMA node is not a device");
    cr_expect(e.flags & ML_GPU_F_HOST);
}

Test(translate, cuMemAddressReserve) {
    CUdeviceptr va = 0x7e0000000000ull;
    cuMemAddressReserve_params pa = {.ptr = &va, .size = 1ull << 32, .alignment = 0, .addr = 0, .flags = 0};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &pa, ML_GPU_KIND_VMM_RESERVE, va, 1ull << 32);
}

Test(translate, cuMemMap_names_the_handle) {
    cuMemMap_params pa = {.ptr = 0x7e0000200000ull, .size = 2 << 20, .offset = 0, .handle = 0xabc0, .flags = 0};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &pa, ML_GPU_KIND_VMM_MAP, 0x7e0000200000ull, 2 << 20);
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_EXIT, &pa, &ok);
    tr(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &d, &e);
    cr_expect_eq(e.handle, 0xabc0);
}

Test(translate, arrays_are_estimated) {
    CUarray a = (CUarray)(uintptr_t)0xa11a;
    CUDA_ARRAY_DESCRIPTOR d2 = {.Width = 64, .Height = 64, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    cuArrayCreate_v2_params pa = {.pHandle = &a, .pAllocateArray = &d2};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2, &pa, ML_GPU_KIND_ARRAY, 0xa11a, 64 * 64 * 4);
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_EXIT, &pa, &ok);
    tr(CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2, &d, &e);
    cr_expect(e.flags & ML_GPU_F_ESTIMATED);

    CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 32, .Height = 16, .Depth = 8, .Format = CU_AD_FORMAT_HALF,
                                  .NumChannels = 4, .Flags = 0};
    cuArray3DCreate_v2_params pb = {.pHandle = &a, .pAllocateArray = &d3};
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuArray3DCreate_v2, &pb, ML_GPU_KIND_ARRAY, 0xa11a,
                 32 * 16 * 8 * 4 * 2);

    CUmipmappedArray m = (CUmipmappedArray)(uintptr_t)0x3a3a;
    CUDA_ARRAY3D_DESCRIPTOR dm = {.Width = 8, .Height = 8, .Depth = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                  .NumChannels = 1, .Flags = 0};
    cuMipmappedArrayCreate_params pc = {.pHandle = &m, .pMipmappedArrayDesc = &dm, .numMipmapLevels = 4};
    /* 8x8 + 4x4 + 2x2 + 1x1 bytes */
    expect_alloc(CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayCreate, &pc, ML_GPU_KIND_ARRAY, 0x3a3a,
                 64 + 16 + 4 + 1);
}

Test(translate, array_bytes) {
    cr_expect_eq(ml_cupti_array_bytes(100, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1), 100, "1D: height 0");
    cr_expect_eq(ml_cupti_array_bytes(10, 10, 10, CU_AD_FORMAT_SIGNED_INT32, 2), 10 * 10 * 10 * 8);
    cr_expect_eq(ml_cupti_array_bytes(16, 16, 0, CU_AD_FORMAT_BC1_UNORM, 1), 128, "BC1: 8 bytes per 4x4");
    cr_expect_eq(ml_cupti_array_bytes(4, 4, 1, CU_AD_FORMAT_UNORM_INT16X4, 1), 128);
    cr_expect_eq(ml_cupti_array_bytes(4, 4, 1, 0x7e, 1), 0, "an unknown format is not guessed");
}

/* ------------------------------------------------------------------------- */
/* Frees                                                                     */
/* ------------------------------------------------------------------------- */

Test(translate, cuMemFree_v2_at_entry_and_cudaFree0_ignored) {
    cuMemFree_v2_params pa = {.dptr = 0x7f0000001000ull};
    expect_free(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &pa, ML_GPU_KIND_DEVICE, 0x7f0000001000ull);
    cuMemFree_v2_params zero = {.dptr = 0};
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_ENTER, &zero, NULL);
    cr_expect_eq(tr(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &d, &e), 0, "cudaFree(0) is no free");
}

Test(translate, cuMemFreeAsync_and_ptsz) {
    cuMemFreeAsync_params pa = {.dptr = 0x7f0020000000ull, .hStream = (CUstream)(uintptr_t)0x5151};
    expect_free(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &pa, ML_GPU_KIND_ASYNC, 0x7f0020000000ull);
    cuMemFreeAsync_ptsz_params pb = {.dptr = 0x7f0020000000ull, .hStream = (CUstream)(uintptr_t)0x5151};
    expect_free(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, &pb, ML_GPU_KIND_ASYNC, 0x7f0020000000ull);
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_ENTER, &pb, NULL);
    tr(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, &d, &e);
    cr_expect_eq(e.stream, 0x5151);
}

Test(translate, host_frees) {
    cuMemFreeHost_params pa = {.p = (void *)(uintptr_t)0x7fff00001000ull};
    expect_free(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, &pa, ML_GPU_KIND_HOST_PINNED, 0x7fff00001000ull);
    cuMemHostUnregister_params pb = {.p = (void *)(uintptr_t)0x55550000ull};
    expect_free(CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister, &pb, ML_GPU_KIND_HOST_REGISTERED, 0x55550000ull);
}

Test(translate, vmm_frees) {
    cuMemRelease_params pa = {.handle = 0xabc0};
    expect_free(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &pa, ML_GPU_KIND_VMM_PHYSICAL, 0xabc0);
    cuMemAddressFree_params pb = {.ptr = 0x7e0000000000ull, .size = 1ull << 32};
    expect_free(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, &pb, ML_GPU_KIND_VMM_RESERVE, 0x7e0000000000ull);
    cuMemUnmap_params pc = {.ptr = 0x7e0000200000ull, .size = 4 << 20};
    expect_free(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &pc, ML_GPU_KIND_VMM_MAP, 0x7e0000200000ull);
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_ENTER, &pc, NULL);
    tr(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &d, &e);
    cr_expect_eq(e.size, 4 << 20, "an unmap says how much it unmaps");
}

Test(translate, array_frees) {
    cuArrayDestroy_params pa = {.hArray = (CUarray)(uintptr_t)0xa11a};
    expect_free(CUPTI_DRIVER_TRACE_CBID_cuArrayDestroy, &pa, ML_GPU_KIND_ARRAY, 0xa11a);
    cuMipmappedArrayDestroy_params pb = {.hMipmappedArray = (CUmipmappedArray)(uintptr_t)0x3a3a};
    expect_free(CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayDestroy, &pb, ML_GPU_KIND_ARRAY, 0x3a3a);
}

Test(translate, cuMemPoolTrimTo_at_entry_only) {
    cuMemPoolTrimTo_params pa = {.pool = (CUmemoryPool)(uintptr_t)0x9001, .minBytesToKeep = 1 << 20};
    ml_gpu_event_t e;
    CUpti_CallbackData d = cb(CUPTI_API_ENTER, &pa, NULL);
    cr_assert_eq(tr(CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo, &d, &e), 1);
    cr_expect_eq(e.op, ML_GPU_OP_POOL_TRIM);
    cr_expect_eq(e.handle, 0x9001);
    cr_expect_eq(e.size, 1 << 20);
    d = cb(CUPTI_API_EXIT, &pa, &ok);
    cr_expect_eq(tr(CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo, &d, &e), 0);
    CUresult bad = CUDA_ERROR_INVALID_VALUE;
    d = cb(CUPTI_API_EXIT, &pa, &bad);
    cr_expect_eq(tr(CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo, &d, &e), 0, "a trim is no free to undo");
}

/* ------------------------------------------------------------------------- */
/* Resource domain and what is ignored                                       */
/* ------------------------------------------------------------------------- */

Test(translate, context_destruction) {
    CUpti_ResourceData rd;
    memset(&rd, 0, sizeof rd);
    rd.context = (CUcontext)(uintptr_t)0xc0ffee;
    ml_gpu_event_t e;
    cr_assert_eq(ml_cupti_translate(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
                                    &rd, &e),
                 1);
    cr_expect_eq(e.op, ML_GPU_OP_CTX_DESTROY);
    cr_expect_eq(e.context, 0, "the uid is asked of CUPTI by the caller");
    cr_expect_eq(ml_cupti_translate(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &rd, &e),
                 0, "creation is no event");
    cr_expect_eq(ml_cupti_translate(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_STREAM_CREATED, &rd, &e), 0);
}

Test(translate, runtime_domain_unknown_ids_and_null_are_ignored) {
    CUdeviceptr p = 0x7f0000001000ull;
    cuMemAlloc_v2_params pa = {.dptr = &p, .bytesize = 100};
    CUpti_CallbackData d = cb(CUPTI_API_EXIT, &pa, &ok);
    ml_gpu_event_t e;
    /* cudaMalloc is seen as the driver's cuMemAlloc_v2; the runtime callback
     * would count it twice. */
    cr_expect_eq(ml_cupti_translate(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &d, &e), 0);
    cr_expect_eq(ml_cupti_translate(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &d, &e), 0);
    cr_expect_eq(ml_cupti_translate(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc, &d, &e), 0,
                 "the 32-bit legacy entry point is not handled");
    cr_expect_eq(ml_cupti_translate(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, NULL, &e), 0);
    CUpti_CallbackData nop = cb(CUPTI_API_EXIT, NULL, &ok);
    cr_expect_eq(ml_cupti_translate(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &nop, &e), 0);
    /* A "successful" allocation that returned no address is no block. */
    CUdeviceptr none = 0;
    cuMemAlloc_v2_params pz = {.dptr = &none, .bytesize = 0};
    d = cb(CUPTI_API_EXIT, &pz, &ok);
    cr_expect_eq(ml_cupti_translate(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &d, &e), 0);
}
