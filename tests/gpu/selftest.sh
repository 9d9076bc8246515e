#!/usr/bin/env bash
# tests/gpu/selftest.sh BUILD_DIR - checks tests/gpu/run.sh's parts on a
# machine without a GPU, so that the first run on a GPU machine fails only
# for reasons a GPU reveals (ctest: gpu_check_selftest).
#
# run.sh itself skips where there is no GPU, so nothing else would notice a
# syntax error in it, a CUDA program that no longer compiles, or check.py
# reading keys the JSON report does not have. This script:
#   1. parses run.sh (bash -n), check.py and torch_allocs.py;
#   2. compiles alloc_kinds.cu and bench_async.cu with nvcc, as run.sh does,
#      when nvcc is installed (CUDA_HOME, default /usr/local/cuda; no GPU is
#      needed to compile);
#   3. records fx_gpu_events (which hands GPU events with known sizes to
#      libmemlens) with the real `memlens run`, writes the JSON report, and runs
#      check.py on it with the fixture's ground truth in alloc_kinds' format:
#      every row must be ok; then with one number or name wrong, the matching
#      row must say FAIL and check.py must exit 1;
#   4. the same for check.py's "torch native" checks with numbers taken from
#      the same fixture;
#   5. check.py's --gpu-pools check on a fake-CUPTI trace (CUPTI builds).
# Exits 0 when all of that holds, 1 otherwise, printing what went wrong.
set -uo pipefail

