/* panel_heapmap.c - the Heap map view: the busiest heap region as a grid of
 * cells shaded by the page utilization of each cell's pages (the
 * fragmentation picture the analysis computes), at the peak, at the worst
 * moment, at the end, or at the timeline cursor. The selected cell lists the
 * sites whose blocks pin it. */
#include "viewer_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define INFO_ROWS 8
#define MAX_PINS 8

typedef struct {
    ml_panel_t super;
    ml_vmap_at_t at;
    int cell;          /* selected cell */
    ml_vheapmap_t map; /* the last map the model gave */
    bool have;
    uint64_t gen; /* model generation the map was made from */
    ml_vmap_at_t made_at;
    uint32_t made_ms, made_cells;
} heapmap_t;

static int grid_w(const ml_panel_t *P) {
    return P->w - 2;
}
static int grid_h(const ml_panel_t *P) {
    int h = P->h - INFO_ROWS;
    return h < 2 ? 2 : h;
}

static void fetch(heapmap_t *p) {
    ml_panel_t *P = &p->super;
    uint32_t ncells = (uint32_t)(grid_w(P) * grid_h(P));
    bool set;
    uint32_t ms = ml__sm_cursor_ms(P->sm, &set);
    if (p->at == ML_VMAP_CURSOR && !set) ms = ml_vmodel_summary(P->m)->totals.peak_time_ms;
    if (p->have && p->gen == ml_vmodel_generation(P->m) && p->made_at == p->at &&
        p->made_cells == ncells && (p->at != ML_VMAP_CURSOR || p->made_ms == ms))
        return;
    p->have = ml_vmodel_heapmap(P->m, p->at, ms, ncells, &p->map) == 0 && p->map.valid;
    p->gen = ml_vmodel_generation(P->m);
    p->made_at = p->at;
    p->made_ms = ms;
    p->made_cells = ncells;
}

static int shade(const ml_vcell_t *c, uint32_t *ch) {
    if (c->used_pct < 0) {
        *ch = 0x00b7; /* · no page of the cell holds a live block */
        return ML_ST_MAP0;
    }
    int f = c->used_pct;
    if (f <= 25)
        *ch = ML_G_SHADE_LIGHT;
    else if (f <= 50)
        *ch = ML_G_SHADE_MEDIUM;
    else if (f <= 75)
        *ch = ML_G_SHADE_DARK;
    else
        *ch = ML_G_BLOCK_FULL;
    return f <= 25 ? ML_ST_MAP1 : f <= 50 ? ML_ST_MAP2 : f <= 75 ? ML_ST_MAP3 : ML_ST_MAP4;
}

static void heapmap_draw(ml_panel_t *P, ml_canvas_t *c) {
    heapmap_t *p = (heapmap_t *)P;
    fetch(p);
    if (!p->have || !p->map.ncells) {
        ml__canvas_text(c, P->x + 1, P->y, P->w - 1, ML_ST_DIM,
                        ml_vmodel_loading(P->m) ? "Loading..."
                                                : "No heap map: nothing was live at that moment.");
        return;
    }
    int gw = grid_w(P);
    int n = (int)p->map.ncells;
    if (p->cell >= n) p->cell = n - 1;
    if (p->cell < 0) p->cell = 0;
    for (int i = 0; i < n; i++) {
        uint32_t ch;
        int st = shade(&p->map.cells[i], &ch);
        int x = P->x + 1 + i % gw, y = P->y + i / gw;
        ml__canvas_put(c, x, y, ch, i == p->cell ? ML_ST_CURSOR : st);
    }
    bool u = ml__sm_unicode(P->sm);
    int y = P->y + grid_h(P);
    char b1[16];
    ml__canvas_printf(c, P->x + 1, y, P->w - 2, ML_ST_DIM,
                      "pages used: %s none %s <=25%% %s <=50%% %s <=75%% %s more; one cell = %s",
                      u ? "\xc2\xb7" : ".", u ? "\xe2\x96\x91" : ".", u ? "\xe2\x96\x92" : ":",
                      u ? "\xe2\x96\x93" : "%", u ? "\xe2\x96\x88" : "#",
                      ml__fmt_bytes(p->map.cells[0].span, b1, sizeof b1));
    const ml_vcell_t *cell = &p->map.cells[p->cell];
    if (cell->used_pct >= 0)
        ml__canvas_printf(c, P->x + 1, y + 1, P->w - 2, ML_ST_BOLD,
                          "Cell %d: 0x%" PRIx64 "-0x%" PRIx64 ", pages %d%% used", p->cell,
                          cell->addr, cell->addr + cell->span, cell->used_pct);
    else
        ml__canvas_printf(c, P->x + 1, y + 1, P->w - 2, ML_ST_BOLD,
                          "Cell %d: 0x%" PRIx64 "-0x%" PRIx64 ", no live block", p->cell,
                          cell->addr, cell->addr + cell->span);
    int room = P->y + P->h - (y + 3);
    if (!p->map.sites_known) {
        ml__canvas_text(c, P->x + 1, y + 2, P->w - 2, ML_ST_DIM,
                        p->map.at == ML_VMAP_CURSOR
                            ? "Pinned by: known at the peak, the worst moment and the end (p, w, e)"
                            : "Pinned by: not kept for this moment (its layout was kept, not its "
                              "blocks); known at the end (e)");
        return;
    }
    ml_vlive_t pins[MAX_PINS];
    uint32_t np = room > 0 ? ml_vmodel_cell_sites(P->m, p->map.at, cell->addr, cell->span, pins,
                                                  room < MAX_PINS ? (uint32_t)room : MAX_PINS)
                           : 0;
    ml__canvas_text(c, P->x + 1, y + 2, P->w - 2, ML_ST_HEADER,
                    np ? "Pinned by:" : "Pinned by: no live block");
    ml__live_rows(P, c, P->x + 1, y + 3, P->w - 2, pins, np);
}

