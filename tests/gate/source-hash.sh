#!/bin/bash
# source-hash.sh SOURCE_DIR: tools/review-source-hash is deterministic and
# covers what docs/SECURITY.md says it covers. Copies of the covered files at
# two different places, written in different orders with different mtimes,
# hash alike (and like the checkout); one changed byte, an added, removed or
# renamed file changes the hash; ignored files, cwd, permission bits and the
# user's git configuration do not; symlinks and deleted tracked files fail
# closed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check.sh"
src=${1:?usage: source-hash.sh SOURCE_DIR}
rsh=$src/tools/review-source-hash

W=$(mktemp -d); trap 'rm -rf -- "$W"' EXIT
h() { (cd "${2:-/}" && "$rsh" "$1"); }
same() { # NAME A B
  if [ -n "$2" ] && [ "$2" = "$3" ]; then pass "$1" "$2"; else fail "$1" "'$2' vs '$3'"; fi
}
differ() { # NAME A B
  if [ -n "$2" ] && [ -n "$3" ] && [ "$2" != "$3" ]; then pass "$1" "$2 -> $3"; else fail "$1" "'$2' vs '$3'"; fi
}

orig=$(h "$src")
if [[ $orig =~ ^[0-9a-f]{64}$ ]]; then pass "hash: 64 hex digits" "$orig"; else fail "hash: 64 hex digits" "$orig"; fi
same "hash: independent of the cwd" "$orig" "$(h "$src" "$W")"
same "hash: relative source path" "$orig" "$(cd "$src/.." && "$rsh" "./$(basename "$src")")"

# The manifest: sha256sum lines, sorted bytewise by path; the hash is its SHA-256.
"$rsh" --manifest "$src" > "$W/manifest"
bad=$(grep -cvE '^[0-9a-f]{64}  [^ ]' "$W/manifest")
if [ "$bad" -eq 0 ]; then pass "manifest: every line is a sha256sum record"; else fail "manifest: every line is a sha256sum record" "$bad bad lines"; fi
if cut -c67- "$W/manifest" | LC_ALL=C sort -c 2>/dev/null; then pass "manifest: sorted bytewise by path"; else fail "manifest: sorted bytewise by path"; fi
same "manifest: the hash is the SHA-256 of the manifest" "$orig" "$(sha256sum < "$W/manifest" | cut -c1-64)"
(cd "$src" && sha256sum --quiet -c "$W/manifest") && pass "manifest: sha256sum -c accepts it" || fail "manifest: sha256sum -c accepts it"

# Two exports at different places: one in list order with old mtimes, the
# other in reverse order with new mtimes.
"$rsh" --list "$src" > "$W/list"
mkdir -p "$W/a" "$W/a-much-longer-location/b"
A=$W/a/tree B=$W/a-much-longer-location/b/tree
mkdir "$A" "$B"
while IFS= read -r p; do
  mkdir -p "$A/$(dirname "$p")"; cp "$src/$p" "$A/$p"; touch -d @0 "$A/$p"
done < "$W/list"
tac "$W/list" | while IFS= read -r p; do
  mkdir -p "$B/$(dirname "$p")"; cp "$src/$p" "$B/$p"
done
touch -d @2000000000 "$B"
ha=$(h "$A") hb=$(h "$B")
same "export: two places, orders and mtimes hash alike" "$ha" "$hb"
same "export: equals the hash of the checkout" "$orig" "$ha"

f=$(head -n1 "$W/list")
cp "$B/$f" "$W/saved"
printf '\001' | dd of="$B/$f" bs=1 seek=0 conv=notrunc status=none
differ "export: one changed byte changes the hash" "$ha" "$(h "$B")"
cp "$W/saved" "$B/$f"
same "export: restoring the byte restores the hash" "$ha" "$(h "$B")"
chmod 0700 "$B/$f"
same "export: permission bits are not covered" "$ha" "$(h "$B")"
echo new > "$B/new-file"
differ "export: an added file changes the hash" "$ha" "$(h "$B")"
rm "$B/new-file"; mv "$B/$f" "$B/$f.renamed"
differ "export: a renamed file changes the hash" "$ha" "$(h "$B")"
rm "$B/$f.renamed"
differ "export: a removed file changes the hash" "$ha" "$(h "$B")"
cp "$W/saved" "$B/$f"
ln -s "$f" "$B/link"
check_fail "export: a symlink fails closed" "$rsh" "$B"
rm "$B/link"
same "export: back to the original" "$ha" "$(h "$B")"

# Git mode, on a clone of HEAD (the checkout itself may carry work in progress).
git -c safe.directory="$src" clone -q "$src" "$W/clone" 2>/dev/null
C=$W/clone
hc=$(h "$C")
"$rsh" --list "$C" > "$W/clist"
mkdir "$W/cexport"
while IFS= read -r p; do mkdir -p "$W/cexport/$(dirname "$p")"; cp "$C/$p" "$W/cexport/$p"; done < "$W/clist"
same "git: a clone hashes like its own export" "$hc" "$(h "$W/cexport")"
git -C "$C" archive HEAD | tar -x -C "$W" --one-top-level=archived
same "git: a clone hashes like git archive HEAD" "$hc" "$(h "$W/archived")"
mkdir -p "$C/build-x/sub"; echo junk > "$C/build-x/sub/obj.o"
same "git: ignored files (a build directory) are not covered" "$hc" "$(h "$C")"
echo extra > "$C/untracked-file"
differ "git: an untracked, not ignored file is covered" "$hc" "$(h "$C")"
rm "$C/untracked-file"
cf=$(head -n1 "$W/clist")
printf 'x' >> "$C/$cf"
differ "git: an edited tracked file changes the hash" "$hc" "$(h "$C")"
git -C "$C" checkout -q -- "$cf"
same "git: checkout restores the hash" "$hc" "$(h "$C")"
mkdir -p "$W/home"; printf '[core]\n\texcludesFile = %s\n' "$W/home/ignore-all" > "$W/home/.gitconfig"; echo '*' > "$W/home/ignore-all"
echo extra > "$C/untracked-file"
hu=$(cd / && HOME=$W/home "$rsh" "$C")
rm "$C/untracked-file"
differ "git: the user's global git config cannot hide files" "$hc" "$hu"
rm "$C/$cf"
check_fail "git: a deleted tracked file fails closed" "$rsh" "$C"
git -C "$C" checkout -q -- "$cf"
check_fail "usage: a missing directory fails" "$rsh" "$W/does-not-exist"
check_fail "usage: a subdirectory of a checkout fails" "$rsh" "$C/$(dirname "$(grep / "$W/clist" | head -n1)")"
checks_done
