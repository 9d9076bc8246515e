#!/usr/bin/python3
"""check_exports.py - checks memlens' exports against its JSON report of the
same trace (test_exports.sh runs it).

    check_exports.py pprof FILE.pb.gz REPORT.json [--break WHAT]
    check_exports.py speedscope FILE.json REPORT.json [--break WHAT]
    check_exports.py same-pprof FILE.pb.gz OTHER.json
    check_exports.py compact COMPACT.json REPORT.json [--break WHAT]

same-pprof: OTHER.json is the same file as another decoder read it
(pprof_format_dump.mjs, Datadog's pprof-format); every field must equal
what pprof_decode.py reads.

pprof: the file is read by pprof_decode.py (a wire-format reader of its own)
and checked for what profile.proto asks (string_table[0] is "", every id
unique and nonzero, every reference to a string, mapping, location or
function in range, one value per sample type) and for what memlens means:
the sample types, one sample per site of the report, its locations leaf
first with inlined frames as several lines of one location, innermost
first, the functions, files, lines and addresses of the report's frames,
values equal to the site's numbers, the mappings from the trace's modules
(the program first, with the build-id and the span of its loadable segments
that readelf reads from the file), the period, the times and the comments.

speedscope: the file is checked against speedscope's file format (the rules
of its JSON schema, written out here: required keys, types, units, indexes
in range, as many weights as samples) and against the report: five sampled
profiles, each with one sample per site whose metric is not 0, in the
report's order, outermost frame first, frames equal to the report's, weights
equal to the site's numbers, and weights that add up to endValue and to the
report's totals.

compact: COMPACT.json is `report --json-compact`'s form of REPORT.json
(docs/html-report.md, "The page's data"). It is turned back into the full
form here, independently of the page's reader: each site row by
site_fields, each stack followed through stack_table to frame_table's
objects, each flame node's frame index to its name, file and line. Every
key of the full form must then be equal, value for value, and every stack
entry and frame must be reachable and in range.

--expect-leaf 'FUNC[:LINE][>FUNC[:LINE]...]=V1,...,V6' (pprof, repeatable)
states a ground truth of the fixture program, independent of the report:
the samples whose leaf location has exactly these lines (innermost first;
a line given only where it is written) hold these six values. Several
--expect-leaf options with one chain expect that many samples.

--break WHAT changes the decoded file before the checks (a wrong value, a
string index out of range, ...), to prove that the checks catch it: the
run must then fail. Exit 0 when every check passed, 1 otherwise.
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pprof_decode  # noqa: E402

ERRORS = []


def fail(msg):
    ERRORS.append(msg)


def expect(cond, msg):
    if not cond:
        fail(msg)
    return cond


# ---------------------------------------------------------------------------
# The report's side
# ---------------------------------------------------------------------------

def groups(frames):
    """A site's frames cut into locations: each ends at a frame that is not
    inlined into the next one."""
    out, cur = [], []
    for i, f in enumerate(frames):
        cur.append(f)
        if not f.get("inlined") or i == len(frames) - 1:
            out.append(cur)
            cur = []
    return out


def site_key(frames):
    """What identifies a site in both files: every frame's function, file,
    line and address, innermost first."""
    return tuple((f.get("function_full", f["function"]), f["file"] or "", f["line"] or 0, f["address"]) for f in frames)


def duration_ns(report):
    """totals.duration_s is written from integer milliseconds as an exact
    decimal: read it without a float."""
    m = re.search(r'"duration_s": ([0-9]+)(?:\.([0-9]{1,3}))?', report["_text"])
    ms = int(m.group(1)) * 1000 + int((m.group(2) or "0").ljust(3, "0"))
    return ms * 1000000


def load_report(path):
    with open(path) as f:
        text = f.read()
    r = json.loads(text)
    r["_text"] = text
    check_leak_totals(path, r)
    return r


def check_leak_totals(path, r):
    """'Leaked' means definite + indirect + possible for each site as in the
    headline (issue 13): each site's leaked_bytes is the sum of those kinds,
    the sites' leaked_bytes add up to leaks.lost_bytes and totals.leaked_bytes,
    and live_at_exit_bytes to leaks.bytes (every kind). A trace whose process
    did not exit (leaks.judged false: an exec, a stop while it ran, a trace
    cut short before the exit) has no leak and no kind: every site's kinds
    and leaked_bytes are 0, and its live blocks are live_at_exit_bytes alone."""
    sites, leaks, summ = r.get("sites", []), r.get("leaks", {}), r.get("totals", {})
    if "lost_bytes" not in leaks:  # (exports are made without --max-sites: every site is here)
        return
    judged = leaks.get("judged", True)
    for s in sites:
        k = s["leaked_by_kind"]
        want = k["definite"] + k["indirect"] + k.get("possible", 0)
        expect(s["leaked_bytes"] == want, "%s: site %d leaked_bytes %d, its kinds say %d"
               % (path, s["id"], s["leaked_bytes"], want))
        if judged:
            expect(s["live_at_exit_bytes"] == want + k["reachable"], "%s: site %d live_at_exit_bytes %d, "
                   "its kinds say %d" % (path, s["id"], s["live_at_exit_bytes"], want + k["reachable"]))
        else:
            expect(want + k["reachable"] == 0, "%s: site %d has leak kinds (%s), but its process did not "
                   "exit (leaks.judged false)" % (path, s["id"], k))
    total = sum(s["leaked_bytes"] for s in sites)
    expect(total == leaks["lost_bytes"], "%s: the sites' leaked_bytes add up to %d, the headline "
           "leaks.lost_bytes is %d" % (path, total, leaks["lost_bytes"]))
    expect(summ.get("leaked_bytes") == leaks["lost_bytes"], "%s: totals.leaked_bytes %s, leaks.lost_bytes "
           "%d" % (path, summ.get("leaked_bytes"), leaks["lost_bytes"]))
    live = sum(s["live_at_exit_bytes"] for s in sites)
    expect(live == leaks["bytes"], "%s: the sites' live_at_exit_bytes add up to %d, leaks.bytes is %d"
           % (path, live, leaks["bytes"]))


# ---------------------------------------------------------------------------
# pprof
# ---------------------------------------------------------------------------

SAMPLE_TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"),
                ("inuse_space", "bytes"), ("peak_objects", "count"), ("peak_space", "bytes")]


def site_values(s):
    return [s["alloc_calls"], s["bytes_allocated"], s["live_at_exit_blocks"], s["live_at_exit_bytes"],
            s["peak_blocks"], s["peak_bytes"]]


def readelf_facts(path):
    """The build-id and the span of the PT_LOAD segments of an ELF file, read
    by binutils' readelf; None when readelf or the file is missing."""
    if not shutil.which("readelf") or not os.path.exists(path):
        return None
    notes = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", notes)
    heads = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
    lo, hi = None, None
    for line in heads.splitlines():
        w = line.split()
        if w and w[0] == "LOAD":
            vaddr, memsz = int(w[2], 16), int(w[5], 16)
            lo = vaddr if lo is None else min(lo, vaddr)
            hi = vaddr + memsz if hi is None else max(hi, vaddr + memsz)
    return {"build_id": m.group(1) if m else "", "span": (hi - lo) if lo is not None else None}


