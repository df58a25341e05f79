'use strict';
// Node client of the opencode-pty supervisor: a node-pty-shaped API over the
// session protocol (docs/PROTOCOL.md, version 1). Owns one connection and one
// directory descriptor per PTY, the strict frame and envelope decoders, and the
// output buffer held for the application.
// Invariants: the socket and the directory fd are close-on-exec in this process
// and reach exactly one child, the fixed helper, as its fd 3 and fd 4; nothing is
// written to the socket before the helper exited 0; every buffer has a bound
// (output held for the application, input not yet sent), and output that cannot
// be delivered stops reading the socket instead of being dropped.

const childProcess = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const { StringDecoder } = require('string_decoder');

const DEFAULT_SOCKET_PATH = '/run/opencode-pty/supervisor.sock';
const DEFAULT_HELPER_PATH = '/usr/local/libexec/opencode-pty-client';

// Bounds of the wire format mirror common/limits.h; the module's own bounds
// (the last group) are documented in README.md.
const limits = Object.freeze({
  frameHeaderBytes: 8,
  maxInputPayload: 16 * 1024,
  maxOutputPayload: 64 * 1024,
  maxEnvelopeBytes: 4 * 1024,
  maxStartPayload: 12 + 4 * 1024 + 64 * 1024,
  maxArgs: 1024,
  maxArgBytes: 32 * 1024,
  maxArgvTotalBytes: 64 * 1024,
  maxCols: 1000,
  maxRows: 1000,
  defaultCols: 80,
  defaultRows: 24,
  // The supervisor's admission caps (error codes too_many_sessions and
  // too_many_handshakes). The module keeps at most maxPendingHandshakes of
  // its own sessions per socket between connect and `started`; further
  // spawns wait their turn (state 'connecting'). maxSessions is not queued:
  // beyond it the supervisor refuses with too_many_sessions.
  // maxPendingHandshakes is the supervisor's kHandshakePressure (half of its
  // kMaxPendingHandshakes, 16): another same-UID process that connects in a
  // loop can hold only the slots below that mark, so this many of ours always
  // get in.
  maxSessions: 1024,
  maxPendingHandshakes: 8,
  // Output held for the application while it has no data listener or is
  // paused. When reached, decoding stops and the socket is no longer read, so
  // the supervisor's queue fills and it stops reading the PTY: the command
  // blocks, nothing is dropped. The OUTPUT frame that crosses it (at most
  // 64 KiB) lands on top of it.
  maxBufferedOutputBytes: 1024 * 1024,
  // Largest single write() and the most input that may wait unsent in this
  // process (frames not yet taken by the kernel); beyond it write() throws.
  maxWriteBytes: 1024 * 1024,
  // (plus the 64 frame headers of one maximal write)
  maxQueuedInputBytes: 1024 * 1024 + 64 * 8,
  // write() returns false above this much unsent input (like a stream's
  // highWaterMark); onDrain fires when it has been sent.
  inputHighWaterMark: 64 * 1024,
  // The helper sends one frame and exits: it has this long before it is killed.
  helperTimeoutMs: 10 * 1000,
  // After a helper failure, how long to wait for the supervisor's error
  // envelope that explains it.
  helperFailureGraceMs: 1000,
  // Helper stderr kept for error messages.
  maxHelperStderrBytes: 4 * 1024,
  // destroy() waits this long for the terminal envelope after its SIGNAL HUP
  // and STOP, then drops the connection (error destroy_timeout). The SIGNAL
  // is handed to the unit channel at once (no bus call); after the STOP the
  // unit is finished within kStopRequestDeadlineUsec (20 s, else stop_failed),
  // proven gone within kCleanupDeadlineUsec (15 s) and its PTY stream ends
  // within kStreamEofDeadlineUsec (5 s) before the exit is sent: 40 s, plus
  // 5 s of margin.
  destroyTimeoutMs: 45 * 1000,
  // destroy() sends STOP only if the command has not ended this long after
  // its SIGHUP: a STOP right behind the SIGNAL raced it (systemd's TERM often
  // reached the command first, measured: 7 ms), and node-pty's destroy()
  // reports the HUP. A command that ignores HUP is stopped after it.
  destroyHupGraceMs: 500,
  // Largest pid Linux can hand out (PID_MAX_LIMIT on 64-bit, 2^22): a
  // command_started notice with a pid above it is refused as bad_field.
  maxPid: 4 * 1024 * 1024,
});

