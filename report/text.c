/* text.c - `memlens report FILE` without output options: a summary for
 * people, with the sites that hold the peak and the leaks. */
#include "ml_report.h"
#include "ml_gpu.h"
#include "report_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *bytes(uint64_t b, char *buf, size_t len) {
    return ml_fmt_bytes(b, buf, len);
}

static void where(FILE *o, const ml_frame_t *f) {
    char name[256];
    fputs(f->function ? ml_frame_short_name(f->function, name, sizeof name) : "?", o);
    if (f->file) {
        const char *base = strrchr(f->file, '/');
        fprintf(o, "  %s:%u", base ? base + 1 : f->file, f->line);
    } else if (f->module) {
        const char *base = strrchr(f->module, '/');
        fprintf(o, "  (%s)", base ? base + 1 : f->module);
    }
}

static void site_lines(FILE *o, const ml_site_t *s) {
    if (!s->nframes) {
        fputs("[no stack]\n", o);
        return;
    }
    /* The program's own frame names the site (its headline); two callers
     * give the context without flooding the screen. */
    uint32_t h = s->headline < s->nframes ? s->headline : 0;
    where(o, &s->frames[h]);
    fputc('\n', o);
    for (uint32_t k = h + 1; k < s->nframes && k < h + 3; k++) {
        fputs("        <- ", o);
        where(o, &s->frames[k]);
        fputc('\n', o);
    }
}

/* The hint for --alloc-fn: the function of the program's own that calls
 * the allocator itself (it is frames[0] and the headline) for the most
 * allocation calls, when it does so in several sites for several callers:
 * an allocation wrapper names all those sites with one line. The chain of
 * frames every such site shares above it (a wrapper of the wrapper) goes
 * into the suggestion; the callers are where the chain's sites part. */
typedef struct {
    const char *fn;
    size_t site;
} hubent_t;

static int hubent_cmp(const void *x, const void *y) {
    const hubent_t *a = x, *b = y;
    if (a->fn != b->fn) return (uintptr_t)a->fn < (uintptr_t)b->fn ? -1 : 1;
    return (a->site > b->site) - (a->site < b->site);
}

#define HINT_CHAIN 4

static void alloc_fn_hint(FILE *o, const ml_site_t *s, size_t n, uint64_t total_calls) {
    hubent_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].nframes > 1 && s[i].headline == 0 && s[i].frames[0].own && s[i].frames[0].function &&
            s[i].frames[0].function[0] != '[') /* a name, not an address */
            v[m++] = (hubent_t){s[i].frames[0].function, i};
    qsort(v, m, sizeof *v, hubent_cmp);
    size_t best = 0, best_n = 0;
    uint64_t best_calls = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        uint64_t calls = 0;
        while (j < m && v[j].fn == v[i].fn) calls += s[v[j++].site].alloc_calls;
        if (j - i >= 3 && calls > best_calls) {
            best = i;
            best_n = j - i;
            best_calls = calls;
        }
        i = j;
    }
    if (!best_n || best_calls * 20 < total_calls) { /* under 5 % of the calls: no hint */
        free(v);
        return;
    }
    /* The chain above the function that every one of its sites shares. */
    const ml_frame_t *chain[HINT_CHAIN];
    uint32_t k = 0;
    chain[0] = &s[v[best].site].frames[0];
    for (;;) {
        const ml_site_t *first = &s[v[best].site];
        if (k + 1 >= HINT_CHAIN || k + 1 >= first->nframes) break;
        const ml_frame_t *f = &first->frames[k + 1];
        bool same = f->own && f->function && f->function[0] != '[';
        for (size_t j = 1; same && j < best_n; j++) {
            const ml_site_t *x = &s[v[best + j].site];
            same = k + 1 < x->nframes && x->frames[k + 1].function == f->function;
        }
        if (!same) break;
        chain[++k] = f;
    }
    /* Its callers: the distinct functions just above the chain. */
    const char *callers[3];
    size_t ncallers = 0;
    for (size_t j = 0; j < best_n && ncallers < 3; j++) {
        const ml_site_t *x = &s[v[best + j].site];
        const char *c = k + 1 < x->nframes ? x->frames[k + 1].function : NULL;
        bool seen = false;
        for (size_t q = 0; q < ncallers; q++) seen |= callers[q] == c;
        if (c && !seen) callers[ncallers++] = c;
    }
    free(v);
    if (ncallers < 3) return;
    char name[256];
    fprintf(o, "\nhint: ");
    where(o, chain[0]);
    fprintf(o, " names %zu sites and %.0f%% of the allocation calls", best_n,
            total_calls ? 100.0 * (double)best_calls / (double)total_calls : 0);
    if (k) {
        fputs(", always called through ", o);
        for (uint32_t q = 1; q <= k; q++)
            fprintf(o, "%s%s", q > 1 ? " <- " : "", ml_frame_short_name(chain[q]->function, name, sizeof name));
    }
    fputs(".\n      If it allocates for its callers, name the sites by them with", o);
    for (uint32_t q = 0; q <= k; q++)
        fprintf(o, " --alloc-fn '%s'", ml_frame_short_name(chain[q]->function, name, sizeof name));
    fputc('\n', o);
}

