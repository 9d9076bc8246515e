/* 85-threads.js - the Threads section. */

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
