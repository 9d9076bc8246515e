/* stacks.c - taking the calling stack and interning it.
 *
 * A stack is a path in a trie whose root is "no frame" (id 0) and whose
 * nodes are (parent id, return address). Each node is assigned an id and
 * written to the ring once, as an ML_EV_NODE event, before any event can
 * refer to it; allocation events carry only the leaf id. This is heaptrack's
 * TraceTree idea, made lock-free for readers:
 *
 *   - Lookups probe an open-addressing table without locks. An entry is
 *     visible once its id is stored with release order, after pc and parent.
 *   - A miss takes a spinlock, looks again, and inserts. Inserts are rare
 *     (once per distinct call path), so the lock is off the hot path. The
 *     NODE event is put into the ring before the entry is published, so no
 *     thread can use an id whose NODE event comes later in the ring.
 *   - The table grows by allocating a larger one, copying, and publishing the
 *     new pointer. Old tables stay mapped: a reader may still be probing one,
 *     and missing there only sends it to the locked path.
 *   - Each thread remembers its previous stack and its node ids. Consecutive
 *     stacks of one thread share their outer frames (main, the event loop,
 *     ...), so only the frames below the first difference are looked up.
 */
#define _GNU_SOURCE
#include "interpose_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

typedef struct {
    _Atomic uint32_t id; /* 0: empty */
    uint32_t parent;
    uint64_t pc;
} node_entry_t;

typedef struct {
    uint64_t cap; /* entries, power of two */
    uint64_t count;
    uint64_t bytes;
    node_entry_t e[];
} node_table_t;

#define CACHE_DEPTH ML_MAX_DEPTH
#define SKIP_MAX 8

#define HASH_CACHE 256 /* entries, power of two */

typedef struct {
    uint32_t gen;
    uint32_t n;
    uintptr_t stack_hi; /* for the frame-pointer walker */
    uint64_t pc[CACHE_DEPTH];
    uint32_t id[CACHE_DEPTH];
    /* Whole stacks seen recently by this thread: hash of the PCs -> leaf id.
     * A program allocates from a few hot call paths; a hit skips the trie. */
    struct {
        uint64_t hash;
        uint32_t leaf;
        uint8_t flags;
    } seen[HASH_CACHE];
} stack_cache_t;

static _Atomic(node_table_t *) table;
static _Atomic uint32_t next_id;
static _Atomic int lock;
static _Atomic uint32_t generation = 1;
static uint32_t depth = ML_DEFAULT_DEPTH;
static bool use_fp;
static uintptr_t self_lo, self_hi, unw_lo, unw_hi;
static ML_TLS stack_cache_t cache;

/* ------------------------------------------------------------------------- */
/* Table                                                                     */
/* ------------------------------------------------------------------------- */

static node_table_t *table_new(uint64_t cap) {
    uint64_t bytes = sizeof(node_table_t) + cap * sizeof(node_entry_t);
    node_table_t *t = ml__raw_alloc(bytes);
    if (!t) return NULL;
    t->cap = cap;
    t->bytes = bytes;
    return t;
}

static inline uint64_t slot_of(uint32_t parent, uint64_t pc) {
    uint64_t h = (pc ^ ((uint64_t)parent << 32 | parent)) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static inline uint32_t table_find(const node_table_t *t, uint32_t parent, uint64_t pc) {
    uint64_t mask = t->cap - 1;
    for (uint64_t i = slot_of(parent, pc) & mask;; i = (i + 1) & mask) {
        const node_entry_t *e = &t->e[i];
        uint32_t id = ml_atomic_load_acquire(&((node_entry_t *)e)->id);
        if (!id) return 0;
        if (e->pc == pc && e->parent == parent) return id;
    }
}

static void table_put(node_table_t *t, uint32_t id, uint32_t parent, uint64_t pc) {
    uint64_t mask = t->cap - 1;
    uint64_t i = slot_of(parent, pc) & mask;
    while (ml_atomic_load_relaxed(&t->e[i].id)) i = (i + 1) & mask;
    t->e[i].parent = parent;
    t->e[i].pc = pc;
    ml_atomic_store_release(&t->e[i].id, id);
    t->count++;
}

void ml__stacks_lock(void) {
    ml__spin_lock(&lock);
}

void ml__stacks_unlock(void) {
    ml__spin_unlock(&lock);
}

/* Slow path: insert (parent, pc) under the lock. Returns 0 if the table
 * cannot grow (the caller truncates the stack there). */
static uint32_t node_insert(uint32_t parent, uint64_t pc) {
    ml__stacks_lock();
    node_table_t *t = ml_atomic_load_acquire(&table);
    uint32_t id = table_find(t, parent, pc);
    if (id) goto out;
    if ((t->count + 1) * 2 > t->cap) {
        node_table_t *n = table_new(t->cap * 4);
        if (!n) goto out;
        for (uint64_t i = 0; i < t->cap; i++) {
            uint32_t eid = ml_atomic_load_relaxed(&t->e[i].id);
            if (eid) table_put(n, eid, t->e[i].parent, t->e[i].pc);
        }
        ml_atomic_store_release(&table, n);
        t = n;
    }
    id = ml_atomic_add_relaxed(&next_id, 1) + 1;
    ml__emit(ML_EV_NODE, 0, 0, pc, parent, id);
    table_put(t, id, parent, pc);
out:
    ml__stacks_unlock();
    return id;
}

static inline uint32_t node_get(uint32_t parent, uint64_t pc) {
    uint32_t id = table_find(ml_atomic_load_acquire(&table), parent, pc);
    return id ? id : node_insert(parent, pc);
}

/* ------------------------------------------------------------------------- */
/* Unwinding                                                                 */
/* ------------------------------------------------------------------------- */

typedef struct {
    uintptr_t addr, lo, hi;
} range_query_t;

static int range_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    range_query_t *q = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (q->addr >= lo && q->addr < hi) {
            q->lo = lo;
            q->hi = hi;
            return 1;
        }
    }
    return 0;
}

