/* panel_site.c - one site in detail: its numbers, the full stack with
 * file:line, the size and lifetime histograms, and its suggestion. */
#include "viewer_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUCKETS 40

typedef struct {
    ml_panel_t super;
    uint32_t site;
    ml_lines_t lines;
} site_t;

static const char *leak_kind(ml_vleak_t k) {
    switch (k) {
    case ML_VLEAK_DEFINITE:
        return "definite";
    case ML_VLEAK_INDIRECT:
        return "indirect";
    case ML_VLEAK_REACHABLE:
        return "reachable";
    case ML_VLEAK_POSSIBLE:
        return "possible";
    default:
        return NULL;
    }
}

static void bucket_label(ml_vhist_t kind, const ml_vbucket_t *b, char *buf, size_t len) {
    /* Buckets are (lo, hi]: label them lo+1 .. hi. */
    char lo[16], hi[16];
    uint64_t first = b->lo + (b->lo ? 1 : 0);
    if (kind == ML_VHIST_SIZE) {
        ml__fmt_bytes(first, lo, sizeof lo);
        ml__fmt_bytes(b->hi, hi, sizeof hi);
    } else {
        snprintf(lo, sizeof lo, "%" PRIu64 "ms", first);
        if (b->hi >= 1000)
            ml__fmt_time((uint32_t)(b->hi > UINT32_MAX ? UINT32_MAX : b->hi), hi, sizeof hi);
        else
            snprintf(hi, sizeof hi, "%" PRIu64 "ms", b->hi);
    }
    if (!strcmp(lo, hi))
        snprintf(buf, len, "%s", hi);
    else
        snprintf(buf, len, "%s-%s", lo, hi);
}

/* The analysis counts histogram buckets for the whole program and marks,
 * per site, which buckets the site touched: the bars are the program's, the
 * bullet marks this site's buckets. */
static void histogram(site_t *p, ml_vhist_t kind, const char *title, int width) {
    ml_vbucket_t b[MAX_BUCKETS];
    uint32_t n = ml_vmodel_site_hist(p->super.m, p->site, kind, b, MAX_BUCKETS);
    ml_lines_t *l = &p->lines;
    if (!n) {
        ml__lines_add(l, title, ML_ST_DIM,
                      kind == ML_VHIST_LIFETIME ? "no block of this site was freed"
                                                : "not available");
        return;
    }
    ml__lines_add(l, title, ML_ST_DIM, "bars: the whole program; * where this site allocates");
    uint64_t max = 1;
    for (uint32_t i = 0; i < n; i++)
        if (b[i].count > max) max = b[i].count;
    int barw = width - 12 - 16 - 12;
    if (barw < 8) barw = 8;
    if (barw > 40) barw = 40;
    bool u = ml__sm_unicode(p->super.sm);
    for (uint32_t i = 0; i < n; i++) {
        char label[40], bar[40 * 3 + 4];
        bucket_label(kind, &b[i], label, sizeof label);
        int len = b[i].count ? (int)((b[i].count * (uint64_t)barw + max - 1) / max) : 0;
        size_t o = 0;
        for (int k = 0; k < len; k++)
            o += (size_t)snprintf(bar + o, sizeof bar - o, "%s", u ? "\xe2\x96\x88" : "#");
        bar[o] = '\0';
        ml__lines_add(l, b[i].mine ? "          *" : "", b[i].mine ? ML_ST_HEAP : ML_ST_DIM,
                      "%-15s %s %" PRIu64, label, bar, b[i].count);
    }
}

