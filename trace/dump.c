/* dump.c - the text form of records (`memlens dump`) and the names of tags
 * and kinds used in messages, dumps and reports. */
#include "ml_trace_io.h"

#include <inttypes.h>
#include <stdio.h>

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

const char *ml_hwm_source_name(unsigned source) {
    static const char *const names[] = {"none", "wait4", "exit", "sampled"};
    _Static_assert(sizeof names / sizeof names[0] == ML_HWM_SOURCE_COUNT_, "a name per source");
    return source < sizeof names / sizeof names[0] ? names[source] : "?";
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
    case ML_T_PEAK_RSS: return "peak-rss";
    case ML_T_UNTRACED: return "untraced";
    case ML_T_BLOCK_REACH: return "block-reach";
    case ML_T_REACH_REST: return "reach-rest";
    case ML_T_REACH_SCAN: return "reach-scan";
    case ML_T_UNWIND_CHECK: return "unwind-check";
    case ML_T_END: return "end";
    case ML_T_GPU_ALLOC: return "gpu-alloc";
    case ML_T_GPU_FREE: return "gpu-free";
    case ML_T_GPU_POOL: return "gpu-pool";
    default: return "?";
    }
}

/* A trace's string, quoted, with its control bytes as \xNN: C0, DEL, and
 * the C1 controls as UTF-8 encodes them (C2 80-9F, written \xc2\xNN), which
 * a terminal may take for CSI or OSC (the text reports' rule,
 * trace/text_clean.c). C2 9B went to stdout as it was. */
static void print_escaped(FILE *out, const char *s) {
    fputc('"', out);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(out, "\\x%02x", c);
        else if (c == 0xc2 && (unsigned char)s[1] >= 0x80 && (unsigned char)s[1] <= 0x9f) {
            fprintf(out, "\\xc2\\x%02x", (unsigned char)s[1]);
            s++;
        } else fputc(c, out);
    }
    fputc('"', out);
}

static void print_module(FILE *out, const ml_record_t *r) {
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
}

static void print_process(FILE *out, const ml_record_t *r) {
    const typeof(r->u.process) *p = &r->u.process;
    fprintf(out,
            " pid=%u ppid=%u start_ns=%" PRIu64 " page_size=%u unwinder=%s depth=%u "
            "sample_bytes=%" PRIu64 " options=0x%x%s%s parent_trace=",
            p->pid, p->ppid, p->start_realtime_ns, p->page_size,
            p->unwinder == ML_UNWIND_FP ? "fp" : "libunwind", p->depth, p->sample_bytes,
            p->options, p->options & ML_OPT_ATTACHED ? " (attached)" : "",
            p->options & ML_OPT_FORKED ? " (forked)" : "");
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
}

/* ML_T_GPU_ALLOC and ML_T_GPU_FREE. */
static void print_gpu(FILE *out, const ml_record_t *r) {
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
}

static void print_gpu_pool(FILE *out, const ml_record_t *r) {
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
}

static void print_unwind_check(FILE *out, const ml_record_t *r) {
    const typeof(r->u.unwind_check) *q = &r->u.unwind_check;
    fprintf(out, " stacks=%" PRIu64 " mismatches=%" PRIu64 " fallbacks=%" PRIu64 " reused=%" PRIu64, q->stacks,
            q->mismatches, q->fallbacks, q->reused);
    if (q->mismatches)
        fprintf(out, " first_frame=%" PRIu64 " fast_pc=0x%" PRIx64 " full_pc=0x%" PRIx64, q->first_frame, q->fast_pc,
                q->full_pc);
}

const char *ml_end_name(uint32_t kind) {
    static const char *const kinds[] = {"exited", "signaled", "unknown", "exec", "running"};
    return kind < sizeof kinds / sizeof kinds[0] ? kinds[kind] : "unknown";
}

static void print_end(FILE *out, const ml_record_t *r) {
    const ml_rec_end_t *e = &r->u.end;
    fprintf(out,
            " %s status=%d events=%" PRIu64 " ring_waits=%" PRIu64 " ring_wait_ns=%" PRIu64
            " lost_in_crash=%" PRIu64 " lost_dead_collector=%" PRIu64
            " nested_skipped=%" PRIu64 " truncated_stacks=%" PRIu64 " duration_ms=%" PRIu64,
            ml_end_name(e->status_kind), e->status, e->events,
            e->ring_waits, e->ring_wait_ns, e->lost_in_crash, e->lost_dead_collector,
            e->nested_skipped, e->truncated_stacks, e->duration_ms);
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
        fprintf(out, " stack=%u%s%s%s", r->u.alloc.stack,
                r->u.alloc.flags & ML_EVF_SAMPLED ? " sampled" : "",
                r->u.alloc.flags & ML_EVF_TRUNCATED ? " truncated" : "",
                r->tag == ML_T_MMAP && (r->u.alloc.flags & ML_EVF_ALLOCATOR) ? " allocator" : "");
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
    case ML_T_MODULE: print_module(out, r); break;
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
        if (r->u.rss.interval_ms) fprintf(out, " interval_ms=%" PRIu32, r->u.rss.interval_ms);
        break;
    case ML_T_PROC_EXIT:
        fprintf(out, " nested_skipped=%" PRIu64, r->u.proc_exit.nested_skipped);
        break;
    case ML_T_PEAK_RSS:
        fprintf(out, " bytes=%" PRIu64 " source=%s", r->u.peak_rss.bytes, ml_hwm_source_name(r->u.peak_rss.source));
        break;
    case ML_T_UNTRACED: {
        static const char *const whats[] = {"?", "children", "exec", "spawned", "namespace", "unscanned",
                                            "inherited", "allocator", "deepbind", "ended"};
        _Static_assert(sizeof whats / sizeof *whats == ML_UNTRACED_WHAT_COUNT_, "a name for each what");
        uint8_t k = r->u.untraced.what;
        fprintf(out, " what=%s count=%" PRIu64 " message=", k < ML_UNTRACED_WHAT_COUNT_ ? whats[k] : "?",
                r->u.untraced.count);
        print_escaped(out, r->u.untraced.message);
        break;
    }
    case ML_T_BLOCK_REACH:
    case ML_T_REACH_REST: {
        static const char *const kinds[] = {"unknown", "reachable", "indirect", "definite",
                                            "possible"};
        uint8_t k = r->u.block_reach.reach;
        fprintf(out, " %s", k <= ML_REACH_POSSIBLE ? kinds[k] : "unknown");
        if (r->tag == ML_T_BLOCK_REACH) fprintf(out, " ptr=0x%" PRIx64, r->u.block_reach.ptr);
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
    case ML_T_PROCESS: print_process(out, r); break;
    case ML_T_GPU_ALLOC:
    case ML_T_GPU_FREE: print_gpu(out, r); break;
    case ML_T_GPU_POOL: print_gpu_pool(out, r); break;
    case ML_T_UNWIND_CHECK: print_unwind_check(out, r); break;
    case ML_T_END: print_end(out, r); break;
    default:
        break;
    }
    fputc('\n', out);
}
