'use strict';
// Issue 20 against the fake supervisor of test-support/fake.js: the exit
// envelope's `exact`, the command's pid (notice command_started), the error
// launch_failed, node-pty's EventEmitter form (on/once/off for 'data' and
// 'exit'), any Buffer encoding decoded across frames, and destroy() reporting
// what happened to the command.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, protocol, limits, PtyError } = require('..');
const fake = require('../test-support/fake.js');
const { HANG_GUARD_MS, sleep, within, until } = require('../test-support/wait.js');

const { fakeSupervisor } = fake;

const { FrameType } = protocol;

const exitOf = (pty, ms) => within(fake.exitOf(pty), 'onExit', ms);

const parseCode = (s) => {
  try {
    protocol.parseEnvelope(Buffer.from(s));
  } catch (e) {
    assert.ok(e instanceof PtyError);
    return e.code;
  }
  return 'ok';
};

// ---------------------------------------------------------------- envelopes --

test('envelopes: exit.exact is a boolean and an exact status is either a code or a signal', () => {
  const ok = [
    '{"type":"exit","code":3,"signal":null,"result":"exit-code","exact":true}',
    '{"type":"exit","code":null,"signal":"TERM","result":"signal","exact":true}',
    '{"type":"exit","code":null,"signal":"SEGV","result":"core-dump","exact":true}',
    '{"type":"exit","code":null,"signal":"KILL","result":"signal","exact":false}',
    '{"type":"exit","code":1,"signal":null,"result":"exit-code","exact":false}',
    '{"type":"exit","code":null,"signal":"34","exact":true}',     // a signal without a name
    '{"type":"exit","code":0,"signal":null}',  // a supervisor before issue 20
  ];
  for (const s of ok) assert.equal(parseCode(s), 'ok', s);
  const bad = [
    '{"type":"exit","code":3,"signal":null,"exact":1}',
    '{"type":"exit","code":3,"signal":null,"exact":"true"}',
    '{"type":"exit","code":3,"signal":null,"exact":null}',
    '{"type":"exit","code":null,"signal":null,"exact":true}',     // neither
    '{"type":"exit","code":143,"signal":"TERM","exact":true}',     // both
    '{"type":"exit","code":null,"signal":"RTMIN+3","exact":true}',
    '{"type":"exit","code":null,"signal":"0","exact":true}',
    '{"type":"exit","code":null,"signal":"100","exact":true}',
    '{"type":"exit","code":null,"signal":"term","exact":true}',
  ];
  for (const s of bad) assert.equal(parseCode(s), 'bad_field', s);
});

test('envelopes: notice command_started carries a pid; error launch_failed carries reason and status', () => {
  assert.equal(protocol.parseEnvelope(Buffer.from('{"type":"notice","code":"command_started","pid":4242}')).pid, 4242);
  assert.equal(parseCode('{"type":"notice","code":"command_started"}'), 'missing_field');
  for (const pid of ['0', '-5', '"4242"', 'null', 'true', '4194305']) {
    assert.equal(parseCode(`{"type":"notice","code":"command_started","pid":${pid}}`), 'bad_field', pid);
  }
  // pid means nothing on other notices: not checked there.
  assert.equal(parseCode('{"type":"notice","code":"signal_sent","signal":"INT","pid":"x"}'), 'ok');
  const lf = protocol.parseEnvelope(Buffer.from(
    '{"type":"error","code":"launch_failed","message":"the launcher refused the command","reason":"bad_prefix","status":100}'));
  assert.deepEqual([lf.reason, lf.status], ['bad_prefix', 100]);
  assert.equal(parseCode('{"type":"error","code":"launch_failed","message":"m","status":100}'), 'missing_field');
  assert.equal(parseCode('{"type":"error","code":"launch_failed","message":"m","reason":"bad_prefix"}'), 'missing_field');
  assert.equal(parseCode('{"type":"error","code":"launch_failed","message":"m","reason":"Bad Prefix","status":100}'), 'bad_field');
  assert.equal(parseCode('{"type":"error","code":"launch_failed","message":"m","reason":"handoff","status":"123"}'), 'bad_field');
  assert.equal(parseCode('{"type":"error","code":"launch_failed","message":"m","reason":"handoff","status":-1}'), 'bad_field');
});

