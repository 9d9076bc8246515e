#!/usr/bin/env bash
# plugin_swap_check.sh - a plugin host's worker keeps each plugin's sites.
#
# fx_dlopen swap-busy: the main thread loads libfxplugin.so and
# libfxplugin_b.so (the build's fxplugins/: the same code at the same
# offsets, other names and sizes) in turn, 200 times each, each closed
# before the next is opened, so that each is loaded where the other was. A worker thread runs each plugin's function
# (3 blocks of 333 bytes for a, 444 for b), and three threads allocate
# beside it all along. Every run must give 600 calls of plugin_alloc with
# 333-byte blocks and 600 of plugin_b_alloc with 444-byte blocks. A stack of
# the worker interned before the module scan that parks the other plugin's
# trie nodes, or with node ids kept from before such a scan, is charged to
# the other plugin (docs/recorder.md, "Another object where an unloaded one
# was"). Timing-dependent, so not part of ctest; a CPU hog beside it
# (HOG=1) makes the races likelier.
#
# usage: tests/plugin_swap_check.sh BUILD [RUNS]   (exit 1 if a run was wrong)
set -u
build=$(cd "${1:?usage: plugin_swap_check.sh BUILD [RUNS]}" && pwd)
runs=${2:-50}
work=$(mktemp -d /tmp/memlens-swap.XXXXXX)
hog=
trap '[ -n "$hog" ] && kill "$hog"; rm -rf "$work"' EXIT
cat >"$work/check.py" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
got = []
for s in j["sites"]:
    for f in s["frames"]:
        if f.get("function") in ("plugin_alloc", "plugin_b_alloc"):
            got.append((f["function"], s["alloc_calls"], s["bytes_allocated"]))
            break
got.sort()
want = [("plugin_alloc", 600, 600 * 333), ("plugin_b_alloc", 600, 600 * 444)]
print(("ok " if got == want else "WRONG ") + " ".join("%s:%d calls,%d B" % g for g in got))
PY
if [ "${HOG:-0}" = 1 ]; then
    (while :; do :; done) &
    hog=$!
fi
for i in $(seq "$runs"); do
    "$build/memlens" run -q -o "$work/t.mlt" -- "$build/fx_dlopen" swap-busy >/dev/null ||
        { echo "run $i: memlens run failed"; continue; }
    "$build/memlens" report "$work/t.mlt" -q --no-advisor --json "$work/t.json" || { echo "run $i: report failed"; continue; }
    /usr/bin/python3 "$work/check.py" "$work/t.json"
done | sort | uniq -c | tee "$work/out"
! grep -q -v ' ok ' "$work/out"
