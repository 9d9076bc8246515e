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
# (what a trace without a snapshot costs); "memlens-compact" is the analysis
# with the JSON in its compact form (--json-compact: each frame and stack
# once); "heaptrack_print" runs with its
# defaults (peaks, allocators, temporaries, summary).
#
# Rows "memlens" and "memlens-saved" are the whole report (--json --html,
# advice included): the first runs the advisor every time, the second reads
# the advice the first report saved in the trace.
#
# usage: [REAL=0] [BIGHEAP=N] bench/report_bench.sh [BUILD_DIR] [RUNS] [SIZES...]
#   BUILD_DIR  the memlens build (default: build)
#   RUNS       timed runs per analysis (default: 5)
#   SIZES      allocation counts of the workload (default: 1000000 5000000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench_lib.sh"
bench_args 5 "1000000 5000000" "$@"
bench_setup report_bench heaptrack heaptrack_print /usr/bin/time cc
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


printf '%-16s %-17s %10s %9s %10s %10s %12s %9s %9s\n' trace tool trace_MiB record_s wall_s cpu_s \
  peak_RSS_MiB cpu_x wall_x
# bench NAME PROGRAM [ARGS...]: records PROGRAM once with each tool, then times the analyses.
bench() {
  local name=$1
  shift
  rm -f "$work"/w.mlt "$work"/w.heaptrack*
  # The recordings, timed once each: the snapshot memlens' collector saves
  # is work done while the program runs.
  rec_ml=$(measure "$memlens" run -q -o "$work/w.mlt" -- "$@" | cut -d' ' -f1)
  rec_ht=$(cd "$work" && measure heaptrack -o "$work/w.heaptrack" "$@" | cut -d' ' -f1)
  ht=
  for f in "$work"/w.heaptrack*.zst "$work"/w.heaptrack*.gz; do [ -e "$f" ] && ht=$f; done
  [ -n "$ht" ] || { echo "report_bench: heaptrack wrote no trace" >&2; exit 1; }
  declare -A wall cpu rss size
  tools=(memlens memlens-saved memlens-analysis memlens-compact memlens-replay heaptrack_print)
  for tool in "${tools[@]}"; do
    # memlens-saved reads the advice a first report saved in the trace
    [ "$tool" = memlens-saved ] && "$memlens" report "$work/w.mlt" --json "$work/r.json" -q
    : >"$work/w.txt"; : >"$work/c.txt"; : >"$work/r.txt"
    for _ in $(seq "$runs"); do
      case $tool in
        memlens) out=$(measure "$memlens" report "$work/w.mlt" --json "$work/r.json" --html "$work/r.html" -q \
                         --no-save-advice) ;;
        memlens-saved) out=$(measure "$memlens" report "$work/w.mlt" --json "$work/r.json" --html "$work/r.html" -q) ;;
        memlens-analysis) out=$(measure "$memlens" report "$work/w.mlt" --json "$work/r.json" -q --no-advisor) ;;
        memlens-compact) out=$(measure "$memlens" report "$work/w.mlt" --json "$work/r.json" -q --no-advisor --json-compact) ;;
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
  for tool in "${tools[@]}"; do size[$tool]=$(stat -c %s "$work/w.mlt"); done
  size[heaptrack_print]=$(stat -c %s "$ht")
  for tool in "${tools[@]}"; do
    sp=$(awk -v a="${cpu[heaptrack_print]}" -v b="${cpu[$tool]}" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }')
    wsp=$(awk -v a="${wall[heaptrack_print]}" -v b="${wall[$tool]}" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }')
    rec=$rec_ml
    [ "$tool" = heaptrack_print ] && rec=$rec_ht
    printf '%-16s %-17s %10.1f %9s %10s %10s %12.1f %9s %9s\n' "$name" "$tool" \
      "$(awk -v s="${size[$tool]}" 'BEGIN { print s / 1048576 }')" "$rec" "${wall[$tool]}" "${cpu[$tool]}" \
      "$(awk -v k="${rss[$tool]}" 'BEGIN { print k / 1024 }')" "$sp" "$wsp"
  done
}
for n in "${sizes[@]}"; do bench "workload-$n" "$work/workload" "$n"; done
# Real programs (issue 12): cppcheck on generated code, and the big live heap
# of python objects (BIGHEAP objects of 4 kinds kept, then a dict of a quarter
# as many). REAL=0 skips them; BIGHEAP sets the size (default 2000000, the
# issue's; 20 minutes on a loaded 2-core machine: try 200000 there).
if [ "${REAL:-1}" != 0 ]; then
  for i in $(seq 400); do
    echo "int check_$i(int *p, int n) { int s = 0; for (int k = 0; k <= n; k++) s += p[k]; char buf[$((8 + i % 8))]; for (int k = 0; k < n; k++) buf[k] = (char)s; return s + buf[0]; }"
  done >"$work/check.c"
  command -v cppcheck >/dev/null && bench cppcheck /usr/bin/cppcheck --quiet --enable=warning "$work/check.c"
  objs=${BIGHEAP:-2000000}
  cat >"$work/bigheap.py" <<EOF
class S:
    __slots__ = ('a', 'b')
    def __init__(self, a, b):
        self.a = a
        self.b = b
keep = []
for i in range($objs):
    keep.append(((i, i + 1), 's%d' % i, S(i, -i), [i]))
d = {}
for i in range($objs // 4):
    d['k%d' % i] = i
print(len(keep), len(d))
EOF
  PYTHONMALLOC=malloc bench "python-$objs" /usr/bin/python3 "$work/bigheap.py"
fi
echo "record_s: the recording's wall time (memlens run, or heaptrack), one run"
echo "memlens: report --json --html with a fresh advisor run (--no-save-advice); memlens-saved: the same"
echo "reading the advice an earlier report saved in the trace (docs/trace-format.md, \"The saved advice\")"
echo "cpu_x, wall_x: heaptrack_print's CPU (wall) time / this tool's (medians of $runs runs)"
