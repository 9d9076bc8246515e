/* exec.c - exec is followed: when the traced process replaces its image
 * (execve and the rest of the family), the new image is traced too.
 *
 * Our variables (LD_PRELOAD naming libmemlens.so, ML_CTL, ML_LD_PRELOAD_ORIG)
 * leave `environ` at start-up unless --follow-fork is given (runtime.c), so
 * that children we do not follow start exactly as they would without
 * memlens. A launcher (`sh -c 'exec prog'`, a pyenv shim, a wrapper script)
 * would then hide the program it starts: the kernel hands the new image the
 * cleaned environment. So each exec function is hooked here, and an exec of
 * the traced process itself gets the environment it was given with our
 * variables put back; exec in a child (forked or vforked, not followed) is
 * left alone: getpid() differs from the pid this image registered with.
 *
 * glibc's exec functions call its internal execve directly, never through
 * the PLT, so hooking execve alone would miss execvp, execl and the others:
 * each is hooked and funnels into exec_with_env(). posix_spawn makes a new
 * process (not an exec of this one) and calls the internal execve too: it
 * is not followed without --follow-fork, as fork is not.
 *
 * With --follow-fork, a child started without a fork memlens sees is
 * followed as a forked one is: posix_spawn and posix_spawnp are hooked
 * (spawn_with_env), and an exec in a vfork child (getpid() differs, the
 * state is still this image's READY: it shares our memory) is handled in
 * exec_with_env. Both put our variables back into the environment the
 * program chose, as a followed fork child's exec does, and check the
 * program: one the loader will not preload us into is said (an
 * ML_BLOB_UNTRACED blob in this image's ring, which the collector prints),
 * never silently left untraced.
 *
 * Nothing here allocates with malloc: exec runs in vfork children and after
 * fork in threaded programs, where malloc may deadlock. The new environment
 * lives in memory of our own (mmap), given back when the exec fails.
 */
#define _GNU_SOURCE
#include "interpose_internal.h"
#include "../trace/ml_options.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <elf.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);

/* ------------------------------------------------------------------------- */
/* The environment of the new image                                          */
/* ------------------------------------------------------------------------- */

static bool env_is(const char *entry, const char *name, size_t n) {
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

/* The exec is one of the traced process replacing itself: recording, and
 * not a (v)forked child that shares our memory but is not followed. */
static bool follows_this_exec(void) {
    if (ml__state_acquire() != ML_STATE_READY || !ml__ring || !ml__ctl) return false;
    return (uint32_t)syscall(SYS_getpid) == ml__ring->pid;
}

/* The exec is one of a child that shares this image's memory (vfork, or
 * clone with CLONE_VM): such a child has our state and ring, not our pid.
 * Under --follow-fork it is followed, as a forked child's exec is. */
static bool vfork_child(void) {
    if (ml__state_acquire() != ML_STATE_READY || !ml__ring || !ml__ctl) return false;
    return (uint32_t)syscall(SYS_getpid) != ml__ring->pid;
}

/* The path of this library, as the loader knows it. */
static const char *self_path(void) {
    Dl_info di;
    if (!dladdr((void *)follows_this_exec, &di) || !di.dli_fname || !*di.dli_fname) return NULL;
    return di.dli_fname;
}

enum { VIA_EXECVE, VIA_EXECVPE, VIA_FEXECVE, VIA_EXECVEAT };

typedef struct {
    char **envp; /* the new environment, NULL-terminated */
    void *mem;   /* what holds it (mmap) */
    size_t len;
} new_env_t;

static void put(char **w, const char *a, const char *b, const char *c, const char *d) {
    char *p = *w;
    for (const char *s[] = {a, b, c, d}, **q = s; q < s + 4; q++) {
        if (!*q) continue;
        size_t n = strlen(*q);
        memcpy(p, *q, n);
        p += n;
    }
    *p++ = '\0';
    *w = p;
}

/* envp with LD_PRELOAD = libmemlens.so[:the preloads envp asks for],
 * ML_LD_PRELOAD_ORIG = those preloads (restored in the new image when our
 * variables are removed again; only when envp has LD_PRELOAD, even empty)
 * and ML_CTL = this session: env_plan measures it, env_fill writes it into
 * memory of env_plan's size. */
typedef struct {
    const char *ctl, *lib, *user_preload;
    const char *cuda; /* CUDA_INJECTION64_PATH to add (envp has none), or NULL */
    size_t n;         /* entries of envp */
    bool had_preload;
    bool append; /* LD_PRELOAD = the preloads envp asks for, then libmemlens.so */
} env_plan_t;

/* Whether the LD_PRELOAD list `list` (separated by colons or spaces, as the
 * loader reads it) has the entry lib. */
static bool preload_names(const char *list, const char *lib, size_t lib_len) {
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ": ");
        if (k == lib_len && !strncmp(p, lib, lib_len)) return true;
        p += k;
        if (*p) p++;
    }
    return false;
}

