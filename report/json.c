/* json.c - the JSON report (docs/report-schema.json, schema_version 1).
 *
 * Presentation only: every number is read from the built analysis. Key names
 * are a contract (../shared/DESIGN.md, and the HTML page reads them); add
 * keys freely, never rename one.
 */
#define _GNU_SOURCE
#include "report_internal.h"
#include "ml_config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Primitives                                                                */
/* ------------------------------------------------------------------------- */

/* A ratio or a mean: the report writes 0 where one is not finite. */
static void kv_d(ml_json_t *w, const char *k, double v) {
    ml_json_kv_double(w, k, isfinite(v) ? v : 0);
}

/* A line number, or null without debug information. */
static void kv_line(ml_json_t *w, const char *k, uint32_t line) {
    if (line) ml_json_kv_u64(w, k, line);
    else ml_json_kv_null(w, k);
}

static void frame_obj(ml_json_t *w, const ml_frame_t *f, bool inlined) {
    ml_json_object(w);
    /* "function" is the name for display (ml_frame_short_name);
     * "function_full" the demangled name, when they differ. */
    char name[512];
    const char *shown = f->function ? ml_frame_short_name(f->function, name, sizeof name) : NULL;
    ml_json_kv_str(w, "function", shown);
    if (shown && strcmp(shown, f->function)) ml_json_kv_str(w, "function_full", f->function);
    ml_json_kv_str(w, "file", f->file);
    kv_line(w, "line", f->line);
    ml_json_kv_str(w, "module", f->module);
    ml_json_kv_u64(w, "address", f->address);
    if (inlined && f->inlined) ml_json_kv_bool(w, "inlined", true);
    ml_json_end(w);
}

/* ------------------------------------------------------------------------- */
/* Frame objects, rendered once                                              */
/* ------------------------------------------------------------------------- */

/* A site's frames are copies of the symbolizer's interned frames: every
 * occurrence of one return address has the same function, file and module
 * pointers, line, address and inlined flag, and the object's text depends
 * on nothing else. So each distinct frame is rendered once (a text writer)
 * and its text copied at every occurrence: python3-dicts' report holds
 * about 200,000 frame objects of 5,000 distinct frames. The key is the
 * fields themselves, strings by pointer: two frames with equal strings at
 * different addresses are merely rendered twice. */
typedef struct {
    const char *function, *file, *module;
    uint64_t address;
    uint32_t line;
    bool inlined; /* as written: the frame's flag, when the list shows it */
    size_t off, len; /* the text, in fmemo_t.text; len 0: an empty slot */
} fmemo_ent_t;

typedef struct {
    ml_json_t *tw; /* the text writer that renders them */
    fmemo_ent_t *slot;
    size_t cap, n;
    char *text;
    size_t text_len, text_cap;
    bool failed; /* out of memory once: frames are written directly */
} fmemo_t;

static uint64_t fmemo_hash(const fmemo_ent_t *e) {
    uint64_t h = (uint64_t)(uintptr_t)e->function * 0x9e3779b97f4a7c15u;
    h = (h ^ (uint64_t)(uintptr_t)e->file) * 0xff51afd7ed558ccdu;
    h = (h ^ (uint64_t)(uintptr_t)e->module) * 0xc4ceb9fe1a85ec53u;
    h = (h ^ e->address) * 0x9e3779b97f4a7c15u;
    h = (h ^ ((uint64_t)e->line << 1 | e->inlined)) * 0xff51afd7ed558ccdu;
    return h ^ (h >> 31);
}

static bool fmemo_same(const fmemo_ent_t *a, const fmemo_ent_t *b) {
    return a->function == b->function && a->file == b->file && a->module == b->module &&
           a->address == b->address && a->line == b->line && a->inlined == b->inlined;
}

/* Doubles an open-addressed table of entries keyed by fmemo_hash (len 0:
 * an empty slot), starting at `first` slots. */
static int fmemo_slots_grow(fmemo_ent_t **slot, size_t *cap, size_t first) {
    size_t ncap = *cap ? *cap * 2 : first;
    fmemo_ent_t *ns = calloc(ncap, sizeof *ns);
    if (!ns) return -ENOMEM;
    for (size_t i = 0; i < *cap; i++) {
        if (!(*slot)[i].len) continue;
        size_t k = fmemo_hash(&(*slot)[i]) & (ncap - 1);
        while (ns[k].len) k = (k + 1) & (ncap - 1);
        ns[k] = (*slot)[i];
    }
    free(*slot);
    *slot = ns;
    *cap = ncap;
    return 0;
}

static int fmemo_grow(fmemo_t *m) {
    return fmemo_slots_grow(&m->slot, &m->cap, 256);
}

/* The text of frame f's object, rendering it the first time; NULL when out
 * of memory (the memo then stays off). */
static const char *fmemo_text(fmemo_t *m, const ml_frame_t *f, bool inlined, size_t *len) {
    if (m->failed) return NULL;
    fmemo_ent_t key = {f->function, f->file, f->module, f->address, f->line, inlined && f->inlined, 0, 0};
    if ((m->n + 1) * 2 > m->cap && fmemo_grow(m) < 0) goto oom;
    size_t k = fmemo_hash(&key) & (m->cap - 1);
    for (; m->slot[k].len; k = (k + 1) & (m->cap - 1))
        if (fmemo_same(&m->slot[k], &key)) {
            *len = m->slot[k].len;
            return m->text + m->slot[k].off;
        }
    if (!m->tw && ml_json_new_text(&m->tw) < 0) goto oom;
    ml_json_text_reset(m->tw);
    frame_obj(m->tw, f, inlined);
    size_t n;
    const char *t = ml_json_text(m->tw, &n);
    if (!t || !n) goto oom;
    if (n > m->text_cap - m->text_len) {
        size_t cap = m->text_cap ? m->text_cap : 64 * 1024;
        while (cap - m->text_len < n) cap *= 2;
        char *nt = realloc(m->text, cap);
        if (!nt) goto oom;
        m->text = nt;
        m->text_cap = cap;
    }
    memcpy(m->text + m->text_len, t, n);
    key.off = m->text_len;
    key.len = n;
    m->text_len += n;
    m->slot[k] = key;
    m->n++;
    *len = n;
    return m->text + key.off;
oom:
    m->failed = true;
    return NULL;
}

static void fmemo_free(fmemo_t *m) {
    ml_json_free(m->tw);
    free(m->slot);
    free(m->text);
}

/* A list of frames; m (optional) remembers their text. */
static void frame_list(ml_json_t *w, fmemo_t *m, const ml_frame_t *f, size_t n, bool inlined) {
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *t = m ? fmemo_text(m, &f[i], inlined, &len) : NULL;
        if (t) ml_json_raw(w, t, len);
        else frame_obj(w, &f[i], inlined);
    }
    ml_json_end(w);
}

void ml__json_frames(ml_json_t *w, const ml_frame_t *f, size_t n, bool inlined) {
    frame_list(w, NULL, f, n, inlined);
}

/* ------------------------------------------------------------------------- */
/* The HTML page's shared frame table                                        */
/* ------------------------------------------------------------------------- */

/* With ml_report_opts_t.frame_table, each frame is written once, in
 * "frame_table" at the end of the document, and frame lists and flame nodes
 * name their frames by index (docs/html-report.md, "The page's data"). A
 * table of frames keyed by their contents (function, file, line, module,
 * address, inlined), open addressing with linear probing. */
