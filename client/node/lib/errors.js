'use strict';
// PtyError: every failure the module reports, with a stable machine-readable
// `code` (README.md "Errors"). Invariant: a code, once shipped, never changes.

class PtyError extends Error {
  constructor(code, message, extra) {
    super(message);
    this.name = 'PtyError';
    this.code = code;
    if (extra) Object.assign(this, extra);
  }
}

module.exports = { PtyError };
