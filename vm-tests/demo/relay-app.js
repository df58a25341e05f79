'use strict';
// vm-tests/demo/relay-app.js: a stand-in for the opencode v2 server, used by
// the demo (tools/demo) and the acceptance suite (vm-tests/acceptance/). Like
// the real server it owns the PTYs and relays them to its own clients: it runs
// as the MainPID of opencode-v2.service (User=byk), opens one PTY per relay
// connection through the Node module (client/node), and relays bytes and
// events both ways. The relay listens on $HOME/.opencode-v2/relay.sock in a
// directory of mode 0700, so only the application's user (and root) can use it.
//
// Relay wire format (both directions): 1 byte type, 4 bytes big-endian
// length, payload; a payload is at most 1 MiB.
//   client -> app  'S' JSON {argv, cwd?, cols?, rows?} (first frame, once)
//                  'I' input bytes   'K' signal name   'T' stop   'E' end of input
//   app -> client  'V' JSON event: {type:"started", unit, session, invocation,
//                  revision, source, app_pid, node}, {type:"notice", ...},
//                  {type:"error", code, message}, {type:"exit", exitCode,
//                  signal, result, error}; after "exit" the app closes.
//                  'O' output bytes
// Closing the relay connection early closes the PTY (the supervisor stops the
// unit). Nothing of a session's bytes or argv is logged.
//
// Environment: OPENCODE_PTY_MODULE (path of client/node/index.js; default
// ../../client/node/index.js), OPENCODE_V2_RELAY (socket path override).

const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const pty = require(process.env.OPENCODE_PTY_MODULE || path.join(__dirname, '../../client/node/index.js'));

const MAX_FRAME = 1024 * 1024;
const home = os.homedir();
const relayPath = process.env.OPENCODE_V2_RELAY || path.join(home, '.opencode-v2', 'relay.sock');

function frame(type, payload) {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(JSON.stringify(payload));
  const h = Buffer.alloc(5);
  h.write(type, 0, 'latin1');
  h.writeUInt32BE(body.length, 1);
  return Buffer.concat([h, body]);
}

let nextId = 1;
const live = new Set();

function serve(conn) {
  const id = nextId++;
  let buf = Buffer.alloc(0);
  let p = null;
  let ended = false;

  const send = (type, payload) => {
    if (ended || conn.destroyed) return true;
    return conn.write(frame(type, payload));
  };
  const finish = () => {
    if (ended) return;
    ended = true;
    conn.end();
  };
  const refuse = (code, message) => {
    send('V', { type: 'error', code, message });
    finish();
    if (p) p.close();
  };

  function start(req) {
    if (!req || !Array.isArray(req.argv) || req.argv.length < 1 || !req.argv.every((a) => typeof a === 'string')) {
      refuse('relay_bad_start', 'start: argv must be a non-empty list of strings');
      return;
    }
    try {
      p = pty.spawn(req.argv[0], req.argv.slice(1), {
        cwd: req.cwd || home, cols: req.cols || 80, rows: req.rows || 24, encoding: null,
      });
    } catch (e) {
      refuse(e.code || 'spawn_failed', e.message);
      return;
    }
    live.add(p);
    p.onStarted((e) => {
      console.log(`relay ${id}: PTY started, unit ${e.unit}`);
      send('V', { ...e, app_pid: process.pid, node: process.version });
    });
    p.onNotice((n) => send('V', n));
    p.onError((e) => send('V', { type: 'error', code: e.code, message: e.message }));
    p.onData((d) => {
      // Backpressure: a relay client that does not read stops the PTY's output.
      if (!send('O', d)) p.pause();
    });
    p.onExit((x) => {
      live.delete(p);
      console.log(`relay ${id}: PTY ended, exit code ${x.exitCode} signal ${x.signal} result ${x.result}` +
        (x.error ? ` error ${x.error.code}` : ''));
      send('V', { type: 'exit', exitCode: x.exitCode, signal: x.signal, result: x.result,
        error: x.error ? { code: x.error.code, message: x.error.message } : null });
      finish();
    });
    p.onDrain(() => conn.resume());
  }

  function onFrame(type, payload) {
    if (type === 'S') {
      if (p) return refuse('relay_protocol', 'start: sent twice');
      let req;
      try { req = JSON.parse(payload.toString('utf8')); } catch (e) { return refuse('relay_bad_start', 'start: not JSON'); }
      return start(req);
    }
    if (!p) return refuse('relay_protocol', 'the first frame must be a start');
    if (p.state === 'exited') return;
    try {
      if (type === 'I') {
        if (!p.write(payload)) conn.pause();
      } else if (type === 'K') {
        p.kill(payload.toString('latin1'));
      } else if (type === 'T') {
        p.stop();
      } else if (type === 'E') {
        p.end();
      } else {
        refuse('relay_protocol', `unknown frame type ${JSON.stringify(type)}`);
      }
    } catch (e) {
      // The module refuses (bad_utf8, bad_signal, input_closed...): tell the
      // relay client, keep the session.
      send('V', { type: 'error', code: e.code || 'relay_error', message: e.message, fatal: false });
    }
  }

  conn.on('data', (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 5) {
      const len = buf.readUInt32BE(1);
      if (len > MAX_FRAME) return refuse('relay_frame_too_large', `frame of ${len} bytes`);
      if (buf.length < 5 + len) break;
      const type = buf.toString('latin1', 0, 1);
      const payload = buf.subarray(5, 5 + len);
      buf = buf.subarray(5 + len);
      onFrame(type, payload);
      if (ended) return;
    }
  });
  conn.on('drain', () => { if (p) p.resume(); });
  conn.on('error', () => {});
  conn.on('close', () => {
    ended = true;
    if (p && p.state !== 'exited') p.close();
  });
}

function main() {
  const dir = path.dirname(relayPath);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  try { fs.unlinkSync(relayPath); } catch (e) { if (e.code !== 'ENOENT') throw e; }
  const server = net.createServer(serve);
  server.listen(relayPath, () => {
    console.log(`relay: listening on ${relayPath} (pid ${process.pid}, node ${process.version}, uid ${process.getuid()})`);
  });
  const shutdown = () => {
    server.close();
    for (const p of live) p.close();
    setTimeout(() => process.exit(0), 200);
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

main();
