'use strict';
// A fake supervisor (a net.Server on a temporary unix socket) and a fake helper
// (a Node script standing in for /usr/local/libexec/opencode-pty-client) for the
// module's unit tests. The fake helper cannot pass a descriptor (Node has no
// SCM_RIGHTS), so it only sends the START frame; the real helper, supervisor and
// descriptor passing are proven by vm-tests/node/.
// The fake helper is Python (which, unlike Node, leaves inherited descriptors
// as they are): it records the descriptors it inherited and takes its behaviour from
// the PTY command (argv[0]) of the START frame it builds: "helper-exit-N" exits
// N without sending, "helper-sleep-MS" sleeps before sending, "helper-hold" waits
// until the test releases it (sup.releaseHelper()). It takes --env and
// --detach G --scrollback S as the module passes them and builds the START
// payload of docs/PROTOCOL.md sections 3 and 10.1. The fake supervisor also
// answers LIST and ATTACH connections (conn.list, conn.attach) as the test says.

const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const { protocol } = require('../index.js');
const { HANG_GUARD_MS } = require('./wait.js');

const HELPER_SOURCE = String.raw`
import json, os, re, select, socket, stat, struct, sys, time
# Descriptors this process inherited, found with fstat (which opens nothing).
inherited = []
for fd in range(4096):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    try:
        target = os.readlink('/proc/self/fd/%d' % fd)
    except OSError:
        target = ''
    inherited.append({'fd': fd, 'target': target, 'socket': stat.S_ISSOCK(st.st_mode),
                      'dir': stat.S_ISDIR(st.st_mode), 'ino': st.st_ino})
argv = sys.argv[1:]
helper_args = list(argv)
flags = 0
detach = None
if len(argv) > 4 and argv[4] == '--env':
    flags = 1
    del argv[4]
if len(argv) > 4 and argv[4] == '--detach':
    if len(argv) < 8 or argv[6] != '--scrollback':
        sys.exit(64)
    flags |= 2
    detach = (int(argv[5]), int(argv[7]))
    del argv[4:8]
if len(argv) < 6 or argv[0] != '--cols' or argv[2] != '--rows' or argv[4] != '--':
    sys.exit(64)
cols, rows, cmd = int(argv[1]), int(argv[3]), argv[5:]
peer = None
if len(inherited) > 3 and inherited[3]['socket']:
    s = socket.socket(fileno=os.dup(3))
    peer = s.getpeername()
    s.detach()
with open(sys.argv[0] + '.report.json', 'w') as f:
    json.dump({'pid': os.getpid(), 'inherited': inherited, 'cols': cols, 'rows': rows, 'cmd': cmd, 'flags': flags,
               'args': helper_args,
               'env': dict(e.split('=', 1) for e in open('/proc/self/environ').read().split('\0') if e),
               'peer': peer}, f)
m = re.match(r'^helper-exit-(\d+)$', cmd[0])
if m:
    sys.exit(int(m.group(1)))
m = re.match(r'^helper-sleep-(\d+)$', cmd[0])
if m:
    time.sleep(int(m.group(1)) / 1000)
if cmd[0] == 'helper-hold':
    # Held until the test calls sup.releaseHelper() (or the hang guard ends
    # it): what the test checks during the handshake does not race a timer.
    end = time.monotonic() + HANG_GUARD_S
    while not os.path.exists(sys.argv[0] + '.go') and time.monotonic() < end:
        time.sleep(0.005)
args = [a.encode('utf-8', 'surrogateescape') for a in cmd]
payload = struct.pack('>HHII', cols, rows, flags, len(args)) + b''.join(struct.pack('>I', len(a)) + a for a in args)
if detach:
    payload += struct.pack('>II', detach[0], detach[1])
frame = struct.pack('>BBHI', 1, 1, 0, len(payload)) + payload
while frame:
    try:
        frame = frame[os.write(3, frame):]
    except BlockingIOError:
        select.select([], [3], [])
sys.exit(0)
`;

function parseStart(payload) {
  const cols = payload.readUInt16BE(0);
  const rows = payload.readUInt16BE(2);
  const flags = payload.readUInt32BE(4);
  const argc = payload.readUInt32BE(8);
  const argv = [];
  let off = 12;
  for (let i = 0; i < argc; i++) {
    const n = payload.readUInt32BE(off);
    argv.push(payload.subarray(off + 4, off + 4 + n).toString('utf8'));
    off += 4 + n;
  }
  if (flags & 2) {  // docs/PROTOCOL.md section 10.1: grace, scrollback
    return { cols, rows, flags, argv,
      detach: { grace: payload.readUInt32BE(off), scrollback: payload.readUInt32BE(off + 4) } };
  }
  return { cols, rows, flags, argv };
}

// The ENV frame's payload as {NAME: VALUE} (docs/PROTOCOL.md section 3a).
function parseEnv(payload) {
  const env = {};
  let off = 4;
  for (let i = 0, n = payload.readUInt32BE(0); i < n; i++) {
    const len = payload.readUInt32BE(off);
    const entry = payload.subarray(off + 4, off + 4 + len).toString('utf8');
    const eq = entry.indexOf('=');
    env[entry.slice(0, eq)] = entry.slice(eq + 1);
    off += 4 + len;
  }
  return env;
}

const HEX32 = 'aa11bb22cc33dd44ee55ff6600778899';
const STARTED = {
  type: 'started', session: HEX32, unit: `opencode-pty-${HEX32}.service`,
  invocation: '0123456789abcdef0123456789abcdef', revision: 'f'.repeat(40), source: 'e'.repeat(64),
};

