// systemd's Result words (see unit_exit.h).
#include "daemon/systemd/unit_exit.h"

#include <signal.h>

#include <array>
#include <utility>

namespace opencode::daemon {
namespace {

using Kind = UnitResult::Kind;

constexpr std::array<std::pair<Kind, std::string_view>, 12> kResultWords{{
    {Kind::kSuccess, "success"},
    {Kind::kProtocol, "protocol"},
    {Kind::kTimeout, "timeout"},
    {Kind::kExitCode, "exit-code"},
    {Kind::kSignal, "signal"},
    {Kind::kCoreDump, "core-dump"},
    {Kind::kWatchdog, "watchdog"},
    {Kind::kStartLimitHit, "start-limit-hit"},
    {Kind::kResources, "resources"},
    {Kind::kOomKill, "oom-kill"},
    {Kind::kExecCondition, "exec-condition"},
    {Kind::kCleaned, "cleaned"},
}};

}  // namespace

UnitResult UnitResult::Parse(std::string_view word) {
  for (const auto& [kind, text] : kResultWords)
    if (text == word) return UnitResult{.kind = kind, .unknown = {}};
  return UnitResult{.kind = Kind::kUnknown, .unknown = std::string(word)};
}

std::string_view UnitResult::Text() const noexcept {
  for (const auto& [k, text] : kResultWords)
    if (k == kind) return text;
  return unknown;
}

UnitExit CollectedUnitExit() {
  return UnitExit{.exec_main_code = CLD_EXITED, .exec_main_status = 0,
                  .result = UnitResult{.kind = Kind::kSuccess, .unknown = {}}};
}

}  // namespace opencode::daemon
