#!/bin/bash
# vm-tests/gate/gate.sh: the units, the installer, the readiness gate and
# cutover on a real systemd (run by vm-tests/run; registered as vm.gate.*).
# The build directory is /artifacts: the three binaries, the generated
# verifier, units/ and tools/ (copied there by the build).
#
# bookworm, trixie (containers, host kernel without Yama): the verifier must
#   deny a good marker with exactly the Yama reason; everything else runs.
# vm (Debian kernel with Yama): the good marker grants readiness,
#   opencode-v2.service really starts, and an approved cutover happens.
set -u
. /vm-tests/lib/check.sh
. /tests/marker-cases.sh

A=/artifacts
L=/usr/local/libexec
M=/etc/opencode/pty-supervisor-verified
V=$L/opencode-pty-verify-readiness
APP=opencode-v2.service
OLD=opencode-old.service
REPORT=/var/lib/opencode-pty/acceptance/report.json
YAMA=/proc/sys/kernel/yama/ptrace_scope

case "${VMTESTS_TARGET:-}" in
  bookworm|trixie) expect=no-yama ;;
  vm) expect=ready ;;
  *) fail "gate: VMTESTS_TARGET is '${VMTESTS_TARGET:-}'"; checks_done; exit 1 ;;
esac
echo "gate: target $VMTESTS_TARGET, $(systemctl --version | head -n1), kernel $(uname -r)"

