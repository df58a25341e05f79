'use strict';
// Strict parsing of EVENT envelopes (docs/PROTOCOL.md section 4).
const test = require('node:test');
const assert = require('node:assert/strict');
const { protocol, PtyError } = require('..');
const { STARTED } = require('../test-support/fake.js');

const parse = (s) => protocol.parseEnvelope(Buffer.isBuffer(s) ? s : Buffer.from(s));
const code = (s) => {
  try {
    parse(s);
  } catch (e) {
    assert.ok(e instanceof PtyError);
    return e.code;
  }
  return 'ok';
};

test('each envelope type parses with its required fields', () => {
  const s = parse(JSON.stringify(STARTED));
  assert.equal(s.type, 'started');
  assert.equal(s.unit, STARTED.unit);
  assert.deepEqual({ ...parse('{"type":"exit","code":7,"signal":null,"result":"exit-code"}') },
    { type: 'exit', code: 7, signal: null, result: 'exit-code' });
  assert.equal(parse('{"type":"exit","code":null,"signal":"KILL"}').signal, 'KILL');
  assert.equal(parse('{"type":"exit","code":-1,"signal":null}').code, -1);
  assert.equal(parse('{"type":"error","code":"start_timeout","message":"no START within 5 s"}').code, 'start_timeout');
  assert.equal(parse('{"type":"notice","code":"signal_sent","signal":"INT"}').signal, 'INT');
  // Whitespace, escapes and unknown keys are fine; unknown keys are kept.
  const n = parse(' {\t"type" : "notice",\n"code":"x","extra":"a\\u00e9\\ud834\\udd1e\\n\\"","flag":true} ');
  assert.equal(n.extra, 'aé𝄞\n"');
  assert.equal(n.flag, true);
  assert.equal(parse(Buffer.from('{"type":"notice","code":"x","m":"ü€𝄞"}')).m, 'ü€𝄞');
});

test('malformed JSON is bad_json', () => {
  for (const s of [
    '', '{', '}', '[]', '"x"', 'null', '{"type":"notice","code":"x"} ', // trailing space is fine (checked below)
  ].slice(0, 6)) assert.equal(code(s), 'bad_json', JSON.stringify(s));
  assert.equal(code('{"type":"notice","code":"x"} \n'), 'ok');
  const bad = [
    '{"type":"notice","code":"x"}x',             // bytes after the object
    '{"type":"notice","code":"x"}{}',
    '{"type":"notice","code":"x",}',             // trailing comma
    '{"type":"notice","code":"x","n":{"a":1}}',  // nesting
    '{"type":"notice","code":"x","n":[1]}',
    '{"type":"notice","code":"x","type":"exit"}', // duplicate key
    '{"type":"notice","code":"x","code":"y"}',
    '{"type":"notice","code":"x","n":1.5}',      // not an integer
    '{"type":"notice","code":"x","n":1e3}',
    '{"type":"notice","code":"x","n":01}',
    '{"type":"notice","code":"x","n":9007199254740993}',
    '{"type":"notice","code":"x","n":NaN}',
    '{"type":"notice","code":"x","n":\'a\'}',
    '{type:"notice"}',
    '{"type":"notice","code":"x","s":"a\u0001"}', // raw control character
    '{"type":"notice","code":"x","s":"\\x"}',     // bad escape
    '{"type":"notice","code":"x","s":"\\ud800"}', // lone surrogate escape
    '{"type":"notice","code":"x","s":"\\udc00"}',
    '{"type":"notice","code":"x","s":"\\ud800\\u0041"}',
    '{"type":"notice","code":"x","s":"\\u12"}',
    '{"type":"notice","code":"x","s":"abc',
    '{"type":"notice","code":"x","b":tru}',
  ];
  for (const s of bad) assert.equal(code(s), 'bad_json', s);
  // Invalid UTF-8 bytes.
  assert.equal(code(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])), 'bad_json');
  assert.equal(code(Buffer.from('{"type":"notice","code":"\xed\xa0\x80"}', 'latin1')), 'bad_json');
});

test('required fields are checked per type', () => {
  assert.equal(code('{"code":"x"}'), 'missing_field');
  assert.equal(code('{"type":"bogus"}'), 'bad_field');
  assert.equal(code('{"type":7}'), 'bad_field');
  assert.equal(code('{"type":"notice"}'), 'missing_field');
  assert.equal(code('{"type":"notice","code":7}'), 'bad_field');
  assert.equal(code('{"type":"exit","code":0}'), 'missing_field');
  assert.equal(code('{"type":"exit","code":"0","signal":null}'), 'bad_field');
  assert.equal(code('{"type":"exit","code":0,"signal":9}'), 'bad_field');
  assert.equal(code('{"type":"error","code":"x"}'), 'missing_field');
  assert.equal(code('{"type":"error","code":"Not A Code","message":""}'), 'bad_field');
  for (const key of Object.keys(STARTED).filter((k) => k !== 'type')) {
    const missing = { ...STARTED };
    delete missing[key];
    assert.equal(code(JSON.stringify(missing)), 'missing_field', key);
    assert.equal(code(JSON.stringify({ ...STARTED, [key]: STARTED[key].toUpperCase() })), 'bad_field', key);
    assert.equal(code(JSON.stringify({ ...STARTED, [key]: STARTED[key] + '0' })), 'bad_field', key);
  }
});

test('an envelope above 4096 bytes is refused', () => {
  const base = '{"type":"notice","code":"x","pad":""}';
  const fits = base.replace('""', `"${'a'.repeat(4096 - base.length)}"`);
  assert.equal(Buffer.byteLength(fits), 4096);
  assert.equal(code(fits), 'ok');
  assert.equal(code(fits.replace('"a', '"aa')), 'frame_too_large');
});
