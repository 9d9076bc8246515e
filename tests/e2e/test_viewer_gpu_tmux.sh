#!/bin/sh
# test_viewer_gpu_tmux.sh - the viewer's GPU view end to end, in a real terminal.
#
#   sh test_viewer_gpu_tmux.sh MEMLENS FX_GPU_EVENTS FX_COUNTS
#
# A private tmux server runs an 80x24 shell. The test records fx_gpu_events
# (tests/e2e/fixtures/fx_gpu_events.c, numbers in tests/e2e/gpu_expect.h:
# device 0 with every kind, peak 15 MiB + 118784 B, a 5 MiB leak from
# gpu_leaky_site and a pitched block whose free failed; device 1 with 3 MiB
# held when its context is destroyed) with the real `memlens run`, opens it
# with `memlens view`, presses 7 (the GPU view), and reads the screen with
# capture-pane: device 0's numbers and kind table, the leak attributed to
# gpu_leaky_site and its stack (Enter), device 1 (Right) with its 3 MiB
# leaked at context destroy, back (Left), the view's help. Then a CPU-only
# trace (fx_counts): the GPU view says there is nothing to show.
#
# Exit 0: passed; 1: failed (the screen is printed); 77: tmux is missing.
set -u
MEMLENS=$1
FX_GPU=$2
FX_COUNTS=$3

ML_TMUX_TEST=viewer_gpu_tmux . "$(dirname "$0")/tmux_lib.sh"

# ---------------------------------------------------------------------------
# Record the GPU fixture and a CPU-only program.
# ---------------------------------------------------------------------------
"$MEMLENS" run -q -o "$T/gpu.mlt" -- "$FX_GPU" > "$T/gpu.out" 2>&1
grep -qF "fx_gpu_events done" "$T/gpu.out" || fail "fx_gpu_events did not run: $(cat "$T/gpu.out")"
[ -s "$T/gpu.mlt" ] || fail "memlens run wrote no GPU trace"
"$MEMLENS" run -q -o "$T/counts.mlt" -- "$FX_COUNTS" > /dev/null 2>&1
[ -s "$T/counts.mlt" ] || fail "memlens run wrote no CPU trace"

tm new-session -d -s v -x 80 -y 24 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 PS1='ml-prompt\$ ' sh" \
    || fail "tmux cannot start"
wait_for "ml-prompt\$"

# ---------------------------------------------------------------------------
# Device 0: the numbers and the kind table.
# ---------------------------------------------------------------------------
key "clear; $MEMLENS view $T/gpu.mlt; echo view-exit=\$?" Enter
wait_for "1Summary"
wait_for "exited with status 0"
expect "7GPU" "the bottom bar lists the GPU view"
key 7
wait_for "GPU  device 0  (1 of 2)"
# 15 MiB + 118784 B = 15847424 B, in the viewer's exact format.
expect "Peak           15847424 B (15.1 MiB) in 8 blocks at "
expect "Live at exit   5345280 B (5.1 MiB) in 2 blocks"
expect "Leaked         5345280 B (5.1 MiB) in 2 blocks"
expect "at context destroy: 0 B in 0 blocks"
expect "Calls          13 allocs, 10 frees, 1 failed frees, 0 unknown frees"
expect "Pinned host    peak 132K, live 64.0K, leaked 64.0K, 132K allocated"
expect "Address space  at peak: 15.1M in 7 blocks"
expect "Empty cache    0 drain/refill cycles, 0 pool trims"
expect "KIND             ALLOCS  FREES   ALLOC    PEAK    LIVE  LEAKED"
expect " device                2      1    6.0M    6.0M    5.0M    5.0M"
expect " pitch                 1      0    100K    100K    100K    100K" "the failed free leaves it live"
expect " host_pinned           2      1    128K    128K   64.0K   64.0K"
ok "device 0: peak 15847424 B, leaked 5345280 B, 1 failed free, pinned host, kinds"

key PgDn
wait_for " managed               1      1    4.0M    4.0M      0B      0B"
expect " async                 1      1    1.0M    1.0M      0B      0B"
expect " pool                  1      1    2.0M    2.0M      0B      0B"
expect " vmm_physical          1      1    2.0M    2.0M      0B      0B"
expect " vmm_reserve           1      1    8.0M    8.0M      0B      0B"
expect " vmm_map               1      1    2.0M    2.0M      0B      0B"
expect " array                 1      1   16.0K   16.0K      0B      0B"
ok "PgDn: the rest of the kind table (managed, async, pool, vmm_*, array)"

# ---------------------------------------------------------------------------
# The sites: the peak's largest and the 5 MiB leak are gpu_leaky_site's.
# ---------------------------------------------------------------------------
wait_for "Peak sites"
line_after "Peak sites" | grep -qE '^ +BYTES BLOCKS  KIND +CALLED CUDA \(function, file:line\) < caller' \
    || fail "no column header under Peak sites: $(line_after "Peak sites")"
