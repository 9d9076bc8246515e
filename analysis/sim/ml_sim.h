/* ml_sim.h - replaying an allocation sequence through simulated allocators.
 *
 * High-level; may allocate. A policy is a model of one allocator design
 * (first fit, buddy, slab, TLSF, ...) that places blocks in its own simulated
 * address space starting at 0. It is driven by numbered operations: alloc(id,
 * size, align) returns the address it chose, free(id) releases it. Ids are
 * small dense integers chosen by the caller (the replay driver recycles them),
 * so every per-block table is an array indexed by id and memory stays
 * proportional to the live set, never to the number of operations.
 *
 * What every policy measures, the same way (docs/strategies.md):
 *   - footprint: bytes of the pages that hold at least one live block
 *     (headers and rounding included). This is what an allocator must hold
 *     from the OS when it gives back every page with no live block, the same
 *     page model as the report's page_utilization, so policies and the real
 *     allocator are comparable. Peak footprint is its maximum over time.
 *   - internal fragmentation: 1 - requested bytes / block bytes (live).
 *   - external fragmentation: 1 - largest free unit / free bytes, over the
 *     allocator's own free structures. For contiguous allocators the unit is
 *     a contiguous free block; for size-class allocators (slab, pool) every
 *     free slot of a class serves every request of that class, so the unit is
 *     the class: one class never fragments externally, memory stranded in
 *     other classes does.
 *   - page utilization: requested live bytes / footprint.
 *   - extent: the high-water mark of the address range the blocks used, the
 *     textbook "heap size needed" and what an sbrk-style allocator that never
 *     gives back memory below its top (glibc without malloc_trim) holds.
 *   - cost: search steps (free blocks or classes examined, counted as the
 *     textbook list or bitmap the policy is named after would examine them,
 *     not as the simulator's own trees do), splits and merges per operation.
 *
 * Thread-safety: a policy is used by one thread at a time. The replay driver
 * runs different policies on different threads.
 *
 * Ownership: a policy owns its tables (ml_sim_policy_free); a replay owns the
 * policies added to it, and the router and growth wrappers own the policies
 * they wrap (also when their constructor fails). Names and metrics are
 * copied out or live as long as their policy.
 *
 * Errors and out of memory: functions return 0 or a negative errno. The
 * simulator running out of memory itself gives -ENOMEM from the operation
 * that needed it; that policy's numbers are then not to be trusted, and a
 * replay keeps returning the error to every later feed. The simulator's hash
 * tables are the analysis layer's (ml_map.h) and grow through its allocator
 * hook (ml_util.h).
 */
#ifndef ML_SIM_H
#define ML_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ml_trace_io.h"

typedef struct {
    uint32_t page_size; /* 4096 */
    uint32_t align;     /* granule and default alignment of a block, a power of two: 16 */
    uint32_t header;    /* boundary-tag bytes per block in the free-list policies: 8 */
} ml_sim_config_t;

/** The defaults above: a 64-bit glibc/dlmalloc-like block layout. */
void ml_sim_config_default(ml_sim_config_t *c);

/* One operation. The replay driver fills every field; unit tests and direct
 * callers only need type, id, size and align. */
typedef struct {
    uint64_t ptr;     /* address the program's allocator returned (the "real" policy) */
    uint64_t size;    /* requested bytes (alloc) */
    uint32_t id;      /* dense block id */
    uint32_t site;    /* allocation stack (leaf node id), 0 when unknown */
    uint32_t time_ms; /* trace clock */
    uint16_t thread;
    uint8_t type;     /* ML_SIM_ALLOC, ML_SIM_FREE or ML_SIM_MALLINFO */
    uint8_t align;    /* log2 of the requested alignment, 0 = default */
    uint8_t flags;    /* ML_SIM_F_* */
} ml_sim_op_t;

enum { ML_SIM_ALLOC = 1, ML_SIM_FREE = 2, ML_SIM_MALLINFO = 3 /* size: bytes held (arena + hblkhd) */ };

