/* 20-timeline.js - the Timeline section: heap, RSS, mmap and GPU bytes over
 * time, with the peak marked. */

var SERIES = [
  { key: 'heap_bytes', name: 'Heap (live requested)', color: 'var(--s-heap)', area: true },
  { key: 'rss_bytes', name: 'RSS (sampled)', color: 'var(--s-rss)' },
  { key: 'mmap_bytes', name: 'Anonymous mmap', color: 'var(--s-mmap)' },
  { key: 'gpu_bytes', name: 'GPU', color: 'var(--s-gpu)' }
];

function renderTimeline(body) {
  var pts = objs(D.timeline).filter(function (p) { return num(p.time_s) != null; });
  pts.sort(function (a, b) { return num(a.time_s) - num(b.time_s); });
  if (!pts.length) return noData(body, 'No timeline samples in this report.');
  var PK = obj(D.peak);
  var every = num(obj(D.totals).rss_sample_interval_ms);
  var series = SERIES.map(function (sr) {
    var has = pts.some(function (p) { return num0(p[sr.key]) > 0; });
    /* RSS is a curve of samples, not every change: it says how often. */
    var name = sr.key === 'rss_bytes' && every ? 'RSS (sampled every ' + every + ' ms)' : sr.name;
    return { key: sr.key, name: name, color: sr.color, area: sr.area, has: has, on: has };
  });
  var legend = h('div', { class: 'legend' });
  series.forEach(function (sr) {
    var item = h('span', { class: 'item' + (sr.has ? '' : ' empty'),
                           title: sr.has ? 'click to show or hide' : 'no data for this series' },
      [h('span', { class: 'swatch', style: 'background:' + sr.color }), sr.name + (sr.has ? '' : ' (no data)')]);
    if (sr.has) item.addEventListener('click', function () {
      sr.on = !sr.on;
      item.classList.toggle('off', !sr.on);
      draw();
    });
    legend.appendChild(item);
  });
  if (PK.time_s != null)
    legend.appendChild(h('span', { class: 'item fixed' },
      [h('span', { class: 'swatch', style: 'background:var(--bad)' }), 'peak']));
  var box = h('div', { class: 'chart', id: 'timeline-chart' });
  /* Time-range selection (25-range.js): drag across the chart. */
  var rangeCtl = h('div', { class: 'range-ctl', id: 'timeline-range' });
  function drawRangeCtl() {
    clear(rangeCtl);
    if (!rangeInfo()) {
      append(rangeCtl, h('span', { class: 'note' }, 'No time buckets in this report: no time-range selection.'));
    } else if (!RANGE) {
      append(rangeCtl, h('span', { class: 'note' }, 'Drag across the chart to show only the allocations made in a time range ' +
        '(flame graph, sites, leaks).'));
    } else {
      var clr = h('button', { type: 'button', class: 'range-clear' }, 'clear');
      clr.addEventListener('click', function () { setRange(null); });
      append(rangeCtl, [h('strong', null, 'range ' + rangeLabel(RANGE)), ' ', clr]);
    }
  }
  drawRangeCtl();
  rangeBars.push(function () { drawRangeCtl(); draw(); });
  append(body, [legend, rangeCtl, box]);

  function draw() {
    clear(box);
    var W = widthOf(box, 1100), H = 300, m = { l: 74, r: 18, t: 26, b: 34 };
    var pw = W - m.l - m.r, ph = H - m.t - m.b;
    var t0 = Math.min(0, num(pts[0].time_s)), t1 = num(pts[pts.length - 1].time_s);
    if (!(t1 > t0)) t1 = t0 + 1;
    var on = series.filter(function (sr) { return sr.on; });
    var ymax = 0;
    on.forEach(function (sr) { pts.forEach(function (p) { ymax = Math.max(ymax, num0(p[sr.key])); }); });
    if (series[0].on && num(PK.bytes) != null) ymax = Math.max(ymax, num(PK.bytes));
    if (!(ymax > 0)) ymax = 1;
    var yt = ticks(ymax * 1.05, 5, true);
    var ytop = Math.max(yt[yt.length - 1], ymax);
    function X(t) { return m.l + (t - t0) / (t1 - t0) * pw; }
    function Y(v) { return m.t + ph - v / ytop * ph; }

    var svg = s('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img',
                         'aria-label': 'memory over time' });
    yt.forEach(function (v) {
      svg.appendChild(s('line', { class: 'grid', x1: m.l, x2: m.l + pw, y1: Y(v), y2: Y(v) }));
      svg.appendChild(s('text', { x: m.l - 6, y: Y(v) + 4, 'text-anchor': 'end' }, fmtBytes(v, true)));
    });
    ticks(t1 - t0, 8, false).forEach(function (dt) {
      var t = t0 + dt;
      svg.appendChild(s('line', { class: 'axis', x1: X(t), x2: X(t), y1: m.t + ph, y2: m.t + ph + 4 }));
      svg.appendChild(s('text', { x: X(t), y: m.t + ph + 17, 'text-anchor': 'middle' }, fmtTime(t)));
    });
    svg.appendChild(s('line', { class: 'axis', x1: m.l, x2: m.l + pw, y1: m.t + ph, y2: m.t + ph }));
    svg.appendChild(s('text', { x: m.l + pw, y: H - 2, 'text-anchor': 'end' }, 'time since start'));

    on.forEach(function (sr) {
      var xy = decimate(pts, sr.key, X, Y, pw);
      var d = 'M' + xy.map(function (q) { return q[0].toFixed(1) + ' ' + q[1].toFixed(1); }).join('L');
      if (sr.area) {
        var a = d + 'L' + xy[xy.length - 1][0].toFixed(1) + ' ' + (m.t + ph) + 'L' + xy[0][0].toFixed(1) + ' ' + (m.t + ph) + 'Z';
        svg.appendChild(s('path', { class: 'area', d: a, style: 'fill:' + sr.color }));
      }
      svg.appendChild(s('path', { class: 'series', d: d, style: 'stroke:' + sr.color, 'data-series': sr.key }));
    });

    if (num(PK.time_s) != null) {
      var px = X(num(PK.time_s));
      svg.appendChild(s('line', { class: 'peakline', x1: px, x2: px, y1: m.t - 6, y2: m.t + ph }));
      var label = 'peak ' + (num(PK.bytes) != null ? fmtBytes(PK.bytes) + ' ' : '') + 'at ' + fmtTime(PK.time_s);
      var right = px < m.l + pw * 0.7;
      svg.appendChild(s('text', { class: 'peaklabel', x: px + (right ? 6 : -6), y: m.t - 8,
                                  'text-anchor': right ? 'start' : 'end' }, label));
      if (num(PK.bytes) != null && series[0].on)
        svg.appendChild(s('circle', { class: 'peakdot', cx: px, cy: Y(num(PK.bytes)), r: 4.5 }));
    }

    var guide = s('line', { class: 'guide', y1: m.t, y2: m.t + ph, visibility: 'hidden' });
    svg.appendChild(guide);
    var RI = rangeInfo();
    if (RANGE && RI) {
      var xa = X(RANGE.k0 * RI.width_ms / 1000), xb = X(Math.min(t1, (RANGE.k1 + 1) * RI.width_ms / 1000));
      svg.appendChild(s('rect', { class: 'range-sel', x: xa, y: m.t, width: Math.max(1, xb - xa), height: ph }));
    }
    var drag = s('rect', { class: 'range-sel dragging', x: 0, y: m.t, width: 0, height: ph, visibility: 'hidden' });
    svg.appendChild(drag);
    var hit = s('rect', { class: 'hit', x: m.l, y: m.t, width: pw, height: ph });
    svg.appendChild(hit);
    function timeAt(ev) {
      var r = svg.getBoundingClientRect();
      return t0 + Math.max(0, Math.min(pw, ev.clientX - r.left - m.l)) / pw * (t1 - t0);
    }
    var dragFrom = null;
    hit.addEventListener('mousedown', function (ev) {
      if (!RI || ev.button !== 0) return;
      dragFrom = timeAt(ev);
      ev.preventDefault();
    });
    hit.addEventListener('mouseup', function (ev) {
      if (dragFrom == null) return;
      var ta = dragFrom, tb = timeAt(ev);
      dragFrom = null;
      drag.setAttribute('visibility', 'hidden');
      if (Math.abs(X(tb) - X(ta)) < 3) return; /* a click, not a drag */
      setRange(rangeBuckets(ta, tb));
    });
    hit.addEventListener('mousemove', function (ev) {
      var r = svg.getBoundingClientRect();
      var t = t0 + (ev.clientX - r.left - m.l) / pw * (t1 - t0);
      if (dragFrom != null) {
        var a = X(dragFrom), b = X(timeAt(ev));
        drag.setAttribute('x', Math.min(a, b));
        drag.setAttribute('width', Math.abs(b - a));
        drag.setAttribute('visibility', 'visible');
      }
      var i = nearest(pts, t);
      var p = pts[i];
      guide.setAttribute('x1', X(num(p.time_s)));
      guide.setAttribute('x2', X(num(p.time_s)));
      guide.setAttribute('visibility', 'visible');
      showTip(ev, [tipTitle(fmtTime(p.time_s)), tipRows(series.filter(function (sr) { return sr.has; })
        .map(function (sr) { return [sr.name, fmtBytes(p[sr.key])]; }))]);
    });
    hit.addEventListener('mouseleave', function () {
      guide.setAttribute('visibility', 'hidden');
      hideTip();
      if (dragFrom != null) { dragFrom = null; drag.setAttribute('visibility', 'hidden'); }
    });
    box.appendChild(svg);
  }
  draw();
  redraws.push(draw);
}

