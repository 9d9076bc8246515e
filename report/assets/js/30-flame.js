/* 30-flame.js - the Flame graph section: the analysis' call tree ("flame"
 * in the JSON) drawn top-down, with zoom, search and a metric switch. It
 * merges no frames and adds up no costs: every number is a node's own. */

var FLAME_MAX_NODES = 5000;
var FLAME_MIN_PX = 0.6;
var FLAME_ROW = 18;

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
    full: src.name_full != null ? String(src.name_full) : null,
    file: src.file != null ? String(src.file) : null,
    line: num(src.line),
    module: src.module != null ? String(src.module) : null,
    v: { alloc: num0(src.alloc), peak: num0(src.peak), leaked: num0(src.leaked), calls: num0(src.calls) },
    children: [], parent: parent, depth: parent ? parent.depth + 1 : 0, gen: 0, path: path
  };
}

/* The C runtime's frames above main() and a thread's function: hidden by
 * default (their children take their place), shown with "runtime frames". */
var RUNTIME_FRAMES = { _start: 1, __libc_start_main: 1, __libc_start_main_impl: 1,
                       __libc_start_call_main: 1, start_thread: 1, clone: 1, clone3: 1,
                       __clone: 1, __clone3: 1 };

/* The tree from D.flame, iteratively (deep recursion in the program means
 * a deep tree here). With hideRuntime, a runtime frame's children hang
 * from its parent; paths stay those of the JSON nodes. */
