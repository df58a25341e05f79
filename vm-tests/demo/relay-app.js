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
//   client -> app  'S' JSON {argv, cwd?, cols?, rows?, detachable?} (first
//                  frame, once; detachable is the module's {graceSeconds,
//                  scrollbackBytes?})
//                  or 'A' JSON {session, until_next?} (first frame, once):
//                  attach to a detachable terminal this application kept
//                  (below), after list() shows its ring's next at least
//                  until_next (a hang guard of 60 s)
//                  'I' input bytes   'K' signal name   'T' stop   'E' end of input
//   app -> client  'V' JSON event: {type:"started", unit, session, invocation,
//                  revision, source, app_pid, node}, or for 'A' {type:"attached",
//                  session, unit, replay, listed, kept, app_pid, node};
//                  {type:"notice", ...}, {type:"error", code, message},
//                  {type:"exit", exitCode, signal, result, error}; after "exit"
//                  the app closes.
//                  'O' output bytes (after "attached": the replay, then live)
// Closing the relay connection early closes the PTY (the supervisor stops the
// unit; a detachable terminal is detached instead, as it is when this process
// ends). Nothing of a session's bytes or argv is logged.
//
// Detachable terminals: like the real server, the application keeps, in a
// file of its own ($HOME/.opencode-v2/terminals.json, in the 0700 directory),
// each live detachable terminal's session, unit and cursor (the bytes it has
// relayed), rewritten after every chunk, so that its next MainPID (a restart
// of opencode-v2.service) attaches at exactly that cursor; the entry goes when
// the terminal has ended.
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

// The detachable terminals' file: {session: {unit, cursor, app_pid}}.
const terminalsPath = path.join(path.dirname(relayPath), 'terminals.json');
function readTerminals() {
  try {
    const t = JSON.parse(fs.readFileSync(terminalsPath, 'utf8'));
    return t && typeof t === 'object' && !Array.isArray(t) ? t : {};
  } catch (e) {
    return {};
  }
}
function keepTerminal(session, entry) {
  const t = readTerminals();
  if (entry) t[session] = entry; else delete t[session];
  fs.writeFileSync(`${terminalsPath}.tmp`, JSON.stringify(t), { mode: 0o600 });
  fs.renameSync(`${terminalsPath}.tmp`, terminalsPath);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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

  // The PTY's events to the relay client; a detachable one's cursor to the file.
  function relay() {
    live.add(p);
    p.onNotice((n) => send('V', n));
    p.onError((e) => send('V', { type: 'error', code: e.code, message: e.message }));
    p.onData((d) => {
      // Backpressure: a relay client that does not read stops the PTY's output.
      if (!send('O', d)) p.pause();
      if (p.detachable) keepTerminal(p.session, { unit: p.unit, cursor: p.cursor, app_pid: process.pid });
    });
    p.onExit((x) => {
      live.delete(p);
      console.log(`relay ${id}: PTY ended, exit code ${x.exitCode} signal ${x.signal} result ${x.result}` +
        (x.error ? ` error ${x.error.code}` : ''));
      // A detachable terminal closed by this side (its client left, this
      // process stops) is detached, not ended: it stays in the file.
      if (p.detachable && p.session && !(x.error && x.error.code === 'closed')) keepTerminal(p.session, null);
      send('V', { type: 'exit', exitCode: x.exitCode, signal: x.signal, result: x.result,
        error: x.error ? { code: x.error.code, message: x.error.message } : null });
      finish();
    });
    p.onDrain(() => conn.resume());
  }

  function start(req) {
    if (!req || !Array.isArray(req.argv) || req.argv.length < 1 || !req.argv.every((a) => typeof a === 'string')) {
      refuse('relay_bad_start', 'start: argv must be a non-empty list of strings');
      return;
    }
    try {
      p = pty.spawn(req.argv[0], req.argv.slice(1), {
        cwd: req.cwd || home, cols: req.cols || 80, rows: req.rows || 24, encoding: null,
        ...(req.detachable ? { detachable: req.detachable } : {}),
      });
    } catch (e) {
      refuse(e.code || 'spawn_failed', e.message);
      return;
    }
    p.onStarted((e) => {
      console.log(`relay ${id}: PTY started, unit ${e.unit}`);
      if (p.detachable) keepTerminal(e.session, { unit: e.unit, cursor: p.cursor, app_pid: process.pid });
      send('V', { ...e, app_pid: process.pid, node: process.version });
    });
    relay();
  }

  // Attach to a terminal this application kept, at the cursor in its file
  // (written by whichever MainPID relayed it last).
  async function attach(req) {
    const kept = req && typeof req.session === 'string' ? readTerminals()[req.session] : undefined;
    if (!kept || !Number.isSafeInteger(kept.cursor)) {
      refuse('relay_not_kept', 'attach: this application keeps no cursor for that session');
      return;
    }
    let listed;
    try {
      const deadline = Date.now() + 60000;
      for (;;) {
        listed = (await pty.list()).find((e) => e.session === req.session);
        if (!listed || !(req.until_next > listed.next) || Date.now() > deadline) break;
        await sleep(200);
      }
      if (ended) return;
      p = await pty.attach(req.session, { cursor: kept.cursor, encoding: null });
    } catch (e) {
      refuse(e.code || 'attach_failed', e.message);
      return;
    }
    if (ended) {
      p.close();
      return;
    }
    console.log(`relay ${id}: PTY attached, unit ${p.unit}`);
    send('V', { type: 'attached', session: p.session, unit: p.unit, replay: p.replay, listed: listed || null,
      kept, app_pid: process.pid, node: process.version });
    relay();
  }

  let opened = false;
  function onFrame(type, payload) {
    if (type === 'S' || type === 'A') {
      if (opened) return refuse('relay_protocol', 'start or attach: sent twice');
      opened = true;
      let req;
      try { req = JSON.parse(payload.toString('utf8')); } catch (e) { return refuse('relay_bad_start', 'start: not JSON'); }
      return type === 'S' ? start(req) : attach(req);
    }
    // Before "attached" a relay client waits: nothing may precede it.
    if (!p) return refuse('relay_protocol', 'the first frame must be a start or an attach');
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
