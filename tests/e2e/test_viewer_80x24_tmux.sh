#!/bin/sh
# test_viewer_80x24_tmux.sh - the viewer is usable at 80x24 (issue 15, item 4).
#
#   sh test_viewer_80x24_tmux.sh MEMLENS FX_LONGNAME FX_ADV_CHURN [FX_WIDENAME]
#
# In an 80x24 tmux terminal, on traces recorded with the real `memlens run`:
#   - fx_longname: no screen line is wider than 80 columns in any view; the
#     function of a long C++ name (…::grow_bucket_array) stays visible in the
#     Sites, Call tree and Site views; Right scrolls the full name into view;
#     the site numbers are the JSON report's sites[].id; at the timeline's
#     start and end the cursor '^' sits beside the time labels, which stay
#     whole; a live set of 1,000,000 blocks and one of 1 block line up, and
#     say "1 block";
#   - fx_adv_churn: the pool suggestion's evidence is words and numbers with
#     units ("calls avoided 2,000,000"), no JSON ('{', '"');
#   - fx_widename (optional): a site whose file name is CJK, two columns a
#     character in the terminal: its Sites row stays in its columns (the
#     wide characters drawn as '?'), with its line number, and the next row
#     starts where it should.
#
# Exit 0: passed; 1: failed (the screen is printed); 77: tmux is missing.
set -u
MEMLENS=$1
FX_LONGNAME=$2
FX_ADV_CHURN=$3
FX_WIDENAME=${4:-}

ML_TMUX_TEST=viewer_80x24 . "$(dirname "$0")/tmux_lib.sh"

"$MEMLENS" run -q -o "$T/long.mlt" -- "$FX_LONGNAME" > /dev/null 2>&1
[ -s "$T/long.mlt" ] || fail "memlens run wrote no trace of fx_longname"
"$MEMLENS" report "$T/long.mlt" --json "$T/long.json" > /dev/null 2>&1 || fail "memlens report --json failed"
"$MEMLENS" run -q -o "$T/churn.mlt" -- "$FX_ADV_CHURN" > /dev/null 2>&1
[ -s "$T/churn.mlt" ] || fail "memlens run wrote no trace of fx_adv_churn"

# The JSON's id of the site whose headline frame is FUNCTION (a substring).
json_id() {
    /usr/bin/python3 - "$T/long.json" "$1" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ids = [s["id"] for s in d["sites"] if sys.argv[2] in s["frames"][s.get("headline", 0)]["function"]]
print(ids[0] if len(ids) == 1 else "none")
EOF
}
ID_LONG=$(json_id grow_bucket_array)
ID_MANY=$(json_id make_many)
case "$ID_LONG$ID_MANY" in *none*) fail "the JSON report does not have one site each: $ID_LONG $ID_MANY" ;; esac

# Every line of the screen is at most 80 columns wide (wc -L: display width,
# not bytes).
narrow() {
    capture
    w=$(LC_ALL=C.UTF-8 wc -L < "$T/screen")
    [ "$w" -le 80 ] || fail "a line of $w columns in $1"
}

tm new-session -d -s v -x 80 -y 24 "env LANG=C.UTF-8 LC_ALL=C.UTF-8 PS1='ml-prompt\$ ' sh" \
    || fail "tmux cannot start"
wait_for "ml-prompt\$"
key "clear; $MEMLENS view $T/long.mlt; echo view-exit=\$?" Enter
wait_for "1Summary"
wait_for "exited with status 0"

# Summary: every value whole at 80 columns (the long ones wrap).
expect "Leaked         4096 B (4.0 KiB) in 1 block"
expect_re "external fragmentation of free heap [0-9]+%"
narrow "the Summary"
ok "summary: '1 block', the fragmentation line whole"

# Sites: the long name cut in its middle, the JSON's site numbers.
key 2
wait_for "SITE (function, file:line)"
expect "grow_bucket_array" "in Sites"
narrow "the Sites view"
row=$(grep -F "grow_bucket_array" "$T/screen") || fail "grow_bucket_array is not visible in Sites"
echo "$row" | grep -qF "…::grow_bucket_array" || fail "the long name is not cut in its middle: $row"
echo "$row" | grep -qE " #$ID_LONG …::grow_bucket_array " \
    || fail "grow_bucket_array's site is not #$ID_LONG as in the JSON: $row"
grep -qE " #$ID_MANY make_many  fx_longname.cpp:29" "$T/screen" \
    || fail "make_many's site is not #$ID_MANY as in the JSON"
ok "sites: …::grow_bucket_array is #$ID_LONG and make_many #$ID_MANY, as in the JSON report"

# Sideways: the qualifiers come into view.
key L
wait_for "Sorted by leaked."
line_has 3 F "grow_bucket_array" || fail "grow_bucket_array is not the first site by leaked: $(line 3)"
key Right Right Right Right
wait_for "detail::SegmentedHashTable"
narrow "Sites scrolled sideways"
key Left Left Left Left
wait_for "…::grow_bucket_array"
ok "sites: Right scrolls the full name into view, Left back"

