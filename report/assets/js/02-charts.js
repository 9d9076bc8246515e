/* 02-charts.js - the tooltip, redrawing charts when the width changes, and
 * axis ticks. */

var tip = document.getElementById('tooltip');
function showTip(ev, kids) {
  clear(tip);
  append(tip, kids);
  tip.hidden = false;
  var pad = 14, w = tip.offsetWidth, ht = tip.offsetHeight;
  var x = ev.clientX + pad, y = ev.clientY + pad;
  if (x + w > window.innerWidth - 4) x = ev.clientX - w - pad;
  if (y + ht > window.innerHeight - 4) y = ev.clientY - ht - pad;
  tip.style.left = Math.max(4, x) + 'px';
  tip.style.top = Math.max(4, y) + 'px';
}
function hideTip() { tip.hidden = true; }
function tipTitle(t) { return h('div', { class: 't' }, t); }
function tipLoc(t) { return t ? h('div', { class: 'l' }, t) : null; }
function tipRows(rows) {
  var tb = h('table');
  rows.forEach(function (r) {
    if (r) tb.appendChild(h('tr', null, [h('td', null, r[0]), h('td', { class: 'num' }, r[1])]));
  });
  return tb;
}

/* ---------------------------------------------------------------------- */
/* Resizing: charts redraw when their width changes                         */
/* ---------------------------------------------------------------------- */

var redraws = [];
var resizeTimer = 0, lastWidth = window.innerWidth;
window.addEventListener('resize', function () {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(function () {
    if (window.innerWidth === lastWidth) return;
    lastWidth = window.innerWidth;
    redraws.forEach(function (f) {
      try { f(); } catch (e) { reportError('redraw: ' + (e && e.message || e)); }
    });
  }, 120);
});
function widthOf(el, fallback) { return Math.floor(el.clientWidth || fallback || 1000); }

/* Axis ticks: 1, 2, 5 × 10^k (or × 1024^k for bytes). */
function niceStep(raw) {
  if (!(raw > 0)) return 1;
  var p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}
function ticks(max, count, bytes) {
  if (!(max > 0)) return [0];
  var unit = 1;
  if (bytes) while (unit * 1024 <= max / 2 && unit < Math.pow(1024, 5)) unit *= 1024;
  var step = Math.max(niceStep(max / unit / count), bytes && unit === 1 ? 1 : 0) * unit;
  var out = [];
  for (var v = 0; v <= max * 1.0001; v += step) out.push(v);
  return out;
}
