/* test_runtime.c - the interposer's core without the preload (STYLE 24):
 * runtime.c, sampled.c and stacks.c are linked into this test, which points
 * them at a ring of its own and calls the record paths directly from several
 * threads, while a consumer thread drains the ring as the collector does.
 * Every event is then checked field by field, in ring order.
 *
 * The preload hooks (hooks.c) are not linked: they would replace this test's
 * own malloc. Their end-to-end behaviour is test_record's.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interpose_internal.h"
#include "ml_trace_io.h"

/* ------------------------------------------------------------------------- */
/* A session of our own                                                      */
/* ------------------------------------------------------------------------- */

static ml_ctl_t *ctl;

/* The library initialised itself when this test started (its constructor):
 * without ML_CTL it stays off. Give it a session and a ring as
 * register_process would, and turn recording on. */
static ml_ring_hdr_t *session(uint32_t slots) {
    ctl = mmap(NULL, sizeof *ctl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(ctl, MAP_FAILED);
    ctl->magic = ML_CTL_MAGIC;
    ctl->version = ML_SHM_VERSION;
    ctl->collector_pid = (uint32_t)getpid();
    ctl->ring_slots = slots;
    ctl->depth = ML_DEFAULT_DEPTH;
    ml_atomic_store_relaxed(&ctl->clock_ms, 4242);
    ml_ring_hdr_t *h = mmap(NULL, ml_ring_bytes(slots), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(h, MAP_FAILED);
    ml_ring_init(h, slots);
    /* Without ML_CTL the constructor leaves initialisation to the first hook
     * call (docs/recorder.md#attach); this test calls none of the hooks. */
    if (ml__state_relaxed() == ML_STATE_UNINIT) ml__init();
    cr_assert_eq(ml__state_relaxed(), ML_STATE_OFF, "no ML_CTL: the library passes through");
    ml__ctl = ctl;
    ml__ring = h;
    ml__sample_bytes = 0;
    ml__state_set(ML_STATE_READY);
    return h;
}

/* After a test: off again, so that nothing at exit (the library's
 * destructor, a dlclose) writes into a ring nobody reads any more. */
static void leave(void) {
    ml__state_set(ML_STATE_OFF);
}

/* ------------------------------------------------------------------------- */
/* The consumer                                                              */
/* ------------------------------------------------------------------------- */

typedef struct {
    ml_event_t ev;
    uint8_t *blob; /* malloc'd payload of a blob, else NULL */
} got_t;

typedef struct {
    ml_ring_hdr_t *h;
    _Atomic int stop; /* the producers are done: drain what is left, then return */
    got_t *v;
    size_t n, cap;
    uint64_t pos;
} consumer_t;

static bool drain_one(consumer_t *c) {
    ml_slot_t *s = ml_ring_peek(c->h, c->pos);
    if (!s) return false;
    ml_event_t ev;
    memcpy(&ev, &s->ev, sizeof ev);
    uint32_t n = 1;
    uint8_t *blob = NULL;
    if (ml_ev_type(&ev) == ML_EV_BLOB) {
        blob = malloc(ev.size ? ev.size : 1);
        cr_assert_not_null(blob);
        n = ml_ring_read_blob(c->h, c->pos, (uint32_t)ev.size, blob, ev.size);
        if (!n) {
            free(blob);
            return false; /* not all of it published yet */
        }
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 4096;
        c->v = realloc(c->v, c->cap * sizeof *c->v);
        cr_assert_not_null(c->v);
    }
    c->v[c->n++] = (got_t){ev, blob};
    for (uint32_t i = 0; i < n; i++) ml_ring_release(c->h, c->pos + i);
    c->pos += n;
    ml_atomic_store_release(&c->h->tail, c->pos);
    return true;
}

static void *consume(void *arg) {
    consumer_t *c = arg;
    for (;;) {
        if (drain_one(c)) continue;
        if (ml_atomic_load_acquire(&c->stop) && c->pos == ml_atomic_load_acquire(&c->h->head)) break;
        sched_yield();
    }
    return NULL;
}

static void consumer_start(consumer_t *c, ml_ring_hdr_t *h, pthread_t *t) {
    memset(c, 0, sizeof *c);
    c->h = h;
    c->pos = ml_atomic_load_acquire(&h->tail);
    cr_assert_eq(pthread_create(t, NULL, consume, c), 0);
}

static void consumer_stop(consumer_t *c, pthread_t t) {
    ml_atomic_store_release(&c->stop, 1);
    pthread_join(t, NULL);
}

static void consumer_free(consumer_t *c) {
    for (size_t i = 0; i < c->n; i++) free(c->v[i].blob);
    free(c->v);
}

/* ------------------------------------------------------------------------- */
/* Producers                                                                 */
/* ------------------------------------------------------------------------- */

#define THREADS 8
#define EVENTS 20000

typedef struct {
    int t;
    pid_t tid;
} producer_t;

static uint64_t ptr_of(int t, uint32_t i) {
    return (uint64_t)(t + 1) << 40 | (uint64_t)i << 4;
}

/* What the hooks emit for a block, without the stack capture: an allocation
 * (size and slack packed as record_alloc packs them), its free, and every
 * 100th an mmap. */
static void *produce_events(void *arg) {
    producer_t *p = arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%d", p->t & 0xff);
    pthread_setname_np(pthread_self(), name);
    p->tid = (pid_t)syscall(SYS_gettid);
    for (uint32_t i = 0; i < EVENTS; i++) {
        uint64_t size = 16 + i % 1000;
        ml__emit(ML_EV_ALLOC, ML_KIND_CALLOC, i % 2 ? ML_EVF_SAMPLED : 0, ptr_of(p->t, i),
                 size | (uint64_t)(i % 24) << 48, (uint32_t)(p->t * 1000 + i % 13));
        ml__emit(ML_EV_FREE, ML_KIND_FREE, 0, ptr_of(p->t, i), size + i % 24, 0);
        if (i % 100 == 0) ml__emit(ML_EV_MMAP, ML_KIND_MMAP, 0, ptr_of(p->t, i) | 1, 1 << 20, 7);
    }
    return NULL;
}

/* Eight threads write into a 4096-slot ring (so they wait for the consumer
 * all the time): every event arrives exactly once, each thread's events in
 * its own order after its announcement, with every field as written. */
Test(interpose, events_from_threads_arrive_exactly, .fini = leave, .timeout = 120) {
    ml_ring_hdr_t *h = session(4096);
    consumer_t c;
    pthread_t ct, pt[THREADS];
    producer_t prod[THREADS];
    consumer_start(&c, h, &ct);
    for (int t = 0; t < THREADS; t++) {
        prod[t] = (producer_t){t, 0};
        cr_assert_eq(pthread_create(&pt[t], NULL, produce_events, &prod[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(pt[t], NULL);
    consumer_stop(&c, ct);

    uint32_t per_thread = 2 * EVENTS + EVENTS / 100;
    cr_assert_eq(c.n, (size_t)THREADS * (1 + per_thread), "events: %zu", c.n);
    cr_expect_eq(ml_atomic_load_relaxed(&h->lost), 0);
    cr_expect_gt(ml_atomic_load_relaxed(&h->waits), 0, "a 4096-slot ring makes them wait");

    /* Thread index -> producer, from the announcements (ML_BLOB_THREAD). */
    int who[THREADS];
    uint32_t next[THREADS] = {0}, phase[THREADS] = {0};
    bool seen[THREADS] = {false};
    for (int i = 0; i < THREADS; i++) who[i] = -1;
    for (size_t k = 0; k < c.n; k++) {
        const ml_event_t *e = &c.v[k].ev;
        cr_assert_lt(e->thread, THREADS, "thread index %u", e->thread);
        cr_expect_eq(e->time, 4242, "the session clock");
        ml_record_t r;
        char strings[64];
        int used = ml_event_to_record(e, c.v[k].blob, &r, strings, sizeof strings);
        cr_assert_geq(used, 0, "event %zu decodes", k);
        if (!seen[e->thread]) {
            /* A thread's first event announces it. */
            cr_assert_eq(r.tag, ML_T_THREAD, "event %zu", k);
            cr_assert_eq(r.u.thread.index, e->thread);
            int t = -1;
            for (int j = 0; j < THREADS; j++)
                if ((uint32_t)prod[j].tid == r.u.thread.tid) t = j;
            cr_assert_geq(t, 0, "tid %u is one of the producers", r.u.thread.tid);
            char name[32];
            snprintf(name, sizeof name, "worker-%d", t);
            cr_expect_str_eq(r.u.thread.name, name);
            who[e->thread] = t;
            seen[e->thread] = true;
            continue;
        }
        int t = who[e->thread];
        uint32_t i = next[e->thread];
        uint64_t size = 16 + i % 1000;
        if (phase[e->thread] == 0) {
            cr_assert_eq(r.tag, ML_T_ALLOC, "thread %d event %u", t, i);
            cr_assert_eq(r.u.alloc.kind, ML_KIND_CALLOC);
            cr_assert_eq(r.u.alloc.flags, i % 2 ? ML_EVF_SAMPLED : 0);
            cr_assert_eq(r.u.alloc.ptr, ptr_of(t, i));
            cr_assert_eq(r.u.alloc.size, size);
            cr_assert_eq(r.u.alloc.usable, size + i % 24);
            cr_assert_eq(r.u.alloc.stack, (uint32_t)(t * 1000 + i % 13));
            phase[e->thread] = 1;
        } else if (phase[e->thread] == 1) {
            cr_assert_eq(r.tag, ML_T_FREE, "thread %d event %u", t, i);
            cr_assert_eq(r.u.alloc.ptr, ptr_of(t, i));
            cr_assert_eq(r.u.alloc.usable, size + i % 24);
            if (i % 100 == 0) {
                phase[e->thread] = 2;
            } else {
                phase[e->thread] = 0;
                next[e->thread]++;
            }
        } else {
            cr_assert_eq(r.tag, ML_T_MMAP, "thread %d event %u", t, i);
            cr_assert_eq(r.u.alloc.ptr, ptr_of(t, i) | 1);
            cr_assert_eq(r.u.alloc.size, 1 << 20);
            cr_assert_eq(r.u.alloc.stack, 7);
            phase[e->thread] = 0;
            next[e->thread]++;
        }
    }
    for (int i = 0; i < THREADS; i++) {
        cr_expect(seen[i], "thread index %d announced", i);
        cr_expect_eq(next[i], EVENTS, "thread index %d: %u blocks", i, next[i]);
    }
    consumer_free(&c);
}

/* ------------------------------------------------------------------------- */
/* Blobs                                                                     */
/* ------------------------------------------------------------------------- */

static void *produce_blobs(void *arg) {
    producer_t *p = arg;
    uint8_t payload[3000];
    for (uint32_t i = 0; i < 2000; i++) {
        uint32_t len = 1 + (i * 37 + (uint32_t)p->t * 11) % sizeof payload;
        for (uint32_t k = 0; k < len; k++) payload[k] = (uint8_t)(p->t * 31 + i * 7 + k);
        ml__emit_blob(ML_BLOB_GPU, payload, len);
        ml__emit(ML_EV_REALLOC_FAIL, ML_KIND_REALLOC, 0, ptr_of(p->t, i), len, 0);
    }
    return NULL;
}

/* Blobs of 1 to 3000 bytes from four threads through a 512-slot ring: each
 * one's header and continuation slots stay together, across the ring's end,
 * and every byte arrives. */
Test(interpose, blobs_from_threads_arrive_whole, .fini = leave, .timeout = 120) {
    ml_ring_hdr_t *h = session(512);
    consumer_t c;
    pthread_t ct, pt[4];
    producer_t prod[4];
    consumer_start(&c, h, &ct);
    for (int t = 0; t < 4; t++) {
        prod[t] = (producer_t){t, 0};
        cr_assert_eq(pthread_create(&pt[t], NULL, produce_blobs, &prod[t]), 0);
    }
    for (int t = 0; t < 4; t++) pthread_join(pt[t], NULL);
    consumer_stop(&c, ct);
    cr_assert_eq(c.n, 4 * (1 + 2 * 2000), "events: %zu", c.n);
    uint32_t next[4] = {0};
    bool announced[4] = {false};
    int who[4] = {-1, -1, -1, -1};
    uint32_t pending_len[4] = {0};
    for (size_t k = 0; k < c.n; k++) {
        const got_t *g = &c.v[k];
        uint16_t th = g->ev.thread;
        cr_assert_lt(th, 4);
        if (!announced[th]) {
            cr_assert_eq(ml_ev_type(&g->ev), ML_EV_BLOB);
            cr_assert_eq(g->ev.kind, ML_BLOB_THREAD, "a thread's first event announces it");
            announced[th] = true;
            continue;
        }
        if (ml_ev_type(&g->ev) == ML_EV_BLOB) {
            cr_assert_eq(g->ev.kind, ML_BLOB_GPU);
            uint32_t len = (uint32_t)g->ev.size;
            /* Which producer: the first blob's bytes start with t * 31. */
            if (who[th] < 0) who[th] = g->blob[0] / 31;
            int t = who[th];
            uint32_t i = next[th];
            cr_assert_eq(len, 1 + (i * 37 + (uint32_t)t * 11) % 3000, "thread %d blob %u", t, i);
            for (uint32_t b = 0; b < len; b++)
                cr_assert_eq(g->blob[b], (uint8_t)(t * 31 + i * 7 + b), "thread %d blob %u byte %u",
                             t, i, b);
            pending_len[th] = len;
        } else {
            int t = who[th];
            cr_assert_eq(ml_ev_type(&g->ev), ML_EV_REALLOC_FAIL);
            cr_assert_eq(g->ev.ptr, ptr_of(t, next[th]));
            cr_assert_eq(g->ev.size, pending_len[th], "the event after its blob");
            next[th]++;
        }
    }
    for (int i = 0; i < 4; i++) cr_expect_eq(next[i], 2000);
    cr_expect_eq(ml_atomic_load_relaxed(&h->lost), 0);
    consumer_free(&c);
}

/* ------------------------------------------------------------------------- */
/* The module map                                                            */
/* ------------------------------------------------------------------------- */

/* Whether /proc/self/maps (the kernel's view, independent of
 * dl_iterate_phdr) maps `path` at `start`. */
static bool mapped_at(const char *path, uint64_t start) {
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        int at = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &at) < 2 || !at) continue;
        char *name = line + at;
        name[strcspn(name, "\n")] = '\0';
        char real[4096];
        const char *p = realpath(path, real) ? real : path;
        found = lo == start && strcmp(name, p) == 0;
    }
    fclose(f);
    return found;
}

typedef struct {
    uint64_t base;
    char path[4096];
} module_t;

static int modules_in(consumer_t *c, size_t from, module_t *m, int max, uint64_t *unloaded,
                      int *nunloaded) {
    int n = 0;
    *nunloaded = 0;
    for (size_t k = from; k < c->n; k++) {
        ml_record_t r;
        static char strings[4096 + 1 + 8192 + 1];
        if (ml_event_to_record(&c->v[k].ev, c->v[k].blob, &r, strings, sizeof strings) < 0) continue;
        if (r.tag == ML_T_MODULE && n < max) {
            m[n].base = r.u.module.base + (r.u.module.nsegs ? r.u.module.segs[0].vaddr : 0);
            snprintf(m[n].path, sizeof m[n].path, "%s", r.u.module.path);
            n++;
        } else if (r.tag == ML_T_MODULE_UNLOAD) {
            unloaded[(*nunloaded)++] = r.u.module.base;
        }
    }
    return n;
}

static int count_objects(struct dl_phdr_info *info, size_t size, void *data) {
    (void)info;
    (void)size;
    ++*(int *)data;
    return 0;
}

/* A full scan records every loaded object where the kernel maps it; a
 * dlopen'ed library appears on the next scan, and dlclose (the library's
 * own, linked here) records its unload. */
Test(interpose, module_map_follows_dlopen_and_dlclose, .fini = leave, .timeout = 60) {
    ml_ring_hdr_t *h = session(1 << 14);
    consumer_t c;
    pthread_t ct;
    consumer_start(&c, h, &ct);
    ml__tls.guard++;
    ml__modules_scan(true);
    ml__tls.guard--;
    consumer_stop(&c, ct);
    module_t m[256];
    uint64_t unl[16];
    int nun;
    int n = modules_in(&c, 0, m, 256, unl, &nun);
    int objects = 0;
    dl_iterate_phdr(count_objects, &objects);
    /* Every object but the vDSO, which has no file to map. */
    cr_expect_geq(n, objects - 1, "%d modules of %d objects", n, objects);
    cr_expect_eq(nun, 0);
    int exe = -1, libc = -1;
    for (int i = 0; i < n; i++) {
        if (strstr(m[i].path, "test_interpose")) exe = i;
        if (strstr(m[i].path, "libc.so")) libc = i;
        if (m[i].path[0] == '/' && !strstr(m[i].path, "linux-vdso"))
            cr_expect(mapped_at(m[i].path, m[i].base), "%s at %#lx", m[i].path,
                      (unsigned long)m[i].base);
    }
    cr_expect_geq(exe, 0, "the program itself");
    cr_expect_geq(libc, 0, "libc");

    consumer_free(&c);
    consumer_start(&c, h, &ct);
    void *lib = dlopen("libutil.so.1", RTLD_NOW);
    cr_assert_not_null(lib, "%s", dlerror());
    ml__tls.guard++;
    ml__modules_scan(false);
    ml__tls.guard--;
    cr_assert_eq(dlclose(lib), 0);
    consumer_stop(&c, ct);
    n = modules_in(&c, 0, m, 256, unl, &nun);
    cr_assert_eq(n, 1, "one new module");
    cr_expect(strstr(m[0].path, "libutil.so.1") != NULL, "%s", m[0].path);
    cr_expect_eq(nun, 1, "and its unload");
    consumer_free(&c);
}

/* ------------------------------------------------------------------------- */
/* A collector that is gone                                                  */
/* ------------------------------------------------------------------------- */

static void *produce_into_the_void(void *arg) {
    producer_t *p = arg;
    for (uint32_t i = 0; i < 50; i++) ml__emit(ML_EV_ALLOC, ML_KIND_MALLOC, 0, ptr_of(p->t, i), 8, 0);
    return NULL;
}

/* Nobody drains the ring and the collector's pid is dead: the producers
 * stop waiting (every ~5 ms they check it), count what they gave up, and
 * the library turns itself off. The program goes on. */
Test(interpose, a_dead_collector_turns_recording_off, .fini = leave, .timeout = 60) {
    ml_ring_hdr_t *h = session(64);
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    ctl->collector_pid = (uint32_t)dead;
    pthread_t pt[2];
    producer_t prod[2] = {{0, 0}, {1, 0}};
    for (int t = 0; t < 2; t++) cr_assert_eq(pthread_create(&pt[t], NULL, produce_into_the_void, &prod[t]), 0);
    for (int t = 0; t < 2; t++) pthread_join(pt[t], NULL);
    cr_expect_eq(ml__state_relaxed(), ML_STATE_OFF);
    /* 2 thread blobs (2 slots each) and 100 events want 104 positions: the
     * 64 the ring has room for were claimed and published, the other 40
     * given up one by one without claiming anything. */
    cr_expect_eq(ml_atomic_load_acquire(&h->head), 64);
    cr_expect_eq(ml_atomic_load_relaxed(&h->lost), 40, "lost %lu",
                 (unsigned long)ml_atomic_load_relaxed(&h->lost));
    uint64_t published = 0;
    for (uint64_t pos = 0; pos < 64; pos++) published += ml_ring_peek(h, pos) != NULL;
    cr_expect_eq(published, 64);
}

/* ------------------------------------------------------------------------- */
/* The sampled-block set                                                     */
/* ------------------------------------------------------------------------- */

#define SAMPLED 20000

/* Workers count what is wrong; the test thread asserts (Criterion's
 * assertions belong to the test's own thread). */
static _Atomic uint64_t sampled_errors;

static void *sample_blocks(void *arg) {
    producer_t *p = arg;
    for (uint32_t i = 0; i < SAMPLED; i++) ml__sampled_add((void *)(uintptr_t)ptr_of(p->t, i));
    for (uint32_t i = 0; i < SAMPLED; i++) {
        const void *q = (void *)(uintptr_t)ptr_of(p->t, i);
        if (!ml__sampled_contains(q)) ml_atomic_add_relaxed(&sampled_errors, 1);
        if (i % 2 == 0) {
            if (!ml__sampled_remove(q)) ml_atomic_add_relaxed(&sampled_errors, 1);
            if (ml__sampled_remove(q)) ml_atomic_add_relaxed(&sampled_errors, 1); /* once only */
        }
    }
    return NULL;
}

/* Eight threads add 20000 blocks each (the set grows several times under
 * them) and remove every other one: exactly the others remain. */
Test(interpose, sampled_set_from_threads, .timeout = 60) {
    pthread_t pt[THREADS];
    producer_t prod[THREADS];
    for (int t = 0; t < THREADS; t++) {
        prod[t] = (producer_t){t, 0};
        cr_assert_eq(pthread_create(&pt[t], NULL, sample_blocks, &prod[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(pt[t], NULL);
    cr_expect_eq(ml_atomic_load_relaxed(&sampled_errors), 0);
    uint64_t wrong = 0;
    for (int t = 0; t < THREADS; t++)
        for (uint32_t i = 0; i < SAMPLED; i++)
            wrong += ml__sampled_contains((void *)(uintptr_t)ptr_of(t, i)) != (i % 2 == 1);
    cr_expect_eq(wrong, 0, "blocks in the wrong state: %lu", (unsigned long)wrong);
    cr_expect_not(ml__sampled_contains((void *)(uintptr_t)ptr_of(THREADS, 0)));
}

/* ------------------------------------------------------------------------- */
/* Sampling's logarithm, without libm                                        */
/* ------------------------------------------------------------------------- */

/* ml__neg_log against libm's log: every draw of the sampler is a u in
 * [1e-12, 1), so over that range, at the points where its reduction
 * changes (powers of two, the square root of two) and at random points,
 * the two agree within 1e-10 (one term fewer in the series is off by 7e-10,
 * and a reduction to [1, 1.5) instead of sqrt(2) by 1.3e-10). */
Test(interpose, sampling_log_equals_libms) {
    double worst = 0, at = 0;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 2000000; i++) {
        double u;
        if (i < 64) {
            u = ldexp(1.0, -i % 40) * (i % 2 ? 1.0 : 0.7071067811865476); /* 2^-k and 2^-k / sqrt(2) */
        } else if (i < 128) {
            u = ldexp(1.4142135623730951, -(i - 64) % 40 - 1) * (1.0 + (double)(i % 3 - 1) * 1e-15);
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            u = (double)(x >> 11) * (1.0 / 9007199254740992.0);
            if (u < 1e-12) u = 1e-12;
        }
        if (u <= 0 || u > 1) continue;
        double d = fabs(ml__neg_log(u) - -log(u));
        if (d > worst) worst = d, at = u;
    }
    cr_expect(worst < 1e-10, "ml__neg_log is off by %g at u = %.17g", worst, at);
    cr_expect_eq(ml__neg_log(1.0), 0.0);
    cr_expect(fabs(ml__neg_log(1e-12) - 27.631021115928547) < 1e-10);
}
