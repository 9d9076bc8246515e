/* ml_trace_io.h - trace records, and reading and writing .mlt trace files.
 *
 * High-level half of trace/: this code runs in the memlens tools (collector,
 * analysis, dump), never inside a traced process, and may allocate. Records are
 * exchanged as ml_record_t, a decoded, self-contained form of every tag in
 * ml_trace_format.h. The writer owns delta encoding, chunking and zstd; the
 * reader undoes them in one streaming pass with memory bounded by one chunk.
 *
 *   event_record.c  ring event -> record (the collector's decode step)
 *   writer.c        records -> chunks -> file      (address_model.h: shared
 *   reader.c        file -> chunks -> records       with the reader)
 *   dump.c          a record as a line of text, names of tags and kinds
 *   progress.c      the counting half of a progress display for long reads
 *
 * Conventions of this header:
 *   - Errors are negative errno values; 0 (or a count) is success.
 *   - Out of memory is -ENOMEM from the call that needed memory; a writer or
 *     reader that hit it stays in that error state (nothing is half-written).
 *   - Thread-safety: a writer or a reader belongs to one thread at a time;
 *     distinct writers and readers are independent. The name and print
 *     functions and ml_event_to_record() are pure. ml_progress_set_display()
 *     is the one global: set it before starting threads.
 *   - Strings a record points to are borrowed: from the reader until its next
 *     call, from the caller's buffers for ml_event_to_record().
 */
#ifndef ML_TRACE_IO_H
#define ML_TRACE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "ml_event.h"
#include "ml_trace_format.h"

#define ML_MAX_ARGS 64

typedef struct {
    uint64_t vaddr, memsz;
    uint32_t flags;
} ml_segment_t;

/* End-of-trace record: how the process ended and what the recording lost. */
typedef struct {
    uint32_t status_kind;   /* ML_END_* */
    int32_t status;         /* exit code or signal number */
    uint64_t events;        /* events the collector read from the ring */
    uint64_t ring_waits;    /* times a producer waited for a free slot */
    uint64_t ring_wait_ns;  /* total time producers waited */
    uint64_t lost_in_crash; /* slots claimed but never published (process killed mid-event) */
    uint64_t lost_dead_collector; /* events producers gave up on */
    uint64_t nested_skipped; /* calls from inside memlens (not the program's) */
    uint64_t truncated_stacks;
    uint64_t duration_ms;
} ml_rec_end_t;

typedef struct {
    uint8_t tag; /* ml_tag_t */
    uint32_t time_ms; /* clock at this record (from the last ML_T_TIME) */
    uint32_t thread;  /* thread index at this record (from the last ML_T_THREAD_SWITCH) */
    union {
        struct {
            uint8_t kind, flags;
            uint64_t ptr, size;
            uint64_t usable; /* ALLOC, FREE: the allocator's usable size of the block
                              * (malloc_usable_size), 0 when unknown */
            uint32_t stack;
        } alloc; /* ML_T_ALLOC, ML_T_FREE, ML_T_REALLOC_FAIL, ML_T_MMAP, ML_T_MUNMAP,
                  * ML_T_MMAP_FAIL (fields that a tag lacks are 0) */
        struct {
            uint32_t id, parent;
            uint64_t pc;
        } node;
        struct {
            uint64_t base;
            const char *path;
            const uint8_t *build_id;
            uint32_t build_id_len;
            uint32_t nsegs;
            ml_segment_t segs[16];
        } module; /* also ML_T_MODULE_UNLOAD (base only) */
        struct {
            uint32_t index, tid;
            const char *name;
        } thread;
        struct {
            uint64_t arena, hblkhd, uordblks, fordblks, keepcost;
        } mallinfo;
        struct {
            uint64_t rss_bytes;
            uint32_t interval_ms; /* how often the collector samples this process now (since
                                   * 1.8; 0: not said, ML_RSS_SAMPLE_MS) */
        } rss;
        struct {
            uint64_t nested_skipped;
        } proc_exit;
        struct {
            uint64_t bytes;
            uint8_t source; /* ML_HWM_* */
        } peak_rss;
        struct {
            uint8_t what; /* ML_UNTRACED_* */
            uint64_t count;
            const char *message; /* what `memlens run` said, without its "memlens: " */
        } untraced;
        struct {
            uint8_t reach; /* ML_REACH_* */
            uint64_t ptr;
        } block_reach;
        struct {
            int32_t status; /* 0, or -errno when the scan could not read the process */
            uint64_t root_bytes, heap_bytes, blocks, reachable, indirect, definite, duration_us;
        } reach_scan;
        struct {
            uint32_t pid, ppid, page_size, unwinder, depth, options;
            uint64_t start_realtime_ns, sample_bytes;
            const char *parent_trace; /* "" for the root process */
            const char *exe;
            uint32_t argc; /* argv entries kept (at most ML_MAX_ARGS) */
            const char *argv[ML_MAX_ARGS];
            const char *producer;
        } process;
        ml_rec_end_t end;
        struct {
            uint64_t stacks;     /* stacks taken both ways */
            uint64_t mismatches; /* ... that differed */
            uint64_t fallbacks;  /* ... that the recorder itself took with libunwind */
            uint64_t reused;     /* ... that kept outer frames of the thread's previous stack */
            uint64_t first_frame, fast_pc, full_pc; /* the first difference (when mismatches) */
        } unwind_check;
        struct {
            uint8_t op;     /* ml_gpu_op_t (ML_GPU_OP_ALLOC for ML_T_GPU_ALLOC) */
            uint8_t kind;   /* ml_gpu_kind_t */
            uint16_t flags; /* ML_GPU_F_* | ML_EVF_* */
            int32_t device; /* ML_GPU_DEVICE_UNKNOWN when not known */
            uint32_t context, stack, cbid, correlation;
            uint64_t stream, ptr, size, handle;
            uint64_t pool_used, pool_threshold; /* ML_T_GPU_POOL only */
        } gpu; /* ML_T_GPU_ALLOC, ML_T_GPU_FREE, ML_T_GPU_POOL (op ML_GPU_OP_POOL_STATE, kind
                * an ml_gpu_pool_op_t, fields as in ml_gpu_event_t) */
    } u;
} ml_record_t;

