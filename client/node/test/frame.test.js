'use strict';
// Frame encoding and the strict incremental decoder (docs/PROTOCOL.md section 2).
const test = require('node:test');
const assert = require('node:assert/strict');
const { protocol, limits } = require('..');
const { FrameDecoder, FrameType, encodeFrame } = protocol;

function decodeAll(direction, chunks) {
  const d = new FrameDecoder(direction);
  const frames = [];
  let error = null;
  for (const c of chunks) {
    error = d.push(c, (type, payload) => frames.push([type, Buffer.from(payload).toString('hex')]));
    if (error) break;
  }
  return { frames, error, idle: d.idle };
}

test('encodeFrame writes version 1, type, zero reserved, big-endian length', () => {
  const f = encodeFrame(FrameType.INPUT, Buffer.from('hi'));
  assert.deepEqual([...f], [1, 2, 0, 0, 0, 0, 0, 2, 0x68, 0x69]);
  assert.deepEqual([...encodeFrame(FrameType.STOP)], [1, 4, 0, 0, 0, 0, 0, 0]);
  const big = encodeFrame(FrameType.OUTPUT, Buffer.alloc(0x10203));
  assert.deepEqual([...big.subarray(0, 8)], [1, 0x81, 0, 0, 0, 1, 2, 3]);
});

test('a stream of frames decodes identically for every split point (and byte by byte)', () => {
  const stream = Buffer.concat([
    encodeFrame(FrameType.EVENT, Buffer.from('{"type":"notice","code":"x"}')),
    encodeFrame(FrameType.OUTPUT, Buffer.from('héllo €𝄞')),
    encodeFrame(FrameType.OUTPUT, Buffer.alloc(300, 7)),
    encodeFrame(FrameType.EVENT, Buffer.from('{}')),
  ]);
  const whole = decodeAll('fromSupervisor', [stream]);
  assert.equal(whole.error, null);
  assert.equal(whole.frames.length, 4);
  assert.equal(whole.idle, true);
  for (let i = 0; i <= stream.length; i++) {
    for (let j = i; j <= stream.length; j += 37) {
      const r = decodeAll('fromSupervisor', [stream.subarray(0, i), stream.subarray(i, j), stream.subarray(j)]);
      assert.deepEqual(r.frames, whole.frames, `split at ${i},${j}`);
      assert.equal(r.idle, true);
    }
  }
  const bytes = [];
  for (let i = 0; i < stream.length; i++) bytes.push(stream.subarray(i, i + 1));
  assert.deepEqual(decodeAll('fromSupervisor', bytes).frames, whole.frames);
});

test('client-direction frames decode, including empty STOP/EOF and a maximal INPUT', () => {
  const input = Buffer.alloc(limits.maxInputPayload, 0x61);
  const stream = Buffer.concat([encodeFrame(FrameType.STOP), encodeFrame(FrameType.INPUT, input),
    encodeFrame(FrameType.SIGNAL, Buffer.of(15)), encodeFrame(FrameType.EOF)]);
  for (let i = 0; i <= stream.length; i += 997) {
    const r = decodeAll('fromClient', [stream.subarray(0, i), stream.subarray(i)]);
    assert.equal(r.error, null);
    assert.deepEqual(r.frames.map((f) => f[0]), [4, 2, 3, 5]);
    assert.equal(r.frames[1][1].length, input.length * 2);
  }
});

