/* sim_bench.c - how fast the strategy simulator replays a large trace.
 *
 *   sim_bench [-n EVENTS] [-j THREADS] [-o TRACE] [--keep] [--each]
 *
 * Synthesizes a trace of EVENTS allocation and free records (10 million by
 * default) with the shape of a real program: 64 sites, fixed-size and varied
 * sizes from 8 bytes to 1 MiB, lifetimes from "freed at once" to "never",
 * realloc growth chains, addresses from a simple size-class heap. It is
 * written with the real trace writer and read back with the real reader, so
 * the numbers include decoding. Then every policy plus the real-allocator
 * row runs over it (THREADS workers, 2 by default) and a table is printed:
 * CPU time per policy, events per second, its peak footprint and the memory
 * its state takes, and the whole run's wall time and peak RSS. With --each,
 * every policy also runs alone in a child process, for its own peak RSS.
 *
 * Not part of ctest: `cmake --build BUILD --target sim_bench && BUILD/sim_bench`.
 */
#define _GNU_SOURCE
#include "ml_sim.h"
#include "ml_trace_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* --- the synthetic program ------------------------------------------------ */

typedef struct {
    uint64_t ptr, size;
    uint64_t death; /* event index; UINT64_MAX: never */
    uint32_t site;
    uint32_t chain; /* realloc steps left */
} blk_t;

/* min-heap of live blocks by death */
static blk_t *heap;
static size_t nheap, capheap;

static void heap_push(blk_t b) {
    if (nheap == capheap) {
        capheap = capheap ? capheap * 2 : 1 << 16;
        heap = realloc(heap, capheap * sizeof *heap);
        if (!heap) abort();
    }
    size_t i = nheap++;
    while (i && heap[(i - 1) / 2].death > b.death) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = b;
}

static blk_t heap_pop(void) {
    blk_t top = heap[0], last = heap[--nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= nheap) break;
        if (c + 1 < nheap && heap[c + 1].death < heap[c].death) c++;
        if (heap[c].death >= last.death) break;
        heap[i] = heap[c];
        i = c;
    }
    if (nheap) heap[i] = last;
    return top;
}

/* Addresses: a size-class heap (exact 16-byte classes to 1 KiB, powers of
 * two above, mmap-like regions above 128 KiB), LIFO reuse per class. */
#define NCLS 80
static uint64_t *freelist[NCLS];
static size_t nfree[NCLS], capfree[NCLS];
static uint64_t brk_top = 0x555555560000ull, map_top = 0x7f0000000000ull;

static unsigned cls_of(uint64_t size, uint64_t *csize) {
    if (size <= 1024) {
        *csize = (size + 15) & ~15ull;
        if (!*csize) *csize = 16;
        return (unsigned)(*csize / 16);
    }
    unsigned k = 64 - (unsigned)__builtin_clzll(size - 1);
    *csize = 1ull << k;
    return 64 + k - 10;
}

static uint64_t addr_alloc(uint64_t size) {
    if (size > 128 * 1024) {
        uint64_t a = map_top;
        map_top += (size + 4095 + 4096) & ~4095ull;
        return a;
    }
    uint64_t cs;
    unsigned c = cls_of(size, &cs);
    if (nfree[c]) return freelist[c][--nfree[c]];
    uint64_t a = brk_top + 16;
    brk_top += cs + 16;
    return a;
}

static void addr_free(uint64_t a, uint64_t size) {
    if (size > 128 * 1024) return;
    uint64_t cs;
    unsigned c = cls_of(size, &cs);
    if (nfree[c] == capfree[c]) {
        capfree[c] = capfree[c] ? capfree[c] * 2 : 1024;
        freelist[c] = realloc(freelist[c], capfree[c] * sizeof(uint64_t));
        if (!freelist[c]) abort();
    }
    freelist[c][nfree[c]++] = a;
}

typedef struct {
    int kind;      /* 0 fixed, 1 varied small, 2 varied medium, 3 large, 4 realloc chain */
    uint64_t size; /* fixed size or upper bound */
    int life;      /* 0 temporary, 1 short, 2 medium, 3 long, 4 mostly never */
    int weight;
} site_t;

static site_t sites[64];

static void make_sites(void) {
    for (int i = 0; i < 64; i++) {
        site_t *s = &sites[i];
        s->kind = i % 8 < 3 ? 0 : i % 8 < 5 ? 1 : i % 8 < 7 ? 2 : (i % 16 == 7 ? 3 : 4);
        s->size = s->kind == 0 ? 16 + 8 * (rnd() % 60) : s->kind == 1 ? 256 : s->kind == 2 ? 8192 : 1 << 20;
        s->life = (int)(rnd() % 5);
        s->weight = 1 + (int)(rnd() % 20);
    }
}

