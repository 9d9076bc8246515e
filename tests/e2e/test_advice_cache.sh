#!/usr/bin/env bash
# The strategy advice saved in the trace (issue 12, item 5; docs/trace-format.md,
# "The saved advice"), end to end with the real memlens on fixtures whose advice
# is known (fx_adv_temp, fx_adv_slab: docs/strategies.md):
#   - the first `report --json` runs the advisor and saves its result; the second
#     reads it back (ML_ADVISOR_DEBUG says which) and writes the same JSON byte
#     for byte; the trace keeps its mode and its size in the report;
#   - the saved advice equals a fresh run's (--replay, --no-save-advice), but for
#     the advisor's own run time;
#   - advice grafted from another trace (other records), a flipped byte under the
#     records' checksum, and damaged advice are all discarded, the last with a
#     warning, never a crash; a save cut short is repaired by the next report;
#   - never written through a symbolic link, nor into a read-only trace;
#   - the budgets (--advisor-mem, --advisor-ops): what does not fit is left out
#     and said, in the JSON and in the viewer; advice is saved per budget; a
#     trace too long for a replay gets the statistics pass's suggestions, their
#     counts checked against the fixtures' sources, and so does a candidate whose
#     what-if the budget leaves out.
# usage: test_advice_cache.sh BUILD_DIR
set -u
. "$(dirname "${BASH_SOURCE[0]}")/checks_lib.sh" # ok, bad, fails
B=$(cd "${1:?build dir}" && pwd)
ML="$B/memlens"
PY=/usr/bin/python3
W=$(mktemp -d /tmp/memlens-advcache-XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir $W"
cd "$W" || exit 2
# The advisor's run time is the one field two fresh runs differ in.
# Reports of copies of a trace also differ in its path.
noseconds() { sed 's/"seconds": [0-9.e+-]*/"seconds": _/; s/"path": "[^"]*"/"path": _/' "$1"; }
same_but_time() { cmp -s <(noseconds "$1") <(noseconds "$2"); }
# The advisor's keys only (suggestions, policies, advisor), but its run time.
same_advice() {
    "$PY" - "$1" "$2" << 'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    r["advisor"].pop("seconds", None)
sys.exit(0 if all(a[k] == b[k] for k in ("suggestions", "policies", "advisor")) else 1)
EOF
}
has_advice() { "$ML" dump "$1" | grep -q '^# saved strategy advice: '; }
used_cache() { grep -q 'advisor: the advice saved in .* is used' "$1"; }
ran_advisor() { grep -q '^advisor: group key\|^advisor: candidate' "$1"; }
size_in_report() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["trace"]["size_bytes"])' "$1"; }
nsugg() { "$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["suggestions"]))' "$1"; }
# report TRACE OUT [ARGS...]: the JSON report with the advisor's debug lines in OUT.err
report() {
    local t=$1 out=$2
    shift 2
    ML_ADVISOR_DEBUG=1 "$ML" report "$t" --json "$out" "$@" > /dev/null 2> "$out.err"
}

"$ML" run -q -o temp.mlt -- "$B/fx_adv_temp" > /dev/null 2>&1 || { echo "cannot record fx_adv_temp"; exit 1; }
"$ML" run -q -o slab.mlt -- "$B/fx_adv_slab" > /dev/null 2>&1 || { echo "cannot record fx_adv_slab"; exit 1; }
cp temp.mlt temp.orig
cp slab.mlt slab.orig

# --- saving and reading back --------------------------------------------------
report temp.mlt fresh.json --no-save-advice
check "--no-save-advice leaves the trace byte for byte as recorded" cmp -s temp.mlt temp.orig
check "the fixture has suggestions (temporaries: stack / reuse_buffer)" [ "$(nsugg fresh.json)" -ge 1 ]
report temp.mlt first.json
check "the first report runs the advisor" ran_advisor first.json.err
check "... and saves its result in the trace" has_advice temp.mlt
check "... keeping the trace's mode (0600)" [ "$(stat -c %a temp.mlt)" = 600 ]
check "... and the rest of the file as it was" cmp -s -n "$(stat -c %s temp.orig)" temp.mlt temp.orig
check "its JSON equals a fresh run's (but the advisor's run time)" same_but_time first.json fresh.json
report temp.mlt second.json
check "the second report uses the saved advice" used_cache second.json.err
check "... without running the advisor" bash -c "! grep -q '^advisor: group key' second.json.err"
check "... and writes the same JSON, byte for byte" cmp -s second.json first.json
check "the report's trace size is the recorded one" [ "$(size_in_report second.json)" = "$(stat -c %s temp.orig)" ]
report temp.mlt html.json --html page.html
check "--html with --json reads it too" used_cache html.json.err
check "... same JSON" cmp -s html.json first.json
report temp.mlt replay.json --replay
check "--replay runs the advisor again" ran_advisor replay.json.err
check "... with the same result" same_but_time replay.json first.json
report temp.mlt all.json --all-policies
check "--all-policies (another key) runs the advisor" ran_advisor all.json.err
report temp.mlt all2.json --all-policies
check "... and then has its own saved advice" used_cache all2.json.err
check "... with its table of more policies" cmp -s all2.json all.json
report temp.mlt third.json
check "the default key runs again after another key replaced it" ran_advisor third.json.err
"$ML" report -q temp.mlt > text.out 2>&1
check "the text report is unchanged by the saved advice" \
    cmp -s <(tail -n +2 text.out) <("$ML" report -q temp.orig 2>&1 | tail -n +2)
check "dump reads every record of a trace with advice" \
    cmp -s <("$ML" dump temp.mlt | grep -v '^# saved strategy advice') <("$ML" dump temp.orig)

# --- another trace's advice: other records, another key ----------------------
report slab.mlt slab_fresh.json --no-save-advice
# the recorded slab trace followed by the temp trace's saved advice (block and trailer)
rec=$(stat -c %s temp.orig)
"$PY" - temp.mlt "$rec" slab.orig graft.mlt << 'EOF'
import struct, sys
src, rec, base, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
tail = bytearray(open(src, 'rb').read()[rec:])
head = open(base, 'rb').read()
struct.pack_into('<Q', tail, len(tail) - 8, len(head))  # the advice trailer's offset
open(out, 'wb').write(head + bytes(tail))
EOF
chmod 600 graft.mlt
check "the grafted trace carries advice" has_advice graft.mlt
report graft.mlt graft.json
check "advice saved for other records is not used" ran_advisor graft.json.err
check "... the report is the trace's own" same_but_time graft.json slab_fresh.json
report graft.mlt graft2.json
check "... which replaces the foreign advice" used_cache graft2.json.err
check "... and is the trace's own, byte for byte" cmp -s graft2.json graft.json

# the same program recorded again: the same sites, other records (times, addresses)
"$ML" run -q -o again.mlt -- "$B/fx_adv_temp" > /dev/null 2>&1
"$PY" - temp.mlt "$rec" again.mlt again_graft.mlt << 'EOF'
import struct, sys
src, rec, base, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
tail = bytearray(open(src, 'rb').read()[rec:])
head = open(base, 'rb').read()
struct.pack_into('<Q', tail, len(tail) - 8, len(head))
open(out, 'wb').write(head + bytes(tail))
EOF
chmod 600 again_graft.mlt
report again_graft.mlt again.json
check "advice saved for a recording of the same program is not used for another" ran_advisor again.json.err

# --- the same records, other names: the key covers the symbols ---------------
# A copy of the fixture without debug info: its own frames differ between a
# symbolized report and --no-symbols only in their names (libc's may have
# lines too). The key hashes each distinct string once
# (tests/unit/analysis/test_advice_key.c checks it against hashing them all).
strip --strip-debug -o fx_nodebug "$B/fx_adv_temp"
"$ML" run -q -o nodebug.mlt -- ./fx_nodebug > /dev/null 2>&1
report nodebug.mlt nodebug.json
check "without debug info: the first report saves advice" has_advice nodebug.mlt
report nodebug.mlt nosym.json --no-symbols
check "... which --no-symbols (other function names) does not use" ran_advisor nosym.json.err
report nodebug.mlt nosym2.json --no-symbols
check "... then its own advice is saved and used" used_cache nosym2.json.err
report nodebug.mlt named.json
check "... and the named report's key differs from it again" ran_advisor named.json.err
check "... with the same advice as the first time" same_but_time named.json nodebug.json

# --- the records changed under their checksum ---------------------------------
cp temp.mlt flip.mlt
# byte 12 of the header (flags) is covered by the records' checksum and read by nobody
printf '\x01' | dd of=flip.mlt bs=1 seek=12 conv=notrunc status=none
report flip.mlt flip.json
check "a changed trace discards the saved advice (the advisor runs)" ran_advisor flip.json.err
check "... says why the saved analysis is not used" grep -q 'do not match the checksum' flip.json.err
check "... and advises what a fresh run does" same_advice flip.json fresh.json
check "... and saves nothing on a trace whose checksum is wrong" bash -c "cmp -s <(tail -c 64 flip.mlt) <(tail -c 64 temp.mlt)"

# --- damaged advice ---------------------------------------------------------------
cp temp.mlt bad.mlt
size=$(stat -c %s bad.mlt)
# the middle of the advice's zstd frame: between the block header and the trailer
off=$((rec + 16 + (size - rec - 16 - 24) / 2))
printf '\xff' | dd of=bad.mlt bs=1 seek=$off conv=notrunc status=none
report bad.mlt bad.json
rc=$?
check "damaged advice: the report still succeeds" [ $rc -eq 0 ]
check "... warns that the saved advice is unusable" grep -q 'warning: .*saved strategy advice.*the advisor ran again' bad.json.err
check "... runs the advisor" ran_advisor bad.json.err
check "... and reports what a fresh run does" same_but_time bad.json fresh.json
report bad.mlt bad2.json
check "... and the fresh result replaced it" used_cache bad2.json.err
cp temp.mlt bad3.mlt
printf '\xff' | dd of=bad3.mlt bs=1 seek=$off conv=notrunc status=none
"$ML" dump bad3.mlt > bad3.dump 2>&1
check "dump says when the saved advice is unusable" grep -q '^# saved strategy advice unusable' bad3.dump
# a save cut short (a crash in its write): the block without its trailer
head -c $((size - 10)) temp.mlt > cut.mlt
chmod 600 cut.mlt
report cut.mlt cut.json
check "a save cut short: the report still uses the saved analysis" bash -c "! grep -q 'replayed instead' cut.json.err"
check "... runs the advisor" ran_advisor cut.json.err
check "... with the same result" same_but_time cut.json fresh.json
check "... and saves it again, whole" has_advice cut.mlt
check "... after the recorded trace, unchanged" cmp -s -n "$rec" cut.mlt temp.orig
report cut.mlt cut2.json
check "... readable back" used_cache cut2.json.err

# --- the budgets: what does not fit is left out, and said (--advisor-mem/-ops) ------
skipped() { "$PY" -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["advisor"].get("skipped", [])))' "$1"; }
npol() { "$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["policies"]))' "$1"; }
heap_sugg() { "$PY" -c 'import json,sys; print(sum(1 for s in json.load(open(sys.argv[1]))["suggestions"] if not s["strategy"].startswith("gpu_")))' "$1"; }
ops=$("$PY" -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print(t["alloc_calls"] + t["free_calls"])' fresh.json)
check "the default budgets leave nothing out on the fixture" [ -z "$(skipped fresh.json)" ]
check "... and replay the whole table (5 designs and the real allocator)" [ "$(npol fresh.json)" = 6 ]
skipped_has() { skipped "$1" | grep -q "$2"; }
# the fixture's one live block takes about 700 bytes of replay state, 96 of
# them the statistics' (docs/strategies.md)
report temp.mlt mem.json --no-save-advice --advisor-mem 50
check "--advisor-mem 50: no replay, no statistics pass, and the JSON says why" \
    skipped_has mem.json '^the replay: .* over the budget (.*--advisor-mem, --advisor-ops); no policy table, no what-ifs$'
check "... no policy table, no heap suggestion" [ "$(npol mem.json):$(heap_sugg mem.json)" = "0:0" ]
report temp.mlt mem100.json --no-save-advice --advisor-mem 100
check "--advisor-mem 100: room for the statistics pass only" \
    skipped_has mem100.json '^the replay: .*; the suggestions come from the call statistics alone'
check "... no policy table, one heap suggestion" [ "$(npol mem100.json):$(heap_sugg mem100.json)" = "0:1" ]
# room for three passes over the trace's operations: the baseline and the real allocator only
report temp.mlt ops3.json --no-save-advice --advisor-ops $((3 * ops))
check "--advisor-ops for 3 passes: 4 of 6 policies left out, and said" \
    skipped_has ops3.json '^policy table: 4 of 6 policies not replayed .*kept the baseline and the real allocator$'
report temp.mlt ops1.json --no-save-advice --advisor-ops $((ops + 1))
check "--advisor-ops for 1 pass: no replay at all, the statistics pass instead, and said" \
    skipped_has ops1.json '^the replay: .*no policy table, no what-ifs; the suggestions come from the call statistics alone (one pass over the trace), with no saving estimated$'
check "... no policy table" [ "$(npol ops1.json)" = 0 ]
# The statistics pass's suggestions against the fixtures' sources: format_line
# frees each of its 100000 blocks of 256 bytes before the next allocation
# (fx_adv_temp.c); make_node allocates 20000 + 1000000 blocks of 48 bytes, and
# frees every one (fx_adv_slab.c). The slab trace has 2444000 operations:
# --advisor-ops 1000000 leaves no room for a replay, room for the statistics.
only_sugg() {
    "$PY" - "$@" << 'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
heap = [s for s in d["suggestions"] if not s["strategy"].startswith("gpu_")]
assert len(heap) == 1, heap
s, ev = heap[0], heap[0]["evidence"]
got = [s["strategy"], s["estimated_saving_bytes"], ev["simulation"], ev["calls"], ev["frees"], ev["calls_avoided"]]
got += [ev.get(k) for k in sys.argv[2:]]
fn = d["sites"][s["site"]]["frames"][0]["function"]
print(fn, " ".join(str(x) for x in got), "statistics" if "From the call statistics alone" in s["message"] else "replayed")
EOF2
}
check "... format_line: stack, no saving, no simulation, its exact counts, said in the message" \
    [ "$(only_sugg ops1.json temporaries max_temporary_bytes)" = "format_line stack 0 None 100000 100000 200000 100000 256 statistics" ]
check "... the same counts as the replayed advice" \
    [ "$(only_sugg fresh.json temporaries max_temporary_bytes)" = "format_line stack 256 {'baseline': 'segregated_fit', 'baseline_peak_bytes': 4096, 'what_if': 'stack', 'what_if_peak_bytes': 0} 100000 100000 200000 100000 256 replayed" ]
report slab.mlt sops1.json --no-save-advice --advisor-ops 1000000
check "make_node from the statistics pass: a pool whose gain is time, 2040000 calls avoided" \
    [ "$(only_sugg sops1.json gain)" = "make_node pool 0 None 1020000 1020000 2040000 time statistics" ]
report temp.mlt big.json --no-save-advice --advisor-ops $((ops / 10 - 1))
check "a trace over ten times the operations budget: not even the statistics pass" \
    skipped_has big.json '^the replay: .*no policy table, no what-ifs$'
check "... no heap suggestion" [ "$(heap_sugg big.json)" = 0 ]
# A what-if the budget leaves out still gets the suggestion its counts
# support. fx_adv_churn.cpp has three candidates, priced most important first:
# hold_block's own heap (2.5 passes, no suggestion), make_msg's pool (1.5) and
# format_key's temporary string (1.5). The whole table is 6 passes; a budget of
# 10 passes leaves room for the first two what-ifs and not the third.
"$ML" run -q -o churn.mlt -- "$B/fx_adv_churn" > /dev/null 2>&1 || { echo "cannot record fx_adv_churn"; exit 1; }
report churn.mlt churn.json --no-save-advice
cops=$("$PY" -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print(t["alloc_calls"] + t["free_calls"])' churn.json)
report churn.mlt churn10.json --no-save-advice --advisor-ops $((10 * cops))
heap_list() {
    "$PY" - "$1" << 'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["suggestions"]:
    if s["strategy"].startswith("gpu_"):
        continue
    ev = s["evidence"]
    how = "statistics" if "From the call statistics alone" in s["message"] else "replayed"
    sim = "None" if ev["simulation"] is None else ev["simulation"]["what_if"]
    print(s["strategy"], s["estimated_saving_bytes"], sim, ev["calls"], ev["calls_avoided"], ev.get("temporaries"),
          ev.get("max_temporary_bytes"), how)
EOF2
}
check "a budget for two of three what-ifs: the third is not priced, and said" \
    skipped_has churn10.json '^what-ifs: 1 of 3 candidates not priced .*; those whose evidence is counts are suggested from the call statistics alone, with no saving estimated$'
check "... the priced pool as in the unbounded run" \
    [ "$(heap_list churn10.json | head -1)" = "pool 0 pool(48) 1000000 2000000 None None replayed" ]
check "... the unbounded run prices format_key's temporaries" \
    [ "$(heap_list churn.json | tail -1)" = "stack 0 stack 20000 40000 20000 201 replayed" ]
check "... the bounded one gives them from the counts: 20000 temporaries of at most 201 bytes, no simulation" \
    [ "$(heap_list churn10.json | tail -1)" = "stack 0 None 20000 40000 20000 201 statistics" ]
check "... and nothing else" [ "$(heap_list churn10.json | wc -l)" = 2 ]
cp temp.orig stats.mlt
chmod 600 stats.mlt
report stats.mlt st1.json --advisor-ops $((ops + 1))
report stats.mlt st2.json --advisor-ops $((ops + 1))
check "the statistics pass's advice is saved and read back" used_cache st2.json.err
check "... into the same JSON, simulation null included" cmp -s st1.json st2.json
check "... the table keeps the baseline and the real allocator" \
    [ "$("$PY" -c 'import json,sys; print(" ".join(p["name"] for p in json.load(open(sys.argv[1]))["policies"]))' ops3.json)" = "segregated_fit real" ]
for bad_arg in "--advisor-mem 0" "--advisor-ops x" "--advisor-mem -5"; do
    # shellcheck disable=SC2086
    "$ML" report temp.mlt --json usage.json $bad_arg > /dev/null 2> usage.err
    check "report $bad_arg: a usage error (exit 2)" [ $? -eq 2 ]
done
cp temp.orig budget.mlt
chmod 600 budget.mlt
report budget.mlt b1.json --advisor-mem 100
check "advice saved under a budget ..." has_advice budget.mlt
report budget.mlt b2.json
check "... is not used under another (the advisor runs)" ran_advisor b2.json.err
check "... which advises in full" [ -z "$(skipped b2.json)" ]
report budget.mlt b3.json --advisor-mem 100
check "... and the same budget runs it again, the default's advice being the one saved" bash -c "! grep -q 'advisor: the advice saved in' b3.json.err"
check "... (left out as before)" skipped_has b3.json '^the replay: '

report budget.mlt b4.json --advisor-mem 100
check "... then reads it back" used_cache b4.json.err
check "... the same JSON" cmp -s b4.json b3.json
# The viewer says what its advisor left out (it read "none" before).
"$ML" view --batch --size 120x40 --keys "6" --advisor-mem 50 temp.orig > view6.txt 2>&1
check "view --advisor-mem 50: Suggestions says the advisor left work out" \
    grep -q 'No suggestions: the advisor left out work that would not fit its budgets' view6.txt
check "... and what" grep -q 'Left out: the replay: 1 live blocks at the peak and 200000 operations need about' view6.txt
"$ML" view --batch --size 120x40 --advisor-mem 50 temp.orig > view1.txt 2>&1
check "... the summary lists it under Left out" grep -q '^ Left out  *the replay: ' view1.txt
"$ML" view --batch --size 120x40 --keys "6" temp.orig > view6d.txt 2>&1
check "with the default budgets nothing is left out" bash -c "! grep -q 'Left out' view6d.txt"
check "... and the suggestions are listed" grep -q 'reuse_buffer\|stack' view6d.txt
"$ML" view --batch --advisor-ops 0 temp.orig > /dev/null 2>&1
check "view --advisor-ops 0: a usage error (exit 2)" [ $? -eq 2 ]

# --- where it is never written ----------------------------------------------------
cp temp.orig ro.mlt
chmod 400 ro.mlt
report ro.mlt ro.json
check "a read-only trace is not written (even by root)" cmp -s ro.mlt temp.orig
check "... silently" bash -c "! grep -q warning ro.json.err"
cp temp.orig target.mlt
chmod 600 target.mlt
ln -s target.mlt link.mlt
report link.mlt link.json
check "a trace named through a symbolic link is not written" cmp -s target.mlt temp.orig
check "... and its report is right" same_but_time link.json fresh.json
cp temp.orig hard1.mlt
chmod 600 hard1.mlt
ln hard1.mlt hard2.mlt
report hard1.mlt hard.json
check "a trace with two names is not written" cmp -s hard1.mlt temp.orig

if [ $fails -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "all checks passed"
