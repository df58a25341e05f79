'use strict';
// Run by test/review.test.js (issue 14, defect 3) in its own process, as an
// application runs: listeners that throw, against the fake supervisor. Reports
// as JSON on stdout what the application saw: the exceptions that reached
// process 'uncaughtException', the output, and the exit event. A process of
// its own because `bun test` fails the running test on an uncaught exception
// before any 'uncaughtException' listener sees it (plain Bun and Node both
// deliver it to the listener), and so that no runner's handler is involved.
//   argv[2]: "data-started" (a throwing onStarted and a throwing first onData)
//            or "error" (a throwing onError)
const { spawn, protocol } = require('../index.js');
const { fakeSupervisor, exitOf, STARTED } = require('./fake.js');

const { FrameType } = protocol;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const uncaught = [];
process.on('uncaughtException', (e) => { uncaught.push(e.message); });

async function dataStarted() {
  const sup = await fakeSupervisor((c) => {
    // Everything in one chunk: the exceptions happen in the middle of it.
    c.raw(Buffer.concat([
      protocol.encodeFrame(FrameType.EVENT, Buffer.from(JSON.stringify(STARTED))),
      protocol.encodeFrame(FrameType.OUTPUT, Buffer.from('one ')),
      protocol.encodeFrame(FrameType.OUTPUT, Buffer.from('two ')),
      protocol.encodeFrame(FrameType.OUTPUT, Buffer.from('three')),
    ]));
    setTimeout(() => {
      c.output(Buffer.from(' four'));
      c.exit(0);
    }, 50);
  });
  const pty = spawn('prog', [], sup.opts());
  pty.onStarted(() => { throw new Error('boom in onStarted'); });
  let calls = 0;
  pty.onData(() => { if (calls++ === 0) throw new Error('boom in onData'); });
  let out = '';
  pty.onData((d) => { out += d; });
  const ev = await exitOf(pty);
  await sleep(20);
  await sup.close();
  return { out, ev };
}

async function error() {
  const sup = await fakeSupervisor((c) => {
    c.started();
    c.event({ type: 'error', code: 'unit_start_failed', message: 'no' });
    c.socket.end();
  });
  const pty = spawn('prog', [], sup.opts());
  pty.onError(() => { throw new Error('boom in onError'); });
  const ev = await exitOf(pty);
  await sleep(20);
  await sup.close();
  return { out: '', ev };
}

async function main() {
  const scenarios = { 'data-started': dataStarted, error };
  const r = await scenarios[process.argv[2]]();
  const { exitCode, error: err } = r.ev;
  process.stdout.write(JSON.stringify({
    runtime: process.versions.bun ? 'bun' : 'node',
    out: r.out, exitCode, errorCode: err ? err.code : null,
    uncaught,
  }));
}

main().catch((e) => { console.error(e); process.exit(1); });
