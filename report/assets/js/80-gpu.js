/* 80-gpu.js - the GPU section: the devices, and per device what held its
 * peak, what leaked, which sites churn, and its memory pools. */

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
    text: function (r, whole) { return siteText(r, whole) + '\n' + String(r.kind).toLowerCase(); }, expand: stackOf
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
      fragCol('util', 'Address-space utilization at peak', 'utilization'),
      fragCol('ext', 'External fragmentation of holes at peak', 'external')
    ],
    text: function (r) { return String(r.device).toLowerCase(); },
    expand: function (r) {
      var parts = [];
      if (isObj(r.kinds) && Object.keys(r.kinds).length) parts.push(h('h3', null, 'By kind'), factsOf(r.kinds));
      if (isObj(r.pinned_host)) parts.push(h('h3', null, 'Pinned host memory'), factsOf(r.pinned_host));
      var fr = obj(r.fragmentation), lb = obj(fr.labels);
      if (lb.utilization || lb.external)
        parts.push(h('p', { class: 'note frag-labels' }, 'utilization: ' + (lb.utilization || '') +
          '; external: ' + (lb.external || '')));
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
