#!/usr/bin/env bash
# tests/gpu/bundle.sh [OUT] - a prebuilt memlens with the CUPTI collector and
# the shared libraries it needs, for tests/gpu/run.sh on a GPU machine that
# cannot build it (default OUT: .gpu-bundle beside the sources, which git
# ignores).
#
# The lent GPU machines (/work/.library/device) have nvcc, CMake and PyTorch
# but not libunwind, libdw, libzstd or ncurses, and reach no package
# registry, so memlens is built here and carried there:
#
#   tests/gpu/bundle.sh                      # here
#   device run, carry [".gpu-bundle"]:
#     ML_GPU_PREBUILT=.gpu-bundle tests/gpu/run.sh
#
# OUT holds memlens, libmemlens.so, libmemlens_cupti.so and lib/ with every
# library they need except the C and C++ runtimes (libc, libm, libstdc++,
# libgcc_s), which any machine with the CUDA toolkit has. The binaries are
# linked with an RPATH of $ORIGIN/lib (DT_RPATH, which also serves the
# libraries' own needs), so nothing is put in the profiled program's
# environment. Built on Debian 12 (glibc 2.36): it runs where glibc is as new.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/.gpu-bundle}
BUILD=$ROOT/build-gpu-bundle
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DML_BUILD_CUPTI=ON -DML_BUILD_TESTS=OFF \
    -DCUDAToolkit_ROOT="$CUDA_HOME" '-DCMAKE_BUILD_RPATH=$ORIGIN/lib' \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags \
    -DCMAKE_MODULE_LINKER_FLAGS=-Wl,--disable-new-dtags >"$BUILD.log" 2>&1 ||
    { tail -20 "$BUILD.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" >>"$BUILD.log" 2>&1 || { tail -20 "$BUILD.log"; exit 1; }
"$BUILD/memlens" --version | grep -q 'GPU (CUPTI) support: yes' ||
    { echo "bundle.sh: this build has no CUPTI collector (is the CUDA toolkit at $CUDA_HOME?)" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT/lib"
cp "$BUILD/memlens" "$BUILD/libmemlens.so" "$BUILD/libmemlens_cupti.so" "$OUT/"
# Every library the three need, resolved here, less the runtimes and the
# driver (libcuda is the GPU machine's own; libcupti is found there).
for f in "$OUT/memlens" "$OUT/libmemlens.so" "$OUT/libmemlens_cupti.so"; do
    ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
    case $(basename "$lib") in
    libc.so.* | libm.so.* | libstdc++.so.* | libgcc_s.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
        ld-linux*.so.* | libcuda.so.* | libcupti.so.*) ;;
    *) cp -L "$lib" "$OUT/lib/" ;;
    esac
done
# Each binary must find its libraries in the bundle, not by chance here.
for f in "$OUT/memlens" "$OUT/libmemlens.so" "$OUT/libmemlens_cupti.so"; do
    readelf -d "$f" | grep -q 'RPATH.*\$ORIGIN/lib' || { echo "bundle.sh: $f has no RPATH \$ORIGIN/lib" >&2; exit 1; }
done
ls "$OUT/lib" | sed 's/^/  lib\//'
echo "bundle.sh: $OUT ($(du -sh "$OUT" | cut -f1)); on the GPU machine: ML_GPU_PREBUILT=$(basename "$OUT") tests/gpu/run.sh"
