#!/bin/sh
# vm-tests/node/example.sh: runs the README example (client/node/examples/hello.js)
# the way a reader would, as the application service, and shows its output.
#   vm-tests/run bookworm --artifacts build/release vm-tests/node/example.sh
. /vm-tests/lib/check.sh
. /tests/common.sh
node_install
app_run 60 "/usr/bin/node $CLIENT/examples/hello.js" OPENCODE_PTY_MODULE=$CLIENT/index.js HOME=/home/byk
rc=$?
journalctl -o cat --no-pager -u opencode-v2.service | grep -v -e '^Started ' -e '^Starting ' -e '^opencode-v2.service: ' \
  -e '^Stopped ' -e '^Finished ' -e 'Deactivated successfully' -e 'Consumed ' | tee /results/example.txt
if [ "$rc" -eq 0 ]; then pass "example: exited 0" ; else fail "example: exited 0" "exit $rc"; fi
check "example: started a unit, echoed the input from a real tty, exit code 7" sh -c '
  grep -q "^started opencode-pty-[0-9a-f]\{32\}\.service$" /results/example.txt &&
  grep -q "you said: hello" /results/example.txt && grep -q "/dev/pts/" /results/example.txt &&
  grep -q "^exit code=7 signal=null$" /results/example.txt'
check "example: no session unit is left" no_session_units
checks_done
