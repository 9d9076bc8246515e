"""e2e_checks.py - the checks the Python end-to-end tests share.

A failed check is printed at once and kept in `failures`; the test reports
how many failed and exits non-zero when any did.
"""

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def eq(got, want, what):
    check(got == want, "%s: got %r, want %r" % (what, got, want))
