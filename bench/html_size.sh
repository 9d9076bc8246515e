#!/bin/bash
# html_size.sh - the size of the HTML page of a python3 recording with
# thousands of allocation sites, in the page's compact form (report --html)
# against the form of report --json (the page ml_html_from_json writes for
# that document), and their ratio.
#
#   bash bench/html_size.sh BUILD_DIR [FILES]
#
# FILES: how many files of Python's standard library the recorded python3
# compiles (default 16: about 7,000 sites; the parser's recursion gives a
# distinct stack per depth). The target (issue 15.3): a 6,000-site page is at
# most 4 MB.
set -eu
B=${1:?usage: html_size.sh BUILD_DIR [FILES]}
N=${2:-16}
PY=/usr/bin/python3
W=$(mktemp -d "${TMPDIR:-/tmp}/ml_html_size.XXXXXX")
trap 'rm -rf "$W"' EXIT
"$B/memlens" run -q -o "$W/py.mlt" -- "$PY" -c "import ast,glob,json,decimal,email,http.client
for f in sorted(glob.glob('/usr/lib/python3*/*.py'))[:$N]: compile(open(f).read(), f, 'exec')"
"$B/memlens" report -q "$W/py.mlt" --no-advisor --html "$W/page.html" --json "$W/doc.json"
"$B/ml_html_from_json" "$W/doc.json" "$W/plain.html"
sites=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["sites"]))' "$W/doc.json")
c=$(stat -c %s "$W/page.html")
p=$(stat -c %s "$W/plain.html")
awk -v s="$sites" -v c="$c" -v p="$p" 'BEGIN {
    printf "sites %d\n", s
    printf "page, report --json form  %10d bytes (%.1f MB)\n", p, p / 1e6
    printf "page, compact form        %10d bytes (%.1f MB)\n", c, c / 1e6
    printf "ratio                     %10.1fx smaller\n", p / c
    printf "per 6,000 sites           %10.2f MB (target: at most 4 MB)\n", c / s * 6000 / 1e6 }'
