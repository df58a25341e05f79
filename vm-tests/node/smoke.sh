#!/bin/sh
# vm-tests/node/smoke.sh --runtime=node|bun [--unit-tests] [RUNS]: the smoke
# suite, RUNS times (10) in a row in one boot, each run against a fresh
# supervisor. The application side runs as the MainPID of opencode-v2.service
# (User=byk) through the module under test (/artifacts/node-sea/client/index.js):
#   node: vm-tests/node/smoke-app.js inside the Node 26.4 SEA (client/node/sea,
#         script mode);
#   bun:  vm-tests/node/pty-plugin-smoke.ts run by the pinned Bun (the seed's
#         `bun pty-plugin-smoke.ts`), which adds two checks about the runtime.
# Both run the checks of vm-tests/node/smoke-cases.js; this script adds the
# ones only root can make (vm-tests/node/smoke-host.sh: socket permissions,
# refusals of other users and of root, source identity, the supervisor's
# descriptors before and after, leftovers).
# Per run: the supervisor of the run before is stopped and must be gone with
# no session unit left; socket activation starts a fresh one (a new MainPID
# and InvocationID). Every check's name starts with "run N/RUNS: ". The first
# run also runs the session-cap case (kMaxSessions real sessions, about a
# minute and a half). --unit-tests then runs the module's node:test suite on
# the rootfs's Node, once.
# ctest vm.node-smoke.{bookworm,trixie} (node) and vm.node-smoke.bun.bookworm
# (bun), vm-tests/CMakeLists.txt.
. /vm-tests/lib/check.sh
. /tests/common.sh
. /tests/smoke-host.sh
runtime= unit_tests=no RUNS=10
for a in "$@"; do
  case "$a" in
    --runtime=*) runtime=${a#--runtime=} ;;
    --unit-tests) unit_tests=yes ;;
    *) RUNS=$a ;;
  esac
done
SUP_UNIT=opencode-pty-supervisor.service

node_install
case "$runtime" in
  node)
    NAME="node smoke" WHAT=smoke
    echo "node smoke: $(systemctl --version | head -n1); SEA $(OPENCODE_PTY_APP_MODE=version $NODE_SEA_APP); rootfs node $(node --version); kernel $(uname -r); $RUNS runs" ;;
  bun)
    bun_install
    NAME="bun smoke" WHAT="Bun smoke"
    echo "bun smoke: $(systemctl --version | head -n1); bun $($BUN_APP --version); kernel $(uname -r); $RUNS runs" ;;
  *) fail "runtime: --runtime=node|bun" "unknown runtime '$runtime'"; checks_done; exit 1 ;;
esac

# app_smoke OUT CASES: the application side of one run as opencode-v2.service;
# returns its exit status.
app_smoke() {
  set -- OPENCODE_PTY_MODULE=$CLIENT/index.js OPENCODE_SMOKE_OUT=$1 OPENCODE_SMOKE_WORK=$WORK \
    OPENCODE_SMOKE_REVISION=$SMOKE_REV OPENCODE_SMOKE_SOURCE=$SMOKE_SRC OPENCODE_SMOKE_CASES=$2
  if [ "$runtime" = node ]; then
    app_run 1500 "$NODE_SEA_APP" OPENCODE_PTY_APP_MODE=script OPENCODE_PTY_APP_SCRIPT=/tests/smoke-app.js "$@"
  else
    app_run 1500 "$BUN_APP /tests/pty-plugin-smoke.ts" "$@" \
      OPENCODE_SMOKE_BUN_VERSION=$BUN_VERSION OPENCODE_SMOKE_BUN_PATH=$BUN_APP
  fi
}

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
  echo "== $NAME run $i/$RUNS"
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
  # --- the application side ---------------------------------------------------
  cases=$SMOKE_CASES
  [ "$i" -eq 1 ] && cases=$cases,sessioncap
  fds_before=$(ls /proc/$sup/fd | wc -l)
  out=$WORK/$runtime-smoke-$i.jsonl
  rm -f "$out"
  journal_from=$(date '+%Y-%m-%d %H:%M:%S')
  app_smoke "$out" "$cases"
  rc=$?
  cp "$out" "/results/$runtime-smoke-$i.jsonl" 2>/dev/null
  journalctl -o cat --no-pager -u opencode-v2.service --since "$journal_from" > "/results/$runtime-smoke-app-$i.log"
  # The application's own per-case times (smoke-cases.js), for the log.
  grep '^case .*: [0-9]* ms$' "/results/$runtime-smoke-app-$i.log" | tr '\n' ';'; echo
  app_checks "$out" "$WHAT" "$rc" "$runtime-smoke-app-$i.log"
  # --- cleanup ----------------------------------------------------------------
  smoke_cleanup "$sup" "$fds_before"
  f=$(grep -c "^FAIL	run $i/$RUNS: " "$VMTESTS_CHECKS")
  [ "$f" -eq 0 ] && passed_runs=$((passed_runs + 1))
  echo "== $NAME run $i/$RUNS: $(grep -c "^PASS	run $i/$RUNS: " "$VMTESTS_CHECKS") passed, $f failed, $(( $(date +%s) - t0 )) s"
  i=$((i + 1))
done
CHECK_PREFIX=
if [ "$passed_runs" -eq "$RUNS" ]; then pass "$NAME: all $RUNS runs passed, each against a fresh supervisor" "MainPIDs:$seen_pids"
else fail "$NAME: all $RUNS runs passed, each against a fresh supervisor" "$passed_runs of $RUNS"; fi

if [ "$unit_tests" = yes ]; then
  check "node $(node --version): the module's unit tests pass on the rootfs's Node" \
    runuser -u byk -- sh -c "cd /tmp && node --test $CLIENT/test/"
fi
checks_done
