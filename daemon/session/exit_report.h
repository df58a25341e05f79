// What a session's end means to the client: from the command's own report
// (unit channel), systemd's view of the unit and whether the client asked for
// a STOP, the fields of the one terminal envelope (exit, or launch_failed).
// Pure: no sd-event, no socket, no Session; the session decides when, this
// file decides what. Invariant: a killed command is never an exit code, a
// stopped one never a success, and a launcher status is a launch failure only
// when the command never ran (docs/PROTOCOL.md section 4).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/channel_message.h"
#include "common/errors.h"
#include "daemon/systemd/unit_exit.h"

namespace opencode::daemon {

// How the command ended, as its parent inside the unit reported it.
struct CommandExit {
  ExitHow how = ExitHow::kExited;
  uint8_t status = 0;  // kExited
  uint8_t signo = 0;   // kKilled / kDumped
};

struct ExitFacts {
  // What the unit channel carried; all empty without a channel.
  std::optional<CommandExit> command;     // 'X'
  std::optional<uint8_t> launch_failure;  // 'F'
  bool executed = false;                  // 'E'
  UnitExit unit;
  bool stop_requested = false;
};

struct ExitReport {
  enum class Type : uint8_t { kExit, kLaunchFailed };
  Type type = Type::kExit;
  // kExit
  std::optional<int64_t> code;  // null when the command did not exit
  std::string signal;           // "KILL", "34"; empty is null
  std::string result;           // systemd's words, about the command
  bool exact = false;           // from the command's own report
  // kLaunchFailed (the error launch_failed)
  ErrorCode error = ErrorCode::kOk;
  std::string_view reason;  // LaunchFailureName(status)
  uint8_t status = 0;
};

ExitReport DecideExit(const ExitFacts& facts);

// "SEGV", or the number for a signal without a name (real-time signals).
std::string SignalText(int signo);

}  // namespace opencode::daemon
