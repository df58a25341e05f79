// The supervisor's D-Bus calls about PTY units, behind one small interface so
// unit tests can count and answer them (a mock only where a failure or a count
// must be observed; systemd itself is exercised in vm-tests). Invariant: every
// call is asynchronous and returns an owned Pending handle; destroying the
// handle cancels the callback.
#pragma once

#include <systemd/sd-bus.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/systemd/bus_call.h"
#include "daemon/systemd/bus_props.h"
#include "daemon/systemd/unit_properties.h"

namespace opencode::daemon {

// Both property sets of one unit, read by two GetAll calls.
struct UnitSnapshot {
  PropMap unit;
  PropMap service;
};

class SystemdApi {
 public:
  using Done = std::function<void(absl::Status)>;
  using SnapshotDone = std::function<void(absl::StatusOr<UnitSnapshot>)>;
  using GoneDone = std::function<void(absl::StatusOr<bool>)>;
  using ListDone = std::function<void(absl::StatusOr<std::vector<std::string>>)>;

  virtual ~SystemdApi() = default;

  // StartTransientUnit with the fixed property set. The message (which holds
  // duplicates of both descriptors) is released once sent (CallAsync may
  // queue it behind kMaxBusCallsInFlight calls), so the caller closing its own
  // copies leaves systemd's as the only ones.
  virtual absl::StatusOr<Pending> StartUnit(const UnitRequest& req, int stream_fd, int dir_fd,
                                            Done done) = 0;
  // GetAll(Unit) + GetAll(Service) of a PTY unit. A unit systemd already
  // collected reads as LoadState "not-found" (systemd loads a stub to answer).
  virtual absl::StatusOr<Pending> QueryUnit(const std::string& unit, SnapshotDone done) = 0;
  // GetUnit(unit): true on org.freedesktop.systemd1.NoSuchUnit (the proof a
  // unit is gone), false if systemd still has it loaded.
  virtual absl::StatusOr<Pending> QueryGone(const std::string& unit, GoneDone done) = 0;
  virtual absl::StatusOr<Pending> StopUnit(const std::string& unit, Done done) = 0;
  // ResetFailedUnit(unit): a failed unit is kept loaded (CollectMode=inactive)
  // until this; NoSuchUnit when it is not loaded.
  virtual absl::StatusOr<Pending> ResetFailedUnit(const std::string& unit, Done done) = 0;
  // SetUnitProperties(unit, runtime, [CPUWeight=weight]): what systemd writes
  // to the unit's cgroup, for as long as the unit is loaded; NoSuchUnit when
  // systemd no longer has the unit.
  virtual absl::StatusOr<Pending> SetCpuWeight(const std::string& unit, uint64_t weight,
                                               Done done) = 0;
  // ListUnitsByPatterns([], [kSessionUnitPattern]): names only, filtered to
  // IsSessionUnitName.
  virtual absl::StatusOr<Pending> ListSessionUnits(ListDone done) = 0;
};

// Calls go to `source`'s current connection (it outlives the result).
std::unique_ptr<SystemdApi> NewBusSystemdApi(const BusSource* source);

// Unit's D-Bus object path (/org/freedesktop/systemd1/unit/<escaped name>).
absl::StatusOr<std::string> UnitObjectPath(const std::string& unit);

}  // namespace opencode::daemon
