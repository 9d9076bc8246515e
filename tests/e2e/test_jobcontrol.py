#!/usr/bin/python3
"""test_jobcontrol.py BUILD_DIR - `memlens run` under a shell's job control.

The shell that starts `memlens run` waits on memlens, not on the program,
so memlens must follow the program's stops (docs/recorder.md, "Job
control"):
- a program that stops itself (SIGTSTP, as ssh's ~^Z or a shell's
  `suspend`) stops memlens too, with the same signal; continuing memlens
  alone continues the program, and continuing the program alone (a
  debugger) continues memlens; before, memlens kept waiting and the
  terminal stayed with the stopped program;
- SIGTSTP sent to memlens' pid by another process (`kill -TSTP`) reaches
  the program; before, memlens stopped and the program ran on;
- closing the terminal sends SIGHUP twice, from the terminal and from the
  shell: one request, so a program that exits 7 on a hang-up ends "exited
  7" in its trace; before, the second copy stopped the wait and the trace
  read "still running".
Each scenario runs memlens in a process group (or a session) of its own,
as a shell's job. Exit 0 when every check passed, 1 otherwise.
"""
import json
import os
import pty
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from e2e_checks import check, eq, failures  # noqa: E402

B = os.path.realpath(sys.argv[1])
MEMLENS = os.path.join(B, "memlens")


def state(pid):
    """The process' state letter (R, S, T...), or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def children(pid):
    """The program memlens runs: its children, less the watcher memlens
    forks while it is stopped (docs/recorder.md, "Job control")."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return []
    def comm(k):
        try:
            with open("/proc/%d/comm" % k) as f:
                return f.read().strip()
        except OSError:
            return ""
    return [k for k in kids if comm(k) != "memlens"]


def wait_stopped(pid, timeout=20.0):
    """waitpid(WUNTRACED) until pid stops or ends: ('stopped', sig), ('ended', status) or None."""
    end = time.time() + timeout
    while time.time() < end:
        p, st = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
        if p == pid and os.WIFSTOPPED(st):
            return ("stopped", os.WSTOPSIG(st))
        if p == pid:
            return ("ended", st)
        time.sleep(0.01)
    return None


def finish(pid, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        p, st = os.waitpid(pid, os.WNOHANG)
        if p == pid:
            return st
        time.sleep(0.02)
    os.killpg(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def report(trace):
    r = subprocess.run([MEMLENS, "report", trace, "-q", "--no-advisor", "--json", "-"], capture_output=True,
                       text=True, timeout=120)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def self_stop(w):
    trace = os.path.join(w, "selfstop.mlt")
    out = os.path.join(w, "selfstop.out")
    with open(out, "w") as o:
        p = subprocess.Popen([MEMLENS, "run", "-q", "-o", trace, "--", "/bin/sh", "-c",
                              "kill -TSTP $$; echo resumed"], stdout=o, stderr=subprocess.DEVNULL,
                             process_group=0)
    got = wait_stopped(p.pid)
    eq(got, ("stopped", signal.SIGTSTP), "a program that stops itself: memlens stops too, with SIGTSTP")
    kids = children(p.pid)
    eq([state(k) for k in kids], ["T"], "... while the program is stopped")
    # Only memlens is continued (kill -CONT of the job's pid): the program too.
    os.kill(p.pid, signal.SIGCONT)
    st = finish(p.pid)
    check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "... continued, both end: status %r" % st)
    eq(open(out).read(), "resumed\n", "... and the program ran on")
    d = report(trace)
    eq((d.get("process", {}).get("end"), d.get("process", {}).get("exit_code")), ("exited", 0),
       "... and its trace ends with its exit")


def continued_by_pid(w):
    """A program that stops itself (SIGSTOP, as one waiting for a debugger
    does) and is continued by its pid alone: memlens, stopped with it, is
    continued too, and ends with it."""
    out = os.path.join(w, "bypid.out")
    with open(out, "w") as o:
        p = subprocess.Popen([MEMLENS, "run", "-q", "-o", os.path.join(w, "bypid.mlt"), "--", "/bin/sh", "-c",
                              "(sleep 1; kill -CONT $$) & kill -STOP $$; wait; echo resumed"], stdout=o,
                             stderr=subprocess.DEVNULL, process_group=0)
    st = finish(p.pid)
    check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "SIGCONT to the program's pid: memlens ends too: %r" % st)
    eq(open(out).read(), "resumed\n", "... and the program ran to its end")


