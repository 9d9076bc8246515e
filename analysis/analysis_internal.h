/* analysis_internal.h - shared between the files of analysis/; never
 * included from another folder. */
#ifndef ML_ANALYSIS_INTERNAL_H
#define ML_ANALYSIS_INTERNAL_H

#include "ml_analysis.h"
#include "ml_map.h"
#include "snap_codec.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Live blocks                                                               */
/* ------------------------------------------------------------------------- */

/* A live heap block. `seq` is the event number of its allocation, which
 * tells whether it existed at the peak (see the graveyard in analysis.c). */
typedef struct {
    uint64_t ptr; /* 0: empty slot */
    uint64_t size : 61; /* at most ML__SIZE_MAX */
    uint64_t reach : 3; /* ML_REACH_* from the exit scan */
    uint64_t seq : 48;
    uint64_t slack : 16; /* recorded usable size - size, ML__SLACK_UNKNOWN if not recorded */
    uint32_t stack; /* index into the stack-statistics table (0: unknown) */
    uint32_t time_ms;
} ml__block_t;

#define ML__SLACK_UNKNOWN 0xffffu
#define ML__SIZE_MAX ((1ull << 61) - 1) /* larger sizes are clamped (only corrupt traces) */

/* The block {ptr, size, reach, seq, slack, stack, time_ms}, each field
 * truncated to its width as an initialiser would, written as four whole
 * words. GCC 12 writes an initialiser of this struct in pieces: a byte
 * store for `reach` and then a read-modify-write of its word, a 16-bit
 * store of `slack` after the word of `seq`. The next 8-byte load of such a
 * word (the same function, or live.c's encode, or the caller of live.c's
 * decode) waits until the narrow store has left the store buffer, since
 * a load cannot take its bytes from a smaller store: about 15 cycles, two
 * to three times per heap event. On 10 M allocations kept, those stalls
 * were 40 % of ml_analysis_feed's samples and half of encode's (perf
 * annotate). The words follow the x86-64 and AArch64 ABIs' layout of
 * bit-fields (the first one in the lowest bits of its word), which
 * tests/unit/analysis/test_live.c checks against the initialiser. */
static inline ml__block_t ml__block_make(uint64_t ptr, uint64_t size, unsigned reach, uint64_t seq,
                                         uint64_t slack, uint32_t stack, uint32_t time_ms) {
    _Static_assert(sizeof(ml__block_t) == 32, "ml__block_t is four words");
    _Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ml__block_make's words are little-endian");
    union {
        ml__block_t b;
        uint64_t w[4];
    } u;
    u.w[0] = ptr;
    u.w[1] = (size & ML__SIZE_MAX) | (uint64_t)(reach & 7u) << 61;
    u.w[2] = (seq & ((1ull << 48) - 1)) | (slack & 0xffffu) << 48;
    u.w[3] = stack | (uint64_t)time_ms << 32;
    return u.b;
}

/* The live mappings (a->maps), and the heap blocks of version 1-4
 * snapshots: entries keyed by address, in the analysis layer's one map
 * (ml_map.h). The snapshot saves each entry's slot, so this map's hash and
 * growth are part of the snapshot format. */
ML_MAP_TYPED(ml__blocks, ml__block_t, 1024)

/* The live heap blocks (live.c): 20 bytes a block, by address. A block is
 * stored as a record and its offset in its 4 KiB page; the full
 * ml__block_t is what the functions below take and give. The record packs
 * the size (24 bits) and the slack (8) into one word; a block whose size or
 * slack does not fit keeps both in a side map (live.c). */
typedef struct __attribute__((packed, aligned(2))) {
    uint32_t stack;
    uint32_t size_slack; /* size in the low 24 bits, a slack code above (live.c) */
    uint32_t time_ms;
    uint32_t seq_lo;
    uint16_t seq_hi;
} ml__lrec_t;
_Static_assert(sizeof(ml__lrec_t) == 18, "a live block's record is 18 bytes");

typedef struct ml__lchunk_s ml__lchunk_t;

/* An all-zero ml__live_t is an empty set. One writer at a time; readers
 * (get, cursors) may run together when nobody writes. */
typedef struct {
    ml_map_t dir;       /* page + 1 -> its chunk */
    ml_map_t big;       /* the sizes and slacks that do not fit the record, by address */
    uint64_t count;     /* blocks */
    uint64_t bytes;     /* the chunks' bytes (the directory not counted) */
    uint64_t last_key;  /* the chunk used last (writers' cache) */
    ml__lchunk_t *last;
    uint32_t reach_next; /* ml__live_set_reach's guess: the index after the last one set */
    uint32_t take_next;  /* ml__live_take's guess: the index after the last one taken */
    struct ml__lslab_s *slab; /* the chunks' memory (live.c) */
    /* Non-NULL: the set is still the snapshot's encoding of its blocks
     * (ml__live_set_packed), and the chunks are empty. Walks decode it;
     * the first change, lookup index or prefetch builds the chunks. */
    struct ml__lpacked_s *packed;
} ml__live_t;

/* Makes the empty set L the `count` blocks encoded in p[0..len) as a
 * version 5+ snapshot stores them (snapshot.c, ml__snap_live_block),
 * already checked; the bytes are read in place, not copied, so they must
 * outlive the set unless ml__live_own_packed hands their buffer over.
 * A report reads the live set once or twice: building the chunks of 5 M
 * blocks, and the kernel zeroing the pages they take, was half of
 * `report --no-advisor --json`'s time on c-tiny-10M (perf). 0 or -ENOMEM. */
