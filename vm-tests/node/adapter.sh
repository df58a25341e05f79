#!/bin/sh
# vm-tests/node/adapter.sh: opencode's PTY service on this module, unchanged
# (issue #29), on a real systemd (ctest vm.node-adapter.bookworm = 252,
# vm.node-adapter.trixie = 257). opencode's own Node adapter, compiled from
# client/node/typecheck/opencode-adapter.ts by node.typecheck (fixture
# node_adapter, /artifacts/node-adapter/), imports the node-pty drop-in by its
# package name (@opencode-pty/node/node-pty, resolved to the staged module);
# vm-tests/node/adapter-app.js drives it inside the Node 26.4 SEA as the MainPID
# of opencode-v2.service (User=byk) through the installed supervisor, helper and
# launcher. This script adds what only root can check: no unit and no byk
# process is left, and the supervisor's descriptor count is unchanged.
. /vm-tests/lib/check.sh
. /tests/common.sh

node_install
echo "adapter: $(systemctl --version | head -n1); SEA $(OPENCODE_PTY_APP_MODE=version $NODE_SEA_APP); kernel $(uname -r)"
check "artifacts: opencode's adapter compiled by node.typecheck" test -s $A/node-adapter/opencode-adapter.js
# Where opencode's import finds the module: node_modules beside the adapter.
dir=$WORK/adapter
install -d -o byk -g byk -m 0755 $dir $dir/node_modules $dir/node_modules/@opencode-pty
install -o byk -g byk -m 0644 $A/node-adapter/opencode-adapter.js $dir/
ln -sfn $CLIENT $dir/node_modules/@opencode-pty/node
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/opencode-pty/supervisor.sock"); s.settimeout(10); s.recv(4096)'
sup=$(systemctl show -P MainPID opencode-pty-supervisor.service)
check "the supervisor runs (MainPID $sup)" test "$sup" -gt 0
fds_before=$(ls /proc/$sup/fd | wc -l)
rm -f $WORK/adapter.jsonl
app_run 600 "$NODE_SEA_APP" OPENCODE_PTY_APP_MODE=script OPENCODE_PTY_APP_SCRIPT=/tests/adapter-app.js \
  OPENCODE_ADAPTER=$dir/opencode-adapter.js OPENCODE_ADAPTER_OUT=$WORK/adapter.jsonl OPENCODE_ADAPTER_WORK=$WORK
rc=$?
cp $WORK/adapter.jsonl /results/node-adapter.jsonl 2>/dev/null
journalctl -o cat --no-pager -u opencode-v2.service > /results/node-adapter-app.log
app_checks $WORK/adapter.jsonl adapter "$rc" node-adapter-app.log

check "cleanup: no opencode-pty-*.service unit is left" no_session_units
check "cleanup: no process of byk is left" sh -c '! pgrep -u byk -a'
fds_after=$(ls /proc/$sup/fd | wc -l)
if [ "$fds_after" -eq "$fds_before" ]; then pass "cleanup: the supervisor holds as many descriptors as before ($fds_before)"
else fail "cleanup: the supervisor holds as many descriptors as before" "before $fds_before, after $fds_after"; fi
checks_done
