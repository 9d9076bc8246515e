/* main.c - `memlens view`: arguments, clear errors, batch mode, and the
 * live view's thread.
 *
 * Batch mode (`--batch --keys "2 j Enter q"`) runs the same event loop on a
 * virtual screen of --size COLSxROWS, feeds it the keys, and prints the
 * screen: the UI's own tests run through it, and it is handy for bug reports
 * and for scripts on machines without a terminal.
 */
#define _GNU_SOURCE
#include "ml_viewer.h"
#include "ml_options.h"
#include "ml_outfile.h"
#include "viewer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2

static void usage(FILE *f) {
    fputs("usage: memlens view [--no-color] [--no-mouse] [--ascii] [--no-suggestions] [--replay]\n"
          "                    [--history-mb N] [--advisor-mem BYTES] [--advisor-ops N]\n"
          "                    [--alloc-fn NAME]... FILE\n"
          "       memlens view --batch [--keys \"KEY ...\"] [--size COLSxROWS] [--ascii] FILE\n"
          "\n"
          "Opens a trace in the terminal UI (keys: ? in the viewer, or docs/viewer.md).\n"
          "  --no-color      no colours (also NO_COLOR=1)\n"
          "  --no-mouse      leave the mouse to the terminal (for selecting text)\n"
          "  --ascii         ASCII instead of block, braille and line characters\n"
          "  --no-suggestions  skip the strategy advisor (it replays the trace in the background)\n"
          "  --advisor-mem BYTES, --advisor-ops N\n"
          "                  the advisor's budgets, as `memlens report` takes them (default 768M\n"
          "                  and 40M); advice a report saved is found under the same budgets\n"
          "  --batch         no terminal: run the keys on a virtual screen and print it\n"
          "  --keys KEYS     space-separated keys for --batch: a character, Enter, Esc, Tab, Up,\n"
          "                  Down, Left, Right, PgUp, PgDn, Home, End, BS, F1..F12, C-x, Space;\n"
          "                  text:WORD types WORD; click:X,Y and dclick:X,Y click; "
          "resize:COLSxROWS;\n"
          "                  print prints the screen at that point (the last screen always is)\n"
          "  --size CxR      virtual screen for --batch (default 80x24)\n"
          "  --replay        replay the records instead of restoring the trace's analysis snapshot\n"
          "  --alloc-fn NAME a function the program allocates through: sites are named by its\n"
          "                  callers (as in memlens report; `*` matches any run of characters)\n"
          "  --history-mb N  memory the background history replay (time travel of a trace opened\n"
          "                  from its snapshot) may use, in MiB (default 512, also\n"
          "                  MEMLENS_VIEW_HISTORY_MB; 0: none, only the peak and the end)\n",
          f);
}