typedef struct ml__ftab {
    const ml_frame_t **slot; /* cap entries, NULL: empty */
    uint32_t *slot_idx;      /* index in list of each slot's frame */
    size_t cap;
    const ml_frame_t **list; /* the table, in index order */
    size_t n, list_cap;
    /* The stack table: node k is (frame, parent node: the next outer
     * frame's, -1 for the outermost), a trie of the stacks from their
     * outermost frame; skey holds (frame << 32 | parent + 1) + 1 per slot,
     * 0: empty. */
    uint64_t *skey;
    uint32_t *sval;
    size_t scap;
    uint64_t *stacks; /* node k's key, in index order */
    size_t ns, stacks_cap;
    /* In front of the table, keyed by the fields with strings by pointer
     * (the symbolizer interns them, so one return address always brings the
     * same pointers): the contents of a frame's strings are hashed once per
     * distinct frame, not at each of its occurrences. */
    fmemo_ent_t *pslot; /* off: the frame's index; len 1: in use */
    size_t pcap, pn;
    /* The last stack_ref's frames, outermost first, with their nodes: the
     * next stack usually shares its outer part (off: the node). */
    fmemo_ent_t *last;
    size_t nlast, last_cap;
    /* The sites' stack trie (ml__analysis_site_trie; tnn 0: none): tmemo[n]
     * is the stack node of trie node n's whole path (-1: not yet known),
     * tdepth[n] its frame count. */
    const uint32_t *tsite_node, *tsite_skip, *tparent;
    const uint8_t *tnfr;
    uint32_t tnn;
    int32_t *tmemo;
    uint32_t *tdepth, *tpath;
    int err; /* -ENOMEM, sticky */
    bool page; /* the page's form (ml_report_opts_t.frame_table) */
    fmemo_t memo; /* the text of frame objects, for the other form */
} ftab_t;

/* Rows in the page's form: ft is NULL or not in it for the plain form. */
static bool page(const ftab_t *ft) {
    return ft && ft->page;
}

static uint64_t str_hash(uint64_t h, const char *s) {
    if (!s) return h * 1099511628211u + 1;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return (h ^ 0xffu) * 1099511628211u;
}

static uint64_t frame_hash(const ml_frame_t *f) {
    uint64_t h = 14695981039346656037u;
    h = str_hash(h, f->function);
    h = str_hash(h, f->file);
    h = str_hash(h, f->module);
    h = (h ^ f->line) * 1099511628211u;
    h = (h ^ f->address) * 1099511628211u;
    h = (h ^ f->inlined) * 1099511628211u;
    return h ^ (h >> 29);
}

static bool str_eq(const char *a, const char *b) {
    return a == b || (a && b && !strcmp(a, b));
}

static bool frame_eq(const ml_frame_t *a, const ml_frame_t *b) {
    return a->line == b->line && a->address == b->address && a->inlined == b->inlined &&
           str_eq(a->function, b->function) && str_eq(a->file, b->file) && str_eq(a->module, b->module);
}

static int ftab_grow(ftab_t *t) {
    size_t ncap = t->cap ? t->cap * 2 : 1024;
    const ml_frame_t **ns = calloc(ncap, sizeof *ns);
    uint32_t *ni = malloc(ncap * sizeof *ni);
    if (!ns || !ni) {
        free(ns);
        free(ni);
        return -ENOMEM;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slot[i]) continue;
        size_t k = frame_hash(t->slot[i]) & (ncap - 1);
        while (ns[k]) k = (k + 1) & (ncap - 1);
        ns[k] = t->slot[i];
        ni[k] = t->slot_idx[i];
    }
    free(t->slot);
    free(t->slot_idx);
    t->slot = ns;
    t->slot_idx = ni;
    t->cap = ncap;
    return 0;
}

static int64_t ftab_index_slow(ftab_t *t, const ml_frame_t *f);

/* The index of f in the table, adding it; -1 when out of memory. */
static int64_t ftab_index(ftab_t *t, const ml_frame_t *f) {
    if (t->err) return -1;
    if ((t->pn + 1) * 2 > t->pcap && fmemo_slots_grow(&t->pslot, &t->pcap, 1024) < 0) {
        t->err = -ENOMEM;
        return -1;
    }
    fmemo_ent_t key = {f->function, f->file, f->module, f->address, f->line, f->inlined, 0, 1};
    size_t k = fmemo_hash(&key) & (t->pcap - 1);
    for (; t->pslot[k].len; k = (k + 1) & (t->pcap - 1))
        if (fmemo_same(&t->pslot[k], &key)) return (int64_t)t->pslot[k].off;
    int64_t idx = ftab_index_slow(t, f);
    if (idx < 0) return -1;
    key.off = (size_t)idx;
    t->pslot[k] = key;
    t->pn++;
    return idx;
}

/* The same, by the frame's contents. */
static int64_t ftab_index_slow(ftab_t *t, const ml_frame_t *f) {
    if (t->err) return -1;
    if ((t->n + 1) * 4 > t->cap * 3 && ftab_grow(t) < 0) goto oom;
    size_t k = frame_hash(f) & (t->cap - 1);
    for (; t->slot[k]; k = (k + 1) & (t->cap - 1))
        if (frame_eq(t->slot[k], f)) return t->slot_idx[k];
    if (t->n == t->list_cap) {
        size_t nc = t->list_cap ? t->list_cap * 2 : 1024;
        const ml_frame_t **nl = realloc(t->list, nc * sizeof *nl);
        if (!nl) goto oom;
        t->list = nl;
        t->list_cap = nc;
    }
    t->slot[k] = f;
    t->slot_idx[k] = (uint32_t)t->n;
    t->list[t->n] = f;
    return (int64_t)t->n++;
oom:
    t->err = -ENOMEM;
    return -1;
}

static uint64_t u64_hash(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdu;
    x ^= x >> 33;
    return x;
}

static int stab_grow(ftab_t *t) {
    size_t ncap = t->scap ? t->scap * 2 : 1024;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    uint32_t *nv = malloc(ncap * sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -ENOMEM;
    }
    for (size_t i = 0; i < t->scap; i++) {
        if (!t->skey[i]) continue;
        size_t k = u64_hash(t->skey[i]) & (ncap - 1);
        while (nk[k]) k = (k + 1) & (ncap - 1);
        nk[k] = t->skey[i];
        nv[k] = t->sval[i];
    }
    free(t->skey);
    free(t->sval);
    t->skey = nk;
    t->sval = nv;
    t->scap = ncap;
    return 0;
}

/* The stack node of frame index `frame` under node `parent` (-1: none),
 * adding it; -1 when out of memory. */
static int64_t stab_index(ftab_t *t, uint32_t frame, int64_t parent) {
    if (t->err) return -1;
    if ((t->ns + 1) * 4 > t->scap * 3 && stab_grow(t) < 0) goto oom;
    uint64_t key = ((uint64_t)frame << 32 | (uint64_t)(parent + 1)) + 1;
    size_t k = u64_hash(key) & (t->scap - 1);
    for (; t->skey[k]; k = (k + 1) & (t->scap - 1))
        if (t->skey[k] == key) return t->sval[k];
    if (t->ns == t->stacks_cap) {
        size_t nc = t->stacks_cap ? t->stacks_cap * 2 : 1024;
        uint64_t *nl = realloc(t->stacks, nc * sizeof *nl);
        if (!nl) goto oom;
        t->stacks = nl;
        t->stacks_cap = nc;
    }
    t->skey[k] = key;
    t->sval[k] = (uint32_t)t->ns;
    t->stacks[t->ns] = key - 1;
    return (int64_t)t->ns++;
oom:
    t->err = -ENOMEM;
    return -1;
}