// ------------------------------------------------------------ exit and pid --

test('onExit carries exact: a command killed by TERM is {exitCode: null, signal: "TERM", exact: true}', async (t) => {
  const sup = await fakeSupervisor((c) => { c.started(); c.exit(null, 'TERM'); });
  t.after(sup.close);
  const ev = await exitOf(spawn('sleep', ['30'], sup.opts()));
  assert.deepEqual(ev, { exitCode: null, signal: 'TERM', result: 'signal', exact: true, error: null });
});

test('onExit: exact false is passed on as it came (systemd\'s view of the unit)', async (t) => {
  const sup = await fakeSupervisor((c) => { c.started(); c.exit(null, 'KILL', false); });
  t.after(sup.close);
  const ev = await exitOf(spawn('prog', [], sup.opts()));
  assert.deepEqual(ev, { exitCode: null, signal: 'KILL', result: 'signal', exact: false, error: null });
});

test('onExit: a supervisor that sends no exact, an error and close() all report exact false', async (t) => {
  let sup = await fakeSupervisor((c) => {
    c.started();
    c.event({ type: 'exit', code: 0, signal: null, result: 'success' });
    c.socket.end();
  });
  let ev = await exitOf(spawn('prog', [], sup.opts()));
  await sup.close();
  assert.deepEqual(ev, { exitCode: 0, signal: null, result: 'success', exact: false, error: null });
  sup = await fakeSupervisor((c) => { c.started(); c.event({ type: 'error', code: 'internal', message: 'x' }); c.socket.end(); });
  ev = await exitOf(spawn('prog', [], sup.opts()));
  assert.equal(ev.exact, false);
  assert.equal(ev.error.code, 'internal');
  const pty = spawn('prog', [], sup.opts());
  pty.close();
  ev = await exitOf(pty);
  await sup.close();
  assert.equal(ev.exact, false);
  assert.equal(ev.error.code, 'closed');
});

test('term.pid: undefined until the command_started notice, then the command\'s pid; kept after the exit', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  assert.equal(pty.pid, undefined, 'not known at spawn');
  await new Promise((r) => pty.onStarted(r));
  assert.equal(pty.pid, undefined, 'not known at started either');
  const notices = [];
  pty.onNotice((n) => notices.push({ code: n.code, pid: n.pid, seen: pty.pid }));
  conn.commandStarted(31337);
  await until(() => notices.length === 1, 'the notice');
  assert.deepEqual(notices, [{ code: 'command_started', pid: 31337, seen: 31337 }],
    'term.pid is set before onNotice listeners run');
  assert.equal(pty.pid, 31337);
  conn.exit(0);
  await exitOf(pty);
  assert.equal(pty.pid, 31337);
});

