#!/usr/bin/python3
"""A Fortran program's sites, in the names gdb gives them.

usage: test_fortran_sites.py MEMLENS PROGRAM...      (exit 77 = skipped)

Each PROGRAM is tests/e2e/fixtures/fx_fortran.f90 built by gfortran -g (at
-O0 and -O2). gfortran names a procedure P of module M `__M_MOD_P`; valgrind
and heaptrack print that symbol, gdb prints `M::P`, and so must memlens.
`memlens report --json` must:

- head every site of the fixture by the line that allocated, named M::P,
  with the calls and bytes the source implies (three builds of 100 cells of
  16+i reals, 100 cells of 64 bytes, five arrays of 1000 reals);
- show no `_MOD_` symbol in any frame;
- agree with valgrind memcheck (the oracle) on the definite and indirect
  leaks;
- still honour patterns written against the symbol, as valgrind and
  LeakSanitizer users write them: `leak:__grid_MOD_leaky` suppresses the
  five lost arrays, and `--alloc-fn __grid_MOD_fill` names the cells' 300
  components by the line of build that called fill.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lang_sites import headline_table, lost_and_suppressed, record_and_compare, report, run  # noqa: E402

FILL = 3 * 4 * sum(16 + i for i in range(1, 101))  # 79,800 bytes
WANT = {  # (headline function, line): (calls, bytes, leaked bytes, definite bytes)
    ("grid::fill", 17): (300, FILL, FILL // 3, 0),
    ("grid::build", 25): (3, 3 * 6400, 6400, 6400),
    ("grid::leaky", 34): (5, 5 * 4000, 20000, 20000),
}


def table(doc):
    return headline_table(doc, "/fx_fortran.f90")


def check(memlens, program, work):
    name = os.path.basename(program)
    trace, doc, fails = record_and_compare(memlens, program, work, "/fx_fortran.f90", WANT)
    symbols = sorted({f["function"] for s in doc["sites"] for f in s["frames"] if "_MOD_" in f["function"]})
    if symbols:
        fails.append(f"gfortran symbols shown as they are: {symbols[:4]}")
    fails += lost_and_suppressed(memlens, program, trace, work, doc, ("__grid_MOD_leaky", "grid::leaky"),
                                 (20000, 5))
    wrapped = table(report(memlens, trace, trace + ".fn.json", "--alloc-fn", "__grid_MOD_fill"))
    if wrapped.get(("grid::build", 27)) != (300, FILL, FILL // 3, 0):
        fails.append(f"--alloc-fn __grid_MOD_fill: grid::build :27 is {wrapped.get(('grid::build', 27))}")
    print(f"{name}: {len(fails)} problems")
    for f in fails:
        print("  BAD " + f)
    return len(fails)


if __name__ == "__main__":
    run(__doc__, "memlens-fortran-", check)
