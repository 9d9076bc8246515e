/* reader.c - decodes .mlt traces in one streaming pass (docs/trace-format.md).
 *
 * Memory is bounded by one chunk: a chunk is read, checked and decompressed,
 * its records are decoded one per ml_reader_next() call, then the next chunk
 * replaces it. The delta state and the address model restart with every
 * chunk, exactly as the writer's do. Anything that does not decode is an
 * error with its file offset; a file that ends inside a chunk is a clean,
 * truncated end (the collector was killed).
 */
#include "ml_trace_io.h"
#include "address_model.h"
#include "ml_outfile.h"
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

struct ml_reader_s {
    int fd;
    uint64_t size, offset;      /* file size, file offset of the next chunk */
    uint64_t chunk_offset;      /* file offset of the current chunk */
    unsigned major, minor;
    uint8_t *comp;
    size_t comp_cap;
    uint8_t *raw;
    size_t raw_cap, raw_len, pos;
    char *strings; /* NUL-terminated copies of the current record's strings */
    size_t strings_cap, strings_len;
    ZSTD_DCtx *dctx;
    bool truncated, complete;
    bool at_trailer; /* the analysis trailer was read: no record follows */
    char err[512];
    ml__chunk_state_t st; /* the current chunk's delta state */
};

static int fail(ml_reader_t *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(ml_reader_t *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return code;
}

static int read_full(int fd, void *buf, size_t len, size_t *got) {
    uint8_t *p = buf;
    *got = 0;
    while (*got < len) {
        ssize_t n = read(fd, p + *got, len - *got);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) break;
        *got += (size_t)n;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Opening and chunks                                                        */
/* ------------------------------------------------------------------------- */

/* A reader on `fd` (opened with O_NONBLOCK), which it takes over: closed on
 * failure, by ml_reader_close() otherwise. */
static int reader_from_fd(int fd, const char *path, ml_reader_t **out, char *err, size_t errlen);

int ml_reader_open(const char *path, ml_reader_t **out, char *err, size_t errlen) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. Only regular
     * files are read; the flag is cleared for them. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        char tmp[4096];
        if (err && e == ENOENT && ml_outfile_pending(path, tmp, sizeof tmp))
            /* `memlens run` writes PATH.tmp.XXXXXX and renames it at the end */
            snprintf(err, errlen,
                     "%s: no such file yet: its recording is still running, or was killed before it "
                     "could be renamed; %s holds what was recorded so far (memlens report reads it)",
                     path, tmp);
        else if (err)
            snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    return reader_from_fd(fd, path, out, err, errlen);
}

const char *ml_file_kind(unsigned mode) {
    return S_ISFIFO(mode)   ? "a FIFO (named pipe)"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISDIR(mode)  ? "a directory"
                            : "not a regular file";
}

static int reader_from_fd(int fd, const char *path, ml_reader_t **out, char *err, size_t errlen) {
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        if (err) snprintf(err, errlen, "%s: %s", path, strerror(e));
        close(fd);
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        if (err)
            snprintf(err, errlen, "%s: is %s, not a trace file; memlens reads traces from regular files only", path,
                     ml_file_kind(st.st_mode));
        close(fd);
        return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL; /* a folder: the viewer says what to open instead */
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        if (err) snprintf(err, errlen, "%s: %s", path, strerror(e));
        close(fd);
        return -e;
    }
    uint8_t hdr[ML_TRACE_HEADER_LEN];
    size_t got;
    if (read_full(fd, hdr, sizeof hdr, &got) < 0 || got < sizeof hdr ||
        memcmp(hdr, ML_TRACE_MAGIC, ML_TRACE_MAGIC_LEN) != 0) {
        if (err) snprintf(err, errlen, "%s: not a memlens trace (bad magic or too short)", path);
        close(fd);
        return -EINVAL;
    }
    unsigned major = ml__get_le16(hdr + 8), minor = ml__get_le16(hdr + 10);
    if (major != ML_TRACE_MAJOR) {
        if (err)
            snprintf(err, errlen,
                     "%s: trace format version %u.%u is not supported (this memlens reads %u.x)",
                     path, major, minor, ML_TRACE_MAJOR);
        close(fd);
        return -EPROTONOSUPPORT;
    }
    ml_reader_t *r = calloc(1, sizeof *r);
    if (!r || !(r->dctx = ZSTD_createDCtx())) {
        free(r);
        close(fd);
        if (err) snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->fd = fd;
    r->size = (uint64_t)st.st_size;
    r->offset = ML_TRACE_HEADER_LEN;
    r->major = major;
    r->minor = minor;
    *out = r;
    return 0;
}

/* Loads the next chunk. 1 = loaded, 0 = end of file (clean or truncated), <0 error. */
static int load_chunk(ml_reader_t *r) {
    uint8_t h[ML_CHUNK_HEADER_LEN];
    size_t got;
    uint32_t magic, comp_len, raw_len;
    /* A loop, not a call per block skipped: a file of nothing but empty
     * blocks would overflow the stack. */
    for (;;) {
        if (r->at_trailer) return 0;
        int rc = read_full(r->fd, h, sizeof h, &got);
        if (rc < 0) return fail(r, rc, "read error at offset %" PRIu64 ": %s", r->offset, strerror(-rc));
        if (got == 0) return 0;
        if (got < sizeof h) {
            /* After the end record only a snapshot can follow: its loss is no
             * record's. */
            if (!r->complete) r->truncated = true;
            return 0;
        }
        magic = ml__get_le32(h), comp_len = ml__get_le32(h + 4), raw_len = ml__get_le32(h + 8);
        /* After the end record only the analysis snapshot and the trailers
         * follow (file := header chunk* [snapshot trailer]): the records are
         * over, whatever these blocks hold. Skipping them by their own
         * lengths sent the reader into the snapshot when a length or a
         * magic was damaged, and the whole trace read as corrupt. */
        if (r->complete && magic != ML_CHUNK_MAGIC) {
            r->at_trailer = true;
            return 0;
        }
        if (!((magic == ML_SNAPSHOT_MAGIC || magic == ML_TRAILER_MAGIC) && r->minor >= 3)) break;
        /* The analysis trailer ("MLIX" 1) ends the records: what may follow
         * is the strategy advice a report saved, or a save of it cut short
         * (docs/trace-format.md, "The saved advice"). Neither holds a
         * record, and damage to them must not cost the records. */
        if (magic == ML_TRAILER_MAGIC && comp_len == 1) {
            r->at_trailer = true;
            return 0;
        }
        /* The analysis snapshot and its trailer follow the records: not
         * records themselves (ml_reader_snapshot() reads them). */
        uint64_t skip = magic == ML_TRAILER_MAGIC ? ML_TRAILER_LEN - ML_CHUNK_HEADER_LEN : comp_len;
        /* A streamed snapshot's header says UINT32_MAX bytes until the
         * snapshot is whole (writer.c): a file cut before reads as here. */
        if (r->offset + ML_CHUNK_HEADER_LEN + skip > r->size) {
            if (!r->complete) r->truncated = true; /* a cut snapshot loses no record */
            return 0;
        }
        if (lseek(r->fd, (off_t)skip, SEEK_CUR) < 0)
            return fail(r, -errno, "seek error at offset %" PRIu64 ": %s", r->offset, strerror(errno));
        r->offset += ML_CHUNK_HEADER_LEN + skip;
    }
    int rc;
    if (magic != ML_CHUNK_MAGIC)
        return fail(r, -EINVAL, "corrupt trace: bad chunk magic at offset %" PRIu64, r->offset);
    if (raw_len > ML_CHUNK_MAX_RAW || comp_len > ZSTD_compressBound(ML_CHUNK_MAX_RAW))
        return fail(r, -EINVAL, "corrupt trace: chunk at offset %" PRIu64 " claims %u bytes",
                    r->offset, raw_len);
    if (comp_len > r->comp_cap) {
        uint8_t *p = realloc(r->comp, comp_len);
        if (!p) return fail(r, -ENOMEM, "out of memory");
        r->comp = p;
        r->comp_cap = comp_len;
    }
    rc = read_full(r->fd, r->comp, comp_len, &got);
    if (rc < 0) return fail(r, rc, "read error at offset %" PRIu64 ": %s", r->offset, strerror(-rc));
    if (got < comp_len) {
        r->truncated = true;
        return 0;
    }
    if (raw_len > r->raw_cap) {
        uint8_t *p = realloc(r->raw, raw_len);
        if (!p) return fail(r, -ENOMEM, "out of memory");
        r->raw = p;
        r->raw_cap = raw_len;
    }
    unsigned long long content = ZSTD_getFrameContentSize(r->comp, comp_len);
    if (content != raw_len)
        return fail(r, -EINVAL, "corrupt trace: chunk at offset %" PRIu64 " has a bad frame",
                    r->offset);
    size_t n = ZSTD_decompressDCtx(r->dctx, r->raw, raw_len, r->comp, comp_len);
    if (ZSTD_isError(n) || n != raw_len)
        return fail(r, -EINVAL, "corrupt trace: chunk at offset %" PRIu64 " does not decompress (%s)",
                    r->offset, ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short");
    r->chunk_offset = r->offset;
    r->offset += ML_CHUNK_HEADER_LEN + comp_len;
    r->raw_len = raw_len;
    r->pos = 0;
    ml__chunk_state_reset(&r->st);
    return 1;
}

/* The next chunk with room for its strings: 1, 0 at the end of the trace,
 * or a negative errno. */
static int next_chunk(ml_reader_t *r) {
    int rc = load_chunk(r);
    if (rc <= 0) {
        if (rc == 0 && !r->complete) r->truncated = true;
        return rc;
    }
    /* Strings of one record never exceed the chunk that holds them. */
    if (r->raw_len + 1024 > r->strings_cap) {
        char *p = realloc(r->strings, r->raw_len + 1024);
        if (!p) return fail(r, -ENOMEM, "out of memory");
        r->strings = p;
        r->strings_cap = r->raw_len + 1024;
    }
    return 1;
}

/* ------------------------------------------------------------------------- */
/* Fields                                                                    */
/* ------------------------------------------------------------------------- */

static bool get_u(ml_reader_t *r, uint64_t *v) {
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->pos >= r->raw_len) return false;
        uint8_t b = r->raw[r->pos++];
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}
static bool get_u32(ml_reader_t *r, uint32_t *v) {
    uint64_t x;
    if (!get_u(r, &x) || x > UINT32_MAX) return false;
    *v = (uint32_t)x;
    return true;
}
static bool get_s(ml_reader_t *r, int64_t *v) {
    uint64_t x;
    if (!get_u(r, &x)) return false;
    *v = ml__unzigzag(x);
    return true;
}
/* A signed field that must fit an int32_t. */
static bool get_s32(ml_reader_t *r, int32_t *v) {
    int64_t d;
    if (!get_s(r, &d) || d < INT32_MIN || d > INT32_MAX) return false;
    *v = (int32_t)d;
    return true;
}
static bool get_u8(ml_reader_t *r, uint8_t *v) {
    if (r->pos >= r->raw_len) return false;
    *v = r->raw[r->pos++];
    return true;
}
/* Copies a length-prefixed string into the record's string area. */
static bool get_str(ml_reader_t *r, const char **s, uint32_t *len_out) {
    uint64_t len;
    if (!get_u(r, &len) || len > r->raw_len - r->pos) return false;
    if (r->strings_len + len + 1 > r->strings_cap) return false;
    char *d = r->strings + r->strings_len;
    memcpy(d, r->raw + r->pos, len);
    d[len] = '\0';
    r->pos += len;
    r->strings_len += len + 1;
    *s = d;
    if (len_out) *len_out = (uint32_t)len;
    return true;
}

/* ------------------------------------------------------------------------- */
/* Record bodies: each returns false when the body does not decode           */
/* ------------------------------------------------------------------------- */

/* ML_T_ALLOC, or ML_T_ALLOC_RECENT (the address is a model code). */
static bool get_alloc(ml_reader_t *r, uint8_t tag, ml_record_t *rec) {
    uint64_t slack = 0;
    uint8_t code = 0;
    int64_t d = 0;
    bool ok = get_u8(r, &rec->u.alloc.kind) && get_u8(r, &rec->u.alloc.flags) &&
              get_u(r, &rec->u.alloc.size) && get_u(r, &slack) && get_u32(r, &rec->u.alloc.stack) &&
              rec->u.alloc.size < ML_TRACE_SIZE_LIMIT && slack < ML_TRACE_SIZE_LIMIT - rec->u.alloc.size;
    uint64_t usable = rec->u.alloc.size + slack;
    int cur = rec->u.alloc.kind >> 4;
    rec->u.alloc.kind &= 0x0f;
    if (ok && tag == ML_T_ALLOC_RECENT) {
        ok = get_u8(r, &code) && (rec->u.alloc.ptr = ml__model_resolve(&r->st.model, usable, code));
    } else if (ok) {
        ok = cur < ML__CURSORS && get_s(r, &d);
        if (ok) {
            rec->u.alloc.ptr = r->st.model.alloc_cur.v[cur] + (uint64_t)d;
            ml__cursor_set(&r->st.model.alloc_cur, cur, rec->u.alloc.ptr + usable + 8);
        }
    }
    if (!ok) return false;
    rec->u.alloc.usable = usable;
    r->st.prev_ptr = rec->u.alloc.ptr;
    ml__model_alloc(&r->st.model, rec->u.alloc.ptr, usable);
    return true;
}

/* ML_T_FREE, ML_T_FREE_RECENT or ML_T_FREE_CLASS. */
static bool get_free(ml_reader_t *r, uint8_t tag, ml_record_t *rec) {
    uint8_t k = 0;
    int64_t d = 0;
    bool ok = get_u8(r, &rec->u.alloc.kind);
    if (ok && tag == ML_T_FREE_CLASS) {
        ok = get_u(r, &rec->u.alloc.usable) && get_u8(r, &k) &&
             ml__model_live_class_at(&r->st.model, rec->u.alloc.usable, k, &rec->u.alloc.ptr);
    } else if (ok && tag == ML_T_FREE_RECENT) {
        ok = get_u8(r, &k) && k < r->st.model.nlive;
        if (ok) {
            ml__model_live_at(&r->st.model, k, &rec->u.alloc.ptr, &rec->u.alloc.usable);
            ml__model_drop_live(&r->st.model, k);
        }
    } else if (ok) {
        int cur = rec->u.alloc.kind >> 4;
        rec->u.alloc.kind &= 0x0f;
        ok = cur < ML__CURSORS && get_s(r, &d) && get_u(r, &rec->u.alloc.usable);
        if (ok) {
            rec->u.alloc.ptr = r->st.model.free_cur.v[cur] + (uint64_t)d;
            ml__cursor_set(&r->st.model.free_cur, cur, rec->u.alloc.ptr);
        }
    }
    if (!ok) return false;
    r->st.prev_ptr = rec->u.alloc.ptr;
    ml__model_free(&r->st.model, rec->u.alloc.ptr, rec->u.alloc.usable);
    return true;
}

static bool get_node(ml_reader_t *r, ml_record_t *rec) {
    int64_t did, dparent, dpc;
    bool ok = get_s(r, &did) && get_s(r, &dparent) && get_s(r, &dpc);
    /* Bound the deltas before any arithmetic: a corrupt one must not
     * overflow (found by tests/fuzz). */
    ok = ok && did >= -(int64_t)UINT32_MAX && did <= (int64_t)UINT32_MAX && dparent >= 0 &&
         dparent <= (int64_t)UINT32_MAX + 1;
    int64_t id = ok ? (int64_t)r->st.prev_node + 1 + did : 0, parent = ok ? id - dparent : 0;
    ok = ok && id > 0 && id <= UINT32_MAX && parent >= 0 && parent < id;
    if (!ok) return false;
    rec->u.node.id = (uint32_t)id;
    rec->u.node.parent = (uint32_t)parent;
    rec->u.node.pc = r->st.prev_pc + (uint64_t)dpc;
    r->st.prev_node = rec->u.node.id;
    r->st.prev_pc = rec->u.node.pc;
    return true;
}

static bool get_module(ml_reader_t *r, ml_record_t *rec) {
    const char *bid = NULL;
    bool ok = get_u(r, &rec->u.module.base) && get_str(r, &rec->u.module.path, NULL) &&
              get_str(r, &bid, &rec->u.module.build_id_len) && get_u32(r, &rec->u.module.nsegs) &&
              rec->u.module.nsegs <= 16;
    rec->u.module.build_id = (const uint8_t *)bid;
    for (uint32_t i = 0; ok && i < rec->u.module.nsegs; i++)
        ok = get_u(r, &rec->u.module.segs[i].vaddr) && get_u(r, &rec->u.module.segs[i].memsz) &&
             get_u32(r, &rec->u.module.segs[i].flags);
    return ok;
}

static bool get_reach_scan(ml_reader_t *r, ml_record_t *rec) {
    typeof(rec->u.reach_scan) *q = &rec->u.reach_scan;
    int64_t d = 0;
    bool ok = get_s(r, &d) && d <= 0 && d >= INT32_MIN && get_u(r, &q->root_bytes) &&
              get_u(r, &q->heap_bytes) && get_u(r, &q->blocks) && get_u(r, &q->reachable) &&
              get_u(r, &q->indirect) && get_u(r, &q->definite) && get_u(r, &q->duration_us);
    q->status = (int32_t)d;
    return ok;
}

static bool get_unwind_check(ml_reader_t *r, ml_record_t *rec) {
    typeof(rec->u.unwind_check) *q = &rec->u.unwind_check;
    return r->minor >= 5 && get_u(r, &q->stacks) && get_u(r, &q->mismatches) && get_u(r, &q->fallbacks) &&
           get_u(r, &q->reused) && get_u(r, &q->first_frame) && get_u(r, &q->fast_pc) && get_u(r, &q->full_pc);
}

static bool get_process(ml_reader_t *r, ml_record_t *rec) {
    typeof(rec->u.process) *p = &rec->u.process;
    bool ok = get_u32(r, &p->pid) && get_u32(r, &p->ppid) && get_u(r, &p->start_realtime_ns) &&
              get_u32(r, &p->page_size) && get_u32(r, &p->unwinder) && get_u32(r, &p->depth) &&
              get_u(r, &p->sample_bytes) && get_u32(r, &p->options) &&
              get_str(r, &p->parent_trace, NULL) && get_str(r, &p->exe, NULL) &&
              get_u32(r, &p->argc) && p->argc <= ML_MAX_ARGS;
    for (uint32_t i = 0; ok && i < p->argc; i++) ok = get_str(r, &p->argv[i], NULL);
    return ok && get_str(r, &p->producer, NULL);
}

/* ML_T_GPU_ALLOC or ML_T_GPU_FREE. */
static bool get_gpu(ml_reader_t *r, uint8_t tag, ml_record_t *rec) {
    typeof(rec->u.gpu) *g = &rec->u.gpu;
    uint64_t flags = 0;
    g->op = ML_GPU_OP_ALLOC;
    bool ok = (tag == ML_T_GPU_ALLOC || get_u8(r, &g->op)) && get_u8(r, &g->kind) &&
              get_u(r, &flags) && flags <= UINT16_MAX && get_s32(r, &g->device) &&
              get_u32(r, &g->context) && get_u(r, &g->stream);
    if (ok && tag == ML_T_GPU_ALLOC)
        ok = get_u(r, &g->size) && g->size < ML_TRACE_SIZE_LIMIT && get_u32(r, &g->stack) && get_u(r, &g->ptr);
    else if (ok)
        ok = get_u(r, &g->ptr) && get_u(r, &g->size);
    ok = ok && get_u(r, &g->handle) && get_u32(r, &g->cbid) && get_u32(r, &g->correlation);
    g->flags = (uint16_t)flags;
    return ok;
}

static bool get_gpu_pool(ml_reader_t *r, ml_record_t *rec) {
    typeof(rec->u.gpu) *g = &rec->u.gpu;
    uint64_t flags = 0;
    g->op = ML_GPU_OP_POOL_STATE;
    bool ok = get_u8(r, &g->kind) && get_u(r, &flags) && flags <= UINT16_MAX &&
              get_s32(r, &g->device) && get_u32(r, &g->context) && get_u(r, &g->ptr) &&
              get_u(r, &g->size) && get_u(r, &g->pool_used) && get_u(r, &g->pool_threshold) &&
              get_u(r, &g->handle) && get_u(r, &g->stream) && get_u32(r, &g->cbid) &&
              get_u32(r, &g->correlation);
    g->flags = (uint16_t)flags;
    return ok;
}

static bool get_end(ml_reader_t *r, ml_record_t *rec) {
    ml_rec_end_t *e = &rec->u.end;
    int64_t d = 0;
    bool ok = get_u32(r, &e->status_kind) && get_s(r, &d) && get_u(r, &e->events) &&
              get_u(r, &e->ring_waits) && get_u(r, &e->ring_wait_ns) &&
              get_u(r, &e->lost_in_crash) && get_u(r, &e->lost_dead_collector) &&
              get_u(r, &e->nested_skipped) && get_u(r, &e->truncated_stacks) &&
              get_u(r, &e->duration_ms);
    e->status = (int32_t)d;
    if (ok) r->complete = true;
    return ok;
}

/* ------------------------------------------------------------------------- */
/* Records                                                                   */
/* ------------------------------------------------------------------------- */

/* Clears what the record of `tag` uses. The heap records, most of a trace,
 * use the start of the union only: clearing all 600 bytes of the record for
 * each of them was a tenth of the analysis time. */
static void clear_record(ml_record_t *rec, uint8_t tag) {
    if ((tag >= ML_T_ALLOC && tag <= ML_T_FREE_CLASS) || tag == ML_T_NODE || tag == ML_T_BLOCK_REACH ||
        tag == ML_T_REACH_REST)
        memset(rec, 0, offsetof(ml_record_t, u) + sizeof rec->u.alloc);
    else if (tag != ML_T_TIME && tag != ML_T_THREAD_SWITCH)
        memset(rec, 0, sizeof *rec);
}

/* Decodes the body of a record with `tag` (not TIME or THREAD_SWITCH):
 * 1 with the record's final tag in *out_tag, 0 when the body does not
 * decode, -1 for an unknown tag. */
static int get_body(ml_reader_t *r, uint8_t tag, ml_record_t *rec, uint8_t *out_tag) {
    int64_t d = 0;
    bool ok;
    *out_tag = tag;
    switch (tag) {
    case ML_T_ALLOC:
    case ML_T_ALLOC_RECENT:
        *out_tag = ML_T_ALLOC;
        return get_alloc(r, tag, rec);
    case ML_T_FREE:
    case ML_T_FREE_RECENT:
    case ML_T_FREE_CLASS:
        *out_tag = ML_T_FREE;
        return get_free(r, tag, rec);
    case ML_T_REALLOC_FAIL:
        ok = get_s(r, &d);
        if (ok) rec->u.alloc.ptr = r->st.prev_ptr = r->st.prev_ptr + (uint64_t)d;
        return ok;
    case ML_T_MMAP:
        return get_u8(r, &rec->u.alloc.kind) && get_u8(r, &rec->u.alloc.flags) &&
               get_u(r, &rec->u.alloc.size) && rec->u.alloc.size < ML_TRACE_SIZE_LIMIT &&
               get_u32(r, &rec->u.alloc.stack) && get_u(r, &rec->u.alloc.ptr);
    case ML_T_MUNMAP:
    case ML_T_MMAP_FAIL:
        return get_u8(r, &rec->u.alloc.kind) && get_u(r, &rec->u.alloc.ptr) &&
               get_u(r, &rec->u.alloc.size);
    case ML_T_NODE: return get_node(r, rec);
    case ML_T_MODULE: return get_module(r, rec);
    case ML_T_MODULE_UNLOAD: return get_u(r, &rec->u.module.base);
    case ML_T_THREAD:
        return get_u32(r, &rec->u.thread.index) && get_u32(r, &rec->u.thread.tid) &&
               get_str(r, &rec->u.thread.name, NULL);
    case ML_T_MALLINFO:
        return get_u(r, &rec->u.mallinfo.arena) && get_u(r, &rec->u.mallinfo.hblkhd) &&
               get_u(r, &rec->u.mallinfo.uordblks) && get_u(r, &rec->u.mallinfo.fordblks) &&
               get_u(r, &rec->u.mallinfo.keepcost);
    case ML_T_RSS:
        rec->u.rss.interval_ms = 0;
        return get_u(r, &rec->u.rss.rss_bytes) && (r->minor < 8 || get_u32(r, &rec->u.rss.interval_ms));
    case ML_T_PROC_EXIT: return get_u(r, &rec->u.proc_exit.nested_skipped);
    case ML_T_PEAK_RSS:
        return get_u(r, &rec->u.peak_rss.bytes) && get_u8(r, &rec->u.peak_rss.source) &&
               rec->u.peak_rss.source > ML_HWM_NONE && rec->u.peak_rss.source < ML_HWM_SOURCE_COUNT_;
    case ML_T_UNTRACED:
        /* A `what` of a later minor reads: its message says what it is. */
        return get_u8(r, &rec->u.untraced.what) && rec->u.untraced.what > 0 && get_u(r, &rec->u.untraced.count) &&
               get_str(r, &rec->u.untraced.message, NULL);
    case ML_T_BLOCK_REACH:
        ok = get_u8(r, &rec->u.block_reach.reach) && rec->u.block_reach.reach <= ML_REACH_POSSIBLE && get_s(r, &d);
        if (ok) rec->u.block_reach.ptr = r->st.prev_ptr = r->st.prev_ptr + (uint64_t)d;
        return ok;
    case ML_T_REACH_REST:
        return get_u8(r, &rec->u.block_reach.reach) && rec->u.block_reach.reach >= ML_REACH_REACHABLE &&
               rec->u.block_reach.reach <= ML_REACH_POSSIBLE;
    case ML_T_REACH_SCAN: return get_reach_scan(r, rec);
    case ML_T_PROCESS: return get_process(r, rec);
    case ML_T_GPU_ALLOC:
    case ML_T_GPU_FREE: return get_gpu(r, tag, rec);
    case ML_T_GPU_POOL: return get_gpu_pool(r, rec);
    case ML_T_UNWIND_CHECK: return get_unwind_check(r, rec);
    case ML_T_END: return get_end(r, rec);
    default: return -1;
    }
}

static int corrupt(ml_reader_t *r, size_t start) {
    return fail(r, -EINVAL,
                "corrupt trace: record at offset %zu of the chunk at file offset %" PRIu64, start,
                r->chunk_offset);
}

int ml_reader_next(ml_reader_t *r, ml_record_t *rec) {
    for (;;) {
        if (r->pos >= r->raw_len) {
            int rc = next_chunk(r);
            if (rc <= 0) return rc;
            continue;
        }
        size_t start = r->pos;
        uint8_t tag = r->raw[r->pos++];
        r->strings_len = 0;
        if (tag == ML_T_TIME || tag == ML_T_THREAD_SWITCH) {
            if (!get_u32(r, tag == ML_T_TIME ? &r->st.time_ms : &r->st.thread)) return corrupt(r, start);
            continue;
        }
        clear_record(rec, tag);
        uint8_t out_tag;
        int ok = get_body(r, tag, rec, &out_tag);
        if (ok < 0)
            return fail(r, -EINVAL,
                        "corrupt trace: unknown record tag 0x%02x at offset %zu of the chunk at "
                        "file offset %" PRIu64,
                        tag, start, r->chunk_offset);
        if (!ok) return corrupt(r, start);
        rec->tag = out_tag;
        rec->time_ms = r->st.time_ms;
        rec->thread = r->st.thread;
        return 1;
    }
}

/* ------------------------------------------------------------------------- */
/* The analysis snapshot                                                     */
/* ------------------------------------------------------------------------- */

static int pread_full(int fd, void *buf, size_t len, uint64_t off) {
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return -EIO;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

/* Re-reads the blocks before the snapshot (the header, every chunk) and
 * compares their checksum with the trailer's: a snapshot only stands for
 * the records it was saved with. */
static int check_body(ml_reader_t *r, uint64_t end, uint64_t want) {
    size_t cap = 65536;
    uint8_t *buf = malloc(cap);
    if (!buf) return fail(r, -ENOMEM, "out of memory");
    int rc = pread_full(r->fd, buf, ML_TRACE_HEADER_LEN, 0);
    uint64_t h = ml__fold_hash(0, buf, ML_TRACE_HEADER_LEN), pos = ML_TRACE_HEADER_LEN;
    while (rc == 0 && pos < end) {
        if (end - pos < ML_CHUNK_HEADER_LEN) break;
        rc = pread_full(r->fd, buf, ML_CHUNK_HEADER_LEN, pos);
        if (rc < 0) break;
        uint64_t n = ML_CHUNK_HEADER_LEN + (uint64_t)ml__get_le32(buf + 4);
        if (ml__get_le32(buf) != ML_CHUNK_MAGIC || n > end - pos) break;
        if (n > cap) {
            uint8_t *p = realloc(buf, n);
            if (!p) {
                free(buf);
                return fail(r, -ENOMEM, "out of memory");
            }
            buf = p;
            cap = n;
        }
        rc = pread_full(r->fd, buf + ML_CHUNK_HEADER_LEN, n - ML_CHUNK_HEADER_LEN,
                        pos + ML_CHUNK_HEADER_LEN);
        h = ml__fold_hash(h, buf, n);
        pos += n;
    }
    free(buf);
    if (rc < 0) return fail(r, rc, "read error: %s", strerror(-rc));
    if (pos != end || h != want)
        return fail(r, -EINVAL, "corrupt trace: the records do not match the checksum the collector "
                                "wrote");
    return 0;
}

/* The analysis trailer of a file that does not end with one: a save of
 * advice that was cut short (a crash in its one write) leaves the advice's
 * start after it. Walks the block headers from the start (one 16-byte read
 * per chunk, no decompression) to the last analysis trailer, and accepts it
 * only when nothing but a block cut short follows it. -ENOENT otherwise. */
static int walk_to_trailer(ml_reader_t *r, uint64_t *tpos) {
    uint64_t pos = ML_TRACE_HEADER_LEN, found = 0;
    uint8_t h[ML_CHUNK_HEADER_LEN];
    while (pos + ML_CHUNK_HEADER_LEN <= r->size) {
        if (pread_full(r->fd, h, sizeof h, pos) < 0) return -ENOENT;
        uint32_t magic = ml__get_le32(h);
        uint64_t n;
        if (magic == ML_CHUNK_MAGIC && !found) {
            n = ML_CHUNK_HEADER_LEN + (uint64_t)ml__get_le32(h + 4);
        } else if (magic == ML_SNAPSHOT_MAGIC) {
            n = ML_CHUNK_HEADER_LEN + (uint64_t)ml__get_le32(h + 4);
        } else if (magic == ML_TRAILER_MAGIC && ml__get_le32(h + 4) == 1) {
            n = ML_TRAILER_LEN;
            if (pos + n <= r->size) found = pos;
        } else if (magic == ML_TRAILER_MAGIC && ml__get_le32(h + 4) == ML_ADVICE_TRAILER_VERSION) {
            n = ML_TRAILER_LEN;
        } else {
            return -ENOENT; /* not a block cut short: something else */
        }
        if (pos + n > r->size) break; /* the block cut short */
        pos += n;
    }
    if (!found || pos == r->size) return -ENOENT; /* nothing was cut: no trailer at the end */
    *tpos = found;
    return 0;
}

/* Where the trailers are. The snapshot's trailer ("MLIX" 1) is the file's
 * last 24 bytes, or, when `memlens report` saved strategy advice after it,
 * the 24 bytes before the advice block, whose own trailer ("MLIX" 2) is then
 * the last 24 bytes. Sets *tpos to the snapshot trailer's offset and, when
 * there is advice, *adv_off and *adv_key (else both 0). Returns 0, -ENOENT
 * when the file has no trailer, or an error (message in r->err). */
static int find_trailers(ml_reader_t *r, uint64_t *tpos, uint64_t *adv_off, uint64_t *adv_key) {
    uint8_t t[ML_TRAILER_LEN];
    *adv_off = *adv_key = 0;
    if (r->minor < 3 || r->size < ML_TRACE_HEADER_LEN + ML_CHUNK_HEADER_LEN + ML_TRAILER_LEN)
        return -ENOENT;
    uint64_t pos = r->size - ML_TRAILER_LEN;
    int rc = pread_full(r->fd, t, sizeof t, pos);
    if (rc < 0) return fail(r, rc, "read error at offset %" PRIu64 ": %s", pos, strerror(-rc));
    if (ml__get_le32(t) != ML_TRAILER_MAGIC || (ml__get_le32(t + 4) != 1 &&
                                                ml__get_le32(t + 4) != ML_ADVICE_TRAILER_VERSION))
        return walk_to_trailer(r, tpos);
    if (ml__get_le32(t + 4) == ML_ADVICE_TRAILER_VERSION) {
        uint64_t off = ml__get_le64(t + 16);
        if (off < ML_TRACE_HEADER_LEN + ML_CHUNK_HEADER_LEN + ML_TRAILER_LEN ||
            off > pos - ML_CHUNK_HEADER_LEN)
            return fail(r, -EINVAL, "corrupt trace: the advice trailer points outside the file (%" PRIu64 ")",
                        off);
        *adv_off = off;
        *adv_key = ml__get_le64(t + 8);
        pos = off - ML_TRAILER_LEN;
        rc = pread_full(r->fd, t, sizeof t, pos);
        if (rc < 0) return fail(r, rc, "read error at offset %" PRIu64 ": %s", pos, strerror(-rc));
        if (ml__get_le32(t) != ML_TRAILER_MAGIC || ml__get_le32(t + 4) != 1)
            return fail(r, -EINVAL, "corrupt trace: no analysis trailer before the advice at offset %" PRIu64,
                        off);
    } else if (ml__get_le32(t + 4) != 1) {
        return -ENOENT;
    }
    *tpos = pos;
    return 0;
}

/* Reads the block ("MLSN" header + zstd frame) at `off` that must end at
 * `end`, and decompresses it into a malloc'd *data. `what` names it in
 * messages. The frame must say it holds raw_len bytes, or, with
 * `streamed` (the analysis snapshot, which the collector writes as a
 * stream: ml_writer_snapshot_begin), may leave its size unsaid; either way
 * it must decompress to exactly raw_len bytes, at most max_raw (a header
 * that says more is refused before anything is allocated). */
static int read_block(ml_reader_t *r, uint64_t off, uint64_t end, const char *what, bool streamed,
                      uint32_t max_raw, void **data, size_t *len, uint32_t *version) {
    uint8_t h[ML_CHUNK_HEADER_LEN];
    int rc = pread_full(r->fd, h, sizeof h, off);
    if (rc < 0) return fail(r, rc, "read error at offset %" PRIu64 ": %s", off, strerror(-rc));
    uint32_t comp_len = ml__get_le32(h + 4), raw_len = ml__get_le32(h + 8);
    if (ml__get_le32(h) != ML_SNAPSHOT_MAGIC || off + ML_CHUNK_HEADER_LEN + comp_len != end ||
        raw_len == 0 || raw_len > max_raw)
        return fail(r, -EINVAL, "corrupt trace: bad %s at offset %" PRIu64, what, off);
    uint8_t *comp = malloc(comp_len ? comp_len : 1), *raw = malloc(raw_len);
    if (!comp || !raw) {
        free(comp);
        free(raw);
        return fail(r, -ENOMEM, "out of memory");
    }
    rc = pread_full(r->fd, comp, comp_len, off + ML_CHUNK_HEADER_LEN);
    size_t n = 0;
    if (rc == 0) {
        unsigned long long content = ZSTD_getFrameContentSize(comp, comp_len);
        bool sound = content == raw_len || (streamed && content == ZSTD_CONTENTSIZE_UNKNOWN);
        n = sound ? ZSTD_decompressDCtx(r->dctx, raw, raw_len, comp, comp_len) : 0;
    }
    free(comp);
    if (rc < 0 || ZSTD_isError(n) || n != raw_len) {
        free(raw);
        return fail(r, rc < 0 ? rc : -EINVAL, "corrupt trace: the %s at offset %" PRIu64 " does not decompress",
                    what, off);
    }
    *data = raw;
    *len = raw_len;
    if (version) *version = ml__get_le32(h + 12);
    return 0;
}

int ml_reader_snapshot(ml_reader_t *r, void **data, size_t *len, uint32_t *version) {
    *data = NULL;
    *len = 0;
    uint64_t tpos, adv_off, adv_key;
    int rc = find_trailers(r, &tpos, &adv_off, &adv_key);
    if (rc < 0) return rc;
    uint8_t t[ML_TRAILER_LEN];
    if ((rc = pread_full(r->fd, t, sizeof t, tpos)) < 0)
        return fail(r, rc, "read error at offset %" PRIu64 ": %s", tpos, strerror(-rc));
    uint64_t off = ml__get_le64(t + 16);
    if (off < ML_TRACE_HEADER_LEN || off > tpos - ML_CHUNK_HEADER_LEN)
        return fail(r, -EINVAL, "corrupt trace: the trailer points outside the file (%" PRIu64 ")",
                    off);
    rc = check_body(r, off, ml__get_le64(t + 8));
    if (rc < 0) return rc;
    return read_block(r, off, tpos, "analysis snapshot", true, ML_SNAPSHOT_MAX_RAW, data, len, version);
}

int ml_reader_records_hash(ml_reader_t *r, uint64_t *hash) {
    uint64_t tpos, adv_off, adv_key;
    int rc = find_trailers(r, &tpos, &adv_off, &adv_key);
    if (rc < 0) return rc;
    uint8_t t[ML_TRAILER_LEN];
    if ((rc = pread_full(r->fd, t, sizeof t, tpos)) < 0)
        return fail(r, rc, "read error at offset %" PRIu64 ": %s", tpos, strerror(-rc));
    uint64_t off = ml__get_le64(t + 16);
    if (off < ML_TRACE_HEADER_LEN || off > tpos - ML_CHUNK_HEADER_LEN)
        return fail(r, -EINVAL, "corrupt trace: the trailer points outside the file (%" PRIu64 ")",
                    off);
    if ((rc = check_body(r, off, ml__get_le64(t + 8))) < 0) return rc;
    *hash = ml__get_le64(t + 8);
    return 0;
}

uint64_t ml_reader_recorded_size(ml_reader_t *r) {
    uint64_t tpos, adv_off = 0, adv_key;
    if (find_trailers(r, &tpos, &adv_off, &adv_key) < 0) return r->size;
    return tpos + ML_TRAILER_LEN; /* advice, or a save of it cut short, follows */
}

int ml_reader_advice(ml_reader_t *r, void **data, size_t *len, uint64_t *key, uint32_t *version) {
    *data = NULL;
    *len = 0;
    uint64_t tpos, adv_off, adv_key;
    int rc = find_trailers(r, &tpos, &adv_off, &adv_key);
    if (rc < 0) return rc;
    if (!adv_off) return -ENOENT;
    *key = adv_key;
    return read_block(r, adv_off, r->size - ML_TRAILER_LEN, "saved strategy advice", false, ML_ADVICE_MAX_RAW,
                      data, len, version);
}

/* ------------------------------------------------------------------------- */
/* Saving advice in a trace                                                  */
/* ------------------------------------------------------------------------- */

/* The advice goes in place, at the end of the file, under the rules of
 * docs/security.md: never through a symbolic link, only into a regular file
 * with one name that belongs to the caller and whose owner may write it
 * (mode u+w: a trace made read-only stays unchanged, even for root), under
 * an exclusive lock, and only while the file still has the records the
 * advice was keyed on. The mode stays what it was (0600 for memlens' own
 * traces). The old advice, if any, is cut off first, then the new block and
 * its trailer go in one write: a crash between leaves a trace without
 * advice, or with a partial tail that readers skip (no trailer at the end,
 * so the next report replays the records and writes the advice again). */
int ml_trace_save_advice(const char *path, uint64_t records_hash, const void *data, size_t len,
                         uint32_t version, uint64_t key, char *err, size_t errlen) {
    if (len == 0 || len > ML_ADVICE_MAX_RAW) return -EINVAL;
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        if (err) snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1 ||
        !(st.st_mode & S_IWUSR)) {
        if (err) snprintf(err, errlen, "%s: not a trace file of ours that we may write", path);
        close(fd);
        return -EPERM;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        if (err) snprintf(err, errlen, "%s: locked by another process", path);
        close(fd);
        return -e;
    }
    ml_reader_t *r;
    int rc = reader_from_fd(fd, path, &r, err, errlen); /* takes the fd (and the lock) */
    if (rc < 0) return rc;
    /* The trailer must still hold the records' checksum the advice was keyed
     * on (the caller had it checked against the records: reading them all
     * again is not needed, as every reader checks them against it). */
    uint64_t tpos = 0, adv_off, adv_key;
    uint8_t t0[ML_TRAILER_LEN];
    rc = find_trailers(r, &tpos, &adv_off, &adv_key);
    if (rc == 0 && (rc = pread_full(r->fd, t0, sizeof t0, tpos)) == 0 && ml__get_le64(t0 + 8) != records_hash)
        rc = -ESTALE; /* the file changed since it was read */
    uint8_t *buf = NULL;
    size_t total = 0;
    if (rc == 0) {
        size_t bound = ZSTD_compressBound(len) + ML_CHUNK_HEADER_LEN + ML_TRAILER_LEN;
        buf = malloc(bound);
        if (!buf) rc = -ENOMEM;
        /* with the content checksum, as the chunks: damage is refused, not read */
        ZSTD_CCtx *cctx = buf ? ZSTD_createCCtx() : NULL;
        if (buf && !cctx) rc = -ENOMEM;
        size_t n = 0;
        if (cctx) {
            ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
            ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
            n = ZSTD_compress2(cctx, buf + ML_CHUNK_HEADER_LEN, bound - ML_CHUNK_HEADER_LEN - ML_TRAILER_LEN,
                               data, len);
            if (ZSTD_isError(n)) rc = -EIO;
            ZSTD_freeCCtx(cctx);
        }
        if (rc == 0) {
            uint64_t at = tpos + ML_TRAILER_LEN; /* where the advice goes */
            ml__put_le32(buf, ML_SNAPSHOT_MAGIC);
            ml__put_le32(buf + 4, (uint32_t)n);
            ml__put_le32(buf + 8, (uint32_t)len);
            ml__put_le32(buf + 12, version);
            uint8_t *t = buf + ML_CHUNK_HEADER_LEN + n;
            ml__put_le32(t, ML_TRAILER_MAGIC);
            ml__put_le32(t + 4, ML_ADVICE_TRAILER_VERSION);
            ml__put_le64(t + 8, key);
            ml__put_le64(t + 16, at);
            total = ML_CHUNK_HEADER_LEN + n + ML_TRAILER_LEN;
            if (r->size > at && ftruncate(r->fd, (off_t)at) < 0) rc = -errno;
            for (size_t done = 0; rc == 0 && done < total;) {
                ssize_t w = pwrite(r->fd, buf + done, total - done, (off_t)(at + done));
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) {
                    rc = w < 0 ? -errno : -EIO;
                    if (ftruncate(r->fd, (off_t)at) < 0) { /* the trace stays as it was, without advice */
                    }
                    break;
                }
                done += (size_t)w;
            }
        }
    }
    free(buf);
    if (rc < 0 && err)
        snprintf(err, errlen, "%s: %s", path,
                 rc == -ESTALE ? "the trace changed while the advisor ran"
                 : rc == -ENOENT ? "the trace has no analysis trailer (advice is saved only after one)"
                 : r->err[0] ? r->err
                             : strerror(-rc));
    ml_reader_close(r);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* State                                                                     */
/* ------------------------------------------------------------------------- */

const char *ml_reader_error(const ml_reader_t *r) {
    return r->err;
}
bool ml_reader_truncated(const ml_reader_t *r) {
    return r->truncated;
}
bool ml_reader_complete(const ml_reader_t *r) {
    return r->complete;
}
void ml_reader_version(const ml_reader_t *r, unsigned *major, unsigned *minor) {
    *major = r->major;
    *minor = r->minor;
}
uint64_t ml_reader_size(const ml_reader_t *r) {
    return r->size;
}
uint64_t ml_reader_offset(const ml_reader_t *r) {
    return r->offset;
}

void ml_reader_close(ml_reader_t *r) {
    if (!r) return;
    close(r->fd);
    ZSTD_freeDCtx(r->dctx);
    free(r->comp);
    free(r->raw);
    free(r->strings);
    free(r);
}
