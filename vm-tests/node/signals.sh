#!/bin/sh
# vm-tests/node/signals.sh [--runtime=node|bun] [CASE,...]: signals and exit status (issue 20) on a
# real systemd (ctest vm.node-signals.bookworm = 252, vm.node-signals.trixie =
# 257; --runtime=bun: vm.node-signals.bun.{bookworm,trixie}, the pinned Bun as the MainPID,
# issue #31). The application side is vm-tests/node/signals-app.js as the MainPID of
# opencode-v2.service (User=byk), through the installed supervisor, helper and
# launcher: kill() reaches the command only (TERM, INT to bash -i, a USR1 trap,
# KILL), Ctrl-C and Ctrl-Z typed as input reach the command's group only, a
# SEGV, term.pid, destroy() and a launcher failure (launch_failed). This script
# adds what only root can check: no unit and no byk process is left, and the
# supervisor's descriptor count is unchanged.
. /vm-tests/lib/check.sh
. /tests/common.sh
CASES=term,int,usr1,ctrlc,segv,pid,destroy,ctrlz,launch
RUNTIME=node
case "${1:-}" in --runtime=*) RUNTIME=${1#--runtime=}; shift ;; esac
[ $# -gt 0 ] && CASES=$1

node_install
runtime_install "$RUNTIME"
echo "signals: $(systemctl --version | head -n1); $RUNTIME $($APP_RUNTIME --version); kernel $(uname -r)"
# Socket activation: a first connection (root's, refused) starts the supervisor,
# so its descriptors can be counted before any session.
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/opencode-pty/supervisor.sock"); s.settimeout(10); s.recv(4096)'
sup=$(systemctl show -P MainPID opencode-pty-supervisor.service)
check "the supervisor runs (MainPID $sup)" test "$sup" -gt 0
fds_before=$(ls /proc/$sup/fd | wc -l)
rm -f $WORK/signals.jsonl
app_run 600 "$APP_RUNTIME /tests/signals-app.js" OPENCODE_TEST_RUNTIME=$RUNTIME \
  OPENCODE_PTY_MODULE=$CLIENT/index.js OPENCODE_SIGNALS_OUT=$WORK/signals.jsonl OPENCODE_SIGNALS_WORK=$WORK \
  OPENCODE_SIGNALS_CASES=$CASES
rc=$?
cp $WORK/signals.jsonl /results/node-signals$RUNTIME_SFX.jsonl 2>/dev/null
journalctl -o cat --no-pager -u opencode-v2.service > /results/node-signals-app$RUNTIME_SFX.log
app_checks $WORK/signals.jsonl signals "$rc" node-signals-app$RUNTIME_SFX.log

check "cleanup: no opencode-pty-*.service unit is left" no_session_units
# The monitor is a byk process inside each unit: none may outlive its command,
# and no stopped or signalled command may outlive its session.
check "cleanup: no process of byk is left (no monitor or command outlived its session)" sh -c '! pgrep -u byk -a'
fds_after=$(ls /proc/$sup/fd | wc -l)
if [ "$fds_after" -eq "$fds_before" ]; then pass "cleanup: the supervisor holds as many descriptors as before ($fds_before)"
else fail "cleanup: the supervisor holds as many descriptors as before" "before $fds_before, after $fds_after"; fi
checks_done
