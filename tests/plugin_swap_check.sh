#!/usr/bin/env bash
# plugin_swap_check.sh - a plugin host's worker keeps each plugin's sites.
#
# The main thread loads libfxplugin.so and libfxplugin_b.so (the build's
# fxplugins/: the same code at the same offsets, other names and sizes) in
# turn, 200 times each, each closed before the next is opened, so that each
# is loaded where the other was. A worker thread runs each plugin's function
# (3 blocks of 333 bytes for a, 444 for b), and three threads allocate
# beside it all along. Every run must give 600 calls of plugin_alloc with
# 333-byte blocks and 600 of plugin_b_alloc with 444-byte blocks. A stack of
# the worker interned before the module scan that parks the other plugin's
# trie nodes, or with node ids kept from before such a scan, is charged to
# the other plugin (docs/recorder.md, "Another object where an unloaded one
# was"). Timing-dependent, so not part of ctest; a CPU hog beside it
# (HOG=1) makes the races likelier.
#
# usage: tests/plugin_swap_check.sh BUILD [RUNS]   (exit 1 if a run was wrong)
set -u
build=$(cd "${1:?usage: plugin_swap_check.sh BUILD [RUNS]}" && pwd)
runs=${2:-50}
work=$(mktemp -d /tmp/memlens-swap.XXXXXX)
hog=
trap '[ -n "$hog" ] && kill "$hog"; rm -rf "$work"' EXIT
cat >"$work/p.c" <<'C'
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static void (*job)(void);
static int job_done, quit;
static volatile int stop;
static void *worker(void *a) {
    (void)a;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!job && !quit) pthread_cond_wait(&cv, &mu);
        if (!job) break;
        void (*f)(void) = job;
        pthread_mutex_unlock(&mu);
        f();
        pthread_mutex_lock(&mu);
        job = NULL;
        job_done = 1;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}
static void *busy(void *a) {
    (void)a;
    while (!stop) free(malloc(40));
    return NULL;
}
int main(void) {
    pthread_t w, b[3];
    pthread_create(&w, NULL, worker, NULL);
    for (int i = 0; i < 3; i++) pthread_create(&b[i], NULL, busy, NULL);
    const char *names[2] = {"libfxplugin.so", "libfxplugin_b.so"};
    const char *fns[2] = {"plugin_alloc", "plugin_b_alloc"};
    for (int r = 0; r < 200; r++)
        for (int i = 0; i < 2; i++) {
            void *h = dlopen(names[i], RTLD_NOW);
            if (!h) return 2;
            void (*f)(void) = (void (*)(void))dlsym(h, fns[i]);
            if (!f) return 3;
            pthread_mutex_lock(&mu);
            job = f;
            job_done = 0;
            pthread_cond_broadcast(&cv);
            while (!job_done) pthread_cond_wait(&cv, &mu);
            pthread_mutex_unlock(&mu);
            dlclose(h);
        }
    stop = 1;
    pthread_mutex_lock(&mu);
    quit = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(w, NULL);
    for (int i = 0; i < 3; i++) pthread_join(b[i], NULL);
    return 0;
}
C
cat >"$work/check.py" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
got = []
for s in j["sites"]:
    for f in s["frames"]:
        if f.get("function") in ("plugin_alloc", "plugin_b_alloc"):
            got.append((f["function"], s["alloc_calls"], s["bytes_allocated"]))
            break
got.sort()
want = [("plugin_alloc", 600, 600 * 333), ("plugin_b_alloc", 600, 600 * 444)]
print(("ok " if got == want else "WRONG ") + " ".join("%s:%d calls,%d B" % g for g in got))
PY
cc -O0 -g -pthread -o "$work/p" "$work/p.c" -ldl "-Wl,-rpath,$build/fxplugins" || exit 2
if [ "${HOG:-0}" = 1 ]; then
    (while :; do :; done) &
    hog=$!
fi
for i in $(seq "$runs"); do
    "$build/memlens" run -q -o "$work/t.mlt" -- "$work/p" || { echo "run $i: memlens run failed"; continue; }
    "$build/memlens" report "$work/t.mlt" -q --no-advisor --json "$work/t.json" || { echo "run $i: report failed"; continue; }
    /usr/bin/python3 "$work/check.py" "$work/t.json"
done | sort | uniq -c | tee "$work/out"
! grep -q -v ' ok ' "$work/out"
