/* ml_event.h - the in-memory contract between a traced process and the collector.
 *
 * Low-level; no heap, no stdio. This header fixes three layouts that live in
 * shared memory and are read by two processes at once:
 *
 *   - ml_ctl_t: one control segment per `memlens run` session, created by the
 *     collector (a file under /dev/shm whose path is in ML_CTL). It carries the
 *     options, a coarse clock the collector ticks, and a table of process slots.
 *   - ml_ring_hdr_t + ml_slot_t[]: one ring per traced process image, created
 *     by the process itself at start-up (the ring file is <ctl path>.<slot>).
 *   - ml_event_t: the fixed 32-byte event written into a slot.
 *
 * The ring protocol (a bounded multi-producer, single-consumer queue with a
 * sequence number per slot, after D. Vyukov's bounded queue). With cap slots
 * and lap(p) = p & ~(cap - 1), the base position of p's lap:
 *
 *   - slot p % cap is free for position p when seq == lap(p). A zero-filled
 *     file is therefore a valid empty ring: nothing is written at creation and
 *     pages are touched only as the ring fills.
 *   - A producer claims n consecutive positions from head, with a
 *     compare-and-swap, once the slot of the last is free for it (the
 *     consumer has released the previous lap, in order, so all n are free).
 *     Without room it waits (backpressure, counted) holding no position. It
 *     writes the events and publishes each with a release store of
 *     lap(p) + 1.
 *   - The consumer reads position t once seq == lap(t) + 1 and releases the
 *     slot with seq = lap(t + cap).
 *
 * Producers never lock and never drop. Because the ring is a shared file
 * mapping, every published event survives the death of the producer. A
 * position that was claimed but never published (the producer was killed
 * between the two steps) is detected by the consumer after the process is
 * gone and counted as lost, never guessed at.
 *
 * Sequence numbers are 32-bit and compared for equality only; lap bases are
 * multiples of cap >= 2, so lap(p) + 1 never equals another lap's base.
 */
#ifndef ML_EVENT_H
#define ML_EVENT_H

#include <stdint.h>
#include "ml_atomic.h"

#define ML_CTL_MAGIC 0x314c54434e4c4d4dull  /* "MMLNCTL1" */
#define ML_RING_MAGIC 0x31474e49524c4d4dull /* "MMLRING1" */
#define ML_SHM_VERSION 23 /* 2: the ring's futex words (space_gen, sleepers) and unwind-verify counters; 3: exec_untraced;
                           * 4: heap_drop; 5: wake_mask; 6: sbrk_registry; 7: claims only room, no wake_mask;
                           * 8: end_status; 9: ML_BLOB_UNTRACED; 10: ML_BLOB_FORK, fork_seq; 11: exit_regs;
                           * 12: ML_END_STATUS_SIGNALED; 13: children_unfollowed; 14: procs_cap;
                           * 15: ML_EXIT_CRASH in exit_nregs; 16: dlmopen_other; 17: malloc_elsewhere;
                           * 18: deepbind, deepbind_unredirected, deepbind_first; 19: exec_hwm; 20: stdio_list;
                           * 21: ml_ctl_proc_t.err, err_open, procs_failed; 22: closed; 23: ring_key */
/* Process images one session can trace. The table is part of the control
 * file, a sparse file in /dev/shm: a page of it (204 slots) is touched only
 * when processes register there, so the bound costs address space, not
 * memory (20 MiB mapped, 20 bytes used per image). The collector allocates
 * the table's pages ahead of the images that register (ml_ctl_t.procs_cap),
 * so that a full /dev/shm is an error it can report rather than a SIGBUS in
 * the program that touches a page tmpfs has no room for. An image past
 * either bound runs untraced, says so on its stderr, and is counted in
 * ml_ctl_t.procs_refused, which `memlens run` reports; the session still
 * ends normally. */
#define ML_MAX_PROCS (1u << 20)
#define ML_RING_DATA_OFFSET 4096
#define ML_MAX_DEPTH 256
#define ML_DEFAULT_DEPTH 64
#define ML_DEFAULT_RING_SLOTS (1u << 16) /* 2 MiB of events per process (docs/recorder.md: why small) */
/* The smallest ring: a blob's slots are claimed together and the collector
 * reads a blob only once all of them are published, so a blob longer than
 * the ring would wait for itself forever. The largest is a module (a 4 KiB
 * path, 160 slots); runtime.c checks it against this. */
