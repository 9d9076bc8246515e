/* json_write.h - the one JSON writer of memlens: every JSON document the
 * tools print (the report, its "gpu" and advisor parts, the diff) is written
 * through it.
 *
 * High-level; may allocate (the writer and its nesting stack).
 *
 * What it guarantees:
 *   - Valid JSON whatever the input: strings are escaped as RFC 8259 asks
 *     (quote, backslash, control characters), bytes that are not valid UTF-8
 *     become \ufffd, and a double that is not finite is written as null.
 *   - Separators are the writer's job: callers open and close containers,
 *     name keys and write values; the writer puts ", " between items and
 *     ": " after a key. A caller that wants a line break before an item asks
 *     for it (ml_json_break); memlens' documents break their long lists one
 *     item per line so that diffs of two reports stay readable.
 *   - One number format. Integers are exact. Doubles are written with "%.6g"
 *     (six significant digits, then the shortest of fixed or exponent form):
 *     every double in memlens' documents is a ratio, a mean or a rate derived
 *     from integers that the same document also carries, and six digits
 *     (a relative error below 1e-6) are finer than the clocks and counts
 *     they come from. Times the trace holds as integer milliseconds are
 *     written from the integer as exact decimals ("12.345"), never through
 *     a double (ml_json_ms_as_s).
 *   - Output is buffered (64 KiB) and handed to the stream in large fwrite
 *     calls. Errors are sticky: the first failed write (ENOSPC on a full
 *     disk, EIO) or misuse (a value where a key belongs, an unbalanced end:
 *     -EINVAL) is kept, later calls do nothing, and ml_json_finish returns it.
 *
 * Thread-safety: a writer belongs to one thread at a time; writers on
 * different streams are independent. Out of memory: ml_json_new returns
 * -ENOMEM; a nesting stack that cannot grow makes the writer fail with
 * -ENOMEM (kept like a write error).
 */
#ifndef ML_JSON_WRITE_H
#define ML_JSON_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ml_json_s ml_json_t;

/** Creates a writer onto `out` (which stays the caller's: the writer never
 * closes it). Returns 0, or -ENOMEM. */
int ml_json_new(FILE *out, ml_json_t **w);

/** Writes what is buffered to the stream and flushes the stream. Returns 0,
 * or the writer's first error (a negative errno), or -EINVAL when a
 * container is still open. The writer stays usable for ml_json_free only. */
int ml_json_finish(ml_json_t *w);

/** Frees the writer (without flushing: call ml_json_finish first when the
 * output matters). NULL is allowed. */
void ml_json_free(ml_json_t *w);

/** The first error so far (a negative errno), or 0. */
int ml_json_error(const ml_json_t *w);

/* ------------------------------------------------------------------------- */
/* Text writers                                                              */
/* ------------------------------------------------------------------------- */

/* A text writer keeps its document in memory instead of writing it to a
 * stream: a caller renders a value once and copies it wherever the same
 * value recurs (ml_json_raw), which is how the report writes each distinct
 * frame object once however many stacks hold it. A value's text does not
 * depend on where it is written: the separators and line breaks around it
 * are the writer's that copies it. */

/** Creates a text writer. Returns 0, or -ENOMEM. Free it with ml_json_free. */
int ml_json_new_text(ml_json_t **w);

/** The document written so far and its length (no terminating NUL), valid
 * until the next call on w; NULL when the writer has failed (or is not a
 * text writer, or a container is still open: -EINVAL). */
const char *ml_json_text(ml_json_t *w, size_t *len);

/** Empties a text writer for a new document, clearing its error. */
void ml_json_text_reset(ml_json_t *w);

/** Writes a complete JSON value given as its text, as written by a text
 * writer (the caller answers for its validity), as the next value. */
void ml_json_raw(ml_json_t *w, const char *text, size_t len);

/* ------------------------------------------------------------------------- */
/* Structure                                                                 */
/* ------------------------------------------------------------------------- */

/** Opens an object or an array, as the next value. */
void ml_json_object(ml_json_t *w);
void ml_json_array(ml_json_t *w);
/** Closes the innermost open object or array. */
void ml_json_end(ml_json_t *w);

/** The next item of the current container (a key, a value, or the closing
 * bracket) starts on a new line indented by `indent` spaces, after the comma
 * when there is one. Before a closing bracket the break is written only when
 * the container has items, so an empty one stays "[]". */
void ml_json_break(ml_json_t *w, unsigned indent);

/** Items of the current container are separated by ',' alone (no space),
 * for long arrays of small numbers. */
void ml_json_tight(ml_json_t *w);

/** Names the next value of the current object. */
void ml_json_key(ml_json_t *w, const char *key);

/** Ends the document with a newline (after the root value is complete). */
void ml_json_newline(ml_json_t *w);

/* ------------------------------------------------------------------------- */
/* Values                                                                    */
/* ------------------------------------------------------------------------- */

void ml_json_u64(ml_json_t *w, uint64_t v);
void ml_json_i64(ml_json_t *w, int64_t v);
/** "%.6g"; null when v is not finite. */
void ml_json_double(ml_json_t *w, double v);
/** Milliseconds as seconds, exactly: 12345 -> 12.345, 7 -> 0.007. */
void ml_json_ms_as_s(ml_json_t *w, uint64_t ms);
void ml_json_bool(ml_json_t *w, bool v);
void ml_json_null(ml_json_t *w);
/** A string, escaped (see above); NULL writes null. */
void ml_json_str(ml_json_t *w, const char *s);

/* Key and value in one call, for objects. */
void ml_json_kv_u64(ml_json_t *w, const char *key, uint64_t v);
void ml_json_kv_i64(ml_json_t *w, const char *key, int64_t v);
void ml_json_kv_double(ml_json_t *w, const char *key, double v);
void ml_json_kv_ms_as_s(ml_json_t *w, const char *key, uint64_t ms);
void ml_json_kv_bool(ml_json_t *w, const char *key, bool v);
void ml_json_kv_null(ml_json_t *w, const char *key);
void ml_json_kv_str(ml_json_t *w, const char *key, const char *s);

#endif
