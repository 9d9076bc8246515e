/* 05-data.js - the report document, parsed once from the page's "ml-data"
 * element, and the site table's lookups. D is null when the element holds no
 * JSON object: the error is reported and 99-main.js draws nothing. */

function loadData() {
  var d;
  try {
    d = JSON.parse(document.getElementById('ml-data').textContent);
  } catch (e) {
    reportError('the embedded report data is not valid JSON: ' + e.message);
    return null;
  }
  if (!d || typeof d !== 'object' || Array.isArray(d)) {
    reportError('the embedded report data is not a JSON object');
    return null;
  }
  return d;
}

/* The page's form of the data (report --html; docs/html-report.md, "The
 * page's data"): each frame once in "frame_table", each stack once in
 * "stack_table" (a trie: [frame, parent node], outermost frame at the top),
 * sites as rows of values in the order of "site_fields" with their stack's
 * node in "stack", peak and leak rows with "stack" instead of "frames", and
 * flame nodes as [frame, alloc, peak, leaked, calls, [children]]. Turns it
 * back into the document report --json writes (frames shared, not copied),
 * so that every section reads one form. A document already in that form
 * (no "frame_table") is left as it is. */
function expandPage(d) {
  var T = d.frame_table, ST = d.stack_table;
  if (!Array.isArray(T)) return d;
  ST = arr(ST);
  function frame(i) { return obj(T[i]); }
  function stackFrames(k) {
    var out = [];
    for (var guard = 0; typeof k === 'number' && k >= 0 && k < ST.length && guard <= ST.length; guard++) {
      var e = arr(ST[k]);
      out.push(frame(e[0]));
      k = e[1];
    }
    return out;
  }
  if (!Array.isArray(d.site_fields)) {
    /* A merged report's page (memlens report DIR --html): site objects,
     * with "stack" for their frames. */
    rows(d.sites);
  } else {
    var F = d.site_fields.map(String);
    d.sites = arr(d.sites).map(function (row) {
      if (!Array.isArray(row)) return row;
      var o = {};
      F.forEach(function (name, i) {
        var dot = name.indexOf('.');
        if (dot > 0) {
          var outer = name.slice(0, dot);
          if (!isObj(o[outer])) o[outer] = {};
          o[outer][name.slice(dot + 1)] = row[i];
        } else if (name === 'stack') {
          o.frames = stackFrames(row[i]);
        } else if (name === 'headline' && !row[i]) {
          /* absent when 0, as in report --json */
        } else {
          o[name] = row[i];
        }
      });
      return o;
    });
  }
  function rows(v) {
    arr(v).forEach(function (r) {
      if (isObj(r) && typeof r.stack === 'number') r.frames = stackFrames(r.stack);
    });
  }
  rows(obj(d.peak).sites);
  rows(obj(d.leaks).sites);
  function node(n) {
    if (!Array.isArray(n)) return n;
    var f = frame(n[0]);
    return { name: f.function, name_full: f.function_full, file: f.file, line: f.line, module: f.module,
             alloc: n[1], peak: n[2], leaked: n[3], calls: n[4], children: arr(n[5]) };
  }
  ['flame', 'flame_inverted'].forEach(function (key) {
    if (!Array.isArray(d[key]) && !isObj(d[key])) return;
    d[key] = node(d[key]);
    var st = [d[key]];
    while (st.length) {
      var n = st.pop();
      n.children = arr(n.children).map(node);
      n.children.forEach(function (c) { if (isObj(c)) st.push(c); });
    }
  });
  return d;
}

var D = loadData();
if (D) D = expandPage(D);
var sites = objs(D && D.sites);
var sitesById = new Map();
sites.forEach(function (st) { if (st && st.id != null) sitesById.set(String(st.id), st); });
var siteTables = {}; /* section id -> table API, for "show site" links */
