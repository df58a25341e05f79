#!/bin/sh
# vm-tests/supervisor/supervisor.sh: the supervisor against a real systemd
# (bookworm = 252, trixie = 257). Installs the three built binaries root-owned
# in /usr/local/libexec, the supervisor's socket/service/slice units, and a test
# opencode-v2.service whose MainPID is the stand-in application (supervisor_app.py,
# User=byk); then proves sessions end to end through the real client helper,
# launcher and script, the refusals, the cleanup proofs, start-up recovery
# after SIGKILL, daemon-reload, forged signals and the property read-back.
. /vm-tests/lib/check.sh
. /vm-tests/lib/supervisor-setup.sh
here=$(dirname "$0")
A=/artifacts
LIBEXEC=/usr/local/libexec
RUN=/run/opencode-test
tmp=$(mktemp -d)

# ctl NAME JSON: one scenario in the stand-in app (as MainPID); result in
# $tmp/NAME.json and /results/NAME.json.
ctl() {
  python3 "$here/supervisor_app.py" call "$2" > "$tmp/$1.json" 2>&1
  cp "$tmp/$1.json" "/results/$1.json"
}
# as USER NAME JSON: one scenario in a process of USER outside the app's unit.
as() {
  if [ "$1" = root ]; then
    python3 "$here/supervisor_app.py" oneshot "$3" > "$tmp/$2.json" 2> "/results/$2.stderr"
  else
    runuser -u "$1" -- python3 "$here/supervisor_app.py" oneshot "$3" > "$tmp/$2.json" 2> "/results/$2.stderr"
  fi
  cp "$tmp/$2.json" "/results/$2.json"
}
# expect CHECK NAME PYTHON-EXPR: r is the scenario's result.
expect() {
  check "$1" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
t = r.get("terminal") or {}
ok = eval(sys.argv[2])
print(sys.argv[2], "->", bool(ok), "|", "events", r.get("events"), "terminal", t,
      "output", repr(r.get("output_text", ""))[:160])
sys.exit(0 if ok else 1)' "$tmp/$2.json" "$3"
}
# Session units only: opencode-pty-supervisor.service matches the glob too.
. /vm-tests/lib/units.sh
unit_of() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(next(e["unit"] for e in r["envelopes"] if e["type"]=="started"))' "$tmp/$1.json"; }
# journal_cursor: where the journal ends now.
journal_cursor() { journalctl -n 0 --show-cursor -o cat | sed -n 's/^-- cursor: //p'; }
# sup_journal CURSOR [UNIT]: the supervisor's messages after CURSOR (of UNIT=).
# Filtered here: journalctl --after-cursor combined with field matches drops
# the first matching entry (systemd 252).
sup_journal() {
  journalctl --no-pager --after-cursor "$1" -o json | python3 -c '
import json, sys
unit = sys.argv[1] if len(sys.argv) > 1 else None
for line in sys.stdin:
    e = json.loads(line)
    if e.get("_SYSTEMD_UNIT") == "opencode-pty-supervisor.service" and (unit is None or e.get("UNIT") == unit):
        print(e.get("MESSAGE"))' ${2:+"$2"}
}
# sup_journal_has CURSOR REGEX [UNIT]
sup_journal_has() { sup_journal "$1" ${3:+"$3"} | grep -q -- "$2"; }
supervisor_pid() { systemctl show -P MainPID opencode-pty-supervisor.service; }

# --- install (shared with faults/faults.sh) -----------------------------------
supervisor_setup "supervisor suite" "/usr/bin/python3 $here/supervisor_app.py serve"

# --- a full session ----------------------------------------------------------
ctl full '{"argv":["sh","-c","pwd; tty; echo hello-$((6*7)) marker-ARGV-7f3a >/dev/null; echo hello-$((6*7)); read x; echo got:$x; exit 7"],
  "cwd":"/home/byk","steps":[{"expect":"started"},{"expect":"hello-42"},{"input":"abc\n"},{"expect":"got:abc"}]}'
expect "full: helper exit 0" full 'r["helper_status"] == 0'
expect "full: started envelope (session, unit, invocation, revision, source)" full '(lambda s: len(s["session"]) == 32 and s["unit"] == "opencode-pty-%s.service" % s["session"] and len(s["invocation"]) == 32 and len(s["revision"]) == 40 and len(s["source"]) == 64)(r["envelopes"][0])'
expect "full: started comes before any output" full 'r["events"][0] == "started:"'
if [ -f "$A/generated/source_identity.h" ]; then
  rev=$(sed -n 's/^#define OPENCODE_REVISION "\([0-9a-f]*\)"$/\1/p' "$A/generated/source_identity.h")
  src=$(sed -n 's/^#define OPENCODE_SOURCE_SHA256 "\([0-9a-f]*\)"$/\1/p' "$A/generated/source_identity.h")
  expect "full: started names the build's revision and source hash" full "r['envelopes'][0]['revision'] == '$rev' and r['envelopes'][0]['source'] == '$src'"
else
  fail "full: started names the build's revision and source hash" "no generated/source_identity.h in the artifacts"
fi
expect "full: command runs in the passed directory on a real tty" full '"/home/byk" in r["output_text"] and "/dev/pts/" in r["output_text"]'
expect "full: input reaches the command" full '"got:abc" in r["output_text"]'
expect "full: exit code 7, signal null, result exit-code" full 't.get("type") == "exit" and t["code"] == 7 and t["signal"] is None and t["result"] == "exit-code"'
expect "full: connection closed after the exit envelope" full 'r.get("eof_after_terminal") is True'
if ! unit_of full >/dev/null 2>&1; then
  # Nothing else can pass without a first session: keep the evidence, stop.
  journalctl --no-pager -o short-precise -u opencode-pty-supervisor.service -u opencode-v2.service \
    > /results/supervisor-journal.txt 2>&1
  fail "a first session started (the rest of the suite is skipped)" "see supervisor-journal.txt"
  checks_done
  exit 1
