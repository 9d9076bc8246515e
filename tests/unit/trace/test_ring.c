/* test_ring.c - the shared event ring without any process around it. */
#include "ml_ring.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static ml_ring_hdr_t *ring_new(uint32_t cap) {
    ml_ring_hdr_t *h = calloc(1, ml_ring_bytes(cap));
    cr_assert(h);
    ml_ring_init(h, cap);
    return h;
}

static void put(ml_ring_hdr_t *h, uint64_t v) {
    uint64_t pos = ml_ring_claim(h, 1, NULL);
    cr_assert_neq(pos, ML_RING_GONE);
    ml_slot_t *s = ml_ring_slot(h, pos);
    memset(&s->ev, 0, sizeof s->ev);
    s->ev.type = ML_EV_ALLOC;
    s->ev.ptr = v;
    ml_ring_publish(h, s, pos);
}

Test(ring, fifo_across_many_laps) {
    ml_ring_hdr_t *h = ring_new(8);
    uint64_t tail = 0;
    for (uint64_t v = 1; v <= 1000; v++) {
        put(h, v);
        if (v % 3 == 0) {
            while (tail < v) {
                ml_slot_t *s = ml_ring_peek(h, tail);
                cr_assert(s, "position %lu published", (unsigned long)tail);
                cr_assert_eq(s->ev.ptr, tail + 1);
                ml_ring_release(h, tail);
                tail++;
            }
        }
    }
    cr_expect_null(ml_ring_peek(h, 1000 - 1 + 1));
    free(h);
}

Test(ring, unpublished_slot_is_not_visible) {
    ml_ring_hdr_t *h = ring_new(16);
    uint64_t a = ml_ring_claim(h, 1, NULL);
    put(h, 42);
    cr_expect_null(ml_ring_peek(h, a), "claimed but not published");
    cr_expect_not_null(ml_ring_peek(h, a + 1));
    free(h);
}

Test(ring, blob_wraps_around_the_end) {
    ml_ring_hdr_t *h = ring_new(8);
    for (int i = 0; i < 6; i++) put(h, (uint64_t)i);
    for (uint64_t t = 0; t < 6; t++) ml_ring_release(h, t);
    char payload[70];
    for (int i = 0; i < 70; i++) payload[i] = (char)('a' + i % 26);
    ml_event_t hdr;
    memset(&hdr, 0, sizeof hdr);
    hdr.kind = ML_BLOB_THREAD;
    cr_assert(ml_ring_write_blob(h, &hdr, payload, sizeof payload, NULL));
    ml_slot_t *s = ml_ring_peek(h, 6);
    cr_assert(s);
    cr_expect_eq(ml_ev_type(&s->ev), ML_EV_BLOB);
    cr_expect_eq(s->ev.size, 70);
    char out[70];
    cr_expect_eq(ml_ring_read_blob(h, 6, 70, out, sizeof out), 1 + 3);
    cr_expect_eq(memcmp(out, payload, 70), 0);
    free(h);
}

typedef struct {
    ml_ring_hdr_t *h;
    int id;
} prod_arg_t;

#define PER_PRODUCER 100000
#define PRODUCERS 4

static void *producer(void *p) {
    prod_arg_t *a = p;
    for (uint64_t i = 0; i < PER_PRODUCER; i++) put(a->h, ((uint64_t)a->id << 32) | i);
    return NULL;
}

Test(ring, producers_never_lose_and_wait_when_full, .timeout = 60) {
    ml_ring_hdr_t *h = ring_new(64);
    pthread_t t[PRODUCERS];
    prod_arg_t args[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        args[i] = (prod_arg_t){h, i};
        pthread_create(&t[i], NULL, producer, &args[i]);
    }
    uint64_t next[PRODUCERS] = {0};
    uint64_t tail = 0;
    while (tail < (uint64_t)PRODUCERS * PER_PRODUCER) {
        ml_slot_t *s = ml_ring_peek(h, tail);
        if (!s) continue;
        uint64_t v = s->ev.ptr;
        int id = (int)(v >> 32);
        cr_assert(id < PRODUCERS);
        cr_assert_eq(v & 0xffffffffu, next[id], "each producer's events arrive in order");
        next[id]++;
        ml_ring_release(h, tail);
        tail++;
        ml_ring_wake(h);
    }
    for (int i = 0; i < PRODUCERS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < PRODUCERS; i++) cr_expect_eq(next[i], PER_PRODUCER);
    cr_expect_gt(ml_atomic_load_relaxed(&h->waits), 0, "a 64-slot ring fills up");
    cr_expect_eq(ml_atomic_load_relaxed(&h->lost), 0);
    free(h);
}

/* Sleepers of the relay test: each finds the ring full, waits for room,
 * then claims one position and publishes it. */
