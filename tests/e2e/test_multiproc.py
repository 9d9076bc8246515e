#!/usr/bin/python3
"""test_multiproc.py BUILD_DIR SRC_DIR - many processes in one report.

Records fx_multiproc (a parent and three forked children with known
allocations: see its source) with the real `memlens run --follow-fork`,
then checks `memlens report DIR` and `memlens report A.mlt B.mlt ...`:
the processes table, the merged sites and their per-process shares, the
totals and the peak's definition, against the fixture's ground truth and
the pids it printed; each process's row against the single-trace report of
its own trace; the text summary and the --by-process view; the gates on
merged totals; and bad inputs (a file that is not a trace, an empty
directory, a truncated trace, a trace given twice, a one-trace export).
Exit 0 when every check passed, 1 otherwise (every failure is printed).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import check_exports  # noqa: E402  (the page form's stack_frames)
from e2e_checks import check, eq, failures  # noqa: E402

B = os.path.realpath(sys.argv[1])
SRC = os.path.realpath(sys.argv[2])
MEMLENS = os.path.join(B, "memlens")
FX = os.path.join(B, "fx_multiproc")


def run(args, **kw):
    return subprocess.run([MEMLENS] + args, capture_output=True, text=True, timeout=300, **kw)


def report_json(args, out):
    r = run(["report", "-q"] + args + ["--json", out])
    eq(r.returncode, 0, "report %s --json: exit (stderr %s)" % (args, r.stderr.strip()))
    with open(out) as f:
        return json.load(f)


def page_data(path):
    """The document embedded in a report page (its "ml-data" element)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r'<script type="application/json" id="ml-data">(.*?)</script>', text, re.S)
    check(m is not None, "%s holds an ml-data element" % path)
    return json.loads(m.group(1)) if m else {}


def headline(site):
    f = site["frames"]
    return f[site.get("headline", 0)]["function"] if f else None


