#!/usr/bin/env bash
# The symbol cache (issue 12, item 4; analysis/symcache.c, docs/analysis.md
# "Symbols"): the frames each address of a module resolved to, kept in the
# debug cache by build-id, used while the files they came from are the same.
#   - cold, warm and without the cache, the report's JSON is the same, and
#     the program's functions, inlined frames and lines are the source's;
#   - one file per module with a build-id, 0600 in the 0700 directory;
#   - the warm report reads the file: a name changed in it (checksum fixed)
#     shows up in the report;
#   - a file that does not check out (checksum, truncated, garbage, a link)
#     is not used, and a link is replaced, never written through;
#   - the program stripped in place (the same build-id) or its separate
#     debug file gone: the cached lines are not used;
#   - ML_SYMBOL_CACHE=0 and MEMLENS_DEBUG_CACHE=off write nothing.
# usage: test_symbol_cache.sh BUILD_DIR
set -u
. "$(dirname "${BASH_SOURCE[0]}")/checks_lib.sh" # ok, bad, fails
B=$(cd "${1:?build dir}" && pwd)
ML="$B/memlens"
PY=/usr/bin/python3
W=$(mktemp -d /tmp/memlens-symcache-XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir $W"
cd "$W" || exit 2

cat > prog.c << 'EOF'
#include <stdlib.h>
#include <string.h>
static inline __attribute__((always_inline)) char *grab(size_t n) {
    return malloc(n); /* LINE_GRAB */
}
__attribute__((noinline)) char *make_name(size_t n) {
    char *p = grab(n); /* LINE_MAKE_NAME */
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
L_GRAB=$(line_of LINE_GRAB)
L_NAME=$(line_of LINE_MAKE_NAME)
L_TABLE=$(line_of LINE_MAKE_TABLE)
L_MAIN=$(line_of LINE_MAIN_TABLE)
build_id() { readelf -n "$1" 2> /dev/null | sed -n 's/.*Build ID: *//p'; }

mkdir -p own link
cc -O1 -g -fno-builtin -Wl,--build-id -o own/prog prog.c || exit 2
cc -O1 -g -fno-builtin -Wl,--build-id -o link/prog prog.c || exit 2
objcopy --only-keep-debug link/prog link/prog.debug || exit 2
objcopy --strip-debug --add-gnu-debuglink=link/prog.debug link/prog || exit 2
for k in own link; do
    "$ML" run -q -o "$k.mlt" -- "./$k/prog" || bad "$k: memlens run"
done

# frames JSON: "function file line inlined" of every frame of every site.
frames() {
    "$PY" - "$1" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["sites"]:
    for f in s["frames"]:
        print(f["function"], f.get("file"), f.get("line"), f.get("inlined", False))
    print("--")
EOF
}
report() { # report TRACE OUT [env...]
    local t=$1 o=$2
    shift 2
    env "$@" "$ML" report "$t" --no-advisor --json "$o" -q --force
}
has_truth() { # the program's own frames, the inlined one included
    grep -qx "grab $W/prog.c $L_GRAB True" "$1" && grep -qx "make_name $W/prog.c $L_NAME False" "$1" &&
        grep -qx "make_table $W/prog.c $L_TABLE False" "$1" && grep -qx "main $W/prog.c $L_MAIN False" "$1"
}

for k in own link; do
    C="$W/cache-$k"
    report "$k.mlt" "$k.off.json" MEMLENS_DEBUG_CACHE="$C" ML_SYMBOL_CACHE=0 || bad "$k: report, no symbol cache"
    frames "$k.off.json" > "$k.off.txt"
    check "$k: without the cache, the source's functions, inlined frame and lines" has_truth "$k.off.txt"
    check "$k: ML_SYMBOL_CACHE=0 writes no .sym" bash -c "! ls '$C'/*.sym 2> /dev/null | grep -q ."
    report "$k.mlt" "$k.cold.json" MEMLENS_DEBUG_CACHE="$C" || bad "$k: cold report"
    check "$k: cold report, the same JSON" cmp -s "$k.off.json" "$k.cold.json"
    id=$(build_id "$k/prog")
    S=$(ls "$C/$id".*.sym 2> /dev/null | head -1)
    check "$k: a file named by the build-id ($id)" test -n "$S"
    check "$k: it is 0600 in a 0700 directory" \
        test "$(stat -c %a "$C")" = 700 -a "$(stat -c %a "$S" 2> /dev/null)" = 600
    report "$k.mlt" "$k.warm.json" MEMLENS_DEBUG_CACHE="$C" || bad "$k: warm report"
    check "$k: warm report, the same JSON" cmp -s "$k.off.json" "$k.warm.json"
done
report own.mlt none.json MEMLENS_DEBUG_CACHE=off || bad "report, no debug cache"
check "MEMLENS_DEBUG_CACHE=off: the same JSON" cmp -s own.off.json none.json

C="$W/cache-own"
id=$(build_id own/prog)
S=$(ls "$C/$id".*.sym | head -1)
cp "$S" good.sym
# The file's checksum made right again after an edit: FNV-1a 64 of
# everything before the last 8 bytes (analysis/symcache.c).
cat > "$W/symsum.py" << 'EOF'
import struct


def fix(b):
    h = 1469598103934665603
    for c in b[:-8]:
        h = ((h ^ c) * 1099511628211) & (2**64 - 1)
    b[-8:] = struct.pack("<Q", h)
EOF
# Rewrites a name in the file; "fix" recomputes the checksum, "keep" leaves
# it stale.
edit() { # edit FILE OLD NEW fix|keep
    PYTHONPATH="$W" "$PY" - "$@" << 'EOF'
import sys, symsum
path, old, new, how = sys.argv[1:]
b = bytearray(open(path, "rb").read())
i = b.find(old.encode() + b"\0")
assert i >= 0 and len(old) == len(new)
b[i:i + len(old)] = new.encode()
if how == "fix":
    symsum.fix(b)
open(path, "wb").write(b)
EOF
}
edit "$S" make_name fake_name fix
report own.mlt forged.json MEMLENS_DEBUG_CACHE="$C" || bad "report over an edited file"
frames forged.json > forged.txt
check "the warm report reads the file: the edited name shows" grep -qx "fake_name $W/prog.c $L_NAME False" forged.txt

cp good.sym "$S"
edit "$S" make_name fake_name keep
report own.mlt sum.json MEMLENS_DEBUG_CACHE="$C" || bad "report over a file failing its checksum"
check "a file failing its checksum: not used, the same JSON" cmp -s own.off.json sum.json
for damage in truncated garbage empty; do
    case $damage in
        truncated) head -c $(($(stat -c %s good.sym) - 20)) good.sym > "$S" ;;
        garbage) head -c 4000 /dev/urandom > "$S" ;;
        empty) : > "$S" ;;
    esac
    report own.mlt "$damage.json" MEMLENS_DEBUG_CACHE="$C" || bad "$damage: report"
    check "$damage file: not used, the same JSON" cmp -s own.off.json "$damage.json"