# ---------------------------------------------------------------- artifacts
missing=
for f in opencode-pty-supervisor opencode-pty-launcher opencode-pty-client opencode-pty-verify-readiness \
         units/opencode-pty-supervisor.socket units/opencode-pty-supervisor.service units/opencode-pty.slice \
         units/opencode-v2.service units/60-opencode-pty-yama.conf tools/install tools/write-marker tools/cutover; do
  [ -f "$A/$f" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
  fail "artifacts: the build directory has everything" "missing in /artifacts:$missing (build all targets first)"
  checks_done; exit 1
fi
pass "artifacts: the build directory has everything" "$(cd "$A" && sha256sum opencode-pty-supervisor opencode-pty-launcher opencode-pty-client | tr '\n' ';')"

if [ "$expect" = no-yama ]; then
  if [ -e "$YAMA" ]; then fail "kernel: no Yama in the container (as the expectations assume)" "$YAMA exists"
  else pass "kernel: no Yama in the container (as the expectations assume)"; fi
else
  if [ -e "$YAMA" ]; then pass "kernel: Yama present in the VM" "ptrace_scope $(cat $YAMA)"
  else fail "kernel: Yama present in the VM" "$YAMA is absent"; fi
fi

# What install may touch: /usr/local, /etc/systemd/system, /etc/sysctl.d, /var/lib/opencode-pty.
snap() { find /usr/local /etc/systemd/system /etc/sysctl.d /var/lib/opencode-pty -xdev -printf '%p %y %m %U:%G\n' 2>/dev/null | LC_ALL=C sort; }
before=$(snap)

# ------------------------------------------------------------------ install
check "install: tools/install --from /artifacts" "$A/tools/install" --from "$A"
bad=
for x in "$L/opencode-pty-supervisor 755 opencode-pty-supervisor" "$L/opencode-pty-launcher 755 opencode-pty-launcher" \
         "$L/opencode-pty-client 755 opencode-pty-client" "$V 755 opencode-pty-verify-readiness" \
         "/etc/systemd/system/opencode-pty-supervisor.socket 644 units/opencode-pty-supervisor.socket" \
         "/etc/systemd/system/opencode-pty-supervisor.service 644 units/opencode-pty-supervisor.service" \
         "/etc/systemd/system/opencode-pty.slice 644 units/opencode-pty.slice" \
         "/etc/systemd/system/$APP 644 units/opencode-v2.service" \
         "/etc/sysctl.d/60-opencode-pty-yama.conf 644 units/60-opencode-pty-yama.conf"; do
  set -- $x
  got=$(stat -c '%U:%G %a %F' "$1" 2>&1)
  [ "$got" = "root:root $2 regular file" ] && cmp -s "$1" "$A/$3" || bad="$bad $1($got)"
done
if [ -z "$bad" ]; then pass "install: section 2 layout, root:root, exact modes and content"; else fail "install: section 2 layout, root:root, exact modes and content" "$bad"; fi
out=$("$A/tools/install" --from "$A" 2>&1)
if [ "$(printf '%s\n' "$out" | grep -c ' unchanged ')" -eq 9 ] && ! printf '%s' "$out" | grep -q ' installed '; then
  pass "install: a second run changes nothing"; else fail "install: a second run changes nothing" "$out"; fi
if [ "$expect" = ready ]; then
  if [ "$(cat $YAMA)" = 2 ]; then pass "install: applied kernel.yama.ptrace_scope = 2"; else fail "install: applied kernel.yama.ptrace_scope = 2" "$(cat $YAMA)"; fi
fi
chmod 0775 /usr/local
check_fail "install: refuses a group-writable /usr/local" "$A/tools/install" --from "$A"
chmod 0755 /usr/local

# The application binary the reference unit names; a stand-in here.
install -d -m 0755 /usr/local/bin
printf '#!/bin/sh\nexec /bin/sleep infinity\n' > /usr/local/bin/opencode-v2
chmod 0755 /usr/local/bin/opencode-v2

# ------------------------------------------------------------- units, verify
for u in opencode-pty-supervisor.socket opencode-pty-supervisor.service opencode-pty.slice $APP; do
  out=$(systemd-analyze verify "/etc/systemd/system/$u" 2>&1); rc=$?
  if [ "$rc" -eq 0 ] && [ -z "$out" ]; then pass "units: systemd-analyze verify $u: no warnings"
  else fail "units: systemd-analyze verify $u: no warnings" "exit $rc: $out"; fi
done
out=$(systemd-analyze verify /etc/systemd/system/opencode-pty-supervisor.socket /etc/systemd/system/opencode-pty-supervisor.service \
      /etc/systemd/system/opencode-pty.slice /etc/systemd/system/$APP 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ -z "$out" ]; then pass "units: systemd-analyze verify of all four together: no warnings"
else fail "units: systemd-analyze verify of all four together: no warnings" "exit $rc: $out"; fi

systemd-analyze security opencode-pty-supervisor.service > /results/security-supervisor.txt 2>&1
exposure=$(sed -n 's/.*Overall exposure level for opencode-pty-supervisor.service: \([0-9.]*\) .*/\1/p' /results/security-supervisor.txt)
echo "gate: systemd-analyze security opencode-pty-supervisor.service:"
grep -E '^✗|Overall' /results/security-supervisor.txt | sed 's/^/    /'
if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
  pass "units: supervisor exposure $exposure <= 2.0 (systemd-analyze security)" "$(grep -c '^✗' /results/security-supervisor.txt) exposures left"
else
  fail "units: supervisor exposure <= 2.0 (systemd-analyze security)" "exposure '$exposure'"
fi

prop() { systemctl show -p "$2" --value "$1"; }
want_props="Slice=system.slice Type=notify NotifyAccess=main User=root CapabilityBoundingSet= AmbientCapabilities= NoNewPrivileges=yes RestrictAddressFamilies=AF_UNIX PrivateNetwork=yes ProtectSystem=strict ProtectProc=default MemoryMax=3221225472"
bad=
for kv in $want_props; do
  k=${kv%%=*} v=${kv#*=}
  got=$(prop opencode-pty-supervisor.service "$k")
  [ "$got" = "$v" ] || bad="$bad $k='$got'"
done
if [ -z "$bad" ]; then pass "units: supervisor properties as loaded by systemd" "$want_props"; else fail "units: supervisor properties as loaded by systemd" "$bad"; fi
if [ "$(prop opencode-pty.slice TasksMax)" = 8192 ]; then pass "units: opencode-pty.slice TasksMax=8192"; else fail "units: opencode-pty.slice TasksMax=8192" "$(prop opencode-pty.slice TasksMax)"; fi
# The sessions are one CPU group against the supervisor and the application (issue #30).
if [ "$(prop opencode-pty.slice CPUWeight)" = 100 ]; then pass "units: opencode-pty.slice CPUWeight=100"; else fail "units: opencode-pty.slice CPUWeight=100" "$(prop opencode-pty.slice CPUWeight)"; fi
if [ "$(prop $APP ExecCondition | grep -o 'path=[^ ;]*')" = "path=$V" ] && [ "$(prop $APP User)" = byk ]; then
  pass "units: $APP has ExecCondition=$V and User=byk"; else fail "units: $APP has ExecCondition=$V and User=byk" "$(prop $APP ExecCondition)"; fi

# ------------------------------------------------------------------ socket
connect_as() { # USER: connect() to the supervisor socket as USER
  runuser -u "$1" -- python3 -c 'import socket,sys
s=socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("/run/opencode-pty/supervisor.sock")'
}
check "socket: opencode-pty-supervisor.socket starts" systemctl start opencode-pty-supervisor.socket
got=$(stat -c '%U:%G %a %F' /run/opencode-pty/supervisor.sock 2>&1)
if [ "$got" = "byk:byk 600 socket" ]; then pass "socket: /run/opencode-pty/supervisor.sock is byk:byk 0600"; else fail "socket: /run/opencode-pty/supervisor.sock is byk:byk 0600" "$got"; fi
got=$(stat -c '%U:%G %a' /run/opencode-pty 2>&1)
if [ "$got" = "root:root 755" ]; then pass "socket: /run/opencode-pty is root:root 0755"; else fail "socket: /run/opencode-pty is root:root 0755" "$got"; fi
check_fail "socket: user other cannot connect" connect_as other
check "socket: user byk can connect (this activates the supervisor)" connect_as byk
sleep 1
pid=$(prop opencode-pty-supervisor.service MainPID)
if [ "${pid:-0}" != 0 ] && [ -r "/proc/$pid/status" ]; then
  caps=$(awk '/^(Uid|CapEff|CapBnd|CapPrm|CapAmb|NoNewPrivs|Seccomp):/ { printf "%s%s ", $1, $2 }' "/proc/$pid/status")
  cg=$(cat "/proc/$pid/cgroup")
  case "$caps" in
    *"Uid:0 "*"CapPrm:0000000000000000 CapEff:0000000000000000 CapBnd:0000000000000000 CapAmb:0000000000000000 NoNewPrivs:1 Seccomp:2 "*)
      case "$cg" in *system.slice/opencode-pty-supervisor.service*) pass "supervisor: socket-activated, uid 0, no capability, NoNewPrivs, seccomp, in system.slice" "$caps $cg" ;;
                    *) fail "supervisor: socket-activated, uid 0, no capability, NoNewPrivs, seccomp, in system.slice" "cgroup $cg" ;; esac ;;
    *) fail "supervisor: socket-activated, uid 0, no capability, NoNewPrivs, seccomp, in system.slice" "$caps" ;;
  esac
