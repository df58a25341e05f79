#!/bin/sh
# vm-tests/argv/argv.sh: who can read a PTY command's argv, measured on a real
# systemd (bookworm = 252, trixie = 257; vm.argv-exposure.*; issue #28 part 3).
# The seed's ExecStart line carries the argv, base64url-encoded, for the whole
# session; docs/SECURITY.md "Who can read a command's argv" states the
# exposure, and every check here is named for one cell of that table with the
# truth measured, so that any change (more or less exposure) fails the suite.
#
# The stack is installed as in supervisor.sh; the stand-in application
# (vm-tests/supervisor/supervisor_app.py, MainPID of opencode-v2.service, User=byk)
# opens one session through the real client helper whose argv carries a
# random marker:  sh -c 'sleep 600; exit 0' argv-marker-<hex>  (dash keeps
# the marker as $0 in its own command line and runs sleep as a child).
# gate_hold.py holds a second launcher, started exactly as the supervisor
# starts one, at its gate. Then the user `other` (uid 1001, not byk, not root,
# made by lib/build-rootfs.sh) reads ExecStart over D-Bus, the transient unit
# file, /proc/<pid>/cmdline and environ of every process of the unit and the
# journal, first with /proc as it is, then with /proc remounted
# hidepid=invisible.
# The same session also carries the application's environment overlay (the
# stand-in sends --env and an ENV frame, as opencode does): a random
# OPENCODE_ENV_MARKER and INVOCATION_ID=bogus. The command's own environ holds
# the marker and no INVOCATION_ID at all (root reads it: the control), and
# neither `other` nor root finds the marker in the unit's properties, the
# transient unit file or the journal; `other` finds it in no process's
# cmdline or environ (docs/SECURITY.md "The application's environment").
. /vm-tests/lib/check.sh
. /vm-tests/lib/supervisor-setup.sh
here=$(dirname "$0")
STANDIN=/vm-tests/supervisor/supervisor_app.py
RUN=/run/opencode-test
tmp=$(mktemp -d)
echo "argv: target ${VMTESTS_TARGET:-?}, $(systemctl --version | head -n1), kernel $(uname -r)"

marker=argv-marker-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
# The marker's ExecStart token: "a" + unpadded base64url (common/base64url).
enc=$(python3 -c 'import base64, sys; print("a" + base64.urlsafe_b64encode(sys.argv[1].encode()).decode().rstrip("="))' "$marker")
echo "marker $marker, its ExecStart token $enc"
envmarker=env-marker-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
echo "environment marker $envmarker"

. /vm-tests/lib/units.sh
unit_path() { echo "/org/freedesktop/systemd1/unit/$(echo "$1" | sed -e 's/-/_2d/g' -e 's/\./_2e/g')"; }

# as_user USER NAME CMD...: CMD as USER (never root); its stdout, stderr and
# exit status are kept as $tmp/NAME.{out,err,rc} and in /results/read-NAME.*.
as_user() {
  _u=$1 _n=$2; shift 2
  runuser -u "$_u" -- "$@" > "$tmp/$_n.out" 2> "$tmp/$_n.err"
  echo $? > "$tmp/$_n.rc"
  for _x in out err rc; do cp "$tmp/$_n.$_x" "/results/read-$_n.$_x"; done
}
# seen NAME WANT: what the read NAME showed, against WANT:
#   encoded  read succeeded and holds the marker's base64url token only
#   plain    read succeeded and holds the marker in plain text only
#   both     read succeeded and holds both forms
#   clean    read succeeded and holds neither
#   refused  read failed and showed neither
#   absent   neither, whatever the status
seen() {
  rc=$(cat "$tmp/$1.rc") form=none
  if grep -aqF -- "$marker" "$tmp/$1.out" "$tmp/$1.err"; then form=plain; fi
  if grep -aqF -- "$enc" "$tmp/$1.out" "$tmp/$1.err"; then
    if [ "$form" = plain ]; then form=both; else form=encoded; fi
  fi
  echo "exit $rc, marker form: $form; stdout $(head -c 200 "$tmp/$1.out" | tr '\0\n' '  '); stderr $(head -c 200 "$tmp/$1.err" | tr '\n' ' ')"
  case "$2" in
    encoded|plain|both) [ "$rc" = 0 ] && [ "$form" = "$2" ] ;;
    clean) [ "$rc" = 0 ] && [ "$form" = none ] ;;
    refused) [ "$rc" != 0 ] && [ "$form" = none ] ;;
    absent) [ "$form" = none ] ;;
    *) echo "seen: unknown expectation $2"; return 2 ;;
  esac
}

