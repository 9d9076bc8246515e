#!/usr/bin/env bash
# Real programs from Debian under memlens: their output must be byte-identical
# to an uninstrumented run, and memlens' allocation-call count must equal
# heaptrack's on the same deterministic run (within 0.1 %).
#
# With "verify", each runs under `memlens run --unwind verify` instead, and
# every stack the recorder took must equal libunwind's (the trace's
# unwind-check record: no stack differs, and the recorder walked some itself;
# docs/recorder.md, "Stacks"). heaptrack is not needed then.
#
# usage: test_real_programs.sh BUILD_DIR [verify]     (exit 77 = skipped)
set -u
B=${1:?build dir}
MODE=${2:-count}
ML="$B/memlens"
if [ "$MODE" != verify ] && { ! command -v heaptrack >/dev/null || ! command -v heaptrack_print >/dev/null; }; then
    echo "SKIP: heaptrack is not installed"
    exit 77
fi
W=$(mktemp -d /tmp/memlens-real-XXXXXX)
trap 'rm -rf "$W"' EXIT
export PYTHONHASHSEED=0 GIT_PAGER=cat PAGER=cat LC_ALL=C TZ=UTC
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t \
    GIT_COMMITTER_EMAIL=t@example.invalid GIT_AUTHOR_DATE='2020-01-01T00:00:00Z' \
    GIT_COMMITTER_DATE='2020-01-01T00:00:00Z' GIT_CONFIG_NOSYSTEM=1 HOME="$W"

cat > "$W/work.py" <<'EOF'
import json
d = {}
for i in range(20000):
    d["k%d" % i] = [i, str(i * 3), (i, i % 7)]
s = sorted(d.items(), key=lambda kv: kv[1][1])
print(len(s), s[0][0], s[-1][0])
print(json.dumps({k: v[1] for k, v in s[:50]}, sort_keys=True)[:200])
EOF
cat > "$W/work.pl" <<'EOF'
my %h;
$h{"k$_"} = [ $_, $_ x 3 ] for 1 .. 20000;
my @k = sort keys %h;
print scalar(@k), " $k[0] $k[-1]\n";
my $s = join(",", map { $h{$_}[1] } @k[0 .. 20]);
print length($s), " ", substr($s, 0, 80), "\n";
EOF
{
    echo "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);"
    echo "BEGIN;"
    for i in $(seq 1 3000); do echo "INSERT INTO t(name, v) VALUES('n$((i * 7919 % 3000))', $i.5);"; done
    echo "COMMIT;"
    echo "CREATE INDEX t_name ON t(name);"
    echo "SELECT count(*), sum(v), min(name), max(name) FROM t;"
    echo "SELECT name, v FROM t ORDER BY name LIMIT 5;"
} > "$W/work.sql"
mkdir "$W/repo"
(cd "$W/repo" && git init -q . && for c in 1 2 3; do
    for i in $(seq 1 40); do printf 'file %s commit %s\n%s\n' "$i" "$c" "$(seq 1 $((i + c)))" > "f$i.txt"; done
    git add -A && git commit -qm "commit $c"; done) || { echo "cannot make the git repo"; exit 1; }

