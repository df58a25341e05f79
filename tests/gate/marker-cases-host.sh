#!/bin/bash
# marker-cases-host.sh VERIFIER: every readiness-marker case
# (vm-tests/gate/marker-cases.sh) on the host, on real root-owned files under
# a private root in /run. The verifier under test is the built one with
# exactly its four path lines (LIBEXEC, MARKER_DIR, YAMA_PTRACE_SCOPE,
# KERNEL_OSRELEASE) pointed into that root; the Yama and kernel-release files
# are plain files the test controls, so the "ready" verdict, weaker Yama
# values and kernels without SO_PEERPIDFD are exercised here too. The
# same cases run on the real paths in the harness (vm.gate.*).
# Needs root (ownership is part of every case): exit 77 (ctest: skipped) otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
verifier=${1:?usage: marker-cases-host.sh VERIFIER}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (the cases chown files to root and to another uid)"; exit 77; }
command -v dash >/dev/null || { echo "FAIL: dash is not installed"; exit 1; }
. "$here/check.sh"
. "$here/../../vm-tests/gate/marker-cases.sh"

R=$(mktemp -d /run/opencode-gate-test.XXXXXX) || { echo "FAIL: cannot make a directory in /run"; exit 1; }
trap 'gate_cleanup 2>/dev/null; rm -rf -- "$R"' EXIT
chmod 0755 "$R"
mkdir -p "$R/usr/local/libexec" "$R/etc/opencode" "$R/pristine"
chmod 0755 "$R/usr" "$R/usr/local" "$R/usr/local/libexec" "$R/etc" "$R/etc/opencode"

# Three distinct stand-in binaries (the cases are about the marker, not the code).
for b in $GATE_BINS; do
  { cat /bin/true; printf '%s' "$b"; } > "$R/pristine/$b"
done
sed -e "s#^LIBEXEC=/usr/local/libexec\$#LIBEXEC=$R/usr/local/libexec#" \
    -e "s#^MARKER_DIR=/etc/opencode\$#MARKER_DIR=$R/etc/opencode#" \
    -e "s#^YAMA_PTRACE_SCOPE=/proc/sys/kernel/yama/ptrace_scope\$#YAMA_PTRACE_SCOPE=$R/yama_ptrace_scope#" \
    -e "s#^KERNEL_OSRELEASE=/proc/sys/kernel/osrelease\$#KERNEL_OSRELEASE=$R/osrelease#" \
    "$verifier" > "$R/usr/local/libexec/opencode-pty-verify-readiness"
changed=$(diff "$verifier" "$R/usr/local/libexec/opencode-pty-verify-readiness" | grep -c '^>')
if [ "$changed" -eq 4 ]; then
  pass "host: the test copy of the verifier differs in exactly its 4 path lines"
else
  fail "host: the test copy of the verifier differs in exactly its 4 path lines" "$changed lines differ"
fi

GATE_LIBEXEC=$R/usr/local/libexec
GATE_MARKER_DIR=$R/etc/opencode
GATE_PRISTINE=$R/pristine
GATE_APP_UID=4242
GATE_EXPECT_GOOD=ready
GATE_YAMA_FILE=$R/yama_ptrace_scope
echo 2 > "$GATE_YAMA_FILE"
GATE_KERNEL_FILE=$R/osrelease
echo 6.12.57+deb13-amd64 > "$GATE_KERNEL_FILE"
run_marker_cases

# The kernel release absent (not a Linux /proc): denied, never skipped.
gate_reset; rm -f "$GATE_KERNEL_FILE"
expect_deny "kernel: release file absent" "cannot read $GATE_KERNEL_FILE"
gate_reset
# The kernel check comes before Yama: a 6.1 kernel without Yama names the kernel.
gate_reset; echo 6.1.0-28-amd64 > "$GATE_KERNEL_FILE"; rm -f "$GATE_YAMA_FILE"
expect_deny "kernel: 6.1 without Yama is denied for the kernel first (one reason)" "kernel 6.1.0-28-amd64 has no SO_PEERPIDFD"
gate_reset

# Yama cases that need a fake file: absent, and not a number.
gate_reset; rm -f "$GATE_YAMA_FILE"
expect_deny "yama: absent from the kernel" "Yama is not active in this kernel"
gate_reset; echo 3 > "$GATE_YAMA_FILE"
expect_ready "yama: ptrace_scope 3 is stronger than 2"
gate_reset; printf 2 > "$GATE_YAMA_FILE"
expect_ready "yama: 2 without a newline (/proc/sys ends a byte-wise read early)"
gate_reset; echo x > "$GATE_YAMA_FILE"
expect_deny "yama: not a number" "unexpected Yama ptrace_scope value"
gate_reset

# The verifier's place itself: /run/<test root> is fine, a world-writable
# ancestor (like /tmp) is not.
gate_reset; chmod 1777 "$R"
expect_deny "dir: an ancestor sticky and world-writable" "$R is writable by group or other (mode 1777)"
chmod 0755 "$R"
gate_reset; expect_ready "final: good marker again after every case"

checks_done