def break_pprof(p, what):
    if what == "value":
        p["sample"][0]["value"][1] += 1
    elif what == "string":
        p["function"][0]["name"] = len(p["string_table"])
    elif what == "empty-first-string":
        p["string_table"][0] = "x"
    elif what == "location-id":
        p["sample"][0]["location_id"][0] = max(l["id"] for l in p["location"]) + 1
    elif what == "line":
        p["location"][0]["line"][0]["line"] += 1
    elif what == "leaf-order":
        p["sample"][0]["location_id"].reverse()
    elif what == "inline-order":
        for loc in p["location"]:
            if len(loc["line"]) > 1:
                loc["line"].reverse()
                break
        else:
            raise SystemExit("--break inline-order: no location has inlined lines")
    elif what == "mapping":
        p["location"][0]["mapping_id"] = len(p["mapping"]) + 1
    elif what == "duplicate-id":
        p["function"][1]["id"] = p["function"][0]["id"]
    else:
        raise SystemExit("unknown --break " + what)


def leaf_matches(chain, smp, locs, st, funcs):
    loc = locs[smp["location_id"][0]] if smp["location_id"] else None
    if not loc or len(loc["line"]) != len(chain):
        return False
    for (fn, line), ln in zip(chain, loc["line"]):
        if st[funcs[ln["function_id"]]["name"]] != fn or (line is not None and ln["line"] != line):
            return False
    return True