/* The bytes the new environment takes, 0 when there is nothing to do (envp
 * names this session already, or we cannot tell our own path). */
static size_t env_plan(char *const envp[], env_plan_t *pl) {
    const char *ctl = ml_option_str(ML_ENV_CTL), *lib = self_path();
    if (!ctl || !*ctl || !lib) return 0;
    size_t n = 0, ctl_len = strlen(ctl), lib_len = strlen(lib);
    const char *user_preload = "";
    bool had_preload = false, ctl_there = false, cuda_there = false;
    for (char *const *e = envp; e && *e; e++, n++) {
        if (env_is(*e, "CUDA_INJECTION64_PATH", 21)) cuda_there = true;
        if (env_is(*e, "ML_CTL", 6) && !strcmp(*e + 7, ctl)) ctl_there = true;
        if (env_is(*e, "LD_PRELOAD", 10)) {
            user_preload = *e + 11;
            had_preload = true;
        }
    }
    /* An LD_PRELOAD that already names us first keeps the rest. */
    bool lib_first =
        !strncmp(user_preload, lib, lib_len) && (user_preload[lib_len] == ':' || !user_preload[lib_len]);
    /* Already there, unless the program took us out of LD_PRELOAD (unset
     * it, emptied it, or set it to a list without us) and kept ML_CTL: the
     * new image ran without memlens, untraced, and unsaid when it was
     * quick (the collector names such an exec after a second). Then we go
     * at the end of its list: what the program put there stays ahead of
     * us, as a list that still names us after another allocator does (that
     * one is named in the run summary, runtime.c). */
    bool append = false;
    if (ctl_there) {
        if (preload_names(user_preload, lib, lib_len)) return 0;
        append = true;
    } else if (lib_first) {
        user_preload += lib_len + (user_preload[lib_len] == ':');
    }
    /* The CUPTI collector too: `memlens run -- sh -c 'exec python
     * train.py'` (a wrapper script, a shim) recorded the new image's CPU
     * allocations and, silently, none of its GPU ones. A variable envp has
     * (the user's, or ours) is left as it is. */
    const char *cuda = cuda_there ? NULL : ml__cuda_injection();
    size_t up_len = strlen(user_preload);
    size_t strings = sizeof "LD_PRELOAD=" + lib_len + 1 + up_len + sizeof "ML_LD_PRELOAD_ORIG=" +
                     up_len + sizeof "ML_CTL=" + ctl_len + (cuda ? sizeof "CUDA_INJECTION64_PATH=" + strlen(cuda) : 0);
    *pl = (env_plan_t){ctl, lib, user_preload, cuda, n, had_preload, append};
    return (n + 5) * sizeof(char *) + strings;
}

static char **env_fill(char *const envp[], const env_plan_t *pl, void *mem) {
    char **v = mem, *w = (char *)mem + (pl->n + 5) * sizeof(char *);
    size_t k = 0;
    for (char *const *e = envp; e && *e; e++)
        if (!env_is(*e, "LD_PRELOAD", 10) && !env_is(*e, "ML_CTL", 6) &&
            !env_is(*e, "ML_LD_PRELOAD_ORIG", 18))
            v[k++] = *e;
    v[k++] = w;
    if (pl->append)
        put(&w, "LD_PRELOAD=", pl->user_preload, *pl->user_preload ? ":" : NULL, pl->lib);
    else
        put(&w, "LD_PRELOAD=", pl->lib, *pl->user_preload ? ":" : NULL, pl->user_preload);
    if (pl->had_preload) {
        v[k++] = w;
        put(&w, "ML_LD_PRELOAD_ORIG=", pl->user_preload, NULL, NULL);
    }
    v[k++] = w;
    put(&w, "ML_CTL=", pl->ctl, NULL, NULL);
    if (pl->cuda) {
        v[k++] = w;
        put(&w, "CUDA_INJECTION64_PATH=", pl->cuda, NULL, NULL);
    }
    v[k] = NULL;
    return v;
}

