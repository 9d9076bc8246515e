/* export_util.c - UTF-8 made valid, the interning table and the
 * protocol-buffers encoder the exports share (export_internal.h). */
#include "export_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* UTF-8                                                                     */
/* ------------------------------------------------------------------------- */

size_t ml__utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
    else return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0; /* the NUL too: never read past it */
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

const char *ml__utf8_valid(const char *s, char **tmp) {
    *tmp = NULL;
    if (!s) return s;
    const unsigned char *u = (const unsigned char *)s;
    size_t bad = 0, len = 0;
    while (u[len]) {
        size_t n = ml__utf8_len(u + len);
        if (!n) bad++, n = 1;
        len += n;
    }
    if (!bad) return s;
    char *out = malloc(len + 2 * bad + 1); /* each bad byte grows to three */
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = ml__utf8_len(u + i);
        if (n) {
            memcpy(out + o, u + i, n);
            o += n;
            i += n;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    *tmp = out;
    return out;
}

/* ------------------------------------------------------------------------- */
/* Interning table                                                           */
/* ------------------------------------------------------------------------- */

static uint64_t fnv1a(const void *key, size_t len) {
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void ml__intern_init(ml__intern_t *t) {
    memset(t, 0, sizeof *t);
}

void ml__intern_destroy(ml__intern_t *t) {
    free(t->arena);
    free(t->ents);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

const void *ml__intern_key(const ml__intern_t *t, uint32_t i, uint32_t *len) {
    *len = t->ents[i].len;
    return t->arena + t->ents[i].off;
}

static bool same(const ml__intern_t *t, uint32_t i, const void *key, size_t len) {
    return t->ents[i].len == len && !memcmp(t->arena + t->ents[i].off, key, len);
}

/* Doubles the slot array and re-inserts every entry. */
static int grow_slots(ml__intern_t *t) {
    uint32_t n = t->nslots ? t->nslots * 2 : 1024;
    uint32_t *s = calloc(n, sizeof *s);
    if (!s) return -ENOMEM;
    for (uint32_t i = 0; i < t->n; i++) {
        uint64_t j = fnv1a(t->arena + t->ents[i].off, t->ents[i].len) & (n - 1);
        while (s[j]) j = (j + 1) & (n - 1);
        s[j] = i + 1;
    }
    free(t->slots);
    t->slots = s;
    t->nslots = n;
    return 0;
}

int64_t ml__intern(ml__intern_t *t, const void *key, size_t len, bool *added) {
    if (added) *added = false;
    if (t->oom || len > UINT32_MAX || t->n == UINT32_MAX - 1) goto oom;
    if ((uint64_t)(t->n + 1) * 2 > t->nslots && grow_slots(t) < 0) goto oom;
    uint64_t j = fnv1a(key, len) & (t->nslots - 1);
    while (t->slots[j]) {
        if (same(t, t->slots[j] - 1, key, len)) return t->slots[j] - 1;
        j = (j + 1) & (t->nslots - 1);
    }
    if (t->n == t->ents_cap) {
        uint32_t cap = t->ents_cap ? t->ents_cap * 2 : 256;
        void *e = realloc(t->ents, cap * sizeof *t->ents);
        if (!e) goto oom;
        t->ents = e;
        t->ents_cap = cap;
    }
    /* Each key starts on an 8-byte boundary, so keys made of words can be
     * read in place. */
    size_t room = (len + 1 + 7) & ~(size_t)7;
    if (t->arena_len + room > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap : 4096;
        while (cap < t->arena_len + room) cap *= 2;
        char *a = realloc(t->arena, cap);
        if (!a) goto oom;
        t->arena = a;
        t->arena_cap = cap;
    }
    if (len) memcpy(t->arena + t->arena_len, key, len);
    t->arena[t->arena_len + len] = 0; /* string keys read back as C strings */
    t->ents[t->n] = (struct ml__intern_ent_s){t->arena_len, (uint32_t)len};
    t->arena_len += room;
    t->slots[j] = ++t->n;
    if (added) *added = true;
    return t->n - 1;
oom:
    t->oom = true;
    return -ENOMEM;
}

int64_t ml__intern_str(ml__intern_t *t, const char *s) {
    if (!s) s = "";
    return ml__intern(t, s, strlen(s), NULL);
}

/* ------------------------------------------------------------------------- */
/* Protocol buffers                                                          */
/* ------------------------------------------------------------------------- */

/* Wire types (the low three bits of a tag). */
enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

void ml__pb_free(ml__pb_t *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static bool reserve(ml__pb_t *b, size_t more) {
    if (b->err) return false;
    if (b->len + more <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->err = -ENOMEM;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

/* Seven bits at a time, low first, the high bit set on all but the last. */
static void varint(ml__pb_t *b, uint64_t v) {
    if (!reserve(b, 10)) return;
    while (v >= 0x80) {
        b->p[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->p[b->len++] = (uint8_t)v;
}

static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void tag(ml__pb_t *b, uint32_t field, unsigned wire) {
    varint(b, (uint64_t)field << 3 | wire);
}

void ml__pb_uint(ml__pb_t *b, uint32_t field, uint64_t v) {
    if (!v) return;
    tag(b, field, WIRE_VARINT);
    varint(b, v);
}

void ml__pb_int(ml__pb_t *b, uint32_t field, int64_t v) {
    ml__pb_uint(b, field, (uint64_t)v);
}

void ml__pb_bool(ml__pb_t *b, uint32_t field, bool v) {
    ml__pb_uint(b, field, v ? 1 : 0);
}

void ml__pb_bytes(ml__pb_t *b, uint32_t field, const void *data, size_t len) {
    tag(b, field, WIRE_LEN);
    varint(b, len);
    if (!len || !reserve(b, len)) return;
    memcpy(b->p + b->len, data, len);
    b->len += len;
}

void ml__pb_message(ml__pb_t *b, uint32_t field, const ml__pb_t *msg) {
    if (msg->err) {
        if (!b->err) b->err = msg->err;
        return;
    }
    ml__pb_bytes(b, field, msg->p, msg->len);
}

void ml__pb_packed(ml__pb_t *b, uint32_t field, const uint64_t *v, size_t n) {
    if (!n) return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += varint_size(v[i]);
    tag(b, field, WIRE_LEN);
    varint(b, len);
    for (size_t i = 0; i < n; i++) varint(b, v[i]);
}
