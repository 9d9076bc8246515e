#!/bin/sh
# test_html_browser.sh - the HTML report in a real browser (headless Chromium).
#
#   sh test_html_browser.sh GEN FIXTURE.json [MEMLENS FIXTURE_PROGRAM]
#
# GEN writes the page for a JSON report (ml_html_from_json). The fixture
# document is rendered, and, when MEMLENS is given and its `report` knows
# --html, so is the report of a real recording of FIXTURE_PROGRAM. For each
# page, Chromium dumps the DOM after the script ran and takes a screenshot;
# the test fails when
# - the page's script reported an error (<pre id="errors"> is not empty) or
#   the browser logged any console message (our script logs only errors; a
#   blocked resource or a Content-Security-Policy violation logs one too);
# - a hostile string from the report became markup (an <img> element, the
#   data-pwned attribute its onerror handler would set);
# - the timeline or the flame graph have no drawn elements;
# - the chart areas of the screenshot are blank (one colour).
# Exit 77 (ctest SKIP_RETURN_CODE) when Chromium or python3 is missing.
set -u

GEN=${1:?usage: test_html_browser.sh GEN FIXTURE.json [MEMLENS FIXTURE_PROGRAM]}
FIXTURE=${2:?usage: test_html_browser.sh GEN FIXTURE.json [MEMLENS FIXTURE_PROGRAM]}
MEMLENS=${3:-}
PROGRAM=${4:-}

CHROME=${ML_CHROMIUM:-}
if [ -z "$CHROME" ]; then
    for c in chromium chromium-browser google-chrome; do
        if command -v "$c" >/dev/null 2>&1; then CHROME=$(command -v "$c"); break; fi
    done
fi
if [ -z "$CHROME" ]; then
    echo "SKIP: no chromium found (apt-get install chromium)"
    exit 77
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is needed to check the screenshot"
    exit 77
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ml_html_browser.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT INT TERM
SIZE=1400,4600

fail() {
    echo "FAIL: $*"
    exit 1
}

chrome() { # chrome TAG ARGS... : one fresh browser with its own profile
    tag=$1 # (sh has no local variables: not "name", which check_page uses)
    shift
    # timeout: a wedged browser must fail the test, not hang it
    timeout 90 "$CHROME" --headless=new --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-extensions --disable-dev-shm-usage --hide-scrollbars \
        --force-device-scale-factor=1 --user-data-dir="$WORK/profile-$tag" \
        --enable-logging=stderr --v=0 --window-size=$SIZE "$@" 2>"$WORK/$tag.log"
}

