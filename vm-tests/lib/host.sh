# vm-tests/lib/host.sh: host side of the harness, sourced by vm-tests/run.
# Owns the cache in $VT_CACHE (rootfs tarballs, unpacked trees, the VM disk
# image and kernel). Invariant: a cache entry is only ever visible complete
# (built under an exclusive flock, published by rename), and a run holds a
# shared flock on its entry until it ends, so no run sees one change.

VT_HARNESS=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VT_CACHE=${VMTESTS_CACHE:-/var/cache/opencode-pty-vmtests}
VT_VM_DIST=${VMTESTS_VM_DIST:-trixie}

vt_log() { printf '[vm-tests] %s\n' "$*" >&2; }
vt_die() { printf '[vm-tests] error: %s\n' "$*" >&2; exit 2; }
vt_now() { date +%s.%N; }
vt_since() { awk -v a="$1" -v b="$(vt_now)" 'BEGIN { printf "%.1f", b - a }'; }

# vt_require TARGET: the host tools this target needs, named by package.
vt_require() {
  local need=(flock:util-linux zstd:zstd tar:tar debootstrap:debootstrap chroot:coreutils)
  if [ "$1" = vm ]; then
    need+=(qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils mkfs.ext4:e2fsprogs)
  else
    need+=(systemd-nspawn:systemd-container)
  fi
  local n missing=()
  for n in "${need[@]}"; do
    command -v "${n%%:*}" >/dev/null 2>&1 || missing+=("${n#*:}")
  done
  [ ${#missing[@]} -eq 0 ] || vt_die "missing host tools; install: apt-get install ${missing[*]} (tools/install-deps)"
}

# The Debian mirror this machine's apt uses (deb822 .sources or one-line
# .list), so that debootstrap reaches the same one; VMTESTS_MIRROR overrides.
vt_mirror() {
  if [ -n "${VMTESTS_MIRROR:-}" ]; then echo "$VMTESTS_MIRROR"; return; fi
  local m
  m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
          /etc/apt/sources.list.d/*.sources 2>/dev/null |
      awk '/^[[:space:]]*URIs:/ { for (i = 2; i <= NF; i++) print $i }
           /^[[:space:]]*deb[[:space:]]/ { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; break } }' |
      grep -E '^https?://[^ ]*/debian/?$' | head -n1)
  [ -n "$m" ] || vt_die "no Debian mirror found in /etc/apt/sources.list*; set VMTESTS_MIRROR"
  echo "${m%/}"
}

# Cache key of a rootfs: its name, distribution, normalised package lists, the
# builder and the guest units baked into it.
vt_key() {
  local name=$1 dist=$2; shift 2
  {
    echo "name=$name dist=$dist"
    sed -e 's/#.*//' -e 's/[[:space:]]//g' "$@" | grep -v '^$' | sort -u
    cat "$VT_HARNESS/lib/build-rootfs.sh" "$VT_HARNESS"/guest/units/*
    if [ "$name" = vm ]; then cat "$VT_HARNESS/lib/build-vmimage.sh"; fi
  } | sha256sum | cut -c1-16
}

# vt_lock NAME: open (and keep open) the lock file of one cache entry family
# on fd VT_LOCKFD and take it shared.
vt_lock() {
  mkdir -p "$VT_CACHE/lock" "$VT_CACHE/tmp"
  exec {VT_LOCKFD}>"$VT_CACHE/lock/$1.lock"
  flock -s -w 3600 "$VT_LOCKFD" || vt_die "timed out waiting for the cache lock $VT_CACHE/lock/$1.lock"
}
vt_lock_exclusive() {
  flock -u "$VT_LOCKFD"
  flock -x -w 3600 "$VT_LOCKFD" || vt_die "timed out waiting for the exclusive cache lock"
}
vt_lock_shared() { flock -s "$VT_LOCKFD"; }

# vt_prune NAME KEEP...: remove cache entries of NAME other than the current
# key (only called under the exclusive lock).
vt_prune() {
  local name=$1 key=$2 f
  for f in "$VT_CACHE/$name"-*; do
    [ -e "$f" ] || continue
    case "$f" in "$VT_CACHE/$name-$key"*) continue ;; esac
    vt_log "pruning stale cache entry $f"
    rm -rf --one-file-system "$f"
  done
}

# vt_build_tarball NAME DIST KEY PKGFILE...: debootstrap into a scratch dir,
# publish NAME-KEY.tar.zst; leaves the tree at $VT_CACHE/tmp/NAME-KEY.build
# for the caller to publish or drop. Exclusive lock held by the caller.
vt_build_tarball() {
  local name=$1 dist=$2 key=$3; shift 3
  local build="$VT_CACHE/tmp/$name-$key.build" tarball="$VT_CACHE/$name-$key.tar.zst"
  rm -rf --one-file-system "$build" "$tarball.tmp"
  mkdir -p "$build"
  VT_CLEANUP_BUILD=$build
  VMTESTS_FLAVOR=$name "$VT_HARNESS/lib/build-rootfs.sh" "$dist" "$(vt_mirror)" \
    "$VT_CACHE/debs/$dist" "$build/root" "$@" ||
    vt_die "building the $name rootfs failed (debootstrap log: $build/root/debootstrap/debootstrap.log if it exists)"
  tar -C "$build/root" --numeric-owner --xattrs --xattrs-include='*' --acls -cf - . |
    zstd -q -T0 -10 -o "$tarball.tmp" || vt_die "packing $tarball failed"
  mv -f "$tarball.tmp" "$tarball"
}

vt_unpack() { # TARBALL DIR
  mkdir -p "$2"
  zstd -q -dc "$1" | tar -C "$2" --numeric-owner --xattrs --xattrs-include='*' --acls -xf - ||
    vt_die "unpacking $1 failed"
}

# vt_ensure_rootfs NAME DIST: an unpacked, complete tree for systemd-nspawn.
# Sets VT_TREE and VT_CACHE_STATE (warm | unpacked | cold); keeps the shared
# lock on the entry held for the rest of the run.
vt_ensure_rootfs() {
  local name=$1 dist=$2
  local pkgs=("$VT_HARNESS/packages/$dist.txt")
  [ -f "${pkgs[0]}" ] || vt_die "no package list ${pkgs[0]}"
  local key; key=$(vt_key "$name" "$dist" "${pkgs[@]}")
  VT_TREE="$VT_CACHE/$name-$key.tree"
  local tarball="$VT_CACHE/$name-$key.tar.zst"
  vt_lock "$name"
  if [ -e "$VT_TREE/.vmtests-complete" ]; then VT_CACHE_STATE=warm; return; fi
  vt_lock_exclusive
  local t0; t0=$(vt_now)
  if [ -e "$VT_TREE/.vmtests-complete" ]; then
    VT_CACHE_STATE=warm
  elif [ -e "$tarball" ]; then
    vt_log "$name: unpacking cached $tarball"
    rm -rf --one-file-system "$VT_TREE.tmp"
    VT_CLEANUP_BUILD="$VT_TREE.tmp"
    vt_unpack "$tarball" "$VT_TREE.tmp"
    touch "$VT_TREE.tmp/.vmtests-complete"
    mv "$VT_TREE.tmp" "$VT_TREE"
    VT_CACHE_STATE=unpacked
  else
    vt_log "$name: no cache for key $key; building with debootstrap (takes a minute or more)"
    vt_build_tarball "$name" "$dist" "$key" "${pkgs[@]}"
    local build="$VT_CACHE/tmp/$name-$key.build"
    touch "$build/root/.vmtests-complete"
    rm -rf --one-file-system "$VT_TREE"
    mv "$build/root" "$VT_TREE"
    rm -rf --one-file-system "$build"
    VT_CACHE_STATE=cold
  fi
  VT_CLEANUP_BUILD=
  vt_prune "$name" "$key"
  [ "$VT_CACHE_STATE" = warm ] || vt_log "$name: cache $VT_CACHE_STATE in $(vt_since "$t0") s"
  vt_lock_shared
}

# vt_ensure_vm: the VM's base disk image, kernel and initrd. Sets VT_VM_IMG,
# VT_VM_KERNEL, VT_VM_INITRD and VT_CACHE_STATE; keeps the shared lock.
vt_ensure_vm() {
  local name=vm dist=$VT_VM_DIST
  local pkgs=("$VT_HARNESS/packages/$dist.txt" "$VT_HARNESS/packages/vm.txt")
  local f; for f in "${pkgs[@]}"; do [ -f "$f" ] || vt_die "no package list $f"; done
  local key; key=$(vt_key "$name" "$dist" "${pkgs[@]}")
  local base="$VT_CACHE/$name-$key"
  VT_VM_IMG="$base.img" VT_VM_KERNEL="$base.vmlinuz" VT_VM_INITRD="$base.initrd"
  vt_lock "$name"
  if [ -e "$base.complete" ]; then VT_CACHE_STATE=warm; return; fi
  vt_lock_exclusive
  local t0; t0=$(vt_now)
  if [ -e "$base.complete" ]; then
    VT_CACHE_STATE=warm
  else
    local build="$VT_CACHE/tmp/$name-$key.build"
    if [ -e "$base.tar.zst" ]; then
      vt_log "vm: making the disk image from cached $base.tar.zst"
      rm -rf --one-file-system "$build"
      VT_CLEANUP_BUILD=$build
      vt_unpack "$base.tar.zst" "$build/root"
      VT_CACHE_STATE=unpacked
    else
      vt_log "vm: no cache for key $key; building the $dist rootfs with a kernel (takes minutes)"
      vt_build_tarball "$name" "$dist" "$key" "${pkgs[@]}"
      VT_CACHE_STATE=cold
    fi
    "$VT_HARNESS/lib/build-vmimage.sh" "$build/root" "$base" || vt_die "making the VM disk image failed"
    touch "$base.complete"
    rm -rf --one-file-system "$build"
    VT_CLEANUP_BUILD=
  fi
  vt_prune "$name" "$key"
  [ "$VT_CACHE_STATE" = warm ] || vt_log "vm: cache $VT_CACHE_STATE in $(vt_since "$t0") s"
  vt_lock_shared
}

# --- host hygiene around systemd-nspawn on a host whose PID 1 is not systemd --
# With --keep-unit, nspawn makes "payload" and "supervisor" cgroups under the
# caller's cgroup and /run/systemd/nspawn/{locks,propagate}. Each run gets its
# own parent cgroup (so concurrent runs do not share "payload"), which is
# emptied (cgroup.kill) and removed afterwards, as is what nspawn left in /run.
VT_CGROUPS=()

vt_cgroup_setup() { # NAME
  VT_CGROUPS=()
  [ ! -d /run/systemd/system ] || return 0 # a systemd host manages its cgroups
  local mnt
  while read -r mnt; do
    mkdir "$mnt/$1" || vt_die "cannot create cgroup $mnt/$1"
    VT_CGROUPS+=("$mnt/$1")
  done < <(awk '$3 == "cgroup2" || ($3 == "cgroup" && $4 ~ /(^|,)name=systemd(,|$)/) { print $2 }' /proc/self/mounts)
}

# The command prefix that enters the run's cgroups before exec'ing the rest.
vt_cgroup_enter_cmd() {
  local procs=() cg
  for cg in "${VT_CGROUPS[@]}"; do procs+=("$cg/cgroup.procs"); done
  printf '%s\0' sh -c 'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; shift; done; shift; exec "$@"' vt-enter "${procs[@]}" --
}

# Cgroups of earlier runs that were killed before their trap ran (the pid in
# the name is gone): empty and remove them.
vt_cgroup_sweep() {
  local d pid
  for d in /sys/fs/cgroup/vmtests-*-* /sys/fs/cgroup/*/vmtests-*-*; do
    [ -d "$d" ] || continue
    pid=${d##*-}
    case "$pid" in ''|*[!0-9]*) continue ;; esac
    kill -0 "$pid" 2>/dev/null && continue
    vt_log "removing the cgroup $d of an earlier run that did not clean up"
    VT_CGROUPS=("$d")
    vt_cgroup_cleanup "$(basename "$d")"
  done
}

vt_cgroup_cleanup() { # MACHINE
  local cg pid _
  for cg in "${VT_CGROUPS[@]}"; do
    [ -d "$cg" ] || continue
    if [ -e "$cg/cgroup.kill" ]; then echo 1 > "$cg/cgroup.kill" 2>/dev/null || true; fi
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null)
      [ -n "$pids" ] || break
      for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
      sleep 0.2
    done
    find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ ! -d "$cg" ] || vt_log "warning: could not remove cgroup $cg"
  done
  VT_CGROUPS=()
  # Only empty directories go: another run's entries keep theirs in place.
  rmdir "/run/systemd/nspawn/propagate/$1" /run/systemd/nspawn/propagate \
        /run/systemd/nspawn/locks /run/systemd/nspawn 2>/dev/null || true
}
