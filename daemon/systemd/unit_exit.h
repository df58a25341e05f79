// How a PTY unit's main process ended, in systemd's words: ExecMainCode,
// ExecMainStatus and the service's Result, as unit_state.h reads them from a
// snapshot. Only systemd's vocabulary lives here; what it means to the client
// is exit_report.h's to decide.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace opencode::daemon {

// systemd's Result of the PTY unit's service (systemd.exec(5), "$SERVICE_RESULT").
// A word this list does not know is kept as systemd said it and passed on.
struct UnitResult {
  enum class Kind : uint8_t {
    kSuccess,
    kProtocol,
    kTimeout,
    kExitCode,
    kSignal,
    kCoreDump,
    kWatchdog,
    kStartLimitHit,
    kResources,
    kOomKill,
    kExecCondition,
    kCleaned,
    kUnknown,
  };
  Kind kind = Kind::kUnknown;
  std::string unknown;  // systemd's word, for kUnknown only

  static UnitResult Parse(std::string_view word);
  // systemd's word again ("success", "oom-kill", or the unknown one).
  std::string_view Text() const noexcept;
};

// How the unit's main process (script) ended, in systemd's words.
struct UnitExit {
  int32_t exec_main_code = 0;    // CLD_EXITED / CLD_KILLED / CLD_DUMPED; 0: never started
  int32_t exec_main_status = 0;  // exit status, or signal number
  UnitResult result;
};

// A collected unit (systemd no longer has it, so its stub's ExecMain* say
// nothing): nothing references a PTY unit and a failed one stays loaded, so
// systemd collected it because it ended inactive, i.e. its main process
// exited 0 or died of a clean signal (TERM, HUP, INT, PIPE) during a stop.
UnitExit CollectedUnitExit();

}  // namespace opencode::daemon