int ml__live_set_packed(ml__live_t *L, const uint8_t *p, size_t len, uint64_t count, uint32_t nstats);
/* The buffer the packed bytes are in, freed with the set. */
void ml__live_own_packed(ml__live_t *L, void *buf);
/* Builds the chunks of a packed set (nothing to do otherwise). 0 or
 * -ENOMEM (the blocks not built yet are lost then). */
int ml__live_unpack(ml__live_t *L);
/* Adds to L the `count` blocks encoded at b's position as a version 5+
 * snapshot stores them, decoded in batches (the restore, and
 * ml__live_unpack); stops at a block that is not sound, b marked bad with
 * the reason. 0 or -ENOMEM. */
int ml__live_load(ml__live_t *L, ml__ibuf_t *b, uint64_t count, uint32_t nstats);
/* snapshot.c's fast path for a live block, inline for the packed set's
 * walks (live.c). */
/* One varint of at most 9 bytes, with no check of the bytes left (the
 * caller made sure 9 are there): false for a longer one, which the caller
 * reads again with ml__get_u. (Reading a varint of several bytes as one
 * word and moving its 7-bit groups together by shifts took more
 * instructions, and about 15 % more user time on c-tiny-10M's restore.) */
static inline bool ml__snap_fast_u(const uint8_t **pp, uint64_t *out) {
    const uint8_t *p = *pp;
    uint64_t c = *p++;
    if (__builtin_expect(c < 0x80, 1)) {
        *out = c;
        *pp = p;
        return true;
    }
    uint64_t x = c & 0x7f;
    for (unsigned shift = 7; shift < 63; shift += 7) {
        c = *p++;
        x |= (c & 0x7f) << shift;
        if (c < 0x80) {
            *out = x;
            *pp = p;
            return true;
        }
    }
    return false;
}

/* The longest block the fast path reads: its address delta and six
 * fields, 9 bytes each at most. */
#define ML__SNAP_FAST_BLOCK_MAX (7 * 9)

/* The block after the one at *ptr, without ml__get_u's per-byte checks
 * when ML__SNAP_FAST_BLOCK_MAX bytes are left: false (nothing read) when it
 * is not there, or is not a sound block, or has a varint of 10 bytes; the
 * caller then reads it the checked way, which finds the same values or the
 * same fault. */
static inline bool ml__snap_fast_block(ml__ibuf_t *b, uint64_t *ptr, ml__block_t *e, uint32_t nstats) {
    if (b->len - b->pos < ML__SNAP_FAST_BLOCK_MAX) return false;
    const uint8_t *p = b->p + b->pos;
    uint64_t d, size, reach, seq, slack, stack, time_ms;
    if (!ml__snap_fast_u(&p, &d) || !ml__snap_fast_u(&p, &size) || !ml__snap_fast_u(&p, &reach) ||
        !ml__snap_fast_u(&p, &seq) || !ml__snap_fast_u(&p, &slack) || !ml__snap_fast_u(&p, &stack) ||
        !ml__snap_fast_u(&p, &time_ms))
        return false;
    /* one branch for all the checks */
    if ((d == 0) | (d > UINT64_MAX - *ptr) | (size > ML__SIZE_MAX) | (reach > ML_REACH_POSSIBLE) |
        (seq > (1ull << 48) - 1) | (slack > 0xffff) | (stack > (nstats ? nstats - 1 : 0)) |
        (time_ms > UINT32_MAX))
        return false;
    *ptr += d;
    *e = ml__block_make(*ptr, size, (unsigned)reach, seq, slack, (uint32_t)stack, (uint32_t)time_ms);
    b->pos = (size_t)(p - b->p);
    return true;
}

/* snapshot.c: the next block of a version 5+ live set at b's position,
 * its address the delta from *ptr (which it advances): false, b marked bad
 * with the reason, when it is not a sound block. */
bool ml__snap_live_block(ml__ibuf_t *b, uint64_t *ptr, ml__block_t *e, uint32_t nstats);
/* The same, its fast path inline. */
static inline bool ml__snap_next_block(ml__ibuf_t *b, uint64_t *ptr, ml__block_t *e, uint32_t nstats) {
    return ml__snap_fast_block(b, ptr, e, nstats) || ml__snap_live_block(b, ptr, e, nstats);
}
/* load.c: ml_analysis_restore keeping the live set packed in `data`
 * (ml__live_set_packed): 1 when the session took `data` (it frees it), 0
 * when it did not (no live block), or a negative errno. */
int ml__analysis_restore_packed(struct ml_analysis_s *a, void *data, size_t len, char *err, size_t errlen);

/* Inserts b (b->ptr != 0), or replaces the block at its address: then
 * *existed is true and *old is the block replaced. 0 or -ENOMEM (the set is
 * unchanged). */
int ml__live_put(ml__live_t *L, const ml__block_t *b, ml__block_t *old, bool *existed);
/* Adds blocks v[0..n) (each v[i].ptr != 0), given by rising address, to
 * the set: the pages they fill whole, and with `all` the last one too.
 * Returns how many blocks were added from the front of v (the rest, one
 * page's, are for the next call, with the blocks after them); *err is 0, or
 * -ENOMEM when it stopped early (the pages added stay). The same set as
 * ml__live_put of each block, made page by page (live.c). */
