# bench_lib.sh - sourced by the bench scripts: their common arguments and
# the median. Not a script of its own.

# bench_args DEFAULT_RUNS "DEFAULT_SIZES" [BUILD_DIR] [RUNS] [SIZES...]
# sets build (default: build next to bench/), runs, sizes (an array) and
# memlens; `here` must be bench/.
bench_args() {
  local def_runs=$1 def_sizes=$2
  shift 2
  build=$(cd "${1:-$here/../build}" && pwd)
  runs=${2:-$def_runs}
  shift $(( $# > 2 ? 2 : $# ))
  sizes=("$@")
  [ ${#sizes[@]} -gt 0 ] || read -r -a sizes <<<"$def_sizes"
  memlens=$build/memlens
}

# The median of the numbers on stdin, one a line (the mean of the middle
# two when there is an even count).
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# timed FORMAT OUT CMD...: runs CMD (its output to /dev/null) under
# /usr/bin/time and appends the fields FORMAT asks for (`%e`: wall seconds,
# `%S`: system seconds) as one line to OUT; stops with CMD's stderr when it
# fails. `bench_name` (set by bench_setup) names the script.
timed() {
  local fmt=$1 out=$2
  shift 2
  /usr/bin/time -o "$work/t" -f "$fmt" "$@" >/dev/null 2>"$work/err" ||
    { echo "$bench_name: failed: $*" >&2; cat "$work/err" >&2; exit 1; }
  cat "$work/t" >>"$out"
}

# bench_setup NAME TOOL...: stops with a message when a tool or the memlens
# build is missing; sets `work` to a fresh directory, removed on exit.
bench_setup() {
  local name=$1 tool
  bench_name=$name
  shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$name: $tool is not installed" >&2; exit 1; }
  done
  [ -x "$memlens" ] || { echo "$name: no $memlens (build first)" >&2; exit 1; }
  work=$(mktemp -d "/tmp/memlens-$name.XXXXXX")
  trap 'rm -rf "$work"' EXIT
}

# hwm_run OUT CMD...: runs CMD (its output to /dev/null) and appends its
# VmHWM in MiB to OUT: the peak resident memory of that process alone (not
# of its children, as wait4's maxrss would count them), sampled every 10 ms.
hwm_run() {
  local out=$1
  shift
  python3 - "$out" "$@" <<'PY'
import subprocess, sys, time
out, argv = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
hwm = 0
while p.poll() is None:
    try:
        with open(f"/proc/{p.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = max(hwm, int(line.split()[1]))
    except OSError:
        pass
    time.sleep(0.01)
with open(out, "a") as f:
    print(f"{hwm / 1024:.1f}", file=f)
PY
}
