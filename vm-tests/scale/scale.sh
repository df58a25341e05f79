#!/bin/sh
# vm-tests/scale/scale.sh: N concurrent idle sessions against a real systemd
# (bookworm = 252, trixie = 257), issue #16. Installs the built stack as
# supervisor.sh does, runs scale_app.py as the MainPID of opencode-v2.service,
# and lets the root driver scale.py start N `sleep infinity` sessions (8 at a
# time between connect and `started`), hold them, and close them all at once,
# twice: by STOP on every session, then by closing every connection. Each
# round is judged from outside (scale.py's header): every session started,
# 0 bus refusals of any kind in the journal, systemd never left the bus, every
# unit proven gone and none left, the supervisor's descriptors back to its
# baseline; RssAnon and descriptors per session are recorded.
#   scale.sh [--long] [--sessions N] [--hold S]
# Default N = 256 (the README's test command); --long is N = 1,000
# (OPENCODE_LONG_VM_TESTS=1). Results: /results/scale.json.
. /vm-tests/lib/check.sh
. /vm-tests/lib/supervisor-setup.sh
here=$(dirname "$0")

n=256 hold=5
while [ $# -gt 0 ]; do
  case "$1" in
    --long) n=1000 ;;
    --sessions) n=$2; shift ;;
    --hold) hold=$2; shift ;;
    *) fail "scale.sh arguments" "unknown argument $1"; checks_done; exit 1 ;;
  esac
  shift
done

# The suite counts journal lines (one "PTY unit proven gone" per unit, every
# dbus-daemon and PID 1 line): journald must keep them all. Its default rate
# limit (10,000 lines per 30 s per unit) and runtime size are below what two
# rounds of 1,000 sessions log; scale.py also fails if journald suppressed any.
mkdir -p /run/systemd/journald.conf.d
printf '[Journal]\nRateLimitIntervalSec=0\nRuntimeMaxUse=1G\n' > /run/systemd/journald.conf.d/90-scale.conf
check "journald: no rate limit for the suite" systemctl restart systemd-journald

# --- install (shared with supervisor/supervisor.sh and faults/faults.sh) -----------------------------
supervisor_setup "scale suite" "/usr/bin/python3 $here/scale_app.py"

# --- the rounds ----------------------------------------------------------------------------------------
start=$(date +%s)
python3 "$here/scale.py" "$n" "$hold" /results/scale.json
rc=$?
echo "scale: $n sessions, two rounds, took $(( $(date +%s) - start )) s, driver exit $rc"
check "scale.json written" test -s /results/scale.json
verdicts=$(mktemp)
python3 -c '
import json, sys
for status, name, evidence in json.load(open(sys.argv[1]))["checks"]:
    print("%s\t%s\t%s" % (status, name, evidence.replace("\t", " ").replace("\n", " ")))' /results/scale.json > "$verdicts"
while IFS="	" read -r status name evidence; do
  if [ "$status" = PASS ]; then pass "$name" "$evidence"; else fail "$name" "$evidence"; fi
done < "$verdicts"
[ "$rc" -eq 0 ] || fail "scale.py ran to its end" "exit $rc (see script.log)"
journalctl --no-pager -o short-precise _SYSTEMD_UNIT=opencode-pty-supervisor.service > /results/supervisor-journal.txt 2>&1
journalctl --no-pager -o short-precise -u dbus.service > /results/dbus-journal.txt 2>&1
checks_done
