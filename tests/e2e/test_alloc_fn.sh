#!/usr/bin/env bash
# --alloc-fn (docs/analysis.md "Sites and symbols"): functions the program
# allocates through count as the allocator, so sites are named by their
# callers, in report (text and JSON), diff and the viewer.
#   - without it, fx_alloc_fn's 7 allocations are named by pool_raw's line;
#   - with --alloc-fn pool_raw --alloc-fn 'x*' (xmalloc, xstrdup), they are
#     the four lines that asked: load_index :28 (4 x 1000 B), parse_names
#     :32 (6 B) and :33 (11 B), main :39 (300 B); each pattern's count of
#     stacks is in the JSON; the totals do not change;
#   - the plain text report suggests the two patterns, and stops once given;
#   - a pattern that names nothing is said, and a lone '*' (every frame)
#     keeps the stacks whole rather than losing them;
#   - the same sites in `memlens report DIR` (an unmatched pattern said once),
#     `memlens diff` and `memlens view --batch`.
# usage: test_alloc_fn.sh BUILD_DIR
set -u
. "$(dirname "${BASH_SOURCE[0]}")/checks_lib.sh" # ok, bad, fails
B=$(cd "${1:?build dir}" && pwd)
ML="$B/memlens"
W=$(mktemp -d /tmp/memlens-allocfn-XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$W"' EXIT
cd "$W" || exit 2

"$ML" run -q -o t.mlt -- "$B/fx_alloc_fn" >/dev/null || { echo "FAIL memlens run"; exit 1; }

# sites.py JSON: "function:line calls bytes" of each site's headline, sorted.
cat >sites.py <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = []
for s in d["sites"]:
    f = s["frames"][s.get("headline", 0)]
    if not (f.get("file") or "").endswith("fx_alloc_fn.c"):
        continue
    rows.append("%s:%s %d %d" % (f["function"], f["line"], s["alloc_calls"], s["bytes_allocated"]))
print("\n".join(sorted(rows)))
print("alloc_fns " + " ".join("%s=%d" % (a["pattern"], a["stacks"]) for a in d.get("alloc_fns", [])))
print("total %d %d" % (d["totals"]["alloc_calls"], d["totals"]["bytes_allocated"]))
PY

"$ML" report t.mlt -q --no-advisor --json plain.json || bad "report without --alloc-fn"
want_plain="main:40 1 4096
pool_raw:11 1 11
pool_raw:11 1 300
pool_raw:11 1 6
pool_raw:11 4 4000
alloc_fns 
total $(python3 -c 'import json; d=json.load(open("plain.json")); print(d["totals"]["alloc_calls"], d["totals"]["bytes_allocated"])')"
got=$(python3 sites.py plain.json)
[ "$got" = "$want_plain" ] && ok "without --alloc-fn: every site named pool_raw:11 (7 calls, 4317 B), and printf's buffer" ||
    bad "without --alloc-fn: got [$got] want [$want_plain]"

"$ML" report t.mlt -q --no-advisor --alloc-fn pool_raw --alloc-fn 'x*' --json fn.json 2>err.txt ||
    bad "report with --alloc-fn"
got=$(python3 sites.py fn.json)
want="load_index:28 4 4000
main:39 1 300
main:40 1 4096
parse_names:32 1 6
parse_names:33 1 11
alloc_fns pool_raw=4 x*=4
$(echo "$want_plain" | tail -1)"
[ "$got" = "$want" ] && ok "--alloc-fn pool_raw --alloc-fn 'x*': the four callers' lines, exact calls and bytes" ||
    bad "--alloc-fn: got [$got] want [$want]"
[ ! -s err.txt ] && ok "no warning when every pattern names frames" || bad "warned: $(cat err.txt)"

# The text report names the callers too.
"$ML" report t.mlt --alloc-fn pool_raw --alloc-fn 'x*' >text.txt 2>&1
grep -q 'load_index  fx_alloc_fn.c:28' text.txt && ! grep -q 'pool_raw  fx_alloc_fn.c:11' text.txt &&
    ok "text report: load_index fx_alloc_fn.c:28, no pool_raw site" || bad "text report: $(grep -A3 'top sites' text.txt)"

# The plain text report suggests the patterns: the function that names the
# sites, and the chain all of them share above it.
"$ML" report t.mlt >hint.txt 2>&1
grep -qx "hint: pool_raw  fx_alloc_fn.c:11 names 4 sites and 88% of the allocation calls, always called through xmalloc." hint.txt &&
    grep -q -- "name the sites by them with --alloc-fn 'pool_raw' --alloc-fn 'xmalloc'\$" hint.txt &&
    ok "the text report suggests --alloc-fn 'pool_raw' --alloc-fn 'xmalloc' (4 sites, 88% of the calls)" ||
    bad "hint: $(grep -A1 '^hint' hint.txt)"
! grep -q '^hint' text.txt && ok "and not once they are given" || bad "hint with --alloc-fn: $(grep -A1 '^hint' text.txt)"

# Only the first level: xmalloc's callers are not reached past xstrdup.
"$ML" report t.mlt -q --no-advisor --alloc-fn pool_raw --alloc-fn xmalloc --json lvl.json
got=$(python3 sites.py lvl.json | grep '^xstrdup:24 ' | sort | tr '\n' ' ')
[ "$got" = "xstrdup:24 1 11 xstrdup:24 1 6 " ] &&
    ok "a wrapper not named (xstrdup) is the site of what it asked for: xstrdup:24, one site per caller" ||
    bad "xstrdup level: $(python3 sites.py lvl.json)"

# A pattern that names nothing is said (a typo would otherwise go unnoticed).
"$ML" report t.mlt --no-advisor --alloc-fn pool_raw --alloc-fn xmaloc --json typo.json >/dev/null 2>err.txt
grep -q "alloc-fn 'xmaloc' names no frame" err.txt && ok "an unmatched pattern is warned of" ||
    bad "unmatched pattern: $(cat err.txt)"
python3 -c 'import json,sys; d=json.load(open("typo.json")); sys.exit(0 if d["alloc_fns"] == [{"pattern": "pool_raw", "stacks": 4}, {"pattern": "xmaloc", "stacks": 0}] else 1)' &&
    ok "and counted 0 in the JSON (pool_raw 4 stacks)" || bad "typo JSON: $(grep -o '"alloc_fns".\{0,120\}' typo.json)"

# Many traces at once: the patterns apply to each; one that names nothing in
# any of them is said once.
mkdir many && cp t.mlt many/a.mlt && cp t.mlt many/b.mlt
"$ML" report many --alloc-fn pool_raw --alloc-fn 'x*' --alloc-fn xmaloc >many.txt 2>many.err
grep -q 'load_index  fx_alloc_fn.c:28' many.txt && ! grep -q 'pool_raw  fx_alloc_fn.c:11' many.txt &&
    ok "report DIR: the sites are the callers' too" || bad "report DIR: $(grep -A3 'top sites' many.txt)"
[ "$(grep -c "alloc-fn 'xmaloc' names no frame at the top of any stack of the 2 traces" many.err)" = 1 ] &&
    [ "$(grep -c 'alloc-fn' many.err)" = 1 ] &&
    ok "report DIR: the unmatched pattern is said once, for the 2 traces" || bad "report DIR warnings: $(cat many.err)"

# '*' drops every frame: the stacks are kept whole, as a stack of malloc frames is.
"$ML" report t.mlt -q --no-advisor --alloc-fn '*' --json all.json || bad "report --alloc-fn '*'"
n=$(python3 -c 'import json; d=json.load(open("all.json")); print(sum(s["alloc_calls"] for s in d["sites"]), d["totals"]["alloc_calls"])')
set -- $n
[ "$1" = "$2" ] && ok "--alloc-fn '*': every call still in a site ($1)" || bad "--alloc-fn '*': sites hold $1 of $2 calls"

"$ML" report t.mlt -q --alloc-fn '' >/dev/null 2>&1
[ $? -eq 2 ] && ok "an empty --alloc-fn is a usage error (exit 2)" || bad "empty --alloc-fn accepted"

# diff: the same trace twice, by the callers.
"$ML" diff t.mlt t.mlt -q --alloc-fn pool_raw --alloc-fn 'x*' --json diff.json || bad "diff --alloc-fn"
python3 - diff.json <<'PY' && ok "diff: sites keyed by the callers (load_index, parse_names, main)" || bad "diff sites: $(head -c 600 diff.json)"
import json, sys
d = json.load(open(sys.argv[1]))
names = set()
def walk(x):
    if isinstance(x, dict):
        for k, v in x.items():
            if k in ("function", "name") and isinstance(v, str):
                names.add(v)
            walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
walk(d)
sys.exit(0 if {"load_index", "parse_names"} <= names else 1)
PY

# The viewer's Sites list.
"$ML" view --batch --keys 2 --size 120x40 --no-suggestions --alloc-fn pool_raw --alloc-fn 'x*' t.mlt >view.txt 2>&1
grep -q 'load_index' view.txt && ! grep -q 'pool_raw' view.txt && ok "view: the Sites list names load_index, not pool_raw" ||
    bad "view: $(head -20 view.txt)"
"$ML" view --batch --keys 2 --size 120x40 --no-suggestions t.mlt >view0.txt 2>&1
! grep -q 'load_index' view0.txt && grep -q 'pool_raw' view0.txt && ok "view without --alloc-fn: pool_raw" ||
    bad "view without: $(head -20 view0.txt)"

echo "$fails failed"
[ "$fails" -eq 0 ]
