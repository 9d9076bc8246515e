/* crt.c - the terminal: curses init and restore, signals, colours, input,
 * and copying a canvas to the screen. The only file of the viewer that
 * includes <curses.h> (htop's CRT.c plays the same part).
 *
 * The terminal is always given back: on q, on any exit() (atexit), on
 * SIGINT/SIGTERM/SIGHUP (the loop is asked to stop and restores it on its
 * way out; a second signal restores it at once and exits), and on a crash
 * (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT restore it, print a line and
 * re-raise the signal so the exit status and core dump are the usual ones).
 */
#define _GNU_SOURCE
#define NCURSES_WIDECHAR 1
#include "viewer_internal.h"

#include <curses.h>
#include <term.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

static SCREEN *screen;
static FILE *tty_file;
static volatile sig_atomic_t active;
static volatile sig_atomic_t stop_sig;
static bool hung_up; /* the terminal went away without a SIGHUP reaching us */
/* Job control of the live view (ml__crt_suspend): SUSP_* with __atomic. */
enum { SUSP_NONE, SUSP_ASKED, SUSP_LEFT, SUSP_CONTINUE };
static int suspend_state;
static int in_fd = -1;
static bool unicode_ok, mouse_on;
static attr_t style_attr[ML_ST_COUNT_];
static bool atexit_done;

static const int fatal_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static const int stop_sigs[] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction old_fatal[5], old_stop[3];
static bool stop_installed[3];

static void restore_signals(void);
static bool crt_suspend_point(void);

/* ------------------------------------------------------------------------- */
/* Restore                                                                   */
/* ------------------------------------------------------------------------- */

void ml__crt_done(void) {
    if (!active) return;
    active = 0;
    if (mouse_on) {
        mousemask(0, NULL);
        mouse_on = false;
    }
    curs_set(1);
    endwin();
    /* delscreen after endwin frees curses' memory; the FILE of a separate
     * terminal is ours to close. */
    delscreen(screen);
    screen = NULL;
    in_fd = -1;
    if (tty_file) {
        fclose(tty_file);
        tty_file = NULL;
    }
    restore_signals();
}

static void on_fatal(int sig) {
    /* endwin() is not async-signal-safe, but the process is about to die and
     * a terminal left in raw mode on the alternate screen is worse; htop's
     * CRT_handleSIGSEGV makes the same trade. */
    if (active) {
        active = 0;
        endwin();
    }
    static const char msg[] =
        "memlens: the viewer crashed; the terminal was restored. Please report it "
        "with the trace, or use `memlens report` meanwhile.\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_stop(int sig) {
    for (size_t i = 0; i < sizeof stop_sigs / sizeof stop_sigs[0]; i++) {
        /* Chain a handler that was there before (live mode forwards SIGTERM
         * and SIGHUP to the program). */
        if (stop_sigs[i] == sig && stop_installed[i] && !(old_stop[i].sa_flags & SA_SIGINFO) &&
            old_stop[i].sa_handler != SIG_DFL && old_stop[i].sa_handler != SIG_IGN)
            old_stop[i].sa_handler(sig);
    }
    if (stop_sig && active) {
        /* Second signal: the loop did not get there; restore now. */
        active = 0;
        endwin();
        _exit(128 + sig);
    }
    stop_sig = sig;
}

int ml__crt_stop_signal(void) {
    /* A terminal that hung up ends the viewer as SIGHUP does. */
    return stop_sig ? stop_sig : hung_up ? SIGHUP : 0;
}

/* Whether the terminal is gone: its line hung up (the emulator closed, ssh
 * dropped) or the descriptor is no more. The kernel sends SIGHUP only to the
 * foreground process group of the terminal's session, so a viewer in a
 * session of its own (setsid) or with SIGHUP blocked gets none; every read
 * then fails at once and, without this check, the loop spun at full CPU
 * for ever. */
