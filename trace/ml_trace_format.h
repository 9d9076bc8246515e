/* ml_trace_format.h - the .mlt trace file: header, chunks, record tags.
 *
 * The byte-level specification is docs/trace-format.md; this header is its
 * machine-readable half and the two must change together.
 *
 *   file    := header chunk* [snapshot trailer]
 *   header  := "MLTRACE\0" u16 major u16 minor u32 flags      (16 bytes, little endian)
 *   chunk   := "MLCK" u32 comp_len u32 raw_len u32 nrecords  zstd_frame[comp_len]
 *   payload := record*                                         (raw_len bytes once decompressed)
 *   record  := u8 tag  body                                    (body: LEB128 varints, strings)
 *   snapshot := "MLSN" u32 comp_len u32 raw_len u32 version  zstd_frame[comp_len]  (since 1.3)
 *   trailer  := "MLIX" u32 1 u64 body_hash u64 snapshot_offset   (the last 24 bytes)
 *   [advice advice_trailer]                                    (since 1.6, after the trailer)
 *   advice   := "MLSN" u32 comp_len u32 raw_len u32 version  zstd_frame[comp_len]
 *   advice_trailer := "MLIX" u32 2 u64 key u64 advice_offset  (then the last 24 bytes)
 *
 * The optional snapshot, written by the collector after the end record, is
 * the analysis session it kept while recording (analysis/snapshot.c): a
 * report can start from it instead of replaying every record. The optional
 * advice, appended by `memlens report`, is the strategy advisor's result
 * (analysis/advice_cache.c), valid for the records and advisor of its key.
 * It is framed as a snapshot block and a trailer so that every reader since
 * 1.3 skips it when it reads records.
 *
 * Every chunk is an independent zstd frame with a content checksum, so a trace
 * cut short (the collector was killed, the disk filled) reads up to its last
 * complete chunk. Readers reject an unknown major version and branch on minor.
 */
#ifndef ML_TRACE_FORMAT_H
#define ML_TRACE_FORMAT_H

#include <stdint.h>

#define ML_TRACE_MAGIC "MLTRACE"
#define ML_TRACE_MAGIC_LEN 8
#define ML_TRACE_MAJOR 1
#define ML_TRACE_MINOR 9 /* 1: GPU records (0x40, 0x41); 2: free by size class (0x18);
                          * 3: the analysis snapshot and trailer; 4: gpu-pool (0x42);
                          * 5: unwind-check (0x35), peak-rss (0x36), block-reach verdict 4;
                          * 6: saved strategy advice after the trailer; 7: reach-rest (0x37);
                          * 8: rss's interval_ms; 9: untraced (0x38) */
#define ML_TRACE_HEADER_LEN 16
#define ML_CHUNK_MAGIC 0x4b434c4du /* "MLCK" */
#define ML_CHUNK_HEADER_LEN 16
#define ML_CHUNK_MAX_RAW (8u << 20)
#define ML_SNAPSHOT_MAGIC 0x4e534c4du /* "MLSN" */
#define ML_TRAILER_MAGIC 0x58494c4du  /* "MLIX" */
#define ML_TRAILER_LEN 24
#define ML_ADVICE_TRAILER_VERSION 2 /* the second field of the advice's trailer */
#define ML_SNAPSHOT_MAX_RAW (1u << 31)
#define ML_ADVICE_MAX_RAW (1u << 24) /* saved advice is a few KiB: more is refused, never allocated */
/* Sizes of blocks, mappings and GPU allocations are below 2^57 bytes: no
 * address space is that large (x86-64 with five-level paging gives a
 * process 2^56 bytes, AArch64 2^52). The reader refuses a record with a
 * larger one as corrupt: only a damaged or forged trace holds it, and its
 * sums would wrap the totals. munmap's and failed calls' lengths are what
 * the program passed, and are not bounded. */
#define ML_TRACE_SIZE_LIMIT ((uint64_t)1 << 57)

/* Record tags. Bodies are listed as field(type); u = unsigned LEB128,
 * s = zig-zag signed LEB128, str = u length + bytes. */
