/* report_cmd.c - `memlens report FILE`: analyse a trace and write the JSON,
 * HTML and folded-stack reports, or print a summary; CI gates.
 *
 * Exit codes: 0 ok, 1 memlens' own error (bad trace, unwritable output),
 * 2 usage, 3 a gate was exceeded (the reports are still written first, so a
 * failing CI job keeps its evidence).
 */
#define _GNU_SOURCE
#include "ml_cli.h"
#include "ml_advisor.h"
#include "ml_analysis.h"
#include "ml_gpu.h"
#include "ml_report.h"
#include "ml_report_html.h"
#include "ml_trace_format.h"
#include "report_many.h"
#include "ml_trace_io.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *trace, *json, *html, *folded, *supp;
    const char *pprof, *speedscope;
    ml_fold_metric_t metric;
    bool leak_gate, peak_gate, gpu_leak_gate, gpu_peak_gate;
    bool no_symbols, quiet, no_advisor, replay, all_policies, summary, no_save_advice;
    unsigned out_flags; /* ML_OUTFILE_*: --force, --group-readable */
    bool allow_incomplete; /* --allow-incomplete: gates judge a partial trace too */
    uint64_t fail_on_leak, max_peak, fail_on_gpu_leak, max_gpu_peak;
    uint32_t max_sites;
    uint64_t advisor_mem, advisor_ops; /* --advisor-mem, --advisor-ops (0: the defaults) */
    const char **traces;     /* every trace or directory given (traces[0] == trace) */
    size_t ntraces;
    bool by_process;         /* --by-process METRIC (merged reports) */
    bool json_compact;       /* --json-compact: --json in the page's form */
    ml_fold_metric_t by_metric;
} report_opts_t;

static void usage_report(FILE *f) {
    fputs("usage: memlens report FILE [--json OUT] [--html OUT] [--folded OUT]\n"
          "                      [--json-compact] [--pprof OUT] [--speedscope OUT]\n"
          "                      [--folded-metric alloc|calls|peak|leaked|temporary]\n"
          "                      [--fail-on-leak BYTES] [--max-peak BYTES]\n"
          "                      [--fail-on-gpu-leak BYTES] [--max-gpu-peak BYTES] [--suppressions FILE]\n"
          "                      [--max-sites N] [--alloc-fn NAME]... [--no-symbols] [--no-advisor] [--all-policies]\n"
          "                      [--advisor-mem BYTES] [--advisor-ops N]\n"
          "                      [--replay] [--no-save-advice] [--allow-incomplete] [--summary] [--force]\n"
          "                      [--group-readable] [-q]\n"
          "       memlens report FILE FILE... | DIR [--json OUT] [--html OUT] [--by-process METRIC]\n"
          "                      [gates and other options as above]\n"
          "\n"
          "  Without an output option, prints a summary: the sites holding the peak and the leaks.\n"
          "  With one, says on stderr what it wrote (\"memlens: wrote r.html (1.2 MiB)\").\n"
          "  Several traces, or a directory (its *.mlt files: a --follow-fork tree), give one report\n"
          "  of all their processes: sites merged by their stacks, a processes table, and each\n"
          "  site's share per process; the gates judge the merged totals (docs/analysis.md).\n"
          "  --by-process METRIC   merged reports: each site's alloc, calls, peak, leaked or temporary\n"
          "                        per process, side by side\n"
          "  --json OUT            the JSON report (docs/report-schema.json); '-' is stdout\n"
          "  --json-compact        write --json in the HTML page's compact form: every frame and\n"
          "                        every stack once (frame_table, stack_table), sites and flame\n"
          "                        nodes as rows (docs/html-report.md); the full form lists each\n"
          "                        site's whole stack, gigabytes for a C++ or Python program;\n"
          "                        of several traces: frames and stacks once, by_process kept\n"
          "  --html OUT            a self-contained HTML page ('-' is stdout)\n"
          "  --folded OUT          folded stacks for flamegraph.pl or speedscope ('-' is stdout)\n"
          "  --folded-metric M     what the folded stacks count (default alloc: bytes allocated)\n"
          "  --pprof OUT           a gzipped pprof profile (go tool pprof, Pyroscope, Parca, Grafana):\n"
          "                        alloc, inuse (live at exit) and peak space and objects ('-' is stdout)\n"
          "  --speedscope OUT      a speedscope file: bytes allocated, calls, peak, leaked ('-' is stdout)\n"
          "  --fail-on-leak BYTES  exit 3 when leaks (definite + indirect + possible, not\n"
          "                        suppressed) exceed BYTES\n"
          "  --max-peak BYTES      exit 3 when the peak heap exceeds BYTES\n"
          "  --fail-on-gpu-leak BYTES\n"
          "                        exit 3 when the GPU memory left allocated at exit (every device;\n"
          "                        freed only by the CUDA context's destruction) exceeds BYTES\n"
          "  --max-gpu-peak BYTES  exit 3 when a GPU device's peak exceeds BYTES\n"
          "  --allow-incomplete    let the gates judge a trace that holds no records or ended\n"
          "                        early (cut short, no end record, events lost); without it\n"
          "                        such a trace fails every gate given (exit 3)\n"
          "  --suppressions FILE   known leaks, one `leak:PATTERN` per line (LeakSanitizer syntax)\n"
          "  --alloc-fn NAME       a function the program allocates through (xmalloc, a pool's\n"
          "                        get): its frames at the top of a stack count as the\n"
          "                        allocator's, so sites are named by its callers; `*` matches\n"
          "                        any run of characters; repeat it for each level of wrappers\n"
          "  --max-sites N         at most N entries in the JSON's sites[] (0: all; peak and leak lists\n"
          "                        stay whole)\n"
          "  --no-symbols          skip symbolization (functions show as [module+offset])\n"
          "  --no-advisor          skip the strategy advisor's replay (no suggestions, faster)\n"
          "  --all-policies        the advisor also replays the textbook fits (first, next, best,\n"
          "                        worst, bitmap) for its table: about five times slower\n"
          "  --advisor-mem BYTES   the memory the advisor's replays may take (default 768M); work\n"
          "                        that would need more is skipped and the reports say what\n"
          "  --advisor-ops N       the operations the replays may simulate, summed over the\n"
          "                        allocators replayed (default 40M, about two CPU seconds); a\n"
          "                        trace too long for a replay gets the suggestions its call\n"
          "                        statistics support, without a measured saving\n"
          "  --replay              analyse every record again, ignoring the analysis the\n"
          "                        collector and the advice an earlier report saved in the trace\n"
          "  --no-save-advice      leave the trace unchanged: do not save the advisor's result\n"
          "                        in it for later reports and the viewer (docs/trace-format.md)\n"
          "  --force               replace output files memlens did not write (never a link)\n"
          "  --group-readable      create outputs 0640 instead of 0600 (docs/security.md)\n"
          "  --summary             print the summary on stdout also when writing files\n"
          "  -q, --quiet           nothing on stderr but errors and exceeded gates: no warnings,\n"
          "                        no progress, no \"wrote\" lines\n"
          "BYTES takes k, M, G suffixes (powers of 1024).\n",
          f);
}