done
check "a damaged file is replaced by a good one" cmp -s good.sym "$S"
# Counts, addresses and offsets changed with the checksum made right again
# (the reader's bounds, not its checksum): every report ends well, with
# valid JSON.
mutate() { # mutate SEED: random words of the file before its strings
    PYTHONPATH="$W" "$PY" - good.sym "$S" "$1" << 'EOF'
import random, struct, sys, symsum
src, dst, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = random.Random(seed)
b = bytearray(open(src, "rb").read())
slen = struct.unpack_from("<I", b, 8)[0]
at = 12 + slen
ne, nf, ns = struct.unpack_from("<III", b, at)
end = at + 12 + 16 * ne + 16 * nf
for _ in range(r.randint(1, 4)):
    i = r.randrange(at, end - 3) & ~3 if r.random() < 0.9 else r.randrange(0, end - 3)
    v = r.choice([0, 1, 0xffffffff, 0x7fffffff, r.getrandbits(32), r.randrange(64), ns, ns - 1, nf, ne])
    struct.pack_into("<I", b, i, v)
symsum.fix(b)
open(dst, "wb").write(b)
EOF
}
nbad=0
for seed in $(seq 1 40); do
    mutate "$seed"
    if ! report own.mlt mut.json MEMLENS_DEBUG_CACHE="$C" > mut.log 2>&1 ||
        ! "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' mut.json; then
        nbad=$((nbad + 1))
        echo "seed $seed: $(head -c 300 mut.log)"
    fi
done
check "40 files with wrong counts, addresses or offsets (checksum right): every report ends well" test "$nbad" -eq 0
cp good.sym "$S"

# A link under the name: not followed when read, replaced (not written
# through) when written.
cp good.sym elsewhere.sym
edit elsewhere.sym make_name fake_name fix
cp elsewhere.sym elsewhere.orig
rm -f "$S" && ln -s "$W/elsewhere.sym" "$S"
report own.mlt linked.json MEMLENS_DEBUG_CACHE="$C" || bad "report over a link"
check "a link under the name: not followed, the same JSON" cmp -s own.off.json linked.json
check "a link under the name: its target is untouched" cmp -s elsewhere.sym elsewhere.orig
check "a link under the name: replaced by a file" test -f "$S" -a ! -L "$S"

