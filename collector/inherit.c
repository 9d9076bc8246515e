/* inherit.c - the blocks a followed fork child holds from its parent.
 *
 * A forked child holds a copy of every block its parent had live at the
 * fork, but its trace starts at the fork: its analysis does not know them.
 * Its exit scan would then see a block the child allocated and stored only
 * in one of them (a table the parent made) as pointed to by nothing, and
 * call it definitely lost, where valgrind, which follows forks, calls it
 * reachable (tests/leaks/lk_forkref.c). So:
 *
 *  1. the parent's forking thread writes ML_BLOB_FORK into its ring just
 *     before the fork (interpose/runtime.c, fork_prepare), and the child
 *     finds the fork's number in its own ring header (fork_seq);
 *  2. when stage 1 reads that blob, the parent's analysis has every record
 *     before it once stage 2 is idle: its live blocks are copied
 *     (ml__inherit_fork);
 *  3. the child's image takes the copy when it opens (ml__inherit_take),
 *     and marks the inherited blocks it frees (ml__inherit_freed);
 *  4. its exit scan takes the inherited blocks still held as nodes of the
 *     pointer graph, and reports verdicts for its own blocks only
 *     (exit_scan.c).
 *
 * The inherited blocks themselves are not reported: they are the parent's
 * allocations (docs/analysis.md, "Forked children"). Copies are bounded
 * (ML__INHERIT_MAX_BYTES for all of them at once): past it a child has
 * none, and its verdicts are as they were without (documented).
 */
#include "collector_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ml__inherit_s {
    uint32_t slot, seq;   /* the parent image's slot, and the fork's number */
    ml_live_block_t *b;   /* the parent's live blocks at the fork, by address */
    uint8_t *freed;       /* b[i] was freed by the child */
    size_t n;
    uint64_t skipped;     /* none copied, over the bounds: the parent's live blocks */
    struct ml__inherit_s *next;
};

static void inherit_free(ml_collector_t *c, ml__inherit_t *e) {
    if (!e) return;
    c->inherit_bytes -= e->n * (sizeof *e->b + 1);
    free(e->b);
    free(e->freed);
    free(e);
}

void ml__inherit_fork(ml_collector_t *c, ml__proc_t *p, const uint8_t *blob, uint32_t len) {
    ml_blob_fork_t f;
    if (len < sizeof f || !p->info.analysis) return;
    memcpy(&f, blob, sizeof f);
    ml__flush(c);
    ml__stage2_wait(c); /* the analysis has every record before the fork */
    ml__inherit_t *e = calloc(1, sizeof *e);
    if (!e) return; /* the child finds no copy: as without one */
    e->slot = p->info.slot;
    e->seq = f.seq;
    /* A fork child that forks passes on what it inherited and still holds,
     * with its own blocks (a subshell of a subshell). Over the bound (or out
     * of memory) the copy is empty: the child still finds it, and does not
     * look for it further. A copy whose child never comes (the fork failed)
     * stays until the collector ends, counted in the bound. */
    uint64_t live = ml_analysis_live_count(p->info.analysis) + (p->inh ? p->inh->n : 0);
    int64_t n = 0;
    bool fits = live <= ML__INHERIT_MAX_BLOCKS &&
                c->inherit_bytes + live * (sizeof(ml_live_block_t) + 1) <= ML__INHERIT_MAX_BYTES;
    if (fits) n = ml_analysis_live_blocks(p->info.analysis, &e->b);
    if (fits && n >= 0 && p->inh) {
        ml_live_block_t *own = e->b, *all = NULL;
        uint8_t *is_own = NULL;
        n = ml__inherit_merge(p->inh, own, (size_t)n, &all, &is_own);
        free(own);
        free(is_own);
        e->b = all;
    }
    if (n > 0 && !(e->freed = calloc((size_t)n, 1))) n = -1;
    if (n <= 0 && live) {
        free(e->b);
        e->b = NULL;
        n = 0;
        e->skipped = live;
        c->inherit_skipped++;
    }
    e->n = (size_t)n;
    c->inherit_bytes += e->n * (sizeof *e->b + 1);
    e->next = c->inherit;
    c->inherit = e;
}

