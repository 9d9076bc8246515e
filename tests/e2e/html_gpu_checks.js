/* html_gpu_checks.js - what the HTML page's GPU section must show for real
 * recordings; run by test_html_browser.sh inside a copy of the page (after
 * the page's own script), with ML_CHECK = {page, lines} defined before it:
 *   page "events": fx_gpu_events (device 0 with every kind, a 5 MiB leak
 *                  from gpu_leaky_site, a pitched 100 KiB block whose free
 *                  failed; device 1 with 3 MiB from worker still held when
 *                  its context is destroyed);
 *   page "busy":   fx_gpu_events busy 2000 300 (400 steps of churn);
 *   page "pools":  fx_gpu_inject pools under --gpu-pools (the fake libcupti);
 *   page "cpu":    a program without GPU allocations.
 * lines: the fixture's source lines the frames must name, read from the
 * source by the shell script. The flame graph is checked against the JSON
 * first (html_flame_checks.js, loaded before this file). Writes {fails, log}
 * into the pre element "ml-test" (the same as the sample page's driver).
 */
(function () {
  var log = [], fails = [];
  function ok(c, what) { log.push((c ? 'ok   ' : 'FAIL ') + what); if (!c) fails.push(what); }
  function $$(q, root) { return Array.prototype.slice.call((root || document).querySelectorAll(q)); }
  function eq(got, want, what) {
    var g = JSON.stringify(got), w = JSON.stringify(want);
    ok(g === w, what + (g === w ? '' : ': got ' + g + ', want ' + w));
  }
  var L = ML_CHECK.lines || {};

  function device(n) { return document.querySelector('#gpu .gpu-device[data-device="' + n + '"]'); }
  /* The rows of one of a device's tables as {column label: cell text}. */
  function table(n, part) {
    var box = device(n) && device(n).querySelector('.' + part);
    if (!box) return null;
    var heads = $$('thead th', box).map(function (th) { return th.textContent.replace(/ [▾▴]$/, ''); });
    return $$('tbody tr.row', box).map(function (tr) {
      var o = {};
      Array.prototype.forEach.call(tr.children, function (td, i) { o[heads[i]] = td.textContent; });
      o._tr = tr;
      return o;
    });
  }
  /* A row without its element, some columns only. */
  function pick(row, keys) {
    var o = {};
    if (row) keys.forEach(function (k) { o[k] = row[k]; });
    return o;
  }
  function text(n, part) {
    var box = device(n) && device(n).querySelector('.' + part);
    return box ? box.textContent : '';
  }
  function stackOf(row) {
    row._tr.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    var next = row._tr.nextSibling;
    var st = next && next.classList.contains('stack') ? $$('li', next).map(function (li) { return li.firstChild.textContent; }) : [];
    row._tr.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    return st;
  }
  /* The device table's detail row for one device, opened. */
  function detail(n) {
    var tr = $$('#gpu > .body > .tablewrap tbody tr.row').filter(function (r) { return r.children[0].textContent === String(n); })[0];
    if (!tr) return null;
    tr.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    return tr.nextSibling && tr.nextSibling.classList.contains('stack') ? tr.nextSibling : null;
  }
  function facts(dl) {
    var o = {}, dts = dl ? $$('dt', dl) : [];
    dts.forEach(function (dt) { o[dt.textContent] = dt.nextSibling.textContent; });
    return o;
  }
  var SITE = ['Bytes', 'Blocks', 'Kind', 'Function', 'Location', 'Called from'];
  var LEAK = ['Bytes', 'Blocks', 'At context destroy', 'Kind', 'Function', 'Location', 'Called from'];
  var CHURN = ['Pairs', 'Alloc calls', 'Sizes', 'Top size', 'Kind', 'Function', 'Called from'];
  var POOL = ['Pool', 'Address', 'Peak reserved', 'Peak used', 'Reserved at exit', 'Release threshold', 'Trims'];

  function events() {
    var ev = 'fx_gpu_events.c:' + L.rec;
    eq($$('#gpu .gpu-device').map(function (d) { return d.getAttribute('data-device'); }), ['0', '1'],
       'one block per device, in order');
    eq($$('h3', device(0)).map(function (x) { return x.textContent; }), ['GPU 0'], 'device 0 is titled');

    var p0 = table(0, 'gpu-peak') || [];
    ok(/GPU 0 peaked at 15\.1 MiB at /.test(text(0, 'gpu-peak')), 'device 0: peak 15.1 MiB (15847424 B)');
    eq(p0.length, 8, 'device 0: 8 sites held the peak');
    eq(pick(p0[0], SITE.concat(['Share'])), { Bytes: '5.0 MiB', Blocks: '1', Kind: 'device', Function: 'ev', Location: ev,
        'Called from': 'gpu_leaky_site (fx_gpu_events.c:' + L.leaky + ')', Share: '33.1%' },
       'device 0: the 5 MiB cudaMalloc from gpu_leaky_site holds most of the peak');
    eq(p0.map(function (r) { return r.Kind; }),
       ['device', 'managed', 'pool', 'vmm_physical', 'device', 'async', 'pitch', 'array'], 'device 0: the peak\'s kinds, largest first');
    eq(p0[0] ? stackOf(p0[0]).slice(0, 3) : [], ['ev', 'gpu_leaky_site', 'main'], 'a peak row opens the whole stack');

    var l0 = table(0, 'gpu-leaks') || [];
    ok(/Live at exit: 5\.1 MiB in 2 blocks\./.test(text(0, 'gpu-leaks')), 'device 0: 5.1 MiB leaked in 2 blocks');
    eq(l0.map(function (r) { return pick(r, LEAK); }), [
      { Bytes: '5.0 MiB', Blocks: '1', 'At context destroy': '0 B', Kind: 'device', Function: 'ev', Location: ev,
        'Called from': 'gpu_leaky_site (fx_gpu_events.c:' + L.leaky + ')' },
      { Bytes: '100.0 KiB', Blocks: '1', 'At context destroy': '0 B', Kind: 'pitch', Function: 'ev', Location: ev,
        'Called from': 'main (fx_gpu_events.c:' + L.pitch + ')' },
      { Bytes: '64.0 KiB', Blocks: '1', 'At context destroy': '0 B', Kind: 'host_pinned', Function: 'ev', Location: ev,
        'Called from': 'main (fx_gpu_events.c:' + L.pinned + ')' }], 'device 0: the leak rows');

    var c0 = table(0, 'gpu-churn') || [];
    eq([c0.length, c0.every(function (r) { return r.Pairs === '1'; })], [10, true], 'device 0: 10 sites freed once each');

    var p1 = table(1, 'gpu-peak') || [], l1 = table(1, 'gpu-leaks') || [];
    eq(p1.map(function (r) { return pick(r, SITE.concat(['Share'])); }), [{ Bytes: '3.0 MiB', Blocks: '1', Kind: 'device',
        Function: 'ev', Location: ev, 'Called from': 'worker (fx_gpu_events.c:' + L.worker + ')', Share: '100.0%' }],
       'device 1: worker\'s 3 MiB held the peak');
    eq(l1.map(function (r) { return pick(r, LEAK); }), [{ Bytes: '3.0 MiB', Blocks: '1', 'At context destroy': '3.0 MiB',
        Kind: 'device', Function: 'ev', Location: ev, 'Called from': 'worker (fx_gpu_events.c:' + L.worker + ')' }],
       'device 1: worker\'s 3 MiB leaked at context destroy');
    ok(/of which 3\.0 MiB was still held when its CUDA context was destroyed/.test(text(1, 'gpu-leaks')),
       'device 1: the context-destroy sentence');
    eq([(table(1, 'gpu-churn') || []).length, (device(1).querySelector('.gpu-churn .nodata') || {}).textContent],
       [0, 'No block of this device was freed by the program.'], 'device 1: no churn, said so');
    ok(device(0).textContent.indexOf('worker') < 0 && device(1).textContent.indexOf('gpu_leaky_site') < 0,
       'each device shows its own sites only');
    eq($$('#gpu .gpu-pools').length, 0, 'no pools section without --gpu-pools');

    var d0 = detail(0), d1 = detail(1);
    var dls0 = d0 ? $$('dl.facts', d0) : [], h0 = d0 ? $$('h3', d0).map(function (x) { return x.textContent; }) : [];
    var atPeak = facts(dls0[h0.indexOf('Fragmentation at peak')]), atEnd = facts(dls0[h0.indexOf('Fragmentation at end')]);
    eq([atPeak.regions, 'regions' in atEnd], ['2', false], 'device 0: regions shown at the peak (2), not at the end (1)');
    ok(d0 && /lie in 2 regions/.test((d0.querySelector('p.regions') || {}).textContent), 'device 0: the regions note');
    ok(d1 && $$('dt', d1).every(function (dt) { return dt.textContent !== 'regions'; }) && !d1.querySelector('p.regions'),
       'device 1: one region, not shown');
  }

  function busy() {
    var c0 = table(0, 'gpu-churn') || [];
    eq(pick(c0[0], CHURN), { Pairs: '400', 'Alloc calls': '400', Sizes: '3', 'Top size': '256.0 KiB', Kind: 'device',
        Function: 'ev', 'Called from': 'busy_step_cache (fx_gpu_events.c:' + L.cache + ')' },
       'device 0: the caching-pool candidate churns most');
    eq(pick(c0[1], CHURN), { Pairs: '400', 'Alloc calls': '400', Sizes: 'more than 8', 'Top size': '4.0 KiB', Kind: 'async',
        Function: 'ev', 'Called from': 'busy_step_async (fx_gpu_events.c:' + L.async + ')' },
       'device 0: the async site, 13 sizes read as more than 8');
    eq(c0.slice(2, 4).map(function (r) { return [r.Pairs, r.Kind, r['Called from'].replace(/ \(.*/, '')]; }),
       [['192', 'device', 'busy_activations'], ['100', 'host_pinned', 'busy_step_pinned']], 'device 0: then activations and pinned');
    ok(c0.every(function (r) { return /^\d+\.\d$/.test(r['Pairs/s']) && +r['Pairs/s'] > 0; }), 'pairs per second shown');
    var c1 = table(1, 'gpu-churn') || [];
    eq(pick(c1[0], ['Pairs', 'Sizes', 'Top size', 'Kind']), { Pairs: '400', Sizes: '7', 'Top size': '1.0 MiB', Kind: 'device' },
       'device 1: its block that comes and goes');
  }

  function pools() {
    eq($$('#gpu .gpu-device').map(function (d) { return d.getAttribute('data-device'); }), ['0'], 'one device');
    var t = table(0, 'gpu-pools') || [];
    eq(t.map(function (r) { return pick(r, POOL); }), [
      { Pool: 'explicit', Address: '0x700000000', 'Peak reserved': '8.0 MiB', 'Peak used': '4.0 MiB',
        'Reserved at exit': '0 B', 'Release threshold': '0 B', Trims: '2' },
      { Pool: 'default', Address: '0x600000000', 'Peak reserved': '2.0 MiB', 'Peak used': '1.0 MiB',
        'Reserved at exit': '2.0 MiB', 'Release threshold': '0 B', Trims: '0' }], 'the two pools\' rows');
    ok(/Reserved but unused at the peak: 5\.0 MiB \(the pools had reserved 10\.0 MiB and used 5\.0 MiB when the device peaked\)/
       .test(text(0, 'gpu-pools')), 'reserved but unused at the peak: 5.0 MiB');
    if (t[0]) {
      t[0]._tr.dispatchEvent(new MouseEvent('click', { bubbles: true }));
      var f = facts(t[0]._tr.nextSibling.querySelector('dl.facts'));
      eq(pick(f, ['reserved_drops_to_zero', 'allocs', 'releases', 'created', 'destroyed']),
         { reserved_drops_to_zero: '2', allocs: '2', releases: '2', created: '1', destroyed: '1' }, 'a pool row opens its counters');
    }
    var p = table(0, 'gpu-peak') || [];
    // The fixture's driver call (cuFixtureCall) is CUDA's own frame: the
    // sites name the code that called it.
    eq(p.map(function (r) { return [r.Bytes, r.Kind, r.Function, /^main \(fx_gpu_inject\.c:\d+\)$/.test(r['Called from'])]; }),
       [['4.0 MiB', 'pool', 'pools_scenario', true], ['1.0 MiB', 'async', 'pools_scenario', true]], 'the peak\'s sites under --gpu-pools');
  }

  function cpu() {
    eq([$$('#gpu .gpu-device').length, (document.querySelector('#gpu .nodata') || {}).textContent],
       [0, 'No GPU allocations were recorded (the program made none, or memlens ran without CUPTI support).'],
       'a CPU-only page says there are no GPU allocations');
  }

  try {
    mlFlameChecks(ok, 'flame graph: ');
    ({ events: events, busy: busy, pools: pools, cpu: cpu })[ML_CHECK.page]();
  } catch (e) {
    fails.push('driver exception: ' + e.message);
    log.push(String(e.stack));
  }
  var pre = document.createElement('pre');
  pre.id = 'ml-test';
  pre.textContent = JSON.stringify({ fails: fails, log: log });
  document.body.appendChild(pre);
})();