const FrameType = Object.freeze({
  START: 0x01, INPUT: 0x02, SIGNAL: 0x03, STOP: 0x04, EOF: 0x05, RESIZE: 0x06,
  OUTPUT: 0x81, EVENT: 0x82,
});

// [min, max] payload bytes per type and direction (docs/PROTOCOL.md section 2).
const BOUNDS = Object.freeze({
  fromClient: new Map([
    [FrameType.START, [12, limits.maxStartPayload]],
    [FrameType.INPUT, [1, limits.maxInputPayload]],
    [FrameType.SIGNAL, [1, 1]],
    [FrameType.STOP, [0, 0]],
    [FrameType.EOF, [0, 0]],
    [FrameType.RESIZE, [4, 4]],
  ]),
  fromSupervisor: new Map([
    [FrameType.OUTPUT, [1, limits.maxOutputPayload]],
    [FrameType.EVENT, [2, limits.maxEnvelopeBytes]],
  ]),
});

// The signal allowlist of docs/PROTOCOL.md section 5.
const SIGNALS = Object.freeze({
  HUP: 1, INT: 2, QUIT: 3, KILL: 9, USR1: 10, USR2: 12, TERM: 15,
  CONT: 18, STOP: 19, TSTP: 20, WINCH: 28,
});

// Exit statuses of /usr/local/libexec/opencode-pty-client (client/main.cc,
// docs/PROTOCOL.md section 9) by name; any other status is "unknown".
const HELPER_STATUS = Object.freeze({
  10: 'socket_missing', 11: 'not_socket', 12: 'socket_family', 13: 'socket_type',
  14: 'not_connected', 15: 'dir_missing', 16: 'not_directory', 17: 'cloexec',
  18: 'extra_fd', 19: 'fd_audit', 20: 'usage', 21: 'bad_size', 22: 'argc',
  23: 'arg_too_long', 24: 'argv_too_long', 25: 'empty_command', 26: 'encode',
  27: 'peer_closed', 28: 'send',
});

class PtyError extends Error {
  constructor(code, message, extra) {
    super(message);
    this.name = 'PtyError';
    this.code = code;
    if (extra) Object.assign(this, extra);
  }
}

// ---------------------------------------------------------------- frames ----

function encodeFrame(type, payload) {
  const body = payload === undefined ? Buffer.alloc(0) : Buffer.from(payload);
  const frame = Buffer.allocUnsafe(limits.frameHeaderBytes + body.length);
  frame[0] = 1;
  frame[1] = type;
  frame[2] = 0;
  frame[3] = 0;
  frame.writeUInt32BE(body.length, 4);
  body.copy(frame, limits.frameHeaderBytes);
  return frame;
}

// Incremental strict decoder. push() calls onFrame(type, payload) for every
// complete frame and returns null, or returns an error code as soon as the
// offending header byte has arrived; after an error it refuses everything.
// A payload is never buffered beyond its type's maximum.
class FrameDecoder {
  constructor(direction) {
    if (direction !== 'fromClient' && direction !== 'fromSupervisor') {
      throw new TypeError('direction must be "fromClient" or "fromSupervisor"');
    }
    this._bounds = BOUNDS[direction];
    this._header = Buffer.alloc(limits.frameHeaderBytes);
    this._headerFill = 0;
    this._payload = null;
    this._payloadFill = 0;
    this.rest = null;
    this.error = null;
  }

  get idle() { return this._headerFill === 0 && this._payload === null; }

