#!/usr/bin/python3
"""Leak kinds of memlens against valgrind memcheck and against each program's
own expectation (its "expect:" lines), for the programs of tests/leaks.

usage: compare_valgrind.py MEMLENS PROGRAM_DIR SOURCE_DIR [NAME...]
exit 0 all equal, 1 a difference, 77 valgrind is missing (skipped)."""
import json, os, re, shutil, subprocess, sys, tempfile

KINDS = ("definite", "indirect", "possible", "reachable")
VG_NAMES = {"definitely lost": "definite", "indirectly lost": "indirect",
            "possibly lost": "possible", "still reachable": "reachable"}


def any_reachable(src):
    """ "reachable: any" in the program's comment: reachable blocks are not
    compared. glibc's own blocks are reachable under memlens, which does not
    free them at exit, and freed under valgrind (__libc_freeres), in numbers
    that differ by glibc build; the lost kinds are compared all the same."""
    return re.search(r"^ \* reachable: any$", open(src).read(), re.M) is not None


def expectations(src):
    """{"": kinds, "child": kinds, "exec": {"live": (bytes, blocks)}} from the
    program's comment. "expect-exec:" is the image the program replaced by
    exec: what was live then, which is no leak of any kind."""
    out = {}
    for m in re.finditer(r"expect(-child|-exec)?: (.*)", open(src).read()):
        kinds = {}
        for k, b, n in re.findall(r"(\w+)=(\d+)/(\d+)", m.group(2)):
            kinds[k] = (int(b), int(n))
        out[(m.group(1) or "-")[1:]] = kinds
    return out


# glibc's per-thread TLS vector (dtv), allocated by pthread_create: its size
# grows with the number of modules that have TLS, and libmemlens.so and
# libunwind add two, so under memlens it is 32 bytes larger. Its kind is
# compared by block count only.
DTV = ("_dl_allocate_tls", "allocate_dtv")

# A forked child holds copies of its parent's blocks: valgrind counts them in
# the child's summary, memlens in the parent's trace only (they are the
# parent's allocations; docs/analysis.md, "Forked children"). The programs
# allocate such blocks through lk_inherited(), and the child's valgrind
# numbers are compared without them.
INHERITED = "lk_inherited"


def valgrind(prog, work):
    """{pid: (kinds, dtv_blocks, inherited_kinds)} from the loss records of
    every process; kinds include the inherited ones."""
    log = os.path.join(work, "vg.%p.log")
    subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=all", "--trace-children=yes",
                    "--errors-for-leak-kinds=none", "--log-file=" + log, prog],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, cwd=work)
    res = {}
    rec = re.compile(r"([\d,]+)(?: \(([\d,]+) direct, [\d,]+ indirect\))? bytes in ([\d,]+) blocks are "
                     r"(definitely lost|indirectly lost|possibly lost|still reachable) in loss record")
    num = lambda x: int(x.replace(",", ""))
    for f in os.listdir(work):
        m = re.match(r"vg\.(\d+)\.log$", f)
        if not m:
            continue
        text = open(os.path.join(work, f)).read()
        if "LEAK SUMMARY" not in text and "no leaks are possible" not in text:
            continue
        kinds = {k: [0, 0] for k in KINDS}
        inh = {k: [0, 0] for k in KINDS}
        dtv = {k: 0 for k in KINDS}
        # One loss record: its header line, then its "at"/"by" frames.
        for block in re.split(r"\n==\d+== \n", text):
            h = rec.search(block)
            if not h:
                continue
            kind = VG_NAMES[h.group(4)]
            if any(d in block for d in DTV):
                dtv[kind] += num(h.group(3))
                continue
            kinds[kind][0] += num(h.group(2) or h.group(1))
            kinds[kind][1] += num(h.group(3))
            if INHERITED in block:
                inh[kind][0] += num(h.group(2) or h.group(1))
                inh[kind][1] += num(h.group(3))
        res[int(m.group(1))] = ({k: tuple(v) for k, v in kinds.items()}, dtv, {k: tuple(v) for k, v in inh.items()})
    return res