static uint64_t lifetime(int life) {
    switch (life) {
    case 0: return 1;
    case 1: return 1 + rnd() % 100;
    case 2: return 1 + rnd() % 20000;
    case 3: return 1 + rnd() % 2000000;
    default: return rnd() % 4 ? UINT64_MAX : 1 + rnd() % 200000;
    }
}

static int write_trace(const char *path, uint64_t events) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -errno;
    ml_writer_t *w;
    int rc = ml_writer_new(fd, 1, &w);
    if (rc < 0) return rc;
    make_sites();
    int total_w = 0;
    for (int i = 0; i < 64; i++) total_w += sites[i].weight;
    ml_record_t r;
    memset(&r, 0, sizeof r);
    r.tag = ML_T_PROCESS;
    r.u.process.page_size = 4096;
    r.u.process.exe = "sim_bench";
    r.u.process.producer = "sim_bench";
    r.u.process.parent_trace = "";
    ml_writer_add(w, &r);
    uint64_t ev = 0;
    uint64_t target_live = 200000;
    while (ev < events) {
        memset(&r, 0, sizeof r);
        r.time_ms = (uint32_t)(ev / 20000);
        if (nheap && (heap[0].death <= ev || (nheap > target_live && heap[0].death != UINT64_MAX))) {
            blk_t b = heap_pop();
            if (b.chain) { /* grow in place of free: a realloc step */
                uint64_t nsize = b.size + 1 + rnd() % 64;
                r.tag = ML_T_FREE;
                r.u.alloc.kind = ML_KIND_REALLOC;
                r.u.alloc.ptr = b.ptr;
                ml_writer_add(w, &r);
                addr_free(b.ptr, b.size);
                b.ptr = addr_alloc(nsize);
                b.size = nsize;
                b.chain--;
                b.death = b.chain ? ev + 2 : ev + lifetime(2);
                r.tag = ML_T_ALLOC;
                r.u.alloc.kind = ML_KIND_REALLOC;
                r.u.alloc.ptr = b.ptr;
                r.u.alloc.size = nsize;
                r.u.alloc.stack = b.site + 1;
                ml_writer_add(w, &r);
                heap_push(b);
                ev += 2;
                continue;
            }
            r.tag = ML_T_FREE;
            r.u.alloc.kind = ML_KIND_FREE;
            r.u.alloc.ptr = b.ptr;
            ml_writer_add(w, &r);
            addr_free(b.ptr, b.size);
            ev++;
            continue;
        }
        int pick = (int)(rnd() % (uint64_t)total_w), si = 0;
        while (pick >= sites[si].weight) pick -= sites[si++].weight;
        site_t *s = &sites[si];
        blk_t b = {.site = (uint32_t)si};
        switch (s->kind) {
        case 0: b.size = s->size; break;
        case 1: b.size = 8 + rnd() % s->size; break;
        case 2: b.size = 8 + (rnd() % 2 ? rnd() % 512 : rnd() % s->size); break;
        case 3: b.size = 4096 + rnd() % s->size; break;
        default: b.size = 8; b.chain = 1 + (uint32_t)(rnd() % 200); break;
        }
        b.ptr = addr_alloc(b.size);
        b.death = b.chain ? ev + 2 : ev + lifetime(s->life);
        r.tag = ML_T_ALLOC;
        r.u.alloc.kind = ML_KIND_MALLOC;
        r.u.alloc.ptr = b.ptr;
        r.u.alloc.size = b.size;
        r.u.alloc.stack = (uint32_t)si + 1;
        ml_writer_add(w, &r);
        heap_push(b);
        ev++;
    }
    memset(&r, 0, sizeof r);
    r.tag = ML_T_END;
    ml_writer_add(w, &r);
    rc = ml_writer_free(w);
    close(fd);
    free(heap);
    for (int i = 0; i < NCLS; i++) free(freelist[i]);
    return rc;
}

/* --- the measurement ------------------------------------------------------ */

static long max_rss_kib(int who) {
    struct rusage ru;
    getrusage(who, &ru);
    return ru.ru_maxrss;
}

