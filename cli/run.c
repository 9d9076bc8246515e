/* run.c - `memlens run`: the options, the program's environment, fork and
 * exec, and the summary. The recording itself is the collector's
 * (collector/ml_collector.h): this file creates it with its sinks -- the
 * trace writer, the live viewer (--live) and the streaming analysis --,
 * starts the program with the preload library, and turns the collector's
 * rounds until every traced process is finished.
 */
#define _GNU_SOURCE
#include "ml_cli.h"
#include "ml_analysis.h"
#include "ml_collector.h"
#include "ml_config.h"
#include "ml_event.h"
#include "ml_options.h"
#include "ml_outfile.h"
#include "ml_trace_io.h"
#include "ml_viewer.h"

#include <elf.h>
#include <gelf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *out;
    bool follow_fork, quiet, unwind_fp, no_gpu, no_snapshot;
    bool unwind_verify; /* --unwind verify (hidden): docs/recorder.md#stacks */
    bool gpu_pools; /* --gpu-pools: CUPTI activity records of memory pools (ML_GPU_POOLS=1) */
    bool live; /* --live: the terminal viewer follows the root process */
    unsigned out_flags; /* ML_OUTFILE_FORCE (--force), ML_OUTFILE_GROUP (--group-readable) */
    uint64_t sample_bytes;
    uint32_t depth, ring_slots;
    int argc;
    char **argv;
} run_opts_t;

/* What `memlens run` holds while the program runs. */
typedef struct {
    run_opts_t o;
    char prog[PATH_MAX];      /* the program as found on PATH */
    char prog_real[PATH_MAX]; /* its absolute path, "" when unknown */
    char lib[PATH_MAX];       /* libmemlens.so */
    ml_collector_t *c;
    ml_sink_t trace_sink;    /* owned by c; kept to ask it about write failures */
    ml_vmodel_t *live_model; /* --live */
    ml_viewer_live_t *live_ui;
    char **env;        /* the program's environment */
    char *env_own[4];  /* the entries of env that were allocated for it */
    int go[2], err[2]; /* start signal to the child; exec errors back from it */
    pid_t pid;
    char root_path[PATH_MAX];
    ml_outfile_t root_file; /* until the collector takes it over */
    bool root_exited;
    int root_status;
    int fail_code; /* the exit status when the program could not start (127, 126) */
} run_t;

/* The first of SIGINT, SIGTERM, SIGHUP memlens received, and how many. */
static volatile sig_atomic_t stop_sig, stop_count;
static volatile pid_t child_pid;

/* ------------------------------------------------------------------------- */
/* Options                                                                   */
/* ------------------------------------------------------------------------- */

static void usage_run(FILE *f) {
    fprintf(f,
            "usage: memlens run [-o FILE] [--follow-fork] [--sample BYTES] [--unwind libunwind|fp]\n"
            "                   [--depth N] [--no-gpu] [--gpu-pools] [--no-snapshot] [--live] [-q]\n"
            "                   [--force] [--group-readable] -- PROG [ARGS...]\n"
            "\n"
            "  -o, --output FILE   trace file (default: memlens.PROG.PID-RANDOM.mlt in the current\n"
            "                      directory); created 0600, never through a symbolic link, and\n"
            "                      an existing file is replaced only if it is a memlens trace\n"
            "  --force             replace FILE even when memlens did not write it\n"
            "  --group-readable    create traces 0640 instead of 0600 (docs/security.md)\n"
            "  --follow-fork       trace forked children too (posix_spawn and vfork ones too, and\n"
            "                      what they exec), each into FILE-stem.PID.mlt; an exec of PROG\n"
            "                      itself is always followed\n"
            "  --sample BYTES      record one allocation per BYTES allocated on average (Poisson)\n"
            "  --unwind KIND       libunwind (default, exact) or fp (frame pointers, faster)\n"
            "  --depth N           deepest stack recorded (default %d, at most %d)\n"
            "  --no-gpu            do not load the CUPTI collector\n"
            "  --gpu-pools         also record CUDA memory pools (reserved vs used bytes, trims)\n"
            "                      from CUPTI activity records (docs/gpu.md); off by default\n"
            "  --no-snapshot       do not analyse while recording (less CPU beside PROG); reports\n"
            "                      then replay the whole trace instead of starting from the\n"
            "                      analysis saved at its end\n"
            "  --live              show the terminal viewer while PROG runs (it stays open on the\n"
            "                      final data until q); redirect PROG's output, which would\n"
            "                      otherwise share the terminal with the view\n"
            "  -q, --quiet         no summary on stderr\n",
            ML_DEFAULT_DEPTH, ML_MAX_DEPTH);
}

static int parse_run(int argc, char **argv, run_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->depth = ML_DEFAULT_DEPTH;
    /* The table's default is ML_DEFAULT_RING_SLOTS; a value from the
     * environment is checked here. */
    const ml_option_t *rs = ml_option(ML_ENV_RING_SLOTS);
    uint64_t slots = rs->value;
    if (!rs->valid || !ml_ring_slots_ok(slots)) {
        ml_cli_error("ML_RING_SLOTS must be a power of two between %u and 2^28", ML_MIN_RING_SLOTS);
        return -1;
    }
    o->ring_slots = (uint32_t)slots;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-') break;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc) goto missing;
            o->out = argv[i];
            if (!strcmp(o->out, "-")) {
                /* The reports' "-" is stdout; a trace there would mix with
                 * the program's output, and a file named "-" surprises. */
                ml_cli_error("run: -o - is not a trace file: a trace goes to a file (stdout is the "
                             "program's); name one, such as -o ./-");
                return -1;
            }
            int own = ml_outfile_own_fd(o->out);
            if (own == 1 || own == 2) {
                /* The program writes there too: the trace would be mixed into its output. */
                ml_cli_error("run: -o %s is the program's %s as well: its output would be mixed into "
                             "the trace; name a file",
                             o->out, own == 1 ? "stdout" : "stderr");
                return -1;
            }
        } else if (!strcmp(a, "--follow-fork")) {
            o->follow_fork = true;
        } else if (!strcmp(a, "--force")) {
            o->out_flags |= ML_OUTFILE_FORCE;
        } else if (!strcmp(a, "--group-readable")) {
            o->out_flags |= ML_OUTFILE_GROUP;
        } else if (!strcmp(a, "--sample")) {
            if (++i >= argc) goto missing;
            if (ml_parse_bytes(argv[i], &o->sample_bytes) < 0 || o->sample_bytes == 0) {
                ml_cli_error("--sample takes a positive byte count, like 512k");
                return -1;
            }
        } else if (!strcmp(a, "--unwind")) {
            if (++i >= argc) goto missing;
            if (!strcmp(argv[i], "fp")) o->unwind_fp = true;
            else if (!strcmp(argv[i], "verify")) o->unwind_verify = true;
            else if (strcmp(argv[i], "libunwind")) {
                ml_cli_error("--unwind takes libunwind or fp");
                return -1;
            }
        } else if (!strcmp(a, "--depth")) {
            if (++i >= argc) goto missing;
            uint64_t v;
            if (ml_parse_bytes(argv[i], &v) < 0 || v < 1 || v > ML_MAX_DEPTH) {
                ml_cli_error("--depth takes a number from 1 to %d", ML_MAX_DEPTH);
                return -1;
            }
            o->depth = (uint32_t)v;
        } else if (!strcmp(a, "--no-gpu")) {
            o->no_gpu = true;
        } else if (!strcmp(a, "--gpu-pools")) {
            o->gpu_pools = true;
        } else if (!strcmp(a, "--no-snapshot")) {
            o->no_snapshot = true;
        } else if (!strcmp(a, "--live")) {
            o->live = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o->quiet = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_run(stdout);
            exit(ML_EXIT_OK);
        } else {
            ml_cli_error("run: unknown option '%s'", a);
            usage_run(stderr);
            return -1;
        }
    }
    if (o->gpu_pools && o->no_gpu)
        fprintf(stderr, "memlens: warning: --gpu-pools does nothing with --no-gpu\n");
    if (i >= argc) {
        ml_cli_error("run: no program given");
        usage_run(stderr);
        return -1;
    }
    o->argc = argc - i;
    o->argv = argv + i;
    return 0;
