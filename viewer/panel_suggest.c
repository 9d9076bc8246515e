/* panel_suggest.c - the Suggestions view: the strategy advisor's list with
 * estimated savings; the selected one is shown in full below the list, and
 * Enter opens the site it is about. */
#include "viewer_internal.h"

#include <stdlib.h>
#include <string.h>

#define DETAIL_ROWS 5 /* at least; half the body when there is room */

typedef struct {
    ml_panel_t super;
} suggest_t;

/* The detail (message and evidence) gets what a short list leaves. */
static int detail_rows(const ml_panel_t *P) {
    int n = (int)ml_vmodel_nsuggestions(P->m), list = n < P->h / 2 ? n : P->h / 2;
    if (list < 2) list = 2;
    int d = P->h - list - 1;
    return d > DETAIL_ROWS ? d : DETAIL_ROWS;
}

static int list_h(const ml_panel_t *P) {
    int h = P->h - detail_rows(P) - 1;
    return h < 2 ? 2 : h;
}

/* Word-wraps text into at most rows lines of width w cells, from (x, y);
 * a newline starts a new line. */
static int wrap(ml_canvas_t *c, int x, int y, int w, int rows, int style, const char *text) {
    ml_lines_t l = {0};
    ml__lines_wrap(&l, NULL, style, text, w);
    int used = 0;
    for (; used < l.n && used < rows; used++)
        ml__canvas_text(c, x, y + used, w, style, l.v[used].text);
    ml__lines_free(&l);
    return used;
}

/* What the advisor left out to stay within its budgets, one "Left out:"
 * paragraph each, from (x, y) in at most rows lines. */
static void skipped_lines(ml_canvas_t *c, const ml_vmodel_t *m, int x, int y, int w, int rows) {
    const char *why;
    for (size_t i = 0; rows > 0 && (why = ml_vmodel_advice_skipped(m, i)); i++) {
        char line[1100];
        snprintf(line, sizeof line, "Left out: %s", why);
        int used = wrap(c, x, y, w, rows, ML_ST_WARN, line);
        y += used;
        rows -= used;
    }
}

