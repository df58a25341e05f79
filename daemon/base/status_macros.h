// Early-return helpers for absl::Status (abseil 20220623 ships none).
// Invariant: they only return; they never log, so the caller that decides
// logs once.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/base/absl_compat.h"

#define OPENCODE_CONCAT_INNER_(a, b) a##b
#define OPENCODE_CONCAT_(a, b) OPENCODE_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status _opencode_status = (expr);  \
    if (!_opencode_status.ok()) return _opencode_status; \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(*tmp)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(OPENCODE_CONCAT_(_opencode_statusor_, __LINE__), lhs, expr)

namespace opencode::daemon {

// "<what>: <strerror>" for a failed syscall; errno is passed explicitly because
// the callers read it right after the call.
inline absl::Status Errno(int err, std::string_view what) { return absl::ErrnoToStatus(err, AV(what)); }

// sd-* functions return -errno.
inline absl::Status SdError(int negative_errno, std::string_view what) {
  return absl::ErrnoToStatus(-negative_errno, AV(what));
}

}  // namespace opencode::daemon
