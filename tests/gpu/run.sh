#!/usr/bin/env bash
# tests/gpu/run.sh - memlens' GPU check, for a machine with an NVIDIA GPU.
#
#   tests/gpu/run.sh [BUILD_DIR]        (default: build-gpu-check beside the sources)
#
# 1. builds memlens with the CUPTI collector (-DML_BUILD_CUPTI=ON);
# 2. builds tests/gpu/alloc_kinds.cu (every allocation kind, known sizes) and
#    runs it under `memlens run`; checks the report's per-kind bytes, the
#    device's peak, the leak and the leak's site (tests/gpu/check.py);
#    then again with --gpu-pools: the explicit pool must be in the CUPTI
#    activity records with at least its 4 MiB reserved;
# 3. if PyTorch with CUDA is importable, runs tests/gpu/torch_allocs.py under
#    memlens with the native, cudaMallocAsync and expandable-segments
#    allocators and compares with PyTorch's own numbers;
# 4. times 100k cudaMallocAsync/cudaFreeAsync pairs (tests/gpu/bench_async.cu)
#    without memlens, under memlens, and under memlens --no-gpu (median of 3);
#    the target is <= 1.2x;
# 5. prints a table, with each section's seconds; exits 0 when every check
#    passed, 1 otherwise (also when it is stopped by a signal: the table of
#    what ran is printed first).
#
# Where there is no GPU (no nvidia-smi, or it lists no device) it prints
# "SKIP: no GPU (...)" and exits 0.
#
# Environment: CUDA_HOME (default /usr/local/cuda, else nvcc's), NVCC,
# ML_GPU_BENCH_PAIRS (100000), ML_GPU_OVERHEAD_MAX (1.2), ML_GPU_SKIP_TORCH=1,
# ML_GPU_WORK (a folder for the traces and reports; default a new temporary
# one, kept), ML_GPU_PREBUILT (a folder made by tests/gpu/bundle.sh: use that
# memlens instead of building one; the lent GPU machines cannot build it),
# ML_CUPTI_LIB (the libcupti to load; found in the toolkit or PyTorch's
# nvidia-cuda-cupti when the loader has none), ML_GPU_ONLY (the sections to
# run, of: kinds pools torch bench; default all of them: a device lease is
# short, and one torch mode under memlens takes minutes),
# ML_GPU_TORCH_MODES (default "native async expandable").
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-gpu-check}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
PAIRS=${ML_GPU_BENCH_PAIRS:-100000}
ONLY=" ${ML_GPU_ONLY:-kinds pools torch bench} "
ONLY=${ONLY//,/ }
TORCH_MODES=${ML_GPU_TORCH_MODES:-native async expandable}
wanted() { [[ "$ONLY" == *" $1 "* ]]; }
MAXRATIO=${ML_GPU_OVERHEAD_MAX:-1.2}

# --- is there a GPU? -----------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "SKIP: no GPU (nvidia-smi not found)"
    exit 0
fi
if ! GPUS=$(nvidia-smi -L 2>/dev/null) || ! grep -q '^GPU ' <<<"$GPUS"; then
    echo "SKIP: no GPU (nvidia-smi lists no device)"
    exit 0
fi
echo "== GPUs"
echo "$GPUS"

WORK=${ML_GPU_WORK:-$(mktemp -d /tmp/memlens-gpu.XXXXXX)}
mkdir -p "$WORK"
TABLE=$WORK/table.tsv
: >"$TABLE"
row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$TABLE"; }
die() {
    row "$1" "${2:-ok}" "${3:-failed}" FAIL
    finish
}
T0=$SECONDS
timed() { # timed SECTION: the seconds since the last call, as an info row
    row "time: $1" - "$((SECONDS - T0)) s" info
    T0=$SECONDS
}
stopped() {
    trap - TERM INT HUP
    row "run.sh" finished "stopped by a signal" FAIL
    finish
}
trap stopped TERM INT HUP
finish() {
    echo
    echo "== memlens GPU check ($WORK)"
    awk -F'\t' 'BEGIN { printf "%-52s %-22s %-22s %s\n", "check", "expected", "measured", "status";
                        printf "%-52s %-22s %-22s %s\n", "-----", "--------", "--------", "------" }
                { printf "%-52s %-22s %-22s %s\n", $1, $2, $3, $4 }' "$TABLE"
    if grep -q $'\tFAIL$' "$TABLE"; then
        echo "RESULT: FAIL"
        exit 1
    fi
    echo "RESULT: PASS"
    exit 0
}