static void suggest_draw(ml_panel_t *P, ml_canvas_t *c) {
    ml_vmodel_t *m = P->m;
    int full_h = P->h;
    P->h = list_h(P);
    P->count = (int)ml_vmodel_nsuggestions(m);
    ml__panel_clamp(P);
    if (!P->count) {
        const ml_vsummary_t *s = ml_vmodel_summary(m);
        const char *why =
            ml_vmodel_loading(m) ? "Loading..."
            : s->advice == ML_VADVICE_RUNNING
                ? "The strategy advisor is replaying the trace through allocator designs..."
            : s->advice == ML_VADVICE_PENDING && s->state == ML_VPROC_RUNNING
                ? "Suggestions come once the program has ended (the advisor replays the whole "
                  "trace)."
            : s->advice == ML_VADVICE_FAILED ? "The strategy advisor failed:"
            : s->advice == ML_VADVICE_OFF ? "The strategy advisor is off (--no-suggestions)."
            : ml_vmodel_advice_skipped(m, 0)
                ? "No suggestions: the advisor left out work that would not fit its budgets "
                  "(--advisor-mem, --advisor-ops):"
                : "No suggestions: nothing in this trace calls for a different strategy.";
        int used = wrap(c, P->x + 1, P->y, P->w - 2, full_h, ML_ST_DIM, why);
        if (s->advice == ML_VADVICE_FAILED)
            ml__canvas_text(c, P->x + 1, P->y + used, P->w - 1, ML_ST_ERROR,
                            ml_vmodel_advice_error(m));
        else
            skipped_lines(c, m, P->x + 1, P->y + used, P->w - 2, full_h - used);
        P->h = full_h;
        return;
    }
    P->hmax = 0;
    for (int i = 0; i < P->h && P->top + i < P->count; i++) {
        const ml_vsuggestion_t *g = ml_vmodel_suggestion_at(m, (uint32_t)(P->top + i));
        int y = P->y + i;
        char b[16], f[512] = "", full[600] = "", fit[512] = "";
        ml__canvas_text(c, P->x + 1, y, 18, ML_ST_BOLD, g->strategy);
        ml__canvas_rtext(c, P->x + 27, y, ML_ST_GOOD,
                         ml__fmt_bytes(g->estimated_saving_bytes, b, sizeof b));
        const ml_vsite_t *s = g->site == ML_VSITE_NONE ? NULL : ml_vmodel_site(m, g->site);
        int room = P->w - 30;
        if (s) {
            /* "#N" as in the Sites view and the reports, then the frame. */
            char no[16];
            int nw = snprintf(no, sizeof no, "#%u ", s->number);
            if (s->nframes) {
                ml__fmt_frame_fit(&s->frames[s->headline], room - nw, f, sizeof f);
                snprintf(fit, sizeof fit, "%s%s", no, f);
                ml__fmt_frame(&s->frames[s->headline], f, sizeof f);
                snprintf(full, sizeof full, "%s%s", no, f);
            } else {
                snprintf(fit, sizeof fit, "%s", no);
                snprintf(full, sizeof full, "%s", no);
            }
        } else {
            snprintf(fit, sizeof fit, "%s", g->site == ML_VSITE_NONE ? "(whole program)" : "");
            snprintf(full, sizeof full, "%s", fit);
        }
        ml__panel_htext(P, c, P->x + 29, y, room, ML_ST_NORMAL, fit, full);
        if (P->top + i == P->sel) ml__canvas_restyle(c, P->x, y, P->w - 1, ML_ST_SELECTED);
    }
    ml__panel_scrollbar(P, c);
    const ml_vsuggestion_t *g = ml_vmodel_suggestion_at(m, (uint32_t)P->sel);
    int y = P->y + P->h, rows = full_h - P->h - 1;
    ml__canvas_fill(c, P->x, y, P->w, 1, ML_G_HLINE, ML_ST_DIM);
    int used = wrap(c, P->x + 1, y + 1, P->w - 2, rows, ML_ST_NORMAL, g->message);
    if (g->evidence && used < rows)
        used += wrap(c, P->x + 1, y + 1 + used, P->w - 2, rows - used, ML_ST_DIM, g->evidence);
    if (ml_vmodel_advice_skipped(m, 0) && used + 1 < rows)
        skipped_lines(c, m, P->x + 1, y + 2 + used, P->w - 2, rows - used - 1);
    P->h = full_h;
}

static void suggest_header(ml_panel_t *P, ml_canvas_t *c, int y) {
    ml__canvas_text(c, P->x + 1, y, -1, ML_ST_HEADER, "STRATEGY");
    ml__canvas_rtext(c, P->x + 27, y, ML_ST_HEADER, "SAVES");
    ml__canvas_text(c, P->x + 29, y, -1, ML_ST_HEADER, "SITE            (Enter opens the site)");
}

static int suggest_key(ml_panel_t *P, int key) {
    int full_h = P->h, r;
    P->h = list_h(P);
    P->count = (int)ml_vmodel_nsuggestions(P->m);
    r = ml__panel_hscroll_key(P, key, true);
    if (r & ML_HANDLED) {
        P->h = full_h;
        return r;
    }
    if (key == ML_KEY_LEFT || key == 'h') {
        r = ML_HANDLED; /* already at the left edge */
    } else if (key == ML_KEY_ENTER) {
        const ml_vsuggestion_t *g = ml_vmodel_suggestion_at(P->m, (uint32_t)P->sel);
        if (g && g->site != ML_VSITE_NONE) ml__sm_open_site(P->sm, g->site);
        r = ML_HANDLED | ML_REDRAW;
    } else {
        r = ml__panel_list_key(P, key);
    }
    P->h = full_h;
    return r;
}

static const ml_panel_class_t suggest_class = {
    .name = "Suggestions",
    .help = "Enter\topen the site a suggestion is about\n"
            "Left/Right, h/l\tscroll the site names sideways (also [ ])\n",
    .draw = suggest_draw,
    .on_key = suggest_key,
    .print_header = suggest_header,
};

ml_panel_t *ml__panel_suggest_new(ml_screen_t *sm) {
    suggest_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->super.cls = &suggest_class;
    p->super.sm = sm;
    p->super.m = ml__sm_model(sm);
    return &p->super;
}
