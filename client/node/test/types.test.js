'use strict';
// index.d.ts against the module: every member the IPty interface declares
// exists on a Pty, every public member of a Pty is declared, and the
// ExitEvent keys are the keys onExit delivers. (No TypeScript compiler here:
// the declarations are read as text, one member per line.)
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { spawn, limits } = require('..');
const { fakeSupervisor, exitOf } = require('../test-support/fake.js');

const dts = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8');

// Member names of `export interface NAME { ... }`, comments removed.
function members(name) {
  const m = new RegExp(`export interface ${name} \\{([^]*?)\\n\\}`).exec(dts);
  assert.ok(m, `interface ${name} in index.d.ts`);
  const body = m[1].replace(/\/\*[^]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  const names = new Set();
  for (const line of body.split('\n')) {
    const d = /^\s*(?:readonly\s+)?([A-Za-z_$][\w$]*)\??\s*[(:]/.exec(line);
    if (d) names.add(d[1]);
  }
  return [...names].sort();
}

test('index.d.ts: IPty declares exactly the public members of a Pty', async (t) => {
  const sup = await fakeSupervisor((c) => { c.started(); c.exit(0); });
  t.after(sup.close);
  const pty = spawn('prog', [], sup.opts());
  const runtime = new Set();
  for (const k of Object.keys(pty)) if (!k.startsWith('_')) runtime.add(k);
  for (const k of Object.getOwnPropertyNames(Object.getPrototypeOf(pty))) {
    if (!k.startsWith('_') && k !== 'constructor') runtime.add(k);
  }
  const declared = members('IPty');
  assert.deepEqual(declared, [...runtime].sort());
  const ev = await exitOf(pty);
  assert.deepEqual(Object.keys(ev).sort(), members('ExitEvent'));
});

test('index.d.ts: the limits and the encoding option it names exist', () => {
  assert.match(dts, /limits\.destroyTimeoutMs \(45 s/);
  assert.equal(limits.destroyTimeoutMs, 45000);
  assert.match(dts, /encoding\?: BufferEncoding \| null;/);
});

test('node-pty.d.ts: IPty declares exactly the public members of a drop-in PTY', async (t) => {
  const nodePty = require('../node-pty.js');
  const text = fs.readFileSync(path.join(__dirname, '..', 'node-pty.d.ts'), 'utf8');
  const m = /export interface IPty \{([^]*?)\n\}/.exec(text);
  assert.ok(m, 'interface IPty in node-pty.d.ts');
  const body = m[1].replace(/\/\*[^]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  const declared = new Set();
  for (const line of body.split('\n')) {
    const d = /^\s*(?:readonly\s+)?([A-Za-z_$][\w$]*)\??\s*[(:]/.exec(line);
    if (d) declared.add(d[1]);
  }
  const sup = await fakeSupervisor((c) => { c.started(); c.exit(0); });
  t.after(sup.close);
  const pty = nodePty.spawn('prog', [], sup.opts());
  const runtime = new Set();
  for (const k of Object.keys(pty)) if (!k.startsWith('_')) runtime.add(k);
  for (const k of Object.getOwnPropertyNames(Object.getPrototypeOf(pty))) {
    if (!k.startsWith('_') && k !== 'constructor') runtime.add(k);
  }
  assert.deepEqual([...declared].sort(), [...runtime].sort());
  const ev = await new Promise((r) => pty.onExit(r));
  assert.deepEqual(Object.keys(ev).sort(), ['exitCode', 'signal']);
});
