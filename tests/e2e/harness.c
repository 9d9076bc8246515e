/* harness.c - see harness.h. */
#define _GNU_SOURCE
#include "harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void append(char **buf, size_t *len, size_t *cap, const char *data, size_t n) {
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = realloc(*buf, *cap);
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
}

void h_run(h_run_t *r, const char *const argv[]) {
    int o[2], e[2];
    cr_assert(pipe(o) == 0 && pipe(e) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, o[1], 1);
    posix_spawn_file_actions_adddup2(&fa, e[1], 2);
    posix_spawn_file_actions_addclose(&fa, o[0]);
    posix_spawn_file_actions_addclose(&fa, e[0]);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    cr_assert_eq(rc, 0, "spawn %s: %s", argv[0], strerror(rc));
    posix_spawn_file_actions_destroy(&fa);
    close(o[1]);
    close(e[1]);
    size_t ol = 0, oc = 0, el = 0, ec = 0;
    r->out = NULL;
    r->err = NULL;
    append(&r->out, &ol, &oc, "", 0);
    append(&r->err, &el, &ec, "", 0);
    struct pollfd pf[2] = {{o[0], POLLIN, 0}, {e[0], POLLIN, 0}};
    int open_fds = 2;
    char buf[65536];
    while (open_fds > 0) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP))) continue;
            ssize_t n = read(pf[i].fd, buf, sizeof buf);
            if (n <= 0) {
                close(pf[i].fd);
                pf[i].fd = -1;
                open_fds--;
                continue;
            }
            if (i == 0) append(&r->out, &ol, &oc, buf, (size_t)n);
            else append(&r->err, &el, &ec, buf, (size_t)n);
        }
    }
    int st;
    waitpid(pid, &st, 0);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void h_run_test_lib(h_run_t *r, const char *const argv[], const char *var, const char *value) {
    cr_assert_eq(setenv(var, value, 1), 0);
    cr_assert_eq(setenv("ML_PRELOAD_LIB", h_bin("libmemlens_test.so"), 1), 0);
    h_run(r, argv);
    unsetenv(var);
    unsetenv("ML_PRELOAD_LIB");
}

void h_run_free(h_run_t *r) {
    free(r->out);
    free(r->err);
}

const char *h_bin(const char *name) {
    static char buf[8][4096];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 4096, "%s/%s", ML_BIN_DIR, name);
    return b;
}

static char tmp_dir[256];
static pid_t tmp_owner;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* The test process's folder goes when it exits (ML_KEEP_TEST_FILES=1 keeps
 * it for a look after a failure); children it forked leave it alone. */
static void remove_tmp_dir(void) {
    const char *keep = getenv("ML_KEEP_TEST_FILES");
    if (!tmp_dir[0] || getpid() != tmp_owner || (keep && !strcmp(keep, "1"))) return;
    nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *h_tmp(const char *name) {
    char *dir = tmp_dir;
    static char buf[8][4096];
    static int k;
    if (!dir[0]) {
        snprintf(dir, sizeof tmp_dir, "/tmp/memlens-test-XXXXXX");
        cr_assert(mkdtemp(dir) != NULL);
        tmp_owner = getpid();
        atexit(remove_tmp_dir);
    }
    char *b = buf[k++ % 8];
    snprintf(b, 4096, "%s/%s", dir, name);
    return b;
}

bool h_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

char *h_read_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) fwrite(tmp, 1, n, m);
    fclose(f);
    fclose(m);
    return buf;
}

