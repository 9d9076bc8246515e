/* unwind.h - the recorder's own x86-64 stack walker (libmemlens.so internal).
 *
 * Runs inside the traced program's malloc: no malloc, no stdio, and no lock
 * on the common path (a spinlock only when a return address is met for the
 * first time). The design and the proof that its stacks equal libunwind's
 * are in docs/recorder.md, section "Stacks"; in short:
 *
 *   - Each return address gets an unwind rule, derived once from the
 *     module's .eh_frame_hdr/.eh_frame (DWARF CFI, parsed here) and cached:
 *     CFA = rsp or rbp + offset, return address at CFA - 8, the caller's rbp
 *     unchanged or saved at CFA + offset. Anything else (signal frames, CFA
 *     expressions, missing CFI, code outside any module) is "unsupported"
 *     and the whole stack is left to libunwind.
 *   - A walk keeps, per frame, the state (pc, rsp, rbp) and where its step
 *     read the caller's return address and rbp. The next walk of the same
 *     thread, on meeting a frame whose state equals a frame of the previous
 *     walk, re-reads only those stack words: when they are all unchanged,
 *     the outer frames are the previous ones, by induction over the steps.
 *   - A whole walk is also remembered by its start (return address and
 *     stack pointer), as the list of the words it read (ml_uw_memo_t): a
 *     later call from the same place whose words are all unchanged has the
 *     same stack, and needs no rule and no step.
 *
 * ml_uw_stack_t keeps the frames outermost first, so that the frames kept
 * from the previous walk stay where they are and only the new inner frames
 * are written.
 */
#ifndef ML_UNWIND_H
#define ML_UNWIND_H

#include <stdbool.h>
#include <stdint.h>
#include "../trace/ml_event.h"

#define ML_UW_SKIP_MAX 8                          /* our own frames at the leaf end, at most */
#define ML_UW_CAP (ML_MAX_DEPTH + ML_UW_SKIP_MAX + 1) /* frames one walk keeps */
#define ML_UW_RULE_CACHE 1024                     /* per-thread rule cache entries */
#define ML_UW_NOSAVE INT16_MIN                    /* ml_uw_frame_t.roff: rbp not saved */

/* ml_uw_frame_t.flags */
#define ML_UWF_CFA_RBP 0x1 /* this frame's CFA is rbp + offset (else rsp + offset) */
#define ML_UWF_DEP 0x2     /* the walk outward from this frame depends on its rbp */
#define ML_UWF_USER 0x80   /* free for the caller (kept by the walker, clear on new frames) */

/* How a walk ended (ml_uw_stack_t.end). */
enum {
    ML_UW_END_RULE = 1,  /* the outermost frame's rule says so (return address undefined) */
    ML_UW_END_LOW = 2,   /* the next return address read was below 0x4000 (libunwind's test) */
    ML_UW_END_LIMIT = 3, /* `max` frames: the stack may go on (not reusable) */
};

typedef struct {
    uint64_t pc;  /* return address (for the first frame, the return address into our caller) */
    uint64_t rsp; /* stack pointer in this frame: the CFA of the frame inside it */
    uint64_t rbp;
    int16_t roff; /* this frame's step read the caller's rbp at CFA + roff, or ML_UW_NOSAVE */
    uint8_t flags;
    uint8_t pad;
    uint32_t id;  /* stacks.c: node id of the path from the outermost frame to this one */
} ml_uw_frame_t;

typedef struct {
    uint32_t n;        /* frames in f[], f[0] the outermost */
    uint8_t valid;     /* the next walk may reuse these frames */
    uint8_t end;       /* ML_UW_END_* */
    uint8_t nonperm;   /* a rule came from a module that dlclose can unload */
    uint8_t pad;
    uint64_t end_addr; /* ML_UW_END_LOW: the word read at the outermost frame, and its value */
    uint64_t end_word;
    ml_uw_frame_t f[ML_UW_CAP];
} ml_uw_stack_t;

typedef struct {
    uint64_t pc, rule;
} ml_uw_rule_entry_t;

/* Per-thread walker state (zero-filled is a valid fresh state). */
typedef struct {
    uintptr_t hi;      /* top of this thread's stack; 0: not looked up yet, 1: unknown */
    /* Rules this thread used recently, direct-mapped: those of permanent
     * modules (also in the process-wide table) and those of unloadable ones
     * (only here), valid while the loader's unload count is np_epoch - 1. */
    uint64_t np_epoch; /* 0: no rule of an unloadable module cached */
    /* The loader's count of loaded objects (dlpi_adds) as the last walk
     * that used such a rule read it with the unload count; 0 when the last
     * walk used none. The caller compares it with the module map's
     * (stacks.c, capture_fast). */
    uint64_t np_adds;
    ml_uw_rule_entry_t rc[ML_UW_RULE_CACHE];
    ml_uw_frame_t scratch[ML_UW_CAP];
} ml_uw_thread_t;