def memlens(ml, prog, work):
    """[(is_child, kinds, dtv_blocks, reachability, leaks)] from every trace's JSON report."""
    out = os.path.join(work, "t.mlt")
    # (in work: the programs that die of a signal may leave a core there)
    subprocess.run([ml, "run", "-q", "--follow-fork", "-o", out, "--", prog],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, cwd=work)
    res = []
    for f in sorted(os.listdir(work)):
        if not f.endswith(".mlt"):
            continue
        r = subprocess.run([ml, "report", os.path.join(work, f), "-q", "--no-advisor", "--json", "-"],
                           capture_output=True, text=True, timeout=300)
        L = json.loads(r.stdout)["leaks"]
        kinds = {k: [L[k + "_bytes"], L[k + "_blocks"]] for k in KINDS}
        dtv = {k: 0 for k in KINDS}
        for g in L["sites"]:
            if any(any(d in (fr["function"] or "") for d in DTV) for fr in g["frames"]):
                kinds[g["kind"]][0] -= g["bytes"]
                kinds[g["kind"]][1] -= g["blocks"]
                dtv[g["kind"]] += g["blocks"]
        L["gate_check"] = gate_check(ml, os.path.join(work, f), L)
        res.append((f != "t.mlt", {k: tuple(v) for k, v in kinds.items()}, dtv, L["reachability"], L))
    return res