fi
u=$(unit_of full)
check "full: unit $u proven gone (GetUnit -> NoSuchUnit)" gone "$u"
s=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["envelopes"][0]["session"])' "$tmp/full.json")
check "journal: structured entries for the session (SESSION, UNIT, PEER_PID, PEER_UID, INVOCATION_ID)" sh -c '
  journalctl -o verbose --no-pager _SYSTEMD_UNIT=opencode-pty-supervisor.service SESSION=$1 > /tmp/j.txt
  grep -c "MESSAGE=" /tmp/j.txt; for f in UNIT= PEER_PID= PEER_UID=1000 INVOCATION_ID=; do grep -q "^ *$f" /tmp/j.txt || { echo "missing $f"; exit 1; }; done' - "$s"
# systemd 257 answers GetUnitByPIDFD (a second witness); 252 does not have it.
if [ "$(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p')" -ge 253 ]; then
  witness="connection authenticated (MainPID, live pidfd, GetUnitByPIDFD)"
else
  witness="connection authenticated (MainPID, live pidfd; this systemd has no GetUnitByPIDFD)"
fi
check "journal: $witness" sh -c 'journalctl --no-pager -o cat _SYSTEMD_UNIT=opencode-pty-supervisor.service SESSION=$1 | grep -qxF "$2"' - "$s" "$witness"
check "journal: no argv contents and no PTY bytes from the supervisor" sh -c '
  journalctl -o verbose --no-pager _SYSTEMD_UNIT=opencode-pty-supervisor.service > /tmp/all.txt
  ! grep -n -e marker-ARGV-7f3a -e got:abc -e hello-42 /tmp/all.txt'

# --- property read-back of a live unit (busctl/systemctl) --------------------
rm -f "$RUN/readback-ready" "$RUN/readback-done"
ctl readback '{"argv":["sleep","30"],"steps":[{"expect":"started"},{"touch":"/run/opencode-test/readback-ready"},
  {"wait_file":"/run/opencode-test/readback-done"},{"stop":true}]}' &
ctlpid=$!
wait_for 20 test -e "$RUN/readback-ready"
u=$(session_units | head -n1)
# CPUWeight= is read back by the supervisor at start (kUnitStartCpuWeight, or
# the session is refused) and lowered once the launcher reports the exec, by a
# runtime SetUnitProperties: systemd keeps that as the unit's one drop-in.
check "live unit: CPUWeight is the default weight once the command runs" wait_for 20 sh -c '
  w=$(systemctl show -P CPUWeight "$1"); echo "CPUWeight=$w"; [ "$w" = 100 ]' - "$u"
props="Type Slice User Environment NoNewPrivileges KillMode SendSIGKILL SendSIGHUP TimeoutStopUSec CollectMode TasksMax LimitCORE LimitCORESoft IgnoreSIGPIPE RemainAfterExit LockPersonality RestrictRealtime RestrictSUIDSGID Transient LoadState ActiveState SubState DropInPaths FragmentPath StandardInput StandardOutput StandardError"
systemctl show "$u" $(for p in $props; do printf -- '-p %s ' "$p"; done) > "$tmp/show.txt"
cp "$tmp/show.txt" /results/readback-show.txt
cat > "$tmp/want.txt" <<WANT
ActiveState=active
CollectMode=inactive
DropInPaths=/run/systemd/transient/$u.d/50-CPUWeight.conf
FragmentPath=/run/systemd/transient/$u
Environment=COLUMNS=80 LINES=24
IgnoreSIGPIPE=no
KillMode=control-group
LimitCORE=0
LimitCORESoft=0
LoadState=loaded
LockPersonality=yes
NoNewPrivileges=yes
RemainAfterExit=no
RestrictRealtime=yes
RestrictSUIDSGID=yes
SendSIGHUP=yes
SendSIGKILL=yes
Slice=opencode-pty.slice
StandardError=inherit
StandardInput=null
StandardOutput=journal
SubState=running
TasksMax=512
TimeoutStopUSec=5s
Transient=yes
Type=exec
User=1000
WANT
check "read-back: every requested property of the live unit as requested" sh -c 'sort "$1" > "$1.s"; sort "$2" > "$2.s"; diff -u "$2.s" "$1.s"' - "$tmp/show.txt" "$tmp/want.txt"
path=/org/freedesktop/systemd1/unit/$(echo "$u" | sed -e 's/-/_2d/g' -e 's/\./_2e/g')
busctl --system get-property org.freedesktop.systemd1 "$path" org.freedesktop.systemd1.Service ExecStart > "$tmp/exec.txt" 2>&1
cp "$tmp/exec.txt" /results/readback-execstart.txt
check "read-back: ExecStart is the launcher with the encoded argv" python3 -c '
import base64, sys
want = ["/usr/local/libexec/opencode-pty-launcher"] + ["a" + base64.urlsafe_b64encode(a).rstrip(b"=").decode() for a in (b"sleep", b"30")]
got = open(sys.argv[1]).read()
exp = "a(sasbttttuii) 1 \"/usr/local/libexec/opencode-pty-launcher\" %d %s false" % (len(want), " ".join("\"%s\"" % w for w in want))
print(got[:300]); sys.exit(0 if got.startswith(exp) else 1)' "$tmp/exec.txt"
check "read-back: nothing references the unit (Refs empty: it cannot outlive its end)" sh -c '
  refs=$(busctl --system get-property org.freedesktop.systemd1 "$1" org.freedesktop.systemd1.Unit Refs); echo "$refs"
  [ "$refs" = "as 0" ]' - "$path"
