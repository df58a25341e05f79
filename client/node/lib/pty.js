'use strict';
// One PTY session of the Node client (class Pty): a node-pty-shaped API over
// the session protocol (docs/PROTOCOL.md, version 1), started by spawn() (the
// helper sends START) or attached to a detached session by attach() (ATTACH,
// section 10.4; no helper, no directory). Owns one connection and
// one directory descriptor per PTY and the output buffer held for the
// application; the strict decoders are lib/frame.js and lib/envelope.js.
// Invariants: the socket and the directory fd are close-on-exec in this process
// and reach exactly one child, the fixed helper, as its fd 3 and fd 4; nothing is
// written to the socket before the helper exited 0; every buffer has a bound
// (output held for the application, input not yet sent), and output that cannot
// be delivered stops reading the socket instead of being dropped.

const fs = require('fs');
const net = require('net');
const { StringDecoder } = require('string_decoder');

const { PtyError } = require('./errors.js');
const { limits } = require('./limits.js');
const { FrameType, FrameDecoder, encodeFrame, resizePayload, attachPayload } = require('./frame.js');
const { parseEnvelope, CODE_FIELDS } = require('./envelope.js');
const { inputBytes, chunkUtf8 } = require('./utf8.js');
const { SIGNALS, signalNumber, exitSignalNumber } = require('./signals.js');
const { checkResize } = require('./options.js');
const { Listeners } = require('./listeners.js');
const { gateFor } = require('./gate.js');
const { spawnHelper, collectStderr, helperFailure, helperError } = require('./helper.js');

// node-pty's older EventEmitter form is offered for these events only.
const COMPAT_EVENTS = new Set(['data', 'exit']);
function compatEvent(event) {
  if (!COMPAT_EVENTS.has(event)) {
    throw new TypeError(`on: event must be "data" or "exit" (node-pty's events), got ${JSON.stringify(event)}; see onError, onStarted, onNotice, onDrain`);
  }
  return event;
}

// What a socket error is called in the PtyError's message, the same on Node
// and Bun. A write to a supervisor that closed its end fails with EPIPE on
// Node; Bun closes the descriptor itself when it sees the peer's hang-up
// (the stream still open and paused), so the write fails with EBADF instead.
// This module never closes the socket's descriptor while the socket is in
// use, so a write's EBADF means the same as EPIPE: the supervisor is gone.
// `cause` keeps the runtime's own error.
function socketErrorName(e) {
  if (e.code === 'EBADF' && e.syscall === 'write') return 'EPIPE';
  return e.code || e.message;
}

