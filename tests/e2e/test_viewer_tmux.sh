#!/bin/sh
# test_viewer_tmux.sh - the terminal viewer end to end, in a real terminal.
#
#   sh test_viewer_tmux.sh MEMLENS FX_COUNTS FX_GROW [FX_ADV_ARENA]
#
# A private tmux server runs an 80x24 shell. The test records fx_counts (known
# leaks: 1234 B from early_ctor and 3 x 1000 B from leaky_function) with the
# real `memlens run`, opens it with `memlens view`, drives it with send-keys
# (views, sort, open a site, search, help, resize), reads the screen with
# capture-pane, quits, and checks the terminal was restored: the shell's
# screen is back and stty shows echo and canonical mode. Then the error
# paths, SIGINT, and `memlens run --live` on fx_grow, whose heap grows for
# about three seconds: the numbers on screen must grow between two captures.
# With FX_ADV_ARENA (the advisor's fixture), the Suggestions view must list
# the strategy advisor's arena suggestion for parse_node and open its site.
#
# Exit 0: passed; 1: failed (the screen is printed); 77: tmux is missing.
set -u
MEMLENS=$1
FX_COUNTS=$2
FX_GROW=$3
FX_ADV_ARENA=${4:-}

ML_TMUX_TEST=viewer_tmux . "$(dirname "$0")/tmux_lib.sh"

# ---------------------------------------------------------------------------
# Record a program with known leaks and peak.
# ---------------------------------------------------------------------------
"$MEMLENS" run -q -o "$T/counts.mlt" -- "$FX_COUNTS" > /dev/null 2>&1
[ -s "$T/counts.mlt" ] || fail "memlens run wrote no trace"

# ---------------------------------------------------------------------------
# Errors that need no terminal.
# ---------------------------------------------------------------------------
out=$("$MEMLENS" view "$T/counts.mlt" 2>&1 | cat)
rc=$("$MEMLENS" view "$T/counts.mlt" > /dev/null 2>&1; echo $?)
[ "$rc" = 1 ] || fail "view with stdout not a terminal exited $rc, not 1"
echo "$out" | grep -qF "memlens report" || fail "no hint at memlens report without a terminal: $out"
ok "no terminal: exit 1 and a hint at memlens report"

# ---------------------------------------------------------------------------
# A shell in an 80x24 terminal.
# ---------------------------------------------------------------------------
tm new-session -d -s v -x 80 -y 24 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 PS1='ml-prompt\$ ' sh" \
    || fail "tmux cannot start"
wait_for "ml-prompt\$"
key "clear; echo before-the-view" Enter
wait_for "before-the-view"

# Missing and corrupted traces: a clear message, exit 1, no UI.
key "$MEMLENS view $T/missing.mlt; echo missing-exit=\$?" Enter
wait_for "missing-exit=1"
expect "no such trace"
printf 'this is not a trace at all' > "$T/garbage.mlt"
key "$MEMLENS view $T/garbage.mlt; echo garbage-exit=\$?" Enter
wait_for "garbage-exit=1"
expect "memlens: error:"
ok "missing and corrupted traces: a message and exit 1"
key "clear; echo before-the-view" Enter
wait_for "before-the-view"

# A trace that does not hold what its program started (no --follow-fork):
# the summary's warnings say so, as the run did on its stderr.
"$MEMLENS" run -q -o "$T/kids.mlt" -- sh -c '/bin/true; /bin/true; :' > /dev/null 2>&1
key "$MEMLENS view $T/kids.mlt; echo kids-exit=\$?" Enter
wait_for "1Summary"
expect_re "Warnings +not traced: 2 child processes started by"
key q
wait_for "kids-exit=0"
ok "summary: the children the trace does not hold are a warning"
key "clear; echo before-the-view" Enter
wait_for "before-the-view"

# ---------------------------------------------------------------------------
# memlens view: every view, sort, a site, search, help, resize, quit.
# ---------------------------------------------------------------------------
key "$MEMLENS view $T/counts.mlt; echo view-exit=\$?" Enter
wait_for "1Summary"
wait_for "exited with status 7"
expect "fx_counts"
expect "Peak heap      4234 B (4.1 KiB)"
expect "Leaked         3000 B (2.9 KiB) in 3 blocks"
expect "Reachable      1234 B (1.2 KiB) in 1 block (not leaked)"
ok "summary: peak 4234 B, leaked 3000 B in 3 blocks, 1234 B reachable beside it"

key 2
wait_for "SITE (function, file:line)"
expect "leaky_function"
expect "early_ctor"
# Sorted by peak: leaky_function (3000 B) first, early_ctor (1234 B) second.
line 3 | grep -q "leaky_function" || fail "leaky_function is not the first site by peak"
line 3 | grep -q " 2.9K .* 3 " || fail "leaky_function's row lacks 2.9K and 3 calls: $(line 3)"
line 4 | grep -q "early_ctor" || fail "early_ctor is not the second site by peak"
line 4 | grep -q " 1.2K " || fail "early_ctor's row lacks 1.2K: $(line 4)"
ok "sites: leaky_function 2.9K in 3 calls, then early_ctor 1.2K"

