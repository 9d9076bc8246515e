#!/usr/bin/env bash
# The debug cache (issue 12, item 4; analysis/debug_cache.c, docs/analysis.md
# "Symbols"): uncompressed copies of debug files whose DWARF is compressed,
# kept by build-id so that later reports do not inflate them again.
#   - a program stripped of its DWARF, with a compressed separate debug file
#     (debuglink), and a program whose own DWARF is compressed (-gz): the
#     names and lines with the cache equal those without it, and the known
#     functions and lines of the source are there;
#   - the cold report makes one copy per build-id, 0600 in a 0700 directory,
#     with no compressed section; the warm report reads the copy (it still
#     names every frame after the original debug file is gone);
#   - a copy with another build-id, or a truncated one, is never used;
#   - a cache directory that is a link, or writable by others, is not used;
#   - MEMLENS_DEBUG_CACHE=off writes nothing.
# usage: test_debug_cache.sh BUILD_DIR
set -u
. "$(dirname "${BASH_SOURCE[0]}")/checks_lib.sh" # ok, bad, fails
B=$(cd "${1:?build dir}" && pwd)
ML="$B/memlens"
PY=/usr/bin/python3
W=$(mktemp -d /tmp/memlens-dbgcache-XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir $W"
cd "$W" || exit 2

cat > prog.c << 'EOF'
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) char *make_name(size_t n) {
    char *p = malloc(n); /* LINE_MAKE_NAME */
    memset(p, 'x', n);
    return p;
}
__attribute__((noinline)) void *make_table(size_t n) {
    return calloc(n, 8); /* LINE_MAKE_TABLE */
}
int main(void) {
    for (int i = 0; i < 100; i++) free(make_name(100 + (size_t)i));
    void *keep = make_table(1000); /* LINE_MAIN_TABLE */
    (void)keep;
    return 0;
}
EOF
line_of() { grep -n "$1" prog.c | cut -d: -f1; }
L_NAME=$(line_of LINE_MAKE_NAME)
L_TABLE=$(line_of LINE_MAKE_TABLE)
L_MAIN=$(line_of LINE_MAIN_TABLE)

# The stripped program and its compressed debug file (a debuglink), and one
# whose own DWARF is compressed.
mkdir -p link && cc -O0 -g -fno-builtin -Wl,--build-id -o link/prog prog.c || exit 2
objcopy --only-keep-debug --compress-debug-sections=zlib link/prog link/prog.debug || exit 2
objcopy --strip-debug --add-gnu-debuglink=link/prog.debug link/prog || exit 2
mkdir -p gz && cc -O0 -g -gz=zlib -fno-builtin -Wl,--build-id -o gz/prog prog.c || exit 2
compressed() { readelf -SW "$1" 2> /dev/null | grep -E '\.debug_info' | grep -q ' C '; }
build_id() { readelf -n "$1" 2> /dev/null | sed -n 's/.*Build ID: *//p'; }
check "the debug file's DWARF is compressed" compressed link/prog.debug
check "the -gz program's DWARF is compressed" compressed gz/prog
check "the stripped program has no DWARF" bash -c "! readelf -SW link/prog 2> /dev/null | grep -q '\.debug_info'"

for k in link gz; do
    "$ML" run -q -o "$k.mlt" -- "./$k/prog" || bad "$k: memlens run"
done

# frames JSON: "function file line" of every frame of every site, in order.
frames() {
    "$PY" - "$1" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["sites"]:
    for f in s["frames"]:
        print(f["function"], f.get("file"), f.get("line"))
    print("--")
EOF
}
report() { # report TRACE OUT [env...]
    local t=$1 o=$2
    shift 2
    env "$@" "$ML" report "$t" --no-advisor --json "$o" -q --force
}
has_truth() { # the program's own frames, named at their lines
    grep -qx "make_name $W/prog.c $L_NAME" "$1" && grep -qx "make_table $W/prog.c $L_TABLE" "$1" &&
        grep -qx "main $W/prog.c $L_MAIN" "$1"
}

for k in link gz; do
    C="$W/cache-$k"
    report "$k.mlt" "$k.off.json" MEMLENS_DEBUG_CACHE=off || bad "$k: report without the cache"
    frames "$k.off.json" > "$k.off.txt"
    check "$k: without the cache, the source's functions and lines" has_truth "$k.off.txt"
    check "$k: MEMLENS_DEBUG_CACHE=off makes no cache" test ! -e "$C"

    report "$k.mlt" "$k.cold.json" MEMLENS_DEBUG_CACHE="$C" || bad "$k: cold report"
    check "$k: cold report, the same JSON as without the cache" cmp -s "$k.off.json" "$k.cold.json"
    id=$(build_id "$k/prog")
    # (libc's debug file, when compressed, gets its copy too)
    check "$k: a copy named by the build-id ($id)" test -f "$C/$id.debug"
    check "$k: the copy is 0600 in a 0700 directory" \
        test "$(stat -c %a "$C")" = 700 -a "$(stat -c %a "$C/$id.debug" 2> /dev/null)" = 600
    check "$k: the copy has no compressed section" bash -c "! readelf -SW '$C/$id.debug' 2> /dev/null | grep -E '\.debug_' | grep -q ' C '"
    check "$k: the copy keeps the build-id" test "$(build_id "$C/$id.debug")" = "$id"

    report "$k.mlt" "$k.warm.json" MEMLENS_DEBUG_CACHE="$C" || bad "$k: warm report"
    check "$k: warm report, the same JSON" cmp -s "$k.off.json" "$k.warm.json"
