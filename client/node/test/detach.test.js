'use strict';
// Detachable sessions (docs/PROTOCOL.md section 10, issue #33) against the
// fake supervisor of test-support/fake.js: spawn's detachable option and the
// helper arguments it makes, list(), attach() with its replay, the cursor,
// the errors and the handshake queue that LIST and ATTACH connections share.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, list, attach, protocol, limits, HELPER_STATUS } = require('..');
const { fakeSupervisor, exitOf, HEX32, STARTED } = require('../test-support/fake.js');
const { sleep, until, within } = require('../test-support/wait.js');

const { FrameType } = protocol;
const OTHER = '0123456789abcdef0123456789abcdef';

// ------------------------------------------------------------ spawn option --

test('detachable: the helper gets --detach and --scrollback, the START carries flag 0x2 and both numbers', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); c.exit(0); });
  t.after(sup.close);
  const pty = spawn('prog', ['a'], sup.opts({ detachable: { graceSeconds: 30 } }));
  await exitOf(pty);
  assert.deepEqual(sup.report().args,
    ['--cols', '80', '--rows', '24', '--detach', '30', '--scrollback', String(limits.defaultScrollbackBytes), '--', 'prog', 'a']);
  assert.deepEqual(conn.start, { cols: 80, rows: 24, flags: 2, argv: ['prog', 'a'],
    detach: { grace: 30, scrollback: 1048576 } });
  assert.equal(pty.detachable, true);
  assert.equal(pty.replay, null);
});

test('detachable with extraEnv: flags 0x3, the ENV frame first, the bounds accepted', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts({
    cols: 100, extraEnv: { A: '1' },
    detachable: { graceSeconds: limits.maxDetachGraceSec, scrollbackBytes: limits.minScrollbackBytes },
  }));
  await until(() => conn && conn.frames.length >= 1, 'the ENV frame');
  assert.deepEqual(sup.report().args,
    ['--cols', '100', '--rows', '24', '--env', '--detach', '3600', '--scrollback', '65536', '--', 'prog']);
  assert.equal(conn.start.flags, 3);
  assert.deepEqual(conn.start.detach, { grace: 3600, scrollback: 65536 });
  assert.equal(conn.frames[0].type, FrameType.ENV);
  conn.exit(0);
  await exitOf(pty);
  // The largest ring too.
  let big;
  const sup2 = await fakeSupervisor((c) => { big = c; c.started(); c.exit(0); });
  t.after(sup2.close);
  await exitOf(spawn('prog', [], sup2.opts({ detachable: { graceSeconds: 1, scrollbackBytes: limits.maxScrollbackBytes } })));
  assert.deepEqual(big.start.detach, { grace: 1, scrollback: 2097152 });
});

test('without detachable nothing changes: no helper option, flags 0, not detachable', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); c.exit(0); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  await exitOf(pty);
  assert.deepEqual(sup.report().args, ['--cols', '80', '--rows', '24', '--', 'prog']);
  assert.deepEqual(conn.start, { cols: 80, rows: 24, flags: 0, argv: ['prog'] });
  assert.equal(pty.detachable, false);
  assert.equal(pty.replay, null);
});

