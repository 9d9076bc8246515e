/* ml_viewer.h - the terminal viewer: `memlens view FILE` and the live view
 * of `memlens run --live`.
 *
 * The viewer shows what the analysis library computes (ml_viewer_model.h
 * wraps it); it computes nothing of its own. Keys, views and live mode are
 * described in docs/viewer.md.
 */
#ifndef ML_VIEWER_H
#define ML_VIEWER_H

#include <stdbool.h>
#include <stddef.h>

#include "ml_viewer_model.h"

/** `memlens view [options] FILE`: argv[0] is "view". Returns the exit code
 * (0, 1 for an error with a message on stderr, 2 for usage, 128+signal when
 * a signal stopped it). */
int ml_cmd_view(int argc, char **argv);

/* ------------------------------------------------------------------------- */
/* Live mode                                                                 */
/* ------------------------------------------------------------------------- */

typedef struct ml_viewer_live_s ml_viewer_live_t;

/** Checks that a live view can open (a controlling terminal, a known TERM)
 * before the program is started. Returns 0 or a negative errno with a
 * message in err. */
int ml_viewer_live_check(char *err, size_t errlen);

/** Opens the terminal UI on /dev/tty, leaving the process' own stdin,
 * stdout and stderr (and so the program's) alone, and runs it in a thread of
 * its own on model m, which another thread feeds under ml_vmodel_lock().
 * The UI stays open, with the final data once the program has ended
 * (ml_vmodel_set_process_state), until the user quits. Returns 0, or a
 * negative errno with a message in err. */
int ml_viewer_live_start(ml_vmodel_t *m, char *err, size_t errlen, ml_viewer_live_t **out);

/** True while the UI is open. */
bool ml_viewer_live_open(const ml_viewer_live_t *v);

/** Before memlens stops with the program (Ctrl-Z): the UI leaves the
 * terminal to the shell (the normal screen, echo, the cursor); after it is
 * continued, resume brings the UI back, repainted. From the collector's
 * thread; a closed UI ignores them. */
void ml_viewer_live_suspend(ml_viewer_live_t *v);
void ml_viewer_live_resume(ml_viewer_live_t *v);

/** Waits until the user closes the UI, restores the terminal and frees v.
 * Returns the signal that closed it (SIGTERM, SIGHUP) or 0. */
int ml_viewer_live_wait(ml_viewer_live_t *v);

#endif
