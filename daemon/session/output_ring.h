// The last bytes of one detachable session's output, addressed by absolute
// cursors (docs/PROTOCOL.md section 10.2: the session's first output byte is
// cursor 0). Invariants: first() <= next() and next() - first() <= capacity();
// a byte leaves only by being overwritten by a later Commit(); the storage is
// allocated whole at the first write (pages the kernel maps as they are
// touched) and never grows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace opencode::daemon {

class OutputRing {
 public:
  explicit OutputRing(size_t capacity) noexcept : capacity_(capacity) {}
  OutputRing(const OutputRing&) = delete;
  OutputRing& operator=(const OutputRing&) = delete;

  size_t capacity() const noexcept { return capacity_; }
  // The cursor of the oldest byte held, and of the next byte to be written.
  uint64_t first() const noexcept { return next_ > capacity_ ? next_ - capacity_ : 0; }
  uint64_t next() const noexcept { return next_; }
  // Heap bytes held (0 before the first write, then capacity()).
  size_t allocated() const noexcept { return data_ ? capacity_ : 0; }

  // Contiguous room for up to `max` bytes at next(). Once committed they
  // replace the oldest bytes when the ring is full. Empty if the storage
  // cannot be had.
  std::span<uint8_t> Writable(size_t max) noexcept;
  // Marks `n` bytes of the last Writable() span as written.
  void Commit(size_t n) noexcept { next_ += n; }
  // Contiguous bytes from cursor `from` (first() <= from <= next()), at most
  // `max`; the rest follows in a second call after a wrap.
  std::span<const uint8_t> Readable(uint64_t from, size_t max) const noexcept;

 private:
  const size_t capacity_;
  std::unique_ptr<uint8_t[]> data_;
  uint64_t next_ = 0;
};

}  // namespace opencode::daemon
