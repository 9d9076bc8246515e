/* text_out.c - the text reports' stdout, without the trace's control bytes.
 *
 * A trace may come from anyone (docs/security.md, "Hostile input files"),
 * and its strings (the program's path and arguments, function, file and
 * thread names) are printed as they are by the text reports of `report`
 * and `diff`. An escape sequence in one reached the terminal: a directory
 * named "esc\033[31mRED" turned the rest of the report red, and other
 * sequences set the window title or worse. `dump` escapes such bytes and
 * the viewer replaces them; the text reports now go through this stream,
 * which writes `?` for every control byte but newline and tab (C0, DEL,
 * and C1 controls as UTF-8 encodes them, C2 80-9F). The reports themselves
 * write no escape sequences, so nothing of theirs is lost (the rule is
 * trace/text_clean.c's, which the collector's stderr lines share). Binary and JSON
 * outputs on stdout do not go through it.
 */
#define _GNU_SOURCE
#include "ml_cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    FILE *to;
    bool c2; /* the last byte written was 0xC2: the next may make a C1 control */
} text_out_t;

static ssize_t text_write(void *cookie, const char *buf, size_t n) {
    text_out_t *t = cookie;
    char out[4096 + 1]; /* a C2 carried in from the call before writes one more */
    for (size_t at = 0; at < n;) {
        size_t part = n - at < sizeof out - 1 ? n - at : sizeof out - 1;
        size_t k = ml_text_clean((const unsigned char *)buf + at, part, out, &t->c2, true);
        if (k && fwrite(out, 1, k, t->to) != k) return -1;
        at += part;
    }
    return (ssize_t)n;
}

static int text_close(void *cookie) {
    text_out_t *t = cookie;
    int rc = 0;
    if (t->c2 && fputc(0xc2, t->to) == EOF) rc = EOF; /* a lone C2 at the end: as it was */
    if (fflush(t->to) == EOF) rc = EOF;
    return rc;
}

int ml_cli_text_report(void (*write)(FILE *, void *), void *ctx) {
    text_out_t t = {stdout, false};
    FILE *f = fopencookie(&t, "w", (cookie_io_functions_t){.write = text_write, .close = text_close});
    if (!f) { /* no memory for a stream: the report as it is */
        write(stdout, ctx);
        return fflush(stdout) == EOF ? -1 : 0;
    }
    write(f, ctx);
    return fclose(f) == EOF ? -1 : 0;
}

const char *ml_cli_safe(const char *s, char *buf, size_t len) {
    return ml_text_safe(s, buf, len);
}
