#!/bin/sh
# bench/smoke.sh: ctest bench.smoke. Proves the bench code without running the
# benchmark (that is bench/run, never part of the test command): the scripts
# parse; the report (summary, Markdown table, PNG chart) is built from raw
# records (bench/tests/fixture: 155 of the 1,339 records of run
# 20261202T133950Z, every phase, 3 latency sessions per case and round) and
# its summary carries no records; the interactive phase's summary and rows
# from real records of a small run (bench/tests/fixture/interactive.jsonl);
# and every committed run in bench/results/ is a small summary without raw
# records whose table re-renders from the summary alone (report.py
# --from-summary). Only the newest run's chart is drawn from its summary,
# beside the fixtures' charts drawn from raw records: matplotlib is most of
# this test's time, and the older summaries go through the same drawing code,
# so they are parsed and their tables re-rendered, not drawn. It also draws
# vm-tests/faults/plot.py's two charts, which share bench/lib/figstyle.py,
# from small fixtures (bench/tests/fixture/plot: a soak.json and a
# faults.json with the churn case), checks the churn chart's OUT.json against
# the fixture, and that plot.py without bench/lib on PYTHONPATH stops with
# its message. The charts need matplotlib in Debian's Python
# (python3-matplotlib, from tools/install-deps); without it this test fails
# and says so.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
latest=$(ls "$here"/results/*.json 2>/dev/null | sort | tail -n 1)
[ -n "$latest" ] || { echo "bench.smoke: no bench/results/*.json"; echo "0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
ko() { fail=$((fail + 1)); echo "FAIL: $1"; }
PY=/usr/bin/python3   # Debian's, where python3-matplotlib is (not a pyenv python3 on PATH)
if "$PY" -c 'import matplotlib'; then ok "matplotlib importable by $PY"
else ko "matplotlib importable by $PY (apt-get install python3-matplotlib, or tools/install-deps)"; fi
if bash -n "$here/run" && bash -n "$here/guest/bench.sh"; then ok "shell scripts parse"; else ko "shell scripts parse"; fi
if node --check "$here/guest/bench-app.js"; then ok "bench-app.js parses"; else ko "bench-app.js parses"; fi
if python3 -m py_compile "$here/guest/rootbench.py" "$here/guest/timeline.py" "$here/lib/report.py" "$here/lib/chart.py" \
     "$here/lib/figstyle.py"; then ok "Python parses"; else ko "Python parses"; fi

# --- the start timeline decoder, on real traces ---------------------------------
# in_order.py JSON [--absent PREFIX] PREFIX...: the one session's events
# (with their envelope type) hold an event starting with each PREFIX, in that
# order, none starting with the --absent one, at times from accept4 onwards.
cat > "$tmp/in_order.py" <<'PY'
import json, sys
args = sys.argv[2:]
absent = args[1] if args[:1] == ["--absent"] else None
order = args[2:] if absent else args
d = json.load(open(sys.argv[1]))
assert d["kind"] == "start_timeline" and len(d["sessions"]) == 1, d.get("sessions")
events = d["sessions"][0]["events"]
ev = [e["what"] + (" " + e["envelope"] if e.get("envelope") else "") for e in events]
i = 0
for want in order:
    while i < len(ev) and not ev[i].startswith(want):
        i += 1
    assert i < len(ev), "not found in order: %s" % want
    i += 1
assert absent is None or not any(e.startswith(absent) for e in ev), "found: %s" % absent
ms = [e["ms"] for e in events]
assert ms == sorted(ms) and ms[0] == 0, "times not from accept4 onwards"
PY

# bench/tests/fixture/strace-start.txt.gz: one `true` session of a bench run
# (20261205, bookworm), the supervisor under strace -f -ttt -xx -s 65536. The
# decoded events must name the start's D-Bus calls, their replies and the
# frames in the order the supervisor's design had them then.
if zcat "$here/tests/fixture/strace-start.txt.gz" > "$tmp/strace.txt" &&
   python3 "$here/guest/timeline.py" "$tmp/strace.txt" > "$tmp/timeline.json" &&
   python3 "$tmp/in_order.py" "$tmp/timeline.json" "accept4: connection fd" "D-Bus -> call GetUnitByPIDFD" \
     "connection in START" "D-Bus -> call StartTransientUnit" "D-Bus <- reply of StartTransientUnit" \
     "D-Bus <- signal JobRemoved" "PTY stream out b'G'" "connection out EVENT started" \
     "unit channel in packet b'E'" "unit channel in packet b'X'" "D-Bus -> call StopUnit" \
     "D-Bus -> call GetUnit" "D-Bus <- error of GetUnit" "connection out EVENT exit"
then
  ok "timeline.py: a real trace decodes to the start's calls, replies and frames in order"
else
  ko "timeline.py: a real trace decodes to the start's calls, replies and frames in order"
fi

# bench/tests/fixture/strace-split-call.txt.gz: one `true` session of run
# 20261207T130816Z (bookworm), where strace -f split the loop's recvmsg on the
# systemd connection in two ("<unfinished ...>", "<... recvmsg resumed>")
# because the closer thread made a call meanwhile. The decoder joins the two
# and keeps the D-Bus stream to the end: the finished unit is only proven gone
# (ResetFailedUnit, GetUnit), never stopped again, before the exit.
if zcat "$here/tests/fixture/strace-split-call.txt.gz" > "$tmp/split.txt" &&
   grep -q '<unfinished \.\.\.>$' "$tmp/split.txt" && grep -q '<\.\.\. recvmsg resumed>' "$tmp/split.txt" &&
   python3 "$here/guest/timeline.py" "$tmp/split.txt" > "$tmp/split.json" &&
   python3 "$tmp/in_order.py" "$tmp/split.json" --absent "D-Bus -> call StopUnit" \
     "D-Bus -> call StartTransientUnit" "D-Bus <- signal JobRemoved" "PTY stream out b'G'" \
     "unit channel in packet b'X'" "D-Bus -> call ResetFailedUnit" "D-Bus -> call GetUnit" \
     "D-Bus <- error of GetUnit" "connection out EVENT exit"
then
  ok "timeline.py: a call strace split in two is joined and the D-Bus stream decodes to the end"
else
  ko "timeline.py: a call strace split in two is joined and the D-Bus stream decodes to the end"
fi

is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
# has_rows NAME TABLE PHASES: the table has a row for each phase measured.
has_rows() {
  for pair in "throughput:throughput" "latency:start latency" "scale:idle supervisor" "scale:concurrent idle sessions" \
              "stream:streaming sessions" "profile:supervisor system calls per MiB" "interactive:keystroke echo" \
              "interactive:spawn → exit next to"; do
    phase=${pair%%:*} row=${pair#*:}
    case ",$3," in *",$phase,"*) ;; *) continue ;; esac
    if grep -qF "$row" "$2"; then ok "$1: table has $row rows"; else ko "$1: table has $row rows"; fi
  done
}

# --- from raw records (what bench/run does after a run) ---------------------------
fx=$here/tests/fixture
if "$PY" "$here/lib/report.py" --records "$fx/records.jsonl" --env "$fx/env.json" --host "$fx/host.json" \
     --callgrind "$here/results/20261202T133950Z-callgrind.txt" \
     --json "$tmp/fixture.json" --raw-json "$tmp/fixture-full.json" --png "$tmp/fixture.png" > "$tmp/fixture.md"; then
  ok "fixture: report built from raw records"
else
  ko "fixture: report built from raw records"
fi
if is_png "$tmp/fixture.png"; then ok "fixture: chart is a PNG"; else ko "fixture: chart is a PNG"; fi
has_rows fixture "$tmp/fixture.md" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["phases"])' "$fx/env.json")"
if python3 - "$tmp/fixture.json" "$tmp/fixture-full.json" "$fx/records.jsonl" <<'PY'
import json, sys
s, full = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
n = sum(1 for line in open(sys.argv[3]) if line.strip())
assert "records" not in s, "the summary carries records"
assert s["raw"]["records"] == n and len(full["records"]) == n, (s["raw"], len(full["records"]), n)
assert s["scale"]["levels"] and s["latency"]["ratios"] and s["throughput"]["ratios"] and s["profile"]["total_ir"]
PY
then ok "fixture: the summary has no records (count and hash only), --raw-json has all $(wc -l < "$fx/records.jsonl")"
else ko "fixture: the summary has no records, --raw-json has all"; fi

# --- the interactive phase, from real records --------------------------------------
# bench/tests/fixture/interactive: every record of a small real run (`bench/run
# --phases interactive -- --keys 40 --spawns 3`, bookworm, 20261206T110515Z).
# The summary's percentiles and ratios are recomputed here from the raw
# records, independently of report.py, and must agree.
fi=$here/tests/fixture/interactive
if "$PY" "$here/lib/report.py" --records "$fi/records.jsonl" --env "$fi/env.json" --host "$fi/host.json" \
     --json "$tmp/inter.json" --png "$tmp/inter.png" > "$tmp/inter.md"; then
  ok "interactive fixture: report built from raw records"
else
  ko "interactive fixture: report built from raw records"
fi
if is_png "$tmp/inter.png"; then ok "interactive fixture: chart is a PNG"; else ko "interactive fixture: chart is a PNG"; fi
has_rows "interactive fixture" "$tmp/inter.md" interactive
if "$PY" - "$tmp/inter.json" "$fi/records.jsonl" "$tmp/inter.md" <<'PY'
import json, math, sys
s = json.load(open(sys.argv[1]))["interactive"]
recs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
md = open(sys.argv[3]).read()
def p(xs, q):
    xs = sorted(xs)
    return xs[max(1, math.ceil(len(xs) * q / 100)) - 1]
keyed = {}
for r in recs:
    if r.get("kind") == "interactive":
        keyed[(r["variant"], r["neighbours"], r["pace"])] = r
assert len(keyed) == 18 and len(s["cases"]) == 18, (len(keyed), len(s["cases"]))
for (v, n, pace), r in keyed.items():
    c = s["cases"]["%s|%d|%s" % (v, n, pace)]
    assert c["keys"] == len(r["echo_ms"]) == 40, c
    assert abs(c["echo_p50_ms"] - p(r["echo_ms"], 50)) < 0.006 and abs(c["echo_p99_ms"] - p(r["echo_ms"], 99)) < 0.006, (c, v, n, pace)
    if n:
        mibs = r["neighbour_bytes"] / 2**20 / (r["window_ms"] / 1000)
        assert abs(c["neighbour_mib_per_s"] - mibs) < 0.06, (c, mibs)
    if v == "stack" and n:
        cpu = (r["sup_user_s"] + r["sup_sys_s"]) * 1000 / (r["neighbour_bytes"] / 2**20)
        assert abs(c["sup_cpu_ms_per_mib"] - cpu) < 0.006, (c, cpu)
for rt in s["ratios"]:
    b, st = s["cases"]["%s|%d|%s" % (rt["baseline"], rt["neighbours"], rt["pace"])], s["cases"]["stack|%d|%s" % (rt["neighbours"], rt["pace"])]
    assert abs(rt["ratio_p50"] - b["echo_p50_ms"] / st["echo_p50_ms"]) < 0.002, rt
assert len(s["ratios"]) == 12, len(s["ratios"])
sp = {(r["variant"], r["neighbours"]): r["exit_ms"] for r in recs if r.get("kind") == "interactive_spawn"}
for n in (10, 50):
    d = s["spawn"]["stack|%d" % n]
    assert abs(d["p50_over_idle"] - p(sp[("stack", n)], 50) / p(sp[("stack", 0)], 50)) < 0.006, d
    want = (p(sp[("stack", n)], 50) / p(sp[("stack", 0)], 50)) / (p(sp[("nodepty", n)], 50) / p(sp[("nodepty", 0)], 50))
    assert abs(d["slowdown_over_nodepty_slowdown"] - want) < 0.02, (d, want)
# human pace comes before fast pace in the table, for each neighbour level
rows = [l for l in md.splitlines() if l.startswith("| keystroke echo")]
assert len(rows) == 6 and "human" in rows[0] and "fast" in rows[1], rows[:2]
PY
then ok "interactive fixture: percentiles, throughput, CPU per MiB and ratios agree with the raw records"
else ko "interactive fixture: percentiles, throughput, CPU per MiB and ratios agree with the raw records"; fi

# --- vm-tests/faults/plot.py: the soak and churn charts, in figstyle's style ----------
# Its only callers are the VM suites (vm-tests/soak, vm-tests/faults/campaign),
# which draw on the host after a run: nothing else in the test command would
# see a break in plot.py or in its use of bench/lib/figstyle.py. The fixtures
# (bench/tests/fixture/plot, see its README) have the shape soak.py and
# faults.py write; they are drawn as those callers draw them.
plot=$here/../vm-tests/faults/plot.py fp=$here/tests/fixture/plot
if PYTHONPATH=$here/lib "$PY" "$plot" soak "$fp/soak.json" "$tmp/soak.png"; then ok "plot.py soak: drawn from the fixture"
else ko "plot.py soak: drawn from the fixture"; fi
if is_png "$tmp/soak.png"; then ok "plot.py soak: chart is a PNG"; else ko "plot.py soak: chart is a PNG"; fi
if PYTHONPATH=$here/lib "$PY" "$plot" churn "$fp/faults.json" "$tmp/churn.png" "$tmp/churn.json"; then
  ok "plot.py churn: drawn from the fixture"
else
  ko "plot.py churn: drawn from the fixture"
fi
if is_png "$tmp/churn.png"; then ok "plot.py churn: chart is a PNG"; else ko "plot.py churn: chart is a PNG"; fi
# OUT.json is what plot.py's docstring promises (the samples on a cycles
# axis), recomputed here from faults.json independently of churn_data().
if python3 - "$fp/faults.json" "$tmp/churn.json" <<'PY'
import json, sys
r, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
case = r["cases"]["churn"]
reps = case["repetitions"]
want = {"seed", "cycles", "rounds", "baseline", "after_each_round", "round_starts", "cycles_axis", "fds", "RssAnon", "VmRSS"}
assert set(d) == want, sorted(set(d) ^ want)
sizes = [rep["app_cycles"] + rep["root_cycles"] for rep in reps]
starts = [sum(sizes[:i]) for i in range(len(sizes))]
assert d["seed"] == r["seed"] and d["rounds"] == len(reps) and d["cycles"] == sum(sizes), (d["seed"], d["rounds"], d["cycles"])
assert d["round_starts"] == starts, d["round_starts"]
keys = ("fds", "RssAnon", "VmRSS")
assert d["baseline"] == {k: case["baseline"][k] for k in keys}, d["baseline"]
assert d["after_each_round"] == [{k: rep["invariant"][k] for k in keys} for rep in reps], d["after_each_round"]
samples = [(i, s) for i, rep in enumerate(reps) for s in rep["samples"] if "fds" in s and "t" in s]
assert samples and all(len(d[k]) == len(samples) for k in ("cycles_axis",) + keys), [len(d[k]) for k in ("cycles_axis",) + keys]
for k in keys:
    assert d[k] == [s.get(k) for _, s in samples], k
for x, (i, _) in zip(d["cycles_axis"], samples):
    assert starts[i] <= x <= starts[i] + sizes[i], (x, i)
assert d["cycles_axis"] == sorted(d["cycles_axis"]), "the cycles axis goes back"
PY
then ok "plot.py churn: OUT.json has the promised fields, every sample on its round's stretch of the cycles axis"
else ko "plot.py churn: OUT.json has the promised fields, every sample on its round's stretch of the cycles axis"; fi
# Without bench/lib on the path plot.py must stop with its message naming the
# folder (what a caller that forgot PYTHONPATH sees), not a traceback or a chart.
rm -f "$tmp/nopath.png"
if env -u PYTHONPATH "$PY" "$plot" soak "$fp/soak.json" "$tmp/nopath.png" 2> "$tmp/nopath.err"; then
  ko "plot.py without bench/lib on PYTHONPATH: exits non-zero (it exited 0)"
elif grep -q "figstyle.py is in bench/lib, which must be on PYTHONPATH" "$tmp/nopath.err" && ! grep -q Traceback "$tmp/nopath.err" &&
     [ ! -e "$tmp/nopath.png" ]; then
  ok "plot.py without bench/lib on PYTHONPATH: exits non-zero with its message, no chart"
else
  ko "plot.py without bench/lib on PYTHONPATH: exits non-zero with its message, no chart: $(head -c 300 "$tmp/nopath.err")"
fi

# --- every committed run: a small summary that re-renders alone -------------------
# Every run's table; the newest run's chart too (see the opening comment).
for run in $(ls "$here"/results/*.json | sort); do
  name=$(basename "$run")
  rm -f "$tmp"/out.*
  if python3 - "$run" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
size = os.path.getsize(sys.argv[1])
print("%d bytes, raw %s" % (size, d.get("raw")))
sys.exit(0 if "records" not in d and size < 200_000 else 1)
PY
  then ok "$name: a summary without raw records, under 200 kB"; else ko "$name: a summary without raw records, under 200 kB"; fi
  if [ "$run" = "$latest" ]; then
    if "$PY" "$here/lib/report.py" --from-summary "$run" --png "$tmp/out.png" > "$tmp/out.md"; then ok "$name: table and chart re-rendered from the summary"
    else ko "$name: table and chart re-rendered from the summary"; fi
    if is_png "$tmp/out.png"; then ok "$name: chart is a PNG"; else ko "$name: chart is a PNG"; fi
  else
    if "$PY" "$here/lib/report.py" --from-summary "$run" > "$tmp/out.md"; then ok "$name: table re-rendered from the summary"
    else ko "$name: table re-rendered from the summary"; fi
  fi
  has_rows "$name" "$tmp/out.md" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["env"]["phases"])' "$run")"
done
echo "bench.smoke: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