/* The GPU gates: each device's peak against --max-gpu-peak, and the device
 * memory every device still held at exit (docs/gpu.md: live at exit plus
 * what only the context's destruction freed) against --fail-on-gpu-leak. A
 * trace without GPU records passes both. Returns whether one was exceeded. */
static bool gpu_gates(const ml_analysis_t *a, const report_opts_t *o) {
    const ml_gpu_t *g = ml_analysis_gpu(a);
    char b1[32], b2[32];
    bool over = false;
    uint64_t leaked = 0;
    for (size_t i = 0; i < ml_gpu_device_count(g); i++) {
        const ml_gpu_device_t *d = ml_gpu_device(g, i);
        leaked += d->leaked_bytes;
        if (o->gpu_peak_gate && d->peak_bytes > o->max_gpu_peak) {
            fprintf(stderr,
                    "memlens: gate exceeded: GPU device %d peak %" PRIu64 " bytes (%s) > --max-gpu-peak %" PRIu64
                    " bytes (%s)\n",
                    (int)d->device, d->peak_bytes, ml_fmt_bytes(d->peak_bytes, b1, sizeof b1),
                    o->max_gpu_peak, ml_fmt_bytes(o->max_gpu_peak, b2, sizeof b2));
            over = true;
        }
    }
    if (o->gpu_leak_gate && leaked > o->fail_on_gpu_leak) {
        fprintf(stderr,
                "memlens: gate exceeded: GPU memory leaked %" PRIu64 " bytes (%s) > --fail-on-gpu-leak %" PRIu64
                " bytes (%s)\n",
                leaked, ml_fmt_bytes(leaked, b1, sizeof b1), o->fail_on_gpu_leak,
                ml_fmt_bytes(o->fail_on_gpu_leak, b2, sizeof b2));
        over = true;
    }
    return over;
}

/* Gates judge only what they can see (issue 13): a trace with no records,
 * or one that ended early, cannot show that a program stayed under a
 * threshold. Returns why the trace is incomplete, or NULL when it is whole. */
const char *ml_cli_incomplete_reason(const ml_totals_t *t, char *buf, size_t len) {
    if (t->records == 0) return "it holds no records (the program never started, or the trace was cut before its first record)";
    if (t->truncated) return "it was cut short (a partial chunk at its end)";
    if (!t->complete) return "it has no end record (the recording stopped early)";
    if (t->end.status_kind == ML_END_RUNNING)
        return "the program was still running when recording stopped: the blocks live then are not leaks";
    uint64_t lost = t->end.lost_in_crash + t->end.lost_dead_collector;
    if (lost) {
        snprintf(buf, len, "%" PRIu64 " events were lost (being written when the process died, or given up by a dead collector)", lost);
        return buf;
    }
    return NULL;
}

const char *ml_cli_heap_untraced_reason(const char *warning) {
    if (strncmp(warning, ML_UNTRACED_HEAP_PREFIX, sizeof ML_UNTRACED_HEAP_PREFIX - 1)) return NULL;
    return "its heap calls went to an allocator ahead of libmemlens.so (the program's own, or one preloaded "
           "first), so it holds none of them";
}

/* Why the trace says that its heap calls were not traced (an
 * ML_UNTRACED_ALLOCATOR record, kept among the warnings): "0 allocations,
 * 0 B leaked" then says nothing about the program. NULL when it does not. */
static const char *heap_untraced(const ml_analysis_t *a) {
    const char *const *w;
    size_t nw = ml_analysis_warnings(a, &w);
    const char *why = NULL;
    for (size_t i = 0; i < nw && !why; i++) why = ml_cli_heap_untraced_reason(w[i]);
    return why;
}

/* A trace the gates cannot judge as asked: with --allow-incomplete a
 * warning and the gates judge what it holds (ML_EXIT_OK), else "gate
 * failed" and ML_EXIT_GATE. */
static int refuse_gates(const report_opts_t *o, const char *warning, const char *failure) {
    char safe[2 * PATH_MAX + 512]; /* they name the trace: no control byte of its name */
    if (o->allow_incomplete) {
        if (!o->quiet)
            fprintf(stderr, "memlens: warning: %s (--allow-incomplete)\n",
                    ml_cli_safe(warning, safe, sizeof safe));
        return ML_EXIT_OK;
    }
    fprintf(stderr, "memlens: gate failed: %s\n", ml_cli_safe(failure, safe, sizeof safe));
    return ML_EXIT_GATE;
}

