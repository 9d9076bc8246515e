/* ml_util.h - small helpers shared by the analysis layer and the tools above
 * it: byte counts for people.
 *
 * High-level (analysis/); may allocate. Nothing here knows a session: the
 * analysis files, the simulator (analysis/sim), cli/, report/ and viewer/ all
 * use these without depending on each other.
 */
#ifndef ML_UTIL_H
#define ML_UTIL_H

#include <stddef.h>
#include <stdint.h>

/** Formats a byte count as "512 B" or "12.3 MiB" (binary units up to TiB)
 * into buf (len bytes, truncated to fit) and returns buf. Allocates nothing;
 * thread-safe. */
const char *ml_fmt_bytes(uint64_t bytes, char *buf, size_t len);

#endif
