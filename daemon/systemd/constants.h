// Compile-time names the supervisor trusts: the one client unit it serves, the
// one launcher it starts, and the names of the units it creates. Invariant:
// none of these comes from a peer, a file or the environment; changing one is a
// source change that a review (and the readiness marker's source hash) sees.
#pragma once

#include <string_view>

namespace opencode::daemon {

// The application whose MainPID alone may open PTY sessions (docs/SECURITY.md).
inline constexpr char kClientUnit[] = "opencode-v2.service";
// The reviewed, root-owned launcher every PTY unit executes (SPEC section 2).
inline constexpr char kLauncherPath[] = "/usr/local/libexec/opencode-pty-launcher";
// The slice every PTY unit is placed in (its TasksMax bounds all sessions).
inline constexpr char kSessionSlice[] = "opencode-pty.slice";
// Session units are opencode-pty-<32 lowercase hex>.service; the pattern is what
// start-up recovery lists.
inline constexpr std::string_view kSessionUnitPrefix = "opencode-pty-";
inline constexpr std::string_view kSessionUnitSuffix = ".service";
inline constexpr char kSessionUnitPattern[] = "opencode-pty-*.service";
// Hex digits of a session id (16 random bytes).
inline constexpr size_t kSessionIdHexChars = 32;

// systemd's bus names (fixed by systemd's D-Bus API).
inline constexpr char kSystemdService[] = "org.freedesktop.systemd1";
inline constexpr char kSystemdPath[] = "/org/freedesktop/systemd1";
inline constexpr char kManagerInterface[] = "org.freedesktop.systemd1.Manager";
inline constexpr char kUnitInterface[] = "org.freedesktop.systemd1.Unit";
inline constexpr char kServiceInterface[] = "org.freedesktop.systemd1.Service";
inline constexpr char kPropertiesInterface[] = "org.freedesktop.DBus.Properties";
inline constexpr char kUnitPathPrefix[] = "/org/freedesktop/systemd1/unit";

}  // namespace opencode::daemon
