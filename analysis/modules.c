/* modules.c - the module map a trace recorded, for exports that carry it
 * (the pprof mapping table, report/pprof.c).
 *
 * The session keeps every module it was told about, in the order the trace
 * named them: the program, its libraries, and every dlopen, including the
 * ones dlclosed before the end (their frames still point into them). The
 * table only grows while records are fed, and each entry's strings are
 * allocated on their own, so what ml_analysis_module() hands out stays valid
 * until ml_analysis_free().
 */
#include "analysis_internal.h"

#include <errno.h>

size_t ml_analysis_module_count(const ml_analysis_t *a) {
    return a->nmods;
}

int ml_analysis_module(const ml_analysis_t *a, size_t i, ml_module_t *out) {
    if (i >= a->nmods) return -ERANGE;
    const ml__module_t *m = &a->mods[i];
    *out = (ml_module_t){
        .path = m->path,
        .base = m->base,
        .lo = m->lo,
        .hi = m->hi,
        .build_id = m->build_id,
        .build_id_len = m->build_id_len,
        .loaded = m->loaded,
    };
    return 0;
}