#define SLEEPERS 8

static void *sleeper(void *p) {
    ml_ring_hdr_t *h = p;
    uint64_t pos = ml_ring_claim(h, 1, NULL);
    if (pos == ML_RING_GONE) return NULL;
    ml_slot_t *s = ml_ring_slot(h, pos);
    memset(&s->ev, 0, sizeof s->ev);
    s->ev.ptr = pos;
    ml_ring_publish(h, s, pos);
    return s;
}

static void wait_for_sleepers(ml_ring_hdr_t *h, uint32_t n) {
    while (ml_atomic_load_relaxed(&h->sleepers) < n) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct timespec settle = {0, 20000000}; /* from counted to asleep in the futex */
    nanosleep(&settle, NULL);
}

/* The consumer wakes one sleeper; while the ring has room the rest must be
 * woken by the relay (ml_ring.c), not by their timeout: it is set far past
 * the test's own time limit, so a wake-up that is not passed on hangs the
 * test. */
Test(ring, one_wake_reaches_every_sleeper_while_there_is_room, .timeout = 30) {
    long saved = ml_ring__sleep_ns;
    ml_ring__sleep_ns = 600L * 1000000000L;
    ml_ring_hdr_t *h = ring_new(32);
    for (int i = 0; i < 32; i++) put(h, (uint64_t)i);
    pthread_t t[SLEEPERS];
    for (int i = 0; i < SLEEPERS; i++) pthread_create(&t[i], NULL, sleeper, h);
    wait_for_sleepers(h, SLEEPERS);
    cr_expect_eq(ml_atomic_load_relaxed(&h->head), 32, "a sleeper holds no position");
    for (uint64_t pos = 0; pos < 32; pos++) ml_ring_release(h, pos);
    ml_ring_wake(h);
    for (int i = 0; i < SLEEPERS; i++) {
        void *got;
        pthread_join(t[i], &got);
        cr_expect_not_null(got);
    }
    for (uint64_t pos = 32; pos < 32 + SLEEPERS; pos++) {
        ml_slot_t *s = ml_ring_peek(h, pos);
        cr_assert_not_null(s, "position %lu published", (unsigned long)pos);
        cr_expect_eq(s->ev.ptr, pos);
    }
    cr_expect_eq(ml_atomic_load_relaxed(&h->sleepers), 0);
    cr_expect_eq(ml_atomic_load_relaxed(&h->waits), SLEEPERS);
    ml_ring__sleep_ns = saved;
    free(h);
}

/* The point of claiming only room: the consumer never waits for a producer
 * that sleeps. With the ring full and a producer asleep, the consumer frees
 * one slot at a time and never wakes anyone; another producer that comes
 * along takes each free slot at once, and everything it publishes can be
 * read, while the sleeper, which holds nothing, stays asleep. */
Test(ring, a_sleeping_producer_holds_up_nobody, .timeout = 30) {
    long saved = ml_ring__sleep_ns;
    ml_ring__sleep_ns = 600L * 1000000000L;
    ml_ring_hdr_t *h = ring_new(16);
    for (int i = 0; i < 16; i++) put(h, (uint64_t)i);
    pthread_t t;
    pthread_create(&t, NULL, sleeper, h);
    wait_for_sleepers(h, 1);
    uint64_t tail = 0;
    for (uint64_t v = 100; v < 140; v++) {
        cr_assert_not_null(ml_ring_peek(h, tail));
        ml_ring_release(h, tail++);
        put(h, v); /* the free slot; the ring is full again */
        ml_slot_t *s = ml_ring_peek(h, tail + 15);
        cr_assert_not_null(s, "what the awake producer wrote is readable at once");
        cr_expect_eq(s->ev.ptr, v);
    }
    cr_expect_eq(ml_atomic_load_relaxed(&h->sleepers), 1, "the sleeper was never woken, and held nothing");
    /* Now let it in. */
    for (uint64_t end = tail + 16; tail < end; tail++) ml_ring_release(h, tail);
    ml_ring_wake(h);
    void *got;
    pthread_join(t, &got);
    cr_expect_not_null(got);
    ml_ring__sleep_ns = saved;
    free(h);
}

static bool dead(void) {
    return false;
}

Test(ring, producer_gives_up_when_the_collector_is_gone, .timeout = 30) {
    ml_ring_hdr_t *h = ring_new(4);
    for (int i = 0; i < 4; i++) put(h, (uint64_t)i);
    cr_expect_eq(ml_ring_claim(h, 1, dead), ML_RING_GONE);
    cr_expect_eq(ml_atomic_load_relaxed(&h->lost), 1);
    cr_expect_eq(ml_atomic_load_relaxed(&h->head), 4, "nothing claimed that nobody will publish");
    free(h);
}
