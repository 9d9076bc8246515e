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
 *
 * The backlog. When a process makes events faster than they are decoded
 * and written (a burst of frees as a program tears its data down), its
 * ring fills and the program waits. The ring is small (2 MiB) because
 * both processes keep every page of it; a larger one took the waits away
 * (clang-format: 0.949x the time with 32 MiB) but cost 30 MiB in every busy
 * program and its collector. So once the ring is more than half full, the
 * drain copies its events, as they are, into blocks of the collector's own
 * memory and releases their slots (a copy is a few ns, a decode about
 * 100), until the ring is under a quarter full; the copies are then
 * decoded before any event after them, so the order is the ring's. The
 * memory is the collector's alone, taken only while a burst lasts, and
 * bounded: BL_MAX_BYTES for all processes, and the collector's RSS at most
 * BL_SHARE_PCT % of the traced programs' peak RSS (sampled), under issue
 * 12's bound of half. A collector already at that share (python3-dicts,
 * small programs) sets nothing aside: on python3-dicts a backlog of 32 MiB
 * took the collector from 0.49 to 0.71 of the program. Past the bound the
 * program waits on its ring, as before.
 */
#include "collector_internal.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* The backlog's blocks: slots of the ring, without their sequence word. */
#define BL_BLOCK_SLOTS 32768u
#define BL_MAX_BYTES (32ull << 20) /* every process' backlog together */
#define BL_CHECK 256u              /* events between two looks at the ring's fill */
#define BL_SHARE_PCT 40            /* the collector's RSS, of the programs' peak RSS */

typedef struct {
    uint8_t raw[ML_SLOT_PAYLOAD];
} bl_slot_t;

struct ml__backlog_s {
    struct ml__backlog_s *next;
    uint32_t head, tail; /* the next slot to decode; the next to fill */
    bl_slot_t s[BL_BLOCK_SLOTS];
};

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
                      ml_atomic_load_acquire(&p->ring->sbrk_registry), ml_atomic_load_acquire(&p->ring->stdio_list),
                      &note);
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
    if (ml_unlikely(p->nrss_held) && ev->time > p->rss_held[0].time_ms) ml__rss_held_flush(c, p, ev->time - 1);
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
    case ML_T_PROC_EXIT:
        p->exit_seen = true;
        exit_scan(c, p);
        break;
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

/* Whether p's ring is filling: more than half full to start copying into
 * the backlog, more than a quarter to go on. The producers publish about
 * in position order, so a slot published that far ahead says so. */
static bool ring_filling(ml_ring_hdr_t *h, uint32_t cap, const ml__proc_t *p) {
    uint64_t ahead = p->filling ? cap / 4 : cap / 2;
    return ml_ring_peek_in(h, cap, p->pos + ahead) != NULL;
}

/* The collector's resident bytes (0: unknown). */
static uint64_t own_rss(void) {
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    unsigned long long size = 0, resident = 0;
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
    return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* A new block of the backlog, mapped (and unmapped once read, so that the
 * memory goes back at once); NULL when the bounds above say no. */
static struct ml__backlog_s *backlog_block_new(ml_collector_t *c) {
    size_t bytes = sizeof(struct ml__backlog_s);
    if (c->backlog_bytes + bytes > BL_MAX_BYTES) return NULL;
    /* Refused: not asked again before the programs' RSS is sampled again
     * (a read of /proc/self/statm is about 10 us; a full ring asks every
     * BL_CHECK events). */
    uint32_t now = ml__now_ms(c);
    if (now < c->backlog_denied_until) return NULL;
    uint64_t progs = 0;
    for (uint32_t i = 0; i < c->nactive; i++) progs += c->active[i]->hwm_sampled;
    uint64_t self = own_rss();
    if (!self || self + bytes > progs / 100 * BL_SHARE_PCT) {
        c->backlog_denied_until = now + 10;
        return NULL;
    }
    void *b = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) return NULL;
    c->backlog_bytes += bytes;
    if (c->backlog_bytes > c->backlog_peak) c->backlog_peak = c->backlog_bytes;
    return b;
}

static void backlog_block_free(ml_collector_t *c, struct ml__backlog_s *b) {
    c->backlog_bytes -= sizeof *b;
    munmap(b, sizeof *b);
}

/* Copies up to `max` published events of p's ring into its backlog and
 * releases their slots (counted in *released). Returns the events copied:
 * 0 when none is published, or there is no room (BL_MAX_BYTES, memory). */
static uint32_t backlog_copy(ml_collector_t *c, ml__proc_t *p, uint32_t max, uint64_t *released) {
    ml_ring_hdr_t *h = p->ring;
    uint32_t cap = c->o.ring_slots; /* never h->capacity (ml_ring_slot_in) */
    uint32_t k = 0;
    while (k < max) {
        ml_slot_t *sl = ml_ring_peek_in(h, cap, p->pos);
        if (!sl) break;
        uint32_t n = 1;
        if (ml_ev_type(&sl->ev) == ML_EV_BLOB) {
            n = 1 + ml_blob_slots(sl->ev.size);
            if (n > BL_BLOCK_SLOTS) break; /* cannot happen with our producer: left to the ring's path */
            bool all = true;
            for (uint32_t i = 1; i < n && all; i++) all = ml_ring_peek_in(h, cap, p->pos + i) != NULL;
            if (!all) break;
        }
        struct ml__backlog_s *b = p->bl_tail;
        if (!b || b->tail + n > BL_BLOCK_SLOTS) {
            if (!(b = backlog_block_new(c))) break;
            b->next = NULL;
            b->head = b->tail = 0;
            if (p->bl_tail) p->bl_tail->next = b;
            else p->bl_head = b;
            p->bl_tail = b;
        }
        for (uint32_t i = 0; i < n; i++) {
            memcpy(b->s[b->tail + i].raw, ml_ring_slot_in(h, cap, p->pos + i)->raw, ML_SLOT_PAYLOAD);
            ml_ring_release_in(h, cap, p->pos + i);
        }
        b->tail += n;
        p->bl_slots += n;
        p->pos += n;
        *released += n;
        k++;
    }
    return k;
}