/* Keeps the first, the minimum, the maximum and the last sample per pixel
 * column, so that spikes survive however long the timeline is. */
function decimate(pts, key, X, Y, pw) {
  var out = [];
  if (pts.length <= pw * 2) {
    pts.forEach(function (p) { out.push([X(num(p.time_s)), Y(num0(p[key]))]); });
    return out;
  }
  var col = null, lo = null, hi = null, last = null;
  function flush() {
    if (col == null) return;
    var a = lo, b = hi;
    if (a[0] > b[0]) { var t = a; a = b; b = t; }
    out.push(a);
    if (b !== a) out.push(b);
    if (last !== a && last !== b) out.push(last);
  }
  pts.forEach(function (p) {
    var q = [X(num(p.time_s)), Y(num0(p[key]))], c = Math.floor(q[0]);
    if (c !== col) { flush(); col = c; lo = hi = last = q; return; }
    if (q[1] > lo[1]) lo = q; /* screen y grows downwards */
    if (q[1] < hi[1]) hi = q;
    last = q;
  });
  flush();
  return out;
}
function nearest(pts, t) {
  var lo = 0, hi = pts.length - 1;
  while (hi - lo > 1) {
    var mid = (lo + hi) >> 1;
    if (num(pts[mid].time_s) < t) lo = mid; else hi = mid;
  }
  return Math.abs(num(pts[lo].time_s) - t) <= Math.abs(num(pts[hi].time_s) - t) ? lo : hi;
}
