/* 50-fragmentation.js - the Fragmentation section: every number at the peak,
 * at exit and at the worst point with what it means, and the heap maps. */

/* What each number means; shown next to it (docs/html-report.md and the
 * analysis docs say the same at more length). */
var EXPLAIN = {
  time_s: 'When this point was taken, in seconds since the program started.',
  live_bytes: 'Live requested heap bytes at this point.',
  live_blocks: 'Live heap blocks at this point.',
  page_utilization: 'Live requested bytes ÷ bytes of the memory pages that hold at least one live block. ' +
    '100% means every touched page is full of live data; a low value means live blocks are spread thinly ' +
    'over many pages, which the allocator cannot give back to the system. Allocator-independent.',
  pages: 'Pages that hold at least one live block.',
  pages_bytes: 'Bytes of those pages: the denominator of page utilization.',
  free_bytes: 'Total size of the free gaps between live blocks inside the heap\'s regions.',
  largest_free_bytes: 'The largest single free gap: the biggest request the heap could serve ' +
    'from its current regions without growing.',
  external: 'External fragmentation = 1 − largest gap ÷ total free. 0% means all free space is one ' +
    'gap; near 100% means it is splintered into many small gaps that larger requests cannot use.',
  gaps: 'Number of free gaps between live blocks.',
  regions: 'Separate address ranges the live heap occupies (the main heap, mmap\'d arenas, ...).',
  span_bytes: 'Total size of those regions, from their lowest to their highest live address.',
  allocator_model: 'The allocator whose size classes estimate the usable size of each block.',
  usable_bytes: 'Estimated usable size of the live blocks under that allocator\'s size classes.',
  usable_measured_blocks: 'Live blocks whose usable size the recorder measured (malloc_usable_size at the call); ' +
    'the others\' usable size is estimated from the allocator model\'s size classes.',
  internal_bytes: 'Internal waste: usable size − requested size, summed over live blocks (size-class rounding).',
  internal_ratio: 'Internal waste ÷ usable bytes.',
  mallinfo: 'glibc\'s own counters (mallinfo2): none was sampled before this point, so they are not shown.',
  mallinfo_time_s: 'glibc\'s own counters (mallinfo2), from the last sample before this point; taken at:',
  mallinfo_arena: 'glibc: bytes the arenas got from the system with brk/sbrk (arena).',
  mallinfo_hblkhd: 'glibc: bytes in blocks served directly by mmap (hblkhd).',
  mallinfo_uordblks: 'glibc: bytes in use by the program, malloc\'s own view (uordblks).',
  mallinfo_fordblks: 'glibc: free bytes held inside the arenas (fordblks): fragmentation as malloc sees it.',
  mallinfo_keepcost: 'glibc: free bytes at the top of the heap that malloc_trim could return (keepcost).',
  rss_bytes: 'Resident set size of the whole process at this point (the last sample before it; RSS is sampled, ' +
    'see the Peak RSS card for the kernel\'s high-water mark).',
  heap_to_rss: 'Live heap bytes ÷ RSS: the share of resident memory that is live heap data. Low values ' +
    'mean fragmentation, allocator caches, or memory that is not heap (code, stacks, mmap).'
};
var METRIC_ORDER = ['time_s', 'live_bytes', 'live_blocks', 'page_utilization', 'pages', 'pages_bytes',
  'free_bytes', 'largest_free_bytes', 'external', 'gaps', 'regions', 'span_bytes', 'allocator_model',
  'usable_bytes', 'usable_measured_blocks', 'internal_bytes', 'internal_ratio', 'rss_bytes', 'heap_to_rss', 'mallinfo_time_s',
  'mallinfo_arena', 'mallinfo_hblkhd', 'mallinfo_uordblks', 'mallinfo_fordblks', 'mallinfo_keepcost'];

