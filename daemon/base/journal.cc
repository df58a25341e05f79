// journald output (see journal.h). sd_journal_sendv never blocks for long:
// it is one datagram to journald's socket (and fails fast without one, as in
// unit tests).
#include "daemon/base/journal.h"

#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include <time.h>

#include <array>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/base/absl_compat.h"


namespace opencode::daemon {
namespace {
LogSink log_sink = nullptr;
}  // namespace

void SetLogSinkForTesting(LogSink sink) noexcept { log_sink = sink; }

void Log(int priority, const LogFields& f, std::string_view message) noexcept {
  if (log_sink != nullptr) return log_sink(priority, f, message);
  std::array<std::string, 9> fields;
  size_t n = 0;
  auto add = [&](std::string_view key, std::string_view value) {
    fields[n].reserve(key.size() + value.size());
    fields[n].append(key).append(value);
    ++n;
  };
  add("MESSAGE=", message);
  add("PRIORITY=", std::to_string(priority));
  if (!f.session.empty()) add("SESSION=", f.session);
  if (!f.unit.empty()) add("UNIT=", f.unit);
  if (!f.invocation.empty()) add("INVOCATION_ID=", f.invocation);
  if (!f.client_invocation.empty()) add("CLIENT_INVOCATION_ID=", f.client_invocation);
  if (f.peer_pid > 0) add("PEER_PID=", std::to_string(f.peer_pid));
  if (f.peer_uid != static_cast<uid_t>(-1)) add("PEER_UID=", std::to_string(f.peer_uid));
  if (f.error != ErrorCode::kOk) add("ERROR_CODE=", ErrorCodeName(f.error));
  std::array<iovec, 9> iov;
  for (size_t i = 0; i < n; ++i) iov[i] = {fields[i].data(), fields[i].size()};
  sd_journal_sendv(iov.data(), static_cast<int>(n));
}

void Log(int priority, std::string_view message) noexcept { Log(priority, LogFields{}, message); }

bool LogLimiter::Allow(uint64_t now_usec, uint64_t* dropped) noexcept {
  if (!started_ || now_usec - window_start_ >= limits::kPeerLogIntervalUsec) {
    started_ = true;
    window_start_ = now_usec;
    in_window_ = 0;
  }
  if (in_window_ >= limits::kPeerLogBurst) {
    ++dropped_;
    ++dropped_total_;
    return false;
  }
  ++in_window_;
  *dropped = dropped_;
  dropped_ = 0;
  return true;
}

void LogLimited(LogLimiter& limiter, int priority, const LogFields& f, std::string_view message) noexcept {
  struct timespec ts = {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = uint64_t(ts.tv_sec) * 1000000 + uint64_t(ts.tv_nsec) / 1000;
  uint64_t dropped = 0;
  if (!limiter.Allow(now, &dropped)) return;
  if (dropped == 0) return Log(priority, f, message);
  Log(priority, f, absl::StrCat(AV(message), " (", dropped, " similar entries suppressed)"));
}

void LogLimited(LogLimiter& limiter, int priority, std::string_view message) noexcept {
  LogLimited(limiter, priority, LogFields{}, message);
}

}  // namespace opencode::daemon
