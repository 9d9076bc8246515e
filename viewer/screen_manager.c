/* screen_manager.c - the viewer's only event loop: layout, focus, the title
 * and bottom bars, the search line, mouse to keys, resize.
 *
 * Layout (rows):
 *   0        title: program, state (loading, running, exited), heap now/peak
 *   1        the view's header line (print_header: column titles)
 *   2..R-3   the view's body
 *   R-2      status: the search prompt, a message, the active filter
 *   R-1      bottom bar: one key per view, htop-style
 *
 * A key goes to the focused panel first; what it ignores is handled here
 * (switching views, search, help, quit), as in htop's ScreenManager_run.
 * Mouse clicks become keys before they reach anyone: a click on the bottom
 * bar is that item's key, a click in the body is ML_KEY_CLICK + row (and a
 * double click adds Enter), the wheel is ML_KEY_WHEELUP/DOWN.
 *
 * The loop also advances the model: post-mortem it loads the trace in steps
 * of a few tens of milliseconds and draws between steps (views are usable
 * while the progress bar runs); live it refreshes the model's snapshot every
 * refresh_ms while the collector thread feeds it.
 */
#include "viewer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOAD_STEP_MS 40

typedef struct {
    int x0, x1, key;
} bar_item_t;

struct ml_screen_s {
    ml_vmodel_t *m;
    ml_sm_opts_t o;
    ml_canvas_t canvas;
    ml_panel_t *panels[ML_VIEW_COUNT_];
    ml_view_t view, back;
    bool searching;
    char search[128], search_saved[128];
    char message[256];
    bool message_error;
    char load_error[512];
    uint32_t cursor_ms;
    bool cursor_set;
    bar_item_t bar[16];
    int nbar;
    bool too_small;
    /* The loop's output while it runs (ml__sm_run), for the progress line:
     * a step of work that started at busy_t0 shows its line at most every
     * PROGRESS_REDRAW_MS (last at busy_shown). */
    const ml_sm_io_t *io;
    uint64_t busy_t0, busy_shown;
};

#define PROGRESS_REDRAW_MS 100

static const struct {
    ml_view_t view;
    int key;
    const char *label;
} bar_views[] = {
    {ML_VIEW_SUMMARY, '1', "Summary"}, {ML_VIEW_SITES, '2', "Sites"},
    {ML_VIEW_TREE, '3', "Tree"},       {ML_VIEW_TIMELINE, '4', "Timeline"},
    {ML_VIEW_HEAPMAP, '5', "HeapMap"}, {ML_VIEW_SUGGEST, '6', "Suggest"},
    {ML_VIEW_GPU, '7', "GPU"},
};
#define NBAR_VIEWS (int)(sizeof bar_views / sizeof bar_views[0])

static uint64_t now_ms(void);
static void sm_progress(void *ctx, const char *what, uint64_t done, uint64_t total);

/* ------------------------------------------------------------------------- */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------- */

ml_screen_t *ml__sm_new(ml_vmodel_t *m, const ml_sm_opts_t *o) {
    ml_screen_t *sm = calloc(1, sizeof *sm);
    if (!sm) return NULL;
    sm->m = m;
    sm->o = *o;
    if (sm->o.refresh_ms <= 0) sm->o.refresh_ms = 500;
    sm->canvas.unicode = o->unicode;
    if (ml__canvas_resize(&sm->canvas, o->cols, o->rows) < 0) goto fail;
    sm->panels[ML_VIEW_SUMMARY] = ml__panel_summary_new(sm);
    sm->panels[ML_VIEW_SITES] = ml__panel_sites_new(sm);
    sm->panels[ML_VIEW_TREE] = ml__panel_tree_new(sm);
    sm->panels[ML_VIEW_TIMELINE] = ml__panel_timeline_new(sm);
    sm->panels[ML_VIEW_HEAPMAP] = ml__panel_heapmap_new(sm);
    sm->panels[ML_VIEW_SUGGEST] = ml__panel_suggest_new(sm);
    sm->panels[ML_VIEW_GPU] = ml__panel_gpu_new(sm);
    sm->panels[ML_VIEW_SITE] = ml__panel_site_new(sm);
    sm->panels[ML_VIEW_HELP] = ml__panel_help_new(sm);
    for (int i = 0; i < ML_VIEW_COUNT_; i++)
        if (!sm->panels[i]) goto fail;
    sm->view = sm->back = ML_VIEW_SUMMARY;
    ml_vmodel_set_progress(m, sm_progress, sm);
    ml__sm_data_changed(sm);
    return sm;
fail:
    ml__sm_free(sm);
    return NULL;
}

