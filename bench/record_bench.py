#!/usr/bin/env python3
"""Recording overhead of memlens against the uninstrumented run and heaptrack.

Runs allocation-heavy Debian programs (and two small C programs of its own:
200 threads, ten million tiny blocks) three ways in one session -- plain,
under `memlens run`, under `heaptrack` -- and prints a table of median wall
times and their ratios, the time memlens adds relative to the time heaptrack
adds, trace bytes per allocation call and events per second, and the peak RSS of
the collector (the `memlens` process) beside the program's own (issue 12).

    bench/record_bench.py [--build build] [--reps 3] [--only NAME,...]

Not part of the test run: these machines are shared and noisy, so it reports
medians of several runs, never pass/fail.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, **kw)


def prepare(work, bigheap=2000000):
    """Creates the inputs of every workload in `work`."""
    with open(os.path.join(work, "dicts.py"), "w") as f:
        f.write(
            "d = {}\n"
            "for i in range(300000):\n"
            "    d[str(i)] = [i, str(i * 2), (i, i + 1)]\n"
            "s = sorted(d.items(), key=lambda kv: kv[1][1])\n"
            "print(len(s))\n"
        )
    with open(os.path.join(work, "insert.sql"), "w") as f:
        f.write("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, value REAL, tag TEXT);\n")
        f.write("BEGIN;\n")
        for i in range(200000):
            f.write(f"INSERT INTO t(name, value, tag) VALUES('name-{i * 7919 % 200000}', {i * 0.5}, 'tag{i % 97}');\n")
        f.write("COMMIT;\nCREATE INDEX t_name ON t(name);\nCREATE INDEX t_tag ON t(tag, value);\n")
        f.write("SELECT count(*), sum(value) FROM t WHERE tag = 'tag5';\n")
    with open(os.path.join(work, "big.c"), "w") as f:
        for i in range(3000):
            f.write(
                f"static int func_{i}(int a,int b){{int x=a*{i}+b;for(int k=0;k<a;k++){{x+=k*b-{i};"
                f"if(x>{i}){{x-=b;}}else{{x+=a;}}}}return x;}}\n"
            )
        f.write("int main(void){int s=0;\n")
        for i in range(3000):
            f.write(f"s+=func_{i}(s,{i});\n")
        f.write("return s;}\n")
    with open(os.path.join(work, "check.c"), "w") as f:
        for i in range(400):
            f.write(
                f"int check_{i}(int *p, int n) {{ int s = 0; for (int k = 0; k <= n; k++) s += p[k];"
                f" char buf[{8 + i % 8}]; for (int k = 0; k < n; k++) buf[k] = (char)s; return s + buf[0]; }}\n"
            )
    # issue 12: many threads on one ring, and a big live heap
    with open(os.path.join(work, "threads.c"), "w") as f:
        f.write(
            "#include <pthread.h>\n#include <stdlib.h>\n"
            "static void *work(void *a) { (void)a; for (int i = 0; i < 10000; i++) {"
            " void *p = malloc(16 + (i & 255)); free(p); } return NULL; }\n"
            "int main(void) { pthread_t t[200]; for (int i = 0; i < 200; i++)"
            " pthread_create(&t[i], NULL, work, NULL);"
            " for (int i = 0; i < 200; i++) pthread_join(t[i], NULL); return 0; }\n"
        )
    sh(f"cc -O0 -pthread -o {work}/threads200 {work}/threads.c")
    # Ten million blocks of 8-15 bytes kept, then every other one freed: the
    # smallest blocks glibc makes (32 bytes each), so the collector's 20
    # bytes a live block weigh most against the program's heap.
    with open(os.path.join(work, "tiny.c"), "w") as f:
        f.write(
            "#include <stdio.h>\n#include <stdlib.h>\n"
            "__attribute__((noinline)) static void *make(size_t n) { return malloc(n); }\n"
            "int main(void) { long n = 10000000; void **v = malloc(n * sizeof *v); long s = 0;"
            " for (long i = 0; i < n; i++) v[i] = make(8 + (i & 7));"
            " for (long i = 0; i < n; i++) s += ((char *)v[i])[0] != 1;"
            " for (long i = 0; i < n; i += 2) free(v[i]);"
            " printf(\"%ld\\n\", s); return 0; }\n"
        )
    sh(f"cc -O2 -o {work}/tiny10m {work}/tiny.c")
    with open(os.path.join(work, "bigheap.py"), "w") as f:
        f.write(
            "class S:\n"
            "    __slots__ = ('a', 'b')\n"
            "    def __init__(self, a, b):\n"
            "        self.a = a\n"
            "        self.b = b\n"
            "keep = []\n"
            f"for i in range({bigheap}):\n"
            "    keep.append(((i, i + 1), 's%d' % i, S(i, -i), [i]))\n"
            "d = {}\n"
            f"for i in range({bigheap // 4}):\n"
            "    d['k%d' % i] = i\n"
            "print(len(keep), len(d))\n"
        )
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@x")
    sh("git init -q .", cwd=repo, env=env)
    for c in range(20):
        for i in range(150):
            with open(os.path.join(repo, f"f{i}.txt"), "w") as f:
                f.write("".join(f"line {j} of file {i} in commit {c} {'x' * (j % 40)}\n" for j in range(60 + c)))
        sh("git add -A && git commit -qm c", cwd=repo, env=env)
    return repo


def workloads(work, repo):
    db = os.path.join(work, "bench.db")
    return [
        # name, argv, environment additions, command run before each run
        ("python3-dicts", ["/usr/bin/python3", os.path.join(work, "dicts.py")], {"PYTHONMALLOC": "malloc"}, None),
        ("sqlite3-200k", ["/usr/bin/sqlite3", db, ".read " + os.path.join(work, "insert.sql")], {},
         lambda: os.path.exists(db) and os.unlink(db)),
        ("clang-format", ["/usr/bin/clang-format", os.path.join(work, "big.c")], {}, None),
        ("cppcheck", ["/usr/bin/cppcheck", "--quiet", "--enable=warning", os.path.join(work, "check.c")], {}, None),
        ("git-pack-objects", ["/usr/bin/git", "-C", repo, "pack-objects", "--revs", "--all", "--stdout",
                              "--threads=2"], {}, None),
        ("threads-200x10k", [os.path.join(work, "threads200")], {}, None),
        ("python3-bigheap", ["/usr/bin/python3", os.path.join(work, "bigheap.py")], {"PYTHONMALLOC": "malloc"},
         None),
        ("c-tiny-10M", [os.path.join(work, "tiny10m")], {}, None),
    ]


def vm_hwm(pid):
    """VmHWM of a running process in bytes, 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def helper_pid(root, comm):
    """The pid of a descendant of root whose name is `comm` (as
    /proc/PID/stat gives it, 15 characters at most), or None."""
    parent, name = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        r = st.rfind(")")
        name[int(d)] = st[st.find("(") + 1:r]
        parent[int(d)] = int(st[r + 2:].split()[1])
    for pid, n in name.items():
        if n != comm[:15]:
            continue
        q, hops = pid, 0
        while q in parent and q != root and hops < 16:
            q, hops = parent[q], hops + 1
        if q == root:
            return pid
    return None


