/* ml_ring.c - the slow paths of the event ring (waiting, blobs). */
#include "ml_ring.h"

#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------- */
/* Initialisation                                                            */
/* ------------------------------------------------------------------------- */

void ml_ring_init(ml_ring_hdr_t *h, uint32_t capacity) {
    memset(h, 0, sizeof *h);
    h->magic = ML_RING_MAGIC;
    h->version = ML_SHM_VERSION;
    h->slot_size = sizeof(ml_slot_t);
    h->capacity = capacity;
    atomic_thread_fence(memory_order_release);
}

/* ------------------------------------------------------------------------- */
/* Backpressure                                                              */
/* ------------------------------------------------------------------------- */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The consumer drains every millisecond or so; a producer that finds its slot
 * still occupied spins briefly (the consumer is usually mid-drain), then
 * sleeps in short steps. The time is charged to h->wait_ns so that the trace
 * can say how long the program was held up by a full ring. */
ml_slot_t *ml_ring__slot_wait_slow(ml_ring_hdr_t *h, uint64_t pos, bool (*alive)(void)) {
    ml_slot_t *s = &ml_ring_slots(h)[pos & (h->capacity - 1)];
    uint64_t start = now_ns(), last_check = start;
    ml_atomic_add_relaxed(&h->waits, 1);
    for (unsigned spin = 0;; spin++) {
        if (ml_atomic_load_acquire(&s->seq) == ml_ring__lap(h, pos)) break;
        if (spin < 256) {
            ml_cpu_relax();
            continue;
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
        uint64_t t = now_ns();
        if (alive && t - last_check > 5000000ull) {
            last_check = t;
            if (!alive()) {
                ml_atomic_add_relaxed(&h->lost, 1);
                ml_atomic_add_relaxed(&h->wait_ns, t - start);
                return NULL;
            }
        }
    }
    ml_atomic_add_relaxed(&h->wait_ns, now_ns() - start);
    return s;
}

/* ------------------------------------------------------------------------- */
/* Blobs                                                                     */
/* ------------------------------------------------------------------------- */

bool ml_ring_write_blob(ml_ring_hdr_t *h, const ml_event_t *hdr, const void *payload,
                        uint32_t len, bool (*alive)(void)) {
    uint32_t n = ml_blob_slots(len);
    uint64_t pos = ml_ring_claim(h, n + 1);
    ml_slot_t *s = ml_ring_slot_wait(h, pos, alive);
    if (!s) return false;
    s->ev = *hdr;
    s->ev.type = ML_EV_BLOB;
    s->ev.size = len;
    ml_ring_publish(h, s, pos);
    const uint8_t *p = payload;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t q = pos + 1 + i;
        ml_slot_t *c = ml_ring_slot_wait(h, q, alive);
        if (!c) return false;
        uint32_t off = i * ML_SLOT_PAYLOAD;
        uint32_t k = len - off < ML_SLOT_PAYLOAD ? len - off : ML_SLOT_PAYLOAD;
        memcpy(c->raw, p + off, k);
        ml_ring_publish(h, c, q);
    }
    return true;
}

uint32_t ml_ring_read_blob(ml_ring_hdr_t *h, uint64_t pos, uint32_t len, void *out, size_t cap) {
    uint32_t n = ml_blob_slots(len);
    uint8_t *o = out;
    for (uint32_t i = 0; i < n; i++) {
        ml_slot_t *c = ml_ring_peek(h, pos + 1 + i);
        if (!c) return 0;
        uint32_t off = i * ML_SLOT_PAYLOAD;
        uint32_t k = len - off < ML_SLOT_PAYLOAD ? len - off : ML_SLOT_PAYLOAD;
        if (off + k <= cap) memcpy(o + off, c->raw, k);
    }
    return n + 1;
}
