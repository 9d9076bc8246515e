#!/usr/bin/env bash
# compare_outputs.sh - proof that a change of structure changed no output.
#
# Records every fixture program and the real programs of
# tests/e2e/test_real_programs.sh once (with one build), then runs `memlens
# report` (text, --json, --folded; from the saved analysis and with
# --replay), `memlens diff` and `memlens dump` on each trace with two builds,
# and compares the outputs byte for byte. The traces are the same files for
# both builds, so every difference is the code's.
#
# usage:
#   tests/compare_outputs.sh record BUILD DIR      record the traces into DIR
#   tests/compare_outputs.sh outputs BUILD DIR OUT write every output of BUILD on DIR's traces to OUT
#   tests/compare_outputs.sh compare OLD_BUILD NEW_BUILD [DIR]
#                                                  record with OLD (unless DIR holds traces),
#                                                  write both builds' outputs, diff them
# Environment: ML_COMPARE_HTML=1 also compares the HTML pages; ML_COMPARE_ADVISOR=0 adds
# --no-advisor to the JSON reports (faster).
set -u
die() { echo "compare_outputs: $*" >&2; exit 2; }

fixtures() { # the fixture programs and their arguments, one per line: NAME|ARGS
    cat <<'EOF'
memlens-demo|
fx_counts|
fx_threads|
fx_crash|
fx_fork|
fx_sample|
fx_cpp|
fx_jemalloc|
fx_dlopen|
fx_leaks|
fx_frag|
fx_inline|
fx_grow|
fx_adv_arena|
fx_adv_clean|
fx_adv_lifetimes|
fx_adv_realloc|
fx_adv_slab|
fx_adv_temp|
fx_gpu_events|
fx_gpu_events|leak 8
EOF
}

