#!/usr/bin/python3
"""test_backlog.py BUILD_DIR - the collector's backlog (collector/drain.c).

fx_burst makes 400,000 malloc/free pairs as fast as it can, loading a
library in the middle (its module record is a blob of several slots). Recorded with the smallest
ring (1,024 slots), the collector cannot decode as fast, and copies events
aside as the ring fills: the run says so. Recorded with a ring of 2 M slots
(64 MiB in /dev/shm), more than twice the run's 801,000 or so events, it
cannot. Both runs are made without address randomization, so the
program allocates the same addresses: the two traces must hold the same
allocation, free, stack and module records in the same order (the backlog
changes when events are decoded, never which or in what order), and both
reports the fixture's ground truth.
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
from e2e_checks import check, eq, failures  # noqa: E402

B = os.path.realpath(sys.argv[1])
MEMLENS = os.path.join(B, "memlens")
FX = os.path.join(B, "fx_burst")

ROUNDS, PER_ROUND, KEEP = 8, 50000, 1000


def record(w, name, slots):
    out = os.path.join(w, name + ".mlt")
    env = dict(os.environ, ML_RING_SLOTS=str(slots))
    r = subprocess.run(["setarch", "-R", MEMLENS, "run", "-o", out, "--", FX], capture_output=True, text=True,
                       timeout=300, env=env)
    eq(r.returncode, 0, "%s: memlens run (stderr %s)" % (name, r.stderr.strip()))
    return out, r.stderr


# The records the program's own calls make, without the time and the
# collector's own records (RSS samples, glibc counters, the end): the
# record name and its fields.
KEPT = re.compile(r"^\S+ t\d+ (alloc|free|node|module|module_unload|thread) ")


def program_records(trace):
    """The records, each address numbered in the order it first appears:
    the rings' sizes differ, so do the addresses of what is mapped after
    them (the big block, libz and its code)."""
    r = subprocess.run([MEMLENS, "dump", trace], capture_output=True, text=True, timeout=300)
    eq(r.returncode, 0, "dump %s" % trace)
    out, ids = [], {}

    def number(m):
        return "%s=#%d" % (m.group(1), ids.setdefault(m.group(2), len(ids)))

    for line in r.stdout.splitlines():
        if KEPT.match(line):
            line = re.sub(r" tid=\d+", "", line.split(" ", 1)[1])  # the thread's id is the run's
            out.append(re.sub(r"\b(ptr|base|pc)=(0x[0-9a-f]+)", number, line))
    return out


def site_calls(trace, w):
    j_path = os.path.join(w, os.path.basename(trace) + ".json")
    r = subprocess.run([MEMLENS, "report", "-q", "--no-advisor", trace, "--json", j_path], capture_output=True,
                       text=True, timeout=300)
    eq(r.returncode, 0, "report %s (stderr %s)" % (trace, r.stderr.strip()))
    with open(j_path) as f:
        j = json.load(f)
    calls = {}
    for s in j["sites"]:
        f0 = s["frames"][0]["function"] if s["frames"] else None
        calls[f0] = calls.get(f0, 0) + s["alloc_calls"]
    return j, calls


def main():
    w = tempfile.mkdtemp(prefix="ml_backlog.")
    try:
        small, err_small = record(w, "small", 1024)
        # 2 M slots: more than twice the run's events, so never half full
        large, err_large = record(w, "large", 2 << 20)
        check("the collector set up to" in err_small,
              "the small ring's run says the collector set events aside: %s" % err_small.strip())
        check("the collector set up to" not in err_large,
              "the large ring's run sets nothing aside: %s" % err_large.strip())
        a, b = program_records(small), program_records(large)
        check(len(a) > 2 * ROUNDS * PER_ROUND, "the small ring's trace holds the burst: %d records" % len(a))
        if a != b:
            i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
            check(False, "same records in the same order: the first difference is record %d of %d/%d: %r "
                  "against %r" % (i, len(a), len(b), a[i] if i < len(a) else None, b[i] if i < len(b) else None))
        check(any(" module " in x and "libz.so.1" in x for x in a),
              "the small ring's trace has the module record of the library loaded mid-burst")
        for trace in (small, large):
            j, calls = site_calls(trace, w)
            name = os.path.basename(trace)
            eq(calls.get("burst"), ROUNDS * PER_ROUND, "%s: burst's allocation calls" % name)
            eq(calls.get("keep"), KEEP, "%s: keep's allocation calls" % name)
            eq(j["trace"]["lost_events"], 0, "%s: no lost event" % name)
            L = j["leaks"]
            eq(L["reachable_blocks"] >= KEEP, True, "%s: keep's blocks are live at exit" % name)
    finally:
        if os.environ.get("ML_KEEP_TEST_FILES") != "1":
            shutil.rmtree(w, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
