/* event_record.c - one ring event (ml_event.h) as one trace record
 * (ml_trace_io.h): the collector's decode step, kept pure so that it can be
 * tested alone and run on any thread.
 *
 * The ring carries what is cheapest to write inside malloc: 28-byte events
 * with the slack of an allocation folded into the top of its size, and
 * variable-length payloads (blobs) as raw structs. A record is what the
 * trace writer and the analysis take. Nothing here trusts a blob's size:
 * the payload of a process that died mid-write, or of a newer or older
 * libmemlens, must never be read past its end.
 */
#include "ml_trace_io.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Strings                                                                   */
/* ------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t cap, used;
} strings_t;

/* Copies n bytes and a NUL into the caller's string area; NULL when full. */
static char *copy_out(strings_t *s, const void *p, size_t n) {
    if (n + 1 > s->cap - s->used) return NULL;
    char *d = s->buf + s->used;
    memcpy(d, p, n);
    d[n] = '\0';
    s->used += n + 1;
    return d;
}

/* ------------------------------------------------------------------------- */
/* Blobs                                                                     */
/* ------------------------------------------------------------------------- */

/* ML_BLOB_MODULE: the header, then path_len bytes of path, then the build-id. */
static int module_record(ml_record_t *r, const ml_event_t *ev, const uint8_t *blob, strings_t *s) {
    ml_blob_module_t m;
    if (ev->size < sizeof m) return -EINVAL;
    memcpy(&m, blob, sizeof m);
    if (sizeof m + m.path_len + m.build_id_len > ev->size || m.path_len > 4096) return -EINVAL;
    const char *path = copy_out(s, blob + sizeof m, m.path_len);
    const char *bid = copy_out(s, blob + sizeof m + m.path_len, m.build_id_len);
    if (!path || !bid) return -ENOSPC;
    r->tag = ML_T_MODULE;
    r->u.module.base = m.base;
    r->u.module.path = path;
    r->u.module.build_id = (const uint8_t *)bid;
    r->u.module.build_id_len = m.build_id_len;
    r->u.module.nsegs = m.nsegs > ML_MAX_SEGMENTS ? ML_MAX_SEGMENTS : m.nsegs;
    for (uint32_t i = 0; i < r->u.module.nsegs; i++) {
        r->u.module.segs[i].vaddr = m.segs[i].vaddr;
        r->u.module.segs[i].memsz = m.segs[i].memsz;
        r->u.module.segs[i].flags = m.segs[i].flags;
    }
    return 0;
}

static int thread_record(ml_record_t *r, const ml_event_t *ev, const uint8_t *blob, strings_t *s) {
    ml_blob_thread_t t;
    if (ev->size < sizeof t) return -EINVAL;
    memcpy(&t, blob, sizeof t);
    const char *name = copy_out(s, t.name, strnlen(t.name, sizeof t.name));
    if (!name) return -ENOSPC;
    r->tag = ML_T_THREAD;
    r->u.thread.index = t.index;
    r->u.thread.tid = t.tid;
    r->u.thread.name = name;
    return 0;
}

/* An ML_BLOB_GPU payload (docs/gpu.md) as an ML_T_GPU_ALLOC/FREE/POOL record.
 * A shorter payload (an older libmemlens, or any op but POOL_STATE, which
 * stops at `handle`) reads as zeros past its end. */
static int gpu_record(ml_record_t *r, const ml_event_t *ev, const uint8_t *blob) {
    ml_gpu_event_t g;
    memset(&g, 0, sizeof g);
    if (ev->size < offsetof(ml_gpu_event_t, handle)) return -EINVAL;
    memcpy(&g, blob, ev->size < sizeof g ? ev->size : sizeof g);
    if (g.op != ML_GPU_OP_ALLOC && g.op != ML_GPU_OP_FREE && g.op != ML_GPU_OP_FREE_FAILED &&
        g.op != ML_GPU_OP_CTX_DESTROY && g.op != ML_GPU_OP_POOL_TRIM &&
        g.op != ML_GPU_OP_POOL_STATE)
        return -EINVAL;
    r->tag = g.op == ML_GPU_OP_ALLOC        ? ML_T_GPU_ALLOC
             : g.op == ML_GPU_OP_POOL_STATE ? ML_T_GPU_POOL
                                            : ML_T_GPU_FREE;
    r->u.gpu.op = g.op;
    r->u.gpu.kind = g.kind;
    r->u.gpu.flags = g.flags;
    r->u.gpu.device = g.device;
    r->u.gpu.context = g.context;
    r->u.gpu.stack = g.op == ML_GPU_OP_ALLOC ? g.stack : 0;
    r->u.gpu.cbid = g.cbid;
    r->u.gpu.correlation = g.correlation;
    r->u.gpu.stream = g.stream;
    r->u.gpu.ptr = g.ptr;
    r->u.gpu.size = g.size;
    r->u.gpu.handle = g.handle;
    r->u.gpu.pool_used = g.pool_used;
    r->u.gpu.pool_threshold = g.pool_threshold;
    return 0;
}

