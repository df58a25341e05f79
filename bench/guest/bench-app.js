'use strict';
// bench/guest/bench-app.js: the application side of the benchmarks. Runs as
// the MainPID of opencode-v2.service (User=byk) inside the bench container,
// through the Node client module (OPENCODE_PTY_MODULE), and appends one JSON
// line per measurement to BENCH_OUT. It measures; it never judges: no figure
// here is compared with a threshold.
//
// BENCH_MODE:
//   throughput  BENCH_FILE through each of BENCH_VARIANTS (comma list, run in
//               that order): "stack" (cat FILE in a PTY unit via the
//               supervisor), "script" (bare `script -q -e -f -c "cat FILE"
//               /dev/null`, stdout a pipe read by this process), "nodepty"
//               (cat FILE on node-pty from BENCH_NODE_PTY).
//   latency     BENCH_LAT_N sessions each of `true` and `echo hi` through the
//               stack, alternating, one at a time; plus the same through bare
//               script as a reference.
//   scale       idle sessions (`sleep infinity`) up to each of BENCH_LEVELS;
//               at each level writes BENCH_CTL/ready-N and waits for
//               BENCH_CTL/go-N (root measures the supervisor meanwhile).
//   stream      for each N of BENCH_STREAM_LEVELS, N concurrent `cat
//               BENCH_STREAM_FILE` sessions; supervisor CPU and RSS around it.
//   interactive for each N of BENCH_NEIGHBOURS and each of BENCH_VARIANTS
//               ("stack", "nodepty"): N `yes` sessions of that variant
//               streaming, read (counted) by this process; meanwhile one idle
//               `cat` session of the same variant gets BENCH_KEYS keystrokes
//               at each pace ("human": BENCH_GAP_MS from one write to the
//               next, "fast": the next key as soon as the echo arrived), one
//               byte each, timed from write() to the echo's arrival; then
//               BENCH_SPAWNS sessions of `true`, spawn -> exit, one at a time.
// BENCH_SUPERVISOR_PID: the supervisor's pid (its /proc/PID/stat and status are
// world-readable); CPU and RSS are read around each stack measurement.

const fs = require('fs');
const childProcess = require('child_process');
const pty = require(process.env.OPENCODE_PTY_MODULE);

const OUT = process.env.BENCH_OUT;
const MODE = process.env.BENCH_MODE;
const CTL = process.env.BENCH_CTL || '/run/opencode-node-test';
const SUP = process.env.BENCH_SUPERVISOR_PID || '';
const CLK_TCK = 100;  // Linux USER_HZ on x86-64

const now = () => Number(process.hrtime.bigint()) / 1e6;  // ms
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// BENCH_PROFILE marks records taken with the supervisor under a profiler
// ("callgrind" or "strace"); they are not throughput figures.
function emit(rec) {
  if (process.env.BENCH_PROFILE) rec = { profile: process.env.BENCH_PROFILE, ...rec };
  fs.appendFileSync(OUT, JSON.stringify(rec) + '\n');
}

// utime+stime of the supervisor in seconds, or null when unknown.
function supCpu() {
  const t = supTimes();
  return t === null ? null : t.user + t.sys;
}

// The supervisor's user and system CPU seconds and its voluntary context
// switches (each one is a sleep in epoll_wait: a wakeup of the loop).
function supTimes() {
  if (!SUP) return null;
  try {
    const stat = fs.readFileSync(`/proc/${SUP}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const m = /voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/${SUP}/status`, 'utf8'));
    return { user: Number(f[11]) / CLK_TCK, sys: Number(f[12]) / CLK_TCK, wakeups: m ? Number(m[1]) : null,
      minflt: Number(f[7]) };
  } catch {
    return null;
  }
}

function timesDelta(a, b) {
  if (a === null || b === null) return {};
  return { sup_user_s: +(b.user - a.user).toFixed(2), sup_sys_s: +(b.sys - a.sys).toFixed(2),
    sup_wakeups: b.wakeups === null ? null : b.wakeups - a.wakeups, sup_minflt: b.minflt - a.minflt };
}

function supStatus() {
  if (!SUP) return null;
  try {
    const out = {};
    for (const line of fs.readFileSync(`/proc/${SUP}/status`, 'utf8').split('\n')) {
      const m = /^(VmRSS|VmHWM|RssAnon|RssFile|RssShmem|Threads):\s+(\d+)/.exec(line);
      if (m) out[m[1]] = Number(m[2]);
    }
    return out;
  } catch {
    return null;
  }
}

