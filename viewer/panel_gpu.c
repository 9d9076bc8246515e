/* panel_gpu.c - the GPU view: one device at a time, in full.
 *
 * What the report's "gpu" object says (report/gpu_json.c), from the same
 * analysis (analysis/ml_gpu.h, copied by the model): the device's peak and
 * when, live and leaked bytes (context destruction included), calls, failed
 * and unknown frees, pinned host memory, the address-space fragmentation at
 * the peak and at the end, empty-cache cycles and pool trims, the per-kind
 * table, then three site lists: what held the peak, what leaked, and churn
 * (alloc/free pairs per second).
 *
 * The view is a text view (ml_lines_t) in which the site rows are
 * selectable. Up/Down go from site row to site row while the next one is on
 * screen (or just below it) and scroll the text otherwise, the way a pager
 * with links does, so the device's numbers above the lists stay reachable
 * with the same keys. Enter shows or hides the selected site's full stack
 * inline, below its row: the Site view (panel_site.c) is built around the
 * heap's sites (histograms, pinned pages, the advisor's suggestion) and a
 * GPU site has none of those, so its stack stays here. Left/Right switch
 * devices.
 */
#include "viewer_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sites whose stack is shown, per device (switching device clears them). */
#define MAX_EXPANDED 64
#define LABEL_W 15
#define INDENT "        "

typedef struct {
    ml_panel_t super;
    ml_lines_t lines;
    /* Per line: -1, or the site row it is (list * ML_VGPU_MAX_SITES + index). */
    int32_t *ref;
    int cap_ref;
    uint32_t dev; /* index of the device shown */
    uint64_t expanded[MAX_EXPANDED];
    int nexpanded;
    /* The site just expanded, and the last line of its stack once built: the
     * next draw scrolls it into view. */
    uint64_t reveal;
    bool revealing;
    int reveal_end;
} gpu_t;

/* ------------------------------------------------------------------------- */
/* Building the text                                                         */
/* ------------------------------------------------------------------------- */

/* A site's identity on its device, with the list it is shown in. */
static uint64_t site_key(int list, const ml_vgpu_site_t *s) {
    return (uint64_t)list << 48 | (uint64_t)s->stack << 8 | s->kind;
}

static bool is_expanded(const gpu_t *p, uint64_t key) {
    for (int i = 0; i < p->nexpanded; i++)
        if (p->expanded[i] == key) return true;
    return false;
}

static void toggle(gpu_t *p, uint64_t key) {
    for (int i = 0; i < p->nexpanded; i++)
        if (p->expanded[i] == key) {
            p->expanded[i] = p->expanded[--p->nexpanded];
            return;
        }
    if (p->nexpanded < MAX_EXPANDED) p->expanded[p->nexpanded++] = key;
}

