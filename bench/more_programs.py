#!/usr/bin/env python3
"""Recording overhead on programs outside bench/record_bench.py.

record_bench.py measures the issue's workloads (python3, sqlite3,
clang-format, cppcheck, git pack-objects, 200 threads, the big heap). This
script runs eight other everyday programs, each allocating in its own way,
three ways in one session -- plain, under `memlens run`, under `heaptrack` --
interleaved run by run, and prints median wall times, their ratios and the
time memlens adds as a share of the time heaptrack adds (issue 12, item 6:
at most 0.5 on every workload, at most 1.5x plain on the median one).

    bench/more_programs.py [--build build] [--reps 3] [--only NAME,...]

Programs that are not installed are skipped (node, tclsh, xz). Not part of
the test run: medians of noisy runs, never pass/fail.
"""
import argparse
import glob
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def prepare(work):
    """The inputs: 400 k random words, and one script per interpreter that
    fills a large hash table (or list of records) and walks it."""
    rnd = random.Random(1)
    with open(os.path.join(work, "words.txt"), "w") as f:
        for _ in range(400000):
            f.write("".join(rnd.choice("abcdefghij") for _ in range(rnd.randint(3, 12))) + "\n")
    scripts = {
        "j.py": "import json\n"
                "d = [{'a': i, 'b': str(i) * 3, 'c': [i, i + 1, {'x': 'y' * (i % 50)}]} for i in range(150000)]\n"
                "s = json.dumps(d)\ne = json.loads(s)\nprint(len(s), len(e))\n",
        "p.pl": 'my %h; for my $i (1..300000) { $h{"k$i"} = [ $i, "v" x ($i % 40) ]; }\n'
                'my $n = 0; for my $k (keys %h) { $n += length($h{$k}[1]); } print "$n\\n";\n',
        "t.tcl": "set d [dict create]\n"
                 "for {set i 0} {$i < 200000} {incr i} { dict set d k$i [list $i [string repeat x [expr {$i % 30}]]] }\n"
                 "puts [dict size $d]\n",
        "n.js": "let m = new Map();\n"
                "for (let i = 0; i < 300000; i++) m.set('k' + i, {v: i, s: 'x'.repeat(i % 40)});\n"
                "console.log(JSON.stringify([...m]).length);\n",
    }
    for name, text in scripts.items():
        with open(os.path.join(work, name), "w") as f:
            f.write(text)


def workloads(work):
    w = lambda n: os.path.join(work, n)
    repo = os.path.abspath(os.path.join(HERE, ".."))
    return [
        ("sort", ["sort", w("words.txt"), "-o", w("sorted.txt")]),
        ("python3-json", ["python3", w("j.py")]),
        ("perl-hash", ["perl", w("p.pl")]),
        ("tclsh-dict", ["tclsh", w("t.tcl")]),
        ("node-map", ["node", w("n.js")]),
        ("xz", ["xz", "-6", "-T1", "-k", "-f", w("words.txt")]),
        ("git-log-p", ["git", "-C", repo, "log", "-p", "-n", "300", "--stat"]),
        ("find", ["find", "/usr/share", "-name", "*.py"]),
    ]


def timed(argv, cwd):
    t = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, check=False)
    return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    ml = os.path.join(os.path.abspath(args.build), "memlens")
    if not os.access(ml, os.X_OK):
        sys.exit(f"more_programs: no memlens in {args.build}")
    if not shutil.which("heaptrack"):
        sys.exit("more_programs: heaptrack is not installed")
    only = set(filter(None, args.only.split(",")))
    work = tempfile.mkdtemp(prefix="memlens-more-")
    env = dict(os.environ, PERL_HASH_SEED="0", PERL_PERTURB_KEYS="0")
    os.environ.update(env)
    try:
        prepare(work)
        print(f"medians of {args.reps} interleaved runs (wall seconds)")
        hdr = (f"{'workload':14} {'plain':>7} {'memlens':>8} {'heaptrack':>9} {'ml/plain':>8} "
               f"{'ht/plain':>8} {'added ml/ht':>11}")
        print(hdr)
        print("-" * len(hdr))
        ratios = []
        for name, argv in workloads(work):
            if only and name not in only:
                continue
            if not shutil.which(argv[0]):
                print(f"{name:14} skipped: {argv[0]} is not installed")
                continue
            p, m, h = [], [], []
            for _ in range(args.reps):
                p.append(timed(argv, work))
                m.append(timed([ml, "run", "-q", "-o", os.path.join(work, "t.mlt"), "--"] + argv, work))
                for f in glob.glob(os.path.join(work, "ht.*")):
                    os.unlink(f)
                h.append(timed(["heaptrack", "-o", os.path.join(work, "ht")] + argv, work))
            P, M, H = map(statistics.median, (p, m, h))
            added = (M - P) / (H - P) if H - P > 0.02 else float("nan")
            ratios.append(M / P)
            print(f"{name:14} {P:7.2f} {M:8.2f} {H:9.2f} {M / P:8.2f} {H / P:8.2f} {added:11.2f}", flush=True)
        if ratios:
            print(f"median workload: memlens {statistics.median(ratios):.2f}x plain "
                  "(added ml/ht is nan where heaptrack adds under 20 ms)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