static void heapmap_header(ml_panel_t *P, ml_canvas_t *c, int y) {
    heapmap_t *p = (heapmap_t *)P;
    fetch(p); /* the header is drawn first and names the map's moment */
    static const char *const at[] = {"the peak", "the end", "the worst moment", "the cursor"};
    char t1[16];
    int x = ml__canvas_printf(c, 1, y, -1, ML_ST_HEADER, "Heap map at %s",
                              at[p->have ? p->map.at : p->at]);
    if (p->have) {
        x += ml__canvas_printf(c, 1 + x, y, -1, ML_ST_HEADER, " (%s)",
                               ml__fmt_time(p->map.time_ms, t1, sizeof t1));
        if (p->map.frag.valid)
            x += ml__canvas_printf(c, 1 + x, y, -1, ML_ST_HEADER,
                                   ": pages %.0f%% used, external %.0f%%",
                                   p->map.frag.page_utilization * 100, p->map.frag.external * 100);
    }
    ml__canvas_text(c, 2 + x, y, -1, ML_ST_HEADER, "  p/w/e/c: peak/worst/end/cursor");
}

static int heapmap_key(ml_panel_t *P, int key) {
    heapmap_t *p = (heapmap_t *)P;
    int gw = grid_w(P);
    switch (key) {
    case 'p':
        p->at = ML_VMAP_PEAK;
        break;
    case 'e':
        p->at = ML_VMAP_END;
        break;
    case 'w':
        p->at = ML_VMAP_WORST;
        break;
    case 'c':
        p->at = ML_VMAP_CURSOR;
        break;
    case ML_KEY_LEFT:
    case 'h':
        p->cell--;
        break;
    case ML_KEY_RIGHT:
    case 'l':
        p->cell++;
        break;
    case ML_KEY_UP:
    case 'k':
        p->cell -= gw;
        break;
    case ML_KEY_DOWN:
    case 'j':
        p->cell += gw;
        break;
    case ML_KEY_PGUP:
        p->cell -= gw * (grid_h(P) / 2 > 1 ? grid_h(P) / 2 : 1);
        break;
    case ML_KEY_PGDN:
        p->cell += gw * (grid_h(P) / 2 > 1 ? grid_h(P) / 2 : 1);
        break;
    case ML_KEY_HOME:
    case 'g':
        p->cell = 0;
        break;
    case ML_KEY_END:
    case 'G':
        p->cell = p->have ? (int)p->map.ncells - 1 : 0;
        break;
    case ML_KEY_ENTER: {
        /* Open the site that pins the selected cell the most. */
        if (!p->have || !p->map.ncells) return ML_HANDLED;
        /* The selection is kept on the map by the draw, but a double click
         * is a click and an Enter with no draw between them. */
        if (p->cell >= (int)p->map.ncells) p->cell = (int)p->map.ncells - 1;
        if (p->cell < 0) p->cell = 0;
        ml_vlive_t pin;
        const ml_vcell_t *cell = &p->map.cells[p->cell];
        if (p->map.sites_known &&
            ml_vmodel_cell_sites(P->m, p->map.at, cell->addr, cell->span, &pin, 1))
            ml__sm_open_site(P->sm, pin.site);
        return ML_HANDLED | ML_REDRAW;
    }
    default:
        if (key >= ML_KEY_CLICK && key <= ML_KEY_CLICK_MAX_) {
            int row = key - ML_KEY_CLICK;
            if (row < grid_h(P)) p->cell = row * gw + p->cell % gw;
            break;
        }
        return ML_IGNORED;
    }
    /* On the map: a click below its last cell selects the last cell, as the
     * draw would. */
    if (p->have && p->map.ncells && p->cell >= (int)p->map.ncells) p->cell = (int)p->map.ncells - 1;
    if (p->cell < 0) p->cell = 0;
    return ML_HANDLED | ML_REDRAW;
}

static const ml_panel_class_t heapmap_class = {
    .name = "Heap map",
    .help = "p / w / e / c\tthe heap at the peak / worst moment / end / timeline cursor\n"
            "arrows, hjkl\tselect a cell: its address range and the sites pinning it\n"
            "Enter\topen the site pinning the cell most\n",
    .draw = heapmap_draw,
    .on_key = heapmap_key,
    .print_header = heapmap_header,
};

ml_panel_t *ml__panel_heapmap_new(ml_screen_t *sm) {
    heapmap_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->super.cls = &heapmap_class;
    p->super.sm = sm;
    p->super.m = ml__sm_model(sm);
    p->at = ML_VMAP_PEAK;
    return &p->super;
}
