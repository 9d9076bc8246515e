/* 25-range.js - the time-range selection: a drag on the timeline picks a
 * range of the analysis' time buckets ("time_buckets", and each site's
 * "alloc_buckets" and "live_buckets", written by report --html), and the
 * flame graph, the site table and the leak table then show only the
 * allocations made in that range. The page computes no metric: each site's
 * values in the range are sums of its precomputed buckets, and a flame node's
 * are the sums of the sites under it (docs/html-report.md, "Time-range
 * selection"). */

var RANGE = null;     /* { k0, k1 } (buckets, inclusive) while a range is selected */
var RANGE_FULL = null; /* the whole trace's sites, leaks and trees, restored by clear */
var rangeBars = [];   /* the "range t0–t1 (clear)" controls, one per section */

function rangeInfo() {
  var TB = obj(D.time_buckets);
  var n = num(TB.count), w = num(TB.width_ms);
  if (!(n > 0) || !(w > 0)) return null;
  if (!sites.some(function (st) { return Array.isArray(st.alloc_buckets); })) return null;
  return { count: n, width_ms: w, kinds: arr(TB.kinds).map(String) };
}

/* The buckets [k0, k1] that a time range (seconds) touches. */
function rangeBuckets(ta, tb) {
  var RI = rangeInfo();
  if (!RI) return null;
  if (tb < ta) { var x = ta; ta = tb; tb = x; }
  function k(t) { return Math.max(0, Math.min(RI.count - 1, Math.floor(t * 1000 / RI.width_ms))); }
  return { k0: k(ta), k1: k(tb) };
}
function rangeLabel(r) {
  var RI = rangeInfo();
  return fmtTime(r.k0 * RI.width_ms / 1000) + ' – ' + fmtTime((r.k1 + 1) * RI.width_ms / 1000);
}

/* A site's values in the range: sums of its buckets. Peak values have no
 * buckets: they are left out (null) in range mode. */
function rangeSite(st, r, kinds) {
  var o = {};
  Object.keys(st).forEach(function (k) { o[k] = st[k]; });
  var ab = arr(st.alloc_buckets), lb = arr(st.live_buckets), i;
  var calls = 0, bytes = 0, lbytes = 0, lblocks = 0, kb = {}, kn = {};
  for (i = 0; i + 2 < ab.length; i += 3)
    if (ab[i] >= r.k0 && ab[i] <= r.k1) { calls += num0(ab[i + 1]); bytes += num0(ab[i + 2]); }
  for (i = 0; i + 3 < lb.length; i += 4) {
    if (lb[i] < r.k0 || lb[i] > r.k1) continue;
    var kind = kinds[lb[i + 1]] || 'definite';
    kb[kind] = num0(kb[kind]) + num0(lb[i + 3]);
    kn[kind] = num0(kn[kind]) + num0(lb[i + 2]);
    lbytes += num0(lb[i + 3]);
    lblocks += num0(lb[i + 2]);
  }
  o.alloc_calls = calls;
  o.bytes_allocated = bytes;
  o.leaked_bytes = lbytes;
  o.leaked_blocks = lblocks;
  o.leaked_by_kind = kb;
  o.range_kind_blocks = kn;
  ['peak_bytes', 'peak_blocks', 'temporary_allocs', 'realloc_calls', 'freed_blocks', 'pinned_pages',
   'sparse_pinned_pages', 'mean_lifetime_ms', 'max_lifetime_ms'].forEach(function (k) { o[k] = null; });
  return o;
}

/* The call tree of the range's sites, in the JSON's flame form: the sites'
 * stacks from the outermost frame (inverted: from frames[0]), frames merged
 * by function, file and line, each node holding the sums of its sites. */
function rangeTree(rs, inverted) {
  var root = { name: 'all', alloc: 0, peak: 0, leaked: 0, calls: 0, children: [], idx: new Map() };
  rs.forEach(function (st) {
    var fr = siteFrames(st).slice();
    if (!inverted) fr.reverse();
    var n = root;
    function add(x) { x.alloc += st.bytes_allocated; x.leaked += st.leaked_bytes; x.calls += st.alloc_calls; }
    add(root);
    fr.forEach(function (f) {
      f = obj(f);
      var key = String(f.function) + '\u0000' + String(f.file) + '\u0000' + String(f.line);
      var c = n.idx.get(key);
      if (!c) {
        c = { name: f.function, name_full: f.function_full, file: f.file, line: f.line, module: f.module,
              alloc: 0, peak: 0, leaked: 0, calls: 0, children: [], idx: new Map() };
        n.idx.set(key, c);
        n.children.push(c);
      }
      add(c);
      n = c;
    });
  });
  var stack = [root];
  while (stack.length) {
    var x = stack.pop();
    delete x.idx;
    x.children.sort(function (a, b) { return b.alloc - a.alloc || b.calls - a.calls; });
    x.children.forEach(function (c) { stack.push(c); });
  }
  return root;
}

