#!/bin/bash
# build-vmimage.sh ROOT BASE: turns a VM rootfs tree (a scratch copy, changed
# here) into BASE.img (ext4, booted read-write through a per-run qcow2
# overlay), BASE.vmlinuz and BASE.initrd (Debian's kernel and initramfs from
# the tree). Part of the VM cache key.
set -euo pipefail
root=$1 base=$2

kernels=("$root"/boot/vmlinuz-*)
initrds=("$root"/boot/initrd.img-*)
[ ${#kernels[@]} -eq 1 ] && [ -f "${kernels[0]}" ] || { echo "build-vmimage: want exactly one kernel in $root/boot" >&2; exit 1; }
[ ${#initrds[@]} -eq 1 ] && [ -f "${initrds[0]}" ] || { echo "build-vmimage: want exactly one initrd in $root/boot" >&2; exit 1; }

# The harness shares its folders over 9p (virtio). Each share is mounted only
# after vm-tests-9p.service has seen its virtio channel. Without it, systemd
# starts the five mounts at once and the first one loads 9pnet_virtio on
# demand; the module registers its "virtio" transport before it probes the
# devices (p9_virtio_init), so a second mount can find the transport, look
# for a channel that is not probed yet and fail: "9pnet_virtio: no channels
# available for device ctl", local-fs.target failed, emergency mode.
# x-systemd.requires= gives each mount Requires= and After= on the unit.
opts=trans=virtio,version=9p2000.L,msize=262144,x-systemd.requires=vm-tests-9p.service
cat > "$root/etc/fstab" <<FSTAB
/dev/vda   /            ext4  rw,errors=remount-ro  0 1
vmtests    /vm-tests    9p    $opts,ro  0 0
ctl        /vmtests-ctl 9p    $opts,ro  0 0
tests      /tests       9p    $opts,ro  0 0
artifacts  /artifacts   9p    $opts,ro  0 0
results    /results     9p    $opts,rw  0 0
FSTAB

# vm-tests-9p-wait TAG...: modprobe 9pnet_virtio returns only once the
# module's init has run (a concurrent load by udev or a mount is waited for),
# and that init probes every virtio device already on the bus, which all
# are by now (the initramfs loaded virtio_pci to reach /dev/vda, and PCI
# devices are not hot-plugged here): each channel is then on the driver's
# list. The loop checks that every TAG has a channel (its mount_tag under
# /sys/bus/virtio/drivers/9pnet_virtio/) and gives up after a bound with a
# console message instead of leaving the guest in emergency mode until the
# harness's timeout.
mkdir -p "$root/usr/local/sbin"
cat > "$root/usr/local/sbin/vm-tests-9p-wait" <<'WAIT'
#!/bin/sh
# Part of the vm-tests VM image (lib/build-vmimage.sh): see the comment there.
limit=300
say() { echo "vm-tests-9p: $*"; }
tags() { # the mount tags of the probed virtio-9p channels, one a line
  for f in /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag; do
    [ -r "$f" ] && { tr -d '\000' < "$f"; echo; }
  done
}
modprobe 9pnet_virtio || { say "FAILED: modprobe 9pnet_virtio exited $?"; exit 1; }
state=$(cat /sys/module/9pnet_virtio/initstate 2>/dev/null || echo builtin)
case "$state" in live|builtin) ;; *) say "FAILED: module 9pnet_virtio is '$state' after modprobe"; exit 1 ;; esac
start=$(cut -d. -f1 /proc/uptime)
while :; do
  have=$(tags) missing=
  for t in "$@"; do
    printf '%s\n' "$have" | grep -qxF -- "$t" || missing="$missing $t"
  done
  [ -n "$missing" ] || break
  if [ $(( $(cut -d. -f1 /proc/uptime) - start )) -ge "$limit" ]; then
    say "FAILED: no virtio-9p channel for share(s)$missing after ${limit} s; channels present: $(echo $have)"
    say "the host's qemu command line must have a -virtfs with mount_tag= for each; powering off"
    exit 1
  fi
  sleep 0.2
done
say "channels present for: $*"
WAIT
chmod 0755 "$root/usr/local/sbin/vm-tests-9p-wait"
cat > "$root/etc/systemd/system/vm-tests-9p.service" <<'UNIT'
# The harness's 9p shares have their virtio channels (lib/build-vmimage.sh);
# every 9p mount in /etc/fstab requires this unit and is ordered after it.
[Unit]
Description=vm-tests: wait for the 9p shares' virtio channels
DefaultDependencies=no
Before=local-fs.target
# A share that never appears ends the boot at once, with the reason on the
# console (the harness prints its last lines), instead of emergency mode.
FailureAction=poweroff-force

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/vm-tests-9p-wait vmtests ctl tests artifacts results
StandardOutput=journal+console
StandardError=journal+console
# The script's own bound is 300 s; this only catches a modprobe that hangs.
TimeoutStartSec=420
UNIT

# Emergency mode (any other failure of local-fs.target or the like) waits for
# a human, and in a test run there is none: the harness would wait for its
# timeout (900 s). Print the failed units on the console and power off; the
# --shell boot (vm-tests-shell.target) keeps the emergency shell.
mkdir -p "$root/etc/systemd/system/emergency.service.d"
cat > "$root/etc/systemd/system/emergency.service.d/vm-tests.conf" <<'DROPIN'
[Service]
ExecStartPre=-/bin/sh -c 'echo "vm-tests: boot failed, emergency mode; failed units:"; systemctl --failed --no-legend --plain --no-pager; grep -qw systemd.unit=vm-tests-shell.target /proc/cmdline || { echo "vm-tests: powering off"; systemctl poweroff --force; }'
DROPIN

used=$(du -sm --one-file-system "$root" | cut -f1)
size=$(( (used + 2048 + 255) / 256 * 256 ))
rm -f "$base.img.tmp"
mkfs.ext4 -q -F -L vmtests-root -d "$root" "$base.img.tmp" "${size}M"
install -m 0644 "${kernels[0]}" "$base.vmlinuz"
install -m 0644 "${initrds[0]}" "$base.initrd"
mv -f "$base.img.tmp" "$base.img"
echo "build-vmimage: ${size} MiB image, kernel $(basename "${kernels[0]}")" >&2
