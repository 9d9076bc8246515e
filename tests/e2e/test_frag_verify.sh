#!/usr/bin/env bash
# The heap maps and the joint close of the peak and the worst moment
# (analysis/frag.c, analysis.c moment_close) on a real program: python3
# builds 150,000 objects of four kinds and a dict (a small copy of
# bench/record_bench.py's big heap), and frees them at exit: the peak and
# the worst moment are close together and close in one walk while it frees. The trace is reported with --replay (the closes run again) and
# ML_FRAG_VERIFY=1, which makes each map again with the second walk and each
# jointly closed moment again with its own walk, and says on stderr whether
# they agree. Every check must agree, the joint close must have happened,
# and the JSON must be the one a report without the checks writes.
#
# usage: test_frag_verify.sh BUILD_DIR      (exit 77 = skipped: no python3)
set -u
ML="${1:?build dir}/memlens"
W=$(mktemp -d /tmp/memlens-fragv-XXXXXX)
trap 'rm -rf "$W"' EXIT
export LC_ALL=C HOME="$W"
[ -x /usr/bin/python3 ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
cat > "$W/drop.py" <<'PY'
class S:
    __slots__ = ('a', 'b')
    def __init__(self, a, b):
        self.a = a
        self.b = b
keep = []
for i in range(150000):
    keep.append(((i, i + 1), 's%d' % i, S(i, -i), [i]))
d = {}
for i in range(37500):
    d['k%d' % i] = i
print(len(keep), len(d))
PY
fail=0
PYTHONMALLOC=malloc "$ML" run -q -o "$W/t.mlt" -- /usr/bin/python3 "$W/drop.py" >/dev/null 2>&1 </dev/null ||
    { echo "FAIL: recording failed"; exit 1; }
"$ML" report "$W/t.mlt" --replay --no-advisor --json "$W/plain.json" -q 2>"$W/plain.err" ||
    { echo "FAIL: report failed"; cat "$W/plain.err"; exit 1; }
ML_FRAG_VERIFY=1 "$ML" report "$W/t.mlt" --replay --no-advisor --json "$W/verify.json" -q 2>"$W/verify.err" ||
    { echo "FAIL: report with ML_FRAG_VERIFY failed"; cat "$W/verify.err"; exit 1; }
maps=$(grep -c "the page list agrees with the walk" "$W/verify.err")
joint=$(grep -c "the joint walk agrees with its own walk" "$W/verify.err")
bad=$(grep "ML_FRAG_VERIFY" "$W/verify.err" | grep -vc "agrees")
grep "ML_FRAG_VERIFY" "$W/verify.err" | grep -v "agrees" | head -5
if [ "$bad" != 0 ]; then echo "FAIL: $bad checks disagree"; fail=1; fi
if [ "$joint" != 2 ]; then echo "FAIL: $joint moments closed jointly (want the peak and the worst: 2)"; fail=1; fi
if [ "$maps" -lt 3 ]; then echo "FAIL: only $maps heap maps checked (the two closes and the end: at least 3)"; fail=1; fi
if ! cmp -s "$W/plain.json" "$W/verify.json"; then echo "FAIL: the JSON differs with ML_FRAG_VERIFY"; fail=1; fi
[ "$fail" = 0 ] && echo "ok: $maps heap maps and $joint jointly closed moments agree with the walks they replace"
exit $fail
