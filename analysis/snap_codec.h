/* snap_codec.h - the byte codec of analysis snapshots: what snapshot.c writes
 * a session with and gpu_snapshot.c its GPU state. Internal to analysis/.
 *
 * The lowest layer of the snapshot: it knows bytes, not sessions. LEB128
 * varints (zig-zag for signed values), doubles as their 64 bits little end
 * first, byte strings length first.
 *
 * Errors are sticky, so a writer or a reader checks once at the end:
 *   - writing: out of memory (or a failed spill, below) sets `oom` and
 *     later puts do nothing;
 *   - reading: every get checks the bytes left; the first failed check marks
 *     the buffer bad, with its reason in `why`, and later gets return 0.
 * Ownership: an output buffer's bytes are malloc'd and belong to its user
 * (free(b.p)); an input buffer only points at the caller's bytes. Neither is
 * shared between threads.
 */
#ifndef ML_SNAP_CODEC_H
#define ML_SNAP_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a spilling buffer hands its bytes: 0, or a negative errno that
 * stops the writing (it becomes the buffer's `err`). */
typedef int (*ml__spill_fn)(void *ctx, const void *p, size_t n);

/* Bytes a spilling buffer holds at most before it hands them on. */
#define ML__SPILL_AT (1u << 20)

/* Writing: a growing buffer (start from {0}), or, with a spill hook
 * (ml__obuf_spill_init), a fixed one of ML__SPILL_AT bytes that hands its
 * bytes to the hook whenever it is full and starts again from len 0: the
 * snapshot of a big live heap is streamed to the trace that way instead of
 * being held whole (issue 12: the collector's peak RSS). The bytes the hook
 * gets, in order, are exactly those the growing buffer would hold. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    bool oom;
    ml__spill_fn spill; /* NULL: the buffer grows */
    void *spill_ctx;
    int err;            /* the first error of `spill` (oom is then set too) */
    uint64_t spilled;   /* bytes handed to `spill` so far */
} ml__obuf_t;

/* Makes b (not used yet) a spilling buffer; its memory comes with the
 * first put. */
void ml__obuf_spill_init(ml__obuf_t *b, ml__spill_fn fn, void *ctx);
/* Ends a spilling buffer: when `ok`, hands what is left to the hook and
 * sets *total to every byte handed; frees the buffer either way. Returns 0,
 * the hook's error, or -ENOMEM. */
int ml__obuf_spill_finish(ml__obuf_t *b, bool ok, uint64_t *total);

/* ml__put_u when the buffer may have to grow or spill (or has failed). */
void ml__put_u_slow(ml__obuf_t *b, uint64_t v);

/* Inline: a snapshot puts seven of them per block live at the end
 * (millions, for a program that exits with its heap), and a call per
 * varint was a third of writing the snapshot. A spilling buffer's `cap` is
 * its size, so the same check sends the put to the slow path, which
 * spills, when the buffer is full. */
static inline void ml__put_u(ml__obuf_t *b, uint64_t v) {
    if (__builtin_expect(b->len + 10 > b->cap || b->oom, 0)) {
        ml__put_u_slow(b, v);
        return;
    }
    uint8_t *p = b->p + b->len, *q = p;
    while (v >= 0x80) {
        *q++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *q++ = (uint8_t)v;
    b->len += (size_t)(q - p);
}
void ml__put_s(ml__obuf_t *b, int64_t v);
void ml__put_d(ml__obuf_t *b, double d);
void ml__put_bytes(ml__obuf_t *b, const void *s, size_t n);
/* A string as its bytes (NULL as ""). */
void ml__put_str(ml__obuf_t *b, const char *s);

/* Reading: {.p = bytes, .len = n}. */
typedef struct {
    const uint8_t *p;
    size_t len, pos;
    bool bad;
    const char *why; /* the first check that failed */
} ml__ibuf_t;

/* Marks b bad for `why` (the first reason stays); returns false. */
bool ml__snap_bad(ml__ibuf_t *b, const char *why);
uint64_t ml__get_u(ml__ibuf_t *b);
/* An unsigned value that must be at most max (bad, and 0, otherwise). */
uint64_t ml__get_max(ml__ibuf_t *b, uint64_t max, const char *what);
int64_t ml__get_s(ml__ibuf_t *b);
double ml__get_d(ml__ibuf_t *b);
/* A count of items that take at least `min_bytes` each in the snapshot:
 * never more than the bytes left could hold, so that a corrupt count cannot
 * make the reader ask for memory. */
uint64_t ml__get_count(ml__ibuf_t *b, size_t min_bytes, const char *what);
/* A malloc'd NUL-terminated copy of a string (NULL, and b marked bad, when
 * the bytes are damaged or memory runs out). */
char *ml__get_str(ml__ibuf_t *b);

#endif