static int run(const char *path, unsigned threads, const char *only, bool print) {
    ml_sim_replay_t *r;
    if (ml_sim_replay_new(threads, &r) < 0) return -ENOMEM;
    for (const char *const *nm = ml_sim_policy_names; *nm; nm++) {
        if (only && strcmp(only, *nm)) continue;
        ml_sim_policy_t *p;
        if (ml_sim_policy_new(*nm, NULL, &p) < 0 || ml_sim_replay_add(r, p) < 0) return -ENOMEM;
    }
    if (!only || !strcmp(only, "real")) {
        ml_sim_policy_t *p;
        if (ml_sim_real_new(NULL, &p) < 0 || ml_sim_replay_add(r, p) < 0) return -ENOMEM;
    }
    char err[256] = "";
    double t0 = now();
    int rc = ml_sim_replay_file(r, path, err, sizeof err);
    if (rc == 0) rc = ml_sim_replay_finish(r);
    double wall = now() - t0;
    if (rc < 0) {
        fprintf(stderr, "sim_bench: %s (%d)\n", err, rc);
        return rc;
    }
    uint64_t ops = ml_sim_replay_ops(r);
    if (print) {
        printf("%-16s %9s %12s %12s %11s %9s\n", "policy", "cpu s", "events/s", "peak MiB", "state MiB",
               "cost/op");
        double cpu = 0;
        for (size_t i = 0; i < ml_sim_replay_count(r); i++) {
            ml_sim_metrics_t m;
            ml_sim_replay_metrics(r, i, &m);
            cpu += m.cpu_seconds;
            printf("%-16s %9.2f %12.0f %12.1f %11.1f %9.2f\n", m.name, m.cpu_seconds,
                   m.cpu_seconds > 0 ? (double)ops / m.cpu_seconds : 0.0, m.peak_footprint / 1048576.0,
                   m.state_bytes / 1048576.0, m.cost_per_op);
        }
        printf("\nevents %lu, %zu policies, %u worker threads: wall %.2f s (policies' CPU %.2f s), "
               "%.0f events/s end to end\n",
               (unsigned long)ops, ml_sim_replay_count(r), threads, wall, cpu, (double)ops / wall);
        printf("driver state %.1f MiB, process peak RSS %.1f MiB\n",
               ml_sim_replay_state_bytes(r) / 1048576.0, max_rss_kib(RUSAGE_SELF) / 1024.0);
    } else {
        ml_sim_metrics_t m;
        ml_sim_replay_metrics(r, 0, &m);
        printf("%-16s %9.2f %12.0f %12.1f %13.1f\n", m.name, wall, (double)ops / wall,
               m.peak_footprint / 1048576.0, max_rss_kib(RUSAGE_SELF) / 1024.0);
    }
    fflush(stdout);
    ml_sim_replay_free(r);
    return 0;
}

int main(int argc, char **argv) {
    uint64_t events = 10000000;
    unsigned threads = 2;
    const char *path = NULL;
    bool keep = false, each = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) events = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-j") && i + 1 < argc) threads = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--keep")) keep = true;
        else if (!strcmp(argv[i], "--each")) each = true;
        else {
            fprintf(stderr, "usage: sim_bench [-n EVENTS] [-j THREADS] [-o TRACE] [--keep] [--each]\n");
            return 2;
        }
    }
    char tmp[256];
    if (!path) {
        snprintf(tmp, sizeof tmp, "/tmp/ml_sim_bench_%lu.mlt", (unsigned long)events);
        path = tmp;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        double t0 = now();
        int rc = write_trace(path, events);
        if (rc < 0) {
            fprintf(stderr, "sim_bench: cannot write %s: %s\n", path, strerror(-rc));
            return 1;
        }
        stat(path, &st);
        printf("wrote %s: %lu events, %.1f MiB, in %.1f s\n", path, (unsigned long)events,
               st.st_size / 1048576.0, now() - t0);
    } else {
        printf("reusing %s (%.1f MiB)\n", path, st.st_size / 1048576.0);
    }
    printf("\n");
    int rc = run(path, threads, NULL, true);
    if (rc == 0 && each) {
        printf("\neach policy alone (one thread, decoding included):\n");
        printf("%-16s %9s %12s %12s %13s\n", "policy", "wall s", "events/s", "peak MiB", "peak RSS MiB");
        const char *names[16];
        int n = 0;
        for (const char *const *nm = ml_sim_policy_names; *nm; nm++) names[n++] = *nm;
        names[n++] = "real";
        for (int i = 0; i < n; i++) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) _exit(run(path, 0, names[i], false) < 0);
            int status;
            waitpid(pid, &status, 0);
        }
    }
    if (!keep && path == tmp) unlink(path);
    return rc < 0;
}
