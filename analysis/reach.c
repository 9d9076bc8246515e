/* reach.c - the conservative pointer scan behind leak kinds (ml_reach.h). */
#define _GNU_SOURCE
#include "ml_reach.h"
#include "analysis_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH_BYTES (4u << 20)
#define BATCH_REQS 1024
#define PIECE (1u << 20) /* big blocks and roots are read in pieces */
#define TOP_STEP 32
#define READ_THREADS_MAX 8
#define PART_MIN_BLOCKS 65536 /* fewer blocks a thread, and the graph is read on one */

enum { UNSEEN = 0 };

/* What scan_words does with a word that points into a block. */
enum {
    MARK,          /* mark the block (valgrind's rule) and queue it */
    EDGES_UNSEEN,  /* an edge to it when it is unseen: the leaked graph */
    EDGES_ALL,     /* an edge to it, START_EDGE when it points at its start: the whole graph */
};
#define START_EDGE 0x80000000u /* in edges[], EDGES_ALL: a pointer to the block's first byte */
/* The whole graph is kept while it has at most this many edges per block
 * (or MIN_EDGES in all); past that the scan reads blocks as it reaches them. */
#define EDGES_PER_BLOCK 4
#define MIN_EDGES (1u << 24)

/* The edges one reading thread found for blocks [from, to): block j's are
 * edges[start[j], start[j + 1]), or up to nedges for the run's last block.
 * The runs are not joined into one array: that copy doubled the graph's
 * memory for a moment (issue 12). */
typedef struct {
    size_t from, to;
    uint32_t *edges;
    size_t nedges, cap;
} edge_run_t;

typedef struct {
    const ml_reach_blocks_t *t;
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
    /* Per block, where its edges start (n + 1 entries: a block's end is
     * the next one's start, or its run's end). 4 bytes a block, not the 8
     * of a start and an end. */
    uint32_t *start;
    edge_run_t runs[READ_THREADS_MAX]; /* nruns 0 or 1: edges[] alone */
    int nruns;
    size_t max_edges;      /* EDGES_ALL: more than this, and the graph is given up */
    int mode;              /* MARK, EDGES_UNSEEN, EDGES_ALL */
    bool prior_definite; /* marking: the memory being scanned is a root or a reachable block */
    bool owned;          /* marking: the root is io->owned, where any pointer counts as a start */
    bool root;           /* the memory being scanned is a root (scan_words: half-written words) */
    uint32_t cur; /* block being scanned */
    uint64_t hint; /* blk()'s: the chunk of the block read last (per thread) */
    uint64_t fhint; /* find()'s: the chunk of the word looked up last */
    uint8_t *buf;
    ml_reach_req_t *reqs;
    uint32_t *span; /* per block of a batch: its request */
    uint64_t *top;  /* b[i * TOP_STEP].ptr (NULL: plain search) */
    size_t ntop;
    uint32_t *pg;      /* pages of [plo, phi): pg[k] the first block at or after page k */
    uint64_t plo, phi; /* (NULL: no page index) */
    uint8_t *heur;     /* per block, H_* (NULL: heuristics off); shared by the reading threads */
    struct heur_shared_s *hs; /* with heur: the reads made and is_vtable's answers */
} scan_t;

#define VT_CACHE_BITS 10

/* What the reading threads share for the heuristics (one allocation). */
struct heur_shared_s {
    uint64_t reads;                          /* reads of target memory so far */
    uint64_t vt[(size_t)1 << VT_CACHE_BITS]; /* is_vtable's answers */
};

/* ------------------------------------------------------------------------- */
/* Heuristics                                                                */
/* ------------------------------------------------------------------------- */

/* valgrind memcheck (--leak-check-heuristics, default "all") counts an
 * interior pointer as a pointer to the block's start when the block looks
 * like one of four C++ (or sqlite) layouts, and so calls such blocks still
 * reachable where the plain rule says possibly lost:
 *   - stdstring: the pointer is 24 bytes in, where the old libstdc++
 *     string's characters follow its length, capacity and refcount: the
 *     block is 24 + capacity + 1 bytes and length <= capacity;
 *   - length64: 8 bytes in, after a length that is the block's size - 8
 *     (sqlite's allocator);
 *   - newarray: 8 bytes in, after the element count of a new[] of objects
 *     with a destructor: a count n > 0 that divides the size - 8 (this
 *     covers length64 too);
 *   - multipleinheritance: an aligned pointer to a word holding a vtable
 *     address, in a block whose first word holds one too (a base class'
 *     subobject). A vtable address lies in a readable file-backed mapping
 *     and its table holds at least 2 non-null words among its first 20
 *     (in that mapping), each into an executable file-backed mapping, and
 *     nothing else non-null.
 * The block's words are read once for the first two rules and the first
 * word (cached per block); the third rule reads the word pointed at. Sizes
 * are the requested ones, as valgrind's. */
enum { H_DONE = 1, H_AT8 = 2, H_AT24 = 4, H_VT0 = 8 };

/* Reads of target memory the heuristics may make in one scan (each a system
 * call in the collector, about a microsecond): past it, interior pointers
 * are judged by the plain rule again, so that a heap of millions of blocks
 * reached only through interior pointers cannot push the scan past its
 * deadline. */
#define HEUR_READS_MAX 2000000u

static bool heur_budget(const scan_t *s) {
    return __atomic_add_fetch(&s->hs->reads, 1, __ATOMIC_RELAXED) <= HEUR_READS_MAX;
}

static bool read_word(const scan_t *s, uint64_t addr, uint64_t *w) {
    ml_reach_req_t r = {addr, 8, w, 0};
    return heur_budget(s) && s->io->read(s->io->ctx, &r, 1) == 0 && r.got == 8;
}

static bool is_vtable_uncached(const scan_t *s, uint64_t addr);

/* is_vtable's answers by address (heur_shared_s.vt): the address with
 * bit 0 set (known) and bit 1 the answer, in one word. */
static bool is_vtable(const scan_t *s, uint64_t addr) {
    if ((addr & 7) || addr < 4096 || !s->io->map_flags) return false;
    uint64_t *e = &s->hs->vt[(addr >> 3) * 0x9e3779b97f4a7c15ull >> (64 - VT_CACHE_BITS)];
    uint64_t c = __atomic_load_n(e, __ATOMIC_RELAXED);
    if ((c & ~7ull) == addr && (c & 1)) return (c & 2) != 0;
    bool yes = is_vtable_uncached(s, addr);
    __atomic_store_n(e, addr | 1 | (yes ? 2 : 0), __ATOMIC_RELAXED);
    return yes;
}

