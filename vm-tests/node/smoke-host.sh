# vm-tests/node/smoke-host.sh: the smoke suite's checks that only root can make
# (sourced after check.sh and common.sh), for both runtimes of its driver
# vm-tests/node/smoke.sh (--runtime=node: the Node 26.4 SEA; --runtime=bun).
# Each check's name starts with $CHECK_PREFIX ("run N/RUNS: ").
# The cases of vm-tests/node/smoke-cases.js every run runs; sessioncap
# (kMaxSessions real sessions, about a minute and a half) is added to the
# first run only.
SMOKE_CASES=session,utf8,prelistener,stop,notices,patterns,framing,helper,identity,inflight,handshakes,burst,exitonly,writerace,throwing
SMOKE_SOCKET=/run/opencode-pty/supervisor.sock
SMOKE_VERIFIER=/usr/local/libexec/opencode-pty-verify-readiness

# Socket permissions and the refusals of other users, of root and of byk
# outside opencode-v2.service. A connection here socket-activates the
# supervisor if it is not running.
smoke_permissions() {
  P=${CHECK_PREFIX:-} S=$SMOKE_SOCKET
  check "${P}permissions: the socket is byk's, mode 0600" sh -c "stat -c '%U:%G %a %F' $S; [ \"\$(stat -c '%U %a %F' $S)\" = 'byk 600 socket' ]"
  check "${P}permissions: /run/opencode-pty is root's, not writable by others" sh -c "stat -c '%U:%G %a' /run/opencode-pty; [ \"\$(stat -c '%U %a' /run/opencode-pty)\" = 'root 755' ]"
  # connect.py PATH: prints the first envelope (or the connect error) and exits 0.
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
  case "$out" in *'"connect_error": 13'*) pass "${P}permissions: uid 1001 (other) cannot connect (EACCES)" "$out" ;;
    *) fail "${P}permissions: uid 1001 (other) cannot connect (EACCES)" "$out" ;; esac
  out=$(python3 /tmp/connect.py $S)
  case "$out" in *'"code":"root_refused"'*) pass "${P}permissions: root is refused \"root_refused\"" "$out" ;;
    *) fail "${P}permissions: root is refused \"root_refused\"" "$out" ;; esac
  out=$(runuser -u byk -- python3 /tmp/connect.py $S)
  case "$out" in *'"code":"unauthenticated"'*) pass "${P}permissions: byk outside opencode-v2.service is refused \"unauthenticated\"" "$out" ;;
    *) fail "${P}permissions: byk outside opencode-v2.service is refused \"unauthenticated\"" "$out" ;; esac
}

# Sets SMOKE_REV and SMOKE_SRC to the identity the installed readiness
# verifier embeds (the application compares the started envelope's with them).
smoke_source_identity() {
  line=$(grep -o 'revision=opencode-v2-pilot:git:[0-9a-f]\{40\};pty-source:sha256:[0-9a-f]\{64\}' $SMOKE_VERIFIER | head -n1)
  SMOKE_REV=$(printf '%s' "$line" | sed -n 's/.*git:\([0-9a-f]\{40\}\);.*/\1/p')
  SMOKE_SRC=$(printf '%s' "$line" | sed -n 's/.*sha256:\([0-9a-f]\{64\}\)$/\1/p')
  if [ -n "$SMOKE_REV" ] && [ -n "$SMOKE_SRC" ]; then pass "${CHECK_PREFIX:-}source identity: the installed verifier embeds a revision line" "$line"
  else fail "${CHECK_PREFIX:-}source identity: the installed verifier embeds a revision line" "'$line'"; fi
}

# smoke_cleanup SUP FDS_BEFORE: after the application ran, nothing is left and
# the supervisor SUP (its MainPID before) still runs with FDS_BEFORE descriptors.
smoke_cleanup() {
  P=${CHECK_PREFIX:-} sup=$1 fds_before=$2
  check "${P}cleanup: no opencode-pty-*.service unit is left" no_session_units
  check "${P}cleanup: the supervisor is still the same running process" sh -c \
    "[ \"\$(systemctl show -P MainPID opencode-pty-supervisor.service)\" = $sup ] && systemctl is-active opencode-pty-supervisor.service"
  fds_after=$(ls /proc/$sup/fd | wc -l)
  if [ "$fds_after" -eq "$fds_before" ]; then pass "${P}cleanup: the supervisor holds as many descriptors as before ($fds_before)"
  else fail "${P}cleanup: the supervisor holds as many descriptors as before" "before $fds_before, after $fds_after: $(ls -l /proc/$sup/fd | tail -n +2 | awk '{print $9,$10,$11}' | tr '\n' ';')"; fi
  check "${P}cleanup: no process of byk is left" sh -c '! pgrep -u byk -a'
}