/* Each number says what it is (issue 13): page utilization is how full the
 * pages holding live blocks are, not heap fragmentation; "external" is the
 * fragmentation of the free heap. */
static void frag_line(FILE *o, const char *label, const ml_frag_t *f) {
    if (!f->valid) return;
    char b1[32], b2[32], b3[32];
    fprintf(o, "  %-8s page utilization %5.1f%% (%s live in %s of pages), external fragmentation of free heap %4.1f%%, internal waste %s",
            label, 100 * f->page_utilization, bytes(f->live_bytes, b1, sizeof b1),
            bytes(f->page_bytes, b2, sizeof b2), 100 * f->external,
            bytes(f->internal_waste_bytes, b3, sizeof b3));
    if (f->have_rss) fprintf(o, ", RSS (last sample) %s", bytes(f->rss_bytes, b2, sizeof b2));
    fputc('\n', o);
}

/* The kernel's high-water mark when the trace has it; the largest of the
 * samples is labelled as a sample. */
static void rss_line(FILE *o, const ml_totals_t *t) {
    char b1[32], b2[32];
    if (t->hwm_rss_source) {
        fprintf(o, ML_LABEL_PEAK_RSS ": %s (%s)", bytes(t->hwm_rss_bytes, b1, sizeof b1),
                t->hwm_rss_source == ML_HWM_EXIT     ? "VmHWM at exit"
                : t->hwm_rss_source == ML_HWM_WAIT4 ? "wait4 ru_maxrss"
                                                    : "VmHWM at the last sample: a lower bound");
        if (t->peak_rss_bytes)
            fprintf(o, "; largest RSS sample %s (sampled every %u ms)", bytes(t->peak_rss_bytes, b2, sizeof b2),
                    ml_rss_interval_ms(t));
        fputc('\n', o);
    } else if (t->peak_rss_bytes) {
        fprintf(o, "peak RSS: largest sample %s (sampled every %u ms; this trace has no kernel high-water mark)\n",
                bytes(t->peak_rss_bytes, b1, sizeof b1), ml_rss_interval_ms(t));
    }
}

/* A GPU site: its first program frame and two callers, as site_lines()
 * does for the heap (CUDA's and memlens' own frames are left out). */
static void gpu_site_lines(FILE *o, const ml_analysis_t *a, const ml_gpu_site_t *s) {
    ml_frame_t f[3];
    size_t n = ml_gpu_stack_frames(a, s->stack, f, 3);
    if (!n) {
        fputs("[no stack]\n", o);
        return;
    }
    where(o, &f[0]);
    fputc('\n', o);
    for (size_t k = 1; k < n; k++) {
        fputs("          <- ", o);
        where(o, &f[k]);
        fputc('\n', o);
    }
}