check "live unit: MainPID's stdin/stdout are the PTY stream socket" sh -c '
  mp=$(systemctl show -P MainPID "$1"); ls -l /proc/$mp/fd/0 /proc/$mp/fd/1
  readlink /proc/$mp/fd/0 | grep -q "^socket:" && readlink /proc/$mp/fd/1 | grep -q "^socket:"' - "$u"
check "live unit: the command runs as byk on /dev/pts in the passed directory" sh -c '
  cg=$(systemctl show -P ControlGroup "$1"); pid=$(pgrep -u byk -x sleep | head -n1); echo "sleep pid $pid cgroup $cg"
  grep -q "$cg" /proc/$pid/cgroup && readlink /proc/$pid/fd/0 | grep -q "^/dev/pts/" && [ "$(readlink /proc/$pid/cwd)" = /home/byk ]' - "$u"
check "supervisor holds no capability (CapEff = CapBnd = CapPrm = 0)" sh -c '
  grep ^Cap /proc/$(systemctl show -P MainPID opencode-pty-supervisor.service)/status
  grep -E "^Cap(Eff|Bnd|Prm|Inh|Amb):" /proc/$(systemctl show -P MainPID opencode-pty-supervisor.service)/status | grep -qv "0000000000000000$" && exit 1; exit 0'
check "STATUS= reports the live counts" sh -c 'st=$(systemctl show -P StatusText opencode-pty-supervisor.service); echo "$st"; [ "$st" = "1 sessions, 0 handshakes" ]'
touch "$RUN/readback-done"
wait $ctlpid
expect "read-back session: STOP gives notice stopping, then exit" readback '"notice:stopping" in r["events"] and t.get("type") == "exit"'
check "read-back session: unit proven gone" gone "$u"
check "read-back session: systemd removed its transient file and the CPUWeight drop-in with it" sh -c '
  ls -ld "/run/systemd/transient/$1" "/run/systemd/transient/$1.d" 2>&1; ! test -e "/run/systemd/transient/$1" && ! test -e "/run/systemd/transient/$1.d"' - "$u"

# --- a command's autogroup ---------------------------------------------------
# Where the kernel groups tasks by session (the containers: cgroup v1, every
# task in the root cpu group) the monitor gives the command's session group
# the nice kSessionAutogroupNice once the command runs (launcher/main.cc
# AutogroupNice); script's group (the unit's own session) and the
# supervisor's keep nice 0. Elsewhere the value is kept and the cgroup
# weights above act instead. The write waits its turn for the kernel's 100 ms
# slots on the whole machine (the other container's suites start sessions
# meanwhile): 400 s is above the monitor's whole retry schedule, a hang guard.
if [ -e /proc/self/autogroup ]; then
  rm -f "$RUN/autogroup-ready" "$RUN/autogroup-done"
  ctl autogroup '{"argv":["sleep","900"],"timeout":700,"steps":[{"expect":"started"},{"touch":"/run/opencode-test/autogroup-ready"},
    {"wait_file":"/run/opencode-test/autogroup-done","timeout":600},{"stop":true}]}' &
  ctlpid=$!
  wait_for 60 test -e "$RUN/autogroup-ready"
  u=$(session_units | head -n1)
  check "live unit: the command's autogroup has nice 10 once it runs; script's and the supervisor's 0" wait_for 400 sh -c '
    mp=$(systemctl show -P MainPID "$1"); pid=$(pgrep -u byk -x sleep | head -n1)
    sup=$(systemctl show -P MainPID opencode-pty-supervisor.service)
    a=$(cat /proc/$mp/autogroup); b=$(cat /proc/$pid/autogroup); c=$(cat /proc/$sup/autogroup)
    echo "script: $a; sleep: $b; supervisor: $c"
    [ "${a% nice *}" != "${b% nice *}" ] && [ "${a##* nice }" = 0 ] && [ "${b##* nice }" = 10 ] && [ "${c##* nice }" = 0 ]' - "$u"
  touch "$RUN/autogroup-done"
  wait $ctlpid
  check "autogroup session: unit proven gone" gone "$u"
fi

# --- a planted drop-in: the read-back gates (issue #21 point 4) -----------------------------------
# A drop-in for every PTY unit (opencode-pty-.service.d/) adds ExecStartPre= and
# Environment=, which the property table does not request: DropInPaths must
# read back empty, so the session is refused before the launcher gets its go,
# and the command (touch MARKER) never runs.
DROPIN=/etc/systemd/system/opencode-pty-.service.d
mkdir -p "$DROPIN"
printf '[Service]\nExecStartPre=/bin/true\nEnvironment=OPENCODE_TEST_PLANTED=1\n' > "$DROPIN/x.conf"
systemctl daemon-reload
rm -f /tmp/dropin-cmd-marker
cursor=$(journal_cursor)
ctl dropin '{"argv":["touch","/tmp/dropin-cmd-marker"],"timeout":30}'
expect "drop-in: the session is refused with unit_property_mismatch, no started envelope" dropin 't.get("type") == "error" and t["code"] == "unit_property_mismatch" and not any(e["type"] == "started" for e in r["envelopes"])'
check "drop-in: the supervisor's journal names the drop-in" wait_for 10 sup_journal_has "$cursor" "DropInPaths is \[$DROPIN/x.conf\]"
check "drop-in: its unit is proven gone" wait_for 20 no_session_units
check "drop-in: the command never ran (no marker)" sh -c 'ls -l /tmp/dropin-cmd-marker 2>&1; ! test -e /tmp/dropin-cmd-marker'
rm -rf "$DROPIN"
systemctl daemon-reload
ctl afterdropin '{"argv":["sh","-c","echo after-dropin; exit 3"],"timeout":30}'
expect "drop-in removed: a new session runs and exits 3" afterdropin '"after-dropin" in r["output_text"] and t.get("type") == "exit" and t["code"] == 3'
check "drop-in removed: its unit proven gone" wait_for 10 no_session_units

