#!/bin/bash
# test_html_reach.sh - the HTML page's compact data, inverted flame graph,
# caller/callee view, narrow layout and evidence (issue 15.3), in headless
# Chromium.
#
#   bash test_html_reach.sh MEMLENS GEN FX_CALLTREE FX_ADV_ARENA HTML_FLAME_CHECKS.js
#
# GEN is ml_html_from_json (the page for a JSON document as it is). For two
# recordings, fx_calltree (test_report.c knows its every number) and
# fx_adv_arena (a suggestion with lifetimes), the test writes the page with
# `report --html` (the page's compact form) and, from `report --json`, the
# page of the uncompacted document, then in Chromium:
# - the compact data resolves to exactly the --json document: every site's
#   frames, values and leaked_by_kind, the peak and leak rows' frames, the
#   flame tree (resolved here, independently of the page's script);
# - both pages render the same text in the summary, sites, leaks, live at
#   the peak, fragmentation and the flame graph's status line;
# - the inverted flame graph draws "flame_inverted" (html_flame_checks.js),
#   and for fx_calltree its first level is the allocating functions with
#   their exact bytes and calls (grow 3,200 B in 5 calls, make 7,000 B and
#   11,000 B told apart by their files, pick 300 B; 21,500 B in 8 calls in
#   all), each function's node being the sum over the --json sites whose
#   frames[0] it is;
# - the caller/callee view: fill's callers start with main and its one
#   callee is grow (3,200 B, 100%); inverted, grow's one caller is fill;
# - at 800x600 the page does not scroll sideways, the sticky header is at
#   most 56 px high, no table overflows its box and every function cell of
#   the site table is at least 90 px wide;
# - evidence: no "stack" entry (an internal id), every entry has a tooltip,
#   no time shows as "0.000… ms", and a mean lifetime below 1 ms is in µs or
#   ns and equals the JSON's value; every fragmentation metric has its
#   explanation.
# Exit 77 (ctest SKIP_RETURN_CODE) when Chromium or python3 is missing.
set -u
ML=${1:?usage: test_html_reach.sh MEMLENS GEN FX_CALLTREE FX_ADV_ARENA FLAME_CHECKS.js}
GEN=${2:?}
FX_CALLTREE=${3:?}
FX_ARENA=${4:?}
FLAME_CHECKS=${5:?}
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

