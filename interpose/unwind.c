/* unwind.c - the recorder's own x86-64 stack walker: DWARF CFI rules cached
 * per return address, and reuse of the unchanged outer part of the thread's
 * previous stack. See unwind.h for the interface and docs/recorder.md
 * ("Stacks") for why its stacks equal libunwind's.
 */
#define _GNU_SOURCE
#include "unwind.h"
#include "interpose_internal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)
#define ML_UW_POSSIBLE 1
#else
#define ML_UW_POSSIBLE 0
#endif

/* ------------------------------------------------------------------------- */
/* Rules                                                                     */
/* ------------------------------------------------------------------------- */

/* A rule is packed into 64 bits:
 *   bits 0-1   kind (R_STD, R_END, R_UNSUP)
 *   bit 2      CFA is rbp + offset (else rsp + offset)
 *   bit 3      the caller's rbp is saved at CFA + rbp offset (else unchanged)
 *   bit 4      the rule came from a module that can be unloaded
 *   bit 5      no unwind information: libunwind's guess from rbp (R_GUESS)
 *   bits 16-31 rbp offset (int16)
 *   bits 32-63 CFA offset (int32)
 * The kinds follow libunwind's fast tracer (x86_64/Gstash_frame.c): R_STD is
 * its "standard frame", which is what compilers emit for ordinary code; R_END
 * is a frame whose return address is undefined (the outermost frame: _start,
 * a thread's clone); everything else is R_UNSUP, left to libunwind.
 *
 * Code without unwind information (a JIT compiler's, which lies in no
 * module, and V8's builtins embedded in node, which have no FDE) is what
 * libunwind's unw_step guesses to be a frame-pointer frame (x86_64 Gstep.c:
 * CFA = rbp + 16, the return address at CFA - 8, the caller's rbp at
 * CFA - 16), and its tracer then steps so at that pc from its cache
 * (Gtrace.c, UNW_X86_64_FRAME_GUESSED). R_GUESS is that rule, taken only
 * where libunwind's own checks would take it (the walk: rbp at or above the
 * frame's stack pointer by at most 0x4000; rbp 0 ends the chain there), and
 * where the code at the pc is neither a sigreturn trampoline nor a PLT
 * entry, which libunwind tells from the code before guessing. Anything else
 * is left to libunwind. */
enum { R_STD = 1, R_END = 2, R_UNSUP = 3 };
#define R_CFA_RBP 0x4ull
#define R_RBP_SAVED 0x8ull
#define R_NONPERM 0x10ull
#define R_GUESS 0x20ull

static inline unsigned rule_kind(uint64_t r) {
    return (unsigned)(r & 3);
}
static inline int32_t rule_cfa_off(uint64_t r) {
    return (int32_t)(uint32_t)(r >> 32);
}
static inline int16_t rule_rbp_off(uint64_t r) {
    return (int16_t)(uint16_t)(r >> 16);
}
static inline uint64_t rule_std(bool cfa_rbp, int32_t cfa_off, bool rbp_saved, int16_t rbp_off) {
    return R_STD | (cfa_rbp ? R_CFA_RBP : 0) | (rbp_saved ? R_RBP_SAVED : 0) |
           (uint64_t)(uint16_t)rbp_off << 16 | (uint64_t)(uint32_t)cfa_off << 32;
}

/* ------------------------------------------------------------------------- */
/* DWARF CFI                                                                 */
/* ------------------------------------------------------------------------- */

/* The subset of DWARF call frame information (DWARF 4 section 6.4, and the
 * .eh_frame/.eh_frame_hdr layout of the LSB) needed to tell, for one
 * address, the rule above. Data is read from the module's own mapped
 * .eh_frame, bounded by each entry's length field. */

enum {
    PE_ABSPTR = 0x00, PE_ULEB128 = 0x01, PE_UDATA2 = 0x02, PE_UDATA4 = 0x03, PE_UDATA8 = 0x04,
    PE_SLEB128 = 0x09, PE_SDATA2 = 0x0a, PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c,
    PE_PCREL = 0x10, PE_DATAREL = 0x30, PE_INDIRECT = 0x80, PE_OMIT = 0xff,
};

enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };

typedef struct {
    const uint8_t *p, *end;
    bool bad;
} cur_t;

static inline uint8_t rd_u8(cur_t *c) {
    if (c->p + 1 > c->end) {
        c->bad = true;
        return 0;
    }
    return *c->p++;
}

static uint64_t rd_fixed(cur_t *c, unsigned n) {
    if (c->p + n > c->end) {
        c->bad = true;
        c->p = c->end;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, c->p, n); /* little endian */
    c->p += n;
    return v;
}

static uint64_t rd_uleb(cur_t *c) {
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        uint8_t b = rd_u8(c);
        if (c->bad) return 0;
        if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) return v;
    }
}

static int64_t rd_sleb(cur_t *c) {
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        b = rd_u8(c);
        if (c->bad) return 0;
        if (shift < 64) v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= -((int64_t)1 << shift);
    return v;
}

/* Reads a pointer in encoding `enc` (DW_EH_PE_*). pc-relative values are
 * relative to the field's own address, data-relative ones to `datarel`.
 * Indirect and text/function-relative encodings are not used by the
 * toolchains we meet and mark the cursor bad. */
