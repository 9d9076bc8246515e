/* gpu_session.c - the GPU queries that need the analysis session: its GPU
 * state, and the symbolized frames of a GPU site's stack (the stacks are the
 * session's, shared with the heap). Above gpu.c and the symbolizer; gpu.c
 * itself never sees a session.
 */
#include "analysis_internal.h"
#include "gpu_internal.h"

#include <string.h>

const ml_gpu_t *ml_analysis_gpu(const ml_analysis_t *a) {
    return a ? a->gpu : NULL;
}

/* CUDA's own frames between the callback and the program: the driver, CUPTI
 * and the runtime as shared libraries, and the runtime when it is linked
 * statically (nvcc's default) and so lives in the program: its entry points
 * (cudaMalloc) and its internal functions, which CUDA 12 and 13 name
 * libcudart_static_<40 hex digits> (local symbols, one per function). */
static bool is_cuda_frame(const ml_frame_t *f) {
    if (ml__frame_is_allocator(f)) return true; /* memlens' own (libmemlens*) */
    if (f->module) {
        const char *base = strrchr(f->module, '/');
        base = base ? base + 1 : f->module;
        if (!strncmp(base, "libcuda.", 8) || !strncmp(base, "libcupti", 8) ||
            !strncmp(base, "libcudart", 9) || !strncmp(base, "libnvidia-", 10))
            return true;
    }
    const char *fn = f->function;
    if (!fn || fn[0] == '[') return false;
    if (!strncmp(fn, "cuda", 4) || !strncmp(fn, "__cuda", 6) || !strncmp(fn, "cudart::", 8) ||
        !strncmp(fn, "libcudart_static_", 17))
        return true;
    /* Driver entry points: cuMemAlloc_v2, cuMemCreate, ... */
    return fn[0] == 'c' && fn[1] == 'u' && fn[2] >= 'A' && fn[2] <= 'Z';
}

size_t ml_gpu_stack_frames(const ml_analysis_t *ca, uint32_t stack, ml_frame_t *out, size_t max) {
    ml_analysis_t *a = (ml_analysis_t *)ca; /* the symbolizer caches what it resolves */
    if (!a || !a->sym || !stack || !max) return 0;
    size_t n = 0;
    bool leading = true;
    uint32_t node = stack;
    for (int guard = 0; node && node < a->nnodes && n < max && guard < ML_MAX_DEPTH * 4; guard++) {
        int32_t mod = a->node_module[node];
        const ml__module_t *m = mod >= 0 && (uint32_t)mod < a->nmods ? &a->mods[mod] : NULL;
        ml__pc_frames_t pf;
        if (ml__sym_resolve(a->sym, mod, m, a->node_pc[node], &pf) < 0) break;
        for (uint32_t j = 0; j < pf.n && n < max; j++) {
            if (leading && is_cuda_frame(&pf.f[j])) continue;
            leading = false;
            out[n++] = pf.f[j];
        }
        node = a->node_parent[node];
    }
    return n;
}