// CPU of every process in the container (the cgroup v2 hierarchy is
// namespaced to it): cat, script, the supervisor, the client, systemd, dbus.
// Unlike wall time this hardly depends on what else the host runs.
function containerCpu() {
  try {
    const m = /usage_usec (\d+)/.exec(fs.readFileSync('/sys/fs/cgroup/unified/cpu.stat', 'utf8')) ||
      /usage_usec (\d+)/.exec(fs.readFileSync('/sys/fs/cgroup/cpu.stat', 'utf8'));
    return m ? Number(m[1]) / 1e6 : null;
  } catch {
    return null;
  }
}

function nodeCpu(prev) {
  const u = process.cpuUsage(prev);
  return (u.user + u.system) / 1e6;
}

// ------------------------------------------------------------ throughput ----

function runStack(file) {
  return new Promise((resolve) => {
    const r = { variant: 'stack', bytes: 0, first_ms: null, last_ms: null };
    const cpu0 = supCpu();
    const times0 = supTimes();
    const ncpu = process.cpuUsage();
    const t0 = now();
    const p = pty.spawn('cat', [file], { cwd: '/', encoding: null });
    p.onStarted(() => { r.started_ms = now() - t0; });
    p.onData((b) => {
      const t = now();
      if (r.first_ms === null) r.first_ms = t - t0;
      r.last_ms = t - t0;
      r.bytes += b.length;
    });
    p.onExit((e) => {
      r.total_ms = now() - t0;
      const cpu1 = supCpu();
      r.sup_cpu_s = cpu0 === null || cpu1 === null ? null : cpu1 - cpu0;
      Object.assign(r, timesDelta(times0, supTimes()));
      r.client_cpu_s = nodeCpu(ncpu);
      r.exit = { code: e.exitCode, signal: e.signal, error: e.error ? e.error.code : null };
      resolve(r);
    });
  });
}

function runScript(file) {
  return new Promise((resolve) => {
    const r = { variant: 'script', bytes: 0, first_ms: null, last_ms: null };
    const ncpu = process.cpuUsage();
    const t0 = now();
    // stdin stays open (as the launcher's script sees the PTY stream socket),
    // stdout is a pipe this process drains, like the stack's socket.
    const c = childProcess.spawn('/usr/bin/script', ['-q', '-e', '-f', '-c', `cat ${file}`, '/dev/null'],
      { stdio: ['pipe', 'pipe', 'ignore'], cwd: '/' });
    c.stdout.on('data', (b) => {
      const t = now();
      if (r.first_ms === null) r.first_ms = t - t0;
      r.last_ms = t - t0;
      r.bytes += b.length;
    });
    c.on('close', (code, signal) => {
      r.total_ms = now() - t0;
      r.client_cpu_s = nodeCpu(ncpu);
      r.exit = { code, signal, error: null };
      resolve(r);
    });
  });
}

let nodePty = null;
function runNodePty(file) {
  return new Promise((resolve) => {
    const r = { variant: 'nodepty', bytes: 0, first_ms: null, last_ms: null };
    if (!nodePty) {
      try {
        nodePty = require(process.env.BENCH_NODE_PTY);
      } catch (e) {
        r.exit = { code: null, signal: null, error: `require node-pty: ${e.message}` };
        resolve(r);
        return;
      }
    }
    const ncpu = process.cpuUsage();
    const t0 = now();
    let exited = null;
    const p = nodePty.spawn('cat', [file], {
      cols: 80, rows: 24, cwd: '/', encoding: null,
      env: { PATH: '/usr/local/bin:/usr/bin:/bin', TERM: 'xterm-256color', LANG: 'C.UTF-8' },
    });
    p.onData((b) => {
      const t = now();
      if (r.first_ms === null) r.first_ms = t - t0;
      r.last_ms = t - t0;
      r.bytes += b.length;
    });
    p.onExit((e) => {
      exited = e;
      r.total_ms = now() - t0;
      // node-pty may report the exit before the last read of the master:
      // give it a moment to deliver what is left, then stop counting.
      setTimeout(() => {
        r.client_cpu_s = nodeCpu(ncpu);
        r.exit = { code: exited.exitCode, signal: exited.signal || null, error: null };
        resolve(r);
      }, 200);
    });
  });
}