def parse_expect(spec):
    chain_s, values = spec.split("=")
    chain = []
    for part in chain_s.split(">"):
        fn, _, line = part.partition(":")
        chain.append((fn, int(line) if line else None))
    return tuple(chain), [int(v) for v in values.split(",")]


def check_pprof(path, report, brk, expects=()):
    with open(path, "rb") as f:
        data = f.read()
    expect(data[:2] == b"\x1f\x8b", "the file is not gzipped (profile.proto asks for gzip on disk)")
    try:
        p = pprof_decode.decode(data)
    except (pprof_decode.DecodeError, OSError, EOFError) as e:
        fail("cannot decode: %s" % e)
        return
    if brk:
        break_pprof(p, brk)
    st = p["string_table"]
    if not expect(st and st[0] == "", 'string_table[0] is not ""'):
        return

    def s(i, what):
        if expect(0 <= i < len(st), "%s: string index %d out of range (%d strings)" % (what, i, len(st))):
            return st[i]
        return None

    # Ids: unique, nonzero; references in range.
    def table(name):
        ids = {}
        for e in p[name]:
            expect(e["id"] != 0, "%s id 0" % name)
            expect(e["id"] not in ids, "%s id %d twice" % (name, e["id"]))
            ids[e["id"]] = e
        return ids

    maps, locs, funcs = table("mapping"), table("location"), table("function")
    for fn in p["function"]:
        s(fn["name"], "function %d name" % fn["id"])
        s(fn["system_name"], "function %d system_name" % fn["id"])
        s(fn["filename"], "function %d filename" % fn["id"])
    for m in p["mapping"]:
        s(m["filename"], "mapping %d filename" % m["id"])
        s(m["build_id"], "mapping %d build_id" % m["id"])
    for loc in p["location"]:
        expect(loc["mapping_id"] == 0 or loc["mapping_id"] in maps,
               "location %d: mapping %d does not exist" % (loc["id"], loc["mapping_id"]))
        expect(loc["line"], "location %d has no line" % loc["id"])
        for ln in loc["line"]:
            expect(ln["function_id"] in funcs,
                   "location %d: function %d does not exist" % (loc["id"], ln["function_id"]))
        m = maps.get(loc["mapping_id"])
        if m:
            expect(m["memory_start"] <= loc["address"] < m["memory_limit"],
                   "location %d: address %#x outside its mapping [%#x, %#x)"
                   % (loc["id"], loc["address"], m["memory_start"], m["memory_limit"]))
    for i, smp in enumerate(p["sample"]):
        expect(len(smp["value"]) == len(p["sample_type"]),
               "sample %d: %d values for %d sample types" % (i, len(smp["value"]), len(p["sample_type"])))
        for lid in smp["location_id"]:
            expect(lid in locs, "sample %d: location %d does not exist" % (i, lid))
    if ERRORS:
        return  # the rest would read through broken references

    # Sample types, default, period, times, comments.
    types = [(s(v["type"], "sample_type"), s(v["unit"], "sample_type")) for v in p["sample_type"]]
    expect(types == SAMPLE_TYPES, "sample types %s, expected %s" % (types, SAMPLE_TYPES))
    expect(s(p["default_sample_type"], "default_sample_type") == "peak_space",
           "default sample type %r, expected peak_space" % s(p["default_sample_type"], "default"))
    pt = p["period_type"]
    expect((s(pt["type"], "period_type"), s(pt["unit"], "period_type")) == ("space", "bytes"),
           "period_type is not space/bytes")
    proc = report["process"]
    expect(p["period"] == (proc["sample_bytes"] or 1),
           "period %d, expected %d" % (p["period"], proc["sample_bytes"] or 1))
    expect(p["time_nanos"] == proc["start_realtime_ns"],
           "time_nanos %d, the report's start %d" % (p["time_nanos"], proc["start_realtime_ns"]))
    expect(p["duration_nanos"] == duration_ns(report),
           "duration_nanos %d, the report's duration %d ns" % (p["duration_nanos"], duration_ns(report)))
    comments = [s(c, "comment") for c in p["comment"]]
    expect(comments and comments[0].startswith("memlens ") and ("(pid %d)" % proc["pid"]) in comments[0],
           "first comment %r does not say what ran" % (comments[:1],))
    sampled = [c for c in comments if c.startswith("sampled: ")]
    if proc["sampled"]:
        expect(len(sampled) == 1 and ("per %d bytes" % proc["sample_bytes"]) in sampled[0]
               and "estimate" in sampled[0], "a sampled trace without the comment saying so: %s" % comments)
    else:
        expect(not sampled, "an unsampled trace says it is sampled: %s" % sampled)
    cut = [c for c in comments if "cut short" in c]
    expect(bool(cut) == report["trace"]["truncated"], "the comments %s and trace.truncated %s disagree" % (
        comments, report["trace"]["truncated"]))

    # Ground truths of the fixture, given on the command line.
    wanted = {}
    for spec in expects:
        chain, values = parse_expect(spec)
        wanted.setdefault(chain, []).append(values)
    for chain, values in wanted.items():
        got = sorted(smp["value"] for smp in p["sample"] if leaf_matches(chain, smp, locs, st, funcs))
        expect(got == sorted(values), "leaf %s: samples %s, expected %s" % (
            ">".join("%s:%s" % c for c in chain), got, sorted(values)))

    # Samples against sites: the frames of its locations, leaf first, are the
    # site's frames, with their addresses.
    def fn_of(fid):
        fn = funcs[fid]
        return st[fn["name"]], st[fn["filename"]]

    by_key = {}
    for i, smp in enumerate(p["sample"]):
        frames = []
        for lid in smp["location_id"]:
            loc = locs[lid]
            for ln in loc["line"]:
                name, file = fn_of(ln["function_id"])
                frames.append((name, file, ln["line"], loc["address"]))
        key = tuple(frames)
        expect(key not in by_key, "two samples with one stack: %s" % (key[:2],))
        by_key[key] = smp
    sites = report["sites"]
    expect(len(p["sample"]) == len(sites), "%d samples for %d sites" % (len(p["sample"]), len(sites)))
    for site in sites:
        smp = by_key.get(site_key(site["frames"]))
        if not expect(smp is not None, "site %d (%s) has no sample with its frames" % (
                site["id"], site["frames"][0]["function"] if site["frames"] else "no frames")):
            continue
        expect(smp["value"] == site_values(site), "site %d: values %s, the report's %s" % (
            site["id"], smp["value"], site_values(site)))
        # Locations: one per group of inlined frames, the group's lines
        # innermost first, its mapping the frames' module.
        gs = groups(site["frames"])
        expect(len(smp["location_id"]) == len(gs), "site %d: %d locations for %d frame groups" % (
            site["id"], len(smp["location_id"]), len(gs)))
        for lid, g in zip(smp["location_id"], gs):
            loc = locs[lid]
            expect([fn_of(ln["function_id"])[0] for ln in loc["line"]] == [f.get("function_full", f["function"]) for f in g],
                   "site %d: location %d lines %s, frames %s" % (
                       site["id"], lid, [fn_of(ln["function_id"])[0] for ln in loc["line"]],
                       [f.get("function_full", f["function"]) for f in g]))
            mod = g[-1]["module"]
            m = maps.get(loc["mapping_id"])
            if mod:
                expect(m is not None and st[m["filename"]] == mod,
                       "site %d: location %d in mapping %s, its frame's module is %s" % (
                           site["id"], lid, m and st[m["filename"]], mod))

    # Totals: the samples add up to the report's totals.
    sums = [sum(smp["value"][k] for smp in p["sample"]) for k in range(6)]
    t = report["totals"]
    expect(sums[0] == t["alloc_calls"], "alloc_objects add up to %d, alloc_calls %d" % (sums[0], t["alloc_calls"]))
    expect(sums[1] == t["bytes_allocated"], "alloc_space adds up to %d, bytes_allocated %d" % (
        sums[1], t["bytes_allocated"]))
    expect(sums[3] == report["leaks"]["bytes"], "inuse_space adds up to %d, leaks.bytes %d" % (
        sums[3], report["leaks"]["bytes"]))
    expect(sums[5] == report["peak"]["bytes"], "peak_space adds up to %d, peak.bytes %d" % (
        sums[5], report["peak"]["bytes"]))

    # Mappings: the program first; build-id and span as readelf reads them.
    expect(p["mapping"] and st[p["mapping"][0]["filename"]] == proc["exe"],
           "mapping[0] is %r, not the program %r" % (p["mapping"] and st[p["mapping"][0]["filename"]], proc["exe"]))
    checked = 0
    for m in p["mapping"]:
        path = st[m["filename"]]
        facts = readelf_facts(path) if path.startswith("/") else None
        if not facts:
            continue
        checked += 1
        expect(st[m["build_id"]] == facts["build_id"], "mapping %s: build-id %r, readelf says %r" % (
            path, st[m["build_id"]], facts["build_id"]))
        expect(m["memory_limit"] - m["memory_start"] == facts["span"],
               "mapping %s: spans %#x bytes, its PT_LOAD segments %#x" % (
                   path, m["memory_limit"] - m["memory_start"], facts["span"]))
    return checked