# --- install (shared with supervisor/supervisor.sh) -------------------------------------------
supervisor_setup "argv exposure suite" "/usr/bin/python3 $STANDIN serve"
check "other is an ordinary user: uid 1001, in neither systemd-journal nor adm" sh -c '
  id other; [ "$(id -u other)" = 1001 ] && ! id -nG other | tr " " "\n" | grep -qx -e systemd-journal -e adm -e root'

# --- one live session, one launcher at its gate ----------------------------------------------
rm -f "$RUN/argv-ready" "$RUN/argv-done"
# The request on stdin (printf is the shell's builtin): the environment
# marker must be in no command line, the harness's own included.
printf '%s' '{"argv":["sh","-c","sleep 600; exit 0","'"$marker"'"],"timeout":400,
  "env":{"OPENCODE_ENV_MARKER":"'"$envmarker"'","INVOCATION_ID":"bogus","TERM":"xterm-256color"},
  "steps":[{"expect":"started"},{"touch":"/run/opencode-test/argv-ready"},
  {"wait_file":"/run/opencode-test/argv-done","timeout":300},{"stop":true}]}' |
  python3 "$STANDIN" call - > "$tmp/live.json" 2>&1 &
livepid=$!
check "a session with the marker in argv started" wait_for 30 test -e "$RUN/argv-ready"
# Only now: the supervisor's start-up recovery stops every opencode-pty-*
# unit it finds, and it started with the session above.
rm -f "$tmp/gate.state" "$tmp/gate.release"
python3 "$here/gate_hold.py" "$tmp/gate.state" "$tmp/gate.release" sh -c 'sleep 600; exit 0' "$marker" \
  > "$tmp/gate.log" 2>&1 &
gatepid=$!
check "a launcher holds at its gate with the same argv" wait_for 30 test -s "$tmp/gate.state"
read -r gunit gpid < "$tmp/gate.state" || true
u=$(session_units | grep -vx "$gunit" | head -n1)
path=$(unit_path "$u")
# The chain: script (MainPID) -> monitor -> the command (sh) -> sleep. The
# started envelope may come a moment before the command forked its child.
chain() {
  script=$(systemctl show -P MainPID "$u")
  monitor=$(pgrep -P "$script" | head -n1)
  command=$(pgrep -P "$monitor" | head -n1)
  child=$(pgrep -P "$command" | head -n1)
  [ -n "$child" ] && [ "$(cat "/proc/$child/comm")" = sleep ]
}
n=100; while [ $n -gt 0 ] && ! chain 2>/dev/null; do sleep 0.1; n=$((n - 1)); done
echo "session unit $u: script $script, monitor $monitor, command $command, its child $child; gate unit $gunit: launcher $gpid"
check "the session's unit holds exactly script, the monitor (launcher --exec), the command (sh) and its child (sleep)" sh -c '
  u=$1; want=$(printf "%s\n" "$2" "$3" "$4" "$5" | sort -n)
  got=$(grep -l "/$u\$" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3 | sort -n)
  for p in $got; do echo "$p $(cat /proc/$p/comm) $(tr "\0" " " < /proc/$p/cmdline)"; done
  [ "$got" = "$want" ] && [ "$(cat /proc/$2/comm)" = script ] && [ "$(tr "\0" " " < /proc/$3/cmdline)" = "/proc/self/fd/3 --exec " ] &&
    [ "$(cat /proc/$4/comm)" = sh ] && [ "$(cat /proc/$5/comm)" = sleep ]' - "$u" "$script" "$monitor" "$command" "$child"
check "the gate's launcher waits (state S) with its encoded argv as command line" sh -c '
  tr "\0" " " < /proc/$1/cmdline; echo; grep "^State:" /proc/$1/status
  grep -q "^State:.*S (sleeping)" /proc/$1/status && grep -aqF -- "$2" /proc/$1/cmdline' - "$gpid" "$enc"
check "the transient unit file is root:root 0644 in a root:root 0755 directory" sh -c '
  stat -c "%n %U:%G %a" /run/systemd/transient "/run/systemd/transient/$1"
  [ "$(stat -c "%U:%G %a" /run/systemd/transient)" = "root:root 755" ] &&
  [ "$(stat -c "%U:%G %a" "/run/systemd/transient/$1")" = "root:root 644" ]' - "$u"