#define ML_MIN_RING_SLOTS 1024u
#define ML_MAX_RING_SLOTS (1u << 28)
/* A ring size memlens accepts: a power of two in [ML_MIN_RING_SLOTS, ML_MAX_RING_SLOTS]. */
static inline int ml_ring_slots_ok(uint64_t n) {
    return n >= ML_MIN_RING_SLOTS && n <= ML_MAX_RING_SLOTS && !(n & (n - 1));
}

/* Event types written into the ring (ml_event_t.type). */
typedef enum {
    ML_EV_NONE = 0,
    ML_EV_ALLOC = 1,        /* ptr, size | slack << 48, stack; after the real call succeeded.
                             * slack = usable size - size, saturated at 0xffff */
    ML_EV_FREE = 2,         /* ptr, size = usable size; before the real free (kind: free or
                             * realloc) */
    ML_EV_REALLOC_FAIL = 3, /* ptr: realloc failed, the block freed just before lives on */
    ML_EV_MMAP = 4,         /* ptr, size, stack: an anonymous mapping (kind: mmap, mremap) */
    ML_EV_MUNMAP = 5,       /* ptr, size: before the real munmap (or mremap's old range) */
    ML_EV_NODE = 6,         /* stack = node id, ptr = return address, size = parent node id */
    ML_EV_BLOB = 7,         /* kind = ml_blob_kind_t, size = payload bytes; payload follows */
    ML_EV_MMAP_FAIL = 8,    /* ptr, size: mremap failed, the old range lives on */
} ml_event_type_t;

/* Allocation and free kinds: which hooked function produced the event. */
typedef enum {
    ML_KIND_MALLOC = 0,
    ML_KIND_CALLOC = 1,
    ML_KIND_REALLOC = 2,
    ML_KIND_REALLOCARRAY = 3,
    ML_KIND_POSIX_MEMALIGN = 4,
    ML_KIND_ALIGNED_ALLOC = 5,
    ML_KIND_MEMALIGN = 6,
    ML_KIND_VALLOC = 7,
    ML_KIND_PVALLOC = 8,
    ML_KIND_FREE = 9,
    ML_KIND_MMAP = 10,
    ML_KIND_MREMAP = 11,
    ML_KIND_MUNMAP = 12,
    ML_KIND_COUNT_
} ml_kind_t;

/* Event flags (ml_event_t.flags). */
#define ML_EVF_SAMPLED 0x01   /* recorded by the Poisson sampler */
#define ML_EVF_TRUNCATED 0x02 /* the stack was cut (depth limit or full stack table) */
#define ML_EVF_ALLOCATOR 0x04 /* ML_EV_MMAP: made by the code of the allocator whose malloc the
                               * hooks call (not glibc): its heap's backing store, not a mapping
                               * of the program's (docs/recorder.md, "Other allocators' mappings") */

/* Variable-length records carried by ML_EV_BLOB. */
typedef enum {
    ML_BLOB_MODULE = 1,        /* ml_blob_module_t, then path bytes, then build-id bytes */
    ML_BLOB_MODULE_UNLOAD = 2, /* uint64_t base */
    ML_BLOB_THREAD = 3,        /* ml_blob_thread_t */
    ML_BLOB_MALLINFO = 4,      /* ml_blob_mallinfo_t */
    ML_BLOB_EXIT = 5,          /* ml_blob_exit_t: the process ran its destructors */
    ML_BLOB_GPU = 6,           /* ml_gpu_event_t: a GPU allocation or free (cupti/, docs/gpu.md) */
    ML_BLOB_UNTRACED = 7,      /* ml_blob_untraced_t, then the reason: a child started without
                                * fork runs a program memlens cannot follow (for the collector's
                                * stderr; no trace record) */
    ML_BLOB_FORK = 8,          /* ml_blob_fork_t: this image is about to fork a child that
                                * will be followed (for the collector: no trace record) */
} ml_blob_kind_t;

/* ML_BLOB_FORK: written by the forking thread just before fork() (an
 * atfork prepare handler) under --follow-fork. `seq` counts this image's
 * forks from 1; the child finds it in its own ring header (fork_seq). The
 * collector keeps the image's live blocks as of this point for the child's
 * exit scan: the child holds copies of them, and a block it allocates may
 * be reachable only through one (docs/analysis.md, "Forked children"). */
typedef struct {
    uint32_t seq;
} ml_blob_fork_t;