def run_once(argv, env, before, out_path=None, stats=None, helper=None):
    """Runs argv; `stats`, when given, receives maxrss (wait4) and hwm (the
    process' own VmHWM, sampled every 20 ms while it runs: the program's for
    a plain run, the collector's for `memlens run`), and with `helper` (a
    process name) helper_hwm: the VmHWM of that descendant (heaptrack's
    heaptrack_interpret, which does the collector's work). /proc is listed
    only until the helper is found (1.3 ms a listing, which would take CPU
    from the run it measures); then only its status is read."""
    if before:
        before()
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    hwm = hhwm = 0
    hpid = None
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        hwm = max(hwm, vm_hwm(p.pid))
        if helper and hpid is None:
            hpid = helper_pid(p.pid, helper)
        if hpid is not None:
            hhwm = max(hhwm, vm_hwm(hpid))
        time.sleep(0.02)
    t = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if stats is not None:
        stats["maxrss"] = ru.ru_maxrss * 1024
        stats["hwm"] = hwm
        stats["helper_hwm"] = hhwm
    err.seek(0)
    return t, p.returncode, err.read().decode(errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-heaptrack", action="store_true")
    ap.add_argument("--bigheap", type=int, default=2000000,
                    help="objects of each of 4 kinds python3-bigheap keeps (then a dict of a quarter as many); "
                         "the issue's 2000000 takes over 20 minutes on a loaded 2-core machine")
    args = ap.parse_args()
    memlens = os.path.abspath(os.path.join(args.build, "memlens"))
    if not os.access(memlens, os.X_OK):
        sys.exit(f"no memlens at {memlens}: build first")
    heaptrack = shutil.which("heaptrack") if not args.no_heaptrack else None
    work = tempfile.mkdtemp(prefix="memlens-bench-")
    print(f"# inputs in {work}", file=sys.stderr)
    repo = prepare(work, args.bigheap)
    rows = []
    only = set(filter(None, args.only.split(",")))
    for name, argv, extra, before in workloads(work, repo):
        if only and name not in only:
            continue
        env = dict(os.environ, **extra)
        base, ml, ht, mls = [], [], [], []
        ml_calls = ml_bytes = ml_events = 0
        ht_calls = ht_bytes = 0
        prog_rss, coll_rss, helper_rss = [], [], []
        waits = []  # seconds the program waited on a full ring (the run's own count)
        for rep in range(args.reps):
            st = {}
            t, rc, _ = run_once(argv, env, before, stats=st)
            base.append(t)
            # The program's own VmHWM, sampled as the collector's is. wait4's
            # ru_maxrss is not it: Linux carries the high-water mark across
            # exec, so the forked child reports the largest of this script's
            # earlier children (1.7 GB for cppcheck).
            prog_rss.append(st["hwm"])
            trace = os.path.join(work, f"{name}.mlt")
            t, rc, err = run_once([memlens, "run", "-o", trace, "--"] + argv, env, before, stats=st)
            ml.append(t)
            coll_rss.append(st["hwm"])
            m = re.search(r"memlens: (\d+) allocation calls", err)
            ml_calls = int(m.group(1)) if m else 0
            waits.append(sum(float(w) for w in re.findall(r"the program waited ([0-9.]+) s in total", err)))
            ml_bytes = os.path.getsize(trace)
            # Line by line: the whole dump of a big trace is gigabytes.
            ml_events = 0
            with subprocess.Popen([memlens, "dump", trace], stdout=subprocess.PIPE) as d:
                for line in d.stdout:
                    if b" end " in line:
                        m = re.search(rb" end .* events=(\d+)", line)
                        if m:
                            ml_events = int(m.group(1))
            os.unlink(trace)
            strace = os.path.join(work, f"{name}.sampled.mlt")
            t, rc, err = run_once([memlens, "run", "--sample", "524288", "-o", strace, "--"] + argv, env, before)
            mls.append(t)
            os.unlink(strace)
            if heaptrack:
                hpath = os.path.join(work, f"{name}.ht")
                for f in os.listdir(work):
                    if f.startswith(f"{name}.ht"):
                        os.unlink(os.path.join(work, f))
                t, rc, err = run_once([heaptrack, "-o", hpath] + argv, env, before, stats=st,
                                      helper="heaptrack_interpret")
                ht.append(t)
                helper_rss.append(st["helper_hwm"])
                zst = [f for f in os.listdir(work) if f.startswith(f"{name}.ht")]
                if zst:
                    hfile = os.path.join(work, zst[0])
                    ht_bytes = os.path.getsize(hfile)
                    if rep == 0:
                        p = subprocess.run(["heaptrack_print", "-f", hfile, "-p", "0", "-a", "0", "-T", "0",
                                            "-l", "0", "-n", "0"],
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
                        m = re.search(r"calls to allocation functions: (\d+)", p)
                        ht_calls = int(m.group(1)) if m else 0
        b, m_, s_ = statistics.median(base), statistics.median(ml), statistics.median(mls)
        h = statistics.median(ht) if ht else float("nan")
        rows.append(dict(name=name, base=b, ml=m_, ht=h, sampled=s_, ml_calls=ml_calls, ht_calls=ht_calls,
                         ml_bpc=ml_bytes / ml_calls if ml_calls else float("nan"),
                         ht_bpc=ht_bytes / ht_calls if ht_calls else float("nan"),
                         mevs=ml_events / m_ / 1e6 if m_ else 0,
                         wait_s=statistics.median(waits),
                         prog_mib=statistics.median(prog_rss) / 2**20, coll_mib=statistics.median(coll_rss) / 2**20,
                         ht_mib=statistics.median(helper_rss) / 2**20 if helper_rss else float("nan")))
    # fixed cost
    tb, tm = [], []
    for _ in range(max(5, args.reps * 3)):
        t, _, _ = run_once(["/bin/true"], os.environ, None)
        tb.append(t)
        trace = os.path.join(work, "true.mlt")
        t, _, _ = run_once([memlens, "run", "-q", "-o", trace, "--", "/bin/true"], os.environ, None)
        tm.append(t)
    print(f"\nmedians of {args.reps} runs; ratios are against the uninstrumented run; prog MiB is the "
          f"program's VmHWM run alone, coll MiB the collector's VmHWM (memlens run), ht MiB that of "
          f"heaptrack_interpret (heaptrack's collector), all sampled every 20 ms; wait s is the time the "
          f"program waited on memlens' full ring (issue 12 item 1: none), from the run's own summary")
    hdr = (f"{'workload':18} {'base s':>7} {'memlens':>13} {'heaptrack':>13} {'added ml/ht':>11} "
           f"{'sampled':>8} {'wait s':>6} {'calls ml':>10} {'calls ht':>10} {'B/call ml':>9} {'B/call ht':>9} {'Mev/s':>6} "
           f"{'prog MiB':>8} {'coll MiB':>8} {'coll/prog':>9} {'ht MiB':>7} {'coll/ht':>7}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        added = (r["ml"] - r["base"]) / (r["ht"] - r["base"]) if r["ht"] == r["ht"] and r["ht"] > r["base"] else float("nan")
        print(f"{r['name']:18} {r['base']:7.2f} {r['ml']:6.2f} ({r['ml'] / r['base']:4.2f}x) "
              f"{r['ht']:6.2f} ({r['ht'] / r['base']:4.2f}x) {added:11.2f} {r['sampled'] / r['base']:7.2f}x "
              f"{r['wait_s']:6.3f} "
              f"{r['ml_calls']:10d} {r['ht_calls']:10d} {r['ml_bpc']:9.3f} {r['ht_bpc']:9.3f} {r['mevs']:6.2f} "
              f"{r['prog_mib']:8.1f} {r['coll_mib']:8.1f} {r['coll_mib'] / r['prog_mib']:9.2f} "
              f"{r['ht_mib']:7.1f} {r['coll_mib'] / r['ht_mib'] if r['ht_mib'] > 0 else float('nan'):7.2f}")
    ratios = sorted(r["ml"] / r["base"] for r in rows)
    if ratios:
        print(f"\nmedian workload under memlens: {statistics.median(ratios):.2f}x")
    print(f"/bin/true: {statistics.median(tb) * 1000:.1f} ms plain, {statistics.median(tm) * 1000:.1f} ms under "
          f"memlens (+{(statistics.median(tm) - statistics.median(tb)) * 1000:.1f} ms)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
