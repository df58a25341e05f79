// The window-size message: four bytes, cols(2) rows(2), big-endian. It is the
// payload of a RESIZE frame (client -> supervisor) and, after the 'W' kind
// byte, of a packet on a unit's channel (supervisor -> the launcher's
// monitor, common/channel_message.h). Invariant: only exactly kResizePayload
// bytes with both dimensions in 1..kMaxCols/kMaxRows parse; header-only and
// allocation-free, because the static launcher parses it in its monitor loop.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/errors.h"
#include "common/limits.h"

namespace opencode {

inline void EncodeSizeMessage(uint16_t cols, uint16_t rows, uint8_t out[limits::kResizePayload]) noexcept {
  out[0] = uint8_t(cols >> 8);
  out[1] = uint8_t(cols);
  out[2] = uint8_t(rows >> 8);
  out[3] = uint8_t(rows);
}

// kOk and *cols/*rows set; kFrameTooSmall/kFrameTooLarge for a wrong length;
// kBadSize for a dimension of 0 or above the maximum (outputs untouched).
inline ErrorCode ParseSizeMessage(const uint8_t* p, size_t n, uint16_t* cols, uint16_t* rows) noexcept {
  if (n < limits::kResizePayload) return ErrorCode::kFrameTooSmall;
  if (n > limits::kResizePayload) return ErrorCode::kFrameTooLarge;
  uint16_t c = uint16_t((p[0] << 8) | p[1]);
  uint16_t r = uint16_t((p[2] << 8) | p[3]);
  if (c < 1 || c > limits::kMaxCols || r < 1 || r > limits::kMaxRows) return ErrorCode::kBadSize;
  *cols = c;
  *rows = r;
  return ErrorCode::kOk;
}

}  // namespace opencode
