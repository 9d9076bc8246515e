#!/bin/bash
# test_cli_reach.sh - what the memlens command says to people (issue 15.5).
#
#   bash test_cli_reach.sh MEMLENS FX_GROW SOURCE_DIR BUILD_DIR
#
# - every verb answers -h and --help on stdout with status 0, and each option
#   its --help names is in the man page and in the bash completion;
# - `report` says what it wrote, with the file's size in the units of
#   ml_fmt_bytes; -q leaves stderr empty; --summary prints the summary too;
# - `diff` of two recordings of fx_grow (10 and 20 steps of 64 KiB, 1 ms
#   apart) prints its totals in KiB/MiB under a header, with the exact values
#   of this program (peak 655,440 -> 1,310,880 bytes; 11 -> 21 allocation
#   calls) and the words of the report ("peak heap", "definite leaks"); the
#   gate names the metric the same way;
# - `cmake --install` into a temporary prefix installs the man page and the
#   bash and zsh completions, `man -l` renders the page (when man is
#   present), and the bash completion completes verbs, options and values.
set -u
ML=${1:?usage: test_cli_reach.sh MEMLENS FX_GROW SOURCE_DIR BUILD_DIR}
FX_GROW=${2:?}
SRC=${3:?}
BUILD=${4:?}

W=$(mktemp -d "${TMPDIR:-/tmp}/ml_cli_reach.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
FAILS=0
ok() { # ok CONDITION-STATUS MESSAGE
    if [ "$1" -eq 0 ]; then echo "ok   $2"; else echo "FAIL $2"; FAILS=$((FAILS + 1)); fi
}
check() { # check MESSAGE COMMAND...: ok when the command succeeds
    local what=$1
    shift
    "$@"
    ok $? "$what"
}
same() { # same MESSAGE EXPECTED ACTUAL
    if [ "$2" == "$3" ]; then
        echo "ok   $1"
    else
        echo "FAIL $1"
        echo "  expected: $2"
        echo "  actual:   $3"
        FAILS=$((FAILS + 1))
    fi
}

# --- --help -----------------------------------------------------------------
MAN=$SRC/docs/man/memlens.1
BASHC=$SRC/docs/completion/memlens.bash
ZSHC=$SRC/docs/completion/_memlens
for verb in "" run attach report diff view dump; do
    for h in -h --help; do
        "$ML" $verb $h > "$W/help.out" 2> "$W/help.err"
        rc=$?
        ok $rc "memlens $verb $h exits 0"
        check "memlens $verb $h prints its usage on stdout" grep -q '^usage: memlens' "$W/help.out"
        check "memlens $verb $h prints nothing on stderr" test ! -s "$W/help.err"
    done
    [ -z "$verb" ] && continue
    # Each long option of the usage is documented and completed.
    missing=
    for opt in $(grep -o -- '--[a-z][a-z-]*' "$W/help.out" | sort -u); do
        roff=$(printf '%s' "$opt" | sed 's/-/\\\\-/g')
        grep -q -- "$roff" "$MAN" || missing="$missing man:$opt"
        grep -q -- "$opt" "$BASHC" || missing="$missing bash:$opt"
        grep -qE -- "$opt(\\[|[,}])" "$ZSHC" || missing="$missing zsh:$opt"
    done
    same "every option of memlens $verb --help is in the man page and the completions" "" "$missing"
done
"$ML" dump > /dev/null 2>&1
ok $(($? == 2 ? 0 : 1)) "memlens dump without a trace is a usage error (exit 2)"

# --- report: what it wrote ------------------------------------------------------
"$ML" run -q -o "$W/a.mlt" -- "$FX_GROW" 10 1 > /dev/null 2>&1
ok $? "recorded fx_grow 10 1"
"$ML" run -q -o "$W/b.mlt" -- "$FX_GROW" 20 1 > /dev/null 2>&1
ok $? "recorded fx_grow 20 1"

"$ML" report "$W/a.mlt" --no-advisor --json "$W/a.json" --folded "$W/a.folded" > "$W/r.out" 2> "$W/r.err"
ok $? "report --json --folded exits 0"
fmt() { # ml_fmt_bytes: B below 1 KiB, else one decimal of the largest unit
    awk -v b="$1" 'BEGIN { if (b < 1024) { printf "%d B", b; exit }
        split("KiB MiB GiB TiB", u, " "); v = b; i = 0
        while (v >= 1024 && i < 4) { v /= 1024; i++ }
        printf "%.1f %s", v, u[i] }'
}
want="memlens: wrote $W/a.json ($(fmt "$(stat -c %s "$W/a.json")"))
memlens: wrote $W/a.folded ($(fmt "$(stat -c %s "$W/a.folded")"))"
same "report names each file it wrote, with its size" "$want" "$(cat "$W/r.err")"
check "report with output files prints no summary by default" test ! -s "$W/r.out"

