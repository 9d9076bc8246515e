/* ml_report.h - presenting an analysis: the JSON document, folded stacks,
 * the text summary, the diff document, and crash-safe output files.
 *
 * High-level; may allocate. Presentation only: every number comes from a
 * built ml_analysis_t (analysis/ml_analysis.h); nothing here computes a
 * metric. The JSON document's keys are the contract of ../shared/DESIGN.md,
 * specified in docs/report-schema.json (schema_version 1) and
 * docs/diff-schema.json; the HTML page (ml_report_html.h) embeds the same
 * document.
 */
#ifndef ML_REPORT_H
#define ML_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "ml_analysis.h"
#include "ml_outfile.h"

#define ML_REPORT_SCHEMA_VERSION 1

struct ml_advice_s;     /* ml_advisor.h */
struct ml_suggestion_s; /* ml_advisor.h */

typedef struct {
    const char *trace_path;   /* shown in "trace.path" */
    uint64_t trace_size;      /* bytes of the trace file */
    uint32_t max_sites;       /* 0: every site in "sites" (peak/leak lists are always complete) */
    const ml_suppressions_t *suppressions; /* listed in "leaks.suppressions" */
    const struct ml_advice_s *advice; /* the strategy advisor's result (ml_advisor.h) for
                                       * "suggestions" and "policies"; NULL: GPU advice only */
    bool frame_table; /* the HTML page's form: every frame once, in "frame_table", and
                       * frame lists and flame nodes ("f") naming them by index, and
                       * the page's own views ("flame_inverted"); docs/html-report.md.
                       * report --json never sets it */
    const ml_time_buckets_t *time_buckets; /* with frame_table: each site row ends with its
                                            * time buckets (ml_analysis_time_buckets), for
                                            * the page's time-range selection */
} ml_report_opts_t;

/** Writes the JSON report of a built session (through the one JSON writer,
 * json_write.h: buffered, UTF-8 validated, one number format). Returns 0, or
 * a negative errno: the stream's write error (-ENOSPC, -EIO) or -ENOMEM. */
int ml_report_json(FILE *out, const ml_analysis_t *a, const ml_report_opts_t *o);

/** Writes a suggestion's evidence (ml_advisor.h) as the JSON object the
 * report carries under "evidence", alone (no newline after it): the viewer
 * shows this text. Returns 0 or a negative errno (-ENOMEM, a write error). */
int ml_report_json_evidence(FILE *out, const struct ml_suggestion_s *s);

/** Which number folded stacks carry. */
typedef enum {
    ML_FOLD_ALLOC = 0, /* bytes allocated (the default) */
    ML_FOLD_CALLS,     /* allocation calls */
    ML_FOLD_PEAK,      /* bytes live at the peak */
    ML_FOLD_LEAKED,    /* bytes live at the end */
    ML_FOLD_TEMPORARY, /* temporary allocations */
} ml_fold_metric_t;

/** Parses "alloc", "calls", "peak", "leaked" or "temporary". */
int ml_fold_metric_parse(const char *s, ml_fold_metric_t *out);

/** Writes folded stacks (Brendan Gregg's format, read by flamegraph.pl and
 * speedscope): one line per site, frames outermost first separated by ';',
 * a space and the metric. Sites whose metric is 0 are left out. Inlined
 * frames carry flamegraph.pl's "_[i]" suffix. Returns 0 or -EIO. */
int ml_report_folded(FILE *out, const ml_analysis_t *a, ml_fold_metric_t metric);

/** Writes the pprof export: a gzipped profile.proto (perftools.profiles),
 * one sample per site with the sample types alloc_objects, alloc_space,
 * inuse_objects, inuse_space (live at exit), peak_objects and peak_space
 * (live at the peak, the default), the trace's modules as mappings, and
 * comments saying what ran and, for sampled traces, that the values are
 * estimates (docs/exports.md). Flushes the stream. Returns 0, or a negative
 * errno: -ENOMEM, or the stream's write error (-ENOSPC, -EIO). (pprof.c) */
int ml_report_pprof(FILE *out, const ml_analysis_t *a);

/** Writes the speedscope export (speedscope's JSON file format): one
 * sampled profile per metric (bytes allocated, allocation calls, bytes live
 * at the peak, bytes leaked, bytes live at exit) over a shared frame table
 * (docs/exports.md). Flushes the stream. Returns as ml_report_pprof().
 * (speedscope.c) */
int ml_report_speedscope(FILE *out, const ml_analysis_t *a);

/** Writes the human summary: totals, the top sites by peak and by leaks with
 * function and file:line, fragmentation, warnings. `top` sites per list
 * (0: 10). Returns 0 or -EIO. */
int ml_report_text(FILE *out, const ml_analysis_t *a, const char *trace_path, unsigned top);

/* ------------------------------------------------------------------------- */
/* Diff                                                                      */
/* ------------------------------------------------------------------------- */

/* The totals the diff gate compares: peak heap bytes, leaked (definite +
 * indirect + possible, not suppressed) bytes, allocation calls. */
typedef enum { ML_DIFF_PEAK = 0, ML_DIFF_LEAKED, ML_DIFF_CALLS, ML_DIFF_BYTES, ML_DIFF_METRICS } ml_diff_metric_t;