/* Adds a line and its ref (-1: not a site row). */
static void add(gpu_t *p, int32_t ref, const char *label, int style, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add(gpu_t *p, int32_t ref, const char *label, int style, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (p->lines.n >= p->cap_ref) {
        int ncap = p->cap_ref ? p->cap_ref * 2 : 64;
        int32_t *r = realloc(p->ref, (size_t)ncap * sizeof *r);
        if (!r) return;
        p->ref = r;
        p->cap_ref = ncap;
    }
    int n = p->lines.n;
    if (ml__lines_add(&p->lines, label, style, "%s", buf)) p->ref[n] = ref;
}

static void frag_lines(gpu_t *p, const char *label, const char *when, const ml_vgpu_frag_t *f) {
    char b1[16], b2[16], b3[16], b4[16];
    if (!f->valid) {
        add(p, -1, label, ML_ST_DIM, "%s: nothing recorded", when);
        return;
    }
    if (!f->blocks) {
        add(p, -1, label, ML_ST_NORMAL, "%s: nothing live", when);
        return;
    }
    char regions[48] = "";
    if (f->regions > 1) snprintf(regions, sizeof regions, " in %" PRIu64 " regions", f->regions);
    add(p, -1, label, ML_ST_NORMAL, "%s: %s in %" PRIu64 " blocks over a %s span%s (%.0f%% utilization)",
        when, ml__fmt_bytes(f->live_bytes, b1, sizeof b1), f->blocks,
        ml__fmt_bytes(f->span_bytes, b2, sizeof b2), regions, f->utilization * 100);
    if (!f->holes)
        add(p, -1, "", ML_ST_NORMAL, "%*sno holes", (int)strlen(when) + 2, "");
    else
        add(p, -1, "", ML_ST_NORMAL, "%*s%" PRIu64 " holes of %s, the largest %s (external fragmentation %.0f%%)",
            (int)strlen(when) + 2, "", f->holes, ml__fmt_bytes(f->hole_bytes, b3, sizeof b3),
            ml__fmt_bytes(f->largest_hole_bytes, b4, sizeof b4), f->external * 100);
}

static void kind_table(gpu_t *p, const ml_vgpu_device_t *d) {
    add(p, -1, NULL, ML_ST_HEADER, "%-16s%7s%7s%8s%8s%8s%8s", "KIND", "ALLOCS", "FREES", "ALLOC",
        "PEAK", "LIVE", "LEAKED");
    for (uint32_t i = 0; i < d->nkinds; i++) {
        const ml_vgpu_kind_t *k = &d->kinds[i];
        char c1[16], c2[16], b1[16], b2[16], b3[16], b4[16];
        add(p, -1, NULL, k->leaked_bytes ? ML_ST_WARN : ML_ST_NORMAL, "%-16s%7s%7s%8s%8s%8s%8s",
            k->name, ml__fmt_count(k->alloc_calls, c1, sizeof c1),
            ml__fmt_count(k->free_calls, c2, sizeof c2),
            ml__fmt_bytes(k->bytes_allocated, b1, sizeof b1),
            ml__fmt_bytes(k->peak_bytes, b2, sizeof b2),
            ml__fmt_bytes(k->live_bytes, b3, sizeof b3),
            ml__fmt_bytes(k->leaked_bytes, b4, sizeof b4));
    }
}

/* "function  file:line < caller": the code that called CUDA, and who
 * called it (a wrapper around cudaMalloc is common; its caller tells the
 * sites apart). */
static const char *site_where(const ml_vgpu_site_t *s, char *buf, size_t len) {
    if (!s->nframes) {
        snprintf(buf, len, "(no stack yet)");
        return buf;
    }
    char f0[512];
    ml__fmt_frame(&s->frames[0], f0, sizeof f0);
    if (s->nframes > 1 && s->frames[1].function)
        snprintf(buf, len, "%s < %s", f0, s->frames[1].function);
    else
        snprintf(buf, len, "%s", f0);
    return buf;
}

static void site_stack(gpu_t *p, const ml_vgpu_site_t *s) {
    char b1[16], b2[16], b3[16], b4[16], t[16];
    ml__fmt_bytes(s->bytes_allocated, b1, sizeof b1);
    if (s->min_size == s->max_size)
        add(p, -1, NULL, ML_ST_DIM, INDENT "%" PRIu64 " allocs of %s, %s allocated", s->alloc_calls,
            ml__fmt_bytes(s->min_size, b2, sizeof b2), b1);
    else
        add(p, -1, NULL, ML_ST_DIM,
            INDENT "%" PRIu64 " allocs, %s allocated, sizes %s to %s, most often %s",
            s->alloc_calls, b1, ml__fmt_bytes(s->min_size, b2, sizeof b2),
            ml__fmt_bytes(s->max_size, b3, sizeof b3), ml__fmt_bytes(s->top_size, b4, sizeof b4));
    if (s->pairs)
        add(p, -1, NULL, ML_ST_DIM, INDENT "%" PRIu64 " alloc/free pairs (%.1f/s), %s on average",
            s->pairs, s->pairs_per_s,
            ml__fmt_time((uint32_t)(s->mean_lifetime_ms + 0.5), t, sizeof t));
    if (!s->nframes) {
        add(p, -1, NULL, ML_ST_DIM, INDENT "no symbolized stack (still loading?)");
        return;
    }
    for (uint32_t i = 0; i < s->nframes; i++) {
        const ml_vframe_t *fr = &s->frames[i];
        /* Base names: at 80 columns a full path would hide the line. */
        const char *mod = fr->module ? strrchr(fr->module, '/') : NULL;
        mod = mod ? mod + 1 : fr->module;
        const char *file = fr->file ? strrchr(fr->file, '/') : NULL;
        file = file ? file + 1 : fr->file;
        char where[400];
        if (file)
            snprintf(where, sizeof where, "%s:%u", file, fr->line);
        else
            snprintf(where, sizeof where, "0x%" PRIx64, fr->address);
        add(p, -1, NULL, ML_ST_NORMAL, INDENT "#%-2u %s  %s%s%s%s", i,
            fr->function ? fr->function : "??", where, mod ? "  [" : "", mod ? mod : "",
            mod ? "]" : "");
    }
}

static void site_list(gpu_t *p, const ml_vgpu_device_t *d, int list) {
    static const char *const titles[ML_VGPU_LISTS_] = {"Peak sites", "Leak sites", "Churn"};
    static const char *const what[ML_VGPU_LISTS_] = {
        "what held the device's peak; Enter shows a stack",
        "live at exit or freed by context destruction",
        "alloc/free pairs per second",
    };
    uint32_t n = d->nsites[list];
    add(p, -1, titles[list], ML_ST_DIM, "%s", n ? what[list] : "none");
    if (!n) return;
    if (list == ML_VGPU_CHURN)
        add(p, -1, NULL, ML_ST_HEADER, "%8s %6s  %-15s %s", "PAIRS/S", "PAIRS", "KIND",
            "CALLED CUDA (function, file:line) < caller");
    else
        add(p, -1, NULL, ML_ST_HEADER, "%8s %6s  %-15s %s", "BYTES", "BLOCKS", "KIND",
            "CALLED CUDA (function, file:line) < caller");
    for (uint32_t i = 0; i < n; i++) {
        const ml_vgpu_site_t *s = &d->sites[list][i];
        char n1[16], n2[16], where[700];
        if (list == ML_VGPU_CHURN) {
            if (s->pairs_per_s < 1000)
                snprintf(n1, sizeof n1, "%.1f", s->pairs_per_s);
            else
                ml__fmt_count((uint64_t)(s->pairs_per_s + 0.5), n1, sizeof n1);
            ml__fmt_count(s->pairs, n2, sizeof n2);
        } else {
            ml__fmt_bytes(s->bytes, n1, sizeof n1);
            ml__fmt_count(s->blocks, n2, sizeof n2);
        }
        add(p, list * ML_VGPU_MAX_SITES + (int32_t)i, NULL,
            list == ML_VGPU_LEAK ? ML_ST_WARN : ML_ST_NORMAL, "%8s %6s  %-15s %s", n1, n2,
            s->kind_name, site_where(s, where, sizeof where));
        if (s->ctx_destroy_bytes)
            add(p, -1, NULL, ML_ST_DIM, INDENT "%s of it freed by context destruction",
                ml__fmt_bytes_long(s->ctx_destroy_bytes, where, sizeof where));
        uint64_t key = site_key(list, s);
        if (is_expanded(p, key)) {
            site_stack(p, s);
            if (p->revealing && key == p->reveal) p->reveal_end = p->lines.n - 1;
        }
    }
}

static void build(gpu_t *p) {
    ml_lines_t *l = &p->lines;
    ml_vmodel_t *m = p->super.m;
    const ml_vsummary_t *sum = ml_vmodel_summary(m);
    bool running = sum->state == ML_VPROC_RUNNING || sum->state == ML_VPROC_LOADING;
    ml__lines_clear(l);
    l->label_w = LABEL_W;
    uint32_t nd = ml_vmodel_gpu_ndevices(m);
    if (!nd) {
        add(p, -1, "GPU", ML_ST_DIM, "no GPU allocations recorded in this trace%s",
            running ? " (so far)" : "");
        add(p, -1, "", ML_ST_DIM, "(memlens run records CUDA allocations unless --no-gpu is");
        add(p, -1, "", ML_ST_DIM, "given; docs/gpu.md says how and when it attaches)");
        return;
    }
    if (p->dev >= nd) p->dev = 0;
    const ml_vgpu_device_t *d = ml_vmodel_gpu_device(m, p->dev);
    char b1[48], b2[48], tm[32];
    if (d->device < 0)
        add(p, -1, "Device", ML_ST_BOLD, "unknown (events the collector could not attribute)");
    else
        add(p, -1, "Device", ML_ST_BOLD, "%d", (int)d->device);
    add(p, -1, "Peak", ML_ST_BOLD, "%s in %" PRIu64 " blocks at %s",
        ml__fmt_bytes_long(d->peak_bytes, b1, sizeof b1), d->peak_blocks,
        ml__fmt_time(d->peak_time_ms, tm, sizeof tm));
    add(p, -1, running ? "Live now" : "Live at exit", ML_ST_NORMAL, "%s in %" PRIu64 " blocks",
        ml__fmt_bytes_long(d->live_bytes, b1, sizeof b1), d->live_blocks);
    add(p, -1, "Leaked", d->leaked_bytes ? ML_ST_WARN : ML_ST_GOOD, "%s in %" PRIu64 " blocks",
        ml__fmt_bytes_long(d->leaked_bytes, b1, sizeof b1), d->leaked_blocks);
    add(p, -1, "", d->ctx_destroy_bytes ? ML_ST_WARN : ML_ST_DIM,
        "at context destroy: %s in %" PRIu64 " blocks",
        ml__fmt_bytes_long(d->ctx_destroy_bytes, b2, sizeof b2), d->ctx_destroy_blocks);
    add(p, -1, "Calls", ML_ST_NORMAL,
        "%" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " failed frees, %" PRIu64
        " unknown frees",
        d->alloc_calls, d->free_calls, d->failed_frees, d->unknown_frees);
    add(p, -1, "Allocated", ML_ST_NORMAL, "%s in total (every kind)",
        ml__fmt_bytes_long(d->bytes_allocated, b1, sizeof b1));
    if (d->pinned_alloc_calls || d->pinned_free_calls) {
        char c1[16], c2[16], c3[16], c4[16];
        add(p, -1, "Pinned host", d->pinned_leaked_bytes ? ML_ST_WARN : ML_ST_NORMAL,
            "peak %s, live %s, leaked %s, %s allocated",
            ml__fmt_bytes(d->pinned_peak_bytes, c1, sizeof c1),
            ml__fmt_bytes(d->pinned_live_bytes, c2, sizeof c2),
            ml__fmt_bytes(d->pinned_leaked_bytes, c3, sizeof c3),
            ml__fmt_bytes(d->pinned_bytes_allocated, c4, sizeof c4));
        add(p, -1, "", ML_ST_NORMAL, "%" PRIu64 " allocs, %" PRIu64 " frees", d->pinned_alloc_calls,
            d->pinned_free_calls);
    } else {
        add(p, -1, "Pinned host", ML_ST_DIM, "none");
    }
    frag_lines(p, "Address space", "at peak", &d->frag_peak);
    frag_lines(p, "", "at end", &d->frag_end);
    add(p, -1, "Empty cache", d->empty_cache_cycles ? ML_ST_WARN : ML_ST_NORMAL,
        "%u drain/refill cycles, %u pool trims", d->empty_cache_cycles, d->pool_trims);
    add(p, -1, NULL, ML_ST_NORMAL, " ");
    kind_table(p, d);
    for (int list = 0; list < ML_VGPU_LISTS_; list++) {
        add(p, -1, NULL, ML_ST_NORMAL, " ");
        site_list(p, d, list);
    }
}

/* ------------------------------------------------------------------------- */
/* Selection among the site rows                                             */
/* ------------------------------------------------------------------------- */

static bool selectable(const gpu_t *p, int line) {
    return line >= 0 && line < p->lines.n && p->ref[line] >= 0;
}

static bool on_screen(const ml_panel_t *P, int line) {
    return line >= P->top && line < P->top + P->h;
}

static int max_top(const gpu_t *p) {
    int max = p->lines.n - p->super.h;
    return max > 0 ? max : 0;
}

static void clamp_top(gpu_t *p) {
    if (p->super.top > max_top(p)) p->super.top = max_top(p);
    if (p->super.top < 0) p->super.top = 0;
}

/* The selection is always a line on screen (the layout's ml__panel_clamp
 * keeps a panel's sel on screen, and would scroll to it otherwise); only a
 * site row is highlighted. When sel is not a site row on screen any more, it
 * moves to the first (or last) site row on screen, else to the top line. */
static void fix_sel(gpu_t *p, bool last) {
    ml_panel_t *P = &p->super;
    if (selectable(p, P->sel) && on_screen(P, P->sel)) return;
    int lo = P->top, hi = P->top + P->h - 1;
    if (hi >= p->lines.n) hi = p->lines.n - 1;
    for (int i = last ? hi : lo; last ? i >= lo : i <= hi; i += last ? -1 : 1)
        if (selectable(p, i)) {
            P->sel = i;
            return;
        }
    P->sel = P->top;
}

static void scroll(gpu_t *p, int by) {
    p->super.top += by;
    clamp_top(p);
    fix_sel(p, by < 0);
}

/* Down: the next site row when it is on screen or just below it (the view
 * follows), else one line of scrolling. Up likewise. */
static void move(gpu_t *p, int dir) {
    ml_panel_t *P = &p->super;
    bool have = selectable(p, P->sel) && on_screen(P, P->sel);
    int from = have ? P->sel : (dir > 0 ? P->top - 1 : P->top + P->h);
    int n = from + dir;
    while (n >= 0 && n < p->lines.n && !selectable(p, n))
        n += dir;
    if (n >= 0 && n < p->lines.n && n >= P->top - 1 && n <= P->top + P->h) {
        P->sel = n;
        if (n < P->top) P->top = n;
        if (n >= P->top + P->h) P->top = n - P->h + 1;
        clamp_top(p);
        return;
    }
    scroll(p, dir);
}

static void switch_device(gpu_t *p, int dir) {
    uint32_t nd = ml_vmodel_gpu_ndevices(p->super.m);
    if (nd < 2) {
        ml__sm_message(p->super.sm, nd ? "This trace has one GPU device." : "No GPU devices.");
        return;
    }
    p->dev = (p->dev + nd + (uint32_t)(dir > 0 ? 1 : -1)) % nd;
    p->nexpanded = 0;
    p->super.top = p->super.sel = 0;
}

/* ------------------------------------------------------------------------- */
/* Class                                                                     */
/* ------------------------------------------------------------------------- */

static void gpu_draw(ml_panel_t *P, ml_canvas_t *c) {
    gpu_t *p = (gpu_t *)P;
    p->reveal_end = -1;
    build(p);
    if (p->revealing && p->reveal_end >= P->top + P->h) {
        /* Show the stack just opened, as much as fits below its row. */
        int top = p->reveal_end - P->h + 1;
        P->top = top < P->sel ? top : P->sel;
    }
    p->revealing = false;
    clamp_top(p);
    fix_sel(p, false);
    ml__lines_draw(P, c, &p->lines, false);
    if (selectable(p, P->sel) && on_screen(P, P->sel))
        ml__canvas_restyle(c, P->x, P->y + P->sel - P->top, P->w - 1, ML_ST_SELECTED);
}

static void gpu_header(ml_panel_t *P, ml_canvas_t *c, int y) {
    gpu_t *p = (gpu_t *)P;
    uint32_t nd = ml_vmodel_gpu_ndevices(P->m);
    if (!nd) {
        ml__canvas_text(c, 1, y, c->cols - 1, ML_ST_HEADER, "GPU");
        return;
    }
    const ml_vgpu_device_t *d = ml_vmodel_gpu_device(P->m, p->dev < nd ? p->dev : 0);
    char dev[32];
    if (d->device < 0)
        snprintf(dev, sizeof dev, "unknown device");
    else
        snprintf(dev, sizeof dev, "device %d", (int)d->device);
    ml__canvas_printf(c, 1, y, c->cols - 1, ML_ST_HEADER, "GPU  %s  (%u of %u)%s", dev,
                      (p->dev < nd ? p->dev : 0) + 1, nd,
                      nd > 1 ? "  Left/Right: other device" : "");
}

static int gpu_key(ml_panel_t *P, int key) {
    gpu_t *p = (gpu_t *)P;
    int page = P->h > 1 ? P->h - 1 : 1;
    switch (key) {
    case ML_KEY_LEFT:
    case 'h':
        switch_device(p, -1);
        break;
    case ML_KEY_RIGHT:
    case 'l':
        switch_device(p, 1);
        break;
    case ML_KEY_UP:
    case 'k':
        move(p, -1);
        break;
    case ML_KEY_DOWN:
    case 'j':
        move(p, 1);
        break;
    case ML_KEY_PGUP:
    case 2: /* Ctrl-B */
        scroll(p, -page);
        break;
    case ML_KEY_PGDN:
    case 6: /* Ctrl-F */
    case ' ':
        scroll(p, page);
        break;
    case ML_KEY_HOME:
    case 'g':
        P->top = P->sel = 0;
        fix_sel(p, false);
        break;
    case ML_KEY_END:
    case 'G':
        P->top = max_top(p);
        P->sel = -1; /* the last site row, not the one selected */
        fix_sel(p, true);
        break;
    case ML_KEY_WHEELUP:
        scroll(p, -3);
        break;
    case ML_KEY_WHEELDOWN:
        scroll(p, 3);
        break;
    case ML_KEY_ENTER:
        if (selectable(p, P->sel) && on_screen(P, P->sel)) {
            int32_t r = p->ref[P->sel];
            int list = r / ML_VGPU_MAX_SITES;
            const ml_vgpu_device_t *d = ml_vmodel_gpu_device(P->m, p->dev);
            if (d && (uint32_t)(r % ML_VGPU_MAX_SITES) < d->nsites[list]) {
                uint64_t k = site_key(list, &d->sites[list][r % ML_VGPU_MAX_SITES]);
                toggle(p, k);
                p->reveal = k;
                p->revealing = is_expanded(p, k);
            }
        } else {
            ml__sm_message(P->sm, "Select a site row (Up/Down) to see its stack.");
        }
        break;
    default:
        if (key >= ML_KEY_CLICK && key <= ML_KEY_CLICK_MAX_) {
            int line = P->top + (key - ML_KEY_CLICK);
            if (selectable(p, line)) P->sel = line;
            break;
        }
        return ML_IGNORED;
    }
    return ML_HANDLED | ML_REDRAW;
}

static void gpu_destroy(ml_panel_t *P) {
    gpu_t *p = (gpu_t *)P;
    ml__lines_free(&p->lines);
    free(p->ref);
    free(p);
}

static const ml_panel_class_t gpu_class = {
    .name = "GPU",
    .help = "Left/Right, h/l\tprevious / next GPU device\n"
            "Up/Down, j/k\tselect a site row (the text scrolls between them)\n"
            "Enter\tshow / hide the selected site's full stack\n"
            "PgUp/PgDn, g/G\tscroll; first / last\n",
    .draw = gpu_draw,
    .on_key = gpu_key,
    .print_header = gpu_header,
    .destroy = gpu_destroy,
};

ml_panel_t *ml__panel_gpu_new(ml_screen_t *sm) {
    gpu_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->super.cls = &gpu_class;
    p->super.sm = sm;
    p->super.m = ml__sm_model(sm);
    return &p->super;
}

void ml__panel_gpu_device(ml_panel_t *P, uint32_t index) {
    gpu_t *p = (gpu_t *)P;
    if (p->dev != index) {
        p->dev = index;
        p->nexpanded = 0;
        P->top = P->sel = 0;
    }
}

uint32_t ml__panel_gpu_shown(const ml_panel_t *P) {
    return ((const gpu_t *)P)->dev;
}
