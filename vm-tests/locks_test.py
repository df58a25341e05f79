#!/usr/bin/env python3
"""vm-tests/locks_test.py CTEST BUILD_DIR: every real-systemd suite (a test
labelled vm) names its target last (.bookworm, .trixie or .vm) and takes that
target's properties, ${OPENCODE_VM_SUITE_<target>} (top-level CMakeLists.txt):
its target's lock (the suites of one target one after another, the targets
side by side) and COST 2000 (started before every other test: each target's
suites are the test command's longest chains). A suite with another lock
could boot beside a suite of its own target; one with a lower cost could
wait behind the unit tests and make the command longer."""
import json
import subprocess
import sys

LOCKS = {"bookworm": "vm_bookworm", "trixie": "vm_trixie", "vm": "vm_qemu"}
COST = 2000.0


def main():
    ctest, build = sys.argv[1], sys.argv[2]
    out = subprocess.run([ctest, "--show-only=json-v1", "--test-dir", build],
                         check=True, capture_output=True, text=True).stdout
    bad, counts = [], {}
    for t in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        if "vm" not in (props.get("LABELS") or []):
            continue
        target = t["name"].rsplit(".", 1)[-1]
        lock = props.get("RESOURCE_LOCK") or []
        counts[target] = counts.get(target, 0) + 1
        if target not in LOCKS:
            bad.append("%s: the name does not end in a target (%s)" % (t["name"], ", ".join(LOCKS)))
        elif lock != [LOCKS[target]]:
            bad.append("%s: RESOURCE_LOCK %s, want [%s]" % (t["name"], lock, LOCKS[target]))
        if props.get("COST") != COST:
            bad.append("%s: COST %s, want %s" % (t["name"], props.get("COST"), COST))
        if props.get("RUN_SERIAL"):
            bad.append("%s: RUN_SERIAL, want the target's lock only" % t["name"])
    print("real-systemd suites per target: %s" % json.dumps(counts, sort_keys=True))
    for b in bad:
        print(b)
    if not counts:
        print("no test labelled vm: the registry was not read")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
