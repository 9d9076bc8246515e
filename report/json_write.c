/* json_write.c - the JSON writer (json_write.h).
 *
 * The writer keeps one byte of state per open container (object or array,
 * has it items yet, tight separators) on a stack that grows with the nesting:
 * the report's call tree is as deep as the program's deepest stack, so the
 * depth has no fixed bound. Before each key or value it writes what the
 * position needs: nothing after a key, a comma between items, then either
 * the line break the caller asked for or a space.
 *
 * Output goes to a 64 KiB buffer that is handed to the stream whole: the
 * report used to call fputc and fprintf per token, and that cost a sixth of
 * `memlens report --json`. Integers are converted by hand for the same
 * reason; doubles go through snprintf, which is exact and rare enough.
 */
#include "export_internal.h"
#include "json_write.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BUF_BYTES (64 * 1024)

enum {
    L_OBJECT = 1, /* else an array */
    L_ITEMS = 2,  /* at least one item written */
    L_TIGHT = 4,  /* ',' between items, no space */
};

struct ml_json_s {
    FILE *out;        /* NULL: a text writer (ml_json_new_text) */
    char *text;       /* a text writer's document, flushed from buf */
    size_t text_len, text_cap;
    int err;
    bool after_key;   /* a key was written; its value comes next */
    bool root_done;   /* the root value is complete */
    bool newline_done;
    int brk;          /* indent of the line break before the next item; -1: none */
    uint8_t *lv;      /* one entry per open container */
    size_t depth, cap_depth;
    size_t len;
    char buf[BUF_BYTES];
};

/* ------------------------------------------------------------------------- */
/* Output                                                                    */
/* ------------------------------------------------------------------------- */

static void fail(ml_json_t *w, int err) {
    if (!w->err) w->err = err;
}

/* A text writer keeps what it flushes. */
static void keep(ml_json_t *w, const char *s, size_t n) {
    if (n > w->text_cap - w->text_len) {
        size_t cap = w->text_cap ? w->text_cap : 1024;
        while (cap - w->text_len < n) cap *= 2;
        char *t = realloc(w->text, cap);
        if (!t) {
            fail(w, -ENOMEM);
            return;
        }
        w->text = t;
        w->text_cap = cap;
    }
    memcpy(w->text + w->text_len, s, n);
    w->text_len += n;
}

static void flush(ml_json_t *w) {
    if (!w->len || w->err) {
        w->len = 0;
        return;
    }
    if (!w->out) {
        keep(w, w->buf, w->len);
        w->len = 0;
        return;
    }
    errno = 0;
    if (fwrite(w->buf, 1, w->len, w->out) != w->len) fail(w, -(errno ? errno : EIO));
    w->len = 0;
}