"$ML" report "$W/a.mlt" --no-advisor -q --html "$W/a.html" > "$W/q.out" 2> "$W/q.err"
ok $? "report -q --html exits 0"
check "report -q: nothing on stderr" test ! -s "$W/q.err"
check "report -q: nothing on stdout" test ! -s "$W/q.out"
check "report -q still wrote the page" test -s "$W/a.html"

"$ML" report "$W/a.mlt" --no-advisor -q --summary --json "$W/a2.json" > "$W/s.out" 2> "$W/s.err"
"$ML" report "$W/a.mlt" > "$W/plain.out" 2> /dev/null
same "report --summary prints the summary of a plain report" "$(cat "$W/plain.out")" "$(cat "$W/s.out")"
check "the summary names the peak" grep -q '^peak heap: 640.1 KiB in 11 blocks' "$W/s.out"
"$ML" report "$W/a.mlt" --summary --json - > /dev/null 2> "$W/e.err"
ok $(($? == 2 ? 0 : 1)) "report --summary --json - is a usage error (both want stdout)"

# --- diff: units, headers, words ---------------------------------------------
"$ML" diff "$W/a.mlt" "$W/b.mlt" --json "$W/d.json" --fail-on-increase 5 > "$W/d.out" 2> "$W/d.err"
ok $(($? == 3 ? 0 : 1)) "diff --fail-on-increase 5 exits 3 (the peak doubled)"
tot() { # tot SIDE: the diff JSON's totals.leaked_bytes.SIDE (definite + indirect + possible, not suppressed)
    /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["leaked_bytes"][sys.argv[2]])' \
        "$W/d.json" "$1"
}
lb=$(tot base)
ln=$(tot new)
lpct=
if [ "${lb:-0}" -gt 0 ]; then lpct=$(awk -v b="$lb" -v n="$ln" 'BEGIN { printf "%+.1f%%", (n - b) * 100 / b }')
elif [ "${ln:-0}" -gt 0 ]; then lpct="(new)"; fi
want=$(printf '%s\n' "memlens diff: $W/a.mlt -> $W/b.mlt" \
    "$(printf '  %-16s %12s    %12s  %s' '' base new change)" \
    "$(printf '  %-16s %12s -> %12s  %s' 'peak heap' '640.1 KiB' '1.3 MiB' '+100.0%')" \
    "$(printf '  %-16s %12s -> %12s  %s' 'leaked at exit' "$(fmt "$lb")" "$(fmt "$ln")" "$lpct")" \
    "$(printf '  %-16s %12s -> %12s  %s' 'allocation calls' 11 21 '+90.9%')" \
    "$(printf '  %-16s %12s -> %12s  %s' 'bytes allocated' '640.1 KiB' '1.3 MiB' '+100.0%')" | sed 's/ *$//')
same "diff: the totals in human units under a header" "$want" "$(head -6 "$W/d.out" | sed 's/ *$//')"
check "diff: the site list has column headers" \
    grep -q '^   peak heap       leaked      calls  status   site$' "$W/d.out"
check "diff: grow_heap's row: +640.0 KiB at the peak, +320.0 KiB live at exit, +10 calls" \
    grep -q '^ *+640.0 KiB *+320.0 KiB *+10  changed  grow_heap  fx_grow.c:12  <- main$' "$W/d.out"
