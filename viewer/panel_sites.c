/* panel_sites.c - the Sites view: one row per allocation site (unique
 * stack), sortable by peak, leaked, allocated bytes, calls or temporary
 * allocations; Enter opens the site. */
#include "viewer_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    ml_panel_t super;
    uint32_t sel_site; /* keeps the selection on its site across refreshes and sorts */
} sites_t;

/* The frame worth showing for a site: its headline, the first frame of
 * the program's own code (frames[0] when none is), fitted to width cells
 * (width < 0: in full, for sideways scrolling). */
static void site_label(const ml_vsite_t *s, int width, char *buf, size_t len) {
    if (!s->nframes)
        snprintf(buf, len, "(no stack)");
    else if (width < 0)
        ml__fmt_frame(&s->frames[s->headline], buf, len);
    else
        ml__fmt_frame_fit(&s->frames[s->headline], width, buf, len);
}

/* The site numbers' column: "#" and the digits of the largest number. */
static int number_width(const ml_panel_t *P) {
    uint32_t max = 0;
    for (uint32_t i = 0; i < (uint32_t)P->count; i++) {
        const ml_vsite_t *s = ml_vmodel_site_at(P->m, i);
        if (s->number > max) max = s->number;
    }
    int w = 2;
    while (max >= 10) {
        max /= 10;
        w++;
    }
    return w;
}

static void select_site(sites_t *p) {
    ml_panel_t *P = &p->super;
    P->count = (int)ml_vmodel_nsites(P->m);
    if (p->sel_site != ML_VSITE_NONE) {
        for (int i = 0; i < P->count; i++) {
            if (ml_vmodel_site_at(P->m, (uint32_t)i)->id == p->sel_site) {
                P->sel = i;
                break;
            }
        }
    }
    ml__panel_clamp(P);
}

static void remember(sites_t *p) {
    const ml_vsite_t *s = ml_vmodel_site_at(p->super.m, (uint32_t)p->super.sel);
    p->sel_site = s ? s->id : ML_VSITE_NONE;
}

static void sites_draw(ml_panel_t *P, ml_canvas_t *c) {
    sites_t *p = (sites_t *)P;
    select_site(p);
    const ml_vsummary_t *sum = ml_vmodel_summary(P->m);
    if (P->count == 0) {
        const char *why = sum->nsites               ? "No site matches the filter (Esc clears it)."
                          : ml_vmodel_loading(P->m) ? "Loading..."
                          : sum->totals.alloc_calls
                              ? "No per-site statistics in this build's analysis."
                              : "No allocations recorded.";
        ml__canvas_text(c, P->x + 1, P->y, P->w - 1, ML_ST_DIM, why);
        return;
    }
    ml_vsort_t sort = ml_vmodel_sort(P->m);
    int num_w = number_width(P);
    int num_x = P->x + ML__NCOST * ML__COLW + 2, text_x = num_x + num_w + 1;
    int room = P->x + P->w - 1 - text_x;
    P->hmax = 0;
    for (int i = 0; i < P->h && P->top + i < P->count; i++) {
        const ml_vsite_t *s = ml_vmodel_site_at(P->m, (uint32_t)(P->top + i));
        int y = P->y + i;
        char b[16], label[512], full[512];
        for (int k = 0; k < ML__NCOST; k++) {
            uint64_t v = ml_vmodel_site_cost(s, ml__cost_columns[k].key);
            if (ml__cost_columns[k].key == ML_VSORT_CALLS ||
                ml__cost_columns[k].key == ML_VSORT_TEMPORARY)
                ml__fmt_count(v, b, sizeof b);
            else
                ml__fmt_bytes(v, b, sizeof b);
            int style = v == 0                            ? ML_ST_DIM
                        : ml__cost_columns[k].key == sort ? ML_ST_BOLD
                                                          : ML_ST_NORMAL;
            if (ml__cost_columns[k].key == ML_VSORT_LEAKED && v) style = ML_ST_WARN;
            ml__canvas_rtext(c, P->x + (k + 1) * ML__COLW, y, style, b);
        }
        snprintf(b, sizeof b, "#%u", s->number);
        ml__canvas_rtext(c, num_x + num_w, y, ML_ST_DIM, b);
        site_label(s, room, label, sizeof label);
        site_label(s, -1, full, sizeof full);
        ml__panel_htext(P, c, text_x, y, room, ML_ST_NORMAL, label, full);
        if (P->top + i == P->sel) ml__canvas_restyle(c, P->x, y, P->w - 1, ML_ST_SELECTED);
    }
    ml__panel_scrollbar(P, c);
}

