// Dropping every capability of the supervisor. Invariant: after
// DropAllCapabilities() succeeds, the effective, permitted, inheritable,
// ambient and bounding sets read back from /proc/self/status are all empty
// and no_new_privs is set; uid 0 remains only because systemd's D-Bus policy
// lets uid 0 manage units, which needs no capability.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace opencode::daemon {

struct CapabilitySets {
  uint64_t inheritable = 0, permitted = 0, effective = 0, bounding = 0, ambient = 0;
};

// Parses the Cap* lines of a /proc/<pid>/status text (pure; unit-tested).
absl::StatusOr<CapabilitySets> ParseCapabilities(std::string_view status);
absl::StatusOr<CapabilitySets> ReadOwnCapabilities();

// libcap-ng clear + apply of all sets, PR_SET_NO_NEW_PRIVS, then the proof.
absl::Status DropAllCapabilities();

}  // namespace opencode::daemon