static uint64_t rd_encoded(cur_t *c, uint8_t enc, uint64_t datarel) {
    uint64_t field = (uint64_t)(uintptr_t)c->p, v;
    switch (enc & 0x0f) {
    case PE_ABSPTR: v = rd_fixed(c, 8); break;
    case PE_ULEB128: v = rd_uleb(c); break;
    case PE_UDATA2: v = rd_fixed(c, 2); break;
    case PE_UDATA4: v = rd_fixed(c, 4); break;
    case PE_UDATA8: v = rd_fixed(c, 8); break;
    case PE_SLEB128: v = (uint64_t)rd_sleb(c); break;
    case PE_SDATA2: v = (uint64_t)(int64_t)(int16_t)rd_fixed(c, 2); break;
    case PE_SDATA4: v = (uint64_t)(int64_t)(int32_t)rd_fixed(c, 4); break;
    case PE_SDATA8: v = rd_fixed(c, 8); break;
    default: c->bad = true; return 0;
    }
    switch (enc & 0x70) {
    case 0: break;
    case PE_PCREL: v += field; break;
    case PE_DATAREL: v += datarel; break;
    default: c->bad = true; return 0;
    }
    if (enc & PE_INDIRECT) c->bad = true;
    return v;
}

/* Skips a pointer in encoding `enc`, whatever its application. */
static void skip_encoded(cur_t *c, uint8_t enc) {
    switch (enc & 0x0f) {
    case PE_ABSPTR: case PE_UDATA8: case PE_SDATA8: (void)rd_fixed(c, 8); break;
    case PE_UDATA4: case PE_SDATA4: (void)rd_fixed(c, 4); break;
    case PE_UDATA2: case PE_SDATA2: (void)rd_fixed(c, 2); break;
    case PE_ULEB128: (void)rd_uleb(c); break;
    case PE_SLEB128: (void)rd_sleb(c); break;
    default: c->bad = true;
    }
}

/* Rules of the three registers that matter (others are parsed and ignored). */
enum { HOW_SAME = 0, HOW_UNDEF, HOW_OFFSET, HOW_OTHER };

typedef struct {
    uint8_t how;
    int64_t off;
} reg_rule_t;

typedef struct {
    uint64_t cfa_reg;
    int64_t cfa_off;
    bool cfa_expr;
    reg_rule_t ra, rbp, rsp;
} cfi_state_t;

#define CFI_STACK 16

typedef struct {
    uint64_t caf;    /* code alignment factor */
    int64_t daf;     /* data alignment factor */
    uint64_t ra_col; /* return address column */
    uint8_t fde_enc; /* 'R' augmentation */
    bool signal;     /* 'S' augmentation */
    cur_t insns;     /* initial instructions */
} cie_t;

static reg_rule_t *reg_slot(cfi_state_t *s, uint64_t reg, uint64_t ra_col) {
    if (reg == ra_col) return &s->ra;
    if (reg == REG_RBP) return &s->rbp;
    if (reg == REG_RSP) return &s->rsp;
    return NULL;
}

static void set_rule(cfi_state_t *s, uint64_t reg, uint64_t ra_col, uint8_t how, int64_t off) {
    reg_rule_t *r = reg_slot(s, reg, ra_col);
    if (r) {
        r->how = how;
        r->off = off;
    }
}

/* Runs CFA instructions from `c` until the location passes `target`
 * (`loc` is the location the instructions start at). `init` is the state
 * after the CIE's initial instructions (for DW_CFA_restore), NULL while
 * running those. Returns false on anything it does not understand. */