static int parse(int argc, char **argv, report_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->traces = calloc((size_t)argc, sizeof *o->traces);
    if (!o->traces) {
        ml_cli_error("out of memory");
        return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                                     \
    do {                                                                                           \
        if (!val) {                                                                                \
            ml_cli_error("report: %s needs a value", a);                                             \
            return -1;                                                                             \
        }                                                                                          \
        i++;                                                                                       \
    } while (0)
        if (!strcmp(a, "--force")) {
            o->out_flags |= ML_OUTFILE_FORCE;
        } else if (!strcmp(a, "--group-readable")) {
            o->out_flags |= ML_OUTFILE_GROUP;
        } else if (!strcmp(a, "--json")) {
            NEED();
            o->json = ml_cli_out_name(val);
        } else if (!strcmp(a, "--json-compact")) {
            o->json_compact = true;
        } else if (!strcmp(a, "--html")) {
            NEED();
            o->html = ml_cli_out_name(val);
        } else if (!strcmp(a, "--folded")) {
            NEED();
            o->folded = ml_cli_out_name(val);
        } else if (!strcmp(a, "--pprof")) {
            NEED();
            o->pprof = ml_cli_out_name(val);
        } else if (!strcmp(a, "--speedscope")) {
            NEED();
            o->speedscope = ml_cli_out_name(val);
        } else if (!strcmp(a, "--folded-metric")) {
            NEED();
            if (ml_fold_metric_parse(val, &o->metric) < 0) {
                ml_cli_error("report: --folded-metric takes alloc, calls, peak, leaked or temporary");
                return -1;
            }
        } else if (!strcmp(a, "--fail-on-leak")) {
            NEED();
            if (ml_parse_bytes(val, &o->fail_on_leak) < 0) {
                ml_cli_error("report: --fail-on-leak takes a byte count, like 0 or 64k");
                return -1;
            }
            o->leak_gate = true;
        } else if (!strcmp(a, "--max-peak")) {
            NEED();
            if (ml_parse_bytes(val, &o->max_peak) < 0) {
                ml_cli_error("report: --max-peak takes a byte count, like 512M");
                return -1;
            }
            o->peak_gate = true;
        } else if (!strcmp(a, "--fail-on-gpu-leak")) {
            NEED();
            if (ml_parse_bytes(val, &o->fail_on_gpu_leak) < 0) {
                ml_cli_error("report: --fail-on-gpu-leak takes a byte count, like 0 or 64M");
                return -1;
            }
            o->gpu_leak_gate = true;
        } else if (!strcmp(a, "--max-gpu-peak")) {
            NEED();
            if (ml_parse_bytes(val, &o->max_gpu_peak) < 0) {
                ml_cli_error("report: --max-gpu-peak takes a byte count, like 40G");
                return -1;
            }
            o->gpu_peak_gate = true;
        } else if (!strcmp(a, "--by-process")) {
            NEED();
            if (ml_fold_metric_parse(val, &o->by_metric) < 0) {
                ml_cli_error("report: --by-process takes alloc, calls, peak, leaked or temporary");
                return -1;
            }
            o->by_process = true;
        } else if (!strcmp(a, "--suppressions")) {
            NEED();
            o->supp = val;
        } else if (!strcmp(a, "--alloc-fn")) {
            NEED();
            if (ml_cli_add_alloc_fn("report", val) < 0) return -1;
        } else if (!strcmp(a, "--max-sites")) {
            NEED();
            uint64_t v;
            if (ml_parse_bytes(val, &v) < 0 || v > UINT32_MAX) {
                ml_cli_error("report: --max-sites takes a number");
                return -1;
            }
            o->max_sites = (uint32_t)v;
        } else if (!strcmp(a, "--no-symbols")) {
            o->no_symbols = true;
        } else if (!strcmp(a, "--no-advisor")) {
            o->no_advisor = true;
        } else if (!strcmp(a, "--all-policies")) {
            o->all_policies = true;
        } else if (!strcmp(a, "--advisor-mem") || !strcmp(a, "--advisor-ops")) {
            NEED();
            bool mem = !strcmp(a, "--advisor-mem");
            uint64_t v;
            if (ml_parse_bytes(val, &v) < 0 || !v) {
                ml_cli_error(mem ? "report: --advisor-mem takes a byte count over 0, like 4G"
                                 : "report: --advisor-ops takes a count over 0, like 200M");
                return -1;
            }
            *(mem ? &o->advisor_mem : &o->advisor_ops) = v;
        } else if (!strcmp(a, "--replay")) {
            o->replay = true;
        } else if (!strcmp(a, "--summary")) {
            o->summary = true;
        } else if (!strcmp(a, "--no-save-advice")) {
            o->no_save_advice = true;
        } else if (!strcmp(a, "--allow-incomplete")) {
            o->allow_incomplete = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o->quiet = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_report(stdout);
            exit(ML_EXIT_OK);
        } else if (a[0] == '-' && a[1]) {
            ml_cli_error("report: unknown option '%s'", a);
            return -1;
        } else {
            if (!o->trace) o->trace = a;
            o->traces[o->ntraces++] = a;
        }
#undef NEED
    }
    if (!o->trace) {
        ml_cli_error("report: no trace given");
        return -1;
    }
    if (o->json_compact && !o->json) {
        ml_cli_error("report: --json-compact is the form of --json OUT; give --json");
        return -1;
    }
    /* stdout holds one document: two of them there would be neither. */
    const char *outs[] = {o->json, o->html, o->folded, o->pprof, o->speedscope};
    int on_stdout = 0;
    for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++)
        if (outs[k] && !strcmp(outs[k], "-")) on_stdout++;
    if (on_stdout > 1) {
        ml_cli_error("report: only one output can go to stdout ('-'); give the others file names");
        return -1;
    }
    if (o->summary && on_stdout) {
        ml_cli_error("report: --summary and an output on stdout ('-') cannot share stdout");
        return -1;
    }
    return 0;
}