/* ML_BLOB_UNTRACED: under --follow-fork, a child this image started with
 * posix_spawn/posix_spawnp, or a vfork child of it about to exec, runs a
 * program the loader will not preload libmemlens.so into (set-user-ID or
 * set-group-ID, statically linked: interpose/exec.c). The reason follows the
 * struct (at most ML_UNTRACED_REASON_MAX bytes, no NUL). A vfork child writes
 * SAID before its exec and CANCEL when the exec failed (nothing ran). The
 * collector says it on stderr when this image ends, as it does for an exec
 * of the image itself (ml_ring_hdr_t.exec_untraced). */
enum { ML_UNTRACED_SAID = 0, ML_UNTRACED_CANCEL = 1 };
enum { ML_UNTRACED_VIA_POSIX_SPAWN = 1, ML_UNTRACED_VIA_POSIX_SPAWNP = 2, ML_UNTRACED_VIA_VFORK = 3 };
#define ML_UNTRACED_REASON_MAX 400
typedef struct {
    uint32_t pid; /* the child */
    uint16_t op;  /* ML_UNTRACED_SAID or ML_UNTRACED_CANCEL */
    uint16_t via; /* ML_UNTRACED_VIA_* */
} ml_blob_untraced_t;

/* GPU events. libmemlens_cupti.so (loaded by the CUDA driver) translates
 * CUPTI callbacks into ml_gpu_event_t and hands each to memlens_gpu_record(),
 * the one function libmemlens.so exports for it; libmemlens takes the CPU
 * stack, fills in `stack` and `flags` (ML_EVF_TRUNCATED) and writes the
 * struct as the payload of an ML_BLOB_GPU blob. The layout is an ABI between
 * two separately loaded libraries and a shared-memory format: fields are only
 * ever appended, and `struct_size` says how much of it the producer knew. */
typedef enum {
    ML_GPU_OP_ALLOC = 1,       /* after the API returned success */
    ML_GPU_OP_FREE = 2,        /* before the API runs (API entry) */
    ML_GPU_OP_FREE_FAILED = 3, /* the free recorded at entry failed: the block lives on */
    ML_GPU_OP_CTX_DESTROY = 4, /* context `context` is being destroyed: what it holds dies */
    ML_GPU_OP_POOL_TRIM = 5,   /* a memory pool released its unused memory (handle = pool) */
    ML_GPU_OP_POOL_STATE = 6,  /* a CUPTI activity record about a memory pool (memlens run
                                * --gpu-pools): `kind` is an ml_gpu_pool_op_t, see below */
    /* Not events: libmemlens raises (lowers) its per-thread guard, so that the
     * allocations libcupti makes while it loads are memlens' own, not the
     * program's. Never written to the ring. */
    ML_GPU_OP_INTERNAL_BEGIN = 0x80,
    ML_GPU_OP_INTERNAL_END = 0x81,
} ml_gpu_op_t;

/* What kind of memory (ml_gpu_event_t.kind). `ptr` is an address, except
 * for VMM_PHYSICAL and ARRAY where it is the driver's handle. */
typedef enum {
    ML_GPU_KIND_DEVICE = 0,          /* cuMemAlloc (cudaMalloc) */
    ML_GPU_KIND_PITCH = 1,           /* cuMemAllocPitch (cudaMallocPitch, cudaMalloc3D) */
    ML_GPU_KIND_HOST_PINNED = 2,     /* cuMemAllocHost, cuMemHostAlloc (cudaMallocHost, cudaHostAlloc) */
    ML_GPU_KIND_HOST_REGISTERED = 3, /* cuMemHostRegister: existing host memory pinned */
    ML_GPU_KIND_MANAGED = 4,         /* cuMemAllocManaged */
    ML_GPU_KIND_ASYNC = 5,           /* cuMemAllocAsync: stream-ordered, the device's current pool */
    ML_GPU_KIND_POOL = 6,            /* cuMemAllocFromPoolAsync: stream-ordered, an explicit pool */
    ML_GPU_KIND_VMM_PHYSICAL = 7,    /* cuMemCreate / cuMemRelease: physical memory (handle) */
    ML_GPU_KIND_VMM_RESERVE = 8,     /* cuMemAddressReserve / Free: address space only */
    ML_GPU_KIND_VMM_MAP = 9,         /* cuMemMap / cuMemUnmap: handle mapped at ptr (handle) */
    ML_GPU_KIND_ARRAY = 10,          /* cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate */
    ML_GPU_KIND_COUNT_
} ml_gpu_kind_t;

/* ml_gpu_event_t.flags (the low byte is ML_EVF_*, set by libmemlens). */
#define ML_GPU_F_ESTIMATED 0x0100 /* size computed from a descriptor (arrays), not exact */
#define ML_GPU_F_HOST 0x0200      /* VMM memory on the host (location HOST/HOST_NUMA) */