static bool cfi_run(cur_t *c, const cie_t *cie, cfi_state_t *s, const cfi_state_t *init,
                    uint64_t loc, uint64_t target) {
    cfi_state_t stack[CFI_STACK];
    unsigned depth = 0;
    while (c->p < c->end) {
        uint8_t op = rd_u8(c);
        uint8_t low = op & 0x3f;
        uint64_t reg, delta = 0;
        int64_t off;
        bool advance = false;
        switch (op & 0xc0) {
        case 0x40: /* DW_CFA_advance_loc */
            delta = low;
            advance = true;
            break;
        case 0x80: /* DW_CFA_offset */
            off = (int64_t)rd_uleb(c) * cie->daf;
            set_rule(s, low, cie->ra_col, HOW_OFFSET, off);
            break;
        case 0xc0: { /* DW_CFA_restore */
            if (!init) return false;
            reg_rule_t *r = reg_slot(s, low, cie->ra_col);
            if (r) *r = *reg_slot((cfi_state_t *)init, low, cie->ra_col);
            break;
        }
        default:
            switch (op) {
            case 0x00: /* DW_CFA_nop */
                break;
            case 0x01: /* DW_CFA_set_loc */
                if (!init) return false;
                loc = rd_encoded(c, cie->fde_enc, 0);
                if (loc > target) return !c->bad;
                break;
            case 0x02: delta = rd_fixed(c, 1); advance = true; break;
            case 0x03: delta = rd_fixed(c, 2); advance = true; break;
            case 0x04: delta = rd_fixed(c, 4); advance = true; break;
            case 0x05: /* DW_CFA_offset_extended */
                reg = rd_uleb(c);
                off = (int64_t)rd_uleb(c) * cie->daf;
                set_rule(s, reg, cie->ra_col, HOW_OFFSET, off);
                break;
            case 0x06: { /* DW_CFA_restore_extended */
                if (!init) return false;
                reg = rd_uleb(c);
                reg_rule_t *r = reg_slot(s, reg, cie->ra_col);
                if (r) *r = *reg_slot((cfi_state_t *)init, reg, cie->ra_col);
                break;
            }
            case 0x07: /* DW_CFA_undefined */
                set_rule(s, rd_uleb(c), cie->ra_col, HOW_UNDEF, 0);
                break;
            case 0x08: /* DW_CFA_same_value */
                set_rule(s, rd_uleb(c), cie->ra_col, HOW_SAME, 0);
                break;
            case 0x09: /* DW_CFA_register */
                reg = rd_uleb(c);
                (void)rd_uleb(c);
                set_rule(s, reg, cie->ra_col, HOW_OTHER, 0);
                break;
            case 0x0a: /* DW_CFA_remember_state: CFA included, as GCC expects */
                if (depth == CFI_STACK) return false;
                stack[depth++] = *s;
                break;
            case 0x0b: /* DW_CFA_restore_state */
                if (!depth) return false;
                *s = stack[--depth];
                break;
            case 0x0c: /* DW_CFA_def_cfa */
                s->cfa_reg = rd_uleb(c);
                s->cfa_off = (int64_t)rd_uleb(c);
                s->cfa_expr = false;
                break;
            case 0x0d: /* DW_CFA_def_cfa_register */
                s->cfa_reg = rd_uleb(c);
                s->cfa_expr = false;
                break;
            case 0x0e: /* DW_CFA_def_cfa_offset */
                s->cfa_off = (int64_t)rd_uleb(c);
                break;
            case 0x0f: { /* DW_CFA_def_cfa_expression */
                uint64_t len = rd_uleb(c);
                if (len > (uint64_t)(c->end - c->p)) return false;
                c->p += len;
                s->cfa_expr = true;
                break;
            }
            case 0x10:   /* DW_CFA_expression */
            case 0x16: { /* DW_CFA_val_expression */
                reg = rd_uleb(c);
                uint64_t len = rd_uleb(c);
                if (len > (uint64_t)(c->end - c->p)) return false;
                c->p += len;
                set_rule(s, reg, cie->ra_col, HOW_OTHER, 0);
                break;
            }
            case 0x11: /* DW_CFA_offset_extended_sf */
                reg = rd_uleb(c);
                off = rd_sleb(c) * cie->daf;
                set_rule(s, reg, cie->ra_col, HOW_OFFSET, off);
                break;
            case 0x12: /* DW_CFA_def_cfa_sf */
                s->cfa_reg = rd_uleb(c);
                s->cfa_off = rd_sleb(c) * cie->daf;
                s->cfa_expr = false;
                break;
            case 0x13: /* DW_CFA_def_cfa_offset_sf */
                s->cfa_off = rd_sleb(c) * cie->daf;
                break;
            case 0x14: /* DW_CFA_val_offset */
                reg = rd_uleb(c);
                (void)rd_uleb(c);
                set_rule(s, reg, cie->ra_col, HOW_OTHER, 0);
                break;
            case 0x15: /* DW_CFA_val_offset_sf */
                reg = rd_uleb(c);
                (void)rd_sleb(c);
                set_rule(s, reg, cie->ra_col, HOW_OTHER, 0);
                break;
            case 0x2e: /* DW_CFA_GNU_args_size */
                (void)rd_uleb(c);
                break;
            case 0x2f: /* DW_CFA_GNU_negative_offset_extended */
                reg = rd_uleb(c);
                off = -(int64_t)rd_uleb(c) * cie->daf;
                set_rule(s, reg, cie->ra_col, HOW_OFFSET, off);
                break;
            default:
                return false;
            }
        }
        if (c->bad) return false;
        if (advance) {
            if (!init) return false; /* a CIE does not advance */
            loc += delta * cie->caf;
            if (loc > target) return true;
        }
    }
    return true;
}

/* Parses the CIE at `p` (its length field). */
static bool cie_parse(const uint8_t *p, cie_t *cie) {
    uint32_t len;
    memcpy(&len, p, 4);
    if (len == 0 || len == 0xffffffffu) return false;
    cur_t c = {p + 4, p + 4 + len, false};
    if (rd_fixed(&c, 4) != 0) return false; /* CIE id */
    uint8_t version = rd_u8(&c);
    if (version != 1 && version != 3 && version != 4) return false;
    const char *aug = (const char *)c.p;
    while (c.p < c.end && *c.p) c.p++;
    if (c.p >= c.end) return false;
    c.p++;
    if (version == 4) { /* address size, segment selector size */
        if (rd_u8(&c) != 8 || rd_u8(&c) != 0) return false;
    }
    cie->caf = rd_uleb(&c);
    cie->daf = rd_sleb(&c);
    cie->ra_col = version == 1 ? rd_u8(&c) : rd_uleb(&c);
    cie->fde_enc = PE_ABSPTR;
    cie->signal = false;
    if (aug[0] == 'z') {
        uint64_t alen = rd_uleb(&c);
        if (c.bad || alen > (uint64_t)(c.end - c.p)) return false;
        cur_t a = {c.p, c.p + alen, false};
        c.p += alen;
        for (const char *q = aug + 1; *q; q++) {
            switch (*q) {
            case 'L': (void)rd_u8(&a); break;
            case 'R': cie->fde_enc = rd_u8(&a); break;
            case 'S': cie->signal = true; break;
            case 'P': /* the personality routine's pointer: only its size matters */
                skip_encoded(&a, rd_u8(&a));
                break;
            default: return false; /* an augmentation we cannot size */
            }
            if (a.bad) return false;
        }
    } else if (aug[0]) {
        return false;
    }
    if (c.bad || cie->caf == 0) return false;
    cie->insns = c;
    return true;
}

/* The FDE covering `target` in the module whose .eh_frame_hdr is `hdr`,
 * from the header's sorted table: its address, or NULL. */
static const uint8_t *fde_find(const uint8_t *hdr, uint64_t target, bool *searched) {
    *searched = false;
    if (hdr[0] != 1) return NULL;
    uint8_t ptr_enc = hdr[1], cnt_enc = hdr[2], tab_enc = hdr[3];
    if (ptr_enc == PE_OMIT || cnt_enc == PE_OMIT || tab_enc != (PE_DATAREL | PE_SDATA4))
        return NULL;
    cur_t c = {hdr + 4, hdr + 64, false};
    (void)rd_encoded(&c, ptr_enc, (uint64_t)(uintptr_t)hdr);
    uint64_t count = rd_encoded(&c, cnt_enc, (uint64_t)(uintptr_t)hdr);
    if (c.bad) return NULL;
    *searched = true; /* a table libunwind reads as well: not found there, not found */
    if (count == 0) return NULL;
    const uint8_t *tab = c.p;
    int64_t key = (int64_t)(target - (uint64_t)(uintptr_t)hdr);
    /* The last entry whose initial location is <= target. */
    uint64_t lo = 0, hi = count;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        int32_t loc;
        memcpy(&loc, tab + mid * 8, 4);
        if ((int64_t)loc <= key) lo = mid;
        else hi = mid;
    }
    int32_t loc, fde;
    memcpy(&loc, tab + lo * 8, 4);
    memcpy(&fde, tab + lo * 8 + 4, 4);
    if ((int64_t)loc > key) return NULL;
    return hdr + fde;
}