static bool is_vtable_uncached(const scan_t *s, uint64_t addr) {
    uint64_t end;
    unsigned f = s->io->map_flags(s->io->ctx, addr, &end);
    if (!(f & ML_REACH_MAP_R)) return false;
    uint64_t words[20];
    size_t n = 20;
    if (addr + n * 8 > end) n = (size_t)((end - addr) / 8);
    if (n < 2) return false;
    ml_reach_req_t r = {addr, n * 8, words, 0};
    if (!heur_budget(s) || s->io->read(s->io->ctx, &r, 1) < 0) return false;
    int fns = 0;
    for (size_t i = 0; i < r.got / 8; i++) {
        if (!words[i]) continue;
        uint64_t e2;
        if (!(s->io->map_flags(s->io->ctx, words[i], &e2) & ML_REACH_MAP_X)) return false;
        if (++fns == 2) return true;
    }
    return false;
}

/* The block's own rules, read once (a racing thread may read them too, and
 * finds the same). */
static uint8_t heur_of(scan_t *s, uint32_t k, uint64_t start) {
    uint8_t h = __atomic_load_n(&s->heur[k], __ATOMIC_RELAXED);
    if (h & H_DONE) return h;
    if (!heur_budget(s)) return H_DONE; /* not stored: a later look finds the budget spent too */
    h = H_DONE;
    uint64_t size = ml_reach_block_size(s->t, k), w[2] = {0, 0};
    ml_reach_req_t r = {start, size >= 16 ? 16 : (size >= 8 ? 8 : 0), w, 0};
    if (r.len && s->io->read(s->io->ctx, &r, 1) == 0) {
        if (r.got >= 8 && size > 8 && w[0] && (size - 8) % w[0] == 0) h |= H_AT8;
        if (r.got == 16 && size > 24 && w[1] == size - 25 && w[0] <= w[1]) h |= H_AT24;
        if (r.got >= 8 && is_vtable(s, w[0])) h |= H_VT0;
    }
    __atomic_store_n(&s->heur[k], h, __ATOMIC_RELAXED);
    return h;
}

/* Whether interior pointer w into block k (which starts at start) counts as
 * a start pointer. */
static bool heur_start(scan_t *s, uint32_t k, uint64_t start, uint64_t w) {
    uint64_t off = w - start;
    /* glibc's tsearch keeps a node's colour in the low bit of its
     * left-child word (misc/tsearch.c, node_t: key, left_node, right_node;
     * 24 bytes): a red node's left child is pointed to by its address + 1.
     * setenv keeps every string it made in such a tree, whose root is in
     * libc; valgrind's default run frees it at exit (freeres) and reports
     * nothing, memlens called the left children of red nodes "possibly
     * lost" (24 B a node from about ten setenv calls on; a gate of 0
     * failed). A node of a program's own tree is the same shape. Only from
     * a block, one 24-byte node to another. */
    if (off == 1) {
        if (s->root || s->owned || ml_reach_block_size(s->t, k) != 24) return false;
        return ml_reach_block_size(s->t, s->cur) == 24;
    }
    if (off & 7) return false;
    uint8_t h = heur_of(s, k, start);
    if ((off == 8 && (h & H_AT8)) || (off == 24 && (h & H_AT24))) return true;
    uint64_t inner;
    return (h & H_VT0) && read_word(s, w, &inner) && is_vtable(s, inner);
}