static int blob_record(ml_record_t *r, const ml_event_t *ev, const uint8_t *blob, strings_t *s) {
    memset(&r->u, 0, sizeof r->u);
    if (!blob && ev->size) return -EINVAL;
    switch (ev->kind) {
    case ML_BLOB_MODULE: return module_record(r, ev, blob, s);
    case ML_BLOB_MODULE_UNLOAD:
        if (ev->size < 8) return -EINVAL;
        r->tag = ML_T_MODULE_UNLOAD;
        memcpy(&r->u.module.base, blob, 8);
        return 0;
    case ML_BLOB_THREAD: return thread_record(r, ev, blob, s);
    case ML_BLOB_MALLINFO: {
        ml_blob_mallinfo_t m;
        if (ev->size < sizeof m) return -EINVAL;
        memcpy(&m, blob, sizeof m);
        r->tag = ML_T_MALLINFO;
        r->u.mallinfo.arena = m.arena;
        r->u.mallinfo.hblkhd = m.hblkhd;
        r->u.mallinfo.uordblks = m.uordblks;
        r->u.mallinfo.fordblks = m.fordblks;
        r->u.mallinfo.keepcost = m.keepcost;
        return 0;
    }
    case ML_BLOB_EXIT: {
        ml_blob_exit_t e;
        if (ev->size < sizeof e) return -EINVAL;
        memcpy(&e, blob, sizeof e);
        r->tag = ML_T_PROC_EXIT;
        r->u.proc_exit.nested_skipped = e.nested_skipped;
        return 0;
    }
    case ML_BLOB_GPU: return gpu_record(r, ev, blob);
    default: return -EINVAL;
    }
}

/* ------------------------------------------------------------------------- */
/* Events                                                                    */
/* ------------------------------------------------------------------------- */

int ml_event_to_record(const ml_event_t *ev, const void *blob, ml_record_t *r, char *strings,
                       size_t cap) {
    /* Only the part an allocation record uses: the whole union is ~600
     * bytes and this runs for every event. Other cases clear r->u themselves. */
    memset(r, 0, offsetof(ml_record_t, u) + sizeof r->u.alloc);
    r->time_ms = ev->time;
    r->thread = ev->thread;
    r->u.alloc.kind = ev->kind;
    r->u.alloc.flags = (uint8_t)ml_ev_flags(ev);
    r->u.alloc.ptr = ev->ptr;
    r->u.alloc.size = ev->size;
    r->u.alloc.stack = ev->stack;
    switch (ml_ev_type(ev)) {
    case ML_EV_ALLOC:
        /* The slack (usable - size, saturated at 0xffff) rides in the top 16 bits. */
        r->tag = ML_T_ALLOC;
        r->u.alloc.size = ev->size & 0xffffffffffffull;
        r->u.alloc.usable = r->u.alloc.size + (ev->size >> 48);
        return 0;
    case ML_EV_FREE:
        r->tag = ML_T_FREE;
        r->u.alloc.size = 0;
        r->u.alloc.usable = ev->size;
        return 0;
    case ML_EV_REALLOC_FAIL: r->tag = ML_T_REALLOC_FAIL; return 0;
    case ML_EV_MMAP: r->tag = ML_T_MMAP; return 0;
    case ML_EV_MUNMAP: r->tag = ML_T_MUNMAP; return 0;
    case ML_EV_MMAP_FAIL: r->tag = ML_T_MMAP_FAIL; return 0;
    case ML_EV_NODE:
        memset(&r->u, 0, sizeof r->u);
        r->tag = ML_T_NODE;
        r->u.node.id = ev->stack;
        r->u.node.pc = ev->ptr;
        r->u.node.parent = (uint32_t)ev->size;
        return 0;
    case ML_EV_BLOB: {
        strings_t s = {strings, strings ? cap : 0, 0};
        int rc = blob_record(r, ev, blob, &s);
        return rc < 0 ? rc : (int)s.used;
    }
    default: return -EINVAL;
    }
}
