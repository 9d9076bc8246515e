/* rust_demangle.c - Rust symbol names, both manglings rustc writes.
 *
 * Legacy ("_ZN...17h<16 hex>E"): an Itanium nested name whose components
 * escape punctuation ("$LT$" for '<', ".." for "::") and whose last one is a
 * hash. __cxa_demangle reads it but leaves the escapes and the hash:
 * "_$LT$alloc..alloc..Global$u20$as$u20$core..alloc..Allocator$GT$::allocate::h9d99...".
 *
 * v0 ("_R..."; RFC 2603, rustc -C symbol-mangling-version=v0, the default for
 * the standard library of recent toolchains): a grammar of paths, types,
 * generic arguments and back-references, which no C++ demangler reads.
 *
 * Both are printed as rustc's own demangler prints them in its short form
 * ("{:#}", also what binutils' addr2line -C and nm -C print): no hash, no
 * crate disambiguator: "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
 * "<str>::trim_start_matches::<&str>", "std::rt::lang_start::{closure#0}". */
#include "ml_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define OUT_MAX (1u << 20) /* a name longer than this is left mangled */
#define DEPTH_MAX 200

typedef struct {
    const char *s; /* after "_R" */
    size_t len, pos;
    char *out; /* the name so far, NUL-terminated */
    size_t olen, ocap;
    bool bad;
    int depth;
    uint64_t bound_lifetimes; /* lifetimes bound by enclosing binders */
} v0_t;

static void put(v0_t *p, const char *t, size_t n) {
    if (p->bad) return;
    if (p->olen + n >= p->ocap) {
        size_t cap = p->ocap;
        while (p->olen + n >= cap) cap *= 2;
        char *o = cap <= OUT_MAX ? realloc(p->out, cap) : NULL;
        if (!o) {
            p->bad = true; /* give up rather than print half a name */
            return;
        }
        p->out = o;
        p->ocap = cap;
    }
    memcpy(p->out + p->olen, t, n);
    p->olen += n;
    p->out[p->olen] = '\0';
}

static void puts_(v0_t *p, const char *t) { put(p, t, strlen(t)); }

static void put_u128(v0_t *p, unsigned __int128 v) {
    char b[48];
    int i = (int)sizeof b;
    b[--i] = '\0';
    do b[--i] = (char)('0' + v % 10); while ((v /= 10) && i > 0);
    puts_(p, b + i);
}

static bool eat(v0_t *p, char c) {
    if (p->pos < p->len && p->s[p->pos] == c) {
        p->pos++;
        return true;
    }
    return false;
}

static char peek(const v0_t *p) { return p->pos < p->len ? p->s[p->pos] : '\0'; }

static char next(v0_t *p) {
    if (p->pos >= p->len) {
        p->bad = true;
        return '\0';
    }
    return p->s[p->pos++];
}

/* <base-62-number> = {0-9a-zA-Z} "_": "_" is 0, "x_" is x + 1. */
static uint64_t base62(v0_t *p) {
    if (eat(p, '_')) return 0;
    uint64_t v = 0;
    for (;;) {
        char c = next(p);
        if (p->bad) return 0;
        if (c == '_') break;
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'z') d = 10 + (c - 'a');
        else if (c >= 'A' && c <= 'Z') d = 36 + (c - 'A');
        else {
            p->bad = true;
            return 0;
        }
        if (v > (UINT64_MAX - (uint64_t)d) / 62) {
            p->bad = true;
            return 0;
        }
        v = v * 62 + (uint64_t)d;
    }
    return v + 1;
}

/* [<tag> <base-62-number>]: the number, plus one; 0 when absent. */
static uint64_t opt_base62(v0_t *p, char tag) { return eat(p, tag) ? base62(p) + 1 : 0; }

static uint64_t decimal(v0_t *p) {
    char c = peek(p);
    if (c < '0' || c > '9') {
        p->bad = true;
        return 0;
    }
    if (c == '0') {
        p->pos++;
        return 0;
    }
    uint64_t v = 0;
    while ((c = peek(p)) >= '0' && c <= '9') {
        if (v > UINT64_MAX / 10 - 9) {
            p->bad = true;
            return 0;
        }
        v = v * 10 + (uint64_t)(c - '0');
        p->pos++;
    }
    return v;
}