# --- signals, stop, EOF, disconnect --------------------------------------------
ctl kill '{"argv":["sleep","100"],"steps":[{"expect":"started"},{"signal":9}]}'
expect "KILL: notice signal_sent, exit with signal KILL and code null" kill '"notice:signal_sent" in r["events"] and t.get("type") == "exit" and t["signal"] == "KILL" and t["code"] is None'
check "KILL: unit proven gone" gone "$(unit_of kill)"
# A signal reaches the command's process only (issue #20): TERM kills sleep and
# the exit says so exactly; script never ends the session on its own.
ctl term '{"argv":["sleep","100"],"steps":[{"expect":"started"},{"signal":15}]}'
expect "TERM: notice signal_sent, exit with signal TERM, code null, exact" term '"notice:signal_sent" in r["events"] and t.get("type") == "exit" and t["signal"] == "TERM" and t["code"] is None and t.get("exact") is True and "Session terminated" not in r["output_text"]'
# INT to a command that traps it: the trap runs and its own exit status is reported.
ctl int '{"argv":["sh","-c","trap \"echo caught-int; exit 9\" INT; echo armed; while :; do sleep 0.1; done"],"steps":[{"expect":"started"},{"expect":"armed"},{"signal":2}]}'
expect "INT: the command's trap ran and its exit 9 is reported exactly" int '"notice:signal_sent" in r["events"] and "caught-int" in r["output_text"] and t.get("type") == "exit" and t["code"] == 9 and t.get("exact") is True'
ctl stop '{"argv":["sleep","100"],"steps":[{"expect":"started"},{"stop":true}]}'
expect "STOP: notice stopping then exit" stop '"notice:stopping" in r["events"] and t.get("type") == "exit"'
check "STOP: unit proven gone" gone "$(unit_of stop)"
ctl stopsat '{"argv":["yes"],"timeout":60,"steps":[{"expect":"started"},{"sleep":2},{"stop":true}]}'
expect "STOP while output is saturated and the client did not read: exit arrives, after the output" stopsat 't.get("type") == "exit" and t["_output_before"] == r["output_len"] and r["output_len"] > 0'
ctl eof '{"argv":["cat"],"steps":[{"expect":"started"},{"input":"line-one\n"},{"expect":"line-one\r\nline-one"},{"eof":true}]}'
expect "EOF: notice input_closed, cat sees end of input and exits 0" eof '"notice:input_closed" in r["events"] and t.get("type") == "exit" and t["code"] == 0'
ctl disconnect '{"argv":["sleep","100"],"steps":[{"expect":"started"},{"close":true}]}'
u=$(unit_of disconnect)
check "disconnect: the unit is stopped and proven gone" wait_for 10 gone "$u"
check "disconnect: journal says proven gone" sh -c 'journalctl --no-pager -o verbose _SYSTEMD_UNIT=opencode-pty-supervisor.service UNIT=$1 | grep -q "PTY unit proven gone"' - "$u"

# --- 10 MiB right before exit ------------------------------------------------------
ctl big '{"argv":["sh","-c","head -c 10485760 /dev/zero | tr \"\\\\0\" x; exit 3"],"count_char":"x","timeout":120,"keep_output":256,
  "steps":[{"expect":"started"},{"sleep":1}]}'
expect "10 MiB: every byte arrives before the exit envelope" big 'r.get("count") == 10485760 and t.get("type") == "exit" and t["code"] == 3 and t["_output_before"] == r["output_len"]'

# --- protocol errors -------------------------------------------------------------------
ctl badutf8 '{"argv":["cat"],"steps":[{"expect":"started"},{"input_bytes":"c328"}]}'
expect "INPUT that is not UTF-8: error bad_utf8" badutf8 't.get("type") == "error" and t["code"] == "bad_utf8"'
check "bad_utf8: unit proven gone" wait_for 10 gone "$(unit_of badutf8)"
ctl badsig '{"argv":["cat"],"steps":[{"expect":"started"},{"signal":11}]}'
expect "SIGNAL outside the allowlist: error bad_signal" badsig 't.get("type") == "error" and t["code"] == "bad_signal"'
for k in no_fd:no_descriptor two_fds:extra_descriptor not_dir:not_directory bad_version:bad_version nothing:start_timeout; do
  ctl "raw_${k%%:*}" "{\"raw\":\"${k%%:*}\",\"timeout\":20}"
  expect "START ${k%%:*}: error ${k#*:}" "raw_${k%%:*}" "t.get('type') == 'error' and t['code'] == '${k#*:}'"
done
ctl handshakes '{"op":"handshakes","n":17,"timeout":20}'
expect "17 silent connections: one too_many_handshakes at once, 16 start_timeout" handshakes 'sorted(r["results"]) == ["start_timeout"] * 16 + ["too_many_handshakes"]'
check "no unit was created by any refused or failed START" no_session_units

# --- refusals -----------------------------------------------------------------------------
ctl child '{"op":"child_session","argv":["true"],"timeout":20}'
expect "a child of MainPID (same uid, same cgroup) is refused: unauthenticated" child 't.get("code") == "unauthenticated" and "started:" not in r["events"]'
as byk samebyk '{"argv":["true"],"timeout":20}'
expect "another process of uid byk outside the unit is refused: unauthenticated" samebyk 't.get("code") == "unauthenticated"'
as other other '{"argv":["true"],"timeout":20}'
expect "uid other cannot even connect (socket 0600 byk)" other 'r.get("connect_error") == 13'
chmod 0666 /run/opencode-pty/supervisor.sock
as other other666 '{"argv":["true"],"timeout":20}'
chmod 0600 /run/opencode-pty/supervisor.sock
expect "uid other on an open socket is refused by the supervisor: unauthenticated" other666 't.get("code") == "unauthenticated"'
as root root '{"argv":["true"],"timeout":20}'
expect "uid 0 is refused: root_refused" root 't.get("code") == "root_refused"'
check "no unit was created by a refused peer" no_session_units

