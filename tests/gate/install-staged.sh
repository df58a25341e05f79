#!/bin/bash
# install-staged.sh BUILD_DIR: tools/install, tools/install --uninstall and
# tools/write-marker on a staged root (--root) under /run, as root, with the
# real verifier and units of BUILD_DIR and three stand-in binaries. Checks
# the exact layout (owner, mode, content), idempotence (a second run touches
# nothing), every refusal, and that uninstall removes exactly what install
# laid down. The same tools run on the real / in the harness (vm.gate.*).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: install-staged.sh BUILD_DIR}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit 77; }
. "$here/check.sh"
tools=$here/../../tools

W=$(mktemp -d /run/opencode-install-test.XXXXXX) || { echo "FAIL: cannot make a directory in /run"; exit 1; }
trap 'rm -rf -- "$W"' EXIT
chmod 0755 "$W"
F=$W/from R=$W/root
mkdir -p "$F/units" "$R/etc" "$R/usr" "$R/var"
chmod 0755 "$F" "$F/units" "$R" "$R/etc" "$R/usr" "$R/var"
for b in opencode-pty-supervisor opencode-pty-launcher opencode-pty-client; do
  { cat /bin/true; printf '%s' "$b"; } > "$F/$b"; chmod 0700 "$F/$b"
done
cp "$build/opencode-pty-verify-readiness" "$F/"
for u in opencode-pty-supervisor.socket opencode-pty-supervisor.service opencode-pty.slice opencode-v2.service 60-opencode-pty-yama.conf; do
  cp "$build/units/$u" "$F/units/$u"; chmod 0600 "$F/units/$u"
done

snapshot() { (cd "$R" && find . -printf '%p %y %m %u:%g %s\n' | LC_ALL=C sort); }
times() { (cd "$R" && find . -type f -printf '%p %C@\n' | LC_ALL=C sort); }
before=$(snapshot)

# expect_refusal NAME TEXT CMD...: exit 1, one line "...: refused: ...TEXT..."
expect_refusal() {
  local name=$1 text=$2 out rc; shift 2
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] &&
     case $out in *": refused: "*"$text"*) true ;; *) false ;; esac; then
    pass "$name" "$out"
  else
    fail "$name" "exit $rc: $out"
  fi
}

check "install: into a staged root" "$tools/install" --from "$F" --root "$R"
layout_ok=1 detail=
for x in "/usr/local/libexec/opencode-pty-supervisor opencode-pty-supervisor 755" \
         "/usr/local/libexec/opencode-pty-launcher opencode-pty-launcher 755" \
         "/usr/local/libexec/opencode-pty-client opencode-pty-client 755" \
         "/usr/local/libexec/opencode-pty-verify-readiness opencode-pty-verify-readiness 755" \
         "/etc/systemd/system/opencode-pty-supervisor.socket units/opencode-pty-supervisor.socket 644" \
         "/etc/systemd/system/opencode-pty-supervisor.service units/opencode-pty-supervisor.service 644" \
         "/etc/systemd/system/opencode-pty.slice units/opencode-pty.slice 644" \
         "/etc/systemd/system/opencode-v2.service units/opencode-v2.service 644" \
         "/etc/sysctl.d/60-opencode-pty-yama.conf units/60-opencode-pty-yama.conf 644"; do
  set -- $x
  got=$(stat -c '%u:%g %a %F' "$R$1" 2>&1)
  if [ "$got" != "0:0 $3 regular file" ] || ! cmp -s "$F/$2" "$R$1"; then layout_ok=0; detail="$detail $1($got)"; fi
done
if [ "$layout_ok" = 1 ]; then pass "install: every file root:root with its mode and content"; else fail "install: every file root:root with its mode and content" "$detail"; fi
dirs_ok=$(cd "$R" && find . -type d -printf '%m %U:%G\n' | sort -u | tr '\n' ';')
if [ "$dirs_ok" = "755 0:0;" ]; then pass "install: every directory root:root 0755"; else fail "install: every directory root:root 0755" "$dirs_ok"; fi
extra=$(cd "$R" && find . -type f | LC_ALL=C sort | tr '\n' ' ')
want=$(printf '%s\n' ./etc/systemd/system/opencode-pty-supervisor.service ./etc/systemd/system/opencode-pty-supervisor.socket \
  ./etc/systemd/system/opencode-pty.slice ./etc/systemd/system/opencode-v2.service ./etc/sysctl.d/60-opencode-pty-yama.conf \
  ./usr/local/libexec/opencode-pty-client ./usr/local/libexec/opencode-pty-launcher ./usr/local/libexec/opencode-pty-supervisor \
  ./usr/local/libexec/opencode-pty-verify-readiness ./var/lib/opencode-pty/install-manifest | LC_ALL=C sort | tr '\n' ' ')