/* The new environment in memory of our own (mmap; out->mem is to be
 * unmapped). Returns false (and leaves envp to be used as it is) when there
 * is nothing to do or no memory for it. */
static bool build_env(char *const envp[], new_env_t *out) {
    env_plan_t pl;
    size_t len = env_plan(envp, &pl);
    void *mem = len ? ml__raw_alloc_unlisted(len) : NULL;
    if (!mem) return false;
    *out = (new_env_t){env_fill(envp, &pl, mem), mem, len};
    return true;
}

/* ------------------------------------------------------------------------- */
/* Programs the loader will not preload us into                              */
/* ------------------------------------------------------------------------- */

/* An exec memlens cannot follow is said in the run summary, not left
 * silent: before the exec, the reason goes into the ring header
 * (exec_untraced), which the collector prints when this image ends with no
 * traced image after it. The checks are those of `memlens run` for the
 * program it starts (cli/run.c): a set-user-ID or set-group-ID program
 * whose IDs differ from ours (the loader runs it in secure-execution mode
 * and ignores LD_PRELOAD), or an ELF program without PT_INTERP (static: no
 * loader at all); a "#!" script is judged by its interpreter. */

static void note_cat(char *out, size_t cap, size_t *len, const char *s) {
    for (; *s && *len + 1 < cap; s++) out[(*len)++] = *s;
    out[*len] = '\0';
}

static void note_num(char *out, size_t cap, size_t *len, uint64_t v) {
    char num[24], *e = num + sizeof num;
    *--e = '\0';
    do *--e = (char)('0' + v % 10), v /= 10; while (v);
    note_cat(out, cap, len, e);
}

/* Writes why the program at path cannot be traced into out (empty: it can,
 * or it cannot be read: the exec will say). */
static void obstacle(int dirfd, const char *path, char *out, size_t cap, int depth) {
    out[0] = '\0';
    int fd;
    if (path[0]) {
        fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    } else { /* fexecve: the file the descriptor names */
        char proc[32] = "/proc/self/fd/";
        size_t pl = strlen(proc);
        note_num(proc, sizeof proc, &pl, (unsigned)dirfd);
        fd = open(proc, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) return;
    size_t len = 0;
    const char *name = path[0] ? path : "the program";
    struct stat st;
    struct statvfs sv;
    /* On a file system mounted nosuid the bits do nothing. */
    bool nosuid = fstatvfs(fd, &sv) == 0 && (sv.f_flag & ST_NOSUID);
    if (fstat(fd, &st) == 0 && !nosuid &&
        (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
         ((st.st_mode & S_ISGID) && st.st_gid != getegid()))) {
        close(fd);
        note_cat(out, cap, &len, name);
        note_cat(out, cap, &len, st.st_mode & S_ISUID ? " is set-user-ID" : " is set-group-ID");
        note_cat(out, cap, &len, " (the dynamic loader ignores LD_PRELOAD for it)");
        return;
    }
    unsigned char buf[4096];
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    close(fd);
    if (n >= 2 && buf[0] == '#' && buf[1] == '!') {
        if (depth) return;
        char interp[PATH_MAX];
        ssize_t i = 2, j = 0;
        while (i < n && (buf[i] == ' ' || buf[i] == '\t')) i++;
        while (i < n && buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && j < PATH_MAX - 1)
            interp[j++] = (char)buf[i++];
        interp[j] = '\0';
        if (j) obstacle(AT_FDCWD, interp, out, cap, 1);
        return;
    }
    if (n < (ssize_t)sizeof(Elf64_Ehdr) || memcmp(buf, ELFMAG, SELFMAG) != 0 ||
        buf[EI_CLASS] != ELFCLASS64)
        return;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
    if (eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > (uint64_t)n) return;
    for (int i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(buf + eh->e_phoff + i * sizeof(Elf64_Phdr));
        if (ph->p_type == PT_INTERP) return;
    }
    note_cat(out, cap, &len, name);
    note_cat(out, cap, &len, " is statically linked (no dynamic loader to preload libmemlens.so)");
}

/* The file execvp would run for `file`: itself when it holds a '/', else the
 * first executable one along PATH (glibc's default path when unset). */
static const char *search_path(const char *file, char *buf, size_t cap) {
    if (strchr(file, '/')) return file;
    const char *path = ml_getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    size_t fl = strlen(file);
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t dl = end ? (size_t)(end - p) : strlen(p);
        if (dl + 1 + fl + 1 <= cap) {
            memcpy(buf, dl ? p : ".", dl ? dl : 1);
            size_t k = dl ? dl : 1;
            buf[k] = '/';
            memcpy(buf + k + 1, file, fl + 1);
            if (access(buf, X_OK) == 0) return buf;
        }
        if (!end) return NULL;
        p = end;
    }
}