def stop_from_outside(w):
    trace = os.path.join(w, "tstp.mlt")
    out = os.path.join(w, "tstp.out")
    with open(out, "w") as o:
        p = subprocess.Popen([MEMLENS, "run", "-q", "-o", trace, "--", "/bin/sh", "-c", "sleep 1.5; echo done"],
                             stdout=o, stderr=subprocess.DEVNULL, process_group=0)
    end = time.time() + 20
    while not children(p.pid) and time.time() < end:
        time.sleep(0.01)
    time.sleep(0.3)
    os.kill(p.pid, signal.SIGTSTP)  # to memlens' pid alone, as `kill -TSTP PID`
    got = wait_stopped(p.pid)
    eq(got, ("stopped", signal.SIGTSTP), "SIGTSTP to memlens' pid: memlens stops")
    eq([state(k) for k in children(p.pid)], ["T"], "... and so does the program")
    os.killpg(p.pid, signal.SIGCONT)  # fg: the whole group
    st = finish(p.pid)
    check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "... continued, both end: status %r" % st)
    eq(open(out).read(), "done\n", "... and the program finished")


def hang_up(w):
    trace = os.path.join(w, "hup.mlt")
    pid, fd = pty.fork()
    if pid == 0:  # a session of its own, the pty its terminal: memlens in the foreground
        os.execv(MEMLENS, [MEMLENS, "run", "-q", "-o", trace, "--", os.path.join(B, "fx_hupper")])
    buf = b""
    end = time.time() + 30
    while b"ready" not in buf and time.time() < end:
        try:
            buf += os.read(fd, 100)
        except OSError:
            break
    check(b"ready" in buf, "hang-up: the program started (%r)" % buf)
    os.close(fd)  # the terminal goes: SIGHUP from the kernel
    os.kill(pid, signal.SIGHUP)  # and from the shell, to its job
    st = finish(pid)
    check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 7, "... memlens ends with the program's status 7: %r" % st)
    d = report(trace)
    eq((d.get("process", {}).get("end"), d.get("process", {}).get("exit_code")), ("exited", 7),
       "... the trace ends with the program's exit, not 'still running'")
    # Left live: stdout's buffer (printf's "ready"), reachable.
    eq((d.get("leaks", {}).get("lost_bytes"), d.get("leaks", {}).get("reachable_blocks")), (0, 1),
       "... after it freed its 100 blocks")


def own_session(w):
    """A program that calls setsid() itself: run alone as a job it leads
    its process group and the call fails (EPERM); under memlens it was a
    member of memlens' group, the call succeeded, and the program left the
    terminal's session (Ctrl-C no longer reached it). A fork's child, as a
    daemon's first step, gets its session either way."""
    fx = os.path.join(B, "fx_setsid")
    trace = os.path.join(w, "sid.mlt")
    for leader in (True, False):
        for args in ([], ["fork"]):
            def run(argv):
                p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60,
                                   preexec_fn=os.setpgrp if leader else None)
                return p.returncode, p.stdout.decode()
            plain = run([fx] + args)
            want = ("child setsid ok\n" if args else "") + ("main setsid EPERM\n" if leader else "main setsid ok\n")
            eq(plain, (0, want), "setsid %s, %s: the plain run" % (" ".join(args) or "main", "leader" if leader else "member"))
            eq(run([MEMLENS, "run", "-q", "-o", trace, "--", fx] + args), plain,
               "... and under memlens the same")


with tempfile.TemporaryDirectory(prefix="memlens-jobs-") as w:
    own_session(w)
    self_stop(w)
    continued_by_pid(w)
    stop_from_outside(w)
    hang_up(w)

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
