/* suppress.c - LeakSanitizer-style suppressions for known leaks.
 *
 * The file format is LSan's: one `leak:PATTERN` per line, `#` starts a
 * comment, blank lines are ignored. A leak is suppressed when PATTERN matches
 * the function, the source file or the module of any frame of its site.
 * Matching is LSan's TemplateMatch, quirks included, so that a file written
 * for LSan suppresses the same leaks here (docs/analysis.md): `*` stands
 * for any run of characters, a leading `^` anchors the pattern at the start
 * of the text and a `$` at its end. Each literal run is looked for once, at
 * its first occurrence after the previous one, without backtracking:
 * `beta$` does not match "betabeta" (the first "beta" is not at the end).
 * A `$` ends the pattern wherever it stands (`a$b` is `a$`), and an empty
 * text matches nothing.
 */
#define _GNU_SOURCE
#include "analysis_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *pattern;
    uint64_t blocks, bytes; /* hits in the last build */
} supp_t;

struct ml_suppressions_s {
    supp_t *v;
    size_t n, cap;
};

/* Glob match of p[0..pn) against the whole of t (only `*` is special). */
static bool glob(const char *p, size_t pn, const char *t) {
    const char *star = NULL, *resume = NULL;
    size_t i = 0;
    while (*t) {
        if (i < pn && p[i] == '*') {
            star = p + i++;
            resume = t;
        } else if (i < pn && p[i] == *t) {
            i++;
            t++;
        } else if (star) {
            i = (size_t)(star - p) + 1;
            t = ++resume;
        } else {
            return false;
        }
    }
    while (i < pn && p[i] == '*') i++;
    return i == pn;
}

bool ml_alloc_fn_match(const char *pattern, const char *name) {
    return pattern && name && glob(pattern, strlen(pattern), name);
}

bool ml_suppression_match(const char *pattern, const char *text) {
    if (!pattern || !text || !*text) return false;
    bool start = pattern[0] == '^'; /* the next literal run must be at the start */
    if (start) pattern++;
    bool star = false; /* a `*` since the last literal run */
    size_t left = strlen(text);
    while (*pattern) {
        if (*pattern == '*') {
            pattern++;
            start = false;
            star = true;
            continue;
        }
        if (*pattern == '$') return left == 0 || star;
        if (left == 0) return false;
        size_t n = strcspn(pattern, "*$");
        const char *hit = memmem(text, left, pattern, n);
        if (!hit || (start && hit != text)) return false;
        left -= (size_t)(hit - text) + n;
        text = hit + n;
        pattern += n;
        start = star = false;
    }
    return true;
}

int ml_suppressions_parse(const char *text, ml_suppressions_t **out, char *err, size_t errlen) {
    ml_suppressions_t *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    int lineno = 0;
    const char *p = text;
    while (*p) {
        lineno++;
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *q = p, *qe = p + len;
        while (q < qe && (*q == ' ' || *q == '\t')) q++;
        while (qe > q && (qe[-1] == ' ' || qe[-1] == '\t' || qe[-1] == '\r')) qe--;
        p = e ? e + 1 : p + len;
        if (q == qe || *q == '#') continue;
        if ((size_t)(qe - q) < 5 || strncmp(q, "leak:", 5) != 0) {
            snprintf(err, errlen, "line %d: only `leak:PATTERN` suppressions are understood: %.*s",
                     lineno, (int)(qe - q), q);
            ml_suppressions_free(s);
            return -EINVAL;
        }
        q += 5;
        if (q == qe) {
            snprintf(err, errlen, "line %d: empty pattern after `leak:`", lineno);
            ml_suppressions_free(s);
            return -EINVAL;
        }
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 8;
            supp_t *v = realloc(s->v, cap * sizeof *v);
            if (!v) {
                ml_suppressions_free(s);
                return -ENOMEM;
            }
            s->v = v;
            s->cap = cap;
        }
        char *pat = strndup(q, (size_t)(qe - q));
        if (!pat) {
            ml_suppressions_free(s);
            return -ENOMEM;
        }
        s->v[s->n++] = (supp_t){pat, 0, 0};
    }
    *out = s;
    return 0;
}

/* How long a FIFO may stay without a writer before the file is refused:
 * opened plainly, a FIFO nobody writes blocks forever. */
#define FIFO_WAIT_MS 10000

/* Opens the suppressions file: a regular file, a character device
 * (/dev/null, a terminal) or a pipe or FIFO that someone writes (bash's
 * `--suppressions <(...)`). A directory, a socket, or a FIFO with no
 * writer within FIFO_WAIT_MS is refused with the reason. */