test('detachable: every bad value is a clear error at spawn, nothing connected', async (t) => {
  const sup = await fakeSupervisor();
  t.after(sup.close);
  const code = (detachable) => {
    try {
      spawn('prog', [], sup.opts({ detachable })).close();
    } catch (e) {
      return e.code || e.name;
    }
    return 'ok';
  };
  assert.equal(code({ graceSeconds: 1 }), 'ok');
  assert.equal(code({ graceSeconds: 3600, scrollbackBytes: 65536 }), 'ok');
  for (const g of [0, -1, 3601, 1.5, '30', null, NaN, Infinity, 2 ** 53]) {
    assert.equal(code({ graceSeconds: g }), 'bad_detach', `graceSeconds ${g}`);
  }
  assert.equal(code({}), 'bad_detach');
  for (const s of [0, 65535, 2097153, 65536.5, '65536', null]) {
    assert.equal(code({ graceSeconds: 30, scrollbackBytes: s }), 'bad_detach', `scrollbackBytes ${s}`);
  }
  assert.equal(code({ graceSeconds: 30, grace: 30 }), 'TypeError');
  for (const d of [null, true, 30, 'yes', []]) assert.equal(code(d), 'TypeError', `detachable ${JSON.stringify(d)}`);
  // The codes the helper's new statuses have (lib/helper.js names them).
  assert.equal(HELPER_STATUS[29], 'bad_detach');
  assert.equal(HELPER_STATUS[30], 'bad_scrollback');
  // The two valid spawns connect at spawn(), before their close(): wait until
  // the fake accepted both (a 50 ms sleep alone failed here when the process
  // stalled past the timer before the loop polled the listening socket: 0
  // connections seen), then give a wrong one the same time to show up.
  await until(() => sup.conns.length >= 2, 'the two valid spawns to connect');
  await sleep(50);
  assert.equal(sup.conns.length, 2, 'only the two valid spawns connected');
});

// ------------------------------------------------------------------ cursor --

test('cursor: counts OUTPUT bytes before decoding, a character split across frames included', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts({ detachable: { graceSeconds: 60 } }));
  assert.equal(pty.cursor, null, 'null before started');
  await new Promise((r) => pty.onStarted(r));
  assert.equal(pty.cursor, 0);
  const seen = [];
  pty.onData((d) => seen.push([d, pty.cursor]));
  const euro = Buffer.from('€');       // e2 82 ac
  const clef = Buffer.from('𝄞');       // f0 9d 84 9e
  conn.output(Buffer.concat([Buffer.from('ab'), euro.subarray(0, 1)]));
  conn.output(euro.subarray(1));
  conn.output(clef.subarray(0, 2));
  conn.output(Buffer.concat([clef.subarray(2), Buffer.from('z')]));
  await until(() => pty.cursor === 10, 'cursor 10');
  assert.deepEqual(seen, [['ab', 3], ['€', 5], ['𝄞z', 10]]);
  conn.exit(0);
  await exitOf(pty);
  assert.equal(pty.cursor, 10, 'kept after the exit');
});

test('cursor: held output is not counted until a data listener takes it', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts({ encoding: null }));  // not detachable: counted all the same
  await new Promise((r) => pty.onStarted(r));
  conn.output(Buffer.from('hello'));
  conn.output(Buffer.from('world!'));
  await until(() => pty.bufferedBytes === 11, 'output held');
  assert.equal(pty.cursor, 0);
  const got = [];
  pty.onData((b) => got.push(b));
  await until(() => pty.cursor === 11, 'cursor 11');
  assert.equal(Buffer.concat(got).toString(), 'helloworld!');
  pty.close();
});

// -------------------------------------------------------------------- list --

test('list(): one LIST frame, no helper, the session envelopes as plain objects', async (t) => {
  const sup = await fakeSupervisor((c) => {
    c.sessionEntry({ state: 'attached', first: 0, next: 120, pid: 4242 });
    c.sessionEntry({ session: OTHER, unit: `opencode-pty-${OTHER}.service`, grace: 3600, scrollback: 65536,
      first: 70000, next: 135536, exited: true, code: null, signal: 'TERM', extra: 'ignored' });
    c.listed(2);
  });
  t.after(sup.close);
  const entries = await within(list({ socketPath: sup.socketPath }), 'list()');
  assert.equal(sup.conns.length, 1);
  const conn = sup.conns[0];
  assert.equal(conn.list, true);
  assert.equal(conn.start, null);
  assert.deepEqual(conn.frames, [], 'LIST is the only frame');
  await conn.until((c) => c.closed, 'the client closes');
  assert.throws(() => sup.report(), /ENOENT/, 'no helper ran');
  assert.deepEqual(entries, [
    { session: HEX32, unit: `opencode-pty-${HEX32}.service`, state: 'attached', started: 1700000000000000,
      grace: 60, scrollback: 1048576, first: 0, next: 120, exited: false, code: null, signal: null, pid: 4242 },
    { session: OTHER, unit: `opencode-pty-${OTHER}.service`, state: 'detached', started: 1700000000000000,
      grace: 3600, scrollback: 65536, first: 70000, next: 135536, exited: true, code: null, signal: 'TERM', pid: null },
  ]);
  assert.equal(Object.getPrototypeOf(entries[0]), Object.prototype);
});

