/* 70-suggestions.js - the Suggestions section: the strategy advisor's
 * suggestions with their evidence, and the allocator policies it replayed. */

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

/* What the advisor's budgets left out: said before anything else. */
function renderSkipped(body) {
  var sk = obj(D.advisor).skipped;
  if (!Array.isArray(sk) || !sk.length) return;
  body.appendChild(h('p', { class: 'note skipped' }, 'Skipped to stay within the advisor\'s budget: ' +
    sk.map(String).join('; ') + '.'));
}

function renderSuggestions(body) {
  renderSkipped(body);
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