missing:
    ml_cli_error("run: %s needs a value", argv[i - 1]);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Can this program be preloaded?                                            */
/* ------------------------------------------------------------------------- */

static int resolve_program(const char *name, char *out, size_t len) {
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0 ? 0 : -errno;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    int err = -ENOENT;
    while (*path) {
        const char *c = strchr(path, ':');
        size_t n = c ? (size_t)(c - path) : strlen(path);
        snprintf(out, len, "%.*s%s%s", (int)n, path, n ? "/" : "", name);
        if (access(out, X_OK) == 0) {
            struct stat st;
            if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) return 0;
        } else if (errno == EACCES) {
            err = -EACCES;
        }
        if (!c) break;
        path = c + 1;
    }
    return err;
}

/* Whether the program at path is built with AddressSanitizer: it needs
 * libasan, or carries ASan's runtime itself (clang links it statically and
 * exports __asan_init). */
static bool built_with_asan(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool found = false;
    Elf *e = elf_version(EV_CURRENT) != EV_NONE ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
    for (Elf_Scn *scn = NULL; e && !found && (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || !sh.sh_entsize || (sh.sh_type != SHT_DYNAMIC && sh.sh_type != SHT_DYNSYM))
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; d && !found && i < sh.sh_size / sh.sh_entsize; i++) {
            const char *name = NULL;
            GElf_Dyn dyn;
            GElf_Sym sym;
            if (sh.sh_type == SHT_DYNAMIC) {
                if (!gelf_getdyn(d, (int)i, &dyn)) break;
                if (dyn.d_tag == DT_NEEDED) name = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
                found = name && !strncmp(name, "libasan.so", 10);
            } else {
                if (!gelf_getsym(d, (int)i, &sym)) break;
                if (sym.st_shndx != SHN_UNDEF) name = elf_strptr(e, sh.sh_link, sym.st_name);
                found = name && !strcmp(name, "__asan_init");
            }
        }
    }
    if (e) elf_end(e);
    close(fd);
    return found;
}

/* Returns NULL when the program can be preloaded, else why not. */
static const char *preload_obstacle(const char *path, int depth) {
    static char why[PATH_MAX + 128];
    struct stat st;
    if (stat(path, &st) < 0) return NULL; /* exec will report it */
    if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
        ((st.st_mode & S_ISGID) && st.st_gid != getegid())) {
        snprintf(why, sizeof why,
                 "%s is set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD for it "
                 "(secure-execution mode), so memlens cannot see its allocations",
                 path);
        return why;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    unsigned char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n >= 2 && buf[0] == '#' && buf[1] == '!' && depth == 0) {
        char interp[PATH_MAX];
        ssize_t i = 2, j = 0;
        while (i < n && (buf[i] == ' ' || buf[i] == '\t')) i++;
        while (i < n && buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && j < PATH_MAX - 1)
            interp[j++] = (char)buf[i++];
        interp[j] = '\0';
        return j ? preload_obstacle(interp, 1) : NULL;
    }
    if (n < (ssize_t)sizeof(Elf64_Ehdr) || memcmp(buf, ELFMAG, SELFMAG) != 0) return NULL;
    if (buf[EI_CLASS] != ELFCLASS64) {
        snprintf(why, sizeof why, "%s is a 32-bit program; memlens records 64-bit programs only",
                 path);
        return why;
    }
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
    if (eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > (uint64_t)n) return NULL;
    bool interp = false;
    for (int i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(buf + eh->e_phoff + i * sizeof(Elf64_Phdr));
        if (ph->p_type == PT_INTERP) interp = true;
    }
    if (!interp) {
        snprintf(why, sizeof why,
                 "%s is statically linked: there is no dynamic loader to preload libmemlens.so "
                 "into, so its allocations cannot be recorded. Link it dynamically to profile it",
                 path);
        return why;
    }
    /* ASan's runtime stops a program in which any library is loaded ahead of
     * it ("ASan runtime does not come first in initial library list"), as
     * libmemlens.so is; with that check off it runs, and is recorded, its
     * blocks coming from ASan's allocator. */
    const char *asan = getenv("ASAN_OPTIONS");
    if (built_with_asan(path) &&
        !(asan && (strstr(asan, "verify_asan_link_order=0") || strstr(asan, "verify_asan_link_order=false")))) {
        snprintf(why, sizeof why,
                 "%s is built with AddressSanitizer, whose runtime stops the program when a library "
                 "is preloaded ahead of it, as libmemlens.so is. Turn that check off and memlens records "
                 "it: ASAN_OPTIONS=verify_asan_link_order=0 memlens run -- PROG (add your own ASAN_OPTIONS "
                 "after a colon)",
                 path);
        return why;
    }
    return NULL;
}

