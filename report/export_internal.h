/* export_internal.h - shared by the exports of report/ (pprof.c,
 * speedscope.c); never included from another folder.
 *
 * Small tools: UTF-8 made valid (folded.c uses it too); an interning table
 * that gives each distinct key (any bytes) a dense index in insertion
 * order, for string tables, function and location tables and frame tables;
 * and a protocol-buffers encoder for the pprof profile (profile.proto), just
 * the wire types it needs.
 */
#ifndef ML_EXPORT_INTERNAL_H
#define ML_EXPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------- */
/* Interning table (export_util.c)                                           */
/* ------------------------------------------------------------------------- */

/* Keys are copied into one growing arena (each starting 8-byte aligned and
 * followed by a NUL, so string keys read back as C strings); entry i is the i-th distinct key
 * interned, so indexes are dense and stable. Open addressing on a 64-bit
 * hash (FNV-1a), the table at most half full. Out of memory is sticky:
 * ml__intern() returns -ENOMEM and so does every later call. */
typedef struct {
    char *arena;
    size_t arena_len, arena_cap;
    struct ml__intern_ent_s { size_t off; uint32_t len; } *ents;
    uint32_t n, ents_cap;
    uint32_t *slots; /* index + 1, 0: empty */
    uint32_t nslots;
    bool oom;
} ml__intern_t;

void ml__intern_init(ml__intern_t *t);
void ml__intern_destroy(ml__intern_t *t);
/** The index of `key` (len bytes), added when new (*added true then; added
 * may be NULL). Returns the index (>= 0) or -ENOMEM. */
int64_t ml__intern(ml__intern_t *t, const void *key, size_t len, bool *added);
/** Interns a NUL-terminated string (NULL is interned as ""). */
int64_t ml__intern_str(ml__intern_t *t, const char *s);
/** The key of entry i and its length. */
const void *ml__intern_key(const ml__intern_t *t, uint32_t i, uint32_t *len);

/* ------------------------------------------------------------------------- */
/* UTF-8 (export_util.c; json_write.c uses it too)                           */
/* ------------------------------------------------------------------------- */

/** Length of the valid UTF-8 sequence at s (shortest form, no surrogates, at
 * most U+10FFFF; 1 for ASCII, NUL included), or 0: the JSON writer's test. */
size_t ml__utf8_len(const unsigned char *s);
/** s when it is valid UTF-8 (or NULL); otherwise a copy in *tmp (free it)
 * with U+FFFD for each byte that starts no valid sequence, the JSON
 * writer's rule, or NULL when out of memory. proto3's `string` must be
 * UTF-8: Google's protobuf runtimes refuse a whole pprof profile whose
 * string table holds one invalid byte. */
const char *ml__utf8_valid(const char *s, char **tmp);

/* ------------------------------------------------------------------------- */
/* Protocol buffers, the wire format (export_util.c)                         */
/* ------------------------------------------------------------------------- */

/* A growing buffer of encoded fields. Every field is written with its tag;
 * a nested message is encoded into a buffer of its own and added with
 * ml__pb_message(). Scalars equal to 0 are left out, as proto3 encoders do
 * (a reader takes an absent field as 0). Out of memory is sticky (err). */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    int err; /* 0 or -ENOMEM */
} ml__pb_t;

void ml__pb_free(ml__pb_t *b);
/** Empties the buffer, keeping its memory. */
static inline void ml__pb_clear(ml__pb_t *b) { b->len = 0; }
/** Varint fields: uint64, int64 (two's complement, ten bytes when negative) and bool. */
void ml__pb_uint(ml__pb_t *b, uint32_t field, uint64_t v);
void ml__pb_int(ml__pb_t *b, uint32_t field, int64_t v);
void ml__pb_bool(ml__pb_t *b, uint32_t field, bool v);
/** A length-delimited field (a string, bytes), written even when empty. */
void ml__pb_bytes(ml__pb_t *b, uint32_t field, const void *data, size_t len);
/** A nested message. */
void ml__pb_message(ml__pb_t *b, uint32_t field, const ml__pb_t *msg);
/** A packed repeated varint field (nothing when n is 0). */
void ml__pb_packed(ml__pb_t *b, uint32_t field, const uint64_t *v, size_t n);

#endif
