// See output_ring.h.
#include "daemon/session/output_ring.h"

#include <algorithm>
#include <new>

namespace opencode::daemon {

std::span<uint8_t> OutputRing::Writable(size_t max) noexcept {
  if (capacity_ == 0) return {};
  if (!data_) {
    data_.reset(new (std::nothrow) uint8_t[capacity_]);
    if (!data_) return {};
  }
  size_t at = static_cast<size_t>(next_ % capacity_);
  return {data_.get() + at, std::min(max, capacity_ - at)};
}

std::span<const uint8_t> OutputRing::Readable(uint64_t from, size_t max) const noexcept {
  if (!data_ || from < first() || from >= next_) return {};
  size_t at = static_cast<size_t>(from % capacity_);
  uint64_t held = next_ - from;
  size_t n = std::min({max, capacity_ - at, static_cast<size_t>(std::min<uint64_t>(held, capacity_))});
  return {data_.get() + at, n};
}

}  // namespace opencode::daemon
