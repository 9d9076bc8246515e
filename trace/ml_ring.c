/* ml_ring.c - the slow paths of the event ring (waiting, blobs). */
#define _GNU_SOURCE
#include "ml_ring.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* A producer that finds its slot still taken by the previous lap waits
 * for the collector. It spins a moment (the collector may be releasing that
 * very slot), then sleeps on the futex word h->space_gen, which the collector
 * bumps and wakes after it released slots (ml_ring_wake). Sleeping, not
 * polling: with hundreds of threads waiting on a full ring, polling with
 * short sleeps kept them all runnable and starved the collector of the CPU
 * it needed to empty the ring (issue 12: 200 threads, 95 s of system time).
 *
 * No wake-up is lost: the producer reads space_gen, counts itself in
 * sleepers, then looks at its slot again before it sleeps on the value it
 * read; the collector releases slots, then reads sleepers. With a full fence
 * on both sides, either the producer sees the released slot or the collector
 * sees the sleeper and changes space_gen, so the futex wait returns at once.
 * The wait has a timeout all the same, to poll `alive`. The time is charged
 * to h->wait_ns so that the trace can say how long the program was held up
 * by a full ring. */
#define SPIN_TRIES 64
#define SLEEP_NS 5000000L /* also how often `alive` is polled */

static bool slot_free(const ml_slot_t *s, const ml_ring_hdr_t *h, uint64_t pos) {
    return ml_atomic_load_acquire(&s->seq) == ml_ring__lap(h, pos);
}

ml_slot_t *ml_ring__slot_wait_slow(ml_ring_hdr_t *h, uint64_t pos, bool (*alive)(void)) {
    ml_slot_t *s = &ml_ring_slots(h)[pos & (h->capacity - 1)];
    uint64_t start = now_ns();
    ml_atomic_add_relaxed(&h->waits, 1);
    for (unsigned spin = 0; spin < SPIN_TRIES; spin++) {
        if (slot_free(s, h, pos)) goto done;
        ml_cpu_relax();
    }
    for (;;) {
        uint32_t gen = ml_atomic_load_acquire(&h->space_gen);
        ml_atomic_add_relaxed(&h->sleepers, 1);
        atomic_thread_fence(memory_order_seq_cst);
        if (slot_free(s, h, pos)) {
            ml_atomic_add_relaxed(&h->sleepers, (uint32_t)-1);
            break;
        }
        struct timespec ts = {0, SLEEP_NS};
        long rc = syscall(SYS_futex, &h->space_gen, FUTEX_WAIT, gen, &ts, NULL, 0);
        int err = rc < 0 ? errno : 0;
        ml_atomic_add_relaxed(&h->sleepers, (uint32_t)-1);
        if (slot_free(s, h, pos)) break;
        if (err == ETIMEDOUT && alive && !alive()) {
            ml_atomic_add_relaxed(&h->lost, 1);
            ml_atomic_add_relaxed(&h->wait_ns, now_ns() - start);
            return NULL;
        }
    }
done:
    ml_atomic_add_relaxed(&h->wait_ns, now_ns() - start);
    return s;
}

void ml_ring_wake(ml_ring_hdr_t *h) {
    atomic_thread_fence(memory_order_seq_cst);
    if (!ml_atomic_load_relaxed(&h->sleepers)) return;
    ml_atomic_add_relaxed(&h->space_gen, 1);
    syscall(SYS_futex, &h->space_gen, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
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
