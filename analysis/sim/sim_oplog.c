/* sim_oplog.c - the ops of one replay, kept for a second replay of the same
 * trace (ml_sim.h).
 *
 * The advisor replays a trace twice: once through the comparison table's
 * policies, then, once the rules have picked candidates, through a router
 * per candidate. Decoding the trace (reading the records, mapping addresses
 * to ids, flagging temporaries) was two fifths of the first replay's
 * caller-thread time and had to be done again for the second. The log keeps
 * the first replay's ops as they were handed to the policies (their flags
 * final), so the second reads them back in order and decodes nothing.
 *
 * Where: an unlinked temporary file (O_TMPFILE, else mkstemp and unlink) in
 * $TMPDIR, else /var/tmp, else /tmp, so the memory it takes is a write
 * buffer and a table per live id, never the trace's length. About 9 bytes
 * per allocation and 2 per free, up to 4 GiB (256 MiB on tmpfs, where a file
 * is memory). Any failure (no temporary file, a full disk, the size cap)
 * only marks the log unusable: the caller then replays the trace again.
 *
 * Encoding, per op: a head byte (type: 2 bits, flags: 3 bits, thread
 * changed, time changed, align follows), then as needed the thread
 * (varint), the time's change (zigzag varint) and the align byte; then
 *   - alloc: the id's change (zigzag), size, site, the ptr's change (zigzag);
 *   - free: the id's change; ptr, size and site are those of the id's last
 *     allocation, which is what the replay gives a free (one that differs
 *     makes the log unusable rather than wrong);
 *   - mallinfo: size.
 * Every field round-trips: test_replay.c compares both replays op by op. */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define LOG_BUF (1u << 20)
#define LOG_MAX_BYTES (4ull << 30)   /* past this, the trace is read again instead */
#define LOG_MAX_TMPFS (256ull << 20) /* the same on a file system in memory */
#define OP_MAX 64                    /* an op's largest encoding */

typedef struct {
    uint64_t ptr, size;
    uint32_t site;
} idval_t;

/* A temporary file written through a buffer: the op log's and the series'. */
typedef struct {
    int fd;
    uint64_t cap;   /* LOG_MAX_BYTES or LOG_MAX_TMPFS */
    uint64_t bytes; /* in the file */
    uint8_t *buf;
    size_t len; /* in buf */
} spool_t;

struct ml_sim_oplog_s {
    spool_t sp;
    bool failed;
    uint64_t ops;
    /* the previous op's fields (encoder and decoder alike) */
    uint64_t ptr;
    uint32_t id, time_ms;
    uint16_t thread;
    idval_t *tab; /* by id: its last allocation */
    uint32_t tabcap;
};

static int tmp_fd_in(const char *dir) {
    int fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/memlens-ops.XXXXXX", dir) >= sizeof path) return -1;
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0) unlink(path);
    return fd;
}

/* $TMPDIR when set; else /var/tmp, which is on disk by convention, before
 * /tmp, which many systems keep in memory (tmpfs). */
static int tmp_fd(uint64_t *cap) {
    const char *dir = getenv("TMPDIR");
    int fd = dir && *dir ? tmp_fd_in(dir) : tmp_fd_in("/var/tmp");
    if (fd < 0 && !(dir && *dir)) fd = tmp_fd_in("/tmp");
    if (fd < 0) return fd;
    /* In memory, the log would be memory after all: kept small there. */
    struct statfs fs;
    *cap = fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC ? LOG_MAX_TMPFS : LOG_MAX_BYTES;
    return fd;
}

/* Opens the file and takes a buffer of `size` bytes: 0, or a negative errno
 * with nothing held. */
static int spool_open(spool_t *sp, size_t size) {
    *sp = (spool_t){.fd = -1};
    if (!(sp->buf = malloc(size))) return -ENOMEM;
    if ((sp->fd = tmp_fd(&sp->cap)) < 0) {
        int e = errno ? errno : EIO;
        free(sp->buf);
        *sp = (spool_t){.fd = -1};
        return -e;
    }
    return 0;
}

static void spool_close(spool_t *sp) {
    if (sp->fd >= 0) close(sp->fd);
    free(sp->buf);
    *sp = (spool_t){.fd = -1};
}

