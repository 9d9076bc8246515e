/* panel_timeline.c - the Timeline view: heap, RSS, mmap or GPU bytes over
 * time, drawn with braille dots (2x4 per cell) or eighth blocks; a cursor
 * moves through time and lists the live set at that instant; the peak is
 * marked with a triangle under the chart.
 *
 * A column covers a slice of time and shows the largest value of the
 * analysis' timeline points inside it (so no peak falls between columns),
 * or the last value before it when the slice holds no point.
 */
#include "viewer_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define AXIS_W 8    /* y labels ("123.4M ") and the axis line */
#define INFO_ROWS 3 /* axis, time labels, cursor line */
#define MAX_LIVE 32

typedef struct {
    ml_panel_t super;
    ml_vseries_t series;
    bool blocks;    /* eighth blocks instead of braille */
    int cursor_col; /* -1: follow the peak until moved */
    uint64_t *colv; /* value per column */
    int ncolv;
} timeline_t;

static int chart_w(const ml_panel_t *P) {
    return P->w - AXIS_W - 1;
}
static int chart_h(const ml_panel_t *P) {
    int h = P->h - INFO_ROWS - 4;
    if (h > P->h / 2 + 2) h = P->h / 2 + 2; /* leave room for the live set */
    return h < 3 ? 3 : h;
}

static uint32_t duration(const ml_panel_t *P) {
    ml_vmodel_t *m = P->m;
    uint32_t n = ml_vmodel_npoints(m);
    uint32_t d = ml_vmodel_summary(m)->duration_ms;
    if (n && ml_vmodel_point(m, n - 1)->time_ms > d) d = ml_vmodel_point(m, n - 1)->time_ms;
    return d ? d : 1;
}

static uint32_t col_time(const ml_panel_t *P, int col, int w) {
    return (uint32_t)((uint64_t)duration(P) * (uint64_t)col / (uint64_t)(w > 1 ? w - 1 : 1));
}

static int time_col(const ml_panel_t *P, uint32_t t, int w) {
    int c = (int)((uint64_t)t * (uint64_t)(w > 1 ? w - 1 : 1) / duration(P));
    return c < 0 ? 0 : c >= w ? w - 1 : c;
}

/* Values per column (see the file comment). Returns the maximum. */
static uint64_t columns(timeline_t *p, int w) {
    ml_panel_t *P = &p->super;
    if (p->ncolv < w) {
        uint64_t *n = realloc(p->colv, (size_t)w * sizeof *n);
        if (!n) return 0;
        p->colv = n;
        p->ncolv = w;
    }
    uint32_t np = ml_vmodel_npoints(P->m), i = 0;
    uint64_t last = 0, max = 0;
    for (int c = 0; c < w; c++) {
        uint32_t t_end =
            col_time(P, c, w) + (uint32_t)(duration(P) / (uint32_t)(w > 1 ? w - 1 : 1)) / 2;
        uint64_t v = 0;
        bool any = false;
        while (i < np && ml_vmodel_point(P->m, i)->time_ms <= t_end) {
            uint64_t x = ml_vmodel_point_value(ml_vmodel_point(P->m, i), p->series);
            if (!any || x > v) v = x;
            any = true;
            last = x;
            i++;
        }
        p->colv[c] = any ? v : last;
        if (p->colv[c] > max) max = p->colv[c];
    }
    return max;
}

static void draw_chart(timeline_t *p, ml_canvas_t *c, int x0, int y0, int w, int h, uint64_t max,
                       int cursor) {
    int style = ML_ST_HEAP + (int)p->series;
    for (int col = 0; col < w; col++) {
        uint64_t v = p->colv[col];
        int cstyle = col == cursor ? ML_ST_CURSOR : style;
        if (p->blocks || !ml__sm_unicode(p->super.sm)) {
            /* Eighth blocks: h rows of 8 steps each. */
            uint64_t units = max ? (v * (uint64_t)h * 8 + max - 1) / max : 0;
            for (int r = 0; r < h; r++) {
                int y = y0 + h - 1 - r;
                int u = (int)(units > (uint64_t)r * 8 ? units - (uint64_t)r * 8 : 0);
                uint32_t ch = u >= 8 ? ML_G_BLOCK_FULL : u > 0 ? (uint32_t)(0x2580 + u) : ' ';
                ml__canvas_put(c, x0 + col, y, ch, cstyle);
            }
        } else {
            /* Braille: each cell is 2 dots wide and 4 high; fill below the value.
             * Both dot columns of a cell show the same column value. */
            uint64_t dots = max ? (v * (uint64_t)h * 4 + max - 1) / max : 0;
            for (int r = 0; r < h; r++) {
                int y = y0 + h - 1 - r;
                int d = (int)(dots > (uint64_t)r * 4 ? dots - (uint64_t)r * 4 : 0);
                if (d > 4) d = 4;
                /* dot bits, bottom to top: left 0x40,0x04,0x02,0x01; right 0x80,0x20,0x10,0x08 */
                static const uint32_t left[] = {0x40, 0x04, 0x02, 0x01},
                                      right[] = {0x80, 0x20, 0x10, 0x08};
                uint32_t bits = 0;
                for (int k = 0; k < d; k++)
                    bits |= left[k] | right[k];
                ml__canvas_put(c, x0 + col, y, bits ? ML_G_BRAILLE + bits : ' ', cstyle);
            }
        }
        if (col == cursor)
            for (int r = 0; r < h; r++) {
                int y = y0 + r;
                ml__canvas_restyle(c, x0 + col, y, 1, ML_ST_CURSOR);
            }
    }
}