typedef struct {
    const char *s;
    size_t n;
    bool punycode;
} ident_t;

/* <undisambiguated-identifier> = ["u"] <decimal-number> ["_"] <bytes> */
static ident_t ident(v0_t *p) {
    ident_t id = {0};
    id.punycode = eat(p, 'u');
    uint64_t n = decimal(p);
    eat(p, '_');
    if (p->bad || n > p->len - p->pos) {
        p->bad = true;
        return id;
    }
    id.s = p->s + p->pos;
    id.n = (size_t)n;
    p->pos += (size_t)n;
    return id;
}

static void put_ident(v0_t *p, ident_t id) {
    if (id.punycode) { /* not decoded: shown as rustc's demangler shows what it cannot decode */
        puts_(p, "punycode{");
        put(p, id.s, id.n);
        puts_(p, "}");
        return;
    }
    put(p, id.s, id.n);
}

static void path(v0_t *p, bool in_value);
static void type(v0_t *p);
static void constant(v0_t *p);

/* Runs f at a back-reference's target, then returns here. */
static bool backref(v0_t *p, void (*f)(v0_t *), void (*fv)(v0_t *, bool), bool in_value) {
    size_t at = p->pos - 1; /* the 'B' */
    uint64_t target = base62(p);
    if (p->bad || target >= at) {
        p->bad = true;
        return false;
    }
    if (++p->depth > DEPTH_MAX) {
        p->bad = true;
        return false;
    }
    size_t save = p->pos;
    p->pos = (size_t)target;
    if (f) f(p);
    else fv(p, in_value);
    p->pos = save;
    p->depth--;
    return true;
}

static void lifetime(v0_t *p, uint64_t idx) {
    if (idx == 0) {
        puts_(p, "'_");
        return;
    }
    if (idx > p->bound_lifetimes) {
        p->bad = true;
        return;
    }
    uint64_t depth = p->bound_lifetimes - idx; /* de Bruijn index to a name */
    char b[24] = "'";
    if (depth < 26) {
        b[1] = (char)('a' + depth);
        b[2] = '\0';
        puts_(p, b);
    } else {
        puts_(p, "'_");
        put_u128(p, depth);
    }
}

/* [<binder>]: "for<'a, 'b> ", and the lifetimes it binds. Returns how many. */
static uint64_t binder(v0_t *p) {
    uint64_t n = opt_base62(p, 'G');
    if (!n) return 0;
    puts_(p, "for<");
    for (uint64_t i = 0; i < n && !p->bad; i++) {
        if (i) puts_(p, ", ");
        p->bound_lifetimes++;
        lifetime(p, 1);
    }
    puts_(p, "> ");
    return n;
}

static void generic_arg(v0_t *p) {
    if (eat(p, 'L')) lifetime(p, base62(p));
    else if (eat(p, 'K')) constant(p);
    else type(p);
}

static const char *basic_type(char c) {
    switch (c) {
    case 'a': return "i8";
    case 'b': return "bool";
    case 'c': return "char";
    case 'd': return "f64";
    case 'e': return "str";
    case 'f': return "f32";
    case 'h': return "u8";
    case 'i': return "isize";
    case 'j': return "usize";
    case 'l': return "i32";
    case 'm': return "u32";
    case 'n': return "i128";
    case 'o': return "u128";
    case 'p': return "_";
    case 's': return "i16";
    case 't': return "u16";
    case 'u': return "()";
    case 'v': return "...";
    case 'x': return "i64";
    case 'y': return "u64";
    case 'z': return "!";
    default: return NULL;
    }
}

static void fn_sig(v0_t *p) {
    uint64_t bound = binder(p);
    if (eat(p, 'U')) puts_(p, "unsafe ");
    if (eat(p, 'K')) {
        puts_(p, "extern \"");
        if (eat(p, 'C')) {
            puts_(p, "C");
        } else {
            ident_t abi = ident(p);
            for (size_t i = 0; i < abi.n && !p->bad; i++) put(p, abi.s[i] == '_' ? "-" : abi.s + i, 1);
        }
        puts_(p, "\" ");
    }
    puts_(p, "fn(");
    for (int i = 0; !p->bad && !eat(p, 'E'); i++) {
        if (i) puts_(p, ", ");
        type(p);
    }
    puts_(p, ")");
    if (eat(p, 'u')) {
        /* returns () */
    } else {
        puts_(p, " -> ");
        type(p);
    }
    p->bound_lifetimes -= bound;
}

