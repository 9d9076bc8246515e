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

/* A producer that finds no room in the ring waits for the collector. It
 * spins a moment (the collector may be releasing that very slot) unless
 * other producers already sleep: then the ring is full and spinning only
 * takes CPU from the collector (without root, where the collector has no
 * real-time priority, 1,000 threads took 0.80x the time without the spin).
 * Then it sleeps on the futex word h->space_gen, which the collector bumps
 * after it released slots (ml_ring_wake). Sleeping, not polling: with
 * hundreds of threads waiting on a full ring, polling with short sleeps kept
 * them all runnable and starved the collector of the CPU it needed to empty
 * the ring (issue 12: 200 threads, 95 s of system time).
 *
 * A waiting producer holds no position. It used to claim its position first
 * (one fetch_add on head) and then wait for that slot: the consumer reads in
 * position order, so it then had to wait in turn for every sleeper ahead of
 * it to be woken, scheduled and publish. With 3,000 threads on two CPUs and
 * a collector without real-time priority, the run was a chain of thousands
 * of futex round trips per lap: 42-48 s with 60 s of system time, against
 * heaptrack's 6-8 s. Now a producer claims only slots that are free
 * (ml_ring_claim: a compare-and-swap on head after it saw the last slot
 * free), so the consumer only ever waits for a producer that is between
 * its claim and its publish, a few stores, never for one that sleeps.
 *
 * No wake-up is lost: the producer reads space_gen, counts itself in
 * sleepers, then looks for room again before it sleeps on the value it
 * read; the collector releases slots, then reads sleepers. With a full fence
 * on both sides, either the producer sees the room or the collector sees the
 * sleeper and changes space_gen, so the futex wait returns at once. The wait
 * has a timeout all the same, to poll `alive`: 5 ms, doubled after every
 * timeout up to 64 times that, so that thousands of threads waiting on a
 * slow collector do not wake every 5 ms (with 3,000 threads those wake-ups,
 * each with its kill(2) to poll the collector, were most of the system time
 * of a run that took minutes). The time is charged to h->wait_ns so that
 * the trace can say how long the program was held up by a full ring.
 *
 * The collector wakes one sleeper, and a woken producer that got its room
 * wakes the next while more than relay_room() of it (half) is free. Waking
 * every sleeper made the one thread that empties the ring spend its time in
 * the scheduler, and a crowd of runnable threads keeps a collector of normal
 * priority from the CPU; a chain that stops once the ring is half full
 * wakes as many producers as there is room for, and leaves the rest asleep
 * (they hold nothing) until the collector has made room again. */
#define SPIN_TRIES 64
#define SLEEP_NS 5000000L /* also how often `alive` is polled */
/* A wait that keeps timing out sleeps up to 64 x longer. */
#define SLEEP_BACKOFF 64

long ml_ring__sleep_ns = SLEEP_NS;

/* The room a woken producer leaves for the next: half the ring. */
static uint64_t relay_room(const ml_ring_hdr_t *h) {
    return h->capacity / 2;
}

static void wake_one(ml_ring_hdr_t *h) {
    syscall(SYS_futex, &h->space_gen, FUTEX_WAKE, 1, NULL, NULL, 0);
}