BUILD=${1:?usage: selftest.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/tests/gpu
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
WORK=$(mktemp -d /tmp/memlens-gpu-selftest.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# --- 1. the scripts parse ---------------------------------------------------------
bash -n "$HERE/run.sh" || fail "run.sh does not parse"
bash -n "$HERE/bundle.sh" || fail "bundle.sh does not parse"
python3 -c 'import ast, sys
for f in sys.argv[1:]:
    ast.parse(open(f).read(), f)' "$HERE/check.py" "$HERE/torch_allocs.py" ||
    fail "check.py or torch_allocs.py does not parse"

# --- 2. the CUDA programs compile -------------------------------------------------
if [ -x "$NVCC" ]; then
    # The same commands as run.sh.
    if ! "$NVCC" -O1 -g -o "$WORK/alloc_kinds" "$HERE/alloc_kinds.cu" -L"$CUDA_HOME/lib64/stubs" \
            -lcuda -lpthread >"$WORK/nvcc.log" 2>&1 ||
       ! "$NVCC" -O2 -o "$WORK/bench_async" "$HERE/bench_async.cu" >>"$WORK/nvcc.log" 2>&1; then
        cat "$WORK/nvcc.log"
        fail "nvcc could not compile the GPU test programs"
    else
        echo "ok: nvcc compiled alloc_kinds.cu and bench_async.cu"
    fi
else
    echo "note: $NVCC not found, the CUDA programs were not compiled (set CUDA_HOME or NVCC)"
fi

# --- 3. check.py on a real report -------------------------------------------------
ML=$BUILD/memlens
if ! out=$("$ML" run -q -o "$WORK/fx.mlt" -- "$BUILD/fx_gpu_events" 2>&1) ||
   ! "$ML" report "$WORK/fx.mlt" --json "$WORK/fx.json" >/dev/null 2>"$WORK/report.err"; then
    echo "$out"
    cat "$WORK/report.err"
    fail "could not record and report fx_gpu_events"
    exit 1
fi

MiB=1048576
# fx_gpu_events' scenario on device 0 (see its header), in the form
# alloc_kinds.cu prints: device = 1 MiB freed + the 5 MiB leak, the pitched
# 102400 B whose free failed, and so on.
expect() { # expect PEAK LEAK_FUNCTION
    cat <<EOF
{"device": 0, "peak_bytes": $1, "leaked_bytes": $((5 * MiB + 102400)), "kinds": {
 "device": $((6 * MiB)), "pitch": 102400, "managed": $((4 * MiB)), "host_pinned": 131072,
 "host_registered": 4096, "async": $MiB, "pool": $((2 * MiB)), "array": 16384,
 "vmm_physical": $((2 * MiB)), "vmm_reserve": $((8 * MiB)), "vmm_map": $((2 * MiB))},
 "leak_function": "$2"}
EOF
}
PEAK=$((15 * MiB + 102400 + 16384))

expect $PEAK gpu_leaky_site >"$WORK/good.json"
python3 "$HERE/check.py" kinds "$WORK/fx.json" "$WORK/good.json" >"$WORK/good.tsv"
rc=$?
rows=$(wc -l <"$WORK/good.tsv")
bad=$(awk -F'\t' '$4 != "ok" && $4 != "info"' "$WORK/good.tsv")
if [ $rc != 0 ] || [ -n "$bad" ] || [ "$rows" -lt 15 ]; then
    cat "$WORK/good.tsv"
    fail "check.py kinds on the right numbers: exit $rc, $rows rows, expected exit 0 and every row ok"
else
    echo "ok: check.py kinds passes the fixture's report ($rows rows)"
fi

# One wrong number, one wrong name: the matching row fails, and only it.
wrong() { # wrong EXPECT_FILE ROW_PREFIX
    python3 "$HERE/check.py" kinds "$WORK/fx.json" "$1" >"$WORK/wrong.tsv"
    local rc=$? failed
    failed=$(awk -F'\t' '$4 == "FAIL" { print $1 }' "$WORK/wrong.tsv")
    if [ $rc != 1 ] || [ "$(wc -l <<<"$failed")" != 1 ] || [[ "$failed" != "$2"* ]]; then
        cat "$WORK/wrong.tsv"
        fail "check.py kinds with a wrong '$2': exit $rc (expected 1), failed rows: ${failed:-none}"
    else
        echo "ok: check.py kinds catches a wrong '$2'"
    fi
}
expect $((PEAK + 4096)) gpu_leaky_site >"$WORK/bad-peak.json"
wrong "$WORK/bad-peak.json" "peak bytes"
expect $PEAK main_leaks_nothing >"$WORK/bad-leak.json"
wrong "$WORK/bad-leak.json" "leak site names"
sed 's/"managed": [0-9]*/"managed": 1/' "$WORK/good.json" >"$WORK/bad-managed.json"
wrong "$WORK/bad-managed.json" "managed bytes"

# --- 4. check.py's PyTorch checks read real keys ------------------------------------
# torch_allocs.py's keys, with the numbers fx_gpu_events' device 0 has: two
# cudaMalloc-kind allocations, the 5 MiB one alive at exit, 128 KiB pinned.
torch_json() { # torch_json RESERVED_AT_EXIT
    printf '{"mode": "native", "reserved_with_x_y": %d, "pinned_bytes": 131072, "managed_rc": 0, "num_device_alloc": 2, "num_device_free": 1, "reserved_at_exit": %d, "torch": "test"}\n' \
        "$PEAK" "$1"
}
torch_json $((5 * MiB)) >"$WORK/torch.json"
python3 "$HERE/check.py" torch native "$WORK/fx.json" "$WORK/torch.json" >"$WORK/torch.tsv"
rc=$?
bad=$(awk -F'\t' '$4 != "ok"' "$WORK/torch.tsv")
if [ $rc != 0 ] || [ -n "$bad" ] || [ "$(wc -l <"$WORK/torch.tsv")" -lt 5 ]; then
    cat "$WORK/torch.tsv"
    fail "check.py torch native on matching numbers: exit $rc, expected 0 and every row ok"
else
    echo "ok: check.py torch native passes matching numbers"
fi
torch_json $((6 * MiB)) >"$WORK/torch-bad.json"
python3 "$HERE/check.py" torch native "$WORK/fx.json" "$WORK/torch-bad.json" >"$WORK/torch.tsv"
rc=$?
if [ $rc != 1 ] || ! grep -q $'^native: live at exit = memory_reserved().*\tFAIL$' "$WORK/torch.tsv"; then
    cat "$WORK/torch.tsv"
    fail "check.py torch native with a wrong reserved_at_exit: exit $rc, expected 1 and that row FAIL"
else
    echo "ok: check.py torch native catches a wrong reserved_at_exit"
fi

# The async and expandable checks read real keys too: with native's numbers
# they may judge rows FAIL (exit 1), but must not break (a traceback exits 1
# without rows, so the row count is checked as well).
for mode in async expandable; do
    sed "s/\"native\"/\"$mode\"/" "$WORK/torch.json" >"$WORK/torch-$mode.json"
    python3 "$HERE/check.py" torch "$mode" "$WORK/fx.json" "$WORK/torch-$mode.json" >"$WORK/torch-$mode.tsv" 2>"$WORK/torch-$mode.err"
    rc=$?
    n=$(grep -c "^$mode: " "$WORK/torch-$mode.tsv")
    if [ $rc -gt 1 ] || [ -s "$WORK/torch-$mode.err" ] || [ "$n" -lt 4 ]; then
        cat "$WORK/torch-$mode.tsv" "$WORK/torch-$mode.err"
        fail "check.py torch $mode: exit $rc, $n rows of its own (expected at least 4, no error output)"
    else
        echo "ok: check.py torch $mode reads the report ($n rows)"
    fi
done

# --- 5. check.py's pool check reads real keys (CUPTI builds) -----------------------
# fx_gpu_inject's "pools" mode has the fake libcupti deliver activity
# records: an explicit pool peaks at 8 MiB reserved.
if [ -x "$BUILD/fx_gpu_inject" ] && [ -e "$BUILD/fakecupti/libcupti.so.12" ]; then
    if ! "$ML" run -q --gpu-pools -o "$WORK/pools.mlt" -- "$BUILD/fx_gpu_inject" \
            "$BUILD/fakecupti/libcupti.so.12" pools >/dev/null 2>&1 ||
       ! "$ML" report "$WORK/pools.mlt" --json "$WORK/pools.json" >/dev/null 2>&1; then
        fail "could not record and report fx_gpu_inject --gpu-pools"
    else
        python3 "$HERE/check.py" pools "$WORK/pools.json" $((8 * MiB)) >"$WORK/pools.tsv"
        ok=$?
        python3 "$HERE/check.py" pools "$WORK/pools.json" $((8 * MiB + 1)) >"$WORK/pools-bad.tsv"
        bad=$?
        if [ $ok != 0 ] || [ $bad != 1 ] || ! grep -q $'\t8388608\tok$' "$WORK/pools.tsv"; then
            cat "$WORK/pools.tsv" "$WORK/pools-bad.tsv"
            fail "check.py pools: exit $ok on 8 MiB (expected 0), $bad on 8 MiB + 1 (expected 1)"
        else
            echo "ok: check.py pools reads the explicit pool's 8 MiB and fails above it"
        fi
    fi
else
    echo "note: no CUPTI build (fx_gpu_inject, fake libcupti): check.py pools not exercised"
fi

if [ $failures != 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all GPU-check self-tests passed"