  // Decodes `chunk`, calling onFrame(type, payload) per complete frame. If
  // onFrame returns true, decoding stops after that frame and the undecoded
  // remainder of the chunk is left in `this.rest` (null otherwise) for the
  // caller to push later. Returns null or a stable error code.
  push(chunk, onFrame) {
    this.rest = null;
    if (this.error) return this.error;
    let i = 0;
    const stop = () => {
      if (i < chunk.length) this.rest = chunk.subarray(i);
      return null;
    };
    while (i < chunk.length) {
      if (this._payload === null) {
        const byte = chunk[i++];
        const at = this._headerFill;
        this._header[this._headerFill++] = byte;
        if (at === 0 && byte !== 1) return this._fail('bad_version');
        if (at === 1 && !this._bounds.has(byte)) return this._fail('unknown_type');
        if ((at === 2 || at === 3) && byte !== 0) return this._fail('bad_reserved');
        if (this._headerFill < limits.frameHeaderBytes) continue;
        const type = this._header[1];
        const length = this._header.readUInt32BE(4);
        const [min, max] = this._bounds.get(type);
        if (length > max) return this._fail('frame_too_large');
        if (length < min) return this._fail('frame_too_small');
        this._headerFill = 0;
        if (length === 0) {
          if (onFrame(type, Buffer.alloc(0)) === true) return stop();
          continue;
        }
        if (chunk.length - i >= length) {  // whole payload in this chunk: no copy
          const payload = chunk.subarray(i, i + length);
          i += length;
          if (onFrame(type, payload) === true) return stop();
          continue;
        }
        this._payload = Buffer.allocUnsafe(length);
        this._payloadFill = 0;
        this._payloadType = type;
      }
      const n = Math.min(this._payload.length - this._payloadFill, chunk.length - i);
      chunk.copy(this._payload, this._payloadFill, i, i + n);
      this._payloadFill += n;
      i += n;
      if (this._payloadFill === this._payload.length) {
        const payload = this._payload;
        this._payload = null;
        if (onFrame(this._payloadType, payload) === true) return stop();
      }
    }
    return null;
  }

  _fail(code) {
    this.error = code;
    this._payload = null;
    return code;
  }
}

// ------------------------------------------------------------- envelopes ----

const utf8Fatal = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function isValidUtf8(bytes) {
  try {
    utf8Fatal.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

// Strict parser of the one JSON shape envelopes have: a flat object whose
// values are strings, integers, true/false or null; no nesting, no duplicate
// keys, nothing after the closing brace (docs/PROTOCOL.md section 4).
function parseFlatJson(text) {
  let i = 0;
  const fail = (why) => { throw new PtyError('bad_json', `envelope is not a flat JSON object: ${why}`); };
  const ws = () => {
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      i++;
    }
  };
  const string = () => {
    if (text[i] !== '"') fail('expected a string');
    i++;
    let out = '';
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const c = text.charCodeAt(i++);
      if (c === 0x22) return out;
      if (c < 0x20) fail('control character in string');
      if (c >= 0xd800 && c <= 0xdfff) {  // only as a pair (the text came from valid UTF-8)
        out += text[i - 1] + text[i++];
        continue;
      }
      if (c !== 0x5c) { out += text[i - 1]; continue; }
      const e = text[i++];
      const simple = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' }[e];
      if (simple !== undefined) { out += simple; continue; }
      if (e !== 'u') fail('bad escape');
      const unit = () => {
        const hex = text.slice(i, i + 4);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('bad \\u escape');
        i += 4;
        return parseInt(hex, 16);
      };
      const u = unit();
      if (u >= 0xdc00 && u <= 0xdfff) fail('lone surrogate escape');
      if (u >= 0xd800 && u <= 0xdbff) {
        if (text[i] !== '\\' || text[i + 1] !== 'u') fail('lone surrogate escape');
        i += 2;
        const low = unit();
        if (low < 0xdc00 || low > 0xdfff) fail('lone surrogate escape');
        out += String.fromCharCode(u, low);
      } else {
        out += String.fromCharCode(u);
      }
    }
  };
  const value = () => {
    const c = text[i];
    if (c === '"') return string();
    if (c === '{' || c === '[') fail('nested value');
    for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(word, i)) { i += word.length; return v; }
    }
    const m = /^-?(?:0|[1-9][0-9]*)/.exec(text.slice(i, i + 32));
    if (!m) fail('unexpected value');
    i += m[0].length;
    if (/[.eE0-9]/.test(text[i] || '')) fail('only integers are allowed');
    const n = Number(m[0]);
    if (!Number.isSafeInteger(n)) fail('integer out of range');
    return n;
  };
  const obj = Object.create(null);
  ws();
  if (text[i++] !== '{') fail('expected {');
  ws();
  if (text[i] === '}') {
    i++;
  } else {
    for (;;) {
      ws();
      const key = string();
      if (Object.prototype.hasOwnProperty.call(obj, key)) fail(`duplicate key "${key}"`);
      ws();
      if (text[i++] !== ':') fail('expected :');
      ws();
      obj[key] = value();
      ws();
      const sep = text[i++];
      if (sep === ',') continue;
      if (sep === '}') break;
      fail('expected , or }');
    }
  }
  ws();
  if (i !== text.length) fail('bytes after the object');
  return obj;
}