def main():
    w = tempfile.mkdtemp(prefix="ml_multiproc.")
    try:
        test(w)
        inherited_frees(w)
        uninherited(w)
        jit_merged(w)
    finally:
        if os.environ.get("ML_KEEP_TEST_FILES") != "1":
            shutil.rmtree(w, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


INHERIT_C = r"""
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
void *volatile keep[3];
int main(void) {
    for (int i = 0; i < 3; i++) keep[i] = malloc(100 + i);
    pid_t c = fork();
    if (c == 0) {
        free(keep[0]); /* blocks the parent allocated before the fork */
        free(keep[1]);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    for (int i = 0; i < 3; i++) free(keep[i]);
    return 0;
}
"""


def fork_run(w, name, source, what):
    """Builds `source` in W/NAME and records it with --follow-fork into
    r.mlt there: (the folder, the run, [its one child trace] or [])."""
    d = os.path.join(w, name)
    os.mkdir(d)
    src, prog = os.path.join(d, "p.c"), os.path.join(d, "p")
    with open(src, "w") as f:
        f.write(source)
    if subprocess.run(["cc", "-O0", "-o", prog, src]).returncode != 0:
        check(False, "cc failed on the %s program" % what)
        return d, None, []
    r = run(["run", "-q", "--follow-fork", "-o", os.path.join(d, "r.mlt"), "--", prog])
    eq(r.returncode, 0, "%s: memlens run (stderr %s)" % (what, r.stderr.strip()))
    child = [t for t in os.listdir(d) if re.fullmatch(r"r\.\d+\.mlt", t)]
    eq(len(child), 1, "%s: one child trace: %s" % (what, os.listdir(d)))
    return d, r, child if len(child) == 1 else []


def inherited_frees(w):
    """A fork child that frees blocks its parent allocated before the fork:
    its process record says "forked", and its report says where those
    blocks were allocated (not "before memlens started")."""
    d, r, child = fork_run(w, "inherit", INHERIT_C, "inherited frees")
    if not child:
        return
    for name, forked in (("r.mlt", False), (child[0], True)):
        dump = run(["dump", os.path.join(d, name)]).stdout
        proc = [line for line in dump.splitlines() if " process pid=" in line]
        check(len(proc) == 1 and ("(forked)" in proc[0]) == forked,
              "%s: the process record says forked: %s (%s)" % (name, forked, proc))
    j = report_json(["--no-advisor", os.path.join(d, child[0])], os.path.join(d, "c.json"))
    eq(j["warnings"], ["2 frees of blocks this process did not allocate: blocks inherited from its parent at "
                       "the fork (their allocations are in the parent's trace), or of an allocator memlens does "
                       "not see"], "the child's warning on the blocks it inherited and freed")
    j = report_json(["--no-advisor", os.path.join(d, "r.mlt")], os.path.join(d, "p.json"))
    check(not any("frees" in x for x in j["warnings"]), "the parent has no such warning: %s" % j["warnings"])


UNINHERITED_C = r"""
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#define N 1100000
void **volatile keep;
void **volatile table;
int main(void) {
    keep = malloc(N * sizeof *keep);
    for (int i = 0; i < N; i++) keep[i] = malloc(16);
    table = malloc(8 * sizeof *table);
    pid_t c = fork();
    if (c == 0) {
        table[0] = malloc(256); /* held only through the parent's table */
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    return 0;
}
"""


def uninherited(w):
    """A parent with more live blocks at a fork than the collector copies
    for a child (1 M blocks): the child's exit scan runs without them, so
    the block it keeps only in the parent's table is called definitely
    lost (valgrind: reachable). The child's trace says so, for every
    report of it, not only the run's stderr."""
    d, r, child = fork_run(w, "uninherited", UNINHERITED_C, "uninherited")
    if not child:
        return
    check("forked children given no copy of their parent's blocks: 1 " in r.stderr,
          "uninherited: the run's stderr line: %s" % r.stderr.strip())
    pid = child[0].split(".")[1]
    # the parent's live blocks at the fork: the N blocks, keep and table
    msg = ("not inherited: process %s, a fork child, was given no copy of the 1100002 blocks its parent had live "
           "at the fork (over 1 M blocks, or 64 MiB for all copies at once): a block it held only through one of "
           "them is reported as definitely lost" % pid)
    dump = run(["dump", os.path.join(d, child[0])]).stdout
    rec = [line.split(" untraced ", 1)[1] for line in dump.splitlines() if " untraced " in line]
    eq(rec, ['what=inherited count=1100002 message="%s"' % msg], "uninherited: the child's untraced record")
    dump = run(["dump", os.path.join(d, "r.mlt")]).stdout
    check(" untraced " not in dump, "uninherited: the parent's trace has no untraced record")
    j = report_json(["--no-advisor", os.path.join(d, child[0])], os.path.join(d, "c.json"))
    eq(j["warnings"], [msg], "uninherited: the child's report warnings")
    eq((j["leaks"]["definite_bytes"], j["leaks"]["definite_blocks"]), (256, 1),
       "uninherited: the block held through the parent's table is called definitely lost")


def jit_merged(w):
    """Two processes running fx_jit (a stub in an executable mapping, as a
    JIT makes it, calls malloc: 4 threads' calls, then main's one): the stub
    lies at another address in each, and its frame, in no module, is "[?]"
    in the merged report, so that the two processes' sites merge: 8 calls
    behind worker, 2 behind main, half of them from each process."""
    d = os.path.join(w, "jit")
    os.mkdir(d)
    jit = os.path.join(B, "fx_jit")
    r = run(["run", "-q", "--follow-fork", "-o", os.path.join(d, "j.mlt"), "--", "/bin/sh", "-c",
             "%s; %s" % (jit, jit)])
    eq(r.returncode, 0, "jit: the run's exit status (stderr %s)" % r.stderr.strip())
    j = report_json(["--no-advisor", d], os.path.join(w, "jit.json"))
    stub = sorted((s["alloc_calls"], [f["function"] for f in s["frames"][:2]],
                   sorted(p["alloc_calls"] for p in s.get("by_process", [])))
                  for s in j["sites"] if s["frames"] and not s["frames"][0].get("module"))
    eq(stub, [(2, ["[?]", "main"], [1, 1]), (8, ["[?]", "worker"], [4, 4])],
       "jit: the stub's sites merged across the two processes, half from each")


def test(w):
    tree = os.path.join(w, "tree")
    os.mkdir(tree)
    r = run(["run", "-q", "--follow-fork", "-o", os.path.join(tree, "run.mlt"), "--", FX])
    eq(r.returncode, 0, "memlens run exit (stderr %s)" % r.stderr.strip())
    kids = {}
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"child (\d) (\d+)", line)
        if m:
            kids[int(m.group(1))] = int(m.group(2))
    eq(sorted(kids), [1, 2, 3], "the fixture named its three children")
    traces = sorted(os.listdir(tree))
    eq(len(traces), 4, "one trace per process: %s" % traces)

    # ------------------------------------------------------------------
    # The directory's report: processes, merged sites, totals.
    doc = report_json([tree], os.path.join(w, "dir.json"))
    v = subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tests/e2e/validate_json.py"),
                        os.path.join(SRC, "docs/report-schema.json"), os.path.join(w, "dir.json")],
                       capture_output=True, text=True)
    eq(v.returncode, 0, "the merged JSON follows docs/report-schema.json: %s" % v.stderr.strip())
    procs = doc["processes"]
    eq(len(procs), 4, "processes")
    parent = procs[0]
    eq([p["pid"] for p in procs[1:]], [kids[1], kids[2], kids[3]],
       "processes in start order: the parent, then children 1, 2, 3")
    eq([p["index"] for p in procs], [0, 1, 2, 3], "process indexes")
    eq([p["ppid"] for p in procs[1:]], [parent["pid"]] * 3, "each child's ppid is the parent")
    eq(parent["exit_code"], 0, "the parent's exit code")
    eq(os.path.basename(parent["trace"]), "run.mlt", "the parent's trace")
    eq(parent["parent_trace"], None, "the parent has no parent trace")
    for k in (1, 2, 3):
        p = procs[k]
        eq(os.path.basename(p["trace"]), "run.%d.mlt" % kids[k], "child %d's trace" % k)
        check(p["parent_trace"] and p["parent_trace"].endswith("run.mlt"), "child %d names its parent's trace" % k)
        eq(p["program"], FX, "child %d's program" % k)
    # The ground truth of each process: calls, bytes, peak, live at exit.
    want = {0: (1, 500, 500, 0), 1: (1, 1000, 1000, 0), 2: (3, 4000 + 777, 4000, 0), 3: (4, 9000 + 333, 9000, 333)}
    for i, (calls, allocated, peak, leaked) in want.items():
        p = procs[i]
        eq((p["alloc_calls"], p["bytes_allocated"], p["peak_bytes"], p["leaked_bytes"]),
           (calls, allocated, peak, leaked), "process %d (pid %d): calls, allocated, peak, leaked" % (i, p["pid"]))
    eq(procs[2]["reachable_bytes"], 777, "child 2 keeps 777 bytes reachable")

    # Each row equals the single-trace report of its own trace.
    for i, p in enumerate(procs):
        one = report_json([p["trace"]], os.path.join(w, "one%d.json" % i))
        t = one["totals"]
        eq((p["pid"], p["alloc_calls"], p["bytes_allocated"], p["peak_bytes"], p["free_calls"]),
           (one["process"]["pid"], t["alloc_calls"], t["bytes_allocated"], t["peak_bytes"], t["free_calls"]),
           "process %d's row equals its single-trace report" % i)
        eq(p["leaked_bytes"], one["leaks"]["lost_bytes"], "process %d's leaked bytes equal its report's" % i)
        eq(p["exit_code"], one["process"]["exit_code"], "process %d's exit code equals its report's" % i)

    # Totals: sums; the peak is the sum of the processes' peaks, said so.
    t = doc["totals"]
    eq((t["alloc_calls"], t["bytes_allocated"]), (9, 14000 + 777 + 333 + 500), "merged calls and bytes")
    eq(t["peak_bytes"], 500 + 1000 + 4000 + 9000, "totals.peak_bytes: the sum of the processes' peaks")
    eq(doc["peak"]["bytes"], 14500, "peak.bytes")
    eq(doc["peak"]["blocks"], 1 + 1 + 2 + 3, "peak.blocks")
    eq(doc["peak"]["kind"], "sum_of_process_peaks", "peak.kind")
    eq(doc["peak"]["time_s"], None, "a merged peak has no one time")
    eq(doc["merged"]["processes"], 4, "merged.processes")
    eq(doc["merged"]["max_process_peak_bytes"], 9000, "merged.max_process_peak_bytes")
    eq(doc["merged"]["max_process_peak_pid"], kids[3], "merged.max_process_peak_pid")
    eq(doc["merged"]["inputs"], tree, "merged.inputs names the directory")
    L = doc["leaks"]
    eq((L["bytes"], L["blocks"], L["definite_bytes"], L["reachable_bytes"], L["lost_bytes"], L["gate_bytes"]),
       (1110, 2, 333, 777, 333, 333), "merged leaks")
    eq(doc["advisor"]["ran"], False, "the advisor does not run on a merged report")

    # The page (--html) holds the same document in the page's form: each
    # frame and stack once, sites, peak and leak rows naming theirs by
    # "stack", and no "by_process" (the page does not read it). Rebuilt from
    # the tables, it is the --json document without "by_process".
    page_html = os.path.join(w, "dir.html")
    r = run(["report", "-q", tree, "--html", page_html])
    eq(r.returncode, 0, "report DIR --html: exit (stderr %s)" % r.stderr.strip())
    page = page_data(page_html)
    ft, st = page.pop("frame_table", None), page.pop("stack_table", None)
    check(isinstance(ft, list) and isinstance(st, list) and len(ft) > 0 and len(st) > 0,
          "the page's data has a frame table and a stack table")
    if isinstance(ft, list) and isinstance(st, list):
        for rows in (page["sites"], page["peak"]["sites"], page["leaks"]["sites"]):
            for row in rows:
                check("frames" not in row and isinstance(row.get("stack"), int), "a page row names its stack")
                row["frames"] = check_exports.stack_frames(ft, st, row.pop("stack"))
        want = json.loads(json.dumps(doc))
        for s in want["sites"]:
            del s["by_process"]
        for k in sorted(set(want) | set(page)):
            eq(page.get(k), want.get(k), "the page's %r, rebuilt, equals the --json document's" % k)

    # --json-compact: the page's form in a file, each site's "by_process"
    # kept. Rebuilt from the tables, it is the --json document.
    cj = os.path.join(w, "dir.compact.json")
    r = run(["report", "-q", tree, "--json-compact", "--json", cj])
    eq(r.returncode, 0, "report DIR --json-compact: exit (stderr %s)" % r.stderr.strip())
    if r.returncode == 0:
        with open(cj) as f:
            compact = json.load(f)
        ft, st = compact.pop("frame_table", None), compact.pop("stack_table", None)
        check(isinstance(ft, list) and isinstance(st, list) and len(st) > 0, "--json-compact has the tables")
        if isinstance(ft, list) and isinstance(st, list):
            for rows in (compact["sites"], compact["peak"]["sites"], compact["leaks"]["sites"]):
                for row in rows:
                    check("frames" not in row and isinstance(row.get("stack"), int), "a compact row names its stack")
                    row["frames"] = check_exports.stack_frames(ft, st, row.pop("stack"))
            for k in sorted(set(doc) | set(compact)):
                eq(compact.get(k), doc.get(k), "--json-compact's %r, rebuilt, equals --json's" % k)

    # Sites: one per stack key, whichever process had it.
    sites = doc["sites"]
    by_name = {}
    for s in sites:
        by_name.setdefault(headline(s), []).append(s)
    eq(sorted(by_name), sorted(["shared_alloc", "keep_second", "drop_third", "parent_work"]),
       "the merged sites' functions")
    eq(len(sites), 4, "four merged sites")
    eq([s["id"] for s in sites], list(range(len(sites))), "site ids are indexes")
    sh = by_name["shared_alloc"][0]
    eq((sh["alloc_calls"], sh["bytes_allocated"], sh["peak_bytes"], sh["peak_blocks"], sh["min_size"], sh["max_size"]),
       (6, 14000, 14000, 6, 1000, 3000), "shared_alloc merged over the three children")
    eq([f["function"] for f in sh["frames"][:3]], ["shared_alloc", "child_work", "main"], "shared_alloc's frames")
    eq([(b["process"], b["pid"], b["alloc_calls"], b["bytes_allocated"], b["peak_bytes"], b["peak_blocks"])
        for b in sh["by_process"]],
       [(k, kids[k], k, k * k * 1000, k * k * 1000, k) for k in (1, 2, 3)], "shared_alloc by_process")
    ks = by_name["keep_second"][0]
    eq([(b["pid"], b["alloc_calls"], b["leaked_bytes"], b["leaked_blocks"]) for b in ks["by_process"]],
       [(kids[2], 1, 0, 0)], "keep_second: child 2 alone (reachable: not leaked)")
    eq(ks["leaked_by_kind"]["reachable"], 777, "keep_second is reachable")
    dt = by_name["drop_third"][0]
    eq([(b["pid"], b["leaked_bytes"]) for b in dt["by_process"]], [(kids[3], 333)], "drop_third: child 3 alone")
    eq(dt["leaked_by_kind"]["definite"], 333, "drop_third is a definite leak")
    pw = by_name["parent_work"][0]
    eq([(b["pid"], b["peak_bytes"]) for b in pw["by_process"]], [(parent["pid"], 500)], "parent_work: the parent alone")
    eq([s["site"] for s in doc["peak"]["sites"]], [sh["id"], pw["id"]], "peak.sites")
    eq([(s["site"], s["kind"], s["bytes"]) for s in L["sites"]],
       [(ks["id"], "reachable", 777), (dt["id"], "definite", 333)], "leaks.sites")
    # The flame tree holds every process's bytes, shared_alloc's under one node.
    fl = doc["flame"]
    eq((fl["name"], fl["alloc"], fl["peak"]), ("all", 15610, 14500), "flame root")

    def find(node, name):
        if node["name"] == name:
            return [node]
        return [x for c in node["children"] for x in find(c, name)]
    eq([n["alloc"] for n in find(fl, "shared_alloc")], [14000], "one flame node for shared_alloc")

    # Child 1 reached child_work from another line of main: the site's
    # frames are child 1's (the first process that has it).
    src = open(os.path.join(SRC, "tests/e2e/fixtures/fx_multiproc.c")).read().splitlines()
    calls = [i + 1 for i, l in enumerate(src) if l.strip() == "child_work(k);"]
    eq(len(calls), 2, "the fixture calls child_work from two lines")
    eq(sh["frames"][2]["line"], calls[0], "shared_alloc's main frame is child 1's line")

    # Two runs: other addresses (ASLR moves the program and libc), the same keys.
    tree2 = os.path.join(w, "tree2")
    os.mkdir(tree2)
    r = run(["run", "-q", "--follow-fork", "-o", os.path.join(tree2, "run.mlt"), "--", FX])
    eq(r.returncode, 0, "second run")
    both = report_json([tree, tree2], os.path.join(w, "both.json"))
    eq(len(both["processes"]), 8, "two runs: eight processes")
    eq(len(both["sites"]), 4, "two runs: still four merged sites")
    s2 = [s for s in both["sites"] if headline(s) == "shared_alloc"]
    eq([(s["alloc_calls"], s["bytes_allocated"], len(s["by_process"])) for s in s2], [(12, 28000, 6)],
       "two runs: shared_alloc over six children")
    one2 = report_json([os.path.join(tree2, "run.mlt")], os.path.join(w, "one2.json"))
    a1 = [s for s in report_json([os.path.join(tree, "run.mlt")], os.path.join(w, "one1.json"))["sites"]
          if headline(s) == "parent_work"][0]["frames"][0]["address"]
    a2 = [s for s in one2["sites"] if headline(s) == "parent_work"][0]["frames"][0]["address"]
    check(a1 != a2, "the two runs' addresses differ (ASLR), so the merge did not match addresses")

    # ------------------------------------------------------------------
    # The same traces named one by one, in another order: the same report.
    files = [os.path.join(tree, x) for x in reversed(traces)]
    doc2 = report_json(files, os.path.join(w, "files.json"))
    eq(doc2["merged"]["inputs"], "4 traces", "merged.inputs of files")
    doc2["merged"]["inputs"] = doc["merged"]["inputs"]
    check(doc2 == doc, "the files in any order give the directory's report")

    # ------------------------------------------------------------------
    # Text: the processes table, the peak's words, each site's processes.
    r = run(["report", tree])
    eq(r.returncode, 0, "text report exit")
    out = r.stdout
    check("4 processes merged" in out, "text title: %s" % out[:200])
    for k in (1, 2, 3):
        check(re.search(r"^\s+%d\s+%d\s+%d\s" % (k, kids[k], parent["pid"]), out, re.M),
              "text: child %d's row" % k)
    check("the sum of the processes' peaks is 14.2 KiB in 7 blocks, an upper bound" in out, "text: peak words")
    check("the largest single peak is 8.8 KiB (pid %d)" % kids[3] in out, "text: the largest peak")
    check(("in 3 processes: pid %d 8.8 KiB, pid %d 3.9 KiB, pid %d 1000 B" % (kids[3], kids[2], kids[1])) in out,
          "text: shared_alloc's processes, largest first")
    # Each leak row names its processes with that kind's bytes: the
    # reachable row named child 2 with "-" (the lost kinds' sum, 0).
    tl = out[out.index("top leaks:"):]
    check(re.search(r"777 B reachable +1 blocks +keep_second .*\n(?:.*<-.*\n)*\s+in 1 process: pid %d 777 B\n"
                    % kids[2], tl), "text: the reachable leak row names child 2 with 777 B: %s" % tl[:600])
    check(re.search(r"333 B definite +1 blocks +drop_third .*\n(?:.*<-.*\n)*\s+in 1 process: pid %d 333 B\n"
                    % kids[3], tl), "text: the definite leak row names child 3 with 333 B: %s" % tl[:600])
    check("reachability scan" not in out, "text: every process was scanned, no note: %s" % out[:600])
    # The note on unscanned leaks names the process it is about, and none
    # comes for an image that exec replaced (it has no scan and no leaks).
    execd = os.path.join(w, "execd")
    os.mkdir(execd)
    r = run(["run", "-q", "--follow-fork", "-o", os.path.join(execd, "run.mlt"), "--",
             "/bin/bash", "-c", "/bin/ls / > /dev/null; :"])
    eq(r.returncode, 0, "bash running ls under --follow-fork (stderr %s)" % r.stderr.strip())
    r = run(["report", execd])
    check(re.search(r"^\s+\d+\s+\d+\s+\d+\s+exec\s", r.stdout, re.M), "execd: a row ends in exec: %s" % r.stdout[:800])
    check("reachability scan" not in r.stdout, "execd: no note for an image exec replaced: %s" % r.stdout[:900])
    killed = os.path.join(w, "killed")
    os.mkdir(killed)
    r = run(["run", "-q", "--follow-fork", "-o", os.path.join(killed, "run.mlt"), "--", "/bin/bash", "-c",
             "/usr/bin/python3 -c 'import os, signal; x = [bytes(10) for _ in range(100)]; "
             "os.kill(os.getpid(), signal.SIGKILL)'; :"])
    doc3 = report_json([killed], os.path.join(w, "killed.json"))
    unscanned = [p for p in doc3["processes"] if not p["scanned"] and p["leaked_blocks"] > 0]
    eq(len(unscanned), 1, "killed: one process with unscanned leaks (python3)")
    r = run(["report", killed])
    if unscanned:
        check(("(pid %d had no reachability scan: its live blocks count as definite)" % unscanned[0]["pid"])
              in r.stdout, "killed: the note names python3's pid %d: %s" % (unscanned[0]["pid"], r.stdout[:900]))
    # --by-process: one column per process, a row per site.
    r = run(["report", tree, "--by-process", "alloc"])
    eq(r.returncode, 0, "--by-process exit")
    rows = {}
    for line in r.stdout.splitlines()[2:]:
        cells = line.split()
        if len(cells) >= 6:
            rows[cells[-2] if ":" in cells[-1] else cells[-1]] = cells
    head = r.stdout.splitlines()[1].split()
    eq(head, ["all"] + [x for p in procs for x in ("pid", str(p["pid"]))] + ["site"], "--by-process header")
    eq(rows.get("shared_alloc", [])[:9], ["13.7", "KiB", "-", "1000", "B", "3.9", "KiB", "8.8", "KiB"],
       "--by-process alloc: shared_alloc's row")
    r = run(["report", tree, "--by-process", "calls"])
    line = [x for x in r.stdout.splitlines() if "shared_alloc" in x]
    eq([x.split()[:5] for x in line], [["6", "-", "1", "2", "3"]], "--by-process calls: shared_alloc's row")

    # ------------------------------------------------------------------
    # Gates judge the merged totals.
    def gate(args, code, needle, what):
        g = run(["report", "-q", tree] + args)
        eq(g.returncode, code, "%s: exit (stderr %s)" % (what, g.stderr.strip()))
        check(needle in g.stderr, "%s: stderr says %r: %s" % (what, needle, g.stderr.strip()))
    gate(["--max-peak", "14500"], 0, "", "--max-peak at the sum passes")
    gate(["--max-peak", "14499"], 3, "the sum of the 4 processes' peaks", "--max-peak under the sum fails")
    gate(["--fail-on-leak", "333"], 0, "", "--fail-on-leak at the merged leaks passes")
    gate(["--fail-on-leak", "332"], 3, "of all 4 processes together 333 bytes", "--fail-on-leak under fails")
    # --suppressions: what each pattern took in all the processes, as one
    # trace's report lists it (until 2026-12-08 the merged JSON had no
    # "leaks.suppressions", and each build's counters were the last trace's).
    supp = os.path.join(w, "multi.supp")
    with open(supp, "w") as f:
        f.write("leak:drop_third\nleak:keep_second\nleak:no_such_function\n")
    gate(["--suppressions", supp, "--fail-on-leak", "0"], 0, "", "drop_third suppressed: nothing leaks")
    sj = report_json([tree, "--suppressions", supp], os.path.join(w, "supp.json"))
    eq(sj["leaks"].get("suppressions"),
       [{"pattern": "drop_third", "blocks": 1, "bytes": 333}, {"pattern": "keep_second", "blocks": 1, "bytes": 777},
        {"pattern": "no_such_function", "blocks": 0, "bytes": 0}],
       "leaks.suppressions of the merged report")
    eq(sorted((g["bytes"], g["kind"], g.get("suppressed_by")) for g in sj["leaks"]["sites"]),
       [(333, "definite", "drop_third"), (777, "reachable", "keep_second")], "merged leak rows name their pattern")
    eq(sj["leaks"]["gate_bytes"], 0, "nothing left for the gate")

    # ------------------------------------------------------------------
    # Bad inputs: clear errors, nothing written.
    junk = os.path.join(w, "junk.mlt")
    with open(junk, "w") as f:
        f.write("this is not a trace\n" * 10)
    out_json = os.path.join(w, "bad.json")
    r = run(["report", junk, os.path.join(tree, "run.mlt"), "--json", out_json])
    eq(r.returncode, 1, "a file that is not a trace: exit 1")
    check(junk in r.stderr, "the error names the file: %s" % r.stderr.strip())
    check(not os.path.exists(out_json), "nothing written after an error")
    empty = os.path.join(w, "empty")
    os.mkdir(empty)
    r = run(["report", empty])
    eq(r.returncode, 1, "an empty directory: exit 1")
    check("holds no trace" in r.stderr, "an empty directory says so: %s" % r.stderr.strip())
    # Entries named *.mlt that are no trace files are left out, and said
    # to be: a FIFO (never opened: a report must not hang on it), a
    # directory, a link to nothing. The traces are reported as without them.
    odd = os.path.join(w, "odd")
    shutil.copytree(tree, odd)
    os.mkfifo(os.path.join(odd, "pipe.mlt"))
    os.mkdir(os.path.join(odd, "sub.mlt"))
    os.symlink(os.path.join(w, "no-such-file"), os.path.join(odd, "gone.mlt"))
    with open(os.path.join(odd, "run"), "w") as f:  # the traces' stem, but no trace
        f.write("notes\n")
    r = run(["report", odd, "--no-advisor"])
    plain = run(["report", tree, "--no-advisor"])
    eq(r.returncode, 0, "a folder with a FIFO, a directory and a dangling link named *.mlt: exit 0 (%s)" %
       r.stderr.strip())
    for name, why in (("pipe.mlt", "a FIFO (named pipe), not a trace file"),
                      ("sub.mlt", "a directory, not a trace file"), ("gone.mlt", "No such file or directory")):
        check("memlens: warning: %s left out: %s\n" % (os.path.join(odd, name), why) in r.stderr,
              "%s is said to be left out: %s" % (name, r.stderr.strip()))
    eq(r.stdout.replace(odd, tree), plain.stdout, "the folder's report, the odd entries left out")
    r = run(["report", "-q", odd, "--no-advisor"])
    eq(r.stderr, "", "-q: nothing said of them")
    # A tree recorded as `-o DIR/run`, without ".mlt": its root's trace is
    # DIR/run, the others DIR/run.PID.mlt. The folder's report left the root
    # out without a word (3 processes, the parent's allocations lost).
    bare = os.path.join(w, "bare")
    os.mkdir(bare)
    r = run(["run", "-q", "--follow-fork", "-o", os.path.join(bare, "run"), "--", FX])
    eq(r.returncode, 0, "memlens run -o DIR/run: exit (stderr %s)" % r.stderr.strip())
    eq(sorted(t for t in os.listdir(bare) if not t.endswith(".mlt")), ["run"], "the root's trace is DIR/run")
    bdoc = report_json([bare], os.path.join(w, "bare.json"))
    bprocs = bdoc.get("processes", [])
    eq([os.path.basename(p["trace"]) for p in bprocs][:1] + sorted(os.path.basename(p["trace"])[:4] for p in bprocs[1:]),
       ["run", "run.", "run.", "run."], "-o DIR/run: the root and its three children are reported")
    eq([p["parent_trace"] for p in bprocs[:1]], [None], "-o DIR/run: the root comes first")
    eq([(p["alloc_calls"], p["bytes_allocated"]) for p in bprocs], [(1, 500), (1, 1000), (3, 4777), (4, 9333)],
       "-o DIR/run: each process's calls and bytes (the fixture's)")
    eq((bdoc["totals"]["alloc_calls"], bdoc["totals"]["bytes_allocated"]), (9, 15610), "-o DIR/run: merged calls and bytes")
    r = run(["report", tree, os.path.join(tree, "run.mlt")])
    eq(r.returncode, 1, "a trace given twice: exit 1")
    check("given twice" in r.stderr, "a trace given twice says so: %s" % r.stderr.strip())
    r = run(["report", tree, "--folded", os.path.join(w, "x.folded")])
    eq(r.returncode, 2, "--folded of many traces: usage error")
    check("take one trace" in r.stderr, "--folded of many says why: %s" % r.stderr.strip())
    # A truncated child trace: reported with a warning; gates fail unless allowed.
    cut = os.path.join(w, "cut")
    shutil.copytree(tree, cut)
    victim = os.path.join(cut, "run.%d.mlt" % kids[3])
    size = os.path.getsize(victim)
    with open(victim, "r+b") as f:
        f.truncate(size // 3)  # inside the records' chunk (the snapshot follows it)
    r = run(["report", cut])
    eq(r.returncode, 0, "a truncated trace is reported (stderr %s)" % r.stderr.strip())
    check("truncated" in r.stderr or "cut" in r.stderr, "a truncated trace is warned about: %s" % r.stderr.strip())
    # Cut inside its first chunk, it holds no process record: no pid, no
    # start time, so it comes last, marked.
    check(re.search(r"^\s+3\s+0\s+0\s+cut short\s+0\s.*\(run\.%d\.mlt\)$" % kids[3], r.stdout, re.M),
          "the processes table marks the truncated trace: %s" % r.stdout[:800])
    r = run(["report", "-q", cut, "--max-peak", "1G"])
    eq(r.returncode, 3, "a gate on a truncated merge fails")
    check("is incomplete" in r.stderr and victim in r.stderr, "the gate names the incomplete trace: %s" % r.stderr)
    r = run(["report", "-q", cut, "--max-peak", "1G", "--allow-incomplete"])
    eq(r.returncode, 0, "--allow-incomplete lets the gate judge what the traces hold")

    # ------------------------------------------------------------------
    # Many processes alive at once: the collector reads at most 32 RSS
    # samples per 10 ms tick, so with 71 processes alive (bash and 70
    # sleeps) each is sampled at least every 10 * ceil(71 / 32) = 30 ms, and the
    # samples and the reports say so; a lone process is sampled every 10 ms.
    many = os.path.join(w, "many")
    os.mkdir(many)
    r = run(["run", "-q", "--follow-fork", "-o", os.path.join(many, "m.mlt"), "--", "bash", "-c",
             "for i in $(seq 70); do sleep 4 & done; wait"])
    eq(r.returncode, 0, "70 sleeps at once: exit (stderr %s)" % r.stderr.strip())
    root = os.path.join(many, "m.mlt")
    d = subprocess.run([MEMLENS, "dump", root], capture_output=True, text=True, timeout=300)
    intervals = sorted({int(x) for x in re.findall(r" rss rss=\d+ interval_ms=(\d+)$", d.stdout, re.M)})
    check(intervals and intervals[0] == 10 and intervals[-1] == 30,
          "the root's RSS samples say 10 ms alone and 30 ms with 71 alive: %s" % intervals)
    check(all(i in (10, 20, 30) for i in intervals), "no other interval: %s" % intervals)
    doc = report_json([root], os.path.join(w, "many.json"))
    eq(doc["totals"]["rss_sample_interval_ms"], 30, "the root's report: its longest interval")
    r = run(["report", root])
    check("sampled every 30 ms" in r.stdout, "the text report says 30 ms: %s" % r.stdout[:600])
    lone = os.path.join(w, "lone.mlt")
    r = run(["run", "-q", "-o", lone, "--", "sleep", "0.3"])
    eq(r.returncode, 0, "a lone sleep: exit")
    doc = report_json([lone], os.path.join(w, "lone.json"))
    eq(doc["totals"]["rss_sample_interval_ms"], 10, "a lone process is sampled every 10 ms")


if __name__ == "__main__":
    sys.exit(main())
