#!/usr/bin/env bash
# bench/gpu_callback_bench.sh BUILD_DIR [PAIRS] [REPS] - memlens' own cost per
# cudaMallocAsync/cudaFreeAsync pair, on a machine without a GPU.
#
# Runs bench/gpu_callback_bench.c (which plays the driver and CUPTI for
# libmemlens_cupti.so, with the fake libcupti of the tests) at three stack
# depths, outside memlens (an empty callback) and under `memlens run`, and
# prints the medians of REPS runs: ns per pair and what memlens adds. The
# GPU-side target (tests/gpu/run.sh) is <= 1.2x on 100k real pairs, so the
# last column is the pair time a GPU must take for memlens' part alone to
# stay within it: 5x the added time. CUPTI's own dispatch is not in these
# numbers. heaptrack records no GPU memory, so it has no column here.
#
# Needs a build with the CUPTI collector (libmemlens_cupti.so) and the test
# fixtures (fakecupti/libcupti.so.12), and the CUPTI headers (CUDA_HOME).
set -euo pipefail

BUILD=$(cd "${1:?usage: gpu_callback_bench.sh BUILD_DIR [PAIRS] [REPS]}" && pwd)
PAIRS=${2:-200000}
REPS=${3:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
FAKE=$BUILD/fakecupti/libcupti.so.12
INJ=$BUILD/libmemlens_cupti.so
for f in "$FAKE" "$INJ" "$BUILD/memlens"; do
    [ -e "$f" ] || { echo "gpu_callback_bench: $f missing (a build with CUPTI and tests)" >&2; exit 2; }
done

work=$(mktemp -d /tmp/memlens-gpubench.XXXXXX)
trap 'rm -rf "$work"' EXIT
inc=
for d in "$CUDA_HOME/include" "$CUDA_HOME/extras/CUPTI/include"; do
    [ -e "$d/cupti.h" ] && inc="$inc -I$d"
done
[ -n "$inc" ] || { echo "gpu_callback_bench: no cupti.h under $CUDA_HOME" >&2; exit 2; }
cc -O2 -g $inc -o "$work/bench" "$HERE/gpu_callback_bench.c" -ldl

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
one() { "$@" | sed -n 's/.*ns_per_pair=\([0-9.]*\).*/\1/p'; }

printf '%-6s %14s %14s %14s %22s\n' depth "plain ns/pair" "memlens ns" "added ns" "GPU pair time for 1.2x"
for depth in 5 20 60; do
    plain=$(for _ in $(seq "$REPS"); do one "$work/bench" "$FAKE" "$INJ" "$PAIRS" "$depth"; done | median)
    ml=$(for _ in $(seq "$REPS"); do
        one "$BUILD/memlens" run -q -o "$work/t.mlt" -- "$work/bench" "$FAKE" "$INJ" "$PAIRS" "$depth"
    done | median)
    # Under memlens the collector must have subscribed, or the run measured nothing.
    "$BUILD/memlens" run -q -o "$work/t.mlt" -- "$work/bench" "$FAKE" "$INJ" 1000 "$depth" |
        grep -q 'subscribed=1' || { echo "gpu_callback_bench: the collector did not subscribe" >&2; exit 1; }
    awk -v d="$depth" -v p="$plain" -v m="$ml" 'BEGIN {
        printf "%-6s %14.1f %14.1f %14.1f %19.2f us\n", d, p, m, m - p, 5 * (m - p) / 1000 }'
done
echo "($PAIRS pairs, median of $REPS runs; memlens $("$BUILD/memlens" --version | head -1))"