/* The rule for return address `pc` of a module with .eh_frame_hdr `hdr`:
 * the CFI row of the instruction before it (the call), as every unwinder
 * looks it up. */
static uint64_t rule_from_cfi(const uint8_t *hdr, uint64_t pc, bool *noinfo) {
    uint64_t target = pc - 1;
    /* Below the table's first entry, or past the range of the entry before
     * it: no FDE covers the pc, and libunwind, which searches the same
     * table, finds none either. */
    const uint8_t *fde = fde_find(hdr, target, noinfo);
    if (!fde) return R_UNSUP;
    *noinfo = false;
    uint32_t len, cie_off;
    memcpy(&len, fde, 4);
    if (len == 0 || len == 0xffffffffu) return R_UNSUP;
    memcpy(&cie_off, fde + 4, 4);
    if (cie_off == 0) return R_UNSUP; /* a CIE, not an FDE */
    cie_t cie;
    if (!cie_parse(fde + 4 - cie_off, &cie)) return R_UNSUP;
    if (cie.signal || cie.ra_col != REG_RA) return R_UNSUP;
    cur_t c = {fde + 8, fde + 4 + len, false};
    uint64_t begin = rd_encoded(&c, cie.fde_enc, 0);
    uint64_t range = rd_encoded(&c, (uint8_t)(cie.fde_enc & 0x0f), 0);
    if (c.bad) return R_UNSUP;
    if (target < begin || target - begin >= range) {
        *noinfo = true;
        return R_UNSUP;
    }
    /* 'z' augmentation data of the FDE (the LSDA pointer): skipped. The
     * CIE's augmentation string starts with 'z' whenever the FDE has it. */
    const uint8_t *cie_aug = fde + 4 - cie_off + 9;
    if (*cie_aug == 'z') {
        uint64_t alen = rd_uleb(&c);
        if (c.bad || alen > (uint64_t)(c.end - c.p)) return R_UNSUP;
        c.p += alen;
    }
    cfi_state_t init = {.cfa_reg = REG_RSP, .cfa_off = 0};
    cur_t ci = cie.insns;
    if (!cfi_run(&ci, &cie, &init, NULL, begin, target)) return R_UNSUP;
    cfi_state_t s = init;
    if (!cfi_run(&c, &cie, &s, &init, begin, target)) return R_UNSUP;

    /* Classify, as libunwind's tdep_stash_frame does, keeping only what its
     * fast tracer handles the same way. */
    if (s.cfa_expr || (s.cfa_reg != REG_RBP && s.cfa_reg != REG_RSP)) return R_UNSUP;
    if (s.cfa_off <= -(1 << 28) || s.cfa_off >= (1 << 28)) return R_UNSUP;
    if (s.ra.how == HOW_UNDEF) return R_END;
    if (s.ra.how != HOW_OFFSET || s.ra.off != -8) return R_UNSUP;
    if (s.rsp.how != HOW_SAME && s.rsp.how != HOW_UNDEF) return R_UNSUP;
    bool saved = false;
    if (s.rbp.how == HOW_OFFSET) {
        if (s.rbp.off <= -(1 << 14) || s.rbp.off >= (1 << 14) || s.rbp.off == -1) return R_UNSUP;
        saved = true;
    } else if (s.rbp.how != HOW_SAME && s.rbp.how != HOW_UNDEF) {
        return R_UNSUP;
    }
    return rule_std(s.cfa_reg == REG_RBP, (int32_t)s.cfa_off, saved,
                    saved ? (int16_t)s.rbp.off : 0);
}

/* ------------------------------------------------------------------------- */
/* Modules                                                                   */
/* ------------------------------------------------------------------------- */

/* Which modules can go away. glibc unloads only objects that dlopen loaded
 * (dl-close.c: l_type == lt_loaded); those loaded with the program stay until
 * exit. Our first hook call initialises us, and every dlopen allocates before
 * it adds its object to the list, so the objects listed at initialisation are
 * exactly the permanent ones: their rules are cached for the process's life.
 * Rules of later objects are cached only per thread, and dropped when the
 * loader's unload count (dlpi_subs) moves. */

#define MAX_PERM 4096
static const void *perm_maps[MAX_PERM]; /* sorted link_map pointers */
static uint32_t nperm;
static bool enabled;
static uint64_t subs_at_start;
static _Atomic int unloaded; /* a module was unloaded since start-up */

#if ML_UW_POSSIBLE
static int (*find_object)(void *, struct dl_find_object *);

static int perm_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    subs_at_start = info->dlpi_subs;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || ph->p_memsz == 0) continue;
        struct dl_find_object fo;
        if (find_object((void *)(info->dlpi_addr + ph->p_vaddr), &fo) != 0) break;
        if (nperm == MAX_PERM) break;
        uint32_t j = nperm++;
        while (j > 0 && (uintptr_t)perm_maps[j - 1] > (uintptr_t)fo.dlfo_link_map) {
            perm_maps[j] = perm_maps[j - 1];
            j--;
        }
        perm_maps[j] = fo.dlfo_link_map;
        break;
    }
    return 0;
}
#endif

