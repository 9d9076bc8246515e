#!/usr/bin/env bash
# images_bench.sh - thousands of process images under --follow-fork (issue
# 12, item 3): a bash loop that runs /bin/true N times, so 2N + 1 images
# (each fork of bash, and the /bin/true it execs). Alone, under heaptrack,
# and under `memlens run --follow-fork`, in turn in the same run. Prints the
# median wall seconds of RUNS runs of each, memlens' over the plain run's
# and heaptrack's, the memlens process' peak RSS (its VmHWM alone, sampled:
# the collector's memory, which must not grow with the images), and the
# traces written. heaptrack follows no child: it records bash alone, so its
# column is what tracing the parent costs, not a like-for-like total. Not
# part of ctest.
#
# With CONCURRENT=1 the loop starts N `sleep 2` in the background and waits
# for them all: N + 1 processes traced at once (2N + 1 images), what a
# server's workers or a parallel test runner give. The collector then holds
# a trace writer and an analysis session per live process.
#
# With BUSY=1 a program that allocates and frees without a pause runs
# beside the loop, as a compiler runs beside the short processes a build
# starts: each short image's exit waits for the collector, which also
# drains the busy one's ring.
#
# usage: [CONCURRENT=1] [BUSY=1] bench/images_bench.sh [BUILD_DIR] [RUNS] [N...]
#   BUILD_DIR  the memlens build (default: build)
#   RUNS       runs of each tool per size (default: 3)
#   N          loop counts (default: 800 5000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench_lib.sh"
bench_args 3 "800 5000" "$@"
bench_setup images_bench heaptrack bash /usr/bin/time cc
# -fno-builtin: the compiler would drop a malloc freed at once
printf '#include <stdlib.h>\nint main(void) { for (unsigned i = 0;; i++) free(malloc(32 + (i & 1023))); }\n' \
  >"$work/busy.c"
cc -O1 -fno-builtin -o "$work/busy" "$work/busy.c"

printf '%-6s %7s %9s %12s %10s %9s %9s %14s\n' n images plain_s heaptrack_s memlens_s ml/plain ml/ht \
  "collector MiB"
for n in "${sizes[@]}"; do
  loop="for i in \$(seq $n); do /bin/true; done"
  [ "${CONCURRENT:-0}" = 1 ] && loop="for i in \$(seq $n); do sleep 2 & done; wait"
  [ "${BUSY:-0}" = 1 ] && loop="$work/busy & b=\$!; $loop; kill \$b; wait \$b; true"
  : >"$work/p"; : >"$work/h"; : >"$work/m"; : >"$work/r"
  for _ in $(seq "$runs"); do
    timed %e "$work/p" bash -c "$loop"
    rm -rf "$work/ht" && mkdir "$work/ht"
    timed %e "$work/h" heaptrack -o "$work/ht/w" bash -c "$loop"
    rm -rf "$work/ml" && mkdir "$work/ml"
    start=$(date +%s.%N)
    hwm_run "$work/r" "$memlens" run -q --follow-fork -o "$work/ml/w.mlt" -- bash -c "$loop"
    echo "$(date +%s.%N) - $start" | bc -l >>"$work/m"
  done
  images=$(find "$work/ml" -name '*.mlt' | wc -l)
  p=$(median <"$work/p"); h=$(median <"$work/h"); m=$(median <"$work/m")
  printf '%-6s %7s %9.2f %12.2f %10.2f %9.2f %9.2f %14s\n' "$n" "$images" "$p" "$h" "$m" \
    "$(echo "$m / $p" | bc -l)" "$(echo "$m / $h" | bc -l)" "$(median <"$work/r")"
done