/* The stack node of frames f[0..n) (innermost first): -1 for no frames.
 * Consecutive stacks mostly share their outer frames (clang-format's 48,835
 * sites: 86 % of their frames are the previous site's), and while the
 * frames are the last call's, so are the nodes: those lookups are skipped,
 * which changes neither table. */
static int64_t stack_ref(ftab_t *t, const ml_frame_t *f, uint32_t n) {
    if (t->err) return -1;
    if (n > t->last_cap) {
        size_t cap = t->last_cap ? t->last_cap : 64;
        while (cap < n) cap *= 2;
        fmemo_ent_t *l = realloc(t->last, cap * sizeof *l);
        if (!l) {
            t->err = -ENOMEM;
            return -1;
        }
        t->last = l;
        t->last_cap = cap;
    }
    int64_t node = -1;
    bool same = true;
    for (uint32_t d = 0; d < n; d++) {
        const ml_frame_t *fr = &f[n - 1 - d];
        fmemo_ent_t key = {fr->function, fr->file, fr->module, fr->address, fr->line, fr->inlined, 0, 1};
        if (same && d < t->nlast && fmemo_same(&t->last[d], &key)) {
            node = (int64_t)t->last[d].off;
            continue;
        }
        same = false;
        int64_t fi = ftab_index(t, fr);
        if (fi < 0) return -1;
        node = stab_index(t, (uint32_t)fi, node);
        if (node < 0) return -1;
        key.off = (size_t)node;
        t->last[d] = key;
    }
    t->nlast = n;
    return node;
}

/* Site s's stack node, as stack_ref(t, s->frames, s->nframes) gives it:
 * along the sites' stack trie, from the deepest ancestor of the site's
 * trie node whose stack node is known, one lookup per frame below it (the
 * sites are not in the order of their stacks: st18's 262,144 sites share
 * little with the site before them). The lookups are those the frame by
 * frame walk makes from that depth on, in the same order, so both tables
 * are the same. */
#define TRIE_WALK 1025
static int64_t site_stack_ref(ftab_t *t, const ml_site_t *s) {
    if (t->err) return -1;
    uint32_t node = t->tnn && t->tsite_node ? t->tsite_node[s->id] : 0;
    if (!node || node >= t->tnn || !s->nframes) return stack_ref(t, s->frames, s->nframes);
    if (!t->tmemo) {
        t->tmemo = malloc((size_t)t->tnn * sizeof *t->tmemo);
        t->tdepth = malloc((size_t)t->tnn * sizeof *t->tdepth);
        t->tpath = malloc(TRIE_WALK * sizeof *t->tpath);
        if (!t->tmemo || !t->tdepth || !t->tpath) {
            t->err = -ENOMEM;
            return -1;
        }
        memset(t->tmemo, 0xff, (size_t)t->tnn * sizeof *t->tmemo);
    }
    uint32_t skip = t->tsite_skip[s->id];
    if (!skip && t->tmemo[node] >= 0)
        return t->tdepth[node] == s->nframes ? t->tmemo[node] : stack_ref(t, s->frames, s->nframes);
    uint32_t np = 0, n = node;
    uint64_t want = 0;
    do {
        if (np == TRIE_WALK || !t->tnfr[n]) return stack_ref(t, s->frames, s->nframes);
        t->tpath[np++] = n;
        want += t->tnfr[n];
        n = t->tparent[n];
    } while (n && n < t->tnn && t->tmemo[n] < 0);
    bool known = n && n < t->tnn;
    int64_t at = known ? t->tmemo[n] : -1;
    uint32_t k = known ? t->tdepth[n] : 0; /* top-down frame k is frames[nframes - 1 - k] */
    if (skip >= t->tnfr[node] || want + k - skip != s->nframes) return stack_ref(t, s->frames, s->nframes);
    while (np) {
        uint32_t p = t->tpath[--np], c = t->tnfr[p] - (p == node ? skip : 0);
        for (uint32_t j = 0; j < c; j++, k++) {
            int64_t fi = ftab_index(t, &s->frames[s->nframes - 1 - k]);
            if (fi < 0) return -1;
            if ((at = stab_index(t, (uint32_t)fi, at)) < 0) return -1;
        }
        if (p != node || !skip) {
            t->tmemo[p] = (int32_t)at;
            t->tdepth[p] = k;
        }
    }
    t->nlast = 0; /* stack_ref's last stack is not this one */
    return at;
}

/* The rows that follow the trie (sites, peak, leaks) are written: its memo goes. */
static void trie_done(ftab_t *t) {
    free(t->tmemo);
    free(t->tdepth);
    free(t->tpath);
    t->tmemo = NULL;
    t->tdepth = t->tpath = NULL;
    t->tnn = 0;
}

static void ftab_free(ftab_t *t) {
    trie_done(t);
    free(t->last);
    free(t->pslot);
    free(t->slot);
    free(t->slot_idx);
    free(t->list);
    free(t->skey);
    free(t->sval);
    free(t->stacks);
    fmemo_free(&t->memo);
}

/* A row's frames: "frames": [the frames], or in the page's form
 * "stack": its node in the stack table (-1: no frames). */
static void frames(ml_json_t *w, ftab_t *ft, const ml_frame_t *f, uint32_t n) {
    if (!page(ft)) {
        ml_json_key(w, "frames");
        frame_list(w, ft ? &ft->memo : NULL, f, n, true);
        return;
    }
    ml_json_kv_i64(w, "stack", stack_ref(ft, f, n));
}

static void frame_table(ml_json_t *w, const ftab_t *ft) {
    ml_json_key(w, "frame_table");
    ml_json_array(w);
    for (size_t i = 0; i < ft->n; i++) {
        ml_json_break(w, 2);
        frame_obj(w, ft->list[i], true);
    }
    ml_json_end(w);
    ml_json_break(w, 0);
    ml_json_key(w, "stack_table");
    ml_json_array(w);
    ml_json_tight(w);
    for (size_t i = 0; i < ft->ns; i++) {
        if (i % 16 == 0) ml_json_break(w, 2);
        ml_json_array(w);
        ml_json_tight(w);
        ml_json_u64(w, ft->stacks[i] >> 32);
        ml_json_i64(w, (int64_t)(ft->stacks[i] & 0xffffffffu) - 1);
        ml_json_end(w);
    }
    ml_json_end(w);
}

ml__ftab_t *ml__ftab_new_page(void) {
    ftab_t *t = calloc(1, sizeof *t);
    if (t) t->page = true;
    return t;
}

void ml__ftab_delete(ml__ftab_t *t) {
    if (!t) return;
    ftab_free(t);
    free(t);
}

int ml__ftab_error(const ml__ftab_t *t) {
    return t ? t->err : 0;
}

void ml__json_frames_ft(ml_json_t *w, ml__ftab_t *ft, const ml_frame_t *f, uint32_t n) {
    frames(w, ft, f, n);
}

void ml__json_frame_tables(ml_json_t *w, const ml__ftab_t *ft) {
    frame_table(w, ft);
}

/* ------------------------------------------------------------------------- */
/* Sections                                                                  */
/* ------------------------------------------------------------------------- */

