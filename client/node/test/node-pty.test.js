'use strict';
// The node-pty drop-in entry (node-pty.js) against the fake supervisor of
// test-support/fake.js: node-pty 1.1's contract where the strict entry
// (index.js) says something else. Each case is one habit of node-pty's users
// (opencode's PTY adapter among them) that broke on the strict entry.
const test = require('node:test');
const assert = require('node:assert/strict');
const nodePty = require('../node-pty.js');
const { protocol, limits } = require('..');
const { fakeSupervisor } = require('../test-support/fake.js');
const { sleep, within, until } = require('../test-support/wait.js');

const { FrameType } = protocol;

const exitOf = (pty, ms) => within(new Promise((r) => pty.onExit(r)), 'onExit', ms);

const inputOf = (conn) => Buffer.concat(conn.frames.filter((f) => f.type === FrameType.INPUT).map((f) => f.payload));

test('drop-in: pid is a number from spawn on: 0, then the command\'s pid', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = nodePty.spawn('cat', [], sup.opts());
  assert.equal(pty.pid, 0);
  await until(() => conn, 'the connection');
  conn.commandStarted(4242);
  await until(() => pty.pid === 4242, 'the pid');
  conn.exit(0);
  await exitOf(pty);
});

test('drop-in: onExit is {exitCode, signal} with numbers; a killed command is 128+n, never 0', async (t) => {
  const cases = [
    [(c) => c.exit(3), { exitCode: 3, signal: 0 }],
    [(c) => c.exit(0), { exitCode: 0, signal: 0 }],
    [(c) => c.exit(null, 'HUP'), { exitCode: 129, signal: 1 }],
    [(c) => c.exit(null, 'TERM', false), { exitCode: 143, signal: 15 }],
    [(c) => c.exit(null, 'KILL'), { exitCode: 137, signal: 9 }],
  ];
  for (const [end, want] of cases) {
    const sup = await fakeSupervisor((c) => { c.started(); end(c); });
    const ev = await exitOf(nodePty.spawn('prog', [], sup.opts()));
    await sup.close();
    assert.deepEqual(ev, want);
  }
});

test('drop-in: a session that fails ends with exitCode 1 after the error went to onError', async (t) => {
  const sup = await fakeSupervisor((c) => {
    c.event({ type: 'error', code: 'too_many_sessions', message: 'full' });
    c.socket.end();
  });
  t.after(sup.close);
  const pty = nodePty.spawn('prog', [], sup.opts());
  const errors = [];
  pty.onError((e) => errors.push(e.code));
  const ev = await exitOf(pty);
  assert.deepEqual(ev, { exitCode: 1, signal: 0 });
  assert.deepEqual(errors, ['too_many_sessions']);
});

test('drop-in: write() never throws: a lone surrogate goes as U+FFFD, a write after the exit is dropped', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = nodePty.spawn('cat', [], sup.opts());
  const errors = [];
  pty.onError((e) => errors.push(e.code));
  pty.write('a\uD800b');
  await until(() => conn && inputOf(conn).length === 5, 'the input');
  assert.deepEqual(inputOf(conn), Buffer.from('a\uFFFDb', 'utf8'));
  conn.exit(0);
  await exitOf(pty);
  pty.write('late');
  pty.write(Buffer.from([0xff, 0xfe]));
  assert.deepEqual(errors, []);
});

test('drop-in: input beyond the module\'s queue waits in order instead of throwing input_queue_full', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = nodePty.spawn('cat', [], sup.opts());
  await until(() => conn, 'the connection');
  conn.socket.pause();  // the supervisor stops reading: the module's queue fills
  const piece = 'x'.repeat(256 * 1024 - 1) + '\n';
  const total = 12;  // 3 MiB, three times the module's own queue
  const errors = [];
  pty.onError((e) => errors.push(e.code));
  for (let i = 0; i < total; i++) pty.write(piece);
  assert.deepEqual(errors, []);
  conn.socket.resume();
  await until(() => inputOf(conn).length === total * piece.length, 'all input');
  assert.ok(inputOf(conn).equals(Buffer.from(piece.repeat(total))));
  conn.exit(0);
  await exitOf(pty);
});

test('drop-in: resize() never throws: after the exit it does nothing, a bad size goes to onError', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = nodePty.spawn('cat', [], sup.opts());
  const errors = [];
  pty.onError((e) => errors.push(e.code));
  await until(() => conn, 'the connection');
  pty.resize(0, 10);
  assert.deepEqual(errors, ['bad_size']);
  conn.exit(0);
  await exitOf(pty);
  pty.resize(100, 40);
  assert.deepEqual(errors, ['bad_size']);
});

