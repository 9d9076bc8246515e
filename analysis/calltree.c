/* calltree.c - the call tree: the sites' costs arranged along their stacks.
 *
 * There is one call tree, and this file builds it. ml_analysis_build() keeps
 * the whole top-down tree (ml_analysis_calltree) and a pruned copy of it
 * for the report (ml_analysis_flame: the JSON's "flame" and the HTML flame
 * graph); the viewer shows the same tree, or, when a filter hides sites or
 * it is turned bottom-up, a tree built here with the same key from the
 * sites it keeps (ml_calltree_build). No consumer merges frames or sums
 * costs itself.
 *
 * The merge key. A node is a function in its caller's context: the child of
 * node P for frame f is the one whose first frame has f's function, file
 * and module. So
 * - the different lines of one function that reach the same callee are one
 *   node (its `line` is that of the first frame merged, in site order);
 * - same-named functions of different files or modules (static functions,
 *   two libraries' copies of a helper) stay apart;
 * - inlined frames (ml_frame_t.inlined) are frames like the others, so an
 *   inlined function is a node of its own under the function it was inlined
 *   into; an inlined and an out-of-line call of one function from the same
 *   caller merge (the node's `inlined` is its first frame's);
 * - without debug info the file is NULL: an ELF symbol still names the
 *   function, and its calls merge per module; without even a symbol the
 *   function reads "[module+0xOFFSET]" with the return address's offset, so
 *   every call site of an unnamed function is a node of its own (nothing
 *   says which addresses belong to one function).
 * The strings are compared by address: the symbolizer interns them, so the
 * frames of one build's sites have one pointer per distinct string.
 *
 * Costs. A node's inclusive cost is the sum over the sites whose path passes
 * through it, its self cost the sum over the sites whose path ends there.
 * The root, "all", holds every site (a site without frames only there). A
 * site whose stack repeats a function (recursion) passes through one node
 * per repetition, each at its own depth, and counts once in each; a node's
 * inclusive cost never exceeds its parent's.
 */
#include "analysis_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const ml_frame_t root_frame = {.function = "all"};

/* The most trie nodes a site's path is followed through (sites.c walks
 * stacks up to 1024 nodes; a longer one fails the frame count). */
#define MEMO_WALK 1025

/* ------------------------------------------------------------------------- */
/* Building                                                                  */
/* ------------------------------------------------------------------------- */

typedef struct {
    ml_calltree_node_t *v;
    size_t n, cap;
    int32_t *slot; /* open addressing: (parent, function, file, module) -> node; -1: empty */
    size_t slot_cap;
} tree_t;

static uint64_t key_hash(int32_t parent, const ml_frame_t *f) {
    uint64_t h = (uint64_t)(uint32_t)parent * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)(uintptr_t)f->function * 0xc2b2ae3d27d4eb4full;
    h ^= (uint64_t)(uintptr_t)f->file * 0x165667b19e3779f9ull;
    h ^= (uint64_t)(uintptr_t)f->module * 0x27d4eb2f165667c5ull;
    return h ^ (h >> 31);
}

static bool same_key(const ml_calltree_node_t *c, int32_t parent, const ml_frame_t *f) {
    return c->parent == parent && c->frame->function == f->function && c->frame->file == f->file &&
           c->frame->module == f->module;
}

static int grow_slots(tree_t *t) {
    size_t cap = t->slot_cap ? t->slot_cap * 2 : 1024;
    int32_t *s = malloc(cap * sizeof *s);
    if (!s) return -ENOMEM;
    memset(s, 0xff, cap * sizeof *s);
    for (size_t i = 1; i < t->n; i++) { /* the root is in no slot */
        size_t j = key_hash(t->v[i].parent, t->v[i].frame) & (cap - 1);
        while (s[j] >= 0)
            j = (j + 1) & (cap - 1);
        s[j] = (int32_t)i;
    }
    free(t->slot);
    t->slot = s;
    t->slot_cap = cap;
    return 0;
}

