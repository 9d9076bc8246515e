#!/bin/sh
# run_fuzz.sh FUZZER MEMLENS BIN_DIR SECONDS RUNS - a bounded fuzzing run of
# the trace reader with a seed corpus recorded here from fixture programs
# (plus a truncated and a header-only trace). Exits non-zero on any crash.
set -eu
fuzzer=$1 memlens=$2 bin=$3 secs=${4:-30} runs=${5:-100000}
started=$(date +%s)
work=$(mktemp -d /tmp/memlens-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
"$memlens" run -q -o "$work/corpus/counts.mlt" -- "$bin/fx_counts" >/dev/null || true
"$memlens" run -q -o "$work/corpus/leaks.mlt" -- "$bin/fx_leaks" 3 >/dev/null
"$memlens" run -q -o "$work/corpus/cpp.mlt" -- "$bin/fx_cpp" >/dev/null
"$memlens" run -q -o "$work/corpus/dlopen.mlt" -- "$bin/fx_dlopen" >/dev/null
"$memlens" run -q -o "$work/corpus/frag.mlt" -- "$bin/fx_frag" alternate >/dev/null
# GPU records (and, since snapshot version 2, GPU state in the snapshot).
if [ -x "$bin/fx_gpu_events" ]; then
  "$memlens" run -q -o "$work/corpus/gpu.mlt" -- "$bin/fx_gpu_events" >/dev/null
  "$memlens" run -q -o "$work/corpus/gpubusy.mlt" -- "$bin/fx_gpu_events" busy 200 20 >/dev/null
fi
size=$(wc -c <"$work/corpus/leaks.mlt")
head -c $((size / 2)) "$work/corpus/leaks.mlt" >"$work/corpus/truncated.mlt"
head -c 16 "$work/corpus/leaks.mlt" >"$work/corpus/header.mlt"
# Inputs that once found bugs run first.
cp "$(dirname "$0")"/regressions/* "$work/corpus/" 2>/dev/null || true
# Raw-record seeds ('R' + a chunk's decompressed records), when the zstd
# tool is there to unpack them.
if command -v zstd >/dev/null; then
  for t in "$work"/corpus/counts.mlt "$work"/corpus/leaks.mlt "$work"/corpus/cpp.mlt; do
    [ -s "$t" ] || continue
    comp=$(od -An -tu4 -j20 -N4 "$t" | tr -d ' ')
    raw="$work/corpus/raw-$(basename "$t" .mlt)"
    { printf R; tail -c +33 "$t" | head -c "$comp" | zstd -dc 2>/dev/null; } >"$raw" || rm -f "$raw"
  done
fi
# Snapshot seeds ('S' + the raw analysis snapshot a trace ends with): the
# trailer's last 8 bytes give the snapshot's offset, its frame follows a
# 16-byte header.
if command -v zstd >/dev/null; then
  for t in "$work"/corpus/leaks.mlt "$work"/corpus/cpp.mlt "$work"/corpus/frag.mlt \
           "$work"/corpus/gpu.mlt "$work"/corpus/gpubusy.mlt; do
    [ -s "$t" ] || continue
    size=$(wc -c <"$t")
    off=$(od -An -tu8 -j$((size - 8)) -N8 "$t" | tr -d ' ')
    [ -n "$off" ] && [ "$off" -gt 0 ] || continue
    raw="$work/corpus/snap-$(basename "$t" .mlt)"
    { printf S; tail -c +$((off + 17)) "$t" | head -c $((size - 24 - off - 16)) | zstd -dc 2>/dev/null; } >"$raw" ||
      rm -f "$raw"
  done
fi
# Saved strategy advice ('A' + the raw advice a report appends after the
# trailer: the last 24 bytes, "MLIX" 2, end with the advice block's offset;
# its frame follows a 16-byte header whose second u32 is the frame's
# length), and whole traces that carry it. A report that writes JSON runs
# the advisor and saves its result in the trace.
for f in fx_adv_realloc fx_adv_temp fx_adv_lifetimes; do
  [ -x "$bin/$f" ] || continue
  t="$work/corpus/adv-$f.mlt"
  "$memlens" run -q -o "$t" -- "$bin/$f" >/dev/null || continue
  "$memlens" report -q "$t" --json "$work/adv.json" >/dev/null 2>&1 || continue
  rm -f "$work/adv.json"
  command -v zstd >/dev/null || continue
  size=$(wc -c <"$t")
  off=$(od -An -tu8 -j$((size - 8)) -N8 "$t" | tr -d ' ')
  [ "$(od -An -tu4 -j$((size - 20)) -N4 "$t" | tr -d ' ')" = 2 ] && [ -n "$off" ] || continue
  comp=$(od -An -tu4 -j$((off + 4)) -N4 "$t" | tr -d ' ')
  raw="$work/corpus/advice-$f"
  { printf A; tail -c +$((off + 17)) "$t" | head -c "$comp" | zstd -dc 2>/dev/null; } >"$raw" || rm -f "$raw"
done
ls -l "$work/corpus"
# The seeds' time comes out of the fuzzing's, so that the test takes as long
# as it did before them.
secs=$((secs - ($(date +%s) - started)))
[ "$secs" -ge 10 ] || secs=10
status=0
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
  "$fuzzer" -max_total_time="$secs" -runs="$runs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus" || status=$?
if [ -n "$(ls "$work/artifacts")" ]; then
  echo "fuzz: crashing inputs:" && ls -l "$work/artifacts"
  mkdir -p "$bin/fuzz-artifacts" && cp "$work/artifacts"/* "$bin/fuzz-artifacts/"
  exit 1
fi
exit "$status"
