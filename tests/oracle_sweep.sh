#!/usr/bin/env bash
# oracle_sweep.sh - memlens on Debian programs no test of ours was written
# for, against independent tools: the allocation-call count against
# heaptrack's (less the one call of its own) and against gdb's (a breakpoint
# on each of libc's allocator entries, counting the calls that do not come
# from another of them: realloc(NULL, n) calls or jumps to malloc,
# reallocarray jumps to realloc), and the blocks lost
# at exit, by kind, against valgrind memcheck's. A probe for people, not
# part of ctest: a difference is marked for a person to explain, and some
# are the other tool's (docs/analysis.md, "Programs no test was written for").
#
# valgrind runs with --run-libc-freeres=no --run-cxx-freeres=no: memlens
# frees nothing at exit, so what glibc and libstdc++ keep is live to both.
#
# usage: tests/oracle_sweep.sh BUILD_DIR [NAME...]
set -u
B=${1:?usage: oracle_sweep.sh BUILD_DIR [NAME...]}
shift
ML="$B/memlens"
for t in valgrind heaptrack heaptrack_print gdb python3; do
    command -v "$t" >/dev/null || { echo "oracle_sweep: $t is not installed" >&2; exit 77; }
done
W=$(mktemp -d /tmp/memlens-sweep-XXXXXX)
trap 'rm -rf "$W"' EXIT
# Every tool runs the program in this environment and no other: programs
# such as perl and tcl copy it, so its size changes their counts (valgrind
# and heaptrack add LD_PRELOAD all the same).
ENVV=(env -i PATH=/usr/bin:/bin LC_ALL=C PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 "HOME=$W")
# valgrind adds variables of its own to the program's environment (its
# LD_PRELOAD, GLIBCXX_FORCE_NEW and GLIBCPP_FORCE_NEW; Debian's wrapper
# LD_LIBRARY_PATH), and memlens hides its LD_PRELOAD from the program. A
# program that copies its environment (gawk's ENVIRON, perl's %ENV, tcl's
# env) then allocates other blocks under valgrind, and its lost kinds
# differ for that alone. memlens' run gets the same variables, valgrind's
# LD_PRELOAD under a name of the same length (memlens must not preload
# valgrind's libraries), so that both runs see environments of one size.
VGENV=()
while IFS= read -r kv; do
    case $kv in
    LD_PRELOAD=*) VGENV+=("LD_PRELOAX=${kv#LD_PRELOAD=}") ;;
    *) VGENV+=("$kv") ;;
    esac
done < <(comm -13 <("${ENVV[@]}" /usr/bin/env | sort) <("${ENVV[@]}" valgrind -q /usr/bin/env 2>/dev/null | sort))

seq 1 20000 >"$W/nums.txt"
printf '{"a":[1,2,{"b":"c"}],"d":"e"}\n' >"$W/in.json"
printf '<a><b x="1">t</b><c/></a>\n' >"$W/in.xml"
echo 'scale=200; 4*a(1)' >"$W/pi.bc"
echo '{ s[$1 % 100] += $1 } END { for (k in s) n++; print n }' >"$W/p.awk"
echo 'my %h; $h{$_} = [1 .. ($_ % 10)] for 1 .. 3000; my $x = {}; $x->{self} = $x; print scalar(keys %h), "\n";' \
    >"$W/p.pl"
echo 'set d [dict create]; for {set i 0} {$i<2000} {incr i} {dict set d $i [string repeat x [expr $i%50]]}; puts [dict size $d]' \
    >"$W/t.tcl"
echo '{ a[NR] = $0; w[$3] = $1; c[$1]++ } END { print length(a), length(w), length(c) }' >"$W/p2.awk"
awk 'BEGIN { for (i = 1; i <= 200000; i++) print (i * 7919) % 100003, "line", i }' >"$W/lines.txt"
head -n 20000 "$W/lines.txt" >"$W/lines20k.txt"
cat >"$W/count.py" <<'PY'
import gdb
gdb.execute("set pagination off")
gdb.execute("unset environment LINES")
gdb.execute("unset environment COLUMNS")
gdb.execute("set startup-with-shell off")
gdb.execute("starti")
n = [0]
# Allocators that end by jumping to another: realloc(NULL, n) to malloc,
# reallocarray to realloc. The second entry sees the first one's return
# address, so an entry whose return address is the one the same thread's
# previous such call saw is the same call (by thread; kept one entry only).
jumps = {}
NAMES = ("malloc", "calloc", "realloc", "reallocarray", "memalign", "aligned_alloc", "posix_memalign",
         "valloc", "pvalloc")
class Entry(gdb.Breakpoint):
    def stop(self):
        ret = int(gdb.parse_and_eval("*(unsigned long *)$sp"))
        th = gdb.selected_thread().num
        same_call = jumps.pop(th, None) == ret
        loc = self.location
        if loc.endswith("reallocarray") or (loc.endswith("realloc") and int(gdb.parse_and_eval("$rdi")) == 0):
            jumps[th] = ret
        if same_call:
            return False
        if "libc.so" in (gdb.current_progspace().solib_name(ret) or ""):
            b = gdb.block_for_pc(ret)
            while b is not None and b.function is None:
                b = b.superblock
            if b is not None and any(k in b.function.name for k in NAMES):
                return False
        n[0] += 1
        return False
