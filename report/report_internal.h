/* report_internal.h - shared between the files of report/; never included
 * from another folder. The document's parts write through one JSON writer
 * (json_write.h), which keeps the separators between them. */
#ifndef ML_REPORT_INTERNAL_H
#define ML_REPORT_INTERNAL_H

#include "json_write.h"
#include "ml_advisor.h"
#include "ml_report.h"

/** A suggestion's "evidence" object (advice_json.c). */
void ml__report_json_evidence(ml_json_t *w, const ml_suggestion_t *s);

#endif