/* ------------------------------------------------------------------------- */
/* From ring events                                                          */
/* ------------------------------------------------------------------------- */

/** Decodes one ring event into a record: what a traced process wrote
 * (ml_event.h) as what the trace writer and the analysis take.
 *
 * `blob` is the payload of an ML_EV_BLOB event, ev->size bytes (ignored for
 * the other types). Strings the record carries (a module's path and build-id,
 * a thread's name) are copied, NUL-terminated, into strings[0..cap), and the
 * record points there; nothing points into `blob` afterwards.
 *
 * Returns the bytes of `strings` used (0 for records without strings), or
 * -EINVAL for an unknown event type, blob kind or GPU op, or a payload too
 * short for its kind (a module whose path and build-id overrun it, a path
 * over 4096 bytes): nothing is to be delivered for such an event. -ENOSPC
 * when the strings do not fit in `cap` bytes (4096 + 1 + 8192 + 1 always
 * suffice for what the ring can carry). Pure: no state, no allocation,
 * callable from any thread. */
int ml_event_to_record(const ml_event_t *ev, const void *blob, ml_record_t *rec, char *strings,
                       size_t cap);

/* ------------------------------------------------------------------------- */
/* Writer                                                                    */
/* ------------------------------------------------------------------------- */

typedef struct ml_writer_s ml_writer_t;

/** Writes all `len` bytes to fd, again after EINTR and short writes.
 * Returns 0 or a negative errno. */
int ml_write_all(int fd, const void *buf, size_t len);

/** Creates a writer on `fd` (not closed by the writer) and writes the file
 * header. `level` is the zstd level (1 is the collector's default).
 * Returns 0 or a negative errno. */
int ml_writer_new(int fd, int level, ml_writer_t **out);

/** Appends one record. Time and thread changes are encoded as ML_T_TIME and
 * ML_T_THREAD_SWITCH records ahead of it when rec->time_ms / rec->thread differ
 * from the previous record's. Returns 0 or a negative errno (write failure). */
int ml_writer_add(ml_writer_t *w, const ml_record_t *rec);

/** Compresses and writes the pending chunk, if any. */
int ml_writer_flush(ml_writer_t *w);

/** Flushes and frees the writer. Returns the first error seen, or 0. */
int ml_writer_free(ml_writer_t *w);

/** Bytes written to the file so far. */
uint64_t ml_writer_bytes(const ml_writer_t *w);

/** Flushes the pending chunk, then writes `len` bytes of analysis snapshot
 * (format `version`, see analysis/snapshot.c) as one zstd frame, and the
 * trailer that points to it. Call it last, after the ML_T_END record: the
 * file then ends with the trailer. One write, so a crash leaves a file
 * without a trailer, never a half one. Returns 0 or a negative errno. */
int ml_writer_add_snapshot(ml_writer_t *w, const void *data, size_t len, uint32_t version);

