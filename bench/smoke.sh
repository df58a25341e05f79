#!/bin/sh
# bench/smoke.sh: ctest bench.smoke. Proves the bench code without running the
# benchmark (that is bench/run, never part of the test command): the scripts
# parse, and the report (summary, Markdown table, PNG chart) is rebuilt from
# the raw records of every committed run in bench/results/.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
latest=$(ls "$here"/results/*.json 2>/dev/null | sort | tail -n 1)
[ -n "$latest" ] || { echo "bench.smoke: no bench/results/*.json"; echo "0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
if bash -n "$here/run" && bash -n "$here/guest/bench.sh"; then ok "shell scripts parse"; else ko "shell scripts parse"; fi
if node --check "$here/guest/bench-app.js"; then ok "bench-app.js parses"; else ko "bench-app.js parses"; fi
if python3 -m py_compile "$here/guest/rootbench.py" "$here/lib/report.py" "$here/lib/chart.py"; then ok "Python parses"; else ko "Python parses"; fi
# Every committed run: its report is rebuilt, and the table has a row for each
# phase that run measured (env.phases; a partial run has fewer).
for run in $(ls "$here"/results/*.json | sort); do
  name=$(basename "$run")
  rm -f "$tmp"/*
  phases=$(python3 - "$run" "$tmp" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
with open(sys.argv[2] + "/records.jsonl", "w") as f:
    for r in d["records"]:
        f.write(json.dumps(r) + "\n")
json.dump(d["env"], open(sys.argv[2] + "/env.json", "w"))
json.dump(d["host"], open(sys.argv[2] + "/host.json", "w"))
print(d["env"]["phases"])
PY
  )
  if python3 "$here/lib/report.py" --records "$tmp/records.jsonl" --env "$tmp/env.json" --host "$tmp/host.json" \
       --json "$tmp/out.json" --png "$tmp/out.png" > "$tmp/table.md"; then ok "$name: report rebuilt"
  else ko "$name: report rebuilt"; fi
  if [ "$(head -c 8 "$tmp/out.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then ok "$name: chart is a PNG"; else ko "$name: chart is a PNG"; fi
  for pair in "throughput:throughput" "latency:start latency" "scale:idle supervisor" "scale:concurrent idle sessions" \
              "stream:streaming sessions" "profile:supervisor system calls per MiB"; do
    phase=${pair%%:*} row=${pair#*:}
    case ",$phases," in *",$phase,"*) ;; *) continue ;; esac
    if grep -qF "$row" "$tmp/table.md"; then ok "$name: table has $row rows"; else ko "$name: table has $row rows"; fi
  done
done
echo "bench.smoke: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
