'use strict';
// The module as examples/ require it (OPENCODE_PTY_MODULE), pointed at a fake
// supervisor: spawn() gets the test's socketPath and helperPath added and is
// otherwise the real one, so the example's own options are checked as written.
const real = require('../index.js');

module.exports = {
  ...real,
  spawn: (file, args, options) => real.spawn(file, args, {
    ...options,
    socketPath: process.env.OPENCODE_TEST_SOCKET,
    helperPath: process.env.OPENCODE_TEST_HELPER,
  }),
};
