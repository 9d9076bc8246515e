# checks_lib.sh - sourced by the shell tests: counting passed and failed
# checks. Not a script of its own. `fails` is the number of failed checks.
fails=0
ok() { echo "ok   $*"; }
bad() {
    echo "FAIL $*"
    fails=$((fails + 1))
}