# ---------------------------------------------------------------------------
# speedscope
# ---------------------------------------------------------------------------

PROFILES = [
    ("bytes allocated", "bytes", lambda s: s["bytes_allocated"]),
    ("allocation calls", "none", lambda s: s["alloc_calls"]),
    ("bytes live at the peak", "bytes", lambda s: s["peak_bytes"]),
    # The sites' leaked_bytes is definite + indirect + possible: check it is
    # also the sum of those kinds, independently of memlens' own sum.
    ("bytes leaked (definite + indirect + possible)", "bytes",
     lambda s: s["leaked_by_kind"]["definite"] + s["leaked_by_kind"]["indirect"] +
     s["leaked_by_kind"].get("possible", 0)),
    ("bytes live at exit (leaked + reachable)", "bytes", lambda s: s["live_at_exit_bytes"]),
]
UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_format(d):
    """speedscope's file format (file-format-schema.json), rule by rule."""
    if not expect(isinstance(d, dict), "the document is not an object"):
        return False
    for k in ("$schema", "shared", "profiles"):
        expect(k in d, "no %r" % k)
    expect(d.get("$schema") == "https://www.speedscope.app/file-format-schema.json", "wrong $schema")
    for k in ("name", "exporter"):
        expect(k not in d or isinstance(d[k], str), "%s is not a string" % k)
    expect("activeProfileIndex" not in d or is_num(d["activeProfileIndex"]), "activeProfileIndex is not a number")
    frames = d.get("shared", {}).get("frames")
    if not expect(isinstance(frames, list), "shared.frames is not an array"):
        return False
    for i, f in enumerate(frames):
        expect(isinstance(f, dict) and isinstance(f.get("name"), str), "frame %d has no name" % i)
        expect("file" not in f or isinstance(f["file"], str), "frame %d: file is not a string" % i)
        for k in ("line", "col"):
            expect(k not in f or is_num(f[k]), "frame %d: %s is not a number" % (i, k))
    profs = d.get("profiles")
    if not expect(isinstance(profs, list), "profiles is not an array"):
        return False
    for i, pr in enumerate(profs):
        expect(pr.get("type") == "sampled", "profile %d is not sampled" % i)
        for k in ("name", "unit", "startValue", "endValue", "samples", "weights"):
            expect(k in pr, "profile %d has no %s" % (i, k))
        expect(isinstance(pr.get("name"), str), "profile %d: name is not a string" % i)
        expect(pr.get("unit") in UNITS, "profile %d: unit %r" % (i, pr.get("unit")))
        expect(is_num(pr.get("startValue")) and is_num(pr.get("endValue")), "profile %d: start/end" % i)
        smp, w = pr.get("samples", []), pr.get("weights", [])
        expect(len(smp) == len(w), "profile %d: %d samples, %d weights" % (i, len(smp), len(w)))
        for j, stack in enumerate(smp):
            expect(isinstance(stack, list), "profile %d sample %d is not an array" % (i, j))
            for x in stack:
                expect(isinstance(x, int) and 0 <= x < len(frames),
                       "profile %d sample %d: frame index %r out of range" % (i, j, x))
        expect(all(is_num(x) and x >= 0 for x in w), "profile %d: a weight is not a number >= 0" % i)
    expect(0 <= d.get("activeProfileIndex", 0) < len(profs), "activeProfileIndex out of range")
    return not ERRORS


