/* viewer_internal.h - what the files of viewer/ share (ml__ prefix).
 *
 * Never included from another folder, except by the viewer's own unit tests
 * (tests/unit/viewer), which drive panels and the screen manager without a
 * terminal.
 *
 * The viewer is layered like htop's ScreenManager/Panel split, with one more
 * cut than htop has (STYLE.md rule 20):
 *
 *   model.c           wraps analysis/; no curses (ml_viewer_model.h)
 *   canvas.c          a virtual screen of cells; no curses
 *   panel*.c          one file per view: draw into a canvas, react to keys; no curses
 *   screen_manager.c  the only event loop: layout, focus, bottom bar, search line,
 *                     mouse -> synthetic keys, resize; no curses
 *   crt.c             the only file that includes <curses.h>: terminal init and
 *                     restore, signals, colours, input, copying a canvas to the screen
 *   main.c            `memlens view`: arguments, batch mode, errors
 *
 * Because panels draw into a canvas rather than into curses, the whole UI
 * (keys, layout, what is on screen) runs headless in tests and in
 * `memlens view --batch`, and the terminal is only ever touched by crt.c.
 */
#ifndef ML_VIEWER_INTERNAL_H
#define ML_VIEWER_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ml_viewer_model.h"

/* ------------------------------------------------------------------------- */
/* Canvas (canvas.c)                                                         */
/* ------------------------------------------------------------------------- */

/* Semantic styles; crt.c maps them to colours, or to bold/reverse/underline
 * on a monochrome terminal and under NO_COLOR. */
typedef enum {
    ML_ST_NORMAL = 0,
    ML_ST_DIM,
    ML_ST_BOLD,
    ML_ST_TITLE,      /* the top line */
    ML_ST_HEADER,     /* column headers */
    ML_ST_SELECTED,   /* the selected row */
    ML_ST_BAR_KEY,    /* bottom bar: the key */
    ML_ST_BAR_LABEL,  /* bottom bar: what it does */
    ML_ST_BAR_ACTIVE, /* bottom bar: the view shown */
    ML_ST_WARN,
    ML_ST_ERROR,
    ML_ST_GOOD,
    ML_ST_HEAP, /* timeline series */
    ML_ST_RSS,
    ML_ST_MMAP,
    ML_ST_GPU,
    ML_ST_PEAK,
    ML_ST_CURSOR,
    ML_ST_MAP0, /* heap map occupancy, empty .. full */
    ML_ST_MAP1,
    ML_ST_MAP2,
    ML_ST_MAP3,
    ML_ST_MAP4,
    ML_ST_COUNT_
} ml_style_t;

typedef struct {
    uint32_t ch; /* a Unicode code point; every one we draw is one cell wide */
    uint8_t style;
} ml_cell_t;

typedef struct {
    int cols, rows;
    ml_cell_t *cells;
    bool unicode; /* false: draw ASCII stand-ins for block, braille and box characters */
} ml_canvas_t;

/** Sizes (and clears) the canvas. Returns 0 or -ENOMEM. */
int ml__canvas_resize(ml_canvas_t *c, int cols, int rows);
void ml__canvas_free(ml_canvas_t *c);
void ml__canvas_clear(ml_canvas_t *c);
/** Puts one code point; out-of-range positions are ignored (clipping). */
void ml__canvas_put(ml_canvas_t *c, int x, int y, uint32_t ch, int style);
void ml__canvas_fill(ml_canvas_t *c, int x, int y, int w, int h, uint32_t ch, int style);
/** Restyles w cells from (x, y) without changing their text. */
void ml__canvas_restyle(ml_canvas_t *c, int x, int y, int w, int style);
/** Writes UTF-8 text, at most maxw cells (maxw < 0: to the right edge).
 * Returns the number of cells written. */