check_page() { # check_page NAME PAGE.html MIN_FLAME_RECTS
    name=$1
    page=$2
    min_rects=$3
    [ -s "$page" ] || fail "$name: no page written"
    chrome "$name-dom" --virtual-time-budget=5000 --dump-dom "file://$page" >"$WORK/$name.dom" ||
        fail "$name: chromium --dump-dom failed: $(tail -5 "$WORK/$name-dom.log")"
    chrome "$name-shot" --virtual-time-budget=5000 --screenshot="$WORK/$name.png" "file://$page" >/dev/null ||
        fail "$name: chromium --screenshot failed: $(tail -5 "$WORK/$name-shot.log")"
    [ -s "$WORK/$name.png" ] || fail "$name: no screenshot"
    if [ -n "${ML_KEEP_SCREENSHOT:-}" ]; then cp "$WORK/$name.png" "$ML_KEEP_SCREENSHOT-$name.png"; fi
    python3 - "$name" "$WORK/$name.dom" "$WORK/$name.png" "$min_rects" \
        "$WORK/$name-dom.log" "$WORK/$name-shot.log" <<'PY' || exit 1
import html, json, re, struct, sys, zlib

name, dom_path, png_path, min_rects = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
logs = sys.argv[5:]
problems = []

# -- console: any message from the page is a problem --------------------------
for log in logs:
    for line in open(log, errors='replace'):
        if ':CONSOLE' in line or 'Uncaught' in line:
            problems.append('console: ' + line.strip())

# -- the DOM after the script ran ---------------------------------------------
dom = open(dom_path, errors='replace').read()
# Script elements are serialized with their raw text: drop it, so that only
# real elements and attributes are searched below.
dom = re.sub(r'(<script\b[^>]*>).*?(</script>)', r'\1\2', dom, flags=re.S | re.I)
m = re.search(r'<pre id="errors"[^>]*>(.*?)</pre>', dom, re.S)
if not m:
    problems.append('no <pre id="errors"> in the DOM (did the page load?)')
elif m.group(1).strip():
    problems.append('the page reported errors:\n' + html.unescape(m.group(1)).strip())
if re.search(r'<img\b', dom, re.I):
    problems.append('an <img> element exists: a report string was parsed as HTML')
body = re.search(r'<body\b[^>]*>', dom)
if body and 'data-pwned' in body.group(0):
    problems.append('an injected event handler ran (data-pwned is set on <body>)')

m = re.search(r'<div id="ml-layout"[^>]*>(.*?)</div>', dom, re.S)
layout = json.loads(html.unescape(m.group(1))) if m and m.group(1).strip() else None
if not layout or not layout.get('rendered'):
    problems.append('the page script did not finish (no layout record)')
    layout = {'charts': {}}

def section(elem_id):
    """The markup of the element with this id, up to the end of its section."""
    i = dom.find('id="%s"' % elem_id)
    if i < 0:
        return ''
    j = dom.find('</section>', i)
    return dom[i:j if j > 0 else len(dom)]

flame = section('flame-chart')
timeline = section('timeline-chart')
nrect = len(re.findall(r'<rect\b', flame))
npath = len(re.findall(r'<path\b[^>]*\bd="M', timeline))
if nrect < min_rects:
    problems.append('flame graph: %d <rect> elements, expected at least %d' % (nrect, min_rects))
if nrect > 5000 + 100:
    problems.append('flame graph: %d <rect> elements, more than the 5000-node cap' % nrect)
if npath < 1:
    problems.append('timeline: no series <path> drawn')

# -- the screenshot -------------------------------------------------------------
def read_png(path):
    data = open(path, 'rb').read()
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        raise ValueError('not a PNG')
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        n, typ = struct.unpack('>I4s', data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if typ == b'IHDR':
            ihdr = struct.unpack('>IIBBBBB', body)
        elif typ == b'IDAT':
            idat.append(body)
        elif typ == b'IEND':
            break
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or interlace or ctype not in (0, 2, 4, 6):
        raise ValueError('unsupported PNG (depth %d, colour type %d, interlace %d)' % (depth, ctype, interlace))
    bpp = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    raw = zlib.decompress(b''.join(idat))
    stride, rows, prev, i = w * bpp, [], bytearray(w * bpp), 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        if f == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for x in range(stride):
                line[x] = (line[x] + (((line[x - bpp] if x >= bpp else 0) + prev[x]) >> 1)) & 255
        elif f == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows

w, h, bpp, rows = read_png(png_path)

def area_stats(x, y, cw, ch):
    """Share of pixels that differ from the area's most common colour, and
    how many distinct colours there are (sampled every other pixel)."""
    x0, y0, x1, y1 = max(0, x), max(0, y), min(w, x + cw), min(h, y + ch)
    counts = {}
    for yy in range(y0, y1, 2):
        r = rows[yy]
        for xx in range(x0, x1, 2):
            px = r[xx * bpp:xx * bpp + min(bpp, 3)]
            counts[px] = counts.get(px, 0) + 1
    total = sum(counts.values())
    if not total:
        return 0.0, 0
    bg = max(counts, key=counts.get)
    far = sum(n for px, n in counts.items() if max(abs(a - b) for a, b in zip(px, bg)) > 40)
    return far / total, len(counts)

must = {'timeline-chart': 0.01, 'flame-chart': 0.05}
optional = {'heapmap-at_peak': 0.2, 'heapmap-at_end': 0.2, 'hist-sizes': 0.02}
report = []
for cid, need in list(must.items()) + list(optional.items()):
    r = layout['charts'].get(cid)
    if not r or r['w'] < 50 or r['h'] < 20:
        if cid in must:
            problems.append('%s: not laid out (%r)' % (cid, r))
        continue
    if r['y'] + r['h'] > h:
        if cid in must:
            problems.append('%s: below the screenshot (%r, screenshot %dx%d)' % (cid, r, w, h))
        continue
    share, ncol = area_stats(r['x'], r['y'], r['w'], r['h'])
    report.append('%s %.1f%% drawn, %d colours' % (cid, 100 * share, ncol))
    if share < need or ncol < 3:
        problems.append('%s: screenshot area %r is blank (%.2f%% non-background, %d colours)'
                        % (cid, r, 100 * share, ncol))
# A control: the blank strip right of the page content must read as blank,
# or the check above proves nothing.
share, ncol = area_stats(w - 12, 0, 12, 40)
if share > 0.01:
    problems.append('control area is not blank (%.2f%%): the PNG decoder is wrong' % (100 * share))

print('%s: %d flame rects, %d timeline paths; %s' % (name, nrect, npath, '; '.join(report)))
if problems:
    print('FAIL: %s:\n  %s' % (name, '\n  '.join(problems)))
    sys.exit(1)
PY
}

# 1. The fixture document: ~50 sites, 200 timeline points, hostile strings.
"$GEN" "$FIXTURE" "$WORK/sample.html" || fail "writing the page for $FIXTURE"
check_page sample "$WORK/sample.html" 20

# 2. A real recording, when `memlens report --html` exists.
if [ -n "$MEMLENS" ] && [ -n "$PROGRAM" ]; then
    if "$MEMLENS" report --help 2>&1 | grep -q -- '--html'; then
        "$MEMLENS" run -o "$WORK/t.mlt" -- "$PROGRAM" >/dev/null 2>"$WORK/run.log" ||
            fail "memlens run: $(cat "$WORK/run.log")"
        "$MEMLENS" report "$WORK/t.mlt" --html "$WORK/real.html" >/dev/null 2>"$WORK/report.log" ||
            fail "memlens report --html: $(cat "$WORK/report.log")"
        check_page real "$WORK/real.html" 3
    else
        echo "note: memlens report has no --html yet; only the fixture document was checked"
    fi
fi
echo "PASS"
