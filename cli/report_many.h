/* report_many.h - `memlens report` over many traces (report_many.c), called
 * by report_cmd.c when it is given more than one trace, a directory, or
 * --by-process. Internal to cli/. */
#ifndef ML_REPORT_MANY_H
#define ML_REPORT_MANY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ml_analysis.h"
#include "ml_report.h"

typedef struct {
    const char *const *inputs; /* trace files and directories, as given */
    size_t ninputs;
    const char *json, *html;
    bool by_process;           /* --by-process METRIC: the side-by-side view on stdout */
    ml_fold_metric_t by_metric;
    bool leak_gate, peak_gate, gpu_leak_gate, gpu_peak_gate;
    uint64_t fail_on_leak, max_peak, fail_on_gpu_leak, max_gpu_peak;
    bool allow_incomplete, quiet, no_symbols, replay;
    const ml_suppressions_t *supp;
    unsigned out_flags;        /* ML_OUTFILE_* */
    uint32_t max_sites;
    bool json_compact;         /* --json in the page's form, each site's by_process kept */
} ml_report_many_opts_t;

/** Runs the merged report; returns the exit code (ML_EXIT_*). */
int ml_cli_report_many(const ml_report_many_opts_t *o);

/** Why a trace with these totals is incomplete (no records, cut short, no
 * end record, events lost), or NULL when it is whole. (report_cmd.c) */
const char *ml_cli_incomplete_reason(const ml_totals_t *t, char *buf, size_t len);

/** Why a trace whose warning this is holds no heap call (its
 * ML_UNTRACED_ALLOCATOR record: the program's own allocator, or one
 * preloaded first), or NULL for any other warning. A gate cannot pass on
 * it. (report_cmd.c) */
const char *ml_cli_heap_untraced_reason(const char *warning);

/** When the process of the trace at `path` (analysed into a) replaced itself
 * by exec and the program it became was traced: follows the traces of the
 * images it became (the collector names them STEM.PID[.N].mlt, and each
 * names the one before as its parent) and gives the first and the last,
 * with their programs, in buffers of `len` bytes. Returns the number of
 * execs followed; 0 when none. */
int ml_cli_exec_chain(const char *path, const ml_analysis_t *a, char *first, char *first_exe, char *last,
                      char *last_exe, size_t len);

/** Loads and builds one trace (report_cmd.c; shared with `memlens diff`). */
ml_analysis_t *ml_cli_analyse(const char *path, const ml_suppressions_t *supp, bool no_symbols,
                              bool quiet, bool replay);
/** The same; no_calltree: for a merge, which builds its own call tree. */
ml_analysis_t *ml_cli_analyse_ex(const char *path, const ml_suppressions_t *supp, bool no_symbols,
                                 bool quiet, bool replay, bool no_calltree);

/** The --alloc-fn patterns of `report` and `diff` (argv's strings), for
 * every ml_cli_analyse() of the command. */
extern const char **ml_cli_alloc_fns;
extern size_t ml_cli_nalloc_fns;

/** Warns of each --alloc-fn pattern that named no frame of a's stacks. */
void ml_cli_warn_alloc_fns(const ml_analysis_t *a, const char *path);

/** Adds one --alloc-fn pattern (argv's string); -1 when it is empty or
 * memory ran out, having said why. */
int ml_cli_add_alloc_fn(const char *cmd, const char *pattern);

#endif
