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
 *   - The table doubles once three quarters full, by allocating a larger
 *     one, copying, and publishing the new pointer. Old tables stay mapped,
 *     their entries' pages given back as the copy passes them
 *     (table_drop_range): a reader may still be probing one, and missing
 *     there only sends it to the locked path, which waits for the copy.
 *   - Each thread remembers its previous stack and its node ids. Consecutive
 *     stacks of one thread share their outer frames (main, the event loop,
 *     ...), so only the frames below the first difference are looked up.
 *   - Each thread also remembers, for the last few hundred places it
 *     allocated from (return address and stack pointer at the call), the
 *     whole walk made there and the leaf id it gave (unwind.h,
 *     ml_uw_memo_t). A call from such a place whose stack words are all as
 *     they were gets that leaf id without a walk, a hash or the trie.
 *
 * Taking the stack (the default, exact mode) is unwind.c's walker, which
 * proves the outer frames unchanged instead of walking them again and hands
 * the stacks it cannot walk exactly to libunwind; `--unwind fp` walks frame
 * pointers. `--unwind verify` (ML_OPT_UNWIND_VERIFY) takes every stack twice,
 * the second time with a plain libunwind step loop without caches, and counts
 * the stacks that differ in the ring header; the collector writes the counts
 * into the trace (an unwind-check record) and prints them.
 */
#define _GNU_SOURCE
#include "interpose_internal.h"
#include "unwind.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
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
#define SKIP_MAX ML_UW_SKIP_MAX

#define HASH_CACHE 256 /* entries, power of two */

/* The cache of the paths that do not use the walker (--unwind fp, and the
 * stacks handed to libunwind). */