# --- a kernel without SO_PEERPIDFD: every connection is refused (issue #13) -------------------
# The test-only switch OPENCODE_PTY_TEST_NO_PEERPIDFD=1 (a runtime drop-in on the
# supervisor's service) makes the start-up probe report SO_PEERPIDFD missing, as on
# Linux < 6.5; it can only ever make the supervisor refuse. Then even the MainPID is
# refused with kernel_unsupported (no pidfd_open fallback), the journal says why at
# start (LOG_CRIT) and for the connection, and without the switch it works again.
# sup_entries CURSOR: "PRIORITY ERROR_CODE MESSAGE" of the supervisor's entries.
sup_entries() {
  journalctl --no-pager --after-cursor "$1" -o json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e.get("_SYSTEMD_UNIT") == "opencode-pty-supervisor.service":
        print(e.get("PRIORITY"), e.get("ERROR_CODE", "-"), e.get("MESSAGE"))'
}
NOPIDFD=/run/systemd/system/opencode-pty-supervisor.service.d
mkdir -p "$NOPIDFD"
printf '[Service]\nEnvironment=OPENCODE_PTY_TEST_NO_PEERPIDFD=1\n' > "$NOPIDFD/test-no-peerpidfd.conf"
systemctl daemon-reload
systemctl stop opencode-pty-supervisor.service
cursor=$(journal_cursor)
ctl nopidfd '{"argv":["true"],"timeout":20}'
expect "no SO_PEERPIDFD (test switch): the MainPID's connection gets error kernel_unsupported" nopidfd \
  't.get("type") == "error" and t["code"] == "kernel_unsupported" and "started:" not in r["events"]'
check "no SO_PEERPIDFD: no unit was created" no_session_units
check "no SO_PEERPIDFD: the supervisor ran with the switch" sh -c '
  systemctl show -P Environment opencode-pty-supervisor.service | grep -qw OPENCODE_PTY_TEST_NO_PEERPIDFD=1'
sup_entries "$cursor" > "$tmp/nopidfd-journal.txt"; cp "$tmp/nopidfd-journal.txt" /results/nopidfd-journal.txt
check "no SO_PEERPIDFD: journal at start, LOG_CRIT: SO_PEERPIDFD is not available" sh -c '
  grep "SO_PEERPIDFD" "$1"; grep -q "^2 - SO_PEERPIDFD is not available" "$1"' - "$tmp/nopidfd-journal.txt"
check "no SO_PEERPIDFD: journal for the connection, ERROR_CODE=kernel_unsupported" sh -c '
  grep -q "^4 kernel_unsupported connection refused: this kernel has no SO_PEERPIDFD" "$1"' - "$tmp/nopidfd-journal.txt"
rm -rf "$NOPIDFD"
systemctl daemon-reload
systemctl stop opencode-pty-supervisor.service
cursor=$(journal_cursor)
ctl pidfdback '{"argv":["sh","-c","echo back-with-pidfd; exit 6"],"timeout":30,"steps":[{"expect":"started"}]}'
expect "without the switch the MainPID's session runs again (exit 6)" pidfdback \
  '"back-with-pidfd" in r["output_text"] and t.get("type") == "exit" and t["code"] == 6'
no_pidfd_line() { sup_entries "$1" > "$tmp/pidfdback-journal.txt"; ! grep "SO_PEERPIDFD is not available" "$tmp/pidfdback-journal.txt"; }
check "without the switch: no SO_PEERPIDFD line at start" no_pidfd_line "$cursor"
check "without the switch: its unit proven gone" wait_for 10 no_session_units

# --- a same-UID connect loop does not lock the MainPID out (issue #21 point 3) ------------------
# Three processes of uid byk outside the unit open 16 connections at a time, send
# nothing and wait for each refusal, for 10 s; meanwhile the MainPID runs sessions
# one after another. From kHandshakePressure pending handshakes on, the loop's
# connections are refused at accept (too_many_handshakes) without taking a slot, so
# the MainPID's connections always find one and go through the full check.
cursor=$(journal_cursor)
looppids=
for i in 1 2 3; do
  runuser -u byk -- python3 "$here/supervisor_app.py" oneshot '{"op":"connect_loop","seconds":10,"batch":16}' \
    > "$tmp/loop$i.json" 2> "/results/loop$i.stderr" &
  looppids="$looppids $!"
done
sleep 1
ctl loopmain '{"op":"serial","n":12,"session":{"argv":["true"],"timeout":30,"steps":[{"expect":"started"}]}}'
# shellcheck disable=SC2086
wait $looppids
cat "$tmp"/loop?.json > /results/connect-loop.json
check "connect loop: the loop reached the pressure mark (too_many_handshakes) and was checked in full (unauthenticated)" python3 -c '
import json, sys
codes = {}
for p in sys.argv[1:]:
    for k, v in json.load(open(p))["codes"].items():
        codes[k] = codes.get(k, 0) + v
print(codes)
sys.exit(0 if codes.get("too_many_handshakes", 0) > 0 and codes.get("unauthenticated", 0) > 0 else 1)' "$tmp"/loop1.json "$tmp"/loop2.json "$tmp"/loop3.json
expect "connect loop: all 12 MainPID sessions started and exited 0 during the loop" loopmain \
  'len(r["sessions"]) == 12 and all("started:" in s["events"] and (s.get("terminal") or {}).get("code") == 0 for s in r["sessions"])'
