# vm-tests/lib/supervisor-setup.sh: the installed stack for the suites that
# drive the supervisor through an application stand-in (supervisor/supervisor.sh,
# faults/faults.sh). POSIX sh; source it after check.sh, then call
#   supervisor_setup DESCRIPTION EXECSTART
# It installs the three built binaries root-owned in /usr/local/libexec and the
# supervisor's socket/service/slice units from /artifacts/units, writes a
# runtime opencode-v2.service (User=byk, RuntimeDirectory=opencode-test) whose
# MainPID is EXECSTART, starts the socket and the stand-in, and records the
# same checks for every suite. The stand-in serves /run/opencode-test/control.sock.

supervisor_setup() {
  _ss_desc=$1 _ss_exec=$2
  install -d -o root -g root -m 0755 /usr/local/libexec
  for _ss_b in supervisor launcher client; do
    check "install opencode-pty-$_ss_b root:root 0755" \
      install -o root -g root -m 0755 "/artifacts/opencode-pty-$_ss_b" "/usr/local/libexec/opencode-pty-$_ss_b"
  done
  _ss_units=/artifacts/units
  for _ss_u in opencode-pty-supervisor.socket opencode-pty-supervisor.service opencode-pty.slice; do
    [ -f "$_ss_units/$_ss_u" ] || _ss_units=$(dirname "$0")/units
  done
  for _ss_u in opencode-pty-supervisor.socket opencode-pty-supervisor.service opencode-pty.slice; do
    install -o root -g root -m 0644 "$_ss_units/$_ss_u" "/etc/systemd/system/$_ss_u"
  done
  pass "supervisor units installed" "from $_ss_units"
  # The application stand-in: its MainPID is the only process allowed in.
  cat > /run/systemd/system/opencode-v2.service <<UNIT
[Unit]
Description=opencode v2 stand-in ($_ss_desc)
[Service]
Type=exec
User=byk
Group=byk
RuntimeDirectory=opencode-test
RuntimeDirectoryMode=0755
ExecStart=$_ss_exec
UNIT
  systemctl daemon-reload
  check "socket unit starts" systemctl start opencode-pty-supervisor.socket
  check "socket is byk's, mode 0600" sh -c 'stat -c "%U %a" /run/opencode-pty/supervisor.sock; [ "$(stat -c "%U %a" /run/opencode-pty/supervisor.sock)" = "byk 600" ]'
  check "stand-in opencode-v2.service starts" systemctl start opencode-v2.service
  check "stand-in control socket appears" sh -c '
    n=100; while [ $n -gt 0 ] && ! [ -S /run/opencode-test/control.sock ]; do sleep 0.1; n=$((n - 1)); done
    test -S /run/opencode-test/control.sock'
}
