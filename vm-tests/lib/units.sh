# vm-tests/lib/units.sh: the PTY session units as systemd lists them (sourced,
# POSIX sh), for every suite that checks that none is left, and the hang-guarded
# wait the suites share.
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
# gone UNIT: systemd no longer knows the unit (GetUnit -> NoSuchUnit) and
# does not list it; prints GetUnit's answer.
gone() {
  _vt_out=$(busctl --system call org.freedesktop.systemd1 /org/freedesktop/systemd1 \
        org.freedesktop.systemd1.Manager GetUnit s "$1" 2>&1)
  echo "$_vt_out"
  case "$_vt_out" in *"not loaded"*|*NoSuchUnit*) ! session_units | grep -qx "$1" ;; *) return 1 ;; esac
}
# wait_for SECONDS CMD...: until CMD succeeds (a hang guard: SECONDS is never
# a pass/fail bound of its own); on time-out CMD once more, for its output and
# status.
wait_for() {
  _vt_n=$(($1 * 10)); shift
  while [ "$_vt_n" -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; _vt_n=$((_vt_n - 1)); done
  "$@"
}