const HEX = (n) => new RegExp(`^[0-9a-f]{${n}}$`);
// A signal name without "SIG" ("TERM", "SEGV"), or the number of a signal
// that has no name (the supervisor sends "34" for a real-time signal).
const SIGNAL_NAME = /^(?:[A-Z][A-Z0-9]{0,15}|[1-9][0-9]?)$/;
const SNAKE = /^[a-z0-9_]{1,64}$/;
const ENVELOPE_FIELDS = Object.freeze({
  started: {
    session: (v) => typeof v === 'string' && HEX(32).test(v),
    unit: (v) => typeof v === 'string' && /^opencode-pty-[0-9a-f]{32}\.service$/.test(v),
    invocation: (v) => typeof v === 'string' && HEX(32).test(v),
    revision: (v) => typeof v === 'string' && HEX(40).test(v),
    source: (v) => typeof v === 'string' && HEX(64).test(v),
  },
  exit: {
    code: (v) => v === null || Number.isSafeInteger(v),
    signal: (v) => v === null || (typeof v === 'string' && SIGNAL_NAME.test(v)),
  },
  error: {
    code: (v) => typeof v === 'string' && SNAKE.test(v),
    message: (v) => typeof v === 'string',
  },
  notice: {
    code: (v) => typeof v === 'string' && SNAKE.test(v),
  },
});
// Keys checked only when present (a supervisor before issue 20 sends no `exact`).
const OPTIONAL_FIELDS = Object.freeze({
  exit: { exact: (v) => typeof v === 'boolean' },
});
// Keys that one `code` of a type requires on top of the type's own.
const CODE_FIELDS = Object.freeze({
  notice: {
    command_started: { pid: (v) => Number.isSafeInteger(v) && v >= 1 && v <= limits.maxPid },
  },
  error: {
    launch_failed: {
      reason: (v) => typeof v === 'string' && SNAKE.test(v),
      status: (v) => Number.isSafeInteger(v) && v >= 0 && v <= 255,
    },
  },
});

// Parses and checks one EVENT payload; throws PtyError bad_json, missing_field
// or bad_field. Unknown keys are kept (clients must ignore them).
function parseEnvelope(bytes) {
  if (bytes.length > limits.maxEnvelopeBytes) {
    throw new PtyError('frame_too_large', 'envelope above 4096 bytes');
  }
  let text;
  try {
    text = utf8Fatal.decode(bytes);
  } catch {
    throw new PtyError('bad_json', 'envelope is not valid UTF-8');
  }
  const env = parseFlatJson(text);
  if (!('type' in env)) throw new PtyError('missing_field', 'envelope without "type"');
  const rules = typeof env.type === 'string' ? ENVELOPE_FIELDS[env.type] : undefined;
  if (!rules) throw new PtyError('bad_field', `unknown envelope type ${JSON.stringify(env.type)}`);
  const check = (what, key, ok, required) => {
    if (!(key in env)) {
      if (required) throw new PtyError('missing_field', `${what} envelope without "${key}"`);
      return;
    }
    if (!ok(env[key])) throw new PtyError('bad_field', `${what} envelope has a bad "${key}"`);
  };
  for (const [key, ok] of Object.entries(rules)) check(env.type, key, ok, true);
  for (const [key, ok] of Object.entries(OPTIONAL_FIELDS[env.type] || {})) check(env.type, key, ok, false);
  const byCode = CODE_FIELDS[env.type] && Object.prototype.hasOwnProperty.call(CODE_FIELDS[env.type], env.code)
    ? CODE_FIELDS[env.type][env.code] : {};
  for (const [key, ok] of Object.entries(byCode)) check(`${env.type} ${env.code}`, key, ok, true);
  // An exact status is the command's wait status: it exited (a code, no
  // signal) or a signal killed it (a signal, no code), never both or neither.
  if (env.type === 'exit' && env.exact === true && (env.code === null) === (env.signal === null)) {
    throw new PtyError('bad_field', 'exit envelope with exact true must carry either a code or a signal');
  }
  return env;
}

// ----------------------------------------------------------------- input ----

