'use strict';
// spawn()'s, attach()'s, list()'s and resize()'s arguments, checked before
// anything is opened or connected. Invariant: argv and the detach options are
// bounded as the START frame is (the supervisor re-checks them), and an option
// this module cannot honour throws rather than being silently dropped.

const { PtyError } = require('./errors.js');
const { limits } = require('./limits.js');
const { LONE_SURROGATE } = require('./utf8.js');

const DEFAULT_SOCKET_PATH = '/run/opencode-pty/supervisor.sock';
const DEFAULT_HELPER_PATH = '/usr/local/libexec/opencode-pty-client';

const KNOWN_OPTIONS = new Set(['cwd', 'cols', 'rows', 'env', 'name', 'encoding', 'handleFlowControl',
  'useConpty', 'useConptyDll', 'conptyInheritCursor', 'socketPath', 'helperPath', 'extraEnv', 'detachable']);
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

// A variable name as the supervisor and the launcher accept it
// (common/env_overlay.h ValidEnvName): what a POSIX shell can name.
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

// The extraEnv option: an object of string values, checked against every
// bound the supervisor enforces (docs/PROTOCOL.md section 3a), encoded as the
// ENV frame's payload: count(u32) then count x (length(u32) "NAME=VALUE").
// null when absent. Which names the command never gets (the application's
// own unit's) is the supervisor's decision, not this module's.
function checkExtraEnv(env) {
  if (env === undefined) return null;
  if (env === null || typeof env !== 'object' || Array.isArray(env)) {
    throw new TypeError('spawn: extraEnv must be an object of strings');
  }
  const names = Object.keys(env);
  if (names.length > limits.maxEnvVars) {
    throw new PtyError('env_too_many', `spawn: extraEnv has ${names.length} variables (max ${limits.maxEnvVars})`);
  }
  const entries = [];
  let total = 0;
  for (const name of names) {
    const value = env[name];
    if (typeof value !== 'string') throw new TypeError(`spawn: extraEnv.${name} must be a string, not ${typeof value}`);
    if (!ENV_NAME.test(name) || name.length > limits.maxEnvNameBytes) {
      throw new PtyError('bad_env_name',
        `spawn: extraEnv name ${JSON.stringify(name.slice(0, 64))} is not [A-Za-z_][A-Za-z0-9_]* of at most ${limits.maxEnvNameBytes} bytes`);
    }
    if (value.includes('\0')) throw new PtyError('bad_env', `spawn: extraEnv.${name} contains NUL`);
    const entry = Buffer.from(`${name}=${value}`, 'utf8');
    if (entry.length > limits.maxEnvEntryBytes) {
      throw new PtyError('env_too_long', `spawn: extraEnv.${name} is ${entry.length} bytes as NAME=VALUE (max ${limits.maxEnvEntryBytes})`);
    }
    total += entry.length;
    if (total > limits.maxEnvTotalBytes) {
      throw new PtyError('env_too_long', `spawn: extraEnv is more than ${limits.maxEnvTotalBytes} bytes as NAME=VALUE`);
    }
    entries.push(entry);
  }
  const parts = [Buffer.alloc(4)];
  parts[0].writeUInt32BE(entries.length);
  for (const e of entries) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(e.length);
    parts.push(len, e);
  }
  return Buffer.concat(parts);
}

// The detachable option (docs/PROTOCOL.md section 10.1): { graceSeconds,
// scrollbackBytes? } in the supervisor's bounds, else bad_detach; null when
// absent (not detachable). The default ring size is resolved here, so the
// helper is always told both numbers.
const DETACH_KEYS = new Set(['graceSeconds', 'scrollbackBytes']);
function checkDetachable(d) {
  if (d === undefined) return null;
  if (d === null || typeof d !== 'object' || Array.isArray(d)) {
    throw new TypeError('spawn: detachable must be an object { graceSeconds, scrollbackBytes? }');
  }
  for (const key of Object.keys(d)) {
    if (!DETACH_KEYS.has(key)) throw new TypeError(`spawn: unknown detachable option "${key}"`);
  }
  const g = d.graceSeconds;
  if (!Number.isInteger(g) || g < 1 || g > limits.maxDetachGraceSec) {
    throw new PtyError('bad_detach',
      `spawn: detachable.graceSeconds must be an integer in 1..${limits.maxDetachGraceSec}, got ${g}`);
  }
  const s = d.scrollbackBytes === undefined ? limits.defaultScrollbackBytes : d.scrollbackBytes;
  if (!Number.isInteger(s) || s < limits.minScrollbackBytes || s > limits.maxScrollbackBytes) {
    throw new PtyError('bad_detach',
      `spawn: detachable.scrollbackBytes must be an integer in ${limits.minScrollbackBytes}..${limits.maxScrollbackBytes}, got ${s}`);
  }
  return { graceSeconds: g, scrollbackBytes: s };
}

