// A bounded FIFO of bytes. Invariant: it never holds, and never allocates,
// more than its fixed capacity; storage is allocated on first use and freed
// when the queue drains, so an idle session costs no buffer memory.
// Backpressure is the caller's job: it stops reading when free() is too small.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace opencode::daemon {

class ByteQueue {
 public:
  explicit ByteQueue(size_t capacity) : capacity_(capacity) {}
  ByteQueue(const ByteQueue&) = delete;
  ByteQueue& operator=(const ByteQueue&) = delete;

  size_t size() const noexcept { return tail_ - head_; }
  bool empty() const noexcept { return head_ == tail_; }
  size_t capacity() const noexcept { return capacity_; }
  size_t free() const noexcept { return capacity_ - size(); }
  // Bytes of heap this queue holds right now (0 or capacity).
  size_t allocated() const noexcept { return storage_ ? capacity_ : 0; }

  std::span<const uint8_t> readable() const noexcept {
    return {storage_.get() + head_, tail_ - head_};
  }
  // Contiguous space for up to `want` bytes at the tail (compacting first);
  // empty if the queue is full or storage cannot be had.
  std::span<uint8_t> writable(size_t want) noexcept;
  // Marks `n` bytes of the last writable() span as filled.
  void commit(size_t n) noexcept { tail_ += n; }
  // All-or-nothing append; false if it does not fit.
  bool append(std::span<const uint8_t> bytes) noexcept;
  void consume(size_t n) noexcept;
  void clear() noexcept;

 private:
  const size_t capacity_;
  std::unique_ptr<uint8_t[]> storage_;
  size_t head_ = 0;
  size_t tail_ = 0;
};

}  // namespace opencode::daemon