/* Why the new image, in the process as it is now, could not join the
 * session, into out (empty: it could). It opens the control file and its
 * ring beside it, and the loader reads libmemlens.so, all with the
 * process' IDs, root and mount namespace at the exec: a server that
 * dropped root (setresuid to nobody) and then exec'd, or a program that
 * entered a chroot or a mount namespace with its own /dev/shm, ran the new
 * image untraced while the trace said the old one had exited (its live
 * blocks definite leaks, unscanned, and `--fail-on-leak` failing), with
 * nothing said but the new image's warning in the program's stderr. The
 * ring needs the file size limit too (`ulimit -f` in a script). */
/* 0 when the new image will be able to open path for `want` (R_OK, W_OK),
 * else an errno. A process that is not root after the exec has no
 * capabilities then (the kernel drops them at an exec by a user other than
 * root, unless they are ambient), while now it may still hold them:
 * setpriv keeps them across its setresuid until its exec, and access()
 * would answer as they allow. Such a process is judged by the file's mode
 * bits alone. An ambient CAP_DAC_OVERRIDE makes this say no where the
 * image then registers after all; the collector goes by that image. */
static int may_open(const char *path, int want) {
    if (faccessat(AT_FDCWD, path, want, AT_EACCESS) < 0) return errno;
    uid_t uid = geteuid();
    if (uid == 0) return 0;
    struct stat st;
    if (stat(path, &st) < 0) return errno;
    int shift = 0; /* other */
    if (st.st_uid == uid) {
        shift = 6;
    } else {
        gid_t groups[64];
        int n = getgroups(64, groups);
        bool in = st.st_gid == getegid();
        for (int i = 0; i < n && !in; i++) in = groups[i] == st.st_gid;
        if (in) shift = 3;
    }
    unsigned bits = (unsigned)(st.st_mode >> shift) & 7u;
    if (((want & R_OK) && !(bits & 4)) || ((want & W_OK) && !(bits & 2))) return EACCES;
    return 0;
}

static void join_obstacle(char *out, size_t cap) {
    const char *ctl = ml_option_str(ML_ENV_CTL), *lib = self_path();
    size_t len = 0;
    const char *what = NULL, *file = NULL;
    int e = 0;
    if (ctl && *ctl && (e = may_open(ctl, R_OK | W_OK))) {
        what = "memlens' session file ", file = ctl;
    } else if (lib && (e = may_open(lib, R_OK))) {
        what = "libmemlens.so at ", file = lib;
    }
    if (what) {
        note_cat(out, cap, &len, "it cannot reach ");
        note_cat(out, cap, &len, what);
        note_cat(out, cap, &len, file);
        if (e == EACCES || e == EPERM) {
            note_cat(out, cap, &len, " as user ");
            note_num(out, cap, &len, geteuid());
            note_cat(out, cap, &len, " (permission denied)");
        } else {
            note_cat(out, cap, &len, " (not there: another root or mount namespace?)");
        }
        return;
    }
    struct rlimit fsize;
    if (ml__ctl && getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
        fsize.rlim_cur < ml_ring_bytes(ml__ctl->ring_slots))
        note_cat(out, cap, &len, "its file size limit (ulimit -f) is below the size of memlens' event ring");
}

/* Why the program an exec through `via` would run cannot be traced, into
 * out (empty: it can). */
