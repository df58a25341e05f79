'use strict';
// vm-tests/node/resize-app.js: the application side of the live resize suite
// (vm-tests/node/resize.sh, ctest vm.node-resize.bookworm / .trixie). Runs as the
// MainPID of opencode-v2.service (User=byk) on the rootfs's Node through the
// module under test, against the installed supervisor, helper and launcher on a
// real systemd. Records checks {name, ok, evidence} as JSON lines into
// OPENCODE_RESIZE_OUT.
const fs = require('fs');
const net = require('net');
const childProcess = require('child_process');
const pty = require(process.env.OPENCODE_PTY_MODULE);

const { protocol } = pty;
const OUT = process.env.OPENCODE_RESIZE_OUT;
const WORK = process.env.OPENCODE_RESIZE_WORK || '/run/opencode-node-test';
const { checks, sleep, until, openSession } = require('./checks.js');
const { record, exitCode } = checks(OUT);

// One PTY through the module, everything it emits collected (checks.js).
const open = (file, args, opts = {}) => openSession(pty, file, args, { cwd: WORK, ...opts });

// "rows cols" lines printed by `stty size`, in order.
const sizesIn = (out) => (out.match(/^\d+ \d+\r?$/gm) || []).map((l) => l.trim());

const TRAP = 'trap "stty size" WINCH; stty size; while :; do sleep 0.1; done';

const cases = {};

// Three resizes from Node; the program prints every new size, in order.
cases.trap = async () => {
  const s = open('/bin/sh', ['-c', TRAP], { cols: 80, rows: 24 });
  await s.startedP;
  const seen = [];
  for (const [c, r] of [[100, 30], [132, 40], [60, 20]]) {
    const before = sizesIn(s.output).length;
    if (before === 0) await until(() => sizesIn(s.output).length > 0, 10000);
    s.p.resize(c, r);
    const ok = await until(() => sizesIn(s.output).includes(`${r} ${c}`), 10000);
    seen.push(ok ? `${r} ${c}` : `missing ${r} ${c}`);
  }
  const got = sizesIn(s.output);
  record('trap: the initial size is 24 80', got[0] === '24 80', got);
  record('trap: three resizes from Node are printed by the WINCH trap in order (30 100, 40 132, 20 60)',
    JSON.stringify(got) === JSON.stringify(['24 80', '30 100', '40 132', '20 60']), { got, seen });
  record('trap: cols and rows of the Pty follow resize()', s.p.cols === 60 && s.p.rows === 20, [s.p.cols, s.p.rows]);
  s.p.close();
  const ex = await s.exit;
  record('trap: close() after resizes ends the session (closed)', ex.error && ex.error.code === 'closed', ex.error && ex.error.code);
};

// tput cols after a resize prints the new width.
cases.tput = async () => {
  const s = open('/bin/sh', ['-c', 'trap \'echo "cols=$(tput cols) lines=$(tput lines)"; exit 0\' WINCH; echo ready; while :; do sleep 0.1; done'],
    { cols: 80, rows: 24 });
  await s.startedP;
  await until(() => s.output.includes('ready'), 10000);
  s.p.resize(132, 40);
  const ex = await s.exit;
  record('tput: after resize(132, 40) tput prints cols=132 lines=40', /cols=132 lines=40/.test(s.output), s.output.slice(-200));
  record('tput: the command exits 0', ex.exitCode === 0, ex);
};

