'use strict';
// vm-tests/node/detach-app.js: the application side of the detachable sessions
// suite (vm-tests/node/detach.sh, ctest vm.detach.{bookworm,trixie}, under Bun
// vm.detach.bun.*; issue #33, docs/PROTOCOL.md section 10). It runs as the
// MainPID of opencode-v2.service (User=byk) inside the Node 26.4 SEA (script
// mode) or the pinned Bun, three times in one boot: detach.sh restarts the
// service twice, and each MainPID runs the next phase of the state file
// OPENCODE_DETACH_WORK/detach-state.json (what the MainPID before it saw: ids,
// units, cursors, output). A phase that ends with the service's restart writes
// detach-<phase>.done when its sessions are set up and then waits to be
// killed; the last one exits.
//   one:   three detachable `sh` sessions (D1 resize, D2 kill, D3 end) that
//          echo input and, after "go", print a tick every 0.2 s, and one
//          ordinary `cat` (O); each typed into; cursors and output recorded.
//   two:   list() shows exactly D1-D3 detached; each attached at its recorded
//          cursor replays exactly the bytes after it; refusals (session_attached
//          here, unauthenticated for another process); typing, a resize, a
//          kill, EOFs. Then E (exits 7 once told, while detached), G (grace
//          3 s, never attached again) and F (64 KiB ring, prints 262 KiB once
//          told, while detached).
//   three: G ended by its grace; E's unit gone while detached, then its replay
//          and its exit 7; F's replay is the ring's last 65,536 bytes with
//          dropped = first - cursor.
// Checks go to OPENCODE_DETACH_OUT as JSON lines (checks.js), named
// "phase N: ...". Only hang guards are timed.
const fs = require('fs');
const childProcess = require('child_process');
const MODULE = process.env.OPENCODE_PTY_MODULE;
const pty = require(MODULE);

const OUT = process.env.OPENCODE_DETACH_OUT;
const WORK = process.env.OPENCODE_DETACH_WORK || '/run/opencode-node-test';
const STATE = `${WORK}/detach-state.json`;
const { checks, until, withTimeout, openSession } = require('./checks.js');
const { record, exitCode } = checks(OUT);

const GRACE = 600;         // the sessions that must survive each restart
const SHORT_GRACE = 3;     // G's: it is never attached again
const SMALL_RING = 65536;  // F's: kMinScrollbackBytes
const F_LINES = 40000;     // seq 1 40000: 268,894 bytes through the PTY, 4 rings' worth

// One PTY through the module, everything it emits collected (checks.js).
const open = (file, args, opts = {}) => openSession(pty, file, args, { cwd: WORK, ...opts });

// The interactive command of D1-D3: echo off (the stream is then only what
// the command prints), "ready", "got:LINE" for each line until "go", then a
// ticker ("tick N" every 0.2 s while the shell lives) beside the echo loop,
// where "size" prints `stty size`; EOF ends both, exit 0.
const INTERACTIVE = [
  'stty -echo; echo ready',
  'while read l; do echo "got:$l"; [ "$l" = go ] && break; done',
  'p=$$; (i=0; while kill -0 $p 2>/dev/null; do echo "tick $i"; i=$((i+1)); sleep 0.2; done) &',
  'while read l; do if [ "$l" = size ]; then stty size; else echo "got:$l"; fi; done',
  'exit 0',
].join('\n');
// What D1-D3 print until the first line typed after "go": deterministic, so
// the bytes before the recorded cursor plus the replay are checked whole.
const interactiveStream = (ticks) => 'ready\r\ngot:one\r\ngot:go\r\n' +
  Array.from({ length: ticks }, (_, i) => `tick ${i}\r\n`).join('');