/* The line that says how far time travel reaches; the reason, if any, goes
 * on a line of its own (it must fit in 80 columns too). */
static void travel_note(const ml_vtravel_t *tv, uint32_t dur_ms, char *out, size_t len) {
    char t1[16], t2[16];
    switch (tv->state) {
    case ML_VTRAVEL_BUILDING:
        snprintf(out, len,
                 "Time travel: building the history, %d%% (a replay in the background; the peak "
                 "and the end are exact now)",
                 (int)(tv->progress * 100));
        break;
    case ML_VTRAVEL_PARTIAL:
    case ML_VTRAVEL_FAILED:
        snprintf(out, len, "Time travel covers 0s-%s of %s; the rest was skipped:",
                 ml__fmt_time(tv->until_ms, t1, sizeof t1), ml__fmt_time(dur_ms, t2, sizeof t2));
        break;
    default:
        snprintf(out, len, "Time travel: only the peak and the end:");
        break;
    }
}

static void timeline_draw(ml_panel_t *P, ml_canvas_t *c) {
    timeline_t *p = (timeline_t *)P;
    ml_vmodel_t *m = P->m;
    const ml_vsummary_t *s = ml_vmodel_summary(m);
    int w = chart_w(P), h = chart_h(P), x0 = P->x + AXIS_W, y0 = P->y;
    char b1[16], b2[16], b3[16], b4[16], t1[16], t2[16];
    if (ml_vmodel_npoints(m) == 0) {
        ml__canvas_text(c, P->x + 1, P->y, P->w - 1, ML_ST_DIM,
                        ml_vmodel_loading(m) ? "Loading..."
                                             : "No timeline in this trace's analysis yet.");
        return;
    }
    uint64_t max = columns(p, w);
    int peak_col = time_col(P, s->totals.peak_time_ms, w);
    if (p->cursor_col < 0) p->cursor_col = peak_col;
    if (p->cursor_col >= w) p->cursor_col = w - 1;
    /* On the peak's column the cursor stands at the peak itself. */
    uint32_t cur_ms =
        p->cursor_col == peak_col ? s->totals.peak_time_ms : col_time(P, p->cursor_col, w);
    ml__sm_set_cursor_ms(P->sm, cur_ms);

    /* y axis */
    ml__canvas_rtext(c, x0 - 1, y0, ML_ST_DIM, ml__fmt_bytes(max, b1, sizeof b1));
    ml__canvas_rtext(c, x0 - 1, y0 + h - 1, ML_ST_DIM, "0");
    for (int r = 0; r < h; r++)
        ml__canvas_put(c, x0 - 1, y0 + r, ML_G_VLINE, ML_ST_DIM);
    draw_chart(p, c, x0, y0, w, h, max, p->cursor_col);

    /* x axis with the peak marker, then the time labels */
    int ya = y0 + h;
    ml__canvas_fill(c, x0, ya, w, 1, ML_G_HLINE, ML_ST_DIM);
    ml__canvas_put(c, x0 - 1, ya, 0x2514, ML_ST_DIM);
    if (p->series == ML_VSERIES_HEAP && s->totals.peak_bytes) {
        ml__canvas_put(c, x0 + peak_col, ya, ML_G_TRI_DOWN, ML_ST_PEAK);
        char pk[64];
        snprintf(pk, sizeof pk, " peak %s ", ml__fmt_bytes(s->totals.peak_bytes, b1, sizeof b1));
        int px = x0 + peak_col + 1;
        if (px + ml__utf8_width(pk) > x0 + w) px = x0 + peak_col - ml__utf8_width(pk);
        ml__canvas_text(c, px, ya, -1, ML_ST_PEAK, pk);
    }
    /* The time labels under the axis, and the cursor's '^' beside them,
     * never on them: a label in the cursor's way moves aside (issue 15:
     * "6.2^2s"). */
    const char *end = ml__fmt_time(duration(P), t1, sizeof t1);
    int cur = p->cursor_col, wend = ml__utf8_width(end);
    int xs = 0, xe = w - wend; /* the labels' columns, relative to x0 */
    if (cur < xs + 2) xs = cur + 1;
    if (cur >= xe && cur < w) xe = cur - wend;
    if (xs + 2 <= xe)
        ml__canvas_text(c, x0 + xs, ya + 1, 2, ML_ST_DIM, "0s");
    if (xe >= 0 && xe >= xs + 3) ml__canvas_text(c, x0 + xe, ya + 1, wend, ML_ST_DIM, end);
    ml__canvas_put(c, x0 + cur, ya + 1, '^', ML_ST_CURSOR);

    /* cursor line: every series at the cursor */
    uint64_t v[ML_VSERIES_COUNT_] = {0};
    uint32_t np = ml_vmodel_npoints(m);
    for (uint32_t i = 0; i < np && ml_vmodel_point(m, i)->time_ms <= cur_ms; i++)
        for (int k = 0; k < ML_VSERIES_COUNT_; k++)
            v[k] = ml_vmodel_point_value(ml_vmodel_point(m, i), (ml_vseries_t)k);
    int yc = ya + 2;
    /* A process' RSS is never 0: 0 is "no sample yet" (the first comes
     * after a sampling interval; a program that ends sooner has none), and
     * "RSS 0B" there read as a measurement. */
    char rss[64];
    if (v[1])
        snprintf(rss, sizeof rss, "%s (sampled every %u ms)", ml__fmt_bytes(v[1], b2, sizeof b2),
                 ml_rss_interval_ms(&s->totals));
    else
        snprintf(rss, sizeof rss, "- (no sample by then; every %u ms)", ml_rss_interval_ms(&s->totals));
    ml__canvas_printf(c, P->x + 1, yc, P->w - 2, ML_ST_BOLD, "At %s: heap %s  RSS %s  mmap %s  GPU %s",
                      ml__fmt_time(cur_ms, t2, sizeof t2), ml__fmt_bytes(v[0], b1, sizeof b1), rss,
                      ml__fmt_bytes(v[2], b3, sizeof b3), ml__fmt_bytes(v[3], b4, sizeof b4));

    /* How far time travel reaches, when not over the whole run (a trace
     * opened from its snapshot replays its history in the background). */
    ml_vtravel_t tv = ml_vmodel_travel(m);
    if (tv.state != ML_VTRAVEL_FULL) {
        char note[400];
        travel_note(&tv, duration(P), note, sizeof note);
        ml__canvas_text(c, P->x + 1, ++yc, P->w - 2, ML_ST_DIM, note);
        if (tv.reason[0]) ml__canvas_text(c, P->x + 3, ++yc, P->w - 4, ML_ST_DIM, tv.reason);
    }

    /* the live set at the cursor (exact at the peak and the end) */
    ml_vlive_t live[MAX_LIVE];
    int room = P->y + P->h - (yc + 1);
    if (room <= 0) return;
    uint32_t at = cur_ms, as_of;
    uint32_t n = ml_vmodel_live_at(m, at, live,
                                   room - 1 < MAX_LIVE ? (uint32_t)(room - 1) : MAX_LIVE, &as_of);
    char hdr[160];
    if (!n && tv.state == ML_VTRAVEL_BUILDING)
        snprintf(hdr, sizeof hdr, "Live at the cursor: when the history is built (p: the peak, G: the end)");
    else if (!n && tv.state != ML_VTRAVEL_FULL && at > tv.until_ms)
        snprintf(hdr, sizeof hdr, "Live at the cursor: not kept (p: the peak, G: the end)");
    else if (!n)
        snprintf(hdr, sizeof hdr, "Live at the cursor: %s",
                 ml_vmodel_loading(m) ? "after loading" : "nothing recorded");
    else if (as_of != at)
        snprintf(hdr, sizeof hdr, "Live at %s (the nearest snapshot), largest sites first:",
                 ml__fmt_time(as_of, t1, sizeof t1));
    else
        snprintf(hdr, sizeof hdr,
                 "Live at %s%s, largest sites first:", ml__fmt_time(as_of, t1, sizeof t1),
                 p->cursor_col == peak_col ? " (the peak)" : "");
    ml__canvas_text(c, P->x + 1, yc + 1, P->w - 2, ML_ST_HEADER, hdr);
    ml__live_rows(P, c, P->x + 1, yc + 2, P->w - 2, live, n < (uint32_t)(room - 1) ? n : (uint32_t)(room - 1));
}