static bool is_perm(const void *map) {
    uint32_t lo = 0, hi = nperm;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (perm_maps[mid] == map) return true;
        if ((uintptr_t)perm_maps[mid] < (uintptr_t)map) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

static int counts_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    ((uint64_t *)data)[0] = info->dlpi_adds;
    ((uint64_t *)data)[1] = info->dlpi_subs;
    return 1; /* the counters are the same in every entry: stop after one */
}

void ml__loader_counts(uint64_t v[2]) {
    v[0] = v[1] = 0;
    dl_iterate_phdr(counts_cb, v);
}

/* The loader's count of unloaded objects, and in *adds (when given) of
 * loaded ones. Takes the loader's list lock (dl_iterate_phdr), so it is
 * asked only for stacks that touch a module that can be unloaded. */
static uint64_t loader_subs_adds(uint64_t *adds) {
    uint64_t v[2];
    ml__loader_counts(v);
    if (adds) *adds = v[0];
    return v[1];
}

static uint64_t loader_subs(void) {
    return loader_subs_adds(NULL);
}

bool ml__uw_init(void) {
#if ML_UW_POSSIBLE
    find_object = (int (*)(void *, struct dl_find_object *))dlsym(RTLD_DEFAULT, "_dl_find_object");
    if (!find_object) return false;
    nperm = 0;
    dl_iterate_phdr(perm_cb, NULL);
    enabled = nperm > 0;
#endif
    return enabled;
}

bool ml__uw_enabled(void) {
    return enabled;
}

bool ml__uw_unloaded(void) {
    return ml_atomic_load_relaxed(&unloaded) != 0;
}

static const uint8_t sigreturn[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

/* The guess for a pc of a module without unwind information for it, unless
 * its code is one of the two that libunwind tells apart first: a sigreturn
 * trampoline (unw_is_signal_frame) or a PLT entry (jmp *x(%rip); push $n;
 * jmp: is_plt_entry). The 16 bytes must lie in the module's mapping and in
 * the page of the pc (the code the pc returns to is mapped; what follows a
 * segment's last page may not be). */
static uint64_t guess_in_module(uint64_t pc, uint64_t map_end, uint64_t nonperm) {
    if (pc + 16 > map_end || (pc & 4095) > 4096 - 16) return R_UNSUP | nonperm;
    const uint8_t *code = (const uint8_t *)(uintptr_t)pc;
    if (memcmp(code, sigreturn, sizeof sigreturn) == 0) return R_UNSUP | nonperm;
    if (code[0] == 0xff && code[1] == 0x25 && code[6] == 0x68 && code[11] == 0xe9) return R_UNSUP | nonperm;
    return rule_std(true, 16, true, -16) | R_GUESS | nonperm;
}

/* The rule of `pc` computed from scratch; *perm tells whether it may be
 * cached for good, *cacheable whether it may be cached at all (not when pc
 * is outside every module: JIT code changes). Realigned at its entry, off
 * the cached path: its search saves vector registers with aligned stores,
 * and a caller may have called malloc with the stack misaligned
 * (docs/recorder.md, "A misaligned stack"). */
static __attribute__((noinline, force_align_arg_pointer)) uint64_t rule_compute(uint64_t pc, bool *perm,
                                                                             bool *cacheable) {
    *perm = false;
    *cacheable = false;
#if ML_UW_POSSIBLE
    struct dl_find_object fo;
    if (pc < 0x4000) return R_UNSUP;
    /* Outside every module (a JIT's code): the guess. Its code is not read
     * for the two patterns (its page may be gone, and libunwind, which
     * reads it only through checked accesses, finds neither there in code
     * a JIT made); the rule is not cached. */
    if (find_object((void *)(uintptr_t)(pc - 1), &fo) != 0) return rule_std(true, 16, true, -16) | R_GUESS;
    *cacheable = true;
    *perm = is_perm(fo.dlfo_link_map);
    uint64_t nonperm = *perm ? 0 : R_NONPERM;
    uint64_t end = (uint64_t)(uintptr_t)fo.dlfo_map_end;
    if (!fo.dlfo_eh_frame) return guess_in_module(pc, end, nonperm);
    /* A sigreturn trampoline found by its code (mov $15,%rax; syscall), as
     * libunwind's unw_is_signal_frame does, whatever its CFI says. */
    if (pc + sizeof sigreturn <= end && memcmp((const void *)(uintptr_t)pc, sigreturn, sizeof sigreturn) == 0)
        return R_UNSUP | nonperm;
    bool noinfo;
    uint64_t r = rule_from_cfi(fo.dlfo_eh_frame, pc, &noinfo);
    return noinfo ? guess_in_module(pc, end, nonperm) : r | nonperm;
#else
    (void)pc;
    return R_UNSUP;
#endif
}

/* ------------------------------------------------------------------------- */
/* Rule cache                                                                */
/* ------------------------------------------------------------------------- */

/* Rules of permanent modules: one table for the process, lock-free to read
 * (an entry is visible once its pc is stored with release order, after its
 * rule), insert-only, grown by copying into a table four times larger (the
 * old one stays mapped for readers still probing it). */
typedef struct {
    _Atomic uint64_t pc; /* 0: empty */
    uint64_t rule;
} rule_entry_t;

typedef struct {
    uint64_t cap, count;
    rule_entry_t e[];
} rule_table_t;

static _Atomic(rule_table_t *) rules;
static _Atomic int rules_lock;

void ml__uw_lock(void) {
    ml__spin_lock(&rules_lock);
}

void ml__uw_unlock(void) {
    ml__spin_unlock(&rules_lock);
}

static inline uint64_t rule_slot(uint64_t pc) {
    uint64_t h = pc * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 32);
}

static rule_table_t *rules_new(uint64_t cap) {
    rule_table_t *t = ml__raw_alloc(sizeof(rule_table_t) + cap * sizeof(rule_entry_t));
    if (t) t->cap = cap;
    return t;
}

