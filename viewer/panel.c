/* panel.c - what every panel shares: list movement, scroll bar, number
 * formats, and the names of keys for batch mode.
 *
 * A panel is a struct whose first member is ml_panel_t and whose class table
 * (ml_panel_class_t) says how to draw it and how it reacts to keys; htop's
 * Panel/PanelClass is the model. List panels keep their rows' count, the
 * selection and the first row shown in the common part, so movement keys
 * behave the same in every view.
 */
#include "viewer_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------------- */
/* List behaviour                                                            */
/* ------------------------------------------------------------------------- */

void ml__panel_clamp(ml_panel_t *p) {
    int page = p->h > 0 ? p->h : 1;
    if (p->count <= 0) {
        p->sel = p->top = 0;
        return;
    }
    if (p->sel >= p->count) p->sel = p->count - 1;
    if (p->sel < 0) p->sel = 0;
    if (p->top > p->sel) p->top = p->sel;
    if (p->sel >= p->top + page) p->top = p->sel - page + 1;
    if (p->top > p->count - page) p->top = p->count - page;
    if (p->top < 0) p->top = 0;
}

int ml__panel_list_key(ml_panel_t *p, int key) {
    int page = p->h > 1 ? p->h - 1 : 1;
    switch (key) {
    case ML_KEY_UP:
    case 'k':
        p->sel--;
        break;
    case ML_KEY_DOWN:
    case 'j':
        p->sel++;
        break;
    case ML_KEY_PGUP:
    case 2: /* Ctrl-B, as in less and vi */
        p->sel -= page;
        p->top -= page;
        break;
    case ML_KEY_PGDN:
    case 6: /* Ctrl-F */
    case ' ':
        p->sel += page;
        p->top += page;
        break;
    case ML_KEY_HOME:
    case 'g':
        p->sel = 0;
        break;
    case ML_KEY_END:
    case 'G':
        p->sel = p->count - 1;
        break;
    case ML_KEY_WHEELUP:
        p->sel -= 3;
        break;
    case ML_KEY_WHEELDOWN:
        p->sel += 3;
        break;
    default:
        if (key >= ML_KEY_CLICK && key <= ML_KEY_CLICK_MAX_) {
            int row = p->top + (key - ML_KEY_CLICK);
            if (row >= p->count) return ML_HANDLED;
            p->sel = row;
            break;
        }
        return ML_IGNORED;
    }
    ml__panel_clamp(p);
    return ML_HANDLED | ML_REDRAW;
}

void ml__panel_scrollbar(ml_panel_t *p, ml_canvas_t *c) {
    if (p->count <= p->h || p->h < 3) return;
    int x = p->x + p->w - 1;
    int len = p->h * p->h / p->count;
    if (len < 1) len = 1;
    int pos = (int)((int64_t)p->top * (p->h - len) / (p->count - p->h > 0 ? p->count - p->h : 1));
    for (int i = 0; i < p->h; i++)
        ml__canvas_put(c, x, p->y + i, i >= pos && i < pos + len ? ML_G_BLOCK_FULL : ML_G_VLINE,
                       ML_ST_DIM);
}

void ml__panel_destroy(ml_panel_t *p) {
    if (!p) return;
    if (p->cls->destroy)
        p->cls->destroy(p);
    else
        free(p);
}

/* ------------------------------------------------------------------------- */
/* Number formats                                                            */
/* ------------------------------------------------------------------------- */

/* Compact sizes for columns: at most 6 cells ("1023B", "12.3K", "999.9M"). */
const char *ml__fmt_bytes(uint64_t b, char *buf, size_t len) {
    static const char units[] = "BKMGTP";
    if (b < 1024) {
        snprintf(buf, len, "%" PRIu64 "B", b);
        return buf;
    }
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (v >= 99.95)
        snprintf(buf, len, "%.0f%c", v, units[u]);
    else
        snprintf(buf, len, "%.1f%c", v, units[u]);
    return buf;
}

const char *ml__fmt_count(uint64_t n, char *buf, size_t len) {
    if (n < 100000) {
        snprintf(buf, len, "%" PRIu64, n);
        return buf;
    }
    static const char units[] = "kMGT";
    double v = (double)n / 1000;
    int u = 0;
    while (v >= 1000 && u < 3) {
        v /= 1000;
        u++;
    }
    snprintf(buf, len, v >= 99.95 ? "%.0f%c" : "%.1f%c", v, units[u]);
    return buf;
}

const char *ml__fmt_time(uint32_t ms, char *buf, size_t len) {
    if (ms < 60000)
        snprintf(buf, len, "%u.%03us", ms / 1000, ms % 1000);
    else if (ms < 3600000)
        snprintf(buf, len, "%um%02us", ms / 60000, (ms / 1000) % 60);
    else
        snprintf(buf, len, "%uh%02um", ms / 3600000, (ms / 60000) % 60);
    return buf;
}

