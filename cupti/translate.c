/* translate.c - CUPTI callback -> ml_gpu_event_t, a pure function.
 *
 * One table row per handled driver API: the callback id, the memory kind,
 * whether it allocates or frees, and a reader that pulls address, size and
 * handles out of the API's params struct (generated_cuda_meta.h, included by
 * cupti.h). Versioned names are what the callbacks report: cudaMalloc runs
 * cuMemAlloc_v2, and the _ptsz variants (per-thread default stream builds)
 * have the same params layout as the plain ones.
 *
 * Only the driver domain is used. Every runtime call runs a driver call
 * underneath, so counting both would count cudaMalloc twice, while driver
 * callbacks also see libraries that call the driver directly (NCCL, cuBLAS,
 * PyTorch's expandable segments) and programs that link cudart statically.
 * The legacy 32-bit entry points (cuMemAlloc without _v2, ...) are not
 * handled: cuda.h has mapped them to _v2 since CUDA 3.2.
 */
#include "ml_cupti.h"

#include <stdbool.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Arrays                                                                    */
/* ------------------------------------------------------------------------- */

/* Bits per channel element of an array format; 0 for unknown formats. The
 * packed formats (UNORM_INT8X4, ...) carry all their channels in one element,
 * block-compressed formats are averaged per texel (BC1/BC4: 8 bytes per 4x4
 * block, the others 16), and the planar video formats per pixel. */
static unsigned format_bits(unsigned f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X1:
    case CU_AD_FORMAT_BC2_UNORM:
    case CU_AD_FORMAT_BC2_UNORM_SRGB:
    case CU_AD_FORMAT_BC3_UNORM:
    case CU_AD_FORMAT_BC3_UNORM_SRGB:
    case CU_AD_FORMAT_BC5_UNORM:
    case CU_AD_FORMAT_BC5_SNORM:
    case CU_AD_FORMAT_BC6H_UF16:
    case CU_AD_FORMAT_BC6H_SF16:
    case CU_AD_FORMAT_BC7_UNORM:
    case CU_AD_FORMAT_BC7_UNORM_SRGB:
        return 8;
    case CU_AD_FORMAT_BC1_UNORM:
    case CU_AD_FORMAT_BC1_UNORM_SRGB:
    case CU_AD_FORMAT_BC4_UNORM:
    case CU_AD_FORMAT_BC4_SNORM:
        return 4;
    case CU_AD_FORMAT_NV12:
        return 12;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X1:
    case CU_AD_FORMAT_NV16:
    case CU_AD_FORMAT_YUY2:
        return 16;
    case CU_AD_FORMAT_P010:
    case CU_AD_FORMAT_P016:
        return 24;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
    case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X2:
    case CU_AD_FORMAT_UNORM_INT_101010_2:
    case CU_AD_FORMAT_P210:
    case CU_AD_FORMAT_P216:
    case CU_AD_FORMAT_Y210:
    case CU_AD_FORMAT_Y216:
    case CU_AD_FORMAT_AYUV:
    case CU_AD_FORMAT_Y410:
    case CU_AD_FORMAT_Y444_PLANAR8:
        return 32;
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X4:
    case CU_AD_FORMAT_Y416:
    case CU_AD_FORMAT_Y444_PLANAR10:
        return 64;
    default:
        return 0;
    }
}

uint64_t ml_cupti_array_bytes(size_t width, size_t height, size_t depth, unsigned format,
                              unsigned channels) {
    uint64_t texels = (uint64_t)(width ? width : 1) * (height ? height : 1) * (depth ? depth : 1);
    uint64_t bits = (uint64_t)format_bits(format) * (channels ? channels : 1);
    return (texels * bits + 7) / 8;
}

/* A mipmapped array: the levels halve every dimension down to 1. */
static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels) {
    uint64_t total = 0;
    size_t w = d->Width, h = d->Height, z = d->Depth;
    if (levels == 0) levels = 1;
    for (unsigned l = 0; l < levels && l < 32; l++) {
        total += ml_cupti_array_bytes(w, h, z, d->Format, d->NumChannels);
        w = w > 1 ? w / 2 : 1;
        h = h > 1 ? h / 2 : h;
        z = z > 1 ? z / 2 : z;
    }
    return total;
}

/* ------------------------------------------------------------------------- */
/* The table                                                                 */
/* ------------------------------------------------------------------------- */

typedef void (*reader_t)(const void *params, ml_gpu_event_t *e);

