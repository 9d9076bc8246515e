/* writer.c - encodes records into .mlt chunks (docs/trace-format.md).
 *
 * Records accumulate as LEB128 bodies in `raw`; once ML__CHUNK_TARGET bytes
 * wait, they are compressed into one zstd frame and written with one
 * write(2), so a crash leaves whole chunks only. Every chunk decodes on its
 * own: the delta state (time, thread, previous pointer, node and pc) and the
 * address model restart with it.
 */
#include "ml_trace_io.h"
#include "address_model.h"
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

struct ml_writer_s {
    int fd;
    int error;
    ZSTD_CCtx *cctx;
    uint8_t *raw;
    size_t raw_len, raw_cap;
    uint32_t nrecords;
    uint8_t *comp;
    size_t comp_cap;
    uint64_t bytes;
    uint64_t body_hash; /* ml__fold_hash of every block written */
    ml__chunk_state_t st; /* the current chunk's delta state */
    /* The snapshot being streamed (ml_writer_snapshot_begin..end). */
    bool snap_on;
    int snap_error;    /* the first error while streaming: the snapshot is dropped at the end */
    off_t snap_at;     /* the file offset of its header */
    uint64_t snap_raw; /* bytes given so far */
    uint64_t snap_comp; /* compressed bytes written so far */
    uint8_t *snap_out; /* compressed bytes on their way to the file */
    size_t snap_out_len;
    uint8_t *snap_first; /* the first bytes given, not compressed yet (NULL: none held) */
    size_t snap_first_len;
    bool snap_started;   /* bytes went to zstd */
};

/* ------------------------------------------------------------------------- */
/* Output                                                                    */
/* ------------------------------------------------------------------------- */

