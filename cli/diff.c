/* diff.c - `memlens diff BASE NEW`: what changed between two runs.
 *
 * Both traces are analysed in full; their sites are matched by their
 * frames' function names (analysis/diff.c). The gate --fail-on-increase
 * PERCENT compares three totals: the peak heap, leaks (definite + indirect
 * + possible, not suppressed) and allocation calls; exit 3 when any grew by more than
 * PERCENT % (growth from zero always counts). When either trace has GPU
 * records it also compares each device's GPU peak and the GPU leaked bytes
 * of all devices together, with the device named on stderr. As report's
 * gates, it judges only what the traces hold: when either is incomplete (no
 * records, cut short, no end record, lost events, heap calls that went to
 * another allocator) it fails, naming the trace, unless --allow-incomplete.
 * Two traces of
 * different programs (their executables' file names differ) are diffed
 * anyway, with a warning on stderr and in the JSON; the exit status is
 * unchanged.
 */
#define _GNU_SOURCE
#include "ml_cli.h"
#include "ml_analysis.h"
#include "ml_report.h"
#include "report_many.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void usage_diff(FILE *f) {
    fputs("usage: memlens diff BASE.mlt NEW.mlt [--json OUT] [--fail-on-increase PERCENT]\n"
          "                    [--suppressions FILE] [--alloc-fn NAME]... [--top N] [--no-symbols] [--force]\n"
          "                    [--allow-incomplete] [--group-readable] [-q]\n"
          "\n"
          "  Per-site changes of the peak heap, the bytes live at exit and the allocation calls\n"
          "  between two traces, heap and GPU (per device), in KiB/MiB under column headers.\n"
          "  --json OUT               the diff as JSON (docs/diff-schema.json); '-' is stdout\n"
          "  --fail-on-increase PCT   exit 3 when the peak heap, the bytes leaked at exit (not\n"
          "                           reachable) or the allocation calls grew by more than\n"
          "                           PCT %, or a GPU device's peak or the GPU leaked bytes did;\n"
          "                           and when either trace is incomplete (cut short, no end,\n"
          "                           events lost): a gate cannot pass on what it does not hold\n"
          "  --allow-incomplete       let the gate judge an incomplete trace (with a warning)\n"
          "  --suppressions FILE      known leaks (LeakSanitizer `leak:` syntax), for both traces\n"
          "  --alloc-fn NAME          a function the program allocates through: sites are named\n"
          "                           by its callers (as in report), for both traces\n"
          "  --top N                  sites listed (default: 20 in text, all in JSON)\n"
          "  --no-symbols             skip symbolization\n"
          "  --force                  replace an output file memlens did not write (never a link)\n"
          "  --group-readable         create the output 0640 instead of 0600\n"
          "  -q, --quiet              no warnings on stderr\n",
          f);
}

/* The diff table, through the stream that keeps a trace's control bytes
 * off the terminal (text_out.c). */
typedef struct {
    const ml_analysis_t *base, *cur;
    const ml_diff_t *d;
    const ml_diff_report_opts_t *ro;
} diff_text_t;

static void write_diff_text(FILE *f, void *p) {
    const diff_text_t *t = p;
    ml_report_diff_text(f, t->base, t->cur, t->d, t->ro);
}

/* Why the gate cannot judge a trace (report_cmd.c's rule): it holds no
 * records, was cut short, has no end record, lost events, or its heap
 * calls went to an allocator ahead of libmemlens.so. NULL when whole.
 * Until 2026-12-08 the diff gate judged such a trace as it was: a NEW
 * trace cut before its first record grew nothing, and the gate passed. */
static const char *gate_incomplete(const ml_analysis_t *a, char *buf, size_t len) {
    const char *why = ml_cli_incomplete_reason(ml_analysis_totals(a), buf, len);
    const char *const *w;
    size_t nw = ml_analysis_warnings(a, &w);
    for (size_t i = 0; i < nw && !why; i++) why = ml_cli_heap_untraced_reason(w[i]);
    return why;
}

