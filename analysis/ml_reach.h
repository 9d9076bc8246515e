/* ml_reach.h - which heap blocks live at exit are still reachable.
 *
 * High-level; may allocate. A conservative pointer scan, as LeakSanitizer
 * and valgrind memcheck do it, over memory read through a callback (the
 * collector reads the stopped-at-exit target with process_vm_readv; tests
 * read a buffer):
 *
 *  1. Every aligned 8-byte word of the roots (writable data of the modules,
 *     thread stacks, other writable private mappings) that points into a live
 *     block marks it, and marked blocks are scanned in turn (valgrind's
 *     rule): a pointer to a block's first byte from a root or from a
 *     reachable block makes it reachable; a pointer into its inside, or any
 *     pointer from a possibly lost block, makes a block not yet marked
 *     possibly lost (possible). A possible block later found through a start
 *     pointer from a reachable one becomes reachable.
 *  2. The remaining blocks are leaked. Their pointer graph is built, and in
 *     address order each block not yet classified becomes a "leader"
 *     (definite); every leaked block reachable from a leader, other than the
 *     leader itself, is indirect, including earlier leaders (valgrind's
 *     clique rule, so a cycle of leaked blocks reports one definite block and
 *     the rest indirect).
 *
 * How (docs/analysis.md, "Leak kinds"): every block is read once, in
 * address order, into the graph of the pointers between blocks, and both
 * steps work on the graph; when it would hold more than 4 edges per block
 * (16 M at least), blocks are read as step 1 reaches them, and the leaked
 * ones again for step 2. The verdicts are the same either way.
 *
 * Between leaked blocks a pointer anywhere inside a block counts (as in
 * valgrind), except, under glibc, the one offset where glibc's own free lists
 * and top pointer point: the next chunk's header (that offset never counts).
 * valgrind's --leak-check-heuristics (std::string, new[] cookies, multiple
 * inheritance) are not applied: such interior pointers give "possible".
 *
 * Ownership: the blocks, roots and verdicts are the caller's; the scan keeps
 * nothing after it returns. Errors: 0 or a negative errno (the verdicts are
 * then not to be used). Out of memory (the scan's work lists and read
 * buffers): -ENOMEM. Threads: no shared state, so scans of different inputs
 * may run at once; the read callback is called from the calling thread, or
 * from io->threads threads at once while the graph is read.
 */
#ifndef ML_REACH_H
#define ML_REACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ml_analysis.h"

typedef struct {
    uint64_t lo, hi; /* [lo, hi) */
} ml_range_t;

/* One read request: `got` is set to the bytes read (0 when unreadable). */
typedef struct {
    uint64_t addr;
    size_t len;
    void *buf;
    size_t got;
} ml_reach_req_t;

typedef struct {
    /* Reads n requests; returns 0, or a negative errno when nothing can be
     * read at all (the scan is then abandoned). */
    int (*read)(void *ctx, ml_reach_req_t *reqs, size_t n);
    void *ctx;
    bool glibc_chunk_alias; /* ignore pointers at the next glibc chunk header */
    uint64_t deadline_ns;   /* CLOCK_MONOTONIC; 0: none. Past it: -ETIMEDOUT */
    /* The pointer graph of all blocks is kept while it has at most this many
     * edges: 0 is the default (4 a block, and at least 16 M), -1 none. Past
     * it, blocks are read as the marks reach them. Tests set it. */
    int64_t max_edges;
    /* Threads that may read the graph at once (0 or 1: the calling thread
     * only). Above 1, `read` must be safe to call from several threads at
     * once. The verdicts do not depend on it. */
    int threads;
    /* valgrind memcheck's leak-check heuristics (its default, "all"): an
     * interior pointer that one of them explains counts as a pointer to the
     * block's start (reach.c, "Heuristics"). Off when false. */
    bool heuristics;
    /* For the multiple-inheritance heuristic: ML_REACH_MAP_* flags of the
     * file-backed mapping holding addr, its end in *end; 0 when addr is in
     * no file-backed mapping. NULL: that heuristic is off. Called from the
     * reading threads at once. */
    unsigned (*map_flags)(void *ctx, uint64_t addr, uint64_t *end);
    /* Roots whose every pointer into a block counts as a pointer to its
     * start: memory of glibc's own that holds aligned or offset pointers
     * into blocks glibc allocated for itself and frees in __libc_freeres,
     * which valgrind runs at exit (the dynamic loader's data, which holds
     * its _dl_find_object tables). Scanned after `roots`. */
    const ml_range_t *owned;
    size_t nowned;
    /* Blocks glibc frees at exit (__libc_freeres, as valgrind runs it) with
     * the memory that points to them: the TLS vector and dynamic TLS blocks
     * of threads whose stacks glibc's cache keeps. Each range's lo is a
     * block's first byte. Such a block is reachable (no leak, as valgrind
     * reports none) but never scanned: what only it points to is lost. */
    const ml_range_t *freed;
    size_t nfreed;
    /* Optional: how many bytes from addr (at most len, 0 < result) lie in
     * pages that are all in memory or swap (*resident true: read them), or
     * all never touched (*resident false: they hold zeros, no pointer, and
     * are skipped unread; reading them would make the target's kernel
     * back them with memory). NULL: everything is read. Called from the
     * reading threads at once. */
    uint64_t (*resident_run)(void *ctx, uint64_t addr, uint64_t len, bool *resident);
} ml_reach_io_t;