// state: 'connecting' (waiting for a handshake slot, then connecting) →
// 'handshake' (helper running) → 'starting' (helper exited 0, waiting for
// `started`) → 'running' → 'exited'. An attach skips 'handshake': it writes
// ATTACH at connect and waits in 'starting' for `attached`.
//
// attach: null for spawn(); for attach(), { session, cursor, resolve, reject }:
// the promise settles with this Pty on `attached`, or with the error that
// ended the connection before it.
class Pty {
  constructor(file, args, opts, attach = null) {
    this.process = attach ? null : file;
    this.cols = opts.cols;
    this.rows = opts.rows;
    this.unit = null;
    this.session = null;
    this.invocation = null;
    this.revision = null;
    this.source = null;
    this.state = 'connecting';
    // Detachable sessions (docs/PROTOCOL.md section 10): whether this one
    // outlives its connection, and for an attach what `attached` reported.
    this.detachable = attach !== null || opts.detach !== null;
    this.replay = null;
    this._cursor = null;          // cursor of the next byte onData gets; from started/attached on
    this._attach = attach;        // the ATTACH request; its resolve/reject until settled
    this._holdSends = false;      // ATTACH is out: the application's frames wait for `attached`
    this._attachHold = false;     // `attached` was decoded: the rest waits for a data or exit listener
    this._attachRelease = false;  // the hold's end is scheduled
    this._pidFromAttach = false;  // _pid came from `attached`; one equal command_started is fine
    this._argv = attach ? null : [file, ...args];
    this._opts = opts;
    this._text = opts.encoding === null ? null : new StringDecoder(opts.encoding);
    this._decoder = new FrameDecoder('fromSupervisor');
    this._on = {
      data: new Listeners(), exit: new Listeners(), error: new Listeners(),
      started: new Listeners(), notice: new Listeners(), drain: new Listeners(),
    };
    this._buffered = [];          // OUTPUT payloads not yet given to a data listener
    this._bufferedBytes = 0;
    this._raw = [];               // bytes read but not decoded: held at the output bound
    this._decoding = false;
    this._closeAfterRaw = false;  // the socket closed while _raw still held frames
    this._paused = false;         // by the application
    this._reading = false;        // the handshake is over: the socket may be read
    this._outbox = [];            // frames written before the helper exited 0
    this._outboxBytes = 0;
    this._inputClosed = false;
    this._pendingResize = null;   // [cols, rows] asked for after the helper ran, before started
    this._terminal = null;        // {exitCode, signal, result, exact, error} once known
    this._exited = false;
    this._helper = null;
    this._helperFailure = null;
    this._socketClosed = false;
    this._timer = null;
    this._deliverScheduled = false;
    this._needDrain = false;      // write() returned false; onDrain is owed
    this._socketError = null;     // an error after reading began: the close decides
    this._salvaging = false;
    this._textDone = false;       // the UTF-8 decoder's tail was flushed or discarded
    this._watchers = new Set();   // waitForOutput: output decoded since each call
    this._pid = undefined;        // the command's pid, from the command_started notice
    this._destroying = false;     // destroy() sent SIGNAL HUP and STOP; output is dropped
    this._destroyTimer = null;    // bounds destroy()'s wait for the terminal envelope
    this._destroyStopTimer = null; // sends destroy()'s STOP after limits.destroyHupGraceMs
    this._compat = { data: [], exit: [] };  // on()/once() registrations: {fn, disposable}

    // The approved directory: opened by the application (libuv adds
    // O_CLOEXEC), handed to the helper as fd 4, closed as soon as spawn returns.
    // An attach has none: the session's unit already runs in its directory.
    this._dirFd = -1;
    if (!attach) {
      try {
        this._dirFd = fs.openSync(opts.cwd, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
      } catch (e) {
        throw new PtyError('bad_cwd', `spawn: cannot open cwd ${opts.cwd} as a directory: ${e.code || e.message}`);
      }
    }

    this._socket = null;
    this._gate = gateFor(opts.socketPath);
    this._slot = 'held';          // 'held' | 'waiting' | 'none'
    if (this._gate.enter(this)) this._connect();
    else this._slot = 'waiting';
  }

  _admitted() {
    this._slot = 'held';
    this._connect();
  }

  _releaseSlot() {
    if (this._slot === 'held') {
      this._slot = 'none';
      this._gate.leave();
    } else if (this._slot === 'waiting') {
      this._slot = 'none';
      this._gate.cancel(this);
    }
  }

  _connect() {
    const opts = this._opts;
    const socket = net.createConnection({ path: opts.socketPath });
    this._socket = socket;
    // Nothing is read before the helper has exited 0 (docs/PROTOCOL.md section 1).
    socket.pause();
    // Node destroys a socket on any error, a write's EPIPE included, and a
    // destroyed socket's unread bytes are gone. A write that races the
    // supervisor's close must not cost the exit envelope: before the handle
    // closes, what was read and what the kernel holds is kept for decoding.
    const destroy = socket._destroy;
    socket._destroy = (err, cb) => {
      if (err && this._reading && !this._terminal && !this._socketError) this._salvage(socket, err);
      return destroy.call(socket, err, cb);
    };
    socket.on('connect', () => (this._attach ? this._sendAttach() : this._spawnHelper()));
    socket.on('data', (chunk) => {
      if (this._salvaging) return;  // taken by _salvage, in order
      this._onChunk(chunk);
    });
    socket.on('drain', () => this._onDrain());
    socket.on('error', (e) => {
      if (this._socketError === e) return;  // salvaged: the close decides
      const code = this.state === 'connecting' ? 'connect_failed' : 'connection_error';
      this._fail(new PtyError(code, `supervisor socket ${opts.socketPath}: ${socketErrorName(e)}`, { cause: e }));
    });
    socket.on('close', () => this._onClose());
  }

  // Runs inside the socket's destroy, before its descriptor is closed: moves
  // the bytes the stream read but did not emit (paused) and, when the peer is
  // gone (EPIPE, ECONNRESET: it sends nothing more, so the kernel's queue is
  // finite), the kernel's receive queue into _raw. Writing stops; the close
  // then decodes them and chooses the terminal event.
  _salvage(socket, err) {
    this._socketError = err;
    this._outbox = [];
    this._outboxBytes = 0;
    this._salvaging = true;
    try {
      for (let c = socket.read(); c !== null; c = socket.read()) this._raw.push(c);
    } finally {
      this._salvaging = false;
    }
    // Bun has no such descriptor here (fd -1: it closed it on the peer's
    // hang-up); what it read is in the stream (test/review.test.js, 2).
    const fd = socket._handle ? socket._handle.fd : -1;
    if ((err.code !== 'EPIPE' && err.code !== 'ECONNRESET') || !Number.isInteger(fd) || fd < 0) return;
    const buf = Buffer.allocUnsafe(limits.maxOutputPayload);
    for (;;) {
      let n;
      try {
        n = fs.readSync(fd, buf, 0, buf.length, null);
      } catch {
        break;  // EAGAIN (all taken) or the peer's ECONNRESET after its data
      }
      if (n === 0) break;
      this._raw.push(Buffer.from(buf.subarray(0, n)));
    }
  }

  // ---- node-pty-shaped API ----

  // The command's pid (it runs as this process's user, inside the unit): known
  // once the supervisor's command_started notice arrived, not at spawn.
  get pid() { return this._pid; }
  // node-pty's XON/XOFF interception is not done: always false (spawn refuses true).
  get handleFlowControl() { return false; }
  get bufferedBytes() { return this._bufferedBytes; }
  // The absolute cursor (docs/PROTOCOL.md section 10.2) of the next output
  // byte onData will get: the start cursor (0 at `started`, the `attached`
  // envelope's cursor) plus the OUTPUT bytes handed to data listeners, counted
  // before decoding. null before started/attached. Held output is not counted:
  // an attach from this cursor replays it.
  get cursor() { return this._cursor; }

  onData(fn) {
    // Disposing the last data listener may release a held onExit.
    const d = this._on.data.add(fn, () => { this._updateFlow(); this._scheduleDeliver(); });
    this._scheduleDeliver();
    this._releaseAttachHold();
    return d;
  }
  onExit(fn) {
    const d = this._on.exit.add(fn);
    this._releaseAttachHold();
    return d;
  }
  onError(fn) { return this._on.error.add(fn); }
  onStarted(fn) { return this._on.started.add(fn); }
  onNotice(fn) { return this._on.notice.add(fn); }
  onDrain(fn) { return this._on.drain.add(fn); }

  // node-pty's older EventEmitter form, 'data' and 'exit' only. A listener is
  // registered exactly as by onData/onExit (a data listener holds onExit back
  // until it got the output). An 'exit' listener gets (exitCode, signal) as
  // node-pty passes them, the signal as a number (0: none).
  on(event, fn) {
    this._addCompat(compatEvent(event), fn, false);
    return this;
  }
  addListener(event, fn) { return this.on(event, fn); }
  once(event, fn) {
    this._addCompat(compatEvent(event), fn, true);
    return this;
  }
  // Removes the latest registration of fn for event, as EventEmitter does.
  removeListener(event, fn) {
    const list = this._compat[compatEvent(event)];
    for (let i = list.length - 1; i >= 0; i--) {
      if (list[i].fn === fn) {
        list.splice(i, 1)[0].disposable.dispose();
        break;
      }
    }
    return this;
  }
  off(event, fn) { return this.removeListener(event, fn); }

  _addCompat(event, fn, once) {
    if (typeof fn !== 'function') throw new TypeError('listener must be a function');
    const list = this._compat[event];
    const entry = { fn, disposable: null };
    const forget = () => {
      const i = list.indexOf(entry);
      if (i >= 0) list.splice(i, 1);
      entry.disposable.dispose();
    };
    if (event === 'data') {
      entry.disposable = this.onData((d) => {
        if (once) forget();
        fn.call(this, d);
      });
    } else {
      entry.disposable = this.onExit((ev) => {
        if (once) forget();
        fn.call(this, ev.exitCode, exitSignalNumber(ev.signal));
      });
    }
    list.push(entry);
  }

  write(data) {
    const bytes = inputBytes(data);
    if (bytes.length > limits.maxWriteBytes) {
      throw new PtyError('input_too_large', `write: ${bytes.length} bytes in one call (max ${limits.maxWriteBytes})`);
    }
    if (this._ended()) return true;  // like node-pty: a finished PTY ignores input
    if (this._inputClosed) throw new PtyError('input_closed', 'write: end() was called: input is closed');
    if (bytes.length === 0) return true;
    const chunks = chunkUtf8(bytes);
    const frameBytes = bytes.length + chunks.length * limits.frameHeaderBytes;
    if (this._queuedInputBytes() + frameBytes > limits.maxQueuedInputBytes) {
      throw new PtyError('input_queue_full',
        `write: ${this._queuedInputBytes()} bytes of input are still unsent (max ${limits.maxQueuedInputBytes}); wait for onDrain`);
    }
    for (const c of chunks) this._send(encodeFrame(FrameType.INPUT, c));
    const room = this._queuedInputBytes() < limits.inputHighWaterMark;
    if (!room) this._needDrain = true;
    return room;
  }

  // To the command only (not to script or anything else in the unit); the
  // session ends when the command ends, not because of the signal itself.
  kill(signal = 'SIGHUP') {
    const n = signalNumber(signal);
    if (this._ended()) return;
    this._send(encodeFrame(FrameType.SIGNAL, Buffer.of(n)));
  }

  stop() {
    if (this._ended()) return;
    this._send(encodeFrame(FrameType.STOP));
  }

  end() {
    if (this._ended() || this._inputClosed) return;
    this._inputClosed = true;
    this._send(encodeFrame(FrameType.EOF));
  }

  pause() {
    this._paused = true;
    this._updateFlow();
  }

  resume() {
    this._paused = false;
    this._updateFlow();
    this._scheduleDeliver();
  }

  // A new window size for the PTY. Before the helper ran, the START frame
  // carries it; between the helper and `started`, it waits here (the last
  // size wins) and is sent when the unit runs; after the end: `closed`.
  resize(cols, rows) {
    const c = checkResize('cols', cols, limits.maxCols);
    const r = checkResize('rows', rows, limits.maxRows);
    if (this._ended()) throw new PtyError('closed', 'resize: the session has ended');
    this.cols = c;
    this.rows = r;
    if (this.state === 'connecting' && !this._attach) return;  // START will carry it
    if (this.state !== 'running') {
      this._pendingResize = [c, r];
      return;
    }
    this._send(encodeFrame(FrameType.RESIZE, resizePayload(c, r)));
  }

  // node-pty: clears the ConPTY buffer on Windows, a no-op elsewhere. Here too.
  clear() {}

  // Closes the connection at once; the supervisor stops the unit. onExit
  // fires with error.code "closed" (onError does not: it is not a failure).
  // After the session ended by itself (exit or error envelope, failure) it
  // keeps that ending; either way held output is discarded and a pending
  // onExit fires.
  close() {
    if (this._terminal) {
      if (this._socket) this._socket.destroy();
      this._buffered = [];
      this._bufferedBytes = 0;
      this._raw = [];
      this._closeAfterRaw = false;
      this._textDone = true;
      if (!this._exited) setImmediate(() => this._maybeExit());
      return;
    }
    this._terminal = { exitCode: null, signal: null, result: null, exact: false,
      error: new PtyError('closed', 'the application closed the session') };
    this._teardown();
    this._buffered = [];
    this._bufferedBytes = 0;
    this._raw = [];
    this._textDone = true;
    setImmediate(() => this._maybeExit());  // listeners run after close() returns
  }

  // node-pty's destroy() closes the PTY and sends the command SIGHUP; its exit
  // event then reports what the command did. Here, once the session runs: a
  // SIGNAL HUP to the command, then STOP (systemd stops the unit); output is
  // no longer delivered, the connection is read (paused or not) until the
  // terminal envelope, and onExit reports it, within limits.destroyTimeoutMs
  // (then the connection is dropped: error destroy_timeout). Before
  // `started`, or once the session has ended, it is close().
  destroy() {
    if (this._destroying) return;
    if (this.state !== 'running' || this._ended()) {
      this.close();
      return;
    }
    this._destroying = true;
    this._attachHold = false;  // destroy() reads to the end whoever listens
    this._buffered = [];
    this._bufferedBytes = 0;
    this._textDone = true;
    this._send(encodeFrame(FrameType.SIGNAL, Buffer.of(SIGNALS.HUP)));
    this._destroyStopTimer = setTimeout(() => {
      this._destroyStopTimer = null;
      if (!this._ended()) this._send(encodeFrame(FrameType.STOP));
    }, limits.destroyHupGraceMs);
    this._destroyTimer = setTimeout(() => {
      this._destroyTimer = null;
      this._fail(new PtyError('destroy_timeout',
        `destroy: no exit within ${limits.destroyTimeoutMs} ms of SIGHUP and STOP; connection dropped (the supervisor stops the unit)`));
    }, limits.destroyTimeoutMs);
    this._decodeRaw();  // bytes held while paused are read now, and reading restarts
  }

  // Resolves with the match once `pattern` matches the output decoded since
  // the call (a window of the last `maxBytes` characters); rejects on timeout
  // or when the session ends first. It is not a data listener: it sees output
  // as it arrives and takes none of it (held output stays for onData), so it
  // neither releases the output bound nor holds back onExit.
  waitForOutput(pattern, { timeoutMs = 10000, maxBytes = 64 * 1024 } = {}) {
    if (!(pattern instanceof RegExp)) throw new TypeError('waitForOutput: pattern must be a RegExp');
    if (pattern.global || pattern.sticky) throw new TypeError('waitForOutput: pattern must not be global or sticky');
    if (pattern.source.length > 1024) throw new RangeError('waitForOutput: pattern longer than 1024 characters');
    if (!Number.isInteger(maxBytes) || maxBytes < 1 || maxBytes > limits.maxBufferedOutputBytes) {
      throw new RangeError(`waitForOutput: maxBytes must be in 1..${limits.maxBufferedOutputBytes}`);
    }
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new RangeError('waitForOutput: timeoutMs must be a positive integer');
    if (this._terminal) {  // no output can come any more
      return Promise.reject(new PtyError('pattern_not_found', `waitForOutput: the session has ended; ${pattern} was not seen`));
    }
    return new Promise((resolve, reject) => {
      let window = '';
      let exit = null;
      // The same text onData gets (latin1 when onData gets Buffers).
      const text = this._text ? new StringDecoder(this._opts.encoding) : null;
      const watcher = (payload) => {
        window += text ? text.write(payload) : payload.toString('latin1');
        if (window.length > maxBytes) window = window.slice(window.length - maxBytes);
        const m = pattern.exec(window);
        if (m) done(resolve, m);
      };
      const done = (fn, v) => {
        clearTimeout(timer);
        this._watchers.delete(watcher);
        exit.dispose();
        fn(v);
      };
      const timer = setTimeout(() => done(reject,
        new PtyError('pattern_timeout', `waitForOutput: ${pattern} not seen within ${timeoutMs} ms`)), timeoutMs);
      this._watchers.add(watcher);
      exit = this.onExit(() => done(reject,
        new PtyError('pattern_not_found', `waitForOutput: session ended before ${pattern} was seen`)));
    });
  }

  // ---- connection and helper ----

  _spawnHelper() {
    if (this._terminal) return;
    this.state = 'handshake';
    const o = this._opts;
    let helper;
    try {
      helper = spawnHelper(o.helperPath, this.cols, this.rows, this._argv, this._socket, this._dirFd,
        o.envPayload !== null, o.detach);
    } catch (e) {
      this._closeDirFd();
      this._fail(new PtyError('helper_spawn_failed', `cannot run ${o.helperPath}: ${e.code || e.message}`, { cause: e }));
      return;
    }
    // libuv's spawn returns after the child's execve succeeded or failed, so
    // the helper holds its own copy of fd 4 by now; ours is no longer needed.
    this._closeDirFd();
    this._helper = helper;
    const stderr = collectStderr(helper);
    helper.on('error', (e) => {
      this._helper = null;
      this._fail(new PtyError('helper_spawn_failed', `cannot run ${o.helperPath}: ${e.code || e.message}`, { cause: e }));
    });
    let timedOut = false;
    this._timer = setTimeout(() => {
      timedOut = true;
      if (this._helper) this._helper.kill('SIGKILL');
    }, limits.helperTimeoutMs);
    helper.on('close', (status, signal) => {
      clearTimeout(this._timer);
      this._timer = null;
      if (this._helper !== helper) return;
      this._helper = null;
      if (this._terminal) return;
      if (status === 0 && this._socketClosed) {
        this._fail(new PtyError('connection_closed', 'the connection closed while the helper ran'));
        return;
      }
      if (status === 0) {
        this.state = 'starting';
        this._reading = true;
        // The announced ENV frame is the first frame of the application's own.
        if (o.envPayload !== null) this._socket.write(encodeFrame(FrameType.ENV, o.envPayload));
        for (const f of this._outbox) this._socket.write(f);
        this._outbox = [];
        this._outboxBytes = 0;
        this._updateFlow();
        // The kernel may have taken every queued frame at once: the socket
        // then never emits 'drain', but a write() that returned false is owed one.
        this._onDrain();
        return;
      }
      this._helperFailure = helperFailure(status, signal, timedOut, stderr());
      // The supervisor may have refused the connection with an error envelope
      // that says why; read for a short while to report it.
      this._reading = true;
      this._updateFlow();
      this._timer = setTimeout(() => this._fail(this._helperError()), limits.helperFailureGraceMs);
    });
  }

  _helperError() {
    return helperError(this._opts.helperPath, this._helperFailure);
  }

  // attach(): no helper. ATTACH is the first and only frame until `attached`
  // (docs/PROTOCOL.md section 10.4); frames the application writes meanwhile
  // wait in the outbox, as they wait for the helper on a spawn.
  _sendAttach() {
    if (this._terminal) return;
    this.state = 'starting';
    this._reading = true;
    this._holdSends = true;
    this._socket.write(encodeFrame(FrameType.ATTACH, attachPayload(this._attach.session, this._attach.cursor)));
    this._updateFlow();
  }

  // `attached`: the session is this connection's. The promise resolves now;
  // the frames behind the envelope (the replay, maybe the exit) wait,
  // undecoded, until the application registers a data or exit listener (then
  // one event-loop turn more, so that the listeners it registers together all
  // see them): output would be held anyway, but an exit decoded before an
  // onExit listener exists would reach nobody.
  _onAttached(env) {
    const a = this._attach;
    if (!a || !a.resolve || this.state !== 'starting' || env.session !== a.session) {
      this._fail(new PtyError('protocol_state', `attached envelope in state ${this.state}`));
      return;
    }
    // cursor = max(C, first) and dropped = first - C when C < first, else 0.
    if (env.cursor !== a.cursor + env.dropped) {
      this._fail(new PtyError('bad_field', `attached envelope: cursor ${env.cursor} is not ${a.cursor} + dropped ${env.dropped}`));
      return;
    }
    this._enterRunning(env, env.cursor);
    this.replay = Object.freeze({ cursor: env.cursor, dropped: env.dropped, next: env.next });
    if (env.pid !== null) {
      this._pid = env.pid;
      this._pidFromAttach = true;
    }
    this._holdSends = false;
    for (const f of this._outbox) this._socket.write(f);
    this._outbox = [];
    this._outboxBytes = 0;
    this._sendPendingResize();
    this._onDrain();
    this._attachHold = true;
    if (this._on.data.size > 0 || this._on.exit.size > 0) this._releaseAttachHold();
    const { resolve } = a;
    a.resolve = a.reject = null;
    resolve(this);
  }

  // `started` or `attached`: the session runs for this connection; `cursor`
  // is the cursor of the next output byte.
  _enterRunning(env, cursor) {
    this.state = 'running';
    this._releaseSlot();
    this.unit = env.unit;
    this.session = env.session;
    this.invocation = env.invocation;
    this.revision = env.revision;
    this.source = env.source;
    this._cursor = cursor;
  }

  // A size asked for before the session ran goes out once it runs.
  _sendPendingResize() {
    if (!this._pendingResize) return;
    const [c, r] = this._pendingResize;
    this._pendingResize = null;
    this._send(encodeFrame(FrameType.RESIZE, resizePayload(c, r)));
  }

  _closeDirFd() {
    if (this._dirFd >= 0) {
      fs.closeSync(this._dirFd);
      this._dirFd = -1;
    }
  }

  _releaseAttachHold() {
    if (!this._attachHold || this._attachRelease) return;
    this._attachRelease = true;
    setImmediate(() => {
      this._attachHold = false;
      this._decodeRaw();
    });
  }

  // ---- reading ----

  _onChunk(chunk) {
    if (this._terminal) return;
    this._raw.push(chunk);
    this._decodeRaw();
  }

  // Decodes held bytes in order, stopping after the OUTPUT frame that reaches
  // maxBufferedOutputBytes: the application is never handed more than that
  // bound plus one frame (64 KiB), however the socket's reads cut the frames.
  // The rest waits, undecoded, until the application takes output.
  _decodeRaw() {
    if (this._decoding) return;  // the running loop below picks new bytes up
    this._decoding = true;
    try {
      while (this._raw.length > 0 && !this._terminal && !this._attachHold &&
             this._bufferedBytes < limits.maxBufferedOutputBytes) {
        const chunk = this._raw.shift();
        const err = this._decoder.push(chunk, (type, payload) => {
          if (!this._terminal) this._onFrame(type, payload);
          return this._bufferedBytes >= limits.maxBufferedOutputBytes || this._attachHold;
        });
        if (err) {
          if (!this._terminal) this._fail(new PtyError(err, `protocol violation from the supervisor: ${err}`));
          return;
        }
        if (this._decoder.rest) this._raw.unshift(this._decoder.rest);
      }
    } finally {
      this._decoding = false;
    }
    if (this._terminal) this._raw = [];
    if (this._closeAfterRaw && this._raw.length === 0) {
      this._closeAfterRaw = false;
      this._onClose();
      return;
    }
    this._updateFlow();
  }

  _onFrame(type, payload) {
    if (type === FrameType.OUTPUT) {
      if (this.state !== 'running') {
        this._fail(new PtyError('protocol_state', 'OUTPUT before the started envelope'));
        return;
      }
      if (this._destroying) return;  // the application no longer wants it
      for (const w of [...this._watchers]) w(payload);
      this._buffered.push(payload);
      this._bufferedBytes += payload.length;
      this._deliver();
      return;
    }
    let env;
    try {
      env = parseEnvelope(payload);
    } catch (e) {
      this._fail(e);
      return;
    }
    if (this._helperFailure && env.type !== 'error') {
      this._fail(this._helperError());
      return;
    }
    switch (env.type) {
      case 'started':
        if (this.state !== 'starting' || this._attach) {
          this._fail(new PtyError('protocol_state', `started envelope in state ${this.state}`));
          return;
        }
        // docs/PROTOCOL.md section 10.2: the first output byte is cursor 0.
        this._enterRunning(env, 0);
        this._sendPendingResize();
        this._on.started.emit(env);
        return;
      case 'notice':
        if (this.state !== 'running') {
          this._fail(new PtyError('protocol_state', `notice envelope in state ${this.state}`));
          return;
        }
        if (env.code === 'command_started') {
          // After an attach the pid came with `attached`; a command_started
          // naming the same pid once more adds nothing and is not an error.
          if (this._pid !== undefined && !(this._pidFromAttach && env.pid === this._pid)) {
            this._fail(new PtyError('protocol_state', 'a second command_started notice'));
            return;
          }
          this._pidFromAttach = false;
          this._pid = env.pid;
        }
        this._on.notice.emit(env);
        return;
      case 'exit':
        if (this.state !== 'running') {
          this._fail(new PtyError('protocol_state', `exit envelope in state ${this.state}`));
          return;
        }
        this._terminal = { exitCode: env.code, signal: env.signal,
          result: typeof env.result === 'string' ? env.result : null,
          exact: env.exact === true, error: null };
        this._teardown();
        this._maybeExit();
        return;
      case 'attached':
        this._onAttached(env);
        return;
      case 'session':
      case 'listed':
        this._fail(new PtyError('protocol_state', `${env.type} envelope on a PTY's connection`));
        return;
      case 'error': {
        const extra = this._helperFailure ? { ...this._helperFailure } : {};
        // The keys this code carries (launch_failed: reason, status), as checked.
        const byCode = Object.prototype.hasOwnProperty.call(CODE_FIELDS.error, env.code) ? CODE_FIELDS.error[env.code] : {};
        for (const key of Object.keys(byCode)) extra[key] = env[key];
        this._fail(new PtyError(env.code, env.message, { ...extra, fromSupervisor: true }));
        return;
      }
    }
  }

  _onClose() {
    if (this._terminal) return;
    if (this._raw.length > 0) {  // frames before the close are still held
      this._closeAfterRaw = true;
      if (this._socketError) this._decodeRaw();  // salvaged bytes: nobody else starts it
      return;
    }
    if (this._helperFailure) {
      this._fail(this._helperError());
      return;
    }
    if (this._socketError) {
      const e = this._socketError;
      this._fail(new PtyError('connection_error', `supervisor socket ${this._opts.socketPath}: ${socketErrorName(e)}`, { cause: e }));
      return;
    }
    if (this._helper) {  // helper still running: its exit decides
      this._socketClosed = true;
      return;
    }
    this._fail(new PtyError('connection_closed', `the supervisor closed the connection (state ${this.state})`));
  }

  _onDrain() {
    if (this._needDrain && this._queuedInputBytes() < limits.inputHighWaterMark) {
      this._needDrain = false;
      this._on.drain.emit();
    }
  }

  // ---- delivery and flow control ----

  _scheduleDeliver() {
    if (this._deliverScheduled) return;
    this._deliverScheduled = true;
    setImmediate(() => {
      this._deliverScheduled = false;
      this._deliver();
    });
  }

  _deliver() {
    while (this._buffered.length > 0 && !this._paused && this._on.data.size > 0) {
      const chunk = this._buffered.shift();
      this._bufferedBytes -= chunk.length;
      this._cursor += chunk.length;  // before the listeners run: they may read it
      if (this._text) {
        const s = this._text.write(chunk);
        if (s.length > 0) this._on.data.emit(s);
      } else {
        this._on.data.emit(chunk);
      }
    }
    if (this._raw.length > 0 && this._bufferedBytes < limits.maxBufferedOutputBytes) this._decodeRaw();
    if (this._exited && this._bufferedBytes === 0) this._flushText();  // a late listener took the rest
    this._updateFlow();
    this._maybeExit();
  }

  // The decoder's incomplete tail (a split character, a base64 group), once,
  // to the data listeners.
  _flushText() {
    if (!this._text || this._textDone) return;
    this._textDone = true;
    const rest = this._text.end();
    if (rest.length > 0) this._on.data.emit(rest);
  }

  _updateFlow() {
    if (this._terminal) return;
    const read = this._reading && (this._helperFailure !== null || this._destroying ||
      (!this._paused && this._raw.length === 0 && this._bufferedBytes < limits.maxBufferedOutputBytes));
    if (!this._socket) return;
    if (read) this._socket.resume();
    else this._socket.pause();
  }

  // ---- writing ----

  // True once the session has ended or can no longer be written to (its
  // terminal event is known, the handshake failed, or a write failed):
  // write/kill/stop/end then do nothing, as node-pty's do on a finished PTY.
  _ended() {
    return this._terminal !== null || this._helperFailure !== null || this._socketError !== null;
  }

  _queuedInputBytes() {
    return this._outboxBytes + (this._socket ? this._socket.writableLength : 0);
  }

  _send(frame) {
    if (this._socketError) return;
    if (this._reading && !this._holdSends) {
      this._socket.write(frame);
    } else {
      this._outbox.push(frame);
      this._outboxBytes += frame.length;
    }
  }

  // ---- ending ----

  _fail(error) {
    if (this._terminal) return;
    this._terminal = { exitCode: null, signal: null, result: null, exact: false, error };
    this._teardown();
    this._maybeExit();
  }

  _teardown() {
    clearTimeout(this._timer);
    this._timer = null;
    clearTimeout(this._destroyTimer);
    this._destroyTimer = null;
    clearTimeout(this._destroyStopTimer);
    this._destroyStopTimer = null;
    this._closeDirFd();
    if (this._helper) {
      this._helper.kill('SIGKILL');
      this._helper = null;
    }
    this._outbox = [];
    this._outboxBytes = 0;
    this._releaseSlot();
    if (this._socket) this._socket.destroy();
  }

  // onExit fires once the session ended. While a data listener is registered
  // it waits until every held OUTPUT byte reached it (paused: until resume()
  // or close()). Without a data listener it fires at once, as node-pty's
  // does, and the held output stays for a listener attached later (or is
  // dropped by close()).
  _maybeExit() {
    if (!this._terminal || this._exited) return;
    if (this._attach && this._attach.reject) {  // ended before `attached`: attach() rejects
      const { reject } = this._attach;
      this._attach.resolve = this._attach.reject = null;
      reject(this._terminal.error || new PtyError('protocol_state', 'the attach ended before `attached`'));
    }
    if (this._bufferedBytes > 0 && this._on.data.size > 0) return;
    this._exited = true;
    this.state = 'exited';
    if (this._bufferedBytes === 0) this._flushText();
    const t = this._terminal;
    if (t.error && t.error.code !== 'closed') this._on.error.emit(t.error);
    this._on.exit.emit({ exitCode: t.exitCode, signal: t.signal, result: t.result, exact: t.exact, error: t.error });
  }
}

module.exports = { Pty };
