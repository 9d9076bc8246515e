#!/usr/bin/env python3
"""check.py - compare a memlens JSON report's "gpu" object with what a GPU test
program says it did (tests/gpu/run.sh).

  check.py kinds REPORT.json EXPECT.json
  check.py torch MODE REPORT.json TORCH.json
  check.py pools REPORT.json MIN_BYTES     (a run with --gpu-pools)

Prints one row per check, tab-separated: check, expected, measured, status
(ok, FAIL, or info for facts that are recorded but not judged). Exits 1 when
a row failed, 2 when the input cannot be read.
"""
import json
import sys

rows = []


def row(name, expected, measured, ok, judged=True):
    rows.append((name, str(expected), str(measured), "ok" if ok else ("FAIL" if judged else "info")))


def device(report, ordinal=0):
    for d in report.get("gpu", {}).get("devices", []):
        if d.get("device") == ordinal:
            return d
    return None


def kind(d, k, field="bytes_allocated"):
    return d.get("kinds", {}).get(k, {}).get(field, 0)


def check_kinds(report, expect):
    d = device(report, expect.get("device", 0))
    if d is None:
        row("device 0 in the report", "present", "absent", False)
        return
    ek = expect["kinds"]
    # cudaMallocPitch may reach the driver as cuMemAllocPitch or cuMemAlloc:
    # judge their sum, show the split.
    both = ek["device"] + ek["pitch"]
    got = kind(d, "device") + kind(d, "pitch")
    row("device+pitch bytes", both, got, got == both)
    for k in ("device", "pitch"):
        row(k + " bytes", ek[k], kind(d, k), kind(d, k) == ek[k], judged=False)
    for k in ("managed", "host_pinned", "host_registered", "async", "pool", "array", "vmm_physical",
              "vmm_reserve", "vmm_map"):
        row(k + " bytes", ek[k], kind(d, k), kind(d, k) == ek[k])
    row("peak bytes (device 0)", expect["peak_bytes"], d.get("peak_bytes"), d.get("peak_bytes") == expect["peak_bytes"])
    row("leaked bytes (device 0)", expect["leaked_bytes"], d.get("leaked_bytes"),
        d.get("leaked_bytes") == expect["leaked_bytes"])
    leaks = d.get("leak_sites", [])
    fn = expect.get("leak_function", "")
    names = [f.get("function") or "" for f in (leaks[0].get("frames", []) if leaks else [])]
    hit = any(n.startswith(fn) for n in names[:3])
    row("leak site names " + fn, fn, names[0] if names else "-", hit)
    pk = d.get("peak_sites", [])
    row("peak sites listed", ">= 8", len(pk), len(pk) >= 8)


def check_torch(mode, report, t):
    d = device(report, 0)
    if d is None:
        row(mode + ": device 0 in the report", "present", "absent", False)
        return
    if mode == "native":
        row("native: cudaMalloc calls = torch num_device_alloc", t["num_device_alloc"], kind(d, "device", "alloc_calls"),
            kind(d, "device", "alloc_calls") == t["num_device_alloc"])
        row("native: live at exit = memory_reserved()", t["reserved_at_exit"], kind(d, "device", "live_bytes"),
            kind(d, "device", "live_bytes") == t["reserved_at_exit"])
    elif mode == "async":
        row("async: cuMemAllocAsync calls", ">= 3", kind(d, "async", "alloc_calls"), kind(d, "async", "alloc_calls") >= 3)
        # x and y, then keep: what the program asked the driver for. (The
        # pool's reservation, torch's memory_reserved(), is only in the
        # activity records: --gpu-pools.)
        asked = t.get("asked_x_y", 0) + t.get("asked_keep", 0)
        row("async: bytes allocated >= x + y + keep", ">= %d" % asked, kind(d, "async"), kind(d, "async") >= asked)
        # `keep` is never freed (torch_allocs.py holds a reference Python
        # never drops), so its block is live at exit.
        row("async: live at exit >= keep (never freed)", ">= %d" % t.get("asked_keep", 0),
            kind(d, "async", "live_bytes"), kind(d, "async", "live_bytes") >= t.get("asked_keep", 0))
        row("async: cuMemFreeAsync calls", "-", kind(d, "async", "free_calls"), False, judged=False)
    elif mode == "expandable":
        row("expandable: cuMemCreate calls", ">= 1", kind(d, "vmm_physical", "alloc_calls"),
            kind(d, "vmm_physical", "alloc_calls") >= 1)
        row("expandable: cuMemMap calls", ">= 1", kind(d, "vmm_map", "alloc_calls"), kind(d, "vmm_map", "alloc_calls") >= 1)
        row("expandable: live physical = memory_reserved()", t["reserved_at_exit"], kind(d, "vmm_physical", "live_bytes"),
            kind(d, "vmm_physical", "live_bytes") == t["reserved_at_exit"])
    row(mode + ": pinned host bytes", ">= %d" % t["pinned_bytes"], kind(d, "host_pinned") + kind(d, "host_registered"),
        kind(d, "host_pinned") + kind(d, "host_registered") >= t["pinned_bytes"])
    if t.get("managed_rc") == 0:
        row(mode + ": managed bytes", ">= 4194304", kind(d, "managed"), kind(d, "managed") >= 4 << 20)
    # The caching allocators' segments are allocations the driver sees; the
    # async backend's are not (its pool reserves them), so there the floor is
    # what the script asked for (x and y: 67,109,264 bytes on the H200 run,
    # which memlens measured exactly).
    floor = t.get("asked_x_y", 0) if mode == "async" else t["reserved_with_x_y"]
    row(mode + ": peak bytes", ">= %d" % floor, d.get("peak_bytes"), (d.get("peak_bytes") or 0) >= floor)


def check_pools(report, min_bytes):
    """The explicit pool (cudaMemPoolCreate) is in the activity records with
    at least min_bytes reserved at some point."""
    reserved = [p.get("peak_reserved_bytes", 0) for d in report.get("gpu", {}).get("devices", [])
                for p in d.get("pools", []) if p.get("kind") == "explicit"]
    best = max(reserved) if reserved else None
    row("explicit pool: peak_reserved_bytes", ">= %d" % min_bytes, "-" if best is None else best,
        best is not None and best >= min_bytes)


def main(argv):
    try:
        if len(argv) == 4 and argv[1] == "kinds":
            check_kinds(json.load(open(argv[2])), json.load(open(argv[3])))
        elif len(argv) == 5 and argv[1] == "torch":
            check_torch(argv[2], json.load(open(argv[3])), json.load(open(argv[4])))
        elif len(argv) == 4 and argv[1] == "pools":
            check_pools(json.load(open(argv[2])), int(argv[3]))
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (OSError, ValueError, KeyError) as e:
        print("check.py: %s" % e, file=sys.stderr)
        return 2
    for r in rows:
        print("\t".join(r))
    return 1 if any(r[3] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
