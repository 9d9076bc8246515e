/* ml_collector.h - the collector stage of `memlens run`: from the event rings
 * of the traced processes to records handed to sinks.
 *
 * A collector owns one recording session: the control segment in /dev/shm
 * that traced processes find through ML_CTL, the processes that register in
 * it (the program, and with follow-fork its children and exec'd images), and
 * one event ring per process image. Each call of ml_collector_poll() runs the
 * pipeline once over every process:
 *
 *     event ring (shared memory, written by libmemlens.so in the program)
 *        | stage 1, drain + decode: published events in ring order,
 *        |   ml_event_to_record(); the collector adds its own records
 *        |   (process, RSS samples, the exit scan's reachability, end)
 *        v
 *     ml_batch_t: up to ML_BATCH_RECORDS records of one process, in order
 *        | stage 2, dispatch: each batch to every sink, in the order the
 *        |   sinks were added
 *        v
 *     sinks: the trace writer (ml_trace_sink_new), the streaming analysis
 *            (ml_analysis_sink_new), the live viewer (cli/live_sink.c)
 *
 * When a process ends, its sinks are ended in order, with the analysis
 * snapshot (the session of the sink that keeps the process' analysis, saved
 * after the end record) when the options ask for it. docs/recorder.md draws
 * the whole pipeline and says how the stages map to threads.
 *
 * Ownership: the collector owns the sinks added to it, the trace files of
 * the processes (it closes them after their sinks have ended), the rings it
 * maps and the control segment (removed by ml_collector_free()).
 *
 * Errors: functions return 0 or a negative errno; ml_collector_new() also
 * writes a message. What happens to one traced process (a trace that cannot
 * be created, a ring that cannot be mapped, a slot never claimed) does not
 * stop the session: it is reported on stderr as "memlens: warning: ..." and
 * that process is not recorded, as before this library existed.
 *
 * Out of memory: ml_collector_new() and the sink constructors fail with
 * -ENOMEM. Later, a process whose state cannot be allocated is not recorded
 * (with a warning); a sink's own failures are the sink's (the trace sink
 * reports a write error when the process ends).
 *
 * Thread-safety: a collector and its sinks belong to the thread that calls
 * ml_collector_poll(); nothing here starts a thread. A sink that shares
 * state with another thread (the live viewer) locks on its own side.
 */
#ifndef ML_COLLECTOR_H
#define ML_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ml_analysis.h"
#include "ml_trace_io.h"
#include "ml_outfile.h"

typedef struct ml_collector_s ml_collector_t;

/* ------------------------------------------------------------------------- */
/* Processes and batches: what sinks see                                     */
/* ------------------------------------------------------------------------- */

/** One traced process image, as its sinks see it. Owned by the collector;
 * valid from the sink's open() until the collector is freed. */
typedef struct {
    uint32_t slot; /* its index in the session's process table */
    uint32_t pid, ppid;
    bool is_root;     /* the program memlens started (not a child, not an exec'd image) */
    const char *path; /* its trace file */
    int fd;           /* the trace file, open for writing; the collector closes it */
    bool unsaved;     /* the file could not be put at path when it was closed (the
                       * collector said why, and where its data is, if anywhere) */
    /** The analysis session that follows this process' records, kept by
     * the first sink whose analysis() returned one, or NULL. A sink opened
     * later sees it set, and need not keep one of its own. Once an image of
     * another process than the root's has ended (its trace is written), the
     * collector's own analysis sink frees its session and this is NULL:
     * memory does not grow with the images of a session. */
    ml_analysis_t *analysis;
    /** Its end record, once it ended (`ended`): what was lost or waited. */
    bool ended;
    ml_rec_end_t end;
} ml_proc_info_t;

#define ML_BATCH_RECORDS 256
#define ML_BATCH_STRINGS (64 * 1024)

/** Records of one process, in ring order: the hand-off from the decode
 * stage to the sinks. Strings of its records point into `strings` or, for
 * the process record, into memory the collector keeps until it is freed.
 * A sink's write() may read the batch only during the call. */
