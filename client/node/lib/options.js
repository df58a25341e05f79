'use strict';
// spawn()'s and resize()'s arguments, checked synchronously before anything is
// opened or connected. Invariant: argv is bounded as the START frame is (the
// supervisor re-checks it), and an option this module cannot honour throws
// rather than being silently dropped.

const { PtyError } = require('./errors.js');
const { limits } = require('./limits.js');
const { LONE_SURROGATE } = require('./utf8.js');

const DEFAULT_SOCKET_PATH = '/run/opencode-pty/supervisor.sock';
const DEFAULT_HELPER_PATH = '/usr/local/libexec/opencode-pty-client';

const KNOWN_OPTIONS = new Set(['cwd', 'cols', 'rows', 'env', 'name', 'encoding', 'handleFlowControl',
  'useConpty', 'useConptyDll', 'conptyInheritCursor', 'socketPath', 'helperPath', 'extraEnv']);
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
    envPayload: checkExtraEnv(o.extraEnv),
  };
}

module.exports = {
  DEFAULT_SOCKET_PATH, DEFAULT_HELPER_PATH, checkArgv, checkOptions, checkSize, checkResize,
};
