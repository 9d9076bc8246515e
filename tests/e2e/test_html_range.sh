#!/bin/bash
# test_html_range.sh - the HTML page's time-range selection (issue 15.3), in
# headless Chromium, on fx_phases: phase A (phase_a: 10 x 90 B, 360 B leaked
# in 4 blocks) at the start, 600 ms of nothing, then phase B (phase_b:
# 20 x 40 B = 800 B, 120 B leaked in 3 blocks).
#
#   bash test_html_range.sh MEMLENS FX_PHASES
#
# The driver drags on the timeline from the middle of the pause (the widest
# gap between allocations in the page's buckets) to its right end, at
# 1400x1000 and at 800x600, and checks that:
# - the "range t0 – t1 (clear)" control appears, in the timeline and above
#   the flame graph, the sites and the leaks;
# - the site table has no phase_a row, and phase_b's row says 20 calls,
#   800 B allocated, 120 B (3) leaked; the whole-trace table (after "clear")
#   has both, phase_a with 10 calls and 900 B;
# - the leak table lists phase_b's definite 120 B in 3 blocks and not
#   phase_a's;
# - the flame graph's search finds no phase_a frame and phase_b's frame
#   with exactly 800 B allocated;
# - at 800x600 the page still does not scroll sideways.
# The wide page is made with --no-advisor (the buckets read the trace on a
# thread of their own), the narrow one with the advisor (its first pass
# feeds them the records it reads).
# The same numbers are first checked in `report --json` (the oracle of what
# the fixture did). Exit 77 when Chromium or python3 is missing.
set -u
ML=${1:?usage: test_html_range.sh MEMLENS FX_PHASES}
FX=${2:?}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
CHROME=${ML_CHROMIUM:-}
if [ -z "$CHROME" ]; then
    for c in chromium chromium-browser google-chrome; do
        if command -v "$c" > /dev/null 2>&1; then CHROME=$(command -v "$c"); break; fi
    done
fi
[ -n "$CHROME" ] || { echo "SKIP: no chromium found"; exit 77; }
[ -n "$PY" ] || { echo "SKIP: python3 is needed"; exit 77; }

