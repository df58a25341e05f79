// Bridging std::string_view and Debian bookworm's abseil, which is built with
// its own absl::string_view (not an alias of std::string_view). Invariant:
// these are pure views over the same bytes; nothing is copied or owned.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace opencode::daemon {

inline absl::string_view AV(std::string_view s) noexcept { return {s.data(), s.size()}; }
inline std::string_view SV(absl::string_view s) noexcept { return {s.data(), s.size()}; }

}  // namespace opencode::daemon