loop_lines_bounded() {
  sup_journal "$1" > "$tmp/loop-journal.txt"; cp "$tmp/loop-journal.txt" /results/connect-loop-journal.txt
  n=$(grep -c "refused" "$tmp/loop-journal.txt"); grep "refused" "$tmp/loop-journal.txt" | sort | uniq -c | sort -rn | head -n 5
  echo "refusal lines: $n"; [ "$n" -le 60 ]
}
check "connect loop: the refusal lines in the journal are rate-limited (<= 60)" loop_lines_bounded "$cursor"
check "connect loop: every unit proven gone" wait_for 10 no_session_units

# --- concurrency -------------------------------------------------------------------------------
ctl many '{"op":"sessions","n":6,"session":{"argv":["sh","-c","echo hi-$$; sleep 0.5; exit 5"],"timeout":60,"steps":[{"expect":"started"}]}}'
expect "6 concurrent sessions each exit 5" many 'len(r["sessions"]) == 6 and all((s.get("terminal") or {}).get("code") == 5 for s in r["sessions"])'
check "all of them proven gone" wait_for 10 no_session_units

# --- mass close: kMaxSessions sessions closed at once ----------------------------------------------
# The cap (common/limits.h kMaxSessions, 1,024 since the supervisor talks to
# systemd directly; 128 while systemd's match-rule budget on the system bus set
# it). Here every slot is filled with a running unit and all connections close
# in one loop; the supervisor must prove every unit gone without restarting
# and systemd must stay on the bus.
max_sessions=$(sed -n 's/^inline constexpr size_t kMaxSessions = \([0-9]*\);.*/\1/p' /artifacts/vm-tests/limits.h)
check "mass close: kMaxSessions read from the build's limits.h ($max_sessions)" test -n "$max_sessions"
sup=$(supervisor_pid)
cursor=$(journal_cursor)
ctl mass "{\"op\":\"mass\",\"n\":$max_sessions}"
expect "mass close: $max_sessions sessions (kMaxSessions) run at once, each an active unit" mass \
  'r["sessions"] == '"$max_sessions"' and not r["refused"] and r["units_running"] == '"$max_sessions"
t0=$(date +%s.%N)
check "mass close: all $max_sessions units are stopped and proven gone after the connections closed at once" wait_for 120 no_session_units
t1=$(date +%s.%N)
echo "mass close: units gone $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s after the close" | tee /results/mass-close.txt
# When systemd lists no unit, the supervisor's last proofs (GetUnit answered
# after the unit went) and journald's storing of the burst (over 2,000 lines)
# may still be under way: the journal is read again until it holds every proof
# and none "not proven gone" (60 s, a hang guard).
mass_journal() {
  sup_journal "$cursor" > "$tmp/mass-journal.txt"
  n=$(grep -cx "PTY unit proven gone" "$tmp/mass-journal.txt"); bad=$(grep -c "not proven gone" "$tmp/mass-journal.txt")
  echo "proven gone: $n, not proven gone: $bad"; [ "$n" -eq "$max_sessions" ] && [ "$bad" -eq 0 ]
}
# wait_for keeps the passing read's output to itself: read once more for the evidence.
mass_journal_waited() { wait_for 60 mass_journal >/dev/null 2>&1; mass_journal; }
check "mass close: the journal has exactly $max_sessions 'PTY unit proven gone' and no 'not proven gone'" mass_journal_waited
check "mass close: the supervisor is the same process (its connection to systemd held)" sh -c '[ "$(systemctl show -P MainPID opencode-pty-supervisor.service)" = "$1" ]' - "$sup"
check "mass close: systemd still answers on the bus" busctl --system call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.DBus.Peer Ping
check "mass close: STATUS= is back to 0 sessions" wait_for 10 sh -c '[ "$(systemctl show -P StatusText opencode-pty-supervisor.service)" = "0 sessions, 0 handshakes" ]'

# --- a unit not proven gone is kept and retried -------------------------------------------------
# Another root client on the system bus takes a reference on the live unit
# (RefUnit) and holds it: the supervisor can stop the unit but systemd keeps it
# loaded, so it cannot be proven gone; after its 15 s bound the unit must go on
# the retry list, not be forgotten. Then the holder exits (systemd drops its
# reference and collects the unit), systemd re-executes (the supervisor's
# direct connection ends and is opened again), and the retry proves the unit
# gone.
rm -f "$RUN/retry-ready" "$RUN/retry-done" "$RUN/retry-ref"
ctl retry '{"argv":["sleep","1000"],"timeout":60,"steps":[{"expect":"started"},{"touch":"/run/opencode-test/retry-ready"},
  {"wait_file":"/run/opencode-test/retry-done"},{"close":true}]}' &
ctlpid=$!
wait_for 20 test -e "$RUN/retry-ready"
u=$(session_units | head -n1)
sup=$(supervisor_pid)
python3 -c '
import sys, time, dbus
bus = dbus.SystemBus()
m = dbus.Interface(bus.get_object("org.freedesktop.systemd1", "/org/freedesktop/systemd1"), "org.freedesktop.systemd1.Manager")
m.RefUnit(sys.argv[1])
open(sys.argv[2], "w").write("ref\n")
time.sleep(600)' "$u" "$RUN/retry-ref" &
holder=$!
check "retry: another client holds a reference on the unit (RefUnit)" wait_for 10 test -e "$RUN/retry-ref"
touch "$RUN/retry-done"   # the stand-in closes the connection: the supervisor stops the unit
wait $ctlpid
check "retry: after the cleanup bound the unit is on the retry list (STATUS=)" wait_for 40 sh -c '
  st=$(systemctl show -P StatusText opencode-pty-supervisor.service); echo "$st"
  [ "$st" = "0 sessions, 0 handshakes, 1 units not proven gone (retrying)" ]'