else
  fail "supervisor: socket-activated, uid 0, no capability, NoNewPrivs, seccomp, in system.slice" \
    "not running: $(systemctl status --no-pager opencode-pty-supervisor.service 2>&1 | tail -n 5 | tr '\n' ';')"
fi
# The documented way to serve another user: a drop-in with SocketUser=/SocketGroup=.
mkdir -p /run/systemd/system/opencode-pty-supervisor.socket.d
printf '[Socket]\nSocketUser=other\nSocketGroup=other\n' > /run/systemd/system/opencode-pty-supervisor.socket.d/user.conf
systemctl daemon-reload
systemctl stop opencode-pty-supervisor.service opencode-pty-supervisor.socket
systemctl start opencode-pty-supervisor.socket
got=$(stat -c '%U:%G %a' /run/opencode-pty/supervisor.sock 2>&1)
if [ "$got" = "other:other 600" ]; then pass "socket: a SocketUser=/SocketGroup= drop-in hands the socket to another user"; else fail "socket: a SocketUser=/SocketGroup= drop-in hands the socket to another user" "$got"; fi
rm -rf /run/systemd/system/opencode-pty-supervisor.socket.d
systemctl daemon-reload
systemctl stop opencode-pty-supervisor.service opencode-pty-supervisor.socket

# ------------------------------------------------- marker cases, real paths
GATE_LIBEXEC=$L
GATE_MARKER_DIR=/etc/opencode
GATE_PRISTINE=$A
GATE_APP_UID=$(id -u byk)
GATE_EXPECT_GOOD=$expect
GATE_YAMA_FILE=
[ "$expect" = ready ] && GATE_YAMA_FILE=$YAMA
install -d -o root -g root -m 0755 /etc/opencode
run_marker_cases

# The denial also reaches the journal when stderr is not the journal.
gate_reset; rm -f "$M"; gate_run
journalctl --sync 2>/dev/null || sleep 1
if journalctl -t opencode-pty-verify-readiness -o cat --no-pager | grep -qxF "not ready: marker $M is absent"; then
  pass "journal: a denial run by hand is logged (logger -t opencode-pty-verify-readiness)"
