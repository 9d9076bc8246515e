/* collector_internal.h - what the files of collector/ share (STYLE 2: never
 * included from another folder).
 *
 *   collector.c  life cycle, the poll loop, RSS, ending processes, queries
 *   session.c    the control segment in /dev/shm and the session clock
 *   discover.c   processes that register: their rings, traces, process records
 *   drain.c      stage 1: ring -> events -> records (into the batch)
 *   dispatch.c   stage 2: batch -> sinks; opening and ending a process' sinks
 *   exit_scan.c  leak reachability, read from a process waiting at exit
 *   glibc_stacks.c  the thread descriptors on glibc's list of used stacks
 *   sink_trace.c, sink_analysis.c  the two sinks of this folder
 */
#ifndef ML_COLLECTOR_INTERNAL_H
#define ML_COLLECTOR_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ml_collector.h"
#include "ml_event.h"
#include "ml_ring.h"

#define ML__MAX_SINKS 8
/* Batches in flight between stage 1 and the stage-2 thread (dispatch.c):
 * 64 x 256 records. */
#define ML__POOL 64
/* RSS samples a process with events set aside keeps until those are read. */
#define ML__RSS_HELD 64

/* ------------------------------------------------------------------------- */
/* State                                                                     */
/* ------------------------------------------------------------------------- */

/* The parent's live blocks a followed fork child holds (inherit.c). */
typedef struct ml__inherit_s ml__inherit_t;

/* The process record's strings (ml_batch_t says why they must outlive the
 * record): kept while the image's analysis session may point at them, so
 * until the collector is freed for the root process' images, until the
 * image is finished for the others. */
typedef struct {
    char exe[1024];
    char cmdline[1921];
    char argv_more[80]; /* the last argv entry when the command line was cut */
} ml__proc_strings_t;

typedef struct {
    ml_proc_info_t info; /* what sinks see; info.path is path */
    ml_collector_t *collector;
    char *path;               /* the trace file (malloc'd; a child's record names its parent's) */
    ml__proc_strings_t *str;  /* NULL once freed */
    ml_outfile_t out; /* the trace file (info.fd is out.fd): renamed into place at the end */
    ml_ring_hdr_t *ring;
    size_t ring_bytes;
    uint64_t pos;           /* next ring position to read */
    uint64_t events;        /* events read */
    uint64_t lost_in_crash; /* positions claimed but never published */
    int pidfd;              /* children: readable once the process is gone */
    bool ended;             /* known to be gone: finish it */
    bool exit_seen;         /* its ML_T_PROC_EXIT was read (the exit scan ran) */
    bool gone_unseen;       /* attached: it ended in the window without an exit memlens saw */
    bool done;              /* finished: sinks ended, ring unmapped */
    uint32_t end_kind;      /* ML_END_* */
    int32_t end_status;
    uint32_t last_time, last_thread; /* of the last record: the collector's records follow it */
    uint64_t hwm_exit;    /* VmHWM read while it waited at exit (0: not read) */
    uint64_t hwm_sampled; /* VmHWM as last read with the RSS samples (0: never) */
    uint32_t rss_tid;     /* the thread the samples read, once the main one ended (0: the process) */
    void *sink_state[ML__MAX_SINKS];
    int analysis_sink; /* index of the sink whose analysis() is info.analysis, or -1 */
    uint32_t exec_seen_ms;  /* when /proc/PID/exe was first seen changed with no new image (+1) */
    char *exec_unseen;      /* the program it exec'd that way, once said (check_exec) */
    struct ml__scan_note_s *scan_note; /* what its exit scan did not read (exit_scan.c), until its end */
    /* A fork child given no copy of its parent's blocks (inherit.c, over
     * the bounds): the parent's live blocks at the fork; and the same
     * once its exit scan ran without them (its trace says so at its end). */
    uint64_t inherit_skipped, inherit_unscanned;
    /* Slots copied out of its ring while the ring was filling, decoded
     * before anything after them (drain.c, "The backlog"). */
    struct ml__backlog_s *bl_head, *bl_tail;
    uint64_t bl_slots;
    bool filling;
    /* RSS samples read while events were set aside: each goes into the
     * trace before the first event stamped after it (drain.c). */
    struct {
        uint32_t time_ms, interval_ms;
        uint64_t bytes;
    } rss_held[ML__RSS_HELD];
    uint32_t nrss_held;
    /* heap blocks allocated minus freed, as read (drain.c): now, and the
     * most since the last mallinfo sample: ml_ring_hdr_t.heap_drop */
    int64_t net_blocks, net_high;
    uint64_t heap_drop; /* the value last written there */
    /* Children this image started without a fork (posix_spawn, vfork) that
     * run a program memlens cannot follow (ML_BLOB_UNTRACED), said on
     * stderr when this image ends: the first ML__UNTRACED_KEEP of them,
     * and how many more. */
    struct ml__untraced_s *untraced;
    uint32_t nuntraced, untraced_more;
    /* A fork child: its parent's live blocks at the fork, for its exit
     * scan (inherit.c); NULL otherwise. */
    ml__inherit_t *inh;
} ml__proc_t;

