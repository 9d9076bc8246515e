// pprof_format_dump.mjs - decodes a pprof file with Datadog's pprof-format
// package (a decoder independent of ours, installed from npm at test time
// by test_exports_browser.sh) and prints it in the normalized form of
// check_exports.py's `same-pprof` mode: every number as a decimal string.
//
//   node pprof_format_dump.mjs NODE_MODULES_DIR FILE.pb.gz
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const [dir, file] = process.argv.slice(2);
const entry = join(dir, 'pprof-format', 'dist', 'esm', 'index.js');
const { Profile } = await import(pathToFileURL(entry).href);
const p = Profile.decode(gunzipSync(readFileSync(file)));
const n = (v) => String(v ?? 0);
const vt = (v) => [n(v?.type), n(v?.unit)];
const out = {
  strings: p.stringTable.strings,
  sample_type: p.sampleType.map(vt),
  samples: p.sample.map((s) => ({ location_id: s.locationId.map(n), value: s.value.map(n) })),
  mappings: p.mapping.map((m) => [m.id, m.memoryStart, m.memoryLimit, m.fileOffset, m.filename, m.buildId,
    m.hasFunctions, m.hasFilenames, m.hasLineNumbers, m.hasInlineFrames].map(n)),
  locations: p.location.map((l) => ({
    id: n(l.id), mapping_id: n(l.mappingId), address: n(l.address),
    lines: l.line.map((x) => [n(x.functionId), n(x.line)]),
  })),
  functions: p.function.map((f) => [f.id, f.name, f.systemName, f.filename, f.startLine].map(n)),
  time_nanos: n(p.timeNanos), duration_nanos: n(p.durationNanos), period_type: vt(p.periodType),
  period: n(p.period), comment: p.comment.map(n), default_sample_type: n(p.defaultSampleType),
};
process.stdout.write(JSON.stringify(out) + '\n');