// E: exits 7 once detach-E.go exists (made by phase three while detached).
const E_CMD = `stty -echo; echo ready; while [ ! -e ${WORK}/detach-E.go ]; do sleep 0.1; done; echo "bye while detached"; exit 7`;
// G: waits; its grace ends it.
const G_CMD = 'stty -echo; echo ready; exec sleep 600';
// F: once detach-F.go exists, seq 1 40000 and "end", then waits.
const F_CMD = `stty -echo; echo ready; while [ ! -e ${WORK}/detach-F.go ]; do sleep 0.1; done; seq 1 ${F_LINES}; echo end; exec sleep 600`;
const F_STREAM = 'ready\r\n' + Array.from({ length: F_LINES }, (_, i) => `${i + 1}\r\n`).join('') + 'end\r\n';

// The exit event as evidence.
const shown = (e) => e && { exitCode: e.exitCode, signal: e.signal, exact: e.exact,
  error: e.error && { code: e.error.code, message: e.error.message }, timedOut: e.timedOut };
// The exit event, or after `ms` a record of the hang (the caller's check fails).
async function ended(s, ms = 30000) {
  try {
    return await withTimeout(s.exit, ms, 'exit');
  } catch (e) {
    return { timedOut: ms, exitCode: undefined };
  }
}
const tail = (str, n = 200) => JSON.stringify(str.slice(-n));

// What a later phase needs of a session: its id, unit, the cursor it saw
// last and exactly the output before it (read in the same tick).
function snapshot(s) {
  return { session: s.p.session, unit: s.p.unit, cursor: s.p.cursor, output: s.output };
}

// list(), or its error as {error: code}.
async function listed() {
  try {
    return await withTimeout(pty.list(), 30000, 'list()');
  } catch (e) {
    return { error: e.code || String(e.message) };
  }
}
const byId = (entries, id) => (Array.isArray(entries) ? entries.find((e) => e.session === id) : undefined);

// attach(id, {cursor}) with everything it emits collected, as openSession
// does for a spawn: `output` holds the replay then the live output.
async function attached(id, cursor) {
  const s = { p: null, output: '', notices: [], errors: [], ended: null, error: null };
  try {
    s.p = await withTimeout(pty.attach(id, { cursor }), 30000, `attach(${id})`);
  } catch (e) {
    s.error = e;
    return s;
  }
  s.p.onNotice((n) => s.notices.push(n));
  s.p.onError((e) => s.errors.push(e));
  s.exit = new Promise((r) => s.p.onExit((e) => { s.ended = e; r(e); }));
  s.p.onData((d) => { s.output += d; });
  return s;
}
// The replay of an attached session: its first (next - cursor) bytes, once
// they all arrived (a hang guard; short if they never do).
async function replayOf(s) {
  const want = s.p.replay.next - s.p.replay.cursor;
  await until(() => s.output.length >= want, 30000);
  return s.output.slice(0, want);
}

// Another process of the application's user, not the MainPID: a child of
// this one (the same uid, cgroup and unit) running the module's list() and
// attach(id). Its answers, each {ok} or {code}.
function otherProcess(id) {
  const code = `const pty=require(${JSON.stringify(MODULE)});
const show=(p)=>p.then(()=>({ok:true}),(e)=>({code:e&&e.code,message:e&&e.message}));
Promise.all([show(pty.list()),show(pty.attach(${JSON.stringify(id)},{cursor:0}))])
  .then((r)=>{process.stdout.write(JSON.stringify(r));process.exit(0);});
setTimeout(()=>{process.stdout.write('"timeout"');process.exit(1);},30000).unref();`;
  return new Promise((resolve) => {
    const c = childProcess.spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    c.stdout.on('data', (d) => { out += d; });
    c.stderr.on('data', (d) => { err += d; });
    c.on('close', (status) => {
      let r = null;
      try { r = JSON.parse(out); } catch { /* shown as null */ }
      resolve({ pid: c.pid, status, list: r && r[0], attach: r && r[1], stdout: out.slice(0, 300), stderr: err.slice(0, 300) });
    });
  });
}

