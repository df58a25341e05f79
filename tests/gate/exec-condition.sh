#!/bin/bash
# exec-condition.sh UNIT...: the pilot's check that opencode-v2.service (the
# source and the staged copy) carries exactly
# ExecCondition=/usr/local/libexec/opencode-pty-verify-readiness, once, in
# [Service], and no other ExecCondition= line.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check.sh"
want='ExecCondition=/usr/local/libexec/opencode-pty-verify-readiness'
for u in "$@"; do
  n=$(grep -cxF "$want" "$u")
  other=$(grep -c '^ExecCondition=' "$u")
  section=$(awk -v w="$want" '/^\[/{s=$0} $0==w{print s}' "$u")
  if [ "$n" -eq 1 ] && [ "$other" -eq 1 ] && [ "$section" = "[Service]" ]; then
    pass "unit: $u has the ExecCondition line"
  else
    fail "unit: $u has the ExecCondition line" "exact=$n any=$other section=$section"
  fi
done
checks_done