void h_trace_load(h_trace_t *t, const char *path) {
    memset(t, 0, sizeof *t);
    char err[512];
    ml_reader_t *r;
    int rc = ml_reader_open(path, &r, err, sizeof err);
    cr_assert_eq(rc, 0, "open %s: %s", path, err);
    ml_analysis_t *a;
    cr_assert_eq(ml_analysis_new(&a), 0);
    uint32_t cap = 1024;
    t->node_parent = calloc(cap, sizeof *t->node_parent);
    t->node_pc = calloc(cap, sizeof *t->node_pc);
    ml_record_t rec;
    while ((rc = ml_reader_next(r, &rec)) > 0) {
        ml_analysis_feed(a, &rec);
        t->records_by_tag[rec.tag]++;
        t->last_by_tag[rec.tag] = ++t->nrecords;
        switch (rec.tag) {
        case ML_T_ALLOC: {
            if (rec.u.alloc.flags & ML_EVF_SAMPLED) t->sampled_allocs++;
            int i;
            for (i = 0; i < t->nsizes; i++)
                if (t->sizes[i].size == rec.u.alloc.size) break;
            if (i == t->nsizes && t->nsizes < H_MAX_SIZES) t->sizes[t->nsizes++].size = rec.u.alloc.size;
            if (i < H_MAX_SIZES) {
                t->sizes[i].allocs++;
                t->sizes[i].last_stack = rec.u.alloc.stack;
            }
            break;
        }
        case ML_T_NODE:
            while (rec.u.node.id >= cap) {
                t->node_parent = realloc(t->node_parent, cap * 2 * sizeof *t->node_parent);
                t->node_pc = realloc(t->node_pc, cap * 2 * sizeof *t->node_pc);
                memset(t->node_parent + cap, 0, cap * sizeof *t->node_parent);
                memset(t->node_pc + cap, 0, cap * sizeof *t->node_pc);
                cap *= 2;
            }
            t->node_parent[rec.u.node.id] = rec.u.node.parent;
            t->node_pc[rec.u.node.id] = rec.u.node.pc;
            if (rec.u.node.id >= t->nnodes) t->nnodes = rec.u.node.id + 1;
            break;
        case ML_T_MODULE:
            if (t->nmodules < H_MAX_MODULES) {
                typeof(t->modules[0]) *m = &t->modules[t->nmodules++];
                snprintf(m->path, sizeof m->path, "%s", rec.u.module.path);
                m->base = rec.u.module.base;
                m->lo = UINT64_MAX;
                for (uint32_t i = 0; i < rec.u.module.nsegs; i++) {
                    uint64_t lo = m->base + rec.u.module.segs[i].vaddr;
                    uint64_t hi = lo + rec.u.module.segs[i].memsz;
                    if (lo < m->lo) m->lo = lo;
                    if (hi > m->hi) m->hi = hi;
                }
            }
            break;
        case ML_T_MODULE_UNLOAD:
            for (int i = 0; i < t->nmodules; i++)
                if (t->modules[i].base == rec.u.module.base) t->modules[i].unloaded = true;
            break;
        case ML_T_PROCESS:
            snprintf(t->exe, sizeof t->exe, "%s", rec.u.process.exe);
            snprintf(t->parent_trace, sizeof t->parent_trace, "%s", rec.u.process.parent_trace);
            t->pid = rec.u.process.pid;
            break;
        case ML_T_END:
            t->end = rec.u.end;
            break;
        default:
            break;
        }
    }
    cr_assert_geq(rc, 0, "read %s: %s", path, ml_reader_error(r));
    t->truncated = ml_reader_truncated(r);
    t->complete = ml_reader_complete(r);
    t->totals = *ml_analysis_totals(a);
    ml_analysis_free(a);
    ml_reader_close(r);
}

void h_trace_free(h_trace_t *t) {
    free(t->node_parent);
    free(t->node_pc);
}

uint64_t h_allocs_of_size(const h_trace_t *t, uint64_t size) {
    for (int i = 0; i < t->nsizes; i++)
        if (t->sizes[i].size == size) return t->sizes[i].allocs;
    return 0;
}

uint32_t h_stack_of_size(const h_trace_t *t, uint64_t size) {
    for (int i = 0; i < t->nsizes; i++)
        if (t->sizes[i].size == size) return t->sizes[i].last_stack;
    return 0;
}

int h_module(const h_trace_t *t, const char *needle) {
    for (int i = 0; i < t->nmodules; i++)
        if (strstr(t->modules[i].path, needle)) return i;
    return -1;
}

bool h_stack_in_module(const h_trace_t *t, uint32_t stack, int m) {
    if (m < 0) return false;
    for (int guard = 0; stack && stack < t->nnodes && guard < 1000; guard++) {
        uint64_t pc = t->node_pc[stack];
        if (pc >= t->modules[m].lo && pc < t->modules[m].hi) return true;
        stack = t->node_parent[stack];
    }
    return false;
}

int h_stack_depth(const h_trace_t *t, uint32_t stack) {
    int d = 0;
    while (stack && stack < t->nnodes && d < 1000) {
        d++;
        stack = t->node_parent[stack];
    }
    return d;
}

void h_expect_same_stack(const h_trace_t *a, uint32_t sa, const h_trace_t *b, uint32_t sb,
                         int min_depth) {
    cr_assert_gt(sa, 0);
    cr_assert_gt(sb, 0);
    int depth = h_stack_depth(a, sa);
    cr_expect_geq(depth, min_depth, "%d frames", depth);
    cr_expect_eq(h_stack_depth(b, sb), depth, "%d frames, not %d", h_stack_depth(b, sb), depth);
    for (int i = 0; i < depth && sa && sb; i++) {
        cr_expect(sb < b->nnodes && b->node_pc[sb] != 0, "frame %d: node %u not in its trace", i,
                  sb);
        if (sb >= b->nnodes) break;
        cr_expect_eq(b->node_pc[sb], a->node_pc[sa], "frame %d: 0x%lx, not 0x%lx", i,
                     (unsigned long)b->node_pc[sb], (unsigned long)a->node_pc[sa]);
        sa = a->node_parent[sa];
        sb = b->node_parent[sb];
    }
}