#define ML_GPU_F_POOL_IMPORTED 0x0400 /* POOL_STATE: an imported pool (its sizes are unknown) */
#define ML_GPU_F_POOL_MANAGED 0x0800  /* POOL_STATE: a pool of managed memory */

#define ML_GPU_DEVICE_UNKNOWN (-1)

/* What a POOL_STATE event reports (its `kind`): the pool's own life, from
 * CUPTI_ACTIVITY_KIND_MEMORY_POOL, or one stream-ordered allocation or free
 * served by it, from CUPTI_ACTIVITY_KIND_MEMORY2, which carries the pool's
 * sizes right after the operation. Fields of a POOL_STATE event:
 *   ptr = the pool's address, size = its reserved bytes, pool_used = its
 *   utilized bytes, pool_threshold = its release threshold,
 *   handle = the block's address (ALLOC, RELEASE) or the bytes the trim was
 *   asked to keep (TRIMMED), stream = the block's bytes (ALLOC, RELEASE),
 *   cbid = the CUPTI activity kind, correlation = the correlation id of the
 *   API call that caused it (the join with the callback events). */
typedef enum {
    ML_GPU_POOL_CREATED = 1,
    ML_GPU_POOL_DESTROYED = 2,
    ML_GPU_POOL_TRIMMED = 3,
    ML_GPU_POOL_ALLOC = 4,   /* a block was allocated from the pool */
    ML_GPU_POOL_RELEASE = 5, /* a block went back to the pool */
    ML_GPU_POOL_OP_COUNT_
} ml_gpu_pool_op_t;

typedef struct {
    uint16_t struct_size; /* sizeof(ml_gpu_event_t) of the producer */
    uint8_t op;           /* ml_gpu_op_t */
    uint8_t kind;         /* ml_gpu_kind_t */
    uint16_t flags;       /* ML_GPU_F_* | ML_EVF_* */
    uint16_t cbid;        /* the CUPTI callback id that produced it (diagnostics) */
    int32_t device;       /* device ordinal, ML_GPU_DEVICE_UNKNOWN if not known */
    uint32_t context;     /* CUPTI context uid (unique per process), 0 if none */
    uint32_t stack;       /* leaf node id of the CPU stack (filled by libmemlens) */
    uint32_t correlation; /* CUPTI correlation id */
    uint64_t stream;      /* CUstream handle value (0 = legacy default stream) */
    uint64_t ptr;         /* address, or handle (VMM_PHYSICAL, ARRAY) */
    uint64_t size;        /* bytes; 0 on frees of unknown size */
    uint64_t handle;      /* VMM_MAP: the physical handle; POOL: the pool */
    /* Appended for POOL_STATE (issue 5). Producers write only the first
     * ML_GPU_EVENT_BASE_SIZE bytes of other events into the ring, so they
     * still take two slots; a shorter payload reads as zeros here. */
    uint64_t pool_used;      /* POOL_STATE: the pool's utilized bytes */
    uint64_t pool_threshold; /* POOL_STATE: the pool's release threshold */
} ml_gpu_event_t;

#define ML_GPU_EVENT_BASE_SIZE 56 /* up to `handle`: every op but POOL_STATE */
_Static_assert(sizeof(ml_gpu_event_t) == 72, "a pool event is three continuation slots");

#define ML_MAX_SEGMENTS 16

typedef struct {
    uint64_t base;       /* load bias (dlpi_addr) */
    uint32_t path_len;   /* bytes of path that follow the segments */
    uint16_t build_id_len;
    uint16_t nsegs;
    struct {
        uint64_t vaddr; /* link-time address, add base for the runtime address */
        uint64_t memsz;
        uint32_t flags; /* PF_R | PF_W | PF_X */
        uint32_t pad;
    } segs[ML_MAX_SEGMENTS];
} ml_blob_module_t;

typedef struct {
    uint32_t index;
    uint32_t tid;
    char name[16];
} ml_blob_thread_t;

typedef struct {
    uint64_t arena;    /* bytes obtained by sbrk */
    uint64_t hblkhd;   /* bytes in mmapped chunks */
    uint64_t uordblks; /* bytes in use */
    uint64_t fordblks; /* free bytes */
    uint64_t keepcost; /* top-most releasable bytes */
} ml_blob_mallinfo_t;

typedef struct {
    uint64_t nested_skipped; /* calls made from inside memlens itself, not recorded */
} ml_blob_exit_t;

/* One event: 28 bytes of payload behind the 4-byte sequence number. The low
 * nibble of `type` is the ml_event_type_t, the high nibble the ML_EVF_* flags
 * (use ml_ev_type() and ml_ev_flags()). */
