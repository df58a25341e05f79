// Snapshot readings (see unit_state.h).
#include "daemon/systemd/unit_state.h"

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"

namespace opencode::daemon {
namespace {

bool NoJob(const UnitSnapshot& s) {
  auto job = GetProp<JobRef>(s.unit, "Job");
  return job.ok() && job->id == 0;
}

}  // namespace

StartReading ReadStart(const UnitSnapshot& s) {
  StartReading out;
  if (!NoJob(s)) return out;  // the start job is still queued or running
  auto active = GetProp<std::string>(s.unit, "ActiveState");
  auto inv = GetProp<std::vector<uint8_t>>(s.unit, "InvocationID");
  auto started = GetProp<uint64_t>(s.service, "ExecMainStartTimestampMonotonic");
  out.state = StartState::kFailed;
  if (!active.ok() || !inv.ok() || !started.ok()) {
    out.why = "unit state properties missing";
    return out;
  }
  if (inv->size() != out.invocation_id.size()) {
    out.why = "InvocationID is not 16 bytes";
    return out;
  }
  // A command that already ran and exited is "started" too: its exit status
  // is reported after its output.
  if (*active != "active" && *started == 0) {
    out.why = absl::StrCat("start job ended with the unit ", *active, " and no main process");
    return out;
  }
  std::copy(inv->begin(), inv->end(), out.invocation_id.begin());
  out.state = StartState::kStarted;
  return out;
}

bool IsUnitFinished(const UnitSnapshot& s) {
  auto active = GetProp<std::string>(s.unit, "ActiveState");
  return active.ok() && (*active == "inactive" || *active == "failed") && NoJob(s);
}

bool IsUnitCollected(const UnitSnapshot& s) {
  auto load = GetProp<std::string>(s.unit, "LoadState");
  return load.ok() && *load == "not-found";
}

absl::StatusOr<UnitExit> ReadUnitExit(const UnitSnapshot& s) {
  UnitExit out;
  ASSIGN_OR_RETURN(out.exec_main_code, GetProp<int32_t>(s.service, "ExecMainCode"));
  ASSIGN_OR_RETURN(out.exec_main_status, GetProp<int32_t>(s.service, "ExecMainStatus"));
  ASSIGN_OR_RETURN(std::string result, GetProp<std::string>(s.service, "Result"));
  out.result = UnitResult::Parse(result);
  return out;
}

}  // namespace opencode::daemon