def gate_check(ml, trace, L):
    """--fail-on-leak judges definite + indirect + possible bytes (docs/analysis.md):
    for a trace with possibly lost blocks, the gate fails one byte under
    their sum and passes at it. The kinds themselves are compared with
    valgrind's below. Returns what went wrong, or None."""
    if not L.get("judged", True) or not L["possible_bytes"]:
        return None
    lost = L["definite_bytes"] + L["indirect_bytes"] + L["possible_bytes"]
    for limit, want in ((lost - 1, 3), (lost, 0)):
        r = subprocess.run([ml, "report", trace, "-q", "--no-advisor", "--no-symbols", "--fail-on-leak", str(limit)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
        said = "leaks (definite + indirect + possible) %d bytes" % lost
        if r.returncode != want or (want == 3 and said not in r.stderr):
            return "--fail-on-leak %d: exit %d, want %d%s (%s)" % (
                limit, r.returncode, want, " saying '%s'" % said if want == 3 else "", r.stderr.strip())
    return None


def read_limit(src):
    """The most bytes of blocks the exit scan may read ("expect-read:
    heap<=N"), or None."""
    m = re.search(r"^ \* expect-read: heap<=(\d+)", open(src).read(), re.M)
    return int(m.group(1)) if m else None


def scan_heap_bytes(ml, trace):
    """heap_bytes of the trace's reach-scan record: what the scan read of
    the blocks."""
    r = subprocess.run([ml, "dump", trace], capture_output=True, text=True, timeout=300)
    m = re.search(r" reach-scan .*\bheap_bytes=(\d+)", r.stdout)
    return int(m.group(1)) if m else None


def fmt(k):
    return " ".join("%s=%d/%d" % (n, k[n][0], k[n][1]) if k[n] is not None else "%s=any" % n for n in KINDS)


def by_process(vg, skip_reach):
    """valgrind's [(kinds, dtv_blocks)] by pid: the parent has the lower
    pid. A child's numbers leave out what it inherited, a parent's keep them."""
    res = []
    for i, p in enumerate(sorted(vg)):
        k, d, inh = vg[p]
        if i:
            k = {n: (k[n][0] - inh[n][0], k[n][1] - inh[n][1]) for n in KINDS}
        if skip_reach:
            k = dict(k, reachable=None)
            d = dict(d, reachable=None)
        res.append((k, d))
    return res


def main():
    ml, bindir, srcdir = sys.argv[1:4]
    names = sys.argv[4:] or sorted(f[:-2] for f in os.listdir(srcdir)
                                   if f.startswith("lk_") and f.endswith(".c"))
    have_vg = shutil.which("valgrind") is not None
    if not have_vg:
        print("valgrind is not installed: comparing with the programs' own numbers only")
    bad = 0
    for name in names:
        prog = os.path.join(bindir, name)
        exp = expectations(os.path.join(srcdir, name + ".c"))
        skip_reach = any_reachable(os.path.join(srcdir, name + ".c"))
        limit = read_limit(os.path.join(srcdir, name + ".c"))
        with tempfile.TemporaryDirectory() as w1, tempfile.TemporaryDirectory() as w2:
            vg = valgrind(prog, w1) if have_vg else {}
            mls = memlens(ml, prog, w2)
            read = scan_heap_bytes(ml, os.path.join(w2, "t.mlt")) if limit is not None else None
        if limit is not None:
            ok = read is not None and read <= limit
            print(("ok   " if ok else "FAIL ") + "%-13s the scan read %s bytes of blocks (at most %d)" %
                  (name, read, limit))
            bad += not ok
        vg_sorted = by_process(vg, skip_reach)
        # valgrind's verdict can vary from run to run (a thread's registers
        # at its scan): a run whose first process disagrees with the
        # program's own numbers is repeated, twice at most, and the note says
        # so. memlens' run is never repeated.
        if have_vg and "" in exp and "exec" not in exp:
            want = {k: exp[""].get(k, (0, 0)) for k in KINDS}
            if skip_reach:
                want["reachable"] = None
            for tries in range(1, 3):
                if not vg_sorted or vg_sorted[0][0] == want:
                    break
                print("note %s: valgrind said %s; running it again (%d)" % (name, fmt(vg_sorted[0][0]), tries))
                with tempfile.TemporaryDirectory() as w3:
                    vg_sorted = by_process(valgrind(prog, w3), skip_reach)
        if skip_reach:
            mls = [(c, dict(k, reachable=None), dict(d, reachable=None), h, l) for c, k, d, h, l in mls]
        if len(mls) != len(exp):
            print("FAIL %s: %d memlens traces, %d expected" % (name, len(mls), len(exp)))
            bad += 1
            continue
        if "exec" in exp:
            # The image exec replaced: valgrind has no summary for it, and
            # memlens judges nothing (what was live is counted, no kind).
            _, kinds, _, how, L = mls.pop([m[0] for m in mls].index(False))
            live = exp["exec"]["live"]
            got = (L["bytes"], L["blocks"])
            ok = (L.get("judged") is False and got == live and L["lost_bytes"] == 0 and L["gate_bytes"] == 0
                  and not L["sites"] and all(v == (0, 0) for v in kinds.values()))
            msgs = [] if ok else ["the program says live=%d/%d, not judged, no kind" % live]
            if have_vg and len(vg_sorted) != len(mls):
                msgs.append("valgrind wrote %d summaries for %d processes that exited" % (len(vg_sorted), len(mls)))
                ok = False
            print(("ok   " if ok else "FAIL ") + "%-13s %-6s live=%d/%d judged=%s lost=%d kinds %s" %
                  (name, "exec", got[0], got[1], L.get("judged"), L["lost_bytes"], fmt(kinds)))
            for m in msgs:
                print("       " + m)
            bad += not ok
            mls = [(True, k, d, h, l) for _, k, d, h, l in mls]  # the program after the exec
        for child, kinds, dtv, how, L in mls:
            want = exp["child" if child else ""]
            want = {k: want.get(k, (0, 0)) for k in KINDS}
            if skip_reach:
                want["reachable"] = None
            line = "%-13s %-6s %s (%s)" % (name, "child" if child else "", fmt(kinds), how)
            if any(dtv.values()):
                line += " + glibc dtv blocks %s" % dtv
            ok = kinds == want and how == "scanned" and not L["gate_check"]
            msgs = []
            if kinds != want:
                msgs.append("the program says %s" % fmt(want))
            if L["gate_check"]:
                msgs.append(L["gate_check"])
            if have_vg:
                if len(vg_sorted) != len(mls):
                    msgs.append("valgrind ran %d processes" % len(vg_sorted))
                    ok = False
                elif vg_sorted[1 if child and len(vg_sorted) > 1 else 0] != (kinds, dtv):
                    vk, vd = vg_sorted[1 if child and len(vg_sorted) > 1 else 0]
                    msgs.append("valgrind says %s + glibc dtv blocks %s" % (fmt(vk), vd))
                    ok = False
            print(("ok   " if ok else "FAIL ") + line)
            for m in msgs:
                print("       " + m)
            bad += not ok
    print("%d difference(s)" % bad)
    if bad:
        return 1
    if not have_vg:
        print("SKIP: valgrind is not installed (the programs' own numbers were checked)")
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