def break_speedscope(d, what):
    if what == "value":
        d["profiles"][0]["weights"][0] += 1
    elif what == "index":
        d["profiles"][0]["samples"][0][0] = len(d["shared"]["frames"])
    elif what == "order":
        d["profiles"][2]["samples"][0].reverse()
    elif what == "end":
        d["profiles"][1]["endValue"] += 1
    elif what == "unit":
        d["profiles"][0]["unit"] = "kilobytes"
    elif what == "line":
        d["shared"]["frames"][-1]["line"] = d["shared"]["frames"][-1].get("line", 0) + 1
    else:
        raise SystemExit("unknown --break " + what)


def load_json(path, brk, breaker):
    """The JSON file at path, changed by breaker(d, brk) when brk is given."""
    with open(path) as f:
        d = json.load(f)
    if brk:
        breaker(d, brk)
    return d


def check_speedscope(path, report, brk):
    d = load_json(path, brk, break_speedscope)
    if not check_format(d):
        return
    frames = d["shared"]["frames"]
    profs = d["profiles"]
    expect(len(profs) == len(PROFILES), "%d profiles, expected %d" % (len(profs), len(PROFILES)))
    expect(d.get("activeProfileIndex") == 2, "the active profile is not the peak")
    sampled = report["process"]["sampled"]
    expect(("(sampled: one allocation per %d bytes" % report["process"]["sample_bytes"] in d.get("name", ""))
           == sampled, "the name %r does not say whether the trace was sampled" % d.get("name"))
    sites = report["sites"]

    def frame(f):
        out = {"name": f.get("function_full", f["function"])}
        if f["file"] is not None:
            out["file"] = f["file"]
        if f["line"] is not None:
            out["line"] = f["line"]
        return out

    for pr, (name, unit, metric) in zip(profs, PROFILES):
        expect(pr["name"].startswith(name), "profile %r, expected %r" % (pr["name"], name))
        expect(pr["unit"] == unit, "profile %r: unit %r, expected %r" % (name, pr["unit"], unit))
        want = [s for s in sites if metric(s)]
        expect(len(pr["samples"]) == len(want), "profile %r: %d samples for %d sites" % (
            name, len(pr["samples"]), len(want)))
        for stack, w, site in zip(pr["samples"], pr["weights"], want):
            got = [frames[i] for i in stack]
            exp = [frame(f) for f in reversed(site["frames"])] or [{"name": "[stack not recorded]"}]
            expect(got == exp, "profile %r, site %d: stack %s, expected %s" % (name, site["id"], got[-2:], exp[-2:]))
            expect(w == metric(site), "profile %r, site %d: weight %s, expected %s" % (name, site["id"], w, metric(site)))
        total = sum(pr["weights"])
        expect(pr["startValue"] == 0 and pr["endValue"] == total,
               "profile %r: start %s end %s, weights add up to %s" % (name, pr["startValue"], pr["endValue"], total))
    if len(profs) == len(PROFILES):
        t, L = report["totals"], report["leaks"]
        for i, want in enumerate([t["bytes_allocated"], t["alloc_calls"], report["peak"]["bytes"],
                                  L["definite_bytes"] + L["indirect_bytes"] + L.get("possible_bytes", 0), L["bytes"]]):
            expect(sum(profs[i]["weights"]) == want, "profile %r: weights add up to %d, the report's total is %d"
                   % (PROFILES[i][0], sum(profs[i]["weights"]), want))


