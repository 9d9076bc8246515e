#!/usr/bin/env bash
# test_nondumpable.sh BUILD - a program that made itself non-dumpable, run
# by a user without CAP_SYS_PTRACE: memlens' exit scan must still read it,
# so its leak kinds are valgrind's (200 bytes definite, 100 reachable), not
# "every live block definite" as when the scan was refused. Run as root,
# it switches to the user nobody (exit 77 when it cannot).
set -u
BUILD=$(cd "$1" && pwd)
. "$(dirname "$0")/checks_lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v runuser > /dev/null || ! id nobody > /dev/null 2>&1; then
    echo "SKIP: needs root and runuser, to run as nobody"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
# nobody may not reach the build tree: memlens finds libmemlens.so beside it.
cp "$BUILD/memlens" "$BUILD/libmemlens.so" "$BUILD/fx_nodump" "$work/"
mkdir "$work/out" && chmod 777 "$work/out"
as_nobody() { runuser -u nobody -- "$@"; }

as_nobody "$work/memlens" run -o "$work/out/t.mlt" -- "$work/fx_nodump" 2> "$work/run.err"
st=$?
[ $st -eq 0 ] && ok "the program ran and exited 0, still non-dumpable at its end" ||
    bad "the program's status $st: $(cat "$work/run.err")"
as_nobody "$work/memlens" report "$work/out/t.mlt" --no-advisor --json "$work/out/t.json" 2> "$work/rep.err"
read -r def defb reach < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["leaks"]
want = [s for s in d["sites"] if s["kind"] == "reachable" and s["bytes"] == 100]
print(d["definite_bytes"], d["definite_blocks"], len(want))
' "$work/out/t.json")
[ "$def" = 200 ] && [ "$defb" = 1 ] && ok "definite: 200 bytes in 1 block" || bad "definite: $def bytes in $defb blocks"
[ "$reach" = 1 ] && ok "the global's 100-byte block is reachable" || bad "the 100-byte block is not reachable ($reach)"
grep -q "reachability scan failed" "$work/run.err" "$work/rep.err" &&
    bad "the scan failed: $(cat "$work/run.err" "$work/rep.err")" || ok "the exit scan read the process"
v=$(valgrind --leak-check=full "$work/fx_nodump" 2>&1 | grep -o 'definitely lost: [0-9,]* bytes in [0-9,]* blocks')
[ "$v" = "definitely lost: 200 bytes in 1 blocks" ] && ok "valgrind agrees: $v" || bad "valgrind: $v"
echo "$fails failed"
[ $fails -eq 0 ]
