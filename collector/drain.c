/* drain.c - stage 1 of the collector: published ring events, in ring order,
 * decoded into records in the batch (ml_event_to_record), and the exit scan
 * that one of them triggers.
 *
 * A process' ring is read from its tail. A blob (a module, a thread name,
 * glibc's counters, a GPU event) is a header slot and continuation slots
 * claimed together: it is read once all of them are published. Each slot is
 * released right after its event is decoded, and the tail is published once
 * per drain. Producers asleep on a full ring are woken after a number of
 * released slots that grows with the sleepers, and at the end of the drain.
 * With `final` the process is gone: positions that were claimed but never
 * published (it was killed in the middle of an event) are counted as lost
 * and skipped, never guessed at.
 */
#include "collector_internal.h"

#include <linux/futex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Events per process per round, so that no ring starves the others. A
 * process alone is drained in big rounds. Beside others, a busy ring gives
 * way sooner: a process that waits at its exit for the scan, or a new one
 * to be opened, waits for about 4096 of the busy one's events (half a
 * millisecond), not 65536 (5-8 ms; docs/benchmarks.md). */
#define DRAIN_BUDGET 65536
#define DRAIN_BUDGET_SHARED 4096
/* Producers asleep on a full ring are woken (one, which passes the wake-up
 * on while the ring is more than half free: ml_ring.c) once WAKE_PER_SLEEPER
 * slots per sleeper are free again (at least WAKE_MIN, at most a quarter of
 * the ring), and at the end of each drain. With many sleepers the room
 * released before a wake-up is a quarter of the ring, so the woken ones
 * have room for many events each (waking 200 threads every 4096 slots, as
 * this once did, bought each of them 20 events: the ring was full 140,000
 * times in 2 M events). A single thread is woken after 4096 slots; the
 * rest of the ring keeps the collector busy while it refills it. */
#define WAKE_MIN 4096
#define WAKE_PER_SLEEPER 256

/* The process has run its exit handlers and waits in libmemlens' destructor
 * until we answer: its memory is intact, so this is where reachability of
 * the blocks still live can be examined. The sinks must have seen every
 * record up to the exit record first: the analysis' live blocks are the
 * scan's input. The process is released as soon as its memory is read. */
static void scan_emit(void *ctx, const ml_record_t *rec) {
    ml__proc_t *p = ctx;
    ml__emit(p->collector, p, rec);
}

