#!/bin/sh
# vm-tests/acceptance/report-gate-test.sh: ctest acceptance.report-gate (host).
# Mutation cases of the report writer's Node SEA binding (report.py,
# report.node-sea-exact): with every suite check "pass", a report is "pass"
# only for a Node v26.4.x SEA whose gate is satisfied for that version and the
# SEA hash the report names. A Node 20 SEA, a gate that claims satisfaction for
# Node 20, another SEA's hash, or no gate at all never yield "pass".
set -u
here=$(cd "$(dirname "$0")" && pwd)
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
sea=$(printf '%064d' 0 | tr 0 a) other=$(printf '%064d' 0 | tr 0 b)
printf 'a.one\tpass\tfixture one\tok\nnode.sea-gate\tpass\tfixture gate\tok\n' > "$t/ledger.tsv"
failures=0
# case NAME WANT-RESULT WANT-SEA-CHECK NODE GATE-JSON
case_() {
  name=$1 want=$2 wantc=$3 node=$4 gate=$5
  printf '{"target":"test","revision":"r","artifacts":{"supervisor":"s","sea":"%s"},"versions":{"node_sea":"%s"},"node_sea_gate":%s,"started_epoch":0}\n' \
    "$sea" "$node" "$gate" > "$t/ctx.json"
  python3 "$here/report.py" "$t/ledger.tsv" "$t/ctx.json" "$t/r.json" "$t/r.txt" > /dev/null || { echo "FAIL $name: report.py exit $?"; failures=$((failures + 1)); return; }
  got=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=[x for x in d["checks"] if x["id"]=="report.node-sea-exact"]; print(d["result"], c[0]["result"] if len(c)==1 else "missing")' "$t/r.json")
  if [ "$got" = "$want $wantc" ]; then echo "PASS $name: $got"; else echo "FAIL $name: got '$got', want '$want $wantc'"; failures=$((failures + 1)); fi
}
case_ "the exact Node 26.4 SEA, gate satisfied for its hash" pass pass v26.4.0 \
  '{"node_version":"v26.4.0","satisfied":true,"sea_sha256":"'"$sea"'"}'
case_ "a Node 20 SEA (gate not satisfied)" incomplete not-satisfied v20.20.2 \
  '{"node_version":"v20.20.2","satisfied":false,"sea_sha256":null}'
case_ "a Node 20 SEA whose gate claims satisfaction" incomplete not-satisfied v20.20.2 \
  '{"node_version":"v20.20.2","satisfied":true,"sea_sha256":"'"$sea"'"}'
case_ "a Node 24 SEA" incomplete not-satisfied v24.11.0 \
  '{"node_version":"v24.11.0","satisfied":true,"sea_sha256":"'"$sea"'"}'
case_ "a Node 26.4 report whose gate names another SEA hash" fail fail v26.4.0 \
  '{"node_version":"v26.4.0","satisfied":true,"sea_sha256":"'"$other"'"}'
case_ "a Node 26.4 report whose gate is not satisfied" fail fail v26.4.0 \
  '{"node_version":"v26.4.0","satisfied":false,"sea_sha256":"'"$sea"'"}'
case_ "a gate for another version than the SEA's" incomplete not-satisfied v26.4.0 \
  '{"node_version":"v26.3.0","satisfied":true,"sea_sha256":"'"$sea"'"}'
case_ "no gate recorded" incomplete not-satisfied v26.4.0 'null'
echo "report-gate: $failures failed"
[ "$failures" -eq 0 ]
