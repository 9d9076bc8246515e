#!/usr/bin/env python3
"""`memlens report` against `heaptrack_print` on traces of real programs.

Records each workload of bench/record_bench.py (cppcheck, python3, sqlite3,
clang-format, git pack-objects: the same programs, inputs and environment)
once under `memlens run` and once under `heaptrack`, then times the analyses
of those traces, interleaved run by run so that the machine's noise falls on
every column alike:

- `memlens report TRACE --no-advisor --json OUT` of every build given with
  --build (the analysis heaptrack_print's job compares to: symbols, peak,
  leaks with kinds, fragmentation, flame tree, JSON);
- `heaptrack_print -f TRACE` with its defaults.

It prints median CPU time (user + sys, from wait4) and wall time per tool,
the largest peak RSS, and heaptrack_print's CPU time divided by each
build's. Not part of ctest: timings are reported, never judged.

    bench/report_bench_real.py [--build [LABEL=]DIR]... [--runs 5] [--only NAME,...]
                               [--keep DIR]

The traces are recorded with the first build. --keep DIR keeps the traces
(and reuses them when they are there already).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import record_bench  # noqa: E402  (the workloads: one definition for both benches)


def timed(argv, env=None):
    """Runs argv; returns (wall_s, cpu_s, maxrss_kib). Fails loudly."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"report_bench_real: failed ({p.returncode}): {' '.join(argv)}\n{err.decode(errors='replace')}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def record(work, keep, name, argv, extra, before, memlens):
    env = dict(os.environ, **extra)
    mlt = os.path.join(keep or work, f"{name}.mlt")
    ht = os.path.join(keep or work, f"{name}.heaptrack.zst")
    if not (keep and os.path.exists(mlt)):
        if before:
            before()
        subprocess.run([memlens, "run", "-q", "-o", mlt, "--"] + argv, env=env, check=False,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not (keep and os.path.exists(ht)):
        if before:
            before()
        base = os.path.join(keep or work, f"{name}.heaptrack")
        subprocess.run(["heaptrack", "-o", base] + argv, env=env, check=False, cwd=work,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        made = [f for f in os.listdir(keep or work) if f.startswith(f"{name}.heaptrack.")]
        if not made:
            sys.exit(f"report_bench_real: heaptrack wrote no trace for {name}")
        if made[0] != os.path.basename(ht):
            os.rename(os.path.join(keep or work, made[0]), ht)
    return mlt, ht


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="append", default=[],
                    help="[LABEL=]DIR of a memlens build (repeatable; default: build)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--keep", default="")
    args = ap.parse_args()
    builds = []
    for b in args.build or [os.path.join(HERE, "..", "build")]:
        label, _, path = b.rpartition("=")
        path = os.path.abspath(path)
        if not os.access(os.path.join(path, "memlens"), os.X_OK):
            sys.exit(f"report_bench_real: no memlens in {path} (build first)")
        builds.append((label or os.path.basename(path.rstrip("/")), os.path.join(path, "memlens")))
    for tool in ("heaptrack", "heaptrack_print"):
        if not shutil.which(tool):
            sys.exit(f"report_bench_real: {tool} is not installed")
    work = tempfile.mkdtemp(prefix="memlens-report-real-")
    keep = os.path.abspath(args.keep) if args.keep else ""
    if keep:
        os.makedirs(keep, exist_ok=True)
    only = set(filter(None, args.only.split(",")))
    try:
        repo = record_bench.prepare(work)
        rows = []
        for name, argv, extra, before in record_bench.workloads(work, repo):
            if only and name not in only:
                continue
            mlt, ht = record(work, keep, name, argv, extra, before, builds[0][1])
            out = os.path.join(work, "r.json")
            tools = [(label, [ml, "report", mlt, "--no-advisor", "--json", out, "-q"]) for label, ml in builds]
            tools.append(("heaptrack_print", ["heaptrack_print", "-f", ht]))
            res = {label: [] for label, _ in tools}
            for _ in range(args.runs):
                for label, cmd in tools:
                    res[label].append(timed(cmd))
            ht_cpu = statistics.median(r[1] for r in res["heaptrack_print"])
            for label, _ in tools:
                wall = statistics.median(r[0] for r in res[label])
                cpu = statistics.median(r[1] for r in res[label])
                rss = max(r[2] for r in res[label]) / 1024
                rows.append((name, label, wall, cpu, rss, ht_cpu / cpu if cpu else float("nan")))
        print(f"\nmedians of {args.runs} interleaved runs; cpu = user + sys (wait4)")
        hdr = f"{'workload':18} {'tool':18} {'wall s':>8} {'cpu s':>8} {'peak RSS MiB':>13} {'ht_print cpu / cpu':>19}"
        print(hdr)
        print("-" * len(hdr))
        for name, label, wall, cpu, rss, x in rows:
            print(f"{name:18} {label:18} {wall:8.3f} {cpu:8.3f} {rss:13.1f} {x:18.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
