#!/bin/sh
# vm-tests/faults/soak.sh: the soak (issue #17) against a real systemd
# (bookworm = 252, trixie = 257). Installs the stack as faults.sh does, runs
# faults_app.py as the MainPID of opencode-v2.service and lets soak.py run
# random session operations for ROUNDS rounds of about a minute, one fault
# (SIGKILL of the supervisor, daemon-reexec or daemon-reload) per round and
# the fault campaign's invariant check after each round, then a
# detach/restart/reattach of detachable sessions and the check again.
#   soak.sh [--minutes N] [--round-seconds S] [--seed N]
# Run it with vm-tests/soak (which also draws the PNG); the test command runs
# 2 rounds of 40 s (vm.soak.bookworm, vm.soak.trixie). Results: /results/soak.json.
. /vm-tests/lib/check.sh
. /vm-tests/lib/supervisor-setup.sh
here=$(dirname "$0")

seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
minutes=2 round_s=55
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift ;;
    --round-seconds) round_s=$2; shift ;;
    --seed) seed=$2; shift ;;
    *) fail "soak.sh arguments" "unknown argument $1"; checks_done; exit 1 ;;
  esac
  shift
done
echo "soak: seed $seed, $minutes rounds of $round_s s (replay: vm-tests/soak --target $VMTESTS_TARGET --minutes $minutes --round-seconds $round_s --seed $seed)"

supervisor_setup "soak" "/usr/bin/python3 $here/faults_app.py"

start=$(date +%s)
python3 "$here/soak.py" "$seed" "$minutes" "$round_s" /results/soak.json
rc=$?
echo "soak: took $(( $(date +%s) - start )) s, driver exit $rc"
check "soak.json written" test -s /results/soak.json
check "soak: no session lost, no unit left, every round passed the invariant check and its detach/restart/reattach (seed $seed)" python3 -c '
import json, sys
r = json.load(open("/results/soak.json"))
t = r.get("totals")
if t is None or len(r["minutes"]) != r["rounds"] + 1:   # round 0 is the warm-up
    print("%d of %d rounds ran" % (len(r["minutes"]) - 1, r["rounds"])); sys.exit(1)
print("%d sessions, %d operations, faults %s, lost %d, units left %d, not proven gone %d, rounds failed %d; "
      "detach/restart/reattach %d rounds, %d sessions reattached (%d with bytes dropped), %d failed" % (
    t["sessions"], t["ops_done"], t["faults"], t["lost"], t["units_left"], t["not_proven_gone"], t["rounds_failed"],
    t["detach_rounds"], t["detach_sessions"], t["detach_dropped"], t["detach_failed"]))
for m in r["minutes"]:
    if not m["invariant_pass"]:
        print("round %d: %s" % (m["minute"], "; ".join(m["failures"])))
sys.exit(0 if t["lost"] == 0 and t["rounds_failed"] == 0 and t["units_left"] == 0 and t["sessions"] > 0
         and t["detach_rounds"] == r["rounds"] and t["detach_sessions"] > 0 and t["detach_failed"] == 0 else 1)'
journalctl --no-pager -o short-precise _SYSTEMD_UNIT=opencode-pty-supervisor.service -p warning > /results/supervisor-warnings.txt 2>&1
systemctl --version | head -n1 > /results/systemd-version.txt
checks_done
