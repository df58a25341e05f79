'use strict';
// vm-tests/node/checks.js: the check library of the JavaScript stand-ins
// (smoke-cases.js, resize-app.js, signals-app.js, adapter-app.js), the
// counterpart of vm-tests/lib/check.sh, and the session they open through the
// module (openSession). A check is one JSON line
// {name, ok, evidence} appended to the file the suite's shell script turns
// into PASS/FAIL lines of checks.tsv (written as it happens, so a hang still
// leaves the evidence before it), and one PASS/FAIL line on stdout.
const fs = require('fs');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// checks(OUT): record(name, ok, evidence) appends to OUT; exitCode() is 1 once
// any check failed, else 0.
function checks(out) {
  let failures = 0;
  return {
    record(name, ok, evidence) {
      if (!ok) failures++;
      const line = JSON.stringify({ name, ok: !!ok, evidence: evidence === undefined ? null : evidence });
      fs.appendFileSync(out, line + '\n');
      process.stdout.write(`${ok ? 'PASS' : 'FAIL'}  ${name}\n`);
    },
    exitCode: () => (failures === 0 ? 0 : 1),
  };
}

// until(pred, ms, step): asks pred (it may be async) every `step` ms until it
// is truthy or `ms` passed, and returns its last answer. A hang guard: the
// caller judges the answer, never the time.
async function until(pred, ms, step = 20) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v || Date.now() > end) return v;
    await sleep(step);
  }
}

// withTimeout(promise, ms, what): the promise, or a rejection "timeout: what".
function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([promise, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`timeout: ${what}`)), ms); })])
    .finally(() => clearTimeout(t));
}

// openSession(pty, file, args, opts): one PTY opened with the module under
// test (`pty` is what the stand-in required), with everything it emits
// collected: `output` (unless opts.noListener: a case that attaches its own
// listener late), `notices`, `errors`, `started` (the envelope); `exit`
// resolves with the exit event, also kept in `ended`; `startedP` with the
// started envelope, or null when the session ended before it. The other
// opts go to spawn.
function openSession(pty, file, args, opts = {}) {
  const { noListener, ...spawnOpts } = opts;
  const p = pty.spawn(file, args, spawnOpts);
  const s = { p, output: '', notices: [], errors: [], started: null, ended: null };
  p.onStarted((e) => { s.started = e; });
  p.onNotice((n) => s.notices.push(n));
  p.onError((e) => s.errors.push(e));
  s.exit = new Promise((r) => p.onExit((e) => { s.ended = e; r(e); }));
  s.startedP = new Promise((r) => { p.onStarted(r); p.onExit(() => r(null)); });
  if (!noListener) p.onData((d) => { s.output += d; });
  return s;
}

module.exports = { checks, sleep, until, withTimeout, openSession };
