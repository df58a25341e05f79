# tests/gate/check.sh: the host-side twin of vm-tests/lib/check.sh (same
# functions: pass, fail, check, check_fail, checks_done), so that the gate's
# case library runs unchanged on the host and in the harness. Each result is
# one line PASS|FAIL<TAB>name<TAB>evidence in $GATE_CHECKS and on stdout.
GATE_CHECKS=$(mktemp)

_gc_record() {
  local ev
  ev=$(printf '%s' "$3" | tr '\t\n\r' '   ' | cut -c1-400)
  printf '%s\t%s\t%s\n' "$1" "$2" "$ev" >> "$GATE_CHECKS"
  printf '%s: %s%s\n' "$1" "$2" "${ev:+ -- $ev}"
}
pass() { _gc_record PASS "${1:-(unnamed)}" "${2:-}"; }
fail() { _gc_record FAIL "${1:-(unnamed)}" "${2:-}"; return 0; }
check() {
  local name=$1 out rc; shift
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq 0 ]; then pass "$name" "$out"; else fail "$name" "exit $rc: $out"; return 1; fi
}
check_fail() {
  local name=$1 out rc; shift
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ge 1 ] && [ "$rc" -le 125 ]; then pass "$name" "exit $rc: $out"
  else fail "$name" "expected exit 1..125, got $rc: $out"; return 1; fi
}
checks_done() {
  local p f
  p=$(grep -c '^PASS	' "$GATE_CHECKS")
  f=$(grep -vc '^PASS	' "$GATE_CHECKS")
  rm -f "$GATE_CHECKS"
  echo "checks: $p passed, $f failed"
  [ "$f" -eq 0 ] && [ "$p" -gt 0 ]
}
