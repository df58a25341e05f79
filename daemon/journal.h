// Structured journald logging of the supervisor. Invariant: only the fields
// below are ever logged; there is no field for argv contents or PTY bytes, and
// callers pass fixed messages plus reasons from systemd or the kernel.
#pragma once

#include <sys/types.h>
#include <syslog.h>

#include <string_view>

#include "common/errors.h"

namespace opencode::daemon {

struct LogFields {
  std::string_view session;     // SESSION= (32 hex)
  std::string_view unit;        // UNIT= (the PTY unit)
  std::string_view invocation;  // INVOCATION_ID= (the PTY unit's, 32 hex)
  std::string_view client_invocation;  // CLIENT_INVOCATION_ID= (opencode-v2.service's)
  pid_t peer_pid = 0;           // PEER_PID= (0: unknown)
  uid_t peer_uid = static_cast<uid_t>(-1);  // PEER_UID= (-1: unknown)
  ErrorCode error = ErrorCode::kOk;         // ERROR_CODE= (stable name)
};

// One journal entry: MESSAGE=, PRIORITY= and the set fields of `f`.
void Log(int priority, const LogFields& f, std::string_view message) noexcept;
// An entry without session context.
void Log(int priority, std::string_view message) noexcept;

}  // namespace opencode::daemon
