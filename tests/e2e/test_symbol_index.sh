#!/usr/bin/env bash
# The ELF symbol index (analysis/symbols.c, elf_symbol) against libdw: real
# Debian programs are recorded, then reported with ML_SYM_VERIFY=1, which
# asks libdw's own dwfl_module_addrinfo for every address the index answers
# and warns on each difference. python3 is stripped (its names come from
# .dynsym, where most internal functions have no symbol: the index must say
# "none" exactly where libdw does); perl and sqlite3 are PIEs with their
# own tables; every program also brings libc.
#
# usage: test_symbol_index.sh BUILD_DIR      (exit 77 = skipped: no program)
set -u
ML="${1:?build dir}/memlens"
W=$(mktemp -d /tmp/memlens-symidx-XXXXXX)
trap 'rm -rf "$W"' EXIT
export LC_ALL=C HOME="$W"
fail=0
ran=0
check() { # NAME PROGRAM ARGS...
    local name=$1
    shift
    if [ ! -x "$1" ]; then
        echo "skip $name: $1 is not installed"
        return
    fi
    ran=$((ran + 1))
    "$ML" run -q -o "$W/$name.mlt" -- "$@" >/dev/null 2>&1 </dev/null
    if ! ML_SYM_VERIFY=1 "$ML" report "$W/$name.mlt" --no-advisor --json "$W/$name.json" -q; then
        echo "FAIL $name: report failed"
        fail=1
        return
    fi
    /usr/bin/python3 - "$W/$name.json" "$name" <<'PY' || fail=1
import json, re, sys
warnings = json.load(open(sys.argv[1]))["warnings"]
name = sys.argv[2]
differ = [w for w in warnings if "the index says" in w]
summary = [w for w in warnings if "addresses checked against libdw" in w]
m = re.search(r"ML_SYM_VERIFY: (\d+) addresses checked against libdw, (\d+) differ", summary[0]) if summary else None
for w in differ[:20]:
    print(f"  {w}")
if not m:
    print(f"FAIL {name}: no ML_SYM_VERIFY summary among the warnings: {warnings}")
    sys.exit(1)
checked, nd = int(m.group(1)), int(m.group(2))
if nd or differ:
    print(f"FAIL {name}: {nd} of {checked} addresses differ from libdw")
    sys.exit(1)
if checked < 50:
    print(f"FAIL {name}: only {checked} addresses checked (the program should give hundreds)")
    sys.exit(1)
print(f"ok {name}: {checked} addresses, the index's symbol is libdw's for each")
PY
}
cat > "$W/work.py" <<'PYEOF'
import json
d = {}
for i in range(20000):
    d["k%d" % i] = [i, str(i * 3), (i, i % 7)]
s = sorted(d.items(), key=lambda kv: kv[1][1])
print(len(s), json.dumps({k: v[1] for k, v in s[:50]})[:100])
PYEOF
printf 'my %%h; $h{"k$_"} = [ $_, $_ x 3 ] for 1 .. 20000; my @k = sort keys %%h; print scalar(@k), "\\n";\n' > "$W/work.pl"
{
    echo "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);"
    echo "BEGIN;"
    for i in $(seq 1 2000); do echo "INSERT INTO t(name, v) VALUES('n$((i * 7919 % 2000))', $i.5);"; done
    echo "COMMIT;"
    echo "CREATE INDEX t_name ON t(name);"
    echo "SELECT count(*), min(name) FROM t;"
} > "$W/work.sql"
PYTHONMALLOC=malloc check python3 /usr/bin/python3 "$W/work.py"
check perl /usr/bin/perl "$W/work.pl"
check sqlite3 /usr/bin/sqlite3 "$W/db" ".read $W/work.sql"
if [ "$ran" = 0 ]; then
    echo "SKIP: none of python3, perl, sqlite3 is installed"
    exit 77
fi
exit $fail
