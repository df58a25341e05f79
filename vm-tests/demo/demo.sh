#!/bin/bash
# vm-tests/demo/demo.sh --scripted|--interactive: the guest side of tools/demo
# (the README's first command), run by vm-tests/run in a disposable bookworm
# container with systemd as PID 1. Next to it (in /tests) tools/demo staged
# client/ (the Node module). It installs the build from /artifacts with
# tools/install as an operator would, installs the application stand-in
# (relay-app.js: it owns the PTYs and relays them over a socket only byk can
# use, as the opencode server relays terminals to its web clients), starts
# opencode-v2.service, and opens a real PTY through the whole stack:
#   relay client (byk) -> opencode-v2.service (Node, MainPID) -> helper ->
#   supervisor -> opencode-pty-<id>.service -> launcher -> script -> bash
# --scripted: a short session; prints the transcript, the exit status and the
#   operator's view (systemctl, busctl, journal) to /results/demo.txt.
# --interactive: gets everything ready, then waits until tools/demo has
#   attached the host terminal to a relay client (nsenter) and says done.
set -u
. /vm-tests/lib/check.sh
. /vm-tests/demo/standin.sh
mode=${1:---scripted}
A=/artifacts
V=/usr/local/libexec/opencode-pty-verify-readiness
OUT=/results/demo.txt
RC=/vm-tests/demo/relay_client.py
T=$(mktemp -d /run/demo.XXXXXX)
install -d -o byk -g byk -m 0700 "$T/flags"
chmod 0711 "$T"
: > "$OUT"

say() { printf '%s\n' "$*" | tee -a "$OUT"; }
show() { # CMD...: prints "$ CMD" and its output
  say "\$ $*"
  "$@" 2>&1 | sed 's/^/  /' | tee -a "$OUT"
}
section() { say ""; say "== $*"; }
. /vm-tests/lib/units.sh

section "installing the build as an operator does: tools/install --from the build directory"
show "$A/tools/install" --from "$A"
[ -x /usr/local/libexec/opencode-pty-supervisor ] && pass "install" || { fail "install" "tools/install failed"; checks_done; exit 1; }
standin_install /tests/client || { fail "stand-in installed" ""; checks_done; exit 1; }
say "installed the application stand-in: /usr/local/bin/opencode-v2 runs node $STANDIN_DIR/relay-app.js"
show systemctl start opencode-pty-supervisor.socket

