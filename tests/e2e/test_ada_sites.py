#!/usr/bin/python3
"""An Ada program's sites, in the names gdb gives them.

usage: test_ada_sites.py MEMLENS PROGRAM...      (exit 77 = skipped)

Each PROGRAM is tests/e2e/fixtures/fx_ada.adb built by gnatmake -g (at -O0
and -O2). GNAT's `new` calls __gnat_malloc (System.Memory.Alloc), which
calls malloc, and names a subprogram Fx_Ada.Store.Make `fx_ada__store__make`
(the main subprogram `_ada_fx_ada`, a nested one with a ".N" suffix, a
task body Worker `fx_ada__workerTB.N`);
valgrind and heaptrack print those symbols, gdb prints fx_ada.store.make,
and so must memlens. `memlens report --json` must:

- head every site of the fixture by the line of its `new`, named as gdb
  names it, with the calls and bytes the source implies (21 arrays of
  8 + 4 N bytes from Make, one of them kept; 8 cells of 16 bytes from
  Chain; 5 arrays of 24 bytes from the task);
- start no stack in GNAT's allocator (__gnat_malloc), as no C++ site starts
  in operator new, and show no encoded name (`__`, `_ada_`) in a frame of
  the fixture;
- name the fixture's frames as gdb does (`list *ADDRESS`), when gdb is
  installed;
- agree with valgrind memcheck (the oracle) on the definite and indirect
  leaks: the kept array and the list's head are lost, its 7 other cells
  with it;
- still honour patterns written against the symbol, as valgrind users
  write them: `leak:fx_ada__store__chain` suppresses the list's 8 blocks,
  as `leak:fx_ada.store.chain` does.
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lang_sites import lost_and_suppressed, record_and_compare, run  # noqa: E402

# GNAT's allocator: System.Memory (exported as __gnat_malloc) and the global
# storage pool; libgnarl's own calls of malloc (tasking) are the runtime's.
GNAT_ALLOCATOR = ("__gnat_malloc", "__gnat_realloc", "system__memory__", "system.memory.",
                  "system__pool_global__", "system.pool_global.")
MAKE = sum(8 + 40 * i for i in range(1, 21)) + 8 + 4 * 300  # 9,768 bytes
WANT = {  # (headline function, line): (calls, bytes, leaked bytes, definite bytes)
    ("fx_ada.store.make", 29): (21, MAKE, 1208, 1208),
    ("fx_ada.store.chain", 36): (8, 128, 128, 16),
    ("fx_ada.worker", 64): (5, 5 * 24, 0, 0),
}


def load_base(memlens, trace, program):
    dump = subprocess.run([memlens, "dump", trace], capture_output=True, text=True,
                          check=True).stdout
    m = re.search(r'module base=(0x[0-9a-f]+) path="%s"' % re.escape(os.path.abspath(program)), dump)
    return int(m.group(1), 16) if m else None


def gdb_names(program, offsets):
    """{offset: (function, line)} of gdb's `list *ADDRESS` at each call
    instruction (offset - 1); the innermost function only, so only the
    offsets memlens resolves to one frame are asked."""
    if not offsets:
        return {}
    cmds = []
    for o in offsets:
        cmds += ["-ex", "list *0x%x" % (o - 1)]
    out = subprocess.run(["gdb", "-q", "-batch", "-nx"] + cmds + [program], capture_output=True,
                         text=True, timeout=120).stdout
    got = re.findall(r"^0x([0-9a-f]+) is in (\S+) \([^:]+:(\d+)\)", out, re.M)
    return {int(a, 16) + 1: (fn, int(line)) for a, fn, line in got}


def check(memlens, program, work):
    name = os.path.basename(program)
    trace, doc, fails = record_and_compare(memlens, program, work, "/fx_ada.adb", WANT)
    first = sorted({s["frames"][0]["function"] for s in doc["sites"] if s["frames"] and
                    s["frames"][0]["function"].startswith(GNAT_ALLOCATOR)})
    if first:
        fails.append(f"stacks that start in GNAT's allocator: {first}")
    mine = [f for s in doc["sites"] for f in s["frames"] if (f.get("file") or "").endswith("/fx_ada.adb")]
    encoded = sorted({f["function"] for f in mine if "__" in f["function"] or f["function"].startswith("_ada_")})
    if encoded:
        fails.append(f"GNAT's symbols shown as they are: {encoded[:4]}")
    base = load_base(memlens, trace, program)
    if base is None:
        fails.append("no module record for the program")
    elif shutil.which("gdb"):
        # An address with one frame of the fixture (not inlined into another).
        per_addr = {}
        for s in doc["sites"]:
            for f in s["frames"]:
                if f["module"] == os.path.abspath(program):
                    per_addr.setdefault(f["address"], set()).add((f["function"], f["line"]))
        single = {a - base: next(iter(v)) for a, v in per_addr.items() if len(v) == 1}
        theirs = gdb_names(program, sorted(single))
        asked = {o: fl for o, fl in single.items() if fl[1]}
        for o, fl in sorted(asked.items()):
            # gdb names a function by its DWARF name; memlens names a GCC
            # clone by its ELF symbol, as for C (adainit.part.0 at -O2).
            fl = (re.sub(r"\.(part|isra|constprop|cold)(\.\d+)?$", "", fl[0]), fl[1])
            if theirs.get(o) != fl:
                fails.append(f"+0x{o:x}: memlens {fl}, gdb {theirs.get(o)}")
        if not asked:
            fails.append("no address of the fixture compared with gdb")
        print(f"{name}: {len(asked)} addresses named as gdb names them")
    else:
        print("note: gdb is not installed; the names are not compared with gdb's")
    fails += lost_and_suppressed(memlens, program, trace, work, doc,
                                 ("fx_ada__store__chain", "fx_ada.store.chain"), (128, 8))
    print(f"{name}: {len(fails)} problems")
    for f in fails:
        print("  BAD " + f)
    return len(fails)


if __name__ == "__main__":
    run(__doc__, "memlens-ada-", check)
