/* folded.c - folded stacks for flamegraph.pl and speedscope.
 *
 * One line per site: frames outermost first, separated by ';', then a space
 * and the metric (bytes allocated by default). Frame names lose the two
 * characters the format reserves (';' and newlines) and their control bytes,
 * and are valid UTF-8 (name() below); inlined frames carry
 * flamegraph.pl's "_[i]" suffix, which it colours as inlined.
 */
#include "export_internal.h"
#include "ml_report.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

int ml_fold_metric_parse(const char *s, ml_fold_metric_t *out) {
    static const char *const names[] = {"alloc", "calls", "peak", "leaked", "temporary"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) {
            *out = (ml_fold_metric_t)i;
            return 0;
        }
    return -EINVAL;
}

/* A frame's name: ';' (the frame separator) becomes ':', a newline or CR
 * (the line's end) a space; any other control byte (C0, DEL, the C1 controls
 * U+0080-009F) '?', and a byte that starts no UTF-8 character U+FFFD, one per
 * byte as in the JSON. flamegraph.pl's SVG is XML, where a control byte or
 * invalid UTF-8 is a fatal error (the whole graph is lost), and `--folded -`
 * may be a terminal, where ESC sequences ran. */
static void name(FILE *o, const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    while (s && *s) {
        unsigned c = *s;
        if (c < 0x80) {
            if (c == ';') c = ':';
            else if (c == '\n' || c == '\r') c = ' ';
            else if (c < 0x20 || c == 0x7f) c = '?';
            fputc((int)c, o);
            s++;
            continue;
        }
        size_t n = ml__utf8_len(s);
        if (!n) {
            fputs("\xef\xbf\xbd", o);
            s++;
        } else if (n == 2 && c == 0xc2 && s[1] <= 0x9f) {
            fputc('?', o);
            s += 2;
        } else {
            fwrite(s, 1, n, o);
            s += n;
        }
    }
}

int ml_report_folded(FILE *o, const ml_analysis_t *a, ml_fold_metric_t m) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = m == ML_FOLD_ALLOC    ? s[i].bytes_allocated
                     : m == ML_FOLD_CALLS  ? s[i].alloc_calls
                     : m == ML_FOLD_PEAK   ? s[i].peak_bytes
                     : m == ML_FOLD_LEAKED ? s[i].leaked_bytes
                                           : s[i].temporary_allocs;
        if (!v || !s[i].nframes) continue;
        for (uint32_t k = s[i].nframes; k > 0; k--) {
            const ml_frame_t *f = &s[i].frames[k - 1];
            name(o, f->function);
            if (f->inlined) fputs("_[i]", o);
            fputc(k > 1 ? ';' : ' ', o);
        }
        fprintf(o, "%" PRIu64 "\n", v);
    }
    errno = 0;
    if (fflush(o) != 0 || ferror(o)) return -(errno ? errno : EIO);
    return 0;
}
