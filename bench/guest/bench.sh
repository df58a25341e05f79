#!/bin/bash
# bench/guest/bench.sh: the benchmarks, run by bench/run through
# vm-tests/run bookworm or trixie (a booted systemd 252 or 257 container). Installs the built
# product from /artifacts with the Node suites' own set-up
# (vm-tests/node/common.sh: tools/install, then the application as the MainPID
# of opencode-v2.service, User=byk), measures, and leaves raw records in
# /results/records.jsonl and the environment in /results/env.json; bench/run
# turns them into the report. Checks record that each phase RAN and produced
# complete data; no check compares a figure with a threshold.
#
#   bench.sh [--phases LIST] [--size-mib N] [--rounds N] [--lat-n N]
#            [--lat-rounds N] [--levels LIST] [--stream-levels LIST]
#            [--stream-mib N] [--profile-mib N] [--keys N] [--neighbours LIST]
#            [--gap-ms N] [--spawns N]
. /vm-tests/lib/check.sh
. /vm-tests/node/common.sh

PHASES=throughput,latency,scale,stream,interactive,profile
# LEVELS: the issue #16 levels; a level above kMaxSessions (common/limits.h)
# records the refusals (too_many_sessions) beyond it.
SIZE_MIB=256 ROUNDS=5 LAT_N=50 LAT_ROUNDS=4 LEVELS=128,500,1000 STREAM_LEVELS=1,10,50
STREAM_MIB=16 PROFILE_MIB=32
# interactive: keystrokes per pace and case, the neighbour levels, the human
# pace's gap, and `true` starts per case under load.
KEYS=1000 NEIGHBOURS=0,10,50 GAP_MS=15 SPAWNS=20
while [ $# -gt 0 ]; do
  case "$1" in
    --phases) PHASES=$2 ;; --size-mib) SIZE_MIB=$2 ;; --rounds) ROUNDS=$2 ;;
    --lat-n) LAT_N=$2 ;; --lat-rounds) LAT_ROUNDS=$2 ;; --levels) LEVELS=$2 ;;
    --stream-levels) STREAM_LEVELS=$2 ;; --stream-mib) STREAM_MIB=$2 ;;
    --profile-mib) PROFILE_MIB=$2 ;; --keys) KEYS=$2 ;; --neighbours) NEIGHBOURS=$2 ;;
    --gap-ms) GAP_MS=$2 ;; --spawns) SPAWNS=$2 ;;
    *) fail "bench.sh: arguments" "unknown argument $1"; checks_done; exit 1 ;;
  esac
  shift 2
done
phase() { case ",$PHASES," in *,"$1",*) return 0 ;; esac; return 1; }

STAGE=$A/bench-stage
NODE_PTY=$STAGE/nodepty/node_modules/node-pty
DATA=/srv/opencode-bench      # not /tmp or /var/tmp: opencode-v2.service has PrivateTmp=yes
OUT=/results/records.jsonl
APP_OUT=$WORK/app.jsonl
RB="python3 /tests/rootbench.py"
: > "$OUT"