int ml_cli_find_preload_lib(char *out, size_t len) {
    const char *env = ml_option_str(ML_ENV_PRELOAD_LIB);
    if (env) {
        snprintf(out, len, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return -1;
    *slash = '\0';
    if (snprintf(out, len, "%s/libmemlens.so", self) < (int)len && access(out, R_OK) == 0)
        return 0;
    if (snprintf(out, len, "%s/../lib/memlens/libmemlens.so", self) < (int)len &&
        access(out, R_OK) == 0)
        return 0;
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Summary                                                                   */
/* ------------------------------------------------------------------------- */

/* The program that actually ran: the root, or the last image that replaced
 * it by exec (a launcher script, `sh -c 'exec prog'`); exec'd images
 * register in order, each in a later slot. */
static const ml_proc_info_t *final_image(const run_t *s, const ml_proc_info_t *root) {
    const ml_proc_info_t *last = root;
    uint32_t n = ml_collector_nprocs(s->c);
    for (uint32_t i = root->slot + 1; i < n; i++) {
        const ml_proc_info_t *p = ml_collector_proc(s->c, i);
        if (p && p->pid == root->pid && p->analysis) last = p;
    }
    return last;
}

static const char *image_name(const ml_proc_info_t *p) {
    const ml_process_info_t *pi = p->analysis ? ml_analysis_process(p->analysis) : NULL;
    if (pi && pi->exe && *pi->exe) return pi->exe;
    return pi && pi->argc ? pi->argv[0] : "?";
}

static void print_summary(const run_t *s) {
    const ml_proc_info_t *root = NULL;
    uint32_t n = ml_collector_nprocs(s->c);
    for (uint32_t i = 0; i < n; i++) {
        const ml_proc_info_t *p = ml_collector_proc(s->c, i);
        if (p && p->is_root) root = p;
    }
    if (!root || !root->analysis) return;
    /* The numbers are the final image's: the program the user meant. */
    const ml_proc_info_t *shown = final_image(s, root);
    if (shown != root) {
        char safe0[PATH_MAX], safe1[PATH_MAX]; /* the exec'd path is the program's to choose */
        fprintf(stderr, "memlens: %s replaced itself by exec; the program that ran was %s (pid %u)\n",
                ml_cli_safe(s->o.argv[0], safe0, sizeof safe0), ml_cli_safe(image_name(shown), safe1, sizeof safe1),
                shown->pid);
    }
    uint32_t nchild = 0;
    for (uint32_t i = 0; i < n; i++) {
        const ml_proc_info_t *p = ml_collector_proc(s->c, i);
        if (p && p != shown && !p->unsaved) nchild++;
    }
    const ml_totals_t *t = ml_analysis_totals(shown->analysis);
    char b1[32], b2[32], b3[32];
    struct stat st;
    bool have_st = stat(shown->path, &st) == 0;
    uint64_t size = have_st ? (uint64_t)st.st_size : 0;
    fprintf(stderr,
            "memlens: %" PRIu64 " allocation calls (%" PRIu64 " temporary), %" PRIu64
            " frees, %" PRIu64 " reallocs, %" PRIu64 " mmaps\n",
            t->alloc_calls, t->temporary_allocs, t->free_calls, t->realloc_calls, t->mmap_calls);
    /* "Leaked" is definite + indirect + possible; reachable is said beside it. */
    ml_live_split_t ls = ml_analysis_live_split(shown->analysis);
    char b4[32];
    const char *sampled = s->o.sample_bytes ? " (sampled: estimates)" : "";
    ml_unjudged_t u;
    if (ml_totals_unjudged(t, &u)) {
        /* The process did not exit (exec, or recording stopped while it
         * ran): what is live is not leaked. */
        fprintf(stderr,
                "memlens: peak heap %s at %.3f s; %s live in %" PRIu64 " blocks %s "
                "(%s: not leaks)%s\n",
                ml_fmt_bytes(t->peak_bytes, b1, sizeof b1), t->peak_time_ms / 1000.0,
                ml_fmt_bytes(ls.lost_bytes + ls.reachable_bytes, b2, sizeof b2),
                ls.lost_blocks + ls.reachable_blocks, u.when, u.why, sampled);
    } else {
        fprintf(stderr,
                "memlens: peak heap %s at %.3f s; leaked %s in %" PRIu64 " blocks%s, still reachable %s"
                " in %" PRIu64 " blocks%s\n",
                ml_fmt_bytes(t->peak_bytes, b1, sizeof b1), t->peak_time_ms / 1000.0,
                ml_fmt_bytes(ls.lost_bytes, b2, sizeof b2), ls.lost_blocks,
                ls.scanned ? "" : " (no reachability scan)",
                ml_fmt_bytes(ls.reachable_bytes, b4, sizeof b4), ls.reachable_blocks, sampled);
    }
    /* memlens itself ran out of memory (a `ulimit -v`, a cgroup): the
     * numbers above undercount, and the trace that says so may be lost too
     * (its writer needs memory as well). Said here, where they are. */
    uint64_t lost_blocks, lost_records;
    ml_analysis_lost(shown->analysis, &lost_blocks, &lost_records);
    if (lost_blocks || lost_records)
        fprintf(stderr,
                "memlens: warning: memlens ran out of memory while analysing: %" PRIu64
                " blocks were not tracked and %" PRIu64
                " records were kept incompletely; the numbers above undercount them\n",
                lost_blocks, lost_records);
    if (t->hwm_rss_source)
        fprintf(stderr, "memlens: " ML_LABEL_PEAK_RSS " %s\n", ml_fmt_bytes(t->hwm_rss_bytes, b1, sizeof b1));
    if (shown->unsaved) {
        /* Not at its name (its directory was removed or renamed, a link or
         * a directory took the name): the size there was another file's. */
        fprintf(stderr, "memlens: no trace at %s (the error above says why, and where its data is)\n", shown->path);
    } else if (have_st && !S_ISREG(st.st_mode)) {
        /* A FIFO or a device has no size to tell (it said "0 B"). */
        fprintf(stderr, "memlens: trace %s (%s)\n", shown->path, ml_file_kind(st.st_mode));
    } else {
        fprintf(stderr, "memlens: trace %s (%s", shown->path, ml_fmt_bytes(size, b3, sizeof b3));
        if (t->alloc_calls) fprintf(stderr, ", %.1f bytes/call", (double)size / (double)t->alloc_calls);
        fprintf(stderr, ")\n");
    }
    if (nchild) {
        /* Thousands of images under --follow-fork: the first few, and how
         * to see them all (a line of 10,000 paths helps nobody). */
        enum { LISTED = 16 };
        fprintf(stderr, "memlens: %u more trace%s:", nchild, nchild > 1 ? "s" : "");
        uint32_t k = 0;
        for (uint32_t i = 0; i < n && k < LISTED; i++) {
            const ml_proc_info_t *p = ml_collector_proc(s->c, i);
            if (p && p != shown && !p->unsaved) {
                fprintf(stderr, " %s", p->path);
                k++;
            }
        }
        if (nchild > LISTED) {
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%s", shown->path);
            char *slash = strrchr(dir, '/');
            if (!slash) snprintf(dir, sizeof dir, ".");
            else slash[slash == dir] = '\0'; /* "/x.mlt": "/" */
            fprintf(stderr, " ... and %u more in %s (`memlens report %s` reports the folder's traces as one)",
                    nchild - LISTED, dir, dir);
        }
        fprintf(stderr, "\n");
    }
    for (uint32_t i = 0; i < n; i++) {
        const ml_proc_info_t *p = ml_collector_proc(s->c, i);
        if (!p || !p->ended) continue;
        const ml_rec_end_t *e = &p->end;
        if (e->lost_in_crash || e->lost_dead_collector)
            fprintf(stderr,
                    "memlens: %s: %" PRIu64 " events were being written when the process died "
                    "and are missing\n",
                    p->path, e->lost_in_crash + e->lost_dead_collector);
        if (e->nested_skipped)
            fprintf(stderr,
                    "memlens: %s: %" PRIu64 " allocation calls and frees made while memlens was busy with "
                    "another call of the same thread (a signal handler that allocates, most likely) are not "
                    "in the trace\n",
                    p->path, e->nested_skipped);
        /* "Nothing dropped" is said only when every trace was written whole
         * (a full disk is reported once, by the trace writer). */
        if (e->ring_waits)
            fprintf(stderr,
                    "memlens: %s: the event ring was full %" PRIu64
                    " times; the program waited %.3f s in total%s\n",
                    p->path, e->ring_waits, e->ring_wait_ns / 1e9,
                    ml_trace_sink_failures(&s->trace_sink) || (p == shown && (lost_blocks || lost_records))
                        ? ""
                        : " (nothing was dropped)");
    }
    uint64_t aside = ml_collector_backlog_peak(s->c);
    if (aside) {
        char b[32];
        fprintf(stderr,
                "memlens: to keep the program from waiting on a filling ring, the collector set up to %s of "
                "events aside, decoded in order later\n",
                ml_fmt_bytes(aside, b, sizeof b));
    }
}

/* ------------------------------------------------------------------------- */
/* The program's environment                                                 */
/* ------------------------------------------------------------------------- */

static char *env_entry(const char *name, const char *value) {
    size_t n = strlen(name) + strlen(value) + 2;
    char *e = malloc(n);
    if (e) snprintf(e, n, "%s=%s", name, value);
    return e;
}

/* The CUPTI collector (docs/gpu.md): CUDA_INJECTION64_PATH names
 * libmemlens_cupti.so beside libmemlens.so, so that the CUDA driver loads it
 * at cuInit in processes that use CUDA, and only in those. Returns the entry
 * to add, or NULL: --no-gpu, a build without CUPTI, or the variable already
 * set by the user or another CUDA tool (Nsight, compute-sanitizer), which is
 * left alone with a warning since only one injection library can be named. */
static char *gpu_env_entry(const run_t *s) {
    static char entry[PATH_MAX + 32];
    if (s->o.no_gpu) return NULL;
    char cupti[PATH_MAX];
    snprintf(cupti, sizeof cupti, "%s", s->lib);
    char *slash = strrchr(cupti, '/');
    size_t dir = slash ? (size_t)(slash - cupti) + 1 : 0;
    if (snprintf(cupti + dir, sizeof cupti - dir, "libmemlens_cupti.so") >= (int)(sizeof cupti - dir) ||
        access(cupti, R_OK) != 0)
        return NULL;
    const char *cur = getenv("CUDA_INJECTION64_PATH");
    if (cur && *cur) {
        if (strcmp(cur, cupti) != 0)
            fprintf(stderr,
                    "memlens: warning: CUDA_INJECTION64_PATH is already set (to %s), so GPU "
                    "allocations will not be recorded; unset it to record them, or pass --no-gpu\n",
                    cur);
        return NULL;
    }
    snprintf(entry, sizeof entry, "CUDA_INJECTION64_PATH=%s", cupti);
    return entry;
}

static void free_env(run_t *s) {
    for (size_t i = 0; i < sizeof s->env_own / sizeof s->env_own[0]; i++) {
        free(s->env_own[i]);
        s->env_own[i] = NULL;
    }
    free(s->env);
    s->env = NULL;
}

/* Whether `path` is this memlens executable (what a shell puts in `_`). */
static bool names_memlens(const char *path) {
    char a[PATH_MAX], b[PATH_MAX];
    return *path && realpath(path, a) && realpath("/proc/self/exe", b) && !strcmp(a, b);
}

/* Ours, and the caller's environment without memlens' own variables:
 * LD_PRELOAD names libmemlens.so first (then the caller's preloads, which
 * ML_LD_PRELOAD_ORIG keeps so that libmemlens can restore them), ML_CTL the
 * session; `_` names the program where the shell made it name memlens.
 * Returns 0 or -ENOMEM. */
static int build_env(run_t *s) {
    extern char **environ;
    size_t n = 0;
    while (environ[n]) n++;
    s->env = calloc(n + 6, sizeof *s->env);
    if (!s->env) return -ENOMEM;
    const char *orig = getenv("LD_PRELOAD");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(environ[i], "LD_PRELOAD=", 11) || !strncmp(environ[i], "ML_CTL=", 7) ||
            !strncmp(environ[i], "ML_LD_PRELOAD_ORIG=", 19) ||
            !strncmp(environ[i], "ML_GPU_POOLS=", 13))
            continue;
        if (!s->env_own[3] && !strncmp(environ[i], "_=", 2) && names_memlens(environ[i] + 2)) {
            /* The shell that started memlens set `_` to memlens' path; it
             * would have set it to the program's (bash and zsh: the path
             * the command was run from). */
            if (!(s->env_own[3] = env_entry("_", s->prog))) {
                free_env(s);
                return -ENOMEM;
            }
            s->env[k++] = s->env_own[3];
            continue;
        }
        s->env[k++] = environ[i];
    }
    char pre[PATH_MAX * 2];
    if (orig && *orig) snprintf(pre, sizeof pre, "%s:%s", s->lib, orig);
    else snprintf(pre, sizeof pre, "%s", s->lib);
    s->env_own[0] = env_entry("LD_PRELOAD", pre);
    /* Only when the caller had LD_PRELOAD, even empty: libmemlens restores
     * it then, and removes it otherwise (an empty value and none are two
     * environments). */
    s->env_own[1] = orig ? env_entry("ML_LD_PRELOAD_ORIG", orig) : NULL;
    s->env_own[2] = env_entry("ML_CTL", ml_collector_ctl_path(s->c));
    if (!s->env_own[0] || (orig && !s->env_own[1]) || !s->env_own[2]) {
        free_env(s);
        return -ENOMEM;
    }
    for (size_t i = 0; i < 3; i++)
        if (s->env_own[i]) s->env[k++] = s->env_own[i];
    char *gpu = gpu_env_entry(s);
    if (gpu) s->env[k++] = gpu;
    /* Read by libmemlens_cupti.so at InitializeInjection; only --gpu-pools
     * turns the activity records on, whatever the caller's environment says. */
    if (gpu && s->o.gpu_pools) s->env[k++] = (char *)"ML_GPU_POOLS=1";
    else if (s->o.gpu_pools && !s->o.no_gpu && !getenv("CUDA_INJECTION64_PATH"))
        fprintf(stderr, "memlens: warning: --gpu-pools does nothing: this memlens was built "
                        "without GPU (CUPTI) support\n");
    s->env[k] = NULL;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The live view                                                             */
/* ------------------------------------------------------------------------- */

/* --live: the viewer runs in a thread of its own on the root process'
 * session (the model's) while this thread collects; see docs/viewer.md. */
static void live_start(run_t *s) {
    if (!s->live_model) return;
    ml_vmodel_set_path(s->live_model, s->root_path);
    ml_vmodel_set_process_state(s->live_model, ML_VPROC_RUNNING, 0);
    char err[512];
    if (ml_viewer_live_start(s->live_model, err, sizeof err, &s->live_ui) < 0)
        fprintf(stderr, "memlens: warning: no live view (%s); recording goes on\n", err);
}

/* The user quit the view while the program runs: recording goes on. */
static void live_poll(run_t *s) {
    if (!s->live_ui || ml_viewer_live_open(s->live_ui)) return;
    ml_viewer_live_wait(s->live_ui);
    s->live_ui = NULL;
    fprintf(stderr, "memlens: view closed; recording %s until it exits (Ctrl-C stops it)\n", s->o.argv[0]);
}

/* The program has ended: the view shows the final data until q. */
static void live_end(run_t *s) {
    if (!s->live_model) return;
    int st = s->root_status;
    ml_vmodel_set_process_state(s->live_model, WIFSIGNALED(st) ? ML_VPROC_SIGNALED : ML_VPROC_EXITED,
                                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    if (s->live_ui) ml_viewer_live_wait(s->live_ui);
    s->live_ui = NULL;
}

/* ------------------------------------------------------------------------- */
/* Steps of the command                                                      */
/* ------------------------------------------------------------------------- */

/* Files earlier sessions left in /dev/shm when their memlens was killed. */
static void sweep_stale(const run_t *s) {
    uint64_t bytes;
    uint32_t files;
    if (ml_collector_sweep(&bytes, &files) < 0 || !files) return;
    char b[32];
    if (!s->o.quiet)
        fprintf(stderr,
                "memlens: removed %u file%s (%s) that killed memlens sessions left in /dev/shm\n",
                files, files > 1 ? "s" : "", ml_fmt_bytes(bytes, b, sizeof b));
}

/* The program, the library, and for --live the terminal and the model:
 * every refusal is said before the program starts. */
static int prepare(run_t *s) {
    int rc = resolve_program(s->o.argv[0], s->prog, sizeof s->prog);
    if (rc < 0) {
        /* As shells and env(1) say it: 127 not found, 126 not executable. */
        s->fail_code = rc == -ENOENT || rc == -ENOTDIR ? ML_EXIT_NOT_FOUND : ML_EXIT_CANNOT_EXEC;
        ml_cli_error("cannot run '%s': %s", s->o.argv[0], strerror(-rc));
        return -1;
    }
    if (!realpath(s->prog, s->prog_real)) s->prog_real[0] = '\0';
    const char *why = preload_obstacle(s->prog, 0);
    if (why) {
        ml_cli_error("%s", why);
        return -1;
    }
    if (ml_cli_find_preload_lib(s->lib, sizeof s->lib) < 0) {
        ml_cli_error("cannot find libmemlens.so beside the memlens binary (set ML_PRELOAD_LIB)");
        return -1;
    }
    if (!s->o.live) return 0;
    char why_live[512];
    if (ml_viewer_live_check(why_live, sizeof why_live) < 0) {
        ml_cli_error("%s", why_live);
        return -1;
    }
    if (ml_vmodel_new(&s->live_model) < 0) {
        ml_cli_error("out of memory");
        return -1;
    }
    return 0;
}

/* The collector and its sinks, in the order they see each batch: the trace
 * writer, the live view (which keeps the root's analysis), the analysis. */
static int start_collector(run_t *s) {
    ml_collector_opts_t co = {
        .follow_fork = s->o.follow_fork,
        .unwind_fp = s->o.unwind_fp,
        .unwind_verify = s->o.unwind_verify,
        .verify_out = s->o.quiet ? NULL : stderr,
        .snapshot = !s->o.no_snapshot,
        .sample_bytes = s->o.sample_bytes,
        .depth = s->o.depth,
        .ring_slots = s->o.ring_slots,
        .out_flags = s->o.out_flags,
        .quiet = s->o.quiet,
    };
    char err[512];
    if (ml_collector_new(&co, &s->c, err, sizeof err) < 0) {
        ml_cli_error("%s", err);
        return -1;
    }
    ml_sink_t sink;
    int rc = ml_trace_sink_new(&sink);
    if (rc == 0) s->trace_sink = sink;
    if (rc == 0) rc = ml_collector_add_sink(s->c, sink);
    if (rc == 0 && s->live_model) rc = ml_collector_add_sink(s->c, ml_cli_live_sink(s->live_model));
    if (rc == 0) rc = ml_analysis_sink_new(s->o.no_snapshot, &sink);
    if (rc == 0) rc = ml_collector_add_sink(s->c, sink);
    if (rc < 0) {
        ml_cli_error("%s", strerror(-rc));
        return -1;
    }
    return 0;
}

/* A process that sends the same stop signal twice within this time sent
 * it once to memlens and once to its process group: timeout(1) does, kill
 * of a pid and then of a group does. That is one request to stop, not the
 * second signal that means "stop waiting for the program". */
#define STOP_ECHO_NS 250000000ll

/* SIGINT, SIGTERM, SIGHUP: remembered, and passed on to the program when a
 * process sent them (kill, timeout(1)). A signal from the terminal (Ctrl-C,
 * a hang-up: si_code SI_KERNEL) reached the program's process group too,
 * and is not delivered twice; nor is the echo of a sender's signal to the
 * group (STOP_ECHO_NS), which the program got from the sender. */
static void on_stop(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    static pid_t last_pid;
    static int last_sig, last_kernel;
    static long long last_ns;
    bool kernel = si && si->si_code == SI_KERNEL;
    if (si && ((si->si_code <= 0 && si->si_pid > 0) || kernel)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long now = (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
        /* The echo of a sender's signal to the group, or a hang-up, which
         * comes twice: from the terminal (SI_KERNEL) and from the shell,
         * which sends SIGHUP to its jobs as it exits. Counted twice, it
         * stopped the wait for a program that was ending of it (closing
         * the terminal: the trace read "still running", a program that
         * frees and exits 7 on SIGHUP had no exit status). */
        bool echo = sig == last_sig && now - last_ns < STOP_ECHO_NS &&
                    ((!kernel && !last_kernel && si->si_pid == last_pid) || (sig == SIGHUP && kernel != last_kernel));
        last_pid = kernel ? 0 : si->si_pid;
        last_kernel = kernel;
        last_sig = sig;
        last_ns = now;
        if (echo) return;
    }
    if (!stop_sig) stop_sig = sig;
    if (stop_count < 100) stop_count++;
    /* A hang-up reaches only the session's leader, which passes it on to
     * its jobs (a shell does): when memlens leads the session (`setsid
     * memlens run`, `ssh host memlens run ...`), the program got none. */
    bool leader_hup = kernel && sig == SIGHUP && getsid(0) == getpid();
    if (child_pid > 0 && si && (!kernel || leader_hup)) kill(child_pid, sig);
}

/* SIGTSTP sent to memlens by a process (`kill -TSTP PID` of the job's
 * pid): passed on to the program, whose stop collect() then follows. One
 * from the terminal (Ctrl-Z) reached the program's group already. memlens
 * itself stops only when the program has (stop_like_the_program). */
static void on_tstp(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    int saved = errno;
    if (child_pid > 0 && si && si->si_code <= 0) kill(child_pid, sig);
    errno = saved;
}

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
/* The caller's SIGPIPE disposition: memlens ignores SIGPIPE (ml_cmd_run),
 * the program gets it back. */
static struct sigaction old_pipe, old_ttou, old_tstp;
#define NSTOP (sizeof stop_signals / sizeof stop_signals[0])

/* The caller's descriptor limit, when memlens raised its own soft limit to
 * the hard one (raise_nofile); the program gets it back before its exec. */
static struct rlimit old_nofile;
static bool nofile_raised;

/* Descriptors memlens holds to start one program, beside 0-2: the control
 * segment, the trace, and the two pipes of spawn() (ulimit -n 8 is the
 * smallest limit that runs). */
#define RUN_MIN_FDS 5

/* The collector holds two descriptors for each traced process alive (its
 * trace file and its pidfd), and one more while it maps a ring. Under the
 * usual soft limit of 1,024 (with a hard limit far above it), a program
 * with a few hundred processes alive at once under --follow-fork left
 * memlens without descriptors: "cannot open the event ring of process N
 * (Too many open files)", and those images ran untraced, though each
 * process of the program has a table of its own and ran fine alone. So
 * memlens raises its soft limit to the hard one, as long-running servers
 * do; the program's limit stays the caller's. */
static void raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max) return;
    old_nofile = rl;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0) nofile_raised = true;
}

/* The child waits on `go` until its trace file is open; exec failures come
 * back through the close-on-exec `err` pipe. It gets back the caller's
 * dispositions of the signals memlens catches or ignores. */
static __attribute__((noreturn)) void child(run_t *s, const struct sigaction *old_stop,
                                            const struct sigaction *old_quit) {
    (void)old_stop; /* restored by spawn(), before the signals were unblocked */
    sigaction(SIGQUIT, old_quit, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    sigaction(SIGXFSZ, &ml_cli_old_xfsz, NULL);
    sigaction(SIGTTOU, &old_ttou, NULL);
    sigaction(SIGTSTP, &old_tstp, NULL);
    if (nofile_raised) (void)setrlimit(RLIMIT_NOFILE, &old_nofile);
    close(s->go[1]);
    close(s->err[0]);
    char c;
    if (read(s->go[0], &c, 1) != 1) _exit(127);
    execve(s->prog, s->o.argv, s->env);
    int e = errno;
    ssize_t w = write(s->err[1], &e, sizeof e);
    (void)w;
    _exit(127);
}

/* Forks the program, held before exec until release_child(). From now on
 * memlens catches SIGINT, SIGTERM and SIGHUP (on_stop: the trace is saved,
 * then memlens dies of the same signal) and ignores SIGQUIT (the terminal
 * sends it to the program, whose core dump or exit ends the trace). */
static int spawn(run_t *s) {
    if (pipe2(s->go, O_CLOEXEC) < 0 || pipe2(s->err, O_CLOEXEC) < 0) {
        struct rlimit rl;
        if (errno == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0)
            /* `ulimit -n 5` sets the hard limit too: raise_nofile could not help. */
            ml_cli_error("too few file descriptors to start the program: the limit is %llu (ulimit -n) and "
                         "memlens needs about %d beside the standard three; raise it, or close descriptors "
                         "memlens inherited",
                         (unsigned long long)rl.rlim_cur, RUN_MIN_FDS);
        else
            ml_cli_error("pipe: %s", strerror(errno));
        return -1;
    }
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_stop[NSTOP], old_quit;
    struct sigaction stop = {.sa_sigaction = on_stop, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigemptyset(&stop.sa_mask);
    for (size_t i = 0; i < NSTOP; i++) sigaddset(&stop.sa_mask, stop_signals[i]);
    /* A signal ignored on entry stays ignored, as in a shell (a background
     * job of a script ignores SIGINT), for memlens and for the program. */
    for (size_t i = 0; i < NSTOP; i++) {
        sigaction(stop_signals[i], NULL, &old_stop[i]);
        if (old_stop[i].sa_handler != SIG_IGN) sigaction(stop_signals[i], &stop, NULL);
    }
    sigaction(SIGQUIT, &ign, &old_quit);
    /* A job-control shell's caller ignores SIGTSTP only for itself; when
     * it is ignored here, it stays so, for memlens and the program. */
    sigaction(SIGTSTP, NULL, &old_tstp);
    if (old_tstp.sa_handler != SIG_IGN) {
        struct sigaction tstp = {.sa_sigaction = on_tstp, .sa_flags = SA_SIGINFO | SA_RESTART};
        sigemptyset(&tstp.sa_mask);
        sigaction(SIGTSTP, &tstp, NULL);
    }
    /* Held until child_pid is known, so that none is lost or misdirected. */
    sigset_t block, prev;
    sigemptyset(&block);
    for (size_t i = 0; i < NSTOP; i++) sigaddset(&block, stop_signals[i]);
    sigprocmask(SIG_BLOCK, &block, &prev);
    fflush(NULL);
    s->pid = fork();
    if (s->pid < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, &prev, NULL);
        ml_cli_error("fork: %s", strerror(e));
        return -1;
    }
    if (s->pid == 0) {
        child_pid = 0;
        stop_sig = stop_count = 0;
        for (size_t i = 0; i < NSTOP; i++) sigaction(stop_signals[i], &old_stop[i], NULL);
        sigprocmask(SIG_SETMASK, &prev, NULL);
        child(s, old_stop, &old_quit);
    }
    child_pid = s->pid;
    sigprocmask(SIG_SETMASK, &prev, NULL);
    close(s->go[0]);
    close(s->err[1]);
    s->go[0] = s->err[1] = -1;
    return 0;
}

/* A default name nobody can pre-create: memlens.PROG.PID-RANDOM.mlt. */
void ml_cli_default_trace_name(char *out, size_t len, const char *prog, int pid) {
    static const char digits[] = "abcdefghijklmnopqrstuvwxyz234567";
    unsigned char r[6];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32;
        memcpy(r, &x, sizeof r);
    }
    char rnd[sizeof r + 1];
    for (size_t i = 0; i < sizeof r; i++) rnd[i] = digits[r[i] & 31];
    rnd[sizeof r] = '\0';
    const char *base = strrchr(prog, '/');
    base = base ? base + 1 : prog;
    snprintf(out, len, "memlens.%.64s.%d-%s.mlt", base, pid, rnd);
}

/* The root trace file: created (privately, under a temporary name) before
 * the program starts, so that an unwritable path fails before any work is
 * done. The collector takes it over and renames it into place at the end. */
static int open_root_trace(run_t *s) {
    unsigned flags = s->o.out_flags | ML_OUTFILE_KEEP;
    if (s->o.out) {
        snprintf(s->root_path, sizeof s->root_path, "%s", s->o.out);
    } else {
        ml_cli_default_trace_name(s->root_path, sizeof s->root_path, s->o.argv[0], (int)s->pid);
        flags = (flags & ML_OUTFILE_GROUP) | ML_OUTFILE_KEEP | ML_OUTFILE_NEW;
    }
    char err[PATH_MAX + 256];
    if (ml_outfile_open(&s->root_file, s->root_path, flags, err, sizeof err) < 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        ml_cli_error("%s", err);
        return -1;
    }
    ml_collector_root_t root = {s->pid,       s->root_path, &s->root_file,
                                s->prog_real, s->o.argc,    s->o.argv};
    ml_collector_set_root(s->c, &root);
    return 0;
}

/* Lets the program exec; fails when exec did. */
static int release_child(run_t *s) {
    if (write(s->go[1], "g", 1) != 1) { /* the child died: waitpid reports it */
    }
    close(s->go[1]);
    s->go[1] = -1;
    int e = 0;
    if (read(s->err[0], &e, sizeof e) == (ssize_t)sizeof e) {
        waitpid(s->pid, NULL, 0);
        /* The trace file is removed with the collector (never registered). */
        s->fail_code = e == ENOENT || e == ENOTDIR ? ML_EXIT_NOT_FOUND : ML_EXIT_CANNOT_EXEC;
        ml_cli_error("cannot run '%s': %s", s->prog, strerror(e));
        return -1;
    }
    return 0;
}

static uint64_t coarse_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The collector's priority while the program runs. A program with more
 * busy threads than CPUs leaves the collector a thread's share of them: with
 * 200 threads it ran between their bursts, the threads stampeded onto a
 * full ring, and 200 x 10 k malloc/free took 1.09 s; with the collector
 * first in line (SCHED_FIFO at the lowest real-time priority), 0.47 s
 * (docs/recorder.md). SCHED_RESET_ON_FORK: the program, forked before this,
 * and anything forked after run at their normal policy. Without the
 * privilege (CAP_SYS_NICE or RLIMIT_RTPRIO), or with ML_COLLECTOR_RT=0, the
 * collector stays a normal thread. Given back when the program has exited:
 * what follows (the snapshot, the summary) can take seconds and needs no
 * priority. */
static bool rt_raise(void) {
    if (!ml_option_bool(ML_ENV_COLLECTOR_RT)) return false;
    struct sched_param sp = {.sched_priority = 1};
    return sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0;
}

static void rt_drop(bool *rt) {
    if (!*rt) return;
    struct sched_param sp = {.sched_priority = 0};
    (void)sched_setscheduler(0, SCHED_OTHER, &sp);
    *rt = false;
}

/* Turns the collector's rounds until the program and every process it
 * started are finished. While events keep coming, the program is asked
 * about every WAIT_EVERY_MS, not after every round: a busy collector
 * turned 13,000 rounds on clang-format, and their wait4 calls were 3 % of
 * its time. Its exit is seen at the next idle round in any case. */
#define WAIT_EVERY_MS 10

/* The program ended, and processes it started run on and are traced
 * (--follow-fork): a daemon, a job left in the background. memlens waits
 * for them, as strace -f does; once they have run WAITING_NOTE_MS past the
 * program's end it says so, with how to stop waiting, rather than seem to
 * hang. */
#define WAITING_NOTE_MS 1000
#define WAITING_NOTE_PIDS 3

static void note_waiting(const run_t *s) {
    pid_t pids[WAITING_NOTE_PIDS];
    uint32_t n = ml_collector_running(s->c, pids, WAITING_NOTE_PIDS);
    if (!n) return;
    char status[48];
    int st = s->root_status;
    if (WIFSIGNALED(st)) snprintf(status, sizeof status, "was killed by signal %d", WTERMSIG(st));
    else snprintf(status, sizeof status, "exited with status %d", WEXITSTATUS(st));
    fprintf(stderr, "memlens: %s %s; %u process%s it started %s still running and traced: ", s->prog, status,
            n, n > 1 ? "es" : "", n > 1 ? "are" : "is");
    for (uint32_t i = 0; i < n && i < WAITING_NOTE_PIDS; i++) {
        char path[64], comm[32] = "";
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pids[i]);
        FILE *f = fopen(path, "re");
        if (f) {
            if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
            fclose(f);
        }
        char safe[sizeof comm + 1]; /* a name any process may set (prctl PR_SET_NAME) */
        fprintf(stderr, "%spid %d%s%s%s", i ? ", " : "", (int)pids[i], *comm ? " (" : "",
                ml_cli_safe(comm, safe, sizeof safe), *comm ? ")" : "");
    }
    if (n > WAITING_NOTE_PIDS) fprintf(stderr, " and %u more", n - WAITING_NOTE_PIDS);
    fprintf(stderr, ". memlens waits for %s; Ctrl-C or SIGTERM stops waiting and saves %s as recorded "
                    "so far\n",
            n > 1 ? "them" : "it", n > 1 ? "their traces" : "its trace");
}