uint32_t ml__live_append(ml__live_t *L, const ml__block_t *v, uint32_t n, bool all, int *err);
/* The block at ptr into *out: false when there is none. */
bool ml__live_get(const ml__live_t *L, uint64_t ptr, ml__block_t *out);
/* Removes the block at ptr, its value into *out: false when there is none. */
bool ml__live_take(ml__live_t *L, uint64_t ptr, ml__block_t *out);
/* Sets the leak kind (ML_REACH_*) of the block at ptr: false when none. */
bool ml__live_set_reach(ml__live_t *L, uint64_t ptr, unsigned reach);
/* Gives every live block without a kind (ML_REACH_UNKNOWN) `reach`; returns how many. */
uint64_t ml__live_set_reach_rest(ml__live_t *L, unsigned reach);
/* Starts loading what a lookup of ptr reads first. */
void ml__live_prefetch(const ml__live_t *L, uint64_t ptr);
void ml__live_shrink(ml__live_t *L);
void ml__live_free(ml__live_t *L);

/* Walks the blocks in address order. The set must not change meanwhile. */
typedef struct {
    const ml__live_t *L;
    void *pages;      /* the directory's entries, sorted by page */
    uint64_t nkeys, k; /* how many; the one walked now */
    uint32_t i;       /* the next entry of its chunk */
    /* a packed set's walk: the next block's bytes, the address before it,
     * and the blocks left */
    size_t pk_pos;
    uint64_t pk_ptr, pk_left;
} ml__live_cursor_t;
int ml__live_cursor_init(ml__live_cursor_t *cur, const ml__live_t *L); /* 0 or -ENOMEM */
bool ml__live_next(ml__live_cursor_t *cur, ml__block_t *out);
/* What the end's walk (sites.c) reads of a block: less than ml__live_next
 * decodes. */
typedef struct {
    uint64_t ptr, size;
    uint32_t slack; /* ML__SLACK_UNKNOWN: not recorded */
    uint32_t stack;
    unsigned reach;
} ml__eblock_t;
/* The next blocks, up to max of them, into out: how many (0 at the end). */
uint32_t ml__live_next_ends(ml__live_cursor_t *cur, ml__eblock_t *out, uint32_t max);
void ml__live_cursor_rewind(ml__live_cursor_t *cur); /* from the first block again */
void ml__live_cursor_free(ml__live_cursor_t *cur);

/* The blocks by their index in address order, read in place (the exit
 * scan's block table, ml_reach.h): the chunks sorted by page and the index
 * of each one's first block, 24 bytes a chunk and nothing a block. Init
 * drops the chunks' dead entries (the set stays the same set); the set must
 * not change until the index is freed. */
struct ml__live_index_s {
    ml__live_t *L;
    void *pages;    /* the cursor's sorted directory */
    uint64_t *base; /* base[k]: the index of chunk k's first block; base[npages] = n */
    uint64_t npages, n;
    /* For the region of pages that holds the most chunks: pgk[j] is the
     * first chunk at or after page plo + j (NULL: none, search the pages). */
    uint32_t *pgk;
    uint64_t plo, npg;
};
typedef struct ml__live_index_s ml__live_index_t;
int ml__live_index_init(ml__live_index_t *x, ml__live_t *L); /* 0 or -ENOMEM */
void ml__live_index_free(ml__live_index_t *x);
/* Block i's address and size; *hint (any value at first) is the chunk
 * looked at last, which makes a walk in index order cheap. */
void ml__live_index_block(const ml__live_index_t *x, uint64_t i, uint64_t *hint, uint64_t *ptr,
                          uint64_t *size);
/* Block i's allocation sequence number (its allocation's place among the
 * heap events; a realloc's is the realloc's). Same hint as above. */
uint64_t ml__live_index_seq(const ml__live_index_t *x, uint64_t i, uint64_t *hint);
/* The last block at or below address p: its index, address and size; -1
 * when there is none. *hint (or NULL) is the chunk looked at last, tried
 * first. */
int64_t ml__live_index_floor(const ml__live_index_t *x, uint64_t p, uint64_t *hint, uint64_t *ptr,
                             uint64_t *size);

struct ml_analysis_s;
/* analysis.c: the live set and map to the smallest tables that hold them (at the
 * end record, and after restoring a snapshot). */
void ml__shrink_live(struct ml_analysis_s *a);
/* analysis.c: how many allocations a live block stands for: 1, or in a
 * sampled trace its sample's weight (the block's size is the weighted one),
 * as a whole number drawn from the block's address (ptr). */
uint64_t ml__block_count(const struct ml_analysis_s *a, uint64_t ptr, uint64_t size);

/* ------------------------------------------------------------------------- */
/* Stacks                                                                    */
/* ------------------------------------------------------------------------- */

/* Per recorded allocation stack (leaf node). The live fields change with
 * every event; the peak fields are the lazily taken snapshot described in
 * analysis.c. */
typedef struct {
    uint32_t node; /* leaf node id */
    uint32_t site; /* filled by build */
    double w_calls, w_bytes; /* allocations and bytes, weighted in sampled traces */
    uint64_t temporary, reallocs, freed;
    uint64_t live_bytes, live_blocks;
    uint64_t peak_bytes, peak_blocks;
    uint64_t last_change; /* event number of the last live change */
    uint64_t min_size, max_size, size_mask;
    uint64_t life_sum, life_max, life_mask;
    uint64_t thread_mask;
} ml__stack_stats_t;

typedef struct {
    char *path;
    uint64_t base, lo, hi;
    uint8_t *build_id;
    uint32_t build_id_len;
    bool loaded;
} ml__module_t;

/* ------------------------------------------------------------------------- */
/* Moments: the peak and the worst point, reconstructed at build time        */
/* ------------------------------------------------------------------------- */

/* A block in a graveyard: what fragmentation and "who pins this cell"
 * read, in 20 bytes instead of 40 (a graveyard can hold a sixteenth of the
 * blocks live at its moment, two graveyards are open at a time). It held
 * the low bits of the allocation's event number too, for grave_undo only,
 * which finds its entry by address (analysis.c). */
