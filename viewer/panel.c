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

/* ------------------------------------------------------------------------- */
/* Sideways scrolling                                                        */
/* ------------------------------------------------------------------------- */

#define HSTEP 8 /* cells per key */

int ml__panel_hscroll_key(ml_panel_t *p, int key, bool arrows) {
    int d;
    if (key == '[' || (arrows && (key == ML_KEY_LEFT || key == 'h')))
        d = -HSTEP;
    else if (key == ']' || (arrows && (key == ML_KEY_RIGHT || key == 'l')))
        d = HSTEP;
    else
        return ML_IGNORED;
    if (d < 0 && p->hscroll == 0 && key != '[') return ML_IGNORED;
    p->hscroll += d;
    if (p->hscroll > p->hmax) p->hscroll = p->hmax;
    if (p->hscroll < 0) p->hscroll = 0;
    return ML_HANDLED | ML_REDRAW;
}

/* The rest of s after skipping n cells (code points). */
static const char *skip_cells(const char *s, int n) {
    while (*s && n > 0) {
        s++;
        while ((*s & 0xc0) == 0x80)
            s++;
        n--;
    }
    return s;
}

void ml__panel_htext(ml_panel_t *p, ml_canvas_t *c, int x, int y, int w, int style,
                     const char *fitted, const char *full) {
    if (w <= 0) return;
    int need = ml__utf8_width(full) - w;
    if (need > p->hmax) p->hmax = need;
    if (p->hscroll <= 0)
        ml__canvas_text(c, x, y, w, style, fitted);
    else
        ml__canvas_text(c, x, y, w, style, skip_cells(full, p->hscroll));
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

static void frame_parts(const ml_vframe_t *f, char *name, size_t nlen, char *where, size_t wlen);

const char *ml__fmt_frame(const ml_vframe_t *f, char *buf, size_t len) {
    if (!f) {
        snprintf(buf, len, "?");
        return buf;
    }
    char name[512], where[320];
    frame_parts(f, name, sizeof name, where, sizeof where);
    snprintf(buf, len, "%s%s%s", name, where[0] ? "  " : "", where);
    return buf;
}

/* Copies at most `cells` cells of s into out (len bytes) and returns the
 * bytes copied. */
static size_t copy_cells(char *out, size_t len, const char *s, int cells) {
    const char *e = skip_cells(s, cells);
    size_t n = (size_t)(e - s);
    if (n >= len) n = len - 1;
    memcpy(out, s, n);
    out[n] = '\0';
    return n;
}

#define ELLIPSIS "\xe2\x80\xa6" /* … */

/* The starts of a qualified name's components: after each "::" that is
 * outside <>, (), [] and {} ("std::vector<…>::push_back" has three
 * components, "ns::f(std::string)" two). Returns the number of starts
 * (the first is 0), at most max. */
static int components(const char *name, int *start, int max) {
    int n = 0, depth = 0;
    start[n++] = 0;
    for (int i = 0; name[i]; i++) {
        char ch = name[i];
        if (ch == '<' || ch == '(' || ch == '[' || ch == '{')
            depth++;
        else if ((ch == '>' || ch == ')' || ch == ']' || ch == '}') && depth > 0)
            depth--;
        else if (ch == ':' && name[i + 1] == ':' && depth == 0 && n < max) {
            /* "operator<<" and friends leave depth above 0: whatever follows
             * belongs to the function, which is right. */
            start[n++] = i + 2;
            i++;
        }
    }
    return n;
}

const char *ml__fit_name(const char *name, int width, char *buf, size_t len) {
    if (len == 0) return buf;
    if (width < 1) width = 1;
    if (ml__utf8_width(name) <= width) {
        snprintf(buf, len, "%s", name);
        return buf;
    }
    int start[64];
    int n = components(name, start, 64);
    const char *fn = name + start[n - 1];
    int wfn = ml__utf8_width(fn);
    /* "first::…::tail": the longest tail that fits, the first component kept
     * (std::, the program's namespace). */
    if (n >= 3) {
        int wfirst = ml__utf8_width(name) - ml__utf8_width(name + start[1]); /* with its "::" */
        for (int j = 2; j < n; j++) {
            int wt = ml__utf8_width(name + start[j]);
            if (wfirst + 3 + wt <= width) {
                snprintf(buf, len, "%.*s" ELLIPSIS "::%s", start[1], name, name + start[j]);
                return buf;
            }
        }
    }
    /* "…::tail", the longest tail that fits. */
    for (int j = 1; j < n; j++) {
        int wt = ml__utf8_width(name + start[j]);
        if (wt + 3 <= width) {
            snprintf(buf, len, ELLIPSIS "::%s", name + start[j]);
            return buf;
        }
    }
    if (wfn <= width) {
        snprintf(buf, len, "%s", fn);
        return buf;
    }
    /* The function's own name is longer than the room: its start stays. */
    size_t o = copy_cells(buf, len, fn, width - 1);
    snprintf(buf + o, len - o, ELLIPSIS);
    return buf;
}

const char *ml__fit_label(const char *name, const char *where, int width, char *buf,
                          size_t len) {
    if (len == 0) return buf;
    if (!where) where = "";
    int wn = ml__utf8_width(name), ww = ml__utf8_width(where);
    if (!*where || wn + 2 + ww <= width) {
        if (!*where)
            return ml__fit_name(name, width, buf, len);
        snprintf(buf, len, "%s  %s", name, where);
        return buf;
    }
    /* The name gives way down to its function (with "…::" in front of it
     * when qualifiers were dropped), then the file does. */
    int start[64];
    int n = components(name, start, 64);
    int wmin = ml__utf8_width(name + start[n - 1]) + (n > 1 ? 3 : 0);
    char nm[512];
    if (width - 2 - ww >= wmin) {
        ml__fit_name(name, width - 2 - ww, nm, sizeof nm);
        snprintf(buf, len, "%s  %s", nm, where);
        return buf;
    }
    /* The name at its shortest ("…::function"); what is left goes to the
     * end of the file name (the line number tells places apart). */
    ml__fit_name(name, wmin < width ? wmin : width, nm, sizeof nm);
    int left = width - ml__utf8_width(nm) - 2;
    if (left < 6) {
        ml__fit_name(name, width, nm, sizeof nm);
        snprintf(buf, len, "%s", nm);
        return buf;
    }
    snprintf(buf, len, "%s  " ELLIPSIS "%s", nm, skip_cells(where, ww - (left - 1)));
    return buf;
}

/* The parts of a frame's label: its short name (or address) and where. */
static void frame_parts(const ml_vframe_t *f, char *name, size_t nlen, char *where, size_t wlen) {
    if (f->file && f->line)
        snprintf(where, wlen, "%s:%u", base_name(f->file), f->line);
    else if (f->file)
        snprintf(where, wlen, "%s", base_name(f->file));
    else if (f->module)
        snprintf(where, wlen, "%s", base_name(f->module));
    else
        where[0] = '\0';
    if (f->function)
        ml_frame_short_name(f->function, name, nlen);
    else
        snprintf(name, nlen, "0x%" PRIx64, f->address);
}

const char *ml__fmt_frame_fit(const ml_vframe_t *f, int width, char *buf, size_t len) {
    if (!f) return ml__fit_name("?", width, buf, len);
    char name[512], where[320];
    frame_parts(f, name, sizeof name, where, sizeof where);
    return ml__fit_label(name, where, width, buf, len);
}

const char *ml__fmt_group(uint64_t n, char *buf, size_t len) {
    char d[32];
    int nd = snprintf(d, sizeof d, "%" PRIu64, n);
    size_t o = 0;
    for (int i = 0; i < nd && o + 2 < len; i++) {
        if (i && (nd - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = d[i];
    }
    if (len) buf[o < len ? o : len - 1] = '\0';
    return buf;
}

int ml__group_width(uint64_t n) {
    char b[40];
    return (int)strlen(ml__fmt_group(n, b, sizeof b));
}

const char *ml__fmt_n(uint64_t n, const char *one, const char *many, char *buf, size_t len) {
    char g[40];
    snprintf(buf, len, "%s %s", ml__fmt_group(n, g, sizeof g), n == 1 ? one : many);
    return buf;
}

void ml__live_rows(ml_panel_t *p, ml_canvas_t *c, int x, int y, int w, const ml_vlive_t *v,
                   uint32_t n) {
    /* The block counts' column is as wide as the widest of them (with
     * separators), so a row of 1,000,000 blocks lines up with a row of 1. */
    int bw = 1, nw = 2;
    for (uint32_t i = 0; i < n; i++) {
        int k = ml__group_width(v[i].blocks);
        if (k > bw) bw = k;
        const ml_vsite_t *s = ml_vmodel_site(p->m, v[i].site);
        char no[16];
        k = snprintf(no, sizeof no, "#%u", s ? s->number : 0);
        if (k > nw) nw = k;
    }
    for (uint32_t i = 0; i < n; i++) {
        const ml_vsite_t *s = ml_vmodel_site(p->m, v[i].site);
        char b[16], g[40], no[16], lead[96], f[512];
        snprintf(no, sizeof no, "#%u", s ? s->number : 0);
        int k = snprintf(lead, sizeof lead, "%7s %*s %-6s %*s ",
                         ml__fmt_bytes(v[i].bytes, b, sizeof b), bw,
                         ml__fmt_group(v[i].blocks, g, sizeof g),
                         v[i].blocks == 1 ? "block" : "blocks", nw, no);
        if (s && s->nframes)
            ml__fmt_frame_fit(&s->frames[s->headline], w - k, f, sizeof f);
        else
            snprintf(f, sizeof f, "%s", s ? "(no stack)" : "?");
        ml__canvas_printf(c, x, y + (int)i, w, ML_ST_NORMAL, "%s%s", lead, f);
    }
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
        free(l->v[i].full);
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
    ln->full = NULL;
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
        const char *nl = strchr(text, '\n');
        int len = nl ? (int)(nl - text) : (int)strlen(text), cut = len;
        /* Cells, not bytes: a line may hold "…" or a box character. */
        const char *e = skip_cells(text, width);
        if ((int)(e - text) < len) {
            cut = (int)(e - text);
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0) cut = (int)(e - text);
        }
        ml__lines_add(l, first ? label : (label ? "" : NULL), style, "%.*s", cut, text);
        text += cut;
        while (*text == ' ')
            text++;
        if (*text == '\n') text++;
        first = false;
    }
}

void ml__lines_fit(ml_lines_t *l, int width) {
    bool wide = false;
    for (int i = 0; i < l->n && !wide; i++)
        wide = ml__utf8_width(l->v[i].text) > width;
    if (!wide) return;
    ml_lines_t out = {0};
    out.label_w = l->label_w;
    for (int i = 0; i < l->n; i++) {
        const ml_line_t *ln = &l->v[i];
        int first = out.n;
        if (ml__utf8_width(ln->text) <= width) {
            ml_line_t *o = ml__lines_add(&out, ln->label, ln->style, "%s", ln->text);
            if (o && ln->full) o->full = strdup(ln->full);
        } else {
            ml__lines_wrap(&out, ln->label, ln->style, ln->text, width);
        }
        for (int k = first; k < out.n; k++)
            out.v[k].site = ln->site;
    }
    ml__lines_free(l);
    *l = out;
}

void ml__lines_draw(ml_panel_t *p, ml_canvas_t *c, const ml_lines_t *l, bool select) {
    p->count = l->n;
    if (select) ml__panel_clamp(p);
    /* Sideways, the labels stay and the texts scroll (a Site view's stack
     * frames show their full names and paths). */
    p->hmax = 0;
    for (int i = 0; i < l->n; i++) {
        int x = p->x + 1 + (l->v[i].label ? l->label_w : 0);
        int need = ml__utf8_width(l->v[i].full ? l->v[i].full : l->v[i].text) -
                   (p->x + p->w - 1 - x);
        if (need > p->hmax) p->hmax = need;
    }
    if (p->hscroll > p->hmax) p->hscroll = p->hmax;
    for (int i = 0; i < p->h && p->top + i < l->n; i++) {
        const ml_line_t *ln = &l->v[p->top + i];
        int y = p->y + i, x = p->x + 1;
        if (ln->label) {
            ml__canvas_text(c, x, y, l->label_w, ML_ST_BOLD, ln->label);
            x += l->label_w;
        }
        ml__panel_htext(p, c, x, y, p->x + p->w - 1 - x, ln->style, ln->text,
                        ln->full ? ln->full : ln->text);
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