static void dyn_bounds(v0_t *p) {
    uint64_t bound = binder(p);
    for (int i = 0; !p->bad && !eat(p, 'E'); i++) {
        if (i) puts_(p, " + ");
        /* <dyn-trait> = <path> {<dyn-trait-assoc-binding>}: the bindings go
         * inside the path's generic arguments. */
        size_t before = p->olen;
        path(p, false);
        bool open = p->olen > before && p->out[p->olen - 1] == '>';
        int nb = 0;
        while (!p->bad && eat(p, 'p')) {
            if (!nb++) {
                if (open) p->olen--, p->out[p->olen] = '\0', puts_(p, ", ");
                else puts_(p, "<");
            } else {
                puts_(p, ", ");
            }
            put_ident(p, ident(p));
            puts_(p, " = ");
            type(p);
        }
        if (nb) puts_(p, ">");
    }
    p->bound_lifetimes -= bound;
}

static void type(v0_t *p) {
    if (p->bad) return;
    if (++p->depth > DEPTH_MAX) {
        p->bad = true;
        return;
    }
    char c = next(p);
    const char *basic = basic_type(c);
    if (basic) {
        puts_(p, basic);
    } else {
        switch (c) {
        case 'R':
        case 'Q':
            puts_(p, "&");
            if (eat(p, 'L')) {
                uint64_t lt = base62(p);
                if (lt) {
                    lifetime(p, lt);
                    puts_(p, " ");
                }
            }
            if (c == 'Q') puts_(p, "mut ");
            type(p);
            break;
        case 'P':
            puts_(p, "*const ");
            type(p);
            break;
        case 'O':
            puts_(p, "*mut ");
            type(p);
            break;
        case 'A':
        case 'S':
            puts_(p, "[");
            type(p);
            if (c == 'A') {
                puts_(p, "; ");
                constant(p);
            }
            puts_(p, "]");
            break;
        case 'T': {
            puts_(p, "(");
            int i = 0;
            for (; !p->bad && !eat(p, 'E'); i++) {
                if (i) puts_(p, ", ");
                type(p);
            }
            if (i == 1) puts_(p, ",");
            puts_(p, ")");
            break;
        }
        case 'F':
            fn_sig(p);
            break;
        case 'D':
            puts_(p, "dyn ");
            dyn_bounds(p);
            if (!eat(p, 'L')) {
                p->bad = true;
                break;
            }
            {
                uint64_t lt = base62(p);
                if (lt) {
                    puts_(p, " + ");
                    lifetime(p, lt);
                }
            }
            break;
        case 'B':
            backref(p, type, NULL, false);
            break;
        default:
            p->pos--; /* a path, in type position */
            path(p, false);
            break;
        }
    }
    p->depth--;
}

/* <const> = <type> <const-data> | "p" | <backref>; integers, bool and char
 * are printed as values, anything else as "{...}" (never in a frame's name). */
static void constant(v0_t *p) {
    if (p->bad) return;
    if (eat(p, 'B')) {
        backref(p, constant, NULL, false);
        return;
    }
    if (eat(p, 'p')) {
        puts_(p, "_");
        return;
    }
    char t = next(p);
    bool neg = false;
    switch (t) {
    case 'a': case 's': case 'l': case 'x': case 'n': case 'i':
        neg = eat(p, 'n');
        /* fall through */
    case 'h': case 't': case 'm': case 'y': case 'o': case 'j':
    case 'b': case 'c': {
        unsigned __int128 v = 0; /* i128 and u128 have 32 digits */
        int digits = 0;
        char c;
        while ((c = next(p)) != '_' && !p->bad) {
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? 10 + c - 'a' : -1;
            if (d < 0 || ++digits > 32) {
                p->bad = true;
                return;
            }
            v = v * 16 + (unsigned)d;
        }
        if (t == 'b') {
            puts_(p, v == 0 ? "false" : v == 1 ? "true" : "?");
        } else if (t == 'c') {
            if (v >= 0x20 && v < 0x7f && v != '\'' && v != '\\') {
                char b[4] = {'\'', (char)v, '\'', 0};
                puts_(p, b);
            } else {
                puts_(p, "'\\u{");
                static const char hx[] = "0123456789abcdef";
                char b[20];
                int i = (int)sizeof b;
                b[--i] = 0;
                do b[--i] = hx[(unsigned)(v & 15)]; while ((v >>= 4) && i > 0);
                puts_(p, b + i);
                puts_(p, "}'");
            }
        } else {
            if (neg) puts_(p, "-");
            put_u128(p, v);
        }
        return;
    }
    default:
        p->bad = true; /* structural constants: not in names we show */
        return;
    }
}