/* A whole walk remembered by its start state, for the next call made from
 * the same place (same return address, same stack pointer): every stack
 * word the walk read, at its offset from the start's stack pointer, with
 * the value it had. When the start state and all those words are the same
 * again, each step of a new walk would read the same words and give the
 * same frame, so the stack is the same, and so is whatever the caller
 * derived from it (`leaf`). This is validate()'s argument (unwind.c) with
 * the whole stack in place of the outer part kept from the previous walk.
 * Only walks whose rules cannot change are remembered (none from a module
 * that dlclose can unload), none cut at `max`, and none with more than
 * ML_UW_MEMO_WORDS words to check. */
#define ML_UW_MEMO_WORDS 39
typedef struct {
    uint64_t pc, rsp, rbp; /* the start state; rbp compared only when rbp_dep */
    uint32_t leaf;         /* the caller's result for this stack */
    uint32_t tag;          /* the caller's epoch: an entry matches only in its own */
    uint8_t n;             /* words in w[] */
    uint8_t rbp_dep;       /* the walk depends on the start's rbp */
    uint8_t walked;        /* the caller's: frames its walk stepped (at most 255) */
    uint8_t pad[5];
    struct __attribute__((packed)) {
        uint32_t off; /* from rsp */
        uint64_t val;
    } w[ML_UW_MEMO_WORDS];
} __attribute__((aligned(64))) ml_uw_memo_t;

/** Fills `e` from the walk `st` just made (its frames and how it ended),
 * with the caller's `leaf` and `tag`. Returns false, leaving `e` as it
 * was, when that walk cannot be remembered. */
bool ml__uw_memo_put(ml_uw_memo_t *e, const ml_uw_stack_t *st, uint32_t leaf, uint32_t tag);

/** Whether a walk from (pc, rsp, rbp), on the thread that filled `e` and in
 * epoch `tag`, gives the stack `e` remembers. The words are all read and
 * compared without branching on each: they are independent loads. */
static inline bool ml__uw_memo_match(const ml_uw_memo_t *e, uint32_t tag, uint64_t pc, uint64_t rsp,
                                     uint64_t rbp) {
    if (e->pc != pc || e->rsp != rsp || e->tag != tag || (e->rbp_dep && e->rbp != rbp))
        return false;
    uint64_t diff = 0;
    for (unsigned i = 0; i < e->n; i++)
        diff |= *(const uint64_t *)(uintptr_t)(rsp + e->w[i].off) ^ e->w[i].val;
    return diff == 0;
}

/* Walk statistics (--unwind verify only; see ml__uw_walk). */
typedef struct {
    uint32_t walked; /* frames stepped with rules */
    uint32_t kept;   /* outer frames kept from the previous walk */
} ml_uw_stats_t;

/** Sets the walker up: finds _dl_find_object and records the modules loaded
 * so far, which glibc never unloads (only dlopen'ed objects can go). Returns
 * false when the walker cannot run here (then every stack is libunwind's). */
bool ml__uw_init(void);

/** Whether ml__uw_init succeeded. */
bool ml__uw_enabled(void);

/** Walks the calling thread's stack, starting from the frame whose state is
 * (pc, rsp, rbp) (pc a return address), into `st`, reusing the frames of the
 * previous walk that `st` holds where they are proved unchanged. At most
 * `max` (<= ML_UW_CAP) frames. Returns the number of outer frames kept from
 * the previous walk (their `id` fields are left as they were; the others'
 * are undefined), or -1 when this stack must be taken by libunwind (then
 * `st` is invalid). Fills `stats` when not NULL. */
int ml__uw_walk(ml_uw_thread_t *t, ml_uw_stack_t *st, uint64_t pc, uint64_t rsp, uint64_t rbp,
                uint32_t max, ml_uw_stats_t *stats);

/** For --unwind fp: when the code at return address `pc` keeps no frame
 * pointer there (its unwind rule takes the caller's frame from the stack
 * pointer, not from rbp), the return address into its caller, read at that
 * frame's CFA - 8, with *cfa set to the CFA (the caller's stack pointer)
 * and *rbp to the caller's rbp (`rbp` unchanged unless the frame saved
 * it). `rsp` is the frame's stack pointer at the call it made, `hi` the
 * top of the stack. 0 otherwise (a frame-pointer frame, no rule, a rule
 * of a module that can be unloaded, the walker not set up). */
uint64_t ml__uw_frameless_step(ml_uw_thread_t *t, uint64_t pc, uint64_t rsp, uint64_t hi, uint64_t *cfa,
                               uint64_t *rbp);

/** An upper bound of the calling thread's stack in the mapping of its stack
 * pointer, found without allocating; 0 when unknown. */
uintptr_t ml__uw_stack_top(void);

/** Whether some module has been unloaded since start-up (then libunwind's
 * own per-address trace cache, which nothing invalidates, may be stale). */
bool ml__uw_unloaded(void);

/** Spinlock of the rule table, for fork (taken in prepare, released after). */
void ml__uw_lock(void);
void ml__uw_unlock(void);

#endif
