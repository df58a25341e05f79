// The one byte the supervisor writes on a PTY unit's stream to let its
// launcher go on (docs/SECURITY.md, "The read-back is a gate"). Invariant: the
// supervisor writes it only after systemd's read-back of the unit passed, and
// before any byte of the client's input; the launcher execs nothing before it
// has read exactly this byte.
#pragma once

namespace opencode {

inline constexpr char kLaunchGoByte = 'G';

}  // namespace opencode