// Whether systemd no longer knows UNIT: GetUnit answers NoSuchUnit (any
// user may ask the system bus).
function unitGone(unit) {
  return new Promise((resolve) => {
    childProcess.execFile('busctl', ['--system', 'call', 'org.freedesktop.systemd1', '/org/freedesktop/systemd1',
      'org.freedesktop.systemd1.Manager', 'GetUnit', 's', unit], { timeout: 30000 }, (err, stdout, stderr) => {
      const said = `${stdout}${stderr}`.trim();
      resolve({ gone: !!err && /not loaded|NoSuchUnit/.test(said), said: said.slice(0, 200) });
    });
  });
}

function writeState(state) {
  fs.writeFileSync(`${STATE}.tmp`, JSON.stringify(state));
  fs.renameSync(`${STATE}.tmp`, STATE);
}
// Tells detach.sh that this phase's sessions are set up: it restarts the service.
function phaseDone(name) {
  fs.writeFileSync(`${WORK}/detach-${name}.done`, `${process.pid}\n`);
}
// Holds this MainPID (and so its connections) until the restart kills it.
const holdUntilKilled = () => new Promise(() => { setInterval(() => {}, 1 << 30); });

// ---- phase one ----------------------------------------------------------------------------------

async function phaseOne() {
  const P = 'phase 1';
  const d = {};
  for (const name of ['D1', 'D2', 'D3']) {
    d[name] = open('/bin/sh', ['-c', INTERACTIVE], { cols: 80, rows: 24, detachable: { graceSeconds: GRACE } });
  }
  const o = open('/bin/cat', [], { cols: 80, rows: 24 });
  const started = await Promise.all([...Object.values(d), o].map((s) => withTimeout(s.startedP, 60000, 'started')
    .catch((e) => String(e))));
  record(`${P}: three detachable sessions and one ordinary session started`,
    started.every((e) => e && e.type === 'started'), started.map((e) => (e && e.type) || e));
  record(`${P}: the detachable PTYs are marked detachable, the ordinary one not; each has its session id`,
    Object.values(d).every((s) => s.p.detachable === true && /^[0-9a-f]{32}$/.test(s.p.session)) &&
    o.p.detachable === false && /^[0-9a-f]{32}$/.test(o.p.session),
    { d: Object.values(d).map((s) => [s.p.detachable, s.p.session]), o: [o.p.detachable, o.p.session] });

  for (const [name, s] of Object.entries(d)) {
    await until(() => s.output.includes('ready\r\n'), 30000);
    s.p.write('one\n');
    await until(() => s.output.includes('got:one\r\n'), 30000);
    s.p.write('go\n');
    const ticking = await until(() => s.output.includes('tick 2\r\n'), 30000);
    record(`${P}: ${name} echoes what is typed and then ticks`, ticking, tail(s.output));
  }
  o.p.write('ordinary\n');
  const oEcho = await until(() => (o.output.match(/ordinary/g) || []).length >= 2, 30000);
  record(`${P}: the ordinary session echoes what is typed`, oEcho, tail(o.output));

  // One tick: the snapshots and the state file agree with what each PTY
  // delivered up to here.
  const snaps = {};
  for (const [name, s] of Object.entries(d)) snaps[name] = snapshot(s);
  snaps.O = snapshot(o);
  record(`${P}: each PTY's cursor is the number of output bytes it delivered (ASCII: the characters)`,
    Object.values(snaps).every((x) => x.cursor === Buffer.byteLength(x.output) && x.cursor > 0),
    Object.fromEntries(Object.entries(snaps).map(([k, x]) => [k, [x.cursor, Buffer.byteLength(x.output)]])));
  record(`${P}: what D1-D3 printed so far is exactly the expected stream (ready, got:one, got:go, ticks)`,
    ['D1', 'D2', 'D3'].every((n) => interactiveStream(1000).startsWith(snaps[n].output)),
    Object.fromEntries(['D1', 'D2', 'D3'].map((n) => [n, tail(snaps[n].output, 80)])));
  const all = await listed();
  record(`${P}: list() from the MainPID shows the three detachable sessions attached, not the ordinary one`,
    Array.isArray(all) && all.length === 3 && ['D1', 'D2', 'D3'].every((n) => (byId(all, snaps[n].session) || {}).state === 'attached') &&
    !byId(all, snaps.O.session), all);
  writeState({ phase: 'two', pid: process.pid, sessions: snaps });
  phaseDone('one');
  return holdUntilKilled();
}

