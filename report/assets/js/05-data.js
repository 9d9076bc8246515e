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

var D = loadData();
var sites = objs(D && D.sites);
var sitesById = new Map();
sites.forEach(function (st) { if (st && st.id != null) sitesById.set(String(st.id), st); });
var siteTables = {}; /* section id -> table API, for "show site" links */