function flameFromJson(src, hideRuntime, anyDepth) {
  var root = flameNode(src, null, '');
  if (src.name == null || src.name === '') root.name = 'all';
  var stack = [[src, root, '']];
  while (stack.length) {
    var top = stack.pop(), ch = arr(top[0].children);
    for (var i = 0; i < ch.length; i++) {
      if (!ch[i] || typeof ch[i] !== 'object') continue;
      var path = top[2] === '' ? String(i) : top[2] + '.' + i;
      if (hideRuntime && (anyDepth || top[1].depth < 8) && RUNTIME_FRAMES[ch[i].name] === 1) {
        stack.push([ch[i], top[1], path]);
        continue;
      }
      var n = flameNode(ch[i], top[1], path);
      top[1].children.push(n);
      stack.push([ch[i], n, path]);
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

/* The two trees the page can draw: the call tree top-down ("flame": from
 * main and the threads' starts down to the functions that called the
 * allocator) and bottom-up ("flame_inverted", which only report --html
 * writes: the allocating functions first, then their callers). */
var FLAME_VIEWS = [
  { key: 'flame', label: 'Top-down', what: 'callers above their callees' },
  { key: 'flame_inverted', label: 'Inverted', what: 'the functions that called the allocator on top, their callers below' }
];

/* What the report's pruning of the call tree left out ("flame_pruned":
 * report/json.c), or '' when it kept every node. Zooming in cannot show a
 * pruned node: without this the kept part read as the whole tree. */
function prunedNote() {
  var p = D.flame_pruned;
  if (!isObj(p) || !(p.nodes > p.kept) || !(p.kept >= 0)) return '';
  return ' · the report keeps ' + fmtNum(p.kept) + ' of the call tree\'s ' + fmtNum(p.nodes) +
         ' nodes (each at least ' + fmtPct(+p.min_fraction || 0) + ' of a metric, at most ' +
         fmtNum(p.max_nodes) + '; the inverted tree alike): the rest is left out of the page, ' +
         'not merely undrawn; memlens view or --folded has every stack';
}

function renderFlame(body) {
  if (!isObj(D.flame)) return noData(body, 'No flame graph data (no call tree, "flame") in this report.');
  var roots = {};
  /* Runtime frames are hidden unless "runtime frames" is ticked: near the
   * root of the top-down tree, at any depth of the inverted one (there they
   * are the outermost callers, at the bottom of each chain). */
  function rootOf(key) {
    var hide = !(runtime && runtime.checked), k = key + (hide ? ':h' : ':s');
    if (!roots[k]) roots[k] = flameFromJson(D[key], hide, key === 'flame_inverted');
    return roots[k];
  }
  var runtime = null;
  var root = rootOf('flame');
  var state = { zoom: root, metric: null, query: null, gen: 0, view: 'flame' };
  state.metric = root.v.peak > 0 ? 'peak' : root.v.alloc > 0 ? 'alloc' : 'calls';
  var views = FLAME_VIEWS.filter(function (fv) { return isObj(D[fv.key]); });
  var viewSeg = null;
  if (views.length > 1) {
    viewSeg = h('div', { class: 'seg', role: 'group', 'aria-label': 'tree' });
    views.forEach(function (fv) {
      var b = h('button', { type: 'button', 'data-view': fv.key, title: fv.what }, fv.label);
      b.addEventListener('click', function () {
        if (state.view === fv.key) return;
        state.view = fv.key;
        root = rootOf(fv.key);
        state.zoom = root;
        draw();
      });
      viewSeg.appendChild(b);
    });
  }

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
  runtime = h('input', { type: 'checkbox', 'aria-label': 'show runtime frames' });
  runtime.addEventListener('change', function () {
    root = rootOf(state.view);
    state.zoom = root;
    draw();
  });
  var runtimeLabel = h('label', { title: '_start, __libc_start_main, start_thread, clone…' },
                       [runtime, ' runtime frames']);
  var status = h('span', { class: 'status' });
  var crumbs = h('div', { class: 'crumbs' });
  var box = h('div', { class: 'flame chart', id: 'flame-chart' });
  var calls = h('div', { class: 'callers', id: 'flame-callers' });
  append(body, [
    h('div', { class: 'controls' }, [viewSeg, seg, search, reset, runtimeLabel, status]),
    crumbs,
    box,
    calls
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
      return { test: function (n) { return test(n.name) || (n.file && test(n.file)) || (n.module && test(n.module)); } };
    }
    /* Plain text: files and modules by their last path component, as the
     * tables' filter (a query with a '/' searches whole paths). */
    var lq = q.toLowerCase(), whole = lq.indexOf('/') >= 0;
    test = function (t) { return t.toLowerCase().indexOf(lq) >= 0; };
    return { test: function (n) {
      return test(n.name) || (n.file && test(pathText(n.file, whole))) || (n.module && test(pathText(n.module, whole)));
    } };
  }

  var rowOf = new WeakMap();
  function draw() {
    clear(box);
    hideTip();
    var mt = METRICS.filter(function (x) { return x.key === state.metric; })[0];
    Array.prototype.forEach.call(seg.children, function (b) {
      b.classList.toggle('on', b.getAttribute('data-metric') === state.metric);
    });
    if (viewSeg) Array.prototype.forEach.call(viewSeg.children, function (b) {
      b.classList.toggle('on', b.getAttribute('data-view') === state.view);
    });
    callersOf(state.zoom, mt);
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
      showTip(ev, [tipTitle(n.full || n.name), tipLoc(nodeLoc(n)), tipRows(METRICS.map(function (m2) {
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
              ' · total ' + metricFmt(mt, total) + prunedNote();
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
  /* The caller/callee view of the chosen frame (the zoomed one: a function
   * in its calling context): who called it and what it called, each with
   * its own value from the tree. Top-down, the callers are the path above
   * it and the callees its children; inverted, the other way round. */
  function callersOf(n, mt) {
    clear(calls);
    if (!n.parent) {
      append(calls, h('p', { class: 'note' }, 'Click a frame to see its callers and callees here.'));
      return;
    }
    var inv = state.view === 'flame_inverted';
    var path = [];
    for (var a = n.parent; a && a.parent; a = a.parent) path.push(a);
    var kids = n.children.filter(function (c) { return c.v[mt.key] > 0; })
      .sort(function (p, q) { return q.v[mt.key] - p.v[mt.key] || (p.name < q.name ? -1 : 1); });
    function row(x, share) {
      var link = h('a', { class: 'jump' }, x.name);
      link.addEventListener('click', function () { state.zoom = x; draw(); });
      return h('tr', null, [h('td', { class: 'fn' }, link), h('td', { class: 'loc hide-narrow' }, nodeLoc(x)),
        h('td', { class: 'num' }, metricFmt(mt, x.v[mt.key])),
        h('td', { class: 'num' }, share && n.v[mt.key] > 0 ? fmtPct(x.v[mt.key] / n.v[mt.key]) : '')]);
    }
    function list(title, note, rows, share, empty) {
      append(calls, [h('h3', null, title), h('p', { class: 'note' }, note)]);
      if (!rows.length) return append(calls, h('p', { class: 'nodata' }, empty));
      append(calls, h('div', { class: 'tablewrap' }, h('table', { class: 'data callers-table' }, [
        h('thead', null, h('tr', null, [h('th', { scope: 'col' }, 'Function'), h('th', { class: 'hide-narrow', scope: 'col' }, 'Location'),
          h('th', { class: 'num', scope: 'col' }, mt.label), h('th', { class: 'num', scope: 'col' }, share ? 'Share' : '')])),
        h('tbody', null, rows.map(function (x) { return row(x, share); }))])));
    }
    append(calls, h('h3', { class: 'chosen' }, [mt.label + ' through ', h('code', null, n.name), ': ' + metricFmt(mt, n.v[mt.key])]));
    var up = inv ? 'the calls that reach the allocator through the chosen frame: each is a frame of the inverted tree under it, with its own value; Share is of the chosen frame\'s'
                 : 'each frame below the chosen one in the tree, with its own value; Share is of the chosen frame\'s';
    if (inv) {
      list('Callers', 'Who called ' + n.name + ' on the way to the allocator: ' + up + '.', kids, true, 'No recorded caller (a thread start or main).');
      list('Callees', 'What ' + n.name + ' called on the way to the allocator, nearest first, with each frame\'s own value.', path, false, 'It called the allocator itself.');
    } else {
      list('Callers', 'The calling context of ' + n.name + ', nearest caller first, with each frame\'s own value.', path, false, 'None: it is an outermost frame.');
      list('Callees', 'What ' + n.name + ' called that allocated: ' + up + '.', kids, true, 'None: it called the allocator itself.');
    }
  }

  draw();
  redraws.push(draw);
}
