'use strict';
// vm-tests/node/adapter-app.js: the opencode-shaped application of
// vm-tests/node/adapter.sh (ctest vm.node-adapter.bookworm / .trixie; issue
// #29). Runs inside the Node 26.4 SEA (script mode), or under the pinned Bun
// (adapter.sh --runtime=bun, issue #31), as the MainPID of
// opencode-v2.service (User=byk) and drives the PTY the way opencode's PTY
// service does: through opencode's own adapter compiled from
// client/node/typecheck/opencode-adapter.ts (OPENCODE_ADAPTER), which imports
// the node-pty drop-in by its package name, with opencode's environment
// ({...process.env, ...request env, TERM, OPENCODE_TERMINAL: "1"}).
// Records checks {name, ok, evidence} as JSON lines into OPENCODE_ADAPTER_OUT.
const path = require('path');

const OUT = process.env.OPENCODE_ADAPTER_OUT;
const WORK = process.env.OPENCODE_ADAPTER_WORK;
const adapter = require(process.env.OPENCODE_ADAPTER);
// The drop-in itself, for what opencode's Proc does not carry (ptsName).
const nodePty = require(path.join(path.dirname(process.env.OPENCODE_ADAPTER), 'node_modules/@opencode-pty/node/node-pty'));
const PLUGIN = `plugin-${process.pid}-${Date.now()}`;
// A hang guard only (each case ends in milliseconds): a case that never ends
// fails with what it saw instead of holding the suite.
const GUARD_MS = 120 * 1000;
const lib = require('./checks.js');
const { record, exitCode } = lib.checks(OUT);

// opencode's spawn input: its env is a new object each time.
function opencodeEnv(extra) {
  return { ...process.env, ...extra, TERM: 'xterm-256color', OPENCODE_TERMINAL: '1' };
}

// One session as opencode's PTY service keeps it: info.pid stored at spawn,
// output appended, the exit stored.
function open(file, args, extra = {}) {
  const proc = adapter.spawn(file, args, { name: 'xterm-256color', cwd: WORK, env: opencodeEnv(extra) });
  const s = { proc, pidAtSpawn: proc.pid, output: '', exit: null };
  proc.onData((chunk) => { s.output += chunk; });
  s.exited = new Promise((resolve) => proc.onExit((e) => { s.exit = e; resolve(e); }));
  return s;
}

// The case's promise (an exit: it never rejects), or { timeout: what } for
// the case's check to report.
const guard = (promise, what) => lib.withTimeout(promise, GUARD_MS, what).catch(() => ({ timeout: what }));

const until = (pred) => lib.until(pred, GUARD_MS, 10);

const isPid = (v) => Number.isInteger(v) && v >= 0;

