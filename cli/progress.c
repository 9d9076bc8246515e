/* progress.c - the progress display of the memlens command: a line on stderr
 * for anything that takes more than a second, only when stderr is a terminal
 * (issue 12: nothing in pipes, logs or CI output).
 *
 * Two kinds, on the same line, erased when they end:
 *   - record loops (reading a trace, the advisor's replays) count in trace/
 *     and this draws "memlens: WHAT WHERE NN%", from their first second on;
 *   - stages without a loop to count (restoring the saved analysis,
 *     symbolizing, the advisor as a whole, writing the HTML page) draw
 *     "memlens: WHAT..." from a helper thread once they have taken a second
 *     (ml_cli_stage_begin/end).
 */
#define _GNU_SOURCE
#include "ml_cli.h"
#include "ml_trace_io.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHOW_AFTER_S 1.0

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------- */
/* Record loops                                                              */
/* ------------------------------------------------------------------------- */

static double loop_start;
static bool loop_drawn;

static bool wanted(uint64_t size) {
    (void)size;
    if (!isatty(2)) return false;
    loop_start = now_s();
    loop_drawn = false;
    return true;
}

static void show(const char *what, const char *where, int pct) {
    if (!loop_drawn && now_s() - loop_start < SHOW_AFTER_S) return;
    char safe[PATH_MAX]; /* where: a trace's path, maybe a directory's listing's */
    fprintf(stderr, "\rmemlens: %s%s%s %3d%%\033[K", what, where ? " " : "",
            where ? ml_cli_safe(where, safe, sizeof safe) : "", pct);
    loop_drawn = true;
}

static void clear(void) {
    if (loop_drawn) fprintf(stderr, "\r\033[K");
    loop_drawn = false;
}

void ml_cli_progress_install(void) {
    static const ml_progress_display_t stderr_bar = {wanted, show, clear};
    ml_progress_set_display(&stderr_bar);
}

/* ------------------------------------------------------------------------- */
/* Stages                                                                    */
/* ------------------------------------------------------------------------- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t done;
    pthread_t thread;
    bool running, ended, drawn;
    char what[200];
} stage = {.lock = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static void *stage_main(void *arg) {
    (void)arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)SHOW_AFTER_S;
    pthread_mutex_lock(&stage.lock);
    while (!stage.ended)
        if (pthread_cond_timedwait(&stage.done, &stage.lock, &until) != 0) break;
    if (!stage.ended) {
        fprintf(stderr, "\rmemlens: %s...\033[K", stage.what);
        stage.drawn = true;
    }
    pthread_mutex_unlock(&stage.lock);
    return NULL;
}

void ml_cli_stage_begin(const char *what) {
    if (stage.running || !isatty(2)) return;
    /* It names a trace: no control byte of its name. */
    ml_cli_safe(what, stage.what, sizeof stage.what);
    stage.ended = stage.drawn = false;
    /* Signals stay with the main thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    stage.running = pthread_create(&stage.thread, NULL, stage_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void ml_cli_stage_end(void) {
    if (!stage.running) return;
    pthread_mutex_lock(&stage.lock);
    stage.ended = true;
    pthread_cond_signal(&stage.done);
    pthread_mutex_unlock(&stage.lock);
    pthread_join(stage.thread, NULL);
    stage.running = false;
    if (stage.drawn && !loop_drawn) fprintf(stderr, "\r\033[K");
    stage.drawn = false;
}
