/* html_flame_checks.js - the flame graph draws the JSON's call tree and
 * nothing else; run by test_html_browser.sh inside a copy of a page (after
 * the page's own script), before the page's driver, which calls
 * mlFlameChecks(ok, what[, key]) with its own ok(condition, message); key
 * names the tree drawn: "flame" (the default) or "flame_inverted".
 *
 * For each of the four metrics (its button clicked), at the current zoom:
 * - every drawn frame (a rect.node; ancestors above the zoomed frame aside)
 *   names a node of the JSON's "flame" by its path of child indexes
 *   (data-path), and its width is that node's value for the metric over the
 *   zoomed node's value, times the chart's width (less the 0.4 px gap);
 * - a frame lies in its parent's span, one row below it;
 * - the frames drawn are exactly the JSON nodes at least 0.6 px wide whose
 *   parents are drawn (unless the status line says the 5000-frame cap
 *   applied);
 * - the root's values are the JSON totals (totals.bytes_allocated,
 *   totals.alloc_calls, peak.bytes, leaks.bytes), when it is the JSON the
 *   analysis wrote (generator says memlens);
 * - the tooltip of the widest frame below the zoomed one gives its JSON name
 *   and calls.
 * The metric that was on is on again afterwards.
 */
function mlFlameChecks(ok, what, key) {
  var D = JSON.parse(document.getElementById('ml-data').textContent);
  /* The JSON's nodes, in either form: objects {name, alloc, ..., children}
   * (report --json, fixtures), or the page's arrays [frame index in
   * "frame_table", alloc, peak, leaked, calls, [children]] (report --html). */
  var KEY = key || 'flame';
  function norm(n) {
    if (!Array.isArray(n)) return n;
    return { name: D.frame_table[n[0]].function, alloc: n[1], peak: n[2], leaked: n[3], calls: n[4], children: n[5] };
  }
  function at(path) {
    var n = norm(D[KEY]);
    if (path) path.split('.').forEach(function (i) { n = n && Array.isArray(n.children) ? norm(n.children[+i]) : null; });
    return n;
  }
  function parentOf(path) { var i = path.lastIndexOf('.'); return i < 0 ? '' : path.slice(0, i); }
  /* The C runtime's frames (_start, __libc_start_main, ...) are hidden by
   * default: their children hang from the nearest drawn ancestor. */
  var showRuntime = document.querySelector('#flame input[aria-label="show runtime frames"]');
  var RUNTIME = { _start: 1, __libc_start_main: 1, __libc_start_main_impl: 1, __libc_start_call_main: 1,
                  start_thread: 1, clone: 1, clone3: 1, __clone: 1, __clone3: 1 };
  function hidden(n) {
    return !!n && RUNTIME[n.name] === 1 && !(showRuntime && showRuntime.checked);
  }
  function drawnParent(drawn, path) {
    var q = parentOf(path);
    while (q !== '' && !drawn[q] && hidden(at(q))) q = parentOf(q);
    return drawn[q];
  }
  function rects() { return Array.prototype.slice.call(document.querySelectorAll('#flame-chart rect.node')); }
  var before = document.querySelector('#flame button[data-metric].on');

  if (typeof D.generator === 'string' && /^memlens/.test(D.generator)) {
    var T = D.totals || {};
    /* leaked: definite + indirect + possible (leaks.lost_bytes); a JSON from
     * before that meaning (tests/data) counted every block live at exit. */
    var L = D.leaks || {};
    var want = [T.bytes_allocated, T.alloc_calls, (D.peak || {}).bytes, 'lost_bytes' in L ? L.lost_bytes : L.bytes];
    var R = at('');
    var got = [R.alloc, R.calls, R.peak, R.leaked];
    ok(JSON.stringify(got) === JSON.stringify(want),
       what + 'the JSON tree\'s root holds the totals: ' + JSON.stringify(got) + ' (totals: ' + JSON.stringify(want) + ')');
  }

  ['alloc', 'peak', 'leaked', 'calls'].forEach(function (metric) {
    document.querySelector('#flame button[data-metric=' + metric + ']').dispatchEvent(new MouseEvent('click', { bubbles: true }));
    var own = rects().filter(function (r) { return !r.classList.contains('ancestor'); });
    var svg = document.querySelector('#flame-chart svg'), W = svg ? +svg.getAttribute('width') : 0;
    var top = own.reduce(function (a, r) { return !a || +r.getAttribute('y') < +a.getAttribute('y') ? r : a; }, null);
    var zpath = top ? top.getAttribute('data-path') : '';
    var zoom = at(zpath), total = zoom ? +zoom[metric] : 0;
    if (!(total > 0)) {
      ok(!own.length, what + metric + ': nothing under the zoomed frame, nothing drawn');
      return;
    }
    var drawn = {}, bad = [];
    own.forEach(function (r) { drawn[r.getAttribute('data-path')] = r; });
    own.forEach(function (r) {
      var p = r.getAttribute('data-path'), n = at(p);
      if (!n) return bad.push('no JSON node at path "' + p + '"');
      var w = Math.max(n[metric] / total * W - 0.4, 0.4);
      if (Math.abs(+r.getAttribute('width') - w) > 0.006)
        bad.push(n.name + ' (' + p + '): width ' + r.getAttribute('width') + ', its ' + metric + ' ' + n[metric] + ' gives ' + w.toFixed(2));
      if (p === zpath) return;
      var pr = drawnParent(drawn, p);
      if (!pr) return bad.push(n.name + ' (' + p + ') drawn without its parent');
      var x = +r.getAttribute('x'), px = +pr.getAttribute('x');
      if (+r.getAttribute('y') !== +pr.getAttribute('y') + 18 || x < px - 0.01 ||
          x + +r.getAttribute('width') > px + +pr.getAttribute('width') + 0.41)
        bad.push(n.name + ' (' + p + ') is not under its parent');
    });
    ok(!bad.length, what + metric + ': the ' + own.length + ' frames drawn are JSON nodes, sized by their own values' +
       (bad.length ? ': ' + bad.slice(0, 3).join('; ') : ''));
    if (/widest/.test(document.querySelector('#flame .status').textContent)) return;
    var want = [], st = [[zoom, zpath]];
    while (st.length) {
      var e = st.pop(), v = +e[0][metric];
      if (!(v > 0) || v / total * W < 0.6) continue;
      if (e[1] === zpath || !hidden(e[0])) want.push(e[1]);
      (Array.isArray(e[0].children) ? e[0].children : []).forEach(function (c, i) {
        if (c && typeof c === 'object') st.push([norm(c), e[1] === '' ? String(i) : e[1] + '.' + i]);
      });
    }
    var missing = want.filter(function (p) { return !drawn[p]; });
    ok(!missing.length && want.length === own.length, what + metric + ': every JSON node at least 0.6 px wide is drawn (' +
       want.length + ' nodes' + (missing.length ? '; missing ' + missing.slice(0, 3).join(', ') : '') + ')');
    if (metric !== 'calls') return;
    var widest = own.filter(function (r) { return r !== top; })
      .sort(function (a, b) { return +b.getAttribute('width') - +a.getAttribute('width'); })[0];
    if (!widest) return;
    var n = at(widest.getAttribute('data-path')), b = widest.getBoundingClientRect();
    widest.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: b.left + 1, clientY: b.top + 3 }));
    var tip = document.getElementById('tooltip');
    var title = tip.querySelector('.t'), cells = Array.prototype.slice.call(tip.querySelectorAll('td'));
    var calls = cells.filter(function (td, i) { return i % 2 === 0 && /^Calls/.test(td.textContent); })[0];
    ok(!tip.hidden && title && title.textContent === n.name && calls &&
       calls.nextSibling.textContent.indexOf(Number(n.calls).toLocaleString('en-US')) === 0,
       what + 'the tooltip of ' + n.name + ' gives its JSON name and ' + n.calls + ' calls: ' + tip.textContent.slice(0, 80));
    widest.dispatchEvent(new MouseEvent('mouseleave', { bubbles: true }));
  });
  if (before) before.dispatchEvent(new MouseEvent('click', { bubbles: true }));
}