key C
wait_for "Sorted by calls."
line 2 | grep -q "CALLS" || fail "calls is not the sort column: $(line 2)"
line 3 | grep -q " main " || fail "the first site by calls is not main: $(line 3)"
key L
wait_for "Sorted by leaked."
line 3 | grep -q "leaky_function" || fail "the first site by leaked is not leaky_function: $(line 3)"
key P
wait_for "Sorted by peak."
ok "sort by calls, leaked, peak"

key Enter
wait_for "(Esc goes back)"
expect " 0  leaky_function"
expect "fx_counts.c:"
expect "Leaked      3000 B (2.9 KiB) in 3 blocks"
expect "Allocated   3000 B (2.9 KiB) in 3 calls"
ok "site view: full stack with file:line, leaked 3000 B in 3 blocks"
key Escape
wait_for "SITE (function, file:line)"

key / e a r l y Enter
wait_for 'Filter "early": 1 of'
expect "early_ctor"
expect_not "leaky_function" "filtered out"
ok "search: /early keeps early_ctor only"
key Escape
wait_for "leaky_function"

key 3
wait_for "TOP-DOWN"
expect "_start"
key 4
wait_for "Timeline"
expect "peak 4.1K"
key 5
wait_for "Heap map at the peak"
# A double click on the heap map below its last cell (fx_counts' map is one
# row of a few cells in a grid of 12 rows): the click selects the last cell,
# as the draw does, and the double click's Enter opens the site pinning it.
# It read past the map's cells instead (a double click is a click and an
# Enter with no draw between them): a crash, or a site of no cell.
key End
wait_for "Pinned by:"
last=$(sed -n 's/^ Cell \([0-9][0-9]*\): .*/\1/p' "$T/screen")
pin=$(line_after "Pinned by:" | sed -n 's/.* #\([0-9][0-9]*\) .*/\1/p')
[ -n "$last" ] && [ -n "$pin" ] || fail "no last cell or no site pinning it"
key Home
wait_for "Cell 0:"
dclick 5 10
wait_for "(Esc goes back)"
expect "Site #$pin " "the site pinning the last cell, $last"
key Escape
wait_for "Heap map at the peak"
expect "Cell $last:" "the click below the map selected the last cell"
ok "heap map: a double click below the map opens site #$pin, pinning the last cell $last"
key 6
wait_for "STRATEGY"
key '?'
wait_for "Everywhere"
key Escape
wait_for "STRATEGY"
ok "tree, timeline, heap map, suggestions and help views"

tm resize-window -t v -x 100 -y 30
# The old bottom bar stays on row 24 until the viewer has redrawn.
i=0
until capture && [ "$(wc -l < "$T/screen")" -ge 30 ] && tail -n 1 "$T/screen" | grep -qF "qQuit"; do
    [ $i -lt 50 ] || break
    sleep 0.1
    i=$((i + 1))
done
[ "$(wc -l < "$T/screen")" -ge 30 ] || fail "the screen did not grow"
tail -n 1 "$T/screen" | grep -qF "qQuit" || fail "the bottom bar is not on the last of 30 rows"
tm resize-window -t v -x 50 -y 12
wait_for "Terminal too small: 50x12."
tm resize-window -t v -x 80 -y 24
wait_for "1Summary"
ok "resize to 100x30, 50x12 (too small) and back"

key q
wait_for "view-exit=0"
expect_not "1Summary" "after q"
expect "before-the-view"
key "stty -a | tr ' ' '\n' | grep -x -e echo -e icanon | tr '\n' ' '; echo stty-\$((1+1))done" Enter
wait_for "stty-2done"
expect "icanon echo"
ok "q: exit 0, the shell's screen is back, echo and canonical mode restored"

# The strategy advisor's suggestion, worked out in the background.
if [ -n "$FX_ADV_ARENA" ]; then
    "$MEMLENS" run -q -o "$T/arena.mlt" -- "$FX_ADV_ARENA" > /dev/null 2>&1
    key "clear; $MEMLENS view $T/arena.mlt; echo arena-exit=\$?" Enter
    wait_for "1Summary"
    key 6
    wait_for "parse_node"
    line 3 | grep -q "^ arena .*parse_node" || fail "no arena suggestion for parse_node: $(line 3)"
    expect "allocates its blocks in"
    key Enter
    wait_for "(Esc goes back)"
    expect "Suggestion  [arena] parse_node()"
    key q
    wait_for "arena-exit=0"
    ok "suggestions: the advisor's arena suggestion for parse_node, and its site"
fi

# SIGINT restores the terminal too.
key "clear; echo before-sigint" Enter
wait_for "before-sigint"
key "$MEMLENS view $T/counts.mlt; echo sigint-exit=\$?" Enter
wait_for "1Summary"
key C-c
wait_for "sigint-exit=130"
expect "before-sigint"
key "stty -a | tr ' ' '\n' | grep -x -e echo -e icanon | tr '\n' ' '; echo stty-\$((2+1))done" Enter
wait_for "stty-3done"
expect "icanon echo"
ok "Ctrl-C: exit 130 and the terminal restored"