def normalized(p):
    """The profile in pprof_format_dump.mjs' form: numbers as decimal strings."""
    def n(v):
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    def vt(v):
        return [n(v["type"]), n(v["unit"])]
    return {
        "strings": p["string_table"],
        "sample_type": [vt(v) for v in p["sample_type"]],
        "samples": [{"location_id": [n(x) for x in s["location_id"]], "value": [n(x) for x in s["value"]]}
                    for s in p["sample"]],
        "mappings": [[n(m[k]) for k in ("id", "memory_start", "memory_limit", "file_offset", "filename", "build_id",
                                        "has_functions", "has_filenames", "has_line_numbers", "has_inline_frames")]
                     for m in p["mapping"]],
        "locations": [{"id": n(l["id"]), "mapping_id": n(l["mapping_id"]), "address": n(l["address"]),
                       "lines": [[n(x["function_id"]), n(x["line"])] for x in l["line"]]} for l in p["location"]],
        "functions": [[n(f[k]) for k in ("id", "name", "system_name", "filename", "start_line")] for f in p["function"]],
        "time_nanos": n(p["time_nanos"]), "duration_nanos": n(p["duration_nanos"]),
        "period_type": vt(p["period_type"]), "period": n(p["period"]),
        "comment": [n(c) for c in p["comment"]], "default_sample_type": n(p["default_sample_type"]),
    }


