/* The memlens HTML report's script: draws the page from the JSON document
 * embedded in its "ml-data" script element. Plain ES2017, no libraries, no
 * network.
 *
 * One file per section of the page, in report/assets/js/, run in the order
 * of their names. report/assets/embed.cmake joins them at build time into
 * the one script the page embeds (inside one function, in strict mode, so
 * they share its scope and nothing leaks into the page's globals) and puts
 * that script's SHA-256 into the page's Content-Security-Policy. A file
 * defines functions and values; 99-main.js draws the sections.
 *
 * Rules every file keeps (checked by tests/unit/report/test_html.c and
 * tests/e2e/test_html_browser.sh):
 * - every string from the report (symbols, paths, argv, messages) reaches the
 *   page through textContent, createTextNode or setAttribute on a harmless
 *   attribute: no HTML parsing of data anywhere;
 * - nothing here computes a metric: every number shown comes from the
 *   analysis library through the JSON (the flame graph draws the JSON's call
 *   tree, "flame"); the page formats, sorts, filters and lays them out, and
 *   shows a value as a share of a total only when the JSON has that total;
 * - any key may be missing: each section says "no data" instead of failing,
 *   and a section that throws is replaced by a note while the error goes to
 *   <pre id="errors"> (which the browser test expects to stay empty);
 * - large reports stay fast: tables show 500 rows at a time, the flame graph
 *   draws at most 5000 nodes, long timelines are decimated per pixel;
 * - no file holds a script tag, opening or closing, or the start of an HTML
 *   comment, even in a string (write '<\/'): the page would break, and the
 *   build refuses them.
 *
 * 00-base.js: what every section uses: error reporting, DOM helpers that
 * only make text, value checks and formatting, frames. */

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
/* Below a millisecond, microseconds or nanoseconds: "0.14 µs", never
 * "0.00014 ms". */
function fmtSub(ms) {
  var a = Math.abs(ms);
  if (a >= 1) return +ms.toPrecision(3) + ' ms';
  if (a >= 0.001) return +(ms * 1000).toPrecision(3) + ' µs';
  return +(ms * 1e6).toPrecision(3) + ' ns';
}
function fmtTime(sec) {
  sec = num(sec);
  if (sec == null) return '–';
  if (sec === 0) return '0 s';
  if (Math.abs(sec) < 1) return fmtSub(sec * 1000);
  if (Math.abs(sec) < 120) return +sec.toFixed(2) + ' s';
  var m = Math.floor(sec / 60);
  return m + ' min ' + Math.round(sec - m * 60) + ' s';
}
function fmtMs(ms) {
  ms = num(ms);
  if (ms == null) return '–';
  if (ms === 0) return '0 ms';
  return ms >= 1000 ? fmtTime(ms / 1000) : fmtSub(ms);
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
/* The full (demangled) name: "function" is shortened for display. */
function frameFullName(f) {
  f = obj(f);
  return f.function_full != null ? String(f.function_full) : frameName(f);
}
function siteFrames(site) { return arr(obj(site).frames); }
/* The frame that names a site: the first of the program's own code
 * ("headline", absent: 0); library frames before it stay in the stack. */
function siteHead(site) {
  var fr = siteFrames(site), k = num0(obj(site).headline);
  return fr[k < fr.length ? k : 0];
}
/* What a table's filter searches: names, and files and modules by their last
 * path component (what the rows show), or whole when `whole` (a query with a
 * '/'): "x" matched every site through "/lib/x86_64-linux-gnu/". */
function siteText(site, whole) {
  var fr = siteFrames(site);
  var t = [];
  for (var i = 0; i < fr.length; i++) {
    var f = obj(fr[i]);
    t.push(frameFullName(f), pathText(f.file, whole), pathText(f.module, whole));
  }
  return t.join('\n').toLowerCase();
}
function pathText(p, whole) {
  return p ? (whole ? String(p) : basename(p)) : '';
}
function framesList(frames) {
  var ol = h('ol', { class: 'frames' });
  if (!frames.length) return append(ol, h('li', null, 'no stack recorded'));
  frames.forEach(function (f) {
    ol.appendChild(h('li', { title: frameFullName(f) },
                     [frameName(f), h('span', { class: 'loc' }, frameLocFull(f))]));
  });
  return ol;
}