typedef struct {
    const ml_proc_info_t *proc;
    uint32_t n;            /* records in rec[] */
    uint32_t strings_used; /* bytes of strings[] in use */
    ml_record_t rec[ML_BATCH_RECORDS];
    char strings[ML_BATCH_STRINGS];
} ml_batch_t;

/** The record as a reader of the trace file will see it: the writer stores
 * an allocation's usable size as at least its size. Analysis sinks feed this
 * form, so that the snapshot saved at the end equals a replay of the file.
 * Returns `rec` itself, or `tmp` holding the adjusted copy. */
static inline const ml_record_t *ml_record_as_stored(const ml_record_t *rec, ml_record_t *tmp) {
    if (rec->tag != ML_T_ALLOC || rec->u.alloc.usable >= rec->u.alloc.size) return rec;
    *tmp = *rec;
    tmp->u.alloc.usable = tmp->u.alloc.size;
    return tmp;
}

/* ------------------------------------------------------------------------- */
/* Sinks                                                                     */
/* ------------------------------------------------------------------------- */

/** The analysis session to save at a process' end, offered as a stream
 * rather than bytes: a snapshot of millions of live blocks is written
 * through a small buffer instead of being held whole (issue 12). A sink's
 * end() that stores it calls ml_snapshot_stream(); one that does not,
 * ignores it. Valid only during that end() call. */
typedef struct {
    /** The sink that keeps the session, and its state for the process: its
     * snapshot() op makes the bytes. */
    const struct ml_sink_ops_s *ops;
    void *self, *state;
    uint32_t version; /* its layout: ML_ANALYSIS_SNAPSHOT_VERSION */
} ml_snapshot_t;

/** What a sink does. `self` is the sink's own object (ml_sink_t.self),
 * `state` what its open() made for one process. Every callback runs on the
 * collector's thread (write: see `threaded`), for one process at a time, in
 * this order: open, then write for each batch, then end, then (at
 * ml_collector_free) release. */
typedef struct ml_sink_ops_s {
    const char *name;
    /** A process appeared. Sets *state (NULL: this sink takes no part in this
     * process, and gets no other call for it). Returns 0, or a negative errno:
     * the process is then not recorded at all (the sinks opened before are
     * released, without an end). */
    int (*open)(void *self, const ml_proc_info_t *proc, void **state);
    /** The next records of the process. */
    void (*write)(void *self, void *state, const ml_batch_t *batch);
    /** Optional: the analysis session this sink keeps for the process (it
     * becomes ml_proc_info_t.analysis when it is the first), or NULL. The
     * collector reads it between writes: the exit scan's live blocks. */
    ml_analysis_t *(*analysis)(void *self, void *state);
    /** Optional, with analysis(): that session saved as a stream in the
     * layout of `version` (ml_analysis_snapshot_stream: out(ctx, ...) for
     * each piece of the snapshot, in order; *raw_len the bytes handed). A sink that shares
     * the session with another thread holds its lock until it returns.
     * Returns 0, out's error, or a negative errno: the pieces handed are
     * then no snapshot. */
    int (*snapshot)(void *self, void *state, uint32_t version, ml_analysis_out_fn out, void *ctx,
                    uint64_t *raw_len);
    /** Every record of the process has been written (the last one is
     * ML_T_END); `snap` is the analysis snapshot to store, or NULL. The
     * sinks are ended in order, the snapshot's source among them: end()
     * must leave the session as it was (a later sink may stream it). */
    void (*end)(void *self, void *state, const ml_snapshot_t *snap);
    /** Frees what open() made. Also called for a process that never ended
     * (the session was stopped). */
    void (*release)(void *self, void *state);
    /** Frees the sink itself (ml_collector_free). May be NULL. */
    void (*free)(void *self);
    /** write() may run on the collector's stage-2 thread, batches in order,
     * while stage 1 decodes the next ones. Every other callback stays on the
     * collector's thread, which waits for stage 2 to finish the process'
     * batches first (and before reading analysis()). */
    bool threaded;
    /** Its state is nothing but the analysis session: once a process other
     * than the root's has ended, the collector releases it early (the
     * summary reads only the root's images; ml_proc_info_t.end keeps the
     * rest). A sink that shows processes (the live viewer) says false. */
    bool owns_analysis;
} ml_sink_ops_t;

