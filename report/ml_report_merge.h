/* ml_report_merge.h - the reports of many processes merged into one
 * (analysis/ml_merge.h): the JSON document, the text summary, and the
 * side-by-side view of each site's numbers per process.
 *
 * High-level; may allocate. Presentation only, as ml_report.h: every number
 * comes from the finished merge. The JSON document is the single-trace
 * document (docs/report-schema.json, schema_version 1) with additive keys:
 * "merged", "processes" and each site's "by_process"; docs/analysis.md
 * ("Many processes") says what each merged number means.
 */
#ifndef ML_REPORT_MERGE_H
#define ML_REPORT_MERGE_H

#include <stdio.h>
#include "ml_merge.h"
#include "ml_report.h"

typedef struct {
    const char *label;        /* what was merged, shown in "merged.inputs" and the text title:
                               * the directory, or "N traces" */
    uint32_t max_sites;       /* 0: every merged site in "sites" */
    bool frame_table;         /* the HTML page's form: sites, peak and leak rows name their
                               * frames by "stack" in "stack_table" and "frame_table", each
                               * frame and stack written once (docs/html-report.md) */
    bool by_process;          /* with frame_table: each site's "by_process" too (--json-compact;
                               * the page, which does not read it, leaves it out) */
    /* --suppressions: the patterns, and what each took summed over the
     * traces (ml_suppressions_pattern's counters are one build's), one
     * entry per pattern; "leaks.suppressions" as in one trace's report.
     * NULL: none given. */
    const ml_suppressions_t *suppressions;
    const uint64_t *supp_blocks, *supp_bytes;
} ml_report_merge_opts_t;

/** Writes the merged JSON report. Returns as ml_report_json(). */
int ml_report_json_merged(FILE *out, const ml_merge_t *m, const ml_report_merge_opts_t *o);

/** Writes the merged text summary: the processes table, the sums, the top
 * merged sites by peak and by leaks, each with the processes that hold
 * them. `top` sites per list (0: 10). Returns 0 or -EIO. */
int ml_report_text_merged(FILE *out, const ml_merge_t *m, const ml_report_merge_opts_t *o, unsigned top);

/** Writes the side-by-side view: the `top` merged sites with the largest
 * `metric` (summed; 0: 20), one row per site and one column per process
 * (at most ML_BY_PROCESS_COLUMNS; the JSON has them all). Returns 0 or -EIO. */
int ml_report_by_process(FILE *out, const ml_merge_t *m, ml_fold_metric_t metric, unsigned top);

#define ML_BY_PROCESS_COLUMNS 8

#endif
