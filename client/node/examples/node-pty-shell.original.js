// A small node-pty program: a shell in a pseudo-terminal, piped to this
// process's own terminal. Kept only as the "before" of node-pty-shell.js
// (it needs the node-pty package, which this project does not use).
const pty = require('node-pty');

const term = pty.spawn(process.env.SHELL || 'bash', [], {
  name: 'xterm-256color',
  cols: process.stdout.columns || 80,
  rows: process.stdout.rows || 24,
  cwd: process.env.HOME,
  env: process.env,
});
console.log(`shell pid ${term.pid}`);

if (process.stdin.isTTY) process.stdin.setRawMode(true);
process.stdin.on('data', (data) => term.write(data));
term.onData((data) => process.stdout.write(data));
process.stdout.on('resize', () => term.resize(process.stdout.columns, process.stdout.rows));
term.onExit(({ exitCode, signal }) => {
  console.log(`\r\nshell exited: code ${exitCode}, signal ${signal}`);
  process.exit(exitCode);
});