test('list(): an empty list', async (t) => {
  const sup = await fakeSupervisor((c) => c.listed(0));
  t.after(sup.close);
  assert.deepEqual(await within(list({ socketPath: sup.socketPath }), 'list()'), []);
});

test('list(): an error envelope, a wrong count, a bad entry, a close, and bad options reject with their codes', async (t) => {
  const answers = [
    (c) => c.error('unauthenticated', 'not the MainPID'),
    (c) => { c.sessionEntry(); c.listed(2); },
    (c) => { c.sessionEntry({ first: 10, next: 5 }); c.listed(1); },
    (c) => { c.sessionEntry({ exited: false, code: 0 }); c.listed(1); },
    (c) => { c.sessionEntry({ state: 'gone' }); c.listed(1); },
    (c) => { c.sessionEntry({ session: OTHER }); c.listed(1); },  // the unit names another id
    (c) => { c.sessionEntry({ pad: 'x'.repeat(limits.maxListEntryBytes) }); c.listed(1); },
    (c) => { c.started(); },
    (c) => { c.output(Buffer.from('x')); },
    (c) => { c.sessionEntry(); c.socket.end(); },
  ];
  let i = 0;
  const sup = await fakeSupervisor((c) => answers[i++](c));
  t.after(sup.close);
  const run = () => within(list({ socketPath: sup.socketPath }), 'list()');
  await assert.rejects(run(), { code: 'unauthenticated', fromSupervisor: true, message: 'not the MainPID' });
  await assert.rejects(run(), { code: 'bad_field' });
  await assert.rejects(run(), { code: 'bad_field' });
  await assert.rejects(run(), { code: 'bad_field' });
  await assert.rejects(run(), { code: 'bad_field' });
  await assert.rejects(run(), { code: 'bad_field' });
  await assert.rejects(run(), { code: 'frame_too_large' });
  await assert.rejects(run(), { code: 'protocol_state' });
  await assert.rejects(run(), { code: 'protocol_state' });
  await assert.rejects(run(), { code: 'connection_closed' });
  await assert.rejects(list({ socketPath: 'relative' }), TypeError);
  await assert.rejects(list({ cursor: 1 }), TypeError);
  await assert.rejects(list({ socketPath: `${sup.dir}/nobody.sock` }), { code: 'connect_failed' });
});

test('list(): more than maxDetachableSessions entries is a protocol violation', async (t) => {
  const sup = await fakeSupervisor((c) => {
    for (let i = 0; i <= limits.maxDetachableSessions; i++) c.sessionEntry();
    c.listed(limits.maxDetachableSessions);
  });
  t.after(sup.close);
  await assert.rejects(within(list({ socketPath: sup.socketPath }), 'list()'), { code: 'protocol_state' });
});

// ------------------------------------------------------------------ attach --

test('attach(): bad ids and cursors are refused before any connection', async (t) => {
  const sup = await fakeSupervisor();
  t.after(sup.close);
  const o = { socketPath: sup.socketPath };
  for (const id of [HEX32.toUpperCase(), HEX32.slice(1), HEX32 + '0', `${HEX32.slice(1)}g`, '', 42, null, undefined]) {
    await assert.rejects(attach(id, o), { code: 'bad_attach' }, String(id));
  }
  for (const cursor of [-1, 1.5, 2 ** 53, '5', null, NaN, 5n]) {
    await assert.rejects(attach(HEX32, { ...o, cursor }), { code: 'bad_cursor' }, String(cursor));
  }
  await assert.rejects(attach(HEX32, { ...o, cols: 80 }), TypeError);
  await assert.rejects(attach(HEX32, { ...o, encoding: 'nope' }), TypeError);
  await sleep(50);
  assert.equal(sup.conns.length, 0);
});

