/* reach.c - the conservative pointer scan behind leak kinds (ml_reach.h). */
#define _GNU_SOURCE
#include "ml_reach.h"
#include "analysis_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH_BYTES (4u << 20)
#define BATCH_REQS 1024
#define PIECE (1u << 20) /* big blocks and roots are read in pieces */

enum { UNSEEN = 0 };

typedef struct {
    const ml_live_block_t *b;
    size_t n;
    uint64_t lo, hi; /* address range covered by blocks */
    const ml_reach_io_t *io;
    uint8_t *v;
    ml_reach_stats_t *st;
    /* work list */
    uint32_t *work;
    size_t nwork, work_cap;
    /* leaked graph, CSR */
    uint32_t *edges;
    size_t nedges, edges_cap;
    uint32_t *start, *end; /* per block: its edges are edges[start, end) */
    bool collecting;
    bool prior_definite; /* marking: the memory being scanned is a root or a reachable block */
    uint32_t cur; /* block being scanned */
    uint8_t *buf;
    ml_reach_req_t *reqs;
} scan_t;

const char *ml_analysis_allocator_model(const ml_analysis_t *a) {
    return ml__allocator_model(a);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The block holding address p, or -1. */
static int64_t find(const scan_t *s, uint64_t p) {
    if (p < s->lo || p >= s->hi) return -1;
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->b[mid].ptr <= p) lo = mid + 1;
        else hi = mid;
    }
    if (!lo) return -1;
    const ml_live_block_t *b = &s->b[lo - 1];
    uint64_t size = b->size ? b->size : 1;
    if (p - b->ptr >= size) return -1;
    if (s->io->glibc_chunk_alias && p != b->ptr) {
        uint64_t chunk = (b->size + 8 + 15) & ~15ull;
        if (chunk < 32) chunk = 32;
        if (p - b->ptr == chunk - 16) return -1; /* glibc's pointer to the next chunk */
    }
    return (int64_t)(lo - 1);
}

static int push_work(scan_t *s, uint32_t i) {
    if (s->nwork == s->work_cap) {
        size_t cap = s->work_cap ? s->work_cap * 2 : 1024;
        uint32_t *p = realloc(s->work, cap * sizeof *p);
        if (!p) return -ENOMEM;
        s->work = p;
        s->work_cap = cap;
    }
    s->work[s->nwork++] = i;
    return 0;
}

static int push_edge(scan_t *s, uint32_t to) {
    if (s->nedges > s->start[s->cur] && s->edges[s->nedges - 1] == to) return 0;
    if (s->nedges >= UINT32_MAX) return -ENOMEM;
    if (s->nedges == s->edges_cap) {
        size_t cap = s->edges_cap ? s->edges_cap * 2 : 1024;
        uint32_t *p = realloc(s->edges, cap * sizeof *p);
        if (!p) return -ENOMEM;
        s->edges = p;
        s->edges_cap = cap;
    }
    s->edges[s->nedges++] = to;
    return 0;
}

/* Scans len bytes of memory for pointers into blocks. */
static int scan_words(scan_t *s, const uint8_t *mem, size_t len) {
    for (size_t off = 0; off + 8 <= len; off += 8) {
        uint64_t w;
        memcpy(&w, mem + off, 8);
        if (w < s->lo || w >= s->hi) continue;
        int64_t k = find(s, w);
        if (k < 0) continue;
        if (s->collecting) {
            if (s->v[k] == UNSEEN && (uint32_t)k != s->cur && push_edge(s, (uint32_t)k) < 0)
                return -ENOMEM;
        } else if (s->v[k] != ML_REACH_REACHABLE) {
            /* valgrind's rule: a start pointer from a root or a reachable
             * block makes the block reachable; an interior pointer, or any
             * pointer from a possibly lost block, makes an unseen block
             * possibly lost. A block whose state changes is (re)scanned. */
            uint8_t to = w == s->b[k].ptr && s->prior_definite ? ML_REACH_REACHABLE
                                                               : ML_REACH_POSSIBLE;
            if (to == ML_REACH_REACHABLE || s->v[k] == UNSEEN) {
                s->v[k] = to;
                if (push_work(s, (uint32_t)k) < 0) return -ENOMEM;
            }
        }
    }
    return 0;
}

static int check_deadline(const scan_t *s) {
    return s->io->deadline_ns && now_ns() > s->io->deadline_ns ? -ETIMEDOUT : 0;
}

/* Reads [addr, addr + len) in pieces and scans it. */
static int scan_range(scan_t *s, uint64_t addr, uint64_t len, uint64_t *counter) {
    while (len > 0) {
        size_t piece = len > PIECE ? PIECE : (size_t)len;
        ml_reach_req_t r = {addr, piece, s->buf, 0};
        int rc = s->io->read(s->io->ctx, &r, 1);
        if (rc < 0) return rc;
        *counter += r.got;
        if ((rc = scan_words(s, s->buf, r.got)) < 0) return rc;
        if ((rc = check_deadline(s)) < 0) return rc;
        addr += piece;
        len -= piece;
    }
    return 0;
}

