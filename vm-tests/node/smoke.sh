#!/bin/sh
# vm-tests/node/smoke.sh [--unit-tests] [--session-cap] [CASE,...]: one run of the Node smoke
# suite against the installed product and a fresh supervisor on a real systemd.
# The application side is vm-tests/node/smoke-app.js (its checks are
# vm-tests/node/smoke-cases.js, shared with the Bun smoke), run inside the Node 26.4
# SEA (client/node/sea, script mode) as the MainPID of opencode-v2.service
# (User=byk) through the module under test (/artifacts/node-sea/client/index.js); this script adds
# the checks only root can make (vm-tests/node/smoke-host.sh: socket permissions, refusals of other users
# and of root, the supervisor's descriptors before and after, leftovers).
# vm-tests/node/run-smoke repeats it (ctest vm.node-smoke.bookworm: 10 runs).
# --unit-tests also runs the module's node:test suite on the rootfs's Node;
# --session-cap adds the case that starts kMaxSessions (128) real sessions
# (about a minute and a half; run-smoke does it in the first run only).
. /vm-tests/lib/check.sh
. /tests/common.sh
. /tests/smoke-host.sh
unit_tests=no
CASES=$SMOKE_CASES
while [ $# -gt 0 ]; do
  case "$1" in
    --unit-tests) unit_tests=yes ;;
    --session-cap) CASES=$CASES,sessioncap ;;
    *) CASES=$1 ;;
  esac
  shift
done
node_install
echo "smoke: $(systemctl --version | head -n1); SEA $(OPENCODE_PTY_APP_MODE=version $NODE_SEA_APP); rootfs node $(node --version); kernel $(uname -r)"

# --- permissions, source identity (vm-tests/node/smoke-host.sh) ------------------
smoke_permissions
smoke_source_identity

# --- the application side -----------------------------------------------------
sup=$(systemctl show -P MainPID opencode-pty-supervisor.service)
fds_before=$(ls /proc/$sup/fd | wc -l)
rm -f $WORK/smoke.jsonl
app_run 1500 "$NODE_SEA_APP" OPENCODE_PTY_APP_MODE=script OPENCODE_PTY_APP_SCRIPT=/tests/smoke-app.js \
  OPENCODE_PTY_MODULE=$CLIENT/index.js OPENCODE_SMOKE_OUT=$WORK/smoke.jsonl OPENCODE_SMOKE_WORK=$WORK \
  OPENCODE_SMOKE_REVISION=$SMOKE_REV OPENCODE_SMOKE_SOURCE=$SMOKE_SRC OPENCODE_SMOKE_CASES=$CASES
rc=$?
cp $WORK/smoke.jsonl /results/node-smoke.jsonl 2>/dev/null
journalctl -o cat --no-pager -u opencode-v2.service > /results/node-smoke-app.log
app_checks $WORK/smoke.jsonl smoke "$rc" node-smoke-app.log

# --- cleanup ------------------------------------------------------------------
smoke_cleanup "$sup" "$fds_before"

if [ "$unit_tests" = yes ]; then
  check "node $(node --version): the module's unit tests pass on the rootfs's Node" \
    runuser -u byk -- sh -c "cd /tmp && node --test $CLIENT/test/"
fi
checks_done