typedef struct {
    uint32_t gen;
    uint32_t n;
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

/* Everything a thread keeps between two stacks (about 330 KiB, of which
 * 260 KiB are the memo; pages are touched as they are used), in memory
 * of our own rather than in TLS, which glibc carves out of every thread's
 * stack. Taken at the thread's first stack, returned to a free list when it
 * exits (a pthread key's destructor). */
#define FRAME_SEEN 1024 /* entries, power of two */
#define SEEN_IDS 4
#define MEMO_SETS 64 /* power of two */
#define MEMO_WAYS 8
#ifndef MEMO_MIN_WALK
#define MEMO_MIN_WALK 4 /* the memo is used while walks step this many frames on average */
#endif
/* The keys (a hash of the start's pc and rsp) of one memo set's ways, in
 * one cache line, so that a lookup reads one entry at most (the key only
 * filters: the entry compares pc and rsp themselves). */
typedef struct {
    uint32_t key[MEMO_WAYS];
    uint32_t next; /* the way to replace next */
} memo_set_t;
#define ID_KNOWN ML_UWF_USER /* ml_uw_frame_t.flags: `id` is the frame's node id */

/* libunwind's context and cursor of one walk by its step loop. */
typedef struct {
    unw_context_t uc;
    unw_cursor_t cur;
} step_mem_t;

typedef struct thread_state_s {
    struct thread_state_s *next_free;
    uint32_t gen;       /* generation of the node ids below */
    uint32_t last_kept; /* outer frames the last walk kept from the one before */
    stack_cache_t cache;
    ml_uw_thread_t uw;
    ml_uw_stack_t stack; /* the last walk; a frame's id is known when ID_KNOWN */
    /* Whole walks by their start (see ml_uw_memo_t), with the stack's leaf
     * id. An entry counts only under the current memo_tag, which moves when
     * the ids restart (fork) and when another thread takes this state over. */
    uint32_t memo_tag;
    int32_t walk_avg;  /* frames a stack costs to walk, x16: moving average of 32 stacks */
    uint64_t behind;   /* the loader's load count for which ml__modules_scan_behind gave up */
    memo_set_t memo_set[MEMO_SETS];
    ml_uw_memo_t memo[MEMO_SETS][MEMO_WAYS];
    /* Inner parts seen recently: hash of (the node id of the outer part,
     * the pcs below it, the generation) -> the node ids of the innermost SEEN_IDS frames. A
     * hit interns a stack without touching the trie; the ids of frames
     * further out, if any, stay unknown until a later stack needs one
     * (frame_id). */
    struct {
        uint64_t hash;
        uint32_t id[SEEN_IDS]; /* id[0]: the leaf, then outward */
    } seen[FRAME_SEEN];
    /* The return addresses of a walk by libunwind (capture_slow), here
     * rather than on the program's stack: a signal handler's malloc on an
     * alternate stack of SIGSTKSZ bytes comes that way (the walker does not
     * cross signal frames), and with 2 KiB more of ours there, memlens
     * wrote below the stack the program gave. One walk at a time: the
     * guard is up, and a handler's call nested in it is not walked. */
    void *walk_buf[ML_UW_CAP];
    /* libunwind's context and cursor for a walk on an alternate signal
     * stack (capture_slow), off that stack for the same reason. */
    step_mem_t step;
    void *verify_pcs[ML_MAX_DEPTH]; /* --unwind verify: the recorded stack (verify_stack) */
    bool unw_ready; /* this thread made its first unw_backtrace call (fallback_walk) */
} thread_state_t;

static _Atomic(node_table_t *) table;
static _Atomic uint32_t next_id;
static _Atomic int lock;
static _Atomic uint32_t generation = 1;
/* Parked entries live in one pool taken at start-up: memory mapped when an
 * object is unloaded would take the hole it left, and the next object
 * would be loaded elsewhere. Sets are packed in the order they were parked;
 * one taken out moves the later ones down. */
#define POOL_NODES 65536
static ml_parked_node_t *pool;
static uint32_t pool_used;

static uint32_t depth = ML_DEFAULT_DEPTH;
static bool use_fp, verify, fast;
static uintptr_t self_lo, self_hi;
/* libunwind's code: its pipe2 calls (below), and its syscall(SYS_write) for
 * syscall_x86_64.S, which reads these two. */
uintptr_t ml__unw_lo, ml__unw_hi;
static ML_TLS uintptr_t fp_stack_hi; /* for the frame-pointer walker */
static ML_TLS thread_state_t *my_state;
static thread_state_t *free_states;
static _Atomic int states_lock;
/* Each thread's state goes back to free_states when the thread ends, by
 * this key's destructor. The key is one of the program's PTHREAD_KEYS_MAX:
 * when the program asks for a key and there is none left, memlens gives
 * this one back (pthread_key_create below), and the states of threads that
 * end after that are not reused. Both under states_lock, so that no
 * thread's pthread_setspecific can reach the program's key of the same
 * index. */
static pthread_key_t state_key;
static bool have_key;
static int (*real_key_create)(pthread_key_t *, void (*)(void *));
/* libunwind's unw_backtrace creates a key too, for its per-thread trace
 * cache, and sets it in each thread's first call. It is known when memlens
 * made libunwind create it at start-up (unw_key_known), and can then be
 * given back the same way: from then on (unw_gone) the fallback walk is
 * libunwind's step loop, which takes no key. A thread's first call runs
 * under states_lock, so that none sets the key once it is given back. */
static pthread_key_t unw_key;
static bool unw_key_known, unw_gone;

/* In verify mode, every node's (parent, pc) by id, so that the check reads
 * the stack back from the leaf id the event carries: it covers interning
 * (the trie, the caches of known paths) as well as the walk. */
#define VERIFY_NODES (1u << 22)
static uint64_t *vnode_pc;
static uint32_t *vnode_parent;


/* ------------------------------------------------------------------------- */
/* Table                                                                     */
/* ------------------------------------------------------------------------- */

#define TABLE_HUGE_MIN ((uint64_t)8 << 20)
static node_table_t *table_new(uint64_t cap) {
    uint64_t bytes = sizeof(node_table_t) + cap * sizeof(node_entry_t);
    node_table_t *t = ml__raw_alloc(bytes);
    if (!t) return NULL;
    if (bytes >= TABLE_HUGE_MIN) syscall(SYS_madvise, t, bytes, MADV_HUGEPAGE);
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
        if (__atomic_load_n(&e->pc, __ATOMIC_RELAXED) == pc && e->parent == parent) {
            /* A growth may give this page back between the loads above
             * (table_copy): the fields read after it are zeros, and a root
             * frame's parent is 0, so a match could pair this id with
             * another node's pc. The id read again after them is then 0,
             * and the locked path decides. */
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            return ml_atomic_load_relaxed(&((node_entry_t *)e)->id) == id ? id : 0;
        }
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

/* A parked entry's pc in the table (ml__stacks_park): no return address is
 * this, so no lookup finds it; the slot stays taken, as a probe must go on
 * past it, until the table grows and leaves it out. */
#define PC_PARKED UINT64_MAX

/* Gives the pages wholly inside t's entries [from, to) back to the kernel.
 * The mapping stays: a thread may still be probing the table, lock-free.
 * Such a probe reads the dropped pages as zeros, that is as empty slots, and
 * ends in node_insert, which looks again in the current table under the
 * lock (so it waits for a copy in progress, and then finds the new table).
 * The header page (cap, read once before probing) is never given back. */
static void table_drop_range(node_table_t *t, uint64_t from, uint64_t to) {
    uintptr_t page = (uintptr_t)getauxval(AT_PAGESZ);
    if (!page) page = 4096;
    uintptr_t lo = ((uintptr_t)&t->e[from] + page - 1) & ~(page - 1);
    uintptr_t hi = (uintptr_t)&t->e[to] & ~(page - 1);
    if (hi > lo) syscall(SYS_madvise, lo, hi - lo, MADV_DONTNEED);
}

/* Copies `from` into `to` and gives `from`'s entries back as the copy
 * passes them, a block at a time, so that the two tables are never
 * resident whole at once: the old one is half the new one's size, and
 * growing used to put 1.5 times the new table in the program's RSS for a
 * moment (clang compiling gtest-all.cc, 1.76 M nodes: 96 MiB at the
 * growth to 2^22 entries, in the peak RSS the report gives as the
 * program's; docs/analysis.md, "Peak RSS"). Under the lock. */
#define COPY_BLOCK 4096 /* entries: 64 KiB */
static void table_copy(node_table_t *to, node_table_t *from) {
    for (uint64_t b = 0; b < from->cap; b += COPY_BLOCK) {
        uint64_t end = b + COPY_BLOCK < from->cap ? b + COPY_BLOCK : from->cap;
        for (uint64_t i = b; i < end; i++) {
            uint32_t eid = ml_atomic_load_relaxed(&from->e[i].id);
            if (eid && from->e[i].pc != PC_PARKED) table_put(to, eid, from->e[i].parent, from->e[i].pc);
        }
        table_drop_range(from, b, end);
    }
}

/* Under the lock: the table in a larger copy with room for `more` entries
 * (it stays at most 3/4 full), swapped in; the old one's entries are given
 * back while they are copied. NULL
 * when no memory: the table stays as it was. */
static node_table_t *table_grow(node_table_t *t, uint64_t more) {
    uint64_t cap = t->cap * 2;
    while ((t->count + more) * 4 > cap * 3) cap *= 2;
    node_table_t *n = table_new(cap);
    if (!n) return NULL;
    table_copy(n, t); /* gives t's entries back as it goes */
    ml_atomic_store_release(&table, n);
    return n;
}

/* For fork: every lock of this file and of unwind.c, so that the child
 * never inherits one held by a thread that no longer exists. */
void ml__stacks_lock(void) {
    ml__spin_lock(&lock);
    ml__uw_lock();
    ml__spin_lock(&states_lock);
}

void ml__stacks_unlock(void) {
    ml__spin_unlock(&states_lock);
    ml__uw_unlock();
    ml__spin_unlock(&lock);
}

/* The address ranges of the objects in the module map (runtime.c sets
 * them after each scan that changed it), read under `lock`. */
#define MAX_RANGES 4096
static struct {
    uint64_t lo, hi;
} ranges[MAX_RANGES];
static uint32_t nranges, last_range;

void ml__stacks_set_modules(const uint64_t (*lohi)[2], uint32_t n) {
    if (n > MAX_RANGES) n = MAX_RANGES;
    ml__spin_lock(&lock);
    for (uint32_t i = 0; i < n; i++) ranges[i].lo = lohi[i][0], ranges[i].hi = lohi[i][1];
    nranges = n;
    last_range = 0;
    ml__spin_unlock(&lock);
}

/* Whether pc is in a recorded object (true when none is known yet). Most
 * new nodes are in the object of the one before. */
static bool pc_in_modules(uint64_t pc) {
    if (!nranges) return true;
    if (last_range < nranges && pc >= ranges[last_range].lo && pc < ranges[last_range].hi) return true;
    for (uint32_t i = 0; i < nranges; i++)
        if (pc >= ranges[i].lo && pc < ranges[i].hi) {
            last_range = i;
            return true;
        }
    return false;
}

/* Under the lock: node id (parent, pc), new, announced to the collector
 * and put in the table t (which has room). */
static inline void node_add(node_table_t *t, uint32_t id, uint32_t parent, uint64_t pc) {
    if (vnode_pc && id < VERIFY_NODES) {
        vnode_pc[id] = pc;
        vnode_parent[id] = parent;
    }
    ml__emit(ML_EV_NODE, 0, 0, pc, parent, id);
    table_put(t, id, parent, pc);
    /* A return address outside every object the module map has recorded
     * may be in one glibc loaded itself (iconv's gconv modules, NSS), which
     * no dlopen of ours announced: the event's attention check then looks
     * at the loader's list, and the analysis gives the node to the module
     * recorded after it (analysis.c, add_node). Before, such an object was
     * recorded at the next dlopen or at exit, and not at all when glibc
     * had unloaded it by then: its frames stayed addresses. */
    if (!pc_in_modules(pc) && ml_atomic_load_relaxed(&ml__modcheck) <= 0)
        ml_atomic_store_relaxed(&ml__modcheck, 1);
}

/* Slow path: insert (parent, pc) under the lock. Returns 0 if the table
 * cannot grow (the caller truncates the stack there). */
static uint32_t node_insert(uint32_t parent, uint64_t pc) {
    ml__spin_lock(&lock);
    node_table_t *t = ml_atomic_load_acquire(&table);
    uint32_t id = table_find(t, parent, pc);
    if (id) goto out;
    if ((t->count + 1) * 4 > t->cap * 3 && !(t = table_grow(t, 1))) goto out;
    id = ml_atomic_add_relaxed(&next_id, 1) + 1;
    node_add(t, id, parent, pc);
out:
    ml__spin_unlock(&lock);
    return id;
}

/* A run of new frames (strided, so that both callers' layouts fit): frame
 * k's pc at pc0 + k * pc_step bytes, its id written at id0 + k * id_step. */
typedef struct {
    const char *pc0;
    ptrdiff_t pc_step;
    char *id0;
    ptrdiff_t id_step;
} run_t;

static inline uint64_t run_pc(const run_t *r, int k) {
    uint64_t pc;
    memcpy(&pc, r->pc0 + k * r->pc_step, sizeof pc);
    return pc;
}

static inline void run_set_id(const run_t *r, int k, uint32_t id) {
    memcpy(r->id0 + k * r->id_step, &id, sizeof id);
}

#define RUN_AHEAD 8 /* slots prefetched ahead of the insert */

/* Interns frames 0..n) of r, outermost first, below `parent`, after a
 * lookup of frame 0 missed: under one hold of the lock, the frames another
 * thread interned meanwhile are found, and from the first that is missing
 * on, every later frame is missing too (its parent is new), so they are
 * inserted without a lookup. Their ids come in order, so each one's key,
 * and its slot, is known before the first insert: the slots are prefetched
 * RUN_AHEAD inserts ahead, and the cache misses of a deep new path overlap
 * instead of following one another (a binary recursion to 2^20 leaves, 40
 * frames deep: 10.5 M nodes). Returns how many frames got ids: fewer than
 * n when the table cannot grow. */
static int node_insert_run(uint32_t parent, const run_t *r, int n) {
    ml__spin_lock(&lock);
    node_table_t *t = ml_atomic_load_acquire(&table);
    int i = 0;
    for (; i < n; i++) {
        uint32_t id = table_find(t, parent, run_pc(r, i));
        if (!id) break;
        run_set_id(r, i, id);
        parent = id;
    }
    int m = n - i;
    if (m > 0 && (t->count + (uint64_t)m) * 4 > t->cap * 3) {
        node_table_t *g = table_grow(t, (uint64_t)m);
        if (!g) {
            /* No room for the whole run: one at a time, as far as it goes. */
            ml__spin_unlock(&lock);
            for (; i < n; i++) {
                uint32_t id = node_insert(parent, run_pc(r, i));
                if (!id) break;
                run_set_id(r, i, id);
                parent = id;
            }
            return i;
        }
        t = g;
    }
    if (m > 0) {
        uint64_t mask = t->cap - 1;
        uint32_t first = ml_atomic_add_relaxed(&next_id, (uint32_t)m) + 1;
        for (int k = 0; k < m && k < RUN_AHEAD; k++)
            __builtin_prefetch(&t->e[slot_of(k ? first + (uint32_t)k - 1 : parent, run_pc(r, i + k)) & mask], 1);
        for (int k = 0; k < m; k++) {
            if (k + RUN_AHEAD < m)
                __builtin_prefetch(&t->e[slot_of(first + (uint32_t)(k + RUN_AHEAD) - 1, run_pc(r, i + k + RUN_AHEAD)) &
                                         mask],
                                   1);
            uint32_t id = first + (uint32_t)k;
            node_add(t, id, parent, run_pc(r, i + k));
            run_set_id(r, i + k, id);
            parent = id;
        }
        i = n;
    }
    ml__spin_unlock(&lock);
    return i;
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
    return (pc >= self_lo && pc < self_hi) || (pc >= ml__unw_lo && pc < ml__unw_hi);
}

/* Whether pc lies in the code of libmemlens.so or of its libunwind (known
 * once ml__stacks_init ran; before that, nothing is). */
bool ml__own_code(const void *pc) {
    return is_own_frame((uintptr_t)pc);
}

/* Frame-pointer walk: fast, and safe because every frame pointer is checked
 * to lie above the previous one and inside this thread's stack. Programs
 * built without frame pointers give short stacks; that is the trade-off the
 * user chose with --unwind fp.
 *
 * Except where the program called the allocator: a wrapper without a frame
 * pointer (Debian's libstdc++ operator new, libc's strdup) leaves its
 * caller's return address in no frame record, and the walk went from the
 * wrapper to its caller's caller: every `new` was counted at the line that
 * called the function that made it (fx_fpnew). So the frames from the
 * first one outside memlens are stepped by their unwind rules while those
 * say "no frame pointer here" (at most FP_STEPS), and the frame-pointer
 * walk goes on from there. `uw` NULL: no thread state, no rules. */
#define FP_STEPS 2

static int fp_backtrace(ml_uw_thread_t *uw, void **buf, int max) {
    if (ml_unlikely(!fp_stack_hi)) {
        fp_stack_hi = ml__uw_stack_top();
        if (!fp_stack_hi) fp_stack_hi = (uintptr_t)-1;
    }
    uintptr_t *fp = __builtin_frame_address(0);
    uintptr_t hi = fp_stack_hi;
    int n = 0;
    bool stepped = uw == NULL;
    while (n < max) {
        if ((uintptr_t)fp & 7 || (uintptr_t)fp + 16 > hi) break;
        uintptr_t ret = fp[1];
        if (ret < 4096) break;
        buf[n++] = (void *)ret;
        uintptr_t *next = (uintptr_t *)fp[0];
        if (!stepped && !is_own_frame(ret)) {
            /* ret is the first return address into the program's code; the
             * frame it returns to had its stack pointer right above the slot. */
            stepped = true;
            uint64_t pc = ret, rsp = (uintptr_t)(fp + 2), rbp = (uintptr_t)next;
            for (int i = 0; i < FP_STEPS && n < max; i++) {
                uint64_t cfa, ra = ml__uw_frameless_step(uw, pc, rsp, hi, &cfa, &rbp);
                if (!ra) break;
                if (ra < 4096) return n;
                buf[n++] = (void *)(uintptr_t)ra;
                pc = ra;
                rsp = cfa;
            }
            next = (uintptr_t *)(uintptr_t)rbp;
            if (next < (uintptr_t *)(uintptr_t)rsp) break; /* not a frame of the stack above */
            fp = next;
            continue;
        }
        if (next <= fp) break;
        fp = next;
    }
    return n;
}

/* libunwind's own step loop, the fallback walk where unw_backtrace is not
 * used (fallback_walk). */
static __attribute__((noinline)) int step_walk(step_mem_t *m, void **buf, int max) {
    unw_word_t ip;
    int n = 0;
    if (unw_getcontext(&m->uc) < 0 || unw_init_local(&m->cur, &m->uc) < 0) return 0;
    while (n < max && unw_step(&m->cur) > 0) {
        if (unw_get_reg(&m->cur, UNW_REG_IP, &ip) < 0) break;
        buf[n++] = (void *)(uintptr_t)ip;
    }
    return n;
}

/* libunwind's register-state cache is keyed by address: once the loader's
 * object counts moved (an object unloaded, another loaded where it was),
 * it is flushed before the next walk. */
static void unw_flush_if_moved(void) {
    static _Atomic uint64_t seen_adds, seen_subs;
    uint64_t v[2] = {0, 0};
    ml__loader_counts(v);
    if (v[0] != ml_atomic_load_relaxed(&seen_adds) || v[1] != ml_atomic_load_relaxed(&seen_subs)) {
        unw_flush_cache(unw_local_addr_space, 0, 0);
        ml_atomic_store_relaxed(&seen_adds, v[0]);
        ml_atomic_store_relaxed(&seen_subs, v[1]);
    }
}

static __attribute__((noinline)) int step_backtrace(void **buf, int max) {
    step_mem_t m;
    return step_walk(&m, buf, max);
}

/* The fallback walk: unw_backtrace, whose per-address tracer is much
 * faster than the step loop on repeated stacks (a handler's malloc, 100,000
 * times: 0.39 s against 1.06 s for the whole run), until an object was
 * unloaded (its trace cache is never invalidated: an address reused by
 * another object would be traced by stale rules) or its key was given
 * back; the step loop then, with its cache flushed when the loader's
 * counts moved. */
static int fallback_walk(thread_state_t *ts, void **buf, int max) {
    if (ts && !ml__uw_unloaded() && !ml_atomic_load_relaxed(&unw_gone)) {
        if (ml_likely(ts->unw_ready)) return unw_backtrace(buf, max);
        int n = -1;
        ml__spin_lock(&states_lock);
        if (!unw_gone) {
            n = unw_backtrace(buf, max); /* sets libunwind's key in this thread */
            ts->unw_ready = true;
        }
        ml__spin_unlock(&states_lock);
        if (n >= 0) return n;
    }
    unw_flush_if_moved();
    return step_backtrace(buf, max);
}

/* Whether this thread runs on its alternate signal stack now (a handler of
 * SA_ONSTACK). */
static bool on_alt_stack(void) {
    stack_t ss;
    return syscall(SYS_sigaltstack, NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
}

/* ------------------------------------------------------------------------- */
/* Per-thread state                                                          */
/* ------------------------------------------------------------------------- */

static void state_release(void *p) {
    thread_state_t *s = p;
    if (my_state == s) my_state = NULL;
    ml__spin_lock(&states_lock);
    s->next_free = free_states;
    free_states = s;
    ml__spin_unlock(&states_lock);
}

/* This thread's state, NULL if there is no memory for one. */
static thread_state_t *state(void) {
    thread_state_t *s = my_state;
    if (ml_likely(s != NULL)) return s;
    ml__spin_lock(&states_lock);
    s = free_states;
    if (s) free_states = s->next_free;
    ml__spin_unlock(&states_lock);
    if (s) {
        /* Another thread's: its caches hold facts about code and about the
         * stack table, true for any thread; its last walk and its stack
         * bounds are not. Not cleared as a whole: that would touch every
         * page of it. */
        s->uw.hi = 0;
        s->memo_tag++;
        s->stack.valid = 0;
        s->stack.n = 0;
        s->last_kept = 0;
        s->unw_ready = false; /* libunwind's trace cache is per thread */
    } else {
        s = ml__raw_alloc(sizeof *s); /* zero-filled: a fresh state */
    }
    if (!s) return NULL;
    my_state = s;
    /* May allocate (glibc's second-level key arrays): passed through, the
     * guard is raised. */
    if (ml_atomic_load_relaxed(&have_key)) {
        ml__spin_lock(&states_lock);
        if (have_key) pthread_setspecific(state_key, s);
        ml__spin_unlock(&states_lock);
    }
    return s;
}

/* The program's pthread_key_create: glibc's, and when it has no key left
 * (EAGAIN), memlens' own key given back for it, so that a program that
 * creates keys until none is left gets as many as without memlens (it got
 * one fewer; LeakSanitizer's test many_tls_keys_pthread counts them). */
ML_EXPORT int pthread_key_create(pthread_key_t *key, void (*destructor)(void *));
ML_EXPORT int pthread_key_create(pthread_key_t *key, void (*destructor)(void *)) {
    static void *_Atomic real;
    int (*f)(pthread_key_t *, void (*)(void *)) =
        real_key_create ? real_key_create
                        : (int (*)(pthread_key_t *, void (*)(void *)))ml__next_symbol(&real, "pthread_key_create");
    if (!f) return EAGAIN;
    int rc = f(key, destructor);
    while (rc == EAGAIN) {
        bool gave = false;
        ml__spin_lock(&states_lock);
        if (have_key) {
            ml_atomic_store_relaxed(&have_key, false);
            gave = pthread_key_delete(state_key) == 0;
        } else if (unw_key_known && !unw_gone) {
            ml_atomic_store_relaxed(&unw_gone, true);
            gave = pthread_key_delete(unw_key) == 0;
        }
        ml__spin_unlock(&states_lock);
        if (!gave) break;
        rc = f(key, destructor);
    }
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Interning                                                                 */
/* ------------------------------------------------------------------------- */

/* Interns the stack pcs[0..n) (leaf first) through the thread's cache `c`
 * (NULL: none). Returns the leaf id. */
static uint32_t intern_pcs(stack_cache_t *c, void *const *pcs, int n, uint8_t *flags) {
    if (n <= 0) return 0;
    if (ml_unlikely(!c)) {
        uint32_t parent = 0;
        for (int i = n - 1; i >= 0; i--) {
            uint32_t id = node_get(parent, (uint64_t)pcs[i]);
            if (!id) {
                *flags |= ML_EVF_TRUNCATED;
                break;
            }
            parent = id;
        }
        if (*flags & ML_EVF_TRUNCATED) ml_atomic_add_relaxed(&ml__ring->truncated, 1);
        return parent;
    }
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
        uint32_t id = table_find(ml_atomic_load_acquire(&table), parent, (uint64_t)pcs[i]);
        if (!id) {
            /* New from here on (mostly): the rest in one run, leaf last. */
            run_t r = {(const char *)&pcs[i], -(ptrdiff_t)sizeof pcs[0], (char *)&c->id[i], -(ptrdiff_t)sizeof c->id[0]};
            int got = node_insert_run(parent, &r, i + 1);
            for (int q = 0; q < got; q++) c->pc[i - q] = (uint64_t)pcs[i - q];
            if (got) parent = c->id[i - got + 1];
            if (got < i + 1) {
                /* The table is full: keep the outer part, flag the cut. */
                ml_atomic_add_relaxed(&ml__ring->truncated, 1);
                *flags |= ML_EVF_TRUNCATED;
                c->n = 0;
                return parent;
            }
            break;
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

uint64_t ml__caller_sp(const char *fn, uint64_t regs[6]) {
    unw_context_t ctx;
    unw_cursor_t cur;
    if (unw_getcontext(&ctx) < 0 || unw_init_local(&cur, &ctx) < 0) return 0;
    bool in_exit = false;
    for (int i = 0; i < 64 && unw_step(&cur) > 0; i++) {
        unw_word_t sp = 0;
        if (in_exit) {
            static const int saved[6] = {UNW_X86_64_RBX, UNW_X86_64_RBP, UNW_X86_64_R12,
                                         UNW_X86_64_R13, UNW_X86_64_R14, UNW_X86_64_R15};
            for (int k = 0; regs && k < 6; k++) {
                unw_word_t r = 0;
                regs[k] = unw_get_reg(&cur, saved[k], &r) == 0 ? (uint64_t)r : 0;
            }
            return unw_get_reg(&cur, UNW_REG_SP, &sp) == 0 ? (uint64_t)sp : 0;
        }
        unw_proc_info_t pi;
        Dl_info di;
        /* The frame is fn's when its function starts where the dynamic
         * symbol does (IPs inside local functions such as
         * __run_exit_handlers name the nearest export, but not its start). */
        if (unw_get_proc_info(&cur, &pi) == 0 && pi.start_ip &&
            dladdr((void *)(uintptr_t)pi.start_ip, &di) && di.dli_sname &&
            (uintptr_t)di.dli_saddr == (uintptr_t)pi.start_ip && !strcmp(di.dli_sname, fn))
            in_exit = true;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Verification (--unwind verify)                                            */
/* ------------------------------------------------------------------------- */

/* Compares the stack recorded as `leaf` (truncated or not) with libunwind's,
 * and counts the outcome in the ring header. The reference is libunwind's
 * plain step loop, whose only cache (register states by address) is flushed
 * whenever the loader's object counts move, read here on every stack, not
 * from the recorder's own bookkeeping of modules. */
static __attribute__((noinline)) void verify_stack_walk(thread_state_t *ts, void **pcs, void **buf,
                                                        uint32_t leaf, bool trunc, bool fell_back,
                                                        bool reused) {
    int n = 0;
    for (uint32_t id = leaf; id && n < (int)depth; id = vnode_parent[id]) {
        if (id >= VERIFY_NODES) return; /* beyond what we can read back: not counted */
        pcs[n++] = (void *)(uintptr_t)vnode_pc[id];
    }
    unw_flush_if_moved();
    int max = (int)depth + SKIP_MAX + 1;
    int m = ts && on_alt_stack() ? step_walk(&ts->step, buf, max) : step_backtrace(buf, max);
    int skip = 0;
    while (skip < m && is_own_frame((uintptr_t)buf[skip])) skip++;
    int want = m - skip > (int)depth ? (int)depth : m - skip;
    bool want_trunc = m == max || m - skip > (int)depth;
    ml_ring_hdr_t *h = ml__ring;
    ml_atomic_add_relaxed(&h->unwind_checked, 1);
    if (fell_back) ml_atomic_add_relaxed(&h->unwind_fallback, 1);
    if (reused) ml_atomic_add_relaxed(&h->unwind_reused, 1);
    int bad = -1;
    for (int i = 0; i < want && i < n && bad < 0; i++)
        if (pcs[i] != buf[skip + i]) bad = i;
    if (bad < 0 && (n != want || trunc != want_trunc)) bad = n < want ? n : want;
    if (bad < 0) return;
    ml_atomic_add_relaxed(&h->unwind_mismatch, 1);
    uint32_t expected = 0;
    if (ml_atomic_cas_strong_acq_rel(&h->unwind_bad.set, &expected, 1)) {
        h->unwind_bad.frame = (uint32_t)bad;
        h->unwind_bad.fast_frames = (uint32_t)n;
        h->unwind_bad.full_frames = (uint32_t)want;
        h->unwind_bad.fast_pc = bad < n ? (uint64_t)(uintptr_t)pcs[bad] : 0;
        h->unwind_bad.full_pc = bad < want ? (uint64_t)(uintptr_t)buf[skip + bad] : 0;
        h->unwind_bad.fell_back = fell_back;
    }
}

static __attribute__((noinline)) void verify_stack_onstack(uint32_t leaf, bool trunc, bool fell_back,
                                                           bool reused) {
    void *pcs[ML_MAX_DEPTH], *buf[ML_UW_CAP];
    verify_stack_walk(NULL, pcs, buf, leaf, trunc, fell_back, reused);
}

/* verify_stack_walk, with the program's errno put back (libunwind's
 * checks: ml__stack_capture). Its 4 KiB of arrays are in the thread's
 * state, when there is one (a handler on an alternate stack of 8 KiB
 * overflowed it under --unwind verify). */
static __attribute__((noinline)) void verify_stack(thread_state_t *ts, uint32_t leaf, bool trunc,
                                                   bool fell_back, bool reused) {
    int saved_errno = errno;
    if (ts) verify_stack_walk(ts, ts->verify_pcs, ts->walk_buf, leaf, trunc, fell_back, reused);
    else verify_stack_onstack(leaf, trunc, fell_back, reused);
    errno = saved_errno;
}

/* ------------------------------------------------------------------------- */
/* Capture                                                                   */
/* ------------------------------------------------------------------------- */

/* The node id of program frame m of the last walk (outermost first),
 * interning the frames since the nearest one whose id is known. 0 if the
 * node table is full. */
static uint32_t frame_id(ml_uw_stack_t *st, int m) {
    ml_uw_frame_t *f = st->f;
    int j = m;
    while (j >= 0 && !(f[j].flags & ID_KNOWN)) j--;
    uint32_t parent = j >= 0 ? f[j].id : 0;
    for (int i = j + 1; i <= m; i++) {
        parent = node_get(parent, f[i].pc);
        if (!parent) return 0;
        f[i].id = parent;
        f[i].flags |= ID_KNOWN;
    }
    return parent;
}

/* The leaf id of the stack the walker just took into ts->stack, `kept` of
 * its outer frames from the walk before. */
static inline int64_t walk_leaf(thread_state_t *ts, int kept, uint8_t *flags) {
    ml_uw_stack_t *st = &ts->stack;
    uint32_t gen = ts->gen;
    /* st->f[0..nprog) are the program's frames, outermost first; above them
     * are ours (the hook, the recorder). */
    uint32_t n = st->n, own = 0;
    while (own < n && is_own_frame((uintptr_t)st->f[n - 1 - own].pc)) own++;
    uint32_t nprog = n - own;
    if (st->end == ML_UW_END_LIMIT || nprog > depth) {
        /* Cut: the path in the trie starts at the cut, not at the outermost
         * frame, so intern the kept leaf part on its own. */
        void **pcs = ts->walk_buf; /* not on the program's stack (see walk_buf) */
        uint32_t cnt = nprog < depth ? nprog : depth;
        for (uint32_t i = 0; i < cnt; i++) pcs[i] = (void *)(uintptr_t)st->f[nprog - 1 - i].pc;
        *flags |= ML_EVF_TRUNCATED;
        return intern_pcs(&ts->cache, pcs, (int)cnt, flags);
    }
    uint32_t pk = (uint32_t)kept < nprog ? (uint32_t)kept : nprog; /* program frames kept */
    uint32_t parent = pk ? frame_id(st, (int)pk - 1) : 0;
    if (pk && !parent) goto full;
    if (nprog == pk) return parent;
    /* The new inner program frames f[pk..nprog), below `parent`. */
    /* The generation is in the key: entries of the parent's trace (before
     * a fork) cannot match. */
    uint64_t h = ((uint64_t)parent << 32 | (nprog - pk)) ^ (uint64_t)gen * 0x9e3779b97f4a7c15ull;
    for (uint32_t i = pk; i < nprog; i++) h = (h ^ st->f[i].pc) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    h |= 1; /* 0 marks an empty entry */
    typeof(ts->seen[0]) *e = &ts->seen[(h >> 40) & (FRAME_SEEN - 1)];
    uint32_t cnt = nprog - pk < SEEN_IDS ? nprog - pk : SEEN_IDS;
    if (e->hash == h) {
        for (uint32_t i = 0; i < cnt; i++) {
            st->f[nprog - 1 - i].id = e->id[i];
            st->f[nprog - 1 - i].flags |= ID_KNOWN;
        }
        return e->id[0];
    }
    for (uint32_t i = pk; i < nprog; i++) {
        uint32_t id = table_find(ml_atomic_load_acquire(&table), parent, st->f[i].pc);
        if (!id) {
            /* New from here on (mostly): the rest in one run. */
            run_t r = {(const char *)&st->f[i].pc, sizeof st->f[0], (char *)&st->f[i].id, sizeof st->f[0]};
            int got = node_insert_run(parent, &r, (int)(nprog - i));
            for (int k = 0; k < got; k++) st->f[i + (uint32_t)k].flags |= ID_KNOWN;
            if (got) parent = st->f[i + (uint32_t)got - 1].id;
            if (got < (int)(nprog - i)) goto full;
            break;
        }
        st->f[i].id = parent = id;
        st->f[i].flags |= ID_KNOWN;
    }
    e->hash = h;
    for (uint32_t i = 0; i < cnt; i++) e->id[i] = st->f[nprog - 1 - i].id;
    return parent;
full:
    /* The node table cannot grow: keep the outer part, flag the cut (as
     * intern_pcs does). */
    ml_atomic_add_relaxed(&ml__ring->truncated, 1);
    *flags |= ML_EVF_TRUNCATED;
    return parent;
}

/* The trie's generation moved (a fork, nodes parked or put back): the ids
 * this thread kept (its previous walk's, its memo's) are dropped. Returns
 * whether it moved. */
static inline bool gen_check(thread_state_t *ts) {
    uint32_t gen = ml_atomic_load_relaxed(&generation);
    if (ml_likely(ts->gen == gen)) return false;
    ts->gen = gen;
    ts->memo_tag++;
    ts->stack.valid = 0;
    return true;
}

/* The walker's path: returns the leaf id, or -1 when the stack must be
 * taken by libunwind. libmemlens is built with frame pointers, so its own
 * frames (this function, ml__stack_capture, record_*, the hook) are left
 * through the frame pointer chain, to the first return address outside
 * libmemlens: the program's frame the walk starts from. */
static __attribute__((noinline)) int64_t capture_fast(thread_state_t *ts, uint8_t *flags) {
    uintptr_t *fp = __builtin_frame_address(0);
    for (int i = 0; is_own_frame(fp[1]); i++) {
        uintptr_t *next = (uintptr_t *)fp[0];
        if (i == SKIP_MAX || next <= fp) return -1;
        fp = next;
    }
    ml_uw_stack_t *st = &ts->stack;
    gen_check(ts);
    uint64_t pc = fp[1], rsp = (uint64_t)(uintptr_t)(fp + 2), rbp = fp[0];
    /* A stack taken before from this very place? Asked only while this
     * thread's stacks cost enough to walk: where the previous walk leaves
     * few frames to step, the walk is about as cheap as checking an entry,
     * and the entries' cache lines would be taken from the program. */
    bool memo = verify || ts->walk_avg >= MEMO_MIN_WALK * 16; /* verify: always, to check it */
    memo_set_t *set = NULL; /* the memo's set for this start, when asked */
    ml_uw_memo_t *ways = NULL;
    uint32_t key = 0;
    if (memo) {
        uint64_t mh = (pc ^ (rsp << 20 | rsp >> 44)) * 0x9e3779b97f4a7c15ull;
        key = (uint32_t)(mh ^ mh >> 29) | 1; /* 0 marks an empty way */
        set = &ts->memo_set[(mh >> 40) & (MEMO_SETS - 1)];
        ways = ts->memo[set - ts->memo_set];
        for (unsigned w = 0; w < MEMO_WAYS; w++) {
            if (set->key[w] == key && ml__uw_memo_match(&ways[w], ts->memo_tag, pc, rsp, rbp)) {
                ts->walk_avg += (ways[w].walked * 16 - ts->walk_avg) >> 5; /* what it saved */
                ts->last_kept = 1;
                return ways[w].leaf;
            }
        }
    }
    int kept = ml__uw_walk(&ts->uw, st, pc, rsp, rbp, depth + SKIP_MAX + 1, NULL);
    /* The walk went through an object dlclose can unload. If an object was
     * loaded since the last module scan, the scan comes first (runtime.c):
     * this object may be the new one, where an unloaded one's nodes are
     * still in the trie. Then, whoever scanned: if a scan parked or put
     * back nodes since this capture looked at the generation, the ids this
     * thread kept are stale, and the stack is walked again from scratch.
     * (fx stress: one plugin call in about 40 runs, three threads
     * allocating beside a worker that runs plugins loaded in turn at one
     * address, was charged to the other plugin without the second check.) */
    if (kept >= 0 && ml_unlikely(ts->uw.np_adds)) {
        uint64_t adds = ts->uw.np_adds;
        if (adds > ml_atomic_load_acquire(&ml__scanned_adds) && adds != ts->behind &&
            !ml__modules_scan_behind(adds))
            ts->behind = adds; /* not again for this count: the scan holder may be waiting on us */
        if (gen_check(ts)) kept = ml__uw_walk(&ts->uw, st, pc, rsp, rbp, depth + SKIP_MAX + 1, NULL);
    }
    ts->last_kept = kept > 0 ? (uint32_t)kept : 0;
    if (kept < 0) return -1;
    uint32_t walked = st->n - (uint32_t)kept < 255 ? st->n - (uint32_t)kept : 255;
    ts->walk_avg += ((int32_t)walked * 16 - ts->walk_avg) >> 5;
    int64_t leaf = walk_leaf(ts, kept, flags);
    if (set && !(*flags & ML_EVF_TRUNCATED)) {
        /* Replaces the set's ways in turn. The key is cleared first: a way
         * is never matched while it is half written. */
        unsigned w = set->next++ % MEMO_WAYS;
        set->key[w] = 0;
        if (ml__uw_memo_put(&ways[w], st, (uint32_t)leaf, ts->memo_tag)) {
            ways[w].walked = (uint8_t)walked;
            set->key[w] = key;
        }
    }
    return leaf;
}

/* An address in libunwind's code: runtime.c leaves its data out of the exit
 * scan's roots. */
const void *ml__unwinder_text(void) {
    return (const void *)unw_backtrace;
}

static uint32_t capture_slow(thread_state_t *ts, void **buf, uint8_t *flags);
static uint32_t capture_stateless(uint8_t *flags);

uint32_t ml__stack_capture(uint8_t *flags) {
    thread_state_t *ts = state();
    if (fast && ts) {
        int64_t leaf = capture_fast(ts, flags);
        if (leaf >= 0) {
            if (ml_unlikely(verify))
                verify_stack(ts, (uint32_t)leaf, *flags & ML_EVF_TRUNCATED, false, ts->last_kept > 0);
            return (uint32_t)leaf;
        }
    }
    if (ml_likely(ts != NULL)) return capture_slow(ts, ts->walk_buf, flags);
    return capture_stateless(flags);
}

/* No memory for a thread state: the buffer is on the stack. Not inlined,
 * so that the usual path does not reserve it. */
static __attribute__((noinline)) uint32_t capture_stateless(uint8_t *flags) {
    void *buf[ML_UW_CAP];
    return capture_slow(NULL, buf, flags);
}

/* The stack by libunwind (fallback_walk; or the frame pointers for
 * --unwind fp) into buf (ML_UW_CAP entries), interned through ts's cache
 * when there is a state. */
/* Realigned at its entry: libunwind's code (dl_iterate_phdr) saves vector
 * registers with aligned stores (docs/recorder.md, "A misaligned stack"). */
static __attribute__((noinline, force_align_arg_pointer)) uint32_t capture_slow(thread_state_t *ts, void **buf,
                                                                              uint8_t *flags) {
    int max = (int)depth + SKIP_MAX + 1;
    int n;
    if (use_fp) {
        n = fp_backtrace(ts ? &ts->uw : NULL, buf, max); /* no system call: every stack of --unwind fp comes here */
    } else {
        /* libunwind checks addresses with system calls that fail on
         * purpose (a write of the address to its pipe, a read of
         * descriptor -1): the program's errno is put back. */
        int saved_errno = errno;
        /* On an alternate signal stack (SIGSTKSZ, 8 KiB, is common) the
         * walk keeps libunwind's 2 KiB context and cursor in the thread's
         * state rather than on the stack: with a CPU's AVX-512 state in
         * the signal frame, a handler's malloc wrote 32 bytes below such a
         * stack when they were on it (fx_altstack; 1,940 B of ours there
         * now). unw_backtrace, faster, keeps them on the stack: it walks
         * the other stacks. */
        if (ts && on_alt_stack()) {
            unw_flush_if_moved();
            n = step_walk(&ts->step, buf, max);
        } else {
            n = fallback_walk(ts, buf, max);
        }
        errno = saved_errno;
    }
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
    uint32_t leaf = intern_pcs(ts ? &ts->cache : NULL, pcs, n, flags);
    if (ml_unlikely(verify)) verify_stack(ts, leaf, *flags & ML_EVF_TRUNCATED, true, false);
    return leaf;
}

/* ------------------------------------------------------------------------- */
/* libunwind's pipe                                                          */
/* ------------------------------------------------------------------------- */

/* libunwind keeps a pipe to check that an address is readable (it writes a
 * byte of it there: write_validate, in x86_64/Ginit.c), opened with pipe2
 * when it initialises, in ml__stacks_init, and again whenever a read from
 * it fails (the program closed it). pipe2 takes the lowest free
 * descriptors: the program's own open() then returned two more than
 * without memlens, and a program started with stdin and stdout closed
 * found them open, ends of that pipe (its writes to stdout filled the pipe
 * instead of failing with EBADF). So the pipe that libunwind asks for is
 * moved to the top of the first 1024 descriptors, where a program that
 * opens its files from the lowest up does not come; anyone else's pipe2
 * is glibc's, untouched. (Under `memlens attach` libunwind binds pipe2 to
 * glibc's first: its pipe stays where it was opened.)
 *
 * Nor is that pipe opened before libunwind needs it. It checks addresses
 * only while it unwinds a frame that has no unwind information (it then
 * follows rbp); most programs never have one. Opened at start, the pipe
 * was two descriptors more in every traced process, and a program that
 * lists its own (/proc/self/fd; CPython's test_subprocess,
 * test_pass_fds_redirected, checks that a child has exactly the
 * descriptors it passed) saw them. So the pipe2 that libunwind makes while
 * it initialises, in ml__stacks_init, opens nothing: it succeeds with -1
 * for both ends. libunwind's first check then reads from -1, takes the
 * EBADF for a closed pipe and asks again (open_pipe), and that pipe is
 * opened, and moved up. Until then libunwind's close() of its ends is
 * close(-1), which closes nothing of the program's. */
#define PIPE_TOP 1024
#define PIPE_BELOW_TOP 16

static bool unw_pipe_later; /* set while libunwind initialises (ml__stacks_init) */

static void move_up(int fds[2]) {
    struct rlimit rl;
    rlim_t top = PIPE_TOP;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < top) top = rl.rlim_cur;
    if (top < 3 + 2 * PIPE_BELOW_TOP) return; /* no room above the program's */
    for (int i = 0; i < 2; i++) {
        int fd = (int)syscall(SYS_fcntl, fds[i], F_DUPFD_CLOEXEC, (long)(top - PIPE_BELOW_TOP));
        if (fd < 0) continue; /* it stays where it is */
        syscall(SYS_close, fds[i]);
        fds[i] = fd;
    }
}

ML_EXPORT int pipe2(int fds[2], int flags);
ML_EXPORT int pipe2(int fds[2], int flags) {
    uintptr_t from = (uintptr_t)__builtin_return_address(0);
    if (ml__unw_hi && from >= ml__unw_lo && from < ml__unw_hi) {
        if (unw_pipe_later) {
            fds[0] = fds[1] = -1;
            return 0;
        }
        int e = errno;
        if (syscall(SYS_pipe2, fds, flags) < 0) {
            /* No descriptor to spare (EMFILE: the program lowered its
             * limit, or used every descriptor; ENFILE). The kernel left
             * fds as they were: the numbers of the ends libunwind has just
             * closed, which the program may open again. -1 writes nowhere,
             * and syscall_x86_64.S checks the address without a pipe. */
            fds[0] = fds[1] = -1;
            errno = e;
            return 0;
        }
        move_up(fds);
        errno = e;
        return 0;
    }
    static void *_Atomic real;
    int (*f)(int *, int) = (int (*)(int *, int))ml__next_symbol(&real, "pipe2");
    if (!f) return (int)syscall(SYS_pipe2, fds, flags);
    return f(fds, flags);
}

/* The pipe2 above, for attach.c: under `memlens attach` libunwind's GOT
 * entry of pipe2 is bound to glibc's (this library is loaded RTLD_LOCAL,
 * after the program), and is redirected here before libunwind initialises. */
extern __typeof(pipe2) ml__unw_pipe2 __attribute__((alias("pipe2"), visibility("hidden"), nothrow, leaf));

/* libunwind checks an address by writing a byte of it to its pipe, with
 * syscall(SYS_write, ...). When no pipe could be opened (pipe2 above: the
 * program has no descriptor left) that write goes to -1 and fails with
 * EBADF: every address was unreadable, and every stack from then on was
 * empty (a program that set RLIMIT_NOFILE to 3 had all its sites "[no
 * stack]"). So libmemlens' syscall() (syscall_x86_64.S) sends a write to a
 * negative descriptor from libunwind here, and does the same check without
 * a pipe: process_vm_readv of the byte from this process, which fails with
 * EFAULT where the write would have. Every other syscall() goes to glibc's
 * as it was. */
void *ml__real_syscall;           /* glibc's syscall(); until known, the trampoline's own */

long ml__unw_check(const void *addr, size_t n);
long ml__unw_check(const void *addr, size_t n) {
    char byte;
    struct iovec to = {&byte, 1}, from = {(void *)(uintptr_t)addr, 1};
    if (!n) return 0;
    long r = syscall(SYS_process_vm_readv, (long)syscall(SYS_getpid), &to, 1L, &from, 1L, 0L);
    if (r == 1) return 1;
    if (r == 0 || errno != EFAULT) errno = EBADF; /* not checked: as without this */
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Set-up                                                                    */
/* ------------------------------------------------------------------------- */

int ml__stacks_init(void) {
    depth = ml__ctl->depth ? ml__ctl->depth : ML_DEFAULT_DEPTH;
    if (depth > ML_MAX_DEPTH) depth = ML_MAX_DEPTH;
    use_fp = ml__ctl->options & ML_OPT_UNWIND_FP;
    verify = !use_fp && (ml__ctl->options & ML_OPT_UNWIND_VERIFY);
    node_table_t *t = table_new(1u << 14);
    if (!t) return -1;
    ml_atomic_store_release(&table, t);
    pool = ml__raw_alloc(POOL_NODES * sizeof *pool); /* pages only as used; NULL: nothing kept */
    exec_range((void *)ml__stack_capture, &self_lo, &self_hi);
    exec_range((void *)unw_backtrace, &ml__unw_lo, &ml__unw_hi);
    ml__real_syscall = dlsym(RTLD_NEXT, "syscall");
    if (use_fp) {
        ml__uw_init(); /* its rules step frames without a frame pointer (fp_backtrace) */
    } else {
        fast = ml__uw_init();
        real_key_create = (int (*)(pthread_key_t *, void (*)(void *)))dlsym(RTLD_NEXT, "pthread_key_create");
        have_key = real_key_create && real_key_create(&state_key, state_release) == 0;
        unw_pipe_later = true; /* libunwind initialises below */
        unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
        unw_set_cache_size(unw_local_addr_space, 1024, 0);
        if (verify) {
            vnode_pc = ml__raw_alloc(VERIFY_NODES * sizeof *vnode_pc);
            vnode_parent = ml__raw_alloc(VERIFY_NODES * sizeof *vnode_parent);
            if (!vnode_pc || !vnode_parent) {
                unw_pipe_later = false;
                return -1;
            }
        }
        /* unw_backtrace creates its per-thread cache key (pthread_key_create)
         * on its first call. Made later, inside a hook, after the program
         * created 32 keys, that key would get an index past glibc's first
         * level, and its pthread_setspecific would calloc glibc's
         * second-level key array inside the hook: an allocation we skip,
         * which the program's own keys then live in (its blocks would look
         * definitely lost). Created now, before the program runs, the key
         * is among the first 32 and needs no array. It takes the lowest
         * free index, found just before with a key made and deleted; this
         * thread's value under it says it is libunwind's. */
        void *pc[2];
        pthread_key_t probe;
        bool probed = real_key_create && real_key_create(&probe, NULL) == 0 && pthread_key_delete(probe) == 0;
        unw_backtrace(pc, 2);
        unw_key = probe;
        unw_key_known = probed && pthread_getspecific(probe) != NULL;
        unw_pipe_later = false;
    }
    return 0;
}
/* Takes the entries of [lo, hi) out of the table, in place: their pc
 * becomes PC_PARKED (a probe that read it a moment before still finds the
 * old node: only a stack taken in the new object's code at that very
 * moment). Every thread's caches of ids go too (the generation).
 * Copies them to the pool first, as far as they fit (p->n of them; p->off
 * is where); what does not fit is dropped, and those stacks take new nodes
 * when the object comes back. */
void ml__stacks_park(uint64_t lo, uint64_t hi, ml_parked_t *p) {
    p->off = pool_used;
    p->n = 0;
    ml__spin_lock(&lock);
    node_table_t *t = ml_atomic_load_acquire(&table);
    for (uint64_t i = 0; t && i < t->cap; i++) {
        node_entry_t *e = &t->e[i];
        if (!ml_atomic_load_relaxed(&e->id) || e->pc < lo || e->pc >= hi || e->pc == PC_PARKED) continue;
        if (pool && pool_used < POOL_NODES) {
            pool[pool_used++] = (ml_parked_node_t){ml_atomic_load_relaxed(&e->id), e->parent, e->pc};
            p->n++;
        }
        __atomic_store_n(&e->pc, PC_PARKED, __ATOMIC_RELAXED);
    }
    ml_atomic_add_relaxed(&generation, 1);
    ml__spin_unlock(&lock);
}

/* Frees a parked set's room in the pool; `sets` are all the sets, whose
 * offsets above it move down. */
void ml__stacks_park_free(const ml_parked_t *p, ml_parked_t *sets, uint32_t nsets) {
    if (!pool || !p->n) return;
    uint32_t end = p->off + p->n;
    memmove(&pool[p->off], &pool[end], (pool_used - end) * sizeof pool[0]);
    pool_used -= p->n;
    for (uint32_t i = 0; i < nsets; i++)
        if (sets[i].n && sets[i].off >= end) sets[i].off -= p->n;
}

/* Puts parked entries back (their object is loaded again where it was). An
 * entry whose key is taken again (a stack taken in it before the scan saw
 * it back), or that does not fit, is left out: that stack keeps its new
 * node. The caller frees the set with ml__stacks_park_free. */
void ml__stacks_unpark(const ml_parked_t *p) {
    if (!pool || !p->n) return;
    ml__spin_lock(&lock);
    node_table_t *t = ml_atomic_load_acquire(&table);
    if ((t->count + p->n + 1) * 4 > t->cap * 3) {
        node_table_t *n = table_grow(t, p->n + 1);
        if (n) t = n;
    }
    for (uint32_t i = 0; i < p->n; i++) {
        const ml_parked_node_t *e = &pool[p->off + i];
        if ((t->count + 1) * 4 <= t->cap * 3 && !table_find(t, e->parent, e->pc))
            table_put(t, e->id, e->parent, e->pc);
    }
    ml_atomic_add_relaxed(&generation, 1);
    ml__spin_unlock(&lock);
}

void ml__stacks_reset(void) {
    /* After fork the child starts a new trace: ids restart at 1 and every
     * node will be written again. The parent's tables are private copies
     * now; drop them (the pages are copy-on-write and mostly shared). */
    node_table_t *t = table_new(1u << 14);
    if (t) ml_atomic_store_release(&table, t);
    ml_atomic_store_relaxed(&next_id, 0);
    ml_atomic_add_relaxed(&generation, 1);
    pool_used = 0; /* the parked sets went with the parent's ids (runtime.c) */
}