# heaptrack's own preload library is C++: libstdc++'s initializer allocates
# its exception pool in every program heaptrack runs. Measure that baseline
# on /bin/true (which allocates nothing itself) and leave it out.
[ "$MODE" = verify ] || (cd "$W" && heaptrack -o "$W/true.ht" /bin/true > /dev/null 2>&1)
HT_SELF=0
if [ "$MODE" != verify ]; then
    HT_SELF=$(heaptrack_print -f "$(ls "$W"/true.ht* | head -1)" -p 0 -a 0 -T 0 -l 0 -n 0 2>/dev/null |
        sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p')
    HT_SELF=${HT_SELF:-0}
    HT_SELF_TEMP=$(heaptrack_print -f "$(ls "$W"/true.ht* | head -1)" -p 0 -a 0 -T 0 -l 0 -n 0 2>/dev/null |
        sed -n 's/^temporary memory allocations: \([0-9]*\).*/\1/p')
    HT_SELF_TEMP=${HT_SELF_TEMP:-0}
    echo "heaptrack's own allocations in every run: $HT_SELF ($HT_SELF_TEMP temporary)"
fi

fail=0
pass=0
check() { # name, command...
    local name=$1
    shift
    "$@" > "$W/$name.plain" 2>&1
    local rc_plain=$?
    local unwind=()
    [ "$MODE" = verify ] && unwind=(--unwind verify)
    "$ML" run -q "${unwind[@]}" -o "$W/$name.mlt" -- "$@" > "$W/$name.ml" 2> "$W/$name.mlerr"
    local rc_ml=$?
    if [ $rc_plain -ne $rc_ml ]; then
        echo "FAIL $name: exit status $rc_ml under memlens, $rc_plain without"; fail=$((fail + 1)); return
    fi
    # memlens -q prints nothing of its own: the output must be the program's alone.
    cat "$W/$name.mlerr" >> "$W/$name.ml"
    if ! cmp -s "$W/$name.plain" "$W/$name.ml"; then
        echo "FAIL $name: output differs under memlens"; diff "$W/$name.plain" "$W/$name.ml" | head -5
        fail=$((fail + 1)); return
    fi
    local ml_calls
    ml_calls=$("$ML" dump "$W/$name.mlt" | grep -c ' alloc ')
    if [ "$MODE" = verify ]; then
        # Every allocation and mapping has a stack: " unwind-check stacks=N
        # mismatches=M fallbacks=F reused=R ..." must count them all.
        local chk stacks bad fb reused
        ml_calls=$((ml_calls + $("$ML" dump "$W/$name.mlt" | grep -c ' mmap ')))
        chk=$("$ML" dump "$W/$name.mlt" | grep ' unwind-check ')
        stacks=$(echo "$chk" | sed -n 's/.* stacks=\([0-9]*\).*/\1/p')
        bad=$(echo "$chk" | sed -n 's/.* mismatches=\([0-9]*\).*/\1/p')
        fb=$(echo "$chk" | sed -n 's/.* fallbacks=\([0-9]*\).*/\1/p')
        reused=$(echo "$chk" | sed -n 's/.* reused=\([0-9]*\).*/\1/p')
        if [ -z "$stacks" ] || [ "$stacks" -ne "$ml_calls" ] || [ "$bad" -ne 0 ] ||
            [ $((stacks - fb)) -le 0 ] || [ "$reused" -le 0 ]; then
            echo "FAIL $name: ${chk:-no unwind-check record} ($ml_calls allocations and mappings)"
            fail=$((fail + 1)); return
        fi
        # FB_PERMILLE: at most this many stacks per thousand left to libunwind.
        if [ -n "${FB_PERMILLE:-}" ] && [ $((fb * 1000)) -gt $((stacks * FB_PERMILLE)) ]; then
            echo "FAIL $name: $fb of $stacks stacks taken by libunwind (at most $FB_PERMILLE per thousand)"
            fail=$((fail + 1)); return
        fi
        echo "ok   $name: identical output, $stacks stacks equal libunwind's ($fb taken by libunwind, $reused reusing the previous stack)"
        pass=$((pass + 1))
        return
    fi
    (cd "$W" && heaptrack -o "$W/$name.ht" "$@" > /dev/null 2>&1)
    local ht_file
    ht_file=$(ls "$W/$name".ht* 2>/dev/null | head -1)
    local ht_calls
    ht_calls=$(heaptrack_print -f "$ht_file" -p 0 -a 0 -T 0 -l 0 -n 0 2>/dev/null |
        sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p')
    if [ -z "$ht_calls" ] || [ "$ht_calls" -eq 0 ]; then
        echo "FAIL $name: no heaptrack count"; fail=$((fail + 1)); return
    fi
    ht_calls=$((ht_calls - HT_SELF))
    # |ml - ht| <= 0.1 % of ht (at least one call: small runs are not exact
    # to the call from run to run, e.g. git's lazily loaded packs)
    local diff=$((ml_calls > ht_calls ? ml_calls - ht_calls : ht_calls - ml_calls))
    if [ $((diff * 1000)) -gt "$ht_calls" ] && [ $diff -gt 1 ]; then
        echo "FAIL $name: memlens counted $ml_calls allocation calls, heaptrack $ht_calls"
        fail=$((fail + 1)); return
    fi
    # Temporary allocations, heaptrack's definition (docs/analysis.md,
    # "Counting"): heaptrack matches a free against the last allocation by
    # its call stack and size, not by its address, so where two blocks of
    # one size from one stack are allocated before the first is freed it
    # counts one more. Within 1 % (at least 2: git's runs differ by a few
    # calls from run to run).
    local ml_temp ht_temp
    ml_temp=$("$ML" report -q --no-advisor "$W/$name.mlt" |
        sed -n 's/^allocations: [0-9]* calls (\([0-9]*\) temporary).*/\1/p')
    ht_temp=$(heaptrack_print -f "$ht_file" -p 0 -a 0 -T 0 -l 0 -n 0 2>/dev/null |
        sed -n 's/^temporary memory allocations: \([0-9]*\).*/\1/p')
    if [ -z "$ml_temp" ] || [ -z "$ht_temp" ]; then
        echo "FAIL $name: no temporary count (memlens '${ml_temp}', heaptrack '${ht_temp}')"
        fail=$((fail + 1)); return
    fi
    ht_temp=$((ht_temp - HT_SELF_TEMP))
    local tdiff=$((ml_temp > ht_temp ? ml_temp - ht_temp : ht_temp - ml_temp))
    if [ $((tdiff * 100)) -gt "$ht_temp" ] && [ $tdiff -gt 2 ]; then
        echo "FAIL $name: memlens counted $ml_temp temporary allocations, heaptrack $ht_temp"
        fail=$((fail + 1)); return
    fi
    echo "ok   $name: identical output, $ml_calls allocation calls (heaptrack: $ht_calls + $HT_SELF of its own), $ml_temp temporary (heaptrack: $ht_temp)"
    pass=$((pass + 1))
}

PYTHONMALLOC=malloc check python3 /usr/bin/python3 "$W/work.py"
check perl /usr/bin/perl "$W/work.pl"
check sqlite3 /usr/bin/sqlite3 :memory: ".read $W/work.sql"
check git-log /usr/bin/git -C "$W/repo" log --stat --format='%H %s'
check git-log-p /usr/bin/git -C "$W/repo" log -p --format='%H %an %s'
check git-rev-list /usr/bin/git -C "$W/repo" rev-list --objects --all
# Generated code, as a JIT compiler makes it: a stub without a module or
# unwind tables (fixtures/fx_jit.c), and node's V8, whose interpreter and
# compiled JavaScript have neither. The recorder steps through such frames
# as libunwind guesses them (docs/recorder.md, "Code without unwind
# information"): every stack equal to libunwind's, and (nearly) none left
# to it.
if [ "$MODE" = verify ]; then
    FB_PERMILLE=0 check jit "$B/fx_jit"
    # A library's constructor that allocates (fx_pool.c starts its threads
    # there): its stacks end at ld.so's _dl_start_user, which has no unwind
    # information and calls the constructors with rbp 0.
    FB_PERMILLE=0 check ctor "$B/fx_poolexit"
    if command -v node > /dev/null; then
        cat > "$W/work.js" <<'EOF'
let t = 0;
for (let r = 0; r < 5; r++) {
  const bufs = [];
  for (let i = 0; i < 4000; i++) bufs.push(Buffer.alloc(100 + (i % 50)));
  const m = new Map();
  for (let i = 0; i < 4000; i++) m.set(i, new Uint8Array(64 + (i % 3)));
  t += bufs.length + m.size;
}
console.log(t);
EOF
        FB_PERMILLE=10 check node node "$W/work.js"
    fi
fi
# Known temporaries (fixtures/fx_temps.c) but for pattern 7, which heaptrack
# does not see as a free.
[ "$MODE" = verify ] || check fx-temps "$B/fx_temps" 1 2 3 4 5 6 8

# Site names of a stripped program whose work is done in a library
# (docs/analysis.md, "Site names"): /usr/bin/sqlite3 is the shell, without
# symbols, around libsqlite3. Its own frames have no names, so every site
# was named by the shell's call into the library ("[sqlite3+0x200c4]");
# each of the ten largest must now be named by a function, and that
# function must be the one eu-addr2line finds at the frame's address.
if [ "$MODE" != verify ] && [ -s "$W/sqlite3.mlt" ] && command -v eu-addr2line > /dev/null; then
    "$ML" report -q --no-advisor "$W/sqlite3.mlt" --json "$W/sqlite3.json"
    "$ML" dump "$W/sqlite3.mlt" | grep ' module base=' > "$W/sqlite3.modules"
    if python3 - "$W/sqlite3.json" "$W/sqlite3.modules" << 'EOF'; then
import json, re, subprocess, sys
d = json.load(open(sys.argv[1]))
bases = {}
for line in open(sys.argv[2]):
    m = re.search(r'base=0x([0-9a-f]+) path="([^"]*)"', line)
    if m:
        bases[m.group(2)] = int(m.group(1), 16)
sites = [s for s in d["sites"] if s["peak_bytes"]][:10]
bad = []
for s in sites:
    f = s["frames"][s.get("headline", 0)]
    if f["function"].startswith("["):
        bad.append("site %d is named by an address, %s" % (s["id"], f["function"]))
        continue
    off = f["address"] - 1 - bases.get(f["module"], 0)
    out = subprocess.run(["eu-addr2line", "-f", "-e", f["module"], hex(off)], capture_output=True,
                         text=True).stdout.split("\n")[0]
    if out.split("(")[0] != f["function"]:
        bad.append("site %d: %s, eu-addr2line says %s" % (s["id"], f["function"], out))
if not sites:
    bad.append("no site")
for b in bad:
    print("      " + b)
print("      %d sites, named %s" % (len(sites), sorted(set(s["frames"][s.get("headline", 0)]["function"] for s in sites))))
sys.exit(1 if bad else 0)
EOF
        echo "ok   sqlite3's sites are named by their functions"
        pass=$((pass + 1))
    else
        echo "FAIL sqlite3's sites are named by their functions"
        fail=$((fail + 1))
    fi
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