int ml__canvas_text(ml_canvas_t *c, int x, int y, int maxw, int style, const char *utf8);
int ml__canvas_printf(ml_canvas_t *c, int x, int y, int maxw, int style, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/** Writes text right-aligned so that it ends just before column x_end. */
int ml__canvas_rtext(ml_canvas_t *c, int x_end, int y, int style, const char *utf8);
/** Text of one row as UTF-8 (trailing blanks removed) into buf. */
const char *ml__canvas_row(const ml_canvas_t *c, int y, char *buf, size_t len);
/** The whole canvas as UTF-8 text, one line per row; the caller frees it. */
char *ml__canvas_dump(const ml_canvas_t *c);
/** The ASCII stand-in for a code point (itself for ASCII). */
uint32_t ml__glyph_ascii(uint32_t ch);
/** Number of code points in a UTF-8 string (its width in cells). */
int ml__utf8_width(const char *s);

/* Glyphs the panels use. */
#define ML_G_VLINE 0x2502u /* │ */
#define ML_G_HLINE 0x2500u /* ─ */
#define ML_G_BLOCK_FULL 0x2588u
#define ML_G_SHADE_LIGHT 0x2591u
#define ML_G_SHADE_MEDIUM 0x2592u
#define ML_G_SHADE_DARK 0x2593u
#define ML_G_TRI_DOWN 0x25bcu /* ▼ peak marker */
#define ML_G_TRI_RIGHT 0x25b6u
#define ML_G_BRAILLE 0x2800u     /* + dot bits */
#define ML_G_LOWER_BLOCK 0x2580u /* 0x2581..0x2588: ▁ .. █ (eighths) */

/* ------------------------------------------------------------------------- */
/* Keys                                                                      */
/* ------------------------------------------------------------------------- */

/* Plain characters are their code point; Enter is '\n', Esc 27, Tab '\t'.
 * Everything else lives above the Unicode range. */
enum {
    ML_KEY_NONE = -1,
    ML_KEY_ENTER = '\n',
    ML_KEY_ESC = 27,
    ML_KEY_TAB = '\t',
    ML_KEY_CTRL_L = 12,
    ML_KEY_BASE_ = 0x110000,
    ML_KEY_UP,
    ML_KEY_DOWN,
    ML_KEY_LEFT,
    ML_KEY_RIGHT,
    ML_KEY_PGUP,
    ML_KEY_PGDN,
    ML_KEY_HOME,
    ML_KEY_END,
    ML_KEY_BACKSPACE,
    ML_KEY_DELETE,
    ML_KEY_BTAB,
    ML_KEY_WHEELUP,
    ML_KEY_WHEELDOWN,
    ML_KEY_F0 = 0x110100,    /* ML_KEY_F0 + n is Fn */
    ML_KEY_CLICK = 0x111000, /* + row within the panel body: set the selection there */
    ML_KEY_CLICK_MAX_ = 0x111fff,
};
#define ML_KEY_F(n) (ML_KEY_F0 + (n))

/** Parses one batch-key token ("j", "Enter", "PgDn", "F5", "C-l", "Space") into a
 * key. Returns ML_KEY_NONE for an unknown token. */
int ml__key_parse(const char *tok);

/* ------------------------------------------------------------------------- */
/* Panels (panel.c and panel_*.c)                                             */
/* ------------------------------------------------------------------------- */

/* on_key results: bit flags, as in htop's HandlerResult. */
enum {
    ML_IGNORED = 0,
    ML_HANDLED = 1,    /* the key was consumed */
    ML_REDRAW = 2,     /* the screen must be drawn again */
    ML_RESIZE = 4,     /* the layout changed (panels must be placed again) */
    ML_BREAK_LOOP = 8, /* leave the event loop (quit) */
};

typedef struct ml_panel_s ml_panel_t;
typedef struct ml_screen_s ml_screen_t;

typedef struct {
    const char *name; /* shown in the bottom bar and the title */
    const char *help; /* this view's keys, "key\twhat it does\n" lines, for the help view */
    /** Draws the body (p->x, p->y, p->w, p->h) into c. */
    void (*draw)(ml_panel_t *p, ml_canvas_t *c);
    /** Handles one key; returns ML_* flags (ML_IGNORED lets the screen manager try). */
    int (*on_key)(ml_panel_t *p, int key);
    /** Draws the one-line header above the body (column titles) at row y. */
    void (*print_header)(ml_panel_t *p, ml_canvas_t *c, int y);
    /** The model has new data (a load step, a live refresh) or a new filter. */
    void (*on_data)(ml_panel_t *p);
    void (*destroy)(ml_panel_t *p);
} ml_panel_class_t;

/* A panel's common part; concrete panels embed it first (htop's `Panel super`).
 * The list fields serve panels that show selectable rows. */
struct ml_panel_s {
    const ml_panel_class_t *cls;
    ml_screen_t *sm;
    ml_vmodel_t *m;
    int x, y, w, h; /* body area */
    int count;      /* rows in the list */
    int sel;        /* selected row, 0..count-1 (0 when empty) */
    int top;        /* first row shown */
    int hscroll;    /* cells scrolled sideways (0: names fitted to the width) */
    int hmax;       /* how far sideways there is to scroll, as last drawn */
};

/** Common list keys: Up/Down/j/k, PgUp/PgDn, Home/End/g/G, wheel and
 * click. Returns ML_HANDLED|ML_REDRAW, or ML_IGNORED. */
int ml__panel_list_key(ml_panel_t *p, int key);
/* The cost columns of the Sites and Call tree views, in display order. */
#define ML__COLW 8 /* one cost column: two spaces and six cells of number */
#define ML__NCOST 5
typedef struct {
    ml_vsort_t key;
    const char *title;
} ml__cost_column_t;
extern const ml__cost_column_t ml__cost_columns[ML__NCOST];
/* Draws the cost columns' titles at row y, the sorted one marked. */
void ml__panel_cost_header(ml_panel_t *p, ml_canvas_t *c, int y);

/* The sort a key asks for in a cost-column list (P L A C/N T, < > F6), or
 * ML_VSORT_COUNT_ when the key is not a sort key. */
ml_vsort_t ml__panel_sort_key(ml_vsort_t current, int key);
/** Sideways scrolling: `[` `]` always, and Left/Right, h/l when arrows is
 * true (views where those keys mean nothing else). Returns
 * ML_HANDLED|ML_REDRAW, or ML_IGNORED. Left at column 0 is ignored, so a
 * view can give it another meaning there (the Site view goes back). */
int ml__panel_hscroll_key(ml_panel_t *p, int key, bool arrows);
/** Draws text in a cell range of width w: at hscroll 0 `fitted` (a name
 * already fitted to w), scrolled sideways `full` from cell p->hscroll;
 * raises p->hmax to what `full` needs. */
void ml__panel_htext(ml_panel_t *p, ml_canvas_t *c, int x, int y, int w, int style,
                     const char *fitted, const char *full);
/** Keeps sel within the list and visible in a window of p->h rows. */
void ml__panel_clamp(ml_panel_t *p);
/** Draws a vertical scroll indicator at the right edge of the body. */
void ml__panel_scrollbar(ml_panel_t *p, ml_canvas_t *c);
/** Frees a panel through its class. */
void ml__panel_destroy(ml_panel_t *p);

ml_panel_t *ml__panel_summary_new(ml_screen_t *sm);
ml_panel_t *ml__panel_sites_new(ml_screen_t *sm);
ml_panel_t *ml__panel_site_new(ml_screen_t *sm);
ml_panel_t *ml__panel_tree_new(ml_screen_t *sm);
ml_panel_t *ml__panel_timeline_new(ml_screen_t *sm);
ml_panel_t *ml__panel_heapmap_new(ml_screen_t *sm);
ml_panel_t *ml__panel_suggest_new(ml_screen_t *sm);
ml_panel_t *ml__panel_help_new(ml_screen_t *sm);
ml_panel_t *ml__panel_gpu_new(ml_screen_t *sm);

/** Sites panel: the current sort column. */
ml_vsort_t ml__panel_sites_sort(const ml_panel_t *p);
/** Site detail panel: which site it shows (ML_VSITE_NONE: none). */
void ml__panel_site_show(ml_panel_t *p, uint32_t site);
/** GPU panel: the device shown (an index for ml_vmodel_gpu_device). */
void ml__panel_gpu_device(ml_panel_t *p, uint32_t index);
uint32_t ml__panel_gpu_shown(const ml_panel_t *p);
/** Help panel: the view whose keys are listed first. */
void ml__panel_help_for(ml_panel_t *p, const ml_panel_class_t *cls);

/* Text views (summary, site detail, help): lines of styled text that scroll.
 * A line is a label (drawn bold in a column of label_w cells) and a value. */
typedef struct {
    char *label, *text;
    char *full; /* NULL, or the unshortened text shown when scrolled sideways */
    int style;
    uint32_t site; /* ML_VSITE_NONE, or the site the line is about (Enter opens it) */
} ml_line_t;

typedef struct {
    ml_line_t *v;
    int n, cap;
    int label_w;
} ml_lines_t;

void ml__lines_clear(ml_lines_t *l);
void ml__lines_free(ml_lines_t *l);
/** Appends a line; label may be NULL. Returns the line (NULL when out of memory). */
ml_line_t *ml__lines_add(ml_lines_t *l, const char *label, int style, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/** Adds text word-wrapped to width cells, the label on the first line only. */
void ml__lines_wrap(ml_lines_t *l, const char *label, int style, const char *text, int width);
/** Wraps every line wider than width cells (the text column) onto more
 * lines, so that no value is cut off at the right edge. */
void ml__lines_fit(ml_lines_t *l, int width);
/** Draws the lines from p->top, with p->sel highlighted when select is true. */
void ml__lines_draw(ml_panel_t *p, ml_canvas_t *c, const ml_lines_t *l, bool select);
/** Scroll keys for a text view without a selection. */
int ml__lines_key(ml_panel_t *p, int key);

/* Formatting helpers shared by the panels (panel.c). */
const char *ml__fmt_bytes(uint64_t b, char *buf, size_t len); /* "12.3M", "999B": 6 cells */
const char *ml__fmt_count(uint64_t n, char *buf, size_t len); /* "12.3k" */
const char *ml__fmt_time(uint32_t ms, char *buf, size_t len); /* "1.234s", "2m03s" */
/** Exact bytes with the short form: "4234 B (4.1 KiB)". */
const char *ml__fmt_bytes_long(uint64_t b, char *buf, size_t len);
/** "function  file:line" or "function (module)" or "0xaddr (module)" for a frame. */
const char *ml__fmt_frame(const ml_vframe_t *f, char *buf, size_t len);
/** The same, fitted to width cells: the middle of the name gives way first
 * ("std::…::push_back"), then the file (its start), and the function's own
 * name is never cut before it is all that is left (docs/viewer.md,
 * "Names"). */
const char *ml__fmt_frame_fit(const ml_vframe_t *f, int width, char *buf, size_t len);
/** A name (a short display name) fitted to width cells the same way. */
const char *ml__fit_name(const char *name, int width, char *buf, size_t len);
/** "name  where" fitted to width cells (where may be NULL or ""). */
const char *ml__fit_label(const char *name, const char *where, int width, char *buf, size_t len);
/** Rows of a live set (the timeline's, a heap-map cell's pins) from (x, y),
 * w cells wide: bytes, blocks (aligned, "1 block"), the site's "#N" and its
 * frame fitted to what is left. */
void ml__live_rows(ml_panel_t *p, ml_canvas_t *c, int x, int y, int w, const ml_vlive_t *v,
                   uint32_t n);
/** A count with thousands separators: "1,000,000". */
const char *ml__fmt_group(uint64_t n, char *buf, size_t len);
/** "1 block", "2 blocks": the count (grouped) and the noun in the right number. */
const char *ml__fmt_n(uint64_t n, const char *one, const char *many, char *buf, size_t len);
/** The number of cells the decimal form of n takes with separators. */
int ml__group_width(uint64_t n);


/* ------------------------------------------------------------------------- */
/* Suggestion evidence in words (evidence.c)                                  */
/* ------------------------------------------------------------------------- */

struct ml_suggestion_s;
/** Writes a suggestion's evidence (ml_advisor.h) for people: labelled
 * numbers with units ("calls avoided 2,000,000", "mean lifetime 0.14 us"),
 * one topic per line ('\n' between lines, none at the end). Returns 0 or
 * -EIO. */
int ml__evidence_text(FILE *out, const struct ml_suggestion_s *s);

/* ------------------------------------------------------------------------- */
/* Screen manager (screen_manager.c)                                          */
/* ------------------------------------------------------------------------- */

typedef enum {
    ML_VIEW_SUMMARY = 0,
    ML_VIEW_SITES,
    ML_VIEW_TREE,
    ML_VIEW_TIMELINE,
    ML_VIEW_HEAPMAP,
    ML_VIEW_SUGGEST,
    ML_VIEW_GPU,
    ML_VIEW_SITE, /* detail of one site; not in the bar */
    ML_VIEW_HELP, /* not in the bar */
    ML_VIEW_COUNT_
} ml_view_t;

/* The smallest terminal the layout works in; below it a message says so. */
#define ML_MIN_COLS 60
#define ML_MIN_ROWS 15

/* Mouse events, as crt.c reads them. */
typedef enum { ML_MOUSE_CLICK, ML_MOUSE_DOUBLE, ML_MOUSE_WHEELUP, ML_MOUSE_WHEELDOWN } ml_mouse_t;

/* One input event for the loop. */
typedef struct {
    enum { ML_UI_NONE, ML_UI_KEY, ML_UI_MOUSE, ML_UI_RESIZE, ML_UI_QUIT } type;
    int key;
    int x, y, cols, rows;
    ml_mouse_t mouse;
} ml_uievent_t;

/* Where the loop gets its input and puts its output: crt.c (a terminal) or a
 * key script (batch mode, tests). */
typedef struct {
    void *ctx;
    /** Waits up to timeout_ms (-1: forever) for one event; ML_UI_NONE on timeout. */
    void (*next)(void *ctx, int timeout_ms, ml_uievent_t *ev);
    /** Shows the canvas (may be NULL). */
    void (*present)(void *ctx, const ml_canvas_t *c);
    /** Asks for a full repaint on the next present (Ctrl-L). */
    void (*repaint)(void *ctx);
} ml_sm_io_t;

typedef struct {
    int cols, rows;
    bool unicode;
    bool live;       /* the model is fed by a running collector: refresh periodically */
    int refresh_ms;  /* live refresh period (default 500) */
    bool shared_tty; /* live: the program writes to the same terminal (Ctrl-L redraws) */
    /* How long a step of work on the UI thread (ml_vmodel_set_progress) runs
     * before the status line says what it does and how far it got: 0 is
     * ML_SM_PROGRESS_MS, -1 at once (tests). */
    int progress_ms;
} ml_sm_opts_t;

#define ML_SM_PROGRESS_MS 250

ml_screen_t *ml__sm_new(ml_vmodel_t *m, const ml_sm_opts_t *o);
void ml__sm_free(ml_screen_t *sm);
/** The event loop: loads the model step by step (a progress bar meanwhile),
 * refreshes it in live mode, draws, dispatches events. Returns when a key
 * asks to quit or io->next says ML_UI_QUIT. */
void ml__sm_run(ml_screen_t *sm, const ml_sm_io_t *io);
/** One event through the same path as the loop (for tests). Returns flags. */
int ml__sm_event(ml_screen_t *sm, const ml_uievent_t *ev);
/** Convenience: one key. */
int ml__sm_key(ml_screen_t *sm, int key);
void ml__sm_resize(ml_screen_t *sm, int cols, int rows);
/** Lays out and draws everything into the screen's canvas. */
void ml__sm_draw(ml_screen_t *sm);
const ml_canvas_t *ml__sm_canvas(const ml_screen_t *sm);
ml_vmodel_t *ml__sm_model(const ml_screen_t *sm);
ml_view_t ml__sm_view(const ml_screen_t *sm);
ml_panel_t *ml__sm_panel(const ml_screen_t *sm, ml_view_t v);
/** Switches view; ML_VIEW_SITE and ML_VIEW_HELP remember where to go back. */
void ml__sm_switch(ml_screen_t *sm, ml_view_t v);
/** Leaves a detail view (site, help) for the view it was opened from. */
void ml__sm_back(ml_screen_t *sm);
/** Opens the detail view of one site. */
void ml__sm_open_site(ml_screen_t *sm, uint32_t site);
/** Shared between views: the timeline cursor (ms) and whether it was set. */
uint32_t ml__sm_cursor_ms(const ml_screen_t *sm, bool *set);
void ml__sm_set_cursor_ms(ml_screen_t *sm, uint32_t ms);
/** A message on the status line until the next key. */
void ml__sm_message(ml_screen_t *sm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool ml__sm_unicode(const ml_screen_t *sm);
/** Tells the panels the model changed (a refresh or a new filter). */
void ml__sm_data_changed(ml_screen_t *sm);

/* ------------------------------------------------------------------------- */
/* Terminal (crt.c)                                                           */
/* ------------------------------------------------------------------------- */

typedef struct {
    const char *tty; /* NULL: stdin/stdout; else a terminal device opened for the UI (live mode) */
    bool color;      /* false: monochrome styles */
    bool mouse;
    bool catch_int; /* SIGINT quits the viewer (false in live mode: it stops the program) */
} ml_crt_opts_t;

/** Starts curses. Returns 0, or a negative errno with a message in err. */
int ml__crt_init(const ml_crt_opts_t *o, char *err, size_t errlen);
/** Restores the terminal; safe to call more than once (also from atexit). */
void ml__crt_done(void);
/** The terminal's size. */
void ml__crt_size(int *cols, int *rows);
/** True when the locale and terminal can show UTF-8. */
bool ml__crt_unicode(void);
/** The I/O table for ml__sm_run. */
ml_sm_io_t ml__crt_io(void);
/** The signal that asked the viewer to stop (SIGINT/SIGTERM/SIGHUP), or 0. */
int ml__crt_stop_signal(void);
/** Live mode's job control, from another thread than the UI's: suspend
 * asks the UI to leave curses mode and waits (up to a second) until it has;
 * resume lets it come back and repaint. */
void ml__crt_suspend(void);
void ml__crt_resume(void);

#endif
