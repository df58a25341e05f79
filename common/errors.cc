// Wire names of ErrorCode. Invariant: a name, once shipped, never changes;
// docs/PROTOCOL.md section 8 lists the same strings.
#include "common/errors.h"

namespace opencode {

std::string_view ErrorCodeName(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kBadVersion: return "bad_version";
    case ErrorCode::kUnknownType: return "unknown_type";
    case ErrorCode::kBadReserved: return "bad_reserved";
    case ErrorCode::kFrameTooLarge: return "frame_too_large";
    case ErrorCode::kFrameTooSmall: return "frame_too_small";
    case ErrorCode::kBadStart: return "bad_start";
    case ErrorCode::kBadArgc: return "bad_argc";
    case ErrorCode::kArgTooLong: return "arg_too_long";
    case ErrorCode::kArgvTooLong: return "argv_too_long";
    case ErrorCode::kEmptyCommand: return "empty_command";
    case ErrorCode::kBadSize: return "bad_size";
    case ErrorCode::kBadEnv: return "bad_env";
    case ErrorCode::kBadEnvName: return "bad_env_name";
    case ErrorCode::kEnvTooMany: return "env_too_many";
    case ErrorCode::kEnvTooLong: return "env_too_long";
    case ErrorCode::kNoDescriptor: return "no_descriptor";
    case ErrorCode::kExtraDescriptor: return "extra_descriptor";
    case ErrorCode::kTruncatedControl: return "truncated_control";
    case ErrorCode::kBadControl: return "bad_control";
    case ErrorCode::kNotDirectory: return "not_directory";
    case ErrorCode::kBadUtf8: return "bad_utf8";
    case ErrorCode::kBadSignal: return "bad_signal";
    case ErrorCode::kProtocolState: return "protocol_state";
    case ErrorCode::kBadJson: return "bad_json";
    case ErrorCode::kMissingField: return "missing_field";
    case ErrorCode::kBadField: return "bad_field";
    case ErrorCode::kBadPrefix: return "bad_prefix";
    case ErrorCode::kBadAlphabet: return "bad_alphabet";
    case ErrorCode::kBadLength: return "bad_length";
    case ErrorCode::kNonCanonical: return "non_canonical";
    case ErrorCode::kStartTimeout: return "start_timeout";
    case ErrorCode::kUnauthenticated: return "unauthenticated";
    case ErrorCode::kRootRefused: return "root_refused";
    case ErrorCode::kTooManySessions: return "too_many_sessions";
    case ErrorCode::kTooManyHandshakes: return "too_many_handshakes";
    case ErrorCode::kKernelUnsupported: return "kernel_unsupported";
    case ErrorCode::kUnitStartFailed: return "unit_start_failed";
    case ErrorCode::kUnitPropertyMismatch: return "unit_property_mismatch";
    case ErrorCode::kInputOverflow: return "input_overflow";
    case ErrorCode::kStopFailed: return "stop_failed";
    case ErrorCode::kLaunchFailed: return "launch_failed";
    case ErrorCode::kBadDetach: return "bad_detach";
    case ErrorCode::kTooManyDetachable: return "too_many_detachable";
    case ErrorCode::kScrollbackExhausted: return "scrollback_exhausted";
    case ErrorCode::kBadAttach: return "bad_attach";
    case ErrorCode::kNoSuchSession: return "no_such_session";
    case ErrorCode::kSessionAttached: return "session_attached";
    case ErrorCode::kBadCursor: return "bad_cursor";
    case ErrorCode::kInternal: return "internal";
  }
  return "internal";
}

}  // namespace opencode
