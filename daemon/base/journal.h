// Structured journald logging of the supervisor. Invariant: only the fields
// below are ever logged; there is no field for argv contents or PTY bytes, and
// callers pass fixed messages plus reasons from systemd or the kernel.
#pragma once

#include <sys/types.h>
#include <syslog.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/errors.h"
#include "common/limits.h"

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

// Tests only: while set, entries go to `sink` instead of the journal (nullptr:
// the journal again). Tests read what the supervisor says with it; the
// supervisor never sets it.
using LogSink = void (*)(int priority, const LogFields& f, std::string_view message);
void SetLogSinkForTesting(LogSink sink) noexcept;

// One limiter per log line a peer can trigger (a bus signal, a connection):
// at most kPeerLogBurst entries per kPeerLogIntervalUsec of CLOCK_MONOTONIC;
// the first entry written after dropped ones says how many were dropped.
class LogLimiter {
 public:
  // True if an entry may be written at `now_usec`; then `*dropped` is the
  // number of entries refused since the last one written.
  bool Allow(uint64_t now_usec, uint64_t* dropped) noexcept;
  uint64_t dropped_total() const noexcept { return dropped_total_; }

 private:
  uint64_t window_start_ = 0;
  size_t in_window_ = 0;
  uint64_t dropped_ = 0;
  uint64_t dropped_total_ = 0;
  bool started_ = false;
};

// Log() through `limiter` (now = CLOCK_MONOTONIC); appends
// " (N similar entries suppressed)" after a stretch of dropped ones.
void LogLimited(LogLimiter& limiter, int priority, const LogFields& f, std::string_view message) noexcept;
void LogLimited(LogLimiter& limiter, int priority, std::string_view message) noexcept;

}  // namespace opencode::daemon
