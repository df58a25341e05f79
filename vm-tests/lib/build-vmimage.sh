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

# The harness shares its folders over 9p (virtio); the Debian kernel loads
# 9p and 9pnet_virtio on demand when these are mounted.
opts=trans=virtio,version=9p2000.L,msize=262144
cat > "$root/etc/fstab" <<FSTAB
/dev/vda   /            ext4  rw,errors=remount-ro  0 1
vmtests    /vm-tests    9p    $opts,ro  0 0
ctl        /vmtests-ctl 9p    $opts,ro  0 0
tests      /tests       9p    $opts,ro  0 0
artifacts  /artifacts   9p    $opts,ro  0 0
results    /results     9p    $opts,rw  0 0
FSTAB

used=$(du -sm --one-file-system "$root" | cut -f1)
size=$(( (used + 2048 + 255) / 256 * 256 ))
rm -f "$base.img.tmp"
mkfs.ext4 -q -F -L vmtests-root -d "$root" "$base.img.tmp" "${size}M"
install -m 0644 "${kernels[0]}" "$base.vmlinuz"
install -m 0644 "${initrds[0]}" "$base.initrd"
mv -f "$base.img.tmp" "$base.img"
echo "build-vmimage: ${size} MiB image, kernel $(basename "${kernels[0]}")" >&2
