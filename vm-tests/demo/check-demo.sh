#!/bin/bash
# vm-tests/demo/check-demo.sh BUILD_DIR: ctest vm.demo.bookworm. Runs the
# README's demo command (tools/demo) non-interactively against BUILD_DIR (no
# apt, no build: ctest runs after both) and checks what it printed: the
# transcript of a real PTY, the exit status, the operator's view of the live
# unit, the supervisor's journal lines, and that no unit was left.
set -uo pipefail
src=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$src/tools/demo" --scripted --no-deps --no-build --build-dir "$1" < /dev/null > "$out" 2>&1
rc=$?
cat "$out"
bad=0
expect() { # NAME REGEX
  if grep -Eq -- "$2" "$out"; then echo "demo check: ok   $1"; else echo "demo check: FAIL $1 (no line matching /$2/)"; bad=1; fi
}
expect "tools/demo exited 0" '^\[demo\] demo done'
expect "install: tools/install laid out the supervisor" 'install: (installed|unchanged) /usr/local/libexec/opencode-pty-supervisor'
expect "the verifier's refusal is shown, not hidden" '^  opencode-pty-verify-readiness: not ready: '
expect "operator view: the live unit in systemctl list-units" '^ +opencode-pty-[0-9a-f]{32}\.service +loaded +active +running'
expect "operator view: busctl shows User and Slice of the unit" '^  s "opencode-pty\.slice"'
expect "operator view: the unit's MainPID over D-Bus" '^\$ busctl --system get-property .* MainPID User Slice'
expect "transcript: the command's output from a real tty as byk" '^  \| hello from /dev/pts/[0-9]+ as byk in /home/byk'
expect "transcript: the window size passed at start" '^  \| 30 100'
expect "exit status 3" '^exit status: exit code 3, signal None, result exit-code'
expect "journal: the supervisor's lines for the session" 'opencode-pty-supervisor\[[0-9]+\]: .*(started|proven gone)'
expect "journal: structured SESSION= field" '^  SESSION=[0-9a-f]{32}'
expect "after the session no unit is left" '^no opencode-pty-<32 hex>\.service unit is left'
expect "vm-tests summary PASS" '^\[vm-tests\] bookworm: PASS'
[ "$rc" = 0 ] || { echo "tools/demo exit $rc"; bad=1; }
exit $bad
