#!/usr/bin/env bash
# stacks_bench.sh - programs with many distinct call stacks (issue 12):
# the test fixture `fx_scale stacks LEVELS THREADS` (tests/e2e/fixtures)
# allocates from each of 2^LEVELS distinct paths about 2 * LEVELS frames
# deep, once a thread, alone, under heaptrack and under memlens, in turn in
# the same run. Prints the median wall seconds of RUNS runs of each,
# memlens' over heaptrack's, and the median VmHWM of the program's own
# process under each tool (the stack table the recorder keeps inside the
# program; the collector is not counted). Not part of ctest.
#
# usage: bench/stacks_bench.sh [BUILD_DIR] [RUNS] [LEVELS...]
#   BUILD_DIR  the memlens build, tests included (default: build)
#   RUNS       runs of each tool per size (default: 3)
#   LEVELS     recursion depths (default: 16 21); THREADS=N sets the threads (default 2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench_lib.sh"
bench_args 3 "16 21" "$@"
bench_setup stacks_bench heaptrack
fx=${FX:-$build/fx_scale} # FX=PATH: the fixture of another build (to bench an older memlens)
[ -x "$fx" ] || { echo "stacks_bench: no $fx (build the tests first)" >&2; exit 1; }
threads=${THREADS:-2}

# run OUT CMD...: appends "wall_s program_VmHWM_MiB" of one run. The
# program is found by its name among the processes CMD starts.
run() {
  local out=$1
  shift
  python3 - "$out" "$@" <<'PY'
import os, subprocess, sys, time
out, argv = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
hwm = {}
while p.poll() is None:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                st = f.read()
        except OSError:
            continue
        if st.split("\n", 1)[0].split()[-1] != "fx_scale":
            continue
        for line in st.split("\n"):
            if line.startswith("VmHWM:"):
                hwm[pid] = max(hwm.get(pid, 0), int(line.split()[1]))
    time.sleep(0.01)
wall = time.monotonic() - t0
if p.returncode != 0:
    sys.exit(f"stacks_bench: failed: {' '.join(argv)}")
with open(out, "a") as f:
    print(f"{wall:.2f} {max(hwm.values(), default=0) / 1024:.1f}", file=f)
PY
}
col() { cut -d' ' -f"$1" "$2" | median; }

printf '%-7s %-7s %9s %12s %10s %7s %11s %13s %11s\n' levels threads plain_s heaptrack_s memlens_s ml/ht \
  plain_MiB heaptrack_MiB memlens_MiB
for d in "${sizes[@]}"; do
  : >"$work/p"; : >"$work/h"; : >"$work/m"
  for _ in $(seq "$runs"); do
    run "$work/p" "$fx" stacks "$d" "$threads"
    rm -f "$work"/w.heaptrack*
    (cd "$work" && run "$work/h" heaptrack -o "$work/w.heaptrack" "$fx" stacks "$d" "$threads")
    run "$work/m" "$memlens" run -q --force -o "$work/w.mlt" -- "$fx" stacks "$d" "$threads"
  done
  h=$(col 1 "$work/h"); m=$(col 1 "$work/m")
  printf '%-7s %-7s %9s %12s %10s %7.2f %11s %13s %11s\n' "$d" "$threads" "$(col 1 "$work/p")" "$h" "$m" \
    "$(echo "$m / $h" | bc -l)" "$(col 2 "$work/p")" "$(col 2 "$work/h")" "$(col 2 "$work/m")"
done