# The program stripped in place (the build-id stays): no lines now, as
# without the cache.
cp own/prog own/prog.full
objcopy --strip-debug own/prog || exit 2
check "stripped: the build-id is the same" test "$(build_id own/prog)" = "$id"
report own.mlt stripped-off.json MEMLENS_DEBUG_CACHE="$W/fresh" ML_SYMBOL_CACHE=0 || bad "stripped: report"
report own.mlt stripped.json MEMLENS_DEBUG_CACHE="$C" || bad "stripped: report with the cache"
check "stripped in place: the cached lines are not used" cmp -s stripped-off.json stripped.json
check "stripped in place: the report has no line of prog.c (the test can tell)" \
    bash -c "! grep -q '$W/prog.c' stripped.json"
mv own/prog.full own/prog

# The separate debug file gone: no lines now, as without the cache.
mv link/prog.debug link/prog.debug.away
report link.mlt gone-off.json MEMLENS_DEBUG_CACHE="$W/fresh2" ML_SYMBOL_CACHE=0 || bad "gone: report"
report link.mlt gone.json MEMLENS_DEBUG_CACHE="$W/cache-link" || bad "gone: report with the cache"
check "debug file gone: the cached lines are not used" cmp -s gone-off.json gone.json
check "debug file gone: the report has no line of prog.c (the test can tell)" \
    bash -c "! grep -q '$W/prog.c' gone.json"
mv link/prog.debug.away link/prog.debug

# Symbol files unused for 30 days go when a new one is written; younger
# ones and debug copies stay.
C="$W/cache-age"
mkdir -m 700 "$C"
for f in 0123456789abcdef0123456789abcdef01234567.0123456789abcdef.sym old.debug; do
    cp good.sym "$C/$f" && touch -d '40 days ago' "$C/$f"
done
cp good.sym "$C/fedcba9876543210fedcba9876543210fedcba98.0123456789abcdef.sym" &&
    touch -d '10 days ago' "$C/fedcba9876543210fedcba9876543210fedcba98.0123456789abcdef.sym"
report own.mlt age.json MEMLENS_DEBUG_CACHE="$C" || bad "report, old symbol files"
check "a symbol file unused for 40 days is removed" test ! -e "$C/0123456789abcdef0123456789abcdef01234567.0123456789abcdef.sym"
check "one unused for 10 days stays, and so does an old debug copy" \
    test -e "$C/fedcba9876543210fedcba9876543210fedcba98.0123456789abcdef.sym" -a -e "$C/old.debug"

# The cache inside a directory of another user's (root run with that
# user's HOME, sudo -E): nothing made there, the same JSON. A sticky one
# such as /tmp is fine.
if [ "$(id -u)" = 0 ]; then
    mkdir -p alice sticky && chown 65534:65534 alice && chmod 1777 sticky
    report own.mlt alice.json MEMLENS_DEBUG_CACHE="$W/alice/.cache/memlens/debug" || bad "report, cache in another user's directory"
    check "another user's directory: nothing made in it, the same JSON" \
        bash -c "cmp -s own.off.json alice.json && test -z \"\$(ls -A alice)\""
    report own.mlt sticky.json MEMLENS_DEBUG_CACHE="$W/sticky/c" || bad "report, cache in a sticky directory"
    check "a sticky directory: the cache is made there" bash -c "cmp -s own.off.json sticky.json && ls sticky/c/*.sym > /dev/null"
else
    echo "skip another user's directory: not root"
fi

# A HOME that does not exist (a system account's, /nonexistent): no cache,
# and HOME is not made. As root, / would let memlens make it.
report own.mlt nohome.json -u MEMLENS_DEBUG_CACHE -u XDG_CACHE_HOME HOME="$W/nohome" ||
    bad "report, HOME missing"
check "a HOME that does not exist is not made, the same JSON" \
    bash -c "cmp -s own.off.json nohome.json && test ! -e '$W/nohome'"
mkdir -p home
report own.mlt home.json -u MEMLENS_DEBUG_CACHE -u XDG_CACHE_HOME HOME="$W/home" || bad "report, HOME"
check "a HOME that exists gets .cache/memlens/debug" bash -c "cmp -s own.off.json home.json && ls home/.cache/memlens/debug/*.sym > /dev/null"

check "no temporary file left behind" bash -c "! ls '$W'/cache-*/ | grep -q '\.tmp\.'"
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
