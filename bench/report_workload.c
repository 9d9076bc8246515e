/* report_workload.c - an allocation-heavy program for bench/report_bench.sh:
 * N allocations from 24 call sites at several stack depths, sizes from 8 B
 * to 64 KiB, a working set of 50 000 blocks replaced at random (churn and
 * fragmentation), temporaries, reallocs, and a few leaks at exit.
 * Deterministic (fixed seed). Usage: report_workload N */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LIVE 50000

static void *live[LIVE];
static uint64_t rng = 88172645463325252ull;

static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t size_for(uint64_t r) {
    switch (r % 8) {
    case 0: return 8 + r % 24;
    case 1: case 2: return 32 + r % 96;
    case 3: case 4: return 128 + r % 384;
    case 5: return 512 + r % 3584;
    case 6: return 24;
    default: return 4096 + r % 61440;
    }
}

#define SITE(n)                                                                                    \
    __attribute__((noinline)) static void *site##n(size_t s) {                                     \
        void *p = malloc(s);                                                                       \
        if (p) memset(p, 0, s < 64 ? s : 64);                                                      \
        return p;                                                                                  \
    }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7)

typedef void *(*site_fn)(size_t);
static site_fn sites[8] = {site0, site1, site2, site3, site4, site5, site6, site7};

__attribute__((noinline)) static void *depth(int d, int k, size_t s) {
    if (d == 0) return sites[k](s);
    void *p = depth(d - 1, k, s);
    __asm__ volatile("" ::: "memory"); /* no tail call: keep the frames */
    return p;
}

__attribute__((noinline)) static void churn(long n) {
    for (long i = 0; i < n; i++) {
        uint64_t r = next();
        size_t slot = r % LIVE;
        if (r % 16 == 0) {
            void *t = depth(1, (int)(r % 8), 16); /* temporary */
            free(t);
            continue;
        }
        if (r % 32 == 1 && live[slot]) {
            void *q = realloc(live[slot], size_for(r >> 8) * 2);
            if (q) live[slot] = q;
            continue;
        }
        free(live[slot]);
        live[slot] = depth((int)((r >> 40) % 3), (int)((r >> 20) % 8), size_for(r >> 8));
    }
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    churn(n);
    /* Keep a tenth as leaks, free the rest. */
    for (long i = 0; i < LIVE; i++)
        if (i % 10) free(live[i]);
    for (long i = 0; i < LIVE; i += 10) live[i] = NULL; /* dropped: definite leaks */
    return 0;
}
