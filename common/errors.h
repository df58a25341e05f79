// Stable, machine-readable error codes of the session protocol. Invariant: the
// string of a code never changes once shipped (clients match on it); every
// decoder in common/ reports failures with one of these, and docs/PROTOCOL.md
// lists each with its meaning.
#pragma once

#include <string_view>

namespace opencode {

enum class ErrorCode {
  kOk = 0,
  // framing
  kBadVersion,       // version byte is not kProtocolVersion
  kUnknownType,      // frame type unknown, or not allowed in this direction
  kBadReserved,      // reserved header bits are not zero
  kFrameTooLarge,    // declared length above the type's maximum
  kFrameTooSmall,    // declared length below the type's minimum
  // start frame
  kBadStart,         // start payload malformed (truncated, trailing bytes, flags)
  kBadArgc,          // argc zero or above kMaxArgs
  kArgTooLong,       // one argument above kMaxArgBytes
  kArgvTooLong,      // all arguments together above kMaxArgvTotalBytes
  kEmptyCommand,     // argv[0] is empty
  kBadSize,          // cols/rows outside 1..kMaxCols/kMaxRows
  // environment overlay (ENV frame, common/env_overlay.h)
  kBadEnv,           // ENV payload malformed (truncated, trailing bytes, no '=', NUL, a name twice),
                     // or another frame where ENV was due
  kBadEnvName,       // a name is not [A-Za-z_][A-Za-z0-9_]* of at most kMaxEnvNameBytes
  kEnvTooMany,       // more than kMaxEnvVars entries
  kEnvTooLong,       // one entry above kMaxEnvEntryBytes, or all above kMaxEnvTotalBytes
  // descriptors
  kNoDescriptor,     // start frame arrived without its directory descriptor
  kExtraDescriptor,  // more than one descriptor, or one outside the start frame
  kTruncatedControl, // MSG_CTRUNC: control data truncated
  kBadControl,       // a control message that is not SCM_RIGHTS
  kNotDirectory,     // the passed descriptor is not a directory
  // input / control from the client
  kBadUtf8,          // INPUT payload is not valid UTF-8
  kBadSignal,        // SIGNAL payload not in the allowlist
  kProtocolState,    // frame not allowed in the current session state
  // envelopes
  kBadJson,          // envelope is not a well-formed flat JSON object
  kMissingField,     // envelope lacks a field its type requires
  kBadField,         // envelope field has the wrong JSON type or value
  // base64url argument codec
  kBadPrefix,        // argument does not start with 'a'
  kBadAlphabet,      // character outside [A-Za-z0-9_-] (padding included)
  kBadLength,        // encoded length = 1 (mod 4)
  kNonCanonical,     // non-zero trailing bits
  // supervisor
  kStartTimeout,        // start frame did not arrive within the deadline
  kUnauthenticated,     // peer is not the MainPID of the client unit
  kRootRefused,         // peer uid 0
  kTooManySessions,     // kMaxSessions reached
  kTooManyHandshakes,   // kMaxPendingHandshakes reached (or near it, for a peer that is not the recent MainPID)
  kKernelUnsupported,   // the kernel has no SO_PEERPIDFD (Linux < 6.5): every connection is refused
  kUnitStartFailed,     // StartTransientUnit failed
  kUnitPropertyMismatch,// systemd ignored or weakened a requested property
  kInputOverflow,       // input queue full (should not happen with a conforming client)
  kStopFailed,          // StopUnit failed, or the unit did not stop (limits.h kStopRequestDeadlineUsec)
  kLaunchFailed,        // the launcher refused or could not prepare the command; it never ran
  // detachable sessions (docs/PROTOCOL.md section 10)
  kBadDetach,           // START's grace or scrollback outside its bounds
  kTooManyDetachable,   // kMaxDetachableSessions detachable sessions already exist
  kScrollbackExhausted, // the rings would exceed kMaxScrollbackTotalBytes
  kBadAttach,           // ATTACH payload malformed (the id is not 32 lowercase hex)
  kNoSuchSession,       // ATTACH names no detachable session of this supervisor
  kSessionAttached,     // ATTACH names a session that has a connection
  kBadCursor,           // ATTACH's cursor is past the session's last byte
  kInternal,            // supervisor-side failure; see the journal
};

// The wire name of a code ("bad_version", ...). Never empty.
std::string_view ErrorCodeName(ErrorCode code) noexcept;

}  // namespace opencode
