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
const { until, within } = require('../test-support/wait.js');

const typedOf = (conn) => Buffer.concat(conn.frames.filter((f) => f.type === protocol.FrameType.INPUT)
  .map((f) => f.payload)).toString();

test('examples: the node-pty port runs unchanged against a supervisor', async (t) => {
  let conn;
  const sup = await fakeSupervisor(async (c) => {
    conn = c;
    c.started();
    c.output(Buffer.from('bash$ '));
    await c.until((x) => typedOf(x).includes('exit\r'), 'exit typed');
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
  let code;
  child.stdout.on('data', (b) => { out += b; });
  child.stderr.on('data', (b) => { err += b; });
  const closed = new Promise((r) => child.on('close', (c) => { code = c; r(); }));
  // 'é' split between two reads of stdin (the prompt is on stdout before the
  // first half is written; the second half once the port has read the first
  // and passed 'echo ' on, not after a timer, which a slow port outlasted:
  // both halves came in one read): the port decodes stdin as UTF-8.
  const e = Buffer.from('é');
  await until(() => out.includes('bash$ ') || code !== undefined, 'the prompt');
  assert.equal(code, undefined, `the example exited before its prompt; stderr: ${err}`);
  child.stdin.write(Buffer.concat([Buffer.from('echo '), e.subarray(0, 1)]));
  await until(() => typedOf(conn).startsWith('echo ') || code !== undefined, 'the first half read');
  assert.equal(code, undefined, `the example exited before it passed 'echo ' on; stderr: ${err}`);
  child.stdin.write(Buffer.concat([e.subarray(1), Buffer.from('\rexit\r')]));
  await within(closed, 'the example to exit');
  assert.equal(code, 5, `stderr: ${err}`);
  assert.match(out, new RegExp(`^shell unit opencode-pty-${HEX32}\\.service\\n`));
  assert.ok(out.includes('bash$ exit\r\nbye é\r\n'), out);
  assert.ok(out.endsWith('\r\nshell exited: code 5, signal null\n'), out);
  assert.deepEqual(conn.start.argv, ['bash']);
  assert.equal(typedOf(conn), 'echo é\rexit\r');
});