else
  fail "journal: a denial run by hand is logged (logger -t opencode-pty-verify-readiness)" "$(journalctl -t opencode-pty-verify-readiness -o cat --no-pager | tail -n 3 | tr '\n' ';')"
fi

# --------------------------------------------- systemd skips / starts the app
unit_state() { printf '%s/%s/%s' "$(prop $APP ActiveState)" "$(prop $APP SubState)" "$(prop $APP Result)"; }
# unit_journal_after CURSOR: the messages of $APP and of PID 1 about it after
# CURSOR. Filtered here: journalctl 252 drops the first matching entry when
# --after-cursor is combined with matches such as -u.
unit_journal_after() {
  journalctl --no-pager --after-cursor="$1" -o json | python3 -c '
import json, sys
app = sys.argv[1]
for line in sys.stdin:
    e = json.loads(line)
    if e.get("_SYSTEMD_UNIT") == app or (e.get("_PID") == "1" and e.get("UNIT") == app):
        m = e.get("MESSAGE")
        print(m if isinstance(m, str) else bytes(m or []).decode("utf-8", "replace"))' "$APP"
}
skipped_with() { # NAME REASON: start the app; it must be skipped (not failed) with REASON in its journal exactly once
  local name=$1 reason=$2 cursor n st
  cursor=$(journalctl -n 0 --show-cursor --no-pager 2>/dev/null | sed -n 's/^-- cursor: //p')
  systemctl start $APP; local rc=$?
  sleep 0.5
  journalctl --sync 2>/dev/null || true
  st=$(prop $APP ActiveState)/$(prop $APP SubState)
  n=$(unit_journal_after "$cursor" | grep -cF "opencode-pty-verify-readiness: not ready: $reason")
  skip=$(unit_journal_after "$cursor" | grep -cF "Skipped due to 'exec-condition'")
  if [ "$rc" -eq 0 ] && [ "$st" = "inactive/dead" ] && ! systemctl -q is-failed $APP && [ "$n" -eq 1 ] && [ "$skip" -eq 1 ]; then
    pass "$name" "systemctl start exit 0, $st, not failed, systemd: skipped due to exec-condition, reason in the unit's journal once"
  else
    fail "$name" "start exit $rc, state $st, reason lines $n, skip lines $skip: $(unit_journal_after "$cursor" | tail -n 3 | tr '\n' ';')"
  fi
}
gate_reset; rm -f "$M"
skipped_with "systemd: $APP is skipped (not failed) without a marker" "marker $M is absent"
gate_reset; marker_edit '4d'
skipped_with "systemd: $APP is skipped with a 3-line marker" "marker has 3 lines, not 4"
gate_reset; chmod 0757 /usr/local/libexec
skipped_with "systemd: $APP is skipped with a world-writable libexec" "/usr/local/libexec is writable by group or other"
gate_reset
if [ "$expect" = no-yama ]; then
  skipped_with "systemd: $APP is skipped with a good marker on a kernel without Yama" "Yama is not active in this kernel"
else
  echo 1 > $YAMA
  skipped_with "systemd: $APP is skipped with a good marker and ptrace_scope 1" "Yama ptrace_scope is 1, need 2"
  echo 2 > $YAMA
  gate_reset
  systemctl start $APP; rc=$?
  sleep 0.5
  st=$(unit_state); pid=$(prop $APP MainPID)
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null); uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
  if [ "$rc" -eq 0 ] && [ "$st" = "active/running/success" ] && [ "$exe" = /usr/bin/sleep ] && [ "$uid" = "$(id -u byk)" ]; then
    pass "systemd: $APP really starts with a good marker (ExecCondition passed)" "$st MainPID $pid $exe uid $uid"
  else
    fail "systemd: $APP really starts with a good marker (ExecCondition passed)" "exit $rc $st MainPID $pid exe $exe uid $uid"
  fi
  systemctl stop $APP
fi