// Lone surrogates cannot be encoded as UTF-8; Buffer.from would silently
// replace them with U+FFFD, so they are refused instead.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function inputBytes(data) {
  if (typeof data === 'string') {
    if (LONE_SURROGATE.test(data)) {
      throw new PtyError('bad_utf8', 'write: string contains a lone surrogate (not encodable as UTF-8)');
    }
    return Buffer.from(data, 'utf8');
  }
  if (data instanceof Uint8Array) {
    // A copy: what is checked is what is sent, whatever the caller does with
    // its buffer after write() returned.
    const copy = Buffer.from(data);
    if (!isValidUtf8(copy)) throw new PtyError('bad_utf8', 'write: bytes are not valid UTF-8');
    return copy;
  }
  throw new TypeError('write: data must be a string, Buffer or Uint8Array');
}

// Splits valid UTF-8 into INPUT payloads of at most maxInputPayload bytes, each
// cut on a character boundary so that every frame is valid UTF-8 on its own.
function chunkUtf8(bytes, max = limits.maxInputPayload) {
  const chunks = [];
  let start = 0;
  while (start < bytes.length) {
    let end = Math.min(start + max, bytes.length);
    while (end < bytes.length && (bytes[end] & 0xc0) === 0x80) end--;
    chunks.push(bytes.subarray(start, end));
    start = end;
  }
  return chunks;
}

// The number node-pty's 'exit' event passes for a signal name: 0 when no
// signal ended the command (node-pty passes 0 then too), else this platform's
// number ("TERM" → 15; "34" → 34), undefined for a name it has no number for.
function exitSignalNumber(name) {
  if (name === null) return 0;
  if (/^[0-9]+$/.test(name)) return Number(name);
  const key = 'SIG' + name;
  return Object.prototype.hasOwnProperty.call(os.constants.signals, key) ? os.constants.signals[key] : undefined;
}

// node-pty's older EventEmitter form is offered for these events only.
const COMPAT_EVENTS = new Set(['data', 'exit']);
function compatEvent(event) {
  if (!COMPAT_EVENTS.has(event)) {
    throw new TypeError(`on: event must be "data" or "exit" (node-pty's events), got ${JSON.stringify(event)}; see onError, onStarted, onNotice, onDrain`);
  }
  return event;
}

function signalNumber(signal) {
  if (typeof signal !== 'string') throw new TypeError('kill: signal must be a name such as "SIGTERM"');
  const name = signal.startsWith('SIG') ? signal.slice(3) : signal;
  if (!Object.prototype.hasOwnProperty.call(SIGNALS, name)) {
    throw new PtyError('bad_signal', `kill: ${signal} is not allowed (allowed: ${Object.keys(SIGNALS).map((s) => 'SIG' + s).join(', ')})`);
  }
  return SIGNALS[name];
}

// --------------------------------------------------------------- options ----

const KNOWN_OPTIONS = new Set(['cwd', 'cols', 'rows', 'env', 'name', 'encoding', 'handleFlowControl',
  'useConpty', 'useConptyDll', 'conptyInheritCursor', 'socketPath', 'helperPath']);
// node-pty options that only mean something on Windows; node-pty ignores them
// on Linux and so does this module.
const WINDOWS_ONLY_OPTIONS = ['useConpty', 'useConptyDll', 'conptyInheritCursor'];
// The terminal type the launcher sets (launcher/main.cc kTerm); node-pty's
// `name` is accepted when it asks for exactly this one.
const FIXED_TERM = 'xterm-256color';

function checkSize(name, v, def, max) {
  if (v === undefined) return def;
  if (!Number.isInteger(v) || v < 1 || v > max) {
    throw new PtyError('bad_size', `${name} must be an integer in 1..${max}, got ${v}`);
  }
  return v;
}

// resize(cols, rows): the same rule as spawn's cols/rows, but both required.
function checkResize(name, v, max) {
  if (!Number.isInteger(v) || v < 1 || v > max) {
    throw new PtyError('bad_size', `resize: ${name} must be an integer in 1..${max}, got ${v}`);
  }
  return v;
}

function resizePayload(cols, rows) {
  const p = Buffer.alloc(4);
  p.writeUInt16BE(cols, 0);
  p.writeUInt16BE(rows, 2);
  return p;
}

