#!/bin/bash
# embedded-digest.sh VERIFIER SOURCE_DIR HEADER: the pilot's
# TestReadinessVerifierBindsExactSourceAndCondition, digest half: the
# 64-hex digest embedded in the verifier as ";pty-source:sha256:<digest>'"
# equals what tools/review-source-hash prints for the unchanged source tree;
# the git half equals the checkout's HEAD; the generated header carries the
# same three values.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check.sh"
v=${1:?usage} src=${2:?usage} hdr=${3:?usage}

embedded=$(grep -oE ";pty-source:sha256:[0-9a-f]{64}'" "$v" | sed -E "s/^;pty-source:sha256:([0-9a-f]{64})'\$/\1/")
actual=$(cd / && "$src/tools/review-source-hash" "$src")
if [ "${#embedded}" -eq 64 ] && [ "$embedded" = "$actual" ]; then
  pass "digest: embedded pty-source:sha256 == review-source-hash of the unchanged tree" "$actual"
else
  fail "digest: embedded pty-source:sha256 == review-source-hash of the unchanged tree" "embedded '$embedded', review-source-hash '$actual'"
fi
git_embedded=$(grep -oE "revision=opencode-v2-pilot:git:[0-9a-f]{40};" "$v" | sed -E 's/.*:git:([0-9a-f]{40});/\1/')
head=$(git -c safe.directory="$src" -C "$src" rev-parse HEAD)
if [ "$git_embedded" = "$head" ]; then
  pass "digest: embedded git revision == HEAD" "$head"
else
  fail "digest: embedded git revision == HEAD" "embedded '$git_embedded', HEAD '$head'"
fi
line=$(sed -n "s/^EXPECTED_REVISION='\(.*\)'\$/\1/p" "$v")
want_hdr=$(printf '#define OPENCODE_REVISION "%s"\n#define OPENCODE_SOURCE_SHA256 "%s"\n#define OPENCODE_REVISION_LINE "%s"' "$head" "$actual" "$line")
got_hdr=$(grep '^#define OPENCODE_' "$hdr")
if [ "$got_hdr" = "$want_hdr" ]; then
  pass "digest: source_identity.h carries the same identity"
else
  fail "digest: source_identity.h carries the same identity" "$got_hdr"
fi
checks_done