static void exec_obstacle(int via, int fd, const char *path, char *out, size_t cap) {
    char found[PATH_MAX];
    out[0] = '\0';
    switch (via) {
    case VIA_EXECVE: obstacle(AT_FDCWD, path, out, cap, 0); break;
    case VIA_EXECVPE: {
        const char *f = search_path(path, found, sizeof found);
        if (f) obstacle(AT_FDCWD, f, out, cap, 0);
        break;
    }
    case VIA_FEXECVE: obstacle(fd, "", out, cap, 0); break;
    default: obstacle(fd, path, out, cap, 0); break;
    }
    if (!out[0]) join_obstacle(out, cap);
}

/* This process' VmHWM in bytes from /proc/self/status, read in small
 * pieces (an exec may come from a signal handler on a small stack), or 0. */
static uint64_t own_hwm(void) {
    int fd = (int)syscall(SYS_open, "/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[256];
    size_t len = 0;
    uint64_t kib = 0;
    bool found = false;
    for (;;) {
        ssize_t r = syscall(SYS_read, fd, buf + len, sizeof buf - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
        buf[len] = '\0';
        char *h = strstr(buf, "VmHWM:");
        if (h && strchr(h, '\n')) {
            for (h += 6; *h == ' ' || *h == '\t'; h++) {}
            for (; *h >= '0' && *h <= '9'; h++) kib = kib * 10 + (uint64_t)(*h - '0');
            found = true;
            break;
        }
        /* Keep the last line's start (the field may straddle two reads). */
        char *nl = strrchr(buf, '\n');
        size_t keep = nl ? len - (size_t)(nl + 1 - buf) : (len > 16 ? 16 : len);
        memmove(buf, buf + len - keep, keep);
        len = keep;
    }
    syscall(SYS_close, fd);
    return found ? kib * 1024 : 0;
}

/* Before a followed exec, in the ring header: the reason the new image
 * will not be traced (or nothing), and this image's VmHWM, which the
 * kernel starts again for the next program. */
static void note_exec(int via, int fd, const char *path) {
    exec_obstacle(via, fd, path, ml__ring->exec_untraced, sizeof ml__ring->exec_untraced);
    ml_atomic_store_release(&ml__ring->exec_hwm, own_hwm());
}

/* A child of this image (pid) runs a program memlens cannot follow, `why`
 * (or, with ML_UNTRACED_CANCEL, it does not after all): an
 * ML_BLOB_UNTRACED blob in this image's ring, for the collector to say. */
static void note_untraced(uint32_t pid, uint16_t op, uint16_t via, const char *why) {
    struct {
        ml_blob_untraced_t u;
        char why[ML_UNTRACED_REASON_MAX];
    } b;
    b.u = (ml_blob_untraced_t){pid, op, via};
    size_t n = op == ML_UNTRACED_SAID ? strnlen(why, sizeof b.why) : 0;
    memcpy(b.why, why, n);
    ml__emit_blob(ML_BLOB_UNTRACED, &b, (uint32_t)(sizeof b.u + n));
}

/* ------------------------------------------------------------------------- */
/* The hooks                                                                 */
/* ------------------------------------------------------------------------- */

static void *_Atomic real_execve, *_Atomic real_execvpe, *_Atomic real_fexecve, *_Atomic real_execveat;

/* The environment a vfork child builds lives on its stack, up to this
 * size; a larger one (thousands of variables, and no ML_CTL of ours among
 * them) is passed as the program gave it. */
#define VFORK_ENV_MAX (32 * 1024)

/* Every exec function ends here with the environment the program chose. */
static int exec_with_env(int via, int fd, const char *path, char *const argv[], char *const envp[],
                         int flags) {
    new_env_t ne = {NULL, NULL, 0};
    char *const *env = envp;
    bool follow = follows_this_exec();
    bool shared = !follow && vfork_child();
    bool vchild = shared && (ml__ctl->options & ML_OPT_FOLLOW_FORK);
    if (shared && !vchild) ml__note_unfollowed_child(); /* counted for the run summary */
    char why[ML_UNTRACED_REASON_MAX];
    why[0] = '\0';
    if (follow) {
        ml__tls.guard++;
        note_exec(via, fd, path);
        ml__tls.guard--;
    }
    if (follow && build_env(envp, &ne)) env = ne.envp;
    if (vchild) {
        /* The guard is this thread's of the parent (we share its memory and
         * TLS): it is lowered again before the exec, which may not return. */
        ml__tls.guard++;
        exec_obstacle(via, fd, path, why, sizeof why);
        if (why[0]) note_untraced((uint32_t)syscall(SYS_getpid), ML_UNTRACED_SAID, ML_UNTRACED_VIA_VFORK, why);
        ml__tls.guard--;
        /* Not mapped: a mapping made here would stay in the parent after
         * the exec. On this stack, which the exec discards. */
        env_plan_t pl;
        size_t len = env_plan(envp, &pl);
        if (len && len <= VFORK_ENV_MAX) env = env_fill(envp, &pl, __builtin_alloca(len));
    }
    int rc = -1;
    switch (via) {
    case VIA_EXECVE: {
        execve_fn f = (execve_fn)ml__next_symbol(&real_execve, "execve");
        rc = f ? f(path, argv, env) : (errno = ENOSYS, -1);
        break;
    }
    case VIA_EXECVPE: {
        execvpe_fn f = (execvpe_fn)ml__next_symbol(&real_execvpe, "execvpe");
        rc = f ? f(path, argv, env) : (errno = ENOSYS, -1);
        break;
    }
    case VIA_FEXECVE: {
        fexecve_fn f = (fexecve_fn)ml__next_symbol(&real_fexecve, "fexecve");
        rc = f ? f(fd, argv, env) : (errno = ENOSYS, -1);
        break;
    }
    default: {
        execveat_fn f = (execveat_fn)ml__next_symbol(&real_execveat, "execveat");
        rc = f ? f(fd, path, argv, env, flags) : (errno = ENOSYS, -1);
        break;
    }
    }
    /* Still here: the exec failed, and the program goes on as it was. */
    if (follow) {
        ml__ring->exec_untraced[0] = '\0';
        ml_atomic_store_release(&ml__ring->exec_hwm, 0);
    }
    if (vchild && why[0]) {
        int e = errno;
        ml__tls.guard++;
        note_untraced((uint32_t)syscall(SYS_getpid), ML_UNTRACED_CANCEL, ML_UNTRACED_VIA_VFORK, "");
        ml__tls.guard--;
        errno = e;
    }
    if (ne.mem) {
        int e = errno;
        if (ml__real.munmap) ml__real.munmap(ne.mem, ne.len);
        errno = e;
    }
    return rc;
}

ML_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    return exec_with_env(VIA_EXECVE, -1, path, argv, envp, 0);
}

ML_EXPORT int execv(const char *path, char *const argv[]) {
    return exec_with_env(VIA_EXECVE, -1, path, argv, environ, 0);
}

ML_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    return exec_with_env(VIA_EXECVPE, -1, file, argv, envp, 0);
}

