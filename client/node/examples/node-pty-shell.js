// node-pty-shell.original.js ported to this module: a shell in a PTY unit,
// piped to this process's own terminal. The diff it needed is in README.md
// ("Porting a node-pty program").
const pty = require(process.env.OPENCODE_PTY_MODULE || '../index.js');

const term = pty.spawn(process.env.SHELL || 'bash', [], {
  name: 'xterm-256color',
  cols: process.stdout.columns || 80,
  rows: process.stdout.rows || 24,
  cwd: process.env.HOME,
  env: process.env,
});
term.onStarted(({ unit }) => console.log(`shell unit ${unit}`));

if (process.stdin.isTTY) process.stdin.setRawMode(true);
process.stdin.setEncoding('utf8');  // input must be valid UTF-8: decode across reads
process.stdin.on('data', (data) => term.write(data));
term.onData((data) => process.stdout.write(data));
process.stdout.on('resize', () => term.resize(process.stdout.columns, process.stdout.rows));
term.onExit(({ exitCode, signal, error }) => {
  console.log(`\r\nshell exited: code ${exitCode}, signal ${signal}${error ? `, error ${error.code}` : ''}`);
  process.exit(exitCode === null ? 1 : exitCode);
});