const char **ml_cli_alloc_fns;
size_t ml_cli_nalloc_fns;

int ml_cli_add_alloc_fn(const char *cmd, const char *pattern) {
    if (!pattern[0]) {
        ml_cli_error("%s: --alloc-fn takes a function's name (`*` matches any run of characters)", cmd);
        return -1;
    }
    const char **v = realloc(ml_cli_alloc_fns, (ml_cli_nalloc_fns + 1) * sizeof *v);
    if (!v) {
        ml_cli_error("out of memory");
        return -1;
    }
    v[ml_cli_nalloc_fns++] = pattern;
    ml_cli_alloc_fns = v;
    return 0;
}

void ml_cli_warn_alloc_fns(const ml_analysis_t *a, const char *path) {
    const char *const *p;
    const uint64_t *hits;
    size_t n = ml_analysis_alloc_fns(a, &p, &hits);
    char safe[PATH_MAX], safe_fn[1024];
    for (size_t i = 0; i < n; i++)
        if (!hits[i])
            fprintf(stderr,
                    "memlens: warning: %s: --alloc-fn '%s' names no frame at the top of any "
                    "stack (nor just below another allocation function)\n",
                    ml_cli_safe(path, safe, sizeof safe),
                    ml_cli_safe(p[i], safe_fn, sizeof safe_fn));
}

/* ------------------------------------------------------------------------- */
/* The program an exec led to                                                */
/* ------------------------------------------------------------------------- */