static void rules_put(rule_table_t *t, uint64_t pc, uint64_t rule) {
    uint64_t mask = t->cap - 1;
    uint64_t i = rule_slot(pc) & mask;
    while (ml_atomic_load_relaxed(&t->e[i].pc)) i = (i + 1) & mask;
    t->e[i].rule = rule;
    ml_atomic_store_release(&t->e[i].pc, pc);
    t->count++;
}

static void rules_insert(uint64_t pc, uint64_t rule) {
    ml__uw_lock();
    rule_table_t *t = ml_atomic_load_acquire(&rules);
    if (!t) {
        t = rules_new(1u << 12);
        if (!t) goto out;
        ml_atomic_store_release(&rules, t);
    }
    uint64_t mask = t->cap - 1;
    for (uint64_t i = rule_slot(pc) & mask;; i = (i + 1) & mask) {
        uint64_t k = ml_atomic_load_relaxed(&t->e[i].pc);
        if (k == pc) goto out; /* another thread was first */
        if (!k) break;
    }
    if ((t->count + 1) * 2 > t->cap) {
        rule_table_t *n = rules_new(t->cap * 4);
        if (!n) goto out; /* not cached: computed again next time */
        for (uint64_t i = 0; i < t->cap; i++) {
            uint64_t k = ml_atomic_load_relaxed(&t->e[i].pc);
            if (k) rules_put(n, k, t->e[i].rule);
        }
        ml_atomic_store_release(&rules, n);
        t = n;
    }
    rules_put(t, pc, rule);
out:
    ml__uw_unlock();
}

static inline uint64_t rules_find(uint64_t pc) {
    rule_table_t *t = ml_atomic_load_acquire(&rules);
    if (ml_unlikely(!t)) return 0;
    uint64_t mask = t->cap - 1;
    for (uint64_t i = rule_slot(pc) & mask;; i = (i + 1) & mask) {
        uint64_t k = ml_atomic_load_acquire(&t->e[i].pc);
        if (k == pc) return t->e[i].rule;
        if (!k) return 0;
    }
}

/* The rule of `pc`, from the caches or computed. */
static uint64_t rule_get(ml_uw_thread_t *t, uint64_t pc) {
    ml_uw_rule_entry_t *e = &t->rc[(rule_slot(pc) >> 7) & (ML_UW_RULE_CACHE - 1)];
    if (ml_likely(e->pc == pc)) return e->rule;
    uint64_t r = rules_find(pc);
    if (!r) {
        bool perm, cacheable;
        r = rule_compute(pc, &perm, &cacheable);
        if (perm) {
            rules_insert(pc, r);
        } else if (!cacheable) {
            return r; /* outside every module (JIT code?): not cached */
        } else if (!t->np_epoch) {
            /* The first rule of an unloadable module in this cache: it holds
             * for the loader's current unload count, which the walk checks
             * again before its result is used. */
            t->np_epoch = loader_subs() + 1;
        }
    }
    e->pc = pc;
    e->rule = r;
    return r;
}

/* ------------------------------------------------------------------------- */
/* The walk                                                                  */
/* ------------------------------------------------------------------------- */

/* The end of the main thread's stack: the mapping the kernel names
 * "[stack]" in /proc/self/maps (the one that holds the stack the process
 * started on), read with plain system calls (no stdio: this runs inside
 * malloc), or 0. The buffer is not on the stack: the first stack a main
 * thread takes may be a signal handler's on an alternate stack of 8 KiB,
 * which 4 KiB more of ours overflowed (fx_altstack). Only the main thread
 * comes here, once, with the guard up (a handler that interrupts it takes
 * no stack). */
static uintptr_t main_stack_end(void) {
    static char buf[4096];
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t len = 0;
    uintptr_t found = 0;
    bool eof = false;
    while (!found && !eof) {
        ssize_t r = read(fd, buf + len, sizeof buf - len);
        if (r <= 0) eof = true;
        else len += (size_t)r;
        /* Every complete line: "start-end perms ... [stack]", in hex. */
        size_t pos = 0;
        for (;;) {
            char *nl = memchr(buf + pos, '\n', len - pos);
            if (!nl) break;
            uintptr_t hi = 0;
            const char *q = buf + pos;
            while (*q != '-' && q < nl) q++;
            for (q++; *q != ' ' && q < nl; q++) hi = hi * 16 + (uintptr_t)(*q <= '9' ? *q - '0' : (*q | 0x20) - 'a' + 10);
            if (nl - q >= 8 && !memcmp(nl - 8, " [stack]", 8)) {
                found = hi;
                break;
            }
            pos = (size_t)(nl + 1 - buf);
        }
        memmove(buf, buf + pos, len - pos);
        len -= pos;
        if (len == sizeof buf) break; /* a line longer than the buffer */
    }
    close(fd);
    return found;
}

/* An upper bound of the calling thread's stack that lies in the same mapping
 * as its stack pointer, found without allocating (pthread_getattr_np calls
 * malloc, which deadlocks an allocator that holds its lock while it calls
 * mmap, as jemalloc does). For threads of glibc's pthread_create, the thread
 * descriptor sits at the top of the stack block (also of a stack given with
 * pthread_attr_setstack); the main thread's stack is the kernel's "[stack]"
 * mapping. 0 when unknown. */
uintptr_t ml__uw_stack_top(void) {
    static _Atomic uintptr_t main_top;
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    if (syscall(SYS_gettid) != getpid()) {
        uintptr_t top = (uintptr_t)pthread_self();
        return top > here ? top : 0;
    }
    uintptr_t top = ml_atomic_load_relaxed(&main_top);
    if (!top) {
        /* Not the mapping of `here`: a first stack taken on an alternate
         * signal stack (a static array, a heap block) gave that mapping's
         * end as the main stack's top, and every later walk of the main
         * thread fell back to libunwind. */
        top = main_stack_end();
        ml_atomic_store_relaxed(&main_top, top);
    }
    return top > here ? top : 0;
}