// ---- phase two ----------------------------------------------------------------------------------

async function phaseTwo(state) {
  const P = 'phase 2';
  const prev = state.sessions;
  const dNames = ['D1', 'D2', 'D3'];
  record(`${P}: a new MainPID (the service was restarted)`, state.pid !== process.pid, { before: state.pid, now: process.pid });

  // The old MainPID's connections are gone once it exited; the supervisor
  // may see that a moment after the new MainPID runs.
  let entries = null;
  await until(async () => {
    entries = await listed();
    return Array.isArray(entries) && dNames.every((n) => (byId(entries, prev[n].session) || {}).state === 'detached');
  }, 30000, 200);
  const ids = Array.isArray(entries) ? entries.map((e) => e.session).sort() : entries;
  record(`${P}: list() shows exactly the three detachable sessions, each detached (the ordinary one is not listed)`,
    Array.isArray(entries) && entries.length === 3 &&
    JSON.stringify(ids) === JSON.stringify(dNames.map((n) => prev[n].session).sort()) &&
    entries.every((e) => e.state === 'detached'), entries);
  record(`${P}: each listed session has its unit, grace ${GRACE}, the default ring, no exit, a pid, and its ring holds the recorded cursor (first <= cursor < next)`,
    Array.isArray(entries) && dNames.every((n) => {
      const e = byId(entries, prev[n].session) || {};
      return e.unit === prev[n].unit && e.grace === GRACE && e.scrollback === pty.limits.defaultScrollbackBytes &&
        e.exited === false && e.code === null && e.signal === null && Number.isInteger(e.pid) &&
        e.first <= prev[n].cursor && prev[n].cursor < e.next && Number.isInteger(e.started) && e.started > 0;
    }), { entries, cursors: dNames.map((n) => prev[n].cursor), defaultScrollback: pty.limits.defaultScrollbackBytes });

  // Attach each at the cursor the last MainPID saw.
  const a = {};
  for (const n of dNames) {
    a[n] = await attached(prev[n].session, prev[n].cursor);
    if (a[n].error) {
      record(`${P}: attach(${n}) at its recorded cursor`, false, { code: a[n].error.code, message: a[n].error.message });
      continue;
    }
    const r = a[n].p.replay;
    const replay = await replayOf(a[n]);
    const whole = prev[n].output + replay;
    record(`${P}: ${n} attached at cursor ${prev[n].cursor}: replay.cursor is it, nothing dropped, the replay is not empty`,
      r.cursor === prev[n].cursor && r.dropped === 0 && r.next > r.cursor && a[n].p.session === prev[n].session &&
      a[n].p.unit === prev[n].unit, { replay: r, session: a[n].p.session, unit: a[n].p.unit });
    record(`${P}: ${n}'s replay is byte-exact: the output before the cursor plus the replay is the command's stream, no byte missing or repeated`,
      Buffer.byteLength(replay) === r.next - r.cursor && interactiveStream(r.next).startsWith(whole) &&
      /tick \d+\r\n/.test(replay),
      { before: tail(prev[n].output, 60), replayHead: JSON.stringify(replay.slice(0, 60)), replayTail: tail(replay, 60),
        replayBytes: Buffer.byteLength(replay) });
  }
  if (dNames.some((n) => a[n].error)) return 1;

  // Refusals while attached: a second attach, from the MainPID itself, is
  // session_attached; another process of byk is unauthenticated for both.
  let second;
  try {
    const p = await withTimeout(pty.attach(prev.D3.session, { cursor: 0 }), 30000, 'second attach');
    second = { ok: true };
    p.close();
  } catch (e) {
    second = { code: e.code, message: e.message };
  }
  record(`${P}: a second attach to an attached session (D3) is refused: session_attached`, second.code === 'session_attached', second);
  const other = await otherProcess(prev.D1.session);
  record(`${P}: another process of the application's user (a child of the MainPID) is refused list(): unauthenticated`,
    other.list && other.list.code === 'unauthenticated', other);
  record(`${P}: that process is refused attach() to an attached session (D1): unauthenticated`,
    other.attach && other.attach.code === 'unauthenticated', other);

  // Typing into each, after the replay.
  for (const n of dNames) {
    const s = a[n];
    s.p.write(`again-${n}\n`);
    const echoed = await until(() => s.output.includes(`got:again-${n}\r\n`), 30000);
    record(`${P}: typed into ${n} after the attach, its echo comes back (the refusals did not disturb it)`, echoed, tail(s.output));
  }
  // D1: a resize reaches the command. RESIZE is applied through the unit
  // channel and INPUT may overtake it (docs/PROTOCOL.md section 5a), so
  // "size" is typed again until stty prints the new size.
  const mark = a.D1.output.length;
  const sizes = () => [...a.D1.output.slice(mark).matchAll(/(?:^|\n)(\d+ \d+)\r\n/g)].map((m) => m[1]);
  a.D1.p.write('size\n');
  await until(() => sizes().length > 0, 30000);
  const before = sizes()[0];
  a.D1.p.resize(132, 40);
  await until(async () => {
    const n = sizes().length;
    a.D1.p.write('size\n');
    await until(() => sizes().length > n, 10000);
    return sizes()[sizes().length - 1] === '40 132';
  }, 30000, 0);
  record(`${P}: D1 after the attach: stty size prints 24 80 (its size from the spawn), after resize(132, 40) 40 132`,
    before === '24 80' && sizes()[sizes().length - 1] === '40 132', { sizes: sizes() });
  // D2: a signal reaches the command, which dies of it.
  a.D2.p.kill('SIGTERM');
  const e2 = await ended(a.D2);
  record(`${P}: D2 killed with SIGTERM after the attach exits {code: null, signal: TERM}`,
    e2.exitCode === null && e2.signal === 'TERM' && !e2.error, shown(e2));
  // D1, D3: EOF ends the echo loop, exit 0.
  for (const n of ['D1', 'D3']) {
    a[n].p.end();
    const e = await ended(a[n]);
    record(`${P}: EOF to ${n} ends it, exit 0`, e.exitCode === 0 && e.signal === null && !e.error,
      { exit: shown(e), last: JSON.stringify(a[n].output.slice(-300).replace(/tick \d+\r\n/g, '')) });
  }
  const after = await listed();
  record(`${P}: once they ended, list() no longer shows D1-D3`,
    Array.isArray(after) && dNames.every((n) => !byId(after, prev[n].session)), after);

  // The next round: E exits while detached, G is never attached again, F's
  // ring overflows while detached.
  const r2 = {
    E: open('/bin/sh', ['-c', E_CMD], { detachable: { graceSeconds: GRACE } }),
    G: open('/bin/sh', ['-c', G_CMD], { detachable: { graceSeconds: SHORT_GRACE } }),
    F: open('/bin/sh', ['-c', F_CMD], { detachable: { graceSeconds: GRACE, scrollbackBytes: SMALL_RING } }),
  };
  for (const [n, s] of Object.entries(r2)) {
    const ready = await until(() => s.output === 'ready\r\n', 60000);
    record(`${P}: ${n} started and printed ready`, ready && s.started !== null, { out: s.output, errors: s.errors.map(String) });
  }
  const snaps = Object.fromEntries(Object.entries(r2).map(([n, s]) => [n, snapshot(s)]));
  const l2 = await listed();
  const e = (n) => byId(l2, snaps[n].session) || {};
  record(`${P}: list() shows E, G and F attached with the grace and ring they were spawned with`,
    Array.isArray(l2) && l2.length === 3 && ['E', 'G', 'F'].every((n) => e(n).state === 'attached') &&
    e('E').grace === GRACE && e('G').grace === SHORT_GRACE && e('F').grace === GRACE &&
    e('F').scrollback === SMALL_RING && e('E').scrollback === pty.limits.defaultScrollbackBytes &&
    ['E', 'G', 'F'].every((n) => e(n).next === 7 && e(n).first === 0), l2);
  writeState({ phase: 'three', pid: process.pid, sessions: { ...prev, ...snaps } });
  phaseDone('two');
  return holdUntilKilled();
}

