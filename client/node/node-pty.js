'use strict';
// The node-pty drop-in entry of the opencode-pty Node module:
// require('@opencode-pty/node/node-pty') gives node-pty 1.1's spawn() and
// IPty over the strict entry (index.js), so that code written for node-pty
// (opencode's PTY adapter) runs by changing only the package name. README.md,
// "Two entries", says member by member where it differs from index.js.
// Invariants, each where node-pty's users rely on it:
// - pid is a number from spawn() on: 0 until the command's pid is known.
// - onExit always fires, once, with a non-negative exitCode; a command killed
//   by signal n is 128 + n with signal n (never 0); a session that ended
//   without an exit report is 1, and its error went to onError first.
// - write(), resize() and kill() never throw on the data path: a failure goes
//   to onError and that call's data is dropped (node-pty drops writes to a
//   dead PTY the same way).
// - Output always flows: with no data listener it is held up to
//   limits.maxBufferedOutputBytes for a listener that comes later, and
//   delivered to nobody past that, so a command that prints much and is never
//   read still exits (node-pty's behaviour).
// - The application's env reaches the command (and only the command) as an
//   overlay over the launcher's fixed environment; it travels on the private
//   connection, never in argv or the unit (docs/SECURITY.md).

const fs = require('fs');
const os = require('os');
const core = require('./index.js');

const { limits, PtyError } = core;
const { chunkUtf8 } = core.protocol;

// node-pty's defaults (its unixTerminal.ts): TERM from `name`, else the
// environment's own TERM, else this.
const DEFAULT_NAME = 'xterm';
// Input held here while the module's own input queue (limits.maxQueuedInputBytes)
// is full: a paste that the command has not read yet. Beyond it a write is
// dropped and reported (node-pty would grow its socket's queue without bound).
const MAX_PENDING_INPUT_BYTES = 8 * 1024 * 1024;
// The exit code of a session that ended without the command's own report (the
// supervisor refused it, the connection broke): a shell's general failure.
const FAILED_EXIT_CODE = 1;
// The terminal device of a UNIX98 pty slave: majors 136..143, 256 minors each
// (Linux Documentation/admin-guide/devices.txt).
const PTS_MAJOR_FIRST = 136;
const PTS_MAJOR_LAST = 143;

// The controlling terminal of `pid` from /proc/<pid>/stat (field 7, tty_nr;
// readable by every user), as /dev/pts/N; undefined when it is not a pty slave
// or the process is gone.
function ptsNameOf(pid) {
  let stat;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const tty = Number(fields[4]);  // state ppid pgrp session tty_nr
  if (!Number.isInteger(tty) || tty <= 0) return undefined;
  const major = (tty >> 8) & 0xfff;
  const minor = (tty & 0xff) | ((tty >> 12) & 0xfff00);
  if (major < PTS_MAJOR_FIRST || major > PTS_MAJOR_LAST) return undefined;
  return `/dev/pts/${(major - PTS_MAJOR_FIRST) * 256 + minor}`;
}

// The number of a signal name of the exit envelope ("TERM", or "34" for one
// without a name); undefined for a name this platform has no number for.
function signalNumberOf(name) {
  if (/^[0-9]+$/.test(name)) return Number(name);
  const n = os.constants.signals['SIG' + name];
  return Number.isInteger(n) ? n : undefined;
}

// A name the supervisor can pass (common/env_overlay.h ValidEnvName).
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

// node-pty's env: any object; entries whose value is undefined are left out
// (its IBasePtyForkOptions allows them), every other value must be a string.
// A name no shell could use (process.env may hold one, e.g. "a-b") is left
// out as a shell leaves it out of its own variables.
function overlayOf(env, name) {
  const overlay = {};
  for (const key of Object.keys(env)) {
    const value = env[key];
    if (value === undefined || !ENV_NAME.test(key) || key.length > limits.maxEnvNameBytes) continue;
    if (typeof value !== 'string') {
      throw new TypeError(`spawn: env.${key} must be a string, not ${typeof value}`);
    }
    overlay[key] = value;
  }
  overlay.TERM = name !== undefined ? name : (overlay.TERM !== undefined ? overlay.TERM : DEFAULT_NAME);
  return overlay;
}

// Listeners with node-pty's IEvent shape; a listener's exception surfaces on
// the next tick like the strict entry's, never inside the module.
class Emitter {
  constructor(onChange) {
    this._fns = [];
    this._onChange = onChange || (() => {});
    this.event = (fn) => {
      if (typeof fn !== 'function') throw new TypeError('listener must be a function');
      const entry = { fn };
      this._fns.push(entry);
      this._onChange();
      return {
        dispose: () => {
          const i = this._fns.indexOf(entry);
          if (i >= 0) {
            this._fns.splice(i, 1);
            this._onChange();
          }
        },
      };
    };
  }
  get size() { return this._fns.length; }
  fire(value) {
    for (const { fn } of this._fns.slice()) {
      try {
        fn(value);
      } catch (e) {
        process.nextTick(() => { throw e; });
      }
    }
  }
}

