/* report_internal.h - shared between the files of report/; never included
 * from another folder. The document's parts write through one JSON writer
 * (json_write.h), which keeps the separators between them. */
#ifndef ML_REPORT_INTERNAL_H
#define ML_REPORT_INTERNAL_H

#include "json_write.h"
#include "ml_advisor.h"
#include "ml_report.h"

/** A frame list: [{function, file, line (null without debug information),
 * module, address[, inlined: true]}], innermost first. The diff document
 * leaves "inlined" out (`inlined` false). (json.c) */
void ml__json_frames(ml_json_t *w, const ml_frame_t *f, size_t n, bool inlined);

/** A site object's keys, from "id" to "suppressed", without the braces:
 * the merged report adds "by_process" after them (json_merged.c). (json.c) */
void ml__json_site_fields(ml_json_t *w, const ml_site_t *s);

/** The HTML page's table of frames and stacks (docs/html-report.md, "The
 * page's data"), for the merged report's page (json_merged.c): each frame
 * and each stack written once, at the end of the document, and named by
 * index where they are used. NULL when out of memory. (json.c) */
typedef struct ml__ftab ml__ftab_t;
ml__ftab_t *ml__ftab_new_page(void);
void ml__ftab_delete(ml__ftab_t *t);
/** -ENOMEM once the table could not grow (its indices are then wrong), else 0. */
int ml__ftab_error(const ml__ftab_t *t);
/** A row's frames: "frames": [...], or with t (the page's form) "stack":
 * its node in the stack table (-1: no frames). */
void ml__json_frames_ft(ml_json_t *w, ml__ftab_t *t, const ml_frame_t *f, uint32_t n);
/** ml__json_site_fields, with the site's frames as ml__json_frames_ft writes them. */
void ml__json_site_fields_ft(ml_json_t *w, ml__ftab_t *t, const ml_site_t *s);
/** "frame_table" and "stack_table". */
void ml__json_frame_tables(ml_json_t *w, const ml__ftab_t *t);

/** The "flame" key and its nested nodes (pruned call tree nodes v[0..n),
 * n = 0: an empty "all"). Returns 0 or -ENOMEM. (json.c) */
int ml__json_flame(ml_json_t *w, const ml_calltree_node_t *v, size_t n);
/* "flame_pruned": the whole tree's node count and the flame tree's. */
void ml__json_flame_pruned(ml_json_t *w, size_t nodes, size_t kept);

/** The leak totals' keys of "leaks", from "bytes" to "lost_blocks". (json.c) */
void ml__json_leak_counts(ml_json_t *w, const ml_leaks_t *L);

/** The "histograms" key and its object. (json.c) */
void ml__json_histograms(ml_json_t *w, const ml_histograms_t *h);

/** A "threads" entry's keys, without the braces. (json.c) */
void ml__json_thread_fields(ml_json_t *w, const ml_thread_stats_t *t);

/** A frame in the text summary: its short name and file:line (or its
 * module without debug information), no newline. (text.c) */
void ml__text_where(FILE *o, const ml_frame_t *f);

/** A site in the text summary: the frame that names it (its headline) and
 * two callers, one per line. (text.c) */
void ml__text_site_lines(FILE *o, const ml_site_t *s);

/** The value of the report's "gpu" key (gpu_json.c). */
void ml__report_json_gpu(ml_json_t *w, const ml_analysis_t *a);

/** The advisor's keys "suggestions", "policies" and "advisor", one per line,
 * in the report's object; with adv NULL, the GPU suggestions of `a` alone
 * (advice_json.c). */
void ml__report_json_advice(ml_json_t *w, const ml_analysis_t *a, const struct ml_advice_s *adv);

/** A suggestion's "evidence" object (advice_json.c). */
void ml__report_json_evidence(ml_json_t *w, const ml_suggestion_t *s);

#endif
