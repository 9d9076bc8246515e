/* progress.c - the counting half of the progress display of long reads.
 *
 * trace/ prints nothing: the drawing is the program's (the memlens command
 * installs a percentage on stderr, cli/progress.c). A record loop pays one
 * increment and a mask test per record, and looks at the file offset every
 * 65536 records.
 */
#include "ml_trace_io.h"

static const ml_progress_display_t *display;

void ml_progress_set_display(const ml_progress_display_t *d) {
    display = d;
}

void ml_progress_start(ml_progress_t *p, const ml_reader_t *r, const char *what, const char *where) {
    *p = (ml_progress_t){.r = r, .what = what, .where = where, .size = ml_reader_size(r), .shown = -1};
    p->on = display && display->wanted(p->size);
}

void ml_progress_start_at(ml_progress_t *p, const uint64_t *at, uint64_t size, const char *what,
                          const char *where) {
    *p = (ml_progress_t){.at = at, .what = what, .where = where, .size = size, .shown = -1};
    p->on = display && size && display->wanted(size);
}

void ml__progress_show(ml_progress_t *p) {
    uint64_t off = p->at ? *p->at : ml_reader_offset(p->r);
    int pct = (int)(off * 100 / p->size);
    if (pct == p->shown) return;
    display->show(p->what, p->where, pct);
    p->shown = pct;
}

void ml_progress_end(ml_progress_t *p) {
    if (p->on && p->shown >= 0) display->clear();
    p->shown = -1;
}
