"""What test_rust_sites.py, test_fortran_sites.py and test_ada_sites.py share:
valgrind as the oracle of lost blocks, the JSON report and its sites by
headline, and the command line (MEMLENS PROGRAM..., exit 77
without valgrind, 1 when any program had a problem)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def valgrind_lost(program, work):
    """(definite bytes, blocks, indirect bytes, blocks) from valgrind's
    summary, or None when it printed none."""
    err = subprocess.run(["valgrind", "--leak-check=full", program], capture_output=True,
                         text=True, cwd=work, timeout=300).stderr
    got = [re.search(rf"{kind} lost: ([\d,]+) bytes in ([\d,]+) blocks", err)
           for kind in ("definitely", "indirectly")]
    if not all(got):
        return None
    return tuple(int(x.replace(",", "")) for m in got for x in m.groups())


def report(memlens, trace, out, *extra):
    """`memlens report TRACE --json OUT EXTRA...` (no advisor), loaded."""
    subprocess.run([memlens, "report", trace, "-q", "--no-advisor", "--json", out] + list(extra),
                   check=True)
    with open(out) as f:
        return json.load(f)


def headline_table(doc, source):
    """{(headline function, line): (calls, bytes, leaked bytes, definite
    bytes)} over the sites whose headline frame is in a file ending with
    SOURCE (sites of one headline summed)."""
    rows = {}
    for s in doc["sites"]:
        h = s["frames"][s.get("headline", 0)]
        if (h.get("file") or "").endswith(source):
            row = rows.setdefault((h["function"], h["line"]), [0, 0, 0, 0])
            for k, v in enumerate((s["alloc_calls"], s["bytes_allocated"], s["leaked_bytes"],
                                   s["leaked_by_kind"]["definite"])):
                row[k] += v
    return {k: tuple(v) for k, v in rows.items()}


def record_and_compare(memlens, program, work, source, want):
    """Records PROGRAM, reports it, and compares its headline table (sites in
    files ending with SOURCE) with WANT. Returns (trace, doc, problems)."""
    trace = os.path.join(work, os.path.basename(program) + ".mlt")
    subprocess.run([memlens, "run", "-q", "-o", trace, "--", program], check=True,
                   stdout=subprocess.DEVNULL)
    doc = report(memlens, trace, trace + ".json")
    got = headline_table(doc, source)
    fails = [f"site {key[0]} :{key[1]}: want {w}, got {got.get(key)}"
             for key, w in want.items() if got.get(key) != w]
    return trace, doc, fails


def lost_and_suppressed(memlens, program, trace, work, doc, patterns, want):
    """The problems of a report DOC of TRACE: its definite and indirect
    leaks against valgrind's on PROGRAM, and each `leak:PATTERN` of
    PATTERNS not suppressing WANT (bytes, blocks)."""
    fails = []
    lk = doc["leaks"]
    mine = (lk["definite_bytes"], lk["definite_blocks"], lk["indirect_bytes"], lk["indirect_blocks"])
    theirs = valgrind_lost(program, work)
    if mine != theirs:
        fails.append(f"lost (definite bytes, blocks, indirect bytes, blocks): memlens {mine}, valgrind {theirs}")
    supp = trace + ".supp"
    for pattern in patterns:
        with open(supp, "w") as f:
            f.write(f"leak:{pattern}\n")
        sup = report(memlens, trace, trace + ".supp.json", "--suppressions", supp)["leaks"]
        if (sup["suppressed_bytes"], sup["suppressed_blocks"]) != want:
            fails.append(f"leak:{pattern} suppressed {sup['suppressed_bytes']} bytes in "
                         f"{sup['suppressed_blocks']} blocks, not {want[0]} in {want[1]}")
    return fails


def run(doc, prefix, check):
    """check(memlens, program, work) -> the number of problems, for each
    PROGRAM of the command line, in a scratch folder."""
    if len(sys.argv) < 3:
        sys.exit(doc)
    if not shutil.which("valgrind"):
        print("SKIP: valgrind is not installed")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        bad = sum(check(sys.argv[1], p, work) for p in sys.argv[2:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if bad else 0)