void ml__sm_free(ml_screen_t *sm) {
    if (!sm) return;
    ml_vmodel_set_progress(sm->m, NULL, NULL);
    for (int i = 0; i < ML_VIEW_COUNT_; i++)
        ml__panel_destroy(sm->panels[i]);
    ml__canvas_free(&sm->canvas);
    free(sm);
}

const ml_canvas_t *ml__sm_canvas(const ml_screen_t *sm) {
    return &sm->canvas;
}
ml_vmodel_t *ml__sm_model(const ml_screen_t *sm) {
    return sm->m;
}
ml_view_t ml__sm_view(const ml_screen_t *sm) {
    return sm->view;
}
ml_panel_t *ml__sm_panel(const ml_screen_t *sm, ml_view_t v) {
    return sm->panels[v];
}
bool ml__sm_unicode(const ml_screen_t *sm) {
    return sm->canvas.unicode;
}

uint32_t ml__sm_cursor_ms(const ml_screen_t *sm, bool *set) {
    if (set) *set = sm->cursor_set;
    return sm->cursor_ms;
}

void ml__sm_set_cursor_ms(ml_screen_t *sm, uint32_t ms) {
    sm->cursor_ms = ms;
    sm->cursor_set = true;
}

void ml__sm_message(ml_screen_t *sm, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sm->message, sizeof sm->message, fmt, ap);
    va_end(ap);
    sm->message_error = false;
}

void ml__sm_data_changed(ml_screen_t *sm) {
    for (int i = 0; i < ML_VIEW_COUNT_; i++)
        if (sm->panels[i] && sm->panels[i]->cls->on_data)
            sm->panels[i]->cls->on_data(sm->panels[i]);
}

void ml__sm_switch(ml_screen_t *sm, ml_view_t v) {
    if (v == sm->view) return;
    if (v == ML_VIEW_SITE || v == ML_VIEW_HELP) {
        if (sm->view != ML_VIEW_SITE && sm->view != ML_VIEW_HELP) sm->back = sm->view;
        if (v == ML_VIEW_HELP)
            ml__panel_help_for(sm->panels[ML_VIEW_HELP], sm->panels[sm->view]->cls);
    }
    sm->view = v;
}

void ml__sm_back(ml_screen_t *sm) {
    if (sm->view == ML_VIEW_SITE || sm->view == ML_VIEW_HELP) sm->view = sm->back;
}

void ml__sm_open_site(ml_screen_t *sm, uint32_t site) {
    ml__panel_site_show(sm->panels[ML_VIEW_SITE], site);
    ml__sm_switch(sm, ML_VIEW_SITE);
}

/* ------------------------------------------------------------------------- */
/* Drawing                                                                   */
/* ------------------------------------------------------------------------- */

static void layout(ml_screen_t *sm) {
    for (int i = 0; i < ML_VIEW_COUNT_; i++) {
        ml_panel_t *p = sm->panels[i];
        p->x = 0;
        p->y = 2;
        p->w = sm->canvas.cols;
        p->h = sm->canvas.rows - 4;
        if (p->h < 1) p->h = 1;
        ml__panel_clamp(p);
    }
}

