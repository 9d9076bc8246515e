/* ml_ring.h - producer and consumer operations on the shared event ring.
 *
 * Low-level; no heap, no stdio, no locks. The protocol is described in
 * ml_event.h. Producers call ml_ring_claim() once per record, then write
 * each of its slots (ml_ring_slot) and ml_ring_publish() it; the single
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

/** The base position of pos's lap (ml_event.h). */
static inline uint32_t ml_ring__lap(const ml_ring_hdr_t *h, uint64_t pos) {
    return (uint32_t)(pos & ~(uint64_t)(h->capacity - 1));
}

/** The slot of position `pos`. */
static inline ml_slot_t *ml_ring_slot(ml_ring_hdr_t *h, uint64_t pos) {
    return &ml_ring_slots(h)[pos & (h->capacity - 1)];
}

/* The consumer's side (the *_in functions) takes the ring's slot count
 * `cap` from the consumer, never from h->capacity: the ring is shared with
 * the producer's process, which can write anything there, and a capacity
 * of 2^31 made the collector index past its mapping (SIGSEGV). */
static inline uint32_t ml_ring__lap_in(uint32_t cap, uint64_t pos) {
    return (uint32_t)(pos & ~(uint64_t)(cap - 1));
}
static inline ml_slot_t *ml_ring_slot_in(ml_ring_hdr_t *h, uint32_t cap, uint64_t pos) {
    return &ml_ring_slots(h)[pos & (cap - 1)];
}

/** Whether the slot of `pos` is free for it: the consumer has released the
 * position a lap before (and, releasing in order, every one below it). */
static inline bool ml_ring__free(ml_ring_hdr_t *h, uint64_t pos) {
    return ml_atomic_load_acquire(&ml_ring_slot(h, pos)->seq) == ml_ring__lap(h, pos);
}

/** What ml_ring_claim returns when it gave up: the consumer is gone. */
#define ML_RING_GONE UINT64_MAX

/** The slow path of ml_ring_claim: the ring has no room for `n` slots.
 * Waiting is counted in h->waits/h->wait_ns; the producer sleeps on a futex,
 * holding no position, until the consumer calls ml_ring_wake(). `alive` is
 * polled after 5 ms of waiting, then at intervals that double up to 320 ms;
 * when it returns false the wait is abandoned, h->lost is incremented and
 * ML_RING_GONE is returned. */
uint64_t ml_ring__claim_slow(ml_ring_hdr_t *h, uint32_t n, bool (*alive)(void));

/** How long one futex sleep of a waiting producer lasts before it polls
 * `alive` (5 ms). Tests only: a test that must see every wake-up arrive
 * without the timeout's help sets it longer than the test may run. */
extern long ml_ring__sleep_ns;

/** Claims `n` consecutive positions whose slots are free and returns the
 * first: the caller writes them (ml_ring_slot) and publishes each. Only
 * room is claimed, never a position the consumer has yet to release, so a
 * producer that has to wait holds nothing the consumer waits for (ml_ring.c
 * says why that matters). */
static inline bool ml_ring__try_claim(ml_ring_hdr_t *h, uint32_t n, uint64_t *pos) {
    uint64_t p = ml_atomic_load_relaxed(&h->head);
    while (ml_likely(ml_ring__free(h, p + n - 1)))
        if (ml_likely(atomic_compare_exchange_weak_explicit(&h->head, &p, p + n, memory_order_relaxed,
                                                            memory_order_relaxed))) {
            *pos = p;
            return true;
        }
    return false; /* no room for n slots */
}

static inline uint64_t ml_ring_claim(ml_ring_hdr_t *h, uint32_t n, bool (*alive)(void)) {
    uint64_t pos;
    if (ml_likely(ml_ring__try_claim(h, n, &pos))) return pos;
    return ml_ring__claim_slow(h, n, alive);
}

/** Consumer: wakes a producer asleep on a full ring, if any (it passes the
 * wake-up on while the ring has room, ml_ring.c). Call it after releasing
 * slots; it costs a fence and a load when nobody sleeps. */
void ml_ring_wake(ml_ring_hdr_t *h);

/** Makes the slot for position `pos` visible to the consumer. */
static inline void ml_ring_publish(ml_ring_hdr_t *h, ml_slot_t *s, uint64_t pos) {
    ml_atomic_store_release(&s->seq, ml_ring__lap(h, pos) + 1);
}

/** Consumer: the slot at `pos` if it is published, else NULL. */
static inline ml_slot_t *ml_ring_peek_in(ml_ring_hdr_t *h, uint32_t cap, uint64_t pos) {
    ml_slot_t *s = ml_ring_slot_in(h, cap, pos);
    return ml_atomic_load_acquire(&s->seq) == ml_ring__lap_in(cap, pos) + 1 ? s : NULL;
}
static inline ml_slot_t *ml_ring_peek(ml_ring_hdr_t *h, uint64_t pos) {
    return ml_ring_peek_in(h, h->capacity, pos);
}

/** Consumer: hands the slot at `pos` back to the producers of the next lap. */
static inline void ml_ring_release_in(ml_ring_hdr_t *h, uint32_t cap, uint64_t pos) {
    ml_atomic_store_release(&ml_ring_slot_in(h, cap, pos)->seq, ml_ring__lap_in(cap, pos + cap));
}
static inline void ml_ring_release(ml_ring_hdr_t *h, uint64_t pos) {
    ml_ring_release_in(h, h->capacity, pos);
}

/** Writes a blob record (`len` payload bytes) into the ring: one header slot
 * and ml_blob_slots(len) continuation slots claimed together. `hdr` supplies
 * type, thread and time; its size field is set to len. Returns false if the
 * ring was abandoned (see ml_ring_claim). */
bool ml_ring_write_blob(ml_ring_hdr_t *h, const ml_event_t *hdr, const void *payload,
                        uint32_t len, bool (*alive)(void));

/** Consumer: copies the payload of a blob whose header is at `pos` into `out`
 * (at most `cap` bytes). Returns the number of slots the blob takes, header
 * included, if they are all published, 0 if some are not published yet.
 * Does not release. */
uint32_t ml_ring_read_blob(ml_ring_hdr_t *h, uint64_t pos, uint32_t len, void *out, size_t cap);
/** The same with the consumer's slot count `slots` (see ml_ring_slot_in). */
uint32_t ml_ring_read_blob_in(ml_ring_hdr_t *h, uint32_t slots, uint64_t pos, uint32_t len, void *out,
                              size_t cap);

#endif
