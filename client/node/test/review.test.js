'use strict';
// Regression tests for the eight defects of the independent review (issue 14),
// each against the fake supervisor of test-support/fake.js: exit without a
// data listener, a write error racing the supervisor's close, throwing
// listeners, onDrain after a pre-start flush, writes after the exit envelope,
// close() after exit while paused, waitForOutput's window, and write() of a
// caller's buffer.
const test = require('node:test');
const assert = require('node:assert/strict');
const childProcess = require('child_process');
const path = require('path');
const { spawn, protocol, limits } = require('..');
const { fakeSupervisor, exitOf } = require('../test-support/fake.js');
const { HANG_GUARD_MS, sleep, within, until } = require('../test-support/wait.js');

const { FrameType } = protocol;

// 1. --------------------------------------------------------------------------

test('1: onExit fires without a data listener; the unread output stays for a listener attached later', async (t) => {
  const sup = await fakeSupervisor((c) => {
    c.started();
    c.output(Buffer.from('hello from a command nobody reads\r\n'));
    c.exit(4);
  });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  const ev = await within(exitOf(pty), 'onExit with only an exit listener');
  assert.deepEqual(ev, { exitCode: 4, signal: null, result: 'exit-code', exact: true, error: null });
  assert.equal(pty.state, 'exited');
  assert.equal(pty.bufferedBytes, 'hello from a command nobody reads\r\n'.length);
  let out = '';
  pty.onData((d) => { out += d; });
  await until(() => out.length > 0, 'late delivery');
  assert.equal(out, 'hello from a command nobody reads\r\n');
  assert.equal(pty.bufferedBytes, 0);
});

test('1: a data listener still gets every byte before onExit, split characters included', async (t) => {
  const text = Buffer.from('x€'.repeat(20000));
  const sup = await fakeSupervisor((c) => {
    c.started();
    for (let i = 0; i < text.length; i += 4001) c.output(text.subarray(i, i + 4001));
    c.exit(0);
  });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  const order = [];
  let out = '';
  pty.onData((d) => { out += d; order.push('data'); });
  pty.onExit(() => order.push('exit'));
  await within(exitOf(pty), 'exit');
  assert.equal(out, text.toString());
  assert.equal(order[order.length - 1], 'exit');
  assert.equal(order.indexOf('exit'), order.length - 1);
});

test('1: paused at exit with a data listener, onExit waits for resume() and comes after the held output', async (t) => {
  const sup = await fakeSupervisor((c) => {
    c.started();
    // One write: the exit envelope is decoded in the same read as the output.
    c.raw(Buffer.concat([
      protocol.encodeFrame(FrameType.OUTPUT, Buffer.from('first ')),
      protocol.encodeFrame(FrameType.OUTPUT, Buffer.from('second')),
      protocol.encodeFrame(FrameType.EVENT, Buffer.from(JSON.stringify({ type: 'exit', code: 2, signal: null }))),
    ]));
    c.socket.end();
  });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  let out = '';
  let exited = null;
  pty.onData((d) => { out += d; pty.pause(); });
  pty.onExit((e) => { exited = { e, out }; });
  await until(() => out.length > 0, 'first output');
  await sleep(200);
  assert.equal(out, 'first ');
  assert.equal(exited, null, 'no exit while a listener is paused with output held');
  pty.resume();
  await until(() => exited, 'exit after resume');
  assert.equal(exited.out, 'first second');
  assert.equal(exited.e.exitCode, 2);
});

// 2. --------------------------------------------------------------------------

test('2: a write that fails because the supervisor closed keeps the tail of the output and the exit code', async (t) => {
  const tail = Buffer.alloc(96 * 1024, 0x74);
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  const exited = exitOf(pty);
  const errors = [];
  pty.onError((e) => errors.push(e));
  let got = 0;
  pty.onData((d) => { got += d.length; });
  await new Promise((r) => pty.onStarted(r));
  pty.pause();  // the tail stays unread (in the socket's buffer and the kernel's)
  await new Promise((r) => {
    for (let i = 0; i < tail.length; i += 32 * 1024) conn.output(tail.subarray(i, i + 32 * 1024));
    conn.event({ type: 'exit', code: 3, signal: null, result: 'exit-code' });
    conn.socket.write(Buffer.alloc(0), r);  // everything handed to the kernel
  });
  conn.socket.destroy();
  await until(() => conn.closed, 'the supervisor side to close');
  pty.write('typed while the supervisor closed\r');  // EPIPE
  await sleep(100);
  let later = 'accepted';
  try { pty.write('more'); } catch (e) { later = e.code; }
  pty.resume();
  const ev = await within(exited, 'exit');
  assert.equal(ev.error, null, `error ${ev.error && ev.error.code}: ${ev.error && ev.error.message}`);
  assert.equal(ev.exitCode, 3);
  assert.equal(got, tail.length);
  assert.deepEqual(errors, []);
  assert.equal(later, 'accepted', 'a write after the write error is ignored');
});