/* Up to `top` sites of one device in one order, with their bytes. */
static void gpu_sites(FILE *o, const ml_analysis_t *a, const ml_gpu_t *g, size_t di,
                      ml_gpu_order_t order, const char *title, unsigned top) {
    ml_gpu_site_t s[10];
    size_t n = ml_gpu_sites(g, di, order, s, top < 10 ? top : 10);
    if (!n) return;
    fprintf(o, "    %s:\n", title);
    for (size_t i = 0; i < n; i++) {
        char b[32];
        uint64_t v = order == ML_GPU_BY_PEAK ? s[i].peak_bytes : s[i].leaked_bytes;
        uint64_t blocks = order == ML_GPU_BY_PEAK ? s[i].peak_blocks : s[i].leaked_blocks;
        fprintf(o, "      %10s %6" PRIu64 " blocks  %-15s ", bytes(v, b, sizeof b), blocks,
                ml_gpu_kind_name(s[i].kind));
        gpu_site_lines(o, a, &s[i]);
    }
}

/* Each device's peak, leaks and pinned host memory, with the sites holding
 * the peak and the leaked blocks; nothing when no GPU records are there. */
static void gpu_lines(FILE *o, const ml_analysis_t *a, unsigned top) {
    const ml_gpu_t *g = ml_analysis_gpu(a);
    size_t nd = ml_gpu_device_count(g);
    if (!nd) return;
    fputs("\nGPU memory:\n", o);
    if (top > 5) top = 5; /* a summary: the JSON and HTML have them all */
    for (size_t di = 0; di < nd; di++) {
        const ml_gpu_device_t *d = ml_gpu_device(g, di);
        char b1[32], b2[32], b3[32], b4[32];
        if (d->device == ML_GPU_DEVICE_UNKNOWN) fputs("  device ?:", o);
        else fprintf(o, "  device %d:", (int)d->device);
        fprintf(o,
                " peak %s in %" PRIu64 " blocks at %.3f s; leaked %s in %" PRIu64 " blocks (%s at "
                "context destroy); %" PRIu64 " allocs, %" PRIu64 " frees",
                bytes(d->peak_bytes, b1, sizeof b1), d->peak_blocks, d->peak_time_ms / 1000.0,
                bytes(d->leaked_bytes, b2, sizeof b2), d->leaked_blocks,
                bytes(d->ctx_destroy_bytes, b3, sizeof b3), d->alloc_calls, d->free_calls);
        if (d->failed_frees) fprintf(o, ", %" PRIu64 " failed", d->failed_frees);
        fputc('\n', o);
        if (d->pinned_alloc_calls)
            fprintf(o, "    pinned host: peak %s, leaked %s\n",
                    bytes(d->pinned_peak_bytes, b1, sizeof b1),
                    bytes(d->pinned_leaked_bytes, b4, sizeof b4));
        if (d->frag_peak.valid && d->frag_peak.blocks)
            fprintf(o, "    address space at peak: utilization %.1f%% (live / span), external "
                       "fragmentation of the holes %.1f%% (1 - largest hole / all holes)\n",
                    100 * d->frag_peak.utilization, 100 * d->frag_peak.external);
        gpu_sites(o, a, g, di, ML_GPU_BY_PEAK, "held at the peak", top);
        gpu_sites(o, a, g, di, ML_GPU_BY_LEAKED, "leaked", top);
    }
}