static FILE *open_input(const char *path, char *err, size_t errlen, int *rc) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        *rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    const char *why = S_ISDIR(st.st_mode) ? "is a directory" : S_ISSOCK(st.st_mode) ? "is a socket" : NULL;
    if (!why && S_ISFIFO(st.st_mode)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n;
        while ((n = poll(&p, 1, FIFO_WAIT_MS)) < 0 && errno == EINTR) {
        }
        if (n == 0) why = "is a FIFO (named pipe) that nobody wrote to within 10 s";
    }
    if (why) {
        *rc = -EINVAL;
        snprintf(err, errlen, "%s: %s; suppressions are read from a regular file or a pipe", path, why);
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* a pipe is read to its end */
    FILE *f = fdopen(fd, "r");
    if (!f) {
        *rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

int ml_suppressions_load(const char *path, ml_suppressions_t **out, char *err, size_t errlen) {
    int orc = 0;
    FILE *f = open_input(path, err, errlen, &orc);
    if (!f) return orc;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        fclose(f);
        return -ENOMEM;
    }
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) fwrite(tmp, 1, n, m);
    bool bad = ferror(f);
    fclose(f);
    fclose(m);
    if (bad) {
        free(buf);
        snprintf(err, errlen, "%s: read error", path);
        return -EIO;
    }
    char e2[400];
    int rc = ml_suppressions_parse(buf, out, e2, sizeof e2);
    if (rc < 0) snprintf(err, errlen, "%s: %s", path, e2);
    free(buf);
    return rc;
}

void ml_suppressions_free(ml_suppressions_t *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) free(s->v[i].pattern);
    free(s->v);
    free(s);
}

size_t ml_suppressions_count(const ml_suppressions_t *s) {
    return s ? s->n : 0;
}

const char *ml_suppressions_pattern(const ml_suppressions_t *s, size_t i, uint64_t *blocks,
                                    uint64_t *bytes) {
    if (!s || i >= s->n) return NULL;
    if (blocks) *blocks = s->v[i].blocks;
    if (bytes) *bytes = s->v[i].bytes;
    return s->v[i].pattern;
}

/* The first pattern in the file's order matching `text`, or (size_t)-1. */
static size_t first_match(const ml_suppressions_t *s, const char *text) {
    if (!text || !*text) return (size_t)-1;
    for (size_t i = 0; i < s->n; i++)
        if (ml_suppression_match(s->v[i].pattern, text)) return i;
    return (size_t)-1;
}

/* The pattern a site's leaks are counted under, or (size_t)-1: LSan's
 * order (GetSuppressionForStack), so that the counts per pattern are the
 * ones its "Suppressions used" prints. The frames are taken innermost
 * first; of each frame the module, then the function, then the source
 * file, each against every pattern in the file's order. Taking the first
 * pattern that matches any frame instead put every leak of a program under
 * a `leak:^main$` written above the patterns for its sites. */
size_t ml__supp_match(const ml_suppressions_t *s, const ml_frame_t *f, uint32_t n);
size_t ml__supp_match(const ml_suppressions_t *s, const ml_frame_t *f, uint32_t n) {
    char sym[1024];
    for (uint32_t k = 0; k < n; k++) {
        size_t i = first_match(s, f[k].module);
        if (i == (size_t)-1) i = first_match(s, f[k].function);
        if (i == (size_t)-1 && (ml__fortran_symbol(f[k].function, sym, sizeof sym) ||
                                ml__ada_symbol(f[k].function, sym, sizeof sym)))
            i = first_match(s, sym);
        if (i == (size_t)-1) i = first_match(s, f[k].file);
        if (i != (size_t)-1) return i;
    }
    return (size_t)-1;
}

/* The counters are bookkeeping for the report, not part of the patterns. */
void ml__supp_hit(const ml_suppressions_t *s, size_t i, uint64_t blocks, uint64_t bytes);
void ml__supp_hit(const ml_suppressions_t *s, size_t i, uint64_t blocks, uint64_t bytes) {
    supp_t *v = (supp_t *)&s->v[i];
    v->blocks += blocks;
    v->bytes += bytes;
}

void ml__supp_reset(const ml_suppressions_t *s);
void ml__supp_reset(const ml_suppressions_t *s) {
    for (size_t i = 0; i < s->n; i++) ((supp_t *)&s->v[i])->blocks = ((supp_t *)&s->v[i])->bytes = 0;
}
