#!/bin/sh
# vm-tests/launcher/launcher.sh: opencode-pty-launcher on a real systemd, as a
# real transient unit started over D-Bus (registered as vm.launcher.bookworm
# and vm.launcher.trixie). The build directory is /artifacts: the static
# launcher and tests/opencode_test_probe (the command that reports what it got).
. /vm-tests/lib/check.sh
A=/artifacts
L=/usr/local/libexec
PROBE_DIR=/usr/local/lib/opencode-pty-vmtest
here=$(dirname "$0")
echo "launcher: target ${VMTESTS_TARGET:-?}, $(systemctl --version | head -n1), kernel $(uname -r)"

if [ ! -f "$A/opencode-pty-launcher" ] || [ ! -f "$A/tests/opencode_test_probe" ]; then
  fail "artifacts: launcher and probe are built" "missing opencode-pty-launcher or tests/opencode_test_probe in /artifacts"
  checks_done
  exit 1
fi
pass "artifacts: launcher and probe are built" "$(sha256sum "$A/opencode-pty-launcher")"

# Installed exactly as in production: root:root 0755 under a root-owned libexec.
check "install the launcher root:root 0755" install -D -o root -g root -m 0755 "$A/opencode-pty-launcher" "$L/opencode-pty-launcher"
check "installed launcher is the artifact" cmp "$A/opencode-pty-launcher" "$L/opencode-pty-launcher"
check "installed launcher is owned by root and mode 0755" \
  sh -c 'test "$(stat -c %U:%G:%a "$1")" = root:root:755' - "$L/opencode-pty-launcher"
check "launcher is statically linked" sh -c '! grep -q "/lib64/ld-linux" "$1" && "$1" --exec </dev/null >/dev/null 2>&1; test $? -eq 119' - "$L/opencode-pty-launcher"
check "install the probe" install -D -o root -g root -m 0755 "$A/tests/opencode_test_probe" "$PROBE_DIR/probe"
check "the probe runs as byk" runuser -u byk -- sh -c "cd /tmp && $PROBE_DIR/probe >/dev/null && rm -f /tmp/probe-report"

for c in environment argv argv-bounds size exit input rejected nogo resize signals; do
  check "launcher unit: $c" python3 "$here/launcher_cases.py" "$c" "$PROBE_DIR/probe"
done

check "no opencode-pty-vmtest unit is left" \
  sh -c 'u=$(systemctl list-units --all --no-legend --plain "opencode-pty-vmtest-*"); echo "$u"; [ -z "$u" ]'
checks_done
