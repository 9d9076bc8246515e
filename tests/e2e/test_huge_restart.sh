#!/usr/bin/env bash
# The analysis commands restart themselves once with glibc's malloc in
# transparent huge pages (cli/main.c, restart_with_huge_pages): GLIBC_TUNABLES
# gains glibc.malloc.hugetlb=1 for the second start and the variable the user
# gave is carried along; ML_HUGE_PAGES=0, the user's own glibc.malloc.hugetlb, valgrind's
# preload, a start through ld.so and a kernel without huge pages on request
# each mean no restart, and so do small traces (under 1 MiB: the restart
# costs more than it gains there);
# the report is the same either way.
# usage: test_huge_restart.sh MEMLENS FX_COUNTS
set -u
ML=${1:?memlens} FX=${2:?fx_counts}
command -v strace >/dev/null || { echo "strace is not installed: skipped"; exit 77; }
[ -z "${MEMLENS_TEST_SANITIZED:-}" ] || { echo "a sanitizer build does not restart itself (cli/main.c): skipped"; exit 77; }
W=$(mktemp -d /tmp/memlens-huge-XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$W"' EXIT
cd "$W" || exit 2
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

"$ML" run -q -o t.mlt -- "$FX" >/dev/null 2>&1 # fx_counts exits 7 on purpose
[ -s t.mlt ] || { echo "cannot record $FX"; exit 2; }
# A trace of more than 1 MiB: random sizes and lifetimes compress poorly.
cat >big.c <<'EOF'
#include <stdlib.h>
int main(void) {
    static void *keep[4096];
    unsigned s = 1;
    for (int i = 0; i < 400000; i++) {
        s = s * 1103515245u + 12345u;
        unsigned k = (s >> 8) & 4095;
        free(keep[k]);
        keep[k] = malloc(1 + (s >> 20));
    }
    return 0;
}
EOF
cc -O1 -o big big.c && "$ML" run -q -o big.mlt -- ./big || { echo "cannot record big"; exit 2; }
[ "$(stat -c %s big.mlt)" -ge 1048576 ] || { echo "big.mlt is under 1 MiB: $(stat -c %s big.mlt) bytes"; exit 2; }
# The execve calls of memlens itself, each with its environment, one per line.
starts() {
  strace -f -v -s 4096 -e trace=execve -o trace.txt "$@" >/dev/null 2>err.txt
  grep -F "execve(\"$(readlink -f "$ML")\"" trace.txt | grep -F '= 0'
}
env_of() { grep -o "\"$1=[^\"]*\"" | tr -d '"'; }

starts env GLIBC_TUNABLES=glibc.malloc.hugetlb=0 "$ML" report big.mlt --json off.json --no-advisor -q >s.txt
n=$(wc -l <s.txt)
[ "$n" -eq 1 ] && ok "the user's glibc.malloc.hugetlb: one start" || bad "the user's glibc.malloc.hugetlb: $n starts"

starts env ML_HUGE_PAGES=0 "$ML" report big.mlt --json off0.json --no-advisor -q >s.txt
n=$(wc -l <s.txt)
[ "$n" -eq 1 ] && ok "ML_HUGE_PAGES=0: one start" || bad "ML_HUGE_PAGES=0: $n starts"

# Started through the dynamic linker: /proc/self/exe is ld.so, no restart.
interp=$(readelf -l "$ML" 2>/dev/null | sed -n 's/.*interpreter: \(.*\)]/\1/p')
if [ -x "$interp" ]; then
  starts "$interp" "$ML" report big.mlt --json ld.json --no-advisor -q >s.txt
  n=$(grep -F 'execve(' trace.txt | grep -cF '= 0')
  if [ "$n" -eq 1 ] && cmp -s off0.json ld.json; then
    ok "started through $interp: no restart, the same report"
  else
    bad "started through $interp: $n programs started; $(head -c 300 err.txt)"
  fi
else
  echo "skip started through ld.so: no interpreter found"
fi

gcc -shared -fPIC -o libvgpreload_fake.so -x c /dev/null 2>/dev/null || { echo "cannot build a library"; exit 2; }
starts env LD_PRELOAD="$W/libvgpreload_fake.so" "$ML" report big.mlt --json vg.json --no-advisor -q >s.txt
n=$(wc -l <s.txt)
[ "$n" -eq 1 ] && ok "valgrind's preload: one start" || bad "valgrind's preload: $n starts"

if ! grep -q '\[madvise\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; then
  starts "$ML" report big.mlt --json on.json --no-advisor -q >s.txt
  n=$(wc -l <s.txt)
  [ "$n" -eq 1 ] && ok "huge pages not on request here: one start" || bad "huge pages not on request: $n starts"
else
  # (with an output file of more than 1 MiB there already, which is no trace)
  head -c 2000000 /dev/zero > old.json
  starts env -u GLIBC_TUNABLES "$ML" report t.mlt --json old.json --no-advisor -q --force >s.txt
  n=$(wc -l <s.txt)
  [ "$n" -eq 1 ] && ok "a trace under 1 MiB (a big output file there): one start" ||
    bad "a trace under 1 MiB (a big output file there): $n starts"
  starts env -u GLIBC_TUNABLES "$ML" report big.mlt --json on.json --no-advisor -q >s.txt
  n=$(wc -l <s.txt)
  second=$(sed -n 2p s.txt)
  if [ "$n" -eq 2 ] && [ "$(env_of GLIBC_TUNABLES <<<"$second")" = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1" ] &&
     [ "$(env_of ML__HUGE_RESTART <<<"$second")" = "ML__HUGE_RESTART=-" ]; then
    ok "no GLIBC_TUNABLES: restarted with glibc.malloc.hugetlb=1, the variable's absence carried"
  else
    bad "no GLIBC_TUNABLES: $n starts; second: $(env_of GLIBC_TUNABLES <<<"$second") $(env_of ML__HUGE_RESTART <<<"$second")"
  fi
  starts env GLIBC_TUNABLES=glibc.mem.tagging=0 "$ML" report big.mlt --json tag.json --no-advisor -q >s.txt
  n=$(wc -l <s.txt)
  second=$(sed -n 2p s.txt)
  if [ "$n" -eq 2 ] &&
     [ "$(env_of GLIBC_TUNABLES <<<"$second")" = "GLIBC_TUNABLES=glibc.mem.tagging=0:glibc.malloc.hugetlb=1" ] &&
     [ "$(env_of ML__HUGE_RESTART <<<"$second")" = "ML__HUGE_RESTART==glibc.mem.tagging=0" ]; then
    ok "the user's other tunables: kept, glibc.malloc.hugetlb=1 added, the old value carried"
  else
    bad "the user's other tunables: $n starts; second: $(env_of GLIBC_TUNABLES <<<"$second") $(env_of ML__HUGE_RESTART <<<"$second")"
  fi
  for c in "view big.mlt --help" "diff t.mlt big.mlt -q" "report . --no-advisor -q"; do
    starts env -u GLIBC_TUNABLES "$ML" $c >s.txt
    n=$(wc -l <s.txt)
    [ "$n" -eq 2 ] && ok "memlens ${c%% *}: restarted" || bad "memlens ${c%% *}: $n starts"
  done
  starts env -u GLIBC_TUNABLES "$ML" dump big.mlt >s.txt
  n=$(wc -l <s.txt)
  [ "$n" -eq 1 ] && ok "memlens dump: not restarted" || bad "memlens dump: $n starts"
fi
cmp -s off.json on.json && ok "the report is the same with and without" || bad "the reports differ"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
