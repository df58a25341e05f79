'use strict';
// vm-tests/node/checks.js: the check library of the JavaScript stand-ins
// (smoke-cases.js, resize-app.js, signals-app.js, adapter-app.js), the
// counterpart of vm-tests/lib/check.sh. A check is one JSON line
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

module.exports = { checks, sleep, until, withTimeout };
