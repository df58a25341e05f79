'use strict';
// list(): the supervisor's detachable sessions (docs/PROTOCOL.md section
// 10.4) over one connection of its own: one LIST frame, `session` envelopes,
// the terminal `listed`, close. Invariants: the connection holds a handshake
// slot (lib/gate.js) from connect to its end, like a PTY's; what it keeps is
// bounded (limits.maxDetachableSessions entries of limits.maxListEntryBytes);
// the promise settles exactly once and the socket is closed when it does.

const net = require('net');

const { PtyError } = require('./errors.js');
const { limits } = require('./limits.js');
const { FrameType, FrameDecoder, encodeFrame } = require('./frame.js');
const { parseEnvelope } = require('./envelope.js');
const { gateFor } = require('./gate.js');

// The keys of a `session` envelope (section 10.4), in its order: an entry of
// list() has exactly these (a key a later supervisor adds is not passed on).
const ENTRY_KEYS = ['session', 'unit', 'state', 'started', 'grace', 'scrollback', 'first', 'next',
  'exited', 'code', 'signal', 'pid'];

class Lister {
  constructor(socketPath, resolve, reject) {
    this._socketPath = socketPath;
    this._resolve = resolve;
    this._reject = reject;
    this._entries = [];
    this._decoder = new FrameDecoder('fromSupervisor');
    this._socket = null;
    this._connected = false;
    this._done = false;
    this._gate = gateFor(socketPath);
    this._slot = 'held';
    if (this._gate.enter(this)) this._connect();
    else this._slot = 'waiting';
  }

  // lib/gate.js: a slot freed up.
  _admitted() {
    this._slot = 'held';
    this._connect();
  }

  _connect() {
    const socket = net.createConnection({ path: this._socketPath });
    this._socket = socket;
    socket.on('connect', () => {
      this._connected = true;
      socket.write(encodeFrame(FrameType.LIST));
    });
    socket.on('data', (chunk) => {
      if (this._done) return;
      const err = this._decoder.push(chunk, (type, payload) => {
        if (!this._done) this._onFrame(type, payload);
        return this._done;
      });
      if (err && !this._done) this._finish(new PtyError(err, `protocol violation from the supervisor: ${err}`));
    });
    socket.on('error', (e) => {
      const code = this._connected ? 'connection_error' : 'connect_failed';
      this._finish(new PtyError(code, `supervisor socket ${this._socketPath}: ${e.code || e.message}`, { cause: e }));
    });
    socket.on('close', () => {
      this._finish(new PtyError('connection_closed', 'list: the supervisor closed the connection before `listed`'));
    });
  }

  _onFrame(type, payload) {
    if (type !== FrameType.EVENT) {
      this._finish(new PtyError('protocol_state', 'list: OUTPUT on a LIST connection'));
      return;
    }
    let env;
    try {
      env = parseEnvelope(payload);
    } catch (e) {
      this._finish(e);
      return;
    }
    switch (env.type) {
      case 'session': {
        if (payload.length > limits.maxListEntryBytes) {
          this._finish(new PtyError('frame_too_large', `list: a session envelope above ${limits.maxListEntryBytes} bytes`));
          return;
        }
        if (this._entries.length >= limits.maxDetachableSessions) {
          this._finish(new PtyError('protocol_state', `list: more than ${limits.maxDetachableSessions} session envelopes`));
          return;
        }
        const entry = {};
        for (const key of ENTRY_KEYS) entry[key] = env[key];
        this._entries.push(entry);
        return;
      }
      case 'listed':
        if (env.count !== this._entries.length) {
          this._finish(new PtyError('bad_field', `list: listed says ${env.count} sessions, ${this._entries.length} were sent`));
          return;
        }
        this._finish(null, this._entries);
        return;
      case 'error':
        this._finish(new PtyError(env.code, env.message, { fromSupervisor: true }));
        return;
      default:
        this._finish(new PtyError('protocol_state', `list: ${env.type} envelope on a LIST connection`));
    }
  }

  _finish(error, entries) {
    if (this._done) return;
    this._done = true;
    if (this._slot === 'held') this._gate.leave();
    else if (this._slot === 'waiting') this._gate.cancel(this);
    this._slot = 'none';
    // The answer is complete (or the connection is useless): close our side.
    if (this._socket) this._socket.destroy();
    if (error) this._reject(error);
    else this._resolve(entries);
  }
}

function listSessions(socketPath) {
  return new Promise((resolve, reject) => new Lister(socketPath, resolve, reject));
}

module.exports = { listSessions, ENTRY_KEYS };
