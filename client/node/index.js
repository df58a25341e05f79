'use strict';
// Node client of the opencode-pty supervisor (README.md): the public entry.
// It only wires lib/ together and exports the module's API; each file of lib/
// owns one concern and says which invariant it keeps (lib/pty.js: the session,
// its descriptors and buffers).

const { PtyError } = require('./lib/errors.js');
const { limits } = require('./lib/limits.js');
const { FrameType, FrameDecoder, encodeFrame } = require('./lib/frame.js');
const { parseEnvelope } = require('./lib/envelope.js');
const { chunkUtf8, isValidUtf8 } = require('./lib/utf8.js');
const { SIGNALS } = require('./lib/signals.js');
const { HELPER_STATUS } = require('./lib/helper.js');
const {
  DEFAULT_SOCKET_PATH, DEFAULT_HELPER_PATH, checkArgv, checkOptions, checkAttach, checkListOptions,
} = require('./lib/options.js');
const { Pty } = require('./lib/pty.js');
const { listSessions } = require('./lib/list.js');

function spawn(file, args, options) {
  const argv = checkArgv(file, args);
  const opts = checkOptions(options);
  return new Pty(file, argv, opts);
}

// The detachable sessions of the supervisor (docs/PROTOCOL.md section 10.4).
// Every failure, a bad argument included, is a rejection.
async function list(options) {
  const { socketPath } = checkListOptions(options);
  return listSessions(socketPath);
}

// A Pty attached to the detached session `id`, replaying from `cursor`.
// Every failure, a bad argument included, is a rejection; nothing is
// connected before the arguments passed.
async function attach(id, options) {
  const { session, cursor, opts } = checkAttach(id, options);
  return new Promise((resolve, reject) => new Pty(null, [], opts, { session, cursor, resolve, reject }));
}

module.exports = {
  spawn,
  list,
  attach,
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