sup_pid() { systemctl show -P MainPID opencode-pty-supervisor.service; }
sample() { # LABEL [EXTRA-JSON]
  local pid; pid=$(sup_pid)
  [ "$pid" != 0 ] && $RB sample "$OUT" "$1" "$pid" "${2:-}" >/dev/null
}
# app MODE TIMEOUT [ENV=VALUE...]: one run of bench-app.js as opencode-v2.service;
# its records are appended to $OUT.
app() {
  local mode=$1 t=$2; shift 2
  : > "$APP_OUT"; chown byk:byk "$APP_OUT"
  app_run "$t" "/usr/bin/node /tests/bench-app.js" \
    OPENCODE_PTY_MODULE="$CLIENT/index.js" BENCH_MODE="$mode" BENCH_OUT="$APP_OUT" \
    BENCH_CTL="$WORK" BENCH_SUPERVISOR_PID="$(sup_pid)" BENCH_NODE_PTY="$NODE_PTY" "$@"
  local rc=$?
  cat "$APP_OUT" >> "$OUT"
  return $rc
}
session_count() {
  systemctl list-units --all --plain --no-legend 'opencode-pty-*.service' | awk '{print $1}' |
    grep -cE '^opencode-pty-[0-9a-f]{32}\.service$'
}
wait_no_sessions() { # SECONDS (a deadline: systemctl itself is slow with 1,000 units)
  local end=$(($(date +%s) + $1))
  while [ "$(session_count)" -gt 0 ]; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.2
  done
}
# stop_leftovers LABEL: session units the supervisor no longer tracks (it
# reports 0 sessions) are recorded and stopped, so that the next phase starts
# clean. A leftover is a finding, not something the bench hides.
stop_leftovers() {
  local n; n=$(session_count)
  local status; status=$(systemctl show -P StatusText opencode-pty-supervisor.service)
  echo "{\"kind\": \"leftover_units\", \"after\": \"$1\", \"units\": $n, \"supervisor_status\": \"$status\"}" >> "$OUT"
  [ "$n" -eq 0 ] && return 0
  systemctl list-units --all --plain --no-legend 'opencode-pty-*.service' | awk '{print $1}' |
    grep -E '^opencode-pty-[0-9a-f]{32}\.service$' | xargs -r -n 100 systemctl stop --no-block
  wait_no_sessions 120
}
# bus_health LABEL SINCE: what dbus-daemon and the supervisor said about limits.
bus_health() {
  python3 - "$1" "$2" >> "$OUT" <<'PY'
import json, subprocess, sys
def grep(args, pats):
    out = subprocess.run(["journalctl", "--no-pager", "-o", "cat", "--since", "@" + sys.argv[2]] + args,
                         capture_output=True, text=True).stdout.splitlines()
    return {p: sum(1 for l in out if p in l) for p in pats}
d = grep(["-u", "dbus.service"], ["max_match_rules_per_connection", "max_replies_per_connection",
                                 "Successfully activated service 'org.freedesktop.systemd1'"])
d.update(grep(["-u", "opencode-pty-supervisor.service"], ["not proven gone", "session failed", "connection refused"]))
print(json.dumps({"kind": "bus_health", "after": sys.argv[1], "counts": d}))
PY
}
# nrec KEY=VALUE...: how many records have every KEY equal to VALUE (as text).
nrec() {
  python3 - "$OUT" "$@" <<'PY'
import json, sys
want = [a.split("=", 1) for a in sys.argv[2:]]
n = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    n += all(str(r.get(k)) == v for k, v in want)
print(n)
PY
}

node_install
check "bench: node-pty staged in /artifacts/bench-stage" test -f "$NODE_PTY/package.json"

