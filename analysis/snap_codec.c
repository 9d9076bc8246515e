/* snap_codec.c - the byte codec of analysis snapshots (snap_codec.h). */
#include "snap_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Writing                                                                   */
/* ------------------------------------------------------------------------- */

/* Hands the buffered bytes to the spill hook and empties the buffer. */
static bool spill(ml__obuf_t *b) {
    if (!b->len) return true;
    int rc = b->spill(b->spill_ctx, b->p, b->len);
    if (rc < 0) {
        b->err = rc;
        b->oom = true;
        return false;
    }
    b->spilled += b->len;
    b->len = 0;
    return true;
}

/* Room for `more` bytes at b->p + b->len: the buffer grows, or a spilling
 * one is emptied first (it then fits any put but ml__put_bytes' long
 * strings, which that function hands on itself). */
static bool room(ml__obuf_t *b, size_t more) {
    if (b->oom) return false;
    if (b->len + more <= b->cap) return true;
    if (b->spill) {
        if (!b->p) {
            b->p = malloc(ML__SPILL_AT);
            if (!b->p) {
                b->oom = true;
                return false;
            }
            b->cap = ML__SPILL_AT;
        }
        return spill(b) && more <= b->cap;
    }
    size_t cap = b->cap ? b->cap * 2 : 65536;
    while (cap < b->len + more) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void ml__obuf_spill_init(ml__obuf_t *b, ml__spill_fn fn, void *ctx) {
    *b = (ml__obuf_t){.spill = fn, .spill_ctx = ctx};
}

int ml__obuf_spill_finish(ml__obuf_t *b, bool ok, uint64_t *total) {
    if (ok && !b->oom) spill(b);
    int rc = b->err ? b->err : b->oom ? -ENOMEM : 0;
    if (ok && rc == 0) *total = b->spilled;
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    return rc;
}

void ml__put_u_slow(ml__obuf_t *b, uint64_t v) {
    if (!room(b, 10)) return;
    while (v >= 0x80) {
        b->p[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->p[b->len++] = (uint8_t)v;
}

void ml__put_s(ml__obuf_t *b, int64_t v) {
    ml__put_u(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void ml__put_d(ml__obuf_t *b, double d) {
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    if (!room(b, 8)) return;
    for (int i = 0; i < 8; i++) b->p[b->len++] = (uint8_t)(v >> (8 * i));
}

void ml__put_bytes(ml__obuf_t *b, const void *s, size_t n) {
    ml__put_u(b, n);
    if (!n || b->oom) return;
    /* Bytes that do not fit a spilling buffer even when it is empty (a
     * long string) go to the hook straight from the caller's memory, after
     * the bytes buffered before them. */
    if (b->spill && b->len + n > ML__SPILL_AT) {
        if (!spill(b)) return;
        if (n > ML__SPILL_AT) {
            int rc = b->spill(b->spill_ctx, s, n);
            if (rc < 0) {
                b->err = rc;
                b->oom = true;
            } else {
                b->spilled += n;
            }
            return;
        }
    }
    if (room(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    }
}

void ml__put_str(ml__obuf_t *b, const char *s) {
    s = s ? s : "";
    ml__put_bytes(b, s, strlen(s));
}

/* ------------------------------------------------------------------------- */
/* Reading                                                                   */
/* ------------------------------------------------------------------------- */

bool ml__snap_bad(ml__ibuf_t *b, const char *why) {
    if (!b->bad) b->why = why;
    b->bad = true;
    return false;
}

uint64_t ml__get_u(ml__ibuf_t *b) {
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64 && !b->bad; shift += 7) {
        if (b->pos >= b->len) return ml__snap_bad(b, "it ends early"), 0;
        uint8_t c = b->p[b->pos++];
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return x;
    }
    ml__snap_bad(b, "a number is too long");
    return 0;
}

uint64_t ml__get_max(ml__ibuf_t *b, uint64_t max, const char *what) {
    uint64_t v = ml__get_u(b);
    if (v > max) ml__snap_bad(b, what);
    return v > max ? 0 : v;
}

int64_t ml__get_s(ml__ibuf_t *b) {
    uint64_t v = ml__get_u(b);
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

double ml__get_d(ml__ibuf_t *b) {
    if (b->bad || b->len - b->pos < 8) return ml__snap_bad(b, "it ends early"), 0.0;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)b->p[b->pos++] << (8 * i);
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

uint64_t ml__get_count(ml__ibuf_t *b, size_t min_bytes, const char *what) {
    uint64_t n = ml__get_u(b);
    if (!b->bad && n > (b->len - b->pos) / min_bytes) return ml__snap_bad(b, what), 0;
    return b->bad ? 0 : n;
}

char *ml__get_str(ml__ibuf_t *b) {
    uint64_t n = ml__get_count(b, 1, "a string is longer than the snapshot");
    if (b->bad) return NULL;
    char *s = malloc(n + 1);
    if (!s) return ml__snap_bad(b, "out of memory"), NULL;
    memcpy(s, b->p + b->pos, n);
    s[n] = '\0';
    b->pos += n;
    return s;
}
