'use strict';
// Signal names: the allowlist kill() may send (generated from common/frame.cc)
// and the numbers node-pty's 'exit' event passes.

const os = require('os');
const { SIGNALS } = require('./constants.generated.js');
const { PtyError } = require('./errors.js');

// The number node-pty's 'exit' event passes for a signal name: 0 when no
// signal ended the command (node-pty passes 0 then too), else this platform's
// number ("TERM" → 15; "34" → 34), undefined for a name it has no number for.
function exitSignalNumber(name) {
  if (name === null) return 0;
  if (/^[0-9]+$/.test(name)) return Number(name);
  const key = 'SIG' + name;
  return Object.prototype.hasOwnProperty.call(os.constants.signals, key) ? os.constants.signals[key] : undefined;
}

function signalNumber(signal) {
  if (typeof signal !== 'string') throw new TypeError('kill: signal must be a name such as "SIGTERM"');
  const name = signal.startsWith('SIG') ? signal.slice(3) : signal;
  if (!Object.prototype.hasOwnProperty.call(SIGNALS, name)) {
    throw new PtyError('bad_signal', `kill: ${signal} is not allowed (allowed: ${Object.keys(SIGNALS).map((s) => 'SIG' + s).join(', ')})`);
  }
  return SIGNALS[name];
}

module.exports = { SIGNALS, signalNumber, exitSignalNumber };
