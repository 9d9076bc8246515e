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
 * is not followed, as fork is not.
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
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);

/* The real function `name`, found on first use. */
static void *real(void *_Atomic *slot, const char *name) {
    void *f = ml_atomic_load_acquire(slot);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        ml_atomic_store_release(slot, f);
    }
    return f;
}

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

/* The path of this library, as the loader knows it. */
static const char *self_path(void) {
    Dl_info di;
    if (!dladdr((void *)follows_this_exec, &di) || !di.dli_fname || !*di.dli_fname) return NULL;
    return di.dli_fname;
}

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
 * variables are removed again) and ML_CTL = this session. Returns false
 * (and leaves envp to be used as it is) when there is nothing to do or no
 * memory for it. */
static bool build_env(char *const envp[], new_env_t *out) {
    const char *ctl = ml_option_str(ML_ENV_CTL), *lib = self_path();
    if (!ctl || !*ctl || !lib) return false;
    size_t n = 0, ctl_len = strlen(ctl), lib_len = strlen(lib);
    const char *user_preload = "";
    for (char *const *e = envp; e && *e; e++, n++) {
        if (env_is(*e, "ML_CTL", 6) && !strcmp(*e + 7, ctl)) return false; /* already there */
        if (env_is(*e, "LD_PRELOAD", 10)) user_preload = *e + 11;
    }
    /* An LD_PRELOAD that already names us first keeps the rest. */
    if (!strncmp(user_preload, lib, lib_len) && (user_preload[lib_len] == ':' || !user_preload[lib_len]))
        user_preload += lib_len + (user_preload[lib_len] == ':');
    size_t up_len = strlen(user_preload);
    size_t strings = sizeof "LD_PRELOAD=" + lib_len + 1 + up_len + sizeof "ML_LD_PRELOAD_ORIG=" +
                     up_len + sizeof "ML_CTL=" + ctl_len;
    size_t len = (n + 4) * sizeof(char *) + strings;
    void *mem = ml__raw_alloc(len);
    if (!mem) return false;
    char **v = mem, *w = (char *)mem + (n + 4) * sizeof(char *);
    size_t k = 0;
    for (char *const *e = envp; e && *e; e++)
        if (!env_is(*e, "LD_PRELOAD", 10) && !env_is(*e, "ML_CTL", 6) &&
            !env_is(*e, "ML_LD_PRELOAD_ORIG", 18))
            v[k++] = *e;
    v[k++] = w;
    put(&w, "LD_PRELOAD=", lib, *user_preload ? ":" : NULL, user_preload);
    v[k++] = w;
    put(&w, "ML_LD_PRELOAD_ORIG=", user_preload, NULL, NULL);
    v[k++] = w;
    put(&w, "ML_CTL=", ctl, NULL, NULL);
    v[k] = NULL;
    *out = (new_env_t){v, mem, len};
    return true;
}

/* ------------------------------------------------------------------------- */
/* The hooks                                                                 */
/* ------------------------------------------------------------------------- */

enum { VIA_EXECVE, VIA_EXECVPE, VIA_FEXECVE, VIA_EXECVEAT };

static void *_Atomic real_execve, *_Atomic real_execvpe, *_Atomic real_fexecve, *_Atomic real_execveat;

/* Every exec function ends here with the environment the program chose. */
static int exec_with_env(int via, int fd, const char *path, char *const argv[], char *const envp[],
                         int flags) {
    new_env_t ne = {NULL, NULL, 0};
    char *const *env = envp;
    if (follows_this_exec() && build_env(envp, &ne)) env = ne.envp;
    int rc = -1;
    switch (via) {
    case VIA_EXECVE: {
        execve_fn f = (execve_fn)real(&real_execve, "execve");
        rc = f ? f(path, argv, env) : (errno = ENOSYS, -1);
        break;
    }
    case VIA_EXECVPE: {
        execvpe_fn f = (execvpe_fn)real(&real_execvpe, "execvpe");
        rc = f ? f(path, argv, env) : (errno = ENOSYS, -1);
        break;
    }
    case VIA_FEXECVE: {
        fexecve_fn f = (fexecve_fn)real(&real_fexecve, "fexecve");
        rc = f ? f(fd, argv, env) : (errno = ENOSYS, -1);
        break;
    }
    default: {
        execveat_fn f = (execveat_fn)real(&real_execveat, "execveat");
        rc = f ? f(fd, path, argv, env, flags) : (errno = ENOSYS, -1);
        break;
    }
    }
    /* Still here: the exec failed, and the program goes on as it was. */
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