# measure PREFIX: every read by `other` of the live session and the gate.
measure() {
  p=$1
  as_user other "$p-busctl" busctl --system get-property org.freedesktop.systemd1 "$path" org.freedesktop.systemd1.Service ExecStart
  as_user other "$p-busctl-ex" busctl --system get-property org.freedesktop.systemd1 "$path" org.freedesktop.systemd1.Service ExecStartEx
  as_user other "$p-show" systemctl show -p ExecStart "$u"
  as_user other "$p-transient" cat "/run/systemd/transient/$u"
  as_user other "$p-gate-transient" cat "/run/systemd/transient/$gunit"
  for r in script:$script monitor:$monitor command:$command child:$child gate:$gpid; do
    as_user other "$p-cmdline-${r%%:*}" cat "/proc/${r#*:}/cmdline"
    as_user other "$p-environ-${r%%:*}" cat "/proc/${r#*:}/environ"
  done
  as_user other "$p-ps" ps -eo pid,user,args
}

# --- /proc as it is (no hidepid) ---------------------------------------------------------------
check "/proc is mounted without hidepid" sh -c 'grep "^proc /proc " /proc/self/mounts; ! grep "^proc /proc " /proc/self/mounts | grep -q hidepid='
measure plain
P="no hidepid: another user"
check "$P reads the argv from ExecStart over D-Bus (busctl get-property): yes, base64url-encoded (documented residual)" seen plain-busctl encoded
check "$P reads the argv from ExecStartEx over D-Bus: yes, base64url-encoded" seen plain-busctl-ex encoded
check "$P reads the argv from systemctl show -p ExecStart: yes, base64url-encoded" seen plain-show encoded
check "$P reads the argv from /run/systemd/transient/<unit>: yes, base64url-encoded" seen plain-transient encoded
check "$P decodes the whole argv byte for byte from ExecStart (base64url is no secret)" python3 -c '
import base64, re, sys
out = open(sys.argv[1]).read()
toks = re.findall(r"\"(a[A-Za-z0-9_-]*)\"", out)
argv = [base64.urlsafe_b64decode(t[1:] + "=" * (-len(t[1:]) % 4)) for t in toks]
print(argv)
sys.exit(0 if argv == [b"sh", b"-c", b"sleep 600; exit 0", sys.argv[2].encode()] else 1)' "$tmp/plain-busctl.out" "$marker"
check "$P reads the argv from /proc/<pid>/cmdline of the command (sh): yes, in plain text (any process's argv)" seen plain-cmdline-command plain
check "$P reads /proc/<pid>/cmdline of script (the unit's main process): readable, no argv (the fixed script line)" seen plain-cmdline-script clean
check "$P reads /proc/<pid>/cmdline of the monitor (launcher --exec): readable, no argv" seen plain-cmdline-monitor clean
check "$P reads /proc/<pid>/cmdline of the command's child (sleep): readable, no argv (its own)" seen plain-cmdline-child clean
check "$P reads the argv from /proc/<pid>/cmdline of the launcher at its gate: yes, base64url-encoded" seen plain-cmdline-gate encoded
check "$P reads /run/systemd/transient/<unit> of the launcher at its gate: yes, base64url-encoded" seen plain-gate-transient encoded
for r in script monitor command child gate; do
  check "$P reads /proc/<pid>/environ of the $r: no, refused" seen "plain-environ-$r" refused
done
check "$P sees the argv in ps: yes (the command's in plain text, the gate's encoded)" seen plain-ps both
# The environment check is not vacuous: the session's own user reads script's
# copy of the encoded argv (OPENCODE_PTY_ARGV), as it can read everything of its own.
as_user byk byk-environ-script cat "/proc/$script/environ"
check "the session's own user (byk) reads OPENCODE_PTY_ARGV in script's environ: yes, base64url-encoded" seen byk-environ-script encoded

# --- the application's environment overlay (no hidepid) ---------------------------------------
# nomark NAME: the read NAME (whatever its status) shows no environment marker.
nomark() {
  echo "exit $(cat "$tmp/$1.rc"), $(wc -c < "$tmp/$1.out") bytes; stderr $(head -c 200 "$tmp/$1.err" | tr '\n' ' ')"
  ! grep -aqF -- "$envmarker" "$tmp/$1.out" "$tmp/$1.err"
}
check "the command got the overlay: its environ (read as root) holds OPENCODE_ENV_MARKER and no INVOCATION_ID" sh -c '
  tr "\0" "\n" < /proc/$1/environ | sort | sed "s/=.*//" | tr "\n" " "; echo
  tr "\0" "\n" < /proc/$1/environ | grep -qxF "OPENCODE_ENV_MARKER=$2" &&
  ! tr "\0" "\n" < /proc/$1/environ | grep -q "^INVOCATION_ID="' - "$command" "$envmarker"
