/* test_collector.c - the callback path of libmemlens_cupti.so with CUPTI
 * replaced by fakes: device filled in from the context (and cached), context
 * destruction with the context's uid, the fatal-error state callback, and
 * nothing recorded while inactive. */
#include "cupti_internal.h"

#include <criterion/criterion.h>
#include <string.h>

static ml_gpu_event_t got[16];
static int ngot;
static int device_queries;

static void capture(const ml_gpu_event_t *e) {
    if (ngot < 16) got[ngot++] = *e;
}

/* Fake CUPTI: the device is the context pointer's low byte, the uid its
 * second byte. */
static CUptiResult fake_device(CUcontext ctx, uint32_t *dev) {
    device_queries++;
    *dev = (uint32_t)((uintptr_t)ctx & 0xff);
    return CUPTI_SUCCESS;
}
static CUptiResult fake_context_id(CUcontext ctx, uint32_t *id) {
    *id = (uint32_t)(((uintptr_t)ctx >> 8) & 0xff);
    return CUPTI_SUCCESS;
}

static void setup(void) {
    memset(&ml__cupti, 0, sizeof ml__cupti);
    ml__cupti.get_device_id = fake_device;
    ml__cupti.get_context_id = fake_context_id;
    ml__record = capture;
    ml__cupti_reset_contexts();
    ml_atomic_store_relaxed(&ml__cupti_active, 1);
    ngot = 0;
    device_queries = 0;
}

static void alloc(CUcontext ctx, uint32_t uid, CUdeviceptr p, size_t n) {
    static const CUresult ok = CUDA_SUCCESS;
    cuMemAlloc_v2_params pa = {.dptr = &p, .bytesize = n};
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    d.functionParams = &pa;
    d.context = ctx;
    d.contextUid = uid;
    d.callbackSite = CUPTI_API_ENTER;
    ml__cupti_callback(NULL, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &d);
    d.callbackSite = CUPTI_API_EXIT;
    d.functionReturnValue = (void *)&ok;
    ml__cupti_callback(NULL, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &d);
}

Test(collector, device_comes_from_the_context_and_is_cached, .init = setup) {
    CUcontext c2 = (CUcontext)(uintptr_t)0x0502; /* device 2, uid 5 */
    alloc(c2, 5, 0x1000, 100);
    alloc(c2, 5, 0x2000, 200);
    cr_assert_eq(ngot, 2, "one event per allocation (entry produces none)");
    cr_expect_eq(got[0].device, 2);
    cr_expect_eq(got[1].device, 2);
    cr_expect_eq(got[1].context, 5);
    cr_expect_eq(got[1].size, 200);
    cr_expect_eq(device_queries, 1, "asked CUPTI once, then cached");
}

Test(collector, context_created_fills_the_cache, .init = setup) {
    CUpti_ResourceData rd = {.context = (CUcontext)(uintptr_t)0x0901};
    ml__cupti_callback(NULL, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &rd);
    cr_expect_eq(ngot, 0, "creation records nothing");
    cr_expect_eq(device_queries, 1);
    alloc(rd.context, 9, 0x1000, 100);
    cr_expect_eq(device_queries, 1, "the allocation found the device in the cache");
    cr_expect_eq(got[0].device, 1);
}

Test(collector, context_destruction_carries_uid_and_device, .init = setup) {
    CUpti_ResourceData rd = {.context = (CUcontext)(uintptr_t)0x0303};
    ml__cupti_callback(NULL, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, &rd);
    cr_assert_eq(ngot, 1);
    cr_expect_eq(got[0].op, ML_GPU_OP_CTX_DESTROY);
    cr_expect_eq(got[0].context, 3);
    cr_expect_eq(got[0].device, 3);
}

Test(collector, vmm_location_wins_over_the_context, .init = setup) {
    static const CUresult ok = CUDA_SUCCESS;
    CUmemGenericAllocationHandle h = 0x77;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 6;
    cuMemCreate_params pa = {.handle = &h, .size = 2 << 20, .prop = &prop};
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    d.callbackSite = CUPTI_API_EXIT;
    d.functionParams = &pa;
    d.functionReturnValue = (void *)&ok;
    d.context = (CUcontext)(uintptr_t)0x0101;
    d.contextUid = 1;
    ml__cupti_callback(NULL, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &d);
    cr_assert_eq(ngot, 1);
    cr_expect_eq(got[0].device, 6);
    cr_expect_eq(device_queries, 0);
}

Test(collector, inactive_or_unbound_records_nothing, .init = setup) {
    ml_atomic_store_relaxed(&ml__cupti_active, 0);
    alloc((CUcontext)(uintptr_t)0x0102, 1, 0x1000, 100);
    cr_expect_eq(ngot, 0);
    ml_atomic_store_relaxed(&ml__cupti_active, 1);
    ml__record = NULL;
    alloc((CUcontext)(uintptr_t)0x0102, 1, 0x1000, 100);
    cr_expect_eq(ngot, 0);
}

Test(collector, fatal_error_detaches_once, .init = setup) {
    CUpti_StateData sd;
    memset(&sd, 0, sizeof sd);
    ml__cupti_callback(NULL, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR, &sd);
    cr_expect_eq(ml_atomic_load_relaxed(&ml__cupti_active), 0);
    alloc((CUcontext)(uintptr_t)0x0102, 1, 0x1000, 100);
    cr_expect_eq(ngot, 0, "nothing after CUPTI gave up");
}