typedef struct {
    uint8_t type;    /* ml_event_type_t | flags << 4 */
    uint8_t kind;    /* ml_kind_t, or ml_blob_kind_t for ML_EV_BLOB */
    uint16_t thread; /* per-process thread index, see ML_BLOB_THREAD */
    uint32_t stack;  /* leaf node id of the interned stack; 0 = no stack */
    uint32_t time;   /* milliseconds since the session started (ml_ctl_t.clock_ms) */
    uint64_t ptr;
    uint64_t size;
} __attribute__((packed)) ml_event_t;

static inline unsigned ml_ev_type(const ml_event_t *e) {
    return e->type & 0x0f;
}
static inline unsigned ml_ev_flags(const ml_event_t *e) {
    return e->type >> 4;
}

#define ML_SLOT_PAYLOAD 28

typedef struct {
    _Atomic uint32_t seq;
    union {
        ml_event_t ev;
        uint8_t raw[ML_SLOT_PAYLOAD]; /* continuation slots of a blob */
    };
} __attribute__((packed, aligned(4))) ml_slot_t;

_Static_assert(sizeof(ml_event_t) == 28, "event is 28 bytes");
_Static_assert(sizeof(ml_slot_t) == 32, "slot is 32 bytes");

/* The tag in the name of slot `slot`'s ring file, CTL.SLOT.TAG (TAG: 16 hex
 * digits): SipHash-2-4 of the slot number under the session's ring_key.
 * /dev/shm is a directory anyone may write to and list: with the plain
 * CTL.SLOT, another user who saw the control file appear created CTL.0,
 * CTL.1, ... first, and every process' O_EXCL open of its ring failed
 * (EEXIST), so nothing root ran was recorded. The key is in the control
 * file (mode 0600) only, and a name seen in the listing tells nothing of
 * the next one. */
static inline uint64_t ml__sip_rotl(uint64_t x, int b) {
    return (x << b) | (x >> (64 - b));
}
#define ML__SIPROUND                                                                                    \
    do {                                                                                                \
        v0 += v1, v1 = ml__sip_rotl(v1, 13), v1 ^= v0, v0 = ml__sip_rotl(v0, 32);                      \
        v2 += v3, v3 = ml__sip_rotl(v3, 16), v3 ^= v2;                                                  \
        v0 += v3, v3 = ml__sip_rotl(v3, 21), v3 ^= v0;                                                  \
        v2 += v1, v1 = ml__sip_rotl(v1, 17), v1 ^= v2, v2 = ml__sip_rotl(v2, 32);                      \
    } while (0)
static inline uint64_t ml_ring_name_tag(const uint64_t key[2], uint32_t slot) {
    uint64_t v0 = 0x736f6d6570736575ull ^ key[0], v1 = 0x646f72616e646f6dull ^ key[1];
    uint64_t v2 = 0x6c7967656e657261ull ^ key[0], v3 = 0x7465646279746573ull ^ key[1];
    uint64_t m = (uint64_t)slot | (4ull << 56); /* the 4-byte message, its length in the top byte */
    v3 ^= m;
    ML__SIPROUND;
    ML__SIPROUND;
    v0 ^= m;
    v2 ^= 0xff;
    ML__SIPROUND;
    ML__SIPROUND;
    ML__SIPROUND;
    ML__SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}
#undef ML__SIPROUND

/* Process slot states in the control segment. */
enum { ML_PROC_FREE = 0, ML_PROC_CLAIMED = 1, ML_PROC_READY = 2, ML_PROC_FAILED = 3 };

typedef struct {
    _Atomic uint32_t state;
    uint32_t pid;
    uint32_t ppid;
    uint32_t parent_slot; /* slot of the process image it forked from or exec'd from, else of
                           * its parent process' image (posix_spawn, vfork), or ~0 */
    uint32_t err;         /* ML_PROC_FAILED: the errno its ring's making failed with in
                           * libmemlens.so, or ML_PROC_ERR_COLLECTOR | the errno with which
                           * the collector failed to open its ring or start its trace */
} ml_ctl_proc_t;

/* ml_ctl_proc_t.err of an image the collector refused (the errno in the low
 * 16 bits): its ring could not be opened (ML_PROC_ERR_RING) or its trace
 * not started (a full disk, no descriptor left). Its parent image's trace
 * says so, as for an image whose libmemlens.so could not make its ring. */