static void sites_header(ml_panel_t *P, ml_canvas_t *c, int y) {
    ml__panel_cost_header(P, c, y);
    char t[96];
    uint32_t n = ml_vmodel_nsites(P->m);
    P->count = (int)n;
    int num_w = number_width(P);
    int room = P->w - ML__NCOST * ML__COLW - 3;
    /* The number of sites is never cut: on a narrow screen (80 columns and
     * a thousand sites, 60 columns and any) the column's name gives way. */
    static const char *const names[] = {" SITE (function, file:line)  ", " SITE  ", " "};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(t, sizeof t, "%-*s%s%u", num_w, "#", names[i], n);
        if ((int)strlen(t) <= room) break;
    }
    ml__canvas_text(c, P->x + ML__NCOST * ML__COLW + 2, y, room, ML_ST_HEADER, t);
}

static int sites_key(ml_panel_t *P, int key) {
    sites_t *p = (sites_t *)P;
    select_site(p);
    ml_vsort_t want = ml__panel_sort_key(ml_vmodel_sort(P->m), key);
    if (want == ML_VSORT_COUNT_ && (ml__panel_hscroll_key(P, key, true) & ML_HANDLED))
        return ML_HANDLED | ML_REDRAW;
    if (want == ML_VSORT_COUNT_) switch (key) {
        case ML_KEY_LEFT:
        case 'h':
            return ML_HANDLED; /* already at the left edge */
        case ML_KEY_ENTER: {
            const ml_vsite_t *s = ml_vmodel_site_at(P->m, (uint32_t)P->sel);
            if (s) ml__sm_open_site(P->sm, s->id);
            return ML_HANDLED | ML_REDRAW;
        }
        default: {
            int r = ml__panel_list_key(P, key);
            if (r & ML_HANDLED) remember(p);
            return r;
        }
        }
    ml_vmodel_set_sort(P->m, want);
    ml__sm_data_changed(P->sm);
    select_site(p);
    ml__sm_message(P->sm, "Sorted by %s.", ml_vmodel_sort_name(want));
    return ML_HANDLED | ML_REDRAW;
}

static void sites_on_data(ml_panel_t *P) {
    select_site((sites_t *)P);
}

static const ml_panel_class_t sites_class = {
    .name = "Sites",
    .help = "Enter\topen the selected site: stack, histograms, suggestion\n"
            "Left/Right, h/l\tscroll the names sideways (also [ ])\n"
            "P L A C T\tsort by peak, leaked, allocated, calls, temporary\n"
            "< >, F6\tprevious / next sort column\n"
            "#\tthe site's number, as in the JSON and HTML reports\n",
    .draw = sites_draw,
    .on_key = sites_key,
    .print_header = sites_header,
    .on_data = sites_on_data,
};

ml_panel_t *ml__panel_sites_new(ml_screen_t *sm) {
    sites_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->super.cls = &sites_class;
    p->super.sm = sm;
    p->super.m = ml__sm_model(sm);
    p->sel_site = ML_VSITE_NONE;
    return &p->super;
}

ml_vsort_t ml__panel_sites_sort(const ml_panel_t *p) {
    return ml_vmodel_sort(p->m);
}