test('drop-in: kill() with no argument is SIGHUP; an unknown signal goes to onError', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = nodePty.spawn('sleep', ['30'], sup.opts());
  const errors = [];
  pty.onError((e) => errors.push(e.name));
  await until(() => conn, 'the connection');
  pty.kill();
  pty.kill('SIGALRM');
  await until(() => conn.frames.some((f) => f.type === FrameType.SIGNAL), 'the SIGNAL frame');
  const signals = conn.frames.filter((f) => f.type === FrameType.SIGNAL).map((f) => f.payload[0]);
  assert.deepEqual(signals, [1]);
  assert.equal(errors.length, 1);
  conn.exit(null, 'HUP');
  assert.deepEqual(await exitOf(pty), { exitCode: 129, signal: 1 });
});

test('drop-in: with no data listener, output past the hold bound goes to nobody and onExit still fires', async (t) => {
  const chunk = Buffer.alloc(limits.maxOutputPayload, 0x61);
  const frames = Math.ceil((2 * limits.maxBufferedOutputBytes) / chunk.length);
  const sup = await fakeSupervisor(async (c) => {
    c.started();
    for (let i = 0; i < frames; i++) {
      if (!c.output(chunk)) await new Promise((r) => c.socket.once('drain', r));
    }
    c.exit(0);
  });
  t.after(sup.close);
  const pty = nodePty.spawn('yes', [], sup.opts());
  assert.deepEqual(await exitOf(pty, 20000), { exitCode: 0, signal: 0 });
  assert.ok(pty.droppedOutput >= frames * chunk.length - limits.maxBufferedOutputBytes - chunk.length,
    `dropped ${pty.droppedOutput}`);
  // A listener that comes later gets what was held, in order.
  let got = '';
  pty.onData((d) => { got += d; });
  await until(() => got.length > 0, 'the held output');
  assert.ok(got.length >= limits.maxBufferedOutputBytes && got.length < limits.maxBufferedOutputBytes + chunk.length);
});

test('drop-in: spawn takes node-pty\'s options: name sets TERM, env values may be undefined, uid/gid are refused', async (t) => {
  const sup = await fakeSupervisor((c) => { c.started(); c.exit(0); });
  t.after(sup.close);
  await exitOf(nodePty.spawn('prog', [], sup.opts({ name: 'xterm-256color', env: { A: '1', B: undefined } })));
  assert.throws(() => nodePty.spawn('prog', [], sup.opts({ env: { A: 1 } })), TypeError);
  assert.throws(() => nodePty.spawn('prog', [], sup.opts({ uid: 0 })), (e) => e.code === 'not_supported');
  assert.throws(() => nodePty.spawn('prog', 'a b', sup.opts()), TypeError);
});

test('drop-in: handleFlowControl turns XOFF/XON writes into pause()/resume()', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = nodePty.spawn('cat', [], sup.opts({ handleFlowControl: true }));
  pty.write('\x13');
  pty.write('a');
  pty.write('\x11');
  await until(() => conn && inputOf(conn).length === 1, 'the input');
  assert.deepEqual(inputOf(conn), Buffer.from('a'));
  conn.exit(0);
  await exitOf(pty);
});

// ------------------------------------------------------------- environment --

const { parseEnv } = require('../test-support/fake.js');
const envFrames = (conn) => conn.frames.filter((f) => f.type === FrameType.ENV);

test('drop-in: env (default process.env) travels as the ENV frame announced by START, before any input', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const env = { ...process.env, OPENCODE_TERMINAL: '1', PLUGIN_VAR: 'p', 'not-a-name': 'x', EMPTY: '' };
  const pty = nodePty.spawn('cat', [], sup.opts({ name: 'xterm-256color', env }));
  pty.write('typed');
  await until(() => conn && inputOf(conn).length === 5, 'the input');
  assert.equal(conn.start.flags, 1);
  assert.equal(conn.frames[0].type, FrameType.ENV, 'the ENV frame comes first');
  assert.equal(envFrames(conn).length, 1);
  const got = parseEnv(envFrames(conn)[0].payload);
  const want = { ...env, TERM: 'xterm-256color' };
  delete want['not-a-name'];
  assert.deepEqual(got, want);
  assert.deepEqual(sup.report().env, {}, 'the helper never sees a variable');
  conn.exit(0);
  await exitOf(pty);

  // No env option: process.env itself, and TERM from it or "xterm".
  let second;
  const sup2 = await fakeSupervisor((c) => { second = c; c.started(); });
  t.after(sup2.close);
  const p2 = nodePty.spawn('prog', [], sup2.opts());
  await until(() => second && envFrames(second).length === 1, 'the ENV frame');
  const got2 = parseEnv(envFrames(second)[0].payload);
  assert.equal(got2.PATH, process.env.PATH);
  assert.equal(got2.TERM, process.env.TERM !== undefined ? process.env.TERM : 'xterm');
  second.exit(0);
  await exitOf(p2);
});