static const char *base_name(const char *p) {
    const char *s = p ? strrchr(p, '/') : NULL;
    return s ? s + 1 : p;
}

const char *ml__fmt_frame(const ml_vframe_t *f, char *buf, size_t len) {
    if (!f) {
        snprintf(buf, len, "?");
        return buf;
    }
    char where[320];
    if (f->file && f->line)
        snprintf(where, sizeof where, "%s:%u", base_name(f->file), f->line);
    else if (f->file)
        snprintf(where, sizeof where, "%s", base_name(f->file));
    else if (f->module)
        snprintf(where, sizeof where, "%s", base_name(f->module));
    else
        where[0] = '\0';
    char name[256];
    if (f->function)
        snprintf(buf, len, "%s%s%s", ml_frame_short_name(f->function, name, sizeof name),
                 where[0] ? "  " : "", where);
    else
        snprintf(buf, len, "0x%" PRIx64 "%s%s", f->address, where[0] ? "  " : "", where);
    return buf;
}

/* ------------------------------------------------------------------------- */
/* Key names (batch mode)                                                    */
/* ------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int key;
} key_names[] = {
    {"Enter", ML_KEY_ENTER},
    {"Return", ML_KEY_ENTER},
    {"Esc", ML_KEY_ESC},
    {"Escape", ML_KEY_ESC},
    {"Tab", ML_KEY_TAB},
    {"BTab", ML_KEY_BTAB},
    {"Space", ' '},
    {"Up", ML_KEY_UP},
    {"Down", ML_KEY_DOWN},
    {"Left", ML_KEY_LEFT},
    {"Right", ML_KEY_RIGHT},
    {"PgUp", ML_KEY_PGUP},
    {"PageUp", ML_KEY_PGUP},
    {"PgDn", ML_KEY_PGDN},
    {"PageDown", ML_KEY_PGDN},
    {"Home", ML_KEY_HOME},
    {"End", ML_KEY_END},
    {"BS", ML_KEY_BACKSPACE},
    {"Backspace", ML_KEY_BACKSPACE},
    {"Del", ML_KEY_DELETE},
    {"WheelUp", ML_KEY_WHEELUP},
    {"WheelDown", ML_KEY_WHEELDOWN},
};

int ml__key_parse(const char *tok) {
    if (!tok || !*tok) return ML_KEY_NONE;
    for (size_t i = 0; i < sizeof key_names / sizeof key_names[0]; i++)
        if (!strcasecmp(tok, key_names[i].name)) return key_names[i].key;
    if ((tok[0] == 'F' || tok[0] == 'f') && tok[1] >= '1' && tok[1] <= '9') {
        int n = atoi(tok + 1);
        if (n >= 1 && n <= 12) return ML_KEY_F(n);
    }
    if ((tok[0] == 'C' || tok[0] == 'c') && tok[1] == '-' && tok[2] && !tok[3]) {
        char ch = tok[2];
        if (ch >= 'a' && ch <= 'z') return ch - 'a' + 1;
        if (ch >= 'A' && ch <= 'Z') return ch - 'A' + 1;
    }
    if (!tok[1]) return (unsigned char)tok[0];
    return ML_KEY_NONE;
}

const char *ml__fmt_bytes_long(uint64_t b, char *buf, size_t len) {
    char s[32];
    if (b < 1024)
        snprintf(buf, len, "%" PRIu64 " B", b);
    else
        snprintf(buf, len, "%" PRIu64 " B (%s)", b, ml_fmt_bytes(b, s, sizeof s));
    return buf;
}

/* ------------------------------------------------------------------------- */
/* Text views                                                                */
/* ------------------------------------------------------------------------- */

void ml__lines_clear(ml_lines_t *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].label);
        free(l->v[i].text);
    }
    l->n = 0;
}

void ml__lines_free(ml_lines_t *l) {
    ml__lines_clear(l);
    free(l->v);
    l->v = NULL;
    l->cap = 0;
}

ml_line_t *ml__lines_add(ml_lines_t *l, const char *label, int style, const char *fmt, ...) {
    if (l->n == l->cap) {
        int ncap = l->cap ? l->cap * 2 : 32;
        ml_line_t *v = realloc(l->v, (size_t)ncap * sizeof *v);
        if (!v) return NULL;
        l->v = v;
        l->cap = ncap;
    }
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ml_line_t *ln = &l->v[l->n];
    ln->label = label ? strdup(label) : NULL;
    ln->text = strdup(buf);
    ln->style = style;
    ln->site = ML_VSITE_NONE;
    if (!ln->text) {
        free(ln->label);
        return NULL;
    }
    l->n++;
    return ln;
}

