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

/* The advisor's evidence keys (docs/strategies.md) in words: [label, what
 * it means], shown as the label with the meaning as its tooltip. "stack" is
 * the trace's internal stack id: not shown (the sites are linked instead). */
var EVIDENCE = {
  calls: ['allocation calls', 'allocation calls from this function'],
  bytes_allocated: ['bytes allocated', 'sum of the sizes it requested'],
  frees: ['frees', 'its blocks that were freed'],
  max_live_bytes: ['most live bytes', 'the most bytes of its blocks alive at one time'],
  max_live_blocks: ['most live blocks', 'the most of its blocks alive at one time'],
  sizes: ['request sizes', 'the sizes it asked for'],
  min: ['smallest', 'the smallest request'],
  max: ['largest', 'the largest request'],
  distinct: ['distinct sizes', 'how many different sizes it requested (counted up to 8)'],
  more_distinct: ['more than 8 sizes', 'whether it requested more than 8 different sizes'],
  top: ['most frequent sizes', 'its most requested sizes, with their calls'],
  lifetimes: ['lifetimes', 'how long its blocks lived'],
  freed: ['blocks freed', 'its blocks freed before the end'],
  live_at_end: ['live at exit', 'its blocks still allocated when the program ended'],
  mean_ms: ['mean lifetime', 'mean time from allocation to free, over the freed blocks'],
  max_ms: ['longest lifetime', 'the longest time a freed block lived'],
  median_allocations_at_most: ['median lifetime (allocations)', 'half of its blocks were freed before the program made this many other allocations (a power of two minus one)'],
  p90_allocations_at_most: ['90th percentile lifetime (allocations)', '90% of its blocks were freed before the program made this many other allocations (a power of two minus one)'],
  long_lived_fraction: ['long-lived share', 'share of its blocks that outlived the threshold below (or the program)'],
  long_lived_at_least_allocations: ['long-lived threshold (allocations)', 'a block is long-lived when at least this many other allocations happen while it is alive'],
  simulation: ['simulation', 'the allocator simulator\'s replay of the whole trace, as it is and with this change'],
  baseline: ['baseline policy', 'the simulated allocator standing for the program\'s own'],
  baseline_peak_bytes: ['baseline peak', 'peak bytes the baseline allocator held from the system'],
  what_if: ['with the change', 'the change the simulator replayed'],
  what_if_peak_bytes: ['peak with the change', 'peak bytes held from the system with the change'],
  sites: ['sites', 'the allocation sites of this function (links to the site table)'],
  batches: ['batches', 'groups of its blocks that were freed together, whole'],
  blocks_in_batches: ['blocks in batches', 'its blocks that belong to such a batch'],
  temporaries: ['temporary allocations', 'blocks freed before any other allocation happened'],
  temporary_fraction: ['temporary share', 'temporary allocations ÷ allocation calls'],
  max_temporary_bytes: ['largest temporary', 'the largest temporary block'],
  calls_avoided: ['calls avoided', 'allocation calls the change would save'],
  realloc_calls: ['realloc calls', 'realloc calls on its blocks'],
  chains: ['realloc chains', 'blocks grown by realloc one step after another'],
  realloc_steps: ['realloc steps', 'the growth steps of those chains'],
  longest_chain: ['longest chain', 'the most steps one block grew by'],
  small_growth_steps: ['small steps', 'steps that grew the block by at most max(64 B, 1/8 of its size)'],
  mean_growth_bytes: ['mean growth', 'mean bytes added per step'],
  bytes_copied_at_most: ['bytes copied, at most', 'bytes realloc may have copied: the steps whose block moved (the recorded addresses differ); one grown in place copies nothing'],
  reallocs_avoided: ['reallocs avoided', 'steps that reserving capacity up front would save'],
  bytes_not_copied: ['bytes not copied', 'bytes realloc copied in the steps that doubling the capacity avoids'],
  pinned_pages: ['pinned pages', 'pages held only by its long-lived blocks at the time below'],
  pinned_bytes: ['pinned bytes', 'bytes of those pages'],
  pinned_at_s: ['pinned at', 'when those pages were counted, since the program started'],
  long_lived_blocks: ['long-lived blocks', 'its blocks that outlived the long-lived threshold'],
  just_over_pow2_calls: ['just over a power of two', 'requests slightly above a power of two, which a buddy allocator would nearly double'],
  buddy_peak_bytes: ['peak with a buddy allocator', 'simulated peak bytes under a buddy allocator'],
  waste_under_buddy_bytes: ['waste under buddy', 'bytes a buddy allocator would round away'],
  real_peak_footprint_bytes: ['real peak footprint', 'the most bytes of pages holding live blocks, from the recorded addresses'],
  real_os_held_peak_bytes: ['held from the system (mallinfo)', 'glibc\'s arena + hblkhd at their peak (mallinfo2); 0 when never sampled'],
  best_policy: ['best simulated policy', 'the replayed allocator design with the smallest peak'],
  best_peak_footprint_bytes: ['its peak', 'the peak bytes of the best simulated policy'],
  threads: ['threads', 'threads that allocated'],
  device: ['device', 'the CUDA device'],
  pairs: ['alloc/free pairs', 'allocations freed again'],
  bytes: ['bytes', 'device bytes involved'],
  pairs_per_s: ['pairs per second', 'alloc/free pairs per second of the run'],
  distinct_sizes: ['distinct sizes', 'different sizes requested'],
  cycles: ['cycles', 'repeated alloc/free cycles'],
  share: ['share', 'share of the device\'s allocations'],
  summary: ['summary', 'the rule\'s numbers in words']
};
var EVIDENCE_HIDDEN = { stack: true };
function evidenceLabel(k) { return EVIDENCE[k] ? EVIDENCE[k][0] : k.replace(/_/g, ' '); }
function evidenceTitle(k) {
  return EVIDENCE[k] ? EVIDENCE[k][1] : 'as the advisor reported it (docs/strategies.md)';
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
    if (EVIDENCE_HIDDEN[k]) return;
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
    } else if (v === null) {
      /* "simulation": null, a suggestion of the statistics pass (docs/strategies.md, Budgets) */
      dd = k === 'simulation' ? 'not replayed: over the advisor\'s replay budget' : 'unknown';
    } else if (isObj(v)) {
      dd = depth < 3 ? evidence(v, depth + 1) : JSON.stringify(v);
    } else {
      dd = fmtMetric(k === 'min' || k === 'max' ? k + '_bytes' : k, v);
    }
    append(dl, [h('dt', { title: evidenceTitle(k) }, evidenceLabel(k)), h('dd', null, dd)]);
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