static void scan_release(void *ctx) {
    ml__proc_t *p = ctx;
    ml_atomic_store_release(&p->ring->exit_scan, ML_EXIT_SCAN_DONE);
    /* The process waits on this word (interpose/runtime.c, exit_handshake). */
    syscall(SYS_futex, &p->ring->exit_scan, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

static void exit_scan(ml_collector_t *c, ml__proc_t *p) {
    p->hwm_exit = ml__read_hwm(p->info.pid);
    ml__flush(c);
    ml__stage2_wait(c); /* the analysis has every record up to the exit */
    uint32_t word = ml_atomic_load_relaxed(&p->ring->exit_nregs); /* the process wrote it: check */
    uint32_t nregs = word & ~ML_EXIT_CRASH;
    ml__scan_note_t note = {0};
    if (p->info.analysis)
        ml__exit_scan((pid_t)p->info.pid, p->info.analysis, p->inh, scan_emit, scan_release, p, p->last_time,
                      p->last_thread, ml_atomic_load_acquire(&p->ring->exit_sp), p->ring->exit_regs,
                      nregs <= 6 ? nregs : 0, (word & ML_EXIT_CRASH) != 0,
                      ml_atomic_load_acquire(&p->ring->raw_registry),
                      ml_atomic_load_acquire(&p->ring->sbrk_registry), &note);
    /* For the trace, with the process' other notes at its end. */
    if (p->info.analysis) p->inherit_unscanned = p->inherit_skipped;
    if (note.count && !p->scan_note && (p->scan_note = malloc(sizeof *p->scan_note))) *p->scan_note = note;
    ml__flush(c);
    scan_release(p); /* without an analysis, nothing was scanned */
}

/* One event (and its blob payload) as the next record of the batch. An
 * event that does not decode (an unknown type, a damaged blob) is counted
 * as read and dropped, as it always was. */
static void decode(ml_collector_t *c, ml__proc_t *p, const ml_event_t *ev, const uint8_t *blob) {
    size_t room = ml_ev_type(ev) == ML_EV_BLOB ? (size_t)ev->size + 2 : 0;
    ml_record_t *r = ml__batch_slot(c, p, room);
    ml_batch_t *b = c->batch;
    int used = ml_event_to_record(ev, blob, r, b->strings + b->strings_used,
                                  ML_BATCH_STRINGS - b->strings_used);
    if (used < 0) return;
    ml__time_order(p, r);
    ml__batch_commit(c, (uint32_t)used);
    p->last_thread = r->thread;
    switch (r->tag) {
    case ML_T_ALLOC:
        if (++p->net_blocks > p->net_high) p->net_high = p->net_blocks;
        break;
    case ML_T_FREE:
        p->net_blocks--;
        if (p->inh) ml__inherit_freed(p->inh, r->u.alloc.ptr, true);
        break;
    case ML_T_REALLOC_FAIL:
        if (p->inh) ml__inherit_freed(p->inh, r->u.alloc.ptr, false);
        break;
    case ML_T_MALLINFO: p->net_high = p->net_blocks; break;
    case ML_T_PROC_EXIT: exit_scan(c, p); break;
    default: break;
    }
}

/* ml_ring_hdr_t.heap_drop, written when it changes. */
static void publish_heap_drop(ml__proc_t *p) {
    uint64_t drop = (uint64_t)(p->net_high - p->net_blocks); /* net_high >= net_blocks */
    if (drop == p->heap_drop) return;
    p->heap_drop = drop;
    ml_atomic_store_relaxed(&p->ring->heap_drop, drop);
}

/* Whether `released` slots are enough to wake the sleepers for. */
static bool time_to_wake(ml_ring_hdr_t *h, uint64_t released) {
    uint64_t most = h->capacity / 4;
    if (released < (WAKE_MIN < most ? WAKE_MIN : most)) return false;
    uint64_t want = (uint64_t)ml_atomic_load_relaxed(&h->sleepers) * WAKE_PER_SLEEPER;
    return released >= (want < most ? want : most);
}

uint64_t ml__drain(ml_collector_t *c, ml__proc_t *p, bool final) {
    ml_ring_hdr_t *h = p->ring;
    uint64_t got = 0;
    uint64_t released = 0; /* since the last wake-up */
    uint64_t head = final ? ml_atomic_load_acquire(&h->head) : 0;
    uint64_t budget = c->nactive > 1 ? DRAIN_BUDGET_SHARED : DRAIN_BUDGET;
    for (;;) {
        if (!final && got >= budget) break;
        if (final && p->pos >= head) break;
        ml_slot_t *sl = ml_ring_peek(h, p->pos);
        if (!sl) {
            if (!final) break;
            p->lost_in_crash++;
            p->pos++;
            continue;
        }
        ml_event_t ev;
        memcpy(&ev, &sl->ev, sizeof ev);
        uint32_t n = 1;
        const uint8_t *blob = NULL;
        if (ml_ev_type(&ev) == ML_EV_BLOB) {
            uint32_t need = 1 + ml_blob_slots(ev.size);
            if (ev.size > c->blob_cap) {
                /* Cannot happen with our producer; skip the claimed run. */
                for (uint32_t i = 0; i < need; i++) ml_ring_release(h, p->pos + i);
                p->pos += need;
                continue;
            }
            n = ml_ring_read_blob(h, p->pos, (uint32_t)ev.size, c->blob, c->blob_cap);
            if (!n) {
                if (!final) break;
                /* The producer died inside the blob. */
                p->lost_in_crash += need;
                p->pos += need;
                continue;
            }
            blob = c->blob;
        }
        /* A child memlens cannot follow is said on stderr, not recorded. */
        if (blob && ev.kind == ML_BLOB_UNTRACED) ml__untraced_note(p, blob, (uint32_t)ev.size);
        else if (blob && ev.kind == ML_BLOB_FORK) ml__inherit_fork(c, p, blob, (uint32_t)ev.size);
        else decode(c, p, &ev, blob);
        for (uint32_t i = 0; i < n; i++) ml_ring_release(h, p->pos + i);
        p->pos += n;
        p->events++;
        got++;
        released += n;
        if (time_to_wake(h, released)) {
            ml_ring_wake(h);
            released = 0;
        }
    }
    ml_atomic_store_release(&h->tail, p->pos);
    ml_ring_wake(h);
    publish_heap_drop(p);
    ml__flush(c);
    return got;
}
