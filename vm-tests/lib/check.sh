# vm-tests/lib/check.sh: the check library for scripts run by vm-tests/run.
# POSIX sh; inside a target source it as  . /vm-tests/lib/check.sh
# Every check appends one line  PASS|FAIL<TAB>name<TAB>evidence  to
# $VMTESTS_RESULTS/checks.tsv (default /results/checks.tsv) and echoes it to
# the script's log. There is no "skip": a check that cannot run is a FAIL.

: "${VMTESTS_RESULTS:=/results}"
VMTESTS_CHECKS="$VMTESTS_RESULTS/checks.tsv"

# One line, no tabs, bounded: the TSV stays parseable whatever a tool printed.
_vt_oneline() {
  printf '%s' "$*" | tr -s '\t\n\r ' '    ' | cut -c1-400
}

_vt_record() { # STATUS NAME EVIDENCE
  _vt_name=$(_vt_oneline "$2")
  if [ -z "$_vt_name" ]; then
    _vt_name="(unnamed check)"
    set -- FAIL "$_vt_name" "check recorded without a name: $3"
  fi
  _vt_ev=$(_vt_oneline "$3")
  printf '%s\t%s\t%s\n' "$1" "$_vt_name" "$_vt_ev" >> "$VMTESTS_CHECKS" || {
    echo "check.sh: cannot write $VMTESTS_CHECKS" >&2
    return 1
  }
  printf '%s: %s%s\n' "$1" "$_vt_name" "${_vt_ev:+ -- $_vt_ev}"
}

pass() { _vt_record PASS "${1:-}" "${2:-}"; }
fail() { _vt_record FAIL "${1:-}" "${2:-}"; return 0; }

# check NAME CMD [ARG...]: PASS if CMD exits 0. Its output goes to the log and
# its first bytes into the evidence.
check() {
  _vt_cname=${1:-}
  [ $# -ge 2 ] || { fail "$_vt_cname" "check: no command given"; return 1; }
  shift
  _vt_out=$("$@" 2>&1)
  _vt_rc=$?
  [ -z "$_vt_out" ] || printf '%s\n' "$_vt_out" | sed 's/^/    | /'
  if [ "$_vt_rc" -eq 0 ]; then
    pass "$_vt_cname" "exit 0: $_vt_out"
  else
    fail "$_vt_cname" "exit $_vt_rc: $_vt_out"
    return 1
  fi
}

# check_fail NAME CMD [ARG...]: PASS if CMD runs and exits 1..125. Not found
# or not executable (126, 127) and death by a signal (>128) are FAILs: a
# command that could not run proves nothing about what it refuses.
check_fail() {
  _vt_cname=${1:-}
  [ $# -ge 2 ] || { fail "$_vt_cname" "check_fail: no command given"; return 1; }
  shift
  _vt_out=$("$@" 2>&1)
  _vt_rc=$?
  [ -z "$_vt_out" ] || printf '%s\n' "$_vt_out" | sed 's/^/    | /'
  if [ "$_vt_rc" -ge 1 ] && [ "$_vt_rc" -le 125 ]; then
    pass "$_vt_cname" "failed as expected, exit $_vt_rc: $_vt_out"
  else
    fail "$_vt_cname" "expected exit 1..125, got $_vt_rc: $_vt_out"
    return 1
  fi
}

# checks_done: prints the tally; returns non-zero if any check failed or if
# none was recorded at all (a script that proved nothing did not pass).
checks_done() {
  _vt_p=0 _vt_f=0
  if [ -f "$VMTESTS_CHECKS" ]; then
    _vt_p=$(grep -c '^PASS	' "$VMTESTS_CHECKS")
    _vt_f=$(grep -vc '^PASS	' "$VMTESTS_CHECKS")
  fi
  echo "checks: $_vt_p passed, $_vt_f failed"
  [ "$_vt_f" -eq 0 ] && [ "$_vt_p" -gt 0 ]
}
