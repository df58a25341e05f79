'use strict';
// Run by test/fds.test.js in its own process. Closes every descriptor it
// inherited without close-on-exec beyond stdio (the test runner's environment
// may leak some, e.g. fd 251; Node itself marks the contiguous run from fd 0 to
// at least 15 close-on-exec at start-up), then runs one session against the fake
// supervisor and reports, as JSON on stdout, the descriptors inherited by the
// fake helper and by unrelated children spawned during the handshake and while
// the session runs.
const fs = require('fs');
const childProcess = require('child_process');
const { spawn } = require('../index.js');
const { fakeSupervisor, exitOf } = require('./fake.js');

function inheritable() {
  const out = [];
  for (const name of fs.readdirSync('/proc/self/fd')) {
    let info;
    try { info = fs.readFileSync(`/proc/self/fdinfo/${name}`, 'utf8'); } catch { continue; }
    if ((parseInt(/flags:\s*([0-7]+)/.exec(info)[1], 8) & 0o2000000) === 0) out.push(Number(name));
  }
  return out.sort((a, b) => a - b);
}

// An unrelated child: lists its descriptors with fstat (opening nothing).
const REPORT = `import json, os
out = []
for fd in range(4096):
    try:
        os.fstat(fd)
    except OSError:
        continue
    out.append({'fd': fd, 'target': os.readlink('/proc/self/fd/%d' % fd)})
print(json.dumps(out))`;

function unrelatedChild() {
  return new Promise((resolve, reject) => {
    const c = childProcess.spawn('/usr/bin/python3', ['-c', REPORT], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    c.stdout.on('data', (b) => { out += b; });
    c.on('error', reject);
    c.on('close', () => resolve(JSON.parse(out)));
  });
}

async function main() {
  const closed = [];
  for (const fd of inheritable()) {
    if (fd > 2) { fs.closeSync(fd); closed.push(fd); }
  }
  const sup = await fakeSupervisor((c) => { setTimeout(() => c.started(), 200); });
  const result = { closedAmbient: closed, ownBefore: inheritable() };
  const pty = spawn('helper-hold', [], sup.opts());
  while (pty.state !== 'handshake') await new Promise((r) => setTimeout(r, 2));
  result.duringHandshake = await unrelatedChild();
  result.stateDuringHandshake = pty.state;
  sup.releaseHelper();
  await new Promise((r) => pty.onStarted(r));
  result.duringSession = await unrelatedChild();
  result.helper = sup.report();
  result.dirIno = fs.statSync(sup.dir).ino;
  result.ownDuringSession = inheritable();
  pty.close();
  result.exit = (await exitOf(pty)).error.code;
  await sup.close();
  result.ownAfter = inheritable();
  process.stdout.write(JSON.stringify(result));
}

main().catch((e) => { console.error(e); process.exit(1); });