static void err_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void err_msg(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("memlens: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ------------------------------------------------------------------------- */
/* Batch mode                                                                */
/* ------------------------------------------------------------------------- */

typedef struct {
    char **tok;
    int ntok, next;
    const char *pending; /* rest of a text:WORD token */
    const ml_canvas_t *last;
    int bad;
} batch_t;

static void print_canvas(const ml_canvas_t *c) {
    char *s = ml__canvas_dump(c);
    if (s) fputs(s, stdout);
    free(s);
}

static void batch_present(void *ctx, const ml_canvas_t *c) {
    ((batch_t *)ctx)->last = c;
}

static void batch_next(void *ctx, int timeout_ms, ml_uievent_t *ev) {
    batch_t *b = ctx;
    (void)timeout_ms;
    ev->type = ML_UI_NONE;
    if (b->pending && *b->pending) {
        ev->type = ML_UI_KEY;
        ev->key = (unsigned char)*b->pending++;
        return;
    }
    while (b->next < b->ntok) {
        const char *t = b->tok[b->next++];
        int x, y, cols, rows;
        if (!strcmp(t, "print")) {
            if (b->last) print_canvas(b->last);
            fputs("--------\n", stdout);
            continue;
        }
        if (!strncmp(t, "text:", 5)) {
            b->pending = t + 5;
            if (!*b->pending) continue;
            ev->type = ML_UI_KEY;
            ev->key = (unsigned char)*b->pending++;
            return;
        }
        if (sscanf(t, "click:%d,%d", &x, &y) == 2 || sscanf(t, "dclick:%d,%d", &x, &y) == 2) {
            ev->type = ML_UI_MOUSE;
            ev->mouse = t[0] == 'd' ? ML_MOUSE_DOUBLE : ML_MOUSE_CLICK;
            ev->x = x;
            ev->y = y;
            return;
        }
        if (sscanf(t, "resize:%dx%d", &cols, &rows) == 2) {
            ev->type = ML_UI_RESIZE;
            ev->cols = cols;
            ev->rows = rows;
            return;
        }
        int k = ml__key_parse(t);
        if (k == ML_KEY_NONE) {
            fprintf(stderr, "memlens: warning: --keys: unknown key '%s' skipped\n", t);
            b->bad++;
            continue;
        }
        ev->type = ML_UI_KEY;
        ev->key = k;
        return;
    }
    ev->type = ML_UI_QUIT;
}

static int split_keys(const char *keys, batch_t *b) {
    char *copy = strdup(keys ? keys : "");
    if (!copy) return -ENOMEM;
    int cap = 16;
    b->tok = malloc((size_t)cap * sizeof *b->tok);
    if (!b->tok) {
        free(copy);
        return -ENOMEM;
    }
    for (char *save = NULL, *t = strtok_r(copy, " \t\n", &save); t;
         t = strtok_r(NULL, " \t\n", &save)) {
        if (b->ntok == cap) {
            cap *= 2;
            char **n = realloc(b->tok, (size_t)cap * sizeof *n);
            if (!n) break;
            b->tok = n;
        }
        b->tok[b->ntok++] = strdup(t);
    }
    free(copy);
    return 0;
}

static int run_batch(ml_vmodel_t *m, const char *keys, int cols, int rows, bool ascii) {
    int rc = ml_vmodel_load_all(m);
    if (rc < 0)
        err_msg("%s: %s (the screen shows the data before it)", ml_vmodel_path(m),
                ml_vmodel_error(m));
    /* A batch screen is the final one: with the advisor's suggestions. */
    ml_vmodel_wait(m);
    ml_sm_opts_t so = {.cols = cols, .rows = rows, .unicode = !ascii};
    ml_screen_t *sm = ml__sm_new(m, &so);
    batch_t b = {0};
    if (!sm || split_keys(keys, &b) < 0) {
        err_msg("out of memory");
        ml__sm_free(sm);
        return EXIT_ERROR;
    }
    ml_sm_io_t io = {.ctx = &b, .next = batch_next, .present = batch_present};
    ml__sm_run(sm, &io);
    if (b.last) print_canvas(b.last);
    for (int i = 0; i < b.ntok; i++)
        free(b.tok[i]);
    free(b.tok);
    ml__sm_free(sm);
    return rc < 0 ? EXIT_ERROR : EXIT_OK;
}

/* ------------------------------------------------------------------------- */
/* `memlens view`                                                            */
/* ------------------------------------------------------------------------- */

int ml_cmd_view(int argc, char **argv) {
    bool batch = false, ascii = false, no_color = false, no_mouse = false, advice = true;
    const char *keys = NULL, *path = NULL, *history = getenv("MEMLENS_VIEW_HISTORY_MB");
    bool replay = false;
    uint64_t adv_mem = 0, adv_ops = 0; /* --advisor-mem, --advisor-ops (0: the defaults) */
    int cols = 80, rows = 24;
    static const char *alloc_fns[64]; /* --alloc-fn: argv's strings */
    size_t nalloc_fns = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--batch"))
            batch = true;
        else if (!strcmp(a, "--ascii"))
            ascii = true;
        else if (!strcmp(a, "--no-color") || !strcmp(a, "--no-colour"))
            no_color = true;
        else if (!strcmp(a, "--no-mouse"))
            no_mouse = true;
        else if (!strcmp(a, "--no-suggestions"))
            advice = false;
        else if (!strcmp(a, "--replay"))
            replay = true;
        else if (!strcmp(a, "--history-mb") && i + 1 < argc)
            history = argv[++i];
        else if (!strcmp(a, "--alloc-fn") && i + 1 < argc) {
            if (!argv[i + 1][0] || nalloc_fns == sizeof alloc_fns / sizeof alloc_fns[0]) {
                err_msg("--alloc-fn takes a function's name (`*` matches any run), at most %zu times",
                        sizeof alloc_fns / sizeof alloc_fns[0]);
                return EXIT_USAGE;
            }
            alloc_fns[nalloc_fns++] = argv[++i];
        }
        else if ((!strcmp(a, "--advisor-mem") || !strcmp(a, "--advisor-ops")) && i + 1 < argc) {
            bool mem = !strcmp(a, "--advisor-mem");
            uint64_t v;
            if (ml_parse_uint(argv[++i], &v) < 0 || !v) {
                err_msg(mem ? "--advisor-mem takes a byte count over 0, like 4G"
                            : "--advisor-ops takes a count over 0, like 200M");
                return EXIT_USAGE;
            }
            *(mem ? &adv_mem : &adv_ops) = v;
        }
        else if (!strcmp(a, "--keys") && i + 1 < argc)
            keys = argv[++i];
        else if (!strcmp(a, "--size") && i + 1 < argc) {
            if (sscanf(argv[++i], "%dx%d", &cols, &rows) != 2 || cols < 1 || rows < 1 ||
                cols > 1000 || rows > 1000) {
                err_msg("--size takes COLSxROWS, like 80x24");
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return EXIT_OK;
        } else if (a[0] == '-' && a[1]) {
            err_msg("view: unknown option '%s'", a);
            usage(stderr);
            return EXIT_USAGE;
        } else if (!path) {
            path = a;
        } else {
            err_msg("view: one trace at a time ('%s' and '%s')", path, a);
            return EXIT_USAGE;
        }
    }
    if (!path) {
        err_msg("view: no trace given");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (keys && !batch) {
        err_msg("--keys goes with --batch");
        return EXIT_USAGE;
    }
    uint64_t history_mb = ML_VHISTORY_BUDGET_DEFAULT >> 20;
    if (history && history[0]) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(history, &end, 10);
        if (errno || *end || history[0] == '-' || v > (1ull << 30)) {
            err_msg("--history-mb (MEMLENS_VIEW_HISTORY_MB) takes a number of MiB, like 512; got "
                    "'%s'",
                    history);
            return EXIT_USAGE;
        }
        history_mb = v;
    }
    /* Check the terminal before reading anything: the common mistake of
     * piping the viewer gets its answer at once. */
    if (!batch && !isatty(STDOUT_FILENO)) {
        err_msg("memlens view needs a terminal, and its output is not one. For text or JSON use "
                "`memlens report %s`; for a screen dump use `memlens view --batch`",
                path);
        return EXIT_ERROR;
    }
    ml_vmodel_t *m;
    if (ml_vmodel_new(&m) < 0) {
        err_msg("out of memory");
        return EXIT_ERROR;
    }
    ml_vmodel_set_advice(m, advice);
    ml_vmodel_set_advisor_budget(m, adv_mem, adv_ops);
    ml_vmodel_set_snapshot(m, !replay);
    ml_vmodel_set_history_budget(m, history_mb << 20);
    if (nalloc_fns) {
        ml_build_opts_t bo = {.alloc_fns = alloc_fns, .nalloc_fns = nalloc_fns};
        ml_vmodel_set_build_opts(m, &bo);
    }
    char err[1024];
    int rc = ml_vmodel_open(m, path, err, sizeof err);
    if (rc < 0) {
        char tmp[4096];
        if (rc == -ENOENT && !ml_outfile_pending(path, tmp, sizeof tmp))
            err_msg("%s: no such trace file", path);
        else if (rc == -EISDIR)
            /* The folder --follow-fork fills: report merges it, the viewer
             * shows one process. */
            err_msg("%s: is a directory; `memlens view` opens one trace (one of its .mlt files), and "
                    "`memlens report %s` merges them all",
                    path, path);
        else
            err_msg("%s", err);
        ml_vmodel_free(m);
        return EXIT_ERROR;
    }
    if (batch) {
        int code = run_batch(m, keys, cols, rows, ascii);
        ml_vmodel_free(m);
        return code;
    }

    ml_crt_opts_t co = {.tty = isatty(STDIN_FILENO) ? NULL : "/dev/tty",
                        .color = !no_color,
                        .mouse = !no_mouse,
                        .catch_int = true};
    if (ml__crt_init(&co, err, sizeof err) < 0) {
        err_msg("%s", err);
        ml_vmodel_free(m);
        return EXIT_ERROR;
    }
    int c, r;
    ml__crt_size(&c, &r);
    ml_sm_opts_t so = {.cols = c, .rows = r, .unicode = !ascii && ml__crt_unicode()};
    ml_screen_t *sm = ml__sm_new(m, &so);
    if (!sm) {
        ml__crt_done();
        err_msg("out of memory");
        ml_vmodel_free(m);
        return EXIT_ERROR;
    }
    ml_sm_io_t io = ml__crt_io();
    ml__sm_run(sm, &io);
    ml__crt_done();
    int code = EXIT_OK;
    if (ml_vmodel_error(m)[0]) {
        err_msg("%s: %s", path, ml_vmodel_error(m));
        code = EXIT_ERROR;
    }
    int sig = ml__crt_stop_signal();
    if (sig) code = 128 + sig;
    ml__sm_free(sm);
    ml_vmodel_free(m);
    return code;
}

/* ------------------------------------------------------------------------- */
/* Live mode                                                                 */
/* ------------------------------------------------------------------------- */

struct ml_viewer_live_s {
    ml_vmodel_t *m;
    ml_screen_t *sm;
    pthread_t thread;
    volatile int open;
};

int ml_viewer_live_check(char *err, size_t errlen) {
    int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen,
                 "--live needs a terminal, and there is none (/dev/tty: %s); record without --live "
                 "and open the trace with `memlens view` or `memlens report`",
                 strerror(e));
        return -e;
    }
    close(fd);
    const char *term = getenv("TERM");
    if (!term || !*term || !strcmp(term, "dumb")) {
        snprintf(err, errlen, "--live needs a terminal that can show a full-screen UI (TERM=%s)",
                 term ? term : "");
        return -ENOTTY;
    }
    return 0;
}