/* Leak rows of the range: one per site and kind, like leaks.sites. */
function rangeLeakRows(rs) {
  var out = [];
  rs.forEach(function (st) {
    ['definite', 'indirect', 'possible', 'reachable'].forEach(function (k) {
      var blocks = num0(st.range_kind_blocks[k]);
      if (!blocks) return;
      out.push({ site: st.id, kind: k, bytes: num0(st.leaked_by_kind[k]), blocks: blocks,
                 suppressed: st.suppressed === true, frames: st.frames, headline: st.headline });
    });
  });
  return out;
}

function redrawSections(ids) {
  var fns = { flame: renderFlame, sites: renderSites, leaks: renderLeaks };
  ids.forEach(function (id) {
    var body = document.querySelector('#' + id + ' > .body');
    if (!body) return;
    clear(body);
    try {
      if (RANGE) body.appendChild(rangeBar());
      fns[id](body);
    } catch (e) {
      reportError(id + ': ' + (e && e.stack || e));
    }
  });
}

/* "range 0.25 s – 0.50 s (clear)": what the sections below show. */
function rangeBar() {
  var clr = h('button', { type: 'button', class: 'range-clear' }, 'clear');
  clr.addEventListener('click', function () { setRange(null); });
  var bar = h('div', { class: 'range-bar', role: 'status' }, [
    h('strong', null, 'range ' + rangeLabel(RANGE)), ' ', clr,
    h('span', { class: 'note' }, ' only allocations made in this range (bytes and calls allocated in it, ' +
      'and of those, what was still live at exit); "at peak" has no per-range value')
  ]);
  return bar;
}

function setRange(r) {
  if (!RANGE_FULL) RANGE_FULL = { sites: sites, leaks: D.leaks, flame: D.flame, flame_inverted: D.flame_inverted };
  sites = RANGE_FULL.sites;
  D.leaks = RANGE_FULL.leaks;
  D.flame = RANGE_FULL.flame;
  D.flame_inverted = RANGE_FULL.flame_inverted;
  RANGE = r;
  if (r) {
    var kinds = rangeInfo().kinds;
    var rs = RANGE_FULL.sites.map(function (st) { return rangeSite(st, r, kinds); })
      .filter(function (st) { return st.alloc_calls > 0; });
    sites = rs;
    var L = {};
    Object.keys(obj(RANGE_FULL.leaks)).forEach(function (k) { L[k] = RANGE_FULL.leaks[k]; });
    var rows = rangeLeakRows(rs), kb = {};
    ['definite', 'indirect', 'possible', 'reachable'].forEach(function (k) { kb[k] = { bytes: 0, blocks: 0 }; });
    rows.forEach(function (x) { kb[x.kind].bytes += x.bytes; kb[x.kind].blocks += x.blocks; });
    ['definite', 'indirect', 'possible', 'reachable'].forEach(function (k) {
      L[k + '_bytes'] = kb[k].bytes;
      L[k + '_blocks'] = kb[k].blocks;
      delete L[k];
    });
    L.lost_bytes = kb.definite.bytes + kb.indirect.bytes + kb.possible.bytes;
    L.lost_blocks = kb.definite.blocks + kb.indirect.blocks + kb.possible.blocks;
    L.bytes = L.lost_bytes + kb.reachable.bytes;
    L.blocks = L.lost_blocks + kb.reachable.blocks;
    L.suppressed_bytes = null;
    L.sites = rows;
    D.leaks = L;
    D.flame = rangeTree(rs, false);
    if (isObj(RANGE_FULL.flame_inverted)) D.flame_inverted = rangeTree(rs, true);
  }
  rangeBars.forEach(function (f) { f(); });
  redrawSections(['flame', 'sites', 'leaks']);
}
