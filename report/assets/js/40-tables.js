/* 40-tables.js - the sortable, filterable table every list of the page uses,
 * its column helpers, and the key/value lists of a row's details. */

var TABLE_PAGE = 500;

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
    var th = h('th', { class: (c.num ? 'num ' : '') + (c.value ? 'sortable ' : '') + (c.thCls || ''), title: c.title || null,
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
      var whole = state.q.indexOf('/') >= 0 ? 1 : 0;
      if (!texts) texts = [null, null];
      if (!texts[whole]) texts[whole] = new Map(opts.rows.map(function (r) { return [r, opts.text(r, !!whole)]; }));
      var idq = opts.id && /^#\S+$/.test(state.q) ? state.q.slice(1) : null;
      rows = rows.filter(function (r) {
        return idq != null ? String(opts.id(r)).toLowerCase() === idq : texts[whole].get(r).indexOf(state.q) >= 0;
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
    { key: 'fn', label: 'Function', cls: 'fn', value: function (r) { return frameName(siteHead(r)); },
      tip: function (r) { return frameFullName(siteHead(r)); } },
    { key: 'loc', label: 'Location', cls: 'loc hide-narrow', thCls: 'hide-narrow', value: function (r) { return frameLoc(siteHead(r)); },
      tip: function (r) { return frameLocFull(siteHead(r)); } }
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