static void put(ml_json_t *w, const char *s, size_t n) {
    if (n > BUF_BYTES - w->len) {
        flush(w);
        if (n > BUF_BYTES) { /* larger than the buffer: straight through */
            if (!w->out) {
                if (!w->err) keep(w, s, n);
                return;
            }
            errno = 0;
            if (!w->err && fwrite(s, 1, n, w->out) != n) fail(w, -(errno ? errno : EIO));
            return;
        }
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static inline void putc1(ml_json_t *w, char c) {
    if (w->len == BUF_BYTES) flush(w);
    w->buf[w->len++] = c;
}

static void put_u64(ml_json_t *w, uint64_t v) {
    char t[20];
    size_t i = sizeof t;
    do {
        t[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(w, t + i, sizeof t - i);
}

/* ------------------------------------------------------------------------- */
/* Strings                                                                   */
/* ------------------------------------------------------------------------- */

/* Bytes that go through as they are: printable ASCII but the quote and the
 * backslash. A table, because strings (function names, file and module
 * paths) are most of a report's bytes. */
#define P16 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
static const uint8_t plain_byte[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00: control */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10: control */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20: '"' */
    P16,                                            /* 0x30 */
    P16,                                            /* 0x40 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50: '\\' */
    P16,                                            /* 0x60 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, /* 0x70: DEL */
    /* 0x80-0xff: UTF-8, validated */
};
#undef P16

static inline bool plain(unsigned char c) {
    return plain_byte[c];
}

static void put_quoted(ml_json_t *w, const char *str) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    putc1(w, '"');
    while (*s) {
        const unsigned char *run = s;
        while (plain(*s)) s++;
        if (s > run) put(w, (const char *)run, (size_t)(s - run));
        unsigned c = *s;
        if (!c) break;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(w, e, 2);
            s++;
        } else if (c < 0x20 || c == 0x7f) {
            if (c == '\n') put(w, "\\n", 2);
            else if (c == '\t') put(w, "\\t", 2);
            else if (c == '\r') put(w, "\\r", 2);
            else {
                char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                put(w, e, 6);
            }
            s++;
        } else {
            size_t n = ml__utf8_len(s); /* export_util.c: the exports' test too */
            if (n == 2 && c == 0xc2 && s[1] <= 0x9f) {
                /* A C1 control (U+0080-009F; C2 9B is CSI) escaped like a
                 * C0 one: `--json -` may be a terminal. */
                char e[6] = {'\\', 'u', '0', '0', hex[s[1] >> 4], hex[s[1] & 15]};
                put(w, e, 6);
                s += 2;
            } else if (n) {
                put(w, (const char *)s, n);
                s += n;
            } else {
                put(w, "\\ufffd", 6);
                s++;
            }
        }
    }
    putc1(w, '"');
}

/* ------------------------------------------------------------------------- */
/* Separators                                                                */
/* ------------------------------------------------------------------------- */

/* Writes what comes before a key (is_key) or a value; false when the writer
 * has failed or the call is misplaced. */
static bool before(ml_json_t *w, bool is_key) {
    if (w->err) return false;
    if (!w->depth) {
        if (is_key || w->root_done) {
            fail(w, -EINVAL);
            return false;
        }
        return true;
    }
    uint8_t *l = &w->lv[w->depth - 1];
    if (*l & L_OBJECT) {
        if (!is_key) {
            if (!w->after_key) {
                fail(w, -EINVAL);
                return false;
            }
            w->after_key = false;
            return true;
        }
        if (w->after_key) {
            fail(w, -EINVAL);
            return false;
        }
    } else if (is_key) {
        fail(w, -EINVAL);
        return false;
    }
    if (*l & L_ITEMS) putc1(w, ',');
    if (w->brk >= 0) {
        putc1(w, '\n');
        for (int i = 0; i < w->brk; i++) putc1(w, ' ');
        w->brk = -1;
    } else if ((*l & (L_ITEMS | L_TIGHT)) == L_ITEMS) {
        putc1(w, ' ');
    }
    *l |= L_ITEMS;
    return true;
}

/* After a scalar value: at the root, the document's value is complete. */
static void after(ml_json_t *w) {
    if (!w->depth) w->root_done = true;
}

/* ------------------------------------------------------------------------- */
/* Public                                                                    */
/* ------------------------------------------------------------------------- */

int ml_json_new(FILE *out, ml_json_t **wp) {
    ml_json_t *w = malloc(sizeof *w);
    if (!w) return -ENOMEM;
    w->out = out;
    w->text = NULL;
    w->text_len = w->text_cap = 0;
    w->err = 0;
    w->after_key = w->root_done = w->newline_done = false;
    w->brk = -1;
    w->lv = NULL;
    w->depth = w->cap_depth = 0;
    w->len = 0;
    *wp = w;
    return 0;
}

int ml_json_new_text(ml_json_t **w) {
    return ml_json_new(NULL, w);
}

const char *ml_json_text(ml_json_t *w, size_t *len) {
    *len = 0;
    if (w->out || w->depth || w->after_key) fail(w, -EINVAL);
    flush(w);
    if (w->err) return NULL;
    if (!w->text_len) return "";
    *len = w->text_len;
    return w->text;
}

void ml_json_text_reset(ml_json_t *w) {
    if (w->out) {
        fail(w, -EINVAL);
        return;
    }
    w->err = 0;
    w->after_key = w->root_done = w->newline_done = false;
    w->brk = -1;
    w->depth = 0;
    w->len = 0;
    w->text_len = 0;
}

int ml_json_finish(ml_json_t *w) {
    if (w->depth || w->after_key) fail(w, -EINVAL);
    flush(w);
    if (!w->out) return w->err;
    errno = 0;
    if (!w->err && (fflush(w->out) != 0 || ferror(w->out))) fail(w, -(errno ? errno : EIO));
    return w->err;
}

void ml_json_free(ml_json_t *w) {
    if (!w) return;
    free(w->lv);
    free(w->text);
    free(w);
}

int ml_json_error(const ml_json_t *w) {
    return w->err;
}

static void open_container(ml_json_t *w, uint8_t kind, char c) {
    if (!before(w, false)) return;
    if (w->depth == w->cap_depth) {
        size_t ncap = w->cap_depth ? w->cap_depth * 2 : 64;
        uint8_t *n = realloc(w->lv, ncap);
        if (!n) {
            fail(w, -ENOMEM);
            return;
        }
        w->lv = n;
        w->cap_depth = ncap;
    }
    w->lv[w->depth++] = kind;
    putc1(w, c);
}

void ml_json_object(ml_json_t *w) {
    open_container(w, L_OBJECT, '{');
}

void ml_json_array(ml_json_t *w) {
    open_container(w, 0, '[');
}

void ml_json_end(ml_json_t *w) {
    if (w->err) return;
    if (!w->depth || w->after_key) {
        fail(w, -EINVAL);
        return;
    }
    uint8_t l = w->lv[--w->depth];
    if (w->brk >= 0 && (l & L_ITEMS)) {
        putc1(w, '\n');
        for (int i = 0; i < w->brk; i++) putc1(w, ' ');
    }
    w->brk = -1;
    putc1(w, (l & L_OBJECT) ? '}' : ']');
    after(w);
}

void ml_json_break(ml_json_t *w, unsigned indent) {
    if (w->err) return;
    if (!w->depth || w->after_key || indent > 64) {
        fail(w, -EINVAL);
        return;
    }
    w->brk = (int)indent;
}

void ml_json_tight(ml_json_t *w) {
    if (w->err) return;
    if (!w->depth) {
        fail(w, -EINVAL);
        return;
    }
    w->lv[w->depth - 1] |= L_TIGHT;
}

void ml_json_key(ml_json_t *w, const char *key) {
    if (!before(w, true)) return;
    put_quoted(w, key ? key : "");
    put(w, ": ", 2);
    w->after_key = true;
}

void ml_json_newline(ml_json_t *w) {
    if (w->err) return;
    if (!w->root_done || w->newline_done) {
        fail(w, -EINVAL);
        return;
    }
    w->newline_done = true;
    putc1(w, '\n');
}

void ml_json_u64(ml_json_t *w, uint64_t v) {
    if (!before(w, false)) return;
    put_u64(w, v);
    after(w);
}

void ml_json_i64(ml_json_t *w, int64_t v) {
    if (!before(w, false)) return;
    if (v < 0) putc1(w, '-');
    put_u64(w, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
    after(w);
}

void ml_json_double(ml_json_t *w, double v) {
    if (!before(w, false)) return;
    if (fabs(v) < 1e6 && v == (double)(int64_t)v && !(v == 0 && signbit(v))) {
        /* An integer of at most six digits: "%.6g" writes it as one (and
         * snprintf was most of the report's doubles, mostly whole means). */
        if (v < 0) putc1(w, '-');
        put_u64(w, (uint64_t)fabs(v));
    } else if (isfinite(v)) {
        char t[32];
        int n = snprintf(t, sizeof t, "%.6g", v);
        put(w, t, (size_t)n);
    } else {
        put(w, "null", 4);
    }
    after(w);
}

void ml_json_ms_as_s(ml_json_t *w, uint64_t ms) {
    if (!before(w, false)) return;
    put_u64(w, ms / 1000);
    unsigned f = (unsigned)(ms % 1000);
    char t[4] = {'.', (char)('0' + f / 100), (char)('0' + f / 10 % 10), (char)('0' + f % 10)};
    put(w, t, 4);
    after(w);
}

void ml_json_bool(ml_json_t *w, bool v) {
    if (!before(w, false)) return;
    if (v) put(w, "true", 4);
    else put(w, "false", 5);
    after(w);
}

void ml_json_null(ml_json_t *w) {
    if (!before(w, false)) return;
    put(w, "null", 4);
    after(w);
}

void ml_json_str(ml_json_t *w, const char *s) {
    if (!before(w, false)) return;
    if (s) put_quoted(w, s);
    else put(w, "null", 4);
    after(w);
}

void ml_json_raw(ml_json_t *w, const char *text, size_t len) {
    if (!before(w, false)) return;
    put(w, text, len);
    after(w);
}

void ml_json_kv_u64(ml_json_t *w, const char *key, uint64_t v) {
    ml_json_key(w, key);
    ml_json_u64(w, v);
}

void ml_json_kv_i64(ml_json_t *w, const char *key, int64_t v) {
    ml_json_key(w, key);
    ml_json_i64(w, v);
}

void ml_json_kv_double(ml_json_t *w, const char *key, double v) {
    ml_json_key(w, key);
    ml_json_double(w, v);
}

void ml_json_kv_ms_as_s(ml_json_t *w, const char *key, uint64_t ms) {
    ml_json_key(w, key);
    ml_json_ms_as_s(w, ms);
}

void ml_json_kv_bool(ml_json_t *w, const char *key, bool v) {
    ml_json_key(w, key);
    ml_json_bool(w, v);
}

void ml_json_kv_null(ml_json_t *w, const char *key) {
    ml_json_key(w, key);
    ml_json_null(w);
}

void ml_json_kv_str(ml_json_t *w, const char *key, const char *s) {
    ml_json_key(w, key);
    ml_json_str(w, s);
}
