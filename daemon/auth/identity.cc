// Pure identity decoding and checking (see identity.h). No I/O here: the
// caller supplies the two GetAll replies and the kernel facts, so every
// decision is unit-tested with hand-built messages and fuzzed.
#include "daemon/auth/identity.h"

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/systemd/bus_props.h"
#include "daemon/systemd/constants.h"

namespace opencode::daemon {

absl::StatusOr<Identity> DecodeIdentity(sd_bus_message* unit_props, sd_bus_message* service_props) {
  if (unit_props == nullptr || service_props == nullptr)
    return absl::InvalidArgumentError("identity: reply missing");
  // Only what is checked below is decoded; ControlGroup is wanted from the
  // Unit interface too, so offering it there is still seen and refused.
  static const auto* kUnitNames =
      new PropNameSet{"ControlGroup", "ActiveState", "SubState", "InvocationID"};
  static const auto* kServiceNames = new PropNameSet{"MainPID", "ControlGroup"};
  ASSIGN_OR_RETURN(PropMap unit, ReadPropertyMap(unit_props, *kUnitNames));
  ASSIGN_OR_RETURN(PropMap service, ReadPropertyMap(service_props, *kServiceNames));

  // systemd has never exposed ControlGroup on the Unit interface (252, 257);
  // a reply that does is not systemd's Unit interface, so nothing in it counts.
  if (unit.contains("ControlGroup"))
    return absl::InvalidArgumentError("identity: ControlGroup offered via the Unit interface");

  Identity id;
  ASSIGN_OR_RETURN(id.active_state, GetProp<std::string>(unit, "ActiveState"));
  ASSIGN_OR_RETURN(id.sub_state, GetProp<std::string>(unit, "SubState"));
  ASSIGN_OR_RETURN(std::vector<uint8_t> inv, GetProp<std::vector<uint8_t>>(unit, "InvocationID"));
  if (inv.size() != id.invocation_id.size())
    return absl::InvalidArgumentError(
        absl::StrCat("identity: InvocationID has ", inv.size(), " bytes, not 16"));
  std::copy(inv.begin(), inv.end(), id.invocation_id.begin());
  ASSIGN_OR_RETURN(id.main_pid, GetProp<uint32_t>(service, "MainPID"));
  ASSIGN_OR_RETURN(id.control_group, GetProp<std::string>(service, "ControlGroup"));
  return id;
}

absl::StatusOr<PidfdUnit> DecodeUnitByPidfd(sd_bus_message* reply) {
  const char* path = nullptr;
  const char* unit_id = nullptr;
  int r = sd_bus_message_read(reply, "os", &path, &unit_id);
  if (r <= 0) return absl::InvalidArgumentError("GetUnitByPIDFD: malformed reply");
  const void* bytes = nullptr;
  size_t n = 0;
  r = sd_bus_message_read_array(reply, 'y', &bytes, &n);
  if (r < 0) return absl::InvalidArgumentError("GetUnitByPIDFD: malformed InvocationID");
  PidfdUnit out;
  if (n != out.invocation_id.size())
    return absl::InvalidArgumentError(
        absl::StrCat("GetUnitByPIDFD: InvocationID has ", n, " bytes, not 16"));
  out.path = path;
  out.id = unit_id;
  std::copy_n(static_cast<const uint8_t*>(bytes), n, out.invocation_id.begin());
  return out;
}

ErrorCode CheckIdentity(const Identity& identity, const PeerFacts& peer, std::string* why) {
  if (peer.uid == 0) {
    *why = "peer uid is 0";
    return ErrorCode::kRootRefused;
  }
  if (identity.active_state != "active" || identity.sub_state != "running") {
    *why = absl::StrCat(kClientUnit, " is ", identity.active_state, "/", identity.sub_state,
                        ", not active/running");
    return ErrorCode::kUnauthenticated;
  }
  if (identity.main_pid == 0 || peer.pid <= 0 ||
      static_cast<uint32_t>(peer.pid) != identity.main_pid) {
    *why = absl::StrCat("peer pid ", peer.pid, " is not MainPID ", identity.main_pid);
    return ErrorCode::kUnauthenticated;
  }
  if (identity.control_group.empty() || peer.cgroup != identity.control_group) {
    *why = absl::StrCat("peer cgroup \"", peer.cgroup, "\" is not ControlGroup \"",
                        identity.control_group, "\"");
    return ErrorCode::kUnauthenticated;
  }
  // The pidfd (from SO_PEERPIDFD: the process that called connect()) alive
  // after the answers means that process held the pid above from connect()
  // until systemd had answered, so the pid was not reused in between. A pidfd
  // opened from the pid later would prove nothing (docs/SECURITY.md).
  if (!peer.alive_after) {
    *why = "peer exited during authentication";
    return ErrorCode::kUnauthenticated;
  }
  return ErrorCode::kOk;
}

ErrorCode CheckPidfdUnit(const PidfdUnit& by_pidfd, const Identity& identity, std::string* why) {
  if (by_pidfd.id != kClientUnit) {
    *why = absl::StrCat("peer pidfd belongs to ", by_pidfd.id, ", not ", kClientUnit);
    return ErrorCode::kUnauthenticated;
  }
  if (by_pidfd.invocation_id != identity.invocation_id) {
    *why = "peer pidfd's InvocationID differs from the unit's";
    return ErrorCode::kUnauthenticated;
  }
  return ErrorCode::kOk;
}

std::string HexId(const std::array<uint8_t, 16>& id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (uint8_t b : id) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

}  // namespace opencode::daemon