int ml_cmd_diff(int argc, char **argv) {
    const char *paths[2] = {NULL, NULL}, *json = NULL, *supp_path = NULL;
    bool gate = false, no_symbols = false, quiet = false, allow_incomplete = false;
    double pct = 0;
    unsigned top = 0, out_flags = 0;
    int np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json") || !strcmp(a, "--fail-on-increase") || !strcmp(a, "--suppressions") ||
            !strcmp(a, "--top") || !strcmp(a, "--alloc-fn")) {
            if (!val) {
                ml_cli_error("diff: %s needs a value", a);
                usage_diff(stderr);
                return ML_EXIT_USAGE;
            }
            i++;
            if (!strcmp(a, "--json")) {
                json = ml_cli_out_name(val);
            } else if (!strcmp(a, "--suppressions")) {
                supp_path = val;
            } else if (!strcmp(a, "--alloc-fn")) {
                if (ml_cli_add_alloc_fn("diff", val) < 0) return ML_EXIT_USAGE;
            } else if (!strcmp(a, "--top")) {
                uint64_t v;
                if (ml_parse_bytes(val, &v) < 0 || v > 1000000) {
                    ml_cli_error("diff: --top takes a number");
                    return ML_EXIT_USAGE;
                }
                top = (unsigned)v;
            } else {
                /* Decimal digits with at most one point: strtod alone took
                 * "inf" (a gate that never fails), "1e400" and "0x32". */
                size_t digits = strspn(val, "0123456789."), points = 0;
                for (const char *q = val; *q; q++) points += *q == '.';
                char *end;
                pct = strtod(val, &end);
                if (end == val || *end || val[digits] || points > 1 || !strpbrk(val, "0123456789") || pct < 0 ||
                    pct != pct) {
                    ml_cli_error("diff: --fail-on-increase takes a percentage, like 5 or 0.5");
                    return ML_EXIT_USAGE;
                }
                gate = true;
            }
        } else if (!strcmp(a, "--no-symbols")) {
            no_symbols = true;
        } else if (!strcmp(a, "--allow-incomplete")) {
            allow_incomplete = true;
        } else if (!strcmp(a, "--force")) {
            out_flags |= ML_OUTFILE_FORCE;
        } else if (!strcmp(a, "--group-readable")) {
            out_flags |= ML_OUTFILE_GROUP;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_diff(stdout);
            return ML_EXIT_OK;
        } else if (a[0] == '-' && a[1]) {
            ml_cli_error("diff: unknown option '%s'", a);
            usage_diff(stderr);
            return ML_EXIT_USAGE;
        } else if (np < 2) {
            paths[np++] = a;
        } else {
            ml_cli_error("diff: two traces, BASE and NEW");
            usage_diff(stderr);
            return ML_EXIT_USAGE;
        }
    }
    if (np != 2) {
        ml_cli_error("diff: two traces, BASE and NEW");
        usage_diff(stderr);
        return ML_EXIT_USAGE;
    }
    if (ml_cli_output_clobbers_input("diff", "--json", json, paths, 2)) return ML_EXIT_USAGE;
    char err[1024];
    ml_suppressions_t *supp = NULL;
    if (supp_path && ml_suppressions_load(supp_path, &supp, err, sizeof err) < 0) {
        ml_cli_error("suppressions: %s", err);
        return ML_EXIT_ERROR;
    }
    ml_analysis_t *base = ml_cli_analyse(paths[0], supp, no_symbols, quiet, false);
    ml_analysis_t *cur = base ? ml_cli_analyse(paths[1], supp, no_symbols, quiet, false) : NULL;
    if (base && cur && !quiet) {
        ml_cli_warn_alloc_fns(base, paths[0]);
        ml_cli_warn_alloc_fns(cur, paths[1]);
    }
    int code = ML_EXIT_OK;
    ml_diff_t *d = NULL;
    if (!base || !cur) {
        code = ML_EXIT_ERROR;
        goto out;
    }
    /* Two different programs: a diff still runs (sites are matched by
     * function name), but the user is told; the JSON says it too. */
    char warning[2 * PATH_MAX + 256], safe[sizeof warning];
    if (!quiet && ml_report_diff_program_warning(base, cur, warning, sizeof warning))
        fprintf(stderr, "memlens: warning: %s\n", ml_cli_safe(warning, safe, sizeof safe));
    /* A side whose process did not exit (an exec, a stop while it ran, a
     * trace cut short) counts no leak: its "leaked at exit" is not a fix. */
    if (!quiet && ml_report_diff_unjudged_warning(base, "BASE", warning, sizeof warning))
        fprintf(stderr, "memlens: warning: %s\n", ml_cli_safe(warning, safe, sizeof safe));
    if (!quiet && ml_report_diff_unjudged_warning(cur, "NEW", warning, sizeof warning))
        fprintf(stderr, "memlens: warning: %s\n", ml_cli_safe(warning, safe, sizeof safe));
    /* A launcher's trace (a pyenv shim, `sh -c 'exec prog'`): the program
     * it became is in another trace, which is what a diff should compare. */
    for (int k = 0; k < 2 && !quiet; k++) {
        char first[PATH_MAX], first_exe[PATH_MAX], last[PATH_MAX], last_exe[PATH_MAX];
        char safe_path[PATH_MAX], safe_last[PATH_MAX];
        if (ml_cli_exec_chain(paths[k], k ? cur : base, first, first_exe, last, last_exe, PATH_MAX))
            fprintf(stderr,
                    "memlens: warning: %s: its process replaced itself by exec; the program it became, %s, "
                    "is traced in %s: diff that trace\n",
                    ml_cli_safe(paths[k], safe_path, sizeof safe_path),
                    ml_cli_safe(last_exe, safe, sizeof safe),
                    ml_cli_safe(last, safe_last, sizeof safe_last));
    }
    if (ml_diff_new(base, cur, &d) < 0) {
        ml_cli_error("out of memory");
        code = ML_EXIT_ERROR;
        goto out;
    }
    ml_diff_report_opts_t ro = {paths[0], paths[1], gate, pct, top, {NULL, NULL}};
    char why_buf[2][160];
    for (int k = 0; k < 2 && gate; k++) {
        const char *why = gate_incomplete(k ? cur : base, why_buf[k], sizeof why_buf[k]);
        if (!why) continue;
        if (!allow_incomplete) {
            ro.incomplete[k] = why;
        } else if (!quiet) {
            char safe_path[PATH_MAX];
            fprintf(stderr, "memlens: warning: %s (%s) is incomplete (%s); the gate judges only what it holds "
                            "(--allow-incomplete)\n",
                    ml_cli_safe(paths[k], safe_path, sizeof safe_path), k ? "NEW" : "BASE", why);
        }
    }
    if (json) {
        ml_out_t out;
        int rc = ml_out_open_flags(&out, json, out_flags, err, sizeof err);
        if (rc == 0) {
            int wrc = ml_report_diff_json(out.f, base, cur, d, &ro);
            if (wrc < 0) {
                ml_out_abort(&out);
                snprintf(err, sizeof err, "cannot write %s: %s", json, strerror(-wrc));
                rc = -1;
            } else {
                rc = ml_out_commit(&out, err, sizeof err);
            }
        }
        if (rc < 0) {
            ml_cli_error("%s", err);
            code = ML_EXIT_ERROR;
            goto out;
        }
    }
    if (!json || strcmp(json, "-")) {
        ro.top = top;
        diff_text_t dt = {base, cur, d, &ro};
        ml_cli_text_report(write_diff_text, &dt);
    }
    if (gate) {
        for (int m = 0; m <= ML_DIFF_CALLS; m++) {
            uint64_t b = ml_diff_total(base, (ml_diff_metric_t)m), n = ml_diff_total(cur, (ml_diff_metric_t)m);
            if (!ml_diff_exceeds(b, n, pct)) continue;
            char vb[32], vn[32];
            ml_diff_fmt_value((ml_diff_metric_t)m, b, vb, sizeof vb);
            ml_diff_fmt_value((ml_diff_metric_t)m, n, vn, sizeof vn);
            if (b)
                fprintf(stderr, "memlens: gate exceeded: %s grew %.2f%% (%s -> %s) > --fail-on-increase %g%%\n",
                        ml_diff_metric_label((ml_diff_metric_t)m), ((double)n - (double)b) * 100.0 / (double)b,
                        vb, vn, pct);
            else
                fprintf(stderr, "memlens: gate exceeded: %s grew from 0 to %s\n",
                        ml_diff_metric_label((ml_diff_metric_t)m), vn);
            code = ML_EXIT_GATE;
        }
        /* GPU: each device's peak, then the leaked device bytes of all
         * devices (ml_diff_gpu_exceeded); nothing without GPU records. */
        size_t nd;
        ml_diff_gpu_devices(d, &nd);
        ml_diff_gpu_gate_t *gx = nd ? calloc(nd + 1, sizeof *gx) : NULL;
        if (nd && !gx) {
            ml_cli_error("out of memory");
            code = ML_EXIT_ERROR;
            goto out;
        }
        size_t ngx = nd ? ml_diff_gpu_exceeded(d, pct, gx) : 0;
        for (size_t i = 0; i < ngx; i++) {
            char what[64], vb[32], vn[32];
            if (gx[i].has_device)
                snprintf(what, sizeof what, "GPU device %d %s", (int)gx[i].device, ml_diff_gpu_metric_label(gx[i].metric));
            else
                snprintf(what, sizeof what, "GPU %s (all devices)", ml_diff_gpu_metric_label(gx[i].metric));
            ml_diff_fmt_value(gx[i].metric, gx[i].base, vb, sizeof vb);
            ml_diff_fmt_value(gx[i].metric, gx[i].cur, vn, sizeof vn);
            if (gx[i].base)
                fprintf(stderr, "memlens: gate exceeded: %s grew %.2f%% (%s -> %s) > --fail-on-increase %g%%\n",
                        what, ((double)gx[i].cur - (double)gx[i].base) * 100.0 / (double)gx[i].base, vb, vn, pct);
            else
                fprintf(stderr, "memlens: gate exceeded: %s grew from 0 to %s\n", what, vn);
            code = ML_EXIT_GATE;
        }
        free(gx);
        /* Last, after the totals' lines: which trace could not be judged. */
        for (int k = 0; k < 2; k++) {
            if (!ro.incomplete[k]) continue;
            char safe_path[PATH_MAX];
            fprintf(stderr,
                    "memlens: gate failed: %s (%s) is incomplete: %s. A gate cannot pass on what the trace "
                    "does not hold; record again, or pass --allow-incomplete to judge what it holds\n",
                    ml_cli_safe(paths[k], safe_path, sizeof safe_path), k ? "NEW" : "BASE", ro.incomplete[k]);
            code = ML_EXIT_GATE;
        }
    }
out:
    ml_diff_free(d);
    ml_analysis_free(base);
    ml_analysis_free(cur);
    ml_suppressions_free(supp);
    return code;
}