check "the chain before the command (script, the monitor) never held the overlay (root reads their environ)" sh -c '
  for p in $1 $2; do ! grep -aqF -- "$3" /proc/$p/environ || exit 1; done' - "$script" "$monitor" "$envmarker"
as_user other env-show systemctl show "$u"
as_user other env-busctl busctl --system get-property org.freedesktop.systemd1 "$path" org.freedesktop.systemd1.Service Environment
as_user other env-transient cat "/run/systemd/transient/$u"
as_user other env-proc sh -c 'for p in /proc/[0-9]*; do cat "$p/cmdline" "$p/environ"; done 2>/dev/null; true'
as_user other env-journal journalctl -b --no-pager -o export
E="no hidepid: another user"
check "$E finds the environment marker in no property of the unit (systemctl show: ExecStart, Environment, all)" nomark env-show
check "$E finds no environment marker in the unit's Environment over D-Bus" nomark env-busctl
check "$E finds no environment marker in /run/systemd/transient/<unit>" nomark env-transient
check "$E finds the environment marker in no /proc/<pid>/cmdline or environ of any process" nomark env-proc
check "$E finds no environment marker in the journal" nomark env-journal
systemctl show "$u" > "$tmp/env-root-show.out" 2> "$tmp/env-root-show.err"; echo $? > "$tmp/env-root-show.rc"
cat "/run/systemd/transient/$u" > "$tmp/env-root-transient.out" 2> "$tmp/env-root-transient.err"; echo $? > "$tmp/env-root-transient.rc"
journalctl -b --no-pager -o export > "$tmp/env-root-journal.out" 2> "$tmp/env-root-journal.err"; echo $? > "$tmp/env-root-journal.rc"
check "root finds the environment marker in no property of the unit (systemctl show)" nomark env-root-show
check "root finds no environment marker in /run/systemd/transient/<unit>" nomark env-root-transient
check "root finds no environment marker in the journal (the supervisor logs no name or value)" nomark env-root-journal

# --- /proc remounted hidepid=invisible ---------------------------------------------------------
hidepid_ok=0
if mount -o remount,hidepid=invisible /proc > "$tmp/hidepid.log" 2>&1; then
  hidepid_ok=1
  check "/proc remounted with hidepid=invisible" sh -c 'grep "^proc /proc " /proc/self/mounts; grep "^proc /proc " /proc/self/mounts | grep -q "hidepid=\(invisible\|2\)"'
  measure hide
  H="hidepid=invisible: another user"
  check "$H reads the argv from ExecStart over D-Bus (busctl get-property): yes, base64url-encoded (documented residual)" seen hide-busctl encoded
  check "$H reads the argv from ExecStartEx over D-Bus: yes, base64url-encoded" seen hide-busctl-ex encoded
  check "$H reads the argv from systemctl show -p ExecStart: yes, base64url-encoded" seen hide-show encoded
  check "$H reads the argv from /run/systemd/transient/<unit>: yes, base64url-encoded" seen hide-transient encoded
  check "$H reads /run/systemd/transient/<unit> of the launcher at its gate: yes, base64url-encoded" seen hide-gate-transient encoded
  for r in script monitor command child gate; do
    check "$H reads /proc/<pid>/cmdline of the $r: no, refused (invisible)" seen "hide-cmdline-$r" refused
    check "$H reads /proc/<pid>/environ of the $r: no, refused (invisible)" seen "hide-environ-$r" refused
  done
  check "$H sees the command's argv in ps: no (no process of byk listed)" sh -c '
    cat "$1"; ! grep -q "^ *[0-9]* byk " "$1" && ! grep -aqF -- "$2" "$1"' - "$tmp/hide-ps.out" "$marker"
  check "/proc back without hidepid" sh -c 'mount -o remount,hidepid=off /proc && grep "^proc /proc " /proc/self/mounts &&
    ! grep "^proc /proc " /proc/self/mounts | grep -q "hidepid=\(invisible\|2\)"'