typedef enum {
    ML_T_PROCESS = 0x01,     /* pid u, ppid u, start_realtime_ns u, page_size u, unwinder u,
                              * depth u, sample_bytes u, options u, parent_trace str,
                              * exe str, argc u, argv str*, producer str */
    ML_T_TIME = 0x02,        /* ms u: the clock for the records that follow */
    ML_T_THREAD_SWITCH = 0x03, /* thread u: the thread for the records that follow */
    ML_T_ALLOC = 0x10,       /* kind u8, flags u8, size u, slack u (usable - size), stack u,
                              * ptr s (delta) */
    ML_T_FREE = 0x11,        /* kind u8, ptr s (delta), usable u */
    ML_T_REALLOC_FAIL = 0x12, /* ptr s (delta) */
    ML_T_MMAP = 0x13,        /* kind u8, flags u8, size u, stack u, ptr u */
    ML_T_MUNMAP = 0x14,      /* kind u8, ptr u, size u */
    ML_T_MMAP_FAIL = 0x15,   /* kind u8, ptr u, size u */
    ML_T_ALLOC_RECENT = 0x16, /* as ML_T_ALLOC, but ptr is u8 k: an address predicted by the
                               * recency model (docs/trace-format.md); read as ML_T_ALLOC */
    ML_T_FREE_CLASS = 0x18,   /* kind u8, usable u, k u8: the k-th most recent live block of
                               * that usable size in the model; read as ML_T_FREE */
    ML_T_FREE_RECENT = 0x17,  /* kind u8, k u8: the k-th most recent allocation still in the
                               * model's list (its usable size is known); read as ML_T_FREE */
    ML_T_NODE = 0x20,        /* id s (delta from previous node id + 1), parent s (id - parent),
                              * pc s (delta from previous node's pc) */
    ML_T_MODULE = 0x21,      /* base u, path str, build_id str, nsegs u, (vaddr u, memsz u,
                              * flags u)* */
    ML_T_MODULE_UNLOAD = 0x22, /* base u */
    ML_T_THREAD = 0x23,      /* index u, tid u, name str */
    ML_T_MALLINFO = 0x30,    /* arena u, hblkhd u, uordblks u, fordblks u, keepcost u */
    ML_T_RSS = 0x31,         /* rss_bytes u (sampled by the collector from /proc), interval_ms u
                              * (since 1.8: how often this process is sampled now) */
    ML_T_PROC_EXIT = 0x32,   /* the process ran its exit handlers: nested_skipped u */
    ML_T_BLOCK_REACH = 0x33, /* reach u8 (ML_REACH_*), ptr s (delta): the exit-time pointer scan's
                              * verdict for one heap block live at ML_T_PROC_EXIT (since 1.1) */
    ML_T_REACH_SCAN = 0x34,  /* status s (0 or -errno), root_bytes u, heap_bytes u, blocks u,
                              * reachable u, indirect u, definite u, duration_us u: written after
                              * the ML_T_BLOCK_REACH records of one scan (since 1.1); possibly
                              * lost blocks = blocks - reachable - indirect - definite */
    ML_T_UNWIND_CHECK = 0x35, /* stacks u, mismatches u, fallbacks u, reused u, first_frame u,
                               * fast_pc u, full_pc u: `memlens run --unwind verify` only, before
                               * ML_T_END (since 1.5; docs/recorder.md#stacks) */
    ML_T_PEAK_RSS = 0x36,    /* bytes u, source u8 (ML_HWM_*): the kernel's high-water mark of
                              * the process' resident set, written once before ML_T_END (since 1.5) */
    ML_T_REACH_REST = 0x37,  /* reach u8 (ML_REACH_REACHABLE..POSSIBLE): every block live at this
                              * point that no ML_T_BLOCK_REACH of this scan named has this verdict:
                              * the scan names only the blocks whose verdict is not the most common
                              * one (since 1.7), before its ML_T_REACH_SCAN */
    ML_T_UNTRACED = 0x38,    /* what u8 (ML_UNTRACED_*), count u, message str: allocations this
                              * trace does not hold, or memory the exit scan did not read, and why,
                              * as `memlens run` said them on stderr;
                              * before ML_T_END, only when there are some (since 1.9) */
    ML_T_END = 0x3f,         /* see ml_rec_end_t: written last by the collector */
    ML_T_GPU_ALLOC = 0x40,   /* kind u8, flags u, device s, context u, stream u, size u, stack u,
                              * ptr u, handle u, cbid u, correlation u (docs/gpu.md) */
    ML_T_GPU_FREE = 0x41,    /* op u8, kind u8, flags u, device s, context u, stream u, ptr u,
                              * size u, handle u, cbid u, correlation u */
    ML_T_GPU_POOL = 0x42,    /* pool_op u8, flags u, device s, context u, pool u, reserved u,
                              * used u, threshold u, block u, block_size u, cbid u,
                              * correlation u (since 1.4; memlens run --gpu-pools) */
} ml_tag_t;