#define ML_PROC_ERR_COLLECTOR 0x80000000u
#define ML_PROC_ERR_RING 0x40000000u
/* Set by libmemlens.so: the image runs in another PID namespace than memlens
 * (a child of `unshare -p`, a container), where it cannot see memlens' pid
 * and memlens cannot find its own; its pid is as /proc numbers it. */
#define ML_PROC_ERR_PIDNS 0x20000000u
#define ML_PROC_ERRNO(err) ((int)((err) & 0xffffu))

/* Options passed from `memlens run` to every traced process. */
#define ML_OPT_FOLLOW_FORK 0x1
#define ML_OPT_UNWIND_FP 0x2
#define ML_OPT_UNWIND_VERIFY 0x4 /* memlens run --unwind verify (hidden): every stack is taken
                                  * twice and compared, see ml_ring_hdr_t.unwind_* */
#define ML_OPT_ATTACHED 0x8 /* memlens attach: recorded from the middle of the process' life
                             * (allocations made before are unknown; no exit scan) */
#define ML_OPT_FORKED 0x10 /* process record only: the image is a fork child (fork_seq), whose
                            * frees of blocks it inherited have no allocation in its trace */

typedef struct {
    uint64_t magic;
    uint32_t version;
    uint32_t options;     /* ML_OPT_* */
    uint64_t sample_bytes; /* 0: record every allocation */
    uint32_t collector_pid;
    uint32_t depth;
    uint32_t ring_slots; /* power of two */
    uint32_t err_open;   /* 1: memlens' stderr is open, the file err_dev/err_ino: where
                          * libmemlens.so may write its warnings (0: nowhere) */
    uint64_t err_dev, err_ino;
    uint64_t ring_key[2]; /* random, the secret of the ring files' names (ml_ring_name_tag) */
    _Alignas(ML_CACHE_LINE) _Atomic uint32_t clock_ms;   /* ticked by the collector */
    _Atomic uint32_t mallinfo_gen; /* bumped by the collector to ask for a sample */
    _Atomic uint32_t nprocs;       /* slots claimed so far */
    _Atomic uint32_t procs_refused; /* processes not traced because the table was full */
    _Atomic uint32_t procs_failed;  /* slots set ML_PROC_FAILED with an err (by libmemlens.so or the
                                     * collector) */
    _Atomic uint32_t procs_cap;     /* slots below this have their pages allocated (the collector
                                     * grows it); a process claims one only below it */
    _Atomic uint32_t closed;        /* 1: memlens ended the session on purpose (every trace saved,
                                     * its files going): a process still running registers nothing
                                     * and says nothing (a killed memlens leaves it 0) */
    _Alignas(ML_CACHE_LINE) ml_ctl_proc_t procs[ML_MAX_PROCS];
} ml_ctl_t;