static int32_t new_node(tree_t *t, int32_t parent, const ml_frame_t *f) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        if (cap > INT32_MAX) return -1;
        ml_calltree_node_t *v = realloc(t->v, cap * sizeof *v);
        if (!v) return -1;
        t->v = v;
        t->cap = cap;
    }
    int32_t id = (int32_t)t->n++;
    ml_calltree_node_t *c = &t->v[id];
    memset(c, 0, sizeof *c);
    c->frame = f;
    c->parent = parent;
    c->first_child = -1;
    c->next_sibling = -1;
    if (parent >= 0) {
        /* Newest child first; consumers order children by cost anyway. */
        c->depth = t->v[parent].depth + 1;
        c->next_sibling = t->v[parent].first_child;
        t->v[parent].first_child = id;
    }
    return id;
}

/* The child of `parent` for frame f, created when missing; -1: no memory. */
static int32_t child(tree_t *t, int32_t parent, const ml_frame_t *f) {
    if ((t->n + 1) * 2 > t->slot_cap && grow_slots(t) < 0) return -1;
    size_t j = key_hash(parent, f) & (t->slot_cap - 1);
    for (; t->slot[j] >= 0; j = (j + 1) & (t->slot_cap - 1))
        if (same_key(&t->v[t->slot[j]], parent, f)) return t->slot[j];
    int32_t id = new_node(t, parent, f);
    if (id >= 0) t->slot[j] = id;
    return id;
}

static void site_costs(const ml_site_t *s, uint64_t c[ML_COSTS]) {
    c[ML_COST_PEAK] = s->peak_bytes;
    c[ML_COST_LEAKED] = s->leaked_bytes;
    c[ML_COST_ALLOCATED] = s->bytes_allocated;
    c[ML_COST_CALLS] = s->alloc_calls;
    c[ML_COST_TEMPORARY] = s->temporary_allocs;
}

static void add(uint64_t *dst, const uint64_t c[ML_COSTS]) {
    for (int k = 0; k < ML_COSTS; k++)
        dst[k] += c[k];
}

/* Inclusive costs from the self costs: a path has one node per depth, so
 * the sites passing through a node are those ending in its subtree. A
 * child is made after its parent, so its id is larger: children first. The
 * build then touches a node once per site, not once per frame. */
static void sum_inclusive(ml_calltree_node_t *v, size_t n) {
    for (size_t i = n; i-- > 0;) {
        add(v[i].incl, v[i].self);
        if (i) add(v[v[i].parent].incl, v[i].incl);
    }
}

/* Site s top-down along the trie (ml__site_trie_t): from the deepest
 * ancestor of its node already placed in the tree (memo[n]: the tree node
 * of node n's whole path; -1: not yet), one lookup per frame below it.
 * The nodes are made in the same order as the frame-by-frame walk makes
 * them (in site order, outermost first), so their ids, links and frames
 * are the same. Returns the site's tree node, -1: no memory, -2: walk the
 * site frame by frame instead. */
static int32_t trie_walk(tree_t *t, const ml_site_t *s, uint32_t node, uint32_t skip, const ml__site_trie_t *tr,
                         int32_t *memo, uint32_t *path) {
    if (!node || node >= tr->nnodes || !s->nframes) return -2;
    if (!skip && memo[node] >= 0) return t->v[memo[node]].depth == s->nframes ? memo[node] : -2;
    uint32_t np = 0, n = node;
    uint64_t want = 0;
    do {
        if (np == MEMO_WALK || !tr->node_nframes[n]) return -2;
        path[np++] = n;
        want += tr->node_nframes[n];
        n = tr->node_parent[n];
    } while (n && n < tr->nnodes && memo[n] < 0);
    int32_t at = n && n < tr->nnodes ? memo[n] : 0;
    if (skip >= tr->node_nframes[node]) return -2;
    want = want + t->v[at].depth - skip;
    if (want != s->nframes) return -2; /* not the trie's path (a walk cut short) */
    uint32_t k = t->v[at].depth; /* top-down frame k is frames[nframes - 1 - k] */
    while (np) {
        uint32_t p = path[--np], c = tr->node_nframes[p] - (p == node ? skip : 0);
        for (uint32_t j = 0; j < c; j++, k++)
            if ((at = child(t, at, &s->frames[s->nframes - 1 - k])) < 0) return -1;
        if (p != node || !skip) memo[p] = at;
    }
    return at;
}

/* Sites between two calls of the progress callback. */
#define PROGRESS_SITES 4096