// less at 80x24, resized to 132x40, redraws with 132 columns. Each line of the
// file is "NN:" + 300 letters; less -S chops it at the screen width and marks
// the chop with a reverse-video ">" in the last column, so a drawn line is
// exactly as wide as the screen: 3 + letters + 1 columns.
cases.less = async () => {
  const file = `${WORK}/resize-less.txt`;
  const line = 'abcdefghij'.repeat(30);
  fs.writeFileSync(file, Array.from({ length: 100 }, (_, i) => `${String(i).padStart(2, '0')}:${line}`).join('\n') + '\n');
  const s = open('/usr/bin/less', ['-S', file], { cols: 80, rows: 24 });
  await s.startedP;
  // Widths of the drawn lines (their line numbers too) in `out`.
  const drawn = (out) => [...out.matchAll(/(\d\d):([a-j]+)\x1b\[7m>/g)].map((m) => ({ n: m[1], width: 3 + m[2].length + 1 }));
  await until(() => drawn(s.output).length >= 23, 15000);
  const before = drawn(s.output);
  const mark = s.output.length;
  s.p.resize(132, 40);
  await until(() => drawn(s.output.slice(mark)).length >= 39, 15000);
  const after = drawn(s.output.slice(mark));
  const widths = (d) => [...new Set(d.map((x) => x.width))];
  record('less: at 80x24 it draws 23 lines, each exactly 80 columns wide',
    before.length >= 23 && JSON.stringify(widths(before)) === '[80]', { lines: before.length, widths: widths(before) });
  record('less: resized to 132x40 it redraws 39 lines, each exactly 132 columns wide',
    after.length >= 39 && JSON.stringify(widths(after)) === '[132]',
    { lines: after.length, widths: widths(after), tail: JSON.stringify(s.output.slice(-200)) });
  s.p.write('q');
  const ex = await s.exit;
  record('less: q ends it, exit 0', ex.exitCode === 0, ex);
};

// 10,000 resizes in one tick: coalesced to the last size, output keeps flowing,
// input behind the flood arrives.
cases.flood = async () => {
  const s = open('/bin/sh', ['-c', 'trap "stty size" WINCH; stty size; i=0; while :; do echo "tick $i"; i=$((i+1)); sleep 0.05; done'],
    { cols: 80, rows: 24 });
  await s.startedP;
  await until(() => /tick 3\b/.test(s.output), 10000);
  const ticksBefore = (s.output.match(/tick \d+/g) || []).length;
  for (let i = 0; i < 10000; i++) s.p.resize(1 + (i % 1000), 1 + (i % 300));
  s.p.resize(132, 40);
  const applied = await until(() => { const z = sizesIn(s.output); return z.length > 1 && z[z.length - 1] === '40 132'; }, 15000);
  const sizes = sizesIn(s.output);
  const ticksAt = (s.output.match(/tick \d+/g) || []).length;
  const flowing = await until(() => (s.output.match(/tick \d+/g) || []).length >= ticksAt + 5, 10000);
  record('flood: after 10,000 resizes in one tick the last size (40 132) is the one the program sees last',
    applied, { printed: sizes.length, last: sizes.slice(-3) });
  record('flood: the program saw far fewer than 10,000 size changes (coalesced)', sizes.length < 1000, sizes.length);
  record('flood: output keeps flowing after the flood', flowing && ticksAt > ticksBefore - 1,
    { ticksBefore, ticksAt, now: (s.output.match(/tick \d+/g) || []).length });
  s.p.close();
  await s.exit;

  const c = open('/bin/cat', [], { cols: 80, rows: 24 });
  await c.startedP;
  for (let i = 0; i < 10000; i++) c.p.resize(1 + (i % 1000), 1 + (i % 300));
  c.p.write('after-the-flood\n');
  const echoed = await until(() => c.output.includes('after-the-flood'), 10000);
  record('flood: input written right behind 10,000 resizes reaches the command', echoed, c.output.slice(-100));
  c.p.end();
  const ex = await c.exit;
  record('flood: the session then ends normally (exit 0)', ex.exitCode === 0, ex);
};

// resize() before started: before the helper ran (START carries it) and between
// the helper and started (queued, sent once running).
cases.prestart = async () => {
  const a = open('/bin/sh', ['-c', 'stty size'], { cols: 80, rows: 24 });
  const stateA = a.p.state;
  a.p.resize(100, 30);
  await a.exit;
  record('prestart: resize() while connecting gives the command that size (30 100)',
    stateA === 'connecting' && sizesIn(a.output)[0] === '30 100', { stateA, out: a.output });

  const b = open('/bin/sh', ['-c', TRAP], { cols: 80, rows: 24 });
  await until(() => b.p.state !== 'connecting' && b.p.state !== 'handshake', 10000, 1);
  const stateB = b.p.state;
  b.p.resize(50, 20);
  b.p.resize(132, 40);  // the last size wins
  await b.startedP;
  const applied = await until(() => { const z = sizesIn(b.output); return z.length > 0 && z[z.length - 1] === '40 132'; }, 10000);
  const z = sizesIn(b.output);
  record('prestart: resize() while starting is applied once the unit runs, the last size wins (40 132)',
    stateB === 'starting' && applied && !z.includes('20 50'), { stateB, sizes: z });
  b.p.close();
  await b.exit;
};

// Bad input: each gets its error, nothing is sent; after the end: closed.
cases.bad = async () => {
  const s = open('/bin/sh', ['-c', 'stty size; read x'], { cols: 80, rows: 24 });
  await s.startedP;
  const code = (f) => { try { f(); return 'none'; } catch (e) { return e.code; } };
  const got = {
    zero: code(() => s.p.resize(0, 24)), rows0: code(() => s.p.resize(80, 0)),
    big: code(() => s.p.resize(1001, 24)), frac: code(() => s.p.resize(80.5, 24)),
    str: code(() => s.p.resize('80', 24)), missing: code(() => s.p.resize(80)),
  };
  record('bad: zero, 1001, fractional, string and missing sizes throw bad_size',
    Object.values(got).every((c) => c === 'bad_size'), got);
  s.p.write('\n');
  const ex = await s.exit;
  record('bad: the session was not disturbed (exit 0, size 24 80)', ex.exitCode === 0 && sizesIn(s.output)[0] === '24 80',
    { ex, out: s.output });
  record('bad: resize() after the end throws closed', code(() => s.p.resize(100, 30)) === 'closed');

  // Raw frames a broken client could send: the supervisor's error codes.
  for (const [name, payload, want] of [['zero cols', [0, 0, 0, 24], 'bad_size'], ['1001 rows', [0, 80, 3, 0xe9], 'bad_size'],
    ['3 bytes', [0, 80, 0], 'frame_too_small'], ['5 bytes', [0, 80, 0, 24, 0], 'frame_too_large']]) {
    const c = await raw(['/bin/sh', '-c', 'while :; do sleep 0.1; done']);
    await until(() => c.envelopes.some((e) => e.type === 'started'), 15000);
    c.sock.write(protocol.encodeFrame(protocol.FrameType.RESIZE, Buffer.from(payload)));
    await until(() => c.closed, 15000);
    const err = c.envelopes.find((e) => e.type === 'error');
    record(`bad: a RESIZE frame with ${name} ends the session with error ${want}`, err && err.code === want, c.envelopes);
  }
};

// A connection speaking the protocol by hand (the helper runs as the module runs it).
async function raw(argv) {
  const sock = net.createConnection(pty.DEFAULT_SOCKET_PATH);
  sock.pause();
  await new Promise((res, rej) => { sock.once('connect', res); sock.once('error', rej); });
  const c = { sock, envelopes: [], closed: false };
  const dec = new protocol.FrameDecoder('fromSupervisor');
  sock.on('data', (chunk) => {
    dec.push(chunk, (type, payload) => {
      if (type === protocol.FrameType.EVENT) c.envelopes.push(protocol.parseEnvelope(payload));
    });
  });
  sock.on('error', () => {});
  sock.on('close', () => { c.closed = true; });
  const dir = fs.openSync(WORK, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  const h = childProcess.spawn(pty.DEFAULT_HELPER_PATH, ['--cols', '80', '--rows', '24', '--', ...argv],
    { stdio: ['ignore', 'ignore', 'pipe', sock, dir], env: {} });
  fs.closeSync(dir);
  await new Promise((r) => h.on('close', r));
  sock.resume();
  return c;
}

async function main() {
  fs.writeFileSync(OUT, '');
  // The suite names the runtime (--runtime=node|bun); the check proves it is
  // the one running: Debian's Node, or the pinned Bun (process.versions.bun).
  const runtime = process.versions.bun ? 'bun' : 'node';
  record(`app: runs on the suite's runtime (${process.env.OPENCODE_TEST_RUNTIME || 'node'}) with the module under test`,
    runtime === (process.env.OPENCODE_TEST_RUNTIME || 'node'),
    { runtime, node: process.version, bun: process.versions.bun || null, execPath: process.execPath });
  const want = (process.env.OPENCODE_RESIZE_CASES || Object.keys(cases).join(',')).split(',');
  for (const name of want) {
    if (!cases[name]) { record(`case ${name} exists`, false, Object.keys(cases)); continue; }
    const t0 = Date.now();
    try {
      await cases[name]();
    } catch (e) {
      record(`case ${name} ran to completion`, false, String(e && e.stack || e));
    }
    process.stdout.write(`case ${name}: ${Date.now() - t0} ms\n`);
  }
  return exitCode();
}

main().then((code) => { process.exitCode = code; }, (e) => { console.error(e); process.exitCode = 1; });