#define ML__UNTRACED_KEEP 64

struct ml_collector_s {
    ml_collector_opts_t o;
    /* the session (session.c) */
    ml_ctl_t *ctl;
    char ctl_path[128];
    int ctl_fd;          /* kept open to allocate the process table's pages (session.c) */
    uint32_t ctl_cap;    /* what ctl->procs_cap says */
    uint32_t ctl_retry_ms; /* when to try again after /dev/shm had no room */
    bool ctl_full;       /* /dev/shm had no room to grow the table */
    uint64_t t0_ns;
    /* the root process */
    pid_t root_pid;
    int root_fd; /* until the root registers; -1 after */
    ml_outfile_t root_out; /* root_fd's file, until the root registers */
    char root_path[PATH_MAX];
    char root_exe[PATH_MAX];
    int root_argc;
    char *const *root_argv;
    char stem[PATH_MAX]; /* root_path without ".mlt": children's traces are STEM.PID.mlt */
    bool root_exited;
    int root_status;
    uint64_t root_maxrss; /* wait4's ru_maxrss of the root process, bytes (0: unknown) */
    bool root_gone;       /* attached: the process ended during the window (ml_collector_root_gone) */
    /* processes (discover.c) */
    ml__proc_t **procs;  /* by slot, 0..nseen-1; NULL: not recorded */
    uint32_t procs_cap;  /* entries allocated in procs */
    ml__proc_t **active; /* the processes not finished yet, in slot order */
    uint32_t nactive;
    uint32_t nseen;
    uint32_t free_since_ms; /* when slot nseen was first seen counted but still FREE (+1) */
    uint32_t free_upto;     /* nprocs then: every slot below it was counted that long ago */
    /* sinks and the hand-off between the stages (dispatch.c) */
    ml_sink_t sinks[ML__MAX_SINKS];
    int nsinks;
    ml_batch_t *batch;
    ml__proc_t *batch_proc; /* whose records the batch holds */
    /* Stage 2 on a thread of its own (dispatch.c): the sinks whose ops are
     * `threaded` write there. Full batches queue up in order, in `q`, and
     * come back to `pool`; stage 1 waits for a batch when none is free. */
    bool stage2_tried;      /* ml__stage2_start ran (at the first process) */
    bool threaded;          /* the stage-2 thread runs */
    pthread_t worker;
    pthread_mutex_t q_lock;
    pthread_cond_t q_cond;  /* stage 1 waits: a batch back, or stage 2 idle */
    pthread_cond_t q_work;  /* stage 2 waits: a batch queued, or stop */
    bool s1_waiting, w_waiting; /* who sleeps on them (signals only then) */
    ml_batch_t *pool[ML__POOL];
    uint32_t npool;
    struct {
        ml_batch_t *b;
        ml__proc_t *p;
    } q[ML__POOL];
    uint32_t q_head, q_n;
    bool q_busy, q_stop;    /* stage 2 holds a batch; it is asked to end */
    uint64_t q_waits;       /* times stage 1 waited for a free batch */
    /* copies of parents' live blocks at their forks, not yet taken by the
     * child (inherit.c); the bytes of all copies; forks given none */
    ml__inherit_t *inherit;
    uint64_t inherit_bytes, inherit_skipped;
    /* the bytes of every process' backlog (drain.c), and the most they held */
    uint64_t backlog_bytes, backlog_peak;
    uint32_t backlog_denied_until; /* ml__now_ms: a block was refused, ask again then */
    /* stage 1's buffer for one blob payload (drain.c) */
    uint8_t *blob;
    size_t blob_cap;
    /* the poll loop's timers (collector.c) */
    uint32_t next_rss, next_mallinfo;
    uint32_t rss_next; /* the index in active of the next process whose RSS is read */
};