static bool stack_bounds(ml_uw_thread_t *t) {
    if (ml_likely(t->hi)) return t->hi > 1;
    uintptr_t top = ml__uw_stack_top();
    t->hi = top ? top : 1; /* 1: unknown, every walk falls back */
    return top != 0;
}

/* Checks that the previous walk's steps from frame m outward read the same
 * words now: the return address slot (CFA - 8) of every frame, the caller's
 * rbp slot (CFA + roff) where the rest of the walk depends on that rbp, and
 * the last word read at the outermost frame. Returns -1 when all match, else
 * the frame whose step differs. */
static int validate(const ml_uw_stack_t *st, int m) {
    const ml_uw_frame_t *f = st->f;
    for (int i = m; i > 0; i--) {
        const uint64_t *cfa = (const uint64_t *)(uintptr_t)f[i - 1].rsp;
        if (cfa[-1] != f[i - 1].pc) return i;
        if (f[i].roff != ML_UW_NOSAVE && (f[i - 1].flags & ML_UWF_DEP) &&
            *(const uint64_t *)((uintptr_t)cfa + (intptr_t)f[i].roff) != f[i - 1].rbp)
            return i;
    }
    if (st->end == ML_UW_END_LOW && *(const uint64_t *)(uintptr_t)st->end_addr != st->end_word)
        return 0;
    return -1;
}

/* Marks which frames' rbp the rest of the walk depends on, for frames
 * [from, n) (f[from - 1] is already marked, or from is 0): a frame's step
 * uses its rbp when its CFA is rbp-based, and passes it on unchanged to the
 * caller when the rule does not restore it from a slot. */
static void mark_deps(ml_uw_stack_t *st, uint32_t from) {
    ml_uw_frame_t *f = st->f;
    for (uint32_t i = from; i < st->n; i++) {
        bool dep;
        if (i == 0) dep = st->end == ML_UW_END_LOW && (f[0].flags & ML_UWF_CFA_RBP);
        else dep = (f[i].flags & ML_UWF_CFA_RBP) ||
                   (f[i].roff == ML_UW_NOSAVE && (f[i - 1].flags & ML_UWF_DEP));
        f[i].flags = (uint8_t)((f[i].flags & ~ML_UWF_DEP) | (dep ? ML_UWF_DEP : 0));
    }
}

/* One walk; returns frames kept, -1 to fall back, -2 when a rule of an
 * unloadable module was used (the caller checks the loader and maybe retries). */
static int walk_once(ml_uw_thread_t *t, ml_uw_stack_t *st, uint64_t pc, uint64_t rsp,
                     uint64_t rbp, uint32_t max, bool *nonperm, ml_uw_stats_t *stats) {
    ml_uw_frame_t *s = t->scratch;
    ml_uw_frame_t *p = st->f;
    int m = st->valid ? (int)st->n - 1 : -1; /* candidate frame of the previous walk */
    int floor = m + 1;                        /* only frames below this may still match */
    uint32_t k = 0;
    uintptr_t hi = t->hi;
    bool guessed = false; /* a frame of this walk was guessed (R_GUESS) */
    if (rsp >= hi) return -1;
    for (;;) {
        /* A frame of the previous walk in the same state? */
        while (m >= 0 && p[m].rsp < rsp) m--;
        if (m >= 0 && m < floor && p[m].rsp == rsp && p[m].pc == pc &&
            (!(p[m].flags & ML_UWF_DEP) || p[m].rbp == rbp) && (uint32_t)m + 1 + k <= max) {
            int bad = validate(st, m);
            if (bad < 0) {
                /* f[0..m] stand; the new inner frames go above them. */
                for (uint32_t j = 0; j < k; j++) p[m + 1 + j] = s[k - 1 - j];
                st->n = (uint32_t)m + 1 + k;
                *nonperm |= st->nonperm;
                st->nonperm = *nonperm;
                mark_deps(st, (uint32_t)m + 1);
                if (stats) {
                    stats->walked = k;
                    stats->kept = (uint32_t)m + 1;
                }
                return m + 1;
            }
            floor = bad; /* the frames at and above `bad` cannot match any more */
        }
        if (k == max) {
            st->end = ML_UW_END_LIMIT;
            break;
        }
        uint64_t r = rule_get(t, pc);
        if (r & R_NONPERM) *nonperm = true;
        if (rule_kind(r) == R_UNSUP) return -1;
        /* libunwind guesses a frame of code without unwind information only
         * when rbp can be one: at or above the stack pointer by at most
         * 0x4000. Otherwise it ends its walk there, and its tracer remembers
         * that for the pc: left to it. rbp 0 is the end of the chain, as at
         * ld.so's _dl_start_user, which calls the constructors with rbp
         * cleared: libunwind ends its walk with that frame, whether its
         * tracer remembers the pc as the last frame or, having guessed it
         * before, fails to read at rbp + 8 and walks the stack again step
         * by step. The two agree unless the walk guessed a frame before
         * (libunwind's step-by-step guess sets the caller's stack pointer
         * otherwise than its tracer): then that is left to it too. */
        if (r & R_GUESS) {
            if (!rbp && !guessed) r = R_END | R_CFA_RBP; /* the frame depends on rbp's being 0 */
            else if (!rbp || rbp < rsp || rbp - rsp > 0x4000) return -1;
            else guessed = true;
        }
        ml_uw_frame_t *f = &s[k++];
        f->pc = pc;
        f->rsp = rsp;
        f->rbp = rbp;
        f->roff = ML_UW_NOSAVE;
        f->flags = (r & R_CFA_RBP) ? ML_UWF_CFA_RBP : 0;
        if (rule_kind(r) == R_END) {
            st->end = ML_UW_END_RULE;
            break;
        }
        uint64_t cfa = ((r & R_CFA_RBP) ? rbp : rsp) + (uint64_t)(int64_t)rule_cfa_off(r);
        if (cfa < rsp + 8 || cfa > hi) return -1; /* off this thread's stack, or not outward */
        uint64_t ra = *(const uint64_t *)(uintptr_t)(cfa - 8);
        uint64_t nrbp = rbp;
        if (r & R_RBP_SAVED) {
            uint64_t a = cfa + (uint64_t)(int64_t)rule_rbp_off(r);
            if (a < rsp || a > hi - 8) return -1;
            nrbp = *(const uint64_t *)(uintptr_t)a;
            f->roff = rule_rbp_off(r);
        }
        if (ra < 0x4000) { /* libunwind stops here, without recording it */
            st->end = ML_UW_END_LOW;
            st->end_addr = cfa - 8;
            st->end_word = ra;
            break;
        }
        pc = ra;
        rsp = cfa;
        rbp = nrbp;
    }
    for (uint32_t j = 0; j < k; j++) p[j] = s[k - 1 - j];
    st->n = k;
    st->nonperm = *nonperm;
    mark_deps(st, 0);
    if (stats) {
        stats->walked = k;
        stats->kept = 0;
    }
    return 0;
}

