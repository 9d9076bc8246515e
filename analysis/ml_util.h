/* ml_util.h - small helpers shared by the analysis layer and the tools above
 * it: byte counts for people, array growth, and the allocator hook.
 *
 * High-level (analysis/); may allocate. Nothing here knows a session: the
 * analysis files, the simulator (analysis/sim), cli/, report/ and viewer/ all
 * use these without depending on each other.
 */
#ifndef ML_UTIL_H
#define ML_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Formats a byte count as "512 B" or "12.3 MiB" (binary units up to TiB)
 * into buf (len bytes, truncated to fit) and returns buf. Allocates nothing;
 * thread-safe. */
const char *ml_fmt_bytes(uint64_t bytes, char *buf, size_t len);

/** Grows the array *arr of `elem`-byte elements, whose capacity is *cap, to
 * hold at least `need` elements: the capacity doubles (from 64) until it
 * does. The new elements' bytes are set to `fill` (0 or 0xff, say).
 * Returns 0 (*arr and *cap updated, or untouched when need <= *cap) or
 * -ENOMEM (nothing changed; also when need does not fit a uint32_t).
 * The array is the caller's (free() it); not thread-safe for one array. */
int ml_grow(void **arr, uint32_t *cap, uint64_t need, size_t elem, int fill);

/* ------------------------------------------------------------------------- */
/* Huge pages                                                                */
/* ------------------------------------------------------------------------- */

/* Tables from this size on ask for transparent huge pages. */
#define ML_HUGE_TABLE_BYTES ((size_t)4 << 20)

/** Asks for transparent huge pages for the whole 2 MiB pages inside
 * [p, p + len) when len is at least ML_HUGE_TABLE_BYTES (madvise
 * MADV_HUGEPAGE; a kernel without THP, or with it off, ignores it). The
 * analysis' large tables are probed at random places: with 4 KiB pages
 * nearly every probe of a table of millions of entries misses the TLB, and
 * first touching it costs a page fault per 4 KiB (the advisor's replays of a
 * 2 M-call trace spent about 10 % of their CPU time on both). The hooks'
 * realloc and ml_huge_alloc call it for what they allocate; tables grown
 * with plain realloc() call it themselves. */
void ml_advise_huge(void *p, size_t len);

/** A large array, zeroed when `zero`: from 1 MiB in whole 2 MiB pages at a
 * 2 MiB boundary, advised for transparent huge pages (zeroed arrays over 32
 * MiB come from calloc, advised inside). For arrays written or probed right
 * away (the sites, their frames, the call tree's nodes, the advisor's and the
 * maps' tables): the first touch of each 4 KiB page is a page fault, slow on
 * a VM. free() and realloc() take it. NULL when out of memory. */
void *ml_huge_alloc(size_t bytes, bool zero);

/* ------------------------------------------------------------------------- */
/* The allocator hook (STYLE 23)                                             */
/* ------------------------------------------------------------------------- */

/* What the analysis layer's growing tables allocate with: the hash maps
 * (ml_map.h) and the arrays of ml_grow(). A test replaces them to make an
 * allocation fail at a chosen point (libuv's uv_replace_allocator, for the
 * same purpose) and checks that the loss is counted and reported, never
 * silent. Everything else allocates with libc. What the hooks return is
 * released with free(): they wrap libc's functions (with a budget, say),
 * they do not replace the heap. */
typedef struct {
    void *(*calloc)(size_t n, size_t size);
    void *(*realloc)(void *p, size_t size);
} ml_alloc_hooks_t;

/** Replaces the hooks (NULL, or a NULL member: libc's). Process-wide and not
 * thread-safe: for tests, set before the maps they concern are in use. */
void ml_set_alloc_hooks(const ml_alloc_hooks_t *hooks);

/* The current hooks (never with a NULL member). */
extern ml_alloc_hooks_t ml__alloc;

#endif