/** The same snapshot block and trailer as ml_writer_add_snapshot, written
 * as the snapshot is made, with bounded memory (a zstd stream and an output
 * buffer of a few hundred KiB, whatever the snapshot's size):
 *   ml_writer_snapshot_begin(w, version) flushes the pending chunk and
 *     writes the block's header with its lengths still open;
 *   ml_writer_snapshot_write(w, p, n), for each piece in order, compresses
 *     and writes it;
 *   ml_writer_snapshot_end(w, status) ends the frame, fills in the
 *     header's lengths in place and writes the trailer.
 * The frame carries no content size (nobody knows it when it starts); the
 * reader checks the size it decompresses to against the header's raw_len.
 * The file must be seekable and not in append mode: begin returns -ESPIPE
 * otherwise, having written nothing but the pending chunk. A negative
 * `status` (the producer failed), an error of a write, more than
 * ML_SNAPSHOT_MAX_RAW bytes (-EFBIG) or none (-EINVAL) make end drop the
 * snapshot: the file is cut back to where it began, and the trace ends as
 * one written without a snapshot (a trailer is only ever written after a
 * whole snapshot). Begin and write errors are returned again by end, which
 * must be called after a successful begin. No records between begin and
 * end. Returns 0 or a negative errno; the writer's own state (its error,
 * ml_writer_free) is not touched by a dropped snapshot. */
int ml_writer_snapshot_begin(ml_writer_t *w, uint32_t version);
int ml_writer_snapshot_write(ml_writer_t *w, const void *p, size_t n);
int ml_writer_snapshot_end(ml_writer_t *w, int status);

/* ------------------------------------------------------------------------- */
/* Reader                                                                    */
/* ------------------------------------------------------------------------- */

typedef struct ml_reader_s ml_reader_t;

/** Opens a trace and checks its header. On failure returns a negative errno
 * (-EINVAL for "not a trace", -EISDIR for a directory, -EPROTONOSUPPORT for
 * an unknown major version)
 * and, when `err` is given, a message in err[0..errlen). */
int ml_reader_open(const char *path, ml_reader_t **out, char *err, size_t errlen);

/** What a file of this st_mode is, for a message that refuses it as a
 * trace: "a FIFO (named pipe)", "a directory", ... ("not a regular file"
 * for any other kind). (reader.c) */
const char *ml_file_kind(unsigned mode);

/** Reads the next record into `rec`. Returns 1 for a record, 0 at the end of
 * the trace, negative on a structural error (message in ml_reader_error()).
 * A trace cut short ends at its last complete chunk with return 0 and
 * ml_reader_truncated() true. Pointers in `rec` stay valid until the next call. */
int ml_reader_next(ml_reader_t *r, ml_record_t *rec);

/** The message for the last error, with the file offset. */
const char *ml_reader_error(const ml_reader_t *r);

/** True when the file ended inside a chunk (or before an ML_T_END record). */
bool ml_reader_truncated(const ml_reader_t *r);

/** True once an ML_T_END record has been read. */
bool ml_reader_complete(const ml_reader_t *r);

/** File format version of the open trace. */
void ml_reader_version(const ml_reader_t *r, unsigned *major, unsigned *minor);

/** File size and bytes consumed so far (for progress bars). */
uint64_t ml_reader_size(const ml_reader_t *r);
uint64_t ml_reader_offset(const ml_reader_t *r);

void ml_reader_close(ml_reader_t *r);

/** The analysis snapshot at the end of the trace, if it has one: a malloc'd
 * copy of its bytes in *data (free() it), its length and format version.
 * Returns 0, -ENOENT when the trace has none (older collector, killed
 * collector, GPU records), or another negative errno with a message in
 * ml_reader_error() when it is there but damaged. Reads with pread: the
 * record stream's position does not move. */
int ml_reader_snapshot(ml_reader_t *r, void **data, size_t *len, uint32_t *version);

/** The checksum of the records (the header and every chunk) that the
 * trailer holds, after checking it against the file (a read of every chunk,
 * no decompression). Returns 0, -ENOENT when the trace has no trailer, or
 * another negative errno (message in ml_reader_error()) when the records do
 * not match it. */
int ml_reader_records_hash(ml_reader_t *r, uint64_t *hash);

/** The strategy advice `memlens report` saved after the trailer, if any: a
 * malloc'd copy of its bytes in *data (free() it), its length, the key it was
 * saved under and its format version. Returns 0, -ENOENT when there is none,
 * or another negative errno (message in ml_reader_error()) when it is there
 * but damaged. The key is not checked here: its meaning is the caller's
 * (analysis/advice_cache.c). */
int ml_reader_advice(ml_reader_t *r, void **data, size_t *len, uint64_t *key, uint32_t *version);

/** The file's size without the advice saved after the trailer: the size of
 * the trace as it was recorded (what reports call its size). */
uint64_t ml_reader_recorded_size(ml_reader_t *r);