/* A decoded event (and its blob payload) to where it goes. */
static void take_event(ml_collector_t *c, ml__proc_t *p, const ml_event_t *ev, const uint8_t *blob) {
    /* A child memlens cannot follow is said on stderr, not recorded. */
    if (blob && ev->kind == ML_BLOB_UNTRACED) ml__untraced_note(p, blob, (uint32_t)ev->size);
    else if (blob && ev->kind == ML_BLOB_FORK) ml__inherit_fork(c, p, blob, (uint32_t)ev->size);
    else decode(c, p, ev, blob);
    p->events++;
}

/* Decodes the oldest event of p's backlog (there is one). A blob larger
 * than the collector's buffer is skipped, as the ring's path skips it. */
static void backlog_take(ml_collector_t *c, ml__proc_t *p) {
    struct ml__backlog_s *b = p->bl_head;
    ml_event_t ev;
    memcpy(&ev, b->s[b->head].raw, sizeof ev);
    uint32_t n = 1;
    if (ml_ev_type(&ev) != ML_EV_BLOB) {
        take_event(c, p, &ev, NULL);
    } else {
        n = 1 + ml_blob_slots(ev.size);
        if (ev.size <= c->blob_cap) {
            for (uint32_t i = 0; i + 1 < n; i++) {
                uint32_t off = i * ML_SLOT_PAYLOAD;
                uint32_t k = (uint32_t)ev.size - off < ML_SLOT_PAYLOAD ? (uint32_t)ev.size - off : ML_SLOT_PAYLOAD;
                memcpy(c->blob + off, b->s[b->head + 1 + i].raw, k);
            }
            take_event(c, p, &ev, c->blob);
        }
    }
    b->head += n;
    p->bl_slots -= n;
    if (b->head == b->tail) {
        p->bl_head = b->next;
        if (!p->bl_head) p->bl_tail = NULL;
        backlog_block_free(c, b);
    }
}

void ml__backlog_free(ml_collector_t *c, ml__proc_t *p) {
    while (p->bl_head) {
        struct ml__backlog_s *b = p->bl_head;
        p->bl_head = b->next;
        backlog_block_free(c, b);
    }
    p->bl_tail = NULL;
    p->bl_slots = 0;
}

/* Whether `released` slots are enough to wake the sleepers for. */
static bool time_to_wake(ml_ring_hdr_t *h, uint32_t cap, uint64_t released) {
    uint64_t most = cap / 4;
    if (released < (WAKE_MIN < most ? WAKE_MIN : most)) return false;
    uint64_t want = (uint64_t)ml_atomic_load_relaxed(&h->sleepers) * WAKE_PER_SLEEPER;
    return released >= (want < most ? want : most);
}

uint64_t ml__drain(ml_collector_t *c, ml__proc_t *p, bool final) {
    ml_ring_hdr_t *h = p->ring;
    uint32_t cap = c->o.ring_slots; /* never h->capacity (ml_ring_slot_in) */
    uint64_t got = 0;
    uint64_t released = 0; /* since the last wake-up */
    uint64_t head = final ? ml_atomic_load_acquire(&h->head) : 0;
    /* A producer claims only free slots: at most a ring's worth is ahead of
     * us. A head past that was written by something else (the program can
     * write its ring), and counting each position up to it as lost took for
     * ever (head + 10^12: memlens never ended). */
    if (final && head < p->pos) head = p->pos;
    if (final && head - p->pos > cap) head = p->pos + cap;
    uint64_t budget = c->nactive > 1 ? DRAIN_BUDGET_SHARED : DRAIN_BUDGET;
    uint32_t until_check = 0;
    for (;;) {
        if (!final && got >= budget) break;
        if (!final && !until_check--) {
            p->filling = ring_filling(h, cap, p);
            until_check = BL_CHECK;
        }
        if (!final && p->filling) {
            uint32_t k = backlog_copy(c, p, BL_CHECK, &released);
            if (k) {
                got += k;
                until_check = 0; /* copy on while the ring fills */
                if (time_to_wake(h, cap, released)) {
                    ml_ring_wake(h);
                    released = 0;
                }
                continue;
            }
            /* Nothing published, or no room: decode BL_CHECK events before
             * the next look. Looking again after each one made a collector
             * at its memory bound read /proc/self/statm per event (28x the
             * time on cppcheck). */
            p->filling = false;
            until_check = BL_CHECK;
        }
        if (p->bl_head) {
            backlog_take(c, p);
            got++;
            continue;
        }
        if (final && p->pos >= head) break;
        ml_slot_t *sl = ml_ring_peek_in(h, cap, p->pos);
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
                for (uint32_t i = 0; i < need; i++) ml_ring_release_in(h, cap, p->pos + i);
                p->pos += need;
                continue;
            }
            n = ml_ring_read_blob_in(h, cap, p->pos, (uint32_t)ev.size, c->blob, c->blob_cap);
            if (!n) {
                if (!final) break;
                /* The producer died inside the blob. */
                p->lost_in_crash += need;
                p->pos += need;
                continue;
            }
            blob = c->blob;
        }
        take_event(c, p, &ev, blob);
        for (uint32_t i = 0; i < n; i++) ml_ring_release_in(h, cap, p->pos + i);
        p->pos += n;
        got++;
        released += n;
        if (time_to_wake(h, cap, released)) {
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