// Any encoding Buffer knows, decoded by a StringDecoder over the whole
// stream (as node-pty's socket.setEncoding does); null: Buffers.
function checkEncoding(where, encoding) {
  if (encoding === undefined) return 'utf8';
  if (encoding !== null && (typeof encoding !== 'string' || !Buffer.isEncoding(encoding))) {
    throw new TypeError(`${where}: encoding must be a Buffer encoding ("utf8", "latin1", "base64", ...) or null (Buffers), got ${JSON.stringify(encoding)}`);
  }
  return encoding;
}

function checkSocketPath(where, socketPath) {
  if (socketPath !== undefined && (typeof socketPath !== 'string' || !socketPath.startsWith('/'))) {
    throw new TypeError(`${where}: socketPath must be an absolute path`);
  }
  return socketPath || DEFAULT_SOCKET_PATH;
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
  const encoding = checkEncoding('spawn', o.encoding);
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
    encoding,
    socketPath: o.socketPath || DEFAULT_SOCKET_PATH,
    helperPath: o.helperPath || DEFAULT_HELPER_PATH,
    envPayload: checkExtraEnv(o.extraEnv),
    detach: checkDetachable(o.detachable),
  };
}

// A session id as `started` names it (docs/PROTOCOL.md section 10.4): 32
// lowercase hex characters, exactly what the ATTACH payload carries.
const SESSION_ID = /^[0-9a-f]{32}$/;
const ATTACH_OPTIONS = new Set(['cursor', 'encoding', 'socketPath']);

// attach(id, { cursor, encoding, socketPath }): the id and the cursor as the
// supervisor would refuse them (bad_attach, bad_cursor), then the options in
// the shape Pty takes (no helper, no directory, no START).
function checkAttach(id, options) {
  if (typeof id !== 'string' || !SESSION_ID.test(id)) {
    throw new PtyError('bad_attach', `attach: the session id must be 32 lowercase hex characters, got ${JSON.stringify(typeof id === 'string' ? id.slice(0, 64) : typeof id)}`);
  }
  const o = options === undefined ? {} : options;
  if (o === null || typeof o !== 'object') throw new TypeError('attach: options must be an object');
  for (const key of Object.keys(o)) {
    if (!ATTACH_OPTIONS.has(key)) throw new TypeError(`attach: unknown option "${key}"`);
  }
  const cursor = o.cursor === undefined ? 0 : o.cursor;
  if (!Number.isSafeInteger(cursor) || cursor < 0) {
    throw new PtyError('bad_cursor', `attach: cursor must be a non-negative safe integer, got ${cursor}`);
  }
  return {
    session: id,
    cursor,
    opts: {
      cwd: null, cols: null, rows: null, encoding: checkEncoding('attach', o.encoding),
      socketPath: checkSocketPath('attach', o.socketPath), helperPath: null, envPayload: null, detach: null,
    },
  };
}

// list({ socketPath }): the socket only.
function checkListOptions(options) {
  const o = options === undefined ? {} : options;
  if (o === null || typeof o !== 'object') throw new TypeError('list: options must be an object');
  for (const key of Object.keys(o)) {
    if (key !== 'socketPath') throw new TypeError(`list: unknown option "${key}"`);
  }
  return { socketPath: checkSocketPath('list', o.socketPath) };
}

module.exports = {
  DEFAULT_SOCKET_PATH, DEFAULT_HELPER_PATH, checkArgv, checkOptions, checkSize, checkResize,
  checkAttach, checkListOptions,
};
