'use strict';
// Entry of the opencode-pty Node client: the module lives in lib/.
module.exports = require('./lib/pty.js');
