'use strict';
// Descriptor hygiene on the Node side: the helper inherits exactly stdio +
// fd 3 (the connected socket) + fd 4 (the cwd directory); an unrelated child
// spawned at the same time inherits neither; the module leaves no inheritable
// descriptor behind. The fixture runs in a fresh process with no stray fds.
const test = require('node:test');
const assert = require('node:assert/strict');
const childProcess = require('child_process');
const path = require('path');
const { HANG_GUARD_MS } = require('../test-support/wait.js');

test('only the helper inherits the socket (fd 3) and the directory (fd 4)', () => {
  const r = childProcess.spawnSync(process.execPath, [path.join(__dirname, '../test-support/fds-fixture.js')],
    { encoding: 'utf8', timeout: HANG_GUARD_MS });
  assert.equal(r.status, 0, r.stderr);
  const res = JSON.parse(r.stdout);
  // What this process may pass on by itself, before any session: Node marks
  // even its stdio close-on-exec (libuv uv_disable_stdio_inheritance), so
  // nothing; Bun leaves fd 0-2 inheritable, so exactly those. Either way
  // spawn() dup2()s stdio into each child, and the module must add nothing
  // to this set: it is the same during the session and after it.
  const stdio = process.versions.bun ? [0, 1, 2] : [];
  assert.deepEqual(res.ownBefore, stdio);
  assert.deepEqual(res.helper.inherited.map((f) => f.fd), [0, 1, 2, 3, 4]);
  const [, , , sock, dir] = res.helper.inherited;
  assert.equal(sock.socket, true);
  assert.equal(dir.dir, true);
  assert.equal(dir.ino, res.dirIno);
  assert.equal(res.stateDuringHandshake, 'handshake');
  assert.deepEqual(res.duringHandshake.map((f) => f.fd), [0, 1, 2]);
  assert.deepEqual(res.duringSession.map((f) => f.fd), [0, 1, 2]);
  assert.deepEqual(res.ownDuringSession, stdio);
  assert.deepEqual(res.ownAfter, stdio);
  assert.deepEqual(res.helper.env, {});
  assert.match(res.helper.peer, /supervisor\.sock$/);
  assert.equal(res.exit, 'closed');
});
