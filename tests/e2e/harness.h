/* harness.h - end-to-end test helpers: run the real `memlens` binary on a
 * fixture program and read the trace it wrote, record by record. */
#ifndef ML_TEST_HARNESS_H
#define ML_TEST_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include "ml_analysis.h"
#include "ml_trace_io.h"

typedef struct {
    int status;  /* exit code of memlens (or 128+signal) */
    char *out;   /* captured stdout (NUL-terminated, malloc'd) */
    char *err;   /* captured stderr */
} h_run_t;

/* Runs argv (argv[0] is looked up as given) with stdout/stderr captured. */
void h_run(h_run_t *r, const char *const argv[]);
void h_run_free(h_run_t *r);
/* h_run with the test build of the interposer (libmemlens_test.so, which
 * has the test hooks) and its variable `var` set to `value`; both are unset
 * again after. */
void h_run_test_lib(h_run_t *r, const char *const argv[], const char *var, const char *value);

/* Path of a built binary (memlens, a fixture) in the build folder. */
const char *h_bin(const char *name);
/* A fresh path for a trace in a private temporary folder, removed when the
 * test process exits (ML_KEEP_TEST_FILES=1 keeps it). */
const char *h_tmp(const char *name);

#define H_MAX_MODULES 128
#define H_MAX_SIZES 256

typedef struct {
    uint64_t id_parent_pc[3];
} h_node_t;

typedef struct {
    ml_totals_t totals;
    uint64_t records_by_tag[256];
    uint64_t last_by_tag[256]; /* the position (from 1) of the tag's last record; 0: none */
    uint64_t nrecords;
    struct {
        uint64_t size, allocs;
        uint32_t last_stack;
    } sizes[H_MAX_SIZES];
    int nsizes;
    struct {
        char path[512];
        uint64_t base, lo, hi;
        bool unloaded;
    } modules[H_MAX_MODULES];
    int nmodules;
    uint32_t *node_parent; /* by node id */
    uint64_t *node_pc;
    uint32_t nnodes;
    bool truncated, complete;
    ml_rec_end_t end;
    char exe[512];
    uint32_t pid;
    char parent_trace[512];
    uint64_t sampled_allocs;
} h_trace_t;

/* Reads a whole trace; fails the current test on a read error. */
void h_trace_load(h_trace_t *t, const char *path);
void h_trace_free(h_trace_t *t);
/* Allocation calls recorded with exactly this size. */
uint64_t h_allocs_of_size(const h_trace_t *t, uint64_t size);
/* The stack of the last allocation of this size. */
uint32_t h_stack_of_size(const h_trace_t *t, uint64_t size);
/* Index of the module whose path contains `needle`, or -1. */
int h_module(const h_trace_t *t, const char *needle);
/* True if some frame of the stack lies in module m. */
bool h_stack_in_module(const h_trace_t *t, uint32_t stack, int m);
/* Number of frames of a stack. */
int h_stack_depth(const h_trace_t *t, uint32_t stack);
/* Checks (cr_expect) that stack sa of trace a and stack sb of trace b are
 * the same return addresses, frame by frame from the leaf out, each named
 * by a node its own trace defines; at least min_depth frames. */
void h_expect_same_stack(const h_trace_t *a, uint32_t sa, const h_trace_t *b, uint32_t sb,
                         int min_depth);

bool h_file_exists(const char *path);
char *h_read_file(const char *path);

#endif