test('attach(): ATTACH is the only frame until attached; the replay, then live output, in order; input after it', async (t) => {
  const sup = await fakeSupervisor(async (c) => {
    // attached and the replay in one write: they reach the module together.
    c.raw(Buffer.concat([
      protocol.encodeFrame(FrameType.EVENT, Buffer.from(JSON.stringify({
        type: 'attached', session: c.attach.session, unit: `opencode-pty-${c.attach.session}.service`,
        invocation: OTHER, revision: 'f'.repeat(40), source: 'e'.repeat(64),
        cursor: c.attach.cursor, dropped: 0, next: c.attach.cursor + 12, pid: 777,
      }))),
      protocol.encodeFrame(FrameType.OUTPUT, Buffer.from('replay-1|')),
      protocol.encodeFrame(FrameType.OUTPUT, Buffer.from('r2|')),
    ]));
    await c.until((x) => x.frames.length >= 1, 'input after attached');
    c.output(Buffer.from('live'));
  });
  t.after(sup.close);
  const pty = await within(attach(HEX32, { socketPath: sup.socketPath, cursor: 500 }), 'attach()');
  let out = '';
  pty.onData((d) => { out += d; });
  const conn = sup.conns[0];
  assert.deepEqual(conn.attach, { session: HEX32, cursor: 500 });
  assert.equal(conn.start, null);
  assert.deepEqual(pty.replay, { cursor: 500, dropped: 0, next: 512 });
  assert.equal(pty.session, HEX32);
  assert.equal(pty.unit, `opencode-pty-${HEX32}.service`);
  assert.equal(pty.invocation, OTHER);
  assert.equal(pty.pid, 777);
  assert.equal(pty.process, null);
  assert.equal(pty.cols, null);
  assert.equal(pty.detachable, true);
  assert.equal(pty.state, 'running');
  assert.equal(pty.cursor, 500);
  await until(() => out === 'replay-1|r2|', 'the replay');
  assert.equal(pty.cursor, 512);
  pty.write('typed');
  await until(() => out === 'replay-1|r2|live', 'live output');
  assert.equal(pty.cursor, 516);
  assert.deepEqual(conn.frames.map((f) => [f.type, f.payload.toString()]), [[FrameType.INPUT, 'typed']]);
  conn.exit(0);
  assert.equal((await exitOf(pty)).exitCode, 0);
});

test('attach(): frames written before attached wait for it (input, a signal, a resize)', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; });
  t.after(sup.close);
  const pending = attach(HEX32, { socketPath: sup.socketPath });
  await until(() => conn, 'ATTACH');
  await sleep(50);
  assert.deepEqual(conn.frames, [], 'nothing behind ATTACH before attached');
  conn.attached({ pid: 55 });
  conn.commandStarted(55);  // the same pid once more is not an error
  const pty = await within(pending, 'attach()');
  pty.resize(120, 40);
  pty.write('x');
  pty.kill('SIGINT');
  await conn.until((c) => c.frames.length === 3, 'three frames');
  assert.deepEqual(conn.frames.map((f) => f.type), [FrameType.RESIZE, FrameType.INPUT, FrameType.SIGNAL]);
  assert.deepEqual([pty.cols, pty.rows], [120, 40]);
  assert.equal(pty.pid, 55);
  conn.exit(0);
  const ev = await exitOf(pty);
  assert.equal(ev.error, null);
});