/* ------------------------------------------------------------------------- */
/* Functions                                                                 */
/* ------------------------------------------------------------------------- */

/* session.c */
int ml__session_open(ml_collector_t *c, char *err, size_t errlen);
void ml__session_close(ml_collector_t *c);
/* Allocates the process table's pages ahead of `nprocs` registered images
 * (ml_ctl_t.procs_cap). */
void ml__session_reserve(ml_collector_t *c, uint32_t nprocs);
void ml__ring_file_path(const ml_collector_t *c, uint32_t slot, char *out, size_t len);
uint32_t ml__now_ms(const ml_collector_t *c);

/* collector.c: commits p's trace file (a failure is said on stderr). */
void ml__trace_commit(ml__proc_t *p);
/* collector.c: VmHWM of /proc/PID/status in bytes, from its text (0: none). */
uint64_t ml__status_hwm(const char *status);
uint64_t ml__read_hwm(uint32_t pid);
/* The task whose /proc status shows pid's memory, its text in buf: pid
 * itself, or once its main thread has ended (pthread_exit in main, a zombie
 * until the last thread ends) the first other thread that does; 0 when
 * none can be read. */
uint32_t ml__memory_task(uint32_t pid, char *buf, size_t len);
/* collector.c: an ML_BLOB_UNTRACED payload of p's ring (len bytes), kept
 * until p ends (or dropped, when it cancels one of them). */
void ml__untraced_note(ml__proc_t *p, const uint8_t *blob, uint32_t len);

/* Memory all inherited copies may hold at once: 4 M blocks of 16 bytes
 * (and a byte each for the marks), and the blocks of one copy: each
 * child's exit scan reads them all (about 0.1 s a million 16-byte blocks).
 * A parent with more live blocks than fit gives its children no copy. */
#define ML__INHERIT_MAX_BYTES (64ull << 20)
#define ML__INHERIT_MAX_BLOCKS (1ull << 20)

/* inherit.c: an ML_BLOB_FORK of p (its live blocks as the child's copy);
 * the copy a new image takes, if it is a fork child (reading its parent's
 * ring up to the blob); a free (or, freed false, a failed realloc) of the
 * child at ptr; the child's live blocks `own` (by address) merged with the
 * inherited ones it still holds and that no block of its own overlaps,
 * is_own[i] telling which (returns the count, -1 out of memory; e may be
 * NULL); freeing. */
void ml__inherit_fork(ml_collector_t *c, ml__proc_t *p, const uint8_t *blob, uint32_t len);
void ml__inherit_take(ml_collector_t *c, ml__proc_t *p);
void ml__inherit_freed(ml__inherit_t *e, uint64_t ptr, bool freed);
int64_t ml__inherit_merge(const ml__inherit_t *e, const ml_live_block_t *own, size_t nown,
                          ml_live_block_t **out, uint8_t **is_own);
void ml__inherit_release(ml_collector_t *c, ml__proc_t *p);
void ml__inherit_free_all(ml_collector_t *c);

/* discover.c */
void ml__discover(ml_collector_t *c);
bool ml__proc_gone(ml__proc_t *p);
/* Ends p, which is gone and not memlens' child: exited with the status its
 * ring header holds (ml_ring_hdr_t.end_status), else unknown. */
void ml__proc_end_unwaited(ml__proc_t *p);

/* drain.c: stage 1. Reads published events of p (all of them up to the
 * head with `final`, counting the unpublished ones as lost) into the batch.
 * Returns the number of events read (decoded, or copied into the
 * backlog). Frees what p's backlog still holds. */
uint64_t ml__drain(ml_collector_t *c, ml__proc_t *p, bool final);
void ml__backlog_free(ml_collector_t *c, ml__proc_t *p);
/* An RSS sample of p into its trace now (`time_ms` kept, or the last
 * record's if later); ml__rss_held_flush: the samples held back, up to
 * `until` ms (UINT32_MAX: all). */
void ml__rss_emit(ml_collector_t *c, ml__proc_t *p, uint32_t time_ms, uint64_t bytes, uint32_t interval_ms);
void ml__rss_held_flush(ml_collector_t *c, ml__proc_t *p, uint32_t until);

