#!/bin/sh
# vm-tests/faults/faults.sh: the fault campaign against a real systemd
# (bookworm = 252, trixie = 257), first slice of issue #17. Installs the built
# binaries and the supervisor's units as supervisor.sh does, runs the
# application stand-in faults_app.py as the MainPID of opencode-v2.service,
# and lets the root driver faults.py repeat each fault with seeded random
# timing, each repetition ending with the same invariant check (faults.py's
# header): SIGKILL of the supervisor at five points of a session's life,
# systemctl daemon-reexec and daemon-reload with live sessions, connection
# churn mixed with bad handshakes and root connections, application
# restarts, stalled readers, detachable sessions through faults (detach) and
# with every ring full (rings).
#   faults.sh [--long] [--seed N]
# Default counts are short (the README's test command); --long runs the
# issue's full counts (OPENCODE_LONG_VM_TESTS=1). Results: /results/faults.json.
. /vm-tests/lib/check.sh
. /vm-tests/lib/supervisor-setup.sh
here=$(dirname "$0")

seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
counts="kills=20 reexecs=5 reloads=5 sessions=10 churn=2000 restarts=3 restart_sessions=4 memory=2 stall_sessions=50 stall_seconds=5 stall_bytes=2097152 detach=8 detach_sessions=4 rings=2"
# memory is not among the default cases: in the containers the host's legacy
# memory controller is read-only and a MemoryMax= is not enforced (measured on
# these machines); vm.faults-memory.vm runs it in the VM (cgroup v2).
long= only= cases="sigkill reexec reload churn restart stall detach rings"
while [ $# -gt 0 ]; do
  case "$1" in
    --long) counts="kills=100 reexecs=20 reloads=20 sessions=50 churn=10000 restarts=20 restart_sessions=10 memory=5 stall_sessions=50 stall_seconds=30 detach=40 detach_sessions=8 rings=6"
            long=" --long" ;;
    --seed) seed=$2; shift ;;
    # Replay or debug some cases only, e.g. --only restart,churn.
    --only) only=" --only $2"; cases=$(echo "$2" | tr , ' '); shift ;;
    *) fail "faults.sh arguments" "unknown argument $1"; checks_done; exit 1 ;;
  esac
  shift
done
echo "faults: seed $seed (replay: vm-tests/run $VMTESTS_TARGET --artifacts BUILD vm-tests/faults/faults.sh --seed $seed$long$only)"

# --- install (shared with supervisor/supervisor.sh) ---------------------------------------------
supervisor_setup "fault campaign" "/usr/bin/python3 $here/faults_app.py"

# --- the campaign ------------------------------------------------------------------------------------
start=$(date +%s)
# shellcheck disable=SC2086 # counts are key=value words
python3 "$here/faults.py" "$seed" /results/faults.json $counts "only=$(echo $cases | tr ' ' ,)"
rc=$?
echo "faults: campaign took $(( $(date +%s) - start )) s, driver exit $rc"
check "faults.json written" test -s /results/faults.json
for c in $cases; do
  check "faults $c: every repetition passed the invariant check (seed $seed)" python3 -c '
import json, sys
r = json.load(open("/results/faults.json"))
c = r["cases"].get(sys.argv[1])
if c is None:
    print("case did not run"); sys.exit(1)
# What failed first: the evidence keeps only the first 400 characters.
for i, rep in enumerate(c["repetitions"]):
    if not rep["invariant"]["pass"]:
        print("repetition %d: %s" % (i + 1, "; ".join(rep["invariant"]["failures"])))
print("%d/%d passed, %s" % (c["passed"], len(c["repetitions"]), c["summary"]))
sys.exit(0 if c["failed"] == 0 and c["passed"] == c["count" if sys.argv[1] != "churn" else "rounds"] else 1)' "$c"
done
journalctl --no-pager -o short-precise _SYSTEMD_UNIT=opencode-pty-supervisor.service > /results/supervisor-journal.txt 2>&1
journalctl --no-pager -o short-precise -u opencode-v2.service > /results/standin-journal.txt 2>&1
systemctl --version | head -n1 > /results/systemd-version.txt
checks_done
