#!/usr/bin/env python3
"""vm-tests/locks_test.py CTEST BUILD_DIR: every real-systemd suite (a test
labelled vm) names its target last (.bookworm, .trixie or .vm) and takes that
target's properties, ${OPENCODE_VM_SUITE_<target>} (top-level CMakeLists.txt):
the lock vm_harness and RUN_SERIAL (each suite alone on the machine). A suite
without them could boot beside another suite or beside the CPU-bound tests."""
import json
import subprocess
import sys

LOCKS = {"bookworm": "vm_harness", "trixie": "vm_harness", "vm": "vm_harness"}


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
        if props.get("RUN_SERIAL") is not True:
            bad.append("%s: RUN_SERIAL %s, want true" % (t["name"], props.get("RUN_SERIAL")))
    print("real-systemd suites per target: %s" % json.dumps(counts, sort_keys=True))
    for b in bad:
        print(b)
    if not counts:
        print("no test labelled vm: the registry was not read")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
