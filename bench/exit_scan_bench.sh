#!/usr/bin/env bash
# exit_scan_bench.sh - what a program that exits with millions of live blocks
# costs under memlens (the exit scan that gives leak kinds) against the
# uninstrumented run and heaptrack, on the same workload in the same run
# (bench/exit_scan_workload.c: N blocks in lists, half of them leaked; N
# blocks held by one leaked array; the same after freeing half and making a
# quarter again).
# Median wall time of RUNS runs of each; memlens' own duration of the scan
# (the trace's reach-scan record) and its verdicts; the program's VmHWM run
# alone and the collector's (the memlens process) in a run of its own, and
# their ratio (issue 12 asks for at most 0.5). Not part of ctest.
#
# usage: bench/exit_scan_bench.sh [BUILD_DIR] [RUNS] [BLOCKS...]
#   BUILD_DIR  the memlens build (default: build)
#   RUNS       runs of each tool per size (default: 5)
#   BLOCKS     live blocks at exit (default: 200000 2000000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench_lib.sh"
bench_args 5 "200000 2000000" "$@"
bench_setup exit_scan_bench heaptrack cc
cc -O2 -g -o "$work/workload" "$here/exit_scan_workload.c"

now() { date +%s.%N; }

printf '%-6s %-9s %9s %16s %16s %10s %9s %9s %9s  %s\n' shape blocks plain_s memlens_s heaptrack_s scan_s \
  prog_MiB coll_MiB coll/prog "memlens verdicts"
for shape in lists array churn; do
for n in "${sizes[@]}"; do
  : >"$work/p"; : >"$work/m"; : >"$work/h"; : >"$work/s"; : >"$work/ph"; : >"$work/ch"
  for _ in $(seq "$runs"); do
    # the three tools in turn, so that the machine's load touches each alike
    t=$(now); "$work/workload" "$n" "$shape" >/dev/null; echo "$(now) - $t" | bc >>"$work/p"
    t=$(now); "$memlens" run -q --force -o "$work/w.mlt" -- "$work/workload" "$n" "$shape" >/dev/null
    echo "$(now) - $t" | bc >>"$work/m"
    rm -f "$work"/w.heaptrack*
    t=$(now); (cd "$work" && heaptrack -o "$work/w.heaptrack" "$work/workload" "$n" "$shape" >/dev/null 2>&1)
    echo "$(now) - $t" | bc >>"$work/h"
    scan=$("$memlens" dump "$work/w.mlt" | grep ' reach-scan ')
    echo "$scan" | sed 's/.*duration_us=\([0-9]*\).*/\1/' | awk '{ print $1 / 1e6 }' >>"$work/s"
    # memory, in runs of their own (the sampling costs time)
    hwm_run "$work/ph" "$work/workload" "$n" "$shape"
    hwm_run "$work/ch" "$memlens" run -q --force -o "$work/w.mlt" -- "$work/workload" "$n" "$shape"
  done
  ph=$(median <"$work/ph"); ch=$(median <"$work/ch")
  p=$(median <"$work/p"); m=$(median <"$work/m"); h=$(median <"$work/h"); s=$(median <"$work/s")
  printf '%-6s %-9s %9.3f %8.3f (%5.2fx) %8.3f (%5.2fx) %10.3f %9.1f %9.1f %9.2f  %s\n' "$shape" "$n" "$p" "$m" \
    "$(echo "$m / $p" | bc -l)" "$h" "$(echo "$h / $p" | bc -l)" "$s" "$ph" "$ch" "$(echo "$ch / $ph" | bc -l)" \
    "$(echo "$scan" | grep -o 'reachable=.*definite=[0-9]*')"
done
done
echo "plain/memlens/heaptrack: median wall seconds of $runs runs (x: against plain); scan_s: memlens' exit scan;"
echo "prog_MiB/coll_MiB: median VmHWM of the program alone and of the memlens process (the collector)"
