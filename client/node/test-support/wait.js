'use strict';
// Waiting in the module's tests, shared by every test file. Each wait is a
// hang guard, not a measurement: HANG_GUARD_MS is far above anything a test
// waits for (milliseconds on an idle machine; the longest, destroy(), is
// limits.destroyTimeoutMs, added on top where it applies), so a loaded host
// only makes a test slower, and only a hang (a missing feature) fails it,
// with a message naming what it waited for. The runners get a per-test limit
// above it (tests.cmake: bun test --timeout; node --test has none).

const HANG_GUARD_MS = 60_000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Settles like `promise`; rejects naming `what` if it has not settled in `ms`.
function within(promise, what, ms = HANG_GUARD_MS) {
  let t;
  return Promise.race([promise, new Promise((_, rej) => {
    t = setTimeout(() => rej(new Error(`${what}: nothing within ${ms} ms`)), ms);
  })]).finally(() => clearTimeout(t));
}

// Resolves once pred() is true (polled every 5 ms); throws naming `what` after `ms`.
async function until(pred, what, ms = HANG_GUARD_MS) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

module.exports = { HANG_GUARD_MS, sleep, within, until };