async function throughput() {
  const file = process.env.BENCH_FILE;
  const variants = (process.env.BENCH_VARIANTS || 'script,stack,nodepty').split(',');
  const round = Number(process.env.BENCH_ROUND || 0);
  for (const v of variants) {
    const fn = { stack: runStack, script: runScript, nodepty: runNodePty }[v];
    const c0 = containerCpu();
    const r = await fn(file);
    const c1 = containerCpu();
    r.container_cpu_s = c0 === null || c1 === null ? null : +(c1 - c0).toFixed(3);
    emit({ kind: 'throughput', round, file, ...r });
    await sleep(300);  // let the unit's cleanup finish before the next run
  }
}

// --------------------------------------------------------------- latency ----

function latStack(argv) {
  return new Promise((resolve) => {
    const r = { variant: 'stack', cmd: argv.join(' '), first_ms: null };
    const t0 = now();
    const p = pty.spawn(argv[0], argv.slice(1), { cwd: '/', encoding: null });
    // Diagnostics only, from the module's internals: when the socket
    // connected and when the helper exited (the module's own 'connect'
    // listener ran first and spawned the helper).
    p._socket.once('connect', () => {
      r.connect_ms = now() - t0;
      if (p._helper) p._helper.once('exit', () => { r.helper_exit_ms = now() - t0; });
    });
    p.onStarted(() => { r.started_ms = now() - t0; });
    p.onData(() => { if (r.first_ms === null) r.first_ms = now() - t0; });
    p.onExit((e) => {
      r.exit_ms = now() - t0;
      r.ok = e.exitCode === 0 && !e.error;
      if (e.error) r.error = e.error.code;
      resolve(r);
    });
  });
}

function latScript(argv) {
  return new Promise((resolve) => {
    const r = { variant: 'script', cmd: argv.join(' '), first_ms: null };
    const t0 = now();
    const c = childProcess.spawn('/usr/bin/script', ['-q', '-e', '-f', '-c', argv.join(' '), '/dev/null'],
      { stdio: ['pipe', 'pipe', 'ignore'], cwd: '/' });
    c.stdout.on('data', () => { if (r.first_ms === null) r.first_ms = now() - t0; });
    c.on('close', (code) => {
      r.exit_ms = now() - t0;
      r.ok = code === 0;
      resolve(r);
    });
  });
}

async function latency() {
  const n = Number(process.env.BENCH_LAT_N || 50);
  const round = Number(process.env.BENCH_ROUND || 0);
  const cmds = [['true'], ['echo', 'hi']];
  for (let i = 0; i < n; i++) {
    for (const argv of cmds) {
      emit({ kind: 'latency', round, ...(await latStack(argv)) });
    }
    // The bare-script reference, fewer of them: it is not the figure compared.
    if (i % 5 === 0) {
      for (const argv of cmds) emit({ kind: 'latency', round, ...(await latScript(argv)) });
    }
  }
}

// ----------------------------------------------------------------- scale ----

async function waitFile(path, ms) {
  const end = Date.now() + ms;
  while (!fs.existsSync(path)) {
    if (Date.now() > end) return false;
    await sleep(100);
  }
  return true;
}