check "retry: journal: not proven gone, kept on the retry list (UNIT=)" sh -c '
  journalctl --no-pager -o cat _SYSTEMD_UNIT=opencode-pty-supervisor.service UNIT=$1 | grep -F -e "not proven gone" -e "kept on the retry list" | head -n 3
  journalctl --no-pager -o cat _SYSTEMD_UNIT=opencode-pty-supervisor.service UNIT=$1 | grep -q "^PTY unit kept on the retry list"' - "$u"
check "retry: while referenced, each retry fails again and the unit stays listed" wait_for 30 sh -c '
  journalctl --no-pager -o cat _SYSTEMD_UNIT=opencode-pty-supervisor.service UNIT=$1 | grep -q "^PTY unit on the retry list still not proven gone"' - "$u"
check "retry: the unit is still loaded, referenced by the holder" sh -c 'systemctl show -P LoadState "$1" | grep -qx loaded' - "$u"
kill "$holder"; wait "$holder" 2>/dev/null
cursor=$(journal_cursor)
check "retry: systemctl daemon-reexec (systemd drops its direct connections)" systemctl daemon-reexec
check "retry: the supervisor reconnected to systemd and retried" wait_for 30 sup_journal_has "$cursor" "^reconnected to systemd"
check "retry: the listed unit is proven gone (journal)" wait_for 30 sup_journal_has "$cursor" "^PTY unit on the retry list proven gone" "$u"
check "retry: GetUnit says the unit is gone" gone "$u"
check "retry: STATUS= is back to 0 sessions, nothing listed" wait_for 10 sh -c '[ "$(systemctl show -P StatusText opencode-pty-supervisor.service)" = "0 sessions, 0 handshakes" ]'
check "retry: the supervisor is the same process throughout" sh -c '[ "$(systemctl show -P MainPID opencode-pty-supervisor.service)" = "$1" ]' - "$sup"
ctl afterreexec '{"argv":["sh","-c","echo after-reexec; exit 4"],"timeout":30}'
expect "retry: a new session after the re-exec runs and exits 4" afterreexec '"after-reexec" in r["output_text"] and t.get("type") == "exit" and t["code"] == 4'
check "retry: its unit proven gone" wait_for 10 no_session_units

# --- forged signals on the real bus ---------------------------------------------------------------
rm -f "$RUN/forge-ready" "$RUN/forge-done"
ctl forge '{"argv":["cat"],"timeout":120,"steps":[{"expect":"started"},{"touch":"/run/opencode-test/forge-ready"},
  {"wait_file":"/run/opencode-test/forge-done","timeout":100},{"input":"after-forge\n"},{"expect":"after-forge\r\nafter-forge"},{"eof":true}]}' &
ctlpid=$!
wait_for 20 test -e "$RUN/forge-ready"
u=$(session_units | head -n1)
check "forged UnitRemoved + 10,000 x3 forged signals from another sender" python3 "$here/forge.py" "$u" 10000
check "the forged signals did not end the unit" sh -c 'systemctl is-active "$1"' - "$u"
touch "$RUN/forge-done"
wait $ctlpid
expect "the session survives forged signals and exits normally" forge 't.get("type") == "exit" and t["code"] == 0'
check "forged session: unit proven gone" gone "$u"

# --- a flood of forged signals (issue #21 point 1) -------------------------------------------------
# The supervisor has no connection on the system bus (it talks to systemd on
# systemd's private socket): there is no name to unicast to. An unprivileged
# user (nobody) floods forged NameOwnerChanged(systemd1) + UnitRemoved on the
# system bus while a session whose command ignores TERM and HUP is closed (its
# unit needs SIGKILL, 5 s): nothing may reach the supervisor, the reaper must
# prove the unit gone, and the journal must not grow with the flood.
rm -f "$RUN/flood-ready" "$RUN/flood-done"
ctl flood '{"argv":["sh","-c","trap \"\" TERM HUP; echo flood-ready; while :; do sleep 1; done"],"timeout":60,
  "steps":[{"expect":"started"},{"expect":"flood-ready"},{"touch":"/run/opencode-test/flood-ready"},
  {"wait_file":"/run/opencode-test/flood-done","timeout":50},{"close":true}]}' &
ctlpid=$!
wait_for 20 test -e "$RUN/flood-ready"
u=$(session_units | head -n1)
sup=$(supervisor_pid)
check "flood: the supervisor has no connection on the system bus (nothing can unicast to it)" sh -c '
  busctl --system list --unique --no-legend --no-pager | awk -v p="$1" "\$2 == p" > "$2"; cat "$2"; [ ! -s "$2" ]' - "$sup" "$tmp/sup-names.txt"