typedef struct __attribute__((packed, aligned(4))) {
    uint64_t ptr;
    uint64_t size : 48; /* clamped, as ml__fblock_t */
    uint64_t slack : 16;
    uint32_t stack;
} ml__grave_t;
_Static_assert(sizeof(ml__grave_t) == 20, "a grave is 20 bytes");

typedef struct {
    bool set;
    uint64_t seq;            /* blocks with seq <= this existed then ... */
    ml__grave_t *grave;      /* ... and these were freed after it */
    uint64_t ngrave, grave_cap;
    bool closed;             /* its fragmentation is computed (snap_frag): no graveyard kept */
    uint32_t time_ms;
    uint64_t heap_bytes, heap_blocks;
    uint64_t page_waste;     /* the worst moment's criterion */
    /* the last samples at that moment */
    bool have_mallinfo, have_rss;
    uint32_t mallinfo_time_ms;
    uint64_t mallinfo[5], rss_bytes;
} ml__moment_t;

/* ------------------------------------------------------------------------- */
/* Pages: how many pages hold at least one live block                        */
/* ------------------------------------------------------------------------- */

/* Pages are counted in regions of ML__REGION_PAGES pages: a region holds a
 * reference count per page and is created when a block first touches it and
 * freed when its last page empties, so memory follows the live set. */
#define ML__REGION_PAGES 256

typedef struct {
    uint64_t key;    /* region number + 1; 0: empty slot */
    uint32_t *cnt;   /* ML__REGION_PAGES counters */
    uint32_t used;   /* pages of the region with a non-zero count */
} ml__region_t;

typedef struct {
    ml_map_t map;       /* ml__region_t by key */
    ml__region_t *last; /* the region used last (most events hit it again) */
    uint64_t nonzero;   /* edge pages with a non-zero count */
    uint64_t interior;  /* pages entirely inside one live block (never shared) */
} ml__page_map_t;

/* ------------------------------------------------------------------------- */
/* Timeline buckets                                                          */
/* ------------------------------------------------------------------------- */

typedef struct {
    bool used;
    uint32_t t_max;  /* time of the largest heap value in the bucket */
    uint64_t heap_max, rss, mmap_max, gpu_max, calls;
} ml__tl_bucket_t;

/* ------------------------------------------------------------------------- */
/* Symbolizer                                                                */
/* ------------------------------------------------------------------------- */

typedef struct ml__symbolizer_s ml__symbolizer_t;

/* Symbolized frames of one return address, innermost (possibly inlined)
 * first. Strings are interned in the symbolizer and live as long as it. */
typedef struct {
    ml_frame_t *f;
    uint32_t n;
} ml__pc_frames_t;

int ml__sym_new(ml__symbolizer_t **out, bool no_symbols);
/* The debug cache (debug_cache.c): uncompressed copies of files whose
 * debug sections are compressed, by build-id.
 * ml__debug_cache_find: an fd of the copy for this build-id, with *path its
 * malloc'd path; -1 when there is none (or the cache is off).
 * ml__debug_cache_open: when the ELF file open at `fd` has compressed debug
 * sections and a build-id, makes its copy if there is none yet; with
 * `keep`, returns an fd of the copy and *path as above, else 0. -1 when the
 * file needs no copy or none could be made: then read the file itself. */
int ml__debug_cache_find(const unsigned char *id, int len, char **path);
int ml__debug_cache_open(int fd, char **path, bool keep);
/* The cache directory, opened (created when `create`); -1 when it is off,
 * cannot be made, or fails its checks (a link, not ours, open to others). */
int ml__debug_cache_dir(bool create);
/* Removes the least recently used files of the cache open at `dfd` until
 * `incoming` more bytes fit under its limit. */
void ml__debug_cache_prune(int dfd, uint64_t incoming);

/* The symbol cache (symcache.c): the frames each address of a module
 * resolved to, kept in the debug cache between reports, by build-id, and
 * used only while the stamp (this memlens, the files read) is the same;
 * `self` is this memlens' build-id in hex, part of the file's name.
 * A frame's function is NULL for the "[module+0xOFF]" name. Addresses are
 * relative to the module's load base. ml__symc_get gives the frames of an
 * address (0: not cached), pointing into the cache; ml__symc_close writes
 * what was added and frees. NULL caches are allowed everywhere. */
#define ML__SYMC_MAX_FRAMES 32
typedef struct {
    const char *function, *file;
    uint32_t line;
    bool inlined;
} ml__symc_frame_t;
typedef struct ml__symc_s ml__symc_t;
ml__symc_t *ml__symc_open(const uint8_t *id, uint32_t idlen, const char *self, const char *stamp,
                          size_t stamp_len);
uint32_t ml__symc_get(const ml__symc_t *c, uint64_t addr, ml__symc_frame_t *out);
void ml__symc_put(ml__symc_t *c, uint64_t addr, const ml__symc_frame_t *f, uint32_t n);
void ml__symc_close(ml__symc_t *c);
void ml__sym_free(ml__symbolizer_t *s);
/* Warnings (build-id mismatches, missing files) go to this session. */
void ml__sym_set_owner(ml__symbolizer_t *s, ml_analysis_t *a);
/* symbols.c: a frame that names a site no better than the allocator: no
 * name, a standard library's, or the C/C++ runtime's (sites.c, headlines). */
bool ml__frame_is_runtime(const ml_frame_t *f);
/* Resolves pc inside module number `mod` (m: its record, NULL: none) into
 * frames; results are cached per (module, pc). */