static void draw_title(ml_screen_t *sm) {
    ml_canvas_t *c = &sm->canvas;
    const ml_vsummary_t *s = ml_vmodel_summary(sm->m);
    char b1[16], b2[16], state[96];
    ml__canvas_fill(c, 0, 0, c->cols, 1, ' ', ML_ST_TITLE);
    const char *prog = s->exe[0] ? strrchr(s->exe, '/') : NULL;
    prog = prog ? prog + 1 : (s->exe[0] ? s->exe : ml_vmodel_path(sm->m));
    switch (s->state) {
    case ML_VPROC_LOADING:
        if (ml_vmodel_from_snapshot(sm->m))
            snprintf(state, sizeof state, "loading (saved analysis)");
        else
            snprintf(state, sizeof state, "loading %d%%", (int)(ml_vmodel_progress(sm->m) * 100));
        break;
    case ML_VPROC_RUNNING:
        snprintf(state, sizeof state, "LIVE, running");
        break;
    case ML_VPROC_EXITED:
        snprintf(state, sizeof state, "exited %d", s->status);
        break;
    case ML_VPROC_SIGNALED:
        snprintf(state, sizeof state, "killed by signal %d", s->status);
        break;
    case ML_VPROC_ENDED:
        snprintf(state, sizeof state, "ended");
        break;
    case ML_VPROC_TRUNCATED:
        snprintf(state, sizeof state, "trace truncated");
        break;
    }
    int x = ml__canvas_printf(c, 0, 0, c->cols, ML_ST_TITLE, " memlens  %s [%u]  %s",
                              prog ? prog : "", s->pid, state);
    char right[96];
    snprintf(right, sizeof right, "heap %s  peak %s ",
             ml__fmt_bytes(s->totals.heap_bytes, b1, sizeof b1),
             ml__fmt_bytes(s->totals.peak_bytes, b2, sizeof b2));
    if (x + ml__utf8_width(right) + 2 <= c->cols)
        ml__canvas_rtext(c, c->cols, 0, ML_ST_TITLE, right);
}

static void draw_status(ml_screen_t *sm) {
    ml_canvas_t *c = &sm->canvas;
    int y = c->rows - 2;
    ml__canvas_fill(c, 0, y, c->cols, 1, ' ', ML_ST_NORMAL);
    if (sm->searching) {
        int n =
            ml__canvas_printf(c, 0, y, c->cols, ML_ST_BOLD, "Search (function, file, module): ");
        n += ml__canvas_text(c, n, y, c->cols - n - 1, ML_ST_NORMAL, sm->search);
        ml__canvas_put(c, n, y, '_', ML_ST_CURSOR);
        ml__canvas_rtext(c, c->cols, y, ML_ST_DIM, " Enter keeps, Esc cancels");
        return;
    }
    if (sm->message[0]) {
        ml__canvas_text(c, 0, y, c->cols, sm->message_error ? ML_ST_ERROR : ML_ST_WARN,
                        sm->message);
        return;
    }
    if (sm->load_error[0]) {
        ml__canvas_text(c, 0, y, c->cols, ML_ST_ERROR, sm->load_error);
        return;
    }
    const ml_vsummary_t *s = ml_vmodel_summary(sm->m);
    if (ml_vmodel_loading(sm->m)) {
        /* The progress bar: the views already show what was read so far. */
        double f = ml_vmodel_progress(sm->m);
        int n = ml__canvas_printf(c, 0, y, c->cols, ML_ST_BOLD, "Loading %3d%% ", (int)(f * 100));
        int w = c->cols - n - 2;
        if (w > 50) w = 50;
        ml__canvas_put(c, n, y, '[', ML_ST_DIM);
        for (int i = 0; i < w; i++)
            ml__canvas_put(c, n + 1 + i, y, i < (int)(f * w) ? ML_G_BLOCK_FULL : ' ', ML_ST_HEAP);
        ml__canvas_put(c, n + 1 + w, y, ']', ML_ST_DIM);
        return;
    }
    int x = 0;
    const char *f = ml_vmodel_filter(sm->m);
    if (f && *f) {
        x += ml__canvas_printf(c, x, y, c->cols - x, ML_ST_WARN, "Filter \"%s\": %u of %u sites  ",
                               f, ml_vmodel_nsites(sm->m), s->nsites);
    }
    if (s->state == ML_VPROC_RUNNING && sm->o.shared_tty)
        x += ml__canvas_text(
            c, x, y, c->cols - x, ML_ST_WARN,
            "Recording. The program's output shares this terminal: Ctrl-L redraws. ");
    else if (s->state == ML_VPROC_RUNNING)
        x += ml__canvas_text(c, x, y, c->cols - x, ML_ST_GOOD,
                             "Recording; the views follow the program. ");
    else if (sm->o.live)
        x += ml__canvas_text(c, x, y, c->cols - x, ML_ST_BOLD,
                             "The program has ended: final data. q quits. ");
    if (s->sampled) ml__canvas_text(c, x, y, c->cols - x, ML_ST_DIM, "(sampled trace: estimates)");
}

