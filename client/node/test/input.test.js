'use strict';
// Input encoding (UTF-8 only, chunked on character boundaries), signal names
// and spawn()'s argument checks. None of these touch a socket.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, protocol, limits, PtyError, SIGNALS } = require('..');

const codeOf = (fn) => {
  try {
    fn();
  } catch (e) {
    return e.code || e.name;
  }
  return 'ok';
};

test('chunkUtf8 cuts at most maxInputPayload bytes, only on character boundaries', () => {
  for (const ch of ['a', 'é', '€', '𝄞']) {
    for (const lead of [0, 1, 2, 3]) {
      const s = 'x'.repeat(lead) + ch.repeat(Math.ceil(3 * limits.maxInputPayload / ch.length));
      const bytes = Buffer.from(s);
      const chunks = protocol.chunkUtf8(bytes);
      assert.equal(Buffer.concat(chunks).equals(bytes), true);
      for (const c of chunks) {
        assert.ok(c.length >= 1 && c.length <= limits.maxInputPayload);
        assert.ok(protocol.isValidUtf8(c), `chunk of ${ch} after ${lead} is valid UTF-8 on its own`);
      }
      // Nothing is cut shorter than needed: each chunk but the last is within
      // three bytes of the maximum.
      for (const c of chunks.slice(0, -1)) assert.ok(c.length > limits.maxInputPayload - 4);
    }
  }
  assert.deepEqual(protocol.chunkUtf8(Buffer.alloc(0)), []);
});

test('isValidUtf8 refuses overlong forms, surrogates, truncation and out-of-range', () => {
  const bad = [[0xc0, 0x80], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80],
    [0xe2, 0x82], [0xff], [0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]];
  for (const b of bad) assert.equal(protocol.isValidUtf8(Buffer.from(b)), false, b.join(','));
  for (const s of ['', 'plain', '\0', 'é€𝄞', '\u{10ffff}']) assert.equal(protocol.isValidUtf8(Buffer.from(s)), true);
});

test('signal names come from the allowlist, with or without SIG', () => {
  assert.deepEqual(Object.keys(SIGNALS).sort(),
    ['CONT', 'HUP', 'INT', 'KILL', 'QUIT', 'STOP', 'TERM', 'TSTP', 'USR1', 'USR2', 'WINCH']);
  assert.equal(SIGNALS.WINCH, 28);
});

test('spawn refuses bad arguments synchronously with a stable code', () => {
  const o = { socketPath: '/nonexistent/sock', helperPath: '/nonexistent/helper', cwd: '/' };
  assert.equal(codeOf(() => spawn('', [], o)), 'empty_command');
  assert.equal(codeOf(() => spawn(undefined, [], o)), 'empty_command');
  assert.equal(codeOf(() => spawn('sh', 'a b', o)), 'TypeError');
  assert.equal(codeOf(() => spawn('sh', [1], o)), 'TypeError');
  assert.equal(codeOf(() => spawn('sh', ['a\0b'], o)), 'bad_start');
  assert.equal(codeOf(() => spawn('sh', ['\ud800'], o)), 'bad_start');
  assert.equal(codeOf(() => spawn('sh', new Array(limits.maxArgs).fill('a'), o)), 'bad_argc');
  assert.equal(codeOf(() => spawn('sh', ['x'.repeat(limits.maxArgBytes + 1)], o)), 'arg_too_long');
  assert.equal(codeOf(() => spawn('sh', ['€'.repeat(limits.maxArgBytes / 3 + 1)], o)), 'arg_too_long');
  assert.equal(codeOf(() => spawn('sh', ['x'.repeat(limits.maxArgBytes), 'x'.repeat(limits.maxArgBytes - 1)], o)), 'argv_too_long');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, cols: 0 })), 'bad_size');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, rows: 1001 })), 'bad_size');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, cols: 80.5 })), 'bad_size');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, env: { TERM: 'xterm' } })), 'env_fixed');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, env: { ...process.env } })), 'env_fixed');  // a copy sets variables
  assert.equal(codeOf(() => spawn('sh', [], { ...o, env: null })), 'env_fixed');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, name: 'xterm' })), 'env_fixed');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, name: 'vt100' })), 'env_fixed');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, handleFlowControl: true })), 'not_supported');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, useConpty: 'yes' })), 'TypeError');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, uid: 1000 })), 'TypeError');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, flowControlPause: '\x13' })), 'TypeError');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, encoding: 'utf-32' })), 'TypeError');  // not a Buffer encoding
  assert.equal(codeOf(() => spawn('sh', [], { ...o, socketPath: 'relative.sock' })), 'TypeError');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, helperPath: 'opencode-pty-client' })), 'TypeError');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, cwd: '/nonexistent-dir' })), 'bad_cwd');
  assert.equal(codeOf(() => spawn('sh', [], { ...o, cwd: '/etc/passwd' })), 'bad_cwd');
  assert.ok(new PtyError('x', 'y') instanceof Error);
});

test('the largest allowed argv is accepted (and fails later only on the missing socket)', async () => {
  const o = { socketPath: '/nonexistent/sock', helperPath: '/nonexistent/helper', cwd: '/', env: {} };
  const pty = spawn('x'.repeat(limits.maxArgBytes), ['y'.repeat(limits.maxArgBytes - 1), ...new Array(limits.maxArgs - 2).fill('')], { ...o });
  const ev = await new Promise((r) => pty.onExit(r));
  assert.equal(ev.error.code, 'connect_failed');
  assert.equal(ev.exitCode, null);
});