typedef struct {
    CUpti_CallbackId cbid;
    uint8_t op; /* ML_GPU_OP_ALLOC (read at exit) or ML_GPU_OP_FREE / POOL_TRIM (at entry) */
    uint8_t kind;
    reader_t read;
} api_t;

#define P(type) const type *p = params

static void rd_alloc(const void *params, ml_gpu_event_t *e) {
    P(cuMemAlloc_v2_params);
    e->ptr = p->dptr ? *p->dptr : 0;
    e->size = p->bytesize;
}
static void rd_pitch(const void *params, ml_gpu_event_t *e) {
    P(cuMemAllocPitch_v2_params);
    e->ptr = p->dptr ? *p->dptr : 0;
    /* The driver chose the pitch; the rows are pitch bytes apart. */
    e->size = (uint64_t)(p->pPitch ? *p->pPitch : p->WidthInBytes) * p->Height;
}
static void rd_managed(const void *params, ml_gpu_event_t *e) {
    P(cuMemAllocManaged_params);
    e->ptr = p->dptr ? *p->dptr : 0;
    e->size = p->bytesize;
}
static void rd_alloc_host(const void *params, ml_gpu_event_t *e) {
    P(cuMemAllocHost_v2_params);
    e->ptr = p->pp ? (uint64_t)(uintptr_t)*p->pp : 0;
    e->size = p->bytesize;
}
static void rd_host_alloc(const void *params, ml_gpu_event_t *e) {
    P(cuMemHostAlloc_params);
    e->ptr = p->pp ? (uint64_t)(uintptr_t)*p->pp : 0;
    e->size = p->bytesize;
}
static void rd_host_register(const void *params, ml_gpu_event_t *e) {
    P(cuMemHostRegister_v2_params); /* cuMemHostRegister (301) has the same layout */
    e->ptr = (uint64_t)(uintptr_t)p->p;
    e->size = p->bytesize;
}
static void rd_alloc_async(const void *params, ml_gpu_event_t *e) {
    P(cuMemAllocAsync_params); /* and _ptsz */
    e->ptr = p->dptr ? *p->dptr : 0;
    e->size = p->bytesize;
    e->stream = (uint64_t)(uintptr_t)p->hStream;
}
static void rd_alloc_pool(const void *params, ml_gpu_event_t *e) {
    P(cuMemAllocFromPoolAsync_params); /* and _ptsz */
    e->ptr = p->dptr ? *p->dptr : 0;
    e->size = p->bytesize;
    e->stream = (uint64_t)(uintptr_t)p->hStream;
    e->handle = (uint64_t)(uintptr_t)p->pool;
}
static void rd_create(const void *params, ml_gpu_event_t *e) {
    P(cuMemCreate_params);
    e->ptr = p->handle ? (uint64_t)*p->handle : 0;
    e->size = p->size;
    if (p->prop) {
        if (p->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
            e->device = p->prop->location.id;
        else if (p->prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
                 p->prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
                 p->prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
            e->flags |= ML_GPU_F_HOST;
    }
}
static void rd_reserve(const void *params, ml_gpu_event_t *e) {
    P(cuMemAddressReserve_params);
    e->ptr = p->ptr ? *p->ptr : 0;
    e->size = p->size;
}
static void rd_map(const void *params, ml_gpu_event_t *e) {
    P(cuMemMap_params);
    e->ptr = p->ptr;
    e->size = p->size;
    e->handle = (uint64_t)p->handle;
}
static void rd_array(const void *params, ml_gpu_event_t *e) {
    P(cuArrayCreate_v2_params);
    e->ptr = p->pHandle ? (uint64_t)(uintptr_t)*p->pHandle : 0;
    if (p->pAllocateArray) {
        const CUDA_ARRAY_DESCRIPTOR *d = p->pAllocateArray;
        e->size = ml_cupti_array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels);
    }
    e->flags |= ML_GPU_F_ESTIMATED;
}
static void rd_array3d(const void *params, ml_gpu_event_t *e) {
    P(cuArray3DCreate_v2_params);
    e->ptr = p->pHandle ? (uint64_t)(uintptr_t)*p->pHandle : 0;
    if (p->pAllocateArray) {
        const CUDA_ARRAY3D_DESCRIPTOR *d = p->pAllocateArray;
        e->size = ml_cupti_array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
    }
    e->flags |= ML_GPU_F_ESTIMATED;
}
static void rd_mipmap(const void *params, ml_gpu_event_t *e) {
    P(cuMipmappedArrayCreate_params);
    e->ptr = p->pHandle ? (uint64_t)(uintptr_t)*p->pHandle : 0;
    if (p->pMipmappedArrayDesc) e->size = mipmap_bytes(p->pMipmappedArrayDesc, p->numMipmapLevels);
    e->flags |= ML_GPU_F_ESTIMATED;
}

static void rd_free(const void *params, ml_gpu_event_t *e) {
    P(cuMemFree_v2_params);
    e->ptr = p->dptr;
}
static void rd_free_async(const void *params, ml_gpu_event_t *e) {
    P(cuMemFreeAsync_params); /* and _ptsz */
    e->ptr = p->dptr;
    e->stream = (uint64_t)(uintptr_t)p->hStream;
}
static void rd_free_host(const void *params, ml_gpu_event_t *e) {
    P(cuMemFreeHost_params);
    e->ptr = (uint64_t)(uintptr_t)p->p;
}
static void rd_unregister(const void *params, ml_gpu_event_t *e) {
    P(cuMemHostUnregister_params);
    e->ptr = (uint64_t)(uintptr_t)p->p;
}
static void rd_release(const void *params, ml_gpu_event_t *e) {
    P(cuMemRelease_params);
    e->ptr = (uint64_t)p->handle;
}
static void rd_address_free(const void *params, ml_gpu_event_t *e) {
    P(cuMemAddressFree_params);
    e->ptr = p->ptr;
    e->size = p->size;
}
static void rd_unmap(const void *params, ml_gpu_event_t *e) {
    P(cuMemUnmap_params);
    e->ptr = p->ptr;
    e->size = p->size;
}
static void rd_array_destroy(const void *params, ml_gpu_event_t *e) {
    P(cuArrayDestroy_params);
    e->ptr = (uint64_t)(uintptr_t)p->hArray;
}
static void rd_mipmap_destroy(const void *params, ml_gpu_event_t *e) {
    P(cuMipmappedArrayDestroy_params);
    e->ptr = (uint64_t)(uintptr_t)p->hMipmappedArray;
}
static void rd_pool_trim(const void *params, ml_gpu_event_t *e) {
    P(cuMemPoolTrimTo_params);
    e->handle = (uint64_t)(uintptr_t)p->pool;
    e->size = p->minBytesToKeep;
}

#undef P

#define CB(name) CUPTI_DRIVER_TRACE_CBID_##name
#define A ML_GPU_OP_ALLOC
#define F ML_GPU_OP_FREE
#define K(k) ML_GPU_KIND_##k

static const api_t apis[] = {
    {CB(cuMemAlloc_v2), A, K(DEVICE), rd_alloc},
    {CB(cuMemAllocPitch_v2), A, K(PITCH), rd_pitch},
    {CB(cuMemAllocManaged), A, K(MANAGED), rd_managed},
    {CB(cuMemAllocHost_v2), A, K(HOST_PINNED), rd_alloc_host},
    {CB(cuMemHostAlloc), A, K(HOST_PINNED), rd_host_alloc},
    {CB(cuMemHostRegister_v2), A, K(HOST_REGISTERED), rd_host_register},
    {CB(cuMemHostRegister), A, K(HOST_REGISTERED), rd_host_register},
    {CB(cuMemAllocAsync), A, K(ASYNC), rd_alloc_async},
    {CB(cuMemAllocAsync_ptsz), A, K(ASYNC), rd_alloc_async},
    {CB(cuMemAllocFromPoolAsync), A, K(POOL), rd_alloc_pool},
    {CB(cuMemAllocFromPoolAsync_ptsz), A, K(POOL), rd_alloc_pool},
    {CB(cuMemCreate), A, K(VMM_PHYSICAL), rd_create},
    {CB(cuMemAddressReserve), A, K(VMM_RESERVE), rd_reserve},
    {CB(cuMemMap), A, K(VMM_MAP), rd_map},
    {CB(cuArrayCreate_v2), A, K(ARRAY), rd_array},
    {CB(cuArray3DCreate_v2), A, K(ARRAY), rd_array3d},
    {CB(cuMipmappedArrayCreate), A, K(ARRAY), rd_mipmap},
    /* cuMemFree frees any device pointer (cuMemAlloc, pitch, managed, and
     * stream-ordered ones synchronously): the analysis finds the kind. */
    {CB(cuMemFree_v2), F, K(DEVICE), rd_free},
    {CB(cuMemFreeAsync), F, K(ASYNC), rd_free_async},
    {CB(cuMemFreeAsync_ptsz), F, K(ASYNC), rd_free_async},
    {CB(cuMemFreeHost), F, K(HOST_PINNED), rd_free_host},
    {CB(cuMemHostUnregister), F, K(HOST_REGISTERED), rd_unregister},
    {CB(cuMemRelease), F, K(VMM_PHYSICAL), rd_release},
    {CB(cuMemAddressFree), F, K(VMM_RESERVE), rd_address_free},
    {CB(cuMemUnmap), F, K(VMM_MAP), rd_unmap},
    {CB(cuArrayDestroy), F, K(ARRAY), rd_array_destroy},
    {CB(cuMipmappedArrayDestroy), F, K(ARRAY), rd_mipmap_destroy},
    {CB(cuMemPoolTrimTo), ML_GPU_OP_POOL_TRIM, K(POOL), rd_pool_trim},
};

#undef CB
#undef A
#undef F
#undef K

#define NAPIS (sizeof apis / sizeof apis[0])

const CUpti_CallbackId ml_cupti_driver_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2,
    CUPTI_DRIVER_TRACE_CBID_cuArray3DCreate_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    CUPTI_DRIVER_TRACE_CBID_cuArrayDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo,
};
const size_t ml_cupti_driver_cbids_n = sizeof ml_cupti_driver_cbids / sizeof ml_cupti_driver_cbids[0];