typedef struct {
    const ml_sink_ops_t *ops;
    void *self;
} ml_sink_t;

/** Makes the snapshot `snap` offered to a sink's end(), handing its bytes
 * to out(ctx, p, n) in order (pieces of up to about 1 MiB), and sets
 * *raw_len to their count. Each call makes the whole snapshot again.
 * Returns 0, out's error or a negative errno (-ENOTSUP, -ENOMEM): the
 * pieces already handed are then no snapshot. */
static inline int ml_snapshot_stream(const ml_snapshot_t *snap, ml_analysis_out_fn out, void *ctx,
                                     uint64_t *raw_len) {
    return snap->ops->snapshot(snap->self, snap->state, snap->version, out, ctx, raw_len);
}

/** The trace writer: one .mlt file per process, into ml_proc_info_t.fd
 * (zstd level 3), the analysis snapshot after the end record. A write error
 * is remembered by the writer and reported on stderr when the process ends
 * ("memlens: error: writing PATH failed: ...; the trace is incomplete").
 * Returns 0 or -ENOMEM. */
int ml_trace_sink_new(ml_sink_t *out);

/** How many processes' traces the trace sink `sink` (from ml_trace_sink_new,
 * still owned by the collector) could not write whole so far. */
uint32_t ml_trace_sink_failures(const ml_sink_t *sink);

/** The streaming analysis: an ml_analysis_t per process (light: only what
 * the summary and the exit scan need, ml_analysis_new_light, which cannot be
 * saved), unless an earlier sink already keeps one for it. Returns 0 or
 * -ENOMEM. */
int ml_analysis_sink_new(bool light, ml_sink_t *out);

/* ------------------------------------------------------------------------- */
/* The collector                                                             */
/* ------------------------------------------------------------------------- */

typedef struct {
    bool follow_fork; /* trace forked and exec'd children too */
    bool unwind_fp;   /* frame-pointer unwinding instead of libunwind */
    bool unwind_verify; /* --unwind verify: each stack also taken by libunwind and compared;
                         * the counts go into an unwind-check record before the end record */
    FILE *verify_out;   /* where --unwind verify prints its counts per process (NULL: nowhere) */
    bool snapshot;    /* save the analysis session at the end of each trace */
    uint64_t sample_bytes; /* 0: every allocation; else the mean sampling gap */
    uint32_t depth;        /* deepest stack recorded */
    uint32_t ring_slots;   /* events per ring, a power of two */
    unsigned out_flags;    /* ML_OUTFILE_GROUP for the children's traces (ml_outfile.h) */
    bool attached;         /* memlens attach: the root was running before (ML_OPT_ATTACHED) */
    bool quiet;            /* -q: no note of the children not followed (--follow-fork not given) */
} ml_collector_opts_t;

/** Removes what killed sessions left in /dev/shm: the control files and
 * rings (memlens-PID-RAND[.SLOT.TAG]) that belong to this user and whose
 * memlens (PID) no longer exists. Says in *files and *bytes (the memory
 * they held) what was removed. Returns 0 or a negative errno. */
int ml_collector_sweep(uint64_t *bytes, uint32_t *files);

/** Creates the session: the control segment, whose path
 * (ml_collector_ctl_path) goes into the program's ML_CTL, and the session
 * clock, which starts now. Returns 0, or a negative errno with a message in
 * err (e.g. "cannot create /dev/shm/...: ... (memlens needs a writable
 * /dev/shm)"). */
int ml_collector_new(const ml_collector_opts_t *o, ml_collector_t **out, char *err, size_t errlen);

/** The control segment's path, for ML_CTL. Valid until ml_collector_free. */
const char *ml_collector_ctl_path(const ml_collector_t *c);

/** Adds a sink; the collector owns it from now on, even on failure (then
 * freed at once). Add sinks before the first ml_collector_poll(). Returns 0,
 * or -ENOSPC past 8 sinks. */
int ml_collector_add_sink(ml_collector_t *c, ml_sink_t sink);