# The site: its number in the header, the function in the stack.
key Enter
wait_for "(Esc goes back)"
expect "Site #$ID_LONG  (Esc goes back)"
expect_re "^ Function    memlens_fixture::…::grow_bucket_array  fx_longname.cpp:17"
expect_re "^ +0  memlens_fixture::…::grow_bucket_array  fx_longname.cpp:17"
expect "Leaked      4096 B (4.0 KiB) in 1 block (definite)"
narrow "the Site view"
key Escape
wait_for "SITE (function, file:line)"
ok "site view: 'Site #$ID_LONG', the function in the stack"

# The call tree, expanded: the function is visible however deep.
key 3
wait_for "TOP-DOWN"
key '*'
wait_for "grow_bucket_array"
narrow "the Call tree"
ok "call tree: grow_bucket_array visible"

# Timeline: the labels stay whole beside the cursor at both ends.
key 1
wait_for "Duration"
dur=$(sed -n 's/^ Duration  *\([0-9.ms]*\).*/\1/p' "$T/screen")
[ -n "$dur" ] || fail "no duration on the Summary"
key 4
wait_for "(the peak)"
expect "1,000,000 blocks" "at the peak"
expect_re " 1 block  #" "at the peak"
narrow "the Timeline"
# The live set at the peak: 1,000,000 blocks and 1 block, aligned.
rm=$(grep -F "1,000,000 blocks" "$T/screen") || fail "no '1,000,000 blocks' row at the peak"
r1=$(grep -E " 1 block  #" "$T/screen") || fail "no '1 block' row at the peak"
c1=$(echo "$rm" | awk '{ print index($0, " block") }')
c2=$(echo "$r1" | awk '{ print index($0, " block") }')
[ "$c1" = "$c2" ] || fail "the block columns do not line up ($c1, $c2): '$rm' / '$r1'"
echo "$rm" | grep -qE "#$ID_MANY make_many" || fail "the 1,000,000 blocks are not make_many's (#$ID_MANY): $rm"
ok "timeline: 1,000,000 blocks and 1 block line up"
key G
wait_for "At $dur:"
labels=$(line_after "└")
echo "$labels" | grep -qE "(^| )0s( |$)" || fail "the 0s label is not whole at the end: '$labels'"
echo "$labels" | grep -qF "$dur^" || fail "the end label $dur is not whole beside the cursor: '$labels'"
key g
wait_for "At 0.000s:"
labels=$(line_after "└")
echo "$labels" | grep -qE "\^0s( |$)" || fail "the 0s label is not whole beside the cursor: '$labels'"
echo "$labels" | grep -qE " $dur$" || fail "the end label $dur is not whole at the start: '$labels'"
ok "timeline: at both ends the cursor sits beside '0s' and '$dur'"

for v in 5 6 7 '?'; do
    key "$v"
    sleep 0.3
    narrow "view $v"
done
ok "heap map, suggestions, GPU and help: no line wider than 80"
key Escape
key q
wait_for "view-exit=0"

# The evidence of a suggestion in words.
key "clear; $MEMLENS view $T/churn.mlt; echo churn-exit=\$?" Enter
wait_for "1Summary"
key 6
wait_for "make_msg"
line_has 3 E "^ pool .*#[0-9]+ churn::make_msg" || fail "no pool suggestion for make_msg: $(line 3)"
wait_for "calls avoided 2,000,000"
expect "sizes: 48 B only"
expect_re "lifetimes: mean [0-9.]+ (ns|us|ms|s), longest"
grep -q '[{"]' "$T/screen" && fail "the Suggestions view shows JSON characters"
narrow "the Suggestions view"
ok "suggestions: the evidence in words (calls avoided 2,000,000), no '{' or '\"'"
key q
wait_for "churn-exit=0"

# Wide characters: a file name of CJK characters (tests/e2e/fixtures/
# fx_widename.c). The canvas gives every character one column; the terminal
# drew these in two, so the row ran past 80 columns, lost its line number and
# wrapped onto the next row, over the start of plain_leak's.
if [ -n "$FX_WIDENAME" ]; then
    "$MEMLENS" run -q -o "$T/wide.mlt" -- "$FX_WIDENAME" > /dev/null 2>&1
    [ -s "$T/wide.mlt" ] || fail "memlens run wrote no trace of fx_widename"
    key "clear; $MEMLENS view $T/wide.mlt; echo wide-exit=\$?" Enter
    wait_for "1Summary"
    key 2
    wait_for "plain_leak"
    line_has 3 E '^ +3\.9K +3\.9K +3\.9K +1 +0 +#0 wide_leak  .*[?]\.c:2$' \
        || fail "wide_leak's row is not whole in its columns: $(line 3)"
    line_has 4 E '^ +100B +100B +100B +1 +0 +#1 plain_leak  fx_widename\.c:10$' \
        || fail "plain_leak's row does not start in its place: $(line 4)"
    narrow "the Sites view of fx_widename"
    ok "wide characters: one column each, the rows whole (…?.c:2) and in their places"
    key q
    wait_for "wide-exit=0"
fi

echo "all 80x24 viewer checks passed"
exit 0