echo "supervisor pid $sup, unit $u"
cursor=$(journal_cursor)
runuser -u nobody -- python3 "$here/flood.py" "" "$u" 15 > "$tmp/flood.out" 2>&1 &
floodpid=$!
sleep 2
touch "$RUN/flood-done"   # the stand-in closes the connection: the supervisor stops the unit
wait $ctlpid
flood_sent() { cat "$1"; grep -q "^flood: sent [1-9]" "$1"; }
flood_no_appearance() { n=$(sup_journal "$1" | grep -c "reconnected to systemd"); echo "reconnection lines: $n"; [ "$n" -eq 0 ]; }
flood_nothing_unproven() {
  n=$(sup_journal "$1" | grep -c -e "not proven gone" -e "retry list"); echo "lines: $n"
  st=$(systemctl show -P StatusText opencode-pty-supervisor.service); echo "$st"
  [ "$n" -eq 0 ] && [ "$st" = "0 sessions, 0 handshakes" ]
}
flood_lines_bounded() {
  sup_journal "$1" > "$tmp/flood-journal.txt"; cp "$tmp/flood-journal.txt" /results/flood-journal.txt
  n=$(wc -l < "$tmp/flood-journal.txt"); sort "$tmp/flood-journal.txt" | uniq -c | sort -rn | head -n 8
  echo "supervisor lines: $n"; [ "$n" -le 30 ]
}
wait $floodpid
check "flood: the flooder (nobody) ran and sent signals" flood_sent "$tmp/flood.out"
check "flood: the unit is proven gone by the reaper (journal)" wait_for 30 sup_journal_has "$cursor" "^PTY unit proven gone" "$u"
check "flood: GetUnit says the unit is gone" gone "$u"
check "flood: 0 re-subscriptions (no 'reconnected to systemd')" flood_no_appearance "$cursor"
check "flood: nothing not proven gone, nothing on the retry list" flood_nothing_unproven "$cursor"
check "flood: the supervisor's journal lines during the flood are bounded (<= 30)" flood_lines_bounded "$cursor"
check "flood: the supervisor is the same process" sh -c '[ "$(systemctl show -P MainPID opencode-pty-supervisor.service)" = "$1" ]' - "$sup"

# --- daemon-reload during a live session ---------------------------------------------------------------
rm -f "$RUN/reload-ready" "$RUN/reload-done"
ctl reload '{"argv":["sh","-c","read x; echo after-reload:$x"],"steps":[{"expect":"started"},{"touch":"/run/opencode-test/reload-ready"},
  {"wait_file":"/run/opencode-test/reload-done"},{"input":"r1\n"},{"expect":"after-reload:r1"}]}' &
ctlpid=$!
wait_for 20 test -e "$RUN/reload-ready"
check "systemctl daemon-reload during a live session" systemctl daemon-reload
touch "$RUN/reload-done"
wait $ctlpid
expect "the session survives daemon-reload (input, output, exit 0)" reload '"after-reload:r1" in r["output_text"] and t.get("type") == "exit" and t["code"] == 0'

# --- SIGKILL of the supervisor mid-session, restart, recovery --------------------------------------------
rm -f "$RUN/kill-ready" "$RUN/kill-done"
ctl crash '{"argv":["sleep","1000"],"timeout":60,"steps":[{"expect":"started"},{"touch":"/run/opencode-test/kill-ready"},
  {"wait_file":"/run/opencode-test/kill-done"}]}' &
ctlpid=$!
wait_for 20 test -e "$RUN/kill-ready"
u=$(session_units | head -n1)
old=$(supervisor_pid)
check "SIGKILL the supervisor (pid $old) while $u runs" systemctl kill -s KILL opencode-pty-supervisor.service
check "right after the crash the session unit is still there (the case is real)" sh -c 'systemctl is-active "$1"' - "$u"
touch "$RUN/kill-done"
wait $ctlpid
expect "the client sees its connection end" crash 'r.get("eof") is True'
check "systemd restarts the supervisor" wait_for 20 sh -c 'p=$(systemctl show -P MainPID opencode-pty-supervisor.service); [ "$p" != 0 ] && [ "$p" != "$1" ]' - "$old"
check "start-up recovery leaves no opencode-pty-*.service behind" wait_for 30 no_session_units
check "recovery journal: leftover unit proven gone" sh -c 'journalctl --no-pager -o verbose _SYSTEMD_UNIT=opencode-pty-supervisor.service UNIT=$1 | grep -q "leftover PTY unit proven gone"' - "$u"
ctl after '{"argv":["sh","-c","echo alive; exit 4"],"steps":[{"expect":"started"}]}'
expect "sessions work again after the restart" after '"alive" in r["output_text"] and t.get("code") == 4'

# --- graceful stop (SIGTERM) with a live session ---------------------------------------------------------------
rm -f "$RUN/term-ready"
ctl graceful '{"argv":["sleep","1000"],"timeout":60,"steps":[{"expect":"started"},{"touch":"/run/opencode-test/term-ready"}]}' &
ctlpid=$!
wait_for 20 test -e "$RUN/term-ready"
u=$(session_units | head -n1)
check "systemctl stop of the supervisor with a live session" systemctl stop opencode-pty-supervisor.service
wait $ctlpid
expect "the client gets error internal" graceful 't.get("type") == "error" and t["code"] == "internal"'
check "the session unit was proven gone before the supervisor exited" gone "$u"
check "the supervisor stopped cleanly (Result=success)" sh -c 'r=$(systemctl show -P Result opencode-pty-supervisor.service); echo "$r"; [ "$r" = success ]'
ctl again '{"argv":["true"],"steps":[{"expect":"started"}]}'
expect "socket activation starts it again on the next connection" again 't.get("type") == "exit" and t["code"] == 0'

# --- the client unit stopped -------------------------------------------------------------------------------------
systemctl stop opencode-v2.service
as byk stopped '{"argv":["true"],"timeout":20}'
expect "with opencode-v2.service stopped, uid byk is refused: unauthenticated" stopped 't.get("code") == "unauthenticated"'
check "nothing left behind" no_session_units

journalctl --no-pager -o short-precise _SYSTEMD_UNIT=opencode-pty-supervisor.service > /results/supervisor-journal.txt 2>&1
journalctl --no-pager -o short-precise -u opencode-v2.service > /results/standin-journal.txt 2>&1
# Every session of the suite lowered its unit's CPUWeight at its command's
# exec; a short command's unit may be gone before systemd reads that call
# (NoSuchUnit), which is not a failure and is not logged.
check "the whole suite: no session failed to lower its unit's CPUWeight" sh -c '
  ! grep "cannot lower the unit" /results/supervisor-journal.txt'
systemctl --version | head -n1 > /results/systemd-version.txt
checks_done
