#!/bin/sh
# vm-tests/node/resize.sh [--runtime=node|bun] [CASE,...]: live resize on a real systemd (ctest
# vm.node-resize.bookworm = 252, vm.node-resize.trixie = 257; --runtime=bun:
# vm.node-resize.bun.{bookworm,trixie}, the pinned Bun as the MainPID, issue #31). The application
# side is vm-tests/node/resize-app.js as the MainPID of opencode-v2.service
# (User=byk), through the installed supervisor, helper and launcher: a WINCH
# trap sees three sizes in order, tput, less redrawing at 132x40, a flood of
# 10,000 resizes, resize before started, bad sizes and frames. This script adds
# what only root can check: no unit, no byk process (no monitor) is left, and the
# supervisor's descriptor count is unchanged.
. /vm-tests/lib/check.sh
. /tests/common.sh
CASES=trap,tput,less,flood,prestart,bad
RUNTIME=node
case "${1:-}" in --runtime=*) RUNTIME=${1#--runtime=}; shift ;; esac
[ $# -gt 0 ] && CASES=$1

node_install
runtime_install "$RUNTIME"
echo "resize: $(systemctl --version | head -n1); $RUNTIME $($APP_RUNTIME --version); kernel $(uname -r)"
check "rootfs: less is installed" test -x /usr/bin/less
# Socket activation: a first connection (root's, refused) starts the supervisor,
# so its descriptors can be counted before any session.
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/opencode-pty/supervisor.sock"); s.settimeout(10); s.recv(4096)'
sup=$(systemctl show -P MainPID opencode-pty-supervisor.service)
check "the supervisor runs (MainPID $sup)" test "$sup" -gt 0
fds_before=$(ls /proc/$sup/fd | wc -l)
rm -f $WORK/resize.jsonl
app_run 600 "$APP_RUNTIME /tests/resize-app.js" OPENCODE_TEST_RUNTIME=$RUNTIME \
  OPENCODE_PTY_MODULE=$CLIENT/index.js OPENCODE_RESIZE_OUT=$WORK/resize.jsonl OPENCODE_RESIZE_WORK=$WORK \
  OPENCODE_RESIZE_CASES=$CASES
rc=$?
cp $WORK/resize.jsonl /results/node-resize$RUNTIME_SFX.jsonl 2>/dev/null
journalctl -o cat --no-pager -u opencode-v2.service > /results/node-resize-app$RUNTIME_SFX.log
app_checks $WORK/resize.jsonl resize "$rc" node-resize-app$RUNTIME_SFX.log

check "cleanup: no opencode-pty-*.service unit is left" no_session_units
# The monitor (the command's parent) is a byk process inside each unit: none may
# outlive its session.
check "cleanup: no process of byk is left (no monitor outlived its command)" sh -c '! pgrep -u byk -a'
fds_after=$(ls /proc/$sup/fd | wc -l)
if [ "$fds_after" -eq "$fds_before" ]; then pass "cleanup: the supervisor holds as many descriptors as before ($fds_before)"
else fail "cleanup: the supervisor holds as many descriptors as before" "before $fds_before, after $fds_after"; fi
checks_done
