/* gpu_json.c - the report's "gpu" object. Placeholder until the CUPTI
 * collector's analysis fills it (issue 5): no devices. */
#include "ml_report_gpu.h"

void ml_report_json_gpu(FILE *out, const ml_analysis_t *a) {
    (void)a;
    fputs("{\"devices\": []}", out);
}
