/* panel_tree.c - the Call tree view: top-down (callers first, from main to
 * the allocator) or bottom-up (the allocating functions first, then who
 * called them), with heaptrack-style inclusive cost columns. */
#include "viewer_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    ml_panel_t super;
} tree_t;

static void tree_draw(ml_panel_t *P, ml_canvas_t *c) {
    P->count = (int)ml_vmodel_tree_nrows(P->m);
    ml__panel_clamp(P);
    if (!P->count) {
        ml__canvas_text(c, P->x + 1, P->y, P->w - 1, ML_ST_DIM,
                        ml_vmodel_summary(P->m)->nsites
                            ? "No site matches the filter (Esc clears it)."
                            : "No stacks to show.");
        return;
    }
    ml_vsort_t sort = ml_vmodel_sort(P->m);
    int text_x = P->x + ML__NCOST * ML__COLW + 2;
    P->hmax = 0;
    for (int i = 0; i < P->h && P->top + i < P->count; i++) {
        const ml_vtree_row_t *r = ml_vmodel_tree_row(P->m, (uint32_t)(P->top + i));
        int y = P->y + i;
        char b[16], f[512], full[512];
        for (int k = 0; k < ML__NCOST; k++) {
            uint64_t v = r->incl[ml__cost_columns[k].key];
            if (ml__cost_columns[k].key == ML_VSORT_CALLS ||
                ml__cost_columns[k].key == ML_VSORT_TEMPORARY)
                ml__fmt_count(v, b, sizeof b);
            else
                ml__fmt_bytes(v, b, sizeof b);
            ml__canvas_rtext(c, P->x + (k + 1) * ML__COLW, y,
                             v == 0                            ? ML_ST_DIM
                             : ml__cost_columns[k].key == sort ? ML_ST_BOLD
                                                               : ML_ST_NORMAL,
                             b);
        }
        int indent = (int)r->depth * 2, room = P->x + P->w - 1 - text_x;
        if (indent > room / 2) indent = room / 2; /* deep stacks keep their names visible */
        int x = text_x + indent;
        ml__canvas_put(c, x, y, r->has_children ? (r->expanded ? '-' : '+') : ' ', ML_ST_DIM);
        int w = P->x + P->w - 1 - x - 2;
        ml__fmt_frame_fit(r->frame, w, f, sizeof f);
        ml__fmt_frame(r->frame, full, sizeof full);
        ml__panel_htext(P, c, x + 2, y, w, ML_ST_NORMAL, f, full);
        if (P->top + i == P->sel) ml__canvas_restyle(c, P->x, y, P->w - 1, ML_ST_SELECTED);
    }
    ml__panel_scrollbar(P, c);
}

static void tree_header(ml_panel_t *P, ml_canvas_t *c, int y) {
    ml__panel_cost_header(P, c, y);
    ml__canvas_text(
        c, P->x + ML__NCOST * ML__COLW + 2, y, P->w - ML__NCOST * ML__COLW - 2, ML_ST_HEADER,
        ml_vmodel_tree_bottom_up(P->m) ? "BOTTOM-UP: allocating functions, then callers (b)"
                                       : "TOP-DOWN: callers, then callees (b)");
}

static int tree_key(ml_panel_t *P, int key) {
    P->count = (int)ml_vmodel_tree_nrows(P->m);
    ml__panel_clamp(P);
    const ml_vtree_row_t *r = ml_vmodel_tree_row(P->m, (uint32_t)P->sel);
    ml_vsort_t want = ml__panel_sort_key(ml_vmodel_sort(P->m), key);
    /* Left and Right fold the tree here: [ and ] scroll sideways. */
    if (want == ML_VSORT_COUNT_ && (key == '[' || key == ']'))
        return ml__panel_hscroll_key(P, key, false) | ML_HANDLED;
    if (want == ML_VSORT_COUNT_) switch (key) {
        case ML_KEY_ENTER:
        case ML_KEY_RIGHT:
        case 'l':
        case '+':
            if (r && r->has_children) {
                if (r->expanded && key != '+' && key != ML_KEY_ENTER)
                    P->sel++; /* into the children */
                else
                    ml_vmodel_tree_toggle(P->m, (uint32_t)P->sel,
                                          key == ML_KEY_ENTER ? !r->expanded : true, false);
            }
            return ML_HANDLED | ML_REDRAW;
        case ML_KEY_LEFT:
        case 'h':
        case '-':
            if (r && r->expanded)
                ml_vmodel_tree_toggle(P->m, (uint32_t)P->sel, false, false);
            else if (r)
                P->sel = (int)ml_vmodel_tree_parent_row(P->m, (uint32_t)P->sel);
            ml__panel_clamp(P);
            return ML_HANDLED | ML_REDRAW;
        case '*':
            if (r) ml_vmodel_tree_toggle(P->m, (uint32_t)P->sel, true, true);
            return ML_HANDLED | ML_REDRAW;
        case '_':
            if (r) ml_vmodel_tree_toggle(P->m, (uint32_t)P->sel, false, true);
            return ML_HANDLED | ML_REDRAW;
        case 'b':
        case 't':
            ml_vmodel_tree_set_mode(P->m, !ml_vmodel_tree_bottom_up(P->m));
            P->sel = P->top = 0;
            ml__sm_message(P->sm, "%s call tree.",
                           ml_vmodel_tree_bottom_up(P->m) ? "Bottom-up" : "Top-down");
            return ML_HANDLED | ML_REDRAW;
        default:
            return ml__panel_list_key(P, key);
        }
    ml_vmodel_set_sort(P->m, want);
    ml__sm_data_changed(P->sm);
    ml__sm_message(P->sm, "Sorted by %s.", ml_vmodel_sort_name(want));
    return ML_HANDLED | ML_REDRAW;
}

static const ml_panel_class_t tree_class = {
    .name = "Call tree",
    .help = "Enter\texpand or collapse\n"
            "Right, l, +\texpand (again: step into the children)\n"
            "Left, h, -\tcollapse, or go to the parent\n"
            "* / _\texpand / collapse the whole subtree\n"
            "b\ttop-down <-> bottom-up\n"
            "[ ]\tscroll the names sideways\n"
            "P L A C T, < >\tsort by a cost column\n",
    .draw = tree_draw,
    .on_key = tree_key,
    .print_header = tree_header,
};

ml_panel_t *ml__panel_tree_new(ml_screen_t *sm) {
    tree_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->super.cls = &tree_class;
    p->super.sm = sm;
    p->super.m = ml__sm_model(sm);
    return &p->super;
}