/* One line per memory pool (memlens run --gpu-pools), when there are any. */
static void gpu_pool_lines(FILE *o, const ml_gpu_t *g) {
    bool header = false;
    for (size_t di = 0; di < ml_gpu_device_count(g); di++) {
        const ml_gpu_device_t *d = ml_gpu_device(g, di);
        size_t n = ml_gpu_pools(g, di, NULL, 0);
        ml_gpu_pool_t *pools = n ? calloc(n, sizeof *pools) : NULL;
        n = pools ? ml_gpu_pools(g, di, pools, n) : 0;
        for (size_t i = 0; i < n; i++) {
            const ml_gpu_pool_t p = pools[i];
            char b1[32], b2[32], b3[32], b4[32];
            if (!header) fputs("\nGPU memory pools:\n", o);
            header = true;
            fprintf(o,
                    "  GPU %d %-8s pool 0x%" PRIx64 ": peak reserved %s, peak used %s, reserved at "
                    "exit %s, release threshold %s, %u trims%s\n",
                    (int)d->device, p.explicit_pool ? "explicit" : "default", p.address,
                    bytes(p.peak_reserved_bytes, b1, sizeof b1), bytes(p.peak_used_bytes, b2, sizeof b2),
                    bytes(p.reserved_at_exit_bytes, b3, sizeof b3),
                    bytes(p.release_threshold_bytes, b4, sizeof b4), p.trims,
                    p.imported ? " (imported: sizes unknown)" : "");
        }
        free(pools);
        if (n) {
            char b1[32];
            fprintf(o, "  GPU %d: reserved but unused at the device's peak: %s\n", (int)d->device,
                    bytes(d->pool_unused_at_peak_bytes, b1, sizeof b1));
        }
    }
}

/* A trace of `memlens attach` (ML_OPT_ATTACHED) starts in the middle of
 * the program's life and ends before its exit: what it shows is the growth
 * of the window (allocated in it and still live when memlens detached), by
 * site. Leak kinds need an exit scan and every allocation: not shown. */
static int cmp_growth(const void *x, const void *y) {
    const ml_site_t *l = *(const ml_site_t *const *)x, *r = *(const ml_site_t *const *)y;
    if (l->live_at_exit_bytes != r->live_at_exit_bytes) return l->live_at_exit_bytes < r->live_at_exit_bytes ? 1 : -1;
    return l->id < r->id ? -1 : l->id > r->id;
}

