#!/bin/sh
# test_exports_browser.sh - the exports opened by the programs people use.
#
#   sh test_exports_browser.sh BUILD_DIR
#
# Installs speedscope and Datadog's pprof-format from the npm registry into
# BUILD_DIR/exports-npm (once; versions pinned below; nothing of them is in
# the repository), records fx_leaks, writes its JSON report and both exports,
# and checks that
# - the speedscope file validates against the JSON schema speedscope ships
#   (file-format-schema.json, with python3-jsonschema), and a broken copy
#   does not;
# - pprof-format decodes the pprof file to the same profile, field by field,
#   as our own decoder (check_exports.py same-pprof);
# - speedscope's page (served on localhost, loaded in headless Chromium with
#   #profileURL=...&view=sandwich) imports both files: the sandwich table
#   lists the fixture's functions with their exact weights, the speedscope
#   file's five profiles with their totals; the pprof file of another
#   program (fx_inline) does not pass the same check.
# Exit 77 (ctest SKIP_RETURN_CODE) when chromium, node/npm or
# python3-jsonschema are missing or the npm registry cannot be reached.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(realpath "${1:?usage: test_exports_browser.sh BUILD_DIR}")
M=$B/memlens
PY=/usr/bin/python3
SPEEDSCOPE_VERSION=1.25.0
PPROF_FORMAT_VERSION=2.3.2

CHROME=${ML_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$CHROME" ] || { echo "SKIP: no chromium (apt-get install chromium)"; exit 77; }
command -v node > /dev/null && command -v npm > /dev/null || { echo "SKIP: no node/npm"; exit 77; }
"$PY" -c 'import jsonschema' 2> /dev/null || { echo "SKIP: no python3-jsonschema"; exit 77; }

NPM=$B/exports-npm
NM=$NPM/node_modules
if ! grep -qs "\"version\": \"$SPEEDSCOPE_VERSION\"" "$NM/speedscope/package.json" ||
    ! grep -qs "\"version\": \"$PPROF_FORMAT_VERSION\"" "$NM/pprof-format/package.json"; then
    mkdir -p "$NPM" && (cd "$NPM" && [ -f package.json ] || echo '{"private": true}' > package.json) &&
        (cd "$NPM" && timeout 300 npm install --no-audit --no-fund --ignore-scripts --loglevel=error \
            "speedscope@$SPEEDSCOPE_VERSION" "pprof-format@$PPROF_FORMAT_VERSION") ||
        { echo "SKIP: npm install speedscope pprof-format failed (no registry?)"; exit 77; }
fi
APP=$NM/speedscope/dist/release
[ -f "$APP/index.html" ] && [ -f "$APP/file-format-schema.json" ] || { echo "FAIL: speedscope's release files are missing"; exit 1; }

W=$(mktemp -d "${TMPDIR:-/tmp}/ml_exports_browser.XXXXXX") || exit 1
SERVER=
cleanup() {
    [ -n "$SERVER" ] && kill "$SERVER" 2> /dev/null
    rm -rf "$W"
}
trap cleanup EXIT INT TERM
n=0
bad() {
    echo "FAIL: $*"
    n=$((n + 1))
}

"$M" run -q -o "$W/leaks.mlt" -- "$B/fx_leaks" 3 > /dev/null 2>&1 || bad "memlens run exited $?"
"$M" report "$W/leaks.mlt" -q --no-advisor --json "$W/leaks.json" --pprof "$W/leaks.pb.gz" \
    --speedscope "$W/leaks.ss.json" || bad "memlens report exited $?"
"$M" run -q -o "$W/other.mlt" -- "$B/fx_inline" > /dev/null 2>&1 || bad "memlens run exited $?"
"$M" report "$W/other.mlt" -q --pprof "$W/other.pb.gz" || bad "memlens report exited $?"

# --- speedscope's schema ----------------------------------------------------------
"$PY" - "$APP/file-format-schema.json" "$W/leaks.ss.json" <<'EOF' || bad "schema validation"
import copy, json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
doc = json.load(open(sys.argv[2]))
v = jsonschema.Draft7Validator(schema)
errors = list(v.iter_errors(doc))
for e in errors[:10]:
    print("FAIL: schema: %s at %s" % (e.message, list(e.path)))
broken = copy.deepcopy(doc)
broken["profiles"][0]["unit"] = "kilobytes"
broken["shared"]["frames"][0]["line"] = "12"
caught = len(list(v.iter_errors(broken)))
if caught < 2:
    print("FAIL: schema: a copy with a wrong unit and a string line passed (%d errors)" % caught)
print("ok: the speedscope file validates against speedscope's schema (a broken copy: %d errors)" % caught)
sys.exit(1 if errors or caught < 2 else 0)
EOF

# --- another decoder ----------------------------------------------------------------
node "$HERE/pprof_format_dump.mjs" "$NM" "$W/leaks.pb.gz" > "$W/leaks.other.json" || bad "pprof-format cannot decode"
"$PY" "$HERE/check_exports.py" same-pprof "$W/leaks.pb.gz" "$W/leaks.other.json" || bad "the decoders disagree"

# --- speedscope's page ----------------------------------------------------------------
mkdir -p "$W/www" && cp -r "$APP"/. "$W/www/" && cp "$W/leaks.pb.gz" "$W/leaks.ss.json" "$W/other.pb.gz" "$W/www/"
"$PY" -c '
import functools, http.server, sys
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
    functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1]))