# --- environment and limits ---------------------------------------------------
# 1,000 sessions are 1,000 transient units of launcher->script and the command
# (about 3 tasks each) plus one connection and one PTY stream descriptor each
# in the supervisor. The limits in force are recorded; none needs raising in
# this container (see bench/README.md, "Limits").
python3 - > /results/env.json <<PY
import json, os, subprocess
def sh(c):
    try: return subprocess.run(c, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e: return "error: %s" % e
print(json.dumps({
  "systemd": sh("systemctl --version | head -n1"),
  "kernel": sh("uname -r"),
  "node": sh("node --version"),
  "script": sh("script --version"),
  "node_pty": sh("node -p \"require('$NODE_PTY/package.json').version\""),
  "supervisor_sha256": sh("sha256sum /usr/local/libexec/opencode-pty-supervisor | cut -d' ' -f1"),
  "launcher_sha256": sh("sha256sum /usr/local/libexec/opencode-pty-launcher | cut -d' ' -f1"),
  "client_sha256": sh("sha256sum /usr/local/libexec/opencode-pty-client | cut -d' ' -f1"),
  "nproc": sh("nproc"),
  "loadavg_start": sh("cat /proc/loadavg"),
  "limits": {
    "pid_max": sh("cat /proc/sys/kernel/pid_max"),
    "threads_max": sh("cat /proc/sys/kernel/threads-max"),
    "DefaultTasksMax": sh("systemctl show -P DefaultTasksMax"),
    "DefaultLimitNOFILE": sh("systemctl show -P DefaultLimitNOFILE"),
    "slice_TasksMax": sh("systemctl show -P TasksMax opencode-pty.slice"),
    "supervisor_LimitNOFILE": sh("systemctl show -P LimitNOFILE opencode-pty-supervisor.service"),
    "supervisor_TasksMax": sh("systemctl show -P TasksMax opencode-pty-supervisor.service"),
    "app_LimitNOFILE": sh("systemctl show -P LimitNOFILE opencode-v2.service"),
    "app_TasksMax": sh("systemctl show -P TasksMax opencode-v2.service"),
  },
  "phases": "$PHASES", "size_mib": $SIZE_MIB, "rounds": $ROUNDS, "lat_n": $LAT_N,
  "lat_rounds": $LAT_ROUNDS, "levels": "$LEVELS", "stream_levels": "$STREAM_LEVELS",
  "stream_mib": $STREAM_MIB, "profile_mib": $PROFILE_MIB,
  "keys": $KEYS, "neighbours": "$NEIGHBOURS", "gap_ms": $GAP_MS, "spawns": $SPAWNS,
}, indent=1))
PY
cat /results/env.json

# --- data files ---------------------------------------------------------------
# Printable text in lines of 100 bytes (99 + newline), so the PTY's ONLCR turns
# each line into 101 bytes: what reaches a reader is size * 1.01 exactly.
mkfile() { # PATH MIB
  [ -f "$1" ] && return 0
  python3 - "$1" "$2" <<'PY'
import os, random, sys
path, mib = sys.argv[1], int(sys.argv[2])
random.seed(7)
alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;-_=+"
block = bytearray()
while len(block) < 1 << 20:
    block += bytes(random.choice(alphabet) for _ in range(99)) + b"\n"
block = bytes(block[:(1 << 20) // 100 * 100])
with open(path + ".tmp", "wb") as f:
    left = mib << 20
    while left > 0:
        chunk = block[:min(left, len(block))]
        f.write(chunk)
        left -= len(chunk)
os.chmod(path + ".tmp", 0o644)
os.rename(path + ".tmp", path)
PY
}
install -d -m 0755 "$DATA"
BIG=$DATA/big-${SIZE_MIB}M STREAMF=$DATA/stream-${STREAM_MIB}M PROF=$DATA/profile-${PROFILE_MIB}M
phase throughput && mkfile "$BIG" "$SIZE_MIB"
phase stream && mkfile "$STREAMF" "$STREAM_MIB"
phase profile && mkfile "$PROF" "$PROFILE_MIB"
ls -l "$DATA"

# --- warm-up and the idle supervisor ------------------------------------------
# The socket starts the supervisor on the first connection; a few sessions
# warm it (and the page cache of the binaries) before anything is measured.
app latency 300 BENCH_LAT_N=3 BENCH_ROUND=-1
check "bench: warm-up sessions ran, supervisor is up" sh -c "[ \"\$(systemctl show -P MainPID opencode-pty-supervisor.service)\" != 0 ]"
wait_no_sessions 30 || stop_leftovers warm-up
sleep 1
sample idle '{"sessions": 0}'
# What the idle supervisor's RSS is made of, by mapping (smaps).
python3 - "$(sup_pid)" >> "$OUT" <<'PY'
import json, sys
rss, name = {}, None
for line in open("/proc/%s/smaps" % sys.argv[1]):
    f = line.split()
    if not f[0].endswith(":"):
        name = f[5] if len(f) > 5 else "[anon]"
    elif f[0] == "Rss:":
        rss[name] = rss.get(name, 0) + int(f[1])
print(json.dumps({"kind": "idle_rss_by_mapping", "kb": dict(sorted(rss.items(), key=lambda x: -x[1]))}))
PY

# --- throughput -----------------------------------------------------------------
if phase throughput; then
  node_variants=(script,stack,nodepty stack,nodepty,script nodepty,script,stack)
  root_variants=("script-py sdrun-pty" "sdrun-pty script-py")
  r=0
  while [ "$r" -lt "$ROUNDS" ]; do
    app throughput 1800 BENCH_FILE="$BIG" BENCH_ROUND=$r BENCH_VARIANTS="${node_variants[$((r % 3))]}"
    $RB throughput "$OUT" "$r" "$BIG" ${root_variants[$((r % 2))]}
    r=$((r + 1))
  done
  sample after-throughput
  n=$(nrec kind=throughput variant=stack)
  if [ "$n" -eq "$ROUNDS" ]; then pass "throughput: $ROUNDS stack runs recorded"; else fail "throughput: $ROUNDS stack runs recorded" "got $n"; fi
fi

# --- start latency --------------------------------------------------------------
if phase latency; then
  lat_since=$(date +%s)
  r=0
  while [ "$r" -lt "$LAT_ROUNDS" ]; do
    app latency 1800 BENCH_LAT_N="$LAT_N" BENCH_ROUND=$r
    $RB latency "$OUT" "$r" "$LAT_N"
    r=$((r + 1))
  done
  n=$(($(nrec kind=latency variant=stack cmd=true) - $(nrec kind=latency variant=stack cmd=true round=-1)))
  want=$((LAT_N * LAT_ROUNDS))
  if [ "$n" -eq "$want" ]; then pass "latency: $want stack sessions of true recorded"; else fail "latency: $want stack sessions of true recorded" "got $n"; fi
  wait_no_sessions 60 || stop_leftovers latency
  # Where a session's start goes, from the supervisor's own journal entries
  # (each carries SESSION=): authenticated -> START received ("starting PTY
  # unit") -> "PTY unit running" (started envelope) -> "PTY unit finished"
  # -> "PTY unit proven gone".
  journalctl -o json --no-pager -u opencode-pty-supervisor.service --since "@$lat_since" |
    python3 -c '
import json, statistics, sys
steps = ["connection authenticated", "starting PTY unit", "PTY unit running", "PTY unit finished", "PTY unit proven gone"]
by = {}
for line in sys.stdin:
    e = json.loads(line)
    s, m = e.get("SESSION"), e.get("MESSAGE")
    if not s or not isinstance(m, str):
        continue
    for i, st in enumerate(steps):
        if m.startswith(st):
            by.setdefault(s, {}).setdefault(i, int(e["__REALTIME_TIMESTAMP"]) / 1000.0)
out = {"kind": "latency_breakdown", "sessions": len(by), "median_ms": {}}
for i in range(len(steps) - 1):
    d = [t[i + 1] - t[i] for t in by.values() if i in t and i + 1 in t]
    if d:
        out["median_ms"]["%s -> %s" % (steps[i], steps[i + 1])] = round(statistics.median(d), 2)
print(json.dumps(out))' >> "$OUT"
  # One session each of `true` and `echo hi` with the supervisor under strace:
  # every D-Bus message on its connection to systemd, decoded from the wire,
  # with the connection's frames, in order (timeline.py). Round -2: not in
  # the latency figures.
  sup=$(sup_pid)
  strace -f -ttt -qq -xx -s 65536 \
    -e trace=accept4,socketpair,close,sendmsg,recvmsg,sendto,recvfrom,read,write,writev,readv \
    -o /results/strace-start.txt -p "$sup" &
  stracepid=$!
  sleep 1
  app latency 300 BENCH_LAT_N=1 BENCH_ROUND=-2
  kill -INT "$stracepid"; wait "$stracepid"
  if python3 /tests/timeline.py /results/strace-start.txt > "$WORK/timeline.json" && [ -s "$WORK/timeline.json" ]; then
    cat "$WORK/timeline.json" >> "$OUT"
    pass "latency: one traced start decoded" "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["sessions"]), "sessions,", sum(len(s["events"]) for s in d["sessions"]), "events")' "$WORK/timeline.json")"
  else
    fail "latency: one traced start decoded" "timeline.py failed on /results/strace-start.txt"
  fi
  gzip -f /results/strace-start.txt
  wait_no_sessions 60 || stop_leftovers latency-trace
fi

# --- scale: concurrent idle sessions -------------------------------------------
if phase scale; then
  scale_since=$(date +%s)
  rm -f "$WORK"/ready-* "$WORK"/go-*
  sample before-scale '{"sessions": 0}'
  app scale 3600 BENCH_LEVELS="$LEVELS" &
  apppid=$!
  for level in ${LEVELS//,/ }; do
    n=0
    while [ ! -f "$WORK/ready-$level" ] && kill -0 "$apppid" 2>/dev/null && [ "$n" -lt 12000 ]; do
      sleep 0.1; n=$((n + 1))
    done
    [ -f "$WORK/ready-$level" ] || { fail "scale: level $level reached" "the app stopped or timed out"; break; }
    reached=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reached"])' "$WORK/ready-$level")
    units=$(session_count)
    tasks=$(ps -L -u byk --no-headers | wc -l)   # byk's tasks: the sessions' and the app's
    sample "scale-$level" "{\"sessions\": $reached, \"level\": $level, \"units\": $units, \"byk_tasks\": $tasks, \"hold\": \"start\"}"
    sleep 10   # idle: what does the supervisor cost while nothing happens?
    sample "scale-$level-held" "{\"sessions\": $reached, \"level\": $level, \"hold\": \"end\", \"hold_s\": 10}"
    if [ "$reached" -eq "$level" ]; then pass "scale: $level concurrent sessions ($units units, $tasks tasks of byk)"
    else fail "scale: $level concurrent sessions" "reached $reached: $(cat "$WORK/ready-$level")"; fi
    touch "$WORK/go-$level"
  done
  wait "$apppid"
  t0=$(date +%s.%N)
  if wait_no_sessions 180; then
    pass "scale: every session unit gone after the application closed all its sessions"
  else
    # Recorded (leftover_units, bus_health) and reported; not a failure of
    # the bench, which goes on with a clean slate.
    pass "scale: session units left after close: $(session_count) (recorded as a finding)"
  fi
  echo "{\"kind\": \"scale_gone\", \"seconds\": $(python3 -c "print(round($(date +%s.%N) - $t0, 2))")}" >> "$OUT"
  bus_health scale "$scale_since"
  stop_leftovers scale
  sleep 2
  sample after-scale '{"sessions": 0}'
fi

# --- scale: concurrent streaming sessions ----------------------------------------
if phase stream; then
  app stream 3600 BENCH_STREAM_LEVELS="$STREAM_LEVELS" BENCH_STREAM_FILE="$STREAMF"
  n=$(nrec kind=stream)
  want=$(echo "$STREAM_LEVELS" | tr ',' '\n' | wc -l)
  if [ "$n" -eq "$want" ]; then pass "stream: $want levels recorded"; else fail "stream: $want levels recorded" "got $n"; fi
  wait_no_sessions 120 || stop_leftovers stream
  sample after-stream '{"sessions": 0}'
fi

# --- interactive: a keystroke's echo next to streaming sessions -----------------
# The stack and node-pty in the application (bench-app.js), then systemd-run
# --pty driven by root's Python (rootbench.py), each next to 0/10/50 `yes`
# sessions of its own kind read by the same process.
if phase interactive; then
  app interactive 3600 BENCH_KEYS="$KEYS" BENCH_NEIGHBOURS="$NEIGHBOURS" BENCH_GAP_MS="$GAP_MS" \
    BENCH_SPAWNS="$SPAWNS" BENCH_VARIANTS=stack,nodepty
  wait_no_sessions 120 || stop_leftovers interactive
  $RB interactive "$OUT" 0 "$KEYS" "$GAP_MS" "$NEIGHBOURS"
  want=$(($(echo "$NEIGHBOURS" | tr ',' '\n' | wc -l) * 2))
  for v in stack nodepty sdrun-pty; do
    n=$(nrec kind=interactive variant=$v)
    if [ "$n" -eq "$want" ]; then pass "interactive: $want $v cases recorded"; else fail "interactive: $want $v cases recorded" "got $n"; fi
  done
  sample after-interactive '{"sessions": 0}'
fi

# --- profile: callgrind on the supervisor during a throughput run ----------------
# perf has no hardware counters on these VMs (`perf stat -e instructions` says
# <not supported>), so instructions are counted with callgrind. valgrind is
# the host's (same Debian 12 glibc), staged in /artifacts/bench-stage/valgrind.
# A runtime drop-in relaxes exactly what valgrind needs (W+X memory for its
# JIT, syscalls outside the filter, a writable /results) for this run only.
if phase profile; then
  # 1. System calls of the unmodified supervisor during one stack run
  #    (strace from the start of the session to its end). strace stops the
  #    supervisor at every call, so it runs slower and may read bigger
  #    batches: the counts are an upper bound on the calls per MiB.
  sup=$(sup_pid)
  strace -f -qq -s 0 -e trace=recvfrom,recvmsg,sendto,sendmsg,read,write,writev,epoll_wait,epoll_ctl,epoll_pwait \
    -o /results/strace-pump.txt -p "$sup" &
  stracepid=$!
  sleep 1
  app throughput 1800 BENCH_FILE="$PROF" BENCH_ROUND=0 BENCH_VARIANTS=stack BENCH_PROFILE=strace
  kill -INT "$stracepid"; wait "$stracepid"
  python3 - /results/strace-pump.txt >> "$OUT" <<'PY'
import collections, json, re, sys
# The whole trace includes the app's start (daemon-reload: a burst of D-Bus
# signals) and the session's start and end; "transfer" is the part between
# the first and the last sendto of more than 1 KiB (the pump at work).
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"^(?:\d+\s+)?(\w+)\((\d+)?.*\)\s+=\s+(-?\d+)", line)
    if m:
        rows.append((m.group(1), int(m.group(3)), "EAGAIN" in line))
big = [i for i, (n, ret, _) in enumerate(rows) if n == "sendto" and ret > 1024]
def summarize(part):
    calls, size = collections.Counter(), collections.defaultdict(list)
    for name, ret, _ in part:
        calls[name] += 1
        if name in ("recvfrom", "sendto", "recvmsg", "sendmsg", "read", "write", "writev") and ret > 0:
            size[name].append(ret)
    return {"calls": dict(calls), "bytes": {k: sum(v) for k, v in size.items()},
            "mean_bytes": {k: round(sum(v) / len(v), 1) for k, v in size.items() if v},
            "eagain": sum(1 for r in part if r[2])}
out = {"kind": "strace_pump", "whole": summarize(rows)}
if big:
    out["transfer"] = summarize(rows[big[0]:big[-1] + 1])
print(json.dumps(out))
PY
  rm -f /results/strace-pump.txt
  # 2. Instructions (callgrind) of the supervisor during one stack run.
  VG=$STAGE/valgrind
  systemctl stop opencode-pty-supervisor.service
  mkdir -p /run/systemd/system/opencode-pty-supervisor.service.d
  cat > /run/systemd/system/opencode-pty-supervisor.service.d/90-bench-callgrind.conf <<UNIT
[Service]
ExecStart=
ExecStart=$VG/bin/valgrind.bin --tool=callgrind --callgrind-out-file=/results/callgrind.out.%%p /usr/local/libexec/opencode-pty-supervisor
Environment=VALGRIND_LIB=$VG/libexec/valgrind
MemoryDenyWriteExecute=no
SystemCallFilter=
ReadWritePaths=/results
TimeoutStartSec=120
UNIT
  systemctl daemon-reload
  app throughput 1800 BENCH_FILE="$PROF" BENCH_ROUND=0 BENCH_VARIANTS=stack BENCH_PROFILE=callgrind
  # bench-app read no pid before the first connection: re-read for the record.
  vgpid=$(sup_pid)
  systemctl stop opencode-pty-supervisor.service
  rm -f /run/systemd/system/opencode-pty-supervisor.service.d/90-bench-callgrind.conf
  systemctl daemon-reload
  if ls /results/callgrind.out.* >/dev/null 2>&1; then
    pass "profile: callgrind output of the supervisor (pid $vgpid)" "$(ls -l /results/callgrind.out.*)"
  else
    fail "profile: callgrind output of the supervisor" "none written; see journal.txt"
  fi
fi

# How the CPU was shared, read after the sessions ran (systemd turns the cpu
# controller on only once a unit of the slice asks for it): the cgroup
# version, the controllers the root hands down (cpu: the slice's CPUWeight=
# acts), the slice's weight and whether the kernel groups by session.
python3 - /results/env.json <<'PY'
import json, os, subprocess, sys
def read(path):
    try: return open(path).read().strip()
    except OSError as e: return "unreadable: %s" % e.strerror
d = json.load(open(sys.argv[1]))
d["loadavg_end"] = read("/proc/loadavg")
d["sched"] = {
  "cgroup": "v2" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "v1",
  "root_subtree_control": read("/sys/fs/cgroup/cgroup.subtree_control"),
  "slice_CPUWeight": subprocess.run(["systemctl", "show", "-P", "CPUWeight", "opencode-pty.slice"],
                                    capture_output=True, text=True).stdout.strip(),
  "sched_autogroup_enabled": read("/proc/sys/kernel/sched_autogroup_enabled"),
}
json.dump(d, open(sys.argv[1], "w"), indent=1)
PY
check "bench: records written" test -s "$OUT"
checks_done