const char *ml_analysis_allocator_model(const ml_analysis_t *a) {
    return ml__allocator_model(a);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------- */
/* The block table (ml_reach.h)                                              */
/* ------------------------------------------------------------------------- */

void ml_reach_blocks_free(ml_reach_blocks_t *t) {
    if (t->live) ml__live_index_free(t->live);
    free(t->live);
    memset(t, 0, sizeof *t);
}

static inline void blk(const ml_reach_blocks_t *t, size_t i, uint64_t *hint, uint64_t *ptr,
                       uint64_t *size) {
    if (t->arr) {
        *ptr = t->arr[i].ptr;
        *size = t->arr[i].size;
    } else {
        ml__live_index_block(t->live, i, hint, ptr, size);
    }
}

void ml_reach_block_at(const ml_reach_blocks_t *t, size_t i, uint64_t *hint, uint64_t *ptr,
                       uint64_t *size) {
    blk(t, i, hint, ptr, size);
}

uint64_t ml_reach_block_ptr(const ml_reach_blocks_t *t, size_t i) {
    uint64_t hint = 0, ptr, size;
    blk(t, i, &hint, &ptr, &size);
    return ptr;
}

uint64_t ml_reach_block_size(const ml_reach_blocks_t *t, size_t i) {
    uint64_t hint = 0, ptr, size;
    blk(t, i, &hint, &ptr, &size);
    return size;
}

size_t ml_reach_blocks_first(const ml_reach_blocks_t *t, uint64_t lo) {
    if (!t->arr) {
        uint64_t ptr, size;
        return lo ? (size_t)(ml__live_index_floor(t->live, lo - 1, NULL, &ptr, &size) + 1) : 0;
    }
    size_t l = 0, h = t->n;
    while (l < h) {
        size_t m = (l + h) / 2;
        if (t->arr[m].ptr < lo) l = m + 1;
        else h = m;
    }
    return l;
}

/* The block holding address p, or -1. The search goes through `top`
 * first, the address of every TOP_STEP-th block, which stays in the caches,
 * and ends among TOP_STEP neighbours: in one search over millions of blocks,
 * each of the last dozen steps was a cache miss. */
static int64_t find(scan_t *s, uint64_t p, uint64_t *start) {
    if (p < s->lo || p >= s->hi) return -1;
    const ml_reach_blocks_t *t = s->t;
    uint64_t ptr, bsize;
    int64_t at;
    if (!t->arr) {
        /* In place: the live set finds p's page, then the block. */
        if ((at = ml__live_index_floor(t->live, p, &s->fhint, &ptr, &bsize)) < 0) return -1;
        goto found;
    }
    /* Both searches count the entries <= p without a branch on the data (a
     * conditional move per step): the branches mispredicted half the time. */
    size_t lo = 0, n = s->n;
    if (s->pg && p - s->plo < s->phi - s->plo) {
        /* The page index: the blocks that start in p's page, and the one
         * before them, which may reach into it. */
        size_t k = (size_t)((p - s->plo) >> 12);
        lo = s->pg[k] ? s->pg[k] - 1 : 0;
        if (s->pg[k + 1] <= lo) return -1; /* no block starts at or below p */
        n = s->pg[k + 1] - lo;
    } else if (s->top) {
        const uint64_t *q = s->top;
        size_t m = s->ntop;
        while (m > 1) {
            size_t half = m / 2;
            q = q[half] <= p ? q + half : q;
            m -= half;
        }
        size_t tl = (size_t)(q - s->top) + (*q <= p);
        if (!tl) return -1;
        lo = (tl - 1) * TOP_STEP;
        n = lo + TOP_STEP < s->n ? TOP_STEP : s->n - lo;
    }
    const ml_live_block_t *g = t->arr + lo;
    while (n > 1) {
        size_t half = n / 2;
        g = g[half].ptr <= p ? g + half : g;
        n -= half;
    }
    lo = (size_t)(g - t->arr) + (g->ptr <= p);
    if (!lo) return -1;
    at = (int64_t)(lo - 1);
    ptr = t->arr[lo - 1].ptr;
    bsize = t->arr[lo - 1].size;
found:;
    uint64_t size = bsize ? bsize : 1;
    if (p - ptr >= size) return -1;
    if (s->io->glibc_chunk_alias && p != ptr) {
        uint64_t chunk = (bsize + 8 + 15) & ~15ull;
        if (chunk < 32) chunk = 32;
        if (p - ptr == chunk - 16) return -1; /* glibc's pointer to the next chunk */
    }
    *start = ptr;
    return at;
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

/* The edge arrays are mappings of their own, grown by mremap: realloc
 * copied them (glibc serves up to 32 MiB from its heap once it has freed
 * big blocks), old and new at once, 17 MB more at the peak of the scan of
 * 7.5 M blocks; a mapping's room beyond what is written takes no memory,
 * and it goes back to the kernel when freed. */
static uint32_t *edges_grow(uint32_t *p, size_t cap, size_t want) {
    void *q = p ? mremap(p, cap * sizeof *p, want * sizeof *p, MREMAP_MAYMOVE)
                : mmap(NULL, want * sizeof *p, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return q == MAP_FAILED ? NULL : q;
}

static void edges_free(uint32_t *p, size_t cap) {
    if (p) munmap(p, cap * sizeof *p);
}

static int push_edge(scan_t *s, uint32_t to) {
    if (s->nedges > s->start[s->cur] && s->edges[s->nedges - 1] == to) return 0;
    if (s->nedges >= UINT32_MAX) return -ENOMEM;
    if (s->mode == EDGES_ALL && s->nedges >= s->max_edges) return -E2BIG;
    if (s->nedges == s->edges_cap) {
        size_t cap = s->edges_cap ? s->edges_cap * 2 : 1024;
        uint32_t *p = edges_grow(s->edges, s->edges_cap, cap);
        if (!p) return -ENOMEM;
        s->edges = p;
        s->edges_cap = cap;
    }
    s->edges[s->nedges++] = to;
    return 0;
}

/* Scans len bytes of memory for pointers into blocks. */
/* valgrind's rule, for a pointer to block k (to its first byte when
 * `start`) found in memory that is a root or a reachable block (`prior`
 * definite) or not: a start pointer from a root or a reachable block makes
 * the block reachable; an interior pointer, or any pointer from a possibly
 * lost block, makes an unseen block possibly lost. A block whose state
 * changes is queued, to be scanned (again). */
static inline int mark(scan_t *s, uint32_t k, bool start, bool prior_definite) {
    if (s->v[k] == ML_REACH_REACHABLE) return 0;
    uint8_t to = start && prior_definite ? ML_REACH_REACHABLE : ML_REACH_POSSIBLE;
    if (to != ML_REACH_REACHABLE && s->v[k] != UNSEEN) return 0;
    s->v[k] = to;
    return push_work(s, k);
}

static int scan_words(scan_t *s, const uint8_t *mem, size_t len) {
    for (size_t off = 0; off + 8 <= len; off += 8) {
        uint64_t w;
        memcpy(&w, mem + off, 8);
        if (w < s->lo || w >= s->hi) continue;
        uint64_t start;
        int64_t k = find(s, w, &start);
        if (k < 0) continue;
        if (s->owned) start = w;
        /* A root word whose low half is zero and that falls inside a block
         * is the upper half of an old pointer in a slot whose lower half an
         * int was written to, not a pointer: glibc's __libc_start_call_main
         * leaves one in its frame at exit (0x7fXX00000000), inside any block
         * that spans that 4 GiB boundary (a 16 MiB block beside the
         * libraries did, one run in 200, and was "possibly lost"). valgrind
         * skips the word: half of it is undefined (docs/analysis.md). */
        if (s->root && w != start && !(uint32_t)w) continue;
        /* An interior pointer a heuristic explains counts as a start: in the
         * graph always, when marking only where it could change the mark. */
        if (w != start && s->heur && s->mode != EDGES_UNSEEN &&
            (s->mode == EDGES_ALL || (s->prior_definite && s->v[k] != ML_REACH_REACHABLE)) &&
            heur_start(s, (uint32_t)k, start, w))
            start = w;
        if (s->mode == EDGES_ALL) {
            /* A block's pointers to itself change no verdict. */
            if ((uint32_t)k == s->cur) continue;
            int rc = push_edge(s, (uint32_t)k | (w == start ? START_EDGE : 0));
            if (rc < 0) return rc;
        } else if (s->mode == EDGES_UNSEEN) {
            if (s->v[k] == UNSEEN && (uint32_t)k != s->cur && push_edge(s, (uint32_t)k) < 0)
                return -ENOMEM;
        } else if (mark(s, (uint32_t)k, w == start, s->prior_definite) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

static int check_deadline(const scan_t *s) {
    return s->io->deadline_ns && now_ns() > s->io->deadline_ns ? -ETIMEDOUT : 0;
}

/* A read the reader could not make whole ([addr, addr + len) at mem): the
 * kernel never splits a request, so one unreadable page (a program's guard
 * page, mprotect PROT_NONE inside a block) failed the whole block, and the
 * pointers on its other pages were not seen: what they held counted as
 * definitely lost where valgrind says reachable. Read page by page instead;
 * an unreadable page reads as zeros, which point nowhere. Returns the bytes
 * read, or a negative errno when reading is pointless. */
#define READ_PAGE 4096u
#define PAGE_REQS 64

static int64_t read_by_page(scan_t *s, uint64_t addr, size_t len, uint8_t *mem) {
    uint64_t end = addr + len, at = addr;
    int64_t got = 0;
    while (at < end) {
        ml_reach_req_t q[PAGE_REQS];
        size_t n = 0;
        for (; n < PAGE_REQS && at < end; n++) {
            uint64_t next = (at | (READ_PAGE - 1)) + 1;
            if (next > end) next = end;
            q[n] = (ml_reach_req_t){at, (size_t)(next - at), mem + (at - addr), 0};
            at = next;
        }
        int rc = s->io->read(s->io->ctx, q, n);
        if (rc < 0) return rc;
        for (size_t i = 0; i < n; i++) {
            if (q[i].got < q[i].len) memset((uint8_t *)q[i].buf + q[i].got, 0, q[i].len - q[i].got);
            got += (int64_t)q[i].got;
        }
    }
    return got;
}

/* Reads [addr, addr + len) in pieces and scans it, but for the pages the
 * reader says were never touched (ml_reach_io_t.resident_run). */
static int scan_range(scan_t *s, uint64_t addr, uint64_t len, uint64_t *counter) {
    uint64_t run = 0; /* what is left of the run of pages asked about last */
    bool resident = true;
    while (len > 0) {
        if (!run) { /* asked once per run, not per piece: the answer walks the whole run */
            run = len;
            resident = true;
            if (s->io->resident_run) {
                run = s->io->resident_run(s->io->ctx, addr, len, &resident);
                if (!run || run > len) run = len, resident = true;
            }
        }
        if (!resident) {
            addr += run;
            len -= run;
            run = 0;
            continue;
        }
        size_t piece = run > PIECE ? PIECE : (size_t)run;
        run -= piece;
        ml_reach_req_t r = {addr, piece, s->buf, 0};
        int rc = s->io->read(s->io->ctx, &r, 1);
        if (rc < 0) return rc;
        size_t scan = r.got;
        if (r.got < piece) {
            int64_t g = read_by_page(s, addr, piece, s->buf);
            if (g < 0) return (int)g;
            r.got = (size_t)g;
            scan = piece;
        }
        *counter += r.got;
        if ((rc = scan_words(s, s->buf, scan)) < 0) return rc;
        if ((rc = check_deadline(s)) < 0) return rc;
        addr += piece;
        len -= piece;
    }
    return 0;
}

/* Blocks less than SPAN_GAP bytes apart are read as one span. Any gap
 * under a page lies on the page of the first block's last byte or on that
 * of the second one's first byte, so the span is as readable as the blocks.
 * The kernel then pins each page once, not once per block (a request per
 * block was most of the scan's time with millions of small blocks, issue
 * 12). The gap is kept to 1 KiB so that blocks scattered one per few KiB
 * (lists walked a level at a time) are not read with all that is between
 * them. */
#define SPAN_GAP 1024u

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Scans block idx, whose bytes (got of them) are at mem. */
static int scan_block(scan_t *s, uint32_t idx, const uint8_t *mem, size_t got) {
    s->cur = idx;
    s->prior_definite = s->v[idx] == ML_REACH_REACHABLE;
    if (s->mode != MARK) s->start[idx] = (uint32_t)s->nedges;
    s->st->heap_bytes += got;
    return scan_words(s, mem, got);
}

/* Reads and scans a batch of blocks (indices in increasing order, so in
 * address order): small ones together in one read, neighbours in spans. */
static int scan_blocks(scan_t *s, const uint32_t *idx, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t k = 0, nreq = 0, used = 0;
        uint64_t span_end = 0;
        while (i + k < n && k < BATCH_REQS) {
            uint64_t ptr, size;
            blk(s->t, idx[i + k], &s->hint, &ptr, &size);
            size_t len = (size_t)(size & ~7ull);
            if (len > PIECE) {
                if (k) break;
                /* A big block alone, in pieces; a huge one not at all. */
                s->cur = idx[i];
                s->prior_definite = s->v[s->cur] == ML_REACH_REACHABLE;
                if (s->mode != MARK) s->start[s->cur] = (uint32_t)s->nedges;
                if (size >= ML_REACH_HUGE_BLOCK) { /* holds nothing the scan will see */
                    i++;
                    goto next;
                }
                int rc = scan_range(s, ptr, size & ~7ull, &s->st->heap_bytes);
                if (rc < 0) return rc;
                i++;
                goto next;
            }
            bool join = nreq && ptr >= span_end && ptr - span_end < SPAN_GAP;
            size_t add = join ? (size_t)(ptr - span_end) + len : len;
            if (used + add > BATCH_BYTES) break;
            if (join) {
                s->reqs[nreq - 1].len += add;
            } else {
                s->reqs[nreq++] = (ml_reach_req_t){ptr, len, s->buf + used, 0};
            }
            used += add;
            span_end = ptr + len;
            s->span[k] = (uint32_t)(nreq - 1);
            k++;
        }
        {
            int rc = s->io->read(s->io->ctx, s->reqs, nreq);
            if (rc < 0) return rc;
            for (size_t j = 0; j < k; j++) {
                uint64_t ptr, size;
                blk(s->t, idx[i + j], &s->hint, &ptr, &size);
                const ml_reach_req_t *r = &s->reqs[s->span[j]];
                size_t len = (size_t)(size & ~7ull);
                uint8_t *mem = (uint8_t *)r->buf + (ptr - r->addr);
                size_t got = len;
                int64_t unread = 0;
                if (r->got < r->len) {
                    /* Part of the span could not be read: this block on its
                     * own, as if it had been a request of its own, and page
                     * by page if that fails too. */
                    ml_reach_req_t one = {ptr, len, mem, 0};
                    if ((rc = s->io->read(s->io->ctx, &one, 1)) < 0) return rc;
                    got = one.got;
                    if (got < len) {
                        int64_t g = read_by_page(s, ptr, len, mem);
                        if (g < 0) return (int)g;
                        unread = (int64_t)len - g;
                        got = len;
                    }
                }
                if ((rc = scan_block(s, idx[i + j], mem, got)) < 0) return rc;
                s->st->heap_bytes -= (uint64_t)unread; /* the bytes read, not the zeros */
            }
            i += k;
            if ((rc = check_deadline(s)) < 0) return rc;
        }
    next:;
    }
    return 0;
}

/* Block j's edges: edges_of(...)[*from, *to). */
static inline const uint32_t *edges_of(const scan_t *s, uint32_t j, uint32_t *from, uint32_t *to) {
    *from = s->start[j];
    if (s->nruns > 1) {
        int r = 0;
        while (r + 1 < s->nruns && j >= s->runs[r + 1].from) r++;
        *to = j + 1 == s->runs[r].to ? (uint32_t)s->runs[r].nedges : s->start[j + 1];
        return s->runs[r].edges;
    }
    *to = s->start[j + 1];
    return s->edges;
}

/* Regions of blocks further apart than this are searched apart. */
#define REGION_GAP ((uint64_t)64 << 20)

/* The page index of find(): for the region (blocks with no gap of
 * REGION_GAP between them) that holds the most blocks, when it has at most
 * two pages per block, the first block at or after each of its pages. A
 * word's search then starts among the blocks of its page (a few dozen
 * small ones) instead of among all: with 2 M blocks live, the two-level
 * search took a dozen dependent loads per word, and the scan's time was
 * mostly that once blocks were read in spans. Without the index (no
 * memory, or no dense region: blocks scattered over a wide range), find()
 * searches as before. */
static void page_index(scan_t *s) {
    const ml_reach_blocks_t *t = s->t;
    if (!t->arr) return; /* the live set has its own pages */
    size_t best = 0, best_n = 0;
    uint64_t prev_end = 0;
    for (size_t i = 0, start = 0; i <= s->n; i++) {
        uint64_t ptr = i < s->n ? t->arr[i].ptr : 0;
        bool cut = i == s->n || (i > start && ptr - prev_end > REGION_GAP);
        if (i < s->n) prev_end = ptr + t->arr[i].size;
        if (!cut) continue;
        if (i - start > best_n) {
            best = start;
            best_n = i - start;
        }
        start = i;
    }
    if (best_n < 64 || s->n >= UINT32_MAX) return; /* below 64, the plain search is as quick */
    uint64_t last_ptr = t->arr[best + best_n - 1].ptr;
    uint64_t last_size = t->arr[best + best_n - 1].size;
    uint64_t plo = t->arr[best].ptr & ~4095ull;
    uint64_t phi = (last_ptr + (last_size ? last_size : 1) + 4095) & ~4095ull;
    uint64_t npg = (phi - plo) >> 12;
    if (npg > 2 * (uint64_t)best_n) return;
    uint32_t *pg = malloc((size_t)(npg + 1) * sizeof *pg);
    if (!pg) return;
    size_t i = best;
    for (uint64_t k = 0; k <= npg; k++) {
        uint64_t at = plo + (k << 12);
        while (i < s->n && t->arr[i].ptr < at) i++;
        pg[k] = (uint32_t)i;
    }
    s->pg = pg;
    s->plo = plo;
    s->phi = phi;
}

/* Marks what the queued blocks reach, from the whole graph (EDGES_ALL)
 * instead of their memory: mark(), scan_words' rule, with whether a pointer
 * is to the block's start taken from its edge. */
static int mark_from_graph(scan_t *s) {
    while (s->nwork) {
        uint32_t j = s->work[--s->nwork], e, end;
        const uint32_t *edges = edges_of(s, j, &e, &end);
        bool prior_definite = s->v[j] == ML_REACH_REACHABLE;
        for (; e < end; e++)
            if (mark(s, edges[e] & ~START_EDGE, edges[e] & START_EDGE, prior_definite) < 0)
                return -ENOMEM;
    }
    return 0;
}

/* The buffers one reading thread needs; false when one is missing (the
 * caller frees what was made). */
static bool read_buffers(scan_t *s) {
    s->buf = malloc(BATCH_BYTES > PIECE ? BATCH_BYTES : PIECE);
    s->reqs = malloc(BATCH_REQS * sizeof *s->reqs);
    s->span = malloc(BATCH_REQS * sizeof *s->span);
    return s->buf && s->reqs && s->span;
}

/* Reads blocks [from, to) into the whole pointer graph (EDGES_ALL). */
static int read_graph_range(scan_t *s, size_t from, size_t to) {
    s->mode = EDGES_ALL;
    int rc = 0;
    for (size_t i = from; i < to && rc == 0;) {
        uint32_t batch[BATCH_REQS];
        size_t k = 0;
        for (; i < to && k < BATCH_REQS; i++) batch[k++] = (uint32_t)i;
        rc = scan_blocks(s, batch, k);
    }
    s->mode = MARK;
    return rc;
}

/* One more thread's share of read_graph: its own buffers, edges and byte
 * count; the blocks, the indexes and start/end (its own indices) shared. */
typedef struct {
    scan_t s;
    ml_reach_stats_t st;
    size_t from, to;
    int rc;
    pthread_t t;
    bool ready, running; /* its buffers are made; its thread runs */
} part_t;

static void *part_main(void *arg) {
    part_t *p = arg;
    p->rc = read_graph_range(&p->s, p->from, p->to);
    return NULL;
}

/* Reads every block once, in address order, into the whole pointer graph
 * (EDGES_ALL). Returns 0, -E2BIG when the graph outgrew max_edges, or
 * another negative errno.
 *
 * With io->threads > 1 the blocks are cut into that many runs of about
 * the same bytes, read at once: the calling thread takes the first, a
 * thread each the others, and their edges are appended in address order,
 * so the graph is the one a single thread builds. At exit the target is
 * stopped and the collector otherwise idle: on 7.5 M blocks (380 MB) this
 * read was 1.05 s of the scan's 1.15 s. */
static int read_graph(scan_t *s) {
    int nt = s->io->threads > 1 ? s->io->threads : 1;
    if (nt > READ_THREADS_MAX) nt = READ_THREADS_MAX;
    if ((uint64_t)nt > s->n / PART_MIN_BLOCKS) nt = (int)(s->n / PART_MIN_BLOCKS);
    if (nt <= 1) return read_graph_range(s, 0, s->n);
    part_t *parts = calloc((size_t)nt, sizeof *parts);
    if (!parts) return read_graph_range(s, 0, s->n);
    /* Cut points: equal shares of the bytes to read. */
    uint64_t bytes = s->t->bytes;
    uint64_t hint = 0, ptr, size;
    for (size_t i = 0; !s->t->bytes && i < s->n; i++) {
        blk(s->t, i, &hint, &ptr, &size);
        bytes += size;
    }
    size_t at = 0;
    uint64_t acc = 0;
    for (int t = 0; t < nt; t++) {
        parts[t].from = at;
        uint64_t want = bytes / (uint64_t)nt * (uint64_t)(t + 1);
        if (t == nt - 1) at = s->n;
        else
            while (at < s->n && (acc < want || at == parts[t].from)) {
                blk(s->t, at++, &hint, &ptr, &size);
                acc += size;
            }
        parts[t].to = at;
    }
    int rc = 0;
    for (int t = 1; t < nt; t++) {
        part_t *p = &parts[t];
        p->s = *s;
        p->s.st = &p->st;
        p->s.edges = NULL;
        p->s.nedges = p->s.edges_cap = 0;
        p->s.work = NULL;
        p->s.nwork = p->s.work_cap = 0;
        p->ready = read_buffers(&p->s);
        p->running = p->ready && pthread_create(&p->t, NULL, part_main, p) == 0;
    }
    rc = read_graph_range(s, parts[0].from, parts[0].to);
    s->runs[0] = (edge_run_t){parts[0].from, parts[0].to, NULL, s->nedges, s->edges_cap};
    s->nruns = 1;
    size_t total = s->nedges;
    for (int t = 1; t < nt; t++) {
        part_t *p = &parts[t];
        if (p->running) pthread_join(p->t, NULL);
        else if (p->ready && rc == 0)
            p->rc = read_graph_range(&p->s, p->from, p->to); /* no thread: here, in turn */
        else
            p->rc = -ENOMEM;
        /* The parts in address order: any part's -E2BIG gives the graph up. */
        if (p->rc == -E2BIG || (rc == 0 && p->rc < 0)) rc = p->rc;
        total += p->s.nedges;
        if (rc == 0 && total > s->max_edges) rc = -E2BIG;
        /* The run keeps the part's edges (s frees them), with its own
         * indices: start[] of its blocks count from its first edge. */
        s->runs[s->nruns++] = (edge_run_t){p->from, p->to, p->s.edges, p->s.nedges, p->s.edges_cap};
        s->st->heap_bytes += p->st.heap_bytes;
        free(p->s.buf);
        free(p->s.reqs);
        free(p->s.span);
        free(p->s.work);
    }
    free(parts);
    s->runs[0].edges = s->edges;
    return rc;
}

/* The runs' edges, and edges[] (the first run's), freed. */
static void free_graph(scan_t *s) {
    for (int r = 1; r < s->nruns; r++) edges_free(s->runs[r].edges, s->runs[r].cap);
    s->nruns = 0;
    edges_free(s->edges, s->edges_cap);
    s->edges = NULL;
    s->nedges = s->edges_cap = 0;
}

/* The order in which the leaked blocks become clique leaders. valgrind
 * takes them in address order, and its answer depends on that order: a
 * leader's clique takes in the blocks its pointers reach through blocks no
 * clique took yet, so an earlier leader that a later one reaches only
 * through blocks a third clique took stays definite. valgrind's allocator
 * never hands out freed memory again (its freed queue holds 20 MB) and
 * carves new blocks upwards, so its addresses follow the order of
 * allocation; glibc's reuse freed chunks, and the same program's leaked
 * structure had other leaders here: a cJSON tree dropped after other
 * blocks were freed, 5 definite blocks where valgrind said 3 (the same
 * bytes lost). So leaders are taken in the order of allocation (a
 * realloc's is the realloc's, as valgrind's realloc always moves), where
 * the blocks say it: the unseen blocks' (sequence number, index) pairs,
 * sorted; NULL (address order) when they do not, or without memory. */
typedef struct {
    uint64_t ptr; /* the allocation's sequence number (RADIX_SORT's key) */
    uint64_t idx;
} lead_t;

static int cmp_lead(const void *x, const void *y) {
    const lead_t *l = x, *r = y;
    return l->ptr != r->ptr ? (l->ptr > r->ptr) - (l->ptr < r->ptr) : (l->idx > r->idx) - (l->idx < r->idx);
}

void ml__sort_leads(lead_t *b, uint64_t n);
void ml__sort_leads_with(lead_t *b, uint64_t n, lead_t *scratch);
RADIX_SORT(ml__sort_leads, lead_t, cmp_lead)

typedef struct {
    uint64_t ptr; /* number << 32 | index (RADIX_SORT's key) */
} lead_key_t;

static int cmp_key(const void *x, const void *y) {
    uint64_t l = ((const lead_key_t *)x)->ptr, r = ((const lead_key_t *)y)->ptr;
    return (l > r) - (l < r);
}

void ml__sort_keys(lead_key_t *b, uint64_t n);
void ml__sort_keys_with(lead_key_t *b, uint64_t n, lead_key_t *scratch);
RADIX_SORT(ml__sort_keys, lead_key_t, cmp_key)

/* The leaders' order: a cursor over the unseen blocks in the order of
 * their sequence numbers (equal numbers, the blocks made before recording
 * began, in address order), made one of three ways.
 * - Address order is that order already (one pass, nothing allocated).
 * - A few blocks break it (the common case: a program's big arrays are
 *   mmapped above its heap, made first and placed last; c-tiny's pointer
 *   array among 5 M tiny blocks): the blocks that keep a rising run in
 *   address order are walked in place, and only the others (exceptions)
 *   are sorted and merged in. Sorting them all took 16 bytes a lost block
 *   at the scan's peak (the order and the sort's scratch): 76 MiB more on
 *   c-tiny-10M, for one block out of 5 M.
 * - Otherwise every unseen block's (number << 32 | index) is sorted, 8
 *   bytes each and the sort's scratch (pairs of words when numbers pass 32
 *   bits, packed into the pairs' first half after).
 * Without memory, address order. */
typedef struct {
    const scan_t *s;
    uint64_t *order; /* the whole order (sorted path), or NULL */
    size_t nlead, r;
    uint32_t *xi;    /* merge path: the exceptions' indices, in address order */
    uint64_t *xs;    /* ... and their (number << 32 | index), sorted */
    size_t nx, xk, e;
    size_t i;        /* the run's cursor (and address order's) */
    uint64_t hint;
} leaders_t;

static inline uint64_t block_seq(const scan_t *s, size_t i, uint64_t *hint) {
    return s->t->arr ? s->t->seq[i] : ml__live_index_seq(s->t->live, i, hint);
}

/* Exceptions the merge path takes at most, as a share of the unseen
 * blocks: past it, sorting them all costs about the same. */
#define LEAD_EXCEPTIONS_MAX(m) ((m) / 8)

static void leaders_init(leaders_t *L, const scan_t *s) {
    memset(L, 0, sizeof *L);
    L->s = s;
    const ml_reach_blocks_t *t = s->t;
    if (t->arr ? !t->seq : !t->live) return;
    size_t m = 0, nx = 0;
    uint64_t hint = 0, last = 0, top = 0, run = 0;
    bool sorted = true;
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i] != UNSEEN) continue;
        uint64_t q = block_seq(s, i, &hint);
        if (m && q < last) sorted = false;
        if (!m || q >= run) run = q; /* the rising run, greedily */
        else nx++;
        last = q;
        top = q > top ? q : top;
        m++;
    }
    if (sorted || m < 2) return;
    bool wide = top >> 32 != 0;
    /* The run kept walking down instead: a block is in it when no block
     * above it comes before it (a reused chunk, made late at a low
     * address, is then the exception, where walking up it ended the run
     * and every block above it became one). The direction with fewer
     * exceptions is taken. */
    bool down = false;
    if (!wide && nx > LEAD_EXCEPTIONS_MAX(m)) {
        size_t nd = 0, seen = 0;
        uint64_t low = 0;
        hint = 0;
        for (size_t i = s->n; i-- > 0;) {
            if (s->v[i] != UNSEEN) continue;
            uint64_t key = block_seq(s, i, &hint) << 32 | i;
            if (!seen++ || key < low) low = key;
            else nd++;
        }
        if (nd < nx) {
            nx = nd;
            down = true;
        }
    }
    if (!wide && nx <= LEAD_EXCEPTIONS_MAX(m)) {
        L->xi = malloc((nx ? nx : 1) * sizeof *L->xi);
        L->xs = malloc((nx ? nx : 1) * sizeof *L->xs);
        if (L->xi && L->xs) {
            hint = 0;
            size_t k = 0, seen = 0;
            uint64_t edge = 0; /* the run's last key */
            for (size_t j = 0; j < s->n; j++) {
                size_t i = down ? s->n - 1 - j : j;
                if (s->v[i] != UNSEEN) continue;
                uint64_t key = block_seq(s, i, &hint) << 32 | i;
                if (!seen++ || (down ? key < edge : key > edge)) {
                    edge = key;
                    continue;
                }
                L->xi[k] = (uint32_t)i;
                L->xs[k++] = key;
            }
            for (size_t a = 0; down && a < k / 2; a++) { /* the exceptions in address order */
                uint32_t x = L->xi[a];
                L->xi[a] = L->xi[k - 1 - a];
                L->xi[k - 1 - a] = x;
            }
            L->nx = k;
            ml__sort_keys_with((lead_key_t *)L->xs, k, NULL);
            L->hint = 0;
            return;
        }
        free(L->xi);
        free(L->xs);
        L->xi = NULL;
        L->xs = NULL;
    }
    uint64_t *o = malloc(m * (wide ? sizeof(lead_t) : sizeof(uint64_t)));
    if (!o) return;
    lead_t *pairs = (lead_t *)o;
    hint = 0;
    for (size_t i = 0, k = 0; i < s->n; i++) {
        if (s->v[i] != UNSEEN) continue;
        uint64_t q = block_seq(s, i, &hint);
        if (wide) pairs[k++] = (lead_t){q, i};
        else o[k++] = q << 32 | i;
    }
    if (wide) {
        ml__sort_leads_with(pairs, m, NULL);
        /* Equal numbers in address order: the sort on the number alone does
         * not keep it. */
        for (size_t a = 0, b; a < m; a = b) {
            for (b = a + 1; b < m && pairs[b].ptr == pairs[a].ptr; b++) {}
            if (b - a > 1) qsort(pairs + a, b - a, sizeof *pairs, cmp_lead);
        }
        /* Entry r lies in pair r / 2, read before. */
        for (size_t r = 0; r < m; r++) o[r] = pairs[r].idx;
    } else {
        ml__sort_keys_with((lead_key_t *)o, m, NULL);
    }
    L->order = o;
    L->nlead = m;
}

/* The next block still unseen, in the leaders' order; false at the end.
 * A block's verdict only ever leaves UNSEEN, so a block passed over stays
 * passed: each path gives the blocks of the one sorted order that are
 * unseen when their turn comes. */
static bool leaders_next(leaders_t *L, size_t *out) {
    const scan_t *s = L->s;
    if (L->order) {
        while (L->r < L->nlead) {
            size_t i = (size_t)(uint32_t)L->order[L->r++];
            if (s->v[i] == UNSEEN) {
                *out = i;
                return true;
            }
        }
        return false;
    }
    /* The run: unseen blocks in address order, the exceptions left out. */
    for (; L->i < s->n; L->i++) {
        if (L->xk < L->nx && L->xi[L->xk] == L->i) {
            L->xk++;
            continue;
        }
        if (s->v[L->i] == UNSEEN) break;
    }
    while (L->e < L->nx && s->v[(uint32_t)L->xs[L->e]] != UNSEEN) L->e++;
    bool run = L->i < s->n, exc = L->e < L->nx;
    if (!run && !exc) return false;
    if (exc && (!run || L->xs[L->e] < (block_seq(s, L->i, &L->hint) << 32 | L->i))) {
        *out = (uint32_t)L->xs[L->e++];
        return true;
    }
    *out = L->i++;
    return true;
}

static void leaders_free(leaders_t *L) {
    free(L->order);
    free(L->xi);
    free(L->xs);
}

int ml_reach_classify_blocks(const ml_reach_blocks_t *t, const ml_range_t *roots, size_t nroots,
                             const ml_reach_io_t *io, uint8_t *verdict, ml_reach_stats_t *st) {
    size_t n = t->n;
    leaders_t lead = {0};
    memset(st, 0, sizeof *st);
    memset(verdict, UNSEEN, n);
    if (!n) return 0;
    scan_t s = {.t = t, .n = n, .io = io, .v = verdict, .st = st};
    s.lo = ml_reach_block_ptr(t, 0);
    s.hi = 0;
    /* Blocks do not overlap: the last one ends highest. The array of
     * ml_reach_classify's callers is searched for the highest end all the
     * same (a walk of the live set in place costs a pass over its pages). */
    uint64_t hint = 0;
    for (size_t i = t->arr ? 0 : n - 1; i < n; i++) {
        uint64_t ptr, size;
        blk(t, i, &hint, &ptr, &size);
        if (ptr + (size ? size : 1) > s.hi) s.hi = ptr + (size ? size : 1);
    }
    int rc = -ENOMEM;
    if (!read_buffers(&s)) goto out;
    if (t->arr) {
        s.ntop = (n + TOP_STEP - 1) / TOP_STEP;
        s.top = malloc(s.ntop * sizeof *s.top);
        for (size_t j = 0; s.top && j < s.ntop; j++) s.top[j] = t->arr[j * TOP_STEP].ptr;
    }
    page_index(&s);
    s.start = malloc((n + 1) * sizeof *s.start);
    if (!s.start) goto out;
    if (io->heuristics &&
        (!(s.heur = calloc(n, 1)) || !(s.hs = calloc(1, sizeof *s.hs))))
        goto out;

    /* 1. The whole graph, when it is small enough to keep (below), and the
     * blocks reachable from the roots, marked from it. Each block is read
     * once, in address order, so neighbours share reads: reading blocks
     * as the marks reach them (the fallback) took a request per block on
     * heaps of lists, whose next nodes lie a few KiB apart at any moment
     * (issue 12). The verdicts are the same: marking follows the same
     * pointers under the same rule, only from memory, and marks only rise.
     * Blocks that cannot be read have no edges, as they were not scanned. */
    bool graph = n < START_EDGE;
    if (graph) {
        /* Up to EDGES_PER_BLOCK edges a block (16 bytes, beside the 20 the
         * live set keeps per block), or MIN_EDGES (64 MiB) when that is more. */
        s.max_edges = n * EDGES_PER_BLOCK > MIN_EDGES ? n * EDGES_PER_BLOCK : MIN_EDGES;
        if (io->max_edges) s.max_edges = io->max_edges > 0 ? (size_t)io->max_edges : 0;
        rc = read_graph(&s);
        if (s.nruns <= 1) s.start[n] = (uint32_t)s.nedges;
        if (rc == -E2BIG) {
            /* Too many pointers to keep: read blocks as they are reached. */
            graph = false;
            free_graph(&s);
            st->heap_bytes = 0;
            st->graph_given_up = true;
        } else if (rc < 0) {
            goto out;
        }
    }
    /* Blocks glibc frees at exit: reachable, and never queued to be scanned
     * (mark() stops at a reachable block). */
    for (size_t r = 0; r < io->nfreed; r++) {
        uint64_t start;
        int64_t k = io->freed[r].lo >= s.lo && io->freed[r].lo < s.hi ? find(&s, io->freed[r].lo, &start) : -1;
        if (k >= 0 && start == io->freed[r].lo) verdict[k] = ML_REACH_REACHABLE;
    }
    s.prior_definite = true;
    s.root = true;
    for (size_t r = 0; r < nroots; r++)
        if ((rc = scan_range(&s, roots[r].lo, roots[r].hi - roots[r].lo, &st->root_bytes)) < 0)
            goto out;
    s.root = false;
    s.owned = true;
    for (size_t r = 0; r < io->nowned; r++)
        if ((rc = scan_range(&s, io->owned[r].lo, io->owned[r].hi - io->owned[r].lo, &st->root_bytes)) < 0)
            goto out;
    s.owned = false;
    if (graph) {
        if ((rc = mark_from_graph(&s)) < 0) goto out;
    } else {
        while (s.nwork) {
            /* Take a batch off the work list; scanning it may push more. */
            size_t k = s.nwork > BATCH_REQS ? BATCH_REQS : s.nwork;
            uint32_t batch[BATCH_REQS];
            memcpy(batch, s.work + s.nwork - k, k * sizeof *batch);
            s.nwork -= k;
            /* In address order, so that neighbours share a read. The order
             * blocks are scanned in does not change the verdicts: marks only
             * ever rise (unseen, possible, reachable), and a block whose mark
             * rises is scanned again. */
            qsort(batch, k, sizeof *batch, cmp_u32);
            if ((rc = scan_blocks(&s, batch, k)) < 0) goto out;
        }

        /* 2. The leaked blocks' pointer graph (edges between unreached
         * blocks). Blocks not read have no edges: their start is the next
         * one's (filled in below). */
        s.mode = EDGES_UNSEEN;
        memset(s.start, 0xff, (n + 1) * sizeof *s.start);
        for (size_t i = 0; i < n;) {
            uint32_t batch[BATCH_REQS];
            size_t k = 0;
            for (; i < n && k < BATCH_REQS; i++)
                if (verdict[i] == UNSEEN) batch[k++] = (uint32_t)i;
            if (k && (rc = scan_blocks(&s, batch, k)) < 0) goto out;
        }
        s.start[n] = (uint32_t)s.nedges;
        for (size_t i = n; i-- > 0;)
            if (s.start[i] == UINT32_MAX) s.start[i] = s.start[i + 1];
    }

    /* 3. Leaders and their cliques, in the order valgrind's own addresses
     * would have: the order of allocation (below). */
    /* What only the reading needed goes first: the order may take 16
     * bytes a lost block (leaders_init), at the scan's peak. */
    free(s.buf);
    free(s.reqs);
    free(s.span);
    free(s.top);
    free(s.pg);
    free(s.heur);
    free(s.hs);
    s.buf = NULL;
    s.reqs = NULL;
    s.span = NULL;
    s.top = NULL;
    s.pg = NULL;
    s.heur = NULL;
    s.hs = NULL;
    leaders_init(&lead, &s);
    for (size_t i; leaders_next(&lead, &i);) {
        verdict[i] = ML_REACH_DEFINITE;
        s.nwork = 0;
        if ((rc = push_work(&s, (uint32_t)i)) < 0) goto out;
        while (s.nwork) {
            uint32_t j = s.work[--s.nwork], e, end;
            const uint32_t *edges = edges_of(&s, j, &e, &end);
            /* With the whole graph, edges to blocks that are not leaked
             * are there too: neither test below takes them. */
            for (; e < end; e++) {
                uint32_t to = graph ? edges[e] & ~START_EDGE : edges[e];
                if (to == i) continue;
                if (verdict[to] == UNSEEN) {
                    verdict[to] = ML_REACH_INDIRECT;
                    /* A block with no pointers has nothing to follow: not
                     * stacked. A leader that holds millions of leaves (an
                     * array of pointers to small blocks, lost) stacked
                     * them all: 4 bytes each, and the stack's doubling. */
                    uint32_t te, tend;
                    (void)edges_of(&s, to, &te, &tend);
                    if (te < tend && (rc = push_work(&s, to)) < 0) goto out;
                } else if (verdict[to] == ML_REACH_DEFINITE) {
                    /* An earlier leader hangs off this one: it joins this clique
                     * (its own clique is already indirect). */
                    verdict[to] = ML_REACH_INDIRECT;
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
    free(s.span);
    free(s.top);
    free(s.pg);
    free(s.work);
    free_graph(&s);
    free(s.start);
    free(s.heur);
    free(s.hs);
    leaders_free(&lead);
    return rc;
}

int ml_reach_classify(const ml_live_block_t *blocks, size_t n, const ml_range_t *roots,
                      size_t nroots, const ml_reach_io_t *io, uint8_t *verdict,
                      ml_reach_stats_t *st) {
    const ml_reach_blocks_t t = {.arr = blocks, .n = n};
    return ml_reach_classify_blocks(&t, roots, nroots, io, verdict, st);
}