done

# The warm report reads the copy: with the original debug file gone, only the
# copy can name the frames.
mv link/prog.debug link/prog.debug.away
report link.mlt gone.json MEMLENS_DEBUG_CACHE="$W/cache-link" || bad "report with the debug file gone"
check "debug file gone: the copy still gives the same JSON" cmp -s link.off.json gone.json
report link.mlt gone-off.json MEMLENS_DEBUG_CACHE=off || bad "report with neither"
frames gone-off.json > gone-off.txt
check "debug file gone, no cache: no lines, only ELF names (the test can tell)" \
    bash -c "grep -qx 'make_name None None' gone-off.txt && ! grep -q '^make_name $W' gone-off.txt"

# A copy of another file (another build-id) under the name, or a truncated
# copy: never used.
id=$(build_id link/prog)
for damage in other truncated; do
    C="$W/cache-$damage"
    mkdir -m 700 "$C"
    # "other": the uncompressed copy of the -gz program, the same code and
    # DWARF under another build-id, which would name every frame if used.
    if [ $damage = other ]; then cp "$W/cache-gz/$(build_id gz/prog).debug" "$C/$id.debug"; else head -c 4000 "$W/cache-link/$id.debug" > "$C/$id.debug"; fi
    chmod 600 "$C/$id.debug"
    report link.mlt "$damage.json" MEMLENS_DEBUG_CACHE="$C" || bad "$damage: report"
    frames "$damage.json" > "$damage.txt"
    check "$damage copy, debug file gone: not used (no names)" cmp -s gone-off.txt "$damage.txt"
done
mv link/prog.debug.away link/prog.debug
C="$W/cache-other"
report link.mlt other2.json MEMLENS_DEBUG_CACHE="$C" || bad "report over a wrong copy"
check "a wrong copy: the report is right, and the copy is made again" \
    bash -c "cmp -s link.off.json other2.json && test \"\$(readelf -n '$C/$id.debug' 2> /dev/null | sed -n 's/.*Build ID: *//p')\" = $id"

# A cache directory that is a link, or that others may write to: not used.
mkdir -m 700 real && ln -s real linked
report link.mlt linked.json MEMLENS_DEBUG_CACHE="$W/linked" || bad "report with a linked cache"
check "a linked cache directory: nothing written through it, same JSON" \
    bash -c "cmp -s link.off.json linked.json && test -z \"\$(ls real)\""
mkdir -m 777 open
report link.mlt open.json MEMLENS_DEBUG_CACHE="$W/open" || bad "report with a world-writable cache"
check "a world-writable cache directory: nothing written, same JSON" \
    bash -c "cmp -s link.off.json open.json && test -z \"\$(ls open)\""

# A program whose DWARF is not compressed: read as it is, names and lines.
cc -O0 -g -fno-builtin -o plain prog.c || exit 2
"$ML" run -q -o plain.mlt -- ./plain || bad "plain: memlens run"
report plain.mlt plain.json MEMLENS_DEBUG_CACHE="$W/cache-plain" || bad "plain: report"
frames plain.json > plain.txt
check "uncompressed DWARF: names and lines" has_truth plain.txt

# Where libdw looks for a separate debug file, memlens still finds it (its
# own check skips libdw's search only when every place is empty): under
# .debug/ beside the program.
mkdir -p sub/.debug && cp link/prog sub/prog && cp link/prog.debug sub/.debug/prog.debug
"$ML" run -q -o sub.mlt -- ./sub/prog || bad "sub: memlens run"
report sub.mlt sub.json MEMLENS_DEBUG_CACHE=off || bad "sub: report"
frames sub.json > sub.txt
check "a debug file under .debug/: the source's functions and lines" has_truth sub.txt
# With no debuginfod server configured and no debug file anywhere, libdw's
# last resort (libdebuginfod, curl, gnutls...) is not even loaded.
mkdir -p bare && cp link/prog bare/prog
"$ML" run -q -o bare.mlt -- ./bare/prog || bad "bare: memlens run"
env -u DEBUGINFOD_URLS LD_DEBUG=files "$ML" report bare.mlt --no-advisor --json bare.json -q --force 2> ld.log ||
    bad "bare: report"
check "no debug file, no server: libdebuginfod is not loaded" bash -c "! grep -q libdebuginfod ld.log"
frames bare.json > bare.txt
check "no debug file: ELF names, no lines" bash -c "grep -qx 'make_name None None' bare.txt"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