record() {
    local B=$1 D=$2
    [ -x "$B/memlens" ] || die "no memlens in $B"
    mkdir -p "$D"
    export PYTHONHASHSEED=0 GIT_PAGER=cat PAGER=cat LC_ALL=C TZ=UTC GIT_CONFIG_NOSYSTEM=1
    local n=0
    while IFS='|' read -r fx args; do
        [ -x "$B/$fx" ] || continue
        n=$((n + 1))
        # shellcheck disable=SC2086
        (cd "$D" && "$B/memlens" run -q -o "$D/$(printf '%02d' $n)-$fx.mlt" -- "$B/$fx" $args \
            > /dev/null 2>&1)
    done < <(fixtures)
    # The real programs of test_real_programs.sh, with the same inputs.
    local W=$D/work
    mkdir -p "$W"
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
EOF
    {
        echo "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);"
        echo "BEGIN;"
        for i in $(seq 1 3000); do echo "INSERT INTO t(name, v) VALUES('n$((i * 7919 % 3000))', $i.5);"; done
        echo "COMMIT;"
        echo "CREATE INDEX t_name ON t(name);"
        echo "SELECT count(*), sum(v), min(name), max(name) FROM t;"
    } > "$W/work.sql"
    (cd "$W" && rm -rf repo && mkdir repo && cd repo && git init -q . && for c in 1 2 3; do
        for i in $(seq 1 40); do printf 'file %s commit %s\n%s\n' "$i" "$c" "$(seq 1 $((i + c)))" > "f$i.txt"; done
        git add -A && git -c user.name=t -c user.email=t@x commit -qm "commit $c"; done)
    PYTHONMALLOC=malloc "$B/memlens" run -q -o "$D/90-python3.mlt" -- /usr/bin/python3 "$W/work.py" > /dev/null 2>&1
    "$B/memlens" run -q -o "$D/91-perl.mlt" -- /usr/bin/perl "$W/work.pl" > /dev/null 2>&1
    "$B/memlens" run -q -o "$D/92-sqlite3.mlt" -- /usr/bin/sqlite3 :memory: ".read $W/work.sql" > /dev/null 2>&1
    "$B/memlens" run -q -o "$D/93-git-log.mlt" -- /usr/bin/git -C "$W/repo" log --stat > /dev/null 2>&1
    "$B/memlens" run -q -o "$D/94-git-rev-list.mlt" -- /usr/bin/git -C "$W/repo" rev-list --objects --all > /dev/null 2>&1
    # A trace cut in the middle (the analyser's truncated-tail path).
    local big
    big=$(ls -S "$D"/*.mlt | head -1)
    head -c $(($(stat -c %s "$big") / 2)) "$big" > "$D/95-cut.mlt"
    ls "$D"/*.mlt | wc -l
}

outputs() {
    local B=$1 D=$2 O=$3
    mkdir -p "$O"
    # With the advisor: each build's own advice, not what the build before
    # it saved into the same trace (a report saves its advice by default).
    local adv=(--no-save-advice)
    [ "${ML_COMPARE_ADVISOR:-1}" = 0 ] && adv=(--no-advisor)
    local prev=""
    for t in "$D"/*.mlt; do
        local n
        n=$(basename "$t" .mlt)
        "$B/memlens" report "$t" > "$O/$n.text" 2> "$O/$n.text.err"
        echo "rc=$?" >> "$O/$n.text"
        "$B/memlens" report -q "$t" "${adv[@]}" --json "$O/$n.json" --folded "$O/$n.folded" \
            > /dev/null 2>&1
        echo "rc=$?" >> "$O/$n.folded"
        "$B/memlens" report -q --replay "$t" "${adv[@]}" --json "$O/$n.replay.json" > /dev/null 2>&1
        "$B/memlens" report --replay "$t" > "$O/$n.replay.text" 2>&1
        for m in calls peak leaked temporary; do
            "$B/memlens" report -q "$t" --no-advisor --folded "$O/$n.folded-$m" --folded-metric $m \
                > /dev/null 2>&1
        done
        if [ "${ML_COMPARE_HTML:-0}" = 1 ]; then
            "$B/memlens" report -q "$t" "${adv[@]}" --html "$O/$n.html" > /dev/null 2>&1
        fi
        "$B/memlens" dump "$t" > "$O/$n.dump" 2>&1
        if [ -n "$prev" ]; then
            "$B/memlens" diff "$prev" "$t" --json "$O/$n.diff.json" > "$O/$n.diff.text" 2>&1
            echo "rc=$?" >> "$O/$n.diff.text"
        fi
        prev=$t
    done
}

compare() {
    local OLD=$1 NEW=$2 D=${3:-}
    if [ -z "$D" ]; then
        D=$(mktemp -d /tmp/memlens-compare-XXXXXX)
        echo "recording with $OLD into $D"
        record "$OLD" "$D/traces" > /dev/null
        D=$D/traces
    fi
    local R
    R=$(mktemp -d /tmp/memlens-compare-out-XXXXXX)
    outputs "$OLD" "$D" "$R/old"
    outputs "$NEW" "$D" "$R/new"
    local nfiles ndiff=0
    nfiles=$(ls "$R/old" | wc -l)
    # The advisor's own run time is the one field that differs between two
    # runs, in the JSON and in the page's data.
    for f in "$R"/old/*.json "$R"/new/*.json "$R"/old/*.html "$R"/new/*.html; do
        [ -e "$f" ] && sed -i 's/"seconds": [0-9.e+-]*/"seconds": _/g' "$f"
    done
    for f in "$R"/old/*; do
        local g=$R/new/$(basename "$f")
        if [ ! -e "$g" ]; then
            echo "MISSING in new: $(basename "$f")"
            ndiff=$((ndiff + 1))
        elif ! cmp -s "$f" "$g"; then
            echo "DIFFERS: $(basename "$f")"
            diff "$f" "$g" | head -8
            ndiff=$((ndiff + 1))
        fi
    done
    for g in "$R"/new/*; do
        [ -e "$R/old/$(basename "$g")" ] || { echo "EXTRA in new: $(basename "$g")"; ndiff=$((ndiff + 1)); }
    done
    echo "compared $nfiles outputs of $(ls "$D"/*.mlt | wc -l) traces: $ndiff differ (outputs in $R)"
    [ $ndiff -eq 0 ]
}

cmd=${1:-}
shift || true
case "$cmd" in
record) [ $# -eq 2 ] || die "usage: record BUILD DIR"; record "$(realpath "$1")" "$(realpath -m "$2")" ;;
outputs) [ $# -eq 3 ] || die "usage: outputs BUILD DIR OUT"; outputs "$(realpath "$1")" "$(realpath "$2")" "$(realpath -m "$3")" ;;
compare) [ $# -ge 2 ] || die "usage: compare OLD_BUILD NEW_BUILD [DIR]"
    compare "$(realpath "$1")" "$(realpath "$2")" "${3:+$(realpath "$3")}" ;;
*) die "usage: $0 record|outputs|compare ..." ;;
esac
