/* ml_analysis.h - turning a stream of trace records into answers.
 *
 * High-level; may allocate. One analysis session consumes records in trace
 * order (from ml_reader_t or, live, from the collector) with memory
 * proportional to the live set and the number of distinct stacks, never to the
 * trace length. The viewer, the report and the CLI summary all read their
 * numbers from here; nothing in viewer/ or report/ computes a metric itself.
 *
 * Counting rules (DESIGN.md): every malloc-family call that returned a block
 * counts in alloc_calls and bytes_allocated, a realloc as one allocation of
 * its new size; realloc_calls counts realloc and reallocarray alone; a
 * temporary allocation is one freed before any other allocation happened
 * (heaptrack's definition); the peak is the maximum of live requested heap
 * bytes, mmap excluded.
 */
#ifndef ML_ANALYSIS_H
#define ML_ANALYSIS_H

#include <stdbool.h>
#include <stdint.h>
#include "ml_trace_io.h"

typedef struct {
    uint64_t alloc_calls, free_calls, realloc_calls, bytes_allocated, temporary_allocs;
    uint64_t mmap_calls, munmap_calls;
    uint64_t heap_bytes, heap_blocks;   /* live now (at the end once finished) */
    uint64_t peak_bytes;                /* maximum of heap_bytes */
    uint32_t peak_time_ms;
    uint64_t mmap_bytes, peak_mmap_bytes; /* live anonymous mappings */
    uint64_t unknown_frees;             /* frees of pointers never seen allocated */
    uint64_t calls_by_kind[ML_KIND_COUNT_];
    uint32_t last_time_ms;
    uint64_t sample_bytes;              /* 0 unless the trace was sampled */
    bool complete, truncated;
    ml_rec_end_t end;                   /* valid when complete */
} ml_totals_t;

typedef struct ml_analysis_s ml_analysis_t;

/** Creates an empty analysis session. Returns 0 or -ENOMEM. */
int ml_analysis_new(ml_analysis_t **out);

/** Consumes one record, in trace order. */
void ml_analysis_feed(ml_analysis_t *a, const ml_record_t *rec);

/** Hints that a record about block `ptr` will be fed soon: starts loading
 * the live-map slot it hashes to. The collector calls it a few events ahead,
 * which hides most cache misses of a large live set. */
void ml_analysis_prefetch(const ml_analysis_t *a, uint64_t ptr);

/** Reads a whole trace file into the session. Returns 0, or a negative errno
 * with a message in err. A truncated trace is not an error (totals say so). */
int ml_analysis_load(ml_analysis_t *a, const char *path, char *err, size_t errlen);

/** Running totals (final once the whole trace was fed). */
const ml_totals_t *ml_analysis_totals(const ml_analysis_t *a);

void ml_analysis_free(ml_analysis_t *a);

/** Formats a byte count as "12.3 MiB" into buf. */
const char *ml_fmt_bytes(uint64_t bytes, char *buf, size_t len);

#endif