line_after "BYTES BLOCKS  KIND" | grep -qE '^ +5\.0M +1  device +ev  fx_gpu_events\.c:[0-9]+ < gpu_leaky_site' \
    || fail "the peak's first site is not gpu_leaky_site's 5.0M: $(line_after "BYTES BLOCKS  KIND")"
ok "peak sites: gpu_leaky_site holds 5.0M of the peak"
key G
wait_for "Churn          alloc/free pairs per second"
# The leak list: header, then gpu_leaky_site's 5 MiB, the pitched block, the pinned block.
awk '/^ Leak sites/ { f = 1; next } f { print }' "$T/screen" | sed -n 2,4p > "$T/leaks"
sed -n 1p "$T/leaks" | grep -qE '^ +5\.0M +1  device +ev  fx_gpu_events\.c:[0-9]+ < gpu_leaky_site' \
    || fail "the first leak site is not gpu_leaky_site's 5.0M: $(cat "$T/leaks")"
sed -n 2p "$T/leaks" | grep -qE '^ +100K +1  pitch ' || fail "the pitched block does not leak: $(cat "$T/leaks")"
sed -n 3p "$T/leaks" | grep -qE '^ +64\.0K +1  host_pinned ' || fail "the pinned block does not leak: $(cat "$T/leaks")"
# Pairs per second depend on how fast the fixture ran: any number, one pair.
expect_re '^ +[0-9][0-9.]*[kMGT]? +1  vmm_reserve +ev  fx_gpu_events\.c' "churn in pairs per second"
ok "leak sites: gpu_leaky_site 5.0M, pitch 100K, host_pinned 64.0K; churn in pairs/s"

# G selected the last site row; twelve rows up (ten churn rows, two leak
# rows) is gpu_leaky_site's leak. Enter shows its stack under its row.
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do key k; done
key Enter
wait_for "#1  gpu_leaky_site  fx_gpu_events.c:"
awk '/^ Leak sites/ { f = 1; next } f { print }' "$T/screen" | sed -n 2,3p > "$T/leak"
sed -n 1p "$T/leak" | grep -qF "< gpu_leaky_site" && sed -n 2p "$T/leak" | grep -qF "1 allocs of 5.0M, 5.0M allocated" \
    || fail "the stack is not under gpu_leaky_site's leak row: $(cat "$T/leak")"
expect "#0  ev  fx_gpu_events.c:"
expect "#2  main  fx_gpu_events.c:"
expect "[fx_gpu_events]"
key Enter
wait_gone "#1  gpu_leaky_site  fx_gpu_events.c:"
ok "Enter shows gpu_leaky_site's stack (ev, gpu_leaky_site, main) under its row; again hides it"

# ---------------------------------------------------------------------------
# Device 1: 3 MiB leaked when its context was destroyed.
# ---------------------------------------------------------------------------
key Right
wait_for "GPU  device 1  (2 of 2)"
expect "Device         1"
expect "Peak           3145728 B (3.0 MiB) in 1 blocks at "
expect "Live at exit   0 B in 0 blocks"
expect "Leaked         3145728 B (3.0 MiB) in 1 blocks"
expect "at context destroy: 3145728 B (3.0 MiB) in 1 blocks"
expect "Calls          1 allocs, 0 frees, 0 failed frees, 0 unknown frees"
expect " device                1      0    3.0M    3.0M      0B    3.0M"
expect_not "gpu_leaky_site" "device 0's site on device 1"
key G
wait_for "3145728 B (3.0 MiB) of it freed by context destruction"
expect_re '^ +3\.0M +1  device +ev  fx_gpu_events\.c:[0-9]+ < worker'
ok "device 1 (Right): 3145728 B leaked at context destroy, allocated by worker"

key Left
wait_for "GPU  device 0  (1 of 2)"
expect "Peak           15847424 B (15.1 MiB)"
ok "Left: back to device 0"

key '?'
wait_for "In GPU"
expect "previous / next GPU device"
expect "show / hide the selected site's full stack"
key Escape
wait_for "GPU  device 0  (1 of 2)"
ok "help lists the GPU view's keys"

key q
wait_for "view-exit=0"

# ---------------------------------------------------------------------------
# A CPU-only trace: the view is there and says so.
# ---------------------------------------------------------------------------
key "clear; $MEMLENS view $T/counts.mlt; echo cpu-exit=\$?" Enter
wait_for "1Summary"
key 7
wait_for "no GPU allocations recorded in this trace"
expect_not "Peak sites"
key q
wait_for "cpu-exit=0"
ok "CPU-only trace: 7 says no GPU allocations recorded in this trace"

echo "all GPU viewer end-to-end checks passed"
exit 0
