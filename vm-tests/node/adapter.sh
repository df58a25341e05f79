#!/bin/sh
# vm-tests/node/adapter.sh [--runtime=node|bun]: opencode's PTY service on this module, unchanged
# (issue #29), on a real systemd (ctest vm.node-adapter.bookworm = 252,
# vm.node-adapter.trixie = 257). opencode's own Node adapter, compiled from
# client/node/typecheck/opencode-adapter.ts by node.typecheck (fixture
# node_adapter, /artifacts/node-adapter/), imports the node-pty drop-in by its
# package name (@opencode-pty/node/node-pty, resolved to the staged module);
# vm-tests/node/adapter-app.js drives it inside the Node 26.4 SEA as the MainPID
# of opencode-v2.service (User=byk) through the installed supervisor, helper and
# launcher; with --runtime=bun (vm.node-adapter.bun.{bookworm,trixie}, issue #31) the
# pinned Bun runs adapter-app.js as the MainPID instead, resolving the drop-in
# from the same node_modules. This script adds what only root can check: no unit and no byk
# process is left, and the supervisor's descriptor count is unchanged.
. /vm-tests/lib/check.sh
. /tests/common.sh
RUNTIME=node
case "${1:-}" in --runtime=*) RUNTIME=${1#--runtime=}; shift ;; esac

node_install
runtime_install "$RUNTIME"
echo "adapter: $(systemctl --version | head -n1); SEA $(OPENCODE_PTY_APP_MODE=version $NODE_SEA_APP); $RUNTIME; kernel $(uname -r)"
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
if [ "$RUNTIME" = bun ]; then
  app_run 600 "$APP_RUNTIME /tests/adapter-app.js" OPENCODE_TEST_RUNTIME=bun \
    OPENCODE_ADAPTER=$dir/opencode-adapter.js OPENCODE_ADAPTER_OUT=$WORK/adapter.jsonl OPENCODE_ADAPTER_WORK=$WORK
else
  app_run 600 "$NODE_SEA_APP" OPENCODE_PTY_APP_MODE=script OPENCODE_PTY_APP_SCRIPT=/tests/adapter-app.js \
    OPENCODE_ADAPTER=$dir/opencode-adapter.js OPENCODE_ADAPTER_OUT=$WORK/adapter.jsonl OPENCODE_ADAPTER_WORK=$WORK
fi
rc=$?
cp $WORK/adapter.jsonl /results/node-adapter$RUNTIME_SFX.jsonl 2>/dev/null
journalctl -o cat --no-pager -u opencode-v2.service > /results/node-adapter-app$RUNTIME_SFX.log
app_checks $WORK/adapter.jsonl adapter "$rc" node-adapter-app$RUNTIME_SFX.log

check "cleanup: no opencode-pty-*.service unit is left" no_session_units
check "cleanup: no process of byk is left" sh -c '! pgrep -u byk -a'
fds_after=$(ls /proc/$sup/fd | wc -l)
if [ "$fds_after" -eq "$fds_before" ]; then pass "cleanup: the supervisor holds as many descriptors as before ($fds_before)"
else fail "cleanup: the supervisor holds as many descriptors as before" "before $fds_before, after $fds_after"; fi
checks_done
