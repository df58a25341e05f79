// The Node SEA test application (bundled after the module, client/node/index.js
// and lib/, by build.sh with sea/bundle.js). It is what the inheritance probe
// (client/node/probe/) runs as opencode-v2.service: it opens one PTY through
// the module while unrelated children are spawned from the main thread and
// from a worker thread, and reports what it saw. The probe's verdict comes
// from outside (ptrace), this report only adds the children's own view.
//
// OPENCODE_PTY_APP_MODE=version  print {"version","isSea"} and exit
// OPENCODE_PTY_APP_MODE=probe    OPENCODE_PTY_PROBE_DIR=<dir, writable by the app>:
//   write <dir>/ready.json, wait for <dir>/go (the tracer is attached), run one
//   session with cwd <dir>, write <dir>/app.json, exit 0 (1 on any failure).
// OPENCODE_PTY_APP_MODE=script  OPENCODE_PTY_APP_SCRIPT=<file>: runs that
//   CommonJS file inside this SEA process (module.createRequire: its require()
//   loads from disk), so that a harness application (the acceptance stand-in
//   vm-tests/demo/relay-app.js, the smoke app vm-tests/node/smoke-app.js) runs
//   on the SEA's exact Node as the MainPID. Invoked as `SEA -e CODE` (a child
//   the script spawns with process.execPath, like `node -e`) it runs CODE.
// Under Bun (`bun client/sea/app.js`, the staged copy; vm.node-probe.bun.*) the
// same file runs the probe mode with the module from ../index.js.
// OPENCODE_PTY_TEST_SOCKET / OPENCODE_PTY_TEST_HELPER override the socket and
// helper paths for a dry run outside the harness (never set by the probe).

const fs = require('fs');
const childProcess = require('child_process');
const { Worker } = require('worker_threads');

const pty = globalThis.__opencodePty || require('../index.js');

