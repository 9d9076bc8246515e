#!/usr/bin/env bash
# threads_bench.sh - many threads allocating (issue 12), in three patterns
# (bench/threads_workload.c): `together` (THREADS threads released by a
# barrier, each doing PAIRS malloc/free), `churn` (THREADS short-lived
# threads in waves of 50) and `handoff` (THREADS / 2 producers whose blocks
# their own consumer thread frees). Each runs under memlens, heaptrack and
# alone, in turn in the same run. Prints the median wall and system seconds
# of RUNS runs of each, the slowest memlens run (a full ring with thousands
# of sleepers has a long tail), memlens' wall time over heaptrack's, and
# whether memlens' call count matches heaptrack's (less heaptrack's own
# start-up call). Not part of ctest.
#
# usage: bench/threads_bench.sh [BUILD_DIR] [RUNS] [THREADS...]
#   BUILD_DIR  the memlens build (default: build)
#   RUNS       runs of each tool per size (default: 5)
#   THREADS    thread counts (default: 200 1000 3000); PAIRS=N sets the pairs (default 2000),
#              MODES="together churn handoff" the patterns (default: all three)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench_lib.sh"
bench_args 5 "200 1000 3000" "$@"
bench_setup threads_bench heaptrack heaptrack_print cc /usr/bin/time
cc -O0 -pthread -o "$work/workload" "$here/threads_workload.c"
pairs=${PAIRS:-2000}
read -r -a modes <<<"${MODES:-together churn handoff}"

col() { cut -d' ' -f"$1" "$2" | median; }

printf '%-9s %-7s %-7s %12s %12s %12s %10s %10s %9s  %s\n' mode threads pairs plain_s heaptrack_s memlens_s \
  ml_sys_s ml_max_s ml/ht "calls memlens/heaptrack"
for mode in "${modes[@]}"; do
  for n in "${sizes[@]}"; do
    : >"$work/p"; : >"$work/h"; : >"$work/m"
    for _ in $(seq "$runs"); do
      timed "%e %S" "$work/p" "$work/workload" "$n" "$pairs" "$mode"
      rm -f "$work"/w.heaptrack*
      (cd "$work" && timed "%e %S" "$work/h" heaptrack -o "$work/w.heaptrack" "$work/workload" "$n" "$pairs" "$mode")
      timed "%e %S" "$work/m" "$memlens" run -q --force -o "$work/w.mlt" -- "$work/workload" "$n" "$pairs" "$mode"
    done
    mc=$("$memlens" report "$work/w.mlt" 2>/dev/null | awk '/^allocations:/ { print $2 }')
    hc=$(heaptrack_print -f "$work"/w.heaptrack.*zst 2>/dev/null | awk '/^calls to allocation functions/ { print $5; exit }')
    p=$(col 1 "$work/p"); h=$(col 1 "$work/h"); m=$(col 1 "$work/m")
    printf '%-9s %-7s %-7s %12s %12s %12s %10s %10s %9.2f  %s/%s\n' "$mode" "$n" "$pairs" "$p" "$h" "$m" \
      "$(col 2 "$work/m")" "$(cut -d' ' -f1 "$work/m" | sort -n | tail -1)" "$(echo "$m / $h" | bc -l)" "$mc" "$hc"
  done
done