function checkArgv(file, args) {
  if (typeof file !== 'string' || file.length === 0) {
    throw new PtyError('empty_command', 'spawn: file must be a non-empty string');
  }
  if (args === undefined) args = [];
  if (typeof args === 'string') {
    throw new TypeError('spawn: args must be an array of strings (a single command-line string is not split)');
  }
  if (!Array.isArray(args)) throw new TypeError('spawn: args must be an array of strings');
  const argv = [file, ...args];
  if (argv.length > limits.maxArgs) {
    throw new PtyError('bad_argc', `spawn: at most ${limits.maxArgs} argv elements, got ${argv.length}`);
  }
  let total = 0;
  for (const a of argv) {
    if (typeof a !== 'string') throw new TypeError('spawn: every argument must be a string');
    if (a.includes('\0')) throw new PtyError('bad_start', 'spawn: an argument contains NUL');
    if (LONE_SURROGATE.test(a)) throw new PtyError('bad_start', 'spawn: an argument contains a lone surrogate');
    const n = Buffer.byteLength(a, 'utf8');
    if (n > limits.maxArgBytes) {
      throw new PtyError('arg_too_long', `spawn: an argument is ${n} bytes (max ${limits.maxArgBytes})`);
    }
    total += n;
  }
  if (total > limits.maxArgvTotalBytes) {
    throw new PtyError('argv_too_long', `spawn: arguments total ${total} bytes (max ${limits.maxArgvTotalBytes})`);
  }
  return args.slice();
}

function checkOptions(options) {
  const o = options === undefined ? {} : options;
  if (o === null || typeof o !== 'object') throw new TypeError('spawn: options must be an object');
  for (const key of Object.keys(o)) {
    if (!KNOWN_OPTIONS.has(key)) throw new TypeError(`spawn: unknown option "${key}"`);
  }
  if (o.name !== undefined && o.name !== FIXED_TERM) {
    throw new PtyError('env_fixed',
      `spawn: option "name" must be absent or "${FIXED_TERM}": TERM is fixed by the launcher, got ${JSON.stringify(o.name)}`);
  }
  // process.env itself is node-pty's default ("the environment of this
  // process") and is accepted: the command gets the fixed allowlist instead,
  // never this process's variables. An object that sets anything else is
  // refused rather than silently dropped.
  if (o.env !== undefined && o.env !== process.env &&
      (o.env === null || typeof o.env !== 'object' || Object.keys(o.env).length > 0)) {
    throw new PtyError('env_fixed',
      'spawn: option "env" must be absent, {} or process.env: the PTY environment is a fixed allowlist set by the launcher');
  }
  if (o.handleFlowControl !== undefined && o.handleFlowControl !== false) {
    throw new PtyError('not_supported',
      'spawn: handleFlowControl is not supported: XON/XOFF written by the application reach the terminal as input; use pause()/resume()');
  }
  for (const key of WINDOWS_ONLY_OPTIONS) {
    if (o[key] !== undefined && typeof o[key] !== 'boolean') throw new TypeError(`spawn: ${key} must be a boolean`);
  }
  // Any encoding Buffer knows, decoded by a StringDecoder over the whole
  // stream (as node-pty's socket.setEncoding does); null: Buffers.
  if (o.encoding !== undefined && o.encoding !== null &&
      (typeof o.encoding !== 'string' || !Buffer.isEncoding(o.encoding))) {
    throw new TypeError(`spawn: encoding must be a Buffer encoding ("utf8", "latin1", "base64", ...) or null (Buffers), got ${JSON.stringify(o.encoding)}`);
  }
  const cwd = o.cwd === undefined ? process.cwd() : o.cwd;
  if (typeof cwd !== 'string' || cwd.length === 0 || cwd.includes('\0')) {
    throw new TypeError('spawn: cwd must be a non-empty path');
  }
  for (const key of ['socketPath', 'helperPath']) {
    if (o[key] !== undefined && (typeof o[key] !== 'string' || !o[key].startsWith('/'))) {
      throw new TypeError(`spawn: ${key} must be an absolute path`);
    }
  }
  return {
    cwd,
    cols: checkSize('cols', o.cols, limits.defaultCols, limits.maxCols),
    rows: checkSize('rows', o.rows, limits.defaultRows, limits.maxRows),
    encoding: o.encoding === undefined ? 'utf8' : o.encoding,
    socketPath: o.socketPath || DEFAULT_SOCKET_PATH,
    helperPath: o.helperPath || DEFAULT_HELPER_PATH,
  };
}

// ------------------------------------------------------------------- Pty ----