static void path(v0_t *p, bool in_value) {
    if (p->bad) return;
    if (++p->depth > DEPTH_MAX) {
        p->bad = true;
        return;
    }
    char c = next(p);
    switch (c) {
    case 'C': /* crate root */
        opt_base62(p, 's');
        put_ident(p, ident(p));
        break;
    case 'M': /* <T> */
        opt_base62(p, 's');
        {
            /* the impl's own path is not printed, only parsed */
            size_t o = p->olen;
            path(p, false);
            p->olen = o;
            p->out[o] = '\0';
        }
        puts_(p, "<");
        type(p);
        puts_(p, ">");
        break;
    case 'X': /* <T as Trait> */
        opt_base62(p, 's');
        {
            size_t o = p->olen;
            path(p, false);
            p->olen = o;
            p->out[o] = '\0';
        }
        /* fall through */
    case 'Y':
        puts_(p, "<");
        type(p);
        puts_(p, " as ");
        path(p, false);
        puts_(p, ">");
        break;
    case 'N': {
        char ns = next(p);
        path(p, in_value);
        uint64_t dis = opt_base62(p, 's');
        ident_t id = ident(p);
        if (ns >= 'A' && ns <= 'Z') {
            puts_(p, "::{");
            puts_(p, ns == 'C' ? "closure" : ns == 'S' ? "shim" : (char[2]){ns, 0});
            if (id.n) {
                puts_(p, ":");
                put_ident(p, id);
            }
            puts_(p, "#");
            put_u128(p, dis);
            puts_(p, "}");
        } else if (ns >= 'a' && ns <= 'z') {
            if (id.n) {
                puts_(p, "::");
                put_ident(p, id);
            }
        } else {
            p->bad = true;
        }
        break;
    }
    case 'I':
        path(p, in_value);
        if (in_value) puts_(p, "::");
        puts_(p, "<");
        for (int i = 0; !p->bad && !eat(p, 'E'); i++) {
            if (i) puts_(p, ", ");
            generic_arg(p);
        }
        puts_(p, ">");
        break;
    case 'B':
        backref(p, NULL, path, in_value);
        break;
    default:
        p->bad = true;
        break;
    }
    p->depth--;
}

static char *demangle_v0(const char *sym) {
    v0_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->ocap = 256;
    p->out = malloc(p->ocap);
    if (!p->out) {
        free(p);
        return NULL;
    }
    p->out[0] = '\0';
    p->s = sym + 2;
    p->len = strlen(p->s);
    /* A suffix added after the name (".llvm.1234", ".cold") is not part of it. */
    const char *dot = memchr(p->s, '.', p->len);
    if (dot) p->len = (size_t)(dot - p->s);
    if (p->len && p->s[0] >= '0' && p->s[0] <= '9') decimal(p); /* encoding version */
    path(p, true);
    /* [<instantiating-crate>]: a path, not printed. */
    if (!p->bad && p->pos < p->len) {
        size_t o = p->olen;
        path(p, false);
        p->olen = o;
        p->out[o] = '\0';
    }
    char *r = NULL;
    if (!p->bad && p->pos == p->len && p->olen) {
        r = p->out;
        p->out = NULL;
    }
    free(p->out);
    free(p);
    return r;
}

/* ------------------------------------------------------------------------- */
/* Legacy                                                                    */
/* ------------------------------------------------------------------------- */