test('term.pid: a second command_started is a protocol violation', async (t) => {
  const sup = await fakeSupervisor((c) => { c.started(); c.commandStarted(100); c.commandStarted(101); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  const ev = await exitOf(pty);
  assert.equal(ev.error.code, 'protocol_state');
  assert.equal(pty.pid, 100);
});

test('launch_failed: an error with reason and status on the PtyError, onError then onExit, no exit status', async (t) => {
  const sup = await fakeSupervisor((c) => {
    c.started();
    c.event({ type: 'error', code: 'launch_failed', message: 'the launcher could not prepare the command',
      reason: 'not_tty', status: 104 });
    c.socket.end();
  });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  const errors = [];
  pty.onError((e) => errors.push(e));
  const ev = await exitOf(pty);
  assert.equal(ev.exitCode, null);
  assert.equal(ev.signal, null);
  assert.equal(ev.exact, false);
  assert.ok(ev.error instanceof PtyError);
  assert.equal(ev.error.code, 'launch_failed');
  assert.equal(ev.error.reason, 'not_tty');
  assert.equal(ev.error.status, 104);
  assert.equal(ev.error.fromSupervisor, true);
  assert.equal(ev.error.message, 'the launcher could not prepare the command');
  assert.deepEqual(errors, [ev.error]);
  assert.equal(pty.pid, undefined, 'the command never ran');
});

// --------------------------------------------------- node-pty's on('...') --

test('on("exit", fn) gets (exitCode, signal number) like node-pty: (null, 15) for TERM, (3, 0) for exit 3', async (t) => {
  const sup = await fakeSupervisor((c) => {
    c.started();
    if (c.start.argv[0] === 'killed') c.exit(null, 'TERM');
    else if (c.start.argv[0] === 'segv') c.exit(null, 'SEGV');
    else if (c.start.argv[0] === 'rt') c.exit(null, '34');
    else c.exit(3);
  });
  t.after(sup.close);
  const got = async (cmd) => {
    const pty = spawn(cmd, [], sup.opts());
    return within(new Promise((r) => { assert.equal(pty.on('exit', (...a) => r(a)), pty); }), 'exit event');
  };
  assert.deepEqual(await got('killed'), [null, 15]);
  assert.deepEqual(await got('segv'), [null, 11]);
  assert.deepEqual(await got('rt'), [null, 34]);
  assert.deepEqual(await got('exits'), [3, 0]);
  // A session that ended without an exit status: no code, no signal.
  const pty = spawn('prog', [], sup.opts());
  const a = new Promise((r) => pty.on('exit', (...x) => r(x)));
  pty.close();
  assert.deepEqual(await within(a, 'exit event'), [null, 0]);
});

test('on("data") is a data listener (onExit waits for its output); once/off/removeListener/addListener', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  const seen = { on: '', once: [], off: '', added: '' };
  const offFn = (d) => { seen.off += d; };
  const addedFn = (d) => { seen.added += d; };
  const order = [];
  pty.on('data', (d) => { seen.on += d; order.push('data'); });
  pty.once('data', (d) => seen.once.push(d));
  pty.on('data', offFn);
  assert.equal(pty.addListener('data', addedFn), pty);
  pty.on('exit', () => order.push('exit'));
  await new Promise((r) => pty.onStarted(r));
  conn.output(Buffer.from('one'));
  await until(() => seen.on === 'one', 'first output');
  assert.equal(pty.off('data', offFn), pty);
  assert.equal(pty.removeListener('data', addedFn), pty);
  assert.equal(pty.removeListener('data', () => {}), pty, 'an unknown listener is ignored');
  conn.output(Buffer.from('two'));
  conn.exit(0);
  await until(() => order.includes('exit'), 'exit');
  assert.equal(seen.on, 'onetwo');
  assert.deepEqual(seen.once, ['one']);
  assert.equal(seen.off, 'one');
  assert.equal(seen.added, 'one');
  assert.equal(order[order.length - 1], 'exit');
  assert.equal(order.filter((x) => x === 'exit').length, 1);
});

test('on(): a once("exit") listener can be removed before it fired; unknown events and non-functions throw', async (t) => {
  const sup = await fakeSupervisor((c) => { c.started(); c.exit(5); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  let fired = 0;
  const fn = () => { fired++; };
  pty.once('exit', fn);
  pty.removeListener('exit', fn);
  assert.throws(() => pty.on('close', () => {}), TypeError);
  assert.throws(() => pty.on('error', () => {}), TypeError);
  assert.throws(() => pty.on('data', 'x'), TypeError);
  const ev = await exitOf(pty);
  assert.equal(ev.exitCode, 5);
  await sleep(20);
  assert.equal(fired, 0);
});

// ----------------------------------------------------------------- encoding --

test('encoding: any Buffer encoding, decoded across frame boundaries like a StringDecoder on the stream', async (t) => {
  const bytes = Buffer.from('aé€𝄞\u0000\xff z'.repeat(7), 'utf8');
  const sup = await fakeSupervisor((c) => {
    c.started();
    // Every byte its own frame: base64 groups, UTF-16 units and UTF-8
    // characters are all split.
    for (let i = 0; i < bytes.length; i++) c.output(bytes.subarray(i, i + 1));
    c.exit(0);
  });
  t.after(sup.close);
  for (const enc of ['base64', 'base64url', 'hex', 'latin1', 'binary', 'utf16le', 'ucs2', 'ascii', 'utf8', 'utf-8']) {
    const pty = spawn('prog', [], sup.opts({ encoding: enc }));
    let out = '';
    const chunks = [];
    pty.onData((d) => { assert.equal(typeof d, 'string', enc); chunks.push(d); out += d; });
    await exitOf(pty);
    assert.equal(out, bytes.toString(enc), enc);
    assert.ok(chunks.length > 1, enc);
  }
  assert.equal(Buffer.from(bytes.toString('base64'), 'base64').equals(bytes), true);
});

test('encoding: an odd utf16le tail and an incomplete base64 group are flushed at the end', async (t) => {
  const sup = await fakeSupervisor((c) => { c.started(); c.output(Buffer.from([0x41, 0x00, 0x42])); c.exit(0); });
  t.after(sup.close);
  for (const enc of ['base64', 'utf16le', 'latin1']) {
    const pty = spawn('prog', [], sup.opts({ encoding: enc }));
    let out = '';
    pty.onData((d) => { out += d; });
    await exitOf(pty);
    const d = new (require('string_decoder').StringDecoder)(enc);
    assert.equal(out, d.write(Buffer.from([0x41, 0x00, 0x42])) + d.end(), enc);
  }
});

test('encoding: unknown names throw TypeError; null gives Buffers; waitForOutput sees what onData sees', async (t) => {
  const sup = await fakeSupervisor((c) => { c.started(); c.output(Buffer.from([0x63, 0x61, 0x66, 0xe9])); });
  t.after(sup.close);
  for (const enc of ['bogus', 'utf32', 7, true, '']) {
    assert.throws(() => spawn('prog', [], sup.opts({ encoding: enc })), TypeError, String(enc));
  }
  const pty = spawn('prog', [], sup.opts({ encoding: 'latin1' }));
  assert.equal((await pty.waitForOutput(/café/))[0], 'café');
  pty.close();
});

// ------------------------------------------------------------------ destroy --

test('destroy() while running: SIGNAL HUP then STOP; output stops; onExit reports the command\'s HUP', async (t) => {
  let conn;
  const sup = await fakeSupervisor(async (c) => {
    conn = c;
    c.started();
    c.commandStarted(4242);
    c.output(Buffer.from('before '));
    await c.until((x) => x.frames.some((f) => f.type === FrameType.STOP), 'STOP');
    c.event({ type: 'notice', code: 'signal_sent', signal: 'HUP' });
    c.output(Buffer.from('after destroy'));
    c.event({ type: 'notice', code: 'stopping' });
    c.exit(null, 'HUP');
  });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  let out = '';
  const errors = [];
  pty.onError((e) => errors.push(e));
  pty.onData((d) => { out += d; });
  await until(() => out === 'before ', 'output');
  const ret = pty.destroy();
  assert.equal(ret, undefined);
  const ev = await exitOf(pty);
  assert.deepEqual(ev, { exitCode: null, signal: 'HUP', result: 'signal', exact: true, error: null });
  assert.deepEqual(conn.frames.map((f) => [f.type, [...f.payload]]), [[FrameType.SIGNAL, [1]], [FrameType.STOP, []]]);
  assert.equal(out, 'before ', 'no output is delivered after destroy()');
  assert.deepEqual(errors, []);
  assert.equal(pty.state, 'exited');
});

// The STOP waits limits.destroyHupGraceMs: a STOP right behind the SIGNAL let
// systemd's TERM reach the command before the HUP (vm.node-signals, 7 ms).
test('destroy(): a command that dies of the HUP within the grace gets no STOP', async (t) => {
  let conn;
  const sup = await fakeSupervisor(async (c) => {
    conn = c;
    c.started();
    c.commandStarted(4242);
    await c.until((x) => x.frames.some((f) => f.type === FrameType.SIGNAL), 'SIGNAL');
    c.event({ type: 'notice', code: 'signal_sent', signal: 'HUP' });
    c.exit(null, 'HUP');
  });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  await new Promise((r) => pty.onStarted(r));
  const t0 = performance.now();
  pty.destroy();
  const ev = await exitOf(pty);
  // The grace is the module's own time limit. A host that stalled this
  // process past it (timers run before reads) read the exit late, and then
  // the STOP was due: only an exit read within the grace must spare it.
  const withinGrace = performance.now() - t0 < limits.destroyHupGraceMs;
  assert.equal(ev.signal, 'HUP');
  await sleep(limits.destroyHupGraceMs + 200);
  const types = conn.frames.map((f) => f.type);
  if (withinGrace) assert.deepEqual(types, [FrameType.SIGNAL], 'no STOP after the command ended');
  else assert.equal(types[0], FrameType.SIGNAL, 'the HUP first');
});

test('destroy() while paused with output held still reads the exit envelope, and drops the held output', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  let out = '';
  pty.onData((d) => { out += d; });
  await new Promise((r) => pty.onStarted(r));
  pty.pause();
  // 2 MiB unread: the module's bound and the kernel's buffers fill.
  const chunk = Buffer.alloc(limits.maxOutputPayload, 0x78);
  await new Promise((r) => {
    let n = 0;
    const pump = () => {
      while (n < 32) { n++; if (!conn.output(chunk)) { conn.socket.once('drain', pump); return; } }
      r();
    };
    pump();
    setTimeout(r, 500);
  });
  pty.destroy();
  await conn.until((c) => c.frames.some((f) => f.type === FrameType.STOP), 'STOP');
  conn.exit(null, 'HUP');
  const ev = await exitOf(pty);
  assert.equal(ev.signal, 'HUP');
  assert.equal(ev.error, null);
  assert.equal(out, '');
  assert.equal(pty.bufferedBytes, 0);
});

test('destroy() before started behaves like close(): nothing but the hang-up, onExit error closed', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  await until(() => conn, 'START');
  await until(() => pty.state === 'starting', 'state starting');
  pty.destroy();
  const ev = await exitOf(pty);
  assert.equal(ev.error.code, 'closed');
  await conn.until((c) => c.closed, 'hang-up');
  assert.deepEqual(conn.frames, []);
});

test('destroy() then close(): close() ends it at once with closed; destroy() twice sends one HUP and one STOP', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  await new Promise((r) => pty.onStarted(r));
  pty.destroy();
  pty.destroy();
  await conn.until((c) => c.frames.length >= 2, 'frames');
  await sleep(50);
  assert.deepEqual(conn.frames.map((f) => f.type), [FrameType.SIGNAL, FrameType.STOP]);
  pty.close();
  const ev = await exitOf(pty);
  assert.equal(ev.error.code, 'closed');
  await conn.until((c) => c.closed, 'hang-up');
});

test('destroy() is bounded: without a terminal envelope it ends with destroy_timeout after limits.destroyTimeoutMs',
  { timeout: 2 * limits.destroyTimeoutMs + HANG_GUARD_MS }, async (t) => {
    let conn;
    const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
    t.after(sup.close);
    assert.equal(limits.destroyTimeoutMs, 45000, 'the bound documented in README.md');
    const pty = spawn('prog', [], sup.opts());
    await new Promise((r) => pty.onStarted(r));
    const errors = [];
    pty.onError((e) => errors.push(e.code));
    const t0 = Date.now();
    pty.destroy();
    const ev = await exitOf(pty, 2 * limits.destroyTimeoutMs);
    const took = Date.now() - t0;
    assert.equal(ev.error.code, 'destroy_timeout');
    assert.deepEqual(errors, ['destroy_timeout']);
    // Not before its bound, and before twice it (a timer fires late only by
    // the loop's latency; the host's speed is not judged).
    assert.ok(took >= limits.destroyTimeoutMs && took < 2 * limits.destroyTimeoutMs, `took ${took}`);
    await conn.until((c) => c.closed, 'hang-up');
  });
