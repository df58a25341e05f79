'use strict';
// The README example: one PTY, its output, input, and its exit status. Run it
// as the MainPID of opencode-v2.service (the supervisor serves nobody else),
// e.g. in the harness: vm-tests/run bookworm --artifacts build/release vm-tests/node/example.sh
const pty = require(process.env.OPENCODE_PTY_MODULE || '../index.js');

const term = pty.spawn('/bin/sh', ['-c', 'read line; echo "you said: $line"; tty; exit 7'], {
  cwd: process.env.HOME || '/', cols: 100, rows: 30,
});
term.onStarted(({ unit }) => console.log(`started ${unit}`));
term.onData((text) => process.stdout.write(text));
term.onError((err) => console.error(`error ${err.code}: ${err.message}`));
term.onExit(({ exitCode, signal, error }) => {
  console.log(`exit code=${exitCode} signal=${signal}${error ? ' error=' + error.code : ''}`);
  process.exitCode = exitCode === 7 ? 0 : 1;
});
term.write('hello\r');
