#!/bin/sh
# vm-tests/node/bun-smoke.sh [RUNS]: the smoke suite under the pinned Bun, as the
# seed wrote it: `bun pty-plugin-smoke.ts` RUNS times (10) in a row in one
# boot, each against the freshly built helper and a disposable supervisor.
# Per run: the supervisor of the run before is stopped and must be gone with
# no session unit left; socket activation starts a fresh one (a new MainPID
# and InvocationID); the root-side checks (vm-tests/node/smoke-host.sh) and
# vm-tests/node/pty-plugin-smoke.ts as the MainPID of opencode-v2.service
# (User=byk) run the same checks as the Node SEA smoke (vm-tests/node/smoke.sh;
# the definitions are vm-tests/node/smoke-cases.js), through the module under
# test (/artifacts/node-sea/client/index.js). Every check's name starts with
# "run N/RUNS: ". The first run also runs the session-cap case, as run-smoke's.
# ctest vm.node-smoke.bun.bookworm (client/node/tests.cmake).
. /vm-tests/lib/check.sh
. /tests/common.sh
. /tests/smoke-host.sh
RUNS=${1:-10}
SUP_UNIT=opencode-pty-supervisor.service

node_install
bun_install
echo "bun smoke: $(systemctl --version | head -n1); bun $($BUN_APP --version); kernel $(uname -r); $RUNS runs"

# Stops the supervisor and succeeds when it is gone: unit inactive, no
# MainPID, its process ended, and no session unit left.
stop_supervisor() {
  old=$(systemctl show -P MainPID $SUP_UNIT)
  systemctl stop $SUP_UNIT || return 1
  st=$(systemctl show -P ActiveState $SUP_UNIT) pid=$(systemctl show -P MainPID $SUP_UNIT)
  echo "was MainPID $old; now $st, MainPID $pid"
  [ "$st" = inactive ] && [ "$pid" = 0 ] || return 1
  if [ "$old" != 0 ] && [ -e "/proc/$old" ]; then echo "process $old still exists"; return 1; fi
  no_session_units
}

seen_pids=" " seen_ids=" " passed_runs=0 i=1
while [ "$i" -le "$RUNS" ]; do
  CHECK_PREFIX="run $i/$RUNS: "
  t0=$(date +%s)
  echo "== bun smoke run $i/$RUNS"
  # --- a disposable supervisor ------------------------------------------------
  check "${CHECK_PREFIX}disposable supervisor: the one before is stopped and gone, no session unit left" stop_supervisor
  # The first connection of smoke_permissions activates the socket's service.
  smoke_permissions
  sup=$(systemctl show -P MainPID $SUP_UNIT) inv=$(systemctl show -P InvocationID $SUP_UNIT)
  case "$seen_pids" in *" $sup "*) new_pid=no ;; *) new_pid=yes ;; esac
  case "$seen_ids" in *" $inv "*) new_id=no ;; *) new_id=yes ;; esac
  if [ "$sup" != 0 ] && [ -n "$inv" ] && [ "$new_pid" = yes ] && [ "$new_id" = yes ] && systemctl -q is-active $SUP_UNIT; then
    pass "${CHECK_PREFIX}disposable supervisor: socket activation started a fresh one (new MainPID and InvocationID)" "MainPID $sup, InvocationID $inv; earlier:$seen_pids"
  else
    fail "${CHECK_PREFIX}disposable supervisor: socket activation started a fresh one (new MainPID and InvocationID)" "MainPID $sup ($new_pid), InvocationID $inv ($new_id), $(systemctl show -P ActiveState $SUP_UNIT); earlier:$seen_pids"
  fi
  seen_pids="$seen_pids$sup " seen_ids="$seen_ids$inv "
  smoke_source_identity
  # --- the application side: Bun as the MainPID -------------------------------
  cases=$SMOKE_CASES
  [ "$i" -eq 1 ] && cases=$cases,sessioncap
  fds_before=$(ls /proc/$sup/fd | wc -l)
  out=$WORK/bun-smoke-$i.jsonl
  rm -f "$out"
  journal_from=$(date '+%Y-%m-%d %H:%M:%S')
  app_run 1500 "$BUN_APP /tests/pty-plugin-smoke.ts" \
    OPENCODE_PTY_MODULE=$CLIENT/index.js OPENCODE_SMOKE_OUT=$out OPENCODE_SMOKE_WORK=$WORK \
    OPENCODE_SMOKE_REVISION=$SMOKE_REV OPENCODE_SMOKE_SOURCE=$SMOKE_SRC OPENCODE_SMOKE_CASES=$cases \
    OPENCODE_SMOKE_BUN_VERSION=$BUN_VERSION OPENCODE_SMOKE_BUN_PATH=$BUN_APP
  rc=$?
  cp "$out" "/results/bun-smoke-$i.jsonl" 2>/dev/null
  journalctl -o cat --no-pager -u opencode-v2.service --since "$journal_from" > "/results/bun-smoke-app-$i.log"
  app_checks "$out" "Bun smoke" "$rc" "bun-smoke-app-$i.log"
  # --- cleanup ----------------------------------------------------------------
  smoke_cleanup "$sup" "$fds_before"
  f=$(grep -c "^FAIL	run $i/$RUNS: " "$VMTESTS_CHECKS")
  [ "$f" -eq 0 ] && passed_runs=$((passed_runs + 1))
  echo "== bun smoke run $i/$RUNS: $(grep -c "^PASS	run $i/$RUNS: " "$VMTESTS_CHECKS") passed, $f failed, $(( $(date +%s) - t0 )) s"
  i=$((i + 1))
done
CHECK_PREFIX=
if [ "$passed_runs" -eq "$RUNS" ]; then pass "bun smoke: all $RUNS runs passed, each against a fresh supervisor" "MainPIDs:$seen_pids"
else fail "bun smoke: all $RUNS runs passed, each against a fresh supervisor" "$passed_runs of $RUNS"; fi
checks_done