static void process(ml_json_t *w, const ml_analysis_t *a) {
    const ml_process_info_t *p = ml_analysis_process(a);
    const ml_totals_t *t = ml_analysis_totals(a);
    ml_json_key(w, "process");
    ml_json_object(w);
    ml_json_kv_u64(w, "pid", p->pid);
    ml_json_kv_u64(w, "ppid", p->ppid);
    ml_json_key(w, "command");
    ml_json_array(w);
    for (uint32_t i = 0; i < p->argc; i++) ml_json_str(w, p->argv[i]);
    ml_json_end(w);
    ml_json_kv_str(w, "exe", p->exe);
    if (t->complete && t->end.status_kind == ML_END_EXITED) ml_json_kv_i64(w, "exit_code", t->end.status);
    else ml_json_kv_null(w, "exit_code");
    if (t->complete && t->end.status_kind == ML_END_SIGNALED) ml_json_kv_i64(w, "signal", t->end.status);
    else ml_json_kv_null(w, "signal");
    ml_json_kv_str(w, "end", t->complete ? ml_end_name(t->end.status_kind) : "unknown");
    ml_json_kv_bool(w, "sampled", t->sample_bytes != 0);
    ml_json_kv_u64(w, "sample_bytes", t->sample_bytes);
    ml_json_kv_u64(w, "page_size", p->page_size);
    ml_json_kv_u64(w, "start_realtime_ns", p->start_realtime_ns);
    ml_json_kv_str(w, "parent_trace", p->parent_trace[0] ? p->parent_trace : NULL);
    ml_json_kv_str(w, "producer", p->producer);
    /* `memlens attach`: the trace covers the window from the attach
     * (start_realtime_ns) to the detach, and "leaked" is the window's growth. */
    ml_json_kv_bool(w, "attached", (p->options & ML_OPT_ATTACHED) != 0);
    ml_json_end(w);
}

static uint64_t duration_ms(const ml_totals_t *t) {
    uint64_t d = t->last_time_ms;
    if (t->complete && t->end.duration_ms > d) d = t->end.duration_ms;
    return d;
}

static void trace(ml_json_t *w, const ml_analysis_t *a, const ml_report_opts_t *ro) {
    const ml_totals_t *t = ml_analysis_totals(a);
    ml_json_key(w, "trace");
    ml_json_object(w);
    ml_json_kv_str(w, "path", ro->trace_path);
    ml_json_kv_u64(w, "size_bytes", ro->trace_size);
    ml_json_kv_u64(w, "records", t->records);
    ml_json_kv_bool(w, "complete", t->complete);
    ml_json_kv_bool(w, "truncated", t->truncated);
    ml_json_kv_u64(w, "lost_events", t->complete ? t->end.lost_in_crash + t->end.lost_dead_collector : 0);
    ml_json_kv_u64(w, "truncated_stacks", t->complete ? t->end.truncated_stacks : 0);
    ml_json_kv_u64(w, "ring_waits", t->complete ? t->end.ring_waits : 0);
    ml_json_end(w);
}

static void totals(ml_json_t *w, const ml_analysis_t *a) {
    const ml_totals_t *t = ml_analysis_totals(a);
    const ml_leaks_t *L = ml_analysis_leaks(a);
    uint64_t d = duration_ms(t);
    ml_json_key(w, "totals");
    ml_json_object(w);
    ml_json_kv_u64(w, "alloc_calls", t->alloc_calls);
    ml_json_kv_u64(w, "free_calls", t->free_calls);
    ml_json_kv_u64(w, "realloc_calls", t->realloc_calls);
    ml_json_kv_u64(w, "bytes_allocated", t->bytes_allocated);
    ml_json_kv_u64(w, "temporary_allocs", t->temporary_allocs);
    ml_json_kv_u64(w, "mmap_calls", t->mmap_calls);
    ml_json_kv_u64(w, "munmap_calls", t->munmap_calls);
    ml_json_kv_u64(w, "unknown_frees", t->unknown_frees);
    ml_json_kv_u64(w, "unknown_free_bytes", t->unknown_free_bytes);
    ml_json_kv_u64(w, "peak_bytes", t->peak_bytes);
    ml_json_kv_u64(w, "peak_blocks", t->peak_blocks);
    ml_json_kv_u64(w, "peak_mmap_bytes", t->peak_mmap_bytes);
    ml_json_kv_u64(w, "peak_rss_bytes", t->peak_rss_bytes); /* the largest sample */
    /* The kernel's high-water mark (issue 13): null in traces before 1.5. */
    if (t->hwm_rss_source) {
        ml_json_kv_u64(w, "peak_rss_hwm_bytes", t->hwm_rss_bytes);
        ml_json_kv_str(w, "peak_rss_hwm_source", ml_hwm_source_name(t->hwm_rss_source));
    } else {
        ml_json_kv_null(w, "peak_rss_hwm_bytes");
        ml_json_kv_null(w, "peak_rss_hwm_source");
    }
    ml_json_kv_u64(w, "rss_sample_interval_ms", ml_rss_interval_ms(t));
    /* leaked: definite + indirect + possible, as everywhere (issue 13);
     * live_at_exit: every block live at the end, reachable ones too. */
    ml_json_kv_u64(w, "leaked_bytes", L->lost_bytes);
    ml_json_kv_u64(w, "leaked_blocks", L->lost_blocks);
    ml_json_kv_u64(w, "live_at_exit_bytes", L->bytes);
    ml_json_kv_u64(w, "live_at_exit_blocks", L->blocks);
    ml_json_kv_ms_as_s(w, "duration_s", d);
    kv_d(w, "alloc_calls_per_s", d ? (double)t->alloc_calls * 1000.0 / (double)d : 0);
    kv_d(w, "bytes_allocated_per_s", d ? (double)t->bytes_allocated * 1000.0 / (double)d : 0);
    ml_json_key(w, "calls_by_kind");
    ml_json_object(w);
    for (unsigned k = 0; k < ML_KIND_COUNT_; k++) {
        if (k == ML_KIND_FREE || k == ML_KIND_MUNMAP) continue;
        ml_json_kv_u64(w, ml_kind_name(k), t->calls_by_kind[k]);
    }
    ml_json_end(w);
    /* Only in a trace that has them: the allocator's own mappings for its
     * heap (jemalloc, mimalloc), which the keys above leave out. */
    if (t->alloc_mmap_calls) {
        ml_json_key(w, "allocator_mmap");
        ml_json_object(w);
        ml_json_kv_u64(w, "calls", t->alloc_mmap_calls);
        ml_json_kv_u64(w, "munmap_calls", t->alloc_munmap_calls);
        ml_json_kv_u64(w, "bytes_at_exit", t->alloc_mmap_bytes);
        ml_json_kv_u64(w, "peak_bytes", t->peak_alloc_mmap_bytes);
        ml_json_end(w);
    }
    ml_json_end(w);
}

/* A site's values: an object, or in the page's form a row of values in the
 * order of site_fields (written once, as "site_fields"). */
static const char *const site_fields[] = {
    "id", "stack", "headline", "alloc_calls", "bytes_allocated", "peak_bytes", "peak_blocks", "leaked_bytes",
    "leaked_blocks", "live_at_exit_bytes", "live_at_exit_blocks", "temporary_allocs", "realloc_calls", "freed_blocks", "min_size", "max_size",
    "mean_lifetime_ms", "max_lifetime_ms", "pinned_pages", "sparse_pinned_pages",
    "leaked_by_kind.definite", "leaked_by_kind.indirect", "leaked_by_kind.reachable",
    "leaked_by_kind.possible", "suppressed"};