ML_EXPORT int execvp(const char *file, char *const argv[]) {
    return exec_with_env(VIA_EXECVPE, -1, file, argv, environ, 0);
}

ML_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
    return exec_with_env(VIA_FEXECVE, fd, NULL, argv, envp, 0);
}

ML_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags) {
    return exec_with_env(VIA_EXECVEAT, dirfd, path, argv, envp, flags);
}

/* execl, execle, execlp: the arguments into an array on the stack (as
 * glibc does), then the v form. */
#define COUNT_ARGS(arg0, n)                                                                        \
    do {                                                                                           \
        va_list ap_;                                                                               \
        va_start(ap_, arg0);                                                                       \
        n = 1;                                                                                     \
        while (va_arg(ap_, const char *)) n++;                                                     \
        va_end(ap_);                                                                               \
    } while (0)

/* argv[0..n] from arg and the variadic arguments (argv[n] is their NULL). */
static void fill_args(char **argv, size_t n, const char *arg, va_list *ap) {
    argv[0] = (char *)arg;
    for (size_t i = 1; i <= n; i++) argv[i] = va_arg(*ap, char *);
}

ML_EXPORT int execl(const char *path, const char *arg, ...) {
    size_t n;
    COUNT_ARGS(arg, n);
    char *argv[n + 1];
    va_list ap;
    va_start(ap, arg);
    fill_args(argv, n, arg, &ap);
    va_end(ap);
    return exec_with_env(VIA_EXECVE, -1, path, argv, environ, 0);
}

ML_EXPORT int execlp(const char *file, const char *arg, ...) {
    size_t n;
    COUNT_ARGS(arg, n);
    char *argv[n + 1];
    va_list ap;
    va_start(ap, arg);
    fill_args(argv, n, arg, &ap);
    va_end(ap);
    return exec_with_env(VIA_EXECVPE, -1, file, argv, environ, 0);
}

