// journald output (see journal.h). sd_journal_sendv never blocks for long:
// it is one datagram to journald's socket (and fails fast without one, as in
// unit tests).
#include "daemon/journal.h"

#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include <array>
#include <string>


namespace opencode::daemon {

void Log(int priority, const LogFields& f, std::string_view message) noexcept {
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

}  // namespace opencode::daemon
