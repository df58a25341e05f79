# vm-tests/lib/units.sh: the PTY session units as systemd lists them (sourced,
# POSIX sh), for every suite that checks that none is left.
# opencode-pty-supervisor.service matches the glob too: only the session
# units' exact name shape, opencode-pty-<32 hex>.service, is kept.
session_units() {
  systemctl list-units --all --plain --no-legend 'opencode-pty-*.service' | awk '{print $1}' |
    grep -E '^opencode-pty-[0-9a-f]{32}\.service$'
}
# Succeeds when no session unit is listed; otherwise names the ones left.
no_session_units() {
  _vt_units=$(session_units)
  [ -z "$_vt_units" ] || { echo "left: $_vt_units"; return 1; }
  echo "no opencode-pty-<32 hex>.service unit"
}
