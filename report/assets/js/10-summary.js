/* 10-summary.js - the Summary section: command line, cards, warnings. */

/* The leak totals per kind, as the analysis counted them (never added up
 * here from the per-site rows). */
function leakKinds() {
  var L = obj(D.leaks), out = {};
  ['definite', 'indirect', 'possible', 'reachable'].forEach(function (k) {
    var o = obj(L[k]);
    var b = first(o.bytes, L[k + '_bytes']), n = first(o.blocks, L[k + '_blocks']);
    out[k] = { bytes: b, blocks: n };
  });
  return out;
}

/* "Leaked" = definite + indirect + possible (the analysis' lost_bytes;
 * reports written before it existed: the kinds they have, added up).
 * Reachable blocks are never part of it. */
function leakedTotals(L, lk) {
  var b = first(L.lost_bytes), n = first(L.lost_blocks);
  if (b == null && lk.definite.bytes != null)
    b = num0(lk.definite.bytes) + num0(lk.indirect.bytes) + num0(lk.possible.bytes);
  if (n == null && lk.definite.blocks != null)
    n = num0(lk.definite.blocks) + num0(lk.indirect.blocks) + num0(lk.possible.blocks);
  if (b == null) b = first(L.bytes);
  if (n == null) n = first(L.blocks);
  return { bytes: b, blocks: n };
}

function traceStatus() {
  var T = obj(D.trace), P = obj(D.process), tot = obj(D.totals);
  var st = {
    complete: typeof T.complete === 'boolean' ? T.complete
            : typeof P.complete === 'boolean' ? P.complete : null,
    truncated: T.truncated === true || P.truncated === true,
    lost: first(T.lost_events, T.dropped_events, P.lost_events, tot.lost_events),
    waits: first(T.ring_waits, T.producer_waits, T.waits, tot.ring_waits),
    unknownFrees: first(T.unknown_frees, tot.unknown_frees)
  };
  return st;
}

function duration() {
  var tl = arr(D.timeline);
  var last = tl.length ? num(obj(tl[tl.length - 1]).time_s) : null;
  return first(D.duration_s, obj(D.process).duration_s, obj(D.totals).duration_s,
               obj(D.trace).duration_s, last);
}

function card(label, value, subs, cls, title) {
  return h('div', { class: 'card' + (cls ? ' ' + cls : ''), title: title }, [
    h('div', { class: 'label' }, label),
    h('div', { class: 'value' }, value),
    (subs || []).filter(Boolean).map(function (x) { return h('div', { class: 'sub' }, x); })
  ]);
}
function kv(label, value) { return [label + ' ', h('b', null, value)]; }

function banner(strong, text) {
  document.getElementById('banners').appendChild(
    h('div', { class: 'banner' }, [h('strong', null, strong), text]));
}