#define ML_SIM_F_REALLOC 0x01   /* alloc: the new block of a realloc; free: its old block */
#define ML_SIM_F_TEMPORARY 0x02 /* alloc freed before any other allocation (heaptrack) */
#define ML_SIM_F_SAMPLED 0x04   /* recorded by the sampler */

typedef struct {
    uint64_t live_requested; /* bytes the program asked for, live */
    uint64_t live_blocks;    /* bytes of the blocks that hold them */
    uint64_t live_count;
    uint64_t footprint;      /* bytes of the pages holding a live block */
    uint64_t free_bytes;     /* free space in the allocator's own structures */
    uint64_t largest_free;   /* largest free unit (see the header comment) */
    double internal;         /* 1 - live_requested / live_blocks */
    double external;         /* 1 - largest_free / free_bytes; 0 with nothing free */
    double page_utilization; /* live_requested / footprint; 1 with nothing held */
    uint64_t op;             /* operations done when the snapshot was taken */
    uint32_t time_ms;
} ml_sim_frag_t;

typedef struct {
    char name[24];
    uint64_t peak_footprint;     /* maximum of footprint */
    uint64_t peak_extent;        /* high-water mark of the address range in use (plus pages held
                                  * outside it): what an allocator that never gives back memory
                                  * below its top holds, i.e. the textbook "heap size needed";
                                  * 0 for "real" */
    ml_sim_frag_t at_peak;       /* when footprint first reached its maximum */
    ml_sim_frag_t at_end;        /* now */
    uint64_t allocs, frees, failed;
    uint64_t search_steps, splits, merges;
    uint64_t max_op_steps;       /* most steps (search + splits + merges) of one operation */
    double cost_per_op;          /* (search_steps + splits + merges) / (allocs + frees) */
    bool known_fragmentation;    /* false for "real": its blocks and free space are not known */
    bool known_cost;
    uint64_t os_held_peak;       /* "real" only: maximum of mallinfo arena + hblkhd, 0 if never sampled */
    uint64_t state_bytes;        /* memory the simulator holds for this policy now */
    double cpu_seconds;          /* thread CPU time spent in this policy (replay driver) */
} ml_sim_metrics_t;

typedef struct ml_sim_policy_s ml_sim_policy_t;
typedef struct ml_sim_fpseries_s ml_sim_fpseries_t; /* a footprint series, below */

/* --- policies ----------------------------------------------------------- */
/* Each constructor returns 0 or -ENOMEM (-EINVAL for a bad config).
 * `c` may be NULL for the defaults. */

/** Address-ordered free list with coalescing; takes the lowest-addressed fit. */
int ml_sim_first_fit_new(const ml_sim_config_t *c, ml_sim_policy_t **out);
/** The same list; searches on from where the last search ended (Knuth's roving pointer). */
int ml_sim_next_fit_new(const ml_sim_config_t *c, ml_sim_policy_t **out);
/** The same list; takes the smallest block that fits (lowest address among equals). */
int ml_sim_best_fit_new(const ml_sim_config_t *c, ml_sim_policy_t **out);
/** The same list; takes the largest free block. */
int ml_sim_worst_fit_new(const ml_sim_config_t *c, ml_sim_policy_t **out);
/** Segregated free lists: exact classes below 64 granules, 4 per power of two above,
 * dlmalloc-style: looks at up to 16 blocks of the request's class, then takes a
 * block of the next non-empty larger class, splits and coalesces. */
int ml_sim_segfit_new(const ml_sim_config_t *c, ml_sim_policy_t **out);
/** Two-level segregated fit (Masmano et al.): 16 second-level classes per power
 * of two, bitmaps, good fit in O(1), immediate coalescing. */
int ml_sim_tlsf_new(const ml_sim_config_t *c, ml_sim_policy_t **out);
/** Binary buddy: power-of-two blocks from 16 bytes, split on demand, merged with
 * the buddy on free; the address space doubles when it is full. No headers. */
int ml_sim_buddy_new(const ml_sim_config_t *c, ml_sim_policy_t **out);
/** Slab per size class (jemalloc-like classes up to 16 KiB, Bonwick's partial
 * lists); larger requests get whole pages of their own. */