static void exec_range(void *addr, uintptr_t *lo, uintptr_t *hi) {
    range_query_t q = {(uintptr_t)addr, 0, 0};
    dl_iterate_phdr(range_cb, &q);
    *lo = q.lo;
    *hi = q.hi;
}

static inline bool is_own_frame(uintptr_t pc) {
    return (pc >= self_lo && pc < self_hi) || (pc >= unw_lo && pc < unw_hi);
}

/* Frame-pointer walk: fast, and safe because every frame pointer is checked
 * to lie above the previous one and inside this thread's stack. Programs
 * built without frame pointers give short stacks; that is the trade-off the
 * user chose with --unwind fp. */
static int fp_backtrace(void **buf, int max) {
    if (ml_unlikely(!cache.stack_hi)) {
        pthread_attr_t a;
        void *addr;
        size_t size;
        cache.stack_hi = (uintptr_t)-1;
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
            if (pthread_attr_getstack(&a, &addr, &size) == 0)
                cache.stack_hi = (uintptr_t)addr + size;
            pthread_attr_destroy(&a);
        }
    }
    uintptr_t *fp = __builtin_frame_address(0);
    uintptr_t hi = cache.stack_hi;
    int n = 0;
    while (n < max) {
        if ((uintptr_t)fp & 7 || (uintptr_t)fp + 16 > hi) break;
        uintptr_t ret = fp[1];
        if (ret < 4096) break;
        buf[n++] = (void *)ret;
        uintptr_t *next = (uintptr_t *)fp[0];
        if (next <= fp) break;
        fp = next;
    }
    return n;
}

uint32_t ml__stack_capture(uint8_t *flags) {
    void *buf[ML_MAX_DEPTH + SKIP_MAX];
    int max = (int)depth + SKIP_MAX;
    int n = use_fp ? fp_backtrace(buf, max) : unw_backtrace(buf, max);
    int skip = 0;
    while (skip < n && is_own_frame((uintptr_t)buf[skip])) skip++;
    void **pcs = buf + skip;
    n -= skip;
    if (n > (int)depth) {
        n = (int)depth;
        *flags |= ML_EVF_TRUNCATED;
    } else if (n + skip == max) {
        *flags |= ML_EVF_TRUNCATED;
    }
    if (n <= 0) return 0;

    stack_cache_t *c = &cache;
    uint32_t gen = ml_atomic_load_relaxed(&generation);
    if (c->gen != gen) {
        c->gen = gen;
        c->n = 0;
        memset(c->seen, 0, sizeof c->seen);
    }
    /* 64-bit hash of the whole stack (depth included). Two different stacks
     * share one only with probability ~2^-64 per pair. */
    /* Four independent multiply chains, so the loop runs at the multiplier's
     * throughput rather than its latency; mixed together at the end. */
    uint64_t h0 = (uint64_t)n, h1 = 0x243f6a8885a308d3ull, h2 = 0x13198a2e03707344ull,
             h3 = 0xa4093822299f31d0ull;
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        h0 = (h0 ^ (uint64_t)pcs[j]) * 0xff51afd7ed558ccdull;
        h1 = (h1 ^ (uint64_t)pcs[j + 1]) * 0xc4ceb9fe1a85ec53ull;
        h2 = (h2 ^ (uint64_t)pcs[j + 2]) * 0x9e3779b97f4a7c15ull;
        h3 = (h3 ^ (uint64_t)pcs[j + 3]) * 0xd6e8feb86659fd93ull;
    }
    for (; j < n; j++) h0 = (h0 ^ (uint64_t)pcs[j]) * 0xff51afd7ed558ccdull;
    uint64_t hash = h0 ^ (h1 >> 17 | h1 << 47) ^ (h2 >> 31 | h2 << 33) ^ (h3 >> 43 | h3 << 21);
    hash = (hash ^ (hash >> 33)) * 0xff51afd7ed558ccdull;
    hash ^= hash >> 29;
    hash |= 1; /* 0 marks an empty entry */
    unsigned slot = (unsigned)(hash >> 40) & (HASH_CACHE - 1);
    if (c->seen[slot].hash == hash) {
        *flags |= c->seen[slot].flags;
        if (*flags & ML_EVF_TRUNCATED) ml_atomic_add_relaxed(&ml__ring->truncated, 1);
        return c->seen[slot].leaf;
    }
    /* Shared outer frames with the previous stack of this thread. */
    int k = 0;
    int m = (int)c->n < n ? (int)c->n : n;
    while (k < m && c->pc[c->n - 1 - k] == (uint64_t)pcs[n - 1 - k]) k++;
    uint32_t parent = k ? c->id[c->n - k] : 0;
    /* Re-base the cache on the new stack: entries [n-k, n) are kept. */
    if ((int)c->n != n && k) {
        memmove(&c->pc[n - k], &c->pc[c->n - k], (size_t)k * sizeof c->pc[0]);
        memmove(&c->id[n - k], &c->id[c->n - k], (size_t)k * sizeof c->id[0]);
    }
    for (int i = n - 1 - k; i >= 0; i--) {
        uint32_t id = node_get(parent, (uint64_t)pcs[i]);
        if (!id) {
            /* The table is full: keep the outer part, flag the cut. */
            ml_atomic_add_relaxed(&ml__ring->truncated, 1);
            *flags |= ML_EVF_TRUNCATED;
            c->n = 0;
            return parent;
        }
        c->pc[i] = (uint64_t)pcs[i];
        c->id[i] = id;
        parent = id;
    }
    c->n = (uint32_t)n;
    c->seen[slot].hash = hash;
    c->seen[slot].leaf = parent;
    c->seen[slot].flags = *flags & ML_EVF_TRUNCATED;
    if (*flags & ML_EVF_TRUNCATED) ml_atomic_add_relaxed(&ml__ring->truncated, 1);
    return parent;
}