# A terminal that goes away with no SIGHUP for the viewer: the kernel sends
# it to the terminal's session, and this viewer runs in a session of its own
# (setsid; SIGHUP blocked does the same). It exits as on SIGHUP, 129; its
# reads failed at once and it spun at full CPU for ever instead.
if command -v setsid >/dev/null 2>&1; then
    cp "$T/counts.mlt" "$T/hangup.mlt"
    tm new-session -d -s h -x 80 -y 24 \
        "env LANG=C.UTF-8 setsid -w sh -c '$MEMLENS view $T/hangup.mlt; echo \$? > $T/hangup.rc'" \
        || fail "tmux cannot start a second session"
    i=0
    until tm capture-pane -p -t h 2>/dev/null | grep -qF "1Summary"; do
        [ $i -lt 150 ] || fail "the viewer in a session of its own did not start"
        sleep 0.1
        i=$((i + 1))
    done
    tm kill-session -t h
    i=0
    while [ ! -s "$T/hangup.rc" ] && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    if [ ! -s "$T/hangup.rc" ]; then
        pid=$(pgrep -f "view $T/hangup.mlt")
        [ -n "$pid" ] && kill $pid
        fail "the viewer still runs 10 s after its terminal went away"
    fi
    [ "$(cat "$T/hangup.rc")" = 129 ] || fail "the viewer exited $(cat "$T/hangup.rc") after its terminal went away, not 129"
    ok "terminal gone without a SIGHUP (setsid): the viewer exits 129"
fi

# ---------------------------------------------------------------------------
# memlens run --live: the numbers grow while the program runs.
# ---------------------------------------------------------------------------
key "clear" Enter
key "$MEMLENS run --live -o $T/grow.mlt -- $FX_GROW 150 20 > $T/grow.out 2>&1; echo live-exit=\$?" Enter
wait_for "LIVE, running"
wait_for "Calls"
calls() { capture; tr -d , < "$T/screen" | sed -n 's/.*Calls  *\([0-9][0-9]*\) allocations*.*/\1/p' | head -n 1; }
# The first capture once the program allocates, the second a second later.
i=0
c1=$(calls)
while [ "${c1:-0}" -lt 1 ] && [ $i -lt 100 ]; do
    sleep 0.1
    c1=$(calls)
    i=$((i + 1))
done
sleep 1
c2=$(calls)
[ -n "$c1" ] && [ -n "$c2" ] || fail "no allocation count on the live summary"
[ "$c2" -gt "$c1" ] || fail "the allocation count did not grow: $c1 then $c2"
ok "live: allocations grew from $c1 to $c2 between two captures"
key 2
wait_for "grow_heap"
wait_for "The program has ended: final data. q quits."
expect "exited 0"
line 3 | grep -q "9.4M .*grow_heap" || fail "grow_heap does not hold the 9.4M peak: $(line 3)"
ok "live: after the program ended the view stays, with the final 9.4M peak of grow_heap"
key q
wait_for "live-exit=0"
grep -qF "peak heap 9.4 MiB" "$T/grow.out" || fail "no summary after the live view: $(cat "$T/grow.out")"
ok "live: q, then memlens' summary (peak heap 9.4 MiB)"

# Ctrl-Z in the live view: memlens stops with the program, and while they
# are stopped the terminal is the shell's: its screen, echo, CR read as
# Enter. The view kept curses' modes instead (memlens catches SIGTSTP for
# the program, so curses had no handler of its own): the shell's lines were
# hidden on the alternate screen, and Enter did not end a command. fg brings
# the view back.
key "clear; echo before-the-stop" Enter
wait_for "before-the-stop"
key "$MEMLENS run --live -o $T/stop.mlt -- $FX_GROW 1000 20 > $T/stop.out 2>&1" Enter
wait_for "LIVE, running"
key C-z
wait_for "Stopped"
expect "before-the-stop"
[ "$(tm display -p -t v '#{alternate_on}')" = 0 ] || fail "the live view kept the alternate screen while stopped"
key "stty -a | tr ' ' '\n' | grep -x -e echo -e icanon -e icrnl | tr '\n' ' '; echo stty-\$((3+1))done" Enter
wait_for "stty-4done"
expect "icrnl icanon echo"
key "fg" Enter
wait_for "LIVE, running"
expect "1Summary"
key C-c
wait_for "killed by signal 2"
key q
key "echo after-the-stop-\$((4+1))" Enter
wait_for "after-the-stop-5"
grep -qF "the traces are saved" "$T/stop.out" || fail "no trace saved after Ctrl-Z, fg, Ctrl-C: $(cat "$T/stop.out")"
ok "live: Ctrl-Z gives the terminal to the shell (its screen, echo, icrnl), fg brings the view back"

echo "all viewer end-to-end checks passed"
exit 0
