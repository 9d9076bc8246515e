/* ml_report_html.h - the self-contained HTML report.
 *
 * High-level; may allocate. The page is generated from the JSON report
 * document (docs/report-schema.json, ../shared/DESIGN.md): the document is
 * embedded verbatim as data and the page's own script (report/assets/, built
 * into the library) draws the summary, the timeline, the flame graph, the
 * site tables, the heap maps, the histograms and the suggestions from it.
 * Nothing is computed here; see docs/html-report.md for the page itself.
 *
 * Invariants of the file written:
 * - one file, no network: no external scripts, styles, fonts or images; a
 *   Content-Security-Policy forbids any fetch and any script but our own;
 * - program-derived strings (symbols, paths, argv) never reach HTML markup:
 *   inside the embedded JSON every '<', '>' and '&' is written as a \u escape,
 *   so no string can close the <script> element, and the page's script only
 *   ever puts them into the DOM as text;
 * - the file is valid UTF-8 (invalid byte sequences in strings become U+FFFD);
 * - out_path is either left untouched or replaced by the complete page: the
 *   page is written to a temporary file in the same directory, synced and
 *   renamed over out_path.
 */
#ifndef ML_REPORT_HTML_H
#define ML_REPORT_HTML_H

#include <stddef.h>

/** Writes the HTML report for the JSON document json_text[0..len) to
 * out_path. The document must be valid JSON (RFC 8259; strings may hold
 * invalid UTF-8, which is replaced); any keys may be missing, the page says
 * "no data" for them. Thread-safe (no global state).
 *
 * Returns 0, or a negative errno with a one-line message in err (if err is
 * not NULL): -EINVAL for a NULL argument or a document that is not JSON,
 * -ENOMEM, or the error of creating, writing, syncing or renaming the file.
 * On failure out_path is unchanged and no temporary file is left behind.
 * Writing follows ml_outfile.h (see ml_report_html_write_flags). */
int ml_report_html_write(const char *json_text, size_t len, const char *out_path, char *err,
                         size_t errlen);

/** The same, with ML_OUTFILE_* flags (ml_outfile.h: --force, --group-readable).
 * The file is created privately (0600) and never written through a link;
 * an existing file is replaced only when memlens made it, or with
 * ML_OUTFILE_FORCE. ml_report_html_write passes 0. */
int ml_report_html_write_flags(const char *json_text, size_t len, const char *out_path,
                               unsigned flags, char *err, size_t errlen);

#endif