typedef struct {
    uint64_t magic;
    uint32_t version;
    uint32_t slot_size;
    uint32_t capacity; /* slots, power of two */
    uint32_t pid;
    uint32_t ppid;
    uint32_t start_ms; /* the session clock (ml_ctl_t.clock_ms) when the process registered */
    uint64_t start_realtime_ns;
    _Alignas(ML_CACHE_LINE) _Atomic uint64_t head; /* next position to claim (producers) */
    _Alignas(ML_CACHE_LINE) _Atomic uint64_t tail; /* next position to read (collector) */
    _Alignas(ML_CACHE_LINE) _Atomic uint64_t waits;   /* slots a producer had to wait for */
    _Atomic uint64_t wait_ns;                         /* time spent waiting */
    _Atomic uint64_t nested_skipped; /* hook calls from inside memlens (not the program's) */
    _Atomic uint64_t truncated;      /* stacks cut short */
    _Atomic uint64_t lost;           /* events given up on (collector died) */
    /* ML_OPT_UNWIND_VERIFY only: stacks taken both ways (the recorder's and
     * a cache-free libunwind step loop), how many differed, how many of them
     * the recorder had itself handed to libunwind, and how many kept outer
     * frames of the thread's previous stack. The first difference is kept. */
    _Atomic uint64_t unwind_checked;
    _Atomic uint64_t unwind_mismatch;
    _Atomic uint64_t unwind_fallback;
    _Atomic uint64_t unwind_reused;
    struct {
        _Atomic uint32_t set;
        uint32_t frame;                   /* index (leaf = 0) of the first differing frame */
        uint32_t fast_frames, full_frames; /* frames each way */
        uint32_t fell_back;               /* the recorder's stack came from libunwind too */
        uint64_t fast_pc, full_pc;        /* the differing frames (0: none that deep) */
    } unwind_bad;
    /* Backpressure (ml_ring.c): a producer that finds no room counts itself
     * in `sleepers` and sleeps on the futex word `space_gen`; the collector,
     * after releasing slots, bumps space_gen and wakes one of them when
     * sleepers is non-zero; a producer woken wakes the next while the ring
     * is more than half free. */
    _Alignas(ML_CACHE_LINE) _Atomic uint32_t space_gen;
    _Atomic uint32_t sleepers;
    /* Exit handshake: the process sets ML_EXIT_SCAN_ASKED after its last
     * destructor-time event and waits (bounded) for ML_EXIT_SCAN_DONE, so the
     * collector can read its memory while it is still intact (leak
     * reachability). */
    _Alignas(ML_CACHE_LINE) _Atomic uint32_t exit_scan;
    /* Written by the collector after each drain: how many heap blocks fewer
     * the process holds than it held at most since its last mallinfo sample
     * (0 while the heap grows). glibc's mallinfo2 walks every free chunk:
     * after a program freed millions of blocks one call takes a large
     * fraction of a second, so the process skips samples while this is
     * large (interpose/runtime.c). The count lags the ring. */
    _Atomic uint64_t heap_drop;
    /* Filled by the process before it marks its slot ready, so that the
     * collector knows what ran even if the process is gone by then. */
    uint32_t cmdline_len; /* bytes of NUL-separated argv in cmdline; more than fit: cut */
    char exe[1024];
    char cmdline[1920]; /* 2048 before version 18: the deepbind fields took the rest */
    /* Set by the process before its exit record: the stack pointer of the
     * frame that called exit() (0: not found). Everything deeper belongs to
     * exit's handlers and memlens, not to the program; the exit scan reads
     * that thread's stack from here up (docs/analysis.md, root rules). */
    _Atomic uint64_t exit_sp;
    /* Set by the process just before an exec that libmemlens.so cannot
     * follow (the new program is set-user-ID/-group-ID or statically
     * linked: the loader will not preload us), cleared when the exec
     * fails: why the program that ran next is not traced ("" if none). */
    char exec_untraced[400];
    /* The address, in the process, of its ml_raw_registry_t: the mappings
     * libmemlens.so made for itself (0: none). The exit scan does not take
     * them for roots: the unwinder keeps each frame's rbp, which optimised
     * code uses for anything, a heap pointer included. */
    _Atomic uint64_t raw_registry;
    /* The address, in the process, of its ml_sbrk_registry_t: the memory
     * the program took with sbrk/brk itself (0: none). The brk heap is not a
     * root (glibc's main arena is scanned block by block), except these. */
    _Atomic uint64_t sbrk_registry;
    /* How the process ends, when it ends by a call memlens sees: written
     * by the process as the last thing it does before the kernel takes it
     * (exit() and a return from main: an on_exit handler, which glibc runs
     * after the destructors; _exit, _Exit: their hooks; quick_exit: its
     * last handler), as ML_END_STATUS_SET | (status & 0xff), the exit
     * status the parent's wait sees; by a signal memlens' handler caught
     * (interpose/runtime.c, crash_handler), as ML_END_STATUS_SET |
     * ML_END_STATUS_SIGNALED | signal, just before the handler sends it
     * again with the default action. 0: not known (still running, killed
     * by SIGKILL or a signal the program handles, or exec'd). The collector, which is not the parent of a
     * followed child and gets no status from its pidfd, reads it once the
     * process is gone (docs/recorder.md#exit). */
    _Atomic uint32_t end_status;
    /* Set by a followed fork child before it marks its slot ready: the
     * `seq` of the ML_BLOB_FORK its parent image wrote before the fork (the
     * parent is ml_ctl_proc_t.parent_slot). 0: not a fork child. */
    uint32_t fork_seq;
    /* Set by the process before its exit record when it calls exit() or
     * dies inside abort() (interpose/runtime.c, ml_dtor and crash_handler):
     * the callee-saved registers (rbx, rbp, r12-r15) of exit()'s or
     * abort()'s caller, recovered by unwinding, which their frames kept and
     * exit_sp (the caller's frame) leaves out. Roots, as the registers of a thread valgrind stops.
     * exit_nregs: how many (0: none), with ML_EXIT_CRASH added when the
     * process makes its exit handshake from memlens' handler of a fatal
     * signal (it dies of it: glibc's freeres does not run). */
    uint64_t exit_regs[6];
    _Atomic uint32_t exit_nregs;
    /* Without --follow-fork: the child processes this image started, which
     * are not traced (fork, vfork and exec, posix_spawn, system, popen; a
     * child that calls clone or spawns through glibc's internals by other
     * ways is not seen). The collector says the number in the run summary,
     * so that their allocations are not missing silently. */
    _Atomic uint32_t children_unfollowed;
    /* dlmopen calls into a link namespace other than the program's: code
     * loaded there allocates through that namespace's own libc, which
     * LD_PRELOAD does not reach, so its calls are not traced. Said in the
     * run summary like children_unfollowed. */
    _Atomic uint32_t dlmopen_other;
    /* Set by the process as it starts recording when malloc resolves to
     * another object ahead of libmemlens.so (the program's own allocator,
     * or one preloaded first): that object's path, or "the program
     * itself". Its heap calls never reach the hooks; the collector writes
     * this into the trace (ML_UNTRACED_ALLOCATOR), so that no report reads
     * "0 allocations, nothing leaked" without a word. "" when malloc is
     * ours. */
    char malloc_elsewhere[120]; /* the path's end when longer: "...end" */
    /* dlopen calls with RTLD_DEEPBIND: such a library binds malloc & co.
     * to libc's directly; the process redirects its GOT entries to the
     * hooks once the loader is done with it (interpose/attach.c), so what
     * it allocated and freed before (its constructors) is not traced.
     * deepbind_unredirected: the modules whose entries could not be
     * redirected (their calls are not traced at all). The collector says
     * both in the trace (ML_UNTRACED_DEEPBIND). */
    _Atomic uint32_t deepbind;
    _Atomic uint32_t deepbind_unredirected;
    char deepbind_first[104]; /* the first such library as dlopen was given it; "...end" when longer (120 B before version 19, 112 before 20) */
    /* Set by the process before its exit record (not in a crash): the
     * address, in the process, of a list of stdio's buffers (n, then n
     * addresses; ML_STDIO_BUFS at most), the buffers glibc allocated for
     * its open FILEs. They hold text, never pointers, but a buffer carved
     * from freed chunks keeps their old words past what was written; the
     * exit scan counts such a buffer reachable and does not read it
     * (ml_reach_io_t.freed: glibc frees them at exit, under valgrind).
     * 0: none. */
    _Atomic uint64_t stdio_list;
    /* Set by the process just before it execs itself into another program
     * (this image ends there), cleared when the exec fails: its VmHWM,
     * which the kernel starts again for the new image. The collector's
     * samples of the pid may already be the new image's. 0: not read. */
    _Atomic uint64_t exec_hwm;
} ml_ring_hdr_t;

