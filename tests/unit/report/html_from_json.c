/* html_from_json.c - writes the HTML report for a JSON report file, so that
 * the browser test (tests/e2e/test_html_browser.sh) can render a fixture
 * document without a trace: `ml_html_from_json IN.json OUT.html`. */
#include "ml_report_html.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN.json OUT.html\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fputs("out of memory\n", stderr);
            return 1;
        }
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    if (ferror(f)) {
        perror(argv[1]);
        return 1;
    }
    fclose(f);
    char err[512];
    int rc = ml_report_html_write(buf, len, argv[2], err, sizeof err);
    free(buf);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    return 0;
}