int ml_sim_slab_new(const ml_sim_config_t *c, ml_sim_policy_t **out);
/** A slab allocator with the given classes (ascending, multiples of 8). */
int ml_sim_slab_new_classes(const ml_sim_config_t *c, const uint64_t *classes, size_t n,
                            ml_sim_policy_t **out);
/** A pool of fixed-size objects: a slab with the one class `object_size` (rounded to 8). */
int ml_sim_pool_new(const ml_sim_config_t *c, uint64_t object_size, ml_sim_policy_t **out);
/** Bitmap fit: one bit per granule, first run of free granules that fits, no headers. */
int ml_sim_bitmap_new(const ml_sim_config_t *c, ml_sim_policy_t **out);
/** Bump allocation into 64 KiB chunks, one arena per group (the op's site, or one
 * group for all with `single_group`); a chunk is released when its last block
 * dies, the current one is reset and kept. */
int ml_sim_arena_new(const ml_sim_config_t *c, bool single_group, ml_sim_policy_t **out);
/** One reused buffer (its size is the largest request) or, with `on_stack`, the
 * stack: neither takes heap pages beyond the buffer. For what-if studies. */
int ml_sim_buffer_new(const ml_sim_config_t *c, bool on_stack, ml_sim_policy_t **out);
/** The allocator the program really used: the recorded addresses and sizes. */
int ml_sim_real_new(const ml_sim_config_t *c, ml_sim_policy_t **out);

/** A what-if: ops for which route(ctx, op) returns true go to `dedicated`, the
 * others to `general`; the footprint is the sum of both. With `compare` (the
 * same general allocator fed everything), the router also tracks by how much
 * the what-if holds less than it, op by op (ml_sim_router_gain). Takes
 * ownership of the policies (also on failure). */
typedef bool (*ml_sim_route_fn)(void *ctx, const ml_sim_op_t *op);
int ml_sim_router_new(const char *name, ml_sim_route_fn route, void *ctx, ml_sim_policy_t *general,
                      ml_sim_policy_t *dedicated, ml_sim_policy_t *compare, ml_sim_policy_t **out);
/** The same with a recorded footprint series (ml_sim_fpseries_ok) in place
 * of the compare policy: the same numbers, without running the copy. */
int ml_sim_router_new_series(const char *name, ml_sim_route_fn route, void *ctx, ml_sim_policy_t *general,
                             ml_sim_policy_t *dedicated, const ml_sim_fpseries_t *compare,
                             ml_sim_policy_t **out);
/** Largest (compare footprint - router footprint) seen, its time, and the
 * dedicated part's own metrics. */
typedef struct {
    uint64_t max_gain_bytes;
    uint32_t max_gain_time_ms;
    uint64_t dedicated_live_blocks, dedicated_live_bytes; /* in the dedicated part at that moment */
    uint64_t compare_peak;
    bool compare_failed; /* the series could not be read back: the gain is not known */
    ml_sim_metrics_t dedicated;
    ml_sim_metrics_t general;
} ml_sim_router_gain_t;
void ml_sim_router_gain(const ml_sim_policy_t *router, ml_sim_router_gain_t *out);

/** A what-if for growth chains: wraps `inner` (taking ownership); a realloc
 * (free + alloc flagged ML_SIM_F_REALLOC on one thread) that fits the block's
 * capacity does nothing, one that does not moves the block to max(size,
 * capacity * factor). */
int ml_sim_growth_new(ml_sim_policy_t *inner, double factor, ml_sim_policy_t **out);
/** Reallocs that fit the reserve (no call, no copy), the bytes they did not
 * copy, and the moves that remained. */
void ml_sim_growth_stats(const ml_sim_policy_t *growth, uint64_t *avoided, uint64_t *avoided_bytes,
                         uint64_t *moves);

/** The standard comparison set, in table order: "real" is not among them. */
extern const char *const ml_sim_policy_names[];
/** Creates a standard policy by name. Returns -ENOENT for an unknown name. */
int ml_sim_policy_new(const char *name, const ml_sim_config_t *c, ml_sim_policy_t **out);

void ml_sim_policy_free(ml_sim_policy_t *p);
const char *ml_sim_name(const ml_sim_policy_t *p);