check "diff: no raw byte counts" test -z "$(grep -E '[0-9]{6,}' "$W/d.out")"
check "diff gate: the peak named as in the report, in human units" \
    grep -q '^memlens: gate exceeded: peak heap grew 100.00% (640.1 KiB -> 1.3 MiB) > --fail-on-increase 5%$' "$W/d.err"
check "diff gate: allocation calls" \
    grep -q '^memlens: gate exceeded: allocation calls grew 90.91% (11 -> 21) > --fail-on-increase 5%$' "$W/d.err"
check "diff gate: no JSON key names" test -z "$(grep -E 'peak_bytes|leaked_bytes|alloc_calls' "$W/d.err")"
# strtod took "inf" (a gate that never fails: the doubled peak passed),
# "1e400" and "0x32" (50); a percentage is decimal digits and a point.
for v in inf 1e400 0x32 5% . -1; do
    "$ML" diff "$W/a.mlt" "$W/b.mlt" --fail-on-increase "$v" > /dev/null 2> "$W/g.err"
    ok $(($? == 2 ? 0 : 1)) "diff --fail-on-increase $v is a usage error"
    check "... that says what it takes ($v)" grep -q 'takes a percentage, like 5 or 0.5$' "$W/g.err"
done
"$ML" diff "$W/a.mlt" "$W/b.mlt" --fail-on-increase 150. > /dev/null 2>&1
ok $? "diff --fail-on-increase 150. passes (the peak grew 100 %)"

# --- install: man page and completions ----------------------------------------
cmake --install "$BUILD" --prefix "$W/prefix" > "$W/install.log" 2>&1
ok $? "cmake --install into a temporary prefix"
for f in bin/memlens share/man/man1/memlens.1 share/bash-completion/completions/memlens \
         share/zsh/site-functions/_memlens; do
    check "installed $f" test -s "$W/prefix/$f"
done
check "the installed man page has its version" grep -q "memlens $("$ML" --version | sed -n '1s/memlens //p')" \
    "$W/prefix/share/man/man1/memlens.1"
if command -v man > /dev/null 2>&1; then
    MANWIDTH=80 man -l "$W/prefix/share/man/man1/memlens.1" > "$W/man.txt" 2> "$W/man.err"
    ok $? "man -l renders the page"
    check "man: no warnings" test ! -s "$W/man.err"
    tr -s ' \n' '  ' < "$W/man.txt" > "$W/man.flat"
    check "man: the NAME line" grep -q 'memlens - record and analyse every heap allocation' "$W/man.flat"
    check "man: the report verb and its --summary" grep -q -- '--summary' "$W/man.txt"
else
    echo "note: man is not installed; the page was not rendered"
fi

# The bash completion, as bash-completion would call it.
complete_words() { # complete_words WORD... : COMPREPLY for the last word
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1));
             _memlens; printf "%s\n" "${COMPREPLY[@]}" | sort' _ \
        "$W/prefix/share/bash-completion/completions/memlens" "$@"
}
same "bash: memlens re<TAB>" "report" "$(complete_words memlens re)"
same "bash: memlens report --fo<TAB>" "$(printf '%s\n' --folded --folded-metric --force)" \
    "$(complete_words memlens report x.mlt --fo)"
same "bash: --folded-metric <TAB>" "$(printf '%s\n' alloc calls leaked peak temporary)" \
    "$(complete_words memlens report x.mlt --folded-metric '')"
same "bash: --unwind <TAB>" "$(printf '%s\n' fp libunwind)" "$(complete_words memlens run --unwind '')"
mkdir -p "$W/cwd/sub" && touch "$W/cwd/one.mlt" "$W/cwd/two.txt"
same "bash: memlens view <TAB> offers traces and folders" "$(printf '%s\n' one.mlt sub)" \
    "$(cd "$W/cwd" && complete_words memlens view '')"
if command -v zsh > /dev/null 2>&1; then
    zsh -n "$W/prefix/share/zsh/site-functions/_memlens"
    ok $? "zsh: the completion parses"
fi

echo "$FAILS failures"
[ $FAILS -eq 0 ]