static void timeline_header(ml_panel_t *P, ml_canvas_t *c, int y) {
    timeline_t *p = (timeline_t *)P;
    int x = ml__canvas_text(c, 1, y, -1, ML_ST_HEADER, "Timeline  ");
    for (int k = 0; k < ML_VSERIES_COUNT_; k++) {
        char t[16];
        snprintf(t, sizeof t, k == (int)p->series ? "[%s]" : " %s ",
                 ml_vmodel_series_name((ml_vseries_t)k));
        x += ml__canvas_text(c, 1 + x, y, -1, k == (int)p->series ? ML_ST_BAR_ACTIVE : ML_ST_HEADER,
                             t);
    }
    ml__canvas_text(c, 2 + x, y, -1, ML_ST_HEADER, " m: series  b: blocks/braille  p: peak");
}

static int timeline_key(ml_panel_t *P, int key) {
    timeline_t *p = (timeline_t *)P;
    int w = chart_w(P);
    if (p->cursor_col < 0)
        p->cursor_col = time_col(P, ml_vmodel_summary(P->m)->totals.peak_time_ms, w);
    switch (key) {
    case ML_KEY_LEFT:
    case 'h':
        p->cursor_col--;
        break;
    case ML_KEY_RIGHT:
    case 'l':
        p->cursor_col++;
        break;
    case ML_KEY_PGUP:
    case 'H':
    case 'k':
    case ML_KEY_UP:
        p->cursor_col -= w / 10 > 1 ? w / 10 : 1;
        break;
    case ML_KEY_PGDN:
    case 'L':
    case 'j':
    case ML_KEY_DOWN:
        p->cursor_col += w / 10 > 1 ? w / 10 : 1;
        break;
    case ML_KEY_HOME:
    case 'g':
        p->cursor_col = 0;
        break;
    case ML_KEY_END:
    case 'G':
        p->cursor_col = w - 1;
        break;
    case 'p':
        p->cursor_col = time_col(P, ml_vmodel_summary(P->m)->totals.peak_time_ms, w);
        break;
    case 'm':
        p->series = (ml_vseries_t)((p->series + 1) % ML_VSERIES_COUNT_);
        break;
    case 'b':
        p->blocks = !p->blocks;
        break;
    case ML_KEY_ENTER:
    case 'c':
        ml__sm_switch(P->sm, ML_VIEW_HEAPMAP);
        ml__sm_key(P->sm, 'c'); /* the heap map at this instant */
        return ML_HANDLED | ML_REDRAW;
    case ML_KEY_WHEELUP:
        p->cursor_col -= 3;
        break;
    case ML_KEY_WHEELDOWN:
        p->cursor_col += 3;
        break;
    default:
        if (key >= ML_KEY_CLICK && key <= ML_KEY_CLICK_MAX_) return ML_HANDLED;
        return ML_IGNORED;
    }
    if (p->cursor_col < 0) p->cursor_col = 0;
    if (p->cursor_col >= w) p->cursor_col = w - 1;
    return ML_HANDLED | ML_REDRAW;
}

static void timeline_destroy(ml_panel_t *P) {
    timeline_t *p = (timeline_t *)P;
    free(p->colv);
    free(p);
}

static const ml_panel_class_t timeline_class = {
    .name = "Timeline",
    .help = "Left/Right, h/l\tmove the cursor through time\n"
            "PgUp/PgDn, H/L\tmove it by a tenth\n"
            "g/G, Home/End\tstart / end\n"
            "p\tjump to the peak\n"
            "m\tshow heap, RSS, mmap or GPU\n"
            "b\tbraille dots or blocks\n"
            "Enter, c\tthe heap map at the cursor\n",
    .draw = timeline_draw,
    .on_key = timeline_key,
    .print_header = timeline_header,
    .destroy = timeline_destroy,
};

ml_panel_t *ml__panel_timeline_new(ml_screen_t *sm) {
    timeline_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->super.cls = &timeline_class;
    p->super.sm = sm;
    p->super.m = ml__sm_model(sm);
    p->cursor_col = -1;
    return &p->super;
}