static void f_u64(ml_json_t *w, bool row, const char *k, uint64_t v) {
    if (row) ml_json_u64(w, v);
    else ml_json_kv_u64(w, k, v);
}

/* The page's per-site time buckets (ml_analysis_time_buckets): two flat
 * arrays closing a site's row, [bucket, calls, bytes, ...] and [bucket,
 * kind, blocks, bytes, ...] (docs/html-report.md, "Time-range selection"). */
static void site_buckets(ml_json_t *w, const ml_time_buckets_t *tb, uint32_t site) {
    size_t n;
    const ml_bucket_alloc_t *al = ml_time_buckets_alloc(tb, site, &n);
    ml_json_array(w);
    ml_json_tight(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_u64(w, al[i].bucket);
        ml_json_u64(w, al[i].calls);
        ml_json_u64(w, al[i].bytes);
    }
    ml_json_end(w);
    const ml_bucket_live_t *lv = ml_time_buckets_live(tb, site, &n);
    ml_json_array(w);
    ml_json_tight(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_u64(w, lv[i].bucket);
        ml_json_u64(w, (uint64_t)lv[i].kind);
        ml_json_u64(w, lv[i].blocks);
        ml_json_u64(w, lv[i].bytes);
    }
    ml_json_end(w);
}

/* A site's values, inside its row (ft: the page's form) or object. */
static void site_values(ml_json_t *w, ftab_t *ft, const ml_time_buckets_t *tb, const ml_site_t *s, bool row) {
    double mean = s->freed_blocks ? (double)s->lifetime_ms_sum / (double)s->freed_blocks : 0;
    if (row) {
        ml_json_u64(w, s->id);
        ml_json_i64(w, site_stack_ref(ft, s));
        ml_json_u64(w, s->headline);
    } else {
        ml_json_kv_u64(w, "id", s->id);
        frames(w, ft, s->frames, s->nframes);
        /* The frame that names the site (ml_site_t.headline); absent: 0. */
        if (s->headline) ml_json_kv_u64(w, "headline", s->headline);
    }
    f_u64(w, row, "alloc_calls", s->alloc_calls);
    f_u64(w, row, "bytes_allocated", s->bytes_allocated);
    f_u64(w, row, "peak_bytes", s->peak_bytes);
    f_u64(w, row, "peak_blocks", s->peak_blocks);
    f_u64(w, row, "leaked_bytes", s->leaked_bytes);
    f_u64(w, row, "leaked_blocks", s->leaked_blocks);
    f_u64(w, row, "live_at_exit_bytes", s->live_at_exit_bytes);
    f_u64(w, row, "live_at_exit_blocks", s->live_at_exit_blocks);
    f_u64(w, row, "temporary_allocs", s->temporary_allocs);
    f_u64(w, row, "realloc_calls", s->realloc_calls);
    f_u64(w, row, "freed_blocks", s->freed_blocks);
    f_u64(w, row, "min_size", s->min_size);
    f_u64(w, row, "max_size", s->max_size);
    if (row) ml_json_double(w, isfinite(mean) ? mean : 0);
    else kv_d(w, "mean_lifetime_ms", mean);
    f_u64(w, row, "max_lifetime_ms", s->lifetime_ms_max);
    f_u64(w, row, "pinned_pages", s->pinned_pages);
    f_u64(w, row, "sparse_pinned_pages", s->sparse_pinned_pages);
    if (!row) {
        ml_json_key(w, "leaked_by_kind");
        ml_json_object(w);
    }
    for (int k = 0; k < ML_LEAK_KINDS; k++)
        f_u64(w, row, ml_leak_kind_name((ml_leak_kind_t)k), s->leaked_kind_bytes[k]);
    if (!row) ml_json_end(w);
    if (row) ml_json_bool(w, s->suppressed);
    else ml_json_kv_bool(w, "suppressed", s->suppressed);
    if (row && tb) site_buckets(w, tb, s->id);
}

void ml__json_site_fields(ml_json_t *w, const ml_site_t *s) {
    site_values(w, NULL, NULL, s, false);
}

void ml__json_site_fields_ft(ml_json_t *w, ml__ftab_t *ft, const ml_site_t *s) {
    site_values(w, ft, NULL, s, false);
}

static void site_obj(ml_json_t *w, ftab_t *ft, const ml_time_buckets_t *tb, const ml_site_t *s) {
    if (page(ft)) {
        ml_json_array(w);
        ml_json_tight(w);
    } else {
        ml_json_object(w);
    }
    site_values(w, ft, tb, s, page(ft));
    ml_json_end(w);
}

static void sites(ml_json_t *w, ftab_t *ft, const ml_time_buckets_t *tb, const ml_analysis_t *a, uint32_t max) {
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    if (max && n > max) n = max;
    if (page(ft)) {
        ml_json_key(w, "site_fields");
        ml_json_array(w);
        for (size_t i = 0; i < sizeof site_fields / sizeof *site_fields; i++) ml_json_str(w, site_fields[i]);
        if (tb) {
            ml_json_str(w, "alloc_buckets");
            ml_json_str(w, "live_buckets");
        }
        ml_json_end(w);
        ml_json_break(w, 0);
        if (tb) {
            uint32_t width;
            uint32_t nb = ml_time_buckets_count(tb, &width);
            ml_json_key(w, "time_buckets");
            ml_json_object(w);
            ml_json_kv_u64(w, "count", nb);
            ml_json_kv_u64(w, "width_ms", width);
            ml_json_key(w, "kinds");
            ml_json_array(w);
            for (int k = 0; k < ML_LEAK_KINDS; k++) ml_json_str(w, ml_leak_kind_name((ml_leak_kind_t)k));
            ml_json_end(w);
            ml_json_end(w);
            ml_json_break(w, 0);
        }
    }
    ml_json_key(w, "sites");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_break(w, 2);
        site_obj(w, ft, tb, &s[i]);
    }
    ml_json_end(w);
    /* --max-sites left sites out: say how many of how many, or sites[]
     * reads as every site (the page said "showing 10 of 10 sites" of
     * cppcheck's 1,884). */
    size_t all;
    ml_analysis_sites(a, &all);
    if (n < all) {
        ml_json_break(w, 0);
        ml_json_key(w, "sites_cut");
        ml_json_object(w);
        ml_json_kv_u64(w, "written", n);
        ml_json_kv_u64(w, "sites", all);
        ml_json_kv_u64(w, "max_sites", max);
        ml_json_end(w);
    }
}