ML_EXPORT int execle(const char *path, const char *arg, ...) {
    size_t n;
    COUNT_ARGS(arg, n);
    char *argv[n + 1];
    va_list ap;
    va_start(ap, arg);
    fill_args(argv, n, arg, &ap);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return exec_with_env(VIA_EXECVE, -1, path, argv, envp, 0);
}

/* ------------------------------------------------------------------------- */
/* posix_spawn                                                               */
/* ------------------------------------------------------------------------- */

/* glibc's posix_spawn and posix_spawnp start the child with
 * clone(CLONE_VM | CLONE_VFORK) and exec in it through the internal execve:
 * no atfork handler and no exec hook of ours runs. Without --follow-fork
 * they pass straight through (the environment was cleaned at start: the
 * child runs as it would without memlens). With it, the child is followed
 * as a forked child's exec is: the environment the program chose gets our
 * variables back (build_env), and a program the loader will not preload us
 * into is said (ML_BLOB_UNTRACED with the child's pid), once the spawn has
 * succeeded: glibc reports a failed exec as the spawn's error. posix_spawnp
 * searches the PATH of this process, as glibc does. */
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);
static void *_Atomic real_posix_spawn, *_Atomic real_posix_spawnp;

static int spawn_with_env(bool search, pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    spawn_fn f = search ? (spawn_fn)ml__next_symbol(&real_posix_spawnp, "posix_spawnp")
                        : (spawn_fn)ml__next_symbol(&real_posix_spawn, "posix_spawn");
    if (!f) return ENOSYS;
    bool recording = follows_this_exec();
    if (!recording || !(ml__ctl->options & ML_OPT_FOLLOW_FORK)) {
        int rc = f(pid, file, fa, attr, argv, envp);
        if (rc == 0 && recording) ml__note_unfollowed_child(); /* counted for the run summary */
        return rc;
    }
    char why[ML_UNTRACED_REASON_MAX];
    new_env_t ne = {NULL, NULL, 0};
    char *const *env = envp;
    ml__tls.guard++;
    exec_obstacle(search ? VIA_EXECVPE : VIA_EXECVE, -1, file, why, sizeof why);
    if (build_env(envp, &ne)) env = ne.envp;
    ml__tls.guard--;
    pid_t child = 0;
    int rc = f(&child, file, fa, attr, argv, env);
    if (rc == 0 && pid) *pid = child;
    if (rc == 0 && why[0] && ml__state_acquire() == ML_STATE_READY) {
        ml__tls.guard++;
        note_untraced((uint32_t)child, ML_UNTRACED_SAID,
                      search ? ML_UNTRACED_VIA_POSIX_SPAWNP : ML_UNTRACED_VIA_POSIX_SPAWN, why);
        ml__tls.guard--;
    }
    if (ne.mem && ml__real.munmap) {
        int e = errno;
        ml__real.munmap(ne.mem, ne.len);
        errno = e;
    }
    return rc;
}

ML_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    return spawn_with_env(false, pid, path, fa, attr, argv, envp);
}

ML_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    return spawn_with_env(true, pid, file, fa, attr, argv, envp);
}

/* ------------------------------------------------------------------------- */
/* system, popen                                                             */
/* ------------------------------------------------------------------------- */

/* glibc starts their /bin/sh with its internal posix_spawn, where no hook
 * of ours runs. With --follow-fork the shell is followed through the
 * environment (it still holds our variables); without, it is only counted
 * for the run summary (ml__note_unfollowed_child). */
typedef int (*system_fn)(const char *);
typedef FILE *(*popen_fn)(const char *, const char *);
static void *_Atomic real_system, *_Atomic real_popen;

ML_EXPORT int system(const char *command) {
    system_fn f = (system_fn)ml__next_symbol(&real_system, "system");
    if (!f) return -1;
    bool count = follows_this_exec();
    int rc = f(command);
    if (count && rc != -1) ml__note_unfollowed_child();
    return rc;
}

ML_EXPORT FILE *popen(const char *command, const char *type) {
    popen_fn f = (popen_fn)ml__next_symbol(&real_popen, "popen");
    if (!f) return NULL;
    bool count = follows_this_exec();
    FILE *p = f(command, type);
    if (count && p) ml__note_unfollowed_child();
    return p;
}
