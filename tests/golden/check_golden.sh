#!/bin/sh
# check_golden.sh - the golden traces end to end (tests/golden/README.md):
# writes the traces with ml_make_golden, runs the real `memlens report` and
# `memlens diff` on them and compares every output byte for byte with the
# checked-in files in expected/.
#
# usage: check_golden.sh MEMLENS MAKE_GOLDEN EXPECTED_DIR WORK_DIR [DOCS_DIR]
# With DOCS_DIR (and python3) the JSON documents are also checked against
# DOCS_DIR/report-schema.json and diff-schema.json.
# ML_GOLDEN_UPDATE=1 writes the outputs into EXPECTED_DIR instead (after a
# change of output that is meant; review the diff before committing it).
set -u
M=$(realpath "$1") G=$(realpath "$2") E=$(realpath -m "$3") W=$(realpath -m "$4")
D=${5:+$(realpath "$5")}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)
rm -rf "$W"
mkdir -p "$W/out" || exit 2
"$G" "$W" || { echo "check_golden: ml_make_golden failed" >&2; exit 2; }
cd "$W" || exit 2
# Relative paths: the documents name the trace as it was given.
for t in heap gpu cut; do
    "$M" report -q --no-advisor "$t.mlt" --json "out/$t.json" > /dev/null 2>&1
    echo "rc=$?" > "out/$t.json.rc"
    "$M" report "$t.mlt" > "out/$t.txt" 2>&1
    echo "rc=$?" >> "out/$t.txt"
done
# The advisor's report: its wall time ("advisor": {"seconds": ...}) is the
# one number that differs between two runs, so it is written as 0 here.
"$M" report -q advice.mlt --json out/advice.raw.json > /dev/null 2>&1
echo "rc=$?" > out/advice.json.rc
sed 's/"seconds": [0-9.]*/"seconds": 0/' out/advice.raw.json > out/advice.json && rm out/advice.raw.json
"$M" diff heap.mlt cut.mlt --json out/diff.json > out/diff.txt 2>&1
echo "rc=$?" >> out/diff.txt

n=0
if [ -n "$D" ] && [ -n "$PY" ]; then
    V=$HERE/../e2e/validate_json.py
    for f in out/heap.json out/gpu.json out/cut.json out/advice.json; do
        "$PY" "$V" "$D/report-schema.json" "$f" || { echo "INVALID: $f"; n=$((n + 1)); }
    done
    "$PY" "$V" "$D/diff-schema.json" out/diff.json || { echo "INVALID: out/diff.json"; n=$((n + 1)); }
fi

if [ "${ML_GOLDEN_UPDATE:-0}" = 1 ]; then
    rm -f "$E"/*
    cp out/* "$E"/ && echo "check_golden: wrote $(ls out | wc -l) files to $E"
    [ "$n" -eq 0 ]
    exit
fi
for f in "$E"/*; do
    b=$(basename "$f")
    [ "$b" = README.md ] && continue
    if [ ! -e "out/$b" ]; then
        echo "MISSING: $b"
        n=$((n + 1))
    elif ! cmp -s "$f" "out/$b"; then
        echo "DIFFERS: $b"
        diff -u "$f" "out/$b" | head -40
        n=$((n + 1))
    fi
done
for f in out/*; do
    [ -e "$E/$(basename "$f")" ] || { echo "EXTRA: $(basename "$f") (not in $E)"; n=$((n + 1)); }
done
echo "check_golden: $(ls out | wc -l) outputs, $n differ"
[ "$n" -eq 0 ]
