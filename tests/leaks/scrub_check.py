#!/usr/bin/python3
"""memlens' allocation hooks leave no copy of a returned pointer in dead stack
memory (issue 13, item 1): scrub_probe counts the copies an allocation leaves
below its caller's stack pointer, first without memlens (what the C library
itself leaves), then under `memlens run` with each unwinder. memlens must not
add any: every count under memlens is at most the count without it.

usage: scrub_check.py MEMLENS PROBE
exit 0 no copy added, 1 a copy added (or the probe failed)."""
import os, re, subprocess, sys, tempfile

NAMES = ("malloc", "calloc", "realloc", "new")


def counts(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    got = dict((m.group(1), int(m.group(2)))
               for m in re.finditer(r"^(\w+) copies=(\d+)$", r.stdout, re.M))
    if r.returncode != 0 or set(got) != set(NAMES):
        sys.exit("FAIL: %s: exit %d, output %r, stderr %r" % (" ".join(cmd), r.returncode, r.stdout,
                                                               r.stderr[-2000:]))
    return got


def main():
    memlens, probe = sys.argv[1], sys.argv[2]
    native = counts([probe])
    print("without memlens:", " ".join("%s=%d" % (n, native[n]) for n in NAMES))
    bad = 0
    with tempfile.TemporaryDirectory() as work:
        for unwind in ("libunwind", "fp"):
            trace = os.path.join(work, "probe-%s.mlt" % unwind)
            got = counts([memlens, "run", "-o", trace, "--unwind", unwind, "--", probe])
            print("memlens --unwind %-9s" % unwind + ":", " ".join("%s=%d" % (n, got[n]) for n in NAMES))
            for n in NAMES:
                if got[n] > native[n]:
                    print("FAIL: %s under memlens --unwind %s leaves %d copies of the pointer, "
                          "%d without memlens" % (n, unwind, got[n], native[n]))
                    bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main())