/* Reads and scans a batch of blocks: small ones together in one read. */
static int scan_blocks(scan_t *s, const uint32_t *idx, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t k = 0, used = 0;
        while (i + k < n && k < BATCH_REQS) {
            const ml_live_block_t *b = &s->b[idx[i + k]];
            size_t len = (size_t)(b->size & ~7ull);
            if (len > PIECE) {
                if (k) break;
                /* A big block alone, in pieces. */
                s->cur = idx[i];
                s->prior_definite = s->v[s->cur] == ML_REACH_REACHABLE;
                if (s->collecting) s->start[s->cur] = (uint32_t)s->nedges;
                int rc = scan_range(s, b->ptr, b->size & ~7ull, &s->st->heap_bytes);
                if (rc < 0) return rc;
                if (s->collecting) s->end[s->cur] = (uint32_t)s->nedges;
                i++;
                goto next;
            }
            if (used + len > BATCH_BYTES) break;
            s->reqs[k] = (ml_reach_req_t){b->ptr, len, s->buf + used, 0};
            used += len;
            k++;
        }
        {
            int rc = s->io->read(s->io->ctx, s->reqs, k);
            if (rc < 0) return rc;
            for (size_t j = 0; j < k; j++) {
                s->cur = idx[i + j];
                s->prior_definite = s->v[s->cur] == ML_REACH_REACHABLE;
                if (s->collecting) s->start[s->cur] = (uint32_t)s->nedges;
                s->st->heap_bytes += s->reqs[j].got;
                if ((rc = scan_words(s, s->reqs[j].buf, s->reqs[j].got)) < 0) return rc;
                if (s->collecting) s->end[s->cur] = (uint32_t)s->nedges;
            }
            i += k;
            if ((rc = check_deadline(s)) < 0) return rc;
        }
    next:;
    }
    return 0;
}

int ml_reach_classify(const ml_live_block_t *blocks, size_t n, const ml_range_t *roots,
                      size_t nroots, const ml_reach_io_t *io, uint8_t *verdict,
                      ml_reach_stats_t *st) {
    memset(st, 0, sizeof *st);
    memset(verdict, UNSEEN, n);
    if (!n) return 0;
    scan_t s = {.b = blocks, .n = n, .io = io, .v = verdict, .st = st};
    s.lo = blocks[0].ptr;
    s.hi = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t e = blocks[i].ptr + (blocks[i].size ? blocks[i].size : 1);
        if (e > s.hi) s.hi = e;
    }
    int rc = -ENOMEM;
    s.buf = malloc(BATCH_BYTES > PIECE ? BATCH_BYTES : PIECE);
    s.reqs = malloc(BATCH_REQS * sizeof *s.reqs);
    if (!s.buf || !s.reqs) goto out;

    /* 1. Roots, then everything reachable from them. */
    s.prior_definite = true;
    for (size_t r = 0; r < nroots; r++)
        if ((rc = scan_range(&s, roots[r].lo, roots[r].hi - roots[r].lo, &st->root_bytes)) < 0)
            goto out;
    while (s.nwork) {
        /* Take a batch off the work list; scanning it may push more. */
        size_t k = s.nwork > BATCH_REQS ? BATCH_REQS : s.nwork;
        uint32_t batch[BATCH_REQS];
        memcpy(batch, s.work + s.nwork - k, k * sizeof *batch);
        s.nwork -= k;
        if ((rc = scan_blocks(&s, batch, k)) < 0) goto out;
    }

    /* 2. The leaked blocks' pointer graph (edges between unreached blocks). */
    s.start = calloc(n, sizeof *s.start);
    s.end = calloc(n, sizeof *s.end);
    if (!s.start || !s.end) {
        rc = -ENOMEM;
        goto out;
    }
    s.collecting = true;
    for (size_t i = 0; i < n;) {
        uint32_t batch[BATCH_REQS];
        size_t k = 0;
        for (; i < n && k < BATCH_REQS; i++)
            if (verdict[i] == UNSEEN) batch[k++] = (uint32_t)i;
        if (k && (rc = scan_blocks(&s, batch, k)) < 0) goto out;
    }

    /* 3. Leaders and their cliques, in address order. */
    for (size_t i = 0; i < n; i++) {
        if (verdict[i] != UNSEEN) continue;
        verdict[i] = ML_REACH_DEFINITE;
        s.nwork = 0;
        if ((rc = push_work(&s, (uint32_t)i)) < 0) goto out;
        while (s.nwork) {
            uint32_t j = s.work[--s.nwork];
            for (uint32_t e = s.start[j]; e < s.end[j]; e++) {
                uint32_t t = s.edges[e];
                if (t == i) continue;
                if (verdict[t] == UNSEEN) {
                    verdict[t] = ML_REACH_INDIRECT;
                    if ((rc = push_work(&s, t)) < 0) goto out;
                } else if (verdict[t] == ML_REACH_DEFINITE) {
                    /* An earlier leader hangs off this one: it joins this clique
                     * (its own clique is already indirect). */
                    verdict[t] = ML_REACH_INDIRECT;
                }
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (verdict[i] == ML_REACH_REACHABLE) st->reachable++;
        else if (verdict[i] == ML_REACH_POSSIBLE) st->possible++;
        else if (verdict[i] == ML_REACH_INDIRECT) st->indirect++;
        else st->definite++;
    }
    rc = 0;
out:
    free(s.buf);
    free(s.reqs);
    free(s.work);
    free(s.edges);
    free(s.start);
    free(s.end);
    return rc;
}