/* --- operations --------------------------------------------------------- */

/** Allocates `size` bytes for block `id` aligned to `align` (0 or a power of
 * two). Returns 0 with the chosen address in *addr (may be NULL), -EEXIST when
 * id is live, -ENOMEM when the simulator itself ran out of memory. */
int ml_sim_alloc(ml_sim_policy_t *p, uint32_t id, uint64_t size, uint32_t align, uint64_t *addr);
/** Frees block `id`. Returns 0 or -ENOENT when it is not live. */
int ml_sim_free(ml_sim_policy_t *p, uint32_t id);
/** Applies one op (alloc or free). Same returns as above. */
int ml_sim_apply(ml_sim_policy_t *p, const ml_sim_op_t *op);
/** A mallinfo sample (the "real" policy keeps the maximum; others ignore it). */
void ml_sim_mallinfo(ml_sim_policy_t *p, uint64_t held_bytes);

/** A hint: makes room for block ids [0, ids) in the policy's tables now,
 * so that they do not grow (copying) op by op. Changes no result. Returns 0
 * or -ENOMEM. */
int ml_sim_reserve(ml_sim_policy_t *p, uint32_t ids);

/** Block size (with header and rounding) of a live block: 0 or -ENOENT. */
int ml_sim_block(const ml_sim_policy_t *p, uint32_t id, uint64_t *block);
/** Current footprint in bytes. */
uint64_t ml_sim_footprint(const ml_sim_policy_t *p);
/** Metrics; at_end is taken now. */
void ml_sim_metrics(const ml_sim_policy_t *p, ml_sim_metrics_t *m);

/* --- replaying a trace -------------------------------------------------- */

/* The replay driver turns trace records into ops: it maps recorded addresses
 * to dense ids, turns a realloc into free + alloc (restoring the old block
 * when the trace says the realloc failed), derives the alignment from the
 * allocation kind, marks temporary allocations, and feeds every policy. Ops
 * are handed over in batches; with threads > 0 the policies of a batch run on
 * that many worker threads while the caller decodes the next batch. Each
 * policy sees every op in trace order. Memory: two batches plus one id per
 * live block. */
typedef struct ml_sim_replay_s ml_sim_replay_t;

/** Called in the feeding thread with each batch before the policies see it. */
typedef void (*ml_sim_observer_fn)(void *ctx, const ml_sim_op_t *ops, size_t n);

int ml_sim_replay_new(unsigned threads, ml_sim_replay_t **out);
/** Adds a policy (owned by the replay from now on, also on failure). */
int ml_sim_replay_add(ml_sim_replay_t *r, ml_sim_policy_t *p);
void ml_sim_replay_observe(ml_sim_replay_t *r, ml_sim_observer_fn fn, void *ctx);
/** Hands every record ml_sim_replay_file_progress() reads to fn, on the
 * reading thread as it reads it (its strings valid only during the call),
 * then NULL once the trace was read to its end without an error: a caller
 * that needs the trace's records too reads them once. NULL fn: none. */
typedef void (*ml_sim_record_fn)(void *ctx, const ml_record_t *rec);
void ml_sim_replay_records(ml_sim_replay_t *r, ml_sim_record_fn fn, void *ctx);
/** A hint, after the policies are added and before the first record: the
 * trace keeps about `live` blocks live at its peak (the analysis' count).
 * Sizes the address map and every per-id table for it at once (ids are
 * recycled, so they stay below the largest number of live blocks), instead
 * of doubling and copying them while the trace is read. The replay's own
 * tables are sized when the first record is fed (a replay fed from an op
 * log needs none of them); each policy's are sized by the thread that runs it,
 * before its first op, so that the policies fill their tables in parallel
 * while the trace is read (a policy whose tables cannot be made larger then
 * grows them as it goes). Changes no result. Returns 0 or -ENOMEM. */
int ml_sim_replay_reserve(ml_sim_replay_t *r, uint32_t live);
/** Consumes one record in trace order. Returns 0 or -ENOMEM. */
int ml_sim_replay_feed(ml_sim_replay_t *r, const ml_record_t *rec);
/** Feeds a whole trace file. Returns 0, or a negative errno with a message in err. */
int ml_sim_replay_file(ml_sim_replay_t *r, const char *path, char *err, size_t errlen);