static bool tty_gone(void) {
    if (in_fd < 0) return false;
    struct pollfd p = {.fd = in_fd, .events = POLLIN};
    if (poll(&p, 1, 0) < 0) return false;
    return (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* ------------------------------------------------------------------------- */
/* Init                                                                      */
/* ------------------------------------------------------------------------- */

static void install_signals(const ml_crt_opts_t *o) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_RESETHAND;
    for (size_t i = 0; i < sizeof fatal_sigs / sizeof fatal_sigs[0]; i++)
        sigaction(fatal_sigs[i], &sa, &old_fatal[i]);
    sa.sa_handler = on_stop;
    sa.sa_flags = 0;
    stop_sig = 0;
    for (size_t i = 0; i < sizeof stop_sigs / sizeof stop_sigs[0]; i++) {
        stop_installed[i] = false;
        if (stop_sigs[i] == SIGINT && !o->catch_int) continue;
        stop_installed[i] = sigaction(stop_sigs[i], &sa, &old_stop[i]) == 0;
    }
}

static void restore_signals(void) {
    for (size_t i = 0; i < sizeof fatal_sigs / sizeof fatal_sigs[0]; i++)
        sigaction(fatal_sigs[i], &old_fatal[i], NULL);
    for (size_t i = 0; i < sizeof stop_sigs / sizeof stop_sigs[0]; i++)
        if (stop_installed[i]) sigaction(stop_sigs[i], &old_stop[i], NULL);
}

static void init_styles(bool color) {
    /* Monochrome first: every style must read without colour (NO_COLOR, a
     * vt100, a serial console). */
    attr_t mono[ML_ST_COUNT_] = {
        [ML_ST_NORMAL] = A_NORMAL,
        [ML_ST_DIM] = A_DIM,
        [ML_ST_BOLD] = A_BOLD,
        [ML_ST_TITLE] = A_REVERSE | A_BOLD,
        [ML_ST_HEADER] = A_REVERSE,
        [ML_ST_SELECTED] = A_REVERSE,
        [ML_ST_BAR_KEY] = A_BOLD,
        [ML_ST_BAR_LABEL] = A_REVERSE,
        [ML_ST_BAR_ACTIVE] = A_BOLD | A_UNDERLINE,
        [ML_ST_WARN] = A_BOLD,
        [ML_ST_ERROR] = A_BOLD | A_REVERSE,
        [ML_ST_GOOD] = A_NORMAL,
        [ML_ST_HEAP] = A_NORMAL,
        [ML_ST_RSS] = A_NORMAL,
        [ML_ST_MMAP] = A_NORMAL,
        [ML_ST_GPU] = A_NORMAL,
        [ML_ST_PEAK] = A_BOLD,
        [ML_ST_CURSOR] = A_REVERSE,
        [ML_ST_MAP0] = A_DIM,
        [ML_ST_MAP1] = A_NORMAL,
        [ML_ST_MAP2] = A_NORMAL,
        [ML_ST_MAP3] = A_NORMAL,
        [ML_ST_MAP4] = A_NORMAL,
    };
    memcpy(style_attr, mono, sizeof mono);
    if (!color) return;
    start_color();
    use_default_colors();
    static const struct {
        int style;
        short fg, bg;
        attr_t extra;
    } col[] = {
        {ML_ST_DIM, COLOR_BLUE, -1, A_BOLD},
        {ML_ST_TITLE, COLOR_BLACK, COLOR_CYAN, A_BOLD},
        {ML_ST_HEADER, COLOR_BLACK, COLOR_GREEN, 0},
        {ML_ST_SELECTED, COLOR_BLACK, COLOR_CYAN, 0},
        {ML_ST_BAR_KEY, -1, -1, A_BOLD},
        {ML_ST_BAR_LABEL, COLOR_BLACK, COLOR_CYAN, 0},
        {ML_ST_BAR_ACTIVE, COLOR_BLACK, COLOR_YELLOW, 0},
        {ML_ST_WARN, COLOR_YELLOW, -1, A_BOLD},
        {ML_ST_ERROR, COLOR_WHITE, COLOR_RED, A_BOLD},
        {ML_ST_GOOD, COLOR_GREEN, -1, 0},
        {ML_ST_HEAP, COLOR_GREEN, -1, 0},
        {ML_ST_RSS, COLOR_MAGENTA, -1, 0},
        {ML_ST_MMAP, COLOR_YELLOW, -1, 0},
        {ML_ST_GPU, COLOR_RED, -1, 0},
        {ML_ST_PEAK, COLOR_RED, -1, A_BOLD},
        {ML_ST_CURSOR, COLOR_BLACK, COLOR_YELLOW, 0},
        {ML_ST_MAP0, COLOR_BLUE, -1, 0},
        {ML_ST_MAP1, COLOR_CYAN, -1, 0},
        {ML_ST_MAP2, COLOR_GREEN, -1, 0},
        {ML_ST_MAP3, COLOR_YELLOW, -1, 0},
        {ML_ST_MAP4, COLOR_RED, -1, 0},
    };
    for (size_t i = 0; i < sizeof col / sizeof col[0] && (int)i + 1 < COLOR_PAIRS; i++) {
        init_pair((short)(i + 1), col[i].fg, col[i].bg);
        style_attr[col[i].style] = COLOR_PAIR((int)i + 1) | col[i].extra;
    }
}

int ml__crt_init(const ml_crt_opts_t *o, char *err, size_t errlen) {
    setlocale(LC_CTYPE, "");
    const char *cs = nl_langinfo(CODESET);
    unicode_ok = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
    const char *term = getenv("TERM");
    if (!term || !*term) {
        snprintf(err, errlen,
                 "TERM is not set: the viewer needs a terminal (try `memlens report` instead)");
        return -ENOTTY;
    }
    FILE *out = stdout, *in = stdin;
    if (o->tty) {
        tty_file = fopen(o->tty, "r+");
        if (!tty_file) {
            int e = errno;
            snprintf(err, errlen, "cannot open the terminal %s: %s", o->tty, strerror(e));
            return -e;
        }
        out = in = tty_file;
    }
    /* Our handlers go in before newterm(): ncurses installs its own SIGINT
     * and SIGTERM handlers (endwin, then exit(1)) only where it finds the
     * default disposition, and we want ours, which let the loop finish and
     * chain to a handler that was there before (live mode forwards SIGTERM
     * to the program). */
    install_signals(o);
    screen = newterm(NULL, out, in);
    if (!screen) {
        restore_signals();
        snprintf(err, errlen, "cannot start the terminal UI on TERM=%s (unknown terminal type?)",
                 term);
        if (tty_file) fclose(tty_file), tty_file = NULL;
        return -ENOTTY;
    }
    set_term(screen);
    in_fd = fileno(in);
    hung_up = false;
    /* A terminal that cannot move the cursor (TERM=dumb, an emacs shell
     * buffer) would get a stream of garbage. */
    char *cup = tigetstr("cup");
    if (!cup || cup == (char *)-1) {
        endwin();
        delscreen(screen);
        screen = NULL;
        restore_signals();
        if (tty_file) fclose(tty_file), tty_file = NULL;
        snprintf(
            err, errlen,
            "the terminal (TERM=%s) cannot show a full-screen UI; use `memlens report` instead",
            term);
        return -ENOTTY;
    }
    active = 1;
    if (!atexit_done) {
        atexit(ml__crt_done);
        atexit_done = true;
    }
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    intrflush(stdscr, FALSE);
    curs_set(0);
    set_escdelay(25);
    bool color = o->color && has_colors();
    const char *nc = getenv("NO_COLOR");
    if (nc && *nc) color = false; /* https://no-color.org */
    init_styles(color);
    if (o->mouse) {
        mmask_t want = BUTTON1_CLICKED | BUTTON1_DOUBLE_CLICKED | BUTTON4_PRESSED;
#ifdef BUTTON5_PRESSED
        want |= BUTTON5_PRESSED;
#endif
        mouse_on = mousemask(want, NULL) != 0;
    }
    return 0;
}

void ml__crt_size(int *cols, int *rows) {
    int y, x;
    getmaxyx(stdscr, y, x);
    *cols = x;
    *rows = y;
}

bool ml__crt_unicode(void) {
    return unicode_ok;
}

/* ------------------------------------------------------------------------- */
/* Output and input                                                          */
/* ------------------------------------------------------------------------- */

static void crt_present(void *ctx, const ml_canvas_t *c) {
    (void)ctx;
    if (!active) return;
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    for (int y = 0; y < c->rows && y < rows; y++) {
        for (int x = 0; x < c->cols && x < cols; x++) {
            const ml_cell_t *cell = &c->cells[y * c->cols + x];
            wchar_t wc[2] = {(wchar_t)(unicode_ok ? cell->ch : ml__glyph_ascii(cell->ch)), 0};
            /* A cell is one column. A character the terminal draws in two
             * (CJK, emoji) or none (a combining mark), or cannot print,
             * would push or pull the rest of the row out of its columns
             * (and wrap it onto the next row): it gets a stand-in. */
            if (wc[0] >= 0x80 && wcwidth(wc[0]) != 1) wc[0] = '?';
            cchar_t cc;
            attr_t a = style_attr[cell->style < ML_ST_COUNT_ ? cell->style : 0];
            setcchar(&cc, wc, a & ~A_COLOR, (short)PAIR_NUMBER(a), NULL);
            mvwadd_wch(stdscr, y, x, &cc);
        }
    }
    wnoutrefresh(stdscr);
    doupdate();
}

static void crt_repaint(void *ctx) {
    (void)ctx;
    clearok(curscr, TRUE);
}

static int map_key(int code) {
    switch (code) {
    case KEY_UP:
        return ML_KEY_UP;
    case KEY_DOWN:
        return ML_KEY_DOWN;
    case KEY_LEFT:
        return ML_KEY_LEFT;
    case KEY_RIGHT:
        return ML_KEY_RIGHT;
    case KEY_PPAGE:
        return ML_KEY_PGUP;
    case KEY_NPAGE:
        return ML_KEY_PGDN;
    case KEY_HOME:
        return ML_KEY_HOME;
    case KEY_END:
        return ML_KEY_END;
    case KEY_BACKSPACE:
        return ML_KEY_BACKSPACE;
    case KEY_DC:
        return ML_KEY_DELETE;
    case KEY_BTAB:
        return ML_KEY_BTAB;
    case KEY_ENTER:
        return ML_KEY_ENTER;
    default:
        if (code >= KEY_F(1) && code <= KEY_F(12)) return ML_KEY_F(code - KEY_F0);
        return ML_KEY_NONE;
    }
}

static void crt_next(void *ctx, int timeout_ms, ml_uievent_t *ev) {
    (void)ctx;
    ev->type = ML_UI_NONE;
    /* Wait in slices so that a stop signal is seen even while no key comes. */
    int left = timeout_ms;
    for (;;) {
        if (stop_sig) {
            ev->type = ML_UI_QUIT;
            return;
        }
        if (crt_suspend_point()) {
            ev->type = ML_UI_RESIZE; /* the size may have changed meanwhile */
            ml__crt_size(&ev->cols, &ev->rows);
            return;
        }
        int slice = left < 0 || left > 200 ? 200 : left;
        wtimeout(stdscr, slice);
        wint_t wc;
        int rc = wget_wch(stdscr, &wc);
        if (rc == ERR) {
            if (tty_gone()) {
                hung_up = true;
                ev->type = ML_UI_QUIT;
                return;
            }
            if (left >= 0) {
                left -= slice;
                if (left <= 0) return;
            }
            continue;
        }
        if (rc == KEY_CODE_YES) {
            if (wc == KEY_RESIZE) {
                ev->type = ML_UI_RESIZE;
                ml__crt_size(&ev->cols, &ev->rows);
                return;
            }
            if (wc == KEY_MOUSE) {
                MEVENT me;
                if (getmouse(&me) != OK) continue;
                ev->type = ML_UI_MOUSE;
                ev->x = me.x;
                ev->y = me.y;
                if (me.bstate & BUTTON4_PRESSED) ev->mouse = ML_MOUSE_WHEELUP;
#ifdef BUTTON5_PRESSED
                else if (me.bstate & BUTTON5_PRESSED)
                    ev->mouse = ML_MOUSE_WHEELDOWN;
#endif
                else if (me.bstate & BUTTON1_DOUBLE_CLICKED)
                    ev->mouse = ML_MOUSE_DOUBLE;
                else
                    ev->mouse = ML_MOUSE_CLICK;
                return;
            }
            int k = map_key((int)wc);
            if (k == ML_KEY_NONE) continue;
            ev->type = ML_UI_KEY;
            ev->key = k;
            return;
        }
        ev->type = ML_UI_KEY;
        if (wc == '\r')
            ev->key = ML_KEY_ENTER;
        else if (wc == 127 || wc == 8)
            ev->key = ML_KEY_BACKSPACE;
        else
            ev->key = (int)wc;
        return;
    }
}

/* ------------------------------------------------------------------------- */
/* Job control in live mode                                                  */
/* ------------------------------------------------------------------------- */

/* `memlens run --live` catches SIGTSTP for the program's sake, so curses
 * installs no handler of its own, and memlens stops itself when the program
 * stops (Ctrl-Z). The terminal must be the shell's while it is stopped: the
 * collector's thread asks the UI's thread, the only one that touches
 * curses, to leave curses mode first (endwin: the normal screen, echo, the
 * cursor, no mouse reports), and after `fg` to come back and repaint. */
void ml__crt_suspend(void) {
    if (!active) return;
    __atomic_store_n(&suspend_state, SUSP_ASKED, __ATOMIC_SEQ_CST);
    /* The UI reads keys in slices of 200 ms; a refresh may take longer:
     * up to a second, then memlens stops anyway. */
    for (int i = 0; i < 200 && __atomic_load_n(&suspend_state, __ATOMIC_SEQ_CST) == SUSP_ASKED;
         i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

void ml__crt_resume(void) {
    for (;;) {
        int st = __atomic_load_n(&suspend_state, __ATOMIC_SEQ_CST);
        /* The UI left: let it come back. It never saw the request (busy for
         * the whole second): withdraw it. Each a swap, as the UI may take
         * the request meanwhile. */
        int to = st == SUSP_LEFT ? SUSP_CONTINUE : st == SUSP_ASKED ? SUSP_NONE : -1;
        if (to < 0 || __atomic_compare_exchange_n(&suspend_state, &st, to, false, __ATOMIC_SEQ_CST,
                                                  __ATOMIC_SEQ_CST))
            return;
    }
}

/* On the UI's thread: leaves curses when asked, waits for the word to come
 * back, and says whether it did (the screen is then repainted whole). The
 * state changes by swaps only, so that a request made as soon as memlens
 * was continued (Ctrl-Z again) is not lost: it is taken at the next key
 * wait. */
static bool crt_suspend_point(void) {
    if (__atomic_load_n(&suspend_state, __ATOMIC_SEQ_CST) != SUSP_ASKED) return false;
    endwin();
    int st = SUSP_ASKED;
    if (__atomic_compare_exchange_n(&suspend_state, &st, SUSP_LEFT, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
        while (__atomic_load_n(&suspend_state, __ATOMIC_SEQ_CST) == SUSP_LEFT && !stop_sig) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    st = SUSP_CONTINUE;
    __atomic_compare_exchange_n(&suspend_state, &st, SUSP_NONE, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    /* The next refresh puts curses back in its mode; repaint everything. */
    clearok(curscr, TRUE);
    return true;
}

ml_sm_io_t ml__crt_io(void) {
    return (ml_sm_io_t){
        .ctx = NULL, .next = crt_next, .present = crt_present, .repaint = crt_repaint};
}
