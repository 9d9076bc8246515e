/* 99-main.js - draws every section (one that throws is replaced by a note
 * and its error reported), then records where the charts are for the
 * browser test. Runs last, once the other files have defined everything. */

function main() {
  var SECTIONS = [['summary', renderSummary], ['timeline', renderTimeline], ['flame', renderFlame],
    ['sites', renderSites], ['leaks', renderLeaks], ['peak-sites', renderPeakSites],
    ['fragmentation', renderFrag], ['histograms', renderHists], ['suggestions', renderSuggestions],
    ['gpu', renderGpu], ['threads', renderThreads]];
  SECTIONS.forEach(function (sec) {
    var body = document.querySelector('#' + sec[0] + ' > .body');
    try {
      sec[1](body);
    } catch (e) {
      reportError(sec[0] + ': ' + (e && e.stack || e));
      clear(body);
      noData(body, 'This section could not be drawn (see the error above).');
    }
  });

  /* Where the charts are, for the browser test (tests/e2e/test_html_browser.sh
   * checks that these page areas of the screenshot are not blank). */
  var layout = { rendered: true, charts: {} };
  var drawn = { 'timeline-chart': '#timeline-chart svg', 'flame-chart': '#flame-chart svg',
                'heapmap-at_peak': '#heapmap-at_peak canvas', 'heapmap-at_end': '#heapmap-at_end canvas',
                'hist-sizes': '#hist-sizes svg' };
  Object.keys(drawn).forEach(function (id) {
    var el = document.querySelector(drawn[id]);
    if (!el) return;
    var r = el.getBoundingClientRect();
    layout.charts[id] = { x: Math.round(r.left + window.scrollX), y: Math.round(r.top + window.scrollY),
                          w: Math.round(r.width), h: Math.round(r.height) };
  });
  layout.flameRects = document.querySelectorAll('#flame-chart rect').length;
  layout.timelinePaths = document.querySelectorAll('#timeline-chart path').length;
  layout.siteRows = document.querySelectorAll('#sites tbody tr.row').length;
  layout.renderMs = Math.round(performance.now());
  document.getElementById('ml-layout').textContent = JSON.stringify(layout);
}

if (D) main();
