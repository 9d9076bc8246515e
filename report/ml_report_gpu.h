/* ml_report_gpu.h - the GPU part of the JSON report (report/gpu_json.c). */
#ifndef ML_REPORT_GPU_H
#define ML_REPORT_GPU_H

#include <stdio.h>
#include "ml_analysis.h"

/** Writes the value of the report's "gpu" key: {"devices": [...], ...}
 * (docs/gpu.md describes every field). `a` must have been fed; "devices" is
 * empty when the trace has no GPU records. Never fails; stdio errors show on
 * the stream. */
void ml_report_json_gpu(FILE *out, const ml_analysis_t *a);

#endif
