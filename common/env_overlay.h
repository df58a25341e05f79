// The application's environment overlay (docs/SECURITY.md "The application's
// environment"; docs/PROTOCOL.md sections 3 and 7). Owns: the one encoding
// the ENV frame and the unit channel's 'V' packet share, the name syntax and
// the deny list of names that describe the application's own unit.
// Invariants: a list is accepted only with every length inside the payload
// and inside limits.h, every entry NAME=VALUE with a valid name and no NUL,
// and no name twice; the supervisor and the launcher call the same checks.
// Header-only and allocation-free: the static launcher uses it before fork.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/errors.h"
#include "common/launch.h"
#include "common/limits.h"

namespace opencode {

// Encoding: count (u32 BE), then count x (len u32 BE, len bytes "NAME=VALUE").
inline constexpr size_t kEnvCountBytes = 4;
inline constexpr size_t kEnvLenBytes = 4;

namespace env_internal {
inline uint32_t GetU32(const uint8_t* p) noexcept {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}
inline void PutU32(uint8_t* p, uint32_t v) noexcept {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}
}  // namespace env_internal

// [A-Za-z_][A-Za-z0-9_]*, 1..kMaxEnvNameBytes bytes: what a POSIX shell can
// name, so no entry can be mistaken for another by anything that parses it.
inline bool ValidEnvName(std::string_view name) noexcept {
  if (name.empty() || name.size() > limits::kMaxEnvNameBytes) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && (i == 0 || c < '0' || c > '9')) return false;
  }
  return true;
}

// Names that describe the application's own unit (systemd sets them for the
// application's service, its socket or its triggering unit) or the launcher's
// internals. The application passes its whole process.env, which naturally
// holds them; in the command they would be false (another unit's invocation,
// journal stream, notify socket, directories, credentials) or dangerous to a
// program that trusts them (sd_notify to the application's NOTIFY_SOCKET,
// sd_listen_fds with LISTEN_PID/LISTEN_FDS, a watchdog). They are dropped,
// silently, by the supervisor and again by the launcher.
inline constexpr std::string_view kDeniedEnvNames[] = {
    // the unit's identity and its manager
    "INVOCATION_ID", "SYSTEMD_EXEC_PID", "MANAGERPID", "MAINPID", "PIDFILE",
    // channels to systemd and journald
    "JOURNAL_STREAM", "NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC", "FDSTORE",
    "MEMORY_PRESSURE_WATCH", "MEMORY_PRESSURE_WRITE",
    // socket activation: descriptors the command does not have
    "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "REMOTE_ADDR", "REMOTE_PORT",
    // the unit's directories and credentials
    "CREDENTIALS_DIRECTORY", "RUNTIME_DIRECTORY", "STATE_DIRECTORY", "CACHE_DIRECTORY",
    "LOGS_DIRECTORY", "CONFIGURATION_DIRECTORY",
    // ExecStop=/ExecStopPost= results of the application's unit
    "SERVICE_RESULT", "EXIT_CODE", "EXIT_STATUS",
    // the launcher's own carrier of the encoded argv
    kArgvEnvName,
};
// OnFailure=/OnSuccess= (MONITOR_*) and path/timer triggers (TRIGGER_*).
inline constexpr std::string_view kDeniedEnvPrefixes[] = {"MONITOR_", "TRIGGER_"};

inline bool DeniedEnvName(std::string_view name) noexcept {
  for (std::string_view d : kDeniedEnvNames)
    if (name == d) return true;
  for (std::string_view p : kDeniedEnvPrefixes)
    if (name.size() >= p.size() && name.substr(0, p.size()) == p) return true;
  return false;
}

// The name of an entry "NAME=VALUE" (empty if it has no '=').
inline std::string_view EnvEntryName(std::string_view entry) noexcept {
  size_t eq = entry.find('=');
  return eq == std::string_view::npos ? std::string_view() : entry.substr(0, eq);
}