static void draw_bar(ml_screen_t *sm) {
    ml_canvas_t *c = &sm->canvas;
    int y = c->rows - 1, x = 0;
    ml__canvas_fill(c, 0, y, c->cols, 1, ' ', ML_ST_BAR_LABEL);
    sm->nbar = 0;
    struct {
        int key;
        const char *k, *label;
        bool active;
    } items[NBAR_VIEWS + 3];
    int n = 0;
    items[n++] = (typeof(items[0])){'?', "?", "Help", sm->view == ML_VIEW_HELP};
    for (int i = 0; i < NBAR_VIEWS; i++) {
        static const char *digits[] = {"1", "2", "3", "4", "5", "6", "7"};
        _Static_assert(sizeof digits / sizeof digits[0] == NBAR_VIEWS, "a digit per view");
        bool act = sm->view == bar_views[i].view ||
                   (sm->view == ML_VIEW_SITE && bar_views[i].view == ML_VIEW_SITES);
        items[n++] = (typeof(items[0])){bar_views[i].key, digits[i], bar_views[i].label, act};
    }
    items[n++] = (typeof(items[0])){'/', "/", "Search", sm->searching};
    items[n++] = (typeof(items[0])){'q', "q", "Quit", false};
    for (int i = 0; i < n && x < c->cols; i++) {
        int x0 = x;
        x += ml__canvas_text(c, x, y, c->cols - x, ML_ST_BAR_KEY, items[i].k);
        x += ml__canvas_text(c, x, y, c->cols - x,
                             items[i].active ? ML_ST_BAR_ACTIVE : ML_ST_BAR_LABEL, items[i].label);
        if (x < c->cols) x++;
        if (sm->nbar < (int)(sizeof sm->bar / sizeof sm->bar[0]))
            sm->bar[sm->nbar++] = (bar_item_t){x0, x, items[i].key};
    }
}

static void draw_too_small(ml_screen_t *sm) {
    ml_canvas_t *c = &sm->canvas;
    char l1[96], l2[96];
    snprintf(l1, sizeof l1, "Terminal too small: %dx%d.", c->cols, c->rows);
    snprintf(l2, sizeof l2, "memlens needs %dx%d; enlarge it, or q quits.", ML_MIN_COLS,
             ML_MIN_ROWS);
    ml__canvas_text(c, 0, c->rows / 2 - 1 > 0 ? c->rows / 2 - 1 : 0, c->cols, ML_ST_ERROR, l1);
    ml__canvas_text(c, 0, c->rows / 2 > 1 ? c->rows / 2 : 1, c->cols, ML_ST_NORMAL, l2);
}

/* Work a step on the UI thread does, on the status line: the previous frame
 * stays, and the status line says what runs and how far it got (the keys
 * typed meanwhile wait). Once the step has run for progress_ms, and then at
 * most every PROGRESS_REDRAW_MS; done == 0 starts a step. Before that
 * (ml__sm_run sets io), or while too small, nothing is shown. */
