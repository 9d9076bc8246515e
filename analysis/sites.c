/* sites.c - ml_analysis_build(): from recorded stacks to sites, leaks,
 * fragmentation moments, timeline, threads and the call tree.
 *
 * A site is a unique stack once the allocator's own frames are removed.
 * Recorded stacks are leaf node ids in the stack trie; each node's return
 * address expands into one or more frames (inlining). Walking from the leaf,
 * the first frame that is not the allocator's (ml__frame_is_allocator) is
 * frames[0]; its node and its position inside that node's expansion are the
 * site's key, so stacks that differ only inside malloc or operator new merge.
 */
#define _GNU_SOURCE
#include "analysis_internal.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_WALK 1024

const char *ml_leak_kind_name(ml_leak_kind_t k) {
    static const char *const names[] = {"definite", "indirect", "reachable", "possible"};
    return k < ML_LEAK_KINDS ? names[k] : "?";
}

void ml__built_free(struct ml__built_s *b) {
    if (!b) return;
    free(b->sites);
    free(b->site_tnode);
    free(b->site_tskip);
    free(b->node_nfr);
    free(b->frames);
    free(b->groups);
    for (int i = 0; i < ML_MOMENTS; i++) free(b->cells[i]);
    free(b->tl);
    free(b->threads);
    free(b->tree);
    free(b->flame);
    free(b->alloc_fn_hits);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------------------- */
/* Site keys                                                                 */
/* ------------------------------------------------------------------------- */

/* A site's key -> its index: the first frame of the site is frame `skip` of
 * node `node`; the key is (node + 1) << 32 | skip, never 0. */
typedef struct {
    uint64_t key;
    uint32_t site;
    uint32_t unused;
} keyent_t;

ML_MAP_TYPED(site_keys, keyent_t, 1024)

static uint64_t site_key(uint32_t node, uint32_t skip) {
    return ((uint64_t)node + 1) << 32 | skip;
}

static int node_frames(ml_analysis_t *a, uint32_t node, ml__pc_frames_t *out) {
    int32_t mod = node < a->nnodes ? a->node_module[node] : -1;
    const ml__module_t *m = mod >= 0 && (uint32_t)mod < a->nmods ? &a->mods[mod] : NULL;
    return ml__sym_resolve(a->sym, mod, m, node < a->nnodes ? a->node_pc[node] : 0, out);
}

/* Which --alloc-fn pattern names frame f (its whole name or the name shown),
 * or -1. */
static int alloc_fn_of(const struct ml__built_s *b, const ml_frame_t *f) {
    if (!b->nalloc_fns || !f->function) return -1;
    char shown[1024], sym[1024];
    ml_frame_short_name(f->function, shown, sizeof shown);
    bool fortran = ml__fortran_symbol(f->function, sym, sizeof sym) ||
                   ml__ada_symbol(f->function, sym, sizeof sym);
    for (size_t i = 0; i < b->nalloc_fns; i++)
        if (ml_alloc_fn_match(b->alloc_fns[i], f->function) ||
            ml_alloc_fn_match(b->alloc_fns[i], shown) || (fortran && ml_alloc_fn_match(b->alloc_fns[i], sym)))
            return (int)i;
    return -1;
}

/* The key of a recorded stack: see the comment at the top. Frames of the
 * --alloc-fn functions count as the allocator's; each pattern that dropped
 * one is counted once for the stack. */
static int stack_key(ml_analysis_t *a, struct ml__built_s *b, uint32_t leaf, uint32_t *knode,
                     uint32_t *kskip) {
    uint32_t n = leaf;
    for (int guard = 0; n && n < a->nnodes && guard < MAX_WALK; guard++) {
        ml__pc_frames_t pf;
        int rc = node_frames(a, n, &pf);
        if (rc < 0) return rc;
        for (uint32_t j = 0; j < pf.n; j++) {
            if (ml__frame_is_allocator(&pf.f[j])) continue;
            int k = alloc_fn_of(b, &pf.f[j]);
            if (k >= 0) {
                /* hits[n..2n): the last stack counted for each pattern */
                if (b->alloc_fn_hits[b->nalloc_fns + (size_t)k] != (uint64_t)leaf + 1) {
                    b->alloc_fn_hits[b->nalloc_fns + (size_t)k] = (uint64_t)leaf + 1;
                    b->alloc_fn_hits[k]++;
                }
                continue;
            }
            *knode = n;
            *kskip = j;
            return 0;
        }
        n = a->node_parent[n];
    }
    /* Nothing but allocator frames (or no stack): keep it whole. */
    *knode = leaf;
    *kskip = 0;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* One object loaded at several addresses                                    */
/* ------------------------------------------------------------------------- */

/* A plugin closed and loaded again elsewhere (the loader's gaps moved) runs
 * at other return addresses, so its stacks are other trie nodes, and were
 * other sites with the same frames. As heaptrack merges such stacks by
 * function and line, they are one site here: a node in such an object, or
 * below one, stands for the first node with the same stand-in parent, the
 * same object (path and build-id, same_object) and the same offset in it. canon[n] is
 * that node; NULL when no object was loaded at two addresses (most traces:
 * nothing is computed). A hash collision leaves a node as itself: a site
 * too many, never a wrong one. */
typedef struct {
    uint64_t key;
    uint32_t node;
    uint32_t unused;
} canonent_t;

ML_MAP_TYPED(canon_keys, canonent_t, 1024)

/* The same file: the same path and the same build-id. Without a build-id
 * the file may have been rewritten between the loads: not merged. */
static bool same_object(const ml__module_t *x, const ml__module_t *y) {
    return x->build_id_len && x->build_id_len == y->build_id_len &&
           !memcmp(x->build_id, y->build_id, x->build_id_len) && x->path && y->path && !strcmp(x->path, y->path);
}

/* The object of node n (the first module record of it; -1: none) and n's
 * offset in it (its address when none). */
static int64_t node_place(const ml_analysis_t *a, const uint32_t *ident, uint32_t n, uint64_t *off) {
    int32_t m = a->node_module[n];
    if (m < 0 || (uint32_t)m >= a->nmods) {
        *off = a->node_pc[n];
        return -1;
    }
    *off = a->node_pc[n] - a->mods[m].base;
    return ident[m];
}

static uint64_t canon_key(uint32_t parent, int64_t obj, uint64_t off) {
    uint64_t k = ml_map_hash(((uint64_t)parent << 32 | (uint32_t)obj) ^ ml_map_hash(off));
    return k ? k : 1;
}

/* canon as above into *out (NULL when not needed), or -ENOMEM. */
static int canon_nodes(const ml_analysis_t *a, uint32_t **out) {
    *out = NULL;
    uint32_t *ident = malloc((a->nmods + 1) * sizeof *ident);
    bool *twin = calloc(a->nmods + 1, sizeof *twin);
    if (!ident || !twin) {
        free(ident);
        free(twin);
        return -ENOMEM;
    }
    bool any = false;
    for (uint32_t i = 0; i < a->nmods; i++) {
        ident[i] = i;
        for (uint32_t j = 0; j < i; j++)
            if (same_object(&a->mods[i], &a->mods[j])) {
                ident[i] = ident[j];
                if (a->mods[i].base != a->mods[j].base) twin[i] = twin[ident[j]] = any = true;
                break;
            }
    }
    for (uint32_t i = 0; i < a->nmods; i++) twin[i] = twin[i] || twin[ident[i]];
    if (!any) {
        free(ident);
        free(twin);
        return 0;
    }
    /* under[n]: n's object was loaded at two addresses, or an ancestor's
     * was. Only those nodes are looked up; every other node is itself. */
    uint32_t *canon = malloc((size_t)a->nnodes * sizeof *canon);
    uint8_t *under = calloc(a->nnodes, 1);
    ml_map_t m = {0};
    int rc = canon && under ? 0 : -ENOMEM;
    for (uint32_t n = 0; n < a->nnodes && rc == 0; n++) {
        canon[n] = n;
        uint32_t p = n ? a->node_parent[n] : 0;
        int32_t mod = a->node_module[n];
        under[n] = (p && under[p]) || (mod >= 0 && (uint32_t)mod < a->nmods && twin[mod]);
        if (!n || !under[n]) continue;
        uint64_t off, coff;
        int64_t obj = node_place(a, ident, n, &off);
        bool existed;
        canonent_t *e = canon_keys_put(&m, canon_key(canon[p], obj, off), &existed);
        if (!e) {
            rc = -ENOMEM;
            break;
        }
        if (!existed) {
            e->node = n;
            continue;
        }
        uint32_t c = e->node;
        if (canon[a->node_parent[c]] == canon[p] && node_place(a, ident, c, &coff) == obj && coff == off)
            canon[n] = c;
    }
    ml_map_free(&m);
    free(under);
    free(ident);
    free(twin);
    if (rc < 0) {
        free(canon);
        return rc;
    }
    *out = canon;
    return 0;
}

/* The frames of a site starting at (node, skip) up to the root: written
 * to out (NULL: only counted); returns how many, or a negative errno.
 * memo[n] (NULL: none) keeps node n's frames once resolved: the sites'
 * walks pass each node once per site below it (st18: 40 nodes a site, two
 * walks, 21 million lookups in the symbolizer's table, 18 % of a report),
 * an array read instead. */
static int64_t site_frames(ml_analysis_t *a, ml__pc_frames_t *memo, uint32_t node, uint32_t skip,
                           ml_frame_t *out) {
    uint32_t n = node;
    int64_t k = 0;
    for (int guard = 0; n && n < a->nnodes && guard < MAX_WALK; guard++) {
        ml__pc_frames_t pf;
        if (memo && memo[n].f) {
            pf = memo[n];
        } else {
            int rc = node_frames(a, n, &pf);
            if (rc < 0) return rc;
            if (memo) memo[n] = pf;
        }
        uint32_t from = n == node ? skip : 0;
        if (out && pf.n > from) memcpy(out + k, pf.f + from, (pf.n - from) * sizeof *out);
        k += pf.n > from ? pf.n - from : 0;
        n = a->node_parent[n];
    }
    return k;
}

/* ------------------------------------------------------------------------- */
/* Suppressions                                                              */
/* ------------------------------------------------------------------------- */

size_t ml__supp_match(const ml_suppressions_t *s, const ml_frame_t *f, uint32_t n);
void ml__supp_hit(const ml_suppressions_t *s, size_t i, uint64_t blocks, uint64_t bytes);
void ml__supp_reset(const ml_suppressions_t *s);

/* ------------------------------------------------------------------------- */
/* Call tree                                                                 */
/* ------------------------------------------------------------------------- */

/* The call tree of every site (calltree.c), and its pruned copy for the
 * report's flame graph. */
static int build_calltree(struct ml__built_s *b, const ml_build_opts_t *o, const ml__site_trie_t *trie) {
    if (o->no_calltree) return 0;
    int64_t n = trie ? ml__calltree_build(b->sites, b->nsites, trie, &b->tree)
                     : ml_calltree_build(b->sites, b->nsites, NULL, false, &b->tree);
    if (n < 0) return (int)n;
    b->ntree = (size_t)n;
    b->flame_max_nodes = o->flame_max_nodes;
    b->flame_min_fraction = o->flame_min_fraction;
    return ml__calltree_prune(b->tree, b->ntree, o->flame_max_nodes, o->flame_min_fraction,
                              &b->flame, &b->nflame);
}

/* ------------------------------------------------------------------------- */
/* Build                                                                     */
/* ------------------------------------------------------------------------- */

static int cmp_site(const void *x, const void *y) {
    const ml_site_t *a = x, *b = y;
    if (a->peak_bytes != b->peak_bytes) return a->peak_bytes > b->peak_bytes ? -1 : 1;
    if (a->leaked_bytes != b->leaked_bytes) return a->leaked_bytes > b->leaked_bytes ? -1 : 1;
    if (a->bytes_allocated != b->bytes_allocated)
        return a->bytes_allocated > b->bytes_allocated ? -1 : 1;
    if (a->alloc_calls != b->alloc_calls) return a->alloc_calls > b->alloc_calls ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int cmp_group(const void *x, const void *y) {
    const ml_leak_group_t *a = x, *b = y;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    return a->site < b->site ? -1 : a->site > b->site;
}

/* Blocks live at a moment, one at a time by address: the live blocks
 * allocated by then, in the live set's (address) order, merged with the
 * moment's graveyard, which alone is copied and sorted. */
/* A close made a sorted copy of the graveyard (16 bytes a block), faulting
 * in fresh pages each time (slow on this VM: a sixth of the collector's page
 * faults on the big heap) for a graveyard dropped right after. Each 24-byte
 * grave becomes a 16-byte block in the same buffer: entry i is read before
 * block i is written over it, and no later entry lies below block i's end. */
_Static_assert(sizeof(ml__grave_t) >= sizeof(ml__fblock_t), "graves are converted in place");

void ml__mstream_take_graves(ml__mstream_t *s, ml__moment_t *m) {
    memset(s, 0, sizeof *s);
    s->m = m;
    s->ng = m->ngrave;
    ml__fblock_t *g = (ml__fblock_t *)(void *)m->grave;
    for (uint64_t i = 0; i < s->ng; i++) {
        ml__fblock_t b = ml__fblock_of_grave(&m->grave[i]);
        memcpy(&g[i], &b, sizeof b);
    }
    s->g = g;
    m->grave = NULL;
    m->ngrave = m->grave_cap = 0;
    ml__sort_fblocks(s->g, s->ng);
}

int ml__mstream_copy_graves(ml__mstream_t *s, const ml__moment_t *m) {
    memset(s, 0, sizeof *s);
    s->m = m;
    s->ng = m ? m->ngrave : 0;
    s->g = s->ng ? malloc(s->ng * sizeof *s->g) : NULL;
    if (s->ng && !s->g) return -ENOMEM;
    for (uint64_t i = 0; i < s->ng; i++) s->g[i] = ml__fblock_of_grave(&m->grave[i]);
    ml__sort_fblocks(s->g, s->ng);
    return 0;
}

int ml__mstream_open(ml__mstream_t *s, const ml_analysis_t *a, const ml__moment_t *m) {
    if (ml__mstream_copy_graves(s, m) < 0) return -ENOMEM;
    if (ml__live_cursor_init(&s->cur, &a->heap) < 0) {
        free(s->g);
        return -ENOMEM;
    }
    return 0;
}

/* The next live block is read straight into *out, and kept aside (`have`)
 * only when a grave comes before it. Read into s->live and then copied out
 * whole, each block was loaded as 16 bytes right after live.c stored it as
 * two words of 8, a load that waits for both stores to leave the store
 * buffer: 70 % of this function's samples in a close of 10 M blocks. */
bool ml__mstream_next(ml__mstream_t *s, ml__fblock_t *out) {
    if (!s->have) {
        if (!s->live_done && ml__live_next_fblock(&s->cur, s->m ? s->m->seq : UINT64_MAX, out)) {
            if (s->gi < s->ng && s->g[s->gi].ptr <= out->ptr) {
                s->live = *out;
                s->have = true;
                *out = s->g[s->gi++];
            }
            return true;
        }
        s->live_done = true;
        if (s->gi < s->ng) {
            *out = s->g[s->gi++];
            return true;
        }
        return false;
    }
    if (s->gi < s->ng && s->g[s->gi].ptr <= s->live.ptr) {
        *out = s->g[s->gi++];
        return true;
    }
    *out = s->live;
    s->have = false;
    return true;
}

void ml__mstream_rewind(ml__mstream_t *s) {
    ml__live_cursor_rewind(&s->cur);
    s->gi = 0;
    s->have = s->live_done = false;
}

void ml__mstream_close(ml__mstream_t *s) {
    ml__live_cursor_free(&s->cur);
    free(s->g);
    memset(s, 0, sizeof *s);
}

static void fill_moment(ml_frag_t *f, const ml__moment_t *m) {
    f->time_ms = m->time_ms;
    f->have_mallinfo = m->have_mallinfo;
    f->mallinfo_time_ms = m->mallinfo_time_ms;
    f->arena = m->mallinfo[0];
    f->hblkhd = m->mallinfo[1];
    f->uordblks = m->mallinfo[2];
    f->fordblks = m->mallinfo[3];
    f->keepcost = m->mallinfo[4];
    f->have_rss = m->have_rss;
    f->rss_bytes = m->rss_bytes;
    f->heap_to_rss = m->rss_bytes ? (double)f->live_bytes / (double)m->rss_bytes : 0;
}

/* The blocks live at the end, walked once for three things: the leaks by
 * site and kind, the end's fragmentation (b->frag[ML_MOMENT_END], which
 * build_frag completes) and the pages each site pins. They were three walks
 * of the live set, each sorting its directory and decoding every block: on
 * 5 M blocks restored from a snapshot, a fifth of the report's time (perf,
 * c-tiny-10M). Each gets the blocks in the order and with the values of its
 * own walk before. When the process did not exit, the leaks are only
 * counted (no kind, nothing lost). */
static int end_walk(ml_analysis_t *a, struct ml__built_s *b, bool judged) {
    ml__mstream_t st; /* the end's stream: the live set alone (for ml__frag_end) */
    if (ml__mstream_open(&st, a, NULL) < 0) return -ENOMEM;
    ml__frag_acc_t acc;
    ml__frag_begin(&acc, a, &b->frag[ML_MOMENT_END]);
    ml__pin_acc_t pin;
    ml__pin_begin(&pin, a);
    ml__eblock_t v[256]; /* a batch: a call to each part per batch, not per block */
    uint32_t n;
    while ((n = ml__live_next_ends(&st.cur, v, 256)) > 0) {
        ml__frag_add_ends(&acc, v, n);
        ml__pin_add_ends(&pin, a, v, n, b->sites);
        for (uint32_t i = 0; i < n; i++) {
            const ml__eblock_t *e = &v[i];
            uint32_t si = a->stats[e->stack < a->nstats ? e->stack : 0].site;
            if (si >= b->nsites) continue;
            uint64_t count = ml__block_count(a, e->ptr, e->size);
            if (!judged) {
                b->leaks.bytes += e->size;
                b->leaks.blocks += count;
                continue;
            }
            ml_leak_kind_t k = ML_LEAK_DEFINITE;
            if (e->reach == ML_REACH_REACHABLE) k = ML_LEAK_REACHABLE;
            else if (e->reach == ML_REACH_INDIRECT) k = ML_LEAK_INDIRECT;
            else if (e->reach == ML_REACH_POSSIBLE) k = ML_LEAK_POSSIBLE;
            else if (a->scanned && e->reach == ML_REACH_UNKNOWN) b->leaks.unscanned_blocks += count;
            b->sites[si].leaked_kind_bytes[k] += e->size;
            b->sites[si].leaked_kind_blocks[k] += count;
        }
    }
    ml__pin_end(&pin, b->sites);
    ml__frag_end(&acc, &st, &b->cells[ML_MOMENT_END]);
    ml__mstream_close(&st);
    return 0;
}

static int build_frag(ml_analysis_t *a, struct ml__built_s *b) {
    for (int w = 0; w < ML_MOMENTS; w++) {
        const ml__moment_t *m = w == ML_MOMENT_PEAK ? &a->mom[0] : w == ML_MOMENT_WORST ? &a->mom[1] : NULL;
        if (m && !m->set) continue;
        int mi = w == ML_MOMENT_PEAK ? 0 : 1;
        if (m && a->snap_frag_set[mi]) {
            /* Computed by the collector (snapshot.c). */
            b->frag[w] = a->snap_frag[mi];
            b->frag[w].allocator_model = ml__allocator_model(a);
            b->frag[w].map_cells = NULL;
            if (a->snap_cells[mi] && b->frag[w].map_ncells) {
                b->cells[w] = malloc(b->frag[w].map_ncells);
                if (!b->cells[w]) return -ENOMEM;
                memcpy(b->cells[w], a->snap_cells[mi], b->frag[w].map_ncells);
                b->frag[w].map_cells = b->cells[w];
            }
            fill_moment(&b->frag[w], m);
            continue;
        }
        if (m) {
            ml__mstream_t st;
            if (ml__mstream_open(&st, a, m) < 0) return -ENOMEM;
            ml__frag_compute(a, &st, &b->frag[w], &b->cells[w]);
            ml__mstream_close(&st);
            fill_moment(&b->frag[w], m);
            continue;
        }
        /* The end: its blocks were walked with the leaks (end_walk), and
         * its moment is now. */
        ml__moment_t now = {.time_ms = a->t.last_time_ms,
                            .have_mallinfo = a->have_mallinfo,
                            .mallinfo_time_ms = a->mallinfo_time_ms,
                            .have_rss = a->have_rss,
                            .rss_bytes = a->t.rss_bytes};
        memcpy(now.mallinfo, a->mallinfo, sizeof now.mallinfo);
        fill_moment(&b->frag[w], &now);
    }
    return 0;
}

static int build_timeline(ml_analysis_t *a, struct ml__built_s *b) {
    b->tl = calloc(ML_TIMELINE_MAX + 1, sizeof *b->tl);
    if (!b->tl) return -ENOMEM;
    size_t n = 0;
    for (uint32_t i = 0; i < ML_TIMELINE_MAX && n < ML_TIMELINE_MAX - 1; i++) {
        const ml__tl_bucket_t *k = &a->tl[i];
        if (!k->used) continue;
        b->tl[n++] = (ml_timeline_point_t){k->t_max, k->heap_max, k->rss, k->mmap_max, k->gpu_max, k->calls};
    }
    /* The last point is the end: what is live at exit. */
    uint32_t end = a->t.last_time_ms;
    if (a->t.complete && a->t.end.duration_ms > end) end = (uint32_t)a->t.end.duration_ms;
    if (n && b->tl[n - 1].time_ms > end) end = b->tl[n - 1].time_ms;
    b->tl[n++] = (ml_timeline_point_t){end, a->t.heap_bytes, a->t.rss_bytes, a->t.mmap_bytes,
                                       a->t.gpu_bytes, a->t.alloc_calls};
    b->ntl = n;
    return 0;
}

static int build_threads(ml_analysis_t *a, struct ml__built_s *b) {
    b->threads = calloc(a->nthreads ? a->nthreads : 1, sizeof *b->threads);
    if (!b->threads) return -ENOMEM;
    size_t n = 0;
    for (uint32_t i = 0; i < a->nthreads; i++) {
        const ml__thread_t *t = &a->threads[i];
        if (!t->seen) continue;
        b->threads[n++] = (ml_thread_stats_t){
            .index = i,
            .tid = t->tid,
            .name = t->name ? t->name : "",
            .alloc_calls = (uint64_t)llround(t->w_calls),
            .bytes_allocated = (uint64_t)llround(t->w_bytes),
            .free_calls = t->free_calls,
            .temporary_allocs = t->temporary,
        };
    }
    b->nthreads = n;
    return 0;
}

/* A function the compiler made to initialise globals or thread_locals
 * (clang's __cxx_global_var_init, gcc's _GLOBAL__sub_I_...) when clang
 * gives it no line, and a thread_local's init and wrapper functions
 * (__tls_init, "TLS init function for x", "TLS wrapper function for x"):
 * the user's line is the frame around it (a thread_local's first use) or
 * inlined in it. */
static bool generated_init(const ml_frame_t *f) {
    const char *fn = f->function;
    /* gcc gives a thread_local's init and wrapper functions the line of its
     * declaration, clang none: either way its first use names the site. */
    if (!strncmp(fn, "TLS init function for ", 22) || !strncmp(fn, "TLS wrapper function for ", 25) ||
        !strcmp(fn, "__tls_init"))
        return true;
    return f->line == 0 && (!strncmp(fn, "__cxx_global_var_init", 21) || !strncmp(fn, "_GLOBAL__sub_I_", 15));
}

/* The C runtime's start-up code linked into the program (crt1.o, crti.o,
 * crtbegin.o): the outermost frames of every stack, never what a site is
 * about, so it names one only as the first own frame when nothing else
 * can. libstdc++ linked in statically (-static-libstdc++) allocates its
 * exception pool from a line-less _GLOBAL__sub_I_eh_alloc.cc called by
 * the loader, and the site was named "_start". */
static bool crt_start(const ml_frame_t *f) {
    const char *fn = f->function;
    return f->line == 0 && (!strcmp(fn, "_start") || !strcmp(fn, "__libc_csu_init") || !strcmp(fn, "_init") ||
                            !strcmp(fn, "frame_dummy") || !strcmp(fn, "__do_global_ctors_aux"));
}


/* A sampled trace's sites: their weighted calls (or bytes) w[i], each
 * rounded, add up to the total rounded once (the totals, fed event by
 * event) within a unit per site, and pprof's alloc_objects then added up to
 * one call less or more than the report's alloc_calls (a python3 run at
 * --sample 512k: 118,791 against 118,792). The sites get the total instead,
 * by largest remainder: each its floor, and one more for the largest
 * fractions until the total is reached. Returns 0 or -ENOMEM. */
typedef struct {
    double frac;
    size_t i;
} share_t;

static int cmp_share(const void *x, const void *y) {
    const share_t *p = x, *q = y;
    if (p->frac != q->frac) return p->frac > q->frac ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

static int share_rounding(ml_site_t *sites, size_t n, const double *w, uint64_t total, size_t field) {
    share_t *v = malloc(n * sizeof *v);
    if (!v) return -ENOMEM;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        double f = floor(w[i]);
        uint64_t *x = (uint64_t *)((char *)&sites[i] + field);
        *x = (uint64_t)f;
        sum += *x;
        v[i] = (share_t){w[i] - f, i};
    }
    qsort(v, n, sizeof *v, cmp_share);
    /* Float sums in another order can leave the total a unit out of reach:
     * at most one more per site, never less than the floors. */
    for (size_t k = 0; k < n && sum < total; k++, sum++) {
        uint64_t *x = (uint64_t *)((char *)&sites[v[k].i] + field);
        ++*x;
    }
    free(v);
    return 0;
}

/* The frame that names a site (docs/analysis.md, "Site names"): the first
 * of the program's own code that has a name. A program whose own frames
 * have none is a stripped executable, and the one whose work is done in
 * libraries (clang-format and the llvm tools are a few KiB of launcher
 * around libclang-cpp and libLLVM) had every site named
 * "[clang-format+0x40b6f9]": then the first frame below it with a name
 * that is not the runtime's (clang::tooling::Replacements::add). Failing
 * both, the first own frame, else frame 0, as before. A compiler-made
 * initialiser without a line names it only when no other own frame can. */
static uint32_t headline_of(const ml_frame_t *f, uint32_t n) {
    uint32_t own = n, generated = n;
    for (uint32_t k = 0; k < n; k++) {
        if (!f[k].own) continue;
        if (own == n) own = k;
        if (f[k].function && f[k].function[0] != '[' && !crt_start(&f[k])) {
            if (!generated_init(&f[k])) return k;
            if (generated == n) generated = k;
        }
    }
    if (generated < n) return generated;
    for (uint32_t k = 0; k < own; k++)
        if (!ml__frame_is_runtime(&f[k])) return k;
    return own < n ? own : 0;
}

int ml__build_sites(ml_analysis_t *a, struct ml__built_s *b, const ml_build_opts_t *o) {
    int rc = 0;
    ml_map_t km = {0};
    uint32_t *site_node = NULL, *site_skip = NULL, *canon = NULL;
    size_t *site_off = NULL;
    ml__pc_frames_t *fmemo = NULL;
    uint8_t *node_nfr = NULL;
    if ((rc = canon_nodes(a, &canon)) < 0) return rc;
    /* Sites: stacks merged by their key. */
    if (o && o->nalloc_fns) {
        b->alloc_fns = o->alloc_fns;
        b->nalloc_fns = o->nalloc_fns;
        b->alloc_fn_hits = calloc(2 * o->nalloc_fns, sizeof *b->alloc_fn_hits);
        if (!b->alloc_fn_hits) {
            rc = -ENOMEM;
            goto out;
        }
    }
    b->sites = ml_huge_alloc((size_t)a->nstats * sizeof *b->sites, true);
    site_node = calloc(a->nstats, sizeof *site_node);
    site_skip = calloc(a->nstats, sizeof *site_skip);
    if (!b->sites || !site_node || !site_skip) {
        rc = -ENOMEM;
        goto out;
    }
    double *wc = calloc(a->nstats, sizeof *wc), *wb = calloc(a->nstats, sizeof *wb);
    if (!wc || !wb) {
        free(wc);
        free(wb);
        rc = -ENOMEM;
        goto out;
    }
    uint64_t peak_seq = a->mom[0].seq;
    for (uint32_t s = 0; s < a->nstats; s++) {
        ml__stack_stats_t *st = &a->stats[s];
        if (st->w_calls == 0 && st->live_blocks == 0 && st->peak_blocks == 0 && st->freed == 0) {
            st->site = UINT32_MAX;
            continue;
        }
        uint32_t kn = 0, ks = 0;
        if (s != 0 && (rc = stack_key(a, b, st->node, &kn, &ks)) < 0) break;
        if (canon && kn < a->nnodes) kn = canon[kn];
        bool existed;
        keyent_t *e = site_keys_put(&km, site_key(kn, ks), &existed);
        if (!e) {
            rc = -ENOMEM;
            break;
        }
        if (!existed) {
            e->site = (uint32_t)b->nsites++;
            b->sites[e->site].min_size = UINT64_MAX;
            site_node[e->site] = kn;
            site_skip[e->site] = ks;
        }
        uint32_t si = e->site;
        st->site = si;
        ml_site_t *x = &b->sites[si];
        uint64_t pb = st->last_change <= peak_seq ? st->live_bytes : st->peak_bytes;
        uint64_t pn = st->last_change <= peak_seq ? st->live_blocks : st->peak_blocks;
        x->stacks++;
        wc[si] += st->w_calls;
        wb[si] += st->w_bytes;
        x->temporary_allocs += st->temporary;
        x->realloc_calls += st->reallocs;
        x->freed_blocks += st->freed;
        x->peak_bytes += a->mom[0].set ? pb : 0;
        x->peak_blocks += a->mom[0].set ? pn : 0;
        x->live_at_exit_bytes += st->live_bytes;
        x->live_at_exit_blocks += st->live_blocks;
        if (st->min_size < x->min_size) x->min_size = st->min_size;
        if (st->max_size > x->max_size) x->max_size = st->max_size;
        x->size_log2_mask |= st->size_mask;
        x->lifetime_ms_sum += st->life_sum;
        if (st->life_max > x->lifetime_ms_max) x->lifetime_ms_max = st->life_max;
        x->lifetime_log2_mask |= st->life_mask;
        x->thread_mask |= st->thread_mask;
    }
    for (size_t i = 0; i < b->nsites; i++) {
        b->sites[i].alloc_calls = (uint64_t)llround(wc[i]);
        b->sites[i].bytes_allocated = (uint64_t)llround(wb[i]);
        if (b->sites[i].min_size == UINT64_MAX) b->sites[i].min_size = 0;
        b->sites[i].id = (uint32_t)i;
    }
    if (rc == 0 && a->t.sample_bytes && b->nsites) {
        rc = share_rounding(b->sites, b->nsites, wc, a->t.alloc_calls, offsetof(ml_site_t, alloc_calls));
        if (rc == 0)
            rc = share_rounding(b->sites, b->nsites, wb, a->t.bytes_allocated, offsetof(ml_site_t, bytes_allocated));
    }
    free(wc);
    free(wb);
    if (rc < 0) goto out;

    /* Frames, kept as offsets until the array stops moving. */
    site_off = calloc(b->nsites + 1, sizeof *site_off);
    fmemo = calloc(a->nnodes ? a->nnodes : 1, sizeof *fmemo); /* NULL: walks without it */
    if (!site_off) {
        rc = -ENOMEM;
        goto out;
    }
    size_t total = 0;
    for (size_t i = 0; i < b->nsites; i++) {
        site_off[i] = total;
        int64_t k = site_node[i] == 0 ? 1 : site_frames(a, fmemo, site_node[i], site_skip[i], NULL);
        if (k < 0) {
            rc = (int)k;
            goto out;
        }
        total += (size_t)k;
    }
    site_off[b->nsites] = total;
    /* Its size is counted first (the symbolizer's answers are cached by
     * then, so the second walk is cheap): an array grown by doubling
     * copied python3-dicts' 10 MB over and over. */
    if (total > SIZE_MAX / sizeof *b->frames || !(b->frames = ml_huge_alloc(total * sizeof *b->frames, false))) {
        rc = -ENOMEM;
        goto out;
    }
    b->nframes = b->frames_cap = total;
    for (size_t i = 0; i < b->nsites; i++) {
        ml_frame_t *f = b->frames + site_off[i];
        if (site_node[i] == 0) {
            *f = (ml_frame_t){.function = ml__sym_intern(a->sym, "[no stack]")};
            continue;
        }
        int64_t k = site_frames(a, fmemo, site_node[i], site_skip[i], f);
        if (k < 0) {
            rc = (int)k;
            goto out;
        }
    }
    /* The expansions' lengths stay for the call tree (ml__site_trie_t). */
    if (fmemo && (node_nfr = malloc(a->nnodes ? a->nnodes : 1))) {
        for (uint32_t n = 0; n < a->nnodes; n++)
            node_nfr[n] = fmemo[n].f && fmemo[n].n <= UINT8_MAX ? (uint8_t)fmemo[n].n : 0;
    }
    free(fmemo);
    fmemo = NULL;
    for (size_t i = 0; i < b->nsites; i++) {
        b->sites[i].frames = b->frames + site_off[i];
        b->sites[i].nframes = (uint32_t)(site_off[i + 1] - site_off[i]);
        b->sites[i].headline = headline_of(b->sites[i].frames, b->sites[i].nframes);
    }

    /* Leaks: every block live at the end, by site and kind; when the
     * process did not exit, only counted (no kind, nothing lost). */
    bool judged = !ml_totals_unjudged(&a->t, NULL);
    b->leaks.judged = judged;
    if ((rc = end_walk(a, b, judged)) < 0) goto out;
    if (o->suppressions) ml__supp_reset(o->suppressions);
    size_t ng = 0;
    for (size_t i = 0; i < b->nsites; i++) {
        ml_site_t *x = &b->sites[i];
        for (int k = 0; k < ML_LEAK_KINDS; k++) {
            if (k == ML_LEAK_REACHABLE) continue;
            x->leaked_bytes += x->leaked_kind_bytes[k];
            x->leaked_blocks += x->leaked_kind_blocks[k];
        }
        if (o->suppressions && x->live_at_exit_blocks) {
            size_t k = ml__supp_match(o->suppressions, x->frames, x->nframes);
            if (k != (size_t)-1) {
                x->suppressed = true;
                x->suppressed_by = ml_suppressions_pattern(o->suppressions, k, NULL, NULL);
                ml__supp_hit(o->suppressions, k, x->live_at_exit_blocks, x->live_at_exit_bytes);
            }
        }
        for (int k = 0; k < ML_LEAK_KINDS; k++)
            if (x->leaked_kind_blocks[k]) ng++;
    }
    b->groups = calloc(ng ? ng : 1, sizeof *b->groups);
    if (!b->groups) {
        rc = -ENOMEM;
        goto out;
    }
    ml_leaks_t *L = &b->leaks;
    for (size_t i = 0; i < b->nsites; i++) {
        const ml_site_t *x = &b->sites[i];
        for (int k = 0; k < ML_LEAK_KINDS; k++) {
            if (!x->leaked_kind_blocks[k]) continue;
            b->groups[L->ngroups++] = (ml_leak_group_t){(uint32_t)i, (ml_leak_kind_t)k,
                                                        x->leaked_kind_bytes[k],
                                                        x->leaked_kind_blocks[k], x->suppressed};
            L->bytes += x->leaked_kind_bytes[k];
            L->blocks += x->leaked_kind_blocks[k];
            L->kind_bytes[k] += x->leaked_kind_bytes[k];
            L->kind_blocks[k] += x->leaked_kind_blocks[k];
            if (x->suppressed) {
                L->suppressed_bytes += x->leaked_kind_bytes[k];
                L->suppressed_blocks += x->leaked_kind_blocks[k];
            } else if (k != ML_LEAK_REACHABLE) {
                L->gate_bytes += x->leaked_kind_bytes[k];
            }
            if (k != ML_LEAK_REACHABLE) {
                L->lost_bytes += x->leaked_kind_bytes[k];
                L->lost_blocks += x->leaked_kind_blocks[k];
            }
        }
    }
    qsort(b->groups, L->ngroups, sizeof *b->groups, cmp_group);
    L->groups = b->groups;
    L->scanned = a->scan.scanned;
    L->scan_status = a->scan.scan_status;
    L->scan_root_bytes = a->scan.scan_root_bytes;
    L->scan_heap_bytes = a->scan.scan_heap_bytes;
    L->scan_duration_us = a->scan.scan_duration_us;

    if ((rc = build_frag(a, b)) < 0) goto out;

    /* Order sites by peak, leaks, volume; ids follow the order. Leak groups
     * and stack statistics refer to sites by index: remap them. */
    uint32_t *remap = malloc((b->nsites ? b->nsites : 1) * sizeof *remap);
    if (!remap) {
        rc = -ENOMEM;
        goto out;
    }
    qsort(b->sites, b->nsites, sizeof *b->sites, cmp_site);
    for (size_t i = 0; i < b->nsites; i++) {
        remap[b->sites[i].id] = (uint32_t)i;
        b->sites[i].id = (uint32_t)i;
    }
    /* The sites' trie keys follow them, for the call tree. */
    uint32_t *tnode = malloc((b->nsites ? b->nsites : 1) * sizeof *tnode);
    uint32_t *tskip = malloc((b->nsites ? b->nsites : 1) * sizeof *tskip);
    if (tnode && tskip) {
        for (size_t i = 0; i < b->nsites; i++) {
            tnode[remap[i]] = site_node[i];
            tskip[remap[i]] = site_skip[i];
        }
    }
    free(site_node);
    free(site_skip);
    site_node = tnode;
    site_skip = tskip;
    for (size_t i = 0; i < L->ngroups; i++) b->groups[i].site = remap[b->groups[i].site];
    for (uint32_t s = 0; s < a->nstats; s++)
        if (a->stats[s].site < b->nsites) a->stats[s].site = remap[a->stats[s].site];
    free(remap);

    if ((rc = build_timeline(a, b)) < 0) goto out;
    if ((rc = build_threads(a, b)) < 0) goto out;
    ml__site_trie_t trie = {site_node, site_skip, a->node_parent, node_nfr, a->nnodes};
    rc = build_calltree(b, o, site_node && site_skip && node_nfr ? &trie : NULL);
    if (rc == 0 && site_node && site_skip && node_nfr) {
        b->site_tnode = site_node;
        b->site_tskip = site_skip;
        b->node_nfr = node_nfr;
        b->trie_nnodes = a->nnodes;
        site_node = site_skip = NULL;
        node_nfr = NULL;
    }
out:
    ml_map_free(&km);
    free(canon);
    free(site_node);
    free(site_skip);
    free(site_off);
    free(fmemo);
    free(node_nfr);
    return rc;
}

int ml_analysis_build(ml_analysis_t *a, const ml_build_opts_t *opts, char *err, size_t errlen) {
    ml_build_opts_t none = {0};
    if (!opts) opts = &none;
    ml__warn_unbuild(a); /* this build says what holds now */
    if (!a->sym) {
        int rc = ml__sym_new(&a->sym, opts->no_symbols);
        if (rc < 0) {
            snprintf(err, errlen, "out of memory");
            return rc;
        }
        ml__sym_set_owner(a->sym, a);
    }
    if (a->b) ml__built_free(a->b);
    else if (!(a->b = calloc(1, sizeof *a->b))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    a->hist.live_at_end = a->heap.count; /* recorded blocks, as the lifetime counts */
    int rc = ml__build_sites(a, a->b, opts);
    ml__sym_verify_summary(a->sym);
    if (rc < 0) {
        ml__built_free(a->b);
        snprintf(err, errlen, "out of memory while building the report");
        return rc;
    }
    bool attached = a->proc.options & ML_OPT_ATTACHED;
    if (attached && a->t.exited)
        ml__warn_built(a, "attached trace (memlens attach): it covers the window from the attach to the "
                    "program's exit; \"leaked\" is what was allocated in the window and still live at the "
                    "exit, with the exit scan's kinds, but the blocks allocated before the attach are "
                    "unknown: a block held only through one of them reads as lost");
    else if (attached && ml_analysis_ended_in_window(a))
        ml__warn_built(a, "attached trace (memlens attach): it covers the window from the attach to the "
                    "program's end (it ended without an exit: no exit scan); \"leaked\" is what was allocated "
                    "in the window and still live at its end, with no leak kinds");
    else if (attached)
        ml__warn_built(a, "attached trace (memlens attach): it covers the window from the attach to the detach; "
                    "\"leaked\" is what was allocated in the window and still live at detach (growth), "
                    "since leak kinds need the program's exit");
    if (a->t.unknown_frees && attached)
        ml__warn_built(a, "%llu frees of blocks allocated before memlens attached (or by an allocator "
                    "memlens does not see): not counted at any site",
                 (unsigned long long)a->t.unknown_frees);
    else if (a->t.unknown_frees && (a->proc.options & ML_OPT_FORKED))
        /* A forked child frees what its parent allocated before the fork:
         * their allocations are in the parent's trace (parent_trace). This
         * read "allocated before memlens started" in every shell subshell's
         * report under --follow-fork. */
        ml__warn_built(a, "%llu frees of blocks this process did not allocate: blocks inherited from its "
                    "parent at the fork (their allocations are in the parent's trace), or of an "
                    "allocator memlens does not see",
                 (unsigned long long)a->t.unknown_frees);
    else if (a->t.unknown_frees)
        ml__warn_built(a, "%llu frees of addresses never seen allocated (allocated before memlens "
                    "started, or by an allocator memlens does not see)",
                 (unsigned long long)a->t.unknown_frees);
    if (a->t.complete && (a->t.end.lost_in_crash || a->t.end.lost_dead_collector))
        ml__warn_built(a, "%llu events were lost when the process died mid-event",
                 (unsigned long long)(a->t.end.lost_in_crash + a->t.end.lost_dead_collector));
    /* The recorder's per-thread stash of calls made while it works
     * (interpose/hooks.c, nest_push) was full: a signal handler that
     * allocates, run again and again inside one recorded call. */
    if (a->t.complete && a->t.end.nested_skipped)
        ml__warn_built(a, "%llu allocation calls and frees were made while memlens was busy with another call of "
                          "the same thread (a signal handler that allocates, most likely) and are not in the "
                          "trace: the counts and leaks leave them out",
                       (unsigned long long)a->t.end.nested_skipped);
    /* The recorder gives a process 65,535 thread indices; the threads after
     * them share the last one (docs/recorder.md, "Limits"). */
    if (a->nthreads >= ML__MAX_THREADS && a->threads[ML__MAX_THREADS - 1].seen)
        ml__warn_built(a, "this process started more than 65,535 threads: the last entry of the threads "
                          "table (index %u) counts the 65,536th thread and every one after it together, and "
                          "names the last of them; the totals and the sites count every call",
                       ML__MAX_THREADS - 1);
    if (a->t.complete && a->t.end.truncated_stacks)
        ml__warn_built(a, "%llu stacks were cut at the depth limit (--depth)",
                 (unsigned long long)a->t.end.truncated_stacks);
    ml_unjudged_t u;
    if (ml_totals_unjudged(&a->t, &u) && a->t.end.status_kind == ML_END_RUNNING)
        ml__warn_built(a, "the program was still running when recording stopped (memlens was stopped): "
                          "the blocks live then are not leaks, and the leak gate refuses the trace");
    else if (u.when)
        ml__warn_built(a, "the blocks live %s are not leaks (%s) and have no leak kinds", u.when, u.why);
    else if (!a->scan.scanned && a->t.heap_blocks && !attached) {
        if (a->scan.scan_status)
            ml__warn_built(a, "the exit-time reachability scan failed (%s): every block live at the end "
                        "is reported as a definite leak",
                     strerror(-a->scan.scan_status));
        else
            ml__warn_built(a, "no exit-time reachability scan (the process did not exit normally, or "
                        "the trace predates it): every block live at the end is reported as a "
                        "definite leak");
    }
    if (a->t.sample_bytes)
        ml__warn_built(a, "sampled trace (one allocation per %llu bytes on average): counts and bytes "
                    "are estimates, fragmentation is of the sampled blocks only",
                 (unsigned long long)a->t.sample_bytes);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Queries                                                                   */
/* ------------------------------------------------------------------------- */

static const struct ml__built_s empty_built;

static const struct ml__built_s *built(const ml_analysis_t *a) {
    return a->b ? a->b : &empty_built;
}

const ml_site_t *ml_analysis_sites(const ml_analysis_t *a, size_t *count) {
    *count = built(a)->nsites;
    return built(a)->sites;
}

const ml_leaks_t *ml_analysis_leaks(const ml_analysis_t *a) {
    return &built(a)->leaks;
}

const ml_frag_t *ml_analysis_frag(const ml_analysis_t *a, ml_moment_t m) {
    return m < ML_MOMENTS ? &built(a)->frag[m] : NULL;
}

size_t ml_analysis_timeline(const ml_analysis_t *a, const ml_timeline_point_t **p) {
    *p = built(a)->tl;
    return built(a)->ntl;
}

const ml_histograms_t *ml_analysis_histograms(const ml_analysis_t *a) {
    return &a->hist;
}

size_t ml_analysis_threads(const ml_analysis_t *a, const ml_thread_stats_t **t) {
    *t = built(a)->threads;
    return built(a)->nthreads;
}

size_t ml_analysis_calltree(const ml_analysis_t *a, const ml_calltree_node_t **n) {
    *n = built(a)->tree;
    return built(a)->ntree;
}

size_t ml_analysis_flame(const ml_analysis_t *a, const ml_calltree_node_t **n) {
    *n = built(a)->flame;
    return built(a)->nflame;
}

int64_t ml_analysis_flame_inverted(const ml_analysis_t *a, ml_calltree_node_t **out) {
    const struct ml__built_s *b = built(a);
    *out = NULL;
    if (!b->ntree) return 0;
    ml_calltree_node_t *t;
    int64_t n = ml_calltree_build(b->sites, b->nsites, NULL, true, &t);
    if (n < 0) return n;
    size_t np = 0;
    int rc = ml__calltree_prune(t, (size_t)n, b->flame_max_nodes, b->flame_min_fraction, out, &np);
    free(t);
    return rc < 0 ? rc : (int64_t)np;
}

uint32_t ml__analysis_site_trie(const ml_analysis_t *a, const uint32_t **site_node, const uint32_t **site_skip,
                                const uint32_t **parent, const uint8_t **nframes) {
    const struct ml__built_s *b = built(a);
    *site_node = b->site_tnode;
    *site_skip = b->site_tskip;
    *parent = a->node_parent;
    *nframes = b->node_nfr;
    return b->site_tnode && b->node_nfr ? b->trie_nnodes : 0;
}

size_t ml_analysis_alloc_fns(const ml_analysis_t *a, const char *const **patterns,
                             const uint64_t **hits) {
    const struct ml__built_s *b = a ? a->b : NULL;
    if (patterns) *patterns = b ? b->alloc_fns : NULL;
    if (hits) *hits = b ? b->alloc_fn_hits : NULL;
    return b && b->alloc_fn_hits ? b->nalloc_fns : 0;
}
