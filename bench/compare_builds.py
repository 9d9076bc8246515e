#!/usr/bin/env python3
"""Recording overhead of two memlens builds against the uninstrumented run and
heaptrack, on record_bench.py's workloads, interleaved in one session.

    bench/compare_builds.py --old /work/build-base [--new build] [--reps 5] [--only NAME,...]

Each repetition runs, in a rotating order, the program plain, under heaptrack,
under the old memlens and under the new one. Printed per workload: median wall
times and their ratios to the plain run, the time each memlens adds as a share
of the time heaptrack adds, and the program's own CPU time (user + system;
under memlens the program alone, without the collector, which runs beside it).
CPU time is the steadier number on a shared machine.

The program's CPU under memlens is read from memlens' /proc/PID/stat
(cutime + cstime: its reaped child, the program) while memlens writes the
trace after the program ended. Not part of the test run: it reports medians,
never pass/fail.
"""
import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("record_bench", os.path.join(HERE, "record_bench.py"))
rb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rb)

TICK = os.sysconf("SC_CLK_TCK")


def child_cpu_of(pid):
    """cutime + cstime of a live process, in seconds (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[13]) + int(fields[14])) / TICK  # cutime, cstime (fields 16, 17)
    except (OSError, IndexError, ValueError):
        return None


def run(argv, env, before, watch_children=False):
    """Runs argv; returns (wall s, cpu s of the process itself or, with
    watch_children, of its reaped children, exit status)."""
    if before:
        before()
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    last = None
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG if watch_children else 0)
        if pid:
            break
        v = child_cpu_of(p.pid)
        if v is not None:
            last = v
        time.sleep(0.003)
    p.returncode = status  # reaped here: keep Popen from waiting again
    wall = time.perf_counter() - t0
    cpu = last if watch_children else ru.ru_utime + ru.ru_stime
    return wall, cpu, status


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True, help="build folder of the old memlens")
    ap.add_argument("--new", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-heaptrack", action="store_true")
    args = ap.parse_args()
    builds = {"old": os.path.abspath(os.path.join(args.old, "memlens")),
              "new": os.path.abspath(os.path.join(args.new, "memlens"))}
    for b in builds.values():
        if not os.access(b, os.X_OK):
            sys.exit(f"no memlens at {b}")
    heaptrack = None if args.no_heaptrack else shutil.which("heaptrack")
    work = tempfile.mkdtemp(prefix="memlens-cmp-")
    print(f"# inputs in {work}", file=sys.stderr)
    repo = rb.prepare(work)
    only = set(filter(None, args.only.split(",")))
    rows = []
    for name, argv, extra, before in rb.workloads(work, repo):
        if only and name not in only:
            continue
        missing = not os.access(argv[0], os.X_OK)
        if missing:
            print(f"{name}: {argv[0]} is not installed; skipped")
            continue
        env = dict(os.environ, **extra)
        wall = {k: [] for k in ("plain", "ht", "old", "new")}
        cpu = {k: [] for k in ("plain", "old", "new")}
        trace = os.path.join(work, f"{name}.mlt")
        kinds = ["plain", "ht", "old", "new"] if heaptrack else ["plain", "old", "new"]
        for rep in range(args.reps):
            order = kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]
            for k in order:
                if k == "plain":
                    w, c, _ = run(argv, env, before)
                    wall[k].append(w)
                    cpu[k].append(c)
                elif k == "ht":
                    for f in os.listdir(work):
                        if f.startswith(f"{name}.ht"):
                            os.unlink(os.path.join(work, f))
                    w, _, _ = run([heaptrack, "-o", os.path.join(work, f"{name}.ht")] + argv, env, before)
                    wall[k].append(w)
                else:
                    w, c, _ = run([builds[k], "run", "-q", "-o", trace, "--"] + argv, env, before,
                                  watch_children=True)
                    wall[k].append(w)
                    if c is not None:
                        cpu[k].append(c)
                    os.unlink(trace)
        med = {k: statistics.median(v) if v else float("nan") for k, v in wall.items()}
        cmed = {k: statistics.median(v) if v else float("nan") for k, v in cpu.items()}
        rows.append((name, med, cmed))
        # Each workload's medians as soon as they are known, so that a run
        # cut short still says what it measured.
        print(f"# {name} done: wall " + " ".join(f"{k} {v:.2f}" for k, v in med.items()) +
              "; cpu " + " ".join(f"{k} {v:.2f}" for k, v in cmed.items()), file=sys.stderr)

    print(f"\nmedians of {args.reps} interleaved runs; x = wall time over the plain run;"
          " added = (memlens - plain) / (heaptrack - plain)")
    hdr = (f"{'workload':17} {'plain s':>7} {'heaptrack':>14} {'memlens old':>14} {'memlens new':>14}"
           f" {'added old':>9} {'added new':>9} {'cpu plain':>9} {'cpu old':>8} {'cpu new':>8}")
    print(hdr)
    print("-" * len(hdr))
    new_ratios = []
    for name, m, c in rows:
        def x(k):
            return f"{m[k]:6.2f} ({m[k] / m['plain']:4.2f}x)"

        def added(k):
            d = m["ht"] - m["plain"]
            return (m[k] - m["plain"]) / d if d > 0 else float("nan")

        new_ratios.append(m["new"] / m["plain"])
        print(f"{name:17} {m['plain']:7.2f} {x('ht'):>14} {x('old'):>14} {x('new'):>14}"
              f" {added('old'):9.2f} {added('new'):9.2f} {c['plain']:9.2f} {c['old']:8.2f} {c['new']:8.2f}")
    if new_ratios:
        print(f"\nmedian workload under the new memlens: {statistics.median(new_ratios):.2f}x the plain run")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