static bool stopped_now(pid_t pid) {
    return ml_cli_proc_state(pid) == 'T';
}

/* While memlens is stopped with the program, a child of memlens watches
 * the program: once it runs again (or is gone) while memlens is still
 * stopped, memlens is continued too. A SIGCONT to the program's pid alone
 * (a debugger attaching to a program that stopped itself to wait for it,
 * `kill -CONT PID`) left memlens stopped for good, and the program's end
 * unrecorded. The watcher starts before memlens stops and acts only once
 * it has seen memlens stopped; it ends when memlens runs again. */
static pid_t stop_watcher(pid_t prog) {
    pid_t me = getpid();
    pid_t w = fork();
    if (w != 0) return w;
    bool seen = false;
    for (;;) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        char m = ml_cli_proc_state(me);
        if (getppid() != me || !m) _exit(0);
        if (m != 'T') {
            if (seen) _exit(0); /* continued with the program (fg, bg) */
            continue;
        }
        seen = true;
        if (ml_cli_proc_state(prog) != 'T') {
            kill(me, SIGCONT);
            _exit(0);
        }
    }
}

/* The program stopped: Ctrl-Z (the terminal stopped memlens' group, both),
 * a SIGTSTP it sent itself (ssh's ~^Z, a shell's `suspend`), SIGTTIN at a
 * terminal read in the background, SIGSTOP from outside. The shell that
 * started memlens waits on memlens, not on the program: memlens stops too,
 * with the same signal, so that the shell says "Stopped" and takes the
 * terminal back; `fg` and `bg` continue the whole group. Before, memlens
 * kept waiting for a program that was stopped, and the terminal stayed
 * with it (a `suspend` in `memlens run -- bash -i` left it to another
 * terminal to free). A report of a stop read after the group was
 * continued again is old news; when only memlens was continued (`kill
 * -CONT` of its pid), the program is continued too. */