static int64_t build(const ml_site_t *sites, size_t nsites, const bool *use, bool bottom_up,
                     const ml__site_trie_t *tr, ml_calltree_node_t **out,
                     void (*progress)(void *ctx, size_t done, size_t total), void *ctx) {
    tree_t t = {0};
    int32_t *memo = NULL;
    uint32_t *path = NULL;
    if (tr) {
        memo = malloc((tr->nnodes ? tr->nnodes : 1) * sizeof *memo);
        path = malloc(MEMO_WALK * sizeof *path);
        if (!memo || !path) {
            free(memo);
            free(path);
            return -ENOMEM;
        }
        memset(memo, 0xff, tr->nnodes * sizeof *memo);
    }
    *out = NULL;
    /* The last site's path: its frames (in walk order) and their nodes.
     * Consecutive sites mostly share the start of their walk (clang-format:
     * 97 % of the frames top-down, 86 % bottom-up), and where the frames
     * have the same key as the last site's, so do the nodes: the lookups
     * are skipped, which changes no node. */
    const ml_frame_t **last = NULL;
    int32_t *last_node = NULL;
    uint32_t nlast = 0, last_cap = 0;

    /* Each node is made by a frame of a site: their count bounds the tree,
     * and the array is taken once (ml_huge_alloc: in huge pages when large),
     * then trimmed to what was used. Where that much address space is
     * refused (strict overcommit), the array grows as the tree does. */
    size_t bound = 1;
    for (size_t i = 0; i < nsites; i++)
        if (!use || use[i]) bound += sites[i].nframes;
    if (bound > (size_t)INT32_MAX) bound = (size_t)INT32_MAX;
    if ((t.v = ml_huge_alloc(bound * sizeof *t.v, false))) t.cap = bound;
    if (new_node(&t, -1, &root_frame) < 0) goto oom;
    for (size_t i = 0; i < nsites; i++) {
        const ml_site_t *s = &sites[i];
        if (progress && i % PROGRESS_SITES == 0) progress(ctx, i, nsites);
        if (i + 2 < nsites) { /* the frames of sites further on are elsewhere: ask for them now */
            const ml_site_t *n2 = &sites[i + 2];
            const char *fp = (const char *)n2->frames, *end = fp + (size_t)n2->nframes * sizeof *n2->frames;
            for (int l = 0; l < 16 && fp < end; l++, fp += 64) __builtin_prefetch(fp);
        }
        if (use && !use[i]) continue;
        if (s->nframes > last_cap) {
            uint32_t cap = last_cap ? last_cap : 64;
            while (cap < s->nframes) cap *= 2;
            const ml_frame_t **l = realloc(last, cap * sizeof *l);
            if (l) last = l;
            int32_t *ln = l ? realloc(last_node, cap * sizeof *ln) : NULL;
            if (ln) last_node = ln;
            if (!l || !ln) goto oom;
            last_cap = cap;
        }
        uint64_t c[ML_COSTS];
        site_costs(s, c);
        int32_t node = 0;
        if (tr) {
            node = trie_walk(&t, s, tr->site_node[i], tr->site_skip[i], tr, memo, path);
            if (node == -1) goto oom;
            if (node >= 0) {
                nlast = 0; /* the last path is not in last[] */
                add(t.v[node].self, c);
                continue;
            }
            node = 0;
        }
        bool same = true;
        for (uint32_t k = 0; k < s->nframes; k++) {
            /* frames[] is innermost first: top-down walks it backwards. */
            const ml_frame_t *f = &s->frames[bottom_up ? k : s->nframes - 1 - k];
            if (same && k < nlast && last[k]->function == f->function && last[k]->file == f->file &&
                last[k]->module == f->module) {
                node = last_node[k];
            } else {
                same = false;
                if ((node = child(&t, node, f)) < 0) goto oom;
                last[k] = f;
                last_node[k] = node;
            }
        }
        nlast = s->nframes;
        add(t.v[node].self, c);
    }
    free(last);
    free(last_node);
    free(memo);
    free(path);
    free(t.slot);
    sum_inclusive(t.v, t.n);
    if (t.n < t.cap) {
        ml_calltree_node_t *v = realloc(t.v, t.n * sizeof *t.v);
        if (v) t.v = v;
    }
    *out = t.v;
    return (int64_t)t.n;
oom:
    free(last);
    free(last_node);
    free(memo);
    free(path);
    free(t.v);
    free(t.slot);
    return -ENOMEM;
}

int64_t ml_calltree_build(const ml_site_t *sites, size_t nsites, const bool *use, bool bottom_up,
                          ml_calltree_node_t **out) {
    return build(sites, nsites, use, bottom_up, NULL, out, NULL, NULL);
}