static void sm_progress(void *ctx, const char *what, uint64_t done, uint64_t total) {
    ml_screen_t *sm = ctx;
    if (!sm->io || !sm->io->present || sm->too_small) return;
    uint64_t now = now_ms();
    if (done == 0) {
        sm->busy_t0 = now;
        sm->busy_shown = 0;
    }
    uint64_t after = sm->o.progress_ms < 0    ? 0
                     : sm->o.progress_ms == 0 ? ML_SM_PROGRESS_MS
                                              : (uint64_t)sm->o.progress_ms;
    if (now < sm->busy_t0 + after) return;
    if (sm->busy_shown && now < sm->busy_shown + PROGRESS_REDRAW_MS) return;
    sm->busy_shown = now;
    ml_canvas_t *c = &sm->canvas;
    int y = c->rows - 2;
    char n[32];
    ml__canvas_fill(c, 0, y, c->cols, 1, ' ', ML_ST_NORMAL);
    int pct = total ? (int)(done * 100 / total) : 0;
    int x = ml__canvas_printf(c, 0, y, c->cols, ML_ST_BOLD, "%s: %d%% of %s", what,
                              pct > 100 ? 100 : pct, ml__fmt_count(total, n, sizeof n));
    ml__canvas_text(c, x, y, c->cols - x, ML_ST_DIM, " (keys wait)");
    sm->io->present(sm->io->ctx, c);
}

void ml__sm_draw(ml_screen_t *sm) {
    ml_canvas_t *c = &sm->canvas;
    /* The call tree is built or listed when first drawn after a change: do
     * it before the canvas is cleared, so that its progress line shows over
     * the previous frame rather than over a half-drawn one. */
    if (sm->view == ML_VIEW_TREE) ml_vmodel_tree_nrows(sm->m);
    ml__canvas_clear(c);
    sm->too_small = c->cols < ML_MIN_COLS || c->rows < ML_MIN_ROWS;
    if (sm->too_small) {
        draw_too_small(sm);
        return;
    }
    layout(sm);
    ml_panel_t *p = sm->panels[sm->view];
    draw_title(sm);
    ml__canvas_fill(c, 0, 1, c->cols, 1, ' ', ML_ST_HEADER);
    if (p->cls->print_header) p->cls->print_header(p, c, 1);
    p->cls->draw(p, c);
    draw_status(sm);
    draw_bar(sm);
}

void ml__sm_resize(ml_screen_t *sm, int cols, int rows) {
    if (cols == sm->canvas.cols && rows == sm->canvas.rows) return;
    if (ml__canvas_resize(&sm->canvas, cols, rows) < 0) return;
    layout(sm);
}

/* ------------------------------------------------------------------------- */
/* Events                                                                    */
/* ------------------------------------------------------------------------- */

static bool filterable(ml_view_t v) {
    return v == ML_VIEW_SITES || v == ML_VIEW_TREE || v == ML_VIEW_SUGGEST;
}

static int search_key(ml_screen_t *sm, int key) {
    size_t n = strlen(sm->search);
    switch (key) {
    case ML_KEY_ENTER:
        sm->searching = false;
        return ML_HANDLED | ML_REDRAW;
    case ML_KEY_ESC:
        sm->searching = false;
        snprintf(sm->search, sizeof sm->search, "%s", sm->search_saved);
        break;
    case ML_KEY_BACKSPACE:
    case 127:
    case 8:
        if (n) sm->search[n - 1] = '\0';
        break;
    case 21: /* Ctrl-U */
        sm->search[0] = '\0';
        break;
    default:
        if (key >= ' ' && key < 0x7f && n + 1 < sizeof sm->search) {
            sm->search[n] = (char)key;
            sm->search[n + 1] = '\0';
        } else {
            return ML_HANDLED;
        }
    }
    /* Filter as one types, like htop's incremental filter. */
    ml_vmodel_set_filter(sm->m, sm->search);
    ml__sm_data_changed(sm);
    return ML_HANDLED | ML_REDRAW;
}

