/* ml_trace_io.c - .mlt writer, streaming reader and text dump. */
#include "ml_trace_io.h"
#include "ml_event.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define CHUNK_TARGET (4u << 20) /* flush a chunk once this many raw bytes are pending */

/* ------------------------------------------------------------------------- */
/* Little-endian and LEB128 helpers                                          */
/* ------------------------------------------------------------------------- */

static void put_le16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t get_le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

/* The checksum of the bytes before the snapshot: one 64-bit hash per
 * written block (the file header, each chunk with its header), folded in
 * order. Word at a time, several GB/s: checking a trace costs a read of it,
 * not a decode. */
static uint64_t block_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 32);
}

static uint64_t fold_hash(uint64_t acc, const uint8_t *p, size_t n) {
    return (acc ^ block_hash(p, n)) * 0x100000001b3ull + 0x2545f4914f6cdd1dull;
}

static uint64_t zigzag(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static int64_t unzigzag(uint64_t v) {
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* ------------------------------------------------------------------------- */
/* Address model                                                             */
/* ------------------------------------------------------------------------- */

/* Most of a heap trace's entropy is in its addresses, yet allocators are
 * predictable: malloc(n) returns the block of n's size class that was freed
 * last (glibc's tcache and fast bins are LIFO per class), and programs free
 * what they allocated last. Writer and reader run the same model, reset at
 * every chunk, and a pointer the model predicts is written as a one-byte
 * code instead of a delta:
 *
 *   - per size class (keyed by the usable size the allocator reported), the
 *     last CLASS_DEPTH freed addresses, most recent first: codes 0..15;
 *   - the last RECENT freed addresses of any class: codes 4..4+RECENT-1;
 *   - the last RECENT allocations still live, with their usable sizes: a free
 *     of one of them is its index, and needs no size.
 *
 * Loops then encode to identical bytes every iteration, which zstd turns
 * into almost nothing, and no address is lost. After any alloc of p, p leaves
 * the freed lists; after any free of p it enters them. */
#define RECENT 16
#define CLASSES 1024
#define CLASS_DEPTH 16
#define CODE_GLOBAL CLASS_DEPTH

typedef struct {
    uint64_t usable;
    uint64_t ptr[CLASS_DEPTH];
    uint8_t n;
} size_class_t;

/* Pointers the model does not predict are written as a delta from one of
 * four cursors -- the one nearest to the pointer, or the least recently used
 * when none is within 1 MiB -- and the cursor index rides in the kind byte's
 * high nibble. A program walking several regions at once (a table and its
 * entries, two arenas) then gets small repeating deltas for each. */
#define CURSORS 4
typedef struct {
    uint64_t v[CURSORS];
    uint8_t age[CURSORS];
} cursors_t;

static int cursor_pick(const cursors_t *c, uint64_t p) {
    int best = 0, lru = 0;
    uint64_t bd = UINT64_MAX;
    for (int i = 0; i < CURSORS; i++) {
        uint64_t d = p > c->v[i] ? p - c->v[i] : c->v[i] - p;
        if (d < bd) bd = d, best = i;
        if (c->age[i] > c->age[lru]) lru = i;
    }
    return bd < (1u << 20) ? best : lru;
}

/* A pointer within 4 KiB of a cursor: a stream of such frees
 * (walking an array of blocks) compresses better as cursor deltas. */
static bool near_cursor(const cursors_t *c, uint64_t p) {
    for (int i = 0; i < CURSORS; i++) {
        uint64_t d = p > c->v[i] ? p - c->v[i] : c->v[i] - p;
        if (d < 4096) return true;
    }
    return false;
}

static void cursor_set(cursors_t *c, int i, uint64_t v) {
    c->v[i] = v;
    for (int j = 0; j < CURSORS; j++)
        if (c->age[j] < 255) c->age[j]++;
    c->age[i] = 0;
}

typedef struct {
    cursors_t alloc_cur, free_cur;
    uint64_t freed[RECENT];
    uint8_t nfreed, nlive;
    struct {
        uint64_t ptr, usable;
    } live[RECENT];
    size_class_t cls[CLASSES];
    size_class_t live_cls[CLASSES]; /* per usable size, the last blocks allocated, still live */
} ml_recency_t;

static unsigned class_of(uint64_t usable) {
    if (usable < 16 * CLASSES) return (unsigned)(usable >> 4);
    return (unsigned)((usable * 0x9e3779b97f4a7c15ull) >> 54);
}

static int find_u64(const uint64_t *v, int n, uint64_t p) {
    for (int i = 0; i < n; i++)
        if (v[i] == p) return i;
    return -1;
}

static void drop_u64(uint64_t *v, uint8_t *n, int k) {
    memmove(v + k, v + k + 1, (size_t)(*n - k - 1) * sizeof *v);
    (*n)--;
}

static void push_u64(uint64_t *v, uint8_t *n, int cap, uint64_t p) {
    int keep = *n < cap ? *n : cap - 1;
    memmove(v + 1, v, (size_t)keep * sizeof *v);
    v[0] = p;
    *n = (uint8_t)(keep + 1);
}

/* The code that predicts `ptr` for an allocation of `usable` bytes, or -1. */
static int model_predict(const ml_recency_t *m, uint64_t usable, uint64_t ptr) {
    const size_class_t *c = &m->cls[class_of(usable)];
    if (c->usable == usable) {
        int k = find_u64(c->ptr, c->n, ptr);
        if (k >= 0) return k;
    }
    int k = find_u64(m->freed, m->nfreed, ptr);
    return k >= 0 ? CODE_GLOBAL + k : -1;
}

/* The address a code stands for (the reader's side), or 0 if invalid. */
static uint64_t model_resolve(const ml_recency_t *m, uint64_t usable, unsigned code) {
    const size_class_t *c = &m->cls[class_of(usable)];
    if (code < CODE_GLOBAL) return c->usable == usable && code < c->n ? c->ptr[code] : 0;
    code -= CODE_GLOBAL;
    return code < m->nfreed ? m->freed[code] : 0;
}

static void model_alloc(ml_recency_t *m, uint64_t ptr, uint64_t usable) {
    size_class_t *c = &m->cls[class_of(usable)];
    int k;
    if (c->usable == usable && (k = find_u64(c->ptr, c->n, ptr)) >= 0) drop_u64(c->ptr, &c->n, k);
    size_class_t *lc = &m->live_cls[class_of(usable)];
    if (lc->usable != usable) {
        lc->usable = usable;
        lc->n = 0;
    }
    push_u64(lc->ptr, &lc->n, CLASS_DEPTH, ptr);
    if ((k = find_u64(m->freed, m->nfreed, ptr)) >= 0) drop_u64(m->freed, &m->nfreed, k);
    int keep = m->nlive < RECENT ? m->nlive : RECENT - 1;
    memmove(m->live + 1, m->live, (size_t)keep * sizeof m->live[0]);
    m->live[0].ptr = ptr;
    m->live[0].usable = usable;
    m->nlive = (uint8_t)(keep + 1);
}

static int model_find_live(const ml_recency_t *m, uint64_t ptr) {
    for (int i = 0; i < m->nlive; i++)
        if (m->live[i].ptr == ptr) return i;
    return -1;
}

static void model_drop_live(ml_recency_t *m, int k) {
    memmove(m->live + k, m->live + k + 1, (size_t)(m->nlive - k - 1) * sizeof m->live[0]);
    m->nlive--;
}

/* Position of a live block in its size class's list, or -1. */
static int model_find_live_class(const ml_recency_t *m, uint64_t ptr, uint64_t usable) {
    const size_class_t *lc = &m->live_cls[class_of(usable)];
    return usable && lc->usable == usable ? find_u64(lc->ptr, lc->n, ptr) : -1;
}

static void model_free(ml_recency_t *m, uint64_t ptr, uint64_t usable) {
    push_u64(m->freed, &m->nfreed, RECENT, ptr);
    if (!usable) return;
    size_class_t *lc = &m->live_cls[class_of(usable)];
    int k;
    if (lc->usable == usable && (k = find_u64(lc->ptr, lc->n, ptr)) >= 0)
        drop_u64(lc->ptr, &lc->n, k);
    size_class_t *c = &m->cls[class_of(usable)];
    if (c->usable != usable) {
        c->usable = usable;
        c->n = 0;
    }
    push_u64(c->ptr, &c->n, CLASS_DEPTH, ptr);
}

/* ------------------------------------------------------------------------- */
/* Writer                                                                    */
/* ------------------------------------------------------------------------- */

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
    uint64_t body_hash; /* fold_hash of every block written */
    /* delta state */
    uint32_t time_ms, thread;
    uint64_t prev_ptr;
    uint32_t prev_node;
    uint64_t prev_pc;
    ml_recency_t rec;
};

static int write_all(int fd, const void *buf, size_t len) {
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
    put_u(w, zigzag(v));
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

int ml_writer_new(int fd, int level, ml_writer_t **out) {
    ml_writer_t *w = calloc(1, sizeof *w);
    if (!w) return -ENOMEM;
    w->fd = fd;
    w->raw_cap = CHUNK_TARGET + 65536;
    w->raw = malloc(w->raw_cap);
    w->cctx = ZSTD_createCCtx();
    if (!w->raw || !w->cctx) goto fail;
    ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
    uint8_t hdr[ML_TRACE_HEADER_LEN] = {0};
    memcpy(hdr, ML_TRACE_MAGIC, ML_TRACE_MAGIC_LEN);
    put_le16(hdr + 8, ML_TRACE_MAJOR);
    put_le16(hdr + 10, ML_TRACE_MINOR);
    put_le32(hdr + 12, 0);
    int rc = write_all(fd, hdr, sizeof hdr);
    if (rc < 0) {
        ml_writer_free(w);
        return rc;
    }
    w->bytes = sizeof hdr;
    w->body_hash = fold_hash(0, hdr, sizeof hdr);
    w->time_ms = 0;
    w->thread = 0;
    *out = w;
    return 0;
fail:
    ml_writer_free(w);
    return -ENOMEM;
}

int ml_writer_flush(ml_writer_t *w) {
    if (w->error) return w->error;
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
    if (ZSTD_isError(n)) return w->error = -EIO;
    put_le32(w->comp, ML_CHUNK_MAGIC);
    put_le32(w->comp + 4, (uint32_t)n);
    put_le32(w->comp + 8, (uint32_t)w->raw_len);
    put_le32(w->comp + 12, w->nrecords);
    /* One write per chunk: a crash leaves either the whole chunk or a short
     * file that the reader recognises as truncated. */
    int rc = write_all(w->fd, w->comp, n + ML_CHUNK_HEADER_LEN);
    if (rc < 0) return w->error = rc;
    w->bytes += n + ML_CHUNK_HEADER_LEN;
    w->body_hash = fold_hash(w->body_hash, w->comp, n + ML_CHUNK_HEADER_LEN);
    w->raw_len = 0;
    w->nrecords = 0;
    /* Each chunk decodes on its own: delta state restarts. */
    w->prev_ptr = 0;
    w->prev_node = 0;
    w->prev_pc = 0;
    memset(&w->rec, 0, sizeof w->rec);
    w->time_ms = 0;
    w->thread = 0;
    return 0;
}

static size_t record_bound(const ml_record_t *r) {
    size_t n = 64;
    switch (r->tag) {
    case ML_T_MODULE:
        n += str_len_capped(r->u.module.path) + r->u.module.build_id_len + 16 * 32;
        break;
    case ML_T_THREAD:
        n += str_len_capped(r->u.thread.name);
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

int ml_writer_add(ml_writer_t *w, const ml_record_t *r) {
    if (w->error) return w->error;
    if (w->raw_len >= CHUNK_TARGET) {
        int rc = ml_writer_flush(w);
        if (rc < 0) return rc;
    }
    if (reserve(w, record_bound(r)) < 0) return w->error = -ENOMEM;
    if (r->time_ms != w->time_ms) {
        put_u8(w, ML_T_TIME);
        put_u(w, r->time_ms);
        w->time_ms = r->time_ms;
        w->nrecords++;
    }
    if (r->thread != w->thread) {
        put_u8(w, ML_T_THREAD_SWITCH);
        put_u(w, r->thread);
        w->thread = r->thread;
        w->nrecords++;
    }
    put_u8(w, r->tag);
    w->nrecords++;
    switch (r->tag) {
    case ML_T_ALLOC: {
        uint64_t usable = r->u.alloc.usable > r->u.alloc.size ? r->u.alloc.usable : r->u.alloc.size;
        int code = model_predict(&w->rec, usable, r->u.alloc.ptr);
        if (code >= 0) w->raw[w->raw_len - 1] = ML_T_ALLOC_RECENT;
        /* New memory carved from a region follows the previous new chunk
         * there: alloc cursors hold chunk ends, so the delta is then 0. */
        int cur = code >= 0 ? 0 : cursor_pick(&w->rec.alloc_cur, r->u.alloc.ptr);
        put_u8(w, (uint8_t)(r->u.alloc.kind | cur << 4));
        put_u8(w, r->u.alloc.flags);
        put_u(w, r->u.alloc.size);
        put_u(w, usable - r->u.alloc.size);
        put_u(w, r->u.alloc.stack);
        if (code >= 0) {
            put_u8(w, (uint8_t)code);
        } else {
            put_s(w, (int64_t)(r->u.alloc.ptr - w->rec.alloc_cur.v[cur]));
            cursor_set(&w->rec.alloc_cur, cur, r->u.alloc.ptr + usable + 8);
        }
        model_alloc(&w->rec, r->u.alloc.ptr, usable);
        w->prev_ptr = r->u.alloc.ptr;
        break;
    }
    case ML_T_FREE: {
        int k = model_find_live(&w->rec, r->u.alloc.ptr);
        uint64_t usable = r->u.alloc.usable;
        if (k >= 0) {
            w->raw[w->raw_len - 1] = ML_T_FREE_RECENT;
            put_u8(w, r->u.alloc.kind);
            put_u8(w, (uint8_t)k);
            usable = w->rec.live[k].usable;
            model_drop_live(&w->rec, k);
        } else if (!near_cursor(&w->rec.free_cur, r->u.alloc.ptr) &&
                   (k = model_find_live_class(&w->rec, r->u.alloc.ptr, usable)) >= 0) {
            /* One of the last blocks of its size class: the size and a byte. */
            w->raw[w->raw_len - 1] = ML_T_FREE_CLASS;
            put_u8(w, r->u.alloc.kind);
            put_u(w, usable);
            put_u8(w, (uint8_t)k);
        } else {
            int cur = cursor_pick(&w->rec.free_cur, r->u.alloc.ptr);
            put_u8(w, (uint8_t)(r->u.alloc.kind | cur << 4));
            put_s(w, (int64_t)(r->u.alloc.ptr - w->rec.free_cur.v[cur]));
            cursor_set(&w->rec.free_cur, cur, r->u.alloc.ptr);
            put_u(w, usable);
        }
        model_free(&w->rec, r->u.alloc.ptr, usable);
        w->prev_ptr = r->u.alloc.ptr;
        break;
    }
    case ML_T_REALLOC_FAIL:
        put_s(w, (int64_t)(r->u.alloc.ptr - w->prev_ptr));
        w->prev_ptr = r->u.alloc.ptr;
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
    case ML_T_NODE:
        /* Nodes come mostly in id order, a child right after its parent, and
         * neighbouring return addresses lie in the same module: deltas. */
        put_s(w, (int64_t)r->u.node.id - (int64_t)w->prev_node - 1);
        put_s(w, (int64_t)r->u.node.id - (int64_t)r->u.node.parent);
        put_s(w, (int64_t)(r->u.node.pc - w->prev_pc));
        w->prev_node = r->u.node.id;
        w->prev_pc = r->u.node.pc;
        break;
    case ML_T_MODULE: {
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
        break;
    }
    case ML_T_MODULE_UNLOAD:
        put_u(w, r->u.module.base);
        break;
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
        break;
    case ML_T_PROC_EXIT:
        put_u(w, r->u.proc_exit.nested_skipped);
        break;
    case ML_T_BLOCK_REACH:
        put_u8(w, r->u.block_reach.reach);
        put_s(w, (int64_t)(r->u.block_reach.ptr - w->prev_ptr));
        w->prev_ptr = r->u.block_reach.ptr;
        break;
    case ML_T_REACH_SCAN: {
        const typeof(r->u.reach_scan) *q = &r->u.reach_scan;
        put_s(w, q->status);
        put_u(w, q->root_bytes);
        put_u(w, q->heap_bytes);
        put_u(w, q->blocks);
        put_u(w, q->reachable);
        put_u(w, q->indirect);
        put_u(w, q->definite);
        put_u(w, q->duration_us);
        break;
    }
    case ML_T_PROCESS: {
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
        break;
    }
    case ML_T_GPU_ALLOC:
    case ML_T_GPU_FREE: {
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
        break;
    }
    case ML_T_GPU_POOL: {
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
        break;
    }
    case ML_T_UNWIND_CHECK: {
        const typeof(r->u.unwind_check) *q = &r->u.unwind_check;
        put_u(w, q->stacks);
        put_u(w, q->mismatches);
        put_u(w, q->fallbacks);
        put_u(w, q->reused);
        put_u(w, q->first_frame);
        put_u(w, q->fast_pc);
        put_u(w, q->full_pc);
        break;
    }
    case ML_T_END: {
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
        break;
    }
    default:
        return w->error = -EINVAL;
    }
    return 0;
}

uint64_t ml_writer_bytes(const ml_writer_t *w) {
    return w->bytes + 0;
}

static void put_le64(uint8_t *p, uint64_t v) {
    put_le32(p, (uint32_t)v);
    put_le32(p + 4, (uint32_t)(v >> 32));
}

int ml_writer_add_snapshot(ml_writer_t *w, const void *data, size_t len, uint32_t version) {
    int rc = ml_writer_flush(w);
    if (rc < 0) return rc;
    if (len == 0 || len > ML_SNAPSHOT_MAX_RAW) return -EINVAL;
    size_t bound = ZSTD_compressBound(len) + ML_CHUNK_HEADER_LEN + ML_TRAILER_LEN;
    uint8_t *buf = malloc(bound);
    if (!buf) return -ENOMEM;
    size_t n = ZSTD_compress2(w->cctx, buf + ML_CHUNK_HEADER_LEN,
                              bound - ML_CHUNK_HEADER_LEN - ML_TRAILER_LEN, data, len);
    if (ZSTD_isError(n)) {
        free(buf);
        return -EIO;
    }
    put_le32(buf, ML_SNAPSHOT_MAGIC);
    put_le32(buf + 4, (uint32_t)n);
    put_le32(buf + 8, (uint32_t)len);
    put_le32(buf + 12, version);
    uint8_t *t = buf + ML_CHUNK_HEADER_LEN + n;
    put_le32(t, ML_TRAILER_MAGIC);
    put_le32(t + 4, 1);
    put_le64(t + 8, w->body_hash);
    put_le64(t + 16, w->bytes);
    size_t total = ML_CHUNK_HEADER_LEN + n + ML_TRAILER_LEN;
    rc = write_all(w->fd, buf, total);
    free(buf);
    if (rc < 0) return w->error = rc;
    w->bytes += total;
    return 0;
}

int ml_writer_free(ml_writer_t *w) {
    if (!w) return 0;
    int rc = w->error ? w->error : ml_writer_flush(w);
    ZSTD_freeCCtx(w->cctx);
    free(w->raw);
    free(w->comp);
    free(w);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Reader                                                                    */
/* ------------------------------------------------------------------------- */

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
    char err[512];
    uint32_t time_ms, thread;
    uint64_t prev_ptr;
    uint32_t prev_node;
    uint64_t prev_pc;
    ml_recency_t rec;
};

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

int ml_reader_open(const char *path, ml_reader_t **out, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (err) snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (err) snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -EINVAL;
    }
    uint8_t hdr[ML_TRACE_HEADER_LEN];
    size_t got;
    if (read_full(fd, hdr, sizeof hdr, &got) < 0 || got < sizeof hdr ||
        memcmp(hdr, ML_TRACE_MAGIC, ML_TRACE_MAGIC_LEN) != 0) {
        if (err) snprintf(err, errlen, "%s: not a memlens trace (bad magic or too short)", path);
        close(fd);
        return -EINVAL;
    }
    unsigned major = get_le16(hdr + 8), minor = get_le16(hdr + 10);
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
    int rc = read_full(r->fd, h, sizeof h, &got);
    if (rc < 0) return fail(r, rc, "read error at offset %" PRIu64 ": %s", r->offset, strerror(-rc));
    if (got == 0) return 0;
    if (got < sizeof h) {
        /* After the end record only a snapshot can follow: its loss is no
         * record's. */
        if (!r->complete) r->truncated = true;
        return 0;
    }
    uint32_t magic = get_le32(h), comp_len = get_le32(h + 4), raw_len = get_le32(h + 8);
    if ((magic == ML_SNAPSHOT_MAGIC || magic == ML_TRAILER_MAGIC) && r->minor >= 3) {
        /* The analysis snapshot and its trailer follow the records: not
         * records themselves (ml_reader_snapshot() reads them). */
        uint64_t skip = magic == ML_TRAILER_MAGIC ? ML_TRAILER_LEN - ML_CHUNK_HEADER_LEN : comp_len;
        if (r->offset + ML_CHUNK_HEADER_LEN + skip > r->size) {
            if (!r->complete) r->truncated = true; /* a cut snapshot loses no record */
            return 0;
        }
        if (lseek(r->fd, (off_t)skip, SEEK_CUR) < 0)
            return fail(r, -errno, "seek error at offset %" PRIu64 ": %s", r->offset, strerror(errno));
        r->offset += ML_CHUNK_HEADER_LEN + skip;
        return load_chunk(r);
    }
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
    r->time_ms = 0;
    r->thread = 0;
    r->prev_ptr = 0;
    r->prev_node = 0;
    r->prev_pc = 0;
    memset(&r->rec, 0, sizeof r->rec);
    return 1;
}

#define CORRUPT()                                                                                  \
    fail(r, -EINVAL, "corrupt trace: record at offset %zu of the chunk at file offset %" PRIu64,  \
         start, r->chunk_offset)

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
    *v = unzigzag(x);
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

int ml_reader_next(ml_reader_t *r, ml_record_t *rec) {
    for (;;) {
        if (r->pos >= r->raw_len) {
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
            continue;
        }
        size_t start = r->pos;
        uint8_t tag = r->raw[r->pos++];
        r->strings_len = 0;
        /* The heap records, most of a trace, use the start of the union
         * only: clearing all 600 bytes of the record for each of them was a
         * tenth of the analysis time. */
        if ((tag >= ML_T_ALLOC && tag <= ML_T_FREE_CLASS) || tag == ML_T_NODE || tag == ML_T_BLOCK_REACH)
            memset(rec, 0, offsetof(ml_record_t, u) + sizeof rec->u.alloc);
        else if (tag != ML_T_TIME && tag != ML_T_THREAD_SWITCH)
            memset(rec, 0, sizeof *rec);
        int64_t d = 0;
        uint64_t v;
        bool ok = true;
        switch (tag) {
        case ML_T_TIME:
            if (!get_u32(r, &r->time_ms)) return CORRUPT();
            continue;
        case ML_T_THREAD_SWITCH:
            if (!get_u32(r, &r->thread)) return CORRUPT();
            continue;
        case ML_T_ALLOC:
        case ML_T_ALLOC_RECENT: {
            uint64_t slack = 0;
            uint8_t code = 0;
            ok = get_u8(r, &rec->u.alloc.kind) && get_u8(r, &rec->u.alloc.flags) &&
                 get_u(r, &rec->u.alloc.size) && get_u(r, &slack) &&
                 get_u32(r, &rec->u.alloc.stack);
            uint64_t usable = rec->u.alloc.size + slack;
            int cur = rec->u.alloc.kind >> 4;
            rec->u.alloc.kind &= 0x0f;
            if (ok && tag == ML_T_ALLOC_RECENT) {
                ok = get_u8(r, &code) && (rec->u.alloc.ptr = model_resolve(&r->rec, usable, code));
            } else if (ok) {
                ok = cur < CURSORS && get_s(r, &d);
                if (ok) {
                    rec->u.alloc.ptr = r->rec.alloc_cur.v[cur] + (uint64_t)d;
                    cursor_set(&r->rec.alloc_cur, cur, rec->u.alloc.ptr + usable + 8);
                }
            }
            if (ok) {
                rec->u.alloc.usable = usable;
                r->prev_ptr = rec->u.alloc.ptr;
                model_alloc(&r->rec, rec->u.alloc.ptr, usable);
            }
            tag = ML_T_ALLOC;
            break;
        }
        case ML_T_FREE:
        case ML_T_FREE_RECENT:
        case ML_T_FREE_CLASS: {
            uint8_t k = 0;
            ok = get_u8(r, &rec->u.alloc.kind);
            if (ok && tag == ML_T_FREE_CLASS) {
                ok = get_u(r, &rec->u.alloc.usable) && get_u8(r, &k);
                const size_class_t *lc = &r->rec.live_cls[class_of(rec->u.alloc.usable)];
                ok = ok && rec->u.alloc.usable && lc->usable == rec->u.alloc.usable && k < lc->n;
                if (ok) rec->u.alloc.ptr = lc->ptr[k];
            } else if (ok && tag == ML_T_FREE_RECENT) {
                ok = get_u8(r, &k) && k < r->rec.nlive;
                if (ok) {
                    rec->u.alloc.ptr = r->rec.live[k].ptr;
                    rec->u.alloc.usable = r->rec.live[k].usable;
                    model_drop_live(&r->rec, k);
                }
            } else if (ok) {
                int cur = rec->u.alloc.kind >> 4;
                rec->u.alloc.kind &= 0x0f;
                ok = cur < CURSORS && get_s(r, &d) && get_u(r, &rec->u.alloc.usable);
                if (ok) {
                    rec->u.alloc.ptr = r->rec.free_cur.v[cur] + (uint64_t)d;
                    cursor_set(&r->rec.free_cur, cur, rec->u.alloc.ptr);
                }
            }
            if (ok) {
                r->prev_ptr = rec->u.alloc.ptr;
                model_free(&r->rec, rec->u.alloc.ptr, rec->u.alloc.usable);
            }
            tag = ML_T_FREE;
            break;
        }
        case ML_T_REALLOC_FAIL:
            ok = get_s(r, &d);
            if (ok) rec->u.alloc.ptr = r->prev_ptr = r->prev_ptr + (uint64_t)d;
            break;
        case ML_T_MMAP:
            ok = get_u8(r, &rec->u.alloc.kind) && get_u8(r, &rec->u.alloc.flags) &&
                 get_u(r, &rec->u.alloc.size) && get_u32(r, &rec->u.alloc.stack) &&
                 get_u(r, &rec->u.alloc.ptr);
            break;
        case ML_T_MUNMAP:
        case ML_T_MMAP_FAIL:
            ok = get_u8(r, &rec->u.alloc.kind) && get_u(r, &rec->u.alloc.ptr) &&
                 get_u(r, &rec->u.alloc.size);
            break;
        case ML_T_NODE: {
            int64_t did, dparent, dpc;
            ok = get_s(r, &did) && get_s(r, &dparent) && get_s(r, &dpc);
            /* Bound the deltas before any arithmetic: a corrupt one must not
             * overflow (found by tests/fuzz). */
            ok = ok && did >= -(int64_t)UINT32_MAX && did <= (int64_t)UINT32_MAX && dparent >= 0 &&
                 dparent <= (int64_t)UINT32_MAX + 1;
            int64_t id = ok ? (int64_t)r->prev_node + 1 + did : 0, parent = ok ? id - dparent : 0;
            ok = ok && id > 0 && id <= UINT32_MAX && parent >= 0 && parent < id;
            if (ok) {
                rec->u.node.id = (uint32_t)id;
                rec->u.node.parent = (uint32_t)parent;
                rec->u.node.pc = r->prev_pc + (uint64_t)dpc;
                r->prev_node = rec->u.node.id;
                r->prev_pc = rec->u.node.pc;
            }
            break;
        }
        case ML_T_MODULE: {
            const char *bid = NULL;
            ok = get_u(r, &rec->u.module.base) && get_str(r, &rec->u.module.path, NULL) &&
                 get_str(r, &bid, &rec->u.module.build_id_len) && get_u32(r, &rec->u.module.nsegs) &&
                 rec->u.module.nsegs <= 16;
            rec->u.module.build_id = (const uint8_t *)bid;
            for (uint32_t i = 0; ok && i < rec->u.module.nsegs; i++)
                ok = get_u(r, &rec->u.module.segs[i].vaddr) &&
                     get_u(r, &rec->u.module.segs[i].memsz) &&
                     get_u32(r, &rec->u.module.segs[i].flags);
            break;
        }
        case ML_T_MODULE_UNLOAD:
            ok = get_u(r, &rec->u.module.base);
            break;
        case ML_T_THREAD:
            ok = get_u32(r, &rec->u.thread.index) && get_u32(r, &rec->u.thread.tid) &&
                 get_str(r, &rec->u.thread.name, NULL);
            break;
        case ML_T_MALLINFO:
            ok = get_u(r, &rec->u.mallinfo.arena) && get_u(r, &rec->u.mallinfo.hblkhd) &&
                 get_u(r, &rec->u.mallinfo.uordblks) && get_u(r, &rec->u.mallinfo.fordblks) &&
                 get_u(r, &rec->u.mallinfo.keepcost);
            break;
        case ML_T_RSS:
            ok = get_u(r, &rec->u.rss.rss_bytes);
            break;
        case ML_T_PROC_EXIT:
            ok = get_u(r, &rec->u.proc_exit.nested_skipped);
            break;
        case ML_T_BLOCK_REACH:
            ok = get_u8(r, &rec->u.block_reach.reach) && rec->u.block_reach.reach <= 3 &&
                 get_s(r, &d);
            if (ok) rec->u.block_reach.ptr = r->prev_ptr = r->prev_ptr + (uint64_t)d;
            break;
        case ML_T_REACH_SCAN: {
            typeof(rec->u.reach_scan) *q = &rec->u.reach_scan;
            ok = get_s(r, &d) && d <= 0 && d >= INT32_MIN && get_u(r, &q->root_bytes) &&
                 get_u(r, &q->heap_bytes) && get_u(r, &q->blocks) && get_u(r, &q->reachable) &&
                 get_u(r, &q->indirect) && get_u(r, &q->definite) && get_u(r, &q->duration_us);
            q->status = (int32_t)d;
            break;
        }
        case ML_T_PROCESS: {
            typeof(rec->u.process) *p = &rec->u.process;
            ok = get_u32(r, &p->pid) && get_u32(r, &p->ppid) && get_u(r, &p->start_realtime_ns) &&
                 get_u32(r, &p->page_size) && get_u32(r, &p->unwinder) && get_u32(r, &p->depth) &&
                 get_u(r, &p->sample_bytes) && get_u32(r, &p->options) &&
                 get_str(r, &p->parent_trace, NULL) && get_str(r, &p->exe, NULL) &&
                 get_u32(r, &p->argc) && p->argc <= ML_MAX_ARGS;
            for (uint32_t i = 0; ok && i < p->argc; i++) ok = get_str(r, &p->argv[i], NULL);
            ok = ok && get_str(r, &p->producer, NULL);
            break;
        }
        case ML_T_GPU_ALLOC:
        case ML_T_GPU_FREE: {
            typeof(rec->u.gpu) *g = &rec->u.gpu;
            uint64_t flags = 0;
            g->op = ML_GPU_OP_ALLOC;
            ok = (tag == ML_T_GPU_ALLOC || get_u8(r, &g->op)) && get_u8(r, &g->kind) &&
                 get_u(r, &flags) && flags <= UINT16_MAX && get_s(r, &d) && d >= INT32_MIN &&
                 d <= INT32_MAX && get_u32(r, &g->context) && get_u(r, &g->stream);
            if (ok && tag == ML_T_GPU_ALLOC)
                ok = get_u(r, &g->size) && get_u32(r, &g->stack) && get_u(r, &g->ptr);
            else if (ok)
                ok = get_u(r, &g->ptr) && get_u(r, &g->size);
            ok = ok && get_u(r, &g->handle) && get_u32(r, &g->cbid) && get_u32(r, &g->correlation);
            g->flags = (uint16_t)flags;
            g->device = (int32_t)d;
            break;
        }
        case ML_T_GPU_POOL: {
            typeof(rec->u.gpu) *g = &rec->u.gpu;
            uint64_t flags = 0;
            g->op = ML_GPU_OP_POOL_STATE;
            ok = get_u8(r, &g->kind) && get_u(r, &flags) && flags <= UINT16_MAX && get_s(r, &d) &&
                 d >= INT32_MIN && d <= INT32_MAX && get_u32(r, &g->context) && get_u(r, &g->ptr) &&
                 get_u(r, &g->size) && get_u(r, &g->pool_used) && get_u(r, &g->pool_threshold) &&
                 get_u(r, &g->handle) && get_u(r, &g->stream) && get_u32(r, &g->cbid) &&
                 get_u32(r, &g->correlation);
            g->flags = (uint16_t)flags;
            g->device = (int32_t)d;
            break;
        }
        case ML_T_UNWIND_CHECK: {
            typeof(rec->u.unwind_check) *q = &rec->u.unwind_check;
            ok = r->minor >= 5 && get_u(r, &q->stacks) && get_u(r, &q->mismatches) &&
                 get_u(r, &q->fallbacks) && get_u(r, &q->reused) && get_u(r, &q->first_frame) &&
                 get_u(r, &q->fast_pc) && get_u(r, &q->full_pc);
            break;
        }
        case ML_T_END: {
            ml_rec_end_t *e = &rec->u.end;
            ok = get_u32(r, &e->status_kind) && get_s(r, &d) && get_u(r, &e->events) &&
                 get_u(r, &e->ring_waits) && get_u(r, &e->ring_wait_ns) &&
                 get_u(r, &e->lost_in_crash) && get_u(r, &e->lost_dead_collector) &&
                 get_u(r, &e->nested_skipped) && get_u(r, &e->truncated_stacks) &&
                 get_u(r, &e->duration_ms);
            e->status = (int32_t)d;
            if (ok) r->complete = true;
            break;
        }
        default:
            (void)v;
            return fail(r, -EINVAL,
                        "corrupt trace: unknown record tag 0x%02x at offset %zu of the chunk at "
                        "file offset %" PRIu64,
                        tag, start, r->chunk_offset);
        }
        if (!ok) return CORRUPT();
        rec->tag = tag;
        rec->time_ms = r->time_ms;
        rec->thread = r->thread;
        return 1;
    }
}

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

static uint64_t get_le64(const uint8_t *p) {
    return get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

/* Re-reads the blocks before the snapshot (the header, every chunk) and
 * compares their checksum with the trailer's: a snapshot only stands for
 * the records it was saved with. */
static int check_body(ml_reader_t *r, uint64_t end, uint64_t want) {
    size_t cap = 65536;
    uint8_t *buf = malloc(cap);
    if (!buf) return fail(r, -ENOMEM, "out of memory");
    int rc = pread_full(r->fd, buf, ML_TRACE_HEADER_LEN, 0);
    uint64_t h = fold_hash(0, buf, ML_TRACE_HEADER_LEN), pos = ML_TRACE_HEADER_LEN;
    while (rc == 0 && pos < end) {
        if (end - pos < ML_CHUNK_HEADER_LEN) break;
        rc = pread_full(r->fd, buf, ML_CHUNK_HEADER_LEN, pos);
        if (rc < 0) break;
        uint64_t n = ML_CHUNK_HEADER_LEN + (uint64_t)get_le32(buf + 4);
        if (get_le32(buf) != ML_CHUNK_MAGIC || n > end - pos) break;
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
        h = fold_hash(h, buf, n);
        pos += n;
    }
    free(buf);
    if (rc < 0) return fail(r, rc, "read error: %s", strerror(-rc));
    if (pos != end || h != want)
        return fail(r, -EINVAL, "corrupt trace: the records do not match the checksum the collector "
                                "wrote");
    return 0;
}

int ml_reader_snapshot(ml_reader_t *r, void **data, size_t *len, uint32_t *version) {
    *data = NULL;
    *len = 0;
    uint8_t t[ML_TRAILER_LEN], h[ML_CHUNK_HEADER_LEN];
    if (r->minor < 3 || r->size < ML_TRACE_HEADER_LEN + ML_CHUNK_HEADER_LEN + ML_TRAILER_LEN)
        return -ENOENT;
    uint64_t tpos = r->size - ML_TRAILER_LEN;
    int rc = pread_full(r->fd, t, sizeof t, tpos);
    if (rc < 0) return fail(r, rc, "read error at offset %" PRIu64 ": %s", tpos, strerror(-rc));
    if (get_le32(t) != ML_TRAILER_MAGIC || get_le32(t + 4) != 1) return -ENOENT;
    uint64_t off = get_le64(t + 16);
    if (off < ML_TRACE_HEADER_LEN || off > tpos - ML_CHUNK_HEADER_LEN)
        return fail(r, -EINVAL, "corrupt trace: the trailer points outside the file (%" PRIu64 ")",
                    off);
    rc = pread_full(r->fd, h, sizeof h, off);
    if (rc < 0) return fail(r, rc, "read error at offset %" PRIu64 ": %s", off, strerror(-rc));
    uint32_t comp_len = get_le32(h + 4), raw_len = get_le32(h + 8);
    if (get_le32(h) != ML_SNAPSHOT_MAGIC || off + ML_CHUNK_HEADER_LEN + comp_len != tpos ||
        raw_len == 0 || raw_len > ML_SNAPSHOT_MAX_RAW)
        return fail(r, -EINVAL, "corrupt trace: bad analysis snapshot at offset %" PRIu64, off);
    rc = check_body(r, off, get_le64(t + 8));
    if (rc < 0) return rc;
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
        n = content == raw_len ? ZSTD_decompressDCtx(r->dctx, raw, raw_len, comp, comp_len) : 0;
    }
    free(comp);
    if (rc < 0 || ZSTD_isError(n) || n != raw_len) {
        free(raw);
        return fail(r, rc < 0 ? rc : -EINVAL,
                    "corrupt trace: the analysis snapshot at offset %" PRIu64 " does not decompress",
                    off);
    }
    *data = raw;
    *len = raw_len;
    if (version) *version = get_le32(h + 12);
    return 0;
}

void ml_progress_start(ml_progress_t *p, const ml_reader_t *r, const char *what, const char *where) {
    *p = (ml_progress_t){.r = r, .what = what, .where = where, .size = r->size, .shown = -1};
    p->on = isatty(2) && p->size > (64u << 20);
}

void ml__progress_show(ml_progress_t *p) {
    int pct = (int)(p->r->offset * 100 / p->size);
    if (pct == p->shown) return;
    fprintf(stderr, "\rmemlens: %s%s%s %3d%%", p->what, p->where ? " " : "", p->where ? p->where : "",
            pct);
    p->shown = pct;
}

void ml_progress_end(ml_progress_t *p) {
    if (p->on && p->shown >= 0) fprintf(stderr, "\r\033[K");
    p->shown = -1;
}

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

/* ------------------------------------------------------------------------- */
/* Text form                                                                 */
/* ------------------------------------------------------------------------- */

const char *ml_kind_name(unsigned kind) {
    static const char *const names[] = {
        "malloc",  "calloc",   "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
        "memalign", "valloc",  "pvalloc", "free",         "mmap",           "mremap",
        "munmap"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

const char *ml_gpu_kind_name(unsigned kind) {
    static const char *const names[] = {"device",       "pitch",       "host_pinned", "host_registered",
                                        "managed",      "async",       "pool",        "vmm_physical",
                                        "vmm_reserve",  "vmm_map",     "array"};
    _Static_assert(sizeof names / sizeof names[0] == ML_GPU_KIND_COUNT_, "a name per GPU kind");
    return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

const char *ml_gpu_pool_op_name(unsigned op) {
    static const char *const names[] = {"?", "created", "destroyed", "trimmed", "alloc", "release"};
    _Static_assert(sizeof names / sizeof names[0] == ML_GPU_POOL_OP_COUNT_, "a name per pool op");
    return op < sizeof names / sizeof names[0] ? names[op] : "?";
}

const char *ml_gpu_op_name(unsigned op) {
    switch (op) {
    case ML_GPU_OP_ALLOC: return "alloc";
    case ML_GPU_OP_FREE: return "free";
    case ML_GPU_OP_FREE_FAILED: return "free-failed";
    case ML_GPU_OP_CTX_DESTROY: return "context-destroy";
    case ML_GPU_OP_POOL_TRIM: return "pool-trim";
    case ML_GPU_OP_POOL_STATE: return "pool-state";
    default: return "?";
    }
}

const char *ml_tag_name(unsigned tag) {
    switch (tag) {
    case ML_T_PROCESS: return "process";
    case ML_T_TIME: return "time";
    case ML_T_THREAD_SWITCH: return "thread-switch";
    case ML_T_ALLOC: return "alloc";
    case ML_T_FREE: return "free";
    case ML_T_REALLOC_FAIL: return "realloc-fail";
    case ML_T_MMAP: return "mmap";
    case ML_T_MUNMAP: return "munmap";
    case ML_T_MMAP_FAIL: return "mremap-fail";
    case ML_T_NODE: return "node";
    case ML_T_MODULE: return "module";
    case ML_T_MODULE_UNLOAD: return "module-unload";
    case ML_T_THREAD: return "thread";
    case ML_T_MALLINFO: return "mallinfo";
    case ML_T_RSS: return "rss";
    case ML_T_PROC_EXIT: return "proc-exit";
    case ML_T_BLOCK_REACH: return "block-reach";
    case ML_T_REACH_SCAN: return "reach-scan";
    case ML_T_UNWIND_CHECK: return "unwind-check";
    case ML_T_END: return "end";
    case ML_T_GPU_ALLOC: return "gpu-alloc";
    case ML_T_GPU_FREE: return "gpu-free";
    case ML_T_GPU_POOL: return "gpu-pool";
    default: return "?";
    }
}

static void print_escaped(FILE *out, const char *s) {
    fputc('"', out);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(out, "\\x%02x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

void ml_record_print(FILE *out, const ml_record_t *r) {
    fprintf(out, "%u.%03u t%u %s", r->time_ms / 1000, r->time_ms % 1000, r->thread,
            ml_tag_name(r->tag));
    switch (r->tag) {
    case ML_T_ALLOC:
    case ML_T_MMAP:
        fprintf(out, " %s ptr=0x%" PRIx64 " size=%" PRIu64, ml_kind_name(r->u.alloc.kind),
                r->u.alloc.ptr, r->u.alloc.size);
        if (r->tag == ML_T_ALLOC && r->u.alloc.usable != r->u.alloc.size)
            fprintf(out, " usable=%" PRIu64, r->u.alloc.usable);
        fprintf(out, " stack=%u%s%s", r->u.alloc.stack,
                r->u.alloc.flags & ML_EVF_SAMPLED ? " sampled" : "",
                r->u.alloc.flags & ML_EVF_TRUNCATED ? " truncated" : "");
        break;
    case ML_T_FREE:
        fprintf(out, " %s ptr=0x%" PRIx64, ml_kind_name(r->u.alloc.kind), r->u.alloc.ptr);
        if (r->u.alloc.usable) fprintf(out, " usable=%" PRIu64, r->u.alloc.usable);
        break;
    case ML_T_REALLOC_FAIL:
        fprintf(out, " ptr=0x%" PRIx64, r->u.alloc.ptr);
        break;
    case ML_T_MUNMAP:
    case ML_T_MMAP_FAIL:
        fprintf(out, " %s ptr=0x%" PRIx64 " size=%" PRIu64, ml_kind_name(r->u.alloc.kind),
                r->u.alloc.ptr, r->u.alloc.size);
        break;
    case ML_T_NODE:
        fprintf(out, " id=%u parent=%u pc=0x%" PRIx64, r->u.node.id, r->u.node.parent, r->u.node.pc);
        break;
    case ML_T_MODULE:
        fprintf(out, " base=0x%" PRIx64 " path=", r->u.module.base);
        print_escaped(out, r->u.module.path);
        fprintf(out, " build_id=");
        for (uint32_t i = 0; i < r->u.module.build_id_len; i++)
            fprintf(out, "%02x", r->u.module.build_id[i]);
        for (uint32_t i = 0; i < r->u.module.nsegs; i++)
            fprintf(out, " seg=0x%" PRIx64 "+0x%" PRIx64 ":%c%c%c", r->u.module.segs[i].vaddr,
                    r->u.module.segs[i].memsz, r->u.module.segs[i].flags & 4 ? 'r' : '-',
                    r->u.module.segs[i].flags & 2 ? 'w' : '-',
                    r->u.module.segs[i].flags & 1 ? 'x' : '-');
        break;
    case ML_T_MODULE_UNLOAD:
        fprintf(out, " base=0x%" PRIx64, r->u.module.base);
        break;
    case ML_T_THREAD:
        fprintf(out, " index=%u tid=%u name=", r->u.thread.index, r->u.thread.tid);
        print_escaped(out, r->u.thread.name);
        break;
    case ML_T_MALLINFO:
        fprintf(out,
                " arena=%" PRIu64 " hblkhd=%" PRIu64 " uordblks=%" PRIu64 " fordblks=%" PRIu64
                " keepcost=%" PRIu64,
                r->u.mallinfo.arena, r->u.mallinfo.hblkhd, r->u.mallinfo.uordblks,
                r->u.mallinfo.fordblks, r->u.mallinfo.keepcost);
        break;
    case ML_T_RSS:
        fprintf(out, " rss=%" PRIu64, r->u.rss.rss_bytes);
        break;
    case ML_T_PROC_EXIT:
        fprintf(out, " nested_skipped=%" PRIu64, r->u.proc_exit.nested_skipped);
        break;
    case ML_T_BLOCK_REACH: {
        static const char *const kinds[] = {"unknown", "reachable", "indirect", "definite"};
        fprintf(out, " %s ptr=0x%" PRIx64, kinds[r->u.block_reach.reach & 3], r->u.block_reach.ptr);
        break;
    }
    case ML_T_REACH_SCAN: {
        const typeof(r->u.reach_scan) *q = &r->u.reach_scan;
        fprintf(out,
                " status=%d root_bytes=%" PRIu64 " heap_bytes=%" PRIu64 " blocks=%" PRIu64
                " reachable=%" PRIu64 " indirect=%" PRIu64 " definite=%" PRIu64
                " duration_us=%" PRIu64,
                q->status, q->root_bytes, q->heap_bytes, q->blocks, q->reachable, q->indirect,
                q->definite, q->duration_us);
        break;
    }
    case ML_T_PROCESS: {
        const typeof(r->u.process) *p = &r->u.process;
        fprintf(out,
                " pid=%u ppid=%u start_ns=%" PRIu64 " page_size=%u unwinder=%s depth=%u "
                "sample_bytes=%" PRIu64 " options=0x%x parent_trace=",
                p->pid, p->ppid, p->start_realtime_ns, p->page_size,
                p->unwinder == ML_UNWIND_FP ? "fp" : "libunwind", p->depth, p->sample_bytes,
                p->options);
        print_escaped(out, p->parent_trace);
        fprintf(out, " exe=");
        print_escaped(out, p->exe);
        fprintf(out, " argv=[");
        for (uint32_t i = 0; i < p->argc; i++) {
            if (i) fputc(' ', out);
            print_escaped(out, p->argv[i]);
        }
        fprintf(out, "] producer=");
        print_escaped(out, p->producer);
        break;
    }
    case ML_T_GPU_ALLOC:
    case ML_T_GPU_FREE: {
        const typeof(r->u.gpu) *g = &r->u.gpu;
        if (r->tag == ML_T_GPU_FREE) fprintf(out, " %s", ml_gpu_op_name(g->op));
        fprintf(out,
                " %s ptr=0x%" PRIx64 " size=%" PRIu64 " device=%d context=%u stream=0x%" PRIx64,
                ml_gpu_kind_name(g->kind), g->ptr, g->size, g->device, g->context, g->stream);
        if (g->handle) fprintf(out, " handle=0x%" PRIx64, g->handle);
        if (r->tag == ML_T_GPU_ALLOC) fprintf(out, " stack=%u", g->stack);
        fprintf(out, " cbid=%u correlation=%u%s%s%s", g->cbid, g->correlation,
                g->flags & ML_EVF_TRUNCATED ? " truncated" : "",
                g->flags & ML_GPU_F_ESTIMATED ? " estimated" : "",
                g->flags & ML_GPU_F_HOST ? " host" : "");
        break;
    }
    case ML_T_GPU_POOL: {
        const typeof(r->u.gpu) *g = &r->u.gpu;
        fprintf(out,
                " %s pool=0x%" PRIx64 " reserved=%" PRIu64 " used=%" PRIu64 " threshold=%" PRIu64
                " device=%d context=%u",
                ml_gpu_pool_op_name(g->kind), g->ptr, g->size, g->pool_used, g->pool_threshold,
                g->device, g->context);
        if (g->kind == ML_GPU_POOL_TRIMMED) fprintf(out, " keep=%" PRIu64, g->handle);
        else if (g->handle || g->stream)
            fprintf(out, " block=0x%" PRIx64 " block_size=%" PRIu64, g->handle, g->stream);
        fprintf(out, " activity=%u correlation=%u%s%s", g->cbid, g->correlation,
                g->flags & ML_GPU_F_POOL_IMPORTED ? " imported" : "",
                g->flags & ML_GPU_F_POOL_MANAGED ? " managed" : "");
        break;
    }
    case ML_T_UNWIND_CHECK: {
        const typeof(r->u.unwind_check) *q = &r->u.unwind_check;
        fprintf(out,
                " stacks=%" PRIu64 " mismatches=%" PRIu64 " fallbacks=%" PRIu64
                " reused=%" PRIu64,
                q->stacks, q->mismatches, q->fallbacks, q->reused);
        if (q->mismatches)
            fprintf(out, " first_frame=%" PRIu64 " fast_pc=0x%" PRIx64 " full_pc=0x%" PRIx64,
                    q->first_frame, q->fast_pc, q->full_pc);
        break;
    }
    case ML_T_END: {
        const ml_rec_end_t *e = &r->u.end;
        static const char *const kinds[] = {"exited", "signaled", "unknown", "exec"};
        fprintf(out,
                " %s status=%d events=%" PRIu64 " ring_waits=%" PRIu64 " ring_wait_ns=%" PRIu64
                " lost_in_crash=%" PRIu64 " lost_dead_collector=%" PRIu64
                " nested_skipped=%" PRIu64 " truncated_stacks=%" PRIu64 " duration_ms=%" PRIu64,
                e->status_kind < 4 ? kinds[e->status_kind] : "?", e->status, e->events,
                e->ring_waits, e->ring_wait_ns, e->lost_in_crash, e->lost_dead_collector,
                e->nested_skipped, e->truncated_stacks, e->duration_ms);
        break;
    }
    default:
        break;
    }
    fputc('\n', out);
}
