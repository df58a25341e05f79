// The packets of a session's unit channel: the anonymous AF_UNIX
// SOCK_SEQPACKET pair between the supervisor and the launcher's monitor inside
// the PTY unit (docs/SECURITY.md "The unit channel"). One packet = one message;
// the first byte is its kind and the length is fixed per kind.
//   supervisor -> unit:  'V' list             the command's environment overlay, vetted
//                                             (common/env_overlay.h); exactly one, first,
//                                             written before the unit starts; read once
//                                             by --exec before it forks, never by the monitor
//                        'W' cols(2) rows(2)  a window size (the RESIZE payload)
//                        'K' signo(1)         a signal for the command (allowlist)
//   unit -> supervisor:  'E' pid(4)           the command's execve succeeded
//                        'X' how(1) value(1)  the command ended (its wait status)
//                        'F' status(1)        the launcher failed; the command never ran
// Invariant: a packet parses only with its exact length and every field in
// range ('V': CheckEnvList); header-only and allocation-free, because the
// static launcher parses 'V' once and 'W'/'K' in its monitor loop, and the
// supervisor the unit's kinds.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "common/errors.h"
#include "common/frame.h"
#include "common/limits.h"
#include "common/size_message.h"

namespace opencode {

enum class ChannelKind : uint8_t {
  kEnvironment = 'V',
  kWindowSize = 'W',
  kSignal = 'K',
  kExecuted = 'E',
  kExited = 'X',
  kLaunchFailed = 'F',
  // The monitor's answer to a 'K': its kill() of the command succeeded.
  kSignalDelivered = 'D',
};

// How the command ended, as its parent's waitid() saw it.
enum class ExitHow : uint8_t {
  kExited = 'x',  // value = exit status 0..255
  kKilled = 'k',  // value = signal number 1..64
  kDumped = 'c',  // value = signal number 1..64, core dumped
};

inline constexpr size_t kChannelSizeBytes = 1 + limits::kResizePayload;
inline constexpr size_t kChannelSignalBytes = 2;
inline constexpr size_t kChannelExecutedBytes = 5;
inline constexpr size_t kChannelExitedBytes = 3;
inline constexpr size_t kChannelFailedBytes = 2;
inline constexpr size_t kChannelDeliveredBytes = 2;
// The longest packet of either direction but 'V': receivers read into one
// byte more, so a longer packet shows as too large instead of being cut
// silently. 'V' is read once, by --exec, into kMaxEnvPacketBytes + 1.
inline constexpr size_t kChannelMaxBytes = 5;
// A 'V' packet with no variable: the kind and a count of zero.
inline constexpr size_t kChannelEmptyEnvBytes = 5;
// Signal numbers the kernel knows (SIGRTMAX on Linux is 64).
inline constexpr uint8_t kMaxSignalNumber = 64;

struct ChannelMessage {
  ChannelKind kind = ChannelKind::kWindowSize;
  uint16_t cols = 0, rows = 0;  // kWindowSize
  uint8_t signo = 0;            // kSignal; kExited with kKilled/kDumped
  pid_t pid = 0;                // kExecuted
  ExitHow how = ExitHow::kExited;
  uint8_t status = 0;           // kExited with kExited; kLaunchFailed
};

inline void EncodeEmptyEnvironment(uint8_t out[kChannelEmptyEnvBytes]) noexcept {
  out[0] = uint8_t(ChannelKind::kEnvironment);
  out[1] = out[2] = out[3] = out[4] = 0;
}
inline void EncodeWindowSize(uint16_t cols, uint16_t rows, uint8_t out[kChannelSizeBytes]) noexcept {
  out[0] = uint8_t(ChannelKind::kWindowSize);
  EncodeSizeMessage(cols, rows, out + 1);
}
inline void EncodeSignal(uint8_t signo, uint8_t out[kChannelSignalBytes]) noexcept {
  out[0] = uint8_t(ChannelKind::kSignal);
  out[1] = signo;
}
inline void EncodeExecuted(pid_t pid, uint8_t out[kChannelExecutedBytes]) noexcept {
  uint32_t v = uint32_t(pid);
  out[0] = uint8_t(ChannelKind::kExecuted);
  out[1] = uint8_t(v >> 24);
  out[2] = uint8_t(v >> 16);
  out[3] = uint8_t(v >> 8);
  out[4] = uint8_t(v);
}
inline void EncodeExited(ExitHow how, uint8_t value, uint8_t out[kChannelExitedBytes]) noexcept {
  out[0] = uint8_t(ChannelKind::kExited);
  out[1] = uint8_t(how);
  out[2] = value;
}
inline void EncodeLaunchFailed(uint8_t status, uint8_t out[kChannelFailedBytes]) noexcept {
  out[0] = uint8_t(ChannelKind::kLaunchFailed);
  out[1] = status;
}
inline void EncodeSignalDelivered(uint8_t signo, uint8_t out[kChannelDeliveredBytes]) noexcept {
  out[0] = uint8_t(ChannelKind::kSignalDelivered);
  out[1] = signo;
}

namespace channel_internal {
inline ErrorCode Length(size_t n, size_t want) noexcept {
  if (n < want) return ErrorCode::kFrameTooSmall;
  if (n > want) return ErrorCode::kFrameTooLarge;
  return ErrorCode::kOk;
}
}  // namespace channel_internal

// What the monitor accepts: 'W' (sizes 1..1000) and 'K' (a signal of the
// SIGNAL frame's allowlist: the launcher re-checks what the supervisor did).
// Never 'V': the one environment packet was read before the fork.
inline ErrorCode ParseToUnit(const uint8_t* p, size_t n, ChannelMessage* m) noexcept {
  if (n == 0) return ErrorCode::kFrameTooSmall;
  ErrorCode e = ErrorCode::kOk;
  switch (ChannelKind(p[0])) {
    case ChannelKind::kWindowSize: {
      uint16_t cols = 0, rows = 0;
      if ((e = ParseSizeMessage(p + 1, n - 1, &cols, &rows)) != ErrorCode::kOk) return e;
      m->kind = ChannelKind::kWindowSize;
      m->cols = cols;
      m->rows = rows;
      return ErrorCode::kOk;
    }
    case ChannelKind::kSignal:
      if ((e = channel_internal::Length(n, kChannelSignalBytes)) != ErrorCode::kOk) return e;
      if (SignalName(p[1]).empty()) return ErrorCode::kBadSignal;
      m->kind = ChannelKind::kSignal;
      m->signo = p[1];
      return ErrorCode::kOk;
    default:
      return ErrorCode::kUnknownType;
  }
}

// What the supervisor accepts from inside the unit: 'E' with a pid > 1 that
// fits pid_t, 'X' with a known `how` and a value in range, 'F' with a status,
// 'D' with a signal of the allowlist.
inline ErrorCode ParseFromUnit(const uint8_t* p, size_t n, ChannelMessage* m) noexcept {
  if (n == 0) return ErrorCode::kFrameTooSmall;
  ErrorCode e = ErrorCode::kOk;
  switch (ChannelKind(p[0])) {
    case ChannelKind::kExecuted: {
      if ((e = channel_internal::Length(n, kChannelExecutedBytes)) != ErrorCode::kOk) return e;
      uint32_t v = (uint32_t(p[1]) << 24) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 8) | p[4];
      if (v <= 1 || v > 0x3fffffffu) return ErrorCode::kBadField;  // PID_MAX_LIMIT is 2^22
      m->kind = ChannelKind::kExecuted;
      m->pid = pid_t(v);
      return ErrorCode::kOk;
    }
    case ChannelKind::kExited:
      if ((e = channel_internal::Length(n, kChannelExitedBytes)) != ErrorCode::kOk) return e;
      switch (ExitHow(p[1])) {
        case ExitHow::kExited:
          m->status = p[2];
          break;
        case ExitHow::kKilled:
        case ExitHow::kDumped:
          if (p[2] < 1 || p[2] > kMaxSignalNumber) return ErrorCode::kBadField;
          m->signo = p[2];
          break;
        default:
          return ErrorCode::kBadField;
      }
      m->kind = ChannelKind::kExited;
      m->how = ExitHow(p[1]);
      return ErrorCode::kOk;
    case ChannelKind::kLaunchFailed:
      if ((e = channel_internal::Length(n, kChannelFailedBytes)) != ErrorCode::kOk) return e;
      m->kind = ChannelKind::kLaunchFailed;
      m->status = p[1];
      return ErrorCode::kOk;
    case ChannelKind::kSignalDelivered:
      if ((e = channel_internal::Length(n, kChannelDeliveredBytes)) != ErrorCode::kOk) return e;
      if (SignalName(p[1]).empty()) return ErrorCode::kBadSignal;
      m->kind = ChannelKind::kSignalDelivered;
      m->signo = p[1];
      return ErrorCode::kOk;
    default:
      return ErrorCode::kUnknownType;
  }
}

}  // namespace opencode
