#!/usr/bin/env bash
# signal_alloc_check.sh - nothing a signal handler allocates is lost uncounted.
#
# A program whose setitimer handler (every 20 us) mallocs 24 bytes and
# keeps them, beside a loop of 3 M malloc/free. Under a storm like this the
# handler runs again and again inside one recorded call, and the recorder's
# stash of calls made inside memlens fills (interpose/hooks.c, nest_push):
# what does not fit is skipped and counted. The program prints how often its
# handler ran; that must equal the trace's allocations beyond the loop's
# (and the one stdout buffer) plus the skipped count, in every run.
#
# The handler calls malloc, which is not async-signal-safe: it can deadlock
# glibc's malloc with or without memlens. Such a run is killed after 60 s
# and counted apart. Timing-dependent, so not part of ctest.
#
# usage: tests/signal_alloc_check.sh BUILD [RUNS]   (exit 1 if a run lost a call uncounted)
set -u
build=$(cd "${1:?usage: signal_alloc_check.sh BUILD [RUNS]}" && pwd)
runs=${2:-10}
work=$(mktemp -d /tmp/memlens-sigalloc.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat >"$work/p.c" <<'C'
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
static volatile sig_atomic_t hits;
static void *keep[200000];
static void on_alrm(int s) {
    (void)s;
    void *p = malloc(24);
    if (hits < 200000) keep[hits] = p;
    else free(p);
    hits++;
}
int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alrm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 20}, {0, 20}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (long i = 0; i < 3000000; i++) free(malloc(40 + (i & 63)));
    setitimer(ITIMER_REAL, &off, NULL);
    printf("handler %ld\n", (long)hits);
    return 0;
}
C
cc -O1 -fno-builtin -o "$work/p" "$work/p.c" || exit 2
bad=0 hung=0
for i in $(seq "$runs"); do
    if ! timeout 60 "$build/memlens" run -q -o "$work/t.mlt" -- "$work/p" >"$work/out" 2>"$work/err"; then
        hung=$((hung + 1)); echo "run $i: no result (deadlocked in glibc's malloc, or failed)"; continue
    fi
    "$build/memlens" report "$work/t.mlt" -q --no-advisor --json "$work/t.json" || exit 2
    skipped=$("$build/memlens" dump "$work/t.mlt" | sed -n 's/.* end .*nested_skipped=\([0-9]*\).*/\1/p')
    read -r handler recorded < <(python3 -c "
import json, re, sys
t = json.load(open('$work/t.json'))['totals']
h = int(re.search(r'handler (\d+)', open('$work/out').read()).group(1))
print(h, t['alloc_calls'] - 3000000 - 1)")
    lost=$((handler - recorded - skipped))
    echo "run $i: handler $handler, recorded $recorded, skipped $skipped, lost uncounted $lost"
    [ "$lost" -eq 0 ] || bad=$((bad + 1))
done
echo "$bad of $runs runs lost calls uncounted; $hung without a result"
[ "$bad" -eq 0 ]