/* Writes the buffer out; false on a write error or past the cap. */
static bool spool_flush(spool_t *sp) {
    if (ml_write_all(sp->fd, sp->buf, sp->len) < 0) return false;
    sp->bytes += sp->len;
    sp->len = 0;
    return sp->bytes <= sp->cap;
}

int ml_sim_oplog_new(ml_sim_oplog_t **out) {
    *out = NULL;
    ml_sim_oplog_t *l = calloc(1, sizeof *l);
    if (!l) return -ENOMEM;
    int rc = spool_open(&l->sp, LOG_BUF);
    if (rc < 0) {
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}

void ml_sim_oplog_free(ml_sim_oplog_t *l) {
    if (!l) return;
    spool_close(&l->sp);
    free(l->tab);
    free(l);
}

bool ml_sim_oplog_ok(const ml_sim_oplog_t *l) {
    return l && !l->failed;
}

uint64_t ml_sim_oplog_bytes(const ml_sim_oplog_t *l) {
    return l ? l->sp.bytes + l->sp.len : 0;
}

static void fail(ml_sim_oplog_t *l) {
    l->failed = true;
    l->sp.len = 0;
    free(l->tab);
    l->tab = NULL;
    l->tabcap = 0;
}

static inline uint8_t *put_v(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t zz(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t unzz(uint64_t v) {
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

void ml__sim_oplog_append(ml_sim_oplog_t *l, const ml_sim_op_t *ops, size_t n) {
    if (l->failed) return;
    for (size_t i = 0; i < n; i++) {
        const ml_sim_op_t *op = &ops[i];
        if (l->sp.len + OP_MAX > LOG_BUF && !spool_flush(&l->sp)) {
            fail(l);
            return;
        }
        uint8_t *p = l->sp.buf + l->sp.len, *head = p++;
        /* Only what the replay makes fits the encoding: anything else (a
         * free whose fields are not its allocation's, another type, more
         * flags) leaves the log unusable, and pass 2 reads the trace. */
        bool fits = op->type == ML_SIM_ALLOC || op->type == ML_SIM_MALLINFO;
        if (op->type == ML_SIM_FREE && op->id < l->tabcap) {
            const idval_t *v = &l->tab[op->id];
            fits = v->ptr == op->ptr && v->size == op->size && v->site == op->site;
        }
        if (!fits || op->flags > 7) {
            fail(l);
            return;
        }
        uint8_t h = (uint8_t)(op->type | op->flags << 2);
        if (op->thread != l->thread) {
            h |= 0x20;
            p = put_v(p, op->thread);
            l->thread = op->thread;
        }
        if (op->time_ms != l->time_ms) {
            h |= 0x40;
            p = put_v(p, zz((int64_t)op->time_ms - (int64_t)l->time_ms));
            l->time_ms = op->time_ms;
        }
        if (op->align) {
            h |= 0x80;
            *p++ = op->align;
        }
        switch (op->type) {
        case ML_SIM_ALLOC:
            if (op->id >= l->tabcap &&
                ml__sim_grow((void **)&l->tab, &l->tabcap, op->id, sizeof *l->tab, 0) < 0) {
                fail(l);
                return;
            }
            l->tab[op->id] = (idval_t){op->ptr, op->size, op->site};
            p = put_v(p, zz((int64_t)op->id - (int64_t)l->id));
            p = put_v(p, op->size);
            p = put_v(p, op->site);
            p = put_v(p, zz((int64_t)(op->ptr - l->ptr)));
            l->id = op->id;
            l->ptr = op->ptr;
            break;
        case ML_SIM_FREE:
            p = put_v(p, zz((int64_t)op->id - (int64_t)l->id));
            l->id = op->id;
            break;
        default: /* ML_SIM_MALLINFO */
            p = put_v(p, op->size);
            break;
        }
        *head = h;
        l->sp.len = (size_t)(p - l->sp.buf);
        l->ops++;
    }
}

/* Reading back ------------------------------------------------------------ */

static inline const uint8_t *get_v(const uint8_t *p, uint64_t *v) {
    uint64_t x = 0;
    for (unsigned s = 0; s < 64; s += 7) {
        uint8_t b = *p++;
        x |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) break;
    }
    *v = x;
    return p;
}

/* One op from p (at least OP_MAX bytes readable, or the end of the log). */
static const uint8_t *decode(ml_sim_oplog_t *l, const uint8_t *p, ml_sim_op_t *op) {
    uint8_t h = *p++;
    uint64_t v;
    *op = (ml_sim_op_t){0};
    op->type = h & 3;
    op->flags = (h >> 2) & 7;
    if (h & 0x20) {
        p = get_v(p, &v);
        l->thread = (uint16_t)v;
    }
    if (h & 0x40) {
        p = get_v(p, &v);
        l->time_ms = (uint32_t)((int64_t)l->time_ms + unzz(v));
    }
    op->thread = l->thread;
    op->time_ms = l->time_ms;
    if (h & 0x80) op->align = *p++;
    switch (op->type) {
    case ML_SIM_ALLOC:
        p = get_v(p, &v);
        op->id = (uint32_t)((int64_t)l->id + unzz(v));
        p = get_v(p, &op->size);
        p = get_v(p, &v);
        op->site = (uint32_t)v;
        p = get_v(p, &v);
        op->ptr = l->ptr + (uint64_t)unzz(v);
        l->id = op->id;
        l->ptr = op->ptr;
        if (op->id >= l->tabcap &&
            ml__sim_grow((void **)&l->tab, &l->tabcap, op->id, sizeof *l->tab, 0) < 0)
            return NULL;
        l->tab[op->id] = (idval_t){op->ptr, op->size, op->site};
        break;
    case ML_SIM_FREE:
        p = get_v(p, &v);
        op->id = (uint32_t)((int64_t)l->id + unzz(v));
        l->id = op->id;
        if (op->id < l->tabcap) {
            op->ptr = l->tab[op->id].ptr;
            op->size = l->tab[op->id].size;
            op->site = l->tab[op->id].site;
        }
        break;
    case ML_SIM_MALLINFO:
        p = get_v(p, &op->size);
        break;
    }
    return p;
}

int ml__sim_oplog_rewind(ml_sim_oplog_t *l) {
    if (l->failed) return -EIO;
    if (l->sp.len && !spool_flush(&l->sp)) {
        fail(l);
        return -EIO;
    }
    l->ptr = 0;
    l->id = l->time_ms = 0;
    l->thread = 0;
    memset(l->tab, 0, (size_t)l->tabcap * sizeof *l->tab);
    return 0;
}

int ml__sim_oplog_read(ml_sim_oplog_t *l, ml_sim_op_t *(*slot)(void *ctx), void *ctx,
                       uint64_t *at, ml_progress_t *progress) {
    uint64_t off = 0, left = l->sp.bytes, ops = 0;
    uint8_t *buf = l->sp.buf;
    size_t have = 0, pos = 0;
    while (ops < l->ops) {
        if (have - pos < OP_MAX && left) {
            memmove(buf, buf + pos, have - pos);
            have -= pos;
            pos = 0;
            size_t want = LOG_BUF - have;
            if (want > left) want = (size_t)left;
            ssize_t r = pread(l->sp.fd, buf + have, want, (off_t)off);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return -EIO;
            have += (size_t)r;
            off += (uint64_t)r;
            left -= (uint64_t)r;
            if (at) *at = off;
        }
        if (pos >= have) return -EIO; /* shorter than its count of ops */
        const uint8_t *p = decode(l, buf + pos, slot(ctx)); /* in place: no copy */
        if (!p) return -ENOMEM;
        pos = (size_t)(p - buf);
        if (pos > have) return -EIO;
        ops++;
        if (progress) ml_progress_tick(progress);
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* A policy's footprint, op by op                                            */
/* ------------------------------------------------------------------------- */

/* The advisor's separate_lifetimes what-if compares a router's footprint,
 * after every op, with the baseline's fed every op: it used to run its own
 * copy of the baseline for that, the same policy on the same ops as pass
 * 1's. Pass 1 now records its baseline's footprint whenever it changes, as
 * (ops since the last change, the change) varint pairs in a temporary file
 * like the op log's, and such a router reads the series back instead of
 * running the copy. An op is counted by the policy's `seq` (every alloc and
 * free ml_sim_apply() is given), which is the same number in both passes. */
#define SERIES_BUF (256u << 10)
#define READER_BUF (64u << 10)

struct ml_sim_fpseries_s {
    spool_t sp;
    bool failed, finished;
    uint64_t seq, value, max; /* the last change recorded, and the largest value */
};

typedef struct {
    const ml_sim_fpseries_t *s;
    bool failed; /* a read failed: the values from there on are not the series' */
    uint8_t *buf;
    size_t have, pos;
    uint64_t off;
    uint64_t value;          /* the footprint up to next_seq */
    uint64_t next_seq, next; /* the next change; next_seq 0: none left */
} series_reader_t;

int ml_sim_fpseries_new(ml_sim_fpseries_t **out) {
    *out = NULL;
    ml_sim_fpseries_t *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    int rc = spool_open(&s->sp, SERIES_BUF);
    if (rc < 0) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void ml_sim_fpseries_free(ml_sim_fpseries_t *s) {
    if (!s) return;
    spool_close(&s->sp);
    free(s);
}

bool ml_sim_fpseries_ok(const ml_sim_fpseries_t *s) {
    return s && s->finished && !s->failed;
}

uint64_t ml_sim_fpseries_bytes(const ml_sim_fpseries_t *s) {
    return s ? s->sp.bytes + s->sp.len : 0;
}

void ml__sim_fpseries_note(ml_sim_fpseries_t *s, uint64_t seq, uint64_t value) {
    if (s->failed || value == s->value) return;
    if (s->sp.len + 24 > SERIES_BUF && !spool_flush(&s->sp)) {
        s->failed = true;
        return;
    }
    uint8_t *p = s->sp.buf + s->sp.len;
    p = put_v(p, seq - s->seq);
    p = put_v(p, zz((int64_t)(value - s->value)));
    s->sp.len = (size_t)(p - s->sp.buf);
    s->seq = seq;
    s->value = value;
    if (value > s->max) s->max = value;
}

void ml__sim_fpseries_finish(ml_sim_fpseries_t *s) {
    if (s->finished) return;
    s->finished = true;
    if (!s->failed && s->sp.len && !spool_flush(&s->sp)) s->failed = true;
}

uint64_t ml__sim_fpseries_max(const ml_sim_fpseries_t *s) {
    return s->max;
}

/* The next change into r->next_seq / r->next (next_seq 0 at the end, or on
 * a read error, which ml__sim_series_at reports). */
static bool reader_advance(series_reader_t *r) {
    if (r->have - r->pos < 20 && r->off < r->s->sp.bytes) {
        memmove(r->buf, r->buf + r->pos, r->have - r->pos);
        r->have -= r->pos;
        r->pos = 0;
        uint64_t want = READER_BUF - r->have;
        if (want > r->s->sp.bytes - r->off) want = r->s->sp.bytes - r->off;
        ssize_t n;
        do
            n = pread(r->s->sp.fd, r->buf + r->have, (size_t)want, (off_t)r->off);
        while (n < 0 && errno == EINTR);
        if (n <= 0) {
            r->next_seq = 0;
            r->failed = true;
            return false;
        }
        r->have += (size_t)n;
        r->off += (uint64_t)n;
    }
    if (r->pos >= r->have) {
        r->next_seq = 0;
        return true;
    }
    uint64_t d, v;
    const uint8_t *p = get_v(r->buf + r->pos, &d);
    p = get_v(p, &v);
    r->pos = (size_t)(p - r->buf);
    r->next_seq += d;
    r->next = r->value + (uint64_t)unzz(v);
    return true;
}

void *ml__sim_series_reader_new(const ml_sim_fpseries_t *s) {
    series_reader_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    if (!(r->buf = malloc(READER_BUF))) {
        free(r);
        return NULL;
    }
    r->s = s;
    reader_advance(r);
    return r;
}

void ml__sim_series_reader_free(void *rd) {
    series_reader_t *r = rd;
    if (!r) return;
    free(r->buf);
    free(r);
}

/* The footprint after op `seq` (asked in increasing order). */
uint64_t ml__sim_series_at(void *rd, uint64_t seq) {
    series_reader_t *r = rd;
    while (r->next_seq && r->next_seq <= seq) {
        r->value = r->next;
        if (!reader_advance(r)) break;
    }
    return r->value;
}

bool ml__sim_series_reader_failed(const void *rd) {
    return ((const series_reader_t *)rd)->failed;
}
