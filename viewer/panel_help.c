/* panel_help.c - the help view: the keys of the view it was opened from,
 * then the keys that work everywhere. */
#include "viewer_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    ml_panel_t super;
    const ml_panel_class_t *of;
    ml_lines_t lines;
} help_t;

static const char global_help[] =
    "1 2 3 4 5 6 7\tSummary, Sites, Tree, Timeline, Heap map, Suggestions, GPU\n"
    "Tab, Shift-Tab\tnext / previous view\n"
    "/, F3\tfilter sites, tree and suggestions by function, file or module\n"
    "Esc\tback from a detail view; clear the filter\n"
    "Up/Down, j/k\tmove\n"
    "PgUp/PgDn\tpage (also Ctrl-B/Ctrl-F, Space)\n"
    "Home/End, g/G\tfirst / last\n"
    "mouse\tclick a row to select it, double-click to open, wheel scrolls,\n"
    "\tclick the bottom bar to switch views\n"
    "Ctrl-L\tredraw the screen\n"
    "?, F1\tthis help (again: back)\n"
    "q, F10\tquit\n";

static void add_block(ml_lines_t *l, const char *text) {
    while (*text) {
        const char *nl = strchr(text, '\n');
        size_t n = nl ? (size_t)(nl - text) : strlen(text);
        char line[256], key[256] = "";
        snprintf(line, sizeof line, "%.*s", (int)n, text);
        char *tab = strchr(line, '\t');
        const char *what = line;
        if (tab) {
            *tab = '\0';
            snprintf(key, sizeof key, "%s", line);
            what = tab + 1;
        }
        ml__lines_add(l, key, ML_ST_NORMAL, "%s", what);
        text += n + (nl ? 1 : 0);
    }
}

static void build(help_t *p) {
    ml_lines_t *l = &p->lines;
    ml__lines_clear(l);
    l->label_w = 18;
    if (p->of && p->of->help) {
        ml__lines_add(l, NULL, ML_ST_BOLD, "In %s", p->of->name);
        add_block(l, p->of->help);
        ml__lines_add(l, NULL, ML_ST_NORMAL, " ");
    }
    ml__lines_add(l, NULL, ML_ST_BOLD, "Everywhere");
    add_block(l, global_help);
    ml__lines_add(l, NULL, ML_ST_NORMAL, " ");
    ml__lines_add(l, NULL, ML_ST_DIM,
                  "NO_COLOR=1 turns colours off; --no-mouse leaves the mouse to the terminal.");
    ml__lines_add(l, NULL, ML_ST_DIM,
                  "Without a terminal, `memlens report FILE` prints the same numbers.");
}

static void help_draw(ml_panel_t *P, ml_canvas_t *c) {
    help_t *p = (help_t *)P;
    build(p);
    ml__lines_fit(&p->lines, P->w - 2 - p->lines.label_w);
    ml__lines_draw(P, c, &p->lines, false);
}

static void help_header(ml_panel_t *P, ml_canvas_t *c, int y) {
    (void)P;
    ml__canvas_text(c, 1, y, -1, ML_ST_HEADER, "Help  (Esc or ? goes back)");
}

static int help_key(ml_panel_t *P, int key) {
    return ml__lines_key(P, key);
}

static void help_destroy(ml_panel_t *P) {
    help_t *p = (help_t *)P;
    ml__lines_free(&p->lines);
    free(p);
}

static const ml_panel_class_t help_class = {
    .name = "Help",
    .draw = help_draw,
    .on_key = help_key,
    .print_header = help_header,
    .destroy = help_destroy,
};

ml_panel_t *ml__panel_help_new(ml_screen_t *sm) {
    help_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->super.cls = &help_class;
    p->super.sm = sm;
    p->super.m = ml__sm_model(sm);
    return &p->super;
}

void ml__panel_help_for(ml_panel_t *P, const ml_panel_class_t *cls) {
    help_t *p = (help_t *)P;
    p->of = cls;
    P->top = 0;
}