class NodePty {
  constructor(file, args, options) {
    const opts = options || {};
    if (opts.uid !== undefined || opts.gid !== undefined) {
      throw new PtyError('not_supported', 'spawn: uid/gid are not supported: the command runs as this process\'s user');
    }
    const env = opts.env !== undefined ? opts.env : process.env;
    if (env === null || typeof env !== 'object') throw new TypeError('spawn: env must be an object');
    this._flowPause = opts.flowControlPause !== undefined ? opts.flowControlPause : '\x13';
    this._flowResume = opts.flowControlResume !== undefined ? opts.flowControlResume : '\x11';
    this.handleFlowControl = Boolean(opts.handleFlowControl);
    this._data = new Emitter(() => this._deliverHeld());
    this._exit = new Emitter();
    this._error = new Emitter();
    this._held = [];
    this._heldBytes = 0;
    this._droppedBytes = 0;
    this._pending = [];
    this._pendingBytes = 0;
    this._ptsName = undefined;
    this._exitEvent = null;

    this._pty = core.spawn(file, args, {
      cwd: opts.cwd !== undefined ? opts.cwd : process.cwd(),
      cols: opts.cols,
      rows: opts.rows,
      encoding: opts.encoding === undefined ? 'utf8' : opts.encoding,
      extraEnv: overlayOf(env, opts.name),
      socketPath: opts.socketPath,
      helperPath: opts.helperPath,
    });
    this._pty.onData((chunk) => this._onOutput(chunk));
    this._pty.onError((e) => this._error.fire(e));
    this._pty.onDrain(() => this._flushPending());
    this._pty.onNotice((n) => {
      if (n.code === 'command_started') this._ptsName = ptsNameOf(n.pid);
    });
    this._pty.onExit((ev) => this._onExit(ev));

    this.onData = this._data.event;
    this.onExit = this._exit.event;
    this.onError = this._error.event;
  }

  get pid() { return this._pty.pid === undefined ? 0 : this._pty.pid; }
  get cols() { return this._pty.cols; }
  get rows() { return this._pty.rows; }
  get process() { return this._pty.process; }
  // /dev/pts/N of the command's controlling terminal, once its pid is known.
  get ptsName() { return this._ptsName; }
  // Output bytes (or characters) that nobody took because no data listener
  // was registered and the hold bound was reached.
  get droppedOutput() { return this._droppedBytes; }
  // The strict entry's object, for what node-pty has no word for (stop(),
  // the started envelope, notices).
  get session() { return this._pty; }

  _onOutput(chunk) {
    if (this._data.size > 0) return this._data.fire(chunk);
    if (this._heldBytes >= limits.maxBufferedOutputBytes) {
      this._droppedBytes += chunk.length;
      return;
    }
    this._held.push(chunk);
    this._heldBytes += chunk.length;
  }

  _deliverHeld() {
    if (this._data.size === 0 || this._held.length === 0 || this._deliverScheduled) return;
    this._deliverScheduled = true;
    setImmediate(() => {
      this._deliverScheduled = false;
      while (this._held.length > 0 && this._data.size > 0) {
        const chunk = this._held.shift();
        this._heldBytes -= chunk.length;
        this._data.fire(chunk);
      }
    });
  }

  _onExit(ev) {
    let exitCode = FAILED_EXIT_CODE;
    let signal = 0;
    if (ev.exitCode !== null) {
      exitCode = ev.exitCode;
    } else if (ev.signal !== null && signalNumberOf(ev.signal) !== undefined) {
      signal = signalNumberOf(ev.signal);
      exitCode = 128 + signal;
    }
    this._pending = [];
    this._pendingBytes = 0;
    this._exitEvent = { exitCode, signal };
    this._exit.fire(this._exitEvent);
  }

  _report(e) {
    this._error.fire(e instanceof PtyError ? e : new PtyError('write_failed', String(e && e.message), { cause: e }));
  }

  // Strings go as UTF-8 (a lone surrogate becomes U+FFFD, as Buffer.from and
  // node-pty's socket write make it); bytes that are not UTF-8 likewise.
  write(data) {
    if (this._exitEvent) return;
    if (this.handleFlowControl && typeof data === 'string') {
      if (data === this._flowPause) return this.pause();
      if (data === this._flowResume) return this.resume();
    }
    let bytes;
    if (typeof data === 'string') {
      bytes = Buffer.from(data, 'utf8');
    } else if (data instanceof Uint8Array) {
      bytes = Buffer.from(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'), 'utf8');
    } else {
      return this._report(new PtyError('bad_input', 'write: data must be a string or a Uint8Array'));
    }
    if (bytes.length === 0) return;
    if (this._pendingBytes + bytes.length > MAX_PENDING_INPUT_BYTES) {
      return this._report(new PtyError('input_queue_full',
        `write: ${bytes.length} bytes dropped: ${this._pendingBytes} bytes of input wait for the command to read`));
    }
    for (const c of chunkUtf8(bytes, limits.maxWriteBytes)) {
      this._pending.push(c);
      this._pendingBytes += c.length;
    }
    this._flushPending();
  }

  _flushPending() {
    while (this._pending.length > 0) {
      const c = this._pending[0];
      try {
        this._pty.write(c);
      } catch (e) {
        if (e instanceof PtyError && e.code === 'input_queue_full') return;  // onDrain resumes
        this._pending = [];
        this._pendingBytes = 0;
        return this._report(e);
      }
      this._pending.shift();
      this._pendingBytes -= c.length;
    }
  }

  resize(columns, rows) {
    try {
      this._pty.resize(columns, rows);
    } catch (e) {
      if (!(e instanceof PtyError && e.code === 'closed')) this._report(e);
    }
  }

  // node-pty's default: SIGHUP. The command's exit then reports it (129).
  kill(signal) {
    try {
      this._pty.kill(signal === undefined ? 'SIGHUP' : signal);
    } catch (e) {
      this._report(e);
    }
  }

  pause() { this._pty.pause(); }
  resume() { this._pty.resume(); }
  // node-pty: Windows only.
  clear() {}
}

function spawn(file, args, options) {
  if (typeof args === 'string') {
    throw new TypeError('spawn: args as one string is node-pty\'s Windows form; pass an array');
  }
  return new NodePty(file, args === undefined ? [] : args, options);
}

module.exports = { spawn, PtyError, limits };