async function main() {
  // The suite names the runtime (--runtime=node|bun): the Node 26.4 SEA, or the
  // pinned Bun running this file (process.versions.bun).
  const runtime = process.versions.bun ? 'bun' : 'node';
  record(`the application runs on the suite's runtime (${process.env.OPENCODE_TEST_RUNTIME || 'node'})`,
    runtime === (process.env.OPENCODE_TEST_RUNTIME || 'node'),
    { runtime, node: process.version, bun: process.versions.bun || null, execPath: process.execPath });
  record('the application has its unit\'s INVOCATION_ID (what must not reach the command)',
    /^[0-9a-f]{32}$/.test(process.env.INVOCATION_ID || ''), process.env.INVOCATION_ID || null);

  // cat: input echoed back, then ^D ends it with 0.
  const cat = open('cat', []);
  record('cat: pid at spawn is a non-negative integer', isPid(cat.pidAtSpawn), cat.pidAtSpawn);
  cat.proc.write('AAA\n');
  const echoed = await until(() => /AAA\r\n(.|\n)*AAA/.test(cat.output));
  record('cat: AAA\\n is read back (the echo and cat\'s copy)', echoed, cat.output);
  cat.proc.write('\u0004');
  const catExit = await guard(cat.exited, 'cat exit');
  record('cat: \\u0004 ends it with exit code 0', catExit.exitCode === 0 && catExit.signal === 0, catExit);

  // exit 3 through /usr/bin/env.
  const three = open('/usr/bin/env', ['sh', '-c', 'exit 3']);
  const threeExit = await guard(three.exited, 'exit 3');
  record('/usr/bin/env sh -c \'exit 3\': exit code 3', threeExit.exitCode === 3, threeExit);

  // The environment: opencode's and the plugin's variables arrive, the
  // application's unit variables do not.
  const env = open('/bin/sh', ['-c',
    'printf "T=%s P=%s I=%s N=%s TERM=%s\\n" "$OPENCODE_TERMINAL" "$PLUGIN_VAR" "${INVOCATION_ID-unset}" "${NOTIFY_SOCKET-unset}" "$TERM"'],
  { PLUGIN_VAR: PLUGIN });
  const envExit = await guard(env.exited, 'env exit');
  const line = (/T=.*\r?\n/.exec(env.output) || [''])[0].trim();
  record('env: OPENCODE_TERMINAL=1 and the plugin variable reach the command',
    line.includes('T=1 ') && line.includes(`P=${PLUGIN} `) && line.includes('TERM=xterm-256color'), { line, exit: envExit });
  record('env: INVOCATION_ID and NOTIFY_SOCKET of the application\'s unit do not',
    line.includes('I=unset') && line.includes('N=unset'), line);

  // kill() with no argument: SIGHUP, 129.
  const sleeper = open('sh', ['-c', 'echo ready; exec sleep 600']);
  await until(() => sleeper.output.includes('ready'));
  sleeper.proc.kill();
  const killExit = await guard(sleeper.exited, 'kill exit');
  record('kill(): exit code 129, signal 1', killExit.exitCode === 129 && killExit.signal === 1, killExit);

  // The pid: 0 or the pid at spawn, then the command's own ($$ of sh).
  const direct = nodePty.spawn('sh', ['-c', 'echo "pid=$$ tty=$(tty)"; exec cat'],
    { name: 'xterm-256color', cwd: WORK, env: opencodeEnv({}) });
  let out = '';
  direct.onData((d) => { out += d; });
  const directExit = new Promise((r) => direct.onExit(r));
  await until(() => /pid=\d+ tty=\S+/.test(out) && direct.pid > 0);
  const m = /pid=(\d+) tty=(\S+)/.exec(out) || [];
  record('pid: the drop-in\'s pid is the command\'s own', direct.pid === Number(m[1]), { pid: direct.pid, said: m[1] });
  record('ptsName: the command\'s terminal', direct.ptsName === m[2], { ptsName: direct.ptsName, tty: m[2] });
  // Data-path calls that threw on the strict entry: a lone surrogate, and a
  // resize and a write after the exit.
  let threw = null;
  try {
    direct.write('x\uD800y\n');
    direct.write('\u0004');
    await guard(directExit, 'direct exit');
    direct.resize(100, 40);
    direct.write('late');
  } catch (e) {
    threw = String(e);
  }
  record('write()/resize() never throw (lone surrogate, after the exit)', threw === null, threw);

  // An application that keeps writing (it answers every chunk with input and
  // types on a timer): the session still ends when its command does. Input
  // that kept arriving kept script relaying it after its child was gone.
  const loop = open('sh', ['-c', 'echo go; sleep 1; exit 3']);
  loop.proc.onData(() => loop.proc.write('y'));
  const typing = setInterval(() => loop.proc.write('z'), 1);
  const loopExit = await guard(loop.exited, 'echo loop exit');
  clearInterval(typing);
  record('an application that keeps writing does not keep a command that exited 3 alive',
    loopExit.exitCode === 3, loopExit);

  // No data listener and more output than the hold bound: onExit still fires.
  const quiet = adapter.spawn('sh', ['-c', 'head -c 4000000 /dev/zero | tr "\\0" a; exit 0'],
    { name: 'xterm-256color', cwd: WORK, env: opencodeEnv({}) });
  const quietExit = await guard(new Promise((r) => quiet.onExit(r)), 'unread output exit');
  record('4 MB of output nobody listens to: onExit fires with 0', quietExit.exitCode === 0, quietExit);
}

main().then(
  () => process.exit(exitCode()),
  (e) => { record('the application ran to its end', false, String(e && e.stack)); process.exit(1); });