section "starting the application: opencode-v2.service (User=byk)"
say "opencode-v2.service is gated (ExecCondition=$V). Here it refuses:"
say "  $($V 2>&1)"
say "No review marker was written, and this container's kernel has no Yama, which the gate requires even"
say "with a marker (the acceptance suite proves the gate on a VM). For the demo only, a runtime drop-in in"
say "/run resets ExecCondition; the unit file in /etc stays as installed."
standin_no_yama_dropin
show systemctl start opencode-v2.service
n=0
while [ ! -S "$STANDIN_RELAY" ] && [ "$n" -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
show systemctl --no-pager status opencode-v2.service -n 2
if [ -S "$STANDIN_RELAY" ]; then pass "application relay is up" "$STANDIN_RELAY"
else fail "application relay is up" "no $STANDIN_RELAY"; checks_done; exit 1; fi

if [ "$mode" = --interactive ]; then
  # tools/demo finds this process through the anchor (a file it holds open in
  # /results) and attaches the terminal with nsenter.
  : > /results/demo.anchor
  exec 9< /results/demo.anchor
  touch /results/demo-ready
  while [ ! -e /results/demo-done ]; do sleep 0.2; done
  exec 9<&-
  u=$(journalctl -o cat --no-pager -u opencode-v2.service | sed -n 's/.*PTY started, unit \(opencode-pty-[0-9a-f]*\.service\).*/\1/p' | tail -n1)
  if [ -n "$u" ]; then
    s=${u#opencode-pty-}; s=${s%.service}
    section "what the supervisor logged for $u"
    show journalctl --no-pager -o short-precise _SYSTEMD_UNIT=opencode-pty-supervisor.service SESSION="$s"
    pass "an interactive session ran" "$u"
  else
    fail "an interactive session ran" "no session was started"
  fi
  section "after the session"
  show systemctl list-units --no-pager 'opencode-pty-*'
  systemctl stop opencode-v2.service
  checks_done
  exit
fi

section "a real PTY through the whole stack: a scripted session"
say "relay client (uid byk) -> opencode-v2.service (Node) -> opencode-pty-client -> opencode-pty-supervisor"
say "  -> opencode-pty-<id>.service -> opencode-pty-launcher -> script -> /bin/bash on /dev/pts/N"
runuser -u byk -- python3 "$RC" --transcript "$T/flags/transcript.bin" --steps '{"argv":["/bin/bash","--norc","--noprofile","-i"],"cols":100,"rows":30,"timeout":60,
  "steps":[{"event":"started"},{"expect":"\\$ $"},
           {"input":"echo hello from $(tty) as $(id -un) in $PWD\n"},{"expect":"hello from /dev/pts/[0-9]+ as byk in /home/byk"},
           {"touch":"'"$T"'/flags/live"},{"wait_file":"'"$T"'/flags/continue","timeout":120},
           {"input":"stty size; exit 3\n"}]}' > "$T/session.json" 2> "$T/session.err" &
cpid=$!
n=0
while [ ! -e "$T/flags/live" ] && [ "$n" -lt 600 ] && kill -0 $cpid 2>/dev/null; do sleep 0.1; n=$((n + 1)); done
u=$(session_units | head -n1)
if [ -n "$u" ]; then
  section "what an operator sees while the session is open"
  show systemctl list-units --no-pager 'opencode-pty-*'
  path=$(busctl --system call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager GetUnit s "$u" | awk '{print $2}' | tr -d '"')
  say "\$ busctl introspect org.freedesktop.systemd1 $path   (a few of its properties)"
  busctl --system introspect org.freedesktop.systemd1 "$path" 2>&1 |
    grep -E '^(NAME|org\.freedesktop\.systemd1\.(Unit|Service) )|^\.(ActiveState|SubState|InvocationID|Slice|User|ExecStart|MainPID|NoNewPrivileges|TasksMax|KillMode|StandardInput|StandardOutput|StandardError) ' |
    sed 's/^/  /' | tee -a "$OUT"
  show busctl --system get-property org.freedesktop.systemd1 "$path" org.freedesktop.systemd1.Unit ActiveState SubState
  show busctl --system get-property org.freedesktop.systemd1 "$path" org.freedesktop.systemd1.Service MainPID User Slice TasksMax NoNewPrivileges
  show systemd-cgls --no-pager -u "$u"
  pass "operator view of a live session" "$u"
else
  fail "operator view of a live session" "no session unit appeared; $(cat "$T/session.err")"
fi
touch "$T/flags/continue"
wait $cpid; crc=$?

section "the session's transcript (what the PTY printed)"
# Terminal control sequences (bash's bracketed-paste switches) are left out.
tr -d '\r' < "$T/flags/transcript.bin" | sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/^/  | /' | tee -a "$OUT"
status=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1])).get("terminal") or {}; print("exit code %s, signal %s, result %s%s" % (t.get("exitCode"), t.get("signal"), t.get("result"), (", error " + json.dumps(t.get("error"))) if t.get("error") else ""))' "$T/session.json" 2>&1)
say ""
say "exit status: $status"
s=$(python3 -c 'import json,sys; print((json.load(open(sys.argv[1])).get("started") or {}).get("session",""))' "$T/session.json" 2>/dev/null)
if [ "$crc" = 0 ] && grep -q 'hello from /dev/pts/[0-9]* as byk in /home/byk' "$T/flags/transcript.bin" && [ "$status" = "exit code 3, signal None, result exit-code" ]; then
  pass "scripted session: output, input, exit status 3" "$status"
else
  fail "scripted session: output, input, exit status 3" "client exit $crc; $status; $(cat "$T/session.err")"
fi

section "the supervisor's journal for this session (structured fields: SESSION=, UNIT=, PEER_PID=, INVOCATION_ID=)"
sleep 0.5
show journalctl --no-pager -o short-precise _SYSTEMD_UNIT=opencode-pty-supervisor.service SESSION="$s"
say "\$ journalctl -o json ... SESSION=$s   (the fields of its \"PTY unit running\" entry)"
journalctl --no-pager -o json _SYSTEMD_UNIT=opencode-pty-supervisor.service SESSION="$s" 2>&1 | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e.get("MESSAGE") == "PTY unit running":
        for k in ("MESSAGE", "SESSION", "UNIT", "PEER_PID", "PEER_UID", "INVOCATION_ID", "PRIORITY"):
            if k in e:
                print("  %s=%s" % (k, e[k]))
        break' | tee -a "$OUT"

section "after the session: the unit is gone"
show systemctl list-units --no-pager 'opencode-pty-*'
if [ -z "$(session_units)" ]; then
  say "no opencode-pty-<32 hex>.service unit is left (the supervisor proved it gone by query)"
  pass "no session unit left"
else
  say "LEFT BEHIND: $(session_units)"
  fail "no session unit left" "$(session_units)"
fi
systemctl stop opencode-v2.service
standin_remove_dropin
checks_done