function renderSummary(body) {
  var P = obj(D.process), T = obj(D.totals), PK = obj(D.peak), L = obj(D.leaks);
  var F = obj(D.fragmentation);
  var cmd = arr(P.command).map(String);
  var prog = cmd.length ? basename(cmd[0]) : P.exe ? basename(P.exe) : null;
  if (prog) {
    document.getElementById('title').textContent = 'memlens report: ' + prog;
    document.title = prog + ' · memlens report';
  }
  body.appendChild(h('div', { class: 'cmdline', title: 'command line' },
    cmd.length ? '$ ' + cmd.map(shellQuote).join(' ') : 'command line not recorded'));

  var cards = h('div', { class: 'cards' });
  body.appendChild(cards);

  var exitText = null, sig = num(P.signal);
  if (sig) exitText = 'killed by signal ' + sig + (SIGNALS[sig] ? ' (' + SIGNALS[sig] + ')' : '');
  else if (num(P.exit_code) != null) exitText = 'exit code ' + P.exit_code;
  else if (P.end === 'exec') exitText = 'replaced itself (exec)';
  else if (P.end === 'unknown') exitText = 'end not recorded';
  cards.appendChild(card('Program', prog || '–', [
    P.pid != null ? kv('pid', String(P.pid)) : null, exitText
  ], sig || num(P.exit_code) ? 'bad' : null));

  var dur = duration();
  cards.appendChild(card('Duration', fmtTime(dur), [
    arr(D.timeline).length ? plural(arr(D.timeline).length, 'timeline sample', 'timeline samples') : null
  ]));

  cards.appendChild(card('Allocation calls', fmtNum(T.alloc_calls), [
    T.free_calls != null ? kv('free', fmtNum(T.free_calls)) : null,
    [].concat(T.realloc_calls != null ? kv('realloc', fmtNum(T.realloc_calls)) : [],
              T.mmap_calls != null ? [' · '].concat(kv('mmap', fmtNum(T.mmap_calls))) : []),
    /* Only in a trace with them: the allocator's own mappings for its heap
     * (jemalloc, mimalloc), not in the mmap count (docs/recorder.md). */
    T.allocator_mmap ? kv('allocator\'s own mmap', fmtNum(T.allocator_mmap.calls) + ', at most ' +
                          fmtBytes(T.allocator_mmap.peak_bytes)) : null
  ], null, 'malloc-family calls that returned a block; a realloc counts as one allocation of its new size'));

  var tmpShare = num(T.alloc_calls) ? num0(T.temporary_allocs) / num(T.alloc_calls) : null;
  cards.appendChild(card('Bytes allocated', fmtBytes(T.bytes_allocated), [
    T.temporary_allocs != null
      ? kv('temporary', fmtNum(T.temporary_allocs) + (tmpShare != null ? ' (' + fmtPct(tmpShare) + ' of calls)' : ''))
      : null
  ], null, 'sum of all requested sizes; a temporary allocation is freed before any other allocation happens'));

  cards.appendChild(card('Peak heap', fmtBytes(PK.bytes), [
    PK.time_s != null ? kv('at', fmtTime(PK.time_s)) : null,
    PK.blocks != null ? kv('blocks', fmtNum(PK.blocks)) : null
  ], null, 'maximum of live requested heap bytes (anonymous mmap excluded)'));

  /* The kernel's high-water mark when the trace has it (issue 13); the
   * largest RSS sample beside it, labelled as a sample. */
  var every = num(T.rss_sample_interval_ms) ? 'sampled every ' + T.rss_sample_interval_ms + ' ms' : 'sampled';
  var hwm = num(T.peak_rss_hwm_bytes), sampledRss = num(T.peak_rss_bytes);
  if (hwm != null || sampledRss) {
    var HWM_SOURCE = { exit: 'VmHWM at exit', wait4: 'wait4 ru_maxrss', sampled: 'VmHWM at the last sample (a lower bound)' };
    cards.appendChild(card('Peak RSS', hwm != null ? fmtBytes(hwm) : '–', [
      hwm != null ? 'kernel high-water mark' + (HWM_SOURCE[T.peak_rss_hwm_source] ? ' (' + HWM_SOURCE[T.peak_rss_hwm_source] + ')' : '')
                  : 'no kernel high-water mark in this trace',
      sampledRss ? kv('largest sample', fmtBytes(sampledRss) + ' (' + every + ')') : null
    ], null, 'the most resident memory the process ever had, as the kernel counts it (VmHWM / ru_maxrss); ' +
       'the RSS curve is ' + every + ' and misses short peaks'));
  }

  var lk = leakKinds();
  var lt = leakedTotals(L, lk), leakedBytes = lt.bytes;
  if (L.judged === false) {
    /* The process did not exit (exec, recording stopped while it ran, or
     * the trace stops before its exit): what was live then is not leaked,
     * and has no kind. */
    cards.appendChild(card('Live ' + String(L.not_judged || 'at the end'), fmtBytes(L.bytes), [
      L.blocks != null ? kv('in', plural(num0(L.blocks), 'block', 'blocks')) : null,
      'not leaks: ' + String(L.not_judged_why || 'the process did not exit')
    ], null, 'blocks live ' + String(L.not_judged || 'at the end') + '; leaks are judged at exit only'));
  } else
  cards.appendChild(card('Leaked at exit', fmtBytes(leakedBytes), [
    lt.blocks != null ? kv('in', plural(num0(lt.blocks), 'block', 'blocks')) : null,
    lk.definite.bytes != null ? kv('definite', fmtBytes(lk.definite.bytes)) : null,
    lk.indirect.bytes != null || lk.possible.bytes != null
      ? [].concat(kv('indirect', fmtBytes(lk.indirect.bytes)), [' · '], kv('possible', fmtBytes(lk.possible.bytes)))
      : null,
    lk.reachable.bytes != null ? kv('still reachable (not leaked)', fmtBytes(lk.reachable.bytes)) : null,
    num(L.suppressed_bytes) ? kv('suppressed', fmtBytes(L.suppressed_bytes)) : null
  ], num0(leakedBytes) > 0 ? 'bad' : leakedBytes === 0 ? 'good' : null,
  'leaked = definite + indirect + possible. definite: no pointer to the block remains; indirect: only reachable from leaked blocks; possible: only pointers into its inside remain; reachable (not leaked): still pointed to from globals, stacks or TLS at exit'));

  /* Page utilization is not heap fragmentation: the card says which it is. */
  [['at_peak', 'Page utilization at peak'], ['at_end', 'Page utilization at exit']].forEach(function (p) {
    var f = obj(F[p[0]]);
    cards.appendChild(card(p[1], f.page_utilization != null ? fmtPct(f.page_utilization) : '–', [
      f.page_utilization != null ? 'live bytes ÷ bytes of the pages holding them' : 'no data',
      f.external != null ? kv('external fragmentation of free heap', fmtPct(f.external)) : null,
      f.free_bytes != null ? kv('free gaps', fmtBytes(f.free_bytes)) : null
    ], null, EXPLAIN.page_utilization));
  });

  var G = obj(D.gpu), gdev = objs(G.devices);
  if (gdev.length) {
    /* Leaked bytes per device: the document has no all-devices total. */
    var gleak = gdev.map(function (d) {
      return gdev.length > 1 ? kv('leaked on ' + gpuName(d), fmtBytes(d.leaked_bytes)) : kv('leaked', fmtBytes(d.leaked_bytes));
    });
    cards.appendChild(card('GPU peak', fmtBytes(G.peak_bytes), [
      [plural(gdev.length, 'device', 'devices')].concat(G.peak_time_s != null ? [' · '].concat(kv('at', fmtTime(G.peak_time_s))) : [])
    ].concat(gleak), null, 'peak of device memory live at once, all devices together'));
  }

  var ts = traceStatus();
  var tv = ts.truncated || ts.complete === false ? 'incomplete' : ts.complete ? 'complete' : '–';
  var TR = obj(D.trace);
  cards.appendChild(card('Trace', tv, [
    ts.lost != null ? kv('lost events', fmtNum(ts.lost)) : null,
    ts.waits != null ? kv('ring waits', fmtNum(ts.waits)) : null,
    num(TR.truncated_stacks) ? kv('stacks cut at --depth', fmtNum(TR.truncated_stacks)) : null,
    ts.unknownFrees ? kv('frees of unknown blocks', fmtNum(ts.unknownFrees)) : null,
    num(TR.size_bytes) ? kv('size', fmtBytes(TR.size_bytes) + (num(TR.records) ? ', ' + fmtNum(TR.records) + ' records' : '')) : null
  ], tv === 'incomplete' || num0(ts.lost) > 0 ? 'bad' : tv === 'complete' ? 'good' : null,
  'complete: the trace ends with the end record written at exit' + (TR.path != null ? '\n' + String(TR.path) : '')));

  /* Warnings that change how every number must be read: the analysis's
   * own when the document has them, else what the page can tell. */
  var warns = arr(D.warnings).filter(function (w) { return typeof w === 'string' && w; });
  warns.slice(0, 6).forEach(function (w) { banner('Warning:', ' ' + w); });
  if (warns.length > 6) {
    var more = h('details', { class: 'banner' }, h('summary', null, fmtNum(warns.length - 6) + ' more warnings'));
    warns.slice(6).forEach(function (w) { more.appendChild(h('div', null, w)); });
    document.getElementById('banners').appendChild(more);
  }
  if (Array.isArray(D.warnings)) {
    /* the analysis said it all */
  } else if (P.sampled) {
    var every = first(P.sample_bytes, typeof P.sampled === 'number' ? P.sampled : null, obj(D.trace).sample_bytes);
    banner('Sampled recording.', ' One allocation was recorded per ' +
      (every ? fmtBytes(every) + ' ' : '') + 'allocated on average (like tcmalloc\'s heap sampler): ' +
      'calls and bytes are statistical estimates, and small, rare sites may be missing.');
  }
  if (Array.isArray(D.warnings)) {
    /* idem */
  } else if (ts.truncated || ts.complete === false)
    banner('Incomplete trace.', ' The recording ends early (the program or memlens was killed before the end ' +
      'record): numbers cover the recorded part only, and blocks live at the cut show as leaks.');
  if (num0(ts.lost) > 0 && !Array.isArray(D.warnings))
    banner('Lost events.', ' ' + fmtNum(ts.lost) + ' events did not reach the trace; totals are lower bounds.');
  var sv = num(D.schema_version);
  if (sv != null && sv > 1)
    banner('Newer report format.', ' This page knows schema_version 1 and the report has ' + sv +
      '; some parts may be missing.');
  document.getElementById('schema').textContent =
    (sv != null ? 'report schema_version ' + sv : 'report schema_version unknown') +
    (typeof D.generator === 'string' ? ' from ' + D.generator : '');
}