# ------------------------------------------------------------------ cutover
gate_reset
cat > /etc/systemd/system/$OLD <<'EOF'
[Unit]
Description=stand-in for the application service cutover replaces
[Service]
ExecStart=/bin/sleep infinity
[Install]
WantedBy=multi-user.target
EOF
systemctl daemon-reload
systemctl enable -q --now $OLD
sha() { sha256sum "$L/$1" | cut -c1-64; }
rev=$(gate_revision)
# The application SEA the report names: here the fixture at the reference
# unit's ExecStart (cutover's default --sea).
sea_sha=$(sha256sum /usr/local/bin/opencode-v2 | cut -c1-64)
# write_report RESULT CHECKRESULT SUPERVISOR-HASH REVISION [MODE] [OWNER] [SEA-HASH] [NODE] [GATE-SATISFIED]
write_report() {
  install -d -m 0755 /var/lib/opencode-pty/acceptance
  printf '{"revision": "%s", "artifacts": {"supervisor": "%s", "launcher": "%s", "client": "%s", "sea": "%s"}, "versions": {"node_sea": "%s"}, "node_sea_gate": {"node_version": "%s", "satisfied": %s, "sea_sha256": "%s"}, "result": "%s", "checks": [{"name": "fixture one", "result": "pass"}, {"name": "fixture two", "result": "%s"}]}\n' \
    "$4" "$3" "$(sha opencode-pty-launcher)" "$(sha opencode-pty-client)" "${7:-$sea_sha}" "${8:-v26.4.0}" "${8:-v26.4.0}" "${9:-true}" "${7:-$sea_sha}" "$1" "$2" > $REPORT
  chmod "${5:-0644}" $REPORT; chown "${6:-root}:root" $REPORT
}
good_report() { write_report pass pass "$(sha opencode-pty-supervisor)" "$rev"; }
# refused NAME TEXT ARGS...: cutover exits 1 with one "refused" line containing TEXT, and nothing changed.
refused() {
  local name=$1 text=$2 out rc; shift 2
  out=$("$A/tools/cutover" "$@" 2>&1); rc=$?
  if [ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] &&
     case $out in "cutover: refused: "*"$text"*) true ;; *) false ;; esac &&
     systemctl -q is-active $OLD && ! systemctl -q is-active $APP && ! systemctl -q is-enabled $APP; then
    pass "$name" "$out"
  else
    fail "$name" "exit $rc: $out; old $(systemctl is-active $OLD), app $(systemctl is-active $APP)"
  fi
}
good_report
refused "cutover: refuses without --approve" "pass --approve" --old-unit $OLD
refused "cutover: refuses without --old-unit" "--old-unit NAME" --approve
refused "cutover: refuses an old unit that is not loaded" "is not loaded" --approve --old-unit opencode-typo.service
rm -f $REPORT
refused "cutover: refuses without an acceptance report" "is missing" --approve --old-unit $OLD
write_report fail pass "$(sha opencode-pty-supervisor)" "$rev"
refused "cutover: refuses a failing acceptance report" 'result is "fail"' --approve --old-unit $OLD
write_report pass fail "$(sha opencode-pty-supervisor)" "$rev"
refused "cutover: refuses a report with a failing check" 'check "fixture two" is "fail"' --approve --old-unit $OLD
write_report pass pass "$(other_hex 64)" "$rev"
refused "cutover: refuses a report for other hashes" "artifacts.supervisor is" --approve --old-unit $OLD
write_report pass pass "$(sha opencode-pty-supervisor)" "revision=opencode-v2-pilot:git:$(other_hex 40);pty-source:sha256:$(other_hex 64)"
refused "cutover: refuses a report for another revision" "is not this build's" --approve --old-unit $OLD
write_report pass pass "$(sha opencode-pty-supervisor)" "$rev" 0664
refused "cutover: refuses a group-writable report" "writable by group or other" --approve --old-unit $OLD
write_report pass pass "$(sha opencode-pty-supervisor)" "$rev" 0644 byk
refused "cutover: refuses a report owned by the application user" "owned by uid" --approve --old-unit $OLD
write_report pass pass "$(sha opencode-pty-supervisor)" "$rev" 0644 root "$(other_hex 64)"
refused "cutover: refuses a report of another SEA (its hash is not the installed one's)" "artifacts.sea is" --approve --old-unit $OLD
write_report pass pass "$(sha opencode-pty-supervisor)" "$rev" 0644 root "$sea_sha" v20.20.2 false
refused "cutover: refuses a report of a Node 20 SEA" 'runs Node "v20.20.2", not Node 26.4' --approve --old-unit $OLD
write_report pass pass "$(sha opencode-pty-supervisor)" "$rev" 0644 root "$sea_sha" v20.20.2 true
refused "cutover: refuses a report of a Node 20 SEA that claims the gate" 'runs Node "v20.20.2", not Node 26.4' --approve --old-unit $OLD
write_report pass pass "$(sha opencode-pty-supervisor)" "$rev" 0644 root "$sea_sha" v26.4.0 false
refused "cutover: refuses a Node 26.4 report whose SEA gate is not satisfied" "node_sea_gate is not satisfied" --approve --old-unit $OLD
good_report
refused "cutover: refuses when --sea names another file than the reported SEA" "artifacts.sea is" --approve --old-unit $OLD --sea $L/opencode-pty-client
rm -f $REPORT; echo 'not json' > $REPORT
refused "cutover: refuses a report that is not JSON" "not valid JSON" --approve --old-unit $OLD
good_report
rm -f "$M"
refused "cutover: refuses while the marker is absent" "readiness marker does not verify: marker $M is absent" --approve --old-unit $OLD
gate_reset; good_report; marker_edit "2s/^[0-9a-f]\{64\}/$(other_hex 64)/"
refused "cutover: refuses while the marker names other hashes" "readiness marker does not verify: marker hash of" --approve --old-unit $OLD
gate_reset; good_report
if [ "$expect" = no-yama ]; then
  refused "cutover: refuses on a kernel without Yama (the verifier denies)" "Yama is not active" --approve --old-unit $OLD