function isSea() {
  try {
    return require('node:sea').isSea();
  } catch {
    return null;  // node:sea exists from Node 20.12 / 21.7
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The probe polls for these files: write a whole file or none (rename), so
// that it never reads one half written.
function writeFileWhole(path, text) {
  fs.writeFileSync(`${path}.tmp`, text);
  fs.renameSync(`${path}.tmp`, path);
}

async function waitFile(path, ms) {
  const end = Date.now() + ms;
  while (!fs.existsSync(path)) {
    if (Date.now() > end) throw new Error(`${path} did not appear within ${ms} ms`);
    await sleep(20);
  }
}

// An unrelated child of this process: reports its own descriptor table.
function unrelatedChild(label) {
  return new Promise((resolve) => {
    const c = childProcess.spawn('/bin/sh', ['-c', 'ls -l /proc/self/fd'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    c.stdout.on('data', (b) => { out += b; });
    c.on('error', (e) => resolve({ label, error: String(e) }));
    c.on('close', (status) => {
      // ls -l /proc/self/fd: "lrwx------ ... 3 -> socket:[123]"; ls's own
      // directory descriptor points at /proc/<its pid>/fd and is dropped.
      const fds = [];
      for (const line of out.split('\n')) {
        const m = / (\d+) -> (.*)$/.exec(line);
        if (m && !/^\/proc\/\d+\/fd$/.test(m[2])) fds.push({ fd: Number(m[1]), target: m[2] });
      }
      resolve({ label, pid: c.pid, status, fds });
    });
  });
}

// Spawns /bin/sh -c true from a worker thread until told to stop, so that
// children are forked concurrently with the main thread's session set-up.
const WORKER = `
const { workerData } = require('worker_threads');
const { spawnSync } = require('child_process');
const flag = new Int32Array(workerData);
let n = 0;
while (Atomics.load(flag, 0) === 0 && n < 2000) {
  spawnSync('/bin/sh', ['-c', 'true'], { stdio: 'ignore' });
  Atomics.store(flag, 2, ++n);
}
Atomics.store(flag, 1, n);
`;

async function probe() {
  const dir = process.env.OPENCODE_PTY_PROBE_DIR;
  if (!dir) throw new Error('OPENCODE_PTY_PROBE_DIR is not set');
  const report = { version: process.version, isSea: isSea(), bun: process.versions.bun || null,
    execPath: process.execPath, pid: process.pid };
  writeFileWhole(`${dir}/ready.json`, JSON.stringify(report));
  await waitFile(`${dir}/go`, 120000);

  // flag[0]: stop request, flag[1]: final count, flag[2]: children so far.
  const flag = new Int32Array(new SharedArrayBuffer(12));
  const worker = new Worker(WORKER, { eval: true, workerData: flag.buffer });
  worker.on('error', (e) => { report.workerError = String(e && e.stack || e); });
  const workerDone = new Promise((r) => worker.on('exit', r));
  const t0 = Date.now();
  while (Atomics.load(flag, 2) === 0 && !report.workerError) {  // the worker is forking from now on
    if (Date.now() - t0 > 30000) throw new Error('the worker thread spawned nothing within 30 s');
    await sleep(5);
  }

  const opts = { cwd: dir, cols: 100, rows: 30 };
  if (process.env.OPENCODE_PTY_TEST_SOCKET) opts.socketPath = process.env.OPENCODE_PTY_TEST_SOCKET;
  if (process.env.OPENCODE_PTY_TEST_HELPER) opts.helperPath = process.env.OPENCODE_PTY_TEST_HELPER;
  const p = pty.spawn('/bin/sh', ['-c', 'printf "probe-ok cwd=%s size=%s\\n" "$(pwd)" "$(stty size)"; exit 3'], opts);
  let output = '';
  p.onData((d) => { output += d; });
  const exited = new Promise((r) => p.onExit(r));
  const started = new Promise((r) => p.onStarted(r));
  // Forked right now, while the module holds the directory and the socket.
  const first = unrelatedChild('right after spawn()');
  const firstState = p.state;
  while (p.state === 'connecting') await new Promise((r) => setImmediate(r));
  report.unrelated = [{ state: firstState, ...(await first) }];
  // While the helper runs (or just after: the helper may be faster).
  report.unrelated.push({ state: p.state, ...(await unrelatedChild('during handshake')) });
  const ev = await Promise.race([exited, started.then(() => null)]);
  if (ev === null) report.unrelated.push({ state: p.state, ...(await unrelatedChild('while running')) });
  const exit = await exited;
  Atomics.store(flag, 0, 1);
  await workerDone;
  report.workerSpawns = Atomics.load(flag, 1);
  report.session = { unit: p.unit, session: p.session, invocation: p.invocation, revision: p.revision, source: p.source };
  report.output = output;
  report.exit = { exitCode: exit.exitCode, signal: exit.signal, result: exit.result,
    error: exit.error && { code: exit.error.code, message: exit.error.message } };
  writeFileWhole(`${dir}/app.json`, JSON.stringify(report, null, 1));
  return exit.error ? 1 : 0;
}

async function main() {
  const mode = process.env.OPENCODE_PTY_APP_MODE;
  if (mode === 'version') {
    process.stdout.write(JSON.stringify({ version: process.version, isSea: isSea() }));
    return 0;
  }
  if (mode === 'probe') return probe();
  if (mode === 'script') return script();
  process.stderr.write('opencode-pty-sea-app: set OPENCODE_PTY_APP_MODE=version|probe|script\n');
  return 2;
}

// Returns undefined: the script owns process.exitCode from here on.
function script() {
  const { createRequire } = require('module');
  // A SEA's argv: [execPath, execPath, ...arguments].
  const args = process.argv.slice(2);
  if (args[0] === '-e') {
    if (typeof args[1] !== 'string') throw new Error('-e needs code');
    const req = createRequire(`${process.cwd()}/[eval]`);
    new Function('require', args[1])(req);
    return undefined;
  }
  const file = process.env.OPENCODE_PTY_APP_SCRIPT;
  if (!file || !file.startsWith('/')) throw new Error('OPENCODE_PTY_APP_SCRIPT must be an absolute path');
  createRequire(file)(file);
  return undefined;
}

main().then((code) => { if (code !== undefined) process.exitCode = code; }, (e) => {
  process.stderr.write(`opencode-pty-sea-app: ${e && e.stack || e}\n`);
  process.exitCode = 1;
});
