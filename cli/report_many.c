/* report_many.c - `memlens report A.mlt B.mlt ...` and `memlens report DIR`:
 * many processes in one report (docs/analysis.md, "Many processes").
 *
 * Each trace is loaded and built alone, added to the merge
 * (analysis/ml_merge.h) and freed, so memory holds one process's analysis
 * at a time plus the merged sites. A directory stands for every `*.mlt`
 * file in it (not in its subdirectories), in name order; `memlens run
 * --follow-fork -o DIR/run.mlt` puts a process tree's traces there (with
 * `-o DIR/run`, the root's trace is DIR/run: add_roots takes it too).
 *
 * Errors follow the single-trace rules: a file that is not a trace, or
 * cannot be read, stops the report (exit 1) and names the file; so does a
 * directory without traces, and a trace given twice (it would count twice).
 * A truncated trace is reported with what it holds and marks the report
 * incomplete: the gates then fail unless --allow-incomplete.
 */
#define _GNU_SOURCE
#include "report_many.h"
#include "ml_cli.h"
#include "ml_merge.h"
#include "ml_report_html.h"
#include "ml_report_merge.h"
#include "ml_trace_format.h"
#include "ml_trace_io.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    char **v;
    size_t n, cap;
} paths_t;

static int push(paths_t *p, char *s) {
    if (!s) return -ENOMEM;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        char **v = realloc(p->v, cap * sizeof *v);
        if (!v) {
            free(s);
            return -ENOMEM;
        }
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = s;
    return 0;
}

static void paths_free(paths_t *p) {
    for (size_t i = 0; i < p->n; i++) free(p->v[i]);
    free(p->v);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether path is a regular file that starts with a trace's magic. */
static bool is_trace_file(const char *path) {
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) return false;
    FILE *f = fopen(path, "rbe");
    if (!f) return false;
    char magic[ML_TRACE_MAGIC_LEN];
    bool yes = fread(magic, 1, sizeof magic, f) == sizeof magic && !memcmp(magic, ML_TRACE_MAGIC, sizeof magic);
    fclose(f);
    return yes;
}

/* The root of a followed tree whose trace was named without ".mlt" (`memlens
 * run --follow-fork -o DIR/run`): the collector names the others run.PID.mlt
 * and run.PID.N.mlt (collector/discover.c), and "run" itself was left out of
 * the directory's report without a word. For each out->v[first...] named
 * STEM.PID.mlt or STEM.PID.N.mlt whose DIR/STEM is a trace file not named
 * *.mlt, that file is added, once. Returns 0 or -ENOMEM. */
static int add_roots(const char *dir, paths_t *out, size_t first) {
    size_t dl = strlen(dir), end = out->n;
    for (size_t i = first; i < end; i++) {
        const char *name = out->v[i] + dl + 1;
        size_t stem = strlen(name) - 4; /* less ".mlt" */
        for (int parts = 0; parts < 2; parts++) { /* less ".PID", then ".N" and ".PID" */
            size_t k = stem;
            while (k > 0 && name[k - 1] >= '0' && name[k - 1] <= '9') k--;
            if (k == stem || k < 2 || name[k - 1] != '.') break;
            stem = k - 1;
            char *root;
            if (asprintf(&root, "%s/%.*s", dir, (int)stem, name) < 0) return -ENOMEM;
            size_t rl = strlen(root);
            bool skip = rl >= 4 && !strcmp(root + rl - 4, ".mlt"); /* listed already */
            for (size_t j = first; !skip && j < out->n; j++) skip = !strcmp(out->v[j], root);
            if (skip || !is_trace_file(root)) {
                free(root);
                continue;
            }
            if (push(out, root) < 0) return -ENOMEM;
        }
    }
    return 0;
}

/* Appends the regular files named *.mlt in dir, in name order. Returns
 * how many, or -1 after printing why. Another kind of file by that name (a
 * FIFO, a device, a directory, a link to nothing) is no trace: it is left
 * out, and said to be, unless quiet (it was left out unsaid before). */
static long expand_dir(const char *dir, paths_t *out, bool quiet) {
    DIR *d = opendir(dir);
    if (!d) {
        ml_cli_error("%s: %s", dir, strerror(errno));
        return -1;
    }
    size_t first = out->n;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".mlt")) continue;
        char *path;
        if (asprintf(&path, "%s/%s", dir, e->d_name) < 0) {
            rc = -ENOMEM;
            break;
        }
        struct stat st;
        int bad = stat(path, &st) < 0 ? errno : 0;
        if (bad || !S_ISREG(st.st_mode)) {
            if (!quiet) {
                char safe[512];
                if (bad)
                    fprintf(stderr, "memlens: warning: %s left out: %s\n", ml_cli_safe(path, safe, sizeof safe),
                            strerror(bad));
                else
                    fprintf(stderr, "memlens: warning: %s left out: %s, not a trace file\n",
                            ml_cli_safe(path, safe, sizeof safe), ml_file_kind(st.st_mode));
            }
            free(path);
            continue;
        }
        rc = push(out, path);
    }
    closedir(d);
    if (rc == 0) rc = add_roots(dir, out, first);
    if (rc < 0) {
        ml_cli_error("out of memory");
        return -1;
    }
    if (out->n - first > 1) qsort(out->v + first, out->n - first, sizeof *out->v, cmp_str);
    if (out->n == first) {
        ml_cli_error("report: %s holds no trace (no *.mlt file)", dir);
        return -1;
    }
    return (long)(out->n - first);
}