test('bad headers are rejected as soon as the offending byte arrives', () => {
  const cases = [
    { bytes: [2], error: 'bad_version', at: 1 },
    { bytes: [0], error: 'bad_version', at: 1 },
    { bytes: [1, 0x02], error: 'unknown_type', at: 2 },   // INPUT goes the other way
    { bytes: [1, 0x83], error: 'unknown_type', at: 2 },
    { bytes: [1, 0x00], error: 'unknown_type', at: 2 },
    { bytes: [1, 0x81, 1], error: 'bad_reserved', at: 3 },
    { bytes: [1, 0x81, 0, 0x80], error: 'bad_reserved', at: 4 },
    { bytes: [1, 0x81, 0, 0, 0, 1, 0, 1], error: 'frame_too_large', at: 8 },  // 65537
    { bytes: [1, 0x81, 0, 0, 0xff, 0xff, 0xff, 0xff], error: 'frame_too_large', at: 8 },
    { bytes: [1, 0x82, 0, 0, 0, 0, 0x10, 0x01], error: 'frame_too_large', at: 8 },  // 4097
    { bytes: [1, 0x81, 0, 0, 0, 0, 0, 0], error: 'frame_too_small', at: 8 },
    { bytes: [1, 0x82, 0, 0, 0, 0, 0, 1], error: 'frame_too_small', at: 8 },
  ];
  for (const c of cases) {
    for (let n = 1; n < c.at; n++) {
      assert.equal(decodeAll('fromSupervisor', [Buffer.from(c.bytes.slice(0, n))]).error, null, `${c.error} early at ${n}`);
    }
    // Fed one byte at a time: the error is reported by the push of byte `at`.
    const d = new FrameDecoder('fromSupervisor');
    let at = 0;
    for (let k = 0; k < c.bytes.length; k++) {
      if (d.push(Buffer.of(c.bytes[k]), () => assert.fail('no frame expected'))) { at = k + 1; break; }
    }
    assert.equal(at, c.at, c.error);
    assert.equal(d.error, c.error);
    // Sticky: nothing is accepted after an error.
    assert.equal(d.push(encodeFrame(FrameType.OUTPUT, Buffer.from('x')), () => assert.fail('frame after error')), c.error);
  }
});

test('maximal frames are accepted at their bound and one byte more is not', () => {
  const ok = decodeAll('fromSupervisor', [encodeFrame(FrameType.OUTPUT, Buffer.alloc(limits.maxOutputPayload))]);
  assert.equal(ok.error, null);
  assert.equal(ok.frames.length, 1);
  const env = decodeAll('fromSupervisor', [encodeFrame(FrameType.EVENT, Buffer.alloc(limits.maxEnvelopeBytes, 0x20))]);
  assert.equal(env.error, null);
  const over = Buffer.alloc(8);
  over[0] = 1; over[1] = FrameType.INPUT; over.writeUInt32BE(limits.maxInputPayload + 1, 4);
  assert.equal(decodeAll('fromClient', [over]).error, 'frame_too_large');
  const sig = Buffer.from([1, FrameType.SIGNAL, 0, 0, 0, 0, 0, 2]);
  assert.equal(decodeAll('fromClient', [sig]).error, 'frame_too_large');
  const stop = Buffer.from([1, FrameType.STOP, 0, 0, 0, 0, 0, 1]);
  assert.equal(decodeAll('fromClient', [stop]).error, 'frame_too_large');
  const start = Buffer.from([1, FrameType.START, 0, 0, 0, 0, 0, 11]);
  assert.equal(decodeAll('fromClient', [start]).error, 'frame_too_small');
});

test('the decoder never holds more than one payload of the declared size', () => {
  const d = new FrameDecoder('fromSupervisor');
  const header = encodeFrame(FrameType.OUTPUT, Buffer.alloc(limits.maxOutputPayload)).subarray(0, 8 + 10);
  assert.equal(d.push(header, () => assert.fail()), null);
  assert.equal(d._payload.length, limits.maxOutputPayload);
  assert.equal(d.idle, false);
});

test('FrameDecoder refuses an unknown direction', () => {
  assert.throws(() => new FrameDecoder('sideways'), TypeError);
});

test('onFrame returning true stops after that frame and leaves the rest for a later push', () => {
  const { FrameDecoder, encodeFrame, FrameType } = protocol;
  const stream = Buffer.concat([
    encodeFrame(FrameType.OUTPUT, Buffer.from('one')),
    encodeFrame(FrameType.OUTPUT, Buffer.from('two')),
    encodeFrame(FrameType.OUTPUT, Buffer.from('three')),
  ]);
  for (let split = 1; split < stream.length; split++) {
    const dec = new FrameDecoder('fromSupervisor');
    const got = [];
    let pending = [stream.subarray(0, split), stream.subarray(split)];
    let stops = 0;
    while (pending.length > 0) {
      const chunk = pending.shift();
      const err = dec.push(chunk, (type, payload) => {
        got.push(payload.toString());
        return payload.toString() === 'one' || payload.toString() === 'two';  // stop after these
      });
      assert.equal(err, null);
      if (dec.rest) {
        stops++;
        assert.ok(dec.rest.length > 0 && dec.rest.length < chunk.length);
        pending.unshift(dec.rest);
      }
    }
    assert.deepEqual(got, ['one', 'two', 'three'], `split ${split}`);
    assert.ok(dec.idle);
    assert.ok(stops >= 1, `split ${split}`);
  }
});
