'use strict';
// UTF-8 of the input and of envelopes: the protocol carries valid UTF-8 only,
// so what write() is given is checked (and copied) before it is queued, and cut
// into INPUT payloads on character boundaries.

const { PtyError } = require('./errors.js');
const { limits } = require('./limits.js');

const utf8Fatal = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function isValidUtf8(bytes) {
  try {
    utf8Fatal.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

// Lone surrogates cannot be encoded as UTF-8; Buffer.from would silently
// replace them with U+FFFD, so they are refused instead.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function inputBytes(data) {
  if (typeof data === 'string') {
    if (LONE_SURROGATE.test(data)) {
      throw new PtyError('bad_utf8', 'write: string contains a lone surrogate (not encodable as UTF-8)');
    }
    return Buffer.from(data, 'utf8');
  }
  if (data instanceof Uint8Array) {
    // A copy: what is checked is what is sent, whatever the caller does with
    // its buffer after write() returned.
    const copy = Buffer.from(data);
    if (!isValidUtf8(copy)) throw new PtyError('bad_utf8', 'write: bytes are not valid UTF-8');
    return copy;
  }
  throw new TypeError('write: data must be a string, Buffer or Uint8Array');
}

// Splits valid UTF-8 into INPUT payloads of at most maxInputPayload bytes, each
// cut on a character boundary so that every frame is valid UTF-8 on its own.
function chunkUtf8(bytes, max = limits.maxInputPayload) {
  const chunks = [];
  let start = 0;
  while (start < bytes.length) {
    let end = Math.min(start + max, bytes.length);
    while (end < bytes.length && (bytes[end] & 0xc0) === 0x80) end--;
    chunks.push(bytes.subarray(start, end));
    start = end;
  }
  return chunks;
}


module.exports = { utf8Fatal, isValidUtf8, LONE_SURROGATE, inputBytes, chunkUtf8 };