static const char *base_of(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The pid, parent trace and program of the trace at `path`, from its
 * process record (the first records). */
static bool trace_process(const char *path, uint32_t *pid, char *parent, size_t plen, char *exe, size_t elen) {
    ml_reader_t *r;
    if (ml_reader_open(path, &r, NULL, 0) < 0) return false;
    ml_record_t rec;
    bool found = false;
    for (int i = 0; i < 4096 && !found && ml_reader_next(r, &rec) == 1; i++) {
        if (rec.tag != ML_T_PROCESS) continue;
        *pid = rec.u.process.pid;
        snprintf(parent, plen, "%s", rec.u.process.parent_trace);
        snprintf(exe, elen, "%s", rec.u.process.exe);
        found = true;
    }
    ml_reader_close(r);
    return found;
}

/* The collector names the trace of every later process image STEM.PID.mlt,
 * or STEM.PID.N.mlt (N = 2, 3, ...) when that name is taken, STEM being the
 * first trace's name less ".mlt" (collector/discover.c). The trace of the
 * image that replaced `path`'s process (pid) by exec is the one of those
 * whose process record has that pid and names `path` as its parent (by file
 * name: the directory may have moved). */
static bool exec_next_in(const char *stem, const char *path, uint32_t pid, char *out, size_t len, char *exe,
                         size_t elen) {
    for (int n = 1; n < 1000; n++) {
        char cand[PATH_MAX], parent[PATH_MAX], cexe[PATH_MAX];
        int w = n == 1 ? snprintf(cand, sizeof cand, "%s.%u.mlt", stem, pid)
                       : snprintf(cand, sizeof cand, "%s.%u.%d.mlt", stem, pid, n);
        if (w < 0 || (size_t)w >= sizeof cand) return false;
        struct stat st;
        if (lstat(cand, &st) < 0) return false; /* the names are taken in order */
        uint32_t cpid;
        if (!S_ISREG(st.st_mode) || !strcmp(cand, path) ||
            !trace_process(cand, &cpid, parent, sizeof parent, cexe, sizeof cexe))
            continue;
        if (cpid == pid && !strcmp(base_of(parent), base_of(path))) {
            snprintf(out, len, "%s", cand);
            snprintf(exe, elen, "%s", cexe);
            return true;
        }
    }
    return false;
}

static bool exec_next(const char *path, uint32_t pid, char *out, size_t len, char *exe, size_t elen) {
    size_t n = strlen(path);
    char stem[PATH_MAX];
    if (n < 5 || n - 4 >= sizeof stem || strcmp(path + n - 4, ".mlt")) return false;
    memcpy(stem, path, n - 4);
    stem[n - 4] = '\0';
    if (exec_next_in(stem, path, pid, out, len, exe, elen)) return true;
    /* A later image's own trace: its ".PID" or ".PID.N" is not the stem's. */
    char own[24];
    size_t k = (size_t)snprintf(own, sizeof own, ".%u", pid);
    char *dot = strrchr(stem, '.');
    if (dot && dot[1] && strspn(dot + 1, "0123456789") == strlen(dot + 1) && (size_t)(dot - stem) >= k &&
        !strncmp(dot - k, own, k) && strcmp(dot, own))
        *dot = '\0'; /* STEM.PID.N */
    size_t sl = strlen(stem);
    if (sl <= k || strcmp(stem + sl - k, own)) return false;
    stem[sl - k] = '\0';
    return exec_next_in(stem, path, pid, out, len, exe, elen);
}

static int exec_chain(const char *path, uint32_t pid, char *first, char *first_exe, char *last, char *last_exe,
                      size_t len) {
    char cur[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    int steps = 0;
    while (steps < 256 && exec_next(cur, pid, last, len, last_exe, len)) {
        if (!steps++) {
            snprintf(first, len, "%s", last);
            snprintf(first_exe, len, "%s", last_exe);
        }
        snprintf(cur, sizeof cur, "%s", last);
    }
    return steps;
}

int ml_cli_exec_chain(const char *path, const ml_analysis_t *a, char *first, char *first_exe, char *last,
                      char *last_exe, size_t len) {
    const ml_totals_t *t = ml_analysis_totals(a);
    if (!t->complete || t->end.status_kind != ML_END_EXEC) return 0;
    return exec_chain(path, ml_analysis_process(a)->pid, first, first_exe, last, last_exe, len);
}

/* Loads and builds one trace; shared with `memlens diff`. Prints the error
 * and returns NULL on failure. */
ml_analysis_t *ml_cli_analyse(const char *path, const ml_suppressions_t *supp, bool no_symbols,
                              bool quiet, bool replay) {
    return ml_cli_analyse_ex(path, supp, no_symbols, quiet, replay, false);
}

ml_analysis_t *ml_cli_analyse_ex(const char *path, const ml_suppressions_t *supp, bool no_symbols,
                                 bool quiet, bool replay, bool no_calltree) {
    ml_analysis_t *a;
    char err[1024], safe[PATH_MAX];
    if (ml_analysis_new(&a) < 0) {
        ml_cli_error("out of memory");
        return NULL;
    }
    char stage[160];
    snprintf(stage, sizeof stage, "loading %s", path);
    if (!quiet) ml_cli_stage_begin(stage);
    int rc = ml_analysis_load_ex(a, path, (quiet ? 0 : ML_LOAD_PROGRESS) | (replay ? 0 : ML_LOAD_SNAPSHOT | ML_LOAD_PACKED), err,
                                 sizeof err);
    ml_cli_stage_end();
    if (rc < 0) {
        ml_cli_error("%s", err);
        ml_analysis_free(a);
        return NULL;
    }
    const ml_totals_t *t = ml_analysis_totals(a);
    if (t->records == 0 && !t->complete) {
        /* A header and nothing else: nothing to report on. */
        struct stat st;
        bool header_only = stat(path, &st) == 0 && (uint64_t)st.st_size <= ML_TRACE_HEADER_LEN;
        if (quiet) {
        } else if (t->truncated && !header_only) {
            fprintf(stderr,
                    "memlens: warning: %s holds no complete record: it was cut inside its first "
                    "chunk (memlens was killed, or the disk filled, while the program ran)\n",
                    ml_cli_safe(path, safe, sizeof safe));
        } else {
            fprintf(stderr,
                    "memlens: warning: %s holds no records: it ends after its header (the program "
                    "never started, or memlens stopped before writing anything)\n",
                    ml_cli_safe(path, safe, sizeof safe));
        }
    }
    ml_build_opts_t bo = {.no_symbols = no_symbols, .suppressions = supp,
                          .alloc_fns = ml_cli_alloc_fns, .nalloc_fns = ml_cli_nalloc_fns,
                          .no_calltree = no_calltree};
    snprintf(stage, sizeof stage, "analysing %s (symbols, leaks, fragmentation)", path);
    if (!quiet) ml_cli_stage_begin(stage);
    rc = ml_analysis_build(a, &bo, err, sizeof err);
    ml_cli_stage_end();
    if (rc < 0) {
        ml_cli_error("%s: %s", path, err);
        ml_analysis_free(a);
        return NULL;
    }
    if (!quiet && t->truncated)
        fprintf(stderr, "memlens: warning: %s is truncated (the recording was cut short); "
                        "reporting what it holds\n",
                ml_cli_safe(path, safe, sizeof safe));
    return a;
}

/* The summary, through the stream that keeps a trace's control bytes off
 * the terminal (text_out.c). */
typedef struct {
    const ml_analysis_t *a;
    const char *trace;
} text_ctx_t;

static void write_text(FILE *f, void *p) {
    const text_ctx_t *c = p;
    ml_report_text(f, c->a, c->trace, 10);
}

/* "memlens: wrote PATH (SIZE)" on stderr, for a file (not stdout). */
static void say_wrote(const char *path, bool quiet) {
    struct stat st;
    char b[32];
    if (quiet || !strcmp(path, "-") || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return;
    fprintf(stderr, "memlens: wrote %s (%s)\n", path, ml_fmt_bytes((uint64_t)st.st_size, b, sizeof b));
}

/* A full-form JSON report of 256 MiB or more: each site repeats its whole
 * stack (a C++ or Python program's reach gigabytes), which the compact form
 * writes once. */
static void hint_compact(const char *path, bool quiet) {
    struct stat st;
    if (quiet || !strcmp(path, "-") || stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size < (off_t)256 << 20)
        return;
    fprintf(stderr, "memlens: note: %s lists every site's whole stack; --json-compact writes each frame and "
                    "stack once (docs/html-report.md)\n",
            path);
}

/* Writes an export to `path` ('-': stdout) through ml_out (never a half-
 * written file); on failure prints why and returns -1. */
static int export_to(const char *path, int (*write)(FILE *, const ml_analysis_t *), const ml_analysis_t *a,
                     unsigned flags) {
    char err[1024];
    ml_out_t out;
    int rc = ml_out_open_flags(&out, path, flags, err, sizeof err); /* --force, --group-readable */
    if (rc == 0 && (rc = write(out.f, a)) < 0) {
        ml_out_abort(&out);
        snprintf(err, sizeof err, "cannot write %s: %s", path, strerror(-rc));
    } else if (rc == 0) {
        rc = ml_out_commit(&out, err, sizeof err);
    }
    if (rc < 0) ml_cli_error("%s", err);
    return rc < 0 ? -1 : 0;
}

/* Time buckets of the page's time-range selection: fine enough to pick a
 * phase, coarse enough that a 6,000-site page stays small. */
#define ML_HTML_TIME_BUCKETS 64

/* The page's time buckets need the trace's allocations once more. When the
 * strategy advisor replays the trace, its first pass hands them over as it
 * reads them (ml_advisor_opts_t.on_record): one read of the trace fewer,
 * about a tenth of the CPU time of cppcheck's whole report. Otherwise (no
 * advisor, saved advice, a replay skipped or failed) they read the trace on
 * a thread of their own (the analysis is read-only) while the JSON is
 * written, and are joined before the page. */
typedef struct {
    const char *trace;
    ml_time_buckets_acc_t *acc;
    int rc;
    char err[1024];
    pthread_t thread;
    bool running, joined;
} buckets_job_t;

static void buckets_init(buckets_job_t *j, const ml_analysis_t *a, const char *trace) {
    *j = (buckets_job_t){.trace = trace};
    j->rc = ml_time_buckets_acc_new(a, ML_HTML_TIME_BUCKETS, &j->acc, j->err, sizeof j->err);
}

static void *buckets_main(void *arg) {
    buckets_job_t *j = arg;
    j->rc = ml_time_buckets_acc_read(j->acc, j->trace, j->err, sizeof j->err);
    return NULL;
}

/* Reads the trace on a thread, unless its records were all fed already. */
static void buckets_start(buckets_job_t *j) {
    if (j->rc < 0 || j->running || ml_time_buckets_acc_complete(j->acc)) return;
    j->running = pthread_create(&j->thread, NULL, buckets_main, j) == 0;
}

/* The buckets (NULL, with the error in j->err, when they could not be
 * made); the trace is read here when no thread did it. */
static ml_time_buckets_t *buckets_join(buckets_job_t *j) {
    if (j->joined) return NULL; /* handed over already */
    j->joined = true;
    if (j->running) pthread_join(j->thread, NULL);
    else if (j->rc == 0 && !ml_time_buckets_acc_complete(j->acc)) buckets_main(j);
    j->running = false;
    ml_time_buckets_t *tb = NULL;
    if (j->rc == 0) j->rc = ml_time_buckets_acc_finish(j->acc, &tb, j->err, sizeof j->err);
    ml_time_buckets_acc_free(j->acc);
    j->acc = NULL;
    return j->rc < 0 ? NULL : tb;
}

static int write_json_to(ml_out_t *out, const ml_analysis_t *a, const ml_report_opts_t *ro) {
    return ml_report_json(out->f, a, ro);
}

/* Several traces, a directory, or --by-process: the merged report
 * (report_many.c). */
static bool is_many(const report_opts_t *o) {
    struct stat st;
    return o->ntraces > 1 || o->by_process || (stat(o->trace, &st) == 0 && S_ISDIR(st.st_mode));
}

static int report_many(const report_opts_t *o, const ml_suppressions_t *supp) {
    ml_report_many_opts_t mo = {
        .inputs = o->traces, .ninputs = o->ntraces, .json = o->json, .html = o->html,
        .by_process = o->by_process, .by_metric = o->by_metric,
        .leak_gate = o->leak_gate, .peak_gate = o->peak_gate, .gpu_leak_gate = o->gpu_leak_gate,
        .gpu_peak_gate = o->gpu_peak_gate, .fail_on_leak = o->fail_on_leak, .max_peak = o->max_peak,
        .fail_on_gpu_leak = o->fail_on_gpu_leak, .max_gpu_peak = o->max_gpu_peak,
        .allow_incomplete = o->allow_incomplete, .quiet = o->quiet, .no_symbols = o->no_symbols,
        .replay = o->replay, .supp = supp, .out_flags = o->out_flags, .max_sites = o->max_sites,
        .json_compact = o->json_compact};
    return ml_cli_report_many(&mo);
}

/* Each output a file of its own: not a trace read, not another output
 * (the second would replace the first without a word). Says why. */
static bool outputs_clash(const report_opts_t *o) {
    const char *outs[] = {o->json, o->html, o->folded, o->pprof, o->speedscope};
    static const char *const names[] = {"--json", "--html", "--folded", "--pprof", "--speedscope"};
    for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) {
        if (!outs[k] || !strcmp(outs[k], "-")) continue;
        if (ml_cli_output_clobbers_input("report", names[k], outs[k], o->traces, o->ntraces)) return true;
        for (size_t j = 0; j < k; j++) {
            if (outs[j] && strcmp(outs[j], "-") && ml_cli_same_file(outs[j], outs[k])) {
                ml_cli_error("report: %s and %s name the same file (%s); give each its own", names[j], names[k],
                             outs[k]);
                return true;
            }
        }
    }
    return false;
}

int ml_cmd_report(int argc, char **argv) {
    report_opts_t o;
    if (parse(argc, argv, &o) < 0) {
        free(o.traces);
        usage_report(stderr);
        return ML_EXIT_USAGE;
    }
    if (outputs_clash(&o)) {
        free(o.traces);
        return ML_EXIT_USAGE;
    }
    bool many = is_many(&o);
    if (many && (o.folded || o.pprof || o.speedscope)) {
        ml_cli_error("report: --folded, --pprof and --speedscope take one trace; a report of several "
                     "traces writes --json, --html or the text summary");
        free(o.traces);
        usage_report(stderr);
        return ML_EXIT_USAGE;
    }
    char err[1024];
    ml_suppressions_t *supp = NULL;
    if (o.supp && ml_suppressions_load(o.supp, &supp, err, sizeof err) < 0) {
        ml_cli_error("suppressions: %s", err);
        free(o.traces);
        return ML_EXIT_ERROR;
    }
    if (many) {
        int rc = report_many(&o, supp);
        ml_suppressions_free(supp);
        free(o.traces);
        return rc;
    }
    free(o.traces);
    o.traces = NULL;
    int code = ML_EXIT_OK;
    ml_analysis_t *a = ml_cli_analyse(o.trace, supp, o.no_symbols, o.quiet, o.replay);
    if (!a) {
        ml_suppressions_free(supp);
        return ML_EXIT_ERROR;
    }
    if (!o.quiet) ml_cli_warn_alloc_fns(a, o.trace);
    /* A launcher (a pyenv shim, `sh -c 'exec prog'`) replaced itself: say
     * where the program it became was traced. */
    char exec_first[PATH_MAX], exec_first_exe[PATH_MAX], exec_last[PATH_MAX], exec_last_exe[PATH_MAX];
    int exec_steps = ml_cli_exec_chain(o.trace, a, exec_first, exec_first_exe, exec_last, exec_last_exe, PATH_MAX);
    if (exec_steps == 1)
        ml_analysis_warn_report(a, "this process replaced itself by exec: the program it became, %s, is traced in %s",
                                exec_first_exe, exec_first);
    else if (exec_steps > 1)
        ml_analysis_warn_report(a,
                                "this process replaced itself by exec: the program it became, %s, is traced in %s; "
                                "the last of the %d programs it became, %s, in %s",
                                exec_first_exe, exec_first, exec_steps, exec_last_exe, exec_last);
    buckets_job_t buckets;
    bool advise = (o.json || o.html) && !o.no_advisor;
    if (o.html) buckets_init(&buckets, a, o.trace);
    if (o.html && !advise) buckets_start(&buckets);
    /* The trace's size as recorded: advice a report saved after it is not
     * counted, so that every report of a trace says the same. */
    uint64_t trace_size = 0;
    ml_reader_t *size_reader;
    if (ml_reader_open(o.trace, &size_reader, NULL, 0) == 0) {
        trace_size = ml_reader_recorded_size(size_reader);
        ml_reader_close(size_reader);
    }
    ml_report_opts_t ro = {
        .trace_path = o.trace,
        .trace_size = trace_size,
        .max_sites = o.max_sites,
        .suppressions = supp,
    };
    /* The strategy advisor replays the trace for the JSON and HTML reports. */
    ml_advice_t *advice = NULL;
    if (advise) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        ml_advisor_opts_t ao = {.threads = cpus > 1 ? (unsigned)(cpus < 4 ? cpus : 4) : 0, .analysis = a,
                                .all_policies = o.all_policies, .progress = !o.quiet,
                                .budget_bytes = o.advisor_mem, .budget_ops = o.advisor_ops};
        if (o.html && buckets.rc == 0) {
            ao.on_record = ml_time_buckets_acc_record;
            ao.on_record_ctx = buckets.acc;
        }
        /* Saved advice is read unless --replay, and a fresh result saved
         * unless --no-save-advice (ml_advisor_run_cached). */
        unsigned cache = (o.replay ? 0 : ML_ADVICE_CACHE_READ) | (o.no_save_advice ? 0 : ML_ADVICE_CACHE_WRITE);
        char warn[1024];
        if (!o.quiet) ml_cli_stage_begin("strategy advisor");
        int arc = ml_advisor_run_cached(o.trace, &ao, cache, &advice, err, sizeof err, warn, sizeof warn);
        ml_cli_stage_end();
        if (arc < 0 && !o.quiet)
            fprintf(stderr, "memlens: warning: strategy advisor: %s\n", err);
        char safe[4096];
        if (warn[0] && !o.quiet) fprintf(stderr, "memlens: warning: %s\n", ml_cli_safe(warn, safe, sizeof safe));
        ro.advice = advice;
        if (o.html) buckets_start(&buckets); /* no replay read the whole trace */
    }

    if (o.json) {
        ml_out_t out;
        int wrc = 0;
        ml_report_opts_t jro = ro;
        jro.frame_table = o.json_compact;
        if (ml_out_open_flags(&out, o.json, o.out_flags, err, sizeof err) < 0 ||
            ((wrc = write_json_to(&out, a, &jro)) < 0
                 ? (ml_out_abort(&out), snprintf(err, sizeof err, "cannot write %s: %s", o.json, strerror(-wrc)), -1)
                 : ml_out_commit(&out, err, sizeof err)) < 0) {
            ml_cli_error("%s", err);
            code = ML_EXIT_ERROR;
        } else {
            say_wrote(o.json, o.quiet);
            if (!o.json_compact) hint_compact(o.json, o.quiet);
        }
    }
    if (o.html && code == ML_EXIT_OK) {
        char *doc = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&doc, &len);
        ml_report_opts_t hro = ro;
        hro.frame_table = true; /* the page's form: each frame once */
        /* The time-range selection's per-site buckets; without them the
         * page draws no selection (and says why). */
        ml_time_buckets_t *tb = buckets_join(&buckets);
        if (!tb && !o.quiet) fprintf(stderr, "memlens: warning: time-range selection left out: %s\n", buckets.err);
        hro.time_buckets = tb;
        int rc = m ? ml_report_json(m, a, &hro) : -ENOMEM;
        if (m) fclose(m);
        ml_time_buckets_free(tb);
        if (!o.quiet) ml_cli_stage_begin("writing the HTML page");
        if (rc == 0) rc = ml_report_html_write_flags(doc, len, o.html, o.out_flags, err, sizeof err);
        else snprintf(err, sizeof err, "out of memory");
        ml_cli_stage_end();
        if (rc < 0) {
            ml_cli_error("%s", err);
            code = ML_EXIT_ERROR;
        } else {
            say_wrote(o.html, o.quiet);
        }
        free(doc);
    }
    if (o.html && code != ML_EXIT_OK) ml_time_buckets_free(buckets_join(&buckets)); /* the page was not written */
    if (o.folded && code == ML_EXIT_OK) {
        ml_out_t out;
        int frc = 0;
        if (ml_out_open_flags(&out, o.folded, o.out_flags, err, sizeof err) < 0 ||
            ((frc = ml_report_folded(out.f, a, o.metric)) < 0
                 ? (ml_out_abort(&out), snprintf(err, sizeof err, "cannot write %s: %s", o.folded, strerror(-frc)), -1)
                 : ml_out_commit(&out, err, sizeof err)) < 0) {
            ml_cli_error("%s", err);
            code = ML_EXIT_ERROR;
        } else {
            say_wrote(o.folded, o.quiet);
        }
    }
    if (o.pprof && code == ML_EXIT_OK) {
        if (export_to(o.pprof, ml_report_pprof, a, o.out_flags) < 0) code = ML_EXIT_ERROR;
        else say_wrote(o.pprof, o.quiet);
    }
    if (o.speedscope && code == ML_EXIT_OK) {
        if (export_to(o.speedscope, ml_report_speedscope, a, o.out_flags) < 0) code = ML_EXIT_ERROR;
        else say_wrote(o.speedscope, o.quiet);
    }
    bool files = o.json || o.html || o.folded || o.pprof || o.speedscope;
    if (!files || (o.summary && code == ML_EXIT_OK)) {
        text_ctx_t tc = {a, o.trace};
        ml_cli_text_report(write_text, &tc);
    }
    if (files && !o.quiet) {
        const char *const *w;
        size_t nw = ml_analysis_warnings(a, &w);
        char safe[4096];
        for (size_t i = 0; i < nw; i++)
            if (!strstr(w[i], "truncated") && !strstr(w[i], "ends early"))
                fprintf(stderr, "memlens: warning: %s\n", ml_cli_safe(w[i], safe, sizeof safe));
    }

    /* Gates, after the reports: the evidence is on disk. */
    bool gated = o.leak_gate || o.peak_gate || o.gpu_leak_gate || o.gpu_peak_gate;
    char why_buf[160];
    const char *why = gated ? ml_cli_incomplete_reason(ml_analysis_totals(a), why_buf, sizeof why_buf) : NULL;
    if (gated && !why) why = heap_untraced(a);
    char warn_msg[2 * PATH_MAX + 256], fail_msg[2 * PATH_MAX + 256];
    if (code == ML_EXIT_OK && why) {
        snprintf(warn_msg, sizeof warn_msg, "%s is incomplete (%s); the gates judge only what it holds", o.trace, why);
        snprintf(fail_msg, sizeof fail_msg,
                 "%s is incomplete: %s. A gate cannot pass on what the trace does not hold; record again, or pass "
                 "--allow-incomplete to judge what it holds",
                 o.trace, why);
        code = refuse_gates(&o, warn_msg, fail_msg);
    }
    if (code == ML_EXIT_OK && o.leak_gate && exec_steps) {
        /* Nothing it held at the exec is a leak, and the program it became
         * (the one the user meant: the launcher's target) is in another
         * trace: passing here would judge the wrong process. An exec into
         * a program memlens could not follow leaves no other trace, and the
         * gate passes on this image's verdict, none (as valgrind's). */
        const char *next = exec_steps > 1 ? exec_last : exec_first;
        snprintf(warn_msg, sizeof warn_msg,
                 "%s: its process replaced itself by exec, so it holds no leak verdict; the program it became is "
                 "traced in %s; --fail-on-leak passes",
                 o.trace, next);
        snprintf(fail_msg, sizeof fail_msg,
                 "%s holds no leak verdict: its process replaced itself by exec, and what it held then is not "
                 "leaked; the program it became is traced in %s. Gate that trace, or the directory (memlens report DIR)",
                 o.trace, next);
        code = refuse_gates(&o, warn_msg, fail_msg);
    }
    if (code == ML_EXIT_OK) {
        char b1[32], b2[32];
        const ml_leaks_t *L = ml_analysis_leaks(a);
        const ml_totals_t *t = ml_analysis_totals(a);
        if (o.leak_gate && L->gate_bytes > o.fail_on_leak) {
            fprintf(stderr,
                    "memlens: gate exceeded: leaks (definite + indirect + possible) %" PRIu64
                    " bytes (%s) > --fail-on-leak %" PRIu64
                    " bytes (%s)\n",
                    L->gate_bytes, ml_fmt_bytes(L->gate_bytes, b1, sizeof b1), o.fail_on_leak,
                    ml_fmt_bytes(o.fail_on_leak, b2, sizeof b2));
            code = ML_EXIT_GATE;
        }
        if (o.peak_gate && t->peak_bytes > o.max_peak) {
            fprintf(stderr,
                    "memlens: gate exceeded: peak heap %" PRIu64 " bytes (%s) > --max-peak %" PRIu64
                    " bytes (%s)\n",
                    t->peak_bytes, ml_fmt_bytes(t->peak_bytes, b1, sizeof b1), o.max_peak,
                    ml_fmt_bytes(o.max_peak, b2, sizeof b2));
            code = ML_EXIT_GATE;
        }
        if (gpu_gates(a, &o)) code = ML_EXIT_GATE;
    }
    ml_advice_free(advice);
    ml_analysis_free(a);
    ml_suppressions_free(supp);
    return code;
}