int ml__sym_resolve(ml__symbolizer_t *s, int32_t mod, const ml__module_t *m, uint64_t pc,
                    ml__pc_frames_t *out);
/* With ML_SYM_VERIFY=1 in the environment, a warning that says how many ELF
 * symbol lookups were checked against libdw and how many differed. */
void ml__sym_verify_summary(ml__symbolizer_t *s);
/* Interns a string in the symbolizer's pool. */
const char *ml__sym_intern(ml__symbolizer_t *s, const char *str);
/* True if the frame belongs to the allocator (malloc family, operator new,
 * std::allocator::allocate, memlens itself). */
bool ml__frame_is_allocator(const ml_frame_t *f);
/* A Rust symbol (legacy "_ZN...17h<hash>E" or v0 "_R...") as rustc's short
 * form prints it, malloc'd; NULL when `sym` is not one (rust_demangle.c). */
char *ml_rust_demangle(const char *sym);

/* gfortran's symbol `__M_MOD_P` of a module procedure the report names
 * "M::P"; false for any other name. */
bool ml__fortran_symbol(const char *function, char *out, size_t len);
bool ml__ada_symbol(const char *function, char *out, size_t len);

/* ------------------------------------------------------------------------- */
/* Session                                                                   */
/* ------------------------------------------------------------------------- */

#define ML__MAX_THREADS 65536

typedef struct {
    uint32_t tid;
    char *name;
    uint64_t alloc_calls, bytes_allocated, free_calls, temporary;
    double w_calls, w_bytes;
    bool seen;
} ml__thread_t;

struct ml_analysis_s {
    ml_totals_t t;
    ml__live_t heap; /* live heap blocks (live.c) */
    ml_map_t maps; /* ml__block_t: live anonymous mappings */
    /* The keys of maps in address order (descending), for unmaps that cut a
     * mapping's tail or middle, or span several (analysis.c, unmap_range).
     * Not saved: rebuilt from maps when its count differs (a restored
     * snapshot). */
    uint64_t *map_starts;
    uint64_t nmap_starts;
    uint32_t map_starts_cap;
    /* Temporary allocations, as heaptrack counts them: a block whose free
     * (or realloc) is the next heap event after its allocation. Any other
     * allocation or free in between clears last_alloc_live. */
    uint64_t last_alloc_ptr;
    bool last_alloc_live;
    /* realloc: the block freed just before, per thread, restored on failure.
     * Grown on demand to the highest thread index seen (a session per traced
     * image: a table of ML__MAX_THREADS each, 2 MiB, cost 10 GiB for 5,000
     * images under --follow-fork) */
    struct ml__realloc_stash {
        ml__block_t b;
        uint64_t seq;   /* a->seq after its free: nothing happened since while equal */
        bool temporary; /* its end counted as a temporary allocation */
        bool was_live;  /* last_alloc_live before its free */
    } *realloc_stash;
    uint32_t realloc_stash_cap;
    /* sampled traces: weighted sums behind the integer totals */
    double w_calls, w_bytes, w_reallocs;
    uint64_t seq; /* events that changed the heap */

    /* process */
    ml_process_info_t proc;
    char *proc_strings[ML_MAX_ARGS + 4];
    uint32_t page_size;

    /* stack trie and per-stack statistics */
    uint32_t *node_parent;
    uint64_t *node_pc;
    int32_t *node_module;
    uint32_t *node_stat; /* index into stats, 0: none */
    uint32_t nnodes, node_cap;
    /* Nodes recorded where no module was loaded (their object's module
     * record came after them): the next module recorded over their pc takes
     * them (analysis.c, add_node). At most ML__PENDING_MAX. */
    uint32_t *pending_nodes;
    uint32_t npending, pending_cap;
    ml__stack_stats_t *stats; /* stats[0] is the unknown stack */
    uint32_t nstats, stats_cap;

    /* modules */
    ml__module_t *mods;
    uint32_t nmods, mods_cap;
    uint32_t *loaded_sorted; /* loaded module indexes by lo */
    uint32_t nloaded;
    bool loaded_dirty;

    /* peak and worst moments */
    ml__moment_t mom[2]; /* [0] peak, [1] worst */
    ml__page_map_t pages;

    /* last samples */
    bool have_mallinfo, have_rss;
    uint32_t mallinfo_time_ms;
    uint64_t mallinfo[5];

    /* timeline */
    ml__tl_bucket_t tl[ML_TIMELINE_MAX];
    uint32_t tl_width; /* ms per bucket */
    ml__tl_bucket_t *tl_cur; /* the bucket of the last event, from tl_cur_lo ms */
    uint32_t tl_cur_lo;

    ml_histograms_t hist;
    ml__thread_t *threads;
    uint32_t nthreads;

    /* Light sessions (ml_analysis_new_light) keep totals, the peak and the
     * live block map only: what `memlens run` needs for its summary and the
     * exit scan, at a fraction of the per-event cost. */
    bool light;
    bool from_snapshot; /* restored by ml_analysis_load_ex(ML_LOAD_SNAPSHOT) */
    /* A snapshot carries the fragmentation of the peak and worst moments,
     * computed by the collector from their graveyards, instead of the
     * graveyards (which hold every block live then: millions, for some). */
    bool snap_frag_set[2];
    ml_frag_t snap_frag[2];
    int8_t *snap_cells[2];

    /* exit scan */
    bool scanned;
    ml_leaks_t scan; /* the scan summary fields only */

    /* derived by build(); the symbolizer outlives builds (its cache and
     * strings are reused by the next one) */
    struct ml__built_s *b;
    ml__symbolizer_t *sym;

