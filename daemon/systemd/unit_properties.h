// The fixed property set of a PTY unit: one table that both builds the
// StartTransientUnit request and verifies systemd's read-back, so what is
// requested and what is checked cannot drift apart. Invariant: a session runs
// only if every readable property reads back exactly as requested
// (docs/SECURITY.md lists each with its reason).
#pragma once

#include <sys/types.h>
#include <systemd/sd-bus.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/systemd/bus_props.h"

namespace opencode::daemon {

struct UnitRequest {
  std::string session_id;  // 32 lowercase hex
  std::string unit_name;   // opencode-pty-<session_id>.service
  uid_t uid = 0;           // the authenticated peer's uid (never 0)
  uint16_t cols = 0;
  uint16_t rows = 0;
  std::vector<std::string> argv;  // raw bytes from the START frame
};

enum class Interface { kUnit, kService };

struct PropertySpec {
  const char* name;        // property name (request and read-back)
  PropValue value;         // requested value
  Interface iface;         // interface it reads back from
  bool request = true;     // false: read-back only (a consequence of the request)
};

// The table for `req`. Descriptor properties are not in it: they have no
// read-back value of their own (see AppendStartTransientUnit and
// VerifyReadBack).
std::vector<PropertySpec> BuildPropertySpecs(const UnitRequest& req);

// Appends name, mode and the whole property set (including the three
// descriptors; sd-bus duplicates them into the message) to a
// StartTransientUnit call.
absl::Status AppendStartTransientUnit(sd_bus_message* m, const UnitRequest& req, int stream_fd,
                                      int dir_fd);

// The properties a snapshot of a PTY unit keeps from GetAll of `iface`:
// every spec's read-back name, Refs, and what unit_state.cc reads (Job,
// ActiveState, InvocationID; ExecMainStartTimestampMonotonic, ExecMainCode,
// ExecMainStatus, Result). Everything else in the reply is skipped.
const PropNameSet& SnapshotPropertyNames(Interface iface);

// Compares the read-back of every spec, plus: Refs is empty (nothing keeps the
// unit loaded past its end), the unit is loaded, transient and has our name.
// FailedPrecondition names the first property that differs.
absl::Status VerifyReadBack(const std::vector<PropertySpec>& specs, const PropMap& unit,
                            const PropMap& service);

// The unit name for a session id.
std::string SessionUnitName(std::string_view session_id);
// True for opencode-pty-<32 lowercase hex>.service.
bool IsSessionUnitName(std::string_view name);

}  // namespace opencode::daemon
