/* main.c - `memlens`: dispatch to the subcommands. */
#include "ml_cli.h"
#include "ml_config.h"
#include "ml_options.h"
#include "ml_viewer.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

void ml_cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("memlens: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A byte count with an optional k, M or G suffix (powers of 1024): the
 * environment's syntax (ml_options.c), so options and variables agree. */
int ml_parse_bytes(const char *s, uint64_t *out) {
    return ml_parse_uint(s, out);
}

/* The resolved directory of path and its last name, joined. */
static bool canonical(const char *path, char *out, size_t len) {
    char d[PATH_MAX], b[PATH_MAX], dir[PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    snprintf(b, sizeof b, "%s", path);
    if (!realpath(dirname(d), dir)) return false;
    int n = snprintf(out, len, "%s/%s", dir, basename(b));
    return n > 0 && (size_t)n < len;
}

bool ml_cli_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb) return false;
    char ca[PATH_MAX + 1], cb[PATH_MAX + 1];
    return canonical(a, ca, sizeof ca) && canonical(b, cb, sizeof cb) && !strcmp(ca, cb);
}

bool ml_cli_output_clobbers_input(const char *cmd, const char *option, const char *out,
                                  const char *const *inputs, size_t ninputs) {
    if (!out || !strcmp(out, "-")) return false;
    for (size_t i = 0; i < ninputs; i++) {
        struct stat st;
        if (stat(inputs[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            /* a merged report reads every *.mlt file of the directory */
            size_t n = strlen(out);
            char od[PATH_MAX], in[PATH_MAX], o2[PATH_MAX];
            snprintf(o2, sizeof o2, "%s", out);
            if (n >= 4 && !strcmp(out + n - 4, ".mlt") && realpath(dirname(o2), od) && realpath(inputs[i], in) &&
                !strcmp(od, in)) {
                ml_cli_error("%s: %s %s is a trace file of %s, an input of this report: it would be "
                             "replaced; give another name",
                             cmd, option, out, inputs[i]);
                return true;
            }
        } else if (ml_cli_same_file(out, inputs[i])) {
            ml_cli_error("%s: %s %s is the trace %s: it would be replaced by the report; give another name",
                         cmd, option, out, inputs[i]);
            return true;
        }
    }
    return false;
}

static void usage(FILE *f) {
    fputs("usage: memlens COMMAND [ARGS]\n"
          "\n"
          "  run [-o FILE] [--follow-fork] [--sample BYTES] [--unwind libunwind|fp] [--depth N] [--live] -- PROG [ARGS...]\n"
          "                 record every heap allocation of PROG into a trace (.mlt)\n"
          "  attach [-o FILE] [--duration SECONDS] [-q] PID\n"
          "                 record a running process from now until Ctrl-C or SECONDS (x86-64)\n"
          "  report FILE [--json OUT] [--html OUT] [--folded OUT] [--fail-on-leak BYTES] [--max-peak BYTES]\n"
          "                 analyse a trace; CI gates exit 3 when exceeded\n"
          "  diff BASE NEW [--json OUT] [--fail-on-increase PERCENT]\n"
          "                 per-site deltas between two traces\n"
          "  view FILE      browse a trace in the terminal UI (keys: ?; docs/viewer.md)\n"
          "  dump FILE      print every record of a trace as text\n"
          "  --version      print the version and build options\n"
          "\n"
          "Exit codes: 0 ok, 1 memlens error, 2 usage, 3 CI gate exceeded; `run` exits with the\n"
          "program's own status (128+signal when it was killed).\n",
          f);
}

int main(int argc, char **argv) {
    ml_options_init(ML_ENV_CLI, "");
    ml_cli_progress_install();
    if (argc < 2) {
        usage(stderr);
        return ML_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run")) return ml_cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "attach")) return ml_cmd_attach(argc - 1, argv + 1);
    if (!strcmp(cmd, "dump")) return ml_cmd_dump(argc - 1, argv + 1);
    if (!strcmp(cmd, "view")) return ml_cmd_view(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return ml_cmd_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "diff")) return ml_cmd_diff(argc - 1, argv + 1);
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("memlens %s\nGPU (CUPTI) support: %s\n", ML_VERSION,
               ML_HAVE_CUPTI ? "yes" : "no (built without the CUDA toolkit)");
        return ML_EXIT_OK;
    }
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return ML_EXIT_OK;
    }
    ml_cli_error("unknown command '%s'", cmd);
    usage(stderr);
    return ML_EXIT_USAGE;
}