/** ml_sim_replay_file() that prints "memlens: LABEL NN%" on stderr while it
 * reads, when `label` is not NULL, stderr is a terminal and the trace is
 * larger than 64 MiB; the line is erased at the end. */
int ml_sim_replay_file_progress(ml_sim_replay_t *r, const char *path, const char *label, char *err,
                                size_t errlen);
/** A log of the ops a replay hands to its policies, so that another replay
 * of the same trace reads them back instead of decoding the trace again
 * (sim_oplog.c): kept in an unlinked temporary file in $TMPDIR, /var/tmp or /tmp,
 * with a 1 MiB buffer and a table of the live ids in memory. Returns 0, or
 * a negative errno when no temporary file can be made. */
typedef struct ml_sim_oplog_s ml_sim_oplog_t;
int ml_sim_oplog_new(ml_sim_oplog_t **out);
void ml_sim_oplog_free(ml_sim_oplog_t *log);
/** False once writing it failed (a full disk, its 4 GiB cap, 256 MiB on tmpfs): replay the
 * trace instead. */
bool ml_sim_oplog_ok(const ml_sim_oplog_t *log);
uint64_t ml_sim_oplog_bytes(const ml_sim_oplog_t *log);
/** Appends every op this replay dispatches to `log` (borrowed), from now on:
 * set it before the first record. */
void ml_sim_replay_log(ml_sim_replay_t *r, ml_sim_oplog_t *log);
/** Feeds a fresh replay the ops of `log`, written by an earlier replay that
 * has finished: the same ops, with the same ids and flags, as feeding it
 * the trace would. `label` as in ml_sim_replay_file_progress(). Returns 0,
 * or a negative errno with a message in err. */
int ml_sim_replay_oplog(ml_sim_replay_t *r, ml_sim_oplog_t *log, const char *label, char *err,
                        size_t errlen);
/** A footprint series (sim_oplog.c): one policy's footprint after every op
 * of a replay, kept as its changes in an unlinked temporary file like the
 * op log's, so that a router of a later replay of the same ops compares
 * itself with it instead of running a copy of that policy
 * (ml_sim_router_new_series). Returns 0, or a negative errno when no
 * temporary file can be made. */
int ml_sim_fpseries_new(ml_sim_fpseries_t **out);
void ml_sim_fpseries_free(ml_sim_fpseries_t *s);
/** True once the replay that recorded it has finished and every change was
 * written. */
bool ml_sim_fpseries_ok(const ml_sim_fpseries_t *s);
uint64_t ml_sim_fpseries_bytes(const ml_sim_fpseries_t *s);
/** Records the footprint of policy `i` of this replay into `s` (borrowed),
 * from now on: set it before the first record. */
void ml_sim_replay_series(ml_sim_replay_t *r, size_t i, ml_sim_fpseries_t *s);
/** Runs what is pending and waits for the workers. Call once, after the last feed. */
int ml_sim_replay_finish(ml_sim_replay_t *r);
size_t ml_sim_replay_count(const ml_sim_replay_t *r);
ml_sim_policy_t *ml_sim_replay_policy(const ml_sim_replay_t *r, size_t i);
/** Metrics of policy i, with cpu_seconds. */
void ml_sim_replay_metrics(const ml_sim_replay_t *r, size_t i, ml_sim_metrics_t *m);
/** Ops fed to the policies so far; allocations; whether the trace was sampled. */
uint64_t ml_sim_replay_ops(const ml_sim_replay_t *r);
bool ml_sim_replay_sampled(const ml_sim_replay_t *r);
/** Memory held by the driver itself (id map, batches). */
uint64_t ml_sim_replay_state_bytes(const ml_sim_replay_t *r);
void ml_sim_replay_free(ml_sim_replay_t *r);

/** Block size a policy family gives to a request (for docs and advisor evidence). */
uint64_t ml_sim_pow2_block(uint64_t size);

#endif
