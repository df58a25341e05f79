// Decoding of org.freedesktop.DBus.Properties.GetAll replies (a{sv}) into a
// typed map. Invariant: every value keeps its exact D-Bus type (a string is
// never a uint32, an object path is never a string), so a consumer asking for
// a property of the wrong type gets "mistyped", not a conversion; a property
// name appearing twice makes the whole reply invalid.
#pragma once

#include <systemd/sd-bus.h>

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace opencode::daemon {

struct ObjectPath {
  std::string value;
  bool operator==(const ObjectPath&) const = default;
};
// One entry of ExecStart= as systemd reports it (a(sasbttttuii)); the
// timestamps and status fields are not part of what the supervisor requested,
// so only these three are kept.
struct ExecCommand {
  std::string path;
  std::vector<std::string> argv;
  bool ignore_failure = false;
  bool operator==(const ExecCommand&) const = default;
};
// The Unit's Job property (uo): id 0 means no job is pending.
struct JobRef {
  uint32_t id = 0;
  ObjectPath path;
  bool operator==(const JobRef&) const = default;
};
// A value of a type the supervisor never compares; kept so "present with the
// wrong type" is distinguishable from "absent".
struct OtherType {
  std::string signature;
  bool operator==(const OtherType&) const = default;
};

using PropValue = std::variant<bool, int32_t, uint32_t, int64_t, uint64_t, std::string,
                               ObjectPath, std::vector<std::string>, std::vector<uint8_t>,
                               std::vector<ExecCommand>, JobRef, OtherType>;
using PropMap = std::map<std::string, PropValue, std::less<>>;

// Reads one a{sv} from the current position of `m` (a GetAll reply body).
absl::StatusOr<PropMap> ReadPropertyMap(sd_bus_message* m);

// Names a consumer reads. systemd's GetAll of a service returns about 250
// properties and the supervisor reads about 30: the rest are skipped (their
// variants are still checked for well-formedness by sd-bus), not decoded into
// the map. The duplicate rule applies to wanted names.
using PropNameSet = absl::flat_hash_set<std::string_view>;
absl::StatusOr<PropMap> ReadPropertyMap(sd_bus_message* m, const PropNameSet& wanted);

// Typed lookups: NotFound if absent, InvalidArgument if present with another type.
template <typename T>
absl::StatusOr<T> GetProp(const PropMap& props, std::string_view name);

// Human-readable value for logs and mismatch reports (never used for PTY bytes).
std::string DescribeValue(const PropValue& v);

}  // namespace opencode::daemon
