/* report.js - draws the memlens HTML report from the JSON document embedded
 * in the page's "ml-data" script element. Plain ES2017, no libraries, no network.
 *
 * Rules this file keeps (checked by tests/unit/report/test_html.c and
 * tests/e2e/test_html_browser.sh):
 * - every string from the report (symbols, paths, argv, messages) reaches the
 *   page through textContent, createTextNode or setAttribute on a harmless
 *   attribute: no HTML parsing of data anywhere in this file;
 * - nothing here computes a metric: every number shown comes from the
 *   analysis library through the JSON (the flame graph draws the JSON's call
 *   tree, "flame"); the page formats, sorts, filters and lays them out, and
 *   shows a value as a share of a total only when the JSON has that total;
 * - any key may be missing: each section says "no data" instead of failing,
 *   and a section that throws is replaced by a note while the error goes to
 *   <pre id="errors"> (which the browser test expects to stay empty);
 * - large reports stay fast: tables show 500 rows at a time, the flame graph
 *   draws at most 5000 nodes, long timelines are decimated per pixel.
 */
(function () {
  'use strict';

  var TABLE_PAGE = 500;
  var FLAME_MAX_NODES = 5000;
  var FLAME_MIN_PX = 0.6;
  var FLAME_ROW = 18;

  /* ---------------------------------------------------------------------- */
  /* Errors                                                                  */
  /* ---------------------------------------------------------------------- */

  var errorsEl = document.getElementById('errors');
  function reportError(msg) {
    errorsEl.hidden = false;
    errorsEl.textContent += msg + '\n';
    if (window.console && console.error) console.error('memlens report: ' + msg);
  }
  window.addEventListener('error', function (e) {
    if (e.target && e.target !== window && e.target.tagName) {
      reportError('could not load a ' + e.target.tagName.toLowerCase() + ' element');
    } else {
      reportError((e.message || 'error') + (e.lineno ? ' (line ' + e.lineno + ')' : ''));
    }
  }, true);
  window.addEventListener('unhandledrejection', function (e) {
    reportError('unhandled rejection: ' + (e.reason && e.reason.message || e.reason));
  });
  document.addEventListener('securitypolicyviolation', function (e) {
    reportError('blocked by the page\'s security policy: ' + e.violatedDirective +
                (e.blockedURI ? ' ' + e.blockedURI : ''));
  });

  /* ---------------------------------------------------------------------- */
  /* DOM helpers (text only: no HTML parsing of data)                        */
  /* ---------------------------------------------------------------------- */

  /* The SVG namespace, read from an <svg> the HTML parser created, so that
   * the page holds no URL at all. */
  var SVGNS = document.getElementById('ml-svg-ns').namespaceURI;

  function append(el, kids) {
    if (kids == null || kids === false) return el;
    if (!Array.isArray(kids)) kids = [kids];
    for (var i = 0; i < kids.length; i++) {
      var k = kids[i];
      if (k == null || k === false) continue;
      if (Array.isArray(k)) append(el, k);
      else el.appendChild(typeof k === 'object' ? k : document.createTextNode(String(k)));
    }
    return el;
  }
  function setAttrs(el, attrs) {
    if (!attrs) return el;
    for (var k in attrs) {
      var v = attrs[k];
      if (v == null || v === false) continue;
      if (k === 'text') el.textContent = String(v);
      else if (k === 'style') el.style.cssText = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    return el;
  }
  function h(tag, attrs, kids) {
    return append(setAttrs(document.createElement(tag), attrs), kids);
  }
  function s(tag, attrs, kids) {
    return append(setAttrs(document.createElementNS(SVGNS, tag), attrs), kids);
  }
  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  }
  function noData(parent, msg) {
    return append(parent, h('div', { class: 'nodata' }, msg || 'No data in this report.'));
  }

  /* ---------------------------------------------------------------------- */
  /* Values and formatting                                                   */
  /* ---------------------------------------------------------------------- */

  function obj(v) { return v && typeof v === 'object' && !Array.isArray(v) ? v : {}; }
  function arr(v) { return Array.isArray(v) ? v : []; }
  function isObj(v) { return !!v && typeof v === 'object' && !Array.isArray(v); }
  /* The objects of a list (entries of another type are skipped). */
  function objs(v) { return arr(v).filter(isObj); }
  function num(v) {
    if (typeof v === 'number') return isFinite(v) ? v : null;
    if (typeof v === 'string' && v.trim() !== '' && isFinite(+v)) return +v;
    return null;
  }
  function num0(v) { var n = num(v); return n == null ? 0 : n; }
  function first() {
    for (var i = 0; i < arguments.length; i++) if (num(arguments[i]) != null) return num(arguments[i]);
    return null;
  }

  var UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  function fmtBytes(b, compact) {
    b = num(b);
    if (b == null) return '–';
    var sign = b < 0 ? '-' : '';
    b = Math.abs(b);
    if (b < 1024) return sign + Math.round(b) + ' B';
    var u = -1;
    do { b /= 1024; u++; } while (b >= 1024 && u < UNITS.length - 1);
    var t = b.toFixed(1);
    if (compact && /\.0$/.test(t)) t = t.slice(0, -2);
    return sign + t + ' ' + UNITS[u];
  }
  function fmtNum(n) {
    n = num(n);
    if (n == null) return '–';
    return Number.isInteger(n) ? n.toLocaleString('en-US')
                               : n.toLocaleString('en-US', { maximumFractionDigits: 3 });
  }
  function fmtPct(frac, digits) {
    frac = num(frac);
    if (frac == null) return '–';
    return (frac * 100).toFixed(digits == null ? 1 : digits) + '%';
  }
  function fmtTime(sec) {
    sec = num(sec);
    if (sec == null) return '–';
    if (sec === 0) return '0 s';
    if (Math.abs(sec) < 1) return +(sec * 1000).toPrecision(3) + ' ms';
    if (Math.abs(sec) < 120) return +sec.toFixed(2) + ' s';
    var m = Math.floor(sec / 60);
    return m + ' min ' + Math.round(sec - m * 60) + ' s';
  }
  function fmtMs(ms) {
    ms = num(ms);
    if (ms == null) return '–';
    return ms >= 1000 ? fmtTime(ms / 1000) : +ms.toPrecision(3) + ' ms';
  }
  function fmtAddr(a) {
    if (typeof a === 'string') return a;
    a = num(a);
    return a == null ? '?' : '0x' + a.toString(16);
  }
  function basename(p) {
    p = String(p);
    var i = p.lastIndexOf('/');
    return i >= 0 && i < p.length - 1 ? p.slice(i + 1) : p;
  }
  function shellQuote(a) {
    return /^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : '\'' + a.replace(/'/g, '\'\\\'\'') + '\'';
  }
  function plural(n, one, many) { return fmtNum(n) + ' ' + (n === 1 ? one : many); }

  var SIGNALS = { 1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 4: 'SIGILL', 5: 'SIGTRAP', 6: 'SIGABRT',
                  7: 'SIGBUS', 8: 'SIGFPE', 9: 'SIGKILL', 10: 'SIGUSR1', 11: 'SIGSEGV',
                  12: 'SIGUSR2', 13: 'SIGPIPE', 14: 'SIGALRM', 15: 'SIGTERM' };

  /* Frames: {function, file, line, module, address}, innermost first. */
  function frameName(f) {
    f = obj(f);
    if (f.function != null && f.function !== '') return String(f.function);
    var m = f.module ? basename(f.module) : '??';
    return f.address != null ? m + '+' + fmtAddr(f.address) : m;
  }
  function frameLoc(f) {
    f = obj(f);
    if (f.file) return basename(f.file) + (num(f.line) ? ':' + f.line : '');
    return f.module ? basename(f.module) : '';
  }
  function frameLocFull(f) {
    f = obj(f);
    var parts = [];
    if (f.file) parts.push(String(f.file) + (num(f.line) ? ':' + f.line : ''));
    if (f.module) parts.push(String(f.module));
    if (f.address != null) parts.push(fmtAddr(f.address));
    return parts.join('  ·  ');
  }
  function siteFrames(site) { return arr(obj(site).frames); }
  function siteText(site) {
    var fr = siteFrames(site);
    var t = [];
    for (var i = 0; i < fr.length; i++) {
      var f = obj(fr[i]);
      t.push(frameName(f), f.file || '', f.module || '');
    }
    return t.join('\n').toLowerCase();
  }
  function framesList(frames) {
    var ol = h('ol', { class: 'frames' });
    if (!frames.length) return append(ol, h('li', null, 'no stack recorded'));
    frames.forEach(function (f) {
      ol.appendChild(h('li', null, [frameName(f), h('span', { class: 'loc' }, frameLocFull(f))]));
    });
    return ol;
  }

  /* ---------------------------------------------------------------------- */
  /* Tooltip                                                                 */
  /* ---------------------------------------------------------------------- */

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

  /* ---------------------------------------------------------------------- */
  /* The data                                                                */
  /* ---------------------------------------------------------------------- */

  var D;
  try {
    D = JSON.parse(document.getElementById('ml-data').textContent);
  } catch (e) {
    reportError('the embedded report data is not valid JSON: ' + e.message);
    return;
  }
  if (!D || typeof D !== 'object' || Array.isArray(D)) {
    reportError('the embedded report data is not a JSON object');
    return;
  }
  var sites = objs(D.sites);
  var sitesById = new Map();
  sites.forEach(function (st) { if (st && st.id != null) sitesById.set(String(st.id), st); });
  var siteTables = {}; /* section id -> table API, for "show site" links */

  /* ---------------------------------------------------------------------- */
  /* Summary                                                                 */
  /* ---------------------------------------------------------------------- */

  /* The leak totals per kind, as the analysis counted them (never added up
   * here from the per-site rows). */
  function leakKinds() {
    var L = obj(D.leaks), out = {};
    ['definite', 'indirect', 'reachable'].forEach(function (k) {
      var o = obj(L[k]);
      var b = first(o.bytes, L[k + '_bytes']), n = first(o.blocks, L[k + '_blocks']);
      out[k] = { bytes: b, blocks: n };
    });
    return out;
  }

  function traceStatus() {
    var T = obj(D.trace), P = obj(D.process), tot = obj(D.totals);
    var st = {
      complete: typeof T.complete === 'boolean' ? T.complete
              : typeof P.complete === 'boolean' ? P.complete : null,
      truncated: T.truncated === true || P.truncated === true,
      lost: first(T.lost_events, T.dropped_events, P.lost_events, tot.lost_events),
      waits: first(T.ring_waits, T.producer_waits, T.waits, tot.ring_waits),
      unknownFrees: first(T.unknown_frees, tot.unknown_frees)
    };
    return st;
  }

  function duration() {
    var tl = arr(D.timeline);
    var last = tl.length ? num(obj(tl[tl.length - 1]).time_s) : null;
    return first(D.duration_s, obj(D.process).duration_s, obj(D.totals).duration_s,
                 obj(D.trace).duration_s, last);
  }

  function card(label, value, subs, cls, title) {
    return h('div', { class: 'card' + (cls ? ' ' + cls : ''), title: title }, [
      h('div', { class: 'label' }, label),
      h('div', { class: 'value' }, value),
      (subs || []).filter(Boolean).map(function (x) { return h('div', { class: 'sub' }, x); })
    ]);
  }
  function kv(label, value) { return [label + ' ', h('b', null, value)]; }

  function banner(strong, text) {
    document.getElementById('banners').appendChild(
      h('div', { class: 'banner' }, [h('strong', null, strong), text]));
  }

  function renderSummary(body) {
    var P = obj(D.process), T = obj(D.totals), PK = obj(D.peak), L = obj(D.leaks);
    var F = obj(D.fragmentation);
    var cmd = arr(P.command).map(String);
    var prog = cmd.length ? basename(cmd[0]) : P.exe ? basename(P.exe) : null;
    if (prog) {
      document.getElementById('title').textContent = 'memlens report: ' + prog;
      document.title = prog + ' · memlens report';
    }
    body.appendChild(h('div', { class: 'cmdline', title: 'command line' },
      cmd.length ? '$ ' + cmd.map(shellQuote).join(' ') : 'command line not recorded'));

    var cards = h('div', { class: 'cards' });
    body.appendChild(cards);

    var exitText = null, sig = num(P.signal);
    if (sig) exitText = 'killed by signal ' + sig + (SIGNALS[sig] ? ' (' + SIGNALS[sig] + ')' : '');
    else if (num(P.exit_code) != null) exitText = 'exit code ' + P.exit_code;
    else if (P.end === 'exec') exitText = 'replaced itself (exec)';
    else if (P.end === 'unknown') exitText = 'end not recorded';
    cards.appendChild(card('Program', prog || '–', [
      P.pid != null ? kv('pid', String(P.pid)) : null, exitText
    ], sig || num(P.exit_code) ? 'bad' : null));

    var dur = duration();
    cards.appendChild(card('Duration', fmtTime(dur), [
      arr(D.timeline).length ? plural(arr(D.timeline).length, 'timeline sample', 'timeline samples') : null
    ]));

    cards.appendChild(card('Allocation calls', fmtNum(T.alloc_calls), [
      T.free_calls != null ? kv('free', fmtNum(T.free_calls)) : null,
      [].concat(T.realloc_calls != null ? kv('realloc', fmtNum(T.realloc_calls)) : [],
                T.mmap_calls != null ? [' · '].concat(kv('mmap', fmtNum(T.mmap_calls))) : [])
    ], null, 'malloc-family calls that returned a block; a realloc counts as one allocation of its new size'));

    var tmpShare = num(T.alloc_calls) ? num0(T.temporary_allocs) / num(T.alloc_calls) : null;
    cards.appendChild(card('Bytes allocated', fmtBytes(T.bytes_allocated), [
      T.temporary_allocs != null
        ? kv('temporary', fmtNum(T.temporary_allocs) + (tmpShare != null ? ' (' + fmtPct(tmpShare) + ' of calls)' : ''))
        : null
    ], null, 'sum of all requested sizes; a temporary allocation is freed before any other allocation happens'));

    cards.appendChild(card('Peak heap', fmtBytes(PK.bytes), [
      PK.time_s != null ? kv('at', fmtTime(PK.time_s)) : null,
      PK.blocks != null ? kv('blocks', fmtNum(PK.blocks)) : null,
      num(T.peak_rss_bytes) ? kv('peak RSS', fmtBytes(T.peak_rss_bytes)) : null
    ], null, 'maximum of live requested heap bytes (anonymous mmap excluded)'));

    var lk = leakKinds();
    var leakedBytes = first(L.bytes);
    cards.appendChild(card('Leaked at exit', fmtBytes(leakedBytes), [
      L.blocks != null ? kv('in', plural(num0(L.blocks), 'block', 'blocks')) : null,
      lk.definite.bytes != null ? kv('definite', fmtBytes(lk.definite.bytes)) : null,
      lk.indirect.bytes != null || lk.reachable.bytes != null
        ? [].concat(kv('indirect', fmtBytes(lk.indirect.bytes)), [' · '], kv('reachable', fmtBytes(lk.reachable.bytes)))
        : null,
      num(L.suppressed_bytes) ? kv('suppressed', fmtBytes(L.suppressed_bytes)) : null
    ], num0(lk.definite.bytes) > 0 ? 'bad' : leakedBytes === 0 ? 'good' : null,
    'definite: no pointer to the block remains; indirect: only reachable from leaked blocks; reachable: still pointed to from globals or stacks at exit'));

    [['at_peak', 'Fragmentation at peak'], ['at_end', 'Fragmentation at exit']].forEach(function (p) {
      var f = obj(F[p[0]]);
      cards.appendChild(card(p[1], f.page_utilization != null ? fmtPct(f.page_utilization) : '–', [
        f.page_utilization != null ? 'page utilization' : 'no data',
        f.external != null ? kv('external', fmtPct(f.external)) : null,
        f.free_bytes != null ? kv('free gaps', fmtBytes(f.free_bytes)) : null
      ], null, EXPLAIN.page_utilization));
    });

    var G = obj(D.gpu), gdev = objs(G.devices);
    if (gdev.length) {
      /* Leaked bytes per device: the document has no all-devices total. */
      var gleak = gdev.map(function (d) {
        return gdev.length > 1 ? kv('leaked on ' + gpuName(d), fmtBytes(d.leaked_bytes)) : kv('leaked', fmtBytes(d.leaked_bytes));
      });
      cards.appendChild(card('GPU peak', fmtBytes(G.peak_bytes), [
        [plural(gdev.length, 'device', 'devices')].concat(G.peak_time_s != null ? [' · '].concat(kv('at', fmtTime(G.peak_time_s))) : [])
      ].concat(gleak), null, 'peak of device memory live at once, all devices together'));
    }

    var ts = traceStatus();
    var tv = ts.truncated || ts.complete === false ? 'incomplete' : ts.complete ? 'complete' : '–';
    var TR = obj(D.trace);
    cards.appendChild(card('Trace', tv, [
      ts.lost != null ? kv('lost events', fmtNum(ts.lost)) : null,
      ts.waits != null ? kv('ring waits', fmtNum(ts.waits)) : null,
      num(TR.truncated_stacks) ? kv('stacks cut at --depth', fmtNum(TR.truncated_stacks)) : null,
      ts.unknownFrees ? kv('frees of unknown blocks', fmtNum(ts.unknownFrees)) : null,
      num(TR.size_bytes) ? kv('size', fmtBytes(TR.size_bytes) + (num(TR.records) ? ', ' + fmtNum(TR.records) + ' records' : '')) : null
    ], tv === 'incomplete' || num0(ts.lost) > 0 ? 'bad' : tv === 'complete' ? 'good' : null,
    'complete: the trace ends with the end record written at exit' + (TR.path != null ? '\n' + String(TR.path) : '')));

    /* Warnings that change how every number must be read: the analysis's
     * own when the document has them, else what the page can tell. */
    var warns = arr(D.warnings).filter(function (w) { return typeof w === 'string' && w; });
    warns.slice(0, 6).forEach(function (w) { banner('Warning:', ' ' + w); });
    if (warns.length > 6) {
      var more = h('details', { class: 'banner' }, h('summary', null, fmtNum(warns.length - 6) + ' more warnings'));
      warns.slice(6).forEach(function (w) { more.appendChild(h('div', null, w)); });
      document.getElementById('banners').appendChild(more);
    }
    if (Array.isArray(D.warnings)) {
      /* the analysis said it all */
    } else if (P.sampled) {
      var every = first(P.sample_bytes, typeof P.sampled === 'number' ? P.sampled : null, obj(D.trace).sample_bytes);
      banner('Sampled recording.', ' One allocation was recorded per ' +
        (every ? fmtBytes(every) + ' ' : '') + 'allocated on average (like tcmalloc\'s heap sampler): ' +
        'calls and bytes are statistical estimates, and small, rare sites may be missing.');
    }
    if (Array.isArray(D.warnings)) {
      /* idem */
    } else if (ts.truncated || ts.complete === false)
      banner('Incomplete trace.', ' The recording ends early (the program or memlens was killed before the end ' +
        'record): numbers cover the recorded part only, and blocks live at the cut show as leaks.');
    if (num0(ts.lost) > 0 && !Array.isArray(D.warnings))
      banner('Lost events.', ' ' + fmtNum(ts.lost) + ' events did not reach the trace; totals are lower bounds.');
    var sv = num(D.schema_version);
    if (sv != null && sv > 1)
      banner('Newer report format.', ' This page knows schema_version 1 and the report has ' + sv +
        '; some parts may be missing.');
    document.getElementById('schema').textContent =
      (sv != null ? 'report schema_version ' + sv : 'report schema_version unknown') +
      (typeof D.generator === 'string' ? ' from ' + D.generator : '');
  }

  /* ---------------------------------------------------------------------- */
  /* Timeline                                                                */
  /* ---------------------------------------------------------------------- */

  var SERIES = [
    { key: 'heap_bytes', name: 'Heap (live requested)', color: 'var(--s-heap)', area: true },
    { key: 'rss_bytes', name: 'RSS', color: 'var(--s-rss)' },
    { key: 'mmap_bytes', name: 'Anonymous mmap', color: 'var(--s-mmap)' },
    { key: 'gpu_bytes', name: 'GPU', color: 'var(--s-gpu)' }
  ];

  function renderTimeline(body) {
    var pts = objs(D.timeline).filter(function (p) { return num(p.time_s) != null; });
    pts.sort(function (a, b) { return num(a.time_s) - num(b.time_s); });
    if (!pts.length) return noData(body, 'No timeline samples in this report.');
    var PK = obj(D.peak);
    var series = SERIES.map(function (sr) {
      var has = pts.some(function (p) { return num0(p[sr.key]) > 0; });
      return { key: sr.key, name: sr.name, color: sr.color, area: sr.area, has: has, on: has };
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
    append(body, [legend, box]);

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
      var hit = s('rect', { class: 'hit', x: m.l, y: m.t, width: pw, height: ph });
      svg.appendChild(hit);
      hit.addEventListener('mousemove', function (ev) {
        var r = svg.getBoundingClientRect();
        var t = t0 + (ev.clientX - r.left - m.l) / pw * (t1 - t0);
        var i = nearest(pts, t);
        var p = pts[i];
        guide.setAttribute('x1', X(num(p.time_s)));
        guide.setAttribute('x2', X(num(p.time_s)));
        guide.setAttribute('visibility', 'visible');
        showTip(ev, [tipTitle(fmtTime(p.time_s)), tipRows(series.filter(function (sr) { return sr.has; })
          .map(function (sr) { return [sr.name, fmtBytes(p[sr.key])]; }))]);
      });
      hit.addEventListener('mouseleave', function () { guide.setAttribute('visibility', 'hidden'); hideTip(); });
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

  /* ---------------------------------------------------------------------- */
  /* Flame graph                                                             */
  /* ---------------------------------------------------------------------- */

  var METRICS = [
    { key: 'alloc', label: 'Allocated', what: 'bytes allocated', bytes: true },
    { key: 'peak', label: 'Peak', what: 'bytes live at the peak', bytes: true },
    { key: 'leaked', label: 'Leaked', what: 'bytes leaked at exit', bytes: true },
    { key: 'calls', label: 'Calls', what: 'allocation calls', bytes: false }
  ];
  function metricFmt(mt, v) { return mt.bytes ? fmtBytes(v) : fmtNum(v); }

  /* A node of the JSON's call tree ("flame", built by the analysis library:
   * every number is the node's own). path: the child indexes from the root,
   * joined by '.', which names the JSON node the drawn frame stands for. */
  function flameNode(src, parent, path) {
    return {
      name: src.name != null && src.name !== '' ? String(src.name) : '??',
      file: src.file != null ? String(src.file) : null,
      line: num(src.line),
      module: src.module != null ? String(src.module) : null,
      v: { alloc: num0(src.alloc), peak: num0(src.peak), leaked: num0(src.leaked), calls: num0(src.calls) },
      children: [], parent: parent, depth: parent ? parent.depth + 1 : 0, gen: 0, path: path
    };
  }

  /* The tree from D.flame, iteratively (deep recursion in the program means
   * a deep tree here). */
  function flameFromJson(src) {
    var root = flameNode(src, null, '');
    if (src.name == null || src.name === '') root.name = 'all';
    var stack = [[src, root]];
    while (stack.length) {
      var top = stack.pop(), ch = arr(top[0].children);
      for (var i = 0; i < ch.length; i++) {
        if (!ch[i] || typeof ch[i] !== 'object') continue;
        var n = flameNode(ch[i], top[1], top[1].path === '' ? String(i) : top[1].path + '.' + i);
        top[1].children.push(n);
        stack.push([ch[i], n]);
      }
    }
    return root;
  }

  function hashStr(str) {
    var x = 2166136261;
    for (var i = 0; i < str.length; i++) { x ^= str.charCodeAt(i); x = Math.imul(x, 16777619); }
    return x >>> 0;
  }
  function flameColor(n, metric) {
    var r = (hashStr(n.name) % 1000) / 1000, r2 = (hashStr(n.name + '~') % 1000) / 1000;
    switch (metric) {
    case 'peak': return 'hsl(' + (195 + 35 * r).toFixed(0) + ',' + (60 + 15 * r2).toFixed(0) + '%,' + (68 + 8 * r2).toFixed(0) + '%)';
    case 'leaked': return 'hsl(' + (350 + 22 * r).toFixed(0) % 360 + ',' + (65 + 15 * r2).toFixed(0) + '%,' + (66 + 8 * r2).toFixed(0) + '%)';
    case 'calls': return 'hsl(' + (95 + 45 * r).toFixed(0) + ',' + (45 + 15 * r2).toFixed(0) + '%,' + (62 + 8 * r2).toFixed(0) + '%)';
    default: return 'hsl(' + (12 + 38 * r).toFixed(0) + ',' + (80 + 15 * r2).toFixed(0) + '%,' + (60 + 8 * r2).toFixed(0) + '%)';
    }
  }
  function nodeLoc(n) {
    var t = n.file ? n.file + (n.line ? ':' + n.line : '') : '';
    if (n.module) t += (t ? '  ·  ' : '') + n.module;
    return t;
  }

  function renderFlame(body) {
    if (!isObj(D.flame)) return noData(body, 'No flame graph data (no call tree, "flame") in this report.');
    var root = flameFromJson(D.flame);
    var state = { zoom: root, metric: null, query: null, gen: 0 };
    state.metric = root.v.peak > 0 ? 'peak' : root.v.alloc > 0 ? 'alloc' : 'calls';

    var seg = h('div', { class: 'seg', role: 'group', 'aria-label': 'metric' });
    METRICS.forEach(function (mt) {
      var b = h('button', { type: 'button', 'data-metric': mt.key, title: 'width = ' + mt.what }, mt.label);
      b.addEventListener('click', function () { state.metric = mt.key; draw(); });
      seg.appendChild(b);
    });
    var search = h('input', { type: 'search', placeholder: 'Search functions, files… (/regex/)',
                              'aria-label': 'search the flame graph' });
    var reset = h('button', { type: 'button' }, 'Reset zoom');
    reset.addEventListener('click', function () { state.zoom = root; draw(); });
    var status = h('span', { class: 'status' });
    var crumbs = h('div', { class: 'crumbs' });
    var box = h('div', { class: 'flame chart', id: 'flame-chart' });
    append(body, [
      h('div', { class: 'controls' }, [seg, search, reset, status]),
      crumbs,
      box
    ]);
    var timer = 0;
    search.addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(function () { state.query = makeMatcher(search.value); draw(); }, 120);
    });

    function makeMatcher(q) {
      q = q.trim();
      if (!q) return null;
      var test;
      if (q.length > 2 && q[0] === '/' && q[q.length - 1] === '/') {
        try {
          var re = new RegExp(q.slice(1, -1), 'i');
          test = function (t) { return re.test(t); };
        } catch (e) {
          return { bad: 'invalid regular expression' };
        }
      } else {
        var lq = q.toLowerCase();
        test = function (t) { return t.toLowerCase().indexOf(lq) >= 0; };
      }
      return { test: function (n) { return test(n.name) || (n.file && test(n.file)) || (n.module && test(n.module)); } };
    }

    var rowOf = new WeakMap();
    function draw() {
      clear(box);
      hideTip();
      var mt = METRICS.filter(function (x) { return x.key === state.metric; })[0];
      Array.prototype.forEach.call(seg.children, function (b) {
        b.classList.toggle('on', b.getAttribute('data-metric') === state.metric);
      });
      var zoom = state.zoom, total = zoom.v[mt.key];
      clear(crumbs);
      var path = [];
      for (var a = zoom; a; a = a.parent) path.unshift(a);
      append(crumbs, 'Width = ' + mt.what + '. ');
      path.forEach(function (n, i) {
        if (i) append(crumbs, ' › ');
        var link = h('a', { class: 'jump' }, n.name);
        link.addEventListener('click', function () { state.zoom = n; draw(); });
        crumbs.appendChild(link);
      });
      if (!(total > 0)) {
        status.textContent = '';
        return noData(box, 'No ' + mt.what + ' under ' + (zoom.parent ? zoom.name : 'any stack') + '.');
      }
      var W = widthOf(box, 1100);
      var gen = ++state.gen;

      /* Nodes wide enough to see, then the widest FLAME_MAX_NODES of them.
       * A child is never wider than its parent, so keeping values above a
       * threshold keeps a connected tree; the DFS order breaks ties
       * parent-first. */
      var cand = [], st = [zoom];
      while (st.length) {
        var n = st.pop(), v = n.v[mt.key];
        if (!(v > 0) || v / total * W < FLAME_MIN_PX) continue;
        cand.push(n);
        for (var i = 0; i < n.children.length; i++) st.push(n.children[i]);
      }
      var anc = path.slice(0, -1), limit = FLAME_MAX_NODES - anc.length, capped = false;
      if (cand.length > limit) {
        capped = true;
        var vals = cand.map(function (x) { return x.v[mt.key]; }).sort(function (x, y) { return y - x; });
        var thr = vals[limit - 1], kept = 0;
        cand.forEach(function (x) { if (x.v[mt.key] > thr) { x.gen = gen; kept++; } });
        cand.forEach(function (x) { if (x.v[mt.key] === thr && kept < limit) { x.gen = gen; kept++; } });
      } else {
        cand.forEach(function (x) { x.gen = gen; });
      }

      var rows = [];
      anc.forEach(function (x, d) { rows.push({ n: x, x: 0, w: W, d: d, anc: true }); });
      var base = anc.length, lay = [[zoom, 0]];
      while (lay.length) {
        var top = lay.pop(), node = top[0], x0 = top[1], w = node.v[mt.key] / total * W;
        rows.push({ n: node, x: x0, w: w, d: base + node.depth - zoom.depth, anc: false });
        var kids = node.children.filter(function (c) { return c.v[mt.key] > 0; })
          .sort(function (p, q) { return q.v[mt.key] - p.v[mt.key] || (p.name < q.name ? -1 : 1); });
        var cx = x0;
        for (var k = 0; k < kids.length; k++) {
          if (kids[k].gen === gen) lay.push([kids[k], cx]);
          cx += kids[k].v[mt.key] / total * W;
        }
      }
      var depth = 0;
      rows.forEach(function (r) { depth = Math.max(depth, r.d); });
      var H = (depth + 1) * FLAME_ROW;
      var svg = s('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img',
                           'aria-label': 'flame graph of ' + mt.what });
      var q = state.query && !state.query.bad ? state.query : null, nmatch = 0;
      rows.forEach(function (r) {
        var g = s('g');
        var cls = 'node' + (r.anc ? ' ancestor' : '');
        if (q && q.test(r.n)) { cls += ' match'; nmatch++; }
        var rect = s('rect', { class: cls, x: r.x.toFixed(2), y: r.d * FLAME_ROW,
                               width: Math.max(r.w - 0.4, 0.4).toFixed(2), height: FLAME_ROW - 1,
                               fill: flameColor(r.n, mt.key), 'data-path': r.n.path });
        rowOf.set(rect, r);
        g.appendChild(rect);
        if (r.w > 34) {
          var chars = Math.floor((r.w - 8) / 6.9), label = r.n.name;
          if (label.length > chars) label = label.slice(0, Math.max(chars - 1, 1)) + '…';
          g.appendChild(s('text', { class: 'label', x: (r.x + 4).toFixed(2), y: r.d * FLAME_ROW + 12.5 }, label));
        }
        svg.appendChild(g);
      });
      svg.addEventListener('mousemove', function (ev) {
        var r = rowOf.get(ev.target);
        if (!r) return hideTip();
        var n = r.n;
        showTip(ev, [tipTitle(n.name), tipLoc(nodeLoc(n)), tipRows(METRICS.map(function (m2) {
          var tv = root.v[m2.key];
          return [m2.label + (m2.key === mt.key ? ' ◀' : ''),
                  metricFmt(m2, n.v[m2.key]) + (tv > 0 ? '  (' + fmtPct(n.v[m2.key] / tv) + ')' : '')];
        })), h('div', { class: 'l' }, r.anc ? 'click to zoom out to here' : 'click to zoom in')]);
      });
      svg.addEventListener('mouseleave', hideTip);
      svg.addEventListener('click', function (ev) {
        var r = rowOf.get(ev.target);
        if (!r) return;
        state.zoom = r.n === state.zoom && r.n.parent ? r.n.parent : r.n;
        draw();
      });
      box.appendChild(svg);

      var txt = fmtNum(rows.length) + ' frames drawn' + (capped ? ' (the ' + fmtNum(limit) + ' widest; zoom in for more)' : '') +
                ' · total ' + metricFmt(mt, total);
      if (state.query && state.query.bad) txt = state.query.bad + ' · ' + txt;
      else if (q) {
        /* The matching frames of the view, and the widest of them with its
         * share of the view (the page adds no frames' values together). */
        var mcount = 0, best = null, ms = [zoom];
        while (ms.length) {
          var e = ms.pop();
          if (q.test(e)) {
            mcount++;
            if (!best || e.v[mt.key] > best.v[mt.key]) best = e;
          }
          for (var c2 = 0; c2 < e.children.length; c2++) ms.push(e.children[c2]);
        }
        txt = plural(mcount, 'matching frame', 'matching frames') + ' (' + fmtNum(nmatch) + ' drawn)' +
              (best ? ' · widest: ' + best.name + ' ' + metricFmt(mt, best.v[mt.key]) + ' = ' +
                      fmtPct(best.v[mt.key] / total) + ' of the view' : '') + ' · ' + txt;
      }
      status.textContent = txt;
    }
    draw();
    redraws.push(draw);
  }

  /* ---------------------------------------------------------------------- */
  /* Tables                                                                  */
  /* ---------------------------------------------------------------------- */

  /* A sortable, filterable table that shows TABLE_PAGE rows at a time.
   * opts: columns [{key, label, num, bar, cls, value(row), fmt(row), title(row)}],
   * rows, sort {key, desc}, presets [{label, key}], text(row) for the filter,
   * id(row), expand(row) -> node, noun, filters [{label, test(row)}],
   * placeholder (the filter box's hint, when rows are not sites). */
  function dataTable(parent, opts) {
    var cols = opts.columns, state = { key: opts.sort.key, desc: opts.sort.desc, q: '', shown: TABLE_PAGE, filter: 0 };
    var texts = null;
    var controls = h('div', { class: 'controls' });
    var presetSeg = null;
    if (opts.presets) {
      presetSeg = h('div', { class: 'seg', role: 'group', 'aria-label': 'sort by' });
      opts.presets.forEach(function (p) {
        var b = h('button', { type: 'button', 'data-key': p.key }, p.label);
        b.addEventListener('click', function () { state.key = p.key; state.desc = true; state.shown = TABLE_PAGE; refresh(); });
        presetSeg.appendChild(b);
      });
      append(controls, [h('span', { class: 'status' }, 'Top sites by'), presetSeg]);
    }
    var filterSeg = null;
    if (opts.filters) {
      filterSeg = h('div', { class: 'seg', role: 'group', 'aria-label': 'filter' });
      opts.filters.forEach(function (f, i) {
        var b = h('button', { type: 'button' }, f.label);
        b.addEventListener('click', function () { state.filter = i; state.shown = TABLE_PAGE; refresh(); });
        filterSeg.appendChild(b);
      });
      controls.appendChild(filterSeg);
    }
    var input = h('input', { type: 'search', placeholder: opts.placeholder ||
                             'Filter by function, file, module' + (opts.id ? ', or #id' : ''),
                             'aria-label': 'filter ' + opts.noun });
    var status = h('span', { class: 'status' });
    append(controls, [input, status]);
    var timer = 0;
    input.addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(function () { state.q = input.value.trim().toLowerCase(); state.shown = TABLE_PAGE; refresh(); }, 150);
    });

    var thead = h('thead'), tbody = h('tbody');
    var headRow = h('tr');
    cols.forEach(function (c) {
      var th = h('th', { class: (c.num ? 'num ' : '') + (c.value ? 'sortable' : ''), title: c.title || null,
                         scope: 'col' }, c.label);
      if (c.value) th.addEventListener('click', function () {
        if (state.key === c.key) state.desc = !state.desc;
        else { state.key = c.key; state.desc = !!c.num; }
        refresh();
      });
      c.th = th;
      headRow.appendChild(th);
    });
    thead.appendChild(headRow);
    var table = h('table', { class: 'data' }, [thead, tbody]);
    var more = h('div', { class: 'more' });
    append(parent, [controls, h('div', { class: 'tablewrap scroll' }, table), more]);

    var view = [];
    function refresh(expandId) {
      var col = cols.filter(function (c) { return c.key === state.key; })[0] || cols[0];
      cols.forEach(function (c) {
        c.th.classList.toggle('sorted', c === col);
        c.th.textContent = c.label + (c === col ? (state.desc ? ' ▾' : ' ▴') : '');
      });
      if (presetSeg) Array.prototype.forEach.call(presetSeg.children, function (b) {
        b.classList.toggle('on', b.getAttribute('data-key') === state.key);
      });
      if (filterSeg) Array.prototype.forEach.call(filterSeg.children, function (b, i) {
        b.classList.toggle('on', i === state.filter);
      });
      var rows = opts.rows;
      if (opts.filters) rows = rows.filter(opts.filters[state.filter].test);
      if (state.q) {
        if (!texts) texts = new Map(opts.rows.map(function (r) { return [r, opts.text(r)]; }));
        var idq = opts.id && /^#\S+$/.test(state.q) ? state.q.slice(1) : null;
        rows = rows.filter(function (r) {
          return idq != null ? String(opts.id(r)).toLowerCase() === idq : texts.get(r).indexOf(state.q) >= 0;
        });
      }
      var dir = state.desc ? -1 : 1;
      var keyed = rows.map(function (r, i) { return [col.value(r), i, r]; });
      keyed.sort(function (a, b) {
        var x = a[0], y = b[0];
        if (x == null && y == null) return a[1] - b[1];
        if (x == null) return 1;
        if (y == null) return -1;
        return (x < y ? -1 : x > y ? 1 : 0) * dir || a[1] - b[1];
      });
      view = keyed.map(function (k) { return k[2]; });
      render(expandId);
    }

    function render(expandId) {
      clear(tbody);
      clear(more);
      var n = Math.min(view.length, state.shown);
      var maxes = {};
      cols.forEach(function (c) {
        if (!c.bar) return;
        var mx = 0;
        for (var i = 0; i < view.length; i++) mx = Math.max(mx, num0(c.value(view[i])));
        maxes[c.key] = mx;
      });
      var frag = document.createDocumentFragment();
      for (var i = 0; i < n; i++) frag.appendChild(makeRow(view[i], maxes, expandId));
      tbody.appendChild(frag);
      if (!view.length) {
        tbody.appendChild(h('tr', null, h('td', { colspan: cols.length, class: 'nodata' },
          opts.rows.length ? 'No ' + opts.noun + ' match the filter.' : opts.empty || 'No ' + opts.noun + ' in this report.')));
      }
      status.textContent = view.length ? 'showing ' + fmtNum(n) + ' of ' + plural(view.length, opts.one, opts.noun) +
        (view.length !== opts.rows.length ? ' (' + fmtNum(opts.rows.length) + ' in all)' : '') : '';
      if (n < view.length) {
        var b1 = h('button', { type: 'button' }, 'Show ' + fmtNum(Math.min(TABLE_PAGE, view.length - n)) + ' more');
        b1.addEventListener('click', function () { state.shown += TABLE_PAGE; render(); });
        var left = view.length - n;
        append(more, [b1, h('span', { class: 'status' }, fmtNum(left) + ' not shown')]);
        if (view.length <= 20000) {
          var b2 = h('button', { type: 'button' }, 'Show all');
          b2.addEventListener('click', function () { state.shown = view.length; render(); });
          more.appendChild(b2);
        }
      }
    }

    function makeRow(r, maxes, expandId) {
      var tr = h('tr', { class: opts.expand ? 'row' : null, title: opts.expand ? 'click for the full stack' : null });
      cols.forEach(function (c) {
        var v = c.fmt ? c.fmt(r) : c.value ? c.value(r) : '';
        var td = h('td', { class: (c.num ? 'num ' : '') + (c.cls || ''), title: c.tip ? c.tip(r) : null },
                   v == null ? '–' : v);
        if (c.bar && maxes[c.key] > 0) {
          var pct = (num0(c.value(r)) / maxes[c.key] * 100).toFixed(1);
          td.style.background = 'linear-gradient(to left, var(--bar) ' + pct + '%, transparent ' + pct + '%)';
        }
        tr.appendChild(td);
      });
      if (opts.expand) {
        var open = null;
        var toggle = function () {
          if (open) { open.remove(); open = null; return; }
          open = h('tr', { class: 'stack' }, h('td', { colspan: cols.length }, opts.expand(r)));
          tr.after(open);
        };
        tr.addEventListener('click', toggle);
        if (expandId != null && opts.id && String(opts.id(r)) === String(expandId)) {
          tr.classList.add('flash');
          setTimeout(toggle, 0);
        }
      }
      return tr;
    }

    refresh();
    return {
      show: function (id) {
        state.q = '#' + String(id).toLowerCase();
        input.value = '#' + id;
        state.filter = 0;
        refresh(id);
        parent.scrollIntoView({ behavior: 'smooth', block: 'start' });
      }
    };
  }

  function frameCols() {
    return [
      { key: 'fn', label: 'Function', cls: 'fn', value: function (r) { return frameName(siteFrames(r)[0]); },
        tip: function (r) { return frameName(siteFrames(r)[0]); } },
      { key: 'loc', label: 'Location', cls: 'loc', value: function (r) { return frameLoc(siteFrames(r)[0]); },
        tip: function (r) { return frameLocFull(siteFrames(r)[0]); } }
    ];
  }
  function bytesCol(key, label, field, title) {
    return { key: key, label: label, num: true, bar: true, title: title,
             value: function (r) { return num(obj(r)[field]); },
             fmt: function (r) { return fmtBytes(obj(r)[field]); } };
  }
  function countCol(key, label, field, title) {
    return { key: key, label: label, num: true, title: title,
             value: function (r) { return num(obj(r)[field]); },
             fmt: function (r) { return fmtNum(obj(r)[field]); } };
  }
  function stackOf(r) { return framesList(siteFrames(r)); }

  /* The whole stack, then what else the document says about the site. */
  function siteDetails(r) {
    var facts = [];
    if (num(r.min_size) != null && num(r.max_size) != null)
      facts.push(['sizes', r.min_size === r.max_size ? fmtBytes(r.min_size) : fmtBytes(r.min_size) + ' – ' + fmtBytes(r.max_size)]);
    if (num(r.realloc_calls)) facts.push(['realloc calls', fmtNum(r.realloc_calls)]);
    if (num(r.freed_blocks) != null) facts.push(['freed blocks', fmtNum(r.freed_blocks)]);
    if (num(r.mean_lifetime_ms) != null && num(r.freed_blocks))
      facts.push(['lifetime', 'mean ' + fmtMs(r.mean_lifetime_ms) + ', max ' + fmtMs(r.max_lifetime_ms)]);
    if (num(r.peak_blocks) != null) facts.push(['blocks at the peak', fmtNum(r.peak_blocks)]);
    if (num(r.pinned_pages))
      facts.push(['pages pinned at exit', fmtNum(r.pinned_pages) + (num(r.sparse_pinned_pages) != null ?
        ' (' + fmtNum(r.sparse_pinned_pages) + ' less than 25% used)' : '')]);
    var lbk = obj(r.leaked_by_kind);
    var kinds = Object.keys(lbk).filter(function (k) { return num(lbk[k]); });
    if (kinds.length) facts.push(['leaked by kind', kinds.map(function (k) { return k + ' ' + fmtBytes(lbk[k]); }).join(', ')]);
    if (r.suppressed === true) facts.push(['leak suppressed', r.suppressed_by != null ? 'by ' + String(r.suppressed_by) : 'yes']);
    var dl = h('dl', { class: 'facts' });
    facts.forEach(function (f) { append(dl, [h('dt', null, f[0]), h('dd', null, f[1])]); });
    return [framesList(siteFrames(r)), facts.length ? dl : null];
  }

  function renderSites(body) {
    if (!sites.length) return noData(body, 'No allocation sites in this report.');
    var rows = sites;
    var sortKey = rows.some(function (r) { return num0(r.peak_bytes) > 0; }) ? 'peak' : 'alloc';
    siteTables.sites = dataTable(body, {
      noun: 'sites', one: 'site', rows: rows, sort: { key: sortKey, desc: true },
      presets: [{ label: 'Peak', key: 'peak' }, { label: 'Leaked', key: 'leaked' },
                { label: 'Allocated', key: 'alloc' }, { label: 'Calls', key: 'calls' },
                { label: 'Temporary', key: 'temp' }],
      columns: [{ key: 'id', label: '#', num: true, value: function (r) { return num(r.id) != null ? num(r.id) : r.id; },
                  fmt: function (r) { return r.id != null ? String(r.id) : ''; } }]
        .concat(frameCols(), [
          countCol('calls', 'Calls', 'alloc_calls', 'allocation calls from this stack'),
          bytesCol('alloc', 'Allocated', 'bytes_allocated', 'sum of requested bytes'),
          bytesCol('peak', 'At peak', 'peak_bytes', 'bytes of this site live at the global peak'),
          { key: 'leaked', label: 'Leaked', num: true, bar: true, title: 'bytes (blocks) live at exit',
            value: function (r) { return num(r.leaked_bytes); },
            fmt: function (r) {
              return r.leaked_bytes == null ? '–' : fmtBytes(r.leaked_bytes) +
                (num0(r.leaked_blocks) ? ' (' + fmtNum(r.leaked_blocks) + ')' : '');
            } },
          countCol('temp', 'Temporary', 'temporary_allocs', 'allocations freed before any other allocation happened')
        ], sites.some(function (r) { return r.pinned_pages != null; }) ? [
          { key: 'pinned', label: 'Pinned pages', num: true,
            title: 'pages that hold one of its blocks live at exit (in parentheses: of those, pages less than 25% used)',
            value: function (r) { return num(r.pinned_pages); },
            fmt: function (r) {
              return r.pinned_pages == null ? '–' : fmtNum(r.pinned_pages) +
                (num(r.sparse_pinned_pages) ? ' (' + fmtNum(r.sparse_pinned_pages) + ')' : '');
            } }] : []),
      text: siteText, id: function (r) { return r.id; }, expand: siteDetails
    });
  }

  function renderLeaks(body) {
    var L = obj(D.leaks), rows = objs(L.sites), lk = leakKinds();
    var parts = [];
    ['definite', 'indirect', 'reachable'].forEach(function (k) {
      if (lk[k].bytes != null)
        parts.push(h('span', null, [h('span', { class: 'kind ' + k }, k), ' ' + fmtBytes(lk[k].bytes) +
          (lk[k].blocks != null ? ' in ' + plural(lk[k].blocks, 'block', 'blocks') : '') + '   ']));
    });
    append(body, h('p', null, [
      L.bytes != null ? 'Live at exit: ' + fmtBytes(L.bytes) + (L.blocks != null ? ' in ' + plural(num0(L.blocks), 'block', 'blocks') : '') + '. ' : '',
      parts
    ]));
    append(body, h('p', { class: 'note' },
      'definite: no pointer to the block remains anywhere; indirect: only pointed to from leaked blocks ' +
      '(fixing the definite leak frees them too); reachable: still pointed to from globals, stacks or ' +
      'registers at exit (often intentional caches, but they hold memory until exit).'));
    if (L.reachability != null && L.reachability !== 'scanned')
      append(body, h('p', { class: 'note warn' }, 'No exit-time reachability scan ' +
        (L.reachability === 'failed' ? 'could be done' + (obj(L.scan).error ? ' (' + String(L.scan.error) + ')' : '') : 'ran') +
        ': every block live at exit is counted as definite.'));
    if (num(L.suppressed_bytes))
      append(body, h('p', null, 'Suppressed (known leaks matched by the suppressions file): ' + fmtBytes(L.suppressed_bytes) +
        (num(L.suppressed_blocks) != null ? ' in ' + plural(num(L.suppressed_blocks), 'block', 'blocks') : '') + '.'));
    if (!rows.length) return noData(body, L.bytes === 0 ? 'Nothing leaked.' : 'No leak sites in this report.');
    var kinds = ['definite', 'indirect', 'reachable'];
    var anySupp = rows.some(function (r) { return r.suppressed === true; });
    dataTable(body, {
      noun: 'leak sites', one: 'leak site', rows: rows, sort: { key: 'bytes', desc: true },
      filters: [{ label: 'All', test: function () { return true; } }].concat(kinds.map(function (k) {
        return { label: k, test: function (r) { return r.kind === k && r.suppressed !== true; } };
      }), anySupp ? [{ label: 'suppressed', test: function (r) { return r.suppressed === true; } }] : []),
      columns: [
        { key: 'kind', label: 'Kind', value: function (r) { return r.kind != null ? String(r.kind) : null; },
          fmt: function (r) {
            return [h('span', { class: 'kind ' + (kinds.indexOf(r.kind) >= 0 ? r.kind : '') }, r.kind != null ? String(r.kind) : '?'),
                    r.suppressed === true ? [' ', h('span', { class: 'kind reachable', title: r.suppressed_by != null ? 'suppressed by ' + String(r.suppressed_by) : null }, 'suppressed')] : null];
          } },
        bytesCol('bytes', 'Bytes', 'bytes'),
        countCol('blocks', 'Blocks', 'blocks')
      ].concat(frameCols(), siteLinkCol()),
      text: siteText, expand: stackOf
    });
  }

  /* leaks.sites and peak.sites name their row of sites[] in "site". */
  function siteLinkCol() {
    return [{ key: 'site', label: 'Site', num: true, value: function (r) { return num(r.site); },
              fmt: function (r) { return r.site == null ? '–' : siteLink(r.site); } }];
  }

  function renderPeakSites(body) {
    var PK = obj(D.peak), rows = objs(PK.sites);
    append(body, h('p', null, PK.bytes != null
      ? 'The heap peaked at ' + fmtBytes(PK.bytes) + (PK.time_s != null ? ' at ' + fmtTime(PK.time_s) : '') +
        '; these stacks held the live blocks at that instant.'
      : 'No peak in this report.'));
    if (!rows.length) return noData(body, 'No per-site breakdown of the peak in this report.');
    var total = num(PK.bytes);
    dataTable(body, {
      noun: 'sites', one: 'site', rows: rows, sort: { key: 'bytes', desc: true },
      columns: [
        bytesCol('bytes', 'Bytes', 'bytes'),
        { key: 'share', label: 'Share', num: true, value: function (r) { return total ? num0(r.bytes) / total : null; },
          fmt: function (r) { return total ? fmtPct(num0(r.bytes) / total) : '–'; } },
        countCol('blocks', 'Blocks', 'blocks')
      ].concat(frameCols(), siteLinkCol()),
      text: siteText, expand: stackOf
    });
  }

  /* ---------------------------------------------------------------------- */
  /* Fragmentation                                                           */
  /* ---------------------------------------------------------------------- */

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
    internal_bytes: 'Internal waste: usable size − requested size, summed over live blocks (size-class rounding).',
    internal_ratio: 'Internal waste ÷ usable bytes.',
    mallinfo_time_s: 'glibc\'s own counters (mallinfo2), from the last sample before this point; taken at:',
    mallinfo_arena: 'glibc: bytes the arenas got from the system with brk/sbrk (arena).',
    mallinfo_hblkhd: 'glibc: bytes in blocks served directly by mmap (hblkhd).',
    mallinfo_uordblks: 'glibc: bytes in use by the program, malloc\'s own view (uordblks).',
    mallinfo_fordblks: 'glibc: free bytes held inside the arenas (fordblks): fragmentation as malloc sees it.',
    mallinfo_keepcost: 'glibc: free bytes at the top of the heap that malloc_trim could return (keepcost).',
    rss_bytes: 'Resident set size of the whole process at this point (last sample before it).',
    heap_to_rss: 'Live heap bytes ÷ RSS: the share of resident memory that is live heap data. Low values ' +
      'mean fragmentation, allocator caches, or memory that is not heap (code, stacks, mmap).'
  };
  var METRIC_ORDER = ['time_s', 'live_bytes', 'live_blocks', 'page_utilization', 'pages', 'pages_bytes',
    'free_bytes', 'largest_free_bytes', 'external', 'gaps', 'regions', 'span_bytes', 'allocator_model',
    'usable_bytes', 'internal_bytes', 'internal_ratio', 'rss_bytes', 'heap_to_rss', 'mallinfo_time_s',
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
      var tb = h('tbody');
      keys.forEach(function (k) {
        tb.appendChild(h('tr', null, [h('td', { class: 'metric' }, k)].concat(
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

  /* ---------------------------------------------------------------------- */
  /* Histograms                                                              */
  /* ---------------------------------------------------------------------- */

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

  /* ---------------------------------------------------------------------- */
  /* Suggestions                                                             */
  /* ---------------------------------------------------------------------- */

  var STRATEGIES = {
    slab: 'one size, many objects: a slab of fixed-size slots',
    pool: 'a free list of same-sized objects reused instead of freed',
    arena: 'bump allocation, all freed together at the end of a phase',
    segregated_fit: 'size classes with their own free lists',
    buddy: 'power-of-two blocks that split and merge',
    tlsf: 'two-level segregated fit: O(1) general-purpose allocation',
    reserve_capacity: 'reserve the final size up front instead of growing step by step',
    reuse_buffer: 'keep one buffer and reuse it across iterations',
    stack: 'short-lived and small: keep it on the stack',
    separate_lifetimes: 'long- and short-lived blocks interleave: allocate them apart',
    allocator_tuning: 'allocator settings (arenas, trim threshold, mmap threshold)',
    gpu_caching_pool: 'a caching pool for device memory',
    gpu_async_alloc: 'stream-ordered allocation (cudaMallocAsync)',
    gpu_expandable_segments: 'expandable segments to avoid fragmenting device memory',
    gpu_avoid_empty_cache: 'avoid emptying the cache in a loop',
    gpu_reuse_pinned: 'reuse pinned host buffers',
    gpu_checkpoint_or_offload: 'recompute or offload to cut the device peak'
  };

  function siteRef(ref) {
    if (ref == null) return null;
    var st = typeof ref === 'object' ? ref : sitesById.get(String(ref));
    var out = h('div', { class: 'where' });
    if (st) {
      var f0 = siteFrames(st)[0];
      append(out, ['at ' + frameName(f0) + (frameLoc(f0) ? ' (' + frameLoc(f0) + ')' : '')]);
      var id = typeof ref === 'object' ? st.id : ref;
      if (id != null && sitesById.has(String(id))) {
        var a = h('a', { class: 'jump' }, 'site #' + id);
        a.addEventListener('click', function () { if (siteTables.sites) siteTables.sites.show(id); });
        append(out, [' · ', a]);
      }
    } else {
      append(out, 'site ' + String(ref));
    }
    return out;
  }

  function siteLink(id) {
    id = String(id);
    if (!sitesById.has(id)) return '#' + id;
    var a = h('a', { class: 'jump', title: 'show this site in the site table' }, '#' + id);
    a.addEventListener('click', function (ev) {
      ev.stopPropagation();
      if (siteTables.sites) siteTables.sites.show(id);
    });
    return a;
  }

  /* The advisor's evidence: numbers formatted by their key, nested objects
   * as nested lists, "sites" as links to the site table. */
  function evidence(ev, depth) {
    depth = depth || 0;
    if (ev == null || ev === '') return null;
    if (typeof ev !== 'object') return h('div', { class: 'note' }, String(ev));
    if (Array.isArray(ev)) return h('div', null, ev.map(function (x) { return String(x); }).join(', '));
    var dl = h('dl', { class: depth ? 'nested' : null });
    Object.keys(ev).forEach(function (k) {
      var v = ev[k], dd;
      if (k === 'sites' && Array.isArray(v)) {
        dd = [];
        v.forEach(function (id, i) { dd.push(i ? ', ' : '', siteLink(id)); });
      } else if (Array.isArray(v)) {
        dd = v.slice(0, 20).map(function (x) {
          return h('div', null, isObj(x) ? Object.keys(x).map(function (k2) {
            return k2.replace(/_/g, ' ') + ' ' + fmtMetric(k2 === 'size' ? 'size_bytes' : k2, x[k2]);
          }).join(' · ') : String(x));
        });
        if (v.length > 20) dd.push(h('div', { class: 'note' }, fmtNum(v.length - 20) + ' more'));
      } else if (isObj(v)) {
        dd = depth < 3 ? evidence(v, depth + 1) : JSON.stringify(v);
      } else {
        dd = fmtMetric(k === 'min' || k === 'max' ? k + '_bytes' : k, v);
      }
      append(dl, [h('dt', null, k.replace(/_/g, ' ')), h('dd', null, dd)]);
    });
    return dl;
  }

  function renderPolicies(body) {
    var pol = objs(D.policies), adv = obj(D.advisor);
    if (!pol.length) return;
    body.appendChild(h('h3', null, 'Allocator policies, replayed'));
    body.appendChild(h('p', { class: 'note' }, 'The advisor replayed ' +
      (num(adv.replayed_ops) != null ? fmtNum(adv.replayed_ops) + ' allocation events' : 'the trace') +
      (num(adv.seconds) != null ? ' (in ' + fmtTime(adv.seconds) + ')' : '') +
      ' through each allocation policy' + (adv.baseline != null ? '; the baseline, closest to the program\'s allocator, is ' +
      String(adv.baseline) : '') + (adv.sampled === true ? '; sampled replay' : '') +
      '. Footprint is the memory the policy holds at its peak; click a row for the state at the peak and at exit.'));
    dataTable(body, {
      noun: 'policies', one: 'policy', rows: pol, sort: { key: 'foot', desc: false },
      columns: [
        { key: 'name', label: 'Policy', cls: 'fn', value: function (r) { return r.name != null ? String(r.name) : null; },
          fmt: function (r) {
            return [String(r.name), r.name === adv.baseline ? [' ', h('span', { class: 'kind reachable' }, 'baseline')] : null];
          } },
        bytesCol('foot', 'Peak footprint', 'peak_footprint_bytes', 'bytes the policy holds at its peak'),
        { key: 'util', label: 'Page utilization', num: true, value: function (r) { return num(r.page_utilization); },
          fmt: function (r) { return fmtPct(r.page_utilization); } },
        { key: 'ext', label: 'External frag.', num: true, value: function (r) { return num(r.external_fragmentation); },
          fmt: function (r) { return fmtPct(r.external_fragmentation); } },
        { key: 'int', label: 'Internal frag.', num: true, value: function (r) { return num(r.internal_fragmentation); },
          fmt: function (r) { return fmtPct(r.internal_fragmentation); } },
        { key: 'cost', label: 'Cost per op', num: true, title: 'search steps per allocation or free',
          value: function (r) { return num(r.cost_per_op); },
          fmt: function (r) { return num(r.cost_per_op) == null ? '–' : num(r.cost_per_op).toFixed(1); } },
        countCol('allocs', 'Allocations', 'allocs')
      ],
      text: function (r) { return String(r.name).toLowerCase(); },
      expand: function (r) {
        var parts = [];
        ['at_peak', 'at_end'].forEach(function (k) {
          if (isObj(r[k])) parts.push(h('h3', null, k === 'at_peak' ? 'At its peak' : 'At exit'), factsOf(r[k]));
        });
        var rest = {};
        Object.keys(r).forEach(function (k) { if (!isObj(r[k]) && !Array.isArray(r[k]) && k !== 'name') rest[k] = r[k]; });
        parts.push(h('h3', null, 'Counters'), factsOf(rest));
        return parts;
      }
    });
  }

  function renderSuggestions(body) {
    var list = objs(D.suggestions);
    if (!list.length) {
      noData(body, obj(D.advisor).ran === false ? 'The strategy advisor did not run for this report.'
        : 'No suggestions: no site matched a pattern that another allocation strategy serves better.');
      return renderPolicies(body);
    }
    list = list.map(function (x, i) { return [x, i]; }).sort(function (a, b) {
      return num0(b[0].estimated_saving_bytes) - num0(a[0].estimated_saving_bytes) || a[1] - b[1];
    }).map(function (x) { return x[0]; });
    list.forEach(function (sg, idx) {
      var strat = sg.strategy != null ? String(sg.strategy) : '?';
      var ev = evidence(sg.evidence);
      append(body, h('div', { class: 'sugg' }, [
        h('div', { class: 'head' }, [
          h('span', { class: 'strategy', title: STRATEGIES[strat] || null }, strat),
          STRATEGIES[strat] ? h('span', { class: 'note' }, STRATEGIES[strat]) : null,
          sg.what_if != null ? h('code', { class: 'whatif', title: 'the what-if the advisor replayed' }, String(sg.what_if)) : null,
          num(sg.device) != null ? h('span', { class: 'note' }, 'GPU device ' + sg.device) : null,
          num(sg.estimated_saving_bytes) > 0 ? h('span', { class: 'saving' }, 'saves ~' + fmtBytes(sg.estimated_saving_bytes))
            : sg.estimated_saving_bytes != null ? h('span', { class: 'saving none' }, 'no memory saving estimated') : null
        ]),
        sg.message != null ? h('div', { class: 'msg' }, String(sg.message)) : null,
        siteRef(sg.site),
        ev ? h('details', { class: 'evidence', open: idx === 0 }, [h('summary', null, 'Evidence'), ev]) : null
      ]));
    });
    renderPolicies(body);
  }

  /* ---------------------------------------------------------------------- */
  /* GPU                                                                     */
  /* ---------------------------------------------------------------------- */

  function renderThreads(body) {
    var rows = objs(D.threads);
    if (!rows.length) return noData(body, 'No per-thread numbers in this report.');
    dataTable(body, {
      noun: 'threads', one: 'thread', rows: rows, sort: { key: 'alloc', desc: true },
      columns: [
        { key: 'index', label: '#', num: true, value: function (r) { return num(r.index); } },
        { key: 'tid', label: 'TID', num: true, value: function (r) { return num(r.tid); } },
        { key: 'name', label: 'Name', cls: 'fn', value: function (r) { return r.name != null ? String(r.name) : null; } },
        countCol('calls', 'Alloc calls', 'alloc_calls'),
        bytesCol('alloc', 'Allocated', 'bytes_allocated'),
        countCol('frees', 'Free calls', 'free_calls'),
        countCol('temp', 'Temporary', 'temporary_allocs')
      ],
      text: function (r) { return (String(r.name) + ' ' + r.tid).toLowerCase(); }
    });
  }

  /* Key/value pairs of a small object ("kinds", "pinned_host", ...). */
  function factsOf(o) {
    var dl = h('dl', { class: 'facts' });
    Object.keys(o).forEach(function (k) {
      var v = o[k];
      if (isObj(v)) v = Object.keys(v).map(function (k2) { return k2 + ' ' + fmtMetric(k2, v[k2]); }).join(', ');
      else if (Array.isArray(v)) return;
      else v = fmtMetric(k, v);
      append(dl, [h('dt', null, k), h('dd', null, v)]);
    });
    return dl;
  }

  /* A device's name: its ordinal, or "?" when CUDA did not say. */
  function gpuName(d) {
    var n = num(d.device);
    return n != null && n >= 0 ? 'GPU ' + n : 'GPU ?';
  }

  /* GPU sites' frames[0] is the code that called CUDA, often a wrapper (an
   * allocator's malloc, a helper like fx_gpu_events' ev), so their tables
   * also name its caller, as the viewer and the text report do. */
  function callerCol() {
    function caller(r) { return siteFrames(r)[1]; }
    return { key: 'caller', label: 'Called from', cls: 'fn',
             value: function (r) { return caller(r) ? frameName(caller(r)) : null; },
             fmt: function (r) {
               var f = caller(r);
               return f ? frameName(f) + (frameLoc(f) ? ' (' + frameLoc(f) + ')' : '') : null;
             },
             tip: function (r) { return caller(r) ? frameLocFull(caller(r)) : null; } };
  }
  function gpuKindCol() {
    return { key: 'kind', label: 'Kind', title: 'the CUDA allocation kind (docs/gpu.md)',
             value: function (r) { return r.kind != null ? String(r.kind) : null; },
             fmt: function (r) { return h('span', { class: 'kind gpu' }, r.kind != null ? String(r.kind) : '?'); } };
  }

  /* One of a device's site lists (peak_sites, leak_sites, churn_sites) as a
   * titled table whose rows open the whole stack; a list the document does
   * not have is left out, an empty one says so. */
  function gpuSiteTable(box, list, cls, title, intro, empty, columns, sortKey) {
    if (!Array.isArray(list)) return;
    var part = h('div', { class: 'gpu-part ' + cls }, [h('h4', null, title), intro ? h('p', { class: 'note' }, intro) : null]);
    box.appendChild(part);
    var rows = objs(list);
    if (!rows.length) return noData(part, empty);
    dataTable(part, {
      noun: 'sites', one: 'site', rows: rows, sort: { key: sortKey, desc: true },
      columns: columns.concat([gpuKindCol()], frameCols(), [callerCol()]),
      text: function (r) { return siteText(r) + '\n' + String(r.kind).toLowerCase(); }, expand: stackOf
    });
  }

  /* Memory pools (memlens run --gpu-pools): only when the device has them. */
  function gpuPools(box, d) {
    if (!Array.isArray(d.pools)) return;
    var part = h('div', { class: 'gpu-part gpu-pools' }, h('h4', null, 'Memory pools'));
    box.appendChild(part);
    if (num(d.pool_unused_at_peak_bytes) != null)
      part.appendChild(h('p', null, [
        'Reserved but unused at the peak: ', h('b', { class: 'unused' }, fmtBytes(d.pool_unused_at_peak_bytes)),
        ' (the pools had reserved ' + fmtBytes(d.pool_reserved_at_peak_bytes) + ' and used ' +
        fmtBytes(d.pool_used_at_peak_bytes) + ' when the device peaked).']));
    part.appendChild(h('p', { class: 'note' }, 'From CUPTI\'s pool activity records. A pool with release ' +
      'threshold 0 (the default) gives its free memory back at every synchronization and grows again on the ' +
      'next allocation; "explicit" pools were created with cuMemPoolCreate, the others are the device\'s ' +
      'default pool. Click a row for its allocations, releases and states at the peak and at exit.'));
    var rows = objs(d.pools);
    if (!rows.length) return noData(part, 'No pool was seen on this device.');
    dataTable(part, {
      noun: 'pools', one: 'pool', rows: rows, sort: { key: 'reserved', desc: true },
      placeholder: 'Filter by kind or address',
      columns: [
        { key: 'kind', label: 'Pool', value: function (r) { return r.kind != null ? String(r.kind) : null; },
          fmt: function (r) {
            return [r.kind != null ? String(r.kind) : '?',
                    r.imported === true ? [' ', h('span', { class: 'kind reachable' }, 'imported')] : null,
                    r.managed === true ? [' ', h('span', { class: 'kind reachable' }, 'managed')] : null];
          } },
        { key: 'address', label: 'Address', cls: 'loc', value: function (r) { return num(r.address); },
          fmt: function (r) { return r.address != null ? fmtAddr(r.address) : null; } },
        bytesCol('reserved', 'Peak reserved', 'peak_reserved_bytes', 'the most the pool ever held from the device'),
        bytesCol('used', 'Peak used', 'peak_used_bytes', 'the most of it ever in use by allocations'),
        bytesCol('exit', 'Reserved at exit', 'reserved_at_exit_bytes'),
        bytesCol('threshold', 'Release threshold', 'release_threshold_bytes',
                 'memory the pool keeps at a synchronization instead of giving it back'),
        countCol('trims', 'Trims', 'trims', 'times the pool was trimmed (cuMemPoolTrimTo)')
      ],
      text: function (r) { return (String(r.kind) + ' ' + fmtAddr(r.address)).toLowerCase(); },
      expand: function (r) {
        var rest = {};
        Object.keys(r).forEach(function (k) { if (k !== 'kind' && k !== 'address') rest[k] = r[k]; });
        return factsOf(rest);
      }
    });
  }

  /* A device's fragmentation at one moment. regions is shown only when the
   * live ranges lie in more than one region of the address space: then the
   * span and the holes leave out the gaps between regions (docs/gpu.md). */
  function gpuFrag(f) {
    var regions = num(f.regions), shown = {};
    Object.keys(f).forEach(function (k) { if (k !== 'regions' || regions > 1) shown[k] = f[k]; });
    return [factsOf(shown), regions > 1 ? h('p', { class: 'note regions' }, 'The live ranges lie in ' +
      fmtNum(regions) + ' regions of the address space (say the cudaMalloc heap and a VMM reservation far above ' +
      'it): span_bytes, holes and hole_bytes count within the regions, not the gaps of more than 1 TiB between them.')
      : null];
  }

  /* Under the device table, per device: what held its peak, what leaked,
   * which sites churn, and its memory pools. */
  function gpuDevice(body, d, idx) {
    var box = h('div', { class: 'gpu-device', id: 'gpu-device-' + idx,
                         'data-device': num(d.device) != null ? String(num(d.device)) : '?' });
    body.appendChild(box);
    box.appendChild(h('h3', null, gpuName(d)));
    var peak = num(d.peak_bytes);
    gpuSiteTable(box, d.peak_sites, 'gpu-peak', 'Held at the peak',
      peak != null ? gpuName(d) + ' peaked at ' + fmtBytes(peak) + (d.peak_time_s != null ? ' at ' + fmtTime(d.peak_time_s) : '') +
        '; these stacks held its device memory at that instant.' : null,
      'No per-site breakdown of this device\'s peak.', [
        bytesCol('bytes', 'Bytes', 'bytes'),
        { key: 'share', label: 'Share', num: true, title: 'share of the device\'s peak',
          value: function (r) { return peak ? num0(r.bytes) / peak : null; },
          fmt: function (r) { return peak ? fmtPct(num0(r.bytes) / peak) : '–'; } },
        countCol('blocks', 'Blocks', 'blocks')
      ], 'bytes');
    gpuSiteTable(box, d.leak_sites, 'gpu-leaks', 'Leaked at exit',
      'Live at exit: ' + fmtBytes(d.leaked_bytes) + (num(d.leaked_blocks) != null ? ' in ' + plural(num(d.leaked_blocks), 'block', 'blocks') : '') +
        (num(d.leaked_at_context_destroy_bytes) ? ', of which ' + fmtBytes(d.leaked_at_context_destroy_bytes) +
          ' was still held when its CUDA context was destroyed' : '') +
        '.' + (num(obj(d.pinned_host).leaked_bytes) ? ' The pinned host memory this device\'s contexts left (' +
          fmtBytes(obj(d.pinned_host).leaked_bytes) + ') is listed too: it is host RAM, not in the device\'s bytes.' : ''),
      'Nothing leaked on this device.', [
        bytesCol('bytes', 'Bytes', 'bytes'),
        countCol('blocks', 'Blocks', 'blocks'),
        bytesCol('ctx', 'At context destroy', 'at_context_destroy_bytes',
                 'of these bytes, those still held when the CUDA context was destroyed')
      ], 'bytes');
    gpuSiteTable(box, d.churn_sites, 'gpu-churn', 'Churn',
      'Sites whose blocks were freed and allocated again, most alloc/free pairs first. cudaMalloc and cudaFree ' +
        'synchronize the device, so a site with many pairs a second spends its time in the allocator; the ' +
        'Suggestions section says what would serve it better.',
      'No block of this device was freed by the program.', [
        countCol('pairs', 'Pairs', 'pairs', 'alloc/free pairs: blocks of this site that were freed'),
        { key: 'rate', label: 'Pairs/s', num: true, title: 'pairs per second, over the time from the first to the last GPU record',
          value: function (r) { return num(r.pairs_per_s); },
          fmt: function (r) { return num(r.pairs_per_s) == null ? '–' : num(r.pairs_per_s).toFixed(1); } },
        { key: 'life', label: 'Mean lifetime', num: true, title: 'from allocation to free, over the freed blocks',
          value: function (r) { return num(r.mean_lifetime_ms); }, fmt: function (r) { return fmtMs(r.mean_lifetime_ms); } },
        countCol('calls', 'Alloc calls', 'alloc_calls'),
        bytesCol('alloc', 'Allocated', 'bytes_allocated'),
        /* The analysis keeps up to 8 sizes per site; more reads as 9. */
        { key: 'sizes', label: 'Sizes', num: true, title: 'distinct request sizes',
          value: function (r) { return num(r.distinct_sizes); },
          fmt: function (r) { return num(r.distinct_sizes) > 8 ? 'more than 8' : fmtNum(r.distinct_sizes); } },
        { key: 'top', label: 'Top size', num: true, title: 'the most frequent request size',
          value: function (r) { return num(r.top_size); }, fmt: function (r) { return fmtBytes(r.top_size); } }
      ], 'pairs');
    gpuPools(box, d);
  }

  function renderGpu(body) {
    var G = obj(D.gpu), dev = objs(G.devices);
    if (!dev.length) return noData(body, 'No GPU allocations were recorded (the program made none, or ' +
      'memlens ran without CUPTI support).');
    if (num(G.peak_bytes) != null)
      append(body, h('p', null, 'All devices together peaked at ' + fmtBytes(G.peak_bytes) +
        (G.peak_time_s != null ? ' at ' + fmtTime(G.peak_time_s) : '') +
        (num(G.pinned_host_peak_bytes) ? '; pinned host memory peaked at ' + fmtBytes(G.pinned_host_peak_bytes) : '') +
        (num(G.dropped) ? '; ' + fmtNum(G.dropped) + ' GPU records were dropped' : '') + '.'));
    function fragCol(key, label, field) {
      return { key: key, label: label, num: true, value: function (r) { return num(obj(obj(r.fragmentation).at_peak)[field]); },
               fmt: function (r) { var v = num(obj(obj(r.fragmentation).at_peak)[field]); return v == null ? '–' : fmtPct(v); } };
    }
    dataTable(body, {
      noun: 'devices', one: 'device', rows: dev, sort: { key: 'peak', desc: true },
      columns: [
        { key: 'device', label: 'Device', value: function (r) { return r.device != null ? String(r.device) : null; } },
        bytesCol('peak', 'Peak', 'peak_bytes'),
        { key: 'peakt', label: 'Peak at', num: true, value: function (r) { return num(r.peak_time_s); },
          fmt: function (r) { return fmtTime(r.peak_time_s); } },
        bytesCol('leaked', 'Leaked', 'leaked_bytes', 'live at exit'),
        bytesCol('ctx', 'Freed by context destroy', 'leaked_at_context_destroy_bytes',
                 'live until the CUDA context was destroyed'),
        countCol('allocs', 'Alloc calls', 'alloc_calls'), countCol('frees', 'Free calls', 'free_calls'),
        bytesCol('bytes', 'Allocated', 'bytes_allocated'),
        fragCol('util', 'Utilization at peak', 'utilization'), fragCol('ext', 'External at peak', 'external')
      ],
      text: function (r) { return String(r.device).toLowerCase(); },
      expand: function (r) {
        var parts = [];
        if (isObj(r.kinds) && Object.keys(r.kinds).length) parts.push(h('h3', null, 'By kind'), factsOf(r.kinds));
        if (isObj(r.pinned_host)) parts.push(h('h3', null, 'Pinned host memory'), factsOf(r.pinned_host));
        var fr = obj(r.fragmentation);
        ['at_peak', 'at_end'].forEach(function (k) {
          if (isObj(fr[k]) && Object.keys(fr[k]).length)
            parts.push(h('h3', null, 'Fragmentation ' + k.replace('_', ' ')), gpuFrag(fr[k]));
        });
        var sc = objs(r.size_classes);
        if (sc.length) parts.push(h('h3', null, 'Size classes'), factsOf(sc.reduce(function (o, c) {
          o['≤ ' + fmtBytes(c.max_bytes)] = fmtNum(c.allocs) + ' allocations, ' + fmtBytes(c.bytes);
          return o;
        }, {})));
        return parts.length ? parts : h('div', { class: 'note' }, 'No more detail for this device.');
      }
    });
    dev.forEach(function (d, i) { gpuDevice(body, d, i); });
  }

  /* ---------------------------------------------------------------------- */
  /* Go                                                                      */
  /* ---------------------------------------------------------------------- */

  var SECTIONS = [['summary', renderSummary], ['timeline', renderTimeline], ['flame', renderFlame],
    ['sites', renderSites], ['leaks', renderLeaks], ['peak-sites', renderPeakSites],
    ['fragmentation', renderFrag], ['histograms', renderHists], ['suggestions', renderSuggestions],
    ['gpu', renderGpu], ['threads', renderThreads]];
  SECTIONS.forEach(function (sec) {
    var body = document.querySelector('#' + sec[0] + ' > .body');
    try {
      sec[1](body);
    } catch (e) {
      reportError(sec[0] + ': ' + (e && e.stack || e));
      clear(body);
      noData(body, 'This section could not be drawn (see the error above).');
    }
  });

  /* Where the charts are, for the browser test (tests/e2e/test_html_browser.sh
   * checks that these page areas of the screenshot are not blank). */
  var layout = { rendered: true, charts: {} };
  var drawn = { 'timeline-chart': '#timeline-chart svg', 'flame-chart': '#flame-chart svg',
                'heapmap-at_peak': '#heapmap-at_peak canvas', 'heapmap-at_end': '#heapmap-at_end canvas',
                'hist-sizes': '#hist-sizes svg' };
  Object.keys(drawn).forEach(function (id) {
    var el = document.querySelector(drawn[id]);
    if (!el) return;
    var r = el.getBoundingClientRect();
    layout.charts[id] = { x: Math.round(r.left + window.scrollX), y: Math.round(r.top + window.scrollY),
                          w: Math.round(r.width), h: Math.round(r.height) };
  });
  layout.flameRects = document.querySelectorAll('#flame-chart rect').length;
  layout.timelinePaths = document.querySelectorAll('#timeline-chart path').length;
  layout.siteRows = document.querySelectorAll('#sites tbody tr.row').length;
  layout.renderMs = Math.round(performance.now());
  document.getElementById('ml-layout').textContent = JSON.stringify(layout);
})();
