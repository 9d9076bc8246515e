#!/usr/bin/env bash
# test_nodegrow_hwm.sh BUILD_DIR - memlens' node table lives in the traced
# process, so its pages are in the program's peak RSS (docs/analysis.md,
# "Peak RSS"). When the table grows, the old one's entries are given back
# as the copy passes them (interpose/stacks.c, table_copy): the two tables
# are never resident whole at once. fx_nodegrow takes the table from 2^20
# to 2^21 entries (16 MiB to 32 MiB) and prints VmHWM - VmRSS: about
# 16 MiB when the old table stayed until the copy ended (the build before),
# a few pages now.
set -u
B=${1:?usage: test_nodegrow_hwm.sh BUILD_DIR}
ML="$B/memlens"
. "$(dirname "${BASH_SOURCE[0]}")/checks_lib.sh"
W=$(mktemp -d /tmp/memlens-nodegrow-XXXXXX)
trap 'rm -rf "$W"' EXIT

"$ML" run -q -o "$W/ng.mlt" -- "$B/fx_nodegrow" >"$W/ng.out" 2>"$W/err.txt"
rc=$?
gap=$(sed -n 's/.*gap_kib=//p' "$W/ng.out")
nodes=$("$ML" dump "$W/ng.mlt" | grep -c ' node id=')
check "fx_nodegrow ran (rc $rc; $(cat "$W/ng.out")) and interned $nodes stack nodes (> 786432: the table grew to 2^21)" \
    test "$rc" -eq 0 -a "$nodes" -gt 786432
check "the growth never held both tables whole: VmHWM - VmRSS = ${gap:-?} KiB (< 4096; 15912 before)" \
    test -n "$gap" -a "${gap:-99999}" -lt 4096
exit $((fails > 0))