static void stop_like_the_program(run_t *s, int sig) {
    if (!stopped_now(s->pid)) return;
    struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
    sigemptyset(&dfl.sa_mask);
    bool own = sig != SIGSTOP && sig != SIGKILL && sig > 0 && sig < NSIG;
    if (!own) sig = SIGSTOP;
    else sigaction(sig, &dfl, &old);
    sigset_t one, prev;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pid_t watcher = stop_watcher(s->pid);
    /* The live view gives the terminal back to the shell while stopped. */
    if (s->live_ui) ml_viewer_live_suspend(s->live_ui);
    pthread_sigmask(SIG_UNBLOCK, &one, &prev);
    raise(sig); /* returns once memlens is continued */
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    if (s->live_ui) ml_viewer_live_resume(s->live_ui);
    if (own) sigaction(sig, &old, NULL);
    if (watcher > 0) {
        kill(watcher, SIGKILL);
        waitpid(watcher, NULL, 0);
    }
    if (stopped_now(s->pid)) kill(s->pid, SIGCONT);
}

static void collect(run_t *s) {
    uint64_t asked = 0, root_end_ms = 0;
    bool rt = rt_raise(), noted = false;
    for (;;) {
        live_poll(s);
        uint64_t got = ml_collector_poll(s->c);
        uint64_t now = got ? coarse_ms() : 0;
        if (!s->root_exited && (!got || now - asked >= WAIT_EVERY_MS)) {
            asked = now;
            int st;
            struct rusage ru;
            pid_t w = wait4(s->pid, &st, WNOHANG | WUNTRACED, &ru);
            if (w == s->pid && WIFSTOPPED(st)) {
                stop_like_the_program(s, WSTOPSIG(st));
            } else if (w == s->pid) {
                s->root_exited = true;
                s->root_status = st;
                rt_drop(&rt);
                /* The kernel's high-water mark (ru_maxrss is in KiB on Linux). */
                ml_collector_root_maxrss(s->c, (uint64_t)ru.ru_maxrss * 1024);
                ml_collector_root_ended(s->c, st);
                root_end_ms = coarse_ms();
            }
        }
        if (ml_collector_reap(s->c)) break;
        if (s->root_exited && !noted && !s->o.quiet && coarse_ms() - root_end_ms >= WAITING_NOTE_MS) {
            noted = true;
            note_waiting(s);
        }
        /* A stop signal: once the program has ended (it got the signal
         * too), or at a second signal, processes still running are not
         * waited for: what they recorded is saved as it is. */
        if (stop_sig && (s->root_exited || stop_count > 1)) {
            rt_drop(&rt);
            ml_collector_stop(s->c);
            break;
        }
        if (!got) {
            struct timespec ts = {0, 500000};
            nanosleep(&ts, NULL);
        }
    }
    rt_drop(&rt);
}