test('attach(): a command that exited while detached: the replay, then onExit', async (t) => {
  const sup = await fakeSupervisor((c) => {
    c.attached({ next: 6 });
    c.output(Buffer.from('bye'));
    c.output(Buffer.from('\r\n$'));
    c.exit(null, 'TERM');
  });
  t.after(sup.close);
  const pty = await within(attach(HEX32, { socketPath: sup.socketPath }), 'attach()');
  // Listeners registered when the promise resolved get everything behind `attached`.
  let out = '';
  pty.onData((d) => { out += d; });
  const ev = await within(exitOf(pty), 'onExit');
  assert.equal(out, 'bye\r\n$');
  assert.deepEqual(ev, { exitCode: null, signal: 'TERM', result: 'signal', exact: true, error: null });
  assert.equal(pty.cursor, 6);
  assert.deepEqual(pty.replay, { cursor: 0, dropped: 0, next: 6 });
});

test('attach(): what follows attached waits for a data or exit listener, however late it comes', async (t) => {
  const sup = await fakeSupervisor((c) => {
    c.attached({ next: c.attach.cursor + 2 });
    c.output(Buffer.from('ok'));
    c.exit(c.attach.cursor);
  });
  t.after(sup.close);
  // Several attaches awaited together, listeners registered only after all
  // of them resolved and a few event-loop turns more.
  const ptys = await within(Promise.all([1, 2, 3].map((cursor) => attach(HEX32, { socketPath: sup.socketPath, cursor }))), 'attach()');
  await sleep(100);
  assert.ok(ptys.every((p) => p.state === 'running' && p.cursor === p.replay.cursor), 'nothing decoded yet');
  const outs = ptys.map(() => '');
  ptys.forEach((p, i) => p.onData((d) => { outs[i] += d; }));
  const exits = await within(Promise.all(ptys.map(exitOf)), 'onExit');
  assert.deepEqual(exits.map((e) => e.exitCode), [1, 2, 3]);
  assert.deepEqual(outs, ['ok', 'ok', 'ok']);
  assert.deepEqual(ptys.map((p) => p.cursor), [3, 4, 5]);
});

test('attach(): bytes the ring no longer holds are counted in dropped; the cursor starts at first', async (t) => {
  const sup = await fakeSupervisor((c) => {
    c.attached({ cursor: 1000, dropped: 1000 - c.attach.cursor, next: 1004 });
    c.output(Buffer.from('tail'));
  });
  t.after(sup.close);
  const pty = await within(attach(HEX32, { socketPath: sup.socketPath, cursor: 10, encoding: null }), 'attach()');
  assert.deepEqual(pty.replay, { cursor: 1000, dropped: 990, next: 1004 });
  const got = [];
  pty.onData((b) => got.push(b));
  await until(() => pty.cursor === 1004, 'cursor 1004');
  assert.ok(Buffer.isBuffer(got[0]));
  assert.equal(Buffer.concat(got).toString(), 'tail');
  pty.close();
});

test('attach(): the supervisor\'s refusals and a broken answer reject with their codes', async (t) => {
  const answers = [
    (c) => c.error('no_such_session', 'no detachable session with that id'),
    (c) => c.error('session_attached', 'the session has a connection'),
    (c) => c.error('bad_cursor', 'cursor past next'),
    (c) => c.attached({ session: OTHER, unit: `opencode-pty-${OTHER}.service` }),  // another session's answer
    (c) => c.attached({ unit: `opencode-pty-${OTHER}.service` }),  // a unit not named for the session
    (c) => c.attached({ cursor: c.attach.cursor + 1 }),    // cursor is not asked + dropped
    (c) => c.attached({ next: c.attach.cursor - 1 }),      // next before cursor
    (c) => c.started(),                                     // a spawn's answer
    (c) => { c.output(Buffer.from('x')); },
    (c) => c.socket.end(),
  ];
  let i = 0;
  const sup = await fakeSupervisor((c) => answers[i++](c));
  t.after(sup.close);
  const run = () => within(attach(HEX32, { socketPath: sup.socketPath, cursor: 7 }), 'attach()');
  await assert.rejects(run(), { code: 'no_such_session', fromSupervisor: true });
  await assert.rejects(run(), { code: 'session_attached', fromSupervisor: true });
  await assert.rejects(run(), { code: 'bad_cursor', fromSupervisor: true });
  await assert.rejects(run(), { code: 'protocol_state' });
  await assert.rejects(run(), { code: 'bad_field' });
  await assert.rejects(run(), { code: 'bad_field' });
  await assert.rejects(run(), { code: 'bad_field' });
  await assert.rejects(run(), { code: 'protocol_state' });
  await assert.rejects(run(), { code: 'protocol_state' });
  await assert.rejects(run(), { code: 'connection_closed' });
  await assert.rejects(attach(HEX32, { socketPath: `${sup.dir}/nobody.sock` }), { code: 'connect_failed' });
});