for f in NAMES:
    try:
        Entry("__libc_" + f if f in ("malloc", "calloc", "realloc", "memalign", "valloc", "pvalloc") else f,
              internal=True)
    except gdb.error:
        pass
gdb.execute("continue")
print("NATIVE_CALLS", n[0])
PY

# name|command: split into words as the shell would, but gdb --args splits
# on spaces alone and escapes brackets, so no argument holds a space or a
# bracket. $W is the work directory.
PROGRAMS=(
    "jq|jq .a $W/in.json"
    "xmllint|xmllint --format $W/in.xml"
    "bc|bc -l $W/pi.bc"
    "mawk|mawk -f $W/p.awk $W/nums.txt"
    "gawk|gawk -f $W/p2.awk $W/lines20k.txt"
    "file|file /usr/bin/jq"
    "objdump|objdump -d /usr/bin/jq"
    "openssl|openssl dgst -sha256 $W/nums.txt"
    "tar|tar -cf $W/x.tar -C /usr/share/doc jq"
    "tclsh|tclsh $W/t.tcl"
    "perl|perl $W/p.pl"
    "ssh-keygen-missing|ssh-keygen -l -f $W/no-such-key.pub"
    "sort-parallel|sort --parallel=2 -S 1M -o $W/sorted.txt $W/lines.txt"
)

printf '%-19s %8s %9s %9s  %-30s %-30s\n' program "memlens" "ht-1" "gdb" "memlens lost def/ind/pos" \
    "valgrind lost def/ind/pos"
for entry in "${PROGRAMS[@]}"; do
    name=${entry%%|*} cmd=${entry#*|}
    if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
    d="$W/$name"
    mkdir -p "$d"
    read -r -a argv <<<"$cmd"
    # One plain run first: a program that makes its state on its first run
    # (git refreshes its index, gpg makes its keyring) then runs the same
    # way under every tool.
    "${ENVV[@]}" "${argv[@]}" >/dev/null 2>&1
    # Calls are compared in the plain environment (heaptrack's and gdb's
    # runs), lost kinds in valgrind's.
    "${ENVV[@]}" "$ML" run -q -o "$d/t.mlt" -- "${argv[@]}" >/dev/null 2>&1
    "${ENVV[@]}" "${VGENV[@]}" "$ML" run -q -o "$d/tv.mlt" -- "${argv[@]}" >/dev/null 2>&1
    for t in t tv; do
        "$ML" report "$d/$t.mlt" --json "$d/$t.json" --no-advisor -q 2>"$d/report.err" ||
            { echo "$name: memlens report failed: $(cat "$d/report.err")"; continue 2; }
    done
    "${ENVV[@]}" heaptrack -o "$d/ht" "${argv[@]}" >/dev/null 2>&1
    heaptrack_print -f "$d"/ht*.zst >"$d/ht.txt" 2>/dev/null
    "${ENVV[@]}" gdb -q -batch -x "$W/count.py" --args "${argv[@]}" 2>/dev/null | grep -a '^NATIVE_CALLS' >"$d/gdb.txt"
    "${ENVV[@]}" valgrind --leak-check=full --show-leak-kinds=all --errors-for-leak-kinds=none \
        --run-libc-freeres=no --run-cxx-freeres=no --log-file="$d/vg.txt" "${argv[@]}" >/dev/null 2>&1
    python3 - "$d" "$name" <<'PY'
import json, re, sys
d, name = sys.argv[1], sys.argv[2]
ck = json.load(open(d + "/t.json"))["totals"]["calls_by_kind"]
lk = json.load(open(d + "/tv.json"))["leaks"]
calls = sum(v for k, v in ck.items() if k not in ("mmap", "mremap"))
m = re.search(r"^calls to allocation functions: (\d+)", open(d + "/ht.txt").read(), re.M)
ht = int(m.group(1)) - 1 if m else None
g = open(d + "/gdb.txt").read().split()
native = int(g[1]) if len(g) == 2 else None
vg = open(d + "/vg.txt").read()
def vgk(kind):
    m = re.search(kind + r": ([\d,]+) bytes in ([\d,]+) blocks", vg)
    if m:
        return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))
    return (0, 0) if "no leaks are possible" in vg else None
mine = tuple((lk[k + "_bytes"], lk[k + "_blocks"]) for k in ("definite", "indirect", "possible"))
theirs = (vgk("definitely lost"), vgk("indirectly lost"), vgk("possibly lost"))
if None in theirs:
    theirs = None
fmt = lambda t: " ".join(f"{b}/{n}" for b, n in t) if t else "?"
mark = lambda same: " " if same else "*"
show = lambda v: "?" if v is None else v
print(f"{name:19} {calls:8} {show(ht):>9}{mark(calls == ht)}{show(native):>9}{mark(calls == native)} "
      f"{fmt(mine):30} {fmt(theirs):30}{mark(mine == theirs)}")
PY
done
echo "* differs from memlens"