static void build(site_t *p, int width) {
    ml_lines_t *l = &p->lines;
    ml_vmodel_t *m = p->super.m;
    ml__lines_clear(l);
    l->label_w = 12;
    const ml_vsite_t *s = ml_vmodel_site(m, p->site);
    if (!s) {
        ml__lines_add(l, NULL, ML_ST_DIM, "No site selected (open one from Sites with Enter).");
        return;
    }
    char b1[48], b2[48], f[640];
    const ml_vsummary_t *sum = ml_vmodel_summary(m);
    bool running = sum->state == ML_VPROC_RUNNING || sum->state == ML_VPROC_LOADING;
    ml__lines_add(l, "Function", ML_ST_BOLD, "%s",
                  s->nframes ? ml__fmt_frame(&s->frames[s->headline], f, sizeof f) : "?");
    ml__lines_add(l, "Peak", ML_ST_NORMAL, "%s live at the heap peak",
                  ml__fmt_bytes_long(s->peak_bytes, b1, sizeof b1));
    if (running) {
        ml__lines_add(l, "Live now", ML_ST_NORMAL, "%s in %" PRIu64 " blocks",
                      ml__fmt_bytes_long(s->live_bytes, b1, sizeof b1), s->live_blocks);
    } else {
        const char *kind = leak_kind(s->leak_kind);
        ml__lines_add(l, "Leaked", s->leaked_bytes ? ML_ST_WARN : ML_ST_NORMAL,
                      "%s in %" PRIu64 " blocks%s%s%s",
                      ml__fmt_bytes_long(s->leaked_bytes, b1, sizeof b1), s->leaked_blocks,
                      kind ? " (" : "", kind ? kind : "", kind ? ")" : "");
    }
    ml__lines_add(l, "Allocated", ML_ST_NORMAL, "%s in %" PRIu64 " calls, %" PRIu64 " temporary",
                  ml__fmt_bytes_long(s->bytes_allocated, b2, sizeof b2), s->alloc_calls,
                  s->temporary_allocs);
    if (s->src) {
        const ml_site_t *a = s->src;
        char b3[16], b4[16], t1[16], t2[16];
        ml__lines_add(l, "Sizes", ML_ST_NORMAL, "%s to %s",
                      ml__fmt_bytes(a->min_size, b3, sizeof b3),
                      ml__fmt_bytes(a->max_size, b4, sizeof b4));
        if (a->freed_blocks)
            ml__lines_add(
                l, "Lifetimes", ML_ST_NORMAL,
                "%s on average, %s at most (%" PRIu64 " freed blocks)",
                ml__fmt_time((uint32_t)(a->lifetime_ms_sum / a->freed_blocks), t1, sizeof t1),
                ml__fmt_time(
                    (uint32_t)(a->lifetime_ms_max > UINT32_MAX ? UINT32_MAX : a->lifetime_ms_max),
                    t2, sizeof t2),
                a->freed_blocks);
        if (a->pinned_pages)
            ml__lines_add(l, "Pins", ML_ST_NORMAL,
                          "%u pages at the end, %u of them less than 25%% used", a->pinned_pages,
                          a->sparse_pinned_pages);
        if (a->suppressed)
            ml__lines_add(l, "Suppressed", ML_ST_DIM, "its leaks match %s",
                          a->suppressed_by ? a->suppressed_by : "a suppression");
    }
    const ml_vsuggestion_t *g = ml_vmodel_site_suggestion(m, s->id);
    if (g) {
        char text[1200];
        snprintf(text, sizeof text, "[%s] %s (saves ~%s; details in 6)", g->strategy, g->message,
                 ml__fmt_bytes(g->estimated_saving_bytes, b1, sizeof b1));
        ml__lines_wrap(l, "Suggestion", ML_ST_GOOD, text, width - l->label_w - 3);
    } else {
        ml__lines_add(l, "Suggestion", ML_ST_DIM, "none for this site");
    }
    ml__lines_add(l, NULL, ML_ST_NORMAL, " ");
    ml__lines_add(l, "Stack", ML_ST_DIM, "(%u frames, innermost first)", s->nframes);
    for (uint32_t i = 0; i < s->nframes; i++) {
        const ml_vframe_t *fr = &s->frames[i];
        const char *mod = fr->module ? strrchr(fr->module, '/') : NULL;
        mod = mod ? mod + 1 : fr->module;
        char where[400];
        if (fr->file)
            snprintf(where, sizeof where, "%s:%u", fr->file, fr->line);
        else
            snprintf(where, sizeof where, "0x%" PRIx64, fr->address);
        ml__lines_add(l, "", ML_ST_NORMAL, "#%-2u %s  %s%s%s%s", i,
                      fr->function ? fr->function : "??", where, mod ? "  [" : "", mod ? mod : "",
                      mod ? "]" : "");
    }
    ml__lines_add(l, NULL, ML_ST_NORMAL, " ");
    histogram(p, ML_VHIST_SIZE, "Sizes", width);
    ml__lines_add(l, NULL, ML_ST_NORMAL, " ");
    histogram(p, ML_VHIST_LIFETIME, "Lifetimes", width);
}

static void site_draw(ml_panel_t *P, ml_canvas_t *c) {
    site_t *p = (site_t *)P;
    build(p, P->w);
    ml__lines_draw(P, c, &p->lines, false);
}

static void site_header(ml_panel_t *P, ml_canvas_t *c, int y) {
    site_t *p = (site_t *)P;
    ml__canvas_printf(c, 1, y, c->cols - 1, ML_ST_HEADER, "Site %u  (Esc goes back)", p->site);
}

static int site_key(ml_panel_t *P, int key) {
    if (key == ML_KEY_LEFT || key == 'h') {
        ml__sm_back(P->sm);
        return ML_HANDLED | ML_REDRAW;
    }
    return ml__lines_key(P, key);
}

static void site_destroy(ml_panel_t *P) {
    site_t *p = (site_t *)P;
    ml__lines_free(&p->lines);
    free(p);
}

static const ml_panel_class_t site_class = {
    .name = "Site",
    .help = "Esc, Left, h\tback to the list\nj/k, PgUp/PgDn\tscroll\n",
    .draw = site_draw,
    .on_key = site_key,
    .print_header = site_header,
    .destroy = site_destroy,
};

ml_panel_t *ml__panel_site_new(ml_screen_t *sm) {
    site_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->super.cls = &site_class;
    p->super.sm = sm;
    p->super.m = ml__sm_model(sm);
    p->site = ML_VSITE_NONE;
    return &p->super;
}

void ml__panel_site_show(ml_panel_t *P, uint32_t site) {
    site_t *p = (site_t *)P;
    p->site = site;
    P->top = 0;
}