/* The summary, and the exit code: the program's status, or ours when it
 * was never traced. */
/* Whether the program's first image got a trace (its slot was opened). */
static bool root_opened(const run_t *s) {
    uint32_t n = ml_collector_nprocs(s->c);
    for (uint32_t i = 0; i < n; i++) {
        const ml_proc_info_t *p = ml_collector_proc(s->c, i);
        if (p && p->is_root) return true;
    }
    return false;
}

static int report(run_t *s) {
    if (!ml_collector_root_traced(s->c) || (ml_collector_root_refused(s->c) && !root_opened(s))) {
        /* The program never registered: it could not be preloaded. Its
         * trace file is removed by ml_collector_free. */
        if (ml_collector_root_refused(s->c))
            fprintf(stderr,
                    "memlens: error: %s ran but could not be recorded (the message above says "
                    "why); no trace written\n",
                    s->prog);
        else if (stop_sig)
            /* Stopped in its first milliseconds, before libmemlens.so had
             * started in it: not a sign of a static program. */
            fprintf(stderr,
                    "memlens: %s was stopped by %s before it was traced (libmemlens.so had not "
                    "started in it yet, or could not be loaded); no trace written\n",
                    s->prog, strsignal(stop_sig));
        else
            fprintf(stderr,
                    "memlens: error: %s ran but was never traced: libmemlens.so was not loaded "
                    "into it (a static or set-user-ID program behind a script?); no trace written\n",
                    s->prog);
        return ML_EXIT_ERROR;
    }
    if (!s->o.quiet) print_summary(s);
    uint32_t refused = ml_collector_procs_refused(s->c);
    if (refused)
        fprintf(stderr,
                "memlens: warning: %u process image%s ran untraced: a session traces at most %u, and "
                "only while /dev/shm has room for its table\n",
                refused, refused > 1 ? "s" : "", ML_MAX_PROCS);
    uint32_t failed = ml_collector_procs_failed(s->c);
    if (failed)
        fprintf(stderr,
                "memlens: warning: %u process image%s could not be recorded and ran untraced (why: the "
                "messages above, or the warnings in the trace of the image that started it)\n",
                failed, failed > 1 ? "s" : "");
    int st = s->root_status;
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

static void close_pipes(run_t *s) {
    for (int i = 0; i < 2; i++) {
        if (s->go[i] >= 0) close(s->go[i]);
        if (s->err[i] >= 0) close(s->err[i]);
    }
}

/* With everything saved and /dev/shm clean, memlens dies of a signal
 * where the caller would have seen one without it:
 *   - after a stop signal (SIGINT, SIGTERM, SIGHUP), that signal, so that a
 *     calling script stops as it would without memlens. A program that
 *     handled or ignored the signal and then exited (a server that shuts
 *     down cleanly on SIGTERM, a job that ignores SIGHUP, a SIGINT caught
 *     as a shell does) gives memlens its status instead: without memlens,
 *     the caller would have seen that status, not the signal (a SIGTERM
 *     handler's `exit 5` read as "killed by SIGTERM" before). A second
 *     signal, which stops memlens waiting, still kills it.
 *   - when the program was killed by a signal (SIGSEGV, SIGABRT, SIGKILL),
 *     that signal, as valgrind does: a parent's waitpid saw "exited with
 *     139" where it sees "killed by SIGSEGV" without memlens (a test runner
 *     reports a crash, a shell prints "Segmentation fault"). memlens makes
 *     itself non-dumpable first: a core of its own would be no use, and
 *     with core_pattern "core" would replace the program's. */
static void die_like_the_program(const run_t *s, int code) {
    int sig = stop_sig;
    if (!sig) {
        if (!s->root_exited || !WIFSIGNALED(s->root_status) || code != 128 + WTERMSIG(s->root_status)) return;
        sig = WTERMSIG(s->root_status);
        struct rlimit none = {0, 0};
        (void)setrlimit(RLIMIT_CORE, &none);
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    } else if (s->root_exited && !WIFSIGNALED(s->root_status) && stop_count < 2) {
        return;
    }
    fflush(NULL);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
}

/* ------------------------------------------------------------------------- */
/* The command                                                               */
/* ------------------------------------------------------------------------- */

int ml_cmd_run(int argc, char **argv) {
    int code = ML_EXIT_ERROR;
    run_t *s = calloc(1, sizeof *s);
    if (!s) goto out;
    s->go[0] = s->go[1] = s->err[0] = s->err[1] = -1;
    /* memlens writes its summary and warnings to stderr, which is often a
     * pipe (`memlens run ... 2>&1 | head`). A reader gone before memlens'
     * last line must not kill it with SIGPIPE: that left the session's
     * files in /dev/shm and made memlens' status 141 instead of the
     * program's. A failed write to stderr is dropped. */
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old_pipe);
    /* Nor may writing them stop memlens: run in the background of a
     * terminal set to `stty tostop`, memlens was stopped by SIGTTOU at its
     * summary, after a program that wrote nothing had ended, and the job
     * read "Stopped (tty output)" with the session's files in /dev/shm until
     * `fg`. The program gets the caller's disposition back. */
    sigaction(SIGTTOU, &ign, &old_ttou);
    raise_nofile();
    if (parse_run(argc, argv, &s->o) < 0) {
        code = ML_EXIT_USAGE;
        goto free_run;
    }
    sweep_stale(s);
    if (prepare(s) < 0) {
        if (s->fail_code) code = s->fail_code;
        goto free_model;
    }
    if (start_collector(s) < 0) goto free_collector;
    if (build_env(s) < 0) {
        ml_cli_error("out of memory");
        goto free_collector;
    }
    if (spawn(s) < 0) goto close_pipes;
    if (open_root_trace(s) < 0) goto close_pipes;
    if (release_child(s) < 0) {
        if (s->fail_code) code = s->fail_code;
        goto close_pipes;
    }
    live_start(s);
    collect(s);
    live_end(s);
    code = report(s);
    if (stop_sig && code != ML_EXIT_ERROR && !s->o.quiet)
        fprintf(stderr, "memlens: stopped by %s; the traces are saved\n", strsignal(stop_sig));
close_pipes:
    close_pipes(s);
    free_env(s);
free_collector:
    ml_collector_free(s->c);
free_model:
    ml_vmodel_free(s->live_model);
free_run:
    die_like_the_program(s, code);
    free(s);
out:
    return code;
}
