/* session.c - an analysis session's life: creating it, and freeing it with
 * everything its parts built (the GPU state, the build results, the
 * symbolizer). The one file that knows every part of a session, so it sits
 * above them all; the streaming pass (analysis.c), the build (sites.c), the
 * snapshot and loading (snapshot.c, load.c) each know only theirs.
 */
#include "analysis_internal.h"
#include "gpu_internal.h" /* ml__gpu_free */

#include <errno.h>
#include <stdlib.h>

int ml_analysis_new(ml_analysis_t **out) {
    ml_analysis_t *a = calloc(1, sizeof *a);
    if (!a) return -ENOMEM;
    a->stats = calloc(16, sizeof *a->stats);
    if (!a->stats) {
        free(a);
        return -ENOMEM;
    }
    a->stats_cap = 16;
    a->nstats = 1; /* stats[0]: allocations without a usable stack */
    a->stats[0].min_size = UINT64_MAX;
    a->page_size = 4096;
    a->proc.page_size = 4096;
    a->proc.exe = a->proc.parent_trace = a->proc.producer = "";
    a->tl_width = 1;
    a->hist.size_first = 3;
    a->hist.size_last = 3;
    *out = a;
    return 0;
}

int ml_analysis_new_light(ml_analysis_t **out) {
    int rc = ml_analysis_new(out);
    if (rc == 0) (*out)->light = true;
    return rc;
}

void ml_analysis_free(ml_analysis_t *a) {
    if (!a) return;
    ml__gpu_free(a->gpu);
    if (a->b) {
        ml__built_free(a->b);
        free(a->b);
    }
    ml__sym_free(a->sym);
    ml__live_free(&a->heap);
    ml_map_free(&a->maps);
    free(a->map_starts);
    free(a->realloc_stash);
    free(a->node_parent);
    free(a->node_pc);
    free(a->node_module);
    free(a->pending_nodes);
    free(a->node_stat);
    free(a->stats);
    for (uint32_t i = 0; i < a->nmods; i++) {
        free(a->mods[i].path);
        free(a->mods[i].build_id);
    }
    free(a->mods);
    free(a->loaded_sorted);
    for (int i = 0; i < 2; i++) {
        free(a->mom[i].grave);
        free(a->snap_cells[i]);
    }
    const ml__region_t *r = a->pages.map.e;
    for (uint64_t i = 0; i < a->pages.map.cap; i++) free(r[i].cnt);
    ml_map_free(&a->pages.map);
    for (uint32_t i = 0; i < a->nthreads; i++) free(a->threads[i].name);
    free(a->threads);
    for (size_t i = 0; i < sizeof a->proc_strings / sizeof a->proc_strings[0]; i++)
        free(a->proc_strings[i]);
    for (size_t i = 0; i < a->nwarn; i++) free(a->warn[i]);
    free(a->warn);
    free(a->warn_built);
    free(a);
}