int ml_write_all(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int reserve(ml_writer_t *w, size_t more) {
    if (w->raw_len + more <= w->raw_cap) return 0;
    size_t cap = w->raw_cap * 2;
    while (cap < w->raw_len + more) cap *= 2;
    uint8_t *p = realloc(w->raw, cap);
    if (!p) return -ENOMEM;
    w->raw = p;
    w->raw_cap = cap;
    return 0;
}

/* The put_* helpers write into `raw` without checking: ml_writer_add
 * reserves record_bound() bytes first. */
static void put_u8(ml_writer_t *w, uint8_t v) {
    w->raw[w->raw_len++] = v;
}
static void put_u(ml_writer_t *w, uint64_t v) {
    while (v >= 0x80) {
        w->raw[w->raw_len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->raw[w->raw_len++] = (uint8_t)v;
}
static void put_s(ml_writer_t *w, int64_t v) {
    put_u(w, ml__zigzag(v));
}
static void put_bytes(ml_writer_t *w, const void *p, size_t len) {
    put_u(w, len);
    if (len) memcpy(w->raw + w->raw_len, p, len); /* p may be NULL when len is 0 */
    w->raw_len += len;
}
static size_t str_len_capped(const char *s) {
    return s ? strnlen(s, 4096) : 0;
}
static void put_str(ml_writer_t *w, const char *s) {
    put_bytes(w, s ? s : "", str_len_capped(s));
}

/* ------------------------------------------------------------------------- */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------- */

/* A writer is mostly its address model (300 KB), of which a trace touches
 * the classes of the sizes it uses: its own mapping, whose pages are zero
 * until written, rather than calloc, which zeroes (and so touches) every
 * page of memory malloc had used before. The collector holds one writer per
 * live traced process. */
static ml_writer_t *writer_alloc(void) {
    void *p = mmap(NULL, sizeof(ml_writer_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int ml_writer_new(int fd, int level, ml_writer_t **out) {
    ml_writer_t *w = writer_alloc();
    if (!w) return -ENOMEM;
    w->fd = fd;
    w->raw_cap = ML__CHUNK_TARGET + 65536;
    w->raw = malloc(w->raw_cap);
    w->cctx = ZSTD_createCCtx();
    if (!w->raw || !w->cctx) goto fail;
    ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
    uint8_t hdr[ML_TRACE_HEADER_LEN] = {0};
    memcpy(hdr, ML_TRACE_MAGIC, ML_TRACE_MAGIC_LEN);
    ml__put_le16(hdr + 8, ML_TRACE_MAJOR);
    ml__put_le16(hdr + 10, ML_TRACE_MINOR);
    ml__put_le32(hdr + 12, 0);
    int rc = ml_write_all(fd, hdr, sizeof hdr);
    if (rc < 0) {
        ml_writer_free(w);
        return rc;
    }
    w->bytes = sizeof hdr;
    w->body_hash = ml__fold_hash(0, hdr, sizeof hdr);
    *out = w;
    return 0;
fail:
    ml_writer_free(w);
    return -ENOMEM;
}

/* A compression error as an errno: zstd short of memory is ENOMEM (memlens
 * under a `ulimit -v` or a cgroup said "Input/output error", as if the disk
 * had failed); anything else is EIO. */
static int zstd_errno(size_t n) {
    return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation ? -ENOMEM : -EIO;
}

int ml_writer_flush(ml_writer_t *w) {
    if (w->error) return w->error;
    if (w->snap_on) return -EBUSY; /* no chunk inside the snapshot's frame */
    if (w->raw_len == 0) return 0;
    size_t bound = ZSTD_compressBound(w->raw_len) + ML_CHUNK_HEADER_LEN;
    if (bound > w->comp_cap) {
        uint8_t *p = realloc(w->comp, bound);
        if (!p) return w->error = -ENOMEM;
        w->comp = p;
        w->comp_cap = bound;
    }
    size_t n = ZSTD_compress2(w->cctx, w->comp + ML_CHUNK_HEADER_LEN,
                              w->comp_cap - ML_CHUNK_HEADER_LEN, w->raw, w->raw_len);
    if (ZSTD_isError(n)) return w->error = zstd_errno(n);
    ml__put_le32(w->comp, ML_CHUNK_MAGIC);
    ml__put_le32(w->comp + 4, (uint32_t)n);
    ml__put_le32(w->comp + 8, (uint32_t)w->raw_len);
    ml__put_le32(w->comp + 12, w->nrecords);
    /* One write per chunk: a crash leaves either the whole chunk or a short
     * file that the reader recognises as truncated. */
    int rc = ml_write_all(w->fd, w->comp, n + ML_CHUNK_HEADER_LEN);
    if (rc < 0) return w->error = rc;
    w->bytes += n + ML_CHUNK_HEADER_LEN;
    w->body_hash = ml__fold_hash(w->body_hash, w->comp, n + ML_CHUNK_HEADER_LEN);
    w->raw_len = 0;
    w->nrecords = 0;
    /* Each chunk decodes on its own: delta state restarts. */
    ml__chunk_state_reset(&w->st);
    return 0;
}

uint64_t ml_writer_bytes(const ml_writer_t *w) {
    return w->bytes + 0;
}

#define SNAPSHOT_MT_MIN (8u << 20) /* raw snapshot bytes from which zstd's workers help */
#define SNAPSHOT_MT_MAX 4          /* workers at most */

static int snapshot_workers(void) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > SNAPSHOT_MT_MAX ? SNAPSHOT_MT_MAX : cpus < 1 ? 1 : (int)cpus;
}

int ml_writer_add_snapshot(ml_writer_t *w, const void *data, size_t len, uint32_t version) {
    int rc = ml_writer_flush(w);
    if (rc < 0) return rc;
    if (len == 0 || len > ML_SNAPSHOT_MAX_RAW) return -EINVAL;
    size_t bound = ZSTD_compressBound(len) + ML_CHUNK_HEADER_LEN + ML_TRAILER_LEN;
    uint8_t *buf = malloc(bound);
    if (!buf) return -ENOMEM;
    /* A big snapshot is written once its process is gone, whose CPU is
     * then free: zstd's workers share its compression (one frame all the
     * same; a libzstd without threads refuses the parameter, and one
     * thread does it as before). On 7.5 M live blocks (an 82 MB snapshot)
     * this took 0.27-0.37 s on one thread and 0.19-0.21 s on two. */
    bool workers = len >= SNAPSHOT_MT_MIN && snapshot_workers() > 1 &&
                   !ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_nbWorkers, snapshot_workers()));
    size_t n = ZSTD_compress2(w->cctx, buf + ML_CHUNK_HEADER_LEN,
                              bound - ML_CHUNK_HEADER_LEN - ML_TRAILER_LEN, data, len);
    if (workers) ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_nbWorkers, 0);
    if (ZSTD_isError(n)) {
        free(buf);
        return zstd_errno(n);
    }
    ml__put_le32(buf, ML_SNAPSHOT_MAGIC);
    ml__put_le32(buf + 4, (uint32_t)n);
    ml__put_le32(buf + 8, (uint32_t)len);
    ml__put_le32(buf + 12, version);
    uint8_t *t = buf + ML_CHUNK_HEADER_LEN + n;
    ml__put_le32(t, ML_TRAILER_MAGIC);
    ml__put_le32(t + 4, 1);
    ml__put_le64(t + 8, w->body_hash);
    ml__put_le64(t + 16, w->bytes);
    size_t total = ML_CHUNK_HEADER_LEN + n + ML_TRAILER_LEN;
    rc = ml_write_all(w->fd, buf, total);
    free(buf);
    if (rc < 0) return w->error = rc;
    w->bytes += total;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The snapshot, streamed                                                    */
/* ------------------------------------------------------------------------- */

/* ml_writer_add_snapshot needs the whole snapshot in memory, and a buffer
 * of its compressed size, and zstd's workers held tens of MB more: on a
 * program that exits with 7.5 M live blocks, well over 100 MB of the
 * collector's peak RSS (issue 12). The streamed snapshot goes through one
 * zstd stream and an output buffer of SNAP_OUT bytes instead. Its header
 * is written first with comp_len UINT32_MAX (a reader of a file cut there
 * sees a snapshot that runs past the end: cut, no record lost, as for a
 * crash in ml_writer_add_snapshot's one write), then the frame as it comes,
 * then the header's lengths in place (pwrite) and the trailer last, so a
 * trailer is only ever written after a whole snapshot. The frame has no
 * content size in its header, since nobody knows it when the header is
 * written (but a snapshot of one write, SNAP_HOLD below, has it); the
 * reader checks the size it decompresses to against raw_len.
 *
 * One thread compresses: zstd's workers, which ml_writer_add_snapshot
 * uses, hold their jobs' input and output buffers (measured on 7.5 M live
 * blocks, 2 CPUs: +45 MB RSS with the default job size, +3 MB with 1 MiB
 * jobs), and did not make the snapshot's part of `memlens run` measurably
 * shorter there (0.54-0.64 s on one thread; 0.40-0.62 s and 0.60-0.62 s
 * with two workers): making the bytes, not compressing them, is most of
 * it, and the fragmentation thread (analysis/snapshot.c) has the other
 * CPU meanwhile. */

#define SNAP_OUT (256u << 10) /* compressed bytes written at a time */
/* The first bytes given, up to this many, wait: when the end comes next,
 * the whole snapshot is known and zstd is told its size, so it sizes its
 * window and tables for it. Without a size it takes those of an endless
 * stream, 3 MB it zeroes on each writer: with many short processes that was
 * most of the collector's time. The analysis hands its bytes on in pieces
 * of 1 MiB (ML__SPILL_AT), so a snapshot of one piece is one write. */
#define SNAP_HOLD (1u << 20)

/* Writes the compressed bytes waiting in snap_out. */
static int snap_write_out(ml_writer_t *w) {
    if (!w->snap_out_len) return 0;
    if (w->snap_comp + w->snap_out_len > UINT32_MAX) return -EFBIG; /* comp_len is 32 bits */
    int rc = ml_write_all(w->fd, w->snap_out, w->snap_out_len);
    if (rc < 0) return rc;
    w->snap_comp += w->snap_out_len;
    w->snap_out_len = 0;
    return 0;
}

/* Runs `p`, `n` through the stream with `op` (ZSTD_e_end: until the frame
 * is whole), writing the output buffer whenever it fills. */
static int snap_compress(ml_writer_t *w, const void *p, size_t n, ZSTD_EndDirective op) {
    ZSTD_inBuffer in = {p, n, 0};
    for (;;) {
        ZSTD_outBuffer out = {w->snap_out, SNAP_OUT, w->snap_out_len};
        size_t left = ZSTD_compressStream2(w->cctx, &out, &in, op);
        if (ZSTD_isError(left)) return zstd_errno(left);
        w->snap_out_len = out.pos;
        bool done = op == ZSTD_e_end ? left == 0 : in.pos == in.size;
        if (w->snap_out_len == SNAP_OUT || (done && op == ZSTD_e_end)) {
            int rc = snap_write_out(w);
            if (rc < 0) return rc;
        }
        if (done) return 0;
    }
}

/* Compresses the bytes held back: the whole snapshot when `last` (zstd is
 * told their size first), else its beginning. */
static int snap_flush_first(ml_writer_t *w, bool last) {
    if (!w->snap_first) return 0;
    if (last) ZSTD_CCtx_setPledgedSrcSize(w->cctx, w->snap_first_len);
    int rc = snap_compress(w, w->snap_first, w->snap_first_len, last ? ZSTD_e_end : ZSTD_e_continue);
    free(w->snap_first);
    w->snap_first = NULL;
    return rc;
}

/* Puts the file back as it was before the snapshot (the trace then ends
 * as one written without a snapshot: with its last chunk) and the stream
 * back to the chunks' one-shot use. When the file cannot be cut, what stays
 * after the chunks is a block whose header says it runs past the end of
 * the file, or a trailer-less tail: readers skip it and replay. */
static void snap_close(ml_writer_t *w, bool drop) {
    if (drop && ftruncate(w->fd, w->snap_at) == 0) (void)lseek(w->fd, w->snap_at, SEEK_SET);
    ZSTD_CCtx_reset(w->cctx, ZSTD_reset_session_only);
    free(w->snap_out);
    w->snap_out = NULL;
    free(w->snap_first);
    w->snap_first = NULL;
    w->snap_on = false;
}

int ml_writer_snapshot_begin(ml_writer_t *w, uint32_t version) {
    if (w->snap_on) return -EBUSY;
    int rc = ml_writer_flush(w);
    if (rc < 0) return rc;
    /* The header's lengths are written in place at the end: that takes a
     * file, not a pipe, and one not in append mode (where pwrite appends). */
    int fl = fcntl(w->fd, F_GETFL);
    off_t at = lseek(w->fd, 0, SEEK_CUR);
    if (fl < 0 || (fl & O_APPEND) || at < 0) return -ESPIPE;
    w->snap_out = malloc(SNAP_OUT);
    if (!w->snap_out) return -ENOMEM;
    w->snap_on = true;
    w->snap_error = 0;
    w->snap_at = at;
    w->snap_raw = w->snap_comp = 0;
    w->snap_out_len = 0;
    w->snap_started = false;
    uint8_t h[ML_CHUNK_HEADER_LEN];
    ml__put_le32(h, ML_SNAPSHOT_MAGIC);
    ml__put_le32(h + 4, UINT32_MAX); /* until the end: a cut file reads as a cut snapshot */
    ml__put_le32(h + 8, 0);
    ml__put_le32(h + 12, version);
    ZSTD_CCtx_reset(w->cctx, ZSTD_reset_session_only);
    rc = ml_write_all(w->fd, h, sizeof h);
    if (rc < 0) {
        snap_close(w, true);
        return rc;
    }
    return 0;
}

int ml_writer_snapshot_write(ml_writer_t *w, const void *p, size_t n) {
    if (!w->snap_on) return -EINVAL;
    if (w->snap_error) return w->snap_error;
    if (n > ML_SNAPSHOT_MAX_RAW - w->snap_raw) return w->snap_error = -EFBIG;
    w->snap_raw += n;
    if (!w->snap_started && !w->snap_first && n && n <= SNAP_HOLD) {
        if ((w->snap_first = malloc(n))) {
            memcpy(w->snap_first, p, n);
            w->snap_first_len = n;
            return 0;
        }
    }
    int rc = snap_flush_first(w, false);
    w->snap_started = true;
    if (rc == 0) rc = snap_compress(w, p, n, ZSTD_e_continue);
    if (rc < 0) w->snap_error = rc;
    return rc;
}

int ml_writer_snapshot_end(ml_writer_t *w, int status) {
    if (!w->snap_on) return -EINVAL;
    int rc = status < 0 ? status : w->snap_error;
    if (rc == 0 && w->snap_raw == 0) rc = -EINVAL;
    if (rc == 0 && w->snap_first) rc = snap_flush_first(w, true);
    else if (rc == 0) rc = snap_compress(w, NULL, 0, ZSTD_e_end);
    if (rc == 0) {
        uint8_t h[8];
        ml__put_le32(h, (uint32_t)w->snap_comp);
        ml__put_le32(h + 4, (uint32_t)w->snap_raw);
        for (size_t done = 0; rc == 0 && done < sizeof h;) {
            ssize_t n = pwrite(w->fd, h + done, sizeof h - done, w->snap_at + 4 + (off_t)done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) rc = n < 0 ? -errno : -EIO;
            else done += (size_t)n;
        }
    }
    if (rc == 0) {
        /* The trailer, as ml_writer_add_snapshot writes it. */
        uint8_t t[ML_TRAILER_LEN];
        ml__put_le32(t, ML_TRAILER_MAGIC);
        ml__put_le32(t + 4, 1);
        ml__put_le64(t + 8, w->body_hash);
        ml__put_le64(t + 16, w->bytes);
        rc = ml_write_all(w->fd, t, sizeof t);
    }
    if (rc == 0) w->bytes += ML_CHUNK_HEADER_LEN + w->snap_comp + ML_TRAILER_LEN;
    snap_close(w, rc < 0);
    return rc;
}

int ml_writer_free(ml_writer_t *w) {
    if (!w) return 0;
    if (w->snap_on) snap_close(w, true); /* a snapshot never ended is no snapshot */
    int rc = w->error ? w->error : ml_writer_flush(w);
    ZSTD_freeCCtx(w->cctx);
    free(w->raw);
    free(w->comp);
    munmap(w, sizeof *w);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Record bodies                                                             */
/* ------------------------------------------------------------------------- */

/* The most bytes a record can take once encoded (its tag and a time and
 * thread change included). */
static size_t record_bound(const ml_record_t *r) {
    size_t n = 64;
    switch (r->tag) {
    case ML_T_MODULE:
        n += str_len_capped(r->u.module.path) + r->u.module.build_id_len + 16 * 32;
        break;
    case ML_T_THREAD:
        n += str_len_capped(r->u.thread.name);
        break;
    case ML_T_UNTRACED:
        n += str_len_capped(r->u.untraced.message);
        break;
    case ML_T_PROCESS:
        n += 3 * 4096 + 16 * 10;
        for (uint32_t i = 0; i < r->u.process.argc && i < ML_MAX_ARGS; i++)
            n += str_len_capped(r->u.process.argv[i]) + 10;
        break;
    case ML_T_END:
    case ML_T_UNWIND_CHECK:
        n += 12 * 10;
        break;
    case ML_T_GPU_ALLOC:
    case ML_T_GPU_FREE:
    case ML_T_GPU_POOL:
        n += 13 * 10;
        break;
    default:
        break;
    }
    return n;
}

/* Time and thread changes travel as records of their own, ahead of the
 * record they apply to. */
static void put_context(ml_writer_t *w, const ml_record_t *r) {
    if (r->time_ms != w->st.time_ms) {
        put_u8(w, ML_T_TIME);
        put_u(w, r->time_ms);
        w->st.time_ms = r->time_ms;
        w->nrecords++;
    }
    if (r->thread != w->st.thread) {
        put_u8(w, ML_T_THREAD_SWITCH);
        put_u(w, r->thread);
        w->st.thread = r->thread;
        w->nrecords++;
    }
}

/* The tag byte is already written: a predicted address turns it into
 * ML_T_ALLOC_RECENT. */
static void put_alloc(ml_writer_t *w, const ml_record_t *r) {
    uint64_t usable = r->u.alloc.usable > r->u.alloc.size ? r->u.alloc.usable : r->u.alloc.size;
    ml__model_pos_t at = ml__model_find_freed(&w->st.model, usable, r->u.alloc.ptr);
    int code = ml__model_code(at);
    if (code >= 0) w->raw[w->raw_len - 1] = ML_T_ALLOC_RECENT;
    /* New memory carved from a region follows the previous new chunk
     * there: alloc cursors hold chunk ends, so the delta is then 0. */
    int cur = code >= 0 ? 0 : ml__cursor_pick(&w->st.model.alloc_cur, r->u.alloc.ptr);
    put_u8(w, (uint8_t)(r->u.alloc.kind | cur << 4));
    put_u8(w, r->u.alloc.flags);
    put_u(w, r->u.alloc.size);
    put_u(w, usable - r->u.alloc.size);
    put_u(w, r->u.alloc.stack);
    if (code >= 0) {
        put_u8(w, (uint8_t)code);
    } else {
        put_s(w, (int64_t)(r->u.alloc.ptr - w->st.model.alloc_cur.v[cur]));
        ml__cursor_set(&w->st.model.alloc_cur, cur, r->u.alloc.ptr + usable + 8);
    }
    ml__model_alloc_at(&w->st.model, r->u.alloc.ptr, usable, at);
    w->st.prev_ptr = r->u.alloc.ptr;
}

/* The tag byte is already written: a free the model knows becomes
 * ML_T_FREE_RECENT or ML_T_FREE_CLASS. */
static void put_free(ml_writer_t *w, const ml_record_t *r) {
    int k = ml__model_find_live(&w->st.model, r->u.alloc.ptr);
    uint64_t usable = r->u.alloc.usable;
    if (k >= 0) {
        w->raw[w->raw_len - 1] = ML_T_FREE_RECENT;
        put_u8(w, r->u.alloc.kind);
        put_u8(w, (uint8_t)k);
        uint64_t ptr;
        ml__model_live_at(&w->st.model, k, &ptr, &usable);
        ml__model_drop_live(&w->st.model, k);
    } else if (!ml__near_cursor(&w->st.model.free_cur, r->u.alloc.ptr) &&
               (k = ml__model_find_live_class(&w->st.model, r->u.alloc.ptr, usable)) >= 0) {
        /* One of the last blocks of its size class: the size and a byte. */
        w->raw[w->raw_len - 1] = ML_T_FREE_CLASS;
        put_u8(w, r->u.alloc.kind);
        put_u(w, usable);
        put_u8(w, (uint8_t)k);
    } else {
        int cur = ml__cursor_pick(&w->st.model.free_cur, r->u.alloc.ptr);
        put_u8(w, (uint8_t)(r->u.alloc.kind | cur << 4));
        put_s(w, (int64_t)(r->u.alloc.ptr - w->st.model.free_cur.v[cur]));
        ml__cursor_set(&w->st.model.free_cur, cur, r->u.alloc.ptr);
        put_u(w, usable);
    }
    ml__model_free(&w->st.model, r->u.alloc.ptr, usable);
    w->st.prev_ptr = r->u.alloc.ptr;
}

/* Nodes come mostly in id order, a child right after its parent, and
 * neighbouring return addresses lie in the same module: deltas. */
static void put_node(ml_writer_t *w, const ml_record_t *r) {
    put_s(w, (int64_t)r->u.node.id - (int64_t)w->st.prev_node - 1);
    put_s(w, (int64_t)r->u.node.id - (int64_t)r->u.node.parent);
    put_s(w, (int64_t)(r->u.node.pc - w->st.prev_pc));
    w->st.prev_node = r->u.node.id;
    w->st.prev_pc = r->u.node.pc;
}

static void put_module(ml_writer_t *w, const ml_record_t *r) {
    put_u(w, r->u.module.base);
    put_str(w, r->u.module.path);
    put_bytes(w, r->u.module.build_id, r->u.module.build_id_len);
    uint32_t n = r->u.module.nsegs > 16 ? 16 : r->u.module.nsegs;
    put_u(w, n);
    for (uint32_t i = 0; i < n; i++) {
        put_u(w, r->u.module.segs[i].vaddr);
        put_u(w, r->u.module.segs[i].memsz);
        put_u(w, r->u.module.segs[i].flags);
    }
}

static void put_reach_scan(ml_writer_t *w, const ml_record_t *r) {
    const typeof(r->u.reach_scan) *q = &r->u.reach_scan;
    put_s(w, q->status);
    put_u(w, q->root_bytes);
    put_u(w, q->heap_bytes);
    put_u(w, q->blocks);
    put_u(w, q->reachable);
    put_u(w, q->indirect);
    put_u(w, q->definite);
    put_u(w, q->duration_us);
}

static void put_process(ml_writer_t *w, const ml_record_t *r) {
    const typeof(r->u.process) *p = &r->u.process;
    put_u(w, p->pid);
    put_u(w, p->ppid);
    put_u(w, p->start_realtime_ns);
    put_u(w, p->page_size);
    put_u(w, p->unwinder);
    put_u(w, p->depth);
    put_u(w, p->sample_bytes);
    put_u(w, p->options);
    put_str(w, p->parent_trace);
    put_str(w, p->exe);
    uint32_t argc = p->argc > ML_MAX_ARGS ? ML_MAX_ARGS : p->argc;
    put_u(w, argc);
    for (uint32_t i = 0; i < argc; i++) put_str(w, p->argv[i]);
    put_str(w, p->producer);
}

static void put_gpu(ml_writer_t *w, const ml_record_t *r) {
    const typeof(r->u.gpu) *g = &r->u.gpu;
    if (r->tag == ML_T_GPU_FREE) put_u8(w, g->op);
    put_u8(w, g->kind);
    put_u(w, g->flags);
    put_s(w, g->device);
    put_u(w, g->context);
    put_u(w, g->stream);
    if (r->tag == ML_T_GPU_ALLOC) {
        put_u(w, g->size);
        put_u(w, g->stack);
        put_u(w, g->ptr);
    } else {
        put_u(w, g->ptr);
        put_u(w, g->size);
    }
    put_u(w, g->handle);
    put_u(w, g->cbid);
    put_u(w, g->correlation);
}

static void put_gpu_pool(ml_writer_t *w, const ml_record_t *r) {
    const typeof(r->u.gpu) *g = &r->u.gpu;
    put_u8(w, g->kind);
    put_u(w, g->flags);
    put_s(w, g->device);
    put_u(w, g->context);
    put_u(w, g->ptr);
    put_u(w, g->size);
    put_u(w, g->pool_used);
    put_u(w, g->pool_threshold);
    put_u(w, g->handle);
    put_u(w, g->stream);
    put_u(w, g->cbid);
    put_u(w, g->correlation);
}

static void put_unwind_check(ml_writer_t *w, const ml_record_t *r) {
    const typeof(r->u.unwind_check) *q = &r->u.unwind_check;
    put_u(w, q->stacks);
    put_u(w, q->mismatches);
    put_u(w, q->fallbacks);
    put_u(w, q->reused);
    put_u(w, q->first_frame);
    put_u(w, q->fast_pc);
    put_u(w, q->full_pc);
}

static void put_end(ml_writer_t *w, const ml_record_t *r) {
    const ml_rec_end_t *e = &r->u.end;
    put_u(w, e->status_kind);
    put_s(w, e->status);
    put_u(w, e->events);
    put_u(w, e->ring_waits);
    put_u(w, e->ring_wait_ns);
    put_u(w, e->lost_in_crash);
    put_u(w, e->lost_dead_collector);
    put_u(w, e->nested_skipped);
    put_u(w, e->truncated_stacks);
    put_u(w, e->duration_ms);
}

int ml_writer_add(ml_writer_t *w, const ml_record_t *r) {
    if (w->error) return w->error;
    if (w->raw_len >= ML__CHUNK_TARGET) {
        int rc = ml_writer_flush(w);
        if (rc < 0) return rc;
    }
    if (reserve(w, record_bound(r)) < 0) return w->error = -ENOMEM;
    put_context(w, r);
    put_u8(w, r->tag);
    w->nrecords++;
    switch (r->tag) {
    case ML_T_ALLOC: put_alloc(w, r); break;
    case ML_T_FREE: put_free(w, r); break;
    case ML_T_REALLOC_FAIL:
        put_s(w, (int64_t)(r->u.alloc.ptr - w->st.prev_ptr));
        w->st.prev_ptr = r->u.alloc.ptr;
        break;
    case ML_T_MMAP:
        put_u8(w, r->u.alloc.kind);
        put_u8(w, r->u.alloc.flags);
        put_u(w, r->u.alloc.size);
        put_u(w, r->u.alloc.stack);
        put_u(w, r->u.alloc.ptr);
        break;
    case ML_T_MUNMAP:
    case ML_T_MMAP_FAIL:
        put_u8(w, r->u.alloc.kind);
        put_u(w, r->u.alloc.ptr);
        put_u(w, r->u.alloc.size);
        break;
    case ML_T_NODE: put_node(w, r); break;
    case ML_T_MODULE: put_module(w, r); break;
    case ML_T_MODULE_UNLOAD: put_u(w, r->u.module.base); break;
    case ML_T_THREAD:
        put_u(w, r->u.thread.index);
        put_u(w, r->u.thread.tid);
        put_str(w, r->u.thread.name);
        break;
    case ML_T_MALLINFO:
        put_u(w, r->u.mallinfo.arena);
        put_u(w, r->u.mallinfo.hblkhd);
        put_u(w, r->u.mallinfo.uordblks);
        put_u(w, r->u.mallinfo.fordblks);
        put_u(w, r->u.mallinfo.keepcost);
        break;
    case ML_T_RSS:
        put_u(w, r->u.rss.rss_bytes);
        put_u(w, r->u.rss.interval_ms);
        break;
    case ML_T_PROC_EXIT: put_u(w, r->u.proc_exit.nested_skipped); break;
    case ML_T_PEAK_RSS:
        put_u(w, r->u.peak_rss.bytes);
        put_u8(w, r->u.peak_rss.source);
        break;
    case ML_T_UNTRACED:
        put_u8(w, r->u.untraced.what);
        put_u(w, r->u.untraced.count);
        put_str(w, r->u.untraced.message);
        break;
    case ML_T_BLOCK_REACH:
        put_u8(w, r->u.block_reach.reach);
        put_s(w, (int64_t)(r->u.block_reach.ptr - w->st.prev_ptr));
        w->st.prev_ptr = r->u.block_reach.ptr;
        break;
    case ML_T_REACH_REST: put_u8(w, r->u.block_reach.reach); break;
    case ML_T_REACH_SCAN: put_reach_scan(w, r); break;
    case ML_T_PROCESS: put_process(w, r); break;
    case ML_T_GPU_ALLOC:
    case ML_T_GPU_FREE: put_gpu(w, r); break;
    case ML_T_GPU_POOL: put_gpu_pool(w, r); break;
    case ML_T_UNWIND_CHECK: put_unwind_check(w, r); break;
    case ML_T_END: put_end(w, r); break;
    default: return w->error = -EINVAL;
    }
    return 0;
}
