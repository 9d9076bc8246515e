/* trace_internal.h - what the writer, the reader and the snapshot code of
 * ml_trace_io share: fixed-width little-endian fields, LEB128 sign folding,
 * the checksum of the record blocks, and the chunk size the writer aims at.
 *
 * Internal to trace/ (STYLE 2): never included from another folder. Static
 * inline, because every one of these runs per field of every record.
 */
#ifndef ML_TRACE_INTERNAL_H
#define ML_TRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ML__CHUNK_TARGET (4u << 20) /* the writer flushes a chunk once this many raw bytes wait */

/* ------------------------------------------------------------------------- */
/* Little-endian fixed-width fields (file header, chunk headers, trailer)    */
/* ------------------------------------------------------------------------- */

static inline void ml__put_le16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void ml__put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ml__put_le64(uint8_t *p, uint64_t v) {
    ml__put_le32(p, (uint32_t)v);
    ml__put_le32(p + 4, (uint32_t)(v >> 32));
}
static inline uint16_t ml__get_le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t ml__get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ml__get_le64(const uint8_t *p) {
    return ml__get_le32(p) | (uint64_t)ml__get_le32(p + 4) << 32;
}

/* ------------------------------------------------------------------------- */
/* Signed varints                                                            */
/* ------------------------------------------------------------------------- */

static inline uint64_t ml__zigzag(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t ml__unzigzag(uint64_t v) {
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* ------------------------------------------------------------------------- */
/* The checksum of the bytes before the snapshot                             */
/* ------------------------------------------------------------------------- */

/* One 64-bit hash per written block (the file header, each chunk with its
 * header), folded in order. Word at a time, several GB/s: checking a trace
 * costs a read of it, not a decode. The writer keeps the running value and
 * puts it in the trailer; ml_reader_snapshot() recomputes it. */
static inline uint64_t ml__block_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 32);
}

static inline uint64_t ml__fold_hash(uint64_t acc, const uint8_t *p, size_t n) {
    return (acc ^ ml__block_hash(p, n)) * 0x100000001b3ull + 0x2545f4914f6cdd1dull;
}

#endif
