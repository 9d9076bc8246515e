# checks_lib.sh - sourced by the shell tests: counting passed and failed
# checks. Not a script of its own. `fails` is the number of failed checks;
# `check DESCRIPTION COMMAND...` is ok when the command succeeds.
fails=0
ok() { echo "ok   $*"; }
bad() {
    echo "FAIL $*"
    fails=$((fails + 1))
}
check() { # check DESCRIPTION COMMAND...: ok when the command succeeds
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