W=$(mktemp -d "${TMPDIR:-/tmp}/ml_html_reach.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
FAILS=0

# drive TAG WIDTH,HEIGHT PAGE DRIVER.js: the page with DRIVER appended (and
# its Content-Security-Policy removed, which would refuse a second script),
# its DOM after the driver ran in $W/TAG.dom.
drive() {
    local tag=$1 size=$2 page=$3 driver=$4
    "$PY" - "$page" "$driver" "$W/$tag-driven.html" << 'PY' || return 1
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
        --force-device-scale-factor=1 --user-data-dir="$W/profile-$tag" \
        --window-size="$size" --virtual-time-budget=8000 \
        --dump-dom "file://$W/$tag-driven.html" > "$W/$tag.dom" 2> "$W/$tag.log"
}

# result TAG: prints the driver's log; counts its failures. Returns the
# JSON of the driver's "dump" in $W/TAG.dump.
result() {
    "$PY" - "$1" "$W/$1.dom" "$W/$1.dump" << 'PY'
import html, json, re, sys
tag, dom, out = sys.argv[1:]
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
json.dump(r.get('dump', {}), open(out, 'w'), sort_keys=True, indent=1)
sys.exit(1 if r['fails'] else 0)
PY
}

# The driver's prologue: ok(), helpers, the --json document as ML_JSON.
prologue() { # prologue JSON OUT.js
    {
        printf 'var ML_JSON = '
        cat "$1"
        printf ';\n'
        cat "$FLAME_CHECKS"
        cat << 'JS'
var log = [], fails = [], dump = {};
function ok(c, what) { log.push((c ? 'ok   ' : 'FAIL ') + what); if (!c) fails.push(what); }
function $(q) { return document.querySelector(q); }
function $$(q) { return Array.prototype.slice.call(document.querySelectorAll(q)); }
function fire(el, type) {
  var r = el.getBoundingClientRect();
  el.dispatchEvent(new MouseEvent(type, { bubbles: true, clientX: r.left + 2, clientY: r.top + 2 }));
}
function finish() {
  var pre = document.createElement('pre');
  pre.id = 'ml-test';
  pre.textContent = JSON.stringify({ fails: fails, log: log, dump: dump });
  document.body.appendChild(pre);
}
function text(q) { var e = $(q); return e ? e.innerText.replace(/[ \t]+/g, ' ') : null; }
/* What both forms of a page must show alike. */
function dumpSections() {
  ['#summary', '#sites table', '#leaks', '#peak-sites', '#fragmentation table', '#flame .status']
    .forEach(function (q) { dump[q] = text(q); });
}
var D = JSON.parse(document.getElementById('ml-data').textContent);
JS
    } > "$2"
}

record() { # record NAME PROGRAM: NAME.mlt, NAME.json (report --json), NAME.html (--html), NAME-json.html (GEN)
    "$ML" run -q -o "$W/$1.mlt" -- "$2" > /dev/null 2>&1 || { echo "FAIL recording $1"; exit 1; }
    "$ML" report -q "$W/$1.mlt" --json "$W/$1.json" --html "$W/$1.html" || { echo "FAIL report $1"; exit 1; }
    "$GEN" "$W/$1.json" "$W/$1-json.html" || { echo "FAIL ml_html_from_json $1"; exit 1; }
}
record calltree "$FX_CALLTREE"
record arena "$FX_ARENA"

# --- the compact data is the --json document; both pages show the same ----
cat > "$W/same.js" << 'JS'
(function () {
  if (Array.isArray(D.frame_table)) {
    var T = D.frame_table, ST = D.stack_table, F = D.site_fields;
    ok(Array.isArray(ST) && Array.isArray(F), 'compact form: frame_table, stack_table, site_fields');
    function frames(k) { var o = []; while (k >= 0) { o.push(T[ST[k][0]]); k = ST[k][1]; } return o; }
    var bad = [];
    function same(a, b, what) { if (JSON.stringify(a) !== JSON.stringify(b)) bad.push(what + ': ' + JSON.stringify(a).slice(0, 120) + ' vs ' + JSON.stringify(b).slice(0, 120)); }
    ok(D.sites.length === ML_JSON.sites.length, 'as many sites as --json: ' + D.sites.length);
    D.sites.forEach(function (row, i) {
      var o = { leaked_by_kind: {} };
      F.forEach(function (name, j) {
        if (name === 'stack') o.frames = frames(row[j]);
        else if (name === 'headline' && !row[j]) return; /* --json: absent when 0 */
        else if (name === 'alloc_buckets' || name === 'live_buckets') return; /* the page's own (time ranges) */
        else if (name.indexOf('leaked_by_kind.') === 0) o.leaked_by_kind[name.slice(15)] = row[j];
        else o[name] = row[j];
      });
      var want = ML_JSON.sites[i];
      Object.keys(want).forEach(function (k) { same(o[k], want[k], 'site ' + i + ' ' + k); });
      same(Object.keys(o).sort(), Object.keys(want).sort(), 'site ' + i + ' keys');
    });
    [['peak', D.peak.sites, ML_JSON.peak.sites], ['leaks', D.leaks.sites, ML_JSON.leaks.sites]].forEach(function (p) {
      same(p[1].length, p[2].length, p[0] + ' rows');
      p[1].forEach(function (r, i) {
        same(frames(r.stack), p[2][i].frames, p[0] + ' row ' + i + ' frames');
        Object.keys(p[2][i]).forEach(function (k) { if (k !== 'frames') same(r[k], p[2][i][k], p[0] + ' row ' + i + ' ' + k); });
      });
    });
    var st = [[D.flame, ML_JSON.flame, '']], nn = 0;
    while (st.length) {
      var e = st.pop(), a = e[0], b = e[1], f = T[a[0]];
      nn++;
      same([f.function, f.file, f.line, a[1], a[2], a[3], a[4], a[5].length],
           [b.name, b.file, b.line, b.alloc, b.peak, b.leaked, b.calls, b.children.length], 'flame node ' + e[2]);
      a[5].forEach(function (c, i) { if (b.children[i]) st.push([c, b.children[i], e[2] + '.' + i]); });
    }
    ok(!bad.length, 'the compact data resolves to the --json document (' + D.sites.length + ' sites, ' + nn +
       ' flame nodes)' + (bad.length ? ': ' + bad.slice(0, 3).join('; ') : ''));
  } else {
    ok(!D.frame_table && Array.isArray(D.sites[0].frames), 'the --json page keeps frames inline');
  }
  dumpSections();
  finish();
})();
JS
for t in calltree arena; do
    prologue "$W/$t.json" "$W/$t-same.js"
    cat "$W/same.js" >> "$W/$t-same.js"
    drive "$t-compact" 1400,1000 "$W/$t.html" "$W/$t-same.js" && result "$t-compact" || FAILS=$((FAILS + 1))
    drive "$t-plain" 1400,1000 "$W/$t-json.html" "$W/$t-same.js" && result "$t-plain" || FAILS=$((FAILS + 1))
    if cmp -s "$W/$t-compact.dump" "$W/$t-plain.dump" && [ -s "$W/$t-compact.dump" ]; then
        echo "ok   $t: both pages render the same summary, tables and flame status"
    else
        echo "FAIL $t: the compact page renders differently:"
        diff "$W/$t-plain.dump" "$W/$t-compact.dump" | head -10
        FAILS=$((FAILS + 1))
    fi
done

# --- inverted flame graph, caller/callee view -------------------------------
prologue "$W/calltree.json" "$W/tree.js"
cat >> "$W/tree.js" << 'JS'
(function () {
  function click(sel, label) {
    var b = $$(sel).filter(function (x) { return x.textContent === label; })[0];
    if (b) fire(b, 'click');
    return b;
  }
  /* The drawn frame of the first node of tree D[key] whose function is name
   * (by its data-path: the child indexes from the root). */
  function rectNamed(name, key) {
    var st = [[D[key || 'flame'], '']];
    while (st.length) {
      var e = st.pop();
      if (e[1] !== '' && D.frame_table[e[0][0]].function === name)
        return $('#flame-chart rect.node[data-path="' + e[1] + '"]');
      e[0][5].forEach(function (c, i) { st.push([c, e[1] === '' ? String(i) : e[1] + '.' + i]); });
    }
    return null;
  }
  var fill = rectNamed('fill');
  ok(!!fill, 'top-down: a frame labelled fill');
  if (fill) {
    fire(fill, 'click');
    var tables = $$('#flame-callers table');
    var callers = tables[0] ? $$('#flame-callers table')[0].querySelectorAll('tbody tr') : [];
    var callees = tables[1] ? tables[1].querySelectorAll('tbody tr') : [];
    ok(callers.length >= 1 && callers[0].children[0].textContent === 'main',
       'fill: nearest caller main (' + (callers[0] ? callers[0].textContent : 'none') + ')');
    ok(callees.length === 1 && callees[0].children[0].textContent === 'grow' &&
       callees[0].children[2].textContent === '3.1 KiB' && callees[0].children[3].textContent === '100.0%',
       'fill: one callee, grow, 3.1 KiB = 100.0% (' + (callees[0] ? callees[0].innerText : 'none') + ')');
    ok(/Peak through fill: 3\.1 KiB/.test($('#flame-callers h3.chosen').textContent),
       'the chosen frame: ' + $('#flame-callers h3.chosen').textContent);
  }
  click('#flame button', 'Reset zoom');

  /* Inverted. */
  ok(!!click('#flame button', 'Inverted'), 'an Inverted button');
  ok($('#flame button[data-view=flame_inverted]').classList.contains('on'), 'Inverted is on');
  mlFlameChecks(ok, 'inverted: ', 'flame_inverted');
  var T = D.frame_table, inv = D.flame_inverted;
  var got = inv[5].map(function (c) { return [T[c[0]].function, (T[c[0]].file || '').replace(/.*\//, ''), c[1], c[4]]; })
    .sort().map(String);
  var want = ['grow,fx_calltree.c,3200,5', 'make,fx_calltree.c,7000,1', 'make,fx_calltree_b.c,11000,1',
              'pick,fx_calltree.c,300,1'];
  ok(JSON.stringify(got) === JSON.stringify(want), 'inverted, first level: ' + JSON.stringify(got));
  ok(inv[1] === 21500 && inv[4] === 8, 'inverted root: 21500 B in 8 calls');
  /* The oracle: each first-level node is the sum over the --json sites whose frames[0] it is. */
  var sums = {};
  ML_JSON.sites.forEach(function (s) {
    var f = s.frames[0], k = f.function + ',' + (f.file || '').replace(/.*\//, '');
    sums[k] = sums[k] || [0, 0];
    sums[k][0] += s.bytes_allocated;
    sums[k][1] += s.alloc_calls;
  });
  var oracle = Object.keys(sums).map(function (k) { return k + ',' + sums[k][0] + ',' + sums[k][1]; }).sort();
  ok(JSON.stringify(oracle) === JSON.stringify(want), 'the sites of --json add up to the same: ' + JSON.stringify(oracle));
  var grow = rectNamed('grow', 'flame_inverted');
  ok(!!grow, 'inverted: a frame labelled grow');
  if (grow) {
    fire(grow, 'click');
    var t0 = $$('#flame-callers table')[0];
    var rows = t0 ? t0.querySelectorAll('tbody tr') : [];
    ok(rows.length === 1 && rows[0].children[0].textContent === 'fill' && rows[0].children[3].textContent === '100.0%',
       'inverted, grow: one caller, fill, 100.0% (' + (rows[0] ? rows[0].innerText : 'none') + ')');
    ok(/called the allocator itself/.test($('#flame-callers').textContent), 'inverted, grow: no callee but the allocator');
  }
  click('#flame button', 'Top-down');
  ok($$('#flame-chart rect.node').length > 3 && $('#flame button[data-view=flame]').classList.contains('on'), 'back to top-down');
  mlFlameChecks(ok, 'top-down again: ');
  finish();
})();
JS
drive tree 1400,1000 "$W/calltree.html" "$W/tree.js" && result tree || FAILS=$((FAILS + 1))

# --- 800x600 -------------------------------------------------------------------
cat > "$W/narrow.js" << 'JS'
(function () {
  var vw = document.documentElement.clientWidth;
  ok(vw <= 800, 'the window is 800 px wide or less: ' + vw);
  ok(document.documentElement.scrollWidth <= vw, 'no sideways scrolling: ' + document.documentElement.scrollWidth + ' <= ' + vw);
  var hh = $('header.top').getBoundingClientRect().height;
  ok(hh <= 56, 'the sticky header is ' + hh + ' px high (at most 56)');
  var over = $$('.tablewrap').filter(function (t) { return t.offsetParent && t.scrollWidth > t.clientWidth + 1; })
    .map(function (t) { return t.closest('section').id + ' ' + t.scrollWidth + '>' + t.clientWidth; });
  ok(!over.length, 'no table overflows its box' + (over.length ? ': ' + over.join(', ') : ''));
  var fn = $$('#sites td.fn').map(function (td) { return td.getBoundingClientRect().width; });
  ok(fn.length > 0 && Math.min.apply(null, fn) >= 90, 'site function cells at least 90 px wide: min ' + Math.min.apply(null, fn));
  var loc = $$('#sites td.loc').filter(function (td) { return td.offsetParent; });
  ok(!loc.length, 'the Location column is left out at 800 px');
  finish();
})();
JS
cat > "$W/wide.js" << 'JS'
(function () {
  var loc = $$('#sites td.loc').filter(function (td) { return td.offsetParent; });
  ok(loc.length > 0, 'the Location column is shown at 1400 px');
  finish();
})();
JS
for t in calltree arena; do
    prologue "$W/$t.json" "$W/$t-narrow.js"
    cat "$W/narrow.js" >> "$W/$t-narrow.js"
    drive "$t-narrow" 800,600 "$W/$t.html" "$W/$t-narrow.js" && result "$t-narrow" || FAILS=$((FAILS + 1))
done
prologue "$W/calltree.json" "$W/calltree-wide.js"
cat "$W/wide.js" >> "$W/calltree-wide.js"
drive calltree-wide 1400,1000 "$W/calltree.html" "$W/calltree-wide.js" && result calltree-wide || FAILS=$((FAILS + 1))

# --- evidence and explanations -------------------------------------------------
prologue "$W/arena.json" "$W/evidence.js"
cat >> "$W/evidence.js" << 'JS'
(function () {
  var dts = $$('#suggestions .sugg dt');
  ok(dts.length > 5, 'the suggestions show evidence: ' + dts.length + ' entries');
  ok(!dts.some(function (d) { return /^stack$/.test(d.textContent); }), 'no "stack" (internal id) in the evidence');
  var untitled = dts.filter(function (d) { return !d.getAttribute('title'); }).map(function (d) { return d.textContent; });
  ok(!untitled.length, 'every evidence entry has a tooltip' + (untitled.length ? ': not ' + untitled.join(', ') : ''));
  var body = document.body.innerText;
  ok(!/\b0\.0{3,}\d* ms\b/.test(body), 'no time shown as 0.000… ms');
  var sg = ML_JSON.suggestions.filter(function (s) { return s.evidence && s.evidence.lifetimes; })[0];
  var mean = sg ? sg.evidence.lifetimes.mean_ms : null;
  var dd = $$('#suggestions .sugg dt').filter(function (d) { return d.textContent === 'mean lifetime'; })[0];
  var shown = dd ? dd.nextSibling.textContent : '';
  ok(mean != null && !!dd, 'a mean lifetime in the evidence (JSON: ' + mean + ' ms, shown: ' + shown + ')');
  if (mean != null && mean > 0 && mean < 1) {
    var m = /^([\d.]+) (µs|ns)$/.exec(shown);
    var back = m ? +m[1] / (m[2] === 'µs' ? 1e3 : 1e6) : NaN;
    ok(m && Math.abs(back - mean) <= mean * 0.005, 'below 1 ms in µs or ns, the same value: ' + shown + ' = ' + mean + ' ms');
  }
  var rows = $$('#fragmentation table.metrics tbody tr');
  var unexplained = rows.filter(function (r) {
    return !r.children[0].getAttribute('title') || !r.lastChild.textContent.trim();
  }).map(function (r) { return r.children[0].firstChild.textContent; });
  ok(rows.length > 10 && !unexplained.length, 'every fragmentation metric is explained (' + rows.length + ' rows)' +
     (unexplained.length ? ': not ' + unexplained.join(', ') : ''));
  ['usable_measured_blocks', 'heap_to_rss', 'mallinfo_arena'].forEach(function (k) {
    ok(rows.some(function (r) { return r.children[0].firstChild.textContent === k && r.lastChild.textContent.length > 20; }),
       k + ' is shown with its explanation');
  });
  finish();
})();
JS
drive evidence 1400,1000 "$W/arena.html" "$W/evidence.js" && result evidence || FAILS=$((FAILS + 1))

echo "$FAILS failed groups"
[ $FAILS -eq 0 ]
