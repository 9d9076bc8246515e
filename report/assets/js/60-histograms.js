/* 60-histograms.js - the Histograms section: request sizes and lifetimes. */

function renderHists(body) {
  var H = obj(D.histograms), grid = h('div', { class: 'hists' });
  body.appendChild(grid);
  var a = h('div', { id: 'hist-sizes' }), b = h('div', { id: 'hist-lifetimes' });
  append(grid, [a, b]);
  histogram(a, 'Allocation sizes', arr(H.sizes), fmtBytes, true);
  histogram(b, 'Lifetimes (allocation to free)', arr(H.lifetimes_ms), fmtMs, false);
  if (num(H.live_at_end))
    b.appendChild(h('div', { class: 'note' }, fmtNum(H.live_at_end) + ' blocks were still live at exit (no lifetime).'));
}

function histogram(box, title, buckets, fmtLe, hasBytes) {
  box.appendChild(h('h3', null, title));
  buckets = buckets.filter(isObj);
  if (!buckets.length) return noData(box, 'No data.');
  var modes = [{ key: 'count', label: 'Count', fmt: fmtNum }];
  if (hasBytes && buckets.some(function (x) { return x.bytes != null; }))
    modes.push({ key: 'bytes', label: 'Bytes', fmt: fmtBytes });
  var mode = modes[0];
  var seg = h('div', { class: 'seg' });
  modes.forEach(function (md) {
    var btn = h('button', { type: 'button' }, md.label);
    btn.addEventListener('click', function () { mode = md; draw(); });
    seg.appendChild(btn);
  });
  if (modes.length > 1) box.appendChild(h('div', { class: 'controls' }, seg));
  var chart = h('div', { class: 'chart' });
  box.appendChild(chart);
  function label(i) {
    var le = buckets[i].le, open = le == null || le === 'inf' || le === '+Inf' || num(le) == null;
    if (!open) return '≤ ' + fmtLe(num(le));
    return i > 0 && num(buckets[i - 1].le) != null ? '> ' + fmtLe(num(buckets[i - 1].le)) : 'all';
  }
  function draw() {
    Array.prototype.forEach.call(seg.children, function (btn, i) { btn.classList.toggle('on', modes[i] === mode); });
    clear(chart);
    var W = widthOf(chart, 600), Ht = 230, m = { l: 64, r: 8, t: 10, b: 58 };
    var pw = W - m.l - m.r, ph = Ht - m.t - m.b, n = buckets.length;
    var vals = buckets.map(function (x) { return num0(x[mode.key]); });
    var mx = Math.max.apply(null, vals.concat([1]));
    var yt = ticks(mx * 1.05, 4, mode.key === 'bytes'), top = Math.max(yt[yt.length - 1], mx);
    var svg = s('svg', { width: W, height: Ht, viewBox: '0 0 ' + W + ' ' + Ht, role: 'img', 'aria-label': title });
    yt.forEach(function (v) {
      var y = m.t + ph - v / top * ph;
      svg.appendChild(s('line', { class: 'grid', x1: m.l, x2: m.l + pw, y1: y, y2: y }));
      svg.appendChild(s('text', { x: m.l - 6, y: y + 4, 'text-anchor': 'end' },
        mode.key === 'bytes' ? fmtBytes(v, true) : fmtNum(v)));
    });
    var bw = pw / n, every = Math.max(1, Math.ceil(14 / bw));
    buckets.forEach(function (bk, i) {
      var v = vals[i], bh = v / top * ph, x = m.l + i * bw;
      var r = s('rect', { class: 'barv', x: (x + 1).toFixed(1), y: (m.t + ph - bh).toFixed(1),
                          width: Math.max(bw - 2, 1).toFixed(1), height: Math.max(bh, v > 0 ? 1 : 0).toFixed(1) });
      r.addEventListener('mousemove', function (ev) {
        var lo = i > 0 ? num(buckets[i - 1].le) : null, hi = num(bk.le);
        showTip(ev, [tipTitle(lo != null && hi != null ? '(' + fmtLe(lo) + ', ' + fmtLe(hi) + ']' : label(i)), tipRows([
          ['count', fmtNum(bk.count)], bk.bytes != null ? ['bytes', fmtBytes(bk.bytes)] : null])]);
      });
      r.addEventListener('mouseleave', hideTip);
      svg.appendChild(r);
      if (i % every === 0) {
        var tx = x + bw / 2, ty = m.t + ph + 10;
        svg.appendChild(s('text', { x: tx, y: ty, 'text-anchor': 'end',
                                    transform: 'rotate(-40 ' + tx.toFixed(1) + ' ' + ty + ')' }, label(i)));
      }
    });
    svg.appendChild(s('line', { class: 'axis', x1: m.l, x2: m.l + pw, y1: m.t + ph, y2: m.t + ph }));
    chart.appendChild(svg);
  }
  draw();
  redraws.push(draw);
}