/** The metric's JSON key ("peak_bytes", "leaked_bytes", ...). */
const char *ml_diff_metric_name(ml_diff_metric_t m);
/** The metric's name for people, the words of `memlens report` ("peak heap",
 * "definite leaks", "allocation calls", "bytes allocated"). */
const char *ml_diff_metric_label(ml_diff_metric_t m);
/** The same for GPU memory ("peak", "leaked": left allocated at exit, ...). */
const char *ml_diff_gpu_metric_label(ml_diff_metric_t m);
/** A value of the metric for people: a count, or bytes in B/KiB/MiB/GiB
 * (ml_fmt_bytes). Returns the length written, like snprintf. */
int ml_diff_fmt_value(ml_diff_metric_t m, uint64_t v, char *buf, size_t len);
/** The value of a total of one built session. */
uint64_t ml_diff_total(const ml_analysis_t *a, ml_diff_metric_t m);
/** True when `cur` exceeds `base` by more than `percent` % (any increase
 * from 0 counts as exceeding). */
bool ml_diff_exceeds(uint64_t base, uint64_t cur, double percent);

/* What the gate judges of GPU memory: each device's peak bytes (device set),
 * then the leaked device bytes of all devices together (device unset). */
typedef struct {
    bool has_device;
    int32_t device;
    ml_diff_metric_t metric;  /* ML_DIFF_PEAK or ML_DIFF_LEAKED */
    uint64_t base, cur;
} ml_diff_gpu_gate_t;

/** Writes to `out` (room for ml_diff_gpu_devices()' count + 1) the GPU totals
 * that grew by more than `percent` % (ml_diff_exceeds); returns how many.
 * Nothing when neither trace has GPU records. */
size_t ml_diff_gpu_exceeded(const ml_diff_t *d, double percent, ml_diff_gpu_gate_t *out);

typedef struct {
    const char *base_path, *new_path;
    bool gate;                /* --fail-on-increase given */
    double gate_percent;
    unsigned top;             /* sites in the document (0: all), heap and GPU each */
    /* Why BASE ([0]) or NEW ([1]) failed the gate as incomplete (a trace
     * with no records, cut short, without its end, with lost events, or
     * whose heap calls went elsewhere: cli/diff.c), or NULL. The JSON lists
     * them in gate.incomplete. */
    const char *incomplete[2];
} ml_diff_report_opts_t;

/** The diff document (docs/diff-schema.json) and the diff table. The JSON
 * returns as ml_report_json does; the text returns 0 or -EIO. */
int ml_report_diff_json(FILE *out, const ml_analysis_t *base, const ml_analysis_t *cur,
                        const ml_diff_t *d, const ml_diff_report_opts_t *o);
int ml_report_diff_text(FILE *out, const ml_analysis_t *base, const ml_analysis_t *cur,
                        const ml_diff_t *d, const ml_diff_report_opts_t *o);
/** The warning a diff of two different programs carries (ml_diff_program
 * says ML_DIFF_PROGRAM_DIFFERENT), in buf (len bytes at most, NUL
 * included): `memlens diff` prints it on stderr, and the JSON lists it in
 * "warnings". Returns false, with buf empty, when the programs are the same
 * or unknown. */
bool ml_report_diff_program_warning(const ml_analysis_t *base, const ml_analysis_t *cur, char *buf,
                                    size_t len);
/** The warning a diff carries when the trace `a` (its side: "base" or
 * "new") judges no leak, its process having not exited
 * (ml_totals_unjudged): its "leaked at exit" is 0 because nothing was
 * judged, not because nothing leaked. In buf as above; false when `a`
 * judges its leaks. */
bool ml_report_diff_unjudged_warning(const ml_analysis_t *a, const char *which, char *buf, size_t len);

/* ------------------------------------------------------------------------- */
/* Output files: never half-written                                          */
/* ------------------------------------------------------------------------- */

typedef struct {
    FILE *f;
    char *path, *tmp; /* tmp: NULL when writing in place (stdout, a device, a pipe) */
    ml_outfile_t file; /* the file under f (ml_outfile.h); fd -1 for stdout */
} ml_out_t;

/** Opens an output: "-" is stdout; a regular file (or a new one) is written
 * to a temporary file beside it and renamed over it by ml_out_commit();
 * anything else (/dev/null, a FIFO) is written in place. Returns 0 or a
 * negative errno with a message in err. */
int ml_out_open(ml_out_t *o, const char *path, char *err, size_t errlen);
/** The same with ML_OUTFILE_* flags: the file is created 0600 (0640 with
 * ML_OUTFILE_GROUP), a link at path is refused, and an existing file is
 * replaced only when memlens made it or with ML_OUTFILE_FORCE (ml_outfile.h).
 * ml_out_open passes 0. */
int ml_out_open_flags(ml_out_t *o, const char *path, unsigned flags, char *err, size_t errlen);
/** Flushes, syncs and renames into place. On failure removes the temporary
 * file, leaves the target untouched and returns a negative errno. */
int ml_out_commit(ml_out_t *o, char *err, size_t errlen);
/** Gives up: removes the temporary file. */
void ml_out_abort(ml_out_t *o);

#endif