static void *live_main(void *arg) {
    ml_viewer_live_t *v = arg;
    /* Asynchronous signals belong to the collector's thread (its handlers
     * forward them to the program); the UI only reads keys. Crash signals
     * stay unblocked: blocking a synchronous SIGSEGV would kill the process
     * without restoring the terminal. */
    sigset_t async;
    sigemptyset(&async);
    sigaddset(&async, SIGINT);
    sigaddset(&async, SIGTERM);
    sigaddset(&async, SIGHUP);
    sigaddset(&async, SIGQUIT);
    sigaddset(&async, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &async, NULL);
    ml_sm_io_t io = ml__crt_io();
    ml__sm_run(v->sm, &io);
    ml__crt_done();
    v->open = 0;
    return NULL;
}

int ml_viewer_live_start(ml_vmodel_t *m, char *err, size_t errlen, ml_viewer_live_t **out) {
    ml_viewer_live_t *v = calloc(1, sizeof *v);
    if (!v) return -ENOMEM;
    v->m = m;
    /* The UI gets its own terminal handle, so the program keeps stdin,
     * stdout and stderr; SIGINT stays with the program (Ctrl-C stops it and
     * the view stays open on the final data). */
    ml_crt_opts_t co = {.tty = "/dev/tty", .color = true, .mouse = true, .catch_int = false};
    if (ml_option_bool(ML_ENV_VIEW_NO_MOUSE)) co.mouse = false;
    int rc = ml__crt_init(&co, err, errlen);
    if (rc < 0) {
        free(v);
        return rc;
    }
    int c, r;
    ml__crt_size(&c, &r);
    ml_sm_opts_t so = {.cols = c,
                       .rows = r,
                       .unicode = ml__crt_unicode(),
                       .live = true,
                       .refresh_ms = 250,
                       .shared_tty = isatty(STDOUT_FILENO) || isatty(STDERR_FILENO)};
    v->sm = ml__sm_new(m, &so);
    if (!v->sm) {
        ml__crt_done();
        free(v);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    v->open = 1;
    rc = pthread_create(&v->thread, NULL, live_main, v);
    if (rc) {
        ml__crt_done();
        ml__sm_free(v->sm);
        free(v);
        snprintf(err, errlen, "cannot start the viewer thread: %s", strerror(rc));
        return -rc;
    }
    *out = v;
    return 0;
}

bool ml_viewer_live_open(const ml_viewer_live_t *v) {
    return v && v->open;
}

void ml_viewer_live_suspend(ml_viewer_live_t *v) {
    if (v && v->open) ml__crt_suspend();
}

void ml_viewer_live_resume(ml_viewer_live_t *v) {
    if (v) ml__crt_resume();
}

int ml_viewer_live_wait(ml_viewer_live_t *v) {
    if (!v) return 0;
    pthread_join(v->thread, NULL);
    int sig = ml__crt_stop_signal();
    ml__sm_free(v->sm);
    free(v);
    return sig;
}
