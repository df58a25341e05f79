'use strict';
// Every bound the module keeps, in one frozen object (exported as `limits`).
// The wire format's and the supervisor's come from common/limits.h through
// constants.generated.js; the module's own (from maxBufferedOutputBytes on)
// are written here, each with its reason, and documented in README.md.

const { WIRE_LIMITS } = require('./constants.generated.js');

const limits = Object.freeze({
  frameHeaderBytes: WIRE_LIMITS.frameHeaderBytes,
  maxInputPayload: WIRE_LIMITS.maxInputPayload,
  maxOutputPayload: WIRE_LIMITS.maxOutputPayload,
  maxEnvelopeBytes: WIRE_LIMITS.maxEnvelopeBytes,
  maxStartPayload: WIRE_LIMITS.maxStartPayload,
  maxArgs: WIRE_LIMITS.maxArgs,
  maxArgBytes: WIRE_LIMITS.maxArgBytes,
  maxArgvTotalBytes: WIRE_LIMITS.maxArgvTotalBytes,
  // The extraEnv overlay (docs/PROTOCOL.md section 3a).
  maxEnvVars: WIRE_LIMITS.maxEnvVars,
  maxEnvNameBytes: WIRE_LIMITS.maxEnvNameBytes,
  maxEnvEntryBytes: WIRE_LIMITS.maxEnvEntryBytes,
  maxEnvTotalBytes: WIRE_LIMITS.maxEnvTotalBytes,
  maxCols: WIRE_LIMITS.maxCols,
  maxRows: WIRE_LIMITS.maxRows,
  defaultCols: WIRE_LIMITS.defaultCols,
  defaultRows: WIRE_LIMITS.defaultRows,
  // The supervisor's admission caps (error codes too_many_sessions and
  // too_many_handshakes). The module keeps at most maxPendingHandshakes of
  // its own sessions per socket between connect and `started`; further
  // spawns wait their turn (state 'connecting'). maxSessions is not queued:
  // beyond it the supervisor refuses with too_many_sessions.
  // maxPendingHandshakes is the supervisor's kHandshakePressure (half of its
  // kMaxPendingHandshakes, 16): another same-UID process that connects in a
  // loop can hold only the slots below that mark, so this many of ours always
  // get in.
  maxSessions: WIRE_LIMITS.maxSessions,
  maxPendingHandshakes: WIRE_LIMITS.handshakePressure,
  // Detachable sessions (docs/PROTOCOL.md section 10): spawn's
  // detachable.graceSeconds and scrollbackBytes (bad_detach outside), the
  // ring size when scrollbackBytes is absent, the ATTACH payload and its id,
  // and what list() keeps: at most maxDetachableSessions `session`
  // envelopes of at most maxListEntryBytes each.
  maxDetachGraceSec: WIRE_LIMITS.maxDetachGraceSec,
  minScrollbackBytes: WIRE_LIMITS.minScrollbackBytes,
  maxScrollbackBytes: WIRE_LIMITS.maxScrollbackBytes,
  defaultScrollbackBytes: WIRE_LIMITS.defaultScrollbackBytes,
  maxDetachableSessions: WIRE_LIMITS.maxDetachableSessions,
  sessionIdHexBytes: WIRE_LIMITS.sessionIdHexBytes,
  attachPayload: WIRE_LIMITS.attachPayload,
  maxListEntryBytes: WIRE_LIMITS.maxListEntryBytes,
  // Output held for the application while it has no data listener or is
  // paused. When reached, decoding stops and the socket is no longer read, so
  // the supervisor's queue fills and it stops reading the PTY: the command
  // blocks, nothing is dropped. The OUTPUT frame that crosses it (at most
  // 64 KiB) lands on top of it.
  maxBufferedOutputBytes: 1024 * 1024,
  // Largest single write() and the most input that may wait unsent in this
  // process (frames not yet taken by the kernel); beyond it write() throws.
  maxWriteBytes: 1024 * 1024,
  // (plus the 64 frame headers of one maximal write)
  maxQueuedInputBytes: 1024 * 1024 + 64 * 8,
  // write() returns false above this much unsent input (like a stream's
  // highWaterMark); onDrain fires when it has been sent.
  inputHighWaterMark: 64 * 1024,
  // The helper sends one frame and exits: it has this long before it is killed.
  helperTimeoutMs: 10 * 1000,
  // After a helper failure, how long to wait for the supervisor's error
  // envelope that explains it.
  helperFailureGraceMs: 1000,
  // Helper stderr kept for error messages.
  maxHelperStderrBytes: 4 * 1024,
  // destroy() waits this long for the terminal envelope after its SIGNAL HUP
  // and STOP, then drops the connection (error destroy_timeout). The SIGNAL
  // is handed to the unit channel at once (no bus call); after the STOP the
  // unit is finished within kStopRequestDeadlineUsec (20 s, else stop_failed),
  // proven gone within kCleanupDeadlineUsec (15 s) and its PTY stream ends
  // within kStreamEofDeadlineUsec (5 s) before the exit is sent: 40 s, plus
  // 5 s of margin.
  destroyTimeoutMs: 45 * 1000,
  // destroy() sends STOP only if the command has not ended this long after
  // its SIGHUP: a STOP right behind the SIGNAL raced it (systemd's TERM often
  // reached the command first, measured: 7 ms), and node-pty's destroy()
  // reports the HUP. A command that ignores HUP is stopped after it.
  destroyHupGraceMs: 500,
  // Largest pid Linux can hand out (PID_MAX_LIMIT on 64-bit, 2^22): a
  // command_started notice with a pid above it is refused as bad_field.
  maxPid: 4 * 1024 * 1024,
});

module.exports = { limits };