command -v python3 >/dev/null || die "python3 (for the checks)" present absent
[ -x "$NVCC" ] || NVCC=$(command -v nvcc) || die "nvcc" present "not found (set NVCC or CUDA_HOME)"
# The toolkit nvcc belongs to (for -lcuda's stub at link time).
[ -d "$CUDA_HOME/lib64" ] || CUDA_HOME=$(cd "$(dirname "$NVCC")/.." && pwd)

# --- 1. memlens ------------------------------------------------------------------
if [ -n "${ML_GPU_PREBUILT:-}" ]; then
    # Built elsewhere by tests/gpu/bundle.sh, for machines without memlens'
    # build dependencies (libunwind, libdw, zstd, ncurses).
    ML=$(cd "$ML_GPU_PREBUILT" && pwd)/memlens
    echo "== prebuilt memlens: $ML"
    if ! "$ML" --version >"$WORK/version.txt" 2>&1; then
        cat "$WORK/version.txt"
        ldd "$ML" "$(dirname "$ML")/libmemlens.so" | grep -i 'not found'
        die "prebuilt memlens runs here" yes "no (see above)"
    fi
else
    echo "== building memlens in $BUILD"
    JOBS=$(nproc 2>/dev/null || echo 4)
    if ! cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DML_BUILD_CUPTI=ON \
            -DML_BUILD_TESTS=OFF -DCUDAToolkit_ROOT="$CUDA_HOME" >"$WORK/cmake.log" 2>&1 ||
       ! cmake --build "$BUILD" -j"$JOBS" >>"$WORK/cmake.log" 2>&1; then
        tail -20 "$WORK/cmake.log"
        die "build memlens with CUPTI" ok "failed (see cmake.log; without libunwind-dev, libdw-dev, libzstd-dev and libncurses-dev use tests/gpu/bundle.sh and ML_GPU_PREBUILT)"
    fi
    ML=$BUILD/memlens