/* The copy for (slot, seq), unlinked from the collector's list; NULL when
 * there is none (yet). */
static ml__inherit_t *unlink_copy(ml_collector_t *c, uint32_t slot, uint32_t seq) {
    for (ml__inherit_t **e = &c->inherit; *e; e = &(*e)->next)
        if ((*e)->slot == slot && (*e)->seq == seq) {
            ml__inherit_t *hit = *e;
            *e = hit->next;
            hit->next = NULL;
            return hit;
        }
    return NULL;
}

void ml__inherit_take(ml_collector_t *c, ml__proc_t *p) {
    uint32_t seq = p->ring->fork_seq;
    if (!seq) return;
    uint32_t ps = c->ctl->procs[p->info.slot].parent_slot;
    ml__proc_t *q = ps < c->nseen ? c->procs[ps] : NULL;
    /* The parent wrote the blob before it forked, so before this image
     * registered: below the parent's head now, if not read yet. */
    uint64_t until = q && q->ring && !q->done ? ml_atomic_load_acquire(&q->ring->head) : 0;
    while (!(p->inh = unlink_copy(c, ps, seq)) && q && q->ring && !q->done && (q->pos < until || q->bl_head))
        if (!ml__drain(c, q, false)) break;
    if (p->inh && !p->inh->n) { /* none was kept */
        p->inherit_skipped = p->inh->skipped;
        ml__inherit_release(c, p);
    }
}

void ml__inherit_freed(ml__inherit_t *e, uint64_t ptr, bool freed) {
    size_t lo = 0, hi = e->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->b[mid].ptr < ptr) lo = mid + 1;
        else hi = mid;
    }
    /* A failed realloc (freed false) gives the block back. */
    if (lo < e->n && e->b[lo].ptr == ptr) e->freed[lo] = freed;
}

int64_t ml__inherit_merge(const ml__inherit_t *e, const ml_live_block_t *own, size_t nown,
                          ml_live_block_t **out, uint8_t **is_own) {
    size_t cap = nown + (e ? e->n : 0);
    ml_live_block_t *m = malloc((cap ? cap : 1) * sizeof *m);
    uint8_t *o = malloc(cap ? cap : 1);
    if (!m || !o) {
        free(m);
        free(o);
        return -1;
    }
    size_t k = 0, i = 0;
    for (size_t j = 0; e && j < e->n; j++) {
        if (e->freed[j]) continue;
        const ml_live_block_t *x = &e->b[j];
        uint64_t end = x->ptr + (x->size ? x->size : 1);
        for (; i < nown && own[i].ptr < x->ptr; i++) {
            m[k] = own[i];
            o[k++] = 1;
        }
        /* A block of the child's over it (the parent's copy went, and the
         * child allocated there): the child's holds. */
        bool clash = (i < nown && own[i].ptr < end) ||
                     (k && o[k - 1] && m[k - 1].ptr + (m[k - 1].size ? m[k - 1].size : 1) > x->ptr);
        if (clash) continue;
        m[k] = *x;
        o[k++] = 0;
    }
    for (; i < nown; i++) {
        m[k] = own[i];
        o[k++] = 1;
    }
    *out = m;
    *is_own = o;
    return (int64_t)k;
}

void ml__inherit_release(ml_collector_t *c, ml__proc_t *p) {
    inherit_free(c, p->inh);
    p->inh = NULL;
}

void ml__inherit_free_all(ml_collector_t *c) {
    if (c->inherit_skipped)
        fprintf(stderr,
                "memlens: warning: forked children given no copy of their parent's blocks: %llu (over %llu M "
                "blocks, or %llu MiB at once): "
                "a block those children held only through an inherited one is reported as definitely "
                "lost (docs/analysis.md, \"Forked children\")\n",
                (unsigned long long)c->inherit_skipped, (unsigned long long)(ML__INHERIT_MAX_BLOCKS >> 20),
                (unsigned long long)(ML__INHERIT_MAX_BYTES >> 20));
    while (c->inherit) {
        ml__inherit_t *e = c->inherit;
        c->inherit = e->next;
        inherit_free(c, e);
    }
}