static void attached_head(FILE *o, const ml_analysis_t *a) {
    const ml_totals_t *t = ml_analysis_totals(a);
    const ml_process_info_t *p = ml_analysis_process(a);
    time_t at = (time_t)(p->start_realtime_ns / 1000000000ull);
    struct tm tm;
    char when[64] = "?";
    if (gmtime_r(&at, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    uint32_t ms = t->complete ? t->end.duration_ms : t->last_time_ms;
    fprintf(o, "attached at %s for %.1f s (memlens attach: allocations made before are unknown)\n", when,
            ms / 1000.0);
}

static void attached_growth(FILE *o, const ml_analysis_t *a) {
    const ml_totals_t *t = ml_analysis_totals(a);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    char b1[32], b2[32];
    /* A program that exited during the window was scanned at its exit, but
     * the blocks it allocated before the attach are unknown: a block held
     * only through one of them would read as lost. */
    /* One that ended without an exit memlens saw (SIGKILL) was never
     * detached from: what was live is what it held at its end. */
    bool gone = ml_analysis_ended_in_window(a);
    fprintf(o, "grown in the window: %s in %" PRIu64 " blocks allocated while attached and still live at %s\n",
            bytes(L->bytes, b1, sizeof b1), L->blocks, t->exited ? "its exit" : gone ? "its end" : "detach");
    fprintf(o, "frees of blocks allocated before the attach: %" PRIu64 " (%s usable; not counted at any site)\n",
            t->unknown_frees, bytes(t->unknown_free_bytes, b2, sizeof b2));
    if (t->exited)
        fputs("leaks: not reported: the program exited while attached, but the blocks it allocated before "
              "the attach are unknown (a block held through one of them would look lost)\n",
              o);
    else if (gone)
        fputs("leaks: not reported: the program ended during the window without an exit memlens saw "
              "(killed by SIGKILL?): no exit scan, and blocks allocated before the attach are unknown\n",
              o);
    else
        fputs("leaks: not reported: the program did not exit while attached (no exit scan, and blocks "
              "allocated before the attach are unknown)\n",
              o);
}

/* The sites of the blocks live at the end, biggest first, for a trace whose
 * end is not an exit: attached (what grew in the window) or stopped while
 * the program ran. */
static void live_sites(FILE *o, const ml_analysis_t *a, unsigned top, const char *title) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    const ml_site_t **v = n ? malloc(n * sizeof *v) : NULL;
    size_t m = 0;
    for (size_t i = 0; v && i < n; i++)
        if (s[i].live_at_exit_blocks) v[m++] = &s[i];
    if (m) qsort(v, m, sizeof *v, cmp_growth);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    fprintf(o, "\n%s:\n", title);
    for (size_t i = 0; i < m && i < top; i++) {
        char b1[32];
        fprintf(o, "  %10s %5.1f%% %6" PRIu64 " blocks  ", bytes(v[i]->live_at_exit_bytes, b1, sizeof b1),
                L->bytes ? 100.0 * (double)v[i]->live_at_exit_bytes / (double)L->bytes : 0,
                v[i]->live_at_exit_blocks);
        site_lines(o, v[i]);
    }
    if (!m) fputs("  (nothing is live)\n", o);
    free(v);
}

int ml_report_text(FILE *o, const ml_analysis_t *a, const char *path, unsigned top) {
    if (!top) top = 10;
    const ml_totals_t *t = ml_analysis_totals(a);
    const ml_process_info_t *p = ml_analysis_process(a);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    char b1[32], b2[32], b3[32];
    fprintf(o, "memlens report: %s\n", path ? path : "");
    fprintf(o, "program: %s (pid %u)", p->exe[0] ? p->exe : "?", p->pid);
    if (t->complete && t->end.status_kind == ML_END_EXITED) fprintf(o, ", exit code %d", t->end.status);
    else if (t->complete && t->end.status_kind == ML_END_SIGNALED) fprintf(o, ", killed by signal %d", t->end.status);
    else if (t->complete && t->end.status_kind == ML_END_EXEC) fputs(", replaced itself by exec", o);
    fprintf(o, "%s\n", t->truncated ? " (trace truncated)" : "");
    bool attached = p->options & ML_OPT_ATTACHED;
    if (attached) attached_head(o, a);
    if (t->sample_bytes) fprintf(o, "sampled: one allocation per %" PRIu64 " bytes; numbers are estimates\n", t->sample_bytes);
    fprintf(o, "allocations: %" PRIu64 " calls (%" PRIu64 " temporary), %s allocated; %" PRIu64 " frees, %" PRIu64
               " reallocs, %" PRIu64 " mmaps\n",
            t->alloc_calls, t->temporary_allocs, bytes(t->bytes_allocated, b1, sizeof b1), t->free_calls,
            t->realloc_calls, t->mmap_calls);
    if (t->alloc_mmap_calls)
        fprintf(o, "allocator's own mappings: %" PRIu64 " mmaps, at most %s, %s at exit (the heap's backing "
                   "store, mapped by the allocator; not in the mmaps above)\n",
                t->alloc_mmap_calls, bytes(t->peak_alloc_mmap_bytes, b1, sizeof b1),
                bytes(t->alloc_mmap_bytes, b2, sizeof b2));
    fprintf(o, "peak heap: %s in %" PRIu64 " blocks at %.3f s\n", bytes(t->peak_bytes, b1, sizeof b1),
            t->peak_blocks, t->peak_time_ms / 1000.0);
    rss_line(o, t);
    if (attached) attached_growth(o, a);
    char b4[32];
    char b5[32];
    /* The process did not exit (exec, or recording stopped while it ran):
     * what is live is not leaked. */
    ml_unjudged_t u;
    bool unjudged = ml_totals_unjudged(t, &u);
    if (unjudged)
        fprintf(o, "live %s: %s in %" PRIu64 " blocks (%s: not leaks, and no leak kinds)\n", u.when,
                bytes(L->bytes, b1, sizeof b1), L->blocks, u.why);
    else if (!attached) fprintf(o, "leaked at exit: %s in %" PRIu64 " blocks (%s definite, %s indirect, %s possible)%s\n",
            bytes(L->lost_bytes, b1, sizeof b1), L->lost_blocks,
            bytes(L->kind_bytes[ML_LEAK_DEFINITE], b2, sizeof b2),
            bytes(L->kind_bytes[ML_LEAK_INDIRECT], b3, sizeof b3),
            bytes(L->kind_bytes[ML_LEAK_POSSIBLE], b4, sizeof b4),
            L->scanned ? "" : " (no reachability scan: all counted as definite)");
    if (!attached && !unjudged) fprintf(o, "still reachable at exit: %s in %" PRIu64 " blocks (not leaked; live at exit: %s)\n",
            bytes(L->kind_bytes[ML_LEAK_REACHABLE], b2, sizeof b2), L->kind_blocks[ML_LEAK_REACHABLE],
            bytes(L->bytes, b5, sizeof b5));
    if (L->suppressed_blocks)
        fprintf(o, "suppressed: %s in %" PRIu64 " blocks\n", bytes(L->suppressed_bytes, b1, sizeof b1),
                L->suppressed_blocks);

    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    fputs("\ntop sites by peak:\n", o);
    unsigned shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        if (!s[i].peak_bytes) continue;
        fprintf(o, "  %10s %5.1f%% %6" PRIu64 " blocks  ", bytes(s[i].peak_bytes, b1, sizeof b1),
                t->peak_bytes ? 100.0 * (double)s[i].peak_bytes / (double)t->peak_bytes : 0, s[i].peak_blocks);
        site_lines(o, &s[i]);
        shown++;
    }
    if (!shown) fputs("  (nothing was live)\n", o);
    if (!attached) alloc_fn_hint(o, s, n, t->alloc_calls);

    if (attached)
        live_sites(o, a, top,
                   ml_analysis_ended_in_window(a) ? "growth by site (allocated in the window, live at its end)"
                                                  : "growth by site (allocated in the window, live at detach)");
    else if (unjudged) {
        char title[96];
        snprintf(title, sizeof title, "live by site %s", u.when);
        live_sites(o, a, top, title);
    }
    else fputs("\ntop leaks:\n", o);
    shown = 0;
    for (size_t i = 0; i < L->ngroups && shown < top && !attached && !unjudged; i++) {
        const ml_leak_group_t *g = &L->groups[i];
        fprintf(o, "  %10s %-9s %6" PRIu64 " blocks%s  ", bytes(g->bytes, b1, sizeof b1),
                ml_leak_kind_name(g->kind), g->blocks, g->suppressed ? " (suppressed)" : "");
        if (g->site < n) site_lines(o, &s[g->site]);
        else fputc('\n', o);
        shown++;
    }
    if (!shown && !attached && !unjudged) fputs("  (none)\n", o);

    fputs("\nfragmentation:\n", o);
    frag_line(o, "at peak", ml_analysis_frag(a, ML_MOMENT_PEAK));
    frag_line(o, "at end", ml_analysis_frag(a, ML_MOMENT_END));
    frag_line(o, "worst", ml_analysis_frag(a, ML_MOMENT_WORST));

    gpu_lines(o, a, top);
    gpu_pool_lines(o, ml_analysis_gpu(a));

    const char *const *w;
    size_t nw = ml_analysis_warnings(a, &w);
    if (nw) fputs("\nwarnings:\n", o);
    for (size_t i = 0; i < nw; i++) fprintf(o, "  %s\n", w[i]);
    return ferror(o) ? -EIO : 0;
}

/* For the merged report (text_merged.c): the same lines for its sites. */
void ml__text_where(FILE *o, const ml_frame_t *f) {
    where(o, f);
}

void ml__text_site_lines(FILE *o, const ml_site_t *s) {
    site_lines(o, s);
}
