#!/usr/bin/python3
"""A Rust program's sites, named by its own lines and in Rust's names.

usage: test_rust_sites.py MEMLENS PROGRAM...      (exit 77 = skipped)

Each PROGRAM is tests/e2e/fixtures/fx_rust.rs built by rustc (-g -O), with
the default (legacy) mangling or with -C symbol-mangling-version=v0. Under
`memlens run`, `memlens report --json` must:

- name every site of the fixture by the fixture's line that asked for the
  memory (its headline frame), not by alloc::raw_vec, hashbrown or Box, with
  the exact calls and bytes the source implies;
- show no mangled name anywhere: no "_R..." symbol, no legacy "::h<hash>";
- start no site's stack in the allocator's own frames (__rust_alloc,
  alloc::alloc, the Global allocator), as no C++ site starts in operator new;
- agree with valgrind memcheck (the oracle) on the definite and indirect
  leaks: the tree's root Box is lost, and its 14 nodes and 7 arrays with it.
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lang_sites import run, valgrind_lost  # noqa: E402


def site_table(doc):
    """{(headline function, line): [calls, bytes, leaked bytes, definite bytes]}
    over the sites whose headline is in fx_rust.rs."""
    out = {}
    for s in doc["sites"]:
        h = s["frames"][s.get("headline", 0)]
        if not (h.get("file") or "").endswith("/fx_rust.rs"):
            continue
        key = (h.get("function_full", h["function"]), h["line"])
        row = out.setdefault(key, [0, 0, 0, 0])
        row[0] += s["alloc_calls"]
        row[1] += s["bytes_allocated"]
        row[2] += s["leaked_bytes"]
        row[3] += s["leaked_by_kind"]["definite"]
    return out


def check(memlens, program, work):
    name = os.path.basename(program)
    syms = subprocess.run(["nm", "--defined-only", program], capture_output=True,
                          text=True).stdout
    v0 = re.search(r" _R\S*7fx_rust", syms) is not None
    trace = os.path.join(work, name + ".mlt")
    out = os.path.join(work, name + ".json")
    subprocess.run([memlens, "run", "-q", "-o", trace, "--", program], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([memlens, "report", trace, "-q", "--no-advisor", "--json", out], check=True)
    with open(out) as f:
        doc = json.load(f)
    table = site_table(doc)
    closure = "fx_rust::main::{closure#0}" if v0 else "fx_rust::main::{{closure}}"
    generic = "fx_rust::table::<u32>" if v0 else "fx_rust::table"
    # (function, line): (calls, bytes, leaked bytes, definite bytes); None: any.
    want = {
        ("<fx_rust::Square as fx_rust::Shape>::area_table", 21): (1, 8000, 0, 0),
        ("fx_rust::tree", 31): (15, 15 * 48, 15 * 48, 48),
        ("fx_rust::tree", 33): (7, 7 * 16, 7 * 16, 0),
        (generic, 43): (1, 10000, 0, 0),
        ("fx_rust::index", 48): (1, None, 0, 0),
        (closure, 61): (3, 900, 0, 0),
    }
    bad = 0
    print(f"{name}: {'v0' if v0 else 'legacy'} mangling")
    for key, w in want.items():
        got = table.get(key)
        ok = got is not None and all(x is None or x == y for x, y in zip(w, got))
        bad += not ok
        print(f"  {'ok ' if ok else 'BAD'} {key[0]} :{key[1]}  want {w}  got {got}")
    if table.get(("fx_rust::index", 48), [0, 0])[1] < 100 * 16:
        print("  BAD the HashMap's table is smaller than 100 entries of 16 bytes")
        bad += 1
    mangled = sorted({f.get("function_full", f["function"]) for s in doc["sites"] for f in s["frames"]
                      if re.match(r"_R[A-Z0-9]", f["function"]) or
                      re.search(r"::h[0-9a-f]{16}$", f.get("function_full", f["function"]))})
    if mangled:
        bad += 1
        print(f"  BAD mangled names left: {mangled[:5]}")
    # The allocator's own frames (the global allocator, alloc::alloc, the
    # Global allocator's methods) are dropped, as operator new is.
    plumbing = sorted({s["frames"][0].get("function_full", s["frames"][0]["function"])
                       for s in doc["sites"] if s["frames"] and re.match(
                           r"(__rust_|__rdl_|__rg_|alloc::alloc::|<alloc::alloc::Global)",
                           s["frames"][0].get("function_full", s["frames"][0]["function"]))})
    if plumbing:
        bad += 1
        print(f"  BAD sites whose first frame is the allocator's: {plumbing[:5]}")
    lk = doc["leaks"]
    mine = (lk["definite_bytes"], lk["definite_blocks"], lk["indirect_bytes"], lk["indirect_blocks"])
    theirs = valgrind_lost(program, work)
    ok = theirs == mine
    bad += not ok
    print(f"  {'ok ' if ok else 'BAD'} lost (definite bytes, blocks, indirect bytes, blocks): "
          f"memlens {mine}, valgrind {theirs}")
    return bad


if __name__ == "__main__":
    run(__doc__, "memlens-rust-", check)