uint64_t ml_ring__claim_slow(ml_ring_hdr_t *h, uint32_t n, bool (*alive)(void)) {
    /* The program's errno is as it was: the wait's futex times out
     * (ETIMEDOUT) or is interrupted (EINTR) in the middle of its malloc. */
    int saved_errno = errno;
    uint64_t start = now_ns();
    uint64_t pos;
    ml_atomic_add_relaxed(&h->waits, 1);
    unsigned spins = ml_atomic_load_relaxed(&h->sleepers) ? 0 : SPIN_TRIES;
    for (unsigned spin = 0; spin < spins; spin++) {
        if (ml_ring__try_claim(h, n, &pos)) goto done;
        ml_cpu_relax();
    }
    long sleep_ns = ml_ring__sleep_ns;
    for (;;) {
        uint32_t gen = ml_atomic_load_acquire(&h->space_gen);
        ml_atomic_add_relaxed(&h->sleepers, 1);
        atomic_thread_fence(memory_order_seq_cst);
        if (ml_ring__try_claim(h, n, &pos)) {
            ml_atomic_add_relaxed(&h->sleepers, (uint32_t)-1);
            break;
        }
        struct timespec ts = {(time_t)(sleep_ns / 1000000000L), sleep_ns % 1000000000L};
        long rc = syscall(SYS_futex, &h->space_gen, FUTEX_WAIT, gen, &ts, NULL, 0);
        int err = rc < 0 ? errno : 0;
        ml_atomic_add_relaxed(&h->sleepers, (uint32_t)-1);
        if (ml_ring__try_claim(h, n, &pos)) {
            /* Pass the wake-up on while there is room for more. */
            if (rc == 0 && ml_atomic_load_relaxed(&h->sleepers) &&
                ml_ring__free(h, pos + n + relay_room(h)))
                wake_one(h);
            break;
        }
        if (err != ETIMEDOUT) continue;
        if (alive && !alive()) {
            ml_atomic_add_relaxed(&h->lost, 1);
            ml_atomic_add_relaxed(&h->wait_ns, now_ns() - start);
            errno = saved_errno;
            return ML_RING_GONE;
        }
        if (sleep_ns < ml_ring__sleep_ns * SLEEP_BACKOFF) sleep_ns *= 2;
    }
done:
    ml_atomic_add_relaxed(&h->wait_ns, now_ns() - start);
    errno = saved_errno;
    return pos;
}

void ml_ring_wake(ml_ring_hdr_t *h) {
    atomic_thread_fence(memory_order_seq_cst);
    if (!ml_atomic_load_relaxed(&h->sleepers)) return;
    ml_atomic_add_relaxed(&h->space_gen, 1);
    wake_one(h);
}

/* ------------------------------------------------------------------------- */
/* Blobs                                                                     */
/* ------------------------------------------------------------------------- */

bool ml_ring_write_blob(ml_ring_hdr_t *h, const ml_event_t *hdr, const void *payload,
                        uint32_t len, bool (*alive)(void)) {
    uint32_t n = ml_blob_slots(len);
    uint64_t pos = ml_ring_claim(h, n + 1, alive);
    if (pos == ML_RING_GONE) return false;
    ml_slot_t *s = ml_ring_slot(h, pos);
    s->ev = *hdr;
    s->ev.type = ML_EV_BLOB;
    s->ev.size = len;
    ml_ring_publish(h, s, pos);
    const uint8_t *p = payload;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t q = pos + 1 + i;
        ml_slot_t *c = ml_ring_slot(h, q);
        uint32_t off = i * ML_SLOT_PAYLOAD;
        uint32_t k = len - off < ML_SLOT_PAYLOAD ? len - off : ML_SLOT_PAYLOAD;
        memcpy(c->raw, p + off, k);
        ml_ring_publish(h, c, q);
    }
    return true;
}

uint32_t ml_ring_read_blob(ml_ring_hdr_t *h, uint64_t pos, uint32_t len, void *out, size_t cap) {
    return ml_ring_read_blob_in(h, h->capacity, pos, len, out, cap);
}

uint32_t ml_ring_read_blob_in(ml_ring_hdr_t *h, uint32_t slots, uint64_t pos, uint32_t len, void *out,
                              size_t cap) {
    uint32_t n = ml_blob_slots(len);
    uint8_t *o = out;
    for (uint32_t i = 0; i < n; i++) {
        ml_slot_t *c = ml_ring_peek_in(h, slots, pos + 1 + i);
        if (!c) return 0;
        uint32_t off = i * ML_SLOT_PAYLOAD;
        uint32_t k = len - off < ML_SLOT_PAYLOAD ? len - off : ML_SLOT_PAYLOAD;
        if (off + k <= cap) memcpy(o + off, c->raw, k);
    }
    return n + 1;
}
