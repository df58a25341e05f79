#!/bin/sh
# vm-tests/node/detach.sh [--runtime=node|bun]: detachable sessions (issue #33,
# docs/PROTOCOL.md section 10) on a real systemd (ctest vm.detach.bookworm =
# 252, vm.detach.trixie = 257; --runtime=bun: vm.detach.bun.{bookworm,trixie},
# the pinned Bun as the MainPID). The application side is
# vm-tests/node/detach-app.js as the MainPID of opencode-v2.service (User=byk)
# inside the Node 26.4 SEA, through the installed supervisor, helper and
# launcher. This script restarts the service twice while its sessions run
# (`systemctl restart opencode-v2.service`, a new MainPID each time: the app's
# phases one, two and three) and adds what only root can check: another
# process of byk, outside the service, is refused; the ordinary session's unit
# is proven gone after the first restart, the unit of the session whose grace
# ended after the second, with the supervisor's journal line; no unit, no byk
# process and no extra supervisor descriptor is left.
. /vm-tests/lib/check.sh
. /tests/common.sh
RUNTIME=node
case "${1:-}" in --runtime=*) RUNTIME=${1#--runtime=}; shift ;; esac

node_install
runtime_install "$RUNTIME"
echo "detach: $(systemctl --version | head -n1); SEA $(OPENCODE_PTY_APP_MODE=version $NODE_SEA_APP); $RUNTIME; kernel $(uname -r)"

# state NAME FIELD: a session's field in the app's state file.
state() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sessions"][sys.argv[2]][sys.argv[3]])' \
    "$WORK/detach-state.json" "$1" "$2"
}
main_pid() { systemctl show -P MainPID "$APP_SERVICE"; }

# Socket activation: a first connection (root's, refused) starts the supervisor,
# so its descriptors can be counted before any session.
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/opencode-pty/supervisor.sock"); s.settimeout(10); s.recv(4096)'
sup=$(systemctl show -P MainPID opencode-pty-supervisor.service)
check "the supervisor runs (MainPID $sup)" test "$sup" -gt 0
fds_before=$(ls /proc/$sup/fd | wc -l)
rm -f $WORK/detach.jsonl $WORK/detach-state.json $WORK/detach-*.done $WORK/detach-*.go
journal_from=$(date '+%Y-%m-%d %H:%M:%S')

set -- OPENCODE_TEST_RUNTIME=$RUNTIME OPENCODE_PTY_MODULE=$CLIENT/index.js \
  OPENCODE_DETACH_OUT=$WORK/detach.jsonl OPENCODE_DETACH_WORK=$WORK
if [ "$RUNTIME" = bun ]; then
  app_start "$APP_RUNTIME /tests/detach-app.js" "$@"
else
  app_start "$NODE_SEA_APP" OPENCODE_PTY_APP_MODE=script OPENCODE_PTY_APP_SCRIPT=/tests/detach-app.js "$@"
fi
pid1=$(main_pid)