/* The traces the inputs stand for; refuses one given twice. */
static int expand(const ml_report_many_opts_t *o, paths_t *out, bool *any_dir) {
    *any_dir = false;
    for (size_t i = 0; i < o->ninputs; i++) {
        struct stat st;
        if (stat(o->inputs[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            *any_dir = true;
            if (expand_dir(o->inputs[i], out, o->quiet) < 0) return -1;
        } else if (push(out, strdup(o->inputs[i])) < 0) {
            ml_cli_error("out of memory");
            return -1;
        }
    }
    /* The same file twice (under two names, say DIR and DIR/x.mlt) would
     * count its process twice. */
    char **real = calloc(out->n, sizeof *real);
    if (!real) {
        ml_cli_error("out of memory");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < out->n && rc == 0; i++) {
        real[i] = realpath(out->v[i], NULL);
        for (size_t k = 0; real[i] && k < i; k++)
            if (real[k] && !strcmp(real[k], real[i])) {
                ml_cli_error("report: %s is given twice (as %s and %s): its process would count twice",
                             real[i], out->v[k], out->v[i]);
                rc = -1;
                break;
            }
    }
    for (size_t i = 0; i < out->n; i++) free(real[i]);
    free(real);
    return rc;
}

/* Why process i's trace holds no heap call (ml_cli_heap_untraced_reason),
 * from its warnings in the merge ("pid N: " and the trace's own), or NULL. */
static const char *heap_untraced(const ml_merge_t *m, size_t i) {
    const char *const *w;
    size_t nw = ml_merge_warnings(m, &w);
    for (size_t k = 0; k < nw; k++) {
        if (ml_merge_warning_process(m, k) != i) continue;
        const char *own = strstr(w[k], ": ");
        const char *why = own ? ml_cli_heap_untraced_reason(own + 2) : NULL;
        if (why) return why;
    }
    return NULL;
}

/* Gates on the merged totals; each message says what it compared. */
static int gates(const ml_report_many_opts_t *o, const ml_merge_t *m) {
    bool gated = o->leak_gate || o->peak_gate || o->gpu_leak_gate || o->gpu_peak_gate;
    if (!gated) return ML_EXIT_OK;
    int code = ML_EXIT_OK;
    /* Every process must be whole for a gate to pass (as for one trace). */
    for (size_t i = 0; i < ml_merge_process_count(m); i++) {
        const ml_merge_process_t *p = ml_merge_process(m, i);
        char buf[160], safe[PATH_MAX]; /* trace_path: a name in a directory's listing */
        const char *why = ml_cli_incomplete_reason(&p->totals, buf, sizeof buf);
        if (!why) why = heap_untraced(m, i);
        if (!why) continue;
        if (o->allow_incomplete) {
            if (!o->quiet)
                fprintf(stderr, "memlens: warning: %s (pid %u) is incomplete (%s); the gates judge only what it "
                                "holds (--allow-incomplete)\n",
                        ml_cli_safe(p->trace_path, safe, sizeof safe), p->pid, why);
        } else {
            fprintf(stderr,
                    "memlens: gate failed: %s (pid %u) is incomplete: %s. A gate cannot pass on what the trace "
                    "does not hold; record again, or pass --allow-incomplete to judge what it holds\n",
                    ml_cli_safe(p->trace_path, safe, sizeof safe), p->pid, why);
            code = ML_EXIT_GATE;
        }
    }
    if (code != ML_EXIT_OK) return code;
    const ml_merge_totals_t *T = ml_merge_totals(m);
    size_t np = ml_merge_process_count(m);
    char b1[32], b2[32];
    if (o->leak_gate && T->leaks.gate_bytes > o->fail_on_leak) {
        fprintf(stderr,
                "memlens: gate exceeded: leaks (definite + indirect + possible) of all %zu processes together %" PRIu64
                " bytes (%s) > --fail-on-leak %" PRIu64 " bytes (%s)\n",
                np, T->leaks.gate_bytes, ml_fmt_bytes(T->leaks.gate_bytes, b1, sizeof b1), o->fail_on_leak,
                ml_fmt_bytes(o->fail_on_leak, b2, sizeof b2));
        code = ML_EXIT_GATE;
    }
    if (o->peak_gate && T->sum.peak_bytes > o->max_peak) {
        fprintf(stderr,
                "memlens: gate exceeded: peak heap, the sum of the %zu processes' peaks (an upper bound of their "
                "heap at any one moment), %" PRIu64 " bytes (%s) > --max-peak %" PRIu64 " bytes (%s)\n",
                np, T->sum.peak_bytes, ml_fmt_bytes(T->sum.peak_bytes, b1, sizeof b1), o->max_peak,
                ml_fmt_bytes(o->max_peak, b2, sizeof b2));
        code = ML_EXIT_GATE;
    }
    const ml_merge_gpu_device_t *d;
    size_t nd = ml_merge_gpu_devices(m, &d);
    uint64_t gpu_leaked = 0;
    for (size_t i = 0; i < nd; i++) {
        gpu_leaked += d[i].leaked_bytes;
        if (o->gpu_peak_gate && d[i].peak_bytes > o->max_gpu_peak) {
            fprintf(stderr,
                    "memlens: gate exceeded: GPU device %d peak, the sum of its %u processes' peaks, %" PRIu64
                    " bytes (%s) > --max-gpu-peak %" PRIu64 " bytes (%s)\n",
                    (int)d[i].device, d[i].processes, d[i].peak_bytes, ml_fmt_bytes(d[i].peak_bytes, b1, sizeof b1),
                    o->max_gpu_peak, ml_fmt_bytes(o->max_gpu_peak, b2, sizeof b2));
            code = ML_EXIT_GATE;
        }
    }
    if (o->gpu_leak_gate && gpu_leaked > o->fail_on_gpu_leak) {
        fprintf(stderr,
                "memlens: gate exceeded: GPU memory leaked by all %zu processes together %" PRIu64
                " bytes (%s) > --fail-on-gpu-leak %" PRIu64 " bytes (%s)\n",
                np, gpu_leaked, ml_fmt_bytes(gpu_leaked, b1, sizeof b1), o->fail_on_gpu_leak,
                ml_fmt_bytes(o->fail_on_gpu_leak, b2, sizeof b2));
        code = ML_EXIT_GATE;
    }
    return code;
}

/* The text tables, through the stream that keeps a trace's control bytes
 * off the terminal (text_out.c). */
typedef struct {
    const ml_report_many_opts_t *o;
    const ml_merge_t *m;
    const ml_report_merge_opts_t *ro;
} text_ctx_t;

static void write_text(FILE *f, void *p) {
    const text_ctx_t *c = p;
    if (c->o->by_process) ml_report_by_process(f, c->m, c->o->by_metric, 0);
    else ml_report_text_merged(f, c->m, c->ro, 10);
}

static int write_outputs(const ml_report_many_opts_t *o, const ml_merge_t *m, const ml_report_merge_opts_t *ro) {
    char err[1024];
    if (o->json) {
        ml_out_t out;
        int rc = ml_out_open_flags(&out, o->json, o->out_flags, err, sizeof err);
        /* --json-compact: each frame and stack once, as on the page (the
         * full form of 976 traces of a build was 987 MB). */
        ml_report_merge_opts_t jo = *ro;
        if (o->json_compact) jo.frame_table = jo.by_process = true;
        if (rc == 0 && (rc = ml_report_json_merged(out.f, m, &jo)) < 0) {
            ml_out_abort(&out);
            snprintf(err, sizeof err, "cannot write %s: %s", o->json, strerror(-rc));
        } else if (rc == 0) {
            rc = ml_out_commit(&out, err, sizeof err);
        }
        if (rc < 0) {
            ml_cli_error("%s", err);
            return ML_EXIT_ERROR;
        }
    }
    if (o->html) {
        char *doc = NULL;
        size_t len = 0;
        /* The page's form: each frame and stack once (a folder of python
         * traces, 99 k sites of 58 frames, made a 1.0 GB page in the full
         * form). */
        ml_report_merge_opts_t page = *ro;
        page.frame_table = true;
        FILE *f = open_memstream(&doc, &len);
        int rc = f ? ml_report_json_merged(f, m, &page) : -ENOMEM;
        if (f) fclose(f);
        if (rc == 0) rc = ml_report_html_write_flags(doc, len, o->html, o->out_flags, err, sizeof err);
        else snprintf(err, sizeof err, "out of memory");
        free(doc);
        if (rc < 0) {
            ml_cli_error("%s", err);
            return ML_EXIT_ERROR;
        }
    }
    if (o->by_process || (!o->json && !o->html)) {
        text_ctx_t tc = {o, m, ro};
        ml_cli_text_report(write_text, &tc);
    }
    return ML_EXIT_OK;
}

int ml_cli_report_many(const ml_report_many_opts_t *o) {
    paths_t paths = {0};
    bool any_dir;
    ml_merge_t *m = NULL;
    uint64_t *supp_blocks = NULL, *supp_bytes = NULL;
    int code = ML_EXIT_ERROR;
    if (expand(o, &paths, &any_dir) < 0) goto out;
    if (ml_merge_new(&m) < 0) {
        ml_cli_error("out of memory");
        goto out;
    }
    ml_symbols_share(true); /* the traces' modules are opened once (analysed one at a time) */
    /* --alloc-fn: a pattern that names no frame in any of the traces is
     * said once at the end (one program's wrapper is not expected in all). */
    uint64_t *fn_hits = ml_cli_nalloc_fns ? calloc(ml_cli_nalloc_fns, sizeof *fn_hits) : NULL;
    /* --suppressions: each build counts its own hits; the report sums them. */
    size_t nsupp = ml_suppressions_count(o->supp);
    supp_blocks = nsupp ? calloc(nsupp, sizeof *supp_blocks) : NULL;
    supp_bytes = nsupp ? calloc(nsupp, sizeof *supp_bytes) : NULL;
    if (nsupp && (!supp_blocks || !supp_bytes)) {
        ml_cli_error("out of memory");
        free(fn_hits);
        goto out;
    }
    for (size_t i = 0; i < paths.n; i++) {
        /* Each process' call tree would go unused: the merge builds one. */
        ml_analysis_t *a = ml_cli_analyse_ex(paths.v[i], o->supp, o->no_symbols, o->quiet, o->replay, true);
        if (!a) {
            free(fn_hits);
            goto out; /* ml_cli_analyse said why, naming the file */
        }
        const uint64_t *hits;
        size_t nh = ml_analysis_alloc_fns(a, NULL, &hits);
        for (size_t k = 0; fn_hits && k < nh && k < ml_cli_nalloc_fns; k++) fn_hits[k] += hits[k];
        for (size_t k = 0; k < nsupp; k++) {
            uint64_t blocks, bytes;
            ml_suppressions_pattern(o->supp, k, &blocks, &bytes);
            supp_blocks[k] += blocks;
            supp_bytes[k] += bytes;
        }
        /* As recorded: strategy advice a report saved after the records is
         * not counted (the single-trace report says the same). */
        uint64_t size = 0;
        ml_reader_t *r;
        if (ml_reader_open(paths.v[i], &r, NULL, 0) == 0) {
            size = ml_reader_recorded_size(r);
            ml_reader_close(r);
        }
        int rc = ml_merge_add(m, a, paths.v[i], size);
        ml_analysis_free(a);
        if (rc < 0) {
            ml_cli_error("out of memory merging %s", paths.v[i]);
            free(fn_hits);
            goto out;
        }
    }
    char safe_fn[1024];
    for (size_t k = 0; fn_hits && !o->quiet && k < ml_cli_nalloc_fns; k++)
        if (!fn_hits[k])
            fprintf(stderr,
                    "memlens: warning: --alloc-fn '%s' names no frame at the top of any stack of "
                    "the %zu traces\n",
                    ml_cli_safe(ml_cli_alloc_fns[k], safe_fn, sizeof safe_fn), paths.n);
    free(fn_hits);
    if (ml_merge_finish(m) < 0) {
        ml_cli_error("out of memory");
        goto out;
    }
    char label[512];
    if (o->ninputs == 1 && any_dir) snprintf(label, sizeof label, "%s", o->inputs[0]);
    else snprintf(label, sizeof label, "%zu traces", paths.n);
    ml_report_merge_opts_t ro = {.label = label, .max_sites = o->max_sites, .suppressions = o->supp,
                                 .supp_blocks = supp_blocks, .supp_bytes = supp_bytes};
    code = write_outputs(o, m, &ro);
    if (code == ML_EXIT_OK && !o->quiet && (o->json || o->html))
        fputs("memlens: note: the strategy advisor does not run on a report of several processes (it "
              "replays one heap); `memlens report TRACE` gives one trace's suggestions\n", stderr);
    if (code == ML_EXIT_OK && !o->quiet && (o->json || o->html)) {
        const char *const *w;
        size_t nw = ml_merge_warnings(m, &w);
        char safe[4096];
        for (size_t i = 0; i < nw; i++)
            if (!strstr(w[i], "truncated") && !strstr(w[i], "ends early"))
                fprintf(stderr, "memlens: warning: %s\n", ml_cli_safe(w[i], safe, sizeof safe));
    }
    if (code == ML_EXIT_OK) code = gates(o, m);
out:
    free(supp_blocks);
    free(supp_bytes);
    ml_symbols_share(false);
    ml_merge_free(m);
    paths_free(&paths);
    return code;
}