fi
timed "memlens ready"
# The collector dlopen()s libcupti by its soname. Where the loader cannot find
# one (PyTorch keeps its own inside site-packages, the toolkit's sits in
# extras/), name one explicitly.
if [ -z "${ML_CUPTI_LIB:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcupti\.so'; then
    cands=$(
        ls "$CUDA_HOME"/extras/CUPTI/lib64/libcupti.so* "$CUDA_HOME"/lib64/libcupti.so* 2>/dev/null
        python3 -c 'import glob, os, nvidia
for p in nvidia.__path__: print("\n".join(sorted(glob.glob(os.path.join(p, "cuda_cupti", "lib", "libcupti.so*")))))' 2>/dev/null
    )
    c=$(head -n 1 <<<"$cands")
    [ -n "$c" ] && export ML_CUPTI_LIB=$c
fi
row "libcupti the collector loads" - "${ML_CUPTI_LIB:-by soname (ldconfig)}" info
if "$ML" --version | grep -q 'GPU (CUPTI) support: yes'; then
    row "memlens --version: GPU support" yes yes ok
else
    die "memlens --version: GPU support" yes no
fi

# --- 2. every allocation kind --------------------------------------------------
if ! "$NVCC" -O1 -g -o "$WORK/alloc_kinds" "$ROOT/tests/gpu/alloc_kinds.cu" \
        -L"$CUDA_HOME/lib64/stubs" -lcuda -lpthread >"$WORK/nvcc.log" 2>&1 ||
   ! "$NVCC" -O2 -o "$WORK/bench_async" "$ROOT/tests/gpu/bench_async.cu" >>"$WORK/nvcc.log" 2>&1; then
    cat "$WORK/nvcc.log"
    die "nvcc: test programs" ok "failed (see nvcc.log)"
fi
timed "nvcc"
if wanted kinds || wanted pools; then
"$WORK/alloc_kinds" >"$WORK/plain.out" 2>&1
rc=$?
if [ $rc != 0 ]; then
    cat "$WORK/plain.out"
    die "alloc_kinds without memlens (is CUDA usable?)" "exit 0" "exit $rc"
fi
fi
if wanted kinds; then
echo "== alloc_kinds"
"$ML" run -q -o "$WORK/kinds.mlt" -- "$WORK/alloc_kinds" >"$WORK/kinds.out" 2>"$WORK/kinds.err"
rc=$?
row "alloc_kinds under memlens: exit status" 0 "$rc" "$([ $rc = 0 ] && echo ok || echo FAIL)"
warn=$(grep -c 'memlens: warning' "$WORK/kinds.err")
row "alloc_kinds under memlens: warnings" 0 "$warn" "$([ "$warn" = 0 ] && echo ok || echo FAIL)"
[ "$warn" = 0 ] || cat "$WORK/kinds.err"
tail -1 "$WORK/kinds.out" >"$WORK/kinds.expect.json"
if "$ML" report "$WORK/kinds.mlt" --json "$WORK/kinds.json" >/dev/null 2>"$WORK/report.err"; then
    python3 "$ROOT/tests/gpu/check.py" kinds "$WORK/kinds.json" "$WORK/kinds.expect.json" >>"$TABLE"
    [ $? -le 1 ] || row "check.py kinds" "readable input" "unreadable" FAIL
else
    cat "$WORK/report.err"
    row "memlens report (alloc_kinds)" ok failed FAIL
fi
timed "alloc_kinds"
fi


# --- 2b. memory pools (--gpu-pools) --------------------------------------------
if wanted pools; then
echo "== alloc_kinds --gpu-pools"
# The explicit pool (cudaMemPoolCreate, 4 MiB from it) must show up in the
# CUPTI activity records with at least those 4 MiB reserved.
"$ML" run -q --gpu-pools -o "$WORK/pools.mlt" -- "$WORK/alloc_kinds" >"$WORK/pools.out" 2>"$WORK/pools.err"
rc=$?
row "alloc_kinds --gpu-pools: exit status" 0 "$rc" "$([ $rc = 0 ] && echo ok || echo FAIL)"
warn=$(grep -c 'memlens: warning' "$WORK/pools.err")
row "alloc_kinds --gpu-pools: warnings" 0 "$warn" "$([ "$warn" = 0 ] && echo ok || echo FAIL)"
if "$ML" report "$WORK/pools.mlt" --json "$WORK/pools.json" >/dev/null 2>&1; then
    python3 "$ROOT/tests/gpu/check.py" pools "$WORK/pools.json" 4194304 >>"$TABLE"
    [ $? -le 1 ] || row "check.py pools" "readable input" "unreadable" FAIL
else
    row "memlens report (alloc_kinds --gpu-pools)" ok failed FAIL
fi
timed "alloc_kinds --gpu-pools"
fi

# --- 3. PyTorch ----------------------------------------------------------------

if ! wanted torch; then
    :
elif [ "${ML_GPU_SKIP_TORCH:-0}" = 1 ]; then
    row "PyTorch" - "skipped (ML_GPU_SKIP_TORCH=1)" info
elif python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    for mode in $TORCH_MODES; do
        case $mode in
        native) conf="" ;;
        async) conf="backend:cudaMallocAsync" ;;
        expandable) conf="expandable_segments:True" ;;
        esac
        echo "== torch ($mode)"
        PYTORCH_CUDA_ALLOC_CONF=$conf "$ML" run -q -o "$WORK/torch-$mode.mlt" -- \
            python3 "$ROOT/tests/gpu/torch_allocs.py" "$mode" >"$WORK/torch-$mode.out" 2>"$WORK/torch-$mode.err"
        rc=$?
        row "torch $mode under memlens: exit status" 0 "$rc" "$([ $rc = 0 ] && echo ok || echo FAIL)"
        timed "torch $mode: memlens run"
        if [ $rc != 0 ]; then
            tail -20 "$WORK/torch-$mode.err"
            continue
        fi
        warn=$(grep -c 'memlens: warning' "$WORK/torch-$mode.err")
        row "torch $mode: memlens warnings" 0 "$warn" "$([ "$warn" = 0 ] && echo ok || echo FAIL)"
        tail -1 "$WORK/torch-$mode.out" >"$WORK/torch-$mode.json"
        # The advisor (CPU strategy replay) is not judged here and is most
        # of a report's time on an interpreter's millions of allocations.
        # The compact form: the full one passed 10 GB on a PyTorch trace (the
        # first H200 run), each site listing libtorch's long C++ names.
        if "$ML" report --no-advisor "$WORK/torch-$mode.mlt" --json "$WORK/torch-$mode.report.json" --json-compact \
                >/dev/null 2>"$WORK/torch-$mode.report.err"; then
            python3 "$ROOT/tests/gpu/check.py" torch "$mode" "$WORK/torch-$mode.report.json" \
                "$WORK/torch-$mode.json" >>"$TABLE"
        else
            tail -5 "$WORK/torch-$mode.report.err"
            row "memlens report (torch $mode)" ok failed FAIL
        fi
        timed "torch $mode: memlens report"
    done
