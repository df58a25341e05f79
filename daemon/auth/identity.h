// The client unit's identity as systemd reports it, and the pure decision
// whether a peer is that unit's main process. Invariant: each property is
// taken only from its exact interface (Unit: ActiveState, SubState,
// InvocationID; Service: MainPID, ControlGroup); a ControlGroup offered via the
// Unit interface, a missing or mistyped property, or an InvocationID that is
// not exactly 16 bytes rejects the identity outright.
#pragma once

#include <sys/types.h>
#include <systemd/sd-bus.h>

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/errors.h"

namespace opencode::daemon {

struct Identity {
  std::string active_state;
  std::string sub_state;
  std::array<uint8_t, 16> invocation_id{};
  uint32_t main_pid = 0;
  std::string control_group;
};

// Decodes GetAll("org.freedesktop.systemd1.Unit") and
// GetAll("org.freedesktop.systemd1.Service") replies of the same unit. Both
// messages are read from their current position (rewind them first if needed).
absl::StatusOr<Identity> DecodeIdentity(sd_bus_message* unit_props, sd_bus_message* service_props);

// The answer of Manager.GetUnitByPIDFD(h) (systemd >= 253): (o, s, ay).
struct PidfdUnit {
  std::string path;
  std::string id;
  std::array<uint8_t, 16> invocation_id{};
};
absl::StatusOr<PidfdUnit> DecodeUnitByPidfd(sd_bus_message* reply);

// What the supervisor knows about the connecting process from the kernel.
struct PeerFacts {
  pid_t pid = 0;
  uid_t uid = 0;
  std::string cgroup;       // the "0::<path>" line of /proc/<pid>/cgroup
  bool alive_after = false; // its pidfd did not report exit after the answers
};

// kOk if the peer is the running main process of the unit described by
// `identity`; kRootRefused for uid 0; kUnauthenticated otherwise. `why` gets a
// one-line reason for the journal.
ErrorCode CheckIdentity(const Identity& identity, const PeerFacts& peer, std::string* why);

// Checks GetUnitByPIDFD's answer against the identity read from the unit.
ErrorCode CheckPidfdUnit(const PidfdUnit& by_pidfd, const Identity& identity, std::string* why);

// "0123…" lowercase hex of 16 bytes (InvocationID as systemd prints it).
std::string HexId(const std::array<uint8_t, 16>& id);

}  // namespace opencode::daemon
