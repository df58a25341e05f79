#!/bin/sh
# client/node/probe/dryrun-test.sh SEA HELPER: ctest node.probe-dryrun (root).
# Runs the inheritance probe on this host against a stand-in supervisor and the
# real helper binary, twice: clean (every check must pass) and with a stray
# inherited fd 251 (the negative control: the probe must report the leak and
# the helper must refuse with extra_fd). It tests the probe and the SEA app,
# never the product's acceptance (that is vm.node-probe.*).
set -u
here=$(cd "$(dirname "$0")" && pwd)
sea=$1 helper=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
python3 "$here/probe.py" "$sea" --dry-run "$tmp/sock" "$helper" --out "$tmp/clean.json" || status=1
python3 "$here/probe.py" "$sea" --dry-run "$tmp/sock2" "$helper" --leak-fd 251 --out "$tmp/leak.json" > "$tmp/leak.txt"
rc=$?
python3 - "$tmp/leak.json" "$rc" <<'PY' || status=1
import json, sys
r = json.load(open(sys.argv[1])); rc = int(sys.argv[2])
c = {x['name']: x['ok'] for x in r['checks']}
helper = [e for e in r['trace']['execs'] if 'opencode-pty-client' in e['exe']]
err = (r.get('app') or {}).get('exit', {}).get('error') or {}
ok = (rc == 1 and not r['inheritance_ok'] and helper and 251 in [f['fd'] for f in helper[0]['fds']]
      and not c['helper: descriptor table is exactly 0,1,2,3,4']
      and not c['unrelated children: every one has exactly 0,1,2 and neither the socket nor the directory']
      and err.get('code') == 'helper_failed' and 'extra_fd' in err.get('message', ''))
print('negative control (stray fd 251):', 'DETECTED' if ok else 'NOT DETECTED', '| probe exit', rc, '| app error', err)
sys.exit(0 if ok else 1)
PY
exit $status
