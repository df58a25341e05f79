// Bounded byte FIFO (see byte_queue.h). Compaction is a memmove of at most
// `capacity` bytes and happens only when the tail would otherwise run out of
// room, so each byte is moved at most once per trip through the queue.
#include "daemon/session/byte_queue.h"

#include <cstring>
#include <new>

namespace opencode::daemon {

std::span<uint8_t> ByteQueue::writable(size_t want) noexcept {
  if (want == 0 || free() == 0) return {};
  if (!storage_) {
    storage_.reset(new (std::nothrow) uint8_t[capacity_]);
    if (!storage_) return {};
  }
  if (capacity_ - tail_ < want && head_ > 0) {
    std::memmove(storage_.get(), storage_.get() + head_, tail_ - head_);
    tail_ -= head_;
    head_ = 0;
  }
  size_t n = capacity_ - tail_;
  if (n > want) n = want;
  return {storage_.get() + tail_, n};
}

bool ByteQueue::append(std::span<const uint8_t> bytes) noexcept {
  if (bytes.size() > free()) return false;
  if (bytes.empty()) return true;
  std::span<uint8_t> dst = writable(bytes.size());
  if (dst.size() < bytes.size()) return false;
  std::memcpy(dst.data(), bytes.data(), bytes.size());
  commit(bytes.size());
  return true;
}

void ByteQueue::consume(size_t n) noexcept {
  head_ += n;
  if (head_ >= tail_) clear();
}

void ByteQueue::clear() noexcept {
  head_ = tail_ = 0;
  storage_.reset();
}

}  // namespace opencode::daemon