#define ML_STDIO_BUFS 64
#define ML_END_STATUS_SET 0x100u
#define ML_END_STATUS_SIGNALED 0x200u
#define ML_EXIT_CRASH 0x100u /* ml_ring_hdr_t.exit_nregs: the handshake of a signal death */

/* Ranges [lo, hi) of the brk heap that the program, not glibc's malloc,
 * took with sbrk or brk (libmemlens.so interposes both; malloc calls the
 * kernel through glibc's internal __sbrk, which it does not see). At most
 * ML_SBRK_RANGES: a program that grows the break more often than that in
 * between malloc's own growth gets its last range extended over the gap. */
#define ML_SBRK_RANGES 32
typedef struct {
    _Atomic uint64_t n;
    struct {
        uint64_t lo, hi;
    } r[ML_SBRK_RANGES];
} ml_sbrk_registry_t;

/* libmemlens.so's own private mappings, [lo, hi) each; the registry lists
 * itself (and the registries it replaced as it grew). */
typedef struct {
    uint64_t n, cap;
    struct {
        uint64_t lo, hi;
    } r[];
} ml_raw_registry_t;

enum { ML_EXIT_SCAN_NONE = 0, ML_EXIT_SCAN_ASKED = 1, ML_EXIT_SCAN_DONE = 2 };

_Static_assert(sizeof(ml_ring_hdr_t) <= ML_RING_DATA_OFFSET, "ring header fits its page");

static inline ml_slot_t *ml_ring_slots(ml_ring_hdr_t *h) {
    return (ml_slot_t *)((char *)h + ML_RING_DATA_OFFSET);
}

static inline uint64_t ml_ring_bytes(uint32_t capacity) {
    return ML_RING_DATA_OFFSET + (uint64_t)capacity * sizeof(ml_slot_t);
}

/* Number of continuation slots a blob of len payload bytes takes. */
static inline uint32_t ml_blob_slots(uint64_t len) {
    return (uint32_t)((len + ML_SLOT_PAYLOAD - 1) / ML_SLOT_PAYLOAD);
}

#endif
