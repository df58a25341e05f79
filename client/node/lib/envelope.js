'use strict';
// The supervisor's JSON envelopes (docs/PROTOCOL.md section 4): a strict parser
// of their one flat shape and the field tables each type and code is checked
// against. Invariant: an envelope is refused (bad_json, missing_field,
// bad_field) before any of it is acted on; unknown keys are kept.

const { PtyError } = require('./errors.js');
const { limits } = require('./limits.js');
const { utf8Fatal } = require('./utf8.js');

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
const SESSION_ID = (v) => typeof v === 'string' && HEX(32).test(v);
const UNIT = (v) => typeof v === 'string' && /^opencode-pty-[0-9a-f]{32}\.service$/.test(v);
const STARTED_FIELDS = {
  session: SESSION_ID,
  unit: UNIT,
  invocation: SESSION_ID,
  revision: (v) => typeof v === 'string' && HEX(40).test(v),
  source: (v) => typeof v === 'string' && HEX(64).test(v),
};
// A cursor (docs/PROTOCOL.md section 10.2): a u64 on the wire, a safe integer
// here (2^53 bytes of output is not reached).
const COUNT = (v) => Number.isSafeInteger(v) && v >= 0;
const PID_OR_NULL = (v) => v === null || (Number.isSafeInteger(v) && v >= 1 && v <= limits.maxPid);
const ENVELOPE_FIELDS = Object.freeze({
  started: STARTED_FIELDS,
  // docs/PROTOCOL.md section 10.4: LIST's entries and its end, ATTACH's answer.
  session: {
    session: SESSION_ID,
    unit: UNIT,
    state: (v) => v === 'attached' || v === 'detached',
    started: COUNT,
    grace: (v) => Number.isSafeInteger(v) && v >= 1 && v <= limits.maxDetachGraceSec,
    scrollback: (v) => Number.isSafeInteger(v) && v >= limits.minScrollbackBytes && v <= limits.maxScrollbackBytes,
    first: COUNT,
    next: COUNT,
    exited: (v) => typeof v === 'boolean',
    code: (v) => v === null || Number.isSafeInteger(v),
    signal: (v) => v === null || (typeof v === 'string' && SIGNAL_NAME.test(v)),
    pid: PID_OR_NULL,
  },
  listed: {
    count: (v) => Number.isSafeInteger(v) && v >= 0 && v <= limits.maxDetachableSessions,
  },
  attached: {
    ...STARTED_FIELDS,
    cursor: COUNT,
    dropped: COUNT,
    next: COUNT,
    pid: PID_OR_NULL,
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
  // A detachable session's unit is named for its id (docs/PROTOCOL.md section 4).
  if ((env.type === 'session' || env.type === 'attached') && env.unit !== `opencode-pty-${env.session}.service`) {
    throw new PtyError('bad_field', `${env.type} envelope whose unit is not the session's`);
  }
  // The ring holds [first, next), at most scrollback bytes; a session that has
  // not exited has no status yet.
  if (env.type === 'session') {
    if (env.next < env.first || env.next - env.first > env.scrollback) {
      throw new PtyError('bad_field', 'session envelope with a cursor range outside its ring');
    }
    if (!env.exited && (env.code !== null || env.signal !== null)) {
      throw new PtyError('bad_field', 'session envelope with a status but not exited');
    }
  }
  if (env.type === 'attached' && env.cursor > env.next) {
    throw new PtyError('bad_field', 'attached envelope with cursor past next');
  }
  return env;
}

module.exports = { parseFlatJson, parseEnvelope, ENVELOPE_FIELDS, OPTIONAL_FIELDS, CODE_FIELDS };
