#!/bin/bash
# build-rootfs.sh DIST MIRROR DEBCACHE TARGET_DIR PACKAGE_FILE...
# Makes one Debian root filesystem for vm-tests from the mirror with
# debootstrap and prepares it for booting systemd as PID 1. Invoked by
# lib/host.sh under the cache lock; this file's content is part of the cache
# key, so any change to it rebuilds the cached rootfs.
set -euo pipefail

dist=$1 mirror=$2 debcache=$3 root=$4
shift 4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# One package a line, '#' starts a comment; the union of all lists given.
packages=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$@" | grep -v '^$' | sort -u | paste -sd, -)
[ -n "$packages" ] || { echo "build-rootfs: empty package list" >&2; exit 1; }

mkdir -p "$debcache"
# debootstrap mounts /proc and /sys inside the target; unmount whatever it
# left if it is interrupted so that no mount survives on the host.
cleanup_mounts() {
  local m
  for m in $(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/self/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
}
trap cleanup_mounts EXIT

echo "build-rootfs: debootstrap $dist from $mirror with: $packages" >&2
log="$root.debootstrap.log"
if ! debootstrap --variant=minbase --include="$packages" --cache-dir="$debcache" \
       "$dist" "$root" "$mirror" > "$log" 2>&1; then
  echo "build-rootfs: debootstrap failed; the end of its log ($log):" >&2
  tail -n 25 "$log" >&2
  [ ! -f "$root/debootstrap/debootstrap.log" ] || tail -n 25 "$root/debootstrap/debootstrap.log" >&2
  exit 1
fi
cleanup_mounts

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

# The application user and a second, unrelated user of the same kind.
in_root groupadd -g 1000 byk
in_root useradd -m -u 1000 -g 1000 -s /bin/bash byk
in_root groupadd -g 1001 other
in_root useradd -m -u 1001 -g 1001 -s /bin/bash other

echo vmtests > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tvmtests\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$root/etc/hosts"
# An empty machine-id: every boot of the disposable system gets a fresh one.
: > "$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"

install -m 0644 "$here"/guest/units/*.target "$here"/guest/units/*.service "$root/etc/systemd/system/"
# The mount points the harness binds (nspawn) or mounts over 9p (VM).
mkdir -p "$root"/{vm-tests,vmtests-ctl,tests,artifacts,results}

in_root apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log \
  "$root"/var/log/apt/* "$root"/var/cache/debconf/*-old
echo "build-rootfs: $dist done" >&2