int64_t ml_calltree_build_progress(const ml_site_t *sites, size_t nsites, const bool *use,
                                   bool bottom_up, ml_calltree_node_t **out,
                                   void (*progress)(void *ctx, size_t done, size_t total),
                                   void *ctx) {
    return build(sites, nsites, use, bottom_up, NULL, out, progress, ctx);
}

int64_t ml__calltree_build(const ml_site_t *sites, size_t nsites, const ml__site_trie_t *trie,
                           ml_calltree_node_t **out) {
    return build(sites, nsites, NULL, false, trie, out, NULL, NULL);
}

/* ------------------------------------------------------------------------- */
/* The flame tree: the call tree pruned for the report                       */
/* ------------------------------------------------------------------------- */

/* The flame metrics: the four the report's flame graph can size frames by. */
static const int flame_costs[] = {ML_COST_ALLOCATED, ML_COST_PEAK, ML_COST_LEAKED, ML_COST_CALLS};

typedef struct {
    double score;
    uint32_t depth;
    int32_t node;
} keep_t;

static int cmp_keep(const void *x, const void *y) {
    const keep_t *a = x, *b = y;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if (a->depth != b->depth) return a->depth < b->depth ? -1 : 1;
    return a->node < b->node ? -1 : a->node > b->node;
}

static double frac(uint64_t v, uint64_t total) {
    return total ? (double)v / (double)total : 0;
}

int ml__calltree_prune(const ml_calltree_node_t *t, size_t n, uint32_t max_nodes,
                       double min_fraction, ml_calltree_node_t **out, size_t *nout) {
    *out = NULL;
    *nout = 0;
    if (!n) return 0;
    double minf = min_fraction > 0 ? min_fraction : ML_FLAME_MIN_FRACTION;
    size_t maxn = max_nodes ? max_nodes : ML_FLAME_MAX_NODES;
    keep_t *keep = malloc(n * sizeof *keep);
    int32_t *map = malloc(n * sizeof *map); /* node -> output index, -1: pruned */
    int32_t *queue = malloc(n * sizeof *queue);
    ml_calltree_node_t *o = NULL;
    int rc = -ENOMEM;
    if (!keep || !map || !queue) goto out;
    /* Keep the nodes at or above min_fraction of at least one flame metric,
     * then the max_nodes best. A child never scores above its parent, and
     * ties go to the shallower node, so the kept set is a subtree. */
    size_t nk = 0;
    for (size_t i = 0; i < n; i++) {
        double sc = 0;
        for (size_t k = 0; k < sizeof flame_costs / sizeof *flame_costs; k++) {
            double f = frac(t[i].incl[flame_costs[k]], t[0].incl[flame_costs[k]]);
            if (f > sc) sc = f;
        }
        map[i] = -1;
        if (i == 0) sc = 2.0;
        if (i == 0 || sc >= minf) keep[nk++] = (keep_t){sc, t[i].depth, (int32_t)i};
    }
    qsort(keep, nk, sizeof *keep, cmp_keep);
    if (nk > maxn) nk = maxn;
    for (size_t i = 0; i < nk; i++)
        map[keep[i].node] = 0;
    o = calloc(nk, sizeof *o);
    if (!o) goto out;
    /* Parents before children (breadth first over the kept nodes). */
    size_t qh = 0, qt = 0, no = 0;
    queue[qt++] = 0;
    map[0] = (int32_t)no;
    o[no] = t[0];
    o[no].parent = o[no].first_child = o[no].next_sibling = -1;
    no++;
    while (qh < qt) {
        int32_t in = queue[qh++];
        int32_t po = map[in], last = -1;
        for (int32_t c = t[in].first_child; c >= 0; c = t[c].next_sibling) {
            if (map[c] < 0) continue;
            int32_t oi = (int32_t)no++;
            map[c] = oi;
            o[oi] = t[c];
            o[oi].parent = po;
            o[oi].first_child = o[oi].next_sibling = -1;
            if (last < 0)
                o[po].first_child = oi;
            else
                o[last].next_sibling = oi;
            last = oi;
            queue[qt++] = c;
        }
    }
    *out = o;
    *nout = no;
    o = NULL;
    rc = 0;
out:
    free(o);
    free(queue);
    free(map);
    free(keep);
    return rc;
}
