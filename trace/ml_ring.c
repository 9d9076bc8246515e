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
 * very slot) unless other producers already sleep: then the ring is full
 * and spinning only takes CPU from the collector (without root, where the
 * collector has no real-time priority, 1,000 threads took 0.80x the time
 * without the spin). Then it sleeps on the futex word h->space_gen, which
 * the collector bumps after it released slots (ml_ring_wake). Sleeping, not
 * polling: with hundreds of threads waiting on a full ring, polling with
 * short sleeps kept them all runnable and starved the collector of the CPU
 * it needed to empty the ring (issue 12: 200 threads, 95 s of system time).
 *
 * No wake-up is lost: the producer reads space_gen, counts itself in
 * sleepers, then looks at its slot again before it sleeps on the value it
 * read; the collector releases slots, then reads sleepers. With a full fence
 * on both sides, either the producer sees the released slot or the collector
 * sees the sleeper and changes space_gen, so the futex wait returns at once.
 * The wait has a timeout all the same, to poll `alive`: 5 ms, doubled after
 * every timeout up to 64 times that, so that thousands of threads waiting
 * on a slow collector do not wake every 5 ms (with 3,000 threads those
 * wake-ups, each with its kill(2) to poll the collector, were most of the
 * system time of a run that took minutes). The time is charged to
 * h->wait_ns so that the trace can say how long the program was held up by
 * a full ring.
 *
 * The wake-up is relayed, and goes only to producers whose slots are
 * free. Waking every sleeper from the collector made the one thread that
 * empties the ring spend its time in the scheduler, and woke threads whose
 * slots were still taken only to put them back to sleep: with 1,000 threads
 * on a full ring a sixth of the run's samples were the collector's futex
 * wake-ups, and with 3,000 the run took 28-95 s (medians of three calls),
 * most of it system time (docs/recorder.md). So:
 *   - a producer sleeps with a futex bitset: the bit of the ring segment
 *     (a sixteenth of the ring) that holds the position it waits for, the
 *     one a lap before its own;
 *   - the collector, having released every position below `frontier`, puts
 *     the bits of the segments wholly below it in h->wake_mask and wakes the
 *     first sleeper (first in, first out) whose bit is in the mask;
 *   - a producer woken so passes the wake-up on to the next such sleeper.
 * The bits name segments modulo 32 and sleepers wait for positions within
 * a lap of the frontier, so a bit in the mask is never that of a segment
 * still in use (more threads than the ring has slots can alias: a thread
 * woken too early sleeps again and passes nothing on). One thread is woken
 * at a time, each by the one before: no crowd of runnable threads keeps the
 * collector from the CPU, and no thread is woken for nothing. */
#define SPIN_TRIES 64
#define SLEEP_NS 5000000L /* also how often `alive` is polled */
/* A wait that keeps timing out sleeps up to 64 x longer. */
#define SLEEP_BACKOFF 64
#define SEGMENTS_PER_LAP 16

long ml_ring__sleep_ns = SLEEP_NS;

static bool slot_free(const ml_slot_t *s, const ml_ring_hdr_t *h, uint64_t pos) {
    return ml_atomic_load_acquire(&s->seq) == ml_ring__lap(h, pos);
}

/* The segment of a position: the ring's lap in SEGMENTS_PER_LAP parts. */
static uint64_t segment(const ml_ring_hdr_t *h, uint64_t pos) {
    unsigned lap_bits = (unsigned)__builtin_ctz(h->capacity);
    return pos >> (lap_bits > 4 ? lap_bits - 4 : 0);
}

static uint32_t segment_bit(uint64_t seg) {
    return 1u << (seg & 31);
}

/* The bits of the segments wholly released when every position below
 * `frontier` is: all but the SEGMENTS_PER_LAP segments from the frontier's
 * own on, which sleepers may still be waiting for. */
static uint32_t released_mask(const ml_ring_hdr_t *h, uint64_t frontier) {
    unsigned r = (unsigned)(segment(h, frontier) & 31);
    uint32_t busy = (uint32_t)((1u << SEGMENTS_PER_LAP) - 1);
    busy = r ? (busy << r) | (busy >> (32 - r)) : busy;
    return ~busy;
}

static void wake_next(ml_ring_hdr_t *h, uint32_t mask) {
    if (mask) syscall(SYS_futex, &h->space_gen, FUTEX_WAKE_BITSET, 1, NULL, NULL, mask);
}

ml_slot_t *ml_ring__slot_wait_slow(ml_ring_hdr_t *h, uint64_t pos, bool (*alive)(void)) {
    ml_slot_t *s = &ml_ring_slots(h)[pos & (h->capacity - 1)];
    uint64_t start = now_ns();
    uint32_t bit = segment_bit(segment(h, pos - h->capacity));
    ml_atomic_add_relaxed(&h->waits, 1);
    unsigned spins = ml_atomic_load_relaxed(&h->sleepers) ? 0 : SPIN_TRIES;
    for (unsigned spin = 0; spin < spins; spin++) {
        if (slot_free(s, h, pos)) goto done;
        ml_cpu_relax();
    }
    long sleep_ns = ml_ring__sleep_ns;
    for (;;) {
        uint32_t gen = ml_atomic_load_acquire(&h->space_gen);
        ml_atomic_add_relaxed(&h->sleepers, 1);
        atomic_thread_fence(memory_order_seq_cst);
        if (slot_free(s, h, pos)) {
            ml_atomic_add_relaxed(&h->sleepers, (uint32_t)-1);
            break;
        }
        /* FUTEX_WAIT_BITSET's timeout is a point in CLOCK_MONOTONIC time. */
        uint64_t until = now_ns() + (uint64_t)sleep_ns;
        struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
        long rc = syscall(SYS_futex, &h->space_gen, FUTEX_WAIT_BITSET, gen, &ts, NULL, bit);
        int err = rc < 0 ? errno : 0;
        ml_atomic_add_relaxed(&h->sleepers, (uint32_t)-1);
        if (slot_free(s, h, pos)) {
            if (rc == 0 && ml_atomic_load_relaxed(&h->sleepers))
                wake_next(h, ml_atomic_load_relaxed(&h->wake_mask));
            break;
        }
        if (err != ETIMEDOUT) continue;
        if (alive && !alive()) {
            ml_atomic_add_relaxed(&h->lost, 1);
            ml_atomic_add_relaxed(&h->wait_ns, now_ns() - start);
            return NULL;
        }
        if (sleep_ns < ml_ring__sleep_ns * SLEEP_BACKOFF) sleep_ns *= 2;
    }
done:
    ml_atomic_add_relaxed(&h->wait_ns, now_ns() - start);
    return s;
}

void ml_ring_wake(ml_ring_hdr_t *h, uint64_t frontier) {
    atomic_thread_fence(memory_order_seq_cst);
    if (!ml_atomic_load_relaxed(&h->sleepers)) return;
    uint32_t mask = released_mask(h, frontier);
    ml_atomic_store_relaxed(&h->wake_mask, mask);
    ml_atomic_add_relaxed(&h->space_gen, 1);
    wake_next(h, mask);
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
