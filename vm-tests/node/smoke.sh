#!/bin/sh
# vm-tests/node/smoke.sh [--unit-tests] [--session-cap] [CASE,...]: one run of the Node smoke
# suite against the installed product and a fresh supervisor on a real systemd.
# The application side is vm-tests/node/smoke-app.js, run inside the Node 26.4
# SEA (client/node/sea, script mode) as the MainPID of opencode-v2.service
# (User=byk) through the module under test (/artifacts/node-sea/client/index.js); this script adds
# the checks only root can make (socket permissions, refusals of other users
# and of root, the supervisor's descriptors before and after, leftovers).
# vm-tests/node/run-smoke repeats it (ctest vm.node-smoke.bookworm: 10 runs).
# --unit-tests also runs the module's node:test suite on the rootfs's Node;
# --session-cap adds the case that starts kMaxSessions (128) real sessions
# (about a minute and a half; run-smoke does it in the first run only).
. /vm-tests/lib/check.sh
. /tests/common.sh
unit_tests=no
CASES=session,utf8,prelistener,stop,notices,patterns,framing,helper,identity,inflight,handshakes,burst,exitonly,writerace,throwing
while [ $# -gt 0 ]; do
  case "$1" in
    --unit-tests) unit_tests=yes ;;
    --session-cap) CASES=$CASES,sessioncap ;;
    *) CASES=$1 ;;
  esac
  shift
done
V=/usr/local/libexec/opencode-pty-verify-readiness
S=/run/opencode-pty/supervisor.sock

node_install
echo "smoke: $(systemctl --version | head -n1); SEA $(OPENCODE_PTY_APP_MODE=version $NODE_SEA_APP); rootfs node $(node --version); kernel $(uname -r)"

# --- permissions ------------------------------------------------------------
check "permissions: the socket is byk's, mode 0600" sh -c "stat -c '%U:%G %a %F' $S; [ \"\$(stat -c '%U %a %F' $S)\" = 'byk 600 socket' ]"
check "permissions: /run/opencode-pty is root's, not writable by others" sh -c "stat -c '%U:%G %a' /run/opencode-pty; [ \"\$(stat -c '%U %a' /run/opencode-pty)\" = 'root 755' ]"
# connect_as USER: prints the first envelope (or the connect error) and exits 0.
cat > /tmp/connect.py <<'PY'
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(json.dumps({'connect_error': e.errno, 'strerror': e.strerror})); sys.exit(0)
s.settimeout(15)
buf = b''
while len(buf) < 8 or len(buf) < 8 + struct.unpack('>I', buf[4:8])[0]:
    b = s.recv(4096)
    if not b: break
    buf += b
print(buf[8:].decode() if len(buf) >= 8 and buf[1] == 0x82 else json.dumps({'raw': buf.hex()}))
PY
out=$(runuser -u other -- python3 /tmp/connect.py $S)
case "$out" in *'"connect_error": 13'*) pass "permissions: uid 1001 (other) cannot connect (EACCES)" "$out" ;;
  *) fail "permissions: uid 1001 (other) cannot connect (EACCES)" "$out" ;; esac
out=$(python3 /tmp/connect.py $S)
case "$out" in *'"code":"root_refused"'*) pass "permissions: root is refused \"root_refused\"" "$out" ;;
  *) fail "permissions: root is refused \"root_refused\"" "$out" ;; esac
out=$(runuser -u byk -- python3 /tmp/connect.py $S)
case "$out" in *'"code":"unauthenticated"'*) pass "permissions: byk outside opencode-v2.service is refused \"unauthenticated\"" "$out" ;;
  *) fail "permissions: byk outside opencode-v2.service is refused \"unauthenticated\"" "$out" ;; esac

# --- source identity ----------------------------------------------------------
line=$(grep -o 'revision=opencode-v2-pilot:git:[0-9a-f]\{40\};pty-source:sha256:[0-9a-f]\{64\}' $V | head -n1)
rev=$(printf '%s' "$line" | sed -n 's/.*git:\([0-9a-f]\{40\}\);.*/\1/p')
src=$(printf '%s' "$line" | sed -n 's/.*sha256:\([0-9a-f]\{64\}\)$/\1/p')
if [ -n "$rev" ] && [ -n "$src" ]; then pass "source identity: the installed verifier embeds a revision line" "$line"
else fail "source identity: the installed verifier embeds a revision line" "'$line'"; fi

# --- the application side -----------------------------------------------------
sup=$(systemctl show -P MainPID opencode-pty-supervisor.service)
fds_before=$(ls /proc/$sup/fd | wc -l)
rm -f $WORK/smoke.jsonl
app_run 1500 "$NODE_SEA_APP" OPENCODE_PTY_APP_MODE=script OPENCODE_PTY_APP_SCRIPT=/tests/smoke-app.js \
  OPENCODE_PTY_MODULE=$CLIENT/index.js OPENCODE_SMOKE_OUT=$WORK/smoke.jsonl OPENCODE_SMOKE_WORK=$WORK \
  OPENCODE_SMOKE_REVISION=$rev OPENCODE_SMOKE_SOURCE=$src OPENCODE_SMOKE_CASES=$CASES
rc=$?
cp $WORK/smoke.jsonl /results/node-smoke.jsonl 2>/dev/null
journalctl -o cat --no-pager -u opencode-v2.service > /results/node-smoke-app.log
app_checks $WORK/smoke.jsonl smoke "$rc" node-smoke-app.log

# --- cleanup ------------------------------------------------------------------
check "cleanup: no opencode-pty-*.service unit is left" no_session_units
check "cleanup: the supervisor is still the same running process" sh -c \
  "[ \"\$(systemctl show -P MainPID opencode-pty-supervisor.service)\" = $sup ] && systemctl is-active opencode-pty-supervisor.service"
fds_after=$(ls /proc/$sup/fd | wc -l)
if [ "$fds_after" -eq "$fds_before" ]; then pass "cleanup: the supervisor holds as many descriptors as before ($fds_before)"
else fail "cleanup: the supervisor holds as many descriptors as before" "before $fds_before, after $fds_after: $(ls -l /proc/$sup/fd | tail -n +2 | awk '{print $9,$10,$11}' | tr '\n' ';')"; fi
check "cleanup: no process of byk is left" sh -c '! pgrep -u byk -a'

if [ "$unit_tests" = yes ]; then
  check "node $(node --version): the module's unit tests pass on the rootfs's Node" \
    runuser -u byk -- sh -c "cd /tmp && node --test $CLIENT/test/"
fi
checks_done