W=$(mktemp -d "${TMPDIR:-/tmp}/ml_html_range.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
FAILS=0

"$ML" run -q -o "$W/p.mlt" -- "$FX" > /dev/null 2>&1 || { echo "FAIL recording fx_phases"; exit 1; }
"$ML" report -q "$W/p.mlt" --no-advisor --json "$W/p.json" --html "$W/p.html" || { echo "FAIL report"; exit 1; }
# With the strategy advisor the page's buckets come from its first pass over
# the trace (cli/report_cmd.c), not from a read of their own: the narrow
# page below is that one, and its replay must have run (a policy table).
"$ML" report -q "$W/p.mlt" --no-save-advice --json "$W/pa.json" --html "$W/pa.html" || { echo "FAIL report"; exit 1; }
"$PY" -c 'import json, sys; n = len(json.load(open(sys.argv[1]))["policies"]); print(("ok  " if n else "FAIL") + " the advisor replayed %d policies" % n); sys.exit(0 if n else 1)' "$W/pa.json" || FAILS=$((FAILS + 1))

# The oracle: the --json sites of phase_a and phase_b.
"$PY" - "$W/p.json" << 'PY' || FAILS=$((FAILS + 1))
import json, sys
d = json.load(open(sys.argv[1]))
def site(fn):
    s = [x for x in d['sites'] if x['frames'] and x['frames'][0]['function'] == fn]
    return s[0] if len(s) == 1 else None
bad = 0
for fn, calls, b, leaked, blocks in (('phase_a', 10, 900, 360, 4), ('phase_b', 20, 800, 120, 3)):
    s = site(fn)
    got = s and (s['alloc_calls'], s['bytes_allocated'], s['leaked_by_kind']['definite'], s['leaked_blocks'])
    ok = got == (calls, b, leaked, blocks)
    bad += not ok
    print('%s json: %s: %s' % ('ok  ' if ok else 'FAIL', fn, got))
sys.exit(1 if bad else 0)
PY

cat > "$W/driver.js" << 'JS'
var log = [], fails = [];
function ok(c, what) { log.push((c ? 'ok   ' : 'FAIL ') + what); if (!c) fails.push(what); }
function $(q) { return document.querySelector(q); }
function $$(q) { return Array.prototype.slice.call(document.querySelectorAll(q)); }
function finish() {
  var pre = document.createElement('pre');
  pre.id = 'ml-test';
  pre.textContent = JSON.stringify({ fails: fails, log: log });
  document.body.appendChild(pre);
}
function rowText(fn) {
  var r = $$('#sites tbody tr.row').filter(function (tr) { return tr.innerText.indexOf(fn) >= 0; });
  return r.length === 1 ? r[0].innerText.replace(/\s+/g, ' ') : r.length ? 'several rows' : null;
}
function search(q, then) {
  var inp = $('#flame input[type=search]');
  inp.value = q;
  inp.dispatchEvent(new Event('input', { bubbles: true }));
  setTimeout(function () { then($('#flame .status').textContent); }, 400);
}
(function () {
  var D = JSON.parse(document.getElementById('ml-data').textContent);
  var TB = D.time_buckets || {};
  ok(TB.count > 0 && TB.width_ms > 0, 'time buckets in the page: ' + TB.count + ' of ' + TB.width_ms + ' ms');
  ok(/[Dd]rag across the chart/.test($('#timeline-range').textContent), 'the timeline says how to select a range');
  ok(rowText('phase_a') && / 10 /.test(rowText('phase_a')) && /900 B/.test(rowText('phase_a')),
     'whole trace: phase_a 10 calls, 900 B: ' + rowText('phase_a'));
  var pts = D.timeline.map(function (p) { return p.time_s; }).sort(function (a, b) { return a - b; });
  var t0 = Math.min(0, pts[0]), t1 = pts[pts.length - 1];
  var hit = $('#timeline-chart rect.hit'), r = hit.getBoundingClientRect();
  /* Phase B starts after the 600 ms pause: from the middle of the widest gap
   * between allocations (the page's own buckets) to the right end. Not a
   * fixed 0.3 s: on a loaded machine the program can start late on the
   * session's clock, and phase A then lies past 0.3 s. */
  var fi = D.site_fields.indexOf('alloc_buckets'), used = [];
  D.sites.forEach(function (s) { for (var i = 0; i < s[fi].length; i += 3) used.push(s[fi][i]); });
  used.sort(function (a, b) { return a - b; });
  var gap = 0, mid = 0;
  for (var i = 1; i < used.length; i++)
    if (used[i] - used[i - 1] > gap) { gap = used[i] - used[i - 1]; mid = (used[i - 1] + 1 + used[i]) / 2 * TB.width_ms / 1000; }
  ok(gap * TB.width_ms >= 300, 'the pause between the phases is in the buckets: ' + gap * TB.width_ms + ' ms');
  var xa = r.left + (mid - t0) / (t1 - t0) * r.width, xb = r.right - 1, y = r.top + r.height / 2;
  hit.dispatchEvent(new MouseEvent('mousedown', { bubbles: true, button: 0, clientX: xa, clientY: y }));
  hit.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: (xa + xb) / 2, clientY: y }));
  hit.dispatchEvent(new MouseEvent('mouseup', { bubbles: true, button: 0, clientX: xb, clientY: y }));
  var ctl = $('#timeline-range').textContent;
  ok(/^range .+ – .+clear$/.test(ctl.trim()), 'the timeline shows the range and "clear": ' + ctl);
  ['#flame', '#sites', '#leaks'].forEach(function (q) {
    var bar = $(q + ' .range-bar');
    ok(bar && bar.textContent.indexOf(ctl.trim().replace(/ ?clear$/, '')) === 0, q + ' shows the range: ' + (bar && bar.textContent.slice(0, 40)));
  });
  ok($$('#timeline-chart rect.range-sel').length >= 1, 'the range is drawn on the timeline');
  ok(rowText('phase_a') === null, 'range: no phase_a row in the sites');
  var b = rowText('phase_b');
  ok(b && / 20 /.test(b) && /800 B/.test(b) && /120 B \(3\)/.test(b), 'range: phase_b 20 calls, 800 B, 120 B (3) leaked: ' + b);
  var lk = $$('#leaks tbody tr.row').map(function (tr) { return tr.innerText.replace(/\s+/g, ' '); });
  ok(!lk.some(function (t) { return t.indexOf('phase_a') >= 0; }), 'range: no phase_a leak');
  ok(lk.some(function (t) { return /definite/.test(t) && /120 B/.test(t) && / 3 /.test(t) && t.indexOf('phase_b') >= 0; }),
     'range: phase_b leaked definite 120 B in 3 blocks: ' + lk.join(' | '));
  ok(document.documentElement.scrollWidth <= window.innerWidth, 'no sideways scroll (' +
     document.documentElement.scrollWidth + ' <= ' + window.innerWidth + ')');
  search('phase_a', function (st) {
    ok(/^0 matching frames/.test(st), 'range flame: no phase_a frame: ' + st);
    search('phase_b', function (st2) {
      ok(/widest: phase_b 800 B /.test(st2), 'range flame: phase_b allocated 800 B: ' + st2);
      $('#timeline-range .range-clear').click();
      ok(!$('#sites .range-bar') && rowText('phase_a') !== null, 'clear: the whole trace again (phase_a back)');
      finish();
    });
  });
})();
JS

drive() { # drive TAG WIDTH,HEIGHT PAGE
    "$PY" - "$W/$3" "$W/driver.js" "$W/$1.html" << 'PY' || return 1
import re, sys
page = open(sys.argv[1], encoding='utf-8').read()
page, n = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', '', page)
assert n == 1
i = page.rindex('</body>')
page = page[:i] + '<script>' + open(sys.argv[2], encoding='utf-8').read() + '</script>\n' + page[i:]
open(sys.argv[3], 'w', encoding='utf-8').write(page)
PY
    timeout 90 "$CHROME" --headless=new --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-extensions --disable-dev-shm-usage --hide-scrollbars \
        --force-device-scale-factor=1 --user-data-dir="$W/profile-$1" \
        --window-size="$2" --virtual-time-budget=8000 \
        --dump-dom "file://$W/$1.html" > "$W/$1.dom" 2> "$W/$1.log"
    "$PY" - "$1" "$W/$1.dom" << 'PY'
import html, json, re, sys
tag, dom = sys.argv[1:]
d = open(dom, errors='replace').read()
m = re.search(r'<pre id="ml-test">(.*?)</pre>', d, re.S)
if not m:
    print('FAIL %s: the driver did not finish' % tag)
    sys.exit(1)
r = json.loads(html.unescape(m.group(1)))
e = re.search(r'<pre id="errors"[^>]*>(.*?)</pre>', d, re.S)
if e and e.group(1).strip():
    r['log'].append('FAIL the page reported errors: ' + html.unescape(e.group(1)).strip()[:400])
    r['fails'].append('page errors')
for line in r['log']:
    print('%s: %s' % (tag, line))
sys.exit(1 if r['fails'] else 0)
PY
}
drive wide 1400,1000 p.html || FAILS=$((FAILS + 1))
drive narrow 800,600 pa.html || FAILS=$((FAILS + 1))
echo "$FAILS failed groups"
[ $FAILS -eq 0 ]