async function scale() {
  const levels = (process.env.BENCH_LEVELS || '100,200,256').split(',').map(Number);
  const argv = (process.env.BENCH_SCALE_CMD || 'sleep infinity').split(' ');
  const inFlightMax = Number(process.env.BENCH_START_CONCURRENCY || 8);
  const live = [];
  const errors = {};
  let inFlight = 0;
  let failed = 0;
  let stopAdding = false;
  const open = () => new Promise((resolve) => {
    const p = pty.spawn(argv[0], argv.slice(1), { cwd: '/', encoding: null });
    let settled = false;
    p.onData(() => {});
    p.onStarted(() => { settled = true; live.push(p); resolve(true); });
    p.onExit((e) => {
      if (settled) return;
      settled = true;
      failed++;
      const code = e.error ? e.error.code : `exit ${e.exitCode}`;
      errors[code] = (errors[code] || 0) + 1;
      resolve(false);
    });
  });
  for (const level of levels) {
    const t0 = now();
    const cpu0 = supCpu();
    let consecutiveFailures = 0;
    while (live.length + inFlight < level && !stopAdding) {
      if (inFlight >= inFlightMax) { await sleep(5); continue; }
      inFlight++;
      open().then((ok) => {
        inFlight--;
        consecutiveFailures = ok ? 0 : consecutiveFailures + 1;
        if (consecutiveFailures >= 20) stopAdding = true;
      });
    }
    while (inFlight > 0) await sleep(10);
    const rec = {
      kind: 'scale_level', level, reached: live.length, failed, errors: { ...errors },
      ramp_ms: now() - t0, sup_cpu_ramp_s: cpu0 === null ? null : supCpu() - cpu0,
      client_rss_kb: Math.round(process.memoryUsage().rss / 1024),
    };
    emit(rec);
    fs.writeFileSync(`${CTL}/ready-${level}`, JSON.stringify(rec) + '\n');
    if (!(await waitFile(`${CTL}/go-${level}`, 600000))) break;
    if (stopAdding) break;
  }
  const t0 = now();
  const exits = live.map((p) => new Promise((r) => p.onExit(r)));
  for (const p of live) p.close();
  await Promise.all(exits);
  emit({ kind: 'scale_close', closed: live.length, close_ms: now() - t0 });
}

// ---------------------------------------------------------------- stream ----

// The sessions are started first, at most BENCH_START_CONCURRENCY at a time
// (the supervisor refuses more than 16 pending handshakes: too_many_handshakes),
// each waiting on its terminal for one line; then one line goes to all of
// them and they stream at once. Measured from that line to the last exit.
async function stream() {
  const levels = (process.env.BENCH_STREAM_LEVELS || '1,10,50').split(',').map(Number);
  const file = process.env.BENCH_STREAM_FILE;
  const inFlightMax = Number(process.env.BENCH_START_CONCURRENCY || 8);
  for (const n of levels) {
    const sessions = [];
    const startErrors = [];
    let bytes = 0;
    let inFlight = 0;
    const startOne = () => new Promise((resolve) => {
      const p = pty.spawn('sh', ['-c', `read go; exec cat ${file}`], { cwd: '/', encoding: null });
      const s = { p, exit: new Promise((r) => p.onExit(r)) };
      p.onData((b) => { if (s.go) bytes += b.length; });
      p.onStarted(() => { sessions.push(s); resolve(); });
      p.onExit((e) => { if (!sessions.includes(s)) { startErrors.push(e.error ? e.error.code : `exit ${e.exitCode}`); resolve(); } });
    });
    const starts = [];
    for (let i = 0; i < n; i++) {
      while (inFlight >= inFlightMax) await sleep(5);
      inFlight++;
      starts.push(startOne().then(() => { inFlight--; }));
    }
    await Promise.all(starts);
    await sleep(500);  // the echo of nothing yet; let the units settle
    const before = supStatus();
    const cpu0 = supCpu();
    const times0 = supTimes();
    const ccpu0 = containerCpu();
    const ncpu = process.cpuUsage();
    let peak = before ? before.VmRSS : 0;
    const sampler = setInterval(() => {
      const st = supStatus();
      if (st && st.VmRSS > peak) peak = st.VmRSS;
    }, 50);
    const t0 = now();
    for (const s of sessions) { s.go = true; s.p.write('\r'); }
    const results = await Promise.all(sessions.map((s) => s.exit));
    const wall = now() - t0;
    clearInterval(sampler);
    const after = supStatus();
    const cpu1 = supCpu();
    const ccpu1 = containerCpu();
    emit({
      kind: 'stream', sessions: n, started: sessions.length, start_errors: startErrors, file, bytes, wall_ms: wall,
      ok: results.filter((e) => e.exitCode === 0 && !e.error).length,
      errors: results.filter((e) => e.error).map((e) => e.error.code).slice(0, 10),
      sup_cpu_s: cpu0 === null ? null : cpu1 - cpu0, ...timesDelta(times0, supTimes()),
      container_cpu_s: ccpu0 === null || ccpu1 === null ? null : +(ccpu1 - ccpu0).toFixed(3),
      sup_rss_before_kb: before ? before.VmRSS : null, sup_rss_peak_kb: peak,
      sup_rss_after_kb: after ? after.VmRSS : null, client_cpu_s: nodeCpu(ncpu),
    });
    await sleep(2000);  // the units' cleanup, so levels do not overlap
  }
}