/** The file's size without the advice saved after the trailer (or a save of
 * it cut short): the size of the trace as it was recorded (what reports call
 * its size). */
uint64_t ml_reader_recorded_size(ml_reader_t *r);

/** Saves `len` bytes of advice (format `version`, under `key`) at the end of
 * the trace at `path`, replacing the advice it had. Only when the trace's
 * trailer still holds `records_hash` (else -ESTALE), and only into a regular
 * file that belongs to the caller, has one name, is writable by its owner
 * and is not locked, never through a symbolic link (else -ELOOP, -EPERM,
 * -EWOULDBLOCK; docs/security.md). The mode of the file does not change.
 * Returns 0 or a negative errno with a message in err. */
int ml_trace_save_advice(const char *path, uint64_t records_hash, const void *data, size_t len,
                         uint32_t version, uint64_t key, char *err, size_t errlen);

/* ------------------------------------------------------------------------- */
/* Progress of long reads                                                    */
/* ------------------------------------------------------------------------- */

/* A loop that reads a big trace record by record ticks an ml_progress_t.
 * trace/ draws nothing itself: a program that wants a display installs one
 * (the memlens command shows "memlens: WHAT WHERE NN%" on stderr when it is
 * a terminal and the file is over 64 MiB, cli/progress.c). Without one,
 * ml_progress_tick() costs an increment and a test. */
typedef struct {
    /** Whether a read of `size` bytes gets a display at all. */
    bool (*wanted)(uint64_t size);
    /** Shows that `pct` percent (0-100) of WHAT WHERE is read; `where` may
     * be NULL. Called only when the percentage changes. */
    void (*show)(const char *what, const char *where, int pct);
    /** Erases what show() drew. */
    void (*clear)(void);
} ml_progress_display_t;

/** Installs the display used by every later ml_progress_start() (NULL: none,
 * the default). The struct is not copied and must outlive its use. Not
 * thread-safe: call it once at start-up, before any thread reads a trace. */
void ml_progress_set_display(const ml_progress_display_t *d);

typedef struct {
    const ml_reader_t *r;
    const uint64_t *at; /* instead of r: bytes read so far of `size` */
    const char *what, *where;
    uint64_t n, size;
    int shown;
    bool on; /* a display is installed and wants this read; callers may clear it */
} ml_progress_t;

/** Starts counting the records read from `r`. `what` and `where` are
 * borrowed until ml_progress_end(). */
void ml_progress_start(ml_progress_t *p, const ml_reader_t *r, const char *what, const char *where);
/** The same for a read of something else: *at bytes of `size` are read. */
void ml_progress_start_at(ml_progress_t *p, const uint64_t *at, uint64_t size, const char *what,
                          const char *where);
void ml__progress_show(ml_progress_t *p);
/** Call once per record; it looks at the file offset every 65536 calls. */
static inline void ml_progress_tick(ml_progress_t *p) {
    if (p->on && (++p->n & 0xffff) == 0) ml__progress_show(p);
}
/** Erases the display, if anything was shown. */
void ml_progress_end(ml_progress_t *p);

/* ------------------------------------------------------------------------- */
/* Text form                                                                 */
/* ------------------------------------------------------------------------- */

/** Prints one record as a line of text (`memlens dump`). */
void ml_record_print(FILE *out, const ml_record_t *rec);

/** Names of tags and kinds, for messages and dumps. */
const char *ml_tag_name(unsigned tag);
/** How a process ended (ML_END_*), as the JSON and `dump` say it; "unknown"
 * for a kind this build does not know. */
const char *ml_end_name(uint32_t kind);
const char *ml_kind_name(unsigned kind);
const char *ml_gpu_kind_name(unsigned kind); /* ml_gpu_kind_t: "device", "host_pinned", ... */
const char *ml_gpu_op_name(unsigned op);     /* ml_gpu_op_t: "alloc", "free", ... */
const char *ml_gpu_pool_op_name(unsigned op); /* ml_gpu_pool_op_t: "created", "trimmed", ... */
const char *ml_hwm_source_name(unsigned source); /* ML_HWM_*: "wait4", "exit", "sampled" */

/* text_clean.c: a trace's strings for a terminal, every control byte but tab
 * (and newline when keep_nl) as '?', C1 controls (UTF-8 C2 80-9F) too.
 * ml_text_clean cleans n bytes of in into out (n + 1 bytes at most),
 * carrying a C2 that ends one call into the next in *c2, and returns the
 * bytes written; ml_text_safe is s cleaned (newline too) into buf (len
 * bytes at most). */
size_t ml_text_clean(const unsigned char *in, size_t n, char *out, bool *c2, bool keep_nl);
const char *ml_text_safe(const char *s, char *buf, size_t len);

#endif
