/* text_clean.c - a trace's strings made safe for a terminal.
 *
 * A trace may come from anyone (docs/security.md, "Hostile input files"),
 * and the program's names reach stderr and the text reports: an escape
 * sequence in one would reach the terminal. Every control byte but tab
 * (and newline, when kept) becomes `?`: C0, DEL, and the C1 controls as
 * UTF-8 encodes them (C2 80-9F). The text reports' stream (cli/text_out.c)
 * and the lines that quote such names on stderr (the CLI's, the
 * collector's) share this one rule.
 */
#include "ml_trace_io.h"

#include <string.h>

size_t ml_text_clean(const unsigned char *in, size_t n, char *out, bool *c2, bool keep_nl) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = in[i];
        if (*c2) {
            *c2 = false;
            if (c >= 0x80 && c <= 0x9f) {
                out[k++] = '?'; /* a C1 control: one ? for the pair */
                continue;
            }
            out[k++] = (char)0xc2;
        }
        if (c == 0xc2) *c2 = true;
        else out[k++] = (c < 0x20 && c != '\t' && !(keep_nl && c == '\n')) || c == 0x7f ? '?' : (char)c;
    }
    return k;
}

const char *ml_text_safe(const char *s, char *buf, size_t len) {
    if (len < 2) return "";
    bool c2 = false;
    size_t n = strnlen(s, len - 2); /* room for a lone C2 at the end, and the NUL */
    size_t k = ml_text_clean((const unsigned char *)s, n, buf, &c2, false);
    if (c2) buf[k++] = (char)0xc2; /* a lone C2 at the end: as it was */
    buf[k] = '\0';
    return buf;
}