open(sys.argv[2], "w").write(str(srv.server_address[1]))
srv.serve_forever()' "$W/www" "$W/port" 2> "$W/http.log" &
SERVER=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$W/port" ] && break; sleep 0.5; done
PORT=$(cat "$W/port" 2> /dev/null) || { echo "FAIL: the local web server did not start"; exit 1; }

page() { # page NAME FILE: the DOM of speedscope's sandwich view of FILE
    # On a loaded machine the DOM was once dumped before the page had drawn
    # its table (no row at all, in a fresh clone's test run with both cores
    # busy): a DOM without a table cell is taken again, twice at most.
    for try in 1 2 3; do
        timeout 90 "$CHROME" --headless=new --no-sandbox --disable-gpu --disable-quic --no-first-run \
            --disable-background-networking --disable-component-update --disable-sync \
            --disable-extensions --disable-dev-shm-usage --user-data-dir="$W/profile-$1-$try" \
            --window-size=1200,800 --virtual-time-budget=8000 --dump-dom \
            "http://127.0.0.1:$PORT/index.html#profileURL=http%3A%2F%2F127.0.0.1%3A$PORT%2F$2&view=sandwich" \
            > "$W/$1.dom" 2> "$W/$1.log" || { bad "$1: chromium exited $?"; return; }
        grep -q '<td' "$W/$1.dom" && return
        echo "note: $1: no table in the page yet (try $try)"
    done
}
page pprof leaks.pb.gz
page speedscope leaks.ss.json
page other other.pb.gz

"$PY" - "$W" "$(grep -o '"pid": [0-9]*' "$W/leaks.json" | head -1 | cut -d' ' -f2)" <<'EOF' || bad "speedscope's page"
import html, re, sys
w, pid = sys.argv[1:]
fails = []

def rows(name):
    """The DOM's table rows (cells as text) and its title."""
    s = open("%s/%s.dom" % (w, name)).read()
    out = []
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", s, re.S):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if cells:
            out.append(cells)
    t = re.search(r"<title>([^<]*)</title>", s)
    return out, html.unescape(t.group(1)) if t else ""

def leaf_weights(name):
    """pprof in speedscope: the fixture's leaf functions -> self weights."""
    table, title = rows(name)
    return {k: v for k, v in selfs(table).items() if k in leaves}, title

def selfs(table):
    """Sandwich rows are [total, self, name]: name -> sorted self weights."""
    out = {}
    for r in table:
        if len(r) == 3 and not r[0].isdigit():
            out.setdefault(r[2], []).append(re.sub(r" \(.*\)$", "", r[1]))
    return {k: sorted(v) for k, v in out.items()}

# fx_leaks 3 at its peak: 1 MiB in peak_holder, 3 x 222 in drop_block, 333
# and 444 in make_chain (one function in pprof's view, two call sites in ours),
# 111 in keep_global.
leaves = ["peak_holder", "drop_block", "make_chain", "keep_global"]
got, title = leaf_weights("pprof")
want_pprof = {"peak_holder": ["1.00 MB"], "drop_block": ["666 B"], "make_chain": ["777 B"], "keep_global": ["111 B"]}
if got != want_pprof:
    fails.append("pprof in speedscope: self weights %s, expected %s" % (got, want_pprof))
if title != "leaks.pb.gz - speedscope":
    fails.append("pprof in speedscope: title %r" % title)

ss, title = rows("speedscope")
got = {k: v for k, v in selfs(ss).items() if k in leaves}
want = {"peak_holder": ["1.00 MB"], "drop_block": ["666 B"], "make_chain": ["333 B", "444 B"], "keep_global": ["111 B"]}
if got != want:
    fails.append("speedscope file: self weights %s, expected %s" % (got, want))
if not title.startswith("memlens: ") or "(pid %s)" % pid not in title:
    fails.append("speedscope file: title %r" % title)
profiles = [r for r in ss if len(r) == 3 and r[0].isdigit()]
names = [r[1] for r in profiles]
want_names = ["bytes allocated", "allocation calls", "bytes live at the peak",
              "bytes leaked (definite + indirect + possible)", "bytes live at exit (leaked + reachable)"]
if names != want_names:
    fails.append("speedscope file: profiles %s" % names)
elif profiles[1][2] != "7":
    fails.append("speedscope file: allocation calls total %r, expected 7" % profiles[1][2])

other, title = leaf_weights("other")
if other == want_pprof or title != "other.pb.gz - speedscope" or "outer_function" not in selfs(rows("other")[0]):
    fails.append("the control (fx_inline's profile) was not told apart: %s, %r" % (other, title))

for f in fails:
    print("FAIL: " + f)
if not fails:
    print("ok: speedscope %s imports both exports with the fixture's weights" % "page")
sys.exit(1 if fails else 0)
EOF

echo "test_exports_browser: $n failed"
[ "$n" -eq 0 ]
