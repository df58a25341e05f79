// The terminal envelope's fields from what is known at a session's end (see
// exit_report.h).
#include "daemon/session/exit_report.h"

#include <signal.h>
#include <string.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/launch.h"

namespace opencode::daemon {
namespace {

using Kind = UnitResult::Kind;

// `result` in systemd's words, about the command: from an exact report
// success / exit-code / signal / core-dump; otherwise systemd's Result of the
// unit, except that a reported signal is never a `success` (script exits 0
// when it caught the stop's TERM, which says nothing about the command).
// A command killed by SIGKILL in a unit systemd saw the kernel's OOM killer
// hit is `oom-kill`: the exact status says KILL, only systemd knows why.
std::string ResultText(const std::optional<CommandExit>& exact, const UnitResult& unit_result,
                       bool signal_reported) {
  if (exact) {
    switch (exact->how) {
      case ExitHow::kExited: return exact->status == 0 ? "success" : "exit-code";
      case ExitHow::kKilled:
        return exact->signo == SIGKILL && unit_result.kind == Kind::kOomKill ? "oom-kill" : "signal";
      case ExitHow::kDumped: return "core-dump";
    }
  }
  if (signal_reported && unit_result.kind == Kind::kSuccess) return "signal";
  return std::string(unit_result.Text());
}

ExitReport LaunchFailed(uint8_t status) {
  ExitReport r;
  r.type = ExitReport::Type::kLaunchFailed;
  r.error = ErrorCode::kLaunchFailed;
  r.reason = LaunchFailureName(status);
  r.status = status;
  return r;
}

}  // namespace

std::string SignalText(int signo) {
  const char* name = sigabbrev_np(signo);
  return name != nullptr ? std::string(name) : absl::StrCat(signo);
}

ExitReport DecideExit(const ExitFacts& f) {
  // A STOP that reached the unit before the command ran interrupts the
  // launcher, which then reports a failure of its own (found by issue
  // #17's soak: STOP right after `started` gave launch_failed "monitor").
  // The client asked for the stop: it ends as a stop does, below.
  bool stopped_before_exec = f.stop_requested && !f.executed;
  if (f.launch_failure && !stopped_before_exec) return LaunchFailed(*f.launch_failure);

  ExitReport r;
  bool signal_reported = false;
  if (f.command) {
    // The command's own wait status, from its parent.
    if (f.command->how == ExitHow::kExited) {
      r.code = f.command->status;
    } else {
      r.signal = SignalText(f.command->signo);
      signal_reported = true;
    }
  } else {
    // No report: the launcher failed before it could say so, or the
    // command's parent was killed (script's SIGKILL 2 s after a stop's
    // TERM, memory pressure). The unit's view, read so that a killed command
    // is never an exit code (docs/PROTOCOL.md section 4).
    switch (f.unit.exec_main_code) {
      case CLD_EXITED: r.code = f.unit.exec_main_status; break;
      case CLD_KILLED:
      case CLD_DUMPED: r.signal = SignalText(f.unit.exec_main_status); break;
      default: break;  // never started (code 0): code and signal stay null
    }
    if (!f.executed && !f.stop_requested && r.code && *r.code >= 0 && *r.code <= 255 &&
        !LaunchFailureName(uint8_t(*r.code)).empty())
      return LaunchFailed(uint8_t(*r.code));
    if (r.code && *r.code > 128 && *r.code <= 128 + kMaxSignalNumber) {
      // script -e: its child (the command's parent) died of signal code-128.
      r.signal = SignalText(int(*r.code - 128));
      r.code.reset();
    }
    if (f.stop_requested && r.signal.empty()) {
      // script ended on the stop's TERM; the command outlived script's 2 s:
      // systemd's final SIGKILL (Result=timeout) or TERM it died of later.
      r.signal = f.unit.result.kind == Kind::kTimeout ? "KILL" : "TERM";
      r.code.reset();
    }
    signal_reported = !r.signal.empty();
  }
  r.result = ResultText(f.command, f.unit.result, signal_reported);
  r.exact = f.command.has_value();
  return r;
}

}  // namespace opencode::daemon
