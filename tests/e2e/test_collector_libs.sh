#!/usr/bin/env bash
# What the collector maps (issue 12, item 1: its memory beside a small
# program's): `memlens run` is the traced program's parent, so the program
# reads /proc/$PPID/maps while it is being recorded. libstdc++ must not be
# there (symbols.c loads __cxa_demangle with dlopen, for reports only), and
# the ELF file must not ask for it either.
# usage: test_collector_libs.sh BUILD_DIR
set -u
B=$(cd "${1:?build dir}" && pwd)
ML="$B/memlens"
W=$(mktemp -d /tmp/memlens-colllibs-XXXXXX)
trap 'rm -rf "$W"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

readelf -d "$ML" | grep -q NEEDED || bad "readelf lists no NEEDED entry in $ML"
if readelf -d "$ML" | grep -q 'libstdc++'; then bad "memlens is linked with libstdc++"; else ok "memlens is not linked with libstdc++"; fi

# The program prints its parent's name and mapped libraries, then exits 7:
# memlens must pass the status on.
"$ML" run -q -o "$W/t.mlt" -- sh -c 'cat /proc/$PPID/comm; grep -o "/[^ ]*\.so[^ ]*" /proc/$PPID/maps | sort -u; exit 7' \
    >"$W/out" 2>"$W/err"
rc=$?
[ "$rc" = 7 ] && ok "exit status passed on" || bad "memlens run exited $rc, not 7: $(cat "$W/err")"
[ "$(head -1 "$W/out")" = memlens ] && ok "the program's parent is the collector" ||
    bad "the program's parent is $(head -1 "$W/out"), not memlens"
grep -q 'libc\.so' "$W/out" && ok "the collector's maps were read" || bad "no libc in the collector's maps: $(cat "$W/out")"
# A sanitizer build's runtime brings libstdc++ itself (libubsan.so needs it):
# then it is that library's, not memlens' own code's.
via=
for lib in $(readelf -d "$ML" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    path=$(ldd "$ML" | awk -v l="$lib" '$1 == l { print $3 }')
    [ -n "$path" ] && readelf -d "$path" | grep -q 'NEEDED.*libstdc++' && via="$via $lib"
done
if ! grep -q 'libstdc++' "$W/out"; then
    ok "the collector maps no libstdc++"
elif [ -n "$via" ]; then
    ok "the collector maps libstdc++ for its sanitizer runtime only (needed by$via)"
else
    bad "the collector maps libstdc++"
fi

# A report still demangles C++ names (the dlopen path).
cat >"$W/cx.cpp" <<'CPP'
#include <string>
namespace ns { template <class T> struct F { static T *make() { return new T(); } }; }
int main() { return ns::F<std::string>::make() ? 0 : 1; }
CPP
if g++ -O0 -g -o "$W/cx" "$W/cx.cpp"; then
    "$ML" run -q -o "$W/cx.mlt" -- "$W/cx" && "$ML" report "$W/cx.mlt" >"$W/rep" 2>&1
    grep -q 'ns::F<…>::make' "$W/rep" && ok "C++ names demangled in the report" ||
        bad "no demangled ns::F<…>::make in the report: $(head -20 "$W/rep")"
else
    bad "g++ failed"
fi
[ "$fails" = 0 ] && echo "all passed" || echo "$fails failed"
exit $((fails > 0))
