#!/bin/bash
# verifier-dash.sh VERIFIER: the real, unmodified verifier runs under dash on
# this host and answers with a verdict: either ready (exit 0, silent) where
# the host really is ready, or exit 1 with exactly one "not ready: <reason>"
# line. It also runs with an empty and with a hostile environment (PATH
# pointing at a directory of fake tools) and gives the same verdict.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check.sh"
v=${1:?usage}
dash=$(command -v dash) || { echo "FAIL: dash is not installed"; exit 1; }

verdict() { # runs the verifier with the given env prefix, prints "rc|stderr"
  local err rc
  err=$("$@" "$dash" "$v" 2>&1 >/dev/null); rc=$?
  printf '%s|%s' "$rc" "$err"
}
plain=$(verdict env)
rc=${plain%%|*} err=${plain#*|}
if { [ "$rc" -eq 0 ] && [ -z "$err" ]; } ||
   { [ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] &&
     case $err in "opencode-pty-verify-readiness: not ready: "?*) true ;; *) false ;; esac; }; then
  pass "dash: the verifier gives a verdict on this host" "exit $rc: $err"
else
  fail "dash: the verifier gives a verdict on this host" "exit $rc: $err"
fi
empty=$(verdict env -i)
if [ "$empty" = "$plain" ]; then pass "dash: same verdict with an empty environment"; else fail "dash: same verdict with an empty environment" "$empty"; fi
fake=$(mktemp -d); trap 'rm -rf "$fake"' EXIT
for t in stat sha256sum cat sed sort uniq wc cmp dirname logger; do
  printf '#!/bin/sh\necho 0\nexit 0\n' > "$fake/$t"; chmod 755 "$fake/$t"
done
hostile=$(verdict env PATH="$fake" IFS=/ CDPATH=/ ENV=/dev/null)
if [ "$hostile" = "$plain" ]; then pass "dash: PATH, IFS, CDPATH and ENV from the caller are ignored"; else fail "dash: PATH, IFS, CDPATH and ENV from the caller are ignored" "$hostile"; fi
checks_done