/* Verdicts of the exit-time reachability scan (ML_T_BLOCK_REACH.reach),
 * valgrind memcheck's leak kinds: see docs/analysis.md. */
enum {
    ML_REACH_UNKNOWN = 0,   /* not scanned */
    ML_REACH_REACHABLE = 1, /* a chain of pointers leads to it from a root (globals, stacks) */
    ML_REACH_INDIRECT = 2,  /* only reachable from definitely leaked blocks */
    ML_REACH_DEFINITE = 3,  /* no pointer to it anywhere the scan looked */
    ML_REACH_POSSIBLE = 4,  /* reached only through interior pointers (valgrind's "possibly
                             * lost"; since 1.5: a 1.4 reader stops there, "corrupt trace") */
};

/* What an ML_T_UNTRACED record is about. */
/* The start of an ML_UNTRACED_ALLOCATOR record's message, which the
 * report's gates look for (cli/report_cmd.c: such a trace holds no heap
 * call, so no gate can pass on it). */
#define ML_UNTRACED_HEAP_PREFIX "not traced: the heap calls of process "
/* The start of an ML_UNTRACED_ENDED record's message (report/text.c looks
 * for it among the warnings, which a report from the snapshot keeps). */
#define ML_UNTRACED_ENDED_PREFIX "ended in the window: "

enum {
    ML_UNTRACED_CHILDREN = 1,  /* count: child processes started without --follow-fork */
    ML_UNTRACED_EXEC = 2,      /* this image exec'd a program memlens cannot follow (count 1) */
    ML_UNTRACED_SPAWNED = 3,   /* count: children started by posix_spawn or vfork that run a
                                * program memlens cannot follow */
    ML_UNTRACED_NAMESPACE = 4, /* count: dlmopen calls into another link namespace, whose own
                                * libc's malloc memlens does not replace */
    ML_UNTRACED_UNSCANNED = 5, /* count: mappings the exit scan did not read for pointers (1 TiB
                                * or more each): a block held only from there counts as leaked */
    ML_UNTRACED_INHERITED = 6, /* count: blocks a fork child's parent had live, of which it was given
                                * no copy for its exit scan (over the collector's bounds) */
    ML_UNTRACED_ALLOCATOR = 7, /* count 1: malloc resolves to an object ahead of libmemlens.so (the
                                * program's own allocator): no heap call of the image is traced;
                                * its message starts with ML_UNTRACED_HEAP_PREFIX */
    ML_UNTRACED_DEEPBIND = 8,  /* count: dlopen calls with RTLD_DEEPBIND, whose libraries' heap calls
                                * are traced only from the end of their dlopen (not their constructors'),
                                * or not at all where they could not be redirected */
    ML_UNTRACED_ENDED = 9,     /* count 1: an attached process ended during the window without an
                                * exit memlens saw (SIGKILL): its message starts with
                                * ML_UNTRACED_ENDED_PREFIX, which the report looks for */
    ML_UNTRACED_WHAT_COUNT_
};

/* Unwinders (ML_T_PROCESS.unwinder). */
enum { ML_UNWIND_LIBUNWIND = 0, ML_UNWIND_FP = 1 };

/* Where ML_T_PEAK_RSS's number comes from (docs/trace-format.md says which is chosen). */
enum {
    ML_HWM_NONE = 0,    /* no peak-rss record: the trace predates 1.5, or nothing could be read */
    ML_HWM_WAIT4 = 1,   /* ru_maxrss from wait4() of memlens' own child (it did not run its exit
                         * handlers): its whole life, with the children it waited for */
    ML_HWM_EXIT = 2,    /* VmHWM of /proc/PID/status read while the process waited at exit */
    ML_HWM_SAMPLED = 3, /* VmHWM as last read with the RSS samples: a lower bound */
    ML_HWM_SOURCE_COUNT_
};

/* How the process ended (ML_T_END.status_kind). */
enum {
    ML_END_EXITED = 0,   /* status = exit code */
    ML_END_SIGNALED = 1, /* status = signal number */
    ML_END_UNKNOWN = 2,  /* not our child (a followed process): we saw it go away */
    ML_END_EXEC = 3,     /* the image was replaced by exec (followed) */
    ML_END_RUNNING = 4,  /* still running when `memlens run` stopped recording (a
                          * second Ctrl-C, SIGTERM or SIGHUP): its live blocks are not
                          * leaks. Not for attached traces, which stay unknown. */
};

#endif