static int global_key(ml_screen_t *sm, int key) {
    for (int i = 0; i < NBAR_VIEWS; i++) {
        if (key == bar_views[i].key) {
            ml__sm_switch(sm, bar_views[i].view);
            return ML_HANDLED | ML_REDRAW;
        }
    }
    switch (key) {
    case 'q':
    case 'Q':
    case ML_KEY_F(10):
        return ML_HANDLED | ML_BREAK_LOOP;
    case '?':
    case ML_KEY_F(1):
        if (sm->view == ML_VIEW_HELP)
            ml__sm_back(sm);
        else
            ml__sm_switch(sm, ML_VIEW_HELP);
        return ML_HANDLED | ML_REDRAW;
    case '/':
    case ML_KEY_F(3):
        if (!filterable(sm->view)) ml__sm_switch(sm, ML_VIEW_SITES);
        sm->searching = true;
        snprintf(sm->search_saved, sizeof sm->search_saved, "%s", ml_vmodel_filter(sm->m));
        snprintf(sm->search, sizeof sm->search, "%s", ml_vmodel_filter(sm->m));
        return ML_HANDLED | ML_REDRAW;
    case ML_KEY_TAB:
    case ML_KEY_BTAB: {
        int cur = 0;
        ml_view_t v = sm->view == ML_VIEW_SITE || sm->view == ML_VIEW_HELP ? sm->back : sm->view;
        for (int i = 0; i < NBAR_VIEWS; i++)
            if (bar_views[i].view == v) cur = i;
        cur = (cur + (key == ML_KEY_TAB ? 1 : NBAR_VIEWS - 1)) % NBAR_VIEWS;
        sm->view = bar_views[cur].view;
        return ML_HANDLED | ML_REDRAW;
    }
    case ML_KEY_ESC:
    case ML_KEY_BACKSPACE:
    case 127:
        if (sm->view == ML_VIEW_SITE || sm->view == ML_VIEW_HELP) {
            ml__sm_back(sm);
            return ML_HANDLED | ML_REDRAW;
        }
        if (key == ML_KEY_ESC && ml_vmodel_filter(sm->m)[0]) {
            ml_vmodel_set_filter(sm->m, NULL);
            ml__sm_data_changed(sm);
            ml__sm_message(sm, "Filter cleared.");
            return ML_HANDLED | ML_REDRAW;
        }
        return ML_HANDLED;
    case ML_KEY_CTRL_L:
        return ML_HANDLED | ML_REDRAW | ML_RESIZE;
    default:
        return ML_IGNORED;
    }
}

static int mouse_to_key(ml_screen_t *sm, const ml_uievent_t *ev, int *second) {
    *second = ML_KEY_NONE;
    if (ev->mouse == ML_MOUSE_WHEELUP) return ML_KEY_WHEELUP;
    if (ev->mouse == ML_MOUSE_WHEELDOWN) return ML_KEY_WHEELDOWN;
    if (ev->y == sm->canvas.rows - 1) {
        for (int i = 0; i < sm->nbar; i++)
            if (ev->x >= sm->bar[i].x0 && ev->x < sm->bar[i].x1) return sm->bar[i].key;
        return ML_KEY_NONE;
    }
    ml_panel_t *p = sm->panels[sm->view];
    if (ev->y >= p->y && ev->y < p->y + p->h && ev->x >= p->x && ev->x < p->x + p->w) {
        if (ev->mouse == ML_MOUSE_DOUBLE) *second = ML_KEY_ENTER; /* a double click opens */
        return ML_KEY_CLICK + (ev->y - p->y);
    }
    return ML_KEY_NONE;
}

static int dispatch_key(ml_screen_t *sm, int key) {
    if (key == ML_KEY_NONE) return ML_IGNORED;
    sm->message[0] = '\0';
    if (sm->too_small) {
        if (key == 'q' || key == 'Q' || key == ML_KEY_F(10)) return ML_HANDLED | ML_BREAK_LOOP;
        return ML_HANDLED;
    }
    if (sm->searching) return search_key(sm, key);
    ml_panel_t *p = sm->panels[sm->view];
    int r = p->cls->on_key ? p->cls->on_key(p, key) : ML_IGNORED;
    if (r & ML_HANDLED) return r;
    return r | global_key(sm, key);
}

int ml__sm_event(ml_screen_t *sm, const ml_uievent_t *ev) {
    switch (ev->type) {
    case ML_UI_KEY:
        return dispatch_key(sm, ev->key);
    case ML_UI_RESIZE:
        ml__sm_resize(sm, ev->cols, ev->rows);
        return ML_HANDLED | ML_REDRAW | ML_RESIZE;
    case ML_UI_MOUSE: {
        if (sm->too_small || sm->searching) return ML_HANDLED;
        int second;
        int key = mouse_to_key(sm, ev, &second);
        int r = dispatch_key(sm, key);
        if (second != ML_KEY_NONE && !(r & ML_BREAK_LOOP)) r |= dispatch_key(sm, second);
        return r | ML_REDRAW;
    }
    case ML_UI_QUIT:
        return ML_BREAK_LOOP;
    default:
        return ML_IGNORED;
    }
}