// ----------------------------------------------------------- interactive ----

// One variant's spawn, with the same surface for the stack and node-pty:
// { write(s), onData(fn), onExit(fn), kill(), ready: Promise }.
function ptyOf(variant, argv) {
  if (variant === 'stack') {
    const p = pty.spawn(argv[0], argv.slice(1), { cwd: '/', encoding: null });
    const ready = new Promise((resolve) => {
      p.onStarted(() => resolve(true));
      p.onExit(() => resolve(false));
    });
    return { p, ready, write: (b) => p.write(b), onData: (fn) => p.onData(fn), onExit: (fn) => p.onExit(fn),
      stop: () => p.close() };
  }
  if (!nodePty) nodePty = require(process.env.BENCH_NODE_PTY);
  const p = nodePty.spawn(argv[0], argv.slice(1), {
    cols: 80, rows: 24, cwd: '/', encoding: null,
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', TERM: 'xterm-256color', LANG: 'C.UTF-8' },
  });
  return { p, ready: Promise.resolve(true), write: (b) => p.write(b), onData: (fn) => p.onData(fn),
    onExit: (fn) => p.onExit(fn), stop: () => p.kill('SIGKILL') };
}

// Time spent runnable but waiting for a CPU (ns; /proc/PID/schedstat, 2nd
// field) of the application's main thread, the supervisor and, for the stack,
// the measured session's `script` relay (the `script` above its `cat`). A
// wait that is mostly run-queue wait points at CPU contention, not at a timer.
function schedWait(pid) {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]);
  } catch {
    return null;
  }
}
function relayOfCat() {
  try {
    for (const d of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      let comm;
      try { comm = fs.readFileSync(`/proc/${d}/comm`, 'utf8').trim(); } catch { continue; }
      if (comm !== 'cat') continue;
      let pid = d;
      for (let hop = 0; hop < 6; hop++) {
        const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
        pid = st.slice(st.lastIndexOf(')') + 2).split(' ')[1];
        if (pid === '0' || pid === '1') break;
        if (fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'script') return pid;
      }
    }
  } catch { /* a process went away mid-scan: no relay figure */ }
  return null;
}
function waits(relay) {
  return { app: schedWait(process.pid), supervisor: SUP ? schedWait(SUP) : null, relay: relay ? schedWait(relay) : null };
}
function waitsDelta(a, b) {
  const out = {};
  for (const k of Object.keys(a)) {
    if (a[k] !== null && b[k] !== null) out[k] = +((b[k] - a[k]) / 1e6).toFixed(1);
  }
  return out;
}

async function startNeighbours(variant, n, load) {
  const inFlightMax = Number(process.env.BENCH_START_CONCURRENCY || 8);
  const live = [];
  let inFlight = 0;
  const starts = [];
  for (let i = 0; i < n; i++) {
    while (inFlight >= inFlightMax) await sleep(5);
    inFlight++;
    const s = ptyOf(variant, ['yes']);
    s.exited = new Promise((r) => s.onExit(r));
    s.onData((b) => { load.bytes += b.length; });
    starts.push(s.ready.then((ok) => { inFlight--; if (ok) live.push(s); else load.start_errors++; }));
  }
  await Promise.all(starts);
  return live;
}

// BENCH_KEYS keystrokes into an idle `cat`: 'x', its echo is 'x' (the line
// discipline echoes it; cat sees nothing until a line ends). Every 64 keys a
// CR ends the line (untimed): cat prints the line, and the next key waits
// until both newlines (the CR's echo and cat's line) are back.
async function keystrokes(s, keys, pace, gapMs) {
  let waiter = null;
  let pendingNl = 0;
  let seen = 0;
  s.onData((b) => {
    for (const c of b) {
      // cat's own line (x's) arrives between the two newlines of a CR.
      if (c === 0x0a && pendingNl > 0) pendingNl--;
      else if (c === 0x78 && pendingNl === 0) seen++;
    }
    if (waiter) waiter();
  });
  const until = (pred, ms) => new Promise((resolve) => {
    if (pred()) { resolve(true); return; }
    const t = setTimeout(() => { waiter = null; resolve(false); }, ms);
    waiter = () => { if (pred()) { clearTimeout(t); waiter = null; resolve(true); } };
  });
  const echo = [];
  let lost = 0;
  let lastWrite = -Infinity;
  for (let i = 0; i < keys; i++) {
    if (i > 0 && i % 64 === 0) {
      pendingNl += 2;
      s.write('\r');
      if (!(await until(() => pendingNl === 0, 10000))) { pendingNl = 0; lost++; }
    }
    if (pace === 'human') {
      const wait = lastWrite + gapMs - now();
      if (wait > 0) await sleep(wait);
    }
    const want = seen + 1;
    const t0 = now();
    lastWrite = t0;
    s.write('x');
    if (await until(() => seen >= want, 10000)) echo.push(+(now() - t0).toFixed(3));
    else { lost++; seen = want; }
  }
  return { echo_ms: echo, lost };
}

