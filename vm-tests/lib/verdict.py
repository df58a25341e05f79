#!/usr/bin/env python3
"""vm-tests/lib/verdict.py RESULTS GROUPS GROUP: one part of a suite's verdict.

RESULTS is a run's results folder (or the link VMTESTS_RESULTS_LINK made to
it); GROUPS a file of lines "name<TAB>regular expression", in order; a check
of RESULTS/checks.tsv belongs to the first group whose expression it matches
(re.search on its name), and the last group should match everything. Prints
the checks of GROUP and exits 0 only if there is at least one and every one
passed. The suite's own test still fails on any failed check; these tests
only say which part failed, by name, where a reader sees nothing but the names
of the failed tests (ctest's summary at the end of a CI log)."""
import re
import sys


def load_groups(path):
    groups = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            name, sep, rx = line.partition("\t")
            if not sep or not name:
                raise ValueError("%s:%d: expected NAME<TAB>REGEX" % (path, n))
            groups.append((name, re.compile(rx)))
    return groups


def group_of(check, groups):
    for name, rx in groups:
        if rx.search(check):
            return name
    return None


def judge(checks_tsv, groups, group):
    """(ok, lines): the checks of GROUP, and whether it passed."""
    mine, bad = [], 0
    with open(checks_tsv) as f:
        for line in f:
            status, _, rest = line.rstrip("\n").partition("\t")
            name = rest.partition("\t")[0]
            if group_of(name, groups) != group:
                continue
            mine.append("%s: %s" % (status, rest.replace("\t", " -- ", 1)))
            if status != "PASS":
                bad += 1
    return bool(mine) and bad == 0, mine


def main():
    if len(sys.argv) != 4:
        print("usage: verdict.py RESULTS GROUPS GROUP", file=sys.stderr)
        return 2
    results, groups_path, group = sys.argv[1:]
    groups = load_groups(groups_path)
    if group not in [g for g, _ in groups]:
        print("verdict: no group %r in %s" % (group, groups_path), file=sys.stderr)
        return 2
    try:
        ok, lines = judge(results + "/checks.tsv", groups, group)
    except OSError as e:
        print("verdict: FAIL, no checks recorded: %s" % e)
        return 1
    for line in lines:
        print(line)
    if not lines:
        print("verdict: FAIL, the run recorded no check of the group %r" % group)
    print("verdict: %s, group %r of %s" % ("PASS" if ok else "FAIL", group, results))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
