#!/usr/bin/env python3
"""vm-tests/lib/verdict_test.py: verdict.py on recorded checks: a check goes to
the first group that matches it; a group passes only with at least one check
and no failure; a missing record or an unknown group is a failure."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VERDICT = os.path.join(HERE, "verdict.py")
GROUPS = "# a comment\nstart\t^warm-up|started\nclose\tunits left\nsetup\t\n"
CHECKS = ("PASS\twarm-up: 4 sessions started\tok\n"
          "PASS\tstop round: all 256 sessions started\tok\n"
          "FAIL\tstop round: 0 units left\tleft 3\n"
          "PASS\tinstall opencode-pty-supervisor\texit 0\n"
          "FAIL\tstop round: units left in a started state\tmatches start first\n")


def run(results, groups, group):
    p = subprocess.run([sys.executable, VERDICT, results, groups, group], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append("%s: got %r, want %r" % (what, got, want))

    with tempfile.TemporaryDirectory() as d:
        groups = os.path.join(d, "groups.tsv")
        with open(groups, "w") as f:
            f.write(GROUPS)
        res = os.path.join(d, "results")
        os.mkdir(res)
        with open(os.path.join(res, "checks.tsv"), "w") as f:
            f.write(CHECKS)
        rc, out = run(res, groups, "start")
        expect("start: the first matching group takes a check, so its failure is start's", rc, 1)
        expect("start: its three checks listed", [l.split(":")[0] for l in out.splitlines()][:3], ["PASS", "PASS", "FAIL"])
        rc, out = run(res, groups, "close")
        expect("close: one failed check", rc, 1)
        expect("close: the failure's evidence is printed", "left 3" in out, True)
        rc, out = run(res, groups, "setup")
        expect("setup: the catch-all group passes with its one check", (rc, out.count("install")), (0, 1))
        rc, _ = run(res, groups, "nope")
        expect("an unknown group is a usage error", rc, 2)
        rc, out = run(os.path.join(d, "missing"), groups, "setup")
        expect("no checks.tsv fails", (rc, "no checks recorded" in out), (1, True))
        with open(os.path.join(res, "checks.tsv"), "w") as f:
            f.write("PASS\tinstall opencode-pty-supervisor\texit 0\n")
        rc, out = run(res, groups, "close")
        expect("a group without any recorded check fails", (rc, "no check of the group" in out), (1, True))

    for f in failures:
        print("FAIL:", f)
    print("verdict_test: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
