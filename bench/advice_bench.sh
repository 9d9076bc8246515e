#!/usr/bin/env bash
# advice_bench.sh - the full report with the strategy advisor (`memlens
# report --json --html`) against heaptrack_print on traces of the same real
# program: wall time, CPU time (user + sys) and peak RSS, medians of RUNS
# (/usr/bin/time -v). Wall time is only meaningful on a quiet machine; CPU
# time is the number to compare on a shared one. Not part of ctest.
#
# usage: bench/advice_bench.sh [BUILD_DIR] [RUNS] [NAME=MLT,HEAPTRACK_FILE ...]
#   With no traces given, records them: cppcheck on 400 generated functions
#   (bench/record_bench.py's workload) and the big python heap
#   (PYTHONMALLOC=malloc python3 building 2 M objects, about 7 M live
#   blocks at the peak), once under memlens and once under heaptrack.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench_lib.sh" # median
build=$(cd "${1:-$here/../build}" && pwd)
runs=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
memlens=$build/memlens
for tool in heaptrack heaptrack_print /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "advice_bench: $tool is not installed" >&2; exit 1; }
done
[ -x "$memlens" ] || { echo "advice_bench: no $memlens (build first)" >&2; exit 1; }
work=$(mktemp -d /tmp/memlens-advice-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

pairs=("$@")
if [ ${#pairs[@]} -eq 0 ]; then
  command -v cppcheck >/dev/null || { echo "advice_bench: cppcheck is not installed (apt-get install cppcheck)" >&2; exit 1; }
  /usr/bin/python3 - "$work" <<'PY'
import sys, os
w = sys.argv[1]
with open(os.path.join(w, "check.c"), "w") as f:
    for i in range(400):
        f.write(f"int check_{i}(int *p, int n) {{ int s = 0; for (int k = 0; k <= n; k++) s += p[k];"
                f" char buf[{8 + i % 8}]; for (int k = 0; k < n; k++) buf[k] = (char)s; return s + buf[0]; }}\n")
with open(os.path.join(w, "bigheap.py"), "w") as f:
    f.write("class S:\n    __slots__ = ('a', 'b')\n    def __init__(self, a, b):\n        self.a = a\n        self.b = b\n"
            "keep = []\nfor i in range(2000000):\n    keep.append(((i, i + 1), 's%d' % i, S(i, -i), [i]))\n"
            "d = {}\nfor i in range(500000):\n    d['k%d' % i] = i\nprint(len(keep), len(d))\n")
PY
  record() { # name, command...
    local name=$1; shift
    "$memlens" run -q -o "$work/$name.mlt" -- "$@" >/dev/null 2>&1 || true
    (cd "$work" && heaptrack -o "$work/$name.ht" "$@" >/dev/null 2>&1 || true)
    local ht=; for f in "$work/$name".ht*.zst "$work/$name".ht*.gz; do [ -e "$f" ] && ht=$f; done
    pairs+=("$name=$work/$name.mlt,$ht")
  }
  record cppcheck /usr/bin/cppcheck --quiet --enable=warning "$work/check.c"
  PYTHONMALLOC=malloc record bigheap /usr/bin/python3 "$work/bigheap.py"
fi

# One timed run: prints "wall_s cpu_s maxrss_kb".
measure() {
  /usr/bin/time -v -o "$work/time.txt" "$@" >/dev/null 2>"$work/stderr.txt" || true
  awk -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, p, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + p[i] }
    /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { m = $2 }
    END { printf "%.3f %.3f %d\n", w, u + s, m }' "$work/time.txt"
}

printf '%-10s %-22s %8s %8s %12s %8s\n' trace tool wall_s cpu_s peak_RSS_MiB cpu_x
for pair in "${pairs[@]}"; do
  name=${pair%%=*}; files=${pair#*=}; mlt=${files%%,*}; ht=${files#*,}
  declare -A W C R
  for tool in heaptrack_print memlens-full memlens-no-advisor; do
    : >"$work/w"; : >"$work/c"; : >"$work/r"
    for ((i = 0; i < runs; i++)); do
      case $tool in
        heaptrack_print) out=$(measure heaptrack_print "$ht") ;;
        memlens-full) out=$(measure "$memlens" report -q --json "$work/r.json" --html "$work/r.html" "$mlt") ;;
        memlens-no-advisor) out=$(measure "$memlens" report -q --no-advisor --json "$work/r.json" --html "$work/r.html" "$mlt") ;;
      esac
      read -r w c r <<<"$out"
      echo "$w" >>"$work/w"; echo "$c" >>"$work/c"; echo "$r" >>"$work/r"
    done
    W[$tool]=$(median <"$work/w"); C[$tool]=$(median <"$work/c"); R[$tool]=$(sort -n "$work/r" | tail -1)
  done
  for tool in heaptrack_print memlens-full memlens-no-advisor; do
    printf '%-10s %-22s %8.2f %8.2f %12.1f %8.2f\n' "$name" "$tool" "${W[$tool]}" "${C[$tool]}" \
      "$(echo "${R[$tool]} / 1024" | bc -l)" "$(echo "${C[$tool]} / ${C[heaptrack_print]}" | bc -l)"
  done
  "$memlens" report -q --json "$work/r.json" "$mlt" >/dev/null 2>&1 || true
  /usr/bin/python3 -c 'import json,sys; a=json.load(open(sys.argv[1])).get("advisor",{}); print("  advisor:", json.dumps(a))' "$work/r.json" || true
  unset W C R
done