    /* warnings */
    char **warn;
    size_t nwarn, warn_cap;
    /* warn_built[i]: warning i says something of the state at the last
     * build (ml__warn_built), and the next build says it again or not: it
     * is dropped then, and never saved in a snapshot. A session built while
     * it was fed (the live viewer's) said "no exit-time reachability scan"
     * before the scan came, and its snapshot kept saying it (issue 12). */
    uint8_t *warn_built;
    /* Out of memory while feeding (analysis.c, lost()): never silent. */
    uint64_t lost_blocks; /* heap blocks and mappings not tracked */
    uint64_t lost_other;  /* records kept incompletely: stack nodes and statistics,
                           * modules, threads, page counters, the peak's blocks */
    char *lost_warning;   /* the warning that counts them (one of warn[], rewritten
                           * in place), NULL before the first loss */
    struct ml_gpu_s *gpu; /* GPU records (gpu.c), NULL until the first one */
};

/* The results of build(). */
struct ml__built_s {
    ml_site_t *sites;
    size_t nsites;
    /* Where each site's frames came from (ml__site_trie_t, site order):
     * kept for the report's stack table (ml__analysis_site_trie). */
    uint32_t *site_tnode, *site_tskip;
    uint8_t *node_nfr;
    uint32_t trie_nnodes;
    ml_frame_t *frames; /* all sites' frames */
    size_t nframes, frames_cap;
    ml_leak_group_t *groups;
    ml_leaks_t leaks;
    ml_frag_t frag[ML_MOMENTS];
    int8_t *cells[ML_MOMENTS];
    ml_timeline_point_t *tl;
    size_t ntl;
    ml_thread_stats_t *threads;
    size_t nthreads;
    ml_calltree_node_t *tree; /* the whole call tree (calltree.c) */
    size_t ntree;
    ml_calltree_node_t *flame; /* the tree pruned for the report */
    size_t nflame;
    uint32_t flame_max_nodes; /* the build's pruning limits, for ml_analysis_flame_inverted */
    double flame_min_fraction;
    const char *const *alloc_fns; /* the build's --alloc-fn patterns (ml_build_opts_t) */
    size_t nalloc_fns;
    uint64_t *alloc_fn_hits; /* per pattern: the stacks it dropped a frame of */
};

/* Copies the nodes of call tree t[0..n) that the flame tree keeps
 * (ml_analysis_flame) into a malloc'd array. Returns 0 or -ENOMEM. */
int ml__calltree_prune(const ml_calltree_node_t *t, size_t n, uint32_t max_nodes,
                       double min_fraction, ml_calltree_node_t **out, size_t *nout);

/* Where the sites' frames came from (sites.c), for ml__calltree_build:
 * site i's frames are those of trie node site_node[i] from position
 * site_skip[i] of its expansion, then those of its ancestors (node_parent)
 * up to node 0; node_nframes[n] is the length of node n's expansion (0:
 * not resolved). A site whose frames do not add up to that is walked frame
 * by frame. */
typedef struct {
    const uint32_t *site_node, *site_skip;
    const uint32_t *node_parent;
    const uint8_t *node_nframes;
    uint32_t nnodes;
} ml__site_trie_t;

/* ml_calltree_build(sites, nsites, NULL, false, out), the same tree node for
 * node, helped by the trie: each trie node's place in the tree is looked up
 * once, not once per site below it. */
int64_t ml__calltree_build(const ml_site_t *sites, size_t nsites, const ml__site_trie_t *trie,
                           ml_calltree_node_t **out);

