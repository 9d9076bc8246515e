/* ml_ring.h - producer and consumer operations on the shared event ring.
 *
 * Low-level; no heap, no stdio, no locks. The protocol is described in
 * ml_event.h. Producers call ml_ring_claim() once per record and then
 * ml_ring_slot_wait() + ml_ring_publish() for each of its slots; the single
 * consumer calls ml_ring_peek() and ml_ring_release() in position order.
 */
#ifndef ML_RING_H
#define ML_RING_H

#include <stdbool.h>
#include <stddef.h>
#include "ml_event.h"

/** Formats an empty ring of `capacity` slots (a power of two). The slots
 * (ml_ring_bytes(capacity) bytes from h) must be zero, as a new file is. */
void ml_ring_init(ml_ring_hdr_t *h, uint32_t capacity);

/** Claims `n` consecutive positions and returns the first. Never blocks. */
static inline uint32_t ml_ring__lap(const ml_ring_hdr_t *h, uint64_t pos) {
    return (uint32_t)(pos & ~(uint64_t)(h->capacity - 1));
}

static inline uint64_t ml_ring_claim(ml_ring_hdr_t *h, uint32_t n) {
    return ml_atomic_add_relaxed(&h->head, (uint64_t)n);
}

/** Returns the slot for position `pos` once the consumer has released it.
 * Waiting is counted in h->waits/h->wait_ns; a waiting producer sleeps on a
 * futex until the consumer calls ml_ring_wake(). `alive` is polled after 5 ms
 * of waiting, then at intervals that double up to 320 ms; when it returns
 * false the wait is abandoned, h->lost is incremented and NULL is returned. */
ml_slot_t *ml_ring__slot_wait_slow(ml_ring_hdr_t *h, uint64_t pos, bool (*alive)(void));

/** How long one futex sleep of a waiting producer lasts before it polls
 * `alive` (5 ms). Tests only: a test that must see every wake-up arrive
 * without the timeout's help sets it longer than the test may run. */
extern long ml_ring__sleep_ns;

static inline ml_slot_t *ml_ring_slot_wait(ml_ring_hdr_t *h, uint64_t pos, bool (*alive)(void)) {
    ml_slot_t *s = &ml_ring_slots(h)[pos & (h->capacity - 1)];
    if (ml_likely(ml_atomic_load_acquire(&s->seq) == ml_ring__lap(h, pos))) return s;
    return ml_ring__slot_wait_slow(h, pos, alive);
}

/** Consumer: wakes the first producer asleep on a full ring whose slot is
 * free now that every position below `frontier` is released, if any; it
 * wakes the next such, and so on (ml_ring.c). Call it after releasing
 * slots; it costs a fence and a load when nobody sleeps. */
void ml_ring_wake(ml_ring_hdr_t *h, uint64_t frontier);

/** Makes the slot for position `pos` visible to the consumer. */
static inline void ml_ring_publish(ml_ring_hdr_t *h, ml_slot_t *s, uint64_t pos) {
    ml_atomic_store_release(&s->seq, ml_ring__lap(h, pos) + 1);
}

/** Consumer: the slot at `pos` if it is published, else NULL. */
static inline ml_slot_t *ml_ring_peek(ml_ring_hdr_t *h, uint64_t pos) {
    ml_slot_t *s = &ml_ring_slots(h)[pos & (h->capacity - 1)];
    return ml_atomic_load_acquire(&s->seq) == ml_ring__lap(h, pos) + 1 ? s : NULL;
}

/** Consumer: hands the slot at `pos` back to the producers of the next lap. */
static inline void ml_ring_release(ml_ring_hdr_t *h, uint64_t pos) {
    ml_slot_t *s = &ml_ring_slots(h)[pos & (h->capacity - 1)];
    ml_atomic_store_release(&s->seq, ml_ring__lap(h, pos + h->capacity));
}

/** Writes a blob record (`len` payload bytes) into the ring: one header slot
 * and ml_blob_slots(len) continuation slots claimed together. `hdr` supplies
 * type, thread and time; its size field is set to len. Returns false if the
 * ring was abandoned (see ml_ring_slot_wait). */
bool ml_ring_write_blob(ml_ring_hdr_t *h, const ml_event_t *hdr, const void *payload,
                        uint32_t len, bool (*alive)(void));

/** Consumer: copies the payload of a blob whose header is at `pos` into `out`
 * (at most `cap` bytes). Returns the number of slots the blob takes, header
 * included, if they are all published, 0 if some are not published yet.
 * Does not release. */
uint32_t ml_ring_read_blob(ml_ring_hdr_t *h, uint64_t pos, uint32_t len, void *out, size_t cap);

#endif
