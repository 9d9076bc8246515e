#!/usr/bin/python3
"""Leak kinds of memlens against valgrind memcheck and against each program's
own expectation (its "expect:" lines), for the programs of tests/leaks.

usage: compare_valgrind.py MEMLENS PROGRAM_DIR SOURCE_DIR [NAME...]
exit 0 all equal, 1 a difference, 77 valgrind is missing (skipped)."""
import json, os, re, shutil, subprocess, sys, tempfile

KINDS = ("definite", "indirect", "possible", "reachable")
VG_NAMES = {"definitely lost": "definite", "indirectly lost": "indirect",
            "possibly lost": "possible", "still reachable": "reachable"}


def expectations(src):
    """{"": kinds, "child": kinds} from the program's comment."""
    out = {}
    for m in re.finditer(r"expect(-child)?: (.*)", open(src).read()):
        kinds = {}
        for k, b, n in re.findall(r"(\w+)=(\d+)/(\d+)", m.group(2)):
            kinds[k] = (int(b), int(n))
        out["child" if m.group(1) else ""] = kinds
    return out


def valgrind(prog, work):
    """{pid: kinds} from the LEAK SUMMARY of every process valgrind ran."""
    log = os.path.join(work, "vg.%p.log")
    subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=all",
                    "--errors-for-leak-kinds=none", "--log-file=" + log, prog],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    res = {}
    for f in os.listdir(work):
        m = re.match(r"vg\.(\d+)\.log$", f)
        if not m:
            continue
        text = open(os.path.join(work, f)).read()
        kinds = {k: (0, 0) for k in KINDS}
        for name, b, n in re.findall(r"(definitely lost|indirectly lost|possibly lost|still reachable): "
                                     r"([\d,]+) bytes in ([\d,]+) blocks", text):
            kinds[VG_NAMES[name]] = (int(b.replace(",", "")), int(n.replace(",", "")))
        if "LEAK SUMMARY" in text or "no leaks are possible" in text:
            res[int(m.group(1))] = kinds
    return res


def memlens(ml, prog, work):
    """[(pid, is_child, kinds)] from memlens report --json of every trace."""
    out = os.path.join(work, "t.mlt")
    subprocess.run([ml, "run", "-q", "--follow-fork", "-o", out, "--", prog],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    res = []
    for f in sorted(os.listdir(work)):
        if not f.endswith(".mlt"):
            continue
        r = subprocess.run([ml, "report", os.path.join(work, f), "-q", "--no-advisor", "--json", "-"], capture_output=True,
                           text=True, timeout=300)
        doc = json.loads(r.stdout)
        L = doc["leaks"]
        kinds = {k: (L[k + "_bytes"], L[k + "_blocks"]) for k in KINDS}
        res.append((doc["process"]["pid"], f != "t.mlt", kinds, L["reachability"]))
    return res


def fmt(k):
    return " ".join("%s=%d/%d" % (n, k[n][0], k[n][1]) for n in KINDS)


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
        with tempfile.TemporaryDirectory() as w1, tempfile.TemporaryDirectory() as w2:
            vg = valgrind(prog, w1) if have_vg else {}
            mls = memlens(ml, prog, w2)
        vg_sorted = [vg[p] for p in sorted(vg)]  # the parent has the lower pid here
        if len(mls) != len(exp):
            print("FAIL %s: %d memlens traces, %d expected" % (name, len(mls), len(exp)))
            bad += 1
            continue
        for i, (pid, child, kinds, how) in enumerate(mls):
            want = exp["child" if child else ""]
            want = {k: want.get(k, (0, 0)) for k in KINDS}
            line = "%-13s %-6s memlens   %s (%s)" % (name, "child" if child else "", fmt(kinds), how)
            ok = kinds == want and how == "scanned"
            msgs = []
            if kinds != want:
                msgs.append("program says %s" % fmt(want))
            if have_vg:
                if len(vg_sorted) != len(mls):
                    msgs.append("valgrind ran %d processes" % len(vg_sorted))
                    ok = False
                elif vg_sorted[1 if child else 0] != kinds:
                    msgs.append("valgrind  %s" % fmt(vg_sorted[1 if child else 0]))
                    ok = False
            print(("ok   " if ok else "FAIL ") + line)
            for m in msgs:
                print("       " + m)
            bad += not ok
    print("%d difference(s)" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