void ml__warn(ml_analysis_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ml__warn_built(ml_analysis_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the warnings of the last build (ml_analysis_build, before it builds). */
void ml__warn_unbuild(ml_analysis_t *a);

/* A block as fragmentation needs it: 16 bytes instead of 40, so the blocks
 * live at a moment (millions, at some peaks) sort in less time and memory. */
typedef struct {
    uint64_t ptr;
    uint64_t size : 48; /* clamped (ml__size48): no real block reaches 256 TiB */
    uint64_t slack : 16;
} ml__fblock_t;

/* A frame in no module (a JIT's code), named by its bare address
 * ("[0x7f...]", symbols.c unknown_name): an address that changes with every
 * run and process, which diff and merge key as "[?]" instead. */
static inline bool ml__frame_in_no_module(const ml_frame_t *f) {
    return !f->module && f->function && !strncmp(f->function, "[0x", 3);
}

/* A size as fragmentation blocks and graveyards keep it. */
static inline uint64_t ml__size48(uint64_t size) {
    return size < (1ull << 48) ? size : (1ull << 48) - 1;
}

/* The fragmentation block {ptr, size, slack} as two whole words, for the
 * reason of ml__block_make (whose test covers this one too): the
 * initialiser stored the size's word and then the slack's 16 bits into it,
 * and the merge of a moment's blocks (ml__mstream_next) read the block
 * back as one 16-byte load, which waited on that narrow store: three
 * quarters of ml__mstream_next's samples in a close of 10 M blocks. */
static inline ml__fblock_t ml__fblock_make(uint64_t ptr, uint64_t size, uint64_t slack) {
    _Static_assert(sizeof(ml__fblock_t) == 16, "ml__fblock_t is two words");
    union {
        ml__fblock_t b;
        uint64_t w[2];
    } u;
    u.w[0] = ptr;
    u.w[1] = (size & ((1ull << 48) - 1)) | (slack & 0xffffu) << 48;
    return u.b;
}

static inline ml__fblock_t ml__fblock_of_grave(const ml__grave_t *g) {
    return ml__fblock_make(g->ptr, g->size, g->slack);
}

/* The estimated usable size of a request under the detected allocator. */
const char *ml__allocator_model(const ml_analysis_t *a);
uint64_t ml__usable_size(const char *model, uint64_t size);
/* Pinned pages per site at the end (frag.c), summed over the blocks live
 * then, given in address order (sites.c's walk of the end). */
typedef struct {
    uint64_t ps;      /* the page size */
    int shift;        /* its log2, -1 when it is not a power of two */
    uint64_t page, live; /* the page being summed, the live bytes in it */
    uint32_t *sites;  /* the sites with a block in it */
    uint32_t nsites, cap;
    bool open;
} ml__pin_acc_t;
void ml__pin_begin(ml__pin_acc_t *c, const ml_analysis_t *a);
/* Blocks live at the end, in address order, after those added before:
 * each pins its pages for its site (none for a stack without a site). */
void ml__pin_add_ends(ml__pin_acc_t *c, const ml_analysis_t *a, const ml__eblock_t *v, uint32_t n,
                      ml_site_t *sites);
void ml__pin_end(ml__pin_acc_t *c, ml_site_t *sites);

/* sites.c */
int ml__build_sites(ml_analysis_t *a, struct ml__built_s *b, const ml_build_opts_t *o);
void ml__built_free(struct ml__built_s *b);

/* The blocks live at a moment (m NULL: now) as fragmentation blocks, one
 * at a time by address (sites.c): no array of them is made. Opening copies
 * and sorts the moment's graveyard (16 bytes a block); the session must not
 * change until the stream is closed. */
/* live.c: the next live block allocated at or before event max_seq, as
 * a fragmentation block (what a moment's walk reads, without decoding the
 * rest); false at the end. */
bool ml__live_next_fblock(ml__live_cursor_t *cur, uint64_t max_seq, ml__fblock_t *out);
/* The same, with the block's event number. */
bool ml__live_next_fblock_seq(ml__live_cursor_t *cur, uint64_t max_seq, ml__fblock_t *out,
                              uint64_t *seq);

typedef struct {
    const ml__moment_t *m;
    ml__fblock_t *g; /* the graveyard, sorted */
    uint64_t ng, gi;
    ml__live_cursor_t cur;
    bool have, live_done;
    ml__fblock_t live; /* the next live block, when `have` */
} ml__mstream_t;
int ml__mstream_open(ml__mstream_t *s, const ml_analysis_t *a, const ml__moment_t *m); /* 0 or -ENOMEM */
/* The same without the live set: a sorted copy of m's graveyard only (the
 * stream's cursor is empty). 0 or -ENOMEM. */
int ml__mstream_copy_graves(ml__mstream_t *s, const ml__moment_t *m);
/* A closing moment's graveyard, sorted in the moment's own buffer, which
 * the stream takes (the moment keeps none): a stream without the live set
 * (s->cur is empty). Cannot fail. */
void ml__mstream_take_graves(ml__mstream_t *s, ml__moment_t *m);
bool ml__mstream_next(ml__mstream_t *s, ml__fblock_t *out);
void ml__mstream_rewind(ml__mstream_t *s);
void ml__mstream_close(ml__mstream_t *s);
/* frag.c: fragmentation of one set of live blocks, streamed in address
 * order (walked once; again, rewound, only for a heap map whose region's
 * pages did not fit a list). */
void ml__frag_compute(const ml_analysis_t *a, ml__mstream_t *s, ml_frag_t *out, int8_t **cells);
/* Both moments in one walk of the live set, for their close: the same
 * results as ml__frag_compute on each; both give up their graveyards
 * (ml__mstream_take_graves). 0 or -ENOMEM (nothing taken). */
int ml__frag_compute2(const ml_analysis_t *a, ml__moment_t *m[2], ml_frag_t f[2], int8_t *cells[2]);
/* The same, leaving the moments as they are (their graveyards are copied,
 * both at once): for a snapshot. 0 or -ENOMEM. */
int ml__frag_compute2_keep(const ml_analysis_t *a, const ml__moment_t *m[2], ml_frag_t f[2], int8_t *cells[2]);
/* The same, one block at a time (by address): begin, add each block, end.
 * end's stream s gives the blocks again (rewound) for a heap map without
 * a page list. */
typedef struct {
    uint64_t page;   /* the first page */
    uint32_t npages; /* 1: one page with `live` bytes; more: whole pages */
    uint32_t live;
} ml__pg_run_t;
typedef struct {
    ml__pg_run_t *v;
    uint64_t n, cap;
    bool over; /* no list for this region */
} ml__pg_list_t;
typedef struct {
    const ml_analysis_t *a;
    ml_frag_t *f;
    uint64_t ps;
    int shift;
    bool any_page;
    uint64_t n, last_page, end, region_start, region_live, best_live, best_lo, best_hi;
    ml__pg_list_t pl[2], *cur, *best; /* the region's pages; the busiest region's */
} ml__frag_acc_t;
void ml__frag_begin(ml__frag_acc_t *acc, const ml_analysis_t *a, ml_frag_t *out);
void ml__frag_add(ml__frag_acc_t *acc, const ml__fblock_t *b);
/* ml__frag_add of each of v[0..n), made a fragmentation block (the end's
 * walk, sites.c: a call per batch instead of per block). */
void ml__frag_add_ends(ml__frag_acc_t *acc, const ml__eblock_t *v, uint32_t n);
void ml__frag_end(ml__frag_acc_t *acc, ml__mstream_t *s, int8_t **cells);

/* A radix sort on the address. O(n), where qsort's comparisons dominated the
 * report's time. (A macro: it sorted the 32-byte live blocks too, until the
 * live set made that unneeded.)
 *
 * From 2^16 blocks on, the sort is in place (no second array: at a moment
 * of 24 M blocks the copy cost 384 MB beside the then 1 GiB live map, issue 12
 * item 1): an MSD radix sort on 8-bit digits from the highest bit in which
 * the addresses differ, each bucket permuted in place (American flag sort)
 * and sorted on the next digit down, with an insertion sort for buckets of
 * 32 blocks or fewer. Below that, an LSD radix sort of 16 bits a pass
 * through a scratch array (the caller's, with the _with form); passes whose
 * digit is the same for every block (the high bits of user-space
 * addresses) are skipped. */
#define MSD_SMALL 32
#define RADIX_SORT(NAME, T, CMP)                                                                   \
    static void NAME##_msd(T *b, uint64_t n, unsigned shift) {                                     \
        if (n <= MSD_SMALL) {                                                                      \
            for (uint64_t i = 1; i < n; i++) {                                                     \
                T x = b[i];                                                                        \
                uint64_t j = i;                                                                    \
                for (; j > 0 && b[j - 1].ptr > x.ptr; j--) b[j] = b[j - 1];                        \
                b[j] = x;                                                                          \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        uint64_t next[256] = {0}, end[256];                                                        \
        for (uint64_t i = 0; i < n; i++) next[(b[i].ptr >> shift) & 0xff]++;                       \
        uint64_t sum = 0;                                                                          \
        for (unsigned d = 0; d < 256; d++) {                                                       \
            uint64_t c = next[d];                                                                  \
            next[d] = sum;                                                                         \
            end[d] = sum += c;                                                                     \
        }                                                                                          \
        for (unsigned d = 0; d < 256; d++) {                                                       \
            while (next[d] < end[d]) {                                                             \
                T x = b[next[d]];                                                                  \
                unsigned e = (x.ptr >> shift) & 0xff;                                              \
                while (e != d) {                                                                   \
                    T y = b[next[e]];                                                              \
                    b[next[e]++] = x;                                                              \
                    x = y;                                                                         \
                    e = (x.ptr >> shift) & 0xff;                                                   \
                }                                                                                  \
                b[next[d]++] = x;                                                                  \
            }                                                                                      \
        }                                                                                          \
        if (!shift) return;                                                                        \
        unsigned down = shift > 8 ? shift - 8 : 0;                                                 \
        for (unsigned d = 0; d < 256; d++) {                                                       \
            uint64_t lo = d ? end[d - 1] : 0;                                                      \
            if (end[d] - lo > 1) NAME##_msd(b + lo, end[d] - lo, down);                            \
        }                                                                                          \
    }                                                                                              \
    void NAME##_with(T *b, uint64_t n, T *scratch) {                                               \
        if (n >= (1u << 16)) {                                                                     \
            uint64_t lo = b[0].ptr, hi = b[0].ptr;                                                 \
            for (uint64_t i = 1; i < n; i++) {                                                     \
                lo = b[i].ptr < lo ? b[i].ptr : lo;                                                \
                hi = b[i].ptr > hi ? b[i].ptr : hi;                                                \
            }                                                                                      \
            if (lo == hi) return;                                                                  \
            unsigned top = 63u - (unsigned)__builtin_clzll(lo ^ hi);                               \
            NAME##_msd(b, n, top >= 7 ? top - 7 : 0);                                              \
            return;                                                                                \
        }                                                                                          \
        T *tmp = scratch ? scratch : n >= 1024 ? malloc(n * sizeof *tmp) : NULL;                   \
        uint64_t *cnt = tmp ? malloc(65536 * sizeof *cnt) : NULL;                                  \
        if (!cnt) {                                                                                \
            if (tmp != scratch) free(tmp);                                                         \
            if (n > 1) qsort(b, n, sizeof *b, CMP);                                                \
            return;                                                                                \
        }                                                                                          \
        T *src = b, *dst = tmp;                                                                    \
        for (unsigned shift = 0; shift < 64; shift += 16) {                                        \
            memset(cnt, 0, 65536 * sizeof *cnt);                                                   \
            for (uint64_t i = 0; i < n; i++) cnt[(src[i].ptr >> shift) & 0xffff]++;                \
            if (cnt[(src[0].ptr >> shift) & 0xffff] == n) continue;                                \
            uint64_t sum = 0;                                                                      \
            for (uint32_t d = 0; d < 65536; d++) {                                                 \
                uint64_t c = cnt[d];                                                               \
                cnt[d] = sum;                                                                      \
                sum += c;                                                                          \
            }                                                                                      \
            for (uint64_t i = 0; i < n; i++) dst[cnt[(src[i].ptr >> shift) & 0xffff]++] = src[i];  \
            T *t = src;                                                                            \
            src = dst;                                                                             \
            dst = t;                                                                               \
        }                                                                                          \
        if (src != b) memcpy(b, src, n * sizeof *b);                                               \
        free(cnt);                                                                                 \
        if (tmp != scratch) free(tmp);                                                             \
    }                                                                                              \
    void NAME(T *b, uint64_t n) {                                                                  \
        NAME##_with(b, n, NULL);                                                                   \
    }

/* Sorting fragmentation blocks by address (a radix sort; the live set needs
 * none, it is walked in address order). */
void ml__sort_fblocks(ml__fblock_t *b, uint64_t n);
void ml__sort_fblocks_with(ml__fblock_t *b, uint64_t n, ml__fblock_t *scratch);

#endif