/* dispatch.c: stage 2 and the sinks of a process. */
ml_record_t *ml__batch_slot(ml_collector_t *c, ml__proc_t *p, size_t strings);
void ml__batch_commit(ml_collector_t *c, uint32_t strings_used);
void ml__emit(ml_collector_t *c, ml__proc_t *p, const ml_record_t *rec);
void ml__time_order(ml__proc_t *p, ml_record_t *r); /* no earlier than p's last record */
void ml__flush(ml_collector_t *c);
/* Starts the stage-2 thread when a sink is threaded and there are three
 * CPUs or more (else, or when it cannot, every sink writes on stage 1). */
void ml__stage2_start(ml_collector_t *c);
/* Waits until stage 2 has written every batch handed to it: before stage 1
 * reads an analysis session or ends a process' sinks. */
void ml__stage2_wait(ml_collector_t *c);
/* Stops and joins the stage-2 thread and frees the pool (ml_collector_free). */
void ml__stage2_stop(ml_collector_t *c);
int ml__sinks_open(ml_collector_t *c, ml__proc_t *p);
void ml__sinks_end(ml_collector_t *c, ml__proc_t *p);
void ml__sinks_release(ml_collector_t *c, ml__proc_t *p);
/* Frees p's analysis session when it is the collector's own analysis sink's
 * (a sink whose ops say owns_analysis), after p's sinks ended. */
void ml__sinks_release_analysis(ml_collector_t *c, ml__proc_t *p);

/* exit_scan.c: classifies the blocks live in `an` (the process' analysis,
 * fed up to its exit record) by scanning process `pid`'s memory, calls
 * release(ctx) once that memory is no longer needed (the process may then
 * go on exiting), and emits the verdicts (ML_T_BLOCK_REACH for the blocks
 * whose kind is not the most common one, ML_T_REACH_REST for the rest) and an
 * ML_T_REACH_SCAN summary (only the summary, with the error, when the scan
 * fails). exit_sp is the ring's (the SP of exit()'s caller, 0 if unknown),
 * raw_registry too (libmemlens.so's own mappings, never roots), and
 * sbrk_registry (the program's own sbrk memory in the brk heap: roots).
 * crash: the process dies of a signal (ML_EXIT_CRASH), and glibc's stack
 * cache will not be freed: its threads' static TLS and the descriptors'
 * pointers to their TLS vectors are roots (exit_scan.c, cached_stack_dtv).
 * Returns 0 or a negative errno. */
typedef void (*ml__exit_scan_emit_t)(void *ctx, const ml_record_t *rec);
/* What the scan could not look at, for the trace (an untraced record of
 * kind ML_UNTRACED_UNSCANNED, written at the process' end): count 0 when
 * nothing. */
typedef struct ml__scan_note_s {
    uint64_t count;
    char text[512];
} ml__scan_note_t;
/* inh: a fork child's inherited blocks (inherit.c), nodes of the pointer
 * graph with no verdict of their own; NULL for none. */
int ml__exit_scan(pid_t pid, ml_analysis_t *an, const ml__inherit_t *inh, ml__exit_scan_emit_t emit,
                  void (*release)(void *ctx),
                  void *ctx, uint32_t time_ms, uint32_t thread, uint64_t exit_sp, const uint64_t *exit_regs,
                  uint32_t exit_nregs, bool crash, uint64_t raw_registry, uint64_t sbrk_registry,
                  uint64_t stdio_list, ml__scan_note_t *note);

/* glibc_stacks.c: the addresses of the thread descriptors on glibc's list
 * of stacks in use (threads that run, and those that ended unjoined) in
 * process pid (a live thread of it, whose maps and memory show), its memory
 * read with read_words; sorted, into *out (free it), *n of them. -1 when
 * the list cannot be found or read (not glibc 2.34 or later, say): *out is
 * then NULL. */
typedef bool (*ml__read_words_fn)(pid_t pid, uint64_t addr, uint64_t *w, size_t n);
int ml__glibc_used_stacks(pid_t pid, ml__read_words_fn read_words, uint64_t **out, size_t *n);
bool ml__glibc_stack_used(const uint64_t *v, size_t n, uint64_t descriptor);

#endif
