#!/usr/bin/python3
"""Every symbolized frame of memlens against eu-addr2line (the oracle).

usage: test_symbols_oracle.py MEMLENS [llvm:]PROGRAM...   (exit 77 = skipped)

Each PROGRAM runs under `memlens run`; `memlens report --json` gives every
site's frames, innermost first, each with the return address it came from.
The frames of one return address are its inline chain. For every address,
`eu-addr2line -i -f -C` on the module file (at the return address minus 1,
the call instruction, as memlens resolves it) must give the same chain:
the same number of levels, and at each level the same function, file and
line. Two conventions are stated rather than papered over:

- the concrete (outermost, non-inlined) function is named by its ELF
  symbol, as `nm` and the dynamic linker name it (`eu-addr2line -S`), where
  eu-addr2line -i prints the DWARF name: they differ only for aliases such
  as glibc's __libc_start_main (DW_AT_name __libc_start_main_impl);
- a gfortran module procedure, symbol `__M_MOD_P`, is named `M::P`, as gdb
  names it (tests/e2e/test_fortran_sites.py);
- a PROGRAM written "ada:PROGRAM" is built by GNAT: a subprogram of an
  Ada unit (a file .adb or .ads), symbol `fx_ada__store__make.1`
  (`_ada_fx_ada` for the main subprogram, `fx_ada__workerTB.3` for a task
  body), is named as gdb names it, `fx_ada.store.make`: the "_ada_"
  prefix, the nesting number and a task body's "TB" go, "__" is a dot (tests/e2e/test_ada_sites.py asks gdb itself);
- a return address that no call instruction precedes (makecontext puts
  the start of glibc's __start_context as the outermost frame of a
  coroutine's stack) has no function at the address minus 1 ("??" and no
  ELF symbol): there the oracle is asked about the address itself, as
  memlens names it;
- an address in a gap after a unit's code (the C runtime's _start, right
  after a main built -O2 whose last line row ends its code) is answered by
  libdw with that unit and that row's line; GNU addr2line, which checks the
  unit's ranges, says ??:0, and so does memlens: where a one-level answer
  of eu-addr2line has a line and GNU addr2line has none, the oracle's line
  is dropped (fx_gapline). The init procedure GNAT writes for a task type
  (fx_ada__workerVIP) lies past the end of its unit's line sequence, where
  gdb has no line either: GNU addr2line says "FILE:?" when asked about it
  alone, and the line of the address asked before it otherwise, so for an
  "ada:" program it is asked about each address alone;
- a relative source file is printed by eu-addr2line under the compilation
  directory ("./csu/../csu/libc-start.c"); memlens keeps the line table's
  name ("../csu/libc-start.c"): the oracle's must end with "/" + memlens's.

A site's first address may start inside its chain (the allocator's own
inlined frames are dropped): there its frames must be the chain's outer
levels. Every frame of every module with a file is compared, libc included;
a frame the oracle cannot name ("??") must be one memlens shows as an
address ("[module+0x...]").

A PROGRAM written "llvm:PROGRAM" is compared with LLVM's `llvm-symbolizer
--inlining` instead (its names, and the ELF symbol's, demangled by binutils'
`c++filt -i`, which reads C++ and both of Rust's manglings), on the frames of the program's own file: for what clang
and rustc write, elfutils 0.188 is not an oracle. Their DWARF has no
.debug_aranges, so eu-addr2line finds no unit and prints "??:0", and their
functions sit inside DW_TAG_namespace, where libdw's dwarf_getscopes() does
not look, so it prints no inlined frame. binutils' addr2line 2.40 is not
one either: inside a loop it names the innermost level by the function
around it and drops the others. The concrete function is still named by
its ELF symbol (`eu-addr2line -S`), and a line's column is not part of it.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def elf_type(path):
    with open(path, "rb") as f:
        h = f.read(18)
    return int.from_bytes(h[16:18], "little")  # 2: ET_EXEC, 3: ET_DYN


def eu_addr2line(module, vaddrs, opts, demangle=True):
    """{vaddr: [output lines]} of one eu-addr2line -a run over many addresses."""
    out = subprocess.run(["eu-addr2line", "-a"] + (["-C"] if demangle else []) + opts +
                         ["-e", module] +
                         ["0x%x" % v for v in vaddrs], capture_output=True, text=True).stdout
    res, cur = {}, None
    for line in out.splitlines():
        if re.fullmatch(r"0x[0-9a-f]{16}", line):
            cur = res.setdefault(int(line, 16), [])
        elif cur is not None:
            cur.append(line)
    return res


def gnu_addr2line_unknown(module, vaddrs, alone=False):
    """The addresses GNU addr2line gives no source line for ("??:0", or
    "FILE:?"). alone: each address in a run of its own, as addr2line 2.40
    answers an address past the end of a line sequence (a GNAT task type's
    init procedure) by the line of the address asked before it."""
    if alone:
        return set().union(*[gnu_addr2line_unknown(module, [v]) for v in vaddrs])
    out = subprocess.run(["addr2line", "-a", "-e", module] + ["0x%x" % v for v in vaddrs],
                         capture_output=True, text=True).stdout.splitlines()
    res = set()
    for i in range(0, len(out) - 1, 2):
        if re.fullmatch(r"0x[0-9a-f]+", out[i]) and (out[i + 1].startswith("??:") or
                                                      out[i + 1].endswith(":?")):
            res.add(int(out[i], 16))
    return res


def cxxfilt(names):
    """binutils' c++filt -i (no "implementation details": Rust's hashes and
    crate disambiguators) on each name: C++ and both Rust manglings."""
    if not names:
        return {}
    out = subprocess.run(["c++filt", "-i"], input="\n".join(names) + "\n",
                         capture_output=True, text=True, check=True).stdout.split("\n")
    return dict(zip(names, out))


def llvm_symbolizer(module, vaddrs):
    """{vaddr: [output lines]} of one llvm-symbolizer --inlining run. Names
    are mangled (LLVM 14 reads neither Rust mangling), demangled by the caller."""
    out = subprocess.run([LLVM_SYMBOLIZER, "--obj=" + module, "--inlining", "--no-demangle",
                          "--functions=linkage", "--print-address"] +
                         ["0x%x" % v for v in vaddrs], capture_output=True, text=True).stdout
    res, cur = {}, None
    for line in out.splitlines():
        if re.fullmatch(r"0x[0-9a-f]+", line):
            cur = res.setdefault(int(line, 16), [])
        elif cur is not None and line:
            cur.append(line)
    return res


LLVM_SYMBOLIZER = shutil.which("llvm-symbolizer") or shutil.which("llvm-symbolizer-14")


def oracle(module, vaddrs, llvm=False, ada=False):
    """{vaddr: [(function, file, line)] innermost first}, from eu-addr2line
    (or llvm-symbolizer)."""
    if llvm:
        chains = llvm_symbolizer(module, vaddrs)
        syms = eu_addr2line(module, vaddrs, ["-S"], demangle=False)
        names = cxxfilt(sorted({c[i] for c in chains.values() for i in range(0, len(c) - 1, 2)} |
                               {re.sub(r"\+0x[0-9a-f]+$", "", x[0]).split("@")[0]
                                for x in syms.values() if x}))
        chains = {v: [names.get(x, x) if i % 2 == 0 else x for i, x in enumerate(c)]
                  for v, c in chains.items()}
        syms = {v: [names.get(re.sub(r"\+0x[0-9a-f]+$", "", x[0]).split("@")[0], x[0])]
                for v, x in syms.items() if x}
    else:
        chains = eu_addr2line(module, vaddrs, ["-i", "-f"])
        syms = eu_addr2line(module, vaddrs, ["-S"])
    no_line = set() if llvm else gnu_addr2line_unknown(module, vaddrs, ada)
    res = {}
    for v in vaddrs:
        out, sym = chains.get(v, []), syms.get(v, [])
        elf = None  # "name+0xOFF", "name@@VERSION+0xOFF"; "??" or "()+0xOFF" when none
        if sym and not sym[0].startswith(("??", "()")):
            elf = re.sub(r"\+0x[0-9a-f]+$", "", sym[0]).split("@")[0]
        chain = []
        for i in range(0, len(out) - 1, 2):
            fn = out[i].split(" inlined at ")[0]
            m = re.match(r"^(.*?):(\d+)(?::\d+)?$", out[i + 1])
            file, line = (m.group(1), int(m.group(2))) if m else (None, 0)
            chain.append([None if fn == "??" else fn, None if file in (None, "??") else file,
                          line or None])
        if len(chain) == 1 and chain[0][1] and v in no_line:
            chain[0][1:] = [None, None]  # a gap after a unit's code (see above)
        if chain and elf:
            chain[-1][0] = elf  # the concrete function: its ELF symbol (see above)
        for c in chain:  # gfortran's module procedures, as gdb names them
            m = re.fullmatch(r"__([a-z0-9_]+)_MOD_(.+)", c[0] or "")
            if m:
                c[0] = m.group(1) + "::" + m.group(2)
            if ada and c[0] and (c[1] or "").endswith((".adb", ".ads")):
                n = re.sub(r"(?:[.$][0-9]+|__[0-9]+)+$", "", re.sub(r"^_ada_", "", c[0]))
                n = re.sub(r"(?:TK)?B$", "", re.sub(r"TB$", "", n))  # a task body
                if re.fullmatch(r"[a-z0-9][a-z0-9_]*", n) and "___" not in n and n[-1] != "_":
                    c[0] = n.replace("__", ".")
        res[v] = [tuple(c) for c in chain]
    return res


def same_file(mine, theirs):
    if mine == theirs:
        return True
    return bool(mine and theirs and not mine.startswith("/") and theirs.endswith("/" + mine))


def same_chain(got, want):
    return len(got) == len(want) and all(
        g[0] == w[0] and same_file(g[1], w[1]) and g[2] == w[2] for g, w in zip(got, want))


def check(memlens, program, work):
    llvm = program.startswith("llvm:")
    if llvm:
        program = program[len("llvm:"):]
    ada = program.startswith("ada:")
    if ada:
        program = program[len("ada:"):]
    name = os.path.basename(program)
    trace = os.path.join(work, name + ".mlt")
    doc_path = os.path.join(work, name + ".json")
    subprocess.run([memlens, "run", "-q", "-o", trace, "--", program], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([memlens, "report", trace, "-q", "--no-advisor", "--json", doc_path],
                   check=True, stdout=subprocess.DEVNULL)
    # Each unit's scope index dropped as the next unit is indexed (a budget
    # of one byte): the same report, byte for byte.
    tight = doc_path + ".tight"
    subprocess.run([memlens, "report", trace, "-q", "--no-advisor", "--json", tight],
                   check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, ML_SYM_SCOPE_BUDGET="1"))
    with open(doc_path, "rb") as a, open(tight, "rb") as b:
        same_tight = a.read() == b.read()
    dump = subprocess.run([memlens, "dump", trace], capture_output=True, text=True,
                          check=True).stdout
    bases = {m.group(2): int(m.group(1), 16)
             for m in re.finditer(r' module base=0x([0-9a-f]+) path="([^"]*)"', dump)}
    with open(doc_path) as f:
        doc = json.load(f)
    todo = []  # (site id, first, frames, module, vaddr)
    for site in doc["sites"]:
        fr = site["frames"]
        i = 0
        while i < len(fr):
            j = i
            while (j < len(fr) and fr[j]["address"] == fr[i]["address"]
                   and fr[j]["module"] == fr[i]["module"]):
                j += 1
            # "function" is shortened for display; "function_full" is the name.
            names = [f.get("function_full", f["function"]) for f in fr[i:j]]
            got = [(None if n.startswith("[") else n, f["file"], f["line"])
                   for n, f in zip(names, fr[i:j])]
            mod = fr[i]["module"]
            if llvm and mod != os.path.realpath(program):
                pass  # llvm-symbolizer: the program's own frames only
            elif mod and mod.startswith("/") and "libmemlens" not in mod:
                vaddr = fr[i]["address"] - 1 - (0 if elf_type(mod) == 2 else bases[mod])
                todo.append((site["id"], i == 0, got, mod, vaddr))
            i = j
    answers = {}
    for mod in {t[3] for t in todo}:
        answers[mod] = oracle(mod, sorted({t[4] for t in todo if t[3] == mod}), llvm,
                              ada and mod == os.path.realpath(program))
        # No function before the address: the function that starts at it.
        unnamed = [v for v, c in answers[mod].items() if not c or all(x[0] is None for x in c)]
        if unnamed and not llvm:
            at = oracle(mod, [v + 1 for v in unnamed], False, ada and mod == os.path.realpath(program))
            for v in unnamed:
                if at.get(v + 1) and at[v + 1][-1][0] is not None:
                    answers[mod][v] = at[v + 1]
    checked = bad = inlined = 0
    for sid, first, got, mod, vaddr in todo:
        want = answers[mod].get(vaddr, [])
        if want and want[0][0] is None:
            want = [(None, w[1], w[2]) for w in want]
        if first and len(got) < len(want):
            want = want[len(want) - len(got):]
        # A recursive call repeats one return address: its chain, again.
        reps = len(got) // len(want) if want and len(got) % len(want) == 0 else 1
        checked += 1
        inlined += len(got) > 1
        if not same_chain(got, want * reps):
            bad += 1
            print(f"MISMATCH {name}: {mod}+0x{vaddr:x} (site {sid})\n"
                  f"  memlens      {got}\n  {'llvm-symbolizer' if llvm else 'eu-addr2line'} {want}")
    if not same_tight:
        bad += 1
        print(f"MISMATCH {name}: the report differs when the scope indexes are dropped "
              f"(ML_SYM_SCOPE_BUDGET=1)")
    print(f"{name}: {checked} return addresses compared ({inlined} with inlined frames), "
          f"{bad} differ")
    return checked, bad, inlined


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if not shutil.which("eu-addr2line"):
        print("SKIP: eu-addr2line (elfutils) is not installed")
        sys.exit(77)
    if any(p.startswith("llvm:") for p in sys.argv[2:]) and not LLVM_SYMBOLIZER:
        print("SKIP: llvm-symbolizer (Debian package llvm) is not installed")
        sys.exit(77)
    memlens = sys.argv[1]
    work = tempfile.mkdtemp(prefix="memlens-oracle-")
    total_bad = total_inlined = 0
    try:
        for program in sys.argv[2:]:
            checked, bad, inlined = check(memlens, program, work)
            if not checked:
                print(f"{program}: no frame to compare")
                bad += 1
            elif program.startswith("llvm:") and not inlined:
                print(f"{program}: no inlined frame: this build does not test what it is for")
                bad += 1
            total_bad += bad
            total_inlined += inlined
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not total_inlined:
        print("no inlined frame anywhere: the fixtures do not test inline chains")
        total_bad += 1
    sys.exit(1 if total_bad else 0)


if __name__ == "__main__":
    main()