else
  # Not counted: this container could not remount /proc (say so, measure nothing).
  fail "/proc remounted with hidepid=invisible (not available here: nothing under hidepid was measured)" "$(cat "$tmp/hidepid.log")"
fi

# --- the journal ------------------------------------------------------------------------------
as_user other journal journalctl -b --no-pager -o cat
check "another user's journalctl shows no copy of the argv (it sees only its own entries)" sh -c '
  echo "$(wc -l < "$1") lines; stderr: $(head -c 300 "$2")"; ! grep -aqF -e "$3" -e "$4" "$1" "$2"' - \
  "$tmp/journal.out" "$tmp/journal.err" "$marker" "$enc"
check "the system journal (read as root) holds no copy of the argv" sh -c '
  journalctl -b --no-pager -o export > "$1"; echo "$(grep -ac "^MESSAGE=" "$1") entries"
  ! grep -aF -e "$2" -e "$3" "$1"' - "$tmp/journal-root.txt" "$marker" "$enc"

# --- the end: the exposure lasts as long as the unit ------------------------------------------
touch "$tmp/gate.release" "$RUN/argv-done"
wait "$livepid"
wait "$gatepid"
cp "$tmp/live.json" /results/live.json
cp "$tmp/gate.log" /results/gate.log
check "the session ends on STOP with its exit envelope" python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); t = r.get("terminal") or {}
print(r.get("events"), t); sys.exit(0 if t.get("type") == "exit" else 1)' "$tmp/live.json"
check "the gate's launcher got no go and exited 123 (nothing ran), its unit is gone" sh -c '
  cat "$1"; journalctl --no-pager -o cat -u "$2" | grep "status="
  grep -q "gone True" "$1" && journalctl --no-pager -o cat -u "$2" | grep -q "code=exited, status=123"' - "$tmp/gate.log" "$gunit"
check "after the session: no PTY unit is left" wait_for 20 sh -c '[ -z "$(session_units)" ]'
check "after the session: its transient unit file is gone" sh -c 'ls -l /run/systemd/transient/; ! test -e "/run/systemd/transient/$1" && ! test -e "/run/systemd/transient/$2"' - "$u" "$gunit"
as_user other after-busctl busctl --system get-property org.freedesktop.systemd1 "$path" org.freedesktop.systemd1.Service ExecStart
check "after the session: another user reads no argv from ExecStart over D-Bus" seen after-busctl absent

# --- a hidepid= host still serves sessions --------------------------------------------------
# Not about argv, but what an operator of a hidepid= host must know: the
# supervisor reads the peer's /proc/<pid>/cgroup as uid 0 without any
# capability, which hidepid= would refuse; ProcSubset=pid gives it a procfs
# instance of its own (ProtectProc=default: no hidepid), so the host's /proc
# options do not reach it. Each probe restarts the supervisor under the mount
# (the socket starts it again) and runs one session.
if [ "$hidepid_ok" = 1 ]; then
  for opts in hidepid=invisible hidepid=invisible,gid=4242; do
    mount -o "remount,$opts" /proc
    systemctl stop opencode-pty-supervisor.service
    python3 "$STANDIN" call '{"argv":["sh","-c","echo hidepid-$((6*7)); exit 5"],"timeout":30}' > "$tmp/new-$opts.json" 2>&1
    cp "$tmp/new-$opts.json" "/results/new-$opts.json"
    check "$opts on /proc: a supervisor started under it serves a new session (output, exit 5): its own procfs (ProcSubset=pid) has no hidepid" sh -c '
      grep "^proc /proc " /proc/self/mounts
      sup=$(systemctl show -P MainPID opencode-pty-supervisor.service)
      echo "supervisor $sup: $(grep " /proc " /proc/$sup/mountinfo)"
      grep " /proc " /proc/$sup/mountinfo | grep -q "subset=pid" && ! grep " /proc " /proc/$sup/mountinfo | grep -q hidepid=invisible &&
      python3 -c "
import json, sys
r = json.load(open(sys.argv[1])); t = r.get(\"terminal\") or {}
print(r.get(\"events\"), t)
sys.exit(0 if \"hidepid-42\" in r.get(\"output_text\", \"\") and t.get(\"type\") == \"exit\" and t.get(\"code\") == 5 else 1)" "$1"' - "$tmp/new-$opts.json"
  done
  check "/proc back without hidepid (gid=0)" sh -c 'mount -o remount,hidepid=off,gid=0 /proc && grep "^proc /proc " /proc/self/mounts'
fi

checks_done
