'use strict';
// vm-tests/node/smoke-app.js: the Node entry of the smoke suite, run by
// vm-tests/node/smoke.sh inside the Node 26.4 SEA (script mode: this file's
// require() loads from disk) as the MainPID of opencode-v2.service. The checks
// are vm-tests/node/smoke-cases.js, shared with the Bun entry
// (vm-tests/node/pty-plugin-smoke.ts).
const { main } = require('./smoke-cases.js');

main().then((code) => { process.exitCode = code; }, (e) => { console.error(e); process.exitCode = 1; });