if [ "$extra" = "$want" ]; then pass "install: nothing else (no marker, no enablement links)"; else fail "install: nothing else (no marker, no enablement links)" "$extra"; fi
m=$R/var/lib/opencode-pty/install-manifest
if [ "$(stat -c '%u:%g %a' "$m")" = "0:0 644" ] && [ "$(grep -c '^file /' "$m")" -eq 9 ] &&
   grep -qx 'dir /usr/local/libexec' "$m" && grep -qx 'dir /var/lib/opencode-pty' "$m" &&
   grep -qx "file /usr/local/libexec/opencode-pty-client $(sha256sum < "$F/opencode-pty-client" | cut -c1-64)" "$m"; then
  pass "install: manifest lists 9 files with hashes and the directories it created"
else
  fail "install: manifest lists 9 files with hashes and the directories it created" "$(tr '\n' ';' < "$m")"
fi

t1=$(times) s1=$(snapshot)
out=$("$tools/install" --from "$F" --root "$R" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ "$(times)" = "$t1" ] && [ "$(snapshot)" = "$s1" ] && [ "$(printf '%s\n' "$out" | grep -c ' unchanged ')" -eq 9 ]; then
  pass "install: a second run changes nothing (not even a ctime)"
else
  fail "install: a second run changes nothing (not even a ctime)" "exit $rc: $out"
fi
chmod 0700 "$R/etc/systemd/system/opencode-pty.slice"
out=$("$tools/install" --from "$F" --root "$R" 2>&1)
if [ "$(stat -c %a "$R/etc/systemd/system/opencode-pty.slice")" = 644 ] && printf '%s' "$out" | grep -q 'fixed owner/mode'; then
  pass "install: repairs a wrong mode"; else fail "install: repairs a wrong mode" "$out"; fi
printf 'x' >> "$F/opencode-pty-launcher"
out=$("$tools/install" --from "$F" --root "$R" 2>&1)
if cmp -s "$F/opencode-pty-launcher" "$R/usr/local/libexec/opencode-pty-launcher" &&
   [ "$(printf '%s\n' "$out" | grep -c ' installed ')" -eq 1 ] &&
   grep -qx "file /usr/local/libexec/opencode-pty-launcher $(sha256sum < "$F/opencode-pty-launcher" | cut -c1-64)" "$m"; then
  pass "install: a new build replaces exactly the changed file and updates the manifest"
else
  fail "install: a new build replaces exactly the changed file and updates the manifest" "$out"
fi

# write-marker on the staged root: the records name the final paths.
expect_refusal "write-marker: refuses without --reviewed" "--reviewed" "$tools/write-marker" --root "$R"
check "write-marker: --reviewed writes the marker" "$tools/write-marker" --reviewed --root "$R"
rev=$(sed -n "s/^EXPECTED_REVISION='\(.*\)'\$/\1/p" "$F/opencode-pty-verify-readiness")
want_marker=$(printf '%s\n' "$rev"; for b in opencode-pty-supervisor opencode-pty-launcher opencode-pty-client; do
  printf '%s  /usr/local/libexec/%s\n' "$(sha256sum < "$F/$b" | cut -c1-64)" "$b"; done)