else
  # Rollback: the app cannot start (an ExecStartPre that fails), so cutover undoes itself.
  mkdir -p /run/systemd/system/$APP.d
  printf '[Service]\nExecStartPre=/bin/false\n' > /run/systemd/system/$APP.d/fail.conf
  systemctl daemon-reload
  out=$("$A/tools/cutover" --approve --old-unit $OLD 2>&1); rc=$?
  # Restart=on-failure of the app must not bring it back after the rollback.
  sleep 4
  if [ "$rc" -eq 1 ] && printf '%s' "$out" | grep -q "rolled back to $OLD" && systemctl -q is-active $OLD &&
     systemctl -q is-enabled $OLD && ! systemctl -q is-enabled $APP && ! systemctl -q is-active $APP; then
    pass "cutover: rolls back when $APP does not become active (and it stays down)" "$(printf '%s' "$out" | tail -n1)"
  else
    fail "cutover: rolls back when $APP does not become active (and it stays down)" "exit $rc: $out; app $(systemctl is-active $APP)"
  fi
  rm -rf /run/systemd/system/$APP.d; systemctl daemon-reload; systemctl reset-failed $APP 2>/dev/null
  gate_reset; good_report
  out=$("$A/tools/cutover" --approve --old-unit $OLD 2>&1); rc=$?
  if [ "$rc" -eq 0 ] && ! systemctl -q is-active $OLD && ! systemctl -q is-enabled $OLD &&
     systemctl -q is-active $APP && systemctl -q is-enabled $APP; then
    pass "cutover: approved cutover stops and disables the old unit, enables and starts $APP" "$(printf '%s' "$out" | tr '\n' ';')"
  else
    fail "cutover: approved cutover stops and disables the old unit, enables and starts $APP" "exit $rc: $out"
  fi
  refused_active=$("$A/tools/install" --uninstall 2>&1); rc=$?
  if [ "$rc" -eq 1 ] && printf '%s' "$refused_active" | grep -q "$APP is active"; then
    pass "uninstall: refuses while $APP is active" "$refused_active"; else fail "uninstall: refuses while $APP is active" "exit $rc: $refused_active"; fi
  systemctl stop $APP
fi

# ---------------------------------------------------------------- uninstall
systemctl disable -q --now $OLD; rm -f /etc/systemd/system/$OLD
rm -rf /var/lib/opencode-pty/acceptance /etc/opencode /usr/local/bin/opencode-v2
systemctl daemon-reload
check "uninstall: tools/install --uninstall" "$A/tools/install" --uninstall
after=$(snap)
if [ "$after" = "$before" ]; then pass "uninstall: /usr/local, /etc/systemd/system, /etc/sysctl.d, /var/lib/opencode-pty exactly as before install"
else fail "uninstall: /usr/local, /etc/systemd/system, /etc/sysctl.d, /var/lib/opencode-pty exactly as before install" "$(diff <(echo "$before") <(echo "$after") | head -n 20 | tr '\n' ';')"; fi
if [ "$(prop opencode-pty-supervisor.socket LoadState)" = not-found ] && [ "$(prop $APP LoadState)" = not-found ]; then
  pass "uninstall: systemd no longer knows the units"; else fail "uninstall: systemd no longer knows the units" "$(prop $APP LoadState)"; fi

gate_cleanup
checks_done