function fmtMetric(key, v) {
  if (v == null) return '–';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (typeof v === 'string') return v;
  if (typeof v !== 'number') return JSON.stringify(v);
  if (/(^|_)bytes($|_)/.test(key) || /^mallinfo_(?!time)/.test(key)) return fmtBytes(v);
  if (/_pct$|_percent$/.test(key)) return v.toFixed(1) + '%';
  if (/utilization|^external|^internal$|fraction|share|_ratio$|^heap_to_rss$/.test(key) && Math.abs(v) <= 1.5) return fmtPct(v);
  if (/ratio|_over_/.test(key)) return v.toFixed(2) + '×';
  if (/(^|_)s$/.test(key)) return fmtTime(v);
  if (/_ms$/.test(key)) return fmtMs(v);
  return fmtNum(v);
}

/* {a: 1, glibc: {arena: 2}} -> {a: 1, glibc_arena: 2} */
function flatten(o, prefix, out) {
  for (var k in o) {
    var v = o[k];
    if (v && typeof v === 'object' && !Array.isArray(v)) flatten(v, prefix + k + '_', out);
    else if (!Array.isArray(v)) out[prefix + k] = v;
  }
  return out;
}

var RAMP = [[0, [178, 24, 43]], [25, [239, 138, 98]], [50, [253, 219, 199]], [75, [103, 169, 207]], [100, [33, 102, 172]]];
function rampColor(u) {
  u = Math.max(0, Math.min(100, u));
  for (var i = 1; i < RAMP.length; i++) {
    if (u <= RAMP[i][0]) {
      var a = RAMP[i - 1], b = RAMP[i], t = (u - a[0]) / (b[0] - a[0]);
      return 'rgb(' + [0, 1, 2].map(function (j) { return Math.round(a[1][j] + (b[1][j] - a[1][j]) * t); }).join(',') + ')';
    }
  }
  return 'rgb(33,102,172)';
}
var EMPTY_CELL = 'rgb(226,230,235)';

function renderFrag(body) {
  var F = obj(D.fragmentation);
  /* "valid": false marks a moment the analysis could not measure (nothing
   * was ever live, say): its column says so instead of showing zeros. */
  var points = [['at_peak', 'At peak'], ['at_end', 'At exit'], ['worst', 'Worst point']]
    .filter(function (p) { return isObj(F[p[0]]); });
  if (points.length) {
    var flat = points.map(function (p) {
      var f = flatten(obj(F[p[0]]), '', {});
      var valid = f.valid !== false;
      delete f.valid;
      return valid ? f : { time_s: 'not measured' };
    });
    var keys = [];
    METRIC_ORDER.forEach(function (k) { if (flat.some(function (f) { return k in f; })) keys.push(k); });
    flat.forEach(function (f) { Object.keys(f).sort().forEach(function (k) { if (keys.indexOf(k) < 0) keys.push(k); }); });
    var tb = h('tbody'), FL = obj(F.labels);
    keys.forEach(function (k) {
      /* The analysis names what each number is (fragmentation.labels). */
      var name = typeof FL[k] === 'string' ? [k, h('br'), h('small', null, FL[k])] : k;
      tb.appendChild(h('tr', null, [h('td', { class: 'metric', title: EXPLAIN[k] || null }, name)].concat(
        flat.map(function (f) { return h('td', { class: 'num' }, fmtMetric(k, f[k])); }),
        [h('td', { class: 'explain' }, EXPLAIN[k] || '')])));
    });
    append(body, h('div', { class: 'tablewrap' }, h('table', { class: 'data metrics' }, [
      h('thead', null, h('tr', null, [h('th', null, 'Metric')].concat(
        points.map(function (p) { return h('th', { class: 'num' }, p[1]); }), [h('th', null, 'What it means')]))),
      tb])));
  } else {
    noData(body, 'No fragmentation numbers in this report.');
  }

  body.appendChild(h('h3', null, 'Heap maps'));
  body.appendChild(h('p', { class: 'note' },
    'Each cell is a slice of the busiest heap region\'s address range, in address order, shaded by the page ' +
    'utilization of that slice: live requested bytes ÷ bytes of its pages that hold a live block. Red, thinly ' +
    'used cells scattered between blue ones are fragmentation: memory the process holds but cannot use for ' +
    'larger blocks or give back.'));
  var legend = h('div', { class: 'ramp' }, [
    '0%', h('span', { class: 'bar', style: 'background:linear-gradient(90deg,' +
      RAMP.map(function (r) { return rampColor(r[0]) + ' ' + r[0] + '%'; }).join(',') + ')' }),
    '100% used', h('span', { class: 'swatch', style: 'background:' + EMPTY_CELL }), 'no page held'
  ]);
  body.appendChild(legend);
  var maps = obj(F.heap_maps), grid = h('div', { class: 'heapmaps' });
  body.appendChild(grid);
  /* Both boxes go in before either is drawn: a canvas is sized from its
   * grid column, which depends on how many columns there are. */
  var boxes = [['at_peak', 'At peak'], ['at_end', 'At exit']].map(function (p) {
    return grid.appendChild(h('div', { class: 'heapmap', id: 'heapmap-' + p[0] }));
  });
  heapMap(boxes[0], 'At peak', obj(maps.at_peak));
  heapMap(boxes[1], 'At exit', obj(maps.at_end));
}