test('2: a write error without an exit envelope ends the session with connection_error after the output', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  const exited = exitOf(pty);
  let out = '';
  pty.onData((d) => { out += d; });
  await new Promise((r) => pty.onStarted(r));
  pty.pause();
  await new Promise((r) => { conn.output(Buffer.from('last words')); conn.socket.write(Buffer.alloc(0), r); });
  conn.socket.destroy();
  await until(() => conn.closed, 'the supervisor side to close');
  pty.write('x');
  await sleep(100);
  pty.resume();
  const ev = await within(exited, 'exit');
  assert.equal(out, 'last words');
  assert.equal(ev.error && ev.error.code, 'connection_error');
  assert.match(ev.error.message, /EPIPE|ECONNRESET/);
});

// 3. --------------------------------------------------------------------------

// A listener's exception must reach the application as an uncaught exception
// (process 'uncaughtException'), as one from an EventEmitter listener does, on
// Node and on Bun alike. The scenarios run in a process of their own
// (test-support/throwing-listeners-fixture.js, with this runtime): `bun test`
// fails whichever test is running on an uncaught exception before any
// 'uncaughtException' listener sees it, which says nothing about the module;
// an application under plain Bun gets it like one under Node.
function throwingListeners(scenario) {
  const r = childProcess.spawnSync(process.execPath,
    [path.join(__dirname, '../test-support/throwing-listeners-fixture.js'), scenario],
    { encoding: 'utf8', timeout: HANG_GUARD_MS });
  assert.equal(r.status, 0, r.stderr);
  const res = JSON.parse(r.stdout);
  assert.equal(res.runtime, process.versions.bun ? 'bun' : 'node');
  return res;
}

test('3: a throwing onData or onStarted listener is reported asynchronously and decoding goes on', () => {
  const res = throwingListeners('data-started');
  assert.equal(res.errorCode, null, `error ${res.errorCode}`);
  assert.equal(res.exitCode, 0);
  assert.equal(res.out, 'one two three four');
  assert.deepEqual(res.uncaught.sort(), ['boom in onData', 'boom in onStarted']);
});

test('3: a throwing onError listener does not suppress onExit', () => {
  const res = throwingListeners('error');
  assert.equal(res.errorCode, 'unit_start_failed');
  assert.deepEqual(res.uncaught, ['boom in onError']);
});

// 4. --------------------------------------------------------------------------

test('4: onDrain fires when input queued before started was flushed without a socket drain', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('helper-sleep-200', [], sup.opts());
  const big = 'q'.repeat(limits.inputHighWaterMark + 1000);
  assert.equal(pty.write(big), false, 'above the high-water mark before the helper ran');
  let drained = 0;
  pty.onDrain(() => { drained++; });
  await until(() => drained > 0, 'onDrain');
  // conn is set once the fake has decoded START; onDrain comes from the
  // module's handling of the helper's exit, another event: wait for conn
  // itself (as test 8 does) before using it.
  await until(() => conn, 'START');
  await conn.until((c) => c.frames.reduce((n, f) => n + f.payload.length, 0) === big.length, 'all input');
  assert.equal(drained, 1);
  pty.close();
});

// 5. --------------------------------------------------------------------------

test('5: write() from a data listener after the exit envelope is ignored, not thrown', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => {
    conn = c;
    c.started();
    c.output(Buffer.from('Continue? [y/n] '));
    c.exit(0);
  });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  const exited = exitOf(pty);
  await until(() => conn && conn.closed, 'the supervisor to close');
  await sleep(100);  // the exit envelope has been read; the output is held
  const threw = [];
  let out = '';
  pty.onData((d) => {
    out += d;
    for (const f of [() => pty.write('y\r'), () => pty.write(Buffer.from('y')), () => pty.kill('SIGINT'),
      () => pty.stop(), () => pty.end()]) {
      try { f(); } catch (e) { threw.push(e.code || e.message); }
    }
  });
  await until(() => out.length > 0, 'held output');
  const ev = await within(exited, 'exit');
  assert.equal(out, 'Continue? [y/n] ');
  assert.deepEqual(threw, []);
  assert.equal(ev.exitCode, 0);
  // Arguments are still checked: a programming error is not a finished PTY.
  assert.throws(() => pty.write(42), TypeError);
  assert.throws(() => pty.write('\ud800'), { code: 'bad_utf8' });
  assert.throws(() => pty.kill('SIGSEGV'), { code: 'bad_signal' });
});

