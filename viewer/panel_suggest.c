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

static int detail_rows(const ml_panel_t *P) {
    return P->h / 2 > DETAIL_ROWS ? P->h / 2 : DETAIL_ROWS;
}

static int list_h(const ml_panel_t *P) {
    int h = P->h - detail_rows(P) - 1;
    return h < 2 ? 2 : h;
}

/* Word-wraps text into at most rows lines of width w, from (x, y). */
static int wrap(ml_canvas_t *c, int x, int y, int w, int rows, int style, const char *text) {
    int used = 0;
    while (*text && used < rows) {
        int len = (int)strlen(text), cut = len;
        if (len > w) {
            cut = w;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0) cut = w;
        }
        char line[512];
        snprintf(line, sizeof line, "%.*s", cut, text);
        ml__canvas_text(c, x, y + used, w, style, line);
        text += cut;
        while (*text == ' ')
            text++;
        used++;
    }
    return used;
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
            : s->advice == ML_VADVICE_OFF
                ? "The strategy advisor is off (--no-suggestions)."
                : "No suggestions: nothing in this trace calls for a different strategy.";
        ml__canvas_text(c, P->x + 1, P->y, P->w - 1, ML_ST_DIM, why);
        if (s->advice == ML_VADVICE_FAILED)
            ml__canvas_text(c, P->x + 1, P->y + 1, P->w - 1, ML_ST_ERROR,
                            ml_vmodel_advice_error(m));
        P->h = full_h;
        return;
    }
    for (int i = 0; i < P->h && P->top + i < P->count; i++) {
        const ml_vsuggestion_t *g = ml_vmodel_suggestion_at(m, (uint32_t)(P->top + i));
        int y = P->y + i;
        char b[16], f[512] = "";
        ml__canvas_text(c, P->x + 1, y, 18, ML_ST_BOLD, g->strategy);
        ml__canvas_rtext(c, P->x + 27, y, ML_ST_GOOD,
                         ml__fmt_bytes(g->estimated_saving_bytes, b, sizeof b));
        const ml_vsite_t *s = g->site == ML_VSITE_NONE ? NULL : ml_vmodel_site(m, g->site);
        if (s && s->nframes)
            ml__fmt_frame(&s->frames[s->headline], f, sizeof f);
        else
            snprintf(f, sizeof f, "%s", g->site == ML_VSITE_NONE ? "(whole program)" : "");
        ml__canvas_text(c, P->x + 29, y, P->w - 30, ML_ST_NORMAL, f);
        if (P->top + i == P->sel) ml__canvas_restyle(c, P->x, y, P->w - 1, ML_ST_SELECTED);
    }
    ml__panel_scrollbar(P, c);
    const ml_vsuggestion_t *g = ml_vmodel_suggestion_at(m, (uint32_t)P->sel);
    int y = P->y + P->h, rows = full_h - P->h - 1;
    ml__canvas_fill(c, P->x, y, P->w, 1, ML_G_HLINE, ML_ST_DIM);
    int used = wrap(c, P->x + 1, y + 1, P->w - 2, rows, ML_ST_NORMAL, g->message);
    if (g->evidence && used < rows)
        wrap(c, P->x + 1, y + 1 + used, P->w - 2, rows - used, ML_ST_DIM, g->evidence);
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
    if (key == ML_KEY_ENTER || key == ML_KEY_RIGHT || key == 'l') {
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
    .help = "Enter, Right\topen the site a suggestion is about\n",
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