class Listeners {
  constructor() { this._list = []; }
  get size() { return this._list.length; }
  add(fn, owner) {
    if (typeof fn !== 'function') throw new TypeError('listener must be a function');
    const entry = { fn };
    this._list.push(entry);
    return {
      dispose: () => {
        const i = this._list.indexOf(entry);
        if (i >= 0) {
          this._list.splice(i, 1);
          if (owner) owner();
        }
      },
    };
  }
  // A listener's exception never unwinds into the module (the decoder, the
  // delivery loop, the order of onError and onExit): it is rethrown on the
  // next tick, where it is an uncaught exception like one from an
  // EventEmitter listener, and the remaining listeners still run.
  emit(value) {
    for (const { fn } of this._list.slice()) {
      try {
        fn(value);
      } catch (e) {
        process.nextTick(() => { throw e; });
      }
    }
  }
}

// Handshake admission per supervisor socket: the supervisor refuses a
// connection while kMaxPendingHandshakes others are between accept and their
// START frame. This process is the only one allowed to connect, so it keeps
// its own sessions under that cap: a session holds a slot from connect until
// its `started` envelope (or its end), and spawns beyond the cap wait here in
// spawn order instead of being refused.
class HandshakeGate {
  constructor() {
    this.active = 0;
    this.waiting = [];
  }
  // True: admitted now. False: queued; pty._admitted() runs when a slot frees.
  enter(pty) {
    if (this.active < limits.maxPendingHandshakes) {
      this.active++;
      return true;
    }
    this.waiting.push(pty);
    return false;
  }
  leave() {
    this.active--;
    while (this.active < limits.maxPendingHandshakes && this.waiting.length > 0) {
      this.active++;
      this.waiting.shift()._admitted();
    }
  }
  cancel(pty) {
    const i = this.waiting.indexOf(pty);
    if (i >= 0) this.waiting.splice(i, 1);
  }
}
const gates = new Map();  // socket path -> HandshakeGate (one per supervisor)
function gateFor(socketPath) {
  let g = gates.get(socketPath);
  if (!g) {
    g = new HandshakeGate();
    gates.set(socketPath, g);
  }
  return g;
}