// Calls f(entry) for each entry of a list CheckEnvList accepted.
template <typename F>
void ForEachEnvEntry(const uint8_t* p, size_t n, F&& f) noexcept {
  if (n < kEnvCountBytes) return;
  uint32_t count = env_internal::GetU32(p);
  size_t off = kEnvCountBytes;
  for (uint32_t i = 0; i < count && n - off >= kEnvLenBytes; ++i) {
    uint32_t len = env_internal::GetU32(p + off);
    off += kEnvLenBytes;
    if (n - off < len) return;
    f(std::string_view(reinterpret_cast<const char*>(p + off), len));
    off += len;
  }
}

// Strict check of an encoded list (the ENV payload, the 'V' packet after its
// kind byte): kOk; kEnvTooMany (count above kMaxEnvVars); kEnvTooLong (an
// entry above kMaxEnvEntryBytes, or all entries above kMaxEnvTotalBytes);
// kBadEnvName (the part before the first '=' is not a valid name); kBadEnv
// (truncated, trailing bytes, no '=', a NUL, or a name twice). Each bound is
// checked before the bytes it covers are looked at.
inline ErrorCode CheckEnvList(const uint8_t* p, size_t n) noexcept {
  if (n < kEnvCountBytes) return ErrorCode::kBadEnv;
  uint32_t count = env_internal::GetU32(p);
  if (count > limits::kMaxEnvVars) return ErrorCode::kEnvTooMany;
  size_t off = kEnvCountBytes, total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (n - off < kEnvLenBytes) return ErrorCode::kBadEnv;
    uint32_t len = env_internal::GetU32(p + off);
    off += kEnvLenBytes;
    if (len > limits::kMaxEnvEntryBytes) return ErrorCode::kEnvTooLong;
    total += len;
    if (total > limits::kMaxEnvTotalBytes) return ErrorCode::kEnvTooLong;
    if (n - off < len) return ErrorCode::kBadEnv;
    std::string_view entry(reinterpret_cast<const char*>(p + off), len);
    off += len;
    if (entry.find('\0') != std::string_view::npos) return ErrorCode::kBadEnv;
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) return ErrorCode::kBadEnv;
    if (!ValidEnvName(entry.substr(0, eq))) return ErrorCode::kBadEnvName;
  }
  if (off != n) return ErrorCode::kBadEnv;
  // No name twice (the structure is known good now). Quadratic, bounded:
  // count x kMaxEnvTotalBytes byte comparisons at most (67 M), in practice
  // a length compare per pair.
  ErrorCode result = ErrorCode::kOk;
  size_t index = 0;
  ForEachEnvEntry(p, n, [&](std::string_view entry) {
    std::string_view name = EnvEntryName(entry);
    size_t seen = 0;
    ForEachEnvEntry(p, n, [&](std::string_view other) {
      if (seen++ < index && EnvEntryName(other) == name) result = ErrorCode::kBadEnv;
    });
    ++index;
  });
  return result;
}

// Size of a list of `count` entries of `bytes` bytes in total.
inline constexpr size_t EnvListBytes(size_t count, size_t bytes) noexcept {
  return kEnvCountBytes + kEnvLenBytes * count + bytes;
}

// Appends to `out` (cap bytes at `out`) the entries of a checked list whose
// names are not denied, as a list; returns its size (never more than `n`).
inline size_t FilterEnvList(const uint8_t* p, size_t n, uint8_t* out) noexcept {
  uint32_t kept = 0;
  size_t off = kEnvCountBytes;
  ForEachEnvEntry(p, n, [&](std::string_view entry) {
    if (DeniedEnvName(EnvEntryName(entry))) return;
    env_internal::PutU32(out + off, uint32_t(entry.size()));
    memcpy(out + off + kEnvLenBytes, entry.data(), entry.size());
    off += kEnvLenBytes + entry.size();
    ++kept;
  });
  env_internal::PutU32(out, kept);
  return off;
}

}  // namespace opencode
