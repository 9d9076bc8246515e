/* canvas.c - a virtual screen of cells that panels draw into.
 *
 * A cell holds one Unicode code point and one semantic style. crt.c copies
 * the canvas to curses; batch mode and the unit tests print it or search it.
 * Every glyph the viewer draws (box lines, blocks, braille) is one cell wide,
 * so the width of a string is its number of code points.
 */
#include "viewer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* UTF-8                                                                     */
/* ------------------------------------------------------------------------- */

/* Decodes one code point and advances *s. A byte that does not start a
 * valid sequence becomes U+FFFD and is passed alone, the JSON writer's rule
 * (report/json_write.c), so the page and the viewer show a name alike:
 * overlong forms ("\xc0\xaf" is no '/'), surrogates (U+D800-DFFF) and
 * values past U+10FFFF are not characters. */
static uint32_t utf8_next(const char **s) {
    const unsigned char *p = (const unsigned char *)*s;
    uint32_t c = p[0];
    int n;
    if (c < 0x80) {
        *s += 1;
        return c;
    }
    if (c >= 0xc2 && c <= 0xdf)
        c &= 0x1f, n = 1;
    else if (c >= 0xe0 && c <= 0xef)
        c &= 0x0f, n = 2;
    else if (c >= 0xf0 && c <= 0xf4)
        c &= 0x07, n = 3;
    else {
        *s += 1;
        return 0xfffd;
    }
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xc0) != 0x80) { /* also the string's NUL: never read past it */
            *s += 1;
            return 0xfffd;
        }
        c = (c << 6) | (p[i] & 0x3f);
    }
    if ((n == 2 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) ||
        (n == 3 && (c < 0x10000 || c > 0x10ffff))) {
        *s += 1;
        return 0xfffd;
    }
    *s += n + 1;
    return c;
}

static size_t utf8_put(uint32_t c, char *out) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xc0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

int ml__utf8_width(const char *s) {
    int n = 0;
    while (*s) {
        utf8_next(&s);
        n++;
    }
    return n;
}

/* ASCII stand-ins, for terminals without UTF-8 (and LANG=C over ssh). */
uint32_t ml__glyph_ascii(uint32_t c) {
    if (c < 0x80) return c;
    if (c == ML_G_VLINE) return '|';
    if (c == ML_G_HLINE) return '-';
    if (c == ML_G_TRI_DOWN) return 'v';
    if (c == ML_G_TRI_RIGHT) return '>';
    if (c == ML_G_SHADE_LIGHT) return '.';
    if (c == ML_G_SHADE_MEDIUM) return ':';
    if (c == ML_G_SHADE_DARK) return '%';
    if (c >= 0x2581 && c <= 0x2588) return c >= 0x2585 ? '#' : (c >= 0x2583 ? '=' : '_');
    if (c >= 0x2800 && c <= 0x28ff) return c == 0x2800 ? ' ' : ':';
    if (c >= 0x2500 && c <= 0x257f) return '+';
    if (c == 0x2026) return '~'; /* … */
    if (c == 0x00b7) return '.';
    return '?';
}

/* ------------------------------------------------------------------------- */
/* Cells                                                                     */
/* ------------------------------------------------------------------------- */

int ml__canvas_resize(ml_canvas_t *c, int cols, int rows) {
    if (cols < 1) cols = 1;
    if (rows < 1) rows = 1;
    ml_cell_t *n = calloc((size_t)cols * (size_t)rows, sizeof *n);
    if (!n) return -ENOMEM;
    free(c->cells);
    c->cells = n;
    c->cols = cols;
    c->rows = rows;
    ml__canvas_clear(c);
    return 0;
}

void ml__canvas_free(ml_canvas_t *c) {
    free(c->cells);
    c->cells = NULL;
    c->cols = c->rows = 0;
}

void ml__canvas_clear(ml_canvas_t *c) {
    for (int i = 0; i < c->cols * c->rows; i++)
        c->cells[i] = (ml_cell_t){' ', ML_ST_NORMAL};
}

void ml__canvas_put(ml_canvas_t *c, int x, int y, uint32_t ch, int style) {
    if (x < 0 || y < 0 || x >= c->cols || y >= c->rows) return;
    if (!c->unicode) ch = ml__glyph_ascii(ch);
    /* Control characters never reach the terminal: C0, DEL and C1 (U+0080-009F,
     * which a terminal may take for CSI, OSC, ST...), the text reports' rule
     * (trace/text_clean.c). */
    if (ch < 0x20 || (ch >= 0x7f && ch <= 0x9f)) ch = '?';
    c->cells[y * c->cols + x] = (ml_cell_t){ch, (uint8_t)style};
}

void ml__canvas_fill(ml_canvas_t *c, int x, int y, int w, int h, uint32_t ch, int style) {
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++)
            ml__canvas_put(c, x + i, y + j, ch, style);
}

void ml__canvas_restyle(ml_canvas_t *c, int x, int y, int w, int style) {
    if (y < 0 || y >= c->rows) return;
    for (int i = 0; i < w; i++)
        if (x + i >= 0 && x + i < c->cols) c->cells[y * c->cols + x + i].style = (uint8_t)style;
}

int ml__canvas_text(ml_canvas_t *c, int x, int y, int maxw, int style, const char *s) {
    if (!s) return 0;
    if (maxw < 0) maxw = c->cols - x;
    int n = 0;
    while (*s && n < maxw) {
        uint32_t ch = utf8_next(&s);
        if (ch == '\t') ch = ' ';
        ml__canvas_put(c, x + n, y, ch, style);
        n++;
    }
    return n;
}

int ml__canvas_printf(ml_canvas_t *c, int x, int y, int maxw, int style, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ml__canvas_text(c, x, y, maxw, style, buf);
}

int ml__canvas_rtext(ml_canvas_t *c, int x_end, int y, int style, const char *s) {
    int w = ml__utf8_width(s);
    return ml__canvas_text(c, x_end - w, y, w, style, s);
}

const char *ml__canvas_row(const ml_canvas_t *c, int y, char *buf, size_t len) {
    size_t o = 0, keep = 0;
    if (len == 0) return buf;
    if (y >= 0 && y < c->rows) {
        for (int x = 0; x < c->cols; x++) {
            char u[4];
            size_t n = utf8_put(c->cells[y * c->cols + x].ch, u);
            if (o + n + 1 > len) break;
            memcpy(buf + o, u, n);
            o += n;
            if (c->cells[y * c->cols + x].ch != ' ') keep = o;
        }
    }
    buf[keep] = '\0';
    return buf;
}

char *ml__canvas_dump(const ml_canvas_t *c) {
    size_t cap = (size_t)c->rows * ((size_t)c->cols * 4 + 1) + 1;
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t o = 0;
    for (int y = 0; y < c->rows; y++) {
        ml__canvas_row(c, y, out + o, cap - o);
        o += strlen(out + o);
        out[o++] = '\n';
    }
    out[o] = '\0';
    return out;
}
