'use strict';
// term.resize(cols, rows) against the fake supervisor: validation like
// spawn's (integers 1..1000, PtyError bad_size), the RESIZE frame on the wire
// (type 0x06, u16 cols, u16 rows, big-endian), queueing before `started` (the
// last size wins, one frame), and `closed` after the session ended.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, protocol, PtyError } = require('..');
const { fakeSupervisor, exitOf } = require('../test-support/fake.js');
const { sleep, until } = require('../test-support/wait.js');

const { FrameType, FrameDecoder, encodeFrame } = protocol;
const sizes = (c) => c.frames.filter((f) => f.type === FrameType.RESIZE)
  .map((f) => [f.payload.readUInt16BE(0), f.payload.readUInt16BE(2), f.payload.length]);

test('resize: bad sizes throw bad_size and send nothing', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  await new Promise((r) => pty.onStarted(r));
  for (const [c, r] of [[0, 24], [80, 0], [1001, 24], [80, 1001], [80.5, 24], [80, NaN], ['80', 24],
    [undefined, 24], [80, undefined], [-1, 24], [Infinity, 24], [80n, 24], [null, 24]]) {
    assert.throws(() => pty.resize(c, r), (e) => e instanceof PtyError && e.code === 'bad_size', `${c}x${r}`);
  }
  assert.equal(pty.cols, 80);
  assert.equal(pty.rows, 24);
  pty.resize(1000, 1000);
  pty.resize(1, 1);
  await conn.until((x) => sizes(x).length === 2, 'two RESIZE frames');
  assert.deepEqual(sizes(conn), [[1000, 1000, 4], [1, 1, 4]]);
  assert.equal(pty.cols, 1);
  pty.close();
});

test('resize while running: one frame per call, in order, big-endian', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  await new Promise((r) => pty.onStarted(r));
  pty.resize(100, 30);
  pty.write('x');
  pty.resize(132, 40);
  pty.resize(300, 258);  // 0x012c x 0x0102: both bytes of each u16 matter
  await conn.until((x) => sizes(x).length === 3, 'RESIZE frames');
  assert.deepEqual(sizes(conn), [[100, 30, 4], [132, 40, 4], [300, 258, 4]]);
  assert.deepEqual(conn.frames.map((f) => f.type),
    [FrameType.RESIZE, FrameType.INPUT, FrameType.RESIZE, FrameType.RESIZE]);
  assert.deepEqual([...conn.frames[3].payload], [0x01, 0x2c, 0x01, 0x02]);
  assert.deepEqual([pty.cols, pty.rows], [300, 258]);
  pty.close();
});

test('resize before the helper ran: the START frame carries the size, no RESIZE', async (t) => {
  let conn;
  const sup = await fakeSupervisor((c) => { conn = c; c.started(); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts({ cols: 80, rows: 24 }));
  assert.equal(pty.state, 'connecting');
  pty.resize(120, 50);
  pty.resize(132, 40);
  await new Promise((r) => pty.onStarted(r));
  assert.deepEqual([conn.start.cols, conn.start.rows], [132, 40]);
  await sleep(50);
  assert.deepEqual(sizes(conn), []);
  pty.close();
});

test('resize between helper and started: queued, the last size wins, sent once after started', async (t) => {
  let conn;
  let start;
  const sup = await fakeSupervisor((c) => {
    conn = c;
    start = () => c.started();
  });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  await until(() => conn && pty.state === 'starting', 'starting');
  for (let i = 1; i <= 10000; i++) pty.resize(1 + (i % 1000), 1 + (i % 300));
  pty.resize(132, 40);
  pty.write('typed');
  await sleep(50);
  assert.deepEqual(sizes(conn), []);  // nothing before started
  start();
  await conn.until((x) => sizes(x).length === 1, 'the queued RESIZE');
  await sleep(50);
  assert.deepEqual(sizes(conn), [[132, 40, 4]]);
  // The input written before started went with the outbox, before the size.
  assert.deepEqual(conn.frames.map((f) => f.type), [FrameType.INPUT, FrameType.RESIZE]);
  pty.close();
});

test('resize after the end throws closed (after exit, after close)', async (t) => {
  const sup = await fakeSupervisor((c) => { c.started(); c.exit(0); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  pty.onData(() => {});
  await exitOf(pty);
  assert.throws(() => pty.resize(100, 30), { code: 'closed' });
  assert.throws(() => pty.resize(0, 30), { code: 'bad_size' });  // argument errors first
  const other = spawn('prog', [], sup.opts());
  other.close();
  assert.throws(() => other.resize(100, 30), { code: 'closed' });
});

test('RESIZE frame bounds: exactly 4 bytes from the client, not a supervisor type', () => {
  const ok = new FrameDecoder('fromClient');
  const got = [];
  assert.equal(ok.push(encodeFrame(FrameType.RESIZE, Buffer.from([0, 80, 0, 24])), (ty, p) => got.push([ty, p.length])), null);
  assert.deepEqual(got, [[FrameType.RESIZE, 4]]);
  assert.equal(new FrameDecoder('fromClient').push(encodeFrame(FrameType.RESIZE, Buffer.from([0, 80, 0])), () => {}), 'frame_too_small');
  assert.equal(new FrameDecoder('fromClient').push(encodeFrame(FrameType.RESIZE, Buffer.alloc(5)), () => {}), 'frame_too_large');
  assert.equal(new FrameDecoder('fromSupervisor').push(encodeFrame(FrameType.RESIZE, Buffer.alloc(4)), () => {}), 'unknown_type');
});