// state: 'connecting' (waiting for a handshake slot, then connecting) →
// 'handshake' (helper running) → 'starting' (helper exited 0, waiting for
// `started`) → 'running' → 'exited'.
class Pty {
  constructor(file, args, opts) {
    this.process = file;
    this.cols = opts.cols;
    this.rows = opts.rows;
    this.unit = null;
    this.session = null;
    this.invocation = null;
    this.revision = null;
    this.source = null;
    this.state = 'connecting';
    this._argv = [file, ...args];
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
    try {
      this._dirFd = fs.openSync(opts.cwd, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
    } catch (e) {
      throw new PtyError('bad_cwd', `spawn: cannot open cwd ${opts.cwd} as a directory: ${e.code || e.message}`);
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
    socket.on('connect', () => this._spawnHelper());
    socket.on('data', (chunk) => {
      if (this._salvaging) return;  // taken by _salvage, in order
      this._onChunk(chunk);
    });
    socket.on('drain', () => this._onDrain());
    socket.on('error', (e) => {
      if (this._socketError === e) return;  // salvaged: the close decides
      const code = this.state === 'connecting' ? 'connect_failed' : 'connection_error';
      this._fail(new PtyError(code, `supervisor socket ${opts.socketPath}: ${e.code || e.message}`, { cause: e }));
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

  onData(fn) {
    // Disposing the last data listener may release a held onExit.
    const d = this._on.data.add(fn, () => { this._updateFlow(); this._scheduleDeliver(); });
    this._scheduleDeliver();
    return d;
  }
  onExit(fn) { return this._on.exit.add(fn); }
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
    if (this.state === 'connecting') return;
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
    const argv = ['--cols', String(this.cols), '--rows', String(this.rows), '--', ...this._argv];
    let helper;
    try {
      // fd 3 = the connected socket (Node dup2()s its handle's fd), fd 4 = the
      // directory. Every other descriptor of this process is close-on-exec.
      helper = childProcess.spawn(o.helperPath, argv, {
        stdio: ['ignore', 'ignore', 'pipe', this._socket, this._dirFd],
        env: {},
        cwd: '/',
      });
    } catch (e) {
      this._closeDirFd();
      this._fail(new PtyError('helper_spawn_failed', `cannot run ${o.helperPath}: ${e.code || e.message}`, { cause: e }));
      return;
    }
    // libuv's spawn returns after the child's execve succeeded or failed, so
    // the helper holds its own copy of fd 4 by now; ours is no longer needed.
    this._closeDirFd();
    this._helper = helper;
    let stderr = '';
    helper.stderr.on('data', (b) => {
      if (stderr.length < limits.maxHelperStderrBytes) stderr += b.toString('utf8');
    });
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
        for (const f of this._outbox) this._socket.write(f);
        this._outbox = [];
        this._outboxBytes = 0;
        this._updateFlow();
        // The kernel may have taken every queued frame at once: the socket
        // then never emits 'drain', but a write() that returned false is owed one.
        this._onDrain();
        return;
      }
      const reason = timedOut ? 'timeout'
        : (status !== null && HELPER_STATUS[status]) || (signal ? 'signal' : 'unknown');
      this._helperFailure = {
        helperStatus: status, helperSignal: signal, helperReason: reason,
        helperStderr: stderr.slice(0, limits.maxHelperStderrBytes).trim(),
      };
      // The supervisor may have refused the connection with an error envelope
      // that says why; read for a short while to report it.
      this._reading = true;
      this._updateFlow();
      this._timer = setTimeout(() => this._fail(this._helperError()), limits.helperFailureGraceMs);
    });
  }

  _helperError() {
    const f = this._helperFailure;
    const how = f.helperStatus !== null ? `exit status ${f.helperStatus}` : `signal ${f.helperSignal}`;
    return new PtyError(f.helperReason === 'timeout' ? 'helper_timeout' : 'helper_failed',
      `helper ${this._opts.helperPath} failed: ${how} (${f.helperReason})${f.helperStderr ? ': ' + f.helperStderr : ''}`, f);
  }

  _closeDirFd() {
    if (this._dirFd >= 0) {
      fs.closeSync(this._dirFd);
      this._dirFd = -1;
    }
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
      while (this._raw.length > 0 && !this._terminal &&
             this._bufferedBytes < limits.maxBufferedOutputBytes) {
        const chunk = this._raw.shift();
        const err = this._decoder.push(chunk, (type, payload) => {
          if (!this._terminal) this._onFrame(type, payload);
          return this._bufferedBytes >= limits.maxBufferedOutputBytes;
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
        if (this.state !== 'starting') {
          this._fail(new PtyError('protocol_state', `started envelope in state ${this.state}`));
          return;
        }
        this.state = 'running';
        this._releaseSlot();
        this.unit = env.unit;
        this.session = env.session;
        this.invocation = env.invocation;
        this.revision = env.revision;
        this.source = env.source;
        if (this._pendingResize) {
          const [c, r] = this._pendingResize;
          this._pendingResize = null;
          this._send(encodeFrame(FrameType.RESIZE, resizePayload(c, r)));
        }
        this._on.started.emit(env);
        return;
      case 'notice':
        if (this.state !== 'running') {
          this._fail(new PtyError('protocol_state', `notice envelope in state ${this.state}`));
          return;
        }
        if (env.code === 'command_started') {
          if (this._pid !== undefined) {
            this._fail(new PtyError('protocol_state', 'a second command_started notice'));
            return;
          }
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
      this._fail(new PtyError('connection_error', `supervisor socket ${this._opts.socketPath}: ${e.code || e.message}`, { cause: e }));
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
    if (this._reading) {
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
    if (this._bufferedBytes > 0 && this._on.data.size > 0) return;
    this._exited = true;
    this.state = 'exited';
    if (this._bufferedBytes === 0) this._flushText();
    const t = this._terminal;
    if (t.error && t.error.code !== 'closed') this._on.error.emit(t.error);
    this._on.exit.emit({ exitCode: t.exitCode, signal: t.signal, result: t.result, exact: t.exact, error: t.error });
  }
}

function spawn(file, args, options) {
  const argv = checkArgv(file, args);
  const opts = checkOptions(options);
  return new Pty(file, argv, opts);
}

module.exports = {
  spawn,
  PtyError,
  limits,
  SIGNALS,
  HELPER_STATUS,
  DEFAULT_SOCKET_PATH,
  DEFAULT_HELPER_PATH,
  // The wire format, for tests and for writing other clients.
  protocol: Object.freeze({
    FrameType, FrameDecoder, encodeFrame, parseEnvelope, chunkUtf8, isValidUtf8,
  }),
};