def same_pprof(path, other):
    with open(path, "rb") as f:
        ours = normalized(pprof_decode.decode(f.read()))
    with open(other) as f:
        theirs = json.load(f)
    for k in sorted(set(ours) | set(theirs)):
        expect(ours.get(k) == theirs.get(k), "%s differs: ours %s, theirs %s" % (
            k, str(ours.get(k))[:200], str(theirs.get(k))[:200]))


def break_compact(c, what):
    if what == "stack":  # one entry's parent: a stack that skips a frame
        k = next(i for i, e in enumerate(c["stack_table"]) if e[1] >= 0 and c["stack_table"][e[1]][1] >= 0)
        c["stack_table"][k][1] = c["stack_table"][c["stack_table"][k][1]][1]
    elif what == "frame":  # one stack entry names another frame
        c["stack_table"][0][0] = (c["stack_table"][0][0] + 1) % len(c["frame_table"])
    elif what == "value":  # one site row's bytes_allocated
        c["sites"][0][c["site_fields"].index("bytes_allocated")] += 1
    elif what == "fields":  # two columns swapped in site_fields
        f = c["site_fields"]
        i, j = f.index("alloc_calls"), f.index("leaked_blocks")
        f[i], f[j] = f[j], f[i]
    elif what == "flame":  # a flame node's frame
        c["flame"][5][0][0] = (c["flame"][5][0][0] + 1) % len(c["frame_table"])
    elif what == "key":  # a top-level value
        c["totals"]["alloc_calls"] += 1
    else:
        raise SystemExit("unknown --break " + what)


def stack_frames(ft, st, k):
    """The frames of stack k of the page's form, innermost first: its
    frame_table entries, following stack_table from k to the outermost."""
    out = []
    while k >= 0:
        out.append(ft[st[k][0]])
        k = st[k][1]
    return out


