/* ml_cli.h - the `memlens` subcommands and what their files share.
 *
 * The command is a thin front-end: each ml_cmd_* parses its options, wires
 * the libraries (collector/, analysis/, report/, viewer/) and returns an exit
 * code (ML_EXIT_*), with any message already on stderr. Single-threaded,
 * except `run --live`, whose viewer thread the live sink shares the model
 * with under the model's lock. Out of memory is reported ("memlens: error:
 * out of memory") and exits with ML_EXIT_ERROR. */
#ifndef ML_CLI_H
#define ML_CLI_H

#include <stdint.h>
#include <stdio.h>

#include <signal.h>
#include "ml_collector.h"
#include "ml_viewer_model.h"

/* Exit codes (DESIGN.md). */
#define ML_EXIT_OK 0
#define ML_EXIT_ERROR 1
#define ML_EXIT_USAGE 2
#define ML_EXIT_GATE 3
#define ML_EXIT_CANNOT_EXEC 126 /* `memlens run`: PROG is not executable (as shells) */
#define ML_EXIT_NOT_FOUND 127   /* `memlens run`: PROG was not found (as shells) */

int ml_cmd_run(int argc, char **argv);
int ml_cmd_attach(int argc, char **argv);
/* run.c, shared with attach.c: libmemlens.so (ML_PRELOAD_LIB, beside the
 * binary, or ../lib/memlens/), and the default trace name
 * memlens.PROG.PID-RANDOM.mlt. */
int ml_cli_find_preload_lib(char *out, size_t len);
void ml_cli_default_trace_name(char *out, size_t len, const char *prog, int pid);
int ml_cmd_dump(int argc, char **argv);
int ml_cmd_report(int argc, char **argv);
int ml_cmd_diff(int argc, char **argv);

/** Parses a byte count with an optional k/M/G (KiB, MiB, GiB) suffix. 0 or -1. */
int ml_parse_bytes(const char *s, uint64_t *out);

/** Process pid's state letter in /proc/PID/stat (T: stopped, Z: a zombie),
 * 0 when it is gone or cannot be read. Only system calls, no allocation:
 * `run` calls it in a child forked from its threaded process. */
char ml_cli_proc_state(pid_t pid);
/** Whether the paths a and b name one file: the same inode when both exist,
 * else the same directory (resolved) and last name. */
bool ml_cli_same_file(const char *a, const char *b);
/* An output's name as the commands read it: "-" for /dev/stdout and the other
 * names of descriptor 1 (ml_outfile_own_fd), so that stdout holds one
 * document whichever way it is named; any other name as it is. */
const char *ml_cli_out_name(const char *path);
/* Calls write(f, ctx) with f a stream onto stdout that writes '?' for every
 * control byte but newline and tab (text_out.c: a hostile trace's strings
 * in a text report), and flushes it. -1 when a write to stdout failed. */
int ml_cli_text_report(void (*write)(FILE *, void *), void *ctx);
/* s with the same bytes replaced by '?' (newline too), in buf (len bytes
 * at most): for a message on stderr that quotes a trace's strings. */
const char *ml_cli_safe(const char *s, char *buf, size_t len);

/** Whether the output path `out` would take the place of an input: one of
 * the traces (a file given, or a *.mlt file in a directory given, which a
 * merged report reads). Says which on stderr as "CMD: OPTION OUT ...". */
bool ml_cli_output_clobbers_input(const char *cmd, const char *option, const char *out,
                                  const char *const *inputs, size_t ninputs);

/** Prints "memlens: error: ...", then a newline, on stderr, and returns:
 * it does not exit; the caller chooses the exit code. */
void ml_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** The sink of `memlens run --live` (live_sink.c): the root process' records
 * into model m, under its lock. m stays the caller's and must outlive the
 * collector the sink is added to. */
ml_sink_t ml_cli_live_sink(ml_vmodel_t *m);

/** Installs the stderr progress display for long trace reads (progress.c). */
void ml_cli_progress_install(void);
/** A stage of work without a loop to count: once it has taken a second, and
 * only when stderr is a terminal, "memlens: WHAT..." shows on stderr until
 * ml_cli_stage_end() erases it. One stage at a time (a nested begin is
 * ignored); the main thread's calls only. */
void ml_cli_stage_begin(const char *what);
void ml_cli_stage_end(void);

/** SIGXFSZ's disposition when memlens started (main.c ignores it: a file
 * past `ulimit -f` is a write error); `run` gives it back to the program. */
extern struct sigaction ml_cli_old_xfsz;

#endif
