/* ml_exit_scan.h - the collector's exit-time reachability scan (exit_scan.c). */
#ifndef ML_EXIT_SCAN_H
#define ML_EXIT_SCAN_H

#include <stdint.h>
#include <sys/types.h>
#include "ml_analysis.h"

typedef void (*ml_exit_scan_emit_t)(void *ctx, const ml_record_t *rec);

/** Classifies the blocks live in `an` (the process' analysis, fed up to its
 * exit record) by scanning process `pid`'s memory, and emits one
 * ML_T_BLOCK_REACH record per block and an ML_T_REACH_SCAN summary (only the
 * summary, with the error, when the scan fails). Returns 0 or a negative errno. */
int ml_exit_scan(pid_t pid, ml_analysis_t *an, ml_exit_scan_emit_t emit, void *ctx,
                 uint32_t time_ms, uint32_t thread);

#endif