test('a spawned PTY refuses attached, session and listed envelopes', async (t) => {
  const answers = [
    (c) => { c.started(); c.event({ type: 'listed', count: 0 }); },
    (c) => { c.started(); c.sessionEntry(); },
    (c) => { c.event({ ...STARTED, type: 'attached', cursor: 0, dropped: 0, next: 0, pid: null }); },
  ];
  let i = 0;
  const sup = await fakeSupervisor((c) => answers[i++](c));
  t.after(sup.close);
  for (let k = 0; k < answers.length; k++) {
    const ev = await within(exitOf(spawn('prog', [], sup.opts())), 'onExit');
    assert.equal(ev.error && ev.error.code, 'protocol_state');
  }
});

// -------------------------------------------------------------- queueing --

test('LIST and ATTACH connections share the handshake queue with spawns: at most maxPendingHandshakes at once', async (t) => {
  let inHandshake = 0;
  let peak = 0;
  const sup = await fakeSupervisor(async (c) => {
    await sleep(20);
    inHandshake--;
    if (c.list) c.listed(0);
    else if (c.attach) { c.attached(); c.exit(0); }
    else { c.started(); c.exit(0); }
  });
  sup.server.on('connection', () => { inHandshake++; peak = Math.max(peak, inHandshake); });
  t.after(sup.close);
  const n = limits.maxPendingHandshakes;
  const lists = [];
  const attaches = [];
  const spawns = [];
  for (let i = 0; i < n; i++) lists.push(list({ socketPath: sup.socketPath }));
  for (let i = 0; i < n; i++) attaches.push(attach(HEX32, { socketPath: sup.socketPath, cursor: i }).then(exitOf));
  for (let i = 0; i < n; i++) spawns.push(spawn('prog', [], sup.opts()));
  // The lists took every slot: the spawns wait for one, unconnected.
  assert.equal(spawns.filter((p) => p._socket === null).length, n);
  assert.deepEqual(await within(Promise.all(lists), 'lists'), lists.map(() => []));
  const exits = await within(Promise.all([...attaches, ...spawns.map(exitOf)]), 'exits');
  assert.ok(exits.every((e) => e.exitCode === 0 && e.error === null), JSON.stringify(exits.filter((e) => e.error)));
  assert.ok(peak <= limits.maxPendingHandshakes, `peak ${peak}`);
  assert.equal(sup.conns.length, 3 * n);
  assert.deepEqual(sup.conns.filter((c) => c.attach).map((c) => c.attach.cursor).sort((a, b) => a - b),
    [...Array(n).keys()]);
});

test('a queued list() or attach() whose connection fails frees its slot for the next', async (t) => {
  // Every answer is a refusal: the queue must drain anyway.
  const sup = await fakeSupervisor((c) => c.error('too_many_detachable', 'full'));
  t.after(sup.close);
  const all = [];
  for (let i = 0; i < limits.maxPendingHandshakes * 2; i++) {
    all.push(list({ socketPath: sup.socketPath }).then(() => 'ok', (e) => e.code));
    all.push(attach(HEX32, { socketPath: sup.socketPath }).then(() => 'ok', (e) => e.code));
  }
  const codes = await within(Promise.all(all), 'all refusals');
  assert.ok(codes.every((c) => c === 'too_many_detachable'), codes.join());
});
