"""What test_rust_sites.py and test_fortran_sites.py share: valgrind as the
oracle of lost blocks, and the command line (MEMLENS PROGRAM..., exit 77
without valgrind, 1 when any program had a problem)."""
import re
import shutil
import subprocess
import sys
import tempfile


def valgrind_lost(program, work):
    """(definite bytes, blocks, indirect bytes, blocks) from valgrind's
    summary, or None when it printed none."""
    err = subprocess.run(["valgrind", "--leak-check=full", program], capture_output=True,
                         text=True, cwd=work, timeout=300).stderr
    got = [re.search(rf"{kind} lost: ([\d,]+) bytes in ([\d,]+) blocks", err)
           for kind in ("definitely", "indirectly")]
    if not all(got):
        return None
    return tuple(int(x.replace(",", "")) for m in got for x in m.groups())


def run(doc, prefix, check):
    """check(memlens, program, work) -> the number of problems, for each
    PROGRAM of the command line, in a scratch folder."""
    if len(sys.argv) < 3:
        sys.exit(doc)
    if not shutil.which("valgrind"):
        print("SKIP: valgrind is not installed")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        bad = sum(check(sys.argv[1], p, work) for p in sys.argv[2:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if bad else 0)
