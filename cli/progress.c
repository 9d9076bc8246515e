/* progress.c - the progress display of the memlens command: a percentage on
 * stderr while a big trace is read record by record (trace/ counts, this
 * draws). Only when stderr is a terminal and the file is over 64 MiB; the
 * line reads "memlens: WHAT WHERE NN%" and is erased at the end. */
#include "ml_cli.h"
#include "ml_trace_io.h"

#include <stdio.h>
#include <unistd.h>

static bool wanted(uint64_t size) {
    return isatty(2) && size > (64u << 20);
}

static void show(const char *what, const char *where, int pct) {
    fprintf(stderr, "\rmemlens: %s%s%s %3d%%", what, where ? " " : "", where ? where : "", pct);
}

static void clear(void) {
    fprintf(stderr, "\r\033[K");
}

void ml_cli_progress_install(void) {
    static const ml_progress_display_t stderr_bar = {wanted, show, clear};
    ml_progress_set_display(&stderr_bar);
}
