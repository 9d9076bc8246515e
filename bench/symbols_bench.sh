#!/usr/bin/env bash
# symbols_bench.sh - symbolization of one big compilation unit (issue 12,
# item 4): a generated C++ program of FUNCS functions in namespaces, each
# with an inlined helper and three allocation sites, in one file, built
# with -O2 -g by g++ and by clang++ (DWARF 5, no .debug_aranges). Each is
# recorded once; then `memlens report --no-advisor --json` (median wall
# seconds of RUNS runs, and peak RSS) against heaptrack_print on
# heaptrack's recording of the same program. OLD_BUILD=DIR adds an older
# memlens on the same traces. Not part of ctest.
#
# usage: bench/symbols_bench.sh [BUILD_DIR] [RUNS] [FUNCS...]
#   BUILD_DIR  the memlens build (default: build)
#   RUNS       runs of each report (default: 3)
#   FUNCS      functions in the unit (default: 3000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench_lib.sh"
bench_args 3 "3000" "$@"
bench_setup symbols_bench heaptrack heaptrack_print g++ clang++
old=${OLD_BUILD:+$(cd "$OLD_BUILD" && pwd)/memlens}

gen() { # gen FUNCS FILE
  python3 - "$1" "$2" <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    f.write("#include <cstdlib>\n#include <cstring>\n#include <string>\n#include <vector>\n"
            "void *volatile sink;\n")
    for i in range(n):
        f.write(f"namespace n{i % 50} {{ namespace m{i} {{\n"
                f"static inline __attribute__((always_inline)) void *take{i}(size_t n) {{\n"
                f"  std::vector<int> v(n); sink = v.data(); return std::malloc(n + {i}); }}\n"
                f"__attribute__((noinline)) void f{i}() {{\n"
                f"  void *p = take{i}(8); std::memset(p, 1, 8); sink = p; std::free(p);\n"
                f"  std::string s({i % 40} + 20, 'x'); sink = (void *)s.data(); }}\n"
                "}}\n")
    f.write("int main() {\n")
    for i in range(n):
        f.write(f"  n{i % 50}::m{i}::f{i}();\n")
    f.write("  return 0;\n}\n")
PY
}

printf "%-8s %6s %8s %10s %10s %10s %10s %8s %8s\n" compiler funcs addrs memlens_s "old_s" ht_print_s "ml/ht" ml_MiB ht_MiB
for funcs in "${sizes[@]}"; do
  gen "$funcs" "$work/gen.cpp"
  for cc in g++ clang++; do
    prog=$work/gen_$cc
    "$cc" -O2 -g "$work/gen.cpp" -o "$prog"
    "$memlens" run -q -o "$work/t.mlt" -- "$prog" >/dev/null
    (cd "$work" && heaptrack -o "$work/ht" "$prog" >/dev/null 2>&1)
    addrs=$("$memlens" dump "$work/t.mlt" 2>/dev/null | sed -n 's/.* node .* pc=\(0x[0-9a-f]*\).*/\1/p' | sort -u | wc -l)
    : >"$work/ml"; : >"$work/old"; : >"$work/ht_t"; : >"$work/ml_m"; : >"$work/ht_m"
    for _ in $(seq "$runs"); do
      timed "%e %M" "$work/ml" "$memlens" report "$work/t.mlt" -q --no-advisor --json "$work/o.json"
      [ -n "$old" ] && timed "%e" "$work/old" "$old" report "$work/t.mlt" -q --no-advisor --json "$work/o2.json"
      timed "%e %M" "$work/ht_t" heaptrack_print "$work/ht.zst"
    done
    ml=$(cut -d' ' -f1 "$work/ml" | median)
    ml_m=$(cut -d' ' -f2 "$work/ml" | median)
    ht=$(cut -d' ' -f1 "$work/ht_t" | median)
    ht_m=$(cut -d' ' -f2 "$work/ht_t" | median)
    o=-
    [ -n "$old" ] && o=$(median <"$work/old")
    printf "%-8s %6s %8s %10s %10s %10s %10.2f %8.1f %8.1f\n" "$cc" "$funcs" "$addrs" "$ml" "$o" "$ht" \
      "$(echo "$ml $ht" | awk '{ print ($2 > 0) ? $1 / $2 : 0 }')" \
      "$(echo "$ml_m" | awk '{ print $1 / 1024 }')" "$(echo "$ht_m" | awk '{ print $1 / 1024 }')"
  done
done