int ml__sm_key(ml_screen_t *sm, int key) {
    ml_uievent_t ev = {.type = ML_UI_KEY, .key = key};
    return ml__sm_event(sm, &ev);
}

/* ------------------------------------------------------------------------- */
/* The loop                                                                  */
/* ------------------------------------------------------------------------- */

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void ml__sm_run(ml_screen_t *sm, const ml_sm_io_t *io) {
    sm->io = io;
    bool dirty = true;
    uint64_t next_refresh = 0;
    ml_vproc_state_t last_state = ml_vmodel_summary(sm->m)->state;
    /* A frame before the first load step: that step can build the whole
     * analysis from the snapshot (a minute for a trace of a million sites),
     * and the screen says "loading" meanwhile rather than staying blank. */
    if (ml_vmodel_loading(sm->m)) {
        ml__sm_draw(sm);
        if (io->present) io->present(io->ctx, &sm->canvas);
    }
    for (;;) {
        int timeout = -1;
        if (ml_vmodel_loading(sm->m)) {
            int rc = ml_vmodel_load_step(sm->m, LOAD_STEP_MS);
            if (rc < 0) {
                snprintf(sm->load_error, sizeof sm->load_error,
                         "Trace damaged: %s. The views show the data before the damage.",
                         ml_vmodel_error(sm->m));
            } else if (rc > 0) {
                timeout = 0;
                /* A full snapshot per step would make loading quadratic on
                 * traces with many sites; twice a second is plenty. */
                uint64_t now = now_ms();
                if (now >= next_refresh) {
                    ml_vmodel_refresh(sm->m);
                    next_refresh = now + 500;
                }
            }
            ml__sm_data_changed(sm);
            dirty = true;
        } else if (sm->o.live) {
            uint64_t now = now_ms();
            if (now >= next_refresh) {
                uint64_t gen = ml_vmodel_generation(sm->m);
                ml_vmodel_refresh(sm->m);
                if (ml_vmodel_generation(sm->m) != gen) {
                    ml__sm_data_changed(sm);
                    dirty = true;
                }
                /* The program ended: a full repaint wipes whatever it wrote
                 * over the view. */
                ml_vproc_state_t st = ml_vmodel_summary(sm->m)->state;
                if (st != last_state && sm->o.shared_tty && io->repaint) io->repaint(io->ctx);
                last_state = st;
                /* The collector waits while a refresh holds the model's
                 * lock: keep that under a fifth of the time. */
                uint64_t period = (uint64_t)sm->o.refresh_ms,
                         cost = ml_vmodel_refresh_cost_ms(sm->m);
                if (period < 4 * cost) period = 4 * cost;
                next_refresh = now + period;
            }
            timeout = (int)(next_refresh - now);
            if (timeout < 0) timeout = 0;
        }
        /* Background work (the strategy advisor) reports in. */
        if (ml_vmodel_poll(sm->m)) {
            ml__sm_data_changed(sm);
            dirty = true;
        }
        if (ml_vmodel_busy(sm->m) && (timeout < 0 || timeout > 250)) timeout = 250;
        if (dirty) {
            ml__sm_draw(sm);
            if (io->present) io->present(io->ctx, &sm->canvas);
            dirty = false;
        }
        ml_uievent_t ev = {.type = ML_UI_NONE};
        io->next(io->ctx, timeout, &ev);
        if (ev.type == ML_UI_NONE) continue;
        int r = ml__sm_event(sm, &ev);
        if (r & ML_BREAK_LOOP) break;
        if (ev.type == ML_UI_KEY && ev.key == ML_KEY_CTRL_L && io->repaint) io->repaint(io->ctx);
        if (r & (ML_REDRAW | ML_RESIZE | ML_HANDLED)) dirty = true;
    }
    sm->io = NULL;
}
