/* 45-sites.js - the Allocation sites, Leaks and Live at the peak sections. */

/* "sites_cut" (report --max-sites): the document holds only some sites. */
function sitesCutNote() {
  var c = D.sites_cut;
  if (!isObj(c) || !(c.sites > c.written) || !(c.written >= 0)) return null;
  return h('p', { class: 'note warn', id: 'sites-cut' },
           'This report holds ' + fmtNum(c.written) + ' of the trace\'s ' + fmtNum(c.sites) +
           ' allocation sites (--max-sites ' + fmtNum(c.max_sites) + '): the others are left out ' +
           'of this table, its counts and its sorting, not merely hidden; the flame graph and the ' +
           'peak and leak tables still have every site.');
}

function renderSites(body) {
  var cut = sitesCutNote();
  if (cut) body.appendChild(cut);
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
  if (L.judged === false) {
    /* The process did not exit (exec, recording stopped while it ran, or
     * the trace stops before its exit): its live blocks are not leaks and
     * have no kinds, as the Summary's card and memlens report say. */
    var when = String(L.not_judged || 'at the end');
    append(body, h('p', null, [
      L.bytes != null ? 'Live ' + when + ': ' + fmtBytes(L.bytes) +
        (L.blocks != null ? ' in ' + plural(num0(L.blocks), 'block', 'blocks') : '') + '. ' : '',
      'Not leaks: ' + String(L.not_judged_why || 'the process did not exit') +
        '. Leaks are judged at exit only, so these blocks have no kinds; the Sites table shows where they were allocated.'
    ]));
    return;
  }
  var parts = [];
  ['definite', 'indirect', 'possible', 'reachable'].forEach(function (k) {
    if (lk[k].bytes != null)
      parts.push(h('span', null, [h('span', { class: 'kind ' + k }, k), ' ' + fmtBytes(lk[k].bytes) +
        (lk[k].blocks != null ? ' in ' + plural(lk[k].blocks, 'block', 'blocks') : '') + '   ']));
  });
  append(body, h('p', null, [
    leakedTotals(L, lk).bytes != null ? 'Leaked at exit: ' + fmtBytes(leakedTotals(L, lk).bytes) +
      (leakedTotals(L, lk).blocks != null ? ' in ' + plural(num0(leakedTotals(L, lk).blocks), 'block', 'blocks') : '') +
      ' (definite + indirect + possible). ' : '',
    L.bytes != null ? 'Live at exit: ' + fmtBytes(L.bytes) + (L.blocks != null ? ' in ' + plural(num0(L.blocks), 'block', 'blocks') : '') + ', reachable included. ' : '',
    parts
  ]));
  append(body, h('p', { class: 'note' },
    'definite: no pointer to the block remains anywhere; indirect: only pointed to from leaked blocks ' +
    '(fixing the definite leak frees them too); possible: only pointers into its inside remain ' +
    '(valgrind\'s "possibly lost"); reachable, not counted as leaked: still pointed to from globals, ' +
    'stacks or TLS at exit (often intentional caches, but they hold memory until exit).'));
  if (L.reachability != null && L.reachability !== 'scanned')
    append(body, h('p', { class: 'note warn' }, 'No exit-time reachability scan ' +
      (L.reachability === 'failed' ? 'could be done' + (obj(L.scan).error ? ' (' + String(L.scan.error) + ')' : '') : 'ran') +
      ': every block live at exit is counted as definite.'));
  if (num(L.suppressed_bytes))
    append(body, h('p', null, 'Suppressed (known leaks matched by the suppressions file): ' + fmtBytes(L.suppressed_bytes) +
      (num(L.suppressed_blocks) != null ? ' in ' + plural(num(L.suppressed_blocks), 'block', 'blocks') : '') + '.'));
  if (!rows.length) return noData(body, L.bytes === 0 ? 'Nothing leaked.' : 'No leak sites in this report.');
  var kinds = ['definite', 'indirect', 'possible', 'reachable'];
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