else
    row "PyTorch" - "not importable with CUDA: skipped" info
fi

# --- 4. overhead ---------------------------------------------------------------
if wanted bench; then
echo "== overhead: $PAIRS cudaMallocAsync/cudaFreeAsync pairs"
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
bench() { # prints the loop's seconds, or nothing when it failed
    "$@" 2>>"$WORK/bench.err" | sed -n 's/.*seconds=\([0-9.]*\).*/\1/p'
}
plain=$(for i in 1 2 3; do bench "$WORK/bench_async" "$PAIRS"; done | median)
withgpu=$(for i in 1 2 3; do bench "$ML" run -q -o "$WORK/bench.mlt" -- "$WORK/bench_async" "$PAIRS"; done | median)
nogpu=$(for i in 1 2 3; do bench "$ML" run -q --no-gpu -o "$WORK/bench-nogpu.mlt" -- "$WORK/bench_async" "$PAIRS"; done | median)
if [ -n "$plain" ] && [ -n "$withgpu" ] && [ -n "$nogpu" ]; then
    ratio=$(awk -v a="$withgpu" -v b="$plain" 'BEGIN { printf "%.3f", a / b }')
    ratio_cpu=$(awk -v a="$nogpu" -v b="$plain" 'BEGIN { printf "%.3f", a / b }')
    row "async pairs: seconds without memlens" - "$plain" info
    row "async pairs: seconds under memlens --no-gpu" - "$nogpu (${ratio_cpu}x)" info
    # What --no-gpu costs is the CPU heap: the host allocations CUDA makes
    # per pair (the H200 run of 2026-12-04 measured 1.51x without them told).
    hostper=$("$ML" report --no-advisor "$WORK/bench-nogpu.mlt" --json "$WORK/bench-nogpu.json" >/dev/null 2>&1 &&
        python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print("%.2f" % (t["alloc_calls"] / float(sys.argv[2])))' \
            "$WORK/bench-nogpu.json" "$PAIRS" 2>/dev/null)
    row "async pairs: host allocations per pair (--no-gpu)" - "${hostper:-?}" info
    ok=$(awk -v r="$ratio" -v m="$MAXRATIO" 'BEGIN { print (r <= m) ? "ok" : "FAIL" }')
    row "async pairs: overhead under memlens" "<= ${MAXRATIO}x" "${ratio}x (${withgpu} s)" "$ok"
    pairs=$("$ML" report "$WORK/bench.mlt" --json "$WORK/bench.json" >/dev/null 2>&1 &&
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["gpu"]["devices"]; print(sum(x["kinds"].get("async",{}).get("alloc_calls",0) for x in d))' "$WORK/bench.json" 2>/dev/null)
    exp=$((PAIRS + 1000))
    row "async pairs: recorded allocations" "$exp" "${pairs:-?}" "$([ "${pairs:-0}" = "$exp" ] && echo ok || echo FAIL)"
else
    cat "$WORK/bench.err"
    row "async pairs benchmark" ran failed FAIL
fi
timed "overhead benchmark"
fi

finish