uint64_t ml__exit_caller_sp(void) {
    unw_context_t ctx;
    unw_cursor_t cur;
    if (unw_getcontext(&ctx) < 0 || unw_init_local(&cur, &ctx) < 0) return 0;
    bool in_exit = false;
    for (int i = 0; i < 64 && unw_step(&cur) > 0; i++) {
        unw_word_t sp = 0;
        if (in_exit) return unw_get_reg(&cur, UNW_REG_SP, &sp) == 0 ? (uint64_t)sp : 0;
        unw_proc_info_t pi;
        Dl_info di;
        /* The frame is exit's when its function starts where the dynamic
         * symbol "exit" does (IPs inside local functions such as
         * __run_exit_handlers name the nearest export, but not its start). */
        if (unw_get_proc_info(&cur, &pi) == 0 && pi.start_ip &&
            dladdr((void *)(uintptr_t)pi.start_ip, &di) && di.dli_sname &&
            (uintptr_t)di.dli_saddr == (uintptr_t)pi.start_ip && !strcmp(di.dli_sname, "exit"))
            in_exit = true;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Set-up                                                                    */
/* ------------------------------------------------------------------------- */

int ml__stacks_init(void) {
    depth = ml__ctl->depth ? ml__ctl->depth : ML_DEFAULT_DEPTH;
    if (depth > ML_MAX_DEPTH) depth = ML_MAX_DEPTH;
    use_fp = ml__ctl->options & ML_OPT_UNWIND_FP;
    node_table_t *t = table_new(1u << 14);
    if (!t) return -1;
    ml_atomic_store_release(&table, t);
    exec_range((void *)ml__stack_capture, &self_lo, &self_hi);
    exec_range((void *)unw_backtrace, &unw_lo, &unw_hi);
    if (!use_fp) {
        unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
        unw_set_cache_size(unw_local_addr_space, 1024, 0);
        /* unw_backtrace creates its per-thread cache key (pthread_key_create)
         * on its first call. Made later, inside a hook, after the program
         * created 32 keys, that key would get an index past glibc's first
         * level, and its pthread_setspecific would calloc glibc's
         * second-level key array inside the hook: an allocation we skip,
         * which the program's own keys then live in (its blocks would look
         * definitely lost). Created now, before the program runs, the key
         * is among the first 32 and needs no array. */
        void *pc[2];
        unw_backtrace(pc, 2);
    }
    return 0;
}

void ml__stacks_reset(void) {
    /* After fork the child starts a new trace: ids restart at 1 and every
     * node will be written again. The parent's tables are private copies
     * now; drop them (the pages are copy-on-write and mostly shared). */
    node_table_t *t = table_new(1u << 14);
    if (t) ml_atomic_store_release(&table, t);
    ml_atomic_store_relaxed(&next_id, 0);
    ml_atomic_add_relaxed(&generation, 1);
}