#define ML_REACH_MAP_R 1u /* readable */
#define ML_REACH_MAP_X 2u /* executable */

typedef struct {
    uint64_t root_bytes, heap_bytes; /* bytes read */
    uint64_t reachable, indirect, definite, possible;
    bool graph_given_up; /* the graph outgrew max_edges: blocks were read as reached */
} ml_reach_stats_t;

/* A block this big (an allocator's grant of address space, as jemalloc
 * gives 64 TiB to new(std::nothrow) char[1 << 46]) is not read for
 * pointers: walking its page map alone took the scan past its deadline, and
 * the program waited 30 s at its exit. As for mappings of 1 TiB. */
#define ML_REACH_HUGE_BLOCK (1ull << 40)

/* The blocks a scan works on, in address order: the caller's array
 * (ml_reach_classify), or the analysis session's live set read in place
 * (the collector: ml_analysis_live_reach_blocks), which costs nothing a
 * block. A copy of 16-byte (address, size) pairs was 120 MB on top of the
 * collector's live set when a program exited with 7.5 M blocks (issue 12). */
struct ml__live_index_s;
typedef struct {
    const ml_live_block_t *arr; /* or NULL: `live` */
    size_t n;
    struct ml__live_index_s *live;
    uint64_t bytes; /* the blocks' bytes, when known (0: counted; only shares the work out) */
    /* With `arr`: each block's allocation sequence number (arr's order), or
     * NULL. The leaked blocks' cliques are formed in this order (`live`
     * has its own; without either, in address order): reach.c, step 3. */
    const uint64_t *seq;
} ml_reach_blocks_t;

/** Frees what ml_analysis_live_reach_blocks made (the array is the caller's). */
void ml_reach_blocks_free(ml_reach_blocks_t *t);

/** Block i's address and size. *hint (0 at first) makes a walk in index
 * order cheap. */
void ml_reach_block_at(const ml_reach_blocks_t *t, size_t i, uint64_t *hint, uint64_t *ptr,
                       uint64_t *size);
uint64_t ml_reach_block_ptr(const ml_reach_blocks_t *t, size_t i);
uint64_t ml_reach_block_size(const ml_reach_blocks_t *t, size_t i);
/** The index of the first block at or above address lo (n: none). */
size_t ml_reach_blocks_first(const ml_reach_blocks_t *t, uint64_t lo);

/** Classifies n blocks (sorted by address, non-overlapping) into verdict[i]
 * (ML_REACH_REACHABLE / _POSSIBLE / _INDIRECT / _DEFINITE). Returns 0 or a negative
 * errno (-ENOMEM, -ETIMEDOUT, or the reader's error). */
int ml_reach_classify(const ml_live_block_t *blocks, size_t n, const ml_range_t *roots,
                      size_t nroots, const ml_reach_io_t *io, uint8_t *verdict,
                      ml_reach_stats_t *st);

/** The session's live heap blocks, in address order, as a table read in
 * place (free it with ml_reach_blocks_free; the session must not change
 * meanwhile): the count, or -ENOMEM. */
int64_t ml_analysis_live_reach_blocks(ml_analysis_t *a, ml_reach_blocks_t *t);

/** ml_reach_classify() on a block table. */
int ml_reach_classify_blocks(const ml_reach_blocks_t *t, const ml_range_t *roots, size_t nroots,
                             const ml_reach_io_t *io, uint8_t *verdict, ml_reach_stats_t *st);

/** "glibc", "jemalloc", "tcmalloc" or "mimalloc": which allocator the traced
 * program used, from its loaded modules. */
const char *ml_analysis_allocator_model(const ml_analysis_t *a);

#endif