// ---- phase three --------------------------------------------------------------------------------

async function phaseThree(state) {
  const P = 'phase 3';
  const prev = state.sessions;
  record(`${P}: a new MainPID (the service was restarted again)`, state.pid !== process.pid, { before: state.pid, now: process.pid });
  let entries = null;
  await until(async () => {
    entries = await listed();
    return Array.isArray(entries) && ['E', 'F'].every((n) => (byId(entries, prev[n].session) || {}).state === 'detached');
  }, 30000, 200);
  record(`${P}: list() shows E and F detached, E not yet exited, and none of D1-D3`,
    Array.isArray(entries) && ['E', 'F'].every((n) => (byId(entries, prev[n].session) || {}).state === 'detached') &&
    byId(entries, prev.E.session).exited === false &&
    ['D1', 'D2', 'D3'].every((n) => !byId(entries, prev[n].session)), entries);

  // Another process, against a detached session: still unauthenticated, and
  // F is untouched (attached below).
  const other = await otherProcess(prev.F.session);
  record(`${P}: another process of the application's user is refused list() and attach() to a detached session (F): unauthenticated`,
    other.list && other.list.code === 'unauthenticated' && other.attach && other.attach.code === 'unauthenticated', other);

  // G: never attached; its grace of 3 s ends it.
  let gList = null;
  const gGone = await until(async () => {
    gList = await listed();
    return Array.isArray(gList) && !byId(gList, prev.G.session);
  }, 60000, 250);
  record(`${P}: G (grace ${SHORT_GRACE} s, not attached) is ended by its grace period: list() no longer shows it`, gGone, gList);
  let gAttach;
  try {
    const p = await withTimeout(pty.attach(prev.G.session, { cursor: prev.G.cursor }), 30000, 'attach G');
    gAttach = { ok: true };
    p.close();
  } catch (err) {
    gAttach = { code: err.code, message: err.message };
  }
  record(`${P}: attach() to G after its grace is refused: no_such_session`, gAttach.code === 'no_such_session', gAttach);

  // E and F are told to go on, while detached.
  fs.writeFileSync(`${WORK}/detach-E.go`, '');
  fs.writeFileSync(`${WORK}/detach-F.go`, '');
  let eEntry = null;
  await until(async () => { eEntry = byId(await listed(), prev.E.session); return eEntry && eEntry.exited; }, 60000, 200);
  record(`${P}: E exited while detached: list() says exited, code 7, no signal, still detached`,
    eEntry && eEntry.exited === true && eEntry.code === 7 && eEntry.signal === null && eEntry.state === 'detached', eEntry);
  let eGone = null;
  await until(async () => { eGone = await unitGone(prev.E.unit); return eGone.gone; }, 60000, 200);
  record(`${P}: E's unit is proven gone while it is detached, before any attach (GetUnit -> NoSuchUnit)`,
    eGone.gone, { unit: prev.E.unit, ...eGone });
  let fEntry = null;
  await until(async () => { fEntry = byId(await listed(), prev.F.session); return fEntry && fEntry.next >= F_STREAM.length; }, 60000, 200);
  record(`${P}: F wrote ${F_STREAM.length} bytes while detached, past its ${SMALL_RING}-byte ring: first = next - ${SMALL_RING}`,
    fEntry && fEntry.next === F_STREAM.length && fEntry.first === F_STREAM.length - SMALL_RING && fEntry.exited === false,
    { entry: fEntry, want: F_STREAM.length });

  // E: the replay, then its exit.
  const ea = await attached(prev.E.session, prev.E.cursor);
  if (ea.error) {
    record(`${P}: attach(E) at its recorded cursor`, false, { code: ea.error.code, message: ea.error.message });
  } else {
    const replay = await replayOf(ea);
    const ex = await ended(ea);
    record(`${P}: E's replay is exactly what it printed while detached ("bye while detached")`,
      ea.p.replay.cursor === prev.E.cursor && ea.p.replay.dropped === 0 && replay === 'bye while detached\r\n',
      { replay: ea.p.replay, bytes: JSON.stringify(replay) });
    record(`${P}: E's exit follows its replay: code 7, no signal, no error, after all the output`,
      ex.exitCode === 7 && ex.signal === null && !ex.error && ea.output === 'bye while detached\r\n',
      { exit: shown(ex), output: JSON.stringify(ea.output) });
  }

  // F: the last bytes only, with what fell out of the ring counted.
  const fa = await attached(prev.F.session, prev.F.cursor);
  if (fa.error) {
    record(`${P}: attach(F) at its recorded cursor`, false, { code: fa.error.code, message: fa.error.message });
  } else {
    const r = fa.p.replay;
    const replay = await replayOf(fa);
    const first = fEntry ? fEntry.first : null;
    record(`${P}: F attached at cursor ${prev.F.cursor}: dropped > 0 and equals first - cursor; the replay starts at first and ends at next`,
      r.dropped > 0 && r.dropped === first - prev.F.cursor && r.cursor === first && r.next === F_STREAM.length,
      { replay: r, first, cursor: prev.F.cursor });
    record(`${P}: F's replay is exactly the last bytes of its stream (from first to next)`,
      replay === F_STREAM.slice(r.cursor) && replay.length > 0 && replay.length <= SMALL_RING,
      { bytes: replay.length, head: JSON.stringify(replay.slice(0, 40)), tail: tail(replay, 40) });
    fa.p.kill('SIGTERM');
    const ex = await ended(fa);
    record(`${P}: F killed with SIGTERM after the attach exits {code: null, signal: TERM}`,
      ex.exitCode === null && ex.signal === 'TERM' && !ex.error, shown(ex));
  }
  const last = await listed();
  record(`${P}: at the end list() is empty`, Array.isArray(last) && last.length === 0, last);
  return exitCode();
}

async function main() {
  // The suite names the runtime (--runtime=node|bun); the check proves it is
  // the one running: the SEA's Node, or the pinned Bun.
  const runtime = process.versions.bun ? 'bun' : 'node';
  let state = null;
  try { state = JSON.parse(fs.readFileSync(STATE, 'utf8')); } catch { /* phase one */ }
  const phase = state ? state.phase : 'one';
  record(`phase ${{ one: 1, two: 2, three: 3 }[phase] || phase}: runs on the suite's runtime (${process.env.OPENCODE_TEST_RUNTIME || 'node'}) as MainPID ${process.pid}`,
    runtime === (process.env.OPENCODE_TEST_RUNTIME || 'node'),
    { runtime, node: process.version, bun: process.versions.bun || null, execPath: process.execPath });
  if (phase === 'one') return phaseOne();
  if (phase === 'two') return phaseTwo(state);
  if (phase === 'three') return phaseThree(state);
  record(`the state file names a known phase`, false, state);
  return 1;
}

main().then((code) => { process.exitCode = code; }, (e) => {
  record('the phase ran to completion', false, String(e && e.stack || e));
  process.exitCode = 1;
});