function spawnTrue(variant) {
  return new Promise((resolve) => {
    const t0 = now();
    let s;
    try { s = ptyOf(variant, ['true']); } catch (e) { resolve({ error: String(e.message) }); return; }
    s.onData(() => {});
    s.onExit((e) => resolve({ exit_ms: +(now() - t0).toFixed(3), ok: e.exitCode === 0 && !e.error,
      error: e.error ? e.error.code : undefined }));
  });
}

async function interactive() {
  const levels = (process.env.BENCH_NEIGHBOURS || '0,10,50').split(',').map(Number);
  const variants = (process.env.BENCH_VARIANTS || 'stack,nodepty').split(',');
  const keys = Number(process.env.BENCH_KEYS || 1000);
  const gapMs = Number(process.env.BENCH_GAP_MS || 15);
  const spawns = Number(process.env.BENCH_SPAWNS || 20);
  const round = Number(process.env.BENCH_ROUND || 0);
  for (const n of levels) {
    for (const variant of variants) {
      const load = { bytes: 0, start_errors: 0 };
      const neighbours = await startNeighbours(variant, n, load);
      await sleep(n ? 1000 : 200);  // the neighbours reach full speed
      const s = ptyOf(variant, ['cat']);
      const started = await s.ready;
      const exited = new Promise((r) => s.onExit(r));
      await sleep(300);  // cat is reading its terminal
      const relay = variant === 'stack' && started ? relayOfCat() : null;
      for (const pace of started ? ['human', 'fast'] : []) {
        const w0 = waits(relay);
        const b0 = load.bytes;
        const sup0 = supTimes();
        const app0 = process.cpuUsage();
        const t0 = now();
        const r = await keystrokes(s, keys, pace, gapMs);
        const window = now() - t0;
        const app = process.cpuUsage(app0);
        const sup = variant === 'stack' ? timesDelta(sup0, supTimes()) : {};
        emit({ kind: 'interactive', round, variant, neighbours: n, neighbours_running: neighbours.length,
          pace, gap_ms: pace === 'human' ? gapMs : 0, keys, lost: r.lost, window_ms: +window.toFixed(1),
          neighbour_bytes: load.bytes - b0, app_user_s: app.user / 1e6, app_sys_s: app.system / 1e6,
          ...sup, run_queue_wait_ms: waitsDelta(w0, waits(relay)), echo_ms: r.echo_ms });
      }
      if (!started) emit({ kind: 'interactive', round, variant, neighbours: n, error: 'cat session did not start' });
      s.stop();
      await Promise.race([exited, sleep(5000)]);
      // A new session's start under the same load.
      const ex = [];
      const errors = [];
      for (let i = 0; i < spawns; i++) {
        const r = await spawnTrue(variant);
        if (r.ok) ex.push(r.exit_ms); else errors.push(r.error || 'exit status');
      }
      emit({ kind: 'interactive_spawn', round, variant, neighbours: n, neighbours_running: neighbours.length,
        cmd: 'true', exit_ms: ex, errors });
      for (const nb of neighbours) nb.stop();
      await Promise.race([Promise.all(neighbours.map((nb) => nb.exited)), sleep(30000)]);
      await sleep(n ? 2000 : 300);  // the units' cleanup, so cases do not overlap
    }
  }
}

const modes = { throughput, latency, scale, stream, interactive };
if (!modes[MODE]) {
  console.error(`bench-app: unknown BENCH_MODE ${MODE}`);
  process.exit(2);
}
modes[MODE]().then(() => process.exit(0), (e) => {
  console.error(`bench-app: ${e.stack || e}`);
  emit({ kind: 'app_error', mode: MODE, error: String(e && e.stack || e) });
  process.exit(1);
});
