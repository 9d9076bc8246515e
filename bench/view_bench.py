#!/usr/bin/env python3
"""`memlens view` in a real terminal (tmux), build against build.

For each trace and each build, interleaved run by run, starts
`memlens view TRACE` in a detached tmux window of 120x40 and reads the
screen every 50 ms:

- first screen: the bottom bar is drawn;
- final data: the title says how the program ended and no "loading" is left
  (a trace opened from its analysis snapshot shows it on the first screen; a
  replay load after reading every record);
- time travel: after `4` (the Timeline), no "building the history" line and
  no "loading" is left: the history is complete, or skipped, and the line
  that says so is printed;

and samples the viewer's VmHWM (/proc/PID/status) until then, and its VmRSS
at that point (what it holds once the background replay is over). Prints
the median of each per build and trace. Timings are reported, never judged
(not part of ctest).

    bench/view_bench.py --build OLD=DIR --build NEW=DIR [--runs 3] TRACE...
                        [-- VIEW-ARGS...]

The viewer never writes the trace; still, give it copies.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def tmux(*args):
    return subprocess.run(["tmux"] + list(args), capture_output=True, text=True).stdout


def status_kb(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def one(memlens, trace, extra, limit):
    name = "mlvb%d" % os.getpid()
    t0 = time.time()
    tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40",
         "%s view %s %s; sleep 60" % (memlens, " ".join(extra), trace))
    comm = os.path.basename(memlens)[:15]
    pid = None
    first = final = travel = None
    note = ""
    hwm = rss = 0
    sent = False
    try:
        while time.time() - t0 < limit:
            if pid is None:
                shell = tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip()
                kids = subprocess.run(["pgrep", "-P", shell], capture_output=True,
                                      text=True).stdout.split()
                for k in kids:
                    try:
                        if open("/proc/%s/comm" % k).read().strip() == comm:
                            pid = int(k)
                    except OSError:
                        pass
            screen = tmux("capture-pane", "-p", "-t", name)
            now = time.time() - t0
            if pid:
                hwm = max(hwm, status_kb(pid, "VmHWM"))
            if first is None and "1Summary" in screen:
                first = now
            if final is None and "loading" not in screen and (
                    "exited" in screen or "signal" in screen or "ended" in screen):
                final = now
            if final is not None and not sent:
                tmux("send-keys", "-t", name, "4")
                sent = True
            elif sent and "Timeline" in screen and "building the history" not in screen \
                    and "loading" not in screen:
                travel = now
                note = " ".join(l.strip() for l in screen.splitlines() if "Time travel" in l)
                break
            time.sleep(0.05)
        if pid:
            hwm = max(hwm, status_kb(pid, "VmHWM"))
            rss = status_kb(pid, "VmRSS")
    finally:
        tmux("send-keys", "-t", name, "q")
        time.sleep(0.3)
        tmux("kill-session", "-t", name)
    return first, final, travel, hwm / 1024, rss / 1024, note


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", required=True, help="LABEL=DIR")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", type=float, default=300, help="seconds per run at most")
    ap.add_argument("traces", nargs="+")
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    a = ap.parse_args(argv)
    builds = []
    for b in a.build:
        label, _, d = b.rpartition("=")
        builds.append((label or d, os.path.join(d, "memlens")))
    for trace in a.traces:
        res = {label: [] for label, _ in builds}
        for _ in range(a.runs):
            for label, exe in builds:
                res[label].append(one(exe, trace, extra, a.limit))
        print("%s (tmux 120x40, median of %d)" % (trace, a.runs))
        print("| build | first screen | final data | time travel done | VmHWM | VmRSS after |")
        print("|---|---|---|---|---|---|")
        for label, _ in builds:
            r = res[label]

            def med(i, fmt):
                v = [x[i] for x in r if x[i] is not None]
                return fmt % statistics.median(v) if v else "-"
            print("| %s | %s | %s | %s | %s | %s |" % (
                label, med(0, "%.2f s"), med(1, "%.2f s"), med(2, "%.2f s"),
                med(3, "%.0f MiB"), med(4, "%.0f MiB")))
        for label, _ in builds:
            notes = sorted(set(x[5] for x in res[label] if x[5]))
            for n in notes:
                print("  %s: %s" % (label, n))
        print()


if __name__ == "__main__":
    main()