// 6. --------------------------------------------------------------------------

test('6: close() after exit while paused discards the held output and fires onExit', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => {
    conn = c;
    c.started();
    c.raw(Buffer.concat([
      protocol.encodeFrame(FrameType.OUTPUT, Buffer.from('seen ')),
      protocol.encodeFrame(FrameType.OUTPUT, Buffer.from('never delivered')),
      protocol.encodeFrame(FrameType.EVENT, Buffer.from(JSON.stringify({ type: 'exit', code: 6, signal: null }))),
    ]));
    c.socket.end();
  });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  let out = '';
  pty.onData((d) => { out += d; pty.pause(); });
  const exited = exitOf(pty);
  await until(() => conn && conn.closed && out.length > 0, 'the exit to be read');
  await sleep(100);
  assert.ok(pty.bufferedBytes > 0);
  pty.close();
  const ev = await within(exited, 'onExit after close()');
  assert.equal(out, 'seen ');
  assert.equal(pty.bufferedBytes, 0);
  assert.equal(ev.exitCode, 6, 'the exit status the supervisor sent is kept');
  assert.equal(ev.error, null);
  pty.resume();
  await sleep(50);
  assert.equal(out, 'seen ');
});

// 7. --------------------------------------------------------------------------

test('7: waitForOutput sees only output since the call and leaves held output to data listeners', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); c.output(Buffer.from('before-the-call ')); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  await until(() => pty.bufferedBytes > 0, 'held output');
  await assert.rejects(pty.waitForOutput(/before-the-call/, { timeoutMs: 300 }), { code: 'pattern_timeout' });
  const w = pty.waitForOutput(/after-(\d)/);
  conn.output(Buffer.from('after-7 '));
  assert.equal((await within(w, 'waitForOutput'))[1], '7');
  let out = '';
  pty.onData((d) => { out += d; });
  await until(() => out.length >= 'before-the-call after-7 '.length, 'late listener');
  assert.equal(out, 'before-the-call after-7 ');
  pty.close();
});

// 8. --------------------------------------------------------------------------

test('8: write(Uint8Array) sends the bytes as they were at the call', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('helper-sleep-200', [], sup.opts());
  const mine = new Uint8Array(Buffer.from('original'));
  pty.write(mine);              // queued until the helper exited 0
  mine.fill(0xff);              // the caller reuses its buffer
  const big = Buffer.from('a'.repeat(3 * limits.maxInputPayload));
  pty.write(big);               // more than one frame
  big.fill(0x62);
  await until(() => conn, 'START');
  await conn.until((c) => c.frames.length >= 4, 'input frames');
  assert.equal(Buffer.concat(conn.frames.map((f) => f.payload)).toString(),
    'original' + 'a'.repeat(3 * limits.maxInputPayload));
  // After the handshake too, with the kernel's buffer full (the fake does not read).
  conn.socket.pause();
  const fill = Buffer.alloc(512 * 1024, 0x63);
  while (pty.write(fill)) { /* until input is queued in this process */ }
  const late = new Uint8Array(Buffer.from('late'));
  pty.write(late);
  late.fill(0xfe);
  conn.socket.resume();
  await conn.until((c) => Buffer.concat(c.frames.map((f) => f.payload)).subarray(-4).toString() === 'late' ||
    c.frames.some((f) => f.payload.includes(0xfe)), 'the late frame');
  assert.ok(!conn.frames.some((f) => f.payload.includes(0xfe)));
  pty.close();
});

// node-pty's spawn, as its users write it ----------------------------------

test('node-pty spawn options work unchanged: name xterm-256color and env process.env are accepted; the helper still gets no environment', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); c.output(Buffer.from('$ ')); c.exit(0); });
  t.after(sup.close);
  const pty = spawn('prog', ['-l'], {
    name: 'xterm-256color', cols: 100, rows: 30, cwd: sup.dir, env: process.env,
    useConpty: false, handleFlowControl: false,
    socketPath: sup.socketPath, helperPath: sup.helperPath,
  });
  let out = '';
  pty.onData((d) => { out += d; });
  const ev = await within(exitOf(pty), 'exit');
  assert.equal(ev.error, null);
  assert.equal(out, '$ ');
  assert.deepEqual(conn.start, { cols: 100, rows: 30, flags: 0, argv: ['prog', '-l'] });
  assert.deepEqual(sup.report().env, {}, 'not one variable of this process reaches the helper');
  assert.equal(pty.handleFlowControl, false);
  assert.equal(pty.clear(), undefined);
});