uint64_t ml__uw_frameless_step(ml_uw_thread_t *t, uint64_t pc, uint64_t rsp, uint64_t hi, uint64_t *cfa,
                               uint64_t *rbp) {
    if (!enabled || rsp >= hi) return 0;
    uint64_t r = rule_get(t, pc);
    if (rule_kind(r) != R_STD || (r & (R_CFA_RBP | R_GUESS | R_NONPERM))) return 0;
    uint64_t c = rsp + (uint64_t)(int64_t)rule_cfa_off(r);
    if (c < rsp + 8 || c > hi) return 0;
    if (r & R_RBP_SAVED) {
        uint64_t a = c + (uint64_t)(int64_t)rule_rbp_off(r);
        if (a < rsp || a > hi - 8) return 0;
        *rbp = *(const uint64_t *)(uintptr_t)a;
    }
    *cfa = c;
    return *(const uint64_t *)(uintptr_t)(c - 8);
}

int ml__uw_walk(ml_uw_thread_t *t, ml_uw_stack_t *st, uint64_t pc, uint64_t rsp, uint64_t rbp,
                uint32_t max, ml_uw_stats_t *stats) {
    t->np_adds = 0;
    if (!enabled || max > ML_UW_CAP || !stack_bounds(t)) goto fail;
    for (int attempt = 0; attempt < 2; attempt++) {
        bool nonperm = false;
        int kept = walk_once(t, st, pc, rsp, rbp, max, &nonperm, stats);
        if (nonperm) {
            /* Rules of unloadable modules were used (now, or by the frames
             * kept from the previous walk), or looked for: they hold only if
             * nothing was unloaded since this thread's cache of them started.
             * Otherwise the walk (even one that gave up: a stale rule may
             * have led it astray) is done again with fresh rules. */
            uint64_t subs = loader_subs_adds(&t->np_adds);
            if (subs != subs_at_start) ml_atomic_store_relaxed(&unloaded, 1);
            if (t->np_epoch != subs + 1) {
                memset(t->rc, 0, sizeof t->rc);
                t->np_epoch = subs + 1;
                st->valid = 0;
                continue;
            }
        }
        if (kept < 0) goto fail;
        st->valid = st->end != ML_UW_END_LIMIT;
        return kept;
    }
fail:
    st->valid = 0;
    st->n = 0;
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Memo of whole walks                                                       */
/* ------------------------------------------------------------------------- */

/* The words are those validate() reads for the whole stack, f[st->n - 1]
 * standing for the matched frame: the return address slot of every step,
 * the caller's rbp slot where the rest of the walk depends on that rbp,
 * and the word that ended the walk below 0x4000. Their addresses lie at or
 * above the start's stack pointer (the walk checks that each step moves
 * outward and reads only between rsp and the stack's top). */
bool ml__uw_memo_put(ml_uw_memo_t *e, const ml_uw_stack_t *st, uint32_t leaf, uint32_t tag) {
    if (!st->valid || st->nonperm || st->n == 0 || st->end == ML_UW_END_LIMIT) return false;
    const ml_uw_frame_t *f = st->f;
    uint32_t n = st->n;
    uint64_t base = f[n - 1].rsp;
    uint64_t addr[ML_UW_MEMO_WORDS], val[ML_UW_MEMO_WORDS];
    unsigned k = 0;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint64_t cfa = f[i - 1].rsp;
        if (k == ML_UW_MEMO_WORDS) return false;
        addr[k] = cfa - 8;
        val[k++] = f[i - 1].pc;
        if (f[i].roff != ML_UW_NOSAVE && (f[i - 1].flags & ML_UWF_DEP)) {
            if (k == ML_UW_MEMO_WORDS) return false;
            addr[k] = cfa + (uint64_t)(int64_t)f[i].roff;
            val[k++] = f[i - 1].rbp;
        }
    }
    if (st->end == ML_UW_END_LOW) {
        if (k == ML_UW_MEMO_WORDS) return false;
        addr[k] = st->end_addr;
        val[k++] = st->end_word;
    }
    for (unsigned i = 0; i < k; i++)
        if (addr[i] < base || addr[i] - base > UINT32_MAX) return false;
    for (unsigned i = 0; i < k; i++) {
        e->w[i].off = (uint32_t)(addr[i] - base);
        e->w[i].val = val[i];
    }
    e->n = (uint8_t)k;
    e->pc = f[n - 1].pc;
    e->rsp = base;
    e->rbp = f[n - 1].rbp;
    e->rbp_dep = (f[n - 1].flags & ML_UWF_DEP) != 0;
    e->leaf = leaf;
    e->tag = tag;
    return true;
}
