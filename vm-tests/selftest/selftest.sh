#!/bin/sh
# vm-tests self-test: proves the harness itself inside a target (bookworm,
# trixie, vm): a real systemd is PID 1 with a real system bus, units can be
# verified, a transient unit with passed descriptors and User= works, and
# systemd puts each property the supervisor relies on on its exact interface.
. /vm-tests/lib/check.sh
here=$(dirname "$0")
tmp=$(mktemp -d)

# --- the machine -----------------------------------------------------------
check "pid 1 is systemd" sh -c 'test "$(cat /proc/1/comm)" = systemd && readlink /proc/1/exe'
# What this target must run, by the Debian release it was built from (the VM
# is trixie unless VMTESTS_VM_DIST says otherwise).
dist=$(. /etc/os-release && echo "$VERSION_CODENAME")
case "$VMTESTS_TARGET:$dist" in
  bookworm:bookworm|vm:bookworm) want=252 want_node=18 ;;
  trixie:trixie|vm:trixie) want=257 want_node=20 ;;
  *) want=unknown want_node=unknown ;;
esac
version=$(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p')
if [ "$version" = "$want" ]; then
  pass "systemd version is $want on $VMTESTS_TARGET ($dist)" "$(systemctl --version | head -n1)"
else
  fail "systemd version is $want on $VMTESTS_TARGET ($dist)" "got '$version': $(systemctl --version | head -n1)"
fi
# The boot job of this very unit is still running, so the manager says
# "starting"; what must hold is that no unit failed on the way here.
check "no failed units after boot" sh -c 'f=$(systemctl list-units --failed --no-legend --plain); echo "$f"; [ -z "$f" ]'
check "system bus answers" busctl --system --no-pager call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus GetId

# --- what the harness promises inside every target ----------------------------
check "user byk is uid 1000 with a home" sh -c 'test "$(id -u byk)" = 1000 && test -d ~byk && test "$(stat -c %u ~byk)" = 1000'
check "user other is uid 1001" sh -c 'test "$(id -u other)" = 1001 && test -d ~other'
check "util-linux script is installed" test -x /usr/bin/script
node_major=$(node --version 2>/dev/null | sed 's/^v\([0-9]*\).*/\1/')
if [ "$node_major" = "$want_node" ]; then pass "Debian nodejs $want_node" "$(command -v node) $(node --version)"
else fail "Debian nodejs $want_node" "got '$(node --version 2>&1)'"; fi
for tool in python3 strace ip ps zstd busctl systemd-analyze; do
  check "$tool is installed" sh -c "command -v $tool"
done
check "python3-dbus imports" python3 -c 'import dbus; print(dbus.__version__)'
check "/results is writable" sh -c 'echo probe > /results/.probe && rm /results/.probe'
check_fail "/artifacts is read-only" touch /artifacts/.vmtests-probe
check_fail "/tests is read-only" touch /tests/.vmtests-probe
check "/tests holds this script" test -x "/tests/$(basename "$0")"

# --- systemd-analyze verify: a good unit passes, a bad one fails ---------------
mkdir "$tmp/units"
cat > "$tmp/units/vmtests-good.service" <<UNIT
[Unit]
Description=vm-tests self-test: a valid unit
[Service]
Type=oneshot
ExecStart=/bin/true
UNIT
cat > "$tmp/units/vmtests-bad.service" <<UNIT
[Unit]
Description=vm-tests self-test: an invalid unit (relative ExecStart)
[Service]
Type=oneshot
ExecStart=not-an-absolute-path
UNIT
check "systemd-analyze verify passes a good unit without warnings" \
  sh -c 'out=$(systemd-analyze verify "$1" 2>&1); rc=$?; echo "$out"; [ $rc -eq 0 ] && [ -z "$out" ]' - "$tmp/units/vmtests-good.service"
check_fail "systemd-analyze verify fails a bad unit" systemd-analyze verify "$tmp/units/vmtests-bad.service"

# --- a transient unit with passed descriptors and User= -----------------------
check "transient unit over D-Bus with stdin/stdout descriptors as byk" \
  python3 "$here/transient_fds.py" byk 1000

# --- properties on their exact interfaces (dbus.service) ---------------------
path=/org/freedesktop/systemd1/unit/dbus_2eservice
busctl --system --no-pager introspect org.freedesktop.systemd1 "$path" > "$tmp/introspect.txt" 2>&1
# prop_on INTERFACE PROPERTY: 0 if the interface lists the property, 1 if the
# interface is there without it, 2 if the interface is missing altogether.
prop_on() {
  awk -v i="$1" -v p=".$2" '
    $2 == "interface" { cur = $1; if (cur == i) seen = 1 }
    cur == i && $1 == p && $2 == "property" { found = 1; print }
    END { if (!seen) exit 2; exit !found }' "$tmp/introspect.txt"
}
has_prop() { prop_on "$@"; }
lacks_prop() { prop_on "$@"; [ $? -eq 1 ]; }
check "busctl introspect of dbus.service works" grep -q '^org.freedesktop.systemd1.Unit ' "$tmp/introspect.txt"
for p in ActiveState SubState InvocationID; do
  check "Unit interface has $p" has_prop org.freedesktop.systemd1.Unit "$p"
done
for p in MainPID ControlGroup; do
  check "Service interface has $p" has_prop org.freedesktop.systemd1.Service "$p"
done
check "Unit interface has no ControlGroup" lacks_prop org.freedesktop.systemd1.Unit ControlGroup
check "dbus.service is active/running with a 16-byte InvocationID" sh -c '
  u=org.freedesktop.systemd1.Unit
  a=$(busctl --system get-property org.freedesktop.systemd1 "$1" $u ActiveState)
  s=$(busctl --system get-property org.freedesktop.systemd1 "$1" $u SubState)
  i=$(busctl --system get-property org.freedesktop.systemd1 "$1" $u InvocationID)
  echo "$a $s $i"
  [ "$a" = "s \"active\"" ] && [ "$s" = "s \"running\"" ] && [ "$(echo "$i" | cut -d" " -f2)" = 16 ]' - "$path"

# --- the kernel facts the VM exists for --------------------------------------
{
  echo "target=$VMTESTS_TARGET"
  echo "kernel=$(uname -r)"
  echo "systemd=$(systemctl --version | head -n1)"
  echo "cgroupfs=$(stat -fc %T /sys/fs/cgroup)"
  echo "yama_ptrace_scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo absent)"
  # Boot is not "finished" while this unit runs, so systemd-analyze time has
  # no answer yet: seconds (monotonic) from the kernel to PID 1, and from PID 1
  # to multi-user.target.
  u=$(systemctl show -P UserspaceTimestampMonotonic)
  m=$(systemctl show -P ActiveEnterTimestampMonotonic multi-user.target)
  [ "$VMTESTS_TARGET" != vm ] || echo "kernel_initrd_s=$(awk -v u="$u" 'BEGIN { printf "%.1f", u / 1e6 }')"
  echo "userspace_to_multi_user_s=$(awk -v u="$u" -v m="$m" 'BEGIN { printf "%.1f", (m - u) / 1e6 }')"
} > /results/environment.txt
cat /results/environment.txt
if [ "$VMTESTS_TARGET" = vm ]; then
  check "Yama is present (ptrace_scope recorded)" cat /proc/sys/kernel/yama/ptrace_scope
  check "pure cgroup v2 host" sh -c 'stat -fc %T /sys/fs/cgroup; [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && ! grep -q " cgroup " /proc/mounts'
  check "Debian kernel" sh -c 'uname -v; uname -v | grep -q Debian'
fi

rm -rf "$tmp"
checks_done
