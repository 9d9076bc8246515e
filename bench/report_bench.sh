#!/usr/bin/env bash
# report_bench.sh - `memlens report` against `heaptrack_print` on traces of
# the same program (bench/report_workload.c), one run each of memlens and
# heaptrack per size, then RUNS timed analyses of each trace: median wall
# time, median CPU time (user + sys) and the largest peak RSS
# (/usr/bin/time -v). Not part of ctest.
#
# Rows: "memlens" is `memlens report --json` as users run it, including the
# strategy advisor's replay of the trace through simulated allocators;
# "memlens-analysis" is the same without the advisor (--no-advisor): the
# analysis heaptrack_print's job compares to (symbols, peak, leaks with
# kinds, fragmentation, flame tree, JSON), started from the analysis
# snapshot the collector saved at the end of the trace; "memlens-replay"
# is that analysis with --replay: every record decoded and analysed again
# (what a trace without a snapshot costs); "heaptrack_print" runs with its
# defaults (peaks, allocators, temporaries, summary).
#
# usage: bench/report_bench.sh [BUILD_DIR] [RUNS] [SIZES...]
#   BUILD_DIR  the memlens build (default: build)
#   RUNS       timed runs per analysis (default: 5)
#   SIZES      allocation counts of the workload (default: 1000000 5000000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
runs=${2:-5}
shift $(( $# > 2 ? 2 : $# ))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000 5000000)
memlens=$build/memlens
for tool in heaptrack heaptrack_print /usr/bin/time cc; do
  command -v "$tool" >/dev/null || { echo "report_bench: $tool is not installed" >&2; exit 1; }
done
[ -x "$memlens" ] || { echo "report_bench: no $memlens (build first)" >&2; exit 1; }
work=$(mktemp -d /tmp/memlens-report-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -g -fno-omit-frame-pointer -o "$work/workload" "$here/report_workload.c"

# One timed run: prints "wall_s cpu_s maxrss_kb".
measure() {
  /usr/bin/time -v -o "$work/time.txt" "$@" >/dev/null 2>"$work/stderr.txt" ||
    { echo "report_bench: failed: $*" >&2; cat "$work/stderr.txt" >&2; exit 1; }
  awk -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, p, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + p[i] }
    /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { m = $2 }
    END { printf "%.3f %.3f %d\n", w, u + s, m }' "$work/time.txt"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-10s %-17s %10s %9s %10s %10s %12s %9s %9s\n' allocs tool trace_MiB record_s wall_s cpu_s \
  peak_RSS_MiB cpu_x wall_x
for n in "${sizes[@]}"; do
  # The recordings, timed once each: the snapshot memlens' collector saves
  # is work done while the program runs.
  rec_ml=$(measure "$memlens" run -q -o "$work/w.mlt" -- "$work/workload" "$n" | cut -d' ' -f1)
  rec_ht=$(cd "$work" && measure heaptrack -o "$work/w.heaptrack" "$work/workload" "$n" | cut -d' ' -f1)
  ht=
  for f in "$work"/w.heaptrack*.zst "$work"/w.heaptrack*.gz; do [ -e "$f" ] && ht=$f; done
  [ -n "$ht" ] || { echo "report_bench: heaptrack wrote no trace" >&2; exit 1; }
  declare -A wall cpu rss size
  tools=(memlens memlens-analysis memlens-replay heaptrack_print)
  for tool in "${tools[@]}"; do
    : >"$work/w.txt"; : >"$work/c.txt"; : >"$work/r.txt"
    for _ in $(seq "$runs"); do
      case $tool in
        memlens) out=$(measure "$memlens" report "$work/w.mlt" --json "$work/r.json" -q) ;;
        memlens-analysis) out=$(measure "$memlens" report "$work/w.mlt" --json "$work/r.json" -q --no-advisor) ;;
        memlens-replay) out=$(measure "$memlens" report "$work/w.mlt" --json "$work/r.json" -q --no-advisor --replay) ;;
        *) out=$(measure heaptrack_print -f "$ht") ;;
      esac
      set -- $out
      echo "$1" >>"$work/w.txt"; echo "$2" >>"$work/c.txt"; echo "$3" >>"$work/r.txt"
    done
    wall[$tool]=$(median <"$work/w.txt")
    cpu[$tool]=$(median <"$work/c.txt")
    rss[$tool]=$(sort -n "$work/r.txt" | tail -1)
  done
  size[memlens]=$(stat -c %s "$work/w.mlt")
  size[memlens-analysis]=${size[memlens]}
  size[memlens-replay]=${size[memlens]}
  size[heaptrack_print]=$(stat -c %s "$ht")
  for tool in "${tools[@]}"; do
    sp=$(awk -v a="${cpu[heaptrack_print]}" -v b="${cpu[$tool]}" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }')
    wsp=$(awk -v a="${wall[heaptrack_print]}" -v b="${wall[$tool]}" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }')
    rec=$rec_ml
    [ "$tool" = heaptrack_print ] && rec=$rec_ht
    printf '%-10s %-17s %10.1f %9s %10s %10s %12.1f %9s %9s\n' "$n" "$tool" \
      "$(awk -v s="${size[$tool]}" 'BEGIN { print s / 1048576 }')" "$rec" "${wall[$tool]}" "${cpu[$tool]}" \
      "$(awk -v k="${rss[$tool]}" 'BEGIN { print k / 1024 }')" "$sp" "$wsp"
  done
done
echo "record_s: the recording's wall time (memlens run, or heaptrack), one run"
echo "cpu_x, wall_x: heaptrack_print's CPU (wall) time / this tool's (medians of $runs runs)"