/** The program memlens starts, before it can register. */
typedef struct {
    pid_t pid;
    const char *path;  /* its trace file: copied */
    ml_outfile_t *file; /* that file, opened with ml_outfile_open: the collector takes it over
                           (and zeroes *file); committed when the root's trace ends, removed
                           when the root never registered */
    const char *exe;   /* the program's absolute path ("" when unknown): copied */
    int argc;          /* its arguments, for the process record: borrowed, */
    char *const *argv; /* they must outlive the collector */
} ml_collector_root_t;

/** Declares the root process. Its children's traces are named after its
 * path (STEM.PID.mlt, where STEM is the path without ".mlt"). */
void ml_collector_set_root(ml_collector_t *c, const ml_collector_root_t *root);

/** One round of the pipeline: ticks the session clock, opens the processes
 * that registered since the last round, drains every ring into the sinks
 * (at most 65536 events per process), samples RSS (every 10 ms) and asks for
 * glibc's counters (every 500 ms). Returns the number of events read: 0
 * means the caller may sleep a little. */
uint64_t ml_collector_poll(ml_collector_t *c);

/** The root process' peak resident set, from wait4()'s ru_maxrss (in
 * bytes): the kernel's high-water mark, recorded in the trace of its last
 * image (ML_T_PEAK_RSS). Call it before ml_collector_root_ended(). */
void ml_collector_root_maxrss(ml_collector_t *c, uint64_t bytes);

/** The root process ended with wait(2) status `wstatus`. */
void ml_collector_root_ended(ml_collector_t *c, int wstatus);

/** Finishes every process that ended (drains its ring to the last published
 * event, counts the slots it claimed but never published, writes its end
 * record and ends its sinks). Returns true once the root process has ended
 * and every process of the session is finished. */
bool ml_collector_reap(ml_collector_t *c);

/** Stops waiting: finishes every process now, ended or not (drains what
 * its ring holds, writes its end record with status unknown when it is
 * still running, ends its sinks and renames its trace into place). For a
 * memlens that was asked to stop (SIGINT, SIGTERM, SIGHUP): the processes
 * go on unrecorded (they find the collector gone and stop writing). */
void ml_collector_stop(ml_collector_t *c);

/** `memlens attach`: the process ended during the window (its pidfd said
 * so), before ml_collector_stop. Its trace then ends with the status its
 * exit hooks wrote, if any, and, when no exit of it was seen (SIGKILL, a
 * raw exit_group), says that it ended there (ML_UNTRACED_ENDED) instead of
 * reading as a detach from a program that ran on. */
void ml_collector_root_gone(ml_collector_t *c);

/** False when the root process never registered (libmemlens.so was not
 * loaded into it): then no trace was written into its file. */
bool ml_collector_root_traced(const ml_collector_t *c);

/** The process table: slots 0..ml_collector_nprocs()-1, in the order the
 * processes registered; ml_collector_proc() is NULL for a slot that was not
 * recorded. */
/** True when libmemlens.so was loaded into the root process but could not
 * register it (its ring could not be created: it said why on stderr). */
bool ml_collector_root_refused(const ml_collector_t *c);

uint32_t ml_collector_nprocs(const ml_collector_t *c);
/** The most bytes of events the collector held aside at once, copied out of
 * rings that were filling to be decoded later (its backlog); 0: none. */
uint64_t ml_collector_backlog_peak(const ml_collector_t *c);
const ml_proc_info_t *ml_collector_proc(const ml_collector_t *c, uint32_t slot);

/** The processes still running (not ended), in slot order: up to `max`
 * pids into pids[]. Returns how many there are. Caller's thread. */
uint32_t ml_collector_running(const ml_collector_t *c, pid_t *pids, uint32_t max);

/** Process images that ran untraced because the session's table of
 * ML_MAX_PROCS slots was full, or /dev/shm had no room to grow it. */
uint32_t ml_collector_procs_refused(const ml_collector_t *c);

/** Process images that took a slot but could not be recorded (their ring
 * could not be created, or the collector could not open it): each said
 * why on stderr, and ran untraced. */
uint32_t ml_collector_procs_failed(const ml_collector_t *c);

/** Releases every sink state and sink, unmaps the rings, closes the trace
 * files still open, removes the session's files from /dev/shm. NULL is a
 * no-op. */
void ml_collector_free(ml_collector_t *c);

#endif
