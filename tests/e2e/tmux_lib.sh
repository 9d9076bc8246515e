# tmux_lib.sh - a private tmux server and screen checks for the viewer's
# terminal tests (test_viewer_tmux.sh, test_viewer_gpu_tmux.sh), sourced by
# them (POSIX sh): `ML_TMUX_TEST=NAME . tmux_lib.sh` after `set -u`.
#
# Sets T (a temporary folder, removed at exit) and defines tm (tmux on a
# socket of this test's own), fail, ok, capture (the pane "v" into
# $T/screen), wait_for / wait_gone (up to 15 s), expect / expect_re (a miss
# captures again for up to 5 s: tmux may capture a screen the viewer is
# still drawing), expect_not, key, dclick X Y (a double click), line N and
# line_after STRING.
# Exits 77 (ctest's "skipped") when tmux is not installed.

if ! command -v tmux >/dev/null 2>&1; then
    echo "tmux is not installed: skipped"
    exit 77
fi

T=$(mktemp -d "/tmp/ml_$ML_TMUX_TEST.XXXXXX")
SOCK=ml_${ML_TMUX_TEST}_$$
# No status line (the pane is the whole window) and no wait after Esc.
printf 'set -g status off\nset -s escape-time 0\n' > "$T/tmux.conf"
tm() { tmux -L "$SOCK" -f "$T/tmux.conf" "$@"; }
cleanup() {
    tm kill-server >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT INT TERM

fail() {
    echo "FAIL: $*"
    echo "----- screen -----"
    tm capture-pane -p -t v 2>/dev/null
    echo "------------------"
    exit 1
}
ok() { echo "ok: $*"; }

capture() { tm capture-pane -p -t v > "$T/screen"; }

# Waits up to 15 s for a fixed string on screen.
wait_for() {
    local i=0
    while [ $i -lt 150 ]; do
        capture
        grep -qF -- "$1" "$T/screen" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    fail "'$1' never appeared"
}

# Waits up to 15 s for a fixed string to leave the screen.
wait_gone() {
    local i=0
    while [ $i -lt 150 ]; do
        capture
        grep -qF -- "$1" "$T/screen" || return 0
        sleep 0.1
        i=$((i + 1))
    done
    fail "'$1' stayed on screen"
}

# The screen has a match of grep -$1 for $2, capturing again for up to 5 s.
screen_has() {
    local i=0
    until grep -q"$1" -- "$2" "$T/screen"; do
        [ $i -lt 50 ] || return 1
        sleep 0.1
        capture
        i=$((i + 1))
    done
}
# Line $1 of the screen holds $3 (grep -q$2: F fixed, E regex), waiting up
# to 5 s as screen_has does: a view's rows may be drawn a moment after the
# line a test waited for.
line_has() {
    local i=0
    until line "$1" | grep -q"$2" -- "$3"; do
        [ $i -lt 50 ] || return 1
        sleep 0.1
        capture
        i=$((i + 1))
    done
}
# A fixed string on screen.
expect() { screen_has F "$1" || fail "expected '$1' on screen${2:+ ($2)}"; }
# A line matching an extended regular expression.
expect_re() { screen_has E "$1" || fail "expected a line matching '$1'${2:+ ($2)}"; }
expect_not() { ! grep -qF -- "$1" "$T/screen" || fail "did not expect '$1' on screen${2:+ ($2)}"; }
key() { tm send-keys -t v "$@"; }
# One byte, from its code.
chr() { printf "\\$(printf '%03o' "$1")"; }
# A double click of the left button at column $1, row $2 (from 0), in the
# encoding the pane's terminal type reads (kmous): SGR (\E[<) or X10 (\E[M).
dclick() {
    local term e p r
    term=$(tm show -gv default-terminal 2>/dev/null)
    if [ "$(tput -T "${term:-screen}" kmous 2>/dev/null)" = "$(printf '\033[<')" ]; then
        e=$(printf '\033[<0;%d;%dM\033[<0;%d;%dm' $(($1 + 1)) $(($2 + 1)) $(($1 + 1)) $(($2 + 1)))
        tm send-keys -t v -l "$e$e"
    else
        p=$(printf '\033[M '; chr $((33 + $1)); chr $((33 + $2)))
        r=$(printf '\033[M#'; chr $((33 + $1)); chr $((33 + $2)))
        tm send-keys -t v -l "$p$r$p$r"
    fi
}
line() { sed -n "$1p" "$T/screen"; }
# The line after the first line containing $1 (fixed string).
line_after() { awk -v s="$1" 'f { print; exit } index($0, s) { f = 1 }' "$T/screen"; }
