#!/bin/bash
# verifier-syntax.sh VERIFIER: the generated readiness verifier is POSIX sh:
# `sh -n` and `dash -n` accept it, it starts with #!/bin/sh, it is mode 0755,
# and it embeds exactly one well-formed revision line.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check.sh"
v=${1:?usage: verifier-syntax.sh VERIFIER}

check "verifier: sh -n" sh -n "$v"
check "verifier: dash -n" dash -n "$v"
check "verifier: bash --posix -n" bash --posix -n "$v"
if [ "$(head -n1 "$v")" = '#!/bin/sh' ]; then pass "verifier: #!/bin/sh"; else fail "verifier: #!/bin/sh" "$(head -n1 "$v")"; fi
mode=$(stat -c %a "$v")
if [ "$mode" = 755 ]; then pass "verifier: built with mode 0755"; else fail "verifier: built with mode 0755" "mode $mode"; fi
n=$(grep -cE "^EXPECTED_REVISION='revision=opencode-v2-pilot:git:[0-9a-f]{40};pty-source:sha256:[0-9a-f]{64}'\$" "$v")
if [ "$n" -eq 1 ]; then pass "verifier: one embedded revision line"; else fail "verifier: one embedded revision line" "$n found"; fi
if grep -q '@OPENCODE_REVISION_LINE@' "$v"; then fail "verifier: no placeholder left"; else pass "verifier: no placeholder left"; fi
# It must not take PATH from its caller: PATH is assigned before any command runs.
first_cmd=$(grep -nvE '^[[:space:]]*(#|$)' "$v" | head -n1)
case $first_cmd in
  *:PATH=/usr/sbin:/usr/bin:/sbin:/bin) pass "verifier: sets PATH first" "$first_cmd" ;;
  *) fail "verifier: sets PATH first" "$first_cmd" ;;
esac
checks_done