# ---- phase one: D1-D3 detachable and O ordinary, attached to MainPID 1 ------------------------------
if check "phase 1: the application set up its sessions (MainPID $pid1)" wait_for 120 test -e $WORK/detach-one.done; then
  o_unit=$(state O unit) d1=$(state D1 session)
  # Another process of byk, outside the service (runuser, the rootfs's Node
  # with the same module): refused for list and for attach.
  other=$(runuser -u byk -- node -e '
    const pty = require(process.argv[1]);
    const show = (p) => p.then(() => ({ ok: true }), (e) => ({ code: e && e.code }));
    Promise.all([show(pty.list()), show(pty.attach(process.argv[2], { cursor: 0 }))])
      .then((r) => { console.log(JSON.stringify(r)); process.exit(0); });
    setTimeout(() => { console.log("timeout"); process.exit(1); }, 30000).unref();' "$CLIENT/index.js" "$d1" 2>&1)
  if [ "$other" = '[{"code":"unauthenticated"},{"code":"unauthenticated"}]' ]; then
    pass "phase 1: a process of byk outside the service (runuser ... node) is refused list() and attach(): unauthenticated" "$other"
  else
    fail "phase 1: a process of byk outside the service (runuser ... node) is refused list() and attach(): unauthenticated" "$other"
  fi
  check "phase 1: the ordinary session's unit $o_unit runs" systemctl is-active "$o_unit"

  # ---- restart: phase two ------------------------------------------------------------------------
  check "restart 1: systemctl restart opencode-v2.service" systemctl restart "$APP_SERVICE"
  pid2=$(main_pid)
  if [ "$pid2" != "$pid1" ] && [ "$pid2" -gt 0 ] && [ ! -e "/proc/$pid1" ]; then
    pass "restart 1: a new MainPID, the old one gone" "$pid1 -> $pid2"
  else
    fail "restart 1: a new MainPID, the old one gone" "$pid1 -> $pid2"
  fi
  check "restart 1: the ordinary session's unit $o_unit is proven gone (GetUnit -> NoSuchUnit)" wait_for 60 gone "$o_unit"

  if check "phase 2: the application set up the next round (MainPID $pid2)" wait_for 180 test -e $WORK/detach-two.done; then
    g_unit=$(state G unit) g_id=$(state G session) e_unit=$(state E unit)
    check "restart 2: systemctl restart opencode-v2.service" systemctl restart "$APP_SERVICE"
    pid3=$(main_pid)
    if [ "$pid3" != "$pid2" ] && [ "$pid3" -gt 0 ]; then pass "restart 2: a new MainPID" "$pid2 -> $pid3"
    else fail "restart 2: a new MainPID" "$pid2 -> $pid3"; fi
  fi
fi
app_wait_end 240
rc=$?
cp $WORK/detach.jsonl /results/node-detach$RUNTIME_SFX.jsonl 2>/dev/null
cp $WORK/detach-state.json /results/node-detach-state$RUNTIME_SFX.json 2>/dev/null
journalctl -o cat --no-pager -u opencode-v2.service --since "$journal_from" > /results/node-detach-app$RUNTIME_SFX.log
journalctl -o json --no-pager -u opencode-pty-supervisor.service --since "$journal_from" > /results/supervisor-journal$RUNTIME_SFX.json
app_checks $WORK/detach.jsonl detach "$rc" node-detach-app$RUNTIME_SFX.log

# ---- what only root sees ----------------------------------------------------------------------------
if [ -n "${g_unit:-}" ]; then
  check "grace: the unit of G (grace 3 s, never attached again) $g_unit is proven gone" wait_for 60 gone "$g_unit"
  check "grace: the supervisor's journal says \"detached session not attached within its grace period\" for G" \
    python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
hit = [e for e in lines if "detached session not attached within its grace period" in str(e.get("MESSAGE"))]
mine = [e for e in hit if e.get("SESSION") == sys.argv[2] and e.get("UNIT") == sys.argv[3]]
print("%d such lines, %d of G: %s" % (len(hit), len(mine), [e.get("MESSAGE") for e in mine][:1]))
sys.exit(0 if mine else 1)' /results/supervisor-journal$RUNTIME_SFX.json "$g_id" "$g_unit"
  check "exit while detached: the unit of E $e_unit is proven gone" wait_for 60 gone "$e_unit"
else
  fail "grace: the unit of G is proven gone, with the supervisor's journal line" "phase 2 never set G up"
fi
check "cleanup: no opencode-pty-*.service unit is left" wait_for 60 no_session_units
check "cleanup: no process of byk is left" wait_for 30 sh -c '! pgrep -u byk -a'
fds_after=$(ls /proc/$sup/fd | wc -l)
if [ "$fds_after" -eq "$fds_before" ]; then pass "cleanup: the supervisor holds as many descriptors as before ($fds_before)"
else fail "cleanup: the supervisor holds as many descriptors as before" "before $fds_before, after $fds_after"; fi
checks_done