static void peak(ml_json_t *w, ftab_t *ft, const ml_analysis_t *a) {
    const ml_totals_t *t = ml_analysis_totals(a);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    ml_json_key(w, "peak");
    ml_json_object(w);
    ml_json_kv_u64(w, "bytes", t->peak_bytes);
    ml_json_kv_u64(w, "blocks", t->peak_blocks);
    ml_json_kv_ms_as_s(w, "time_s", t->peak_time_ms);
    ml_json_key(w, "sites");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        if (!s[i].peak_bytes && !s[i].peak_blocks) continue;
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_u64(w, "site", s[i].id);
        ml_json_kv_u64(w, "bytes", s[i].peak_bytes);
        ml_json_kv_u64(w, "blocks", s[i].peak_blocks);
        if (page(ft)) ml_json_kv_i64(w, "stack", site_stack_ref(ft, &s[i]));
        else frames(w, ft, s[i].frames, s[i].nframes);
        if (s[i].headline) ml_json_kv_u64(w, "headline", s[i].headline);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

void ml__json_leak_counts(ml_json_t *w, const ml_leaks_t *L) {
    ml_json_kv_u64(w, "bytes", L->bytes);
    ml_json_kv_u64(w, "blocks", L->blocks);
    for (int k = 0; k < ML_LEAK_KINDS; k++) {
        char name[40];
        snprintf(name, sizeof name, "%s_bytes", ml_leak_kind_name((ml_leak_kind_t)k));
        ml_json_kv_u64(w, name, L->kind_bytes[k]);
        snprintf(name, sizeof name, "%s_blocks", ml_leak_kind_name((ml_leak_kind_t)k));
        ml_json_kv_u64(w, name, L->kind_blocks[k]);
    }
    ml_json_kv_u64(w, "suppressed_bytes", L->suppressed_bytes);
    ml_json_kv_u64(w, "suppressed_blocks", L->suppressed_blocks);
    ml_json_kv_u64(w, "gate_bytes", L->gate_bytes);
    ml_json_kv_u64(w, "lost_bytes", L->lost_bytes);
    ml_json_kv_u64(w, "lost_blocks", L->lost_blocks);
}

static void leaks(ml_json_t *w, ftab_t *ft, const ml_analysis_t *a, const ml_report_opts_t *ro) {
    const ml_leaks_t *L = ml_analysis_leaks(a);
    size_t n;
    const ml_site_t *s = ml_analysis_sites(a, &n);
    ml_json_key(w, "leaks");
    ml_json_object(w);
    ml__json_leak_counts(w, L);
    /* Whether the live blocks were judged as leaks: not when the process
     * did not exit (exec, recording stopped while it ran, a trace cut
     * before the exit); when not, when they were live and why. */
    ml_unjudged_t u;
    ml_json_kv_bool(w, "judged", !ml_totals_unjudged(ml_analysis_totals(a), &u));
    ml_json_kv_str(w, "not_judged", u.when);
    ml_json_kv_str(w, "not_judged_why", u.why);
    ml_json_kv_str(w, "reachability", L->scanned ? "scanned" : L->scan_status ? "failed" : "not_scanned");
    ml_json_key(w, "scan");
    ml_json_object(w);
    ml_json_kv_bool(w, "done", L->scanned);
    ml_json_kv_str(w, "error", L->scan_status ? strerror(-L->scan_status) : NULL);
    ml_json_kv_u64(w, "root_bytes", L->scan_root_bytes);
    ml_json_kv_u64(w, "heap_bytes", L->scan_heap_bytes);
    kv_d(w, "duration_s", (double)L->scan_duration_us / 1e6);
    ml_json_kv_u64(w, "unscanned_blocks", L->unscanned_blocks);
    ml_json_end(w);
    ml_json_key(w, "sites");
    ml_json_array(w);
    for (size_t i = 0; i < L->ngroups; i++) {
        const ml_leak_group_t *g = &L->groups[i];
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_u64(w, "site", g->site);
        ml_json_kv_u64(w, "bytes", g->bytes);
        ml_json_kv_u64(w, "blocks", g->blocks);
        ml_json_kv_str(w, "kind", ml_leak_kind_name(g->kind));
        ml_json_kv_bool(w, "suppressed", g->suppressed);
        if (g->suppressed && g->site < n) ml_json_kv_str(w, "suppressed_by", s[g->site].suppressed_by);
        if (g->site < n && page(ft)) ml_json_kv_i64(w, "stack", site_stack_ref(ft, &s[g->site]));
        else if (g->site < n) frames(w, ft, s[g->site].frames, s[g->site].nframes);
        else frames(w, ft, NULL, 0);
        if (g->site < n && s[g->site].headline) ml_json_kv_u64(w, "headline", s[g->site].headline);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_key(w, "suppressions");
    ml_json_array(w);
    size_t ns = ml_suppressions_count(ro->suppressions);
    for (size_t i = 0; i < ns; i++) {
        uint64_t blocks, bytes;
        const char *p = ml_suppressions_pattern(ro->suppressions, i, &blocks, &bytes);
        ml_json_object(w);
        ml_json_kv_str(w, "pattern", p);
        ml_json_kv_u64(w, "blocks", blocks);
        ml_json_kv_u64(w, "bytes", bytes);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_end(w);
}

static void frag_obj(ml_json_t *w, const ml_frag_t *f) {
    ml_json_object(w);
    ml_json_kv_bool(w, "valid", f->valid);
    if (!f->valid) {
        ml_json_end(w);
        return;
    }
    ml_json_kv_ms_as_s(w, "time_s", f->time_ms);
    ml_json_kv_u64(w, "live_bytes", f->live_bytes);
    ml_json_kv_u64(w, "live_blocks", f->live_blocks);
    ml_json_kv_u64(w, "pages", f->pages);
    ml_json_kv_u64(w, "pages_bytes", f->page_bytes);
    kv_d(w, "page_utilization", f->page_utilization);
    ml_json_kv_u64(w, "free_bytes", f->free_bytes);
    ml_json_kv_u64(w, "largest_free_bytes", f->largest_free_bytes);
    kv_d(w, "external", f->external);
    ml_json_kv_u64(w, "gaps", f->gaps);
    ml_json_kv_u64(w, "regions", f->regions);
    ml_json_kv_u64(w, "span_bytes", f->span_bytes);
    ml_json_kv_str(w, "allocator_model", f->allocator_model);
    ml_json_kv_u64(w, "usable_bytes", f->usable_bytes);
    ml_json_kv_u64(w, "usable_measured_blocks", f->usable_measured_blocks);
    ml_json_kv_u64(w, "internal_bytes", f->internal_waste_bytes);
    kv_d(w, "internal_ratio", f->internal_ratio);
    ml_json_key(w, "mallinfo");
    if (f->have_mallinfo) {
        ml_json_object(w);
        ml_json_kv_ms_as_s(w, "time_s", f->mallinfo_time_ms);
        ml_json_kv_u64(w, "arena", f->arena);
        ml_json_kv_u64(w, "hblkhd", f->hblkhd);
        ml_json_kv_u64(w, "uordblks", f->uordblks);
        ml_json_kv_u64(w, "fordblks", f->fordblks);
        ml_json_kv_u64(w, "keepcost", f->keepcost);
        ml_json_end(w);
    } else {
        ml_json_null(w);
    }
    if (f->have_rss) ml_json_kv_u64(w, "rss_bytes", f->rss_bytes);
    else ml_json_kv_null(w, "rss_bytes");
    kv_d(w, "heap_to_rss", f->heap_to_rss);
    ml_json_end(w);
}

static void heap_map(ml_json_t *w, const ml_frag_t *f) {
    bool any = f->valid && f->map_ncells;
    ml_json_object(w);
    ml_json_kv_u64(w, "base", any ? f->map_base : 0);
    ml_json_kv_u64(w, "cell_bytes", any ? f->map_cell_bytes : 0);
    ml_json_key(w, "cells");
    ml_json_array(w);
    ml_json_tight(w);
    for (uint32_t i = 0; any && i < f->map_ncells; i++) ml_json_i64(w, f->map_cells[i]);
    ml_json_end(w);
    ml_json_end(w);
}

/* What each fragmentation number is, in the words every view uses
 * (docs/analysis.md): "page utilization" is not heap fragmentation. */
static void frag_labels(ml_json_t *w) {
    ml_json_key(w, "labels");
    ml_json_object(w);
    ml_json_kv_str(w, "page_utilization", ML_LABEL_PAGE_UTILIZATION);
    ml_json_kv_str(w, "external", ML_LABEL_EXTERNAL);
    ml_json_kv_str(w, "internal_ratio", ML_LABEL_INTERNAL);
    ml_json_kv_str(w, "heap_to_rss", ML_LABEL_HEAP_TO_RSS);
    ml_json_end(w);
}

static void fragmentation(ml_json_t *w, const ml_analysis_t *a) {
    ml_json_key(w, "fragmentation");
    ml_json_object(w);
    frag_labels(w);
    ml_json_break(w, 1);
    ml_json_key(w, "at_peak");
    frag_obj(w, ml_analysis_frag(a, ML_MOMENT_PEAK));
    ml_json_break(w, 1);
    ml_json_key(w, "at_end");
    frag_obj(w, ml_analysis_frag(a, ML_MOMENT_END));
    ml_json_break(w, 1);
    ml_json_key(w, "worst");
    frag_obj(w, ml_analysis_frag(a, ML_MOMENT_WORST));
    ml_json_break(w, 1);
    ml_json_key(w, "heap_maps");
    ml_json_object(w);
    ml_json_key(w, "at_peak");
    heap_map(w, ml_analysis_frag(a, ML_MOMENT_PEAK));
    ml_json_break(w, 2);
    ml_json_key(w, "at_end");
    heap_map(w, ml_analysis_frag(a, ML_MOMENT_END));
    ml_json_end(w);
    ml_json_end(w);
}

static void timeline(ml_json_t *w, const ml_analysis_t *a) {
    const ml_timeline_point_t *p;
    size_t n = ml_analysis_timeline(a, &p);
    ml_json_key(w, "timeline");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_break(w, 2);
        ml_json_object(w);
        ml_json_kv_ms_as_s(w, "time_s", p[i].time_ms);
        ml_json_kv_u64(w, "heap_bytes", p[i].heap_bytes);
        ml_json_kv_u64(w, "rss_bytes", p[i].rss_bytes);
        ml_json_kv_u64(w, "mmap_bytes", p[i].mmap_bytes);
        ml_json_kv_u64(w, "gpu_bytes", p[i].gpu_bytes);
        ml_json_kv_u64(w, "alloc_calls", p[i].alloc_calls);
        ml_json_end(w);
    }
    ml_json_end(w);
}

/* The flame tree (ml_analysis_flame: the call tree, pruned) as nested
 * objects. Children biggest first (then by name), written depth first with
 * an explicit stack: deep recursion in the program must not become deep
 * recursion here. Every number is the node's own (its inclusive costs). */
typedef struct {
    const ml_calltree_node_t *v;
} fctx_t;

static int cmp_child(const void *x, const void *y, void *ctx) {
    const ml_calltree_node_t *v = ((fctx_t *)ctx)->v;
    const ml_calltree_node_t *a = &v[*(const int32_t *)x], *b = &v[*(const int32_t *)y];
    static const int order[] = {ML_COST_ALLOCATED, ML_COST_PEAK, ML_COST_LEAKED};
    for (size_t k = 0; k < sizeof order / sizeof *order; k++)
        if (a->incl[order[k]] != b->incl[order[k]])
            return a->incl[order[k]] > b->incl[order[k]] ? -1 : 1;
    return strcmp(a->frame->function ? a->frame->function : "",
                  b->frame->function ? b->frame->function : "");
}

/* A node up to its open list of children: an object with its frame's
 * function, file and line, or in the page's form an array [frame index,
 * alloc, peak, leaked, calls, [children]]. */
static void flame_node_open(ml_json_t *w, ftab_t *ft, const ml_frame_t *f, const uint64_t *incl) {
    static const ml_frame_t all = {.function = "all"};
    if (page(ft)) {
        int64_t k = ftab_index(ft, f ? f : &all);
        ml_json_array(w);
        ml_json_tight(w);
        ml_json_i64(w, k);
        ml_json_u64(w, incl[ML_COST_ALLOCATED]);
        ml_json_u64(w, incl[ML_COST_PEAK]);
        ml_json_u64(w, incl[ML_COST_LEAKED]);
        ml_json_u64(w, incl[ML_COST_CALLS]);
        ml_json_array(w);
        ml_json_tight(w);
        return;
    }
    ml_json_object(w);
    const char *name = f ? f->function : "all";
    char shortname[512];
    const char *shown = name ? ml_frame_short_name(name, shortname, sizeof shortname) : NULL;
    ml_json_kv_str(w, "name", shown);
    if (shown && strcmp(shown, name)) ml_json_kv_str(w, "name_full", name);
    ml_json_kv_str(w, "file", f ? f->file : NULL);
    kv_line(w, "line", f ? f->line : 0);
    ml_json_kv_u64(w, "alloc", incl[ML_COST_ALLOCATED]);
    ml_json_kv_u64(w, "peak", incl[ML_COST_PEAK]);
    ml_json_kv_u64(w, "leaked", incl[ML_COST_LEAKED]);
    ml_json_kv_u64(w, "calls", incl[ML_COST_CALLS]);
    ml_json_key(w, "children");
    ml_json_array(w);
}

static void flame_node_close(ml_json_t *w) {
    ml_json_end(w);
    ml_json_end(w);
}

static int flame_tree(ml_json_t *w, ftab_t *ft, const char *key, const ml_calltree_node_t *v, size_t n) {
    ml_json_key(w, key);
    if (!n) {
        static const uint64_t zero[ML_COSTS];
        flame_node_open(w, ft, NULL, zero);
        flame_node_close(w);
        return 0;
    }
    /* Sorted child lists, then an iterative walk. */
    int32_t *kids = malloc(n * sizeof *kids), *start = malloc((n + 1) * sizeof *start);
    size_t *pos = calloc(n, sizeof *pos);
    int32_t *stack = malloc(n * sizeof *stack);
    if (!kids || !start || !pos || !stack) {
        free(kids);
        free(start);
        free(pos);
        free(stack);
        return -ENOMEM;
    }
    size_t k = 0;
    fctx_t ctx = {v};
    for (size_t i = 0; i < n; i++) {
        start[i] = (int32_t)k;
        for (int32_t c = v[i].first_child; c >= 0; c = v[c].next_sibling) kids[k++] = c;
        qsort_r(kids + start[i], k - (size_t)start[i], sizeof *kids, cmp_child, &ctx);
    }
    start[n] = (int32_t)k;
    size_t sp = 0;
    stack[sp++] = 0;
    flame_node_open(w, ft, v[0].frame, v[0].incl);
    while (sp) {
        int32_t cur = stack[sp - 1];
        size_t i = (size_t)start[cur] + pos[cur];
        if (i < (size_t)start[cur + 1]) {
            pos[cur]++;
            int32_t c = kids[i];
            flame_node_open(w, ft, v[c].frame, v[c].incl);
            stack[sp++] = c;
        } else {
            flame_node_close(w);
            sp--;
        }
    }
    free(kids);
    free(start);
    free(pos);
    free(stack);
    return 0;
}

int ml__json_flame(ml_json_t *w, const ml_calltree_node_t *v, size_t n) {
    return flame_tree(w, NULL, "flame", v, n);
}

/* What the pruning of "flame" left out: the whole call tree's node count
 * beside the kept one, and the limits (issue 12: on 262,144 distinct stacks
 * the page drew 2,047 frames of a 1.4 M-node tree and said nothing, so that
 * zooming in found nothing more and read as the whole tree). Only when
 * there is a whole tree to count. A report of several traces counts the
 * tree of its merged sites (json_merged.c); until 2026-12-08 it left the
 * key out. */
void ml__json_flame_pruned(ml_json_t *w, size_t n, size_t kept) {
    if (!n) return;
    ml_json_break(w, 0); /* a top-level key of its own line, as section() does */
    ml_json_key(w, "flame_pruned");
    ml_json_object(w);
    ml_json_kv_u64(w, "nodes", n);
    ml_json_kv_u64(w, "kept", kept);
    ml_json_kv_u64(w, "max_nodes", ML_FLAME_MAX_NODES);
    ml_json_kv_double(w, "min_fraction", ML_FLAME_MIN_FRACTION);
    ml_json_end(w);
}

static void flame_pruned(ml_json_t *w, const ml_analysis_t *a, size_t kept) {
    const ml_calltree_node_t *all;
    ml__json_flame_pruned(w, ml_analysis_calltree(a, &all), kept);
}

static int flame(ml_json_t *w, ftab_t *ft, const ml_analysis_t *a) {
    const ml_calltree_node_t *v;
    size_t n = ml_analysis_flame(a, &v);
    int rc = flame_tree(w, ft, "flame", v, n);
    if (rc == 0) flame_pruned(w, a, n);
    return rc;
}

/* The page's inverted flame graph: the tree bottom-up, pruned alike. */
static int flame_inverted(ml_json_t *w, ftab_t *ft, const ml_analysis_t *a) {
    ml_calltree_node_t *v;
    int64_t n = ml_analysis_flame_inverted(a, &v);
    if (n < 0) return (int)n;
    int rc = flame_tree(w, ft, "flame_inverted", v, (size_t)n);
    free(v);
    return rc;
}

void ml__json_histograms(ml_json_t *w, const ml_histograms_t *h) {
    ml_json_key(w, "histograms");
    ml_json_object(w);
    ml_json_key(w, "sizes");
    ml_json_array(w);
    for (uint32_t k = h->size_first; k <= h->size_last && k < 64; k++) {
        ml_json_object(w);
        ml_json_kv_u64(w, "le", (uint64_t)1 << k);
        ml_json_kv_u64(w, "count", h->size_count[k]);
        ml_json_kv_u64(w, "bytes", h->size_bytes[k]);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_key(w, "lifetimes_ms");
    ml_json_array(w);
    for (uint32_t k = 0; k <= h->life_last && k < 64; k++) {
        ml_json_object(w);
        ml_json_kv_u64(w, "le", (uint64_t)1 << k);
        ml_json_kv_u64(w, "count", h->life_count[k]);
        ml_json_end(w);
    }
    ml_json_end(w);
    ml_json_kv_u64(w, "live_at_end", h->live_at_end);
    ml_json_end(w);
}

static void histograms(ml_json_t *w, const ml_analysis_t *a) {
    ml__json_histograms(w, ml_analysis_histograms(a));
}

void ml__json_thread_fields(ml_json_t *w, const ml_thread_stats_t *t) {
    ml_json_kv_u64(w, "index", t->index);
    ml_json_kv_u64(w, "tid", t->tid);
    ml_json_kv_str(w, "name", t->name);
    ml_json_kv_u64(w, "alloc_calls", t->alloc_calls);
    ml_json_kv_u64(w, "bytes_allocated", t->bytes_allocated);
    ml_json_kv_u64(w, "free_calls", t->free_calls);
    ml_json_kv_u64(w, "temporary_allocs", t->temporary_allocs);
}

static void threads(ml_json_t *w, const ml_analysis_t *a) {
    const ml_thread_stats_t *t;
    size_t n = ml_analysis_threads(a, &t);
    ml_json_key(w, "threads");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) {
        ml_json_object(w);
        ml__json_thread_fields(w, &t[i]);
        ml_json_end(w);
    }
    ml_json_end(w);
}

static void warnings(ml_json_t *w, const ml_analysis_t *a) {
    const char *const *msg;
    size_t n = ml_analysis_warnings(a, &msg);
    ml_json_key(w, "warnings");
    ml_json_array(w);
    for (size_t i = 0; i < n; i++) ml_json_str(w, msg[i]);
    ml_json_end(w);
}

/* ------------------------------------------------------------------------- */
/* The document                                                              */
/* ------------------------------------------------------------------------- */

/* The top-level keys, one per line. */
static void section(ml_json_t *w) {
    ml_json_break(w, 0);
}

int ml_report_json(FILE *o, const ml_analysis_t *a, const ml_report_opts_t *ro) {
    ml_report_opts_t none = {0};
    if (!ro) ro = &none;
    ftab_t table = {.page = ro->frame_table}, *ft = &table;
    if (ro->frame_table)
        table.tnn = ml__analysis_site_trie(a, &table.tsite_node, &table.tsite_skip, &table.tparent, &table.tnfr);
    ml_json_t *w;
    int rc = ml_json_new(o, &w);
    if (rc < 0) return rc;
    ml_json_object(w);
    ml_json_kv_u64(w, "schema_version", ML_REPORT_SCHEMA_VERSION);
    section(w);
    ml_json_kv_str(w, "generator", "memlens " ML_VERSION);
    section(w);
    {
        /* --alloc-fn: only when given, so that other reports stay as they were */
        const char *const *pat;
        const uint64_t *hits;
        size_t n = ml_analysis_alloc_fns(a, &pat, &hits);
        if (n) {
            ml_json_key(w, "alloc_fns");
            ml_json_array(w);
            for (size_t i = 0; i < n; i++) {
                ml_json_object(w);
                ml_json_kv_str(w, "pattern", pat[i]);
                ml_json_kv_u64(w, "stacks", hits[i]);
                ml_json_end(w);
            }
            ml_json_end(w);
            section(w);
        }
    }
    process(w, a);
    section(w);
    trace(w, a, ro);
    section(w);
    totals(w, a);
    section(w);
    sites(w, ft, ro->time_buckets, a, ro->max_sites);
    section(w);
    peak(w, ft, a);
    section(w);
    leaks(w, ft, a, ro);
    trie_done(ft); /* before the bottom-up tree's million nodes (flame_inverted) */
    section(w);
    fragmentation(w, a);
    section(w);
    ml_json_key(w, "gpu");
    ml__report_json_gpu(w, a);
    /* The strategy advisor: "suggestions", "policies", "advisor" (advice_json.c). */
    section(w);
    ml__report_json_advice(w, a, ro->advice);
    section(w);
    timeline(w, a);
    section(w);
    rc = flame(w, ft, a);
    if (rc == 0 && ro->frame_table) {
        section(w);
        rc = flame_inverted(w, ft, a);
    }
    if (rc == 0) {
        section(w);
        histograms(w, a);
        section(w);
        threads(w, a);
        section(w);
        warnings(w, a);
        if (ft->page) {
            section(w);
            frame_table(w, ft);
        }
        ml_json_end(w);
        ml_json_newline(w);
        rc = ml_json_finish(w);
        if (rc == 0) rc = ft->err;
    }
    ml_json_free(w);
    ftab_free(ft);
    return rc;
}
