'use strict';
// examples/node-pty-shell.js (the node-pty port of README.md) run as a program
// against the fake supervisor: its unchanged node-pty spawn options are
// accepted, input typed on its stdin reaches the PTY, output reaches its
// stdout, and it exits with the command's status.
const test = require('node:test');
const assert = require('node:assert/strict');
const childProcess = require('child_process');
const path = require('path');
const { protocol } = require('..');
const { fakeSupervisor, HEX32 } = require('../test-support/fake.js');

test('examples: the node-pty port runs unchanged against a supervisor', async (t) => {
  let conn;
  const sup = await fakeSupervisor(async (c) => {
    conn = c;
    c.started();
    c.output(Buffer.from('bash$ '));
    await c.until((x) => Buffer.concat(x.frames.filter((f) => f.type === protocol.FrameType.INPUT)
      .map((f) => f.payload)).toString().includes('exit\r'), 'exit typed');
    c.output(Buffer.from('exit\r\nbye é\r\n'));
    c.exit(5);
  });
  t.after(sup.close);
  const child = childProcess.spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'node-pty-shell.js')], {
    env: {
      PATH: process.env.PATH || '/usr/bin:/bin',
      HOME: sup.dir,
      OPENCODE_PTY_MODULE: path.join(__dirname, '..', 'test-support', 'example-shim.js'),
      OPENCODE_TEST_SOCKET: sup.socketPath,
      OPENCODE_TEST_HELPER: sup.helperPath,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b) => { out += b; });
  child.stderr.on('data', (b) => { err += b; });
  // 'é' split between two reads of stdin (the prompt is on stdout before the
  // first half is written, the second half follows later): the port decodes
  // stdin as UTF-8.
  const e = Buffer.from('é');
  const prompt = setInterval(() => {
    if (!out.includes('bash$ ')) return;
    clearInterval(prompt);
    child.stdin.write(Buffer.concat([Buffer.from('echo '), e.subarray(0, 1)]));
    setTimeout(() => child.stdin.write(Buffer.concat([e.subarray(1), Buffer.from('\rexit\r')])), 300);
  }, 10);
  const code = await new Promise((r) => child.on('close', r));
  assert.equal(code, 5, `stderr: ${err}`);
  assert.match(out, new RegExp(`^shell unit opencode-pty-${HEX32}\\.service\\n`));
  assert.ok(out.includes('bash$ exit\r\nbye é\r\n'), out);
  assert.ok(out.endsWith('\r\nshell exited: code 5, signal null\n'), out);
  assert.deepEqual(conn.start.argv, ['bash']);
  const typed = Buffer.concat(conn.frames.filter((f) => f.type === protocol.FrameType.INPUT).map((f) => f.payload));
  assert.equal(typed.toString(), 'echo é\rexit\r');
});