mk=$R/etc/opencode/pty-supervisor-verified
if [ "$(cat "$mk"; printf x)" = "$want_marker
x" ] && [ "$(stat -c '%u:%g %a %F' "$mk")" = "0:0 644 regular file" ] && [ "$(stat -c '%u:%g %a' "$R/etc/opencode")" = "0:0 755" ]; then
  pass "write-marker: exactly 4 lines (revision + sha256sum records), root:root 0644"
else
  fail "write-marker: exactly 4 lines (revision + sha256sum records), root:root 0644" "$(od -c "$mk" | head -n 3)"
fi
chmod 0775 "$R/etc/opencode"
expect_refusal "write-marker: refuses a group-writable /etc/opencode" "writable by group or other" "$tools/write-marker" --reviewed --root "$R"
chmod 0755 "$R/etc/opencode"
chmod 0775 "$R/usr/local/libexec/opencode-pty-client"
expect_refusal "write-marker: refuses a binary that is not 0755" "not root:root 0755" "$tools/write-marker" --reviewed --root "$R"
chmod 0755 "$R/usr/local/libexec/opencode-pty-client"
rm -rf "$R/etc/opencode"

# Refusals of install.
expect_refusal "install: refuses a non-root caller" "must run as root" setpriv --reuid=65534 --regid=65534 --clear-groups "$tools/install" --from "$F" --root "$R"
chmod 0775 "$R/usr/local"
expect_refusal "install: refuses a group-writable parent of libexec" "$R/usr/local is writable by group or other" "$tools/install" --from "$F" --root "$R"
chmod 0757 "$R/usr/local"
expect_refusal "install: refuses an other-writable parent of libexec" "$R/usr/local is writable by group or other" "$tools/install" --from "$F" --root "$R"
chmod 0755 "$R/usr/local"
chmod 0775 "$R/usr/local/libexec"
expect_refusal "install: refuses a group-writable libexec" "$R/usr/local/libexec is writable by group or other" "$tools/install" --from "$F" --root "$R"
chmod 0755 "$R/usr/local/libexec"
chown 4242 "$R/usr/local/libexec"
expect_refusal "install: refuses a libexec owned by another user" "owned by uid 4242" "$tools/install" --from "$F" --root "$R"
chown 0 "$R/usr/local/libexec"
chmod 0777 "$R/usr"
expect_refusal "install: refuses a world-writable /usr" "$R/usr is writable by group or other" "$tools/install" --from "$F" --root "$R"
chmod 0755 "$R/usr"
chmod 1777 "$W"
expect_refusal "install: refuses a world-writable ancestor of the root" "$W is writable by group or other" "$tools/install" --from "$F" --root "$R"
chmod 0755 "$W"
mv "$F/opencode-pty-client" "$W/client.saved"
expect_refusal "install: refuses a build without the client" "missing in the build directory" "$tools/install" --from "$F" --root "$R"
ln -s opencode-pty-launcher "$F/opencode-pty-client"
expect_refusal "install: refuses a symlinked source" "not a regular file" "$tools/install" --from "$F" --root "$R"
rm "$F/opencode-pty-client"; mv "$W/client.saved" "$F/opencode-pty-client"
expect_refusal "install: refuses an unknown argument" "unknown argument" "$tools/install" --from "$F" --root "$R" --force

# Uninstall refuses a file changed since install, then removes exactly what was laid down.
cp "$R/etc/systemd/system/opencode-v2.service" "$W/unit.saved"
echo '# local edit' >> "$R/etc/systemd/system/opencode-v2.service"
expect_refusal "uninstall: refuses while an installed file was changed" "changed since it was installed" "$tools/install" --uninstall --root "$R"
cp "$W/unit.saved" "$R/etc/systemd/system/opencode-v2.service"
check "uninstall: runs" "$tools/install" --uninstall --root "$R"
after=$(snapshot)
if [ "$after" = "$before" ]; then pass "uninstall: the root is exactly as before install"; else fail "uninstall: the root is exactly as before install" "$(diff <(echo "$before") <(echo "$after") | tr '\n' ';')"; fi
expect_refusal "uninstall: a second uninstall has nothing to remove" "no install manifest" "$tools/install" --uninstall --root "$R"

# A destination that install did not lay down is not overwritten.
mkdir -p "$R/etc/systemd/system"; echo '[Service]' > "$R/etc/systemd/system/opencode-v2.service"
expect_refusal "install: refuses to overwrite a foreign opencode-v2.service" "was not installed by tools/install" "$tools/install" --from "$F" --root "$R"
if [ "$(cat "$R/etc/systemd/system/opencode-v2.service")" = '[Service]' ] && [ ! -e "$R/usr/local/libexec/opencode-pty-supervisor" ]; then
  pass "install: a refusal leaves everything untouched"; else fail "install: a refusal leaves everything untouched"; fi
checks_done