// One accepted connection of the fake supervisor.
class Conn {
  constructor(socket) {
    this.socket = socket;
    this.frames = [];          // every frame received after START: {type, payload}
    this.start = null;
    this.list = false;         // the first frame was LIST
    this.attach = null;        // the first frame was ATTACH: {session, cursor}
    this.decodeError = null;
    this._waiters = [];
    const dec = new protocol.FrameDecoder('fromClient');
    socket.on('data', (chunk) => {
      const err = dec.push(chunk, (type, payload) => {
        const first = !this.start && !this.list && !this.attach && this.frames.length === 0;
        if (type === protocol.FrameType.START && first) this.start = parseStart(Buffer.from(payload));
        else if (type === protocol.FrameType.LIST && first) this.list = true;
        else if (type === protocol.FrameType.ATTACH && first) {
          this.attach = { session: payload.subarray(0, 32).toString('latin1'), cursor: Number(payload.readBigUInt64BE(32)) };
        } else this.frames.push({ type, payload: Buffer.from(payload) });
        this._check();
      });
      if (err) { this.decodeError = err; this._check(); }
    });
    socket.on('error', () => {});
    socket.on('close', () => { this.closed = true; this._check(); });
  }
  output(bytes) { return this.socket.write(protocol.encodeFrame(protocol.FrameType.OUTPUT, bytes)); }
  event(obj) { return this.socket.write(protocol.encodeFrame(protocol.FrameType.EVENT, Buffer.from(JSON.stringify(obj)))); }
  raw(bytes) { return this.socket.write(bytes); }
  started() { return this.event(STARTED); }
  // The command's own status (exact: true), as the supervisor reports it since issue 20.
  exit(code = 0, signal = null, exact = true) {
    const result = signal !== null ? 'signal' : code === 0 ? 'success' : 'exit-code';
    this.event({ type: 'exit', code, signal, result, exact });
    this.socket.end();
  }
  // The notice that names the command's pid once its execve succeeded.
  commandStarted(pid) { return this.event({ type: 'notice', code: 'command_started', pid }); }
  // docs/PROTOCOL.md section 10.4: one LIST entry (defaults: a detached
  // session that runs), the end of a LIST answer, the answer to an ATTACH.
  sessionEntry(fields = {}) {
    return this.event({
      type: 'session', session: HEX32, unit: `opencode-pty-${HEX32}.service`, state: 'detached',
      started: 1700000000000000, grace: 60, scrollback: 1048576, first: 0, next: 0, exited: false,
      code: null, signal: null, pid: null, ...fields,
    });
  }
  listed(count) {
    this.event({ type: 'listed', count });
    this.socket.end();
  }
  attached(fields = {}) {
    return this.event({ ...STARTED, type: 'attached', session: this.attach.session, cursor: this.attach.cursor,
      dropped: 0, next: this.attach.cursor, pid: null, ...fields });
  }
  // A terminal error envelope, then the close.
  error(code, message = code) {
    this.event({ type: 'error', code, message });
    this.socket.end();
  }
  // Resolves when pred(this) is true (a hang guard of HANG_GUARD_MS, wait.js).
  until(pred, what = 'condition', ms = HANG_GUARD_MS) {
    return new Promise((resolve, reject) => {
      const w = { pred, resolve };
      w.timer = setTimeout(() => { this._waiters.splice(this._waiters.indexOf(w), 1); reject(new Error(`fake supervisor: timed out waiting for ${what}`)); }, ms);
      this._waiters.push(w);
      this._check();
    });
  }
  _check() {
    for (const w of this._waiters.slice()) {
      if (w.pred(this)) {
        clearTimeout(w.timer);
        this._waiters.splice(this._waiters.indexOf(w), 1);
        w.resolve(this);
      }
    }
  }
}

// Starts a fake supervisor; onConn(conn) runs for each connection once its
// first frame (START, LIST or ATTACH) arrived (or with conn.start === null if
// the client closes first).
async function fakeSupervisor(onConn) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ocpty-test-'));
  const socketPath = path.join(dir, 'supervisor.sock');
  const helperPath = path.join(dir, 'fake-helper');
  fs.writeFileSync(helperPath, `#!/usr/bin/python3\nHANG_GUARD_S = ${HANG_GUARD_MS / 1000}\n${HELPER_SOURCE}`,
    { mode: 0o755 });
  const conns = [];
  const server = net.createServer((s) => {
    const c = new Conn(s);
    conns.push(c);
    c.until((x) => x.start || x.list || x.attach || x.closed, 'START, LIST or ATTACH').then(() => onConn && onConn(c), () => {});
  });
  await new Promise((r) => server.listen(socketPath, r));
  return {
    dir, socketPath, helperPath, conns, server,
    report: () => JSON.parse(fs.readFileSync(helperPath + '.report.json', 'utf8')),
    releaseHelper: () => fs.writeFileSync(helperPath + '.go', ''),  // ends a "helper-hold"
    opts: (extra) => ({ socketPath, helperPath, cwd: dir, ...extra }),
    close: () => new Promise((r) => {
      for (const c of conns) c.socket.destroy();
      server.close(() => { fs.rmSync(dir, { recursive: true, force: true }); r(); });
    }),
  };
}

// Resolves with the exit event of pty.
function exitOf(pty) {
  return new Promise((resolve) => pty.onExit(resolve));
}

module.exports = { fakeSupervisor, exitOf, parseStart, parseEnv, STARTED, HEX32 };