static bool is_hash(const char *s, size_t n) {
    if (n != 17 || s[0] != 'h') return false;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

/* One "$...$" escape at s (after the '$'), up to the closing '$'; the
 * bytes it stands for go to out. Returns the length consumed, 0 if none. */
static size_t legacy_escape(const char *s, size_t n, char *out, size_t *olen) {
    const char *end = memchr(s, '$', n);
    if (!end) return 0;
    size_t k = (size_t)(end - s);
    static const struct {
        const char *esc, *ch;
    } table[] = {{"SP", "@"}, {"BP", "*"}, {"RF", "&"}, {"LT", "<"}, {"GT", ">"},
                 {"LP", "("}, {"RP", ")"}, {"C", ","}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strlen(table[i].esc) == k && !memcmp(s, table[i].esc, k)) {
            out[(*olen)++] = table[i].ch[0];
            return k + 1;
        }
    if (k >= 2 && s[0] == 'u') {
        uint32_t cp = 0;
        for (size_t i = 1; i < k; i++) {
            char c = s[i];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? 10 + c - 'a' : -1;
            if (d < 0 || cp > 0x10ffff) return 0;
            cp = cp * 16 + (uint32_t)d;
        }
        if (cp < 0x20 || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return 0;
        if (cp < 0x80) {
            out[(*olen)++] = (char)cp;
        } else if (cp < 0x800) {
            out[(*olen)++] = (char)(0xc0 | (cp >> 6));
            out[(*olen)++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            out[(*olen)++] = (char)(0xe0 | (cp >> 12));
            out[(*olen)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            out[(*olen)++] = (char)(0x80 | (cp & 0x3f));
        } else {
            out[(*olen)++] = (char)(0xf0 | (cp >> 18));
            out[(*olen)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
            out[(*olen)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            out[(*olen)++] = (char)(0x80 | (cp & 0x3f));
        }
        return k + 1;
    }
    return 0;
}

static char *demangle_legacy(const char *sym) {
    const char *s = sym + 3; /* after "_ZN" */
    size_t total = strlen(s);
    /* The components: <decimal length><bytes> ... "E"; the last is the hash. */
    const char *comp[256];
    size_t clen[256], nc = 0, i = 0;
    while (i < total && s[i] != 'E') {
        if (s[i] < '0' || s[i] > '9' || nc == 256) return NULL;
        size_t n = 0;
        while (i < total && s[i] >= '0' && s[i] <= '9') {
            n = n * 10 + (size_t)(s[i++] - '0');
            if (n > total) return NULL;
        }
        if (n == 0 || n > total - i) return NULL;
        comp[nc] = s + i;
        clen[nc++] = n;
        i += n;
    }
    if (i >= total || nc < 2 || !is_hash(comp[nc - 1], clen[nc - 1])) return NULL;
    /* After the "E": nothing, or a suffix such as ".llvm.1234". */
    if (s[i + 1] != '\0' && s[i + 1] != '.') return NULL;
    nc--; /* the hash is not shown */
    size_t cap = total * 2 + 8;
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t c = 0; c < nc; c++) {
        const char *t = comp[c];
        size_t n = clen[c];
        if (c) out[o++] = ':', out[o++] = ':';
        if (n >= 2 && t[0] == '_' && t[1] == '$') t++, n--;
        for (size_t k = 0; k < n;) {
            if (t[k] == '.') {
                if (k + 1 < n && t[k + 1] == '.') {
                    out[o++] = ':';
                    out[o++] = ':';
                    k += 2;
                } else {
                    out[o++] = '.';
                    k++;
                }
            } else if (t[k] == '$') {
                size_t used = legacy_escape(t + k + 1, n - k - 1, out, &o);
                if (!used) {
                    free(out);
                    return NULL;
                }
                k += used + 1;
            } else {
                out[o++] = t[k++];
            }
        }
    }
    out[o] = '\0';
    return out;
}

char *ml_rust_demangle(const char *sym) {
    if (!sym) return NULL;
    if (sym[0] == '_' && sym[1] == 'R') return demangle_v0(sym);
    if (!strncmp(sym, "_ZN", 3)) return demangle_legacy(sym);
    return NULL;
}
