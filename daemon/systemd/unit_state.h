// Pure readings of a PTY unit's snapshot (GetAll of Unit + Service): has its
// start finished, has it finished running, and how did its main process end.
// Invariant: these decisions are made only from query answers, never from a
// signal, and a missing or mistyped property is "not known yet", never a
// guess.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/systemd/systemd_api.h"
#include "daemon/systemd/unit_exit.h"

namespace opencode::daemon {

enum class StartState { kPending, kStarted, kFailed };
struct StartReading {
  StartState state = StartState::kPending;
  std::array<uint8_t, 16> invocation_id{};
  std::string why;  // for kFailed
};
// kPending while a job is queued for the unit; kStarted once no job is
// pending and the main process was started (it may have exited already);
// kFailed when the job ended without a main process.
StartReading ReadStart(const UnitSnapshot& s);

// Inactive or failed with no job pending: the unit's processes are gone.
bool IsUnitFinished(const UnitSnapshot& s);

// systemd no longer has the unit: answering GetAll it loaded a stub
// (LoadState "not-found"). A PTY unit is collected only once it ended
// inactive; a failed one stays loaded until the supervisor resets it.
bool IsUnitCollected(const UnitSnapshot& s);

// ExecMainCode/ExecMainStatus/Result of a finished unit (unit_exit.h; what
// they mean to the client: exit_report.h).
absl::StatusOr<UnitExit> ReadUnitExit(const UnitSnapshot& s);

}  // namespace opencode::daemon
