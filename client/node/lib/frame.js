'use strict';
// The session protocol's frames (docs/PROTOCOL.md section 2): the header
// encoder, the strict incremental decoder and the RESIZE and ATTACH payloads. Invariant: a
// declared length above the type's maximum is refused as soon as the 8 header
// bytes are seen, before a byte of its payload is buffered.

const { PROTOCOL_VERSION, FRAME_TYPE, WIRE_LIMITS } = require('./constants.generated.js');
const { limits } = require('./limits.js');

// common/frame.h FrameType, generated.
const FrameType = FRAME_TYPE;

// [min, max] payload bytes per type and direction (docs/PROTOCOL.md section 2;
// common/frame.cc PayloadBounds).
const BOUNDS = Object.freeze({
  fromClient: new Map([
    [FrameType.START, [WIRE_LIMITS.startFixedBytes, limits.maxStartPayload]],
    [FrameType.INPUT, [1, limits.maxInputPayload]],
    [FrameType.SIGNAL, [WIRE_LIMITS.signalPayload, WIRE_LIMITS.signalPayload]],
    [FrameType.STOP, [0, 0]],
    [FrameType.EOF, [0, 0]],
    [FrameType.RESIZE, [WIRE_LIMITS.resizePayload, WIRE_LIMITS.resizePayload]],
    [FrameType.ENV, [4, WIRE_LIMITS.maxEnvPayload]],
    [FrameType.LIST, [0, 0]],
    [FrameType.ATTACH, [WIRE_LIMITS.attachPayload, WIRE_LIMITS.attachPayload]],
  ]),
  fromSupervisor: new Map([
    [FrameType.OUTPUT, [1, limits.maxOutputPayload]],
    [FrameType.EVENT, [2, limits.maxEnvelopeBytes]],
  ]),
});

function encodeFrame(type, payload) {
  const body = payload === undefined ? Buffer.alloc(0) : Buffer.from(payload);
  const frame = Buffer.allocUnsafe(limits.frameHeaderBytes + body.length);
  frame[0] = PROTOCOL_VERSION;
  frame[1] = type;
  frame[2] = 0;
  frame[3] = 0;
  frame.writeUInt32BE(body.length, 4);
  body.copy(frame, limits.frameHeaderBytes);
  return frame;
}

// Incremental strict decoder. push() calls onFrame(type, payload) for every
// complete frame and returns null, or returns an error code as soon as the
// offending header byte has arrived; after an error it refuses everything.
// A payload is never buffered beyond its type's maximum.
class FrameDecoder {
  constructor(direction) {
    if (direction !== 'fromClient' && direction !== 'fromSupervisor') {
      throw new TypeError('direction must be "fromClient" or "fromSupervisor"');
    }
    this._bounds = BOUNDS[direction];
    this._header = Buffer.alloc(limits.frameHeaderBytes);
    this._headerFill = 0;
    this._payload = null;
    this._payloadFill = 0;
    this.rest = null;
    this.error = null;
  }

  get idle() { return this._headerFill === 0 && this._payload === null; }

  // Decodes `chunk`, calling onFrame(type, payload) per complete frame. If
  // onFrame returns true, decoding stops after that frame and the undecoded
  // remainder of the chunk is left in `this.rest` (null otherwise) for the
  // caller to push later. Returns null or a stable error code.
  push(chunk, onFrame) {
    this.rest = null;
    if (this.error) return this.error;
    let i = 0;
    const stop = () => {
      if (i < chunk.length) this.rest = chunk.subarray(i);
      return null;
    };
    while (i < chunk.length) {
      if (this._payload === null) {
        const byte = chunk[i++];
        const at = this._headerFill;
        this._header[this._headerFill++] = byte;
        if (at === 0 && byte !== PROTOCOL_VERSION) return this._fail('bad_version');
        if (at === 1 && !this._bounds.has(byte)) return this._fail('unknown_type');
        if ((at === 2 || at === 3) && byte !== 0) return this._fail('bad_reserved');
        if (this._headerFill < limits.frameHeaderBytes) continue;
        const type = this._header[1];
        const length = this._header.readUInt32BE(4);
        const [min, max] = this._bounds.get(type);
        if (length > max) return this._fail('frame_too_large');
        if (length < min) return this._fail('frame_too_small');
        this._headerFill = 0;
        if (length === 0) {
          if (onFrame(type, Buffer.alloc(0)) === true) return stop();
          continue;
        }
        if (chunk.length - i >= length) {  // whole payload in this chunk: no copy
          const payload = chunk.subarray(i, i + length);
          i += length;
          if (onFrame(type, payload) === true) return stop();
          continue;
        }
        this._payload = Buffer.allocUnsafe(length);
        this._payloadFill = 0;
        this._payloadType = type;
      }
      const n = Math.min(this._payload.length - this._payloadFill, chunk.length - i);
      chunk.copy(this._payload, this._payloadFill, i, i + n);
      this._payloadFill += n;
      i += n;
      if (this._payloadFill === this._payload.length) {
        const payload = this._payload;
        this._payload = null;
        if (onFrame(this._payloadType, payload) === true) return stop();
      }
    }
    return null;
  }

  _fail(code) {
    this.error = code;
    this._payload = null;
    return code;
  }
}

function resizePayload(cols, rows) {
  const p = Buffer.alloc(4);
  p.writeUInt16BE(cols, 0);
  p.writeUInt16BE(rows, 2);
  return p;
}

// ATTACH (docs/PROTOCOL.md section 10.4): the session id (32 lowercase hex
// ASCII bytes, checked by the caller) then the cursor, u64 big-endian.
function attachPayload(session, cursor) {
  const p = Buffer.alloc(WIRE_LIMITS.attachPayload);
  p.write(session, 0, WIRE_LIMITS.sessionIdHexBytes, 'latin1');
  p.writeBigUInt64BE(BigInt(cursor), WIRE_LIMITS.sessionIdHexBytes);
  return p;
}

module.exports = { FrameType, BOUNDS, encodeFrame, FrameDecoder, resizePayload, attachPayload };