def check_compact(path, report, brk):
    c = load_json(path, brk, break_compact)
    ft, st = c.get("frame_table"), c.get("stack_table")
    if not isinstance(ft, list) or not isinstance(st, list) or not isinstance(c.get("site_fields"), list):
        fail("frame_table, stack_table or site_fields is missing")
        return
    for k, e in enumerate(st):
        if not (isinstance(e, list) and len(e) == 2 and 0 <= e[0] < len(ft) and -1 <= e[1] < k):
            fail("stack_table[%d] = %r: not [frame index, an earlier entry or -1]" % (k, e))
            return

    def frames(k):
        return stack_frames(ft, st, k)

    fields = c["site_fields"]
    sites = []
    for i, row in enumerate(c["sites"]):
        if len(row) != len(fields):
            fail("site row %d has %d values for %d fields" % (i, len(row), len(fields)))
            continue
        d = {}
        for name, v in zip(fields, row):
            if name == "stack":
                d["frames"] = frames(v)
            elif name == "headline":
                if v:  # the full form leaves a 0 out
                    d[name] = v
            elif "." in name:
                outer, inner = name.split(".", 1)
                d.setdefault(outer, {})[inner] = v
            else:
                d[name] = v
        sites.append(d)

    def same(what, got, want):
        if got == want:
            return
        if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
            for i, (g, w) in enumerate(zip(got, want)):
                if g != w:
                    keys = sorted(k for k in set(g) | set(w) if g.get(k) != w.get(k)) if isinstance(g, dict) else []
                    fail("%s[%d] differs from the full form%s" % (what, i, (" in " + ", ".join(keys)) if keys else ""))
                    return
        fail("%s differs from the full form (%s entries, expected %s)" %
             (what, len(got) if isinstance(got, list) else "-", len(want) if isinstance(want, list) else "-"))

    same("sites", sites, report["sites"])
    for sec in ("peak", "leaks"):
        got = dict(c[sec])
        got["sites"] = []
        for e in c[sec]["sites"]:
            e = dict(e)
            e["frames"] = frames(e.pop("stack"))
            got["sites"].append(e)
        same(sec + ".sites", got["sites"], report[sec]["sites"])
        got.pop("sites")
        want = {k: v for k, v in report[sec].items() if k != "sites"}
        same(sec, got, want)

    def node(n):
        fr = ft[n[0]]
        d = {"name": fr["function"]}
        if "function_full" in fr:
            d["name_full"] = fr["function_full"]
        d.update({"file": fr["file"], "line": fr["line"], "alloc": n[1], "peak": n[2], "leaked": n[3],
                  "calls": n[4], "children": [node(x) for x in n[5]]})
        return d

    same("flame", [node(c["flame"])], [report["flame"]])
    extra = {"site_fields", "frame_table", "stack_table", "flame_inverted"}
    for k in sorted(set(c) | set(report)):
        if k in extra or k in ("sites", "peak", "leaks", "flame", "_text"):
            continue
        if k not in c or k not in report:
            fail("key %r is in only one form" % k)
        else:
            same(k, [c[k]], [report[k]])
    expect(isinstance(c.get("flame_inverted"), list), "flame_inverted is missing")
    return len(sites)


def main():
    args = sys.argv[1:]
    brk, expects = None, []
    if "--break" in args:
        i = args.index("--break")
        brk = args[i + 1]
        del args[i:i + 2]
    while "--expect-leaf" in args:
        i = args.index("--expect-leaf")
        expects.append(args[i + 1])
        del args[i:i + 2]
    if len(args) != 3 or args[0] not in ("pprof", "speedscope", "same-pprof", "compact"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, path, rep = args
    if kind == "same-pprof":
        same_pprof(path, rep)
        what = "equal to " + rep
    elif kind == "compact":
        report = load_report(rep)
        n = check_compact(path, report, brk)
        what = "%s sites, every key equal to the full form's" % n
    elif kind == "pprof":
        report = load_report(rep)
        checked = check_pprof(path, report, brk, expects)
        what = "%d samples, %d mappings checked with readelf" % (len(report["sites"]), checked or 0)
    else:
        report = load_report(rep)
        check_speedscope(path, report, brk)
        what = "%d sites" % len(report["sites"])
    for e in ERRORS[:30]:
        print("FAIL: %s: %s" % (path, e))
    if len(ERRORS) > 30:
        print("FAIL: ... %d more" % (len(ERRORS) - 30))
    if not ERRORS:
        print("ok: %s %s (%s)" % (kind, path, what))
    return 1 if ERRORS else 0


if __name__ == "__main__":
    sys.exit(main())
