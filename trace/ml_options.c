/* ml_options.c - the table of environment variables (ml_options.h).
 *
 * Low-level: linked into libmemlens.so, so no malloc, no stdio, no locks.
 * Lines are formatted into a stack buffer and written with write(2).
 */
#include "ml_options.h"

#include <string.h>
#include <unistd.h>

extern char **environ;

static ml_option_t table[ML_ENV_COUNT_] = {
#define ML__OPT_ENTRY(id, nm, k, d, r, doc_) {.name = nm, .kind = ML_ENV_KIND_##k, .def = d, .readers = r, .doc = doc_},
    ML_OPTIONS(ML__OPT_ENTRY)
#undef ML__OPT_ENTRY
};

/* ------------------------------------------------------------------------- */
/* Parsing                                                                   */
/* ------------------------------------------------------------------------- */

const char *ml_getenv(const char *name) {
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}

static char lower(char c) {
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool same_word(const char *s, const char *word) {
    for (; *s && *word; s++, word++)
        if (lower(*s) != *word) return false;
    return !*s && !*word;
}

int ml_parse_bool(const char *s, bool *out) {
    static const char *const yes[] = {"1", "on", "yes", "true"}, *const no[] = {"0", "off", "no", "false"};
    for (int i = 0; i < 4; i++) {
        if (same_word(s, yes[i])) return *out = true, 0;
        if (same_word(s, no[i])) return *out = false, 0;
    }
    return -1;
}

int ml_parse_uint(const char *s, uint64_t *out) {
    uint64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (p == s) return -1;
    uint64_t mul = 1;
    char c = lower(*p);
    if (c == 'k') mul = 1024, p++;
    else if (c == 'm') mul = 1024 * 1024, p++;
    else if (c == 'g') mul = 1024ull * 1024 * 1024, p++;
    if (mul > 1 && lower(*p) == 'i') p++;
    if (lower(*p) == 'b') p++;
    if (*p || (mul > 1 && v > UINT64_MAX / mul)) return -1;
    *out = v * mul;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Reading                                                                   */
/* ------------------------------------------------------------------------- */

static void parse(ml_option_t *o, const char *text, bool *valid, uint64_t *value) {
    bool b = false;
    *valid = true;
    *value = 0;
    if (!text || (!*text && o->kind != ML_ENV_KIND_STR)) return; /* empty: as if unset */
    if (o->kind == ML_ENV_KIND_BOOL) {
        *valid = ml_parse_bool(text, &b) == 0;
        *value = b;
    } else if (o->kind == ML_ENV_KIND_UINT) {
        *valid = ml_parse_uint(text, value) == 0;
    }
}

static ml_option_t *read_option(ml_env_id_t id) {
    ml_option_t *o = &table[id];
    if (o->initialized) return o;
    const char *env = ml_getenv(o->name);
    bool def_ok;
    uint64_t def_value;
    parse(o, o->def, &def_ok, &def_value);
    o->from_env = env != NULL;
    o->text = env ? env : o->def;
    parse(o, o->text, &o->valid, &o->value);
    if (!o->valid || (env && !*env && o->kind != ML_ENV_KIND_STR)) o->value = def_value;
    o->initialized = true;
    return o;
}

const ml_option_t *ml_option(ml_env_id_t id) {
    return read_option(id);
}

bool ml_option_bool(ml_env_id_t id) {
    return read_option(id)->value != 0;
}

uint64_t ml_option_uint(ml_env_id_t id) {
    return read_option(id)->value;
}

const char *ml_option_str(ml_env_id_t id) {
    return read_option(id)->text;
}

/* ------------------------------------------------------------------------- */
/* Printing, with write(2)                                                   */
/* ------------------------------------------------------------------------- */

typedef struct {
    char buf[640];
    size_t n;
} line_t;

static void put(line_t *l, const char *s) {
    for (; s && *s && l->n < sizeof l->buf - 1; s++) l->buf[l->n++] = *s;
}

static void put_u64(line_t *l, uint64_t v) {
    char d[24], *p = d + sizeof d;
    *--p = '\0';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(l, p);
}

static void flush(int fd, line_t *l) {
    l->buf[l->n++] = '\n';
    ssize_t rc = write(fd, l->buf, l->n);
    (void)rc;
    l->n = 0;
}

void ml_options_print(int fd, unsigned readers, const char *who) {
    for (int i = 0; i < ML_ENV_COUNT_; i++) {
        if (!(table[i].readers & readers)) continue;
        const ml_option_t *o = read_option((ml_env_id_t)i);
        line_t l = {.n = 0};
        put(&l, "memlens: ");
        if (who && *who) {
            put(&l, who);
            put(&l, ": ");
        }
        put(&l, "option ");
        put(&l, o->name);
        if (!o->text) {
            put(&l, " unset");
        } else {
            put(&l, "=");
            if (o->kind == ML_ENV_KIND_BOOL) put(&l, o->value ? "on" : "off");
            else if (o->kind == ML_ENV_KIND_UINT) put_u64(&l, o->value);
            else put(&l, o->text);
            if (!o->from_env) {
                put(&l, " (default)");
            } else if (o->valid) {
                put(&l, " (environment)");
            } else {
                put(&l, " (the default: the environment's \"");
                put(&l, o->text);
                put(&l, "\" is not valid)");
            }
        }
        flush(fd, &l);
    }
}

void ml_options_init(unsigned readers, const char *who) {
    for (int i = 0; i < ML_ENV_COUNT_; i++) {
        if (!(table[i].readers & readers)) continue;
        const ml_option_t *o = read_option((ml_env_id_t)i);
        if (o->kind != ML_ENV_KIND_BOOL || o->valid) continue;
        line_t l = {.n = 0};
        put(&l, "memlens: warning: ");
        put(&l, o->name);
        put(&l, "=");
        put(&l, o->text);
        put(&l, " is not a boolean (1/0, on/off, yes/no, true/false); using ");
        put(&l, o->def);
        flush(2, &l);
    }
    if (ml_option_bool(ML_ENV_VERBOSE)) ml_options_print(2, readers, who);
}