_Static_assert(sizeof ml_cupti_driver_cbids / sizeof ml_cupti_driver_cbids[0] == NAPIS,
               "every handled API is enabled");

/* ------------------------------------------------------------------------- */
/* Translation                                                               */
/* ------------------------------------------------------------------------- */

static const api_t *find_api(CUpti_CallbackId cbid) {
    /* 28 rows, scanned linearly: a few nanoseconds, and the table stays in
     * the order a reader checks it against cupti_driver_cbid.h. */
    for (size_t i = 0; i < NAPIS; i++)
        if (apis[i].cbid == cbid) return &apis[i];
    return NULL;
}

static void init_event(ml_gpu_event_t *out, uint8_t op, uint8_t kind, CUpti_CallbackId cbid) {
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->op = op;
    out->kind = kind;
    out->cbid = (uint16_t)cbid;
    out->device = ML_GPU_DEVICE_UNKNOWN;
}

static int translate_driver(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, ml_gpu_event_t *out) {
    const api_t *api = find_api(cbid);
    if (!api || !cb->functionParams) return 0;
    bool exit_site = cb->callbackSite == CUPTI_API_EXIT;
    bool success = exit_site && cb->functionReturnValue &&
                   *(const CUresult *)cb->functionReturnValue == CUDA_SUCCESS;
    uint8_t op = api->op;
    if (op == ML_GPU_OP_ALLOC) {
        if (!success) return 0;
    } else if (exit_site) {
        /* The free was recorded at entry; say so if it did not happen. */
        if (success || !cb->functionReturnValue || op != ML_GPU_OP_FREE) return 0;
        op = ML_GPU_OP_FREE_FAILED;
    } else if (cb->callbackSite != CUPTI_API_ENTER) {
        return 0;
    }
    init_event(out, op, api->kind, cbid);
    out->context = cb->contextUid;
    out->correlation = cb->correlationId;
    api->read(cb->functionParams, out);
    /* A failed allocation is caught above; a "successful" one that returned
     * no address (size 0 on some drivers) and frees of NULL are no events. */
    if (op != ML_GPU_OP_POOL_TRIM && !out->ptr) return 0;
    return 1;
}

static int translate_resource(CUpti_CallbackId cbid, const CUpti_ResourceData *rd, ml_gpu_event_t *out) {
    (void)rd;
    if (cbid != CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) return 0;
    /* The kind is meaningless here: everything the context still holds dies
     * with it. The caller fills context and device from rd->context. */
    init_event(out, ML_GPU_OP_CTX_DESTROY, ML_GPU_KIND_DEVICE, cbid);
    return 1;
}

int ml_cupti_translate(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata,
                       ml_gpu_event_t *out) {
    if (!cbdata || !out) return 0;
    switch (domain) {
    case CUPTI_CB_DOMAIN_DRIVER_API:
        return translate_driver(cbid, cbdata, out);
    case CUPTI_CB_DOMAIN_RESOURCE:
        return translate_resource(cbid, cbdata, out);
    default:
        return 0;
    }
}