void ml__lines_wrap(ml_lines_t *l, const char *label, int style, const char *text, int width) {
    if (width < 10) width = 10;
    bool first = true;
    while (*text || first) {
        int len = (int)strlen(text), cut = len;
        if (len > width) {
            cut = width;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0) cut = width;
        }
        ml__lines_add(l, first ? label : (label ? "" : NULL), style, "%.*s", cut, text);
        text += cut;
        while (*text == ' ')
            text++;
        first = false;
    }
}

void ml__lines_draw(ml_panel_t *p, ml_canvas_t *c, const ml_lines_t *l, bool select) {
    p->count = l->n;
    if (select) ml__panel_clamp(p);
    for (int i = 0; i < p->h && p->top + i < l->n; i++) {
        const ml_line_t *ln = &l->v[p->top + i];
        int y = p->y + i, x = p->x + 1;
        if (ln->label) {
            ml__canvas_text(c, x, y, l->label_w, ML_ST_BOLD, ln->label);
            x += l->label_w;
        }
        ml__canvas_text(c, x, y, p->x + p->w - 1 - x, ln->style, ln->text);
        if (select && p->top + i == p->sel)
            ml__canvas_restyle(c, p->x, y, p->w - 1, ML_ST_SELECTED);
    }
    ml__panel_scrollbar(p, c);
}

int ml__lines_key(ml_panel_t *p, int key) {
    int page = p->h > 1 ? p->h - 1 : 1, max = p->count - p->h;
    if (max < 0) max = 0;
    switch (key) {
    case ML_KEY_UP:
    case 'k':
        p->top--;
        break;
    case ML_KEY_DOWN:
    case 'j':
        p->top++;
        break;
    case ML_KEY_PGUP:
    case 2:
        p->top -= page;
        break;
    case ML_KEY_PGDN:
    case 6:
    case ' ':
        p->top += page;
        break;
    case ML_KEY_HOME:
    case 'g':
        p->top = 0;
        break;
    case ML_KEY_END:
    case 'G':
        p->top = max;
        break;
    case ML_KEY_WHEELUP:
        p->top -= 3;
        break;
    case ML_KEY_WHEELDOWN:
        p->top += 3;
        break;
    default:
        if (key >= ML_KEY_CLICK && key <= ML_KEY_CLICK_MAX_) return ML_HANDLED;
        return ML_IGNORED;
    }
    if (p->top > max) p->top = max;
    if (p->top < 0) p->top = 0;
    /* A text view has no selection; keeping sel on the first line shown
     * keeps the layout's ml__panel_clamp (which keeps a list's selection
     * on screen) from scrolling the text back to where sel was. */
    p->sel = p->top;
    return ML_HANDLED | ML_REDRAW;
}

ml_vsort_t ml__panel_sort_key(ml_vsort_t sort, int key) {
    switch (key) {
    case 'P':
        return ML_VSORT_PEAK;
    case 'L':
        return ML_VSORT_LEAKED;
    case 'A':
        return ML_VSORT_ALLOCATED;
    case 'C':
    case 'N':
        return ML_VSORT_CALLS;
    case 'T':
        return ML_VSORT_TEMPORARY;
    case '>':
    case '.':
    case ML_KEY_F(6):
        return (ml_vsort_t)((sort + 1) % ML_VSORT_COUNT_);
    case '<':
    case ',':
        return (ml_vsort_t)((sort + ML_VSORT_COUNT_ - 1) % ML_VSORT_COUNT_);
    default:
        return ML_VSORT_COUNT_;
    }
}

const ml__cost_column_t ml__cost_columns[ML__NCOST] = {
    {ML_VSORT_PEAK, "PEAK"},   {ML_VSORT_LEAKED, "LEAKED"},  {ML_VSORT_ALLOCATED, "ALLOC"},
    {ML_VSORT_CALLS, "CALLS"}, {ML_VSORT_TEMPORARY, "TEMP"},
};

void ml__panel_cost_header(ml_panel_t *p, ml_canvas_t *c, int y) {
    ml_vsort_t sort = ml_vmodel_sort(p->m);
    for (int k = 0; k < ML__NCOST; k++) {
        char t[16];
        bool on = ml__cost_columns[k].key == sort;
        snprintf(t, sizeof t, "%s%s", on ? "\xe2\x96\xbc" : "", ml__cost_columns[k].title);
        ml__canvas_rtext(c, p->x + (k + 1) * ML__COLW, y, on ? ML_ST_BAR_ACTIVE : ML_ST_HEADER, t);
    }
}
