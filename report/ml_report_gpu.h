/* ml_report_gpu.h - the GPU part of the JSON report (report/gpu_json.c). */
#ifndef ML_REPORT_GPU_H
#define ML_REPORT_GPU_H

#include <stdio.h>
#include "ml_analysis.h"

/** Writes the value of the report's "gpu" key alone: {"devices": [...], ...}
 * (docs/gpu.md describes every field). `a` must have been fed; "devices" is
 * empty when the trace has no GPU records. Returns 0, or a negative errno
 * (-ENOMEM, a write error of the stream). The report writes the same object
 * inside its document (report/json.c). */
int ml_report_json_gpu(FILE *out, const ml_analysis_t *a);

#endif