/* One square per cell of the analysis' heap map, coloured by its page
 * utilization; a document with more cells than HEAPMAP_MAX_CELLS (the
 * analysis writes at most 4096) shows the first ones and says so. */
var HEAPMAP_MAX_CELLS = 65536;
function heapMap(box, title, hm) {
  var cells = arr(hm.cells);
  box.appendChild(h('h3', null, title));
  if (!cells.length) return noData(box, 'No heap map for this point.');
  var cellBytes = num(hm.cell_bytes), baseNum = typeof hm.base === 'string' ? parseInt(hm.base, 16) : num(hm.base);
  var n = Math.min(cells.length, HEAPMAP_MAX_CELLS);
  box.appendChild(h('div', { class: 'caption' }, fmtNum(cells.length) + ' cells' +
    (cellBytes ? ' of ' + fmtBytes(cellBytes) : '') + (hm.base != null ? ' from ' + fmtAddr(hm.base) : '') +
    (n < cells.length ? ' (the first ' + fmtNum(n) + ' drawn)' : '')));
  var holder = h('div');
  box.appendChild(holder);

  function draw() {
    clear(holder);
    var W = Math.min(widthOf(box, 600), 760), maxH = 260;
    var cs = Math.max(2, Math.min(16, Math.floor(Math.sqrt(W * maxH / n))));
    var cols = Math.max(1, Math.floor(W / cs)), rows = Math.ceil(n / cols);
    var dpr = window.devicePixelRatio || 1;
    var cv = h('canvas', { width: Math.round(cols * cs * dpr), height: Math.round(rows * cs * dpr),
                           role: 'img', 'aria-label': 'heap map ' + title });
    cv.style.width = cols * cs + 'px';
    cv.style.height = rows * cs + 'px';
    var ctx = cv.getContext('2d');
    ctx.scale(dpr, dpr);
    var gap = cs >= 6 ? 1 : 0;
    for (var i = 0; i < n; i++) {
      var u = num(cells[i]);
      ctx.fillStyle = u != null && u >= 0 ? rampColor(u) : EMPTY_CELL;
      ctx.fillRect((i % cols) * cs, Math.floor(i / cols) * cs, cs - gap, cs - gap);
    }
    cv.addEventListener('mousemove', function (ev) {
      var r = cv.getBoundingClientRect();
      var cx = Math.floor((ev.clientX - r.left) / cs), cy = Math.floor((ev.clientY - r.top) / cs);
      var i = cy * cols + cx;
      if (cx < 0 || cx >= cols || i < 0 || i >= n) return hideTip();
      var u = num(cells[i]);
      var addr = baseNum != null && cellBytes ? fmtAddr(baseNum + i * cellBytes) + ' – ' + fmtAddr(baseNum + (i + 1) * cellBytes) : null;
      showTip(ev, [tipTitle('cell ' + i), tipLoc(addr), tipRows([
        cellBytes ? ['size', fmtBytes(cellBytes)] : null,
        ['used by live blocks', u != null && u >= 0 ? u + '%' : 'no page held']
      ])]);
    });
    cv.addEventListener('mouseleave', hideTip);
    holder.appendChild(cv);
  }
  draw();
  redraws.push(draw);
}
